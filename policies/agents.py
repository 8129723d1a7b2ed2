"""How a version answers at a moment: the agent role.

Every version starts on the simulator: its move strategy picks the move for the state of the
call, and scripted wording says it. In a world with no simulator (a business's own, only
recorded calls) scripted lettings lines would be off topic, so there a simulator version
answers with the real agent's reply at the most similar moment of another of the world's
calls (arena.recorded_replies). "Runs on" moves a version to a model (the judge's, a vLLM
endpoint, OpenAI or Anthropic by name); a trained version answers from its own endpoint
while that endpoint serves. A released version answers nothing and is never asked.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from pathlib import Path

from django.conf import settings

from arena.agents import AgentCannotAnswer, AgentReply
from arena.conversation import moment_messages
from arena.models import Moment, Reply, Turn, World
from arena.recorded_replies import recorded_reply
from levers9.providers import (
    CallLimits,
    ModelTarget,
    Provider,
    ProviderError,
    SimulatorProvider,
    dialogue_dialect,
    dialogue_state_index,
    provider_for,
)
from policies.models import Endpoint, PolicyVersion, ReplyAuthor
from policies.services import replies_written
from policies.untrained_base import UntrainedBase
from trainers.moves.offline_outcome import outcome_choose_move
from trainers.moves.simulator import Persona

AGENT_MAX_TOKENS = 160


class VersionCannotAnswer(AgentCannotAnswer):
    """The version is released (or its provider is unavailable) and answers nothing."""


class VersionDidNotAnswer(VersionCannotAnswer):
    """The version was asked, and its endpoint gave no usable reply (the message says why)."""


def _dialect_of(moment: Moment) -> str:
    if moment.scenario_id:
        return moment.scenario.dialect
    return dialogue_dialect(moment.dialogue())


def moment_state_index(moment: Moment) -> int:
    """The simulator state of a moment: exact for simulated ones, read off a real dialogue."""
    if moment.simulator_state is not None:
        return moment.simulator_state
    return dialogue_state_index(moment.dialogue())


def trained_target(version: PolicyVersion, endpoint: Endpoint) -> ModelTarget:
    """Where a trained version's serving endpoint is reached."""
    if endpoint.kind == Endpoint.Kind.TRANSFORMERS:
        models_dir = Path(settings.MODELS_DIR)
        adapter = str(models_dir / version.lora_adapter) if version.lora_adapter else ""
        return ModelTarget(
            "transformers", model=str(models_dir / version.provider_model), lora_adapter=adapter
        )
    # The platform started this server itself: not an address a user typed.
    return ModelTarget("vllm", model=endpoint.served_model, base_url=endpoint.url, trusted=True)


def version_target(version: PolicyVersion) -> ModelTarget:
    """Where a model-backed (not trained, not simulated) version is reached."""
    if version.provider == PolicyVersion.Provider.VLLM:
        return ModelTarget(
            "vllm",
            model=version.provider_model,
            base_url=version.endpoint_url,
            lora_adapter=version.lora_adapter,
            api_key_env=version.api_key_env,
        )
    return ModelTarget(version.provider, model=version.provider_model)


def version_provider(version: PolicyVersion) -> tuple[Provider, Endpoint | None]:
    """The provider that answers for `version` now, and its endpoint if it has one."""
    if version.provider == PolicyVersion.Provider.SIMULATOR:
        return SimulatorProvider(version.move_strategy), None
    limits = CallLimits.from_environment()
    if version.is_trained:
        endpoint = version.endpoints.filter(state=Endpoint.State.SERVING).first()
        if endpoint is None:
            raise VersionCannotAnswer(f"{version.label} has no serving endpoint.")
        return provider_for(trained_target(version, endpoint), limits=limits), endpoint
    return provider_for(version_target(version), limits=limits), None


