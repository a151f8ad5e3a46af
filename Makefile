# The README's two commands live here so that README, CI and people run the same thing.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

$(BIN)/cardfit: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(BIN)/cardfit

.PHONY: install demo test lint bench bench-web browser
install: $(BIN)/cardfit

# The web page is tested in headless Chromium (Debian packages chromium + chromium-driver); installed when
# missing and apt-get is usable, otherwise that one test is skipped with its reason.
browser:
	@command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1 || \
	  { command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null) \
	  || echo "note: chromium not installed; the browser test will be skipped"; }

demo: install
	$(BIN)/cardfit plan llama3.1:8b --gpu "RTX 4090"
	$(BIN)/cardfit plan meta-llama/Llama-3.3-70B-Instruct --quant fp8 --context 32768 --runtime vllm --top 8

test: install browser
	$(BIN)/ruff check src tests benchmarks scripts
	$(BIN)/python -m pytest

bench: install
	$(BIN)/python benchmarks/bench_cli.py --against

# `cardfit serve` under load on 127.0.0.1: kept-alive latency, 1/4/16/64 clients, memory (README "Performance")
bench-web: install
	$(BIN)/python benchmarks/load_web.py --sweep
