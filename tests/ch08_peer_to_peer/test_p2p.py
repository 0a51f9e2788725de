"""Chapter 8 / Lab 5: the topology parser, the routing model, bad input, the toy capture card,
the replay path through ctx.get (needs two GPUs, replays the two-GPU file), the one-GPU live
topology, and (on a machine with two or more GPUs) the live matrices."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest
from conftest import declare_optional, write_reference

from helpers import course
from helpers.ch08_peer_to_peer import p2p, views
from helpers.ch08_peer_to_peer import topology as topo
from helpers.core import config, evidence, experiments, gpu, reference
from helpers.core.errors import InputError, InputTypeError
from helpers.core.mode import Mode
from helpers.models import routes as pr
from helpers.presentation.figures import CourseFigure, Table
from instructor.labs import lab5  # Lab 5's reference answers (route time, makespan, optimum)

P2P_IDS = ("p2p.topology", "p2p.matrices", "p2p.nccl_allreduce", "p2p.peer_read_latency")

# Text in the format nvidia-smi prints (tab-separated, header underlined with escape codes).
TWO_NVLINK = (
    "\t\x1b[4mGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n"
    "GPU0\t X \tNV18\t0-47\t0\t\tN/A\n"
    "GPU1\tNV18\t X \t0-47\t0\t\tN/A\n\n"
    "Legend:\n\n  X    = Self\n  SYS  = Connection traversing PCIe as well as the SMP interconnect\n"
    "  NV#  = Connection traversing a bonded set of # NVLinks\n")

FOUR_PCIE = (
    "\tGPU0\tGPU1\tGPU2\tGPU3\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
    "GPU0\t X \tPIX\tPXB\tSYS\tPHB\t0-15\t0\t\tN/A\n"
    "GPU1\tPIX\t X \tPXB\tSYS\tPHB\t0-15\t0\t\tN/A\n"
    "GPU2\tPXB\tPXB\t X \tSYS\tNODE\t0-15\t0\t\tN/A\n"
    "GPU3\tSYS\tSYS\tSYS\t X \tSYS\t16-31\t1\t\tN/A\n"
    "NIC0\tPHB\tPHB\tNODE\tSYS\t X \n\n"
    "Legend:\n\n  X    = Self\n\nNIC Legend:\n\n  NIC0: mlx5_0\n")


def eight_gpus(cell=lambda i, j: "NV18") -> str:
    names = [f"GPU{i}" for i in range(8)]
    lines = ["        " + "  ".join(names) + "  CPU Affinity    NUMA Affinity   GPU NUMA ID"]
    for i in range(8):
        cells = ["X" if i == j else cell(i, j) for j in range(8)]
        lines.append(f"GPU{i}    " + "  ".join(f"{c:>4}" for c in cells) + f"  {0 if i < 4 else 48}-{47 if i < 4 else 95}  {i // 4}  N/A")
    return "\n".join(lines) + "\n\nLegend:\n  X    = Self\n"


# -- parser --------------------------------------------------------------------------------------
def test_two_gpus_nvlink():
    t = topo.parse(TWO_NVLINK)
    assert t.gpus == ["GPU0", "GPU1"] and t.link(0, 1) == "NV18" and t.link("GPU1", "GPU0") == "NV18"
    assert t.gpu_matrix() == [["X", "NV18"], ["NV18", "X"]]
    assert t.cpu_affinity == {"GPU0": "0-47", "GPU1": "0-47"} and t.numa_affinity["GPU1"] == "0"
    assert "18 NVLinks" in topo.describe(t.link(0, 1))


def test_four_gpus_pcie_and_a_nic():
    t = topo.parse(FOUR_PCIE)
    assert t.gpus == ["GPU0", "GPU1", "GPU2", "GPU3"] and t.devices[-1] == "NIC0"
    assert [t.link(0, j) for j in (1, 2, 3)] == ["PIX", "PXB", "SYS"]
    assert t.link("NIC0", 2) == "NODE" and t.nic_names == {"NIC0": "mlx5_0"}
    assert t.cpu_affinity["GPU3"] == "16-31" and t.numa_affinity["GPU3"] == "1"
    assert sorted({t.link(0, j) for j in (1, 2, 3)}, key=topo.rank) == ["PIX", "PXB", "SYS"]


def test_eight_gpus_space_separated_mixed():
    kinds = ["NV12", "NV4", "PHB", "SYS", "PXB", "PIX", "NODE"]
    text = eight_gpus(lambda i, j: kinds[(i + j) % len(kinds)])
    t = topo.parse(text)
    assert len(t.gpus) == 8
    for i, j in itertools.permutations(range(8), 2):
        assert t.link(i, j) == kinds[(i + j) % len(kinds)]
    assert t.numa_affinity["GPU7"] == "1"


def test_rank_orders_nearest_first():
    assert sorted(["SYS", "NV4", "PIX", "NV18", "PHB", "NODE", "PXB"], key=topo.rank) == \
        ["NV18", "NV4", "PIX", "PXB", "PHB", "NODE", "SYS"]
    assert topo.parse(TWO_NVLINK.replace("NV18", "SOC")).link(0, 1) == "SYS"  # old name


@pytest.mark.parametrize("text, match", [
    ("no matrix here\n", "no header"),
    (TWO_NVLINK.replace("\tNV18\t X", "\tNV99X\t X"), "unknown link kind 'NV99X'"),
    (TWO_NVLINK.replace("GPU1\tNV18\t X \t0-47\t0\t\tN/A\n", ""), "no row for it"),
    (TWO_NVLINK.replace("GPU0\t X \tNV18", "GPU0\tNV18\tNV18"), "diagonal"),
    (TWO_NVLINK.replace("GPU1\tNV18\t X \t0-47\t0\t\tN/A", "GPU1\tNV18"), "has 1 link cells"),
    (FOUR_PCIE.replace("GPU2\tPXB\tPXB\t X", "GPU2\tPXB\t X \t X"), "X may only mark"),
    (FOUR_PCIE + "GPU0\t X \tPIX\tPXB\tSYS\tPHB\n", None),  # after the legend: ignored
])
def test_bad_topology_text(text, match):
    if match is None:
        assert topo.parse(text).link(0, 1) == "PIX"
        return
    with pytest.raises(topo.TopologyError, match=match):
        topo.parse(text)


def test_parser_bad_queries():
    t = topo.parse(TWO_NVLINK)
    with pytest.raises(topo.TopologyError, match="no device 5"):
        t.link(0, 5)
    with pytest.raises(topo.TopologyError, match="expected the text"):
        topo.parse(None)
    with pytest.raises(topo.TopologyError, match="unknown link kind"):
        topo.describe("FOO")


# -- routing model -------------------------------------------------------------------------------
def simple_matrix(direct_bw=10e9, gpu_bw=100e9, host_bw=25e9, lat=1e-6, n=3) -> pr.LinkMatrix:
    lat_d, bw = {}, {}
    for i in range(n):
        a = f"GPU{i}"
        for k, v in (((a, "host"), host_bw), (("host", a), host_bw)):
            lat_d[k], bw[k] = lat, v
        for j in range(n):
            if i != j:
                b = f"GPU{j}"
                lat_d[(a, b)], bw[(a, b)] = lat, (direct_bw if {i, j} == {0, 1} else gpu_bw)
    return pr.LinkMatrix(n, lat_d, bw)


def test_route_time_is_latency_plus_size_over_bandwidth_per_hop():
    m = simple_matrix()
    n = 1 << 20
    assert lab5.route_time(m, ("GPU0", "GPU1"), n) == pytest.approx(1e-6 + n / 10e9)
    assert lab5.route_time(m, ("GPU0", "host", "GPU1"), n) == pytest.approx(2 * (1e-6 + n / 25e9))
    assert lab5.route_time(m, ("GPU0", "GPU2", "GPU1"), n) == pytest.approx(2 * (1e-6 + n / 100e9))


def test_routes_enumerated():
    m = simple_matrix()
    assert pr.routes(m, 0, 1) == [("GPU0", "GPU1"), ("GPU0", "host", "GPU1"), ("GPU0", "GPU2", "GPU1")]


def test_optimum_avoids_the_slow_direct_link_and_spreads_load():
    m = simple_matrix()
    n = 64 << 20
    best, paths = lab5.optimal(m, [(0, 1, n)])
    assert paths == [("GPU0", "GPU2", "GPU1")]  # two fast hops beat one slow link
    assert best == pytest.approx(2 * (1e-6 + n / 100e9))
    # three big transfers 0->1 with a host path as fast as the relay: all three on the relay
    # keep each of its links busy for three transfers; the optimum sends one via the host
    m = simple_matrix(host_bw=100e9)
    three = [(0, 1, n)] * 3
    best3, paths3 = lab5.optimal(m, three)
    assert len(set(paths3)) == 2 and ("GPU0", "host", "GPU1") in paths3
    assert best3 == pytest.approx(2 * (1e-6 + n / 100e9))
    assert best3 < lab5.makespan(m, three, [("GPU0", "GPU2", "GPU1")] * 3)


def test_optimum_is_no_worse_than_every_assignment():
    rng = np.random.default_rng(3)
    for seed in range(4):
        m = pr.synthetic(3, seed)
        transfers = [(int(a), int(b), int(rng.integers(1, 64) << 20))
                     for a, b in (rng.permutation(3)[:2] for _ in range(3))]
        best, paths = lab5.optimal(m, transfers)
        assert best == pytest.approx(lab5.makespan(m, transfers, paths))
        for combo in itertools.product(*(pr.routes(m, s, d) for s, d, _ in transfers)):
            assert lab5.makespan(m, transfers, list(combo)) >= best - 1e-15


@pytest.mark.parametrize("call, exc, match", [
    (lambda m: pr.routes(m, 0, 7), InputError, r"GPU index \(this matrix has GPUs 0..2\) must be from 0 to 2, got 7"),
    (lambda m: pr.routes(m, 1, 1), pr.RoutingInputError, "nothing to route"),
    (lambda m: pr.routes(m, "0", 1), InputTypeError, "must be a whole number"),
    (lambda m: pr.routes(m, True, 1), InputTypeError, "must be a whole number"),
    (lambda m: lab5.makespan(m, [(0, 1, 8)], [("GPU0", "GPU2")]), pr.RoutingInputError, "does not go from GPU0 to GPU1"),
    (lambda m: lab5.makespan(m, [(0, 1, 8)], []), pr.RoutingInputError, "1 transfers but 0 routes"),
    (lambda m: lab5.route_time(m, ("GPU0",), 8), pr.RoutingInputError, "at least two nodes"),
    (lambda m: lab5.route_time(m, ("host", "host"), 8), ValueError, "no link host -> host"),  # the lab asks for ValueError
])
def test_routing_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call(simple_matrix())


def test_one_gpu_and_bad_links_refused():
    with pytest.raises(pr.RoutingInputError, match="at least two GPUs"):
        pr.LinkMatrix(1, {}, {})
    with pytest.raises(pr.RoutingInputError, match="bandwidth must be > 0"):
        pr.LinkMatrix(2, {("GPU0", "GPU1"): 1e-6}, {("GPU0", "GPU1"): 0.0})
    with pytest.raises(pr.RoutingError, match="too many"):
        lab5.optimal(simple_matrix(n=3), [(0, 1, 8)] * 13)


def test_routing_errors_split_bad_input_from_unanswerable_questions():
    assert issubclass(pr.RoutingInputError, InputError) and not issubclass(pr.RoutingError, InputError)


def test_check_devices_errors():
    with pytest.raises(p2p.P2PError, match="needs at least 2 GPUs; this machine has 1"):
        p2p.check_devices([0, 1], count=1)
    with pytest.raises(InputError, match="device index must be from 0 to 1, got 2"):
        p2p.check_devices([0, 2], count=2)
    with pytest.raises(p2p.P2PInputError, match="distinct"):
        p2p.check_devices([1, 1], count=2)
    with pytest.raises(p2p.P2PInputError, match="at least 2 devices"):
        p2p.check_devices([1], count=2)
    for bad in (1.0, True, "1"):
        with pytest.raises(InputTypeError, match="device index must be a whole number"):
            p2p.check_devices([0, bad], count=2)
    assert p2p.check_devices([1, np.int64(0)], count=2) == [1, 0]


def test_bad_input_is_an_input_error_and_too_few_gpus_is_not():
    assert issubclass(p2p.P2PInputError, InputError)
    assert not issubclass(p2p.P2PError, (InputError, InputTypeError))


def test_no_gpu_live_calls_fail_clearly(no_gpu):
    with pytest.raises(p2p.P2PError, match="this machine has 0"):
        p2p.time_copy("peer", 0, 1, 1 << 20)
    with pytest.raises(InputError, match="method must be one of"):
        p2p.time_copy("teleport", 0, 1, 8)


@pytest.mark.parametrize("nbytes, exc", [(0, InputError), ((1 << 32) + 1, InputError), (2.0, InputTypeError),
                                         (True, InputTypeError)])
def test_copy_size_is_checked_before_the_gpu(monkeypatch, nbytes, exc):
    monkeypatch.setattr(p2p, "device_count", lambda: 2)
    monkeypatch.setattr(gpu, "cupy", lambda: pytest.fail("touched the GPU before checking nbytes"))
    with pytest.raises(exc, match="nbytes"):
        p2p.time_copy("peer", 0, 1, nbytes)


# -- replay ----------------------------------------------------------------------------------------
def fake_matrices(peer_gbps=300.0, staged_gbps=25.0, host_gbps=50.0) -> dict:
    sizes = {"large": 64 << 20, "medium": 1 << 20, "small": 4}

    def t(gbps, lat):
        return {k: [[None, lat + n / gbps / 1e9], [lat + n / gbps / 1e9, None]] for k, n in sizes.items()}
    mats = {m: {w: t(g, lat) for w in ("one", "both")}
            for m, g, lat in (("peer", peer_gbps, 2e-6), ("staged", staged_gbps, 9e-6), ("driver", staged_gbps, 9e-6))}
    host = {d: {k: [4e-6 + n / host_gbps / 1e9] * 2 for k, n in sizes.items()} for d in ("h2d", "d2h")}
    return {"devices": [{"index": i, "name": "fake", "pci_bus_id": f"0000:0{i}:00.0"} for i in range(2)],
            "sizes": sizes, "reps": 20, "peer_access": [[None, True], [True, None]], "matrices": mats, "host": host}


def test_link_matrix_from_a_recording():
    m = pr.from_recording(fake_matrices())
    assert m.n_gpus == 2 and m.bandwidth_Bps[("GPU0", "GPU1")] == pytest.approx(300e9, rel=1e-6)
    assert m.latency_s[("GPU0", "GPU1")] == pytest.approx(2e-6)  # the line through both sizes: the true t0
    assert m.bandwidth_Bps[("host", "GPU1")] == pytest.approx(50e9, rel=1e-6)
    with pytest.raises(pr.RoutingInputError, match="not a p2p.matrices recording"):
        pr.from_recording({"sizes": {}})


def test_experiments_need_two_gpus_and_the_two_gpu_file():
    for eid in P2P_IDS:
        exp = experiments.get(eid)
        assert exp.needs == (experiments.TWO_GPUS,) and exp.reference == experiments.P2P_REFERENCE


def _two_gpu_file(tmp_path, monkeypatch, **add):
    write_reference(tmp_path, "fake-two", only_added=True, chapter=8, add=add)
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("COURSE_P2P_REFERENCE", "fake-two")


def test_replay_reads_the_two_gpu_recording(tmp_path, monkeypatch, no_gpu):
    """No GPU: ctx.get replays the two-GPU file (not the default one) and says why."""
    _two_gpu_file(tmp_path, monkeypatch, **{"p2p.matrices": fake_matrices()})
    ctx = course.start(quiet=True)
    assert ctx.p2p_reference_name == "fake-two" == config.p2p_reference_name()
    ev = ctx.get("p2p.matrices")
    assert ev.mode is Mode.REPLAY and ev.data == fake_matrices() and "no usable GPU" in ev.why
    assert ev.source == ctx.reference("p2p").recording(ev.experiment_id).label
    with pytest.raises(reference.ReferenceDataError, match="no recording of 'p2p.topology'"):
        ctx.get("p2p.topology")
    with pytest.raises(reference.ReferenceDataError, match="no recording of 'p2p.nccl_allreduce'"):
        ctx.get("p2p.nccl_allreduce")


def test_one_gpu_replays_the_two_gpu_recording_and_says_why(tmp_path, monkeypatch):
    """Live on one GPU: the experiment is not run (it needs two); the recording comes back with the reason."""
    _two_gpu_file(tmp_path, monkeypatch, **{"p2p.matrices": fake_matrices()})
    monkeypatch.setattr(evidence.gpu, "probe", lambda: gpu.GPUProbe(True, "One GPU", device_count=1,
                                                                    name="One GPU"))
    monkeypatch.setattr(p2p, "matrices_experiment", lambda quick: pytest.fail("ran a two-GPU experiment on one GPU"))
    ctx = course.Context(Mode.LIVE, "a GPU", gpu_name="One GPU", reference_name="h100-pcie",
                         p2p_reference_name="fake-two")
    ev = ctx.get("p2p.matrices")
    assert ev.mode is Mode.REPLAY and "this machine has 1 GPU: p2p.matrices needs two" in ev.why
    assert isinstance(views.bandwidth_figure(ev), CourseFigure)
    assert views.matrices_table(ev, "large", "GB/s").caption.endswith(f"(REPLAY: recorded on {ev.source})")


def test_topology_here_follows_the_context(monkeypatch):
    """This machine's topology is live on any number of GPUs and absent without one."""
    replay = course.Context(Mode.REPLAY, "no GPU", gpu_name=None, reference_name="h100-pcie")
    assert views.topology_here(replay) == (None, "no GPU here: the topology below is the recording's")
    one = course.Context(Mode.LIVE, "a GPU", gpu_name="One GPU", reference_name="h100-pcie")
    text = ("\t\x1b[4mGPU0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n"
            "GPU0\t X \t0-15\t0\t\tN/A\n\nLegend:\n\n  X    = Self\n")
    monkeypatch.setattr(topo, "nvidia_smi_topo", lambda: text)
    got, note = views.topology_here(one)
    assert got == text and note.startswith("live")
    table = views.here_table(one, got)
    assert table.caption == "nvidia-smi topo -m (LIVE: measured now on One GPU)" and table.rows == [("GPU0", "X")]
    monkeypatch.setattr(topo, "nvidia_smi_topo", lambda: None)
    assert views.topology_here(one) == (None, "nvidia-smi is not on PATH here")


