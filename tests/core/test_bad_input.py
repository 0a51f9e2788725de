"""Bad input to the public helpers: a clear CourseError naming the problem, never a crash, a hang
or a silently wrong number. Property-based (hypothesis) where the input space is large.

Covers sizes, dtypes/types, choices (directions, host kinds, modes), timeouts, device
indices, missing tools (strace, nvidia-smi) and missing /proc and /sys entries (malformed
reference files: test_reference.py). Runs without a GPU: validation must happen before any GPU is touched, so
the error is about the input, not about the missing GPU.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.ch01_path_of_a_copy import syscalls
from helpers.ch05_unified_memory import uva
from helpers.ch06_gem_ttm_dmabuf import drm
from helpers.core import mode, progress
from helpers.core.errors import (
    CourseError,
    InputError,
    InputTypeError,
    NoGPUError,
    SystemInfoError,
)
from helpers.measure import driver_api, host_memory, sandbox, transfers

not_ints = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=5), st.none(),
                     st.booleans(), st.lists(st.integers(), max_size=2), st.complex_numbers())


# --- sizes ---------------------------------------------------------------------------

@given(not_ints)
def test_sizes_must_be_whole_numbers(bad):
    with pytest.raises(InputTypeError, match="buffer: size must be a whole number of bytes"):
        host_memory.check_nbytes(bad)


@given(st.integers(max_value=0))
def test_sizes_must_be_positive(bad):
    with pytest.raises(InputError, match=f"size must be a positive number of bytes, got {bad}"):
        host_memory.check_nbytes(bad)


@given(st.integers(min_value=1 << 50, max_value=1 << 80))
def test_sizes_beyond_the_machine_are_refused_before_allocating(huge):
    with pytest.raises(InputError, match="more than 50% of this machine's available memory"):
        host_memory.check_nbytes(huge, "pinned host buffer")


@given(st.integers(min_value=1, max_value=1 << 20))
def test_sensible_sizes_come_back_as_int(n):
    assert host_memory.check_nbytes(n) == n


def test_missing_or_odd_meminfo_is_named(tmp_path):
    with pytest.raises(SystemInfoError, match="nowhere/meminfo"):
        host_memory.available_host_bytes(str(tmp_path / "nowhere" / "meminfo"))
    odd = tmp_path / "meminfo"
    odd.write_text("MemTotal: 1 kB\n")
    with pytest.raises(SystemInfoError, match="no MemAvailable"):
        host_memory.available_host_bytes(str(odd))
    odd.write_text("MemAvailable: lots kB\n")
    with pytest.raises(SystemInfoError, match="cannot read MemAvailable"):
        host_memory.available_host_bytes(str(odd))


@given(st.text(max_size=12).filter(lambda s: s not in host_memory.HOST_KINDS))
def test_host_buffer_kinds(kind):
    with pytest.raises(InputError, match="host buffer kind must be one of"):
        host_memory.HostBuffer(4096, kind)


def test_host_buffers_that_need_a_gpu_say_so(no_gpu):
    for kind in ("pinned", "registered"):
        with pytest.raises(NoGPUError, match="needs a usable CUDA GPU"):
            host_memory.HostBuffer(4096, kind)
    with host_memory.HostBuffer(4096, "pageable") as buf:
        assert buf.array.nbytes == 4096 and int(buf.array[0]) == 0xA5


# --- copies and sweeps -----------------------------------------------------------------

choices = st.one_of(st.text(max_size=8), st.integers(), st.none(), st.lists(st.text(), max_size=2))


@given(choices.filter(lambda d: d not in transfers.DIRECTIONS))
def test_copy_directions(bad):
    with pytest.raises(InputError, match="direction must be one of"):
        transfers.measure_copy(4096, bad)


@given(choices.filter(lambda k: k not in host_memory.HOST_KINDS))
def test_copy_host_kinds(bad):
    with pytest.raises(InputError, match="host_kind must be one of"):
        transfers.measure_copy(4096, "h2d", bad)


@given(st.one_of(st.integers(max_value=0), st.integers(min_value=transfers.MAX_REPS + 1)))
def test_copy_repetitions_in_range(bad):
    with pytest.raises(InputError, match=f"reps must be from 1 to {transfers.MAX_REPS}"):
        transfers.measure_copy(4096, reps=bad)


@given(not_ints)
def test_copy_repetitions_are_whole_numbers(bad):
    with pytest.raises(InputTypeError, match="reps must be a whole number"):
        transfers.measure_copy(4096, reps=bad)


@given(st.one_of(st.floats(max_value=0), st.just(math.nan), st.just(math.inf)))
def test_copy_timeouts_are_finite_and_positive(bad):
    with pytest.raises(InputError, match="timeout_s must be a finite number of seconds, more than 0"):
        transfers.measure_copy(4096, timeout_s=bad)


@given(st.one_of(st.text(max_size=3), st.none(), st.booleans()))
def test_copy_timeouts_are_numbers(bad):
    with pytest.raises(InputTypeError, match="timeout_s must be a number of seconds"):
        transfers.measure_copy(4096, timeout_s=bad)


def test_valid_copy_without_a_gpu_names_the_missing_gpu(no_gpu):
    with pytest.raises(NoGPUError):
        transfers.measure_copy(4096, "h2d", "pageable", reps=1)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(min_value=1, max_value=1 << 40), st.integers(min_value=0, max_value=1 << 40))
def test_sweep_sizes_are_exactly_the_powers_of_two_in_range(lo, span):
    hi = lo + span
    want = [1 << k for k in range(0, 42) if lo <= 1 << k <= hi]
    if want:
        assert transfers.sweep_sizes(lo, hi) == want
    else:
        with pytest.raises(InputError, match="no power of two"):
            transfers.sweep_sizes(lo, hi)


@given(st.one_of(st.tuples(st.integers(max_value=0), st.integers()),
                 st.tuples(st.integers(min_value=2), st.integers(max_value=1))))
def test_sweep_sizes_bad_bounds(bounds):
    with pytest.raises(InputError):
        transfers.sweep_sizes(*bounds)


@given(not_ints)
def test_sweep_sizes_bounds_are_whole_numbers(bad):
    with pytest.raises(InputTypeError, match="lo must be a whole number of bytes"):
        transfers.sweep_sizes(bad, 64)


@pytest.mark.parametrize("kwargs, what", [({"sizes": []}, "at least one size"),
                                          ({"directions": []}, "at least one direction"),
                                          ({"host_kinds": ()}, "at least one host kind"),
                                          ({"directions": ["up"]}, "direction must be one of"),
                                          ({"host_kinds": ["gpu"]}, "host_kind must be one of")])
def test_sweeps_refuse_empty_or_unknown_axes_up_front(kwargs, what):
    args = {"sizes": [4096], **kwargs}
    with pytest.raises(InputError, match=what):
        transfers.sweep(progress=False, **args)


@given(st.one_of(st.floats(), st.text(max_size=3), st.none(), st.booleans()))
def test_progress_totals_are_whole_numbers(bad):
    with pytest.raises(InputTypeError, match="progress total must be a whole number"):
        progress.Progress(bad, "x")


@given(st.integers(max_value=-1))
def test_progress_totals_are_not_negative(bad):
    with pytest.raises(InputError, match="progress total must be at least 0"):
        progress.Progress(bad, "x")


# --- modes, device indices, tools ------------------------------------------------------------

@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=10)
       .filter(lambda s: (s.strip().lower() or "auto") not in ("auto", "live", "replay")))
def test_unknown_course_mode_is_named(value):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("COURSE_MODE", value)
        with pytest.raises(InputError, match="COURSE_MODE="):
            mode.requested()


def test_live_mode_without_a_gpu_says_why(no_gpu, monkeypatch):
    monkeypatch.setenv("COURSE_MODE", "live")
    with pytest.raises(NoGPUError, match="COURSE_MODE=live, but no usable GPU"):
        mode.detect()


@given(st.one_of(st.integers(max_value=-1), st.integers(min_value=64), st.text(max_size=2), st.none(), st.floats()))
def test_device_indices_are_checked(bad):
    """Without a GPU: NoGPUError; with one: an error naming the device index. Never a number."""
    with pytest.raises(CourseError, match="device|GPU"):
        uva.device_attributes(bad)


def test_missing_strace_is_named(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("COURSE_STRACE", raising=False)
    with pytest.raises(syscalls.StraceMissingError):
        syscalls.find_strace()


def test_missing_nvidia_smi_is_not_a_crash(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    assert uva.addressing_mode() is None


def test_missing_sysfs_entries_mean_no_answer_not_a_crash(tmp_path):
    assert uva.uvm_hmm_parameter(str(tmp_path / "no" / "such" / "param")) is None


def test_timeouts_everywhere_are_bounded():
    with pytest.raises(InputError, match="timeout"):
        syscalls.run_child(["true"], 0)
    with pytest.raises(InputError, match="timeout"):
        sandbox.run_python("pass", math.nan)


# --- found by going through the helpers one by one -------------------------------------------

def test_sweep_of_a_number_instead_of_sizes():
    with pytest.raises(InputTypeError, match="sweep needs lists"):
        transfers.sweep(4096, progress=False)


@given(st.one_of(st.integers(max_value=0), st.integers(min_value=driver_api.MAX_EXAMPLE_BYTES + 1), not_ints))
def test_driver_api_example_sizes(bad):
    with pytest.raises(CourseError, match="size"):
        driver_api.seed_pattern(bad)


def test_drm_pattern_is_bounded():
    with pytest.raises(ValueError, match="from 0 to 1 GiB"):
        drm.pattern(1 << 70)  # used to spin building a zettabyte
    assert drm.pattern(3) == bytes([0x5A, 0x79, 0x98])


def test_driver_api_without_a_driver_library_is_no_gpu(monkeypatch):
    """On a machine with the bindings but no libcuda the first call raised cuda.pathfinder's
    DynamicLibNotFoundError; now driver() says there is no GPU."""
    try:
        from cuda.bindings import driver as drv
    except ImportError:
        pytest.skip("cuda.bindings not installed here")

    def no_lib(_flags):
        raise OSError('"cuda" is an NVIDIA driver library and can only be found via system search')

    monkeypatch.setattr(drv, "cuInit", no_lib)
    with pytest.raises(NoGPUError, match="CUDA driver library cannot be loaded"):
        driver_api.driver()
