"""The learner's prediction record: every kept prediction beside what it was compared with.

notebooks/my_predictions.ipynb shows it. It reads the store that `ctx.predict` and
`ctx.compare` write (helpers.core.predictions) and never writes it: a damaged store is
reported, not moved. What it shows, for each question:

- the first guess kept (the one made before the answer was on the screen);
- what it was compared with: the latest live measurement if the learner measured, else the
  latest replay of a reference recording, else the model's value (a simulated page);
- how far off it was (measured / guessed), its kind of quantity, and, for a large miss, the
  section of the chapter to read again and the exercise of that chapter that works it.

Where each question lives (its chapter, section and the exercise to revisit) is read from
the course's notebooks themselves (`catalog`), so a new Predict cell appears here with no
list to update.
"""

from __future__ import annotations

import html
import json
import math
import re
import statistics
from dataclasses import dataclass
from pathlib import Path

import plotly.graph_objects as go

from helpers.core import config, figures, predictions
from helpers.core.mode import Mode

BAND = 2.0  # the calibration plot's band: within a factor of 2 counts as close
LARGE_MISS = 3.0  # off by more than this factor: the record says what to revisit
WEIGHT_LENGTH = 0.5  # exercise matching: a score is divided by (the exercise's vocabulary) ** this
_PREDICT = re.compile(r"ctx\.predict\(\s*[\"']([a-z0-9_.]+)[\"']([^)]*)\)")
_KEYWORD = re.compile(r"(\w+)\s*=\s*[\"']([^\"']*)[\"']")
# "**Exercise 3.3 — title (derivation).** text", "**Exercise 8.1 (derive).** text", or, under "## Exercises",
# "**1. (code) Title.** text"
_EXERCISE = re.compile(r"^\*\*(?:Exercise\s+([\w.]+)|(\d+)\.)\s*(.*?)\*\*(.*)$", re.M)
_WORD = re.compile(r"[a-z][a-z0-9]{2,}")
_COMMON = frozenset("this that with from what which when where your they their there these those have does each "
                    "into than then them more most much many also only same other about after before while "
                    "copy copies would could should time times here page cell cells code exercise the and for "
                    "you are how its one two not can but all has was per use why does did who any see run "
                    "out new now way get set off own our too few yes".split())


# --------------------------------------------------------------------------- where questions live

@dataclass(frozen=True)
class Place:
    """Where a prediction is asked: the notebook, its title, the section, what the guess is of,
    and the exercise of that chapter that works the same idea."""

    notebook: str
    chapter: str
    section: str
    asks: str  # the Predict cell's own comment: "µs of device time for a 4-byte h2d copy"
    kind: str
    unit: str
    exercise: str  # "Exercise 3.3 — how many small copies per second?" or ""


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower())) - _COMMON


def _asks(src: str, question: str) -> str:
    """The comment on the guess line of a Predict cell ('my_guess = None  # µs for …')."""
    for line in src.splitlines():
        if "= None" in line and "#" in line:
            name = line.split("=", 1)[0].strip()
            if re.search(rf"ctx\.predict\(\s*[\"']{re.escape(question)}[\"']\s*,\s*{re.escape(name)}\b", src):
                asks = line.split("#", 1)[1].strip()
                return re.split(r"[:;,]?\s*replace None", asks)[0].strip()
    return ""


def _exercise_label(m: re.Match) -> str:
    """'Exercise 3.3 — how many small copies per second?' from a bold exercise opening (its kind in
    brackets dropped; an untitled one named by its first words)."""
    number = (m.group(1) or m.group(2)).rstrip(".")
    title = re.sub(r"\((?:code|coding|derive|derivation|reason|concept|conceptual)\)", "", m.group(3))
    title = title.strip(" .—-")
    if not title:
        words = re.sub(r"[`*]", "", m.group(4)).split()
        title = " ".join(words[:8]) + (" …" if len(words) > 8 else "")
    return f"Exercise {number} — {title}"


