from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.http import HttpRequest

from transcripts.actions.common import EventType, audit
from transcripts.actions.workspaces import audit_member
from transcripts.models import (
    AuditLog,
    AuditRecord,
    Job,
    JobItem,
    Membership,
    Revision,
    Session,
    SyncGrant,
    Workspace,
)
from transcripts.roots import SyncError, check_source_path


class ReadOnlyAdmin(admin.ModelAdmin[Any]):
    """Show rows that nothing may change: revisions are immutable, audit is append-only."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class MembershipInline(admin.TabularInline[Membership, Workspace]):
    model = Membership
    extra = 1


class SyncGrantForm(forms.ModelForm[SyncGrant]):
    class Meta:
        model = SyncGrant
        fields = ["path"]

    def clean_path(self) -> str:
        # Stored as the sync check compares it: resolved, and under one of SYNC_ROOTS.
        try:
            return str(check_source_path(self.cleaned_data["path"]))
        except SyncError as exc:
            raise forms.ValidationError(str(exc)) from None


class SyncGrantInline(admin.TabularInline[SyncGrant, Workspace]):
    """The folders of SYNC_ROOTS that a site admin lets the workspace's admins follow."""

    model = SyncGrant
    form = SyncGrantForm
    extra = 1
    fields = ["path", "granted_by", "created"]
    readonly_fields = ["granted_by", "created"]


@admin.register(Workspace)
class WorkspaceAdmin(admin.ModelAdmin[Workspace]):
    list_display = ["name", "created"]
    inlines = [MembershipInline, SyncGrantInline]

    def save_formset(self, request: HttpRequest, form: Any, formset: Any, change: bool) -> None:
        """Save the inlines' rows and audit each change in its workspace, the site admin acting.

        The actions (`do_set_member_role`, `do_grant_folder`) cannot be called
        here: they open durable transactions, and the admin holds one already.
        """
        actor = request.user
        for obj in formset.save(commit=False):
            if isinstance(obj, Membership):
                before = Membership.objects.filter(pk=obj.pk).values_list("user", "role").first()
                obj.save()
                if before is not None and before[0] != obj.user_id:
                    # The row now names someone else: the one it named is no longer a member.
                    _audit_member(obj.workspace_id, before[0], before[1], None, actor)
                    before = None
                _audit_member(obj.workspace_id, obj.user_id, before and before[1], obj.role, actor)
                continue
            if isinstance(obj, SyncGrant):
                path_before = SyncGrant.objects.filter(pk=obj.pk).values_list("path", flat=True)
                if obj.granted_by_id is None:
                    obj.granted_by_id = actor.pk
                obj.save()
                if path_before.first() != obj.path:
                    audit(
                        EventType.FOLDER_GRANTED,
                        workspace_id=obj.workspace_id,
                        acting_user=actor,
                        extra_data={"path": obj.path},
                    )
                continue
            obj.save()
        for obj in formset.deleted_objects:
            if isinstance(obj, Membership):
                _audit_member(obj.workspace_id, obj.user_id, obj.role, None, actor)
            obj.delete()
        formset.save_m2m()


def _audit_member(
    workspace_id: int, user_id: int, before: str | None, after: str | None, actor: Any
) -> None:
    """Audit the role of user `user_id` going from `before` to `after` (None: not a member)."""
    if before != after:
        user = get_user_model().objects.get(pk=user_id)
        audit_member(workspace_id, user, before, after, actor)


@admin.register(Session)
class SessionAdmin(admin.ModelAdmin[Session]):
    list_display = ["name", "workspace", "format", "record_count", "created"]
    list_filter = ["workspace", "format"]
    # Only the name is edited here (and audited). Moving a session to another workspace
    # would leave its revisions, jobs and audit events in the old one, and the links and
    # deletion have their actions (a link may point into another workspace).
    readonly_fields = [
        "workspace",
        "head",
        "fault_counts",
        "record_count",
        "format",
        "error",
        "last_write",
        "live_until",
        "source",
        "parent",
        "created_by",
        "api_token",
        "deleted_at",
    ]

    def save_model(self, request: HttpRequest, obj: Session, form: Any, change: bool) -> None:
        """Save the session and audit a rename in its workspace, the site admin acting."""
        name_before = Session.objects.filter(pk=obj.pk).values_list("name", flat=True).first()
        obj.save()
        if change and name_before != obj.name:
            audit(
                EventType.SESSION_RENAMED,
                workspace_id=obj.workspace_id,
                acting_user=request.user,
                session=obj,
                extra_data={"name_before": name_before, "name": obj.name},
            )

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # A session is made with its revision 0 by an upload, a sync or the API, never empty.
        return False


@admin.register(Revision)
class RevisionAdmin(ReadOnlyAdmin):
    list_display = ["session", "number", "policy", "engine_version", "sha256", "created_at"]


@admin.register(Job)
class JobAdmin(ReadOnlyAdmin):
    list_display = [
        "pk",
        "workspace",
        "kind",
        "policy",
        "status",
        "total",
        "done",
        "failed",
        "fence_lost",
        "pending",
        "cancelled",
    ]
    list_filter = ["kind", "status"]


@admin.register(JobItem)
class JobItemAdmin(ReadOnlyAdmin):
    list_display = ["job", "session", "status", "base", "revision", "op_count"]


@admin.register(AuditRecord)
class AuditRecordAdmin(ReadOnlyAdmin):
    list_display = [
        "created_at",
        "op",
        "fault_kind",
        "tool_call_id",
        "session",
        "record",
        "policy",
        "policy_row",
        "acting_user",
        "job",
    ]
    list_filter = ["op", "fault_kind"]


@admin.register(AuditLog)
class AuditLogAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "event_type", "workspace", "acting_user", "on_behalf_of"]
    list_filter = ["event_type"]
