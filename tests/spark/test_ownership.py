"""A lake belongs to one dataset, a checkpoint and dead letters to one source (glue_jobs/commit/ownership.py): the commands a
user runs refuse another's folder with one line naming both, before anything is read or deleted; a folder written
before owners were recorded is adopted on first use and the log says so."""

from __future__ import annotations

import json
import logging

import pytest

from compaction.__main__ import main as compact_main
from glue_jobs.__main__ import main as job_main
from glue_jobs.commit.ownership import OWNER_FILE, OwnershipError, claim
from glue_jobs.lake.storage import HadoopStorage

ORDER = {"order_id": "o-1", "ordered_at": "2026-11-20T10:15:00Z", "customer_id": "c", "status": "paid", "currency": "EUR",
         "total": 10.5, "items": [{"sku": "a", "quantity": 1, "unit_price": 10.5}]}


def _run(tmp_path, dataset: str, *, lake="lake", checkpoint="cp", dead="dead", source="s1") -> None:
    job_main(["run-local", "--dataset", dataset, "--source-name", source, "--input", str(tmp_path / "in"),
              "--lake", str(tmp_path / lake), "--dead-letter", str(tmp_path / dead), "--checkpoint", str(tmp_path / checkpoint),
              "--once"])


def test_a_lake_or_checkpoint_of_another_dataset_or_source_is_refused_by_run_local_and_compact_local(spark, tmp_path, capsys):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "part-1.json").write_text(json.dumps(ORDER) + "\n")
    _run(tmp_path, "orders")
    lake_files = sorted(p.relative_to(tmp_path) for p in (tmp_path / "lake").rglob("*") if p.is_file())
    assert json.loads((tmp_path / "lake" / OWNER_FILE).read_text()) == {"dataset": "orders"}
    assert json.loads((tmp_path / "cp" / OWNER_FILE).read_text()) == {"datasets": ["orders"], "source": "s1"}
    capsys.readouterr()
    # 1d225b0: every record dead-lettered under clickstream's contract into the orders lake, exit 0
    with pytest.raises(SystemExit) as refused:
        _run(tmp_path, "clickstream", checkpoint="cp2", dead="dead2")
    assert refused.value.code == 2
    assert f"lake {tmp_path / 'lake'} belongs to dataset orders, not to dataset clickstream" in capsys.readouterr().err
    # 1d225b0: the right --dataset on a checkpoint of another read 0 records; here a checkpoint of another source
    with pytest.raises(SystemExit):
        _run(tmp_path, "orders", lake="lake3", dead="dead3", source="s2")
    assert f"checkpoint {tmp_path / 'cp'} belongs to datasets orders, source s1, not to datasets orders, source s2" in \
        capsys.readouterr().err
    # 1d225b0: compacted as clickstream, the orders files deleted and a null-keyed row kept, exit 0
    assert compact_main(["run-local", "--dataset", "clickstream", "--lake", str(tmp_path / "lake"), "--grace-minutes", "0"]) == 2
    assert "belongs to dataset orders, not to dataset clickstream" in capsys.readouterr().err
    assert sorted(p.relative_to(tmp_path) for p in (tmp_path / "lake").rglob("*") if p.is_file()) == lake_files


def test_a_folder_written_before_owners_is_adopted_on_first_use_and_the_log_says_so(spark, tmp_path, caplog):
    storage = HadoopStorage(spark)
    lake = tmp_path / "old-lake"
    (lake / "event_date=2026-11-20" / "event_hour=10").mkdir(parents=True)
    (lake / "event_date=2026-11-20" / "event_hour=10" / "part-0.parquet").write_bytes(b"x")
    with caplog.at_level(logging.WARNING, logger="glue_jobs.commit.ownership"):
        claim(storage, str(lake), "lake", {"dataset": "orders"})
    assert f"lake {lake} has no {OWNER_FILE} (written before owners were recorded): adopted for dataset orders" in caplog.text
    claim(storage, str(lake), "lake", {"dataset": "orders"})  # recorded: the same owner passes
    with pytest.raises(OwnershipError, match="belongs to dataset orders, not to dataset sensor_readings"):
        claim(storage, str(lake), "lake", {"dataset": "sensor_readings"})
    # compaction does not create a lake no job has written: nothing is recorded there
    claim(storage, str(tmp_path / "nothing-yet"), "lake", {"dataset": "orders"}, create=False)
    assert not (tmp_path / "nothing-yet").exists()


def test_every_input_the_local_source_does_not_read_is_said_in_the_summary(spark, tmp_path):
    """1d225b0 skipped files in subfolders and hidden names, and never read lines appended to a file already read, all
    without a word: the run summary now names each (glue_jobs/sources/local_inputs.py)."""
    import io

    from glue_jobs.local_runner import run_local

    inputs = tmp_path / "in"
    (inputs / "sub").mkdir(parents=True)
    (inputs / "part-1.json").write_text(json.dumps(ORDER) + "\n")
    (inputs / "sub" / "part-2.json").write_text(json.dumps(ORDER) + "\n")
    (inputs / "_x.json").write_text(json.dumps(ORDER) + "\n")
    (inputs / ".y.json").write_text(json.dumps(ORDER) + "\n")

    def run() -> str:
        out = io.StringIO()
        run_local(input_dir=str(inputs), lake_dir=str(tmp_path / "lake"), dead_letter_dir=str(tmp_path / "dead"),
                  checkpoint_dir=str(tmp_path / "cp"), once=True, dataset="orders", spark=spark, out=out)
        return out.getvalue()

    first = run()
    assert "skipped: 1 file(s) in subfolders of the input (the source reads only the folder's own files): sub/part-2.json" in first
    assert "skipped: 2 hidden file(s) (names starting with _ or .): .y.json, _x.json" in first
    assert "changed after they were read" not in first
    import os
    import time

    with (inputs / "part-1.json").open("a") as appended:
        appended.write(json.dumps({**ORDER, "order_id": "o-2"}) + "\n")
    later = time.time() + 5
    os.utime(inputs / "part-1.json", (later, later))
    second = run()
    assert "summary: records=0" in second
    assert ("warning: 1 file(s) changed after they were read; lines appended to a file already read are never read "
            "(write new files instead): part-1.json") in second
