# SPDX-License-Identifier: GPL-2.0-only
# Placement on devices and device jobs (lib/plan/place.c, devexec.c):
# host-only tests on emulated accelerators with a test lowering.

PLACE_TEST := $(O)/lib/plan/tests/test-place
PLACE_MODELS := $(O)/place/models

$(PLACE_TEST): lib/plan/tests/test-place.c $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(LIB_CFLAGS) $< -o $@ $(LIB_A) $(LIB_LDLIBS)

ALL += $(PLACE_TEST)
CHECKS += check-place

.PHONY: check-place
check-place: $(PLACE_TEST)
	$(PYTHON) lib/plan/tests/gen_place_models.py $(PLACE_MODELS)
	$(PLACE_TEST) $(PLACE_MODELS)
