"""The agent role as the arena sees it: which versions answer, and what one says at a moment.

The Duel asks versions for replies, but versions, their providers and endpoints live above the
arena (in policies). So the arena names what it needs here and policies fills it in its
`AppConfig.ready()` (`agent_directory_register`): the arena never imports policies.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol


class AgentCannotAnswer(RuntimeError):
    """The version is released (or its provider is unavailable) and answers nothing."""


@dataclass(frozen=True)
class AgentReply:
    text: str
    move: str


class AgentDirectory(Protocol):
    def live(self, *, world: Any) -> Any | None:
        """The version taking the world's live calls."""

    def answering(self, *, world: Any) -> list[Any]:
        """The world's versions that can answer, newest first."""

    def numbered(self, numbers: Sequence[int], *, world: Any) -> list[Any]:
        """The world's versions with these numbers (only those that exist), in number
        order: each world numbers its own."""

    def reply(self, version: Any, moment: Any) -> AgentReply:
        """What `version` says at `moment`, or AgentCannotAnswer."""

    def replies_written(self, written: Sequence[tuple[Any, Any]]) -> None:
        """Keep who wrote what: each (saved reply, version) of the sequence."""

    def reply_authors(self, reply_ids: Sequence[int]) -> dict[int, Any]:
        """The version that wrote each of these replies, by reply id (only where one did and
        still exists)."""


_directory: AgentDirectory | None = None


def agent_directory_register(directory: AgentDirectory) -> None:
    global _directory
    _directory = directory


def agents() -> AgentDirectory:
    if _directory is None:
        raise LookupError("No agent directory is registered: is the policies app installed?")
    return _directory
