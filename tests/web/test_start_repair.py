import pytest
from django.urls import reverse

from project.celery import app as celery_app
from tests.helpers import sample
from transcripts.models import Job, JobItem, WorkspacePolicy

URL = reverse("transcripts:start_repair")
pytestmark = pytest.mark.django_db


@pytest.fixture
def sessions(workspace, ingest):
    return [
        ingest(workspace, "claude_code.jsonl", sample("formats/claude_code.jsonl")),
        ingest(workspace, "openclaw.jsonl", sample("formats/openclaw.jsonl")),
    ]


def test_it_rejects_get(alice_client):
    assert alice_client.get(URL).status_code == 405


def test_it_starts_a_job_for_the_selected_sessions(alice_client, alice, workspace, sessions):
    response = alice_client.post(URL, {"sessions": [s.pk for s in sessions], "policy": "discard"})
    job = Job.objects.get()
    assert response.status_code == 302
    assert response.url == job.get_absolute_url()
    assert (job.workspace, job.created_by, job.policy) == (workspace, alice, "discard")
    assert (job.status, job.total, job.done, job.failed) == ("queued", 2, 0, 0)
    assert sorted(job.items.values_list("session_id", "status")) == [
        (sessions[0].pk, "queued"),
        (sessions[1].pk, "queued"),
    ]
    # Each item is fenced on the head the session had when the job was created.
    assert sorted(job.items.values_list("base__number", flat=True)) == [0, 0]


def test_it_refuses_another_workspaces_session(alice_client, other_workspace, bob, ingest):
    theirs = ingest(other_workspace, "b.jsonl", sample("formats/claude_code.jsonl"), user=bob)
    response = alice_client.post(URL, {"sessions": [theirs.pk], "policy": "synthesize"})
    assert response.status_code == 400
    assert Job.objects.count() == 0


def test_it_refuses_sessions_of_two_workspaces(
    alice_client, sessions, other_workspace, membership, bob, ingest
):
    theirs = ingest(other_workspace, "b.jsonl", sample("formats/claude_code.jsonl"), user=bob)
    response = alice_client.post(
        URL, {"sessions": [sessions[0].pk, theirs.pk], "policy": "synthesize"}
    )
    assert response.status_code == 400
    assert "Select sessions of one workspace per job." in response.content.decode()
    assert JobItem.objects.count() == 0


def test_it_refuses_an_unknown_policy(alice_client, sessions):
    response = alice_client.post(URL, {"sessions": [sessions[0].pk], "policy": "nope"})
    assert response.status_code == 400
    assert Job.objects.count() == 0


def test_it_requires_a_selection(alice_client, sessions):
    response = alice_client.post(URL, {"policy": "synthesize"})
    assert response.status_code == 400
    assert Job.objects.count() == 0


@pytest.mark.parametrize(
    "value", ["99999999999999999999999", "-99999999999999999999999", "1.5", "x"]
)
def test_it_refuses_a_session_id_that_is_no_integer_in_range(alice_client, sessions, value):
    response = alice_client.post(URL, {"sessions": [sessions[0].pk, value], "policy": "synthesize"})
    assert response.status_code == 400
    assert f"“{value}” is not a valid value." in response.content.decode()
    assert Job.objects.count() == 0


def test_it_starts_a_job_for_every_session_the_filter_matches(
    alice_client, workspace, sessions, ingest
):
    healthy = ingest(
        workspace, "healthy.jsonl", sample("cases/02_cc-parallel-results-split-lines.jsonl")
    )
    response = alice_client.post(
        URL,
        {
            "scope": "filter",
            "kind": "dry_run",
            "policy": "synthesize",
            "fault": "missing_result",
            "workspace": workspace.pk,
            "q": ".jsonl",
            # The checkboxes do not count when the filter is chosen.
            "sessions": [healthy.pk],
        },
    )
    job = Job.objects.get()
    assert response.status_code == 302
    assert job.kind == "dry_run"
    assert job.selection == {
        "workspace": "Alpha",
        "fault": "missing_result",
        "q": ".jsonl",
    }
    assert sorted(job.items.values_list("session__name", flat=True)) == [
        "claude_code.jsonl",
        "openclaw.jsonl",
    ]


