# SPDX-License-Identifier: GPL-2.0-only
# check-igt: IGT's generic DRM tests (core_*, syncobj_*) on a simulated NPU
# in the test VM, the results compared with tools/igt/expected.txt.
#
# The tests are built at check time from Debian's intel-gpu-tools source
# package (tools/igt/build-igt; the binary package ships none) into
# $(O)/igt, or from an unpacked IGT tree with IGT_SRC=DIR.  Where neither
# can be had (no deb-src reachable) the check says so and is skipped.

IGT_O := $(O)/igt
IGT_TESTS := core_auth core_getclient core_getstats core_getversion \
	core_setmaster core_setmaster_vs_auth core_hotunplug \
	syncobj_basic syncobj_wait syncobj_timeline
IGT_JOB_TIMEOUT_MS ?= 2000
IGT_VMRUN_FLAGS ?= -M 'kernel/metainfer.ko:job_timeout_ms=$(IGT_JOB_TIMEOUT_MS)' \
	-M kernel/sim/metainfer_sim.ko

.PHONY: igt check-igt
igt:
	@tools/igt/build-igt $(if $(IGT_SRC),--src $(IGT_SRC)) $(IGT_O) $(IGT_TESTS)

check-igt: modules
	@tools/igt/build-igt $(if $(IGT_SRC),--src $(IGT_SRC)) $(IGT_O) $(IGT_TESTS); rc=$$?; \
	if [ $$rc = 77 ]; then \
		echo "check-igt: SKIPPED: IGT's sources cannot be had here (see above; IGT_SRC=DIR builds from an unpacked tree)"; \
		exit 0; fi; \
	[ $$rc = 0 ] || exit $$rc; \
	tools/vm/vmrun -t 900 $(IGT_VMRUN_FLAGS) -- tools/igt/run-igt $(IGT_O)/build/tests \
		tools/igt/expected.txt $(IGT_TESTS)

CHECKS += check-igt
