"""Crash-safe replacement of segment files by cleaned ones: Kafka's ``.cleaned`` / ``.swap`` /
``.deleted`` protocol, as a plan of single file operations, and its recovery on log open.

Replacing segments ``S1..Sn`` (base offsets ``b1 < ... < bn``) by one cleaned segment ``N``
with base ``b1``:

1. ``N``'s files are written as ``<b1>.log.cleaned`` (and ``.index.cleaned`` etc. if any),
   fsynced (by the writer).
2. Index files ``.cleaned -> .swap``, then ``<b1>.log.cleaned -> <b1>.log.swap``, fsync the
   directory. The ``.log.swap`` rename is the commit point.
3. Every file of ``S1..Sn`` is renamed to ``<name>.deleted``; fsync.
4. ``<b1>.log.swap -> <b1>.log`` first, then the index ``.swap`` files; fsync.
5. The ``.deleted`` files are unlinked.

``complete_interrupted_swaps(dir)``, run on log open before segments are loaded, finishes or
undoes whatever a crash left:

- ``<b>.log.swap`` present: the swap committed and step 4 did not start, so every segment file
  with a base offset in ``[b, next offset of the swap log)`` is old; delete them and rename the
  ``.swap`` files to their final names (log first). The cleaner keeps the last batch of every
  group (empty if need be), so the swap log ends exactly where the segments it replaces ended.
- other ``.swap`` files (index files without their log): from an uncommitted step 2 or a step 4
  cut after the log's rename; delete them (indexes are caches, rebuilt by recovery).
- ``.cleaned`` and ``.deleted`` files: delete.

The segment being cleaned is never the active one, so nothing here races with appends.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from brokernodes.storage.cleaner_filter import next_offset_of_file
from brokernodes.storage.files import fsync_dir, segment_name

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
DELETED_SUFFIX = ".deleted"
LOG_EXT = ".log"
SEGMENT_EXTS = (".log", ".index", ".timeindex", ".txnindex")
"""Files that belong to a segment and go with it (producer ``.snapshot`` files do not)."""

_SEGMENT_FILE = re.compile(r"^(\d{20})(\.log|\.index|\.timeindex|\.txnindex)$")


def segment_file(directory: str, base_offset: int, ext: str) -> str:
    return os.path.join(directory, segment_name(base_offset, ext))


@dataclass(frozen=True)
class FileOp:
    """One step of a swap: ``rename`` src -> dst, ``unlink`` src, or ``fsync_dir``."""

    kind: str
    src: str = ""
    dst: str = ""

    def run(self) -> None:
        if self.kind == "rename":
            os.replace(self.src, self.dst)
        elif self.kind == "unlink":
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.src)
        elif self.kind == "fsync_dir":
            fsync_dir(self.src)
        else:  # pragma: no cover - programming error
            raise ValueError(self.kind)


def segment_files(directory: str, base_offset: int) -> list[str]:
    """The existing files of the segment at ``base_offset`` (final names only)."""
    out = []
    for ext in SEGMENT_EXTS:
        path = segment_file(directory, base_offset, ext)
        if os.path.exists(path):
            out.append(path)
    return out


def commit_plan(directory: str, new_base: int) -> list[FileOp]:
    """Step 2: the new segment's ``.cleaned`` files to ``.swap``, the log last."""
    exts = [e for e in SEGMENT_EXTS if e != LOG_EXT] + [LOG_EXT]
    ops = []
    for ext in exts:
        final = segment_file(directory, new_base, ext)
        if os.path.exists(final + CLEANED_SUFFIX):
            ops.append(FileOp("rename", final + CLEANED_SUFFIX, final + SWAP_SUFFIX))
    ops.append(FileOp("fsync_dir", directory))
    return ops


def replace_plan(directory: str, new_base: int, old_bases: Iterable[int]) -> list[FileOp]:
    """Steps 3-5: retire the old segments' files, give the new one its final names, delete."""
    ops: list[FileOp] = []
    old_files = [p for b in old_bases for p in segment_files(directory, b)]
    for path in old_files:
        ops.append(FileOp("rename", path, path + DELETED_SUFFIX))
    ops.append(FileOp("fsync_dir", directory))
    for ext in [LOG_EXT] + [e for e in SEGMENT_EXTS if e != LOG_EXT]:
        final = segment_file(directory, new_base, ext)
        if os.path.exists(final + SWAP_SUFFIX):
            ops.append(FileOp("rename", final + SWAP_SUFFIX, final))
    ops.append(FileOp("fsync_dir", directory))
    for path in old_files:
        ops.append(FileOp("unlink", path + DELETED_SUFFIX))
    return ops


def run_plan(ops: Iterable[FileOp], stop_after: int | None = None) -> None:
    """Run the operations in order; ``stop_after=k`` runs only the first ``k`` (crash tests)."""
    for i, op in enumerate(ops):
        if stop_after is not None and i >= stop_after:
            return
        op.run()


def complete_interrupted_swaps(
    directory: str | os.PathLike[str], log: Callable[[str], None] | None = None
) -> list[str]:
    """Finish or undo a segment swap cut short by a crash; call on log open, before loading
    segments. Returns a description of each action taken (for the log), empty if none.

    Each description names the ``<base>.<ext>.swap`` file involved when there is one:
    ``recovery.clean_directory`` reads those names to rebuild that segment's indexes.
    """
    directory = os.fspath(directory)
    actions: list[str] = []

    def note(msg: str) -> None:
        actions.append(msg)
        if log is not None:
            log(msg)

    names = sorted(os.listdir(directory))
    for name in names:
        if name.endswith(CLEANED_SUFFIX) or name.endswith(DELETED_SUFFIX):
            os.unlink(os.path.join(directory, name))
            note(f"deleted leftover {name}")
    swap_logs = sorted(n for n in names if n.endswith(LOG_EXT + SWAP_SUFFIX) and n[:20].isdigit())
    for name in swap_logs:
        base = int(name[:20])
        swap_path = os.path.join(directory, name)
        next_offset = next_offset_of_file(swap_path)
        end = base + 1 if next_offset is None else max(next_offset, base + 1)
        for other in sorted(os.listdir(directory)):
            m = _SEGMENT_FILE.match(other)
            if m and base <= int(m.group(1)) < end:
                os.unlink(os.path.join(directory, other))
                note(f"deleted {other}, replaced by swap segment {name}")
        for ext in [LOG_EXT] + [e for e in SEGMENT_EXTS if e != LOG_EXT]:
            final = segment_file(directory, base, ext)
            if os.path.exists(final + SWAP_SUFFIX):
                os.replace(final + SWAP_SUFFIX, final)
                note(f"renamed {os.path.basename(final)}{SWAP_SUFFIX} to its final name")
    for name in sorted(os.listdir(directory)):
        if name.endswith(SWAP_SUFFIX):
            os.unlink(os.path.join(directory, name))
            note(f"deleted {name}: index swap file without its log")
    if actions:
        fsync_dir(directory)
    return actions
