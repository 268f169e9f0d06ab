import pytest

from tests.api.conftest import error_of
from transcripts.api import permissions

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "path", ["/api/nothing", "/api/sessions/", "/api/sessions/abc", "/api/sessions/-1"]
)
def test_an_unknown_path_is_a_json_404(api, path):
    assert error_of(api.get(path)) == (404, "not_found")


def test_an_id_too_large_for_the_database_is_a_404(api):
    assert error_of(api.get("/api/sessions/" + "9" * 19)) == (404, "not_found")
    assert error_of(api.get("/api/jobs/" + "9" * 18)) == (404, "not_found")


def test_an_unknown_path_needs_no_login(client):
    assert error_of(client.get("/api/nothing")) == (404, "not_found")


def test_a_method_not_allowed_is_json_and_says_what_is(api):
    response = api.delete("/api/sessions")
    assert error_of(response) == (405, "method_not_allowed")
    assert response["Allow"] == "GET, POST, HEAD, OPTIONS"


def test_malformed_json_is_a_bad_request(api):
    response = api.post("/api/jobs", "{not json", content_type="application/json")
    assert error_of(response) == (400, "bad_request")


def test_a_validation_error_names_each_field(api):
    # (A policy the workspace lacks is a 404, like any other row it lacks.)
    response = api.post("/api/jobs", {"kind": "shred", "force": "perhaps"}, format="json")
    assert error_of(response) == (400, "bad_request")
    fields = response.json()["error"]["fields"]
    assert set(fields) == {"kind", "force"}
    assert response.json()["error"]["message"].startswith("kind: ")


def test_an_unacceptable_accept_header_is_a_json_406(api):
    response = api.get("/api/sessions", HTTP_ACCEPT="text/csv")
    assert error_of(response) == (406, "not_acceptable")
    assert response["Content-Type"] == "application/json"


def test_an_unexpected_failure_is_a_logged_json_500(api, monkeypatch, caplog):
    def broken(request):
        raise RuntimeError("boom")

    monkeypatch.setattr(permissions, "sessions", broken)
    response = api.get("/api/sessions")
    assert error_of(response) == (500, "server_error")
    assert "boom" not in response.content.decode()
    assert "RuntimeError: boom" in caplog.text
