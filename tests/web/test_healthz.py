"""`/healthz`: public, uncached JSON about the database, broker and storage; 503 when one fails."""

import pytest
from django.db import connection
from django.urls import reverse

URL = reverse("healthz")


@pytest.mark.django_db
def test_it_answers_without_login(client):
    response = client.get(URL)
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert {name: check["status"] for name, check in body["checks"].items()} == {
        "database": "ok",
        "broker": "ok",
        "storage": "ok",
    }
    assert all(check["ms"] >= 0 for check in body["checks"].values())
    assert "no-cache" in response["Cache-Control"]


@pytest.mark.django_db
def test_it_rejects_post(client):
    assert client.post(URL).status_code == 405


@pytest.mark.django_db
def test_it_reports_a_broker_it_cannot_reach(client, monkeypatch):
    # Nothing listens on port 1 of the loopback: the connection is refused at once.
    # Celery reads CELERY_BROKER_URL from the environment before its own settings.
    monkeypatch.setenv("CELERY_BROKER_URL", "redis://127.0.0.1:1/0")
    response = client.get(URL)
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "error"
    assert body["checks"]["database"]["status"] == "ok"
    assert body["checks"]["broker"]["status"] == "error"
    assert body["checks"]["broker"]["error"] == "OperationalError"
    assert body["checks"]["broker"]["ms"] < 5000
    # The public answer names no host or port.
    assert "127.0.0.1" not in response.content.decode()


@pytest.mark.django_db(transaction=True)
def test_it_reports_a_database_it_cannot_reach(client, tmp_path):
    name = connection.settings_dict["NAME"]
    connection.close()
    # A database that cannot exist: no such SQLite folder, no such PostgreSQL database.
    absent = tmp_path / "absent" / "db" if connection.vendor == "sqlite" else "pairfix_absent"
    connection.settings_dict["NAME"] = str(absent)
    try:
        response = client.get(URL)
    finally:
        connection.close()
        connection.settings_dict["NAME"] = name
    assert response.status_code == 503
    body = response.json()
    assert body["checks"]["database"] == {
        "status": "error",
        "error": "OperationalError",
        "ms": body["checks"]["database"]["ms"],
    }
    assert body["checks"]["broker"]["status"] == "ok"


@pytest.mark.django_db
def test_it_is_not_redirected_to_https(client, settings):
    settings.SECURE_SSL_REDIRECT = True
    assert client.get(URL).status_code == 200
    assert client.get(reverse("login")).status_code == 301
