// SPDX-License-Identifier: MIT
/*
 * Device jobs in the executor (see place-impl.h for the model).
 *
 * Binding (once per set of input shapes) ties each lowered job to the
 * planned graph: its skip set, its submit and wait positions, the arena
 * lifetimes that make a CPU rerun at the wait position safe, and its
 * buffers: constants (buffer 0) uploaded once, activations (buffer 1)
 * mapped for the CPU.  A job that does not fit the planned graph (a CPU
 * kernel keeps a tensor it needs in a blocked layout, a value it needs is
 * made later, an intermediate it keeps on chip is read by a CPU node)
 * stays unbound: its nodes run on the CPU.
 *
 * Chaining: an input that another bound job writes is read in place
 * from the producer's activation buffer (the same BO on one device, a
 * PRIME import on another; the stream is rebound to it once, at bind),
 * and the producer's out-fence (a sync_file) is the consumer's in-fence,
 * so neither a CPU wait nor a copy comes between them.  Such outputs are
 * copied into their graph tensors only when the CPU reads them (or a
 * rerun needs them).
 *
 * Running: at its submit position the job's other inputs are copied into
 * its activation buffer and the job is queued; at its wait position the
 * CPU waits (bounded by the device's job timeout), then copies out what
 * the CPU reads.  A job that fails (time-out, DMA error, device lost)
 * marks the device down, counts a fault and runs its skipped nodes on the
 * CPU, so the inference still returns the right output; a device that is
 * down is not used until mi_dev_up() sees it answer.  A job whose
 * producer failed ran on garbage all the same (the kernel runs a job whose
 * in-fence failed, with status 0): it reruns on the CPU too.  A job that
 * timed out also caps its device's wall rate at what it proved and makes
 * the next run place the model again, with smaller jobs.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "debug.h"
#include "internal.h"
#include "plan/place-impl.h"

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static void job_unbind(struct mi_place_job *j)
{
	if (j->inflight) {
		struct mi_dev *d = j->cbo ? j->cbo->dev : NULL;

		if (d) {
			d->ops->wait(d, &j->dj, -1);
			d->ops->job_release(d, &j->dj);
		}
		j->inflight = false;
	}
	for (int b = 2; b < j->nbos; b++)
		mi_dev_bo_free(j->imp[b]);
	memset(j->imp, 0, sizeof(j->imp));
	memset(j->bos, 0, sizeof(j->bos));
	j->nbos = 0;
	mi_dev_bo_free(j->cbo);
	mi_dev_bo_free(j->abo);
	j->cbo = j->abo = NULL;
	free(j->in_src);
	free(j->off0);
	free(j->out_cpu);
	j->in_src = NULL;
	j->off0 = NULL;
	j->out_cpu = NULL;
	j->bound = false;
	j->state = MI_PJ_IDLE;
}

void mi_devexec_unbind(struct mi_model *m)
{
	struct mi_place *pl = m->place;

	if (!pl)
		return;
	for (int k = 0; k < pl->njobs; k++)
		job_unbind(&pl->jobs[k]);
	pl->nbound = 0;
	for (int s = 0; s < pl->ndevs; s++)
		pl->st[s].nodes = 0;
}

static bool in_list(const int *v, int n, int x)
{
	for (int i = 0; i < n; i++)
		if (v[i] == x)
			return true;
	return false;
}

static const struct mi_lower_tensor *lt_of(const struct mi_lower_job *lj,
					   int t, int role)
{
	for (int i = 0; i < lj->nt; i++)
		if (lj->t[i].graph_tensor == t && (int)lj->t[i].role == role)
			return &lj->t[i];
	return NULL;
}

struct bind_ctx {
	struct mi_model *m;
	int *lp;		/* per tensor: live producer node, -1 */
	bool chain;		/* chain jobs (else every input is copied) */
};

/*
 * Does job k stand for node ni although it runs on the CPU: a node two
 * jobs stand for (see mi_devexec_bind) that k's CPU rerun runs again.
 */
static bool shared_of(const struct mi_model *m, int k, int ni)
{
	const struct mi_place *pl = m->place;
	const struct mi_node *n = &m->g.nodes[ni];
	int no = 0;

	if (pl->node_job[ni] != -1 || !pl->shared_node[ni])
		return false;
	for (int o = 0; o < n->noutputs; o++) {
		if (n->outputs[o] < 0)
			continue;
		if (!in_list(pl->jobs[k].prod, pl->jobs[k].nprod, n->outputs[o]))
			return false;
		no++;
	}
	return no > 0;
}

