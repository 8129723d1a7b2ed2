"""Issue 44: every wording version is measured against its own base untrained — the same base
with no adapter, asked the same way — on the world's held-out calls, by the world's judge with
the on-topic guard on. The outcome is written into the version's record; a version not shown
to beat its base beyond the interval is marked "did not learn", whatever its own reward model
says, and a win that is only length, repetition or drift off topic shows as such.

The models are stubs here (the path to them is the point): a provider per target, so the
trained weights and the untrained base answer as each test needs, and a judge each test
chooses, measured above chance unless a test says otherwise."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from evaluation.models import Evaluation
from trainers.judge.rubric import Judgement
from trainers.judge.topic_guard import ON_TOPIC

BASE = "levers9/tiny-qwen3"
BASE_REPLY = "Hello there, thank you for calling about the flat."


@pytest.fixture
def models(settings, tmp_path):
    settings.MODELS_DIR = tmp_path / "models"
    base = settings.MODELS_DIR / "bases" / BASE.replace("/", "--")
    base.mkdir(parents=True)
    (base / "config.json").write_text(json.dumps({"model_type": "qwen3"}))
    return settings.MODELS_DIR


@pytest.fixture
def trained(lettings, baseline, models, in_workspace):
    """v2 · dpo benchmark: merged weights served in-process, answering."""
    from policies.models import Endpoint, PolicyVersion
    from policies.services import version_register

    weights = models / in_workspace.schema_name / "v2"
    weights.mkdir(parents=True)
    (weights / "config.json").write_text(json.dumps({"model_type": "qwen3"}))
    version = version_register(
        world=lettings,
        name="dpo benchmark",
        parent=baseline,
        move_strategy=baseline.move_strategy,
        learned_from={
            "algorithm": "dpo",
            "preference_version": 1,
            "base": BASE,
            "did_not_learn": [],
            "metrics": {"policy_gain_over_base_ci": [0.01, 0.09]},
        },
        provider=PolicyVersion.Provider.TRAINED,
        provider_model=f"{in_workspace.schema_name}/v2",
    )
    Endpoint.objects.create(
        version=version,
        kind=Endpoint.Kind.TRANSFORMERS,
        state=Endpoint.State.SERVING,
        pool_name="cpu",
        card_type="cpu",
    )
    PolicyVersion.objects.filter(pk=version.pk).update(status=PolicyVersion.Status.ANSWERING)
    version.refresh_from_db()
    return version


class _Stub:
    def __init__(self, answer) -> None:
        self.answer = answer

    def available(self):
        return True, ""

    def reply(self, messages, *, max_tokens):
        return self.answer(messages)


@pytest.fixture
def speaking(monkeypatch, models):
    """`speaking(trained=fn)`: the trained weights answer fn(base's reply); the base answers
    BASE_REPLY. Each target is told apart by its folder, as the providers are."""
    from policies import agents

    monkeypatch.setenv("LEVERS9_PROVIDER_CONCURRENCY", "1")
    asked: list[str] = []

    def install(*, trained=lambda base_reply: base_reply):
        def provider_for(target, *, limits=None):
            assert target.provider == "transformers"
            assert target.lora_adapter == ""
            if "bases" in target.model:
                asked.append("base")
                return _Stub(lambda messages: BASE_REPLY)
            asked.append("trained")
            return _Stub(lambda messages: trained(BASE_REPLY))

        monkeypatch.setattr(agents, "provider_for", provider_for)
        return asked

    return install


class _Judge:
    """A judge that scores with `total(reply)` and caps (as the guard does: its sentence in
    the reasons) where `off_topic(reply)`."""

    model_name = "test judge"
    quick = True

    def __init__(self, total, off_topic=lambda reply: False) -> None:
        self.total, self.off_topic = total, off_topic

    def score(self, context, reply):
        total = self.total(reply)
        reasons = {ON_TOPIC: "Off-topic: another business's line."} if self.off_topic(reply) else {}
        if reasons:
            total *= 0.05
        return Judgement(
            scores={"respect": total}, total=total, judge_model=self.model_name, reasons=reasons
        )


@pytest.fixture
def judged(monkeypatch):
    """`judged(judge, measured=True)`: the world's judge for the checkpoint, measured above
    chance on 200 held-out pairs (or not measured at all)."""
    from evaluation import replay
    from evaluation.verdicts import agreement_figures

    def install(judge, *, measured: bool = True):
        monkeypatch.setattr(replay, "judge_for_world", lambda world: judge)
        figures = agreement_figures(
            {"pairs": 200, "accuracy": 0.7, "accuracy_ci": [0.63, 0.76]}, None
        )
        agreement = {
            "judge_model": judge.model_name,
            "measured": measured,
            "measured_by": "a test" if measured else None,
            **(figures if measured else {}),
        }
        monkeypatch.setattr(replay, "judge_agreement", lambda **kwargs: agreement)

    return install


def _against_base(version, django_capture_on_commit_callbacks) -> Evaluation:
    """Start the version's checkpoints as a finished job would, and run the against-base one."""
    from evaluation.replay import evaluation_run
    from evaluation.services import version_checkpoint

    with django_capture_on_commit_callbacks(execute=False):
        version_checkpoint(SimpleNamespace(pk=0, started_by=None), version)
    evaluation = Evaluation.objects.get(candidate=version, purpose=Evaluation.Purpose.AGAINST_BASE)
    evaluation_run(evaluation=evaluation)
    evaluation.refresh_from_db()
    return evaluation


def _words(text: str) -> float:
    return min(1.0, len(text.split()) / 60)


def test_a_wording_version_is_checkpointed_against_its_base_on_its_parent_checkpoints_calls(
    trained, baseline, pushy, django_capture_on_commit_callbacks
):
    from evaluation.services import version_checkpoint

    with django_capture_on_commit_callbacks(execute=False):
        version_checkpoint(SimpleNamespace(pk=0, started_by=None), trained)
        version_checkpoint(SimpleNamespace(pk=0, started_by=None), pushy)
    parent = Evaluation.objects.get(candidate=trained, purpose=Evaluation.Purpose.CHECKPOINT)
    against = Evaluation.objects.get(candidate=trained, purpose=Evaluation.Purpose.AGAINST_BASE)
    assert parent.baseline == baseline
    assert against.baseline == trained  # its own base answers on that side
    assert against.call_set_id == parent.call_set_id  # the same held-out moments
    assert against.title == f"{trained.label} vs {BASE} untrained (v2's base, no adapter)"
    assert against.job.title.startswith(f"Checkpoint {trained.label} vs {BASE} untrained")
    # A move strategy has no base of its own.
    assert not Evaluation.objects.filter(candidate=pushy, purpose=Evaluation.Purpose.AGAINST_BASE)


def test_a_version_that_moved_nothing_is_marked_did_not_learn_once(
    trained, speaking, judged, django_capture_on_commit_callbacks
):
    from evaluation.services import evaluation_job_finish
    from policies.agents import RegistryAgents
    from policies.models import ReplyAuthor

    asked = speaking(trained=lambda base_reply: base_reply)  # the adapter changed nothing
    judged(_Judge(_words))
    evaluation = _against_base(trained, django_capture_on_commit_callbacks)
    assert evaluation.state == Evaluation.State.DONE
    assert {"base", "trained"} <= set(asked)
    summary = evaluation.summary
    assert summary["win_rate"] == 0.5
    assert summary["ties"] == summary["compared"] > 0
    assert "simulator" not in summary  # the same moves on both sides: the judge decides

    trained.refresh_from_db()
    against = trained.learned.against_base
    assert against["evaluation"] == evaluation.pk
    assert (against["win_rate"], against["verdict"], against["beats_base"]) == (0.5, "even", False)
    assert against["calls"] == summary["calls"] == 40
    assert against["judge"] == "test judge"
    expected = (
        f"Against its base untrained ({BASE}, no adapter), the world's judge prefers it 0.50 "
        "[0.50, 0.50] of the time on 40 held-out calls: no better than the base."
    )
    assert trained.did_not_learn == [expected]

    # A redelivered finish writes it once.
    evaluation_job_finish(job=evaluation.job, result=summary)
    trained.refresh_from_db()
    assert trained.did_not_learn == [expected]

    # The base's replies are kept as its base's, never as the trained version's words.
    base_side = evaluation.answers.filter(side="baseline").values_list("reply_id", flat=True)
    authors = ReplyAuthor.objects.filter(reply_id__in=list(base_side))
    assert authors.count() == summary["moments"]
    assert all(author.untrained_base for author in authors)
    labels = {a.label for a in RegistryAgents().reply_authors(list(base_side)).values()}
    assert labels == {f"{BASE} untrained (v2's base, no adapter)"}


def test_a_version_that_beats_its_base_carries_no_reason(
    trained, speaking, judged, django_capture_on_commit_callbacks
):
    speaking(trained=lambda base_reply: "Shall we book you a viewing of the flat tomorrow?")
    judged(_Judge(lambda reply: 0.9 if "viewing" in reply else 0.3))
    _against_base(trained, django_capture_on_commit_callbacks)
    trained.refresh_from_db()
    against = trained.learned.against_base
    assert (against["verdict"], against["beats_base"]) == ("won", True)
    assert against["interval"][0] > 0.5
    assert against["reasons"] == []
    assert against["notes"] == []
    assert trained.did_not_learn == []


def test_a_judge_with_no_verdict_leaves_the_version_unproven(
    trained, speaking, judged, django_capture_on_commit_callbacks
):
    speaking(trained=lambda base_reply: "Shall we book you a viewing of the flat tomorrow?")
    judged(_Judge(lambda reply: 0.9 if "viewing" in reply else 0.3), measured=False)
    _against_base(trained, django_capture_on_commit_callbacks)
    trained.refresh_from_db()
    (reason,) = trained.did_not_learn
    assert reason.startswith(f"Against its base untrained ({BASE}, no adapter)")
    assert "no verdict" in reason
    assert reason.endswith("not shown to beat its base.")


def test_a_length_only_improvement_is_shown_as_such(
    trained, speaking, judged, django_capture_on_commit_callbacks, owner_client
):
    padding = " And we are always here for you, always here for you." * 3
    speaking(trained=lambda base_reply: base_reply + padding)
    judged(_Judge(_words))  # a judge that likes length
    evaluation = _against_base(trained, django_capture_on_commit_callbacks)
    trained.refresh_from_db()
    against = trained.learned.against_base
    assert against["beats_base"]  # it "wins" ...
    habits = against["replies"]
    assert habits["version"]["mean_words"] > 3 * habits["base"]["mean_words"]
    assert (habits["version"]["repeat_share"], habits["base"]["repeat_share"]) == (1.0, 0.0)
    # ... and says what the win is made of.
    ratio = habits["version"]["mean_words"] / habits["base"]["mean_words"]
    assert against["notes"] == [
        f"its replies are {ratio:.1f}× the base's length "
        f"({habits['version']['mean_words']:.0f} words against "
        f"{habits['base']['mean_words']:.0f})",
        "100% of its replies repeat a 3-word phrase within themselves, against 0% of the base's",
    ]
    html = owner_client.get(f"/evaluate/{evaluation.pk}/").content.decode()
    assert f"Its replies are {ratio:.1f}× the base&#x27;s length" in html
    assert 'data-figure="reply-habits"' in html


def test_a_version_the_guard_caps_more_often_than_its_base_is_marked(
    trained, speaking, judged, django_capture_on_commit_callbacks
):
    speaking(trained=lambda base_reply: "Buy bitcoin today, the price is going up, trust me now.")
    judged(_Judge(lambda reply: 0.95, off_topic=lambda reply: "bitcoin" in reply))
    evaluation = _against_base(trained, django_capture_on_commit_callbacks)
    trained.refresh_from_db()
    moments = evaluation.summary["moments"]
    assert evaluation.summary["candidate"]["replies"]["capped_share"] == 1.0
    assert evaluation.summary["baseline"]["replies"]["capped_share"] == 0.0
    assert trained.did_not_learn[-1] == (
        f"The on-topic guard capped 100% of its replies ({moments} of {moments}) against 0% of "
        f"its base's (0 of {moments}): it drifted off topic."
    )


def test_the_base_is_the_trained_path_without_its_adapter(trained, models, in_workspace):
    """The same target `trained_target` builds, less the adapter: the base folder behind
    merged weights, the same weights folder with no adapter, vLLM's "-base" model."""
    from policies.agents import VersionCannotAnswer, trained_target, untrained_base_target
    from policies.models import Endpoint

    endpoint = trained.endpoints.get()
    target = untrained_base_target(trained, endpoint)
    assert (target.provider, target.lora_adapter) == ("transformers", "")
    assert target.model == str(models / "bases" / BASE.replace("/", "--"))

    trained.lora_adapter = f"{in_workspace.schema_name}/v2-adapter"
    with_adapter = trained_target(trained, endpoint)
    assert with_adapter.lora_adapter
    assert untrained_base_target(trained, endpoint) == with_adapter.__class__(
        "transformers", model=with_adapter.model, lora_adapter=""
    )
    endpoint.kind, endpoint.served_model, endpoint.url = (
        Endpoint.Kind.VLLM,
        "v2",
        "http://10.0.0.5:8000/v1",
    )
    vllm_base = untrained_base_target(trained, endpoint)
    assert (vllm_base.model, vllm_base.base_url) == ("v2-base", "http://10.0.0.5:8000/v1")
    trained.lora_adapter = ""
    with pytest.raises(VersionCannotAnswer, match="not served beside it"):
        untrained_base_target(trained, endpoint)
