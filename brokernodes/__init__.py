# SLUICE_NATIVE=1: the compiled hot modules (brokernodes/native.py), installed before any
# of them is imported; without the variable this does nothing.
from brokernodes.native import install_from_env as _install_native

_install_native()
