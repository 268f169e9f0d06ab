"""The API's operations: small views over the same actions the dashboard uses.

Every queryset comes from `permissions`, so another workspace's ids are a
404. Every write goes through `transcripts.actions` (or `transcripts.sync`
for appends), acting as the token's creator, and names the token where the
row has room for it.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.core.files.storage import default_storage
from django.db.models import QuerySet
from django.http import FileResponse, StreamingHttpResponse
from django.http.multipartparser import MultiPartParserError
from django.http.response import HttpResponseBase
from django.utils import timezone
from django.utils.datastructures import MultiValueDict
from django.utils.http import content_disposition_header
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics, pagination, parsers, renderers, status
from rest_framework.exceptions import ParseError, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from transcripts import actions, formats, replay
from transcripts.actions import sync
from transcripts.actions.common import file_name_of
from transcripts.api import errors, permissions
from transcripts.api.serializers import (
    ErrorSerializer,
    JobCreateSerializer,
    JobSerializer,
    PreviewQuerySerializer,
    RepairSerializer,
    ResumePreviewSerializer,
    RevisionSerializer,
    SessionFaultsSerializer,
    SessionFilterSerializer,
    SessionSerializer,
    SessionUploadSerializer,
)
from transcripts.api.strict import KnownQuery, refuse_body
from transcripts.engine import DEFAULT_POLICY, PRESETS
from transcripts.filters import SessionFilter
from transcripts.models import Job, Membership, Revision, Session, SessionQuerySet
from transcripts.outages import storage_misconfigured
from transcripts.policies import names_for, policy_for
from transcripts.uploads import (
    Limits,
    LimitUploadHandler,
    NameKeepingParser,
    Unpacker,
    UploadRefused,
)


class Pagination(pagination.PageNumberPagination):
    """Pages of 100 by default, `page_size` up to 1000; either refused unless a positive integer.

    A page past the last is a 404.
    """

    page_size = 100
    page_size_query_param = "page_size"
    max_page_size = 1000

    def _positive(self, request: Request, name: str) -> int | None:
        values = request.query_params.getlist(name)
        if not values:
            return None
        try:
            [number] = [int(value) for value in values]
        except ValueError:
            number = 0
        if number < 1:
            raise ValidationError({name: ["A single positive integer."]})
        return number

    def get_page_number(self, request: Request, paginator: Any) -> int:
        return self._positive(request, self.page_query_param) or 1

    def get_page_size(self, request: Request) -> int:
        size = self._positive(request, self.page_size_query_param) or self.page_size
        return min(size, self.max_page_size)

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters: list[dict[str, Any]] = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            parameter["schema"]["minimum"] = 1
        return parameters


class BinaryRenderer(renderers.BaseRenderer):
    """Let a client ask for raw bytes: the views that send bytes return them as they are."""

    media_type = "application/octet-stream"
    format = "bin"
    charset = None
    render_style = "binary"

    def render(
        self, data: Any, accepted_media_type: Any = None, renderer_context: Any = None
    ) -> bytes:
        return data if isinstance(data, bytes) else b""


class ZipRenderer(BinaryRenderer):
    media_type = "application/zip"
    format = "zip"


def _session(request: Request, pk: int) -> Session:
    """Return the session `pk` of the request's workspace, its live counts up to date."""
    try:
        session = permissions.sessions(request).select_related("head").get(pk=pk)
    except Session.DoesNotExist:
        raise errors.NotFound(f"There is no session {pk} in this workspace.") from None
    sync.refresh_live(session)
    return session


def _expire_live(sessions: SessionQuerySet) -> None:
    """Re-count those of `sessions` whose grace has passed with results pending.

    Before a list is filtered or shown, so a call that was pending when the
    session was last written reads as `missing_result` once the grace is over,
    whether or not the periodic task has run yet.
    """
    expired = sessions.filter(live_until__lte=timezone.now()).with_fault("pending_result")
    for session in expired.order_by("pk"):
        sync.refresh_live(session)


