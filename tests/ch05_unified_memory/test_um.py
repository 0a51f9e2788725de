"""Chapter 5 helpers without a GPU: the sandbox (with CPU-only crashing children), the safe-share
refusal, attribute decoding, the CUDA 12/13 call-form dispatch, and replay conversions of
recorded data (a fake recording built and validated here, as the recorder would write it)."""

import json
import signal
import types

import pytest
from conftest import write_reference

from helpers.ch05_unified_memory import managed, pointer_access, uva
from helpers.core import reference
from helpers.core.errors import InputError, InputTypeError, ReferenceDataError
from helpers.core.evidence import Evidence
from helpers.core.mode import Mode
from helpers.course import Context
from helpers.measure import sandbox

# ---- sandbox -----------------------------------------------------------------------------


def test_sandbox_reports_a_segfault_and_what_came_before():
    o = pointer_access.cpu_write_to_reserved_range()
    assert o.status == "signal"
    assert o.signal_number == signal.SIGSEGV and o.signal_name == "SIGSEGV"
    assert o.results["cpu_mapping"]["perms"] == "---p", "the reserved range must have no access rights"
    assert "returned without a fault" not in o.stdout_tail


def test_sandbox_reports_other_signals_by_name():
    o = sandbox.run_python("import os, signal; os.kill(os.getpid(), signal.SIGABRT)", 20)
    assert (o.status, o.signal_number, o.signal_name) == ("signal", signal.SIGABRT, "SIGABRT")


def test_sandbox_times_out_and_kills_the_child():
    code = "import time\nfrom helpers.measure.sandbox import emit\nemit(started=True)\ntime.sleep(60)"
    o = sandbox.run_python(code, 2.0)
    assert o.status == "timeout" and o.returncode is None
    assert o.results == {"started": True}
    assert o.duration_s < 30


def test_sandbox_ok_and_error_exits():
    ok = sandbox.run_python("from helpers.measure.sandbox import emit; emit(a=1); emit(b=2, a=3)", 20)
    assert ok.status == "ok" and ok.returncode == 0 and ok.results == {"a": 3, "b": 2}
    bad = sandbox.run_python("raise SystemExit(7)", 20)
    assert bad.status == "error" and bad.returncode == 7 and bad.signal_number is None
    exc = sandbox.run_python("1/0", 20)
    assert exc.status == "error" and "ZeroDivisionError" in exc.stderr_tail


@pytest.mark.parametrize("code,timeout,err", [
    ("", 5, InputError), ("   ", 5, InputError), (None, 5, InputTypeError),
    ("pass", 0, InputError), ("pass", -1, InputError), ("pass", 10_000, InputError),
    ("pass", "5", InputTypeError), ("pass", True, InputTypeError)])
def test_sandbox_rejects_bad_arguments(code, timeout, err):
    with pytest.raises(err):
        sandbox.run_python(code, timeout)


def test_parse_results_ignores_noise():
    text = "hello\nRESULT:{\"x\": 1}\nRESULT:not json\nRESULT:[1,2]\nRESULT:{\"y\": 2}\n"
    assert sandbox.parse_results(text) == {"x": 1, "y": 2}


def test_outcome_round_trip_and_bad_records():
    o = sandbox.run_python("pass", 20)
    back = sandbox.Outcome.from_dict(json.loads(json.dumps(o.to_dict())))
    assert back == o
    for bad in ({}, {"status": "exploded"}, [], None):
        with pytest.raises(ReferenceDataError, match="not a recorded sandbox outcome"):
            sandbox.Outcome.from_dict(bad)


def test_signal_names():
    assert sandbox.signal_name(11) == "SIGSEGV"
    assert sandbox.signal_name(None) is None
    assert sandbox.signal_name(200) == "signal 200"


# ---- safe share --------------------------------------------------------------------------

GiB = 1 << 30


