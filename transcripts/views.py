"""Views: small functions, every queryset scoped to the user's workspaces.

A page that htmx updates renders its fragment (`page.html#fragment`) when the
request comes from htmx, and the whole page otherwise: one template for both.
"""

from __future__ import annotations

import csv
import itertools
import json
import tempfile
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import structlog
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.files.storage import default_storage
from django.core.paginator import Paginator
from django.db import DatabaseError
from django.db.models import Count, QuerySet
from django.http import (
    FileResponse,
    Http404,
    HttpRequest,
    HttpResponse,
    QueryDict,
    StreamingHttpResponse,
)
from django.http.multipartparser import MultiPartParserError
from django.http.response import HttpResponseBase
from django.shortcuts import get_object_or_404, redirect, render
from django.template.defaultfilters import pluralize
from django.urls import reverse
from django.utils import timezone
from django.utils.http import content_disposition_header
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import HttpResponseClientRefresh, push_url
from django_htmx.middleware import HtmxDetails

from transcripts import (
    actions,
    compare,
    formats,
    overview,
    replay,
    roots,
    search,
    timeline,
)
from transcripts.actions import sync
from transcripts.actions.common import file_name_of
from transcripts.core.model import FaultKind
from transcripts.engine import PRESETS
from transcripts.filters import SessionFilter
from transcripts.formats import FORMATS
from transcripts.forms import (
    ApiTokenForm,
    AuditFilterForm,
    InvitationForm,
    MemberForm,
    PolicyForm,
    SourceForm,
    SourceSettingsForm,
    StartJobForm,
    TimelineForm,
    UploadForm,
    WorkspacePolicyForm,
    policy_choices,
)
from transcripts.models import (
    ApiToken,
    AuditLog,
    AuditRecord,
    BlobUnreadable,
    Job,
    JobItem,
    Membership,
    Session,
    SyncSource,
    Timeline,
    TimelineRow,
    Workspace,
    WorkspacePolicy,
)
from transcripts.outages import (
    outage_of,
    storage_failing,
    storage_misconfigured,
    storage_unreachable,
)
from transcripts.policies import policy_for
from transcripts.uploads import Limits, LimitUploadHandler, keep_unusable_names
from transcripts.verdict import Verdict, verdicts
from transcripts.visible import page_text

logger = structlog.get_logger(__name__)

SESSIONS_PER_PAGE = 100
# The session page's controls that swap its timeline in place (element ids).
VIEW_CONTROLS = ("id_policy", "id_faults", "id_tools", "id_q")
ITEMS_PER_PAGE = 100
AUDIT_PER_PAGE = 100
# How much of a job its page shows; the audit page and its exports have the rest.
AUDIT_SHOWN = 200
FAILED_SHOWN = 50
DIFF_SAMPLES = 5


class HtmxHttpRequest(HttpRequest):
    """A request through django-htmx's middleware, which sets `htmx` (for the type checker)."""

    htmx: HtmxDetails


def _attachment(chunks: Iterable[bytes], filename: str, size: int) -> StreamingHttpResponse:
    # octet-stream: the bytes go out exactly as stored, whatever the file claims to be.
    response = StreamingHttpResponse(chunks, content_type="application/octet-stream")
    response["Content-Disposition"] = content_disposition_header(True, filename)
    response["Content-Length"] = str(size)
    return response


def _unknown_policy(request: HttpRequest, session: Session) -> HttpResponse:
    names = [name for name, _ in policy_choices([session.workspace_id])]
    if request.GET.get("policy", "") in names or not request.GET.get("policy"):
        title = "Unknown format"
        message = (
            f"There is no format named “{request.GET.get('format', '')}”. "
            f"The formats are: {', '.join(FORMATS)}."
        )
    else:
        title = "Unknown policy"
        message = (
            f"There is no policy named “{request.GET.get('policy', '')}”. "
            f"The policies are: {', '.join(names)}."
        )
    context = {
        "title": title,
        "message": message,
        "back_url": session.get_absolute_url(),
        "back_label": f"Back to {session.name}",
    }
    return render(request, "transcripts/bad_request.html", context, status=400)


def _query_without_page(request: HttpRequest) -> str:
    query = request.GET.copy()
    query.pop("page", None)
    return query.urlencode()


def _session_list_page(
    request: HttpRequest,
    upload_form: UploadForm | None = None,
    job_form: StartJobForm | None = None,
    status: int = 200,
) -> HttpResponse:
    # A refused job form lists what its filter fields (posted, hidden) name, as the page
    # it came from did: never every session, which "all matching" would then take.
    data = job_form.filters.data if job_form is not None and job_form.is_bound else request.GET
    filters = SessionFilter(
        data or None, queryset=Session.objects.for_user(request.user), user=request.user
    )
    filter_invalid = filters.is_bound and not filters.is_valid()
    # An invalid filter lists no session (SessionFilter): say so with the status too.
    sessions = filters.sessions().select_related("workspace", "source", "head")
    if filter_invalid:
        status = max(status, 400)
    page = Paginator(sessions, SESSIONS_PER_PAGE).get_page(request.GET.get("page"))
    context = {
        "page": page,
        "query": _query_without_page(request),
        "sessions": page.object_list,
        "filter_form": filters.form,
        "filtering": bool(filters.selection()) or filter_invalid,
        "filter_invalid": filter_invalid,
        "upload_form": upload_form or UploadForm(user=request.user),
        "job_form": job_form or StartJobForm(user=request.user),
        "jobs": Job.objects.for_user(request.user).select_related("workspace")[:5],
        "unreadable_count": _unreadable_uploads(request).count(),
    }
    return render(request, "transcripts/session_list.html", context, status=status)


@login_required
@require_GET
def session_list(request: HttpRequest) -> HttpResponse:
    """Show the user's sessions (filtered, a page at a time), the upload and the job forms."""
    return _session_list_page(request)


@csrf_exempt
@login_required
@require_POST
def upload(request: HttpRequest) -> HttpResponse:
    """Store each uploaded session (revision 0 = its exact bytes), all or none; editors only.

    A .gz holds one session and a .zip one per file. Limits on the bytes
    received apply while the request is read (`LimitUploadHandler`, put in
    place before anything reads the body, hence CSRF checked just after);
    limits after decompression while the form is cleaned.
    """
    if not Workspace.objects.for_user(request.user, Membership.Role.EDITOR).exists():
        raise PermissionDenied
    limiter = LimitUploadHandler(request, Limits.from_settings())
    request.upload_handlers.insert(0, limiter)
    keep_unusable_names(request)
    try:
        request.POST  # noqa: B018 - the body read now, through the handlers just put in place
    except MultiPartParserError as exc:
        # Django's parser refuses a part's headers over 10 KiB (a very long file name, say)
        # before any handler sees the part: said in words, not as a bare 400.
        logger.info("upload_refused", errors={"body": str(exc)})
        context = {
            "title": "Upload refused",
            "message": (
                f"The upload could not be read ({str(exc).rstrip('.')}). A file name of "
                "thousands of characters does this: rename the file and upload it again."
            ),
            "back_url": reverse("transcripts:session_list"),
            "back_label": "Back to the sessions",
        }
        return render(request, "transcripts/bad_request.html", context, status=400)
    return _upload(request, limiter)


