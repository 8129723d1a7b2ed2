"""The default rubric judge: deterministic, model-free scoring of one agent reply.

It scores the reply the agent gives next, given the call so far, on its world's rubric: the
dimensions a reviewer ticks as reasons in the Duel. A world keeps the description's seven
(dialect, respect, accuracy, progress, family, timing, compliance; DEFAULT_RUBRIC) or names
its own (`Dimension`: a name, a label, a one-line meaning and a weight). Each of the seven is
one small rule function below whose docstring says what it rewards and what it penalises, so
a reviewer can read why a reply scored what it did; each rule also returns one short human
sentence (the `reasons`). A world's own dimension has no hand-written rule: one general
mechanism scores it from its meaning (`rule_by_meaning`).

Pure Python on purpose: no Django, no network, no model. Apps (judging moments,
auto-pairs, Evaluate) and trainers (reward shaping on the simulator) both import it.

The rules serve two worlds at once: lettings calls (a letting agent and someone looking
to rent) and real persuasion chats (a persuader asking for a charity donation). They are
general conversational habits and are deliberately not tuned to either data set.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "DIMENSIONS",
    "DIMENSION_HELP",
    "DIMENSION_LABELS",
    "DIMENSION_WEIGHTS",
    "DEFAULT_RUBRIC",
    "RULES",
    "Dimension",
    "Judge",
    "Judgement",
    "RubricJudge",
    "Turn",
    "Verdict",
    "weighted_total",
]

DIMENSIONS: tuple[str, ...] = (
    "dialect",
    "respect",
    "accuracy",
    "progress",
    "family",
    "timing",
    "compliance",
)

DIMENSION_LABELS: dict[str, str] = {
    "dialect": "Dialect",
    "respect": "Respect",
    "accuracy": "Accuracy",
    "progress": "Progress",
    "family": "Family",
    "timing": "Timing",
    "compliance": "Compliance",
}

DIMENSION_HELP: dict[str, str] = {
    "dialect": "Whether the reply speaks in the customer's register, casual or formal.",
    "respect": "Whether the reply is courteous, never dismissive, pushy or insulting.",
    "accuracy": "Whether the reply claims only what the call supports, without absolute promises.",
    "progress": "Whether the reply moves the call forward with a question or a concrete next step.",
    "family": "Whether the reply acknowledges the family (children, partner) the customer raised.",
    "timing": "Whether the reply's move suits the point in the call and the customer's urgency.",
    "compliance": "Whether the reply avoids pressure, discrimination and asking for card details.",
}

# Compliance and respect weigh more: a reply that breaks the rules or insults the
# customer is a bad reply however well it moves the call, and the simulator's reward
# penalises pushy or non-compliant moves for the same reason. The total is the weighted
# mean of the seven scores: sum(weight * score) / sum(weight); the weights sum to 8.5.
DIMENSION_WEIGHTS: dict[str, float] = {
    "dialect": 1.0,
    "respect": 1.5,
    "accuracy": 1.0,
    "progress": 1.0,
    "family": 1.0,
    "timing": 1.0,
    "compliance": 2.0,
}

_PRECISION = 4  # scores are rounded so equal inputs give byte-equal judgements


@dataclass(frozen=True)
class Dimension:
    """One dimension of a world's rubric, and the reason tag reviewers tick for it: its name
    (a slug, the key of every score and reason), its label, its one-line meaning (`help`,
    shown on the Duel's tag and given to a model judge) and its weight in the total."""

    name: str
    label: str
    help: str
    weight: float

    def as_dict(self) -> dict[str, object]:
        return {"name": self.name, "label": self.label, "help": self.help, "weight": self.weight}


def dimension_label(name: str) -> str:
    """The label a name gets when none is given: "bike-condition" -> "Bike Condition"."""
    return name.replace("-", " ").replace("_", " ").strip().title()


def dimension_default(name: str) -> Dimension:
    """One of the seven as the description defines it; any other name with a label made from
    it, no meaning and weight 1."""
    if name in DIMENSION_LABELS:
        label, meaning = DIMENSION_LABELS[name], DIMENSION_HELP[name]
        return Dimension(name, label, meaning, DIMENSION_WEIGHTS[name])
    return Dimension(name, dimension_label(name), "", 1.0)


# The rubric of a world that names none of its own: the description's seven.
DEFAULT_RUBRIC: tuple[Dimension, ...] = tuple(dimension_default(name) for name in DIMENSIONS)


def rubric_from_stored(stored: object) -> tuple[Dimension, ...]:
    """A rubric from what a world stores (World.dimensions): a list of {name, label, help,
    weight}; a bare name (the field's earlier form) or a missing part is filled in as
    `dimension_default` fills it. Nothing usable: the seven."""
    dimensions: list[Dimension] = []
    seen: set[str] = set()
    for item in stored if isinstance(stored, list | tuple) else ():
        raw = {"name": item} if isinstance(item, str) else item
        if not isinstance(raw, Mapping) or not isinstance(raw.get("name"), str):
            continue
        name = raw["name"].strip()
        if not name or name in seen:
            continue
        seen.add(name)
        default = dimension_default(name)
        weight = raw.get("weight", default.weight)
        dimensions.append(
            Dimension(
                name=name,
                label=str(raw.get("label") or default.label),
                help=str(raw["help"]) if isinstance(raw.get("help"), str) else default.help,
                weight=float(weight)
                if isinstance(weight, int | float) and not isinstance(weight, bool) and weight > 0
                else default.weight,
            )
        )
    return tuple(dimensions) or DEFAULT_RUBRIC


# --- public types ---------------------------------------------------------------------


@dataclass(frozen=True)
class Turn:
    """One turn of a call: who spoke ("agent" or "customer") and what they said."""

    speaker: str
    text: str

    def __post_init__(self) -> None:
        if self.speaker not in ("agent", "customer"):
            raise ValueError(f"speaker must be 'agent' or 'customer', not {self.speaker!r}")


@dataclass(frozen=True)
class Judgement:
    """A judge's verdict on one reply: a 0..1 score and a reason per dimension."""

    scores: dict[str, float]
    total: float
    judge_model: str
    reasons: dict[str, str]
    # The probability the call is won given the call so far and this reply: a fitted judge's,
    # where its world has outcome labels (None from judges that cannot say).
    won_probability: float | None = None

    def to_dict(self) -> dict[str, object]:
        """Plain values only (for JSON, task results and the database)."""
        return {
            "scores": {name: float(score) for name, score in self.scores.items()},
            "total": float(self.total),
            "judge_model": str(self.judge_model),
            "reasons": {name: str(self.reasons.get(name, "")) for name in self.scores},
        }


@runtime_checkable
class Judge(Protocol):
    """What every judge offers (the rubric judge here, the model and fitted judges beside it),
    and what a caller asks of a judge instead of its class:
      quick  it scores in this process, thousands of replies a second (the rubric judge): a
             caller judges its missing scores on the spot and gives it a single slot;
      paid   each score is a call to a provider's model: nothing spends calls on it unasked
             (the on-topic guard does not measure its floor)."""

    model_name: str
    quick: bool
    paid: bool

    def score(self, context: Sequence[Turn], reply: str) -> Judgement: ...


@runtime_checkable
class ManyJudge(Judge, Protocol):
    """A judge that also scores many items at once (the fitted judge: one batch, one pass of
    its base for all of them); each result is its scores, total, won_probability."""

    def score_many(
        self, items: Sequence[tuple[Sequence[Any], str]], *, digits: int | None = 4
    ) -> list[dict[str, Any]]: ...


# A rule's answer: the dimension's score (0..1) and the one sentence that explains it.
Verdict = tuple[float, str]


# --- patterns (compiled once: the judge must manage thousands of replies a second) ----

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")

# Words that carry no topic: used to tell whether a reply takes up what was asked.
_STOPWORD_TEXT = """
    a an the and or but if so to of in on at for with from by as is are was were be
    been am do does did have has had i you he she it we they me my your our their them
    us this that these those there here what which who whom whose when where why how
    can could would should will shall may might must not no yes just really very too
    also about any some all more most much many like get got im i'm you're it's that's
    don't dont its than then well oh ok okay hi hello hey thanks thank please yeah yep
    sure know think one out up into over what's let let's good great nice
"""
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())

