"""The workspace's own policies over the API: list, create, read, change, delete.

A policy is a table {fault kind: action} plus the synthetic text; a row a
fault kind cannot take is refused (400 `bad_request` naming the row), as is a
name a preset already has.
"""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from transcripts.api import errors, permissions
from transcripts.core.model import Action, FaultKind
from transcripts.core.policy import PRESETS, custom
from transcripts.models import Membership, WorkspacePolicy


class WorkspacePolicySerializer(serializers.ModelSerializer[WorkspacePolicy]):
    actions = serializers.DictField(
        child=serializers.ChoiceField(choices=[str(a) for a in Action]),
        help_text="{fault kind id: action id}; kinds not listed are only flagged.",
    )

    class Meta:
        model = WorkspacePolicy
        fields = ["id", "name", "actions", "synthetic_text", "description", "updated"]
        read_only_fields = ["id", "updated"]

    def validate_name(self, value: str) -> str:
        if value in PRESETS:
            raise serializers.ValidationError(f"“{value}” is the name of a preset.")
        return value

    def validate_actions(self, value: dict[str, str]) -> dict[str, str]:
        unknown = sorted(set(value) - {str(kind) for kind in FaultKind})
        if unknown:
            raise serializers.ValidationError(f"unknown fault kind: {', '.join(unknown)}")
        try:
            custom("check", value, None)
        except ValueError as exc:
            raise serializers.ValidationError(str(exc)) from None
        return value


def _policy(request: Request, pk: int) -> WorkspacePolicy:
    try:
        return WorkspacePolicy.objects.get(pk=pk, workspace=permissions.workspace(request))
    except WorkspacePolicy.DoesNotExist:
        raise errors.NotFound(f"There is no policy {pk} in this workspace.") from None


def _save(body: WorkspacePolicySerializer, **fields: Any) -> WorkspacePolicy:
    try:
        with transaction.atomic():
            return body.save(**fields)
    except IntegrityError:
        raise errors.Conflict("The workspace already has a policy of that name.") from None


class PolicyList(APIView):
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
        responses={201: WorkspacePolicySerializer},
    )
    def post(self, request: Request) -> Response:
        permissions.require(request, Membership.Role.EDITOR)
        body = WorkspacePolicySerializer(data=request.data)
        body.is_valid(raise_exception=True)
        row = _save(body, workspace=permissions.workspace(request))
        return Response(WorkspacePolicySerializer(row).data, status=status.HTTP_201_CREATED)


class PolicyDetail(APIView):
    @extend_schema(summary="Read a policy", responses={200: WorkspacePolicySerializer})
    def get(self, request: Request, pk: int) -> Response:
        return Response(WorkspacePolicySerializer(_policy(request, pk)).data)

    @extend_schema(
        summary="Change a policy",
        request=WorkspacePolicySerializer,
        responses={200: WorkspacePolicySerializer},
    )
    def put(self, request: Request, pk: int) -> Response:
        permissions.require(request, Membership.Role.EDITOR)
        body = WorkspacePolicySerializer(_policy(request, pk), data=request.data)
        body.is_valid(raise_exception=True)
        return Response(WorkspacePolicySerializer(_save(body)).data)

    @extend_schema(summary="Delete a policy", responses={204: None})
    def delete(self, request: Request, pk: int) -> Response:
        permissions.require(request, Membership.Role.EDITOR)
        _policy(request, pk).delete()
        return Response(status=status.HTTP_204_NO_CONTENT)