/* Is tensor t ready at position p0 of job k (for reading)? */
static bool ready(struct bind_ctx *c, int k, int t, int p0)
{
	struct mi_place *pl = c->m->place;
	struct mi_graph *g = &c->m->g;
	int pr = c->lp[t], oj;

	if (pr < 0)
		return g->tensors[t].flags & (MI_TF_CONST | MI_TF_INPUT);
	if (c->m->node_state[pr] == MI_NS_DYNAMIC)
		return false;
	oj = pl->node_job[pr];
	if (oj == k || shared_of(c->m, k, pr))
		return true;
	if (oj >= 0 && pl->jobs[oj].bound)
		return pl->jobs[oj].p0 < p0;
	return c->m->pos_of[pr] < p0;
}

/* Distinct bound jobs other than c whose outputs job c reads. */
static int nproducers(struct bind_ctx *c, int cj)
{
	struct mi_place *pl = c->m->place;
	const struct mi_lower_job *lj = pl->jobs[cj].lj;
	int seen[MI_PLACE_JOB_BOS + 1], n = 0;

	for (int i = 0; i < lj->nt; i++) {
		int pr, k;
		bool dup = false;

		if (lj->t[i].role != MI_LT_INPUT || lj->t[i].graph_tensor < 0)
			continue;
		pr = c->lp[lj->t[i].graph_tensor];
		k = pr >= 0 ? pl->node_job[pr] : -1;
		if (k < 0 || k == cj || !pl->jobs[k].bound)
			continue;
		for (int s = 0; s < n; s++)
			dup |= seen[s] == k;
		if (!dup && n <= MI_PLACE_JOB_BOS)
			seen[n++] = k;
	}
	return n;
}

/*
 * Can job cj read job k's outputs in place, waiting for k's out-fence on
 * the device: k's device exports fences and either both run on one
 * device (the same BO) or k's buffer can be PRIME-shared with cj's.
 */
static bool chainable(struct bind_ctx *c, int k, int cj)
{
	struct mi_place *pl = c->m->place;
	const struct mi_dev *dk, *dc;

	if (!c->chain || k == cj || !pl->jobs[k].bound || !pl->jobs[cj].bound)
		return false;
	dk = pl->devs[pl->jobs[k].slot];
	dc = pl->devs[pl->jobs[cj].slot];
	if (!dk->ops->job_fence)
		return false;
	if (dk != dc && !(dk->ops->bo_export && dc->ops->bo_import))
		return false;
	return nproducers(c, cj) <= MI_PLACE_JOB_BOS - 2;
}

static bool dense(const struct mi_tensor *x, const struct mi_lower_tensor *lt)
{
	size_t b = (size_t)mi_tensor_numel(x) * mi_dtype_size(x->dtype);

	return mi_dtype_size(x->dtype) == 1 && lt->bytes == b &&
	       (!x->phys_bytes || x->phys_bytes == b);
}

/* Check job k against the graph and the other bound jobs; set p0/pw. */
/* Job k does not fit (MI_DEBUG=place says why); false. */
static bool unfit(struct bind_ctx *c, int k, const char *why, int t)
{
	if (mi_debug("place"))
		fprintf(stderr, "metainfer: job %d not used: %s%s%s\n", k, why,
			t >= 0 ? ": " : "", t >= 0 ? c->m->g.tensors[t].name : "");
	return false;
}

