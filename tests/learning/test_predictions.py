"""Predictions are kept before results appear, compared after, and never lost."""

from __future__ import annotations

import json
import multiprocessing
import re
from pathlib import Path

import pytest

from helpers import course
from helpers.core import config
from helpers.core.errors import InputError, InputTypeError
from helpers.core.mode import Mode
from helpers.learning import predictions


@pytest.fixture(autouse=True)
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_STATE_DIR", str(tmp_path))
    return tmp_path


def _doc(state) -> dict:
    return json.loads((state / "predictions.json").read_text())


def test_none_keeps_nothing_and_says_how_to_answer(state, capsys):
    assert predictions.commit("ch03.small_copy_us", None, kind="time") is None
    assert not (state / "predictions.json").exists()
    assert "Replace None" in capsys.readouterr().out


def test_a_guess_is_kept_with_its_kind_and_time_and_every_later_guess_too(state):
    predictions.commit("ch03.small_copy_us", 5, unit="µs", kind="time")
    predictions.commit("ch03.small_copy_us", 9, unit="µs", kind="time")
    kept = _doc(state)["predictions"]["ch03.small_copy_us"]
    assert [k["guess"] for k in kept] == [5.0, 9.0] and all(k["at"] for k in kept)
    assert {k["kind"] for k in kept} == {"time"}
    assert predictions.first("ch03.small_copy_us").guess == 5.0


def test_compare_uses_the_first_guess_and_says_how_far_off():
    predictions.commit("ch03.bw", 10, unit="GB/s", kind="bandwidth")
    predictions.commit("ch03.bw", 50, unit="GB/s", kind="bandwidth")  # changed after the fact: the first counts
    assert "off by 5.0x" in predictions.compare("ch03.bw", 50.0, unit="GB/s").line
    predictions.commit("ch03.t0", 4, unit="µs", kind="time")
    assert "within 2x" in predictions.compare("ch03.t0", 5.0, unit="µs").line
    assert "no prediction" in predictions.compare("ch03.none", 1.0).line


def test_compare_keeps_what_the_guess_was_compared_with(state):
    predictions.commit("ch03.bw", 10, unit="GB/s", kind="bandwidth")
    c = predictions.compare("ch03.bw", 25.0, unit="GB/s", source="NVIDIA H100 PCIe", mode="replay")
    assert c.ratio == pytest.approx(2.5) and c.mode == "replay"
    (kept,) = _doc(state)["comparisons"]["ch03.bw"]
    assert kept["measured"] == 25.0 and kept["mode"] == "replay" and kept["source"] == "NVIDIA H100 PCIe"


def test_only_the_latest_comparisons_are_kept_per_question(state):
    for i in range(predictions.KEEP_COMPARISONS + 5):
        predictions.compare("ch03.bw", float(i + 1), mode="live")
    kept = _doc(state)["comparisons"]["ch03.bw"]
    assert len(kept) == predictions.KEEP_COMPARISONS and kept[-1]["measured"] == predictions.KEEP_COMPARISONS + 5


def test_ctx_compare_shows_its_line_once_and_keeps_the_evidence_mode(state, capsys):
    ctx = course.Context(Mode.REPLAY, "no GPU", gpu_name=None, reference_name=None)
    ev = course.Evidence("transfers.x", {}, Mode.REPLAY, "NVIDIA H100 PCIe, driver 580", why="no GPU here")
    ctx.predict("ch03.bw", 10, unit="GB/s", kind="bandwidth")
    capsys.readouterr()
    assert ctx.compare("ch03.bw", 12.0, unit="GB/s", source=ev) is None  # nothing for Jupyter to echo
    out = capsys.readouterr().out
    assert out.count("ch03.bw") == 1 and "within 2x" in out and "REPLAY" in out
    assert _doc(state)["comparisons"]["ch03.bw"][0]["mode"] == "replay"


@pytest.mark.parametrize("question, guess, kind, exc", [
    ("Small copy", 5, "time", InputError), ("ch03.x", True, "time", InputTypeError),
    ("ch03.x", float("nan"), "time", InputError), ("ch03.x", [1], "time", InputTypeError),
    ("ch03.x", "", "time", InputTypeError), ("ch03.x", 1, "latency-ish", InputError)])
