from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

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
        for obj in formset.save(commit=False):
            if isinstance(obj, SyncGrant) and obj.granted_by_id is None:
                obj.granted_by_id = request.user.pk
            obj.save()
        for obj in formset.deleted_objects:
            obj.delete()
        formset.save_m2m()


@admin.register(Session)
class SessionAdmin(admin.ModelAdmin[Session]):
    list_display = ["name", "workspace", "format", "record_count", "created"]
    list_filter = ["workspace", "format"]
    readonly_fields = ["head", "fault_counts", "record_count", "format", "error"]

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
