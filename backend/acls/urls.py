from django.urls import path

from backend.acls import apis

urlpatterns = [
    path("acls/", apis.AclListApi.as_view(), name="acls"),
    path("acls/<uuid:acl_id>", apis.AclDetailApi.as_view(), name="acl-detail"),
]
