"""What a web or worker process loads as it starts: not what it will never use (issue 15).

Each module a process imports stays in its memory for good; a 1 GB session
must be ingested and repaired in 150 MB a process, most of which the start
would take otherwise.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from django.conf import settings

S3 = ("boto3", "botocore", "s3transfer", "storages")


def _modules_after(code: str, **env: str) -> set[str]:
    """Return the modules a fresh process has loaded once `code` has run."""
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in ("STORAGE_URL", "AWS_STORAGE_BUCKET_NAME", "CELERY_SKIP_CHECKS")
    }
    result = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport json, sys; print(json.dumps(sorted(sys.modules)))"],
        cwd=settings.BASE_DIR,
        env={**base, "DJANGO_SETTINGS_MODULE": "project.settings", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return set(json.loads(result.stdout.splitlines()[-1]))


def _top(modules: set[str]) -> set[str]:
    return {name.split(".")[0] for name in modules}


WEB = "from django.urls import get_resolver\nimport project.wsgi\nget_resolver().url_patterns"
# What `celery worker` does before it takes a task: the Django fixup's setup (and
# checks, unless skipped) and the tasks' modules.
WORKER = "from project.celery import app\napp.loader.import_default_modules()"


def test_a_web_process_on_local_storage_never_loads_the_s3_client() -> None:
    modules = _modules_after(WEB)
    assert "transcripts.views" in modules and "transcripts.api.views" in modules
    assert not _top(modules) & set(S3)


def test_a_web_process_on_s3_loads_the_s3_storage() -> None:
    modules = _modules_after(WEB, STORAGE_URL="s3://key:secret@bucket")
    assert {"transcripts.storage", "botocore", "storages"} <= modules


def test_a_worker_loads_its_tasks_but_no_page_nor_the_s3_client() -> None:
    modules = _modules_after(WORKER)
    assert {"transcripts.tasks", "transcripts.actions.runner"} <= modules
    # Celery's system checks would import the URLconf: views, forms and the API schema.
    assert not modules & {"transcripts.urls", "transcripts.views", "transcripts.api.urls"}
    assert not modules & {"drf_spectacular.openapi", "rest_framework.views", "django.test"}
    assert not _top(modules) & set(S3)


def test_manage_py_ingest_checks_the_models_but_loads_no_page() -> None:
    # Django's own start of the command (its checks), with the storing left out.
    modules = _modules_after(
        "import django\ndjango.setup()\n"
        "from transcripts.management.commands.ingest import Command\n"
        "Command.handle = lambda self, *args, **options: None\n"
        "Command().run_from_argv(['manage.py', 'ingest', 'session.jsonl'])"
    )
    assert "django.core.checks.model_checks" in modules
    assert not modules & {"transcripts.urls", "transcripts.views", "transcripts.api.urls"}
