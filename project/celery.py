"""The Celery app: configured from Django settings (CELERY_* names), tasks autodiscovered."""

import os
from typing import Any

from celery import Celery
from celery.signals import setup_logging
from django_structlog.celery.steps import DjangoStructLogInitStep

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

app = Celery("pairfix")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# Task logs carry the task id, and the request id of the request that sent the task.
app.steps["worker"].add(DjangoStructLogInitStep)


@setup_logging.connect
def keep_django_logging(**kwargs: Any) -> None:
    """Keep the structured logging Django set up (settings.LOGGING) instead of Celery's own."""
