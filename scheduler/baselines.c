// SPDX-License-Identifier: MIT
/*
 * Baselines on the same problem and cost model as the solver.
 *
 * Greedy, as ONNX Runtime partitions a graph: execution providers in
 * priority order (here the problem's device order), each claims every
 * node it supports that no earlier provider took, so consecutive nodes
 * form the largest subgraphs; the last provider (the CPU) takes the
 * rest.  Memory is a hard limit: a provider that is full passes the
 * node on.
 *
 * HEFT is in solver.c (the list stage without the composite score).
 *
 * Exhaustive: every placement within the hard limits, the least
 * makespan (ties: less energy, then the first found), by depth-first
 * enumeration in layer order with memory pruning.
 */
#include <errno.h>
#include <float.h>
#include <string.h>

#include "sched-impl.h"

int mi_sched_greedy(struct mi_solver *s, const struct mi_sched_problem *p,
		    const struct mi_sched_dev_state *st,
		    struct mi_sched_plan *plan)
{
	uint32_t D;
	int ret;

	if (!plan || !plan->device || plan->n_layers != p->n_layers)
		return mi_set_error(-EINVAL, "greedy: plan for %u layers, problem has %u",
				    plan ? plan->n_layers : 0, p ? p->n_layers : 0);
	ret = mi_solver_prepare(s, p, st, NULL);
	if (ret)
		return ret;
	D = s->D;
	for (uint32_t l = 0; l < s->L; l++) {
		int bd = -1;

		for (uint64_t c = s->cand[l]; c; c &= c - 1) {
			int d = __builtin_ctzll(c);

			if (s->mem_used[d] + p->mem_bytes[l * D + d] <= s->mem_cap[d]) {
				bd = d;
				break;
			}
		}
		if (bd < 0)
			return mi_set_error(-ENOSPC,
					    "greedy: layer %u finds no provider with room", l);
		s->tmp[l] = bd;
		s->mem_used[bd] += p->mem_bytes[l * D + bd];
	}
	memcpy(plan->device, s->tmp, p->n_layers * sizeof(int32_t));
	mi_solver_cost(s, p, NULL, plan);
	plan->cas = 0;
	plan->moved = 0;
	return 0;
}

struct exh {
	struct mi_solver *s;
	const struct mi_sched_problem *p;
	double best_ms, best_en;
	uint64_t evals;
	bool found;
};

static void exh_leaf(struct exh *x)
{
	struct mi_solver *s = x->s;
	double ms = mi_solver_makespan(s, x->p, NULL, s->tmp), en = 0;

	x->evals++;
	if (ms > x->best_ms * (1 + 1e-12))
		return;
	for (uint32_t l = 0; l < s->L; l++)
		en += s->lat[l * s->D + s->tmp[l]] * x->p->power_w[l * s->D + s->tmp[l]];
	if (x->found && ms >= x->best_ms * (1 - 1e-12) && en >= x->best_en)
		return;
	x->best_ms = ms;
	x->best_en = en;
	x->found = true;
	memcpy(s->best, s->tmp, s->L * sizeof(int32_t));
}

static void exh_dfs(struct exh *x, uint32_t l)
{
	struct mi_solver *s = x->s;
	uint32_t D = s->D;

	if (l == s->L) {
		exh_leaf(x);
		return;
	}
	for (uint64_t c = s->cand[l]; c; c &= c - 1) {
		int d = __builtin_ctzll(c);
		uint64_t need = x->p->mem_bytes[l * D + d];

		if (s->mem_used[d] + need > s->mem_cap[d])
			continue;
		s->mem_used[d] += need;
		s->tmp[l] = d;
		exh_dfs(x, l + 1);
		s->mem_used[d] -= need;
	}
}

int mi_sched_exhaustive(struct mi_solver *s, const struct mi_sched_problem *p,
			const struct mi_sched_dev_state *st, uint64_t max_evals,
			struct mi_sched_plan *plan)
{
	struct exh x = { .s = s, .p = p, .best_ms = DBL_MAX };
	double space = 1;
	int ret;

	if (!plan || !plan->device || plan->n_layers != p->n_layers)
		return mi_set_error(-EINVAL, "exhaustive: plan for %u layers, problem has %u",
				    plan ? plan->n_layers : 0, p ? p->n_layers : 0);
	ret = mi_solver_prepare(s, p, st, NULL);
	if (ret)
		return ret;
	for (uint32_t l = 0; l < s->L; l++)
		space *= __builtin_popcountll(s->cand[l]);
	if (space > (double)max_evals)
		return mi_set_error(-E2BIG, "exhaustive: %.3g placements, limit %llu",
				    space, (unsigned long long)max_evals);
	exh_dfs(&x, 0);
	if (!x.found)
		return mi_set_error(-ENOSPC, "exhaustive: no placement within the devices' memory");
	memcpy(plan->device, s->best, p->n_layers * sizeof(int32_t));
	mi_solver_cost(s, p, NULL, plan);
	plan->cas = 0;
	plan->moved = 0;
	return 0;
}
