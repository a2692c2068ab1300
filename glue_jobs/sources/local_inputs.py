"""What the local runner's file source did not read, said in its run summary (run-local).

Spark's file stream source reads the files directly in the input folder, skips names starting with `_` or `.` (Spark
treats them as hidden, as readers of the lake do), does not descend into subfolders, and reads each file once, when it
first sees it: lines appended to a file it has read are never read. Each of these is counted here, with the files
named, so no input goes unread without a line saying so. Which files the source read comes from its own log in the
checkpoint (`<checkpoint>/sources/0/<batch>`: a version line, then one JSON object per file with its `path` and
modification `timestamp` in milliseconds); that layout is Spark's, read-only here, and unverified beyond Spark 3.3 to
4.1 where the tests run.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import unquote, urlparse

SHOWN = 5  # files named per line


def _read_files(checkpoint_dir: str) -> dict[str, int]:
    """{local path: modification time in ms when read} from the file source's log."""
    found: dict[str, int] = {}
    log_dir = Path(checkpoint_dir) / "sources" / "0"
    for entry in sorted(log_dir.glob("*")) if log_dir.is_dir() else ():
        if not entry.name.isdigit() and not entry.name.endswith(".compact"):
            continue
        for line in entry.read_text(encoding="utf-8", errors="replace").splitlines()[1:]:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            found[unquote(urlparse(record["path"]).path)] = int(record["timestamp"])
    return found


def _named(paths: list[str], root: Path) -> str:
    names = [os.path.relpath(p, root) for p in sorted(paths)]
    return ", ".join(names[:SHOWN]) + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN else "")


def unread_inputs(input_dir: str, checkpoint_dir: str) -> list[str]:
    """The summary lines for the input folder's files the source skipped or read before they changed (none: [])."""
    root = Path(input_dir).resolve()
    hidden, nested = [], []
    for folder, _subfolders, files in os.walk(root):
        for name in files:
            path = str(Path(folder) / name)
            if Path(folder) != root:
                nested.append(path)
            elif name.startswith(("_", ".")):
                hidden.append(path)
    lines = []
    if nested:
        lines.append(f"skipped: {len(nested)} file(s) in subfolders of the input (the source reads only the folder's own "
                     f"files): {_named(nested, root)}")
    if hidden:
        lines.append(f"skipped: {len(hidden)} hidden file(s) (names starting with _ or .): {_named(hidden, root)}")
    read = _read_files(checkpoint_dir)
    changed = [p for p, at in read.items() if Path(p).is_file() and int(Path(p).stat().st_mtime * 1000) > at]
    if changed:
        lines.append(f"warning: {len(changed)} file(s) changed after they were read; lines appended to a file already "
                     f"read are never read (write new files instead): {_named(changed, root)}")
    return lines
