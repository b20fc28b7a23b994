# SPDX-License-Identifier: GPL-2.0-only
# Kernel modules: metainfer.ko (kernel/) and metainfer_sim.ko (kernel/sim/),
# built in-tree by the kernel's external-module build against the installed
# headers of $(KVER).  Any compiler warning (W=1) fails the build.

MODULES_KO := kernel/metainfer.ko
ALL += modules
CLEAN += modules-clean

.PHONY: modules modules-clean
modules: | $(O)
	@if [ ! -d "$(KDIR)" ]; then \
		echo "modules: no kernel headers at $(KDIR) (run tools/install-deps)" >&2; exit 1; fi
	@set -o pipefail; \
	$(MAKE) --no-print-directory -C $(KDIR) M=$(CURDIR) W=1 modules 2>&1 | tee $(O)/modules.log; \
	if grep -qi "warning" $(O)/modules.log; then \
		echo "modules: compiler warnings (W=1), see $(O)/modules.log" >&2; exit 1; fi

modules-clean:
	@if [ -d "$(KDIR)" ]; then $(MAKE) --no-print-directory -C $(KDIR) M=$(CURDIR) clean >/dev/null; fi
