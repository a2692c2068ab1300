"""Which dataset a lake folder holds, and which source a checkpoint and a dead-letter folder belong to.

Each folder records its owner the first time a job or tool writes to it, in OWNER_FILE (a hidden name: Spark,
Athena and pyarrow skip it). Every later writer checks it first and refuses a folder of another dataset or source
with an error naming both, before it reads or deletes anything: a lake compacted under the wrong dataset lost its
files, and a checkpoint reused with another dataset read nothing, both with exit 0 (before 2026-11-28).

A folder written before owners were recorded has files but no OWNER_FILE: it is adopted on first use (the owner is
recorded and the log says so). An empty or absent folder is claimed when the caller creates it (`create`), and
otherwise left as it is (compaction of a lake no job has written yet has nothing to check).

The same code runs on S3 in Glue and on the local file system (glue_jobs/storage.HadoopStorage).
"""

from __future__ import annotations

import json
import logging

OWNER_FILE = "_streamlake_owner.json"

log = logging.getLogger("glue_jobs.commit.ownership")


class OwnershipError(ValueError):
    """A folder belongs to another dataset or source; the message names the folder and both owners."""


def _describe(owner: dict) -> str:
    return ", ".join(f"{key} {', '.join(value) if isinstance(value, list) else value}" for key, value in sorted(owner.items()))


def claim(storage, folder: str, kind: str, owner: dict, *, create: bool = True) -> None:
    """Check that `folder` (a lake, dead-letter or checkpoint folder; `kind` names it in messages) belongs to `owner`
    ({"dataset": name} for a lake and dead letters, {"source": name, "datasets": [names]} for a source's checkpoint);
    record `owner` where nothing is recorded yet (see the module doc)."""
    folder = folder.rstrip("/")
    path = f"{folder}/{OWNER_FILE}"
    if storage.exists(path):
        try:
            recorded = json.loads(storage.read_text(path))
        except ValueError:
            raise OwnershipError(f"{kind} {folder}: {OWNER_FILE} is not JSON; it records which dataset or source the "
                                 "folder holds: restore it or remove it to adopt the folder again") from None
        if recorded != owner:
            raise OwnershipError(f"{kind} {folder} belongs to {_describe(recorded)}, not to {_describe(owner)}: give this "
                                 f"{kind} a folder of its own (recorded in {path})")
        return
    present = storage.exists(folder)
    if not present and not create:
        return
    if present and storage.list(folder, include_hidden=True):
        log.warning("%s %s has no %s (written before owners were recorded): adopted for %s", kind, folder, OWNER_FILE,
                    _describe(owner))
    elif not present:
        storage.mkdirs(folder)
    storage.write_text(path, json.dumps(owner, sort_keys=True) + "\n")
