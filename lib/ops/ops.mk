# SPDX-License-Identifier: GPL-2.0-only
# lib/ops: CPU reference operators (sources are compiled into libmetainfer
# by lib/lib.mk).  This fragment only wires the quantization plug-in table
# (see lib/ops/ops.h) and the ops unit tests.

ifneq ($(wildcard lib/quant/ops_quant.c),)
$(O)/lib/ops/registry.o: LIB_CFLAGS += -DMI_HAVE_QUANT_OPS
$(O)/lib/ops/registry.o: lib/quant/ops_quant.c
endif

# Hostile-input test: every op with random dtypes/shapes/attributes, built
# with ASan/UBSan from the sources (not the library) so that any invalid
# access or UB aborts.  ~10 s on one core.
OPS_TEST_SRCS := lib/ir.c $(wildcard lib/ops/*.c) lib/ops/tests/test-ops-hostile.c
OPS_SAN := -fsanitize=address,undefined,float-cast-overflow \
	-fno-sanitize-recover=undefined,float-cast-overflow \
	-fno-omit-frame-pointer

$(O)/lib/ops/tests/test-ops-hostile: $(OPS_TEST_SRCS) $(wildcard lib/ops/*.h) lib/ir.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_COMMON) -O1 $(OPS_SAN) -o $@ $(OPS_TEST_SRCS) -lm

.PHONY: check-ops
check-ops: $(O)/lib/ops/tests/test-ops-hostile
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		timeout 600 $(O)/lib/ops/tests/test-ops-hostile 1000 1
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		timeout 600 $(O)/lib/ops/tests/test-ops-hostile 1000 5

ALL += $(O)/lib/ops/tests/test-ops-hostile
CHECKS += check-ops
