"""Statistics, each written once: the AUC (auc.py), bootstrap and Wilson intervals and the
chance test (intervals.py), the sigmoid and the logistic and Bradley-Terry fits (logistic.py),
the batched Newton fit in torch (logistic_batched.py), and the Bradley-Terry leaderboard
(leaderboard.py). Everything else calls these; a test
(tests/trainers/stats/test_defined_once.py) finds a second copy.

Pure Python; never imports Django."""