@csrf_protect
def _upload(request: HttpRequest, limiter: LimitUploadHandler) -> HttpResponse:
    form = UploadForm(request.POST, request.FILES, user=request.user, refused=limiter.refused)
    try:
        return _store_upload(request, form)
    finally:
        form.close()


# How many unreadable files of one upload the message after it names.
UNREADABLE_SHOWN = 5


def _store_upload(request: HttpRequest, form: UploadForm) -> HttpResponse:
    if not form.is_valid():
        logger.info("upload_refused", errors=form.errors.get_json_data())
        return _session_list_page(request, upload_form=form, status=400)
    # What storing an upload may fail with when the database or the file storage is down.
    store_errors: tuple[type[Exception], ...] = (OSError, DatabaseError, *storage_unreachable())
    try:
        sessions = actions.do_ingest_sessions(
            form.cleaned_data["workspace"],
            form.cleaned_data["files"],
            acting_user=request.user,
            format=form.cleaned_data["format"] or None,
        )
    except Exception as exc:
        misconfigured = storage_misconfigured(exc)
        # S3's 5xx (throttling) is a ClientError, told by `outages.storage_failing`.
        if not isinstance(exc, store_errors) and not storage_failing(exc) and not misconfigured:
            raise
        logger.exception("upload_failed")
        form.add_error(
            None,
            f"The upload could not be stored: the {misconfigured}. Nothing was kept. "
            "The operator must create the bucket or configure one that exists."
            if misconfigured
            else f"The upload could not be stored ({type(exc).__name__}); nothing was kept. "
            "Try again in a moment.",
        )
        return _session_list_page(request, upload_form=form, status=503)
    logger.info("upload_stored", sessions=[s.pk for s in sessions])
    for copy, earlier in actions.earlier_copies(sessions):
        messages.info(
            request,
            f"“{copy.name}” has the same bytes as revision {earlier.number} of session "
            f"{earlier.session_id} (“{earlier.session.name}”); it is stored again as "
            f"session {copy.pk}. Delete one of them if you meant to upload it once.",
        )
    first_of: dict[str, Session] = {}
    for session in sessions:
        assert session.head is not None
        twin = first_of.setdefault(session.head.sha256, session)
        if twin is not session:
            messages.info(
                request,
                f"“{session.name}” (session {session.pk}) has the same bytes as "
                f"“{twin.name}” (session {twin.pk}) of this upload.",
            )
    if len(sessions) == 1:
        return redirect(sessions[0])
    messages.success(request, f"Uploaded {len(sessions)} sessions.")
    unreadable = [s for s in sessions if s.error]
    if unreadable:
        # Each reason names the file, line and why (`FormatError`); the first few are shown.
        shown = [s.error for s in unreadable[:UNREADABLE_SHOWN]]
        more = len(unreadable) - len(shown)
        messages.warning(
            request,
            f"{len(unreadable)} of them could not be read (stored as they are): "
            + "; ".join(shown)
            + (f"; and {more} more." if more else "."),
        )
    return redirect("transcripts:session_list")


def _timeline_form(request: HttpRequest, session: Session) -> TimelineForm | HttpResponse:
    """Return the valid view of the session page asked for, or the 400 response saying why not."""
    form = TimelineForm(request.GET, workspace_id=session.workspace_id)
    if form.is_valid():
        return form
    if "policy" in form.errors or "format" in form.errors:
        return _unknown_policy(request, session)
    context = {
        "title": "Bad request",
        "message": " ".join(str(e) for errors in form.errors.values() for e in errors),
        "back_url": session.get_absolute_url(),
        "back_label": f"Back to {session.name}",
    }
    return render(request, "transcripts/bad_request.html", context, status=400)


# The request fields that ask for a window other than the first.
PLACES = ("record", "fault_after", "fault_before", "at", "before", "after")


def _window(
    tl: Timeline, filters: timeline.Filters, data: dict[str, Any]
) -> timeline.Window | None:
    """Return the window a request asks for; None for a fault or record that is not there."""
    if data.get("record") is not None:
        position = timeline.position_of_record(tl, data["record"])
        return None if position is None else timeline.window_at(tl, filters, position)
    if data.get("fault_after") is not None:
        position = timeline.next_fault(tl, filters, data["fault_after"])
        return None if position is None else timeline.window_at(tl, filters, position)
    if data.get("fault_before") is not None:
        position = timeline.previous_fault(tl, filters, data["fault_before"])
        return None if position is None else timeline.window_at(tl, filters, position)
    if data.get("at") is not None:
        return timeline.window_at(tl, filters, data["at"])
    if data.get("before") is not None:
        return timeline.window_before(tl, filters, data["before"])
    return timeline.window_after(tl, filters, -1 if data.get("after") is None else data["after"])


def _filters(data: dict[str, Any]) -> timeline.Filters:
    return timeline.Filters(faults=data["faults"], tools=data["tools"], q=data["q"])


def _session(request: HttpRequest, pk: int) -> Session:
    return get_object_or_404(
        Session.objects.for_user(request.user).select_related(
            "head", "workspace", "source", "synced_file"
        ),
        pk=pk,
    )


