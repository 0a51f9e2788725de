"""Every acronym the chapters and labs use has an entry in the glossary (book/glossary.md).

An acronym is a word of two or more capital letters, digits allowed after the first letter (BAR,
BAR1, P2PDMA, NV18), found in the markdown cells of notebooks/ and labs/ outside code, links,
HTML tags and math. It is covered when it is a glossary term, or when ALIASES names the term that
explains it, or when it is one of the few NOT_TERMS.
"""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GLOSSARY = ROOT / "book" / "glossary.md"

# Acronyms explained by an entry under another name. Each target must be a glossary term.
ALIASES = {
    "BAR2": "BAR",            # NVIDIA's third BAR; the BAR entry explains the numbering
    "NV": "NV#",              # nvidia-smi's NV# label, written NV18 for 18 links
    "NV18": "NV#",
    "C2C": "NVLink-C2C",
    "IO": "IOVA",             # "IO virtual address"
    "LIVE": "live mode",      # the mode banners' labels
    "REPLAY": "replay mode",
    "REPLAYED": "replay mode",
    "SIMULATED": "simulated mode",
    "FENCE": "fence",         # the toy GPU's command names, written in capitals
    "SYSTEM": "TTM placement",
}
# Capitalised words that are not terms. Keep this short, and say why for each.
NOT_TERMS = {
    "KB", "MB", "GB", "TB",   # units of size (binary ones, KiB/MiB/GiB, are not all capitals)
    "GT",                     # GT/s, the PCIe transfer-rate unit (the PCIe entry explains it)
    "AMD", "NVIDIA",          # company names
    "FILL",                   # a toy GPU command name, explained where Chapter 7 uses it
    "PASS", "FAIL",           # what a lab's graded check prints
    "ID",                     # "identifier", an ordinary abbreviation
}

_FENCED = re.compile(r"^(`{3,}|~{3,}).*?^\1[ \t]*$", re.S | re.M)
_STRIP = [
    _FENCED,
    re.compile(r"`[^`\n]*`"),                    # inline code
    re.compile(r"\]\([^)]*\)"),                  # link targets
    re.compile(r"https?://\S+"),                 # bare URLs
    re.compile(r"<[^>\n]+>"),                    # HTML tags
    re.compile(r"\$\$.*?\$\$|\$[^$\n]+\$", re.S),  # math
]
_ACRONYM = re.compile(r"\b([A-Z][A-Z0-9]*[A-Z][A-Z0-9]*)s?\b")


def acronyms(markdown: str) -> set[str]:
    """The acronyms in one markdown text (a plural 's' is dropped: GPUs -> GPU)."""
    for pattern in _STRIP:
        markdown = pattern.sub(" ", markdown)
    return set(_ACRONYM.findall(markdown))


def glossary_terms(text: str) -> set[str]:
    """The terms defined in every ```{glossary} block of a MyST page.

    Inside the block, a term is a line that starts in the first column (several such lines in a row
    share one definition); definitions are indented; `:option:` lines are options."""
    terms = set()
    for block in re.findall(r"^```\{glossary\}[^\n]*\n(.*?)^```[ \t]*$", text, re.S | re.M):
        for line in block.splitlines():
            if line.strip() and not line[0].isspace() and not line.startswith(":"):
                terms.add(line.strip())
    return terms


def chapter_markdown() -> dict[Path, str]:
    pages = sorted(ROOT.glob("notebooks/**/*.ipynb")) + sorted(ROOT.glob("labs/**/*.ipynb"))
    out = {}
    for path in pages:
        cells = json.loads(path.read_text())["cells"]
        out[path] = "\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    return out


def uncovered(found: dict[str, set[str]], terms: set[str]) -> dict[str, set[str]]:
    return {a: where for a, where in found.items() if a not in terms and a not in ALIASES and a not in NOT_TERMS}


# ------------------------------------------------------------------ the extractor can fail

def test_extractor_on_made_up_text():
    text = """The CPU writes a doorbell in BAR0 of two GPUs; P2PDMA and NV18 count too.
`CODE_IN_BACKTICKS` and `XYZ` are code, [a LINK](https://EXAMPLE.COM/ABC) keeps its text,
<span class="HTMLCLASS">tag</span>, $\\mathrm{MATHX}$, PCIe and dma-buf are not all capitals, x86 neither.

```python
IGNORED_IN_FENCE = 1
```
A lone capital I or A is no acronym; Q&A neither; TTM's apostrophe is fine."""
    assert acronyms(text) == {"CPU", "BAR0", "GPU", "P2PDMA", "NV18", "LINK", "TTM"}


def test_glossary_parser_and_the_check_on_made_up_text():
    page = """# G

```{glossary}
:sorted:

BAR
BAR1
  A window.

pinned memory
  Memory.
```
"""
    terms = glossary_terms(page)
    assert terms == {"BAR", "BAR1", "pinned memory"}
    found = {"BAR": {"ch2"}, "MMIO": {"ch2", "lab1"}, "GB": {"ch0"}, "REPLAY": {"ch6"}}
    assert uncovered(found, terms) == {"MMIO": {"ch2", "lab1"}}  # the check can fail


# ------------------------------------------------------------------ the course

def test_aliases_point_at_glossary_terms():
    terms = glossary_terms(GLOSSARY.read_text())
    assert sorted(t for t in ALIASES.values() if t not in terms) == []
    assert not set(ALIASES) & terms and not NOT_TERMS & terms


def test_every_acronym_in_the_chapters_is_in_the_glossary():
    pages = chapter_markdown()
    assert len(pages) >= 10, "no chapters found"
    found: dict[str, set[str]] = {}
    for path, text in pages.items():
        for a in acronyms(text):
            found.setdefault(a, set()).add(path.stem)
    assert len(found) > 20, "the extractor found almost nothing in the chapters"
    missing = uncovered(found, glossary_terms(GLOSSARY.read_text()))
    assert missing == {}, "acronyms without a glossary entry (add one to book/glossary.md): " + "; ".join(
        f"{a} in {', '.join(sorted(w))}" for a, w in sorted(missing.items()))


@pytest.mark.parametrize("term", ["BAR", "MMIO", "DMA", "GPFIFO", "USERD", "TTM", "GEM", "PRIME", "HMM",
                                  "ATS", "ACS", "P2PDMA", "IOMMU", "UVM", "UVA", "NVLink", "NVSwitch",
                                  "PCIe", "TLP", "MPS", "MRRS", "EPT", "KVM", "GUP", "VMA", "PFN", "SM",
                                  "CE", "NUMA", "MIG", "RDMA", "GPUDirect", "NCCL", "NVML", "ioctl",
                                  "mmap", "pinned memory", "page-locked memory", "pageable memory",
                                  "write-combining", "zero-copy", "doorbell", "fence", "ring buffer",
                                  "CPU", "GPU"])
def test_the_issue_s_terms_are_defined(term):
    assert term in glossary_terms(GLOSSARY.read_text())


def test_every_term_has_a_definition_of_one_to_three_sentences():
    text = GLOSSARY.read_text()
    for block in re.findall(r"^```\{glossary\}[^\n]*\n(.*?)^```[ \t]*$", text, re.S | re.M):
        for entry in re.split(r"\n\s*\n", block.strip()):
            lines = entry.splitlines()
            if lines[0].startswith(":"):
                continue
            definition = " ".join(ln.strip() for ln in lines if ln[:1].isspace())
            assert definition, f"{lines[0]}: no definition"
            sentences = re.findall(r"[.!?](?:\s|$)", definition)
            assert 1 <= len(sentences) <= 3, f"{lines[0]}: {len(sentences)} sentences"
