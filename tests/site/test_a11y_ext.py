"""book/_ext/a11y.py: the repairs to the theme's markup that axe-core asked for, each on its own."""

from __future__ import annotations

import pytest

from book._ext import a11y


@pytest.mark.parametrize("before, after", [
    ('<button class="btn search-button-field search-button__button" title="Search" aria-label="Search" x="1">',
     '<button class="btn search-button-field search-button__button" title="Search" x="1">'),
    ('<i class="theme-switch fa-solid fa-sun fa-lg" data-mode="light" title="Light"></i>',
     '<i class="theme-switch fa-solid fa-sun fa-lg" data-mode="light" aria-hidden="true"></i>'),
    ('<summary><span class="toctree-toggle" role="presentation">',
     '<summary aria-label="Show or hide the parts"><span class="toctree-toggle" role="presentation">'),
    ('<div role="list" class="citation-list"><div class="citation" id="id1" role="doc-biblioentry">',
     '<div class="citation-list"><div class="citation" id="id1">'),
    ('<table><thead>\n<tr class="row-odd"><th class="head"><p></p></th>\n<th class="head"><p></p></th>\n</tr>\n'
     '</thead><tbody>', '<table><tbody>'),
    ('<tr><th></th><th>size</th></tr>', '<tr><td></td><th>size</th></tr>'),
    ('<summary aria-label="Toggle hidden content">', '<summary>'),
])
def test_each_repair(before, after):
    fixed, n = a11y.fix_html(before)
    assert fixed == after and n >= 1


def test_the_icon_only_search_button_keeps_its_name_and_content_is_untouched():
    page = ('<button class="btn btn-sm pst-navbar-icon search-button" title="Search" aria-label="Search">'
            '<p>text</p><th>kept</th>')
    fixed, _ = a11y.fix_html(page)
    assert 'aria-label="Search"' in fixed and "<th>kept</th>" in fixed
