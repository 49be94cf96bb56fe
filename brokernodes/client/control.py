"""``ControlPlane``: the SDK's client of the control plane's REST API (``/api/v1/``) for what
brokers do not do: creating, altering and deleting topics, adding partitions, and ACLs.

It authenticates with the same API key as the data plane (``Authorization: Bearer``); the
key's service account decides the organisation and the role (topics need ``member``, ACLs
``admin``). Blocking (stdlib ``urllib``): these are rare administrative calls; ``AsyncAdmin``
runs them in a thread. Every refusal raises ``ControlPlaneError`` with the control plane's
``error_code``, message and field errors, so a caller can show them as they are.
"""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import quote, urlencode

import orjson

from brokernodes.errors import SluiceError

__all__ = ["DEFAULT_URL", "ControlPlane", "ControlPlaneError"]

DEFAULT_URL = "http://127.0.0.1:8000"


class ControlPlaneError(SluiceError):
    """A refusal of the control plane: ``error_code``, ``message``, ``status``, ``fields``."""

    def __init__(
        self, error_code: str, message: str, status: int, fields: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.status = status
        self.fields = fields or {}

    def __str__(self) -> str:
        text = f"{self.error_code}: {self.message}"
        for field, problems in self.fields.items():
            items = problems if isinstance(problems, list) else [problems]
            text += f"\n  {field}: " + " ".join(str(p) for p in items)
        return text


class ControlPlane:
    """``ControlPlane(url, api_key)``; ``url`` defaults to ``$SLUICE_CONTROL_PLANE_URL``."""

    def __init__(
        self, url: str | None = None, api_key: str | None = None, *, timeout: float = 30.0
    ) -> None:
        self.url = (url or os.environ.get("SLUICE_CONTROL_PLANE_URL") or DEFAULT_URL).rstrip("/")
        self._api_key = api_key or os.environ.get("SLUICE_API_KEY")
        self.timeout = timeout

    def __repr__(self) -> str:  # never shows the key
        return f"ControlPlane({self.url!r})"

    # --- topics ------------------------------------------------------------------------

    def list_topics(self, prefix: str | None = None) -> list[dict[str, Any]]:
        query = f"?{urlencode({'prefix': prefix})}" if prefix else ""
        return self._call("GET", f"topics/{query}")

    def describe_topic(self, name: str) -> dict[str, Any]:
        return self._call("GET", f"topics/{quote(name, safe='')}")

    def create_topic(
        self,
        name: str,
        partitions: int | None = None,
        replication_factor: int | None = None,
        configs: dict[str, str] | None = None,
        *,
        validate_only: bool = False,
    ) -> dict[str, Any]:
        """Create a topic; partitions or replication factor left out get the control plane's
        defaults (``GET /api/v1/topic-config-definitions`` says which)."""
        body: dict[str, Any] = {
            "name": name,
            "configs": {k: str(v) for k, v in (configs or {}).items()},
            "validate_only": validate_only,
        }
        if partitions is not None:
            body["partitions"] = partitions
        if replication_factor is not None:
            body["replication_factor"] = replication_factor
        return self._call("POST", "topics/", body)

    def alter_topic_configs(
        self, name: str, configs: dict[str, str | None], *, validate_only: bool = False
    ) -> dict[str, Any]:
        """Set configs (a ``None`` value removes the override, back to the default)."""
        body = {"configs": configs, "validate_only": validate_only}
        return self._call("PATCH", f"topics/{quote(name, safe='')}", body)

    def add_partitions(
        self, name: str, partitions: int, *, validate_only: bool = False
    ) -> dict[str, Any]:
        """Grow the topic to ``partitions`` in all (never shrinks, as in Kafka)."""
        body = {"partitions": partitions, "validate_only": validate_only}
        return self._call("POST", f"topics/{quote(name, safe='')}/partitions", body)

    def delete_topic(self, name: str) -> None:
        self._call("DELETE", f"topics/{quote(name, safe='')}")

    # --- ACLs --------------------------------------------------------------------------

    def list_acls(self, **filters: str) -> list[dict[str, Any]]:
        query = urlencode({k: v for k, v in filters.items() if v})
        return self._call("GET", "acls/" + (f"?{query}" if query else ""))

    def create_acl(
        self,
        principal: str,
        resource_type: str,
        resource_name: str,
        operation: str,
        permission: str = "ALLOW",
        *,
        pattern_type: str = "LITERAL",
        host: str = "*",
    ) -> dict[str, Any]:
        body = {
            "principal": principal,
            "host": host,
            "resource_type": resource_type,
            "resource_name": resource_name,
            "pattern_type": pattern_type,
            "operation": operation,
            "permission": permission,
        }
        return self._call("POST", "acls/", body)

    def delete_acl(self, acl_id: str) -> None:
        self._call("DELETE", f"acls/{quote(acl_id, safe='')}")

    # --- HTTP --------------------------------------------------------------------------

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        if not self._api_key:
            raise ControlPlaneError(
                "NOT_AUTHENTICATED", "no API key: pass api_key or set SLUICE_API_KEY", 401
            )
        data = orjson.dumps(body) if body is not None else None
        request = urllib.request.Request(f"{self.url}/api/v1/{path}", data=data, method=method)
        request.add_header("Authorization", f"Bearer {self._api_key}")
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read()
                return orjson.loads(raw) if raw else None
        except urllib.error.HTTPError as e:
            with e:
                raw = e.read()
            raise _refusal(e.code, raw) from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise ControlPlaneError(
                "CONTROL_PLANE_UNAVAILABLE",
                f"cannot reach the control plane at {self.url} ({reason}); check "
                "--control-plane / SLUICE_CONTROL_PLANE_URL",
                503,
            ) from None


def _refusal(status: int, raw: bytes) -> ControlPlaneError:
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        body = None
    if not isinstance(body, dict) or "error_code" not in body:
        return ControlPlaneError(
            "UNKNOWN_SERVER_ERROR", f"the control plane answered HTTP {status}", status
        )
    return ControlPlaneError(
        str(body["error_code"]), str(body.get("message", "")), status, body.get("fields")
    )