def test_nccl_view_says_why_when_there_is_nothing(tmp_path, monkeypatch, no_gpu):
    _two_gpu_file(tmp_path, monkeypatch, **{"p2p.nccl_allreduce": {
        "ndev": 2, "nccl_version": 22805, "timer": "wall clock", "rows": [
            {"nbytes": 4096, "median_s": 1e-5, "algbw_gbps": 0.4, "busbw_gbps": 0.4, "checked": True}]}})
    ctx = course.start(quiet=True)
    table = views.nccl_table(ctx.get("p2p.nccl_allreduce"))
    assert isinstance(table, Table) and table.rows[0][-1] == "yes" and "NCCL 22805" in table.caption
    write_reference(tmp_path, "empty-two", only_added=True, add={"p2p.matrices": fake_matrices()})  # no NCCL
    monkeypatch.setenv("COURSE_P2P_REFERENCE", "empty-two")
    declare_optional(monkeypatch, "p2p.nccl_allreduce", "p2p")
    missing = course.start(quiet=True).get("p2p.nccl_allreduce")
    assert views.nccl_table(missing) is missing and "no recording" in missing.missing


def test_experiments_skip_on_fewer_than_two_gpus(no_gpu):
    from helpers.recording.recorder import SkipExperiment

    for run in (p2p.topology_experiment, p2p.matrices_experiment, p2p.nccl_experiment):
        with pytest.raises(SkipExperiment, match="two or more GPUs"):
            run(True)


