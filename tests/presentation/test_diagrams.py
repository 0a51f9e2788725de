"""Diagrams: one visual language, a title and description for every one, bad input refused."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from helpers.core.errors import InputError
from helpers.presentation import diagrams
from helpers.presentation.diagrams import KINDS, Diagram

NS = "{http://www.w3.org/2000/svg}"


def _d() -> Diagram:
    d = Diagram("A pinned copy", "The copy engine reads the pinned buffer over PCIe and writes VRAM.")
    d.box("buf", "pinned\nbuffer", "memory", 20, 40).box("ce", "copy engine", "gpu", 300, 40)
    return d.arrow("buf", "ce", "DMA read", "data").arrow("ce", "buf", "done", "completion", bend=12)


def test_the_svg_is_valid_and_carries_title_description_and_a_legend_of_what_it_uses():
    root = ET.fromstring(_d().svg())
    assert root.get("role") == "img" and root.find(f"{NS}title").text == "A pinned copy"
    assert "copy engine reads" in root.find(f"{NS}desc").text
    texts = ["".join(t.itertext()) for t in root.iter(f"{NS}tspan")]
    assert {"pinned", "buffer", "copy engine", "DMA read", "memory", "gpu", "data", "completion"} <= set(texts)
    assert "vram" not in texts and "control" not in texts  # the legend lists only what is drawn


def test_the_same_kind_looks_the_same_everywhere():
    a = Diagram("a", "b").box("x", "one", "gpu", 0, 0).svg()
    b = Diagram("c", "d").box("y", "two", "gpu", 50, 50).svg()
    fill = KINDS["gpu"][0]
    assert f"fill='{fill}'" in a and f"fill='{fill}'" in b


def test_the_page_shows_the_description_as_a_caption():
    bundle = _d()._repr_mimebundle_()
    assert "<figcaption><strong>A pinned copy.</strong>" in bundle["text/html"] and "image/svg+xml" in bundle


@pytest.mark.parametrize("build, match", [
    (lambda: Diagram("", "x"), "title and a description"),
    (lambda: Diagram("t", "d").box("a", "A", "banana", 0, 0), "box kind"),
    (lambda: Diagram("t", "d").box("a", "A", "cpu", 0, 0).box("a", "B", "cpu", 9, 9), "already has"),
    (lambda: Diagram("t", "d").box("a", "A", "cpu", 0, 0).arrow("a", "b"), "no box 'b'"),
    (lambda: Diagram("t", "d").box("a", "A", "cpu", 0, 0).box("b", "B", "cpu", 200, 0).arrow("a", "b", kind="x"),
     "arrow kind")])
def test_bad_diagrams_are_refused(build, match):
    with pytest.raises(InputError, match=match):
        build()


def _overlap(a, b):
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _crowded() -> Diagram:
    """A sketch that clips and overprints as drawn: a label wider than its box, two boxes on top of
    each other once grown, a long arrow label between close boxes, a note over a box and past the edge."""
    d = Diagram("Crowded", "A sketch with every fault the layout must repair.", width=400, height=200)
    d.box("a", "a label much wider than the box it sits in", "cpu", 10, 10, 80, 40)
    d.box("b", "b", "gpu", 95, 10, 80, 40)
    d.box("c", "c", "memory", 10, 120, 80, 40)
    d.arrow("a", "b", "a long label for a short arrow", "data")
    d.arrow("a", "c", "down", "control")
    d.note(300, 30, "a note that starts near the right edge and runs far past it")
    return d


@pytest.mark.parametrize("narrow", [False, True])
def test_the_layout_keeps_text_in_boxes_and_frame_and_apart(narrow):
    lay = _crowded().layout(narrow)
    boxes = list(lay.boxes.values())
    for k, b in lay.boxes.items():
        t = lay.box_text[k].rect
        assert b.x <= t[0] and t[2] <= b.x + b.w and b.y <= t[1] and t[3] <= b.y + b.h, k
    for i, a in enumerate(boxes):
        assert not any(_overlap(a.rect, b.rect) for b in boxes[i + 1:]), a.key
    free = [t.rect for t in lay.labels if t] + [t.rect for t in lay.notes]
    for i, r in enumerate(free):
        assert not any(_overlap(r, b.rect) for b in boxes)
        assert not any(_overlap(r, o) for o in free[i + 1:])
    for r in free + [b.rect for b in boxes]:
        assert lay.frame[0] <= r[0] and r[2] <= lay.frame[2] and lay.frame[1] <= r[1] and r[3] <= lay.frame[3]


def test_a_planted_overlap_is_seen_by_the_layout_test_helpers():
    """The geometry the layout test relies on: a box drawn where the sketch put it overlaps."""
    raw = _crowded()._boxes
    assert _overlap(raw["a"].rect, diagrams._Box(key="x", label="", kind="cpu", x=50, y=20, w=80, h=40).rect)
    assert diagrams.text_width("a label much wider than the box it sits in", diagrams.BOX_FONT) > raw["a"].w


def test_the_svg_scales_to_its_container_and_the_figure_has_a_phone_version():
    svg = ET.fromstring(_d().svg())
    assert "max-width:100%" in svg.get("style") and len(svg.get("viewBox").split()) == 4
    page = _d()._repr_mimebundle_()["text/html"]
    assert page.count("<svg") == 2 and "course-diagram-narrow" in page and "@container" in page
    ids = [e.get("id") for s in (_d().svg(), _d().svg()) for e in ET.fromstring(s).iter() if e.get("id")]
    assert len(ids) == len(set(ids))  # two diagrams on one page never share an id


def test_text_width_is_generous_for_the_fonts_a_browser_may_use():
    # "copy engine" at 13 px is 79.5 px in DejaVu Sans (the sum of its advances, measured in
    # Chromium); a little more is allowed for, never less
    assert 79.5 <= diagrams.text_width("copy engine", 13) <= 84


def test_a_message_via_a_hub_is_two_legs_of_one_kind_and_bend():
    via = (Diagram("v", "w").box("a", "A", "cpu", 0, 0).box("l", "link", "link", 200, 0).box("b", "B", "device", 400, 0)
           .via("a", "l", "b", "MRd: request", "MRd", "control", bend=-30))
    by_hand = (Diagram("v", "w").box("a", "A", "cpu", 0, 0).box("l", "link", "link", 200, 0)
               .box("b", "B", "device", 400, 0).arrow("a", "l", "MRd: request", "control", bend=-30)
               .arrow("l", "b", "MRd", "control", bend=-30))
    same = lambda d, narrow: re.sub(r"dg[0-9a-f]+-\d+", "ID", d.svg(narrow=narrow))  # noqa: E731 - ids are per diagram
    assert all(same(via, n) == same(by_hand, n) for n in (False, True))
    with pytest.raises(InputError, match="no box 'hub'"):
        Diagram("v", "w").box("a", "A", "cpu", 0, 0).box("b", "B", "device", 400, 0).via("a", "hub", "b", "x")