# Register markers, looked up word by word (sets are much faster than long regex
# alternations). Casual: chat greetings and fillers, contractions (also the
# apostrophe-less ones people type), a lower-case "i", "!", emoticons. Formal: set
# phrases, uncontracted forms, modal verbs, honorifics.
_CASUAL_TEXT = """
    hi hey hiya yeah yea yep yup nope nah gonna wanna gotta kinda sorta lol lmao omg btw
    ok okay cool awesome cheers thanks thx dude mate guys stuff ugh wow cuz ya haha
    hahaha hehe im dont cant didnt isnt ive youre thats whats doesnt wasnt tbh fancy
    brilliant totally gotcha sorted ta yay super
    it's that's what's there's here's he's she's who's let's
"""
_FORMAL_TEXT = """
    please kindly certainly indeed regards sir madam cannot would could shall
    appreciate delighted pleased assist enquire enquiry inquire inquiry furthermore
    however
"""
_FORMAL_PAIRS_TEXT = """
    good_morning good_afternoon good_evening good_day thank_you i_am do_not does_not
    did_not it_is that_is you_are we_are i_will may_i
"""
_CASUAL_WORDS = frozenset(_CASUAL_TEXT.split())
_CONTRACTION_ENDINGS = ("n't", "'m", "'re", "'ll", "'ve", "'d")
_FORMAL_WORDS = frozenset(_FORMAL_TEXT.split())
_FORMAL_PAIRS = frozenset(tuple(pair.split("_")) for pair in _FORMAL_PAIRS_TEXT.split())
_LOWERCASE_I = re.compile(r"i(?<![A-Za-z']i)(?![A-Za-z])")
_EMOTICON = re.compile(r"[:;]-?[)(DPp]|\u263a|[\U0001F600-\U0001F64F]")

# Respect. "whatever" counts only on its own ("Whatever."), not in "I'll match whatever
# you give"; "you need to" not in "all you need to do is".
_DISMISSIVE = re.compile(
    r"\b(?:obviously|calm down|(?<!all )you need to|i already told you"
    r"|you don't understand|don't get it|clearly you|are you serious|no offen[cs]e"
    r"|stupid|dumb|idiot|ridiculous|get over it|your problem|not my problem|shut up"
    r"|cheap|stingy|you people|just sign)\b"
    r"|(?:^|[.!?]\s+)(?:listen|look|whatever)(?:[,.!]|$)|\bseriously\?"
)
_COURTESY = re.compile(
    r"\b(?:please|thank you|thanks|appreciate|understand|sorry|happy to|glad"
    r"|of course|no problem|my pleasure)\b"
)
# Three capitalised words in a row is shouting; a lone acronym (NHS, UNICEF) is not.
_SHOUTING = re.compile(r"\b[A-Z]{2,}(?:[\s,.!?'\"-]+[A-Z]{2,}\b){2,}")
_MULTI_BANG = re.compile(r"!{2,}|\?!|!\?")

