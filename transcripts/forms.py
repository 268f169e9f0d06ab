"""Forms: upload, bulk repair and the policy chooser; querysets scoped to the user."""

from __future__ import annotations

from typing import Any

from django import forms
from django.db import connections

from transcripts.engine import DEFAULT_POLICY, PRESETS
from transcripts.models import Session, Workspace


def policy_choices() -> list[tuple[str, str]]:
    """Return (name, name) for every policy preset, the default first."""
    names = sorted(PRESETS, key=lambda name: (name != DEFAULT_POLICY, name))
    return [(name, name) for name in names]


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    """A file field that accepts several files (Django's documented recipe)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("widget", MultipleFileInput())
        super().__init__(*args, **kwargs)

    def clean(self, data: Any, initial: Any = None) -> Any:
        files = list(data) if isinstance(data, list | tuple) else [data]
        # An empty selection goes through the single-file clean: "required" applies.
        return [super(MultipleFileField, self).clean(f, initial) for f in files or [None]]


class UploadForm(forms.Form):
    workspace = forms.ModelChoiceField(queryset=Workspace.objects.none(), empty_label=None)
    files = MultipleFileField(
        label="Session files",
        help_text="JSON or JSONL transcripts, one session per file.",
        # Raw bytes are always stored: an empty file becomes an unreadable session, as in `ingest`.
        allow_empty_file=True,
    )

    def __init__(self, *args: Any, user: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["workspace"].queryset = Workspace.objects.for_user(user)

    def clean_files(self) -> Any:
        files = self.cleaned_data["files"]
        for f in files:
            # Keep only the last path component: a browser may send a relative path.
            f.name = f.name.replace("\\", "/").rsplit("/", 1)[-1]
        return files


class IdMultipleChoiceField(forms.ModelMultipleChoiceField):
    """Choices by primary key; a key that is no integer in the key column's range is invalid.

    Checked before any query: SQLite raises OverflowError for an integer
    beyond 64 bits, other backends a DataError for one beyond their column.
    """

    def clean(self, value: Any) -> Any:
        if isinstance(value, list | tuple):
            connection = connections[self.queryset.db]
            pk = self.queryset.model._meta.pk
            assert pk is not None
            low, high = connection.ops.integer_field_range(pk.get_internal_type())
            for key in value:
                try:
                    valid = low <= int(key) <= high
                except (TypeError, ValueError):
                    valid = False
                if not valid:
                    raise forms.ValidationError(
                        self.error_messages["invalid_pk_value"],
                        code="invalid_pk_value",
                        params={"pk": key},
                    )
        return super().clean(value)


class RepairForm(forms.Form):
    sessions = IdMultipleChoiceField(
        queryset=Session.objects.none(), widget=forms.CheckboxSelectMultiple
    )
    policy = forms.ChoiceField(choices=policy_choices, initial=DEFAULT_POLICY)

    def __init__(self, *args: Any, user: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["sessions"].queryset = Session.objects.for_user(user)

    def clean_sessions(self) -> Any:
        sessions = self.cleaned_data["sessions"]
        if len({s.workspace_id for s in sessions}) > 1:
            raise forms.ValidationError("Select sessions of one workspace per job.")
        return sessions


class PolicyForm(forms.Form):
    policy = forms.ChoiceField(choices=policy_choices, required=False)

    def clean_policy(self) -> str:
        return self.cleaned_data["policy"] or DEFAULT_POLICY
