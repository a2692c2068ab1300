"""glue_jobs/observed.py: an Observation's values read with few round trips, the same as pyspark's own `get`."""

from __future__ import annotations

import pytest
from pyspark.sql import Observation
from pyspark.sql import functions as F

from glue_jobs.observed import observed, row_count


def test_observed_reads_the_values_observation_get_reads(spark):
    ours, theirs = Observation("ours"), Observation("theirs")
    frame = spark.range(7)
    for observation in (ours, theirs):
        frame.observe(observation, row_count(), F.sum("id").alias("total")).collect()
    assert observed(ours, "rows", "total") == {"rows": 7, "total": 21} == theirs.get
    assert observed(ours, "total") == {"total": 21}
    with pytest.raises(KeyError, match="missing"):
        observed(ours, "missing")
