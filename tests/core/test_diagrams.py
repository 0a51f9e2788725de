"""Diagrams: one visual language, a title and description for every one, bad input refused."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from helpers.core.diagrams import KINDS, Diagram
from helpers.core.errors import InputError

NS = "{http://www.w3.org/2000/svg}"


def _d() -> Diagram:
    d = Diagram("A pinned copy", "The copy engine reads the pinned buffer over PCIe and writes VRAM.")
    d.box("buf", "pinned\nbuffer", "memory", 20, 40).box("ce", "copy engine", "gpu", 300, 40)
    return d.arrow("buf", "ce", "DMA read", "data").arrow("ce", "buf", "done", "completion", bend=12)


def test_the_svg_is_valid_and_carries_title_description_and_a_legend_of_what_it_uses():
    root = ET.fromstring(_d().svg())
    assert root.get("role") == "img" and root.find(f"{NS}title").text == "A pinned copy"
    assert "copy engine reads" in root.find(f"{NS}desc").text
    texts = [t.text for t in root.iter(f"{NS}text")]
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
