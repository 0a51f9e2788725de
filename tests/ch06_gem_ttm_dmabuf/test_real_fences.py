"""Chapter 6b's fences: the recorded run in the VM (vgem), what it shows, its replay, its refusals."""

from __future__ import annotations

import copy
import json

import pytest

from helpers.ch06_gem_ttm_dmabuf import real_exercises, real_fences
from helpers.core import transcript
from helpers.core.errors import ReferenceDataError, SkipExperiment
from helpers.core.mode import Mode


@pytest.fixture(scope="module")
def ev():
    from helpers import course

    return course.start("test", quiet=True).get(real_fences.EXPERIMENT, recorded=True)


def test_replay_names_the_kernel_qemu_and_vgem(ev):
    assert ev.mode is Mode.REPLAY
    assert ev.source.startswith("Linux 6.") and "under QEMU" in ev.source and "vgem (no device)" in ev.source
    assert ev.provenance["machine"] == "fences" and ev.provenance["command_line"][-2:] == ["--only", real_fences.EXPERIMENT]


def test_the_recorded_run_shows_implicit_sync_semantics(ev):
    f = real_fences.facts(ev.data)
    # nothing pending: both directions ready, and the exported sync_file is the signalled stub
    assert f["idle_read_ready"] and f["idle_write_ready"]
    assert f["idle_sync_file"] == {"status": 1, "driver": "stub", "timeline": "stub", "signalled": True}
    # a writer's fence: readers and writers wait; bufinfo and the sync_file name vgem's fence
    assert f["write_fence_blocks_readers"] and f["write_fence_blocks_writers"] and f["write_sync_file_blocks"]
    assert f["write_sync_file"]["driver"] == "vgem" and f["write_sync_file"]["status"] == 0
    assert any("vgem" in line and "unsignalled" in line for line in f["bufinfo_fence_lines"])
    assert f["second_fence_beside_writer"] == "EBUSY"  # vgem_fence_attach_ioctl's conflict check
    # signalled: all ready; the id is gone
    assert f["after_read_ready"] and f["after_write_ready"] and f["signal_again"] == "ENOENT"
    # a reader's fence: readers go, writers wait (dma_resv_usage_rw)
    assert not f["read_fence_blocks_readers"] and f["read_fence_blocks_writers"]
    assert f["read_fence_reader_sync_file"]["signalled"] and not f["read_fence_writer_sync_file"]["signalled"]
    # explicit to implicit: another buffer's pending fence imported as a writer blocks readers until it signals
    assert f["import_rc"] == "ok" and f["import_blocks_readers"] and f["import_ready_after_signal"]
    # vgem has no DRIVER_SYNCOBJ
    assert f["cap_syncobj"] == 0 and f["syncobj_create"] == "EOPNOTSUPP"
    # every blocked waiter was woken by the signal, not by its own timeout
    assert [w["woke"] for w in f["wakeups"]] == [True, True, True]
    assert {w["call"].split("(")[0] for w in f["wakeups"]} == {"poll", "DMA_BUF_IOCTL_SYNC"}
    # a fence nobody signals: vgem's timer signals it before poll's own limit; a late signal says so
    assert f["never"]["ready"] and f["never"]["late_signal"] == "ETIMEDOUT"


def test_a_probe_that_stopped_half_way_is_refused_with_what_is_missing(ev):
    broken = copy.deepcopy(ev.data)
    del broken["import"]
    with pytest.raises(SkipExperiment, match="no import"):
        real_fences.facts(broken)
    broken = copy.deepcopy(ev.data)
    del broken["write_fence"]["poll_in"]
    with pytest.raises(SkipExperiment, match="write_fence/poll_in"):
        real_fences.facts(broken)
    with pytest.raises(SkipExperiment, match="no /dev/dri"):
        real_fences.facts({"error": "no /dev/dri/card* with driver vgem"})


def test_a_damaged_transcript_is_refused(tmp_path):
    doc = json.loads(transcript.path_of(real_fences.EXPERIMENT).read_text())
    doc["data"]["write_fence"]["poll_in"]["ready"] = True  # claim the reader did not wait
    p = tmp_path / "t.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(ReferenceDataError, match="checksum mismatch"):
        transcript.load(real_fences.EXPERIMENT, p)


def test_the_kernels_rule_passes_and_wrong_or_memorised_rules_fail(ev):
    assert real_exercises.check_rule(real_fences.kernel_rule, ev.data) == []
    # "wait for every pending fence" is the writer's rule applied to readers too
    assert real_exercises.check_rule(lambda fences, access: any(not s for _, s in fences), ev.data)
    # the recorded answers learnt by heart: the shuffled cases with extra signalled fences catch it
    table = {(tuple(f), a): w for f, a, w in real_fences.observed_cases(ev.data)}
    memorised = real_exercises.check_rule(lambda fences, access: table.get((tuple(fences), access), False), ev.data)
    assert memorised and all("you say go" in p for p in memorised)


def test_views_carry_the_mode_and_say_emulated(ev):
    t = real_fences.table(ev)
    assert "REPLAY" in t.caption and t.headers == ("question", "the kernel's answer")
    assert any("EOPNOTSUPP" in r[1] for r in t.rows)
    fig = real_fences.figure_waits(ev)
    assert "emulated" in fig.fig.layout.title.text and "REPLAY" in fig.fig.layout.title.text
    rows = real_fences.waits(ev)
    assert [r["ended_by"] for r in rows][:2] == [f"its {real_fences.POLL_MS} ms timeout", "the signal"]
    assert real_fences.waits_csv(ev).count("\n") == len(rows) + 1
    assert "EOPNOTSUPP" in real_fences.describe(ev)


def test_the_exercises_check_against_the_recording(ev, capsys):
    assert real_exercises.reader_with_writer_pending("b", ev) is True
    assert real_exercises.reader_with_writer_pending("a", ev) is False
    assert real_exercises.never_signalled_seconds(10, ev) is True
    assert real_exercises.never_signalled_seconds(20, ev) is False
    assert real_exercises.who_waits(real_fences.kernel_rule, ev) is True
    assert real_exercises.who_waits(lambda fences, access: False, ev) is False
    assert real_exercises.who_waits(None, ev) is None
    capsys.readouterr()


def test_bad_parameters_are_refused_before_any_boot():
    from helpers.core import experiments
    from helpers.core.errors import InputError, InputTypeError

    exp = experiments.get(real_fences.EXPERIMENT)
    for bad in ({"delay_ms": 0}, {"delay_ms": 10_000}, {"delay_ms": "200"}, {"never_signalled": "yes"}, {"flips": 1}):
        with pytest.raises((InputError, InputTypeError)):
            exp.check_params(bad)
    assert exp.check_params({"delay_ms": 150, "never_signalled": False}) == {"delay_ms": 150, "never_signalled": False}
