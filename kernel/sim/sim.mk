# SPDX-License-Identifier: GPL-2.0-only
# metainfer_sim: userspace unit test of the simulator's integer ops and of
# its timing/thermal model (no VM needed).  mi_sim_exec.c and mi_sim_model.c
# are compiled unchanged against kernel/sim/tests/shim.h; the ops are
# compared bit for bit with an independent Python reference.  ~2 s.

SIM_UT := $(O)/kernel/sim/sim_ut
SIM_UT_SRCS := kernel/sim/tests/sim_ut.c kernel/sim/mi_sim_exec.c \
	       kernel/sim/mi_sim_model.c
SIM_UT_DEPS := $(SIM_UT_SRCS) kernel/sim/mi_sim.h kernel/sim/tests/shim.h \
	       kernel/include/metainfer_backend.h uapi/drm/metainfer_accel.h

ALL += $(SIM_UT)
CHECKS += check-sim-ut

$(SIM_UT): $(SIM_UT_DEPS) | $(O)
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -O1 -g -Wall -Wextra -Wno-unused-parameter \
		-Wno-sign-compare -include kernel/sim/tests/shim.h \
		-Ikernel/sim/tests/shim -Ikernel/include -Ikernel/sim -Iuapi \
		-I/usr/include/libdrm -o $@ $(SIM_UT_SRCS) -lm

.PHONY: check-sim-ut
check-sim-ut: $(SIM_UT)
	$(SIM_UT) model
	$(PYTHON) kernel/sim/tests/sim_ref.py $(SIM_UT) 1 600

# End-to-end test in the test VM (~1.5 min under TCG): control files,
# timing model through the core's counters, throttling, fault knobs,
# removal with jobs in flight.  Uses the selftests' helper library.
SIM_TEST := $(O)/kernel/sim/sim_test
ALL += $(SIM_TEST)
CHECKS += check-sim-vm

$(SIM_TEST): kernel/sim/tests/sim_test.c $(ST_LIB_OBJS) $(ST_HDRS)
	@mkdir -p $(@D)
	$(CC) $(ST_CFLAGS) $< $(ST_LIB_OBJS) -o $@ -lm

.PHONY: check-sim-vm
check-sim-vm: modules $(SIM_TEST)
	tools/vm/vmrun -t 600 -- $(SIM_TEST)