def _job(request: Request, pk: int) -> Job:
    try:
        return permissions.jobs(request).get(pk=pk)
    except Job.DoesNotExist:
        raise errors.NotFound(f"There is no job {pk} in this workspace.") from None


def _start(start: Any, *args: Any, **kwargs: Any) -> Job:
    """Call the action `start`; its BrokerUnavailable and JobStateError become API errors."""
    try:
        job: Job = start(*args, **kwargs)
    except actions.BrokerUnavailable as exc:
        raise errors.BrokerUnavailable(str(exc)) from None
    except actions.JobStateError as exc:
        raise errors.Conflict(str(exc)) from None
    return job


class UploadParser(parsers.MultiPartParser):
    """DRF's multipart parser over `NameKeepingParser`: an unusable file name is refused, not lost.

    Refused by `LimitUploadHandler`, which the upload puts in place first.
    """

    def parse(self, stream: Any, media_type: Any = None, parser_context: Any = None) -> Any:
        request = (parser_context or {})["request"]
        meta = request.META.copy()
        meta["CONTENT_TYPE"] = media_type
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        try:
            parser = NameKeepingParser(meta, stream, request.upload_handlers, encoding)
            data, files = parser.parse()
        except MultiPartParserError as exc:
            raise ParseError(f"Multipart form parse error - {exc}") from None
        return parsers.DataAndFiles(data, files)


