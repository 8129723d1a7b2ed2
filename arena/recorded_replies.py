"""The baseline's words in a world with no simulator: what a real agent of this world said at
the most similar moment of ANOTHER of its recorded calls.

The simulator's scripted lines are lettings lines; in a business's own world they would be off
topic. So there `v1 · baseline` answers from the world's own calls: every agent turn of every
call that is not held out is an entry, keyed by the call so far before it; a moment is matched
by TF-IDF cosine over its own call so far (and, with the same weight, over its last few turns,
where what the customer just said lives), and the entry's real reply is the answer.

A world of imported preference pairs (no calls, or beside them) answers the same way from its
pairs: each pair's conversation is an entry, and the reply people chose there is its answer,
as a recorded call's agent turn is.

Never the same call (its own next turns would be the answer key) and never a held-out call or
held-out pair (what Evaluate replays, arena.held_out): those stay out of the index or are
masked at query time. The index is built lazily per world and kept until the world's calls or
pairs change (a stamp of counts, newest ids and held-out counts), so a batch of pairs costs one
build.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.db import connection
from django.db.models import Count, Max, Q

from arena.models import Call, Moment, Pick, Turn, World

# The last few turns weigh as much as the whole call so far: two turns is the customer's
# last line and the agent's before it.
RECENT_TURNS = 2
WHOLE_WEIGHT = 0.5
RECENT_WEIGHT = 0.5
# A small pull towards the same point of a call: it decides when the words say nothing (the
# opening) and breaks ties, and is too small to outvote a real match.
POSITION_WEIGHT = 0.05
# Indexes kept at once per process (one per world recently asked).
CACHED_WORLDS = 8


@dataclass(frozen=True)
class RecordedReply:
    text: str
    move: str
    call_id: int | None  # None: the chosen reply of an imported pair
    turn_index: int
    similarity: float


@dataclass(frozen=True)
class _Index:
    vectorizer: Any
    whole: Any  # sparse, one L2-normalised row per entry
    recent: Any
    call_ids: np.ndarray
    positions: np.ndarray
    replies: list[str]
    moves: list[str]


_indexes: OrderedDict[tuple[str, int], tuple[Stamp, _Index | None]] = OrderedDict()
_lock = threading.Lock()
# Indexes held for a block (recorded_replies_pinned): (holders, index) by schema and world.
_pinned: dict[tuple[str, int], tuple[int, _Index | None]] = {}


Stamp = tuple[int, ...]


def _stamp(world: World) -> Stamp:
    """Changes whenever the calls or pairs an index would hold change: an import adds calls or
    pairs (count and newest id), choosing the held-out calls or pairs flags some."""
    calls = Call.objects.filter(world=world).aggregate(
        count=Count("id"), newest=Max("id"), held=Count("id", filter=Q(held_out=True))
    )
    pairs = Moment.objects.filter(world=world, kind=Moment.Kind.IMPORTED).aggregate(
        count=Count("id"), newest=Max("id"), held=Count("id", filter=Q(held_out=True))
    )
    return tuple(row[key] or 0 for row in (calls, pairs) for key in ("count", "newest", "held"))


def _normalised(matrix: Any) -> Any:
    from sklearn.preprocessing import normalize

    return normalize(matrix, norm="l2", copy=False)


@dataclass(frozen=True)
class _Entry:
    """One answer the index can give: the turns before it (rows of the index's turn texts),
    who said it and where."""

    earlier: list[int]
    call_id: int  # an imported pair's entry: minus its moment's id (no call has it)
    position: int
    reply: str
    move: str


def _call_entries(world: World, texts: list[str]) -> list[_Entry]:
    """Every agent turn of the world's calls that are not held out; their turns' texts are
    appended to `texts`."""
    turns = list(
        Turn.objects.filter(call__world=world, call__held_out=False)
        .order_by("call_id", "index")
        .values_list("call_id", "index", "speaker", "text", "move_label")
    )
    first = len(texts)
    texts.extend(text for _c, _i, _s, text, _m in turns)
    rows_by_call: dict[int, list[int]] = defaultdict(list)
    for row, (call_id, *_rest) in enumerate(turns, start=first):
        rows_by_call[call_id].append(row)
    known_moves = set(world.move_names)
    entries = []
    for row, (call_id, index, speaker, text, move) in enumerate(turns, start=first):
        if speaker != Turn.Speaker.AGENT or not text.strip():
            continue
        earlier = [other for other in rows_by_call[call_id] if other < row]
        # A label from another world's move set would mean nothing on this world's map.
        move = move if move in known_moves else ""
        entries.append(_Entry(earlier, call_id, index, text, move))
    return entries


def _pair_entries(world: World, texts: list[str]) -> list[_Entry]:
    """The chosen reply of every imported pair that is not held out, after its conversation;
    the conversations' texts are appended to `texts`."""
    picks = (
        Pick.objects.filter(
            world=world, pair__moment__kind=Moment.Kind.IMPORTED, pair__moment__held_out=False
        )
        .order_by("pair__moment_id", "pk")
        .values_list("pair__moment_id", "pair__moment__context", "chosen_reply__text")
    )
    entries, seen = [], set()
    for moment_id, context, chosen in picks:
        if moment_id in seen or not chosen.strip():
            continue
        seen.add(moment_id)
        first = len(texts)
        texts.extend(turn.get("text", "") for turn in context or [])
        entries.append(
            _Entry(list(range(first, len(texts))), -moment_id, len(context or []), chosen, "")
        )
    return entries


def _build(world: World) -> _Index | None:
    from scipy import sparse
    from sklearn.feature_extraction.text import TfidfVectorizer

    texts: list[str] = []
    entries = _call_entries(world, texts) + _pair_entries(world, texts)
    if not entries:
        return None
    # Linear term weights (no sublinear tf), so the sum of a context's turn rows is exactly
    # the vector of the context as one text: each context is a sum, not a re-read.
    vectorizer = TfidfVectorizer(ngram_range=(1, 2), max_features=50_000, norm=None)
    turn_vectors = vectorizer.fit_transform(texts or [""])
    whole_rows, whole_cols, recent_rows, recent_cols = [], [], [], []
    for number, entry in enumerate(entries):
        whole_rows += [number] * len(entry.earlier)
        whole_cols += entry.earlier
        last = entry.earlier[-RECENT_TURNS:]
        recent_rows += [number] * len(last)
        recent_cols += last
    shape = (len(entries), turn_vectors.shape[0])

    def context(rows: list[int], cols: list[int]) -> Any:
        pick = sparse.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=shape)
        return _normalised(pick @ turn_vectors)

    return _Index(
        vectorizer=vectorizer,
        whole=context(whole_rows, whole_cols),
        recent=context(recent_rows, recent_cols),
        call_ids=np.asarray([entry.call_id for entry in entries]),
        positions=np.asarray([entry.position for entry in entries]),
        replies=[entry.reply for entry in entries],
        moves=[entry.move for entry in entries],
    )


