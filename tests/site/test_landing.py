"""The landing page's course map (book/figures/course-map.svg) and its text alternative (the table in
book/intro.md) say the same thing, take their times from book/teaching.md, draw only dependencies
the chapters themselves state, and cover every chapter and lab."""

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SVG = ROOT / "book" / "figures" / "course-map.svg"
INTRO = ROOT / "book" / "intro.md"
NS = {"svg": "http://www.w3.org/2000/svg"}
PART = re.compile(r"(Chapter|Lab) (\d+)")


def _part(text: str) -> str:
    m = PART.search(text)
    assert m, f"no chapter or lab in {text!r}"
    return f"{m.group(1)} {m.group(2)}"


def _parts(text: str) -> set[str]:
    """'Chapters 3, 4 and 7' -> {'Chapter 3', 'Chapter 4', 'Chapter 7'}; '—' -> set()."""
    m = re.match(r"\s*(Chapter|Lab)s? ([\d ,and]+)", text)
    return {f"{m.group(1)} {n}" for n in re.findall(r"\d+", m.group(2))} if m else set()


def table_rows(markdown: str, header: str) -> list[list[str]]:
    """The rows of the markdown table whose header row starts with `header`."""
    lines = markdown.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith(f"| {header}"))
    rows = []
    for ln in lines[start + 2:]:
        if not ln.startswith("|"):
            break
        rows.append([c.strip() for c in ln.strip().strip("|").split("|")])
    return rows


def teaching_times() -> dict[str, str]:
    rows = table_rows((ROOT / "book" / "teaching.md").read_text(), "part |")
    return {_part(r[0]): r[2] for r in rows}


def svg_map() -> tuple[dict[str, str], set[tuple[str, str]]]:
    """(part -> time) of every box, and the (earlier, later) pairs of every arrow."""
    root = ET.parse(SVG).getroot()
    times = {}
    for g in root.find("svg:g[@id='parts']", NS):
        texts = [t.text for t in g.findall("svg:text", NS)]
        times[_part(texts[0])] = texts[2]
    edges = set()
    for line in root.find("svg:g[@id='edges']", NS):
        later, earlier = line.find("svg:title", NS).text.split(" builds on ")
        edges.add((_part(earlier), _part(later)))
    return times, edges


def intro_map() -> tuple[dict[str, str], set[tuple[str, str]]]:
    times, edges = {}, set()
    for part, _topic, builds_on, time in table_rows(INTRO.read_text(), "part |"):
        p = _part(part)
        times[p] = time
        edges |= {(e, p) for e in _parts(builds_on)}
    return times, edges


def test_parts_parser_on_made_up_text():
    assert _parts("Chapters 3, 4 and 7") == {"Chapter 3", "Chapter 4", "Chapter 7"}
    assert _parts("Chapter 10") == {"Chapter 10"} and _parts("—") == set()
    assert table_rows("x\n| part | t |\n|---|---|\n| Lab 1 | a |\n\nafter", "part |") == [["Lab 1", "a"]]


def test_svg_is_accessible():
    root = ET.parse(SVG).getroot()
    assert root.get("role") == "img"
    ids = root.get("aria-labelledby").split()
    assert [root.find(f"*[@id='{i}']") is not None for i in ids] == [True, True]
    assert len(root.find("svg:desc", NS).text.split()) > 40  # a real description, not a label
    assert "{figure} figures/course-map.svg" in INTRO.read_text() and ":alt:" in INTRO.read_text()
    assert (ROOT / "book" / "intro.md").parent.joinpath("figures", "course-map.svg").is_file()


def course_notebooks() -> dict[str, Path]:
    """'Chapter N' and 'Lab N' -> the notebook (notebooks/NN_*.ipynb, labs/labN_*.ipynb, in any sub-folder)."""
    found = {f"Chapter {int(p.name[:2])}": p for p in ROOT.glob("notebooks/**/[0-9][0-9]_*.ipynb")}
    for p in ROOT.glob("labs/**/lab*.ipynb"):
        number = int(re.match(r"lab(\d+)", p.name).group(1))
        found[f"Lab {number}"] = p
    return found


def test_every_chapter_and_lab_is_on_the_map():
    parts = set(course_notebooks())
    svg_times, _ = svg_map()
    intro_times, _ = intro_map()
    assert set(svg_times) == parts == set(intro_times)


def test_times_come_from_the_teaching_page():
    svg_times, _ = svg_map()
    intro_times, _ = intro_map()
    assert svg_times == teaching_times() == intro_times


def test_figure_and_table_draw_the_same_arrows():
    assert svg_map()[1] == intro_map()[1]


def test_every_arrow_is_a_reference_the_part_itself_makes():
    """Each part builds only on parts its own text refers to (Chapter 0, where everything starts, aside)."""
    sources = course_notebooks()
    for earlier, later in sorted(svg_map()[1]):
        if earlier == "Chapter 0":
            continue
        cells = json.loads(sources[later].read_text())["cells"]
        text = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
        number = earlier.split()[1]
        assert re.search(rf"Chapters? (?:[\d, ]+and )?(?:[\d, ]*){number}\b", text), f"{later} never mentions {earlier}"
