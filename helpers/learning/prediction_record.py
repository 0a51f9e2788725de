"""The learner's prediction record: every kept prediction beside what it was compared with.

notebooks/my_predictions.ipynb shows it. It reads the store that `ctx.predict` and
`ctx.compare` write (helpers.learning.predictions) and never writes it: a damaged store is
reported, not moved. What it shows, for each question:

- the first guess kept (the one made before the answer was on the screen);
- what it was compared with: the latest live measurement if the learner measured, else the
  latest replay of a reference recording, else the model's value (a simulated page);
- how far off it was (measured / guessed), its kind of quantity, and, for a large miss, the
  section of the chapter to read again and the exercise of that chapter that works it.

Where each question lives (its chapter, section and Predict question) is read from the
course's notebooks themselves (`catalog`), so a new Predict cell appears here with no list to
update; the exercise to revisit is the one notebooks/revisit.json names for it (chosen by
reading the exercises; tests/learning/test_prediction_record.py checks every question has one).
"""

from __future__ import annotations

import html
import json
import math
import re
import statistics
from dataclasses import dataclass, field, replace
from pathlib import Path

import plotly.graph_objects as go

from helpers.core import config
from helpers.core.mode import Mode
from helpers.learning import predictions
from helpers.presentation import figures

BAND = 2.0  # the calibration plot's band: within a factor of 2 counts as close
LARGE_MISS = 3.0  # off by more than this factor: the record says what to revisit
REVISIT_FILE = "revisit.json"  # beside the notebooks: question -> the exercise that works its idea
_PREDICT = re.compile(r"ctx\.predict\(\s*[\"']([a-z0-9_.]+)[\"']([^)]*)\)")
_KEYWORD = re.compile(r"(\w+)\s*=\s*[\"']([^\"']*)[\"']")
# "**Exercise 3.3 — title (derivation).** text", "**Exercise 8.1 (derive).** text", or, under "## Exercises",
# "**1. (code) Title.** text"
_EXERCISE = re.compile(r"^\*\*(?:Exercise\s+([\w.]+)|(\d+)\.)\s*(.*?)\*\*(.*)$", re.M)
# a Predict prompt: "**Predict:** how large is …?" or "**Predict.** …" (up to the end of its paragraph)
_PROMPT = re.compile(r"\*\*Predict[.:]?\*\*[.:]?\s*(.+?)(?:\n\s*\n|\Z)", re.S)


# --------------------------------------------------------------------------- where questions live

@dataclass(frozen=True, kw_only=True)
class Place:
    """Where a prediction is asked: the notebook, its title, the section, what the guess is of,
    and the exercise that works the same idea."""

    notebook: str
    chapter: str
    section: str
    asks: str  # the Predict cell's own comment: "µs of device time for a 4-byte h2d copy"
    kind: str
    unit: str
    exercise: str  # "Exercise 3.3 — how many small copies per second?" or ""
    prompt: str = ""  # the page's Predict question, one sentence: "How large is the biggest BAR …?"


def _asks(src: str, question: str) -> str:
    """The comment on the guess line of a Predict cell ('my_guess = None  # µs for …')."""
    for line in src.splitlines():
        if "= None" in line and "#" in line:
            name = line.split("=", 1)[0].strip()
            if re.search(rf"ctx\.predict\(\s*[\"']{re.escape(question)}[\"']\s*,\s*{re.escape(name)}\b", src):
                asks = line.split("#", 1)[1].strip()
                return re.split(r"[:;,]?\s*replace None", asks)[0].strip()
    return ""


def _prompt(markdown: str) -> str:
    """The question of the last Predict prompt in a markdown cell, as plain text, up to its first '?'."""
    found = _PROMPT.findall(markdown)
    if not found:
        return ""
    text = " ".join(re.sub(r"[*`]|\{\w+\}", "", found[-1]).split())
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # [words](link) -> words
    q = text.find("?")
    text = text[:q + 1] if q >= 0 else text
    return text[:1].upper() + text[1:]


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


def _exercises(cells: list[dict]) -> dict[str, str]:
    """The notebook's exercises: number ('3.3', or '1' under '## Exercises') -> label."""
    out, in_exercises = {}, False
    for c in cells:
        if c["cell_type"] != "markdown":
            continue
        t = "".join(c["source"])
        in_exercises = bool(re.search(r"^## Exercises", t, re.M)) or (in_exercises and not re.search(r"^## ", t, re.M))
        for m in _EXERCISE.finditer(t):
            if m.group(1) or in_exercises:
                out.setdefault((m.group(1) or m.group(2)).rstrip("."), _exercise_label(m))
    return out


