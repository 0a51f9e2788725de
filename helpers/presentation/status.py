"""The book's status page: which machine built the site, in which mode, with which packages."""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
from importlib import metadata
from pathlib import Path

from helpers.core import mode, provenance, reference
from helpers.core.errors import ReferenceDataError
from helpers.measure import sysinfo
from helpers.presentation.figures import Table

# Packages that shape the site itself (the book's builder and widget/figure renderers).
SITE_PACKAGES = ("jupyter-book", "myst-nb", "sphinx", "sphinx-book-theme", "ipywidgets", "ipykernel")


def _memory_gib() -> str:
    try:
        return f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.1f} GiB"
    except (ValueError, OSError, AttributeError):
        return "unknown"


def build_table() -> Table:
    """Build machine (CPU, memory, GPU, driver), mode, reference and package versions as one table."""
    info = mode.detect()
    report = sysinfo.collect(use_cuda=False)
    rows = [
        ("built", _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")),
        ("mode", f"{info.mode.value} — {info.reason}"),
        ("GPU", info.probe.name if info.probe.usable else "none usable"),
        ("NVIDIA kernel module", report.nvidia_module or "absent"),
        ("replay reference", reference.default_reference_name() or "none"),
        ("CPU", f"{provenance.cpu_model()} · {os.cpu_count()} logical CPUs"),
        ("memory", _memory_gib()),
        ("host", f"{platform.machine()} · Linux {platform.release()} · Python {platform.python_version()}"),
    ]
    if info.probe.usable:
        rows.append(("CUDA", f"runtime {info.probe.cuda_runtime}, driver API {info.probe.cuda_driver}"))
    rows += [(f"package {k}", v) for k, v in provenance.package_versions().items()]
    for name in SITE_PACKAGES:
        try:
            rows.append((f"package {name}", metadata.version(name)))
        except metadata.PackageNotFoundError:
            continue
    return Table(rows, ("item", "value"), caption="How this copy of the site was built")


def reference_table() -> Table:
    """Every reference machine: its label and the experiments recorded there."""
    rows = []
    for name in reference.list_names():
        ref = reference.load(name)
        rows.append((name, ref.label, ", ".join(ref.ids())))
    return Table(rows, ("machine", "GPU and link", "recordings (one file each)"),
                 caption="Reference data in data/reference/<machine>/")


MATRIX_DIR = Path(__file__).resolve().parents[2] / "data" / "matrix"
_MATRIX_KEYS = ("machine", "mode", "passed", "total", "leaks", "date")
_MODE_ORDER = ("auto", "hidden", "replay", "live")


def matrix_results(directory: Path | str = MATRIX_DIR) -> list[dict]:
    """The test-matrix results in `directory` (written by tools/matrix/runner.py on each machine).

    Ordered from the least to the most hardware: no GPU, GPU hidden, replay forced, live on
    one GPU, live on several. A file that is not a matrix result is a ReferenceDataError
    naming it (the page must not show a half-read table).
    """
    out = []
    for path in sorted(Path(directory).glob("*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ReferenceDataError(f"{path}: not a matrix result ({exc})") from None
        if not isinstance(data, dict) or any(k not in data for k in _MATRIX_KEYS):
            raise ReferenceDataError(f"{path}: not a matrix result (needs {', '.join(_MATRIX_KEYS)})")
        out.append(data)
    mode_rank = {m: i for i, m in enumerate(_MODE_ORDER)}
    return sorted(out, key=lambda d: (len(d.get("gpus", [])) > 1, mode_rank.get(d.get("requested_mode"), 0),
                                      d["date"]))


def course_notebooks(root: Path = MATRIX_DIR.parents[1]) -> list[str]:
    """Today's chapters and labs, as the matrix names them (`notebooks/….ipynb`, `labs/….ipynb`)."""
    return sorted(p.relative_to(root).as_posix() for d in ("notebooks", "labs") for p in (root / d).glob("*.ipynb"))


def _run_names(result: dict) -> set[str] | None:
    """The notebooks a matrix result ran (a load run: those of its kernels); None when it does not say."""
    if isinstance(result.get("notebooks"), list):
        return {n["notebook"] for n in result["notebooks"]}
    if isinstance(result.get("kernel_results"), list):
        return {n["notebook"] for k in result["kernel_results"] for n in k.get("notebooks", [])}
    return None


def coverage(result: dict, today: list[str]) -> str:
    """How a committed result's notebooks compare with today's tree: a row run before chapters were added
    or renamed says which of today's it did not run, so an old green row is not read as today's."""
    ran = _run_names(result)
    if ran is None:
        return "not recorded"
    missing = [Path(n).stem for n in today if n not in ran]
    gone = sorted(Path(n).stem for n in ran if n not in today)
    if not missing and not gone:
        return f"all {len(today)} of today's"
    text = f"{len(today) - len(missing)} of today's {len(today)}"
    kept = [Path(n).stem for n in today if n in ran]
    if missing and len(kept) < len(missing):  # a run of a few chosen notebooks (a load run): name those
        text += "; ran only: " + ", ".join(kept)
    elif missing:
        text += "; not run: " + ", ".join(missing)
    if gone:
        text += "; since renamed or removed: " + ", ".join(gone)
    return text


def matrix_table(directory: Path | str = MATRIX_DIR, today: list[str] | None = None) -> Table:
    """Machine | mode | notebooks passed | of today's notebooks | leaks found | when, one row per result."""
    today = course_notebooks() if today is None else today
    rows = []
    for d in matrix_results(directory):
        passed = f"{d['passed']}/{d['total']}" + (f" ({len(d['not_reached'])} not reached)"
                                                  if d.get("not_reached") else "")
        rows.append((d["machine"], d["mode"], passed, coverage(d, today), d["leaks"], d["date"]))
    return Table(rows, ("machine", "mode", "notebooks passed", "of today's notebooks", "leaks found", "run"),
                 caption="Test matrix (tools/matrix/runner.py): every notebook and lab under nbval, with leak checks; "
                         "a row run on an older tree names the notebooks it did not run")