# Accuracy.
_STRONG_ABSOLUTE = re.compile(
    r"\b(?:guarantee[ds]?|definitely|promise[sd]?|for sure|no doubt|without fail"
    r"|absolutely certain|100 percent|risk[- ]free|zero risk)\b|\b100 ?%"
)
_WEAK_ABSOLUTE = re.compile(r"\b(?:always|never|every single|nothing to worry about)\b")
_HEDGE = re.compile(
    r"\b(?:i think|i believe|as far as i know|usually|typically|generally|might"
    r"|around|roughly|approximately|let me check|i'll check|i will check"
    r"|i'm not sure|i am not sure|according to|if i remember)\b"
)
_CLOCK_TIME = re.compile(r"\b\d{1,2}(?::\d{2})?\s*(?:am|pm)\b|\b\d{1,2}:\d{2}\b")
# (currency)(number)(unit): a currency or unit makes a figure a claim about money/rates.
_NUMBER = re.compile(r"([£$€])?(\d[\d,]*(?:\.\d+)?)(\s*(?:%|percent|pounds|dollars|pcm|p/?m))?")
_BARE_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")

# "I can't guarantee where it goes" and "you don't have to give bank details" are
# honest, not claims or requests: a match negated earlier in its clause does not count.
_NEGATION = re.compile(
    r"\b(?:not|no|never|don't|dont|do not|can't|cant|cannot|won't|wont|will not"
    r"|doesn't|isn't|without)\b"
)
_CLAUSE_BREAK = re.compile(r"[.!?;]")

# Questions and answers.
_QUESTION_OPENER = re.compile(
    r"^(?:what|how|when|where|why|who|which|is|are|can|could|do|does|did|will|would"
    r"|should|have|has|any)\b"
)
_ANSWER_OPENER = re.compile(
    r"^(?:yes|yeah|yep|no|nope|sure|of course|certainly|absolutely|definitely|i'm"
    r"|i am|it's|it is|they|we|that|there|good(?! (?:morning|afternoon|evening|day))"
    r"|great|fine|well|not|unfortunately|sadly)\b"
)

# Progress: a concrete next step in either world (a viewing or a slot for lettings, a
# donation for persuasion) or an offer phrased as one.
_NEXT_STEP = re.compile(
    r"\b(?:viewing|view(?:ing)? it|com(?:e|ing) (?:and |to )?see|have a look|visit|slot"
    r"|appointment"
    r"|book(?:ing)?|arrange|schedule|donat(?:e|ion|ing)|contribut(?:e|ion)|pledge"
    r"|sign(?:ing)? up|register|shall i|shall we|would you like"
    r"|would you be (?:willing|interested)|can i (?:book|put)|how about|let's"
    r"|i can (?:book|send|arrange|hold|put)"
    r"|(?:on|this|next) (?:monday|tuesday|wednesday|thursday|friday|saturday|sunday"
    r"|weekend)|(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday) at"
    r"|\d{1,2}(?::\d{2})?\s*(?:am|pm))\b"
)
# An objection or worry in the customer's last turn (price, doubt, trust, timing), and
# the wording of a reply that takes it up rather than talking past it.
_OBJECTION = re.compile(
    r"\b(?:expensive|pricey|too much|bit much|over (?:my|our|what)|budget|afford"
    r"|not sure|unsure|worried|worry|concern(?:ed|s)?|hesitant|don't know|doubt"
    r"|scam|trust|need the money|can't really|rather not|not interested|too far"
    r"|too small)\b"
)
_TAKES_UP_OBJECTION = re.compile(
    r"\b(?:understand|get that|fair|hear you|makes sense|no worries|don't worry"
    r"|completely|totally|reassur[a-z]*|flexib[a-z]*|negotiat[a-z]*|options?"
    r"|alternatives?|instead|even (?:a|just)|any amount|no pressure|that's fine"
    r"|of course)\b"
)
_SMALL_TALK = re.compile(
    r"\b(?:weather|weekend|sunny|rain(?:y|ing)?|hot today|how are you"
    r"|how's your day|haha+|lol|nice day|holiday)\b"
)

# Family: the customer's own people ("my kids", "I have a baby") or what families ask
# about (schools, a nursery). "Save the Children" alone is not the customer's family.
_FAMILY_NOUNS = (
    r"(?:kids?|children|child|sons?|daughters?|bab(?:y|ies)|toddlers?|family|partner"
    r"|wife|husband|boyfriend|girlfriend|fianc[eé]e?|little ones?|twins|grandkids"
    r"|grandchildren|girls?|boys?)"
)
_CUSTOMER_FAMILY = re.compile(
    r"\b(?:my|our|i have|i've got|we have|we've got"
    r"|with (?:my|our|a|two|three|four|\d+))\s+(?:[a-z]+\s+){0,2}" + _FAMILY_NOUNS + r"\b"
    r"|\b(?:pregnant|expecting a baby|on the way|school run|schools?|nursery|catchment)\b"
)
_REPLY_FAMILY = re.compile(r"\b" + _FAMILY_NOUNS + r"\b|\bfamil(?:y|ies)\b")
_REPLY_FAMILY_CARE = re.compile(
    r"\b(?:safe|safety|secure|schools?|nursery|catchment|space|spacious|room|rooms"
    r"|bedrooms?|garden|park|parks|playground|quiet)\b"
)
# "I have no kids (of my own)" is the speaker's life, not a rule about tenants.
_NOT_MY_OWN = r"\bno(?<!have no)(?<!had no)(?<!got no)(?<!and no)(?<!or no) "
_NO_CHILDREN = re.compile(
    _NOT_MY_OWN + r"(?:children|kids|families)\b(?! of (?:my|our) own)"
    r"|\bnot (?:suitable|ideal) for (?:children|kids|families)\b"
    r"|\b(?:children|kids) (?:are )?not allowed\b"
)

