"""The learned scorer: a world's judge reads replies with a base (features cached by content),
keeps the words beside the base only where cross-validation on the training part says they
help, and is measured on held-out rows with the words alone and the base alone beside it."""

from __future__ import annotations

import numpy as np
import pytest

from trainers.bases import TINY_BASE, base_dir, tiny_base
from trainers.judge.fit import FittedJudgeModel, JudgeFitSpec, fit
from trainers.judge.fitted_judge import FittedJudge, outcome_rows, pair_row
from trainers.judge.learned import BASE, MIXED, WORDS, fit_total, fit_won
from trainers.judge.rubric import DIMENSIONS
from trainers.reading.base_features import BaseReader, ReadStats

GOOD, POOR = "zorbl", "quaxen"


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("models")
    tiny_base(base_dir(TINY_BASE, folder), texts=[GOOD, POOR, "the flat viewing deposit"])
    return folder


def _pairs(count: int) -> list[dict]:
    rng = np.random.default_rng(0)
    topics = ["the flat", "a viewing", "the deposit", "your budget", "the move", "the area"]
    rows = []
    for index in range(count):
        topic = rng.choice(topics)
        context = [{"speaker": "customer", "text": f"Call {index}: I wanted to ask about {topic}."}]
        rows.append(
            pair_row(
                group=f"call-{index}",
                context=context,
                chosen=f"About {topic}: {GOOD} is what I would suggest.",
                rejected=f"About {topic}: {POOR} is what I would suggest.",
            )
        )
    return rows


def _calls(count: int) -> list[dict]:
    calls = []
    for index in range(count):
        won = index % 2 == 0
        word = GOOD if won else POOR
        turns = []
        for step in range(3):
            turns.append({"speaker": "customer", "text": f"Question {step} about the flat?"})
            turns.append({"speaker": "agent", "text": f"Step {step}: {word} for the flat."})
        calls.append({"id": f"call-{index}", "outcome": "won" if won else "lost", "turns": turns})
    return calls


def _spec(models_dir, features_dir, pairs, outcomes=(), overrides=()) -> JudgeFitSpec:
    return JudgeFitSpec(
        dimensions=list(DIMENSIONS),
        pairs=pairs,
        overrides=list(overrides),
        outcomes=list(outcomes),
        seed=1,
        base=TINY_BASE,
        models_dir=str(models_dir),
        features_dir=str(features_dir),
    )


def test_it_reads_each_text_once_and_gives_the_same_features_from_the_cache(models_dir, tmp_path):
    reader = BaseReader(TINY_BASE, models_dir=models_dir, features_dir=tmp_path)
    items = [([{"speaker": "customer", "text": "Hello?"}], f"Reply {i} {GOOD}") for i in range(5)]
    first_stats, second_stats = ReadStats(), ReadStats()
    first = reader.features([*items, items[0]], stats=first_stats)
    assert first_stats.read == 5  # the repeated item is read once
    fresh = BaseReader(TINY_BASE, models_dir=models_dir, features_dir=tmp_path)
    second = fresh.features(items, stats=second_stats)
    assert (second_stats.read, second_stats.cached) == (0, 5)
    assert fresh._model is None  # all from the cache: the base was never loaded
    np.testing.assert_allclose(second, first[:5])
    np.testing.assert_allclose(first[5], first[0])
    assert first.shape == (6, 64)


def test_a_fit_with_a_base_reports_its_choice_and_measures_all_three_on_held_out_rows(
    models_dir, tmp_path
):
    spec = _spec(models_dir, tmp_path / "features", _pairs(160), outcome_rows(_calls(40)))
    steps = []
    model, report = fit(spec, lambda step, total, **metrics: steps.append((step, metrics)))
    reading = [step for step, metrics in steps if metrics.get("stage", "").startswith("reading")]
    assert len(reading) >= 2  # the bar moves while the base reads (a block at a time)
    assert 15 < reading[0] < reading[-1] == 85
    scorer = report["scorer"]
    assert scorer["base"] == TINY_BASE
    assert scorer["total"] in (BASE, MIXED, WORDS)
    assert scorer["won"] in (BASE, MIXED, WORDS)
    assert set(scorer["chosen_by"]["total"]["out_of_fold_accuracy"]) == {BASE, MIXED, WORDS}
    assert scorer["features"]["read"] > 0
    for who in ("fitted", "words", "base", "rubric"):
        assert report["pairs"][who]["pairs"] == report["held_out"]["pairs"] > 0
        assert who == "rubric" or report["outcomes"][who]["calls"] > 0
    # The words alone separate these pairs; whatever the fit kept does too.
    assert report["pairs"]["fitted"]["accuracy"] > 0.9

    model.save(tmp_path / "judge")
    loaded = FittedJudgeModel.load(tmp_path / "judge")
    assert loaded.learned.kinds() == model.learned.kinds()
    np.testing.assert_allclose(loaded.learned.total.weights, model.learned.total.weights)


