"""Fixtures for sync: an allowed root in a temporary folder and a source on it."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from transcripts.actions import sync
from transcripts.models import SyncSource, Workspace

OLD = time.time() - 86_400


@pytest.fixture
def root(tmp_path: Path, settings: Any) -> Path:
    """Return a folder under the only allowed sync root."""
    settings.SYNC_ROOTS = [tmp_path.resolve()]
    folder = tmp_path / "projects"
    folder.mkdir()
    return folder


@pytest.fixture
def granted(root: Path, workspace: Workspace) -> Path:
    """Return `root`, granted to alice's workspace (as a site admin does)."""
    sync.do_grant_folder(workspace, str(root), acting_user=None)
    return root


@pytest.fixture
def source(granted: Path, workspace: Workspace, alice: Any) -> SyncSource:
    return sync.do_create_source(workspace, str(granted), acting_user=alice, format="claude_code")


def line(**fields: Any) -> bytes:
    """Return one compact JSON line."""
    return json.dumps(fields, separators=(",", ":")).encode() + b"\n"


def user(uid: str, parent: str | None, content: Any) -> bytes:
    return line(
        type="user",
        uuid=uid,
        parentUuid=parent,
        sessionId="s-1",
        message={"role": "user", "content": content},
    )


def call(uid: str, parent: str | None, call_id: str) -> bytes:
    block = {"type": "tool_use", "id": call_id, "name": "Bash", "input": {"command": "ls"}}
    return line(
        type="assistant",
        uuid=uid,
        parentUuid=parent,
        sessionId="s-1",
        message={"id": f"msg_{uid}", "role": "assistant", "content": [block]},
    )


def result(uid: str, parent: str | None, call_id: str) -> bytes:
    return user(uid, parent, [{"type": "tool_result", "tool_use_id": call_id, "content": "ok"}])


def reply(uid: str, parent: str | None) -> bytes:
    return line(
        type="assistant",
        uuid=uid,
        parentUuid=parent,
        sessionId="s-1",
        message={
            "id": f"msg_{uid}",
            "role": "assistant",
            "content": [{"type": "text", "text": "done"}],
        },
    )


def age(path: Path, when: float = OLD) -> None:
    """Set `path`'s modification time to `when` (a day ago by default): not live."""
    os.utime(path, (when, when))
