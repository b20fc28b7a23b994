// SPDX-License-Identifier: MIT
/*
 * The hierarchical solver.
 *
 *  1. Feasible device sets.  Per layer a bit mask of the devices that
 *     are available, support it and have room for it at all; memory that
 *     layers with a single candidate need is reserved on that device, so
 *     the later stages cannot starve them.  An empty mask is -ENOSPC.
 *     Memory prices: a device whose memory cannot hold every layer that
 *     runs faster there gets a price per byte (memory_prices()).
 *  2. Layer assignment.  Layers in upward-rank order (the critical path
 *     first; a topological order); for each, every candidate with room
 *     gets the composite score
 *         CAS = w1 (1 - nl) + w2 (1 - ne) + w3 reliability
 *     where 1 - nl = c_min / c_d over the candidates' finish-time
 *     increments c_d (device queue, input transfers, latency, memory
 *     price x bytes) and 1 - ne the same over the layer's energy (power
 *     x latency: a slow low-power device does not save energy); the best
 *     CAS wins (ties: lower device index).  The pass repeats with higher
 *     prices while it had to deny a layer its fastest device
 *     (price_loop()).  Then refinement (refine()) walks the critical
 *     path and moves single layers, or a layer plus one it evicts from a
 *     full device, when the plan's objective
 *         J = w1 makespan / makespan0 + w2 energy / energy0
 *             + w3 (1 - latency-weighted reliability)
 *     drops; its work is bounded (refine_work x layers re-timed).
 *  3. Last-moment adjustment (mi_solver_adjust): the plan against the
 *     latest state, layer by layer: off unavailable devices (failover),
 *     off much slower ones (adjust_margin), never past a hard limit.
 *
 * The cost model (the problem's own, used by every method and by the
 * exhaustive search): devices run their layers one at a time in rank
 * order; a layer starts when its device is free and all inputs arrived.
 * The workspace is allocated once (mi_solver_create); a solve does not
 * allocate unless a problem has more than 8 inputs per layer on average.
 * Everything is deterministic: no randomness, ties broken by index.
 */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sched-impl.h"

static void opts_defaults(struct mi_sched_opts *o)
{
	if (!o->w_latency && !o->w_power && !o->w_reliability) {
		o->w_latency = 0.7;
		o->w_power = 0.15;
		o->w_reliability = 0.15;
	}
	if (!o->adjust_margin)
		o->adjust_margin = 0.2;
	if (!o->refine_work)
		o->refine_work = 256;
}

int mi_solver_create(uint32_t max_layers, uint32_t max_devices,
		     const struct mi_sched_opts *opts, struct mi_solver **sp)
{
	struct mi_solver *s;
	size_t L = max_layers, D = max_devices;

	*sp = NULL;
	if (!L || !D || D > MI_SCHED_MAX_DEVICES || L > (1u << 24))
		return mi_set_error(-EINVAL, "solver: %u layers x %u devices (1..%d devices)",
				    max_layers, max_devices, MI_SCHED_MAX_DEVICES);
	s = calloc(1, sizeof(*s));
	if (!s)
		return mi_set_error(-ENOMEM, "solver: out of memory");
	s->max_l = max_layers;
	s->max_d = max_devices;
	if (opts) {
		s->o = *opts;
	} else {
		s->o.refine_passes = 2;
	}
	opts_defaults(&s->o);
	if (s->o.w_latency < 0 || s->o.w_power < 0 || s->o.w_reliability < 0) {
		free(s);
		return mi_set_error(-EINVAL, "solver: negative weight");
	}
	s->lat = malloc(L * D * sizeof(double));
	s->rank = malloc(L * sizeof(double));
	s->order = malloc(L * sizeof(uint32_t));
	s->succ_off = malloc((L + 1) * sizeof(uint32_t));
	/* edges: room for 8 inputs a layer, grown if a problem has more */
	s->succ_cap = max_layers * 8;
	s->succ = malloc(L * 8 * sizeof(uint32_t));
	s->finish = malloc(L * sizeof(double));
	s->dev_free = malloc(D * sizeof(double));
	s->mem_used = malloc(D * sizeof(uint64_t));
	s->mem_cap = malloc(D * sizeof(uint64_t));
	s->cand = malloc(L * sizeof(uint64_t));
	s->reserve = malloc(D * sizeof(uint64_t));
	s->tmp = malloc(L * sizeof(int32_t));
	s->best = malloc(L * sizeof(int32_t));
	s->xb = malloc(D * D * sizeof(double));
	s->xf = malloc(D * D * sizeof(double));
	/* snapshots of dev_free before each position, then L + D scratch */
	s->scratch = malloc((L * D + L + D + D) * sizeof(double));
	s->pm = malloc((L + 1) * sizeof(double));
	s->fin = malloc(L * sizeof(double));
	s->price = malloc(D * sizeof(double));
	s->kn = malloc(L * sizeof(*s->kn));
	s->alt = malloc(L * sizeof(int32_t));
	s->denied = malloc(D * sizeof(double));
	if (!s->lat || !s->rank || !s->order || !s->succ_off || !s->succ || !s->finish ||
	    !s->dev_free || !s->mem_used || !s->mem_cap || !s->cand ||
	    !s->reserve || !s->tmp || !s->best || !s->xb || !s->xf ||
	    !s->scratch || !s->pm || !s->fin || !s->price || !s->kn || !s->alt || !s->denied) {
		mi_solver_destroy(s);
		return mi_set_error(-ENOMEM, "solver: out of memory");
	}
	*sp = s;
	return 0;
}

