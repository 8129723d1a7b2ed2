"""The workspace admin as the control panel of versions and worlds: the version list shows
the live badge, lineage, what it learned from, its last evaluation, its endpoint and cards and
"did not learn"; each action (Make live, Serve on N cards, Release, Runs on, Evaluate against
the live version, Start a canary) changes the same rows as the API does on a second version;
the owner only; the rival workspace sees and changes nothing."""

from __future__ import annotations

import json
import re

import pytest

from arena.models import JudgeVersion, World
from evaluation.models import Evaluation, EvaluationCallSet
from levers9.jobs.models import Job
from levers9.models import CardAllocation
from policies.canary import canary_roll_back, canary_running
from policies.endpoints import version_serve
from policies.models import Canary, Endpoint, LivePeriod, PolicyVersion
from policies.services import version_register
from trainers.registry import Q_LEARNING_ONLINE

VERSIONS = "/admin/policies/policyversion/"
REASONS = ["reward model at chance on held-out pairs (0.50 [0.41, 0.59])"]


def _act(client, action: str, versions, **fields):
    """Post an action on the version list, as its dropdown does (`post=yes` confirms an
    intermediate page)."""
    return client.post(
        VERSIONS, {"action": action, "_selected_action": [v.pk for v in versions], **fields}
    )


def _simulated(name: str, **learned) -> PolicyVersion:
    return version_register(
        world=World.objects.get(slug="lettings"),
        name=name,
        parent=PolicyVersion.objects.get(world__slug="lettings", number=1),
        move_strategy={"kind": "scripted"},
        learned_from={"algorithm": Q_LEARNING_ONLINE, **learned},
    )


def _trained(workspace, models_dir, name: str) -> PolicyVersion:
    number = PolicyVersion.objects.order_by("-number").first().number + 1
    weights = models_dir / workspace.schema_name / f"v{number}"
    weights.mkdir(parents=True)
    (weights / "config.json").write_text(json.dumps({"model_type": "qwen3"}))
    return version_register(
        world=World.objects.get(slug="lettings"),
        name=name,
        parent=PolicyVersion.objects.get(world__slug="lettings", number=1),
        move_strategy={"kind": "scripted"},
        learned_from={"algorithm": "dpo", "preference_version": 1},
        provider=PolicyVersion.Provider.TRAINED,
        provider_model=f"{workspace.schema_name}/v{number}",
    )


def _evaluated(version: PolicyVersion, *, win_rate=0.62, ci=(0.55, 0.70), verdict="won"):
    world = World.objects.get(slug="lettings")
    call_set, _ = EvaluationCallSet.objects.get_or_create(world=world, kind="scripted")
    return Evaluation.objects.create(
        world=world,
        call_set=call_set,
        candidate=version,
        baseline=PolicyVersion.objects.get(world__slug="lettings", number=1),
        state=Evaluation.State.DONE,
        judge_model="fitted v3 of lettings",
        summary={
            "win_rate": win_rate,
            "ci": list(ci),
            "verdict": verdict,
            # Its judge measured above chance: only then is the judge's verdict one.
            "judge_agreement": {
                "measured": True,
                "pairs": 120,
                "pair_accuracy": 0.7,
                "pair_accuracy_ci": [0.62, 0.78],
            },
        },
    )


def _messages(response) -> list[str]:
    return [str(message) for message in response.wsgi_request._messages]


@pytest.fixture
def owner(in_workspace):
    from django.contrib.auth import get_user_model

    return get_user_model().objects.get(username="owner@acme.test")


@pytest.fixture
def two_trained(in_workspace, models_dir, gpu_pool, serve_trainer):
    return _trained(in_workspace, models_dir, "first"), _trained(in_workspace, models_dir, "second")


# --- the list --------------------------------------------------------------------------------


def test_it_lists_each_versions_live_badge_lineage_evaluation_endpoint_and_did_not_learn(
    in_workspace, owner_client, models_dir, gpu_pool, serve_trainer
):
    trained = _trained(in_workspace, models_dir, "wording")
    PolicyVersion.objects.filter(pk=trained.pk).update(
        learned_from={"algorithm": "dpo", "preference_version": 1, "did_not_learn": REASONS}
    )
    endpoint = version_serve(version=trained, gpu_count=2, pool_name=gpu_pool.name)
    _evaluated(trained)
    html = owner_client.get(VERSIONS).content.decode()
    assert "● live" in html  # v1 · baseline, live in a new workspace
    assert "v2 · wording ← v1 · baseline" in html
    assert "DPO on its base from preference v1, from v1" in html  # what it learned from
    assert "won: win rate 0.62 [0.55, 0.70] vs v1 · baseline, judge fitted v3 of lettings" in html
    assert f"endpoint {endpoint.pk}, starting: 2 × H200 on test-h200" in html
    assert "⚠ did not learn" in html
    assert REASONS[0] in html  # the mark's title says why

    live_only = owner_client.get(VERSIONS + "?live=yes").content.decode()
    assert "v1 · baseline" in live_only
    assert "v2 · wording" not in live_only
    not_live = owner_client.get(VERSIONS + "?live=no").content.decode()
    assert "v2 · wording" in not_live
    assert "● live" not in not_live
    trained_only = owner_client.get(VERSIONS + "?provider=trained&status=starting").content
    assert "v2 · wording" in trained_only.decode()
    baseline = PolicyVersion.objects.get(world__slug="lettings", number=1)
    baseline_link = f"{VERSIONS}{baseline.pk}/change/"
    assert baseline_link in html
    assert baseline_link not in trained_only.decode()