static bool job_fits(struct bind_ctx *c, int k)
{
	struct mi_model *m = c->m;
	struct mi_place *pl = m->place;
	struct mi_graph *g = &m->g;
	struct mi_place_job *j = &pl->jobs[k];
	int p0 = INT_MAX, pw = g->norder;

	for (int p = 0; p < g->norder; p++)
		if (pl->node_job[g->order[p]] == k && p < p0)
			p0 = p;
	if (p0 == INT_MAX)
		return unfit(c, k, "it stands for no planned node", -1);
	j->p0 = p0;
	for (int i = 0; i < j->lj->nt; i++) {
		const struct mi_lower_tensor *lt = &j->lj->t[i];
		const struct mi_tensor *x;

		if (lt->role != MI_LT_INPUT && lt->role != MI_LT_OUTPUT)
			continue;
		if (lt->graph_tensor < 0 || lt->graph_tensor >= g->ntensors)
			return unfit(c, k, "a border tensor is not in the graph", -1);
		x = &g->tensors[lt->graph_tensor];
		if (!dense(x, lt))
			return unfit(c, k, "not dense 8-bit in the CPU plan",
				     lt->graph_tensor);
		if (lt->role == MI_LT_INPUT &&
		    !ready(c, k, lt->graph_tensor, p0))
			return unfit(c, k, "input made after its submit",
				     lt->graph_tensor);
		if (lt->role == MI_LT_OUTPUT &&
		    (c->lp[lt->graph_tensor] < 0 ||
		     pl->node_job[c->lp[lt->graph_tensor]] != k))
			return unfit(c, k, "output made by another node",
				     lt->graph_tensor);
	}
	for (int p = 0; p < g->norder; p++) {
		int ni = g->order[p];
		struct mi_node *n = &g->nodes[ni];
		int oj = pl->node_job[ni];
		bool skipped = oj >= 0 && pl->jobs[oj].bound;

		for (int i = 0; i < n->ninputs; i++) {
			int t = n->inputs[i];

			if (t < 0)
				continue;
			if (oj < 0 && shared_of(m, k, ni) && !ready(c, k, t, p0))
				return unfit(c, k, "a shared node's input made after its submit",
					     t);
			if (oj == k) {
				/* what a CPU rerun needs */
				if (!ready(c, k, t, p0))
					return unfit(c, k,
						     "a rerun input made after its submit",
						     t);
				continue;
			}
			if (c->lp[t] < 0 || pl->node_job[c->lp[t]] != k)
				continue;
			/* read outside the job: must be an output of it */
			if (!lt_of(j->lj, t, MI_LT_OUTPUT))
				return unfit(c, k, "read outside, not an output",
					     t);
			/* a job that chains to k waits on the device */
			if (skipped && oj != k) {
				if (!chainable(c, k, oj) && pl->jobs[oj].p0 < pw)
					pw = pl->jobs[oj].p0;
			} else if (!skipped && p < pw) {
				pw = p;
			}
		}
	}
	for (int i = 0; i < g->noutputs; i++) {
		int t = g->outputs[i];

		if (c->lp[t] >= 0 && pl->node_job[c->lp[t]] == k &&
		    !lt_of(j->lj, t, MI_LT_OUTPUT))
			return unfit(c, k, "model output not an output", t);
	}
	if (pw < p0)
		return unfit(c, k, "waited before its submit", -1);
	j->pw = pw;
	return true;
}

static int lowering_rebind(struct mi_lower_job *lj, int ti, uint32_t b,
			   uint64_t off)
{
	const struct mi_lowering *l = mi_place_lowering();

	return l && l->rebind ? l->rebind(lj, ti, b, off) : -EOPNOTSUPP;
}

/* Buffers of a bound job: constants uploaded now. */
static int job_buffers(struct mi_model *m, struct mi_place_job *j)
{
	struct mi_dev *d = m->place->devs[j->slot];
	int err;

	err = mi_dev_bo_alloc(d, j->lj->const_bytes ? j->lj->const_bytes : 64,
			      &j->cbo);
	if (!err)
		err = mi_dev_bo_alloc(d, j->lj->act_bytes ? j->lj->act_bytes : 64,
				      &j->abo);
	if (err)
		return err;
	for (int i = 0; i < j->lj->nt; i++) {
		const struct mi_lower_tensor *lt = &j->lj->t[i];

		if (lt->role != MI_LT_CONST || !lt->data)
			continue;
		if (lt->offset + lt->bytes > j->cbo->size)
			return -EINVAL;
		memcpy((char *)j->cbo->map + lt->offset, lt->data, lt->bytes);
		m->place->st[j->slot].bytes_const += lt->bytes;
	}
	j->bos[0] = j->cbo;
	j->bos[1] = j->abo;
	return 0;
}

/* Lifetimes: everything the job's nodes touch lives over [p0, pw]. */
static void extend_lifetimes(struct mi_model *m, int k)
{
	struct mi_place *pl = m->place;
	struct mi_graph *g = &m->g;
	struct mi_place_job *j = &pl->jobs[k];

	for (int p = 0; p < g->norder; p++) {
		struct mi_node *n = &g->nodes[g->order[p]];

		if (pl->node_job[g->order[p]] != k &&
		    !shared_of(m, k, g->order[p]))
			continue;
		for (int i = 0; i < n->ninputs; i++)
			if (n->inputs[i] >= 0 && m->last_use[n->inputs[i]] < j->pw)
				m->last_use[n->inputs[i]] = j->pw;
		for (int o = 0; o < n->noutputs; o++) {
			int t = n->outputs[o];

			if (t < 0)
				continue;
			if (pl->tfirst[t] > j->p0)
				pl->tfirst[t] = j->p0;
			if (m->last_use[t] < j->pw)
				m->last_use[t] = j->pw;
		}
	}
}

