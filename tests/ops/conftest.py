"""Fixtures for the operations tools: moto in-process (mock_aws) and a moto server for subprocesses.

Fake credentials and an explicit region are set for every test, and any profile/endpoint from the
developer's shell is removed, so nothing here can reach real AWS.

moto 5.2.5 gaps filled by rehearsal.moto.fill_glue_gaps (test scaffolding, not behaviour under test): BatchStopJobRun
marks the runs STOPPED, and job runs stay where they are (a streaming run must stay up).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import boto3
import pytest
import requests
from moto import mock_aws

from operations.aws import Clients
from rehearsal.moto import fill_glue_gaps
from tests.ops import moto_dev_env as dev_env

REPO_ROOT = Path(__file__).resolve().parents[2]
FAKE_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_SECURITY_TOKEN": "testing",
    "AWS_DEFAULT_REGION": dev_env.REGION,
    "AWS_REGION": dev_env.REGION,
}
_REMOVED = ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE")


def _streaming_runs_stay_up() -> None:
    fill_glue_gaps()


@pytest.fixture(autouse=True)
def fake_aws_environment(monkeypatch, tmp_path):
    for name in _REMOVED:
        monkeypatch.delenv(name, raising=False)
    for name, value in FAKE_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))


@pytest.fixture
def aws():
    """In-process moto with the dev environment deployed; yields the tools' client factory."""
    with mock_aws():
        _streaming_runs_stay_up()
        session = boto3.session.Session(region_name=dev_env.REGION)
        dev_env.deploy(session)
        yield Clients(region=dev_env.REGION, session=session)


@pytest.fixture(scope="session")
def moto_server():
    from rehearsal.moto import moto_server as local_moto_server

    with local_moto_server() as endpoint:
        yield endpoint


class Deployed:
    """The moto server with the dev environment deployed, and a way to run the CLI against it."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self.session = boto3.session.Session(region_name=dev_env.REGION, aws_access_key_id="testing",
                                             aws_secret_access_key="testing")

    def client(self, service: str):
        return self.session.client(service, endpoint_url=self.endpoint)

    def cli(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if k not in _REMOVED}
        env.update(FAKE_ENV, AWS_ENDPOINT_URL=self.endpoint, PYTHONPATH=str(REPO_ROOT))
        return subprocess.run(
            [sys.executable, "-m", "operations", *args], cwd=REPO_ROOT, env=env, input=stdin or "",
            capture_output=True, text=True, timeout=60,
        )


@pytest.fixture
def deployed(moto_server):
    requests.post(f"{moto_server}/moto-api/reset", timeout=10)
    _streaming_runs_stay_up()
    env = Deployed(moto_server)
    dev_env.deploy(env.session, endpoint_url=moto_server)
    return env