def _exercise_for(focus: str, section_text: str, exercises: list[tuple[str, str]]) -> str:
    """The chapter's exercise whose text shares most with the prediction: words of its section heading
    and of its guess's comment (`focus`) count three times, the rest of the section once; the score is
    divided by a root of the exercise's own vocabulary so a long exercise does not win by length
    alone, and an exercise that cites the prediction's section by number ("from the table of section
    3") wins (ties: the first)."""
    if not exercises:
        return ""
    key, rest = _words(focus), _words(section_text)
    number = re.match(r"(\d+)\.", focus)
    cites = re.compile(rf"\bsections? {number.group(1)}\b") if number else None

    def score(ex: tuple[str, str]) -> float:
        w = _words(ex[1])
        cited = 10 if cites is not None and cites.search(ex[1]) else 0
        return cited + (3 * len(key & w) + len(rest & w)) / (len(w) or 1) ** WEIGHT_LENGTH

    return max(exercises, key=score)[0]


def _notebook_places(path: Path) -> dict[str, Place]:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    texts = ["".join(c["source"]) for c in cells]
    chapter = next((m.group(1).strip() for t, c in zip(texts, cells, strict=True) if c["cell_type"] == "markdown"
                    for m in [re.search(r"^# (.+)$", t, re.M)] if m), path.stem)
    exercises, in_exercises = [], False
    for t, c in zip(texts, cells, strict=True):
        if c["cell_type"] != "markdown":
            continue
        in_exercises = bool(re.search(r"^## Exercises", t, re.M)) or (in_exercises and not re.search(r"^## ", t, re.M))
        found = [m for m in _EXERCISE.finditer(t) if m.group(1) or in_exercises]
        for k, m in enumerate(found):  # each exercise with its own text, up to the next one
            end = found[k + 1].start() if k + 1 < len(found) else len(t)
            exercises.append((_exercise_label(m), t[m.start():end]))
    out, section, section_text = {}, "", ""
    for t, c in zip(texts, cells, strict=True):
        if c["cell_type"] == "markdown":
            heads = re.findall(r"^##+ (.+)$", t, re.M)
            if heads:
                section, section_text = heads[-1].strip(), t
            else:
                section_text += "\n" + t
            continue
        for m in _PREDICT.finditer(t):
            kw = dict(_KEYWORD.findall(m.group(2)))
            asks = _asks(t, m.group(1))
            out[m.group(1)] = Place(path.name, chapter, section, asks, kw.get("kind", ""), kw.get("unit", ""),
                                    _exercise_for(f"{section} {asks} {m.group(1)}", section_text, exercises))
    return out


def catalog(folder: Path | None = None) -> dict[str, Place]:
    """Every prediction the course's notebooks ask, by question id, in the order of the course."""
    folder = folder or config.REPO_ROOT / "notebooks"
    out: dict[str, Place] = {}
    for nb in sorted(folder.glob("*.ipynb")) if folder.is_dir() else []:
        out.update(_notebook_places(nb))
    return out


# --------------------------------------------------------------------------- one row per question

@dataclass(frozen=True)
class Entry:
    """One question: the first guess, what it was compared with, and where it is asked."""

    question: str
    guess: float | str
    unit: str
    kind: str
    place: Place | None
    measured: float | None = None
    measured_unit: str = ""
    mode: str | None = None  # live, replay, simulated, or None (not stated)
    source: str = ""

    @property
    def ratio(self) -> float | None:
        """measured / guessed, when both are positive numbers."""
        if (isinstance(self.guess, float) and self.guess > 0 and self.measured is not None and self.measured > 0
                and predictions.same_unit(self.unit, self.measured_unit)):
            return self.measured / self.guess
        return None

    @property
    def factor(self) -> float | None:
        """How many times off, in whichever direction (1 = spot on)."""
        r = self.ratio
        return None if r is None else max(r, 1 / r)

    @property
    def verdict(self) -> str:
        r = self.ratio
        if r is None:
            if self.measured is None:
                return "no measured number to set it beside"
            if not predictions.same_unit(self.unit, self.measured_unit):
                return f"guessed in {self.unit}, measured in {self.measured_unit}: no ratio"
            if isinstance(self.guess, float) and (self.guess <= 0 or self.measured <= 0):
                return "a zero or negative value: compare the numbers directly (no ratio)"
            return "not comparable as a ratio"
        if self.factor <= BAND:
            return f"within {BAND:g}x"
        return f"off by {self.factor:.1f}x ({'measured higher' if r > 1 else 'measured lower'})"

    @property
    def chapter_key(self) -> str:
        return self.place.notebook if self.place else self.question.split(".", 1)[0]


