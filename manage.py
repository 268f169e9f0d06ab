#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""

import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

    try:
        # Read now: a bad value (settings.py names its variable) stops here in one line,
        # not in a traceback from wherever Django first reads a setting.
        settings.INSTALLED_APPS  # noqa: B018
    except ImproperlyConfigured as exc:
        sys.exit(f"manage.py: {exc}")
    execute_from_command_line(sys.argv)
