"""Chapter 4 helpers without a GPU: every bad request is refused with a PinningError naming it,
regions are created and removed, the RLIMIT_MEMLOCK child runs under a timeout, and the
verdicts follow from the numbers they are given."""

import mmap
import os

import numpy as np
import pytest

from helpers.ch04_pinned_memory import pinning
from helpers.ch04_pinned_memory.pinning import (
    PAGE,
    PinnedAlloc,
    PinningError,
    Region,
    Registration,
    check_region,
)
from helpers.core.errors import CourseError, NoGPUError


@pytest.fixture
def region():
    with Region(4 * PAGE) as r:
        yield r


# ---------------------------------------------------------------- pointer and size validation

def test_a_real_region_is_accepted(region):
    assert check_region(region.ptr, region.nbytes) == (region.ptr, region.nbytes)


@pytest.mark.parametrize("ptr", [0, -4096, 4096.0, "0x1000", True, None])
def test_bad_addresses(ptr):
    with pytest.raises(PinningError, match="address must be a positive integer"):
        check_region(ptr, PAGE)


@pytest.mark.parametrize("n", [0, -PAGE, 1.5, None, False])
def test_bad_sizes(region, n):
    with pytest.raises(PinningError, match="positive whole number of bytes"):
        check_region(region.ptr, n)


def test_unaligned_pointer_names_the_aligned_one(region):
    with pytest.raises(PinningError, match=f"not page-aligned.*start at {region.ptr:#x}"):
        check_region(region.ptr + 8, PAGE)


def test_partial_page_size(region):
    with pytest.raises(PinningError, match="not a whole number of"):
        check_region(region.ptr, PAGE + 1)


