# phrase_rescorer — everyday commands. Each target creates the virtual environment it needs.
#
#   make demo       train a small model on the bundled real sample, rescore the sample table,
#                   write the patched moses.ini and the analysis pictures (under work/demo/)
#   make test       the test suite (CPU only; see the README for its time; the real-Moses tests
#                   run when $MOSES, or the shared Moses beside the checkout, exists)
#   make test-fast  the same without the tests marked slow (tests/README.md: each tier's time)
#   make train      only the training part of the demo
#   make demo-pictures  only the analysis part of the demo (suggest, compare, embed, plot-log)
#   make bench      throughput benchmark on the real table (prints its figures; 10-15 minutes)
#   make bench-load --threads 1 against 2, quiet and with every core busy (a few minutes)
#   make profile-training  where a paper-size training step's time goes and the ceiling its products set (1-2 minutes)
#   make profile-training-nmt  the same for the sentence networks as the README's recipes train them
#                   (rnnsearch, then the transformer: FLOPs, product rates, time by part; 1-3 minutes)
#   make fuzz       the phrase-table reader on FUZZ_EXAMPLES random inputs per test (make test
#                   runs a short, fixed pass of the same tests)
#   make check      lint, format check and type check (what .ci/run checks before the tests)
#   make lint / make format-check / make typecheck
#   make golden     write the missing golden files of tests/data/golden (keeps existing ones;
#                   tests/helpers/golden.py says how to rewrite one for an intended change)
#
# GPU users pick their torch build, e.g.  make demo TORCH_SPEC="torch --index-url https://..."
# (the default is the CPU build that this project is developed and tested with).

PYTHON     ?= python3
VENV       ?= .venv
TORCH_SPEC ?= torch==2.13.0
PY         := $(VENV)/bin/python
STAMP      := $(VENV)/.installed
SAMPLE     ?= tests/data/sample.en-fr.phrase-table.gz
DEMO_DIR   ?= work/demo
TRAIN_ARGS ?= --preset small --max-time 240 --seed 1 --clip-norm 5 --init-std 0.05 --valid-every 250 --threads 1
SAMPLE_LANGS ?= --source-lang en --target-lang fr
MOSES_INI  ?= tests/data/sample.en-fr.moses.ini
FUZZ_EXAMPLES ?= 200000
DEMO_PHRASES ?= "looking at" "in a black shirt" "sit at a table" "A man in a blue shirt"

.PHONY: demo demo-pictures train test test-fast bench bench-load profile-training profile-training-nmt lint typecheck fuzz clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet "$(TORCH_SPEC)"
	$(PY) -m pip install --quiet -e ".[dev,plots]"
	touch $(STAMP)

$(DEMO_DIR)/model.pt: $(STAMP) $(SAMPLE)
	mkdir -p $(DEMO_DIR)
	$(VENV)/bin/phrase-rescorer train $(SAMPLE) $(DEMO_DIR)/model.pt $(TRAIN_ARGS) $(SAMPLE_LANGS) \
		--log $(DEMO_DIR)/train.log

train: $(STAMP)
	rm -f $(DEMO_DIR)/model.pt
	$(MAKE) $(DEMO_DIR)/model.pt

demo: $(DEMO_DIR)/model.pt
	$(VENV)/bin/phrase-rescorer inspect $(SAMPLE)
	$(VENV)/bin/rescore-phrase-table $(SAMPLE) $(DEMO_DIR)/phrase-table.rescored.gz \
		--model $(DEMO_DIR)/model.pt
	$(VENV)/bin/phrase-rescorer moses-ini $(MOSES_INI) $(DEMO_DIR)/moses.ini \
		--table $(abspath $(DEMO_DIR))/phrase-table.rescored.gz
	@echo
	@echo "demo outputs in $(DEMO_DIR)/:"
	@echo "  model.pt                   the network trained on $(SAMPLE)"
	@echo "  phrase-table.rescored.gz   the sample table + the RNN column, p(target|source)"
	@echo "  moses.ini                  $(MOSES_INI) with num-features=5 and a 5th weight"
	@echo "                             (its other paths keep the bundled ini's @MODEL_DIR@: tests/data/README.md)"
	@echo "next: README.md, 'The pipeline, on the tiny system in the clone' (tune with mert-moses.pl in a fresh --working-dir)"
	@$(MAKE) --no-print-directory demo-pictures

# What the demo network learned (the paper's Tables 2 and 3, Figs. 3 to 5) and its training curves.
demo-pictures: $(DEMO_DIR)/model.pt
	$(VENV)/bin/phrase-rescorer -q suggest --model $(DEMO_DIR)/model.pt --table $(SAMPLE) \
		$(DEMO_PHRASES) > $(DEMO_DIR)/suggest.txt
	$(VENV)/bin/phrase-rescorer -q compare --model $(DEMO_DIR)/model.pt --table $(SAMPLE) \
		--plot $(DEMO_DIR)/compare-scatter.png > $(DEMO_DIR)/compare.txt
	$(VENV)/bin/phrase-rescorer -q embed --model $(DEMO_DIR)/model.pt --table $(SAMPLE) \
		--out $(DEMO_DIR)/embeddings --plot > /dev/null
	$(VENV)/bin/phrase-rescorer -q plot-log $(DEMO_DIR)/train.log --out $(DEMO_DIR)/training-curves.png
	@echo
	@cat $(DEMO_DIR)/suggest.txt $(DEMO_DIR)/compare.txt
	@echo
	@echo "analysis of the demo model (text, then pictures):"
	@ls -1 $(DEMO_DIR)/suggest.txt $(DEMO_DIR)/compare.txt $(DEMO_DIR)/*.png $(DEMO_DIR)/embeddings/*.png

test: $(STAMP)
	$(PY) -m pytest -q

test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not slow"

fuzz: $(STAMP)
	FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(PY) -m pytest -q -p no:cacheprovider tests/faults/test_fuzz.py

bench: $(STAMP)
	$(PY) -m benchmarks.bench

bench-load: $(STAMP)
	$(PY) -m benchmarks.threads_under_load

# glibc keeps freed memory instead of page-faulting it in again every step (docs/performance.md).
profile-training: $(STAMP)
	$(PY) -m benchmarks.training_profile

profile-training-nmt: $(STAMP)
	$(PY) -m benchmarks.nmt_training_profile --network rnnsearch
	$(PY) -m benchmarks.nmt_training_profile --network transformer

.PHONY: check format-check golden

check: lint format-check typecheck

lint: $(STAMP)
	$(VENV)/bin/ruff check phrase_rescorer tests bin benchmarks

format-check: $(STAMP)
	$(VENV)/bin/ruff format --check phrase_rescorer tests bin benchmarks

typecheck: $(STAMP)
	$(VENV)/bin/mypy

golden: $(STAMP)
	$(PY) -m tests.helpers.golden

clean:
	rm -rf $(VENV) work .pytest_cache .mypy_cache .ruff_cache .hypothesis
