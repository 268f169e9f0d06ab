"""Find a policy by name: a preset, or one of the workspace's own (WorkspacePolicy)."""

from __future__ import annotations

from transcripts.core.policy import PRESETS, Policy, resolve
from transcripts.models import WorkspacePolicy


def workspace_policies(workspace_id: int | None) -> dict[str, Policy]:
    """Return {name: Policy} of the workspace's own policies (none for None)."""
    if workspace_id is None:
        return {}
    rows = WorkspacePolicy.objects.filter(workspace_id=workspace_id)
    return {row.name: row.as_policy() for row in rows}


def policy_for(name: str, workspace_id: int | None) -> Policy:
    """Return the policy `name` as the workspace sees it; KeyError when there is none.

    A preset is found without a query; a workspace policy from its row.
    """
    if name in PRESETS:
        return PRESETS[name]
    return resolve(name, workspace_policies(workspace_id))


def names_for(workspace_ids: list[int]) -> list[str]:
    """Return the names of the policies the workspaces define, sorted, each once."""
    return sorted(
        set(
            WorkspacePolicy.objects.filter(workspace_id__in=workspace_ids).values_list(
                "name", flat=True
            )
        )
    )
