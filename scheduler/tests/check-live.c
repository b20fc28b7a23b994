// SPDX-License-Identifier: MIT
/*
 * check-live SUPERNET.onnx: the live layer (scheduler/live.h) on the host,
 * health injected as registry samples, three devices (the CPU and two
 * accelerators of different speeds) and two streams of a switchable
 * model (tools/supernet/supernet.py).
 *
 *  - one anomalous sample never moves or switches anything; three do,
 *    with a complete chain (detect <= confirm <= solve <= activate <=
 *    output); recovery (five good samples) switches back;
 *  - under load (two stream threads running continuously while thermal
 *    events come and go) every output equals the reference output of the
 *    configuration the stream ran, and every switch completes;
 *  - a device lost mid-stream (emulated device fault injection) loses no
 *    inference: the lost device is dropped from the placement and every
 *    run still returns the right output.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <metainfer/metainfer.h>

#include "device/device.h"
#include "health/health.h"
#include "live.h"

static int fails;

#define CHECK(cond, ...)                                                   \
	do {                                                               \
		if (!(cond)) {                                             \
			fails++;                                           \
			printf("FAIL %s:%d: ", __FILE__, __LINE__);        \
			printf(__VA_ARGS__);                               \
			printf("\n");                                      \
		}                                                          \
	} while (0)

#define BATCH 1		/* the quantized supernet has a fixed batch */
#define NOUT (BATCH * 10)
#define MAXCFG 64

static const char *path;
static float input[BATCH * 64];
static float ref[MAXCFG][NOUT];
/* the quantized model: on the CPU alone its int8 kernels differ from
 * a placement with device jobs; both are right */
static float ref_cpu[MAXCFG][NOUT];
static bool have_cpu_ref;
static int ncfg;
/* 0: outputs must equal the reference bit for bit; else the largest
 * difference allowed, relative to the reference's largest magnitude, and
 * the reference's class must win (a job that failed on a device reruns
 * its part on the CPU, where the QDQ graph runs in fp32) */
static double tol;
static atomic_int inexact;

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static struct mi_model *load(const char *devices)
{
	struct mi_model_opts o = { .nthreads = 1, .devices = devices };
	struct mi_model *m;

	if (mi_model_load(path, &o, &m)) {
		printf("FAIL load %s: %s\n", path, mi_last_error());
		exit(1);
	}
	return m;
}

static int run(struct mi_model *m, float *out)
{
	struct mi_value in = { .dtype = MI_DT_FLOAT, .ndim = 4,
			       .dims = { BATCH, 1, 8, 8 }, .data = input,
			       .nbytes = sizeof(input) };
	struct mi_value o;
	int ret = mi_model_run(m, &in, 1, &o, 1);

	if (ret)
		return ret;
	if (o.nbytes != NOUT * sizeof(float))
		return -EPROTO;
	memcpy(out, o.data, o.nbytes);
	return 0;
}

static void make_refs(const char *devices, float (*r)[NOUT])
{
	struct mi_model *m = load(devices);

	ncfg = mi_model_config_count(m);
	if (ncfg <= 0 || ncfg > MAXCFG) {
		printf("FAIL %s: %d configurations\n", path, ncfg);
		exit(1);
	}
	for (int c = 0; c < ncfg; c++) {
		struct mi_switch_config cfg;

		if (mi_model_config(m, c, &cfg) ||
		    mi_model_set_config(m, cfg.choice) || run(m, r[c])) {
			printf("FAIL reference %d: %s\n", c, mi_last_error());
			exit(1);
		}
	}
	mi_model_free(m);
}

/* A sample with every dimension healthy but thermal headroom t. */
static void push(struct mi_live *l, int dev, double t)
{
	struct mi_reg_sample s = { .ts_ns = now_ns(), .present = 0x3f };
	struct mi_device_view v;

	/* a lost device reports nothing more */
	if (!mi_registry_device(mi_live_registry(l), dev, &v) && v.lost)
		return;
	for (int k = 0; k < MI_REG_NDIM; k++)
		s.value[k] = 1.0;
	s.value[MI_REG_THERMAL] = t;
	if (mi_live_push(l, dev, &s))
		printf("FAIL push: %s\n", mi_last_error()), fails++;
}

static void push_all(struct mi_live *l, int ndev, int hot, double t)
{
	for (int d = 0; d < ndev; d++)
		push(l, d, d == hot ? t : 0.95);
}

static const struct mi_live_device devs[] = {
	{ "cpu", "cpu", 1.0 },
	{ "emu0", "emu:fast", 3.0 },
	{ "emu1", "emu:slow", 2.0 },
};
#define NDEV 3

