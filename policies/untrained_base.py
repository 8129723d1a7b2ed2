"""A trained wording version's own base, untrained: the same base with no adapter, asked the
same way (the same conversation builder, system prompt, context window and greedy decoding).
It is what the independent measure compares every wording version with (evaluation's
against-base checkpoint), and the author its replies are kept under (policies.ReplyAuthor's
`untrained_base`): a base's words are never the trained version's.

Not a row: it stands beside its version, whose base it names. Workspace schema.
"""

from __future__ import annotations

from dataclasses import dataclass

from policies.models import PolicyVersion


@dataclass(frozen=True)
class UntrainedBase:
    """`version`'s base with its adapter left off. It answers where `version` answers
    (policies.agents.untrained_base_reply) and is named after the base, never the version."""

    version: PolicyVersion

    @property
    def pk(self) -> tuple[str, int]:
        # Its own key wherever answers are bounded per endpoint (evaluation.fanout).
        return ("untrained base", self.version.pk)

    @property
    def base(self) -> str:
        return self.version.base_model or "its base"

    @property
    def label(self) -> str:
        """ "smollm2-135m-instruct untrained (v3's base, no adapter)"."""
        return f"{self.base} untrained (v{self.version.number}'s base, no adapter)"

    @property
    def world(self):
        return self.version.world

    @property
    def world_id(self) -> int:
        return self.version.world_id

    @property
    def can_answer(self) -> bool:
        return self.version.can_answer


def untrained_base_of(version: PolicyVersion) -> UntrainedBase:
    return UntrainedBase(version)
