# The README's two commands live here so that README, CI and people run the same thing.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

$(BIN)/cardfit: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(BIN)/cardfit

.PHONY: install demo test lint bench
install: $(BIN)/cardfit

demo: install
	$(BIN)/cardfit plan llama3.1:8b --gpu "RTX 4090"
	$(BIN)/cardfit plan meta-llama/Llama-3.3-70B-Instruct --quant fp8 --context 32768 --runtime vllm --top 8

test: install
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/python -m pytest

bench: install
	$(BIN)/python benchmarks/bench_cli.py
