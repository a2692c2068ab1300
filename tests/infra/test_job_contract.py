"""Contract between the synthesized Glue jobs and their entrypoints: every argument an entrypoint
reads is in the job's DefaultArguments, and every argument of ours in DefaultArguments is read.

Glue's own special parameters are hyphenated (--enable-metrics, --job-language) or --TempDir;
ours are lower_snake_case, which is how the two are told apart.
"""

from __future__ import annotations

import re

from compaction import glue_entry as compaction_entry
from devtools.template_sources import job_sources
from glue_jobs import glue_entry as streaming_entry
from infra.config import load_config

OURS = re.compile(r"^--([a-z][a-z0-9_]*)$")
GLUE_SUPPLIED = {"JOB_NAME"}


def _jobs(template: dict) -> list[dict]:
    return [r["Properties"] for r in template["Resources"].values() if r["Type"] == "AWS::Glue::Job"]


def _ours(job: dict) -> set[str]:
    return {m.group(1) for key in job["DefaultArguments"] if (m := OURS.match(key))}


def test_streaming_jobs_provide_exactly_what_the_entrypoint_reads(templates):
    checked, routed = 0, []
    for env, template in templates.items():
        routes = load_config().get(env).routes  # a routed source's entry has a routed source's keys
        for job in _jobs(template):
            if job["Command"]["Name"] != "gluestreaming":
                continue
            expected = set(streaming_entry.job_arguments()) - GLUE_SUPPLIED
            assert _ours(job) == expected, (env, _ours(job) ^ expected)
            for source in job_sources(job["DefaultArguments"]):
                table_format = "iceberg" if "lake_table" in source else "parquet"
                route = routes.get(source["source_name"])
                keys = set(streaming_entry.source_keys(source["source_type"], table_format,
                                                       routed=route.datasets if route else ()))
                assert set(source) == keys, (env, source["source_name"], set(source) ^ keys)
                assert ("--datalake-formats" in job["DefaultArguments"]) == (table_format == "iceberg")
                checked += 1
                routed += [(env, source["source_name"])] if route else []
    assert routed == [("dev", "events")]
    assert checked == 7  # dev 3 (clickstream, orders, the routed events) + staging 2 + prod 2


def test_compaction_job_provides_exactly_what_the_entrypoint_reads(templates):
    for env, template in templates.items():
        (job,) = [j for j in _jobs(template) if j["Command"]["Name"] == "glueetl"]
        required = set(compaction_entry.JOB_ARGUMENTS) - GLUE_SUPPLIED
        optional = set(compaction_entry.OPTIONAL_JOB_ARGUMENTS)
        provided = _ours(job)
        assert required <= provided, (env, required - provided)
        assert provided <= required | optional, (env, provided - required - optional)
