# SPDX-License-Identifier: GPL-2.0-only
# lib/plan: plans as values (read back, apply, candidates, JSON files).
# Objects go into libmetainfer.a through an extra prerequisite of $(LIB_A),
# as lib/quant/quant.mk does; the tests run from CHECKS (check-plan).

PLAN_SRCS := $(wildcard lib/plan/*.c)
PLAN_OBJS := $(patsubst %.c,$(O)/%.o,$(PLAN_SRCS))

$(PLAN_OBJS): $(wildcard lib/plan/*.h lib/*.h lib/cpu/*.h lib/include/metainfer/*.h)
$(LIB_A): $(PLAN_OBJS)

PLAN_TEST := $(O)/lib/plan/tests/test-plan-random
PLAN_MODELS := $(O)/plan/models
# The benchmark networks (tools/bench/bench.py), exported small so that
# the reference executor and twenty plans per model take seconds.
PLAN_NETS := resnet18,resnet50,mobilenet_v2,mobilenet_v3_small,efficientnet_b0,squeezenet1_1,shufflenet_v2_x1_0,transformer
PLAN_CONFORMANCE := /usr/share/libonnx-testdata/data/pytorch-converted

$(PLAN_TEST): lib/plan/tests/test-plan-random.c $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(LIB_CFLAGS) $< -o $@ $(LIB_A) $(LIB_LDLIBS)

ALL += $(PLAN_TEST)
CHECKS += check-plan

# Random legal plans of every benchmark network, the normalization-pass
# models and the conformance networks against the reference executor,
# then the CLI's plan error cases.
.PHONY: check-plan
check-plan: $(PLAN_TEST) $(O)/metainfer
	@rm -rf $(O)/plan/pass-models
	@$(PYTHON) lib/tests/gen_pass_models.py $(O)/plan/pass-models >/dev/null
	$(PYTHON) tools/models/export.py --out $(PLAN_MODELS) --size 64 --seq 16 \
		--only $(PLAN_NETS) -q
	$(PLAN_TEST) -n 20 -t 2 $(PLAN_MODELS)/*.onnx $(O)/plan/pass-models/*.onnx \
		$(wildcard $(PLAN_CONFORMANCE)/*/model.onnx)
	@PYTHON=$(PYTHON) tools/metainfer/test-plan-cli.sh $(O)/metainfer
