// SPDX-License-Identifier: MIT
/*
 * Executor: shape inference driver (per node: infer.c), completeness
 * check, static memory planning (one arena, lifetimes from the graph) and
 * the run loop.
 *
 * Planning happens once per set of input shapes (mi_model_prepare); a run
 * with the same shapes does no heap allocation unless the graph has nodes
 * whose output shape depends on run-time data (MI_NS_DYNAMIC), whose
 * outputs are malloc'ed and freed after their last consumer.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "cpu/cpu.h"
#include "plan/place-impl.h"

#define MI_ARENA_ALIGN 64

static bool tensor_known(const struct mi_tensor *t)
{
	return mi_tensor_shape_known(t) && mi_dtype_size(t->dtype);
}

static void reset_plan(struct mi_model *m)
{
	struct mi_graph *g = &m->g;

	if (m->cpu_planned) {
		mi_cpu_plan_fini(g);
		m->cpu_planned = false;
	}
	mi_devexec_unbind(m);
	for (int i = 0; i < g->ntensors; i++) {
		struct mi_tensor *t = &g->tensors[i];

		if (t->flags & (MI_TF_CONST | MI_TF_INPUT))
			continue;
		mi_tensor_free_data(t);
		t->flags &= ~MI_TF_SHAPEVAL;
		t->ndim = -1;
	}
	m->prepared = false;
}

/* Bind graph input shapes: given ones, or the declared ones with symbolic
 * dims = 1.  -EAGAIN when a declared rank is unknown and none is given. */
static int bind_inputs(struct mi_model *m, const int32_t *ndim,
		       const int64_t *dims)
{
	struct mi_graph *g = &m->g;

	for (int i = 0; i < g->ninputs; i++) {
		struct mi_tensor *t = &g->tensors[g->inputs[i]];
		const struct mi_tensor_info *d = &m->in_info[i];

		t->dtype = d->dtype;
		if (ndim) {
			t->ndim = ndim[i];
			memcpy(t->dims, dims + i * MI_MAX_DIMS,
			       sizeof(int64_t) * MI_MAX_DIMS);
		} else {
			if (d->ndim < 0)
				return -EAGAIN;
			t->ndim = d->ndim;
			for (int k = 0; k < d->ndim; k++)
				t->dims[k] = d->dims[k] < 0 ? 1 : d->dims[k];
		}
		m->bound_ndim[i] = t->ndim;
		memcpy(m->bound_dims + i * MI_MAX_DIMS, t->dims,
		       sizeof(int64_t) * MI_MAX_DIMS);
	}
	return 0;
}

struct place {
	int t;
	size_t size;
	int first, last;
	size_t off;
};

static int cmp_place(const void *a, const void *b)
{
	const struct place *x = a, *y = b;

	if (x->size != y->size)
		return x->size < y->size ? 1 : -1;
	return x->first - y->first;
}

static int cmp_off(const void *a, const void *b)
{
	const struct place *const *x = a, *const *y = b;

	return (*x)->off < (*y)->off ? -1 : (*x)->off > (*y)->off;
}

/*
 * Greedy-by-size arena assignment (as in TFLite's memory planner): the
 * largest tensors are placed first, each at the lowest offset that does
 * not overlap a placed tensor whose lifetime [first, last] intersects.
 */
/*
 * In-place Concat: an input of a planned contiguous Concat (the CPU
 * kernel copies each input as one block) that is an fp32 arena tensor
 * written by a static node and read by nothing but that Concat gets no
 * memory of its own: it is the Concat output's slice, its producer writes
 * there and the kernel skips the copy (it compares pointers at run time).
 * Nested Concats resolve to the outermost one.  host[t] / hoff[t] (bytes)
 * give the tensor whose memory t lives in; -1 when t is placed itself.
 */
