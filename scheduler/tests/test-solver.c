// SPDX-License-Identifier: MIT
/*
 * The solver: the cost model on a hand-computed case, hard limits on
 * random problems (checked here, independently of the library), failover
 * on device loss, the last-moment adjustment, several models sharing
 * devices, the optimality gap against exhaustive search on small random
 * cases, determinism, and bad input.
 */
#include <errno.h>
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

/* Hard limits, checked without the library: supported, available,
 * within each device's memory (after other models' bytes). */
static int limits_ok(const struct mi_sched_problem *p, const int32_t *a,
		     const struct mi_sched_dev_state *st, const uint64_t *used0)
{
	uint64_t used[MI_SCHED_MAX_DEVICES] = { 0 };
	uint32_t D = p->n_devices;

	for (uint32_t l = 0; l < p->n_layers; l++) {
		if (a[l] < 0 || (uint32_t)a[l] >= D)
			return 0;
		if (p->lat_ns[l * D + a[l]] < 0)
			return 0;
		if (st && !st[a[l]].available)
			return 0;
		used[a[l]] += p->mem_bytes[l * D + a[l]];
	}
	for (uint32_t d = 0; d < D; d++) {
		double cap = (double)p->devices[d].mem_bytes *
			     (st ? st[d].mem_fraction : 1.0);

		if ((double)(used[d] + (used0 ? used0[d] : 0)) > cap)
			return 0;
	}
	return 1;
}

/*
 * a -> b -> c on two devices: lat a 10/20, b 30/5, c 10/40 (us, dev0/1),
 * out_bytes 1000 at 1 ns/byte + 2 us.  Placement {0, 1, 0}: a ends 10,
 * b starts 10 + 3 = 13, ends 18, c starts 18 + 3 = 21, ends 31 us.
 */
static void test_cost_model(void)
{
	static const uint32_t pa[] = { 0 }, pb[] = { 1 };
	struct mi_sched_layer layers[3] = {
		{ .out_bytes = 1000 }, { pa, 1, 1000 }, { pb, 1, 1000 },
	};
	struct mi_sched_device dev[2] = { { 1 << 20 }, { 1 << 20 } };
	double lat[6] = { 10e3, 20e3, 30e3, 5e3, 10e3, 40e3 };
	double pw[6] = { 1, 2, 1, 2, 1, 2 };
	uint64_t mem[6] = { 1, 1, 1, 1, 1, 1 };
	double xb[4] = { 0, 1, 1, 0 }, xf[4] = { 0, 2e3, 2e3, 0 };
	struct mi_sched_problem p = {
		.n_layers = 3, .n_devices = 2, .layers = layers, .devices = dev,
		.lat_ns = lat, .mem_bytes = mem, .power_w = pw,
		.xfer_ns_per_byte = xb, .xfer_fixed_ns = xf,
	};
	int32_t a[3] = { 0, 1, 0 }, b[3];
	struct mi_sched_plan pl = { .n_layers = 3, .device = a };
	struct mi_solver *s;

	mi_solver_create(8, 2, NULL, &s);
	CHECK(mi_sched_evaluate(s, &p, NULL, NULL, &pl) == 0, "%s", mi_last_error());
	CHECK(fabs(pl.makespan_ns - 31e3) < 1e-6, "makespan %g, want 31000", pl.makespan_ns);
	CHECK(fabs(pl.energy_j - (10e-6 + 10e-6 + 10e-6)) < 1e-12, "energy %g", pl.energy_j);
	/* the exhaustive optimum of this case is this placement (all on 0
	 * takes 50 us, all on 1 65 us) */
	pl.device = b;
	CHECK(mi_sched_exhaustive(s, &p, NULL, 1000, &pl) == 0, "%s", mi_last_error());
	CHECK(!memcmp(a, b, sizeof(a)) && fabs(pl.makespan_ns - 31e3) < 1e-6,
	      "exhaustive %d %d %d in %g", b[0], b[1], b[2], pl.makespan_ns);
	CHECK(mi_solver_solve(s, &p, NULL, NULL, &pl) == 0, "%s", mi_last_error());
	CHECK(fabs(pl.makespan_ns - 31e3) < 1e-6, "CAS makespan %g", pl.makespan_ns);
	/* limits: unsupported, memory */
	lat[3] = MI_SCHED_UNSUPPORTED;
	pl.device = a;
	CHECK(mi_sched_evaluate(s, &p, NULL, NULL, &pl) == -EOPNOTSUPP, "unsupported accepted");
	lat[3] = 5e3;
	mem[3] = 2 << 20;
	CHECK(mi_sched_evaluate(s, &p, NULL, NULL, &pl) == -ENOSPC, "over memory accepted");
	mi_solver_destroy(s);
}

