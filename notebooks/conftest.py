"""Two checks on every cell nbval executes in the chapters (tools/matrix/runner.py, one notebook by hand),
read from the outputs nbval collects, so they cost no extra execution (in CI the book build executes
the chapters once and tests/site/test_executed_notebooks.py applies the same rules, tools/checks/quiet.py):

1. Wording against the mode (issue 38, item 2), with tools/checks/wordcheck.py's rules: no model's value
   called measured, no live value called recorded, and, in a notebook whose banner says LIVE, no
   recording wording that does not name its recording. (On a GPU, `python -m tools.checks.wordcheck
   --execute notebooks/*.ipynb` does the same outside pytest.)
2. A fresh run is quiet (issue 38, item 4). A fresh notebook has every exercise unanswered, so none
   of these may appear in any output:
   - a ✘ (an unanswered exercise says "not answered yet", it is not wrong);
   - a bare `True` / `False` as a cell's value (a check's return value leaking onto the page);
   - warning text (`SomethingWarning:`), which a deliberate design must suppress at its call;
   - ANSI escape codes, which Jupyter shows raw in saved outputs and on the site.
"""

from __future__ import annotations

import pytest

from tools.checks import wordcheck
from tools.checks.quiet import noise

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
        report.longrepr = "wording against the mode (tools/checks/wordcheck.py):\n" + "\n".join(f"  {f}" for f in found)

@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """After nbval runs a cell, fail it if its outputs are noisy."""
    result = yield
    outputs = getattr(item, "test_outputs", None)
    if outputs is None or not hasattr(item, "cell"):
        return result
    found = noise(outputs)
    if found:
        pytest.fail(f"cell {getattr(item, 'cell_num', '?')} of a fresh run is not quiet: " + "; ".join(found),
                    pytrace=False)
    return result
