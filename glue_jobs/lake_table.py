"""One dataset's lake table as the jobs see it: its columns and types, event time, key, and which contract
validates it. Built from a glue_jobs.datasets.Dataset (`LakeTable.of`); the batch writer, the packed batch,
the lake layout and the compaction take one instead of naming fields.

Which contract: glue_jobs/contract.py is a hand-tuned implementation of clickstream's contract (flat
fields, counted one-object checks; its figures are in docs/streaming-job.md). It validates a dataset only
when that dataset's files say exactly what it implements (`implements_flat_contract`); every other dataset,
and clickstream once its files change, runs on glue_jobs/typed_contract.py, which handles any schema.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from glue_jobs.datasets import Dataset, EventTime, Rule, load
from glue_jobs.schema import INGESTION_COLUMNS, PARTITION_COLUMNS

DEFAULT_DATASET = "clickstream"
# Ingestion columns with few distinct values per file: Parquet dictionary encoding pays for them.
_DICTIONARY_INGESTION = ("source", "source_partition", "arrival_time", "batch_id")
_FLAT_DICTIONARY_FIELDS = ("event_type", "currency")  # clickstream's low-cardinality fields


@dataclass(frozen=True)
class LakeTable:
    dataset: Dataset
    flat: bool  # validated by glue_jobs/contract.py (see the module doc)

    @classmethod
    def of(cls, dataset: Dataset | str | None = None) -> LakeTable:
        return _table(dataset if isinstance(dataset, Dataset) else load(dataset or DEFAULT_DATASET))

    @property
    def name(self) -> str:
        return self.dataset.name

    @property
    def event_time(self) -> str:
        return self.dataset.event_time.field

    @property
    def key(self) -> tuple[str, ...]:
        return self.dataset.key

    def data_columns(self) -> list[tuple[str, str]]:
        """(name, Spark DDL) of every non-partition lake column, in file order: fields, then ingestion metadata."""
        return self.dataset.columns() + [(name, ddl) for name, _, ddl in INGESTION_COLUMNS]

    def partition_columns(self) -> list[tuple[str, str]]:
        """(name, Spark DDL) of the hour partition columns as the writes hold them: event_date is a DATE there
        (glue_jobs/lake_layout.py), a string only in the Parquet lake's catalog partition values."""
        return [(name, "date" if name == "event_date" else ddl) for name, _, ddl in PARTITION_COLUMNS]

    def column_names(self) -> list[str]:
        """Every lake column including the partitions, in the order the files and the writes hold them."""
        return [name for name, _ in self.data_columns()] + [name for name, _, _ in PARTITION_COLUMNS]

    def spark_schema(self):
        from pyspark.sql import types as T

        ddl = ",".join(f"`{name}` {type_}" for name, type_ in self.data_columns() + [(n, s) for n, _, s in PARTITION_COLUMNS])
        return T._parse_datatype_string(ddl)

    def dictionary_columns(self) -> tuple[str, ...]:
        """Columns written with Parquet dictionary encoding: few distinct values per file."""
        if self.flat:
            fields = _FLAT_DICTIONARY_FIELDS
        else:
            normalized = {r.path for r in self.dataset.rules if r.normalize or r.enum}
            fields = tuple(f.name for f in self.dataset.schema.fields
                           if f.type.kind == "enum" or (f.type.kind == "string" and f.name in normalized))
        return (*fields, *_DICTIONARY_INGESTION)

    def validate(self, envelope, *, now_ms: int):
        """The dataset's contract over an envelope frame (see the module doc for which one)."""
        if self.flat:
            from glue_jobs.contract import validate

            return validate(envelope, now_ms=now_ms)
        from glue_jobs.typed_contract import validate

        return validate(envelope, self.dataset, now_ms=now_ms)


@cache
def _table(dataset: Dataset) -> LakeTable:
    return LakeTable(dataset=dataset, flat=implements_flat_contract(dataset))


def implements_flat_contract(dataset: Dataset) -> bool:
    """Whether glue_jobs/contract.py implements exactly this dataset's contract: its schema is the flat
    contract's newest event schema and its dataset.json says what the contract's constants say."""
    from glue_jobs import contract, schema
    from glue_jobs.datasets import DatasetError

    try:
        flat_schema = schema.avro_schema()
    except DatasetError:  # the project carries no clickstream dataset: nothing implements the flat contract
        return False
    normalized = ("trim", "lower")
    expected_rules = {Rule(path=name, min_length=1, normalize=normalized if name in contract.NORMALIZED_FIELDS else ())
                      for name in ("event_id", "event_type")}
    return (
        dataset.avro() == flat_schema
        and dataset.key == ("event_id",)
        and dataset.event_time == EventTime(contract.EVENT_TIME_FIELD, "epoch_millis", contract.MIN_EVENT_TIME_MS, contract.MAX_FUTURE_MS)
        and dataset.json_text == contract.JSON_TEXT_FIELDS
        and set(dataset.rules) == expected_rules
    )
