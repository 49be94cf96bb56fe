"""Compiled hot modules, opt-in: ``SLUICE_NATIVE=1`` loads a Cython build of the broker's
per-request modules instead of their pure-Python source, module by module, only where the
build was made from the source as it is now.

``infra/build_native.py`` (``make native``) compiles the modules named in ``MODULES`` from
their ``.py`` files (Cython's pure-Python mode: the ``.py`` file stays the only source) into
``var/native/`` (``SLUICE_NATIVE_DIR`` elsewhere) and writes ``manifest.json`` there: each
module's extension file and the sha256 of the source it was compiled from.

``install()`` puts ``NativeFinder`` first on ``sys.meta_path``. For a module in the manifest
it finds the source as the ordinary path finder would, hashes it, and returns the compiled
module's spec only when the hash is the recorded one (and the build is for this interpreter);
anything else (an edited source, a missing file, another Python, an unreadable manifest)
falls through to the pure-Python module. A stale build can never shadow edited code.

``brokernodes/__init__.py`` calls ``install_from_env()``, so every process that imports the
package with ``SLUICE_NATIVE=1`` in its environment (the broker, the benchmarks' brokers, a
test subprocess) gets the finder before any hot module is imported; without the variable
nothing is installed. See docs/native-build.md.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import sys
from pathlib import Path

__all__ = [
    "BUILD_DIR",
    "ENV_DIR",
    "ENV_FLAG",
    "MANIFEST",
    "MODULES",
    "NativeFinder",
    "build_dir",
    "describe",
    "enabled",
    "install",
    "install_from_env",
    "installed",
    "loaded",
    "source_sha256",
    "uninstall",
]

ENV_FLAG = "SLUICE_NATIVE"
ENV_DIR = "SLUICE_NATIVE_DIR"
BUILD_DIR = Path(__file__).resolve().parent.parent / "var" / "native"
MANIFEST = "manifest.json"

# The per-request hot path (a one-record Produce and a long-poll Fetch over the Kafka
# listener, a produce over HTTP), chosen from py-spy profiles of bench.request_cost.
MODULES: tuple[str, ...] = (
    "brokernodes.server.broker",
    "brokernodes.server.usage",
    "brokernodes.server.kafka.connection",
    "brokernodes.server.kafka.context",
    "brokernodes.server.kafka.framing",
    "brokernodes.server.kafka.handlers.produce",
    "brokernodes.server.kafka.handlers.produce_one",
    "brokernodes.server.kafka.handlers.fetch",
    "brokernodes.server.protocol.kafka.codec",
    "brokernodes.server.protocol.kafka.frames",
    "brokernodes.server.protocol.kafka.produce_request",
    "brokernodes.server.protocol.kafka.produce_answer",
    "brokernodes.server.protocol.kafka.fetch_answer",
    "brokernodes.server.replica.manager",
    "brokernodes.server.replica.partition",
    "brokernodes.server.replica.produce_checks",
    "brokernodes.server.http.fast",
    "brokernodes.server.protocol.http1",
    "brokernodes.server.auth",
    "brokernodes.storage.log",
    "brokernodes.storage.log_validator",
    "brokernodes.storage.segment",
    "brokernodes.storage.offset_index",
    "brokernodes.storage.time_index",
    "brokernodes.storage.producer_state",
    "brokernodes.records.batch",
    "brokernodes.records.header",
    "brokernodes.records.validator",
)


def enabled(environ: dict[str, str] | os._Environ = os.environ) -> bool:
    return environ.get(ENV_FLAG, "").strip().lower() in ("1", "true", "yes", "on")


def build_dir(environ: dict[str, str] | os._Environ = os.environ) -> Path:
    return Path(environ[ENV_DIR]) if environ.get(ENV_DIR) else BUILD_DIR


def source_sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def build_tag() -> dict[str, str]:
    """What a build must match besides the sources: this interpreter's extension ABI."""
    return {
        "cache_tag": sys.implementation.cache_tag or "",
        "ext_suffix": importlib.machinery.EXTENSION_SUFFIXES[0],
    }


