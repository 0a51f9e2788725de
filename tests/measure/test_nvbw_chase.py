"""helpers.measure.nvbw_chase: nvbandwidth's latency statistic, with nvbandwidth's own constants
(read from a fixture of its v0.8 source values), its chain, its arithmetic on synthetic launch
times, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import needs_gpu, run_on_simulator

from helpers.ch02_mmio_and_bars import gpu_reads
from helpers.core.errors import InputError, InputTypeError
from helpers.measure import gpu_chase, nvbw_chase

NVBW = json.loads((Path(__file__).parent / "fixtures" / "nvbandwidth_v0.8_latency.json").read_text())


def test_the_parameters_are_nvbandwidths():
    assert nvbw_chase.STRIDE_NODES == NVBW["common.h"]["strideLen"]
    assert nvbw_chase.ACCESSES == NVBW["common.h"]["latencyMemAccessCnt"]
    assert nvbw_chase.BUFFER_BYTES == NVBW["nvbandwidth.cpp"]["latency_test_buffer_bytes"] == 2 * NVBW["common.h"]["_MiB"]
    assert nvbw_chase.NODE_BYTES == NVBW["common.h struct LatencyNode"]["sizeof_bytes"]
    assert nvbw_chase.STRIDE_NODES * nvbw_chase.NODE_BYTES == 128  # one cache line a step


def test_the_chain_steps_one_line_at_a_time_in_address_order_and_wraps():
    c = nvbw_chase.chain()
    n = nvbw_chase.BUFFER_BYTES // 8
    assert c.size == n and c.dtype == np.uint64
    j, seen = 0, []
    for _ in range(n // 16 + 1):
        seen.append(j)
        j = int(c[j])
    assert seen[:4] == [0, 16, 32, 48] and seen[-1] == 0  # 16,384 lines, then back to the start
    assert len(set(seen)) == n // 16
    assert [int(v) for v in nvbw_chase.chain(64, 3)] == [3, 4, 5, 6, 7, 0, 1, 2]


def test_each_sm_gets_the_integer_share_and_the_figure_divides_by_the_nominal_count():
    assert nvbw_chase.reads_per_sm(132) == 7575  # 1,000,000 // 132: 999,900 reads really made
    # 132 launches of 9.09 ms (7575 reads of 1,200 ns each): nvbandwidth divides by 1,000,000
    ms = [7575 * 1200e-6] * 132
    assert nvbw_chase.ns_per_read(ms) == pytest.approx(1200 * 0.9999)
    assert nvbw_chase.ns_per_read([1.0, 3.0], 1000) == pytest.approx(4000.0)  # (1 + 3) ms / 1000 reads = 4 us
    assert nvbw_chase.spread([1200.0, 1212.0, 1206.0]) == pytest.approx(12 / 1206)


@pytest.mark.parametrize("call", [lambda: nvbw_chase.ns_per_read([]), lambda: nvbw_chase.ns_per_read([1.0, -1.0]),
                                  lambda: nvbw_chase.ns_per_read([float("nan")]), lambda: nvbw_chase.reads_per_sm(0),
                                  lambda: nvbw_chase.reads_per_sm(132, 100), lambda: nvbw_chase.chain(8),
                                  lambda: nvbw_chase.chain(64, 8), lambda: nvbw_chase.spread([]),
                                  lambda: nvbw_chase.ns_per_read([1.0], True), lambda: nvbw_chase.rounds(0)])
def test_bad_input_is_refused(call):
    with pytest.raises((InputError, InputTypeError)):
        call()


def test_the_page_names_both_statistics_and_how_far_apart_they_are():
    reads = {"nbytes": 128 << 20, "host_median_ns": 1240.0,
             "nvbw": {"nbytes": 2 << 20, "stride_bytes": 128, "reads_per_sm": 7575, "rounds": 3,
                      "host_ns": [1206.0, 1211.0, 1209.0], "host_median_ns": 1209.0, "host_sm_ns": [1190.0, 1230.0],
                      "accesses": 1000, "empty_launch_us": 5.0}}
    text = "\n".join(gpu_reads.nvbw_lines(reads))
    assert "1,209 ns" in text and "1,206, 1,211, 1,209 ns (spread 0.4%)" in text and "+2.6%" in text
    assert "2 MiB" in text and "128-byte" in text and "7,575 reads from each of 2 SM(s)" in text
    # 2 launches of 5 us over 1,000 reads: 10 ns a read of nvbandwidth's figure is launch; 31 + 10 the chains'
    assert "add 10.00 ns per read" in text and "other +41 ns are the chains'" in text and "128 MiB" in text
    (before,) = gpu_reads.nvbw_lines({"host_median_ns": 1240.0})  # a recording from before: no figure claimed
    assert "not in this recording" in before and "ns" not in before.replace("nvbandwidth's", "")


def test_each_launch_walks_the_chain_on_the_simulator():
    # the simulator's events give no time (-1.0, which ns_per_read refuses), so this checks the walk:
    # each of the launches from node 0 ends 40 lines on, where nvbandwidth's would
    code = ("import numpy as np\n"
            "from helpers.core.gpu import cuda\n"
            "from helpers.measure import nvbw_chase as v\n"
            "buf = cuda.mapped_array(v.BUFFER_BYTES // 8, dtype=np.uint64)\n"
            "buf[:] = v.chain()\n"
            "assert v.end_node(40) == 640\n"
            "ms = v.timed_launches(buf, 40)\n"
            "assert len(ms) == 1\n"
            "v.empty_launch_ms(buf)  # a launch that reads nothing runs too\n"
            "buf[640] = 0\n"
            "try:\n"
            "    v.timed_launches(buf, 41)\n"
            "except Exception as e:\n"
            "    assert 'ended on node' in str(e), e\n"
            "    print('OK')\n")
    assert run_on_simulator(code).strip().endswith("OK")


@needs_gpu
def test_on_a_gpu_every_round_walks_the_chain_from_every_sm():
    # behaviour, not speed: timed_launches raises if a launch ended anywhere but end_node
    r = nvbw_chase.rounds(2, 200 * gpu_chase.sm_count())
    assert r["rounds"] == 2 and len(r["host_ns"]) == 2 and len(r["host_sm_ns"]) == gpu_chase.sm_count()
    assert all(np.isfinite(v) and v > 0 for v in r["host_ns"] + r["host_sm_ns"]) and r["empty_launch_us"] > 0


@needs_gpu
def test_on_a_gpu_loaded_chains_hold_the_plan():
    plan = gpu_chase.chain_plan(64 << 20)
    for where in ("host", "device"):
        buf = gpu_chase.load_chains(plan, where)
        got = np.asarray(buf) if where == "host" else buf.copy_to_host()
        assert np.array_equal(got[plan.index], plan.value), where
