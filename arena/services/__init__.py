"""Writes of the arena, in the workspace schema: worlds and their scenarios (worlds), real-call
import (calls), the Duel's pairs, reservations and picks (pairs, queue), preference import and
freezing picks into preference versions (preferences, freeze), and move labels (move_labels).
The judge's overrides and rescoring are arena.judge.overrides'.

Each sub-domain has its module; import a service from the module that holds it (this package
re-exports nothing), and name it so in dotted task paths, e.g.
"arena.services.worlds.world_create_lettings".
"""