static void plan_concat_inplace(struct mi_model *m, int *host, size_t *hoff)
{
	struct mi_graph *g = &m->g;
	int64_t off[64];

	for (int i = 0; i < g->ntensors; i++)
		host[i] = -1;
	for (int p = 0; p < g->norder; p++) {
		int ni = g->order[p];
		struct mi_node *n = &g->nodes[ni];

		if (m->node_state[ni] != MI_NS_STATIC || !n->priv ||
		    n->ninputs > 64 || mi_cpu_concat_inplace(g, n, off))
			continue;
		for (int k = 0; k < n->ninputs; k++) {
			int t = n->inputs[k], pr, dup = 0;
			struct mi_tensor *x = t >= 0 ? &g->tensors[t] : NULL;
			size_t b = (size_t)off[k] * sizeof(float);

			if (!x || x->dtype != MI_DT_FLOAT || b % 16 ||
			    x->phys_bytes > (size_t)mi_tensor_numel(x) * 4 ||
			    mi_out(g, n, 0)->phys_bytes ||
			    (x->flags & (MI_TF_CONST | MI_TF_INPUT | MI_TF_OUTPUT |
					 MI_TF_SHAPEVAL)))
				continue;
			for (int j = 0; j < n->ninputs; j++)
				dup += n->inputs[j] == t;
			pr = x->producer;
			if (dup != 1 || pr < 0 || g->nodes[pr].dead ||
			    m->node_state[pr] != MI_NS_STATIC ||
			    mi_graph_sole_consumer(g, t) != ni ||
			    n->outputs[0] == t)
				continue;
			host[t] = n->outputs[0];
			hoff[t] = b;
		}
	}
}

/* Outermost host of t and t's byte offset in it. */
static int inplace_root(const int *host, const size_t *hoff, int t,
			size_t *off)
{
	*off = 0;
	while (host[t] >= 0) {
		*off += hoff[t];
		t = host[t];
	}
	return t;
}

