"""The transaction coordinator on a broker (docs/transactions.md): the I/O shell around the
pure state machine in ``brokernodes.transactions``."""
