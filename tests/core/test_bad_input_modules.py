"""Bad input to the chapter modules' public helpers (mmio, toy_ring, ttm, buddy, launch,
managed, uva, drm, cpu_time, driver_maps, lab2, cuda_dmabuf, write_combined, sysinfo,
crosscheck, evidence, figures, grading, the toy GPU): a specific CourseError subclass whose
message names the parameter, raised before anything is allocated or started. Malformed
recordings raise ReferenceDataError naming the experiment. Good values at the boundaries
are accepted, so a validation that is too strict fails here too.

Runs without a GPU. The one test that needs a running toy GPU starts one per module and
closes it; the constructor's own validation is checked with the device process forbidden.
"""

from __future__ import annotations

import ctypes
import math
import re
import subprocess
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.ch01_path_of_a_copy import cpu_time, driver_maps, syscalls
from helpers.ch02_mmio_and_bars import mmio
from helpers.ch03_dma_and_copy_engines import crosscheck
from helpers.ch04_pinned_memory import write_combined
from helpers.ch05_unified_memory import managed, pointer_access, uva
from helpers.ch06_gem_ttm_dmabuf import cuda_dmabuf, drm
from helpers.ch07_command_submission import launch, toy_ring
from helpers.core import evidence
from helpers.core.errors import (
    InputError,
    InputTypeError,
    ReferenceDataError,
    SystemInfoError,
)
from helpers.labs import grading, lab2
from helpers.measure import bwcheck, sandbox, sysinfo
from helpers.models import buddy, device_process, ttm
from helpers.models.toygpu import ToyGPU, link, regs
from helpers.models.toygpu import commands as C
from helpers.presentation import figures

# Modest example counts (CI has 2 cores). The fixtures used with @given only forbid things
# (monkeypatched to fail) and hold the same for every example, so sharing them is sound.
FEW = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
SOME = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

# Things that are not whole numbers of bytes (bools are ints in Python, and still wrong).
not_ints = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=5), st.none(),
                     st.booleans(), st.lists(st.integers(), max_size=2))
non_positive = st.integers(max_value=0)
huge = st.integers(min_value=1 << 62, max_value=1 << 90)
bad_sizes = st.one_of(not_ints, non_positive, huge)
# Wrong choices: text that is not a valid name, or not text at all.
junk = st.one_of(st.text(max_size=10), st.integers(), st.none(), st.floats(allow_nan=False))


def choices_except(valid) -> st.SearchStrategy:
    return junk.filter(lambda v: v not in valid)


@pytest.fixture
def no_child(monkeypatch):
    """Fail the test if a helper starts a workload child before validating its input."""
    def refuse(*a, **k):
        raise AssertionError("a child process was started before the input was validated")
    monkeypatch.setattr(syscalls, "run_child", refuse)
    monkeypatch.setattr(subprocess, "run", refuse)


def _fails_if_touched(*_a, **_k):
    raise AssertionError("touched the GPU before validating the input")


# --- mmio (Chapter 2) ---------------------------------------------------------------------------

@FEW
@given(st.one_of(st.integers().filter(lambda w: w not in (1, 2, 4, 8, 16, 32, 64)), not_ints))
def test_mmio_load_width(bad):
    with pytest.raises(InputError, match="width must be a power of two from 1 to 64 bytes"):
        mmio.implied_read_ns(width=bad)


@pytest.mark.parametrize("width", [1, 2, 4, 8, 16, 32, 64])
def test_mmio_every_load_width_is_accepted(width):
    assert mmio.implied_read_ns(nbytes=width, seconds=1e-6, width=width) == pytest.approx(1e3)


@FEW
@given(st.one_of(non_positive, not_ints))
def test_mmio_dma_sizes(bad):
    with pytest.raises(InputError, match="nbytes must be a positive int"):
        mmio.dma_ms(bad)


@FEW
@given(st.integers(max_value=0) | st.integers(min_value=1).filter(lambda n: n % 8))
def test_mmio_uncached_read_sizes(bad):
    with pytest.raises(InputError, match="nbytes must be a positive multiple of width=8"):
        mmio.uc_read_ms(bad, width=8)


def test_mmio_smallest_sizes_are_accepted():
    assert mmio.dma_ms(1) > 0 and mmio.uc_read_ms(8, width=8) > 0


@pytest.mark.parametrize("call", [lambda g: mmio.access_cost(g, mmio.METHODS[0], 64),
                                  lambda g: toy_ring.batching(g, 4, 2),
                                  lambda g: toy_ring.indirect_demo(g, 4)])
@pytest.mark.parametrize("not_a_gpu", [None, "ToyGPU", 0, object()])
def test_toy_gpu_helpers_want_a_toy_gpu(call, not_a_gpu):
    with pytest.raises(InputTypeError, match="expected a ToyGPU, got"):
        call(not_a_gpu)


