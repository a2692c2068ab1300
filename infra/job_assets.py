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

from aws_cdk import aws_glue as glue

from infra.config import REPO_ROOT

GLUE_VERSIONS = {"4.0": glue.GlueVersion.V4_0, "5.0": glue.GlueVersion.V5_0}
WORKER_TYPES = {"G.025X": glue.WorkerType.G_025X, "G.1X": glue.WorkerType.G_1X, "G.2X": glue.WorkerType.G_2X}

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


def common_job_props(
    package: str, *, glue_version: str, worker_type: str, workers: int, security_configuration: glue.ISecurityConfiguration
) -> dict:
    """What every job of this app shares: its entrypoint and the package zip, runtime and workers,
    encryption, continuous logging, metrics and observability metrics, one run at a time."""
    return {
        "script": glue.Code.from_asset(str(entrypoint(package))),
        "extra_python_files": [glue.Code.from_asset(str(build_package_zip()))],
        "glue_version": GLUE_VERSIONS[glue_version],
        "worker_configuration": glue.WorkerConfiguration(worker_type=WORKER_TYPES[worker_type], number_of_workers=workers),
        "security_configuration": security_configuration,
        "continuous_logging": glue.ContinuousLoggingProps(enabled=True),
        "enable_metrics": True,
        "enable_observability_metrics": True,
        "max_concurrent_runs": 1,
    }
