"""Forms: upload, session and audit filters, starting jobs, the policy; scoped to the user."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

from django import forms
from django.contrib.auth import get_user_model
from django.db import connections
from django.db.models import Q, QuerySet
from django.http import QueryDict
from django.utils.datastructures import MultiValueDict

from transcripts.core.model import Action, FaultKind
from transcripts.core.policy import ALLOWED, refused
from transcripts.engine import DEFAULT_POLICY, PRESETS
from transcripts.filters import SessionFilter
from transcripts.formats import FORMATS
from transcripts.models import (
    AuditLog,
    AuditRecord,
    FaultKinds,
    Job,
    Membership,
    Session,
    SyncSource,
    Workspace,
)
from transcripts.policies import names_for
from transcripts.roots import SyncError, check_source_path
from transcripts.uploads import Limits, Staged, Unpacker, UploadRefused, clean_name, printable_name


def policy_choices(workspace_ids: Iterable[int | None] = ()) -> list[tuple[str, str]]:
    """Return (name, label) for every preset, the default first, then the workspaces' own.

    The default's label says what it writes (DESIGN.md, issue 14): the agent's
    own interruption text in an agent's session file, the generic receipt in a
    plain message list.
    """
    names = sorted(PRESETS, key=lambda name: (name != DEFAULT_POLICY, name))
    choices = [
        (
            name,
            f"{name} (default: the agent's own interruption text in its own session files, "
            "the generic receipt in plain message lists)"
            if name == DEFAULT_POLICY
            else name,
        )
        for name in names
    ]
    ids = [i for i in workspace_ids if i is not None]
    own = [name for name in names_for(ids) if name not in PRESETS] if ids else []
    return choices + [(name, f"{name} (workspace policy)") for name in own]


def format_choices() -> list[tuple[str, str]]:
    """Return ("", "sniff automatically") and (format id, its name) for every format."""
    return [("", "sniff automatically")] + [(f.id, f.label) for f in FORMATS.values()]


def _choose_from(field: forms.Field, queryset: QuerySet[Any]) -> None:
    """Make the model choice `field` (declared with no choices) choose from `queryset`."""
    assert isinstance(field, forms.ModelChoiceField)
    field.queryset = queryset


def _offer(field: forms.Field, choices: list[tuple[str, str]]) -> None:
    """Make the choice `field` offer `choices`, (value, label) pairs."""
    assert isinstance(field, forms.ChoiceField)
    field.choices = choices


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
    # The form's metaclass moves declared fields out of the class, so this never hides
    # BaseForm.files (the uploads); the stubs see only the class attribute.
    files = MultipleFileField(  # type: ignore[assignment]
        label="Session files",
        # Raw bytes are always stored: an empty file becomes an unreadable session, as in `ingest`.
        allow_empty_file=True,
    )
    format = forms.ChoiceField(
        choices=format_choices,
        required=False,
        label="Format",
        help_text="Sniffed from the content unless you choose one.",
    )

    def __init__(
        self, *args: Any, user: Any, refused: list[str] | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        _choose_from(
            self.fields["workspace"], Workspace.objects.for_user(user, Membership.Role.EDITOR)
        )
        self.limits = Limits.from_settings()
        self.unpacker = Unpacker(self.limits)
        self.refused = refused or []
        if self.refused:
            # The files skipped are why the field may be empty: say that, not "required".
            self.fields["files"].required = False
        self.fields["files"].help_text = (
            "JSON or JSONL transcripts, one session per file; a .gz is unpacked, and so is "
            f"each file in a .zip. {self.limits.describe()}"
        )

    # The fields that take one value. A browser sends each once; a hand-made request that
    # sends one twice is refused, not stored under the last (`files` takes many).
    SINGLE = ("workspace", "format")

    def clean(self) -> dict[str, Any]:
        """Refuse a field of SINGLE given more than once, naming it ("Given 2 times")."""
        cleaned: dict[str, Any] = super().clean() or {}
        if not isinstance(self.data, MultiValueDict):
            return cleaned  # a form made from a dict holds one value per field
        for name in self.SINGLE:
            count = len(self.data.getlist(name))
            if count > 1:
                self.add_error(name, f"Given {count} times: choose one.")
        return cleaned

    def clean_files(self) -> list[tuple[str, Staged]]:
        """Return the (name, staged file) of every session uploaded, archives unpacked.

        Files the upload handler skipped (`refused`, its reasons) or any limit
        passed while unpacking refuse the whole upload: nothing is stored.
        The staged files of archives stay until `close`.
        """
        if self.refused:
            raise forms.ValidationError([*dict.fromkeys(self.refused), "Nothing was stored."])
        try:
            for f in self.cleaned_data["files"]:
                self.unpacker.add(clean_name(f.name), f)
        except UploadRefused as exc:
            self.unpacker.close()
            raise forms.ValidationError([str(exc), "Nothing was stored."]) from None
        return [(staged.name, staged) for staged in self.unpacker.sessions]

    def close(self) -> None:
        """Delete the files staged while unpacking archives (stored or not by now)."""
        self.unpacker.close()


class IdMultipleChoiceField(forms.ModelMultipleChoiceField[Any]):
    """Choices by primary key; a key that is no integer in the key column's range is invalid.

    Checked before any query: SQLite raises OverflowError for an integer
    beyond 64 bits, other backends a DataError for one beyond their column.
    """

    def clean(self, value: Any) -> Any:
        if isinstance(value, list | tuple):
            assert self.queryset is not None
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


class StartJobForm(forms.Form):
    """Start a dry run, repair or export, of the selected sessions or of all that match a filter.

    The filter's fields come with the same names as on the session list
    (`transcripts.filters`), so the job takes exactly the sessions the list showed.
    """

    SCOPES = [("selected", "the selected sessions"), ("filter", "all sessions matching the filter")]

    kind = forms.ChoiceField(
        choices=[
            (Job.Kind.DRY_RUN, "Dry run"),
            (Job.Kind.REPAIR, "Repair"),
            (Job.Kind.EXPORT, "Export zip"),
        ],
        initial=Job.Kind.REPAIR,
        required=False,
    )
    scope = forms.ChoiceField(
        label="Sessions",
        choices=SCOPES,
        initial="selected",
        required=False,
        widget=forms.RadioSelect,
    )
    sessions = IdMultipleChoiceField(
        queryset=Session.objects.none(), widget=forms.CheckboxSelectMultiple, required=False
    )
    policy = forms.ChoiceField(choices=policy_choices, initial=DEFAULT_POLICY)
    force = forms.BooleanField(
        label="Force: also repair sessions still being written (pending results become missing)",
        required=False,
    )

    def __init__(self, *args: Any, user: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.filters = SessionFilter(
            args[0] if args else kwargs.get("data"),
            queryset=Session.objects.for_user(user),
            user=user,
        )
        _choose_from(self.fields["sessions"], Session.objects.for_user(user))
        workspaces = Workspace.objects.for_user(user).values_list("pk", flat=True)
        _offer(self.fields["policy"], policy_choices(list(workspaces)))

    def clean_kind(self) -> str:
        return self.cleaned_data["kind"] or Job.Kind.REPAIR

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        if self.errors:
            return data
        if data.get("scope") == "filter":
            if not self.filters.is_valid():
                raise forms.ValidationError("The filter is not valid: change it and try again.")
            sessions: QuerySet[Session] = self.filters.sessions()
            workspaces = set(sessions.order_by().values_list("workspace", flat=True).distinct()[:2])
            data["selection"] = self.filters.selection()
            if not workspaces:
                raise forms.ValidationError("No sessions match the filter.")
        else:
            sessions = data.get("sessions") or Session.objects.none()
            if not sessions:
                raise forms.ValidationError(
                    "Select at least one session, or choose all sessions matching the filter."
                )
            workspaces = {s.workspace_id for s in sessions}
            data["selection"] = {}
        if len(workspaces) > 1:
            raise forms.ValidationError(
                "Select sessions of one workspace per job."
                if data.get("scope") != "filter"
                else "The filter matches sessions of several workspaces: choose one workspace."
            )
        data["workspace"] = Workspace.objects.get(pk=workspaces.pop())
        data["sessions"] = sessions
        # The choices offer every workspace's own policies; the job runs in one of them.
        policy = data["policy"]
        if policy not in PRESETS and policy not in names_for([data["workspace"].pk]):
            raise forms.ValidationError(
                f"“{policy}” is not a policy of {data['workspace']}: choose a preset "
                "or one of that workspace's own policies."
            )
        return data


_Audited = TypeVar("_Audited", QuerySet[AuditRecord], QuerySet[AuditLog])


class AuditFilterForm(forms.Form):
    """Filter audit records by job, session, fault kind and acting user; events by type too."""

    job = forms.IntegerField(required=False, min_value=1, max_value=2**63 - 1)
    session = forms.IntegerField(
        label="Session id", required=False, min_value=1, max_value=2**63 - 1
    )
    session_name = forms.CharField(label="Session name contains", required=False, max_length=200)
    fault_kind = forms.ChoiceField(required=False, choices=[("", "any"), *FaultKinds.choices])
    user = forms.ModelChoiceField(
        queryset=get_user_model().objects.none(), required=False, empty_label="anyone"
    )
    event_type = forms.ChoiceField(
        label="Event", required=False, choices=[("", "any")] + AuditLog.EventType.choices
    )

    def __init__(self, *args: Any, user: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.user = user
        # Only people who share a workspace with the user.
        _choose_from(
            self.fields["user"],
            get_user_model()
            .objects.filter(memberships__workspace__memberships__user=user)
            .distinct()
            .order_by("username"),
        )

    def _by_job_and_session(self, rows: _Audited) -> _Audited:
        """Return `rows` (records or events) narrowed by the valid job and session filters."""
        data = self.cleaned_data if self.is_valid() else {}
        if data.get("job"):
            rows = rows.filter(job_id=data["job"])
        if data.get("session"):
            rows = rows.filter(session_id=data["session"])
        if data.get("session_name"):
            rows = rows.filter(session__name__icontains=data["session_name"])
        return rows

    def records(self) -> QuerySet[AuditRecord]:
        """Return the user's audit records matching the valid filters, newest first."""
        records = self._by_job_and_session(AuditRecord.objects.for_user(self.user))
        data = self.cleaned_data if self.is_valid() else {}
        if data.get("fault_kind"):
            records = records.filter(fault_kind=data["fault_kind"])
        if data.get("user"):
            records = records.filter(acting_user=data["user"])
        return records.order_by("-id")

    def events(self) -> QuerySet[AuditLog]:
        """Return the events of the user's workspaces matching the valid filters, newest first.

        The fault kind, a detail of repair ops, filters only the records; a
        user matches the events they made and those made on their behalf.
        """
        events = self._by_job_and_session(AuditLog.objects.for_user(self.user))
        data = self.cleaned_data if self.is_valid() else {}
        if data.get("event_type"):
            events = events.filter(event_type=data["event_type"])
        if data.get("user"):
            events = events.filter(Q(acting_user=data["user"]) | Q(on_behalf_of=data["user"]))
        return events.order_by("-id")


