"""Chapter 0: the copy-timing function the page shows (on a NumPy stand-in for CuPy), the sweep
that runs it, the map of the machine and the system report's wording from the recorded data,
the board label, and the exercises' checks against the recorded reference."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import fake_cupy
import numpy as np
import pytest
from conftest import recorded_machine

from helpers.ch00_your_machine import copy_sweeps, diagrams, exercises, first_copy, system_report
from helpers.core import errors, provenance
from helpers.core.evidence import Evidence
from helpers.core.mode import Mode
from helpers.measure import sysinfo

ROOT = Path(__file__).resolve().parents[2]
REF = recorded_machine()


def recorded_report() -> sysinfo.SystemReport:
    return sysinfo.from_dict(REF["system"])


def recorded_sweep() -> Evidence:
    return Evidence("transfers.pinned_vs_pageable", REF["experiments"]["transfers.pinned_vs_pageable"]["data"]
                    if "data" in REF["experiments"]["transfers.pinned_vs_pageable"]
                    else REF["experiments"]["transfers.pinned_vs_pageable"], Mode.REPLAY, "ref", why="test")


@pytest.fixture
def fake_gpu(monkeypatch):
    """time_copy's cp and cupyx replaced by NumPy stand-ins (memcpy is a memmove)."""
    cp = fake_cupy.make()
    cp.uint8 = np.uint8
    cp.cuda.runtime.memcpyDeviceToHost = 2
    monkeypatch.setattr(copy_sweeps, "cp", cp)
    monkeypatch.setattr(copy_sweeps, "cupyx", types.SimpleNamespace(empty_pinned=lambda n, dtype: np.empty(n, dtype)))
    monkeypatch.setattr(copy_sweeps, "wait_event", lambda ev, timeout_s: None)
    monkeypatch.setattr(copy_sweeps.gpu, "release_pools", lambda: None)
    return cp


@pytest.mark.parametrize("direction", ["h2d", "d2h"])
@pytest.mark.parametrize("pinned", [True, False])
def test_time_copy_keeps_repeats_after_three_warmups(fake_gpu, direction, pinned):
    times = copy_sweeps.time_copy(4096, direction, pinned, 5)
    assert len(times) == 5 and all(t >= 0 for t in times)


def test_the_sweep_runs_the_given_code_and_keeps_the_recorded_format(fake_gpu):
    calls = []

    def my_copy(nbytes, direction, pinned, repeats):
        calls.append((nbytes, direction, pinned))
        return [1e-6 * (2 if not pinned else 1)] * repeats

    data = copy_sweeps.record_pinned_vs_pageable(True, lo=1 << 20, hi=1 << 20, code=my_copy)
    assert len(calls) == 4 and {c[1] for c in calls} == {"h2d", "d2h"}
    ev = Evidence("transfers.pinned_vs_pageable", data, Mode.LIVE, "test", why="test")
    size, bw = first_copy.bandwidths(ev, 1 << 20)
    assert size == 1 << 20 and bw[("pinned", "h2d")] == pytest.approx(2 * bw[("pageable", "h2d")])


@pytest.mark.parametrize("bad", [[], "fast", [0.0], [-1e-3], [float("nan")], None, [None]])
def test_a_changed_time_copy_returning_nonsense_is_refused(fake_gpu, bad):
    with pytest.raises(errors.InputTypeError, match="bad_copy"):
        copy_sweeps.record_pinned_vs_pageable(True, lo=4096, hi=4096, code=_named(lambda *a: bad, "bad_copy"))


def _named(fn, name):
    fn.__name__ = name
    return fn


def test_checked_times_names_the_function():
    with pytest.raises(errors.InputTypeError, match=r"bad_copy\(4096, 'h2d'"):
        copy_sweeps.checked_times([], "bad_copy", 4096, "h2d")


