"""`python -m operations dataset check`: the dataset's real contract over sample records, locally."""

from __future__ import annotations

import json

from operations.dataset_check import check


def test_check_counts_reasons_names_paths_and_shows_the_lake_schema(spark, tmp_path):
    order = {"order_id": "o-1", "ordered_at": "2026-11-20T10:15:00Z", "customer_id": "c", "status": "paid", "currency": "EUR",
             "total": 10.5, "items": [{"sku": "a", "quantity": 1, "unit_price": 10.5}]}
    lines = [json.dumps(order), json.dumps({**order, "order_id": "o-2", "items": [{"sku": "a", "quantity": "1", "unit_price": 1}]}),
             "{broken"]
    sample = tmp_path / "orders.jsonl"
    sample.write_text("\n".join(lines) + "\n")
    printed: list[str] = []
    counts = check("orders", sample, out=printed.append)
    assert counts == {"valid": 1, "invalid_type": 1, "malformed_json": 1}
    assert "  2: invalid_type, items[0].quantity: wrong JSON type, " + lines[1][:117] + "..." in printed  # long payloads cut
    assert printed[-1].startswith("struct<order_id:string,ordered_at:timestamp,")
    assert "items:array<struct<sku:string,quantity:int,unit_price:decimal(10,2)>>" in printed[-1]


def test_check_exits_non_zero_when_records_fail_so_it_can_gate_a_pull_request(spark, tmp_path, capsys):
    """1d225b0 exited 0 with every record failing. Now: 3 when the share failing is above --max-failure-rate (default
    0), with one line saying how many; 0 at or below it; 1 for an empty sample."""
    from operations.cli import main

    order = {"order_id": "o-1", "ordered_at": "2026-11-20T10:15:00Z", "customer_id": "c", "status": "paid", "currency": "EUR",
             "total": 10.5, "items": [{"sku": "a", "quantity": 1, "unit_price": 10.5}]}
    sample = tmp_path / "orders.jsonl"
    sample.write_text(json.dumps(order) + "\n{broken\n{broken\n{broken\n")
    assert main(["dataset", "check", "orders", "--sample", str(sample)]) == 3
    assert "error: 3 of 4 record(s) (75.0%) fail the contract, above --max-failure-rate 0%" in capsys.readouterr().err
    assert main(["dataset", "check", "orders", "--sample", str(sample), "--max-failure-rate", "75"]) == 0
    assert main(["dataset", "check", "orders", "--sample", str(sample), "--max-failure-rate", "74.9"]) == 3
    sample.write_text(json.dumps(order) + "\n")
    assert main(["dataset", "check", "orders", "--sample", str(sample)]) == 0
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert main(["dataset", "check", "orders", "--sample", str(empty)]) == 1
