# Two commands on a fresh machine: `make quickstart` and `make test`.
# Both create .venv when it is missing; the install re-runs only when pyproject.toml changes.

VENV   ?= .venv
PYTHON ?= python3
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
WORDNET := /usr/share/wordnet/index.sense
CHROMIUM := /usr/bin/chromium
OFFLINE := HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 WANDB_MODE=offline

.PHONY: setup test quickstart peer-venv clean

setup: $(STAMP) $(WORDNET) $(CHROMIUM)

# torch first: the pinned CPU wheel, so nothing later pulls a multi-GB CUDA build.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# WordNet for data_gen, from Debian's packages (as root; otherwise say what to install).
$(WORDNET):
	@if [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wordnet-base wordnet-sense-index >/dev/null; \
	else \
		echo "WordNet missing: run 'sudo apt-get install wordnet-base wordnet-sense-index' (or python -m nltk.downloader wordnet)"; \
	fi

# Chromium for the test that renders `score --html` headless and looks at the screenshot (Debian's package).
$(CHROMIUM):
	@if [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	else \
		echo "Chromium missing: run 'sudo apt-get install chromium' (the HTML report test is skipped without it)"; \
	fi

# the formatter and linter first (ruff, configured in pyproject.toml): seconds, before minutes of tests.
# TEST_WORKERS pytest-xdist processes with one torch thread each: the tiny models and the CLI
# subprocesses' imports use a core each, and threads that outnumber the cores only wait on each other
# (2 workers halve the suite on a 2-core machine). Each worker holds a few GiB at most.
TEST_WORKERS ?= 2
test: setup
	$(PY) -m ruff format --check --quiet .
	$(PY) -m ruff check --quiet .
	$(OFFLINE) OMP_NUM_THREADS=1 $(PY) -m pytest -q -n $(TEST_WORKERS)

quickstart: setup
	$(OFFLINE) $(VENV)/bin/lightning-metrics quickstart

# unbabel-comet (the peer the COMET benchmarks compare against) pins transformers 4: its own venv,
# used only by benchmarks/score_speed.py and benchmarks/comet_wmt.py, never a dependency.
peer-venv:
	test -x .venv-comet/bin/python || $(PYTHON) -m venv .venv-comet
	.venv-comet/bin/python -m pip install --quiet torch==2.13.0
	.venv-comet/bin/python -m pip install --quiet unbabel-comet
	.venv-comet/bin/python -m pip install --quiet 'setuptools<81' bleurt-pytorch
	# google-research/metricx's own code pins transformers 4.30.2 (its models.py does not run on later 4.x)
	test -x .venv-metricx/bin/python || $(PYTHON) -m venv .venv-metricx
	.venv-metricx/bin/python -m pip install --quiet torch==2.13.0
	.venv-metricx/bin/python -m pip install --quiet 'transformers[torch]==4.30.2' sentencepiece 'protobuf<3.21' 'datasets>=2.13,<3' 'pyarrow<17' 'numpy<2'

clean:
	rm -rf $(VENV) runs .pytest_cache