# -- the toy capture card ----------------------------------------------------------------------
@pytest.mark.parametrize("placement", ["same_switch", "root_ports", "acs_redirect"])
def test_capture_card_delivers_bytes_both_ways(placement):
    from toygpu_util import start_device

    from helpers.models.toygpu.capture import CaptureCard
    from helpers.models.toygpu.link import FabricParams

    g = start_device()
    try:
        card = CaptureCard(g, FabricParams(placement=placement))
        frame = np.random.default_rng(1).integers(0, 256, 48 * 1024, dtype=np.uint8)
        reps = {}
        for route in ("bounce", "peer"):
            dva = g.alloc_vram(frame.size)
            reps[route] = card.deliver(frame, dva, route)
            assert np.array_equal(g.download(dva, frame.size), frame), route
        n = frame.size
        assert reps["bounce"].root_complex_bytes == 2 * n and reps["bounce"].dram_bytes == 2 * n
        assert reps["peer"].dram_bytes == 0
        assert reps["peer"].root_complex_bytes == (0 if placement == "same_switch" else n)
        assert reps["peer"].page_runs >= 1
    finally:
        g.close()


def test_capture_card_bad_input():
    from toygpu_util import start_device

    from helpers.models.toygpu.capture import CaptureCard
    from helpers.models.toygpu.link import FabricParams, LinkModel, card_dma_ns

    with pytest.raises(ValueError, match="placement must be one of"):
        FabricParams(placement="moon")
    with pytest.raises(ValueError, match="does not forward peer writes"):
        card_dma_ns(LinkModel(), FabricParams(placement="root_ports", rc_p2p_gbps=0), 4096, peer=True)
    g = start_device()
    try:
        card = CaptureCard(g)
        with pytest.raises(ValueError, match="multiple of 8"):
            card.deliver(np.zeros(7, np.uint8), 0, "peer")
        with pytest.raises(ValueError, match="route must be"):
            card.deliver(np.zeros(8, np.uint8), 0, "teleport")
        with pytest.raises(ValueError, match="not mapped"):
            card.deliver(np.zeros(8, np.uint8), 1 << 19, "peer")
    finally:
        g.close()


