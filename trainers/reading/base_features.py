"""What the base reads in a reply: its last hidden state at the reply's last token, given the
call so far, cached by content so each text is read once per base (pure Python, no Django).

The learned scorer (trainers.judge.learned) is a linear head on these features, the same
features the RLHF reward model's probe reads (trainers.wording.reward_probe): the call so far
and the reply through the base's chat template, the state at the conversation's last token.

The cache is a folder of small .npy files named by a digest of (what this module reads, the
token ids), one folder per base: the fit job, Evaluate and pair generation each add what they
read, a file is written whole then renamed into place (two processes reading the same text
write the same bytes), and a changed rendering changes every key, never a stale hit.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from trainers.reading.passes import CallMemo, reply_pass
from trainers.reading.rendering import ReplyRow, reply_row, trimmed

# Bump when what a feature means changes (the rendering, the layer read): old files stop
# matching instead of being read as the new kind.
FEATURES_VERSION = 1
# Texts the base reads between two writes to the cache (and two progress reports).
BLOCK = 256
# What a cache entry holds: an item's features, or its reply's mean log-probability.
FEATURES, LOG_PROBS = "features", "log_probs"

Item = tuple[Sequence[Mapping[str, str]], str]


def _key(ids: Sequence[int]) -> str:
    digest = hashlib.sha256(f"v{FEATURES_VERSION}:".encode())
    digest.update(np.asarray(ids, dtype=np.int64).tobytes())
    return digest.hexdigest()


@dataclass
class FeatureStore:
    """The cache of one base's features: `folder/<2 hex>/<digest>.npy`."""

    folder: Path

    def _path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.npy"

    def get(self, key: str) -> np.ndarray | None:
        path = self._path(key)
        try:
            vector = np.load(path, allow_pickle=False)
        except (FileNotFoundError, ValueError, OSError):
            return None  # absent, or a half-written file from a crash: read it again
        with contextlib.suppress(OSError):  # a sweep may have taken it since: still read
            # A hit is a use: the sweep (cache_sweep) removes what was used longest ago.
            os.utime(path)
        return vector

    def put(self, key: str, vector: np.ndarray) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(handle, "wb") as out:
            np.save(out, np.asarray(vector, dtype=np.float32), allow_pickle=False)
        os.replace(temporary, path)


def store_folder(features_dir: Path | str, base: str) -> Path:
    return Path(features_dir) / base.replace("/", "--")


# A temporary file this old is a write a crash left behind, never one still being written.
STALE_TEMPORARY_S = 3600


@dataclass(frozen=True)
class Swept:
    """What a sweep of a feature cache did."""

    removed: int
    freed_bytes: int
    kept: int
    kept_bytes: int


def cache_sweep(folder: Path | str, max_bytes: int, *, now: float | None = None) -> Swept:
    """Keep a feature cache (every base's folder under `folder`) within `max_bytes`: the files
    used longest ago go first (a hit refreshes a file's time, FeatureStore.get), and a crash's
    half-written leftovers go always; sizes are what the files take on the disk. A file
    removed is read again by the base when next needed, so a sweep costs time, never a wrong
    score. Each cached text is a few KB (2.3 KB at SmolLM2's width, 20 KB at 5,120) and
    nothing else ever removes one."""
    now = time.time() if now is None else now
    files: list[tuple[float, int, Path]] = []
    removed = freed = 0
    for path in Path(folder).rglob("*"):
        try:
            stat = path.stat()
        except OSError:  # gone meanwhile (another sweep, a rename into place)
            continue
        if path.suffix == ".tmp" and now - stat.st_mtime > STALE_TEMPORARY_S:
            gone = _removed(path)
            removed, freed = removed + gone, freed + gone * disk_bytes(stat)
        elif path.suffix == ".npy":
            files.append((stat.st_mtime, disk_bytes(stat), path))
    total = sum(size for _used, size, _path in files)
    files.sort(key=lambda entry: (entry[0], str(entry[2])))
    kept = len(files)
    for _used, size, path in files:
        if total <= max_bytes:
            break
        if _removed(path):
            removed, freed, total, kept = removed + 1, freed + size, total - size, kept - 1
    return Swept(removed, freed, kept, total)


def disk_bytes(stat: os.stat_result) -> int:
    """What a file takes on the disk (whole blocks: a 2.3 KB read takes 4 KB), which is what a
    budget of the datasets volume means; its length where the system does not say."""
    blocks = getattr(stat, "st_blocks", None)
    return int(blocks) * 512 if blocks is not None else int(stat.st_size)


def _removed(path: Path) -> int:
    try:
        path.unlink()
    except OSError:  # gone meanwhile, or not ours to remove: the sweep goes on without it
        return 0
    return 1


@dataclass
class ReadStats:
    """What one `BaseReader.features` call did: texts read by the base, texts from the cache."""

    read: int = 0
    cached: int = 0
    tokens: int = 0
    # Tokens of the texts read that the base did not read again: a beginning they share, a
    # text that begins another (trainers.reading.passes).
    spared: int = 0
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        speed = self.tokens / self.seconds if self.seconds > 0 else None
        return {
            "read": self.read,
            "cached": self.cached,
            "tokens": self.tokens,
            "tokens_spared": self.spared,
            "seconds": round(self.seconds, 2),
            "tokens_per_second": round(speed, 1) if speed else None,
        }


