# SPDX-License-Identifier: GPL-2.0-only
# lib/fingerprint: the micro-benchmark suite per device, its SQLite store,
# the staleness check and the hardware embedding.  Objects go into
# libmetainfer.a through an extra prerequisite of $(LIB_A), as
# lib/plan/plan.mk does (lib/lib.mk links libsqlite3 for it).
#
#   make check-fingerprint   host only: the CPU (tiny grid) and emulated
#                            devices, DB round trip, incremental re-run,
#                            staleness, embeddings, CLI errors

FP_SRCS := $(wildcard lib/fingerprint/*.c)
FP_OBJS := $(patsubst %.c,$(O)/%.o,$(FP_SRCS))

$(FP_OBJS): $(wildcard lib/fingerprint/*.h lib/device/*.h lib/cpu/*.h lib/*.h \
	lib/include/metainfer/*.h) uapi/drm/metainfer_accel.h
$(LIB_A): $(FP_OBJS)

FP_TEST := $(O)/lib/fingerprint/tests/test-fingerprint

$(FP_TEST): lib/fingerprint/tests/test-fingerprint.c $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(LIB_CFLAGS) $< -o $@ $(LIB_A) $(LIB_LDLIBS)

ALL += $(FP_TEST)
CHECKS += check-fingerprint

.PHONY: check-fingerprint
check-fingerprint: $(FP_TEST) $(O)/metainfer
	$(FP_TEST) $(O)/lib/fingerprint/tests
	@lib/fingerprint/tests/test-fingerprint-cli.sh $(O)/metainfer
