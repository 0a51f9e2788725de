"""Pictures of mechanisms, in one visual language across the course, laid out by one piece of code.

A diagram shows what moves where: boxes for the places data lives or work happens, arrows for
what crosses between them. The same kind of thing looks the same in every chapter:

| kind       | what it stands for                                   | drawn as                      |
|------------|------------------------------------------------------|-------------------------------|
| `cpu`      | CPU cores, a user process, a library                 | blue fill                     |
| `kernel`   | the OS kernel and its drivers                        | orange fill                   |
| `memory`   | host RAM, a buffer in it                             | green fill                    |
| `gpu`      | GPU units: copy engine, SMs, MMU, host interface     | vermillion fill               |
| `vram`     | GPU memory                                           | pink fill                     |
| `link`     | PCIe, NVLink, a switch, the IOMMU                    | grey fill, rounded            |
| `device`   | another device: NIC, capture card, a second GPU      | yellow fill                   |
| `model`    | a part of the course's simulated device              | white, dashed border          |

Arrows: `data` (solid, thick: bytes moving), `control` (dashed: a command, a doorbell, an
ioctl, a request), `completion` (dotted: an interrupt, a fence, a read completion).
Colours are Okabe and Ito's colour-blind safe set, and every kind also differs in its label
text; arrows differ by dash, not colour. Every diagram has a title and a description (its SVG
<title> and <desc>, and a caption under it), so a screen reader gets what the eye gets.

A diagram is data: boxes (a place, its kind and where the author roughly wants it), arrows
(from, to, label, kind) and free notes. The author's coordinates are a sketch; `layout()` turns
the sketch into a picture that reads:

* text is measured with the advance widths of DejaVu Sans, the widest of the fonts the SVG
  names (so Arial or Helvetica, where they are used instead, only come out narrower);
* a box grows (about its centre) until its label fits, wrapping a label that would make it
  much wider than sketched; boxes that then overlap are pushed apart;
* an arrow's label is tried at several places along and beside its arrow and goes to the
  first one that touches no box, no other label and no note (crossing other arrows costs);
* the frame (the SVG's viewBox) is grown to hold everything, the legend flows in rows under it,
  and the SVG scales to its container (width 100% of it at most, never more than its own size).

    d = Diagram("A pageable copy", "The library copies ... then the copy engine ...")
    d.box("buf", "your buffer", "memory", 20, 40)
    d.box("ce", "copy engine", "gpu", 300, 40)
    d.arrow("buf", "ce", "DMA read", "data")
    d   # shows in Jupyter and on the site

The SVG marks its parts for the site's browser check (tools/site/sitecheck.py): each box is a
`<g class='node'>` holding its rectangle and its label; labels, notes and the legend are their
own groups; the check measures every text in Chromium against the frame, every other text and
every box it does not belong to.
"""

from __future__ import annotations

import hashlib
import html
import itertools
from dataclasses import KW_ONLY, dataclass, field, replace

from helpers.core.errors import InputError

KINDS = {  # kind -> (fill, border, dash)
    "cpu": ("#cfe3f3", "#0072B2", ""),
    "kernel": ("#fbe5c0", "#E69F00", ""),
    "memory": ("#c6e9dd", "#009E73", ""),
    "gpu": ("#f6d0bd", "#D55E00", ""),
    "vram": ("#f1d6e6", "#CC79A7", ""),
    "link": ("#e4e4e4", "#555555", ""),
    "device": ("#fbf6c8", "#8a7d00", ""),
    "model": ("#ffffff", "#333333", "5,3"),
}
ARROWS = {"data": ("#000000", 3.0, ""), "control": ("#333333", 1.6, "7,4"), "completion": ("#333333", 1.6, "2,3")}
FONT = "font-family='DejaVu Sans, Arial, sans-serif'"

# Font sizes (SVG units) and spacing.
BOX_FONT, LABEL_FONT, NOTE_FONT, LEGEND_FONT = 13, 12, 12, 11
LINE = 1.3           # line height, in ems
PAD_X, PAD_Y = 8, 6  # room between a box's border and its label
GAP = 12             # the least room between two boxes
MARGIN = 8           # room between the drawing and its frame
MAX_GROW = 1.4       # a box grows to at most this times its sketched width before its label wraps
NARROW_BOX = 124     # the widest box of the narrow (phone) version
NARROW_SPREAD = (1.15, 0.85)  # sketch y -> narrow x, sketch x -> narrow y