# -- live, two or more GPUs ---------------------------------------------------------------------------
def _gpus() -> int:
    return gpu.probe().device_count if gpu.probe().usable else 0


needs_two = pytest.mark.skipif(_gpus() < 2, reason="needs two or more GPUs")


@pytest.mark.gpu
@needs_two
def test_live_topology_parses_and_matches_peer_access():
    d = p2p.topology_experiment(True)
    n = len(d["devices"])
    assert len(d["peer_access"]) == n and all(d["peer_access"][i][i] is None for i in range(n))
    if d["nvidia_smi_topo"] is not None:
        assert d["parse_error"] is None, d["parse_error"]
        assert len([x for x in d["parsed"]["devices"] if x.startswith("GPU")]) == n


@pytest.mark.gpu
@needs_two
def test_live_matrices_shape_and_bad_index():
    d = p2p.measure_matrices(quick=True, devices=[0, 1], reps=3)
    for method in p2p.METHODS:
        for way in ("one", "both"):
            for key in d["sizes"]:
                mat = d["matrices"][method][way][key]
                assert mat[0][0] is None and mat[1][0] > 0 and math.isfinite(mat[0][1])
    assert len(d["host"]["h2d"]["large"]) == 2
    with pytest.raises(InputError, match="device index must be from 0 to"):
        p2p.time_copy("peer", 0, _gpus(), 8)