# Timing.
_GREETING = re.compile(
    r"^\W*(?:hi|hello|hey|hiya|good (?:morning|afternoon|evening|day)|greetings)\b"
    r"|\b(?:how are you|nice to meet you|thanks for (?:calling|getting in touch))\b"
)
_COMMITMENT = re.compile(
    r"\b(?:sign(?:ing)?|contract|deposit|pay(?:ment)?|commit|donate|pledge|secure it"
    r"|lock (?:it )?in|take it)\b"
)
_CLOSING = re.compile(r"\b(?:goodbye|bye|have a (?:nice|good|great) (?:day|evening)|take care)\b")
_URGENCY = re.compile(
    r"\b(?:soon|this week|asap|urgent(?:ly)?|busy|no time|hurry|rush|quickly"
    r"|right away|as soon as|short on time|deadline|immediately|straight away)\b"
)
_CONCRETE_TIME = re.compile(
    r"\b(?:today|tonight|tomorrow|this (?:morning|afternoon|evening|week|weekend)"
    r"|monday|tuesday|wednesday|thursday|friday|saturday|sunday|right away"
    r"|straight away|right now|within (?:the hour|a day|\d+))\b"
    r"|\b\d{1,2}(?::\d{2})?\s*(?:am|pm)\b|\b\d{1,2}:\d{2}\b"
)

# Compliance.
_PRESSURE = re.compile(
    r"\b(?:only today|today only|last chance|act now|act fast|you must|hurry"
    r"|before it's gone|won't last|limited time|now or never|don't miss out"
    r"|final offer|someone else will (?:take|get|grab) it|sign (?:now|today|right now)"
    r"|decide (?:now|right now|today))\b"
)
_DISCRIMINATION = re.compile(
    _NOT_MY_OWN + r"(?:children|kids|families|dss|benefits|housing benefit"
    r"|foreigners|immigrants)\b(?! of (?:my|our) own)"
    r"|\bnot suitable for (?:children|kids|families)\b"
    r"|\b(?:don't|do not|won't|will not|can't|cannot) (?:take|accept|rent to)"
    r" (?:children|kids|families|dss|people on benefits|tenants on benefits"
    r"|foreigners|immigrants)\b"
    r"|\b(?:english|british|white|black|asian|indian|christian|muslim|jewish|young"
    r"|professionals?|couples|singles)(?: people| tenants| applicants)? only\b"
)
_PAYMENT_DETAILS = re.compile(
    r"\b(?:card|bank|account|banking) (?:number|details|info(?:rmation)?)\b"
    r"|\bsort code\b|\bcvv\b|\bcvc\b|\bsecurity code\b|\bpin (?:number|code)\b"
    r"|\bpassword\b|\bexpiry date\b"
)
_GUARANTEE = re.compile(r"\bguarantee[ds]?\b|\b100 ?%|\b100 percent\b|\brisk[- ]free\b|\bno risk\b")


# --- what the rules read --------------------------------------------------------------


@dataclass(frozen=True)
class _Call:
    """The call so far, analysed once: all that the rules need from the context."""

    agent_turn_count: int
    # (signal, evidence) of all the customer's turns; see _register.
    customer_register: tuple[float, float]
    # The customer spoke of their own family, of schools or of a pregnancy; and whether
    # the agent has yet to acknowledge it (no agent turn since spoke to it).
    family_raised: bool
    family_pending: bool
    # The customer sounded in a hurry in either of their last two turns.
    urgent: bool
    # The customer's last turn asked something, and its topic words.
    asked: bool
    question_words: frozenset[str]
    # The customer's last turn raised an objection or a worry.
    objected: bool
    # Earlier agent turns, as word sets and as normalised strings, to catch repeats.
    agent_word_sets: tuple[frozenset[str], ...]
    agent_texts: frozenset[str]
    # Every number said on the call, normalised ("1,200" -> "1200").
    numbers: frozenset[str]


@dataclass(frozen=True)
class _Reply:
    original: str  # apostrophes normalised, case kept (for shouting, a lower-case "i")
    lowered: str
    words: tuple[str, ...]


def _normalise(text: str) -> str:
    # Some exported chats escape apostrophes (don\'t); undo that too.
    return text.replace("\u2019", "'").replace("\u2018", "'").replace("`", "'").replace("\\'", "'")


def _words(lowered: str) -> list[str]:
    return _WORD.findall(lowered)


def _content_words(words: Sequence[str]) -> frozenset[str]:
    return frozenset(word for word in words if word not in _STOPWORDS and len(word) > 2)


def _plain_number(number: str) -> str:
    return number.replace(",", "").rstrip(".")


