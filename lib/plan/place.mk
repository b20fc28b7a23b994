# SPDX-License-Identifier: GPL-2.0-only
# Placement on devices and device jobs (lib/plan/place.c, devexec.c):
# host-only tests on emulated accelerators with a test lowering.

PLACE_TEST := $(O)/lib/plan/tests/test-place
PLACE_MODELS := $(O)/place/models

# The executor, the model and the meta-controller open place-impl.h
# (struct mi_place) too.
$(O)/lib/exec.o $(O)/lib/model.o $(O)/lib/meta/devices.o: lib/plan/place-impl.h \
	lib/device/device.h

$(PLACE_TEST): lib/plan/tests/test-place.c lib/plan/place-impl.h $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(LIB_CFLAGS) $< -o $@ $(LIB_A) $(LIB_LDLIBS)

ALL += $(PLACE_TEST)
CHECKS += check-place

.PHONY: check-place
check-place: $(PLACE_TEST)
	$(PYTHON) lib/plan/tests/gen_place_models.py $(PLACE_MODELS)
	$(PLACE_TEST) $(PLACE_MODELS)
