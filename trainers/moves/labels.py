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

A world has its own moves ({"name", "description"}; lettings keeps the eight, other worlds a
generic set or their own), so the turns of a world are labelled with ITS moves by
`WorldMoveLabeller` (see "A world's own moves" below): TF-IDF similarity of the turn to each
move's name and description, plus the rules above as cue words (their move mapped onto the
world's moves), plus the reviewers' corrections as a nearest-centroid pull. The labeller is a
pure function of (moves, corrections): a correction changes the labels given after it, and
`labeller_agreement` measures it against the corrections, held out by call.

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


def _first_rule(context: Sequence[Mapping[str, Any]], text: str) -> tuple[int, str | None]:
    """The index of the first rule (MOVE_RULES) that labels the turn, and the concern the
    customer's last turn raised (None if none)."""
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
    for index, (rule, pattern) in enumerate(zip(MOVE_RULES, _COMPILED, strict=True)):
        if rule.when == "objection_open" and objection is None:
            continue
        if rule.when == "before_pitch" and pitched:
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
# The last rules catch whatever nothing specific matched: a weaker cue than a real match.
_FALLBACK_RULES = frozenset(
    index for index, rule in enumerate(MOVE_RULES) if rule.pattern in {r".", r"\?", r"(?s).*"}
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
    rule_move: dict[str, str | None]
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

    def scores(
        self, context: Sequence[Mapping[str, Any]], text: str, *, rule_index: int | None = None
    ) -> dict[str, float]:
        """Each move's score for an agent turn (the label is the highest)."""
        vector = self._vector(text)
        scores = {
            name: _dot(vector, self.descriptions[name])
            + self.config.correction_weight * _dot(vector, self.corrections.get(name, {}))
            for name in self.names
        }
        if rule_index is None:
            rule_index = _rule_index(context, text)
        cued = self.rule_move.get(MOVE_RULES[rule_index].move)
        if cued is not None:
            weight = (
                self.config.fallback_cue_weight
                if rule_index in _FALLBACK_RULES
                else self.config.cue_weight
            )
            scores[cued] += weight
        return scores

    def label(self, context: Sequence[Mapping[str, Any]], text: str) -> tuple[str, str]:
        """(move, reason) for an agent turn, given the call so far."""
        rule_index = _rule_index(context, text)
        scores = self.scores(context, text, rule_index=rule_index)
        # Ties go to the earlier move in the world's order (stable, never random).
        best = max(self.names, key=lambda name: scores[name])
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
        rule = MOVE_RULES[rule_index]
        if self.rule_move.get(rule.move) == best:
            parts.append(f"cue: {rule.reason}")
        return best, "; ".join(parts)

    def label_turns(self, turns: Sequence[Mapping[str, Any]]) -> list[tuple[str, str] | None]:
        """(move, reason) for every agent turn of a call, None for customer turns."""
        return [
            self.label(turns[:index], turn.get("text") or "")
            if turn.get("speaker") == "agent"
            else None
            for index, turn in enumerate(turns)
        ]


def _rule_index(context: Sequence[Mapping[str, Any]], text: str) -> int:
    return _first_rule(context, text)[0]


def _rule_moves_onto(moves: Sequence[Mapping[str, str]]) -> dict[str, str | None]:
    """Each rule move's counterpart among the world's moves: the same name, else the generic
    step it stands for, else the world move whose words are closest to the rule's (None
    where no move shares a word with it: that rule then cues nothing)."""
    names = [move["name"] for move in moves]
    documents = {
        move["name"]: set(move_tokens(f"{move['name']} {move.get('description', '')}"))
        for move in moves
    }
    mapping: dict[str, str | None] = {}
    for rule_move, role in ROLE_OF_RULE_MOVE.items():
        if rule_move in names:
            mapping[rule_move] = rule_move
        elif role in names:
            mapping[rule_move] = role
        else:
            reasons = " ".join(rule.reason for rule in MOVE_RULES if rule.move == rule_move)
            words = set(move_tokens(f"{rule_move} {role} {reasons}"))
            overlap = {name: len(words & documents[name]) for name in names}
            best = max(names, key=lambda name: overlap[name])
            mapping[rule_move] = best if overlap[best] else None
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