def test_safe_share_refuses_oversubscription():
    free = 80 * GiB
    assert managed.check_managed_nbytes(40 * GiB, free_bytes=free) == 40 * GiB
    with pytest.raises(managed.OversubscriptionError, match="refused.*free memory"):
        managed.check_managed_nbytes(40 * GiB + 1, free_bytes=free)
    with pytest.raises(InputError):  # bad input for this machine, refused before anything is allocated
        managed.check_managed_nbytes(200 * GiB, free_bytes=free)
    assert issubclass(managed.OversubscriptionError, InputError)
    assert managed.largest_safe(free) == 40 * GiB


@pytest.mark.parametrize("bad,err", [(0, ValueError), (-5, ValueError), (1.5, TypeError),
                                     ("1", TypeError), (True, TypeError), (None, TypeError)])
def test_safe_share_bad_sizes(bad, err):
    with pytest.raises(err):
        managed.check_managed_nbytes(bad, free_bytes=GiB)


def test_safe_share_bad_share_and_free():
    with pytest.raises(ValueError):
        managed.check_managed_nbytes(1, free_bytes=GiB, share=0)
    with pytest.raises(ValueError):
        managed.check_managed_nbytes(1, free_bytes=-1)


def test_measure_one_rejects_bad_mode_before_touching_a_gpu():
    with pytest.raises(ValueError, match="mode"):
        managed.measure_one(1 << 20, "teleport")


# ---- CUDA 12 / 13 dispatch ---------------------------------------------------------------


def _fake_driver(form: str):
    """A stand-in for cuda.bindings.driver with 13.x ('location'), 12.x-with-_v2 or old 12.x signatures."""
    calls = []

    def mk(name, doc):
        def fn(*args):
            calls.append((name, args))
            return (0,)
        fn.__name__, fn.__doc__ = name, doc
        return fn

    class Loc:
        type = id = None

    d = types.SimpleNamespace(
        CUmemLocation=Loc, CUstream=lambda p: ("stream", p), CUdevice=lambda n: ("dev", n),
        CUmemLocationType=types.SimpleNamespace(CU_MEM_LOCATION_TYPE_HOST="HOST", CU_MEM_LOCATION_TYPE_DEVICE="DEVICE"),
        CUmem_advise=types.SimpleNamespace(**{v: v for v in managed.ADVICE.values()}),
        CUresult=types.SimpleNamespace(CUDA_SUCCESS=0), calls=calls)
    if form == "location":
        d.cuMemPrefetchAsync = mk("cuMemPrefetchAsync", "cuMemPrefetchAsync(devPtr, size_t count, CUmemLocation location: CUmemLocation, unsigned int flags, hStream)")
        d.cuMemAdvise = mk("cuMemAdvise", "cuMemAdvise(devPtr, size_t count, advice: CUmem_advise, CUmemLocation location: CUmemLocation)")
    else:
        d.cuMemPrefetchAsync = mk("cuMemPrefetchAsync", "cuMemPrefetchAsync(devPtr, size_t count, dstDevice, hStream)")
        d.cuMemAdvise = mk("cuMemAdvise", "cuMemAdvise(devPtr, size_t count, advice: CUmem_advise, device)")
        if form == "v2":
            d.cuMemPrefetchAsync_v2 = mk("cuMemPrefetchAsync_v2", "cuMemPrefetchAsync_v2(devPtr, size_t count, location: CUmemLocation, unsigned int flags, hStream)")
            d.cuMemAdvise_v2 = mk("cuMemAdvise_v2", "cuMemAdvise_v2(devPtr, size_t count, advice: CUmem_advise, location: CUmemLocation)")
    return d


@pytest.fixture
def fake_check(monkeypatch):
    from helpers.measure import driver_api

    def check(result, what):
        assert int(result[0]) == 0, what
    monkeypatch.setattr(driver_api, "check", check)


