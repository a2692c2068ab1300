"""The template checks of the review of 1d225b0 (issue "Alarms that reach a person, and deploys that reach the running
job"), each run on today's templates, where it passes, and on 1d225b0's (tests/infra/fixtures/templates_1d225b0, the
snapshots as they were), where it must fail: a check that passed on the templates it was written against would prove
nothing. The runtime findings have their tests elsewhere: the Iceberg catalog's glue.skip-archive in the rehearsal
(tests/rehearsal/test_rehearsal.py), the keeper's concurrency in tests/ops/test_job_keeper.py."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from infra.streaming_job import STREAMING_TIMEOUT
from tests.infra import test_delivery_paths as delivery
from tests.infra import test_job_keeper as keeper

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "templates_1d225b0"
ENVIRONMENTS = ("dev", "staging", "prod")


def _old(environment: str) -> dict:
    return json.loads(gzip.decompress((FIXTURES / f"{environment}.template.json.gz").read_bytes()))


def check_job_failed_rule_ignores_deliberate_stops(templates: dict, environment: str) -> None:
    """Finding 7: the notification rule must not match STOPPED (every deploy stops a run on purpose)."""
    rules = [r["Properties"] for k, r in templates[environment]["Resources"].items()
             if r["Type"] == "AWS::Events::Rule" and k.startswith("MonitoringGlueJobFailed")]
    assert len(rules) == 1 and "STOPPED" not in rules[0]["EventPattern"]["detail"]["state"]


def check_streaming_jobs_run_for_seven_days(templates: dict, environment: str) -> None:
    """Finding 8: a blank Timeout now defaults to 48 h (4.0) or 8 h (5.x): every streaming job sets 7 days."""
    jobs = [r["Properties"] for r in templates[environment]["Resources"].values()
            if r["Type"] == "AWS::Glue::Job" and r["Properties"]["Command"]["Name"] == "gluestreaming"]
    assert jobs and all(j.get("Timeout") == STREAMING_TIMEOUT.to_minutes() for j in jobs)


def check_keeper_key_and_delivery(templates: dict, environment: str) -> None:
    """Findings 1 and 7: every alarm action and rule target reaches its destination; no key statement twice."""
    assert delivery.delivery_problems(templates[environment])[0] == []
    delivery.test_no_key_policy_repeats_a_statement({environment: templates[environment]})


CHECKS = {
    "1 alarm notifications delivered": check_keeper_key_and_delivery,
    "2 no reserved concurrency": lambda t, e: keeper.test_the_keeper_has_no_reserved_concurrency({e: t[e]}),
    "4 log groups Glue writes, created with retention": keeper.test_every_glue_job_logs_to_log_groups_of_the_stack_under_the_names_glue_writes,
    "5 deploys and schedule wait for policies and grants": keeper.test_the_deploy_resources_and_the_schedule_wait_for_the_roles_policies_log_groups_and_grants,
    "6 the digest covers what a run fixes": keeper.test_the_digest_is_of_everything_a_run_fixes_in_the_template_it_gives_glue,
    "7 deliberate stops notify no one": check_job_failed_rule_ignores_deliberate_stops,
    "8 streaming timeout of 7 days": check_streaming_jobs_run_for_seven_days,
}


@pytest.mark.parametrize("finding", list(CHECKS))
@pytest.mark.parametrize("environment", ENVIRONMENTS)
def test_each_finding_is_fixed_today_and_its_check_fails_on_1d225b0(templates, environment, finding):
    check = CHECKS[finding]
    check(templates, environment)
    with pytest.raises(AssertionError):
        check({environment: _old(environment)}, environment)
