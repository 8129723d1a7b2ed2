"""Move labels for the agent turns of real calls: a transparent keyword classifier.

    label_move(context, text) -> (move, reason)

Every agent turn gets one of the eight moves (trainers.simulator.MOVES) and a one-line reason
a reviewer can read and, in the admin, correct. The rules are ordered; the first that matches
wins (MOVE_RULES lists them in that order, with their patterns). Some rules look at the call so
far: answering a concern the customer has just raised is handling the objection, and talk
before anything about the offer has been said is the greeting's job (rapport).

The same rules read lettings calls and the persuasion chats shipped for the demo
(data/real-calls/persuasionforgood: the agent asks for a donation to Save the Children). The
persuasion mapping, by analogy with the lettings call:
    greet             hellos, how-are-yous, small talk before the charity comes up
    give_details      what the charity does, where it works, figures, stories
    confirm           questions that check what the persuadee knows or does ("have you heard
                      of Save the Children?", "do you have children?")
    handle_objection  answering a doubt the persuadee raised (money is tight, distrust of big
                      charities, "I already give")
    reassure          the money is safe: goes directly to children, reputable, transparent
    propose_viewing   the ask in principle: "would you consider donating?"
    offer_slot        a concrete amount to say yes to ("even $0.50 of your bonus")
    close             thanks for the donation, goodbyes

`customer_objection(text)` is the matching reader for customer turns (price, timing, family,
trust); the off-line comparison uses it to tell when an objection is open.

Pure Python (re only); never imports Django.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trainers.simulator import MOVES

# --- Customer concerns -------------------------------------------------------------------

OBJECTION_PATTERNS: dict[str, str] = {
    "price": (
        r"\b(pricey|expensive|too much|costly|over my budget|out of my budget|top of my budget"
        r"|more than i (had )?(hoped|wanted|planned) to (pay|spend)|can'?t afford|cannot afford"
        r"|money('s| is) (tight|short)|tight on money|short on (money|cash)|broke"
        r"|(do ?n[o']t|do not) (really )?have (much |any |extra |spare )?(money|cash|funds)"
        r"|(do ?n[o']t|do not) (really )?have (anything|much) to (give|spare))"
    ),
    "timing": (
        r"\b(timing|the dates? (will|won'?t|do ?n[o']t|do not|line up|work)|notice period"
        r"|move in sooner|sooner than that|by the end of the month|not (the )?right time)"
    ),
    "family": (
        r"\b((suitable|right|okay|ok|safe|good) for (the|my|a|our) (kids|children|family)"
        r"|worried (about|whether) [^.?!]{0,30}(kids|children|family))"
    ),
    "trust": (
        r"\b(scam|skeptical|sceptical|(do ?n[o']t|do not|can'?t|cannot) trust|how do i know"
        r"|is (it|this) (legit|legitimate|real)|not sure (about|i trust) (these|big|this) "
        r"(charit|organi[sz]ation))"
    ),
}
_OBJECTIONS = {
    name: re.compile(pattern, re.IGNORECASE) for name, pattern in OBJECTION_PATTERNS.items()
}


def customer_objection(text: str) -> str | None:
    """The concern a customer turn raises (price, timing, family, trust), or None."""
    for name, pattern in _OBJECTIONS.items():
        if pattern.search(text or ""):
            return name
    return None


# --- Agent moves -------------------------------------------------------------------------

_AMOUNT = (
    r"([$£€]\s?\d+(\.\d+)?|\b\d+(\.\d+)?\s?(cents?|dollars?|pence|pounds?|bucks)\b|\bpenn(y|ies)\b"
    r"|\b(a|one|two|three|five|ten|twenty|fifty) (dollars?|cents?|pounds?)\b)"
)
_GIVE = r"\b(donat\w*|give|giving|contribut\w*|pledge|bonus|payment)\b"
_PITCH = (
    r"(£|\bper (calendar )?month\b|\bbed(room)?s?\b|\btwo-bed\b|\brent\b|\bdeposit\b"
    r"|\bavailable from\b|\bfurnished\b|\btenancy\b|\bproperty\b|\bflat\b|\bgarden\b"
    r"|\bsave the children\b|\bcharit(y|ies)\b|\borgani[sz]ation\b|\bnon-?profit\b"
    r"|\bnon-?governmental\b|\bprograms?\b|\bchildren (in|around|who|of)\b|\bmillions?\b"
    r"|\bpercent\b|%|\bwar\b|\bpoverty\b|\bhunger\b|\bfamine\b|\brefugees?\b|\bsyria\b"
    r"|\beducation\b|\bhealth\b|\bhelps? (kids|children|families)\b|\bdonations?\b)"
)


@dataclass(frozen=True)
class MoveRule:
    """One labelling rule: when `pattern` matches the agent's text (and `when` holds), the
    turn is `move`, for `reason`."""

    move: str
    reason: str
    pattern: str
    when: str = "always"
    """'always'; 'objection_open' (the customer's last turn raised a concern); or
    'before_pitch' (no agent turn so far, this one included, has talked about the offer)."""

    def to_dict(self) -> dict[str, str]:
        return {
            "move": self.move,
            "reason": self.reason,
            "pattern": self.pattern,
            "when": self.when,
        }


MOVE_RULES: tuple[MoveRule, ...] = (
    MoveRule(
        "close",
        "thanks the customer for the commitment, confirms the booking or says goodbye",
        r"(thank(s| you)[^.!?]{0,30}\b(donat|contribut|pledg)|\bbooked\b"
        r"|send (you )?(a |the )?confirmation|see you (then|there|on)\b"
        r"|have a (great|good|nice|wonderful|lovely|fantastic) (day|evening|night|weekend|rest)"
        r"|\b(good)?bye\b|\btake care\b|anything else (i can|you need))",
    ),
    MoveRule(
        "offer_slot",
        "names a day, a time or an amount: a concrete slot to say yes to",
        r"(\b(mon|tues|wednes|thurs|fri|satur|sun)day\b|\b\d{1,2}(:\d\d)?\s?(am|pm)\b"
        r"|\bavailability\b|\bwhich (time|day|slot) (works|suits)"
        rf"|{_GIVE}[^.?!]{{0,40}}{_AMOUNT}|{_AMOUNT}[^.?!]{{0,40}}{_GIVE}"
        r"|how much (would|could|can|will|do) you|(have|put) you down for)",
    ),
    MoveRule(
        "propose_viewing",
        "asks for the commitment in principle: a viewing, or a donation",
        r"(\bviewing\b|\bview (it|the)\b|come (and|to) see|have a look|pop(ping)? round"
        r"|see (it|the (flat|property|place)) in person"
        r"|would you (like|be willing|be interested|consider|want|be able)( to| in)?( make a)?"
        r" (donat|contribut|help|give|support)"
        r"|(are|were) you (willing|interested|able|open) (to|in) (donat|contribut|giv|help)"
        r"|(can|could|will) you (donate|give|contribute|help)"
        r"|consider (making )?a donation|your commitment|willing to (donate|give)"
        r"|(welcome|invite you|encourage you) to (donate|give|contribute)"
        r"|how about (a |making a )?donation)",
    ),
    MoveRule(
        "handle_objection",
        "acknowledges a concern and answers it",
        r"(understand your concern|\bI (completely |totally |fully |can )?understand "
        r"(that|it|your|where|how|why|the|this)|\bI (completely |totally |can )?appreciate "
        r"(that|the|how|why|your concern)|\bfair (point|enough|one)\b|totally get (that|it)"
        r"|\bI hear you\b|no worries on|makes sense with|that'?s (a )?(valid|fair)\b"
        r"|\b(very |totally |completely )?understandable\b"
        r"|\bI know (it|that)('?s| is) (a lot|expensive|hard))",
    ),
    MoveRule(
        "reassure",
        "reassures: safety, trust, that the money or the landlord can be relied on",
        r"(rest assured|do ?n[o']t worry|do not worry|in good hands|\bsafe(ly|ty)?\b"
        r"|trust(worthy|ed)|reputable|legitimate|\blegit\b|transparen(t|cy)"
        r"|every (penny|dollar|cent)|goes (directly|straight)"
        r"|(well|highly) (rated|respected|managed)"
        r"|charity navigator|accredited|guarantee|we('ll| will) (help|be with you)|responsive)",
    ),
    MoveRule(
        "handle_objection",
        "answers the concern the customer has just raised",
        r".",
        when="objection_open",
    ),
    MoveRule(
        "greet",
        "a greeting or pleasantries",
        r"(^\W*(hi|hello|hey|hiya|howdy|good (morning|afternoon|evening|day)|greetings)\b"
        r"|how (are|r) (you|u|doing|things)|how('?s| is) (it going|your day|everything)"
        r"|nice to (meet|speak|chat|talk)|thank(s| you) for (calling|getting in touch|chatting)"
        r"|\bmy name is\b)",
    ),
    MoveRule(
        "confirm",
        "checks what the customer knows, needs or has said",
        r"(just to confirm|confirm that|got it right|understood correctly|is that right"
        r"|if I understand|did you say|so you('re| are) looking|have you (ever )?heard (of|about)"
        r"|are you familiar|do you (know|have|like|ever)|have you ever (donated|given|heard)"
        r"|what do you (think|know)|are you (a parent|someone who))",
    ),
    MoveRule("give_details", "gives details of the offer (the flat, the charity)", _PITCH),
    MoveRule(
        "greet",
        "small talk before the offer comes up: rapport, the greeting's job",
        r".",
        when="before_pitch",
    ),
    MoveRule("confirm", "asks the customer something (no more specific rule matched)", r"\?"),
    MoveRule(
        "give_details",
        "talks the offer through (no more specific rule matched)",
        r"(?s).*",
    ),
)

_COMPILED = tuple(re.compile(rule.pattern, re.IGNORECASE) for rule in MOVE_RULES)
_PITCH_RE = re.compile(_PITCH, re.IGNORECASE)
if any(rule.move not in MOVES for rule in MOVE_RULES):  # pragma: no cover - a typo fails at import
    raise ValueError("every move rule must name one of the eight moves")


def label_move(context: Sequence[Mapping[str, Any]], text: str) -> tuple[str, str]:
    """The move an agent turn makes and why, given the call so far (turns with "speaker"
    and "text", oldest first)."""
    text = text or ""
    last_customer = next(
        (turn.get("text") or "" for turn in reversed(context) if turn.get("speaker") == "customer"),
        "",
    )
    objection = customer_objection(last_customer)
    pitched = any(
        _PITCH_RE.search(turn.get("text") or "")
        for turn in context
        if turn.get("speaker") == "agent"
    ) or bool(_PITCH_RE.search(text))
    for rule, pattern in zip(MOVE_RULES, _COMPILED, strict=True):
        if rule.when == "objection_open" and objection is None:
            continue
        if rule.when == "before_pitch" and pitched:
            continue
        if pattern.search(text):
            reason = rule.reason
            if rule.when == "objection_open":
                reason = f"{reason} ({objection})"
            return rule.move, reason
    raise AssertionError("the last rule matches any text")  # pragma: no cover


def label_agent_turns(turns: Sequence[Mapping[str, Any]]) -> list[tuple[str, str] | None]:
    """(move, reason) for every agent turn of a call, None for customer turns."""
    labels: list[tuple[str, str] | None] = []
    for index, turn in enumerate(turns):
        if turn.get("speaker") == "agent":
            labels.append(label_move(turns[:index], turn.get("text") or ""))
        else:
            labels.append(None)
    return labels


def move_rules_table() -> list[dict[str, str]]:
    """The rules in the order they are tried, as plain rows for the admin."""
    return [rule.to_dict() for rule in MOVE_RULES]
