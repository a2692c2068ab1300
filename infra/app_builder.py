"""Builds the whole CDK app from the validated configuration (used by app.py and the tests)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from infra.config import REPO_ROOT, ConfigError, ProjectConfig, load_config
from infra.stage import StreamingLakeStage


def cdk_json_context() -> dict:
    """Feature flags from cdk.json, so an in-process synth (tests) equals `cdk synth`."""
    return json.loads((REPO_ROOT / "cdk.json").read_text(encoding="utf-8"))["context"]


def build_app(
    config: ProjectConfig | None = None,
    *,
    outdir: str | Path | None = None,
    environments: Iterable[str] | None = None,
    context: dict | None = None,
) -> tuple[cdk.App, dict[str, StreamingLakeStage]]:
    """Validate the config, then add one stage per selected environment with cdk-nag enforced.

    Config problems raise ConfigError before any construct exists. Without `environments`, the
    comma-separated context value `environments` (``cdk synth -c environments=dev``) selects, and
    without that every configured environment is built. `context` replaces cdk.json's context (the
    feature-flag review synthesizes with one flag changed at a time).
    """
    config = config or load_config()
    app = cdk.App(outdir=str(outdir) if outdir else None, context=cdk_json_context() if context is None else context)
    if environments is None:
        selection = app.node.try_get_context("environments")
        environments = [s.strip() for s in selection.split(",") if s.strip()] if selection else None
    selected = list(environments) if environments else list(config.environments)
    unknown = [name for name in selected if name not in config.environments]
    if unknown:
        raise ConfigError(
            [f"environments: {', '.join(unknown)} not configured; configured: {', '.join(config.environments)}"]
        )
    stages = {
        name: StreamingLakeStage(app, config=config.environments[name], project=config.project) for name in selected
    }
    # Every AwsSolutions finding fails synth unless acknowledged on the construct with a reason.
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app, stages