# Advance widths (1/1000 em) of DejaVu Sans, measured in Chromium (canvas measureText); a
# character not listed counts a full em. DejaVu Sans is wider than Arial, Helvetica and
# Liberation Sans, the fonts a reader's browser may use instead, so text only comes out narrower.
_CHARS = (" !\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyz{|}~"
          "→←↔·…−≤≥µ×é–—’‘“”°±≈✓✗")
_WIDTHS = (318, 401, 460, 838, 636, 950, 780, 275, 390, 390, 500, 838, 318, 361, 318, 337, 636, 636, 636, 636,
           636, 636, 636, 636, 636, 636, 337, 337, 838, 838, 838, 531, 1000, 684, 686, 698, 770, 632, 575, 775,
           752, 295, 295, 656, 557, 863, 748, 787, 603, 787, 695, 635, 611, 732, 684, 989, 685, 611, 685, 390,
           337, 390, 838, 500, 500, 613, 635, 550, 635, 615, 352, 635, 634, 278, 278, 579, 278, 974, 634, 612,
           635, 635, 411, 521, 392, 634, 592, 818, 592, 592, 525, 636, 337, 636, 838, 838, 838, 838, 318, 1000,
           838, 838, 838, 636, 838, 615, 500, 1000, 318, 318, 518, 518, 500, 838, 838, 838, 838)
_ADVANCE = dict(zip(_CHARS, _WIDTHS, strict=True))
ASCENT, DESCENT = 0.93, 0.24  # DejaVu Sans, in ems: a text's box runs from baseline - ascent to + descent
_SAFETY = 1.04                # rounding and hinting

_ids = itertools.count(1)
NARROW_BELOW = 560  # CSS px: a figure narrower than this shows the narrow version
# In the figure itself, so JupyterLab (which has no course stylesheet) switches versions too.
STYLE = ("<style>figure.course-diagram{container-type:inline-size;margin:0 0 1em}"
         "figure.course-diagram svg{display:block;max-width:100%;height:auto}"
         "figure.course-diagram .course-diagram-narrow{display:none}"
         f"@container (max-width: {NARROW_BELOW}px){{figure.course-diagram .course-diagram-wide{{display:none}}"
         "figure.course-diagram .course-diagram-narrow{display:block}}</style>")


def text_width(text: str, size: float) -> float:
    """The width (SVG units) of one line of `text` at font size `size`, a little generous."""
    return sum(_ADVANCE.get(c, 1000) for c in text) / 1000 * size * _SAFETY


def text_height(lines: int, size: float) -> float:
    """The height of `lines` lines of text at `size`, from the first ascent to the last descent."""
    return (lines - 1) * LINE * size + (ASCENT + DESCENT) * size


def wrap(text: str, size: float, width: float) -> list[str]:
    """`text` cut at spaces into lines no wider than `width` (a longer word stays whole)."""
    out: list[str] = []
    for word in text.split(" "):
        if out and text_width(out[-1] + " " + word, size) <= width:
            out[-1] += " " + word
        else:
            out.append(word)
    return out or [""]


Rect = tuple[float, float, float, float]  # x0, y0, x1, y1


def _inflate(r: Rect, d: float) -> Rect:
    return r[0] - d, r[1] - d, r[2] + d, r[3] + d


def _overlap(a: Rect, b: Rect) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _crosses(seg: tuple[float, float, float, float], r: Rect) -> bool:
    """Whether the segment (x1, y1, x2, y2) passes through the rectangle (Liang-Barsky clipping)."""
    x1, y1, x2, y2 = seg
    dx, dy = x2 - x1, y2 - y1
    t0, t1 = 0.0, 1.0
    for p, q in ((-dx, x1 - r[0]), (dx, r[2] - x1), (-dy, y1 - r[1]), (dy, r[3] - y1)):
        if p == 0:
            if q < 0:
                return False
        else:
            t = q / p
            if p < 0:
                t0 = max(t0, t)
            else:
                t1 = min(t1, t)
            if t0 > t1:
                return False
    return True