@pytest.mark.parametrize("form,used", [("location", "cuMemPrefetchAsync(location)"),
                                       ("v2", "cuMemPrefetchAsync_v2(location)"),
                                       ("ordinal", "cuMemPrefetchAsync(ordinal)")])
def test_prefetch_uses_the_form_the_bindings_have(fake_check, form, used):
    d = _fake_driver(form)
    assert managed.prefetch(0x1000, 4096, managed.CPU, 7, drv=d) == used
    name, args = d.calls[-1]
    if form == "ordinal":
        assert args == (0x1000, 4096, ("dev", -1), ("stream", 7))
    else:
        assert len(args) == 5 and args[2].type == "HOST" and args[3] == 0 and args[4] == ("stream", 7)
    managed.prefetch(0x1000, 4096, 2, drv=d)
    if form != "ordinal":
        assert d.calls[-1][1][2].type == "DEVICE" and d.calls[-1][1][2].id == 2


@pytest.mark.parametrize("form", ["location", "v2", "ordinal"])
def test_advise_uses_the_form_the_bindings_have(fake_check, form):
    d = _fake_driver(form)
    managed.advise(0x2000, 8192, "accessed_by", 0, drv=d)
    name, args = d.calls[-1]
    assert args[2] == "CU_MEM_ADVISE_SET_ACCESSED_BY"
    assert (args[3] == ("dev", 0)) if form == "ordinal" else (args[3].type == "DEVICE")


def test_advise_and_prefetch_bad_inputs():
    d = _fake_driver("location")
    with pytest.raises(ValueError, match="advice"):
        managed.advise(0, 1, "be_fast", 0, drv=d)
    for bad in (-2, 1.0, "0", True):
        with pytest.raises((ValueError, TypeError), match="device"):
            managed.prefetch(0, 1, bad, drv=d)


def test_real_bindings_signature_is_readable():
    drv = pytest.importorskip("cuda.bindings.driver")
    fn, form = managed.pick(drv, "cuMemPrefetchAsync")
    assert form == "location", "cuda-bindings 12.2+ and 13.x both offer the location form"


# ---- attribute decoding --------------------------------------------------------------------

def test_decode_memory_types():
    assert uva.decode_runtime_type(3) == "managed"
    assert uva.decode_runtime_type(0).startswith("unregistered")
    assert uva.decode_runtime_type(9) == "unknown type 9"
    assert uva.decode_runtime_type(None) == "unknown type None"
    assert uva.decode_driver_type(2) == "CU_MEMORYTYPE_DEVICE"
    assert uva.decode_driver_type("CUDA_ERROR_INVALID_VALUE") == "CUDA_ERROR_INVALID_VALUE"


MAPS = """\
200000000-300200000 ---p 00000000 00:00 0
7f0000000000-7f0000200000 rw-s 00000000 00:05 123                        /dev/nvidia-uvm
7f0000200000-7f0000201000 rw-p 00000000 00:00 0                          [heap]
"""


def test_maps_entry():
    e = uva.maps_entry(0x200001000, MAPS)
    assert e == {"start": 0x200000000, "end": 0x300200000, "perms": "---p", "path": ""}
    assert uva.maps_entry(0x7F0000000010, MAPS)["path"] == "/dev/nvidia-uvm"
    assert uva.maps_entry(0x7F0000201000, MAPS) is None  # the end is exclusive
    assert uva.maps_entry(0x10, MAPS) is None
    with pytest.raises(ValueError):
        uva.maps_entry(-1, MAPS)
    assert uva.maps_entry(id(MAPS)) is not None  # this process's own object lies in a mapping


