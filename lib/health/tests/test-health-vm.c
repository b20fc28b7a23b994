// SPDX-License-Identifier: GPL-2.0-only
/*
 * lib/health against a real simulated chip, inside the test VM
 * (make check-health-vm, about a minute under TCG):
 *
 *   tools/vm/vmrun -M kernel/metainfer.ko:job_timeout_ms=2000 \
 *           -M kernel/sim/metainfer_sim.ko -- build/lib/health/tests/test-health-vm
 *
 * The chip is a slow, hot dsp-nchw (a 16x16x16 int8 gemm models 64 ms at
 * 65 mW).  The test opens its render node itself and gives lib/health a
 * struct mi_dev whose ops table reads GET_COUNTERS and DEVICE_LOST, then
 * runs the sampler thread (50 ms) through these phases:
 *
 *   idle    no jobs: thermal headroom near 1, compute readiness near 1
 *   load    jobs back to back: busy time, lower readiness, warmer chip
 *   hot     rth_mc_per_w raised live 8x, same load: the chip heats to
 *           its throttle point, thermal headroom and power budget fall,
 *           throttling lowers compute readiness
 *   hang    fail_hang: the job times out, that interval's readiness is 0
 *   removed del_device with the file open: vectors say gone, no dimension
 *
 * and checks that fdinfo sees this process as the node's client.
 *
 * TAP output; exit 0 only if all passed.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "mi_test.h"
#include "device/device.h"
#include "health/health.h"

#define SIM_ID 61
#define MAXV 4096

static int ntest, nfail;

static void ok(int cond, const char *fmt, ...)
{
	va_list ap;

	ntest++;
	if (!cond)
		nfail++;
	printf("%s %d - ", cond ? "ok" : "not ok", ntest);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

/* ---- the device: a render node read through GET_COUNTERS -------------- */
struct rdev {
	struct mi_dev dev;
	int fd;
};

static int r_counters(struct mi_dev *d, struct mi_dev_counters *c)
{
	struct rdev *r = (struct rdev *)d;
	struct drm_metainfer_get_counters k;
	int ret = mi_counters(r->fd, 0, &k);

	if (ret)
		return ret;
	memset(c, 0, sizeof(*c));
	c->busy_ns = k.busy_ns;
	c->jobs_completed = k.jobs_completed;
	c->jobs_failed = k.jobs_failed;
	c->jobs_timed_out = k.jobs_timed_out;
	c->macs = k.macs;
	c->dma_bytes_in = k.dma_bytes_in;
	c->dma_bytes_out = k.dma_bytes_out;
	c->stall_ns = k.stall_ns;
	c->queue_wait_ns = k.queue_wait_ns;
	c->temperature_mc = k.temp_mc;
	c->power_mw = k.power_mw;
	c->clock_khz = k.clock_khz;
	c->queue_depth = k.queue_depth;
	c->valid = k.valid;
	c->throttle = k.throttle;
	return 0;
}

static int r_alive(struct mi_dev *d)
{
	struct rdev *r = (struct rdev *)d;
	uint64_t lost = 0;

	if (mi_get_param(r->fd, DRM_METAINFER_PARAM_DEVICE_LOST, 0, &lost))
		return 0;
	return !lost;
}

static const struct mi_dev_ops r_ops = {
	.counters = r_counters,
	.alive = r_alive,
};

static int rdev_open(struct rdev *r, int minor)
{
	uint64_t v = 0;

	memset(r, 0, sizeof(*r));
	r->fd = mi_open_minor(minor);
	if (r->fd < 0)
		return r->fd;
	r->dev.ops = &r_ops;
	r->dev.kind = MI_DEV_KERNEL;
	r->dev.index = 1;
	snprintf(r->dev.name, sizeof(r->dev.name), "npu0");
	snprintf(r->dev.node, sizeof(r->dev.node), "/dev/dri/renderD%d", minor);
	mi_get_param(r->fd, DRM_METAINFER_PARAM_CLOCK_KHZ, 0, &v);
	r->dev.caps.clock_khz = v;
	mi_get_param(r->fd, DRM_METAINFER_PARAM_DMA_BW, 0, &v);
	r->dev.caps.dma_bw = v;
	mi_get_param(r->fd, DRM_METAINFER_PARAM_NUM_QUEUES, 0, &v);
	r->dev.caps.num_queues = v;
	return 0;
}

