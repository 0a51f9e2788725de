"""Chapter 8's peer read latency: nvbandwidth's chain, the reads per SM, the rows and words a page
shows (from a recording's shape), the chase on Numba's simulator, and live on two GPUs."""

from __future__ import annotations

import pytest
from conftest import run_on_simulator

from helpers.ch08_peer_to_peer import p2p, peer_latency, views
from helpers.core import gpu
from helpers.core.errors import InputError
from helpers.core.evidence import Evidence
from helpers.core.mode import Mode

DATA = {"nbytes": 2 << 20, "stride_bytes": 128, "reads": 1_000_000, "rounds": 3, "statistic": "s",
        "devices": [{"index": 0, "name": "NVIDIA H100 80GB HBM3"}, {"index": 1, "name": "NVIDIA H100 80GB HBM3"}],
        "peer": [{"reader": 0, "memory": 1, "ns": [826.0, 830.0, 828.0], "median_ns": 828.0},
                 {"reader": 1, "memory": 0, "ns": [831.0, 829.0, 840.0], "median_ns": 831.0}],
        "local": [{"reader": 0, "memory": 0, "ns": [300.0, 302.0, 301.0], "median_ns": 301.0},
                  {"reader": 1, "memory": 1, "ns": [305.0, 303.0, 304.0], "median_ns": 304.0}]}


def test_the_chain_is_nvbandwidths_a_lap_of_128_byte_steps():
    chain, start = peer_latency.nvbw_chain()
    n_ptrs = (2 << 20) // 8  # testcase.cpp latencyHelper: node i -> node (i + strideLen) % n_ptrs, strideLen 16
    assert start == 0 and chain.size == n_ptrs and int(chain[n_ptrs - 16]) == 0 and int(chain[5]) == 21
    seen, j = set(), start
    while j not in seen:
        seen.add(j)
        j = int(chain[j])
    assert len(seen) == n_ptrs // 16 and all(k % 16 == 0 for k in seen)  # every cache line once a lap
    with pytest.raises(InputError):
        peer_latency.nvbw_chain(16)


def test_each_sm_reads_nvbandwidths_share():
    assert peer_latency.steps_for(132) == 2525  # 1,000,000 // 132 = 7,575 reads = 3 x 2,525
    assert 3 * peer_latency.steps_for(1) <= 1_000_000
    with pytest.raises(InputError):
        peer_latency.steps_for(0)


def test_rows_say_what_the_hop_adds_from_the_numbers():
    rows = peer_latency.pair_rows(DATA)
    assert [(r["reader"], r["memory"]) for r in rows] == [(0, 1), (1, 0)]
    assert rows[0]["added_ns"] == 527.0 and rows[1]["added_ns"] == 527.0 and rows[1]["peer_max"] == 840.0
    text = views.latency_explained(DATA, "recorded on test")
    assert "adds 527 ns" in text and "1.3%" in text and text.startswith("Recorded on test")
    assert "no peer pair" in views.latency_explained(dict(DATA, peer=[]), "x")


def test_table_and_figure_carry_provenance_and_every_round():
    ev = Evidence("p2p.peer_read_latency", DATA, Mode.REPLAY, "2× H100 · test", why="test")
    assert "REPLAY: recorded on 2× H100" in views.latency_table(ev).caption
    fig = views.latency_figure(ev)
    ys = [y for t in fig.fig.data if t.type == "scatter" for y in t.y]
    assert sorted(ys) == sorted(DATA["local"][0]["ns"] + DATA["peer"][0]["ns"] + DATA["local"][1]["ns"] + DATA["peer"][1]["ns"])


def test_the_pages_machine_words_come_from_the_recording():
    topo = {"devices": [{"name": "NVIDIA H100 80GB HBM3", "pci_bus_id": "0000:18:00.0"},
                        {"name": "NVIDIA H100 80GB HBM3", "pci_bus_id": "0000:2a:00.0"}],
            "parsed": {"links": {"GPU0": {"GPU1": "NV18"}}}}
    text = views.topology_reading(topo)
    assert "2× NVIDIA H100 80GB HBM3" in text and "18 bonded NVLinks" in text and "virtual" not in text
    flat = dict(topo, devices=[{"name": "NVIDIA H200", "pci_bus_id": "0000:00:06.0"},
                               {"name": "NVIDIA H200", "pci_bus_id": "0000:00:07.0"}])
    assert "2× NVIDIA H200" in views.topology_reading(flat) and "flat virtual" in views.topology_reading(flat)
    assert "do not name" in views.topology_reading({"devices": [], "parsed": None})


