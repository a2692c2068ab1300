"""FileStatus text read in bulk: a listing's whole FileStatus[] crosses py4j as one string and is read here, instead of
several py4j calls per file (glue_jobs/lake/storage.py HadoopStorage.list). The string is jvm/glue-functions'
StatusLines.describe where that jar is on the classpath (four fields a line, `parse_status_lines`), else the statuses'
own text (commons-lang3 ArrayUtils.toString, `parse_status_array`). Anything that cannot be read exactly answers None,
and the caller reads those statuses another way."""

from __future__ import annotations

import re

# The fields of FileStatus.toString(): "...{path=<p>; isDirectory=<b>; length=<n>; ...; modification_time=<t>; ...}"
# (no length for a directory).
_STATUS_TEXT = re.compile(
    r"\{path=(?P<path>.+); isDirectory=(?P<dir>true|false)(?:; length=(?P<len>\d+))?.*?; modification_time=(?P<mtime>\d+)"
)
# The same fields, entry after entry, in the text of a whole FileStatus[] (ArrayUtils.toString: "{s1,s2,...}").
_STATUS_TEXTS = re.compile(
    r"\{path=(?P<path>[^;]+?); isDirectory=(?P<dir>true|false)(?:; length=(?P<len>\d+))?.*?; modification_time=(?P<mtime>\d+)"
)


def _status_fields(match: re.Match) -> tuple[str, bool, int, int] | None:
    if match.group("len") is None:
        return None
    return match.group("path"), match.group("dir") == "true", int(match.group("len")), int(match.group("mtime"))


def parse_status(text: str) -> tuple[str, bool, int, int] | None:
    """(path, is_dir, length, modification_ms) from one FileStatus.toString(); None when the text cannot be
    read exactly (a path holding "; ", a format not known, a directory: no length)."""
    match = _STATUS_TEXT.search(text)
    if match is None or "; " in match.group("path"):
        return None
    return _status_fields(match)


def parse_status_array(text: str, count: int) -> list[tuple[str, bool, int, int] | None] | None:
    """Each entry of the text of a FileStatus[] of `count` entries, as parse_status reads one (None for a
    directory); None for the whole when the text cannot be split exactly. A name holding "{path=" or
    "; isDirectory=" could shift or forge fields, so every entry must show each marker once (a name holding
    ";" cannot match and changes the count)."""
    matches = list(_STATUS_TEXTS.finditer(text))
    if not len(matches) == count == text.count("{path=") == text.count("; isDirectory="):
        return None
    return [_status_fields(match) for match in matches]


_KINDS = {"D": True, "F": False}
# The most a StatusLines reply may take: under the 8,192 characters py4j's reply writer holds, so that a reply leaves the
# JVM in one write (jvm/glue-functions StatusLines, docs/performance.md "Listing a batch's staged files").
REPLY_BYTES = 7000


def status_lines(describe, count: int) -> list[tuple[str, bool, int, int]] | None:
    """Every one of `count` statuses' fields, from StatusLines replies: `describe(start)` answers "<n>\n" and the
    lines of n statuses from index `start` on. None when any reply does not read exactly (`parse_status_lines`)."""
    entries: list[tuple[str, bool, int, int]] = []
    while len(entries) < count:
        head, _, lines = describe(len(entries)).partition("\n")
        described = int(head) if head.isdigit() else 0
        chunk = parse_status_lines(lines, described) if 0 < described <= count - len(entries) else None
        if chunk is None:
            return None
        entries += chunk
    return entries


def parse_status_lines(text: str, count: int) -> list[tuple[str, bool, int, int]] | None:
    """(path, is_dir, length, modification_ms) of each of `count` statuses from StatusLines.describe's text: one line
    "<D|F>\t<length>\t<modification time>\t<path>" each, the path last (a tab in it stays in it). None for the whole
    when it is not exactly `count` such lines: a path holding a newline adds lines."""
    if count == 0:
        return [] if text == "" else None
    lines = text[:-1].split("\n") if text.endswith("\n") else []
    if len(lines) != count:
        return None
    entries = []
    for line in lines:
        fields = line.split("\t", 3)
        if len(fields) != 4 or fields[0] not in _KINDS or not fields[1].isdigit() or not fields[2].isdigit() or not fields[3]:
            return None
        entries.append((fields[3], _KINDS[fields[0]], int(fields[1]), int(fields[2])))
    return entries