/* ---- the record of the sampler's rounds -------------------------------- */
enum phase { P_IDLE, P_LOAD, P_HOT, P_HANG, P_GONE, P_COUNT };
static const char *const phase_names[P_COUNT] = { "idle", "load", "hot",
						  "hang", "removed" };

static pthread_mutex_t rec_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mi_health_vec rec[MAXV];
static int rec_phase[MAXV], nrec;
static volatile int phase;

static void record(const struct mi_health_vec *v, int n, void *arg)
{
	pthread_mutex_lock(&rec_lock);
	for (int i = 0; i < n && nrec < MAXV; i++) {
		if (v[i].dev_index != 1)
			continue;
		rec_phase[nrec] = phase;
		rec[nrec++] = v[i];
	}
	pthread_mutex_unlock(&rec_lock);
}

struct stat_ {
	int n, nd;
	double min, max, sum;
};

/* min / max / mean of dimension d over phase p (present samples only) */
static struct stat_ dim_stat(int p, int d)
{
	struct stat_ s = { 0, 0, 2, -1, 0 };

	for (int i = 0; i < nrec; i++) {
		if (rec_phase[i] != p)
			continue;
		s.n++;
		if (!mi_health_has(&rec[i], d))
			continue;
		s.nd++;
		s.sum += rec[i].v[d];
		if (rec[i].v[d] < s.min)
			s.min = rec[i].v[d];
		if (rec[i].v[d] > s.max)
			s.max = rec[i].v[d];
	}
	return s;
}

static double mean(struct stat_ s)
{
	return s.nd ? s.sum / s.nd : NAN;
}

/* ---- the load: 16x16x16 int8 gemms back to back ------------------------ */
static int run_gemms(int fd, int n, int64_t timeout_ms, int64_t *status)
{
	struct drm_metainfer_op_gemm g;
	uint32_t sa[2] = { 16, 16 }, sb[2] = { 16, 16 }, so[2] = { 16, 16 };
	uint32_t bo, ctx;
	struct mi_stream s;
	uint64_t seq = 0;
	void *map;
	int ret;

	map = mi_bo_new(fd, 16384, &bo);
	if (!map)
		return -ENOMEM;
	ret = mi_ctx_create(fd, 0, DRM_METAINFER_PRIORITY_NORMAL, &ctx);
	if (ret)
		goto out;
	memset(&g, 0, sizeof(g));
	g.hdr.op = DRM_METAINFER_OP_GEMM;
	g.a = mi_tensor(0, DRM_METAINFER_DTYPE_INT8, DRM_METAINFER_LAYOUT_PLAIN, 0, 2, sa);
	g.b = mi_tensor(0, DRM_METAINFER_DTYPE_INT8, DRM_METAINFER_LAYOUT_PLAIN, 4096, 2, sb);
	g.output = mi_tensor(0, DRM_METAINFER_DTYPE_INT32, DRM_METAINFER_LAYOUT_PLAIN,
			     8192, 2, so);
	mi_stream_init(&s);
	mi_stream_add(&s, &g, sizeof(g));
	mi_stream_finish(&s);
	/* two in flight at a time keep the array busy and the queue moving */
	for (int i = 0; i < n && !ret; i++) {
		ret = mi_submit(fd, ctx, &bo, 1, s.buf, s.len, &seq);
		if (!ret && i % 2)
			ret = mi_wait(fd, ctx, seq, timeout_ms, status);
	}
	if (!ret)
		ret = mi_wait(fd, ctx, seq, timeout_ms, status);
	mi_stream_free(&s);
	mi_ctx_destroy(fd, ctx);
out:
	munmap(map, 16384);
	mi_bo_close(fd, bo);
	return ret;
}

static void set_personality(int minor, const char *kv)
{
	char path[128];

	snprintf(path, sizeof(path), "/sys/class/drm/renderD%d/device/personality",
		 minor);
	if (mi_write_file(path, kv))
		printf("# cannot write '%s' to %s\n", kv, path);
}

