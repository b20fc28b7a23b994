# SPDX-License-Identifier: GPL-2.0-only
# lib/health: live health vectors per device.  Objects go into
# libmetainfer.a through an extra prerequisite of $(LIB_A), as
# lib/plan/plan.mk does.
#
#   make check-health      host part: planted /proc and /sys trees (~1.3 s)
#   make check-health-vm   test VM: a sim chip heated, hung and removed
#                          (~50 s under TCG, boot included)

HEALTH_SRCS := $(wildcard lib/health/*.c)
HEALTH_OBJS := $(patsubst %.c,$(O)/%.o,$(HEALTH_SRCS))

$(HEALTH_OBJS): $(wildcard lib/health/*.h lib/device/*.h lib/*.h) \
	uapi/drm/metainfer_accel.h
$(LIB_A): $(HEALTH_OBJS)

HEALTH_TEST := $(O)/lib/health/tests/test-health
HEALTH_VM_TEST := $(O)/lib/health/tests/test-health-vm

$(HEALTH_TEST): lib/health/tests/test-health.c $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(LIB_CFLAGS) $< -o $@ $(LIB_A) $(LIB_LDLIBS)

# The VM part opens the render node itself (the selftests' helpers, whose
# mi_read_file is renamed: libmetainfer has its own) and hands lib/health
# a device whose ops table reads GET_COUNTERS.
$(HEALTH_VM_TEST): lib/health/tests/test-health-vm.c selftests/mi_test_lib.c $(LIB_A) $(ST_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(LIB_CFLAGS) -Iselftests -Dmi_read_file=mi_st_read_file \
		lib/health/tests/test-health-vm.c selftests/mi_test_lib.c -o $@ \
		$(LIB_A) $(LIB_LDLIBS)

ALL += $(HEALTH_TEST) $(HEALTH_VM_TEST)
CHECKS += check-health check-health-vm

.PHONY: check-health check-health-vm
check-health: $(HEALTH_TEST) $(O)/metainfer
	$(HEALTH_TEST)
	@tools/metainfer/test-health-cli.sh $(O)/metainfer

check-health-vm: modules $(HEALTH_VM_TEST)
	tools/vm/vmrun -t 300 $(ST_VMRUN_FLAGS) -- $(HEALTH_VM_TEST)
