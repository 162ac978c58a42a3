# Developer shortcuts; the README's commands do the same.
PYTHON ?= python3
ARCH ?= sm_90a

.PHONY: install test test-fast examples lint gpu-suite einsum-suite clean

install:
	$(PYTHON) -m pip install ".[dev,torch,plot]"

test:
	$(PYTHON) -m pytest -q -n auto

test-fast:  # no nvcc compiles
	$(PYTHON) -m pytest -q -n auto -m "not slow"

examples:
	deepgemm gen specs/*.yaml
	deepgemm build --arch $(ARCH)
	@if nvidia-smi -L >/dev/null 2>&1; then deepgemm verify && deepgemm bench; \
	else echo "no GPU here: skipping verify and bench"; fi

lint:
	ruff check .

gpu-suite:  # on a GPU machine, from a checkout: specs/, specs/bench/, random specs, bench, sanitizers, gpu tests
	RAND=250 bash tools/gpu_run.sh verify bench indep sanitize pytest

einsum-suite:  # on a GPU machine: specs/einsum (opt_einsum's two-operand equations) + 150 random specs
	bash tools/einsum_suite.sh 150 11

clean:
	rm -rf generated