def test_explain_attributes_follows_the_values():
    base = {"managedMemory": 1, "concurrentManagedAccess": 1, "pageableMemoryAccess": 0}
    text = " ".join(uva.explain_attributes(base))
    assert "may NOT dereference" in text and "page fault" in text
    hmm = " ".join(uva.explain_attributes({**base, "pageableMemoryAccess": 1}))
    assert "HMM" in hmm and "may NOT" not in hmm
    ats = " ".join(uva.explain_attributes({**base, "pageableMemoryAccess": 1,
                                           "pageableMemoryAccessUsesHostPageTables": 1}))
    assert "ATS" in ats
    old = " ".join(uva.explain_attributes({**base, "concurrentManagedAccess": 0}))
    assert "whole allocation moves" in old
    with pytest.raises(ReferenceDataError, match="um.device_attributes"):
        uva.explain_attributes({"managedMemory": 1})


# ---- replay conversions from a fake recording ------------------------------------------------

def _run(n, mode, first, second, **kw):
    r = {"nbytes": n, "mode": mode, "host_fill_s": 0.1, "kernel_first_s": first, "kernel_second_s": second,
         "bad_words": 0, "host_checksum": n // 4096, "host_read_s": 0.05}
    r.update(kw)
    return r


FAKE = {
    "um.fault_vs_prefetch": {"timer": "cuda-event", "skipped": [], "runs": [
        {"nbytes": 1 << 26, "repeat": 0, "fault": {"prefetch_ms": 0.01, "first_read_ms": 9.0},
         "prefetch": {"prefetch_ms": 1.5, "first_read_ms": 0.5}}]},
    "um.migration": {"free_device_bytes_at_start": 80 * GiB, "safe_share": 0.5, "skipped": [], "timer": "x",
                     "runs": [_run(GiB, "fault", 0.110, 0.010), _run(GiB, "prefetch", 0.002, 0.001,
                                                                      prefetch_s=0.025, back_prefetch_s=0.030),
                              _run(GiB, "remote", 0.050, 0.050), _run(GiB, "read_mostly", 0.090, 0.001)]},
    "um.pointer_attributes": {"nbytes": 1 << 20, "pointers": [
        {"kind": "device", "how": "x", "ptr": 0x7F0000000000, "maps": {"perms": "---p", "path": "", "start": 0, "end": 1},
         "runtime": {"type": 2, "device": 0, "devicePointer": 0x7F0000000000, "hostPointer": 0},
         "driver": {"MEMORY_TYPE": 2, "IS_MANAGED": 0, "MAPPED": 1}},
        {"kind": "pageable", "how": "x", "ptr": 0x1000, "maps": None,
         "runtime": {"type": 0, "device": -2, "devicePointer": 0, "hostPointer": 0x1000},
         "driver": {"MEMORY_TYPE": "CUDA_ERROR_INVALID_VALUE"}}]},
    "um.wrong_ways": {"parent_context_ok_before": True, "parent_context_ok_after": True,
                      "host_write_device_ptr": {"status": "signal", "returncode": -11, "signal_number": 11,
                                                "signal_name": "SIGSEGV", "duration_s": 1.0, "timeout_s": 90.0,
                                                "results": {"device_ptr": 1, "cpu_mapping": None}},
                      "gpu_read_malloc_ptr": {"status": "ok", "returncode": 0, "signal_number": None,
                                              "signal_name": None, "duration_s": 2.0, "timeout_s": 90.0,
                                              "results": {"error": "CUDARuntimeError: cudaErrorIllegalAddress"}}},
    "um.correct_ways": {"nbytes": 1024, "ways": [
        {"way": "managed", "gpu_sum": 10, "expected_sum": 10, "cpu_sees_gpu_writes": True},
        {"way": "driver API: seed 003 Example 1", "intact": True, "first16": list(range(16))},
        {"way": "numba.cuda.managed_array", "error": "no GPU"}]},
    "um.device_attributes": {"attributes": {"managedMemory": 1, "concurrentManagedAccess": 1,
                                            "pageableMemoryAccess": 0}, "uvm_disable_hmm": "N", "kernel": "6.8"},
}


def test_migration_rates_and_rows():
    runs = {r["mode"]: r for r in FAKE["um.migration"]["runs"]}
    assert managed.rates(runs["fault"])["to_gpu_gbps"] == pytest.approx(GiB / 0.100 / 1e9)
    assert managed.rates(runs["fault"])["to_cpu_gbps"] == pytest.approx(GiB / 0.05 / 1e9)
    assert managed.rates(runs["prefetch"])["to_gpu_gbps"] == pytest.approx(GiB / 0.025 / 1e9)
    assert managed.rates(runs["prefetch"])["to_cpu_gbps"] == pytest.approx(GiB / 0.030 / 1e9)
    assert managed.rates(runs["remote"])["to_gpu_gbps"] == pytest.approx(GiB / 0.050 / 1e9)
    assert managed.rates(runs["remote"])["fault_overhead_s"] is None
    rows = managed.table_rows(FAKE["um.migration"])
    assert len(rows) == 4 and rows[0][:2] == ("1 GiB", "fault") and rows[0][3] == "110.00"
    line = managed.compare(FAKE["um.migration"])[0]
    assert "prefetch is 4.0x faster" in line
    slower = {"runs": [_run(GiB, "fault", 0.02, 0.01), _run(GiB, "prefetch", 0.01, 0.01, prefetch_s=0.04)]}
    assert "4.0x slower" in managed.compare(slower)[0]  # the verdict follows the numbers
    fig = managed.figure(Evidence("um.migration", FAKE["um.migration"], Mode.REPLAY, "a test machine", why="test"))
    assert fig.modes == [Mode.REPLAY] and len(fig.fig.data) == 6


@pytest.mark.parametrize("bad", [{}, {"runs": []}, {"runs": [{"mode": "fault"}]},
                                 {"runs": [_run(1, "teleport", 1, 1)]}, None])
def test_migration_rejects_malformed_recordings(bad):
    with pytest.raises(ReferenceDataError, match="experiment um.migration"):
        managed.table_rows(bad)


def test_pointer_rows():
    rows = uva.attribute_rows(FAKE["um.pointer_attributes"])
    assert rows[0][2] == "device" and rows[0][4] == "yes" and rows[0][8] == "---p [anon]"
    assert rows[1][2].startswith("unregistered") and rows[1][5] == "CUDA_ERROR_INVALID_VALUE"
    assert rows[1][8] == "not mapped for the CPU"
    with pytest.raises(ReferenceDataError, match="experiment um.pointer_attributes"):
        uva.attribute_rows({"pointers": []})


def test_outcome_rows_and_verdict():
    rows = pointer_access.outcome_rows(FAKE["um.wrong_ways"])
    assert "SIGSEGV" in rows[0][1] and "no CPU mapping at all" in rows[0][2]
    assert "cudaErrorIllegalAddress" in rows[1][2]
    assert "verdict: wrong" in pointer_access.claim_vs_measurement(FAKE["um.wrong_ways"])
    survived = json.loads(json.dumps(FAKE["um.wrong_ways"]))
    survived["host_write_device_ptr"].update(status="ok", returncode=0, signal_number=None, signal_name=None,
                                             results={"gpu_sees": [7] * 16})
    assert "verdict: true here" in pointer_access.claim_vs_measurement(survived)


def test_driver_example_rows():
    assert pointer_access.driver_example(FAKE["um.correct_ways"], 1)["first16"][:2] == [0, 1]
    failed = {"ways": [{"way": "driver API: example3_pinned", "error": "DriverError: x"}]}
    assert pointer_access.driver_example(failed, 3)["error"] == "DriverError: x"
    with pytest.raises(ReferenceDataError, match="no driver API row for Example 2"):
        pointer_access.driver_example(failed, 2)
    with pytest.raises(InputError, match="example"):
        pointer_access.driver_example(failed, 4)


def test_correct_rows():
    rows = pointer_access.correct_rows(FAKE["um.correct_ways"])
    assert rows[0][1:3] == ("yes", "yes")
    assert rows[1][2] == "yes" and "first bytes" in rows[1][3]
    assert rows[2][3] == "no GPU"
    wrong = {"ways": [{"way": "m", "gpu_sum": 9, "expected_sum": 10, "cpu_sees_gpu_writes": False}]}
    assert pointer_access.correct_rows(wrong)[0][1:3] == ("NO", "NO")


def test_expected_sum():
    assert pointer_access.expected_sum(256) == sum(range(256))
    assert pointer_access.expected_sum(1000) == sum(i % 256 for i in range(1000))


@pytest.fixture
def fake_reference(tmp_path, monkeypatch):
    """A reference file holding the FAKE recordings, with a valid checksum, as the recorder writes."""
    write_reference(tmp_path, "fake-um", add=FAKE, chapter=5)
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("COURSE_REFERENCE", "fake-um")
    return reference.load("fake-um")


def test_evidence_replays_every_um_experiment(fake_reference):
    ctx = Context(Mode.REPLAY, "test", gpu_name=None, reference_name="fake-um")
    for exp in FAKE:
        ev = ctx.get(exp)
        assert ev.mode is Mode.REPLAY and ev.data == FAKE[exp] and "REPLAY" in ev.caption("x")
    assert uva.attribute_rows(ctx.get("um.pointer_attributes").data)
    assert pointer_access.driver_example(ctx.get("um.correct_ways").data, 1)["intact"]


def test_evidence_names_a_missing_recording(tmp_path, monkeypatch):
    write_reference(tmp_path, "no-um", drop=("um.migration",))
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path))
    ctx = Context(Mode.REPLAY, "test", gpu_name=None, reference_name="no-um")
    with pytest.raises(ReferenceDataError, match="no recording of 'um.migration'.*helpers.record"):
        ctx.get("um.migration")
    with pytest.raises(ValueError, match="no experiment"):
        ctx.get("um.nonexistent")


