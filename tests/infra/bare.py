"""A bare stack for unit tests of one construct, with the project's feature flags from cdk.json."""

from __future__ import annotations

import aws_cdk as cdk

from infra.app_builder import cdk_json_context


def bare_stack(name: str = "Unit", **kwargs) -> cdk.Stack:
    return cdk.Stack(cdk.App(context=cdk_json_context()), name, **kwargs)


# arn:...:stack/<name>/<uuid> -> the uuid's first 8 hex digits (infra/naming.py).
STACK_INSTANCE_SUFFIX = {"Fn::Select": [0, {"Fn::Split": ["-", {"Fn::Select": [2, {"Fn::Split": ["/", {"Ref": "AWS::StackId"}]}]}]}]}


def instance_named(base: str) -> dict:
    """The template value of a retained resource's name: `base-<stack instance suffix>`."""
    return {"Fn::Join": ["-", [base, STACK_INSTANCE_SUFFIX]]}
