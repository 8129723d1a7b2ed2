"""The apps register every trainer the registry names, each with the registry's module."""

from __future__ import annotations

from levers9.jobs.kinds import TRAINERS as REGISTERED
from trainers.registry import TRAINERS


def test_it_registers_each_named_trainer_with_its_module():
    for name, named in TRAINERS.items():
        assert REGISTERED[name].module == named.module, name
        assert not REGISTERED[name].in_worker


def test_it_keeps_the_in_worker_trainers_out_of_the_registry():
    in_worker = {name for name, registered in REGISTERED.items() if registered.in_worker}
    assert in_worker
    assert not in_worker & set(TRAINERS)
    assert REGISTERED["evaluate"].in_worker