/*
 * Chains (after the jobs fit): which inputs of each bound job are read in
 * place from a producer job's buffer (in_src, src[]), which outputs the
 * CPU needs copied (out_cpu), and the producers' wait positions brought
 * forward to their consumers' (the consumer's finish waits for them).
 */
static int plan_chains(struct bind_ctx *c)
{
	struct mi_model *m = c->m;
	struct mi_place *pl = m->place;
	struct mi_graph *g = &m->g;

	for (int k = 0; k < pl->njobs; k++) {
		struct mi_place_job *j = &pl->jobs[k];

		if (!j->bound)
			continue;
		j->in_src = malloc((j->lj->nt + 1) * sizeof(*j->in_src));
		j->off0 = calloc(j->lj->nt + 1, sizeof(*j->off0));
		j->out_cpu = calloc(j->lj->nt + 1, sizeof(*j->out_cpu));
		if (!j->in_src || !j->off0 || !j->out_cpu)
			return -ENOMEM;
		j->nbos = 2;
		for (int i = 0; i < j->lj->nt; i++) {
			const struct mi_lower_tensor *lt = &j->lj->t[i];
			int pr, pk, b;

			j->in_src[i] = -1;
			if (lt->role != MI_LT_INPUT)
				continue;
			pr = c->lp[lt->graph_tensor];
			pk = pr >= 0 ? pl->node_job[pr] : -1;
			if (pk < 0 || !chainable(c, pk, k) ||
			    !lt_of(pl->jobs[pk].lj, lt->graph_tensor,
				   MI_LT_OUTPUT))
				continue;
			for (b = 2; b < j->nbos && j->src[b] != pk; b++)
				;
			if (b == j->nbos)
				j->src[j->nbos++] = pk;
			j->in_src[i] = pk;
		}
	}
	/* outputs: copied out unless every reader is a job chained to it */
	for (int k = 0; k < pl->njobs; k++) {
		struct mi_place_job *j = &pl->jobs[k];

		for (int i = 0; j->bound && i < j->lj->nt; i++) {
			int t = j->lj->t[i].graph_tensor;

			if (j->lj->t[i].role != MI_LT_OUTPUT)
				continue;
			for (int o = 0; o < g->noutputs; o++)
				j->out_cpu[i] |= g->outputs[o] == t;
			for (int p = 0; p < g->norder && !j->out_cpu[i]; p++) {
				int ni = g->order[p], oj = pl->node_job[ni];
				struct mi_node *n = &g->nodes[ni];
				const struct mi_place_job *cj;
				bool reads = false, chained = false;

				for (int x = 0; x < n->ninputs; x++)
					reads |= n->inputs[x] == t;
				if (!reads || oj == k)
					continue;
				cj = oj >= 0 && pl->jobs[oj].bound ? &pl->jobs[oj] : NULL;
				for (int x = 0; cj && x < cj->lj->nt; x++)
					chained |= cj->lj->t[x].graph_tensor == t &&
						   cj->in_src[x] == k;
				j->out_cpu[i] = !chained;
			}
		}
	}
	/* producers come before consumers (topological unit order) */
	for (int k = pl->njobs - 1; k >= 0; k--) {
		struct mi_place_job *j = &pl->jobs[k];

		for (int b = 2; j->bound && b < j->nbos; b++)
			if (pl->jobs[j->src[b]].pw > j->pw)
				pl->jobs[j->src[b]].pw = j->pw;
	}
	return 0;
}

/* Buffers of the chains: producers' BOs (imported from other devices).
 * -EAGAIN: not possible, bind without chains. */
static int chain_buffers(struct mi_model *m, int k)
{
	struct mi_place *pl = m->place;
	struct mi_place_job *j = &pl->jobs[k];
	struct mi_dev *d = pl->devs[j->slot];

	for (int b = 2; b < j->nbos; b++) {
		struct mi_place_job *pj = &pl->jobs[j->src[b]];

		if (pj->abo->dev == d) {
			j->bos[b] = pj->abo;
			continue;
		}
		if (pj->abo->dev->ops->bo_export(pj->abo) ||
		    d->ops->bo_import(d, pj->abo->prime_fd, pj->abo->size,
				      &j->imp[b])) {
			mi_clear_error();
			return -EAGAIN;
		}
		j->bos[b] = j->imp[b];
	}
	return 0;
}