def test_the_machine_map_carries_the_recorded_facts():
    d = diagrams.machine_diagram(recorded_report(), REF["provenance"]["gpu"]["memory_bytes"], vm=True)
    svg = d.svg()
    for fact in ("16 MiB", "128 GiB", "32.0 GT/s PCIe x16", "asyncEngineCount 3", "79.2 GiB"):
        assert fact in svg and fact in d.description
    assert "host's IOMMU" in d.description and "page tables" in d.description


def test_the_machine_map_of_a_machine_without_gpu_says_so(tmp_path):
    empty = sysinfo.SystemReport(kernel="6.0", nvidia_module=None, gpus=[], cuda={"usable": False},
                                 iommu="none", memlock_soft=None, memlock_hard=None, dev_nvidia=[],
                                 dev_dri=[], absent=[])
    d = diagrams.machine_diagram(empty, None, vm=False)
    assert "not visible" in d.svg() and "size unknown" in d.svg()
    assert "shows no GPU on the PCI bus" in d.description and "sits behind a PCIe link" not in d.description


def test_the_recorded_iommu_row_is_reworded_for_a_vm():
    report = recorded_report()
    # a recording made before the wording was corrected carries the old text and no vm field; one
    # made since (the H100 was re-recorded on 2026-11-25) carries today's VM wording itself
    assert (report.iommu == sysinfo.OLD_IOMMU_ABSENT and report.vm is None) or \
        (report.iommu.startswith("none visible to this guest (a VM)") and report.vm)
    vm = system_report.recorded_vm(report)
    row = dict((r[0], r[1]) for r in sysinfo.rows(report, vm=vm))
    assert "host's IOMMU, which the guest cannot see, translates" in row["IOMMU"] and "VM hides" not in row["IOMMU"]
    assert "asyncEngineCount" in row and "copy engines" not in row


def test_a_new_report_says_whether_it_is_a_vm(tmp_path):
    (tmp_path / "cpuinfo").write_text("processor : 0\nflags : fpu vme hypervisor lm\n")
    assert sysinfo.in_vm(tmp_path)
    (tmp_path / "cpuinfo").write_text("processor : 0\nflags : fpu vme lm\n")
    assert not sysinfo.in_vm(tmp_path)


def _gpu(vendor: int) -> sysinfo.PCIDevice:
    return sysinfo.PCIDevice(address="0000:00:06.0", vendor=vendor, device=0x2330, pci_class=0x030200,
                             driver="nvidia", numa_node=None, link_current=None, link_max=None)


@pytest.mark.parametrize("vm, vendors, says, never", [
    (True, [0x10DE], ("passed through", "host's IOMMU"), ()),
    (True, [], ("no NVIDIA GPU", "cannot tell whether the host has an IOMMU"), ("passed through", "translates the GPU")),
    (True, [0x1234], ("no NVIDIA GPU",), ("passed through",)),  # QEMU's emulated VGA is display-class too
    (False, [0x10DE], ("GPU's DMA uses physical addresses",), ("guest", "host")),
    (False, [], ("no NVIDIA GPU",), ("GPU's DMA uses", "guest", "host"))])
def test_the_iommu_row_says_only_what_the_report_shows(vm, vendors, says, never):
    """A machine with no GPU is never told its GPU is passed through (issue 31)."""
    text = sysinfo.iommu_absent_text(vm, [_gpu(v) for v in vendors])
    assert all(s in text for s in says) and not any(n in text for n in never), text


def test_a_live_report_of_a_guest_without_a_gpu_is_worded_from_its_facts():
    """Reports collected with the earlier wording (GPU passed through, whatever the bus held) are worded again."""
    report = sysinfo.SystemReport(kernel="6.18", nvidia_module=None, gpus=[], cuda={"usable": False, "reason": "no GPU"},
                                  iommu="none visible to this guest (a VM): the GPU is passed through, so the host's "
                                  "IOMMU translates its DMA", memlock_soft=None, memlock_hard=None, dev_nvidia=[], dev_dri=[], absent=[], vm=True)
    row = dict((r[0], r[1]) for r in sysinfo.rows(report))
    assert "passed through" not in row["IOMMU"] and "no NVIDIA GPU" in row["IOMMU"]
    assert "replay what the reference machines recorded" in dict((r[0], r[2]) for r in sysinfo.rows(report))["CUDA"]


