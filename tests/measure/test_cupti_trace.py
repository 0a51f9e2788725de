"""The CUPTI recorder on a fake `cupti` module: what it says when CUPTI cannot run, the window
it opens and closes, the records it builds, and the pure views over them."""

from __future__ import annotations

import pytest
from conftest import needs_gpu
from fake_cupti import ActivityMemcpyKind as MK
from fake_cupti import FakeCupti, kernel, memcpy

from helpers.core.errors import InputError, NoGPUError
from helpers.measure import cupti_trace as ct


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    """Each test starts with no cached answer, no registered callbacks and a GPU that works."""
    ct.unavailable_reason.cache_clear()
    monkeypatch.setattr(ct._State, "callbacks_registered", False)
    monkeypatch.setattr(ct, "_installed", lambda name: True)
    monkeypatch.setattr(ct, "_gpu_reason", lambda: None)
    yield
    ct.unavailable_reason.cache_clear()


def use(monkeypatch, fake):
    monkeypatch.setattr(ct, "_load_cupti", lambda: fake)
    return fake


def two_streams():
    return [memcpy(MK.HTOD, 100, 1350, stream=13, channel=10, corr=1),
            kernel("multiply", 1400, 1720, stream=13, channel=1, corr=2),
            memcpy(MK.DTOH, 1800, 3030, stream=13, channel=12, corr=3),
            memcpy(MK.HTOD, 120, 1500, stream=14, channel=11, corr=4),
            kernel("multiply", 1550, 1900, stream=14, channel=2, corr=5),
            memcpy(MK.DTOH, 1950, 3100, stream=14, channel=13, corr=6)]


# ---------------------------------------------------------------- unavailable_reason


@pytest.mark.parametrize("missing, words", [("cupti", "cupti-python is not installed"),
                                            ("elftools", "pyelftools is missing")])
def test_missing_packages_are_named(monkeypatch, missing, words):
    monkeypatch.setattr(ct, "_installed", lambda name: name != missing)
    monkeypatch.setattr(ct, "_load_cupti", lambda: pytest.fail("must not import cupti"))
    assert words in ct.unavailable_reason()


def test_no_gpu_is_named_before_importing_cupti(monkeypatch):
    monkeypatch.setattr(ct, "_gpu_reason", lambda: "no CUDA driver or device (cudaErrorNoDevice)")
    monkeypatch.setattr(ct, "_load_cupti", lambda: pytest.fail("must not import cupti"))
    why = ct.unavailable_reason()
    assert why.startswith("no usable CUDA GPU or driver") and "cudaErrorNoDevice" in why


def test_a_probe_that_raises_is_an_answer_not_a_crash(monkeypatch):
    def boom():
        raise RuntimeError("probe exploded")
    monkeypatch.setattr(ct, "_gpu_reason", boom)
    assert "probe exploded" in ct.unavailable_reason()


def test_libcupti_not_found_is_named(monkeypatch):
    def load():
        raise OSError("libcupti.so.13: cannot open shared object file: No such file or directory")
    monkeypatch.setattr(ct, "_load_cupti", load)
    assert ct.unavailable_reason().startswith("libcupti was not found")


def test_other_import_failures_are_reported_as_such(monkeypatch):
    def load():
        raise ImportError("No module named 'elftools.elf'")
    monkeypatch.setattr(ct, "_load_cupti", load)
    assert ct.unavailable_reason().startswith("cupti-python cannot be imported")


def test_a_driver_without_profiling_permission_is_explained(monkeypatch):
    use(monkeypatch, FakeCupti(refuse="CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"))
    why = ct.unavailable_reason()
    assert "INSUFFICIENT_PRIVILEGES" in why and "NVreg_RestrictProfilingToAdminUsers" in why


def test_a_bare_status_number_is_named(monkeypatch):
    from fake_cupti import cuptiError

    use(monkeypatch, FakeCupti(refuse=cuptiError(35)))
    why = ct.unavailable_reason()
    assert "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES" in why and "NVreg_RestrictProfilingToAdminUsers" in why


