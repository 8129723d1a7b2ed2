"""Whether a reply answers its call (trainers.judge.answers): the base's log-probability of the
reply after the call so far against after a bare opening, read in the pass that reads the
item's features, cached by content, with a floor from the world's own turns; the on-topic
guard caps a reply the words let through when it does not answer."""

from __future__ import annotations

import numpy as np
import pytest

from trainers.bases import TINY_BASE, base_dir, tiny_base
from trainers.judge.answers import AnswerCheck, answers_floor
from trainers.judge.fit import FittedJudgeModel, JudgeFitSpec, fit
from trainers.judge.fitted_judge import FittedJudge, outcome_rows
from trainers.judge.rubric import DIMENSIONS, RubricJudge, Turn
from trainers.judge.topic import TopicModel, TopicUnit, background_load
from trainers.judge.topic_guard import ON_TOPIC, ON_TOPIC_FIGURES, TopicGuard, judge_guarded
from trainers.reading.base_features import BaseReader, ReadStats
from trainers.reading.rendering import reply_row

CONTEXT = [
    {"speaker": "agent", "text": "Hello, thanks for taking the call about the flat."},
    {"speaker": "customer", "text": "Is the deposit for the flat refundable?"},
]


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("models")
    tiny_base(base_dir(TINY_BASE, folder), texts=["the flat deposit refundable viewing"])
    return folder


def _reader(models_dir, features_dir) -> BaseReader:
    return BaseReader(TINY_BASE, models_dir=models_dir, features_dir=features_dir)


def _mean_log_prob(model, ids: list[int], start: int) -> float:
    """The reply's mean log-probability from the whole vocabulary's logits at every position."""
    import torch

    from trainers.bases import inference_precision

    with torch.no_grad(), inference_precision(model):
        logits = model(input_ids=torch.tensor([ids])).logits[0].float()
    log_probs = torch.log_softmax(logits[start - 1 : len(ids) - 1], dim=-1)
    return float(log_probs.gather(1, torch.tensor(ids[start:])[:, None]).mean())


def test_the_score_is_the_replys_log_probability_after_the_call_less_after_a_bare_opening(
    models_dir, tmp_path, monkeypatch
):
    # Exact: bf16 autocast (on a CPU that has it) rounds a batch's shapes differently.
    monkeypatch.setenv("LEVERS9_CPU_BF16", "0")
    reader = _reader(models_dir, tmp_path)
    tokenizer, model = reader.tokenizer(), reader.model()
    reply = "Yes, the deposit is refundable."
    row = reply_row(tokenizer, CONTEXT, reply)
    assert tokenizer.decode(list(row.ids[row.start :])).startswith(reply)
    bare = reply_row(tokenizer, [], reply)
    expected = _mean_log_prob(model, list(row.ids), row.start) - _mean_log_prob(
        model, list(bare.ids), bare.start
    )
    # Batched with a longer row (pads after this one's end, no mask) and a shorter one.
    items = [(CONTEXT, reply), (CONTEXT * 3, "A longer call's reply."), ([], "Hi.")]
    assert reader.answers(items)[0] == pytest.approx(expected, abs=1e-4)


def test_the_pass_caches_the_scores_and_the_items_features(models_dir, tmp_path):
    reader = _reader(models_dir, tmp_path)
    items = [(CONTEXT, f"Reply {number} about the deposit.") for number in range(4)]
    first_stats = ReadStats()
    first = reader.answers([*items, items[0]], stats=first_stats)
    assert first_stats.read == 8  # four replies after the call, four after a bare opening
    fresh = _reader(models_dir, tmp_path)
    again, feature_stats = fresh.answers(items), ReadStats()
    features = fresh.features(items, stats=feature_stats)
    assert fresh._model is None  # all from the cache: the base was never loaded
    np.testing.assert_allclose(again, first[:4], atol=1e-6)
    assert (feature_stats.read, feature_stats.cached) == (0, 4)
    np.testing.assert_allclose(features, reader.features(items), atol=1e-6)


def test_the_check_flags_a_reply_below_the_floor_and_below_zero_only():
    assert answers_floor(list(range(10))) is None  # too few own turns to place a floor
    floor = answers_floor(list(np.linspace(-1.0, 3.0, 101)))
    assert floor == pytest.approx(-0.92)  # the 2nd percentile
    check = AnswerCheck(reader=None, floor=floor)
    assert check.flags(-0.95)
    assert not check.flags(-0.9)
    # A floor above zero flags only what the call made no likelier at all.
    high = AnswerCheck(reader=None, floor=0.4)
    assert high.flags(-0.01)
    assert not high.flags(0.2)


