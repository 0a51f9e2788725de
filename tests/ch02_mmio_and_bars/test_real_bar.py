"""Chapter 2, part 2 (edu's BAR in the kernel lab's VM) from its recorded transcript: what the
page shows, the exercises' checks, and bad input. The live boot is tests/measure/test_edu_live.py."""

from __future__ import annotations

import pytest

from helpers.ch02_mmio_and_bars import real_bar, real_exercises
from helpers.core import transcript
from helpers.core.errors import InputError, InputTypeError
from helpers.core.evidence import Evidence
from helpers.core.mode import Mode


@pytest.fixture(scope="module")
def ev() -> Evidence:
    t = transcript.load(real_bar.EXPERIMENT)
    return Evidence(real_bar.EXPERIMENT, t.data, Mode.REPLAY, t.label, why="recorded transcript")


def test_the_recording_is_edu_as_qemu_defines_it(ev):
    f = real_bar.facts(ev)
    assert f["id"] == 0x010000ED and f["inverted"] and f["bar0_bytes"] == 1 << 20
    assert {n: v for n, v in f["factorials"].items() if n <= 12} == {1: 1, 5: 120, 10: 3628800, 12: 479001600}
    assert ev.data["vm"]["accel"] in ("TCG", "KVM") and ev.data["config"]["vendor"] == 0x1234


def test_tables_and_figure_carry_the_vm_and_say_emulation(ev):
    assert "QEMU" in real_bar.config_table(ev).caption and "REPLAY" in real_bar.register_table(ev).caption
    fig = real_bar.figure_costs(ev)
    assert "emulation" in fig.title and "not hardware" in fig.title and len(fig.rows()) == 3


def test_exercises_accept_the_device_and_refuse_wrong_answers(ev, capsys):
    assert real_exercises.liveness_answer(0xEDCBA987, ev) is True
    assert real_exercises.liveness_answer(0x12345678, ev) is False
    assert real_exercises.factorial13_answer(6227020800 % 2**32, ev) is True
    assert real_exercises.factorial13_answer(6227020800, ev) is False

    def right(raw):
        return ("io", 32, False) if raw & 1 else ("memory", 64 if (raw >> 1) & 3 == 2 else 32, bool(raw & 8))

    def ignores_width(raw):
        return ("io", 32, False) if raw & 1 else ("memory", 32, bool(raw & 8))

    assert real_exercises.decode_bar_answer(right, ev) is True
    assert real_exercises.decode_bar_answer(ignores_width, ev) is False


@pytest.mark.parametrize("bad", [[], [21], [-1], ["5"], list(range(9)), 5])
def test_bad_factorial_lists_are_refused(bad):
    with pytest.raises((InputError, InputTypeError)):
        real_bar.factorial_list(bad)