def test_bad_predictions_are_refused(question, guess, kind, exc, state):
    with pytest.raises(exc):
        predictions.commit(question, guess, kind=kind)
    assert not (state / "predictions.json").exists()


@pytest.mark.parametrize("measured, mode, exc", [
    ("fast", None, InputTypeError), (True, None, InputTypeError), (float("inf"), None, InputError),
    (1.0, "measured", InputError)])
def test_bad_comparisons_are_refused(measured, mode, exc, state):
    with pytest.raises(exc):
        predictions.compare("ch03.x", measured, mode=mode)
    assert not (state / "predictions.json").exists()


def test_the_first_format_is_read_and_kept_when_written_again(state):
    (state / "predictions.json").write_text(json.dumps({"ch03.old": [{"guess": 3.0, "unit": "µs", "at": "t"}]}))
    predictions.commit("ch03.new", 1, kind="count")
    doc = _doc(state)
    assert doc["version"] == predictions.VERSION
    assert doc["predictions"]["ch03.old"][0]["guess"] == 3.0 and doc["predictions"]["ch03.new"][0]["guess"] == 1.0


@pytest.mark.parametrize("damage", [b"{not json", b"[1, 2]", b'{"ch03.x": 5}', b"\xff\xfe\x00garbage",
                                    b'{"version": 2, "predictions": []}'])
def test_a_damaged_store_is_moved_aside_and_reported_never_overwritten(damage, state, capsys):
    (state / "predictions.json").write_bytes(damage)
    assert predictions.commit("ch03.x", 1, kind="count") is not None  # the page goes on
    (aside,) = state.glob("predictions.json.damaged-*")
    assert re.fullmatch(r"predictions\.json\.damaged-\d{8}T\d{6}Z", aside.name)
    assert aside.read_bytes() == damage  # unchanged, where the message says
    assert str(aside) in capsys.readouterr().err
    assert _doc(state)["predictions"]["ch03.x"][0]["guess"] == 1.0


def test_a_second_damage_in_the_same_second_does_not_replace_the_first(state):
    for text in (b"{one", b"{two"):
        (state / "predictions.json").write_bytes(text)
        predictions.commit("ch03.x", 1, kind="count")
    assert sorted(p.read_bytes() for p in state.glob("predictions.json.damaged-*")) == [b"{one", b"{two"]


def test_reading_the_record_changes_nothing_even_when_damaged(state):
    (state / "predictions.json").write_bytes(b"{not json")
    rec = predictions.read_record()
    assert rec.problem and "Nothing was changed" in rec.problem and not rec.predictions
    assert sorted(p.name for p in state.iterdir()) == ["predictions.json"]


def test_a_store_from_a_newer_course_is_left_alone(state):
    newer = json.dumps({"version": predictions.VERSION + 1, "predictions": {}})
    (state / "predictions.json").write_text(newer)
    with pytest.raises(predictions.PredictionStoreError, match="newer version"):
        predictions.commit("ch03.x", 1, kind="count")
    assert (state / "predictions.json").read_text() == newer


def test_a_store_from_a_newer_course_is_explained_when_read_not_raised(state):
    newer = json.dumps({"version": predictions.VERSION + 1, "predictions": {}})
    (state / "predictions.json").write_text(newer)
    rec = predictions.read_record()
    assert "newer version of the course" in rec.problem and "make lab" in rec.problem and not rec.predictions
    with pytest.raises(predictions.PredictionStoreError) as err:
        predictions.commit("ch03.x", 7, unit="calls", kind="count")
    assert "your prediction 7.0 calls for ch03.x was NOT saved" in str(err.value) and "run the cell again" in str(err.value)
    assert (state / "predictions.json").read_text() == newer


