"""Readable infrastructure diff for pull requests, without AWS credentials.

    python -m infra.diff [--base REF] [--out FILE]     # make diff [BASE=origin/main]

Synthesizes every environment from the working tree and compares each template with the snapshot
committed at REF (default HEAD), and the config at REF with the working-tree config for the cost
delta. Prints Markdown per environment: security-relevant changes first (IAM, security groups, key
and resource policies), then resources added / removed / replaced / modified with the changed
properties, then the monthly fixed-cost delta from config/prices.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any

from infra import sizing
from infra.config import REPO_ROOT, ConfigError, ProjectConfig, load_config, parse_config
from infra.snapshot import normalize, snapshot_path

SECURITY_TYPES = (
    "AWS::IAM::",
    "AWS::EC2::SecurityGroup",
    "AWS::KMS::Key",
    "AWS::S3::BucketPolicy",
    "AWS::SNS::TopicPolicy",
    "AWS::SQS::QueuePolicy",
    "AWS::Lambda::Permission",
)
# Properties whose change makes CloudFormation replace the resource (per each resource type's
# "Update requires: Replacement" in the CloudFormation reference), for the types this app uses.
REPLACEMENT_PROPERTIES = {
    "AWS::Kinesis::Stream": ("Name",),
    "AWS::S3::Bucket": ("BucketName",),
    "AWS::KMS::Key": ("KeySpec",),
    "AWS::EC2::VPC": ("CidrBlock", "InstanceTenancy"),
    "AWS::EC2::Subnet": ("CidrBlock", "AvailabilityZone", "VpcId"),
    "AWS::EC2::SecurityGroup": ("GroupDescription", "GroupName", "VpcId"),
    "AWS::MSK::Cluster": ("ClusterName", "BrokerNodeGroupInfo.ClientSubnets", "BrokerNodeGroupInfo.SecurityGroups",
                          "EncryptionInfo.EncryptionAtRest"),
    "AWS::Glue::Database": ("CatalogId",),
    "AWS::Glue::Table": ("CatalogId", "DatabaseName"),
    "AWS::Glue::Job": ("Name",),
    "AWS::Glue::Registry": ("Name",),
    "AWS::Glue::Schema": ("Name", "Registry", "DataFormat"),
    "AWS::SNS::Topic": ("TopicName", "FifoTopic"),
    "AWS::Logs::LogGroup": ("LogGroupName",),
}
MAX_VALUE_CHARS = 90


@dataclass
class ResourceChange:
    logical_id: str
    type: str
    kind: str  # added | removed | modified | replaced
    changes: list[tuple[str, Any, Any]] = field(default_factory=list)

    @property
    def security(self) -> bool:
        return self.type.startswith(SECURITY_TYPES)


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and value and not (len(value) == 1 and next(iter(value)).startswith(("Fn::", "Ref"))):
        out: dict[str, Any] = {}
        for key in sorted(value):
            out.update(_flatten(value[key], f"{prefix}.{key}" if prefix else key))
        return out
    if isinstance(value, list) and value and all(isinstance(v, (dict, list)) for v in value):
        out = {}
        for i, item in enumerate(value):
            out.update(_flatten(item, f"{prefix}[{i}]"))
        return out
    return {prefix: value}


def diff_templates(old: dict, new: dict) -> list[ResourceChange]:
    old_r, new_r = old.get("Resources", {}), new.get("Resources", {})
    changes = []
    for lid in sorted(set(new_r) - set(old_r)):
        changes.append(ResourceChange(lid, new_r[lid]["Type"], "added"))
    for lid in sorted(set(old_r) - set(new_r)):
        changes.append(ResourceChange(lid, old_r[lid]["Type"], "removed"))
    for lid in sorted(set(old_r) & set(new_r)):
        a, b = _flatten(old_r[lid]), _flatten(new_r[lid])
        props = [(k, a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
        if not props:
            continue
        rtype = new_r[lid]["Type"]
        replacing = REPLACEMENT_PROPERTIES.get(rtype, ())
        replaced = rtype != old_r[lid]["Type"] or any(
            path.removeprefix("Properties.").startswith(prop) for path, _, _ in props for prop in replacing
        )
        changes.append(ResourceChange(lid, rtype, "replaced" if replaced else "modified", props))
    return changes


def _show(value: Any) -> str:
    if value is None:
        return "(none)"
    text = json.dumps(value, sort_keys=True) if not isinstance(value, str) else value
    return text if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 1] + "…"


def _change_lines(change: ResourceChange) -> list[str]:
    head = f"- **{change.kind}** `{change.logical_id}` ({change.type})"
    lines = [head]
    for path, before, after in change.changes:
        lines.append(f"  - `{path}`: {_show(before)} → {_show(after)}")
    return lines


def cost_delta(old_config: ProjectConfig | None, new_config: ProjectConfig, env: str, prices: dict) -> tuple[float, float]:
    new_cost = sum(sizing.environment_cost(new_config.get(env), prices).values())
    if old_config is None or env not in old_config.environments:
        return 0.0, new_cost
    return sum(sizing.environment_cost(old_config.get(env), prices).values()), new_cost


def render_environment(env: str, changes: list[ResourceChange], old_cost: float, new_cost: float) -> str:
    delta = new_cost - old_cost
    sign = "+" if delta > 0 else ("-" if delta < 0 else "±")
    lines = [f"## {env}", ""]
    if not changes and abs(delta) < 0.005:
        return "\n".join(lines + ["No infrastructure changes.", ""])
    counts = {k: sum(c.kind == k for c in changes) for k in ("added", "removed", "replaced", "modified")}
    lines.append(", ".join(f"{n} {k}" for k, n in counts.items()) + "; " +
                 f"fixed monthly cost {old_cost:,.2f} → {new_cost:,.2f} USD (**{sign}{abs(delta):,.2f}**)")
    lines.append("")
    security = [c for c in changes if c.security]
    if security:
        lines += ["### ⚠ IAM, security group and policy changes (review first)", ""]
        for c in security:
            lines += _change_lines(c)
        lines.append("")
    rest = [c for c in changes if not c.security]
    for kind in ("replaced", "removed", "added", "modified"):
        group = [c for c in rest if c.kind == kind]
        if group:
            lines += [f"### {kind.capitalize()}", ""]
            for c in group:
                lines += _change_lines(c)
            lines.append("")
    return "\n".join(lines)


def _git_show(ref: str, path: str) -> str | None:
    proc = subprocess.run(["git", "show", f"{ref}:{path}"], cwd=REPO_ROOT, capture_output=True, text=True)
    return proc.stdout if proc.returncode == 0 else None


def base_state(ref: str) -> tuple[dict[str, dict], ProjectConfig | None]:
    """Snapshots and config committed at ref."""
    snapshot_dir = str(snapshot_path("x").parent.relative_to(REPO_ROOT))
    listing = subprocess.run(["git", "ls-tree", "--name-only", f"{ref}:{snapshot_dir}"], cwd=REPO_ROOT,
                             capture_output=True, text=True).stdout.split()
    templates = {}
    for name in listing:
        if name.endswith(".template.json"):
            templates[name.removesuffix(".template.json")] = json.loads(_git_show(ref, f"{snapshot_dir}/{name}") or "{}")
    raw = _git_show(ref, "config/environments.json")
    try:
        config = parse_config(json.loads(raw)) if raw else None
    except ConfigError:
        config = None  # the base's own config was invalid; cost delta then starts from zero
    return templates, config


def render_report(base_templates: dict[str, dict], new_templates: dict[str, dict],
                  base_config: ProjectConfig | None, new_config: ProjectConfig, ref: str) -> str:
    prices = sizing.load_prices()
    parts = [f"# Infrastructure diff against `{ref}`", ""]
    for env in new_templates:
        changes = diff_templates(normalize(base_templates.get(env, {})), normalize(new_templates[env]))
        old_cost, new_cost = cost_delta(base_config, new_config, env, prices)
        parts.append(render_environment(env, changes, old_cost, new_cost))
    for env in sorted(set(base_templates) - set(new_templates)):
        parts.append(f"## {env}\n\nEnvironment removed from the config: `cdk destroy '{env}/*'` to delete it.\n")
    parts.append(f"_Costs: fixed capacity at maximum workers from config/prices.json "
                 f"({prices['region']}, {prices['as_of']}); usage (PUT units, GB, requests) not included._")
    return "\n".join(parts) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infra.diff", description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="HEAD", help="git ref whose committed snapshots and config are the base")
    parser.add_argument("--out", help="also write the Markdown to this file")
    args = parser.parse_args(argv)
    if subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{args.base}^{{commit}}"], cwd=REPO_ROOT,
                      capture_output=True).returncode != 0:
        print(f"error: --base {args.base!r} is not a git commit in {REPO_ROOT}", file=sys.stderr)
        return 2
    try:
        config = load_config()
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from infra.snapshot import synth_templates

    new_templates = synth_templates()
    base_templates, base_config = base_state(args.base)
    report = render_report(base_templates, new_templates, base_config, config, args.base)
    print(report)
    if args.out:
        from pathlib import Path

        Path(args.out).write_text(report, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