static int plan_memory(struct mi_model *m)
{
	struct mi_graph *g = &m->g;
	struct place *pl = NULL, **live = NULL;
	int np = 0, err = 0, *host = NULL, *root_first = NULL;
	size_t total = 0, *hoff = NULL;

	pl = calloc(g->ntensors + 1, sizeof(*pl));
	live = calloc(g->ntensors + 1, sizeof(*live));
	host = calloc(g->ntensors + 1, sizeof(*host));
	root_first = calloc(g->ntensors + 1, sizeof(*root_first));
	hoff = calloc(g->ntensors + 1, sizeof(*hoff));
	if (!pl || !live || !host || !root_first || !hoff) {
		err = -ENOMEM;
		goto out;
	}
	plan_concat_inplace(m, host, hoff);
	/* a host's memory must exist from its earliest slice's producer on */
	for (int i = 0; i < g->ntensors; i++)
		root_first[i] = INT_MAX;
	for (int i = 0; i < g->ntensors; i++) {
		size_t o;
		int r, pr = g->tensors[i].producer;

		if (host[i] < 0 || pr < 0)
			continue;
		r = inplace_root(host, hoff, i, &o);
		if (m->pos_of[pr] < root_first[r])
			root_first[r] = m->pos_of[pr];
	}
	for (int p = 0; p < g->norder; p++) {
		struct mi_node *n = &g->nodes[g->order[p]];

		if (m->node_state[g->order[p]] != MI_NS_STATIC &&
		    m->node_state[g->order[p]] != MI_NS_ALIAS)
			continue;
		for (int j = 0; j < n->noutputs; j++) {
			int t = n->outputs[j];

			if (j == 0 && m->node_state[g->order[p]] == MI_NS_ALIAS)
				continue;
			if (t < 0 || host[t] >= 0)
				continue; /* lives in a Concat output */
			struct mi_tensor *x = &g->tensors[t];
			size_t sz = (size_t)mi_tensor_numel(x) *
				    mi_dtype_size(x->dtype);

			if (x->phys_bytes > sz) /* blocked layout */
				sz = x->phys_bytes;
			sz = (sz + MI_ARENA_ALIGN - 1) & ~(size_t)(MI_ARENA_ALIGN - 1);
			pl[np].t = t;
			pl[np].size = sz ? sz : MI_ARENA_ALIGN;
			pl[np].first = root_first[t] < p ? root_first[t] : p;
			/* written earlier by a device job (place-impl.h) */
			if (m->place && m->place->nbound &&
			    m->place->tfirst[t] < pl[np].first)
				pl[np].first = m->place->tfirst[t];
			pl[np].last = m->last_use[t] < p ? p : m->last_use[t];
			np++;
		}
	}
	qsort(pl, np, sizeof(*pl), cmp_place);
	for (int i = 0; i < np; i++) {
		int nl = 0;
		size_t off = 0;

		for (int k = 0; k < i; k++)
			if (pl[k].first <= pl[i].last &&
			    pl[i].first <= pl[k].last)
				live[nl++] = &pl[k];
		qsort(live, nl, sizeof(*live), cmp_off);
		for (int k = 0; k < nl; k++) {
			if (live[k]->off >= off + pl[i].size)
				break;
			if (live[k]->off + live[k]->size > off)
				off = live[k]->off + live[k]->size;
		}
		pl[i].off = off;
		if (off + pl[i].size > total)
			total = off + pl[i].size;
	}
	if (total > mi_max_tensor_bytes) {
		err = mi_graph_err(g, NULL, -E2BIG,
			"activations need %zu bytes, over the tensor size limit",
			total);
		goto out;
	}
	if (total > m->arena_size) {
		free(m->arena);
		m->arena = aligned_alloc(MI_ARENA_ALIGN, total);
		m->arena_size = m->arena ? total : 0;
		if (!m->arena) {
			err = mi_graph_err(g, NULL, -ENOMEM,
				"cannot allocate a %zu byte arena", total);
			goto out;
		}
	}
	m->arena_peak = total;
	/* NaN-fill the arena once, so that a kernel reading memory it did
	 * not write (or a lifetime overlap in this plan) shows up in every
	 * run, not only where the previous plan happened to leave garbage
	 * (the first run touches every page anyway). */
	if (total)
		memset(m->arena, 0xff, total);
	for (int i = 0; i < np; i++) {
		struct mi_tensor *x = &g->tensors[pl[i].t];

		mi_tensor_free_data(x);
		x->data = (char *)m->arena + pl[i].off;
		x->nbytes = (size_t)mi_tensor_numel(x) * mi_dtype_size(x->dtype);
		x->flags |= MI_TF_ARENA;
	}
	for (int i = 0; i < g->ntensors; i++) {
		struct mi_tensor *x = &g->tensors[i];
		size_t o;
		int r;

		if (host[i] < 0)
			continue;
		r = inplace_root(host, hoff, i, &o);
		mi_tensor_free_data(x);
		x->data = (char *)g->tensors[r].data + o;
		x->nbytes = (size_t)mi_tensor_numel(x) * mi_dtype_size(x->dtype);
		x->flags |= MI_TF_ARENA;
	}
out:
	free(pl);
	free(live);
	free(host);
	free(root_first);
	free(hoff);
	return err;
}

/*
 * Ops whose output is their first input's data under another shape: with a
 * reference implementation (no planner state) and a static shape, the
 * output simply points at the input's memory and the node does not run.
 */
static bool view_op(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *tm = mi_in(g, n, 2), *ratio = mi_in(g, n, 1);

	static const char *const ops[] = { "Reshape", "Flatten", "Squeeze",
					   "Unsqueeze", "Identity" };

	if (n->domain[0])
		return false;
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		if (!strcmp(n->op_type, ops[i]))
			return true;
	/* inference Dropout: no mask consumer (checked by the caller), no
	 * training_mode input, a constant false one or a constant ratio 0 */
	if (strcmp(n->op_type, "Dropout"))
		return false;
	if (!tm)
		return true;
	/* ratio 0 keeps every element, even in training mode */
	if (ratio && (ratio->flags & MI_TF_CONST) && ratio->data &&
	    mi_tensor_numel(ratio) == 1 &&
	    ((ratio->dtype == MI_DT_FLOAT && !*(const float *)ratio->data) ||
	     (ratio->dtype == MI_DT_DOUBLE && !*(const double *)ratio->data)))
		return true;
	return (tm->flags & MI_TF_CONST) && tm->data &&
	       tm->dtype == MI_DT_BOOL && mi_tensor_numel(tm) == 1 &&
	       !*(const unsigned char *)tm->data;
}

