import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "url",
    [
        reverse("transcripts:session_list"),
        reverse("transcripts:session_detail", args=[1]),
        reverse("transcripts:download_revision", args=[1, 0]),
        reverse("transcripts:download_repaired", args=[1]),
        reverse("transcripts:job_detail", args=[1]),
        reverse("admin:index"),
    ],
)
def test_it_redirects_anonymous_users_to_login(client, url):
    response = client.get(url)
    assert response.status_code == 302
    assert response.url.startswith("/accounts/login/") or response.url.startswith("/admin/login/")


def test_it_logs_in(client, alice):
    response = client.post(reverse("login"), {"username": "alice", "password": "alice-password"})
    assert response.status_code == 302
    assert response.url == reverse("transcripts:session_list")
