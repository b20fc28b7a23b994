# SPDX-License-Identifier: GPL-2.0-only
# scheduler/: the hardware state registry and the hierarchical solver, a
# static library of its own (build/scheduler/libmisched.a, public header
# scheduler/scheduler.h) on top of libmetainfer.a (errors, debug topics).
#
#   make check-scheduler   registry + solver tests (host, seconds)
#   make bench-live        solver part: solve times, quality vs baselines

SCHED_SRCS := $(wildcard scheduler/*.c)
SCHED_OBJS := $(patsubst %.c,$(O)/%.o,$(SCHED_SRCS))
SCHED_A := $(O)/scheduler/libmisched.a
SCHED_CFLAGS := $(CFLAGS_COMMON) -pthread -Ischeduler
SCHED_HDRS := $(wildcard scheduler/*.h scheduler/tests/*.h) lib/debug.h

$(O)/scheduler/%.o: scheduler/%.c $(SCHED_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(SCHED_CFLAGS) -c $< -o $@

$(SCHED_A): $(SCHED_OBJS)
	@rm -f $@
	ar rcs $@ $^

SCHED_TESTS := $(patsubst scheduler/tests/%.c,$(O)/scheduler/tests/%,$(wildcard scheduler/tests/test-*.c))
SCHED_BENCH := $(O)/scheduler/bench/bench-solver

SCHED_LINK := $(SCHED_A) $(LIB_A) $(LIB_LDLIBS)
$(O)/scheduler/tests/%: scheduler/tests/%.c $(SCHED_A) $(LIB_A) $(SCHED_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(SCHED_CFLAGS) $< -o $@ $(SCHED_LINK)

$(O)/scheduler/bench/%: scheduler/bench/%.c $(SCHED_A) $(LIB_A) $(SCHED_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(SCHED_CFLAGS) $< -o $@ $(SCHED_LINK)

ALL += $(SCHED_A) $(SCHED_TESTS) $(SCHED_BENCH)

CHECKS += check-scheduler

.PHONY: check-scheduler bench-live bench-live-solver
check-scheduler: $(SCHED_TESTS)
	@set -e; for t in $(SCHED_TESTS); do echo "--- $$t"; $$t; done

# bench-live gathers the live-adaptation benchmarks; this is the solver's.
bench-live: bench-live-solver
bench-live-solver: $(SCHED_BENCH)
	$(SCHED_BENCH)
