from django.contrib import admin
from django.urls import include, path

from transcripts.health import healthz

# A request that fails because the database or the task queue is down is a 503 naming it.
handler500 = "transcripts.outages.server_error"

urlpatterns = [
    path("", include("transcripts.urls")),
    path("healthz", healthz, name="healthz"),
    path("api/", include("transcripts.api.urls")),
    path("accounts/", include("transcripts.accounts")),
    path("admin/", admin.site.urls),
]