def test_the_chase_runs_local_on_the_simulator():
    out = run_on_simulator(
        "from helpers.ch08_peer_to_peer import peer_latency as p\n"
        "from helpers.measure import gpu_chase\n"
        "calls = []\n"
        "def code(buf, start, steps):\n"
        "    calls.append((int(buf[start]), steps))\n"
        "    return [1.0]\n"
        "ns = p.chase_rounds(0, 0, 2, code)\n"
        "assert ns == [1.0, 1.0] and calls == [(16, 333333)] * 2, calls\n"
        "print('OK')\n")
    assert out.strip().endswith("OK")


def _gpus() -> int:
    return gpu.probe().device_count if gpu.probe().usable else 0


@pytest.mark.gpu
@pytest.mark.skipif(_gpus() < 2, reason="needs two or more GPUs")
def test_live_peer_reads_are_slower_than_local_and_copies_at_nvbandwidths_size():
    d = peer_latency.measure([0, 1], rounds=2)
    assert {(p["reader"], p["memory"]) for p in d["peer"]} == {(0, 1), (1, 0)}
    for r in peer_latency.pair_rows(d):
        assert r["peer_ns"] > r["local_ns"] > 0
    c = p2p.nvbw_copies([0, 1], nbytes=8 << 20, loops=2, samples=1)
    assert {r["test"] for r in c["rows"]} == set(p2p.NVBW_TESTS) and all(r["gbps"] > 0 for r in c["rows"])
    assert "sm_read" in p2p.SM_TESTS
    assert all(len(r["parts"]) == 2 for r in c["rows"] if r["test"].startswith("bidir"))


def test_exercise_8_5_expects_the_hop_times_the_links_bandwidth(capsys):
    from test_p2p import fake_matrices

    from helpers.ch08_peer_to_peer import exercises

    lat = Evidence("p2p.peer_read_latency", DATA, Mode.REPLAY, "test", why="test")
    mats = Evidence("p2p.matrices", fake_matrices(), Mode.REPLAY, "test", why="test")
    gbps = [x for row in views.gbps_matrix(mats.data, "peer") for x in row if x is not None]
    expected = 527e-9 * (sum(gbps) / len(gbps)) * 1e9
    assert exercises.peer_hop(expected, lat, mats) is True
    assert exercises.peer_hop(expected * 1000, lat, mats) is False
    assert "1e-9" in capsys.readouterr().out


def test_the_copies_at_nvbandwidths_size_are_tabled_or_absent():
    rows = [{"test": "read", "row": 0, "col": 1, "gbps": 391.0, "parts": [391.0]},
            {"test": "bidir_write", "row": 1, "col": 0, "gbps": 774.0, "parts": [387.0, 387.0]},
            {"test": "sm_read", "row": 0, "col": 1, "gbps": 750.0, "parts": [750.0]}]
    ev = Evidence("p2p.matrices", {"nvbw_size": {"nbytes": 256 << 20, "loops": 16, "samples": 3, "rows": rows}},
                  Mode.REPLAY, "test", why="test")
    t = views.nvbw_size_table(ev)
    assert "256 MiB" in t.caption and ("both ways, write (total)", "GPU1 / GPU0", "774.0") in t.rows
    assert len(t.rows) == 3 and all(r[0] for r in t.rows)  # every test the recorder makes has its words
    assert views.nvbw_size_table(Evidence("p2p.matrices", {}, Mode.REPLAY, "t", why="t")) is None


def test_the_explanation_follows_the_data_and_its_mode():
    from helpers.core import reference

    close = dict(DATA, peer=[dict(p, ns=[305.0, 300.0, 310.0], median_ns=305.0) for p in DATA["peer"]])
    text = views.latency_explained(close, "recorded on test")
    assert "do not show what the hop adds" in text and "adds" not in text.split(":")[1]
    cases = [DATA] + [r.experiment("p2p.peer_read_latency") for r in
                      (reference.load(n) for n in reference.list_names()) if r.has("p2p.peer_read_latency")]
    for data in cases:
        for mode, verb in ((Mode.LIVE, "measured now on Test GPU"), (Mode.REPLAY, "recorded on test machine")):
            text = views.latency_explained(data, verb)
            assert text.startswith(verb[:1].upper() + verb[1:] + ":")
            assert ("measured now" in text.lower()) == (mode is Mode.LIVE)
            rows = peer_latency.pair_rows(data)
            if "adds" in text:
                assert f"{min(r['added_ns'] for r in rows):.0f}" in text