def test_it_shows_the_same_figures_on_a_versions_change_page(in_workspace, owner_client):
    version = _simulated("moves", did_not_learn=REASONS)
    _evaluated(version, win_rate=0.41, ci=(0.33, 0.49), verdict="lost")
    html = owner_client.get(f"{VERSIONS}{version.pk}/change/").content.decode()
    assert "lost: win rate 0.41 [0.33, 0.49] vs v1 · baseline" in html
    assert "v2 · moves ← v1 · baseline" in html
    assert "⚠ did not learn" in html


# --- each action changes what the API changes ---------------------------------------------


def test_it_makes_a_version_live_after_a_confirmation_with_its_numbers(
    in_workspace, owner_client, owner
):
    by_admin, by_api = _simulated("admin", did_not_learn=REASONS), _simulated("api")
    _evaluated(by_admin)
    confirmation = _act(owner_client, "make_live", [by_admin])
    assert confirmation.status_code == 200
    html = confirmation.content.decode()
    assert "Make v2 · admin live?" in html
    assert "0.620" in html  # win rate
    assert "[0.550, 0.700]" in html  # its interval
    assert "fitted v3 of lettings" in html  # the judge version that scored it
    assert f"Did not learn: {REASONS[0]}" in html
    assert not LivePeriod.objects.filter(version=by_admin).exists()  # nothing yet

    done = _act(owner_client, "make_live", [by_admin], post="yes")
    assert done.status_code == 302
    admin_period = LivePeriod.objects.get(version=by_admin)
    assert (admin_period.current, admin_period.made_live_by) == (True, owner)

    assert owner_client.post(f"/api/rl/policies/{by_api.pk}/make-live/").status_code == 200
    admin_period.refresh_from_db()
    api_period = LivePeriod.objects.get(version=by_api)
    assert admin_period.current is False
    assert admin_period.ended_at is not None
    assert (api_period.current, api_period.made_live_by, api_period.note) == (
        True,
        owner,
        admin_period.note,
    )


def test_it_serves_on_n_cards_from_a_small_form_as_the_api_does(two_trained, owner_client, owner):
    by_admin, by_api = two_trained
    form = _act(owner_client, "serve", [by_admin])
    assert form.status_code == 200
    assert 'name="gpu_count"' in form.content.decode()
    assert "test-h200: 4 × H200" in form.content.decode()
    assert not Endpoint.objects.exists()

    done = _act(owner_client, "serve", [by_admin], post="yes", pool="test-h200", gpu_count="1")
    assert done.status_code == 302
    response = owner_client.post(
        f"/api/rl/policies/{by_api.pk}/serve",
        {"gpu_count": 1, "pool": "test-h200"},
        content_type="application/json",
    )
    assert response.status_code == 202

    def shape(version):
        version.refresh_from_db()
        endpoint = Endpoint.objects.get(version=version)
        job = Job.objects.get(pk=endpoint.job_id)
        allocation = CardAllocation.objects.get(pk=endpoint.card_allocation_id)
        return (
            version.status,
            endpoint.state,
            endpoint.kind,
            endpoint.pool_name,
            endpoint.card_count,
            endpoint.started_by,
            job.kind,
            job.card_count,
            allocation.card_count,
            allocation.holder_kind,
        )

    assert shape(by_admin) == shape(by_api)
    assert shape(by_admin)[:5] == ("starting", "starting", "vllm", "test-h200", 1)
    assert shape(by_admin)[5] == owner


