"""Licences, citation and version: one version in four places, a changelog in Keep a Changelog
form, tags named vX.Y.Z that each have a dated changelog section (CONTRIBUTING.md)."""

import re
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SEMVER = r"(?:0|[1-9]\d*)\.(?:0|[1-9]\d*)\.(?:0|[1-9]\d*)"
SECTION = re.compile(rf"^## \[({SEMVER})\] - (\d{{4}}-\d{{2}}-\d{{2}}|Unreleased)\s*$", re.M)


def changelog_sections(text: str) -> list[tuple[str, str]]:
    """(version, date or 'Unreleased') of every `## [X.Y.Z] - ...` heading, newest first.

    Any other level-2 heading is an error: a release section must be named exactly this way."""
    heads = re.findall(r"^## .*$", text, re.M)
    sections = SECTION.findall(text)
    bad = [h for h in heads if not SECTION.fullmatch(h)]
    if bad:
        raise ValueError(f"changelog headings not of the form '## [X.Y.Z] - YYYY-MM-DD|Unreleased': {bad}")
    if not sections:
        raise ValueError("changelog has no version section")
    return sections


def version_problems(versions: dict[str, str]) -> list[str]:
    """A message for each place whose version differs from pyproject.toml's."""
    want = versions["pyproject.toml"]
    return [f"{where} says {v!r}, pyproject.toml says {want!r}" for where, v in versions.items() if v != want]


def order_problems(sections: list[tuple[str, str]]) -> list[str]:
    """Sections must be newest first, versions strictly decreasing, only the first unreleased."""
    problems = []
    keys = [tuple(int(x) for x in v.split(".")) for v, _ in sections]
    if keys != sorted(keys, reverse=True) or len(set(keys)) != len(keys):
        problems.append(f"versions not strictly decreasing: {[v for v, _ in sections]}")
    problems += [f"[{v}] is unreleased but not the newest section" for v, d in sections[1:] if d == "Unreleased"]
    return problems


def _helpers_version() -> str:
    m = re.search(r'^__version__\s*=\s*"([^"]+)"', (ROOT / "helpers" / "__init__.py").read_text(), re.M)
    assert m, "helpers/__init__.py has no __version__ = \"...\" line (CONTRIBUTING.md: the version lives there)"
    return m.group(1)


def _citation() -> dict:
    return yaml.safe_load((ROOT / "CITATION.cff").read_text())


# ------------------------------------------------------------------ the parsers can fail

def test_changelog_parser_on_made_up_text():
    text = "# Changelog\n\n## [1.10.0] - Unreleased\n\n### Added\n- x\n\n## [1.9.2] - 2026-01-02\n"
    assert changelog_sections(text) == [("1.10.0", "Unreleased"), ("1.9.2", "2026-01-02")]
    assert order_problems(changelog_sections(text)) == []
    with pytest.raises(ValueError, match="headings"):
        changelog_sections("## [1.0] - 2026-01-01\n")  # not semver
    with pytest.raises(ValueError, match="headings"):
        changelog_sections("## Unreleased\n")
    with pytest.raises(ValueError, match="no version"):
        changelog_sections("# Changelog\n")
    out_of_order = [("1.0.0", "2026-01-01"), ("1.1.0", "Unreleased")]
    assert len(order_problems(out_of_order)) == 2


def test_version_comparison_names_the_odd_one_out():
    assert version_problems({"pyproject.toml": "1.2.3", "CITATION.cff": "1.2.3"}) == []
    assert version_problems({"pyproject.toml": "1.2.3", "CITATION.cff": "1.2.4"}) == [
        "CITATION.cff says '1.2.4', pyproject.toml says '1.2.3'"]


# ------------------------------------------------------------------ the repository's files

def test_one_version_everywhere():
    sections = changelog_sections((ROOT / "CHANGELOG.md").read_text())
    versions = {
        "pyproject.toml": tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"],
        "helpers/__init__.py": _helpers_version(),
        "CITATION.cff": str(_citation()["version"]),
        "CHANGELOG.md (newest section)": sections[0][0],
    }
    assert re.fullmatch(SEMVER, versions["pyproject.toml"])
    assert version_problems(versions) == []


def test_changelog_order_and_citation_date():
    sections = changelog_sections((ROOT / "CHANGELOG.md").read_text())
    assert order_problems(sections) == []
    newest_date = sections[0][1]
    cff = _citation()
    if newest_date == "Unreleased":
        assert "date-released" not in cff, "CITATION.cff has date-released but the newest version is unreleased"
    else:
        assert str(cff.get("date-released")) == newest_date, "CITATION.cff date-released must be the release date"


def test_every_version_tag_has_a_dated_section():
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "tag", "--list", "v*"], capture_output=True,
                             text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"git tags not readable here: {exc}")
    dated = {v for v, d in changelog_sections((ROOT / "CHANGELOG.md").read_text()) if d != "Unreleased"}
    tags = out.split()
    assert [t for t in tags if not re.fullmatch(rf"v{SEMVER}", t)] == [], "tags must be named vX.Y.Z"
    assert [t for t in tags if t[1:] not in dated] == [], "a tag without a dated CHANGELOG section"


def test_licences_are_stated_where_people_look():
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    content = (ROOT / "LICENSE-CONTENT").read_text()
    assert "Attribution 4.0 International Public License" in content and "Section 8 -- Interpretation." in content
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert meta["license"] == "MIT"
    assert all((ROOT / f).is_file() for f in meta["license-files"])
    assert set(_citation()["license"]) == {"MIT", "CC-BY-4.0"}
    readme = (ROOT / "README.md").read_text()
    assert "LICENSE-CONTENT" in readme and "CC BY 4.0" in readme and "MIT" in readme
    footer = yaml.safe_load((ROOT / "book" / "_config.yml").read_text())["html"]["extra_footer"]
    assert "CC BY 4.0" in footer and "MIT" in footer
