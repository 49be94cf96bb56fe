"""Cluster metadata as the broker sees it: the model (``cluster``), the control plane's
metadata log applied (``image``, pure) and the client that follows that log (``client``)."""
