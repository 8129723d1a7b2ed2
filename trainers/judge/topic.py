"""The on-topic guard's model: whether a reply speaks the language of this world's business and of
the call it answers, or another business's (pure Python, no Django).

A reply's words are weighed as evidence between two stories. In both, about half the words are
general English (the background, `topic_background.tsv`); the rest come either from this world
(its description, system prompt, move descriptions and its own agent turns, or from the call so
far) or from some other topic, about which nothing is known. Knowing nothing admits two readings:
the other topic uses each word as general English does, or every word alike (1 / the
background's vocabulary). A word counts for this world only as far as it does against both, so
the other topic's share of a word is the larger of the two:

    log [ (G p_general + (1 - G) p_here) / (G p_general + (1 - G) max(p_general, 1 / V)) ]

where p_here is the larger of the word's share in the world's text and in the call so far: a
word the customer used is never evidence of another business. Common words add about nothing,
and a common word the world happens to use a lot ("start", "free") adds little, for any business
may say it as often; a world's own words (used more than general English does) add a lot; a rare
word the world and the call never use ("viewing" and "flat" in a charity's chats) counts against.
The reply's evidence is the sum: the log-likelihood ratio of "this world" against "another
topic", where each word is weighed by the reading less favourable to this world.

The threshold is the world's own, never a constant tuned on any data set: the world's agent turns
are scored by a model built without their call (`FOLDS` folds by call), and a reply is off-topic
when its evidence is below the `FLAG_PERCENTILE`th percentile of those scores and below zero
(evidence that leans to this world never flags). So about FLAG_PERCENTILE % of the world's own
replies on unseen calls would be flagged, by construction; a world with fewer than `MIN_UNITS`
agent turns cannot estimate that, and its guard flags nothing (and says so). A reply is ranked
against the world's own at the same kind of moment: a call's opening line (nothing said before
it: greetings, short and general) against the world's own openings, any other reply against its
own turns after something was said; a kind with fewer than `MIN_UNITS` own turns is ranked
against all of them.

Words are cut to their first `STEM_LENGTH` letters (donate, donation, donating: one word) and
numbers carry no topic.

The background is word counts of general conversation: the human and assistant turns of the
Anthropic hh-rlhf harmless-base pairs (MIT; none of it sales or charity), rebuilt with
`python -m trainers.judge.topic --background PAIRS.jsonl --out trainers/judge/topic_background.tsv`.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import hashlib
import json
import math
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

# How long a word's stem is: the first letters; enough to keep most words apart.
STEM_LENGTH = 5
# The share of a reply's words that are general English, in either story.
GENERAL_SHARE = 0.5
# The world's own replies, scored on calls held out, below this percentile are what "off-topic"
# means for the world; with the rule "and below zero", at most this share of its own replies.
FLAG_PERCENTILE = 2.0
FOLDS = 5
# Fewer of its own agent turns than this and a world cannot place a 2nd percentile: no flags.
MIN_UNITS = 20
# The background keeps stems seen at least this often (rarer ones count as unseen).
BACKGROUND_MIN_COUNT = 2
BACKGROUND_FILE = Path(__file__).with_name("topic_background.tsv")
# How many foreign words a note names.
NOTE_WORDS = 4

_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")
# Words with no topic, dropped before weighing (the background would make them ~0 anyway).
_STOPWORD_TEXT = """
    a an the and or but if so to of in on at for with from by as is are was were be been am
    do does did have has had i you he she it we they me my your our their them us this that these
    those there here what which who whom whose when where why how can could would should will
    shall may might must not no yes just very too also about any some all more most much many
    than then well oh ok okay hi hello hey thanks thank please yeah yep sure its it's i'm you're
    that's don't can't won't isn't i've i'll i'd we're we'll they're there's let's
"""
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())


def below_floor(score: float, floor: float) -> bool:
    """The guard's one rule, for the words' evidence and the answer score alike: below the
    world's own floor and below zero (a score that leans to this world never flags)."""
    return score < min(floor, 0.0)


