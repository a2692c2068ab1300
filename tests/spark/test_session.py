"""glue_jobs.session.session_conf: settings for one block, each key back as it was afterwards."""

from __future__ import annotations

import pytest

from glue_jobs.session import session_conf

SET_KEY = "spark.sql.files.maxPartitionBytes"  # registered, with a default
UNSET_KEY = "spark.streamlake.test.unset"  # unknown to Spark: no default


def test_settings_hold_inside_and_are_restored_or_unset_after_an_error(spark):
    spark.conf.set(SET_KEY, "2048")
    try:
        with pytest.raises(RuntimeError, match="inside"):
            with session_conf(spark, {SET_KEY: "1024", UNSET_KEY: "x"}):
                assert (spark.conf.get(SET_KEY), spark.conf.get(UNSET_KEY)) == ("1024", "x")
                raise RuntimeError("inside")
        assert spark.conf.get(SET_KEY) == "2048"
        assert spark.conf.get(UNSET_KEY, None) is None  # unset again, not set to an empty value
    finally:
        spark.conf.unset(SET_KEY)
