"""Chapter 7's exercises, diagrams and toy-GPU views: expected values from the recording, checks
that catch planted wrong answers, verdicts decided by the numbers."""

import re

import pytest

from helpers import course
from helpers.ch07_command_submission import diagrams, exercises, launch, toy_ring
from helpers.core import experiments
from helpers.core.errors import InputError
from helpers.core.mode import Mode


def replay():
    return course.Context(Mode.REPLAY, "no GPU in this test", gpu_name=None, reference_name="h100-pcie")


def test_loop_bound_is_the_slower_side_of_the_recording():
    lo = replay().get("submission.launch_overhead")
    s = launch.launch_summary(lo.data)["tiny"]
    assert exercises.loop_bound_us(lo) == pytest.approx(200 * max(s["host_us"], s["device_us"]))
    assert exercises.ex72_loop_time(200 * s["host_us"], lo) is True
    assert exercises.ex72_loop_time(200 * s["device_us"], lo) is False  # the GPU's pace: a planted slip


def test_choices_explain(capsys):
    assert exercises.ex71_graph_gain("b") is True and exercises.ex71_graph_gain("a") is False
    assert "0.06 µs" in capsys.readouterr().out
    assert exercises.ex73_rptr_writeback("a") is True and exercises.ex73_rptr_writeback("c") is False


def test_capture_trial_catches_planted_mistakes():
    def right(stream, kernel, x, n):
        with stream:
            stream.begin_capture()
            try:
                for _ in range(n):
                    kernel((1,), (1,), (x,))
            finally:
                graph = stream.end_capture()
        return graph

    def runs_one_outside(stream, kernel, x, n):
        kernel((1,), (1,), (x,))
        stream.begin_capture()
        for _ in range(n - 1):
            kernel((1,), (1,), (x,))
        return stream.end_capture()

    def one_short(stream, kernel, x, n):
        return right(stream, kernel, x, n - 1)

    def forgets_the_graph(stream, kernel, x, n):
        right(stream, kernel, x, n)

    assert exercises._stand_in_trial(right, 7) == []
    assert any("outside the capture" in p for p in exercises._stand_in_trial(runs_one_outside, 7))
    assert any("launched 6" in p for p in exercises._stand_in_trial(one_short, 7))
    assert any("return the graph" in p for p in exercises._stand_in_trial(forgets_the_graph, 7))


def test_shown_code_is_registered():
    reg = experiments.discover()
    assert reg["submission.launch_overhead"].shown is launch.time_queued_launches
    assert reg["submission.graphs"].shown is launch.graph_vs_one_by_one


def test_diagrams():
    for d in (diagrams.ring_diagram(), diagrams.gpfifo_diagram()):
        assert "<desc" in d.svg() and d.title

    def words(svg: str) -> str:  # the picture's text, read across the lines a label may be wrapped into
        return " ".join(re.sub(r"<[^>]+>", " ", svg).split())

    assert "GPGet" in words(diagrams.gpfifo_diagram().svg()) and "write back" in words(diagrams.ring_diagram().svg())


def fake_batching(reads):
    return [{"batch": b, "doorbells": 256 // b, "mmio_reads": r, "mmio_writes": 256 // b,
             "cpu_model_us": (256 // b) * 0.06 + r * 0.9, "device_model_us": 1.0,
             "cpu_us_per_command": ((256 // b) * 0.06 + r * 0.9) / 256} for b, r in zip((1, 8, 16), reads, strict=True)]


def test_batching_verdict_follows_the_table():
    text = toy_ring.batching_verdict(fake_batching((8, 4, 6)))
    assert "does not keep falling" in text and "RING_HEAD reads do not" in text
    text = toy_ring.batching_verdict(fake_batching((0, 0, 0)))
    assert "keeps falling" in text and "No register reads" in text
    with pytest.raises(InputError):
        toy_ring.batching_verdict([])


def test_counts_text_says_which_step_paid():
    r = {"fence": 1, "submit": {"doorbells": 1, "mmio_writes": 1, "mmio_reads": 1},
         "wait": {"doorbells": 0, "mmio_writes": 0, "mmio_reads": 0}}
    text = toy_ring.counts_text(r)
    assert "RING_HEAD" in text and "polled in system memory" in text
    assert toy_ring.doorbell_us() < toy_ring.register_read_us()


def test_exercise_75_ioctl_per_job_explains_every_option(capsys):
    assert exercises.ex75_ioctl_per_job(None) is None
    assert exercises.ex75_ioctl_per_job("b") is True
    assert "implicit sync" in capsys.readouterr().out
    for wrong in "acd":
        assert exercises.ex75_ioctl_per_job(wrong) is False
    assert set(exercises.IOCTL_WHY) == set(exercises.IOCTL_OPTIONS)
