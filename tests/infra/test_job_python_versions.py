"""The job code as shipped must run on the oldest Python of the Glue versions the config allows.

Only Python 3.11 can be installed here, and Glue 4.0 runs Python 3.10 (AWS Glue versions page), so the
job code (the entry scripts and every module of the package zip, infra/job_assets.py) is checked
statically with vermin: standard-library modules, functions and syntax newer than the target fail.
ruff's `target-version` alone does not flag standard-library use.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from infra import job_assets
from infra.config import GLUE_RUNTIMES, REPO_ROOT

FIXTURE = Path(__file__).parent / "fixtures" / "py311_only.py"


def minimum_python() -> str:
    """The oldest Python among the allowed Glue versions, e.g. '3.10'."""
    versions = {runtime["python"] for runtime in GLUE_RUNTIMES.values()}
    return min(versions, key=lambda v: tuple(int(p) for p in v.split(".")))


def _vermin(paths: list[Path], target: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(Path(sys.executable).parent / "vermin"), f"-t={target}-", "--violations", "--no-tips", "--eval-annotations",
         *map(str, paths)],
        capture_output=True, text=True, check=False,
    )


def shipped_job_files() -> list[Path]:
    """The entry scripts and the package zip's modules, as job_assets packs them."""
    modules = [path for name, path in job_assets._entries() if name.endswith(".py")]
    return sorted({*modules, job_assets.entrypoint("glue_jobs"), job_assets.entrypoint("compaction")})


def test_shipped_job_code_runs_on_the_oldest_allowed_python():
    files = shipped_job_files()
    assert len(files) > 10 and all(REPO_ROOT in f.parents for f in files)
    result = _vermin(files, minimum_python())
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_check_fails_on_a_newer_construct():
    result = _vermin([FIXTURE], "3.10")
    assert result.returncode != 0
    assert "'tomllib' module requires !2, 3.11" in result.stdout and "`except*` requires !2, 3.11" in result.stdout