/* damp: the registry's flap damping on (the default) or off (load
 * tests heat and cool one device over and over) */
static struct mi_live *setup(struct mi_model **m, int n, bool damp,
			     bool move)
{
	struct mi_live_opts o = { .reg.flap_limit = damp ? 0 : 1000000,
				  .move_models = move };
	struct mi_live *l;

	if (mi_live_create(&o, devs, NDEV, &l)) {
		printf("FAIL create: %s\n", mi_last_error());
		exit(1);
	}
	for (int i = 0; i < n; i++)
		CHECK(!mi_live_add_stream(l, m[i], NULL), "add: %s",
		      mi_last_error());
	CHECK(!mi_live_start(l), "start: %s", mi_last_error());
	return l;
}

static bool near(const float *out, const float *r)
{
	double mag = 0, diff = 0;

	if (!tol)
		return false;
	atomic_fetch_add(&inexact, 1);
	for (int b = 0; b < BATCH; b++) {
		int ao = 0, ar = 0;

		for (int k = 0; k < 10; k++) {
			const float *o = out + b * 10, *x = r + b * 10;

			mag = fmax(mag, fabs(x[k]));
			diff = fmax(diff, fabs(o[k] - x[k]));
			ao = o[k] > o[ao] ? k : ao;
			ar = x[k] > x[ar] ? k : ar;
		}
		if (ao != ar)
			return false;
	}
	return diff <= tol * mag;
}

/* One inference of stream id, checked against its configuration. */
static int step(struct mi_live *l, int id, struct mi_model *m, int *bad)
{
	float out[NOUT];
	int cfg = -2, ret;
	int64_t t0;

	ret = mi_live_begin(l, id, &cfg);
	if (ret)
		return ret;
	t0 = now_ns();
	ret = run(m, out);
	mi_live_end(l, id, ret, now_ns() - t0);
	if (ret || cfg < 0 || cfg >= ncfg)
		(*bad)++;
	else if (memcmp(out, ref[cfg], sizeof(out)) &&
		 (!have_cpu_ref || memcmp(out, ref_cpu[cfg], sizeof(out))) &&
		 !near(out, ref[cfg]))
		(*bad)++;
	return ret;
}

static bool chain_ok(const struct mi_live_chain *c)
{
	for (int p = 1; p < MI_LIVE_NPHASE; p++)
		if (!c->ns[p] || c->ns[p] < c->ns[p - 1])
			return false;
	return c->ns[0] > 0;
}

static void test_credibility(void)
{
	struct mi_model *m[2] = { load(NULL), load(NULL) };
	struct mi_live_stream_view v0, v;
	struct mi_live_chain ch[8];
	uint64_t events;
	struct mi_live *l = setup(m, 2, true, false);
	int bad = 0, hot, n;

	for (int r = 0; r < 6; r++)
		push_all(l, NDEV, -1, 0);
	mi_live_stream(l, 0, &v0, false);
	hot = v0.device;
	printf("stream 0 starts on %s, configuration %d (budget %.0f us)\n",
	       devs[hot].name, v0.config, v0.budget_us);
	CHECK(v0.config >= 0, "a configuration is active");
	/* one odd sample, then normal ones: nothing changes */
	push_all(l, NDEV, hot, 0.1);
	for (int r = 0; r < 6; r++)
		push_all(l, NDEV, -1, 0);
	for (int i = 0; i < 2; i++)
		step(l, i, m[i], &bad);
	mi_live_counts(l, &events, NULL, NULL);
	mi_live_stream(l, 0, &v, false);
	CHECK(events == 0, "one odd sample confirmed %llu events",
	      (unsigned long long)events);
	CHECK(v.device == v0.device && v.config == v0.config && !v.switches &&
	      !v.moves, "one odd sample changed stream 0");
	CHECK(mi_live_chains(l, 0, ch, 8, NULL) == 0, "no chain");
	/* two odd samples: still nothing */
	push_all(l, NDEV, hot, 0.1);
	push_all(l, NDEV, hot, 0.1);
	push_all(l, NDEV, -1, 0);
	mi_live_counts(l, &events, NULL, NULL);
	CHECK(events == 0, "two odd samples confirmed %llu events",
	      (unsigned long long)events);
	/* three in a row: confirmed, moved and/or switched */
	for (int r = 0; r < 3; r++)
		push_all(l, NDEV, hot, 0.1);
	mi_live_counts(l, &events, NULL, NULL);
	CHECK(events == 1, "three odd samples: %llu events",
	      (unsigned long long)events);
	for (int i = 0; i < 2; i++)
		step(l, i, m[i], &bad);
	mi_live_stream(l, 0, &v, false);
	printf("after 3 hot samples on %s: stream 0 on %s, configuration %d\n",
	       devs[hot].name, devs[v.device].name, v.config);
	CHECK(v.device != hot || v.config != v0.config,
	      "stream 0 neither moved nor switched");
	n = mi_live_chains(l, 0, ch, 8, NULL);
	CHECK(n >= 1, "a chain per changed stream: %d", n);
	for (int i = 0; i < n; i++)
		CHECK(chain_ok(&ch[i]) && ch[i].type == MI_REG_EV_DEGRADED &&
		      ch[i].device == hot && ch[i].dim == MI_REG_THERMAL,
		      "chain %d incomplete", i);
	/* recovery: hysteresis needs five good samples */
	for (int r = 0; r < 4; r++)
		push_all(l, NDEV, -1, 0);
	mi_live_counts(l, &events, NULL, NULL);
	CHECK(events == 1, "four good samples recovered it");
	push_all(l, NDEV, -1, 0);
	mi_live_counts(l, &events, NULL, NULL);
	CHECK(events == 2, "five good samples: %llu events",
	      (unsigned long long)events);
	for (int i = 0; i < 2; i++)
		step(l, i, m[i], &bad);
	mi_live_stream(l, 0, &v, false);
	CHECK(v.device == v0.device && v.config == v0.config,
	      "back: %s config %d", devs[v.device].name, v.config);
	CHECK(!bad, "%d outputs differ from their configuration's", bad);
	mi_live_destroy(l);
	mi_model_free(m[0]);
	mi_model_free(m[1]);
}

