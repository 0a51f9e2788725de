# The course's runner. Two commands matter (see README.md):
#   make lab    create .venv if missing, install what a learner needs, write the labs' student
#               versions into my_labs/ (tools/dist/studentlabs.py; never over your own), open JupyterLab
#   make test   create .venv if missing (or add the test and book tools to the learner's), then
#               run every check CI runs
#   make student                  student versions of the labs into build/student (nbgrader)
#   make grade SUBMISSIONS=dir    grade submitted labs (sandboxed, checks out of process), xv6-style report
#   make student-repo DEST=dir    what a class hands out (no solutions, no instructor/), scanned
# One environment, two stamps: `make lab` installs the learner set (the course, JupyterLab, Numba,
# plotly, ipywidgets, hypothesis for Lab 4; CuPy only where an NVIDIA driver is found) and writes
# $(VENV)/.course-lab; `make test` adds the test and book extras and writes $(VENV)/.course-test.
# Variables:
#   PYTHON=python3        interpreter that creates the environment
#   VENV=.venv            where the environment lives
#   CUDA_EXTRA=auto       CuPy wheel, and numba-cuda's, with the CUDA libraries both load at run time
#                         (from PyPI: no CUDA toolkit needed, only the driver): auto (where an NVIDIA driver is found:
#                         nvidia-smi on PATH, /proc/driver/nvidia/version or WSL's libcuda: cuda13 for a
#                         driver 580 or newer, which runs CUDA 13, with CUPTI for the channel timelines
#                         of Chapters 3b, 7 and 9; cuda12 for an older or unknown one; none elsewhere),
#                         cuda12, cuda13, none, or empty when the Python given by PYTHON already
#                         has CuPy: its packages are then reused
#   WHEELHOUSE=dir [dir]  install offline from these wheel folders (see `make wheelhouse`)
#   BROWSER_TESTS=1       0 leaves the headless-Chromium tests out of `make test` (it says so)
#   KERNEL_LAB_TESTS=1    0 leaves the kernel lab's VM tests (Linux under QEMU) out of `make test` (it says so)
#   MATRIX_MODE=auto      `make matrix`: auto, live, replay (COURSE_MODE=replay) or hidden
#                         (CUDA_VISIBLE_DEVICES= empty); MATRIX_OUT=file.json is its result
#   COURSE_REPO_URL=...   the repository the site's launch buttons open (see book/teaching.md)
#   BOOK_LABS=student     the labs `make book` publishes: student versions (default; or the environment's
#                         COURSE_BOOK_LABS), or `solution` for an instructor's private site
#   RUN_STUDENT=1         `make test-labs` runs the labs' student versions to the end (`make test` sets 0:
#                         its `make book` runs them once and tests/site/test_executed_notebooks.py checks that run)
#   BOOK_FRESH=0          1 empties the book's execution cache before `make book` (`make test` sets it:
#                         each chapter executes once per run, on the code as it is)
PYTHON ?= python3
VENV ?= .venv
CUDA_EXTRA ?= auto
# where `CUDA_EXTRA=auto` looks for an NVIDIA driver: nvidia-smi on PATH, or one of these files
# (the Linux driver's proc file; WSL 2's CUDA driver library)
NVIDIA_SMI ?= nvidia-smi
NVIDIA_DRIVER_FILES ?= /proc/driver/nvidia/version /usr/lib/wsl/lib/libcuda.so.1
WHEELHOUSE ?=
LAB_FLAGS ?=
PORT ?= 8888
BROWSER_TESTS ?= 1
KERNEL_LAB_TESTS ?= 1
STUDENT_DIR ?= build/student
SUBMISSIONS ?=
BOOK_LABS ?=

