# SPDX-License-Identifier: GPL-2.0-only
# Plan search and `metainfer tune` (lib/plan/search.c, Documentation/
# search.rst).  search.c goes into libmetainfer.a with the other lib/plan
# objects (plan.mk); the tests are host only: the CPU and two emulated
# accelerators.
#
#   make check-tune   search invariants, hardware intents (test-intent)
#                     + the CLI (in make check)
#   make bench-tune   tuned vs default, measured (in make bench)

SEARCH_TEST := $(O)/lib/plan/tests/test-search
INTENT_TEST := $(O)/lib/plan/tests/test-intent
# The plan tests' small exports (plan.mk) and the int8 models that
# tools/hetero/hetero.mk makes (included after this file: named here).
TUNE_MODELS := $(O)/plan/models
TUNE_INT8 := $(patsubst %,$(O)/hetero/models/%.int8.onnx,mobilenet_v2 \
	resnet18 efficientnet_b0 transformer)
TUNE_CHECK := $(TUNE_MODELS)/squeezenet1_1.onnx \
	$(TUNE_MODELS)/mobilenet_v2.onnx $(O)/hetero/models/transformer.int8.onnx

$(SEARCH_TEST): lib/plan/tests/test-search.c $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(LIB_CFLAGS) $< -o $@ $(LIB_A) $(LIB_LDLIBS)

$(INTENT_TEST): lib/plan/tests/test-intent.c $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(LIB_CFLAGS) $< -o $@ $(LIB_A) $(LIB_LDLIBS)

ALL += $(SEARCH_TEST) $(INTENT_TEST)
CHECKS += check-tune
BENCHES += bench-tune

.PHONY: tune-models check-tune bench-tune
tune-models:
	@$(PYTHON) tools/models/export.py --out $(TUNE_MODELS) --size 64 \
		--seq 16 --only $(PLAN_NETS) -q

check-tune: $(SEARCH_TEST) $(INTENT_TEST) $(O)/metainfer tune-models $(O)/hetero/models/transformer.int8.onnx
	$(SEARCH_TEST) --check $(TUNE_CHECK)
	$(INTENT_TEST) $(TUNE_MODELS)/squeezenet1_1.onnx \
		$(O)/hetero/models/transformer.int8.onnx
	@PYTHON=$(PYTHON) tools/metainfer/test-tune-cli.sh $(O)/metainfer \
		$(TUNE_MODELS)/squeezenet1_1.onnx

# Every exported network at 1 and 2 threads, the four int8 hetero models
# on three random emulated two-NPU setups each.
bench-tune: $(SEARCH_TEST) tune-models $(TUNE_INT8)
	$(SEARCH_TEST) --bench -t 1,2 --setups 3 $(TUNE_MODELS)/*.onnx $(TUNE_INT8)
