from django.urls import path

from backend.tenancy import apis

urlpatterns = [
    path("auth/csrf", apis.CsrfApi.as_view(), name="auth-csrf"),
    path("auth/login", apis.LoginApi.as_view(), name="auth-login"),
    path("auth/logout", apis.LogoutApi.as_view(), name="auth-logout"),
    path("auth/me", apis.MeApi.as_view(), name="auth-me"),
    path("auth/organisation", apis.SelectOrganisationApi.as_view(), name="auth-organisation"),
    path("auth/invitations", apis.MyInvitationListApi.as_view(), name="auth-invitations"),
    path(
        "auth/invitations/<uuid:invitation_id>/accept",
        apis.MyInvitationAcceptApi.as_view(),
        name="auth-invitation-accept",
    ),
    path(
        "auth/invitations/<uuid:invitation_id>/decline",
        apis.MyInvitationDeclineApi.as_view(),
        name="auth-invitation-decline",
    ),
    path("organisations/", apis.OrganisationListApi.as_view(), name="organisations"),
    path("organisation", apis.CurrentOrganisationApi.as_view(), name="organisation"),
    path("members/", apis.MemberListApi.as_view(), name="members"),
    path("members/<uuid:membership_id>", apis.MemberDetailApi.as_view(), name="member-detail"),
    path("invitations/", apis.InvitationListApi.as_view(), name="invitations"),
    path(
        "invitations/<uuid:invitation_id>",
        apis.InvitationDetailApi.as_view(),
        name="invitation-detail",
    ),
    path("service-accounts/", apis.ServiceAccountListApi.as_view(), name="service-accounts"),
    path(
        "service-accounts/<uuid:service_account_id>",
        apis.ServiceAccountDetailApi.as_view(),
        name="service-account-detail",
    ),
]