/* Random problems, tight memory: every method keeps every limit. */
static void test_hard_limits(void)
{
	struct mi_solver *s;
	int solved = 0;

	mi_solver_create(200, 12, NULL, &s);
	for (int i = 0; i < 300; i++) {
		uint32_t L = 5 + i % 150, D = 2 + i % 11;
		struct mi_sched_dev_state st[12];
		struct gen_problem g;
		struct mi_sched_plan pl;
		int ret;

		gen_problem_make(&g, L, D, 100 + i, 0.2 + 0.1 * (i % 8));
		pl = gen_plan(&g);
		mi_sched_dev_state_nominal(st, D);
		if (i % 3 == 0) {	/* a throttled, a lost, a short device */
			st[i % (D - 1)].slowdown = 5;
			if (D > 2)
				st[(i + 1) % (D - 1)].available = false;
			st[D - 2].mem_fraction = 0.3;
		}
		ret = mi_solver_solve(s, &g.p, st, NULL, &pl);
		CHECK(ret == 0 || ret == -ENOSPC, "problem %d: %s", i, mi_last_error());
		if (ret == 0) {
			solved++;
			CHECK(limits_ok(&g.p, g.device, st, NULL), "CAS broke a limit on %d", i);
		}
		if (mi_sched_heft(s, &g.p, st, &pl) == 0)
			CHECK(limits_ok(&g.p, g.device, st, NULL), "HEFT broke a limit on %d", i);
		if (mi_sched_greedy(s, &g.p, st, &pl) == 0)
			CHECK(limits_ok(&g.p, g.device, st, NULL), "greedy broke a limit on %d", i);
		gen_problem_free(&g);
	}
	/* the CPU holds everything: every problem has a placement */
	CHECK(solved == 300, "%d of 300 solved", solved);
	/* fewer layers than devices */
	for (int i = 0; i < 30; i++) {
		struct gen_problem g;
		struct mi_sched_plan pl;

		gen_problem_make(&g, 1 + i % 3, 10 + i % 3, 400 + i, 0.5);
		pl = gen_plan(&g);
		CHECK(mi_solver_solve(s, &g.p, NULL, NULL, &pl) == 0, "%s", mi_last_error());
		CHECK(limits_ok(&g.p, g.device, NULL, NULL), "tiny problem %d", i);
		gen_problem_free(&g);
	}
	mi_solver_destroy(s);
}

/* Memory so tight that placing by score alone runs out: the layers
 * only the accelerator runs still get it. */
static void test_reservation(void)
{
	struct mi_solver *s;
	struct gen_problem g;
	struct mi_sched_plan pl;
	int ret;

	gen_problem_make(&g, 30, 2, 3, 1.0);
	/* device 0: fast, 10 units of memory; device 1 (the CPU) lacks the
	 * last 5 layers' op; each layer takes 1 unit */
	for (uint32_t l = 0; l < 30; l++) {
		g.lat[l * 2 + 0] = 1e3;
		g.lat[l * 2 + 1] = l >= 25 ? MI_SCHED_UNSUPPORTED : 50e3;
		g.mem[l * 2 + 0] = g.mem[l * 2 + 1] = 1;
	}
	g.devices[0].mem_bytes = 10;
	mi_solver_create(30, 2, NULL, &s);
	pl = gen_plan(&g);
	ret = mi_solver_solve(s, &g.p, NULL, NULL, &pl);
	CHECK(ret == 0, "%s", mi_last_error());
	CHECK(limits_ok(&g.p, g.device, NULL, NULL), "limits broken");
	g.devices[0].mem_bytes = 4;
	CHECK(mi_solver_solve(s, &g.p, NULL, NULL, &pl) == -ENOSPC, "5 layers in 4 units");
	CHECK(strstr(mi_last_error(), "only device 0"), "error '%s'", mi_last_error());
	mi_solver_destroy(s);
	gen_problem_free(&g);
}

