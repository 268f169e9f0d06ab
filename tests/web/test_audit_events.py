"""The workspace audit log: every action writes an event; the audit page and exports show them."""

from __future__ import annotations

import csv
import importlib
import inspect
import io
import json
import pkgutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.urls import reverse

from tests.helpers import run_inline, sample
from transcripts import actions
from transcripts.models import AuditLog, Job, Membership, Session, Workspace

pytestmark = pytest.mark.django_db

EventType = AuditLog.EventType
URL = reverse("transcripts:audit_list")
CSV_URL = reverse("transcripts:audit_events_csv")
JSONL_URL = reverse("transcripts:audit_events_jsonl")
SAMPLE = "formats/claude_code.jsonl"

# The do_* functions that change no object anyone owns, and why they write no event.
NOT_AUDITED = {
    "do_mark_token_used": "bookkeeping of a token's last use, at most once a minute",
    "do_build_timeline": "a timeline is a cache of rows derived from an immutable revision",
    "do_expire_live_sessions": "a recount of derived fault counts once a grace period ends",
    "do_count_session": "the first reading of an upload stored unread (its ingest is audited)",
}


def do_functions() -> dict[str, Callable[..., Any]]:
    """Return every do_* function defined in a module of the transcripts.actions package."""
    found = {}
    for module_info in pkgutil.iter_modules(actions.__path__):
        module = importlib.import_module(f"{actions.__name__}.{module_info.name}")
        for name, function in inspect.getmembers(module, inspect.isfunction):
            if name.startswith("do_") and function.__module__ == module.__name__:
                found[name] = function
    return found


class World:
    """Alice's workspace with a session, a repair job and a sync source, for the scenarios."""

    def __init__(self, alice: Any, bob: Any, workspace: Workspace, root: Path) -> None:
        self.alice, self.bob, self.workspace, self.root = alice, bob, workspace, root
        self.session = actions.do_ingest_session(
            workspace, "a.jsonl", sample(SAMPLE), acting_user=alice
        )
        self.broken = actions.do_ingest_session(
            workspace, "b.jsonl", b"not json\n", acting_user=alice
        )

    def finished_repair(self) -> Job:
        return run_inline(
            actions.do_start_job(
                self.workspace, [self.session, self.broken], policy="synthesize", acting_user=None
            )
        )

    def source(self) -> Any:
        actions.do_grant_folder(self.workspace, str(self.root), acting_user=None)
        return actions.do_create_source(self.workspace, str(self.root), acting_user=self.alice)


def _dry_run(w: World) -> Job:
    return run_inline(
        actions.do_start_job(
            w.workspace, [w.session], policy="synthesize", kind="dry_run", acting_user=w.alice
        )
    )


def _started(w: World) -> Job:
    return actions.do_start_job(w.workspace, [w.session], policy="synthesize", acting_user=w.alice)


