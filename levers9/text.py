"""Text (and numbers) that PostgreSQL can store: one check for the middleware (API, pages, forms,
admin) and every import.

PostgreSQL's text types hold no NUL character, and UTF-8 cannot encode a lone surrogate (a
"\\ud800" escape in JSON decodes to one); either fails in the database, as a 500, unless it is
refused first with the field named. No integer column holds more than a bigint: an id past it
names nothing that can exist, and is refused as such, not looked for.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from django.http import QueryDict

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")

# PostgreSQL's bigint, the widest integer column (every id is one).
INTEGER_MIN = -(2**63)
INTEGER_MAX = 2**63 - 1


def text_problem(value: str) -> str | None:
    """Why `value` cannot be stored, in words, or None when it can."""
    if value.isascii():
        return "Null characters are not allowed." if "\x00" in value else None
    if "\x00" in value:
        return "Null characters are not allowed."
    if _LONE_SURROGATE.search(value):
        return "Lone surrogates (\\ud800-\\udfff) are not allowed: send valid Unicode text."
    return None


def printable(value: str) -> str:
    """`value` fit to be echoed back in an error message."""
    return _LONE_SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", value).replace(
        "\x00", "\\0"
    )


def bad_text_path(value: Any, path: str = "") -> tuple[str, str] | None:
    """The dotted path (`knobs.note`, `items[2]`) of the first string in a parsed JSON value
    that cannot be stored, and why; None when every string can be."""
    if isinstance(value, str):
        problem = text_problem(value)
        return (path or "body", problem) if problem else None
    if isinstance(value, dict):
        for key, item in value.items():
            where = f"{path}.{printable(key)}" if path else printable(key)
            problem = text_problem(key)
            if problem:
                return where, problem
            found = bad_text_path(item, where)
            if found:
                return found
    if isinstance(value, list):
        for index, item in enumerate(value):
            found = bad_text_path(item, f"{path}[{index}]")
            if found:
                return found
    return None


def bad_text_in_fields(fields: QueryDict) -> tuple[str, str] | None:
    """The first field of a query or a form (its name or one of its values) that cannot be
    stored, as (the field's name fit to echo, why); None when every one can be."""
    for name, values in fields.lists():
        for value in (name, *values):
            problem = text_problem(value)
            if problem:
                return printable(name), problem
    return None


def number_problem(value: int) -> str | None:
    """Why the integer `value` cannot be stored, in words, or None when it can."""
    if INTEGER_MIN <= value <= INTEGER_MAX:
        return None
    return f"Out of range: a whole number here is between {INTEGER_MIN} and {INTEGER_MAX}."


def out_of_range_number_path(value: Any, path: str = "") -> tuple[str, str] | None:
    """The dotted path of the first integer in a parsed JSON value that no integer column can
    hold, and why; None when there is none. (A JSON integer parses exactly, however long.)"""
    if isinstance(value, int) and not isinstance(value, bool):
        problem = number_problem(value)
        return (path or "body", problem) if problem else None
    if isinstance(value, dict):
        named = (
            (f"{path}.{printable(key)}" if path else printable(key), item)
            for key, item in value.items()
        )
    elif isinstance(value, list):
        named = ((f"{path}[{index}]", item) for index, item in enumerate(value))
    else:
        return None
    for where, item in named:
        found = out_of_range_number_path(item, where)
        if found:
            return found
    return None
