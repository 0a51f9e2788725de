"""Shared fixtures: a fake sysfs tree with an H100-like GPU, a probe that pretends, and
reference files built from the committed one the way the recorder writes them."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest
from hypothesis import settings

from helpers.core import gpu, reference
from helpers.measure import sandbox

# CI machines are shared and slow at times: a property test is judged by its examples, not
# by how fast one example ran, so hypothesis's per-example deadline is off everywhere.
settings.register_profile("course", deadline=None)
settings.load_profile("course")

REFERENCE = Path(__file__).resolve().parent.parent / "data" / "reference" / "h100-pcie.json"


def run_on_simulator(code: str, timeout_s: float = 300) -> str:
    """Run `code` (dedented) in a fresh Python on Numba's CUDA simulator and return its stdout.

    Numba binds to the simulator or to a GPU once per process, so a test's kernels get a process of
    their own. helpers.measure.sandbox runs it: the course on PYTHONPATH ahead of what is there (a GPU
    node's numpy<2.5 comes from PYTHONPATH), its process group killed at the timeout."""
    out = sandbox.run_python(textwrap.dedent(code), timeout_s, env={"NUMBA_ENABLE_CUDASIM": "1"})
    assert out.status == "ok", f"{out.summary()}\n{out.stdout_tail}{out.stderr_tail}"
    return out.stdout_tail


def write_reference(directory: Path, name: str = "h100-pcie", *, add: dict | None = None, drop=(),
                    only_added: bool = False, chapter: int = 0, base: Path = REFERENCE) -> Path:
    """Write `<directory>/<name>.json`: the `base` reference file with the experiments in `drop`
    removed (or all of them, with only_added) and each `add` id recorded with the given data,
    under a valid checksum, as the recorder writes it. Returns the file's path."""
    doc = json.loads(Path(base).read_text())
    doc["name"] = name
    doc["provenance"].pop("merged", None)  # a fresh recording: the base file's later merges are its own
    if only_added:
        doc["experiments"] = {}
    for eid in drop:
        doc["experiments"].pop(eid, None)
    for eid, data in (add or {}).items():
        doc["experiments"][eid] = {"title": eid, "chapter": chapter, "duration_s": 1.0, "quick": False,
                                   "data": data}
    doc["checksum"] = reference.checksum(doc)
    path = Path(directory) / f"{name}.json"
    path.write_text(json.dumps(doc))
    return path


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


def pytest_configure(config):
    """On a GPU machine, import numba.cuda now, before any test runs in replay mode.

    numba chooses between its CUDA simulator and the real GPU once per process, at the first
    import of numba.cuda, and replay mode (helpers.core.mode.configure_numba) asks for the simulator
    when numba.cuda is not yet imported. Whatever test order pytest picks, the live tests of
    this session must get the real GPU; replay tests then run their numba kernels on it too.
    """
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
    import json

    from helpers.core import experiments, provenance, recorder, reference
    from helpers.measure import sysinfo

    monkeypatch.delenv("COURSE_MODE", raising=False)
    monkeypatch.setattr(recorder, "warm_up", lambda: None)
    monkeypatch.setattr(gpu, "probe", lambda: gpu.GPUProbe(True, "Stand-in GPU", 1, "Stand-in GPU"))
    monkeypatch.setattr(gpu, "release_pools", lambda: None)
    fake_prov = json.loads((reference.data_dir() / "h100-pcie.json").read_text())["provenance"]
    fake_prov.pop("merged", None)  # what the live machine reports, not the file's history
    monkeypatch.setattr(provenance, "live_provenance", lambda argv: dict(fake_prov, command_line=argv))
    monkeypatch.setattr(sysinfo, "collect", lambda: sysinfo.SystemReport(kernel="k", nvidia_module=None,
                                                                         gpus=[], cuda={}, iommu="none",
                                                                         memlock_soft=None, memlock_hard=None,
                                                                         dev_nvidia=[], dev_dri=[],
                                                                         absent=[]))

    def use(registry: dict) -> None:
        monkeypatch.setattr(experiments, "_REGISTRY", dict(registry))
        monkeypatch.setattr(experiments, "discover", lambda: dict(experiments._REGISTRY))

    return use
