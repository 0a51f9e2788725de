"""Check the built site: plotly.js is served locally, no page fetches a script from the
network, and every figure's HTML reached its page.

    python tools/bookcheck.py book/_build/html
"""

from __future__ import annotations

import re
import sys
from pathlib import Path


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
    print("\n".join(problems) if problems else
          f"bookcheck: {len(pages)} pages, {figures} figures, all offline")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "book/_build/html"))