class SessionList(KnownQuery, generics.ListAPIView[Session]):
    query_keys = {"GET": frozenset({"fault", "format", "q", "page", "page_size"})}
    serializer_class = SessionSerializer
    pagination_class = Pagination
    parser_classes = [UploadParser]

    def get_serializer_class(self) -> Any:
        # OPTIONS describes a POST by this serializer's fields: the upload's, not the answer's.
        if self.request is not None and self.request.method == "POST":
            return SessionUploadSerializer
        return SessionSerializer

    def get_queryset(self) -> QuerySet[Session]:
        # The page's number and size are the paginator's (`Pagination`), not the filter's.
        params = self.request.query_params.copy()
        for key in ("page", "page_size"):
            params.pop(key, None)
        query = SessionFilterSerializer(data=params)
        query.is_valid(raise_exception=True)
        sessions = permissions.sessions(self.request).select_related("head")
        _expire_live(sessions)
        return SessionFilter(query.validated_data, queryset=sessions).sessions()

    @extend_schema(
        summary="List sessions",
        description="The workspace's sessions, newest first, with their fault counts.",
        parameters=[SessionFilterSerializer],
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    @extend_schema(
        summary="Upload a session",
        description=(
            "Store a file as a new session: revision 0 holds its exact bytes. A file that "
            "cannot be read is stored too, with `error` saying why."
        ),
        request=SessionUploadSerializer,
        responses={201: SessionSerializer, 400: ErrorSerializer},
    )
    def post(self, request: Request) -> Response:
        try:
            return self._store(request)
        finally:
            # A refused or invalid upload leaves its staged file open: close it now,
            # not whenever the garbage collector gets to it.
            files = getattr(request, "_files", None)  # DRF's parsed files, if it parsed any
            for _, parts in files.lists() if isinstance(files, MultiValueDict) else ():
                for part in parts:
                    part.close()

    def _store(self, request: Request) -> Response:
        # The limits apply while the body is read: a handler in place before request.data.
        limiter = LimitUploadHandler(request, Limits.from_settings(), archives=False)
        request.upload_handlers.insert(0, limiter)
        upload = SessionUploadSerializer(data=request.data)
        if limiter.refused:
            message = " ".join(dict.fromkeys(limiter.refused)) + " Nothing was stored."
            if limiter.unusable:
                raise errors.ApiError(message)
            raise errors.TooLarge(message)
        upload.is_valid(raise_exception=True)
        data = upload.validated_data
        with Unpacker(limiter.limits) as unpacker:
            try:
                # Stored as sent: the API does not unpack archives.
                unpacker.add(data["name"], data["file"], unpack=False)
            except UploadRefused as exc:
                raise errors.TooLarge(f"{exc} Nothing was stored.") from None
            [staged] = unpacker.sessions
            try:
                session = actions.do_ingest_session(
                    permissions.workspace(request),
                    data["name"],
                    staged,
                    acting_user=permissions.acting_user(request),
                    format=data.get("format"),
                    last_write=timezone.now() if data["live"] else None,
                    api_token=permissions.request_token(request),
                )
            except Exception as exc:
                if reason := storage_misconfigured(exc):
                    raise errors.StorageMisconfigured(f"The {reason}. Nothing was stored.") from exc
                raise
        return Response(SessionSerializer(session).data, status=status.HTTP_201_CREATED)


class SessionDetail(KnownQuery, APIView):
    @extend_schema(summary="Get a session", responses={200: SessionSerializer})
    def get(self, request: Request, pk: int) -> Response:
        return Response(SessionSerializer(_session(request, pk)).data)


class NdjsonParser(parsers.BaseParser):
    """Take a body of JSON lines as it is, up to DATA_UPLOAD_MAX_MEMORY_SIZE bytes.

    The append action checks each line.
    """

    media_type = "application/x-ndjson"

    # The stubs type a parser's result as a mapping; DRF hands request.data whatever it is.
    def parse(  # type: ignore[override]
        self, stream: Any, media_type: Any = None, parser_context: Any = None
    ) -> bytes:
        if stream is None:
            return b""
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        if limit is None:
            data: bytes = stream.read()
            return data
        data = stream.read(limit + 1)
        if len(data) > limit:
            raise RequestDataTooBig(f"The body is larger than {limit} bytes.")
        return data


class JsonlParser(NdjsonParser):
    media_type = "application/jsonl"


# The HTTP status of each code `sync.AppendError` raises.
APPEND_ERRORS = {
    "synced": status.HTTP_409_CONFLICT,
    "not_appendable": status.HTTP_409_CONFLICT,
    "head_moved": status.HTTP_409_CONFLICT,
}


class SessionRecords(KnownQuery, APIView):
    query_keys = {"POST": frozenset({"head"})}
    parser_classes = [NdjsonParser, JsonlParser]

    @extend_schema(
        summary="Append records",
        description=(
            "Add JSON lines to the end of a JSON-lines session, as an agent runtime writes "
            "them: one JSON object per line, each line ending in a newline. The lines "
            "become a new head revision and the session counts as written now: a call "
            "whose result has not arrived yet is pending_result until the grace period "
            "passes, then missing_result. A session whose format is one JSON document "
            "takes no appends (409 not_appendable), nor does one that follows a sync "
            "source's file (409 synced); an empty body is `empty`, a last line "
            "without its newline `partial_line`, a line that is no JSON object `bad_record`. "
            "With `head` (the revision number the client last saw), nothing is appended "
            "unless that is still the head (409 head_moved): a retried append is never "
            "written twice."
        ),
        parameters=[
            OpenApiParameter(
                "head",
                {"type": "integer", "minimum": 0},
                description="Append only if this is still the head revision's number.",
                required=False,
            )
        ],
        request={
            "application/x-ndjson": OpenApiTypes.BINARY,
            "application/jsonl": OpenApiTypes.BINARY,
        },
        responses={200: SessionSerializer, 400: ErrorSerializer, 409: ErrorSerializer},
    )
    def post(self, request: Request, pk: int) -> HttpResponseBase:
        session = _session(request, pk)
        # An empty body comes through DRF as an empty dict: nothing to append.
        data = request.data if isinstance(request.data, bytes) else b""
        heads = request.query_params.getlist("head")
        if heads and not (len(heads) == 1 and heads[0].isascii() and heads[0].isdigit()):
            raise ValidationError({"head": ["A single revision number (0 or more)."]})
        if heads and len(heads[0]) > 9:
            return errors.error_response(
                status.HTTP_409_CONFLICT, "head_moved", f"No revision {heads[0]}."
            )
        try:
            sync.do_append_records(
                session,
                data,
                acting_user=permissions.acting_user(request),
                expected_head=int(heads[0]) if heads else None,
            )
        except sync.AppendError as exc:
            status_code = APPEND_ERRORS.get(exc.code, status.HTTP_400_BAD_REQUEST)
            return errors.error_response(status_code, exc.code, str(exc))
        session.refresh_from_db()
        return Response(SessionSerializer(session).data)


class SessionFaults(KnownQuery, APIView):
    @extend_schema(
        summary="List a session's faults",
        description=(
            "Every fault of the head revision, in file order; a live session's unanswered "
            "tail calls are pending_result until the grace period passes."
        ),
        responses={200: SessionFaultsSerializer},
    )
    def get(self, request: Request, pk: int) -> Response:
        session = _session(request, pk)
        assert session.head is not None
        with actions.open_analysis(
            session.head, DEFAULT_POLICY, last_write=session.last_write
        ) as analysis:
            pass  # the faults are all this needs: the file can close
        faults = [
            {
                "kind": str(fault.kind),
                "tool_call_id": fault.tool_call_id,
                "record": fault.record,
                "block": fault.block,
                "turn": fault.turn,
                "error": fault.error,
                "detail": fault.detail,
            }
            for fault in analysis.faults
        ]
        body = {
            "session": session.pk,
            "revision": session.head.number,
            "format": analysis.format,
            "error": analysis.error or "",
            "faults": faults,
        }
        return Response(SessionFaultsSerializer(body).data)


def _known_policy(name: str, workspace_id: int) -> None:
    """Raise a 404 naming the policies when `name` is neither a preset nor the workspace's.

    A workspace policy is a row of the workspace, like a session: one it does
    not have is not found.
    """
    try:
        policy_for(name, workspace_id)
    except KeyError:
        names = [*PRESETS, *names_for([workspace_id])]
        raise errors.NotFound(
            f"There is no policy “{name}” in this workspace; the policies are {', '.join(names)}."
        ) from None


def _preview_side(shown: replay.Preview) -> dict[str, Any]:
    def message(m: replay.Message) -> dict[str, Any]:
        return {"role": m.role, "texts": m.texts, "calls": m.calls, "results": m.results}

    return {
        "valid": shown.valid,
        "violations": [
            {"record": v.record, "tool_call_id": v.tool_call_id, "error": v.error}
            for v in shown.violations
        ],
        "messages": [message(m) for m in shown.messages],
        "dropped": [
            {"record": d.record, "what": d.what, "reason": d.reason, "tool_call_id": d.tool_call_id}
            for d in shown.dropped
        ],
        "added": [message(m) for m in shown.added],
    }


class SessionResumePreview(KnownQuery, APIView):
    query_keys = {"GET": frozenset({"policy"})}

    @extend_schema(
        summary="Preview what the session's agent sends on resume",
        description=(
            "What the agent that wrote the session (Claude Code, Codex, ...) sends its "
            "provider on resuming the head revision, raw and repaired under `policy`: the "
            "messages after the agent's own loader and recovery, the provider's verdict, "
            "and what the agent silently drops or adds. 404 `no_preview` for a format no "
            "agent resumes (a plain message list) or a file that cannot be read."
        ),
        parameters=[PreviewQuerySerializer],
        responses={200: ResumePreviewSerializer, 400: ErrorSerializer, 404: ErrorSerializer},
    )
    def get(self, request: Request, pk: int) -> Response:
        session = _session(request, pk)
        query = PreviewQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        policy = query.validated_data["policy"]
        _known_policy(policy, session.workspace_id)
        assert session.head is not None
        # The agent's loader sends texts: the records keep theirs.
        with actions.open_analysis(session.head, policy, summaries=True) as analysis:
            if analysis.transcript is None or analysis.format not in replay.AGENTS:
                raise errors.NotFound(
                    f"no agent resumes {analysis.format_label or 'this'} files", code="no_preview"
                )
            try:
                raw = replay.preview(analysis.transcript)
                # Read back from a file, as `verdicts` does: never the repaired bytes whole.
                with analysis.repaired_file() as data:
                    fixed = formats.load(data, session.name, analysis.format)
                    repaired = replay.preview(fixed)
            except (replay.CannotPreview, formats.FormatError) as exc:
                raise errors.NotFound(str(exc), code="no_preview") from None
        assert raw is not None and repaired is not None
        body = {
            "session": session.pk,
            "revision": session.head.number,
            "policy": policy,
            "agent": raw.agent,
            "modelled_on": raw.modelled_on,
            "provider": raw.provider,
            "raw": _preview_side(raw),
            "repaired": _preview_side(repaired),
        }
        return Response(ResumePreviewSerializer(body).data)


class SessionRepair(KnownQuery, APIView):
    @extend_schema(
        summary="Repair a session",
        description=(
            "Start a repair job (or a dry run) of this session under a policy; poll the job. "
            "A live session is skipped as pending unless `force` is set."
        ),
        request=RepairSerializer,
        responses={202: JobSerializer, 400: ErrorSerializer, 503: ErrorSerializer},
    )
    def post(self, request: Request, pk: int) -> Response:
        session = _session(request, pk)
        body = RepairSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        _known_policy(data["policy"], session.workspace_id)
        job = _start(
            actions.do_start_job,
            session.workspace,
            [session],
            policy=data["policy"],
            kind=Job.Kind.DRY_RUN if data["dry_run"] else Job.Kind.REPAIR,
            force=data["force"],
            acting_user=permissions.acting_user(request),
            api_token=request.auth,
        )
        return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)


