"""One dataset's lake table as the jobs see it: its columns and types, event time, key, and its contract
(glue_jobs/contract/typed_contract.py, the one contract of every dataset). Built from a glue_jobs.datasets.Dataset
(`LakeTable.of`); the batch writer, the packed batch, the lake layout and the compaction take one instead of naming
fields.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from glue_jobs.datasets import Dataset, load
from glue_jobs.schema import INGESTION_COLUMNS, PARTITION_COLUMNS

DEFAULT_DATASET = "clickstream"
# Ingestion columns with few distinct values per file: Parquet dictionary encoding pays for them.
_DICTIONARY_INGESTION = ("source", "source_partition", "arrival_time", "batch_id")


@dataclass(frozen=True)
class LakeTable:
    dataset: Dataset

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
        (glue_jobs/lake/lake_layout.py), a string only in the Parquet lake's catalog partition values."""
        return [(name, "date" if name == "event_date" else ddl) for name, _, ddl in PARTITION_COLUMNS]

    def column_names(self) -> list[str]:
        """Every lake column including the partitions, in the order the files and the writes hold them."""
        return [name for name, _ in self.data_columns()] + [name for name, _, _ in PARTITION_COLUMNS]

    def spark_schema(self):
        from pyspark.sql import types as T

        ddl = ",".join(f"`{name}` {type_}" for name, type_ in self.data_columns() + [(n, s) for n, _, s in PARTITION_COLUMNS])
        return T._parse_datatype_string(ddl)

    def dictionary_columns(self) -> tuple[str, ...]:
        """Columns written with Parquet dictionary encoding: few distinct values per file (enums, and the strings a
        rule normalizes or lists the values of)."""
        normalized = {r.path for r in self.dataset.rules if r.normalize or r.enum}
        fields = tuple(f.name for f in self.dataset.schema.fields
                       if f.type.kind == "enum" or (f.type.kind == "string" and f.name in normalized))
        return (*fields, *_DICTIONARY_INGESTION)

    def validate(self, envelope, *, now_ms: int, count_replacements: bool = False):
        """The dataset's contract over an envelope frame (glue_jobs/contract/typed_contract.py)."""
        from glue_jobs.contract.typed_contract import validate

        return validate(envelope, self.dataset, now_ms=now_ms, count_replacements=count_replacements)


@cache
def _table(dataset: Dataset) -> LakeTable:
    return LakeTable(dataset=dataset)
