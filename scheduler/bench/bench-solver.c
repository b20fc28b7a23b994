// SPDX-License-Identifier: MIT
/*
 * make bench-live (solver part): solve time P50/P99/max of the
 * hierarchical solver at 10x10, 100x10 and 500x20 (layers x devices)
 * over >= 10,000 solves each, cycling through a pool of random problems
 * (tests/gen.h); then plan quality by the problem's own cost model:
 * makespan and energy of CAS against ONNX Runtime-style greedy and HEFT
 * on the same pool, and against exhaustive search on small cases.
 *
 *   bench-solver [-n SOLVES] [-p POOL] [-r REFINE_PASSES] [-w REFINE_WORK]
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "scheduler.h"
#include "tests/gen.h"

const char *mi_last_error(void);

static double clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double pct(const double *v, size_t n, double q)
{
	size_t i = (size_t)(q * (n - 1) + 0.5);

	return v[i];
}

struct quality {
	double ms[4], en[4];	/* cas, greedy, heft, cas latency-only */
	int n;
};

static struct mi_sched_opts bench_opts = { .refine_passes = 2 };

static int timing(uint32_t L, uint32_t D, int solves, int pool, double tight)
{
	struct gen_problem *g = calloc(pool, sizeof(*g));
	double *t = malloc(solves * sizeof(double));
	double *c = malloc(solves * sizeof(double));
	struct mi_sched_opts lo = bench_opts;
	struct mi_solver *s, *sl;
	struct quality q = { .n = 0 };
	int ret, preempted = 0;

	if (!g || !t || !c)
		return -ENOMEM;
	lo.w_latency = 1;
	lo.w_power = lo.w_reliability = 0;
	ret = mi_solver_create(L, D, &bench_opts, &s);
	if (!ret)
		ret = mi_solver_create(L, D, &lo, &sl);
	if (ret)
		return ret;
	for (int i = 0; i < pool; i++)
		if (gen_problem_make(&g[i], L, D, 1000 + i, tight))
			return -ENOMEM;
	/* warm the caches and the workspace once */
	for (int i = 0; i < pool; i++) {
		struct mi_sched_plan pl = gen_plan(&g[i]);

		ret = mi_solver_solve(s, &g[i].p, NULL, NULL, &pl);
		if (ret) {
			fprintf(stderr, "solve: %s\n", mi_last_error());
			return ret;
		}
	}
	for (int i = 0; i < solves; i++) {
		struct gen_problem *gp = &g[i % pool];
		struct mi_sched_plan pl = gen_plan(gp);
		double c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
		double t0 = clock_ns(CLOCK_MONOTONIC);

		ret = mi_solver_solve(s, &gp->p, NULL, NULL, &pl);
		t[i] = clock_ns(CLOCK_MONOTONIC) - t0;
		c[i] = clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
		if (ret)
			return ret;
	}
	/* solves that lost the CPU: wall clock over CPU time by > 20 us */
	for (int i = 0; i < solves; i++)
		preempted += t[i] - c[i] > 20e3;
	qsort(t, solves, sizeof(double), cmp_d);
	qsort(c, solves, sizeof(double), cmp_d);
	/* quality on the pool: makespan / energy per method */
	for (int i = 0; i < pool; i++) {
		struct mi_sched_plan pl = gen_plan(&g[i]);

		if (mi_solver_solve(s, &g[i].p, NULL, NULL, &pl))
			return -EIO;
		q.ms[0] += pl.makespan_ns, q.en[0] += pl.energy_j;
		if (mi_sched_greedy(s, &g[i].p, NULL, &pl))
			return -EIO;
		q.ms[1] += pl.makespan_ns, q.en[1] += pl.energy_j;
		if (mi_sched_heft(s, &g[i].p, NULL, &pl))
			return -EIO;
		q.ms[2] += pl.makespan_ns, q.en[2] += pl.energy_j;
		if (mi_solver_solve(sl, &g[i].p, NULL, NULL, &pl))
			return -EIO;
		q.ms[3] += pl.makespan_ns, q.en[3] += pl.energy_j;
		q.n++;
	}
	printf("%4ux%-3u %7d  %7.1f %7.1f %8.1f  %7.1f %7.1f %8.1f %5.1f%%   %7.3f %7.3f %7.3f %7.3f   %6.4f %6.4f %6.4f %6.4f\n",
	       L, D, solves, pct(t, solves, 0.5) / 1e3, pct(t, solves, 0.99) / 1e3,
	       t[solves - 1] / 1e3, pct(c, solves, 0.5) / 1e3,
	       pct(c, solves, 0.99) / 1e3, c[solves - 1] / 1e3,
	       100.0 * preempted / solves, q.ms[0] / q.n / 1e6, q.ms[1] / q.n / 1e6,
	       q.ms[2] / q.n / 1e6, q.ms[3] / q.n / 1e6, q.en[0] / q.n,
	       q.en[1] / q.n, q.en[2] / q.n, q.en[3] / q.n);
	for (int i = 0; i < pool; i++)
		gen_problem_free(&g[i]);
	free(g);
	free(t);
	free(c);
	mi_solver_destroy(s);
	mi_solver_destroy(sl);
	return 0;
}