static void mark_aliases(struct mi_model *m)
{
	struct mi_graph *g = &m->g;

	for (int p = 0; p < g->norder; p++) {
		int ni = g->order[p];
		struct mi_node *n = &g->nodes[ni];
		struct mi_tensor *x = mi_in(g, n, 0), *y;

		if (m->node_state[ni] != MI_NS_STATIC || !x || n->noutputs < 1)
			continue;
		if (n->priv) {
			size_t off;

			/* a planned copy that is one contiguous block of its
			 * input (channel Slice, Transpose of size-1 axes) */
			if (mi_cpu_view_offset(g, n, &off) ||
			    (x->producer >= 0 &&
			     m->node_state[x->producer] == MI_NS_DYNAMIC))
				continue;
			m->node_state[ni] = MI_NS_ALIAS;
			continue;
		}
		if (!view_op(g, n))
			continue;
		y = mi_out(g, n, 0);
		if (x->dtype != y->dtype ||
		    mi_tensor_numel(x) != mi_tensor_numel(y) ||
		    (n->noutputs > 1 && (mi_out(g, n, 1)->nconsumers ||
					 (mi_out(g, n, 1)->flags & MI_TF_OUTPUT))))
			continue;
		/* the input must have memory for the whole run: not a
		 * run-time allocation that is freed after its last use */
		if (x->producer >= 0 &&
		    m->node_state[x->producer] == MI_NS_DYNAMIC)
			continue;
		m->node_state[ni] = MI_NS_ALIAS;
	}
}

static int compute_lifetimes(struct mi_model *m)
{
	struct mi_graph *g = &m->g;
	int *lu = realloc(m->last_use, (g->ntensors + 1) * sizeof(int));
	int *po;

	if (!lu)
		return -ENOMEM;
	m->last_use = lu;
	po = realloc(m->pos_of, (g->nnodes + 1) * sizeof(int));
	if (!po)
		return -ENOMEM;
	m->pos_of = po;
	for (int i = 0; i < g->ntensors; i++)
		lu[i] = -1;
	for (int i = 0; i < g->nnodes; i++)
		po[i] = -1;
	for (int p = 0; p < g->norder; p++) {
		struct mi_node *n = &g->nodes[g->order[p]];

		po[g->order[p]] = p;
		for (int j = 0; j < n->ninputs; j++)
			if (n->inputs[j] >= 0)
				lu[n->inputs[j]] = p;
	}
	for (int i = 0; i < g->noutputs; i++)
		lu[g->outputs[i]] = INT_MAX;
	/* an aliased input lives as long as its view */
	for (int p = g->norder - 1; p >= 0; p--) {
		int ni = g->order[p];
		struct mi_node *n = &g->nodes[ni];

		if (m->node_state[ni] == MI_NS_ALIAS &&
		    lu[n->outputs[0]] > lu[n->inputs[0]])
			lu[n->inputs[0]] = lu[n->outputs[0]];
	}
	return 0;
}

static int infer_all(struct mi_model *m, const int32_t *ndim,
		     const int64_t *dims)
{
	struct mi_graph *g = &m->g;
	unsigned char *st;
	int err;

	reset_plan(m);
	g->err[0] = 0;
	g->err_op[0] = 0;
	st = realloc(m->node_state, g->nnodes + 1);
	if (!st)
		return -ENOMEM;
	m->node_state = st;
	memset(st, MI_NS_DYNAMIC, g->nnodes + 1);
	err = mi_graph_toposort(g);
	if (err)
		return err;
	err = bind_inputs(m, ndim, dims);
	if (err)
		return err;
	for (int p = 0; p < g->norder; p++) {
		int ni = g->order[p];

		err = mi_infer_node(g, &g->nodes[ni], &st[ni]);
		if (err)
			return err;
	}
	/* Completeness: every output is known now or derivable at run time
	 * (produced by a node whose shape depends on data). */
	for (int i = 0; i < g->noutputs; i++) {
		struct mi_tensor *t = &g->tensors[g->outputs[i]];

		if (!tensor_known(t) &&
		    (t->producer < 0 || st[t->producer] != MI_NS_DYNAMIC))
			return mi_graph_err(g, NULL, -EINVAL,
				"graph output '%s' has no derivable shape",
				t->name);
	}
	return 0;
}

