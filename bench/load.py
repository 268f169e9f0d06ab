"""Locust users for the load test: log in, then browse sessions and their timelines.

Run through bench/run_load.py, which starts gunicorn on demo data and runs
locust headless against it; alone:

    .venv/bin/locust -f bench/load.py --headless -u 50 -r 10 -t 2m --host http://127.0.0.1:8765

Each user logs in as the demo user and, with one to three seconds between
pages, opens the session list (a page of it, or filtered), a session's page,
its timeline under another policy as htmx asks for it, the next window of
rows as scrolling asks for it, and the audit trail.
A response that is not 200, or a page without what it should show, counts
as a failure.
"""

from __future__ import annotations

import random
import re
from typing import Any

from locust import HttpUser, between, task

USERNAME = "demo"
PASSWORD = "pairfix-demo"
POLICIES = ["synthesize", "discard", "native", "openmaic", "openclaw"]
_CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
_SESSION = re.compile(r'href="/sessions/(\d+)/"')


class Browser(HttpUser):
    """One person reading sessions in the dashboard."""

    wait_time = between(1, 3)
    session_ids: list[str]

    def on_start(self) -> None:
        login = self.client.get("/accounts/login/", name="/accounts/login/")
        match = _CSRF.search(login.text)
        assert match, "no CSRF token on the login page"
        self.client.post(
            "/accounts/login/",
            {"username": USERNAME, "password": PASSWORD, "csrfmiddlewaretoken": match[1]},
            headers={"Referer": self.host + "/accounts/login/"},
            name="/accounts/login/ [POST]",
        )
        self.session_ids = []
        self.session_list()

    def _get(self, url: str, name: str, expect: str, **kwargs: Any) -> str:
        with self.client.get(url, name=name, catch_response=True, **kwargs) as response:
            if response.status_code != 200:
                response.failure(f"status {response.status_code} {response.error or ''}".strip())
            elif expect not in response.text:
                response.failure(f"{expect!r} is not on the page")
            return str(response.text)

    @task(2)
    def session_list(self) -> None:
        text = self._get("/", "/ (session list)", "Stored sessions")
        self.session_ids = sorted(set(_SESSION.findall(text))) or self.session_ids

    @task(1)
    def session_list_filtered(self) -> None:
        self._get("/?fault=missing_result", "/?fault= (filtered list)", "match the filter")

    @task(5)
    def session_page(self) -> None:
        if self.session_ids:
            pk = random.choice(self.session_ids)
            self._get(f"/sessions/{pk}/", "/sessions/[id]/", 'id="timeline"')

    @task(3)
    def timeline_under_another_policy(self) -> None:
        if self.session_ids:
            pk = random.choice(self.session_ids)
            self._get(
                f"/sessions/{pk}/?policy={random.choice(POLICIES)}",
                "/sessions/[id]/?policy= (htmx timeline)",
                'id="timeline"',
                headers={"HX-Request": "true"},
            )

    @task(3)
    def next_window(self) -> None:
        """Scroll: the rows after the first window, as htmx asks when they come into view."""
        if self.session_ids:
            pk = random.choice(self.session_ids)
            with self.client.get(
                f"/sessions/{pk}/rows/?after={random.choice([49, 99, 149])}",
                name="/sessions/[id]/rows/?after= (next window)",
                headers={"HX-Request": "true"},
                catch_response=True,
            ) as response:
                # 204: the session ends before that row.
                if response.status_code not in (200, 204):
                    response.failure(f"status {response.status_code} {response.error or ''}")

    @task(1)
    def audit_trail(self) -> None:
        self._get("/audit/", "/audit/", "Audit")
