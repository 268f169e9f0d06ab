"""Views: small functions, every queryset scoped to the user's workspaces.

A page that htmx updates renders its fragment (`page.html#fragment`) when the
request comes from htmx, and the whole page otherwise: one template for both.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.http import content_disposition_header
from django.views.decorators.http import require_GET, require_POST

from transcripts import actions
from transcripts.core.model import FaultKind
from transcripts.engine import PRESETS
from transcripts.forms import PolicyForm, RepairForm, UploadForm, policy_choices
from transcripts.models import Job, Session


def _attachment(data: bytes, filename: str) -> HttpResponse:
    # octet-stream: the bytes go out exactly as stored, whatever the file claims to be.
    response = HttpResponse(data, content_type="application/octet-stream")
    response["Content-Disposition"] = content_disposition_header(True, filename)
    return response


def _unknown_policy(request: HttpRequest, session: Session) -> HttpResponse:
    context = {
        "title": "Unknown policy",
        "message": (
            f"There is no policy named “{request.GET.get('policy', '')}”. "
            f"The policies are: {', '.join(name for name, _ in policy_choices())}."
        ),
        "back_url": session.get_absolute_url(),
        "back_label": f"Back to {session.name}",
    }
    return render(request, "transcripts/bad_request.html", context, status=400)


def _session_list_page(
    request: HttpRequest,
    upload_form: UploadForm | None = None,
    repair_form: RepairForm | None = None,
    status: int = 200,
) -> HttpResponse:
    sessions = Session.objects.for_user(request.user).select_related("workspace")
    fault = request.GET.get("fault", "")
    if fault:
        sessions = sessions.with_fault(fault)
    context = {
        "sessions": sessions,
        "fault": fault,
        "fault_kinds": [str(kind) for kind in FaultKind],
        "upload_form": upload_form or UploadForm(user=request.user),
        "repair_form": repair_form or RepairForm(user=request.user),
        "jobs": Job.objects.for_user(request.user).select_related("workspace")[:5],
    }
    return render(request, "transcripts/session_list.html", context, status=status)


@login_required
@require_GET
def session_list(request: HttpRequest) -> HttpResponse:
    """Show the user's sessions with their fault counts, the upload and the bulk repair forms."""
    return _session_list_page(request)


@login_required
@require_POST
def upload(request: HttpRequest) -> HttpResponse:
    """Store each uploaded file as a new session (revision 0 = its exact bytes)."""
    form = UploadForm(request.POST, request.FILES, user=request.user)
    if not form.is_valid():
        return _session_list_page(request, upload_form=form, status=400)
    sessions = [
        actions.do_ingest_session(
            form.cleaned_data["workspace"], f.name, f.read(), acting_user=request.user
        )
        for f in form.cleaned_data["files"]
    ]
    if len(sessions) == 1:
        return redirect(sessions[0])
    messages.success(request, f"Uploaded {len(sessions)} sessions.")
    return redirect("transcripts:session_list")


@login_required
@require_GET
def session_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """Show the raw and repaired timelines side by side under the chosen policy."""
    session = get_object_or_404(
        Session.objects.for_user(request.user).select_related("head", "workspace"), pk=pk
    )
    form = PolicyForm(request.GET)
    if not form.is_valid():
        return _unknown_policy(request, session)
    policy = form.cleaned_data["policy"]
    assert session.head is not None
    context = {
        "session": session,
        "policy": policy,
        "policy_form": PolicyForm(initial={"policy": policy}),
        "policy_description": PRESETS[policy].description,
        "analysis": actions.analyze_revision(session.head, policy),
        "revisions": session.revisions.select_related("created_by").order_by("number"),
    }
    template = "transcripts/session_detail.html"
    if request.htmx:
        template += "#timeline"
    return render(request, template, context)


@login_required
@require_GET
def download_revision(request: HttpRequest, pk: int, number: int) -> HttpResponse:
    """Return the exact bytes of one revision (number 0 is the upload) as the session's file."""
    session = get_object_or_404(Session.objects.for_user(request.user), pk=pk)
    revision = get_object_or_404(session.revisions, number=number)
    return _attachment(revision.read(), session.name)


@login_required
@require_GET
def download_repaired(request: HttpRequest, pk: int) -> HttpResponse:
    """Return the head revision repaired under the chosen policy, named like the upload."""
    session = get_object_or_404(
        Session.objects.for_user(request.user).select_related("head"), pk=pk
    )
    form = PolicyForm(request.GET)
    if not form.is_valid():
        return _unknown_policy(request, session)
    assert session.head is not None
    analysis = actions.analyze_revision(session.head, form.cleaned_data["policy"])
    return _attachment(analysis.repaired, session.name)


@login_required
@require_POST
def start_repair(request: HttpRequest) -> HttpResponse:
    """Start a bulk repair job for the selected sessions under the chosen policy."""
    form = RepairForm(request.POST, user=request.user)
    if not form.is_valid():
        return _session_list_page(request, repair_form=form, status=400)
    sessions = form.cleaned_data["sessions"]
    job = actions.do_start_repair_job(
        sessions[0].workspace, sessions, form.cleaned_data["policy"], acting_user=request.user
    )
    return redirect(job)


@login_required
@require_GET
def job_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """Show a job's progress (polled by htmx while it runs), its items and audit records."""
    job = get_object_or_404(Job.objects.for_user(request.user), pk=pk)
    context = {
        "job": job,
        "items": job.items.select_related("session", "revision"),
        "audit": job.audit.select_related("session", "revision_from", "revision_to"),
    }
    template = "transcripts/job_detail.html"
    if request.htmx:
        template += "#progress"
    return render(request, template, context)
