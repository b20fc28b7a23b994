# SPDX-License-Identifier: GPL-2.0-only
# lib/ops: CPU reference operators (sources are compiled into libmetainfer
# by lib/lib.mk).  This fragment only wires the quantization plug-in table
# (see lib/ops/ops.h) and the ops unit tests.

ifneq ($(wildcard lib/quant/ops_quant.c),)
$(O)/lib/ops/registry.o: LIB_CFLAGS += -DMI_HAVE_QUANT_OPS
$(O)/lib/ops/registry.o: lib/quant/ops_quant.c
endif
