"""What the API reads and writes: sessions, faults, revisions, jobs and requests to start jobs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from django.core.files import File
from django.core.validators import ProhibitNullCharactersValidator
from django_stubs_ext import StrOrPromise
from rest_framework import serializers
from rest_framework.utils import html

from transcripts.engine import DEFAULT_POLICY
from transcripts.filters import format_ids
from transcripts.formats import FORMATS
from transcripts.models import FaultKinds, Job, Revision, Session
from transcripts.uploads import clean_name, unusable_name

# Ids the database can hold: a larger one names nothing, and some backends fail on it.
MAX_ID = 2**63 - 1
# The kinds of job started on a selection of sessions; a rollback starts from a job.
STARTABLE_KINDS = [Job.Kind.REPAIR, Job.Kind.DRY_RUN, Job.Kind.EXPORT]
# A job lists at most this many sessions by id; a filter selects any number.
MAX_JOB_SESSIONS = 10_000
# The formats an upload may name, (id, label): the registry's. The schema's FormatEnum.
UPLOAD_FORMATS = [(format_id, fmt.label) for format_id, fmt in FORMATS.items()]
# The formats a filter matches, (id, label): those and "unknown", a file that could not be
# read, as the session list's filter offers them. The schema's SessionFormatEnum.
FILTER_FORMATS = format_ids()


def _unknown_fault(kinds: list[str]) -> str:
    """Return the message of a fault kind not in `kinds`; DRF puts the value given in {input}."""
    return f"“{{input}}” is no fault kind; the kinds are {', '.join(sorted(kinds))}."


def _unknown_format(ids: list[str]) -> str:
    """Return the message of a format not in `ids`; DRF puts the value given in {input}."""
    return f"“{{input}}” is no format; the formats are {', '.join(sorted(ids))}."


class Repeated(list[Any]):
    """The values of a form or query field given more than once, refused by `OneValue`."""


class OneValue:
    """A field that, in a form or query string, takes exactly one value.

    Given empty, it is refused rather than taken as absent; given more than
    once (a query key or a multipart part, a file's too), it is refused with
    its error message "repeated" rather than taking the last.
    """

    field_name: str | None
    default_error_messages: ClassVar[dict[str, StrOrPromise]] = {
        "repeated": "Given {count} times: send it once."
    }

    def get_value(self, dictionary: Any) -> Any:
        if html.is_html_input(dictionary) and self.field_name in dictionary:
            values = dictionary.getlist(self.field_name)
            if len(values) > 1:
                return Repeated(values)
            if len(values) != 1:
                return values
            if values[0] == "":
                return ""
        return super().get_value(dictionary)  # type: ignore[misc]

    def run_validation(self, data: Any = serializers.empty) -> Any:
        if isinstance(data, Repeated):
            self.fail("repeated", count=len(data))  # type: ignore[attr-defined]
        return super().run_validation(data)  # type: ignore[misc]


# Why a filter value of NUL characters alone is refused: dropped, it would match everything.
NUL_ONLY = (
    "Only NUL characters were given, and nothing is left once they are dropped: "
    "leave the field out to match every session."
)


class TextField(OneValue, serializers.CharField):
    """Text as given, blank allowed; NUL characters dropped, lone surrogates refused.

    Neither can be stored or searched for in every database, and neither
    belongs in a name. With `refuse_emptied`, a value that held only NUL
    characters is refused rather than taken as blank: a filter must not
    widen to everything because of what was dropped from it.
    """

    def __init__(self, *, refuse_emptied: bool = False, **kwargs: Any) -> None:
        self.refuse_emptied = refuse_emptied
        kwargs.setdefault("allow_blank", True)
        kwargs.setdefault("trim_whitespace", False)
        super().__init__(**kwargs)
        self.validators = [
            v for v in self.validators if not isinstance(v, ProhibitNullCharactersValidator)
        ]

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        if self.max_length is not None and len(data) > self.max_length:
            # As given, as the schema's maxLength counts it: not once its NULs are dropped.
            self.fail("max_length", max_length=self.max_length)
        text = super().to_internal_value(data).replace("\x00", "")
        if self.refuse_emptied and data and not text:
            raise serializers.ValidationError(NUL_ONLY)
        try:
            text.encode()
        except UnicodeEncodeError:
            raise serializers.ValidationError("Not valid Unicode text.") from None
        return text


class Strict:
    """A request's serializer that refuses, by name, a key it does not know.

    A mistyped key would otherwise be dropped and the request carried out
    without it: `{"kind": "repair", "session_ids": [3]}` would repair every
    session of the workspace. Query parameters are held to the operation's
    by `strict.KnownQuery`. The schema says so too (`additionalProperties: false`,
    `schema.close_requests`).
    """

    fields: Any

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            known = set(self.fields)
            unknown = sorted(str(key) for key in data if key not in known)
            if unknown:
                expected = ", ".join(sorted(known))
                raise serializers.ValidationError(
                    {key: [f"Unknown field; the fields are {expected}."] for key in unknown}
                )
        return super().to_internal_value(data)  # type: ignore[misc]


class ChoiceField(OneValue, serializers.ChoiceField):
    """A choice, given once, as text: a file part of its name is refused ("file").

    DRF's ChoiceField reads a value by its `str`, and an uploaded file's is its
    file name: a part `format` sent as a file named "codex" chose Codex.
    """

    default_error_messages: ClassVar[dict[str, StrOrPromise]] = {
        "file": "A file was sent as this field: send its value as text."
    }

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, File):
            self.fail("file")
        return super().to_internal_value(data)


class FilterChoiceField(ChoiceField):
    """A filter's choice; a value of NUL characters alone is refused (NUL_ONLY), as by TextField."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, str) and data and not data.replace("\x00", ""):
            raise serializers.ValidationError(NUL_ONLY)
        return super().to_internal_value(data)


class FileField(OneValue, serializers.FileField):
    """A file, given once: a second part of its name is refused, not kept in place of the first."""


class BooleanField(OneValue, serializers.BooleanField):
    """A boolean: JSON true or false, or in a form, the text "true" or "false".

    DRF also takes 1, "yes", "on" and more; a client that sends those meant
    something else, so they are refused.
    """

    TEXT = {"true": True, "false": False}

    def to_internal_value(self, data: Any) -> bool:
        if isinstance(data, bool):
            return data
        if isinstance(data, str) and data in self.TEXT:
            return self.TEXT[data]
        raise serializers.ValidationError("Must be true or false.", code="invalid")


class IdField(serializers.IntegerField):
    """A database id: a JSON integer from 1 to MAX_ID (not a string of digits, not a boolean)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(min_value=1, max_value=MAX_ID, **kwargs)

    def to_internal_value(self, data: Any) -> int:
        if not isinstance(data, int) or isinstance(data, bool):
            self.fail("invalid")
        value: int = super().to_internal_value(data)
        return value


class ErrorBodySerializer(serializers.Serializer[Any]):
    code = serializers.CharField(help_text="Stable error code, e.g. not_found or invalid_token.")
    message = serializers.CharField(help_text="What went wrong, for people.")
    # The error body's own key; DRF's metaclass moves declared fields out of the class,
    # so it never hides Serializer.fields (the stubs see only the class attribute).
    fields = serializers.DictField(  # type: ignore[assignment]
        required=False,
        help_text=(
            "For bad_request: the messages of each field that was not valid, as a list, "
            "or for an object field, an object of its own fields."
        ),
    )


class ErrorSerializer(serializers.Serializer[Any]):
    error = ErrorBodySerializer()


class FaultCountsField(serializers.DictField):
    child = serializers.IntegerField(min_value=1)


class SessionSerializer(serializers.ModelSerializer[Session]):
    head = serializers.SerializerMethodField(
        help_text="The number of the head revision (0 is the upload)."
    )
    fault_counts = FaultCountsField(
        help_text=(
            "{fault kind: count} in the head revision; pending_result while it is live. "
            "Empty while `analysed` is false."
        )
    )
    analysed = serializers.BooleanField(
        help_text=(
            "False while a worker has yet to read the head: an upload larger than "
            "INGEST_INLINE_BYTES is stored first, so its format may be unknown and its "
            "record_count and fault_counts are empty until then (ask again)."
        )
    )
    live = serializers.SerializerMethodField(
        help_text="Whether the session was written within the grace period (until live_until)."
    )

    class Meta:
        model = Session
        fields = [
            "id",
            "name",
            "format",
            "record_count",
            "fault_counts",
            "analysed",
            "error",
            "head",
            "live",
            "last_write",
            "live_until",
            "created",
        ]
        read_only_fields = fields

    def get_live(self, session: Session) -> bool:
        return session.is_live()

    def get_head(self, session: Session) -> int | None:
        return session.head.number if session.head else None


class FaultSerializer(serializers.Serializer[Any]):
    kind = serializers.ChoiceField(choices=FaultKinds.choices)
    tool_call_id = serializers.CharField(allow_null=True)
    record = serializers.IntegerField(help_text="Raw record index (0-based) of the call or result.")
    block = serializers.IntegerField(allow_null=True)
    turn = serializers.IntegerField(
        allow_null=True, help_text="Record index of the assistant message the fault belongs to."
    )
    error = serializers.CharField(help_text="What the provider answers, in its own words.")
    detail = serializers.CharField()


class SessionFaultsSerializer(serializers.Serializer[Any]):
    session = serializers.IntegerField()
    revision = serializers.IntegerField()
    format = serializers.CharField()
    error = serializers.CharField(help_text="Why the file could not be read; empty if it could.")
    faults = FaultSerializer(many=True)


class RevisionSerializer(serializers.ModelSerializer[Revision]):
    # As `fields` above: a declared field, not Field.parent.
    parent = serializers.SerializerMethodField(  # type: ignore[assignment]
        help_text="The number of the revision it follows."
    )

    class Meta:
        model = Revision
        fields = ["number", "sha256", "size", "policy", "engine_version", "parent", "created_at"]
        read_only_fields = fields

    def get_parent(self, revision: Revision) -> int | None:
        return revision.parent.number if revision.parent else None


class SessionUploadSerializer(Strict, serializers.Serializer[Any]):
    file = FileField(
        allow_empty_file=True,
        help_text=(
            "The session file, one part: any bytes are stored; an unreadable file says why. "
            "Two parts named `file` are refused (one session per upload)."
        ),
        # Django's multipart parser drops a part whose headers are not UTF-8 (curl sends
        # a file name's bytes as they are on disk): say so, or the file seems unsent.
        error_messages={
            "required": "No file was submitted: send the session as the multipart field "
            "“file”, with a UTF-8 file name (a part whose file name is not UTF-8 is "
            "dropped before Pairfix sees it: rename the file, or send it under another "
            "name and give its name in “name”).",
            "repeated": "{count} files were sent as “file”: an upload stores one session; "
            "send each file in a request of its own.",
        },
    )
    name = TextField(
        required=False,
        max_length=1000,
        refuse_emptied=True,
        help_text=(
            "The session's name; the file's name if not given. Folders and invisible "
            "characters are dropped; a name left empty, “.” or “..” is refused."
        ),
    )
    format = ChoiceField(
        choices=UPLOAD_FORMATS,
        required=False,
        help_text="The file's format; sniffed from the content if not given.",
        error_messages={"invalid_choice": _unknown_format(list(FORMATS))},
    )
    live = BooleanField(
        default=False,
        help_text=(
            "The session is being written now: its unanswered tail calls are pending "
            "until the grace period passes."
        ),
    )

    def validate_name(self, value: str) -> str:
        # Cleaned and refused as a multipart file name is (uploads.py); blank: the file's name.
        if value and (reason := unusable_name(value)):
            raise serializers.ValidationError(reason)
        return value

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        data["name"] = clean_name(data.get("name") or data["file"].name or "")
        return data


class RepairSerializer(Strict, serializers.Serializer[Any]):
    policy = TextField(
        default=DEFAULT_POLICY,
        max_length=40,
        help_text="A preset's name or one of the workspace's own policies (/api/policies).",
    )
    dry_run = BooleanField(default=False, help_text="Plan the repair and write nothing.")
    force = BooleanField(
        default=False,
        help_text="Repair the session even while it is live (pending results become missing).",
    )


class SessionFilterSerializer(Strict, serializers.Serializer[Any]):
    fault = ChoiceField(
        choices=FaultKinds.choices,
        required=False,
        help_text="Sessions with a fault of this kind.",
        error_messages={"invalid_choice": _unknown_fault([k for k, _ in FaultKinds.choices])},
    )
    format = FilterChoiceField(
        choices=FILTER_FORMATS,
        required=False,
        help_text="Sessions of this format; `unknown`: those whose file could not be read.",
        error_messages={"invalid_choice": _unknown_format([f for f, _ in FILTER_FORMATS])},
    )
    q = TextField(
        required=False,
        max_length=200,
        refuse_emptied=True,
        help_text="Sessions whose name contains this text.",
    )


class JobCreateSerializer(Strict, serializers.Serializer[Any]):
    """Start a repair, dry run or export of some sessions of the workspace.

    `sessions` and `filter` both narrow the selection; with neither, it is
    every session of the workspace.
    """

    kind = ChoiceField(choices=STARTABLE_KINDS)
    policy = TextField(
        default=DEFAULT_POLICY,
        max_length=40,
        help_text="A preset's name or one of the workspace's own policies (/api/policies).",
    )
    force = BooleanField(
        default=False, help_text="Also repair live sessions (pending results become missing)."
    )
    sessions = serializers.ListField(
        child=IdField(),
        required=False,
        min_length=1,
        max_length=MAX_JOB_SESSIONS,
        help_text="Only these sessions (by id).",
    )
    filter = SessionFilterSerializer(
        required=False, help_text="Only the sessions that match this filter."
    )


class JobSerializer(serializers.ModelSerializer[Job]):
    archive = serializers.SerializerMethodField(
        help_text="Whether an export's zip archive can be downloaded."
    )

    class Meta:
        model = Job
        fields = [
            "id",
            "kind",
            "status",
            "policy",
            "force",
            "source_job",
            "selection",
            "total",
            "done",
            "failed",
            "fence_lost",
            "pending",
            "cancelled",
            "archive",
            "created_at",
            "started_at",
            "finished_at",
        ]
        read_only_fields = fields

    def get_archive(self, job: Job) -> bool:
        return bool(job.archive)


class PreviewQuerySerializer(Strict, serializers.Serializer[Any]):
    policy = TextField(
        default=DEFAULT_POLICY,
        max_length=40,
        help_text="A preset's name or one of the workspace's own policies (/api/policies).",
    )


class PreviewMessageSerializer(serializers.Serializer[Any]):
    role = serializers.CharField(help_text="user, assistant or tool, as the provider reads it.")
    texts = serializers.ListField(child=serializers.CharField())
    calls = serializers.ListField(child=serializers.CharField(), help_text="Tool call ids.")
    results = serializers.ListField(
        child=serializers.CharField(), help_text="Tool call ids answered."
    )


class PreviewViolationSerializer(serializers.Serializer[Any]):
    record = serializers.IntegerField()
    tool_call_id = serializers.CharField()
    error = serializers.CharField(help_text="What the provider answers, in its own words.")


class PreviewDroppedSerializer(serializers.Serializer[Any]):
    record = serializers.IntegerField(help_text="Record index (0-based) in that file.")
    what = serializers.CharField(help_text="call, result, text or record.")
    reason = serializers.CharField()
    tool_call_id = serializers.CharField(allow_null=True)


class PreviewSideSerializer(serializers.Serializer[Any]):
    valid = serializers.BooleanField(help_text="The provider accepts the request.")
    violations = PreviewViolationSerializer(many=True)
    messages = PreviewMessageSerializer(many=True)
    dropped = PreviewDroppedSerializer(many=True)
    added = PreviewMessageSerializer(many=True)


class ResumePreviewSerializer(serializers.Serializer[Any]):
    session = serializers.IntegerField()
    revision = serializers.IntegerField(help_text="The head revision previewed.")
    policy = serializers.CharField()
    agent = serializers.CharField()
    modelled_on = serializers.CharField(
        help_text="The agent's npm package and version the model follows; others may differ."
    )
    provider = serializers.CharField()
    raw = PreviewSideSerializer(help_text="On resuming the head revision as it is.")
    repaired = PreviewSideSerializer(help_text="On resuming it repaired under `policy`.")
