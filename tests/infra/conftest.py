"""Infrastructure tests: one in-process synth of every environment, shared by the whole session."""

from __future__ import annotations

import os

import pytest

import infra  # noqa: F401  (puts the venv Node first on PATH before aws_cdk loads)


@pytest.fixture(scope="session", autouse=True)
def _no_aws_credentials():
    """Synth and moto tests must never reach a real account, whatever the developer's shell has."""
    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("AWS_")}
    os.environ.update(
        AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="eu-west-1",
        AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull,
    )
    yield
    for k in [k for k in os.environ if k.startswith("AWS_")]:
        del os.environ[k]
    os.environ.update(saved)


@pytest.fixture(scope="session")
def templates() -> dict[str, dict]:
    """{environment: synthesized template} for every configured environment (cdk-nag enforced)."""
    from devtools.snapshot import synth_templates

    return synth_templates()
