"""Each existing version keeps the world it was made in; the shared v1 · baseline gets one
copy per world. No row is lost.

- A trained version's world is its training job's (Job.produced_version, else the job its
  `learned_from` names), else the `pack` its `learned_from` records, else its parent's, else
  the first world by name (the world the pages showed when none was chosen).
- v1 · baseline stays the first world's; every other world gets a copy (same fields, same
  date), and what that world pointed at the shared one is pointed at its copy: the children,
  jobs and evaluations of that world, and the duel replies of its moments.
- A live period and a canary take their version's world (a canary the candidate's). A canary
  still running between versions of two different worlds is rolled back: its split compared
  two businesses. Numbers are kept (v4 stays v4, so a job title or a note still names the
  right one); each world's next version is its own highest number plus one.
- A version trained in one world from another world's parent keeps that parent: the lineage
  says what happened.

`versions_keep_their_world(apps, schema_editor)` is tested directly
(tests/policies/test_versions_per_world_migration.py).
"""

from django.db import migrations
from django.utils import timezone

BASELINE_NUMBER = 1


def _copy_fields(version) -> dict:
    fields = {}
    for field in version._meta.concrete_fields:
        if field.primary_key or field.name in {"world", "parent"}:
            continue
        fields[field.attname] = getattr(version, field.attname)
    return fields


def versions_keep_their_world(apps, schema_editor) -> None:
    World = apps.get_model("arena", "World")
    PolicyVersion = apps.get_model("policies", "PolicyVersion")
    LivePeriod = apps.get_model("policies", "LivePeriod")
    Canary = apps.get_model("policies", "Canary")
    Job = apps.get_model("jobs", "Job")
    Evaluation = apps.get_model("evaluation", "Evaluation")
    Reply = apps.get_model("arena", "Reply")

    versions = list(PolicyVersion.objects.order_by("number", "pk"))
    worlds = list(World.objects.order_by("name", "pk"))
    if not versions:
        return
    if not worlds:
        # Every workspace is created with the lettings world; one without any world still
        # keeps its versions, in a world of that name.
        worlds = [World.objects.create(slug="lettings", name="Lettings")]
    first_world = worlds[0]
    slugs = {world.slug: world.pk for world in worlds}
    by_id = {version.pk: version for version in versions}

    job_world = dict(
        Job.objects.filter(produced_version__isnull=False, world__isnull=False)
        .order_by("-pk")
        .values_list("produced_version_id", "world_id")
    )
    jobs_world = dict(Job.objects.filter(world__isnull=False).values_list("pk", "world_id"))

    def world_of(version, seen: set) -> int:
        if version.world_id:
            return version.world_id
        learned_from = version.learned_from if isinstance(version.learned_from, dict) else {}
        world_id = (
            job_world.get(version.pk)
            or jobs_world.get(learned_from.get("job"))
            or slugs.get(learned_from.get("pack") or "")
        )
        parent = by_id.get(version.parent_id)
        if not world_id and parent is not None and parent.pk not in seen:
            world_id = world_of(parent, seen | {version.pk})
        return world_id or first_world.pk

    baseline = next((v for v in versions if v.number == BASELINE_NUMBER), None)
    for version in versions:
        if version is baseline:
            version.world_id = first_world.pk
        else:
            version.world_id = world_of(version, {version.pk})
        PolicyVersion.objects.filter(pk=version.pk).update(world_id=version.world_id)

    copies = {first_world.pk: baseline} if baseline else {}
    if baseline is not None:
        for world in worlds[1:]:
            copy = PolicyVersion.objects.create(world_id=world.pk, **_copy_fields(baseline))
            # auto_now_add set today's date: the copy is as old as the baseline it copies.
            PolicyVersion.objects.filter(pk=copy.pk).update(created_at=baseline.created_at)
            copies[world.pk] = copy
            PolicyVersion.objects.filter(parent=baseline, world_id=world.pk).update(parent=copy)
            Job.objects.filter(parent_version=baseline, world_id=world.pk).update(
                parent_version=copy
            )
            Evaluation.objects.filter(candidate=baseline, world_id=world.pk).update(candidate=copy)
            Evaluation.objects.filter(baseline=baseline, world_id=world.pk).update(baseline=copy)
            Reply.objects.filter(policy_version=baseline, moment__world_id=world.pk).update(
                policy_version=copy
            )

    world_of_version = dict(PolicyVersion.objects.values_list("pk", "world_id"))
    for period in LivePeriod.objects.all():
        LivePeriod.objects.filter(pk=period.pk).update(
            world_id=world_of_version[period.version_id]
        )

    for canary in Canary.objects.all():
        world_id = world_of_version[canary.candidate_id]
        changes = {}
        if baseline is not None and canary.candidate_id == baseline.pk:
            # The baseline was the candidate: the canary was the live version's world's.
            world_id = world_of_version[canary.live_id]
            changes["candidate_id"] = copies.get(world_id, baseline).pk
        elif baseline is not None and canary.live_id == baseline.pk:
            changes["live_id"] = copies.get(world_id, baseline).pk
        live_id = changes.get("live_id", canary.live_id)
        candidate_id = changes.get("candidate_id", canary.candidate_id)
        if world_of_version[live_id] != world_of_version[candidate_id] and canary.state == "running":
            changes.update(state="rolled_back", ended_at=timezone.now())
        Canary.objects.filter(pk=canary.pk).update(world_id=world_id, **changes)


class Migration(migrations.Migration):
    dependencies = [
        ("policies", "0006_versions_get_a_world"),
        ("jobs", "0002_phase_progress"),
        ("evaluation", "0003_flag_held_out_calls"),
        ("arena", "0008_world_moves_described"),
    ]

    # Going back keeps every row (the copies included): 0006's reverse restores a number
    # unique across the workspace, which the copies of v1 stop; renumber them by hand first.
    operations = [migrations.RunPython(versions_keep_their_world, migrations.RunPython.noop)]
