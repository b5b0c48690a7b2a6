# The README's two commands: `make demo` and `make test`. Each installs what it needs first.
VENV ?= .venv
PYTHON ?= python3
STAMP := $(VENV)/.edgekit-installed

.PHONY: demo test figures install format clean

$(STAMP): pyproject.toml requirements.lock
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip==26.3
	$(VENV)/bin/pip install --quiet -c requirements.lock -e '.[dev]'
	$(VENV)/bin/pip install --quiet --no-deps -c requirements.lock onnx2torch
	$(VENV)/bin/python -m edgekit.pipcheck
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/edgekit eval
	$(VENV)/bin/edgekit run --model digits-mobilenet --data digits --devices cpu,gpu --accuracy-aware

test: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/pytest

# every figure of README.md and benchmarks/*.md, remade on this machine (about an hour)
figures: $(STAMP)
	$(VENV)/bin/python benchmarks/figures.py

format: $(STAMP)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

clean:
	rm -rf $(VENV) edgekit-artifacts runs .pytest_cache
