# SPDX-License-Identifier: GPL-2.0-only
# lib/predict: node-time / plan-latency / peak-memory predictor
# (Documentation/predict.rst).  Objects go into libmetainfer.a as
# lib/plan/plan.mk's do; check-predict runs from CHECKS, bench-predict
# from BENCHES.

PREDICT_SRCS := $(wildcard lib/predict/*.c)
PREDICT_OBJS := $(patsubst %.c,$(O)/%.o,$(PREDICT_SRCS))

$(PREDICT_OBJS): $(wildcard lib/predict/*.h lib/plan/*.h lib/*.h lib/include/metainfer/*.h)
$(LIB_A): $(PREDICT_OBJS)

PREDICT_EVAL := $(O)/lib/predict/tests/predict-eval
# The plan tests' small exports (lib/plan/plan.mk): same options, so the
# export cache is shared.
PREDICT_MODELS := $(O)/plan/models
PREDICT_NETS := resnet18,resnet50,mobilenet_v2,mobilenet_v3_small,efficientnet_b0,squeezenet1_1,shufflenet_v2_x1_0,transformer
PREDICT_CHECK_NETS := squeezenet1_1 mobilenet_v2 shufflenet_v2_x1_0 resnet18

$(PREDICT_EVAL): lib/predict/tests/predict-eval.c $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(LIB_CFLAGS) $< -o $@ $(LIB_A) $(LIB_LDLIBS)

PREDICT_FPDB := $(O)/lib/predict/tests/test-fpdb

$(PREDICT_FPDB): lib/predict/tests/test-fpdb.c $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(LIB_CFLAGS) $< -o $@ $(LIB_A) $(LIB_LDLIBS)

ALL += $(PREDICT_EVAL) $(PREDICT_FPDB)
CHECKS += check-predict
BENCHES += bench-predict

.PHONY: predict-models check-predict bench-predict
predict-models:
	@$(PYTHON) tools/models/export.py --out $(PREDICT_MODELS) --size 64 \
		--seq 16 --only $(PREDICT_NETS) -q

# Fit on three families, hold one out (shufflenet), on two ISA paths at
# one thread; checks that the fitted trees beat the roofline on held-out
# nodes, that more measurements of a new sim chip lower its error, that
# a saved predictor loads back with identical predictions; test-fpdb: a
# fingerprint DB calibrates an emulated device better than its roofline;
# then the CLI.
check-predict: $(PREDICT_EVAL) $(PREDICT_FPDB) $(O)/metainfer predict-models
	@mkdir -p $(O)/predict
	$(PREDICT_FPDB) $(O)/predict
	$(PREDICT_EVAL) --check --eval shufflenet --isa generic,avx2 \
		--threads 1 --runs 3 --plans 4 --chips 20 \
		--save $(O)/predict/check.pred \
		$(addprefix $(PREDICT_MODELS)/,$(addsuffix .onnx,$(PREDICT_CHECK_NETS)))
	@tools/metainfer/test-predict-cli.sh $(O)/metainfer \
		$(PREDICT_MODELS)/squeezenet1_1.onnx $(O)/predict/check.pred

# Every family held out in turn, every ISA path, 1 and 2 threads.
bench-predict: $(PREDICT_EVAL) predict-models
	@mkdir -p $(O)/predict
	$(PREDICT_EVAL) --runs 5 --plans 8 --chips 50 \
		--save $(O)/predict/bench.pred $(PREDICT_MODELS)/*.onnx
