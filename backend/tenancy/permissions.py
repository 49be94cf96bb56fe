"""The one authorization choke point of the control-plane API.

Every tenant-scoped view derives from ``TenantAPIView`` (or ``AdminAPIView``). Its permission
``TenantPermission`` runs after authentication and before the handler, and:

1. resolves the organisation: an API key's service account's organisation, or for a console
   user the ``X-Sluice-Organisation`` header (id or slug), else the organisation selected in
   the session (``POST /api/v1/auth/organisation``), else the user's only membership;
2. resolves the caller's role in it (membership role, or the service account's role);
3. refuses a method the role may not use (403), and an organisation the caller does not
   belong to with 404, so a tenant cannot even learn that another exists;
4. stores a ``RequestContext`` as ``request.sluice`` for the view, which hands it to
   selectors and services; every selector takes the organisation, so no query is unscoped.

Platform routes (``PlatformAPIView``) are the only cross-tenant ones; they need Django staff.
"""

from __future__ import annotations

from rest_framework.permissions import SAFE_METHODS, BasePermission, IsAuthenticated
from rest_framework.views import APIView

from backend.core.context import RequestContext, client_ip, user_agent
from backend.core.exceptions import NotFound, OrganisationRequired, PermissionDenied
from backend.tenancy import roles, selectors
from backend.tenancy.principal import ServiceAccountPrincipal

ORGANISATION_HEADER = "X-Sluice-Organisation"
SESSION_ORGANISATION_KEY = "sluice_organisation_id"


def is_service_account(request) -> bool:
    return isinstance(getattr(request, "user", None), ServiceAccountPrincipal)


def resolve_context(request) -> RequestContext:
    """The organisation, role and actor of an authenticated request (see module docs)."""
    header = (request.headers.get(ORGANISATION_HEADER) or "").strip()
    common = {"ip": client_ip(request), "user_agent": user_agent(request)}
    if is_service_account(request):
        sa = request.user.service_account
        org = sa.organisation
        if header and header not in (str(org.id), org.slug):
            raise NotFound("no such organisation")
        return RequestContext(
            organisation=org,
            role=sa.role,
            service_account=sa,
            api_key_id=request.user.api_key.key_id,
            **common,
        )
    user = request.user
    ref = header or request.session.get(SESSION_ORGANISATION_KEY)
    membership = None
    if ref:
        org = selectors.organisation_lookup(ref)
        membership = selectors.membership_for(user=user, organisation=org) if org else None
        if membership is None and header:
            raise NotFound("no such organisation")
        if membership is None:  # a stale session selection: forget it
            request.session.pop(SESSION_ORGANISATION_KEY, None)
    if membership is None:
        memberships = list(selectors.membership_list_for_user(user=user)[:2])
        if len(memberships) != 1:
            raise OrganisationRequired(
                f"select an organisation: send the {ORGANISATION_HEADER} header or "
                "POST /api/v1/auth/organisation"
            )
        membership = memberships[0]
    return RequestContext(
        organisation=membership.organisation, role=membership.role, user=user, **common
    )


class TenantPermission(BasePermission):
    """Resolves the tenant and checks the role against the view's ``read_role``/``write_role``."""

    def has_permission(self, request, view) -> bool:
        ctx = resolve_context(request)
        request.sluice = ctx
        required = view.read_role if request.method in SAFE_METHODS else view.write_role
        if not roles.at_least(ctx.role, required):
            raise PermissionDenied(
                f"the {ctx.role} role cannot do this; it needs {required} or above"
            )
        return True


class TenantAPIView(APIView):
    """Base of every tenant-scoped view: readers read, members write."""

    permission_classes = [IsAuthenticated, TenantPermission]
    read_role = roles.READ_ONLY
    write_role = roles.MEMBER

    @property
    def ctx(self) -> RequestContext:
        return self.request.sluice

    @property
    def organisation(self):
        return self.request.sluice.organisation


class AdminAPIView(TenantAPIView):
    """Admin routes (keys, service accounts, ACLs, quotas, members, audit): admins only."""

    read_role = roles.ADMIN
    write_role = roles.ADMIN


class IsConsoleUser(BasePermission):
    """A person signed in (not an API key)."""

    def has_permission(self, request, view) -> bool:
        if is_service_account(request):
            raise PermissionDenied("this route is for console users, not API keys")
        return True


class UserAPIView(APIView):
    """Routes of the signed-in person, across their organisations (not tenant-scoped)."""

    permission_classes = [IsAuthenticated, IsConsoleUser]

    def context(self, organisation=None, role: str = "") -> RequestContext:
        return RequestContext(
            organisation=organisation,
            role=role,
            user=self.request.user,
            ip=client_ip(self.request),
            user_agent=user_agent(self.request),
        )


class IsPlatformStaff(BasePermission):
    def has_permission(self, request, view) -> bool:
        if is_service_account(request) or not request.user.is_staff:
            raise PermissionDenied("platform routes are for Sluice staff only")
        return True


class PlatformAPIView(APIView):
    """Cross-tenant routes for platform staff (Django ``is_staff``), e.g. organisation quotas."""

    permission_classes = [IsAuthenticated, IsPlatformStaff]

    def context(self, organisation) -> RequestContext:
        return RequestContext(
            organisation=organisation,
            role="staff",
            user=self.request.user,
            ip=client_ip(self.request),
            user_agent=user_agent(self.request),
        )