def test_it_releases_as_the_api_does(two_trained, gpu_pool, owner_client):
    by_admin, by_api = two_trained
    for version in two_trained:
        version_serve(version=version, gpu_count=1, pool_name=gpu_pool.name)
    assert _act(owner_client, "release", [by_admin]).status_code == 302
    assert owner_client.post(f"/api/rl/policies/{by_api.pk}/release").status_code == 200

    def shape(version):
        version.refresh_from_db()
        endpoint = Endpoint.objects.get(version=version)
        allocation = CardAllocation.objects.get(pk=endpoint.card_allocation_id)
        return version.status, endpoint.state, endpoint.ended_at is not None, allocation.state

    assert shape(by_admin) == shape(by_api) == ("released", "released", True, "released")


def test_it_starts_a_canary_as_the_api_does(in_workspace, owner_client, owner):
    by_admin, by_api = _simulated("admin"), _simulated("api")
    form = _act(owner_client, "canary", [by_admin])
    assert form.status_code == 200
    assert "Live now" in form.content.decode()
    assert not Canary.objects.exists()
    done = _act(owner_client, "canary", [by_admin], post="yes", share_percent="10")
    assert done.status_code == 302
    admin_canary = Canary.objects.get(candidate=by_admin)
    canary_roll_back(canary=admin_canary)  # one canary runs at a time
    response = owner_client.post(
        "/api/rl/canary/start/",
        {"candidate": by_api.number, "share": 0.1},
        content_type="application/json",
    )
    assert response.status_code == 201
    api_canary = canary_running(world=by_api.world)
    assert api_canary.candidate == by_api

    def shape(canary):
        return canary.live.number, canary.share, canary.started_by

    assert shape(admin_canary) == shape(api_canary) == (1, 0.1, owner)


def test_it_moves_where_a_version_runs_as_the_api_does(in_workspace, owner_client, stub):
    by_admin, by_api = _simulated("admin"), _simulated("api")
    fields = {
        "provider": "vllm",
        "model": "Qwen/Qwen3-14B",
        "endpoint_url": stub.base_url,
        "lora_adapter": "wording",
        "api_key_env": "VLLM_API_KEY",
    }
    form = _act(owner_client, "runs_on", [by_admin])
    assert 'name="endpoint_url"' in form.content.decode()
    assert _act(owner_client, "runs_on", [by_admin], post="yes", **fields).status_code == 302
    response = owner_client.post(
        f"/api/rl/policies/{by_api.pk}/runs-on", fields, content_type="application/json"
    )
    assert response.status_code == 200

    def shape(version):
        version.refresh_from_db()
        return (
            version.provider,
            version.provider_model,
            version.endpoint_url,
            version.lora_adapter,
            version.api_key_env,
        )

    assert shape(by_admin) == shape(by_api) == tuple(fields.values())


def test_it_evaluates_against_the_live_version_through_the_evaluate_page(
    in_workspace, owner_client, owner
):
    by_admin, by_api = _simulated("admin"), _simulated("api")
    step = _act(owner_client, "evaluate_against_live", [by_admin])
    assert step.status_code == 200
    html = step.content.decode()
    assert 'action="/evaluate/"' in html
    assert f'name="candidate" value="{by_admin.pk}"' in html
    assert 'name="baseline" value="1"' in html  # v1 · baseline is live
    # The operator submits the page's form as the browser would: its hidden fields, a world.
    hidden = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', html))
    hidden.pop("csrfmiddlewaretoken")
    assert "action" not in hidden  # it posts to the Evaluate page, not back to the list
    started = owner_client.post("/evaluate/", {**hidden, "world": "lettings", "seed": "0"})
    assert started.status_code == 302
    response = owner_client.post(
        "/api/rl/evaluations/",
        {"pack": "lettings", "candidate": by_api.number, "baseline": 1, "seed": 0},
        content_type="application/json",
    )
    assert response.status_code in {201, 202}

    def shape(version):
        evaluation = Evaluation.objects.get(candidate=version)
        return (
            evaluation.baseline.number,
            evaluation.world.slug,
            evaluation.state,
            evaluation.purpose,
            evaluation.started_by,
            evaluation.job.kind,
        )

    assert (
        shape(by_admin) == shape(by_api) == (1, "lettings", "queued", "evaluate", owner, "evaluate")
    )


# --- refusals are messages, not error pages ------------------------------------------------