def test_empty_sweeps_and_figures_are_named():
    with pytest.raises(InputError, match="at least one size"):
        mmio.access_sweep(object(), [])
    with pytest.raises(InputError, match="results from access_sweep"):
        mmio.sweep_figure([], 1)
    with pytest.raises(InputError, match="at least one machine"):
        mmio.aperture_figure([])
    with pytest.raises(InputError, match="results from batching"):
        toy_ring.batching_figure([], 1)


# --- the toy GPU: constructor validation happens before its process starts --------------------

@pytest.fixture
def no_device_process(monkeypatch):
    """Fail the test if ToyGPU() creates its shared memory or starts its process."""
    def refuse(*a, **k):
        raise AssertionError("the toy GPU started before its arguments were validated")
    monkeypatch.setattr(device_process.subprocess, "Popen", refuse)
    monkeypatch.setattr(device_process.SharedBlock, "create", refuse)


toy_bad_kwargs = st.one_of(
    st.builds(lambda v: ({"vram_bytes": v}, "vram_bytes"),
              st.one_of(st.integers(max_value=4096 * 8 - 1), st.integers(min_value=(1 << 30) + 1), not_ints,
                        st.integers(4096 * 8, 1 << 20).filter(lambda n: n % 4096))),
    st.builds(lambda v: ({"sysmem_bytes": v}, "sysmem_bytes"), st.one_of(st.integers(max_value=0), not_ints)),
    st.builds(lambda v: ({"seed": v}, "seed"), st.one_of(st.integers(max_value=-1), not_ints)),
    st.builds(lambda v: ({"timeout": v}, "timeout"),
              st.one_of(st.floats(max_value=0), st.just(math.inf), st.just(math.nan), st.text(max_size=3),
                        st.none(), st.booleans())),
    st.builds(lambda v: ({"start_timeout": v}, "start_timeout"),
              st.one_of(st.floats(max_value=0), st.just(math.inf), st.none())),
    st.builds(lambda v: ({"ring_entries": v}, "ring_entries"),
              st.one_of(st.integers(max_value=1), st.integers(min_value=4097),
                        st.integers(3, 4096).filter(lambda n: n & (n - 1)), not_ints)),
    st.builds(lambda v: ({"link": v}, "link"), st.one_of(st.text(max_size=3), st.integers(), st.just({}))),
)


@FEW
@given(toy_bad_kwargs)
def test_toy_gpu_arguments_are_checked_before_the_device_starts(no_device_process, case):
    kwargs, name = case
    with pytest.raises((InputError, InputTypeError), match=name):
        ToyGPU(**kwargs)


@pytest.mark.parametrize("kwargs", [{"timeout": "1"}, {"timeout": True}, {"start_timeout": None}, {"seed": 1.0},
                                    {"ring_entries": "16"}, {"vram_bytes": 2.0 ** 22}])
def test_toy_gpu_wrong_kinds_of_value_are_type_errors(no_device_process, kwargs):
    with pytest.raises(InputTypeError, match=next(iter(kwargs))):
        ToyGPU(**kwargs)


def test_toy_link_wrong_kinds_of_value_are_type_errors():
    with pytest.raises(InputTypeError, match="LinkParams.jitter must be a finite number"):
        link.LinkParams(jitter="x")
    with pytest.raises(InputError, match="LinkParams.jitter must be a finite number"):
        link.LinkParams(jitter=-0.1)
    with pytest.raises(InputTypeError, match="transaction count must be a whole number"):
        link.LinkModel().uc_reads(1.5)
    with pytest.raises(InputError, match="transaction count must be at least 0"):
        link.LinkModel().wc_writes(-1)


@FEW
@given(st.one_of(
    st.builds(dict, mmio_read_rtt_ns=st.one_of(st.floats(max_value=-1e-9), st.just(math.nan), st.just(math.inf))),
    st.builds(dict, link_gbps=st.just(0.0)), st.builds(dict, jitter=st.text(max_size=2)),
    st.builds(dict, wc_buffer_bytes=st.booleans())))
def test_link_parameters(changes):
    (name,) = changes
    with pytest.raises((InputError, InputTypeError), match=f"LinkParams.{name} must be"):
        link.LinkParams(**changes)


def test_link_model_arguments():
    with pytest.raises(InputTypeError, match="params must be LinkParams"):
        link.LinkModel({"link_gbps": 1})
    with pytest.raises(InputError, match="seed must be at least 0"):
        link.LinkModel(seed=-1)
    for bad in (1.5, "1", True):
        with pytest.raises(InputTypeError, match="seed must be a whole number"):
            link.LinkModel(seed=bad)
    with pytest.raises(InputError, match="placement must be one of"):
        link.FabricParams(placement="moon")
    with pytest.raises(InputError, match=r"FabricParams.card_gbps and .switch_gbps must be > 0, got 0 and 26.0"):
        link.FabricParams(card_gbps=0)
    assert link.FabricParams(rc_p2p_gbps=0).peer_gbps() > 0  # same switch: the root complex is not on the path
    with pytest.raises(InputError, match="no peer path on placement 'root_ports'"):
        link.card_dma_ns(link.LinkModel(), link.FabricParams(placement="root_ports",
                                                             rc_p2p_gbps=0), 4096, peer=True)
    assert link.LinkModel(seed=0).params == link.LinkParams()


