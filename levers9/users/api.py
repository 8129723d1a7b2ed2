"""The users API for integrations, owners only: list the workspace's users, invite by e-mail
with a role (the answer carries the invitation link, once), change a role, remove; list and
withdraw pending invitations. Registered on the platform's router in config/urls.py."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.urls import reverse
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from levers9.roles import OWNER, ROLES, HasRole, user_role
from levers9.users import selectors, services
from levers9.users.models import Invitation


class UserSerializer(serializers.ModelSerializer):
    role = serializers.SerializerMethodField()

    class Meta:
        model = get_user_model()
        fields = ["id", "username", "email", "role", "date_joined", "last_login"]
        read_only_fields = fields

    def get_role(self, user) -> str | None:
        return user_role(user)


class RoleSerializer(serializers.Serializer):
    role = serializers.ChoiceField(
        choices=ROLES, help_text="reviewer, manager or owner (levers9.roles)."
    )


class InviteSerializer(RoleSerializer):
    email = serializers.EmailField(max_length=254)


class InvitationSerializer(serializers.ModelSerializer):
    state = serializers.CharField(read_only=True)
    invited_by = serializers.SerializerMethodField()

    class Meta:
        model = Invitation
        # Never the token's hash: the link is shown once, to the owner who invites.
        fields = ["id", "email", "role", "state", "invited_by", "created_at", "expires_at"]
        read_only_fields = fields

    def get_invited_by(self, invitation: Invitation) -> str | None:
        return invitation.invited_by.get_username() if invitation.invited_by else None


def _refused(error: ValidationError) -> Response:
    """A service's refusal as the API answers it: the fields named, 409 where the workspace's
    state forbids it (its last owner), 400 for bad input."""
    if isinstance(error, services.LastOwnerRefused):
        body = {field: messages for field, messages in error.message_dict.items()}
        body["detail"] = " ".join(error.messages)
        return Response(body, status=status.HTTP_409_CONFLICT)
    return Response(error.message_dict, status=status.HTTP_400_BAD_REQUEST)


class UserViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """The workspace's users who can sign in, with their roles."""

    serializer_class = UserSerializer
    permission_classes = [HasRole.at_least(OWNER)]
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def get_queryset(self):
        # The workspace's own schema holds its users: another workspace's ids find nothing.
        return selectors.users_active().order_by("username")

    @extend_schema(request=RoleSerializer, responses=UserSerializer)
    def partial_update(self, request, pk=None):
        """Change a user's role. The last owner cannot be made anything else (409)."""
        user = self.get_object()
        serializer = RoleSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            services.user_role_change(user=user, role=serializer.validated_data["role"])
        except ValidationError as error:
            return _refused(error)
        user.refresh_from_db()
        return Response(UserSerializer(user).data)

    @extend_schema(responses={204: None})
    def destroy(self, request, pk=None):
        """Remove a user: they can no longer sign in; their picks keep their name. The last
        owner cannot be removed (409)."""
        user = self.get_object()
        try:
            services.user_remove(user=user)
        except ValidationError as error:
            return _refused(error)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        request=InviteSerializer,
        responses={
            201: inline_serializer(
                "InvitationCreated",
                {
                    "invitation": InvitationSerializer(),
                    "invitation_link": serializers.URLField(
                        help_text="Give this to the invitee: it works once, and is not shown "
                        "again. No e-mail is sent."
                    ),
                },
            )
        },
    )
    @action(detail=False, methods=["post"])
    def invite(self, request):
        """Invite an e-mail address with a role. No e-mail is sent: the answer's
        invitation_link is the only copy of the link."""
        serializer = InviteSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            invitation, token = services.invitation_create(
                email=serializer.validated_data["email"],
                role=serializer.validated_data["role"],
                invited_by=request.user,
            )
        except ValidationError as error:
            return _refused(error)
        link = request.build_absolute_uri(reverse("invite-accept", args=[token]))
        return Response(
            {"invitation": InvitationSerializer(invitation).data, "invitation_link": link},
            status=status.HTTP_201_CREATED,
        )


class InvitationViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """Pending invitations; DELETE withdraws one (its link stops working)."""

    serializer_class = InvitationSerializer
    permission_classes = [HasRole.at_least(OWNER)]

    def get_queryset(self):
        return selectors.invitations_pending()

    def perform_destroy(self, instance: Invitation) -> None:
        services.invitation_revoke(invitation=instance)
