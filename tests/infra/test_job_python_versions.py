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
from infra.config import REPO_ROOT
from infra.runtimes import BATCH_GLUE_VERSIONS, RUNTIMES, STREAMING_GLUE_VERSIONS

FIXTURE = Path(__file__).parent / "fixtures" / "py311_only.py"
# Standard-library modules removed by a Python release (What's New in Python 3.12: distutils (PEP 632),
# asynchat, asyncore, smtpd, imp; What's New in Python 3.13: the PEP 594 "dead batteries" and lib2to3).
# vermin checks the oldest Python; these catch what the newest allowed one no longer has.
REMOVED_MODULES = {
    "3.12": {"distutils", "asynchat", "asyncore", "smtpd", "imp"},
    "3.13": {"aifc", "audioop", "cgi", "cgitb", "chunk", "crypt", "imghdr", "mailcap", "msilib", "nis", "nntplib",
             "ossaudiodev", "pipes", "sndhdr", "spwd", "sunau", "telnetlib", "uu", "xdrlib", "lib2to3"},
}


def minimum_python() -> str:
    """The oldest Python among the allowed Glue versions, e.g. '3.10'."""
    versions = {RUNTIMES[v].python for v in {*BATCH_GLUE_VERSIONS, *STREAMING_GLUE_VERSIONS}}
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


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split("."))


def removed_imports(paths: list[Path], newest_python: str) -> list[str]:
    """`file: module` for each import of a standard-library module that `newest_python` no longer has."""
    import ast

    removed = set().union(*(mods for version, mods in REMOVED_MODULES.items() if _version(version) <= _version(newest_python)))
    found = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else []
            found += [f"{path.name}: {name}" for name in names if name.split(".")[0] in removed]
    return found


def test_shipped_job_code_imports_nothing_the_newest_allowed_python_removed():
    newest = max((RUNTIMES[v].python for v in {*BATCH_GLUE_VERSIONS, *STREAMING_GLUE_VERSIONS}), key=_version)
    assert removed_imports(shipped_job_files(), newest) == []


def test_the_removed_module_check_fails_on_a_removed_module(tmp_path):
    old = tmp_path / "old.py"
    old.write_text("import imghdr\nfrom distutils.version import LooseVersion\n", encoding="utf-8")
    assert removed_imports([old], "3.13") == ["old.py: imghdr", "old.py: distutils.version"]
    assert removed_imports([old], "3.11") == []
