// SPDX-License-Identifier: MIT
/*
 * bench-switch SUPERNET.onnx [--events N] [--period MS] [--move]: the live
 * switching chain on the host.  Three devices (the CPU and two
 * accelerators, 3x and 2x its speed in the model's tables), two streams
 * of the switchable model running back to back on their own threads;
 * health injected as registry samples every period (default 100 ms, the
 * sampler's default): thermal headroom 0.15 on the device stream 0 runs
 * on for 3 samples (confirmed), then healthy for 5 (recovery), until N
 * switch chains (default 100) have completed.
 *
 * Prints P50 / P99 / max per phase of the chain: detection (first
 * anomalous sample) -> confirmation -> solve + choice -> activation
 * (set_config between inferences) -> first output on the new structure,
 * and the totals confirm -> output (target: P99 <= 100 ms) and detect ->
 * output (includes the confirm_count - 1 sampling periods of waiting for
 * a degradation, recover_count - 1 for a recovery).
 *
 * --move: the two accelerators are emulated devices (lib/device/emu.c)
 * that the models (a quantized supernet) really run on, and activation
 * moves the model too (mi_model_set_devices), not only its structure.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <metainfer/metainfer.h>

#include "device/device.h"
#include "live.h"

#define BATCH 1	/* the quantized supernet has a fixed batch */
#define MAXCH 8192

static float input[BATCH * 64];
static atomic_bool stop;

struct worker {
	struct mi_live *l;
	struct mi_model *m;
	int id;
	uint64_t runs, failed;
};

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct mi_value in = { .dtype = MI_DT_FLOAT, .ndim = 4,
			       .dims = { BATCH, 1, 8, 8 }, .data = input,
			       .nbytes = sizeof(input) };
	struct mi_value out;

	while (!atomic_load(&stop)) {
		int64_t t0;
		int ret;

		mi_live_begin(w->l, w->id, NULL);
		t0 = now_ns();
		ret = mi_model_run(w->m, &in, 1, &out, 1);
		mi_live_end(w->l, w->id, ret, now_ns() - t0);
		w->runs++;
		w->failed += ret < 0;
	}
	return NULL;
}

static void push(struct mi_live *l, int ndev, int hot, double t)
{
	for (int d = 0; d < ndev; d++) {
		struct mi_reg_sample s = { .ts_ns = now_ns(), .present = 0x3f };

		for (int k = 0; k < MI_REG_NDIM; k++)
			s.value[k] = 1.0;
		s.value[MI_REG_THERMAL] = d == hot ? t : 0.95;
		mi_live_push(l, d, &s);
	}
}

static void sleep_until(int64_t t)
{
	int64_t d = t - now_ns();

	if (d > 0)
		usleep(d / 1000);
}

static void row(const char *name, double *v, int n)
{
	double p50 = mi_live_percentile(v, n, 50);
	double p99 = mi_live_percentile(v, n, 99);

	printf("  %-26s P50 %9.3f ms  P99 %9.3f ms  max %9.3f ms\n", name, p50,
	       p99, v[n - 1]);
}