/* Point chained inputs (or, undo: all of them back) at their buffers. */
static int chain_rebind(struct mi_place *pl, int k, bool undo)
{
	struct mi_place_job *j = &pl->jobs[k];
	int err = 0;

	for (int i = 0; i < j->lj->nt && !err; i++) {
		const struct mi_lower_tensor *po;
		int b;

		if (j->in_src[i] < 0)
			continue;
		if (undo) {
			lowering_rebind(j->lj, i, 1, j->off0[i]);
			continue;
		}
		for (b = 2; j->src[b] != j->in_src[i]; b++)
			;
		po = lt_of(pl->jobs[j->in_src[i]].lj, j->lj->t[i].graph_tensor,
			   MI_LT_OUTPUT);
		j->off0[i] = j->lj->t[i].offset;
		err = lowering_rebind(j->lj, i, b, po->offset);
	}
	if (err)
		mi_clear_error();
	return err ? -EAGAIN : 0;
}

static int bind_once(struct mi_model *m, bool chain)
{
	struct mi_place *pl = m->place;
	struct mi_graph *g = &m->g;
	struct bind_ctx c = { .m = m, .chain = chain };
	bool changed = true, *sh;
	int err = 0, *nj, *tf;

	mi_devexec_unbind(m);
	nj = realloc(pl->node_job, (g->nnodes + 1) * sizeof(*nj));
	if (nj)
		pl->node_job = nj;
	tf = realloc(pl->tfirst, (g->ntensors + 1) * sizeof(*tf));
	if (tf)
		pl->tfirst = tf;
	sh = realloc(pl->shared_node, (g->nnodes + 1) * sizeof(*sh));
	if (sh)
		pl->shared_node = sh;
	c.lp = malloc((g->ntensors + 1) * sizeof(*c.lp));
	if (!nj || !tf || !sh || !c.lp) {
		free(c.lp);
		return -ENOMEM;
	}
	pl->nnodes = g->nnodes;
	pl->ntensors = g->ntensors;
	for (int i = 0; i < g->nnodes; i++) {
		nj[i] = -1;
		sh[i] = false;
	}
	for (int i = 0; i < g->ntensors; i++) {
		tf[i] = INT_MAX;
		c.lp[i] = -1;
	}
	for (int p = 0; p < g->norder; p++) {
		struct mi_node *n = &g->nodes[g->order[p]];

		for (int o = 0; o < n->noutputs; o++)
			if (n->outputs[o] >= 0)
				c.lp[n->outputs[o]] = g->order[p];
	}
	/* skip sets: static live nodes all of whose outputs a job writes */
	for (int k = 0; k < pl->njobs; k++) {
		struct mi_place_job *j = &pl->jobs[k];

		if (!j->lj)
			continue;
		j->bound = true;
		for (int p = 0; p < g->norder; p++) {
			int ni = g->order[p], no = 0;
			struct mi_node *n = &g->nodes[ni];
			bool all = n->noutputs > 0;

			if (m->node_state[ni] != MI_NS_STATIC)
				continue;
			for (int o = 0; all && o < n->noutputs; o++) {
				if (n->outputs[o] < 0)
					continue;
				all = in_list(j->prod, j->nprod, n->outputs[o]);
				no++;
			}
			if (all && no)
				nj[ni] = nj[ni] == -1 || nj[ni] == k ? k : -2;
		}
	}
	/* a node two jobs stand for (a DequantizeLinear whose value two
	 * units read, each fused into its own job) runs on the CPU, where
	 * neither job's submit waits for the other; the CPU rerun of either
	 * job runs it again (shared_of) */
	for (int i = 0; i < g->nnodes; i++) {
		pl->shared_node[i] = nj[i] == -2;
		if (nj[i] == -2)
			nj[i] = -1;
	}
	/* every job's submit position before any is checked: job_fits
	 * compares a reader job's p0 with its own wait position */
	for (int k = 0; k < pl->njobs; k++) {
		pl->jobs[k].p0 = INT_MAX;
		for (int p = 0; p < g->norder; p++)
			if (nj[g->order[p]] == k && p < pl->jobs[k].p0)
				pl->jobs[k].p0 = p;
	}
	while (changed) {
		changed = false;
		for (int k = 0; k < pl->njobs; k++)
			if (pl->jobs[k].bound && !job_fits(&c, k)) {
				pl->jobs[k].bound = false;
				changed = true;
			}
	}
	err = plan_chains(&c);
	free(c.lp);
	/* a job whose buffers fail would leave its chains and waits wrong:
	 * bind again without chains (then its nodes just run on the CPU) */
	for (int k = 0; k < pl->njobs && !err; k++) {
		struct mi_place_job *j = &pl->jobs[k];

		if (!j->bound)
			continue;
		err = job_buffers(m, j);
		if (err && !chain) {
			job_unbind(j);
			err = 0; /* its nodes run on the CPU */
			continue;
		}
		if (err) {
			mi_clear_error();
			err = -EAGAIN;
		}
	}
	for (int k = 0; k < pl->njobs && !err; k++)
		if (pl->jobs[k].bound)
			err = chain_buffers(m, k);
	for (int k = 0; k < pl->njobs && !err; k++)
		if (pl->jobs[k].bound && (err = chain_rebind(pl, k, false)))
			for (int u = 0; u <= k; u++)
				if (pl->jobs[u].bound)
					chain_rebind(pl, u, true);
	if (err) {
		mi_devexec_unbind(m);
		return err;
	}
	for (int k = 0; k < pl->njobs; k++) {
		if (!pl->jobs[k].bound)
			continue;
		extend_lifetimes(m, k);
		pl->nbound++;
	}
	for (int p = 0; p < g->norder; p++)
		pl->st[mi_place_node_job(m, g->order[p]) < 0 ? 0 :
		       pl->jobs[nj[g->order[p]]].slot].nodes++;
	return 0;
}

