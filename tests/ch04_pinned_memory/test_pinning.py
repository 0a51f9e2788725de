"""Chapter 4 helpers without a GPU: every bad request is refused with an InputError (or
InputTypeError) naming it before CUDA is touched, regions are created and removed, the
RLIMIT_MEMLOCK child runs under a timeout, the experiments' parameters are checked in replay
too, and the verdicts follow from the numbers they are given."""

import mmap
import os

import numpy as np
import pytest

from helpers.ch04_pinned_memory import memlock, pinning
from helpers.ch04_pinned_memory.pinning import (
    PAGE,
    PinnedAlloc,
    PinningError,
    PinRequestError,
    Region,
    Registration,
    check_region,
)
from helpers.core.errors import (
    CourseError,
    InputError,
    InputTypeError,
    NoGPUError,
    ReferenceDataError,
)
from helpers.core.evidence import Evidence
from helpers.core.mode import Mode


@pytest.fixture
def region():
    with Region(4 * PAGE) as r:
        yield r


# ---------------------------------------------------------------- pointer and size validation

def test_a_real_region_is_accepted(region):
    assert check_region(region.ptr, region.nbytes) == (region.ptr, region.nbytes)


@pytest.mark.parametrize("ptr,err", [(0, InputError), (-4096, InputError), (4096.0, InputTypeError),
                                     ("0x1000", InputTypeError), (True, InputTypeError), (None, InputTypeError)])
def test_bad_addresses(ptr, err):
    with pytest.raises(err, match="register: the address must be"):
        check_region(ptr, PAGE)


@pytest.mark.parametrize("n,err", [(0, InputError), (-PAGE, InputError), (1.5, InputTypeError),
                                   (None, InputTypeError), (False, InputTypeError)])
def test_bad_sizes(region, n, err):
    with pytest.raises(err, match="register: size must be"):
        check_region(region.ptr, n)


def test_unaligned_pointer_names_the_aligned_one(region):
    with pytest.raises(PinRequestError, match=f"not page-aligned.*start at {region.ptr:#x}"):
        check_region(region.ptr + 8, PAGE)


def test_partial_page_size(region):
    with pytest.raises(PinRequestError, match="not a whole number of"):
        check_region(region.ptr, PAGE + 1)


