"""Shared fixtures: a fake sysfs tree with an H100-like GPU, a probe that pretends, and
reference machine folders built from the committed one the way the recorder writes them."""

from __future__ import annotations

import os
import shutil
import textwrap
from pathlib import Path

import pytest
from hypothesis import settings

from helpers.core import gpu, reference
from helpers.measure import sandbox
from tests import prerequisites

# CI machines are shared and slow at times: a property test is judged by its examples, not
# by how fast one example ran, so hypothesis's per-example deadline is off everywhere.
settings.register_profile("course", deadline=None)
settings.load_profile("course")

REFERENCE = Path(__file__).resolve().parent.parent / "data" / "reference" / "h100-pcie"


def run_on_simulator(code: str, timeout_s: float = 300) -> str:
    """Run `code` (dedented) in a fresh Python on Numba's CUDA simulator and return its stdout.

    Numba binds to the simulator or to a GPU once per process, so a test's kernels get a process of
    their own. helpers.measure.sandbox runs it: the course on PYTHONPATH ahead of what is there (a GPU
    node's numpy<2.5 comes from PYTHONPATH), its process group killed at the timeout."""
    out = sandbox.run_python(textwrap.dedent(code), timeout_s, env={"NUMBA_ENABLE_CUDASIM": "1"})
    assert out.status == "ok", f"{out.summary()}\n{out.stdout_tail}{out.stderr_tail}"
    return out.stdout_tail


def recorded_machine(folder: Path = REFERENCE) -> dict:
    """A reference machine's recordings, validated by the loader, as one dict for tests that read many:
    {"name", "experiments": {id: recording document (title, chapter, quick, data or skipped, provenance)},
    "system": the system report's data, "provenance": the system report's provenance}."""
    ref = reference.load(folder)
    docs = {i: ref.recording(i).doc for i in ref.ids()}
    report = docs.get("system.report", {})
    return {"name": ref.name, "experiments": {i: d for i, d in docs.items() if "data" in d},
            "system": report.get("data"), "provenance": report.get("provenance")}


def declare_optional(monkeypatch, experiment_id: str, role: str = "default") -> None:
    """Make the registered experiment declare its recording optional on the `role` machine
    (`optional_on`), for this test only: how a page's "not recorded there" path is reached."""
    import dataclasses

    from helpers.core import experiments

    registry = experiments.discover()
    registry[experiment_id] = dataclasses.replace(registry[experiment_id], optional_on=(role,))
    monkeypatch.setattr(experiments, "discover", lambda: registry)


def write_reference(directory: Path, name: str = "h100-pcie", *, add: dict | None = None, drop=(),
                    only_added: bool = False, chapter: int = 0, base: Path = REFERENCE) -> Path:
    """Write the machine folder `<directory>/<name>/` as the recorder writes it: the `base` machine's
    manifest and recordings (less those in `drop`, or none with only_added), and each `add` id
    recorded with the given data and the base's provenance, every file checksummed. Returns the folder."""
    from helpers.recording import store

    src = reference.load(base)
    docs = {} if only_added else {i: src.recording(i).doc for i in src.ids() if i not in drop}
    have = src.ids()
    prov = src.recording("system.report" if "system.report" in have else have[0]).provenance
    manifest = dict(src.manifest, name=name)
    folder = Path(directory) / name
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    (folder / reference.MANIFEST).write_text(store.as_text(store.sealed(manifest, "machine", name)))
    ref = reference.load(folder)
    for eid, data in (add or {}).items():
        docs[eid] = store.recording_doc(ref, eid, {"title": eid, "chapter": chapter, "duration_s": 1.0,
                                                   "quick": False, "data": data}, prov)
    for doc in docs.values():
        store.write(ref, dict(doc, machine=name))
    return folder


# The first lines of a real H100's sysfs `resource` file (BAR0, BAR2, BAR4), as on the
# course's GPU machine; the fake tree below is shaped like /sys/bus/pci/devices/<addr>.
H100_RESOURCE = """\
0x0000102002000000 0x0000102002ffffff 0x000000000014220c
0x0000000000000000 0x0000000000000000 0x0000000000000000
0x0000100000000000 0x0000101fffffffff 0x000000000014220c
0x0000000000000000 0x0000000000000000 0x0000000000000000
0x0000102000000000 0x0000102001ffffff 0x000000000014220c
0x0000000000000000 0x0000000000000000 0x0000000000000000
0x0000000000000000 0x0000000000000000 0x0000000000000000
"""


@pytest.fixture
def fake_sysfs(tmp_path: Path) -> Path:
    """A /sys with one NVIDIA 3D controller, one network card and no IOMMU."""
    root = tmp_path / "sys"
    devs = root / "bus" / "pci" / "devices"
    gpu_dev = devs / "0000:00:06.0"
    gpu_dev.mkdir(parents=True)
    files = {"class": "0x030200", "vendor": "0x10de", "device": "0x2330", "resource": H100_RESOURCE,
             "current_link_speed": "32.0 GT/s PCIe", "current_link_width": "16",
             "max_link_speed": "32.0 GT/s PCIe", "max_link_width": "16", "numa_node": "-1"}
    for name, text in files.items():
        (gpu_dev / name).write_text(text + "\n")
    for i in (0, 2, 4):
        (gpu_dev / f"resource{i}_wc").write_text("")
    drivers = root / "bus" / "pci" / "drivers" / "nvidia"
    drivers.mkdir(parents=True)
    os.symlink(drivers, gpu_dev / "driver")
    nic = devs / "0000:00:03.0"
    nic.mkdir()
    (nic / "class").write_text("0x020000\n")
    (root / "module" / "nvidia").mkdir(parents=True)
    (root / "module" / "nvidia" / "version").write_text("580.159.04\n")
    return root