def _analyse_call(context: Sequence[Turn]) -> _Call:
    return _analyse_turns(tuple(context))


# Auto-pairs and Evaluate judge several replies to one moment; the analysis is an
# immutable, pure function of the turns, so a bounded cache saves redoing it.
@functools.lru_cache(maxsize=512)
def _analyse_turns(turns: tuple[Turn, ...]) -> _Call:
    customer_original: list[str] = []
    agent_word_sets: list[frozenset[str]] = []
    agent_texts: set[str] = set()
    for turn in turns:
        text = _normalise(turn.text)
        if turn.speaker == "customer":
            customer_original.append(text)
        else:
            words = _words(text.lower())
            agent_word_sets.append(frozenset(words))
            agent_texts.add(" ".join(words))
    customer_lowered = [text.lower() for text in customer_original]
    customer_text = "\n".join(customer_lowered)
    last = customer_lowered[-1] if customer_lowered else ""
    family_raised = bool(_CUSTOMER_FAMILY.search(customer_text))
    return _Call(
        agent_turn_count=len(agent_word_sets),
        customer_register=_register("\n".join(customer_original), _words(customer_text)),
        family_raised=family_raised,
        family_pending=family_raised and _family_pending(turns),
        urgent=bool(_URGENCY.search("\n".join(customer_lowered[-2:]))),
        asked=_asked_question(last),
        question_words=_content_words(_words(last)),
        objected=bool(_OBJECTION.search(last)),
        agent_word_sets=tuple(agent_word_sets),
        agent_texts=frozenset(agent_texts),
        numbers=frozenset(
            _plain_number(number) for turn in turns for number in _BARE_NUMBER.findall(turn.text)
        ),
    )


def _family_pending(turns: Sequence[Turn]) -> bool:
    """Did the customer raise family after the agent's last turn that spoke to it?"""
    pending = False
    for turn in turns:
        lowered = _normalise(turn.text).lower()
        if turn.speaker == "customer":
            pending = pending or bool(_CUSTOMER_FAMILY.search(lowered))
        elif _REPLY_FAMILY.search(lowered) or _REPLY_FAMILY_CARE.search(lowered):
            pending = False
    return pending


def _analyse_reply(reply: str) -> _Reply:
    original = _normalise(reply)
    lowered = original.lower()
    return _Reply(original=original, lowered=lowered, words=tuple(_words(lowered)))


def _register(original: str, words: Sequence[str]) -> tuple[float, float]:
    """(signal, evidence): signal in [-1, 1], positive casual, negative formal.

    Weak evidence (a single marker) is shrunk toward neutral, so one "would" does not
    make a turn formal.
    """
    casual = sum(
        1 for word in words if word in _CASUAL_WORDS or word.endswith(_CONTRACTION_ENDINGS)
    )
    casual += (
        min(1, len(_LOWERCASE_I.findall(original)))
        + min(2, original.count("!"))
        + min(1, len(_EMOTICON.findall(original)))
    )
    formal = sum(1 for word in words if word in _FORMAL_WORDS)
    formal += sum(1 for pair in pairwise(words) if pair in _FORMAL_PAIRS)
    evidence = float(casual + formal)
    if evidence == 0:
        return 0.0, 0.0
    return (casual - formal) / evidence * min(1.0, evidence / 2.0), evidence


def _register_label(signal: float) -> str:
    if signal > 0.2:
        return "casual"
    if signal < -0.2:
        return "formal"
    return "neutral"


def _asked_question(lowered: str) -> bool:
    if not lowered:
        return False
    return "?" in lowered or bool(_QUESTION_OPENER.match(lowered.strip()))


def _answers(call: _Call, reply: _Reply) -> bool:
    """Does the reply take up the question: an answer opener, or its topic words?"""
    if not reply.words:
        return False
    if _ANSWER_OPENER.match(reply.lowered.strip()):
        return True
    return bool(call.question_words & _content_words(reply.words))


def _asserted(pattern: re.Pattern[str], lowered: str) -> list[str]:
    """The matches of `pattern` that are not negated earlier in their own clause."""
    found: list[str] = []
    for match in pattern.finditer(lowered):
        before = lowered[max(0, match.start() - 40) : match.start()]
        if not _NEGATION.search(_CLAUSE_BREAK.split(before)[-1]):
            found.append(match.group(0))
    return found


def _repeats(call: _Call, reply: _Reply) -> bool:
    """Same words as an earlier agent turn, or 80% word-set overlap (3+ words)."""
    if " ".join(reply.words) in call.agent_texts:
        return True
    words = frozenset(reply.words)
    if len(words) < 3:
        return False
    return any(
        len(words & earlier) / len(words | earlier) >= 0.8 for earlier in call.agent_word_sets
    )


_Adjustment = tuple[float, str]


def _settle(base: float, adjustments: Sequence[_Adjustment], steady: str) -> Verdict:
    """Apply the adjustments to the base; the biggest one (a penalty on a tie) is the
    reason, and `steady` is the reason when nothing applied."""
    total = base + sum(delta for delta, _ in adjustments)
    score = round(min(1.0, max(0.0, total)), _PRECISION)
    if not adjustments:
        return score, steady
    _, reason = min(adjustments, key=lambda item: (-abs(item[0]), item[0]))
    return score, reason


# --- the rules, one per dimension -----------------------------------------------------