void mi_solver_destroy(struct mi_solver *s)
{
	if (!s)
		return;
	free(s->lat);
	free(s->rank);
	free(s->order);
	free(s->succ_off);
	free(s->succ);
	free(s->finish);
	free(s->dev_free);
	free(s->mem_used);
	free(s->mem_cap);
	free(s->cand);
	free(s->reserve);
	free(s->tmp);
	free(s->best);
	free(s->xb);
	free(s->xf);
	free(s->scratch);
	free(s->pm);
	free(s->fin);
	free(s->price);
	free(s->kn);
	free(s->alt);
	free(s->denied);
	free(s);
}

int mi_sched_problem_check(const struct mi_sched_problem *p)
{
	if (!p || !p->n_layers || !p->n_devices || !p->layers ||
	    !p->devices || !p->lat_ns || !p->mem_bytes || !p->power_w ||
	    !p->xfer_ns_per_byte)
		return mi_set_error(-EINVAL, "sched: a problem needs layers, devices and every per-device table");
	if (p->n_devices > MI_SCHED_MAX_DEVICES)
		return mi_set_error(-EINVAL, "sched: %u devices (at most %d)",
				    p->n_devices, MI_SCHED_MAX_DEVICES);
	for (uint32_t l = 0; l < p->n_layers; l++) {
		const struct mi_sched_layer *ly = &p->layers[l];
		bool any = false;

		if (ly->n_preds && !ly->preds)
			return mi_set_error(-EINVAL, "sched: layer %u has %u preds and no list",
					    l, ly->n_preds);
		for (uint32_t j = 0; j < ly->n_preds; j++)
			if (ly->preds[j] >= l)
				return mi_set_error(-EINVAL,
						    "sched: layer %u input %u is not earlier (layers must be in topological order)",
						    l, ly->preds[j]);
		for (uint32_t d = 0; d < p->n_devices; d++) {
			double t = p->lat_ns[l * p->n_devices + d];

			if (isnan(t) || isinf(t))
				return mi_set_error(-EINVAL, "sched: layer %u device %u latency not finite",
						    l, d);
			if (t >= 0)
				any = true;
			if (!(p->power_w[l * p->n_devices + d] >= 0))
				return mi_set_error(-EINVAL, "sched: layer %u device %u power < 0",
						    l, d);
		}
		if (!any)
			return mi_set_error(-ENOSPC, "sched: layer %u is supported by no device", l);
	}
	for (uint32_t i = 0; i < p->n_devices * p->n_devices; i++)
		if (!(p->xfer_ns_per_byte[i] >= 0) ||
		    (p->xfer_fixed_ns && !(p->xfer_fixed_ns[i] >= 0)))
			return mi_set_error(-EINVAL, "sched: transfer cost %u negative or not a number", i);
	return 0;
}

/* Layers by rank descending, index ascending on ties: a topological
 * order since rank(pred) >= lat(pred) + rank(succ). */
static void sort_order(uint32_t *order, const double *rank, uint32_t n)
{
	/* insertion sort: stable, no global, fast for n in the hundreds
	 * when nearly sorted (ranks fall along a model's layers) */
	for (uint32_t i = 0; i < n; i++)
		order[i] = i;
	for (uint32_t i = 1; i < n; i++) {
		uint32_t v = order[i], j = i;

		while (j > 0 && (rank[order[j - 1]] < rank[v] ||
				 (rank[order[j - 1]] == rank[v] && order[j - 1] > v))) {
			order[j] = order[j - 1];
			j--;
		}
		order[j] = v;
	}
}

