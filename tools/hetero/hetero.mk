# SPDX-License-Identifier: GPL-2.0-only
# Heterogeneous execution end to end: quantized real models across the CPU
# and three simulated chips, inside the test VM.
#
#   make hetero-models   export + quantize the four models (64x64 images)
#   make check-hetero    tools/hetero/check-hetero in the VM
#   make bench-hetero    modelled device time per model and device set
#   make demo-hetero     the main job of `make demo`

HETERO_CHECK := $(O)/tools/hetero-check
HETERO_MODELS := $(O)/hetero/models
HETERO_NETS := mobilenet_v2 resnet18 efficientnet_b0 transformer
HETERO_INT8 := $(patsubst %,$(HETERO_MODELS)/%.int8.onnx,$(HETERO_NETS))

$(HETERO_CHECK): tools/hetero/hetero-check.c $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(TOOLS_CFLAGS) $< -o $@ $(LIB_A) $(LIB_LDLIBS)

# The host build: the same checks on emulated accelerators (npu0 NHWC with
# every op, npu1 NCHW without LUT).
HETERO_CHECK_EMU := $(O)/tools/hetero-check-emu

$(HETERO_CHECK_EMU): tools/hetero/hetero-check.c tools/hetero/hetero-emu.c $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(TOOLS_CFLAGS) -DHETERO_EMU $(filter %.c,$^) -o $@ $(LIB_A) $(LIB_LDLIBS)

# Debugging: the first device entry whose placement changes an output
# (tools/hetero/hetero-bisect.c, emulated devices).
HETERO_BISECT := $(O)/tools/hetero-bisect

$(HETERO_BISECT): tools/hetero/hetero-bisect.c tools/hetero/hetero-emu.c $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(TOOLS_CFLAGS) $(filter %.c,$^) -o $@ $(LIB_A) $(LIB_LDLIBS)

# A placed model's plan is a value: written, read back and applied to a
# fresh load, it places and computes the same (lib/plan/tests).
PLACE_PLAN_TEST := $(O)/lib/plan/tests/test-place-plan

$(PLACE_PLAN_TEST): lib/plan/tests/test-place-plan.c tools/hetero/hetero-emu.c $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(TOOLS_CFLAGS) $(filter %.c,$^) -o $@ $(LIB_A) $(LIB_LDLIBS)

ALL += $(HETERO_CHECK) $(HETERO_CHECK_EMU) $(HETERO_BISECT) $(PLACE_PLAN_TEST)

HETERO_FP32 := $(patsubst %,$(HETERO_MODELS)/%.onnx,$(HETERO_NETS))

$(HETERO_FP32): $(HETERO_MODELS)/%.onnx:
	@mkdir -p $(dir $@)
	$(PYTHON) tools/models/export.py -q --out $(HETERO_MODELS) --only $* \
		--size 64 --seq 32

$(HETERO_INT8): $(HETERO_MODELS)/%.int8.onnx: $(HETERO_MODELS)/%.onnx $(O)/metainfer
	$(O)/metainfer quantize $< --calib-random 16 -o $@

DEMOS += demo-hetero
BENCHES += bench-hetero
.PHONY: hetero-models check-hetero bench-hetero demo-hetero
hetero-models: $(HETERO_INT8)

# Seeded inputs per model run, and the concurrency step's processes x
# inferences.  The issue's protocol: make check-hetero HETERO_INPUTS=100
# HETERO_PROCS=4 HETERO_PROC_INPUTS=200 (hours under TCG); make check
# runs the modest default.
HETERO_INPUTS ?= 10
HETERO_PROCS ?= 4
HETERO_PROC_INPUTS ?= 20
CHECKS += check-hetero
check-hetero: modules $(HETERO_CHECK) $(O)/metainfer $(HETERO_INT8)
	tools/vm/vmrun -t 1800 -e HETERO_INPUTS=$(HETERO_INPUTS) \
		-e HETERO_PROCS=$(HETERO_PROCS) -e HETERO_PROC_INPUTS=$(HETERO_PROC_INPUTS) \
		$(ST_VMRUN_FLAGS) -- tools/hetero/check-hetero $(O) $(HETERO_MODELS)

bench-hetero: modules $(HETERO_CHECK) $(O)/metainfer $(HETERO_INT8)
	tools/vm/vmrun -t 1500 $(ST_VMRUN_FLAGS) -- tools/hetero/bench-hetero \
		$(O) $(HETERO_MODELS)

demo-hetero: modules $(HETERO_CHECK) $(O)/metainfer $(HETERO_MODELS)/mobilenet_v2.int8.onnx
	@echo "== MobileNetV2 quantized on the host, run across the CPU and three simulated chips in the VM"
	@tools/vm/vmrun -t 900 $(ST_VMRUN_FLAGS) -- tools/hetero/run-demo-hetero \
		$(O) $(HETERO_MODELS)/mobilenet_v2.int8.onnx

