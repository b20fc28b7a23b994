# SPDX-License-Identifier: GPL-2.0-only
# lib/meta: switchable models (structure switching) and the
# meta-controller.  Objects go into libmetainfer.a through an extra
# prerequisite of $(LIB_A), as lib/plan/plan.mk does.
#
#   make check-supernet   train a tiny supernet (tools/supernet), compare
#                         every configuration with ONNX Runtime, pruned vs
#                         full graph, switching under a loop of runs, the
#                         trained meta-controller against the oracle

META_SRCS := $(wildcard lib/meta/*.c)
META_OBJS := $(patsubst %.c,$(O)/%.o,$(META_SRCS))

$(META_OBJS): $(wildcard lib/meta/*.h lib/*.h lib/cpu/*.h lib/include/metainfer/*.h)
$(LIB_A): $(META_OBJS)

SUPERNET_TEST := $(O)/lib/meta/tests/test-supernet
SUPERNET_DIR := $(O)/supernet

$(SUPERNET_TEST): lib/meta/tests/test-supernet.c $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(LIB_CFLAGS) $< -o $@ $(LIB_A) $(LIB_LDLIBS)

# The meta-controller's trainer (tools/supernet/metactl.c)
METACTL := $(O)/tools/supernet/metactl-train

$(METACTL): tools/supernet/metactl.c $(LIB_A) $(wildcard lib/meta/*.h lib/predict/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(LIB_CFLAGS) $< -o $@ $(LIB_A) $(LIB_LDLIBS)

ALL += $(SUPERNET_TEST) $(METACTL)
CHECKS += check-supernet

.PHONY: check-supernet
# ONNX Runtime: `make ort` (tools/bench/bench.mk)
check-supernet: $(SUPERNET_TEST) $(METACTL) $(O)/metainfer $(O)/ort/node_modules/onnxruntime-node/package.json
	$(PYTHON) tools/supernet/check_supernet.py --out $(SUPERNET_DIR) \
		--test $(SUPERNET_TEST) --metainfer $(O)/metainfer \
		--metactl $(METACTL)
