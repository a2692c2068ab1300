#!/usr/bin/env python3
"""CDK entry point: one stage per environment in config/environments.json.

    npx cdk synth --quiet '**'         # every environment, cdk-nag enforced
    npx cdk synth -c environments=dev  # a subset (comma-separated)
    npx cdk deploy 'dev/*'             # one environment
"""

import sys

from glue_jobs.datasets import DatasetError
from infra.config import ConfigError


def main() -> int:
    from infra.app_builder import build_app

    try:
        app, _ = build_app()
    except (ConfigError, DatasetError) as exc:  # every problem of the config or the dataset files, one message
        print(f"error: {exc}", file=sys.stderr)
        return 1
    app.synth()
    return 0


if __name__ == "__main__":
    sys.exit(main())