int mi_model_infer_shapes(struct mi_model *m, const int32_t *ndim,
			  const int64_t *dims)
{
	return infer_all(m, ndim, dims);
}

/*
 * The tensors device jobs read and write (copied in and out as dense
 * 8-bit NCHW tensors, devexec.c) get MI_TF_DENSE before CPU planning:
 * the int8 CPU kernels then produce and consume exactly those tensors in
 * that form (no C4 layout, no fusion through them), so the CPU part of a
 * placed model, and a failed job's nodes rerun on the CPU, run the same
 * int8 kernels as a CPU-only plan.  Without jobs nothing is marked and
 * the CPU plan is the CPU-only one.
 */
static void mark_job_borders(struct mi_model *m)
{
	struct mi_place *pl = m->place;
	struct mi_graph *g = &m->g;

	for (int i = 0; i < g->ntensors; i++)
		g->tensors[i].flags &= ~MI_TF_DENSE;
	for (int k = 0; pl && k < pl->njobs; k++) {
		const struct mi_lower_job *lj = pl->jobs[k].lj;

		for (int i = 0; lj && i < lj->nt; i++) {
			int t = lj->t[i].graph_tensor;

			if ((lj->t[i].role == MI_LT_INPUT ||
			     lj->t[i].role == MI_LT_OUTPUT) &&
			    t >= 0 && t < g->ntensors)
				g->tensors[t].flags |= MI_TF_DENSE;
		}
	}
}

int mi_model_prepare(struct mi_model *m, const int32_t *ndim,
		     const int64_t *dims)
{
	struct mi_graph *g = &m->g;
	struct mi_cpu_opts co = {
		.nthreads = m->opts.nthreads,
		.reference = !!(m->opts.flags & MI_MODEL_REFERENCE),
		.isa = m->opts.isa ? m->opts.isa - 1 : -1,
		.no_int8 = !!(m->opts.flags & MI_MODEL_NO_INT8),
		.no_spin = !!(m->opts.flags & MI_MODEL_NO_SPIN),
		.no_merge = !!(m->opts.flags & MI_MODEL_NO_MERGE),
		.ctx = mi_model_plan_ctx(m),
	};
	int err;

	err = infer_all(m, ndim, dims);
	if (err)
		return err;
	/* devices: on the normalized graph, before CPU kernels fuse it */
	err = mi_place_prepare(m);
	if (err) {
		if (!g->err[0])
			mi_graph_err(g, NULL, err, "placement failed");
		return err;
	}
	mark_job_borders(m);
	err = mi_cpu_plan(g, &co);
	if (err) {
		if (!g->err[0])
			mi_graph_err(g, NULL, err, "CPU planning failed");
		return err;
	}
	m->cpu_planned = true;
	/* The planner may have fused nodes away. */
	err = mi_graph_toposort(g);
	if (err)
		return err;
	if (!(m->opts.flags & MI_MODEL_NO_ARENA))
		mark_aliases(m);
	err = compute_lifetimes(m);
	if (!err)
		err = mi_devexec_bind(m);
	if (err)
		return err;
	if (!(m->opts.flags & MI_MODEL_NO_ARENA)) {
		err = plan_memory(m);
		if (err)
			return err;
	}
	m->prepared = true;
	return 0;
}