def test_a_version_without_its_base_scores_with_the_words_and_says_so(models_dir, tmp_path):
    spec = _spec(models_dir, tmp_path / "features", _pairs(120))
    model, _report = fit(spec)
    model.learned.total.kind, model.learned.total.mix = BASE, [0.0, 1.0, 0.0]
    model.save(tmp_path / "judge")
    reader = BaseReader(TINY_BASE, models_dir=models_dir, features_dir=tmp_path / "features")
    with_base = FittedJudge.load(tmp_path / "judge", model_name="v1", reader_for=lambda b: reader)
    without = FittedJudge.load(tmp_path / "judge", model_name="v1", reader_for=lambda b: None)
    assert with_base.model_name == "v1"
    assert with_base.scorer == f"base ({TINY_BASE})"
    assert without.model_name.startswith("v1 (words alone")
    assert without.scorer == "words"
    items = [(row["context"], row["chosen"]) for row in spec.pairs[:4]]
    base_totals = [r["total"] for r in with_base.score_many(items, digits=None)]
    word_totals = [r["total"] for r in without.score_many(items, digits=None)]
    assert base_totals != word_totals


def test_overrides_keep_the_words_in_the_total(models_dir, tmp_path):
    override = {
        "context": [{"speaker": "customer", "text": "Hi"}],
        "reply": f"{GOOD} indeed",
        "scores": {"progress": 0.9},
        "total": 0.9,
        "rubric": [0.5] * (len(DIMENSIONS) + 1),
    }
    _model, report = fit(_spec(models_dir, tmp_path / "f", _pairs(120), overrides=[override]))
    assert report["scorer"]["total"] in (MIXED, WORDS)


# --- the choice, on features made to carry the signal or not ------------------------------


def _signal(count: int, *, in_base: bool, seed: int = 0):
    """Pairs whose chosen side differs from the rejected one along a direction of the base's
    features (in_base) or nowhere the base sees (the words' margins carry it instead)."""
    rng = np.random.default_rng(seed)
    chosen, rejected = rng.normal(size=(count, 8)), rng.normal(size=(count, 8))
    if in_base:
        chosen[:, 0] += 1.5
    words = rng.normal(size=count) + (0.0 if in_base else 2.0)
    return chosen, rejected, [f"g{i}" for i in range(count)], words


def _words(margins):
    return lambda train, held: margins[held]


@pytest.mark.parametrize(("in_base", "expected"), [(True, BASE), (False, WORDS)])
def test_the_total_keeps_the_part_that_carries_the_signal(in_base, expected):
    chosen, rejected, groups, words = _signal(400, in_base=in_base)
    head = fit_total(
        chosen, rejected, groups, _words(words), keep_words=False, grid=(0.1, 1.0), seed=0
    )
    assert head.kind in (expected, MIXED)
    scores = head.chosen_by["out_of_fold_accuracy"]
    assert scores[expected] > scores[WORDS if expected == BASE else BASE] + 0.1


def test_the_won_head_keeps_the_base_when_only_the_base_knows_the_outcome():
    rng = np.random.default_rng(3)
    calls = np.repeat(np.arange(120), 3)
    won = calls % 2 == 0
    features = rng.normal(size=(len(calls), 6))
    features[:, 1] += np.where(won, 1.0, -1.0)
    words = rng.normal(size=len(calls))
    head = fit_won(features, won, [f"c{c}" for c in calls], _words(words), grid=(0.1, 1.0), seed=0)
    assert head.kind in (BASE, MIXED)
    scores = head.chosen_by["out_of_fold_auc_by_call"]
    assert scores[BASE] > 0.9 > 0.7 > scores[WORDS]