@dataclass(frozen=True, kw_only=True)
class _Box:
    key: str
    label: str
    kind: str
    x: float
    y: float
    w: float
    h: float

    @property
    def rect(self) -> Rect:
        return self.x, self.y, self.x + self.w, self.y + self.h

    def anchor(self, toward: _Box) -> tuple[float, float]:
        """The point on this box's edge facing `toward`'s centre."""
        cx, cy, tx, ty = self.x + self.w / 2, self.y + self.h / 2, toward.x + toward.w / 2, toward.y + toward.h / 2
        dx, dy = tx - cx, ty - cy
        if dx == dy == 0:
            return cx, cy
        sx = (self.w / 2) / abs(dx) if dx else float("inf")
        sy = (self.h / 2) / abs(dy) if dy else float("inf")
        s = min(sx, sy)
        return cx + dx * s, cy + dy * s


@dataclass(frozen=True)
class _Arrow:
    src: str
    dst: str
    label: str
    kind: str
    _: KW_ONLY
    bend: float


@dataclass(frozen=True)
class _Note:
    x: float
    y: float
    text: str


@dataclass
class _Text:
    """A block of text placed by the layout: its lines, size, anchor point and bounding box."""

    lines: list[str]
    size: float
    x: float          # the anchor: centre for 'middle', left edge for 'start'
    top: float        # the top of the first line's ascent
    _: KW_ONLY
    anchor: str = "middle"
    rect: Rect = field(init=False)

    def __post_init__(self) -> None:
        w = max(text_width(s, self.size) for s in self.lines)
        x0 = self.x - w / 2 if self.anchor == "middle" else self.x
        self.rect = (x0, self.top, x0 + w, self.top + text_height(len(self.lines), self.size))

    def svg(self, attrs: str) -> str:
        spans = "".join(f"<tspan x='{self.x:.1f}' y='{self.top + ASCENT * self.size + i * LINE * self.size:.1f}'>"
                        f"{html.escape(s)}</tspan>" for i, s in enumerate(self.lines))
        return f"<text text-anchor='{self.anchor}' font-size='{self.size}' {FONT}{attrs}>{spans}</text>"


@dataclass(kw_only=True)
class Layout:
    """Where everything goes: boxes grown and separated, arrows, labels and notes placed, the frame."""

    boxes: dict[str, _Box]
    box_text: dict[str, _Text]
    lines: list[tuple[_Arrow, tuple[float, float, float, float]]]
    labels: list[_Text | None]
    notes: list[_Text]
    frame: Rect


def _turned(b: _Box) -> _Box:
    """The box of the sketch turned on its side (centre (x, y) to (y, x), spread for the narrower
    boxes), at most NARROW_BOX wide."""
    cx, cy = b.x + b.w / 2, b.y + b.h / 2
    w = min(b.w, NARROW_BOX)
    nx, ny = cy * NARROW_SPREAD[0], cx * NARROW_SPREAD[1]
    return replace(b, x=nx - w / 2, y=ny - b.h / 2, w=w)


def _fit_box(b: _Box, grow: float = MAX_GROW) -> tuple[_Box, list[str]]:
    """The box grown about its centre so its label fits, and the label's lines (wrapped if the
    box would otherwise grow past `grow` times its sketched width)."""
    lines = b.label.split("\n")
    inner = b.w - 2 * PAD_X
    widest = max(text_width(s, BOX_FONT) for s in lines)
    w = b.w
    if widest > inner * grow:
        lines = [piece for s in lines for piece in wrap(s, BOX_FONT, inner * grow)]
        widest = max(text_width(s, BOX_FONT) for s in lines)
    w = max(w, widest + 2 * PAD_X)
    h = max(b.h, text_height(len(lines), BOX_FONT) + 2 * PAD_Y)
    return replace(b, x=b.x - (w - b.w) / 2, y=b.y - (h - b.h) / 2, w=w, h=h), lines


def _separate(boxes: dict[str, _Box]) -> dict[str, _Box]:
    """Push apart boxes that overlap (or come closer than GAP): the later one moves, along the
    axis that needs the smaller move, away from the earlier one."""
    order = list(boxes)
    for _ in range(200):
        moved = False
        for i, ka in enumerate(order):
            for kb in order[i + 1:]:
                a, b = boxes[ka], boxes[kb]
                if not _overlap(_inflate(a.rect, GAP), b.rect):
                    continue
                ax, ay, bx, by = a.x + a.w / 2, a.y + a.h / 2, b.x + b.w / 2, b.y + b.h / 2
                px = (a.x + a.w + GAP - b.x) if bx >= ax else (b.x + b.w + GAP - a.x)
                py = (a.y + a.h + GAP - b.y) if by >= ay else (b.y + b.h + GAP - a.y)
                if px <= py:
                    b = replace(b, x=b.x + (px if bx >= ax else -px))
                else:
                    b = replace(b, y=b.y + (py if by >= ay else -py))
                boxes[kb] = b
                moved = True
        if not moved:
            break
    return boxes