int mi_devexec_bind(struct mi_model *m)
{
	int err;

	if (!m->place)
		return 0;
	err = bind_once(m, true);
	if (err == -EAGAIN)
		err = bind_once(m, false);
	return err;
}

/* Copy job k's outputs that are still only in its buffer into their
 * graph tensors (a consumer reruns on the CPU). */
static int materialize(struct mi_model *m, int k)
{
	struct mi_place *pl = m->place;
	struct mi_graph *g = &m->g;
	struct mi_place_job *j = &pl->jobs[k];
	int err;

	if (j->state != MI_PJ_DEV || j->copied)
		return 0;
	for (int i = 0; i < j->lj->nt; i++) {
		const struct mi_lower_tensor *lt = &j->lj->t[i];
		struct mi_tensor *x;

		if (lt->role != MI_LT_OUTPUT || j->out_cpu[i])
			continue;
		x = &g->tensors[lt->graph_tensor];
		if (!x->data && (err = mi_tensor_alloc(x)))
			return mi_graph_err(g, NULL, err,
				"cannot allocate output '%s'", x->name);
		memcpy(x->data, (char *)j->abo->map + lt->offset, lt->bytes);
		pl->st[j->slot].bytes_out += lt->bytes;
	}
	j->copied = true;
	return 0;
}

static int job_finish(struct mi_model *m, int k);

/* Run job k's nodes on the CPU (its chained inputs copied out first). */
static int rerun(struct mi_model *m, int k)
{
	struct mi_place *pl = m->place;
	struct mi_graph *g = &m->g;
	struct mi_place_job *j = &pl->jobs[k];
	uint64_t t0;
	int err = 0;

	for (int b = 2; b < j->nbos && !err; b++) {
		if (pl->jobs[j->src[b]].inflight)
			err = job_finish(m, j->src[b]);
		if (!err)
			err = materialize(m, j->src[b]);
	}
	t0 = now_ns();
	for (int p = 0; p < g->norder && !err; p++)
		if (pl->node_job[g->order[p]] == k ||
		    shared_of(m, k, g->order[p]))
			err = mi_exec_node(m, g->order[p]);
	j->state = MI_PJ_CPU;
	j->copied = true;
	pl->st[0].busy_ns += now_ns() - t0;
	return err;
}

static int job_failed(struct mi_model *m, int k, int status)
{
	struct mi_place *pl = m->place;
	struct mi_dev *d = pl->devs[pl->jobs[k].slot];

	pl->st[pl->jobs[k].slot].faults++;
	mi_dev_mark_down(d, status);
	if (status == -ETIMEDOUT && d->caps.job_timeout_ms) {
		/* slower than measured: size the jobs again before the
		 * next run */
		mi_dev_wall_rate_cap(d, pl->jobs[k].lj->macs,
				     d->caps.job_timeout_ms * 1000000ull);
		pl->replan = true;
		/* an applied plan's jobs did not fit either: the budget
		 * rule groups from now on (its devices stay pinned) */
		free(pl->jpin);
		pl->jpin = NULL;
	}
	return rerun(m, k);
}

