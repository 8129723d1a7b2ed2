from __future__ import annotations

from django.apps import AppConfig


class PoliciesConfig(AppConfig):
    name = "policies"
    verbose_name = "Policies"

    def ready(self) -> None:
        from django.db.models.signals import post_delete, post_save

        from arena.agents import agent_directory_register
        from arena.models import World
        from levers9.game import home_part_register, mission_register
        from levers9.jobs.kinds import (
            JobKind,
            job_kind_register,
            trainer_register,
            watcher_hook_register,
        )
        from policies.agents import RegistryAgents
        from policies.endpoints import (
            SERVE_KIND,
            SERVE_TRAINER,
            endpoint_deleted,
            endpoints_reconcile,
            serve_job_finish,
        )
        from policies.missions import crown_mission, home_versions
        from policies.models import Endpoint
        from policies.selectors import serve_jobs_about
        from policies.services import world_baseline_on_save

        job_kind_register(
            JobKind(
                SERVE_KIND,
                "Serve request",
                finish=serve_job_finish,
                # A serve job that ended without serving fails its endpoint and frees its cards.
                on_end=lambda job: endpoints_reconcile(),
                # The job's cards become the endpoint's at the finish, freed on release.
                keeps_cards=True,
                # vLLM splits one server across the cards itself: no torchrun.
                data_parallel=False,
                about=serve_jobs_about,
            )
        )
        # Starts a vLLM server in its own session (or checks in-process weights) and returns.
        trainer_register(SERVE_TRAINER)
        # An endpoint row deleted however it was deleted (the Endpoints page, the admin, a
        # shell) releases its version at once; the watcher's look catches anything else.
        # A signal, against the house rule, because it is the only hook on every delete path.
        post_delete.connect(endpoint_deleted, sender=Endpoint, dispatch_uid="endpoint-deleted")
        # Every world has its own v1 · baseline, however the world was made (the API, the
        # World page, the admin, demo_setup, a shell): the arena sits below the registry and
        # cannot call it, and post_save is the one hook on every path that makes a world.
        post_save.connect(world_baseline_on_save, sender=World, dispatch_uid="world-baseline")
        watcher_hook_register(endpoints_reconcile)
        # The Duel asks the registry's versions for replies without importing policies.
        agent_directory_register(RegistryAgents())
        mission_register(6, crown_mission)
        home_part_register("versions", home_versions)