def rule_dialect(call: _Call, reply: _Reply) -> Verdict:
    """Speak the customer's register.

    The customer's register comes from all their turns: casual markers ("hi", "hey",
    "yeah", "gonna", "lol", contractions, a lower-case "i", "!") against formal ones
    ("Good morning", "would", "please", "thank you", uncontracted "I am", "do not").
    The reply is read the same way. Score = 1 - 0.45 x the distance between the two on
    a -1 (formal) .. +1 (casual) scale: a match scores near 1, the opposite register
    about 0.1. Before the customer has shown any register the score is a neutral 0.7.
    """
    customer_signal, customer_evidence = call.customer_register
    if customer_evidence == 0:
        return 0.7, "The customer has not shown a register yet"
    reply_signal, _ = _register(reply.original, reply.words)
    distance = abs(customer_signal - reply_signal)
    score = round(min(1.0, max(0.0, 1.0 - 0.45 * distance)), _PRECISION)
    label = _register_label(customer_signal)
    if distance < 0.5:
        return score, f"Matches the customer's {label} register"
    if reply_signal < customer_signal:
        return score, f"Stiffer than the customer's {label} register"
    return score, f"More casual than the customer's {label} register"


def rule_respect(call: _Call, reply: _Reply) -> Verdict:
    """Be courteous; never dismissive, pushy or insulting.

    Starts at 0.8. Each dismissive or pushy phrase ("obviously", "you need to", "calm
    down", a bare "Whatever.", "cheap", insults) costs 0.25; shouting (three all-caps
    words in a row) costs 0.25 and "!!" 0.05. Courtesy ("please", "thank you",
    "understand", "appreciate", "sorry") adds 0.04 each, at most 0.12; more than five
    courtesy markers read as fawning and cost 0.05 instead.
    """
    adjustments: list[_Adjustment] = []
    dismissive = _DISMISSIVE.findall(reply.lowered)
    if dismissive:
        phrase = dismissive[0].strip(" ,.!?")
        reason = f"Dismissive or pushy wording ('{phrase}')"
        adjustments.append((-0.25 * len(dismissive), reason))
    if _SHOUTING.search(reply.original):
        adjustments.append((-0.25, "Shouts in capital letters"))
    if _MULTI_BANG.search(reply.original):
        adjustments.append((-0.05, "Stacked exclamation marks read as shouting"))
    courtesy = len(_COURTESY.findall(reply.lowered))
    if courtesy > 5:
        adjustments.append((-0.05, "Over-apologetic to the point of fawning"))
    elif courtesy:
        adjustments.append((0.04 * min(3, courtesy), "Courteous wording"))
    return _settle(0.8, adjustments, "Neutral, civil wording")


def rule_accuracy(call: _Call, reply: _Reply) -> Verdict:
    """Claim only what the call supports.

    Starts at 0.8. Absolute promises ("guarantee", "100%", "definitely", "promise") cost
    0.15 each and "always"/"never" 0.08 each, together at most 0.45; a negated one ("I
    can't guarantee") does not count. A figure never said on the call costs 0.12 with a
    currency or percent, 0.06 bare, at most 0.3 (clock times are offers, not claims).
    Hedged wording ("I think", "usually", "let me check") adds 0.05, at most 0.1.
    Answering the customer's question adds 0.1; leaving it aside costs 0.05.
    """
    adjustments: list[_Adjustment] = []
    strong = _asserted(_STRONG_ABSOLUTE, reply.lowered)
    weak = _WEAK_ABSOLUTE.findall(reply.lowered)
    if strong or weak:
        penalty = min(0.45, 0.15 * len(strong) + 0.08 * len(weak))
        word = (strong or weak)[0]
        reason = f"Makes an absolute claim ('{word}') the call gave no basis for"
        adjustments.append((-penalty, reason))
    invented = 0.0
    for match in _NUMBER.finditer(_CLOCK_TIME.sub(" ", reply.lowered)):
        if _plain_number(match.group(2)) not in call.numbers:
            invented += 0.12 if (match.group(1) or match.group(3)) else 0.06
    if invented:
        reason = "Cites figures that were never given on the call"
        adjustments.append((-min(0.3, invented), reason))
    hedges = len(_HEDGE.findall(reply.lowered))
    if hedges:
        adjustments.append((0.05 * min(2, hedges), "Hedges where it cannot be sure"))
    if call.asked:
        if _answers(call, reply):
            adjustments.append((0.1, "Answers the customer's question"))
        else:
            adjustments.append((-0.05, "Does not address what the customer asked"))
    return _settle(0.8, adjustments, "Makes no claims beyond what the call supports")


