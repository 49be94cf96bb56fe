from django.urls import path, register_converter

from backend.core.converters import KeyIdConverter
from backend.keys import apis

register_converter(KeyIdConverter, "keyid")

urlpatterns = [
    path("api-keys/", apis.ApiKeyListApi.as_view(), name="api-keys"),
    path("api-keys/<keyid:key_id>", apis.ApiKeyDetailApi.as_view(), name="api-key-detail"),
]
