import pytest
from django.urls import reverse

from tests.helpers import sample
from transcripts.models import Job, JobItem

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


def test_it_starts_a_job_for_the_selected_sessions(
    alice_client, alice, workspace, sessions, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks() as enqueued:
        response = alice_client.post(
            URL, {"sessions": [s.pk for s in sessions], "policy": "discard"}
        )
    job = Job.objects.get()
    assert response.status_code == 302
    assert response.url == job.get_absolute_url()
    assert (job.workspace, job.created_by, job.policy) == (workspace, alice, "discard")
    assert (job.status, job.total, job.done, job.failed) == ("queued", 2, 0, 0)
    assert sorted(job.items.values_list("session_id", "status")) == [
        (sessions[0].pk, "queued"),
        (sessions[1].pk, "queued"),
    ]
    # The task is sent only once the job's rows are committed.
    assert len(enqueued) == 1


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
