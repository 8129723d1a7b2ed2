"""The judge: what scores an agent's reply in its call on its world's rubric (the seven
dimensions by default, or the world's own), and everything a world does with its judge. Each
idea has one module; import from it by name (this package re-exports nothing, so importing one
part never loads the others).

Kinds of judge (pure Python, no Django; apps and benchmarks share them):
  rubric     the rubric, its dimensions and weights, the deterministic RubricJudge (the cold
             start), and the Judge protocol every judge answers (Turn, Judgement)
  model      ModelJudge: the rubric put to a model behind any provider, and its errors
  fitted     FittedJudge: a world's fitted version at scoring time, and the rows a fit reads

A world's judge (workspace schema):
  dimensions the world's rubric, which is also its reason tags (world_dimensions): the one
             resolver the Duel, picks, judges, the fit, overrides, agreement and the radar ask
  resolve    which judge scores a world's moments (judge_for_world): the one resolver
  versions   the world's numbered fitted versions: the newest, and a version as a judge
  reading    which base a fit reads with, the workspace's feature cache, the reader a version
             scores with: base_client, which asks the machine's one scoring process per
             base (trainers.reading.base_server), so no process that scores holds a model
  setting    Environment → Judge: naming the world's judge (world_judge_set)
  scoring    a stored reply's verdict recorded, and many items scored for the API
  rows       what a world's judge learns from: frozen picks, overrides, outcome-labelled calls
  fitting    the fit job (kind "judge-fit") and its coalesced refits after a freeze or override
  agreement  how far the judge agrees with people: reviewers' overrides per dimension, and
             the measurement job of a model judge on held-out picks
  overrides  a reviewer overruling the judge, and the rescoring that applies overrides
  standing   how far a held-out measure can be believed: none shown on fewer than
             MIN_HELD_OUT_ITEMS items, and whether the judge is above or at chance (pure)

The pure fit itself sits with the other trainers, in trainers.judge.fit.
"""