int mi_solver_prepare(struct mi_solver *s, const struct mi_sched_problem *p,
		      const struct mi_sched_dev_state *st,
		      const struct mi_sched_base *base)
{
	uint32_t L = p->n_layers, D = p->n_devices, E = 0;
	double mean_xb = 0, mean_xf = 0, *mean_lat;
	uint32_t *cnt;
	int ret, n_av = 0;

	ret = mi_sched_problem_check(p);
	if (ret)
		return ret;
	if (L > s->max_l || D > s->max_d)
		return mi_set_error(-E2BIG, "solver: problem %ux%u exceeds the workspace %ux%u",
				    L, D, s->max_l, s->max_d);
	for (uint32_t d = 0; st && d < D; d++)
		if (!(st[d].slowdown >= 0 && st[d].slowdown < 1e12) ||
		    !(st[d].xfer_slowdown >= 0 && st[d].xfer_slowdown < 1e12) ||
		    !(st[d].mem_fraction >= 0 && st[d].mem_fraction <= 1) ||
		    !(st[d].reliability >= 0 && st[d].reliability <= 1))
			return mi_set_error(-EINVAL,
					    "solver: device %u state out of range (slowdown %g, transfer %g, memory %g, reliability %g)",
					    d, st[d].slowdown, st[d].xfer_slowdown,
					    st[d].mem_fraction, st[d].reliability);
	s->L = L;
	s->D = D;
	s->S = p->streams > 1 ? p->streams : 1;
	s->avail_mask = 0;
	for (uint32_t d = 0; d < D; d++) {
		const struct mi_sched_dev_state *sd = st ? &st[d] : NULL;
		double cap = (double)p->devices[d].mem_bytes;

		if (!sd || sd->available) {
			s->avail_mask |= 1ull << d;
			n_av++;
		}
		if (sd)
			cap *= fmin(1.0, fmax(0.0, sd->mem_fraction));
		s->mem_cap[d] = (uint64_t)cap;
		if (base && base->mem_bytes)
			s->mem_cap[d] = base->mem_bytes[d] >= s->mem_cap[d] ? 0 :
					s->mem_cap[d] - base->mem_bytes[d];
		s->mem_used[d] = 0;
		s->reserve[d] = 0;
	}
	if (!n_av)
		return mi_set_error(-ENODEV, "solver: no device available");
	for (uint32_t a = 0; a < D; a++)
		for (uint32_t b = 0; b < D; b++) {
			double f = 1.0;

			if (st)
				f = fmax(fmax(1.0, st[a].xfer_slowdown),
					 st[b].xfer_slowdown);
			s->xb[a * D + b] = a == b ? 0 : f * p->xfer_ns_per_byte[a * D + b];
			s->xf[a * D + b] = a == b || !p->xfer_fixed_ns ? 0 :
					   f * p->xfer_fixed_ns[a * D + b];
			if (a != b && (s->avail_mask >> a & 1) && (s->avail_mask >> b & 1)) {
				mean_xb += s->xb[a * D + b];
				mean_xf += s->xf[a * D + b];
			}
		}
	if (n_av > 1) {
		mean_xb /= n_av * (n_av - 1);
		mean_xf /= n_av * (n_av - 1);
	}

	/* effective latencies and feasible device sets */
	mean_lat = s->scratch + (size_t)L * D;
	for (uint32_t l = 0; l < L; l++) {
		uint64_t m = 0;
		double sum = 0;
		int n = 0;

		for (uint32_t d = 0; d < D; d++) {
			double t = p->lat_ns[l * D + d];

			if (t >= 0 && (s->avail_mask >> d & 1)) {
				t *= st ? fmax(1.0, st[d].slowdown) : 1.0;
				if (p->mem_bytes[l * D + d] <= s->mem_cap[d])
					m |= 1ull << d;
			} else {
				t = -1;
			}
			s->lat[l * D + d] = t;
			if (m >> d & 1) {
				sum += t;
				n++;
			}
		}
		if (!m)
			return mi_set_error(-ENOSPC,
					    "solver: layer %u fits no available device that supports it",
					    l);
		s->cand[l] = m;
		mean_lat[l] = sum / n;
		if (!(m & (m - 1))) {
			int d = __builtin_ctzll(m);

			s->reserve[d] += p->mem_bytes[l * D + d];
			if (s->reserve[d] > s->mem_cap[d])
				return mi_set_error(-ENOSPC,
						    "solver: layers that only device %d runs need %llu bytes, %llu usable",
						    d, (unsigned long long)s->reserve[d],
						    (unsigned long long)s->mem_cap[d]);
		}
		E += p->layers[l].n_preds;
	}

	/* successors (reverse CSR) */
	if (!s->succ || E > s->succ_cap) {
		uint32_t *n = realloc(s->succ, (E ? E : 1) * sizeof(uint32_t));

		if (!n)
			return mi_set_error(-ENOMEM, "solver: out of memory");
		s->succ = n;
		s->succ_cap = E;
	}
	cnt = s->order;		/* reused as counters before the sort */
	memset(cnt, 0, L * sizeof(uint32_t));
	for (uint32_t l = 0; l < L; l++)
		for (uint32_t j = 0; j < p->layers[l].n_preds; j++)
			cnt[p->layers[l].preds[j]]++;
	s->succ_off[0] = 0;
	for (uint32_t l = 0; l < L; l++)
		s->succ_off[l + 1] = s->succ_off[l] + cnt[l];
	memcpy(cnt, s->succ_off, L * sizeof(uint32_t));
	for (uint32_t l = 0; l < L; l++)
		for (uint32_t j = 0; j < p->layers[l].n_preds; j++)
			s->succ[cnt[p->layers[l].preds[j]]++] = l;
	/* upward rank */
	for (uint32_t i = L; i-- > 0;) {
		double comm = (double)p->layers[i].out_bytes * mean_xb + mean_xf;
		double mx = 0;

		for (uint32_t k = s->succ_off[i]; k < s->succ_off[i + 1]; k++) {
			double r = comm + s->rank[s->succ[k]];

			if (r > mx)
				mx = r;
		}
		s->rank[i] = mean_lat[i] + mx;
	}
	sort_order(s->order, s->rank, L);
	return 0;
}

static double base_load(const struct mi_sched_base *base, uint32_t d)
{
	return base && base->load_ns ? base->load_ns[d] : 0.0;
}

/* Re-time positions k.. of the order from dev_free and the finish times
 * of positions before k; ms_before is their makespan.  With snap, the
 * state before each position is recorded (dev_free in snap, makespan in
 * s->pm).  Stops early, returning a value >= limit, once the makespan
 * reaches limit.  Returns the makespan. */
static double retime(struct mi_solver *s, const struct mi_sched_problem *p,
		     const int32_t *a, uint32_t k, double *snap, double ms_before,
		     double limit)
{
	uint32_t D = s->D;
	double ms = ms_before;

	s->work += s->L - k;
	for (uint32_t i = k; i < s->L; i++) {
		uint32_t l = s->order[i];
		const struct mi_sched_layer *ly = &p->layers[l];
		int d = a[l];
		double ready = 0, f;

		if (snap) {
			memcpy(snap + (size_t)i * D, s->dev_free, D * sizeof(double));
			s->pm[i] = ms;
		}
		for (uint32_t j = 0; j < ly->n_preds; j++) {
			uint32_t q = ly->preds[j];
			double t = s->finish[q] +
				   mi_xfer_ns(s, p->layers[q].out_bytes, a[q], d);

			if (t > ready)
				ready = t;
		}
		ready = ready > s->dev_free[d] ? ready : s->dev_free[d];
		f = ready + s->lat[l * D + d];
		s->finish[l] = f;
		s->dev_free[d] = ready + s->S * s->lat[l * D + d];
		if (f > ms) {
			ms = f;
			if (ms >= limit)
				return ms;
		}
	}
	if (snap)
		s->pm[s->L] = ms;
	return ms;
}

double mi_solver_makespan(struct mi_solver *s, const struct mi_sched_problem *p,
			  const struct mi_sched_base *base, const int32_t *a)
{
	for (uint32_t d = 0; d < s->D; d++)
		s->dev_free[d] = base_load(base, d);
	return retime(s, p, a, 0, NULL, 0, DBL_MAX);
}