/* In-fences and inputs of chained job k from its producers. */
static int chain_inputs(struct mi_model *m, int k, int *fds, int *nfds)
{
	struct mi_place *pl = m->place;
	struct mi_graph *g = &m->g;
	struct mi_place_job *j = &pl->jobs[k];
	int err;

	j->fenced = 0;
	for (int b = 2; b < j->nbos; b++) {
		struct mi_place_job *pj = &pl->jobs[j->src[b]];
		struct mi_dev *pd = pl->devs[pj->slot];

		if (pj->state == MI_PJ_INFLIGHT &&
		    pd->ops->job_fence(pd, &pj->dj, &fds[*nfds])) {
			/* no fence: wait for it here instead */
			mi_clear_error();
			err = job_finish(m, j->src[b]);
			if (err)
				return err;
		} else if (pj->state == MI_PJ_INFLIGHT) {
			(*nfds)++;
			j->fenced |= 1u << b;
		}
	}
	for (int i = 0; i < j->lj->nt; i++) {
		const struct mi_lower_tensor *lt = &j->lj->t[i];
		struct mi_place_job *pj;

		if (j->in_src[i] < 0)
			continue;
		pj = &pl->jobs[j->in_src[i]];
		if (pj->state == MI_PJ_CPU) {
			/* the producer ran on the CPU: its buffer is stale */
			memcpy((char *)j->bos[lt->bo_index]->map + lt->offset,
			       g->tensors[lt->graph_tensor].data, lt->bytes);
			pl->st[j->slot].bytes_in += lt->bytes;
			continue;
		}
		pl->st[j->slot].shared++;
		pl->st[j->slot].shared_bytes += lt->bytes;
	}
	return 0;
}

static int job_start(struct mi_model *m, int k)
{
	struct mi_place *pl = m->place;
	struct mi_graph *g = &m->g;
	struct mi_place_job *j = &pl->jobs[k];
	struct mi_dev *d = pl->devs[j->slot];
	struct mi_dev_job *dj = &j->dj, *djp = dj;
	int fds[MI_PLACE_JOB_BOS], nfds = 0, err;

	if (!mi_dev_up(d))
		return rerun(m, k);
	err = chain_inputs(m, k, fds, &nfds);
	if (err)
		return err;
	for (int i = 0; i < j->lj->nt; i++) {
		const struct mi_lower_tensor *lt = &j->lj->t[i];
		const struct mi_tensor *x;

		if (lt->role != MI_LT_INPUT || j->in_src[i] >= 0)
			continue;
		x = &g->tensors[lt->graph_tensor];
		memcpy((char *)j->abo->map + lt->offset, x->data, lt->bytes);
		pl->st[j->slot].bytes_in += lt->bytes;
	}
	memset(dj, 0, sizeof(*dj));
	dj->cmds = j->lj->cmds;
	dj->cmds_size = j->lj->cmds_size;
	dj->bos = j->bos;
	dj->nbos = j->nbos;
	dj->in_fences = nfds ? fds : NULL;
	dj->nin_fences = nfds;
	dj->priority = DRM_METAINFER_PRIORITY_NORMAL;
	if (m->opts.flags & MI_MODEL_NO_URING)
		dj->flags |= MI_DEV_JOB_NO_URING;
	err = d->ops->submit(d, &djp, 1);
	/* submit took what it needs of the fences (syncobjs, or waited) */
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
	dj->in_fences = NULL;
	dj->nin_fences = 0;
	if (err) {
		mi_clear_error();
		return job_failed(m, k, err);
	}
	j->inflight = true;
	j->state = MI_PJ_INFLIGHT;
	return 0;
}

static int job_finish(struct mi_model *m, int k)
{
	struct mi_place *pl = m->place;
	struct mi_graph *g = &m->g;
	struct mi_place_job *j = &pl->jobs[k];
	struct mi_dev *d = pl->devs[j->slot];
	bool stale = false;
	int err;

	/* producers first: their status decides whether k's input was right */
	for (int b = 2; b < j->nbos; b++) {
		if (pl->jobs[j->src[b]].inflight &&
		    (err = job_finish(m, j->src[b])))
			return err;
		stale |= (j->fenced & (1u << b)) &&
			 pl->jobs[j->src[b]].state == MI_PJ_CPU;
	}
	j->inflight = false;
	err = d->ops->wait(d, &j->dj, -1);
	if (err == -ETIME)
		j->dj.status = -ETIMEDOUT;
	else if (err)
		j->dj.status = err;
	d->ops->job_release(d, &j->dj);
	if (j->dj.status) {
		mi_clear_error();
		return job_failed(m, k, j->dj.status);
	}
	pl->st[j->slot].busy_ns += j->dj.busy_ns;
	pl->st[j->slot].jobs++;
	if (stale)
		return rerun(m, k); /* a producer failed after k was queued */
	j->state = MI_PJ_DEV;
	j->copied = true;
	for (int i = 0; i < j->lj->nt; i++) {
		const struct mi_lower_tensor *lt = &j->lj->t[i];
		struct mi_tensor *x;

		if (lt->role != MI_LT_OUTPUT)
			continue;
		if (!j->out_cpu[i]) {
			j->copied = false;
			continue;
		}
		x = &g->tensors[lt->graph_tensor];
		if (!x->data && (err = mi_tensor_alloc(x)))
			return mi_graph_err(g, NULL, err,
				"cannot allocate output '%s'", x->name);
		memcpy(x->data, (char *)j->abo->map + lt->offset, lt->bytes);
		pl->st[j->slot].bytes_out += lt->bytes;
	}
	return 0;
}

