# The README's two commands: `make demo` and `make test`. Each installs what it needs first.
VENV ?= .venv
PYTHON ?= python3
STAMP := $(VENV)/.edgekit-installed

.PHONY: demo test test-all docs figures mutation install format clean

# From scratch (--clear) whenever the pins change, so the venv holds the lock and nothing older.
# onnx2torch (an .onnx source to tflite/executorch) goes to a folder of the venv's own, like a
# vendored copy, not to site-packages: it requires torchvision, and PyPI's torchvision 0.28.0 is
# linked against the CUDA torch build and does not import beside the CPU one.
# targets/onnx/source.py finds it there and gives it a torchvision stand-in (NMS and RoiAlign
# refuse by name). Where a matching torchvision exists, the onnx-source extra installs both.
# --no-compile: byte-compiling every installed module (torch, tensorflow, ray) took minutes;
# Python compiles the ones a command imports when it first imports them.
$(STAMP): pyproject.toml setup.py requirements.lock
	$(PYTHON) -m venv --clear $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip==26.3
	$(VENV)/bin/pip install --quiet --no-compile -c requirements.lock -e '.[cpu,dev]'
	$(VENV)/bin/pip install --quiet --no-deps -c requirements.lock \
	  --target $(VENV)/onnx2torch onnx2torch
	$(VENV)/bin/python -m edgekit.common.pipcheck
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/edgekit eval
	$(VENV)/bin/edgekit run --model digits-mobilenet --data digits --accuracy-aware

# Which tests: `make test` (CI on every push: .ci/run) leaves out the tests marked `long`
# (tests/long_tests.txt says which and why: the scenarios of minutes, the tests of 10 s and
# more) and the `timing` phase (what the machine measures, alone); `make test-all` (CI every
# night: .ci/nightly) runs every test.
SUITE ?= push
EVERY := $(filter all,$(SUITE))
SELECT := $(if $(EVERY),,and not long)

# Two phases (`make test` runs the first): everything but the `timing` tests on two workers
# (whole files per worker, so a module's fixtures are built once; the longest files first, in
# tests/conftest.py's order, so that the workers end together), with the docs' strict build
# beside them, then the timing tests alone, since a sibling beside a measurement is the noise
# it guards against (collected from the files that mark any: collecting all of them took 5 s
# of that phase). Both phases share one store of exported artifacts.
# The suite starts hundreds of Python processes, and each compiles what it imports again unless
# the bytecode is cached: so the suite caches it (in the venv and edgekit's __pycache__, both
# ignored by git) even where the environment sets PYTHONDONTWRITEBYTECODE. Importing edgekit's
# CLI with torch, onnxruntime and scipy.stats took 4.9 s without the cache, 2.4 s with it (a
# 2-core AMD EPYC VM).
test: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/python scripts/mutation_results.py --check
	store=$$(mktemp -d) && trap 'rm -rf "$$store"' EXIT && \
	  { NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet & docs=$$!; } && \
	  { env -u PYTHONDONTWRITEBYTECODE EDGEKIT_TEST_STORE=$$store \
	      $(VENV)/bin/pytest -n 2 --dist loadfile --no-loadscope-reorder -m "not timing $(SELECT)"; \
	      tests=$$?; } ; \
	  wait $$docs && [ $$tests = 0 ] $(if $(EVERY),&& \
	  env -u PYTHONDONTWRITEBYTECODE EDGEKIT_TEST_STORE=$$store \
	    $(VENV)/bin/pytest -p no:xdist -m timing $$(grep -lE 'pytest\.mark\.timing' tests/test_*.py))

test-all:
	$(MAKE) test SUITE=all

# the documentation site (mkdocs.yml, docs/): built strictly into site/, then served on
# http://127.0.0.1:8000 until Ctrl-C
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve --strict --dev-addr 127.0.0.1:8000

# every figure of README.md and benchmarks/*.md, remade on this machine (about an hour)
figures: $(STAMP)
	$(VENV)/bin/python benchmarks/figures.py

# mutation testing (cosmic-ray, in a venv of its own) of the modules users' decisions rest on;
# not part of `make test`: each mutant runs its module's tests (about 1,700 mutants, an hour and
# more on 2 cores, JOBS modules at once), with bytecode cached as in `make test` (a mutant's
# pytest otherwise compiled numpy and scipy again).
# ONLY="edgekit/common/stats.py ..." mutates those modules again and keeps the others' results;
# JOBS copies work at once (modules side by side, or one module's mutants over JOBS workers).
ONLY ?=
JOBS ?= 2
mutation: $(STAMP)
	test -x .venv-mutation/bin/cosmic-ray || { $(PYTHON) -m venv --clear .venv-mutation && \
	  .venv-mutation/bin/pip install --quiet -r scripts/mutation-requirements.txt; }
	env -u PYTHONDONTWRITEBYTECODE .venv-mutation/bin/python scripts/mutation.py \
	  --jobs $(JOBS) $(foreach module,$(ONLY),--only $(module))

format: $(STAMP)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

clean:
	rm -rf $(VENV) .venv-mutation edgekit-artifacts runs .pytest_cache site
