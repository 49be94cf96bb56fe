"""Hostile inputs for every operation of the committed OpenAPI schema: a body nested far too
deep, a body over the request limit, and integers past int64 in each integer query, path and
body field. Shared by the unit walk (Django's test client) and the integration walk (the
real control plane over HTTP): no case may answer a 5xx."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml

SCHEMA = Path(__file__).resolve().parents[3] / "backend" / "openapi.yaml"
HUGE = 2**64
DEEP_BODY = "[" * 100_000 + "]" * 100_000
METHODS = ("get", "post", "put", "patch", "delete")


@dataclass(frozen=True)
class Case:
    """One request: ``what`` names the hostile part (for assertion messages)."""

    operation: str
    method: str
    path: str
    query: str
    body: str | bytes | None
    what: str

    @property
    def url(self) -> str:
        return f"{self.path}?{self.query}" if self.query else self.path


def operations() -> list[tuple[str, str, dict]]:
    """(method, path template, operation) for every operation; deletes last so the objects
    they would remove still exist for the other cases."""
    doc = yaml.safe_load(SCHEMA.read_text())
    ops = [
        (method, path, op)
        for path, item in doc["paths"].items()
        for method, op in item.items()
        if method in METHODS
    ]
    return sorted(ops, key=lambda o: o[0] == "delete")


def _schema_of(doc: dict, schema: dict) -> dict:
    ref = schema.get("$ref")
    if ref:
        name = ref.rsplit("/", 1)[-1]
        return doc["components"]["schemas"][name]
    return schema


def _integer_body_fields(op: dict) -> list[str]:
    doc = yaml.safe_load(SCHEMA.read_text()) if not hasattr(_integer_body_fields, "doc") else None
    if doc is not None:
        _integer_body_fields.doc = doc  # type: ignore[attr-defined]
    doc = _integer_body_fields.doc  # type: ignore[attr-defined]
    content = (op.get("requestBody") or {}).get("content", {}).get("application/json")
    if not content:
        return []
    schema = _schema_of(doc, content["schema"])
    return [
        name
        for name, prop in (schema.get("properties") or {}).items()
        if _schema_of(doc, prop).get("type") == "integer"
    ]


def cases(path_values: dict[str, str], max_body_bytes: int) -> Iterator[Case]:
    """Every hostile case; ``path_values`` fills path parameters (existing objects, so the
    request gets as far as reading its input)."""
    for method, template, op in operations():
        params = op.get("parameters", [])
        path = template
        for p in params:
            if p["in"] == "path":
                path = path.replace("{" + p["name"] + "}", path_values.get(p["name"], "x"))
        oid = op.get("operationId", f"{method} {template}")
        m = method.upper()
        yield Case(oid, m, path, "", DEEP_BODY, "a body nested 100,000 deep")
        yield Case(oid, m, path, "", b"[" + b"0," * (max_body_bytes // 2) + b"0]", "a large body")
        for p in params:
            kind = p.get("schema", {}).get("type")
            if p["in"] == "query" and kind in ("integer", "number"):
                for value in (str(HUGE), str(-HUGE), "1e999", "NaN"):
                    yield Case(oid, m, path, f"{p['name']}={value}", None, f"?{p['name']}={value}")
            if p["in"] == "path" and kind == "integer":
                bad = template.replace("{" + p["name"] + "}", str(HUGE))
                yield Case(oid, m, bad, "", None, f"path {p['name']}={HUGE}")
        for name in _integer_body_fields(op):
            for value in (HUGE, -HUGE):
                yield Case(oid, m, path, "", json.dumps({name: value}), f"body {name}={value}")


def problem(case: Case, status: int, body: bytes) -> str | None:
    """Why an answer is wrong (None: fine): a 5xx, or an error that is not the JSON shape."""
    if status >= 500:
        return f"{case.method} {case.url} ({case.what}) -> {status}: {body[:200]!r}"
    if status >= 400:
        try:
            doc = json.loads(body)
        except ValueError:
            return f"{case.method} {case.url} ({case.what}) -> {status}, not JSON: {body[:200]!r}"
        if not isinstance(doc, dict) or not doc.get("error_code"):
            return f"{case.method} {case.url} ({case.what}) -> {status} without error_code"
        if case.what == "a large body" and status != 413:
            return f"{case.method} {case.url}: a large body -> {status}, not 413"
    return None
