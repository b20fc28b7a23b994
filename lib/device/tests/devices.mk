# SPDX-License-Identifier: GPL-2.0-only
# lib/device tests (included from lib/device/device.mk):
#
#   make check-devices-host  registry and public API, no kernel (~0.1 s)
#   make check-devices       test VM (~30 s under TCG, boot included): sim
#                            chips of two personalities through
#                            io_uring and ioctls, PRIME, fences, faults
#   make bench-devices       test VM: submission cost ioctl+WAIT vs io_uring

DEV_TEST := $(O)/lib/device/tests/test-devices
DEV_VM_TEST := $(O)/lib/device/tests/test-devices-vm

$(DEV_TEST): lib/device/tests/test-devices.c $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(LIB_CFLAGS) $< -o $@ $(LIB_A) $(LIB_LDLIBS)

# The VM part creates sim chips with the selftests' helpers (their
# mi_read_file renamed: libmetainfer has its own).
$(DEV_VM_TEST): lib/device/tests/test-devices-vm.c selftests/mi_test_lib.c $(LIB_A) $(ST_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(LIB_CFLAGS) -Iselftests -Dmi_read_file=mi_st_read_file \
		lib/device/tests/test-devices-vm.c selftests/mi_test_lib.c -o $@ \
		$(LIB_A) $(LIB_LDLIBS)

ALL += $(DEV_TEST) $(DEV_VM_TEST)
CHECKS += check-devices-host check-devices
BENCHES += bench-devices

.PHONY: check-devices-host check-devices bench-devices
check-devices-host: $(DEV_TEST) $(O)/metainfer
	$(DEV_TEST)
	$(O)/metainfer devices --json | $(PYTHON) -c 'import json, sys; d = json.load(sys.stdin)["devices"]; assert d[0]["name"] == "cpu", d'
	@! $(O)/metainfer devices --bogus 2>/dev/null

check-devices: modules $(DEV_VM_TEST) $(O)/metainfer
	tools/vm/vmrun -t 300 $(ST_VMRUN_FLAGS) -- $(DEV_VM_TEST) $(O)/metainfer

bench-devices: modules $(DEV_VM_TEST)
	tools/vm/vmrun -t 300 $(ST_VMRUN_FLAGS) -- $(DEV_VM_TEST) --bench
