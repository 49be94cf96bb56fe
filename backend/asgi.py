"""ASGI entry point (Daphne in ``make up``): HTTP goes to Django; WebSockets under /ws/ go to
Channels consumers, behind the Origin check (ALLOWED_HOSTS) and the session/auth middleware.
Under Daphne the stop is bounded (backend/asgi_shutdown.py): from SIGTERM on, new requests
are refused, requests in progress are released, and the process exits within the deadline."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "backend.settings.local")
django_asgi = get_asgi_application()  # sets Django up before the consumers are imported

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from backend.asgi_aborts import AbortSignal  # noqa: E402
from backend.asgi_shutdown import StopGate, install  # noqa: E402
from backend.console.routing import websocket_urlpatterns  # noqa: E402
from backend.core import daphne_body_limit  # noqa: E402
from backend.core.asgi_body_limit import BodyLimit  # noqa: E402

application = StopGate(
    ProtocolTypeRouter(
        {
            # long polls end when their client goes or the server stops (asgi_aborts.py);
            # bodies over the limit are refused before Django spools them (413)
            "http": AbortSignal(BodyLimit(django_asgi)),
            "websocket": AllowedHostsOriginValidator(
                AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
            ),
        }
    )
)
install(application)  # only under Daphne's reactor
daphne_body_limit.install()  # Daphne buffers bodies before the application sees them