def test_the_won_heads_choice_ranks_calls_within_a_fold_only():
    """Out-of-fold scores carry each fold's own lean (a head fitted with fewer won calls
    outside the fold leans lower): ranking calls across folds measures that lean, not the
    head. A head that ranks nothing within its folds is at chance, however its folds lean."""
    from trainers.judge.learned import _auc_by_call

    folds = np.repeat(np.arange(4), 10)
    won = np.zeros(40, dtype=bool)
    for fold, share in enumerate((2, 4, 6, 8)):  # more won calls in the later folds
        won[fold * 10 : fold * 10 + share] = True
    leaning = -folds.astype(float)  # the later folds' heads lean lower: no ranking inside
    groups = [f"c{index}" for index in range(40)]
    assert _auc_by_call(leaning, won, groups, folds) == pytest.approx(0.5)
    assert _auc_by_call(leaning, won, groups, np.zeros(40)) < 0.3  # pooled: far below chance
    ranking = leaning + 0.5 * won  # and one that does rank inside each fold
    assert _auc_by_call(ranking, won, groups, folds) == pytest.approx(1.0)


def test_the_mix_learns_from_ranking_within_folds_not_from_their_lean():
    """Each fold's out-of-fold logits lean against its share of won calls; a mix fitted
    across folds on them learned weights that rank turns backwards."""
    from trainers.judge.learned import _mix_fit, _without_fold_lean

    rng = np.random.default_rng(0)
    folds = np.repeat(np.arange(5), 80)
    won = rng.random(400) < np.repeat([0.2, 0.35, 0.5, 0.65, 0.8], 80)
    signal = 0.3 * won + rng.normal(scale=0.3, size=400)  # ranks turns within a fold
    lean = -3.0 * np.repeat([0.2, 0.35, 0.5, 0.65, 0.8], 80)  # and leans against the labels
    columns = np.column_stack([signal + lean, rng.normal(size=400)])
    assert _mix_fit(columns, won.astype(float), intercept=True)[0] < 0  # learned backwards
    steady = _without_fold_lean(columns, folds)
    for fold in range(5):
        inside = folds == fold
        np.testing.assert_allclose(steady[inside].mean(axis=0), columns.mean(axis=0))
        np.testing.assert_allclose(
            np.diff(steady[inside], axis=0), np.diff(columns[inside], axis=0)
        )
    assert _mix_fit(steady, won.astype(float), intercept=True)[0] > 0


def test_the_features_read_without_a_mask_are_the_ones_a_masked_pass_gives(models_dir):
    """last_token_features pads after each row's end and passes no mask: a causal model's
    states at real tokens never see the pads."""
    import torch

    from trainers.bases import inference_precision, load_base
    from trainers.wording.reward_probe import last_token_features

    model, tokenizer = load_base(TINY_BASE, models_dir=models_dir, head="reward")
    rows = [tokenizer(text)["input_ids"] for text in ("a b", f"{GOOD} the flat is", "hi")]
    read = last_token_features(model, rows, pad_token_id=tokenizer.pad_token_id, batch_size=3)
    for index, row in enumerate(rows):
        with torch.no_grad(), inference_precision(model):  # the precision the read runs in
            alone = model.base_model(input_ids=torch.tensor([row])).last_hidden_state[0, -1]
        np.testing.assert_allclose(read.features[index], alone.float().numpy(), atol=1e-5)


def test_a_base_that_is_not_on_the_machine_leaves_a_judge_of_words_that_says_why(tmp_path):
    spec = _spec(tmp_path / "no-models", tmp_path / "features", _pairs(80))
    model, report = fit(spec)
    assert model.learned is None
    assert model.base_needed() is None
    assert report["scorer"]["base"] is None
    assert "is not on this machine" in report["scorer"]["base_missing"]
    assert report["pairs"]["fitted"]["accuracy"] > 0.9  # the words still learned


def test_the_choice_falls_back_to_the_words_when_nothing_could_be_scored():
    from trainers.judge.learned import _pick

    assert _pick({BASE: None, MIXED: None, WORDS: None}, [BASE, MIXED, WORDS]) == WORDS
    assert _pick({BASE: 0.6, MIXED: 0.6, WORDS: 0.5}, [BASE, MIXED, WORDS]) == BASE  # tie: first
    assert _pick({BASE: 0.7, MIXED: 0.6, WORDS: 0.5}, [MIXED, WORDS]) == MIXED  # allowed only
