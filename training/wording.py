"""The Wording (RLHF) and Benchmark (DPO) cards: frozen picks → a spec → a job → a version.

The spec is checked with the trainers' own parser before anything runs, so a bad base, too
few pairs or a missing outcome world is refused on the card with the trainer's own words.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from arena import preference_format
from arena.held_out import held_out_call_ids, held_out_pair_moment_ids
from arena.models import Call, Moment, PreferenceVersion, World
from arena.selectors import preference_pairs
from levers9.jobs.models import Job
from levers9.models import GpuPool
from policies.models import PolicyVersion
from trainers.bases import LISTED_BASES, default_base
from trainers.registry import RLHF, TRAINERS, Family, trainers_of
from trainers.wording.spec import MIN_PAIRS, outcome_examples_from_calls, parse_wording_spec
from training.estimates import wording_estimate
from training.runs import training_run_start

# The bounds of a card's numbers: seeds are unsigned 32-bit (numpy's and torch's), and more
# epochs than this is a typo, not a plan.
SEED_MAX = 2**32 - 1
EPOCHS_MAX = 100

# The two cards, by trainer, with their titles (the catalogue's).
METHODS = {name: TRAINERS[name].card_label for name in trainers_of(Family.WORDING)}


class WordingCardError(ValueError):
    """Why the card cannot start; shown as is."""


@dataclass(frozen=True)
class WordingChoice:
    method: str
    preference_version: PreferenceVersion
    pool: GpuPool
    card_count: int
    base: str
    parent: PolicyVersion
    reward_source: str = "picks"
    outcomes_world: World | None = None
    epochs: float = 1.0
    seed: int = 0
    max_steps: int | None = None
    min_pairs: int | None = None


def bases_offered(pool: GpuPool | None = None) -> list[str]:
    """The list on the card: the GPU bases, and the CPU default where there is no GPU."""
    return list(LISTED_BASES)


def base_default(pool: GpuPool) -> str:
    return default_base(gpu=not pool.is_cpu)


def _outcome_examples(world: World) -> list[dict[str, Any]]:
    # The calls Evaluate replays stay out, so the checkpoint scores on calls never learned from.
    calls = (
        Call.objects.filter(world=world)
        .exclude(outcome=Call.Outcome.UNKNOWN)
        .exclude(pk__in=held_out_call_ids(world=world))
    )
    examples = outcome_examples_from_calls(
        {
            "id": call.external_id,
            "outcome": call.outcome,
            "turns": [{"speaker": t.speaker, "text": t.text} for t in call.turns.all()],
        }
        for call in calls.prefetch_related("turns")
    )
    # The outcome world's agent prompt, as its version would be served there.
    return [{**example, "system": world.agent_system_prompt} for example in examples]


def _hold_out_groups(moment_ids: set[int]) -> dict[int, str]:
    """The group each pick is held out with: its real call (every moment of a call on one side
    of the split), else its moment (picks on the same simulated dialogue together)."""
    calls = dict(Moment.objects.filter(pk__in=moment_ids).values_list("pk", "call_id"))
    return {
        moment: f"call-{calls[moment]}" if calls.get(moment) else f"moment-{moment}"
        for moment in moment_ids
    }


HELD_OUT = "held_out"
"""The "skipped" key of the imported pairs Evaluate replays (arena.held_out)."""


def _learnable_pairs(
    frozen: list[preference_format.PreferencePair], world: World
) -> tuple[list[preference_format.PreferencePair], dict[str, int]]:
    """The frozen picks a trainer learns from, and how many of each other kind it skips.

    DPO's loss and the Bradley-Terry reward model's need a chosen and a rejected reply: a tie
    or a both-bad pick says neither, so both are left out. The version itself keeps every pick
    (it is what the reviewers picked), but the imported pairs the world holds out are what a
    checkpoint replays in a world of pairs only: no trainer reads them either."""
    held_out = held_out_pair_moment_ids(world=world)
    skipped = {kind: 0 for kind in preference_format.KINDS if kind != preference_format.PREFERENCE}
    learnable, held = [], 0
    for pair in frozen:
        if pair.moment_id in held_out:
            held += 1
        elif pair.kind == preference_format.PREFERENCE:
            learnable.append(pair)
        else:
            skipped[pair.kind] += 1
    if held:  # a world without imported pairs says nothing of them
        skipped[HELD_OUT] = held
    return learnable, skipped


def wording_spec_build(choice: WordingChoice, *, job_folder_hint: str) -> dict[str, Any]:
    """The spec of a wording job: the preferences of the world's own preference version, each
    trained on the messages that world's version is served (its system prompt). Ties,
    both-bad picks and held-out imported pairs are skipped (`_learnable_pairs`) and counted
    under "skipped"."""
    world = choice.preference_version.world
    frozen = list(preference_pairs(version=choice.preference_version))
    # A world's version holds its own picks only (arena.services.freeze); a file that says
    # otherwise was not written by the freeze, and no other world's pick may reach training.
    strangers = sorted({pair.pack for pair in frozen} - {world.slug})
    if strangers:
        raise WordingCardError(
            f"{choice.preference_version.label} of {world.name} holds picks of other worlds "
            f"({', '.join(strangers)}): it cannot be trained on."
        )
    # Counted on the spec, so the job says how many of the version's picks it did not learn from.
    preferences, skipped = _learnable_pairs(frozen, world)
    groups = _hold_out_groups({pair.moment_id for pair in preferences})
    pairs = [
        {
            "dialogue": pair.dialogue,
            "chosen": pair.chosen,
            "rejected": pair.rejected,
            "reasons": list(pair.reasons),
            "call_id": groups[pair.moment_id],
        }
        for pair in preferences
    ]
    spec: dict[str, Any] = {
        "pack": world.slug,
        "version": choice.preference_version.number,
        "base": choice.base,
        "gpu": {"type": choice.pool.card_type, "count": choice.card_count},
        "epochs": choice.epochs,
        "system": world.agent_system_prompt,
        "pairs": pairs,
        "skipped": skipped,
        "seed": choice.seed,
        "models_dir": str(settings.MODELS_DIR),
        "output_dir": job_folder_hint,
        "base_allowlist": os.environ.get("LEVERS9_TRAIN_BASE_ALLOWLIST") or None,
    }
    if choice.method == RLHF:
        spec["reward_source"] = choice.reward_source
        if choice.reward_source == "outcomes":
            if choice.outcomes_world is None:
                raise WordingCardError("Outcome labels need a world with real calls.")
            spec["outcome_examples"] = _outcome_examples(choice.outcomes_world)
    if choice.max_steps:
        spec["max_steps"] = choice.max_steps
    if choice.min_pairs is not None:
        spec["min_pairs"] = choice.min_pairs
    return spec


def wording_choice_from(
    *,
    method: str,
    preference: PreferenceVersion | None,
    pool_name: str | None,
    parent: PolicyVersion | None,
    cards: Any = None,
    epochs: Any = None,
    seed: Any = None,
    base: str = "",
    reward_source: str = "",
    outcomes_pack: str = "",
    world: World | None = None,
) -> WordingChoice:
    """One card's choices as typed on the page or sent to the API; WordingCardError naming
    the field when one is missing or not a number.

    The version is made in `world` (the world in view, or the API's `pack`); none named, the
    parent's world, else the preference version's. The preference version must be that
    world's own, and the parent (the world's live version by default) one of its versions."""
    from policies.selectors import policy_live
    from policies.services import VersionWorldMismatch, version_in_world_check

    if preference is None:
        raise WordingCardError("Freeze the picks first: training reads only frozen versions.")
    enabled = GpuPool.objects.filter(enabled=True)
    # No pool named: the biggest enabled one (the GPU node where there is one, else the CPU).
    pool = (
        enabled.filter(name=pool_name).first()
        if pool_name
        else enabled.order_by("-card_count", "name").first()
    )
    if pool is None:
        names = ", ".join(enabled.order_by("name").values_list("name", flat=True)) or "none"
        raise WordingCardError(f"Choose an enabled pool (enabled: {names}).")
    try:
        card_count = int(cards or (1 if pool.is_cpu else pool.card_count))
        epochs_value = float(epochs or 1)
        seed_value = int(seed or 0)
    except (TypeError, ValueError) as error:
        raise WordingCardError("Cards, epochs and seed must be numbers.") from error
    if not 0 < epochs_value <= EPOCHS_MAX:
        raise WordingCardError(f"Epochs must be more than 0 and at most {EPOCHS_MAX}.")
    if not 0 <= seed_value <= SEED_MAX:
        raise WordingCardError(f"Seed must be a whole number from 0 to {SEED_MAX}.")
    if not 1 <= card_count <= pool.card_count:
        raise WordingCardError(
            f"Pool {pool.name} has {pool.card_count} card(s): ask for 1 to {pool.card_count}."
        )
    reward_source = reward_source or "picks"
    outcomes_world = None
    if reward_source == "outcomes":
        worlds = World.objects.filter(calls__isnull=False).distinct()
        outcomes_world = (
            worlds.filter(slug=outcomes_pack).first() if outcomes_pack else worlds.first()
        )
        if outcomes_world is None:
            raise WordingCardError(
                f"No world '{outcomes_pack}' with real calls: outcome labels come from one."
                if outcomes_pack
                else "Outcome labels need a world with real calls: import calls first."
            )
    if preference.world_id is None:
        raise WordingCardError(
            f"{preference.label} holds picks of several worlds and is never trained on: "
            "freeze in the world you train, and choose that world's version."
        )
    world = world or (parent.world if parent is not None else None) or preference.world
    if preference.world_id != world.pk:
        raise WordingCardError(
            f"preference_version: {preference.label} belongs to {preference.world.name}; "
            f"training in {world.name} reads only the versions frozen there. Freeze its picks "
            "and choose one of them."
        )
    try:
        version_in_world_check(version=parent, world=world, field="parent")
    except VersionWorldMismatch as error:
        raise WordingCardError(str(error)) from None
    return WordingChoice(
        method=method,
        preference_version=preference,
        pool=pool,
        card_count=card_count,
        base=(base or "").strip() or base_default(pool),
        parent=parent or policy_live(world=world),
        reward_source=reward_source,
        outcomes_world=outcomes_world,
        epochs=epochs_value,
        seed=seed_value,
    )


def wording_choice_check(choice: WordingChoice) -> None:
    """The card's refusals that need no spec (the method, enough frozen pairs): said before a
    long job asks to be confirmed, not after."""
    if choice.method not in METHODS:
        raise WordingCardError(f"Unknown method '{choice.method}': choose rlhf or dpo.")
    needed = choice.min_pairs if choice.min_pairs is not None else MIN_PAIRS[choice.method]
    if choice.method == RLHF and choice.reward_source == "outcomes" and choice.min_pairs is None:
        needed = 0  # the reward model learns from the calls' outcomes, not from picks
    if not needed:
        return
    version = choice.preference_version
    # Ties, both-bad picks and held-out pairs are frozen but not learned from (wording_spec_build
    # skips them), so they do not count toward the minimum.
    learnable_pairs, _skipped = _learnable_pairs(
        list(preference_pairs(version=version)), version.world
    )
    learnable = len(learnable_pairs)
    if learnable < needed:
        skipped = version.row_count - learnable
        also = (
            f" ({skipped} ties, both-bad picks or held-out pairs are not learned from)"
            if skipped
            else ""
        )
        raise WordingCardError(
            f"{METHODS[choice.method]} asks for {needed} frozen pairs with a preferred reply; "
            f"preference version v{version.number} has {learnable}{also}. "
            "Duel more and freeze again."
        )


def _skipped_said(spec: dict[str, Any]) -> str:
    """What the job's title says of the picks it does not learn from ("" when none)."""
    skipped = spec.get("skipped") or {}
    names = {preference_format.TIE: ("tie", "ties"), HELD_OUT: ("held out", "held out")}
    parts = [
        f"{count} {names.get(kind, ('both bad', 'both bad'))[count != 1]}"
        for kind, count in skipped.items()
        if count
    ]
    return f" · skipped {', '.join(parts)}" if parts else ""


def train_wording(*, choice: WordingChoice, started_by=None) -> Job:
    """Start the RLHF or DPO card. Checks the spec first; refuses with the reason."""
    wording_choice_check(choice)
    # Each version's merged weights get their own folder on the models volume.
    output = f"versions/{os.urandom(6).hex()}"
    spec = wording_spec_build(choice, job_folder_hint=output)
    try:
        parse_wording_spec(spec, trainer=choice.method)
    except ValueError as error:
        raise WordingCardError(str(error)) from error
    return training_run_start(
        # The version is made in its parent's world (wording_choice_from checked it).
        world=choice.parent.world,
        parent=choice.parent,
        preference_version=choice.preference_version.number,
        base_model=choice.base,
        kind="train",
        trainer=choice.method,
        spec=spec,
        pool=choice.pool,
        card_count=choice.card_count,
        title=f"{METHODS[choice.method]} from {choice.parent.label}" + _skipped_said(spec),
        started_by=started_by,
        finish_needs={"version": choice.method, "serve": True, "checkpoint": True},
        expected_seconds=wording_estimate(choice).high_seconds,
    )