def _strategy_move(version: PolicyVersion, moment: Moment, dialogue: list[dict]) -> str | None:
    """The move a version's learned outcome strategy plays at this moment (None for the
    scripted baseline, whose words are simply the most similar moment's)."""
    strategy = version.move_strategy or {}
    if strategy.get("kind") != "outcome":
        return None
    agent_turn = sum(turn.get("speaker") == "agent" for turn in dialogue)
    previous = ""
    if agent_turn and moment.call_id:
        previous = (
            Turn.objects.filter(call_id=moment.call_id, index__lt=moment.turn_index)
            .filter(speaker="agent")
            .order_by("-index")
            .values_list("move_label", flat=True)
            .first()
        ) or ""
    return outcome_choose_move(strategy, agent_turn=agent_turn, previous=previous)


def _recorded_reply(version: PolicyVersion, moment: Moment) -> AgentReply:
    """A simulator version in a world of recorded calls: another call's real reply — for a
    learned strategy, the most similar one making the move the strategy chooses."""
    dialogue = moment.dialogue()
    found = recorded_reply(
        world=moment.world,
        dialogue=dialogue,
        exclude_call_id=moment.call_id,
        prefer_move=_strategy_move(version, moment, dialogue),
    )
    if found is None:
        raise VersionCannotAnswer(
            f"{version.label} answers from {moment.world.name}'s other recorded calls, "
            "and there are none yet: import calls."
        )
    return AgentReply(text=found.text, move=found.move)


def untrained_base_target(version: PolicyVersion, endpoint: Endpoint) -> ModelTarget:
    """Where a trained wording version's base answers with no adapter: the path
    `trained_target` takes, less the adapter. An endpoint that serves an adapter serves its base
    too (in-process: the same weights folder; vLLM: the base under "<name>-base"). One that
    serves merged weights has no base inside: the base is read in-process from its folder
    (trainers.bases), on a CPU endpoint only — a GPU base does not fit beside the dashboard."""
    if endpoint.kind == Endpoint.Kind.TRANSFORMERS and version.lora_adapter:
        return dataclasses.replace(trained_target(version, endpoint), lora_adapter="")
    if endpoint.kind != Endpoint.Kind.TRANSFORMERS and version.lora_adapter:
        return ModelTarget(
            "vllm", model=f"{endpoint.served_model}-base", base_url=endpoint.url, trusted=True
        )
    if endpoint.kind == Endpoint.Kind.VLLM:
        raise VersionCannotAnswer(
            f"{version.label} is served as merged weights on GPUs: its base untrained "
            f"({version.base_model}) is not served beside it."
        )
    from trainers.bases import BaseNotFoundError, resolve_base

    if not version.base_model:
        raise VersionCannotAnswer(f"{version.label} names no base to answer untrained.")
    try:
        folder = resolve_base(version.base_model, models_dir=settings.MODELS_DIR)
    except (BaseNotFoundError, ValueError) as error:
        raise VersionCannotAnswer(f"{version.label}'s base untrained: {error}") from error
    return ModelTarget("transformers", model=str(folder), lora_adapter="")


def untrained_base_reply(base: UntrainedBase, moment: Moment) -> AgentReply:
    """What a trained version's base says at `moment` with no adapter: asked while the
    version answers, with the same conversation and decoding as `version_reply`."""
    version = base.version
    version.status = (
        PolicyVersion.objects.filter(pk=version.pk).values_list("status", flat=True).first()
    )
    if not version.can_answer or not version.is_trained:
        raise VersionCannotAnswer(
            f"{base.label} answers only beside a trained version that answers; "
            f"{version.label} does not."
        )
    endpoint = version.endpoints.filter(state=Endpoint.State.SERVING).first()
    if endpoint is None:
        raise VersionCannotAnswer(f"{version.label} has no serving endpoint.")
    target = untrained_base_target(version, endpoint)
    provider = provider_for(target, limits=CallLimits.from_environment())
    # The base's calls are not the endpoint's: its latency and errors stay off the version.
    return _model_reply(base.label, provider, None, moment)