# Host part, in make check: the four models placed on emulated
# accelerators (npu0 NHWC with every op, npu1 NCHW without LUT) vs the
# CPU int8 run, and with every job failing (npu2: -EIO each time; npu3:
# lost at its first job), so each inference reruns the jobs' nodes on the
# CPU's int8 kernels; their plans written, read back and applied to a
# fresh load give the same placement, jobs and output bits, also after
# a run whose job timed out (test-place-plan, about 25 s).  Limits:
# cosine 0.999 and the same top-1 for every input (hetero-check's
# defaults) on all four models: the CPU's requantization rounds the
# exact product as the devices do (Documentation/quantization.rst), so
# the CNNs' device runs give the CPU's bytes (cosine 1.000000; before,
# EfficientNet-B0's input 5 of seed 1 gave 0.939 and another top-1).
# About 50 s on 2 cores; the issue's 100 inputs on each device set:
# check-hetero-host-100.
# ResNet-18's jobs, sized by the reference's wall rate against a 2 s job
# timeout, chain in place (--shared).
CHECKS += check-hetero-host
.PHONY: check-hetero-host check-hetero-host-100
check-hetero-host: $(HETERO_CHECK_EMU) $(PLACE_PLAN_TEST) $(HETERO_INT8)
	$(PLACE_PLAN_TEST) npu0 $(HETERO_MODELS)/resnet18.int8.onnx
	$(PLACE_PLAN_TEST) npu1,npu0 $(filter-out %/resnet18.int8.onnx,$(HETERO_INT8))
	$(PLACE_PLAN_TEST) npu4,npu1 $(HETERO_MODELS)/mobilenet_v2.int8.onnx
	$(PLACE_PLAN_TEST) -s npu1,npu0 $(HETERO_MODELS)/mobilenet_v2.int8.onnx
	$(PLACE_PLAN_TEST) -t npu0 $(HETERO_MODELS)/mobilenet_v2.int8.onnx
	$(HETERO_CHECK_EMU) $(HETERO_MODELS)/transformer.int8.onnx -d npu0 -n 40
	$(HETERO_CHECK_EMU) $(HETERO_MODELS)/transformer.int8.onnx -d npu1 -n 20
	$(HETERO_CHECK_EMU) $(HETERO_MODELS)/transformer.int8.onnx -d npu3 -n 40 --expect-faults
	$(HETERO_CHECK_EMU) $(HETERO_MODELS)/mobilenet_v2.int8.onnx -d npu1,npu0 -n 12
	$(HETERO_CHECK_EMU) $(HETERO_MODELS)/mobilenet_v2.int8.onnx -d npu0,npu1 -n 8
	$(HETERO_CHECK_EMU) $(HETERO_MODELS)/mobilenet_v2.int8.onnx -d npu2 -n 20 --expect-faults
	$(HETERO_CHECK_EMU) $(HETERO_MODELS)/resnet18.int8.onnx -d npu1 -n 6 --shared 1
	$(HETERO_CHECK_EMU) $(HETERO_MODELS)/resnet18.int8.onnx -d npu2 -n 6 --expect-faults
	$(HETERO_CHECK_EMU) $(HETERO_MODELS)/efficientnet_b0.int8.onnx -d npu0 -n 8
	$(HETERO_CHECK_EMU) $(HETERO_MODELS)/efficientnet_b0.int8.onnx -d npu1 -n 16
	$(HETERO_CHECK_EMU) $(HETERO_MODELS)/efficientnet_b0.int8.onnx -d npu3 -n 20 --expect-faults

# The issue's protocol on the host: 100 seeded inputs per model on each
# emulated device, split across both, and with every job failing or the
# device lost (about 17 minutes on 2 cores; not in make check).  Limits:
# hetero-check's defaults (cosine 0.999, no top-1 change) for all four.
# Measured (seed 1, 100 inputs): MobileNetV2 on npu0, ResNet-18 on npu0
# and EfficientNet-B0 on npu1 1.000000 and 0 (bit-exact), Transformer on
# npu1 0.999939 and 0; before the CPU rounded the exact product
# (Documentation/quantization.rst): MobileNetV2 0.964959 and 7,
# ResNet-18 0.999252 and 1, EfficientNet-B0 0.914472 and 3.
check-hetero-host-100: $(HETERO_CHECK_EMU) $(HETERO_INT8)
	@set -e; for m in $(HETERO_NETS); do \
		for d in npu0 npu1 npu1,npu0; do \
			$(HETERO_CHECK_EMU) $(HETERO_MODELS)/$$m.int8.onnx -d $$d -n 100; \
		done; \
		for d in npu2 npu3; do \
			$(HETERO_CHECK_EMU) $(HETERO_MODELS)/$$m.int8.onnx -d $$d -n 100 \
				--expect-faults; \
		done; \
	done
