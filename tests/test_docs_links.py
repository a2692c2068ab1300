"""The docs' links resolve, and the reference pages carry no dated narrative.

For README.md, CHANGELOG.md and every docs/*.md: each relative markdown link `[text](path)` or
`[text](path#anchor)` names a file inside the repository, and each `#anchor` matches a heading of the target page
under GitHub's anchor rules. External links (http, https, mailto) are not checked. Dates (YYYY-MM-DD) belong in
CHANGELOG.md and the two measurement pages (docs/performance.md, docs/benchmarks.md), not in the reference pages.

No Spark, no AWS, no network: it reads the markdown files only.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

# README.md is being rewritten by someone else: its links all resolved when this test was written, so its case is not
# marked. Should the rewrite break one for a while, mark it with
# pytest.mark.xfail(strict=False, reason="README rewrite in progress") in link_cases below.

# pages where dated entries are the point: measurements and their history, and the changelog
DATED_PAGES = {"CHANGELOG.md", "docs/performance.md", "docs/benchmarks.md"}

# (page, exact date) -> why a reference page legitimately names that date. A date inside a link's target (an anchor
# into docs/performance.md, whose headings are dated) is not a narrative and is not looked at.
DATE_ALLOW: dict[tuple[str, str], str] = {
    ("docs/datasets.md", "2000-01-01"): "the default of dataset.json event_time.not_before",
    ("docs/streaming-job.md", "2000-01-01"): "the contract's earliest event_time (not_before's default)",
    ("docs/infrastructure.md", "2000-01-01"): "partition projection starts at not_before's default",
    ("docs/streaming-job.md", "2023-11-14"): "an example partition in the lake and dead-letter file layout",
    ("docs/compaction.md", "2026-11-02"): "an example partition in the compaction log entry's format",
    ("docs/operations.md", "2024-05-01"): "an example --ingest-date / --hour in the usage lines",
    ("docs/iceberg.md", "2026-11-25"): "the 'as stored on' date of AWS's Glue Iceberg page the version table cites",
    ("docs/iceberg.md", "2026-11-26"): "the date the cited AWS list prices were read (the pages carry none)",
}

DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
FENCE = re.compile(r"^\s*(```|~~~)")
# [text](target) or [text](target "title"); images ![..](..) too. The text may hold backticks and brackets one deep.
LINK = re.compile(
    r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^()\s<>]+(?:\([^()\s]*\))?[^()\s<>]*)>?(?:\s+\"[^\"]*\")?\s*\)"
)
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"", re.IGNORECASE)
LINK_TARGET = re.compile(r"\]\([^)\s]*\)")
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)  # http:, https:, mailto:, ...


def pages() -> list[Path]:
    found = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted(DOCS.glob("*.md"))]
    return [page for page in found if page.exists()]


def rel(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def prose_lines(text: str, blank_code: bool = True) -> list[tuple[int, str]]:
    """The page's lines outside fenced code blocks, with their line numbers; inline code spans blanked unless told."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((number, re.sub(r"(`+)(?:(?!\1).)+?\1", "``", line) if blank_code else line))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup dropped, lower case, punctuation but '-' and '_' removed, spaces to '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = re.sub(r"<[^>]+>", "", text)  # inline html
    text = text.replace("`", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)  # \w keeps letters, digits and '_' (unicode letters too, as GitHub does)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every anchor GitHub makes for the page: one per heading, duplicates suffixed -1, -2, ..."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    text = page.read_text(encoding="utf-8")
    for _, line in prose_lines(text, blank_code=False):  # a heading's code keeps its text in the anchor
        match = HEADING.match(line)
        if match:
            base = slug(match.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    found.update(anchor.lower() for anchor in HTML_ANCHOR.findall(text))
    return found


def links(page: Path) -> list[tuple[int, str]]:
    text = page.read_text(encoding="utf-8")
    # inline code is blanked by prose_lines, so a link written inside backticks is not a link
    return [(number, match.group(1)) for number, line in prose_lines(text) for match in LINK.finditer(line)]


def problems(page: Path) -> list[str]:
    out = []
    for number, target in links(page):
        if EXTERNAL.match(target):
            continue
        where = f"{rel(page)}:{number}: ({target})"
        path_part, _, anchor = target.partition("#")
        if path_part:
            resolved = (page.parent / path_part).resolve()
            try:
                resolved.relative_to(ROOT)
            except ValueError:
                out.append(f"{where} points outside the repository")
                continue
            if not resolved.exists():
                out.append(f"{where} names no file")
                continue
        else:
            resolved = page
        if anchor:
            if resolved.is_dir() or resolved.suffix.lower() != ".md":
                continue  # an anchor into a non-markdown file (a line number, say) is GitHub's business
            if anchor.lower() not in anchors(resolved):
                out.append(f"{where} has no heading #{anchor} in {rel(resolved)}")
    return out


def link_cases():
    for page in pages():
        yield pytest.param(page, id=rel(page))


@pytest.mark.parametrize("page", list(link_cases()))
def test_relative_links_resolve(page: Path) -> None:
    broken = problems(page)
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_the_pages_are_found() -> None:
    names = {rel(page) for page in pages()}
    assert {"README.md", "CHANGELOG.md", "docs/datasets.md", "docs/performance.md"} <= names


@pytest.mark.parametrize(
    "page", [page for page in pages() if rel(page).startswith("docs/") and rel(page) not in DATED_PAGES], ids=rel
)
def test_reference_pages_carry_no_dates(page: Path) -> None:
    found = []
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        for date in DATE.findall(LINK_TARGET.sub("]()", line)):
            if (rel(page), date) not in DATE_ALLOW:
                found.append(f"{rel(page)}:{number}: {line.strip()[:160]}")
    assert not found, "dated lines belong in CHANGELOG.md or docs/performance.md:\n" + "\n".join(found)


def test_slug_follows_github() -> None:
    assert slug("Dead letters & replay") == "dead-letters--replay"
    assert slug("`dataset.json`: the file format") == "datasetjson-the-file-format"
    assert slug("Which copy wins (duplicates)") == "which-copy-wins-duplicates"
    assert slug("snake_case stays") == "snake_case-stays"


def test_duplicate_headings_are_numbered(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Top\n## Notes\n```\n# not a heading\n```\n## Notes\n## Notes\n", encoding="utf-8")
    assert anchors(page) == {"top", "notes", "notes-1", "notes-2"}


def test_problems_are_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(globals(), "ROOT", tmp_path)  # the repository is tmp_path for this case
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "other.md").write_text("# Other page\n## A `code` heading\n", encoding="utf-8")
    page = tmp_path / "docs" / "page.md"
    page.write_text(
        "# Page\n[ok](other.md#a-code-heading) [ok](#page) [web](https://example.com/x#y) `[code](nowhere.md)`\n"
        "[gone](missing.md) [bad](other.md#nope) [self](#nope) [out](../../shared/x.md)\n",
        encoding="utf-8",
    )
    found = problems(page)
    expected = [
        "(missing.md) names no file",
        "(other.md#nope) has no heading #nope",
        "(#nope) has no heading #nope",
        "(../../shared/x.md) points outside the repository",
    ]
    assert len(found) == len(expected), found
    for text, want in zip(found, expected, strict=True):
        assert want in text