int mi_solver_check_limits(struct mi_solver *s,
			   const struct mi_sched_problem *p,
			   const struct mi_sched_base *base, const int32_t *a)
{
	uint64_t used[MI_SCHED_MAX_DEVICES] = { 0 };
	uint32_t D = s->D;

	for (uint32_t l = 0; l < s->L; l++) {
		int d = a[l];

		if (d < 0 || (uint32_t)d >= D)
			return mi_set_error(-EINVAL, "sched: layer %u on device %d of %u",
					    l, d, D);
		if (!(s->avail_mask >> d & 1))
			return mi_set_error(-ENODEV, "sched: layer %u on unavailable device %d",
					    l, d);
		if (p->lat_ns[l * D + d] < 0)
			return mi_set_error(-EOPNOTSUPP, "sched: layer %u unsupported on device %d",
					    l, d);
		used[d] += p->mem_bytes[l * D + d];
	}
	for (uint32_t d = 0; d < D; d++)
		if (used[d] > s->mem_cap[d])
			return mi_set_error(-ENOSPC,
					    "sched: device %u needs %llu bytes, %llu usable",
					    d, (unsigned long long)used[d],
					    (unsigned long long)s->mem_cap[d]);
	return 0;
}

void mi_solver_cost(struct mi_solver *s, const struct mi_sched_problem *p,
		    const struct mi_sched_base *base, struct mi_sched_plan *plan)
{
	double e = 0;

	for (uint32_t l = 0; l < s->L; l++) {
		int d = plan->device[l];

		e += s->lat[l * s->D + d] * 1e-9 * p->power_w[l * s->D + d];
	}
	plan->makespan_ns = mi_solver_makespan(s, p, base, plan->device);
	plan->energy_j = e;
}

int mi_sched_evaluate(struct mi_solver *s, const struct mi_sched_problem *p,
		      const struct mi_sched_dev_state *st,
		      const struct mi_sched_base *base,
		      struct mi_sched_plan *plan)
{
	int ret = mi_solver_prepare(s, p, st, base);

	if (ret)
		return ret;
	if (!plan || !plan->device || plan->n_layers != p->n_layers)
		return mi_set_error(-EINVAL, "sched: plan for %u layers, problem has %u",
				    plan ? plan->n_layers : 0, p->n_layers);
	ret = mi_solver_check_limits(s, p, base, plan->device);
	if (ret)
		return ret;
	mi_solver_cost(s, p, base, plan);
	return 0;
}

/* Room for layer l on d, keeping the reservation of the single-candidate
 * layers still unplaced (l's own share excluded). */
static bool has_room(const struct mi_solver *s, const struct mi_sched_problem *p,
		     uint32_t l, int d)
{
	uint64_t need = p->mem_bytes[l * s->D + d];
	uint64_t res = s->reserve[d];

	if (!(s->cand[l] & (s->cand[l] - 1)))
		res -= need;	/* l is one of the reserved */
	return s->mem_used[d] + need + res <= s->mem_cap[d];
}

static void place(struct mi_solver *s, const struct mi_sched_problem *p,
		  uint32_t l, int d, int32_t *a)
{
	uint64_t need = p->mem_bytes[l * s->D + d];

	a[l] = d;
	s->mem_used[d] += need;
	if (!(s->cand[l] & (s->cand[l] - 1)))
		s->reserve[d] -= need;
}

/* price rounds (each device priced at its alternatives' prices) and list
 * passes under rising prices */
#define PRICE_ROUNDS 2
#define PRICE_PASSES 8

static int cmp_knap(const void *a, const void *b)
{
	const struct mi_knap *x = a, *y = b;

	return x->dens > y->dens ? -1 : x->dens < y->dens;
}

/*
 * Memory prices (part of stage 1): a device whose memory cannot hold
 * every layer that would run faster there gets a price per byte, the
 * marginal value density of a fractional knapsack: layers by time saved
 * per byte (against their best other candidate), filled to the device's
 * free memory; the first that does not fit sets the price.  The list
 * stage adds price x bytes to a layer's cost there, so scarce memory
 * goes to the layers that gain most from it instead of the first ones
 * in the order.
 */
static void memory_prices(struct mi_solver *s, const struct mi_sched_problem *p)
{
	uint32_t L = s->L, D = s->D;
	double *next = s->scratch + (size_t)L * D;	/* [D] */

	for (uint32_t d = 0; d < D; d++)
		s->price[d] = 0;
	for (int round = 0; round < PRICE_ROUNDS; round++) {
		bool changed = false;

		for (uint32_t d = 0; d < D; d++) {
			uint64_t want = 0, room, fill = 0;
			uint32_t n = 0;

			next[d] = 0;
			if (!(s->avail_mask >> d & 1) || s->reserve[d] >= s->mem_cap[d])
				continue;
			room = s->mem_cap[d] - s->reserve[d];
			for (uint32_t l = 0; l < L; l++) {
				uint64_t m = s->cand[l], other = m & ~(1ull << d);
				double ref = DBL_MAX, save;

				if (!(m >> d & 1) || !other)
					continue;	/* not here, or reserved */
				/* the best alternative, at its own price */
				for (; other; other &= other - 1) {
					int e = __builtin_ctzll(other);
					double t = s->lat[l * D + e] +
						   s->price[e] * (double)p->mem_bytes[l * D + e];

					if (t < ref)
						ref = t;
				}
				save = ref - s->lat[l * D + d];
				if (save <= 0)
					continue;
				s->kn[n].mem = p->mem_bytes[l * D + d];
				s->kn[n].dens = save / (double)(s->kn[n].mem + 1);
				want += s->kn[n].mem;
				n++;
			}
			if (want <= room)
				continue;
			qsort(s->kn, n, sizeof(*s->kn), cmp_knap);
			for (uint32_t i = 0; i < n; i++) {
				if (fill + s->kn[i].mem > room) {
					next[d] = s->kn[i].dens;
					break;
				}
				fill += s->kn[i].mem;
			}
		}
		for (uint32_t d = 0; d < D; d++) {
			changed |= next[d] != s->price[d];
			s->price[d] = next[d];
		}
		if (!changed)
			break;
	}
}