def rule_progress(call: _Call, reply: _Reply) -> Verdict:
    """Move the call forward.

    Starts at 0.45. A concrete next step (a viewing, a slot, a donation, "shall I",
    "would you like") adds 0.3; asking a question adds 0.15; answering the customer's
    last question adds 0.15 and ignoring it costs 0.15; taking up an objection or worry
    the customer just raised ("I understand", options, reassurance, or the objection's
    own words) adds 0.15 and passing over it costs 0.1. An empty reply costs 0.45, and
    two words or fewer with no question or step cost 0.25. Repeating an earlier agent
    turn costs 0.3; small talk from the fourth agent turn on, with no question or step,
    costs 0.15.
    """
    adjustments: list[_Adjustment] = []
    next_step = _NEXT_STEP.search(reply.lowered)
    asks = "?" in reply.lowered
    if not reply.words:
        adjustments.append((-0.45, "Says nothing"))
    elif len(reply.words) <= 2 and not asks and not next_step:
        adjustments.append((-0.25, "Too short to move the call forward"))
    if next_step:
        step = next_step.group(0)
        adjustments.append((0.3, f"Proposes a concrete next step ('{step}')"))
    if asks:
        adjustments.append((0.15, "Asks the customer a question"))
    if call.asked:
        if _answers(call, reply):
            adjustments.append((0.15, "Answers the customer's question"))
        else:
            adjustments.append((-0.15, "Leaves the customer's question unanswered"))
    if call.objected:
        if _TAKES_UP_OBJECTION.search(reply.lowered) or _answers(call, reply):
            adjustments.append((0.15, "Takes up the concern the customer raised"))
        else:
            adjustments.append((-0.1, "Passes over the concern the customer raised"))
    if reply.words and _repeats(call, reply):
        adjustments.append((-0.3, "Repeats an earlier agent turn"))
    late = call.agent_turn_count >= 3
    if late and not asks and not next_step and _SMALL_TALK.search(reply.lowered):
        adjustments.append((-0.15, "Small talk this late in the call"))
    return _settle(0.45, adjustments, "Keeps the call going without moving it forward")


def rule_family(call: _Call, reply: _Reply) -> Verdict:
    """Acknowledge the customer's family when they raised it; never turn families away.

    Family counts as raised when the customer spoke of their own people ("my kids", "we
    have a baby", "with my partner") or of schools, a nursery or a pregnancy. While no
    agent turn has spoken to it yet, a reply naming the family and what matters to it
    (schools, safety, space, a garden) scores 0.95, one of the two 0.8, neither 0.35.
    Once an earlier agent turn has acknowledged it, a reply may move on: 0.8 without a
    mention, the same scores as above with one. Saying children or families are not
    welcome scores 0.05 whatever was said. If family never came up the score is a
    neutral-high 0.85: silence about it is not a fault.
    """
    if _NO_CHILDREN.search(reply.lowered):
        return 0.05, "Says children or families are not welcome"
    if not call.family_raised:
        return 0.85, "Family never came up, so there is nothing to acknowledge"
    names_family = bool(_REPLY_FAMILY.search(reply.lowered))
    care = _REPLY_FAMILY_CARE.search(reply.lowered)
    if names_family and care:
        return 0.95, f"Acknowledges the family and what matters to it ({care.group(0)})"
    if names_family:
        return 0.8, "Acknowledges the customer's family"
    if care:
        return 0.8, f"Speaks to what a family needs ({care.group(0)})"
    if not call.family_pending:
        return 0.8, "The family was acknowledged earlier in the call"
    return 0.35, "Ignores the family the customer mentioned"


def rule_timing(call: _Call, reply: _Reply) -> Verdict:
    """Make the move the moment calls for.

    Starts at 0.75. On the agent's first turn a greeting adds 0.15 and its absence costs
    0.1; pushing for a commitment (sign, pay, a deposit, donate) costs 0.45 on the first
    turn and 0.2 on the second; closing the call in the first two turns costs 0.2. From
    the third agent turn on, a next step adds 0.1 and a fresh greeting costs 0.1. A
    customer in a hurry in either of their last two turns ("soon", "this week", "asap",
    "busy") is owed a concrete time: naming one adds 0.15, none costs 0.2. Replies over
    80 words cost 0.1 plus 0.005 a word beyond, at most 0.3.
    """
    adjustments: list[_Adjustment] = []
    turn = call.agent_turn_count
    commits = _COMMITMENT.search(reply.lowered)
    if turn == 0:
        if _GREETING.search(reply.lowered):
            adjustments.append((0.15, "Opens with a greeting, apt for the first turn"))
        else:
            adjustments.append((-0.1, "Skips the greeting on the first turn"))
    if commits and turn <= 1:
        reason = f"Pushes for a commitment ('{commits.group(0)}') too early"
        adjustments.append((-0.45 if turn == 0 else -0.2, reason))
    if turn <= 1 and _CLOSING.search(reply.lowered):
        adjustments.append((-0.2, "Closes the call before it has started"))
    if turn >= 2:
        if commits or _NEXT_STEP.search(reply.lowered):
            adjustments.append((0.1, "Proposes a next step at an apt point"))
        if _GREETING.match(reply.lowered):
            adjustments.append((-0.1, "Greets again in the middle of the call"))
    if call.urgent:
        if _CONCRETE_TIME.search(reply.lowered):
            adjustments.append((0.15, "Meets the customer's urgency with a time"))
        else:
            adjustments.append((-0.2, "The customer is in a hurry; no time is named"))
    if len(reply.words) > 80:
        penalty = min(0.3, 0.1 + 0.005 * (len(reply.words) - 80))
        adjustments.append((-penalty, "Too long for one turn"))
    return _settle(0.75, adjustments, "A move that suits this point in the call")


