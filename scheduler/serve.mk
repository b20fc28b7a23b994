# SPDX-License-Identifier: GPL-2.0-only
# Live adaptation: scheduler/live.c (registry -> planner -> meta-controller
# -> streams), `metainfer serve`, its host test and the switch-latency
# benchmark.  Documentation/live.rst.
#
#   make check-serve        check-live on a small supernet + serve runs (host):
#                           the switch timeline in metainfer trace, and two
#                           serve nodes on one etcd, one killed
#   make bench-live-switch  switch latency chain over >= 100 events (host)
#   make demo-live          in the VM: three sims + the CPU, two streams, one
#                           chip heated and cooled by a live personality
#                           change (about 1 minute under TCG; in DEMOS)
#   make demo-live-host     the same on emulated devices with an injected
#                           thermal event (no VM)

LIVE_DIR := $(O)/live
LIVE_SUPERNET := $(LIVE_DIR)/supernet/supernet.onnx
LIVE_SUPERNET8 := $(LIVE_DIR)/supernet/supernet.int8.onnx
LIVE_CHECK := $(O)/scheduler/tests/check-live
LIVE_BENCH := $(O)/scheduler/bench/bench-switch

# metainfer serve links the scheduler library (after libmetainfer.a,
# which it uses in turn)
$(O)/metainfer: $(SCHED_A)
$(O)/metainfer: LIB_LDLIBS := $(SCHED_A) $(LIB_A) $(LIB_LDLIBS)
$(O)/metainfer: TOOLS_CFLAGS += -I$(CURDIR)/scheduler

LIVE_CFLAGS = $(LIB_CFLAGS) -I$(CURDIR)/scheduler \
	$(shell pkg-config --cflags libdrm 2>/dev/null || echo -I/usr/include/libdrm)

$(LIVE_CHECK): scheduler/tests/check-live.c $(SCHED_A) $(LIB_A) $(SCHED_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(LIVE_CFLAGS) $< -o $@ $(SCHED_LINK)

$(LIVE_BENCH): scheduler/bench/bench-switch.c $(SCHED_A) $(LIB_A) $(SCHED_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(LIVE_CFLAGS) $< -o $@ $(SCHED_LINK)

ALL += $(LIVE_CHECK) $(LIVE_BENCH)

# A small supernet (3 epochs, about 10 s of training; tools/supernet)
# with its trained meta-controller (lib/meta/meta.mk: METACTL)
$(LIVE_SUPERNET): tools/supernet/supernet.py $(METACTL)
	@mkdir -p $(dir $@)
	$(PYTHON) tools/supernet/supernet.py --out $(dir $@) --epochs 3 --warmup 2 \
		--metactl $(METACTL)

# Quantized (QDQ), so that its layers run on accelerators
$(LIVE_SUPERNET8): $(LIVE_SUPERNET) $(O)/metainfer
	$(O)/metainfer quantize $< --calib-random 16 -o $@

CHECKS += check-serve
.PHONY: check-serve bench-live-switch demo-live demo-live-host
check-serve: $(LIVE_CHECK) $(LIVE_SUPERNET) $(LIVE_SUPERNET8) $(O)/metainfer
	$(LIVE_CHECK) $(LIVE_SUPERNET) $(LIVE_SUPERNET8)
	tools/metainfer/test-serve.sh $(O)/metainfer $(LIVE_SUPERNET) $(LIVE_SUPERNET8)
	tools/metainfer/test-serve-etcd.sh $(O)/metainfer $(LIVE_SUPERNET)

bench-live: bench-live-switch
bench-live-switch: $(LIVE_BENCH) $(LIVE_SUPERNET) $(LIVE_SUPERNET8)
	$(LIVE_BENCH) $(LIVE_SUPERNET)
	$(LIVE_BENCH) $(LIVE_SUPERNET8) --move

DEMOS += demo-live
demo-live: modules $(O)/metainfer $(LIVE_SUPERNET8)
	@echo "== two streams of a switchable model; npu0 heated, then cooled (live personality change)"
	@tools/vm/vmrun -t 300 $(ST_VMRUN_FLAGS) -- scheduler/demo-live \
		$(O) $(LIVE_SUPERNET8)

# serve under metainfer trace --user-only (no driver needed): the switch
# timeline ends up in $(O)/demo-live-host-trace.json for Perfetto
demo-live-host: $(O)/metainfer $(LIVE_SUPERNET8)
	$(O)/metainfer trace --user-only --timeline $(O)/demo-live-host.jsonl \
		-o $(O)/demo-live-host-trace.json -- \
		$(O)/metainfer serve $(LIVE_SUPERNET8) --streams 2 --emulate 2 \
		--duration 8 --heat emu0:2:5:0.15 \
		--timeline $(O)/demo-live-host.jsonl