/*
 * Stage 2, list assignment: by CAS (with memory prices), or for HEFT
 * (cas false) by earliest finish alone.  denied (may be NULL) receives
 * per device what its memory was worth to a layer it could not take.
 * Returns -ENOSPC when memory runs out for some layer.
 */
static int list_assign(struct mi_solver *s, const struct mi_sched_problem *p,
		       const struct mi_sched_dev_state *st,
		       const struct mi_sched_base *base, bool cas, int32_t *a,
		       double *cas_mean, double *denied)
{
	uint32_t D = s->D;
	double *eft = s->scratch + (size_t)s->L * D;	/* [D] */
	double *en = eft + D;				/* [D] */
	double sum_cas = 0;

	if (denied)
		for (uint32_t d = 0; d < D; d++)
			denied[d] = 0;

	for (uint32_t d = 0; d < D; d++)
		s->dev_free[d] = base_load(base, d);
	for (uint32_t i = 0; i < s->L; i++) {
		uint32_t l = s->order[i];
		const struct mi_sched_layer *ly = &p->layers[l];
		double t0 = DBL_MAX, cmin = DBL_MAX, emin = DBL_MAX, best = -DBL_MAX;
		uint64_t m = 0;
		int bd = -1, full = -1;

		for (uint64_t c = s->cand[l]; c; c &= c - 1) {
			int d = __builtin_ctzll(c);
			double ready = 0;

			if (!has_room(s, p, l, d)) {
				if (full < 0 || s->lat[l * D + d] < s->lat[l * D + full])
					full = d;
				continue;
			}
			m |= 1ull << d;
			for (uint32_t j = 0; j < ly->n_preds; j++) {
				uint32_t q = ly->preds[j];
				double t = s->finish[q] +
					   mi_xfer_ns(s, p->layers[q].out_bytes, a[q], d);

				if (t > ready)
					ready = t;
			}
			if (ready < t0)
				t0 = ready;
			eft[d] = (ready > s->dev_free[d] ? ready : s->dev_free[d]) +
				 s->lat[l * D + d];
			if (cas)
				eft[d] += s->price[d] * (double)p->mem_bytes[l * D + d];
			en[d] = s->lat[l * D + d] * p->power_w[l * D + d];
			if (en[d] < emin)
				emin = en[d];
		}
		if (!m)
			return -ENOSPC;
		for (uint64_t c = m; c; c &= c - 1) {
			int d = __builtin_ctzll(c);
			double inc = eft[d] - t0;

			if (inc < cmin)
				cmin = inc;
		}
		for (uint64_t c = m; c; c &= c - 1) {
			int d = __builtin_ctzll(c);
			double score;

			if (cas) {
				double inc = eft[d] - t0;
				double ls = inc > 0 ? cmin / inc : 1.0;
				double es = en[d] > 0 ? emin / en[d] : 1.0;
				double rel = st ? st[d].reliability : 1.0;

				score = s->o.w_latency * ls + s->o.w_power * es +
					s->o.w_reliability * rel;
			} else {
				score = -eft[d];
			}
			if (score > best) {
				best = score;
				bd = d;
			}
		}
		if (cas)
			sum_cas += best;
		/* the fastest device was full: what its memory was worth here */
		if (denied && full >= 0 && s->lat[l * D + full] < s->lat[l * D + bd]) {
			double v = (s->lat[l * D + bd] - s->lat[l * D + full]) /
				   (double)(p->mem_bytes[l * D + full] + 1);

			if (v > denied[full])
				denied[full] = v;
		}
		place(s, p, l, bd, a);
		if (cas)	/* the price steers; the schedule keeps real times */
			eft[bd] -= s->price[bd] * (double)p->mem_bytes[l * D + bd];
		s->finish[l] = eft[bd];
		s->dev_free[bd] = eft[bd] + (s->S - 1) * s->lat[l * D + bd];
	}
	if (cas_mean)
		*cas_mean = sum_cas / s->L;
	return 0;
}

/* Memory-first fallback: layers by size, each to the candidate with the
 * most room left.  Latency is the refinement's job afterwards. */
static int memory_first(struct mi_solver *s, const struct mi_sched_problem *p,
			int32_t *a)
{
	uint32_t L = s->L, D = s->D;

	for (uint32_t d = 0; d < D; d++)
		s->mem_used[d] = 0;
	/* single-candidate layers first, then the rest largest first */
	for (uint32_t l = 0; l < L; l++) {
		a[l] = -1;
		if (!(s->cand[l] & (s->cand[l] - 1))) {
			int d = __builtin_ctzll(s->cand[l]);

			a[l] = d;
			s->mem_used[d] += p->mem_bytes[l * D + d];
		}
	}
	for (;;) {
		uint64_t big = 0;
		int bl = -1, bd = -1;
		uint64_t room_best = 0;

		for (uint32_t l = 0; l < L; l++) {
			uint64_t mx = 0;

			if (a[l] >= 0)
				continue;
			for (uint64_t c = s->cand[l]; c; c &= c - 1) {
				int d = __builtin_ctzll(c);

				if (p->mem_bytes[l * D + d] > mx)
					mx = p->mem_bytes[l * D + d];
			}
			if (bl < 0 || mx > big) {
				big = mx;
				bl = l;
			}
		}
		if (bl < 0)
			return 0;
		for (uint64_t c = s->cand[bl]; c; c &= c - 1) {
			int d = __builtin_ctzll(c);
			uint64_t need = p->mem_bytes[bl * D + d];
			uint64_t room;

			if (s->mem_used[d] + need > s->mem_cap[d])
				continue;
			room = s->mem_cap[d] - s->mem_used[d] - need;
			if (bd < 0 || room > room_best) {
				room_best = room;
				bd = d;
			}
		}
		if (bd < 0)
			return mi_set_error(-ENOSPC,
					    "solver: no placement of layer %d within the devices' memory",
					    bl);
		a[bl] = bd;
		s->mem_used[bd] += p->mem_bytes[bl * D + bd];
	}
}