def _index_for(world: World) -> _Index | None:
    key = (connection.schema_name, world.pk)
    with _lock:
        if key in _pinned:
            return _pinned[key][1]
    stamp = _stamp(world)
    with _lock:
        cached = _indexes.get(key)
        if cached is not None and cached[0] == stamp:
            _indexes.move_to_end(key)
            return cached[1]
        # Built under the lock: threads answering the same world (Evaluate's fan-out) wait
        # for one build instead of making their own.
        index = _build(world)
        _indexes[key] = (stamp, index)
        _indexes.move_to_end(key)
        while len(_indexes) > CACHED_WORLDS:
            _indexes.popitem(last=False)
        return index


@contextmanager
def recorded_replies_pinned(world: World) -> Iterator[None]:
    """Within the block, every answer in `world` comes from one index built here, in the
    calling thread: threads answering meanwhile (Evaluate's fan-out, each on its own
    connection) neither re-read the calls nor see a call imported halfway through, so every
    moment of one evaluation is answered from the same calls."""
    if world.has_simulator:
        yield
        return
    key = (connection.schema_name, world.pk)
    index = _index_for(world)
    with _lock:
        _pinned[key] = _pinned.get(key, (0, index))[0] + 1, index
    try:
        yield
    finally:
        with _lock:
            count, _ = _pinned[key]
            if count <= 1:
                del _pinned[key]
            else:
                _pinned[key] = (count - 1, index)


def recorded_reply(
    *,
    world: World,
    dialogue: Sequence[dict[str, str]],
    exclude_call_id: int | None = None,
    prefer_move: str | None = None,
) -> RecordedReply | None:
    """The real agent's reply at the moment of another of the world's recorded calls most like
    `dialogue` (the call so far), or None when the world has no other call to answer from.
    `exclude_call_id`: the call the moment is in, never answered from."""
    index = _index_for(world)
    if index is None:
        return None
    texts = [turn.get("text", "") for turn in dialogue]
    if texts:
        vectors = index.vectorizer.transform(texts)
        whole = _normalised(np.asarray(vectors.sum(axis=0))).ravel()
        recent = _normalised(np.asarray(vectors[-RECENT_TURNS:].sum(axis=0))).ravel()
        scores = WHOLE_WEIGHT * (index.whole @ whole) + RECENT_WEIGHT * (index.recent @ recent)
    else:
        scores = np.zeros(len(index.replies))
    scores += POSITION_WEIGHT / (1.0 + np.abs(index.positions - len(texts)))
    if exclude_call_id is not None:
        scores[index.call_ids == exclude_call_id] = -np.inf
    if prefer_move:
        # A learned move strategy picks the move; the most similar reply making it answers
        # (any move, where no other call's agent ever made that one).
        making = np.asarray([move == prefer_move for move in index.moves]) & np.isfinite(scores)
        if making.any():
            scores[~making] = -np.inf
    best = int(np.argmax(scores))
    if not np.isfinite(scores[best]):
        return None
    call_id = int(index.call_ids[best])
    return RecordedReply(
        text=index.replies[best],
        move=index.moves[best],
        call_id=call_id if call_id > 0 else None,
        turn_index=int(index.positions[best]),
        similarity=float(scores[best]),
    )
