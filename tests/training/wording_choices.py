"""The wording tests' shared start: the owner's picks in lettings frozen into a preference
version, and the Benchmark (DPO) card's choice on it, as a person fills it in on the CPU pool."""

from __future__ import annotations

from django.contrib.auth import get_user_model

from arena.models import PreferenceVersion, World
from arena.services.freeze import preference_freeze
from arena.services.pairs import duel_pairs_generate
from arena.services.queue import duel_next, pick_submit
from levers9.pools import pool_default
from policies.models import PolicyVersion
from training.wording import WordingChoice


def lettings_picks_frozen(*, picks: int, pairs: int) -> PreferenceVersion:
    """The owner prefers reply A for respect in `picks` of `pairs` new pairs; then a freeze."""
    world = World.objects.get(slug="lettings")
    reviewer = get_user_model().objects.get(username="owner@acme.test")
    duel_pairs_generate(world=world, count=pairs)
    for _ in range(picks):
        pair = duel_next(world=world, reviewer=reviewer)
        pick_submit(pair_id=pair.pk, reviewer=reviewer, chosen="A", reasons=["respect"])
    return preference_freeze(world=world, by=reviewer)


def dpo_choice(preference_version: PreferenceVersion, **changes) -> WordingChoice:
    """The Benchmark card on lettings' v1, one CPU card, the smallest base; `changes` override."""
    values = {
        "method": "dpo",
        "preference_version": preference_version,
        "pool": pool_default(gpu=False),
        "card_count": 1,
        "base": "smollm2-135m-instruct",
        "parent": PolicyVersion.objects.get(world__slug="lettings", number=1),
    }
    values.update(changes)
    return WordingChoice(**values)