def test_it_refuses_a_filter_that_matches_nothing(alice_client, sessions):
    response = alice_client.post(URL, {"scope": "filter", "policy": "synthesize", "q": "nope"})
    assert response.status_code == 400
    assert "No sessions match the filter." in response.content.decode()
    assert Job.objects.count() == 0


def test_it_refuses_a_filter_across_workspaces(
    alice_client, sessions, other_workspace, membership, bob, ingest
):
    ingest(other_workspace, "b.jsonl", sample("formats/claude_code.jsonl"), user=bob)
    response = alice_client.post(URL, {"scope": "filter", "policy": "synthesize"})
    assert response.status_code == 400
    assert "choose one workspace" in response.content.decode()
    assert Job.objects.count() == 0


def test_a_filter_never_reaches_another_workspace(
    alice_client, workspace, sessions, other_workspace, bob, ingest
):
    ingest(other_workspace, "b.jsonl", sample("formats/claude_code.jsonl"), user=bob)
    response = alice_client.post(URL, {"scope": "filter", "policy": "synthesize", "kind": "export"})
    job = Job.objects.get()
    assert response.status_code == 302
    assert (job.kind, job.workspace, job.total) == ("export", workspace, 2)


def test_it_starts_a_forced_repair(alice_client, sessions):
    alice_client.post(URL, {"sessions": [sessions[0].pk], "policy": "synthesize", "force": "on"})
    assert Job.objects.get().force is True


@pytest.mark.django_db(transaction=True)
def test_it_creates_nothing_when_the_broker_is_down(alice_client, sessions, monkeypatch):
    # A port nothing listens on. Celery reads the variable before its own setting:
    # patch the setting first, so that undoing it restores the real value.
    dead = "redis://127.0.0.1:1/0"
    monkeypatch.setattr(celery_app.conf, "broker_url", dead)
    monkeypatch.setenv("CELERY_BROKER_URL", dead)

    response = alice_client.post(
        URL, {"sessions": [s.pk for s in sessions], "policy": "synthesize"}
    )

    assert response.status_code == 503
    assert (
        "The task queue (redis://127.0.0.1:1/0) cannot be reached: Error 111 connecting to "
        "127.0.0.1:1. Connection refused. Nothing was started; try again once it is back."
    ) in response.content.decode()
    assert (Job.objects.count(), JobItem.objects.count()) == (0, 0)


def test_it_refuses_a_policy_of_another_of_the_users_workspaces(
    alice_client, sessions, other_workspace, membership
):
    WorkspacePolicy.objects.create(
        workspace=other_workspace, name="mine", actions={"missing_result": "drop"}
    )
    response = alice_client.post(URL, {"sessions": [sessions[0].pk], "policy": "mine"})
    assert response.status_code == 400
    assert (
        "“mine” is not a policy of Alpha: choose a preset or one of that workspace&#x27;s own "
        "policies." in response.content.decode()
    )
    assert Job.objects.count() == 0


def test_a_refused_job_form_keeps_the_filter_it_was_sent_with(alice_client, workspace, sessions):
    # Dry run pressed with no scope chosen, on a list filtered to one format.
    response = alice_client.post(
        URL, {"kind": "dry_run", "policy": "synthesize", "format": "openclaw"}
    )
    assert response.status_code == 400
    page = " ".join(response.content.decode().split())
    assert "Select at least one session, or choose all sessions matching the filter." in page
    assert "all 1 matching the filter" in page
    assert '<input type="hidden" name="format" value="openclaw">' in page
    assert "claude_code.jsonl" not in page
    assert Job.objects.count() == 0
