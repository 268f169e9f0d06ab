import json
import os
import socket
import subprocess
import sys
import tempfile
import threading

import pytest
from django.conf import settings as django_settings
from django.contrib.auth.password_validation import validate_password
from django.core import mail
from django.core.exceptions import ValidationError
from django.urls import reverse

pytestmark = pytest.mark.django_db

LOGIN = reverse("login")
ADMIN_LOGIN = reverse("admin:login")


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
    response = client.post(LOGIN, {"username": "alice", "password": "alice-password"})
    assert response.status_code == 302
    assert response.url == reverse("transcripts:session_list")


def test_the_login_page_says_how_to_get_an_account(client):
    page = client.get(LOGIN).content.decode()
    assert "No account? There is no sign-up" in page
    assert "<code>python manage.py createsuperuser</code> makes the first account" in page


def _log_in(client, url, username, password):
    return client.post(url, {"username": username, "password": password})


@pytest.fixture
def fast_hash(settings):
    """Hash passwords with MD5 in the lockout tests: each failed login hashes once."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def carol(fast_hash, django_user_model):
    return django_user_model.objects.create_user("carol", password="carol-password")


@pytest.mark.parametrize("url", [LOGIN, ADMIN_LOGIN])
def test_it_locks_a_username_out_after_five_wrong_passwords(
    client, fast_hash, django_user_model, url
):
    django_user_model.objects.create_superuser("root", password="root-password")
    for _ in range(4):
        assert _log_in(client, url, "root", "guess").status_code == 200
    locked = _log_in(client, url, "root", "guess")
    assert locked.status_code == 429
    # The right password no longer helps, on either login page.
    for page in (LOGIN, ADMIN_LOGIN):
        response = _log_in(client, page, "root", "root-password")
        assert response.status_code == 429
        html = response.content.decode()
        assert "Too many failed logins" in html
        assert "“root” failed to log in 5 times from this address" in html
        assert "0:15:00" in html
    assert "_auth_user_id" not in client.session


def test_a_lockout_binds_one_address_only(client, carol):
    for _ in range(5):
        _log_in(client, LOGIN, "carol", "guess")
    assert _log_in(client, LOGIN, "carol", "carol-password").status_code == 429
    elsewhere = client.post(
        LOGIN, {"username": "carol", "password": "carol-password"}, REMOTE_ADDR="192.0.2.7"
    )
    assert elsewhere.status_code == 302


def test_a_success_forgets_the_failures(client, carol):
    for _ in range(4):
        _log_in(client, LOGIN, "carol", "guess")
    assert _log_in(client, LOGIN, "carol", "carol-password").status_code == 302
    client.logout()
    for _ in range(4):
        assert _log_in(client, LOGIN, "carol", "guess").status_code == 200
    assert _log_in(client, LOGIN, "carol", "carol-password").status_code == 302


@pytest.mark.parametrize(
    ("password", "message"),
    [
        ("12345678", "This password is too common."),
        ("1234567890123", "This password is entirely numeric."),
        ("short", "This password is too short."),
        ("alice-pw", "The password is too similar to the username."),
    ],
)
def test_it_refuses_weak_passwords(alice, password, message):
    with pytest.raises(ValidationError) as refused:
        validate_password(password, alice)
    assert message in " ".join(refused.value.messages)


def test_a_password_change_refuses_a_common_password(client, alice):
    client.force_login(alice)
    response = client.post(
        reverse("password_change"),
        {
            "old_password": "alice-password",
            "new_password1": "12345678",
            "new_password2": "12345678",
        },
    )
    assert response.status_code == 200
    assert "This password is too common." in response.content.decode()
    alice.refresh_from_db()
    assert alice.check_password("alice-password")


# Password reset: served only when mail can be sent.


@pytest.mark.parametrize(
    "url",
    [
        reverse("password_reset"),
        reverse("password_reset_done"),
        reverse("password_reset_complete"),
        reverse("password_reset_confirm", args=["MQ", "set-password"]),
    ],
)
def test_without_mail_the_reset_pages_are_not_served(client, settings, url):
    settings.PASSWORD_RESET_ENABLED = False
    assert client.get(url).status_code == 404
    assert "Forgot your password?" not in client.get(LOGIN).content.decode()


def test_with_mail_a_user_resets_their_password(client, settings, alice):
    settings.PASSWORD_RESET_ENABLED = True
    alice.email = "alice@example.com"
    alice.save()
    login_page = client.get(LOGIN).content.decode()
    assert f'href="{reverse("password_reset")}"' in login_page

    response = client.post(reverse("password_reset"), {"email": "alice@example.com"})
    assert response.status_code == 302
    [message] = mail.outbox
    assert message.to == ["alice@example.com"]
    assert message.subject == "Reset your Pairfix password"
    assert message.from_email == settings.DEFAULT_FROM_EMAIL
    link = next(line for line in message.body.splitlines() if "/accounts/reset/" in line)
    path = link.split("testserver", 1)[1]

    form = client.get(path, follow=True)
    assert "Choose a new password" in form.content.decode()
    weak = client.post(
        form.redirect_chain[-1][0], {"new_password1": "12345678", "new_password2": "12345678"}
    )
    assert "This password is too common." in weak.content.decode()
    done = client.post(
        form.redirect_chain[-1][0],
        {"new_password1": "a-much-better-password", "new_password2": "a-much-better-password"},
    )
    assert done.status_code == 302
    alice.refresh_from_db()
    assert alice.check_password("a-much-better-password")
    # A link works once.
    assert (
        "This link has been used or has expired" in client.get(path, follow=True).content.decode()
    )


def test_an_unknown_address_gets_the_same_answer_and_no_mail(client, settings, alice):
    settings.PASSWORD_RESET_ENABLED = True
    response = client.post(reverse("password_reset"), {"email": "nobody@example.com"})
    assert (response.status_code, response.url) == (302, reverse("password_reset_done"))
    assert mail.outbox == []


def _mail_settings(**env):
    code = (
        "import json, django; from django.conf import settings; django.setup(); "
        "print(json.dumps([settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_HOST_USER, "
        "settings.EMAIL_USE_TLS, settings.EMAIL_USE_SSL, settings.DEFAULT_FROM_EMAIL, "
        "settings.PASSWORD_RESET_ENABLED]))"
    )
    base = {k: v for k, v in os.environ.items() if not k.startswith(("EMAIL_", "DEFAULT_FROM"))}
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=django_settings.BASE_DIR,
        env={**base, "DJANGO_SETTINGS_MODULE": "project.settings", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_mail_is_configured_from_the_environment():
    result = _mail_settings(
        EMAIL_HOST="smtp.example.com",
        EMAIL_PORT="465",
        EMAIL_HOST_USER="pairfix",
        EMAIL_USE_SSL="True",
        DEFAULT_FROM_EMAIL="Pairfix <pairfix@example.com>",
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[-1]) == [
        "smtp.example.com",
        465,
        "pairfix",
        False,
        True,
        "Pairfix <pairfix@example.com>",
        True,
    ]
    unset = json.loads(_mail_settings().stdout.splitlines()[-1])
    assert (unset[0], unset[-1]) == ("", False)


def test_it_refuses_tls_and_ssl_at_once():
    result = _mail_settings(
        EMAIL_HOST="smtp.example.com", EMAIL_USE_TLS="True", EMAIL_USE_SSL="True"
    )
    assert result.returncode != 0
    assert "EMAIL_USE_TLS and EMAIL_USE_SSL cannot both be True" in result.stderr


class _SmtpServer(threading.Thread):
    """A minimal SMTP server on 127.0.0.1 that keeps the messages it is sent (one session)."""

    def __init__(self):
        super().__init__(daemon=True)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(60)
        self.port = self.listener.getsockname()[1]
        self.messages: list[bytes] = []
        self.envelope: list[str] = []

    def run(self):
        with self.listener:
            connection, _ = self.listener.accept()
        with connection, connection.makefile("rb") as lines:
            connection.settimeout(60)
            connection.sendall(b"220 localhost ESMTP\r\n")
            while line := lines.readline():
                command = line.decode().strip()
                verb = command.split(" ", 1)[0].upper()
                if verb in ("EHLO", "HELO"):
                    connection.sendall(b"250 localhost\r\n")
                elif verb in ("MAIL", "RCPT"):
                    self.envelope.append(command)
                    connection.sendall(b"250 OK\r\n")
                elif verb == "DATA":
                    connection.sendall(b"354 End with .\r\n")
                    body = b""
                    while (data := lines.readline()) not in (b".\r\n", b""):
                        body += data
                    self.messages.append(body)
                    connection.sendall(b"250 OK\r\n")
                elif verb == "QUIT":
                    connection.sendall(b"221 Bye\r\n")
                    return
                else:
                    connection.sendall(b"250 OK\r\n")


def test_a_reset_mail_goes_out_through_the_configured_server():
    server = _SmtpServer()
    server.start()
    code = (
        "import django; django.setup(); from django.contrib.auth.forms import "
        "PasswordResetForm; from django.contrib.auth.models import User; "
        "from django.core.management import call_command; "
        "call_command('migrate', verbosity=0); "
        "User.objects.create_user('dora', 'dora@example.com', 'dora-password'); "
        "form = PasswordResetForm({'email': 'dora@example.com'}); assert form.is_valid(); "
        "form.save(domain_override='pairfix.example.com', "
        "subject_template_name='registration/password_reset_subject.txt', "
        "email_template_name='registration/password_reset_email.html')"
    )
    with tempfile.TemporaryDirectory() as var:
        result = subprocess.run(
            [sys.executable, "-c", code],
            cwd=django_settings.BASE_DIR,
            env={
                **{k: v for k, v in os.environ.items() if k != "DATABASE_URL"},
                "DJANGO_SETTINGS_MODULE": "project.settings",
                "VAR_DIR": var,
                "EMAIL_HOST": "127.0.0.1",
                "EMAIL_PORT": str(server.port),
                "EMAIL_USE_TLS": "False",
                "DEFAULT_FROM_EMAIL": "pairfix@example.com",
            },
            capture_output=True,
            text=True,
            timeout=120,
        )
    server.join(timeout=60)
    assert result.returncode == 0, result.stderr
    assert [line.upper() for line in server.envelope] == [
        "MAIL FROM:<PAIRFIX@EXAMPLE.COM>",
        "RCPT TO:<DORA@EXAMPLE.COM>",
    ]
    [message] = server.messages
    text = message.decode()
    assert "Subject: Reset your Pairfix password" in text
    assert "http://pairfix.example.com/accounts/reset/" in text