# Each scenario returns a call of one do_* function that changes something, set up first.
SCENARIOS: dict[str, Callable[[World], Callable[[], Any]]] = {
    "do_create_workspace": lambda w: (
        lambda: actions.do_create_workspace("Gamma", acting_user=w.alice)
    ),
    "do_add_member": lambda w: (
        lambda: actions.do_add_member(w.workspace, w.bob, role="viewer", acting_user=w.alice)
    ),
    "do_set_member_role": lambda w: (
        lambda: actions.do_set_member_role(
            w.workspace, w.bob, Membership.Role.EDITOR, acting_user=w.alice
        )
    ),
    "do_create_invitation": lambda w: (
        lambda: actions.do_create_invitation(w.workspace, "viewer", acting_user=w.alice)
    ),
    "do_accept_invitation": lambda w: (
        lambda invitation: lambda: actions.do_accept_invitation(invitation, acting_user=w.bob)
    )(actions.do_create_invitation(w.workspace, "viewer", acting_user=w.alice)[0]),
    "do_revoke_invitation": lambda w: (
        lambda invitation: lambda: actions.do_revoke_invitation(invitation, acting_user=w.alice)
    )(actions.do_create_invitation(w.workspace, "viewer", acting_user=w.alice)[0]),
    "do_save_workspace_policy": lambda w: (
        lambda: actions.do_save_workspace_policy(
            w.workspace, "mine", {"missing_result": "synthesize"}, "", "", acting_user=w.alice
        )
    ),
    "do_delete_workspace_policy": lambda w: (
        lambda policy: lambda: actions.do_delete_workspace_policy(policy, acting_user=w.alice)
    )(
        actions.do_save_workspace_policy(
            w.workspace, "mine", {"missing_result": "synthesize"}, "", "", acting_user=w.alice
        )
    ),
    "do_create_api_token": lambda w: (
        lambda: actions.do_create_api_token(w.workspace, "ci", acting_user=w.alice)
    ),
    "do_revoke_api_token": lambda w: (
        lambda token: lambda: actions.do_revoke_api_token(token, acting_user=w.alice)
    )(actions.do_create_api_token(w.workspace, "ci", acting_user=w.alice)[0]),
    "do_ingest_session": lambda w: (
        lambda: actions.do_ingest_session(
            w.workspace, "c.jsonl", sample(SAMPLE), acting_user=w.alice
        )
    ),
    "do_ingest_sessions": lambda w: (
        lambda: actions.do_ingest_sessions(
            w.workspace, [("d.jsonl", sample(SAMPLE))], acting_user=w.alice
        )
    ),
    "do_delete_sessions": lambda w: (
        lambda: actions.do_delete_sessions([w.session], acting_user=w.alice)
    ),
    "do_start_job": lambda w: lambda: _started(w),
    "do_start_repair_from_dry_run": lambda w: (
        lambda dry_run: lambda: actions.do_start_repair_from_dry_run(dry_run, acting_user=w.alice)
    )(_dry_run(w)),
    "do_start_rollback_job": lambda w: (
        lambda job: lambda: actions.do_start_rollback_job(job, acting_user=w.alice)
    )(w.finished_repair()),
    "do_cancel_job": lambda w: (
        lambda job: lambda: actions.do_cancel_job(job, acting_user=w.alice)
    )(_started(w)),
    "do_retry_failed_items": lambda w: (
        lambda job: lambda: actions.do_retry_failed_items(job, acting_user=w.alice)
    )(w.finished_repair()),
    "do_fan_out_job": lambda w: (lambda job: lambda: actions.do_fan_out_job(job.pk))(_started(w)),
    "do_run_job_items": lambda w: (
        lambda job, chunks: lambda: actions.do_run_job_items(job.pk, chunks[0])
    )(*(lambda job: (job, actions.do_fan_out_job(job.pk)))(_started(w))),
    "do_grant_folder": lambda w: (
        lambda: actions.do_grant_folder(w.workspace, str(w.root), acting_user=w.alice)
    ),
    "do_create_source": lambda w: (
        actions.do_grant_folder(w.workspace, str(w.root), acting_user=None),
        lambda: actions.do_create_source(w.workspace, str(w.root), acting_user=w.alice),
    )[1],
    "do_update_source": lambda w: (
        lambda source: (
            lambda: actions.do_update_source(source, acting_user=w.alice, write_back=True)
        )
    )(w.source()),
    "do_queue_sync": lambda w: (
        lambda source: lambda: actions.do_queue_sync(source, acting_user=w.alice)
    )(w.source()),
    "do_sync_source": lambda w: (
        lambda source: (
            (w.root / "s.jsonl").write_bytes(sample(SAMPLE)),
            lambda: actions.do_sync_source(source.pk),
        )[1]
    )(w.source()),
    "do_append_records": lambda w: (
        lambda: actions.do_append_records(
            w.session, sample(SAMPLE).splitlines(keepends=True)[0], acting_user=w.alice
        )
    ),
}


@pytest.fixture
def world(alice, bob, workspace, tmp_path, settings) -> World:
    settings.SYNC_ROOTS = [tmp_path]
    return World(alice, bob, workspace, tmp_path)


def test_every_action_has_a_scenario_or_a_reason_to_write_no_event():
    assert set(do_functions()) == set(SCENARIOS) | set(NOT_AUDITED)
    assert not set(SCENARIOS) & set(NOT_AUDITED)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_the_action_writes_an_event_in_its_workspace(name, world):
    call = SCENARIOS[name](world)
    before = AuditLog.objects.order_by("-id").values_list("id", flat=True).first() or 0
    call()
    events = list(AuditLog.objects.filter(id__gt=before))
    assert events, f"{name} wrote nothing to the audit log"
    for event in events:
        # Someone answers for every event: the person acting, or who set the source or job up.
        assert event.acting_user is not None or event.on_behalf_of is not None, (
            name,
            event.event_type,
        )