struct worker {
	struct mi_live *l;
	struct mi_model *m;
	int id, bad;
	atomic_bool *stop;
	atomic_ulong runs;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;

	while (!atomic_load(w->stop)) {
		step(w->l, w->id, w->m, &w->bad);
		atomic_fetch_add(&w->runs, 1);
	}
	return NULL;
}

static void wait_runs(struct worker *w, int n, unsigned long more)
{
	unsigned long base[8];

	for (int i = 0; i < n; i++)
		base[i] = atomic_load(&w[i].runs);
	for (int i = 0; i < n; i++)
		while (atomic_load(&w[i].runs) < base[i] + more)
			usleep(200);
}

static void test_load(const char *devices, bool lose)
{
	struct mi_model *m[2] = { load(devices), load(devices) };
	struct mi_live *l = setup(m, 2, false, lose);
	struct worker w[2];
	pthread_t th[2];
	atomic_bool stop = false;
	struct mi_live_stream_view v[2];
	static struct mi_live_chain ch[512];
	uint64_t events, sup;
	int n, incomplete = 0, switches = 0, cycles = lose ? 4 : 12;

	for (int r = 0; r < 6; r++)
		push_all(l, NDEV, -1, 0);
	for (int i = 0; i < 2; i++) {
		w[i] = (struct worker){ .l = l, .m = m[i], .id = i,
					.stop = &stop };
		pthread_create(&th[i], NULL, worker_main, &w[i]);
	}
	for (int c = 0; c < cycles; c++) {
		int hot;

		mi_live_stream(l, c & 1, &v[0], false);
		hot = v[0].device;
		for (int r = 0; r < 3; r++) {
			push_all(l, NDEV, hot, 0.1 + 0.05 * (c % 3));
			wait_runs(w, 2, 1);
		}
		wait_runs(w, 2, 2);
		for (int r = 0; r < 5; r++) {
			push_all(l, NDEV, -1, 0);
			wait_runs(w, 2, 1);
		}
		wait_runs(w, 2, 2);
	}
	if (lose) {
		struct mi_dev *d = mi_dev_find("emu0");
		int dev = 1;

		/* every job on emu0 from now on fails as ENODEV: lost */
		CHECK(d && !mi_dev_emu_inject(d, -ENODEV, 1 << 30),
		      "inject: %s", mi_last_error());
		wait_runs(w, 2, 3);
		/* what the sampler reports for it (lib/health) */
		struct mi_health_vec hv = { .flags = MI_HEALTH_F_LOST,
					    .mono_ns = now_ns() };
		CHECK(mi_live_push_health(l, dev, &hv) == 1, "lost: %s",
		      mi_last_error());
		CHECK(mi_live_push_health(l, dev, &hv) == 0, "lost twice");
		wait_runs(w, 2, 3);
		for (int i = 0; i < 2; i++) {
			mi_live_stream(l, i, &v[i], false);
			for (int k = 0; k < v[i].nlayers; k++)
				CHECK(v[i].layer_device[k] != dev,
				      "stream %d layer %d still on emu0", i, k);
		}
		/* and heat the CPU: the rest keeps running */
		for (int r = 0; r < 3; r++) {
			push_all(l, NDEV, 0, 0.1);
			wait_runs(w, 2, 1);
		}
		wait_runs(w, 2, 3);
	}
	atomic_store(&stop, true);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	if (lose) {
		struct mi_dev *e0 = mi_dev_find("emu0"), *e1 = mi_dev_find("emu1");
		uint64_t jobs1 = 0;

		for (int i = 0; i < 2; i++)
			for (int k = 0; k < mi_model_device_count(m[i]); k++) {
				struct mi_device_stats ds;

				if (!mi_model_device_stats(m[i], k, &ds) &&
				    !strcmp(ds.device, "emu1"))
					jobs1 += ds.jobs;
			}
		printf("lost: emu0 %llu jobs failed and reran, emu1 ran %llu jobs since the last move\n",
		       (unsigned long long)atomic_load(&e0->faults),
		       (unsigned long long)jobs1);
		CHECK(atomic_load(&e0->faults) >= 1,
		      "the fault hit no job on emu0");
		CHECK(jobs1 > 0, "nothing ran on emu1 after the loss");
		/* only a rerun of a failed job may differ from both */
		CHECK((uint64_t)atomic_load(&inexact) <= atomic_load(&e0->faults),
		      "%d outputs inexact, %llu jobs reran", atomic_load(&inexact),
		      (unsigned long long)atomic_load(&e0->faults));
		CHECK(e1 && mi_dev_up(e1), "emu1 is up");
	}
	mi_live_counts(l, &events, NULL, &sup);
	n = mi_live_chains(l, 0, ch, 512, NULL);
	for (int i = 0; i < n; i++) {
		incomplete += !chain_ok(&ch[i]);
		switches += ch[i].from_config != ch[i].to_config;
	}
	for (int i = 0; i < 2; i++) {
		mi_live_stream(l, i, &v[i], false);
		printf("%s stream %d: %llu runs, %llu failed, %llu switches, %llu moves, %d wrong\n",
		       lose ? "lost" : "load", i,
		       (unsigned long long)v[i].runs,
		       (unsigned long long)v[i].failures,
		       (unsigned long long)v[i].switches,
		       (unsigned long long)v[i].moves, w[i].bad);
		CHECK(!w[i].bad, "stream %d: %d wrong or failed outputs", i,
		      w[i].bad);
		CHECK(!v[i].failures, "stream %d: %llu failed runs", i,
		      (unsigned long long)v[i].failures);
	}
	printf("%s: %llu events, %d chains (%d switches, %llu superseded), %d incomplete\n",
	       lose ? "lost" : "load", (unsigned long long)events, n,
	       switches, (unsigned long long)sup, incomplete);
	CHECK(events >= (uint64_t)cycles * 2, "events: %llu",
	      (unsigned long long)events);
	CHECK(n >= cycles && !incomplete, "chains: %d, %d incomplete", n,
	      incomplete);
	CHECK(switches > 0, "no structure switch under load");
	mi_live_destroy(l);
	mi_model_free(m[0]);
	mi_model_free(m[1]);
}

