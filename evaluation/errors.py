"""The error of evaluation: an evaluation, checkpoint or held-out call set that cannot be
started or run. In a module of its own so that every module of the app that refuses something
(the held-out calls as well as the services) raises the one class the pages and the API catch.
"""

from __future__ import annotations


class EvaluationError(ValueError):
    """An evaluation that cannot be started or run; the message says why."""
