"""Issue 44, done when: a version that moved nothing is marked. The real path, no stub: a tiny
base on the models volume, a "trained" version whose merged weights are that base unchanged,
served in-process; its checkpoint against its base untrained asks the base from its own folder
(trainers.bases) with no adapter, gets the same greedy words at every held-out moment, and the
version is marked "did not learn"."""

from __future__ import annotations

import shutil
from types import SimpleNamespace

import pytest

from evaluation.models import Evaluation

pytestmark = pytest.mark.slow


def test_a_version_whose_weights_are_its_base_is_marked_did_not_learn(
    lettings, baseline, settings, tmp_path, monkeypatch, django_capture_on_commit_callbacks
):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from evaluation import replay
    from evaluation.services import version_checkpoint
    from evaluation.verdicts import agreement_figures
    from levers9.providers import local_models_forget
    from policies.models import Endpoint, PolicyVersion
    from policies.services import version_register
    from trainers.bases import TINY_BASE, base_dir, tiny_base

    settings.MODELS_DIR = tmp_path / "models"
    base = base_dir(TINY_BASE, settings.MODELS_DIR)
    model, tokenizer = tiny_base(base, texts=["Good morning, is the flat still free?"])
    # Untrained, it only ever says blank lines: keep it to tokens that show on a page.
    model.generation_config.suppress_tokens = [
        i for i in range(len(tokenizer)) if not tokenizer.decode([i]).strip()
    ]
    model.generation_config.save_pretrained(base)
    shutil.copytree(base, settings.MODELS_DIR / "acme" / "v2")  # merged weights: the base
    version = version_register(
        world=lettings,
        name="dpo benchmark",
        parent=baseline,
        move_strategy=baseline.move_strategy,
        learned_from={"algorithm": "dpo", "preference_version": 1, "base": TINY_BASE},
        provider=PolicyVersion.Provider.TRAINED,
        provider_model="acme/v2",
    )
    Endpoint.objects.create(
        version=version,
        kind=Endpoint.Kind.TRANSFORMERS,
        state=Endpoint.State.SERVING,
        pool_name="cpu",
        card_type="cpu",
    )
    PolicyVersion.objects.filter(pk=version.pk).update(status=PolicyVersion.Status.ANSWERING)
    monkeypatch.setenv("LEVERS9_PROVIDER_CONCURRENCY", "1")
    # A few tokens a reply: the path is the point, and 320 full replies take minutes on 2 cores.
    from policies import agents

    monkeypatch.setattr(agents, "AGENT_MAX_TOKENS", 6)
    # The world's rubric judge (guard on), as if measured above chance: the verdict stands.
    measured = agreement_figures({"pairs": 200, "accuracy": 0.7, "accuracy_ci": [0.63, 0.76]}, None)
    monkeypatch.setattr(
        replay,
        "judge_agreement",
        lambda **kwargs: {"measured": True, "measured_by": "a test", **measured},
    )

    with django_capture_on_commit_callbacks(execute=False):
        version_checkpoint(SimpleNamespace(pk=0, started_by=None), version)
    evaluation = Evaluation.objects.get(candidate=version, purpose=Evaluation.Purpose.AGAINST_BASE)
    try:
        replay.evaluation_run(evaluation=evaluation)
    finally:
        local_models_forget()
    evaluation.refresh_from_db()
    summary = evaluation.summary
    assert summary["compared"] == summary["moments"] > 0
    assert summary["ties"] == summary["compared"]  # the same words at every moment
    sides = [
        list(
            evaluation.answers.filter(side=side)
            .order_by("held_out_moment")
            .values_list("reply__text", flat=True)
        )
        for side in ("candidate", "baseline")
    ]
    assert sides[0] == sides[1]
    assert all(sides[0])
    version.refresh_from_db()
    assert version.did_not_learn == [
        f"Against its base untrained ({TINY_BASE}, no adapter), the world's judge prefers it "
        f"0.50 [0.50, 0.50] of the time on {summary['calls']} held-out calls: no better than "
        "the base."
    ]
