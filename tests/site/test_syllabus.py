"""The syllabus plans add up, respect the dependency map, and agree with the course's time table;
every chapter has instructor notes in the agreed format.

The time table is book/teaching.md's *Time per chapter and lab*. Each plan in
instructor/syllabus.md must use exactly those minutes per part, add up to its stated total, keep
its class time within its budget (in total and per session), and never schedule a part before a
part it builds on. Each chapter's notes (instructor/notes/chNN_<slug>.md) must carry the five
sections, a Timing that states the table's minutes, and a question bank of at least five
numbered questions with answers. Where a chapter notebook states its own time estimate in its
first cell, it must be the table's.
"""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TEACHING = ROOT / "book" / "teaching.md"
SYLLABUS = ROOT / "instructor" / "syllabus.md"
NOTES = ROOT / "instructor" / "notes"
SECTIONS = ("## Timing", "## Predict prompts: expected answers", "## Common confusions", "## For a short course",
            "## Question bank")
PART = re.compile(r"^(Chapter \d+|Lab \d+)$")


def time_table(text: str | None = None) -> dict[str, int]:
    """{'Chapter 0': 45, 'Lab 1': 180, ...} from teaching.md's table (minutes)."""
    text = text if text is not None else TEACHING.read_text()
    out = {}
    for row in re.findall(r"^\| ((?:Chapter|Lab) \d+) \|[^\n]*\| ([\d.]+) (min|h) \|$", text, re.M):
        part, value, unit = row
        out[part] = round(float(value) * (60 if unit == "h" else 1))
    return out


def _table(block: str) -> list[list[str]]:
    rows = [ln for ln in block.splitlines() if ln.startswith("|")]
    return [[c.strip() for c in r.strip("|").split("|")] for r in rows[2:]]  # skip header and rule


def _sections(text: str) -> dict[str, str]:
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    return {parts[i].strip(): parts[i + 1] for i in range(1, len(parts), 2)}


def dependency_map(text: str | None = None) -> dict[str, list[str]]:
    block = _sections(text if text is not None else SYLLABUS.read_text())["Dependency map"]
    return {part: [] if deps == "—" else [d.strip() for d in deps.split(",")] for part, deps in _table(block)}


def plans(text: str | None = None) -> dict[str, dict]:
    """{plan name: {"budget": total, "per_session": n or None, "rows": [(session, part, where, min)], "total": n}}."""
    out = {}
    for name, block in _sections(text if text is not None else SYLLABUS.read_text()).items():
        m = re.search(r"Budget: (\d+) min of class in total(?:, (\d+) per session)?", block)
        if not m:
            continue
        rows, total = [], None
        for cells in _table(block):
            if "**total**" in cells[1]:
                total = int(cells[3].strip("*"))
            else:
                rows.append((cells[0], cells[1], cells[2], int(cells[3])))
        out[name] = {"budget": int(m.group(1)), "per_session": int(m.group(2)) if m.group(2) else None,
                     "rows": rows, "total": total}
    return out


def problems_of(plan: dict, table: dict[str, int], deps: dict[str, list[str]]) -> list[str]:
    """Everything wrong with one plan (empty: it adds up and respects the dependency map)."""
    bad, seen, per_session = [], set(), {}
    for session, part, where, minutes in plan["rows"]:
        if part not in table:
            bad.append(f"{part}: not in the time table")
            continue
        if minutes != table[part]:
            bad.append(f"{part}: {minutes} min, the time table says {table[part]}")
        missing = [d for d in deps.get(part, []) if d not in seen]
        if missing:
            bad.append(f"{part} ({session}) comes before {', '.join(missing)}, which it builds on")
        if where not in ("class", "homework"):
            bad.append(f"{part}: 'where' is {where!r}, not class or homework")
        if where == "class":
            per_session[session] = per_session.get(session, 0) + minutes
        seen.add(part)
    total = sum(r[3] for r in plan["rows"])
    if plan["total"] != total:
        bad.append(f"the stated total is {plan['total']} min, the rows add up to {total}")
    if sum(per_session.values()) > plan["budget"]:
        bad.append(f"{sum(per_session.values())} min of class exceed the budget of {plan['budget']}")
    for session, minutes in per_session.items():
        if plan["per_session"] and minutes > plan["per_session"]:
            bad.append(f"{session}: {minutes} min of class exceed {plan['per_session']} per session")
    return bad