def _segment(a: _Box, b: _Box, bend: float) -> tuple[float, float, float, float]:
    """The arrow from box a to box b, shifted sideways by `bend` but never so far that it leaves
    either box's facing side (a line that floats free of its boxes reads as nobody's arrow)."""
    (x1, y1), (x2, y2) = a.anchor(b), b.anchor(a)
    vertical = abs(y2 - y1) > abs(x2 - x1)
    room = (min(a.w, b.w) if vertical else min(a.h, b.h)) / 2 - 6
    bend = max(-room, min(room, bend))
    ox, oy = (bend, 0) if vertical else (0, bend)
    return x1 + ox, y1 + oy, x2 + ox, y2 + oy


class _Space:
    """What is already on the picture: hard obstacles (boxes, texts) and soft ones (arrows)."""

    def __init__(self, boxes: list[Rect], segments: list[tuple[float, float, float, float]]):
        self.hard: list[Rect] = [_inflate(r, 3) for r in boxes]
        self.segments = segments

    def free(self, r: Rect, own: tuple[float, float, float, float] | None = None) -> bool:
        if any(_overlap(r, h) for h in self.hard):
            return False
        return own is None or not _crosses(own, _inflate(r, 2))

    def crossings(self, r: Rect, own: tuple[float, float, float, float] | None = None) -> int:
        return sum(_crosses(s, r) for s in self.segments if s is not own)

    def take(self, r: Rect) -> None:
        self.hard.append(_inflate(r, 2))


def _label_candidates(seg: tuple[float, float, float, float], lines: list[str], size: float):
    """Places for an arrow's label: along the arrow (middle first), on either side, a few distances off."""
    x1, y1, x2, y2 = seg
    w = max(text_width(s, size) for s in lines)
    h = text_height(len(lines), size)
    horizontal = abs(x2 - x1) >= abs(y2 - y1)
    for t in (0.5, 0.42, 0.58, 0.34, 0.66, 0.26, 0.74, 0.18, 0.82):
        px, py = x1 + (x2 - x1) * t, y1 + (y2 - y1) * t
        for gap in (4, 10, 18, 28):
            for side in (-1, 1) if horizontal else (1, -1):
                if horizontal:
                    top = py - gap - h if side < 0 else py + gap
                    text = _Text(lines, size, px, top, anchor="middle")
                else:
                    x0 = px + gap if side > 0 else px - gap - w
                    text = _Text(lines, size, x0, py - h / 2, anchor="start")
                cost = abs(t - 0.5) * 60 + gap * 0.8 + (0 if side == (-1 if horizontal else 1) else 4)
                yield cost, text


def _nearest_free(space: _Space, seg, lines: list[str]) -> tuple[float, _Text] | None:
    """The free place for a label nearest the arrow's middle, searched outwards in 6-unit steps."""
    mx, my = (seg[0] + seg[2]) / 2, (seg[1] + seg[3]) / 2
    h = text_height(len(lines), LABEL_FONT)
    steps = sorted(((dx, dy) for dx in range(-150, 151, 6) for dy in range(-90, 91, 6)), key=lambda d: abs(d[0]) + abs(d[1]))
    for dx, dy in steps:
        text = _Text(lines, LABEL_FONT, mx + dx, my + dy - h / 2, anchor="middle")
        if space.free(text.rect, seg):
            return abs(dx) + abs(dy) + 100, text
    return None