@FEW
@given(st.one_of(st.floats(), st.text(max_size=3), st.none(), st.booleans()))
def test_command_arguments_must_be_ints(bad):
    with pytest.raises(InputTypeError, match=r"FILL argument \d must be an int, got"):
        C.fill(bad, 8, 1)


@FEW
@given(st.one_of(st.integers(max_value=-1), st.integers(min_value=1 << 64)))
def test_command_arguments_must_fit_64_bits(bad):
    with pytest.raises(InputError, match="does not fit in 64 unsigned bits"):
        C.fill(4096, bad, 1)


def test_command_boundaries_and_descriptors():
    assert C.fill(0, (1 << 64) - 1, 0).shape == (C.ENTRY_WORDS,)
    with pytest.raises(InputTypeError, match="saxpy scale a must be a number"):
        C.saxpy(0, 0, 1, "2")
    with pytest.raises(InputError, match="descriptor 0 must be"):
        C.descriptors([(1, 2)])
    with pytest.raises(InputError, match="descriptor 0 field 2"):
        C.descriptors([(1, 2, -3)])


@FEW
@given(st.text(max_size=8).filter(lambda s: s.upper() not in regs.BY_NAME))
def test_register_names(bad):
    with pytest.raises(InputError, match="no register"):
        regs.register(bad)


def test_register_name_type():
    with pytest.raises(InputTypeError, match="register name must be a str"):
        regs.register(0x10)


# One toy GPU for the tests that need a running device; closed at the end of the module.
@pytest.fixture(scope="module")
def toy():
    with ToyGPU(vram_bytes=1 << 20, sysmem_bytes=1 << 20, ring_entries=16) as gpu:
        yield gpu
    assert not gpu.alive


@SOME
@given(st.one_of(st.integers(max_value=0), st.integers(min_value=16), not_ints))
def test_batch_sizes_are_checked_before_anything_is_submitted(toy, bad):
    before = toy.counters.copy()
    with pytest.raises((InputError, InputTypeError), match=r"batch \(at most the ring size - 1\) must be (from 1 to 15|a whole)"):
        toy_ring.batching(toy, 4, bad)
    with pytest.raises((InputError, InputTypeError), match="n_commands must be (at least 1|a whole number)"):
        toy_ring.batching(toy, bad if not isinstance(bad, int) or bad < 1 else 0, 2)
    d = toy.counters - before
    assert (d.doorbells, d.mmio_writes, d.mmio_reads) == (0, 0, 0)


@SOME
@given(st.one_of(choices_except(mmio.METHODS)), st.one_of(st.integers(max_value=63),
                                                          st.integers(65, 1 << 20).filter(lambda n: n % 64)))
def test_access_methods_and_sizes_are_checked_before_any_access(toy, method, nbytes):
    before = toy.counters.copy()
    with pytest.raises(InputError, match="method must be one of"):
        mmio.access_cost(toy, method, 64)
    with pytest.raises(InputError, match="nbytes must be a positive multiple of 64"):
        mmio.access_cost(toy, mmio.METHODS[0], nbytes)
    d = toy.counters - before
    assert (d.mmio_reads, d.bar_bytes_read, d.bar_bytes_written) == (0, 0, 0)


def test_toy_gpu_boundaries_are_accepted(toy):
    assert toy_ring.batching(toy, 1, 15)["batch"] == 15
    assert toy_ring.indirect_demo(toy, 1)["ok"]
    assert mmio.access_cost(toy, mmio.METHODS[1], 64)["transactions"] == 8
    with pytest.raises(InputError, match=f"n must be from 1 to {C.MAX_IB_ENTRIES}"):
        toy_ring.indirect_demo(toy, C.MAX_IB_ENTRIES + 1)
    with pytest.raises(InputError, match="mode must be 'wc'"):
        toy.bar1_write(0, bytes(64), mode="wb")
    with pytest.raises(InputError, match="runs past the aperture"):
        toy.bar1_read((1 << 20) - 64, 128)
    with pytest.raises(InputError, match="how must be 'irq', 'poll' or 'register'"):
        toy.wait(0, how="spin")


# --- TTM and the buddy allocator (Chapter 6, Lab 4) -----------------------------------------------

@FEW
@given(bad_sizes.filter(lambda v: not (isinstance(v, int) and not isinstance(v, bool) and v > 0)))
def test_ttm_model_sizes(bad):
    with pytest.raises((InputError, InputTypeError), match="vram_bytes must be"):
        ttm.TTMModel(bad, 1 << 20)
    with pytest.raises((InputError, InputTypeError), match="gtt_bytes must be"):
        ttm.TTMModel(4 << 20, bad)


@FEW
@given(st.text(max_size=8).filter(lambda p: p not in ttm.POLICIES))
def test_ttm_policy_names(bad):
    with pytest.raises(InputError, match=f"unknown policy {re.escape(repr(bad))}; choose one of"):
        ttm.TTMModel(4 << 20, 1 << 20, policy=bad)


