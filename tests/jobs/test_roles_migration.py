"""Migration 0008: owners become admins, members editors."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from tests.helpers import migrate

BEFORE = [("transcripts", "0007_sync_sources")]
AFTER = [("transcripts", "0008_workspace_roles")]


@pytest.mark.django_db(transaction=True)
def test_owners_become_admins_and_members_editors(django_user_model):
    latest = MigrationExecutor(connection).loader.graph.leaf_nodes()
    apps = migrate(BEFORE)
    try:
        Workspace = apps.get_model("transcripts", "Workspace")
        Membership = apps.get_model("transcripts", "Membership")
        User = apps.get_model("auth", "User")
        workspace = Workspace.objects.create(name="W")
        for name, role in [("ann", "owner"), ("ben", "member")]:
            Membership.objects.create(
                user=User.objects.create(username=name), workspace=workspace, role=role
            )

        apps = migrate(AFTER)

        Membership = apps.get_model("transcripts", "Membership")
        roles = dict(Membership.objects.values_list("user__username", "role"))
        assert roles == {"ann": "admin", "ben": "editor"}

        apps = migrate(BEFORE)
        Membership = apps.get_model("transcripts", "Membership")
        roles = dict(Membership.objects.values_list("user__username", "role"))
        assert roles == {"ann": "owner", "ben": "member"}
    finally:
        migrate(latest)