@pytest.mark.parametrize("exp,params,err", [
    ("um.migration", {"largest": 1 << 20}, InputError), ("um.migration", {"largest": 2.0}, InputTypeError),
    ("um.device_attributes", {"device": -1}, InputError), ("um.device_attributes", {"device": True}, InputTypeError),
    ("um.wrong_ways", {"timeout_s": 5}, InputError)])
def test_bad_parameters_raise_in_replay(fake_reference, exp, params, err):
    with pytest.raises(err):
        Context(Mode.REPLAY, "test", gpu_name=None, reference_name="fake-um").get(exp, **params)


def test_migration_largest_limits_the_sizes_live(monkeypatch):
    """Live, um.migration runs the registered function with `largest`: no size above it is measured."""
    measured = []
    monkeypatch.setattr(managed.gpu, "cupy", lambda: types.SimpleNamespace(
        cuda=types.SimpleNamespace(Stream=lambda **kw: types.SimpleNamespace(synchronize=lambda: None))))
    monkeypatch.setattr(managed.gpu, "free_device_bytes", lambda: 80 * GiB)
    monkeypatch.setattr(managed.gpu, "release_pools", lambda: None)
    monkeypatch.setattr(managed, "_Kernel", lambda cp: types.SimpleNamespace(
        launch=lambda *a: None, bad=types.SimpleNamespace(data=types.SimpleNamespace(ptr=0))))
    monkeypatch.setattr(managed, "measure_one", lambda n, m, k, s: measured.append(n) or {"nbytes": n, "mode": m})
    ev = Context(Mode.LIVE, "test", gpu_name="Stand-in GPU",
                 reference_name="fake-um").get("um.migration", largest=256 << 20)
    assert ev.mode is Mode.LIVE and sorted(set(measured)) == [16 << 20, 64 << 20, 256 << 20]
    assert len(ev.data["runs"]) == 3 * len(managed.MODES)


