"""The baseline's words in a world with no simulator: what a real agent of this world said at
the most similar moment of ANOTHER of its recorded calls.

The simulator's scripted lines are lettings lines; in a business's own world they would be off
topic. So there `v1 · baseline` answers from the world's own calls: every agent turn of every
call that is not held out is an entry, keyed by the call so far before it; a moment is matched
by TF-IDF cosine over its own call so far (and, with the same weight, over its last few turns,
where what the customer just said lives), and the entry's real reply is the answer.

Never the same call (its own next turns would be the answer key) and never a held-out call
(the calls Evaluate replays, arena.held_out): those stay out of the index or are masked at
query time. The index is built lazily per world and kept until the world's calls change (a
stamp of count, newest id and held-out count), so a batch of pairs costs one build.
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

from arena.models import Call, Turn, World

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
    call_id: int
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


_indexes: OrderedDict[tuple[str, int], tuple[tuple[int, int, int], _Index | None]] = OrderedDict()
_lock = threading.Lock()
# Indexes held for a block (recorded_replies_pinned): (holders, index) by schema and world.
_pinned: dict[tuple[str, int], tuple[int, _Index | None]] = {}


def _stamp(world: World) -> tuple[int, int, int]:
    """Changes whenever the calls an index would hold change: an import adds calls (count and
    newest id), choosing the held-out calls flags some."""
    row = Call.objects.filter(world=world).aggregate(
        count=Count("id"), newest=Max("id"), held=Count("id", filter=Q(held_out=True))
    )
    return (row["count"], row["newest"] or 0, row["held"])


def _normalised(matrix: Any) -> Any:
    from sklearn.preprocessing import normalize

    return normalize(matrix, norm="l2", copy=False)


def _build(world: World) -> _Index | None:
    from scipy import sparse
    from sklearn.feature_extraction.text import TfidfVectorizer

    turns = list(
        Turn.objects.filter(call__world=world, call__held_out=False)
        .order_by("call_id", "index")
        .values_list("call_id", "index", "speaker", "text", "move_label")
    )
    if not turns:
        return None
    # Linear term weights (no sublinear tf), so the sum of a context's turn rows is exactly
    # the vector of the context as one text: each context is a sum, not a re-read.
    vectorizer = TfidfVectorizer(ngram_range=(1, 2), max_features=50_000, norm=None)
    turn_vectors = vectorizer.fit_transform([text for _c, _i, _s, text, _m in turns])
    rows_by_call: dict[int, list[int]] = defaultdict(list)
    for row, (call_id, *_rest) in enumerate(turns):
        rows_by_call[call_id].append(row)
    whole_rows, whole_cols, recent_rows, recent_cols = [], [], [], []
    call_ids, positions, replies, moves = [], [], [], []
    known_moves = set(world.move_names)
    for row, (call_id, index, speaker, text, move) in enumerate(turns):
        if speaker != Turn.Speaker.AGENT or not text.strip():
            continue
        entry = len(replies)
        earlier = [other for other in rows_by_call[call_id] if other < row]
        whole_rows += [entry] * len(earlier)
        whole_cols += earlier
        last = earlier[-RECENT_TURNS:]
        recent_rows += [entry] * len(last)
        recent_cols += last
        call_ids.append(call_id)
        positions.append(index)
        replies.append(text)
        # A label from another world's move set would mean nothing on this world's map.
        moves.append(move if move in known_moves else "")
    if not replies:
        return None
    shape = (len(replies), len(turns))

    def context(rows: list[int], cols: list[int]) -> Any:
        pick = sparse.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=shape)
        return _normalised(pick @ turn_vectors)

    return _Index(
        vectorizer=vectorizer,
        whole=context(whole_rows, whole_cols),
        recent=context(recent_rows, recent_cols),
        call_ids=np.asarray(call_ids),
        positions=np.asarray(positions),
        replies=replies,
        moves=moves,
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
    return RecordedReply(
        text=index.replies[best],
        move=index.moves[best],
        call_id=int(index.call_ids[best]),
        turn_index=int(index.positions[best]),
        similarity=float(scores[best]),
    )