def _chosen(comparisons: list[dict]) -> dict | None:
    """The comparison to show: the latest live one, else the latest replay, else the latest of any."""
    for want in ("live", "replay"):
        hits = [c for c in comparisons if c.get("mode") == want]
        if hits:
            return hits[-1]
    return comparisons[-1] if comparisons else None


def _number(v) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) else None


@dataclass(frozen=True)
class Report:
    """The record as the page shows it."""

    entries: list[Entry]
    places: dict[str, Place]
    store: Path
    problem: str | None = None

    @property
    def compared(self) -> list[Entry]:
        return [e for e in self.entries if e.ratio is not None]


def load(store: Path | None = None, notebooks: Path | None = None) -> Report:
    """Read the store (never writing it) and the catalog of questions."""
    store = store or predictions.store()
    rec = predictions.read_record(store)
    places = catalog(notebooks)
    order = {q: i for i, q in enumerate(places)}
    entries = []
    for q in sorted(rec.predictions, key=lambda q: (order.get(q, len(order)), q)):
        p = rec.first(q)
        if p is None:
            continue
        guess = _number(p.guess)
        c = _chosen(rec.comparisons.get(q, []))
        place = places.get(q)
        entries.append(Entry(q, guess if guess is not None else str(p.guess), p.unit,
                             p.kind or (place.kind if place else ""), place,
                             _number(c.get("measured")) if c else None, (c or {}).get("unit", ""),
                             (c or {}).get("mode"), (c or {}).get("source", "")))
    return Report(entries, places, store, rec.problem)


# --------------------------------------------------------------------------- what the page shows