/* Energy and latency-weighted unreliability of a placement. */
static void side_costs(const struct mi_solver *s, const struct mi_sched_problem *p,
		       const struct mi_sched_dev_state *st, const int32_t *a,
		       double *energy, double *unrel, double *wsum)
{
	double e = 0, u = 0, w = 0;

	for (uint32_t l = 0; l < s->L; l++) {
		int d = a[l];
		double t = s->lat[l * s->D + d];

		e += t * p->power_w[l * s->D + d];
		u += t * (st ? 1.0 - st[d].reliability : 0.0);
		w += t;
	}
	*energy = e;
	*unrel = u;
	*wsum = w;
}

/*
 * Refinement: for each layer on the critical path (walked back from the
 * last finish through whatever delayed each layer: an input or the
 * previous layer on its device), try its other candidates with room
 * where the layer itself would finish no later (or, with w2, use less
 * energy); keep the move that lowers J most.  A trial re-times only the
 * positions from the layer on, from the recorded state before it, and
 * stops as soon as its makespan alone cannot beat the best J.
 */
/*
 * For moving l to the full device d: the layer v on d whose move to
 * another candidate e with room (counting the room l leaves behind)
 * frees enough and costs the least latency.  False if none.
 */
static bool pick_evictee(const struct mi_solver *s,
			 const struct mi_sched_problem *p, const int32_t *a,
			 uint32_t l, int d, int *vp, int *ep)
{
	uint32_t D = s->D;
	uint64_t need = p->mem_bytes[l * D + d];
	uint64_t short_by = s->mem_used[d] + need - s->mem_cap[d];
	double best = DBL_MAX;
	int cur = a[l];

	for (uint32_t v = 0; v < s->L; v++) {
		if (v == l || a[v] != d || p->mem_bytes[v * D + d] < short_by)
			continue;
		for (uint64_t c = s->cand[v] & ~(1ull << d); c; c &= c - 1) {
			int e = __builtin_ctzll(c);
			uint64_t used = s->mem_used[e] -
					(e == cur ? p->mem_bytes[l * D + cur] : 0);
			double loss = s->lat[v * D + e] - s->lat[v * D + d];

			if (used + p->mem_bytes[v * D + e] > s->mem_cap[e] || loss >= best)
				continue;
			best = loss;
			*vp = (int)v;
			*ep = e;
		}
	}
	return best < DBL_MAX;
}

/* Refinement tries a device only if the layer itself would finish there
 * no later than 1.5x its current finish (or, with w2, saves energy):
 * moves that slow the layer more rarely shorten the critical path, and
 * skipping them halves the work. */
#define FINISH_SLACK 1.5

