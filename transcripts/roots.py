"""Which folders may be synced: settings.SYNC_ROOTS, and within them a workspace's grants.

Checking a path reads the file system and the settings but writes nothing,
so the forms and the admin check a folder as it is typed without reaching
into the sync itself (`transcripts.sync`, which checks again when it adds
the source).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from django.conf import settings

if TYPE_CHECKING:
    from transcripts.models import Workspace


class SyncError(Exception):
    """A source cannot be added or synced: its folder is missing or outside the allowed roots."""


def is_utf8(name: str) -> bool:
    """Return True when `name` (from the file system, surrogate-escaped) is UTF-8 text."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def roots_line(folder: Path) -> str:
    """Return the SYNC_ROOTS line that allows `folder` as well as the roots allowed now.

    Settings are read once, when Pairfix starts: the line takes effect after a restart.
    """
    roots = [str(root) for root in settings.SYNC_ROOTS]
    if str(folder) not in roots:
        roots.append(str(folder))
    return "SYNC_ROOTS=" + os.pathsep.join(roots)


def check_source_path(path: str, workspace: Workspace | None = None) -> Path:
    """Return `path` resolved, if it is a folder under one of settings.SYNC_ROOTS.

    With `workspace`, it must also lie under a folder granted to that
    workspace (`SyncGrant`). Raises SyncError when it is relative, holds a
    `..` component, NUL or bytes that are not UTF-8, does not exist, is not a
    folder, or resolves (through symlinks) outside every root or grant.
    """
    if not path or not os.path.isabs(path):
        raise SyncError(f"{path!r}: give an absolute path")
    if "\x00" in path or not is_utf8(path):
        raise SyncError(f"{path!r}: a path must be UTF-8 text without NUL")
    if ".." in Path(path).parts:
        raise SyncError(f"{path}: a path with '..' is not accepted")
    resolved = Path(path).resolve()
    if not any(resolved.is_relative_to(root) for root in settings.SYNC_ROOTS):
        roots = ", ".join(str(r) for r in settings.SYNC_ROOTS)
        refusal = (
            f"{path}: not under an allowed sync root ({roots})"
            if roots
            else "no folder may be synced: set SYNC_ROOTS to the folders agents write to"
        )
        # The path as given, not resolved: the refusal shows nothing of the server's disk.
        line = roots_line(Path(os.path.normpath(path)))
        # Only honcho (`make run`: the server, the worker and beat) reads .env; Django's
        # settings read the process's own environment, so a manage.py command needs it there.
        raise SyncError(
            f"{refusal}. To allow this one, add the line {line} to the .env file beside "
            "manage.py, which `make run` reads for the server, the worker and beat (or set "
            "it in their environment), then restart Pairfix. A manage.py command does not "
            f"read .env: give it the variable in its own environment ({line} manage.py ...)."
        )
    # The grant first: whether a folder outside it exists is another workspace's business.
    if workspace is not None:
        granted = [Path(p) for p in workspace.sync_grants.values_list("path", flat=True)]
        if not any(resolved.is_relative_to(folder) for folder in granted):
            raise SyncError(
                f"{path}: not under a folder granted to {workspace} "
                f"({', '.join(map(str, granted)) or 'none yet'}); a site admin grants "
                "folders of the sync roots to a workspace (the workspace's page in /admin/, "
                "or `manage.py sync --add`)"
            )
    if not resolved.is_dir():
        raise SyncError(f"{path}: no such folder")
    return resolved
