"""`make bench`'s (c) runs dev's streaming job as deployed (bench/glue_job.py), fed through clickstream's source table
while the job's other sources read empty folders. A mix-up there is silent: the job never sees a batch and the
benchmark waits out its timeout (it did, once dev's job ran several sources)."""

from __future__ import annotations

from bench.glue_job import held_tables
from rehearsal import assembly as assembly_module


def test_the_benchmark_feeds_clickstream_and_idles_every_other_source_of_devs_job(cloud_assembly, tmp_path):
    assembly = assembly_module.load(cloud_assembly, "dev")
    job, tables = held_tables(assembly, tmp_path / "held", tmp_path / "idle")
    assert [s.name for s in job.sources] == ["clickstream", "orders", "events"]
    assert {name: table["input"] for name, table in tables.items()} == {
        "streamlake_dev.source_clickstream": str(tmp_path / "held"),
        "streamlake_dev.source_orders": str(tmp_path / "idle" / "orders"),
        "streamlake_dev.source_events": str(tmp_path / "idle" / "events"),
    }
