# SPDX-License-Identifier: GPL-2.0-only
# Userspace tools built on libmetainfer: the metainfer CLI, the ONNX
# conformance runner and the loader fuzzer.

TOOLS_CFLAGS := $(LIB_CFLAGS)
# top.c and trace.c include the uapi header, which includes libdrm's "drm.h"
TOOLS_CFLAGS += $(shell pkg-config --cflags libdrm 2>/dev/null || echo -I/usr/include/libdrm)
ifneq ($(wildcard tools/quant/quantize.c),)
TOOLS_CFLAGS += -DMI_HAVE_QUANT_MAIN
endif

$(O)/metainfer: $(wildcard tools/metainfer/*.c tools/quant/*.c) $(LIB_A)
	$(CC) $(TOOLS_CFLAGS) $(filter %.c,$^) -o $@ $(LIB_A) $(LIB_LDLIBS)

$(O)/mi-conformance: tools/conformance/conformance.c $(LIB_A)
	$(CC) $(TOOLS_CFLAGS) $< -o $@ $(LIB_A) $(LIB_LDLIBS)

ALL += $(O)/metainfer

ALL += $(O)/mi-conformance
CHECKS += check-conformance

# ONNX backend conformance (Debian's libonnx-testdata); fails on any FAIL.
.PHONY: check-conformance
check-conformance: $(O)/mi-conformance
	$(O)/mi-conformance --quiet --xfail tools/conformance/known-failures.txt

# ---- loader fuzzer (clang libFuzzer + ASan + UBSan) -------------------
# Built separately from the gcc objects; not part of `make` (it takes a
# while), only of `make check` through check-fuzz.
FUZZ_CC := clang
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_CFLAGS := -std=gnu11 -g -O1 -fno-omit-frame-pointer -fPIC -D_GNU_SOURCE \
	-Wno-unused-command-line-argument $(FUZZ_SAN) -fsanitize=fuzzer-no-link \
	-I$(CURDIR)/uapi -I$(CURDIR)/lib/include -I$(CURDIR)/lib -I$(O) -pthread \
	$(shell pkg-config --cflags libdrm 2>/dev/null || echo -I/usr/include/libdrm)
# The fast CPU and int8 kernels (GCC vector extensions and builtins,
# '#pragma GCC target') are linked uninstrumented from the normal gcc
# build; the loader, graph code and reference ops are instrumented.
# lib/device (placement's devices and lowering) too: it links libdrm and
# liburing.
FUZZ_CPU_OBJS := $(patsubst %.c,$(O)/%.o,$(wildcard lib/cpu/*.c lib/quant/*.c lib/plan/*.c lib/meta/*.c lib/device/*.c lib/predict/*.c lib/fingerprint/*.c))
FUZZ_SRCS := $(filter-out lib/cpu/%,$(LIB_SRCS))
FUZZ_OBJS := $(patsubst %.c,$(O)/fuzz/%.o,$(FUZZ_SRCS)) $(O)/fuzz/gen/onnx.pb-c.o \
	$(FUZZ_CPU_OBJS)
FUZZ_BIN := $(O)/fuzz/fuzz-load
FUZZ_SECONDS ?= 60

ifneq ($(wildcard lib/quant/ops_quant.c),)
$(O)/fuzz/lib/ops/registry.o: FUZZ_CFLAGS += -DMI_HAVE_QUANT_OPS
endif

$(O)/fuzz/lib/%.o: lib/%.c $(O)/gen/onnx.pb-c.h $(wildcard lib/*.h lib/*/*.h lib/include/metainfer/*.h)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -c $< -o $@

$(O)/fuzz/gen/onnx.pb-c.o: $(O)/gen/onnx.pb-c.c $(O)/gen/onnx.pb-c.h
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -I$(O)/gen -c $< -o $@

$(FUZZ_BIN): tools/fuzz/fuzz-load.c $(FUZZ_OBJS)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer $^ -o $@ -lprotobuf-c -lm -ldrm -luring -lsqlite3

# Seeds: every conformance model (small, valid, covering most ops).
CHECKS += check-fuzz
.PHONY: check-fuzz fuzz fuzz-seeds fuzz-load
fuzz: $(FUZZ_BIN)

fuzz-seeds:
	@rm -rf $(O)/fuzz/seeds && mkdir -p $(O)/fuzz/seeds $(O)/fuzz/corpus
	@for d in /usr/share/libonnx-testdata/data/{node,pytorch-converted,pytorch-operator,simple}/*/; do \
		cp "$$d/model.onnx" "$(O)/fuzz/seeds/$$(basename $$d).onnx"; done

# Every input is loaded (parse, validate, fold, normalize, plan) and, if it
# loads and is small, run once on zeroed inputs (MI_FUZZ_RUN=1).
# tools/fuzz/regress holds inputs that once crashed; they run first.
check-fuzz: $(FUZZ_BIN) fuzz-seeds
	MI_FUZZ_RUN=1 ASAN_OPTIONS=allocator_may_return_null=1 $(FUZZ_BIN) \
		-max_total_time=$(FUZZ_SECONDS) -timeout=20 -rss_limit_mb=2048 \
		-max_len=65536 -print_final_stats=1 \
		-artifact_prefix=$(O)/fuzz/ $(O)/fuzz/corpus $(O)/fuzz/seeds \
		tools/fuzz/regress

# Loader only (no kernel runs): faster, for changes to lib/onnx_load.c.
fuzz-load: $(FUZZ_BIN) fuzz-seeds
	@mkdir -p $(O)/fuzz/corpus-load
	ASAN_OPTIONS=allocator_may_return_null=1 $(FUZZ_BIN) \
		-max_total_time=$(FUZZ_SECONDS) -timeout=20 -rss_limit_mb=2048 \
		-max_len=65536 -print_final_stats=1 \
		-artifact_prefix=$(O)/fuzz/load- $(O)/fuzz/corpus-load $(O)/fuzz/seeds

# ---- demo: a real torchvision model through info and run --bench ------
DEMO_MODEL ?= mobilenet_v2
DEMOS += demo-runtime
.PHONY: demo-runtime
demo-runtime: $(O)/metainfer
	@echo "=== demo-runtime: export torchvision $(DEMO_MODEL) (seeded random weights, opset 13)"
	$(PYTHON) tools/models/export.py --out $(O)/models --only $(DEMO_MODEL)
	@echo "=== metainfer info (graph before/after normalization, feature map)"
	$(O)/metainfer info $(O)/models/$(DEMO_MODEL).onnx
	@mkdir -p $(O)/demo-runtime
	@echo "=== metainfer plan --explain (the default plan: per node the legal variants, the one taken)"
	$(O)/metainfer plan $(O)/models/$(DEMO_MODEL).onnx -o $(O)/demo-runtime/$(DEMO_MODEL).plan.json
	$(O)/metainfer plan $(O)/models/$(DEMO_MODEL).onnx --explain | head -n 40
	@echo "=== metainfer run --bench 20 on PyTorch's seeded input, with that plan"
	$(O)/metainfer run $(O)/models/$(DEMO_MODEL).onnx \
		--input $(O)/models/$(DEMO_MODEL).input.npy \
		--output $(O)/demo-runtime/$(DEMO_MODEL).npy --bench 20 \
		--plan $(O)/demo-runtime/$(DEMO_MODEL).plan.json
	@$(PYTHON) -c "import numpy as np; y = np.load('$(O)/demo-runtime/$(DEMO_MODEL).npy'); \
		r = np.load('$(O)/models/$(DEMO_MODEL).output.npy'); \
		e = float(np.abs(y - r).max() / np.abs(r).max()); \
		print('max|metainfer - pytorch| / max|pytorch| = %.3g (%s)' % (e, 'OK' if e < 1e-4 else 'MISMATCH')); \
		raise SystemExit(e >= 1e-4)"

# `perf stat` on the devices' PMUs and `metainfer top --once --json`
# against simulated devices in the test VM (~1 min under TCG).
CHECKS += check-top
.PHONY: check-top
check-top: modules $(O)/metainfer $(ST_O)/perf_test
	tools/vm/vmrun -t 600 $(ST_VMRUN_FLAGS) -- tools/metainfer/test-top.sh $(O)
