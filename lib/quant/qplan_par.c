// SPDX-License-Identifier: MIT
/*
 * Planner step for int8 execution: the thread pool glue (parallel-for
 * over items, ranges and rows) its nodes run on.
 */
#include "quant/qplan-impl.h"

/* ---- thread pool glue -------------------------------------------------- */

/*
 * The threads claim ranges of `grain` indices from a counter on its own
 * cache line (one atomic per range, not per index; a claim does not
 * invalidate the line holding fn/arg/n that every thread reads).  The
 * grain is even from 2 on: consecutive indices are often neighbouring
 * 32-pixel panels whose planar uint8 outputs share cache lines, so a pair
 * is written by one thread (no false sharing).  Ranges are claimed
 * dynamically: a worker that joins late takes what is left.
 */
struct pf_ctx {
	atomic_int next __attribute__((aligned(64)));
	int n __attribute__((aligned(64)));
	int grain;
	mi_qpar_fn fn;
	void *arg;
};

int qp_pool_threads = 1;
/* Threads of the node running now: workspaces were sized for the count
 * the node was planned with, whatever other models planned since. */
__thread int qp_cur_threads = 1;

#define PF_RANGES 8 /* ranges per thread */

static void pf_worker(void *ctx, int t, int nt)
{
	struct pf_ctx *c = ctx;
	int b;

	while ((b = atomic_fetch_add_explicit(&c->next, c->grain, memory_order_relaxed)) < c->n) {
		int e = c->n - b < c->grain ? c->n : b + c->grain;

		for (int i = b; i < e; i++)
			c->fn(c->arg, i, t);
	}
}

static int pf_grain(int n, int nt)
{
	int g = n / (nt * PF_RANGES);

	return g < 2 ? 1 : g + (g & 1);
}

#define PF_MAXT 8

struct pf_blk {
	atomic_int next __attribute__((aligned(64)));
	int end;
};

struct pf_actx {
	struct pf_blk blk[PF_MAXT];
	int grain;
	mi_qpar_fn fn;
	void *arg;
};

/*
 * Claims shrink towards the end of a block (guided): a claim takes
 * 1 / (2 nt) of what is left, at most the grain and at least 2 items
 * (1 when the grain is 1), so the thread that finishes first waits for
 * the other one's last small claim, not a grain of 1/(8 nt) of the node
 * (the callers' waits at the end of the int8 convs were about one
 * grain).  Sizes stay even: pairs of panels stay on one thread.  Which
 * thread computes an item never changes its bytes.
 */
static void pf_claim_guided(struct pf_actx *c, struct pf_blk *k, int t, int nt)
{
	int b = atomic_load_explicit(&k->next, memory_order_relaxed);

	while (b < k->end) {
		int g = (k->end - b) / (2 * nt), e;

		g = g < c->grain ? g : c->grain;
		g = c->grain < 2 ? 1 : g < 2 ? 2 : g + (g & 1);
		if (!atomic_compare_exchange_weak_explicit(&k->next, &b, b + g,
							   memory_order_relaxed,
							   memory_order_relaxed))
			continue;
		e = k->end - b < g ? k->end : b + g;
		for (int i = b; i < e; i++)
			c->fn(c->arg, i, t);
		b = atomic_load_explicit(&k->next, memory_order_relaxed);
	}
}

static void pf_worker_aff(void *ctx, int t, int nt)
{
	struct pf_actx *c = ctx;

	for (int k = 0; k < nt; k++)
		pf_claim_guided(c, &c->blk[(t + k) % nt], t, nt);
}

void qp_pool_for(int n, mi_qpar_fn fn, void *arg)
{
	struct pf_ctx c = { .n = n, .fn = fn, .arg = arg };
	int nt = qp_cur_threads < n ? qp_cur_threads : n, al = mi_quant_par_align_take();

	if (nt <= 1) {
		for (int i = 0; i < n; i++)
			fn(arg, i, 0);
		return;
	}
	if (nt <= PF_MAXT) {
		struct pf_actx a = { .fn = fn, .arg = arg };
		int g = pf_grain(n, nt);

		/* blocks start at multiples of al when each thread gets 2+
		 * (a conv keeps pairs of 32-pixel panels on one thread: they
		 * share the cache lines of planar outputs) */
		al = n >= 2 * al * nt ? al : 1;
		a.grain = g;
		for (int t = 0; t < nt; t++) {
			int b = (int)((int64_t)n * t / nt), e = (int)((int64_t)n * (t + 1) / nt);

			b = t ? (b + al / 2) / al * al : 0;
			e = t + 1 < nt ? (e + al / 2) / al * al : n;
			atomic_init(&a.blk[t].next, b);
			a.blk[t].end = e;
		}
		mi_pool_run(nt, pf_worker_aff, &a);
		return;
	}
	c.grain = pf_grain(n, nt);
	atomic_init(&c.next, 0);
	mi_pool_run(nt, pf_worker, &c);
}

