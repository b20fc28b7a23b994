# SPDX-License-Identifier: GPL-2.0-only
# lib/cpu: fast fp32 kernels.  The library objects come from lib/lib.mk
# (every lib/cpu/*.c); this fragment builds the unit tests and the
# micro-benchmark from lib/cpu/tests/.

CPU_LIBA := $(O)/libmetainfer.a
CPU_TEST_KERNELS := $(O)/lib/cpu/tests/test-cpu-kernels
CPU_TEST_PLAN := $(O)/lib/cpu/tests/test-cpu-plan
CPU_TEST_XFORM := $(O)/lib/cpu/tests/test-xform
CPU_TEST_NCHWC := $(O)/lib/cpu/tests/test-nchwc
CPU_TEST_NCHWC_GROUP := $(O)/lib/cpu/tests/test-nchwc-group
CPU_BENCH := $(O)/mi-cpu-bench
CPU_TFLAGS = $(CFLAGS_COMMON) -pthread
# the library's other parts (ops, importer) need these when linked statically
CPU_LDLIBS = $(LIB_LDLIBS)

CPU_TESTS := $(CPU_TEST_KERNELS) $(CPU_TEST_PLAN) $(CPU_TEST_XFORM) \
	$(CPU_TEST_NCHWC) $(CPU_TEST_NCHWC_GROUP)

$(CPU_TESTS): $(O)/lib/cpu/tests/%: lib/cpu/tests/%.c \
		lib/cpu/tests/cpu-test.h $(CPU_LIBA)
	@mkdir -p $(dir $@)
	$(CC) $(CPU_TFLAGS) $< -o $@ $(CPU_LIBA) $(CPU_LDLIBS)

$(CPU_BENCH): lib/cpu/tests/mi-cpu-bench.c $(CPU_LIBA)
	@mkdir -p $(dir $@)
	$(CC) $(CPU_TFLAGS) $< -o $@ $(CPU_LIBA) $(CPU_LDLIBS)

# Every ISA path: generic always, avx2/avx512 where the CPU has them (a
# higher request runs the CPU's own ISA).
.PHONY: check-cpu bench-cpu
check-cpu: $(CPU_TESTS) $(O)/metainfer
	@set -eo pipefail; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	for isa in generic avx2 avx512; do \
		$(CPU_TEST_KERNELS) --isa $$isa | tail -n 20; \
		$(CPU_TEST_PLAN) --isa $$isa | tail -n 20; \
		$(CPU_TEST_XFORM) --isa $$isa | tail -n 20; \
		$(CPU_TEST_NCHWC) --isa $$isa | tail -n 20; \
		$(CPU_TEST_NCHWC_GROUP) --isa $$isa | tail -n 20; \
		$(PYTHON) lib/cpu/tests/xform-models.py \
			$(O)/metainfer "$$tmp/$$isa" $$isa | tail -n 1; \
	done

bench-cpu: $(CPU_BENCH)
	$(CPU_BENCH) -t 1
	$(CPU_BENCH) -t 2

ALL += $(CPU_TESTS) $(CPU_BENCH)
CHECKS += check-cpu
