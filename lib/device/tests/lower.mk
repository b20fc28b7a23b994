# SPDX-License-Identifier: GPL-2.0-only
# check-lower: quantized units lowered to the command stream, run on
# emulated devices against mi_ref_run, the float QDQ graph and the CPU int8
# path (host only; lib/device/tests/test-lower.c says what it checks).
# Included from lib/device/device.mk.

LOWER_DIR := $(O)/lower-models
LOWER_TEST := $(O)/lib/device/tests/test-lower

$(LOWER_TEST): lib/device/tests/test-lower.c $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(LIB_CFLAGS) $< -o $@ $(LIB_A) $(LIB_LDLIBS)

# The models: seeded op forms (QDQ written directly) and two small fp32
# networks quantized by `metainfer quantize`.
$(LOWER_DIR)/.stamp: lib/device/tests/gen-lower.py $(O)/metainfer
	@rm -rf $(LOWER_DIR)
	$(PYTHON) lib/device/tests/gen-lower.py --out $(LOWER_DIR) --seed 1 --count 24
	$(O)/metainfer quantize $(LOWER_DIR)/net-cnn.onnx --calib-random 16 \
		-o $(LOWER_DIR)/net-cnn.int8.onnx >/dev/null
	$(O)/metainfer quantize $(LOWER_DIR)/net-mlp.onnx --calib-random 16 \
		-o $(LOWER_DIR)/net-mlp.int8.onnx >/dev/null
	@touch $@

ALL += $(LOWER_TEST)
# ~3 s with the models generated (0.5 s to run)
CHECKS += check-lower

.PHONY: check-lower
check-lower: $(LOWER_TEST) $(LOWER_DIR)/.stamp
	$(LOWER_TEST) $(LOWER_DIR) 20