class NativeFinder:
    """A ``sys.meta_path`` finder for the modules in one build's manifest."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.modules: dict[str, dict[str, str]] = {}
        self.loaded: set[str] = set()
        self.refused: dict[str, str] = {}  # module -> why it was loaded from source
        try:
            doc = json.loads((root / MANIFEST).read_text())
        except (OSError, ValueError):
            return
        if not isinstance(doc, dict) or doc.get("tag") != build_tag():
            return
        modules = doc.get("modules")
        if isinstance(modules, dict):
            self.modules = {
                name: entry
                for name, entry in modules.items()
                if isinstance(entry, dict) and {"file", "sha256"} <= entry.keys()
            }

    def matching(self) -> list[str]:
        """The modules of the build whose source is unchanged (the ones an import would
        load compiled), found without importing them."""
        out = []
        for name in sorted(self.modules):
            package, _, _ = name.rpartition(".")
            parent = importlib.util.find_spec(package) if package else None
            path = parent.submodule_search_locations if parent else None
            if self._spec(name, path, record=False) is not None:
                out.append(name)
        return out

    def find_spec(self, fullname: str, path=None, target=None):
        return self._spec(fullname, path, record=True)

    def _refuse(self, fullname: str, why: str, record: bool) -> None:
        if record:
            self.refused[fullname] = why

    def _spec(self, fullname: str, path, *, record: bool):
        entry = self.modules.get(fullname)
        if entry is None:
            return None
        source = importlib.machinery.PathFinder.find_spec(fullname, path)
        if source is None or not source.origin or not source.origin.endswith(".py"):
            return self._refuse(fullname, "no source module", record)
        try:
            current = source_sha256(source.origin)
        except OSError:
            return self._refuse(fullname, "source unreadable", record)
        if current != entry["sha256"]:
            return self._refuse(fullname, "source changed since the build", record)
        compiled = self.root / entry["file"]
        if not compiled.is_file():
            return self._refuse(fullname, "compiled file missing", record)
        loader = importlib.machinery.ExtensionFileLoader(fullname, str(compiled))
        if record:
            self.loaded.add(fullname)
            self.refused.pop(fullname, None)
        return importlib.util.spec_from_file_location(fullname, str(compiled), loader=loader)


_finder: NativeFinder | None = None


def install(root: Path | None = None) -> NativeFinder:
    """Put a finder for the build in ``root`` (default: ``build_dir()``) first on
    ``sys.meta_path``; idempotent for the same build directory."""
    global _finder
    root = root or build_dir()
    if _finder is not None and _finder.root == root and _finder in sys.meta_path:
        return _finder
    uninstall()
    _finder = NativeFinder(root)
    sys.meta_path.insert(0, _finder)
    return _finder


def uninstall() -> None:
    global _finder
    if _finder is not None and _finder in sys.meta_path:
        sys.meta_path.remove(_finder)
    _finder = None


def install_from_env() -> NativeFinder | None:
    """``install()`` when ``SLUICE_NATIVE`` is set, else nothing (and no finder)."""
    return install() if enabled() else None


def installed() -> NativeFinder | None:
    return _finder


def loaded() -> list[str]:
    """The modules imported so far from the compiled build (their ``__file__`` is the
    extension file), sorted."""
    if _finder is None:
        return []
    return sorted(
        name
        for name in _finder.loaded
        if getattr(sys.modules.get(name), "__file__", "").startswith(str(_finder.root))
    )


def describe() -> str:
    """One line for the broker's start-up log."""
    if _finder is None:
        return "native: off (pure Python)"
    names = loaded()
    line = f"native: {len(names)} compiled modules from {_finder.root}"
    if _finder.refused:
        refused = ", ".join(f"{n} ({why})" for n, why in sorted(_finder.refused.items()))
        line += f"; from source: {refused}"
    if not _finder.modules:
        line += "; no usable build (run `make native`)"
    return line
