"""The fitted judge learns what the rubric cannot see, is measured only on held-out rows, and
moves toward a reviewer's override."""

from __future__ import annotations

import numpy as np

from trainers.judge.fit import FittedJudgeModel, JudgeFitSpec, fit, pair_agreement
from trainers.judge.fitted_judge import override_row, pair_row
from trainers.judge.rubric import DIMENSIONS

# Two words no rule knows: only a learned judge can tell which replies reviewers prefer.
GOOD, POOR = "zorbl", "quaxen"
OPENERS = ["Thanks for calling", "Good morning", "Hello there", "Hi", "Welcome back"]
TOPICS = ["the flat", "a viewing", "the deposit", "your budget", "the move", "the area"]


def _pairs(count: int, *, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    rows = []
    for index in range(count):
        opener, topic = rng.choice(OPENERS), rng.choice(TOPICS)
        context = [{"speaker": "customer", "text": f"{opener}, I wanted to ask about {topic}."}]
        good = f"{opener}. About {topic}: {GOOD} is what I would suggest."
        poor = f"{opener}. About {topic}: {POOR} is what I would suggest."
        rows.append(
            pair_row(
                group=f"call-{index}",
                context=context,
                chosen=good,
                rejected=poor,
                reasons=["progress"],
            )
        )
    return rows


def _spec(pairs, overrides=()) -> JudgeFitSpec:
    return JudgeFitSpec(
        dimensions=list(DIMENSIONS), pairs=pairs, overrides=list(overrides), outcomes=[], seed=1
    )


def test_it_beats_chance_on_held_out_pairs_only_a_learned_judge_can_separate():
    model, report = fit(_spec(_pairs(300, seed=0)))
    fitted, rubric = report["pairs"]["fitted"], report["pairs"]["rubric"]
    assert report["held_out"]["pairs"] >= 40
    assert fitted["accuracy"] > 0.9
    assert fitted["accuracy_ci"][0] > 0.5
    assert not fitted["at_chance"]
    # The rubric sees two replies that differ by one unknown word: a tie, every time.
    assert rubric["ties"] == rubric["pairs"]
    assert report["dimensions"]["progress"]["own_head"] is True


def test_a_judge_fitted_on_picks_alone_scores_a_typical_picked_reply_a_half():
    # Picks rank replies but anchor no level: uncentred, every reply could score 0.99999.
    # The rejected replies stop short of the suggestion: every word the two differ by is in
    # the preferred one, so uncentred all the logits lean one way.
    pairs = [
        {**pair, "rejected": pair["rejected"].split(":")[0] + "."} for pair in _pairs(120, seed=2)
    ]
    model, _ = fit(_spec(pairs))
    contexts = [pair["context"] for pair in pairs]
    rubric = [[0.5] * 8] * len(pairs)
    chosen = [row["total"] for row in model.score(contexts, [p["chosen"] for p in pairs], rubric)]
    rejected = [
        row["total"] for row in model.score(contexts, [p["rejected"] for p in pairs], rubric)
    ]
    assert abs(float(np.median(chosen + rejected)) - 0.5) < 0.05
    assert min(chosen) > 0.5 > max(rejected)


def test_it_never_measures_on_a_row_it_was_fitted_on():
    pairs = _pairs(200, seed=2)
    _model, report = fit(_spec(pairs))
    assert report["trained_on"]["pairs"] + report["held_out"]["pairs"] == len(pairs)
    # The split is by group: every held-out group is absent from the training part.
    spec = _spec(pairs)
    from trainers.judge.fit import _split

    train, held = _split(pairs, spec)
    assert {row["group"] for row in train}.isdisjoint({row["group"] for row in held})


def test_a_refit_after_an_override_moves_the_reply_toward_the_overriders_score():
    pairs = _pairs(120, seed=3)
    context = [{"speaker": "customer", "text": "Is the flat still free?"}]
    reply = "Honestly I could not say, maybe ring back another week."
    before_model, _ = fit(_spec(pairs))
    before = before_model.score(
        [context], [reply], [override_row(context=context, reply=reply, scores={})["rubric"]]
    )
    override = override_row(context=context, reply=reply, scores={name: 1.0 for name in DIMENSIONS})
    after_model, _ = fit(_spec(pairs, [override]))
    after = after_model.score([context], [reply], [override["rubric"]])
    assert after[0]["total"] > before[0]["total"]
    assert after[0]["scores"]["respect"] > before[0]["scores"]["respect"]


def test_it_saves_and_loads_plain_files_that_score_the_same(tmp_path):
    model, _ = fit(_spec(_pairs(80, seed=4)))
    model.save(tmp_path)
    assert {path.name for path in tmp_path.iterdir()} == {"judge.json", "judge.npz"}
    again = FittedJudgeModel.load(tmp_path)
    context = [{"speaker": "customer", "text": "Hello"}]
    rubric = [[0.5] * 8]
    assert model.score([context], [f"Sure, {GOOD}."], rubric) == again.score(
        [context], [f"Sure, {GOOD}."], rubric
    )


def test_kappa_and_ties_are_counted_apart():
    agreement = pair_agreement(
        np.array([1.0, 0.5, 0.2, 0.9]), np.array([0.0, 0.5, 0.8, 0.1]), seed=0
    )
    assert agreement["pairs"] == 4
    assert agreement["ties"] == 1
    assert agreement["accuracy"] == 0.5  # two of four agree; the tie is not agreement


def test_scores_that_differ_below_the_fourth_decimal_are_measured_not_tied():
    """A strongly regularised head keeps its totals near 0.5: rounded, they tie, and a working
    judge (0.76 on the demo's held-out picks) was reported at 0.04 with 43 ties of 45."""
    model, _report = fit(_spec(_pairs(300, seed=0)))
    model.total.weights = model.total.weights * 1e-5  # the same ranking, squeezed near 0.5
    pairs = _pairs(60, seed=3)
    contexts = [row["context"] for row in pairs]

    def totals(side: str, digits):
        scored = model.score(
            contexts,
            [row[side] for row in pairs],
            [row[f"rubric_{side}"] for row in pairs],
            digits=digits,
        )
        return np.asarray([item["total"] for item in scored])

    shown = pair_agreement(totals("chosen", 4), totals("rejected", 4), seed=0)
    assert shown["ties"] == shown["pairs"]  # what a user is shown rounds them together
    measured = pair_agreement(totals("chosen", None), totals("rejected", None), seed=0)
    assert measured["ties"] == 0
    assert measured["accuracy"] > 0.9


def test_a_judge_below_chance_is_no_better_than_chance():
    worse = pair_agreement(np.zeros(100), np.ones(100), seed=0)
    assert worse["accuracy"] == 0.0
    assert worse["at_chance"] is True


def _outcome_calls(count: int, *, words_tell: bool) -> list[dict]:
    """Calls whose agent says GOOD in won calls and POOR in lost ones (words_tell), or a word
    drawn apart from the outcome."""
    from trainers.judge.fitted_judge import outcome_rows

    rng = np.random.default_rng(4)
    calls = []
    for index in range(count):
        won = bool(rng.integers(2))
        said = won if words_tell else bool(rng.integers(2))
        word = GOOD if said else POOR
        turns = []
        for step in range(2):
            turns.append({"speaker": "customer", "text": f"Question {step} about the flat?"})
            turns.append({"speaker": "agent", "text": f"Step {step}: {word} for the flat."})
        outcome = "won" if won else "lost"
        calls.append({"id": f"call-{index}", "outcome": outcome, "turns": turns})
    return outcome_rows(calls)


def _outcome_spec(rows) -> JudgeFitSpec:
    return JudgeFitSpec(dimensions=list(DIMENSIONS), pairs=[], overrides=[], outcomes=rows, seed=1)


def _totals_and_won(model, rows):
    scored = model.score(
        [r["context"] for r in rows], [r["reply"] for r in rows], [r["rubric"] for r in rows]
    )
    return [s["total"] for s in scored], [s["won_probability"] for s in scored]


def test_without_picks_the_won_head_scores_the_total_only_once_it_beat_chance_held_out(tmp_path):
    rows = _outcome_calls(240, words_tell=True)
    model, report = fit(_outcome_spec(rows))
    assert report["outcomes"]["fitted"]["calls"] >= 30
    assert report["outcomes"]["fitted"]["at_chance"] is False
    assert report["scorer"]["total"] == "won"
    totals, won = _totals_and_won(model, rows[:6])
    assert totals == won

    for noise in (_outcome_calls(240, words_tell=False), _outcome_calls(40, words_tell=True)):
        model, report = fit(_outcome_spec(noise))
        # At chance, or too few held-out calls to tell: the rubric's total ranks replies.
        assert report["scorer"]["total"] == "rubric"
        totals, won = _totals_and_won(model, noise[:6])
        assert totals == [round(r["rubric"][-1], 4) for r in noise[:6]]
        assert totals != won
        model.save(tmp_path / "judge")
        assert FittedJudgeModel.load(tmp_path / "judge").won_is_total is False