@pytest.fixture
def no_gpu(monkeypatch):
    """Make the helpers believe no GPU is usable, whatever the machine has.

    (On a machine with a GPU, pytest_configure below has already imported numba.cuda, so
    replay cannot switch this test session to numba's CUDA simulator.)
    """
    fake = gpu.GPUProbe(False, "hidden by the test")
    monkeypatch.setattr(gpu, "probe", lambda: fake)
    monkeypatch.delenv("COURSE_MODE", raising=False)
    before = os.environ.get("NUMBA_ENABLE_CUDASIM")
    yield fake
    # mode.banner() switches numba to its simulator in replay; undo that for later tests
    if before is None:
        os.environ.pop("NUMBA_ENABLE_CUDASIM", None)
    else:
        os.environ["NUMBA_ENABLE_CUDASIM"] = before


def has_gpu() -> bool:
    return gpu.probe().usable


needs_gpu = pytest.mark.skipif("not config.getoption('--run-gpu') and not __import__('helpers.core.gpu').core.gpu.probe().usable",
                               reason="needs a usable CUDA GPU; runs live on the GPU machine")


def pytest_addoption(parser):
    parser.addoption("--run-gpu", action="store_true", help="fail instead of skip when no GPU")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """After -m has deselected: skip what this machine cannot run, naming why (tests/prerequisites.py);
    COURSE_REQUIRE (set by `make test`) turns such a skip into a failed run."""
    prerequisites.apply(config, items)


def pytest_configure(config):
    """On a GPU machine, import numba.cuda now, before any test runs in replay mode.

    numba chooses between its CUDA simulator and the real GPU once per process, at the first
    import of numba.cuda, and replay mode (helpers.core.mode.configure_numba) asks for the simulator
    when numba.cuda is not yet imported. Whatever test order pytest picks, the live tests of
    this session must get the real GPU; replay tests then run their numba kernels on it too.
    """
    if "gpu" in prerequisites.required():
        config.option.run_gpu = True  # COURSE_REQUIRE=gpu: a test that needs a GPU fails without one
    if os.environ.get("NUMBA_ENABLE_CUDASIM") != "1" and gpu.probe().usable:
        import numba.cuda  # noqa: F401


@pytest.fixture(scope="module")
def toy_device():
    """One toy GPU device process per test module (starting one takes a moment)."""
    from toygpu_util import start_device

    dev = start_device()
    yield dev
    dev.close()


@pytest.fixture(name="gpu")
def recovered_toy_gpu(toy_device):
    """The module's toy GPU, recovered from any device error the previous test left behind."""
    toy_device.recover()
    return toy_device


@pytest.fixture
def stand_in_recorder(monkeypatch):
    """The recorder on a stand-in GPU, with the committed H100 provenance and a system report of
    nothing; returns `use(registry)`, which makes `registry` ({id: Experiment}) all it records."""
    from helpers.core import experiments
    from helpers.measure import sysinfo
    from helpers.recording import live, recorder

    monkeypatch.delenv("COURSE_MODE", raising=False)
    monkeypatch.setattr(recorder, "warm_up", lambda: None)
    monkeypatch.setattr(gpu, "probe", lambda: gpu.GPUProbe(True, "Stand-in GPU", device_count=1,
                                                           name="Stand-in GPU"))
    monkeypatch.setattr(gpu, "release_pools", lambda: None)
    fake_prov = dict(reference.load(REFERENCE).recording("system.report").provenance)
    fake_prov.pop("split_from", None)  # what the live machine reports, not how a file was moved
    fake_prov.update(git_commit="0" * 40, recorded_by="stand-in")
    monkeypatch.setattr(live, "live_provenance",
                        lambda argv, by=None: dict(fake_prov, command_line=argv, recorded_by=by or "stand-in"))
    monkeypatch.setattr(sysinfo, "collect", lambda: sysinfo.SystemReport(kernel="k", nvidia_module=None,
                                                                         gpus=[], cuda={}, iommu="none",
                                                                         memlock_soft=None, memlock_hard=None,
                                                                         dev_nvidia=[], dev_dri=[],
                                                                         absent=[]))

    def use(registry: dict) -> None:
        monkeypatch.setattr(experiments, "_REGISTRY", dict(registry))
        monkeypatch.setattr(experiments, "discover", lambda: dict(experiments._REGISTRY))

    return use


@pytest.fixture
def fake_cupy_gpu(monkeypatch):
    """helpers.core.gpu.cupy() answers with tests/fake_cupy's stand-in, with 16 GiB of device memory free."""
    import fake_cupy

    from helpers.core import gpu

    cp = fake_cupy.make()
    monkeypatch.setattr(gpu, "cupy", lambda: cp)
    monkeypatch.setattr(gpu, "free_device_bytes", lambda: 1 << 34)
    return cp
