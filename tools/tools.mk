# SPDX-License-Identifier: GPL-2.0-only
# Userspace tools built on libmetainfer: the metainfer CLI, the ONNX
# conformance runner and the loader fuzzer.

TOOLS_CFLAGS := $(LIB_CFLAGS)
ifneq ($(shell grep -ls '^int mi_quant_main' lib/quant/*.c 2>/dev/null),)
TOOLS_CFLAGS += -DMI_HAVE_QUANT_MAIN
endif

$(O)/metainfer: $(wildcard tools/metainfer/*.c) $(LIB_A)
	$(CC) $(TOOLS_CFLAGS) $(filter %.c,$^) -o $@ $(LIB_A) $(LIB_LDLIBS)

$(O)/mi-conformance: tools/conformance/conformance.c $(LIB_A)
	$(CC) $(TOOLS_CFLAGS) $< -o $@ $(LIB_A) $(LIB_LDLIBS)

ALL += $(O)/metainfer

ALL += $(O)/mi-conformance
CHECKS += check-conformance

# ONNX backend conformance (Debian's libonnx-testdata); fails on any FAIL.
.PHONY: check-conformance
check-conformance: $(O)/mi-conformance
	$(O)/mi-conformance --quiet --xfail tools/conformance/known-failures.txt