def test_the_time_table_has_every_chapter_and_lab():
    table = time_table()
    chapters = sorted(p.name[:2] for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert {f"Chapter {int(c)}" for c in chapters} <= set(table)
    assert {f"Lab {p.name[3]}" for p in (ROOT / "labs").glob("lab*.ipynb")} <= set(table)


def test_the_dependency_map_covers_every_part_and_names_only_known_parts():
    table, deps = time_table(), dependency_map()
    assert set(deps) == set(table)
    assert all(d in table for ds in deps.values() for d in ds)
    assert "Chapter 7" in deps["Lab 1"] and "Chapter 9" in deps["Lab 3"]


def test_there_are_the_four_plans_and_each_adds_up():
    table, deps, found = time_table(), dependency_map(), plans()
    assert set(found) == {"One-day workshop", "Two-day workshop", "Six-week module", "Full semester"}
    for name, plan in found.items():
        assert problems_of(plan, table, deps) == [], name


def test_the_six_week_module_teaches_what_its_labs_start_from():
    rows = plans()["Six-week module"]["rows"]
    parts = [r[1] for r in rows]
    assert {"Chapter 7", "Chapter 9", "Lab 1", "Lab 3"} <= set(parts)


def test_a_plan_that_does_not_add_up_is_caught():
    table, deps = time_table(), dependency_map()
    plan = plans()["One-day workshop"]
    wrong = dict(plan, rows=[("morning", "Lab 2", "class", 120), ("afternoon", "Chapter 3", "class", 60)], total=200)
    problems = problems_of(wrong, table, deps)
    assert any("comes before Chapter 0, Chapter 3" in p for p in problems)
    assert any(f"Chapter 3: 60 min, the time table says {table['Chapter 3']}" in p for p in problems)
    assert any("the rows add up to 180" in p for p in problems)
    over = dict(plan, budget=100)
    assert any("exceed the budget of 100" in p for p in problems_of(over, table, deps))


NOTE_FILES = sorted(NOTES.glob("ch[0-9][0-9]_*.md"))


def test_every_chapter_has_notes():
    chapters = sorted(p.name[:2] for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert [p.name[2:4] for p in NOTE_FILES] == chapters
    for p in NOTE_FILES:  # the slug is the notebook's
        assert (ROOT / "notebooks" / f"{p.stem[2:]}.ipynb").is_file(), p.name


@pytest.mark.parametrize("note", NOTE_FILES, ids=[p.name for p in NOTE_FILES])
def test_notes_have_the_sections_the_timing_and_a_question_bank(note):
    text = note.read_text()
    positions = [text.find(s + "\n") for s in SECTIONS]
    assert all(p >= 0 for p in positions) and positions == sorted(positions), note.name
    chapter = f"Chapter {int(note.name[2:4])}"
    timing = _sections(text)["Timing"]
    stated = re.search(r"(\d+) minutes", timing)
    assert stated and int(stated.group(1)) == time_table()[chapter], f"{note.name}: Timing must say the table's minutes"
    bank = _sections(text)["Question bank"]
    questions = re.split(r"^\d+\. ", bank, flags=re.M)[1:]
    assert len(questions) >= 5, f"{note.name}: {len(questions)} questions"
    assert all("**Answer:**" in q for q in questions), note.name


def test_a_notebook_that_states_its_time_states_the_tables():
    """A chapter's parts (NN_*, NNb_*, ...) state their own times; together they are the table's."""
    table, stated = time_table(), {}
    for nb in sorted((ROOT / "notebooks").glob("[0-9][0-9]*_*.ipynb")):
        first = "".join(json.loads(nb.read_text())["cells"][0]["source"])
        m = re.search(r"[Tt]ime(?: estimate)?\W{0,4}\s*(?:about\s*)?(\d+)\s*min", first)
        if m:
            key = f"Chapter {int(nb.name[:2])}"
            stated[key] = stated.get(key, 0) + int(m.group(1))
    assert stated and all(minutes == table[ch] for ch, minutes in stated.items()), (stated, table)


def test_the_time_table_parser_reads_minutes_and_hours():
    assert time_table("| Chapter 3 | DMA | 75 min |\n| Lab 1 | driver | 3 h |\n") == {"Chapter 3": 75, "Lab 1": 180}
