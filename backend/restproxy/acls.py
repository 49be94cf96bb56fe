"""``/v3/clusters/{id}/acls``: search, create and delete ACL bindings with Confluent's filter
parameters, over ``backend.acls``' selectors and services (admins only, as ``/api/v1/acls/``).

A search or delete filter is Kafka's ``AclBindingFilter`` (``brokernodes.security.acl``, the
same the Kafka front's DescribeAcls and DeleteAcls use): an omitted field or ``ANY`` matches
anything, ``pattern_type=MATCH`` finds every binding that applies to ``resource_name``.
Creating a binding that exists succeeds, as Kafka's CreateAcls does."""

from __future__ import annotations

import contextlib

from django.db import transaction
from rest_framework import serializers, status
from rest_framework.response import Response

from backend.acls import selectors, services
from backend.core.exceptions import Conflict
from backend.core.serializers import StrictSerializer, validate_input
from backend.restproxy import shapes
from backend.restproxy.base import ClusterView
from backend.tenancy import roles
from brokernodes.security import acl

_ENUMS = {
    "resource_type": acl.ResourceType,
    "operation": acl.Operation,
    "permission": acl.PermissionType,
}


class FilterSerializer(StrictSerializer):
    resource_type = serializers.CharField(required=False, max_length=32)
    resource_name = serializers.CharField(required=False, max_length=255)
    pattern_type = serializers.CharField(required=False, max_length=16)
    principal = serializers.CharField(required=False, max_length=200)
    host = serializers.CharField(required=False, max_length=64)
    operation = serializers.CharField(required=False, max_length=32)
    permission = serializers.CharField(required=False, max_length=8)

    def validate(self, attrs):
        """Every enum a name Kafka knows (or ANY); the fields as the filter takes them."""
        errors: dict[str, list[str]] = {}
        out: dict = {}
        for field, value in attrs.items():
            enum_cls = _ENUMS.get(field) or (acl.PatternType if field == "pattern_type" else None)
            if enum_cls is None:
                out[field] = value
                continue
            if value.upper() == "ANY":
                if field == "pattern_type":
                    out[field] = acl.PatternType.ANY
                continue
            try:
                out[field] = enum_cls.parse(value)
            except ValueError as e:
                errors[field] = [f"{e}, or ANY"]
        if errors:
            raise serializers.ValidationError(errors)
        return out


class AclInputSerializer(StrictSerializer):
    # plain strings: brokernodes.security.acl validates them and names the bad fields
    resource_type = serializers.CharField(max_length=32)
    resource_name = serializers.CharField(max_length=255)
    pattern_type = serializers.CharField(max_length=16, required=False, default="LITERAL")
    principal = serializers.CharField(max_length=200)
    host = serializers.CharField(max_length=64, required=False, default="*")
    operation = serializers.CharField(max_length=32)
    permission = serializers.CharField(max_length=8, required=False, default="ALLOW")


class AclApi(ClusterView):
    read_role = roles.ADMIN
    write_role = roles.ADMIN

    def _matching(self, params, *, need_type: bool = False) -> list:
        if need_type and "resource_type" not in params:
            raise serializers.ValidationError(
                {"resource_type": ["required when deleting (ANY matches every type)"]}
            )
        flt = acl.AclBindingFilter(**validate_input(FilterSerializer, params))
        bindings = selectors.acl_list(organisation=self.organisation)
        return [b for b in bindings if flt.matches(acl.AclBinding.from_dict(b.as_dict()))]

    def get(self, request, cluster_id: str):
        links = self.links()
        data = [shapes.acl(links, b.as_dict()) for b in self._matching(request.query_params)]
        query = dict(request.query_params.items()) or None
        return Response(links.listing("KafkaAclList", data, "acls", query=query))

    def post(self, request, cluster_id: str):
        data = validate_input(AclInputSerializer, request.data)
        with contextlib.suppress(Conflict):  # it exists: CreateAcls is idempotent in Kafka
            services.acl_create(ctx=self.ctx, **data)
        return Response(status=status.HTTP_201_CREATED)

    def delete(self, request, cluster_id: str):
        links = self.links()
        deleted = []
        with transaction.atomic():  # all the matching bindings, or none
            for b in self._matching(request.query_params, need_type=True):
                deleted.append(shapes.acl(links, b.as_dict()))
                services.acl_delete(ctx=self.ctx, binding=b)
        return Response({"data": deleted})