def test_real_output_of_two_h200s():
    """`nvidia-smi topo -m` as it came from the two-H200 machine (driver 580), escape codes and all."""
    text = (Path(__file__).parent / "data" / "nvidia_smi_topo_h200x2.txt").read_text()
    assert "\x1b[4m" in text  # the header's underline really is there
    t = topo.parse(text)
    assert t.gpus == ["GPU0", "GPU1"] and t.gpu_matrix() == [["X", "NV18"], ["NV18", "X"]]
    assert t.cpu_affinity == {"GPU0": "0-31", "GPU1": "0-31"}


def test_committed_two_gpu_recording_routes():
    """The committed two-GPU recording yields a link matrix whose direct NVLink route beats the host route."""
    ref = reference.load(config.DEFAULT_P2P_REFERENCE)
    data = ref.experiment("p2p.matrices")
    m = pr.from_recording(data)
    n = data["sizes"]["medium"]
    assert lab5.route_time(m, ("GPU0", "GPU1"), n) < lab5.route_time(m, ("GPU0", "host", "GPU1"), n)
    assert topo.parse(ref.experiment("p2p.topology")["nvidia_smi_topo"]).link(0, 1).startswith("NV")


def test_one_gpu_topology():
    text = ("\t\x1b[4mGPU0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n"
            "GPU0\t X \t0-15\t0\t\tN/A\n\nLegend:\n\n  X    = Self\n")
    t = topo.parse(text)
    assert t.gpus == ["GPU0"] and t.gpu_matrix() == [["X"]] and t.cpu_affinity == {"GPU0": "0-15"}


