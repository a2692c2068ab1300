"""The job code as deployed: entrypoint scripts plus one zip of the shared packages.

Glue's --extra-py-files takes a .zip whose top level holds the packages, and the Glue L2 `Code`
accepts files only, so the zip is built here, reproducibly: sorted entries, a fixed timestamp and
mode, no compression (zlib output can differ between machines). The asset hash, and with it the
template, therefore changes exactly when deployed code changes.

    glue_jobs/...      (with schemas/event.avsc copied beside schema.py)
    compaction/...
"""

from __future__ import annotations

import zipfile
from pathlib import Path

from infra.config import REPO_ROOT

PACKAGES = ("glue_jobs", "compaction")
PACKAGE_ZIP = REPO_ROOT / "build" / "glue_package.zip"
SCHEMA_FILE = REPO_ROOT / "schemas" / "event.avsc"
_FIXED_TIME = (1980, 1, 1, 0, 0, 0)


def _entries() -> list[tuple[str, Path]]:
    entries = []
    for package in PACKAGES:
        for path in sorted((REPO_ROOT / package).rglob("*.py")):
            if "__pycache__" not in path.parts:
                entries.append((path.relative_to(REPO_ROOT).as_posix(), path))
    entries.append((f"glue_jobs/{SCHEMA_FILE.name}", SCHEMA_FILE))
    return sorted(entries)


def build_package_zip(target: Path = PACKAGE_ZIP) -> Path:
    """Write the package zip (byte-identical for identical sources) and return its path."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".zip.tmp")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED) as archive:
        for name, path in _entries():
            info = zipfile.ZipInfo(name, date_time=_FIXED_TIME)
            info.external_attr = 0o644 << 16
            archive.writestr(info, path.read_bytes())
    tmp.replace(target)
    return target


def entrypoint(package: str, module: str = "glue_entry") -> Path:
    path = REPO_ROOT / package / f"{module}.py"
    if not path.exists():
        raise FileNotFoundError(f"Glue entrypoint {path} is missing")
    return path
