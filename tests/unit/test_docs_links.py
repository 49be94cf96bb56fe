"""The README and docs/ stand on their own: every relative link and every docs/*.md they name
exists in the repository, nothing points outside it, and docs/ reads as a record of how the
system works (no commit hashes, no session diaries)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
DOC_NAME = re.compile(r"(?<![\w/.])docs/([\w-]+\.md)")
HASH = re.compile(r"(?<![\w-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}(?![\w-])")
DIARY = re.compile(
    r"this session|next session|previous session|earlier session|tried and dropped"
    r"|\brun [1-9]\b|until the [\w -]+ issue",
    re.IGNORECASE,
)
OUTSIDE = re.compile(r"\.\./shared|\b(?:DESIGN|BENCH|STACK)\.md\b")


def _id(page: Path) -> str:
    return str(page.relative_to(ROOT))


def _without_code_blocks(text: str) -> str:
    return re.sub(r"```.*?```", "", text, flags=re.DOTALL)


@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_relative_links_resolve(page):
    text = _without_code_blocks(page.read_text())
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path = target.split("#", 1)[0]
        if not (page.parent / path).exists():
            broken.append(target)
    for name in DOC_NAME.findall(text):
        if not (ROOT / "docs" / name).exists():
            broken.append(f"docs/{name}")
    assert not broken, f"{_id(page)} names files that do not exist: {broken}"


@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_nothing_points_outside_the_repository(page):
    found = OUTSIDE.findall(page.read_text())
    assert not found, f"{_id(page)} refers to files a user of the project does not have: {found}"


@pytest.mark.parametrize("page", PAGES[1:], ids=_id)
def test_docs_hold_no_commit_hashes_or_diaries(page):
    text = page.read_text()
    hashes = HASH.findall(text)
    diary = DIARY.findall(text)
    assert not hashes, f"{_id(page)} names commits (say what the code does instead): {hashes}"
    assert not diary, f"{_id(page)} reads as a diary (state how it works now): {diary}"


def test_the_patterns_catch_what_they_are_for():
    assert HASH.findall("measured at 0476fc4 and d44970f") == ["0476fc4", "d44970f"]
    assert not HASH.findall("00000000000000000000.log, 1048576 bytes, a deadbeef word, sk_abc1234")
    assert DIARY.findall("Tried and dropped: x. This session's runs") == [
        "Tried and dropped",
        "This session",
    ]
    assert DIARY.findall("## Auth (until the control plane issue)")
    assert OUTSIDE.findall("see ../shared/DESIGN.md") == ["../shared", "DESIGN.md"]
    assert LINK.findall("[a](docs/x.md) and [b](https://e.org)") == ["docs/x.md", "https://e.org"]
