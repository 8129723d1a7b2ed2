"""A spreadsheet cell that starts like a formula is made inert, the full-width signs too: some
spreadsheets (Excel with an East Asian input) read a leading ＝ ＋ － ＠ as = + - @."""

from __future__ import annotations

import pytest

from arena.preference_format import spreadsheet_cell


@pytest.mark.parametrize("sign", ["=", "+", "-", "@", "\uff1d", "\uff0b", "\uff0d", "\uff20"])
def test_a_cell_starting_with_a_formula_sign_gets_an_apostrophe(sign):
    value = f'{sign}HYPERLINK("https://example.test")'
    assert spreadsheet_cell(value) == "'" + value


@pytest.mark.parametrize("value", ["Hello", "a=b", "ｈｅｌｌｏ", "", "'quoted"])
def test_any_other_cell_is_left_as_it_is(value):
    assert spreadsheet_cell(value) == value
