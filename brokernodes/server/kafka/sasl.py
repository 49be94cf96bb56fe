"""SASL/PLAIN for the Kafka listener: the API key id is the user name and its secret the
password (Confluent Cloud's convention). The credentials become the same bearer header the
HTTP front checks, so authentication and authorization stay one choke point
(``Broker.authorize``). Pure: no I/O."""

from __future__ import annotations

from dataclasses import dataclass

MECHANISMS = ("PLAIN",)


class SaslError(ValueError):
    """The client's SASL exchange cannot succeed (the message names why)."""


@dataclass(frozen=True, slots=True)
class PlainCredentials:
    key_id: str
    secret: str

    @property
    def bearer(self) -> str:
        """The HTTP front's ``Authorization`` value for these credentials."""
        return f"Bearer {self.key_id}.{self.secret}"


def parse_plain(token: bytes) -> PlainCredentials:
    """RFC 4616: ``[authzid] NUL authcid NUL passwd``. An authzid, if sent, must equal the
    user name (no acting as someone else)."""
    parts = bytes(token).split(b"\x00")
    if len(parts) != 3:
        raise SaslError("a SASL/PLAIN token is [authzid] NUL username NUL password")
    try:
        authzid, user, password = (p.decode("utf-8") for p in parts)
    except UnicodeDecodeError:
        raise SaslError("SASL/PLAIN user name and password must be UTF-8") from None
    if not user or not password:
        raise SaslError(
            "SASL/PLAIN needs the API key id as the user name and its secret as the password"
        )
    if authzid and authzid != user:
        raise SaslError("SASL/PLAIN authorization id must be empty or equal the user name")
    if "." in user:
        raise SaslError(
            "the SASL user name is the API key id alone (the part before the '.'), and the "
            "password the secret after it"
        )
    return PlainCredentials(user, password)