static void test_failover(void)
{
	struct mi_solver *s;
	int cases = 0;

	mi_solver_create(100, 8, NULL, &s);
	for (int i = 0; i < 100; i++) {
		struct mi_sched_dev_state st[8];
		struct gen_problem g;
		struct mi_sched_plan pl;
		int32_t before[100];
		int cnt[8] = { 0 }, lost = 0, on_lost, kept = 1;

		gen_problem_make(&g, 100, 8, 900 + i, 0.8);
		pl = gen_plan(&g);
		if (mi_solver_solve(s, &g.p, NULL, NULL, &pl))
			continue;
		for (int l = 0; l < 100; l++)
			cnt[g.device[l]]++;
		for (int d = 1; d < 7; d++)
			if (cnt[d] > cnt[lost])
				lost = d;
		on_lost = cnt[lost];
		memcpy(before, g.device, sizeof(before));
		mi_sched_dev_state_nominal(st, 8);
		st[lost].available = false;
		if (mi_solver_adjust(s, &g.p, st, NULL, &pl)) {
			CHECK(0, "failover %d: %s", i, mi_last_error());
			continue;
		}
		cases++;
		CHECK(limits_ok(&g.p, g.device, st, NULL), "failover broke a limit on %d", i);
		CHECK(pl.moved >= (uint32_t)on_lost, "moved %u, %d were on the lost device",
		      pl.moved, on_lost);
		/* work not on the lost device mostly stays where it was */
		for (int l = 0; l < 100; l++)
			kept += before[l] != lost && before[l] == g.device[l];
		CHECK(kept > (100 - on_lost) / 2, "failover reshuffled %d", i);
		gen_problem_free(&g);
	}
	CHECK(cases >= 90, "only %d failover cases", cases);
	mi_solver_destroy(s);
}

/* Last-moment adjustment: a 4x slowdown of a busy device moves its
 * layers; a 1.1x one does not (adjust_margin). */
static void test_adjust(void)
{
	struct mi_sched_dev_state st[6];
	struct mi_solver *s;
	struct gen_problem g;
	struct mi_sched_plan pl;
	int cnt[6] = { 0 }, busy = 0;

	gen_problem_make(&g, 60, 6, 77, 1.0);
	mi_solver_create(60, 6, NULL, &s);
	pl = gen_plan(&g);
	mi_solver_solve(s, &g.p, NULL, NULL, &pl);
	for (int l = 0; l < 60; l++)
		cnt[g.device[l]]++;
	for (int d = 1; d < 5; d++)
		if (cnt[d] > cnt[busy])
			busy = d;
	mi_sched_dev_state_nominal(st, 6);
	st[busy].slowdown = 1.1;
	CHECK(mi_solver_adjust(s, &g.p, st, NULL, &pl) == 0, "%s", mi_last_error());
	CHECK(pl.moved == 0, "1.1x moved %u layers", pl.moved);
	st[busy].slowdown = 20;
	CHECK(mi_solver_adjust(s, &g.p, st, NULL, &pl) == 0, "%s", mi_last_error());
	CHECK(pl.moved > 0, "20x moved nothing (%d layers there)", cnt[busy]);
	CHECK(limits_ok(&g.p, g.device, st, NULL), "adjust broke a limit");
	mi_solver_destroy(s);
	gen_problem_free(&g);
}

/*
 * Streams: a chain on two identical accelerators and a slow CPU.  One
 * stream stays on one accelerator (a transfer only costs); eight
 * streams keep a device busy 8x each layer, so the plan spreads over
 * both and beats the single-device plan under the same load.
 */
static void test_streams(void)
{
	struct mi_solver *s;
	struct gen_problem g;
	struct mi_sched_plan pl;
	int32_t one[20];
	int used[3] = { 0 };

	gen_problem_make(&g, 20, 3, 5, 1.0);
	for (uint32_t l = 0; l < 20; l++) {
		g.layers[l].n_preds = l > 0;
		g.preds[l] = l - 1;
		g.layers[l].preds = &g.preds[l];
		g.lat[l * 3 + 0] = g.lat[l * 3 + 1] = 10e3;
		g.lat[l * 3 + 2] = 100e3;
	}
	for (int i = 0; i < 9; i++)
		g.xb[i] = 0, g.xf[i] = i % 4 ? 1e3 : 0;
	for (int d = 0; d < 3; d++)
		g.devices[d].mem_bytes = 64ull << 30;
	mi_solver_create(20, 3, NULL, &s);
	pl = gen_plan(&g);
	CHECK(mi_solver_solve(s, &g.p, NULL, NULL, &pl) == 0, "%s", mi_last_error());
	for (int l = 0; l < 20; l++)
		used[g.device[l]]++;
	CHECK(used[0] == 20 || used[1] == 20, "one stream split %d/%d/%d",
	      used[0], used[1], used[2]);
	g.p.streams = 8;
	CHECK(mi_solver_solve(s, &g.p, NULL, NULL, &pl) == 0, "%s", mi_last_error());
	memset(used, 0, sizeof(used));
	for (int l = 0; l < 20; l++)
		used[g.device[l]]++;
	CHECK(used[0] >= 5 && used[1] >= 5, "eight streams on %d/%d/%d",
	      used[0], used[1], used[2]);
	{
		double ms = pl.makespan_ns;
		struct mi_sched_plan p1 = { .n_layers = 20, .device = one };

		for (int l = 0; l < 20; l++)
			one[l] = 0;
		CHECK(mi_sched_evaluate(s, &g.p, NULL, NULL, &p1) == 0, "%s", mi_last_error());
		CHECK(ms < 0.75 * p1.makespan_ns, "spread %g vs one device %g", ms,
		      p1.makespan_ns);
	}
	mi_solver_destroy(s);
	gen_problem_free(&g);
}

