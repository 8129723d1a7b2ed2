"""Writes of the arena, in the workspace schema: worlds and their scenarios, real-call
import, the Duel (pairs, reservations, picks) and freezing picks into preference versions.
The judge's overrides and rescoring are arena.judge.overrides'.

Each sub-domain has its module (worlds, calls, pairs, queue, freeze); this package
re-exports their services, so callers import from `arena.services` and dotted task paths
such as "arena.services.world_create_lettings" keep resolving here. A test that patches what a
service reads patches it in the module that holds the service (say
"arena.services.pairs.judge_reads_with_a_base"), not here.
"""

from __future__ import annotations

from arena.services.calls import (
    MAX_CALL_ID_LENGTH,
    OUTCOMES,
    SPEAKERS,
    CallImportError,
    ImportProblem,
    ImportReport,
    calls_import,
    calls_validate,
)
from arena.services.freeze import (
    COPY_BUFFER_BYTES,
    WrittenVersion,
    preference_freeze,
    preference_version_write,
)
from arena.services.move_labels import (
    calls_label_moves,
    move_corrections,
    move_labels_agreement,
)
from arena.services.pairs import (
    DUEL_PAIRS_KIND,
    DUEL_PAIRS_TRAINER,
    PAIR_BATCH,
    SECOND_OPINION_EVERY,
    SLOW_BATCH,
    JudgeFailed,
    PairsRequested,
    duel_pairs_generate,
    duel_pairs_job_run,
    duel_pairs_jobs_active,
    duel_pairs_request,
    duel_versions,
)
from arena.services.preferences import (
    PreferenceImportError,
    PreferenceImportReport,
    preferences_import,
    preferences_validate,
)
from arena.services.queue import (
    REASONS,
    RESERVATION,
    duel_next,
    duel_pairs_request_opinion,
    duel_reservations_release,
    duel_skip,
    pick_reasons_clean,
    pick_submit,
    pick_undo,
)
from arena.services.worlds import (
    LETTINGS_WORLD_SLUG,
    SYSTEM_PROMPT_MAX,
    WorldBadInput,
    world_create,
    world_create_lettings,
    world_moves_set,
    world_system_prompt_set,
    world_update,
)

__all__ = [
    "PreferenceImportError",
    "PreferenceImportReport",
    "preferences_import",
    "preferences_validate",
    "COPY_BUFFER_BYTES",
    "DUEL_PAIRS_KIND",
    "DUEL_PAIRS_TRAINER",
    "LETTINGS_WORLD_SLUG",
    "MAX_CALL_ID_LENGTH",
    "OUTCOMES",
    "PAIR_BATCH",
    "REASONS",
    "RESERVATION",
    "SECOND_OPINION_EVERY",
    "SLOW_BATCH",
    "SPEAKERS",
    "SYSTEM_PROMPT_MAX",
    "CallImportError",
    "ImportProblem",
    "ImportReport",
    "JudgeFailed",
    "PairsRequested",
    "WorldBadInput",
    "WrittenVersion",
    "calls_import",
    "calls_validate",
    "duel_next",
    "duel_pairs_generate",
    "duel_pairs_job_run",
    "duel_pairs_jobs_active",
    "duel_pairs_request",
    "duel_pairs_request_opinion",
    "duel_reservations_release",
    "duel_skip",
    "duel_versions",
    "pick_reasons_clean",
    "pick_submit",
    "pick_undo",
    "preference_freeze",
    "preference_version_write",
    "world_create",
    "world_create_lettings",
    "world_moves_set",
    "world_system_prompt_set",
    "world_update",
    "calls_label_moves",
    "move_corrections",
    "move_labels_agreement",
]