class RevisionList(KnownQuery, generics.ListAPIView[Revision]):
    query_keys = {"GET": frozenset({"page", "page_size"})}
    serializer_class = RevisionSerializer
    pagination_class = Pagination

    def get_queryset(self) -> QuerySet[Revision]:
        session = _session(self.request, self.kwargs["pk"])
        return session.revisions.select_related("parent").order_by("number")

    @extend_schema(summary="List a session's revisions", description="Oldest first.")
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)


class RevisionContent(KnownQuery, APIView):
    renderer_classes = [BinaryRenderer]

    @extend_schema(
        summary="Download a revision",
        description="The exact bytes of one revision of the session (0 is the upload).",
        responses={
            (200, "application/octet-stream"): OpenApiResponse(OpenApiTypes.BINARY),
            (404, "application/json"): ErrorSerializer,
        },
    )
    def get(self, request: Request, pk: int, number: int) -> StreamingHttpResponse:
        session = _session(request, pk)
        revision = session.revisions.filter(number=number).first()
        if revision is None:
            raise errors.NotFound(f"Session {pk} has no revision {number}.")
        response = StreamingHttpResponse(revision.chunks(), content_type="application/octet-stream")
        response["Content-Disposition"] = content_disposition_header(
            True, file_name_of(session.name)
        )
        response["Content-Length"] = str(revision.size)
        return response


