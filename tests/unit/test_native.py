"""The compiled-modules finder (brokernodes/native.py) over a real Cython build of a tiny
package: a matching build loads compiled, an edited source loads pure Python, a build for
another interpreter or no build loads pure Python, and without SLUICE_NATIVE nothing is
installed."""

from __future__ import annotations

import importlib
import inspect
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from brokernodes import native

pytest.importorskip("Cython", reason="the native build needs Cython (make native)")

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "infra"))
import build_native  # noqa: E402

SOURCE = """
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Point:
    x: int
    y: int = 0


def add(a: int, b: int) -> int:
    return a + b


def big() -> int:
    n: int = 2**62
    return n * 4  # a Python int: annotations never become C types
"""


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, Path]]:
    """A package with modules ``fresh``, ``stale`` and ``other`` compiled into ``out``;
    yields (package name, source root, build dir)."""
    root = tmp_path_factory.mktemp("src")
    out = tmp_path_factory.mktemp("native")
    package = f"nativeprobe_{uuid.uuid4().hex[:8]}"
    (root / package).mkdir()
    (root / package / "__init__.py").write_text("")
    modules = tuple(f"{package}.{m}" for m in ("fresh", "stale"))
    for name in modules:
        (root / (name.replace(".", "/") + ".py")).write_text(SOURCE)
    doc = build_native.build(out, modules, jobs=2, root=root)
    assert sorted(doc["modules"]) == sorted(modules) and doc["failed"] == []
    sys.path.insert(0, str(root))
    try:
        yield package, root, out
    finally:
        sys.path.remove(str(root))
        native.uninstall()
        for name in [m for m in sys.modules if m.startswith(package)]:
            del sys.modules[name]


def test_matching_build_loads_compiled(probe):
    package, _root, out = probe
    native.install(out)
    mod = importlib.import_module(f"{package}.fresh")
    assert mod.__file__.startswith(str(out)) and mod.__file__.endswith(".so")
    assert type(mod.add).__name__ == "cython_function_or_method"  # compiled
    assert list(inspect.signature(mod.add).parameters) == ["a", "b"]  # binding=True
    assert mod.add(2, 3) == 5 and mod.add("a", "b") == "ab"  # still duck-typed
    assert mod.big() == 2**64  # no C overflow
    assert mod.Point(1) == mod.Point(1, 0)
    assert native.loaded() == [f"{package}.fresh"]
    assert native.describe().startswith(f"native: 1 compiled modules from {out}")


def test_edited_source_loads_pure_python(probe):
    package, root, out = probe
    (root / package / "stale.py").write_text(SOURCE + "\nEDITED = True\n")
    finder = native.install(out)
    mod = importlib.import_module(f"{package}.stale")
    assert mod.__file__ == str(root / package / "stale.py")
    assert mod.EDITED is True
    assert f"{package}.stale" not in native.loaded()
    assert finder.refused[f"{package}.stale"] == "source changed since the build"
    assert "source changed since the build" in native.describe()
    # what the benchmark records: the modules an import would load compiled
    assert native.NativeFinder(out).matching() == [f"{package}.fresh"]


def test_build_is_incremental_by_source_hash(probe):
    package, root, out = probe
    before = json.loads((out / native.MANIFEST).read_text())
    doc = build_native.build(out, (f"{package}.fresh",), jobs=1, root=root)
    assert doc["modules"][f"{package}.fresh"] == before["modules"][f"{package}.fresh"]


def test_build_for_another_interpreter_is_ignored(probe, tmp_path):
    package, _root, out = probe
    doc = json.loads((out / native.MANIFEST).read_text())
    doc["tag"] = {**doc["tag"], "cache_tag": "cpython-399"}
    (tmp_path / native.MANIFEST).write_text(json.dumps(doc))
    finder = native.NativeFinder(tmp_path)
    assert finder.modules == {}
    assert finder.find_spec(f"{package}.fresh") is None


def test_no_build_means_pure_python(tmp_path):
    finder = native.install(tmp_path / "missing")
    try:
        assert finder.modules == {}
        assert native.describe().endswith("no usable build (run `make native`)")
    finally:
        native.uninstall()


def _finders_in_fresh_process(env: dict[str, str]) -> dict:
    code = (
        "import json, sys, brokernodes.storage.log as log\n"
        "from brokernodes import native\n"
        "print(json.dumps({'installed': native.installed() is not None,"
        " 'finders': [type(f).__name__ for f in sys.meta_path], 'log': log.__file__}))"
    )
    run = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(run.stdout)


def test_without_the_env_var_nothing_is_installed(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != native.ENV_FLAG}
    got = _finders_in_fresh_process(env)
    assert got["installed"] is False and "NativeFinder" not in got["finders"]
    assert got["log"] == str(REPO / "brokernodes" / "storage" / "log.py")
    # with it (and an empty build directory) the finder is first, the modules pure Python
    got = _finders_in_fresh_process({**env, native.ENV_FLAG: "1", native.ENV_DIR: str(tmp_path)})
    assert got["installed"] is True and got["finders"][0] == "NativeFinder"
    assert got["log"] == str(REPO / "brokernodes" / "storage" / "log.py")
