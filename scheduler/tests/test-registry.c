// SPDX-License-Identifier: MIT
/*
 * The hardware state registry: credibility (one odd sample never acts,
 * three do, peers that agree veto, recovery needs hysteresis), flap
 * damping, absent sensors, queue stability, clock alignment on a planted
 * offset and drift, fusion of fast and slow reporters, and the placement
 * that follows (through the planner).
 */
#include <errno.h>
#include <pthread.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler.h"
#include "tests/gen.h"

const char *mi_last_error(void);

static int failures;

#define CHECK(cond, ...)                                                   \
	do {                                                               \
		if (!(cond)) {                                             \
			failures++;                                        \
			printf("FAIL %s:%d: %s: ", __func__, __LINE__, #cond); \
			printf(__VA_ARGS__);                               \
			printf("\n");                                      \
		}                                                          \
	} while (0)

#define MS 1000000LL

struct ev_log {
	struct mi_registry_event ev[512];
	int n;
};

static void log_event(const struct mi_registry_event *ev, void *arg)
{
	struct ev_log *lg = arg;

	if (lg->n < 512)
		lg->ev[lg->n++] = *ev;
}

static int count_events(const struct ev_log *lg, enum mi_registry_event_type t,
			int dev)
{
	int n = 0;

	for (int i = 0; i < lg->n; i++)
		if (lg->ev[i].type == t && (dev < 0 || lg->ev[i].device == dev))
			n++;
	return n;
}

static struct mi_reg_sample sample(int64_t ts, double compute)
{
	struct mi_reg_sample s = { .ts_ns = ts };

	s.present = 1u << MI_REG_COMPUTE;
	s.value[MI_REG_COMPUTE] = compute;
	return s;
}

/* Three comparable NPUs and a CPU; the clocks are the host's. */
static struct mi_registry *make_registry(struct ev_log *lg)
{
	static const char *const names[] = { "npu0", "npu1", "npu2", "cpu" };
	struct mi_registry *reg;

	if (mi_registry_create(NULL, &reg))
		return NULL;
	for (int i = 0; i < 4; i++) {
		struct mi_registry_device_info info = {
			.name = names[i], .klass = i < 3 ? "sim:npu" : "cpu",
		};

		if (mi_registry_add_device(reg, &info, NULL))
			return NULL;
	}
	if (lg && mi_registry_subscribe(reg, log_event, lg))
		return NULL;
	return reg;
}

/* One round of samples at t: every device healthy except dev = v. */
static void round_at(struct mi_registry *reg, int64_t t, int dev, double v)
{
	for (int d = 0; d < 4; d++) {
		struct mi_reg_sample s = sample(t, d == dev ? v : 0.95);

		if (mi_registry_push(reg, d, &s))
			printf("push: %s\n", mi_last_error());
	}
}

static void test_single_vs_three(void)
{
	struct ev_log lg = { .n = 0 };
	struct mi_registry *reg = make_registry(&lg);
	struct mi_sched_dev_state st[4];
	struct mi_device_view v;
	int64_t t = 0;

	for (int i = 0; i < 10; i++)
		round_at(reg, t += 100 * MS, -1, 0);
	int base = lg.n;

	/* one odd sample, then healthy again: nothing */
	round_at(reg, t += 100 * MS, 0, 0.1);
	round_at(reg, t += 100 * MS, -1, 0);
	mi_registry_device(reg, 0, &v);
	CHECK(lg.n == base, "one odd sample raised %d events", lg.n - base);
	CHECK(v.dim[MI_REG_COMPUTE].state == MI_DIM_OK, "state changed");
	mi_registry_solver_state(reg, st, 4);
	CHECK(st[0].slowdown == 1.0, "slowdown %g after one sample", st[0].slowdown);

	/* two odd samples: still nothing */
	round_at(reg, t += 100 * MS, 0, 0.1);
	round_at(reg, t += 100 * MS, 0, 0.1);
	CHECK(lg.n == base, "two odd samples raised %d events", lg.n - base);
	mi_registry_device(reg, 0, &v);
	CHECK(v.dim[MI_REG_COMPUTE].anomalous_run == 2, "run %u",
	      v.dim[MI_REG_COMPUTE].anomalous_run);
	/* the third confirms */
	round_at(reg, t += 100 * MS, 0, 0.1);
	CHECK(count_events(&lg, MI_REG_EV_DEGRADED, 0) == 1, "%d degraded events",
	      count_events(&lg, MI_REG_EV_DEGRADED, 0));
	mi_registry_solver_state(reg, st, 4);
	CHECK(fabs(st[0].slowdown - 10.0) < 1e-9, "slowdown %g, want 10", st[0].slowdown);
	CHECK(st[1].slowdown == 1.0 && st[3].slowdown == 1.0, "peers slowed");

	/* recovery: values in the hysteresis band never recover */
	for (int i = 0; i < 20; i++)
		round_at(reg, t += 100 * MS, 0, 0.6);
	mi_registry_device(reg, 0, &v);
	CHECK(v.dim[MI_REG_COMPUTE].state == MI_DIM_DEGRADED, "recovered at 0.6");
	/* four good samples are not enough, five are */
	for (int i = 0; i < 4; i++)
		round_at(reg, t += 100 * MS, 0, 0.9);
	CHECK(count_events(&lg, MI_REG_EV_RECOVERED, 0) == 0, "recovered after 4");
	round_at(reg, t += 100 * MS, 0, 0.9);
	CHECK(count_events(&lg, MI_REG_EV_RECOVERED, 0) == 1, "not recovered after 5");
	mi_registry_solver_state(reg, st, 4);
	CHECK(st[0].slowdown == 1.0, "slowdown %g after recovery", st[0].slowdown);
	mi_registry_destroy(reg);
}

/* Comparable devices that all drop together do not confirm (a shared
 * cause or a misreporting sensor type); a device without peers does. */
static void test_peers(void)
{
	struct ev_log lg = { .n = 0 };
	struct mi_registry *reg = make_registry(&lg);
	int64_t t = 0;

	for (int i = 0; i < 5; i++)
		round_at(reg, t += 100 * MS, -1, 0);
	for (int i = 0; i < 6; i++) {
		for (int d = 0; d < 3; d++) {
			struct mi_reg_sample s = sample(t, 0.3);

			mi_registry_push(reg, d, &s);
		}
		t += 100 * MS;
	}
	CHECK(count_events(&lg, MI_REG_EV_DEGRADED, -1) == 0,
	      "%d degradations while all peers agree",
	      count_events(&lg, MI_REG_EV_DEGRADED, -1));
	/* the CPU has no peer: the threshold alone decides */
	for (int i = 0; i < 3; i++) {
		struct mi_reg_sample s = sample(t += 100 * MS, 0.3);

		mi_registry_push(reg, 3, &s);
	}
	CHECK(count_events(&lg, MI_REG_EV_DEGRADED, 3) == 1, "peerless cpu not degraded");
	mi_registry_destroy(reg);
}

static void test_flapping(void)
{
	struct ev_log lg = { .n = 0 };
	struct mi_registry *reg = make_registry(&lg);
	struct mi_device_view v;
	int64_t t = 0;
	int transitions;

	/* 3 bad, 5 good, 40 times: undamped that is 80 transitions */
	for (int c = 0; c < 40; c++) {
		for (int i = 0; i < 3; i++)
			round_at(reg, t += 100 * MS, 1, 0.1);
		for (int i = 0; i < 5; i++)
			round_at(reg, t += 100 * MS, 1, 0.95);
	}
	transitions = count_events(&lg, MI_REG_EV_DEGRADED, 1) +
		      count_events(&lg, MI_REG_EV_RECOVERED, 1);
	mi_registry_device(reg, 1, &v);
	CHECK(count_events(&lg, MI_REG_EV_DAMPED, 1) == 1, "damped %d times",
	      count_events(&lg, MI_REG_EV_DAMPED, 1));
	CHECK(transitions <= 5, "%d transitions of a flapping sensor", transitions);
	CHECK(v.dim[MI_REG_COMPUTE].damped, "not damped");
	CHECK(v.dim[MI_REG_COMPUTE].flaps >= 3, "%u flaps recorded",
	      v.dim[MI_REG_COMPUTE].flaps);
	CHECK(v.dim[MI_REG_COMPUTE].last_flap_ns[0] > 0 &&
	      v.dim[MI_REG_COMPUTE].last_flap_ns[0] <= t, "last flap time %lld",
	      (long long)v.dim[MI_REG_COMPUTE].last_flap_ns[0]);
	CHECK(v.reliability < 1.0, "reliability %g ignores flaps", v.reliability);
	/* a quiet flap window ends the damping */
	for (int i = 0; i < 320; i++)
		round_at(reg, t += 100 * MS, 1, 0.95);
	mi_registry_device(reg, 1, &v);
	CHECK(!v.dim[MI_REG_COMPUTE].damped, "still damped after a quiet window");
	mi_registry_destroy(reg);
}

static void test_absent(void)
{
	struct mi_registry *reg = make_registry(NULL);
	struct mi_sched_dev_state st[4];
	struct mi_device_view v;
	double x;

	for (int i = 0; i < 10; i++) {
		struct mi_reg_sample s = sample(i * 100 * MS, 0.9);

		mi_registry_push(reg, 0, &s);
	}
	mi_registry_device(reg, 0, &v);
	CHECK(v.dim[MI_REG_COMPUTE].present, "compute absent");
	for (int k = 1; k < MI_REG_NDIM; k++) {
		CHECK(!v.dim[k].present, "%s present", mi_reg_dim_name(k));
		CHECK(mi_registry_fused(reg, 0, k, 500 * MS, &x) == -ENODATA,
		      "%s fused without data", mi_reg_dim_name(k));
	}
	CHECK(!(v.raw_present & (1u << MI_REG_RAW_TEMP_MC)), "temperature present");
	mi_registry_solver_state(reg, st, 4);
	/* an absent memory sensor is not "no memory" */
	CHECK(st[0].mem_fraction == 1.0 && st[0].slowdown == 1.0,
	      "absent sensors act: mem %g slow %g", st[0].mem_fraction, st[0].slowdown);
	mi_registry_destroy(reg);
}

static void test_queue(void)
{
	static const double steady[] = { 2, 2, 2, 2, 2 };
	static const double stall[] = { 2, 2, 10, 2, 2 };
	struct ev_log lg = { .n = 0 };
	struct mi_registry *reg = make_registry(&lg);
	struct mi_device_view v;
	int64_t t = 0;

	for (int i = 0; i < 4; i++) {
		struct mi_reg_sample s = { .ts_ns = t += 100 * MS };

		s.raw_present = 1u << MI_REG_RAW_QUEUE_DEPTH;
		s.raw[MI_REG_RAW_QUEUE_DEPTH] = steady[i];
		mi_registry_push(reg, 3, &s);
	}
	mi_registry_device(reg, 3, &v);
	CHECK(!v.dim[MI_REG_QUEUE].present, "stability from 4 depths");
	for (int r = 0; r < 3; r++)
		for (int i = 0; i < 5; i++) {
			struct mi_reg_sample s = { .ts_ns = t += 100 * MS };

			s.raw_present = 1u << MI_REG_RAW_QUEUE_DEPTH;
			s.raw[MI_REG_RAW_QUEUE_DEPTH] = r ? stall[i] : steady[(i + 4) % 5];
			mi_registry_push(reg, 3, &s);
			if (!r && i == 0) {
				double q;

				mi_registry_fused(reg, 3, MI_REG_QUEUE, t, &q);
				CHECK(fabs(q - 1.0) < 1e-12, "steady queue stability %g", q);
			}
		}
	mi_registry_device(reg, 3, &v);
	/* every depth "normal" (<= 10), the variance still shows */
	CHECK(v.dim[MI_REG_QUEUE].present, "no queue stability");
	CHECK(count_events(&lg, MI_REG_EV_DEGRADED, 3) >= 1, "intermittent stall unseen");
	mi_registry_destroy(reg);
}

/* Device clock = (host - 7 s) * (1 + 80 ppm) + jitter, pairs delayed by
 * up to 20 us and 15% of them by 3 ms more. */
static void test_clock(void)
{
	struct mi_registry *reg = make_registry(NULL);
	const double drift = 80e-6;
	const int64_t off = 7000 * MS;
	uint64_t seed = 42;
	struct mi_device_view v;
	double worst = 0, x;

	for (int i = 0; i < 64; i++) {
		int64_t host = 1000 * MS + i * 250 * MS;
		int64_t dev = (int64_t)((host - off) * (1 + drift));
		int64_t delay = (int64_t)(20e3 * gen_unif(&seed));

		if (gen_unif(&seed) < 0.15)
			delay += 3 * MS;
		mi_registry_clock_pair(reg, 1, dev, host + delay);
	}
	mi_registry_device(reg, 1, &v);
	CHECK(v.clock.valid, "no fit");
	CHECK(fabs(mi_clock_drift_ppm(&v.clock) - (1 / (1 + drift) - 1) * 1e6) < 2.0,
	      "drift %.2f ppm, want %.2f", mi_clock_drift_ppm(&v.clock),
	      (1 / (1 + drift) - 1) * 1e6);
	for (int64_t host = 9000 * MS; host < 24000 * MS; host += 500 * MS) {
		int64_t dev = (int64_t)((host - off) * (1 + drift));
		double err = fabs((double)(mi_clock_to_host(&v.clock, dev) - host));

		if (err > worst)
			worst = err;
	}
	CHECK(worst < 30e3, "mapping error %.0f ns", worst);
	/* uncompensated, the same stamps are 7 s off */
	CHECK(fabs((double)((int64_t)((9000 * MS - off) * (1 + drift)) - 9000 * MS)) > 6e9,
	      "planted offset too small");

	/* samples in device time land on host time: a slow reporter (1 s)
	 * interpolates between its samples */
	for (int i = 0; i < 3; i++) {
		int64_t host = 20000 * MS + i * 1000 * MS;
		struct mi_reg_sample s = sample((int64_t)((host - off) * (1 + drift)),
						   i == 2 ? 0.4 : 0.8);

		mi_registry_push(reg, 1, &s);
	}
	mi_registry_device(reg, 1, &v);
	CHECK(!v.fast, "1 s reporter smoothed");
	CHECK(mi_registry_fused(reg, 1, MI_REG_COMPUTE, 21500 * MS, &x) == 0 &&
	      fabs(x - 0.6) < 1e-3, "interpolated %g at the midpoint, want 0.6", x);
	mi_registry_destroy(reg);
}

static void test_fast_smoothing(void)
{
	struct mi_registry *reg = make_registry(NULL);
	struct mi_device_view v;
	double x;

	for (int i = 0; i < 50; i++) {
		struct mi_reg_sample s = sample(i * 10 * MS, i == 49 ? 0.2 : 0.9);

		mi_registry_push(reg, 2, &s);
	}
	mi_registry_device(reg, 2, &v);
	CHECK(v.fast, "10 ms reporter not smoothed");
	mi_registry_fused(reg, 2, MI_REG_COMPUTE, 490 * MS, &x);
	/* one spike moves a 300 ms average by 1 - e^(-10/300) of it */
	CHECK(fabs(x - (0.9 - 0.7 * (1 - exp(-10.0 / 300)))) < 1e-6, "fused %g", x);
	mi_registry_destroy(reg);
}

static void test_bad_input(void)
{
	struct mi_registry *reg = make_registry(NULL);
	struct mi_reg_sample s = sample(100 * MS, 1.5);
	struct mi_registry_opts o = { .degrade_below = 0.8, .recover_above = 0.6 };
	struct mi_registry *r2;

	CHECK(mi_registry_push(reg, 0, &s) == -EINVAL, "1.5 accepted");
	CHECK(strstr(mi_last_error(), "outside [0, 1]"), "error '%s'", mi_last_error());
	s.value[0] = NAN;
	CHECK(mi_registry_push(reg, 0, &s) == -EINVAL, "NaN accepted");
	s.value[0] = 0.9;
	CHECK(mi_registry_push(reg, 9, &s) == -EINVAL, "device 9 accepted");
	s.present = 1u << 20;
	CHECK(mi_registry_push(reg, 0, &s) == -EINVAL, "unknown bit accepted");
	s = sample(100 * MS, 0.9);
	CHECK(mi_registry_push(reg, 0, &s) == 0, "good sample: %s", mi_last_error());
	s.ts_ns = 50 * MS;
	CHECK(mi_registry_push(reg, 0, &s) == -EINVAL, "time went back");
	CHECK(mi_registry_create(&o, &r2) == -EINVAL, "inverted hysteresis accepted");
	mi_registry_device_lost(reg, 0, 200 * MS);
	s.ts_ns = 300 * MS;
	CHECK(mi_registry_push(reg, 0, &s) == -ENODEV, "sample of a lost device");
	mi_registry_destroy(reg);
}

/*
 * The placement follows only confirmed state: a two-NPU + CPU problem
 * where npu0 is the fastest; one odd sample leaves the placement as it
 * is, three move work off npu0; device loss leaves every layer placed.
 */
static void test_placement(void)
{
	struct ev_log lg = { .n = 0 };
	struct mi_registry *reg = make_registry(&lg);
	struct gen_problem g;
	struct mi_sched_model m;
	struct mi_planner *pl;
	int32_t before[40];
	int64_t t = 0;
	int on0 = 0, on0_after = 0;

	gen_problem_make(&g, 40, 4, 7, 1.0);
	/* npu0 10x the CPU, npu1/2 2x, all support everything */
	for (uint32_t l = 0; l < 40; l++) {
		g.lat[l * 4 + 0] = 0.1 * g.lat[l * 4 + 3];
		g.lat[l * 4 + 1] = 0.5 * g.lat[l * 4 + 3];
		g.lat[l * 4 + 2] = 0.5 * g.lat[l * 4 + 3];
	}
	for (int d = 0; d < 3; d++)
		g.devices[d].mem_bytes = 64ull << 30;
	m = (struct mi_sched_model){ .problem = &g.p, .device = g.device };
	CHECK(mi_planner_create(reg, NULL, &m, 1, &pl) == 0, "planner: %s", mi_last_error());
	CHECK(mi_planner_update(pl, false) == 1, "first plan");
	memcpy(before, g.device, sizeof(before));
	for (int l = 0; l < 40; l++)
		on0 += g.device[l] == 0;
	CHECK(on0 > 20, "only %d layers on the fastest device", on0);

	for (int i = 0; i < 5; i++)
		round_at(reg, t += 100 * MS, -1, 0);
	mi_planner_update(pl, false);
	round_at(reg, t += 100 * MS, 0, 0.05);
	round_at(reg, t += 100 * MS, -1, 0);
	CHECK(mi_planner_update(pl, false) == 0, "re-planned on one sample");
	CHECK(!memcmp(before, g.device, sizeof(before)), "one sample moved layers");
	for (int i = 0; i < 3; i++)
		round_at(reg, t += 100 * MS, 0, 0.05);
	CHECK(mi_planner_update(pl, false) == 1, "no re-plan after three");
	for (int l = 0; l < 40; l++)
		on0_after += g.device[l] == 0;
	CHECK(on0_after < on0 / 2, "%d of %d layers still on the throttled device",
	      on0_after, on0);

	/* the last-moment adjustment keeps a fresh plan as it is */
	{
		uint32_t moved = 99;

		CHECK(mi_planner_adjust(pl, &moved) == 0 && moved == 0,
		      "adjust moved %u right after a solve", moved);
	}
	/* device loss: the adjustment moves the lost device's layers at
	 * once, then the re-plan; nothing stays on the lost device */
	mi_registry_device_lost(reg, 1, t);
	{
		uint32_t moved = 0, on1 = 0;

		for (int l = 0; l < 40; l++)
			on1 += g.device[l] == 1;
		CHECK(on1 > 0, "nothing on npu1 to fail over");
		CHECK(mi_planner_adjust(pl, &moved) == 0 && moved >= on1,
		      "failover moved %u of %u", moved, on1);
		for (int l = 0; l < 40; l++)
			CHECK(g.device[l] != 1, "layer %d left on the lost device", l);
	}
	CHECK(mi_planner_update(pl, false) == 1, "no re-plan after loss");
	for (int l = 0; l < 40; l++)
		CHECK(g.device[l] >= 0 && g.device[l] != 1 && g.lat[l * 4 + g.device[l]] >= 0,
		      "layer %d on %d", l, g.device[l]);
	mi_planner_destroy(pl);
	gen_problem_free(&g);
	mi_registry_destroy(reg);
}

/* Job failures lower reliability, and CAS then prefers a comparable
 * device that does not fail. */
static void test_reliability(void)
{
	struct mi_registry *reg = make_registry(NULL);
	struct mi_sched_dev_state st[4];

	for (int i = 0; i < 100; i++) {
		mi_registry_job_done(reg, 0, i % 2);
		mi_registry_job_done(reg, 1, true);
	}
	mi_registry_solver_state(reg, st, 4);
	CHECK(fabs(st[0].reliability - (1 - 50.0 / 120)) < 1e-9, "reliability %g",
	      st[0].reliability);
	CHECK(fabs(st[1].reliability - 1.0) < 1e-12, "reliability %g", st[1].reliability);
	mi_registry_destroy(reg);
}

struct pusher {
	struct mi_registry *reg;
	int dev;
	int pushed;
};

static void *push_thread(void *arg)
{
	struct pusher *pu = arg;

	for (int i = 0; i < 3000; i++) {
		/* bursts of 4 bad samples now and then: real transitions */
		struct mi_reg_sample s = sample(i * 10 * MS,
						   (i / 4) % (5 + pu->dev) == 0 ? 0.1 : 0.95);

		if (!mi_registry_push(pu->reg, pu->dev, &s))
			pu->pushed++;
	}
	return NULL;
}

struct counter {
	pthread_mutex_t lock;
	int n;
	uint64_t max_seq;
};

static void count_event(const struct mi_registry_event *ev, void *arg)
{
	struct counter *c = arg;

	pthread_mutex_lock(&c->lock);
	c->n++;
	if (ev->seq > c->max_seq)
		c->max_seq = ev->seq;
	pthread_mutex_unlock(&c->lock);
}

/* Samplers on three threads while the planner re-plans and adjusts on
 * this one: every sample lands, every event is delivered once, and the
 * placements keep the limits. */
static void test_concurrent(void)
{
	struct counter cnt = { PTHREAD_MUTEX_INITIALIZER, 0, 0 };
	struct mi_registry *reg = make_registry(NULL);
	struct pusher pu[3];
	pthread_t th[3];
	struct gen_problem g;
	struct mi_sched_model m;
	struct mi_planner *pl;
	uint64_t seq0;
	int replans = 0;

	gen_problem_make(&g, 60, 4, 21, 0.7);
	g.p.streams = 2;
	m = (struct mi_sched_model){ .problem = &g.p, .device = g.device };
	mi_registry_subscribe(reg, count_event, &cnt);
	seq0 = mi_registry_seq(reg);
	CHECK(mi_planner_create(reg, NULL, &m, 1, &pl) == 0, "%s", mi_last_error());
	for (int i = 0; i < 3; i++) {
		pu[i] = (struct pusher){ reg, i, 0 };
		pthread_create(&th[i], NULL, push_thread, &pu[i]);
	}
	for (int i = 0; i < 300; i++) {
		uint32_t moved;

		replans += mi_planner_update(pl, false) == 1;
		CHECK(mi_planner_adjust(pl, &moved) == 0, "%s", mi_last_error());
	}
	for (int i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	mi_planner_update(pl, false);
	for (int i = 0; i < 3; i++)
		CHECK(pu[i].pushed == 3000, "device %d: %d samples", i, pu[i].pushed);
	CHECK(cnt.n == (int)(mi_registry_seq(reg) - seq0) && cnt.max_seq == mi_registry_seq(reg),
	      "%d events delivered, %llu raised", cnt.n,
	      (unsigned long long)(mi_registry_seq(reg) - seq0));
	CHECK(cnt.n > 10, "only %d events", cnt.n);
	CHECK(replans >= 1, "no re-plan");
	for (int l = 0; l < 60; l++)
		CHECK(g.device[l] >= 0 && g.lat[l * 4 + g.device[l]] >= 0, "layer %d", l);
	/* the planner is gone; its registry goes on */
	mi_planner_destroy(pl);
	CHECK(mi_registry_unsubscribe(reg, count_event, &cnt) == 0, "unsubscribe");
	CHECK(mi_registry_unsubscribe(reg, count_event, &cnt) == -ENOENT, "twice");
	seq0 = mi_registry_seq(reg);
	replans = cnt.n;
	mi_registry_device_lost(reg, 3, 40000 * MS);
	CHECK(mi_registry_seq(reg) == seq0 + 1 && cnt.n == replans,
	      "event after unsubscribe (%d delivered)", cnt.n - replans);
	gen_problem_free(&g);
	mi_registry_destroy(reg);
}

int main(void)
{
	test_single_vs_three();
	test_peers();
	test_flapping();
	test_absent();
	test_queue();
	test_clock();
	test_fast_smoothing();
	test_bad_input();
	test_placement();
	test_reliability();
	test_concurrent();
	if (failures) {
		printf("test-registry: %d failures\n", failures);
		return 1;
	}
	printf("ok   test-registry\n");
	return 0;
}
