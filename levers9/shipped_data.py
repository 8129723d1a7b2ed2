"""The real data the repository ships (`data/`): the one place that names its folder.

The demo, the tests and the benchmarks read the recorded calls and the preference pairs from
here, so a clone needs nothing beside it. No Django: trainer tests and benchmarks import it
without settings. Each set keeps its licence and citation in its own folder (`README.md`,
`LICENSE`).
"""

from __future__ import annotations

from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent.parent / "data"

PERSUASION_DIR = DATA_DIR / "real-calls" / "persuasionforgood"
PERSUASION_CALLS = PERSUASION_DIR / "calls.jsonl"
"""1,017 real persuasion chats with their real outcome (Wang et al., ACL 2019; Apache-2.0)."""

HH_RLHF_DIR = DATA_DIR / "preferences" / "hh-rlhf-harmless"
HH_RLHF_PAIRS = HH_RLHF_DIR / "pairs.jsonl"
"""1,150 real human preference pairs in TRL's format (Anthropic hh-rlhf, harmless-base; MIT)."""
