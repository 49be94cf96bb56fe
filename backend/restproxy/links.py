"""Confluent's resource addresses: ``metadata.self`` (an absolute URL), ``resource_name``
(a CRN, ``crn:///kafka=<cluster>/topic=<name>``) and related links (``{"related": url}``).

The base URL is the one the client called: a broker passing a request through names the
host the client used in ``X-Forwarded-Host`` (and the scheme in ``X-Forwarded-Proto``), so
links point at the broker the client knows, not at the control plane behind it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote, urlencode

_HOST = re.compile(r"[A-Za-z0-9.\-]{1,253}(:[0-9]{1,5})?|\[[0-9A-Fa-f:.]{2,45}\](:[0-9]{1,5})?")


def base_url(request) -> str:
    """``scheme://host[:port]`` as the client addressed it."""
    forwarded = (request.headers.get("X-Forwarded-Host") or "").split(",")[0].strip()
    host = forwarded if _HOST.fullmatch(forwarded) else request.get_host()
    proto = (request.headers.get("X-Forwarded-Proto") or "").strip().lower()
    scheme = proto if forwarded and proto in ("http", "https") else request.scheme
    return f"{scheme}://{host}"


@dataclass(frozen=True, slots=True)
class Links:
    base: str  # scheme://host[:port]
    cluster_id: str

    def clusters(self) -> str:
        return f"{self.base}/v3/clusters"

    def url(self, *parts: object, query: dict | None = None) -> str:
        """The URL of ``/v3/clusters/<id>/<parts...>`` (each part quoted)."""
        path = "/".join(quote(str(p), safe=":") for p in (self.cluster_id, *parts))
        tail = f"?{urlencode(query)}" if query else ""
        return f"{self.clusters()}/{path}{tail}"

    def related(self, *parts: object) -> dict:
        return {"related": self.url(*parts)}

    def crn(self, *pairs: tuple[str, object]) -> str:
        return "/".join([f"crn:///kafka={self.cluster_id}", *(f"{k}={v}" for k, v in pairs)])

    def metadata(self, parts: tuple, pairs: tuple) -> dict:
        return {"self": self.url(*parts), "resource_name": self.crn(*pairs)}

    def listing(self, kind: str, data: list, *parts: object, query: dict | None = None) -> dict:
        """A Confluent list: everything on one page, so ``next`` is null."""
        url = self.url(*parts, query=query) if parts else self.clusters()
        return {"kind": kind, "metadata": {"self": url, "next": None}, "data": data}
