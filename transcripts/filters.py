"""The one definition of how sessions are filtered: the list page, bulk jobs and the API use it.

`SessionFilter` (a django-filter FilterSet) names each filter once: what it
accepts and the query it adds. The session list renders its form; a job
started on "all sessions matching the filter" takes exactly the sessions the
list showed and records `selection()`; the API validates its query string
with its own serializer (the wire contract and its OpenAPI schema) and hands
the values here, so a filter means the same everywhere.
"""

from __future__ import annotations

from typing import Any

import django_filters
from django import forms
from django.db.models import F, Q, QuerySet
from django.utils import timezone

from transcripts.formats import FORMATS, label
from transcripts.models import FaultKinds, Session, SessionQuerySet, SyncSource, Workspace

# Each order ends with the primary key, so that pages never overlap.
SORTS: dict[str, tuple[Any, ...]] = {
    "newest": ("-created", "-id"),
    "oldest": ("created", "id"),
    "name": ("name", "id"),
    "records": ("-record_count", "-id"),
    "written": (F("last_write").desc(nulls_last=True), "-id"),
}
DEFAULT_SORT = "newest"


def format_ids() -> list[tuple[str, str]]:
    """Return (id, label) for every format Pairfix reads and "unknown", sorted by label.

    The labels are the upload form's ("Claude Code JSONL"). Not the distinct
    formats stored: that would scan every session of the user on each page
    of the list.
    """
    labelled = [(f, fmt.label) for f, fmt in FORMATS.items()] + [("unknown", label("unknown"))]
    return sorted(labelled, key=lambda choice: choice[1].lower())


class FilterForm(forms.Form):
    """The filter's form, with ids of its own: the upload form beside it has a workspace too."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("auto_id", "filter_%s")
        super().__init__(*args, **kwargs)


class SessionFilter(django_filters.FilterSet):
    """Filter sessions by workspace, format, fault kind, dates, source, state and name; sort them.

    `queryset` is the sessions the caller may see (already scoped to the user
    or the API token's workspace); `user` scopes the workspace and source
    choices (without one, neither can be chosen). An invalid value filters
    out every session: ignoring it would list, and let a job take, all of them.
    `sort` orders the list; it is not a filter, so `selection` leaves it out.
    """

    # Labels as a form gives them: django-filter would read them off the model's fields.
    workspace = django_filters.ModelChoiceFilter(
        label="Workspace", queryset=Workspace.objects.none(), empty_label="any"
    )
    format = django_filters.ChoiceFilter(label="Format", choices=format_ids, empty_label="any")
    fault = django_filters.ChoiceFilter(
        label="Fault kind", choices=FaultKinds.choices, empty_label="any", method="with_fault"
    )
    created_after = django_filters.DateFilter(
        field_name="created",
        lookup_expr="date__gte",
        label="Stored from",
        widget=forms.DateInput(attrs={"type": "date"}),
    )
    created_before = django_filters.DateFilter(
        field_name="created",
        lookup_expr="date__lte",
        label="Stored until",
        widget=forms.DateInput(attrs={"type": "date"}),
    )
    source = django_filters.ModelChoiceFilter(
        label="Source", queryset=SyncSource.objects.none(), empty_label="any"
    )
    live = django_filters.ChoiceFilter(
        label="Live",
        choices=[("yes", "live now"), ("no", "not live")],
        empty_label="any",
        method="live_now",
        help_text="Live: the session's file or stream was written within the grace period.",
    )
    repaired = django_filters.ChoiceFilter(
        label="Repaired",
        choices=[("yes", "repaired"), ("no", "never repaired")],
        empty_label="any",
        method="was_repaired",
        help_text="Repaired: the head revision was written by a repair.",
    )
    q = django_filters.CharFilter(
        field_name="name", lookup_expr="icontains", label="Name contains", max_length=200
    )
    sort = django_filters.ChoiceFilter(
        label="Sort",
        choices=[
            ("newest", "newest stored"),
            ("oldest", "oldest stored"),
            ("name", "name"),
            ("records", "most records"),
            ("written", "last written"),
        ],
        empty_label=None,
        method="sorted_by",
    )

    class Meta:
        model = Session
        fields: list[str] = []
        form = FilterForm

    def __init__(
        self,
        data: Any = None,
        queryset: QuerySet[Session] | None = None,
        *,
        user: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(data, queryset, **kwargs)
        if user is not None:
            self.filters["workspace"].queryset = Workspace.objects.for_user(user)
            self.filters["source"].queryset = SyncSource.objects.for_user(user)

    def filter_queryset(self, queryset: QuerySet[Session]) -> QuerySet[Session]:
        """Return `queryset` filtered and sorted by the form's values; none if one is invalid."""
        if not self.form.is_valid():
            return queryset.none()
        queryset = queryset.order_by(*SORTS[DEFAULT_SORT])
        filtered: QuerySet[Session] = super().filter_queryset(queryset)
        return filtered

    def sessions(self) -> QuerySet[Session]:
        """Return the sessions that match (all of them, newest first, when unbound)."""
        sessions: QuerySet[Session] = (
            self.qs if self.is_bound else self.queryset.order_by(*SORTS[DEFAULT_SORT])
        )
        return sessions

    def selection(self) -> dict[str, str]:
        """Return the filters in use, as JSON-ready text (what a job records it was made from)."""
        if not self.is_valid():
            return {}
        return {
            name: str(value)
            for name, value in self.form.cleaned_data.items()
            if value not in (None, "") and name != "sort"
        }

    def with_fault(self, sessions: SessionQuerySet, name: str, kind: str) -> QuerySet[Session]:
        return sessions.with_fault(kind)

    def live_now(self, sessions: QuerySet[Session], name: str, value: str) -> QuerySet[Session]:
        now = timezone.now()
        if value == "yes":
            return sessions.filter(live_until__gt=now)
        return sessions.filter(Q(live_until__isnull=True) | Q(live_until__lte=now))

    def was_repaired(self, sessions: QuerySet[Session], name: str, value: str) -> QuerySet[Session]:
        if value == "yes":
            return sessions.exclude(head__policy="")
        return sessions.filter(head__policy="")

    def sorted_by(self, sessions: QuerySet[Session], name: str, value: str) -> QuerySet[Session]:
        return sessions.order_by(*SORTS[value])