int main(int argc, char **argv)
{
	struct mi_health_opts o = { .period_ms = 50, .ring = 16,
				    .cb = record };
	struct mi_dev *devs[2];
	struct mi_dev *cpu;
	struct mi_health_vec last[2];
	struct mi_health *h;
	struct stat_ s[P_COUNT][MI_HEALTH_NDIM];
	struct rdev r;
	int64_t st = 0;
	int minor, ret, hang_zero = 0, gone = 0, gone_present = 0;
	double t_max_hot = 0, t_max_load = 0;
	int throttled = 0, clients = 0, client_mem = 0;

	if (!mi_sim_present()) {
		printf("1..0 # SKIP metainfer_sim is not loaded\n");
		return 0;
	}
	ret = mi_sim_new(SIM_ID, "dsp-nchw",
			 "clock_hz=1000 fj_per_mac=1000000000 rth_mc_per_w=250000 "
			 "tau_ms=50 throttle_mc=60000 idle_mw=1");
	minor = mi_sim_minor(SIM_ID);
	ok(!ret && minor >= 0, "sim chip %d created (renderD%d)", SIM_ID, minor);
	if (ret || minor < 0 || rdev_open(&r, minor)) {
		printf("Bail out! no chip\n");
		return 1;
	}
	cpu = mi_dev_get(0);
	devs[0] = cpu;
	devs[1] = &r.dev;
	ret = mi_health_create(devs, 2, &o, &h);
	ok(!ret, "sampler over the CPU and the chip");
	if (ret)
		return 1;

	phase = P_IDLE;
	mi_health_start(h);
	usleep(500000);

	phase = P_LOAD;
	ret = run_gemms(r.fd, 10, 10000, &st);
	ok(!ret && !st, "load: 10 gemms (64 ms modelled each) succeed");

	phase = P_HOT;
	/* thermal resistance x8: 65 mW now settles at 155 C, far above the
	 * 60 C throttle point */
	set_personality(minor, "rth_mc_per_w=2000000");
	ret = run_gemms(r.fd, 10, 10000, &st);
	ok(!ret && !st, "hot: 10 gemms after the live personality change succeed");

	phase = P_HANG;
	set_personality(minor, "rth_mc_per_w=250000");
	mi_sim_knob(SIM_ID, "fail_hang", 1);
	ret = run_gemms(r.fd, 1, 10000, &st);
	ok(!ret && st == -ETIMEDOUT, "hang: the job times out (status %lld)",
	   (long long)st);
	usleep(300000);

	phase = P_GONE;
	ok(!mi_sim_del(SIM_ID), "del_device with the render node open");
	usleep(300000);
	mi_health_stop(h);
	mi_health_latest(h, 1, last, 1);

	pthread_mutex_lock(&rec_lock);
	for (int p = 0; p < P_COUNT; p++)
		for (int d = 0; d < MI_HEALTH_NDIM; d++)
			s[p][d] = dim_stat(p, d);
	for (int i = 0; i < nrec; i++) {
		const struct mi_health_vec *v = &rec[i];

		if (rec_phase[i] == P_HANG && v->raw[MI_HRAW_JOBS_TIMED_OUT] > 0 &&
		    mi_health_has(v, MI_HEALTH_COMPUTE) && v->v[MI_HEALTH_COMPUTE] == 0)
			hang_zero++;
		if (rec_phase[i] == P_GONE && (v->flags & MI_HEALTH_F_GONE)) {
			gone++;
			gone_present |= v->present;
		}
		if (rec_phase[i] == P_HOT && v->raw[MI_HRAW_TEMP_MC] > t_max_hot)
			t_max_hot = v->raw[MI_HRAW_TEMP_MC];
		if (rec_phase[i] == P_LOAD && v->raw[MI_HRAW_TEMP_MC] > t_max_load)
			t_max_load = v->raw[MI_HRAW_TEMP_MC];
		if (rec_phase[i] == P_HOT && v->raw[MI_HRAW_THROTTLE] > 0)
			throttled++;
		if (rec_phase[i] == P_IDLE && v->raw[MI_HRAW_CLIENTS] >= 1)
			clients++;
		if ((rec_phase[i] == P_LOAD || rec_phase[i] == P_HOT) &&
		    v->raw[MI_HRAW_CLIENT_MEM_KB] >= 16)
			client_mem++;
	}
	pthread_mutex_unlock(&rec_lock);

	for (int p = 0; p < P_COUNT; p++) {
		printf("# %-7s %3d samples:", phase_names[p], s[p][0].n);
		for (int d = 0; d < MI_HEALTH_NDIM; d++)
			if (s[p][d].nd)
				printf(" %s %.2f..%.2f", mi_health_dim_names[d],
				       s[p][d].min, s[p][d].max);
		printf("\n");
	}
	printf("# max temperature: load %.1f C, hot %.1f C; %d throttled samples\n",
	       t_max_load / 1000, t_max_hot / 1000, throttled);

	ok(s[P_IDLE][MI_HEALTH_THERMAL].nd >= 3 &&
		   s[P_IDLE][MI_HEALTH_THERMAL].min > 0.9,
	   "idle: thermal headroom %.2f (all six sensors: %s)",
	   s[P_IDLE][MI_HEALTH_THERMAL].min,
	   s[P_IDLE][MI_HEALTH_POWER].nd && s[P_IDLE][MI_HEALTH_QUEUE].nd &&
			   s[P_IDLE][MI_HEALTH_COMPUTE].nd &&
			   s[P_IDLE][MI_HEALTH_BANDWIDTH].nd &&
			   s[P_IDLE][MI_HEALTH_MEMORY].nd ? "present" : "MISSING");
	ok(s[P_IDLE][MI_HEALTH_COMPUTE].nd &&
		   mean(s[P_IDLE][MI_HEALTH_COMPUTE]) > 0.9,
	   "idle: compute readiness %.2f", mean(s[P_IDLE][MI_HEALTH_COMPUTE]));
	ok(s[P_LOAD][MI_HEALTH_COMPUTE].nd &&
		   mean(s[P_LOAD][MI_HEALTH_COMPUTE]) <
			   mean(s[P_IDLE][MI_HEALTH_COMPUTE]) - 0.1,
	   "load: compute readiness falls (mean %.2f -> %.2f)",
	   mean(s[P_IDLE][MI_HEALTH_COMPUTE]), mean(s[P_LOAD][MI_HEALTH_COMPUTE]));
	ok(s[P_HOT][MI_HEALTH_THERMAL].nd &&
		   s[P_HOT][MI_HEALTH_THERMAL].min <
			   s[P_LOAD][MI_HEALTH_THERMAL].min - 0.3 &&
		   s[P_HOT][MI_HEALTH_THERMAL].min < 0.2,
	   "hot: thermal headroom falls (min %.2f under load -> %.2f hot)",
	   s[P_LOAD][MI_HEALTH_THERMAL].min, s[P_HOT][MI_HEALTH_THERMAL].min);
	ok(s[P_HOT][MI_HEALTH_POWER].nd &&
		   s[P_HOT][MI_HEALTH_POWER].min < s[P_LOAD][MI_HEALTH_POWER].min,
	   "hot: power budget shrinks with the thermal resistance (min %.2f -> %.2f)",
	   s[P_LOAD][MI_HEALTH_POWER].min, s[P_HOT][MI_HEALTH_POWER].min);
	ok(throttled > 0, "hot: the chip throttles (%d samples)", throttled);
	ok(clients > 0 && client_mem > 0,
	   "fdinfo: this process is a client (%d idle samples), its 16 KiB buffer "
	   "counted under load (%d samples)", clients, client_mem);
	ok(hang_zero > 0, "hang: the interval with the timeout has compute readiness 0");
	ok(gone > 0 && gone_present == 0 && (last[0].flags & MI_HEALTH_F_GONE),
	   "removed: %d vectors flagged gone, no dimension present", gone);
	mi_health_destroy(h);
	close(r.fd);
	printf("1..%d\n", ntest);
	return nfail ? 1 : 0;
}
