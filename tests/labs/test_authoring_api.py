"""The authoring API is described once (labs/README.md, "The authoring API: what the grader loads")
and that description is what the grader loads: the names read from a lab's checks module, the
fields of `Part`, the options of `Student.call`, the check's methods. Each test reads the README's
text and compares it with the code, so renaming either side alone fails here."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
from pathlib import Path

import pytest

from helpers.labs import grading
from tools.grader import api, classrun

ROOT = Path(__file__).resolve().parents[2]
LABS = sorted(int(m.group(1)) for p in (ROOT / "labs").glob("lab*_*.ipynb")
              if (m := re.match(r"lab(\d+)_", p.name)))


def section() -> str:
    """The README's authoring-API section (up to the next heading of its level or above)."""
    text = (ROOT / "labs" / "README.md").read_text(encoding="utf-8")
    start = text.index("#### The authoring API: what the grader loads")
    end = re.search(r"^#{1,4} ", text[start + 5:], re.M)
    return text[start:start + 5 + end.start()] if end else text[start:]


def table(text: str, header: str) -> dict[str, str]:
    """{first cell: the rest of the row} of the markdown table whose header row starts with `header`."""
    lines = text.splitlines()
    i = next(n for n, line in enumerate(lines) if line.startswith(f"| {header} |"))
    rows = {}
    for line in lines[i + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0].strip("`")] = " | ".join(cells[1:])
    return rows


def test_the_documented_module_and_names_are_the_ones_loaded():
    text = section()
    assert f"`{classrun.CHECKS_MODULE.format(lab='labN')}`" in text
    names = table(text, "name")
    assert set(names) == {classrun.PARTS_NAME, classrun.WIRE_TYPES_NAME}
    assert names[classrun.PARTS_NAME].startswith("yes") and names[classrun.WIRE_TYPES_NAME].startswith("no")


def test_part_is_documented_field_by_field_in_order():
    text = section()
    fields = dataclasses.fields(api.Part)
    assert list(table(text, "field")) == [f.name for f in fields]
    # the signature as written: positional fields bare, keyword-only ones as name=...
    assert f"Part({', '.join(f'{f.name}=...' if f.kw_only else f.name for f in fields)})" in text
    assert classrun.PARTS_NAME == "GRADED" and "PARTS" not in (api.__doc__ or "")


def test_run_student_call_and_check_are_what_the_text_names():
    text = section()
    assert "`run(c, student, seed)`" in text
    options = re.search(r"`student\.call\(\"name\", \*args, ([^`]*)\)`", text).group(1)
    documented = [o.split("=")[0].strip() for o in options.split(",")]
    params = inspect.signature(api.Student.call).parameters
    options_in_code = [n for n, p in params.items() if p.kind is p.KEYWORD_ONLY and n != "attr"]  # attr: Remote's
    assert documented == options_in_code
    assert "`c.require(ok,\n  feedback)`" in text or "`c.require(ok, feedback)`" in text
    assert callable(grading.check.require) and callable(grading.check.close)
    assert list(inspect.signature(grading.check.close).parameters)[1:] == ["what", "value", "expected", "rel_tol", "hint"]
    assert "`c.close(what, value, expected, rel_tol, hint)`" in text


@pytest.mark.parametrize("lab", LABS)
def test_every_lab_provides_what_the_grader_loads_and_nothing_it_ignores(lab):
    module = importlib.import_module(classrun.CHECKS_MODULE.format(lab=f"lab{lab}"))
    parts = getattr(module, classrun.PARTS_NAME)
    assert isinstance(parts, tuple) and parts and all(type(p) is api.Part for p in parts)
    assert all(list(inspect.signature(p.run).parameters)[:3] == ["c", "student", "seed"] for p in parts)
    assert not hasattr(module, "PARTS"), "the grader loads GRADED; a PARTS here would be ignored"
    for cls in getattr(module, classrun.WIRE_TYPES_NAME, ()):
        assert dataclasses.is_dataclass(cls) and cls.__module__.startswith("helpers.")


def test_lab_helper_modules_follow_one_naming_rule():
    """helpers/labs/: labN.py, labN_<concept>.py, and the grading package; nothing else."""
    names = {p.stem for p in (ROOT / "helpers" / "labs").glob("*.py")} - {"__init__"}
    odd = {n for n in names if not re.fullmatch(r"lab\d+(_[a-z0-9_]+)?", n)}
    assert not odd, f"lab helper modules named outside the rule labN.py / labN_<concept>.py: {sorted(odd)}"
    assert {p.name for p in (ROOT / "helpers" / "labs").iterdir() if p.is_dir() and p.name != "__pycache__"} == {"grading"}
    assert {f"lab{n}" for n in LABS} <= names