/* Small cases: every method against the exhaustive optimum. */
static int small(uint32_t L, uint32_t D, int cases, const struct mi_sched_opts *o,
		 const char *label)
{
	double gap_sum[3] = { 0 }, gap_max[3] = { 0 };
	struct mi_solver *s;
	int n = 0, opt[3] = { 0 }, ret;

	ret = mi_solver_create(L, D, o, &s);
	if (ret)
		return ret;
	for (int i = 0; i < cases; i++) {
		struct gen_problem g;
		struct mi_sched_plan pl;
		double best, ms[3];

		if (gen_problem_make(&g, L, D, 5000 + i, 0.6))
			return -ENOMEM;
		pl = gen_plan(&g);
		ret = mi_sched_exhaustive(s, &g.p, NULL, 10000000, &pl);
		if (ret) {
			gen_problem_free(&g);
			continue;
		}
		best = pl.makespan_ns;
		if (mi_solver_solve(s, &g.p, NULL, NULL, &pl))
			return -EIO;
		ms[0] = pl.makespan_ns;
		if (mi_sched_greedy(s, &g.p, NULL, &pl))
			return -EIO;
		ms[1] = pl.makespan_ns;
		if (mi_sched_heft(s, &g.p, NULL, &pl))
			return -EIO;
		ms[2] = pl.makespan_ns;
		for (int k = 0; k < 3; k++) {
			double gap = ms[k] / best - 1;

			gap_sum[k] += gap;
			if (gap > gap_max[k])
				gap_max[k] = gap;
			if (gap < 1e-9)
				opt[k]++;
		}
		n++;
		gen_problem_free(&g);
	}
	printf("%3ux%-2u %-14s %4d   ", L, D, label, n);
	for (int k = 0; k < 3; k++)
		printf("  %5.1f%% %5.1f%% %3d%%", 100 * gap_sum[k] / n,
		       100 * gap_max[k], 100 * opt[k] / n);
	printf("\n");
	mi_solver_destroy(s);
	return 0;
}

int main(int argc, char **argv)
{
	int solves = 10000, pool = 100, c;
	struct mi_sched_opts lat_only = { .w_latency = 1, .refine_passes = 2 };

	while ((c = getopt(argc, argv, "n:p:r:w:")) != -1) {
		if (c == 'n')
			solves = atoi(optarg);
		else if (c == 'p')
			pool = atoi(optarg);
		else if (c == 'r')
			bench_opts.refine_passes = atoi(optarg);
		else if (c == 'w')
			bench_opts.refine_work = atoi(optarg);
		else {
			fprintf(stderr, "usage: bench-solver [-n SOLVES] [-p POOL] [-r REFINE_PASSES] [-w REFINE_WORK]\n");
			return 2;
		}
	}
	if (solves < 1 || pool < 1) {
		fprintf(stderr, "bench-solver: -n and -p need a positive count\n");
		return 2;
	}
	printf("solver: solve time (us; wall clock, then the thread's CPU time, which leaves out\n"
	       "preemption on a busy host; preem: share of solves whose wall clock exceeds\n"
	       "their CPU time by > 20 us) over random problems, CAS default weights\n"
	       "(0.7/0.15/0.15, %u refine passes); mean makespan (ms) and energy (J) per\n"
	       "problem by the problem's own cost model (CASlat: latency-only weights)\n",
	       bench_opts.refine_passes);
	printf("%-8s %7s  %7s %7s %8s  %7s %7s %8s %6s   %7s %7s %7s %7s   %6s %6s %6s %6s\n", "LxD",
	       "solves", "P50", "P99", "max", "cpuP50", "cpuP99", "cpu max", "preem",
	       "ms CAS", "greedy", "HEFT", "CASlat", "J CAS", "greedy", "HEFT", "CASlat");
	if (timing(10, 10, solves, pool, 0.6) || timing(100, 10, solves, pool, 0.6) ||
	    timing(500, 20, solves, pool, 0.6)) {
		fprintf(stderr, "bench-solver: %s\n", mi_last_error());
		return 1;
	}
	printf("\noptimality gap vs exhaustive (makespan): mean, max, share optimal\n");
	printf("%-6s %-14s %4s   %-20s %-20s %-20s\n", "LxD", "CAS weights", "n",
	       "  CAS", "  greedy", "  HEFT");
	if (small(6, 3, 200, &lat_only, "latency only") ||
	    small(8, 4, 200, &lat_only, "latency only") ||
	    small(8, 4, 200, NULL, "default") ||
	    small(10, 3, 100, &lat_only, "latency only")) {
		fprintf(stderr, "bench-solver: %s\n", mi_last_error());
		return 1;
	}
	return 0;
}