def own_share_below(own_sorted: Sequence[float], score: float) -> float:
    """The share of the world's own scores at or below `score`, counting the score itself
    ((k + 1) / (n + 1): never 0, so a reply below every own turn is as rare as one in n + 1)."""
    below = int(np.searchsorted(np.asarray(own_sorted, dtype=np.float64), score, side="right"))
    return (below + 1) / (len(own_sorted) + 1)


def _chi_square_4_above(share: float) -> float:
    """The value a chi-square of 4 degrees of freedom exceeds with probability `share`: its
    tail is exp(-x/2) (1 + x/2), solved by bisection (no table, no fitted constant)."""
    low, high = 0.0, 200.0
    for _ in range(100):
        middle = (low + high) / 2
        if math.exp(-middle / 2) * (1 + middle / 2) > share:
            low = middle
        else:
            high = middle
    return (low + high) / 2


# Fisher's test of the two (words, answer) at the guard's one share: the world's own replies
# it flags are about FLAG_PERCENTILE %, as either test alone flags (11.7 at 2 %).
JOINT_LIMIT = _chi_square_4_above(FLAG_PERCENTILE / 100)


def joint_statistic(words_share: float, answers_share: float) -> float:
    """Fisher's combination of how rare a reply's words and its answer score are among the
    world's own turns (own_share_below of each): -2 (ln p_words + ln p_answers). A reply only
    somewhat unusual on both (another business's line in general words that the call makes
    little likelier) is as rare as a world's own worst 2 % on one, where neither test alone
    flags it; under the two tests' independence it exceeds JOINT_LIMIT for FLAG_PERCENTILE %
    of the world's own replies (their scores are mildly anti-correlated: fewer)."""
    return -2.0 * (math.log(words_share) + math.log(answers_share))


def words(text: str) -> list[tuple[str, str]]:
    """The reply's topic-bearing words as (stem, word), in order."""
    found = []
    for word in _WORD.findall(text.lower()):
        if word in _STOPWORDS or len(word) < 3:
            continue
        found.append((word.split("'")[0][:STEM_LENGTH], word))
    return found