/* Two models, three streams of the first: the second sees the first's
 * memory and load, and both keep the limits together. */
static void test_multi_model(void)
{
	struct gen_problem g1, g2;
	struct mi_sched_model m[2];
	struct mi_planner *pl;
	uint64_t used[6] = { 0 };

	gen_problem_make(&g1, 50, 6, 11, 0.5);
	gen_problem_make(&g2, 30, 6, 12, 0.5);
	/* the second model's devices are the first's */
	memcpy(g2.devices, g1.devices, 6 * sizeof(*g1.devices));
	g1.p.streams = 3;
	m[0] = (struct mi_sched_model){ .problem = &g1.p, .device = g1.device };
	m[1] = (struct mi_sched_model){ .problem = &g2.p, .device = g2.device };
	CHECK(mi_planner_create(NULL, NULL, m, 2, &pl) == 0, "%s", mi_last_error());
	CHECK(mi_planner_update(pl, false) == 1, "%s", mi_last_error());
	CHECK(mi_planner_update(pl, false) == 0, "re-planned without a change");
	CHECK(mi_planner_update(pl, true) == 1, "forced update did not solve");
	CHECK(mi_planner_replans(pl) == 2, "%llu replans",
	      (unsigned long long)mi_planner_replans(pl));
	for (int l = 0; l < 50; l++)
		used[g1.device[l]] += g1.mem[l * 6 + g1.device[l]];
	CHECK(limits_ok(&g1.p, g1.device, NULL, NULL), "model 1 limits");
	CHECK(limits_ok(&g2.p, g2.device, NULL, used), "model 2 over the shared memory");
	mi_planner_destroy(pl);
	gen_problem_free(&g1);
	gen_problem_free(&g2);
}

/*
 * Optimality gap on small random cases (6-8 layers, 3-4 devices), CAS
 * with latency-only weights against the exhaustive minimum makespan.
 * The bound stated in Documentation/scheduler.rst: mean gap <= 10%, and
 * CAS never worse on average than HEFT.
 */
static void test_gap(void)
{
	struct mi_sched_opts o = { .w_latency = 1, .refine_passes = 2 };
	double gap = 0, gap_heft = 0, worst = 0;
	struct mi_solver *s;
	int n = 0;

	mi_solver_create(8, 4, &o, &s);
	for (int i = 0; i < 200; i++) {
		uint32_t L = 6 + i % 3, D = 3 + i % 2;
		struct gen_problem g;
		struct mi_sched_plan pl;
		double best;

		gen_problem_make(&g, L, D, 5000 + i, 0.6);
		pl = gen_plan(&g);
		if (mi_sched_exhaustive(s, &g.p, NULL, 1 << 20, &pl)) {
			gen_problem_free(&g);
			continue;
		}
		best = pl.makespan_ns;
		mi_solver_solve(s, &g.p, NULL, NULL, &pl);
		CHECK(pl.makespan_ns >= best * (1 - 1e-9), "CAS %g beat the optimum %g",
		      pl.makespan_ns, best);
		gap += pl.makespan_ns / best - 1;
		if (pl.makespan_ns / best - 1 > worst)
			worst = pl.makespan_ns / best - 1;
		mi_sched_heft(s, &g.p, NULL, &pl);
		gap_heft += pl.makespan_ns / best - 1;
		n++;
		gen_problem_free(&g);
	}
	gap /= n;
	gap_heft /= n;
	printf("     optimality gap over %d cases: CAS mean %.1f%% (max %.1f%%), HEFT mean %.1f%%\n",
	       n, 100 * gap, 100 * worst, 100 * gap_heft);
	CHECK(n >= 190, "%d cases", n);
	CHECK(gap <= 0.10, "mean gap %.1f%% over the 10%% bound", 100 * gap);
	CHECK(gap <= gap_heft + 1e-12, "CAS %.3f worse than HEFT %.3f", gap, gap_heft);
	mi_solver_destroy(s);
}

