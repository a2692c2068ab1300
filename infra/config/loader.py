"""The config document: read from config/environments.json (or given decoded), every environment the deep
merge of `defaults` and its own block, validated whole."""

from __future__ import annotations

import copy
import json
import sys
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
    for warning in unreached_defaults(defaults, envs_raw):
        print(f"warning: {source or 'config'}: {warning}", file=sys.stderr)
    return ProjectConfig(project=project, environments=environments)


def unreached_defaults(defaults: dict, environments: dict) -> list[str]:
    """Each non-empty list of `defaults` (at the top level or one level down) that no environment receives because every
    environment declares its own: the deep merge replaces lists, it does not merge them, so such entries are dead."""
    found = []
    for key, value in defaults.items():
        nested = value.items() if isinstance(value, dict) else []
        for path, entry, owner in [((key,), value, None), *(((key, k), v, key) for k, v in nested)]:
            if not isinstance(entry, list) or not entry:
                continue
            blocks = [body or {} for body in environments.values()]
            if owner is not None:
                blocks = [b.get(owner) if isinstance(b.get(owner), dict) else {} for b in blocks]
            if blocks and all(path[-1] in b for b in blocks):
                found.append(f"defaults.{'.'.join(path)} ({len(entry)} entries) reaches no environment: every environment "
                             f"declares its own `{path[-1]}`, and a list in an environment replaces the defaults' list "
                             "(lists do not merge); move the entries into the environments that need them")
    return found


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
