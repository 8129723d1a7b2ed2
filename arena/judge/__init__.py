"""The judge's Django side. The rule: only what reads or writes the database, resolves a
world's judge, or serves a page or the API lives here; everything that runs without Django
(the kinds of judge, the on-topic guard, the standing figures, the fitting) is in
trainers.judge, and reading replies with a base is trainers.reading. Each idea has one module;
import from it by name (this package re-exports nothing). Workspace schema.

  world_dimensions    the world's rubric, which is also its reason tags (world_dimensions): the
                      one lookup the Duel, picks, judges, the fit, overrides and the radar use
  world_judge         which judge scores a world's moments (judge_for_world): the one resolver
  world_judge_choice  Environment → Judge: naming the world's judge (world_judge_set)
  world_topic_guard   each world's on-topic guard (trainers.judge.topic_guard), built and cached
  versions            the world's numbered fitted versions: the newest, and a version as a judge
  judge_base          which base a fit reads with, the workspace's feature cache and its sweep,
                      the reader a version scores with (trainers.reading.base_client)
  scoring             a stored reply's verdict recorded, and many items scored for the API
  fit_rows            what a world's judge learns from: frozen picks, overrides, outcome-labelled
                      calls (never a held-out one)
  fit_job             the fit job (kind "judge-fit") and its coalesced refits after a freeze or
                      an override
  agreement           how far the judge agrees with people: reviewers' overrides per dimension,
                      and the measurement job of a model judge on held-out picks
  overrides           a reviewer overruling the judge, and the rescoring that applies overrides
"""