int mi_devexec_step(struct mi_model *m, int p)
{
	struct mi_place *pl = m->place;
	uint64_t t0 = now_ns();
	int err = 0;

	for (int k = 0; k < pl->njobs && !err; k++)
		if (pl->jobs[k].bound && pl->jobs[k].inflight &&
		    pl->jobs[k].pw <= p)
			err = job_finish(m, k);
	for (int k = 0; k < pl->njobs && !err; k++)
		if (pl->jobs[k].bound && pl->jobs[k].p0 == p)
			err = job_start(m, k);
	pl->step_ns += now_ns() - t0;
	return err;
}

void mi_devexec_abort(struct mi_model *m)
{
	struct mi_place *pl = m->place;

	for (int k = 0; pl && k < pl->njobs; k++) {
		struct mi_place_job *j = &pl->jobs[k];
		struct mi_dev *d = pl->devs[j->slot];

		if (!j->inflight)
			continue;
		d->ops->wait(d, &j->dj, -1);
		d->ops->job_release(d, &j->dj);
		j->inflight = false;
	}
}

void mi_devexec_run_begin(struct mi_model *m)
{
	struct mi_place *pl = m->place;

	if (!pl)
		return;
	pl->step_ns = 0;
	for (int k = 0; k < pl->njobs; k++) {
		pl->jobs[k].state = MI_PJ_IDLE;
		pl->jobs[k].copied = false;
	}
}

/* The CPU's wall time of a run: all of it but the time spent in device
 * steps (copies, submits, waits); CPU reruns in those steps count
 * themselves.  For the CPU, jobs counts the runs. */
void mi_devexec_run_end(struct mi_model *m, uint64_t wall_ns)
{
	struct mi_place *pl = m->place;

	if (!pl)
		return;
	pl->st[0].busy_ns += wall_ns > pl->step_ns ? wall_ns - pl->step_ns : 0;
	pl->st[0].jobs++;
	if (pl->replan) {
		pl->replan = false;
		m->prepared = false; /* the next run places and binds again */
	}
}

/* ---- public API ------------------------------------------------------------ */
int mi_model_device_count(const struct mi_model *m)
{
	if (!m)
		return mi_set_error(-EINVAL, "mi_model_device_count: NULL model");
	return m->place ? m->place->ndevs : 1;
}

int mi_model_device_stats(const struct mi_model *m, int index,
			  struct mi_device_stats *st)
{
	const struct mi_place *pl;

	if (!m || !st)
		return mi_set_error(-EINVAL, "mi_model_device_stats: bad arguments");
	pl = m->place;
	if (!pl || index < 0 || index >= pl->ndevs)
		return mi_set_error(-ENOENT, "mi_model_device_stats: no device %d",
				    index);
	memset(st, 0, sizeof(*st));
	st->device = pl->devs[index]->name;
	st->busy_ns = pl->st[index].busy_ns;
	st->jobs = pl->st[index].jobs;
	st->faults = pl->st[index].faults;
	st->bytes_in = pl->st[index].bytes_in;
	st->bytes_out = pl->st[index].bytes_out;
	st->nodes = pl->st[index].nodes;
	st->bytes_const = pl->st[index].bytes_const;
	st->shared = pl->st[index].shared;
	st->shared_bytes = pl->st[index].shared_bytes;
	return 0;
}

void mi_model_device_stats_reset(struct mi_model *m)
{
	if (!m || !m->place)
		return;
	for (int s = 0; s < m->place->ndevs; s++) {
		uint64_t nodes = m->place->st[s].nodes;

		memset(&m->place->st[s], 0, sizeof(m->place->st[s]));
		m->place->st[s].nodes = nodes;
	}
}