static void refine(struct mi_solver *s, const struct mi_sched_problem *p,
		   const struct mi_sched_dev_state *st,
		   const struct mi_sched_base *base, int32_t *a)
{
	uint32_t L = s->L, D = s->D;
	double *snap = s->scratch;		/* [L * D] */
	uint32_t *pos = (uint32_t *)s->best;	/* [L] position in the order */
	const double w1 = s->o.w_latency, w2 = s->o.w_power, w3 = s->o.w_reliability;
	double ms, ms0, en, en0, un, wsum, J;
	uint64_t budget;

	for (uint32_t i = 0; i < L; i++)
		pos[s->order[i]] = i;
	for (uint32_t d = 0; d < D; d++)
		s->dev_free[d] = base_load(base, d);
	ms0 = ms = retime(s, p, a, 0, snap, 0, DBL_MAX);
	memcpy(s->fin, s->finish, L * sizeof(double));
	side_costs(s, p, st, a, &en0, &un, &wsum);
	en = en0;
	if (ms0 <= 0 || wsum <= 0 || w1 <= 0)
		return;
	if (en0 <= 0)
		en0 = 1;
	J = w1 + w2 * en / en0 + w3 * un / wsum;
	budget = s->work + (uint64_t)s->o.refine_work * L;

	for (uint32_t pass = 0; pass < s->o.refine_passes; pass++) {
		bool improved = false;
		uint32_t l = 0;

		for (uint32_t i = 1; i < L; i++)
			if (s->fin[i] > s->fin[l])
				l = i;
		for (;;) {
			const struct mi_sched_layer *ly = &p->layers[l];
			uint32_t k = pos[l], next = UINT32_MAX;
			int cur = a[l];
			double best_J = J, best_en = en, best_un = un, start;
			double cur_en = s->lat[l * D + cur] * p->power_w[l * D + cur];
			int best_d = -1, best_v = -1, best_e = -1;
			uint32_t best_k = k;

			for (uint64_t c = s->cand[l] & ~(1ull << cur); c; c &= c - 1) {
				int d = __builtin_ctzll(c), v = -1, e = -1;
				uint64_t need = p->mem_bytes[l * D + d];
				double ready = 0, f, tms, ten, tun, tJ, lim;
				uint32_t kk = k;

				if (s->work > budget)
					break;
				/* where l itself would finish on d */
				for (uint32_t j = 0; j < ly->n_preds; j++) {
					uint32_t q = ly->preds[j];
					double t = s->fin[q] +
						   mi_xfer_ns(s, p->layers[q].out_bytes, a[q], d);

					if (t > ready)
						ready = t;
				}
				f = (ready > snap[(size_t)k * D + d] ? ready :
				     snap[(size_t)k * D + d]) + s->lat[l * D + d];
				ten = en + s->lat[l * D + d] * p->power_w[l * D + d] - cur_en;
				if (f > s->fin[l] * FINISH_SLACK && !(w2 > 0 && ten < en))
					continue;
				tun = un + (st ? s->lat[l * D + d] * (1 - st[d].reliability) -
					    s->lat[l * D + cur] * (1 - st[cur].reliability) : 0);
				if (s->mem_used[d] + need > s->mem_cap[d]) {
					/* no room: evict the layer there that loses
					 * least by moving to a device with room */
					if (!pick_evictee(s, p, a, l, d, &v, &e))
						continue;
					ten += s->lat[v * D + e] * p->power_w[v * D + e] -
					       s->lat[v * D + d] * p->power_w[v * D + d];
					if (st)
						tun += s->lat[v * D + e] * (1 - st[e].reliability) -
						       s->lat[v * D + d] * (1 - st[d].reliability);
					if (pos[v] < kk)
						kk = pos[v];
				}
				/* the makespan that would still beat best_J */
				lim = (best_J - w2 * ten / en0 - w3 * tun / wsum) * ms0 / w1;
				if (lim <= s->pm[kk])
					continue;
				memcpy(s->dev_free, snap + (size_t)kk * D, D * sizeof(double));
				a[l] = d;
				if (v >= 0)
					a[v] = e;
				tms = retime(s, p, a, kk, NULL, s->pm[kk], lim);
				a[l] = cur;
				if (v >= 0)
					a[v] = d;
				if (tms >= lim)
					continue;
				tJ = w1 * tms / ms0 + w2 * ten / en0 + w3 * tun / wsum;
				if (tJ < best_J - 1e-12) {
					best_J = tJ;
					best_en = ten;
					best_un = tun;
					best_d = d;
					best_v = v;
					best_e = e;
					best_k = kk;
				}
			}
			if (best_d >= 0) {
				s->mem_used[cur] -= p->mem_bytes[l * D + cur];
				s->mem_used[best_d] += p->mem_bytes[l * D + best_d];
				a[l] = best_d;
				if (best_v >= 0) {
					s->mem_used[best_d] -= p->mem_bytes[best_v * D + best_d];
					s->mem_used[best_e] += p->mem_bytes[best_v * D + best_e];
					a[best_v] = best_e;
				}
				memcpy(s->dev_free, snap + (size_t)best_k * D, D * sizeof(double));
				memcpy(s->finish, s->fin, L * sizeof(double));
				ms = retime(s, p, a, best_k, snap, s->pm[best_k], DBL_MAX);
				en = best_en;
				un = best_un;
				J = best_J;
				improved = true;
			}
			/* trials scribbled on finish: the accepted plan's times */
			if (best_d >= 0)
				memcpy(s->fin, s->finish, L * sizeof(double));
			else
				memcpy(s->finish, s->fin, L * sizeof(double));
			/* step back along what delayed l */
			start = s->fin[l] - s->lat[l * D + a[l]];
			for (uint32_t j = 0; j < ly->n_preds; j++) {
				uint32_t q = ly->preds[j];
				double t = s->fin[q] +
					   mi_xfer_ns(s, p->layers[q].out_bytes, a[q], a[l]);

				if (fabs(t - start) <= 1e-9 * (start + 1)) {
					next = q;
					break;
				}
			}
			if (next == UINT32_MAX) {
				for (uint32_t i = k; i-- > 0;) {
					uint32_t q = s->order[i];

					if (a[q] == a[l]) {
						if (fabs(s->fin[q] - start) <= 1e-9 * (start + 1))
							next = q;
						break;
					}
				}
			}
			if (next == UINT32_MAX)
				break;
			l = next;
		}
		(void)ms;
		if (!improved)
			break;
	}
}

static void reset_memory(struct mi_solver *s, const struct mi_sched_problem *p)
{
	for (uint32_t d = 0; d < s->D; d++) {
		s->mem_used[d] = 0;
		s->reserve[d] = 0;
	}
	for (uint32_t l = 0; l < s->L; l++)
		if (!(s->cand[l] & (s->cand[l] - 1))) {
			int d = __builtin_ctzll(s->cand[l]);

			s->reserve[d] += p->mem_bytes[l * s->D + d];
		}
}

/*
 * The list stage under memory prices, repeated while it had to deny a
 * layer its fastest device for lack of memory: that device's price rises
 * to what its memory was worth to the denied layer, and the pass runs
 * again (PRICE_PASSES at most).  The best makespan wins; s->tmp and
 * s->mem_used hold it afterwards.
 */
static int price_loop(struct mi_solver *s, const struct mi_sched_problem *p,
		      const struct mi_sched_dev_state *st,
		      const struct mi_sched_base *base, double *cas)
{
	double *denied = s->denied;
	double best = DBL_MAX, c;
	bool found = false;

	for (int it = 0; it < PRICE_PASSES; it++) {
		bool any = false;
		double ms;

		if (it)
			reset_memory(s, p);
		if (list_assign(s, p, st, base, true, s->tmp, &c, denied))
			break;
		ms = mi_solver_makespan(s, p, base, s->tmp);
		if (ms < best) {
			best = ms;
			*cas = c;
			memcpy(s->alt, s->tmp, s->L * sizeof(int32_t));
			found = true;
		}
		for (uint32_t d = 0; d < s->D; d++)
			if (denied[d] > s->price[d]) {
				s->price[d] = denied[d];
				any = true;
			}
		if (!any)
			break;
	}
	if (!found)
		return -ENOSPC;
	memcpy(s->tmp, s->alt, s->L * sizeof(int32_t));
	for (uint32_t d = 0; d < s->D; d++)
		s->mem_used[d] = 0;
	for (uint32_t l = 0; l < s->L; l++)
		s->mem_used[s->tmp[l]] += p->mem_bytes[l * s->D + s->tmp[l]];
	return 0;
}

