"""Chapter 4's new helpers on recorded data: the shown functions, host mappings, exercises, diagrams."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import recorded_machine, run_on_simulator

from helpers.ch04_pinned_memory import (
    diagrams,
    exercises,
    host_mappings,
    mapped_kernel,
    pinning,
    write_combined,
)
from helpers.core import experiments, shown
from helpers.core.errors import InputError
from helpers.core.evidence import Evidence
from helpers.core.mode import Mode

ROOT = Path(__file__).resolve().parents[2]
REF = recorded_machine()["experiments"]


def _ev(exp_id: str, data=None) -> Evidence:
    return Evidence(exp_id, REF[exp_id]["data"] if data is None else data, Mode.REPLAY, "h100 test", why="test")


def test_the_shown_functions_are_the_experiments_code():
    reg = experiments.discover()
    assert reg["pinning.cost_vs_size"].shown is pinning.time_register
    assert reg["zero_copy.numba_mapped"].shown is mapped_kernel.time_mapped_sum
    assert "hostRegister" in shown.source_of(pinning.time_register)


def test_recorded_cost_rows_still_replay():
    data = REF["pinning.cost_vs_size"]["data"]
    assert pinning.row_at(data, 1 << 30)["register"] > 0
    assert len(pinning.cost_rows(data)) == len(data["rows"])


def test_time_mapped_sum_on_the_simulator():
    out = run_on_simulator(timeout_s=600, code="""
        from helpers.ch04_pinned_memory import mapped_kernel
        print(sorted(mapped_kernel.time_mapped_sum(4096 * 4, 1, blocks=2)))
    """)
    assert "['copy_then_sum_ms', 'zero_copy_ms']" in out


def test_mapped_rows_and_pending_summary():
    data = {"runs": [{"nbytes": 1 << 24, "zero_copy_ms": 2.0, "copy_then_sum_ms": 3.0}]}
    assert mapped_kernel.rows(data)[0][-1] == "1.50x"
    assert "1.50x faster" in mapped_kernel.summary(Evidence("zero_copy.numba_mapped", data, Mode.REPLAY, "x",
                                                            why="t"))
    pending = Evidence("zero_copy.numba_mapped", None, Mode.REPLAY, "x", why="t", missing="no recording")
    assert "recording pending" in mapped_kernel.summary(pending)


SMAPS = """7f0000000000-7f0000200000 rw-s 00000000 00:01 1234   /dev/zero (deleted)
Size:               2048 kB
VmFlags: rd wr sh mr mw me ms sd
7f0000200000-7f0000400000 rw-s 00000000 00:06 142    /dev/nvidiactl
Size:               2048 kB
VmFlags: rd wr sh mr mw me ms de dd mm sd
7f0000400000-7f0000600000 rw-p 00000000 00:00 0
Size:               2048 kB
"""


def test_mapping_of_reads_smaps():
    m = host_mappings.mapping_of(0x7f0000200010, SMAPS)
    assert m["path"] == "/dev/nvidiactl" and {"mm", "de", "dd"} <= set(m["vmflags"])
    assert host_mappings.mapping_of(0x7f0000000000, SMAPS)["path"] == "/dev/zero (deleted)"
    last = host_mappings.mapping_of(0x7f0000400000, SMAPS)
    assert last["perms"] == "rw-p" and last["vmflags"] == []
    assert host_mappings.mapping_of(0x1000, SMAPS) is None
    with pytest.raises(InputError):
        host_mappings.mapping_of(-1, SMAPS)


def test_host_mapping_verdict_tells_the_kinds_apart():
    data = {"nbytes": 2 << 20, "machine": {"numa_nodes_online": "0-1", "gpu_numa_node": "1",
                                           "gpu_local_cpulist": "16-31", "iommu_groups": 40,
                                           "iommu_units": ["dmar0"], "gpu_iommu_group": "12"},
            "buffers": [{"buffer": "cudaHostAlloc(default)", **host_mappings.mapping_of(0x7f0000000000, SMAPS)},
                        {"buffer": "cudaHostAlloc(write_combined)", **host_mappings.mapping_of(0x7f0000200000, SMAPS)}]}
    ev = Evidence("pinning.host_mappings", data, Mode.REPLAY, "x", why="t")
    text = host_mappings.verdict(ev).splitlines()
    assert "shared anonymous" in text[0] and "/dev/nvidiactl" in text[1] and "mixed map" in text[1]
    assert "de (VM_DONTEXPAND), dd (VM_DONTDUMP), mm" in host_mappings.rows(data)[1][3]
    numa = host_mappings.numa_lines(ev)
    assert numa[0] == "NUMA and IOMMU, recorded on x:"  # the data named by their mode
    assert "0-1" in numa[1] and "one node" not in numa[1] and "group: 12" in numa[3]
    pending = Evidence("pinning.host_mappings", None, Mode.REPLAY, "x", why="t", missing="absent")
    assert "recording pending" in host_mappings.verdict(pending)


def test_machine_facts_without_a_gpu():
    facts = host_mappings.machine_facts(None)
    assert facts["gpu_numa_node"] is None and facts["cpus_allowed"] >= 1


def test_break_even_from_the_recording_and_its_hints(capsys):
    cost, reg = _ev("pinning.cost_vs_size"), _ev("pinning.register_regions")
    want = exercises.break_even_copies(cost.data, reg.data)
    assert 0 < want < 100
    assert exercises.break_even(want, cost, reg) is True
    assert exercises.break_even(want * 1000, cost, reg) is False
    assert "unit slip" in capsys.readouterr().out
    row = pinning.row_at(cost.data, reg.data["nbytes"])
    assert exercises.break_even(want * row["register"] / (row["register"] + row["unregister"]), cost, reg) is False
    assert "Unregister" in capsys.readouterr().out
    assert exercises.break_even(None, cost, reg) is None


def test_wc_choice_follows_the_data():
    wc = _ev("pinning.write_combined")
    assert exercises.wc_correct(wc.data) == "b"  # the reference machine read WC memory at full speed
    assert exercises.wc_reading("b", wc) is True and exercises.wc_reading("a", wc) is False
    slow = json.loads(json.dumps(wc.data))
    slow["rows"][1]["cpu_read_gbps"] = 0.1
    assert exercises.wc_correct(slow) == "a"
    assert write_combined.ratios(slow)["cpu_read_gbps"] < 0.5


def test_wc_explain_is_self_assessed(capsys):
    assert exercises.wc_why(exercises.WC_MODEL) is None  # even the model answer is not "marked"
    assert exercises.wc_why("it is slow") is None
    out = capsys.readouterr().out
    assert "self-assessment" in out and exercises.WC_MODEL in out and "✔" not in out


def test_gather_kernel_trial_catches_a_planted_bug():
    out = run_on_simulator(timeout_s=600, code="""
        from numba import cuda
        from helpers.ch04_pinned_memory import exercises

        @cuda.jit
        def one_per_thread(x, idx, out):
            i = cuda.grid(1)
            if i < idx.size:
                cuda.atomic.add(out, 0, x[idx[i]])

        @cuda.jit
        def strided(x, idx, out):
            start, stride = cuda.grid(1), cuda.gridsize(1)
            acc = 0.0
            for i in range(start, idx.size, stride):
                acc += x[idx[i]]
            cuda.atomic.add(out, 0, acc)

        @cuda.jit
        def strided_twice(x, idx, out):
            start, stride = cuda.grid(1), cuda.gridsize(1)
            for i in range(start, idx.size, stride):
                cuda.atomic.add(out, 0, 2 * x[idx[i]])

        from helpers.learning import checks
        print("GOOD", exercises.gather_trial(strided, n=1024, m=100))
        print("BAD", exercises.gather_trial(strided_twice, n=1024, m=100))
        try:
            exercises.gather_trial(one_per_thread, n=1024, m=100)
        except checks.NotAnswered as exc:
            print("STARTER", exc)
        print("PLAIN", exercises.gather_trial(lambda x, idx, out: None))
    """)
    assert "GOOD []" in out
    bad = next(line for line in out.splitlines() if line.startswith("BAD"))
    assert "expected" in bad and "[]" not in bad
    assert "STARTER the kernel still adds one element per thread" in out
    assert "PLAIN ['decorate" in out


def test_zero_copy_and_radar_choices():
    zc = _ev("zero_copy.vs_copy")
    assert exercises.zero_copy_why("a", zc) is True  # gather_sparse wins most in the recording
    assert exercises.zero_copy_why("c", zc) is False
    assert exercises.radar_fix("b") is True and exercises.radar_fix("c") is False
    assert exercises.radar_fix("z") is False


def test_diagrams_have_descriptions_and_known_boxes():
    for d in (diagrams.pinning_paths_diagram(), diagrams.gdrcopy_diagram()):
        svg = d.svg()
        assert "<desc" in svg and d.description and "IOMMU" in diagrams.pinning_paths_diagram().svg()


def test_time_register_refuses_nothing_silently():
    # a learner's wrong size reaches the experiment's validator before any CUDA call
    with pytest.raises(InputError):
        experiments.get("pinning.cost_vs_size").check_params({"largest": 0})
    assert np.isfinite(exercises.break_even_copies(REF["pinning.cost_vs_size"]["data"],
                                                   REF["pinning.register_regions"]["data"]))