def _place_label(space: _Space, seg, label: str) -> _Text:
    """The cheapest free place for an arrow's label; wrapped onto two lines if one line finds none."""
    tries = [[label]]
    if " " in label:
        words = label.split(" ")
        half = min(range(1, len(words)), key=lambda i: abs(len(" ".join(words[:i])) - len(label) / 2))
        tries.append([" ".join(words[:half]), " ".join(words[half:])])
    best: tuple[float, _Text] | None = None
    for extra, lines in zip((0, 50), tries, strict=False):  # one line preferred, two lines allowed
        for cost, text in _label_candidates(seg, lines, LABEL_FONT):
            if space.free(text.rect, seg):
                cost += extra + 40 * space.crossings(text.rect, seg)
                if best is None or cost < best[0]:
                    best = (cost, text)
    if best is None:  # nothing free beside the arrow: the nearest free place around its middle
        best = _nearest_free(space, seg, tries[-1])
    if best is None:  # nowhere free: the least bad place (the site's browser check will name it)
        best = min(((c + 1000, t) for c, t in _label_candidates(seg, [label], LABEL_FONT)), key=lambda ct: ct[0])
    space.take(best[1].rect)
    return best[1]


def _place_note(space: _Space, note: _Note, right: float) -> _Text:
    """A note at its sketched place, wrapped to end before `right`, moved the least to be free."""
    size = NOTE_FONT
    avail = right - note.x
    lines = [p for s in note.text.split("\n")
             for p in (wrap(s, size, avail) if avail >= 160 and text_width(s, size) > avail else [s])]
    top0 = note.y - ASCENT * size
    best: tuple[float, _Text] | None = None
    for dy in sorted(range(-80, 81, 4), key=abs):
        for dx in (0, -20, 20, -40, 40, -80, 80):
            text = _Text(lines, size, note.x + dx, top0 + dy, anchor="start")
            if space.free(text.rect):
                cost = abs(dy) + abs(dx) + 20 * space.crossings(text.rect)
                if best is None or cost < best[0]:
                    best = (cost, text)
    text = best[1] if best else _Text(lines, size, note.x, top0, anchor="start")
    space.take(text.rect)
    return text


