"""tests/prerequisites.py: a bare pytest skips what the machine cannot run, naming why; COURSE_REQUIRE fails instead."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests import prerequisites as P


class Item:
    """A collected test with one marker, recording the markers the hook adds."""

    def __init__(self, marker: str):
        self.marker, self.added = marker, []

    def get_closest_marker(self, name):
        return SimpleNamespace(name=name) if name == self.marker else None

    def add_marker(self, mark):
        self.added.append(mark)


def _config(markexpr: str = ""):
    return SimpleNamespace(getoption=lambda name, default=None: markexpr)


def test_required_reads_the_list_and_all(monkeypatch):
    assert P.required({"COURSE_REQUIRE": " browser, hub ,"}) == {"browser", "hub"}
    assert P.required({}) == set()
    assert P.required({"COURSE_REQUIRE": "all"}) == set(P.CHECKS) | {"gpu"}


def test_an_absent_prerequisite_skips_with_its_reason(monkeypatch):
    monkeypatch.delenv(P.REQUIRE_VAR, raising=False)
    monkeypatch.setitem(P.CHECKS, "browser", lambda config: "no Chromium found: install it")
    monkeypatch.setitem(P.CHECKS, "hub", lambda config: None)
    skipped, runs = Item("browser"), Item("hub")
    P.apply(_config(), [skipped, runs])
    assert runs.added == []
    (mark,) = skipped.added
    assert mark.name == "skip" and "browser test not run here: no Chromium found" in mark.kwargs["reason"]


def test_a_required_marker_fails_the_run_naming_what_is_missing(monkeypatch):
    monkeypatch.setenv(P.REQUIRE_VAR, "kernel_vm")
    monkeypatch.setitem(P.CHECKS, "kernel_vm", lambda config: "QEMU is not installed")
    monkeypatch.setitem(P.CHECKS, "browser", lambda config: "no Chromium found")
    browser = Item("browser")
    with pytest.raises(pytest.UsageError, match="kernel_vm: QEMU is not installed"):
        P.apply(_config(), [Item("kernel_vm"), browser])


def test_colab_runs_only_when_selected():
    assert P.CHECKS["colab"](_config("colab")) is None
    assert "make test-colab" in P.CHECKS["colab"](_config(""))


def test_built_site_names_make_book(monkeypatch, tmp_path):
    monkeypatch.setattr(P, "ROOT", tmp_path)
    assert "make book" in P.CHECKS["built_site"](_config())
    (tmp_path / "book" / "_build" / "html").mkdir(parents=True)
    (tmp_path / "book" / "_build" / "html" / "index.html").write_text("<html></html>")
    assert P.CHECKS["built_site"](_config()) is None