@pytest.mark.parametrize("bad", [None, 3, 1.5])
def test_ttm_policy_types(bad):
    with pytest.raises(InputTypeError, match="policy must be a name or a function"):
        ttm.TTMModel(4 << 20, 1 << 20, policy=bad)


@FEW
@given(st.one_of(
    st.builds(lambda v: ({"name": v}, "name must be a non-empty str"), st.one_of(st.just(""), st.integers(), st.none())),
    st.builds(lambda v: ({"size": v}, r"size must be (a whole number of bytes|a positive number of bytes)"),
              st.one_of(non_positive, not_ints)),
    st.builds(lambda v: ({"priority": v}, r"priority \(below TTM_MAX_BO_PRIORITY\) must be "
                                          rf"(a whole number|from 0 to {ttm.TTM_MAX_BO_PRIORITY - 1})"),
              st.one_of(st.integers(max_value=-1), st.integers(min_value=ttm.TTM_MAX_BO_PRIORITY), st.floats(), st.none(),
                        st.booleans())),
    st.builds(lambda v: ({"placements": v}, "placements must be a non-empty list of distinct domains"),
              st.sampled_from([(), (ttm.Domain.VRAM, ttm.Domain.VRAM)]))))
def test_ttm_create_arguments(case):
    kwargs, what = case
    m = ttm.TTMModel(4 << 20, 1 << 20)
    args = {"name": "bo", "size": 64 << 10, **kwargs}
    with pytest.raises((InputError, InputTypeError), match=what):
        m.create(**args)
    assert m.bos == {} and m.moves == [] and m.vram.largest_free() == 4 << 20


def test_ttm_boundaries_and_names():
    m = ttm.TTMModel(4 << 20, 1 << 20)
    m.create("a", 1, priority=ttm.TTM_MAX_BO_PRIORITY - 1)
    with pytest.raises(InputError, match="a BO named 'a' already exists"):
        m.create("a", 64 << 10)
    with pytest.raises(InputError, match="no BO named 'b'"):
        m.destroy("b")
    with pytest.raises(InputError, match="contiguous only applies"):
        m.create("c", 64 << 10, placements=(ttm.Domain.GTT,), contiguous=True)


@FEW
@given(choices_except(ttm.WORKLOADS), st.one_of(st.integers(max_value=(4 << 20) - 1), not_ints),
       st.one_of(non_positive, st.floats(), st.text(max_size=2), st.none()))
def test_ttm_workload_arguments(name, vram, steps):
    with pytest.raises(InputError, match="unknown workload"):
        ttm.workload(name, 4 << 20)
    with pytest.raises((InputError, InputTypeError), match=r"vram_bytes \(4 MiB or more\) must be"):
        ttm.workload("fits", vram)
    with pytest.raises((InputError, InputTypeError), match="steps must be"):
        ttm.workload("fits", 4 << 20, steps=steps)
    assert ttm.workload("fits", 4 << 20, steps=1)


def test_ttm_link_fit_needs_both_directions():
    h2d = {"host_kind": "pinned", "direction": "h2d", "nbytes": [4, 1 << 20], "median_s": [1e-5, 1e-4]}
    with pytest.raises(InputError, match="the recording has no pinned/d2h series"):
        ttm.LinkModel.from_sweep({"series": [h2d]}, "fake machine")
    d2h = dict(h2d, direction="d2h")
    link = ttm.LinkModel.from_sweep({"series": [h2d, d2h]}, "fake machine")
    assert link.h2d_bytes_per_s == pytest.approx(((1 << 20) - 4) / 9e-5)  # the line through both points
    assert link.source == "pinned-copy fit of fake machine"


@FEW
@given(st.one_of(st.floats(), st.text(max_size=3), st.none(), st.booleans()), st.integers(max_value=0))
def test_buddy_sizes(wrong_type, too_small):
    with pytest.raises(InputTypeError, match="size must be a whole number"):
        buddy.BuddyAllocator(wrong_type)
    with pytest.raises(InputError, match="size must be at least 1"):
        buddy.BuddyAllocator(too_small)
    a = buddy.BuddyAllocator(1 << 20, 4096)
    with pytest.raises(InputTypeError, match="size must be a whole number"):
        a.alloc(wrong_type)
    with pytest.raises(InputError, match="size must be at least 1"):
        a.alloc(too_small)
    assert a.largest_free() == 1 << 20


@FEW
@given(st.integers(1, 1 << 20).filter(lambda n: n & (n - 1)))
def test_buddy_chunk_and_block_sizes(not_pow2):
    with pytest.raises(InputError, match="chunk_size must be a power of two"):
        buddy.BuddyAllocator(1 << 22, not_pow2)
    a = buddy.BuddyAllocator(1 << 22, 4096)
    with pytest.raises(InputError, match="min_block_size must be a power of two >= chunk size"):
        a.alloc(1 << 20, min_block_size=not_pow2)
    if not_pow2 % 4096:
        with pytest.raises(InputError, match="is not a multiple of the chunk size 4096"):
            a.alloc(not_pow2)
    assert a.largest_free() == 1 << 22


