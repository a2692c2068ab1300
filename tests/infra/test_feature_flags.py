"""cdk.json sets every feature flag the pinned aws-cdk-lib recommends (devtools/feature_flags.py)."""

from devtools.feature_flags import DEVIATIONS, recommended_flags, unset_flags
from infra.app_builder import cdk_json_context


def test_cdk_json_sets_every_recommended_flag():
    assert unset_flags() == {}, "run `python -m devtools.feature_flags --review`, then set the flags in cdk.json"


def test_a_missing_or_legacy_flag_is_reported():
    context = cdk_json_context()
    recommended = recommended_flags()
    assert len(recommended) > 80  # the list is read from the library, not an empty stand-in
    context.pop("@aws-cdk/aws-s3:createDefaultLoggingPolicy")
    context["@aws-cdk/aws-iam:minimizePolicies"] = False
    assert unset_flags(context) == {
        "@aws-cdk/aws-s3:createDefaultLoggingPolicy": True,
        "@aws-cdk/aws-iam:minimizePolicies": True,
    }


def test_deviations_name_recommended_flags_with_a_reason():
    recommended = recommended_flags()
    for flag, (value, reason) in DEVIATIONS.items():
        assert flag in recommended, f"{flag} is no longer recommended; drop the deviation"
        assert value != recommended[flag]
        assert len(reason) > 40
