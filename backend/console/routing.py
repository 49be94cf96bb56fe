from django.urls import path

from backend.console.consumers import LiveTailConsumer

websocket_urlpatterns = [path("ws/console/tail", LiveTailConsumer.as_asgi())]