def _open_guard() -> TopicGuard:
    """A guard whose words flag nothing (no threshold): what it caps, the check capped."""
    model = TopicModel({"flat": 1.0}, 1.0, background_load())
    units = [TopicUnit(f"c{n}", tuple(CONTEXT), f"Own reply {n} about the flat.") for n in range(5)]
    return TopicGuard(model, units)


class _CheckedJudge(RubricJudge):
    """The rubric judge, carrying an answer check the way a fitted judge does."""

    def __init__(self, check: AnswerCheck):
        super().__init__()
        self.answer_check = check


def test_the_guard_caps_a_reply_that_does_not_answer_and_says_why(models_dir, tmp_path):
    reader = _reader(models_dir, tmp_path)
    replies = ["Yes.", "No", "the flat", "deposit deposit", "xyz qq", "Is it?", "12 34", "Thanks!"]
    replies += ["refundable viewing the flat deposit", "viewing", "Good morning to you all."]
    items = [(CONTEXT, reply) for reply in replies]
    scores = reader.answers(items)
    # The tiny base's scores are small and of either sign.
    assert (scores < 0).any()
    assert (scores >= 0).any()
    judge = judge_guarded(_CheckedJudge(AnswerCheck(reader, floor=0.0)), _open_guard())
    turns = [Turn(turn["speaker"], turn["text"]) for turn in CONTEXT]
    for reply, score in zip(replies, scores, strict=True):
        judgement = judge.score(turns, reply)
        unguarded = RubricJudge().score(turns, reply)
        assert (ON_TOPIC in judgement.reasons) == (score < 0)
        if score < 0:
            assert judgement.total < unguarded.total
            assert "does not answer" in judgement.reasons[ON_TOPIC]
            # The figures are the operator's, beside the reviewer's sentence.
            assert f"{score:.2f}" in judgement.reasons[ON_TOPIC_FIGURES]
        else:
            assert judgement.total == unguarded.total
    # Without the check the same guard lets every one of them through.
    plain = judge_guarded(RubricJudge(), _open_guard())
    assert all(ON_TOPIC not in plain.score(turns, reply).reasons for reply in replies)


def test_a_fit_places_the_floor_on_the_worlds_own_turns_and_the_version_keeps_it(
    models_dir, tmp_path
):
    calls = []
    for number in range(30):
        turns = [
            {"speaker": "customer", "text": f"Question {number} about the flat?"},
            {"speaker": "agent", "text": f"Answer {number}: the flat is free."},
        ]
        calls.append(
            {"id": f"call-{number}", "outcome": "won" if number % 2 else "lost", "turns": turns}
        )
    own = [
        {"context": CONTEXT, "reply": f"Own turn {number} on the deposit."} for number in range(25)
    ]
    spec = JudgeFitSpec(
        dimensions=list(DIMENSIONS),
        pairs=[],
        overrides=[],
        outcomes=outcome_rows(calls),
        seed=0,
        base=TINY_BASE,
        also_read=own,
        models_dir=str(models_dir),
        features_dir=str(tmp_path / "features"),
    )
    model, report = fit(spec)
    reader = _reader(models_dir, tmp_path / "features")
    expected = answers_floor(reader.answers([(row["context"], row["reply"]) for row in own]))
    answers = report["scorer"]["answers"]
    assert answers == {"floor": pytest.approx(expected), "sample": 25, "joint": True}
    model.save(tmp_path / "judge")
    loaded = FittedJudgeModel.load(tmp_path / "judge")
    assert loaded.learned.answers_floor == pytest.approx(expected)
    # The own turns' scores, ascending, kept for the guard's joint test with the words.
    own_scores = np.sort(reader.answers([(row["context"], row["reply"]) for row in own]))
    assert loaded.learned.answers_own == pytest.approx(own_scores)
    # The check needs the base even where the heads kept the words alone.
    assert loaded.base_needed() == TINY_BASE
    judge = FittedJudge(loaded, model_name="v1", reader=reader)
    assert judge.answer_check.floor == pytest.approx(expected)
    assert judge.answer_check.own == pytest.approx(tuple(own_scores))
    assert FittedJudge(loaded, model_name="v1", reader=None).answer_check is None