def test_buddy_boundaries_and_double_free():
    a = buddy.BuddyAllocator(4096, 4096)  # size == chunk_size: the smallest allocator
    (b,) = a.alloc(4096)
    a.free_block(b)
    with pytest.raises(InputError, match="not allocated \\(double free\\?\\)"):
        a.free_block(b)
    with pytest.raises(InputTypeError, match="expected a Block"):
        a.free_block(0)
    with pytest.raises(InputError, match=r"size \(4095\) must be at least chunk_size \(4096\)"):
        buddy.BuddyAllocator(4095, 4096)


# --- launch, managed, uva, pointer_access (Chapters 4 and 5) -----------------------------------------

@FEW
@given(st.one_of(
    st.builds(lambda v: ({"kind": v}, "kind must be one of"), choices_except(launch.LAUNCH_KINDS)),
    st.builds(lambda v: ({"n": v}, "n must be (a whole number|from 1 to)"),
              st.one_of(non_positive, st.integers(min_value=launch.MAX_LAUNCHES + 1), not_ints)),
    st.builds(lambda v: ({"blocks": v}, "blocks must be (a whole number|from 1 to 100)"),
              st.one_of(non_positive, st.integers(min_value=101), not_ints)),
    st.builds(lambda v: ({"hold_s": v}, "hold_s must be a (finite )?number of seconds"),
              st.one_of(st.floats(max_value=0), st.floats(min_value=1.0001), st.just(math.nan), st.booleans(),
                        st.text(max_size=2), st.none()))))
def test_launch_arguments_are_checked_before_the_gpu(monkeypatch, case):
    kwargs, what = case
    monkeypatch.setattr(launch.gpu, "cupy", _fails_if_touched)
    with pytest.raises((InputError, InputTypeError), match=what):
        launch.queued_launches(**kwargs)


@FEW
@given(st.one_of(st.floats(), st.text(max_size=3), st.none(), st.booleans()))
def test_managed_sizes_must_be_whole(bad):
    with pytest.raises(InputTypeError, match="managed allocation: size must be a whole number of bytes"):
        managed.check_managed_nbytes(bad, free_bytes=1 << 30)


@FEW
@given(non_positive, st.one_of(st.floats(max_value=0), st.floats(min_value=1.0001), st.just(math.nan),
                               st.text(max_size=2), st.none(), st.booleans()))
def test_managed_sizes_and_shares(size, share):
    with pytest.raises(InputError, match="managed allocation: size must be a positive number of bytes"):
        managed.check_managed_nbytes(size, free_bytes=1 << 30)
    with pytest.raises((InputError, InputTypeError), match="share must be"):
        managed.check_managed_nbytes(4096, free_bytes=1 << 30, share=share)


def test_managed_boundaries():
    assert managed.check_managed_nbytes(1 << 20, free_bytes=2 << 20, share=0.5) == 1 << 20
    assert managed.check_managed_nbytes(1, free_bytes=1, share=1) == 1
    with pytest.raises(managed.OversubscriptionError, match="refused"):
        managed.check_managed_nbytes((1 << 20) + 1, free_bytes=2 << 20, share=0.5)
    with pytest.raises(InputError, match="free device memory must be at least 0"):
        managed.check_managed_nbytes(1, free_bytes=-1)


bad_devices = st.one_of(st.integers(max_value=-2), st.floats(), st.text(max_size=3), st.none(), st.booleans())


@FEW
@given(bad_devices)
def test_managed_device_indices_are_checked_before_any_call(bad):
    drv = SimpleNamespace()  # no functions: any call into it fails the test with AttributeError
    with pytest.raises((InputError, InputTypeError), match=r"device \(a GPU ordinal 0, 1, ... or CPU = -1\) must be"):
        managed.prefetch(0x1000, 4096, bad, drv=drv)
    with pytest.raises((InputError, InputTypeError), match="device \\(a GPU ordinal"):
        managed.advise(0x1000, 4096, next(iter(managed.ADVICE)), bad, drv=drv)


@FEW
@given(choices_except(tuple(managed.ADVICE)))
def test_managed_advice_names(bad):
    with pytest.raises(InputError, match="advice must be one of"):
        managed.advise(0x1000, 4096, bad, 0, drv=SimpleNamespace())


@FEW
@given(choices_except(managed.MODES))
def test_managed_migration_modes_are_checked_before_the_gpu(monkeypatch, bad):
    monkeypatch.setattr(managed.gpu, "cupy", _fails_if_touched)
    monkeypatch.setattr(managed.gpu, "free_device_bytes", _fails_if_touched)
    with pytest.raises(InputError, match="mode must be one of"):
        managed.measure_one(1 << 20, bad)


