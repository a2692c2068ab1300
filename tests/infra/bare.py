"""A bare stack for unit tests of one construct, with the project's feature flags from cdk.json."""

from __future__ import annotations

import aws_cdk as cdk

from infra.app_builder import cdk_json_context


def bare_stack(name: str = "Unit", **kwargs) -> cdk.Stack:
    return cdk.Stack(cdk.App(context=cdk_json_context()), name, **kwargs)