def test_the_joint_test_is_fishers_at_the_guards_one_share():
    from scipy.stats import chi2

    from trainers.judge.topic import JOINT_LIMIT, joint_statistic, own_share_below

    assert pytest.approx(chi2.ppf(0.98, 4), abs=1e-6) == JOINT_LIMIT
    own = [0.0, 1.0, 2.0, 3.0]
    assert own_share_below(own, -5.0) == pytest.approx(1 / 5)  # below all: never zero
    assert own_share_below(own, 1.0) == pytest.approx(3 / 5)
    assert joint_statistic(0.1, 0.1) == pytest.approx(-4 * np.log(0.1))
    # Somewhat unusual on both is as rare as very unusual on one.
    assert joint_statistic(0.05, 0.05) > JOINT_LIMIT > joint_statistic(0.1, 0.1)


def _ranked_guard(own_evidence: list[float]) -> TopicGuard:
    """A guard whose words flag nothing alone (a floor below every score here) and whose own
    turns' evidence is `own_evidence` (what a reply's words are ranked against)."""
    model = TopicModel({"flat": 1.0}, 1.0, background_load(), threshold=-1e9)
    model.held_out_scores = sorted(own_evidence)
    units = [TopicUnit(f"c{n}", tuple(CONTEXT), f"Own reply {n} about the flat.") for n in range(5)]
    return TopicGuard(model, units)


def test_the_guard_caps_a_reply_rare_on_words_and_answer_together_that_neither_test_flags(
    models_dir, tmp_path
):
    reader = _reader(models_dir, tmp_path)
    replies = ["Yes.", "No", "the flat", "deposit deposit", "xyz qq", "Is it?", "12 34", "Thanks!"]
    items = [(CONTEXT, reply) for reply in replies]
    scores = reader.answers(items)
    floor = float(scores.min()) - 1.0  # the answer floor alone flags none of them
    evidence = np.asarray([v.evidence for v in _ranked_guard([]).verdicts(items)])
    guard = _ranked_guard([float(evidence.max()) + 1.0] * 50)
    # Every reply's words rank below all 50 own turns (1/51) and its answer below all own
    # answers: together far rarer than the world's own rarest 2%, where the words lean away.
    rare = AnswerCheck(reader, floor, own=tuple(np.linspace(scores.max() + 1, 9.0, 50)))
    verdicts = guard.verdicts(items, rare)
    for verdict, words, score in zip(verdicts, evidence, scores, strict=True):
        assert not verdict.words_off
        assert not verdict.answers_off
        assert verdict.joint == pytest.approx(-4 * np.log(1 / 51))
        assert verdict.on_topic == (min(words, score) >= 0)  # leaning to both never flags
        if not verdict.on_topic:
            assert "fits neither this world's words nor the call" in verdict.note()
    assert not all(verdict.on_topic for verdict in verdicts)
    # Ranked against own answers below every one of theirs, the same replies are common.
    common = AnswerCheck(reader, floor, own=tuple(np.linspace(-9.0, scores.min() - 1, 50)))
    assert all(verdict.on_topic for verdict in guard.verdicts(items, common))
    # A version that kept no own scores: the answer floor alone, as before.
    assert all(verdict.joint is None for verdict in guard.verdicts(items, AnswerCheck(reader, 0)))


def test_the_guard_never_asks_an_opening_line_whether_it_answers_the_call(models_dir, tmp_path):
    # An opening line answers nothing (its score is 0 whatever it says): ranked against own
    # turns that answered something, every greeting would look rare. Its words alone judge it.
    reader = _reader(models_dir, tmp_path)
    replies = ["Hello there!", "Hi, my name is Robert.", "Good afternoon"]
    guard = _ranked_guard([1e6] * 50)  # every reply's words rank below all own turns
    rare = AnswerCheck(reader, -1e6, own=tuple(np.linspace(1.0, 9.0, 50)))
    after = guard.verdicts([(CONTEXT, reply) for reply in replies], rare)
    assert all(verdict.joint is not None for verdict in after)
    assert not any(verdict.on_topic for verdict in after)
    opening = guard.verdicts([([], reply) for reply in replies], rare)
    assert all(verdict.answers is None and verdict.joint is None for verdict in opening)
    assert all(verdict.on_topic for verdict in opening)