@pytest.mark.parametrize("data, what", [
    ({}, "experiment um.migration: the data has no runs"),
    ({"runs": []}, "experiment um.migration: the data has no runs"),
    ("runs", "experiment um.migration: the data has no runs"),
    ({"runs": [{"nbytes": 1, "mode": "fault"}]}, r"experiment um.migration: malformed run \(missing \["),
    ({"runs": [{"nbytes": 1, "mode": "teleport", "kernel_first_s": 1, "kernel_second_s": 1, "host_read_s": 1,
                "bad_words": 0}]}, "malformed run .* mode 'teleport'"),
])
def test_malformed_migration_recordings(data, what):
    with pytest.raises(ReferenceDataError, match=what):
        managed.table_rows(data)


@pytest.mark.parametrize("fn, data, what", [
    (uva.attribute_rows, {}, "experiment um.pointer_attributes: the data has no 'pointers' list"),
    (uva.attribute_rows, {"pointers": []}, "experiment um.pointer_attributes"),
    (pointer_access.correct_rows, {"ways": None}, "experiment um.correct_ways: the data has no 'ways' list"),
    (uva.explain_attributes, {"managedMemory": 1},
     r"device attributes lack \['pageableMemoryAccess', 'concurrentManagedAccess'\]: .*um.device_attributes"),
    (sandbox.Outcome.from_dict, {"status": "exploded"}, "not a recorded sandbox outcome"),
    (sandbox.Outcome.from_dict, [], "not a recorded sandbox outcome"),
])
def test_malformed_recordings_name_the_experiment(fn, data, what):
    with pytest.raises(ReferenceDataError, match=what):
        fn(data)


@FEW
@given(st.one_of(st.integers(max_value=-1), st.floats(), st.text(max_size=3), st.none(), st.booleans()))
def test_uva_addresses(bad):
    with pytest.raises((InputError, InputTypeError), match="address must be"):
        uva.maps_entry(bad, maps_text="")


def test_uva_address_boundaries():
    text = "00001000-00002000 r--p 00000000 00:00 0 \n"
    assert uva.maps_entry(0, text) is None
    assert uva.maps_entry(0x1000, text)["perms"] == "r--p"


# --- processes and tools: cpu_time, driver_maps, crosscheck, sysinfo ------------------------------

@FEW
@given(st.one_of(
    st.builds(lambda v: ({"sched": v}, "sched must be one of"), choices_except(cpu_time.SCHEDS)),
    st.builds(lambda v: ({"nbytes": v}, "copy size must be"),
              st.one_of(st.integers(max_value=(1 << 20) - 1), st.integers(min_value=(1 << 30) + 1), not_ints)),
    st.builds(lambda v: ({"reps": v}, "reps must be"),
              st.one_of(non_positive, st.integers(min_value=101), not_ints))))
def test_cpu_time_arguments_are_checked_before_the_child_starts(no_child, case):
    kwargs, what = case
    with pytest.raises((InputError, InputTypeError), match=what):
        cpu_time.measure(**kwargs)


def test_cpu_time_boundaries_reach_the_child(monkeypatch):
    seen = []
    monkeypatch.setattr(syscalls, "run_child", lambda args, *a: seen.append(args[-5:-2])
                        or SimpleNamespace(returncode=0, stdout='{"ok": 1}\n', stderr=""))
    assert cpu_time.measure(1 << 20, 1, "blocking") == {"ok": 1}
    assert cpu_time.measure(1 << 30, 100, "auto") == {"ok": 1}
    assert seen == [[str(1 << 20), "1", "blocking"], [str(1 << 30), "100", "auto"]]
    with pytest.raises(InputError, match="a run must move bytes in positive time"):
        cpu_time.per_gb({"nbytes": 0, "reps": 1, "wall": 1})


@FEW
@given(st.one_of(st.integers(max_value=4095), st.integers(min_value=(1 << 30) + 1), not_ints))
def test_driver_maps_sizes_are_checked_before_the_child_starts(no_child, bad):
    with pytest.raises((InputError, InputTypeError), match="maps workload size must be"):
        driver_maps.record(bad)


def test_crosscheck_inputs_and_a_failing_tool(monkeypatch, tmp_path):
    for bad in (0, -1.5):
        with pytest.raises(InputError, match="C bandwidth must be positive"):
            crosscheck.agreement(10, bad)
    assert crosscheck.agreement(10, 10) == 0
    fig = {"gated_median_s": 1e-6, "isolated_median_s": 2e-6}
    with pytest.raises(InputError, match="both measurements need a 'h2d' entry"):
        crosscheck.small_copy_comparison({}, {})
    course = {d: {"4": fig} for d in crosscheck.DIRECTIONS}
    with pytest.raises(InputError, match=f"the C program has no {crosscheck.DIRECTIONS[0]} figure for 4 bytes"):
        crosscheck.small_copy_comparison(course, {d: {} for d in crosscheck.DIRECTIONS})
    failing = tmp_path / "bwcheck"
    failing.write_text("#!/bin/sh\necho 'no CUDA device' >&2\nexit 3\n")
    failing.chmod(0o755)
    monkeypatch.setattr(bwcheck, "binary", lambda: failing)
    with pytest.raises(SystemInfoError, match="bwcheck exited 3: no CUDA device"):
        crosscheck.run_bwcheck(1 << 20, 1, timeout_s=30)
    with pytest.raises(SystemInfoError, match="bwcheck --small exited 3: no CUDA device"):
        crosscheck.run_bwcheck_small(1, timeout_s=30)


