# The README's commands. Both create .venv when missing and install the project from its own files.
# The interpreter .venv is made from: the system's CPython, /usr/bin/python3, when it is 3.10 or later and can make a
# virtual environment, else python3 on the PATH; `make PYTHON=...` chooses another. A pyenv build (python3 on the
# PATH of this project's machines) links the interpreter to a shared libpython and has no PGO or LTO; Debian's
# CPython 3.11 is built with both and linked statically, and runs the suite's Python in 11 to 26 % less CPU
# (benchmarks/README.md, "Session 20", "The interpreter").
SYSTEM_PYTHON := /usr/bin/python3
PYTHON ?= $(shell $(SYSTEM_PYTHON) -c 'import ensurepip, sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null \
	&& echo $(SYSTEM_PYTHON) || echo python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
DEMO_DIR ?= demo-output

.PHONY: test lint demo demo-stream flink-up flink-down protos benchmark results audit dist constraints clean

# Every dependency at the version constraints.txt pins (the versions CI and the deploy/ images run).
$(STAMP): setup.py constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,dev]' -c constraints.txt
	touch $(STAMP)

# Two pytest workers per core (pytest-xdist): much of the suite waits on the processes and servers it starts (jobs,
# brokers, a Flink cluster), and on 2 cores 4 workers kept the cores 96 % busy and ran it in 643 s, against 1,129 s
# with 2 (benchmarks/README.md, session 11). A test file's tests stay on one worker, with its module fixtures.
TEST_WORKERS ?= $(shell expr 2 \* $$(nproc))
test: $(STAMP)
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile

lint: $(STAMP)
	$(BIN)/python -m ruff check .  # the rule sets of ruff.toml
	$(BIN)/lint-imports  # the import contracts of .importlinter
	$(BIN)/python -m mypy  # transforms/ and schemas/, as mypy.ini says

demo: $(STAMP)
	$(BIN)/python -m pipelines.generate kanon --output $(DEMO_DIR)/joins --groups 2000 --joins 200000 --days 30 --seed 7 --bad-fraction 0.001
	$(BIN)/python -m pipelines.kanon --input '$(DEMO_DIR)/joins/joins-*' --output $(DEMO_DIR)/kanon --runner=FnApiRunner
	$(BIN)/python -m pipelines.generate microbenchmark --knob1 0.1 --knob2 0.1 --batch-size 200 --output $(DEMO_DIR)/microbenchmark --seed 7 --bad-fraction 0.001
	$(BIN)/python -m pipelines.compare_policies --impressions '$(DEMO_DIR)/microbenchmark/impressions-*' \
		--conversions '$(DEMO_DIR)/microbenchmark/conversions-*' --batch-size 200 --output $(DEMO_DIR)/measurement --runner=FnApiRunner
	$(BIN)/python -m pipelines.generate ara --output $(DEMO_DIR)/ara --devices 5000 --days 30 --seed 7 --bad-fraction 0.001
	$(BIN)/python -m pipelines.summary_client ara --sources '$(DEMO_DIR)/ara/sources-*' --triggers '$(DEMO_DIR)/ara/triggers-*' \
		--output $(DEMO_DIR)/ara-reports --runner=FnApiRunner
	rm -f $(DEMO_DIR)/ledger.db $(DEMO_DIR)/ledger.db-wal $(DEMO_DIR)/ledger.db-shm  # a fresh privacy-budget ledger, so the demo can run again
	$(BIN)/python -m pipelines.aggregate --reports '$(DEMO_DIR)/ara-reports/reports-*' --domain $(DEMO_DIR)/ara/domain.avro \
		--mode threshold --output $(DEMO_DIR)/summary-report --ledger sqlite:///$(DEMO_DIR)/ledger.db --now 1706745600 --runner=FnApiRunner
	$(BIN)/python -m pipelines.generate event-level --output $(DEMO_DIR)/event-level-data --devices 5000 --days 30 --seed 7 --bad-fraction 0.001
	$(BIN)/python -m pipelines.event_level --sources '$(DEMO_DIR)/event-level-data/sources-*' \
		--triggers '$(DEMO_DIR)/event-level-data/triggers-*' --output $(DEMO_DIR)/event-level --runner=FnApiRunner
	$(BIN)/python -m pipelines.demo_report --demo-dir $(DEMO_DIR)  # the top buckets, and $(DEMO_DIR)/index.html

# The streaming jobs live on a local Kafka-protocol broker (tansu from a wheel): producers replay joins and
# measurement events into topics, the k-anonymity and measurement jobs read them, verdicts and query results print
# as they arrive; everything started is stopped at the end.
demo-stream: $(STAMP)
	$(BIN)/python -m pipelines.demo_stream --output $(DEMO_DIR)/stream

# A standalone Flink cluster on 127.0.0.1 without Docker (docs/flink.md): the first run fetches Flink and builds Beam's
# job server with Maven (Java 17 and mvn needed); then `pm-beam COMMAND ... --runner FlinkRunner --flink_master
# 127.0.0.1:8081` runs a pipeline there. flink-down stops exactly what flink-up started.
flink-up: $(STAMP)
	PYTHON=$(BIN)/python deploy/flink/flink-up

flink-down: $(STAMP)
	PYTHON=$(BIN)/python deploy/flink/flink-down

# Regenerate schemas/proto/*_pb2.py and their type stubs *_pb2.pyi (read by mypy) from schemas/proto/*.proto (tests
# fail when they are stale).
protos: $(STAMP)
	$(BIN)/python -m grpc_tools.protoc -I. --python_out=. --pyi_out=. schemas/proto/events.proto schemas/proto/reports.proto schemas/proto/state.proto

# The committed evaluation (docs/results/report.md): every experiment at the quick size; datasets outside docs/.
results: $(STAMP)
	$(BIN)/python -m pipelines.evaluate all --output docs/results --data-dir .eval-data

# The full privacy audit of every mechanism (docs/audit/: report.md, results.json, results.csv, epsilon.png;
# about 10 minutes); make test runs the quick one (tests/audit/).
audit: $(STAMP)
	$(BIN)/python -m pipelines.audit --output docs/audit

# Every throughput benchmark of benchmarks/ (about 20 minutes; figures and method in benchmarks/README.md).
benchmark: $(STAMP)
	$(BIN)/python benchmarks/kanon_throughput.py
	$(BIN)/python benchmarks/measurement_throughput.py
	$(BIN)/python benchmarks/aggregation_throughput.py
	$(BIN)/python benchmarks/event_level_throughput.py
	$(BIN)/python benchmarks/streaming_throughput.py

# The sdist and the wheel in dist/ (what deploy/ installs into its images), built with the pinned setuptools.
dist: $(STAMP)
	$(BIN)/python -m build --no-isolation --outdir dist .

# constraints.txt: every transitive dependency of every extra pinned, for Python 3.11 on Linux (the images' Python).
# Keeps the current pins and resolves what setup.py changed; `make constraints UPGRADE=--upgrade` moves every pin
# to the newest release setup.py allows.
constraints: $(STAMP)
	$(BIN)/uv pip compile setup.py --all-extras --python-version 3.11 --python-platform x86_64-manylinux_2_28 \
		--custom-compile-command 'make constraints' --quiet $(UPGRADE) -o constraints.txt

clean:
	rm -rf $(DEMO_DIR) .pytest_cache .mypy_cache .ruff_cache build dist *.egg-info
