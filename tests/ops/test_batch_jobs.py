"""devtools/batch_jobs.py reads Spark's event log: each job is counted for the micro-batch its properties name."""

from __future__ import annotations

import json

from devtools.batch_jobs import BATCH_PROPERTY, jobs_per_batch


def _job(job_id: int, batch: str | None, *stages: tuple[int, str]) -> str:
    properties = {"spark.app.id": "local-1"} | ({BATCH_PROPERTY: batch} if batch is not None else {})
    return json.dumps({"Event": "SparkListenerJobStart", "Job ID": job_id, "Properties": properties,
                       "Stage Infos": [{"Stage ID": sid, "Stage Name": name} for sid, name in stages]})


def test_jobs_are_counted_per_batch_by_their_last_stage_and_others_left_out(tmp_path):
    log = tmp_path / "app-1"
    log.write_text("\n".join([
        json.dumps({"Event": "SparkListenerApplicationStart"}),
        _job(0, None, (0, "collect at x.py:1")),  # not a micro-batch's job (planning, the listing)
        _job(1, "0", (1, "call at clientserver.py:617")),
        _job(2, "0", (2, "call at a"), (4, "parquet at NativeMethodAccessorImpl.java:0"), (3, "call at b")),
        _job(3, "1", (5, "parquet at NativeMethodAccessorImpl.java:0")),
        json.dumps({"Event": "SparkListenerJobEnd", "Job ID": 3}),
    ]) + "\n")
    assert jobs_per_batch(log) == {0: ["call", "parquet"], 1: ["parquet"]}