class Diagram:
    """An SVG diagram of a mechanism with its title, description and legend.

    `width` and `height` size the author's sketch; the picture's frame is whatever holds the laid
    out drawing (see the module docstring)."""

    def __init__(self, title: str, description: str, *, width: int = 760, height: int = 320):
        if not title.strip() or not description.strip():
            raise InputError("a diagram needs a title and a description (what a reader who cannot see it learns)")
        self.title, self.description, self.width, self.height = title.strip(), description.strip(), width, height
        self._boxes: dict[str, _Box] = {}
        self._arrow_list: list[_Arrow] = []
        self._notes: list[_Note] = []

    @property
    def _kinds(self) -> set[str]:
        return {b.kind for b in self._boxes.values()}

    @property
    def _arrows(self) -> set[str]:
        return {a.kind for a in self._arrow_list}

    def box(self, key: str, label: str, kind: str, x: float, y: float, w: float = 150, h: float = 54) -> Diagram:
        """A place (`kind` from KINDS) sketched at (x, y), top-left, in SVG units; `label` may hold '\\n'."""
        if kind not in KINDS:
            raise InputError(f"box kind must be one of {', '.join(KINDS)}, got {kind!r}")
        if key in self._boxes:
            raise InputError(f"the diagram already has a box {key!r}")
        if w <= 0 or h <= 0:
            raise InputError(f"box {key!r} needs a positive width and height, got {w} x {h}")
        self._boxes[key] = _Box(key=key, label=label, kind=kind, x=x, y=y, w=w, h=h)
        return self

    def arrow(self, src: str, dst: str, label: str = "", kind: str = "data", *, bend: float = 0) -> Diagram:
        """An arrow from box `src` to box `dst` (`kind`: data, control or completion); `bend`
        shifts it sideways (SVG units) so two arrows between the same boxes stay apart."""
        if kind not in ARROWS:
            raise InputError(f"arrow kind must be one of {', '.join(ARROWS)}, got {kind!r}")
        missing = [k for k in (src, dst) if k not in self._boxes]
        if missing:
            raise InputError(f"arrow {src!r} -> {dst!r}: no box {missing[0]!r} (boxes: {', '.join(self._boxes)})")
        self._arrow_list.append(_Arrow(src, dst, label, kind, bend=bend))
        return self

    def via(self, src: str, hub: str, dst: str, label: str, hub_label: str = "", kind: str = "data", *,
            bend: float = 0) -> Diagram:
        """One message from `src` to `dst` that passes through box `hub` (a packet crossing the link):
        two arrows of one kind and bend, `label` on the first leg, `hub_label` on the second."""
        return self.arrow(src, hub, label, kind, bend=bend).arrow(hub, dst, hub_label, kind, bend=bend)

    def note(self, x: float, y: float, text: str) -> Diagram:
        """Free text sketched with its first baseline at (x, y) (a number, a register name, a step)."""
        self._notes.append(_Note(x, y, text))
        return self

    # --- layout ---------------------------------------------------------------------------------
    def layout(self, narrow: bool = False) -> Layout:
        """Grow boxes to their labels, push overlapping ones apart, then place notes and labels.

        `narrow`: the version for a phone-width column: the sketch turned on its side (rows become
        columns, so a wide diagram becomes a tall one), boxes at most NARROW_BOX wide with their
        labels wrapped, and the notes in a column under the drawing."""
        sketch = self._boxes if not narrow else {k: _turned(b) for k, b in self._boxes.items()}
        fitted = {k: _fit_box(b, grow=1.0 if narrow else MAX_GROW) for k, b in sketch.items()}
        boxes = _separate({k: b for k, (b, _) in fitted.items()})
        box_text = {k: _Text(lines, BOX_FONT, b.x + b.w / 2, b.y + (b.h - text_height(len(lines), BOX_FONT)) / 2)
                    for k, b in boxes.items() for lines in [fitted[k][1]]}
        lines = [(a, _segment(boxes[a.src], boxes[a.dst], a.bend)) for a in self._arrow_list]
        space = _Space([b.rect for b in boxes.values()], [s for _, s in lines])
        if narrow:
            left = min(b.rect[0] for b in boxes.values())
            right = max(b.rect[2] for b in boxes.values())
            y = max(b.rect[3] for b in boxes.values()) + 20 + ASCENT * NOTE_FONT
            notes = []
            for n in self._notes:
                lines_n = [p for s in n.text.split("\n") for p in wrap(s, NOTE_FONT, right - left)]
                notes.append(_Text(lines_n, NOTE_FONT, left, y - ASCENT * NOTE_FONT, anchor="start"))
                space.take(notes[-1].rect)
                y += text_height(len(lines_n), NOTE_FONT) + 6
        else:
            right = max([self.width - MARGIN] + [b.rect[2] for b in boxes.values()])
            notes = [_place_note(space, n, right) for n in self._notes]
        labels = [_place_label(space, seg, a.label) if a.label else None for a, seg in lines]
        rects = ([b.rect for b in boxes.values()] + [t.rect for t in notes] + [t.rect for t in labels if t]
                 + [(min(s[0], s[2]) - 6, min(s[1], s[3]) - 6, max(s[0], s[2]) + 6, max(s[1], s[3]) + 6)
                    for _, s in lines])
        frame = (min(r[0] for r in rects) - MARGIN, min(r[1] for r in rects) - MARGIN,
                 max(r[2] for r in rects) + MARGIN, max(r[3] for r in rects) + MARGIN)
        return Layout(boxes=boxes, box_text=box_text, lines=lines, labels=labels, notes=notes, frame=frame)

    def _legend(self, frame: Rect) -> tuple[str, float]:
        """The legend's SVG, flowed in rows under the drawing, and the frame's new bottom."""
        items = [("box", k) for k in KINDS if k in self._kinds] + [("arrow", k) for k in ARROWS if k in self._arrows]
        x0, x1 = frame[0] + MARGIN, frame[2] - MARGIN
        x, y, out = x0, frame[3] + 2, []
        for what, kind in items:
            w = (18 if what == "box" else 30) + text_width(kind, LEGEND_FONT) + 14
            if x > x0 and x + w > x1:
                x, y = x0, y + 20
            if what == "box":
                fill, stroke, _ = KINDS[kind]
                mark = f"<rect x='{x:.1f}' y='{y:.1f}' width='14' height='14' fill='{fill}' stroke='{stroke}'/>"
                tx = x + 18
            else:
                color, width, dash = ARROWS[kind]
                dash_attr = f" stroke-dasharray='{dash}'" if dash else ""
                mark = (f"<line x1='{x:.1f}' y1='{y + 7:.1f}' x2='{x + 26:.1f}' y2='{y + 7:.1f}' stroke='{color}' "
                        f"stroke-width='{width}'{dash_attr}/>")
                tx = x + 30
            label = _Text([kind], LEGEND_FONT, tx, y + 7 - text_height(1, LEGEND_FONT) / 2, anchor="start")
            out.append(f"<g class='legend-item'>{mark}{label.svg('')}</g>")
            x += w
        return "<g class='legend'>" + "".join(out) + "</g>", (y + 20 if items else frame[3])

    def svg(self, narrow: bool = False) -> str:
        """The diagram as a standalone SVG document with <title>, <desc> and a legend; it scales
        down to its container (max-width 100%) and never up past its own size. `narrow`: the
        version laid out for a phone-width column (see `layout`)."""
        lay = self.layout(narrow)
        legend, bottom = self._legend(lay.frame)
        fx, fy, fr = lay.frame[0], lay.frame[1], lay.frame[2]
        fw, fh = fr - fx, bottom + MARGIN - fy
        uid = f"dg{hashlib.sha1(self.title.encode()).hexdigest()[:6]}-{next(_ids)}"
        heads = "".join(f"<marker id='{uid}-head-{k}' viewBox='0 0 10 10' refX='9' refY='5' markerWidth='7' "
                        f"markerHeight='7' orient='auto-start-reverse'><path d='M0,0 L10,5 L0,10 z' fill='{c}'/></marker>"
                        for k, (c, _, _) in ARROWS.items())
        items = [f"<rect class='frame' x='{fx:.1f}' y='{fy:.1f}' width='{fw:.1f}' height='{fh:.1f}' fill='white'/>"]
        for a, (x1, y1, x2, y2) in lay.lines:
            color, width, dash = ARROWS[a.kind]
            dash_attr = f" stroke-dasharray='{dash}'" if dash else ""
            items.append(f"<line class='arrow' x1='{x1:.1f}' y1='{y1:.1f}' x2='{x2:.1f}' y2='{y2:.1f}' "
                         f"stroke='{color}' stroke-width='{width}'{dash_attr} marker-end='url(#{uid}-head-{a.kind})'/>")
        for k, b in lay.boxes.items():
            fill, stroke, dash = KINDS[b.kind]
            rx = 14 if b.kind == "link" else 4
            dash_attr = f" stroke-dasharray='{dash}'" if dash else ""
            items.append(f"<g class='node' data-key='{html.escape(k)}'><rect x='{b.x:.1f}' y='{b.y:.1f}' "
                         f"width='{b.w:.1f}' height='{b.h:.1f}' rx='{rx}' fill='{fill}' stroke='{stroke}' "
                         f"stroke-width='2'{dash_attr}/>{lay.box_text[k].svg('')}</g>")
        halo = " stroke='white' stroke-width='3' paint-order='stroke'"
        for t in lay.labels:
            if t is not None:
                items.append(f"<g class='arrow-label'>{t.svg(halo + ' font-style=' + chr(39) + 'italic' + chr(39))}</g>")
        for t in lay.notes:
            items.append(f"<g class='note'>{t.svg(halo + ' fill=' + chr(39) + '#333333' + chr(39))}</g>")
        return (f"<svg xmlns='http://www.w3.org/2000/svg' role='img' aria-labelledby='{uid}-t {uid}-d' "
                f"class='course-diagram-svg {'course-diagram-narrow' if narrow else 'course-diagram-wide'}' viewBox='{fx:.1f} {fy:.1f} {fw:.1f} {fh:.1f}' "
                f"width='{fw:.0f}' height='{fh:.0f}' style='max-width:100%;height:auto'>"
                f"<title id='{uid}-t'>{html.escape(self.title)}</title>"
                f"<desc id='{uid}-d'>{html.escape(self.description)}</desc>"
                f"<defs>{heads}</defs>" + "".join(items) + legend + "</svg>")

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        """SVG (the wide version) for viewers without HTML; for Jupyter and the site, a figure
        holding both versions, of which a container query shows the one that suits the column:
        the narrow one below NARROW_BELOW px (a phone), else the wide one."""
        svg = self.svg()
        caption = html.escape(self.description)
        page = (f"<figure class='course-diagram'>{STYLE}{svg}{self.svg(narrow=True)}<figcaption>"
                f"<strong>{html.escape(self.title)}.</strong> {caption}</figcaption></figure>")
        return {"image/svg+xml": svg, "text/html": page, "text/plain": repr(self)}

    def __repr__(self) -> str:
        return f"<Diagram: {self.title}. {self.description}>"
