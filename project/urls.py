from django.contrib import admin
from django.urls import include, path

from transcripts.health import healthz

urlpatterns = [
    path("", include("transcripts.urls")),
    path("healthz", healthz, name="healthz"),
    path("api/", include("transcripts.api.urls")),
    path("accounts/", include("transcripts.accounts")),
    path("admin/", admin.site.urls),
]
