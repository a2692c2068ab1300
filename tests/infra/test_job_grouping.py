"""`streamlake sizing --group`: which datasets share a streaming job, and what each dataset then costs."""

from __future__ import annotations

import json

import pytest

from devtools import job_grouping, sizing
from devtools.job_grouping import DatasetLoad, propose, report


def test_ten_small_datasets_share_two_jobs_for_a_fifth_of_one_job_each():
    """The issue's case: ten datasets of 50 records/s of 1 KB (about 130 GB a month each)."""
    prices = sizing.load_prices()
    loads = [DatasetLoad(f"d{i}", 50, 1) for i in range(10)]
    jobs = propose(loads, window_seconds=60, prices=prices)
    one_job = job_grouping.job_cost("G.025X", sizing.MIN_STREAMING_WORKERS, prices)
    assert round(one_job, 2) == 160.6  # 2 x 0.25 DPU x $0.44 x 730 h
    assert sorted(len(job.datasets) for job in jobs) == [2, job_grouping.MAX_SOURCES_PER_JOB]
    assert sorted(name for job in jobs for name in job.datasets) == sorted(load.name for load in loads)
    for job in jobs:  # each job within its share of the window, its cost split over its datasets
        assert job.batch_seconds <= job.window_seconds * job_grouping.UTILIZATION
        assert sum(job.shares_usd.values()) == pytest.approx(job.monthly_usd, abs=0.05)
    result = report(loads, jobs, prices)
    totals = result["totals"]
    assert totals["one_job_each_usd"] == pytest.approx(10 * one_job, abs=0.05)
    assert totals["grouped_usd"] == pytest.approx(2 * one_job, abs=0.05)
    assert result["rows"][0]["gb_month"] == 131.4 and totals["firehose_usd"] == pytest.approx(10 * 131.4 * 0.075, abs=0.05)
    text = job_grouping.render(result)
    assert "| **total** | | | 1,314.0 | 1,606.00 | 2 job(s) | 321.16 | 98.60 |" in text
    assert "measured 2026-11-28, a 2-core local machine, not Glue" in text and "unverified" in text


def test_a_dataset_too_big_for_a_small_job_gets_its_own_sized_job():
    jobs = propose([DatasetLoad("big", 400_000, 1), DatasetLoad("small", 10, 1)], window_seconds=60)
    big = next(job for job in jobs if "big" in job.datasets)
    assert big.datasets == ["big"] and (big.worker_type, big.workers) != ("G.025X", 2)
    assert next(job for job in jobs if "small" in job.datasets).datasets == ["small"]


def test_the_command_line_refuses_what_it_cannot_read(capsys):
    assert sizing.main(["--group", "a:50"]) == 2
    assert "expected NAME:RECORDS_PER_SECOND:RECORD_KB" in capsys.readouterr().err
    assert sizing.main(["--group", "a:50:1", "--group", "a:5:1"]) == 2
    assert "a dataset named twice: ['a']" in capsys.readouterr().err
    assert sizing.main(["--group", "a:0:1"]) == 2
    assert sizing.main(["--group", "a:50:1", "--group", "b:50:2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [row["dataset"] for row in out["rows"]] == ["a", "b"] and len(out["jobs"]) == 1