def test_verdicts_follow_the_numbers():
    from helpers.ch08_peer_to_peer import views

    # a PCIe claim is judged only on a PCIe link; NVLink data says what it measured and no more
    fast_nvlink = views.source_verdict(fake_matrices(peer_gbps=300, staged_gbps=25), "NV18")
    same = views.source_verdict(fake_matrices(peer_gbps=26, staged_gbps=25), "PIX")
    twice = views.source_verdict(fake_matrices(peer_gbps=50, staged_gbps=25), "PHB")
    assert "x faster" in fast_nvlink and "says nothing about the source's PCIe claim" in fast_nvlink
    assert "confirmed" not in fast_nvlink
    assert "not what this machine shows" in same and "is confirmed" in twice
    assert "cannot judge" in views.source_verdict(fake_matrices(peer_gbps=50, staged_gbps=25), None)
    assert views.peer_vs_staged(fake_matrices(peer_gbps=50, staged_gbps=25)) == pytest.approx(2.0, rel=0.01)
    d = fake_matrices(peer_gbps=300, staged_gbps=25)
    d["matrices"]["driver"] = fake_matrices(peer_gbps=40)["matrices"]["peer"]
    assert "overlaps the two legs" in views.driver_vs_staged(d)


# --- NCCL runs in a child process -----------------------------------------------------