def agent_reply(author: PolicyVersion | UntrainedBase, moment: Moment) -> AgentReply:
    """A version's reply, or its untrained base's (evaluation asks both through this)."""
    if isinstance(author, UntrainedBase):
        return untrained_base_reply(author, moment)
    return version_reply(author, moment)


def _model_reply(
    label: str, provider: Provider, endpoint: Endpoint | None, moment: Moment
) -> AgentReply:
    """A model's reply at `moment`: the world's conversation, the agent's token budget,
    greedy as every provider decodes; each call recorded on the endpoint, if any."""
    usable, reason = provider.available()
    if not usable:
        raise VersionCannotAnswer(f"{label} cannot answer here: {reason}.")
    started = time.monotonic()
    try:
        text = provider.reply(moment_messages(moment), max_tokens=AGENT_MAX_TOKENS)
    except ProviderError as error:
        if endpoint is not None:
            from policies.endpoints import endpoint_record_call

            endpoint_record_call(endpoint_id=endpoint.pk, latency_ms=None)
        raise VersionDidNotAnswer(f"{label}: {error}") from error
    if endpoint is not None:
        from policies.endpoints import endpoint_record_call

        endpoint_record_call(
            endpoint_id=endpoint.pk, latency_ms=(time.monotonic() - started) * 1000
        )
    # A model's words carry no labelled move: the move is what a reviewer or classifier says.
    return AgentReply(text=text, move="")


def version_reply(version: PolicyVersion, moment: Moment) -> AgentReply:
    """What `version` says at `moment`, or VersionCannotAnswer."""
    if version.provider != PolicyVersion.Provider.SIMULATOR:
        # The page may hold a copy from before a release: ask the registry, not the copy,
        # before calling anything remote.
        version.status = (
            PolicyVersion.objects.filter(pk=version.pk).values_list("status", flat=True).first()
        )
    if not version.can_answer:
        raise VersionCannotAnswer(f"{version.label} is released and answers nothing.")
    provider, endpoint = version_provider(version)
    if isinstance(provider, SimulatorProvider) and not moment.world.has_simulator:
        return _recorded_reply(version, moment)
    if isinstance(provider, SimulatorProvider):
        scenario = moment.scenario.slug if moment.scenario_id else None
        persona = Persona.from_dict(moment.scenario.persona_dict()) if moment.scenario_id else None
        text, move = provider.answer(
            state=moment_state_index(moment),
            dialect=_dialect_of(moment),
            scenario=scenario,
            persona=persona,
        )
        return AgentReply(text=text, move=move)
    return _model_reply(version.label, provider, endpoint, moment)


class RegistryAgents:
    """The arena's agent directory (arena.agents), filled from the policy registry: each
    world's own versions."""

    def live(self, *, world: World) -> PolicyVersion | None:
        from policies.live import live_version

        return live_version(world=world)

    def answering(self, *, world: World) -> list[PolicyVersion]:
        return list(
            PolicyVersion.objects.filter(
                world=world, status=PolicyVersion.Status.ANSWERING
            ).order_by("-number")
        )

    def numbered(self, numbers: Sequence[int], *, world: World) -> list[PolicyVersion]:
        return list(
            PolicyVersion.objects.filter(world=world, number__in=numbers).order_by("number")
        )

    def reply(self, version: PolicyVersion, moment: Moment) -> AgentReply:
        return version_reply(version, moment)

    def replies_written(self, written: Sequence[tuple[Reply, PolicyVersion]]) -> None:
        replies_written(written)

    def reply_authors(self, reply_ids: Sequence[int]) -> dict[int, PolicyVersion | UntrainedBase]:
        # A base's reply is named after the base, never the version trained on it.
        return {
            author.reply_id: UntrainedBase(author.version)
            if author.untrained_base
            else author.version
            for author in ReplyAuthor.objects.filter(reply_id__in=reply_ids).select_related(
                "version"
            )
        }