def test_um_experiments_are_registered():
    from helpers.core import experiments

    reg = experiments.discover()
    ids = {k for k in reg if k.startswith("um.")}
    assert ids == set(FAKE), "the fake recording must cover every um.* experiment"
    assert all(reg[k].chapter == 5 for k in ids)


def test_kernel_config_and_why_no_hmm():
    cfg = uva.parse_kernel_config("CONFIG_HMM_MIRROR=y\n# CONFIG_DEVICE_PRIVATE is not set\nCONFIG_ZONE_DEVICE=y\n")
    assert cfg == {"CONFIG_HMM_MIRROR": "y", "CONFIG_DEVICE_PRIVATE": "not set", "CONFIG_ZONE_DEVICE": "y"}
    text = " ".join(uva.why_no_hmm({"pageableMemoryAccess": 0}, "N", cfg))
    assert "uvm_disable_hmm=N" in text and "missing CONFIG_DEVICE_PRIVATE" in text
    full = {k: "y" for k in uva.HMM_KERNEL_OPTIONS}
    assert "driver build" in " ".join(uva.why_no_hmm({"pageableMemoryAccess": 0}, "N", full))
    assert "switched off by module parameter" in " ".join(uva.why_no_hmm({"pageableMemoryAccess": 0}, "Y", None))
    assert uva.why_no_hmm({"pageableMemoryAccess": 1}, "N", None) == []


