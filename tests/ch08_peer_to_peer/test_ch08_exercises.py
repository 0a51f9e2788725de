"""Chapter 8's exercises, diagram and one-GPU copy: expected values from the recording, wrong answers caught."""

from __future__ import annotations

import pytest
from conftest import run_on_simulator

from helpers import course
from helpers.ch08_peer_to_peer import diagrams, exercises, local, views
from helpers.core import experiments
from helpers.core.mode import Mode


@pytest.fixture
def replay():
    return course.Context(Mode.REPLAY, "no GPU in this test", gpu_name=None, reference_name="h100-pcie")


def test_speedup_expects_the_recorded_ratio_and_hints_at_slips(replay, capsys):
    mats = replay.get("p2p.matrices")
    r = views.peer_vs_staged(mats.data)
    assert 10 < r < 20  # NVLink vs two PCIe legs on the H200 pair
    assert exercises.speedup(r, mats) is True
    assert exercises.speedup(1 / r, mats) is False
    assert "above 1" in capsys.readouterr().out
    assert exercises.speedup(None, mats) is None


def test_verdict_never_judges_a_pcie_claim_with_nvlink_data(replay):
    mats, topo = replay.get("p2p.matrices"), replay.get("p2p.topology")
    link = views.link_kind(topo.data)
    assert link == "NV18"
    text = views.source_verdict(mats.data, link)
    assert "says nothing about the source's PCIe claim" in text and "confirmed" not in text
    assert "confirmed" in views.source_verdict(mats.data, "PIX") or "not what" in views.source_verdict(mats.data, "PIX")
    assert "cannot judge" in views.source_verdict(mats.data, None)


def test_capture_bytes_and_the_conceptual_question(capsys):
    frame = 1920 * 1080 * 4
    assert exercises.capture_bytes(2 * frame, 0) is True
    assert exercises.capture_bytes(frame, 0) is False
    assert exercises.nvlink_judges_pcie("b") is True
    assert exercises.nvlink_judges_pcie("a") is False
    assert "different links" in capsys.readouterr().out


def test_rdma_pages_are_64_kib():
    assert views.rdma_pages(4 << 20) == 64 and views.rdma_pages(1) == 1
    rows = views.capture_rows(4 << 20, placements=("same_switch",))
    assert {r["rdma_pages_64k"] for r in rows} == {64}
    assert "64 KiB pages" in " ".join(views.capture_table(rows).headers)


def test_copy_kernel_check_passes_a_grid_stride_loop_and_catches_wrong_ones():
    run_on_simulator('''
from helpers.ch08_peer_to_peer import diagrams, exercises
from numba import cuda

@cuda.jit
def good(src, dst):
    i, s = cuda.grid(1), cuda.gridsize(1)
    while i < src.size:
        dst[i] = src[i]
        i += s

@cuda.jit
def one_each(src, dst):
    i = cuda.grid(1)
    if i < src.size:
        dst[i] = src[i]

@cuda.jit
def past_end(src, dst):
    i, s = cuda.grid(1), cuda.gridsize(1)
    while i < src.size + 1:
        if i < src.size:
            dst[i] = src[i]
        i += s

@cuda.jit
def every_other(src, dst):
    i, s = cuda.grid(1), cuda.gridsize(1)
    while i < src.size:
        dst[i] = src[i]
        i += 2 * s

assert exercises.copy_kernel(good) is True
assert exercises.copy_kernel(one_each) is None  # what the starter does: not answered yet, no ✘
assert exercises.copy_kernel(every_other) is False
assert exercises.copy_kernel(past_end) is True  # guarded write: the extra step writes nothing
assert exercises.copy_kernel(None) is None
''')


def test_paths_diagram_shows_the_three_routes():
    svg = diagrams.p2p_paths_diagram().svg()
    for word in ("NVSwitch", "PCIe switch", "pinned host buffer", "root complex"):
        assert word in svg


def test_d2d_experiment_is_one_gpu_shows_its_code_and_replays_its_recording(replay):
    exp = experiments.get("p2p.d2d_copy")
    assert exp.needs == (experiments.GPU,) and exp.shown is local.time_d2d
    ev = replay.get("p2p.d2d_copy")
    assert ev.ok and ev.data["nbytes"] > 0
    rows = local.d2d_rows({"nbytes": 1 << 20, "times_s": {"copy engine": [1e-5, 2e-5, 1e-5], "kernel": [4e-5] * 3}})
    assert rows == [("copy engine", "10.0", "210"), ("kernel", "40.0", "52")]


def test_matrices_experiment_shows_peer_copy():
    from helpers.ch08_peer_to_peer import p2p
    assert experiments.get("p2p.matrices").shown is p2p.peer_copy
