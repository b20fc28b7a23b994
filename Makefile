# SPDX-License-Identifier: GPL-2.0-only
#
# MetaInfer top-level Makefile.
#
#   make          build the kernel modules and all userspace into build/
#   make check    run every test suite (kernel selftests in a VM, library
#                 unit tests, fuzz smoke run, ONNX conformance, networks)
#   make demo     install missing dependencies, then run the main job
#   make bench    side-by-side benchmarks against ONNX Runtime
#
# Each directory contributes a fragment (<dir>/<dir>.mk) that appends to
# ALL, CHECKS, DEMOS, BENCHES and CLEAN.  Kernel modules are built through
# the root Kbuild against the installed headers of the discovered kernel.

.DEFAULT_GOAL := all
SHELL := /bin/bash

O ?= build
KVER ?= $(shell tools/kver 2>/dev/null)
KDIR ?= /lib/modules/$(KVER)/build
PYTHON ?= /usr/bin/python3

CC ?= cc
ifeq ($(origin CC),default)
CC := gcc
endif
OPT ?= -O2
# -fno-semantic-interposition: with -fPIC, GCC will not inline a non-static
# function into its own file's callers (another library could interpose
# it).  Nothing here relies on interposition, and the int8 kernels that
# lost `static` when qgemm.c was split per ISA need the inlining: without
# it the int8 transformer ran 1.7x slower.
CFLAGS_COMMON := -std=gnu11 -g $(OPT) -Wall -Wextra -Wno-unused-parameter \
	-Wno-sign-compare -Wshadow -fno-strict-aliasing -fPIC \
	-fno-semantic-interposition -D_GNU_SOURCE \
	-I$(CURDIR)/uapi -I$(CURDIR)/lib/include -I$(CURDIR)/lib -I$(O)
ALL :=
CHECKS :=
DEMOS :=
BENCHES :=
CLEAN :=

$(O):
	@mkdir -p $@

# Fragments: every <dir>/*.mk and <dir>/<sub>/*.mk in the tree.  The ones
# that define variables other fragments use in prerequisites (the library,
# the selftests' helper objects) are read first, since make expands
# prerequisites when it reads a rule.
FRAGMENTS := $(sort $(wildcard */*.mk */*/*.mk))
FRAGMENTS_FIRST := $(filter lib/lib.mk selftests/selftests.mk,$(FRAGMENTS))
include $(FRAGMENTS_FIRST) $(filter-out $(FRAGMENTS_FIRST),$(FRAGMENTS))

.PHONY: all check demo bench clean deps format lint modules
all: $(ALL)

# Every suite runs even if an earlier one failed; the summary says which
# failed and the exit status is non-zero if any did.
check: all
	@tools/run-checks $(CHECKS)

deps:
	@tools/install-deps

demo: deps
	@$(MAKE) --no-print-directory all
	@set -e; for d in $(DEMOS); do $(MAKE) --no-print-directory $$d; done

bench: all
	@set -e; for b in $(BENCHES); do $(MAKE) --no-print-directory $$b; done

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

lint:
	clang-format --dry-run --Werror $$(git ls-files 'kernel/*.c' 'kernel/*.h' 'uapi/*.h')

clean: $(CLEAN)
	rm -rf $(O)
