"""The chapters under nbval (make test-notebooks): besides running, every cell's output is checked
for wording against its mode with tools/wordcheck.py's rules (issue 38, item 2): no model's value
called measured, no live value called recorded, and, in a notebook whose banner says LIVE, no
recording wording that does not name its recording. A cell whose output breaks a rule fails with
the lines that did. (On a GPU, `python tools/wordcheck.py --execute notebooks/*.ipynb` does the same
outside pytest.)"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location("wordcheck", Path(__file__).resolve().parents[1] / "tools" / "wordcheck.py")
wordcheck = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(wordcheck)

_LIVE: dict[str, bool] = {}  # notebook -> whether its banner said LIVE


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    outputs = getattr(item, "test_outputs", None)  # nbval's cell item keeps what the cell printed
    if call.when != "call" or outputs is None or report.failed:
        return
    text = wordcheck.output_text(outputs)
    where = str(item.fspath)
    if where not in _LIVE and "mode" in text:
        _LIVE[where] = wordcheck.is_live(text)
    found = wordcheck.problems(text, _LIVE.get(where, False))
    if found:
        report.outcome = "failed"
        report.longrepr = "wording against the mode (tools/wordcheck.py):\n" + "\n".join(f"  {f}" for f in found)