class JobList(KnownQuery, generics.ListAPIView[Job]):
    query_keys = {"GET": frozenset({"page", "page_size"})}
    serializer_class = JobSerializer
    pagination_class = Pagination
    # A viewer may export; the other kinds need an editor (checked once the kind is known).
    write_role = Membership.Role.VIEWER

    def get_serializer_class(self) -> Any:
        # As SessionList's: OPTIONS describes a POST by the fields it takes.
        if self.request is not None and self.request.method == "POST":
            return JobCreateSerializer
        return JobSerializer

    def get_queryset(self) -> QuerySet[Job]:
        return permissions.jobs(self.request)

    @extend_schema(summary="List jobs", description="The workspace's jobs, newest first.")
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    @extend_schema(
        summary="Start a job",
        description=(
            "A repair, dry run or export of the workspace's sessions: those given by id, "
            "those the filter matches, or both (every session if neither). The job runs "
            "in the background: poll it. A viewer's token may start exports only."
        ),
        request=JobCreateSerializer,
        responses={
            202: JobSerializer,
            400: ErrorSerializer,
            404: ErrorSerializer,
            503: ErrorSerializer,
        },
    )
    def post(self, request: Request) -> Response:
        body = JobCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        _known_policy(data["policy"], permissions.workspace(request).pk)
        if data["kind"] != Job.Kind.EXPORT:
            permissions.require(request, Membership.Role.EDITOR)
        sessions: QuerySet[Session] = permissions.sessions(request)
        if "sessions" in data:
            wanted = set(data["sessions"])
            sessions = sessions.filter(pk__in=wanted)
            missing = wanted - set(sessions.values_list("pk", flat=True))
            if missing:
                ids = ", ".join(str(pk) for pk in sorted(missing)[:20])
                raise errors.NotFound(f"There is no session {ids} in this workspace.")
        selection = {key: str(value) for key, value in data.get("filter", {}).items() if value}
        sessions = SessionFilter(selection, queryset=sessions).sessions()
        if not sessions.exists():
            raise errors.NotFound("No session of this workspace matches.")
        job = _start(
            actions.do_start_job,
            permissions.workspace(request),
            sessions,
            policy=data["policy"],
            kind=data["kind"],
            force=data["force"],
            selection=selection,
            acting_user=permissions.acting_user(request),
            api_token=request.auth,
        )
        return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)