def stem_counts(texts: Iterable[str]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for text in texts:
        counts.update(stem for stem, _word in words(text))
    return counts


# --- the background -----------------------------------------------------------------------


@dataclass(frozen=True)
class Background:
    """Word-stem counts of general conversation."""

    counts: Mapping[str, int]
    total: int

    @property
    def vocabulary(self) -> int:
        return len(self.counts) + 1

    def probability(self, stem: str) -> float:
        # Add-a-half: a stem the background never saw is rare, not impossible.
        return (self.counts.get(stem, 0) + 0.5) / (self.total + 0.5 * self.vocabulary)

    @classmethod
    def from_texts(cls, texts: Iterable[str]) -> Background:
        counts = {
            stem: count
            for stem, count in stem_counts(texts).items()
            if count >= BACKGROUND_MIN_COUNT
        }
        return cls(counts, sum(counts.values()))

    def write(self, path: Path) -> None:
        rows = sorted(self.counts.items(), key=lambda item: (-item[1], item[0]))
        path.write_text("".join(f"{stem}\t{count}\n" for stem, count in rows), encoding="utf-8")


@functools.cache
def background_load(path: Path = BACKGROUND_FILE) -> Background:
    counts = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        stem, _tab, count = line.partition("\t")
        if stem and count:
            counts[stem] = int(count)
    return Background(counts, sum(counts.values()))


# --- the model ----------------------------------------------------------------------------


@dataclass(frozen=True)
class TopicUnit:
    """One of the world's own agent turns: its call (`group`), the call so far, the reply."""

    group: str
    context: Sequence[Mapping[str, str]]
    reply: str


@dataclass(frozen=True)
class TopicVerdict:
    """What the guard makes of one reply."""

    on_topic: bool
    evidence: float
    threshold: float | None
    foreign: tuple[str, ...] = ()
    # How well the reply answers the call (trainers.judge.answers) and the world's floor of it;
    # None where the world's judge has no such check.
    answers: float | None = None
    answers_floor: float | None = None
    # Fisher's statistic of the words and the answer score together (joint_statistic); None
    # where the check has no own scores to rank against (a version fitted before it kept them).
    joint: float | None = None
    # Whether the reply is a call's opening line, ranked against the world's own openings.
    opening: bool = False

    @property
    def words_off(self) -> bool:
        return self.threshold is not None and below_floor(self.evidence, self.threshold)

    @property
    def answers_off(self) -> bool:
        floor = self.answers_floor
        return self.answers is not None and floor is not None and below_floor(self.answers, floor)

    @property
    def joint_off(self) -> bool:
        """Rare on the words and the answer together, and leaning away from this world or
        its call on at least one (a reply that leans to both never flags)."""
        return (
            self.joint is not None
            and self.answers is not None
            and self.joint > JOINT_LIMIT
            and min(self.evidence, self.answers) < 0
        )

    def with_answers(self, score: float, floor: float, joint: float | None = None) -> TopicVerdict:
        """This verdict with the answer check's: off-topic when the words are, or, given the
        `joint` statistic, when the two together are (joint_off), else when the answer is
        below its floor."""
        checked = dataclasses.replace(
            self, answers=float(score), answers_floor=float(floor), joint=joint
        )
        off = checked.joint_off if joint is not None else checked.answers_off
        return dataclasses.replace(checked, on_topic=self.on_topic and not off)

    def note(self) -> str:
        """One sentence a page can show beside the capped total."""
        if self.on_topic:
            return ""
        said = []
        if self.words_off:
            named = ", ".join(f"'{word}'" for word in self.foreign[:NOTE_WORDS])
            which = f" ({named} belong to neither)" if named else ""
            floor = "openings' floor" if self.opening else "floor"
            said.append(
                f"the reply speaks neither this world's business nor the call's language{which}"
                f" (evidence {self.evidence:.1f} against the world's own {floor} "
                f"{self.threshold:.1f})"
            )
        if self.joint is not None and self.joint_off:
            said.append(
                "the reply fits neither this world's words nor the call: its words (evidence "
                f"{self.evidence:.1f}) and how much likelier the call makes it (answer score "
                f"{self.answers:.2f}) are together rarer than the world's own rarest "
                f"{FLAG_PERCENTILE:g}% (combined {self.joint:.1f} over {JOINT_LIMIT:.1f})"
            )
        elif self.joint is None and self.answers_off:
            said.append(
                "the reply does not answer the call: the base finds it less likely after the "
                f"call so far than after a bare opening (answer score {self.answers:.2f} against"
                f" the world's own floor {self.answers_floor:.2f})"
            )
        return (
            f"Off-topic: {'; and '.join(said)}, so its total is capped below every on-topic reply."
        )


@dataclass
class TopicModel:
    """A world's language (stem counts) and its own threshold of off-topic evidence."""

    counts: Mapping[str, float]
    total: float
    background: Background
    # The floor for a reply after something was said (and for a call's opening line where
    # there is no opening_threshold: a model built by hand).
    threshold: float | None = None
    units: int = 0
    # The own turns after something was said, scored on calls held out (ascending): what the
    # guard's joint test ranks a reply's words against (it never tests an opening line).
    held_out_scores: list[float] = field(default_factory=list)
    # The floor for a call's opening line, placed on the world's own openings.
    opening_threshold: float | None = None

    def _here(self, stem: str, call: Mapping[str, int], call_total: int) -> float:
        world = self.counts.get(stem, 0.0) / self.total if self.total else 0.0
        spoken = call.get(stem, 0) / call_total if call_total else 0.0
        return max(world, spoken)

    def evidence(
        self, context: Sequence[Mapping[str, str]], reply: str
    ) -> tuple[float, tuple[str, ...]]:
        """The reply's log-likelihood ratio (this world and call against another topic), and
        the words that count against it, most foreign first."""
        call = stem_counts(turn["text"] for turn in context)
        call_total = sum(call.values())
        uniform = 1.0 / self.background.vocabulary
        total = 0.0
        against: list[tuple[float, str]] = []
        for stem, word in words(reply):
            common = self.background.probability(stem)
            general = GENERAL_SHARE * common
            here = (1 - GENERAL_SHARE) * self._here(stem, call, call_total)
            # Another topic uses the word as general English does or as any word: whichever
            # is likelier (the weight is the lesser of the two stories' evidence for here).
            other = (1 - GENERAL_SHARE) * max(common, uniform)
            weight = math.log((general + here) / (general + other))
            total += weight
            if weight < 0:
                against.append((weight, word))
        against.sort()
        foreign = tuple(dict.fromkeys(word for _weight, word in against))
        return total, foreign

    def verdict(self, context: Sequence[Mapping[str, str]], reply: str) -> TopicVerdict:
        evidence, foreign = self.evidence(context, reply)
        # The world's own floor for this kind of moment (opening_line).
        opening = opening_line(context) and self.opening_threshold is not None
        floor = self.opening_threshold if opening else self.threshold
        if floor is None:
            return TopicVerdict(True, evidence, None, foreign)
        off = below_floor(evidence, floor)
        return TopicVerdict(not off, evidence, floor, foreign, opening=opening)


def opening_line(context: Sequence[Any]) -> bool:
    """A call's opening line: nothing was said before it. It answers nothing (its answer score
    is 0 by construction: trainers.judge.answers), and openings are greetings, so it is ranked
    against the world's own openings."""
    return not context


def _language(texts: Iterable[str], units: Iterable[TopicUnit]) -> Counter[str]:
    counts = stem_counts(texts)
    counts.update(stem_counts(unit.reply for unit in units))
    return counts


def _fold(group: str, folds: int) -> int:
    digest = hashlib.sha256(group.encode()).hexdigest()
    return int(digest[:8], 16) % folds


def topic_model_fit(
    texts: Sequence[str],
    units: Sequence[TopicUnit],
    *,
    background: Background | None = None,
    folds: int = FOLDS,
    percentile: float = FLAG_PERCENTILE,
) -> TopicModel:
    """The world's model from its texts (description, prompt, move descriptions) and its own
    agent turns, with the threshold set on those turns scored by folds that never saw their
    call. Held-out calls must not be among `units`: the caller keeps them out."""
    background = background or background_load()
    counts = _language(texts, units)
    model = TopicModel(counts, float(sum(counts.values())), background, units=len(units))
    groups = {unit.group for unit in units}
    if len(units) < MIN_UNITS or len(groups) < folds:
        return model
    scores: dict[bool, list[float]] = {True: [], False: []}  # by opening_line
    for fold in range(folds):
        kept = [unit for unit in units if _fold(unit.group, folds) != fold]
        part_counts = _language(texts, kept)
        part = TopicModel(part_counts, float(sum(part_counts.values())), background)
        for unit in units:
            if _fold(unit.group, folds) == fold:
                score = part.evidence(unit.context, unit.reply)[0]
                scores[opening_line(unit.context)].append(score)
    every = [*scores[True], *scores[False]]
    # Each kind of moment its own floor; a kind with too few own turns, every turn's.
    own = {kind: found if len(found) >= MIN_UNITS else every for kind, found in scores.items()}
    model.threshold = float(np.percentile(own[False], percentile))
    model.opening_threshold = float(np.percentile(own[True], percentile))
    model.held_out_scores = sorted(own[False])  # what a reply's words are ranked against
    return model


# --- the background, rebuilt from a preference file ----------------------------------------


def _conversation_texts(records: Iterable[Mapping[str, Any]]) -> Iterator[str]:
    for record in records:
        for message in [*record.get("prompt", []), *record.get("chosen", [])]:
            if message.get("role") in ("user", "assistant"):
                yield str(message.get("content", ""))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Rebuild the on-topic guard's background.")
    parser.add_argument("--background", type=Path, required=True, help="pairs .jsonl (TRL)")
    parser.add_argument("--out", type=Path, default=BACKGROUND_FILE)
    arguments = parser.parse_args(argv)
    lines = arguments.background.read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines if line.strip()]
    Background.from_texts(_conversation_texts(records)).write(arguments.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
