"""`streamlake`: the one command operators and developers run (streamlake/cli.py)."""

from __future__ import annotations

import re
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def version() -> str:
    """The project's version: the installed distribution's (pyproject.toml [project] version, installed by make
    bootstrap), else read from pyproject.toml of this checkout (not installed), else 'unknown'."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("streamlake")
    except PackageNotFoundError:
        pass
    try:
        text = PYPROJECT.read_text(encoding="utf-8")
    except OSError:
        return "unknown"
    try:
        import tomllib  # Python 3.11+
    except ModuleNotFoundError:  # 3.10: the [project] table's version line
        section = re.search(r"^\[project\]\s*$(.*?)(?=^\[|\Z)", text, re.M | re.S)
        found = section and re.search(r'^version\s*=\s*"([^"]+)"', section.group(1), re.M)
        return found.group(1) if found else "unknown"
    return str(tomllib.loads(text).get("project", {}).get("version", "unknown"))