class _FakeDriver:
    """A stand-in for cuda.bindings.driver: allocations are ctypes buffers, copies memmove."""

    class CUresult:
        CUDA_SUCCESS = 0

    def __init__(self):
        import ctypes

        self._ctypes = ctypes
        self.live: dict[int, object] = {}
        self.calls: list[str] = []

    def _alloc(self, n):
        buf = self._ctypes.create_string_buffer(n)
        addr = self._ctypes.addressof(buf)
        self.live[addr] = buf
        return 0, addr

    def _free(self, name, ptr):
        self.calls.append(name)
        self.live.pop(ptr)
        return (0,)

    def _copy(self, name, dst, src, n):
        self.calls.append(name)
        self._ctypes.memmove(dst, src, n)
        return (0,)

    cuInit = staticmethod(lambda flags: (0,))
    cuDeviceGet = staticmethod(lambda i: (0, i))
    cuDevicePrimaryCtxRetain = staticmethod(lambda dev: (0, "ctx"))
    cuCtxPushCurrent = staticmethod(lambda ctx: (0,))
    cuCtxPopCurrent = staticmethod(lambda: (0, "ctx"))
    cuDevicePrimaryCtxRelease = staticmethod(lambda dev: (0,))

    def cuMemAlloc(self, n):
        return self._alloc(n)

    def cuMemHostAlloc(self, n, flags):
        return self._alloc(n)

    def cuMemHostGetDevicePointer(self, hptr, flags):
        return 0, hptr

    def cuMemFree(self, p):
        return self._free("cuMemFree", p)

    def cuMemFreeHost(self, p):
        return self._free("cuMemFreeHost", p)

    def cuMemcpyHtoD(self, d, s, n):
        return self._copy("HtoD", d, s, n)

    def cuMemcpyDtoH(self, d, s, n):
        return self._copy("DtoH", d, s, n)

    def cuMemcpyDtoD(self, d, s, n):
        return self._copy("DtoD", d, s, n)


@pytest.mark.parametrize("example", ["example1_device_roundtrip", "example3_pinned", "example2_done_right"])
def test_driver_api_examples_free_everything(monkeypatch, example):
    """Each seed example moves the pattern intact and frees every allocation it made (fake driver)."""
    from helpers.measure import driver_api

    fake = _FakeDriver()
    monkeypatch.setattr(driver_api, "driver", lambda: fake)
    out = getattr(driver_api, example)(4096)
    assert out["intact"] and out["first16"] == list(range(16))
    assert fake.live == {}, f"{example} left {len(fake.live)} allocation(s) behind"
    assert "DtoH" in fake.calls