/*
 * fn(arg, b, e) over [0, n) for elementwise nodes: ranges of at least
 * `min` elements (2-3 us of work; below that one thread is faster than
 * waking the pool), a multiple of 64 (whole cache lines of uint8 and fp32
 * outputs), over the node's threads.
 */

struct prange_job {
	int64_t n, chunk;
	void (*fn)(void *arg, int64_t b, int64_t e);
	void *arg;
};

static void prange_item(void *arg, int i, int tid)
{
	const struct prange_job *j = arg;
	int64_t b = (int64_t)i * j->chunk, e = j->n - b < j->chunk ? j->n : b + j->chunk;

	j->fn(j->arg, b, e);
}

void qp_par_range(int nthreads, int64_t n, int64_t min,
		      void (*fn)(void *arg, int64_t b, int64_t e), void *arg)
{
	struct prange_job j = { n, 0, fn, arg };

	if (nthreads <= 1 || n < 2 * min) {
		if (n > 0)
			fn(arg, 0, n);
		return;
	}
	j.chunk = (n + nthreads * 4 - 1) / (nthreads * 4);
	/* at least min, rounded up to whole lines (a min under 64 too) */
	j.chunk = ((j.chunk < min ? min : j.chunk) + 63) & ~(int64_t)63;
	qp_cur_threads = nthreads;
	qp_pool_for((int)((n + j.chunk - 1) / j.chunk), prange_item, &j);
}

/*
 * The same over a 4-D tensor stored as rows of `row` elements (a channel's
 * plane, or a C4 quad's 4 x H*W bytes): the threads split each row in one
 * pixel range per thread, and thread t's block of items (qp_pool_for) is the
 * t-th range of every row, the pixels the convs before and after this node
 * handle on that thread (their panels are pixel ranges): each core mostly
 * reads what it wrote.  row 0 (other shapes) or rows too short for one
 * cache line per thread: qp_par_range.
 */
struct prow_job {
	int64_t row, nrow, *bnd;
	void (*fn)(void *arg, int64_t b, int64_t e);
	void *arg;
};

static void prow_item(void *arg, int i, int tid)
{
	const struct prow_job *j = arg;
	int64_t r = i % j->nrow, p = i / j->nrow;

	j->fn(j->arg, r * j->row + j->bnd[p], r * j->row + j->bnd[p + 1]);
}

#define PROW_MAXT 16

void qp_par_rows(int nthreads, int64_t n, int64_t row, int64_t min,
		     void (*fn)(void *arg, int64_t b, int64_t e), void *arg)
{
	int64_t bnd[PROW_MAXT + 1];
	int np = nthreads;
	struct prow_job j = { row, 0, bnd, fn, arg };

	if (nthreads <= 1 || np > PROW_MAXT || row <= 0 || n % row ||
	    row < 128 * np || n < 2 * min) {
		qp_par_range(nthreads, n, min, fn, arg);
		return;
	}
	j.nrow = n / row;
	for (int p = 0; p <= np; p++)
		bnd[p] = p == np ? row : (row * p / np + 32) & ~(int64_t)63;
	qp_cur_threads = nthreads;
	qp_pool_for((int)(np * j.nrow), prow_item, &j);
}

/* Elements per row of t for qp_par_rows: a 4-D tensor's plane (H*W), or
 * 4 planes when it is in C4 layout; 0 for other shapes. */
int64_t qp_px_row(const struct mi_tensor *t, bool c4)
{
	if (t->ndim != 4 || !mi_tensor_shape_known(t) || (c4 && t->dims[1] % 4))
		return 0;
	return t->dims[2] * t->dims[3] * (c4 ? 4 : 1);
}
