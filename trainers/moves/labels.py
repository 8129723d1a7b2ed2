"""Move labels for the agent turns of real calls: a transparent keyword classifier.

    label_move(context, text) -> (move, reason)

Every agent turn gets one of the eight moves (trainers.moves.simulator.MOVES) and a one-line reason
a reviewer can read and, in the admin, correct. The rules are ordered; the first that matches
wins (MOVE_RULES lists them in that order, with their patterns). Some rules look at the call so
far: answering a concern the customer has just raised is handling the objection, and talk
before anything about the offer has been said is the greeting's job (rapport).

The same rules read lettings calls and the persuasion chats shipped for the demo
(data/real-calls/persuasionforgood: the agent asks for a donation to Save the Children). The
persuasion mapping, by analogy with the lettings call:
    greet             hellos, how-are-yous, small talk before the charity comes up (small
                      talk only in the call's opening: see OPENING_AGENT_TURNS)
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

A world has its own moves ({"name", "description"}; lettings keeps the eight, other worlds a
generic set or their own), so the turns of a world are labelled with ITS moves by
`WorldMoveLabeller` (see "A world's own moves" below): TF-IDF similarity of the turn to each
move's name and description, plus the rules above as cue words (their move mapped onto the
world's moves), plus the reviewers' corrections as a nearest-centroid pull. The labeller is a
pure function of (moves, corrections): a correction changes the labels given after it, and
`labeller_agreement` measures it against the corrections, held out by call.

A world's opening moves (`opening_moves`: those whose words speak of greeting or opening) are
given past the call's opening (the agent's first OPENING_AGENT_TURNS turns, while each was an
opening) only where the turn says a greeting's own words; no rule but the greeting's cues an
opening move. Each rule cues the world move named like it, else the generic step it stands
for, else the move sharing most words with the rule's reason and its step's words
(STEP_WORDS, MoveRule.words). bench/move_labels.py measures all this against hand labels.

Pure Python (re, numpy); never imports Django.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from trainers.moves.simulator import MOVES

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


# A doubt or a refusal in any trade: what the agent's next turn answers, when it is not one of
# the concerns above. Kept apart from customer_objection, whose four concerns the off-line
# comparison tracks as the simulator's objection.
_DOUBT = re.compile(
    r"\b(not interested|no,? thanks?( you)?|not (really |so |too |quite )?sure"
    r"|(do ?n[o']t|do not) (really )?(think|want|know|need|trust)|(i'?d|i would) rather"
    r"|rather (not|keep|wait)|(i'?d|i would) prefer|prefer to|not (right )?now"
    r"|maybe (later|next time|another time)|not going to|not willing|won'?t be"
    r"|hesitant|why should|is (it|that|this) (even )?worth|too (much|high|expensive))",
    re.IGNORECASE,
)


def customer_doubt(text: str) -> str | None:
    """The concern a customer turn raises (customer_objection), else "doubt" where it doubts
    or turns the offer down, else None."""
    objection = customer_objection(text)
    if objection is None and _DOUBT.search(text or ""):
        return "doubt"
    return objection


# --- Agent moves -------------------------------------------------------------------------

_AMOUNT = (
    r"([$£€]\s?\d+(\.\d+)?|\b\d+(\.\d+)?\s?(cents?|dollars?|pence|pounds?|bucks)\b|\bpenn(y|ies)\b"
    r"|\b(a|one|two|three|five|ten|twenty|fifty) (dollars?|cents?|pounds?)\b)"
)
_GIVE = r"\b(donat\w*|give|giving|contribut\w*|pledge|bonus|payment)\b"
# Words that make an amount an offer to accept (a price agreed, met or proposed), in any trade.
_DEAL = (
    r"\b(deal|final|firm|lowest|take it|it'?s yours|can do|could (do|go)|how about|meet you"
    r"|split the difference)\b"
)
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
    """'always'; 'objection_open' (the customer's last turn raised a concern); or 'opening'
    (the call is still in its opening: one of the agent's first OPENING_AGENT_TURNS turns, every
    earlier one an opening too, and no agent turn so far, this one included, has talked
    about the offer)."""
    words: str = ""
    """More words for the step this rule spots, beyond its move's (STEP_WORDS): where a world
    names its moves its own way, the rule cues the move whose words share most with these."""

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
        r"|\b(good)?bye\b|\btake care\b|anything else (i can|you need)"
        r"|thank(s| you)( so much| again)? for (chatting|talking|your time)"
        # Thanks that open the turn (not for calling, and not after a hello: those greet), or
        # thanks for the help.
        r"|^(?!\W*(hi|hello|hey|hiya|howdy|good (morning|afternoon|evening|day)|greetings)\b)"
        r"\W*(\w+\W+){0,2}(thanks|thank you|thanks a (lot|bunch))\b"
        r"(?!\s+for\s+(calling|getting in touch|contacting|reaching out|asking))"
        r"|appreciate (it|your (help|support|generosity|donation|contribution)))",
    ),
    MoveRule(
        "offer_slot",
        "names a day or a time: a concrete slot to say yes to",
        r"(\b(mon|tues|wednes|thurs|fri|satur|sun)day\b|\b\d{1,2}(:\d\d)?\s?(am|pm)\b"
        r"|\bavailability\b|\bwhich (time|day|slot) (works|suits))",
        words="arrange book schedule appointment date meet visit collect pickup delivery",
    ),
    MoveRule(
        "offer_slot",
        "names an amount or a price: a concrete offer to say yes to",
        rf"({_GIVE}[^.?!]{{0,40}}{_AMOUNT}|{_AMOUNT}[^.?!]{{0,40}}{_GIVE}"
        rf"|{_AMOUNT}[^.?!]{{0,40}}{_DEAL}|{_DEAL}[^.?!]{{0,40}}{_AMOUNT}"
        # a bare number offered in a trade: "I could go to 170", "how about 150?"
        r"|\b(can do|could (do|go)( to)?|how about|meet you at|go (to|as low as))\s+\d+\b"
        r"|how much (would|could|can|will|do) you|(have|put) you down for)",
        words="price amount cost offer counter negotiate haggle deal donate give",
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
        "confirm",
        "checks that it has understood what the customer said",
        r"(just to confirm|confirm that|got it right|understood correctly|is that right"
        r"|if I understand|did you say)",
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
        r"(so you('re| are) looking|have you (ever )?heard (of|about)"
        r"|are you familiar|do you (know|have|like|ever)|have you ever (donated|given|heard)"
        r"|what do you (think|know)|are you (a parent|someone who))",
    ),
    MoveRule(
        "confirm",
        "ends on a question to the customer about themselves",
        r"\byou(r|rs|rself)?\b[^.!?]*\?+\W*$",
    ),
    MoveRule("give_details", "gives details of the offer (the flat, the charity)", _PITCH),
    MoveRule(
        "greet",
        "small talk at the start, before the offer comes up: rapport, the greeting's job",
        r".",
        when="opening",
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

OPENING_AGENT_TURNS = 3
"""A call's opening is at most the agent's first three turns: past them, small talk is not the
greeting's job any more (real chats' openings seldom run longer; a seller's "$160 even and you
have a deal" is never one)."""
# The rule whose own words (hello, how are you, nice to meet you) make any turn a greeting,
# wherever it falls in the call.
GREETING_RULE = next(
    index for index, rule in enumerate(MOVE_RULES) if rule.move == "greet" and rule.when == "always"
)


def _agent_turns(context: Sequence[Mapping[str, Any]]) -> list[int]:
    return [index for index, turn in enumerate(context) if turn.get("speaker") == "agent"]


def _rules_opening(context: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the call is still in its opening by the rules alone: under OPENING_AGENT_TURNS
    agent turns so far, each of them a greeting by the rules."""
    earlier = _agent_turns(context)
    if len(earlier) >= OPENING_AGENT_TURNS:
        return False
    return all(
        MOVE_RULES[_first_rule(context[:index], context[index].get("text") or "")[0]].move
        == "greet"
        for index in earlier
    )


def _first_rule(
    context: Sequence[Mapping[str, Any]], text: str, *, opening: bool | None = None
) -> tuple[int, str | None]:
    """The index of the first rule (MOVE_RULES) that labels the turn, and the concern the
    customer's last turn raised (None if none). `opening` says whether the call is still in
    its opening (by default, as the rules themselves label the earlier turns)."""
    last_customer = next(
        (turn.get("text") or "" for turn in reversed(context) if turn.get("speaker") == "customer"),
        "",
    )
    objection = customer_doubt(last_customer)
    pitched = any(
        _PITCH_RE.search(turn.get("text") or "")
        for turn in context
        if turn.get("speaker") == "agent"
    ) or bool(_PITCH_RE.search(text))
    for index, (rule, pattern) in enumerate(zip(MOVE_RULES, _COMPILED, strict=True)):
        if rule.when == "objection_open" and objection is None:
            continue
        if rule.when == "opening":
            if pitched:
                continue
            if opening is None:
                opening = _rules_opening(context)
            if not opening:
                continue
        if pattern.search(text):
            return index, objection
    raise AssertionError("the last rule matches any text")  # pragma: no cover


def label_move(context: Sequence[Mapping[str, Any]], text: str) -> tuple[str, str]:
    """The move an agent turn makes and why, given the call so far (turns with "speaker"
    and "text", oldest first)."""
    index, objection = _first_rule(context, text or "")
    rule = MOVE_RULES[index]
    reason = f"{rule.reason} ({objection})" if rule.when == "objection_open" else rule.reason
    return rule.move, reason


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


# --- A world's own moves -----------------------------------------------------------------

# Where a world does not name the rule's move itself, the generic step it stands for
# (arena.moves.GENERIC_MOVES uses these names).
ROLE_OF_RULE_MOVE: dict[str, str] = {
    "greet": "greet",
    "give_details": "inform",
    "confirm": "ask",
    "handle_objection": "handle_objection",
    "reassure": "reassure",
    "propose_viewing": "propose_next_step",
    "offer_slot": "propose_next_step",
    "close": "close",
}
# What each rule move's step is called in other words: where a world names its moves its own
# way ("tell_the_story", "negotiate_price"), a rule cues the move whose name and description
# share the most of these words and of the rule's own reason.
STEP_WORDS: dict[str, str] = {
    "greet": "greet greeting hello hi open opening welcome introduce rapport",
    "give_details": "inform explain describe detail tell story facts offer item what",
    "confirm": "ask question check confirm know need situation understand",
    "handle_objection": "objection concern doubt worry refusal answer raised counter",
    "reassure": "reassure trust safe safety ease fair honest pressure",
    "propose_viewing": "propose suggest ask commitment next step donate donation viewing",
    "offer_slot": "concrete suggest",
    "close": "close wrap thank goodbye agreed",
}
# A move is an opening when its name or description uses one of these (after move_tokens).
OPENING_WORDS_TEXT = (
    "greet greeting hello hi hey open opening welcome introduce introduction rapport"
)
# The last rules catch whatever nothing specific matched: a weaker cue than a real match.
# Answering the concern just raised is read from the call, not the words: a full cue.
_FALLBACK_RULES = frozenset(
    index
    for index, rule in enumerate(MOVE_RULES)
    if rule.pattern in {r".", r"\?", r"(?s).*"} and rule.when != "objection_open"
)
# Function words carry no move; a description's "about" must not make "about" a cue.
_STOPWORD_TEXT = (
    "a about after again all also am an and any are as at be been before being both but by "
    "can could did do does doing done for from get got had has have having he her here hers "
    "him his how i i'm if in into is it it's its just me more most much my no nor not now of "
    "off on once one only or other our ours out over own really same she should so some such "
    "than that that's the their theirs them then there these they they're this those through "
    "to too under until up us very was we we're were what when where which while who whom why "
    "will with would you you're your yours"
)
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


def _stem(word: str) -> str:
    # Crude on purpose (no dictionary): donate/donating/donation/donated share "donat".
    for suffix in ("ations", "ation", "ings", "ing", "ed", "es", "s", "e"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)]
    return word


def move_tokens(text: str) -> list[str]:
    """The words the labeller compares: lower case, stop words out, crudely stemmed."""
    words = _WORD.findall((text or "").lower().replace("_", " "))
    return [_stem(word) for word in words if word not in _STOPWORDS]


@dataclass(frozen=True)
class MoveLabellerConfig:
    cue_weight: float = 0.3
    """What a specific labelling rule adds to the move it maps to (a similarity is 0..1)."""
    fallback_cue_weight: float = 0.12
    """What a catch-all rule (anything with a question mark, any other text) adds."""
    correction_weight: float = 1.0
    """How much the centroid of a move's corrections counts against its description."""


@dataclass(frozen=True)
class Correction:
    """A reviewer's move for one agent turn: the call it is in, the call so far, the text."""

    call: str
    context: tuple[Mapping[str, Any], ...]
    text: str
    move: str


def _unit(vector: dict[str, float]) -> dict[str, float]:
    norm = math.sqrt(sum(value * value for value in vector.values()))
    return {key: value / norm for key, value in vector.items()} if norm else {}


def _dot(left: dict[str, float], right: dict[str, float]) -> float:
    if len(left) > len(right):
        left, right = right, left
    return sum(value * right.get(key, 0.0) for key, value in left.items())


@dataclass
class WorldMoveLabeller:
    """Labels agent turns with a world's own moves. Build it with `fit_world_labeller`."""

    moves: list[dict[str, str]]
    idf: dict[str, float]
    descriptions: dict[str, dict[str, float]]
    corrections: dict[str, dict[str, float]]
    correction_counts: dict[str, int]
    rule_move: dict[int, str | None]
    """Each labelling rule's (MOVE_RULES index) counterpart among the world's moves."""
    openings: frozenset[str] = frozenset()
    """The world's opening moves: given past the call's opening only where a greeting's own
    words are said (GREETING_RULE)."""
    unseen_idf: float = 1.0
    config: MoveLabellerConfig = field(default_factory=MoveLabellerConfig)

    @property
    def names(self) -> list[str]:
        return [move["name"] for move in self.moves]

    def _vector(self, text: str) -> dict[str, float]:
        # A word no move or correction uses still counts in the turn's length (as the rarest
        # word): one shared word in a long turn is a weak match, not a strong one.
        counts = Counter(move_tokens(text))
        unseen = self.unseen_idf
        return _unit(
            {token: count * self.idf.get(token, unseen) for token, count in counts.items()}
        )

    def _in_opening(self, context: Sequence[Mapping[str, Any]]) -> bool:
        """Whether the call is still in its opening: under OPENING_AGENT_TURNS agent turns so
        far, each of them given one of the world's opening moves by this labeller."""
        earlier = _agent_turns(context)
        if len(earlier) >= OPENING_AGENT_TURNS or not self.openings:
            return False
        return all(
            self.label(context[:index], context[index].get("text") or "")[0] in self.openings
            for index in earlier
        )

    def _rule_and_opening(
        self, context: Sequence[Mapping[str, Any]], text: str
    ) -> tuple[int, bool]:
        opening = self._in_opening(context)
        return _first_rule(context, text, opening=opening)[0], opening

    def scores(
        self,
        context: Sequence[Mapping[str, Any]],
        text: str,
        *,
        rule_index: int | None = None,
        opening: bool | None = None,
    ) -> dict[str, float]:
        """Each move's score for an agent turn (the label is the highest allowed: past the
        call's opening, an opening move only where the turn says a greeting's words)."""
        if rule_index is None or opening is None:
            rule_index, opening = self._rule_and_opening(context, text)
        vector = self._vector(text)
        scores = {
            name: _dot(vector, self.descriptions[name])
            + self.config.correction_weight * _dot(vector, self.corrections.get(name, {}))
            for name in self.names
        }
        cued = self.rule_move.get(rule_index)
        if cued is not None:
            weight = (
                self.config.fallback_cue_weight
                if rule_index in _FALLBACK_RULES
                else self.config.cue_weight
            )
            scores[cued] += weight
        return scores

    def _allowed(self, rule_index: int, opening: bool) -> list[str]:
        if opening or rule_index == GREETING_RULE:
            return self.names
        return [name for name in self.names if name not in self.openings] or self.names

    def label(self, context: Sequence[Mapping[str, Any]], text: str) -> tuple[str, str]:
        """(move, reason) for an agent turn, given the call so far."""
        rule_index, opening = self._rule_and_opening(context, text)
        scores = self.scores(context, text, rule_index=rule_index, opening=opening)
        # Ties go to the earlier move in the world's order (stable, never random).
        best = max(self._allowed(rule_index, opening), key=lambda name: scores[name])
        vector = self._vector(text)
        parts = [f"{scores[best]:.2f} overall"]
        description = _dot(vector, self.descriptions[best])
        if description:
            parts.append(f"like its description {description:.2f}")
        corrected = _dot(vector, self.corrections.get(best, {}))
        if corrected:
            parts.append(
                f"like {self.correction_counts[best]} reviewer correction(s) {corrected:.2f}"
            )
        if self.rule_move.get(rule_index) == best:
            parts.append(f"cue: {MOVE_RULES[rule_index].reason}")
        return best, "; ".join(parts)

    def label_turns(self, turns: Sequence[Mapping[str, Any]]) -> list[tuple[str, str] | None]:
        """(move, reason) for every agent turn of a call, None for customer turns."""
        return [
            self.label(turns[:index], turn.get("text") or "")
            if turn.get("speaker") == "agent"
            else None
            for index, turn in enumerate(turns)
        ]


def opening_moves(moves: Sequence[Mapping[str, str]]) -> frozenset[str]:
    """The world's opening moves: those whose name or description speaks of opening or
    greeting. A world without one has none (its first move may be a real step, "pitch", that
    must stay free to label any turn)."""
    vocabulary = set(move_tokens(OPENING_WORDS_TEXT))
    return frozenset(
        move["name"]
        for move in moves
        if vocabulary & set(move_tokens(f"{move['name']} {move.get('description', '')}"))
    )


def _rule_moves_onto(moves: Sequence[Mapping[str, str]]) -> dict[int, str | None]:
    """Each rule's (MOVE_RULES index) counterpart among the world's moves: the rule move's own
    name, else the generic step it stands for, else the move whose words share most with the
    rule's reason and its step's words (STEP_WORDS); None where none shares a word, and that
    rule then cues nothing. Only the greeting rules may land on an opening move: small talk
    words in a description ("before the charity comes up") must not make one the home of
    every detail or offer."""
    names = [move["name"] for move in moves]
    openings = opening_moves(moves)
    documents = {
        move["name"]: set(move_tokens(f"{move['name']} {move.get('description', '')}"))
        for move in moves
    }
    mapping: dict[int, str | None] = {}
    for index, rule in enumerate(MOVE_RULES):
        role = ROLE_OF_RULE_MOVE[rule.move]
        if rule.move in names:
            mapping[index] = rule.move
            continue
        if role in names:
            mapping[index] = role
            continue
        candidates = [
            name for name in names if (name in openings) == (rule.move == "greet")
        ] or names
        words = set(
            move_tokens(f"{rule.move} {role} {rule.reason} {STEP_WORDS[rule.move]} {rule.words}")
        )
        overlap = {name: len(words & documents[name]) for name in candidates}
        best = max(candidates, key=lambda name: overlap[name])
        mapping[index] = best if overlap[best] else None
    return mapping


def fit_world_labeller(
    moves: Sequence[Mapping[str, str]],
    corrections: Sequence[Correction] = (),
    *,
    config: MoveLabellerConfig | None = None,
) -> WorldMoveLabeller:
    """A labeller for a world's moves: descriptions, the rules as cues, and the corrections
    (whose move is not one of the world's are ignored: a renamed move's old corrections)."""
    moves = [{"name": str(m["name"]), "description": str(m.get("description", ""))} for m in moves]
    if len(moves) < 2:
        raise ValueError("a world has at least two moves to label with")
    names = [move["name"] for move in moves]
    corrections = [c for c in corrections if c.move in names]
    documents = [move_tokens(f"{m['name']} {m['description']}") for m in moves]
    documents += [move_tokens(c.text) for c in corrections]
    frequency = Counter(token for document in documents for token in set(document))
    total = len(documents)
    idf = {token: math.log((1 + total) / (1 + count)) + 1.0 for token, count in frequency.items()}
    labeller = WorldMoveLabeller(
        moves=moves,
        idf=idf,
        descriptions={},
        corrections={},
        correction_counts=Counter(c.move for c in corrections),
        rule_move=_rule_moves_onto(moves),
        openings=opening_moves(moves),
        unseen_idf=math.log(1 + total) + 1.0,
        config=config or MoveLabellerConfig(),
    )
    for move in moves:
        labeller.descriptions[move["name"]] = labeller._vector(
            f"{move['name']} {move['description']}"
        )
    sums: dict[str, Counter[str]] = {}
    for correction in corrections:
        total_vector = sums.setdefault(correction.move, Counter())
        total_vector.update(labeller._vector(correction.text))
    labeller.corrections = {name: _unit(dict(vector)) for name, vector in sums.items()}
    return labeller


def labeller_fingerprint(
    moves: Sequence[Mapping[str, str]], corrections: Sequence[Correction]
) -> str:
    """Changes whenever the labeller would: the moves, or any correction."""
    digest = hashlib.sha256()
    for move in moves:
        digest.update(f"{move['name']}\x1f{move.get('description', '')}\x1e".encode())
    for c in sorted(corrections, key=lambda c: (c.call, len(c.context), c.text)):
        digest.update(f"{c.call}\x1f{len(c.context)}\x1f{c.move}\x1f{c.text}\x1e".encode())
    return digest.hexdigest()[:16]


AGREEMENT_FOLDS = 5


def _fold_of(call: str, folds: int) -> int:
    return int(hashlib.sha256(call.encode()).hexdigest(), 16) % folds


def _folds_by_call(calls: set[str], folds: int) -> dict[str, int]:
    """Each call's fold: by a hash of the call, or each call its own fold where there are no
    more calls than folds (a hash would put some together, and a fold holding every call
    would be labelled by a labeller that learned from nothing)."""
    if len(calls) <= folds:
        return {call: index for index, call in enumerate(sorted(calls))}
    return {call: _fold_of(call, folds) for call in calls}


def labeller_agreement(
    moves: Sequence[Mapping[str, str]],
    corrections: Sequence[Correction],
    *,
    folds: int = AGREEMENT_FOLDS,
    config: MoveLabellerConfig | None = None,
) -> dict[str, Any]:
    """How often the labeller gives the reviewer's move on corrected turns it did not learn
    from: corrections split into folds BY CALL; each fold labelled by a labeller fitted on the
    others' corrections ("accuracy") and by descriptions and cues alone ("without
    corrections"). Rates are None with no corrections."""
    names = {move["name"] for move in moves}
    usable = [c for c in corrections if c.move in names]
    plain = fit_world_labeller(moves, (), config=config)
    agree = agree_plain = 0
    fold_of = _folds_by_call({c.call for c in usable}, folds)
    for fold in sorted(set(fold_of.values())):
        test = [c for c in usable if fold_of[c.call] == fold]
        train = [c for c in usable if fold_of[c.call] != fold]
        fitted = fit_world_labeller(moves, train, config=config)
        for correction in test:
            agree += fitted.label(correction.context, correction.text)[0] == correction.move
            agree_plain += plain.label(correction.context, correction.text)[0] == correction.move
    total = len(usable)
    return {
        "corrected_turns": total,
        "calls": len({c.call for c in usable}),
        "folds": folds,
        "accuracy": agree / total if total else None,
        "accuracy_without_corrections": agree_plain / total if total else None,
        "agree": agree,
    }