static void test_determinism(void)
{
	struct mi_solver *s1, *s2;

	mi_solver_create(500, 20, NULL, &s1);
	mi_solver_create(500, 20, NULL, &s2);
	for (int i = 0; i < 20; i++) {
		uint32_t L = 10 + 49 * i, D = 2 + i % 19;
		struct gen_problem g;
		struct mi_sched_plan p1, p2;
		int32_t *a = calloc(L, sizeof(int32_t));

		gen_problem_make(&g, L, D, 31 + i, 0.5);
		p1 = gen_plan(&g);
		p2 = (struct mi_sched_plan){ .n_layers = L, .device = a };
		mi_solver_solve(s1, &g.p, NULL, NULL, &p1);
		/* a used workspace, another problem in between */
		if (i)
			mi_solver_solve(s2, &g.p, NULL, NULL, &p2);
		mi_solver_solve(s2, &g.p, NULL, NULL, &p2);
		CHECK(!memcmp(g.device, a, L * sizeof(int32_t)) &&
		      p1.makespan_ns == p2.makespan_ns && p1.cas == p2.cas,
		      "%ux%u differs between runs", L, D);
		free(a);
		gen_problem_free(&g);
	}
	mi_solver_destroy(s1);
	mi_solver_destroy(s2);
}

static void test_bad_input(void)
{
	struct mi_solver *s;
	struct gen_problem g;
	struct mi_sched_plan pl;
	struct mi_sched_dev_state st[3];
	uint32_t bad_pred = 5;

	CHECK(mi_solver_create(10, 65, NULL, &s) == -EINVAL, "65 devices");
	mi_solver_create(10, 3, NULL, &s);
	gen_problem_make(&g, 10, 3, 1, 1.0);
	pl = gen_plan(&g);
	g.layers[3].preds = &bad_pred;
	g.layers[3].n_preds = 1;
	CHECK(mi_solver_solve(s, &g.p, NULL, NULL, &pl) == -EINVAL, "cycle accepted");
	CHECK(strstr(mi_last_error(), "topological"), "error '%s'", mi_last_error());
	gen_problem_free(&g);
	gen_problem_make(&g, 10, 3, 1, 1.0);
	pl = gen_plan(&g);
	for (int d = 0; d < 3; d++)
		g.lat[4 * 3 + d] = MI_SCHED_UNSUPPORTED;
	CHECK(mi_solver_solve(s, &g.p, NULL, NULL, &pl) == -ENOSPC, "unplaceable layer");
	g.lat[4 * 3 + 2] = 5e3;
	mi_sched_dev_state_nominal(st, 3);
	st[2].available = false;
	CHECK(mi_solver_solve(s, &g.p, st, NULL, &pl) == -ENOSPC, "only on a lost device");
	mi_sched_dev_state_nominal(st, 3);
	st[1].reliability = NAN;
	CHECK(mi_solver_solve(s, &g.p, st, NULL, &pl) == -EINVAL, "NaN reliability");
	st[1].reliability = 1;
	st[0].mem_fraction = 1.5;
	CHECK(mi_solver_solve(s, &g.p, st, NULL, &pl) == -EINVAL, "memory share 1.5");
	g.lat[4 * 3 + 2] = NAN;
	CHECK(mi_solver_solve(s, &g.p, NULL, NULL, &pl) == -EINVAL, "NaN latency");
	g.lat[4 * 3 + 2] = 5e3;
	pl.n_layers = 9;
	CHECK(mi_solver_solve(s, &g.p, NULL, NULL, &pl) == -EINVAL, "short plan");
	gen_problem_free(&g);
	gen_problem_make(&g, 11, 3, 1, 1.0);
	pl = gen_plan(&g);
	CHECK(mi_solver_solve(s, &g.p, NULL, NULL, &pl) == -E2BIG, "over the workspace");
	gen_problem_free(&g);
	gen_problem_make(&g, 10, 3, 1, 1.0);
	pl = gen_plan(&g);
	CHECK(mi_sched_exhaustive(s, &g.p, NULL, 10, &pl) == -E2BIG, "exhaustive limit");
	gen_problem_free(&g);
	mi_solver_destroy(s);
}

int main(void)
{
	test_cost_model();
	test_hard_limits();
	test_reservation();
	test_failover();
	test_adjust();
	test_multi_model();
	test_streams();
	test_gap();
	test_determinism();
	test_bad_input();
	if (failures) {
		printf("test-solver: %d failures\n", failures);
		return 1;
	}
	printf("ok   test-solver\n");
	return 0;
}