def test_it_says_why_a_service_refuses_in_a_message(in_workspace, owner_client):
    simulated = _simulated("moves")
    released = _simulated("released")
    PolicyVersion.objects.filter(pk=released.pk).update(status=PolicyVersion.Status.RELEASED)
    cases = [
        (_act(owner_client, "make_live", [released], post="yes"), "answers nothing"),
        (
            _act(owner_client, "serve", [simulated], post="yes", gpu_count="1"),
            "only a trained version has weights to serve",
        ),
        (_act(owner_client, "release", [simulated]), "holds no endpoint to release"),
        (
            _act(
                owner_client,
                "canary",
                [PolicyVersion.objects.get(world__slug="lettings", number=1)],
                post="yes",
                share_percent="10",
            ),
            "is the live version",
        ),
        (
            _act(owner_client, "canary", [simulated], post="yes", share_percent="150"),
            "less than 100 percent",
        ),
        (
            _act(
                owner_client, "runs_on", [simulated], post="yes", provider="judge", world="lettings"
            ),
            "rubric judge",
        ),
        (_act(owner_client, "make_live", [simulated, released]), "Choose one version"),
    ]
    for response, words in cases:
        assert response.status_code == 302, words
        assert any(words in message for message in _messages(response)), words
    assert LivePeriod.objects.count() == 0
    assert not Canary.objects.exists()
    assert PolicyVersion.objects.get(pk=simulated.pk).provider == "simulator"


# --- who may ----------------------------------------------------------------------------------


def test_it_lets_a_reviewer_or_manager_look_but_not_act(
    in_workspace, reviewer_client, manager_client, models_dir, gpu_pool, serve_trainer
):
    trained = _trained(in_workspace, models_dir, "trained")
    candidate = _simulated("candidate")
    for client in (reviewer_client, manager_client):
        listing = client.get(VERSIONS)
        assert listing.status_code == 200
        assert "Make live…" not in listing.content.decode()
        assert "v3 · candidate" in listing.content.decode()
        _act(client, "make_live", [candidate], post="yes")
        _act(client, "serve", [trained], post="yes", pool=gpu_pool.name, gpu_count="1")
        _act(client, "canary", [candidate], post="yes", share_percent="10")
        _act(client, "runs_on", [candidate], post="yes", provider="vllm", model="m")
        step = _act(client, "evaluate_against_live", [candidate])
        assert 'action="/evaluate/"' not in step.content.decode()
    assert not LivePeriod.objects.exists()
    assert not Endpoint.objects.exists()
    assert not Canary.objects.exists()
    assert PolicyVersion.objects.get(pk=candidate.pk).provider == "simulator"


def test_it_refuses_the_rival_workspace_the_versions_and_their_actions(
    workspace, outsider_client, two_trained, gpu_pool
):
    by_admin, _other = two_trained
    endpoint = version_serve(version=by_admin, gpu_count=1, pool_name=gpu_pool.name)
    world = World.objects.get(slug="lettings")
    for path in (
        VERSIONS,
        f"{VERSIONS}{by_admin.pk}/change/",
        f"/admin/arena/world/{world.pk}/change/",
    ):
        response = outsider_client.get(path)
        assert response.status_code == 302, path
        assert "/admin/login/" in response["Location"], path
    for action, fields in (
        ("make_live", {}),
        ("release", {}),
        ("serve", {"gpu_count": "1"}),
        ("canary", {"share_percent": "10"}),
    ):
        response = _act(outsider_client, action, [_other], post="yes", **fields)
        assert response.status_code == 302, action
        assert "/admin/login/" in response["Location"], action
    assert _act(outsider_client, "release", [by_admin]).status_code == 302
    endpoint.refresh_from_db()
    assert endpoint.state == Endpoint.State.STARTING
    assert Endpoint.objects.count() == 1
    assert not LivePeriod.objects.exists()
    assert not Canary.objects.exists()


# --- worlds -----------------------------------------------------------------------------------


def test_it_shows_a_worlds_moves_prompt_and_judge_versions_read_only(in_workspace, owner_client):
    world = World.objects.get(slug="lettings")
    World.objects.filter(pk=world.pk).update(system_prompt="You are the lettings agent of Acme.")
    JudgeVersion.objects.create(
        world=world,
        number=1,
        model_dir="-",
        report={
            "pairs": {
                "fitted": {"pairs": 80, "accuracy": 0.71, "accuracy_ci": [0.6, 0.8]},
                "rubric": {"pairs": 80, "accuracy": 0.52, "accuracy_ci": [0.41, 0.63]},
            },
            "outcomes": {
                "fitted": {"calls": 40, "auc": 0.66, "auc_ci": [0.55, 0.77]},
                "rubric": {"calls": 40, "auc": 0.54, "auc_ci": [0.44, 0.64]},
            },
        },
    )
    page = owner_client.get(f"/admin/arena/world/{world.pk}/change/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "You are the lettings agent of Acme." in html
    assert "propose_viewing" in html  # the moves, one a line
    assert "fitted v1" in html
    assert "0.71 [0.60, 0.80]" in html
    assert "0.52 [0.41, 0.63]" in html  # the rubric's, beside it
    assert "0.66 [0.55, 0.77]" in html
    assert 'name="judge_versions' not in html  # read only: no field or formset to post
    assert "<th>At chance</th>" in html
