# Two commands on a fresh machine: `make quickstart` and `make test`.
# Both create .venv when it is missing; the install re-runs only when pyproject.toml changes.

VENV   ?= .venv
PYTHON ?= python3
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
OFFLINE := HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 WANDB_MODE=offline

.PHONY: setup test quickstart clean

setup: $(STAMP)

# torch first: the pinned CPU wheel, so nothing later pulls a multi-GB CUDA build.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

test: setup
	$(OFFLINE) $(PY) -m pytest -q

quickstart: setup
	$(OFFLINE) $(VENV)/bin/lightning-metrics quickstart

clean:
	rm -rf $(VENV) runs .pytest_cache
