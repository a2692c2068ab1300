"""The config document: read from config/environments.json (or given decoded), every environment the deep
merge of `defaults` and its own block, validated whole."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from compaction.environments import deep_merge as _deep_merge
from infra.config.model import _NAME_RE, ConfigError, ProjectConfig
from infra.config.reader import _fmt
from infra.config.sections import _environment

# This file is infra/config/loader.py: the repository is two folders up.
REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CONFIG_PATH = REPO_ROOT / "config" / "environments.json"


def parse_config(raw: Any, source: str = "") -> ProjectConfig:
    """Validate a decoded config document; raise ConfigError listing every problem."""
    problems: list[str] = []
    if not isinstance(raw, dict):
        raise ConfigError([f"(top level): {_fmt(raw)} must be an object"], source)
    unknown = sorted(set(raw) - {"project", "defaults", "environments", "$comment"})
    problems += [f"{k}: unknown top-level field; allowed: project, defaults, environments" for k in unknown]
    project = raw.get("project")
    if not isinstance(project, str) or not _NAME_RE.match(project):
        problems.append(f"project: {_fmt(project)} is not a lower-case name of 2-32 letters, digits and '-'")
    defaults = raw.get("defaults", {})
    if not isinstance(defaults, dict):
        problems.append(f"defaults: {_fmt(defaults)} must be an object")
        defaults = {}
    envs_raw = raw.get("environments")
    if not isinstance(envs_raw, dict) or not envs_raw:
        problems.append(f"environments: {_fmt(envs_raw)} must be an object with at least one environment")
        envs_raw = {}
    environments = {}
    for name, body in envs_raw.items():
        if body is not None and not isinstance(body, dict):
            problems.append(f"{name}: {_fmt(body)} must be an object")
            continue
        environments[name] = _environment(name, _deep_merge(defaults, body or {}), problems)
    if problems:
        raise ConfigError(problems, source)
    return ProjectConfig(project=project, environments=environments)


def load_config(path: Path | str | None = None) -> ProjectConfig:
    """Read and validate the environment configuration file (default: config/environments.json)."""
    path = Path(path) if path is not None else DEFAULT_CONFIG_PATH
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError([f"(file): cannot read {path}: {exc.strerror}"], str(path)) from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError([f"(file): not valid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"], str(path)) from None
    return parse_config(raw, str(path))


def update_raw(raw: dict, env: str, dotted: str, value: Any) -> dict:
    """Return a copy of a raw config document with environments.<env>.<dotted> set (for tests and tools)."""
    doc = copy.deepcopy(raw)
    node = doc["environments"].setdefault(env, {})
    keys = dotted.split(".")
    for key in keys[:-1]:
        node = node.setdefault(key, {})
    node[keys[-1]] = value
    return doc
