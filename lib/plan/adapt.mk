# SPDX-License-Identifier: GPL-2.0-only
# The closed loop after deployment (lib/plan/adapt.c + lib/predict/recal.c,
# Documentation/predict.rst "Closed loop").  adapt.c goes into
# libmetainfer.a with the other lib/plan objects (plan.mk); the test is
# host only: the quantized transformer on the CPU and two emulated
# accelerators, one of which gets a live firmware update.
#
#   make check-loop     recalibration fit, no false trigger, convergence,
#                       then `metainfer adapt` and its error cases
#   make check-loop-vm  `metainfer adapt` on two metainfer_sim chips in the
#                       VM, npu0's dma_bw halved through sysfs (~40 s)

ADAPT_TEST := $(O)/lib/plan/tests/test-adapt
ADAPT_MODEL := $(O)/hetero/models/transformer.int8.onnx

$(ADAPT_TEST): lib/plan/tests/test-adapt.c $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(LIB_CFLAGS) $< -o $@ $(LIB_A) $(LIB_LDLIBS)

ALL += $(ADAPT_TEST)
CHECKS += check-loop check-loop-vm

.PHONY: check-loop check-loop-vm
check-loop: $(ADAPT_TEST) $(O)/metainfer $(ADAPT_MODEL)
	$(ADAPT_TEST) $(ADAPT_MODEL)
	@tools/metainfer/test-adapt-cli.sh $(O)/metainfer $(ADAPT_MODEL) \
		$(O)/hetero/models/transformer.onnx

check-loop-vm: modules $(O)/metainfer $(ADAPT_MODEL)
	tools/vm/vmrun -t 600 $(ST_VMRUN_FLAGS) -- lib/plan/tests/check-loop-vm \
		$(O) $(ADAPT_MODEL)
