"""Signals for the parts that push key changes out (the metadata log, Channels consumers).

``api_key_revoked`` is sent after the revoking transaction commits, with ``key_id`` (the
stored id, without ``slk_``) and ``organisation_id``; a receiver can close the key's open
WebSockets and publish the removal to brokers. Authentication in this process already refuses
the key from the commit on, whether or not anyone listens.
"""

from django.dispatch import Signal

api_key_revoked = Signal()