int mi_solver_solve(struct mi_solver *s, const struct mi_sched_problem *p,
		    const struct mi_sched_dev_state *st,
		    const struct mi_sched_base *base,
		    struct mi_sched_plan *plan)
{
	double cas = 0;
	int ret;

	if (!plan || !plan->device || plan->n_layers != p->n_layers)
		return mi_set_error(-EINVAL, "solver: plan for %u layers, problem has %u",
				    plan ? plan->n_layers : 0, p ? p->n_layers : 0);
	ret = mi_solver_prepare(s, p, st, base);
	if (ret)
		return ret;
	memory_prices(s, p);
	ret = price_loop(s, p, st, base, &cas);
	if (ret) {
		ret = memory_first(s, p, s->tmp);
		if (ret)
			return ret;
	}
	if (s->o.refine_passes)
		refine(s, p, st, base, s->tmp);
	ret = mi_solver_check_limits(s, p, base, s->tmp);
	if (ret)
		return ret;	/* a bug: the stages keep every limit */
	memcpy(plan->device, s->tmp, p->n_layers * sizeof(int32_t));
	mi_solver_cost(s, p, base, plan);
	plan->cas = cas;
	plan->moved = 0;
	return 0;
}

int mi_sched_heft(struct mi_solver *s, const struct mi_sched_problem *p,
		  const struct mi_sched_dev_state *st,
		  struct mi_sched_plan *plan)
{
	int ret;

	if (!plan || !plan->device || plan->n_layers != p->n_layers)
		return mi_set_error(-EINVAL, "heft: plan for %u layers, problem has %u",
				    plan ? plan->n_layers : 0, p ? p->n_layers : 0);
	ret = mi_solver_prepare(s, p, st, NULL);
	if (ret)
		return ret;
	ret = list_assign(s, p, st, NULL, false, s->tmp, NULL, NULL);
	if (ret) {
		ret = memory_first(s, p, s->tmp);
		if (ret)
			return ret;
	}
	memcpy(plan->device, s->tmp, p->n_layers * sizeof(int32_t));
	mi_solver_cost(s, p, NULL, plan);
	plan->cas = 0;
	plan->moved = 0;
	return 0;
}

/*
 * Last-moment adjustment.  One pass in priority order with the latest
 * state: a layer stays unless its device is gone, cannot hold it, or
 * another candidate finishes it adjust_margin earlier.
 */
int mi_solver_adjust(struct mi_solver *s, const struct mi_sched_problem *p,
		     const struct mi_sched_dev_state *st,
		     const struct mi_sched_base *base,
		     struct mi_sched_plan *plan)
{
	uint32_t D, moved = 0;
	int32_t *a = s->tmp;
	int ret;

	if (!plan || !plan->device || plan->n_layers != p->n_layers)
		return mi_set_error(-EINVAL, "adjust: plan for %u layers, problem has %u",
				    plan ? plan->n_layers : 0, p ? p->n_layers : 0);
	ret = mi_solver_prepare(s, p, st, base);
	if (ret)
		return ret;
	D = s->D;
	memcpy(a, plan->device, p->n_layers * sizeof(int32_t));
	/* memory held by the layers that may stay */
	for (uint32_t l = 0; l < s->L; l++) {
		int d = a[l];

		if (d < 0 || (uint32_t)d >= D || !(s->cand[l] >> d & 1))
			a[l] = -1;
		else
			s->mem_used[d] += p->mem_bytes[l * D + d];
	}
	for (uint32_t d = 0; d < D; d++)
		if (s->mem_used[d] > s->mem_cap[d]) {
			/* shrunk memory: the device's layers all move */
			for (uint32_t l = 0; l < s->L; l++)
				if (a[l] == (int)d)
					a[l] = -1;
			s->mem_used[d] = 0;
		}
	for (uint32_t d = 0; d < D; d++)
		s->dev_free[d] = base_load(base, d);
	for (uint32_t i = 0; i < s->L; i++) {
		uint32_t l = s->order[i];
		const struct mi_sched_layer *ly = &p->layers[l];
		int cur = a[l], bd = -1;
		double best = DBL_MAX, cur_eft = DBL_MAX;

		for (uint64_t c = s->cand[l]; c; c &= c - 1) {
			int d = __builtin_ctzll(c);
			double ready = 0, eft;

			if (d != cur && s->mem_used[d] + p->mem_bytes[l * D + d] > s->mem_cap[d])
				continue;
			for (uint32_t j = 0; j < ly->n_preds; j++) {
				uint32_t q = ly->preds[j];
				double t = s->finish[q] +
					   mi_xfer_ns(s, p->layers[q].out_bytes, a[q], d);

				if (t > ready)
					ready = t;
			}
			eft = (ready > s->dev_free[d] ? ready : s->dev_free[d]) +
			      s->lat[l * D + d];
			if (d == cur)
				cur_eft = eft;
			if (eft < best) {
				best = eft;
				bd = d;
			}
		}
		if (bd < 0)
			return mi_set_error(-ENOSPC,
					    "adjust: layer %u has no device left with room", l);
		if (cur >= 0 && (bd == cur || best > cur_eft * (1 - s->o.adjust_margin))) {
			bd = cur;
			best = cur_eft;
		} else {
			if (cur >= 0)
				s->mem_used[cur] -= p->mem_bytes[l * D + cur];
			s->mem_used[bd] += p->mem_bytes[l * D + bd];
			a[l] = bd;
			moved++;
		}
		s->finish[l] = best;
		s->dev_free[bd] = best + (s->S - 1) * s->lat[l * D + bd];
	}
	ret = mi_solver_check_limits(s, p, base, a);
	if (ret)
		return ret;
	memcpy(plan->device, a, p->n_layers * sizeof(int32_t));
	mi_solver_cost(s, p, base, plan);
	plan->moved = moved;
	return 0;
}
