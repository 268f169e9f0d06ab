"""The Celery app: configured from Django settings (CELERY_* names), tasks autodiscovered."""

import gc
import os
from typing import Any

from celery import Celery
from celery.signals import setup_logging, worker_process_init, worker_ready
from django_structlog.celery.steps import DjangoStructLogInitStep

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
# Celery's Django fixup runs the system checks as a worker starts; their URL checks import
# the whole URLconf (every view, form and the API schema), some 15 MB a worker never uses.
# Django runs no checks under WSGI either; `manage.py migrate` and `check` run them.
os.environ.setdefault("CELERY_SKIP_CHECKS", "1")

app = Celery("pairfix")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# Task logs carry the task id, and the request id of the request that sent the task.
app.steps["worker"].add(DjangoStructLogInitStep)


@setup_logging.connect
def keep_django_logging(**kwargs: Any) -> None:
    """Keep the structured logging Django set up (settings.LOGGING) instead of Celery's own."""


@worker_ready.connect
@worker_process_init.connect
def freeze_startup_objects(**kwargs: Any) -> None:
    """Leave the objects a worker made while starting out of every later garbage collection.

    Django, Celery and the app leave some 90,000 long-lived objects; the
    engine allocates and frees many small ones per session, and each full
    collection would walk the long-lived ones again (`gc.freeze`, Python's
    documented remedy; a prefork child freezes after its fork).
    """
    gc.freeze()
