# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

export DAGSTER_HOME := $(CURDIR)/data/dagster_home
export TUNESMITH_DATASETS ?= $(CURDIR)/data/examples
export TUNESMITH_OUT ?= $(CURDIR)/data/out
export TUNESMITH_STORE ?= $(CURDIR)/data/store
export TUNESMITH_MODELS ?= $(CURDIR)/data/models

.PHONY: demo test test-fast ui lint bench bench-real clean

# deploy/constraints.txt: the versions the suite last passed with, for every package
$(STAMP): pyproject.toml deploy/constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c deploy/constraints.txt -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/tunesmith examples
	$(BIN)/tunesmith run

# Two test processes, one thread each: the suite is many small single-threaded runs, and the
# same file always runs in one process (some modules share a cache folder).
TEST_WORKERS ?= 2
test: $(STAMP)
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --durations=30

# The unit tier, for working: every test not marked `slow` (end-to-end builds, training runs of
# more than a few steps, several processes). `make test` runs these and the slow ones.
test-fast: $(STAMP)
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile -m "not slow" --durations=15

ui: $(STAMP)
	$(BIN)/tunesmith ui

lint: $(STAMP)
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

bench: $(STAMP)
	$(BIN)/python bench/rerun_ratio.py
	$(BIN)/python bench/muon_step.py
	$(BIN)/python bench/lokr_step.py
	$(BIN)/python bench/ddp_scaling.py
	$(BIN)/python bench/encode_batch.py
	$(BIN)/python bench/render.py
	$(BIN)/python bench/scale.py --sizes 200
	$(BIN)/python bench/quality_cost.py
	$(BIN)/python bench/steps.py
	# each phase of every family's step beside its bare loop's, largest first (under cProfile)
	$(BIN)/python bench/steps.py --short --profile
	# the labels' analysis beside plain Essentia: the corpus's songs, a five-minute song, the pool
	$(BIN)/python bench/labels.py
	$(BIN)/python bench/labels.py --long 300
	$(BIN)/python bench/labels.py --pool 2

# Every family at its published size, in bfloat16 on this machine: the estimate against the
# measured peak, our step against a bare loop's (docs/performance.md, "Full size").
bench-real: $(STAMP)
	$(BIN)/python bench/real_size.py --json data/real_size.json

clean:
	rm -rf data/out data/store data/dagster_home