def _outcome(status: str, results: dict | None = None, stderr: str = ""):
    from helpers.measure import sandbox

    return sandbox.Outcome(status=status,
                           returncode=0 if status == "ok" else (None if status == "timeout" else 1),
                           signal_number=None, signal_name=None, duration_s=1.0, timeout_s=5.0,
                           results=results or {}, stdout_tail="", stderr_tail=stderr)


@pytest.mark.parametrize("case, expected", [
    (("ok", {"result": {"ndev": 2, "rows": []}}), {"ndev": 2, "rows": []}),
    (("ok", {"skip": "NCCL is not available to CuPy here"}), "SkipExperiment"),
    (("timeout", {}), "DeviceTimeoutError"),
    (("error", {}, "Traceback ... cudaErrorLaunchFailure"), "P2PError"),
    (("ok", {}), "P2PError"),  # a child that exited cleanly without its result
])
def test_nccl_runs_in_a_child_and_each_ending_is_named(monkeypatch, case, expected):
    """NCCL keeps ~378 MiB per GPU and its threads until the process ends (2x H200,
    2026-11-21): it runs in a child so the notebook keeps nothing; every way the child can
    end becomes a result or a named error."""
    from helpers.core import errors
    from helpers.measure import sandbox

    seen = {}

    def fake_run(code, timeout_s, **kw):
        seen["code"], seen["timeout"] = code, timeout_s
        return _outcome(*case)

    monkeypatch.setattr(sandbox, "run_python", fake_run)
    if isinstance(expected, dict):
        assert p2p.nccl_in_child(True, timeout_s=42) == expected
    else:
        exc = {"SkipExperiment": errors.SkipExperiment, "DeviceTimeoutError": errors.DeviceTimeoutError,
               "P2PError": p2p.P2PError}[expected]
        with pytest.raises(exc) as info:
            p2p.nccl_in_child(True, timeout_s=42)
        if expected == "DeviceTimeoutError":
            assert "within 42 s" in str(info.value)
        if len(case) > 2:
            assert "cudaErrorLaunchFailure" in str(info.value)
    assert "p2p.nccl_allreduce(True)" in seen["code"] and seen["timeout"] == 42


def test_this_machines_topology_text_has_no_escape_codes(monkeypatch, tmp_path):
    """nvidia-smi underlines topo -m's header with escape codes (seen live on the H100,
    2026-11-28): the text the page prints must not carry them."""
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\nprintf '\\t\\033[4mGPU0\\tCPU Affinity\\033[0m\\nGPU0\\t X \\t0-15\\n'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    text = topo.nvidia_smi_topo()
    assert "\x1b" not in text and "GPU0\tCPU Affinity" in text
