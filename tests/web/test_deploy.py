"""Production settings come from the environment, and Django's deploy checks pass with them."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys

import pytest
from django.conf import settings

PRODUCTION = {
    "DEBUG": "False",
    "SECRET_KEY": secrets.token_urlsafe(50),
    "ALLOWED_HOSTS": "pairfix.example.com",
    "CSRF_TRUSTED_ORIGINS": "https://pairfix.example.com",
}
SHOWN = [
    "DEBUG",
    "ALLOWED_HOSTS",
    "SECURE_SSL_REDIRECT",
    "SESSION_COOKIE_SECURE",
    "CSRF_COOKIE_SECURE",
    "SECURE_HSTS_SECONDS",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS",
    "SECURE_HSTS_PRELOAD",
    "SECURE_PROXY_SSL_HEADER",
    "LOG_FORMAT",
]


def _run(args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    # Only what the process needs from this one: never this test run's DEBUG, nor what
    # the browser tests set for themselves (which the deploy checks rightly refuse).
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in PRODUCTION and k != "DJANGO_ALLOW_ASYNC_UNSAFE"
    }
    return subprocess.run(
        [sys.executable, *args],
        cwd=settings.BASE_DIR,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def _settings(**env: str) -> dict[str, object]:
    code = (
        "import json, django; from django.conf import settings; django.setup(); "
        f"print(json.dumps({{n: getattr(settings, n, None) for n in {SHOWN!r}}}))"
    )
    result = _run(["-c", code], DJANGO_SETTINGS_MODULE="project.settings", **env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


def test_check_deploy_reports_nothing_with_production_settings():
    result = _run(["manage.py", "check", "--deploy", "--fail-level", "DEBUG"], **PRODUCTION)
    assert result.returncode == 0, result.stderr
    assert "System check identified no issues (0 silenced)." in result.stdout
    # Nothing else is said: no library's start-up banner on every command.
    assert result.stderr == ""


def test_production_defaults_to_https_only():
    assert _settings(**PRODUCTION) == {
        "DEBUG": False,
        "ALLOWED_HOSTS": ["pairfix.example.com"],
        "SECURE_SSL_REDIRECT": True,
        "SESSION_COOKIE_SECURE": True,
        "CSRF_COOKIE_SECURE": True,
        "SECURE_HSTS_SECONDS": 31536000,
        "SECURE_HSTS_INCLUDE_SUBDOMAINS": True,
        "SECURE_HSTS_PRELOAD": True,
        "SECURE_PROXY_SSL_HEADER": None,
        "LOG_FORMAT": "json",
    }


def test_the_environment_overrides_each_security_setting():
    shown = _settings(
        **PRODUCTION,
        SECURE_SSL_REDIRECT="False",
        SESSION_COOKIE_SECURE="False",
        CSRF_COOKIE_SECURE="False",
        SECURE_HSTS_SECONDS="600",
        SECURE_HSTS_INCLUDE_SUBDOMAINS="False",
        SECURE_HSTS_PRELOAD="False",
        SECURE_PROXY_SSL_HEADER="X-Forwarded-Proto",
        LOG_FORMAT="console",
    )
    assert shown == {
        "DEBUG": False,
        "ALLOWED_HOSTS": ["pairfix.example.com"],
        "SECURE_SSL_REDIRECT": False,
        "SESSION_COOKIE_SECURE": False,
        "CSRF_COOKIE_SECURE": False,
        "SECURE_HSTS_SECONDS": 600,
        "SECURE_HSTS_INCLUDE_SUBDOMAINS": False,
        "SECURE_HSTS_PRELOAD": False,
        "SECURE_PROXY_SSL_HEADER": ["HTTP_X_FORWARDED_PROTO", "https"],
        "LOG_FORMAT": "console",
    }


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"DEBUG": "False"}, "SECRET_KEY must be set when DEBUG is False"),
        ({"SECURE_HSTS_SECONDS": "a year"}, "SECURE_HSTS_SECONDS must be an integer"),
        ({"SESSION_COOKIE_SECURE": "yes"}, "SESSION_COOKIE_SECURE must be True or False"),
        ({"LOG_FORMAT": "xml"}, "LOG_FORMAT must be json or console, not 'xml'"),
    ],
)
def test_a_bad_production_setting_stops_start_up(env, message):
    result = _run(["manage.py", "check"], **env)
    assert result.returncode != 0
    assert message in result.stderr
