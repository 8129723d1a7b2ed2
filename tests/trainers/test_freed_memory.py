"""A trainer's process keeps the memory it frees: a large tensor freed and allocated again
comes from the heap, not from fresh pages the kernel must fault in and zero."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# Allocates, touches and frees 64 MB (the size of an LM head tile) a few times, as a tensor
# does, and counts the page faults of the last round.
PROBE = """
import ctypes, json, resource
from trainers.bases import return_freed_memory, reuse_freed_memory
kept = reuse_freed_memory()
again = reuse_freed_memory()
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
SIZE = 64 * 1024 * 1024
def round_faults():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    buffer = libc.malloc(SIZE)
    ctypes.memset(buffer, 1, SIZE)  # touched, as a tensor's first write does
    libc.free(buffer)
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
for _ in range(3):
    faults = round_faults()
return_freed_memory(above_bytes=1 << 40)  # within a stage: far less than that lies free
bounded = round_faults()
return_freed_memory()  # between stages: the kernel has the pages back, so they fault again
returned = round_faults()
print(json.dumps(
    {"kept": kept, "again": again, "faults": faults, "bounded": bounded, "returned": returned}
))
"""


def _probe(**env: str) -> dict:
    output = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), **env},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(output.strip().splitlines()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_a_freed_tensor_is_reused_without_new_page_faults():
    kept = _probe(LEVERS9_KEEP_FREED_MEMORY="1")
    assert kept["kept"] is True
    assert kept["again"] is True
    # 64 MB is 16,384 pages: as glibc ships, each round faults every one of them in again.
    assert kept["faults"] < 1_000
    assert kept["bounded"] < 1_000
    if not _huge_pages_always():
        assert kept["returned"] > 10_000
    shipped = _probe(LEVERS9_KEEP_FREED_MEMORY="0")
    assert shipped["kept"] is False
    if not _huge_pages_always():  # 2 MB pages would fault 32 times, not 16,384
        assert shipped["faults"] > 10_000


def _huge_pages_always() -> bool:
    setting = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    return setting.exists() and "[always]" in setting.read_text()