def test_libcupti_missing_at_the_first_call_is_named(monkeypatch):
    use(monkeypatch, FakeCupti(refuse="DynamicLibNotFoundError: Failure finding libcupti.so: not found"))
    assert ct.unavailable_reason().startswith("libcupti was not found")


def test_another_refusal_is_quoted(monkeypatch):
    use(monkeypatch, FakeCupti(refuse="CUPTI_ERROR_NOT_INITIALIZED"))
    why = ct.unavailable_reason()
    assert why.startswith("the driver refused CUPTI") and "NOT_INITIALIZED" in why


def test_a_working_cupti_gives_none_and_leaves_nothing_enabled(monkeypatch):
    fake = use(monkeypatch, FakeCupti())
    assert ct.unavailable_reason() is None
    assert fake.enabled == set() and "flush 1" in fake.calls


# ---------------------------------------------------------------- trace


def test_trace_refuses_with_the_reason_as_a_no_gpu_error(monkeypatch):
    monkeypatch.setattr(ct, "_installed", lambda name: name != "cupti")
    with pytest.raises(NoGPUError, match="cupti-python is not installed"), ct.trace():
        pytest.fail("the block must not run")


def test_trace_collects_sorted_records_and_closes_the_window(monkeypatch):
    fake = use(monkeypatch, FakeCupti(clock=42))
    with ct.trace() as tr:
        assert tr.t0_ns == 42 and tr.records == []
        fake.pending = two_streams()[::-1]
    assert [r["correlation"] for r in tr.records] == [1, 4, 2, 5, 3, 6]
    assert fake.enabled == set() and fake.calls[-1].startswith("disable")
    first = tr.records[0]
    assert first == {"kind": "memcpy", "name": "memcpy HtoD", "copy": "HtoD", "bytes": 64 << 20,
                     "stream": 13, "channel": 10, "channel_type": "async_memcpy",
                     "start_ns": 100, "end_ns": 1350, "correlation": 1, "device": 0}
    assert tr.records[2]["kind"] == "kernel" and tr.records[2]["channel_type"] == "compute"


def test_only_the_asked_kinds_are_enabled(monkeypatch):
    fake = use(monkeypatch, FakeCupti())
    with ct.trace(kinds=["memcpy"]) as tr:
        fake.pending = two_streams()
    assert {r["kind"] for r in tr.records} == {"memcpy"}
    assert not any("CONCURRENT_KERNEL" in c for c in fake.calls if c.startswith("enable"))


@pytest.mark.parametrize("kinds", ["memcpy", [], ["memcpy", "dma"]])
def test_bad_kinds_are_input_errors(monkeypatch, kinds):
    use(monkeypatch, FakeCupti())
    with pytest.raises(InputError), ct.trace(kinds=kinds):
        pass


def test_a_second_trace_while_one_is_open_is_refused(monkeypatch):
    use(monkeypatch, FakeCupti())
    with ct.trace():
        with pytest.raises(ct.TraceBusyError, match="process-global"), ct.trace():
            pass
    with ct.trace():  # the lock is released again
        pass


def test_an_aborted_window_does_not_leak_records_into_the_next(monkeypatch):
    fake = use(monkeypatch, FakeCupti())
    with pytest.raises(KeyError), ct.trace():
        fake.pending = two_streams()
        raise KeyError("learner's bug")
    assert fake.enabled == set()
    with ct.trace() as tr:
        pass
    assert tr.records == []


def test_callbacks_are_registered_once_per_process(monkeypatch):
    fake = use(monkeypatch, FakeCupti())
    for _ in range(3):
        with ct.trace():
            pass
    assert fake.calls.count("register") == 1


def test_unknown_activity_kinds_and_enum_values_are_handled(monkeypatch):
    fake = FakeCupti()
    odd = memcpy(MK.HTOA, 0, 10, ctype=7)
    driver_call = memcpy(MK.HTOD, 0, 10)
    driver_call.kind = 4
    assert ct.record_from_activity(driver_call, fake) is None
    rec = ct.record_from_activity(odd, fake)
    assert rec["copy"] == "" and rec["channel_type"] == "other"
    k = kernel(b"k\xc3\xa9", 0, 5)
    assert ct.record_from_activity(k, fake)["name"] == "ké"