class Note:
    """A paragraph for the page (Markdown in Jupyter and the book, plain text elsewhere)."""

    def __init__(self, text: str):
        self.text = text

    def _repr_markdown_(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return self.text


class Stack:
    """Several displayable parts shown one after another as one cell's result."""

    def __init__(self, *parts):
        self.parts = [p for p in parts if p is not None]

    def _repr_html_(self) -> str:
        out = []
        for p in self.parts:
            if hasattr(p, "_repr_html_"):
                out.append(p._repr_html_())
            else:
                out.append(f"<p>{html.escape(repr(p))}</p>")
        return "\n".join(out)

    def __repr__(self) -> str:
        return "\n\n".join(repr(p) for p in self.parts)


HOW_TO = ("Each chapter asks you to predict before it measures. In a Predict cell, replace `my_guess = None` "
          "with your guess (a number in the unit the comment names, or a short text), run it, then run the "
          "cell after it to see the result. Your guesses are kept in `{store}`; come back to this page to see "
          "them all beside what was measured.")


def summary(report: Report) -> str:
    """What the record holds, in a paragraph (how to make predictions when it holds none)."""
    lines = []
    if report.problem:
        lines.append(f"⚠ {report.problem}")
    if not report.entries:
        lines.append("You have kept no predictions yet. " + HOW_TO.format(store=report.store))
        return "\n\n".join(lines)
    n_q = len(report.places) or len(report.entries)
    numeric = [e for e in report.entries if isinstance(e.guess, float)]
    lines.append(f"You have kept predictions for {len(report.entries)} of the course's {n_q} Predict questions "
                 f"({len(numeric)} numbers, {len(report.entries) - len(numeric)} texts); {len(report.compared)} "
                 f"of the numbers have been set beside a measured or modelled value. "
                 f"{sum(1 for e in report.compared if e.factor <= BAND)} of those are within {BAND:g}x.")
    modes = {e.mode for e in report.compared}
    if "live" not in modes and report.compared:
        lines.append("None was measured live on this machine: the values beside your guesses are the reference "
                     "machines' recordings (REPLAY) or the course's models (SIMULATED); each row says which.")
    lines.append(f"The record is read from `{report.store}` and never changed by this page.")
    return "\n\n".join(lines)


def _kind_style() -> dict[str, tuple[str, str]]:
    return {k: (figures.PALETTE[i % len(figures.PALETTE)], figures.MARKERS[i % len(figures.MARKERS)])
            for i, k in enumerate(list(predictions.KINDS) + [""])}


def _where(e: Entry) -> str:
    if e.mode == "live":
        return f"LIVE · measured on {e.source or 'this machine'}"
    if e.mode == "replay":
        return f"REPLAY · recorded on {e.source}"
    if e.mode == "simulated":
        return f"SIMULATED · {e.source or 'the course model'}"
    return f"mode not stated · {e.source}" if e.source else "mode not stated"


def calibration_figure(report: Report) -> figures.CourseFigure | None:
    """Predicted against measured on log axes, one colour and marker per kind of quantity, the line
    measured = predicted and the band within a factor of 2 drawn; None when nothing can be plotted
    (the page then says why). Points whose values came with no stated mode are left out (a figure
    says where each number comes from)."""
    pts = [e for e in report.compared if e.mode in ("live", "replay", "simulated")]
    if not pts:
        return None
    vals = [v for e in pts for v in (e.guess, e.measured)]
    lo, hi = min(vals) / 4, max(vals) * 4
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=[lo, hi, hi, lo, lo], y=[lo / BAND, hi / BAND, hi * BAND, lo * BAND, lo / BAND],
                             fill="toself", fillcolor="rgba(0,0,0,0.07)", mode="lines", hoverinfo="skip",
                             line={"width": 0, "dash": "solid"}, marker={"symbol": "square"},
                             name=f"within {BAND:g}x (the band)"))
    fig.add_trace(go.Scatter(x=[lo, hi], y=[lo, hi], mode="lines", line={"color": "#000000", "dash": "dot"},
                             marker={"symbol": "circle"}, hoverinfo="skip", name="measured = predicted"))
    style = _kind_style()
    for kind in dict.fromkeys(e.kind for e in pts):
        es = [e for e in pts if e.kind == kind]
        colour, symbol = style.get(kind, style[""])
        fig.add_trace(go.Scatter(
            x=[e.guess for e in es], y=[e.measured for e in es], mode="markers",
            name=predictions.KINDS.get(kind, "kind not declared"),
            marker={"color": colour, "symbol": symbol, "size": 11, "line": {"width": 1, "color": "#000000"}},
            customdata=[[e.question, e.unit or e.measured_unit, _where(e)] for e in es],
            hovertemplate="%{customdata[0]}<br>predicted %{x:.3g} %{customdata[1]}<br>"
                          "measured %{y:.3g}<br>%{customdata[2]}<extra></extra>"))
    fig.update_layout(title="Your predictions against what was measured", height=560,
                      legend={"orientation": "h", "y": -0.18})
    axis = {"type": "log", "range": [math.log10(lo), math.log10(hi)], "exponentformat": "power", "dtick": 1}
    fig.update_xaxes(title="your first guess (each question's own unit)", **axis)
    fig.update_yaxes(title="measured or modelled (same unit)", **axis)
    parts = list(dict.fromkeys((Mode(e.mode), e.source or "this machine") for e in pts))
    return figures.CourseFigure(fig, parts)


def _asks_or_section(place: Place | None) -> str:
    """What the guess is of, from the Predict cell's comment; its section when the comment is only a unit."""
    if place is None:
        return ""
    return place.asks if len(place.asks.split()) >= 3 else f"{place.section} ({place.asks})" if place.asks else \
        place.section


def _fmt(v) -> str:
    return f"{v:.3g}" if isinstance(v, float) else str(v)


CHAPTER_HEADERS = ("question", "what you predicted", "your first guess", "set beside", "where that value is from",
                   "measured / guess", "how far")


def chapter_tables(report: Report) -> list[figures.Table]:
    """One table per chapter, in the course's order, of every question with a kept prediction."""
    groups: dict[str, list[Entry]] = {}
    for e in report.entries:
        groups.setdefault(e.chapter_key, []).append(e)
    tables = []
    for _key, es in groups.items():
        title = es[0].place.chapter if es[0].place else f"{es[0].question.split('.')[0]} (not on a page of this version)"
        rows = [(e.question, _asks_or_section(e.place),
                 f"{_fmt(e.guess)} {e.unit}".strip(),
                 f"{_fmt(e.measured)} {e.measured_unit}".strip() if e.measured is not None else "—",
                 _where(e) if e.measured is not None else "—",
                 f"{e.ratio:.3g}" if e.ratio is not None else "—",
                 e.verdict if isinstance(e.guess, float) else "a text answer: the page shows the result")
                for e in es]
        tables.append(figures.Table(rows, CHAPTER_HEADERS, caption=title))
    return tables


