"""CDK feature flags: cdk.json sets every flag aws-cdk-lib recommends for the pinned version.

    python -m devtools.feature_flags            # check: exit 1 when a recommended flag is unset
    python -m devtools.feature_flags --review   # which unset flag changes which template, one at a time

Why: a feature flag left unset keeps a legacy behaviour, and setting it after the first deploy can
replace resources. `cdk init` writes the recommended list of the CDK version it comes with; this
project was not created that way, so the list is checked against the one aws-cdk-lib ships
(``recommended-feature-flags.json`` in the library's jsii package) on every test run. After an
aws-cdk-lib upgrade the check names the new flags, and ``--review`` shows the template change each
one makes, for the reviewer to accept (set it in cdk.json) or to record in DEVIATIONS with a reason.
"""

from __future__ import annotations

import argparse
import json
import sys
import tarfile
from importlib import resources
from typing import Any

from infra.app_builder import cdk_json_context

# Recommended flags this project sets to another value on purpose, with the reason.
DEVIATIONS: dict[str, tuple[Any, str]] = {
    "@aws-cdk/core:target-partitions": (
        ["aws"],
        "the platform deploys to the commercial partition only; with one partition, ARNs are written as "
        "literals (arn:aws:...) that a reviewer reads in the snapshots instead of Ref AWS::Partition joins",
    ),
}


def recommended_flags() -> dict[str, Any]:
    """The recommended flags of the installed aws-cdk-lib, read from its jsii package."""
    jsii_dir = resources.files("aws_cdk._jsii")
    tarballs = [entry for entry in jsii_dir.iterdir() if entry.name.endswith(".jsii.tgz")]
    if len(tarballs) != 1:
        raise RuntimeError(f"expected one aws-cdk-lib jsii tarball in {jsii_dir}, found {len(tarballs)}")
    with resources.as_file(tarballs[0]) as path, tarfile.open(path) as tar:
        member = tar.extractfile("package/recommended-feature-flags.json")
        if member is None:
            raise RuntimeError(f"{path.name} has no package/recommended-feature-flags.json")
        return json.load(member)


def unset_flags(context: dict[str, Any] | None = None) -> dict[str, Any]:
    """Recommended flags whose value in cdk.json differs, less the documented deviations."""
    context = cdk_json_context() if context is None else context
    problems = {}
    for flag, value in recommended_flags().items():
        expected = DEVIATIONS[flag][0] if flag in DEVIATIONS else value
        if context.get(flag, None) != expected:
            problems[flag] = expected
    return problems


def _resource_changes(before: dict, after: dict) -> list[str]:
    old, new = before.get("Resources", {}), after.get("Resources", {})
    lines = [f"+ {rid} ({new[rid]['Type']})" for rid in sorted(new.keys() - old.keys())]
    lines += [f"- {rid} ({old[rid]['Type']})" for rid in sorted(old.keys() - new.keys())]
    lines += [f"~ {rid} ({new[rid]['Type']})" for rid in sorted(old.keys() & new.keys()) if old[rid] != new[rid]]
    for section in ("Parameters", "Outputs", "Rules", "Conditions", "Mappings"):
        if before.get(section) != after.get(section):
            lines.append(f"~ template section {section}")
    return lines


def review(context: dict[str, Any] | None = None) -> dict[str, dict[str, list[str]]]:
    """Synthesize once per unset flag (that flag set, the others as in cdk.json) and return
    {flag: {environment: [changed resource lines]}} for the flags that change any template."""
    from devtools.snapshot import normalize, synth_templates

    base_context = cdk_json_context() if context is None else dict(context)
    baseline = {env: normalize(t) for env, t in synth_templates(context=base_context).items()}
    changes: dict[str, dict[str, list[str]]] = {}
    for flag, value in unset_flags(base_context).items():
        templates = synth_templates(context={**base_context, flag: value})
        per_env = {env: _resource_changes(baseline[env], normalize(t)) for env, t in templates.items()}
        per_env = {env: lines for env, lines in per_env.items() if lines}
        if per_env:
            changes[flag] = per_env
    return changes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devtools.feature_flags", description=__doc__.splitlines()[0],
                                     allow_abbrev=False)
    parser.add_argument("--review", action="store_true", help="synthesize with each unset flag and list what changes")
    args = parser.parse_args(argv)
    missing = unset_flags()
    if args.review:
        changes = review()
        print(f"{len(missing)} recommended flag(s) unset; {len(changes)} of them change a template")
        for flag, per_env in changes.items():
            print(f"\n{flag} = {json.dumps(missing[flag])}")
            for env, lines in per_env.items():
                print(f"  {env}:")
                print("\n".join(f"    {line}" for line in lines))
        return 0
    for flag, value in missing.items():
        print(f'cdk.json: set "{flag}": {json.dumps(value)} (recommended by the pinned aws-cdk-lib)')
    print(f"{len(missing)} recommended feature flag(s) unset")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