def test_a_lock_held_too_long_is_a_clear_error_not_a_hang(state, monkeypatch):
    """Issue 39: the message said "no prediction was lost" while the guess being saved was not kept."""
    fcntl = pytest.importorskip("fcntl")  # the POSIX lock; Windows uses msvcrt
    monkeypatch.setattr(predictions, "LOCK_TIMEOUT_S", 0.2)
    predictions.commit("ch03.kept", 1, unit="µs", kind="time")
    before = (state / "predictions.json").read_bytes()
    with open(state / "predictions.json.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # flock locks belong to the open file: this one blocks the next open
        with pytest.raises(predictions.PredictionStoreError) as err:
            predictions.commit("ch03.x", 5, unit="µs", kind="time")
        with pytest.raises(predictions.PredictionStoreError) as err2:
            predictions.compare("ch03.kept", 2.0, unit="µs", mode="replay")
    msg = str(err.value)
    assert "your prediction 5.0 µs for ch03.x was NOT saved" in msg and "lock" in msg and "run the cell again" in msg
    assert "no prediction was lost" not in msg and "kept" not in msg.replace("ch03.kept", "")
    assert "the comparison for ch03.kept" in str(err2.value) and "NOT saved" in str(err2.value)
    assert (state / "predictions.json").read_bytes() == before  # truly not saved, as the message says
    predictions.commit("ch03.x", 5, unit="µs", kind="time")  # and, as it says, running the cell again saves it
    assert predictions.first("ch03.x").guess == 5.0


_AS_ANOTHER_USER = r"""
import fcntl, json, os, pwd, sys
os.environ["COURSE_STATE_DIR"] = sys.argv[1]
from helpers.learning import predictions  # imported first: the interpreter's own files may be root's alone
if os.getuid() == 0:  # root may open any file: become a user who does not own the lock
    os.setgid(65534)
    os.setuid(65534)
try:
    predictions.commit("ch03.x", 5, unit="µs", kind="time")
    print(json.dumps(["saved", ""]))
except Exception as exc:
    print(json.dumps([type(exc).__name__, str(exc)]))
"""


def test_a_lock_file_owned_by_someone_else_is_a_clear_error_not_a_permission_error():
    """Issue 39: a lock file another user owns gave a raw PermissionError."""
    import os
    import subprocess
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as top:  # in /tmp, reachable by the other user (pytest's is not)
        state = Path(top) / "shared-state"
        state.mkdir()
        os.chmod(top, 0o755)
        os.chmod(state, 0o777)  # the folder is writable by everyone: only the lock file is someone else's
        lock = state / "predictions.json.lock"
        lock.write_text("")
        os.chmod(lock, 0o000 if os.getuid() else 0o600)  # not openable by the user the check runs as
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(config.REPO_ROOT),
                                                                        os.environ.get("PYTHONPATH")]))}
        run = subprocess.run([sys.executable, "-c", _AS_ANOTHER_USER, str(state)],
                             capture_output=True, text=True, timeout=60, env=env)
        assert run.returncode == 0, run.stderr
        kind, msg = json.loads(run.stdout.strip().splitlines()[-1])
        stored = (state / "predictions.json").exists()
    assert kind == "PredictionStoreError", (kind, msg)
    assert str(lock) in msg and "belongs to" in msg and "NOT saved" in msg and "COURSE_STATE_DIR" in msg
    assert not stored


@pytest.mark.parametrize("guess, unit, kind, kept", [
    ("80 GiB", "GiB", "size", 80.0), ("80GiB", "GiB", "size", 80.0), ("2x", "x", "ratio", 2.0),
    ("2x", "", "ratio", 2.0), (" 1.5e3 ", "µs", "time", 1500.0), ("4 us", "µs", "time", 4.0), ("12", "", "count", 12.0),
    ("0x12345678", "", "outcome", "0x12345678"), ("b", "", "outcome", "b"), (0, "calls", "count", 0.0)])
def test_a_guess_written_with_its_unit_is_read_as_the_number(guess, unit, kind, kept, state):
    p = predictions.commit("ch03.q", guess, unit=unit, kind=kind)
    assert p.guess == kept and _doc(state)["predictions"]["ch03.q"][0]["guess"] == kept


