"""The class GPU atlas: the learners' own recordings beside the course's reference machines.

    python -m tools.hub.atlas build SUBMISSIONS_DIR [--out atlas.html] [--csv atlas.csv]

A learner who opts in records their machine (`python -m helpers.record --out my-machine`,
on their own GPU: a folder with manifest.json and one file per experiment) and submits the folder
through nbgrader's exchange as the assignment `atlas` (book/teaching.md shows the commands). The
instructor collects, then builds this page from the collected folder (any depth:
`submitted/<student>/atlas/<machine>/manifest.json`) and data/reference/.

Each file must pass the course's own validation (schema and checksum: a file edited by hand is
refused, named, and left out). Per machine the atlas shows: the GPU and its PCI id, the link
(current/max), the pinned copy model t(n) = t0 + n/B fitted by the course's one estimator
(helpers.models.copy_cost) with n½ = t0·B, both directions, and the sizes of its BARs; then a
plotly figure of B and t0 per machine (REPLAY: each point names its recording).
"""

from __future__ import annotations

import argparse
import csv
import html
import io
import sys
from pathlib import Path

from helpers.core import reference
from helpers.core.errors import ReferenceDataError
from helpers.models import copy_cost

ROOT = Path(__file__).resolve().parents[2]

SWEEP = "transfers.pinned_vs_pageable"
COLUMNS = ("machine", "kind", "gpu", "pci id", "link", "h2d B (GB/s)", "h2d t0 (us)", "h2d n½ (KiB)",
           "d2h B (GB/s)", "d2h t0 (us)", "d2h n½ (KiB)", "BARs", "recorded")


def _size(n: int) -> str:
    for unit, k in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << k:
            return f"{n / (1 << k):g} {unit}"
    return f"{n} B"


def machine_row(ref: reference.Reference, kind: str) -> dict:
    """One machine's atlas entry from its validated manifest and recordings."""
    m = ref.machine
    row = {"machine": ref.name, "kind": kind, "gpu": m["gpu"].get("name"), "pci id": m["gpu"].get("pci_id"),
           "link": f"{m.get('pcie', {}).get('current')} (max {m.get('pcie', {}).get('max')})",
           "recorded": max((str(ref.recording(i).provenance.get("date", ""))[:10] for i in ref.ids()), default="")}
    if ref.has(SWEEP):
        fits = copy_cost.fit_all(ref.experiment(SWEEP))
        for d in ("h2d", "d2h"):
            f = fits[("pinned", d)]
            row[f"{d} B (GB/s)"] = round(f.bandwidth_gbps, 2)
            row[f"{d} t0 (us)"] = round(f.t0_s * 1e6, 2)
            row[f"{d} n½ (KiB)"] = round(f.n_half / 1024, 1)
    gpus = (ref.experiment("system.report") if ref.has("system.report") else {}).get("gpus") or []
    bars = [b for g in gpus[:1] for b in g.get("bars", [])]
    row["BARs"] = ", ".join(f"BAR{b['index']} {_size(b['size'])}" for b in bars) or "not recorded"
    return row


def collect(folder: Path) -> tuple[list[dict], list[str]]:
    """Rows for the reference machines and every valid submission under `folder`; refusals named."""
    rows, refused = [], []
    for name in reference.list_names():
        rows.append(machine_row(reference.load(name), "reference"))
    for path in sorted(folder.rglob(reference.MANIFEST)) if folder.is_dir() else []:
        try:
            rows.append(machine_row(reference.load(path), f"class ({path.relative_to(folder).parts[0]})"))
        except ReferenceDataError as exc:
            refused.append(f"{path.relative_to(folder)}: {exc}")
    return rows, refused


def to_csv(rows: list[dict]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, COLUMNS, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


def page(rows: list[dict], refused: list[str]) -> str:
    """The atlas as one offline HTML page (table, refusals, figure with its description)."""
    import plotly.graph_objects as go
    from plotly.offline import get_plotlyjs

    from helpers.core.mode import Mode
    from helpers.presentation.figures import CourseFigure

    have = [r for r in rows if "h2d B (GB/s)" in r]
    fig = go.Figure([go.Scatter(x=[r["h2d t0 (us)"] for r in have], y=[r["h2d B (GB/s)"] for r in have],
                                text=[r["machine"] for r in have], mode="markers+text", textposition="top center",
                                name="pinned host→device")])
    fig.update_layout(title="The class's machines: fixed cost t0 vs bandwidth B (pinned host→device)",
                      xaxis_title="t0 (µs)", yaxis_title="B (GB/s)")
    cf = CourseFigure(fig, [(Mode.REPLAY, f"{len(have)} recordings made by the course's recorder on each machine")])
    head = "".join(f"<th>{html.escape(c)}</th>" for c in COLUMNS)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(r.get(c, '')))}</td>" for c in COLUMNS) + "</tr>"
                   for r in rows)
    ref_list = "".join(f"<li>{html.escape(x)}</li>" for x in refused) or "<li>none</li>"
    return ("<!doctype html><html lang='en'><head><meta charset='utf-8'><title>Class GPU atlas</title>"
            f"<script>{get_plotlyjs()}</script></head><body><main>"
            f"<h1>Class GPU atlas</h1><p>{len(rows)} machines: the course's reference machines and the "
            "recordings learners submitted. Every number is computed from a checksummed recording.</p>"
            f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
            f"<h2>Refused files</h2><ul>{ref_list}</ul><h2>Figure</h2>{cf._repr_mimebundle_()['text/html']}"
            "</main></body></html>")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build the atlas page from a folder of submitted recordings")
    b.add_argument("submissions", type=Path)
    b.add_argument("--out", type=Path, default=Path("build/atlas/atlas.html"))
    b.add_argument("--csv", type=Path, default=None)
    args = ap.parse_args(argv)
    if not args.submissions.is_dir():
        print(f"atlas: {args.submissions} is not a folder of submissions", file=sys.stderr)
        return 2
    rows, refused = collect(args.submissions)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(page(rows, refused))
    if args.csv:
        args.csv.write_text(to_csv(rows))
    print(f"atlas: {len(rows)} machines ({sum(r['kind'] != 'reference' for r in rows)} from the class), "
          f"{len(refused)} refused -> {args.out}")
    for r in refused:
        print(f"  refused {r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
