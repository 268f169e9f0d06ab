"""The workspace's own policies over the API: list, create, read, change, delete.

A policy is a table {fault kind: action} plus the synthetic text; a row a
fault kind cannot take is refused (400 `bad_request` naming the row), as is a
name a preset already has.
"""

from __future__ import annotations

from typing import Any

from django.core.validators import validate_slug
from django.db import IntegrityError
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from transcripts import actions
from transcripts.api import errors, permissions
from transcripts.api.serializers import ErrorSerializer, Strict, TextField
from transcripts.api.strict import KnownQuery
from transcripts.core.model import FaultKind
from transcripts.core.policy import ALLOWED, PRESETS, custom
from transcripts.models import Membership, WorkspacePolicy


def _allowed(kind: FaultKind) -> list[str]:
    return sorted(str(a) for a in ALLOWED[kind])


# The distinct sets of actions a row may take, named for the schema (ENUM_NAME_OVERRIDES).
ANSWER_ACTIONS = _allowed(FaultKind.MISSING_RESULT)
DROP_ACTIONS = _allowed(FaultKind.ORPHANED_RESULT)
DUPLICATE_ACTIONS = _allowed(FaultKind.DUPLICATE_RESULT)
CALL_ID_ACTIONS = _allowed(FaultKind.DUPLICATE_CALL_ID)
MOVE_ACTIONS = _allowed(FaultKind.DISPLACED_RESULT)
REPORT_ACTIONS = _allowed(FaultKind.MISORDERED_RESULTS)
SPLIT_ACTIONS = _allowed(FaultKind.CONTENT_AFTER_CALL)
MALFORMED_CALL_ACTIONS = _allowed(FaultKind.MALFORMED_CALL)


def _action_field(kind: FaultKind) -> serializers.ChoiceField:
    """Return the field of one row: the actions `kind` can take, any other refused by name."""
    allowed = _allowed(kind)
    return serializers.ChoiceField(
        choices=allowed,
        required=False,
        error_messages={
            "invalid_choice": f"{kind} cannot take the action {{input}}; it can take "
            + ", ".join(allowed)
        },
    )


class ActionsSerializer(Strict, serializers.Serializer[dict[str, str]]):
    """The table {fault kind id: action id}; kinds not listed are only flagged."""

    def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        return {str(kind): _action_field(kind) for kind in FaultKind}


# The schema says what the server refuses: a slug that is not a preset's name.
@extend_schema_field(
    {
        "type": "string",
        "minLength": 1,
        "maxLength": 40,
        "pattern": "^[-a-zA-Z0-9_]+$",
        "not": {"enum": sorted(PRESETS)},
    }
)
class PolicyNameField(TextField):
    pass


class WorkspacePolicySerializer(Strict, serializers.ModelSerializer[WorkspacePolicy]):
    name = PolicyNameField(
        allow_blank=False,
        max_length=40,
        validators=[validate_slug],
        help_text="Letters, digits, - and _; not a preset's name.",
    )
    synthetic_text = TextField(
        required=False,
        help_text="The text of synthetic results; empty: the agent's own, else the receipt.",
    )
    description = TextField(required=False, max_length=200)
    actions = ActionsSerializer(help_text="{fault kind id: action id}; others are only flagged.")

    class Meta:
        model = WorkspacePolicy
        fields = ["id", "name", "actions", "synthetic_text", "description", "updated"]
        read_only_fields = ["id", "updated"]

    def validate_name(self, value: str) -> str:
        if value in PRESETS:
            raise serializers.ValidationError(f"“{value}” is the name of a preset.")
        return value

    def validate_actions(self, value: dict[str, str]) -> dict[str, str]:
        try:
            custom("check", value, None)
        except ValueError as exc:
            raise serializers.ValidationError(str(exc)) from None
        return dict(value)


def _policy(request: Request, pk: int) -> WorkspacePolicy:
    try:
        return WorkspacePolicy.objects.get(pk=pk, workspace=permissions.workspace(request))
    except WorkspacePolicy.DoesNotExist:
        raise errors.NotFound(f"There is no policy {pk} in this workspace.") from None


def _save(
    request: Request, body: WorkspacePolicySerializer, instance: WorkspacePolicy | None = None
) -> WorkspacePolicy:
    data = body.validated_data
    try:
        return actions.do_save_workspace_policy(
            permissions.workspace(request),
            data["name"],
            data["actions"],
            # As a serializer's update does: a field left out keeps its value.
            data.get("synthetic_text", instance.synthetic_text if instance else ""),
            data.get("description", instance.description if instance else ""),
            instance=instance,
            acting_user=permissions.acting_user(request),
        )
    except IntegrityError:
        raise errors.Conflict("The workspace already has a policy of that name.") from None


class PolicyList(KnownQuery, APIView):
    @extend_schema(
        summary="List the workspace's policies",
        responses={200: WorkspacePolicySerializer(many=True)},
    )
    def get(self, request: Request) -> Response:
        rows = WorkspacePolicy.objects.filter(workspace=permissions.workspace(request))
        return Response(WorkspacePolicySerializer(rows, many=True).data)

    @extend_schema(
        summary="Create a policy",
        description="A table fault kind -> action, offered beside the presets for repairs.",
        request=WorkspacePolicySerializer,
        responses={201: WorkspacePolicySerializer, 400: ErrorSerializer, 409: ErrorSerializer},
    )
    def post(self, request: Request) -> Response:
        permissions.require(request, Membership.Role.EDITOR)
        body = WorkspacePolicySerializer(data=request.data)
        body.is_valid(raise_exception=True)
        row = _save(request, body)
        return Response(WorkspacePolicySerializer(row).data, status=status.HTTP_201_CREATED)


class PolicyDetail(KnownQuery, APIView):
    @extend_schema(
        summary="Read a policy", responses={200: WorkspacePolicySerializer, 404: ErrorSerializer}
    )
    def get(self, request: Request, pk: int) -> Response:
        return Response(WorkspacePolicySerializer(_policy(request, pk)).data)

    @extend_schema(
        summary="Change a policy",
        request=WorkspacePolicySerializer,
        responses={
            200: WorkspacePolicySerializer,
            400: ErrorSerializer,
            404: ErrorSerializer,
            409: ErrorSerializer,
        },
    )
    def put(self, request: Request, pk: int) -> Response:
        permissions.require(request, Membership.Role.EDITOR)
        policy = _policy(request, pk)
        body = WorkspacePolicySerializer(policy, data=request.data)
        body.is_valid(raise_exception=True)
        return Response(WorkspacePolicySerializer(_save(request, body, policy)).data)

    @extend_schema(summary="Delete a policy", responses={204: None, 404: ErrorSerializer})
    def delete(self, request: Request, pk: int) -> Response:
        permissions.require(request, Membership.Role.EDITOR)
        actions.do_delete_workspace_policy(
            _policy(request, pk), acting_user=permissions.acting_user(request)
        )
        return Response(status=status.HTTP_204_NO_CONTENT)
