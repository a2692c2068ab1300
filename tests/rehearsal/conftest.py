"""Deploy rehearsal fixtures: a synthesized cloud assembly, the Spark lines, a moto server.

These tests run in the main virtualenv (they synthesize with the CDK and start moto); the jobs themselves
run in processes of each Spark line's virtualenv (.venv for pyspark 3.5, .venv-spark33 for 3.3)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import infra  # noqa: F401  (puts the venv Node first on PATH before aws_cdk loads)
from rehearsal.__main__ import SPARK_LINE_PYTHONS
from rehearsal.moto import moto_server

REPO = Path(__file__).resolve().parents[2]


def synthesize(outdir: Path, raw_config: dict | None = None) -> Path:
    from infra.app_builder import build_app
    from infra.config import parse_config

    config = parse_config(raw_config, "test") if raw_config is not None else None
    app, _ = build_app(config, outdir=outdir)
    app.synth()
    return outdir


@pytest.fixture(scope="session")
def cloud_assembly(tmp_path_factory) -> Path:
    """Every environment synthesized as `make synth` does (cdk-nag enforced), assets included."""
    return synthesize(tmp_path_factory.mktemp("cdk.out"))


# A dataset joining dev's routed stream `events` with its files and one line of config (docs/datasets.md "A routed
# stream in an environment"): docs/examples/routed's sensor_readings, its records told apart by `kind`.
JOINED_ROUTE = ("events", "reading", "sensor_readings")
# A routed MSK topic in the same variant of dev, in its shared job: frames of checkouts and page_views (which dev's
# routed stream carries too: the rehearsal gives the topic's records keys of their own), each routed by the registry
# schema that wrote it (config `msk.datasets`, docs/kafka.md). Not clickstream or sensor_readings: the rehearsal cannot
# reproduce the decoder's rendering of a double in a refused record's dead letter (rehearsal.scenario.decoder_json).
ROUTED_TOPIC = {"mode": "provisioned", "source_name": "mix", "topic": "mix-events", "dataset": None,
                "datasets": ["checkouts", "page_views"]}


@pytest.fixture(scope="session")
def swapped_lines_assembly(tmp_path_factory) -> tuple[Path, Path]:
    """dev with the other allowed Glue version for each job kind (streaming on 5.0, compaction on 4.0), the orders
    dataset switched to Iceberg through its dataset.json only, as a team would (its source commits with Glue 5.0's
    Iceberg, 1.7.1, and the hourly job maintains the table with Glue 4.0's, 1.0.0), and a third dataset on dev's
    routed stream `events` (page_views and checkouts ship), added with its files (docs/examples/routed/datasets) and
    one route value (JOINED_ROUTE), and a routed MSK topic (ROUTED_TOPIC) in the same shared job. Returns the assembly and the datasets folder (the job reads
    its datasets from the zip; the rehearsal's held input and checks read them from this folder)."""
    import shutil

    from devtools.iceberg_demo import switch
    from glue_jobs import datasets
    from infra.config import DEFAULT_CONFIG_PATH, update_raw

    raw = json.loads(Path(DEFAULT_CONFIG_PATH).read_text(encoding="utf-8"))
    raw = update_raw(raw, "dev", "streaming.glue_version", "5.0")
    raw = update_raw(raw, "dev", "compaction.glue_version", "4.0")
    raw["environments"] = {"dev": raw["environments"]["dev"]}
    dev = raw["environments"]["dev"]
    stream, value, dataset = JOINED_ROUTE
    (routed,) = [s for s in dev["kinesis_streams"] if s["name"] == stream]
    routed["route"]["values"][value] = dataset
    dev["msk"] = {**dev.get("msk", {}), **ROUTED_TOPIC}
    dev["streaming_jobs"][0]["sources"].append(ROUTED_TOPIC["source_name"])
    root = switch(tmp_path_factory.mktemp("swapped-datasets") / "datasets", "orders")  # as `make demo` switches it
    shutil.copytree(REPO / "docs" / "examples" / "routed" / "datasets" / dataset, root / dataset)
    with pytest.MonkeyPatch.context() as patch:  # only while synthesizing: the job reads its datasets from the zip
        patch.setenv(datasets.ROOT_VARIABLE, str(root))
        return synthesize(tmp_path_factory.mktemp("cdk.out-swapped"), raw), root


@pytest.fixture(scope="session")
def spark_lines():
    """Glue version -> Spark line. The Spark 3.3 venv is made by `make test`; without it these tests cannot
    rehearse Glue 4.0 and fail rather than skip (a rehearsal that silently ran nothing would prove nothing)."""
    from rehearsal.runtime import spark_line

    missing = [str(p) for p in SPARK_LINE_PYTHONS.values() if not p.exists()]
    if missing:
        pytest.fail(f"Spark line virtualenv(s) missing: {missing}; run `make bootstrap`")
    return {version: spark_line(python) for version, python in SPARK_LINE_PYTHONS.items()}


@pytest.fixture(scope="session")
def moto_endpoint():
    with moto_server() as endpoint:
        yield endpoint


@pytest.fixture(scope="session")
def spark():
    from tests.spark_session import shared_spark_session

    session = shared_spark_session()
    yield session
    session.stop()
