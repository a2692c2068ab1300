"""Deterministic template snapshots per environment: the reviewable picture of the infrastructure.

    python -m devtools.snapshot --update   # (make snapshots) rewrite tests/snapshots/ on purpose

Asset hashes are replaced by a placeholder: they change with bytes the reviewer does not read in a
template (the job code itself is reviewed as code), and would make every job edit a snapshot diff.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from infra.config import REPO_ROOT

SNAPSHOT_DIR = REPO_ROOT / "tests" / "snapshots"
_ASSET_HASH_RE = re.compile(r"\b[0-9a-f]{64}\b")


def normalize(template: Any) -> Any:
    """Return the template with every asset hash replaced by "<asset-hash>", and IAM statements' Resource
    lists in a stable order (CDK orders them by value, so a new asset hash could swap two asset ARNs;
    the order of a Resource list means nothing to IAM)."""
    text = json.dumps(template, sort_keys=True)
    return _sort_resources(json.loads(_ASSET_HASH_RE.sub("<asset-hash>", text)))


def _sort_resources(value: Any) -> Any:
    if isinstance(value, dict):
        out = {k: _sort_resources(v) for k, v in value.items()}
        if isinstance(out.get("Resource"), list) and "Effect" in out:
            out["Resource"] = sorted(out["Resource"], key=lambda r: json.dumps(r, sort_keys=True))
        return out
    if isinstance(value, list):
        return [_sort_resources(v) for v in value]
    return value


def render(template: Any) -> str:
    return json.dumps(normalize(template), indent=1, sort_keys=True) + "\n"


def snapshot_path(environment: str) -> Path:
    return SNAPSHOT_DIR / f"{environment}.template.json"


def synth_templates(environments: list[str] | None = None, config=None, context: dict | None = None) -> dict[str, dict]:
    """Synthesize in process (cdk-nag enforced) and return {environment: template}."""
    import tempfile

    from infra.app_builder import build_app

    with tempfile.TemporaryDirectory(prefix="cdk-snapshot-") as outdir:
        app, stages = build_app(config, outdir=outdir, environments=environments, context=context)
        app.synth()
        return {name: stage.synth().get_stack_artifact(stage.stack.artifact_id).template for name, stage in stages.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devtools.snapshot", description=__doc__.splitlines()[0],
                                     allow_abbrev=False)
    parser.add_argument("--update", action="store_true", help="rewrite the committed snapshots")
    args = parser.parse_args(argv)
    templates = synth_templates()
    changed = []
    for name, template in templates.items():
        path = snapshot_path(name)
        text = render(template)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            changed.append(name)
            if args.update:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
    verb = "updated" if args.update else "differ"
    print(f"snapshots {verb}: {', '.join(changed) or 'none'}")
    return 1 if changed and not args.update else 0


if __name__ == "__main__":
    sys.exit(main())