class JobRollback(KnownQuery, APIView):
    @extend_schema(
        summary="Roll back a repair job",
        description=(
            "Start a job that gives each session the finished repair job changed its "
            "previous bytes back, as a new revision; a session changed since is reported, "
            "not touched."
        ),
        request=None,
        responses={202: JobSerializer, 409: ErrorSerializer, 503: ErrorSerializer},
    )
    def post(self, request: Request, pk: int) -> Response:
        refuse_body(request)
        job = _start(
            actions.do_start_rollback_job,
            _job(request, pk),
            acting_user=permissions.acting_user(request),
            api_token=request.auth,
        )
        return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)


class JobApply(KnownQuery, APIView):
    @extend_schema(
        summary="Apply a dry run",
        description=(
            "Start the repair a finished dry run planned, fenced on the revisions it read: "
            "a session changed since is skipped as fence_lost."
        ),
        request=None,
        responses={202: JobSerializer, 409: ErrorSerializer, 503: ErrorSerializer},
    )
    def post(self, request: Request, pk: int) -> Response:
        refuse_body(request)
        job = _start(
            actions.do_start_repair_from_dry_run,
            _job(request, pk),
            acting_user=permissions.acting_user(request),
            api_token=request.auth,
        )
        return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)


class JobDetail(KnownQuery, APIView):
    @extend_schema(
        summary="Get a job",
        description="Its status and progress counters.",
        responses={200: JobSerializer},
    )
    def get(self, request: Request, pk: int) -> Response:
        return Response(JobSerializer(_job(request, pk)).data)


class JobArchive(KnownQuery, APIView):
    renderer_classes = [ZipRenderer]

    @extend_schema(
        summary="Download an export job's archive",
        description="The zip of the repaired files with `manifest.json`, once the job is done.",
        responses={
            (200, "application/zip"): OpenApiResponse(OpenApiTypes.BINARY),
            (404, "application/json"): ErrorSerializer,
        },
    )
    def get(self, request: Request, pk: int) -> FileResponse:
        job = _job(request, pk)
        if not job.archive:
            raise errors.NotFound(f"Job {pk} has no archive.")
        return FileResponse(
            default_storage.open(job.archive, "rb"),
            as_attachment=True,
            filename=f"pairfix-export-{job.pk}.zip",
            content_type="application/zip",
        )
