"""Chapter 2's GPU-side latency experiments: the chain, the views on a recording's shape, the
exercises (against recorded/derived values, a planted wrong chase), and bad input."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import run_on_simulator

from helpers.ch02_mmio_and_bars import diagrams, exercises, gpu_reads, mmio
from helpers.core.errors import InputError, InputTypeError
from helpers.core.evidence import Evidence
from helpers.core.mode import Mode
from helpers.measure import gpu_chase

READS = {"nbytes": 64 << 20, "steps": 8192, "trials": 3, "slot_bytes": 256, "host_ns": [1190.0, 1210.0, 1200.0],
         "device_ns": [610.0, 600.0, 605.0], "host_median_ns": 1200.0, "device_median_ns": 605.0,
         "bar0_mmap": {"path": "/sys/bus/pci/devices/0000:00:06.0/resource0", "outcome": "mmap refused", "errno": "EPERM"}}
WRITES = {"nbytes": 64 << 20, "steps": 65536, "trials": 3, "host_store_ns": [4.0, 4.2, 4.1], "host_store_median_ns": 4.1}


def _ev(eid, data):
    return Evidence(eid, data, Mode.REPLAY, "test machine", why="test")


def _follow(chain, start, steps):
    j = start
    for _ in range(steps):
        j = int(chain[j])
    return j


def test_chain_is_one_cycle_over_its_own_slots():
    chain, start = gpu_chase.make_chain(256 * 60, part=1, parts=3, seed=5)
    per = 256 // 8
    seen, j = set(), start
    for _ in range(20):
        assert (j // per) % 3 == 1 and j % per == 0  # slot heads of part 1 only
        seen.add(j)
        j = int(chain[j])
    assert j == start and len(seen) == 20  # 60 slots / 3 parts = 20, visited once each


def test_parts_never_share_a_slot():
    a, sa = gpu_chase.make_chain(256 * 30, part=0, parts=3)
    b, sb = gpu_chase.make_chain(256 * 30, part=2, parts=3)
    assert not set(np.flatnonzero(a)) & set(np.flatnonzero(b))


@pytest.mark.parametrize("kw", [{"nbytes": 100}, {"nbytes": 256 * 8, "parts": 0}, {"nbytes": 256 * 8, "part": 3, "parts": 3},
                                {"nbytes": True}, {"nbytes": 256 * 4, "parts": 4}])
def test_bad_chains_are_refused(kw):
    nbytes = kw.pop("nbytes")
    with pytest.raises((InputError, InputTypeError)):
        gpu_chase.make_chain(nbytes, **kw)


def test_too_many_steps_for_the_chain_is_refused():
    with pytest.raises(InputError, match="need a longer chain"):
        gpu_chase.chase_trials(gpu_chase.chase_ns_per_read, 256 * 30, 10, "host")


def test_no_chain_may_be_read_twice_in_a_trial():
    # 128 MiB: 174,762 slots a trial, enough for 132 SMs x 3 x 256 reads + 1
    gpu_chase.check_chain(gpu_chase.HOST_CHAIN_BYTES, gpu_chase.STEPS, sms=132)
    with pytest.raises(InputError, match="132 SM"):  # 8 MiB: 10,922 slots, fewer than 101,377 reads
        gpu_chase.check_chain(8 << 20, 256, sms=132)
    gpu_chase.check_chain(8 << 20, 256, sms=14)  # a small GPU needs fewer
    assert gpu_chase.reads_per_trial(256, 132) == 101_377


def test_a_chase_result_is_one_figure_per_sm_and_trials_average_over_them():
    assert gpu_chase.per_sm([1.0, 3.0]) == [1.0, 3.0] and gpu_chase.per_sm(2.5) == [2.5]
    for bad in ([], [1.0, float("nan")], float("inf")):
        with pytest.raises(InputError, match="one finite number per SM"):
            gpu_chase.per_sm(bad)
    trials = [[1000.0, 1200.0, 1400.0], [1100.0, 1300.0, 1500.0]]
    assert gpu_chase.trial_means(trials) == [1200.0, 1300.0]
    assert gpu_chase.sm_means(trials) == [1050.0, 1250.0, 1450.0]


def test_rows_and_spread_of_a_recording_from_every_sm():
    reads = {**READS, "nbytes": 128 << 20, "sms": 132, "host_sm_ns": [1100.0 + i for i in range(132)],
             "device_sm_ns": [117.0] + [340.0] * 130 + [901.0]}
    rows = gpu_reads.latency_rows(reads)
    assert rows[0][0] == "read, mapped pinned host memory (128 MiB, mean of 132 SMs)"
    line = gpu_reads.sm_spread_line(reads)
    assert "132 of them" in line and "host memory: middle half 1,133-1,198 ns, middle 80% 1,113-1,218 ns" in line
    assert "device memory: middle half 340-340 ns" in line and "117" not in line and "901" not in line  # no outliers
    assert gpu_reads.sm_spread_line(READS) == ""
    assert "mean of" not in gpu_reads.latency_rows(READS)[0][0]  # an older recording says nothing about SMs


def test_verdict_and_rows_come_from_the_numbers():
    text = gpu_reads.read_verdict(READS, WRITES, rtt_model_ns=900)
    assert "1,200 ns" in text and "605 ns" in text and "2.0x" in text and "6.7 MB/s" in text
    assert "SIMULATED" in text
    rows = gpu_reads.latency_rows(READS, WRITES)
    assert rows[0][1] == "1,200" and rows[2][1] == "4.1"
    assert "EPERM" in gpu_reads.bar0_line(READS)


def test_bar0_eperm_names_its_likely_cause_and_only_as_likely():
    """Issue 28 X8: the recorded EPERM is explained by lockdown's LOCKDOWN_PCI_ACCESS check in
    pci_mmap_resource, marked likely (the recording holds no lockdown state); other errnos differ."""
    line = gpu_reads.bar0_line(READS)
    assert "LOCKDOWN_PCI_ACCESS" in line and "pci_mmap_resource" in line and "likely" in line
    assert "proven" not in line.replace("not a proven", "")
    einval = {**READS, "bar0_mmap": {**READS["bar0_mmap"], "errno": "EINVAL"}}
    assert "LOCKDOWN" not in gpu_reads.bar0_line(einval) and "exclusive" in gpu_reads.bar0_line(einval)
    allowed = {**READS, "bar0_mmap": {"path": READS["bar0_mmap"]["path"], "outcome": "mmap allowed", "errno": None}}
    assert "why" not in gpu_reads.bar0_line(allowed)


def test_latency_figure_carries_provenance_and_data():
    fig = gpu_reads.latency_figure(_ev("mmio.gpu_read_latency", READS), _ev("mmio.gpu_posted_writes", WRITES))
    assert any(y == 1200.0 for _, _, y in fig.rows()) and "REPLAY" in fig.fig.layout.title.text


def test_bar0_probe_without_an_address_reads_nothing():
    assert gpu_reads.probe_bar0_mmap(None)["path"] is None
    out = gpu_reads.probe_bar0_mmap("0000:ff:1f.7")  # no such device: open fails, nothing mapped
    assert out["outcome"] == "open refused"


def test_exercise_2_2_expects_the_recorded_latency(capsys):
    assert exercises.ex_2_2_uncached_mbps(8 / 1200 * 1e3, _ev("mmio.gpu_read_latency", READS)) is True
    assert exercises.ex_2_2_uncached_mbps(8 / 1200 * 1e6, _ev("mmio.gpu_read_latency", READS)) is False
    assert "1000x too large" in capsys.readouterr().out
    assert exercises.ex_2_2_uncached_mbps(1.0, _ev("mmio.gpu_read_latency", None)) is None


def test_exercise_2_1_and_its_hints(capsys):
    assert exercises.ex_2_1_round_trip(mmio.implied_read_ns(width=4)) is True
    assert exercises.ex_2_1_round_trip(mmio.implied_read_ns(width=1)) is False
    assert "4x fewer" in capsys.readouterr().out


def test_exercise_2_4_explains_each_option(capsys):
    assert exercises.ex_2_4_why_reads_wait("b") is True
    assert exercises.ex_2_4_why_reads_wait("d") is False
    assert "both directions" in capsys.readouterr().out


def test_chase_trial_passes_a_right_follow_and_catches_a_planted_wrong_one():
    assert exercises.chase_trial(_follow) == []
    off_by_one = lambda chain, start, steps: _follow(chain, start, steps - 1)  # noqa: E731
    problems = exercises.chase_trial(off_by_one)
    assert problems and "should end at index" in problems[0]


def test_diagrams_describe_themselves():
    for d in (diagrams.bars_diagram(), diagrams.transactions_diagram()):
        svg = d.svg()
        assert "<title" in svg and "<desc" in svg and d.description
    assert "page tables" in diagrams.bars_diagram().description


def test_cost_line_counts_transactions_in_words():
    from helpers.ch02_mmio_and_bars import mmio

    one = {"method": "DMA", "nbytes": 65536, "transactions": 1, "model_ns": 1000.0, "model_gbps": 65.5}
    assert " 1 transaction, " in mmio.cost_line(one)
    assert " 16,384 transactions, " in mmio.cost_line(dict(one, transactions=16384))


@pytest.mark.parametrize("nbytes,trials,n", [(256 * 60, 3, 4), (256 * 64, 1, 64), (128 << 20, 3, 4), (256 * 8, 2, 9)])
def test_order_head_is_the_head_of_the_full_order(nbytes, trials, n):
    # order_head takes the n smallest keys instead of sorting every slot: it must be the full sort's head
    want = [[int(s) for s in gpu_chase._order(nbytes, t, trials, t)[:n]] for t in range(trials)]
    assert gpu_chase.order_head(nbytes, trials, n) == want


def test_chases_refuse_chains_built_for_another_buffer():
    with pytest.raises(InputError, match="not chain_plan"):
        gpu_chase.chase_trials(gpu_chase.chase_ns_per_read, 256 * 60, 4, "host", plan=gpu_chase.chain_plan(256 * 30))


def test_a_plan_writes_exactly_what_make_chains_holds_at_the_chains_slots():
    chain, starts = gpu_chase.make_chains(256 * 60)
    plan = gpu_chase.chain_plan(256 * 60)
    assert plan.starts == starts and len(set(plan.index.tolist())) == len(plan.index)  # no entry written twice
    assert np.array_equal(chain[plan.index], plan.value) and len(plan.index) == 60  # every slot of the 3 chains
    assert not np.any(np.delete(chain, plan.index))  # make_chains writes nothing else


def test_loaded_chains_hold_the_plan_in_host_and_device_memory_on_the_simulator():
    code = ("import numpy as np\n"
            "from helpers.measure import gpu_chase as g\n"
            "plan = g.chain_plan(256 * 60)\n"
            "for where in ('host', 'device'):\n"
            "    buf = g.load_chains(plan, where)\n"
            "    got = np.asarray(buf) if where == 'host' else buf.copy_to_host()\n"
            "    assert got.size == 256 * 60 // 8 and np.array_equal(got[plan.index], plan.value), where\n"
            "print('OK')\n")
    assert run_on_simulator(code).strip().endswith("OK")
