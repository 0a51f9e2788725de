"""Feedback for one student's lab, as a small HTML page (what nbgrader's exchange hands back).

The page lists each graded part with its points and the grader's feedback, and the seed of
the hidden cases; it holds nothing of the hidden cases themselves.
"""

from __future__ import annotations

import html
from collections.abc import Sequence


def page(student: str, lab: str, results: Sequence) -> str:
    """The feedback page of `student` for `lab` (results: CheckResult of that lab)."""
    got = sum(r.score for r in results)
    total = sum(r.max_score for r in results)
    rows = "\n".join(
        f"<tr><td>{html.escape(r.grade_id)}</td><td>{r.score:g} / {r.max_score:g}</td><td>{html.escape(r.status)}</td>"
        f"<td>{html.escape(r.feedback.splitlines()[0] if r.feedback else '')}</td></tr>" for r in results)
    seeds = sorted({r.seed for r in results if r.seed is not None})
    return (f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>{html.escape(lab)} feedback for "
            f"{html.escape(student)}</title></head><body>\n<h1>{html.escape(lab)}: {got:g} / {total:g}</h1>\n"
            f"<p>Graded outside your notebook, on cases your notebook never saw"
            f"{' (seed ' + ', '.join(map(str, seeds)) + ')' if seeds else ''}.</p>\n"
            f"<table><tr><th>part</th><th>points</th><th>status</th><th>feedback</th></tr>\n{rows}\n</table>\n"
            "</body></html>\n")
