"""cfn-lint (pinned in requirements-dev.txt) over every synthesized template: zero errors, and only the
warnings listed here, each with the reason it is acceptable."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from infra.config import load_config

CFN_LINT = Path(sys.executable).parent / "cfn-lint"

# (rule, logical id prefix) -> why the warning is acceptable. Nothing else may warn; nothing may error.
ACCEPTED_WARNINGS = {
    ("W3005", "CustomVpcRestrictDefaultSGCustomResourceProvider"): (
        "CDK's own provider for restrictDefaultSecurityGroup declares DependsOn on its role although the "
        "function's Role GetAtt already orders them; redundant, harmless, not ours to change."
    ),
    ("W3005", "AWS679f53fac002430cb0da5b7982bd2287"): (
        "CDK's AwsCustomResource singleton provider (MSK bootstrap brokers lookup): the same redundant "
        "DependsOn on its service role."
    ),
    ("W3005", "JobKeeperFunction"): (
        "aws_lambda.Function with a role of its own stack: CDK declares DependsOn on the role and its default policy "
        "(so the function is never invoked without its permissions); the role half is redundant, harmless."
    ),
    ("W3005", "JobKeeperDeploy"): (
        "A streaming job's deploy resource depends on the job's role construct, so on the role's default policy and the "
        "overflow policies CDK splits off at synth (infra/stack.py); the role itself is also its RunsWith GetAtt: "
        "redundant, harmless."
    ),
}


def _lint(path: Path) -> list[dict]:
    proc = subprocess.run([str(CFN_LINT), "--format", "json", str(path)], capture_output=True, text=True)
    assert proc.returncode in (0, 4, 8, 12), proc.stderr  # bit 2 errors, bit 4 warnings, bit 8 info
    return json.loads(proc.stdout or "[]")


def _accepted(match: dict) -> bool:
    rule = match["Rule"]["Id"]
    path = match["Location"]["Path"]
    logical_id = path[1] if len(path) > 1 and path[0] == "Resources" else ""
    return any(rule == r and logical_id.startswith(prefix) for r, prefix in ACCEPTED_WARNINGS)


@pytest.mark.parametrize("environment", list(load_config().environments))
def test_template_has_no_cfn_lint_errors_and_only_accepted_warnings(templates, environment, tmp_path):
    path = tmp_path / f"{environment}.template.json"
    path.write_text(json.dumps(templates[environment]), encoding="utf-8")
    matches = _lint(path)
    errors = [m for m in matches if m["Level"] == "Error"]
    assert errors == [], json.dumps(errors, indent=1)
    unexpected = [m for m in matches if m["Level"] == "Warning" and not _accepted(m)]
    assert unexpected == [], json.dumps(unexpected, indent=1)


def test_cfn_lint_is_the_pinned_version():
    pinned = [line for line in Path("requirements-dev.txt").read_text().splitlines() if line.startswith("cfn-lint==")]
    version = subprocess.run([str(CFN_LINT), "--version"], capture_output=True, text=True).stdout.split()[-1]
    assert pinned == [f"cfn-lint=={version}"]
