"""The rubric judge: deterministic, explainable, pure Python, fast, and pointing the right way.

No Django here: the judge is shared with the trainers, so these tests run without a database.
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import pytest

from levers9.shipped_data import PERSUASION_CALLS
from trainers.judge.rubric import (
    DIMENSION_HELP,
    DIMENSION_LABELS,
    DIMENSION_WEIGHTS,
    DIMENSIONS,
    Judge,
    Judgement,
    RubricJudge,
    Turn,
)

# A formal lettings customer with a family, in a hurry; the agent has given the price.
LETTINGS_CALL = (
    Turn("agent", "Good morning, thank you for calling Harbour Lettings. How can I help?"),
    Turn("customer", "Good morning. I am enquiring about the two-bedroom flat on Elm Road."),
    Turn("agent", "Certainly. It is £1,200 per month and available from the first of June."),
    Turn(
        "customer",
        "Thank you. Would it suit my wife and our two children? We would need to move soon.",
    ),
)

CASUAL_CALL = (
    Turn("agent", "Hi, thanks for getting in touch about the flat on Elm Road."),
    Turn("customer", "hey! yeah i'm looking for somewhere, it's gonna be just me lol"),
)

FORMAL_CALL = (
    Turn("agent", "Good morning, Harbour Lettings."),
    Turn(
        "customer",
        "Good morning. I am enquiring about the flat on Elm Road. "
        "Would you kindly tell me whether it is still available?",
    ),
)

NO_FAMILY_CALL = (
    Turn("agent", "Good afternoon, Harbour Lettings, how can I help?"),
    Turn("customer", "Good afternoon. I am looking for a one-bedroom flat near the station."),
)


@pytest.fixture
def judge() -> RubricJudge:
    return RubricJudge()


# --- shape and determinism -------------------------------------------------------------


def test_it_gives_the_same_judgement_for_the_same_inputs(judge):
    reply = "Certainly. Would you like to view it on Saturday at 11am?"
    first = judge.score(LETTINGS_CALL, reply)
    again = RubricJudge().score(list(LETTINGS_CALL), reply)

    assert first == again
    assert json.dumps(first.to_dict(), sort_keys=True) == json.dumps(
        again.to_dict(), sort_keys=True
    )


def test_it_gives_different_scores_for_a_different_reply(judge):
    good = judge.score(LETTINGS_CALL, "Certainly. Would you like to view it on Saturday?")
    bad = judge.score(LETTINGS_CALL, "ok")

    assert good.scores != bad.scores
    assert good.total != bad.total


def test_it_returns_all_seven_dimensions_in_range(judge):
    for context, reply in [
        (LETTINGS_CALL, "Certainly. Would you like to view it on Saturday?"),
        ((), ""),
        ((), "SIGN NOW!!! LAST CHANCE, NO KIDS, SEND YOUR CARD NUMBER, 100% GUARANTEED"),
        (CASUAL_CALL, "Calm down, you obviously need to pay £5,000 today only."),
    ]:
        judgement = judge.score(context, reply)

        assert tuple(judgement.scores) == DIMENSIONS
        assert tuple(judgement.reasons) == DIMENSIONS
        assert all(0.0 <= score <= 1.0 for score in judgement.scores.values())
        assert 0.0 <= judgement.total <= 1.0
        assert judgement.judge_model == "rubric-v1"


def test_it_computes_the_total_as_the_documented_weighted_mean(judge):
    judgement = judge.score(LETTINGS_CALL, "I guarantee the price will never go up.")

    weighted = sum(DIMENSION_WEIGHTS[name] * judgement.scores[name] for name in DIMENSIONS)
    assert judgement.total == pytest.approx(weighted / sum(DIMENSION_WEIGHTS.values()), abs=1e-4)
    # Compliance and respect weigh more than the rest, as documented.
    others = [
        DIMENSION_WEIGHTS[name] for name in DIMENSIONS if name not in {"compliance", "respect"}
    ]
    assert min(DIMENSION_WEIGHTS["compliance"], DIMENSION_WEIGHTS["respect"]) > max(others)


def test_it_rounds_every_score_to_four_decimals(judge):
    judgement = judge.score(CASUAL_CALL, "Hey! Would you like to come and see it this week?")

    for value in [*judgement.scores.values(), judgement.total]:
        assert value == round(value, 4)


def test_it_explains_every_dimension_in_a_sentence(judge):
    judgement = judge.score(LETTINGS_CALL, "I guarantee the price will never go up.")

    assert all(judgement.reasons[name].strip() for name in DIMENSIONS)
    assert "guarantee" in judgement.reasons["compliance"]
    assert "guarantee" in judgement.reasons["accuracy"]


def test_it_labels_and_explains_every_dimension_for_the_ui():
    assert set(DIMENSION_LABELS) == set(DIMENSIONS)
    assert set(DIMENSION_HELP) == set(DIMENSIONS)
    assert set(DIMENSION_WEIGHTS) == set(DIMENSIONS)
    assert all(text.endswith(".") for text in DIMENSION_HELP.values())


def test_it_gives_plain_values_from_to_dict(judge):
    judgement = judge.score(LETTINGS_CALL, "Certainly. Shall I book you a viewing tomorrow?")

    plain = judgement.to_dict()

    assert json.loads(json.dumps(plain)) == plain
    assert plain["scores"] == judgement.scores
    assert plain["total"] == judgement.total
    assert plain["judge_model"] == "rubric-v1"
    assert plain["reasons"] == judgement.reasons


def test_it_satisfies_the_judge_protocol(judge):
    assert isinstance(judge, Judge)
    assert isinstance(judge.score((), "Hello"), Judgement)


def test_it_refuses_a_turn_from_an_unknown_speaker():
    with pytest.raises(ValueError, match="speaker"):
        Turn("robot", "beep")


# --- each dimension points the right way -------------------------------------------------


def test_it_prefers_a_casual_reply_for_a_casual_customer_on_dialect(judge):
    casual = judge.score(CASUAL_CALL, "Hey! Cool, it's a lovely little place - wanna see it?")
    stiff = judge.score(
        CASUAL_CALL,
        "Good afternoon. I would be delighted to assist you. Would you kindly confirm "
        "your requirements?",
    )

    assert casual.scores["dialect"] > stiff.scores["dialect"]
    assert "Stiffer" in stiff.reasons["dialect"]


def test_it_prefers_a_formal_reply_for_a_formal_customer_on_dialect(judge):
    formal = judge.score(
        FORMAL_CALL, "Good morning. Yes, it is still available. Would you like to view it?"
    )
    casual = judge.score(FORMAL_CALL, "hey yeah lol it's still free, wanna see it?")

    assert formal.scores["dialect"] > casual.scores["dialect"]


def test_it_is_neutral_on_dialect_before_the_customer_speaks(judge):
    judgement = judge.score((), "Good morning, Harbour Lettings, how can I help?")

    assert judgement.scores["dialect"] == pytest.approx(0.7)


def test_it_penalises_dismissive_language_on_respect(judge):
    courteous = judge.score(
        CASUAL_CALL, "I understand, thanks for explaining. Shall we look at what fits?"
    )
    dismissive = judge.score(CASUAL_CALL, "Calm down, you obviously don't get it")

    assert courteous.scores["respect"] > dismissive.scores["respect"]
    assert "Dismissive" in dismissive.reasons["respect"]


def test_it_penalises_shouting_on_respect(judge):
    calm = judge.score(CASUAL_CALL, "Please have a look at the listing first.")
    shouted = judge.score(CASUAL_CALL, "PLEASE LOOK AT THE LISTING FIRST")

    assert calm.scores["respect"] > shouted.scores["respect"]


def test_it_penalises_a_guarantee_on_accuracy_and_compliance(judge):
    hedged = judge.score(
        LETTINGS_CALL, "As far as I know the rent is fixed for the first year of the tenancy."
    )
    promised = judge.score(LETTINGS_CALL, "I guarantee the price will never go up")

    assert hedged.scores["accuracy"] > promised.scores["accuracy"]
    assert hedged.scores["compliance"] > promised.scores["compliance"]


def test_it_does_not_count_a_negated_guarantee(judge):
    honest = judge.score(LETTINGS_CALL, "I can't guarantee the rent will stay the same.")
    promised = judge.score(LETTINGS_CALL, "I can guarantee the rent will stay the same.")

    assert honest.scores["compliance"] > promised.scores["compliance"]
    assert honest.scores["accuracy"] > promised.scores["accuracy"]


def test_it_penalises_a_price_the_call_never_mentioned_on_accuracy(judge):
    reply = "The rent is £1,200 per month."
    grounded = judge.score(LETTINGS_CALL, reply)  # the agent said £1,200 earlier
    invented = judge.score(NO_FAMILY_CALL, reply)

    assert grounded.scores["accuracy"] > invented.scores["accuracy"]
    assert "figures" in invented.reasons["accuracy"]


def test_it_prefers_proposing_a_viewing_over_ok_on_progress(judge):
    viewing = judge.score(
        LETTINGS_CALL, "It would suit a family well. Would you like to book a viewing?"
    )
    ok = judge.score(LETTINGS_CALL, "ok")

    assert viewing.scores["progress"] > ok.scores["progress"]


def test_it_rewards_taking_up_an_objection_on_progress(judge):
    objection = (*NO_FAMILY_CALL, Turn("customer", "Hmm, that is a bit over my budget."))
    taken_up = judge.score(objection, "I understand. There is a cheaper studio nearby too.")
    passed_over = judge.score(objection, "The kitchen was refitted last year.")

    assert taken_up.scores["progress"] > passed_over.scores["progress"]


def test_it_penalises_repeating_an_earlier_turn_on_progress(judge):
    earlier = LETTINGS_CALL[2].text
    repeated = judge.score(LETTINGS_CALL, earlier)
    fresh = judge.score(
        LETTINGS_CALL, "It has a second bedroom the children could share, and a garden."
    )

    assert fresh.scores["progress"] > repeated.scores["progress"]
    assert "Repeats" in repeated.reasons["progress"]


def test_it_prefers_addressing_the_kids_on_family(judge):
    addressed = judge.score(
        LETTINGS_CALL,
        "Yes - there are two good primary schools nearby and a safe garden for the children.",
    )
    ignored = judge.score(LETTINGS_CALL, "Yes, the kitchen was refitted last year.")

    assert addressed.scores["family"] > ignored.scores["family"]
    assert "Ignores" in ignored.reasons["family"]


def test_it_lets_the_agent_move_on_once_the_family_was_acknowledged(judge):
    acknowledged = (
        *LETTINGS_CALL,
        Turn("agent", "It would suit your family well: there is a school just round the corner."),
        Turn("customer", "Lovely."),
    )
    reply = "Would you like to view it on Saturday at 11am?"

    moved_on = judge.score(acknowledged, reply)
    never_acknowledged = judge.score(LETTINGS_CALL, reply)

    assert moved_on.scores["family"] > never_acknowledged.scores["family"]


def test_it_does_not_punish_silence_when_family_never_came_up(judge):
    judgement = judge.score(NO_FAMILY_CALL, "Yes, the kitchen was refitted last year.")

    assert judgement.scores["family"] >= 0.8


def test_it_penalises_turning_children_away_on_family_and_compliance(judge):
    welcoming = judge.score(NO_FAMILY_CALL, "The flat is available to all applicants.")
    refusing = judge.score(NO_FAMILY_CALL, "Sorry, the landlord says no children.")

    assert welcoming.scores["family"] > refusing.scores["family"]
    assert welcoming.scores["compliance"] > refusing.scores["compliance"]


def test_it_penalises_sign_now_on_the_first_turn_on_timing(judge):
    greeting = judge.score((), "Good morning, thanks for calling Harbour Lettings. How can I help?")
    pushy = judge.score((), "Sign now and the flat is yours.")

    assert greeting.scores["timing"] > pushy.scores["timing"]


def test_it_meets_an_urgent_customer_with_a_concrete_time_on_timing(judge):
    urgent_call = (
        *NO_FAMILY_CALL,
        Turn("agent", "We have one near the station."),
        Turn("customer", "Great, I need to move this week, asap."),
    )
    concrete = judge.score(urgent_call, "I can show you the flat tomorrow at 10am.")
    vague = judge.score(urgent_call, "I can show you the flat at some point.")

    assert concrete.scores["timing"] > vague.scores["timing"]


def test_it_penalises_an_overlong_reply_on_timing(judge):
    short = judge.score(LETTINGS_CALL, "It is a quiet street. " * 5)
    long = judge.score(LETTINGS_CALL, "It is a quiet street. " * 30)

    assert short.scores["timing"] > long.scores["timing"]


def test_it_penalises_asking_for_card_details_on_compliance(judge):
    secure = judge.score(LETTINGS_CALL, "We will email you a secure link for the holding deposit.")
    in_chat = judge.score(LETTINGS_CALL, "Just send me your card number and sort code here.")

    assert secure.scores["compliance"] > in_chat.scores["compliance"]


def test_it_penalises_pressure_tactics_on_compliance(judge):
    calm = judge.score(LETTINGS_CALL, "Take your time to think it over.")
    pressure = judge.score(LETTINGS_CALL, "Last chance - act now, this price is only today.")

    assert calm.scores["compliance"] > pressure.scores["compliance"]


def test_it_ranks_a_good_lettings_reply_above_a_bad_one_in_total(judge):
    good = judge.score(
        LETTINGS_CALL,
        "Thank you. It would suit a family: two bedrooms, a safe garden and a good school "
        "nearby. Would you like to view it tomorrow at 10am?",
    )
    bad = judge.score(LETTINGS_CALL, "Obviously. Sign now, last chance, no kids allowed though.")

    assert good.total > bad.total


# --- pure, fast, and working on real calls -----------------------------------------------


def test_it_imports_nothing_outside_the_standard_library():
    source = Path(__file__).resolve().parents[3] / "trainers" / "judge" / "rubric.py"
    tree = ast.parse(source.read_text(encoding="utf-8"))

    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])

    assert imported
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}


def test_it_scores_every_agent_turn_of_fifty_real_calls(judge):
    if not PERSUASION_CALLS.exists():
        pytest.skip(f"real calls not shipped here: {PERSUASION_CALLS}")
    with PERSUASION_CALLS.open(encoding="utf-8") as lines:
        calls = [json.loads(line) for _, line in zip(range(50), lines, strict=False)]

    judgements = []
    for call in calls:
        turns = [Turn(speaker=turn["speaker"], text=turn["text"]) for turn in call["turns"]]
        for index, turn in enumerate(turns):
            if turn.speaker == "agent":
                judgements.append(judge.score(turns[:index], turn.text))

    assert len(calls) == 50
    assert len(judgements) > 100
    for judgement in judgements:
        assert all(0.0 <= score <= 1.0 for score in judgement.scores.values())
        assert 0.0 <= judgement.total <= 1.0
    assert len({judgement.total for judgement in judgements}) > 1
    varying = [name for name in DIMENSIONS if len({j.scores[name] for j in judgements}) > 1]
    assert len(varying) >= 4, varying
