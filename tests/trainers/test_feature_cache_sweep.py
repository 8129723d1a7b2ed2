"""The feature cache's sweep (trainers.reading.base_features.cache_sweep): within its budget, the
reads used longest ago go first, a hit counts as a use, and a crash's leftovers go always."""

from __future__ import annotations

import os
import time

import numpy as np

from trainers.reading.base_features import (
    STALE_TEMPORARY_S,
    FeatureStore,
    cache_sweep,
    disk_bytes,
)

NOW = time.time()


def _cached(store: FeatureStore, key: str, used: float) -> int:
    """A read of 64 floats cached under `key`, last used at `used`; what it takes on disk."""
    store.put(key, np.arange(64, dtype=np.float32))
    path = store.folder / key[:2] / f"{key}.npy"
    os.utime(path, (used, used))
    return disk_bytes(path.stat())


def _keys(store: FeatureStore) -> set[str]:
    return {path.stem for path in store.folder.rglob("*.npy")}


def test_the_reads_used_longest_ago_go_first_until_the_cache_fits(tmp_path):
    store = FeatureStore(tmp_path / "smollm2")
    sizes = [_cached(store, f"{index:02x}key", NOW - 1000 + index) for index in range(10)]
    swept = cache_sweep(tmp_path, sum(sizes[:4]), now=NOW)
    assert _keys(store) == {f"{index:02x}key" for index in range(6, 10)}
    assert (swept.removed, swept.kept) == (6, 4)
    assert swept.freed_bytes == sum(sizes[:6])
    assert swept.kept_bytes == sum(sizes[6:]) <= sum(sizes[:4])


def test_a_hit_is_a_use_so_a_read_the_scorer_keeps_reading_stays(tmp_path):
    store = FeatureStore(tmp_path / "smollm2")
    size = _cached(store, "aaold", NOW - 500)
    _cached(store, "bbnewer", NOW - 100)
    assert store.get("aaold") is not None  # read now: the newest use
    cache_sweep(tmp_path, size)
    assert _keys(store) == {"aaold"}


def test_within_budget_nothing_goes_but_a_crashed_write_does(tmp_path):
    store = FeatureStore(tmp_path / "smollm2")
    _cached(store, "aakey", NOW - 10)
    stale, fresh = tmp_path / "smollm2" / "aa" / "x.tmp", tmp_path / "smollm2" / "aa" / "y.tmp"
    for path, age in ((stale, STALE_TEMPORARY_S + 1), (fresh, 5)):
        path.write_bytes(b"half")
        os.utime(path, (NOW - age, NOW - age))
    stale_bytes = disk_bytes(stale.stat())
    swept = cache_sweep(tmp_path, 10**9, now=NOW)
    assert _keys(store) == {"aakey"}
    assert not stale.exists()
    assert fresh.exists()  # a write in progress is left alone
    assert (swept.removed, swept.freed_bytes, swept.kept) == (1, stale_bytes, 1)


def test_a_budget_counts_what_the_files_take_on_the_disk(tmp_path):
    store = FeatureStore(tmp_path / "smollm2")
    _cached(store, "aakey", NOW - 10)
    path = next(store.folder.rglob("*.npy"))
    assert disk_bytes(path.stat()) >= path.stat().st_size  # whole blocks, not the length
    assert cache_sweep(tmp_path, disk_bytes(path.stat())).kept_bytes == disk_bytes(path.stat())


def test_every_base_shares_the_budget_and_a_missing_cache_is_no_error(tmp_path):
    small, large = FeatureStore(tmp_path / "a"), FeatureStore(tmp_path / "b")
    size = _cached(small, "aaone", NOW - 50)
    _cached(large, "bbtwo", NOW - 40)
    cache_sweep(tmp_path, size, now=NOW)
    assert (_keys(small), _keys(large)) == (set(), {"bbtwo"})
    assert cache_sweep(tmp_path / "absent", 0).removed == 0
