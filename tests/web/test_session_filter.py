"""The one session filter (transcripts.filters): what the list, the jobs and the API share."""

import pytest
from django.http import QueryDict

from tests.helpers import sample
from transcripts.filters import SessionFilter
from transcripts.models import Session

pytestmark = pytest.mark.django_db


@pytest.fixture
def sessions(workspace, ingest):
    return [
        ingest(workspace, "claude-a.jsonl", sample("formats/claude_code.jsonl")),
        ingest(
            workspace, "healthy.jsonl", sample("cases/02_cc-parallel-results-split-lines.jsonl")
        ),
    ]


def matching(query, user):
    found = SessionFilter(QueryDict(query), queryset=Session.objects.for_user(user), user=user)
    return [s.name for s in found.sessions()], found


def test_an_invalid_value_filters_out_every_session(alice, sessions):
    names, found = matching("fault=missing_result&live=live", alice)
    assert names == []
    assert not found.is_valid()
    assert found.selection() == {}


def test_the_selection_is_the_filters_in_use_without_the_sort(alice, workspace, sessions):
    names, found = matching(f"fault=missing_result&workspace={workspace.pk}&sort=name&q=", alice)
    assert names == ["claude-a.jsonl"]
    assert found.selection() == {"fault": "missing_result", "workspace": "Alpha"}


def test_unbound_it_lists_every_session_newest_first(alice, sessions):
    found = SessionFilter(None, queryset=Session.objects.for_user(alice), user=alice)
    assert [s.name for s in found.sessions()] == ["healthy.jsonl", "claude-a.jsonl"]


def test_without_a_user_no_workspace_can_be_chosen(alice, workspace, sessions):
    found = SessionFilter(QueryDict(f"workspace={workspace.pk}"), queryset=Session.objects.all())
    assert list(found.sessions()) == []
    assert "workspace" in found.errors