int main(int argc, char **argv)
{
	static const struct mi_live_device devs[] = {
		{ "cpu", "cpu", 1.0 },
		{ "emu0", "emu:a", 3.0 },
		{ "emu1", "emu:b", 2.0 },
	};
	struct mi_dev_caps caps = {
		.op_mask = ((1ull << DRM_METAINFER_OP_COUNT) - 1) & ~1ull,
		.dtype_mask = (1ull << DRM_METAINFER_DTYPE_INT8) |
			      (1ull << DRM_METAINFER_DTYPE_UINT8) |
			      (1ull << DRM_METAINFER_DTYPE_INT32),
		.layout_mask = (1ull << DRM_METAINFER_LAYOUT_PLAIN) |
			       (1ull << DRM_METAINFER_LAYOUT_NCHW),
		.preferred_layout = DRM_METAINFER_LAYOUT_NCHW,
		.num_queues = 1, .sram_bytes = 1 << 20,
		.clock_khz = 500000, .macs_per_cycle = 256,
		.dma_bw = 1000000000, .dma_burst = 128,
	};
	bool move = false;
	static struct mi_live_chain ch[MAXCH];
	static double v[MAXCH];
	struct mi_model *m[2];
	struct worker w[2];
	pthread_t th[2];
	/* one device heated and cooled over and over: flap damping (which
	 * would rightly ask for longer runs) off, to time every switch */
	struct mi_live_opts lo = { .reg.flap_limit = 1000000 };
	struct mi_live *l;
	int want = 100, period_ms = 100, n = 0, cycles = 0;
	uint64_t events, idle, sup;
	int64_t t, t0;

	if (argc < 2) {
		fprintf(stderr, "usage: bench-switch SUPERNET.onnx [--events N] [--period MS] [--move]\n");
		return 2;
	}
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--move"))
			move = true;
		else if (!strcmp(argv[i], "--events") && i + 1 < argc)
			want = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--period") && i + 1 < argc)
			period_ms = atoi(argv[++i]);
		else
			want = 0;
	}
	if (want < 1 || want > MAXCH || period_ms < 1) {
		fprintf(stderr, "bench-switch: --events 1..%d, --period >= 1, --move\n",
			MAXCH);
		return 2;
	}
	for (int i = 0; i < BATCH * 64; i++)
		input[i] = ((i * 37) % 17) / 16.0f;
	lo.move_models = move;
	if (mi_dev_emu_add("emu0", &caps, NULL) ||
	    mi_dev_emu_add("emu1", &caps, NULL) ||
	    mi_live_create(&lo, devs, 3, &l)) {
		fprintf(stderr, "bench-switch: %s\n", mi_last_error());
		return 1;
	}
	for (int i = 0; i < 2; i++) {
		struct mi_model_opts o = { .nthreads = 1,
					   .devices = move ? "emu0,emu1" : NULL };

		if (mi_model_load(argv[1], &o, &m[i]) ||
		    mi_live_add_stream(l, m[i], NULL)) {
			fprintf(stderr, "bench-switch: %s: %s\n", argv[1],
				mi_last_error());
			return 1;
		}
	}
	if (mi_live_start(l)) {
		fprintf(stderr, "bench-switch: %s\n", mi_last_error());
		return 1;
	}
	t = now_ns();
	for (int r = 0; r < 6; r++, t += period_ms * 1000000LL) {
		sleep_until(t);
		push(l, 3, -1, 0);
	}
	for (int i = 0; i < 2; i++) {
		w[i] = (struct worker){ .l = l, .m = m[i], .id = i };
		pthread_create(&th[i], NULL, worker_main, &w[i]);
	}
	t0 = now_ns();
	while (n < want) {
		struct mi_live_stream_view sv;

		mi_live_stream(l, 0, &sv, false);
		for (int r = 0; r < 8; r++, t += period_ms * 1000000LL) {
			sleep_until(t);
			push(l, 3, r < 3 ? sv.device : -1, 0.15);
		}
		n = mi_live_chains(l, 0, ch, MAXCH, NULL);
		cycles++;
	}
	/* let the last switch reach its first output */
	usleep(50000);
	atomic_store(&stop, true);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	n = mi_live_chains(l, 0, ch, MAXCH, NULL);
	mi_live_counts(l, &events, &idle, &sup);
	printf("bench-switch: %d chains from %llu confirmed events (%llu moved or switched nothing, %llu superseded) in %d heat/cool cycles, %.1f s; sampling every %d ms; %s\n",
	       n, (unsigned long long)events, (unsigned long long)idle,
	       (unsigned long long)sup, cycles, (now_ns() - t0) / 1e9,
	       period_ms, move ? "models move between emulated devices" :
				 "structure switches, models on the CPU");
	for (int i = 0; i < 2; i++)
		printf("  stream %d: %llu inferences, %llu failed\n", i,
		       (unsigned long long)w[i].runs,
		       (unsigned long long)w[i].failed);
	{
		static const struct { const char *name; int a, b; } ph[] = {
			{ "detect -> confirm", MI_LIVE_DETECT, MI_LIVE_CONFIRM },
			{ "confirm -> solve+choose", MI_LIVE_CONFIRM, MI_LIVE_SOLVE },
			{ "solve -> stream takes it", MI_LIVE_SOLVE, MI_LIVE_TAKE },
			{ "take -> activated", MI_LIVE_TAKE, MI_LIVE_ACTIVATE },
			{ "activate -> first output", MI_LIVE_ACTIVATE, MI_LIVE_OUTPUT },
			{ "confirm -> first output", MI_LIVE_CONFIRM, MI_LIVE_OUTPUT },
			{ "detect -> first output", MI_LIVE_DETECT, MI_LIVE_OUTPUT },
		};
		double p99 = 0;

		for (size_t k = 0; k < sizeof(ph) / sizeof(ph[0]); k++) {
			for (int i = 0; i < n; i++)
				v[i] = (ch[i].ns[ph[k].b] - ch[i].ns[ph[k].a]) / 1e6;
			row(ph[k].name, v, n);
			if (ph[k].a == MI_LIVE_CONFIRM && ph[k].b == MI_LIVE_OUTPUT)
				p99 = mi_live_percentile(v, n, 99);
		}
		for (int type = MI_REG_EV_DEGRADED; type <= MI_REG_EV_RECOVERED; type++) {
			int k2 = 0;

			for (int i = 0; i < n; i++)
				if (ch[i].type == type)
					v[k2++] = (ch[i].ns[MI_LIVE_CONFIRM] -
						  ch[i].ns[MI_LIVE_DETECT]) / 1e6;
			if (k2)
				row(type == MI_REG_EV_DEGRADED ?
				    "detect -> confirm, heat" :
				    "detect -> confirm, cool", v, k2);
		}
		printf("  target confirm -> first output P99 <= 100 ms: %s (%.3f ms)\n",
		       p99 <= 100 ? "met" : "NOT met", p99);
	}
	mi_live_destroy(l);
	mi_model_free(m[0]);
	mi_model_free(m[1]);
	return 0;
}
