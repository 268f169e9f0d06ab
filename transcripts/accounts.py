"""Logging in and out, password change, password reset where mail can be sent, invitations.

Password reset mails a link, so its pages are served only when settings
say how to send mail (`PASSWORD_RESET_ENABLED`, from `EMAIL_HOST`);
otherwise they are a 404 and the login page does not offer them.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required, login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import redirect, render
from django.urls import path
from django.views.decorators.http import require_http_methods

from transcripts import actions, invitations


class LoginView(auth_views.LoginView):
    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context: dict[str, Any] = super().get_context_data(**kwargs)
        context["password_reset_enabled"] = settings.PASSWORD_RESET_ENABLED
        return context


def _when_mail_is_set_up(
    view: Callable[..., HttpResponseBase],
) -> Callable[..., HttpResponseBase]:
    @login_not_required
    @wraps(view)
    def gated(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if not settings.PASSWORD_RESET_ENABLED:
            raise Http404("Password reset needs mail, and no mail server is configured.")
        return view(request, *args, **kwargs)

    return gated


@login_required
@require_http_methods(["GET", "POST"])
def accept_invitation(request: HttpRequest, secret: str) -> HttpResponse:
    """Show what an invitation offers; POST accepts it as the logged-in user.

    A link that was used, revoked or has expired is a 404, whichever it was.
    """
    invitation = invitations.find_open(secret)
    if invitation is None:
        context = {
            "title": "Invitation not valid",
            "message": "This invitation link was used, revoked or has expired: ask for a new one.",
            "back_url": "/",
            "back_label": "Back to Pairfix",
        }
        return render(request, "transcripts/bad_request.html", context, status=404)
    if request.method == "GET" and not invitations.creator_is_admin(invitation):
        context = {
            "title": "Invitation not valid",
            "message": invitations.CREATOR_GONE.format(workspace=invitation.workspace),
            "back_url": "/",
            "back_label": "Back to Pairfix",
        }
        return render(request, "transcripts/bad_request.html", context, status=403)
    if request.method == "POST":
        try:
            membership = actions.do_accept_invitation(invitation, acting_user=request.user)
        except (invitations.InvitationClosed, invitations.AlreadyMember) as exc:
            messages.error(request, str(exc))
        else:
            messages.success(
                request,
                f"You joined {membership.workspace} as {membership.get_role_display().lower()}.",
            )
        return redirect("transcripts:session_list")
    return render(request, "registration/invitation.html", {"invitation": invitation})


urlpatterns = [
    path("invitations/<str:secret>/", accept_invitation, name="accept_invitation"),
    path("login/", LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("password_change/", auth_views.PasswordChangeView.as_view(), name="password_change"),
    path(
        "password_change/done/",
        auth_views.PasswordChangeDoneView.as_view(),
        name="password_change_done",
    ),
    path(
        "password_reset/",
        _when_mail_is_set_up(auth_views.PasswordResetView.as_view()),
        name="password_reset",
    ),
    path(
        "password_reset/done/",
        _when_mail_is_set_up(auth_views.PasswordResetDoneView.as_view()),
        name="password_reset_done",
    ),
    path(
        "reset/<uidb64>/<token>/",
        _when_mail_is_set_up(auth_views.PasswordResetConfirmView.as_view()),
        name="password_reset_confirm",
    ),
    path(
        "reset/done/",
        _when_mail_is_set_up(auth_views.PasswordResetCompleteView.as_view()),
        name="password_reset_complete",
    ),
]
