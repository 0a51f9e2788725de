"""A fresh run of a chapter is quiet (issue 38, item 4): checked on every cell nbval executes.

`make test-notebooks` (and tools/matrix.py) already run each chapter top to bottom under nbval,
in replay mode on CI and live on a GPU machine. This hook reads each cell's outputs as nbval
collects them, so the check costs no extra execution. A fresh notebook has every exercise
unanswered, so none of these may appear in any output:

- a ✘ (an unanswered exercise says "not answered yet", it is not wrong);
- a bare `True` / `False` as a cell's value (a check's return value leaking onto the page);
- warning text (`SomethingWarning:`), which a deliberate design must suppress at its call;
- ANSI escape codes, which Jupyter shows raw in saved outputs and on the site.
"""

from __future__ import annotations

import re

import pytest

ANSI = re.compile(r"\x1b\[")
WARNING = re.compile(r"\b[A-Z]\w*Warning\b\s*[:(]|\bwarnings\.warn\(")


def _text(output) -> str:
    """The text an output shows: a stream's text or a result's text/plain."""
    text = output.get("text")
    if text is None:
        text = (output.get("data") or {}).get("text/plain", "")
    return "".join(text) if isinstance(text, list) else str(text)


def noise(outputs) -> list[str]:
    """What in a cell's outputs a fresh run must not show (empty: quiet)."""
    found = []
    for out in outputs or ():
        if out.get("output_type") == "error":
            continue  # an error fails the cell already
        text = _text(out)
        if "✘" in text:
            found.append(f"a ✘ on a fresh run (an unanswered exercise says 'not answered yet'): {text.strip()[:200]!r}")
        if out.get("output_type") == "execute_result" and text.strip() in ("True", "False"):
            found.append(f"a stray {text.strip()} as the cell's value")
        if WARNING.search(text):
            found.append(f"warning text: {text.strip()[:200]!r}")
        if ANSI.search(text):
            found.append(f"ANSI escape codes: {text.strip()[:120]!r}")
    return found


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
