from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("", include("transcripts.urls")),
    path("api/", include("transcripts.api.urls")),
    path("accounts/", include("django.contrib.auth.urls")),
    path("admin/", admin.site.urls),
]
