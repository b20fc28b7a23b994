# SPDX-License-Identifier: GPL-2.0-only
# lib/quant: int8 kernels, quantized ONNX ops, QDQ planner step, `quantize`.
# Objects go into libmetainfer.a through an extra prerequisite of $(LIB_A)
# (lib/lib.mk archives $^) and lib/lib.mk's $(O)/lib/%.o pattern rule.

QUANT_SRCS := $(wildcard lib/quant/*.c)
QUANT_OBJS := $(patsubst %.c,$(O)/%.o,$(QUANT_SRCS))
QUANT_TESTS := $(O)/lib/quant/tests/test-qkernels $(O)/lib/quant/tests/bench-qconv
QUANT_LDLIBS := -lm -pthread
# the int8 GEMM / convolution kernels (no IR): what the kernel tests link
QUANT_KERN_OBJS := $(patsubst %,$(O)/lib/quant/%.o,qgemm qgemm_avx2 qgemm_avx512 qgemm_epi \
	qconv qdw qdw_avx2 qdw_avx512 qdwq qdwt qamx qwino)

$(QUANT_OBJS): $(wildcard lib/quant/*.h lib/*.h)
$(LIB_A): $(QUANT_OBJS)

# The kernel test and benchmark need only the kernels (no IR, no loader).
$(O)/lib/quant/tests/test-qkernels: lib/quant/tests/test-qkernels.c $(QUANT_KERN_OBJS) $(O)/lib/quant/qvec.o
	@mkdir -p $(dir $@)
	$(CC) $(LIB_CFLAGS) $^ -o $@ $(QUANT_LDLIBS)

$(O)/lib/quant/tests/bench-qconv: lib/quant/tests/bench-qconv.c $(QUANT_KERN_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(LIB_CFLAGS) $^ -o $@ $(QUANT_LDLIBS)

ALL += $(QUANT_TESTS)
CHECKS += check-quant
BENCHES += bench-quant

.PHONY: check-quant
# Kernels bit-exact on every ISA (~1 s), quantize + int8 execution end to
# end (~30 s), int8 accuracy on the digits CNN within 1 point (~15 s).
check-quant: $(QUANT_TESTS) $(O)/metainfer
	$(O)/lib/quant/tests/test-qkernels 400
	$(PYTHON) lib/quant/tests/test-quantize.py
	$(PYTHON) lib/quant/tests/test-equalize.py
	$(PYTHON) lib/quant/tests/test-qdq-layout.py
	$(PYTHON) lib/quant/tests/test-qresadd.py
	$(PYTHON) lib/quant/tests/test-qsplit.py
	$(PYTHON) lib/quant/tests/test-qmove.py
	$(PYTHON) tools/models/digits.py --eval --check

.PHONY: bench-quant
# int8 conv kernels per ISA (GMAC/s), ~10 s.
bench-quant: $(O)/lib/quant/tests/bench-qconv
	$(O)/lib/quant/tests/bench-qconv 0.3
