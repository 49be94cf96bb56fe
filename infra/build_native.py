"""``python infra/build_native.py [--out DIR] [--jobs N]`` (``make native``): compile the
broker's hot modules (``brokernodes.native.MODULES``) from their ``.py`` files with Cython 3
in pure-Python mode, into ``var/native/`` (outside the source tree), and write its
``manifest.json`` (each module's extension file and its source's sha256).

Directives keep Python semantics: ``annotation_typing=False`` (an annotation never becomes a
C type, so an ``int`` stays a Python int), ``binding=True`` (functions are ordinary function
objects: introspection, ``functools.wraps``, pickling by name), ``language_level=3``.

The build is incremental: a module whose source hash, Cython version and directives match the
manifest is not compiled again, so a second run (or the integration test after ``make
native``) takes a second. A module that fails to compile is left out of the manifest (the
broker imports its pure-Python source) and reported; the exit status is then 1.
See docs/native-build.md.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from brokernodes import native  # noqa: E402

DIRECTIVES = {
    "language_level": 3,
    "annotation_typing": False,
    "binding": True,
    "emit_code_comments": False,
}
CFLAGS = ["-O2", "-g0", "-Wno-maybe-uninitialized", "-Wno-unused-function"]
# gcc's false alarms on Cython's inlined helpers; not part of the build key.
QUIET = ["-Wno-array-bounds", "-Wno-stringop-overread"]


def _build_key() -> str:
    import Cython

    doc = {"cython": Cython.__version__, "directives": DIRECTIVES, "cflags": CFLAGS}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


def _source(module: str, root: Path) -> Path:
    return root / (module.replace(".", "/") + ".py")


def _read_manifest(out: Path) -> dict:
    try:
        doc = json.loads((out / native.MANIFEST).read_text())
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _compile_one(module: str, source: Path, out: Path, tmp: Path) -> str:
    """Cythonize and compile one module; returns its extension file relative to ``out``."""
    from Cython.Build import cythonize
    from setuptools import Distribution, Extension
    from setuptools.command.build_ext import build_ext

    ext = Extension(module, [str(source)], extra_compile_args=CFLAGS + QUIET)
    # build_dir keeps the generated C out of the source tree; tracebacks still name the
    # real .py file and line.
    [ext] = cythonize(
        [ext],
        compiler_directives=DIRECTIVES,
        build_dir=str(tmp / "c"),
        quiet=True,
        force=True,
    )
    cmd = build_ext(Distribution({"ext_modules": [ext]}))
    cmd.build_lib = str(out / "lib")
    cmd.build_temp = str(tmp / "obj" / module)
    cmd.ensure_finalized()
    cmd.run()
    return str(Path(cmd.get_ext_fullpath(module)).resolve().relative_to(out.resolve()))


def _compile(modules: dict[str, str], root: Path, out: Path, jobs: int) -> dict[str, str]:
    """Compile the modules (name -> the sha256 of the source that was read) ``jobs`` at a
    time; returns module -> extension file for the ones that built from that source."""
    from concurrent.futures import ThreadPoolExecutor

    built: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="sluice-native-") as tmp:

        def one(module: str) -> tuple[str, str | None]:
            started = time.monotonic()
            try:
                file = _compile_one(module, _source(module, root), out, Path(tmp))
            except Exception as e:  # reported; the module stays pure Python
                print(f"  {module}: failed: {e!r}", file=sys.stderr, flush=True)
                return module, None
            print(f"  {module}: {time.monotonic() - started:.1f}s", flush=True)
            return module, file

        with ThreadPoolExecutor(max(1, jobs)) as pool:
            for module, file in pool.map(one, sorted(modules)):
                if file is None:
                    continue
                if _sha256(_source(module, root)) != modules[module]:
                    print(f"  {module}: source changed during the build, left out", file=sys.stderr)
                    continue
                built[module] = file
    return built


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def build(
    out: Path,
    modules: tuple[str, ...] = native.MODULES,
    jobs: int = 2,
    root: Path = REPO,
) -> dict:
    """Bring the build in ``out`` of ``modules`` (their sources under ``root``) up to date
    with the sources; returns the manifest."""
    out.mkdir(parents=True, exist_ok=True)
    key = _build_key()
    old = _read_manifest(out)
    same_build = old.get("build_key") == key and old.get("tag") == native.build_tag()
    old_modules = old.get("modules", {}) if same_build else {}
    entries: dict[str, dict[str, str]] = {}
    todo: dict[str, str] = {}
    for module in modules:
        digest = _sha256(_source(module, root))
        entry = old_modules.get(module)
        if entry and entry.get("sha256") == digest and (out / entry["file"]).is_file():
            entries[module] = entry
        else:
            todo[module] = digest
    if todo:
        print(f"compiling {len(todo)} of {len(modules)} modules into {out}", flush=True)
        for module, file in _compile(todo, root, out, jobs).items():
            entries[module] = {"file": file, "sha256": todo[module]}
    doc = {
        "build_key": key,
        "tag": native.build_tag(),
        "modules": dict(sorted(entries.items())),
        "failed": sorted(set(modules) - entries.keys()),
    }
    tmp = out / (native.MANIFEST + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    os.replace(tmp, out / native.MANIFEST)
    return doc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="build_native", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=native.build_dir(), help="build directory")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--clean", action="store_true", help="remove the build first")
    args = parser.parse_args(argv)
    if args.clean:
        shutil.rmtree(args.out, ignore_errors=True)
    doc = build(args.out, jobs=args.jobs)
    print(f"{len(doc['modules'])} compiled modules in {args.out}")
    if doc["failed"]:
        print(f"left as pure Python (failed): {', '.join(doc['failed'])}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