@FEW
@given(st.lists(st.text(alphabet="0x123abcz ", max_size=12), min_size=1, max_size=3)
       .filter(lambda ls: any(len(x.split()) != 3 for x in ls)))
def test_resource_text_with_wrong_field_counts(lines):
    with pytest.raises(InputError, match=r"resource line \d+ (has \d+ fields, expected 3|is not three hex numbers)"):
        sysinfo.parse_resource("\n".join(x if x.strip() else "0x0 0x0" for x in lines))


def test_unreadable_sysfs_resource_file_names_the_file(fake_sysfs):
    dev = next(p for p in (fake_sysfs / "bus" / "pci" / "devices").iterdir() if (p / "resource").exists())
    (dev / "resource").write_text("0x0 0xzz 0x0\n")
    with pytest.raises(SystemInfoError, match=f"{dev / 'resource'}: resource line 0 is not three hex numbers"):
        sysinfo.read_pci_device(dev)


# --- DRM and dma-buf (Chapter 6) ------------------------------------------------------------------

@FEW
@given(st.one_of(st.integers(max_value=-1), st.integers(min_value=1 << 32)))
def test_ioctl_numbers_out_of_range(bad):
    with pytest.raises(InputError, match="is not a 32-bit ioctl number"):
        drm.decode_ioctl(bad)


@FEW
@given(st.one_of(st.floats(), st.text(max_size=3), st.none(), st.booleans()))
def test_ioctl_numbers_of_the_wrong_type(bad):
    with pytest.raises(InputTypeError, match="request must be an int"):
        drm.decode_ioctl(bad)
    with pytest.raises(InputTypeError, match="request must be an int"):
        drm.ioctl(0, bad, drm.DrmGetCap())


@FEW
@given(st.sampled_from(["direction", "nr", "size"]), st.one_of(st.integers(max_value=-1), st.integers(min_value=1 << 14)))
def test_ioc_fields_must_fit(field, bad):
    args = {"direction": 3, "type_": "d", "nr": 0, "size": 8, field: bad}
    with pytest.raises(InputError, match=f"_IOC {field}={bad} does not fit in"):
        drm._IOC(**args)


def test_ioc_boundaries_and_types():
    assert drm.decode_ioctl(drm._IOC(3, "d", 0xFF, (1 << 14) - 1))["size"] == (1 << 14) - 1
    assert drm.decode_ioctl(drm._IOC(0, 0, 0, 0))["nr"] == 0
    with pytest.raises(InputError, match="ioctl type must be one character"):
        drm._IO("dd", 1)
    with pytest.raises(InputTypeError, match="ioctl type must be an int or a 1-char str"):
        drm._IO(None, 1)
    with pytest.raises(InputTypeError, match="ioctl argument type must be a ctypes type or a size in bytes"):
        drm._IOR("d", 1, "struct")


@FEW
@given(st.one_of(st.integers(max_value=-1), st.floats(), st.text(max_size=2), st.none(), st.booleans()))
def test_drm_file_descriptors(bad):
    with pytest.raises(InputError, match=r"fd must be an open file descriptor \(int >= 0\)"):
        drm.ioctl(bad, drm.DRM_IOCTL_GET_CAP, drm.DrmGetCap())
    with pytest.raises(InputError, match="fd must be an int >= 0"):
        drm.read_fdinfo(bad)


def test_drm_argument_shapes():
    with pytest.raises(InputTypeError, match="arg must be a ctypes.Structure instance"):
        drm.ioctl(0, drm.DRM_IOCTL_GET_CAP, b"\0" * 16)

    class Wrong(ctypes.Structure):
        _fields_ = [("x", ctypes.c_uint8)]

    with pytest.raises(InputError, match="encodes a 16-byte argument, but Wrong is 1 bytes"):
        drm.ioctl(0, drm.DRM_IOCTL_GET_CAP, Wrong())
    with pytest.raises(InputTypeError, match="text must be str"):
        drm.parse_fdinfo(b"size:\t4096")
    with pytest.raises(InputTypeError, match="path must be a str or path"):
        drm.DRMDevice(3)
    with pytest.raises(InputError, match="prefer must be 'primary' or 'render'"):
        drm.default_node("card")


@FEW
@given(st.one_of(st.integers().filter(lambda f: f & ~(drm.DMA_BUF_SYNC_RW | drm.DMA_BUF_SYNC_END)
                                      or not f & drm.DMA_BUF_SYNC_RW)))
def test_dma_buf_sync_flags(bad):
    with pytest.raises(InputError, match="flags must be READ and/or WRITE, optionally with END"):
        drm.dma_buf_sync(0, bad)


@pytest.mark.parametrize("bad", [None, "READ", 1.0, True])
def test_dma_buf_sync_flag_types(bad):
    with pytest.raises(InputTypeError, match=r"flags must be an int \(DMA_BUF_SYNC_\*\)"):
        drm.dma_buf_sync(0, bad)