@dataclass
class BaseReader:
    """A base's features for (call so far, reply) items, from the cache where it has them; the
    base itself is loaded on the first miss only, on `device` ("cpu", "cuda", "auto")."""

    base: str
    models_dir: Path | str
    features_dir: Path | str
    device: str = "cpu"
    batch_size: int = 16
    _model: Any = field(default=None, repr=False)
    _tokenizer: Any = field(default=None, repr=False)
    # The calls so far read lately: a few replies scored in turn at one moment read it once.
    _memo: CallMemo = field(default_factory=CallMemo, repr=False)

    @property
    def store(self) -> FeatureStore:
        return FeatureStore(store_folder(self.features_dir, self.base))

    def tokenizer(self) -> Any:
        if self._tokenizer is None:
            from trainers.bases import load_tokenizer

            self._tokenizer = load_tokenizer(self.base, models_dir=self.models_dir)
        return self._tokenizer

    def model(self) -> Any:
        if self._model is None:
            from trainers.bases import device_for, load_base

            self._model, self._tokenizer = load_base(
                self.base, models_dir=self.models_dir, head="causal", device=device_for(self.device)
            )
        return self._model

    def features(
        self,
        items: Sequence[Item],
        *,
        on_progress: Callable[[int, int], None] | None = None,
        stats: ReadStats | None = None,
    ) -> np.ndarray:
        """One row of features for each item, in order."""
        stats = stats if stats is not None else ReadStats()
        tokenizer = self.tokenizer()
        # The key needs only the item's ids; where the reply starts is worked out for the
        # items the cache lacks (a score from the cache tokenizes each item once).
        keys = [_key(trimmed(tokenizer, context, reply)[0]) for context, reply in items]
        found = self._cached(
            keys, lambda index: reply_row(tokenizer, *items[index]), FEATURES, stats, on_progress
        )
        if not keys:
            return np.zeros((0, 0), dtype=np.float32)
        return np.vstack([found[key] for key in keys]).astype(np.float32)

    def answers(self, items: Sequence[Item], *, stats: ReadStats | None = None) -> np.ndarray:
        """How much likelier the base finds each reply after its call so far than after a bare
        opening (trainers.judge.answers), from the cache where it has them."""
        tokenizer = self.tokenizer()
        called = [reply_row(tokenizer, context, reply) for context, reply in items]
        bare = [reply_row(tokenizer, [], reply) for _context, reply in items]
        rows = [*called, *bare]
        keys = [row.key() for row in rows]
        found = self._cached(
            keys, rows.__getitem__, LOG_PROBS, stats if stats is not None else ReadStats()
        )
        values = np.asarray([float(found[key][0]) for key in keys], dtype=np.float64)
        return values[: len(items)] - values[len(items) :]

    def _cached(
        self,
        keys: Sequence[str],
        row_of: Callable[[int], ReplyRow],
        kind: str,
        stats: ReadStats,
        on_progress: Callable[[int, int], None] | None = None,
    ) -> dict[str, np.ndarray]:
        """`kind` (FEATURES or LOG_PROBS) of every key, from the cache where it has it and else
        read by the base (`row_of(i)`: what the i-th key's item is, asked only on a miss)."""
        started = time.monotonic()
        store = self.store
        first: dict[str, int] = {}
        for index, key in enumerate(keys):
            first.setdefault(key, index)
        found = {key: store.get(key) for key in first}
        missing = [key for key, value in found.items() if value is None]
        stats.cached += len(keys) - len(missing)
        rows = {key: row_of(first[key]) for key in missing}
        # Families side by side (the replies at one moment, a call's turns in order), so a
        # block reads each shared beginning once (trainers.reading.passes).
        missing.sort(key=lambda key: rows[key].ids)
        # Stored a block at a time: a fit stopped halfway keeps what it read, and the progress
        # moves while the base reads.
        for start in range(0, len(missing), BLOCK):
            block = missing[start : start + BLOCK]
            passed = reply_pass(
                self.model(),
                [rows[key] for key in block],
                pad_token_id=self.tokenizer().pad_token_id,
                batch_size=self.batch_size,
                log_probs=kind == LOG_PROBS,
                memo=self._memo,
            )
            for index, key in enumerate(block):
                # The features of what was read are kept whatever was asked: the guard checks a
                # reply before the judge scores it, which then finds them here.
                store.put(_key(rows[key].ids), passed.features[index])
                found[key] = store_value(passed, index, kind)
                if kind == LOG_PROBS:
                    store.put(key, found[key])
            stats.read += len(block)
            stats.tokens += passed.tokens
            stats.spared += passed.spared
            if on_progress is not None:
                on_progress(start + len(block), len(missing))
        stats.seconds += time.monotonic() - started
        return found


def store_value(passed: Any, index: int, kind: str) -> np.ndarray:
    """What the cache holds of row `index` of a pass: its features, or its reply's mean
    log-probability as a one-element array."""
    if kind == FEATURES:
        return passed.features[index]
    return np.asarray([passed.log_probs[index]], dtype=np.float32)
