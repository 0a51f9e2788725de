"""Check the built site: plotly.js is served locally, no page fetches a script from the
network, every figure's HTML reached its page, and no lab solution is on it.

A line of a lab's solution (labs/*.ipynb, between BEGIN and END SOLUTION) found in any page,
copied source or executed notebook of the site is a problem, unless the build published the
solutions on purpose (`make book BOOK_LABS=solution`, tools/site/booklabs.py).

    python -m tools.site.bookcheck book/_build/html
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from tools.site import booklabs

ROOT = Path(__file__).resolve().parents[2]


def main(site: str) -> int:
    root = Path(site)
    problems = []
    if not (root / "_static" / "plotly.min.js").is_file():
        problems.append("_static/plotly.min.js missing: figures would need a CDN")
    pages = sorted(root.rglob("*.html"))
    figures = 0
    for page in pages:
        text = page.read_text(errors="replace")
        for src in re.findall(r'<script[^>]*\ssrc="([^"]+)"', text):
            if re.match(r"(https?:)?//", src):
                problems.append(f"{page.relative_to(root)}: loads a script from the network: {src}")
        if "application/vnd.plotly.v1+json" in text and "Plotly.newPlot" not in text:
            problems.append(f"{page.relative_to(root)}: a plotly figure lost its HTML")
        figures += text.count("Plotly.newPlot(")
    status = root / "book" / "status.html"
    if not status.is_file() or "Run time" not in status.read_text():
        problems.append("book/status.html: missing or without the execution table")
    state = booklabs.read_state(root.parent) or {}
    leaks = booklabs.solution_leaks(root, sorted((ROOT / "labs").glob("lab*.ipynb")))
    if state.get("mode") == "solution":
        labs_note = f"lab solutions published on purpose (BOOK_LABS=solution; {len(leaks)} files show them)"
    else:
        problems += [f"{leak} (a student site must not show solutions)" for leak in leaks]
        labs_note = "no lab solution on any page"
    print("\n".join(problems) if problems else
          f"bookcheck: {len(pages)} pages, {figures} figures, all offline; {labs_note}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "book/_build/html"))
