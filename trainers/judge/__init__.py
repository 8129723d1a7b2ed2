"""The judge without Django. The rule: everything of the judge that runs without Django lives
here — the kinds of judge, the on-topic guard, the standing figures, the fitting; what reads or
writes the database, resolves a world's judge, or serves a page or the API is arena.judge, and
reading replies with a base is trainers.reading (which this room uses and which never uses it).

  rubric        the rubric, its dimensions and weights, the deterministic RubricJudge (the cold
                start), and the Judge protocol every judge answers (Turn, Judgement)
  model_judge   ModelJudge: the rubric put to a model behind any provider, and its errors
  fitted_judge  FittedJudge: a world's fitted version at scoring time, and the rows a fit reads
  topic         the world's pure topic model and the joint test of its words with the answer
  topic_guard   the on-topic guard around any judge (judge_guarded) and its floors
  answers       whether a reply answers its call, for a judge that reads with a base
  standing      how far a held-out measure can be believed: none shown on fewer than
                MIN_HELD_OUT_ITEMS items, and whether the judge is above or at chance
  fit           the fit itself (a trainer: python -m trainers.judge.fit)
  learned       the base's heads, and whether the words stay beside them

Pure Python; never imports Django."""