comma := ,
NVIDIA_FOUND := $(or $(wildcard $(NVIDIA_DRIVER_FILES)),$(shell command -v "$(NVIDIA_SMI)" 2>/dev/null))
# the driver's major version, from the driver files' "Kernel Module" line or nvidia-smi (empty when neither says)
NVIDIA_DRIVER_MAJOR := $(if $(NVIDIA_FOUND),$(shell { grep -ash 'Kernel Module' $(wildcard $(NVIDIA_DRIVER_FILES)) /dev/null \
	| grep -o ' [0-9][0-9][0-9]*\.[0-9]' | cut -d. -f1 | tr -d ' '; "$(NVIDIA_SMI)" --query-gpu=driver_version \
	--format=csv,noheader 2>/dev/null | cut -d. -f1; } | grep -E '^[0-9]+$$' | head -n1))
# CUDA 13 needs a 580 or newer driver; an older or unknown one gets CUDA 12 (no CUPTI: cupti-python needs CUDA 13)
AUTO_CUDA := $(if $(NVIDIA_DRIVER_MAJOR),$(if $(shell [ "$(NVIDIA_DRIVER_MAJOR)" -ge 580 ] && echo y),cuda13,cuda12),cuda12)
# the CuPy extra actually installed: auto picks AUTO_CUDA where a driver is found; none and empty install none
CUPY_EXTRA := $(if $(filter auto,$(CUDA_EXTRA)),$(if $(NVIDIA_FOUND),$(AUTO_CUDA)),$(filter-out none,$(CUDA_EXTRA)))
ifeq ($(CUDA_EXTRA),)
CUPY_NOTE := reused from $(PYTHON) (CUDA_EXTRA= empty)
else ifneq ($(CUPY_EXTRA),)
CUPY_NOTE := the $(CUPY_EXTRA) extra (CUDA_EXTRA=$(CUDA_EXTRA)$(if $(filter auto,$(CUDA_EXTRA)),: an NVIDIA driver was found$(if $(NVIDIA_DRIVER_MAJOR), (version $(NVIDIA_DRIVER_MAJOR)))))
else ifeq ($(CUDA_EXTRA),auto)
CUPY_NOTE := none, no NVIDIA driver found (CUDA_EXTRA=auto): the notebooks replay recorded data; CUDA_EXTRA=cuda12 installs CuPy anyway
else
CUPY_NOTE := none (CUDA_EXTRA=$(CUDA_EXTRA))
endif
LAB_EXTRAS := lab$(if $(CUPY_EXTRA),$(comma)$(CUPY_EXTRA))
EXTRAS := lab,test,book$(if $(CUPY_EXTRA),$(comma)$(CUPY_EXTRA))
BIN := $(VENV)/bin
LAB_STAMP := $(VENV)/.course-lab
STAMP := $(VENV)/.course-test
PIP_FROM := $(if $(strip $(WHEELHOUSE)),--no-index $(addprefix --find-links ,$(WHEELHOUSE)))
INHERIT := $(if $(CUDA_EXTRA),,--inherit)
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root)
NOTEBOOKS := $(sort $(wildcard notebooks/*.ipynb labs/*.ipynb))

.PHONY: lab test test-colab venv venv-lab test-unit test-lint test-notebooks test-labs test-lab test-browser test-hub hub student \
	student-repo grade class-time book book-static bwcheck browser-tests-left-out wheelhouse clean matrix matrix-table \
	kernel-lab test-kernel-lab kernel-lab-tests-left-out shown

# $(call install,extras): create the environment if missing, install the course with those extras
# (pip adds only what is missing, so `make test` after `make lab` installs just the test and book tools).
# --no-compile: pip would otherwise write bytecode for every module of every package (about 130 MB
# of a learner's environment, most never imported); Python writes it on first import instead.
PIP_INSTALL = $(BIN)/python -m pip install -q --no-compile
define install
	$(PYTHON) -m tools.env.mkvenv $(VENV) $(INHERIT)
	$(if $(PIP_FROM),,$(PIP_INSTALL) --upgrade pip)
	$(if $(PIP_FROM),$(PIP_INSTALL) $(PIP_FROM) "setuptools>=77" wheel)
	$(PIP_INSTALL) $(PIP_FROM) $(if $(PIP_FROM),--no-build-isolation) -e ".[$(1)]"
	@echo "course environment $(VENV): extras $(1); CuPy: $(CUPY_NOTE)"
endef

# The learner's environment (`make lab`).
$(LAB_STAMP): pyproject.toml
	$(call install,$(LAB_EXTRAS))
	touch $@

# Everything `make test` needs: the learner's set plus the test and book extras.
$(STAMP): pyproject.toml
	$(call install,$(EXTRAS))
	touch $(LAB_STAMP) $@

venv-lab: $(LAB_STAMP)

venv: $(STAMP)

# the labs' student versions (solutions removed) for the learner, in my_labs/; labs/ keeps the
# instructor versions. An existing my_labs/labN_*.ipynb is the learner's work and is kept.
MY_LABS ?= my_labs
lab: $(LAB_STAMP)
	$(BIN)/python -m tools.dist.studentlabs --out "$(MY_LABS)"
	$(BIN)/jupyter lab --notebook-dir="$(CURDIR)" --port=$(PORT) $(ROOT_FLAG) $(LAB_FLAGS) notebooks/00_your_machine.ipynb

# Everything CI runs. Each step prints its own summary; the first failure stops the run.
# A bare `pytest` skips a test whose prerequisite (Chromium, QEMU, npm, a built site) is absent,
# naming it (tests/prerequisites.py); COURSE_REQUIRE makes each one this run includes a failure instead.
REQUIRE := built_site$(if $(filter 1,$(BROWSER_TESTS)),$(comma)browser$(comma)hub)$(if $(filter 1,$(KERNEL_LAB_TESTS)),$(comma)kernel_vm)
# Each step is timed (tools/env/timesteps.py: wall, and the CPU its processes used), so a slow run
# says where its time went; the first failure stops the run. After the lint and the kernel lab's
# bundle, two lanes run side by side (`//`): the unit tests, labs and hub in one; the kernel lab's
# VM tests, the book (every chapter executed once, live under QEMU where it boots) and the browser
# tests in the other. Most steps wait (a VM booting, a kernel or a browser starting), so two lanes
# on two cores take about the time of the longer lane instead of the sum.
KL := $(filter 1,$(KERNEL_LAB_TESTS))
TEST_STEPS = test-lint $(if $(KL),kernel-lab) \
	// test-unit test-notebooks test-labs test-lab $(if $(filter 1,$(BROWSER_TESTS)),test-hub) \
	// $(if $(KL),test-kernel-lab,kernel-lab-tests-left-out) book $(if $(filter 1,$(BROWSER_TESTS)),test-browser,browser-tests-left-out)
test: $(STAMP)
	COURSE_REQUIRE=$(REQUIRE) BOOK_FRESH=1 RUN_STUDENT=0 BOOK_LABS=student $(BIN)/python -m tools.env.timesteps --make "$(MAKE)" $(TEST_STEPS)

test-unit: $(STAMP)
	$(BIN)/python -m pytest -q -m "not browser and not built_site and not kernel_vm and not hub and not colab" tests

# The kernel lab (helpers/measure/kernel_vm): build its bundle from Debian's packages into
# build/kernel_lab/ (kernel + initramfs with the DRM modules and helpers/measure/kernel_vm/guest/probe.c; needs
# apt-get, gcc and libdrm-dev; plus Debian's Python 3.11 for the edu machine, python.cpio.gz), then
# boot it under QEMU (TCG, or KVM where a guest runs on it): Chapters 6b, 2b and 4b, and Lab 6.
# Built before the notebooks so Chapter 6, part 2 runs live in CI.
kernel-lab: $(STAMP)
	$(BIN)/python -m helpers.measure.kernel_vm build

test-kernel-lab: kernel-lab
	$(BIN)/python -m pytest -q -p no:cacheprovider -m kernel_vm --durations=0 tests/measure/test_kernel_vm_live.py \
		tests/measure/test_edu_live.py tests/labs/test_lab6_live.py tests/labs/test_lab6_parts_on_their_own.py

kernel-lab-tests-left-out:
	@echo "make test: KERNEL LAB VM TESTS NOT RUN (KERNEL_LAB_TESTS=$(KERNEL_LAB_TESTS)); install qemu-system-x86 and run 'make test-kernel-lab'"

test-lint: $(STAMP)
	$(BIN)/ruff check $(wildcard helpers tests tools notebooks labs book instructor)
	$(BIN)/lint-imports --no-cache
	$(BIN)/python -m tools.checks.nbhygiene $(NOTEBOOKS)
	$(BIN)/python -m tools.checks.labroles --check
	$(BIN)/python -m tools.shown --check

# The notebook cells that show package code (marked #@shown), written from the package's text:
# edit the function in helpers/, then run this (tools/shown; `make test-lint` runs its --check).
shown: $(STAMP)
	$(BIN)/python -m tools.shown

# The labs' instructor versions top to bottom on a fresh kernel (nbval-lax: errors fail, outputs
# are not compared). Without a GPU the notebooks choose replay and numba's CUDA simulator themselves.
# The chapters execute once per run, in `make book` (its execution cache), where
# tests/site/test_executed_notebooks.py fails a cell that raised, worded a value against its mode
# or was not quiet: the rules notebooks/conftest.py applies when a chapter runs under nbval (one
# chapter by hand: CONTRIBUTING.md, "Running the checks"; every one: `make matrix`).
LAB_NOTEBOOKS := $(sort $(wildcard labs/*.ipynb))
test-notebooks: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider --nbval-lax --nbval-cell-timeout=600 \
		--rootdir=. -o testpaths= $(LAB_NOTEBOOKS)

# Labs (nbgrader format, see labs/README.md): the student versions, made by nbgrader, must run
# to the end with every check cell reporting a clean failure, and score 0 through the sandboxed
# grader; the solutions must score full points through it. Together with test-notebooks and the
# red team (tests/labs/test_redteam.py) this proves every check can pass and can fail.
# RUN_STUDENT=0 (what `make test` sets) leaves the run to the end out here: `make book` executes
# the same student versions once, and tests/site/test_executed_notebooks.py checks that run.
RUN_STUDENT ?= 1
test-labs: $(STAMP)
	$(BIN)/python -m tools.grader student --out build/ci-student
	$(if $(filter 1,$(RUN_STUDENT)),$(BIN)/python -m tools.grader run-student build/ci-student,@echo "test-labs: the student versions run to the end in make book (RUN_STUDENT=0)")
	$(BIN)/python -m tools.grader grade build/ci-student --expect fail
	$(BIN)/python -m tools.grader grade labs --expect pass

# The test matrix (tools/matrix/runner.py): every notebook and lab under nbval in one configuration,
# with leak checks (pinned host memory, device memory, child processes, orphans); writes
# MATRIX_OUT (JSON) and prints its markdown row. `make matrix-table` merges every result in
# build/matrix/ into build/matrix/matrix.md. Runs without a Jupyter server (GPU nodes too).
MATRIX_MODE ?= auto
MATRIX_OUT ?= build/matrix/$(MATRIX_MODE).json
matrix: $(STAMP)
	$(BIN)/python -m tools.matrix.runner run --mode $(MATRIX_MODE) --out $(MATRIX_OUT)

matrix-table:
	$(PYTHON) -m tools.matrix.runner merge $(sort $(wildcard build/matrix/*.json)) --out build/matrix/matrix.md

# Instructors: student versions (solutions removed by nbgrader's ClearSolutions etc.).
student: $(STAMP)
	$(BIN)/python -m tools.grader student --out $(STUDENT_DIR)

# Instructors: the student distribution in DEST (chapters, the labs' student versions, helpers,
# data, a student README; never instructor/), then a scan that fails on any solution marker,
# solution or hidden-test line, instructor file or copy of a reference implementation.
student-repo: $(STAMP)
	@test -n "$(DEST)" || { echo "usage: make student-repo DEST=folder"; exit 2; }
	$(BIN)/python -m tools.dist.studentdist build "$(DEST)"

# Instructors: grade a folder of submissions (notebooks, or one sub-folder per student): each
# student's lab in a bubblewrap sandbox, the checks and hidden cases in the grader's process
# (labs/README.md, "How a lab is graded"). GRADEBOOK=file.csv also writes the scores as a table.
grade: $(STAMP)
	@test -n "$(SUBMISSIONS)" || { echo "usage: make grade SUBMISSIONS=folder [GRADEBOOK=grades.csv]"; exit 2; }
	$(BIN)/python -m tools.grader grade "$(SUBMISSIONS)" $(if $(GRADEBOOK),--gradebook "$(GRADEBOOK)")

# Time the grading of a class of 30 (correct and one hostile student per trick; minutes, not in `make test`).
class-time: $(STAMP)
	$(BIN)/python -m tools.hub.classtime --out build/classtime-$$(date +%s)

# `make lab`'s own command, headless: its REST API must answer on localhost.
test-lab: $(STAMP)
	$(BIN)/python -m tools.site.labcheck --port 0 -- $(MAKE) --no-print-directory lab LAB_FLAGS="--no-browser"

# In headless Chromium (Debian's chromium, or CHROMIUM=path), network blocked: the checks' own
# tests, then every page of the built site (tools/site/sitecheck.py), then Chapter 0 run in `make lab`
# (tools/site/labbrowser.py), then every chapter and student lab rendered (not run) in `make lab`'s
# JupyterLab: no raw MyST markup, no dead link, a term opens the glossary (tools/site/labrender.py).
# Screenshots go to book/_build/screenshots/. Needs `make book` first.
test-browser: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider -m browser tests/site/test_browser.py
	$(BIN)/python -m tools.site.sitecheck book/_build/html
	$(BIN)/python -m tools.site.labbrowser --notebook notebooks/00_your_machine.ipynb -- \
		$(MAKE) --no-print-directory lab LAB_FLAGS="--no-browser --LabApp.expose_app_in_browser=True"
	$(BIN)/python -m tools.site.labrender -- \
		$(MAKE) --no-print-directory lab LAB_FLAGS="--no-browser --LabApp.expose_app_in_browser=True"

# A class on a real JupyterHub (tools/hub/hubclass.py): the hub and its proxy (configurable-http-proxy,
# as package-lock.json pins it, `npm ci`) on 127.0.0.1, one lab through nbgrader's exchange end to
# end, one student in headless Chromium. `make hub` starts the same hub for trying it by hand.
test-hub: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider -m hub tests/site/test_hub.py

# Colab, simulated (tests/site/test_colab.py): Colab's preinstalled packages in a fresh venv (from the
# package index), Chapter 0's Colab block (tools/site/colabcell.py) cloning this repository, run to the end.
test-colab: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider -m colab tests/site/test_colab.py

hub: $(STAMP)
	$(BIN)/python -m tools.hub.hubclass serve --port $(PORT)

browser-tests-left-out:
	@echo "make test: BROWSER AND HUB TESTS NOT RUN (BROWSER_TESTS=$(BROWSER_TESTS)); run 'make test-browser test-hub' where Chromium is installed"

# The site's JavaScript, served locally (book/_static, generated): plotly.js from the installed
# plotly; the Jupyter widget manager, MathJax and axe-core as package-lock.json pins them, installed
# with `npm ci` into node_modules/ (offline from a WHEELHOUSE folder's npm-cache/; tools/site/bookassets.py).
book-static: $(STAMP)
	$(BIN)/python -m tools.site.bookassets book/_static --search $(WHEELHOUSE)

# The HTML site (book/_build/html); warnings are errors, notebooks run through the cache (the
# chapters' one execution in CI, checked by tests/site/test_executed_notebooks.py; BOOK_FRESH=1,
# which `make test` sets, empties the cache first so each chapter runs on the code as it is), with an
# empty state folder (the prediction record page never publishes the builder's own predictions).
# COURSE_REPO_URL / COURSE_JUPYTERHUB_URL set the launch buttons (tools/site/bookconfig.py).
# The labs appear as their student versions (book/labs, made by nbgrader; book/_build/_toc.yml maps
# book/_toc.yml's lab entries to them) unless BOOK_LABS=solution (tools/site/booklabs.py); bookcheck
# fails a student site on which any line of a lab's solution appears.
BOOK_FRESH ?= 0
book: book-static
	$(if $(filter 1,$(BOOK_FRESH)),rm -rf book/_build/.jupyter_cache)
	$(BIN)/python -m tools.site.bookconfig book/_config.yml book/_build/_config.yml
	$(BIN)/python -m tools.site.booklabs book/_toc.yml book/_build/_toc.yml $(if $(BOOK_LABS),--labs $(BOOK_LABS))
	COURSE_STATE_DIR=$(CURDIR)/book/_build/no-learner-state \
	$(BIN)/jupyter-book build . --config book/_build/_config.yml --toc book/_build/_toc.yml \
		--path-output book -W -n --keep-going
	$(BIN)/python -m tools.site.bookcheck book/_build/html
	$(BIN)/python -m pytest -q -p no:cacheprovider -m built_site tests/site/test_book.py tests/site/test_reference_pages.py \
		tests/site/test_executed_notebooks.py
	@echo "site: book/_build/html/index.html"

# Independent C/CUDA cross-check of pinned copy bandwidth (needs nvcc and a GPU); its source is package
# data, the binary goes where helpers.measure.bwcheck.binary() looks (config.BWCHECK_BUILT).
bwcheck: build/bwcheck/bwcheck
	build/bwcheck/bwcheck
build/bwcheck/bwcheck: helpers/measure/bwcheck/bwcheck.cu helpers/measure/bwcheck/chain.h
	mkdir -p $(@D)
	nvcc -O2 -o $@ $<

# Offline wheels for a GPU node: `make wheelhouse WH_PYTHON=3.12 WH_PLATFORM=manylinux_2_28_x86_64
# WH_INSTALLED=tools/env/nodes/cuda-image.txt` then, on the node,
# `make test WHEELHOUSE=wheelhouse CUDA_EXTRA= PYTHON=<node python>`. WH_EXTRAS=lab is enough for
# `make lab` alone (add cuda12 for a GPU machine without CuPy).
WH_PYTHON ?= 3.12
WH_PLATFORM ?= manylinux_2_28_x86_64
WH_EXTRAS ?= lab,test,book
WH_INSTALLED ?= tools/env/nodes/cuda-image.txt
wheelhouse:
	$(PYTHON) -m tools.env.wheelhouse --out wheelhouse --python-version $(WH_PYTHON) \
		--platform $(WH_PLATFORM) --extras $(WH_EXTRAS) $(if $(WH_INSTALLED),--installed $(WH_INSTALLED))

clean:
	rm -rf book/_build book/_static book/labs .pytest_cache build

# Instructors: nbgrader's course folder in DEST (book/jupyterhub.md): nbgrader_config.py and
# source/labN/ with each lab's instructor version, ready for `nbgrader generate_assignment labN`
# there (tools/hub/nbgradercourse.py). Run it again after changing a lab; what nbgrader made stays.
# EXCHANGE=dir names nbgrader's exchange (on the hub, /etc/jupyter/nbgrader_config.py does).
# `make nbgrader-grade DEST=folder LAB=labN` grades what `nbgrader collect labN` gathered there
# with the sandboxed grader and writes the feedback `nbgrader release_feedback labN` hands back.
.PHONY: nbgrader-course nbgrader-grade
nbgrader-course: $(STAMP)
	@test -n "$(DEST)" || { echo "usage: make nbgrader-course DEST=folder [EXCHANGE=dir]"; exit 2; }
	$(BIN)/python -m tools.hub.nbgradercourse layout "$(DEST)" $(if $(EXCHANGE),--exchange "$(EXCHANGE)")

nbgrader-grade: $(STAMP)
	@test -n "$(DEST)" -a -n "$(LAB)" || { echo "usage: make nbgrader-grade DEST=folder LAB=labN"; exit 2; }
	$(BIN)/python -m tools.hub.nbgradercourse grade "$(DEST)" "$(LAB)"
