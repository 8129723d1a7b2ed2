"""Read a django-q2 task result without ever running the normal unpickler on it.

django-q2 stores results as unsigned, base64-encoded pickles. Anyone who can write that row
could make the normal unpickler run code. Our trainers return plain values only, so we read
the raw column, walk the pickle's opcodes, and refuse any opcode that names or calls an
object (GLOBAL, REDUCE, BUILD, ...) before a restricted unpickler that can resolve no class
builds the value. Whatever passes is then checked to be numbers, strings, booleans, None,
lists and dicts of those.
"""

from __future__ import annotations

import base64
import binascii
import io
import pickle
import pickletools
from typing import Any

from django.db import connection

PlainValue = None | bool | int | float | str | list | dict

# Opcodes that import, call or construct objects; a plain-value pickle never contains them.
_FORBIDDEN_OPCODES = frozenset(
    {
        "GLOBAL",
        "STACK_GLOBAL",
        "REDUCE",
        "BUILD",
        "INST",
        "OBJ",
        "NEWOBJ",
        "NEWOBJ_EX",
        "EXT1",
        "EXT2",
        "EXT4",
        "PERSID",
        "BINPERSID",
        "BYTEARRAY8",
        "NEXT_BUFFER",
        "READONLY_BUFFER",
    }
)


class UnsafeTaskResult(ValueError):
    """A task result that is not made of plain values; it was not unpickled."""


class TaskResultMissing(LookupError):
    """No finished task with that id exists (yet)."""


class _NoClassesUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise UnsafeTaskResult(f"the result names {module}.{name}, which is not a plain value")


def _check_plain(value: Any, path: str = "result") -> None:
    if value is None or isinstance(value, bool | int | float | str):
        return
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            _check_plain(item, f"{path}[{index}]")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise UnsafeTaskResult(f"{path} has a key that is not a string: {key!r}")
            _check_plain(item, f"{path}.{key}")
        return
    raise UnsafeTaskResult(f"{path} is a {type(value).__name__}, not a plain value")


def _to_plain(value: Any) -> PlainValue:
    if isinstance(value, tuple | list):
        return [_to_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _to_plain(item) for key, item in value.items()}
    return value


def plain_value_from_pickle(data: bytes) -> PlainValue:
    """Decode pickle bytes into plain values, or raise UnsafeTaskResult without running them."""
    try:
        for opcode, _argument, _position in pickletools.genops(data):
            if opcode.name in _FORBIDDEN_OPCODES:
                raise UnsafeTaskResult(
                    f"the result uses the pickle opcode {opcode.name}, which builds objects"
                )
    except UnsafeTaskResult:
        raise
    except Exception as error:  # pickletools raises ValueError and friends on garbage
        raise UnsafeTaskResult(f"the result is not a readable pickle ({error})") from error
    value = _NoClassesUnpickler(io.BytesIO(data)).load()
    _check_plain(value)
    return _to_plain(value)


def plain_value_from_column(raw: str) -> PlainValue:
    """Decode the text django-picklefield stores (base64 of a pickle)."""
    try:
        data = base64.b64decode(raw.encode(), validate=True)
    except (binascii.Error, ValueError) as error:
        raise UnsafeTaskResult("the stored result is not base64 text") from error
    return plain_value_from_pickle(data)


def task_result_read(task_id: str) -> tuple[bool, PlainValue]:
    """(success, result) of a finished task, read from the raw column in the public schema."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT success, result FROM public.django_q_task WHERE id = %s", [task_id])
        row = cursor.fetchone()
    if row is None:
        raise TaskResultMissing(f"No finished task with id {task_id}.")
    success, raw = row
    return bool(success), (None if raw is None else plain_value_from_column(raw))