def test_freed_pointer_is_foreign():
    m = mmap.mmap(-1, 4 * PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    ptr = np.frombuffer(m, dtype=np.uint8).ctypes.data
    m.close()
    with pytest.raises(PinningError, match="not mapped in this process"):
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
        with pytest.raises(PinningError, match=f"{ptr + 4 * PAGE:#x} .* is not mapped"):
            check_region(ptr, 8 * PAGE)
    finally:
        m.close()


def test_unreadable_mapping_refused(tmp_path):
    maps = tmp_path / "maps"
    maps.write_text("00001000-00003000 rw-p 00000000 00:00 0\n00003000-00005000 ---p 00000000 00:00 0\n")
    assert check_region(0x1000, 0x2000, maps=str(maps)) == (0x1000, 0x2000)
    with pytest.raises(PinningError, match="0x3000 lies in a mapping without read permission"):
        check_region(0x1000, 0x3000, maps=str(maps))


def test_adjacent_mappings_count_as_one_range(tmp_path):
    maps = tmp_path / "maps"
    maps.write_text("00001000-00003000 rw-p 00000000 00:00 0\n00003000-00005000 r--p 00000000 00:00 0 /x\n")
    assert check_region(0x1000, 0x4000, maps=str(maps)) == (0x1000, 0x4000)
    with pytest.raises(PinningError, match="0x5000"):
        check_region(0x1000, 0x5000, maps=str(maps))


def test_pinning_error_is_a_course_error():
    assert issubclass(PinningError, CourseError) and issubclass(PinningError, ValueError)


# ---------------------------------------------------------------- allocations refuse before the GPU

@pytest.mark.parametrize("n", [0, -1, 2.0, "4096"])
def test_hostalloc_bad_sizes(n):
    with pytest.raises(PinningError, match="size must be"):
        PinnedAlloc(n)


def test_hostalloc_more_than_memory():
    with pytest.raises(PinningError, match="available memory"):
        PinnedAlloc(1 << 50)


def test_hostalloc_unknown_flag():
    with pytest.raises(PinningError, match="unknown flag.*bogus"):
        PinnedAlloc(PAGE, ("mapped", "bogus"))


def test_hostalloc_without_gpu(no_gpu):
    with pytest.raises(NoGPUError):
        PinnedAlloc(PAGE, "mapped")


def test_register_checks_the_pointer_before_the_gpu(no_gpu, region):
    with pytest.raises(PinningError, match="not page-aligned"):
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


@pytest.mark.parametrize("kind,n,match", [("heap", PAGE, "region kind"), ("anonymous-private", 100, "whole number"),
                                          ("anonymous-private", 0, "positive")])
def test_bad_regions(kind, n, match):
    with pytest.raises(PinningError, match=match):
        Region(n, kind)


def test_filesystem_of_root(tmp_path):
    mi = tmp_path / "mountinfo"
    mi.write_text("1 0 8:1 / / rw - ext4 /dev/sda1 rw\n2 1 0:5 / /dev/shm rw - tmpfs tmpfs rw\n")
    assert pinning.filesystem_of("/dev/shm/x", str(mi)) == "tmpfs"
    assert pinning.filesystem_of("/home/x", str(mi)) == "ext4"


# ---------------------------------------------------------------- RLIMIT_MEMLOCK child

def test_child_timeout_is_enforced():
    with pytest.raises(PinningError, match="did not finish within 1 s"):
        pinning.run_child("import time; time.sleep(30)", [], timeout_s=1)


@pytest.mark.parametrize("t", [0, -1, 601])
def test_child_timeout_must_be_sane(t):
    with pytest.raises(PinningError, match="timeout_s"):
        pinning.run_child("pass", [], timeout_s=t)


@pytest.mark.parametrize("limit,ask", [(0, PAGE), (PAGE, -1), (PAGE, 1 << 50), (True, PAGE)])
def test_memlock_probe_bad_arguments(limit, ask):
    with pytest.raises(PinningError):
        pinning.memlock_probe(limit, ask)


def test_memlock_limit_binds_mlock_without_cap_ipc_lock():
    """As root the child drops to 'nobody'; otherwise it already lacks CAP_IPC_LOCK."""
    root = os.geteuid() == 0
    p = pinning.memlock_probe(1 << 20, 8 << 20, drop_privileges=root, timeout_s=120)
    assert p["limit"] == 1 << 20 and p["request"] == 8 << 20
    if not p["cap_ipc_lock"]:
        assert p["mlock"] != "ok", "mlock beyond RLIMIT_MEMLOCK succeeded without CAP_IPC_LOCK"
    assert "cuda" in p  # the CUDA part reports itself, usable or not


def test_memlock_probe_failure_is_reported(monkeypatch):
    monkeypatch.setattr(pinning, "_MEMLOCK_CHILD", "import sys; sys.exit('boom')")
    with pytest.raises(PinningError, match="child failed.*boom"):
        pinning.memlock_probe(PAGE, PAGE)


def _probe(cap, mlock, alloc="ok", register="ok"):
    return {"euid": 0 if cap else 65534, "cap_ipc_lock": cap, "limit": 1 << 26, "request": 1 << 29,
            "mlock": mlock, "cuda": "ok", "hostAlloc": alloc, "hostRegister": register}


def test_memlock_verdicts_follow_the_probes():
    root = _probe(True, "ok")
    assert pinning.memlock_verdict({"probes": [root]}).startswith("undecided")
    assert pinning.memlock_verdict({"probes": [root, _probe(False, "Cannot allocate memory")]}).startswith("not honoured")
    assert pinning.memlock_verdict({"probes": [_probe(False, "Cannot allocate memory", "cudaErrorMemoryAllocation",
                                                      "cudaErrorMemoryAllocation")]}).startswith("honoured")
    nocuda = dict(_probe(False, "Cannot allocate memory"), cuda="unavailable: x")
    del nocuda["hostAlloc"], nocuda["hostRegister"]
    assert "not usable" in pinning.memlock_verdict({"probes": [nocuda]})
    assert len(pinning.memlock_rows({"probes": [root, nocuda]})) == 2


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


def test_cost_conversions():
    cd = pinning.ChapterData(_cost_data(), pinning.Mode.REPLAY, "stand-in machine")
    fig = pinning.cost_figure(cd)
    assert "REPLAY" in fig.fig.layout.title.text
    mlock_trace = next(t for t in fig.fig.data if t.name == "mlock(2)")
    assert len(mlock_trace.x) == len(cd.data["rows"]) - 1  # the missing mlock point is left out
    rows = pinning.cost_rows(cd.data)
    assert rows[3][5] == "—" and len(rows) == 11
    assert "4 GiB" in pinning.cost_summary(cd.data)
    assert pinning.row_at(cd.data, 256 << 20)["nbytes"] == 256 << 20
    with pytest.raises(PinningError, match="no pin-cost measurement"):
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


def test_live_or_replay_reads_a_recording(stand_in_recorder, tmp_path):
    """A reference file written by the recorder (stand-in GPU) replays through live_or_replay."""
    import json

    from helpers import course
    from helpers.core import experiments, recorder

    stand_in_recorder({
        "pinning.cost_vs_size": experiments.Experiment("pinning.cost_vs_size", 4, "t", lambda q: _cost_data())})
    out = tmp_path / "stand-in.json"
    assert recorder.main(["--out", str(out)]) == 0
    ctx = course.Context(pinning.Mode.REPLAY, "test", None, str(out))
    cd = pinning.live_or_replay(ctx, "pinning.cost_vs_size")
    assert cd.mode is pinning.Mode.REPLAY and cd.data == json.loads(json.dumps(_cost_data()))
    assert "H100" in cd.source
    with pytest.raises(CourseError, match="no recording of experiment 'pinning.memlock'"):
        pinning.live_or_replay(ctx, "pinning.memlock")


def test_chapter4_experiments_are_registered():
    from helpers.core import experiments

    reg = experiments.discover()
    for eid in ("pinning.cost_vs_size", "pinning.register_regions", "pinning.memlock",
                "pinning.write_combined", "zero_copy.vs_copy"):
        assert eid in reg and reg[eid].chapter == 4
