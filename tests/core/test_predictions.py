"""Predictions are kept before results appear, and compared after."""

from __future__ import annotations

import json

import pytest

from helpers.core import predictions
from helpers.core.errors import InputError, InputTypeError


@pytest.fixture(autouse=True)
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_STATE_DIR", str(tmp_path))
    return tmp_path


def test_none_keeps_nothing_and_says_how_to_answer(state, capsys):
    assert predictions.commit("ch03.small_copy_us", None) is None
    assert not (state / "predictions.json").exists()
    assert "Replace None" in capsys.readouterr().out


def test_a_guess_is_kept_with_its_time_and_every_later_guess_too(state):
    predictions.commit("ch03.small_copy_us", 5, unit="µs")
    predictions.commit("ch03.small_copy_us", 9, unit="µs")
    kept = json.loads((state / "predictions.json").read_text())["ch03.small_copy_us"]
    assert [k["guess"] for k in kept] == [5.0, 9.0] and all(k["at"] for k in kept)
    assert predictions.first("ch03.small_copy_us").guess == 5.0


def test_compare_uses_the_first_guess_and_says_how_far_off():
    predictions.commit("ch03.bw", 10, unit="GB/s")
    predictions.commit("ch03.bw", 50, unit="GB/s")  # changed after the fact: the first one counts
    assert "off by 5.0x" in predictions.compare("ch03.bw", 50.0, unit="GB/s")
    predictions.commit("ch03.t0", 4, unit="µs")
    assert "within 2x" in predictions.compare("ch03.t0", 5.0, unit="µs")
    assert "no prediction" in predictions.compare("ch03.none", 1.0)


@pytest.mark.parametrize("question, guess, exc", [
    ("Small copy", 5, InputError), ("ch03.x", True, InputTypeError), ("ch03.x", float("nan"), InputError),
    ("ch03.x", [1], InputTypeError), ("ch03.x", "", InputTypeError)])
def test_bad_predictions_are_refused(question, guess, exc, state):
    with pytest.raises(exc):
        predictions.commit(question, guess)
    assert not (state / "predictions.json").exists()


def test_a_damaged_store_does_not_stop_the_page(state):
    (state / "predictions.json").write_text("{not json")
    assert predictions.commit("ch03.x", 1) is not None
