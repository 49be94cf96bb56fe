"""Real processes on loopback for integration tests, fault tests and benchmarks.

``harness.broker``: brokers from static metadata; ``harness.cluster``: brokers replicating
from static metadata; ``harness.control_plane``: the control plane with brokers and
controllers pulling metadata from it. Not part of the installed package: tests/ and bench/
import it from the repository.
"""
