# SPDX-License-Identifier: GPL-2.0-only
# The debug kernel stage: tools/vm/build-debug-kernel builds a small 6.1
# kernel with KASAN, lockdep, UBSAN, kmemleak, hung-task detection and
# fault injection from Debian's linux-source (cached under
# $(KDEBUG_DIR), rebuilt only when the source package, the config fragment
# or the compiler changes); the project's modules are built against it out
# of tree (a copy of the sources in $(KDEBUG_EXT), so the in-tree build for
# the installed kernel stays as it is).  check-kernel-debug boots it and
# runs tools/vm/debug-checks: the selftests (fault tests included), the
# uapi fuzzer, then a kmemleak scan; vmrun fails the run on any KASAN,
# lockdep, UBSAN, hung-task or WARN/BUG report.

# The kernel cache.  Its key does not depend on the checkout, so a CI that
# runs on clean clones keeps the build by pointing this at a directory that
# outlives them (make check KDEBUG_DIR=/var/cache/metainfer/kdebug); the
# kernel tree holds absolute paths, so the directory must not move.
KDEBUG_DIR ?= $(O)/kdebug
KDEBUG := $(KDEBUG_DIR)/current
# the project's modules, per checkout
KDEBUG_EXT := $(O)/kdebug-ext
KDEBUG_MEM ?= 2048
# KASAN and lockdep slow the guest down a few times over
KDEBUG_JOB_TIMEOUT_MS ?= 5000
UFUZZ_DEBUG_FLAGS ?= --seed $(UFUZZ_SEED) --procs 4 --iters 400 --time 150

.PHONY: kernel-debug modules-debug check-kernel-debug
kernel-debug: | $(O)
	@tools/vm/build-debug-kernel -j$$(nproc) $(abspath $(KDEBUG_DIR)) >/dev/null

modules-debug: kernel-debug
	@rm -rf $(KDEBUG_EXT) && mkdir -p $(KDEBUG_EXT)
	@# vmrun takes --moddir only from inside the checkout
	@cp -a $(KDEBUG)/modinst $(KDEBUG_EXT)/modinst
	@find Kbuild kernel uapi \( -name '*.[ch]' -o -name Kbuild \) \
		-not -path '*/tests/*' | tar -cf - -T - | tar -xf - -C $(KDEBUG_EXT)
	@set -o pipefail; \
	$(MAKE) --no-print-directory -C $(KDEBUG) M=$(abspath $(KDEBUG_EXT)) W=1 \
		modules 2>&1 | tee $(KDEBUG_EXT)/modules.log; \
	if grep -qi "warning" $(KDEBUG_EXT)/modules.log; then \
		echo "modules-debug: compiler warnings (W=1), see $(KDEBUG_EXT)/modules.log" >&2; exit 1; fi

check-kernel-debug: modules-debug selftests $(UFUZZ)
	tools/vm/vmrun -t 1500 -m $(KDEBUG_MEM) --hung-task 120 --boot-limit 600 \
		--image $(KDEBUG)/arch/x86/boot/bzImage --moddir $$(echo $(KDEBUG_EXT)/modinst/lib/modules/*) \
		-M '$(KDEBUG_EXT)/kernel/metainfer.ko:job_timeout_ms=$(KDEBUG_JOB_TIMEOUT_MS)' \
		-M $(KDEBUG_EXT)/kernel/sim/metainfer_sim.ko \
		-e MI_KO_DIR=$(abspath $(KDEBUG_EXT))/kernel \
		-- tools/vm/debug-checks $(ST_O) $(UFUZZ) $(UFUZZ_DEBUG_FLAGS)

# In CHECKS: about 6 minutes with the kernel cached, 10 from a cold cache
# (the kernel: 4 minutes on two idle cores, 19 on a loaded machine),
# unless KDEBUG_DIR points at a cache that outlives the clone
# (Documentation/testing.rst, "Debug kernel").
CHECKS += check-kernel-debug
