"""Console sign-in, the organisation switcher, the current organisation, members and their
invitations, service accounts. Thin views: every rule lives in services, every read in selectors."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import authenticate, login, logout
from django.middleware.csrf import get_token
from drf_spectacular.utils import (
    OpenApiParameter,
    extend_schema,
    extend_schema_field,
    inline_serializer,
)
from rest_framework import exceptions as drf_exceptions
from rest_framework import serializers, status
from rest_framework.authentication import SessionAuthentication
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from backend.console.protected import protected_reason
from backend.core.context import client_ip, user_agent
from backend.core.exceptions import ApplicationError, NotFound, PermissionDenied
from backend.core.schema import errors
from backend.core.serializers import StrictSerializer, validate_input
from backend.tenancy import lockout, roles, selectors, services
from backend.tenancy.permissions import (
    SESSION_ORGANISATION_KEY,
    AdminAPIView,
    TenantAPIView,
    UserAPIView,
    is_service_account,
    resolve_context,
)
from backend.tenancy.throttling import LoginRateThrottle


class InvalidCredentials(ApplicationError):
    status_code = 400
    error_code = "INVALID_CREDENTIALS"


class OrganisationOutputSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    slug = serializers.CharField()
    name = serializers.CharField()
    created_at = serializers.DateTimeField()


class MembershipOrganisationSerializer(serializers.Serializer):
    organisation = OrganisationOutputSerializer()
    role = serializers.CharField()


class MeOutputSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=["user", "service_account"])
    username = serializers.CharField(allow_null=True)
    service_account_id = serializers.UUIDField(allow_null=True)
    is_staff = serializers.BooleanField()
    organisation = OrganisationOutputSerializer(allow_null=True, help_text="the current one")
    role = serializers.CharField(allow_null=True)
    memberships = MembershipOrganisationSerializer(many=True)


def me_data(request) -> dict:
    try:
        ctx = resolve_context(request)
        org, role = ctx.organisation, ctx.role
    except ApplicationError:
        org, role = None, None
    if is_service_account(request):
        sa = request.user.service_account
        return {
            "kind": "service_account",
            "username": None,
            "service_account_id": sa.id,
            "is_staff": False,
            "organisation": org,
            "role": role,
            "memberships": [{"organisation": sa.organisation, "role": sa.role}],
        }
    return {
        "kind": "user",
        "username": request.user.get_username(),
        "service_account_id": None,
        "is_staff": bool(request.user.is_staff),
        "organisation": org,
        "role": role,
        "memberships": [
            {"organisation": m.organisation, "role": m.role}
            for m in selectors.membership_list_for_user(user=request.user)
        ],
    }


class CsrfApi(APIView):
    authentication_classes: list = []
    permission_classes = [AllowAny]

    @extend_schema(
        operation_id="auth_csrf",
        tags=["auth"],
        responses={200: inline_serializer("CsrfToken", {"csrf_token": serializers.CharField()})},
        description="Sets the csrftoken cookie; send it back as X-CSRFToken on writes.",
    )
    def get(self, request):
        return Response({"csrf_token": get_token(request)})


class LoginApi(APIView):
    authentication_classes: list = []
    permission_classes = [AllowAny]
    throttle_classes = [LoginRateThrottle]
    throttle_scope = "login"

    class InputSerializer(StrictSerializer):
        username = serializers.CharField(max_length=150)
        password = serializers.CharField(max_length=1024, trim_whitespace=False)

    @extend_schema(
        operation_id="auth_login",
        tags=["auth"],
        request=InputSerializer,
        responses={200: MeOutputSerializer, **errors(400, 429)},
        description=(
            "Console sign-in: starts a session. Needs the CSRF token (GET auth/csrf). "
            "Throttled per client address, and a username is locked out for a while after "
            "repeated failures (429 THROTTLED with Retry-After)."
        ),
    )
    def post(self, request):
        SessionAuthentication().enforce_csrf(request)  # no login CSRF
        data = validate_input(self.InputSerializer, request.data)
        wait = lockout.retry_after(data["username"])
        if wait:
            raise drf_exceptions.Throttled(
                wait, "too many failed sign-ins for this username; try again later"
            )
        user = authenticate(request._request, username=data["username"], password=data["password"])
        if user is None:
            lockout.record_failure(data["username"])
            raise InvalidCredentials("wrong username or password")
        lockout.record_success(data["username"])
        login(request._request, user)
        request.user = user
        return Response(MeOutputSerializer(me_data(request)).data)


class LogoutApi(UserAPIView):
    @extend_schema(
        operation_id="auth_logout", tags=["auth"], request=None, responses={204: None, **errors()}
    )
    def post(self, request):
        logout(request._request)
        return Response(status=status.HTTP_204_NO_CONTENT)


class MeApi(APIView):
    @extend_schema(
        operation_id="auth_me", tags=["auth"], responses={200: MeOutputSerializer, **errors()}
    )
    def get(self, request):
        return Response(MeOutputSerializer(me_data(request)).data)


class SelectOrganisationApi(UserAPIView):
    class InputSerializer(StrictSerializer):
        organisation = serializers.CharField(max_length=64, help_text="id or slug")

    @extend_schema(
        operation_id="auth_select_organisation",
        tags=["auth"],
        request=InputSerializer,
        responses={200: MeOutputSerializer, **errors(400, 404)},
        description="The console's organisation switcher: remembers the choice in the session.",
    )
    def post(self, request):
        data = validate_input(self.InputSerializer, request.data)
        org = selectors.organisation_lookup(data["organisation"])
        if org is None or selectors.membership_for(user=request.user, organisation=org) is None:
            raise NotFound("no such organisation")
        request.session[SESSION_ORGANISATION_KEY] = str(org.id)
        return Response(MeOutputSerializer(me_data(request)).data)


class OrganisationListApi(UserAPIView):
    class InputSerializer(StrictSerializer):
        slug = serializers.SlugField(max_length=40)
        name = serializers.CharField(max_length=200)

    @extend_schema(
        operation_id="organisations_list",
        tags=["organisations"],
        responses={200: MembershipOrganisationSerializer(many=True), **errors()},
    )
    def get(self, request):
        memberships = selectors.membership_list_for_user(user=request.user)
        return Response(
            MembershipOrganisationSerializer(
                [{"organisation": m.organisation, "role": m.role} for m in memberships],
                many=True,
            ).data
        )

    @extend_schema(
        operation_id="organisations_create",
        tags=["organisations"],
        request=InputSerializer,
        responses={201: OrganisationOutputSerializer, **errors(400, 409)},
        description="Create an organisation with yourself as its owner.",
    )
    def post(self, request):
        if not settings.SLUICE_SELF_SERVICE_ORGANISATIONS and not request.user.is_staff:
            raise PermissionDenied("organisations are created by platform staff here")
        data = validate_input(self.InputSerializer, request.data)
        org = services.organisation_create(ctx=self.context(), owner=request.user, **data)
        return Response(OrganisationOutputSerializer(org).data, status=status.HTTP_201_CREATED)


class CurrentOrganisationApi(TenantAPIView):
    write_role = roles.ADMIN

    class InputSerializer(StrictSerializer):
        name = serializers.CharField(max_length=200)

    @extend_schema(
        operation_id="organisation_retrieve",
        tags=["organisations"],
        responses={200: OrganisationOutputSerializer, **errors()},
    )
    def get(self, request):
        return Response(OrganisationOutputSerializer(self.organisation).data)

    @extend_schema(
        operation_id="organisation_update",
        tags=["organisations"],
        request=InputSerializer,
        responses={200: OrganisationOutputSerializer, **errors(400)},
    )
    def patch(self, request):
        data = validate_input(self.InputSerializer, request.data)
        org = services.organisation_update(ctx=self.ctx, **data)
        return Response(OrganisationOutputSerializer(org).data)


class MemberOutputSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    username = serializers.CharField(source="user.username")
    email = serializers.EmailField(source="user.email")
    role = serializers.ChoiceField(choices=roles.MEMBERSHIP_ROLES)
    created_at = serializers.DateTimeField()


MEMBER_PARAM = OpenApiParameter("membership_id", str, OpenApiParameter.PATH)


class InvitationOutputSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    username = serializers.CharField()
    role = serializers.ChoiceField(choices=roles.MEMBERSHIP_ROLES)
    invited_by = serializers.CharField()
    created_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField()


class MemberListApi(AdminAPIView):
    class InputSerializer(StrictSerializer):
        username = serializers.CharField(max_length=150)
        role = serializers.ChoiceField(choices=roles.MEMBERSHIP_ROLES)

    @extend_schema(
        operation_id="members_list",
        tags=["members"],
        responses={200: MemberOutputSerializer(many=True), **errors()},
    )
    def get(self, request):
        members = selectors.membership_list(organisation=self.organisation)
        return Response(MemberOutputSerializer(members, many=True).data)

    @extend_schema(
        operation_id="members_create",
        tags=["members"],
        request=InputSerializer,
        responses={202: InvitationOutputSerializer, **errors(400, 409)},
        description=(
            "Invite a person by username: they join once they accept "
            "(POST auth/invitations/{id}/accept). The answer is the same whether or not "
            "a user has the name; inviting again renews the invitation. 409 for a member."
        ),
    )
    def post(self, request):
        data = validate_input(self.InputSerializer, request.data)
        inv = services.invitation_create(ctx=self.ctx, **data)
        return Response(InvitationOutputSerializer(inv).data, status=status.HTTP_202_ACCEPTED)


INVITATION_PARAM = OpenApiParameter("invitation_id", str, OpenApiParameter.PATH)


class InvitationListApi(AdminAPIView):
    @extend_schema(
        operation_id="invitations_list",
        tags=["members"],
        responses={200: InvitationOutputSerializer(many=True), **errors()},
        description="The organisation's pending invitations.",
    )
    def get(self, request):
        invitations = selectors.invitation_list(organisation=self.organisation)
        return Response(InvitationOutputSerializer(invitations, many=True).data)


class InvitationDetailApi(AdminAPIView):
    @extend_schema(
        operation_id="invitations_retrieve",
        tags=["members"],
        parameters=[INVITATION_PARAM],
        responses={200: InvitationOutputSerializer, **errors(404)},
    )
    def get(self, request, invitation_id):
        inv = selectors.invitation_get(organisation=self.organisation, invitation_id=invitation_id)
        return Response(InvitationOutputSerializer(inv).data)

    @extend_schema(
        operation_id="invitations_revoke",
        tags=["members"],
        parameters=[INVITATION_PARAM],
        responses={204: None, **errors(404)},
    )
    def delete(self, request, invitation_id):
        inv = selectors.invitation_get(organisation=self.organisation, invitation_id=invitation_id)
        services.invitation_revoke(ctx=self.ctx, invitation=inv)
        return Response(status=status.HTTP_204_NO_CONTENT)


class MyInvitationOutputSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    organisation = OrganisationOutputSerializer()
    role = serializers.ChoiceField(choices=roles.MEMBERSHIP_ROLES)
    invited_by = serializers.CharField()
    created_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField()


class MyInvitationListApi(UserAPIView):
    @extend_schema(
        operation_id="auth_invitations_list",
        tags=["auth"],
        responses={200: MyInvitationOutputSerializer(many=True), **errors()},
        description="Invitations waiting for the signed-in person's answer.",
    )
    def get(self, request):
        invitations = selectors.invitation_list_for_user(user=request.user)
        return Response(MyInvitationOutputSerializer(invitations, many=True).data)


class MyInvitationAcceptApi(UserAPIView):
    @extend_schema(
        operation_id="auth_invitations_accept",
        tags=["auth"],
        parameters=[INVITATION_PARAM],
        request=None,
        responses={200: MeOutputSerializer, **errors(404)},
        description=(
            "Join the organisation with the invitation's role. The console's current "
            "organisation stays what it was."
        ),
    )
    def post(self, request, invitation_id):
        before = list(selectors.membership_list_for_user(user=request.user)[:2])
        services.invitation_accept(
            user=request.user,
            invitation_id=invitation_id,
            ip=client_ip(request),
            user_agent=user_agent(request),
        )
        # one organisation was implied; with two the console would need a choice: keep it
        if len(before) == 1 and not request.session.get(SESSION_ORGANISATION_KEY):
            request.session[SESSION_ORGANISATION_KEY] = str(before[0].organisation_id)
        return Response(MeOutputSerializer(me_data(request)).data)


class MyInvitationDeclineApi(UserAPIView):
    @extend_schema(
        operation_id="auth_invitations_decline",
        tags=["auth"],
        parameters=[INVITATION_PARAM],
        request=None,
        responses={204: None, **errors(404)},
    )
    def post(self, request, invitation_id):
        services.invitation_decline(
            user=request.user,
            invitation_id=invitation_id,
            ip=client_ip(request),
            user_agent=user_agent(request),
        )
        return Response(status=status.HTTP_204_NO_CONTENT)


class MemberDetailApi(AdminAPIView):
    class InputSerializer(StrictSerializer):
        role = serializers.ChoiceField(choices=roles.MEMBERSHIP_ROLES)

    @extend_schema(
        operation_id="members_retrieve",
        tags=["members"],
        parameters=[MEMBER_PARAM],
        responses={200: MemberOutputSerializer, **errors(404)},
    )
    def get(self, request, membership_id):
        m = selectors.membership_get(organisation=self.organisation, membership_id=membership_id)
        return Response(MemberOutputSerializer(m).data)

    @extend_schema(
        operation_id="members_update",
        tags=["members"],
        parameters=[MEMBER_PARAM],
        request=InputSerializer,
        responses={200: MemberOutputSerializer, **errors(400, 404)},
    )
    def patch(self, request, membership_id):
        m = selectors.membership_get(organisation=self.organisation, membership_id=membership_id)
        data = validate_input(self.InputSerializer, request.data)
        m = services.membership_update(ctx=self.ctx, membership=m, **data)
        return Response(MemberOutputSerializer(m).data)

    @extend_schema(
        operation_id="members_delete",
        tags=["members"],
        parameters=[MEMBER_PARAM],
        responses={204: None, **errors(400, 404)},
    )
    def delete(self, request, membership_id):
        m = selectors.membership_get(organisation=self.organisation, membership_id=membership_id)
        services.membership_delete(ctx=self.ctx, membership=m)
        return Response(status=status.HTTP_204_NO_CONTENT)


class ServiceAccountOutputSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    name = serializers.CharField()
    principal = serializers.CharField(help_text="the ACL principal, User:<name>")
    description = serializers.CharField()
    role = serializers.ChoiceField(choices=roles.SERVICE_ACCOUNT_ROLES)
    is_active = serializers.BooleanField()
    created_at = serializers.DateTimeField()
    protected = serializers.SerializerMethodField(
        help_text="why it cannot be deleted or deactivated (the console's own account); "
        "null: it can"
    )

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_protected(self, sa) -> str | None:
        return protected_reason(sa)


SA_PARAM = OpenApiParameter("service_account_id", str, OpenApiParameter.PATH)


class ServiceAccountListApi(AdminAPIView):
    class InputSerializer(StrictSerializer):
        name = serializers.RegexField(r"^[A-Za-z0-9._-]{1,64}$", max_length=64)
        description = serializers.CharField(max_length=500, required=False, allow_blank=True)
        role = serializers.ChoiceField(
            choices=roles.SERVICE_ACCOUNT_ROLES, required=False, default=roles.MEMBER
        )

    @extend_schema(
        operation_id="service_accounts_list",
        tags=["service accounts"],
        responses={200: ServiceAccountOutputSerializer(many=True), **errors()},
    )
    def get(self, request):
        accounts = selectors.service_account_list(organisation=self.organisation)
        return Response(ServiceAccountOutputSerializer(accounts, many=True).data)

    @extend_schema(
        operation_id="service_accounts_create",
        tags=["service accounts"],
        request=InputSerializer,
        responses={201: ServiceAccountOutputSerializer, **errors(400, 409)},
    )
    def post(self, request):
        data = validate_input(self.InputSerializer, request.data)
        sa = services.service_account_create(ctx=self.ctx, **data)
        return Response(ServiceAccountOutputSerializer(sa).data, status=status.HTTP_201_CREATED)


class ServiceAccountDetailApi(AdminAPIView):
    class InputSerializer(StrictSerializer):
        description = serializers.CharField(max_length=500, required=False, allow_blank=True)
        role = serializers.ChoiceField(choices=roles.SERVICE_ACCOUNT_ROLES, required=False)
        is_active = serializers.BooleanField(required=False)

    @extend_schema(
        operation_id="service_accounts_retrieve",
        tags=["service accounts"],
        parameters=[SA_PARAM],
        responses={200: ServiceAccountOutputSerializer, **errors(404)},
    )
    def get(self, request, service_account_id):
        sa = selectors.service_account_get(
            organisation=self.organisation, service_account_id=service_account_id
        )
        return Response(ServiceAccountOutputSerializer(sa).data)

    @extend_schema(
        operation_id="service_accounts_update",
        tags=["service accounts"],
        parameters=[SA_PARAM],
        request=InputSerializer,
        responses={200: ServiceAccountOutputSerializer, **errors(400, 404, 409)},
    )
    def patch(self, request, service_account_id):
        sa = selectors.service_account_get(
            organisation=self.organisation, service_account_id=service_account_id
        )
        data = validate_input(self.InputSerializer, request.data)
        sa = services.service_account_update(ctx=self.ctx, service_account=sa, **data)
        return Response(ServiceAccountOutputSerializer(sa).data)

    @extend_schema(
        operation_id="service_accounts_delete",
        tags=["service accounts"],
        parameters=[SA_PARAM],
        responses={204: None, **errors(404, 409)},
    )
    def delete(self, request, service_account_id):
        sa = selectors.service_account_get(
            organisation=self.organisation, service_account_id=service_account_id
        )
        services.service_account_delete(ctx=self.ctx, service_account=sa)
        return Response(status=status.HTTP_204_NO_CONTENT)
