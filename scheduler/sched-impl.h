/* SPDX-License-Identifier: MIT */
/* Private to scheduler/: helpers shared by the registry and the solvers. */
#ifndef MI_SCHED_IMPL_H
#define MI_SCHED_IMPL_H

#include <math.h>
#include <stdint.h>

#include "scheduler.h"

/* lib/error.c and lib/debug.c (libmetainfer.a). */
int mi_set_error(int err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
#include "debug.h"

static inline double mi_clamp01(double v)
{
	return v < 0.0 ? 0.0 : v > 1.0 ? 1.0 : v;
}

/* Per-solve view of the problem, prepared once per solve into the
 * solver's workspace (solver.c). */
struct mi_solver {
	uint32_t max_l, max_d;
	struct mi_sched_opts o;
	/* [L * D] effective latency (slowdown applied; < 0 unsupported) */
	double *lat;
	/* [L] upward rank and the priority order (rank descending) */
	double *rank;
	uint32_t *order;
	/* [L] first successor index list (CSR of the reverse DAG) */
	uint32_t *succ_off, *succ;
	uint32_t succ_cap;	/* grown on first use, then kept */
	/* [L] finish time, [D] device free time, used memory */
	double *finish;
	double *dev_free;
	uint64_t *mem_used, *mem_cap;
	/* [L] candidate mask per layer (bit d: supported, fits alone) */
	uint64_t *cand;
	/* [D] memory only some later layers can use (reservation) */
	uint64_t *reserve;
	/* [L] scratch assignment */
	int32_t *tmp, *best, *alt;
	/* [D * D] effective transfer per byte and fixed cost */
	double *xb, *xf;
	double *scratch;	/* [L * D + L + 2 D] */
	double *pm;		/* [L + 1] makespan of positions before i */
	double *fin;		/* [L] finish times of the accepted plan */
	double *price;		/* [D] memory price, ns per byte */
	double *denied;		/* [D] what a denied layer valued memory at */
	struct mi_knap { double dens; uint64_t mem; } *kn;	/* [L] */
	uint32_t L, D;
	double S;		/* streams: a layer holds its device S x lat */
	uint64_t work;		/* layer timings computed (refine budget) */
	uint64_t avail_mask;
};

/* Prepare s for p under st (solver.c): effective latencies, ranks,
 * order, successors, candidate masks.  -EINVAL / -ENOSPC on a bad or
 * infeasible problem. */
int mi_solver_prepare(struct mi_solver *s, const struct mi_sched_problem *p,
		      const struct mi_sched_dev_state *st,
		      const struct mi_sched_base *base);
/* Makespan of assignment a (prepared s), in priority order. */
double mi_solver_makespan(struct mi_solver *s, const struct mi_sched_problem *p,
			  const struct mi_sched_base *base, const int32_t *a);
/* Hard limits of a (prepared s): 0 or -errno with one line. */
int mi_solver_check_limits(struct mi_solver *s,
			   const struct mi_sched_problem *p,
			   const struct mi_sched_base *base, const int32_t *a);
/* Fill plan->makespan_ns / energy_j from a (prepared s). */
void mi_solver_cost(struct mi_solver *s, const struct mi_sched_problem *p,
		    const struct mi_sched_base *base, struct mi_sched_plan *plan);

static inline double mi_xfer_ns(const struct mi_solver *s, uint64_t bytes,
				int a, int b)
{
	if (a == b)
		return 0.0;
	return s->xf[a * s->D + b] + (double)bytes * s->xb[a * s->D + b];
}

#endif /* MI_SCHED_IMPL_H */
