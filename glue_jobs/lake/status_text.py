"""FileStatus text read in bulk: a listing's whole FileStatus[] crosses py4j as one string (commons-lang3
ArrayUtils.toString) and is read here, instead of several py4j calls per file (glue_jobs/lake/storage.py
HadoopStorage.list). Anything that cannot be read exactly answers None, and the caller reads those statuses' attributes
one by one."""

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
