# SPDX-License-Identifier: GPL-2.0-only
# Kernel selftests (kselftest_harness.h), the kernel bench and the
# accel-demo program; check-kernel / demo-kernel / bench-kernel boot the
# test VM (tools/vm/vmrun) and run them against metainfer.ko and
# metainfer_sim.ko.
#
# kselftest_harness.h and kselftest.h are extracted at build time from
# Debian's linux-source tarball (never committed).

ST_O := $(O)/selftests
KVER_MM := $(shell echo '$(KVER)' | sed -n 's/^\([0-9]*\.[0-9]*\).*/\1/p')
ST_TARBALL ?= $(firstword $(wildcard /usr/src/linux-source-$(KVER_MM).tar.xz) \
	$(wildcard /usr/src/linux-source-*.tar.xz))
ST_HARNESS := $(ST_O)/include/kselftest_harness.h
ST_CFLAGS := $(CFLAGS_COMMON) -I$(ST_O)/include -Iselftests -Ilib/device \
	$(shell pkg-config --cflags libdrm 2>/dev/null || echo -I/usr/include/libdrm) \
	-Wno-missing-field-initializers -pthread
# The userspace reference of the command stream lives in lib/device (the
# library checks accelerator results with the same one).
ST_LIB_SRCS := selftests/mi_test_lib.c lib/device/mi_ref.c
ST_LIB_OBJS := $(ST_O)/mi_test_lib.o $(ST_O)/mi_ref.o
ST_HDRS := $(wildcard selftests/*.h) lib/device/mi_ref.h uapi/drm/metainfer_accel.h
ST_TESTS := $(patsubst selftests/%.c,$(ST_O)/%,$(wildcard selftests/*_test.c))
ST_BENCH := $(ST_O)/mi_bench
ACCEL_DEMO := $(O)/tools/accel-demo
# Under TCG on a loaded host a guest can stall for a while: a 2 s job
# timeout (default 500 ms) keeps slow-but-healthy jobs from timing out,
# while the hang tests still finish quickly.
ST_JOB_TIMEOUT_MS ?= 2000
ST_VMRUN_FLAGS ?= -M 'kernel/metainfer.ko:job_timeout_ms=$(ST_JOB_TIMEOUT_MS)' \
	-M kernel/sim/metainfer_sim.ko

$(ST_HARNESS):
	@if [ ! -r "$(ST_TARBALL)" ]; then \
		echo "selftests: no /usr/src/linux-source-*.tar.xz: run tools/install-deps (package linux-source-$(KVER_MM))" >&2; \
		exit 1; fi
	@rm -rf $(ST_O)/include.tmp; mkdir -p $(ST_O)/include.tmp
	tar -xJf $(ST_TARBALL) -C $(ST_O)/include.tmp --strip-components=4 \
		--wildcards '*/tools/testing/selftests/kselftest_harness.h' \
		'*/tools/testing/selftests/kselftest.h'
	@mkdir -p $(ST_O)/include
	@mv $(ST_O)/include.tmp/kselftest.h $(ST_O)/include/kselftest.h
	@mv $(ST_O)/include.tmp/kselftest_harness.h $(ST_O)/include/kselftest_harness.h
	@rmdir $(ST_O)/include.tmp

$(ST_O)/%.o: selftests/%.c $(ST_HDRS) | $(ST_HARNESS)
	@mkdir -p $(dir $@)
	$(CC) $(ST_CFLAGS) -c $< -o $@

$(ST_O)/mi_ref.o: lib/device/mi_ref.c $(ST_HDRS) | $(ST_HARNESS)
	@mkdir -p $(dir $@)
	$(CC) $(ST_CFLAGS) -c $< -o $@

# extra libraries of one test program: ST_LDLIBS_<name>
ST_LDLIBS_uring := -luring
ST_LDLIBS_unplug := -luring
$(ST_O)/%_test: $(ST_O)/%_test.o $(ST_LIB_OBJS)
	$(CC) $(ST_CFLAGS) $^ -o $@ -lm $(ST_LDLIBS_$*)

$(ST_BENCH): $(ST_O)/mi_bench.o $(ST_LIB_OBJS)
	$(CC) $(ST_CFLAGS) $^ -o $@ -lm

ST_URING_BENCH := $(ST_O)/uring_bench
$(ST_URING_BENCH): $(ST_O)/uring_bench.o $(ST_LIB_OBJS)
	$(CC) $(ST_CFLAGS) $^ -o $@ -lm -luring

# eBPF tracepoint counter (libbpf skeleton), used by selftests/trace-check.
ST_TRACECOUNT := $(ST_O)/mi_tracecount
ST_MULTIARCH := $(shell $(CC) -print-multiarch 2>/dev/null)
$(ST_O)/mi_tracecount.bpf.o: selftests/mi_tracecount.bpf.c selftests/mi_tracecount.h | $(ST_HARNESS)
	clang -O2 -g -target bpf $(if $(ST_MULTIARCH),-I/usr/include/$(ST_MULTIARCH)) \
		-Iselftests -c $< -o $@

$(ST_O)/mi_tracecount.skel.h: $(ST_O)/mi_tracecount.bpf.o
	bpftool gen skeleton $< > $@.tmp && mv $@.tmp $@

$(ST_TRACECOUNT): selftests/mi_tracecount.c selftests/mi_tracecount.h $(ST_O)/mi_tracecount.skel.h
	$(CC) $(ST_CFLAGS) -I$(ST_O) $< -o $@ -lbpf

$(ACCEL_DEMO): tools/accel-demo/accel-demo.c $(ST_LIB_OBJS) $(ST_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(ST_CFLAGS) $< $(ST_LIB_OBJS) -o $@ -lm

.PHONY: selftests check-kernel demo-kernel bench-kernel
.PRECIOUS: $(ST_O)/%.o
selftests: $(ST_TESTS) $(ST_TRACECOUNT) $(if $(wildcard selftests/mi_bench.c),$(ST_BENCH)) \
	$(if $(wildcard selftests/uring_bench.c),$(ST_URING_BENCH)) \
	$(if $(wildcard tools/accel-demo/accel-demo.c),$(ACCEL_DEMO))

ALL += selftests

# One VM boot runs every selftest binary; the runner prints the TAP summary.
check-kernel: modules selftests
	tools/vm/vmrun -t 1200 $(ST_VMRUN_FLAGS) -- selftests/run-tests $(ST_O)

demo-kernel: modules selftests
	@tools/vm/vmrun -t 600 $(ST_VMRUN_FLAGS) -- selftests/run-demo $(ACCEL_DEMO)

bench-kernel: modules selftests
	@tools/vm/vmrun -t 600 $(ST_VMRUN_FLAGS) -- selftests/run-bench $(ST_BENCH)

CHECKS += check-kernel
DEMOS += demo-kernel
BENCHES += bench-kernel