@FEW
@given(st.one_of(st.integers(max_value=-1), st.integers(min_value=(1 << 30) + 1), not_ints))
def test_drm_pattern_sizes(bad):
    with pytest.raises(InputError, match="nbytes must be an int from 0 to 1 GiB"):
        drm.pattern(bad)


@FEW
@given(st.one_of(st.integers(max_value=0), st.integers(min_value=1).filter(lambda n: n % 4096), not_ints),
       st.one_of(st.integers(max_value=-1), st.integers(min_value=256), st.floats(), st.text(max_size=2)))
def test_dmabuf_export_arguments_are_checked_before_the_gpu(no_gpu, nbytes, fill):
    with pytest.raises((InputError, InputTypeError), match="nbytes must be"):
        cuda_dmabuf.export_device_memory(nbytes)
    with pytest.raises((InputError, InputTypeError), match=r"fill \(a byte value\) must be"):
        cuda_dmabuf.export_device_memory(4096, fill)


@pytest.mark.parametrize("bad", [None, [], "ok", 3])
def test_dmabuf_results_must_be_dicts(bad):
    with pytest.raises(InputTypeError, match="result must be a dict"):
        cuda_dmabuf.summary_rows(bad)
    with pytest.raises(InputTypeError, match="result must be a dict"):
        cuda_dmabuf.explain(bad)


# --- bandwidth lab, write-combined, evidence, figures, grading ------------------------------------

@FEW
@given(choices_except(("h2d", "d2h")), st.one_of(non_positive, not_ints))
def test_lab2_copy_arguments(no_gpu, direction, nbytes):
    with pytest.raises(InputError, match="direction must be 'h2d' or 'd2h'"):
        with lab2.simulated_copy(1 << 20, direction):
            pass
    with pytest.raises(InputError, match="direction must be 'h2d' or 'd2h'"):
        with lab2.live_copy(1 << 20, direction):
            pass
    with pytest.raises(InputError, match="nbytes must be a positive whole number of bytes"):
        with lab2.simulated_copy(nbytes):
            pass


def test_lab2_boundaries_and_the_fake_runtime():
    for direction in ("h2d", "d2h"):
        with lab2.simulated_copy(1, direction, t0_s=1e-6, bw_Bps=1e9) as job:
            assert job.cuda.copy_time(1) == pytest.approx(1e-6 + 1e-9)
    with lab2.simulated_copy(np.int64(4096)) as job:
        with pytest.raises(InputError, match=r"memcpyAsync: kind 7 is not host-to-device \(1\) or device-to-host \(2\)"):
            job.cuda.runtime.memcpyAsync(job.dst, job.src, 4096, 7, job.stream)


@FEW
@given(choices_except(write_combined.KINDS))
def test_write_combined_kinds_are_checked_before_pinning(monkeypatch, bad):
    monkeypatch.setattr(write_combined, "PinnedAlloc", _fails_if_touched)
    with pytest.raises(InputError, match="kind must be one of"):
        write_combined.measure(1 << 20, bad)


@pytest.mark.parametrize("bad", [np.zeros(4095, np.uint8), np.zeros(4096, np.float32), np.zeros((64, 64), np.uint8)])
def test_write_combined_read_buffers(bad):
    with pytest.raises(InputError, match="cpu_read_gbps needs a 1-D uint8 array of at least 4096 bytes"):
        write_combined.cpu_read_gbps(bad)
    assert write_combined.cpu_read_gbps(np.zeros(4096, np.uint8), reps=1)[1] == 4096


@FEW
@given(st.text(max_size=15).filter(lambda s: "." not in s))
def test_evidence_of_an_unregistered_experiment(bad):
    with pytest.raises(InputError, match=f"no experiment {re.escape(repr(bad))} is registered"):
        evidence.get(SimpleNamespace(live=False), bad)


def test_figures_and_checks_need_their_names():
    import plotly.graph_objects as go

    with pytest.raises(InputError, match="needs at least one \\(mode, source\\) provenance part"):
        figures.CourseFigure(go.Figure(), [])
    for bad, exc in (("", InputError), (None, InputTypeError), (3, InputTypeError)):
        with pytest.raises(exc, match="a check's grade_id \\(its cell's nbgrader grade_id\\) must"):
            grading.check(bad)


def test_no_plain_builtin_raises_remain_in_public_modules():
    """Every deliberate raise in helpers/ is a CourseError subclass (the kernel lab's guest programs,
    package data that runs in the VM with the standard library alone, aside)."""
    from helpers.measure.kernel_vm import bundle

    root = Path(__file__).resolve().parents[2] / "helpers"
    left = [f"{p.relative_to(root)}:{i}" for p in sorted(root.rglob("*.py"))
            if p.name != "errors.py" and bundle.SOURCES not in p.parents
            for i, line in enumerate(p.read_text().splitlines(), 1)
            if any(f"raise {e}(" in line for e in ("ValueError", "TypeError", "RuntimeError"))]
    assert left == []
