from django.urls import path

from backend.groups import apis

urlpatterns = [
    path("groups/", apis.GroupListApi.as_view(), name="groups"),
    path("groups/<str:group_id>/", apis.GroupDetailApi.as_view(), name="group-detail"),
    path(
        "groups/<str:group_id>/reset-offsets",
        apis.GroupResetOffsetsApi.as_view(),
        name="group-reset-offsets",
    ),
    path(
        "groups/<str:group_id>/reset-offsets/<uuid:reset_id>/undo",
        apis.GroupResetUndoApi.as_view(),
        name="group-reset-offsets-undo",
    ),
]