@pytest.mark.parametrize("pci_id, board", [("10de:2330", "H100 SXM5 80GB"), ("10DE:2331", "H100 PCIe"),
                                            ("10de:2335", "H200 SXM 141GB"), ("10de:ffff", None), (None, None)])
def test_the_label_names_the_board_from_the_pci_id(pci_id, board):
    label = provenance.label({"gpu": {"name": "NVIDIA H100 80GB HBM3", "pci_id": pci_id}, "driver": "580"})
    assert label.startswith("NVIDIA H100 80GB HBM3")
    assert (f"({board}, {pci_id.lower()})" in label) if board else "(" not in label.split(" · ")[0]


def test_the_reference_machine_is_labelled_an_sxm5_module():
    assert "H100 SXM5 80GB" in provenance.label(REF["provenance"])
    assert "H100 PCIe," not in provenance.label(REF["provenance"])


def test_link_ceiling_exercise(capsys):
    r = recorded_report()
    assert exercises.link_ceiling(63.0, r) is True
    assert exercises.link_ceiling(504 / 8 * 8, r) is False
    assert "gigabits" in capsys.readouterr().out
    assert exercises.link_ceiling(64.0, r) is False
    assert "line code" in capsys.readouterr().out
    assert exercises.link_ceiling(None, r) is None


def test_link_fraction_exercise(capsys):
    r, ev = recorded_report(), recorded_sweep()
    want = first_copy.bandwidths(ev, 64 << 20)[1][("pinned", "h2d")] / sysinfo.link_gbps("32.0 GT/s PCIe x16")
    assert 0 < want < 1
    assert exercises.link_fraction(want, ev, r, 64 << 20) is True
    assert exercises.link_fraction(want * 100, ev, r, 64 << 20) is False
    assert "below 1" in capsys.readouterr().out


def test_bar1_and_iommu_questions_explain(capsys):
    assert exercises.bar1_question("b") is True
    assert exercises.bar1_question("a") is False
    assert "page tables" in capsys.readouterr().out
    assert exercises.bar1_question("c") is False
    assert "cannot tell" in capsys.readouterr().out
    # a written answer is never marked: it is set beside the model answer, for self-assessment
    assert exercises.iommu_question("It is a VM guest; the host's IOMMU translates it, so the numbers include it") is None
    out = capsys.readouterr().out
    assert "self-assessment" in out and "model answer" in out and "✔" not in out and "✘" not in out
    assert exercises.iommu_question("the DMA uses physical addresses") is None


ROUND_TRIP = textwrap.dedent('''
    import numpy as np
    from numba import cuda
    from helpers.ch00_your_machine import exercises

    @cuda.jit
    def add_one(a):
        i = cuda.grid(1)
        if i < a.size:
            a[i] += 1

    @cuda.jit
    def add_one_unbounded(a):
        i = cuda.grid(1)
        a[i % a.size] += 1   # planted: threads past the end wrap round and add again

    def make(kernel):
        def round_trip(host):
            d = cuda.to_device(host)
            kernel[(host.size + 63) // 64, 64](d)
            return d.copy_to_host()
        return round_trip

    print("RIGHT", exercises.round_trip_exercise(make(add_one)))
    print("WRONG", exercises.round_trip_exercise(make(add_one_unbounded)))
    print("HOSTONLY", exercises.round_trip_exercise(lambda h: list(h + 1)))
''')


def test_round_trip_exercise_on_the_cuda_simulator():
    env = {"NUMBA_ENABLE_CUDASIM": "1", "PATH": "/usr/bin:/bin",
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    out = subprocess.run([sys.executable, "-c", ROUND_TRIP], capture_output=True, text=True, timeout=300,
                         env=env, cwd=ROOT).stdout
    assert "RIGHT True" in out
    assert "WRONG False" in out and "element" in out
    assert "HOSTONLY False" in out and "not a NumPy array" in out