class LabelField(forms.CharField):
    """A name a user gives (a token's, a source's): printable characters only.

    Control and format characters (a bidi override that makes a name read
    backwards, zero-width characters) are dropped as from a file name
    (`uploads.printable_name`); a required name left with nothing is refused.
    """

    def to_python(self, value: Any) -> str:
        text = super().to_python(value) or ""
        return printable_name(text, default="")


class ApiTokenForm(forms.Form):
    """Create an API token for one of the workspaces the user administers."""

    workspace = forms.ModelChoiceField(queryset=Workspace.objects.none(), empty_label=None)
    name = LabelField(
        max_length=100, help_text="What the token is for, e.g. the agent runtime that uses it."
    )

    def __init__(self, *args: Any, user: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _choose_from(
            self.fields["workspace"], Workspace.objects.for_user(user, Membership.Role.ADMIN)
        )


class PolicyForm(forms.Form):
    policy = forms.ChoiceField(choices=policy_choices, required=False)

    def __init__(self, *args: Any, workspace_id: int | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _offer(self.fields["policy"], policy_choices([workspace_id]))

    format = forms.ChoiceField(
        choices=format_choices, required=False, label="Read as", help_text="Override sniffing."
    )

    def clean_policy(self) -> str:
        return self.cleaned_data["policy"] or DEFAULT_POLICY


class TimelineForm(PolicyForm):
    """What the session page shows: the policy and format, filters, and where in the timeline.

    At most one of `record` (a raw record index), `at`, `after`, `before`,
    `fault_after` and `fault_before` (row positions) picks the window; none
    means the first rows.
    """

    faults = forms.BooleanField(label="Only faults", required=False)
    tools = forms.BooleanField(label="Only tool traffic", required=False)
    # Long enough for a provider's 400 pasted whole (it names the message and the ids).
    q = forms.CharField(label="Search", required=False, max_length=2000, strip=True)
    record = forms.IntegerField(label="Record", required=False, min_value=0, max_value=2**31 - 1)
    at = forms.IntegerField(required=False, min_value=0, max_value=2**31 - 1)
    after = forms.IntegerField(required=False, min_value=-1, max_value=2**31 - 1)
    before = forms.IntegerField(required=False, min_value=0, max_value=2**31 - 1)
    fault_after = forms.IntegerField(required=False, min_value=-1, max_value=2**31 - 1)
    fault_before = forms.IntegerField(required=False, min_value=0, max_value=2**31 - 1)

    PLACES = ("record", "at", "after", "before", "fault_after", "fault_before")

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        if sum(data.get(name) is not None for name in self.PLACES) > 1:
            raise forms.ValidationError("Ask for one place in the timeline at a time.")
        return data

    def view_items(self) -> list[tuple[str, str]]:
        """Return the (name, value) pairs of the view alone (policy, format, filters), no place."""
        data = self.cleaned_data
        items = [("policy", data["policy"])]
        items += [(name, data[name]) for name in ("format", "q") if data.get(name)]
        items += [(name, "1") for name in ("faults", "tools") if data.get(name)]
        return items

    def view_query(self) -> str:
        """Return the query string of `view_items`."""
        query = QueryDict(mutable=True)
        for name, value in self.view_items():
            query[name] = value
        return query.urlencode()


class SourceForm(forms.Form):
    """Add a folder as a sync source of a workspace the user administers."""

    workspace = forms.ModelChoiceField(queryset=Workspace.objects.none(), empty_label=None)
    path = forms.CharField(
        max_length=1024,
        help_text="An absolute path to a folder under one of the allowed sync roots.",
    )
    name = LabelField(max_length=100, required=False, help_text="Default: the folder's name.")
    format = forms.ChoiceField(choices=SyncSource.Format.choices, required=False)
    write_back = forms.BooleanField(
        required=False,
        label="Write repairs back",
        help_text=(
            "A repair job replaces a file with its repaired bytes (a timestamped backup is "
            "kept beside it), only while the file is exactly what was repaired."
        ),
    )

    def __init__(self, *args: Any, user: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _choose_from(
            self.fields["workspace"], Workspace.objects.for_user(user, Membership.Role.ADMIN)
        )

    def clean_path(self) -> str:
        path: str = self.cleaned_data["path"].strip()
        try:
            check_source_path(path)
        except SyncError as exc:
            raise forms.ValidationError(str(exc)) from None
        return path


class SourceSettingsForm(forms.ModelForm[SyncSource]):
    """Turn a source's sync and write-back on or off."""

    class Meta:
        model = SyncSource
        fields = ["enabled", "write_back"]


class MemberForm(forms.Form):
    """Change a member's role, or remove them (role "remove"); members of `workspace` only.

    Nobody is added here (that takes an invitation they accept), and the
    error for a name is the same whether or not such a user exists.
    """

    username = forms.CharField(max_length=150)
    role = forms.ChoiceField(choices=[*Membership.Role.choices, ("remove", "remove")])

    def __init__(self, *args: Any, workspace: Workspace, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.workspace = workspace

    def clean_username(self) -> Any:
        username = self.cleaned_data["username"]
        membership = (
            self.workspace.memberships.select_related("user")
            .filter(**{f"user__{get_user_model().USERNAME_FIELD}": username})
            .first()
        )
        if membership is None:
            raise forms.ValidationError(
                f"{username!r} is not a member of {self.workspace}. To add someone, "
                "make an invitation below and send them its link."
            )
        return membership.user


class InvitationForm(forms.Form):
    """Invite someone to a workspace with a role."""

    role = forms.ChoiceField(choices=Membership.Role.choices, initial=Membership.Role.VIEWER)


class WorkspacePolicyForm(forms.Form):
    """A workspace's own policy: a name, an action per fault kind, the synthetic text.

    Each kind's menu offers only the actions it can take (core.policy.ALLOWED);
    another action posted all the same is refused with a sentence naming those
    it can.
    """

    workspace = forms.ModelChoiceField(queryset=Workspace.objects.none())
    name = forms.SlugField(max_length=40, help_text="Letters, digits, - and _.")
    synthetic_text = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text=(
            "The text of synthetic results. Empty: the agent's own interruption text in an "
            "agent's session file, the generic receipt in a plain message list."
        ),
    )
    description = forms.CharField(required=False, max_length=200)

    def __init__(self, *args: Any, user: Any, instance: Any = None, **kwargs: Any) -> None:
        if instance is not None and "initial" not in kwargs:
            kwargs["initial"] = {
                "workspace": instance.workspace_id,
                "name": instance.name,
                "synthetic_text": instance.synthetic_text,
                "description": instance.description,
                **{f"kind_{kind}": action for kind, action in instance.actions.items()},
            }
        super().__init__(*args, **kwargs)
        self.instance = instance
        _choose_from(
            self.fields["workspace"], Workspace.objects.for_user(user, Membership.Role.EDITOR)
        )
        # A policy stays in its workspace: jobs there name it, and another's editors
        # would gain it. Disabled, the field keeps the instance's and ignores what is sent.
        self.fields["workspace"].disabled = instance is not None
        actions = [("", "flag (report only)")] + [
            (str(a), str(a)) for a in Action if a is not Action.FLAG
        ]
        for kind in FaultKind:
            field = forms.ChoiceField(label=str(kind), choices=actions, required=False)
            # Validated against every action (so `clean` can say what the kind can
            # take); shown with only those.
            field.widget.choices = [
                (v, t) for v, t in actions if not v or Action(v) in ALLOWED[kind]
            ]
            self.fields[f"kind_{kind}"] = field

    def clean_name(self) -> str:
        name: str = self.cleaned_data["name"]
        if name in PRESETS:
            raise forms.ValidationError(f"“{name}” is the name of a preset.")
        return name

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        table: dict[str, str] = {}
        for kind in FaultKind:
            action = data.get(f"kind_{kind}") or ""
            if not action:
                continue
            why = refused(kind, Action(action))
            if why is not None:
                self.add_error(f"kind_{kind}", why)
            table[str(kind)] = action
        data["actions"] = table
        return data
