"""The whole app: every environment synthesizes (cdk-nag enforced) and matches its snapshot."""

from __future__ import annotations

import os
import subprocess
import sys

import aws_cdk as cdk
import pytest
from aws_cdk import aws_s3 as s3
from cdk_nag import AwsSolutionsChecks

from devtools import snapshot
from infra.app_builder import build_app
from infra.config import REPO_ROOT, ConfigError, load_config


def test_every_configured_environment_synthesizes(templates):
    assert sorted(templates) == sorted(load_config().environments)
    for name, template in templates.items():
        assert template["Resources"], f"{name} synthesized an empty stack"


@pytest.mark.parametrize("environment", list(load_config().environments))
def test_template_matches_committed_snapshot(templates, environment):
    path = snapshot.snapshot_path(environment)
    assert path.exists(), f"no snapshot for {environment}: run `make snapshots` and commit it"
    assert snapshot.render(templates[environment]) == path.read_text(), (
        f"{environment} template differs from {path.relative_to(REPO_ROOT)}; review the change and "
        "run `make snapshots` if it is intended"
    )


def test_snapshot_rendering_is_deterministic_and_hides_asset_hashes():
    template = {"Resources": {"B": {"Properties": {"Key": "a" * 64 + ".py", "Z": 1, "A": 2}}}}
    assert snapshot.render(template) == snapshot.render(template)
    assert snapshot.normalize(template) == {"Resources": {"B": {"Properties": {"Key": "<asset-hash>.py", "Z": 1, "A": 2}}}}


def test_unacknowledged_cdk_nag_finding_fails_synth(tmp_path):
    app = cdk.App(outdir=str(tmp_path))
    stack = cdk.Stack(app, "Bare")
    s3.Bucket(stack, "UnloggedBucket")
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    with pytest.raises(RuntimeError, match=r"AwsSolutions-S1'"):
        app.synth()


def test_unknown_environment_selection_fails_before_any_construct():
    with pytest.raises(ConfigError, match="environments: qa not configured"):
        build_app(environments=["qa"])


def test_app_py_reports_config_errors_without_a_traceback(tmp_path):
    bad = tmp_path / "environments.json"
    bad.write_text('{"project": "streamlake", "environments": {"dev": {"removal_policy": "keep"}}}')
    code = (
        "import sys, pathlib, infra.config.loader as c; c.DEFAULT_CONFIG_PATH = pathlib.Path(sys.argv[1]); "
        "import app; sys.exit(app.main())"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(bad)], cwd=REPO_ROOT, capture_output=True, text=True)
    assert proc.returncode == 1
    assert "dev.removal_policy: 'keep' is not one of retain, destroy" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_app_py_reports_every_dataset_problem_without_a_traceback(tmp_path):
    """A bad dataset file stops synth with one message naming the dataset, key, value and what is allowed."""
    import shutil

    shutil.copytree(REPO_ROOT / "datasets", tmp_path / "datasets")
    contract = tmp_path / "datasets" / "orders" / "dataset.json"
    contract.write_text(contract.read_text().replace('"format": "iso8601"', '"format": "iso"').replace('"min": 0', '"min": "0"', 1))
    proc = subprocess.run([sys.executable, "-c", "import sys, app; sys.exit(app.main())"], cwd=REPO_ROOT, capture_output=True,
                          text=True, env={**os.environ, "STREAMLAKE_DATASETS": str(tmp_path / "datasets"), "CDK_OUTDIR": str(tmp_path / "out")})
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "orders: event_time.format: 'iso' is not one of epoch_millis, epoch_seconds, iso8601" in proc.stderr
    assert "orders: rules.total.min: '0' must be a finite JSON number" in proc.stderr
    assert "Traceback" not in proc.stderr
