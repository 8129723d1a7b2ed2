"""The apps register every trainer the catalogue names, each with the catalogue's module and
under the job kinds it says."""

from __future__ import annotations

import pytest

from levers9.jobs.kinds import TRAINERS as REGISTERED
from levers9.jobs.kinds import job_kind, trainer_register
from trainers.registry import DPO, TRAINERS


def test_it_registers_each_named_trainer_with_its_module():
    for name, named in TRAINERS.items():
        assert REGISTERED[name].module == named.module, name
        assert not REGISTERED[name].in_worker


def test_it_keeps_the_in_worker_trainers_out_of_the_registry():
    in_worker = {name for name, registered in REGISTERED.items() if registered.in_worker}
    assert in_worker
    assert not in_worker & set(TRAINERS)
    assert REGISTERED["evaluate"].in_worker


def test_it_registers_the_job_kinds_each_trainer_runs_under():
    for name, named in TRAINERS.items():
        for kind in named.job_kinds:
            assert job_kind(kind).name == kind, name


def test_a_trainer_runs_the_module_the_catalogue_names_or_a_function_it_is_given():
    with pytest.raises(ValueError, match="not in trainers.registry"):
        trainer_register("sarsa")
    with pytest.raises(ValueError, match="runs its module"):
        trainer_register(DPO, function=lambda job_id, progress: {})
    assert REGISTERED[DPO].module == "trainers.wording.dpo"
