# SPDX-License-Identifier: GPL-2.0-only
# uapi-fuzz: structure-aware fuzzer of the MetaInfer ioctls, io_uring
# commands, PRIME and syncobj paths against a metainfer_sim render node
# (tools/fuzz/uapi-fuzz.c, uapi-fuzz-ops.c).  check-uapi-fuzz boots the test VM and runs a
# bounded pass (~1-2 minutes under TCG); it fails if a call kind was never
# accepted or never rejected, a process crashed or got stuck, or the kernel
# log shows trouble.  UFUZZ_SEED picks another seed.

UFUZZ := $(O)/tools/uapi-fuzz
UFUZZ_SEED ?= 1
UFUZZ_FLAGS ?= --seed $(UFUZZ_SEED) --procs 4 --iters 2500 --time 90

UFUZZ_SRCS := tools/fuzz/uapi-fuzz.c tools/fuzz/uapi-fuzz-ops.c
$(UFUZZ): $(UFUZZ_SRCS) tools/fuzz/uapi-fuzz.h $(ST_LIB_OBJS) $(ST_HDRS)
	@mkdir -p $(@D)
	$(CC) $(ST_CFLAGS) -Itools/fuzz $(UFUZZ_SRCS) $(ST_LIB_OBJS) -o $@ -lm -luring

ALL += $(UFUZZ)
CHECKS += check-uapi-fuzz

.PHONY: check-uapi-fuzz
check-uapi-fuzz: modules $(UFUZZ)
	tools/vm/vmrun -t 420 $(ST_VMRUN_FLAGS) -- $(UFUZZ) $(UFUZZ_FLAGS)