def _notebook_places(path: Path) -> tuple[str, dict[str, Place], dict[str, str]]:
    """The notebook's title, its questions (exercise left to `catalog`) and its exercises."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    chapter = next((m.group(1).strip() for c in cells if c["cell_type"] == "markdown"
                    for m in [re.search(r"^# (.+)$", "".join(c["source"]), re.M)] if m), path.stem)
    out, section, prompt = {}, "", ""
    for c in cells:
        t = "".join(c["source"])
        if c["cell_type"] == "markdown":
            heads = re.findall(r"^##+ (.+)$", t, re.M)
            if heads:
                section, prompt = heads[-1].strip(), ""
            prompt = _prompt(t) or prompt
            continue
        for m in _PREDICT.finditer(t):
            kw = dict(_KEYWORD.findall(m.group(2)))
            out[m.group(1)] = Place(notebook=path.name, chapter=chapter, section=section,
                                    asks=_asks(t, m.group(1)), kind=kw.get("kind", ""),
                                    unit=kw.get("unit", ""), exercise="", prompt=prompt)
    return chapter, out, _exercises(cells)


def revisit_map(folder: Path | None = None) -> dict[str, str | None]:
    """The course's choice of exercise for each question (notebooks/revisit.json): "4.1" (an exercise of
    the question's own notebook), "04b_dma_through_an_iommu.ipynb 2" (one of another notebook) or null
    (no exercise works it: the record sends the learner to the section alone). Chosen by reading each
    exercise, not by matching words: an exercise about the same words can be about another idea."""
    path = (folder or config.REPO_ROOT / "notebooks") / REVISIT_FILE
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {q: v for q, v in doc.items() if not q.startswith("_") and (v is None or isinstance(v, str))}


def _resolve(choice: str | None, place: Place, exercises: dict[str, dict[str, str]],
             titles: dict[str, str]) -> str:
    """The label of the chosen exercise ('' when none is chosen or it does not exist)."""
    if not choice:
        return ""
    notebook, _, number = choice.rpartition(" ")
    notebook = notebook or place.notebook
    label = exercises.get(notebook, {}).get(number, "")
    return label if not label or notebook == place.notebook else f"{label} ({titles[notebook]})"


def catalog(folder: Path | None = None) -> dict[str, Place]:
    """Every prediction the course's notebooks ask, by question id, in the order of the course, each
    with the exercise revisit.json chooses for it."""
    folder = folder or config.REPO_ROOT / "notebooks"
    places: dict[str, Place] = {}
    exercises: dict[str, dict[str, str]] = {}
    titles: dict[str, str] = {}
    for nb in sorted(folder.glob("*.ipynb")) if folder.is_dir() else []:
        titles[nb.name], found, exercises[nb.name] = _notebook_places(nb)
        places.update(found)
    chosen = revisit_map(folder)
    return {q: replace(p, exercise=_resolve(chosen.get(q), p, exercises, titles)) for q, p in places.items()}


# --------------------------------------------------------------------------- one row per question

@dataclass(frozen=True, kw_only=True)
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
        """measured / guessed (predictions.ratio: noise around zero is zero, so 0 or inf for a total miss)."""
        return None if self.measured is None else predictions.ratio(self.guess, self.measured, self.unit,
                                                                    self.measured_unit)

    @property
    def factor(self) -> float | None:
        """How many times off, in whichever direction (1 = spot on, inf when one side is zero)."""
        return predictions.factor(self.ratio)

    @property
    def plottable(self) -> bool:
        """Whether the point fits log axes: both values above zero."""
        r = self.ratio
        return r is not None and 0 < r < math.inf

    @property
    def verdict(self) -> str:
        r = self.ratio
        if r is None:
            if self.measured is None:
                return "no measured number to set it beside"
            if not predictions.same_unit(self.unit, self.measured_unit):
                return f"guessed in {self.unit}, measured in {self.measured_unit}: no ratio"
            if isinstance(self.guess, float) and (self.guess < 0 or self.measured < 0):
                return "a negative value: compare the numbers directly (no ratio)"
            return "not comparable as a ratio"
        if r in (0, math.inf):
            return predictions.how_far(r)
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


@dataclass(frozen=True, kw_only=True)
class Report:
    """The record as the page shows it."""

    entries: list[Entry]
    places: dict[str, Place]
    store: Path
    problem: str | None = None
    set_aside: list[Path] = field(default_factory=list)  # damaged records moved aside, still on disk

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
        measured = _number(c.get("measured")) if c else None
        if measured is not None and guess is not None:  # -3e-13 beside a guess of 990 is shown, and taken, as 0
            measured = predictions.zeroed(measured, max(abs(guess), abs(measured))) + 0.0
        entries.append(Entry(question=q, guess=guess if guess is not None else str(p.guess), unit=p.unit,
                             kind=p.kind or (place.kind if place else ""), place=place, measured=measured,
                             measured_unit=(c or {}).get("unit", ""), mode=(c or {}).get("mode"),
                             source=(c or {}).get("source", "")))
    return Report(entries=entries, places=places, store=store, problem=rec.problem, set_aside=rec.set_aside)


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
    if report.set_aside:
        lines.append("⚠ An earlier predictions file could not be read and was moved aside, unchanged, to "
                     + ", ".join(f"`{p}`" for p in report.set_aside) + ". Its guesses are not in the record below; "
                     "open it to recover them (this page names it for as long as it is there).")
    if not report.entries:
        lines.append("You have kept no predictions yet. " + HOW_TO.format(store=report.store))
        return "\n\n".join(lines)
    n_q = len(report.places) or len(report.entries)
    numeric = [e for e in report.entries if isinstance(e.guess, float)]
    lines.append(f"You have kept predictions for {len(report.entries)} of the course's {n_q} Predict questions "
                 f"({len(numeric)} numbers, {len(report.entries) - len(numeric)} texts); {len(report.compared)} "
                 f"of the numbers have been set beside a measured or modelled value. "
                 f"{sum(1 for e in report.compared if e.factor <= BAND)} of those are within {BAND:g}x.")
    zeros = [e for e in report.compared if not e.plottable]
    if zeros:
        lines.append(f"{len(zeros)} of them {'has' if len(zeros) == 1 else 'have'} a zero on one side (a guess of "
                     "zero, or a measured zero where you guessed more): no factor sizes such a miss, so "
                     f"{'it is' if len(zeros) == 1 else 'they are'} in the tables and at the top of what to "
                     "revisit, but not on the log-log plot.")
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
    pts = [e for e in report.compared if e.plottable and e.mode in ("live", "replay", "simulated")]
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
    """What the guess is of: the Predict cell's comment when it says it ('µs of device time for a 4-byte
    h2d copy'), else the page's Predict question (a comment of a unit alone, 'GiB', says nothing), else
    the section."""
    if place is None:
        return ""
    if len(place.asks.split()) >= 3:
        return place.asks
    if place.prompt:
        return place.prompt
    return f"{place.section} ({place.asks})" if place.asks else place.section


def _fmt(v) -> str:
    return f"{v:.3g}" if isinstance(v, float) else str(v)


def _fmt_factor(v: float) -> str:
    """A ratio or factor: '2.5', or '∞' when one side of it is zero."""
    return "∞" if v == math.inf else f"{v:.3g}" if v >= 0.01 or v == 0 else f"{v:.2g}"


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
                 _fmt_factor(e.ratio) if e.ratio is not None else "—",
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
        rows.append((label, len(es), sum(1 for e in es if e.factor <= BAND), _fmt_factor(typical) + "x",
                     f"{_fmt_factor(direction)} ({'you guessed low' if direction > 1 else 'you guessed high' if direction < 1 else 'even'})"))
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
    if worst[0] == math.inf:
        zeros = sum(1 for e in report.compared if e.kind == worst[1] and not e.plottable)
        return (f"You misjudge {label} most: {zeros} of {worst[2]} comparison{'s' if worst[2] > 1 else ''} set a "
                "guess against a zero (or a guess of zero against a value), a miss no factor sizes.")
    return (f"You misjudge {label} most: typically off by {_fmt_factor(worst[0])}x over {worst[2]} "
            f"comparison{'s' if worst[2] > 1 else ''}.")


REVISIT_HEADERS = ("question", "off by", "read again", "then work")


def revisit_rows(report: Report, factor: float = LARGE_MISS) -> list[tuple]:
    """For each guess off by more than `factor`: the section that explains it and the exercise to do."""
    out = []
    for e in sorted((e for e in report.compared if e.factor > factor), key=lambda e: -e.factor):
        where = f"{e.place.chapter}, section “{e.place.section}”" if e.place else "its chapter"
        off = f"{e.factor:.1f}x" if e.plottable else f"measured {_fmt(e.measured)}, you guessed {_fmt(e.guess)}"
        out.append((e.question, off, where,
                    (e.place.exercise if e.place and e.place.exercise else
                     "no exercise works this one: the section is the place" if e.place else "its chapter's exercises")))
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
