"""glue_jobs/sources/source_queries.py: a job's sources side by side, each query in its own thread and scheduler pool; a
failing source ends the run with its name, without waiting for the others."""

from __future__ import annotations

import threading

import pytest

from glue_jobs.sources.source_queries import POOL_PROPERTY, SourceFailed, run_sources


def _text_query(spark, folder, checkpoint, seen: list, name: str):
    """A start() as forEachBatch's loop makes one: a streaming query over a folder of text files, blocking until it
    ends (here after one batch: trigger once). Each batch records the pool its callback's jobs run in."""
    frame = spark.readStream.format("text").load(str(folder))

    def batch(data, batch_id) -> None:
        rows = data.count()  # a Spark job of the batch, as the writer's are
        seen.append((name, spark.sparkContext.getLocalProperty(POOL_PROPERTY), rows))

    def start() -> None:
        frame.writeStream.foreachBatch(batch).trigger(once=True).option("checkpointLocation", str(checkpoint)) \
            .start().awaitTermination()

    return start


def test_each_source_runs_its_query_in_its_own_pool(spark, tmp_path):
    seen: list = []
    starts = {}
    for name, lines in (("clicks", 3), ("orders", 5)):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "part.txt").write_text("".join(f"{name} {i}\n" for i in range(lines)), encoding="utf-8")
        starts[name] = _text_query(spark, folder, tmp_path / f"checkpoint-{name}", seen, name)
    assert sorted(run_sources(spark.sparkContext, starts, poll_seconds=0.1)) == ["clicks", "orders"]
    # Each batch's jobs ran in its own source's pool: the property set in the source's thread reached the query's
    # thread, which runs the batch function's Spark calls.
    assert sorted(seen) == [("clicks", "clicks", 3), ("orders", "orders", 5)]
    assert spark.sparkContext.getLocalProperty(POOL_PROPERTY) is None  # the caller's thread is left as it was


def test_a_failing_source_ends_the_run_with_its_name_while_another_still_runs(spark):
    release = threading.Event()
    still_running = threading.Event()

    def quiet() -> None:
        still_running.set()
        release.wait(30)

    def broken() -> None:
        still_running.wait(30)
        raise RuntimeError("the stream is gone")

    try:
        with pytest.raises(SourceFailed, match=r"source broken: its query failed: RuntimeError: the stream is gone") as caught:
            run_sources(spark.sparkContext, {"quiet": quiet, "broken": broken}, poll_seconds=0.1)
        assert caught.value.source == "broken" and isinstance(caught.value.__cause__, RuntimeError)
        assert not release.is_set()  # raised without waiting for the quiet source to end
    finally:
        release.set()
    with pytest.raises(ValueError, match="no source"):
        run_sources(spark.sparkContext, {})