KIND_HEADERS = ("kind of quantity", "compared", f"within {BAND:g}x", "typical miss (geometric mean)",
                "direction (median measured / guess)")


def kind_rows(report: Report) -> list[tuple]:
    """Per kind of quantity: how many guesses were compared, how many landed within the band, the
    typical factor off, and which way (a median ratio above 1: the measurements came out higher)."""
    rows = []
    for kind, label in list(predictions.KINDS.items()) + [("", "kind not declared")]:
        es = [e for e in report.compared if e.kind == kind]
        if not es:
            continue
        typical = math.exp(statistics.fmean(math.log(e.factor) for e in es))
        direction = statistics.median(e.ratio for e in es)
        rows.append((label, len(es), sum(1 for e in es if e.factor <= BAND), f"{typical:.2g}x",
                     f"{direction:.2g} ({'you guessed low' if direction > 1 else 'you guessed high' if direction < 1 else 'even'})"))
    return rows


def misjudged(report: Report) -> str:
    """One sentence naming the kind of quantity guessed worst (by typical factor off)."""
    scored = []
    for kind in list(predictions.KINDS) + [""]:
        es = [e for e in report.compared if e.kind == kind]
        if es:
            scored.append((math.exp(statistics.fmean(math.log(e.factor) for e in es)), kind, len(es)))
    if not scored:
        return "No numeric prediction has been set beside a measurement yet, so there is nothing to rank."
    worst = max(scored)
    label = predictions.KINDS.get(worst[1], "quantities of an undeclared kind")
    if worst[0] <= BAND:
        return f"Every kind of quantity you predicted is, on typical, within {BAND:g}x: well judged."
    return (f"You misjudge {label} most: typically off by {worst[0]:.2g}x over {worst[2]} "
            f"comparison{'s' if worst[2] > 1 else ''}.")


REVISIT_HEADERS = ("question", "off by", "read again", "then work")


def revisit_rows(report: Report, factor: float = LARGE_MISS) -> list[tuple]:
    """For each guess off by more than `factor`: the section that explains it and the exercise to do."""
    out = []
    for e in sorted((e for e in report.compared if e.factor > factor), key=lambda e: -e.factor):
        where = f"{e.place.chapter}, section “{e.place.section}”" if e.place else "its chapter"
        out.append((e.question, f"{e.factor:.1f}x", where,
                    (e.place.exercise if e.place and e.place.exercise else "the chapter's exercises")))
    return out


# --------------------------------------------------------------------------- one call per section of the page

def overview(report: Report) -> Note:
    """The page's opening: what the record holds, or how to make predictions."""
    return Note(summary(report))


def calibration(report: Report) -> figures.CourseFigure | Note:
    """The calibration plot, or why there is none yet."""
    fig = calibration_figure(report)
    if fig is not None:
        return fig
    if report.compared:
        return Note("Your compared predictions came with no stated source mode (live, replay or simulated), "
                    "so they are listed in the tables below but not plotted.")
    return Note("Nothing to plot yet: a point appears here once a numeric prediction has been set beside a "
                "measurement (run the cell after a Predict cell).")


def by_chapter(report: Report) -> Stack | Note:
    """One table per chapter."""
    tables = chapter_tables(report)
    return Stack(*tables) if tables else Note("No predictions kept yet, so no chapter has a table.")


def by_kind(report: Report) -> Stack:
    """Which kinds of quantity are misjudged: a sentence, then the table."""
    rows = kind_rows(report)
    table = figures.Table(rows, KIND_HEADERS, caption="Your compared predictions by kind of quantity") if rows else None
    return Stack(Note(misjudged(report)), table)


def to_revisit(report: Report, factor: float = LARGE_MISS) -> figures.Table | Note:
    """The large misses, each with the section to read again and the exercise to work."""
    rows = revisit_rows(report, factor)
    if rows:
        return figures.Table(rows, REVISIT_HEADERS, caption=f"Predictions off by more than {factor:g}x, worst first")
    if report.compared:
        return Note(f"No prediction is off by more than {factor:g}x: nothing to revisit.")
    return Note("Nothing to revisit yet: no numeric prediction has been set beside a measurement.")