static uint64_t jobs_on(struct mi_model *m, const char *dev)
{
	for (int k = 0; k < mi_model_device_count(m); k++) {
		struct mi_device_stats ds;

		if (!mi_model_device_stats(m, k, &ds) && !strcmp(ds.device, dev))
			return ds.jobs;
	}
	return 0;
}

/* mi_model_set_devices on the quantized model (refs: ref on emu1,
 * ref_cpu on the CPU alone) */
static void test_set_devices(void)
{
	struct mi_model *m = load("emu0");
	struct mi_switch_config c;
	float out[NOUT];
	int cfg = ncfg - 1;

	CHECK(!mi_model_config(m, cfg, &c) && !mi_model_set_config(m, c.choice),
	      "config: %s", mi_last_error());
	CHECK(!run(m, out) && !memcmp(out, ref[cfg], sizeof(out)) &&
	      jobs_on(m, "emu0") > 0, "on emu0");
	CHECK(mi_model_set_devices(m, "nosuch") == -ENODEV &&
	      strstr(mi_last_error(), "nosuch") &&
	      !strchr(mi_last_error(), '\n'), "unknown device: %s",
	      mi_last_error());
	mi_model_device_stats_reset(m);
	CHECK(!run(m, out) && !memcmp(out, ref[cfg], sizeof(out)) &&
	      jobs_on(m, "emu0") > 0, "kept emu0 after a refused move");
	CHECK(!mi_model_set_devices(m, "emu1"), "to emu1: %s", mi_last_error());
	CHECK(!run(m, out) && !memcmp(out, ref[cfg], sizeof(out)) &&
	      jobs_on(m, "emu1") > 0 && !jobs_on(m, "emu0"), "on emu1");
	CHECK(!mi_model_set_devices(m, NULL), "to the CPU: %s", mi_last_error());
	CHECK(!run(m, out) && !memcmp(out, ref_cpu[cfg], sizeof(out)) &&
	      !jobs_on(m, "emu1"), "on the CPU alone");
	CHECK(mi_model_get_config(m, c.choice) == 1, "configuration kept");
	CHECK(mi_model_set_devices(NULL, "cpu") == -EINVAL, "NULL model");
	mi_model_free(m);
}