def rule_compliance(call: _Call, reply: _Reply) -> Verdict:
    """Stay within the rules of fair dealing.

    Starts at 0.95. Discriminating about who may rent ("no children", "no DSS",
    "professionals only") costs 0.6; asking for card or bank details in the
    conversation costs 0.5; each pressure tactic ("only today", "last chance", "act
    now", "you must", "sign now") costs 0.3; a guarantee ("guaranteed", "100%",
    "risk-free") costs 0.2. Negated mentions ("you don't have to give bank details", "I
    can't guarantee") do not count.
    """
    adjustments: list[_Adjustment] = []
    if _DISCRIMINATION.search(reply.lowered):
        adjustments.append((-0.6, "Discriminates about who may rent or take part"))
    if _asserted(_PAYMENT_DETAILS, reply.lowered):
        adjustments.append((-0.5, "Asks for payment details in the conversation"))
    pressure = _PRESSURE.findall(reply.lowered)
    if pressure:
        reason = f"Uses a pressure tactic ('{pressure[0]}')"
        adjustments.append((-0.3 * len(pressure), reason))
    if _asserted(_GUARANTEE, reply.lowered):
        adjustments.append((-0.2, "Makes a guarantee it cannot back"))
    return _settle(0.95, adjustments, "No pressure tactics or non-compliant claims")


# Words of a dimension's meaning that say nothing about what it is about: every meaning is
# phrased "Whether the reply ... the customer ...".
_MEANING_FILLER_TEXT = "whether reply replies agent agents customer customers call calls said says"
_MEANING_FILLER = frozenset(_MEANING_FILLER_TEXT.split())
_MEANING_NEUTRAL = 0.5


def _stem(word: str) -> str:
    """A crude stem, enough to meet "conditions" with "condition" and "honestly" with
    "honest": the possessive and a plural s dropped, then the first six letters."""
    word = word.removesuffix("'s")
    if len(word) > 4 and word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    return word[:6]


@functools.lru_cache(maxsize=256)
def _meaning_stems(name: str, label: str, meaning: str) -> frozenset[str]:
    text = " ".join((name.replace("-", " ").replace("_", " "), label, meaning)).lower()
    content = _content_words(_words(_normalise(text))) - _MEANING_FILLER
    return frozenset(_stem(word) for word in content)


def rule_by_meaning(dimension: Dimension, call: _Call, reply: _Reply) -> Verdict:
    """A world's own dimension, which no hand-written rule knows: how much the reply takes up
    what the dimension is about, read from its name, label and one-line meaning.

    The meaning's content words (no stop words, none of "whether", "reply", "customer"; each
    cut to a crude stem) are the dimension's topic. A reply using none of them says nothing
    about it: a neutral 0.5. Otherwise the share of the topic it uses is squashed into
    0.5..0.95: 0.5 + 0.45 x (1 - e^(-4 x share)), so one word of four gives about 0.78. It
    cannot tell a reply that gets the dimension wrong from one that gets it right; that is
    what the world's fitted judge learns from the reviewers' ticks of this reason
    (arena.judge.fit_job), with this score as one of its features.
    """
    topic = _meaning_stems(dimension.name, dimension.label, dimension.help)
    words_by_stem = {_stem(word): word for word in sorted(_content_words(reply.words))}
    used = sorted(topic & set(words_by_stem))
    if not used:
        return _MEANING_NEUTRAL, f"Says nothing about {dimension.label.lower()}"
    share = len(used) / len(topic)
    score = round(_MEANING_NEUTRAL + 0.45 * (1.0 - math.exp(-4.0 * share)), _PRECISION)
    shown = ", ".join(f"'{words_by_stem[stem]}'" for stem in used[:3])
    return score, f"Speaks to {dimension.label.lower()} ({shown})"


RULES: dict[str, Callable[[_Call, _Reply], Verdict]] = {
    "dialect": rule_dialect,
    "respect": rule_respect,
    "accuracy": rule_accuracy,
    "progress": rule_progress,
    "family": rule_family,
    "timing": rule_timing,
    "compliance": rule_compliance,
}


# --- the judge ------------------------------------------------------------------------


def weighted_total(
    scores: Mapping[str, float], rubric: Sequence[Dimension] = DEFAULT_RUBRIC
) -> float:
    """A verdict's total: the weighted mean of the rubric's dimensions' scores,
    sum(weight x score) / sum(weight), with the world's weights (every judge and a rescoring
    add them up the same way). A dimension the scores lack is left out of both sums."""
    present = [dimension for dimension in rubric if dimension.name in scores]
    weights = sum(dimension.weight for dimension in present)
    if not weights:
        return _MEANING_NEUTRAL
    weighted = sum(dimension.weight * float(scores[dimension.name]) for dimension in present)
    return round(weighted / weights, _PRECISION)


class RubricJudge:
    """The default judge: the rules above, no model; same inputs, same judgement. It scores
    the rubric it is given (a world's: arena.judge.world_dimensions.world_dimensions), the seven by
    default: each of the seven by its rule, any other dimension by `rule_by_meaning`."""

    model_name = "rubric-v1"
    quick = True
    paid = False

    def __init__(self, rubric: Sequence[Dimension] = DEFAULT_RUBRIC) -> None:
        self.rubric = tuple(rubric)

    def score(self, context: Sequence[Turn], reply: str) -> Judgement:
        """Judge `reply`, the agent's next turn, after `context` (oldest turn first)."""
        call = _analyse_call(context)
        analysed = _analyse_reply(reply)
        scores: dict[str, float] = {}
        reasons: dict[str, str] = {}
        for dimension in self.rubric:
            rule = RULES.get(dimension.name)
            scores[dimension.name], reasons[dimension.name] = (
                rule(call, analysed)
                if rule is not None
                else rule_by_meaning(dimension, call, analysed)
            )
        return Judgement(
            scores=scores,
            total=weighted_total(scores, self.rubric),
            judge_model=self.model_name,
            reasons=reasons,
        )
