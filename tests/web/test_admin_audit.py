"""A site admin's changes in the admin site are in the workspace's audit log, the admin acting."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.admin.sites import site
from django.test import RequestFactory
from django.urls import reverse

from tests.helpers import sample
from transcripts import actions
from transcripts.models import AuditLog, Membership, Session, SyncGrant, Workspace

pytestmark = pytest.mark.django_db


def admin_form(model: Any, obj: Any, admin_user: Any, **changes: Any) -> Any:
    """Return the model's admin, a request by `admin_user`, and its change form with `changes`."""
    model_admin = site._registry[model]
    request = RequestFactory().get("/")
    request.user = admin_user
    Form = model_admin.get_form(request, obj, change=True)
    initial = {name: Form(instance=obj).initial.get(name) for name in Form.base_fields}
    initial.update(changes)
    return model_admin, request, Form(initial, instance=obj)


class Formset:
    """What Django's inline formset hands save_formset: `saved` rows changed, `deleted` gone."""

    def __init__(self, saved: list[Any], deleted: list[Any] | None = None) -> None:
        self.saved = saved
        self.deleted_objects = deleted or []

    def save(self, commit: bool = True) -> list[Any]:
        return self.saved

    def save_m2m(self) -> None:
        pass


def save_inline(admin_user: Any, formset: Formset) -> None:
    request = RequestFactory().post("/")
    request.user = admin_user
    site._registry[Workspace].save_formset(request, None, formset, change=True)


def events(workspace: Workspace) -> list[tuple[str, Any, dict[str, Any]]]:
    rows = AuditLog.objects.filter(workspace=workspace).order_by("pk")
    return [(e.event_type, e.acting_user, e.extra_data) for e in rows]


def test_the_admin_renames_a_session_audited_and_cannot_move_it(
    admin_user, alice, workspace, other_workspace
):
    session = actions.do_ingest_session(
        workspace, "secret-of-beta.jsonl", sample("formats/claude_code.jsonl"), acting_user=alice
    )
    before = AuditLog.objects.count()
    model_admin, request, form = admin_form(
        Session, session, admin_user, workspace=other_workspace.pk, name="renamed.jsonl"
    )
    assert "workspace" not in form.fields  # moving it would strand its revisions and events
    assert form.is_valid(), form.errors
    model_admin.save_model(request, form.save(commit=False), form, change=True)
    session.refresh_from_db()
    assert (session.workspace_id, session.name) == (workspace.pk, "renamed.jsonl")
    assert AuditLog.objects.count() == before + 1
    assert events(workspace)[-1] == (
        "session_renamed",
        admin_user,
        {"name_before": "secret-of-beta.jsonl", "name": "renamed.jsonl"},
    )


def test_membership_change_in_the_admin_is_audited(admin_user, alice, bob, workspace):
    before = AuditLog.objects.filter(workspace=workspace).count()
    model_admin = site._registry[Workspace]
    assert any(i.model is Membership for i in model_admin.inlines)
    save_inline(admin_user, Formset([Membership(workspace=workspace, user=bob, role="admin")]))
    assert Membership.objects.filter(workspace=workspace, user=bob).exists()
    assert AuditLog.objects.filter(workspace=workspace).count() > before, (
        "bob made an admin of Alpha through the admin site, and Alpha's log has no member_added"
    )
    assert events(workspace)[-1] == (
        "member_added",
        admin_user,
        {"user": "bob", "role_before": None, "role_after": "admin"},
    )


def test_a_role_change_and_a_removal_in_the_admin_are_audited(admin_user, alice, bob, workspace):
    membership = Membership.objects.create(workspace=workspace, user=bob, role="viewer")
    membership.role = "editor"
    save_inline(admin_user, Formset([membership]))
    save_inline(admin_user, Formset([], deleted=[membership]))
    assert not Membership.objects.filter(workspace=workspace, user=bob).exists()
    assert events(workspace)[-2:] == [
        (
            "member_role_changed",
            admin_user,
            {"user": "bob", "role_before": "viewer", "role_after": "editor"},
        ),
        (
            "member_removed",
            admin_user,
            {"user": "bob", "role_before": "editor", "role_after": None},
        ),
    ]


def test_a_folder_granted_in_the_admin_is_audited(
    admin_user, workspace, tmp_path: Path, settings: Any
):
    settings.SYNC_ROOTS = [tmp_path.resolve()]
    save_inline(admin_user, Formset([SyncGrant(workspace=workspace, path=str(tmp_path))]))
    grant = SyncGrant.objects.get(workspace=workspace)
    assert grant.granted_by == admin_user
    assert events(workspace)[-1] == ("folder_granted", admin_user, {"path": str(tmp_path)})


def test_a_member_added_on_the_admin_page_is_audited(admin_client, admin_user, bob, workspace):
    url = reverse("admin:transcripts_workspace_change", args=[workspace.pk])
    page = admin_client.get(url)
    assert page.status_code == 200
    membership = Membership.objects.get(workspace=workspace)
    data = {
        "name": workspace.name,
        "memberships-TOTAL_FORMS": "2",
        "memberships-INITIAL_FORMS": "1",
        "memberships-0-id": str(membership.pk),
        "memberships-0-workspace": str(workspace.pk),
        "memberships-0-user": str(membership.user_id),
        "memberships-0-role": membership.role,
        "memberships-1-workspace": str(workspace.pk),
        "memberships-1-user": str(bob.pk),
        "memberships-1-role": "editor",
        "sync_grants-TOTAL_FORMS": "0",
        "sync_grants-INITIAL_FORMS": "0",
    }
    response = admin_client.post(url, data)
    assert response.status_code == 302, response.content.decode()[:2000]
    assert Membership.objects.get(workspace=workspace, user=bob).role == "editor"
    assert events(workspace)[-1] == (
        "member_added",
        admin_user,
        {"user": "bob", "role_before": None, "role_after": "editor"},
    )
