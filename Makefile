# stitch — every target works as the first command on a fresh machine.
PY      ?= python3.11
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
# transformers 4.52.4 (the GraphMend paper's version), layered over .venv through a .pth
LEGACY  := .venv-hf452
LSTAMP  := $(LEGACY)/.installed
PYTEST  := $(BIN)/python -m pytest
# serving (PyTriton pins numpy<2): its own venv, torch and stitch seen through .venv
SERVE   := .venv-serve
SSTAMP  := $(SERVE)/.installed

.PHONY: install serve-env test test-all demo bench bench-libs bench-cold bench-export bench-serve fuzz lint clean sweep forms

install: $(STAMP) $(LSTAMP) $(SSTAMP)

serve-env: $(SSTAMP)

# Re-installs only when the package metadata or the pins change.
$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[dev,hf,tensorrt-rtx,onnx,vision]'
	touch $(STAMP)

$(LSTAMP): $(STAMP) constraints-hf452.txt
	test -x $(LEGACY)/bin/python || $(PY) -m venv $(LEGACY)
	$(BIN)/python -c "import site; print(site.getsitepackages()[0])" \
	  > $$($(LEGACY)/bin/python -c "import site; print(site.getsitepackages()[0])")/_stitch_main_venv.pth
	$(LEGACY)/bin/python -m pip install -q -c constraints-hf452.txt transformers==4.52.4
	touch $(LSTAMP)

# site.addsitedir (not a plain path) so .venv's own .pth files, stitch's included, are read;
# .venv-serve's packages (numpy<2) come first on sys.path
$(SSTAMP): $(STAMP) constraints-serve.txt
	test -x $(SERVE)/bin/python || $(PY) -m venv $(SERVE)
	echo "import site; site.addsitedir('$$($(BIN)/python -c "import site; print(site.getsitepackages()[0])")')" \
	  > $$($(SERVE)/bin/python -c "import site; print(site.getsitepackages()[0])")/zz_stitch_main_venv.pth
	$(SERVE)/bin/python -m pip install -q -c constraints-serve.txt nvidia-pytriton \
	  'tritonclient[http,grpc]' fastapi uvicorn 'numpy<2'
	touch $(SSTAMP)

# lint, then the fast tier: every stage through cheap representatives (what CI runs), on
# one worker per core (pytest-xdist: 8.5 min on 2 cores, about 16 on one), each worker's
# torch on one thread. What waits for test-all: the slow marks in the test files and the
# SLOW table in tests/conftest.py, each with its reason.
test: lint
	OMP_NUM_THREADS=1 STITCH_REQUIRE_SERVE=1 $(PYTEST) -q -n auto --maxprocesses 4 -m "not slow"

# lint, then everything: the budgeted fuzz run, real-model exports, Triton servers, backend builds
test-all: lint
	STITCH_REQUIRE_SERVE=1 $(PYTEST) -q

demo: install
	$(BIN)/python -m stitch demo

bench: install
	OMP_NUM_THREADS=1 $(BIN)/python experiments/bench.py
	cd experiments && OMP_NUM_THREADS=1 ../$(BIN)/python bench_sweep.py

# the same latency rows for the library suites' models stitch fixes (sweep_libs.json), into
# experiments/results/bench_libs.{json,md}; needs the sweep extra (docs/sweep.md)
bench-libs: install
	cd experiments && STITCH_BENCH_SWEEP=libs OMP_NUM_THREADS=1 ../$(BIN)/python bench_sweep.py

# cold start on real rows: a fresh process to the first output, the saved artifact
# (stitch.load + first call) against torch.compile of the original (import + model from disk
# + compile + first call) and eager, in experiments/results/cold_start.{json,md} (~30 min
# here); a chunk: $(BIN)/python experiments/cold_start.py --only ctrl,xlm
bench-cold: install
	OMP_NUM_THREADS=1 $(BIN)/python experiments/cold_start.py

# wall time and peak memory of stitch.export against torch.export, per architecture and size,
# one fresh process each, in experiments/results/export_cost.{json,md}; a chunk:
# $(BIN)/python experiments/export_cost.py --only bert,t5 --sizes tiny,6 --merge
bench-export: install
	OMP_NUM_THREADS=1 $(BIN)/python experiments/export_cost.py

# loopback load test of stitch serve vs a FastAPI endpoint around the same artifact
bench-serve: install
	OMP_NUM_THREADS=1 $(SERVE)/bin/python experiments/bench_serve.py

# every model transformers (and torchvision) can build from a tiny config, and small models of
# diffusers, timm, ultralytics, PyG and kornia (the sweep extra), through stitch, one niced
# subprocess each; resumable (docs/sweep.md). Chunks: make sweep SWEEP_ONLY=bert,t5
# SWEEP_LIMIT_S=300 SWEEP_SUITES=hf,hf452,torchvision,diffusers,timm,ultralytics,pyg,kornia
# SWEEP_UNTIL=15:00 SWEEP_REUSE=any. ultralytics requires opencv-python, whose cv2 needs libGL:
# the headless build's cv2 takes its place.
sweep: install
	$(BIN)/python -c "import torchvision" 2>/dev/null || \
	  $(BIN)/python -m pip install -q -c constraints.txt torchvision
	$(BIN)/python -c "import diffusers, timm, ultralytics, torch_geometric, kornia" 2>/dev/null \
	  || $(BIN)/python -m pip install -q -c constraints.txt -e '.[sweep]'
	! $(BIN)/python -m pip show -q opencv-python 2>/dev/null || { \
	  $(BIN)/python -m pip uninstall -q -y opencv-python && $(BIN)/python -m pip install -q \
	  --force-reinstall --no-deps -c constraints.txt opencv-python-headless; }
	cd experiments && ../$(BIN)/python sweep.py

# the long fuzz run (make test-all runs a budgeted 50 programs); in chunks, each its own draw,
# each chunk one line in experiments/results/fuzz.jsonl (commit, counts, refusal reasons):
# make fuzz FUZZ_N=500 FUZZ_SEED=3
FUZZ_N ?= 2000
FUZZ_SEED ?=
fuzz: install
	STITCH_FUZZ_EXAMPLES=$(FUZZ_N) STITCH_FUZZ_SEED=$(FUZZ_SEED) \
	  STITCH_FUZZ_RECORD=$(CURDIR)/experiments/results/fuzz.jsonl $(PYTEST) -q -s tests/fuzz

# stitch on spellings of control flow (tests/forms): exact / refused / mismatch / internal
# error by construct and reason, in experiments/results/forms.{json,md} (~10 s a form here)
FORMS_N ?= 200
FORMS_SEED ?= 0
FORMS_WORKERS ?= 1
forms: install
	OMP_NUM_THREADS=1 $(BIN)/python experiments/forms.py --n $(FORMS_N) --seed $(FORMS_SEED) --workers $(FORMS_WORKERS)

# ruff, then the layout (tests/layout.py): no import cycle, imports only downward by the
# declared stage order, no underscore name imported across modules, modules <= 430 lines
lint: install
	$(BIN)/ruff check stitch capture tests experiments
	$(BIN)/python -m tests.layout

clean:
	rm -rf $(VENV) $(LEGACY) $(SERVE) .pytest_cache build *.egg-info
