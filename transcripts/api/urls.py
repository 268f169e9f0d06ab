"""The API's URLs, under /api/. Ids are at most 18 digits: a larger one names nothing.

Every view is exempt from the dashboard's login (a token authenticates
instead), and any other path under /api/ is a JSON 404.
"""

from __future__ import annotations

from typing import Any

from csp.constants import UNSAFE_INLINE
from csp.decorators import csp_update
from django.contrib.auth.decorators import login_not_required
from django.urls import path, re_path, register_converter
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.views import SpectacularJSONAPIView, SpectacularSwaggerSplitView

from transcripts.api import errors, policies, views

app_name = "api"


class IdConverter:
    """A database id or revision number: 1 to 18 digits, so it always fits 64 bits."""

    regex = "[0-9]{1,18}"

    def to_python(self, value: str) -> int:
        return int(value)

    def to_url(self, value: int) -> str:
        return str(value)


register_converter(IdConverter, "id")


def _public(view: Any) -> Any:
    return login_not_required(view)


# Swagger UI injects a <style> element; its page shows no transcript content, so
# it alone may have inline styles. Its scripts stay 'self' only.
_docs_csp = csp_update({"style-src": [UNSAFE_INLINE]})


urlpatterns = [
    path("schema", _public(SpectacularJSONAPIView.as_view()), name="schema"),
    path(
        "docs",
        _public(_docs_csp(SpectacularSwaggerSplitView.as_view(url_name="api:schema"))),
        name="docs",
    ),
    path("sessions", _public(views.SessionList.as_view()), name="sessions"),
    path("sessions/<id:pk>", _public(views.SessionDetail.as_view()), name="session"),
    path("sessions/<id:pk>/faults", _public(views.SessionFaults.as_view()), name="faults"),
    path("sessions/<id:pk>/records", _public(views.SessionRecords.as_view()), name="records"),
    path(
        "sessions/<id:pk>/resume-preview",
        _public(views.SessionResumePreview.as_view()),
        name="resume_preview",
    ),
    path("sessions/<id:pk>/repair", _public(views.SessionRepair.as_view()), name="repair"),
    path("sessions/<id:pk>/revisions", _public(views.RevisionList.as_view()), name="revisions"),
    path(
        "sessions/<id:pk>/revisions/<id:number>/content",
        _public(views.RevisionContent.as_view()),
        name="revision_content",
    ),
    path("jobs", _public(views.JobList.as_view()), name="jobs"),
    path("jobs/<id:pk>", _public(views.JobDetail.as_view()), name="job"),
    path("jobs/<id:pk>/rollback", _public(views.JobRollback.as_view()), name="job_rollback"),
    path("jobs/<id:pk>/apply", _public(views.JobApply.as_view()), name="job_apply"),
    path("jobs/<id:pk>/archive", _public(views.JobArchive.as_view()), name="job_archive"),
    path("policies", _public(policies.PolicyList.as_view()), name="policies"),
    path("policies/<id:pk>", _public(policies.PolicyDetail.as_view()), name="policy"),
    re_path(r"", _public(csrf_exempt(errors.not_found)), name="api_not_found"),
]