/* An activation that fails (the solver moves a stream to a device the
 * model cannot use) keeps the model as it was and the stream running. */
static void test_refused(void)
{
	static const struct mi_live_device gd[] = {
		{ "cpu", "cpu", 1.0 },
		{ "emu0", "emu:fast", 3.0 },
		{ "ghost", "ghost", 2.5 },	/* no such device */
	};
	struct mi_live_opts o = { .move_models = true };
	struct mi_model *m = load("emu0");
	struct mi_live_stream_view v0, v;
	struct mi_live *l;
	int bad = 0;

	if (mi_live_create(&o, gd, 3, &l)) {
		printf("FAIL create: %s\n", mi_last_error());
		fails++;
		mi_model_free(m);
		return;
	}
	CHECK(!mi_live_add_stream(l, m, NULL) && !mi_live_start(l),
	      "start: %s", mi_last_error());
	for (int r = 0; r < 6; r++)
		push_all(l, 3, -1, 0);
	mi_live_stream(l, 0, &v0, false);
	CHECK(v0.device == 1, "starts on emu0: %d", v0.device);
	for (int r = 0; r < 3; r++)
		push_all(l, 3, 1, 0.1);
	for (int k = 0; k < 3; k++)
		step(l, 0, m, &bad);
	mi_live_stream(l, 0, &v, false);
	CHECK(v.switch_failures == 1 && v.device == v0.device &&
	      v.config == v0.config && !v.failures && !bad,
	      "refused move: %llu refused, device %d, config %d, %d wrong",
	      (unsigned long long)v.switch_failures, v.device, v.config, bad);
	CHECK(jobs_on(m, "emu0") > 0, "still runs on emu0");
	mi_live_destroy(l);
	mi_model_free(m);
}

static void test_errors(void)
{
	struct mi_live *l;
	struct mi_reg_sample s = { 0 };

	CHECK(mi_live_create(NULL, devs, 0, &l) == -EINVAL && !l,
	      "no devices");
	CHECK(!mi_live_create(NULL, devs, NDEV, &l), "create");
	CHECK(mi_live_start(l) == -EINVAL, "start without streams");
	CHECK(mi_live_push(l, 0, &s) == -EINVAL, "push before start");
	CHECK(mi_live_begin(l, 0, NULL) == -EINVAL, "begin before start");
	mi_live_destroy(l);
}

int main(int argc, char **argv)
{
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

	if (argc != 2 && argc != 3) {
		fprintf(stderr, "usage: check-live SUPERNET.onnx [SUPERNET.int8.onnx]\n");
		return 2;
	}
	path = argv[1];
	for (int i = 0; i < BATCH * 64; i++)
		input[i] = ((i * 37) % 17) / 16.0f;
	if (mi_dev_emu_add("emu0", &caps, NULL) ||
	    mi_dev_emu_add("emu1", &caps, NULL)) {
		fprintf(stderr, "emulated devices: %s\n", mi_last_error());
		return 1;
	}
	make_refs(NULL, ref);
	test_errors();
	test_credibility();
	test_load(NULL, false);
	if (argc == 3) {
		/* the quantized supernet: its layers really run on emu0/emu1 */
		path = argv[2];
		tol = 0.05;
		make_refs("emu1", ref);
		make_refs(NULL, ref_cpu);
		have_cpu_ref = true;
		test_set_devices();
		test_refused();
		test_load("emu0,emu1", true);
		printf("lost: %d outputs within tolerance, not bit-exact\n",
		       atomic_load(&inexact));
	}
	printf("check-live: %s\n", fails ? "FAILED" : "ok");
	return fails ? 1 : 0;
}