static int run_node(struct mi_model *m, struct mi_node *n, int ni)
{
	struct mi_graph *g = &m->g;
	bool serial;
	int err;

	if (!n->def)
		return mi_graph_err(g, n, -EOPNOTSUPP, "unsupported op");
	if (m->node_state[ni] == MI_NS_PRECOMPUTED)
		return 0;
	if (m->node_state[ni] == MI_NS_ALIAS) {
		struct mi_tensor *x = mi_in(g, n, 0), *y = mi_out(g, n, 0);
		size_t off;

		if (n->priv && !mi_cpu_view_offset(g, n, &off)) {
			y->data = (char *)x->data + off;
			y->nbytes = (size_t)mi_tensor_numel(y) *
				    mi_dtype_size(y->dtype);
			return 0;
		}
		y->data = x->data;
		y->nbytes = x->nbytes;
		return 0;
	}
	if (m->node_state[ni] == MI_NS_DYNAMIC) {
		err = n->def->infer(g, n);
		if (err == -EAGAIN)
			return mi_graph_err(g, n, -EINVAL,
				"output shape still unknown with all inputs present");
		if (err)
			return err;
		for (int j = 0; j < n->noutputs; j++) {
			struct mi_tensor *t = mi_out(g, n, j);

			if (t->flags & MI_TF_ARENA)
				mi_tensor_free_data(t);
			err = mi_tensor_alloc(t);
			if (err)
				return mi_graph_err(g, n, err,
					"cannot allocate output '%s'", t->name);
		}
	} else if (!n->priv) {
		for (int j = 0; j < n->noutputs; j++) {
			struct mi_tensor *t = mi_out(g, n, j);

			if (!t->data) {
				err = mi_tensor_alloc(t);
				if (err)
					return mi_graph_err(g, n, err,
						"cannot allocate output '%s'",
						t->name);
			} else {
				memset(t->data, 0, t->nbytes);
			}
		}
	} else {
		for (int j = 0; j < n->noutputs; j++) {
			struct mi_tensor *t = mi_out(g, n, j);

			if (!t->data && (err = mi_tensor_alloc(t)))
				return mi_graph_err(g, n, err,
					"cannot allocate output '%s'", t->name);
		}
	}
	serial = m->plan_ctx && m->plan_ctx->req && ni < m->plan_ctx->nnodes &&
		 m->plan_ctx->req[ni].serial;
	if (serial)
		serial = !mi_pool_serial(true);
	if (n->priv)
		err = mi_cpu_node_run(g, n);
	else
		err = n->def->run(g, n);
	if (serial)
		mi_pool_serial(false);
	if (err && !g->err[0])
		mi_graph_err(g, n, err, "execution failed");
	return err;
}

int mi_exec_node(struct mi_model *m, int ni)
{
	return run_node(m, &m->g.nodes[ni], ni);
}

/* Node timestamps for MI_MODEL_PROFILE: the wall clock, or with
 * MI_MODEL_PROFILE_CPU the process's CPU clock (all threads together): on
 * a shared machine a preempted node then does not look slow, which makes
 * same-binary comparisons of kernels usable under load. */