@login_required
@require_GET
@vary_on_headers("HX-Request")
def session_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Show the raw and repaired timelines side by side under the chosen policy, a window at a time.

    The first window comes with the page (or the window of `record`, `at`,
    `after` or `before`); `session_rows` serves the others. While a large
    session's timeline is being built the page polls for it, showing the
    first rows read from the file's start (`timeline.preview`) when the
    view asks for the first window unfiltered.
    """
    session = _session(request, pk)
    assert session.head is not None
    if session.head.size <= settings.TIMELINE_INLINE_BYTES:
        # A larger session's counts are left to the beat task: no request parses it whole.
        sync.refresh_live(session)
    form = _timeline_form(request, session)
    if isinstance(form, HttpResponse):
        return form
    data = form.cleaned_data
    policy, read_as = data["policy"], data["format"]
    tl = actions.timeline_for(session, policy, read_as)
    filters = _filters(data)
    context: dict[str, Any] = {
        "session": session,
        "policy": policy,
        "read_as": read_as,
        "form": form,
        "filters": filters,
        "view_query": form.view_query(),
        "policy_description": policy_for(policy, session.workspace_id).description,
        "timeline": tl,
        "revisions": session.revisions.select_related("created_by").order_by("number"),
        "can_edit": Membership.has_role(request.user, session.workspace_id, Membership.Role.EDITOR),
        "policy_options": [
            (value, label, None) for value, label in policy_choices([session.workspace_id])
        ],
    }
    if tl.status in (Timeline.Status.QUEUED, Timeline.Status.BUILDING):
        stages = timeline.BUILD_STAGES
        context["build"] = {
            "steps": len(stages),
            "done": max(tl.stage - 1, 0),
            "text": (
                f"step {tl.stage} of {len(stages)}: {stages[tl.stage - 1]}"
                if tl.stage
                else "queued for a worker"
            ),
        }
        if not filters and not any(data.get(name) is not None for name in PLACES):
            # The file's first records, read now: a first look while the rest is built.
            try:
                context["preview"] = timeline.preview(tl)
            except Exception as exc:
                if outage_of(exc) is None:
                    raise
                # Storage down: the build bar alone; the build itself will say so.
    if tl.status == Timeline.Status.READY and not tl.error:
        context["raw_verdict"], context["verdict"] = timeline.timeline_verdicts(tl)
        known = _policy_verdicts(session, tl)
        context["policy_options"] = [
            (value, label, known.get(value))
            for value, label in policy_choices([session.workspace_id])
        ]
        window = _window(tl, filters, data)
        if window is None:
            context["not_found"] = (
                f"There is no record {data['record']} in this session."
                if data.get("record") is not None
                else "No more faults in that direction."
            )
            window = timeline.window_after(tl, filters, -1)
        context["window"] = window
        context["faults"] = timeline.listed_faults(tl)
        context["ruler"] = timeline.ruler(tl)
        if request.GET.get("view") == "changes" and not filters:
            context["changes"] = timeline.changes(tl)
        named = timeline.provider_error_position(tl, filters.q) if filters.q else None
        if named is not None:
            # A pasted provider error: go to the record it names, not rows containing it.
            position, record, where = named
            context["filters"] = filters = timeline.Filters(filters.faults, filters.tools)
            context["window"] = timeline.window_at(tl, filters, position)
            context["named"] = f"{where} of the request is record #{record}."
            shown = QueryDict(form.view_query(), mutable=True)
            shown.pop("q", None)
            context["view_query"] = shown.urlencode()
        elif filters.q and (ids := search.pasted_ids(filters.q)):
            # The rows stay filtered by the pasted text (`Filters.text_match`): it stays too.
            context["named"] = (
                "The pasted text names "
                + ("tool call ids " if len(ids) > 1 else "the tool call id ")
                + " or ".join(ids[: search.MAX_WORDS])
                + ": the rows holding "
                + ("one of them" if len(ids) > 1 else "it")
                + " are shown."
            )
        context["ruler_height"] = timeline.RULER_BUCKETS
        context["faults_more"] = tl.fault_total - len(context["faults"])
    if not request.htmx:
        return render(request, "transcripts/session_detail.html", context)
    response = render(request, "transcripts/session_detail.html#timeline", context)
    if request.htmx.trigger in VIEW_CONTROLS:
        # The address of the view alone: no empty fields, no place in the timeline.
        push_url(response, f"{session.get_absolute_url()}?{form.view_query()}")
    return response


def _policy_verdicts(session: Session, shown: Timeline) -> dict[str, Verdict]:
    """Return {policy: the provider's verdict on the head repaired under it}, as far as known.

    Known from the shown timeline's build (for a head small enough to build
    during a request, every preset) and from each policy's built timeline.
    """
    found = timeline.policy_verdicts(shown)
    built = Timeline.objects.filter(
        revision=session.head,
        read_as=shown.read_as,
        live=shown.live,
        engine_version=shown.engine_version,
        status=Timeline.Status.READY,
    )
    for tl in built:
        _, after = timeline.timeline_verdicts(tl)
        if after is not None:
            found[tl.policy] = after
    return found


@login_required
@require_GET
def session_rows(request: HttpRequest, pk: int) -> HttpResponse:
    """Return a window of timeline rows (htmx, or the page's script) for the view asked for.

    `after` and `before` continue the rows shown; `record`, `at`, `fault_after`
    and `fault_before` give a window to replace them, whose row to focus is in
    the `X-Pairfix-Focus` header. No such record or fault: 204. A timeline
    not built any more: the page is reloaded.
    """
    session = _session(request, pk)
    form = _timeline_form(request, session)
    if isinstance(form, HttpResponse):
        return form
    data = form.cleaned_data
    tl = actions.timeline_for(session, data["policy"], data["format"])
    if tl.status != Timeline.Status.READY or tl.error:
        return HttpResponseClientRefresh()
    window = _window(tl, _filters(data), data)
    if window is None:
        return HttpResponse(status=204)
    context = {
        "session": session,
        "window": window,
        "view_query": form.view_query(),
        "before_only": data.get("before") is not None,
        "after_only": data.get("after") is not None,
    }
    response = render(request, "transcripts/session_detail.html#rows", context)
    if window.focus:
        response["X-Pairfix-Focus"] = window.focus
    return response


@login_required
@require_GET
@vary_on_headers("HX-Request")
def record_detail(request: HtmxHttpRequest, pk: int, index: int) -> HttpResponse:
    """Show every block of one raw record in full; for htmx, one block (`block`), full or cut.

    Reads the record's bytes only, located by a built timeline of the head.
    """
    session = _session(request, pk)
    form = _timeline_form(request, session)
    if isinstance(form, HttpResponse):
        return form
    data = form.cleaned_data
    tl = (
        Timeline.objects.filter(
            revision=session.head, read_as=data["format"], status=Timeline.Status.READY
        )
        .order_by("-used_at")
        .first()
    )
    if tl is None:
        raise Http404("This session's timeline is not built yet.")
    try:
        blocks, time = timeline.record_blocks(tl, index)
    except TimelineRow.DoesNotExist:
        raise Http404("No such record.") from None
    context: dict[str, Any] = {
        "session": session,
        "index": index,
        "time": time,
        "blocks": list(enumerate(blocks)),
        "view_query": form.view_query(),
    }
    if request.htmx and "block" in request.GET:
        try:
            j = int(request.GET["block"])
            context["block"] = blocks[j]
        except (ValueError, IndexError):
            raise Http404("No such block.") from None
        context.update(j=j, full=request.GET.get("cut") != "1", cell_index=index)
        return render(request, "transcripts/session_detail.html#block", context)
    return render(request, "transcripts/record_detail.html", context)


@login_required
@require_GET
def overview_page(request: HttpRequest) -> HttpResponse:
    """Show faults by kind, by format and by source, faults over time, and the recent jobs."""
    numbers = overview.figures(request.user)
    context = {
        "figures": numbers,
        "chart": overview.chart(numbers.days),
        "jobs": Job.objects.for_user(request.user).select_related("workspace")[:10],
    }
    return render(request, "transcripts/overview.html", context)


@login_required
@require_GET
def download_revision(request: HttpRequest, pk: int, number: int) -> HttpResponseBase:
    """Return the exact bytes of one revision (number 0 is the upload) as the session's file."""
    session = get_object_or_404(Session.objects.for_user(request.user), pk=pk)
    revision = get_object_or_404(session.revisions, number=number)
    try:
        chunks = revision.chunks()
    except BlobUnreadable as exc:
        # 503, not 404: the revision exists, its bytes are what the storage fails to give
        # back whole, and restoring the blob (a backup, the right bucket) serves it again.
        context = {
            "title": "The stored file cannot be read",
            "message": f"Pairfix's file storage cannot give back revision {number} as it was "
            f"stored: {exc}. Nothing else is sent in its place.",
            "back_url": session.get_absolute_url(),
            "back_label": f"Back to {session.name}",
        }
        return render(request, "transcripts/bad_request.html", context, status=503)
    return _attachment(chunks, file_name_of(session.name), revision.size)


@login_required
@require_GET
def download_repaired(request: HttpRequest, pk: int) -> HttpResponseBase:
    """Return the head revision repaired under the chosen policy, named like the upload."""
    session = get_object_or_404(
        Session.objects.for_user(request.user).select_related("head"), pk=pk
    )
    form = PolicyForm(request.GET, workspace_id=session.workspace_id)
    if not form.is_valid():
        return _unknown_policy(request, session)
    assert session.head is not None
    with actions.open_analysis(
        session.head,
        form.cleaned_data["policy"],
        format=form.cleaned_data["format"] or None,
        last_write=session.last_write,
    ) as analysis:
        if not analysis.repairable:
            # Nothing was read, so nothing is repaired: say so rather than hand back
            # the upload under a "repaired" name.
            context: dict[str, Any] = {
                "session": session,
                "error": analysis.error,
                "raw_url": reverse(
                    "transcripts:download_revision", args=[session.pk, session.head.number]
                ),
            }
            return render(request, "transcripts/download_unreadable.html", context, status=409)
        # Asked before the download, not after the agent fails on it. The verdict reads
        # the repaired file back whole, so it is asked of files a request may hold.
        if (
            request.GET.get("confirm") != "1"
            and session.head.size <= settings.TIMELINE_INLINE_BYTES
        ):
            _, after = verdicts(analysis)
            if after is not None and not after.valid:
                query = request.GET.copy()
                query["confirm"] = "1"
                context = {
                    "session": session,
                    "policy": form.cleaned_data["policy"],
                    "verdict": after,
                    "download_url": f"{request.path}?{query.urlencode()}",
                    # Calls a live session is still running: left alone, not unrepairable.
                    "pending": sum(f.kind == FaultKind.PENDING_RESULT for f in analysis.faults),
                    "agent": analysis.transcript is not None and analysis.transcript.agent,
                }
                return render(request, "transcripts/download_warning.html", context)
        repaired = tempfile.TemporaryFile()  # noqa: SIM115 (FileResponse closes it once sent)
        analysis.write_repaired(repaired)
    repaired.seek(0)
    # octet-stream: the bytes go out exactly as repaired, whatever the file claims to be.
    return FileResponse(
        repaired,
        as_attachment=True,
        filename=file_name_of(session.name),
        content_type="application/octet-stream",
    )


@login_required
@require_POST
def start_repair(request: HttpRequest) -> HttpResponse:
    """Start a dry run, repair or export of the selected sessions or of those a filter matches."""
    form = StartJobForm(request.POST, user=request.user)
    if not form.is_valid():
        return _session_list_page(request, job_form=form, status=400)
    data = form.cleaned_data
    # A viewer may export; changing sessions takes an editor.
    needed = Membership.Role.VIEWER if data["kind"] == Job.Kind.EXPORT else Membership.Role.EDITOR
    if not Membership.has_role(request.user, data["workspace"].pk, needed):
        raise PermissionDenied
    try:
        job = actions.do_start_job(
            data["workspace"],
            data["sessions"],
            kind=data["kind"],
            policy=data["policy"],
            force=data["force"],
            selection=data["selection"],
            acting_user=request.user,
        )
    except actions.BrokerUnavailable as exc:
        form.add_error(None, str(exc))
        return _session_list_page(request, job_form=form, status=503)
    return redirect(job)


def _job_for(request: HttpRequest, pk: int, role: str | None = None) -> Job:
    """Return the user's job `pk` (404 if not theirs); PermissionDenied below `role`."""
    job = get_object_or_404(
        Job.objects.for_user(request.user).select_related("workspace", "created_by", "source_job"),
        pk=pk,
    )
    if role is not None and not Membership.has_role(request.user, job.workspace_id, role):
        raise PermissionDenied
    return job


@login_required
@require_GET
@vary_on_headers("HX-Request")
def job_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Show a job's progress (polled by htmx while it runs), its items and audit records.

    The poll that finds the job finished reloads the page, so the item and
    audit tables appear complete.
    """
    job = _job_for(request, pk)
    if request.htmx and job.is_finished:
        return HttpResponseClientRefresh()
    items = job.items.select_related("session", "base__parent", "revision")
    op_totals: Counter[str] = Counter()
    for counts in items.exclude(op_counts={}).values_list("op_counts", flat=True):
        op_totals.update(counts)
    failed_items = list(items.filter(status=JobItem.Status.FAILED)[:FAILED_SHOWN])
    unreadable = 0
    if job.failed:
        unreadable = items.filter(status=JobItem.Status.FAILED, unreadable=True).count()
    context = {
        "job": job,
        "can_edit": Membership.has_role(request.user, job.workspace_id, Membership.Role.EDITOR),
        "rate": job.rate(),
        "seconds_left": job.seconds_left(),
        "failed_items": failed_items,
        "failed_more": job.failed - len(failed_items),
        # A retry reads each failed session again: one whose stored file is gone fails again.
        "retryable": job.failed - unreadable,
        "unreadable": unreadable,
        "waiting": _waiting(job),
        "items_page": Paginator(items, ITEMS_PER_PAGE).get_page(request.GET.get("page")),
        "op_totals": op_totals.most_common(),
        "affected": items.filter(op_count__gt=0).count(),
        "diffs": items.exclude(diff="")[:DIFF_SAMPLES],
        "audit": job.audit.select_related("session", "revision_from", "revision_to")[:AUDIT_SHOWN],
        "audit_count": job.audit.count(),
        "rollbacks": Job.objects.filter(source_job=job, kind=Job.Kind.ROLLBACK),
        "rolled_back": Job.objects.filter(source_job=job, kind=Job.Kind.ROLLBACK)
        .exclude(status=Job.Status.CANCELLED)
        .exists(),
        "applied": Job.objects.filter(source_job=job, kind=Job.Kind.REPAIR).first(),
        "repaired": items.filter(status=JobItem.Status.REPAIRED).exists(),
    }
    template = "transcripts/job_detail.html"
    if request.htmx:
        template += "#progress"
    return render(request, template, context)


def _waiting(job: Job) -> dict[str, Any] | None:
    """Return what a running job's stopped chunk waits for, or None when none is waiting.

    {"service": what is down, "error": its error, "retry_at": when the
    chunk is retried, "retry_in": the seconds until then (0 once due)}.
    """
    if job.is_finished or not job.waiting_for or job.retry_at is None:
        return None
    now = timezone.now()
    return {
        "service": job.waiting_for,
        "error": job.waiting_error,
        "retry_at": job.retry_at,
        "retry_in": max(0, round((job.retry_at - now).total_seconds())),
    }


def _back_to_job(request: HttpRequest, job: Job, error: Exception | None = None) -> HttpResponse:
    if error is not None:
        messages.error(request, str(error))
    return redirect(job)


@login_required
@require_POST
def cancel_job(request: HttpRequest, pk: int) -> HttpResponse:
    """Cancel a queued or running job: items not yet written never will be."""
    job = _job_for(request, pk, Membership.Role.EDITOR)
    if actions.do_cancel_job(job, acting_user=request.user):
        messages.success(request, f"Job {job.pk} cancelled.")
    else:
        messages.error(request, f"Job {job.pk} had already finished.")
    return redirect(job)


@login_required
@require_POST
def retry_job(request: HttpRequest, pk: int) -> HttpResponse:
    """Queue a finished job's failed items again."""
    job = _job_for(request, pk, Membership.Role.EDITOR)
    try:
        retried = actions.do_retry_failed_items(job, acting_user=request.user)
    except actions.BrokerUnavailable as exc:
        return _back_to_job(request, job, exc)
    if retried:
        messages.success(request, f"Retrying {retried} failed session{pluralize(retried)}.")
    elif job.items.filter(status=JobItem.Status.FAILED, unreadable=True).exists():
        messages.error(
            request,
            "Nothing to retry: the failed sessions' stored files are missing or damaged, "
            "so a retry would fail again.",
        )
    else:
        messages.error(request, "Nothing to retry: the job is not finished or has no failures.")
    return redirect(job)


@login_required
@require_POST
def rollback_job(request: HttpRequest, pk: int) -> HttpResponse:
    """Start a job that gives each session a finished repair job changed its previous bytes."""
    job = _job_for(request, pk, Membership.Role.EDITOR)
    try:
        rollback = actions.do_start_rollback_job(job, acting_user=request.user)
    except (actions.JobStateError, actions.BrokerUnavailable) as exc:
        return _back_to_job(request, job, exc)
    return redirect(rollback)


@login_required
@require_POST
def apply_dry_run(request: HttpRequest, pk: int) -> HttpResponse:
    """Start the repair a finished dry run planned, fenced on the revisions it read."""
    job = _job_for(request, pk, Membership.Role.EDITOR)
    try:
        repair = actions.do_start_repair_from_dry_run(job, acting_user=request.user)
    except (actions.JobStateError, actions.BrokerUnavailable) as exc:
        return _back_to_job(request, job, exc)
    return redirect(repair)


@login_required
@require_GET
def download_archive(request: HttpRequest, pk: int) -> HttpResponseBase:
    """Return the zip archive an export job built."""
    job = _job_for(request, pk)
    if not job.archive:
        raise Http404("This job has no archive.")
    return FileResponse(
        default_storage.open(job.archive, "rb"),
        as_attachment=True,
        filename=f"pairfix-export-{job.pk}.zip",
        content_type="application/zip",
    )


# The audit trail.


@login_required
@require_GET
def audit_list(request: HttpRequest) -> HttpResponse:
    """Show the audit records of the user's workspaces, filtered, a page at a time."""
    form = AuditFilterForm(request.GET or None, user=request.user)
    invalid = form.is_bound and not form.is_valid()
    records = form.records().select_related(
        "job", "acting_user", "session", "revision_from", "revision_to"
    )
    if invalid:
        records = records.none()  # not every record, as ignoring the bad value would give
    events = form.events().select_related("acting_user", "on_behalf_of", "session", "revision")
    if invalid:
        events = events.none()
    page = Paginator(records, AUDIT_PER_PAGE).get_page(request.GET.get("page"))
    events_page = Paginator(events, AUDIT_PER_PAGE).get_page(request.GET.get("events_page"))
    events_query = request.GET.copy()
    events_query.pop("events_page", None)
    context = {
        "form": form,
        "page": page,
        "events_page": events_page,
        "query": _query_without_page(request),
        "events_query": events_query.urlencode(),
        "invalid": invalid,
    }
    return render(request, "transcripts/audit_list.html", context, status=400 if invalid else 200)


class _Echo:
    """A file-like object whose write returns the value: csv.writer feeds a stream with it."""

    def write(self, value: str) -> str:
        return value


@login_required
@require_GET
def audit_export(request: HttpRequest, format: str) -> HttpResponse | StreamingHttpResponse:
    """Stream the audit records the filters match as CSV or JSON Lines, one record a row.

    `removed_bytes` is base64. In CSV, text that a spreadsheet would run as a
    formula (starting with =, +, -, @, tab or CR) gets a leading apostrophe;
    JSON Lines has every value exactly.
    """
    form = AuditFilterForm(request.GET or None, user=request.user)
    if form.is_bound and not form.is_valid():
        return HttpResponse(
            "The filter is not valid: " + form.errors.as_text(),
            status=400,
            content_type="text/plain; charset=utf-8",
        )
    records = (
        form.records()
        .select_related("job", "acting_user", "session", "revision_from", "revision_to")
        .order_by("id")  # a log file reads in the order things happened
        .iterator(chunk_size=1000)
    )
    rows = (record.export_row() for record in records)
    if format == "csv":
        writer = csv.writer(_Echo())
        lines: Iterable[str] = itertools.chain(
            [writer.writerow(AuditRecord.EXPORT_FIELDS)],
            (
                writer.writerow(
                    [_spreadsheet_safe(row[name]) for name in AuditRecord.EXPORT_FIELDS]
                )
                for row in rows
            ),
        )
        content_type = "text/csv; charset=utf-8"
    else:
        lines = (json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
        content_type = "application/x-ndjson"
    response = StreamingHttpResponse(lines, content_type=content_type)
    response["Content-Disposition"] = content_disposition_header(True, f"pairfix-audit.{format}")
    return response


@login_required
@require_GET
def audit_events_export(request: HttpRequest, format: str) -> HttpResponse | StreamingHttpResponse:
    """Stream the workspace events the filters match as CSV or JSON Lines, one event a row.

    `extra_data` is a JSON object (in CSV, its JSON text); CSV text a
    spreadsheet would run as a formula gets a leading apostrophe, as in
    `audit_export`.
    """
    form = AuditFilterForm(request.GET or None, user=request.user)
    if form.is_bound and not form.is_valid():
        return HttpResponse(
            "The filter is not valid: " + form.errors.as_text(),
            status=400,
            content_type="text/plain; charset=utf-8",
        )
    events = (
        form.events()
        .select_related("acting_user", "on_behalf_of", "revision")
        .order_by("id")
        .iterator(chunk_size=1000)
    )
    rows = (event.export_row() for event in events)
    if format == "csv":
        writer = csv.writer(_Echo())
        lines: Iterable[str] = itertools.chain(
            [writer.writerow(AuditLog.EXPORT_FIELDS)],
            (
                writer.writerow(
                    [
                        _spreadsheet_safe(
                            json.dumps(row[name], ensure_ascii=False)
                            if name == "extra_data"
                            else row[name]
                        )
                        for name in AuditLog.EXPORT_FIELDS
                    ]
                )
                for row in rows
            ),
        )
        content_type = "text/csv; charset=utf-8"
    else:
        lines = (json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
        content_type = "application/x-ndjson"
    response = StreamingHttpResponse(lines, content_type=content_type)
    response["Content-Disposition"] = content_disposition_header(
        True, f"pairfix-audit-events.{format}"
    )
    return response


def _spreadsheet_safe(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


# Sync sources.


def _source_for(request: HttpRequest, pk: int) -> SyncSource:
    return get_object_or_404(SyncSource.objects.for_user(request.user), pk=pk)


def _can_administer(request: HttpRequest, source: SyncSource) -> bool:
    return Membership.has_role(request.user, source.workspace_id, Membership.Role.ADMIN)


@login_required
def source_list(request: HttpRequest) -> HttpResponse:
    """List the sync sources of the user's workspaces; POST adds a folder as a source."""
    form = SourceForm(request.POST or None, user=request.user)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            source = sync.do_create_source(
                data["workspace"],
                data["path"],
                acting_user=request.user,
                name=data["name"],
                format=data["format"],
                write_back=data["write_back"],
            )
        except sync.SyncError as exc:
            form.add_error("path", str(exc))
        else:
            try:
                sync.do_queue_sync(source, acting_user=request.user)
                messages.success(request, f"Added {source.path}; its first sync is queued.")
            except actions.BrokerUnavailable as exc:
                messages.warning(request, f"Added {source.path}, but: {exc}")
            return redirect(source)
    sources = (
        SyncSource.objects.for_user(request.user)
        .select_related("workspace")
        .annotate(sessions_count=Count("sessions"))
    )
    context = {
        "sources": sources,
        "form": form,
        "roots": settings.SYNC_ROOTS,
        "interval": settings.SYNC_INTERVAL,
        "can_add": form.fields["workspace"].queryset.exists(),  # type: ignore[attr-defined]
        "roots_line": _roots_line(form),
    }
    return render(
        request, "transcripts/source_list.html", context, status=400 if form.errors else 200
    )


def _roots_line(form: SourceForm) -> str:
    """Return the SYNC_ROOTS line that would allow the folder the form was refused for, or ""."""
    path = form.data.get("path", "").strip() if form.is_bound else ""
    if not path.startswith("/") or ".." in path or "path" not in form.errors:
        return ""
    folder = Path(path).resolve()
    if any(folder.is_relative_to(root) for root in settings.SYNC_ROOTS):
        return ""
    return roots.roots_line(folder)


@login_required
@require_GET
def source_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """Show a source's state and its files, a page at a time."""
    source = _source_for(request, pk)
    files = source.files.select_related("session").order_by("path")
    page = Paginator(files, SESSIONS_PER_PAGE).get_page(request.GET.get("page"))
    context = {
        "source": source,
        "page": page,
        "files": page.object_list,
        "query": "",
        "sessions_count": source.sessions.count(),
        "can_administer": _can_administer(request, source),
        "settings_form": SourceSettingsForm(instance=source),
    }
    return render(request, "transcripts/source_detail.html", context)


@login_required
@require_POST
def sync_source_now(request: HttpRequest, pk: int) -> HttpResponse:
    """Queue a sync of the source now."""
    source = _source_for(request, pk)
    if not _can_administer(request, source):
        raise PermissionDenied
    try:
        sync.do_queue_sync(source, acting_user=request.user)
        messages.success(request, "Sync queued.")
    except actions.BrokerUnavailable as exc:
        messages.error(request, str(exc))
    return redirect(source)


@login_required
@require_POST
def source_settings(request: HttpRequest, pk: int) -> HttpResponse:
    """Turn the source's sync and write-back on or off."""
    source = _source_for(request, pk)
    if not _can_administer(request, source):
        raise PermissionDenied
    form = SourceSettingsForm(request.POST, instance=source)
    if form.is_valid():
        sync.do_update_source(source, acting_user=request.user, **form.cleaned_data)
        messages.success(request, "Saved.")
    return redirect(source)


# Workspaces and their members.


@login_required
@require_GET
def workspace_list(request: HttpRequest) -> HttpResponse:
    """List the user's workspaces with their role in each."""
    assert request.user.is_authenticated  # login_required: never the anonymous user
    memberships = (
        Membership.objects.filter(user=request.user)
        .select_related("workspace")
        .annotate(members=Count("workspace__memberships"))
        .order_by("workspace__name")
    )
    return render(request, "transcripts/workspace_list.html", {"memberships": memberships})


def _members_page(
    request: HttpRequest,
    workspace: Workspace,
    *,
    form: MemberForm | None = None,
    invitation_form: InvitationForm | None = None,
    invitation_link: str = "",
    status: int = 200,
) -> HttpResponse:
    is_admin = Membership.has_role(request.user, workspace.pk, Membership.Role.ADMIN)
    open_invitations = [i for i in workspace.invitations.order_by("-created") if i.is_open()]
    context = {
        "workspace": workspace,
        "members": workspace.memberships.select_related("user").order_by("user__username"),
        "is_admin": is_admin,
        "form": form or MemberForm(workspace=workspace),
        "invitation_form": invitation_form or InvitationForm(),
        "invitations": open_invitations if is_admin else [],
        "invitation_link": invitation_link,
        "roles": Membership.Role.choices,
    }
    return render(request, "transcripts/workspace_members.html", context, status=status)


@login_required
def workspace_members(request: HttpRequest, pk: int) -> HttpResponse:
    """Show a workspace's members; its admins change roles and remove members (POST)."""
    workspace = get_object_or_404(Workspace.objects.for_user(request.user), pk=pk)
    if request.method != "POST":
        return _members_page(request, workspace)
    if not Membership.has_role(request.user, workspace.pk, Membership.Role.ADMIN):
        raise PermissionDenied
    form = MemberForm(request.POST, workspace=workspace)
    if form.is_valid():
        role = form.cleaned_data["role"]
        user = form.cleaned_data["username"]
        try:
            actions.do_set_member_role(
                workspace, user, None if role == "remove" else role, acting_user=request.user
            )
        except actions.LastAdmin as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"{user}: {role}.")
            return redirect("transcripts:workspace_members", pk=workspace.pk)
    return _members_page(request, workspace, form=form, status=400)


@login_required
@require_POST
def create_invitation(request: HttpRequest, pk: int) -> HttpResponse:
    """Make an invitation link to the workspace and show it, this once; admins only."""
    workspace = get_object_or_404(Workspace.objects.for_user(request.user), pk=pk)
    if not Membership.has_role(request.user, workspace.pk, Membership.Role.ADMIN):
        raise PermissionDenied
    form = InvitationForm(request.POST)
    if not form.is_valid():
        return _members_page(request, workspace, invitation_form=form, status=400)
    _, secret = actions.do_create_invitation(
        workspace, form.cleaned_data["role"], acting_user=request.user
    )
    link = request.build_absolute_uri(reverse("accept_invitation", args=[secret]))
    return _members_page(request, workspace, invitation_link=link, status=201)


@login_required
@require_POST
def revoke_invitation(request: HttpRequest, pk: int, invitation: int) -> HttpResponse:
    """Revoke an open invitation of the workspace; admins only."""
    workspace = get_object_or_404(Workspace.objects.for_user(request.user), pk=pk)
    if not Membership.has_role(request.user, workspace.pk, Membership.Role.ADMIN):
        raise PermissionDenied
    found = get_object_or_404(workspace.invitations, pk=invitation)
    if actions.do_revoke_invitation(found, acting_user=request.user):
        messages.success(request, "Invitation revoked: its link no longer works.")
    else:
        messages.error(request, "That invitation had already been used or revoked.")
    return redirect("transcripts:workspace_members", pk=workspace.pk)


# API tokens: workspace admins create and revoke them; every member sees them.


def _api_tokens_page(
    request: HttpRequest,
    form: ApiTokenForm | None = None,
    created: tuple[ApiToken, str] | None = None,
    status: int = 200,
) -> HttpResponse:
    tokens = ApiToken.objects.for_user(request.user).select_related("workspace", "created_by")
    admin_of = set(
        Workspace.objects.for_user(request.user, Membership.Role.ADMIN).values_list("pk", flat=True)
    )
    context = {
        "form": form or ApiTokenForm(user=request.user),
        "tokens": tokens.order_by("workspace__name", "revoked_at", "-created", "-id"),
        "admin_of": admin_of,
        "created": created[0] if created else None,
        "secret": created[1] if created else "",
    }
    response = render(request, "transcripts/api_tokens.html", context, status=status)
    if created:
        # The secret is on this page only: no cache may keep a copy.
        response["Cache-Control"] = "no-store"
    return response


# The session key under which a new token's secret waits for the page that shows it.
NEW_TOKEN_KEY = "pairfix_new_api_token"


@login_required
@require_GET
def api_tokens(request: HttpRequest) -> HttpResponse:
    """List the API tokens of the user's workspaces, with the form that creates one.

    Right after a token is created, and only then, the page shows its secret:
    taken out of the session as it is shown, so a reload shows it no more.
    """
    waiting = request.session.pop(NEW_TOKEN_KEY, None)
    if waiting:
        token = ApiToken.objects.for_user(request.user).filter(pk=waiting["pk"]).first()
        if token is not None:
            return _api_tokens_page(request, created=(token, waiting["secret"]))
    return _api_tokens_page(request)


@login_required
@require_POST
def create_api_token(request: HttpRequest) -> HttpResponse:
    """Create an API token for a workspace the user administers and show its secret, this once."""
    form = ApiTokenForm(request.POST, user=request.user)
    if not form.is_valid():
        return _api_tokens_page(request, form=form, status=400)
    token, secret = actions.do_create_api_token(
        form.cleaned_data["workspace"], form.cleaned_data["name"], acting_user=request.user
    )
    # POST, redirect, GET: reloading the page that shows the secret creates no second
    # token. The secret waits in the (server-side) session for that one page.
    request.session[NEW_TOKEN_KEY] = {"pk": token.pk, "secret": secret}
    return redirect("transcripts:api_tokens")


@login_required
@require_POST
def revoke_api_token(request: HttpRequest, pk: int) -> HttpResponse:
    """Revoke an API token: it stops authenticating at once. Workspace admins only."""
    token = get_object_or_404(ApiToken.objects.for_user(request.user), pk=pk)
    if not Membership.has_role(request.user, token.workspace_id, Membership.Role.ADMIN):
        raise PermissionDenied
    if actions.do_revoke_api_token(token, acting_user=request.user):
        messages.success(request, f"Token “{page_text(token.name)}” ({token.prefix}…) revoked.")
    else:
        messages.error(request, f"Token “{page_text(token.name)}” was already revoked.")
    return redirect("transcripts:api_tokens")


# The session page's own actions and views: compare revisions, repair this session.


def _revision_number(request: HttpRequest, name: str, default: int) -> int | None:
    value = request.GET.get(name, "")
    if value == "":
        return default
    return int(value) if value.isdigit() else None


@login_required
@require_GET
def resume_preview(request: HttpRequest, pk: int) -> HttpResponse:
    """Show what the session's agent sends on resuming the head, raw and repaired under `policy`.

    The messages after the agent's own loader and recovery (`transcripts.replay`),
    the provider's verdict on each side and what the agent would silently drop.
    Reads the head whole, as a download does.
    """
    session = _session(request, pk)
    form = PolicyForm(request.GET, workspace_id=session.workspace_id)
    if not form.is_valid():
        return _unknown_policy(request, session)
    policy = form.cleaned_data["policy"]
    assert session.head is not None
    context: dict[str, Any] = {"session": session, "policy": policy}
    with actions.open_analysis(session.head, policy, summaries=True) as analysis:
        context["format_label"] = analysis.format_label
        if analysis.transcript is not None and analysis.format in replay.AGENTS:
            try:
                raw = replay.preview(analysis.transcript)
                # Read back from a file, as `verdicts` does: never the repaired bytes whole.
                with analysis.repaired_file() as data:
                    fixed = formats.load(data, session.name, analysis.format)
                    repaired = replay.preview(fixed)
            except (replay.CannotPreview, formats.FormatError) as exc:
                context["cannot"] = str(exc)
                return render(request, "transcripts/resume_preview.html", context)
            assert raw is not None and repaired is not None
            context.update(
                raw=raw,
                repaired=repaired,
                sentences=replay.describe(raw, repaired, policy),
                # Both after the agent's own recovery: the session page's verdict is of
                # the file sent as it is, which this "accepted" may seem to contradict.
                sides=[
                    (f"As it is, once {raw.agent} has mended what it mends", raw),
                    (f"Repaired under {policy}", repaired),
                ],
            )
    return render(request, "transcripts/resume_preview.html", context)


@login_required
@require_GET
def session_compare(request: HttpRequest, pk: int) -> HttpResponse:
    """Show revision `a` (default 0, the upload) beside revision `b` (default the head).

    Runs of unchanged records collapse into one line unless `full=1`.
    """
    session = _session(request, pk)
    assert session.head is not None
    a = _revision_number(request, "a", 0)
    b = _revision_number(request, "b", session.head.number)
    revisions = {r.number: r for r in session.revisions.all()}
    if a not in revisions or b not in revisions:
        context: dict[str, Any] = {
            "title": "No such revision",
            "message": (
                f"{session.name} has revisions {', '.join(str(n) for n in sorted(revisions))}: "
                "choose two of them."
            ),
            "back_url": session.get_absolute_url(),
            "back_label": f"Back to {session.name}",
        }
        return render(request, "transcripts/bad_request.html", context, status=400)
    full = request.GET.get("full") == "1"
    context = {
        "session": session,
        "comparison": compare.compare(session, revisions[a], revisions[b], full=full),
        "revisions": sorted(revisions.values(), key=lambda r: r.number),
        "a": a,
        "b": b,
        "full": full,
    }
    return render(request, "transcripts/session_compare.html", context)


# Questions asked before what cannot be undone: a page of its own (no script),
# whose form posts to the action's view.


def _confirm(request: HttpRequest, **context: Any) -> HttpResponse:
    return render(request, "transcripts/confirm.html", context)


@login_required
@require_GET
def confirm_rollback(request: HttpRequest, pk: int) -> HttpResponse:
    """Ask before rolling a repair job back; say why not when it cannot be."""
    job = _job_for(request, pk, Membership.Role.EDITOR)
    blocker = actions.rollback_blocker(job)
    if blocker:
        messages.error(request, blocker)
        return redirect(job)
    repaired = job.items.filter(status=JobItem.Status.REPAIRED).count()
    return _confirm(
        request,
        title=f"Roll back job {job.pk}?",
        consequences=[
            (
                f"The session job {job.pk} repaired gets"
                if repaired == 1
                else f"Each of the {repaired} sessions job {job.pk} repaired gets"
            )
            + " the bytes it had before as a new head revision. A session changed since "
            "is left as it is and reported.",
            "A job can be rolled back once: the rollback itself cannot be rolled back.",
        ],
        question=f"Roll back job {job.pk}?",
        button="Roll back",
        action=reverse("transcripts:rollback_job", args=[job.pk]),
        cancel_url=job.get_absolute_url(),
    )


@login_required
@require_GET
def confirm_revoke_api_token(request: HttpRequest, pk: int) -> HttpResponse:
    """Ask before revoking an API token."""
    token = get_object_or_404(ApiToken.objects.for_user(request.user), pk=pk)
    if not Membership.has_role(request.user, token.workspace_id, Membership.Role.ADMIN):
        raise PermissionDenied
    if not token.is_active:
        messages.error(request, f"Token “{page_text(token.name)}” was already revoked.")
        return redirect("transcripts:api_tokens")
    return _confirm(
        request,
        title=f"Revoke the token “{page_text(token.name)}”?",
        consequences=[
            f"Every client that uses {token.prefix}… is refused from the moment it is revoked. "
            "A revoked token cannot be turned on again: a new one has a new secret.",
        ],
        question=f"Revoke “{page_text(token.name)}”?",
        button="Revoke",
        action=reverse("transcripts:revoke_api_token", args=[token.pk]),
        cancel_url=reverse("transcripts:api_tokens"),
    )


# Deleting sessions: editors and up, asked first, audited.


def _editable_session(request: HttpRequest, pk: int) -> Session:
    session = _session(request, pk)
    if not Membership.has_role(request.user, session.workspace_id, Membership.Role.EDITOR):
        raise PermissionDenied
    return session


def _policies_page(
    request: HttpRequest, form: WorkspacePolicyForm | None = None, status: int = 200
) -> HttpResponse:
    workspaces = Workspace.objects.for_user(request.user)
    rows = WorkspacePolicy.objects.filter(workspace__in=workspaces).select_related("workspace")
    context = {
        "form": form or WorkspacePolicyForm(user=request.user),
        "policies": rows,
        "presets": PRESETS.values(),
    }
    return render(request, "transcripts/policies.html", context, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def delete_session(request: HttpRequest, pk: int) -> HttpResponse:
    """Ask (GET), then delete (POST) a session: gone from every list, kept in the audit trail."""
    session = _editable_session(request, pk)
    if request.method == "POST":
        try:
            actions.do_delete_sessions([session], acting_user=request.user)
        except actions.CannotDelete as exc:
            messages.error(request, str(exc))
            return redirect(session)
        messages.success(request, f"Deleted {session.name}.")
        return redirect("transcripts:session_list")
    count = session.revisions.count()
    return _confirm(
        request,
        title=f"Delete {session.name}?",
        consequences=[
            (
                "Its one revision and its stored bytes are"
                if count == 1
                else f"Its {count} revisions and their stored bytes are"
            )
            + " removed (bytes another session shares stay); it leaves every list, job and the "
            "API.",
            "Its audit trail stays, with a record of this deletion. This cannot be undone.",
        ],
        question=f"Delete {session.name}?",
        button="Delete",
        action=reverse("transcripts:delete_session", args=[session.pk]),
        cancel_url=session.get_absolute_url(),
    )


def _unreadable_uploads(request: HttpRequest) -> QuerySet[Session]:
    return (
        Session.objects.for_user(request.user, Membership.Role.EDITOR)
        .filter(source__isnull=True)
        .exclude(error="")
    )


def policies(request: HttpRequest) -> HttpResponse:
    """List the presets and the workspaces' own policies; POST creates one (editors)."""
    if request.method == "GET":
        return _policies_page(request)
    form = WorkspacePolicyForm(request.POST, user=request.user)
    if not form.is_valid():
        return _policies_page(request, form, status=400)
    return _save_policy(request, form)


@login_required
@require_http_methods(["GET", "POST"])
def dismiss_unreadable(request: HttpRequest) -> HttpResponse:
    """Ask (GET), then delete (POST) every upload that could not be read as a session.

    Editors only (of the workspaces whose uploads go); anyone else gets a 403.
    """
    if not Workspace.objects.for_user(request.user, Membership.Role.EDITOR).exists():
        raise PermissionDenied
    unreadable = _unreadable_uploads(request)
    if request.method == "POST":
        try:
            count = actions.do_delete_sessions(list(unreadable), acting_user=request.user)
        except actions.CannotDelete as exc:
            messages.error(request, str(exc))
        else:
            messages.success(request, f"Dismissed {count} unreadable upload{pluralize(count)}.")
        return redirect("transcripts:session_list")
    names = list(unreadable.order_by("name").values_list("name", flat=True)[:20])
    if not names:
        messages.error(request, "There are no unreadable uploads to dismiss.")
        return redirect("transcripts:session_list")
    total = unreadable.count()
    return _confirm(
        request,
        title=f"Dismiss {total} unreadable upload{pluralize(total)}?",
        consequences=[
            "Files Pairfix could not read as any session format: "
            + ", ".join(names)
            + (f" and {total - len(names)} more" if total > len(names) else "")
            + ".",
            "They are deleted with their stored bytes; the audit trail keeps a record of each. "
            "This cannot be undone.",
        ],
        question=f"Dismiss {total} unreadable upload{pluralize(total)}?",
        button="Dismiss",
        action=reverse("transcripts:dismiss_unreadable"),
        cancel_url=reverse("transcripts:session_list"),
    )


# Search across sessions, by content.


@login_required
@require_GET
def content_search(request: HttpRequest) -> HttpResponse:
    """Show the records of the user's sessions whose text, tool names or ids hold every word."""
    # A pasted provider error fits (its ids may come last); only its words are searched.
    q = request.GET.get("q", "").strip()[: search.MAX_QUERY]
    mine = Session.objects.for_user(request.user)
    hits = search.search(q, mine) if q else []
    sessions = mine.in_bulk({hit.session_id for hit in hits})
    shown = [(sessions[hit.session_id], hit) for hit in hits if hit.session_id in sessions]
    context = {
        "q": q,
        "hits": shown,
        "words": search.words(q),
        "ids": search.pasted_ids(q)[: search.MAX_WORDS],
        "cut": search.word_count(q) > search.MAX_WORDS,
        "unindexed": actions.unindexed(mine).count(),
    }
    return render(request, "transcripts/search.html", context)


# At most this many builds are queued per click; the page says how many remain.
INDEX_BATCH = 500


@login_required
@require_POST
def index_sessions(request: HttpRequest) -> HttpResponse:
    """Queue the timeline builds that index the user's sessions not yet in the search."""
    waiting = actions.unindexed(Session.objects.for_user(request.user)).select_related("head")
    queued = actions.queue_index(waiting.order_by("-pk")[:INDEX_BATCH])
    messages.success(
        request,
        f"{queued} session{pluralize(queued)} queued for indexing; "
        "they are searchable once the workers have built them.",
    )
    # Back to the search that was being made, if any.
    q = request.POST.get("q", "").strip()[: search.MAX_QUERY]
    back = reverse("transcripts:content_search")
    return redirect(f"{back}?{urlencode({'q': q})}" if q else back)


def policy_edit(request: HttpRequest, pk: int) -> HttpResponse:
    """Show a workspace policy in its form; POST changes it (editors of its workspace)."""
    row = get_object_or_404(
        WorkspacePolicy.objects.filter(workspace__in=Workspace.objects.for_user(request.user)),
        pk=pk,
    )
    if request.method == "GET":
        return _policies_page(request, WorkspacePolicyForm(user=request.user, instance=row))
    if not Membership.has_role(request.user, row.workspace_id, Membership.Role.EDITOR):
        raise PermissionDenied
    form = WorkspacePolicyForm(request.POST, user=request.user, instance=row)
    if not form.is_valid():
        return _policies_page(request, form, status=400)
    return _save_policy(request, form)


def _save_policy(request: HttpRequest, form: WorkspacePolicyForm) -> HttpResponse:
    data = form.cleaned_data
    clash = WorkspacePolicy.objects.filter(workspace=data["workspace"], name=data["name"])
    if form.instance is not None:
        clash = clash.exclude(pk=form.instance.pk)
    if clash.exists():
        form.add_error("name", "The workspace already has a policy of that name.")
        return _policies_page(request, form, status=400)
    actions.do_save_workspace_policy(
        data["workspace"],
        data["name"],
        data["actions"],
        data["synthetic_text"],
        data["description"],
        instance=form.instance,
        acting_user=request.user,
    )
    return redirect("transcripts:policies")