@pytest.mark.parametrize("guess, unit, kind, names", [
    ("80 GB", "GiB", "size", r"in 'GB'.*asks for a number of GiB.*80 GB is 74\.51 GiB"),
    ("one", "", "ratio", "'one' is not a number"), ("one", "calls", "count", "'one' is not a number"),
    (-1, "x", "ratio", "cannot be a ratio"), (0, "x", "ratio", "cannot be a ratio"), ("-1x", "x", "ratio", "cannot be a ratio"),
    (-3, "µs", "time", "negative"), ("3 ms", "µs", "time", "3 ms is 3000 µs"), ("2x", "GB/s", "bandwidth", "in 'x'"),
    ("fast", "GB/s", "bandwidth", "not a number"), ("1,000", "calls", "count", "in ',000'"),
    ("5 GB/s", "", "time", "leave the unit out")])
def test_a_malformed_guess_is_refused_naming_the_problem_and_never_stored(guess, unit, kind, names, state):
    """Issue 37: "80 GB" (for GiB), "2x", "one" and -1 for a ratio were stored silently as text or numbers."""
    with pytest.raises(InputError, match=names):
        predictions.commit("ch03.q", guess, unit=unit, kind=kind)
    assert not (state / "predictions.json").exists()


PER_PROCESS = 40


def _save_many(state_dir: str, who: str, barrier) -> None:
    import os

    os.environ["COURSE_STATE_DIR"] = state_dir
    barrier.wait(timeout=30)
    for i in range(PER_PROCESS):
        predictions.commit(f"ch99.{who}_{i}", i + 1, kind="count")
        predictions.commit("ch99.shared", i + 1, unit=who, kind="count")


def test_two_processes_saving_at_once_lose_nothing(state):
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(2)
    procs = [ctx.Process(target=_save_many, args=(str(state), who, barrier)) for who in ("a", "b")]
    for p in procs:
        p.start()
    try:
        for p in procs:
            p.join(timeout=120)
        assert [p.exitcode for p in procs] == [0, 0], "a saving process failed or did not finish in time"
    finally:
        for p in procs:  # a process that hung is ended, never left behind
            if p.is_alive():
                p.kill()
                p.join(timeout=10)
    doc = _doc(state)
    kept = doc.get("predictions", doc)  # (the first format kept questions at the top)
    assert sum(1 for q in kept if q != "ch99.shared") == 2 * PER_PROCESS
    assert sorted(e["unit"] for e in kept["ch99.shared"]) == ["a"] * PER_PROCESS + ["b"] * PER_PROCESS
    assert not list(state.glob(".predictions.json.*.tmp")) and not list(state.glob("*.damaged-*"))


def _declared_predictions() -> list[tuple[str, str]]:
    """(notebook, source of a ctx.predict call) for every prediction on a course page."""
    out = []
    for nb in sorted((config.REPO_ROOT / "notebooks").glob("*.ipynb")) + sorted(
            (config.REPO_ROOT / "labs").glob("*.ipynb")):
        for cell in json.loads(nb.read_text())["cells"]:
            src = "".join(cell["source"])
            out += [(nb.name, m.group(0)) for m in re.finditer(r"ctx\.predict\([^)]*\)", src)]
    return out


def test_every_prediction_on_a_page_declares_its_kind():
    calls = _declared_predictions()
    assert len(calls) > 30
    missing = [f"{nb}: {call}" for nb, call in calls
               if not re.search(r"kind=\"(" + "|".join(predictions.KINDS) + r")\"", call)]
    assert not missing, "predictions without a kind=…: " + "; ".join(missing)


def test_a_measured_zero_in_float_noise_is_a_total_miss_in_the_compare_line():
    predictions.commit("ch01.extra", 990, unit="calls", kind="count")
    c = predictions.compare("ch01.extra", -3e-13, unit="calls", mode="replay")
    assert c.ratio == 0.0 and "measured zero where you predicted more" in c.line
    predictions.commit("ch01.none", 0, unit="calls", kind="count")
    assert "within 2x" in predictions.compare("ch01.none", 2e-13, unit="calls", mode="replay").line


def test_a_guess_in_another_unit_gets_no_ratio():
    predictions.commit("ch02.bar", 256, unit="MiB", kind="size")
    c = predictions.compare("ch02.bar", 128.0, unit="GiB", mode="replay")
    assert c.ratio is None and "another unit" in c.line and "within" not in c.line