static uint64_t now_ns(bool cpu_clock)
{
	struct timespec ts;

	clock_gettime(cpu_clock ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC,
		      &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* MI_MODEL_PROFILE: counters per node index, grown before a run (the
 * node count only changes while planning, so steady state allocates
 * nothing). */
static int prof_reserve(struct mi_model *m)
{
	int n = m->g.nnodes;
	uint64_t *ns, *calls, *mins;

	if (n <= m->prof_cap)
		return 0;
	ns = realloc(m->prof_ns, n * sizeof(*ns));
	if (ns)
		m->prof_ns = ns;
	calls = realloc(m->prof_calls, n * sizeof(*calls));
	if (calls)
		m->prof_calls = calls;
	mins = realloc(m->prof_min, n * sizeof(*mins));
	if (mins)
		m->prof_min = mins;
	if (!ns || !calls || !mins)
		return mi_graph_err(&m->g, NULL, -ENOMEM, "out of memory");
	memset(ns + m->prof_cap, 0, (n - m->prof_cap) * sizeof(*ns));
	memset(calls + m->prof_cap, 0, (n - m->prof_cap) * sizeof(*calls));
	memset(mins + m->prof_cap, 0, (n - m->prof_cap) * sizeof(*mins));
	m->prof_cap = n;
	return 0;
}

int mi_model_exec(struct mi_model *m)
{
	struct mi_graph *g = &m->g;
	bool prof = m->opts.flags & MI_MODEL_PROFILE;
	bool cpu_clock = m->opts.flags & MI_MODEL_PROFILE_CPU;
	struct mi_place *pl = m->place && m->place->nbound ? m->place : NULL;
	uint64_t t0 = 0, run0 = now_ns(false);
	int err;

	g->err[0] = 0;
	g->err_op[0] = 0;
	if (prof && (err = prof_reserve(m)))
		return err;
	mi_devexec_run_begin(m);
	/* this thread waits for the pool's workers as this model says */
	mi_pool_caller_spin(!(m->opts.flags & MI_MODEL_NO_SPIN));
	for (int p = 0; p < g->norder; p++) {
		int ni = g->order[p];
		struct mi_node *n = &g->nodes[ni];

		if (pl) {
			err = mi_devexec_step(m, p);
			if (err)
				goto err_abort;
			if (mi_devexec_skips(pl, ni))
				continue;
		}
		if (prof)
			t0 = now_ns(cpu_clock);
		err = run_node(m, n, ni);
		if (err)
			goto err_abort;
		if (prof) {
			uint64_t dt = now_ns(cpu_clock) - t0;

			m->prof_ns[ni] += dt;
			if (!m->prof_calls[ni]++ || dt < m->prof_min[ni])
				m->prof_min[ni] = dt;
		}
		/* Free run-time allocated tensors after their last use. */
		for (int j = 0; j < n->ninputs; j++) {
			int x = n->inputs[j];

			if (x < 0 || m->last_use[x] != p)
				continue;
			struct mi_tensor *t = &g->tensors[x];

			if ((t->flags & MI_TF_OWNS_DATA) &&
			    !(t->flags & (MI_TF_CONST | MI_TF_SHAPEVAL |
					  MI_TF_INPUT | MI_TF_OUTPUT)) &&
			    t->producer >= 0 &&
			    m->node_state[t->producer] == MI_NS_DYNAMIC)
				mi_tensor_free_data(t);
		}
	}
	if (pl && (err = mi_devexec_step(m, g->norder)))
		goto err_abort;
	mi_devexec_run_end(m, now_ns(false) - run0);
	m->runs++;
	return 0;
err_abort:
	if (pl)
		mi_devexec_abort(m);
	return err;
}

int mi_model_profile_count(const struct mi_model *m)
{
	return m && (m->opts.flags & MI_MODEL_PROFILE) ? m->g.norder : 0;
}

int mi_model_profile(const struct mi_model *m, int index,
		     struct mi_node_profile *prof)
{
	const struct mi_node *n;
	int ni;

	if (!m || !prof || !(m->opts.flags & MI_MODEL_PROFILE))
		return mi_set_error(-EINVAL,
			"mi_model_profile: model not loaded with MI_MODEL_PROFILE");
	if (index < 0 || index >= m->g.norder)
		return mi_set_error(-ENOENT, "mi_model_profile: no node %d",
				    index);
	ni = m->g.order[index];
	n = &m->g.nodes[ni];
	memset(prof, 0, sizeof(*prof));
	prof->name = n->name ? n->name : "";
	prof->op_type = n->op_type;
	prof->fast = n->priv != NULL;
	if (ni < m->prof_cap) {
		prof->calls = m->prof_calls[ni];
		prof->ns = m->prof_ns[ni];
	}
	return 0;
}

int mi_model_profile_min(const struct mi_model *m, int index, uint64_t *min_ns)
{
	int ni;

	if (!m || !min_ns || !(m->opts.flags & MI_MODEL_PROFILE))
		return mi_set_error(-EINVAL,
			"mi_model_profile_min: model not loaded with MI_MODEL_PROFILE");
	if (index < 0 || index >= m->g.norder)
		return mi_set_error(-ENOENT, "mi_model_profile_min: no node %d",
				    index);
	ni = m->g.order[index];
	*min_ns = ni < m->prof_cap && m->prof_calls[ni] ? m->prof_min[ni] : 0;
	return 0;
}

void mi_model_profile_reset(struct mi_model *m)
{
	if (!m || !m->prof_cap)
		return;
	memset(m->prof_ns, 0, m->prof_cap * sizeof(*m->prof_ns));
	memset(m->prof_calls, 0, m->prof_cap * sizeof(*m->prof_calls));
	memset(m->prof_min, 0, m->prof_cap * sizeof(*m->prof_min));
}