def test_a_sync_names_its_source_and_who_added_it(world, alice):
    source = world.source()
    (world.root / "s.jsonl").write_bytes(sample(SAMPLE))
    actions.do_sync_source(source.pk)
    event = AuditLog.objects.get(event_type=EventType.SESSION_INGESTED, source=source)
    assert (event.acting_user, event.on_behalf_of) == (None, alice)
    assert event.session == Session.objects.get(name="s.jsonl")
    assert event.extra_data == {"origin": "sync", "size": len(sample(SAMPLE)), "name": "s.jsonl"}


def test_a_role_change_keeps_the_roles_before_and_after(world, alice, bob):
    actions.do_add_member(world.workspace, bob, role="viewer", acting_user=alice)
    actions.do_set_member_role(world.workspace, bob, "editor", acting_user=alice)
    actions.do_set_member_role(world.workspace, bob, None, acting_user=alice)
    changes = AuditLog.objects.filter(
        event_type__in=[
            EventType.MEMBER_ADDED,
            EventType.MEMBER_ROLE_CHANGED,
            EventType.MEMBER_REMOVED,
        ],
        extra_data__user="bob",
    ).order_by("id")
    assert [
        (e.event_type, e.extra_data["role_before"], e.extra_data["role_after"]) for e in changes
    ] == [
        ("member_added", None, "viewer"),
        ("member_role_changed", "viewer", "editor"),
        ("member_removed", "editor", None),
    ]
    assert {e.acting_user for e in changes} == {alice}


def test_a_repair_job_names_the_sessions_it_wrote_and_who_started_it(world, alice):
    job = run_inline(
        actions.do_start_job(
            world.workspace, [world.session], policy="synthesize", acting_user=alice
        )
    )
    types = list(AuditLog.objects.filter(job=job).values_list("event_type", flat=True))
    assert types == ["job_created", "job_started", "session_repaired", "job_finished"]
    repaired = AuditLog.objects.get(job=job, event_type=EventType.SESSION_REPAIRED)
    assert (repaired.acting_user, repaired.on_behalf_of) == (None, alice)
    assert repaired.session == world.session
    assert repaired.extra_data["from"] == 0 and repaired.extra_data["to"] == 1


def test_events_cannot_be_changed_or_deleted(world):
    event = AuditLog.objects.first()
    assert event is not None
    for attempt in (
        lambda: AuditLog.objects.filter(pk=event.pk).update(event_type="job_created"),
        lambda: AuditLog.objects.filter(pk=event.pk).delete(),
        event.delete,
        event.save,
    ):
        with pytest.raises(ValueError, match="append-only"):
            attempt()


def test_the_audit_page_filters_events_by_type(alice_client, world, alice, bob, other_workspace):
    actions.do_create_api_token(world.workspace, "ci", acting_user=alice)
    actions.do_create_api_token(other_workspace, "bob's", acting_user=bob)
    html = alice_client.get(URL, {"event_type": "token_created"}).content.decode()
    rows = html.split('<tr class="audit-event')[1:]
    assert len(rows) == 1
    assert "name=ci" in rows[0] and "bob&#x27;s" not in html
    everything = alice_client.get(URL).content.decode()
    assert everything.count('<tr class="audit-event session_ingested"') == 2


def test_the_event_exports_filter_by_type(alice_client, world, alice):
    token, _ = actions.do_create_api_token(world.workspace, "=cmd", acting_user=alice)
    response = alice_client.get(CSV_URL, {"event_type": "token_created"})
    assert response["Content-Disposition"] == 'attachment; filename="pairfix-audit-events.csv"'
    table = list(csv.reader(io.StringIO(response.getvalue().decode())))
    assert tuple(table[0]) == AuditLog.EXPORT_FIELDS
    [row] = [dict(zip(table[0], line, strict=True)) for line in table[1:]]
    assert (row["event_type"], row["acting_user"]) == ("token_created", "alice")
    assert json.loads(row["extra_data"]) == {
        "token": token.pk,
        "name": "=cmd",
        "prefix": token.prefix,
    }

    lines = alice_client.get(JSONL_URL, {"event_type": "session_ingested"}).getvalue().splitlines()
    exported = [json.loads(line) for line in lines]
    assert [e["session"] for e in exported] == [world.session.pk, world.broken.pk]
    assert all(e["acting_user"] == "alice" and e["revision"] == 0 for e in exported)