def test_freed_pointer_is_foreign():
    m = mmap.mmap(-1, 4 * PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    ptr = np.frombuffer(m, dtype=np.uint8).ctypes.data
    m.close()
    with pytest.raises(PinRequestError, match="not mapped in this process"):
        check_region(ptr, 4 * PAGE)


def test_range_running_past_the_mapping():
    """A range whose second half was munmap'ed is refused at the first unmapped page."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    m = mmap.mmap(-1, 8 * PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    ptr = np.frombuffer(m, dtype=np.uint8).ctypes.data
    try:
        assert libc.munmap(ptr + 4 * PAGE, 4 * PAGE) == 0
        assert check_region(ptr, 4 * PAGE) == (ptr, 4 * PAGE)
        with pytest.raises(PinRequestError, match=f"{ptr + 4 * PAGE:#x} .* is not mapped"):
            check_region(ptr, 8 * PAGE)
    finally:
        m.close()


def test_unreadable_mapping_refused(tmp_path):
    maps = tmp_path / "maps"
    maps.write_text("00001000-00003000 rw-p 00000000 00:00 0\n00003000-00005000 ---p 00000000 00:00 0\n")
    assert check_region(0x1000, 0x2000, maps=str(maps)) == (0x1000, 0x2000)
    with pytest.raises(PinRequestError, match="0x3000 lies in a mapping without read permission"):
        check_region(0x1000, 0x3000, maps=str(maps))


def test_adjacent_mappings_count_as_one_range(tmp_path):
    maps = tmp_path / "maps"
    maps.write_text("00001000-00003000 rw-p 00000000 00:00 0\n00003000-00005000 r--p 00000000 00:00 0 /x\n")
    assert check_region(0x1000, 0x4000, maps=str(maps)) == (0x1000, 0x4000)
    with pytest.raises(PinRequestError, match="0x5000"):
        check_region(0x1000, 0x5000, maps=str(maps))


def test_bad_requests_are_input_errors_and_driver_failures_are_not():
    assert issubclass(PinRequestError, InputError) and issubclass(PinRequestError, ValueError)
    assert issubclass(PinningError, CourseError) and not issubclass(PinningError, InputError)


# ---------------------------------------------------------------- allocations refuse before the GPU

@pytest.mark.parametrize("n,err", [(0, InputError), (-1, InputError), (2.0, InputTypeError),
                                   ("4096", InputTypeError), (True, InputTypeError)])
def test_hostalloc_bad_sizes(n, err):
    with pytest.raises(err, match="size must be"):
        PinnedAlloc(n)


def test_hostalloc_more_than_memory():
    with pytest.raises(InputError, match="available memory"):
        PinnedAlloc(1 << 50)


def test_hostalloc_unknown_flag():
    with pytest.raises(InputError, match="cudaHostAlloc flag must be one of .*got 'bogus'"):
        PinnedAlloc(PAGE, ("mapped", "bogus"))


def test_hostalloc_without_gpu(no_gpu):
    with pytest.raises(NoGPUError):
        PinnedAlloc(PAGE, "mapped")


def test_register_checks_the_pointer_before_the_gpu(no_gpu, region):
    with pytest.raises(PinRequestError, match="not page-aligned"):
        Registration(region.ptr + 1, PAGE)
    with pytest.raises(NoGPUError):
        Registration(region.ptr, PAGE)


# ---------------------------------------------------------------- regions

@pytest.mark.parametrize("kind", pinning.REGION_KINDS)
def test_region_kinds(kind, tmp_path):
    r = Region(8 * PAGE, kind, directory=str(tmp_path))
    path = r.path
    assert r.array.size == 8 * PAGE and int(r.array[::PAGE].sum()) == 8 * 0xA5
    assert (path is None) == kind.startswith("anonymous")
    assert r.filesystem == ("anonymous" if path is None else pinning.filesystem_of(path))
    r.close()
    assert r.array is None and (path is None or not os.path.exists(path))
    r.close()


def test_read_only_region_cannot_be_written():
    with Region(2 * PAGE, "dev-shm-file", read_only=True) as r:
        assert r.array[0] == 0xA5
        with pytest.raises(ValueError):
            r.array[0] = 1


@pytest.mark.parametrize("kind,n,err,match", [("heap", PAGE, InputError, "region kind"),
                                              ("anonymous-private", 100, PinRequestError, "whole number of"),
                                              ("anonymous-private", 0, InputError, "positive"),
                                              ("anonymous-private", 4096.0, InputTypeError, "whole number of bytes")])
def test_bad_regions(kind, n, err, match):
    with pytest.raises(err, match=match):
        Region(n, kind)


def test_region_in_a_missing_directory(tmp_path):
    with pytest.raises(PinRequestError, match="does not exist"):
        Region(PAGE, "disk-file", directory=str(tmp_path / "nowhere"))


def test_filesystem_of_root(tmp_path):
    mi = tmp_path / "mountinfo"
    mi.write_text("1 0 8:1 / / rw - ext4 /dev/sda1 rw\n2 1 0:5 / /dev/shm rw - tmpfs tmpfs rw\n")
    assert pinning.filesystem_of("/dev/shm/x", str(mi)) == "tmpfs"
    assert pinning.filesystem_of("/home/x", str(mi)) == "ext4"


# ---------------------------------------------------------------- RLIMIT_MEMLOCK child

def test_child_timeout_is_enforced():
    with pytest.raises(PinningError, match="did not finish within 1 s"):
        memlock.run_child("import time; time.sleep(30)", [], timeout_s=1)


@pytest.mark.parametrize("t,err", [(0, InputError), (-1, InputError), (601, InputError), ("5", InputTypeError)])
def test_child_timeout_must_be_sane(t, err):
    with pytest.raises(err, match="timeout_s"):
        memlock.run_child("pass", [], timeout_s=t)


@pytest.mark.parametrize("limit,ask,err", [(0, PAGE, InputError), (PAGE, -1, InputError),
                                           (PAGE, 1 << 50, InputError), (True, PAGE, InputTypeError)])
def test_memlock_probe_bad_arguments(limit, ask, err):
    with pytest.raises(err, match="memlock probe"):
        memlock.memlock_probe(limit, ask)


def test_memlock_limit_binds_mlock_without_cap_ipc_lock():
    """As root the child drops to 'nobody'; otherwise it already lacks CAP_IPC_LOCK."""
    root = os.geteuid() == 0
    p = memlock.memlock_probe(1 << 20, 8 << 20, drop_privileges=root, timeout_s=120)
    assert p["limit"] == 1 << 20 and p["request"] == 8 << 20
    if not p["cap_ipc_lock"]:
        assert p["mlock"] != "ok", "mlock beyond RLIMIT_MEMLOCK succeeded without CAP_IPC_LOCK"
    assert "cuda" in p  # the CUDA part reports itself, usable or not


def test_memlock_probe_failure_is_reported(monkeypatch):
    monkeypatch.setattr(memlock, "_MEMLOCK_CHILD", "import sys; sys.exit('boom')")
    with pytest.raises(PinningError, match="child failed.*boom"):
        memlock.memlock_probe(PAGE, PAGE)


def _probe(cap, mlock, alloc="ok", register="ok"):
    return {"euid": 0 if cap else 65534, "cap_ipc_lock": cap, "limit": 1 << 26, "request": 1 << 29,
            "mlock": mlock, "cuda": "ok", "hostAlloc": alloc, "hostRegister": register}


def test_memlock_verdicts_follow_the_probes():
    root = _probe(True, "ok")
    assert memlock.memlock_verdict({"probes": [root]}).startswith("undecided")
    assert memlock.memlock_verdict({"probes": [root, _probe(False, "Cannot allocate memory")]}).startswith("not honoured")
    assert memlock.memlock_verdict({"probes": [_probe(False, "Cannot allocate memory", "cudaErrorMemoryAllocation",
                                                      "cudaErrorMemoryAllocation")]}).startswith("honoured")
    nocuda = dict(_probe(False, "Cannot allocate memory"), cuda="unavailable: x")
    del nocuda["hostAlloc"], nocuda["hostRegister"]
    assert "not usable" in memlock.memlock_verdict({"probes": [nocuda]})
    assert len(memlock.memlock_rows({"probes": [root, nocuda]})) == 2


# ---------------------------------------------------------------- replay conversions

def _cost_data():
    rows = []
    for k, n in enumerate(pinning.cost_sizes(False)):
        t = 2e-5 + n / 5e9
        rows.append({"nbytes": n, "reps": 3, "alloc": t, "free": t / 2, "touch": t, "register": t * 0.8,
                     "unregister": t / 3, "mlock": None if k == 3 else t / 4, "munlock": None if k == 3 else t / 8,
                     "mlock_error": None})
    return {"rows": rows, "skipped": {}, "page_size": PAGE, "locked_after": 0}


def test_cost_sizes():
    assert pinning.cost_sizes(False)[0] == 4096 and pinning.cost_sizes(False)[-1] == 4 << 30
    assert pinning.cost_sizes(True)[-1] == 64 << 20
    assert pinning.cost_sizes(False, 1 << 20)[-1] == 1 << 20 and pinning.cost_sizes(True, 16 << 10)[-1] == 16 << 10


def test_cost_conversions():
    cd = Evidence("pinning.cost_vs_size", _cost_data(), Mode.REPLAY, "stand-in machine", why="test")
    fig = pinning.cost_figure(cd)
    assert "REPLAY" in fig.fig.layout.title.text
    mlock_trace = next(t for t in fig.fig.data if t.name == "mlock(2)")
    assert len(mlock_trace.x) == len(cd.data["rows"]) - 1  # the missing mlock point is left out
    rows = pinning.cost_rows(cd.data)
    assert rows[3][5] == "—" and len(rows) == 11
    assert "4 GiB" in pinning.cost_summary(cd.data)
    assert pinning.row_at(cd.data, 256 << 20)["nbytes"] == 256 << 20
    with pytest.raises(PinRequestError, match="no pin-cost measurement"):
        pinning.row_at(cd.data, 12345)


def _register_data(outcome="ok"):
    n = 256 << 20
    case = {"kind": "dev-shm-file", "filesystem": "tmpfs", "read_only": False, "flags": "default",
            "pinned_before": False, "outcome": outcome, "pinned_during": outcome == "ok",
            "h2d_s": n / 50e9 if outcome == "ok" else None, "pinned_after": False}
    return {"nbytes": n, "pageable_h2d_s": n / 10e9, "hostalloc_h2d_s": n / 50e9, "cases": [case],
            "driver_answers": {}, "locked_after": 0}


def test_register_verdict_from_numbers():
    ok = pinning.register_verdict(_register_data())
    assert ok.startswith("dev-shm-file: yes") and "1.00x cudaHostAlloc" in ok and "5.00x" in ok
    assert "NO — cudaHostRegister answered cudaErrorInvalidValue" in pinning.register_verdict(
        _register_data("cudaErrorInvalidValue"))
    assert pinning.register_rows(_register_data())[2][-1] == "50.0"


def test_a_recording_replays_through_ctx_get(stand_in_recorder, tmp_path):
    """A reference file written by the recorder (stand-in GPU) replays through ctx.get; the views
    take the Evidence, and a file without an experiment raises naming the fix."""
    import json

    from helpers import course
    from helpers.core import experiments
    from helpers.recording import recorder

    stand_in_recorder({
        "pinning.cost_vs_size": experiments.Experiment("pinning.cost_vs_size", 4, "t", lambda q: _cost_data()),
        "pinning.memlock": experiments.get("pinning.memlock")})
    out = tmp_path / "stand-in"
    assert recorder.main(["--out", str(out), "--only", "pinning.cost_vs_size"]) == 0
    ctx = course.Context(Mode.REPLAY, "test", gpu_name=None, reference_name=str(out))
    ev = ctx.get("pinning.cost_vs_size")
    assert ev.mode is Mode.REPLAY and ev.data == json.loads(json.dumps(_cost_data()))
    assert "H100" in ev.source and "REPLAY" in pinning.cost_figure(ev).fig.layout.title.text
    with pytest.raises(ReferenceDataError, match="no recording of 'pinning.memlock'.*helpers.record --only"):
        ctx.get("pinning.memlock")


@pytest.mark.parametrize("exp,params,err", [
    ("pinning.cost_vs_size", {"largest": 1024}, InputError),
    ("pinning.cost_vs_size", {"largest": True}, InputTypeError),
    ("pinning.register_regions", {"nbytes": PAGE + 1}, PinRequestError),
    ("pinning.register_regions", {"nbytes": 2 << 30}, InputError),
    ("pinning.memlock", {"limit": 0}, InputError),
    ("pinning.memlock", {"request": 1.5}, InputTypeError),
    ("pinning.write_combined", {"nbytes": "big"}, InputTypeError),
    ("zero_copy.vs_copy", {"reps": 0}, InputError),
    ("zero_copy.vs_copy", {"frames": 200}, InputError),
])
def test_bad_parameters_raise_in_replay(exp, params, err):
    """Bad parameters raise before live or replay is decided, so replay never hides them."""
    from helpers import course

    ctx = course.Context(Mode.REPLAY, "test", gpu_name=None, reference_name="h100-pcie")
    with pytest.raises(err):
        ctx.get(exp, **params)


def test_good_parameters_replay_and_say_so():
    from helpers import course

    ev = course.Context(Mode.REPLAY, "test", gpu_name=None,
                        reference_name="h100-pcie").get("pinning.memlock", limit=1 << 20)
    assert ev.mode is Mode.REPLAY and "not limit=1048576" in ev.why and ev.data["probes"]


def test_live_run_passes_the_parameters(monkeypatch):
    """Live, ctx.get runs the registered function itself with the validated parameters."""
    from helpers import course

    seen = {}

    def fake_probe(limit, request, **kw):
        seen.update(limit=limit, request=request, **kw)
        return {"limit": limit, "request": request}

    monkeypatch.setattr(memlock, "memlock_probe", fake_probe)
    monkeypatch.setattr(pinning.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(pinning.gpu, "release_pools", lambda: None)
    ctx = course.Context(Mode.LIVE, "test", gpu_name="Stand-in GPU", reference_name="h100-pcie")
    ev = ctx.get("pinning.memlock", limit=1 << 20, request=8 << 20)
    assert ev.mode is Mode.LIVE and ev.source == "Stand-in GPU"
    assert seen == {"limit": 1 << 20, "request": 8 << 20}
    assert ev.data["probes"] == [{"limit": 1 << 20, "request": 8 << 20}]


def test_chapter4_experiments_are_registered():
    from helpers.core import experiments

    reg = experiments.discover()
    for eid in ("pinning.cost_vs_size", "pinning.register_regions", "pinning.memlock",
                "pinning.write_combined", "zero_copy.vs_copy"):
        assert eid in reg and reg[eid].chapter == 4
