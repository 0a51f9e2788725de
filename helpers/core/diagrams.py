"""Pictures of mechanisms, in one visual language across the course.

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

    d = Diagram("A pageable copy", "The library copies ... then the copy engine ...")
    d.box("buf", "your buffer", "memory", 20, 40)
    d.box("ce", "copy engine", "gpu", 300, 40)
    d.arrow("buf", "ce", "DMA read", "data")
    d   # shows in Jupyter and on the site
"""

from __future__ import annotations

import html
from dataclasses import dataclass

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


@dataclass(frozen=True)
class _Box:
    key: str
    label: str
    kind: str
    x: float
    y: float
    w: float
    h: float

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


class Diagram:
    """An SVG diagram of a mechanism with its title, description and legend."""

    def __init__(self, title: str, description: str, *, width: int = 760, height: int = 320):
        if not title.strip() or not description.strip():
            raise InputError("a diagram needs a title and a description (what a reader who cannot see it learns)")
        self.title, self.description, self.width, self.height = title.strip(), description.strip(), width, height
        self._boxes: dict[str, _Box] = {}
        self._items: list[str] = []
        self._kinds: set[str] = set()
        self._arrows: set[str] = set()

    def box(self, key: str, label: str, kind: str, x: float, y: float, w: float = 150, h: float = 54) -> Diagram:
        """A place (`kind` from KINDS) at (x, y), top-left, in SVG units; `label` may hold '\\n'."""
        if kind not in KINDS:
            raise InputError(f"box kind must be one of {', '.join(KINDS)}, got {kind!r}")
        if key in self._boxes:
            raise InputError(f"the diagram already has a box {key!r}")
        b = _Box(key, label, kind, x, y, w, h)
        self._boxes[key] = b
        self._kinds.add(kind)
        fill, stroke, dash = KINDS[kind]
        rx = 14 if kind == "link" else 4
        self._items.append(f"<rect x='{x}' y='{y}' width='{w}' height='{h}' rx='{rx}' fill='{fill}' "
                           f"stroke='{stroke}' stroke-width='2'{f' stroke-dasharray={chr(39)}{dash}{chr(39)}' if dash else ''}/>")
        lines = label.split("\n")
        for i, line in enumerate(lines):
            ty = y + h / 2 + (i - (len(lines) - 1) / 2) * 15 + 5
            self._items.append(f"<text x='{x + w / 2}' y='{ty}' text-anchor='middle' font-size='13' {FONT}>"
                               f"{html.escape(line)}</text>")
        return self

    def arrow(self, src: str, dst: str, label: str = "", kind: str = "data", *, bend: float = 0) -> Diagram:
        """An arrow from box `src` to box `dst` (`kind`: data, control or completion); `bend`
        shifts it sideways (SVG units) so two arrows between the same boxes stay apart."""
        if kind not in ARROWS:
            raise InputError(f"arrow kind must be one of {', '.join(ARROWS)}, got {kind!r}")
        missing = [k for k in (src, dst) if k not in self._boxes]
        if missing:
            raise InputError(f"arrow {src!r} -> {dst!r}: no box {missing[0]!r} (boxes: {', '.join(self._boxes)})")
        a, b = self._boxes[src], self._boxes[dst]
        (x1, y1), (x2, y2) = a.anchor(b), b.anchor(a)
        vertical = abs(y2 - y1) > abs(x2 - x1)
        ox, oy = (bend, 0) if vertical else (0, bend)
        x1, x2, y1, y2 = x1 + ox, x2 + ox, y1 + oy, y2 + oy
        color, width, dash = ARROWS[kind]
        self._arrows.add(kind)
        dash_attr = f" stroke-dasharray='{dash}'" if dash else ""
        self._items.append(f"<line x1='{x1:.1f}' y1='{y1:.1f}' x2='{x2:.1f}' y2='{y2:.1f}' stroke='{color}' "
                           f"stroke-width='{width}'{dash_attr} marker-end='url(#head-{kind})'/>")
        if label:
            mx, my = (x1 + x2) / 2, (y1 + y2) / 2
            dx, dy = (8, 4) if vertical else (0, -7)
            anchor = "start" if vertical else "middle"
            self._items.append(f"<text x='{mx + dx:.1f}' y='{my + dy:.1f}' text-anchor='{anchor}' font-size='12' "
                               f"font-style='italic' {FONT}>{html.escape(label)}</text>")
        return self

    def note(self, x: float, y: float, text: str) -> Diagram:
        """Free text at (x, y) (a number, a register name, a step)."""
        self._items.append(f"<text x='{x}' y='{y}' font-size='12' fill='#333333' {FONT}>{html.escape(text)}</text>")
        return self

    def svg(self) -> str:
        """The diagram as a standalone SVG document with <title>, <desc> and a legend."""
        legend_h = 26
        h = self.height + legend_h
        heads = "".join(f"<marker id='head-{k}' viewBox='0 0 10 10' refX='9' refY='5' markerWidth='7' "
                        f"markerHeight='7' orient='auto-start-reverse'><path d='M0,0 L10,5 L0,10 z' fill='{c}'/></marker>"
                        for k, (c, _, _) in ARROWS.items())
        return (f"<svg xmlns='http://www.w3.org/2000/svg' role='img' aria-labelledby='t d' "
                f"viewBox='0 0 {self.width} {h}' width='{self.width}' height='{h}'>"
                f"<title id='t'>{html.escape(self.title)}</title><desc id='d'>{html.escape(self.description)}</desc>"
                f"<defs>{heads}</defs><rect width='100%' height='100%' fill='white'/>"
                + "".join(self._items) + self._legend(self.height + 6) + "</svg>")

    def _legend(self, y: float) -> str:
        out, x = [], 10
        for kind in [k for k in KINDS if k in self._kinds]:
            fill, stroke, dash = KINDS[kind]
            out.append(f"<rect x='{x}' y='{y}' width='14' height='14' fill='{fill}' stroke='{stroke}'/>"
                       f"<text x='{x + 18}' y='{y + 12}' font-size='11' {FONT}>{kind}</text>")
            x += 30 + 7 * len(kind)
        for kind in [k for k in ARROWS if k in self._arrows]:
            color, width, dash = ARROWS[kind]
            dash_attr = f" stroke-dasharray='{dash}'" if dash else ""
            out.append(f"<line x1='{x}' y1='{y + 7}' x2='{x + 26}' y2='{y + 7}' stroke='{color}' stroke-width='{width}'"
                       f"{dash_attr}/><text x='{x + 30}' y='{y + 12}' font-size='11' {FONT}>{kind}</text>")
            x += 40 + 7 * len(kind)
        return "".join(out)

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        caption = html.escape(self.description)
        page = (f"<figure class='course-diagram'>{self.svg()}<figcaption><strong>{html.escape(self.title)}.</strong> "
                f"{caption}</figcaption></figure>")
        return {"image/svg+xml": self.svg(), "text/html": page, "text/plain": repr(self)}

    def __repr__(self) -> str:
        return f"<Diagram: {self.title}. {self.description}>"
