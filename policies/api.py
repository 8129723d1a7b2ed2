"""API of the policy registry."""

from __future__ import annotations

from rest_framework import serializers, viewsets

from policies.models import PolicyVersion


class PolicyVersionSerializer(serializers.ModelSerializer):
    label = serializers.CharField(read_only=True)
    parent = serializers.PrimaryKeyRelatedField(read_only=True)
    can_answer = serializers.BooleanField(read_only=True)

    class Meta:
        model = PolicyVersion
        fields = [
            "id",
            "number",
            "name",
            "label",
            "parent",
            "description",
            "provider",
            "provider_model",
            "endpoint_url",
            "learned_from",
            "status",
            "can_answer",
            "created_at",
        ]


class PolicyVersionViewSet(viewsets.ReadOnlyModelViewSet):
    """Every agent version of this workspace with its lineage."""

    serializer_class = PolicyVersionSerializer

    def get_queryset(self):
        return PolicyVersion.objects.select_related("parent")
