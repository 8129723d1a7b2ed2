"""Changing one of daphne's (or Twisted's, or autobahn's) methods, once per process.

Each change is asked for at import of the module that needs it (the ASGI application, the
websocket consumer), and more than one entry point may import it: a second wrap would run the
change twice on every request.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def method_wrap_once(owner: type, name: str, wrap: Callable[[Any], Any]) -> None:
    """`owner.name` becomes `wrap(the method it was)`, unless this process has done it already."""
    done = f"_levers9_wrapped_{name}"
    if owner.__dict__.get(done, False):  # a parent's flag says nothing of this class's method
        return
    setattr(owner, name, wrap(getattr(owner, name)))
    setattr(owner, done, True)
