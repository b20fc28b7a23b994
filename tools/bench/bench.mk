# SPDX-License-Identifier: GPL-2.0-only
# `make bench`: metainfer vs ONNX Runtime, side by side in one run, written
# to BENCHMARKS.md.  The peer is onnxruntime-node (its CPU library ships in
# the npm package; the package's install script only downloads optional GPU
# parts and is skipped).  Knobs (environment): BENCH_MODELS, BENCH_THREADS,
# BENCH_ROUNDS, BENCH_ITERS, BENCH_RUN_MS, BENCH_INT8, BENCH_COSINE_N; see
# tools/bench/bench.py.
#
#   make ort               install onnxruntime-node into $(O)/ort (once)
#   make bench             the full benchmark; rewrites BENCHMARKS.md
#   make bench-ort-only    ORT alone (checks the harness, no metainfer)

ORT_VERSION := 1.30.0
ORT_DIR := $(O)/ort
ORT_STAMP := $(ORT_DIR)/node_modules/onnxruntime-node/package.json
BENCH_OUT ?= BENCHMARKS.md

.PHONY: ort bench-ort bench-ort-only
ort: $(ORT_STAMP)

$(ORT_STAMP):
	@command -v npm >/dev/null || { echo "bench: npm not found (run make deps)"; exit 1; }
	@mkdir -p $(ORT_DIR)
	@test -f $(ORT_DIR)/package.json || echo '{"name":"metainfer-bench-peer","private":true}' > $(ORT_DIR)/package.json
	cd $(ORT_DIR) && npm install --ignore-scripts --no-audit --no-fund --loglevel=error onnxruntime-node@$(ORT_VERSION)
	@test -f $@ && touch $@

bench-ort: $(ORT_STAMP)
	@$(PYTHON) tools/bench/bench.py --metainfer $(O)/metainfer \
		--models-dir $(O)/models --work $(O)/bench \
		--write $(BENCH_OUT) --command "make bench"

bench-ort-only: $(ORT_STAMP)
	@$(PYTHON) tools/bench/bench.py --ort-only --models-dir $(O)/models \
		--work $(O)/bench

BENCHES += bench-ort
