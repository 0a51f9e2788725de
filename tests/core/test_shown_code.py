"""The code a page shows is the code the recorder runs; a learner's change runs live only."""

from __future__ import annotations

import pytest

from helpers import course
from helpers.core import evidence, experiments, shown
from helpers.core.errors import InputError, InputTypeError
from helpers.core.mode import Mode


def time_copies(n: int) -> list[int]:
    """The page's measuring function (a stand-in: it 'measures' n values)."""
    return list(range(n))


def _run(quick, n: int = 3, code=time_copies):
    return {"times": code(n)}


def _ctx(live: bool) -> course.Context:
    return course.Context(Mode.LIVE if live else Mode.REPLAY, "no GPU here",
                          gpu_name="Test GPU" if live else None, reference_name="h100-pcie")


@pytest.fixture
def reg(monkeypatch):
    exps = {"transfers.pinned_vs_pageable": experiments.Experiment("transfers.pinned_vs_pageable", 3, "demo", _run),
            "demo.plain": experiments.Experiment("demo.plain", 3, "demo", lambda quick: {})}
    monkeypatch.setattr(experiments, "discover", lambda: dict(exps))
    monkeypatch.setattr(evidence.gpu, "release_pools", lambda: None)
    return exps


def test_the_shown_function_is_the_code_parameters_default(reg):
    assert reg["transfers.pinned_vs_pageable"].shown is time_copies
    assert reg["demo.plain"].shown is None


def test_the_page_s_own_function_is_not_a_change(reg):
    ev = _ctx(True).get("transfers.pinned_vs_pageable", code=time_copies)
    assert ev.data == {"times": [0, 1, 2]} and ev.changed_code is None and "your" not in ev.caption("x")


def test_a_changed_function_runs_live_and_says_so(reg):
    def time_copies(n):  # the learner's edit: same name, other text
        return [7] * n

    ev = _ctx(True).get("transfers.pinned_vs_pageable", code=time_copies)
    assert ev.data == {"times": [7, 7, 7]}
    assert ev.changed_code == "time_copies" and "your changed time_copies" in ev.caption("Copies")
    assert ev.provenance["changed_code"] == "time_copies"


def test_in_replay_a_changed_function_is_not_run_and_why_says_so(reg):
    ran = []

    def time_copies(n):
        ran.append(n)
        return []

    ev = _ctx(False).get("transfers.pinned_vs_pageable", code=time_copies)
    assert ev.mode is Mode.REPLAY and ran == [] and "runs only live" in ev.why and "series" in ev.data


def test_code_is_refused_where_the_page_shows_none_or_it_is_not_a_function(reg):
    with pytest.raises(InputError, match="shows no measuring code"):
        _ctx(True).get("demo.plain", code=time_copies)
    with pytest.raises(InputTypeError, match="must be a function"):
        _ctx(False).get("transfers.pinned_vs_pageable", code="time_copies")


def test_registration_refuses_a_code_parameter_that_is_not_a_function():
    with pytest.raises(experiments.RegistryError, match="must default to the function"):
        experiments.experiment("demo.badcode", chapter=0, title="x")(lambda quick, code=3: {})


def test_changed_compares_text_not_identity():
    ns: dict = {}
    exec("def time_copies(n: int) -> list[int]:\n    return [n]\n", ns)
    assert shown.changed(ns["time_copies"], time_copies)  # no source for exec'd code: treated as changed
    assert not shown.changed(time_copies, time_copies)
