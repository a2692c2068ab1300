"""config/environments.json as job code reads it, without infra: an environment is the file's `defaults`
block deep-merged with the environment's own block.

infra/config validates the whole file (at synth and in the tests) and merges with the same deep_merge;
the local compaction CLI takes its defaults from read_environment. Errors are ValueErrors that name the
file and what is wrong with it.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any


def deep_merge(base: Any, override: Any) -> Any:
    """`override` laid over `base`: objects merge key by key, anything else (a list too) replaces. A copy."""
    if isinstance(base, dict) and isinstance(override, dict):
        merged = copy.deepcopy(base)
        for key, value in override.items():
            merged[key] = deep_merge(base.get(key), value) if key in base else copy.deepcopy(value)
        return merged
    return copy.deepcopy(override)


def read_environment(path: Path, name: str) -> dict:
    """The merged block of environment `name` in the config file at `path`."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror}") from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    environments = raw.get("environments") if isinstance(raw, dict) else None
    defaults = raw.get("defaults", {}) if isinstance(raw, dict) else None
    if not isinstance(environments, dict) or not isinstance(defaults, dict):
        raise ValueError(f"{path}: `defaults` and `environments` must be objects")
    if name not in environments:
        raise ValueError(f"{path}: no environment {name!r}; configured: {', '.join(environments)}")
    block = environments[name]
    if block is not None and not isinstance(block, dict):
        raise ValueError(f"{path}: environments.{name} must be an object")
    return deep_merge(defaults, block or {})