def test_wheel_libcupti_is_found_in_the_cu13_folder(tmp_path):
    lib = tmp_path / "site" / "nvidia" / "cu13" / "lib"
    lib.mkdir(parents=True)
    (lib / "libcupti.so.13").write_bytes(b"")
    assert ct.wheel_libcupti([str(tmp_path / "empty"), str(tmp_path / "site")]) == str(lib / "libcupti.so.13")
    assert ct.wheel_libcupti([str(tmp_path / "empty")]) is None


# ---------------------------------------------------------------- views


def records():
    fake = FakeCupti()
    return [ct.record_from_activity(a, fake) for a in two_streams()]


def test_channels_by_stream():
    assert ct.channels_by_stream(records()) == {
        13: {"DtoH": [12], "HtoD": [10], "kernel": [1]},
        14: {"DtoH": [13], "HtoD": [11], "kernel": [2]}}


def test_lanes_put_compute_first_and_keep_each_channels_records():
    got = [(lane["channel_type"], lane["channel"], len(lane["records"])) for lane in ct.lanes(records())]
    assert got == [("compute", 1, 1), ("compute", 2, 1), ("async_memcpy", 10, 1),
                   ("async_memcpy", 11, 1), ("async_memcpy", 12, 1), ("async_memcpy", 13, 1)]


def test_overlap_of_two_intervals():
    assert ct.overlap_ns((0, 10), (5, 20)) == 5
    assert ct.overlap_ns((0, 10), (10, 20)) == 0
    assert ct.overlap_ns((0, 10), (30, 40)) == 0
    assert ct.overlap((0, 10), (5, 25)) == {"ns": 5, "frac_a": 0.5, "frac_b": 0.25}
    assert ct.overlap((3, 3), (0, 10))["frac_a"] == 0.0


def test_set_overlap_counts_shared_time_once():
    a = [(0, 10), (5, 15), (40, 50)]          # busy 0..15 and 40..50: 25 ns
    b = [(10, 45)]                            # busy 35 ns
    got = ct.set_overlap(a, b)
    assert got["ns"] == 10 and got["frac_a"] == pytest.approx(10 / 25) and got["frac_b"] == pytest.approx(10 / 35)
    assert ct.merged(a) == [(0, 15), (40, 50)]


@pytest.mark.parametrize("bad", [
    "records", [1], [{"kind": "memcpy"}],
    [dict(records()[0], end_ns=0)], [dict(records()[0], kind="dma")],
    [dict(records()[0], stream=True)], [dict(records()[0], bytes=1.5)]])
def test_malformed_records_are_input_errors(bad):
    with pytest.raises(InputError):
        ct.lanes(bad)


def test_a_reversed_interval_is_an_input_error():
    with pytest.raises(InputError):
        ct.overlap_ns((10, 0), (0, 5))


# ---------------------------------------------------------------- on the GPU machine


@needs_gpu
def test_live_trace_of_a_copy_and_a_kernel(monkeypatch):
    """On a GPU with the cuda13 extra: a real window records the copy and the kernel on channels of
    their engines, after t0, on the stream they were issued on (the fakes above stand in elsewhere)."""
    monkeypatch.undo()  # the real probe and the real cupti, not the autouse fixture's stand-ins
    ct.unavailable_reason.cache_clear()
    assert ct.unavailable_reason() is None, ct.unavailable_reason()
    import cupy
    import cupyx

    s = cupy.cuda.Stream(non_blocking=True)
    h = cupyx.empty_pinned(1 << 18, dtype="float32")
    d = cupy.empty(1 << 18, dtype="float32")
    with ct.trace() as tr:
        with s:
            d.set(h, stream=s)
            d *= 2
        s.synchronize()
    copies = [r for r in tr.records if r["copy"] == "HtoD" and r["bytes"] == 1 << 20]
    kernels = [r for r in tr.records if r["kind"] == "kernel"]
    assert copies and kernels and all(r["start_ns"] >= tr.t0_ns for r in tr.records)
    assert copies[0]["channel_type"] == "async_memcpy" and kernels[0]["channel_type"] == "compute"
    assert copies[0]["stream"] == kernels[0]["stream"]
    ct.check_records(tr.records)
