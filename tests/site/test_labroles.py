"""tools/checks/labroles.py: MyST roles become links that JupyterLab and the site both resolve."""

import json
import os
from pathlib import Path

import pytest

from tools.checks import labroles as L

ROOT = Path(__file__).resolve().parents[2]

PAGE = ROOT / "notebooks" / "03_dma_and_copy_engines.ipynb"


@pytest.fixture(scope="module")
def targets():
    return L.Targets.load()


def rw(text, targets, page=PAGE):
    return L.rewrite_markdown(text, page, targets)


def test_term_becomes_glossary_link(targets):
    assert rw("a {term}`PCIe` link", targets) == "a [PCIe](../book/glossary.md#term-pcie) link"
    # explicit text, and the glossary's spelling for the fragment whatever the case used
    assert rw("{term}`fences <fence>`", targets) == "[fences](../book/glossary.md#term-fence)"
    assert rw("{term}`Pinned Memory`", targets) == "[Pinned Memory](../book/glossary.md#term-pinned-memory)"


def test_cite_is_readable_and_links_the_entry(targets):
    out = rw("see {cite}`nv-mmap`", targets)
    assert out == "see ([NVIDIA, nv-mmap.c](../book/bibliography.md#cite-nv-mmap))"
    assert "nv-mmap`" not in out
    two = rw("{cite}`src002,gelado2008cuba`", targets)
    assert two == ("([source question 002](../book/bibliography.md#cite-src002); "
                   "[Gelado et al. 2008](../book/bibliography.md#cite-gelado2008cuba))")


def test_doc_becomes_notebook_link_with_title(targets):
    assert rw("{doc}`part 2 <03b_copy_engines_and_the_link>`", targets) == \
        "[part 2](03b_copy_engines_and_the_link.ipynb)"
    bare = rw("{doc}`06b_drm_in_a_real_kernel`", targets)
    title = L.page_title(ROOT / "notebooks" / "06b_drm_in_a_real_kernel.ipynb")
    assert bare == f"[{title}](06b_drm_in_a_real_kernel.ipynb)" and title


def test_code_is_left_alone(targets):
    text = "``{term}`BAR` `` and\n```python\nx = '{cite}`nv-mmap`'\n```\nbut {term}`BAR`"
    out = rw(text, targets)
    assert out.startswith("``{term}`BAR` `` and\n```python\nx = '{cite}`nv-mmap`'\n```\n")
    assert out.endswith("but [BAR](../book/glossary.md#term-bar)")


def test_directive_fences_are_scanned(targets):
    out = rw("```{admonition} Answer\n:class: dropdown\nUses {term}`DMA`.\n```", targets)
    assert "[DMA](../book/glossary.md#term-dma)" in out and "{term}" not in out


def test_idempotent(targets):
    once = rw("{term}`PCIe`, {cite}`nvbandwidth`, {doc}`part 3 <03c_pageable_copies>`", targets)
    assert rw(once, targets) == once and "{" not in once


@pytest.mark.parametrize("bad", ["{term}`no-such-term`", "{cite}`no-such-key`", "{doc}`no_such_page`",
                                 "{cite}`nv-mmap,nope`"])
def test_unknown_target_is_an_error(targets, bad):
    with pytest.raises(L.RoleError, match="no"):
        rw(bad, targets)


def test_labs_link_from_their_folder(targets):
    out = rw("{term}`MMIO`", targets, page=ROOT / "labs" / "lab1_toy_driver.ipynb")
    assert out == "[MMIO](../book/glossary.md#term-mmio)"


def test_notebook_rewrite_changes_markdown_only(tmp_path, targets):
    nb = {"cells": [{"cell_type": "markdown", "metadata": {}, "source": ["A {term}`DMA`\n", "engine"]},
                    {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
                     "source": ["# {term}`DMA` in a comment\n"]}],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    p = tmp_path / "nb.ipynb"
    p.write_text(json.dumps(nb))
    text, n = L.rewrite_notebook(p, targets)
    new = json.loads(text)
    assert n == 1
    link = os.path.relpath(L.GLOSSARY, tmp_path)
    assert "".join(new["cells"][0]["source"]) == f"A [DMA]({link}#term-dma)\nengine"
    assert (tmp_path / link).resolve() == L.GLOSSARY
    assert new["cells"][1] == nb["cells"][1]
    p.write_text(text)
    assert L.rewrite_notebook(p, targets) == (text, 0)
    assert L.remaining_roles(p) == []


def test_check_mode_finds_roles(tmp_path):
    nb = {"cells": [{"cell_type": "markdown", "metadata": {}, "source": ["{cite}`nv-mmap`"]}],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    p = tmp_path / "nb.ipynb"
    p.write_text(json.dumps(nb))
    assert L.main(["--check", str(p)]) == 1
    assert json.loads(p.read_text()) == nb  # --check changes nothing


def test_every_glossary_term_has_a_distinct_fragment(targets):
    frags = [L.slug(t) for t in targets.terms.values()]
    assert len(frags) == len(set(frags)) and all(frags)


def test_short_reference_rules():
    assert L.short_reference("k", {"shorthand": "Mine"}) == "Mine"
    assert L.short_reference("k", {"author": "The Linux kernel developers", "title": "mm/gup.c: pinning"}) == \
        "Linux, gup.c"
    assert L.short_reference("k", {"author": "Doe, J. and Roe, R.", "title": "A paper", "year": "2001"}) == \
        "Doe et al. 2001"
