// SPDX-License-Identifier: MIT
/*
 * Planner step for int8 execution (called first by mi_cpu_plan()).
 *
 * Rewrites, node by node:
 *   QLinearConv                                   -> int8 conv
 *   QLinearMatMul (constant int8 B)               -> int8 GEMM
 *   DQ(xq) -> Conv(DQ(wq), [DQ(bq) | b]) [-> Relu | Clip] [-> Q]
 *                                                 -> int8 conv
 *   DQ(xq) -> Gemm / MatMul(DQ(wq)) [-> Relu | Clip] [-> Q]
 *                                                 -> int8 GEMM
 *   DQ(xq) -> Sigmoid | HardSigmoid [-> Mul(DQ(xq), .)], DQ(xq) -> HardSwish
 *                                                 -> 256-entry table lookup
 *   (also Add, MaxPool and Concat of quantized tensors, below)
 * With a trailing Q the node requantizes straight to uint8/int8; without
 * one it writes fp32 (the DequantizeLinear of the accumulator fused in).
 * Relu/Clip become clamp bounds.  The fused node keeps its op_type, reads
 * the quantized activation directly (its only input) and writes the last
 * tensor of the chain; absorbed nodes are marked dead.  Anything that
 * does not match (int8 weights with a zero point, 1-D convs, per-axis
 * activations, ...) keeps running the reference QDQ ops.
 *
 * The int8 path agrees with the QLinear reference ops bit for bit; for QDQ
 * chains it equals the fp32 reference up to fp32 rounding of the
 * accumulation (one output step at most).
 */
#include <immintrin.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "cpu/cpu.h"
#include "cpu/cpu_plan.h"
#include "cpu/nchwc.h"
#include "internal.h"
#include "quant/quant.h"
#include "quant/quant-impl.h"

#define QNODE_MAGIC 0x51384e44u /* "Q8ND" */

struct qshared {
	void *ws;
	size_t size;
	int refs;
};

struct qact {
	int t; /* quantized tensor */
	float scale;
	int zp;
	int dtype;
};

struct qmove;

struct qnode {
	struct mi_cpu_kernel_hdr hdr;
	uint32_t magic;
	/* undo information for fini() */
	int orig_ninputs, orig_in0, orig_out0;
	int killed[8], nkilled;
	int orig_in1;
	/* Add / MaxPool on quantized data */
	struct mi_qadd_args add;
	struct mi_qpool_shape pool;
	bool pool_s8;
	bool in_c4; /* conv input in C4 layout (written by the producer) */
	float *lut;       /* Sigmoid / SiLU on a quantized input: 256 entries */
	uint8_t *lut8;    /* the same followed by its QuantizeLinear: byte -> byte */
	struct qact se_y; /* SE Mul: output quantization */
	int64_t se_c, se_hw; /* SE Mul: channels (N * C) and pixels per channel */
	bool se_c4;          /* SE Mul: writes the C4 layout for its int8 conv */
	bool se_in_c4;       /* SE Mul (se_c4 too) / GlobalAveragePool: reads C4 */
	uint8_t *lutb;       /* lut's bytes as four 256-entry planes (vpermi2b lookups) */
	int64_t gap_hw;      /* GlobalAveragePool: pixels per plane (planes: se_c) */
	int gap_vw;          /* ... lib/cpu's sum lanes (its ISA's vector width) */
	bool gap_q;          /* ... quantized output (se_y), else fp32 */
	bool gap_exact;      /* ... every double sum of gap_hw entries exact */
	struct qact qdq;     /* standalone Q / DQ: the quantized side */
	bool qdq_deq;        /* ... a DequantizeLinear */
	/* ... on a 4-D tensor [qdq_n, qdq_c, qdq_hw] (qdq_c 0: other shape):
	 * quantized side in C4 layout (qdq_c4), fp32 side blocked in
	 * qdq_fk->b channels (qdq_fk set; the NCHWc pass decides) */
	int64_t qdq_n, qdq_c, qdq_hw;
	bool qdq_c4, qdq_phys;
	const struct mi_nc_kern *qdq_fk;
	/* conv with fp32 output: written blocked in out_b channels (0:
	 * planar), through planar floats at byte blk_off of the shared
	 * workspace (conv_run; the NCHWc pass decides) */
	int out_b;
	size_t blk_off;
	/* ... and a residual Add (+ act) fused (mi_quant_conv_add): its other
	 * operand is input res_in (0: none), q->ep.res's fields */
	int res_in;
	struct qcat *cat; /* Concat */
	struct qmove *mv; /* moves on bytes (plan_moves) */
	int *cat_orig;    /* Concat: original inputs */
	int nthreads; /* planned with */
	bool px_c4;   /* Add / byte table: its tensors are in C4 layout */
	bool chan;    /* conv: split by output channels (plan_chan) */
	bool is_conv;
	struct mi_qconv cv;
	struct mi_qweights w; /* GEMM */
	int64_t k;            /* GEMM: reduction length */
	bool x_signed;
	int zx;
	int32_t *comp;
	float *mult, *fbias;
	struct mi_qepi ep;
	struct qshared *sh;
};

/* ---- thread pool glue -------------------------------------------------- */

/*
 * The threads claim ranges of `grain` indices from a counter on its own
 * cache line (one atomic per range, not per index; a claim does not
 * invalidate the line holding fn/arg/n that every thread reads).  The
 * grain is even from 2 on: consecutive indices are often neighbouring
 * 32-pixel panels whose planar uint8 outputs share cache lines, so a pair
 * is written by one thread (no false sharing).  Ranges are claimed
 * dynamically: a worker that joins late takes what is left.  With
 * MI_QUANT_SPLIT_ALL=1 (tests) the ranges are larger (two per thread).
 */
struct pf_ctx {
	atomic_int next __attribute__((aligned(64)));
	int n __attribute__((aligned(64)));
	int grain;
	mi_qpar_fn fn;
	void *arg;
};

static int pool_threads = 1;
/* Threads of the node running now: workspaces were sized for the count
 * the node was planned with, whatever other models planned since. */
static __thread int cur_threads = 1;

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

static bool split_all;

static int pf_grain(int n, int nt)
{
	int g = split_all ? n / (nt * 2) : n / (nt * PF_RANGES);

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
 * thread computes an item never changes its bytes.  MI_QUANT_GUIDED=0
 * restores fixed grains.
 */
static int guided_on = -1;

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

static void pf_claim(struct pf_actx *c, struct pf_blk *k, int t, int nt)
{
	int b;

	if (guided_on) {
		pf_claim_guided(c, k, t, nt);
		return;
	}
	while ((b = atomic_fetch_add_explicit(&k->next, c->grain, memory_order_relaxed)) < k->end) {
		int e = k->end - b < c->grain ? k->end : b + c->grain;

		for (int i = b; i < e; i++)
			c->fn(c->arg, i, t);
	}
}

static void pf_worker_aff(void *ctx, int t, int nt)
{
	struct pf_actx *c = ctx;

	for (int k = 0; k < nt; k++)
		pf_claim(c, &c->blk[(t + k) % nt], t, nt);
}

static int aff_on = -1;

static void pool_for(int n, mi_qpar_fn fn, void *arg)
{
	struct pf_ctx c = { .n = n, .fn = fn, .arg = arg };
	int nt = cur_threads < n ? cur_threads : n, al = mi_quant_par_align_take();

	if (nt <= 1) {
		for (int i = 0; i < n; i++)
			fn(arg, i, 0);
		return;
	}
	if (aff_on < 0)
		aff_on = !getenv("MI_QUANT_AFF") || *getenv("MI_QUANT_AFF") != '0';
	if (guided_on < 0)
		guided_on = !getenv("MI_QUANT_GUIDED") || *getenv("MI_QUANT_GUIDED") != '0';
	if (aff_on && nt <= PF_MAXT) {
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
 * outputs), over the node's threads.  MI_QUANT_SPLIT_ALL=1 (tests) splits
 * every node in ranges of 64.
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

static void par_range(int nthreads, int64_t n, int64_t min,
		      void (*fn)(void *arg, int64_t b, int64_t e), void *arg)
{
	struct prange_job j = { n, 0, fn, arg };

	if (split_all)
		min = 64;
	if (nthreads <= 1 || n < 2 * min) {
		if (n > 0)
			fn(arg, 0, n);
		return;
	}
	j.chunk = (n + nthreads * 4 - 1) / (nthreads * 4);
	j.chunk = (j.chunk < min ? min : j.chunk + 63) & ~(int64_t)63;
	cur_threads = nthreads;
	pool_for((int)((n + j.chunk - 1) / j.chunk), prange_item, &j);
}

/*
 * The same over a 4-D tensor stored as rows of `row` elements (a channel's
 * plane, or a C4 quad's 4 x H*W bytes): the threads split each row in one
 * pixel range per thread, and thread t's block of items (pool_for) is the
 * t-th range of every row, the pixels the convs before and after this node
 * handle on that thread (their panels are pixel ranges): each core mostly
 * reads what it wrote.  row 0 (other shapes) or rows too short for one
 * cache line per thread: par_range.
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

static void par_rows(int nthreads, int64_t n, int64_t row, int64_t min,
		     void (*fn)(void *arg, int64_t b, int64_t e), void *arg)
{
	int64_t bnd[PROW_MAXT + 1];
	int np = split_all ? 2 * nthreads : nthreads;
	struct prow_job j = { row, 0, bnd, fn, arg };

	if (nthreads <= 1 || np > PROW_MAXT || row <= 0 || n % row ||
	    row < (split_all ? 64 : 128) * np || (!split_all && n < 2 * min)) {
		par_range(nthreads, n, min, fn, arg);
		return;
	}
	j.nrow = n / row;
	for (int p = 0; p <= np; p++)
		bnd[p] = p == np ? row : (row * p / np + 32) & ~(int64_t)63;
	cur_threads = nthreads;
	pool_for((int)(np * j.nrow), prow_item, &j);
}

/* Elements per row of t for par_rows: a 4-D tensor's plane (H*W), or
 * 4 planes when it is in C4 layout; 0 for other shapes. */
static int64_t px_row(const struct mi_tensor *t, bool c4)
{
	if (t->ndim != 4 || !mi_tensor_shape_known(t) || (c4 && t->dims[1] % 4))
		return 0;
	return t->dims[2] * t->dims[3] * (c4 ? 4 : 1);
}

/* ---- node helpers -------------------------------------------------------- */

static void qnode_fini(struct mi_graph *g, struct mi_node *n);
static void qmove_free(struct qmove *m);
static void qmove_undo(struct mi_graph *g, struct mi_node *n, struct qmove *m);

bool mi_quant_node_is(const struct mi_node *n)
{
	const struct qnode *q = n->priv;

	return q && q->hdr.fini == qnode_fini && q->magic == QNODE_MAGIC;
}

static void qnode_free(struct qnode *q)
{
	if (!q)
		return;
	mi_qconv_fini(&q->cv);
	mi_qweights_free(&q->w);
	free(q->comp);
	free(q->mult);
	free(q->fbias);
	free(q->cat);
	free(q->cat_orig);
	qmove_free(q->mv);
	free(q->lut);
	free(q->lut8);
	free(q->lutb);
	if (q->sh && --q->sh->refs == 0) {
		free(q->sh->ws);
		free(q->sh);
	}
	free(q);
}

/* Undo the rewrite and free (mi_cpu_kernel_hdr.fini). */
static void qnode_fini(struct mi_graph *g, struct mi_node *n)
{
	struct qnode *q = n->priv;

	if (q->qdq_phys)
		g->tensors[n->outputs[0]].phys_bytes = 0;
	if (q->mv)
		qmove_undo(g, n, q->mv);
	if (q->orig_ninputs) {
		n->ninputs = q->orig_ninputs;
		n->inputs[0] = q->orig_in0;
		if (q->orig_ninputs > 1)
			n->inputs[1] = q->orig_in1;
		if (q->cat_orig)
			memcpy(n->inputs, q->cat_orig, q->orig_ninputs * sizeof(int));
		n->outputs[0] = q->orig_out0;
	}
	if (q->orig_ninputs || q->mv) {
		for (int i = 0; i < q->nkilled; i++) {
			struct mi_node *k = &g->nodes[q->killed[i]];

			k->dead = false;
			for (int o = 0; o < k->noutputs; o++)
				if (k->outputs[o] >= 0)
					g->tensors[k->outputs[o]].producer = q->killed[i];
		}
	}
	qnode_free(q);
	n->priv = NULL;
}

static bool const_t(const struct mi_tensor *t)
{
	return t && (t->flags & MI_TF_CONST) && t->data;
}

static bool const_scalar(const struct mi_tensor *t)
{
	return const_t(t) && mi_tensor_numel(t) == 1;
}

static struct mi_node *producer(struct mi_graph *g, int t, const char *op)
{
	int p = t >= 0 ? g->tensors[t].producer : -1;
	struct mi_node *n = p >= 0 ? &g->nodes[p] : NULL;

	if (!n || n->dead || strcmp(n->op_type, op) || n->domain[0])
		return NULL;
	return n;
}

/*
 * DequantizeLinear producing t: the live producer, or a DQ that constant
 * folding already ran (dead, its int8 inputs still there) when t is the
 * folded fp32 constant.
 */
static struct mi_node *find_dq(struct mi_graph *g, int t)
{
	struct mi_node *n = producer(g, t, "DequantizeLinear");

	if (n || t < 0 || !(g->tensors[t].flags & MI_TF_CONST))
		return n;
	for (int i = 0; i < g->nnodes; i++) {
		struct mi_node *d = &g->nodes[i];

		if (d->dead && d->noutputs == 1 && d->outputs[0] == t &&
		    !strcmp(d->op_type, "DequantizeLinear") && !d->domain[0])
			return d;
	}
	return NULL;
}

/* Quantized activation: x u8/s8 with constant scalar scale/zp. */

static bool act_params(struct mi_graph *g, struct mi_node *n, int xi, int si, int zi,
		       struct qact *a)
{
	struct mi_tensor *x = mi_in(g, n, xi), *s = mi_in(g, n, si), *z = mi_in(g, n, zi);

	if (!x || (x->dtype != MI_DT_UINT8 && x->dtype != MI_DT_INT8) || !const_scalar(s) ||
	    s->dtype != MI_DT_FLOAT || (z && (!const_scalar(z) || z->dtype != x->dtype)))
		return false;
	a->t = n->inputs[xi];
	a->scale = *(const float *)s->data;
	a->zp = z ? (int32_t)mi_tensor_get_i64(z, 0) : 0;
	a->dtype = x->dtype;
	return a->scale > 0 && isfinite(a->scale);
}

/* Output quantization of a QuantizeLinear node (per tensor). */
static bool q_params(struct mi_graph *g, struct mi_node *q, struct qact *a)
{
	struct mi_tensor *s = mi_in(g, q, 1), *z = mi_in(g, q, 2);
	struct mi_tensor *y = mi_out(g, q, 0);

	if (!const_scalar(s) || s->dtype != MI_DT_FLOAT || (z && !const_scalar(z)) ||
	    (y->dtype != MI_DT_UINT8 && y->dtype != MI_DT_INT8))
		return false;
	a->t = q->outputs[0];
	a->scale = *(const float *)s->data;
	a->zp = z ? (int32_t)mi_tensor_get_i64(z, 0) : 0;
	a->dtype = y->dtype;
	return a->scale > 0 && isfinite(a->scale);
}

/* int8 weights with zero zero points, scales per `axis` (len noc) or per
 * tensor. */
struct qw {
	const int8_t *q;  /* weights as stored (int8) */
	int8_t *own;      /* recovered from folded fp32 weights, owned */
	float *scale;     /* [noc] */
};

static void qw_free(struct qw *w)
{
	free(w->own);
	free(w->scale);
}

/*
 * Constant folding may already have turned DQ(int8 w) into an fp32
 * constant (and freed the int8 data).  Such a tensor holds q * s[c]
 * exactly; with symmetric quantization max|q| of a channel is qmax (127,
 * or 63 for `quantize --weight-bits 7`), so s = max|w| / qmax and q = w / s
 * recover them.  Accept only when every value lands on an integer in
 * [-128, 127].  Channel c of element i: (i / inner) % noc.
 */
static bool recover_weights_one(const struct mi_tensor *wt, int64_t noc, int64_t inner,
				float qmax, struct qw *out);

/* Per channel first, then per tensor (scale broadcast to noc); 8-bit
 * weights first, then 7-bit. */
static bool recover_weights(const struct mi_tensor *wt, int64_t noc, int64_t inner,
			    struct qw *out)
{
	float *sc;

	if (recover_weights_one(wt, noc, inner, 127.0f, out) ||
	    recover_weights_one(wt, noc, inner, 63.0f, out))
		return true;
	if (!recover_weights_one(wt, 1, mi_tensor_numel(wt), 127.0f, out) &&
	    !recover_weights_one(wt, 1, mi_tensor_numel(wt), 63.0f, out))
		return false;
	sc = realloc(out->scale, noc * sizeof(float));
	if (!sc) {
		qw_free(out);
		return false;
	}
	for (int64_t c = 1; c < noc; c++)
		sc[c] = sc[0];
	out->scale = sc;
	return true;
}

static bool recover_weights_one(const struct mi_tensor *wt, int64_t noc, int64_t inner,
				float qmax, struct qw *out)
{
	int64_t n = mi_tensor_numel(wt);
	const float *w = wt->data;

	if (!const_t(wt) || wt->dtype != MI_DT_FLOAT || n <= 0 || noc <= 0)
		return false;
	out->scale = calloc(noc, sizeof(float));
	out->own = malloc(n);
	if (!out->scale || !out->own)
		goto fail;
	int64_t outer = n / (noc * inner);

	for (int64_t o = 0, i = 0; o < outer; o++)
		for (int64_t c = 0; c < noc; c++) {
			float m = out->scale[c];

			for (int64_t k = 0; k < inner; k++, i++) {
				float a = fabsf(w[i]);

				if (!isfinite(a))
					goto fail;
				m = a > m ? a : m;
			}
			out->scale[c] = m;
		}
	for (int64_t c = 0; c < noc; c++)
		out->scale[c] = out->scale[c] > 0 ? out->scale[c] / qmax : 1.0f;
	for (int64_t o = 0, i = 0; o < outer; o++)
		for (int64_t c = 0; c < noc; c++) {
			float sc = out->scale[c];

			for (int64_t k = 0; k < inner; k++, i++) {
				float v = w[i] / sc, r = nearbyintf(v);

				if (fabsf(v - r) > 1e-3f || r < -128 || r > 127)
					goto fail;
				out->own[i] = (int8_t)r;
			}
		}
	out->q = out->own;
	return true;
fail:
	qw_free(out);
	memset(out, 0, sizeof(*out));
	return false;
}

static bool weight_params(struct mi_graph *g, const struct mi_tensor *w,
			  const struct mi_tensor *s, const struct mi_tensor *z, int axis,
			  int axis_attr, int64_t noc, struct qw *out)
{
	int64_t ns;

	if (!const_t(w) || w->dtype != MI_DT_INT8 || !const_t(s) || s->dtype != MI_DT_FLOAT ||
	    (z && !const_t(z)))
		return false;
	ns = mi_tensor_numel(s);
	if (ns != 1 && (ns != noc || axis_attr != axis))
		return false;
	if (z) {
		if (!const_t(z) || mi_tensor_numel(z) != ns)
			return false;
		for (int64_t i = 0; i < ns; i++)
			if (mi_tensor_get_i64(z, i))
				return false;
	}
	out->q = w->data;
	out->scale = malloc(noc * sizeof(float));
	if (!out->scale)
		return false;
	for (int64_t o = 0; o < noc; o++) {
		out->scale[o] = ((const float *)s->data)[ns == 1 ? 0 : o];
		if (!(out->scale[o] > 0) || !isfinite(out->scale[o])) {
			free(out->scale);
			return false;
		}
	}
	return true;
}

/* Activation chain after the op: [Relu | Clip] [QuantizeLinear]. */
struct chain {
	struct mi_node *act, *q;
	int out; /* last tensor */
	float lo, hi; /* float clamp (relu/clip) */
	struct qact y;
};

static void follow_chain(struct mi_graph *g, int t, struct chain *c)
{
	int ci;

	memset(c, 0, sizeof(*c));
	c->out = t;
	c->lo = -INFINITY;
	c->hi = INFINITY;
	ci = mi_graph_sole_consumer(g, t);
	if (ci >= 0) {
		struct mi_node *a = &g->nodes[ci];

		if (!strcmp(a->op_type, "Relu") && !a->domain[0]) {
			c->act = a;
			c->lo = 0;
		} else if (!strcmp(a->op_type, "Clip") && !a->domain[0] && a->inputs[0] == t) {
			struct mi_tensor *mn = mi_in(g, a, 1), *mx = mi_in(g, a, 2);

			if ((!mn || (const_scalar(mn) && mn->dtype == MI_DT_FLOAT)) &&
			    (!mx || (const_scalar(mx) && mx->dtype == MI_DT_FLOAT))) {
				c->act = a;
				c->lo = mn ? *(const float *)mn->data :
					     mi_attr_float(a, "min", -INFINITY);
				c->hi = mx ? *(const float *)mx->data :
					     mi_attr_float(a, "max", INFINITY);
			}
		}
		if (c->act) {
			c->out = c->act->outputs[0];
			ci = mi_graph_sole_consumer(g, c->out);
		}
	}
	if (ci >= 0) {
		struct mi_node *q = &g->nodes[ci];

		if (!strcmp(q->op_type, "QuantizeLinear") && !q->domain[0] && q->inputs[0] == c->out &&
		    q_params(g, q, &c->y)) {
			c->q = q;
			c->out = q->outputs[0];
		}
	}
}

/* Quantize a float clamp bound v to the output's integer range. */
static int32_t qbound(float v, const struct qact *y, int32_t qmin, int32_t qmax)
{
	if (isinf(v))
		return v < 0 ? qmin : qmax;
	float r = nearbyintf(v / y->scale) + (float)y->zp;

	return r < qmin ? qmin : r > qmax ? qmax : (int32_t)r;
}

/* Fill comp/mult/fbias/epilogue.  bias_i: int32 biases in units of
 * sx*sw (or NULL), bias_f: float biases (or NULL). */
static int setup_epi(struct qnode *q, int64_t noc, const float *sw, float sx,
		     const int32_t *wsum, const int32_t *bias_i, const float *bias_f,
		     const struct chain *c)
{
	q->comp = malloc(noc * sizeof(int32_t));
	q->mult = malloc(noc * sizeof(float));
	q->fbias = calloc(noc, sizeof(float));
	if (!q->comp || !q->mult || !q->fbias)
		return -ENOMEM;
	int zxu = q->x_signed ? q->zx + 128 : q->zx;

	for (int64_t o = 0; o < noc; o++) {
		int32_t b = 0;

		if (c->q) {
			if (bias_i) {
				b = bias_i[o];
			} else if (bias_f) {
				double v = nearbyint(bias_f[o] / (double)(sx * sw[o]));

				b = (int32_t)(v < -2e9 ? -2e9 : v > 2e9 ? 2e9 : v);
			}
			q->mult[o] = mi_qmult(sx, sw[o], c->y.scale);
		} else {
			q->mult[o] = sx * sw[o];
			q->fbias[o] = bias_f ? bias_f[o] :
				      bias_i ? (float)bias_i[o] * (sx * sw[o]) : 0.0f;
		}
		q->comp[o] = b - zxu * wsum[o];
	}
	q->ep.comp = q->comp;
	q->ep.mult = q->mult;
	if (c->q) {
		int32_t qmin = c->y.dtype == MI_DT_UINT8 ? 0 : -128;
		int32_t qmax = c->y.dtype == MI_DT_UINT8 ? 255 : 127;
		int32_t lo = qbound(c->lo, &c->y, qmin, qmax);
		int32_t hi = qbound(c->hi, &c->y, qmin, qmax);

		q->ep.mode = c->y.dtype == MI_DT_UINT8 ? MI_QOUT_U8 : MI_QOUT_S8;
		q->ep.zy = c->y.zp;
		q->ep.flo = (float)(lo - c->y.zp);
		q->ep.fhi = (float)(hi - c->y.zp);
	} else {
		q->ep.mode = MI_QOUT_F32;
		q->ep.fbias = q->fbias;
		q->ep.flo = c->lo;
		q->ep.fhi = c->hi;
	}
	return 0;
}

/* ---- run ---------------------------------------------------------------- */

/* Below this many multiply-adds a node runs on one thread: waking the
 * pool costs more than the work (a few microseconds each). */
#define QPAR_MIN_MACS (1 << 21)

static bool gemv_split(void)
{
	static int on = -1;

	if (on < 0)
		on = !getenv("MI_QUANT_GEMV_SPLIT") || *getenv("MI_QUANT_GEMV_SPLIT") != '0';
	return on;
}

/*
 * An int8 conv's planar fp32 output ([c][hw]) into the NCHWc blocked
 * layout ([ceil(c / b)][hw][b], pad lanes 0) for the fp32 kernels that
 * read it: pixels [p0, p1), a block of channels at a time by SSE 4x4
 * transposes (pure moves: the values do not change).
 */
struct blk_job {
	const float *x;
	float *y;
	int64_t c, hw;
	int b;
	const float *r;          /* a fused residual Add's operand (or NULL) */
	const struct mi_qepi *ep; /* ... its order and act */
};

/* y = act(y + r) or act(r + y) (the NCHWc Add's float operations, as
 * blk8_store_res in qgemm.c) on n floats, pad lanes too */
static void res_add_range(const struct mi_qepi *ep, const float *r, float *y, int64_t n)
{
	for (int64_t i = 0; i < n; i++) {
		float v = ep->res_first ? r[i] + y[i] : y[i] + r[i];

		if (ep->res_act == MI_QRES_RELU)
			v = v > 0.0f ? v : 0.0f;
		else if (ep->res_act == MI_QRES_CLIP) {
			v = v > ep->res_lo ? v : ep->res_lo;
			v = v < ep->res_hi ? v : ep->res_hi;
		}
		y[i] = v;
	}
}

static void blk_range(void *arg, int64_t p0, int64_t p1)
{
	const struct blk_job *j = arg;
	const int64_t hw = j->hw, nb = (j->c + j->b - 1) / j->b;
	const int b = j->b;

	for (int64_t cb = 0; cb < nb; cb++) {
		const float *s = j->x + cb * b * hw;
		float *d = j->y + cb * hw * b;
		int64_t p = p0;

#ifdef __SSE2__
		/* whole blocks: 4 pixels x b channels (full cache lines) a step */
		for (; (cb + 1) * b <= j->c && p + 4 <= p1; p += 4)
			for (int g = 0; g < b; g += 4) {
				const float *r = s + g * hw + p;
				__m128 r0 = _mm_loadu_ps(r), r1 = _mm_loadu_ps(r + hw);
				__m128 r2 = _mm_loadu_ps(r + 2 * hw), r3 = _mm_loadu_ps(r + 3 * hw);

				_MM_TRANSPOSE4_PS(r0, r1, r2, r3);
				_mm_storeu_ps(d + p * b + g, r0);
				_mm_storeu_ps(d + (p + 1) * b + g, r1);
				_mm_storeu_ps(d + (p + 2) * b + g, r2);
				_mm_storeu_ps(d + (p + 3) * b + g, r3);
			}
#endif
		for (; p < p1; p++)
			for (int l = 0; l < b; l++)
				d[p * b + l] = cb * b + l < j->c ? s[l * hw + p] : 0.0f;
		if (j->r)
			res_add_range(j->ep, j->r + (cb * hw + p0) * b, d + p0 * b, (p1 - p0) * b);
	}
}

static int conv_run(struct mi_graph *g, struct mi_node *n)
{
	struct qnode *q = n->priv;
	struct mi_tensor *x = mi_in(g, n, 0), *y = mi_out(g, n, 0);
	const struct mi_qconv_shape *s = &q->cv.s;
	int64_t macs = (int64_t)s->oc * s->oh * s->ow * (s->c / s->group) * s->kh * s->kw;

	/* A depthwise multiply-add costs ~30x a dense one (one channel per
	 * vector, latency-bound): count it 16x, or its nodes of 0.05-0.1 ms
	 * all stay on one thread. */
	/* a dense conv that reorders its input first runs two pool dispatches:
	 * it splits from twice the work */
	bool prep = !q->cv.depthwise && !(q->in_c4 && q->cv.direct1x1 && !q->x_signed);
	int64_t work = q->cv.depthwise ? macs * 16 : prep ? macs / 2 : macs;

	/* a dense conv on up to 4 pixels (the squeeze-excitation FCs) is a
	 * GEMV streaming its weights once: split from 32K multiply-adds
	 * (EfficientNet-B0's 48 -> 1152 FCs, 55K: half the time at 2 threads);
	 * MI_QUANT_GEMV_SPLIT=0: as the other dense convs */
	if (!q->cv.depthwise && (int64_t)s->oh * s->ow <= 4 && gemv_split())
		work *= 64;

	/* a dense conv on a map of 512+ pixels splits in pixel ranges (16+
	 * panels), like the depthwise convs and tables around it: each
	 * core reads the pixels it wrote, so it pays from a quarter of that */
	int64_t lim = !q->cv.depthwise && (int64_t)s->oh * s->ow >= 512 ? QPAR_MIN_MACS / 4
									: QPAR_MIN_MACS;

	cur_threads = work < lim && !split_all ? 1 : q->nthreads;
	mi_quant_set_call_threads(cur_threads);
	size_t xs = (size_t)s->c * s->h * s->w;
	size_t ys = (size_t)s->oc * s->oh * s->ow * (q->ep.mode >= MI_QOUT_S32 ? 4 : 1);
	int64_t nb = x->dims[0];

	if (q->out_b) /* blocked fp32: [ceil(oc / B)][oh * ow][B] per image */
		ys = (size_t)(s->oc + q->out_b - 1) / q->out_b * q->out_b * s->oh * s->ow * 4;
	for (int64_t b = 0; b < nb; b++) {
		uint8_t *yb = (uint8_t *)y->data + b * ys;
		float *pl = (float *)((uint8_t *)q->sh->ws + q->blk_off);
		unsigned int fl = (q->in_c4 ? MI_QCONV_IN_C4 : 0) | (q->chan ? MI_QCONV_CHAN : 0);
		const uint8_t *xb = (const uint8_t *)x->data + b * xs;
		int err = -EOPNOTSUPP;

		/* blocked by 8: straight from the tile epilogues where the
		 * kernel can (no planar floats through memory), else planar
		 * into the workspace and transposed */
		const float *rb = q->res_in ? (const float *)mi_in(g, n, q->res_in)->data +
						      b * (ys / sizeof(float)) : NULL;

		if (q->out_b == 8) {
			q->ep.res = rb;
			err = mi_qconv_run(&q->cv, xb, q->x_signed, q->zx, &q->ep, yb, q->sh->ws,
					   fl | MI_QCONV_OUT_BLK8);
			q->ep.res = NULL;
			if (!err)
				continue;
		}
		if (err == -EOPNOTSUPP)
			err = mi_qconv_run(&q->cv, xb, q->x_signed, q->zx, &q->ep,
					   q->out_b ? (void *)pl : yb, q->sh->ws, fl);
		if (err)
			return mi_graph_err(g, n, err, "int8 conv failed");
		if (q->out_b) {
			struct blk_job j = { pl, (float *)yb, s->oc, (int64_t)s->oh * s->ow, q->out_b,
					     rb, &q->ep };

			/* ranges of ~16K floats, as the standalone DQ */
			par_range(q->nthreads, j.hw, (16 << 10) / s->oc + 1, blk_range, &j);
		}
	}
	return 0;
}

static int gemm_run(struct mi_graph *g, struct mi_node *n)
{
	struct qnode *q = n->priv;
	struct mi_tensor *x = mi_in(g, n, 0), *y = mi_out(g, n, 0);
	int64_t m = mi_tensor_numel(x) / q->k;

	if (m == 0) /* empty batch: nothing to write */
		return 0;
	/* a few rows (a classifier on one image) run as GEMVs that stream the
	 * weights once, memory-bound: worth splitting from 128K weights */
	int64_t work = m * q->k * q->w.ocg * (m <= 4 ? 16 : 1);

	cur_threads = work < QPAR_MIN_MACS && !split_all ? 1 : q->nthreads;
	int err = mi_qgemm(&q->w, x->data, (int)m, (int)q->k, &q->ep, y->data, q->w.ocg,
			   q->sh->ws);

	return err ? mi_graph_err(g, n, err, "int8 gemm failed") : 0;
}

/* ---- matching ------------------------------------------------------------- */

struct wget_ctx {
	const int8_t *w;
	int64_t ocg, kg;
	bool transposed; /* w is [k][n] (MatMul, Gemm transB=0) */
	int64_t n;
};

static int wget_conv(const void *vctx, int g, int o, int k)
{
	const struct wget_ctx *c = vctx;

	return c->w[((int64_t)g * c->ocg + o) * c->kg + k];
}

static int wget_gemm(const void *vctx, int g, int o, int k)
{
	const struct wget_ctx *c = vctx;

	return c->transposed ? c->w[(int64_t)k * c->n + o] : c->w[(int64_t)o * c->kg + k];
}

static struct qnode *qnode_new(int (*run)(struct mi_graph *, struct mi_node *))
{
	struct qnode *q = calloc(1, sizeof(*q));

	if (q) {
		q->hdr.run = run;
		q->hdr.fini = qnode_fini;
		q->magic = QNODE_MAGIC;
		q->nthreads = pool_threads;
	}
	return q;
}

/* A standalone Q / DQ (or float-output table) on a 4-D tensor t: its shape. */
static void qdq_dims(struct qnode *q, const struct mi_tensor *t)
{
	if (t->ndim == 4 && mi_tensor_shape_known(t) && t->dims[0] > 0 && t->dims[1] > 0 &&
	    t->dims[2] * t->dims[3] > 0) {
		q->qdq_n = t->dims[0];
		q->qdq_c = t->dims[1];
		q->qdq_hw = t->dims[2] * t->dims[3];
	}
}

static int qdq_run(struct mi_graph *g, struct mi_node *n);
static int qlut_run(struct mi_graph *g, struct mi_node *n);

/* ... one whose sides may take the C4 / blocked layouts (qdq_item). */
static bool qdq_like(const struct qnode *q)
{
	return q->qdq_c && (q->hdr.run == qdq_run || (q->hdr.run == qlut_run && !q->lut8));
}

/* Conv geometry (2-D only) into a kernel shape. */
static bool conv_shape(struct mi_graph *g, struct mi_node *n, int xi, int wi,
		       struct mi_qconv_shape *s)
{
	struct mi_spatial sp;
	int64_t oc, group;
	struct mi_tensor *x = mi_in(g, n, xi);
	int err;

	if (!x || x->ndim != 4 || !mi_tensor_shape_known(x))
		return false;
	/* geometry helper wants int8/uint8 inputs: check dtypes ourselves */
	memset(&sp, 0, sizeof(sp));
	struct mi_tensor *w = mi_in(g, n, wi);

	if (!w || w->ndim != 4)
		return false;
	int sv_x = x->dtype, sv_w = w->dtype;

	x->dtype = MI_DT_UINT8;
	w->dtype = MI_DT_INT8;
	err = mi_qconv_geometry(g, n, xi, wi, &sp, &oc, &group);
	x->dtype = sv_x;
	w->dtype = sv_w;
	g->err[0] = 0;
	if (err || sp.nsp != 2)
		return false;
	*s = (struct mi_qconv_shape){
		.c = (int)x->dims[1], .h = (int)x->dims[2], .w = (int)x->dims[3],
		.oc = (int)oc, .oh = (int)sp.out[0], .ow = (int)sp.out[1],
		.kh = (int)sp.kernel[0], .kw = (int)sp.kernel[1],
		.sh = (int)sp.stride[0], .sw = (int)sp.stride[1],
		.dh = (int)sp.dil[0], .dw = (int)sp.dil[1],
		.pt = (int)sp.pad_begin[0], .pl = (int)sp.pad_begin[1],
		.pb = (int)sp.pad_end[0], .pr = (int)sp.pad_end[1],
		.group = (int)group,
	};
	return true;
}

static int64_t shared_need;

static int plan_conv(struct mi_graph *g, struct mi_node *n, const struct qact *xa,
		     const struct qw *w, const struct mi_qconv_shape *s, const int32_t *bias_i,
		     const float *bias_f, const struct chain *c)
{
	struct qnode *q = qnode_new(conv_run);
	struct wget_ctx wc = { w->q, s->oc / s->group,
			       (int64_t)(s->c / s->group) * s->kh * s->kw, false, 0 };
	int err;

	if (!q)
		return -ENOMEM;
	q->is_conv = true;
	q->x_signed = xa->dtype == MI_DT_INT8;
	q->zx = xa->zp;
	err = mi_qconv_init(&q->cv, s, wget_conv, &wc);
	if (!err)
		err = setup_epi(q, s->oc, w->scale, xa->scale,
				q->cv.depthwise ? q->cv.wsum_dw : q->cv.w.wsum, bias_i, bias_f, c);
	if (err) {
		qnode_free(q);
		return err;
	}
	size_t need = mi_qconv_workspace(&q->cv);

	if ((int64_t)need > shared_need)
		shared_need = need;
	n->priv = q;
	return 0;
}

static int plan_gemm(struct mi_graph *g, struct mi_node *n, const struct qact *xa,
		     const struct qw *w, int64_t k, int64_t noc, bool transposed,
		     int64_t m, const int32_t *bias_i, const float *bias_f,
		     const struct chain *c)
{
	struct qnode *q = qnode_new(gemm_run);
	struct wget_ctx wc = { w->q, noc, k, transposed, noc };
	int err;

	if (!q)
		return -ENOMEM;
	if (k > INT32_MAX / 2 || noc > INT32_MAX / 2 || m > INT32_MAX / 2) {
		free(q);
		return 0;
	}
	q->x_signed = false;
	q->zx = xa->zp;
	q->k = k;
	err = mi_qweights_pack(&q->w, 1, (int)noc, (int)k, wget_gemm, &wc);
	if (!err)
		err = setup_epi(q, noc, w->scale, xa->scale, q->w.wsum, bias_i, bias_f, c);
	if (err) {
		qnode_free(q);
		return err;
	}
	size_t need = mi_qgemm_workspace(&q->w, (int)m);

	if ((int64_t)need > shared_need)
		shared_need = need;
	n->priv = q;
	return 0;
}

/* Bias of a QDQ node: DQ(int32) or fp32 constant, noc values. */
static bool read_bias(struct mi_graph *g, int t, int64_t noc, float **bf)
{
	struct mi_tensor *b = t >= 0 ? &g->tensors[t] : NULL;
	struct mi_node *dq;

	*bf = NULL;
	if (!b)
		return true;
	if (const_t(b) && b->dtype == MI_DT_FLOAT && mi_tensor_numel(b) == noc) {
		*bf = malloc(noc * sizeof(float));
		if (*bf)
			memcpy(*bf, b->data, noc * sizeof(float));
		return *bf != NULL;
	}
	dq = producer(g, t, "DequantizeLinear");
	if (!dq)
		return false;
	struct mi_tensor *bq = mi_in(g, dq, 0), *bs = mi_in(g, dq, 1), *bz = mi_in(g, dq, 2);

	if (!const_t(bq) || bq->dtype != MI_DT_INT32 || mi_tensor_numel(bq) != noc ||
	    !const_t(bs) || (bz && !const_t(bz)))
		return false;
	int64_t ns = mi_tensor_numel(bs);

	if (ns != 1 && ns != noc)
		return false;
	*bf = malloc(noc * sizeof(float));
	if (!*bf)
		return false;
	for (int64_t o = 0; o < noc; o++) {
		int64_t zp = bz ? mi_tensor_get_i64(bz, bz && mi_tensor_numel(bz) == noc ? o : 0) : 0;

		(*bf)[o] = (float)(((const int32_t *)bq->data)[o] - zp) *
			   ((const float *)bs->data)[ns == 1 ? 0 : o];
	}
	return true;
}

static void kill(struct mi_graph *g, struct qnode *q, struct mi_node *p)
{
	p->dead = true;
	q->killed[q->nkilled++] = (int)(p - g->nodes);
}

static void kill_if_unused(struct mi_graph *g, struct qnode *q, struct mi_node *p,
			   struct mi_node *user)
{
	/* p's output feeds only `user` (which no longer reads it) */
	if (p && !p->dead && mi_graph_sole_consumer(g, p->outputs[0]) == (int)(user - g->nodes))
		kill(g, q, p);
}

static void rewire(struct mi_graph *g, struct mi_node *n, int xq, const struct chain *c,
		   struct mi_node *xdq, struct mi_node *wdq, struct mi_node *bdq)
{
	struct qnode *q = n->priv;

	q->orig_ninputs = n->ninputs;
	q->orig_in0 = n->inputs[0];
	q->orig_in1 = n->ninputs > 1 ? n->inputs[1] : -1;
	q->orig_out0 = n->outputs[0];
	kill_if_unused(g, q, xdq, n);
	kill_if_unused(g, q, wdq, n);
	if (bdq != wdq)
		kill_if_unused(g, q, bdq, n);
	n->inputs[0] = xq;
	n->ninputs = 1;
	if (c->act)
		kill(g, q, c->act);
	if (c->q)
		kill(g, q, c->q);
	n->outputs[0] = c->out;
	g->tensors[c->out].producer = (int)(n - g->nodes);
}

static int skip(const struct mi_node *n, const char *why)
{
	static int dbg = -1;

	if (dbg < 0)
		dbg = getenv("MI_QUANT_DEBUG") && *getenv("MI_QUANT_DEBUG") == '1';
	if (dbg)
		fprintf(stderr, "metainfer: int8: node '%s' (%s) not planned: %s\n", n->name,
			n->op_type, why);
	return 0;
}

static int try_qdq(struct mi_graph *g, struct mi_node *n)
{
	bool conv = !strcmp(n->op_type, "Conv"), gemm = !strcmp(n->op_type, "Gemm");
	bool matmul = !strcmp(n->op_type, "MatMul");
	struct mi_node *xdq, *wdq, *bdq = NULL;
	struct qact xa;
	struct qw w = { 0 };
	struct chain c;
	float *bf = NULL;
	int err = 0;

	if ((!conv && !gemm && !matmul) || n->domain[0] || n->ninputs < 2)
		return 0;
	xdq = producer(g, n->inputs[0], "DequantizeLinear");
	wdq = find_dq(g, n->inputs[1]);
	if (!xdq || !act_params(g, xdq, 0, 1, 2, &xa))
		return skip(n, "input is not a per-tensor uint8/int8 DequantizeLinear");
	if (mi_tensor_numel(mi_in(g, xdq, 1)) != 1)
		return skip(n, "activation scale is not per tensor");
	struct mi_tensor *wt = mi_in(g, n, 1);
	/* the int8 weights: DQ inputs if still there, else recovered */
	struct mi_tensor *wq = wdq ? mi_in(g, wdq, 0) : NULL;

	if (!wt || !mi_tensor_shape_known(wt))
		return skip(n, "weight shape unknown");
	if (wq && !wq->data)
		wq = NULL;
	if (!wq && !(wt->flags & MI_TF_CONST))
		return skip(n, "weights are not DequantizeLinear of constant int8");
	int wrank = wt->ndim;
	int ax_attr = wdq ? (int)mi_attr_int(wdq, "axis", 1) : 0;

	if (ax_attr < 0)
		ax_attr += wrank;
	int bi = n->ninputs > 2 ? n->inputs[2] : -1;

	if (bi >= 0)
		bdq = producer(g, bi, "DequantizeLinear");
	follow_chain(g, n->outputs[0], &c);
	if (conv) {
		struct mi_qconv_shape s;

		if (!conv_shape(g, n, 0, 1, &s) || wrank != 4)
			return skip(n, "not a 2-D convolution with known shapes");
		if (wq ? !weight_params(g, wq, mi_in(g, wdq, 1), mi_in(g, wdq, 2), 0, ax_attr, s.oc, &w) :
			 !recover_weights(wt, s.oc, mi_tensor_numel(wt) / s.oc, &w))
			return skip(n, "weights are not constant int8 with zero zero points (per tensor or per output channel)");
		if (!read_bias(g, bi, s.oc, &bf))
			goto out;
		err = plan_conv(g, n, &xa, &w, &s, NULL, bf, &c);
	} else {
		struct mi_tensor *x = mi_in(g, n, 0);
		bool trans;
		int64_t k, noc, m;

		if (wrank != 2 || xa.dtype != MI_DT_UINT8 || !mi_tensor_shape_known(x) ||
		    x->ndim < 1)
			return skip(n, "not uint8 activations / 2-D weights with known shapes");
		if (gemm) {
			if (mi_attr_int(n, "transA", 0) || mi_attr_float(n, "alpha", 1) != 1.0f ||
			    mi_attr_float(n, "beta", 1) != 1.0f || x->ndim != 2)
				return skip(n, "Gemm with transA/alpha/beta");
			trans = !mi_attr_int(n, "transB", 0);
		} else {
			trans = true;
			if (bi >= 0)
				return skip(n, "MatMul with a third input");
		}
		k = trans ? wt->dims[0] : wt->dims[1];
		noc = trans ? wt->dims[1] : wt->dims[0];
		if (x->dims[x->ndim - 1] != k)
			return skip(n, "inner dimension mismatch");
		m = mi_tensor_numel(x) / k;
		if (wq ? !weight_params(g, wq, mi_in(g, wdq, 1), mi_in(g, wdq, 2), trans ? 1 : 0,
					ax_attr, noc, &w) :
			 !recover_weights(wt, noc, trans ? 1 : k, &w))
			return skip(n, "weights are not constant int8 with zero zero points (per tensor or per output column)");
		if (!read_bias(g, bi, noc, &bf))
			goto out;
		err = plan_gemm(g, n, &xa, &w, k, noc, trans, m, NULL, bf, &c);
	}
	if (!err && n->priv)
		rewire(g, n, xa.t, &c, xdq, wdq, bdq);
out:
	qw_free(&w);
	free(bf);
	return err;
}

static int try_qlinear(struct mi_graph *g, struct mi_node *n)
{
	bool conv = !strcmp(n->op_type, "QLinearConv");
	bool mm = !strcmp(n->op_type, "QLinearMatMul");
	struct qact xa;
	struct qw w = { 0 };
	struct chain c;
	int err = 0;

	if ((!conv && !mm) || n->domain[0])
		return 0;
	memset(&c, 0, sizeof(c));
	c.out = n->outputs[0];
	c.lo = -INFINITY;
	c.hi = INFINITY;
	if (!act_params(g, n, 0, 1, 2, &xa))
		return 0;
	/* output params: inputs 6, 7 */
	struct mi_tensor *ys = mi_in(g, n, 6), *yz = mi_in(g, n, 7), *y = mi_out(g, n, 0);

	if (!const_scalar(ys) || ys->dtype != MI_DT_FLOAT || (yz && !const_scalar(yz)))
		return 0;
	c.q = NULL;
	c.y.scale = *(const float *)ys->data;
	c.y.zp = yz ? (int32_t)mi_tensor_get_i64(yz, 0) : 0;
	c.y.dtype = y->dtype;
	if (!(c.y.scale > 0))
		return 0;
	struct mi_tensor *wq = mi_in(g, n, 3);
	struct chain cq = c;

	cq.q = n; /* marks "requantize"; never killed (see below) */
	if (conv) {
		struct mi_qconv_shape s;
		struct mi_tensor *b = mi_in(g, n, 8);

		if (!conv_shape(g, n, 0, 3, &s) || !wq || wq->ndim != 4)
			return 0;
		if (!weight_params(g, wq, mi_in(g, n, 4), mi_in(g, n, 5), 0, 0, s.oc, &w))
			return 0;
		if (b && (!const_t(b) || b->dtype != MI_DT_INT32 || mi_tensor_numel(b) != s.oc))
			goto out;
		err = plan_conv(g, n, &xa, &w, &s, b ? b->data : NULL, NULL, &cq);
	} else {
		struct mi_tensor *x = mi_in(g, n, 0);

		if (!wq || wq->ndim != 2 || xa.dtype != MI_DT_UINT8 || !mi_tensor_shape_known(x) ||
		    x->ndim < 2 || x->dims[x->ndim - 1] != wq->dims[0])
			return 0;
		if (!weight_params(g, wq, mi_in(g, n, 4), mi_in(g, n, 5), 1, 1, wq->dims[1], &w))
			goto out;
		err = plan_gemm(g, n, &xa, &w, wq->dims[0], wq->dims[1], true,
				mi_tensor_numel(x) / wq->dims[0], NULL, NULL, &cq);
	}
out:
	qw_free(&w);
	return err;
}

/* ---- Add and MaxPool on quantized tensors --------------------------------- */

struct qadd_job {
	const struct qnode *q;
	const uint8_t *a, *b;
	uint8_t *y;
};

static void qadd_range(void *arg, int64_t b, int64_t e)
{
	const struct qadd_job *j = arg;

	mi_qadd(j->a + b, j->b + b, e - b, &j->q->add, j->y + b);
}

static int qadd_run(struct mi_graph *g, struct mi_node *n)
{
	struct qnode *q = n->priv;
	struct qadd_job j = { q, mi_in(g, n, 0)->data, mi_in(g, n, 1)->data,
			      mi_out(g, n, 0)->data };

	par_rows(q->nthreads, mi_tensor_numel(mi_out(g, n, 0)), px_row(mi_out(g, n, 0), q->px_c4),
		 16 << 10, qadd_range, &j);
	return 0;
}

/* Per-thread row buffer of the int8 MaxPool: whole cache lines, so two
 * threads never write the same line (false sharing). */
#define QPOOL_TMP(w) ((((size_t)(w) + 64) + 63) & ~(size_t)63)

struct qpool_job {
	const struct qnode *q;
	const uint8_t *x;
	uint8_t *y;
};

static void qpool_item(void *arg, int i, int tid)
{
	const struct qpool_job *j = arg;
	const struct mi_qpool_shape *s = &j->q->pool;

	mi_qmaxpool_plane(j->x + (size_t)i * s->h * s->w, s, j->q->pool_s8,
			  (uint8_t *)j->q->sh->ws + (size_t)tid * QPOOL_TMP(s->w),
			  j->y + (size_t)i * s->oh * s->ow);
}

/* C4 layout (in_c4: input and output): one quad plane of 4 channels. */
static void qpool_item_c4(void *arg, int i, int tid)
{
	const struct qpool_job *j = arg;
	const struct mi_qpool_shape *s = &j->q->pool;

	mi_qmaxpool_plane_c4(j->x + (size_t)i * s->h * s->w * 4, s, j->q->pool_s8,
			     (uint8_t *)j->q->sh->ws + (size_t)tid * QPOOL_TMP(4 * s->w),
			     j->y + (size_t)i * s->oh * s->ow * 4);
}

static int qpool_run(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0);
	struct qpool_job j = { n->priv, x->data, mi_out(g, n, 0)->data };

	cur_threads = j.q->nthreads;
	if (j.q->in_c4)
		pool_for((int)(x->dims[0] * x->dims[1] / 4), qpool_item_c4, &j);
	else
		pool_for((int)(x->dims[0] * x->dims[1]), qpool_item, &j);
	return 0;
}

static bool same_q(const struct qact *a, const struct qact *b)
{
	return a->scale == b->scale && a->zp == b->zp && a->dtype == b->dtype;
}

/* Rewire a node to read xs[0..nx) and write c->out (Add, MaxPool). */
static void rewire_n(struct mi_graph *g, struct mi_node *n, const int *xs, int nx,
		     const struct chain *c)
{
	struct qnode *q = n->priv;

	q->orig_ninputs = n->ninputs;
	q->orig_in0 = n->inputs[0];
	q->orig_in1 = n->ninputs > 1 ? n->inputs[1] : -1;
	q->orig_out0 = n->outputs[0];
	for (int i = 0; i < nx; i++)
		n->inputs[i] = xs[i];
	if (c->act)
		kill(g, q, c->act);
	if (c->q)
		kill(g, q, c->q);
	n->outputs[0] = c->out;
	g->tensors[c->out].producer = (int)(n - g->nodes);
}

static int try_qadd(struct mi_graph *g, struct mi_node *n)
{
	struct mi_node *da, *db;
	struct qact a, b;
	struct chain c;
	struct mi_tensor *y = mi_out(g, n, 0);
	struct qnode *q;

	if (strcmp(n->op_type, "Add") || n->domain[0] || n->ninputs != 2 || n->noutputs != 1)
		return 0;
	da = producer(g, n->inputs[0], "DequantizeLinear");
	db = producer(g, n->inputs[1], "DequantizeLinear");
	if (!da || !db || !act_params(g, da, 0, 1, 2, &a) || !act_params(g, db, 0, 1, 2, &b))
		return skip(n, "inputs are not per-tensor uint8/int8 DequantizeLinear");
	if (!mi_tensor_shape_known(y) || mi_tensor_numel(mi_in(g, n, 0)) != mi_tensor_numel(y) ||
	    mi_tensor_numel(mi_in(g, n, 1)) != mi_tensor_numel(y))
		return skip(n, "broadcasting Add");
	follow_chain(g, n->outputs[0], &c);
	if (!c.q || (c.act && strcmp(c.act->op_type, "Relu")))
		return skip(n, "not followed by [Relu] QuantizeLinear");
	q = qnode_new(qadd_run);
	if (!q)
		return -ENOMEM;
	q->add = (struct mi_qadd_args){
		.sa = a.scale, .sb = b.scale, .sy = c.y.scale,
		.za = a.zp, .zb = b.zp, .zy = c.y.zp,
		.a_s8 = a.dtype == MI_DT_INT8, .b_s8 = b.dtype == MI_DT_INT8,
		.y_s8 = c.y.dtype == MI_DT_INT8, .relu = c.act != NULL,
		.lo = c.y.dtype == MI_DT_INT8 ? -128.0f : 0.0f,
		.hi = c.y.dtype == MI_DT_INT8 ? 127.0f : 255.0f,
	};
	n->priv = q;
	int xs[2] = { a.t, b.t };

	rewire_n(g, n, xs, 2, &c);
	return 0;
}

static int try_qpool(struct mi_graph *g, struct mi_node *n)
{
	struct mi_node *dx;
	struct qact a;
	struct chain c;
	struct mi_spatial sp;
	struct mi_tensor *x = mi_in(g, n, 0), *y = mi_out(g, n, 0);
	const int64_t *ks;
	int cnt;
	struct qnode *q;

	if (strcmp(n->op_type, "MaxPool") || n->domain[0] || n->noutputs != 1)
		return 0;
	dx = producer(g, n->inputs[0], "DequantizeLinear");
	if (!dx || !act_params(g, dx, 0, 1, 2, &a) || !x || x->ndim != 4 ||
	    !mi_tensor_shape_known(x) || !mi_tensor_shape_known(y))
		return skip(n, "input is not a per-tensor uint8/int8 DequantizeLinear of NCHW");
	follow_chain(g, n->outputs[0], &c);
	if (!c.q || c.act || !same_q(&a, &c.y))
		return skip(n, "not followed by a QuantizeLinear with the input's parameters");
	ks = mi_attr_ints(n, "kernel_shape", &cnt);
	if (!ks || cnt != 2)
		return skip(n, "kernel_shape");
	memset(&sp, 0, sizeof(sp));
	sp.kernel[0] = ks[0];
	sp.kernel[1] = ks[1];
	if (mi_ops_spatial(g, n, &sp, x, 1)) {
		g->err[0] = 0;
		return skip(n, "pooling attributes");
	}
	q = qnode_new(qpool_run);
	if (!q)
		return -ENOMEM;
	q->pool = (struct mi_qpool_shape){
		.h = (int)x->dims[2], .w = (int)x->dims[3], .oh = (int)y->dims[2],
		.ow = (int)y->dims[3], .kh = (int)ks[0], .kw = (int)ks[1],
		.sh = (int)sp.stride[0], .sw = (int)sp.stride[1], .dh = (int)sp.dil[0],
		.dw = (int)sp.dil[1], .pt = (int)sp.pad_begin[0], .pl = (int)sp.pad_begin[1],
	};
	q->pool_s8 = a.dtype == MI_DT_INT8;
	if ((int64_t)QPOOL_TMP(4 * q->pool.w) * 64 > shared_need) /* room for C4 rows */
		shared_need = (int64_t)QPOOL_TMP(4 * q->pool.w) * 64;
	n->priv = q;
	rewire_n(g, n, &a.t, 1, &c);
	return 0;
}

/* ---- Sigmoid / SiLU on a quantized tensor --------------------------------- */

/*
 * DQ(xq) -> Sigmoid | HardSigmoid [-> Mul(DQ(xq), .)] (SiLU), HardSwish:
 * the input has 256 possible
 * values, so the node becomes a table lookup indexed by the quantized
 * byte.  The entries are the float operations of the unfused ops (the
 * DequantizeLinear kernel's (q - zp) * scale, 1 / (1 + exp(-x)) or
 * clamp(alpha * x + beta, 0, 1), x * s),
 * so the outputs do not change; exp runs 256 times per plan instead of
 * once per element.
 */
MI_QUANT_SWITCH(luti, "MI_QUANT_LUTI")

/*
 * lut[x[0..7]] as a vector from eight scalar loads (vmovss + vinsertps):
 * on Zen 3 ~1.5x the rate of one vgatherdps of the same eight entries
 * (qse_direct_avx2, gap_sums_avx2 and lut_avx2 take it unless
 * MI_QUANT_LUTI=0, which keeps the gathers; the same floats).
 */
__attribute__((target("avx2"), always_inline)) static inline __m256
lut8x_avx2(const float *lut, const uint8_t *x, bool ins)
{
	if (!ins)
		return _mm256_i32gather_ps(
			lut, _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)x)), 4);
	return _mm256_setr_ps(lut[x[0]], lut[x[1]], lut[x[2]], lut[x[3]], lut[x[4]], lut[x[5]],
			      lut[x[6]], lut[x[7]]);
}

/* lut[x[0]], lut[x[4]], .., lut[x[28]]: eight pixels of one channel of a
 * C4 quad */
__attribute__((target("avx2"), always_inline)) static inline __m256
lut8x4_avx2(const float *lut, const uint8_t *x)
{
	return _mm256_setr_ps(lut[x[0]], lut[x[4]], lut[x[8]], lut[x[12]], lut[x[16]],
			      lut[x[20]], lut[x[24]], lut[x[28]]);
}

__attribute__((target("avx512f"))) static int64_t
lut_avx512(const uint8_t *x, const float *lut, int64_t n, float *y)
{
	int64_t i = 0;

	for (; i + 16 <= n; i += 16) {
		__m512i k = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(x + i)));

		_mm512_storeu_ps(y + i, _mm512_i32gather_ps(k, lut, 4));
	}
	return i;
}

/* The same with AVX2 gathers (~1.5x the scalar loop's rate on Zen 3). */
__attribute__((target("avx2"))) static int64_t
lut_avx2(const uint8_t *x, const float *lut, int64_t n, float *y)
{
	bool ins = luti_on();
	int64_t i = 0;

	for (; i + 16 <= n; i += 16) {
		_mm256_storeu_ps(y + i, lut8x_avx2(lut, x + i, ins));
		_mm256_storeu_ps(y + i + 8, lut8x_avx2(lut, x + i + 8, ins));
	}
	return i;
}

static int lutg_cur = -1;

/* MI_QUANT_LUTG=0: the AVX2 path looks tables up one byte at a time (A/B). */
static bool lutg_on(void)
{
	return mi_quant_switch(&lutg_cur, "MI_QUANT_LUTG");
}

/* byte -> byte table: two 128-entry vpermi2b lookups, picked by bit 7 */
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) static int64_t
lut8_vbmi(const uint8_t *x, const uint8_t *lut, int64_t n, uint8_t *y)
{
	__m512i t0 = _mm512_loadu_si512(lut), t1 = _mm512_loadu_si512(lut + 64);
	__m512i t2 = _mm512_loadu_si512(lut + 128), t3 = _mm512_loadu_si512(lut + 192);
	int64_t i = 0;

	for (; i < n; i += 64) {
		__mmask64 m = n - i >= 64 ? ~0ull : (1ull << (n - i)) - 1;
		__m512i k = _mm512_maskz_loadu_epi8(m, x + i);
		__m512i lo = _mm512_permutex2var_epi8(t0, k, t1);
		__m512i hi = _mm512_permutex2var_epi8(t2, k, t3);

		_mm512_mask_storeu_epi8(y + i, m,
					_mm512_mask_blend_epi8(_mm512_movepi8_mask(k), lo, hi));
	}
	return i;
}

/*
 * The same on AVX2: each 16-entry slice of the table broadcast to both
 * lanes, looked up by the low nibble (vpshufb) and kept where the high
 * nibble is the slice's (vpcmpeqb + vpblendvb): 32 bytes per step,
 * ~2.5x the scalar loop on Zen 3.  Returns the bytes done (a multiple
 * of 32).
 */
MI_QUANT_SWITCH(lut8x, "MI_QUANT_LUT8X")

/*
 * The same with a telescoping XOR instead of the compares and blends:
 * d[j] = slice j ^ slice j - 1 within each half (d[0], d[8]: slices 0
 * and 8).  For a byte x < 128 with high nibble h, a_j = x - 16j (wrapping)
 * lies in [0, 128) for j <= h, with x's low nibble, and in [144, 255] for
 * h < j <= 7, where vpshufb gives 0: XOR over j < 8 of vpshufb(d[j], a_j)
 * is d[0] ^ .. ^ d[h] = slice h at the low nibble.  The upper half does
 * the same on x ^ 0x80, and x's bit 7 picks the half (one vpblendvb).
 * 16 vpshufb, 14 vpsubb, 15 vpxor and a vpblendvb per 32 bytes, the
 * two halves independent chains; the same bytes as lut8_avx2.
 */
/* One step of it: the 32 bytes k looked up in the slices d. */
__attribute__((target("avx2"))) static inline __m256i tel32_avx2(const __m256i *d, __m256i k)
{
	const __m256i s16 = _mm256_set1_epi8(16), hb = _mm256_set1_epi8((char)0x80);
	__m256i a = k, b = _mm256_xor_si256(k, hb);
	__m256i rl = _mm256_shuffle_epi8(d[0], a), rh = _mm256_shuffle_epi8(d[8], b);

#pragma GCC unroll 7
	for (int j = 1; j < 8; j++) {
		a = _mm256_sub_epi8(a, s16);
		b = _mm256_sub_epi8(b, s16);
		rl = _mm256_xor_si256(rl, _mm256_shuffle_epi8(d[j], a));
		rh = _mm256_xor_si256(rh, _mm256_shuffle_epi8(d[8 + j], b));
	}
	return _mm256_blendv_epi8(rl, rh, k);
}

__attribute__((target("avx2"))) static int64_t
lut8x_tel_avx2(const uint8_t *x, const uint8_t *lut, int64_t n, uint8_t *y)
{
	__m256i d[16];
	int64_t i = 0;

	for (int c = 0; c < 16; c++) {
		__m128i t = _mm_loadu_si128((const __m128i *)(lut + 16 * c));

		if (c % 8)
			t = _mm_xor_si128(t, _mm_loadu_si128(
						     (const __m128i *)(lut + 16 * (c - 1))));
		d[c] = _mm256_broadcastsi128_si256(t);
	}
	for (; i + 32 <= n; i += 32)
		_mm256_storeu_si256((__m256i *)(y + i),
				    tel32_avx2(d, _mm256_loadu_si256((const __m256i *)(x + i))));
	return i;
}

__attribute__((target("avx2"))) static int64_t
lut8_avx2(const uint8_t *x, const uint8_t *lut, int64_t n, uint8_t *y)
{
	const __m256i m4 = _mm256_set1_epi8(0x0f);
	__m256i t[16];
	int64_t i = 0;

	if (lut8x_on())
		return lut8x_tel_avx2(x, lut, n, y);

	for (int c = 0; c < 16; c++)
		t[c] = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(lut + 16 * c)));
	for (; i + 32 <= n; i += 32) {
		__m256i k = _mm256_loadu_si256((const __m256i *)(x + i));
		__m256i lo = _mm256_and_si256(k, m4);
		__m256i hi = _mm256_and_si256(_mm256_srli_epi16(k, 4), m4);
		__m256i r = _mm256_shuffle_epi8(t[0], lo);

		for (int c = 1; c < 16; c++)
			r = _mm256_blendv_epi8(r, _mm256_shuffle_epi8(t[c], lo),
					       _mm256_cmpeq_epi8(hi, _mm256_set1_epi8((char)c)));
		_mm256_storeu_si256((__m256i *)(y + i), r);
	}
	return i;
}

static int lut8v_cur = -1;

/* MI_QUANT_LUT8=0: the AVX2 path looks byte tables up one byte at a time (A/B). */
static bool lut8v_on(void)
{
	return mi_quant_switch(&lut8v_cur, "MI_QUANT_LUT8");
}

static bool have_vbmi(void)
{
	static int v = -1;

	if (v < 0) {
		__builtin_cpu_init();
		v = __builtin_cpu_supports("avx512vbmi");
	}
	return v;
}

/* y[i] = lut[x[i]] for i < n, on the best path of this CPU. */
static void lut8_any(const uint8_t *x, const uint8_t *lut, int64_t n, uint8_t *y)
{
	int64_t i = 0;

	if (mi_quant_isa() == MI_QISA_AVX512 && have_vbmi())
		i = lut8_vbmi(x, lut, n, y);
	else if (mi_quant_isa() == MI_QISA_AVX2 && lut8v_on())
		i = lut8_avx2(x, lut, n, y);
	for (; i < n; i++)
		y[i] = lut[x[i]];
}

/* The 256-entry float table as four byte planes: plane k holds byte k of
 * every entry, looked up with vpermi2b (lut32_vbmi). NULL: no memory. */
static uint8_t *lut_planes(const float *lut)
{
	uint8_t *p = aligned_alloc(64, 1024);

	if (p)
		for (int b = 0; b < 256; b++)
			for (int k = 0; k < 4; k++)
				p[k * 256 + b] = ((const uint8_t *)&lut[b])[k];
	return p;
}

/* Byte order that comes out in order after an 8-bit then a 16-bit unpack
 * of four vectors: position 16L + 4v + m takes byte 16v + 4L + m. */
__attribute__((target("avx512f,avx512bw"), always_inline)) static inline __m512i lane_perm(void)
{
	return _mm512_set_epi8(63, 62, 61, 60, 47, 46, 45, 44, 31, 30, 29, 28, 15, 14, 13, 12,
			       59, 58, 57, 56, 43, 42, 41, 40, 27, 26, 25, 24, 11, 10, 9, 8,
			       55, 54, 53, 52, 39, 38, 37, 36, 23, 22, 21, 20, 7, 6, 5, 4,
			       51, 50, 49, 48, 35, 34, 33, 32, 19, 18, 17, 16, 3, 2, 1, 0);
}

/*
 * lut[x[0..63]] as four vectors of 16 floats, in order (v[0] = entries of
 * x[0..15], ...), without gathers: each byte plane is two 128-entry
 * vpermi2b lookups picked by bit 7, the planes interleaved into dwords.
 * Unpacking works within 128-bit lanes, so the indices are first permuted
 * (position 16L + 4v + m takes x[16v + 4L + m]) to come out in order.
 */
__attribute__((target("avx512f,avx512bw,avx512vbmi"), always_inline)) static inline void
lut32_vbmi(const __m512i t[16], __m512i x, __m512 v[4])
{
	__m512i k = _mm512_permutexvar_epi8(lane_perm(), x), b[4];
	__mmask64 hi = _mm512_movepi8_mask(k);

#pragma GCC unroll 4
	for (int p = 0; p < 4; p++)
		b[p] = _mm512_mask_blend_epi8(hi, _mm512_permutex2var_epi8(t[4 * p], k, t[4 * p + 1]),
					      _mm512_permutex2var_epi8(t[4 * p + 2], k, t[4 * p + 3]));
	__m512i w0 = _mm512_unpacklo_epi8(b[0], b[1]), w1 = _mm512_unpackhi_epi8(b[0], b[1]);
	__m512i w2 = _mm512_unpacklo_epi8(b[2], b[3]), w3 = _mm512_unpackhi_epi8(b[2], b[3]);

	v[0] = _mm512_castsi512_ps(_mm512_unpacklo_epi16(w0, w2));
	v[1] = _mm512_castsi512_ps(_mm512_unpackhi_epi16(w0, w2));
	v[2] = _mm512_castsi512_ps(_mm512_unpacklo_epi16(w1, w3));
	v[3] = _mm512_castsi512_ps(_mm512_unpackhi_epi16(w1, w3));
}

__attribute__((target("avx512f,avx512bw,avx512vbmi"), always_inline)) static inline void
lut32_load(const uint8_t *planes, __m512i t[16])
{
#pragma GCC unroll 16
	for (int i = 0; i < 16; i++)
		t[i] = _mm512_load_si512(planes + 64 * i);
}

/* y[0..n) = lut[x[0..n)] from the table's byte planes: 64 bytes per
 * lut32_vbmi, the last partial step under masks (no gathers) */
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) static void
lut_f32_vbmi(const uint8_t *planes, const uint8_t *x, int64_t n, float *y)
{
	__m512i t[16];

	lut32_load(planes, t);
	for (int64_t i = 0; i < n; i += 64) {
		int64_t r = n - i;
		__mmask64 m = r >= 64 ? ~0ull : (1ull << r) - 1;
		__m512 v[4];

		lut32_vbmi(t, _mm512_maskz_loadu_epi8(m, x + i), v);
		if (r >= 64) {
			_mm512_storeu_ps(y + i, v[0]);
			_mm512_storeu_ps(y + i + 16, v[1]);
			_mm512_storeu_ps(y + i + 32, v[2]);
			_mm512_storeu_ps(y + i + 48, v[3]);
			continue;
		}
		for (int k = 0; k < 4 && r > 16 * k; k++) {
			int64_t c = r - 16 * k;

			_mm512_mask_storeu_ps(y + i + 16 * k,
					      c >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << c) - 1),
					      v[k]);
		}
	}
}

/* y[0..n) = lut[x[0..n)]: the vbmi lookups where the node has byte planes,
 * else gathers / scalar (the same values) */
static void lut_f32(const struct qnode *q, const uint8_t *x, int64_t n, float *y)
{
	int64_t i = 0;

	if (mi_quant_isa() == MI_QISA_AVX512) {
		if (q->lutb && have_vbmi()) {
			lut_f32_vbmi(q->lutb, x, n, y);
			return;
		}
		i = lut_avx512(x, q->lut, n, y);
	} else if (mi_quant_isa() == MI_QISA_AVX2 && lutg_on()) {
		i = lut_avx2(x, q->lut, n, y);
	}
	for (; i < n; i++)
		y[i] = q->lut[x[i]];
}

/* one parallel job over a node's uint8 input: qlut_range, qgap_item */
struct qlut_job {
	const struct qnode *q;
	const uint8_t *x;
	void *y;
};

static void qlut_range(void *arg, int64_t b, int64_t e)
{
	const struct qlut_job *j = arg;
	const struct qnode *q = j->q;
	const uint8_t *x = j->x + b;
	int64_t cnt = e - b;

	if (q->lut8) {
		uint8_t *y8 = (uint8_t *)j->y + b;

		lut8_any(x, q->lut8, cnt, y8);
		return;
	}
	lut_f32(q, x, cnt, (float *)j->y + b);
}

static bool qdq_layout_run(const struct qnode *q, const void *x, void *y);

static int qlut_run(struct mi_graph *g, struct mi_node *n)
{
	const struct qnode *q = n->priv;
	struct qlut_job j = { q, mi_in(g, n, 0)->data, mi_out(g, n, 0)->data };

	if (qdq_layout_run(q, j.x, j.y)) /* C4 input / blocked output */
		return 0;
	par_rows(q->nthreads, mi_tensor_numel(mi_out(g, n, 0)), px_row(mi_out(g, n, 0), q->px_c4),
		 q->lut8 ? 32 << 10 : 8 << 10, qlut_range, &j);
	return 0;
}

static int try_qlut(struct mi_graph *g, struct mi_node *n)
{
	struct mi_node *dx, *mul = NULL;
	struct qact a;
	struct mi_tensor *x = mi_in(g, n, 0), *y = mi_out(g, n, 0);
	struct qnode *q;
	int mi;

	bool hsig = !strcmp(n->op_type, "HardSigmoid");
	bool hswish = !strcmp(n->op_type, "HardSwish");
	float alpha = hsig ? mi_attr_float(n, "alpha", 0.2f) : 0;
	float beta = hsig ? mi_attr_float(n, "beta", 0.5f) : 0;

	if ((!hsig && !hswish && strcmp(n->op_type, "Sigmoid")) || n->domain[0] || n->ninputs != 1 ||
	    n->noutputs != 1)
		return 0;
	dx = producer(g, n->inputs[0], "DequantizeLinear");
	if (!dx || !act_params(g, dx, 0, 1, 2, &a) || !x || !y || x->dtype != MI_DT_FLOAT ||
	    y->dtype != MI_DT_FLOAT || !mi_tensor_shape_known(y) ||
	    mi_tensor_numel(mi_in(g, dx, 0)) != mi_tensor_numel(y))
		return skip(n, "input is not a per-tensor uint8/int8 DequantizeLinear");
	/* SiLU: the Sigmoid's only reader is Mul(DQ output, Sigmoid output) */
	mi = hswish ? -1 : mi_graph_sole_consumer(g, n->outputs[0]);
	if (mi >= 0) {
		struct mi_node *m = &g->nodes[mi];
		struct mi_tensor *my = m->noutputs == 1 ? mi_out(g, m, 0) : NULL;

		if (!strcmp(m->op_type, "Mul") && !m->domain[0] && !m->dead && !m->priv &&
		    m->ninputs == 2 && my && my->dtype == MI_DT_FLOAT &&
		    mi_tensor_shape_known(my) && mi_tensor_numel(my) == mi_tensor_numel(y) &&
		    ((m->inputs[0] == n->outputs[0] && m->inputs[1] == dx->outputs[0]) ||
		     (m->inputs[1] == n->outputs[0] && m->inputs[0] == dx->outputs[0])))
			mul = m;
	}
	q = qnode_new(qlut_run);
	if (!q)
		return -ENOMEM;
	q->lut = malloc(256 * sizeof(float));
	if (!q->lut) {
		qnode_free(q);
		return -ENOMEM;
	}
	for (int i = 0; i < 256; i++) {
		int v = a.dtype == MI_DT_INT8 ? (int8_t)i : i;
		float d = (float)(v - a.zp) * a.scale;
		float sg;

		if (hswish) {
			float hv = d * (1.0f / 6) + 0.5f;

			sg = d * (hv < 0 ? 0 : hv > 1 ? 1 : hv);
		} else if (hsig) {
			float hv = alpha * d + beta;

			sg = hv < 0 ? 0 : hv > 1 ? 1 : hv;
		} else {
			sg = 1.0f / (1.0f + expf(-d));
		}

		q->lut[i] = mul ? d * sg : sg;
	}
	/* a QuantizeLinear as the result's only reader: quantize the 256
	 * entries instead of every element (same kernel, same bytes) */
	int yt = mul ? mul->outputs[0] : n->outputs[0];
	int qi = (g->tensors[yt].flags & MI_TF_OUTPUT) ? -1 : mi_graph_sole_consumer(g, yt);
	struct mi_node *qn = qi >= 0 ? &g->nodes[qi] : NULL;
	struct qact qa;

	if (qn && !strcmp(qn->op_type, "QuantizeLinear") && !qn->domain[0] && !qn->dead &&
	    !qn->priv && qn->ninputs >= 2 && qn->inputs[0] == yt && qn->noutputs == 1 &&
	    q_params(g, qn, &qa) && mi_tensor_shape_known(mi_out(g, qn, 0)) &&
	    mi_tensor_numel(mi_out(g, qn, 0)) == mi_tensor_numel(y)) {
		q->lut8 = malloc(256);
		if (!q->lut8) {
			qnode_free(q);
			return -ENOMEM;
		}
		mi_quantize_f32(q->lut, 256, qa.scale, qa.zp, qa.dtype, q->lut8);
	} else {
		qn = NULL;
		q->lutb = lut_planes(q->lut); /* float output: vpermi2b lookups */
		if (!q->lutb) {
			qnode_free(q);
			return -ENOMEM;
		}
		q->qdq = a; /* float output: a DequantizeLinear's layouts */
		q->qdq_deq = true;
		qdq_dims(q, y);
	}
	n->priv = q;
	q->orig_ninputs = n->ninputs;
	q->orig_in0 = n->inputs[0];
	q->orig_in1 = -1;
	q->orig_out0 = n->outputs[0];
	n->inputs[0] = a.t;
	if (mul) {
		kill(g, q, mul);
		n->outputs[0] = mul->outputs[0];
		g->tensors[n->outputs[0]].producer = (int)(n - g->nodes);
	}
	if (qn) {
		kill(g, q, qn);
		n->outputs[0] = qn->outputs[0];
		g->tensors[n->outputs[0]].producer = (int)(n - g->nodes);
	}
	return 0;
}

/* ---- SE scaling on a table's output ------------------------------------------ */

/*
 * Mul(T(xq), s) -> QuantizeLinear, T a fp32 table node (SiLU / HardSwish
 * on a quantized input), s one value per channel ([N, C, 1, 1], the SE
 * gate): y = Q(T[xq] * s[c]). Per channel the 256 possible products are
 * quantized once (the same float multiply and Q kernel as the unfused ops)
 * and looked up; small planes compute the products directly. T's own
 * output stays (the SE squeeze reads it).
 */
struct qse_job {
	const struct qnode *q;
	const uint8_t *x;
	const float *s;
	uint8_t *y;
	int nc, np; /* items: np pixel ranges (part-major) x nc channels / quads */
};

/* Item i's channel (or quad) and pixel range [*p0, *p1): ranges of whole
 * 64-pixel blocks, part-major so that a thread's block of items is one
 * pixel range of every channel (see par_rows). */
static int qse_range(const struct qse_job *j, int i, int64_t *p0, int64_t *p1)
{
	int64_t hw = j->q->se_hw, p = i / j->nc;

	*p0 = p ? (hw * p / j->np + 32) & ~(int64_t)63 : 0;
	*p1 = p + 1 < j->np ? (hw * (p + 1) / j->np + 32) & ~(int64_t)63 : hw;
	return i % j->nc;
}

/*
 * y[i] = Q(lut[x[i]] * sv) for i < n, 16 pixels per step: the table
 * gathered, then the same float multiply, division, round-to-nearest-even
 * and clamp as the scalar product loop and mi_quantize_f32 (bit-identical
 * to them). Replaces a scalar product loop plus a quantize call per 64
 * pixels on the small planes of the SE path.
 */
__attribute__((target("avx512f,avx512bw,avx512vl"))) static void
qse_direct_avx512(const float *lut, const uint8_t *x, int64_t n, float sv,
		  const struct qact *qy, uint8_t *y)
{
	bool u8 = qy->dtype == MI_DT_UINT8;
	__m512 m = _mm512_set1_ps(sv), sc = _mm512_set1_ps(qy->scale);
	__m512 z = _mm512_set1_ps((float)qy->zp);
	__m512 lo = _mm512_set1_ps(u8 ? 0.0f : -128.0f), hi = _mm512_set1_ps(u8 ? 255.0f : 127.0f);

	for (int64_t i = 0; i < n; i += 16) {
		__mmask16 k = n - i >= 16 ? 0xffff : (__mmask16)((1u << (n - i)) - 1);
		__m512i idx = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(k, x + i));
		__m512 v = _mm512_mul_ps(_mm512_i32gather_ps(idx, lut, 4), m);

		v = _mm512_div_ps(v, sc);
		v = _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
		v = _mm512_add_ps(v, z);
		v = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
		_mm_mask_storeu_epi8(y + i, k, _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(v)));
	}
}

/* the same, the table looked up from its byte planes (no gathers), 64
 * pixels per step */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi"))) static void
qse_direct_vbmi(const uint8_t *planes, const uint8_t *x, int64_t n, float sv,
		const struct qact *qy, uint8_t *y)
{
	bool u8 = qy->dtype == MI_DT_UINT8;
	__m512 m = _mm512_set1_ps(sv), sc = _mm512_set1_ps(qy->scale);
	__m512 z = _mm512_set1_ps((float)qy->zp);
	__m512 lo = _mm512_set1_ps(u8 ? 0.0f : -128.0f), hi = _mm512_set1_ps(u8 ? 255.0f : 127.0f);
	__m512 rc = _mm512_set1_ps(1.0f / qy->scale);
	bool mul = mi_rcp_ok(qy->scale);
	__m512i t[16];

	lut32_load(planes, t);
	for (int64_t i = 0; i < n; i += 64) {
		__mmask64 k = n - i >= 64 ? ~0ull : (1ull << (n - i)) - 1;
		__m512 v[4];
		__m128i b[4];

		lut32_vbmi(t, _mm512_maskz_loadu_epi8(k, x + i), v);
		for (int c = 0; c < 4; c++) {
			__m512 w = _mm512_mul_ps(v[c], m);

			if (mul)
				w = mi_rne_div_avx512(w, sc, rc);
			else
				w = _mm512_roundscale_ps(_mm512_div_ps(w, sc),
							 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
			w = _mm512_min_ps(_mm512_max_ps(_mm512_add_ps(w, z), lo), hi);
			b[c] = _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(w));
		}
		__m512i r = _mm512_inserti32x4(_mm512_castsi128_si512(b[0]), b[1], 1);

		r = _mm512_inserti32x4(_mm512_inserti32x4(r, b[2], 2), b[3], 3);
		_mm512_mask_storeu_epi8(y + i, k, r);
	}
}

/* Q(v[0..3] * sv) as 64 bytes in lane_perm order (what the 32 -> 16 -> 8
 * bit packs give): ready for qse_quad_vbmi's interleave */
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) static inline __m512i
qse_q64(const __m512 v[4], float sv, const struct qact *qy, bool mul)
{
	bool u8 = qy->dtype == MI_DT_UINT8;
	__m512 sc = _mm512_set1_ps(qy->scale), rc = _mm512_set1_ps(1.0f / qy->scale);
	__m512 z = _mm512_set1_ps((float)qy->zp), m = _mm512_set1_ps(sv);
	__m512 lo = _mm512_set1_ps(u8 ? 0.0f : -128.0f), hi = _mm512_set1_ps(u8 ? 255.0f : 127.0f);
	__m512i b[4];

#pragma GCC unroll 4
	for (int c = 0; c < 4; c++) {
		__m512 w = _mm512_mul_ps(v[c], m);

		if (mul)
			w = mi_rne_div_avx512(w, sc, rc);
		else
			w = _mm512_roundscale_ps(_mm512_div_ps(w, sc),
						 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
		w = _mm512_min_ps(_mm512_max_ps(_mm512_add_ps(w, z), lo), hi);
		b[c] = _mm512_cvttps_epi32(w);
	}
	__m512i w01 = _mm512_packs_epi32(b[0], b[1]), w23 = _mm512_packs_epi32(b[2], b[3]);

	return u8 ? _mm512_packus_epi16(w01, w23) : _mm512_packs_epi16(w01, w23);
}

/* n <= 64 pixels of four channels (each 64 bytes in lane_perm order)
 * interleaved into C4 bytes at dst */
__attribute__((target("avx512f,avx512bw"), always_inline)) static inline void
qse_c4_store(const __m512i part[4], int64_t n, uint8_t *dst)
{
	__m512i w0 = _mm512_unpacklo_epi8(part[0], part[1]);
	__m512i w1 = _mm512_unpackhi_epi8(part[0], part[1]);
	__m512i w2 = _mm512_unpacklo_epi8(part[2], part[3]);
	__m512i w3 = _mm512_unpackhi_epi8(part[2], part[3]);
	__m512i o[4] = { _mm512_unpacklo_epi16(w0, w2), _mm512_unpackhi_epi16(w0, w2),
			 _mm512_unpacklo_epi16(w1, w3), _mm512_unpackhi_epi16(w1, w3) };

#pragma GCC unroll 4
	for (int j = 0; j < 4; j++) {
		int64_t nb = 4 * n - 64 * j;

		if (nb >= 64)
			_mm512_storeu_si512(dst + 64 * j, o[j]);
		else if (nb > 0)
			_mm512_mask_storeu_epi8(dst + 64 * j, (1ull << nb) - 1, o[j]);
	}
}

/*
 * C4 output of four channels (planar input x, channel stride hw) straight
 * from registers: per 64 pixels each channel looked up and quantized (its
 * bytes in lane_perm order), then interleaved into 4 x 64 bytes.
 */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi"))) static void
qse_quad_vbmi(const uint8_t *planes, const uint8_t *x, int64_t hw, int64_t pa, int64_t pb,
	      const float *sv, const struct qact *qy, uint8_t *y)
{
	bool mul = mi_rcp_ok(qy->scale);
	__m512i t[16];

	lut32_load(planes, t);
	for (int64_t p0 = pa; p0 < pb; p0 += 64) {
		int64_t n = pb - p0 < 64 ? pb - p0 : 64;
		__mmask64 k = n == 64 ? ~0ull : (1ull << n) - 1;
		__m512i part[4];
		__m512 v[4];

#pragma GCC unroll 4
		for (int c = 0; c < 4; c++) {
			lut32_vbmi(t, _mm512_maskz_loadu_epi8(k, x + c * hw + p0), v);
			part[c] = qse_q64(v, sv[c], qy, mul);
		}
		qse_c4_store(part, n, y + p0 * 4);
	}
}

/*
 * The same through per-channel byte tables (planes of 128+ pixels): each
 * channel's 256 products quantized once (qse_q64 on the table itself, put
 * back in order: lane_perm is its own inverse) into four registers, then
 * per 64 pixels two vpermi2b and a blend per channel, the indices taken in
 * lane_perm order so that the interleave writes pixels in order.
 */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi"))) static void
qse_quad_tab_vbmi(const float *lut, const uint8_t *x, int64_t hw, int64_t pa, int64_t pb,
		  const float *sv, const struct qact *qy, uint8_t *y)
{
	bool mul = mi_rcp_ok(qy->scale);
	__m512i perm = lane_perm(), tab[4][4];

#pragma GCC unroll 4
	for (int c = 0; c < 4; c++)
#pragma GCC unroll 4
		for (int k = 0; k < 4; k++) {
			__m512 v[4] = { _mm512_loadu_ps(lut + 64 * k), _mm512_loadu_ps(lut + 64 * k + 16),
					_mm512_loadu_ps(lut + 64 * k + 32),
					_mm512_loadu_ps(lut + 64 * k + 48) };

			tab[c][k] = _mm512_permutexvar_epi8(perm, qse_q64(v, sv[c], qy, mul));
		}
	for (int64_t p0 = pa; p0 < pb; p0 += 64) {
		int64_t n = pb - p0 < 64 ? pb - p0 : 64;
		__mmask64 k = n == 64 ? ~0ull : (1ull << n) - 1;
		__m512i part[4];

#pragma GCC unroll 4
		for (int c = 0; c < 4; c++) {
			__m512i i = _mm512_permutexvar_epi8(perm,
							    _mm512_maskz_loadu_epi8(k, x + c * hw + p0));

			part[c] = _mm512_mask_blend_epi8(
				_mm512_movepi8_mask(i), _mm512_permutex2var_epi8(tab[c][0], i, tab[c][1]),
				_mm512_permutex2var_epi8(tab[c][2], i, tab[c][3]));
		}
		qse_c4_store(part, n, y + p0 * 4);
	}
}

/*
 * tab[b] = Q(lut[b] * sv) for the 256 bytes: the products by vmulps, then
 * mi_quantize_f32; the same floats as the scalar loop, which gcc leaves
 * scalar here (~6 cycles a product on Zen 3 in qse_item_c4, subnormal
 * products of SiLU's far negative entries slowing it further).
 */
__attribute__((target("avx2"))) static void
qse_tab_avx2(const float *lut, float sv, const struct qact *qy, uint8_t *tab)
{
	float v[256] __attribute__((aligned(32)));
	__m256 m = _mm256_set1_ps(sv);

	for (int b = 0; b < 256; b += 8)
		_mm256_store_ps(v + b, _mm256_mul_ps(_mm256_loadu_ps(lut + b), m));
	mi_quantize_f32(v, 256, qy->scale, qy->zp, qy->dtype, tab);
}

/*
 * v[k] = lut[x[k]] * sv for k < n: the entries copied, then multiplied
 * by vmulps (the same floats as the scalar mulss loop, several times
 * faster on Zen 3, more so on subnormal products).
 */
__attribute__((target("avx2"))) static void
qse_prod_avx2(const float *lut, const uint8_t *x, int64_t n, float sv, float *v)
{
	__m256 m = _mm256_set1_ps(sv);
	int64_t k = 0;

	for (int64_t i = 0; i < n; i++)
		v[i] = lut[x[i]];
	for (; k + 8 <= n; k += 8)
		_mm256_storeu_ps(v + k, _mm256_mul_ps(_mm256_loadu_ps(v + k), m));
	if (k < n) {
		__m256i msk = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n - k)),
						 _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));

		_mm256_maskstore_ps(v + k, msk, _mm256_mul_ps(_mm256_maskload_ps(v + k, msk), m));
	}
}

MI_QUANT_SWITCH(sedirect, "MI_QUANT_SEDIRECT")

/*
 * y[i] = Q(lut[x[i]] * m[i % 8]) for i < n (a multiple of 8) on AVX2,
 * 8 pixels per step in registers: the entries looked up by lut8x_avx2,
 * the product by vmulps, then quant_avx2's operations (division, round to
 * nearest even, + zp, clamps, truncation, packs), so the bytes are those
 * of qse_prod_avx2 + mi_quantize_f32, without the float buffer between
 * them, whose scalar stores and vector reloads stalled on store
 * forwarding.  (A multiply by the reciprocal with a division only near
 * ties, as mi_rne_div_avx512, measured ~4% slower here on Zen 3: the
 * division is not the bottleneck.)
 */
__attribute__((target("avx2"), always_inline)) static inline void
qse_direct8_avx2(const float *lut, const uint8_t *x, int64_t n, __m256 m,
		 const struct qact *qy, uint8_t *y)
{
	bool u8 = qy->dtype == MI_DT_UINT8;
	__m256 sc = _mm256_set1_ps(qy->scale), z = _mm256_set1_ps((float)qy->zp);
	__m256 lo = _mm256_set1_ps(u8 ? 0.0f : -128.0f);
	__m256 hi = _mm256_set1_ps(u8 ? 255.0f : 127.0f);
	bool ins = luti_on();
	int64_t i = 0;

	for (; i + 8 <= n; i += 8) {
		__m256 p = _mm256_mul_ps(lut8x_avx2(lut, x + i, ins), m);
		__m256 r = _mm256_round_ps(_mm256_div_ps(p, sc),
					   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);

		r = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(r, z), lo), hi);
		__m256i q = _mm256_cvttps_epi32(r);
		__m128i w = _mm_packs_epi32(_mm256_castsi256_si128(q),
					    _mm256_extracti128_si256(q, 1));

		_mm_storel_epi64((__m128i *)(y + i),
				 u8 ? _mm_packus_epi16(w, w) : _mm_packs_epi16(w, w));
	}
}

/* the same for one channel (any n: the tail by the old pair) */
__attribute__((target("avx2"))) static void
qse_direct_avx2(const float *lut, const uint8_t *x, int64_t n, float sv,
		const struct qact *qy, uint8_t *y)
{
	int64_t i = n & ~(int64_t)7;

	qse_direct8_avx2(lut, x, i, _mm256_set1_ps(sv), qy, y);
	if (i < n) {
		float v[8];

		for (int64_t k = i; k < n; k++)
			v[k - i] = lut[x[k]] * sv;
		mi_quantize_f32(v, n - i, qy->scale, qy->zp, qy->dtype, y + i);
	}
}

/*
 * A C4 quad in and out (n >= 2 pixels of [n][4] bytes): its bytes are
 * one array whose multipliers repeat every 4 (s[0..3] twice per vector),
 * so qse_direct8_avx2 runs over it as it is, with no taking apart into
 * planes and no interleave; the last vector moves back onto the one
 * before it (the same bytes written twice).  Per byte the same product
 * and quantization as the planes' path.
 */
__attribute__((target("avx2"))) static void
qse_quad_direct_avx2(const float *lut, const uint8_t *x, int64_t n, const float *sv,
		     const struct qact *qy, uint8_t *y)
{
	__m256 m = _mm256_setr_ps(sv[0], sv[1], sv[2], sv[3], sv[0], sv[1], sv[2], sv[3]);
	int64_t nb = 4 * n, i = nb & ~(int64_t)7;

	qse_direct8_avx2(lut, x, i, m, qy, y);
	if (i < nb)
		qse_direct8_avx2(lut, x + nb - 8, 8, m, qy, y + nb - 8);
}

static int setab_cur = -1;

/* MI_QUANT_SETAB=0: on AVX2 the SE gate Mul multiplies by scalar mulss
 * and looks its C4 byte tables up byte by byte (A/B). */
static bool setab_on(void)
{
	return mi_quant_switch(&setab_cur, "MI_QUANT_SETAB");
}

static void qse_item(void *arg, int item, int tid)
{
	const struct qse_job *j = arg;
	const struct qnode *q = j->q;
	int64_t pa, pb, hw;
	int c = qse_range(j, item, &pa, &pb);
	const uint8_t *x = j->x + (size_t)c * q->se_hw + pa;
	uint8_t *y = j->y + (size_t)c * q->se_hw + pa;
	float sv = j->s[c], v[256];

	hw = pb - pa;
	if (q->se_hw >= 256) { /* the whole plane's choice: the same bytes */
		uint8_t tab[256];

		if (mi_quant_isa() == MI_QISA_AVX2 && setab_on()) {
			qse_tab_avx2(q->lut, sv, &q->se_y, tab);
		} else {
			for (int b = 0; b < 256; b++)
				v[b] = q->lut[b] * sv;
			mi_quantize_f32(v, 256, q->se_y.scale, q->se_y.zp, q->se_y.dtype, tab);
		}
		lut8_any(x, tab, hw, y);
		return;
	}
	if (mi_quant_isa() == MI_QISA_AVX512 && have_vbmi()) {
		qse_direct_vbmi(q->lutb, x, hw, sv, &q->se_y, y);
		return;
	}
	if (mi_quant_isa() == MI_QISA_AVX512) {
		qse_direct_avx512(q->lut, x, hw, sv, &q->se_y, y);
		return;
	}
	if (mi_quant_isa() == MI_QISA_AVX2 && setab_on() && sedirect_on()) {
		qse_direct_avx2(q->lut, x, hw, sv, &q->se_y, y);
		return;
	}
	for (int64_t i = 0; i < hw; i += 256) {
		int64_t n = hw - i < 256 ? hw - i : 256;

		if (mi_quant_isa() == MI_QISA_AVX2 && setab_on())
			qse_prod_avx2(q->lut, x + i, n, sv, v);
		else
			for (int64_t k = 0; k < n; k++)
				v[k] = q->lut[x[i + k]] * sv;
		mi_quantize_f32(v, n, q->se_y.scale, q->se_y.zp, q->se_y.dtype, y + i);
	}
}

/* n <= 64 outputs of channel c from pixel p0 (tab: its table or NULL) */
static void qse_part(const struct qnode *q, const uint8_t *x, float sv, const uint8_t *tab,
		     int n, uint8_t *y)
{
	int i = 0;

	if (tab) {
		if (mi_quant_isa() == MI_QISA_AVX512 && have_vbmi())
			i = (int)lut8_vbmi(x, tab, n, y);
		else if (mi_quant_isa() == MI_QISA_AVX2 && setab_on())
			i = (int)lut8_avx2(x, tab, n, y);
		for (; i < n; i++)
			y[i] = tab[x[i]];
		return;
	}
	if (mi_quant_isa() == MI_QISA_AVX512 && have_vbmi()) {
		qse_direct_vbmi(q->lutb, x, n, sv, &q->se_y, y);
		return;
	}
	if (mi_quant_isa() == MI_QISA_AVX512) {
		qse_direct_avx512(q->lut, x, n, sv, &q->se_y, y);
		return;
	}
	if (mi_quant_isa() == MI_QISA_AVX2 && setab_on() && sedirect_on()) {
		qse_direct_avx2(q->lut, x, n, sv, &q->se_y, y);
		return;
	}
	float v[64];

	if (mi_quant_isa() == MI_QISA_AVX2 && setab_on())
		qse_prod_avx2(q->lut, x, n, sv, v);
	else
		for (int k = 0; k < n; k++)
			v[k] = q->lut[x[k]] * sv;
	mi_quantize_f32(v, n, q->se_y.scale, q->se_y.zp, q->se_y.dtype, y);
}

/* n pixels of a C4 quad ([n][4] bytes at src) apart into 4 rows of ds
 * bytes' stride at d; AVX2: 8 pixels a step (vpshufb, vpermd) */
__attribute__((target("avx2"))) static int64_t c4_apart_avx2(const uint8_t *src, int64_t n,
							     uint8_t *d, int64_t ds)
{
	const __m256i sh = _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15,
					    0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
	const __m256i pm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
	int64_t i = 0;

	for (; i + 8 <= n; i += 8) {
		__m256i v = _mm256_loadu_si256((const __m256i *)(src + 4 * i));

		v = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(v, sh), pm);
		_mm_storel_epi64((__m128i *)(d + i), _mm256_castsi256_si128(v));
		_mm_storeh_pd((double *)(d + ds + i), _mm_castsi128_pd(_mm256_castsi256_si128(v)));
		_mm_storel_epi64((__m128i *)(d + 2 * ds + i), _mm256_extracti128_si256(v, 1));
		_mm_storeh_pd((double *)(d + 3 * ds + i),
			      _mm_castsi128_pd(_mm256_extracti128_si256(v, 1)));
	}
	return i;
}

static void c4_apart(const uint8_t *src, int64_t n, uint8_t *d, int64_t ds)
{
	int64_t i = mi_quant_isa() >= MI_QISA_AVX2 ? c4_apart_avx2(src, n, d, ds) : 0;

	for (; i < n; i++)
		for (int k = 0; k < 4; k++)
			d[k * ds + i] = src[4 * i + k];
}

/* C4 output: channels 4c4..4c4+3 interleaved ([C/4][H*W][4] per image) */
static void qse_item_c4(void *arg, int item, int tid)
{
	const struct qse_job *j = arg;
	const struct qnode *q = j->q;
	int64_t hw = q->se_hw, pa, pb;
	int c4 = qse_range(j, item, &pa, &pb);
	uint8_t tabs[4][256], part[4][64] __attribute__((aligned(16))), out[64 * 4], xin[4][64];
	bool use_tab = hw >= 256;
	bool vtab = use_tab && mi_quant_isa() == MI_QISA_AVX2 && setab_on();

	/* the VBMI quad kernels read planar input only */
	if (mi_quant_isa() == MI_QISA_AVX512 && have_vbmi() && !q->se_in_c4) {
		if (hw >= 128)
			qse_quad_tab_vbmi(q->lut, j->x + (size_t)4 * c4 * hw, hw, pa, pb,
					  j->s + 4 * c4, &q->se_y, j->y + (size_t)c4 * hw * 4);
		else
			qse_quad_vbmi(q->lutb, j->x + (size_t)4 * c4 * hw, hw, pa, pb, j->s + 4 * c4,
				      &q->se_y, j->y + (size_t)c4 * hw * 4);
		return;
	}

	if (!use_tab && q->se_in_c4 && pb - pa >= 2 && mi_quant_isa() == MI_QISA_AVX2 &&
	    setab_on() && sedirect_on()) {
		size_t o = ((size_t)c4 * hw + pa) * 4;

		qse_quad_direct_avx2(q->lut, j->x + o, pb - pa, j->s + 4 * c4, &q->se_y,
				     j->y + o);
		return;
	}
	for (int k = 0; k < 4 && use_tab; k++) {
		float v[256], sv = j->s[4 * c4 + k];

		if (vtab) {
			qse_tab_avx2(q->lut, sv, &q->se_y, tabs[k]);
			continue;
		}

		for (int b = 0; b < 256; b++)
			v[b] = q->lut[b] * sv;
		mi_quantize_f32(v, 256, q->se_y.scale, q->se_y.zp, q->se_y.dtype, tabs[k]);
	}
	for (int64_t p0 = pa; p0 < pb; p0 += 64) {
		int n = pb - p0 < 64 ? (int)(pb - p0) : 64;
		uint8_t *dst = j->y + ((size_t)c4 * hw + p0) * 4;

		if (q->se_in_c4) /* C4 input: the quad's 4 channels apart */
			c4_apart(j->x + ((size_t)c4 * hw + p0) * 4, n, xin[0], 64);
		for (int k = 0; k < 4; k++)
			qse_part(q, q->se_in_c4 ? xin[k] : j->x + (size_t)(4 * c4 + k) * hw + p0,
				 j->s[4 * c4 + k], use_tab ? tabs[k] : NULL, n, part[k]);
		/* 16 pixels x 4 channels per round: byte, then word interleave */
		for (int x = 0; x < n; x += 16) {
			__m128i c0 = _mm_load_si128((const __m128i *)(part[0] + x));
			__m128i c1 = _mm_load_si128((const __m128i *)(part[1] + x));
			__m128i c2 = _mm_load_si128((const __m128i *)(part[2] + x));
			__m128i c3 = _mm_load_si128((const __m128i *)(part[3] + x));
			__m128i a0 = _mm_unpacklo_epi8(c0, c1), a1 = _mm_unpackhi_epi8(c0, c1);
			__m128i b0 = _mm_unpacklo_epi8(c2, c3), b1 = _mm_unpackhi_epi8(c2, c3);

			_mm_storeu_si128((__m128i *)(out + x * 4), _mm_unpacklo_epi16(a0, b0));
			_mm_storeu_si128((__m128i *)(out + x * 4 + 16), _mm_unpackhi_epi16(a0, b0));
			_mm_storeu_si128((__m128i *)(out + x * 4 + 32), _mm_unpacklo_epi16(a1, b1));
			_mm_storeu_si128((__m128i *)(out + x * 4 + 48), _mm_unpackhi_epi16(a1, b1));
		}
		memcpy(dst, out, (size_t)n * 4);
	}
}

static int qse_run(struct mi_graph *g, struct mi_node *n)
{
	const struct qnode *q = n->priv;
	struct qse_job j = { q, mi_in(g, n, 0)->data, mi_in(g, n, 1)->data,
			     mi_out(g, n, 0)->data, 0, 0 };

	cur_threads = q->nthreads;
	j.nc = (int)(q->se_c4 ? q->se_c / 4 : q->se_c);
	/* maps of 512+ pixels: one pixel range per thread (see par_rows) */
	j.np = cur_threads > 1 && (q->se_hw >= 512 || (split_all && q->se_hw > 64)) ?
		       cur_threads : 1;
	pool_for(j.np * j.nc, q->se_c4 ? qse_item_c4 : qse_item, &j);
	return 0;
}

/* A node reading the bytes of a quantized tensor through a 256-entry float
 * table (and its byte planes for the vpermi2b lookups): a copy of the fp32
 * table node's map @lut, or with @lut NULL the DequantizeLinear map of @a. */
static struct qnode *qnode_new_lut(int (*run)(struct mi_graph *, struct mi_node *),
				   const float *lut, const struct qact *a)
{
	struct qnode *q = qnode_new(run);

	if (!q)
		return NULL;
	q->lut = malloc(256 * sizeof(float));
	if (!q->lut) {
		qnode_free(q);
		return NULL;
	}
	if (lut) {
		memcpy(q->lut, lut, 256 * sizeof(float));
	} else {
		uint8_t b[256];

		for (int i = 0; i < 256; i++)
			b[i] = (uint8_t)i;
		mi_dequantize(b, a->dtype, 256, a->scale, a->zp, q->lut);
	}
	q->lutb = lut_planes(q->lut);
	if (!q->lutb) {
		qnode_free(q);
		return NULL;
	}
	return q;
}

static int try_qse(struct mi_graph *g, struct mi_node *n)
{
	if (strcmp(n->op_type, "Mul") || n->domain[0] || n->ninputs != 2 || n->noutputs != 1 ||
	    n->inputs[0] < 0 || n->inputs[1] < 0)
		return 0;
	struct mi_tensor *y = mi_out(g, n, 0);

	if (!y || y->dtype != MI_DT_FLOAT || !mi_tensor_shape_known(y) || y->ndim != 4 ||
	    (y->flags & MI_TF_OUTPUT))
		return 0;
	/* which input is the table's output or a DequantizeLinear's (full
	 * size), which the gate */
	int xi = -1;
	bool dq = false;
	struct qact da;

	for (int i = 0; i < 2; i++) {
		struct mi_tensor *t = mi_in(g, n, i);
		int p = t->producer;

		if (p < 0 || t->dtype != MI_DT_FLOAT || !mi_tensor_shape_known(t) || t->ndim != 4 ||
		    memcmp(t->dims, y->dims, sizeof(t->dims[0]) * 4) || g->nodes[p].dead)
			continue;
		if (mi_quant_node_is(&g->nodes[p]) && ((struct qnode *)g->nodes[p].priv)->lut &&
		    !((struct qnode *)g->nodes[p].priv)->lut8 &&
		    g->nodes[p].outputs[0] == n->inputs[i]) {
			xi = i;
			dq = false;
		} else if (xi < 0 && !strcmp(g->nodes[p].op_type, "DequantizeLinear") &&
			   !g->nodes[p].domain[0] && act_params(g, &g->nodes[p], 0, 1, 2, &da)) {
			xi = i;
			dq = true;
		}
	}
	if (xi < 0)
		return 0;
	struct mi_tensor *st = mi_in(g, n, 1 - xi);
	struct mi_node *tn = &g->nodes[mi_in(g, n, xi)->producer];
	struct mi_tensor *xq = dq ? &g->tensors[da.t] : mi_in(g, tn, 0);

	if (st->dtype != MI_DT_FLOAT || !mi_tensor_shape_known(st) || st->ndim != 4 ||
	    st->dims[0] != y->dims[0] || st->dims[1] != y->dims[1] || st->dims[2] != 1 ||
	    st->dims[3] != 1 || !xq || (xq->dtype != MI_DT_UINT8 && xq->dtype != MI_DT_INT8) ||
	    mi_tensor_numel(xq) != mi_tensor_numel(y))
		return skip(n, "not Mul(table output, per-channel gate)");
	int qi = mi_graph_sole_consumer(g, n->outputs[0]);
	struct mi_node *qn = qi >= 0 ? &g->nodes[qi] : NULL;
	struct qact qa;

	if (!qn || strcmp(qn->op_type, "QuantizeLinear") || qn->domain[0] || qn->dead ||
	    qn->priv || qn->ninputs < 2 || qn->inputs[0] != n->outputs[0] || qn->noutputs != 1 ||
	    !q_params(g, qn, &qa) || !mi_tensor_shape_known(mi_out(g, qn, 0)) ||
	    mi_tensor_numel(mi_out(g, qn, 0)) != mi_tensor_numel(y))
		return skip(n, "SE Mul output is not quantized");
	struct qnode *q = qnode_new_lut(qse_run, dq ? NULL : ((struct qnode *)tn->priv)->lut, &da);

	if (!q)
		return -ENOMEM;
	q->se_y = qa;
	q->se_c = y->dims[0] * y->dims[1];
	q->se_hw = y->dims[2] * y->dims[3];
	n->priv = q;
	q->orig_ninputs = n->ninputs;
	q->orig_in0 = n->inputs[0];
	q->orig_in1 = n->inputs[1];
	q->orig_out0 = n->outputs[0];
	n->inputs[1] = n->inputs[1 - xi];
	n->inputs[0] = dq ? da.t : tn->inputs[0];
	kill(g, q, qn);
	n->outputs[0] = qn->outputs[0];
	g->tensors[n->outputs[0]].producer = (int)(n - g->nodes);
	return 0;
}

/* ---- GlobalAveragePool of a quantized tensor --------------------------------- */

/*
 * GlobalAveragePool(T(xq)) or GlobalAveragePool(DQ(xq)) [-> Q], T a fp32
 * table node (HardSwish / SiLU ahead of a squeeze-excitation): the pool
 * reads the bytes and looks their 256 values up instead of reading a fp32
 * tensor.  When the SE gate Mul reads the bytes too (qse), T's output has
 * no reader left and T is not run at all (kill_unused_tables).  The sums
 * are lib/cpu's global pooling sums (k_sum: blocks of 512 in four VW-lane
 * float accumulators, the lanes and the tail added in double, VW of
 * lib/cpu's ISA), the mean its float division and the QuantizeLinear the
 * same kernel, so the bytes are those of the unfused nodes.
 */
#define QGAP_PLANES 16 /* planes per work item, summed side by side */

/*
 * Sums of np planes of hw pixels into s[]: per plane the blocks of 512 in
 * order, each block's lane sums ((a0 + a1) + (a2 + a3)) added in lane
 * order, then the tail pixels, in double.  The planes are interleaved
 * step by step (independent dependency chains: a 7x7 plane is mostly
 * tail), which does not change any plane's order of additions.
 */
/* the pixels from i0 on, added one by one, eight planes at a time in
 * registers (a 7x7 plane is all tail) */
/* plane p's pixel i: planar (p * hw + i) or in C4 quads ([p / 4][hw][4]) */
#define GAP_AT(x, c4, hw, p, i)                                                  \
	((c4) ? (x)[((int64_t)(p) / 4 * (hw) + (i)) * 4 + (p) % 4] :              \
		(x)[(int64_t)(p) * (hw) + (i)])

__attribute__((always_inline)) static inline void
gap_tail_body(const float *lut, const uint8_t *x, int64_t hw, int64_t i0, int np, double *s,
	      const bool c4)
{
	int p = 0;

	for (; p + 8 <= np; p += 8) {
		double s0 = s[p], s1 = s[p + 1], s2 = s[p + 2], s3 = s[p + 3];
		double s4 = s[p + 4], s5 = s[p + 5], s6 = s[p + 6], s7 = s[p + 7];

		for (int64_t i = i0; i < hw; i++) {
			s0 += lut[GAP_AT(x, c4, hw, p, i)];
			s1 += lut[GAP_AT(x, c4, hw, p + 1, i)];
			s2 += lut[GAP_AT(x, c4, hw, p + 2, i)];
			s3 += lut[GAP_AT(x, c4, hw, p + 3, i)];
			s4 += lut[GAP_AT(x, c4, hw, p + 4, i)];
			s5 += lut[GAP_AT(x, c4, hw, p + 5, i)];
			s6 += lut[GAP_AT(x, c4, hw, p + 6, i)];
			s7 += lut[GAP_AT(x, c4, hw, p + 7, i)];
		}
		s[p] = s0, s[p + 1] = s1, s[p + 2] = s2, s[p + 3] = s3;
		s[p + 4] = s4, s[p + 5] = s5, s[p + 6] = s6, s[p + 7] = s7;
	}
	for (; p < np; p++) {
		double s0 = s[p];

		for (int64_t i = i0; i < hw; i++)
			s0 += lut[GAP_AT(x, c4, hw, p, i)];
		s[p] = s0;
	}
}

static void gap_tail(const float *lut, const uint8_t *x, int64_t hw, int64_t i0, int np,
		     double *s)
{
	gap_tail_body(lut, x, hw, i0, np, s, false);
}

/*
 * gap_sums_c with lib/cpu's AVX2 lanes (gap_vw 8): the four 8-lane float
 * accumulators of a block are vectors fed by gathers, the same float
 * additions in the same order per lane, so the sums are identical.
 */
__attribute__((target("avx2"), always_inline)) static inline void
gap_sums_avx2_body(const struct qnode *q, const uint8_t *x, int np, double *s, const bool c4)
{
	int64_t hw = q->gap_hw, i = 0;
	const float *lut = q->lut;
	float l[QGAP_PLANES][8];
	bool ins = luti_on() || c4;

	for (int p = 0; p < np; p++)
		s[p] = 0.0;
	while (i + 32 <= hw) {
		int64_t b = i, end = i + 512 < hw ? i + 512 : hw;

		for (int p = 0; p < np; p++) {
			const uint8_t *xp = c4 ? x + ((int64_t)p / 4 * hw * 4 + p % 4) :
						 x + p * hw;
			__m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;

#define MI_GAP2(o)                                                                   \
	(c4 ? lut8x4_avx2(lut, xp + (i + (o)) * 4) : lut8x_avx2(lut, xp + i + (o), ins))
			for (i = b; i + 32 <= end; i += 32) {
				a0 = _mm256_add_ps(a0, MI_GAP2(0));
				a1 = _mm256_add_ps(a1, MI_GAP2(8));
				a2 = _mm256_add_ps(a2, MI_GAP2(16));
				a3 = _mm256_add_ps(a3, MI_GAP2(24));
			}
#undef MI_GAP2
			_mm256_storeu_ps(l[p], _mm256_add_ps(_mm256_add_ps(a0, a1),
							     _mm256_add_ps(a2, a3)));
		}
		for (int m = 0; m < 8; m++)
			for (int p = 0; p < np; p++)
				s[p] += l[p][m];
	}
	gap_tail_body(lut, x, hw, i, np, s, c4);
}

__attribute__((target("avx2"))) static void
gap_sums_avx2(const struct qnode *q, const uint8_t *x, int np, double *s)
{
	gap_sums_avx2_body(q, x, np, s, false);
}

/*
 * The same on C4 input (np a multiple of 4: whole quads): plane p's pixel
 * i looked up at x[(p / 4 * hw + i) * 4 + p % 4], eight pixels 4 bytes
 * apart per vector, instead of taking the quads apart into planes first
 * (c4_apart); the same additions in the same order.
 */
__attribute__((target("avx2"))) static void
gap_sums_avx2_c4(const struct qnode *q, const uint8_t *x, int np, double *s)
{
	gap_sums_avx2_body(q, x, np, s, true);
}

/*
 * gap_sums_avx2_c4 on maps of 32-63 pixels (7x7: the squeeze-excitations
 * and the last pool of EfficientNet-B0 and MobileNetV3-Small), nq quads
 * side by side: a quad's 4 channels are the 4 double lanes of one sum, so
 * each channel's additions keep their order (the block's lane m at m =
 * 0..7, then the tail pixels), the tail pixels are added 4 channels per
 * vpaddpd instead of one by one, and the block's lanes come from 8-byte
 * runs (2 pixels x 4 channels: lut8x_avx2) instead of bytes 4 apart.  The
 * one block of 32: lane (e, c) of the vectors at pixels
 * 2j, 8 + 2j, 16 + 2j, 24 + 2j is gap_sums_avx2_c4's lane m = 2j + e of
 * a0..a3 for channel c (each 0 + entry), summed as it does.
 */
__attribute__((target("avx2"), always_inline)) static inline void
gap_c4s_body(const float *lut, const uint8_t *xq, int64_t hw, double *s, const int nq)
{
	__m256d acc[4] = { _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(),
			   _mm256_setzero_pd() };
	const __m256 z = _mm256_setzero_ps();

	for (int j = 0; j < 4; j++)
		for (int k = 0; k < nq; k++) {
			const uint8_t *xp = xq + (int64_t)k * hw * 4 + 8 * j;
			__m256 v0 = _mm256_add_ps(z, lut8x_avx2(lut, xp, true));
			__m256 v1 = _mm256_add_ps(z, lut8x_avx2(lut, xp + 32, true));
			__m256 v2 = _mm256_add_ps(z, lut8x_avx2(lut, xp + 64, true));
			__m256 v3 = _mm256_add_ps(z, lut8x_avx2(lut, xp + 96, true));
			__m256 l = _mm256_add_ps(_mm256_add_ps(v0, v1), _mm256_add_ps(v2, v3));

			acc[k] = _mm256_add_pd(acc[k], _mm256_cvtps_pd(_mm256_castps256_ps128(l)));
			acc[k] = _mm256_add_pd(acc[k], _mm256_cvtps_pd(_mm256_extractf128_ps(l, 1)));
		}
	for (int64_t i = 32; i < hw; i++)
		for (int k = 0; k < nq; k++) {
			const uint8_t *xp = xq + ((int64_t)k * hw + i) * 4;
			__m128 v = _mm_setr_ps(lut[xp[0]], lut[xp[1]], lut[xp[2]], lut[xp[3]]);

			acc[k] = _mm256_add_pd(acc[k], _mm256_cvtps_pd(v));
		}
	for (int k = 0; k < nq; k++)
		_mm256_storeu_pd(s + 4 * k, acc[k]);
}

/* 32 <= hw < 64, np a multiple of 4 (whole quads) */
__attribute__((target("avx2"))) static void
gap_sums_avx2_c4s(const struct qnode *q, const uint8_t *x, int np, double *s)
{
	int64_t hw = q->gap_hw;
	int c4 = 0;

	for (; c4 + 4 <= np / 4; c4 += 4)
		gap_c4s_body(q->lut, x + (int64_t)c4 * hw * 4, hw, s + 4 * c4, 4);
	for (; c4 + 2 <= np / 4; c4 += 2)
		gap_c4s_body(q->lut, x + (int64_t)c4 * hw * 4, hw, s + 4 * c4, 2);
	for (; c4 < np / 4; c4++)
		gap_c4s_body(q->lut, x + (int64_t)c4 * hw * 4, hw, s + 4 * c4, 1);
}

static void gap_sums_c(const struct qnode *q, const uint8_t *x, int np, double *s)
{
	int64_t hw = q->gap_hw, i = 0;
	int vw = q->gap_vw;
	const float *lut = q->lut;
	float l[QGAP_PLANES][16];

	for (int p = 0; p < np; p++)
		s[p] = 0.0;
	while (i + 4 * vw <= hw) {
		int64_t b = i, end = i + 512 < hw ? i + 512 : hw;

		for (int p = 0; p < np; p++) {
			const uint8_t *xp = x + p * hw;
			float a[4][16] = { { 0 } };

			for (i = b; i + 4 * vw <= end; i += 4 * vw)
				for (int k = 0; k < 4; k++)
					for (int m = 0; m < vw; m++)
						a[k][m] += lut[xp[i + k * vw + m]];
			for (int m = 0; m < vw; m++)
				l[p][m] = (a[0][m] + a[1][m]) + (a[2][m] + a[3][m]);
		}
		for (int m = 0; m < vw; m++)
			for (int p = 0; p < np; p++)
				s[p] += l[p][m];
	}
	gap_tail(lut, x, hw, i, np, s);
}

/*
 * True when every double sum of up to n entries of lut, or of float sums
 * of them, is exact, so that the order of double additions cannot change
 * it: the entries are finite, each a multiple of u (the smallest nonzero
 * entry's ulp, a power of two not above any entry's ulp).  A float sum of
 * multiples of u is one too (rounded, it is a multiple of a float spacing
 * above u), so every partial double sum is an integer multiple of u, of
 * magnitude at most n * max|entry| (float roundings add well under a
 * factor 2) <= 2^52 u: exact.  (Subnormal entries get a u below their
 * ulp: only stricter.)
 */
static bool lut_sums_exact(const float *lut, int64_t n)
{
	double mx = 0, u = 0;

	for (int i = 0; i < 256; i++) {
		float v = fabsf(lut[i]);
		int e;

		if (!isfinite(v))
			return false;
		if (v == 0)
			continue;
		frexpf(v, &e); /* v in [2^(e-1), 2^e): ulp 2^(e-24) */
		if (u == 0 || ldexp(1.0, e - 24) < u)
			u = ldexp(1.0, e - 24);
		if (v > mx)
			mx = v;
	}
	return mx == 0 || (double)n * mx <= ldexp(u, 52);
}

/*
 * Planes of under 64 pixels are all tail: k_sum adds their pixels one by
 * one in double.  With gap_exact those sums are exact, whatever the order:
 * the np planes' bytes (contiguous) are looked up 64 at a time into f, and
 * each plane's floats are added 16 at a time (two double vectors, then
 * the lanes).  A plane of zeros sums to +0 in both orders (+0 start).
 */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi"))) static void
gap_small_vbmi(const __m512i t[16], const uint8_t *x, int hw, int np, double *s)
{
	float f[QGAP_PLANES * 64 + 64];
	int n = np * hw;

	for (int i = 0; i < n; i += 64) {
		__mmask64 m = n - i >= 64 ? ~0ull : (1ull << (n - i)) - 1;
		__m512 v[4];

		lut32_vbmi(t, _mm512_maskz_loadu_epi8(m, x + i), v);
		_mm512_storeu_ps(f + i, v[0]);
		_mm512_storeu_ps(f + i + 16, v[1]);
		_mm512_storeu_ps(f + i + 32, v[2]);
		_mm512_storeu_ps(f + i + 48, v[3]);
	}
	for (int p = 0; p < np; p++) {
		const float *fp = f + p * hw;
		__m512d a = _mm512_setzero_pd(), b = a;
		int i = 0;

		for (; i + 16 <= hw; i += 16) {
			a = _mm512_add_pd(a, _mm512_cvtps_pd(_mm256_loadu_ps(fp + i)));
			b = _mm512_add_pd(b, _mm512_cvtps_pd(_mm256_loadu_ps(fp + i + 8)));
		}
		if (i + 8 <= hw) {
			a = _mm512_add_pd(a, _mm512_cvtps_pd(_mm256_loadu_ps(fp + i)));
			i += 8;
		}
		if (i < hw)
			b = _mm512_add_pd(b, _mm512_cvtps_pd(_mm256_maskz_loadu_ps(
						     (__mmask8)((1u << (hw - i)) - 1), fp + i)));
		s[p] = 0.0 + _mm512_reduce_add_pd(_mm512_add_pd(a, b));
	}
}

/*
 * the table outputs of one plane's pixels [b, end) in whole 64-pixel steps
 * summed as k_sum does (four accumulators, (a0 + a1) + (a2 + a3)); *pi
 * gets the first pixel not summed
 */
__attribute__((target("avx512f,avx512bw,avx512vbmi"), always_inline)) static inline __m512
lut_block_sum(const __m512i t[16], const uint8_t *xp, int64_t b, int64_t end, int64_t *pi)
{
	__m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, v[4];
	int64_t i;

	for (i = b; i + 64 <= end; i += 64) {
		lut32_vbmi(t, _mm512_loadu_si512(xp + i), v);
		a0 = _mm512_add_ps(a0, v[0]);
		a1 = _mm512_add_ps(a1, v[1]);
		a2 = _mm512_add_ps(a2, v[2]);
		a3 = _mm512_add_ps(a3, v[3]);
	}
	*pi = i;
	return _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3));
}

/*
 * The same with gap_exact on planes of 64+ pixels: the float block sums as
 * k_sum's (four accumulators, (a0 + a1) + (a2 + a3)), then their lanes and
 * the tail pixels added in double vectors in any order (exact), a plane
 * at a time.
 */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi"))) static void
gap_exact_vbmi(const __m512i t[16], const float *lut, const uint8_t *x, int64_t hw, int np,
	       double *s)
{
	for (int p = 0; p < np; p++) {
		const uint8_t *xp = x + p * hw;
		__m512d d0 = _mm512_setzero_pd(), d1 = d0;
		int64_t i = 0;

		while (i + 64 <= hw) {
			int64_t end = i + 512 < hw ? i + 512 : hw;
			__m512 l = lut_block_sum(t, xp, i, end, &i);

			d0 = _mm512_add_pd(d0, _mm512_cvtps_pd(_mm512_castps512_ps256(l)));
			d1 = _mm512_add_pd(d1, _mm512_cvtps_pd(_mm256_castpd_ps(
						       _mm512_extractf64x4_pd(_mm512_castps_pd(l), 1))));
		}
		double e = 0.0;

		if (hw - i < 16) /* a short tail: one by one */
			for (; i < hw; i++)
				e += lut[xp[i]];
		if (i < hw) { /* r < 64 tail pixels, masked lanes 0 */
			int r = (int)(hw - i);
			__m512 v[4];

			lut32_vbmi(t, _mm512_maskz_loadu_epi8((1ull << r) - 1, xp + i), v);
#pragma GCC unroll 4
			for (int k = 0; k < 4; k++) {
				int c = r - 16 * k;
				__mmask8 m0 = c >= 8 ? 0xff : c > 0 ? (__mmask8)((1u << c) - 1) : 0;
				__mmask8 m1 = c >= 16 ? 0xff : c > 8 ? (__mmask8)((1u << (c - 8)) - 1) : 0;

				d0 = _mm512_add_pd(d0, _mm512_maskz_cvtps_pd(m0, _mm512_castps512_ps256(v[k])));
				d1 = _mm512_add_pd(d1, _mm512_maskz_cvtps_pd(
							       m1, _mm256_castpd_ps(_mm512_extractf64x4_pd(
									   _mm512_castps_pd(v[k]), 1))));
			}
		}
		s[p] = e + _mm512_reduce_add_pd(_mm512_add_pd(d0, d1));
	}
}

/* the same for VW = 16, 64 bytes looked up per step */
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) static void
gap_sums_vbmi(const struct qnode *q, const uint8_t *x, int np, double *s)
{
	int64_t hw = q->gap_hw, i = 0;
	const float *lut = q->lut;
	float l[QGAP_PLANES][16];
	__m512i t[16];

	lut32_load(q->lutb, t);
	if (q->gap_exact && hw < 64) {
		gap_small_vbmi(t, x, (int)hw, np, s);
		return;
	}
	if (q->gap_exact) {
		gap_exact_vbmi(t, q->lut, x, hw, np, s);
		return;
	}
	for (int p = 0; p < np; p++)
		s[p] = 0.0;
	while (i + 64 <= hw) {
		int64_t b = i, end = i + 512 < hw ? i + 512 : hw;

		for (int p = 0; p < np; p++) {
			_mm512_storeu_ps(l[p], lut_block_sum(t, x + p * hw, b, end, &i));
		}
		for (int m = 0; m < 16; m++)
			for (int p = 0; p < np; p++)
				s[p] += l[p][m];
	}
	/* the tail of 16 planes 4 pixels at a time: one dword gather (4
	 * pixels of each plane), put pixel-major (byte 16j + p = pixel j of
	 * plane p), looked up: v[j] holds pixel j of the 16 planes, added
	 * into each plane's double sum in order */
	if (np == QGAP_PLANES && hw <= (1 << 26) && i + 4 <= hw) {
		const __m512i tr = _mm512_set_epi8(
			63, 59, 55, 51, 47, 43, 39, 35, 31, 27, 23, 19, 15, 11, 7, 3,
			62, 58, 54, 50, 46, 42, 38, 34, 30, 26, 22, 18, 14, 10, 6, 2,
			61, 57, 53, 49, 45, 41, 37, 33, 29, 25, 21, 17, 13, 9, 5, 1,
			60, 56, 52, 48, 44, 40, 36, 32, 28, 24, 20, 16, 12, 8, 4, 0);
		const __m512i off = _mm512_mullo_epi32(
			_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
			_mm512_set1_epi32((int)hw));
		__m512d s0 = _mm512_loadu_pd(s), s1 = _mm512_loadu_pd(s + 8);

		for (; i + 4 <= hw; i += 4) {
			__m512i b = _mm512_i32gather_epi32(off, x + i, 1);
			__m512 v[4];

			lut32_vbmi(t, _mm512_permutexvar_epi8(tr, b), v);
#pragma GCC unroll 4
			for (int k = 0; k < 4; k++) {
				__m512d h = _mm512_castps_pd(v[k]);

				s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(v[k])));
				s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(
							       _mm256_castpd_ps(_mm512_extractf64x4_pd(h, 1))));
			}
		}
		_mm512_storeu_pd(s, s0);
		_mm512_storeu_pd(s + 8, s1);
	}
	gap_tail(lut, x, hw, i, np, s);
}


/* MI_QUANT_GAPC4=0: an AVX2 pool on C4 input takes the quads apart into
 * planes first (A/B). */
MI_QUANT_SWITCH(gapc4, "MI_QUANT_GAPC4")

/* MI_QUANT_GAPC4S=0: maps of 32-63 pixels in C4 take gap_sums_avx2_c4 too
 * (A/B) */
MI_QUANT_SWITCH(gapc4s, "MI_QUANT_GAPC4S")

static void qgap_item(void *arg, int it, int tid)
{
	const struct qlut_job *j = arg;
	const struct qnode *q = j->q;
	int64_t p0 = (int64_t)it * QGAP_PLANES;
	int np = q->se_c - p0 < QGAP_PLANES ? (int)(q->se_c - p0) : QGAP_PLANES;
	double s[QGAP_PLANES];
	float m[QGAP_PLANES];
	const uint8_t *x = j->x + p0 * q->gap_hw;

	if (q->se_in_c4 && np % 4 == 0 && q->gap_vw == 8 && mi_quant_isa() >= MI_QISA_AVX2 &&
	    lutg_on() && gapc4_on() && !(mi_cpu_isa() == MI_ISA_AVX512 && have_vbmi())) {
		if (q->gap_hw >= 32 && q->gap_hw < 64 && gapc4s_on())
			gap_sums_avx2_c4s(q, x, np, s);
		else
			gap_sums_avx2_c4(q, x, np, s);
		goto mean;
	}
	if (q->se_in_c4) { /* C4 input: its np / 4 quads apart into planes */
		uint8_t *pl = (uint8_t *)q->sh->ws + (size_t)tid * QGAP_PLANES * q->gap_hw;

		for (int c4 = 0; c4 < np / 4; c4++)
			c4_apart(j->x + (p0 + 4 * c4) * q->gap_hw, q->gap_hw, pl + 4 * c4 * q->gap_hw,
				 q->gap_hw);
		x = pl;
	}
	if (q->gap_vw == 16 && mi_cpu_isa() == MI_ISA_AVX512 && have_vbmi())
		gap_sums_vbmi(q, x, np, s);
	else if (q->gap_vw == 8 && mi_quant_isa() >= MI_QISA_AVX2 && lutg_on())
		gap_sums_avx2(q, x, np, s);
	else
		gap_sums_c(q, x, np, s);
mean:
	for (int p = 0; p < np; p++)
		m[p] = (float)s[p] / q->gap_hw;
	if (q->gap_q)
		mi_quantize_f32(m, np, q->se_y.scale, q->se_y.zp, q->se_y.dtype,
				(uint8_t *)j->y + p0);
	else
		memcpy((float *)j->y + p0, m, np * sizeof(float));
}

static int qgap_run(struct mi_graph *g, struct mi_node *n)
{
	const struct qnode *q = n->priv;
	struct qlut_job j = { q, mi_in(g, n, 0)->data, mi_out(g, n, 0)->data };

	/* one thread below ~8K pixels (~3 us at ~0.4 ns per pixel) */
	cur_threads = q->se_c * q->gap_hw >= (split_all ? 1 : 8 << 10) ? q->nthreads : 1;
	pool_for((int)((q->se_c + QGAP_PLANES - 1) / QGAP_PLANES), qgap_item, &j);
	return 0;
}

static int try_qgap(struct mi_graph *g, struct mi_node *n)
{
	if (strcmp(n->op_type, "GlobalAveragePool") || n->domain[0] || n->ninputs != 1 ||
	    n->noutputs != 1 || n->inputs[0] < 0)
		return 0;
	struct mi_tensor *x = mi_in(g, n, 0), *y = mi_out(g, n, 0);
	int p = x->producer;
	struct mi_node *pn = p >= 0 ? &g->nodes[p] : NULL, *dx = NULL;
	const struct qnode *tq = NULL;
	struct qact a;

	if (!pn || pn->dead || x->dtype != MI_DT_FLOAT || y->dtype != MI_DT_FLOAT ||
	    !mi_tensor_shape_known(x) || x->ndim < 3 || !mi_tensor_shape_known(y) ||
	    mi_tensor_numel(y) != x->dims[0] * x->dims[1] || !mi_tensor_numel(y))
		return 0;
	if (mi_quant_node_is(pn) && ((struct qnode *)pn->priv)->hdr.run == qlut_run &&
	    !((struct qnode *)pn->priv)->lut8 && pn->outputs[0] == n->inputs[0])
		tq = pn->priv;
	else if (!strcmp(pn->op_type, "DequantizeLinear") && !pn->domain[0] &&
		 act_params(g, pn, 0, 1, 2, &a))
		dx = pn;
	if (!tq && !dx)
		return skip(n, "input is not a fp32 table or DequantizeLinear of a quantized tensor");
	int xt = tq ? pn->inputs[0] : a.t;

	if (mi_tensor_numel(&g->tensors[xt]) != mi_tensor_numel(x) ||
	    mi_tensor_numel(x) < mi_tensor_numel(y))
		return skip(n, "GlobalAveragePool input size");
	struct qnode *q = qnode_new_lut(qgap_run, tq ? tq->lut : NULL, &a);

	if (!q)
		return -ENOMEM;
	q->se_c = x->dims[0] * x->dims[1];
	q->gap_hw = mi_tensor_numel(x) / q->se_c;
	q->gap_vw = mi_cpu_isa() == MI_ISA_AVX512 ? 16 : mi_cpu_isa() == MI_ISA_AVX2 ? 8 : 4;
	q->gap_exact = !getenv("MI_QUANT_GAP_ORDER") && lut_sums_exact(q->lut, q->gap_hw);
	/* a QuantizeLinear as the only reader: quantize the means */
	int qi = mi_graph_sole_consumer(g, n->outputs[0]);
	struct mi_node *qn = qi >= 0 ? &g->nodes[qi] : NULL;

	if (qn && !strcmp(qn->op_type, "QuantizeLinear") && !qn->domain[0] && !qn->dead &&
	    !qn->priv && qn->ninputs >= 2 && qn->inputs[0] == n->outputs[0] &&
	    qn->noutputs == 1 && q_params(g, qn, &q->se_y) &&
	    mi_tensor_numel(mi_out(g, qn, 0)) == mi_tensor_numel(y))
		q->gap_q = true;
	n->priv = q;
	q->orig_ninputs = n->ninputs;
	q->orig_in0 = n->inputs[0];
	q->orig_in1 = -1;
	q->orig_out0 = n->outputs[0];
	n->inputs[0] = xt;
	if (q->gap_q) {
		kill(g, q, qn);
		n->outputs[0] = qn->outputs[0];
		g->tensors[n->outputs[0]].producer = (int)(n - g->nodes);
	}
	return 0;
}

/* fp32 table nodes whose output nobody reads any more (the SE pool and
 * gate Mul read the bytes): dead, undone with a node reading their input. */
static void kill_unused_tables(struct mi_graph *g)
{
	for (int i = 0; i < g->nnodes; i++) {
		struct mi_node *t = &g->nodes[i];
		struct qnode *owner = NULL;
		bool used = false;

		if (t->dead || !mi_quant_node_is(t) || ((struct qnode *)t->priv)->hdr.run != qlut_run ||
		    ((struct qnode *)t->priv)->lut8 || (g->tensors[t->outputs[0]].flags & MI_TF_OUTPUT))
			continue;
		for (int j = 0; j < g->nnodes && !used; j++) {
			struct mi_node *n = &g->nodes[j];

			if (n->dead || j == i)
				continue;
			for (int k = 0; k < n->ninputs; k++) {
				if (n->inputs[k] == t->outputs[0])
					used = true;
				if (n->inputs[k] == t->inputs[0] && mi_quant_node_is(n) && !owner &&
				    ((struct qnode *)n->priv)->hdr.run != qlut_run &&
				    ((struct qnode *)n->priv)->nkilled < 8)
					owner = n->priv;
			}
		}
		if (!used && owner) {
			t->dead = true;
			owner->killed[owner->nkilled++] = i;
		}
	}
}

/* ---- standalone QuantizeLinear / DequantizeLinear --------------------------- */

/*
 * A QuantizeLinear (fp32 -> uint8/int8) or DequantizeLinear (uint8/int8 ->
 * fp32) left over after the fusions above (the model input, fp32/int8
 * boundaries of mixed-precision files) with a per-tensor scale and zero
 * point: the reference op's kernels (mi_quantize_f32 / mi_dequantize, so
 * the same bytes) split over the threads.
 */
struct qdq_job {
	const struct qnode *q;
	const void *x;
	void *y;
};

static void qdq_range(void *arg, int64_t b, int64_t e)
{
	const struct qdq_job *j = arg;
	const struct qact *a = &j->q->qdq;

	if (j->q->qdq_deq)
		mi_dequantize((const uint8_t *)j->x + b, a->dtype, e - b, a->scale, a->zp,
			      (float *)j->y + b);
	else
		mi_quantize_f32((const float *)j->x + b, e - b, a->scale, a->zp, a->dtype,
				(uint8_t *)j->y + b);
}

/*
 * The same on a 4-D tensor whose quantized side is in C4 layout ([C/4][HW][4]
 * bytes per image, written / read by int8 convs) and/or whose fp32 side is
 * blocked ([ceil(C/B)][HW][B] floats per image, written / read by the NCHWc
 * kernels): items of QDQ_E / G pixels of one group of G channels (G = B when
 * the fp32 side is blocked, else 4), bytes moved to / from the fp32 side's
 * order (or 4-channel floats between planar and C4), then the same
 * elementwise kernels on contiguous runs (so the same values as the planar
 * op).  Pad lanes of a blocked DQ output get the map of byte 0; those of
 * a blocked Q input are quantized and dropped.
 */
#define QDQ_E 4096 /* elements per item: QDQ_E / G pixels */

/* MI_QUANT_QDQ_LAYOUT (A/B): bit 0 lets a standalone Q/DQ's quantized side
 * be C4, bit 1 its fp32 side blocked, bit 2 also a Q's writing planar
 * bytes (tests); default 3, 0 keeps both planar. */
static bool qdq_layout_on(int bit)
{
	const char *e = getenv("MI_QUANT_QDQ_LAYOUT");

	return e ? atoi(e) & bit : bit < 4;
}

/* Move np pixels of 4 channels between [np][4] (pix) and 4 rows of row
 * stride rs (rows): to_rows copies pix -> rows, else rows -> pix.  Four
 * 4x4 transposes at a time (pure moves). */
static void qdq_t4(float *pix, float *rows, int64_t rs, int64_t np, bool to_rows)
{
	int64_t p = 0;

#ifdef __SSE2__
	for (; p + 4 <= np; p += 4) {
		__m128 r0, r1, r2, r3;

		if (to_rows) {
			r0 = _mm_loadu_ps(pix + p * 4);
			r1 = _mm_loadu_ps(pix + p * 4 + 4);
			r2 = _mm_loadu_ps(pix + p * 4 + 8);
			r3 = _mm_loadu_ps(pix + p * 4 + 12);
			_MM_TRANSPOSE4_PS(r0, r1, r2, r3);
			_mm_storeu_ps(rows + p, r0);
			_mm_storeu_ps(rows + rs + p, r1);
			_mm_storeu_ps(rows + 2 * rs + p, r2);
			_mm_storeu_ps(rows + 3 * rs + p, r3);
		} else {
			r0 = _mm_loadu_ps(rows + p);
			r1 = _mm_loadu_ps(rows + rs + p);
			r2 = _mm_loadu_ps(rows + 2 * rs + p);
			r3 = _mm_loadu_ps(rows + 3 * rs + p);
			_MM_TRANSPOSE4_PS(r0, r1, r2, r3);
			_mm_storeu_ps(pix + p * 4, r0);
			_mm_storeu_ps(pix + p * 4 + 4, r1);
			_mm_storeu_ps(pix + p * 4 + 8, r2);
			_mm_storeu_ps(pix + p * 4 + 12, r3);
		}
	}
#endif
	for (; p < np; p++)
		for (int l = 0; l < 4; l++) {
			if (to_rows)
				rows[l * rs + p] = pix[p * 4 + l];
			else
				pix[p * 4 + l] = rows[l * rs + p];
		}
}

/*
 * qdq_t16's B = 16 case, 16 pixels per step: the 16 rows in four
 * registers (row 4k + L in lane L of register k), each group of four
 * pixels (64 bytes, byte 16 pp + c = row c, pixel pp) picked from them by
 * two vpermt2b (rows 0-7, rows 8-15) and a blend.  The other way round
 * the same index and mask pick row 4k + L's 16 bytes from the four pixel
 * groups.  Returns the pixels done.
 */
__attribute__((target("avx512f,avx512bw,avx512vbmi"), always_inline)) static inline int64_t
qdq_t16_body(uint8_t *pix, uint8_t *rows, int64_t rs, int nrows, int64_t np, bool to_rows,
	     const uint8_t *planes, float *y)
{
	__m512i t[16];

	if (planes)
		lut32_load(planes, t);
	/* byte q: ((q & 15) >> 2 & 1) * 64 + (q & 3) * 16 + (q >> 4) */
	const __m512i base = _mm512_set_epi8(
		115, 99, 83, 67, 51, 35, 19, 3, 115, 99, 83, 67, 51, 35, 19, 3,
		114, 98, 82, 66, 50, 34, 18, 2, 114, 98, 82, 66, 50, 34, 18, 2,
		113, 97, 81, 65, 49, 33, 17, 1, 113, 97, 81, 65, 49, 33, 17, 1,
		112, 96, 80, 64, 48, 32, 16, 0, 112, 96, 80, 64, 48, 32, 16, 0);
	const __mmask64 hi8 = 0xff00ff00ff00ff00ull; /* (q & 15) >= 8: registers 2, 3 */
	int64_t p = 0;

	for (; p + 16 <= np; p += 16) {
		__m512i in[4], out[4];

		for (int k = 0; k < 4; k++) {
			if (to_rows) {
				in[k] = _mm512_loadu_si512(pix + (p + 4 * k) * 16);
				continue;
			}
			in[k] = _mm512_setzero_si512();
			for (int l = 0; l < 4 && 4 * k + l < nrows; l++)
				in[k] = _mm512_mask_broadcast_i32x4(
					in[k], (__mmask16)(0xf << (4 * l)),
					_mm_loadu_si128((const __m128i *)(rows + (4 * k + l) * rs + p)));
		}
#pragma GCC unroll 4
		for (int j = 0; j < 4; j++) {
			__m512i ix = _mm512_add_epi8(base, _mm512_set1_epi8((char)(4 * j)));

			out[j] = _mm512_mask_blend_epi8(hi8, _mm512_permutex2var_epi8(in[0], ix, in[1]),
							_mm512_permutex2var_epi8(in[2], ix, in[3]));
		}
		for (int k = 0; k < 4; k++) {
			if (!to_rows && planes) { /* the four pixels' floats */
				__m512 v[4];

				lut32_vbmi(t, out[k], v);
				for (int i = 0; i < 4; i++)
					_mm512_storeu_ps(y + (p + 4 * k + i) * 16, v[i]);
				continue;
			}
			if (!to_rows) {
				_mm512_storeu_si512(pix + (p + 4 * k) * 16, out[k]);
				continue;
			}
			for (int l = 0; l < 4 && 4 * k + l < nrows; l++)
				_mm_storeu_si128((__m128i *)(rows + (4 * k + l) * rs + p),
						 _mm512_castsi512_si128(_mm512_permutexvar_epi32(
							 _mm512_add_epi32(_mm512_set1_epi32(4 * l),
									  _mm512_setr_epi32(0, 1, 2, 3, 0, 0, 0,
											    0, 0, 0, 0, 0, 0, 0,
											    0, 0)),
							 out[k])));
		}
	}
	return p;
}

__attribute__((target("avx512f,avx512bw,avx512vbmi"))) static int64_t
qdq_t16_vbmi(uint8_t *pix, uint8_t *rows, int64_t rs, int nrows, int64_t np, bool to_rows)
{
	return qdq_t16_body(pix, rows, rs, nrows, np, to_rows, NULL, NULL);
}

/* planar bytes -> 16-lane pixel rows looked up in the table's byte planes
 * straight from registers: y[16 p + c] = lut[row c, pixel p] (pad rows
 * past nrows: lut[0], as qdq_t16 + qdq_deq give).  Returns the pixels done. */
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) static int64_t
qdq_t16_lut_vbmi(const uint8_t *planes, uint8_t *rows, int64_t rs, int nrows, int64_t np,
		 float *y)
{
	return qdq_t16_body(NULL, rows, rs, nrows, np, false, planes, y);
}

/* C4 quads -> 16-lane pixel rows looked up in the table's byte planes
 * (qdq_q4 + qdq_deq for B = 16 from registers): per 16 pixels each of the
 * four quad planes (nq real, the rest zero bytes) looked up, then 4x4
 * transposes of 128-bit blocks put pixel j's four quads side by side.
 * Returns the pixels done. */
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) static int64_t
qdq_q4_lut_vbmi(const uint8_t *planes, const uint8_t *quads, int64_t qs, int nq, int64_t np,
		float *y)
{
	__m512i t[16];
	int64_t p = 0;

	lut32_load(planes, t);
	for (; p + 16 <= np; p += 16) {
		__m512 v[4][4];

#pragma GCC unroll 4
		for (int k = 0; k < 4; k++)
			lut32_vbmi(t, k < nq ? _mm512_loadu_si512(quads + k * qs + p * 4) :
					       _mm512_setzero_si512(), v[k]);
#pragma GCC unroll 4
		for (int i = 0; i < 4; i++) {
			__m512 a = _mm512_shuffle_f32x4(v[0][i], v[1][i], 0x44);
			__m512 b = _mm512_shuffle_f32x4(v[0][i], v[1][i], 0xee);
			__m512 c = _mm512_shuffle_f32x4(v[2][i], v[3][i], 0x44);
			__m512 d = _mm512_shuffle_f32x4(v[2][i], v[3][i], 0xee);
			float *o = y + (p + 4 * i) * 16;

			_mm512_storeu_ps(o, _mm512_shuffle_f32x4(a, c, 0x88));
			_mm512_storeu_ps(o + 16, _mm512_shuffle_f32x4(a, c, 0xdd));
			_mm512_storeu_ps(o + 32, _mm512_shuffle_f32x4(b, d, 0x88));
			_mm512_storeu_ps(o + 48, _mm512_shuffle_f32x4(b, d, 0xdd));
		}
	}
	return p;
}

/* Move np pixels of nrows (<= B) channels between B-byte pixel rows (pix,
 * [np][B]) and nrows byte rows of stride rs (rows): to_rows copies pix ->
 * rows, else rows -> pix (lanes past nrows 0).  16x16 byte transposes:
 * four rounds of unpacking rows j and j + 8 each rotate the 8-bit
 * (row, column) index left by one, four rotate it into (column, row). */
static void qdq_t16(uint8_t *pix, int B, uint8_t *rows, int64_t rs, int nrows, int64_t np,
		    bool to_rows)
{
	int64_t p = 0;

	if (B == 16 && mi_quant_isa() == MI_QISA_AVX512 && have_vbmi())
		p = qdq_t16_vbmi(pix, rows, rs, nrows, np, to_rows);
#ifdef __SSE2__
	for (; p + 16 <= np; p += 16) {
		__m128i r[16], t[16];

		for (int k = 0; k < 16; k++) {
			const uint8_t *s = to_rows ? pix + (p + k) * B : rows + k * rs + p;
			int32_t v4;

			if (!to_rows)
				r[k] = k < nrows ? _mm_loadu_si128((const __m128i *)s) :
						   _mm_setzero_si128();
			else if (B == 16)
				r[k] = _mm_loadu_si128((const __m128i *)s);
			else if (B == 8)
				r[k] = _mm_loadl_epi64((const __m128i *)s);
			else {
				memcpy(&v4, s, 4);
				r[k] = _mm_cvtsi32_si128(v4);
			}
		}
		for (int round = 0; round < 4; round++) {
			for (int j = 0; j < 8; j++) {
				t[2 * j] = _mm_unpacklo_epi8(r[j], r[j + 8]);
				t[2 * j + 1] = _mm_unpackhi_epi8(r[j], r[j + 8]);
			}
			memcpy(r, t, sizeof(r));
		}
		for (int k = 0; k < 16; k++) {
			uint8_t *d = to_rows ? rows + k * rs + p : pix + (p + k) * B;
			int32_t v4;

			if (to_rows) {
				if (k < nrows)
					_mm_storeu_si128((__m128i *)d, r[k]);
			} else if (B == 16) {
				_mm_storeu_si128((__m128i *)d, r[k]);
			} else if (B == 8) {
				_mm_storel_epi64((__m128i *)d, r[k]);
			} else {
				v4 = _mm_cvtsi128_si32(r[k]);
				memcpy(d, &v4, 4);
			}
		}
	}
#endif
	for (; p < np; p++)
		for (int l = 0; l < B; l++) {
			if (to_rows && l < nrows)
				rows[l * rs + p] = pix[p * B + l];
			else if (!to_rows)
				pix[p * B + l] = l < nrows ? rows[l * rs + p] : 0;
		}
}

/* Move np pixels between B-byte pixel rows (pix, [np][B]) and the B / 4
 * C4 quad planes at quads + k * qs ([np][4] bytes each), nq of them real:
 * to_quads copies pix -> quads, else quads -> pix (lanes of quads past nq
 * 0).  4x4 (B 16) / 2x4 (B 8) transposes of 32-bit quads (pure moves). */
static void qdq_q4(uint8_t *pix, int B, uint8_t *quads, int64_t qs, int nq, int64_t np,
		   bool to_quads)
{
	int64_t p = 0;

#ifdef __SSE2__
	static const float zero[4];
	const float *s[4];
	float *d[4];
	int st[4];

	for (int k = 0; k < 4; k++) {
		s[k] = k < nq ? (const float *)(quads + k * qs) : zero;
		st[k] = k < nq ? 4 : 0; /* floats per 4 pixels; pad quads read zeros */
		d[k] = (float *)(quads + k * qs);
	}
	if (B == 16 && !to_quads)
		for (; p + 4 <= np; p += 4) {
			__m128 r0 = _mm_loadu_ps(s[0] + p / 4 * st[0]);
			__m128 r1 = _mm_loadu_ps(s[1] + p / 4 * st[1]);
			__m128 r2 = _mm_loadu_ps(s[2] + p / 4 * st[2]);
			__m128 r3 = _mm_loadu_ps(s[3] + p / 4 * st[3]);
			float *o = (float *)(pix + p * 16);

			_MM_TRANSPOSE4_PS(r0, r1, r2, r3);
			_mm_storeu_ps(o, r0);
			_mm_storeu_ps(o + 4, r1);
			_mm_storeu_ps(o + 8, r2);
			_mm_storeu_ps(o + 12, r3);
		}
	if (B == 16 && to_quads)
		for (; p + 4 <= np; p += 4) {
			const float *i = (const float *)(pix + p * 16);
			__m128 r0 = _mm_loadu_ps(i), r1 = _mm_loadu_ps(i + 4);
			__m128 r2 = _mm_loadu_ps(i + 8), r3 = _mm_loadu_ps(i + 12);

			_MM_TRANSPOSE4_PS(r0, r1, r2, r3);
			_mm_storeu_ps(d[0] + p, r0);
			if (nq > 1)
				_mm_storeu_ps(d[1] + p, r1);
			if (nq > 2)
				_mm_storeu_ps(d[2] + p, r2);
			if (nq > 3)
				_mm_storeu_ps(d[3] + p, r3);
		}
	if (B == 8 && !to_quads)
		for (; p + 4 <= np; p += 4) {
			__m128 r0 = _mm_loadu_ps(s[0] + p / 4 * st[0]);
			__m128 r1 = _mm_loadu_ps(s[1] + p / 4 * st[1]);
			float *o = (float *)(pix + p * 8);

			_mm_storeu_ps(o, _mm_unpacklo_ps(r0, r1));
			_mm_storeu_ps(o + 4, _mm_unpackhi_ps(r0, r1));
		}
	if (B == 8 && to_quads)
		for (; p + 4 <= np; p += 4) {
			const float *i = (const float *)(pix + p * 8);
			__m128 r0 = _mm_loadu_ps(i), r1 = _mm_loadu_ps(i + 4);

			_mm_storeu_ps(d[0] + p, _mm_shuffle_ps(r0, r1, _MM_SHUFFLE(2, 0, 2, 0)));
			if (nq > 1)
				_mm_storeu_ps(d[1] + p, _mm_shuffle_ps(r0, r1, _MM_SHUFFLE(3, 1, 3, 1)));
		}
#endif
	for (; p < np; p++)
		for (int k = 0; k < B / 4; k++) {
			if (to_quads && k < nq)
				memcpy(quads + k * qs + p * 4, pix + p * B + 4 * k, 4);
			else if (!to_quads && k < nq)
				memcpy(pix + p * B + 4 * k, quads + k * qs + p * 4, 4);
			else if (!to_quads)
				memset(pix + p * B + 4 * k, 0, 4);
		}
}

/*
 * DequantizeLinear of nrows (<= 8) planar byte rows (rs apart) into pixel
 * rows of 8 floats (lanes past nrows from 0 bytes, as qdq_t16 pads), 8
 * pixels per step: an 8x8 byte transpose in registers, then
 * dequant_avx2's operations per pixel ((q - zp) as float, times scale:
 * the same floats), with no byte buffer between.  Returns the pixels done.
 */
__attribute__((target("avx2"))) static int64_t
qdq_t8_deq_avx2(const uint8_t *rows, int64_t rs, int nrows, int64_t np, bool u8,
		float scale, int32_t zp, float *y)
{
	const __m256 s = _mm256_set1_ps(scale);
	const __m256i z = _mm256_set1_epi32(zp);
	int64_t p = 0;

	for (; p + 8 <= np; p += 8) {
		__m128i r[8], t[4], u[4], v[4];

		for (int k = 0; k < 8; k++)
			r[k] = k < nrows ? _mm_loadl_epi64((const __m128i *)(rows + k * rs + p)) :
					   _mm_setzero_si128();
		for (int k = 0; k < 4; k++)
			t[k] = _mm_unpacklo_epi8(r[2 * k], r[2 * k + 1]);
		u[0] = _mm_unpacklo_epi16(t[0], t[1]);
		u[1] = _mm_unpackhi_epi16(t[0], t[1]);
		u[2] = _mm_unpacklo_epi16(t[2], t[3]);
		u[3] = _mm_unpackhi_epi16(t[2], t[3]);
		v[0] = _mm_unpacklo_epi32(u[0], u[2]); /* pixels 0, 1 */
		v[1] = _mm_unpackhi_epi32(u[0], u[2]); /* 2, 3 */
		v[2] = _mm_unpacklo_epi32(u[1], u[3]); /* 4, 5 */
		v[3] = _mm_unpackhi_epi32(u[1], u[3]); /* 6, 7 */
		for (int k = 0; k < 8; k++) {
			__m128i b = k & 1 ? _mm_unpackhi_epi64(v[k / 2], v[k / 2]) : v[k / 2];
			__m256i q = u8 ? _mm256_cvtepu8_epi32(b) : _mm256_cvtepi8_epi32(b);

			_mm256_storeu_ps(y + (p + k) * 8,
					 _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(q, z)), s));
		}
	}
	return p;
}

static int t8deq_cur = -1;

/* MI_QUANT_T8DEQ=0: transpose into bytes, then dequantize (A/B). */
static bool t8deq_on(void)
{
	return mi_quant_switch(&t8deq_cur, "MI_QUANT_T8DEQ");
}

/* The node's byte -> float map on n contiguous bytes: a DequantizeLinear,
 * or a float-output table node (qlut_range's kernels). */
static void qdq_deq(const struct qnode *q, const uint8_t *x, int64_t n, float *y)
{
	if (!q->lut) {
		mi_dequantize(x, q->qdq.dtype, n, q->qdq.scale, q->qdq.zp, y);
		return;
	}
	lut_f32(q, x, n, y);
}

static void qdq_item(const struct qnode *q, const void *xv, void *yv, int64_t i)
{
	const struct qact *a = &q->qdq;
	const int B = q->qdq_fk ? q->qdq_fk->b : 0, G = B ? B : 4, P = QDQ_E / G;
	const int64_t C = q->qdq_c, HW = q->qdq_hw, nch = (HW + P - 1) / P;
	const int64_t ng = (C + G - 1) / G, img = i / (ng * nch), grp = i / nch % ng;
	const int64_t p0 = i % nch * P, np = HW - p0 < P ? HW - p0 : P;
	const int64_t c0 = grp * G, cnt = C - c0 < G ? C - c0 : G;
	const int64_t fimg = (B ? ng * B : C) * HW, fofs = img * fimg + (B ? grp * HW * B + p0 * B : 0);
	const uint8_t *xq = (const uint8_t *)xv + img * C * HW;
	uint8_t *yq = (uint8_t *)yv + img * C * HW;
	float tf[QDQ_E];
	uint8_t tb[QDQ_E];

	if (q->qdq_deq) {
		float *y = (float *)yv + fofs;

		if (B && q->qdq_c4) { /* C4 quads -> pixel rows of B lanes */
			int64_t d = 0;

			if (B == 16 && q->lutb && mi_quant_isa() == MI_QISA_AVX512 && have_vbmi())
				d = qdq_q4_lut_vbmi(q->lutb, xq + c0 * HW + p0 * 4, HW * 4,
						    (int)(cnt + 3) / 4, np, y);
			qdq_q4(tb, B, (uint8_t *)xq + c0 * HW + (p0 + d) * 4, HW * 4, (int)(cnt + 3) / 4,
			       np - d, false);
			qdq_deq(q, tb, (np - d) * B, y + d * B);
		} else if (B) { /* planar -> pixel rows of B lanes */
			int64_t d = 0;

			if (B == 16 && q->lutb && mi_quant_isa() == MI_QISA_AVX512 && have_vbmi())
				d = qdq_t16_lut_vbmi(q->lutb, (uint8_t *)xq + c0 * HW + p0, HW,
						     (int)cnt, np, y);
			else if (B == 8 && !q->lut && mi_quant_isa() >= MI_QISA_AVX2 &&
				 (a->dtype == MI_DT_UINT8 || a->dtype == MI_DT_INT8) && t8deq_on())
				d = qdq_t8_deq_avx2(xq + c0 * HW + p0, HW, (int)cnt, np,
						    a->dtype == MI_DT_UINT8, a->scale, a->zp, y);
			qdq_t16(tb, B, (uint8_t *)xq + c0 * HW + p0 + d, HW, (int)cnt, np - d, false);
			qdq_deq(q, tb, (np - d) * B, y + d * B);
		} else if (!q->lut) { /* C4 -> planar */
			mi_dequantize_c4(xq + c0 * HW + p0 * 4, np, a->dtype, a->scale, a->zp,
					 (float *)yv + img * fimg + c0 * HW + p0, HW);
		} else {
			y = (float *)yv + img * fimg + c0 * HW + p0;
			qdq_deq(q, xq + c0 * HW + p0 * 4, np * 4, tf);
			qdq_t4(tf, y, HW, np, true);
		}
		return;
	}
	if (B) {
		const float *x = (const float *)xv + fofs;

		if (q->qdq_c4) { /* pixel rows of B lanes -> C4 quads */
			mi_quantize_f32(x, np * B, a->scale, a->zp, a->dtype, tb);
			qdq_q4(tb, B, yq + c0 * HW + p0 * 4, HW * 4, (int)(cnt + 3) / 4, np, true);
		} else { /* pixel rows of B lanes -> planar */
			mi_quantize_f32(x, np * B, a->scale, a->zp, a->dtype, tb);
			qdq_t16(tb, B, yq + c0 * HW + p0, HW, (int)cnt, np, true);
		}
		return;
	}
	/* planar -> C4 */
	mi_quantize_c4((const float *)xv + img * fimg + c0 * HW + p0, HW, np, a->scale, a->zp,
		       a->dtype, yq + c0 * HW + p0 * 4);
}

static void qdq_item_fn(void *arg, int i, int tid)
{
	const struct qdq_job *j = arg;

	qdq_item(j->q, j->x, j->y, i);
}

/* Runs q in the layouts above when one side is not planar (false: both
 * are; one pixel per channel: C4 is the planar layout). */
static bool qdq_layout_run(const struct qnode *q, const void *x, void *y)
{
	struct qdq_job j = { q, x, y };
	int G = q->qdq_fk ? q->qdq_fk->b : 4, P = QDQ_E / G;
	int64_t items = q->qdq_n * ((q->qdq_c + G - 1) / G) * ((q->qdq_hw + P - 1) / P);

	if (!(q->qdq_c4 && q->qdq_hw > 1) && !q->qdq_fk)
		return false;
	/* split from ~2-3 us of work (as par_range), counted in real elements:
	 * items round small maps up (a 7x7 plane group is one 4096-element
	 * item), and those ran slower split */
	if (q->nthreads <= 1 || (!split_all && q->qdq_n * q->qdq_c * q->qdq_hw < 32 << 10)) {
		for (int64_t i = 0; i < items; i++)
			qdq_item(q, x, y, i);
		return true;
	}
	cur_threads = q->nthreads;
	pool_for((int)items, qdq_item_fn, &j);
	return true;
}

static int qdq_run(struct mi_graph *g, struct mi_node *n)
{
	const struct qnode *q = n->priv;
	struct qdq_job j = { q, mi_in(g, n, 0)->data, mi_out(g, n, 0)->data };

	if (qdq_layout_run(q, j.x, j.y))
		return 0;
	par_range(q->nthreads, mi_tensor_numel(mi_in(g, n, 0)), 16 << 10,
		  qdq_range, &j);
	return 0;
}

MI_QUANT_SWITCH(convblk, "MI_QUANT_CONVBLK")

/*
 * An int8 conv with fp32 output (the last int8 node before an fp32
 * island of a mixed file) can write it blocked for the NCHWc kernels
 * (conv_run: planar floats transposed), so the fp32 convs, depthwise
 * convs and residual Adds it feeds run as blocked chains instead of on
 * the NCHW kernels (MobileNetV2's features.7 depthwise conv, 0.19 ms on
 * the NCHW kernel).  MI_QUANT_CONVBLK=0: always planar (read when
 * planning).
 */
static bool conv_blk_ok(struct mi_graph *g, struct mi_node *n)
{
	const struct qnode *q = n->priv;
	const struct mi_tensor *y = n->noutputs == 1 ? mi_out(g, n, 0) : NULL;
	const struct mi_qconv_shape *s = &q->cv.s;

	if (!q->is_conv || q->ep.mode != MI_QOUT_F32 || !q->sh || !y || y->dtype != MI_DT_FLOAT ||
	    y->ndim != 4 || !mi_tensor_shape_known(y) || y->dims[1] != s->oc ||
	    y->dims[2] * y->dims[3] != (int64_t)s->oh * s->ow || !convblk_on())
		return false;
	/* the transposition goes through memory beyond ~128K floats per
	 * image (0.3-0.5 ns a float on Zen 3): worth it for readers that
	 * the NCHW kernels run several times slower, depthwise convs and
	 * residual Adds (ShuffleNetV2's conv1 -> MaxPool was 0.07 ms slower) */
	if ((int64_t)s->oc * s->oh * s->ow <= (128 << 10))
		return true;
	for (int i = 0; i < g->nnodes; i++) {
		const struct mi_node *c = &g->nodes[i];

		if (c->dead || c->domain[0] || c->ninputs < 1)
			continue;
		if (!strcmp(c->op_type, "Add") && c->ninputs == 2 &&
		    (c->inputs[0] == n->outputs[0] || c->inputs[1] == n->outputs[0]))
			return true;
		if (!strcmp(c->op_type, "Conv") && c->inputs[0] == n->outputs[0] &&
		    mi_attr_int(c, "group", 1) == s->oc && s->oc > 1)
			return true;
	}
	return false;
}

/* lib/cpu/nchwc.c: 1 if n is a standalone DequantizeLinear that can write
 * its fp32 output blocked, 2 a QuantizeLinear that can read a blocked
 * input, else 0. */
int mi_quant_qdq_kind(struct mi_graph *g, struct mi_node *n)
{
	const struct qnode *q = n->priv;

	if (!n->dead && mi_quant_node_is(n) && conv_blk_ok(g, n))
		return 1;
	if (n->dead || !mi_quant_node_is(n) || !qdq_like(q) || !qdq_layout_on(2))
		return 0;
	/* a Q writing planar bytes reads planar floats: its fp32 producer
	 * writes them lane by lane as cheaply as the Q would transpose
	 * (EfficientNet-B0 features.2.1 expand -> Q -> int8 depthwise, per-node
	 * CPU time 0.13 ms planar vs 0.27 ms blocked -> planar) */
	if (!q->qdq_deq && !q->qdq_c4 && !qdq_layout_on(4))
		return 0;
	return q->qdq_deq ? 1 : 2;
}

/* The NCHWc pass stores n's fp32 side blocked for ISA isa. */
void mi_quant_qdq_set_blocked(struct mi_graph *g, struct mi_node *n, int isa)
{
	struct qnode *q = n->priv;
	const struct mi_nc_kern *k = mi_nc_kern_get(isa);

	if (!mi_quant_qdq_kind(g, n) || k->b > 16 || k->b % 4)
		return;
	if (q->is_conv) {
		const struct mi_qconv_shape *s = &q->cv.s;
		size_t off = (mi_qconv_workspace(&q->cv) + 63) & ~(size_t)63;
		size_t need = off + (size_t)s->oc * s->oh * s->ow * sizeof(float);
		int64_t nb = mi_out(g, n, 0)->dims[0];

		if (need > q->sh->size) { /* room for the planar floats */
			void *ws = aligned_alloc(64, (need + 127) & ~(size_t)63);

			if (!ws)
				return;
			free(q->sh->ws);
			q->sh->ws = ws;
			q->sh->size = need;
		}
		q->blk_off = off;
		q->out_b = k->b;
		g->tensors[n->outputs[0]].phys_bytes =
			(size_t)nb * ((s->oc + k->b - 1) / k->b) * k->b * s->oh * s->ow * sizeof(float);
		q->qdq_phys = true;
		if (getenv("MI_QUANT_VERBOSE") && *getenv("MI_QUANT_VERBOSE") == '1')
			fprintf(stderr, "metainfer: int8: Conv '%s': fp32 output blocked by %d\n",
				n->name, k->b);
		return;
	}
	q->qdq_fk = k;
	if (q->qdq_deq) {
		g->tensors[n->outputs[0]].phys_bytes =
			(size_t)(q->qdq_n * ((q->qdq_c + k->b - 1) / k->b) * k->b * q->qdq_hw) *
			sizeof(float);
		q->qdq_phys = true;
	}
	if (getenv("MI_QUANT_VERBOSE") && *getenv("MI_QUANT_VERBOSE") == '1')
		fprintf(stderr, "metainfer: int8: %s '%s': fp32 side blocked by %d, quantized side %s\n",
			n->op_type, n->name, k->b, q->qdq_c4 ? "C4" : "planar");
}

/*
 * lib/cpu/nchwc.c: the residual Add `add` (both operands and its output
 * blocked, an absorbed activation: node act_node (-1: none), act, lo, hi)
 * reads n's blocked fp32 output, n's only reader, and its other operand
 * is ready before n runs: n takes the Add over (ep.res in its blocked
 * epilogue, blk8_store_res, or after the transposition of the fallback).
 * The NCHWc pass then neither reads n's output back nor writes the sum
 * separately (ResNet-50's layer1/layer2 Adds, 0.12-0.25 ms each).
 * 0 done (the Add and act_node dead, undone by qnode_fini), else nothing
 * changed.  MI_QUANT_RESADD=0: never.
 */
MI_QUANT_SWITCH(resadd, "MI_QUANT_RESADD")

int mi_quant_conv_add(struct mi_graph *g, struct mi_node *n, struct mi_node *add,
		      int act_node, int act, float lo, float hi)
{
	struct qnode *q = n->priv;
	int t = n->outputs[0], s, other, out;

	if (!resadd_on() || n->dead || !mi_quant_node_is(n) || !q->is_conv || !q->out_b ||
	    q->ep.mode != MI_QOUT_F32 || q->res_in || !q->qdq_phys || n->noutputs != 1 ||
	    n->ninputs != 1 || q->orig_ninputs < 2 || q->nkilled + 2 > 8 || add->dead ||
	    add->ninputs != 2 || add->noutputs != 1 ||
	    (act != MI_ACT_NONE && act != MI_ACT_RELU && act != MI_ACT_CLIP))
		return -EOPNOTSUPP;
	s = add->inputs[0] == t ? 0 : add->inputs[1] == t ? 1 : -1;
	if (s < 0 || add->inputs[1 - s] == t || mi_graph_sole_consumer(g, t) != (int)(add - g->nodes))
		return -EOPNOTSUPP;
	other = add->inputs[1 - s];
	out = act_node >= 0 ? g->nodes[act_node].outputs[0] : add->outputs[0];
	kill(g, q, add);
	if (act_node >= 0)
		kill(g, q, &g->nodes[act_node]);
	n->inputs[1] = other;
	n->ninputs = 2;
	q->res_in = 1;
	q->ep.res_act = act == MI_ACT_RELU ? MI_QRES_RELU : act == MI_ACT_CLIP ? MI_QRES_CLIP :
					     MI_QRES_NONE;
	q->ep.res_first = s == 1;
	q->ep.res_lo = lo;
	q->ep.res_hi = hi;
	n->outputs[0] = out;
	g->tensors[out].producer = (int)(n - g->nodes);
	g->tensors[out].phys_bytes = g->tensors[t].phys_bytes;
	g->tensors[t].phys_bytes = 0;
	if (getenv("MI_QUANT_VERBOSE") && *getenv("MI_QUANT_VERBOSE") == '1')
		fprintf(stderr, "metainfer: int8: Conv '%s': Add '%s'%s fused\n", n->name,
			add->name, act_node >= 0 ? " + act" : "");
	return 0;
}

static int try_qdq_op(struct mi_graph *g, struct mi_node *n)
{
	bool dq = !strcmp(n->op_type, "DequantizeLinear");
	struct mi_tensor *x = mi_in(g, n, 0), *y = n->noutputs == 1 ? mi_out(g, n, 0) : NULL;
	struct qact a;
	struct qnode *q;

	if (n->dead || n->priv || n->domain[0] || (!dq && strcmp(n->op_type, "QuantizeLinear")) ||
	    !x || !y || n->ninputs < 2)
		return 0;
	if (dq ? !act_params(g, n, 0, 1, 2, &a) || y->dtype != MI_DT_FLOAT :
		 x->dtype != MI_DT_FLOAT || !q_params(g, n, &a) ||
		 (mi_in(g, n, 2) && mi_in(g, n, 2)->dtype != y->dtype))
		return 0;
	q = qnode_new(qdq_run);
	if (!q)
		return -ENOMEM;
	q->qdq = a;
	q->qdq_deq = dq;
	qdq_dims(q, x);
	n->priv = q;
	return 0;
}

/* ---- data movement on quantized tensors ------------------------------------ */

/*
 * Transpose, Reshape, Flatten, Squeeze, Unsqueeze, Identity, Slice, Split,
 * Concat and Gather (constant indices) move values without changing them.
 * A connected set of them whose data come from per-tensor
 * DequantizeLinear nodes ("sources") and whose results go to per-tensor
 * QuantizeLinear nodes ("sinks") runs on the bytes: every element of a
 * sink is Q_sink(DQ_src(byte)) of one source byte, a byte table per
 * (source, sink) pair (the identity, i.e. a copy, when their parameters
 * are equal: Q(DQ(q)) = q because (q - zp) * scale / scale is within a few
 * ulps of q - zp, |q - zp| <= 255), computed with the Q/DQ kernels
 * themselves, so the bytes are those of DQ -> float moves -> Q.  Which
 * source byte lands where is found at plan time by running the moves on
 * the elements' origins (source, offset) and kept as runs of consecutive
 * bytes.  The node that wrote a sink's tensor writes the sink's bytes from
 * the sources (its inputs become them); the other moves, the sinks'
 * QuantizeLinear nodes and the DequantizeLinear nodes nobody reads any
 * more go dead.  A move whose result an fp32 node reads (or a graph
 * output) keeps running in fp32 with everything it needs.  Q -> DQ pairs
 * between moves that round-trip every byte reaching them are looked
 * through (mv_through).  Sources are read planar; a sink whose channel
 * planes are whole runs may write C4 for its conv (plan_c4_tensors).
 * MI_QUANT_MOVE=0 turns it off.
 */
MI_QUANT_SWITCH(move, "MI_QUANT_MOVE")
/* MI_QUANT_MVC4=0: moves on bytes write planes only */
MI_QUANT_SWITCH(mvc4, "MI_QUANT_MVC4")
/* MI_QUANT_MVTHROUGH=0: a Q -> DQ pair between moves ends the moves there */
MI_QUANT_SWITCH(through, "MI_QUANT_MVTHROUGH")
/* MI_QUANT_MVF32=0: a move an fp32 node reads runs in fp32 (with the
 * moves and DQs before it), instead of gathering floats from the sources */
MI_QUANT_SWITCH(mvf32, "MI_QUANT_MVF32")

#define QMV_SHIFT 40 /* origin = source << QMV_SHIFT | offset */
#define QMV_MAXSRC 64 /* sources (inputs) of one node */

struct qmv_run {
	int64_t dst, off, len;
	int src; /* index into the node's inputs */
};

/* A byte table as ((u * m + r) >> sh) + zp saturated to the sink's type,
 * u the source byte (XOR 0x80 when int8: flip) as unsigned. */
struct qmv_aff {
	int32_t m, r, sh, zp; /* zp: the sink's, added after the shift */
	uint8_t flip;
};

struct qmv_out {
	int nruns;
	struct qmv_run *runs;
	uint8_t *tab;  /* [ninputs][256] */
	uint8_t *tel;  /* [ninputs][256]: tab as qmv_lut's XOR-telescoped slices */
	struct qmv_aff *aff; /* [ninputs]: tab in fixed point (qmv_aff_fit), or NULL */
	bool *ident;   /* [ninputs]: a copy */
	int64_t numel;
	/* 4-D output whose every channel plane is one run: the planes'
	 * sources (pl_src, pl_off: n * c + channel), so it can write C4 */
	int64_t c, hw;
	int *pl_src;
	int64_t *pl_off;
	bool c4; /* writes the C4 layout (plan_c4_tensors) */
	bool s8y; /* the sink is int8 */
	struct qact *deq; /* fp32 output (an fp32 node reads it): [ninputs] DQs */
};

struct qmove {
	int nout;
	struct qmv_out out[MI_MAX_DIMS];
	int orig_nin, orig_nout, *orig_in, *orig_out;
	int *killed, nkilled;
	int *consts, nconsts; /* Shape outputs flagged constant meanwhile */
};

static bool mv_op(const struct mi_node *n)
{
	static const char *const ops[] = { "Identity", "Reshape", "Flatten", "Squeeze",
					   "Unsqueeze", "Transpose", "Slice", "Split",
					   "Concat", "Gather", NULL };

	if (n->dead || n->priv || n->domain[0] || n->noutputs < 1 ||
	    n->noutputs > MI_MAX_DIMS)
		return false;
	for (int i = 0; ops[i]; i++)
		if (!strcmp(n->op_type, ops[i]))
			return true;
	return false;
}

/* Inputs of move n that carry data (the others are shapes / indices). */
static int mv_ndata(const struct mi_node *n)
{
	return !strcmp(n->op_type, "Concat") ? n->ninputs : 1;
}

struct mvctx {
	struct mi_graph *g;
	int64_t **org;  /* per tensor: origins of its elements, or NULL */
	int8_t *state;  /* per tensor: 0 not yet, 1 org set, -1 not movable */
	int nsrc, csrc; /* every source of the graph's moves */
	int *src_t;
	struct qact *src_q;
};

/* integer constant (or plan-time shape value) input i: -ENOENT if absent */
static int mv_ints(struct mi_graph *g, struct mi_node *n, int i, int64_t *v, int max, int *cnt)
{
	struct mi_tensor *t = mi_in(g, n, i);

	if (!t)
		return -ENOENT;
	if (!(t->flags & (MI_TF_CONST | MI_TF_SHAPEVAL)) || !t->data ||
	    (t->dtype != MI_DT_INT64 && t->dtype != MI_DT_INT32) || t->ndim > 1 ||
	    mi_tensor_numel(t) > max)
		return -EINVAL;
	*cnt = (int)mi_tensor_numel(t);
	for (int k = 0; k < *cnt; k++)
		v[k] = mi_tensor_get_i64(t, k);
	return 0;
}

static void mv_strides(const struct mi_tensor *t, int64_t *s)
{
	int64_t v = 1;

	for (int i = t->ndim - 1; i >= 0; i--) {
		s[i] = v;
		v *= t->dims[i];
	}
}

/* y[i] = x[xoff + sum_k idx_k(i) xs_k] over y's dims (row-major). */
static void mv_gather(const int64_t *x, int64_t xoff, const int64_t *xs, const int64_t *dims,
		      int nd, int64_t *y)
{
	int64_t idx[MI_MAX_DIMS] = { 0 }, n = 1, xo = xoff;

	for (int k = 0; k < nd; k++)
		n *= dims[k];
	for (int64_t i = 0; i < n; i++) {
		y[i] = x[xo];
		for (int k = nd - 1; k >= 0; k--) {
			xo += xs[k];
			if (++idx[k] < dims[k])
				break;
			xo -= dims[k] * xs[k];
			idx[k] = 0;
		}
	}
}

/* Slice geometry as the reference op computes it: per axis start and step. */
static bool mv_slice(struct mi_graph *g, struct mi_node *n, const struct mi_tensor *x,
		     const struct mi_tensor *y, int64_t *xoff, int64_t *xs)
{
	int64_t st[MI_MAX_DIMS], en[MI_MAX_DIMS], ax[MI_MAX_DIMS], sp[MI_MAX_DIMS];
	int ns, ne, na = -1, nst = -1, r = x->ndim, seen[MI_MAX_DIMS] = { 0 };

	if (y->ndim != r)
		return false;
	if (n->ninputs >= 3) {
		int e3, e4;

		if (mv_ints(g, n, 1, st, MI_MAX_DIMS, &ns) || mv_ints(g, n, 2, en, MI_MAX_DIMS, &ne))
			return false;
		e3 = mv_ints(g, n, 3, ax, MI_MAX_DIMS, &na);
		e4 = mv_ints(g, n, 4, sp, MI_MAX_DIMS, &nst);
		if ((e3 && e3 != -ENOENT) || (e4 && e4 != -ENOENT))
			return false;
		if (e3)
			na = -1;
		if (e4)
			nst = -1;
	} else {
		const int64_t *a = mi_attr_ints(n, "starts", &ns);
		const int64_t *b = mi_attr_ints(n, "ends", &ne);
		const int64_t *c = mi_attr_ints(n, "axes", &na);

		if (!a || !b || ns > MI_MAX_DIMS || ne > MI_MAX_DIMS || (c && na > MI_MAX_DIMS))
			return false;
		memcpy(st, a, ns * sizeof(int64_t));
		memcpy(en, b, ne * sizeof(int64_t));
		if (c)
			memcpy(ax, c, na * sizeof(int64_t));
		else
			na = -1;
	}
	if (ns != ne || (na >= 0 && na != ns) || (nst >= 0 && nst != ns))
		return false;
	mv_strides(x, xs);
	*xoff = 0;
	for (int i = 0; i < ns; i++) {
		int64_t a = na >= 0 ? ax[i] : i, dim, s, step, len;

		if (a < 0)
			a += r;
		if (a < 0 || a >= r || seen[a])
			return false;
		seen[a] = 1;
		step = nst >= 0 ? sp[i] : 1;
		dim = x->dims[a];
		if (step == 0)
			return false;
		len = mi_slice_axis(dim, st[i], en[i], &step, &s);
		if (len != y->dims[a])
			return false;
		*xoff += s * xs[a];
		xs[a] *= step;
	}
	for (int i = 0; i < r; i++)
		if (!seen[i] && x->dims[i] != y->dims[i])
			return false;
	return true;
}

static int64_t *mv_origins(struct mvctx *c, int t);

/* Origins of output `o` of move n into y (numel of that output). */
static bool mv_apply(struct mvctx *c, struct mi_node *n, int o, int64_t *y)
{
	struct mi_graph *g = c->g;
	struct mi_tensor *yt = mi_out(g, n, o), *xt = mi_in(g, n, 0);
	int64_t *x[QMV_MAXSRC], xs[MI_MAX_DIMS], xoff = 0;
	int nd = mv_ndata(n), r = yt->ndim;

	if (nd > QMV_MAXSRC)
		return false;
	for (int k = 0; k < nd; k++) {
		x[k] = mv_origins(c, n->inputs[k]);
		if (!x[k])
			return false;
	}
	if (!strcmp(n->op_type, "Transpose")) {
		int cnt, seen[MI_MAX_DIMS] = { 0 };
		const int64_t *p = mi_attr_ints(n, "perm", &cnt);
		int64_t s[MI_MAX_DIMS];

		if (xt->ndim != r || (p && cnt != r))
			return false;
		mv_strides(xt, s);
		for (int i = 0; i < r; i++) {
			int64_t a = p ? p[i] : r - 1 - i;

			if (a < 0 || a >= r || seen[a] || yt->dims[i] != xt->dims[a])
				return false;
			seen[a] = 1;
			xs[i] = s[a];
		}
	} else if (!strcmp(n->op_type, "Slice")) {
		if (!mv_slice(g, n, xt, yt, &xoff, xs))
			return false;
	} else if (!strcmp(n->op_type, "Split") || !strcmp(n->op_type, "Gather") ||
		   !strcmp(n->op_type, "Concat")) {
		bool gather = !strcmp(n->op_type, "Gather"), cat = !strcmp(n->op_type, "Concat");
		int64_t axis = mi_attr_int(n, "axis", 0), outer = 1, inner = 1, pos = 0;
		int xr = cat ? r : xt->ndim;

		if (axis < 0)
			axis += xr;
		if (axis < 0 || axis >= xr)
			return false;
		for (int i = 0; i < axis; i++)
			outer *= (cat ? yt : xt)->dims[i];
		for (int i = axis + 1; i < xr; i++)
			inner *= (cat ? yt : xt)->dims[i];
		if (cat) {
			for (int k = 0; k < nd; k++) {
				struct mi_tensor *in = mi_in(g, n, k);
				int64_t w = in->dims[axis] * inner;

				if (in->ndim != r)
					return false;
				for (int64_t b = 0; b < outer; b++)
					memcpy(y + b * yt->dims[axis] * inner + pos * inner,
					       x[k] + b * w, w * sizeof(int64_t));
				pos += in->dims[axis];
			}
			return pos == yt->dims[axis];
		}
		if (gather) {
			struct mi_tensor *it = mi_in(g, n, 1);
			int64_t ni, dim = xt->dims[axis];

			if (!it || !const_t(it) || (it->dtype != MI_DT_INT64 && it->dtype != MI_DT_INT32))
				return false;
			ni = mi_tensor_numel(it);
			if (outer * ni * inner != mi_tensor_numel(yt))
				return false;
			for (int64_t b = 0; b < outer; b++)
				for (int64_t j = 0; j < ni; j++) {
					int64_t v = mi_tensor_get_i64(it, j);

					if (v < 0)
						v += dim;
					if (v < 0 || v >= dim)
						return false;
					memcpy(y + (b * ni + j) * inner, x[0] + (b * dim + v) * inner,
					       inner * sizeof(int64_t));
				}
			return true;
		}
		/* Split: output o is the part after the outputs before it */
		for (int k = 0; k < o; k++)
			pos += mi_out(g, n, k)->dims[axis];
		if (yt->ndim != xr || pos + yt->dims[axis] > xt->dims[axis])
			return false;
		for (int64_t b = 0; b < outer; b++)
			memcpy(y + b * yt->dims[axis] * inner,
			       x[0] + (b * xt->dims[axis] + pos) * inner,
			       yt->dims[axis] * inner * sizeof(int64_t));
		return true;
	} else {
		/* reshapes: the same elements in the same order */
		if (mi_tensor_numel(xt) != mi_tensor_numel(yt))
			return false;
		memcpy(y, x[0], mi_tensor_numel(yt) * sizeof(int64_t));
		return true;
	}
	mv_gather(x[0], xoff, xs, yt->dims, r, y);
	return true;
}

/* Every origin in org[0..n) is a source with parameters a. */
static bool mv_all_src(const struct mvctx *c, const int64_t *org, int64_t n, const struct qact *a)
{
	int last = -1;

	for (int64_t i = 0; i < n; i++) {
		int s = (int)(org[i] >> QMV_SHIFT);

		if (s == last)
			continue;
		if (!same_q(&c->src_q[s], a))
			return false;
		last = s;
	}
	return true;
}

/*
 * DQ p (parameters a, writing t of n elements) reads a QuantizeLinear of
 * a move's output whose sources all have parameters a (ONNX Runtime's
 * quantizer puts a Q/DQ pair after every move): Q rounds DQ(q) back to q,
 * so t's origins are those of the Q's input.
 */
static bool mv_through(struct mvctx *c, struct mi_node *p, const struct qact *a, int t,
		       int64_t n)
{
	struct mi_graph *g = c->g;
	struct mi_node *qn = producer(g, p->inputs[0], "QuantizeLinear"), *pp;
	struct qact qa;
	int64_t *o0;
	int t0;

	if (!qn || qn->priv || !q_params(g, qn, &qa) || !same_q(&qa, a) || !through_on())
		return false;
	t0 = qn->inputs[0];
	pp = t0 >= 0 && g->tensors[t0].producer >= 0 ? &g->nodes[g->tensors[t0].producer] : NULL;
	if (!pp || !mv_op(pp) || mi_tensor_numel(&g->tensors[t0]) != n)
		return false;
	o0 = mv_origins(c, t0);
	if (!o0 || !mv_all_src(c, o0, n, a))
		return false;
	c->org[t] = malloc(n * sizeof(int64_t));
	if (!c->org[t])
		return false;
	memcpy(c->org[t], o0, n * sizeof(int64_t));
	return true;
}

/* Origins of tensor t's elements (NULL: not all from quantized sources). */
static int64_t *mv_origins(struct mvctx *c, int t)
{
	struct mi_graph *g = c->g;
	struct mi_tensor *y = t >= 0 ? &g->tensors[t] : NULL;
	struct mi_node *p;
	int64_t n;
	int o = 0;

	if (!y)
		return NULL;
	if (c->state[t])
		return c->state[t] > 0 ? c->org[t] : NULL;
	c->state[t] = -1;
	n = mi_tensor_numel(y);
	if (y->producer < 0 || y->dtype != MI_DT_FLOAT || !mi_tensor_shape_known(y) || n <= 0 ||
	    n >= ((int64_t)1 << QMV_SHIFT))
		return NULL;
	p = &g->nodes[y->producer];
	while (o < p->noutputs && p->outputs[o] != t)
		o++;
	if (p->dead || o == p->noutputs)
		return NULL;
	if (!strcmp(p->op_type, "DequantizeLinear") && !p->domain[0] && !p->priv) {
		struct qact a;
		int s;

		if (!act_params(g, p, 0, 1, 2, &a) || mi_tensor_numel(mi_in(g, p, 0)) != n)
			return NULL;
		if (mv_through(c, p, &a, t, n))
			goto done;
		for (s = 0; s < c->nsrc && c->src_t[s] != a.t; s++)
			;
		if (s == c->csrc) {
			int *nt = realloc(c->src_t, (2 * s + 16) * sizeof(int));
			struct qact *nq = nt ? realloc(c->src_q, (2 * s + 16) * sizeof(*nq)) : NULL;

			if (nt)
				c->src_t = nt;
			if (!nq)
				return NULL;
			c->src_q = nq;
			c->csrc = 2 * s + 16;
		}
		if (s == c->nsrc) {
			c->src_t[s] = a.t;
			c->src_q[s] = a;
			c->nsrc++;
		}
		c->org[t] = malloc(n * sizeof(int64_t));
		if (!c->org[t])
			return NULL;
		for (int64_t i = 0; i < n; i++)
			c->org[t][i] = (int64_t)s << QMV_SHIFT | i;
	} else {
		if (!mv_op(p))
			return NULL;
		c->org[t] = malloc(n * sizeof(int64_t));
		if (!c->org[t] || !mv_apply(c, p, o, c->org[t])) {
			free(c->org[t]);
			c->org[t] = NULL;
			return NULL;
		}
	}
done:
	c->state[t] = 1;
	return c->org[t];
}

struct qmv_job {
	const struct qmv_out *o;
	const uint8_t *x[QMV_MAXSRC];
	uint8_t *y;
};


/*
 * A move's byte tables (a sink's parameters differ from a source's:
 * ShuffleNetV2's split reads the branch outputs of several units, each
 * with its own scale) are looked up once per channel plane, 49-784 bytes.
 * lut8_any set the 16 table slices up on every call and did the last
 * n % 32 bytes one at a time (17 of ShuffleNetV2 stage4's 49-byte planes:
 * its Slices cost ~1 cycle per byte).  qmv_lut takes the slices made at
 * plan time (tel_make) and ends with a vector overlapping the one before
 * (the same table, so the same bytes).  MI_QUANT_MVLUT=0: lut8_any.
 */
MI_QUANT_SWITCH(mvlut, "MI_QUANT_MVLUT")

/* lut8x_tel_avx2's slices: slice c XOR slice c - 1 within each half. */
static void tel_make(const uint8_t *lut, uint8_t *d)
{
	for (int c = 0; c < 16; c++)
		for (int b = 0; b < 16; b++)
			d[16 * c + b] = lut[16 * c + b] ^ (c % 8 ? lut[16 * (c - 1) + b] : 0);
}

/* y[i] = lut[x[i]], i < n (n >= 32, x and y apart), from tel_make's d. */
__attribute__((target("avx2"))) static void lut8_tel_pre(const uint8_t *x, const uint8_t *tel,
							  int64_t n, uint8_t *y)
{
	__m256i d[16];

	for (int c = 0; c < 16; c++)
		d[c] = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(tel + 16 * c)));
	for (int64_t i = 0;; i += 32) {
		if (i + 32 > n)
			i = n - 32; /* the last vector overlaps the one before */
		_mm256_storeu_si256((__m256i *)(y + i),
				    tel32_avx2(d, _mm256_loadu_si256((const __m256i *)(x + i))));
		if (i + 32 >= n)
			break;
	}
}

/*
 * Better still, a table is mostly Q_sink(DQ_src(q)) = round((q - zp) *
 * ratio) + zp', i.e. ((u * m + r) >> sh) saturated, found at plan time
 * and kept only if it gives every one of the 256 table bytes
 * (qmv_aff_fit): 4 vpmulld + 4 vpaddd + 4 vpsravd + 3 packs + vpermd per
 * 32 bytes instead of 16 vpshufb, 14 vpsubb, 15 vpxor, with m, r, sh per
 * 32-bit lane, so a C4 quad is interleaved first and requantized in place
 * with its 4 planes' parameters (qmv_c4_range).  MI_QUANT_MVAFF=0: tables.
 */
MI_QUANT_SWITCH(mvaff, "MI_QUANT_MVAFF")

static int qmv_sat(int64_t v, int lo, int hi)
{
	return v < lo ? lo : v > hi ? hi : (int)v;
}

/* f gives every byte of tab, computed as qmv_aff32 does. */
static bool qmv_aff_ok(const uint8_t *tab, int s8y, const struct qmv_aff *f)
{
	for (int b = 0; b < 256; b++) {
		int64_t p = (int64_t)(b ^ f->flip) * f->m, w = p + f->r;
		int v;

		if (p > INT32_MAX || w < INT32_MIN || w > INT32_MAX)
			return false;
		v = qmv_sat(qmv_sat(w >> f->sh, -32768, 32767) + f->zp, -32768, 32767);
		if (qmv_sat(v, s8y ? -128 : 0, s8y ? 127 : 255) != (s8y ? (int8_t)tab[b] : tab[b]))
			return false;
	}
	return true;
}

/* Table tab of source a into sink y in fixed point: false if none found. */
static bool qmv_aff_fit(const uint8_t *tab, const struct qact *a, const struct qact *y,
			struct qmv_aff *f)
{
	double ratio = (double)a->scale / (double)y->scale;
	int s8x = a->dtype == MI_DT_INT8, s8y = y->dtype == MI_DT_INT8;
	int64_t zx = a->zp + (s8x ? 128 : 0);

	if ((a->dtype != MI_DT_UINT8 && !s8x) || (y->dtype != MI_DT_UINT8 && !s8y) ||
	    !(ratio > 0) || ratio > 32767)
		return false;
	f->flip = s8x ? 0x80 : 0;
	f->zp = y->zp;
	for (int sh = 30; sh >= 0; sh--) {
		int64_t m0 = llrint(ldexp(ratio, sh));

		if (m0 > INT32_MAX / 384)
			continue;
		for (int dm = 0; dm < 3; dm++) {
			int64_t m = m0 + (dm == 1 ? -1 : dm == 2 ? 1 : 0);

			for (int dr = -2; dr <= 2 && m >= 0; dr++) {
				int64_t r = ((int64_t)1 << sh >> 1) - zx * m + dr;

				if (r < INT32_MIN || r > INT32_MAX)
					continue;
				f->m = (int32_t)m;
				f->r = (int32_t)r;
				f->sh = sh;
				if (qmv_aff_ok(tab, s8y, f))
					return true;
			}
		}
	}
	return false;
}

/* 32 bytes requantized: lane l of m, r, sh for bytes l mod 8 of 8. */
__attribute__((target("avx2"), always_inline)) static inline __m256i
qmv_aff32(__m256i v, const __m256i *p, bool s8y)
{
	__m128i lo, hi;
	__m256i a, b, c, d;

	v = _mm256_xor_si256(v, p[3]);
	lo = _mm256_castsi256_si128(v);
	hi = _mm256_extracti128_si256(v, 1);
	a = _mm256_cvtepu8_epi32(lo);
	b = _mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8));
	c = _mm256_cvtepu8_epi32(hi);
	d = _mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8));
	a = _mm256_srav_epi32(_mm256_add_epi32(_mm256_mullo_epi32(a, p[0]), p[1]), p[2]);
	b = _mm256_srav_epi32(_mm256_add_epi32(_mm256_mullo_epi32(b, p[0]), p[1]), p[2]);
	c = _mm256_srav_epi32(_mm256_add_epi32(_mm256_mullo_epi32(c, p[0]), p[1]), p[2]);
	d = _mm256_srav_epi32(_mm256_add_epi32(_mm256_mullo_epi32(d, p[0]), p[1]), p[2]);
	a = _mm256_adds_epi16(_mm256_packs_epi32(a, b), p[4]); /* bytes 0-3 8-11 | 4-7 12-15 */
	c = _mm256_adds_epi16(_mm256_packs_epi32(c, d), p[4]);
	a = s8y ? _mm256_packs_epi16(a, c) : _mm256_packus_epi16(a, c);
	return _mm256_permutevar8x32_epi32(a, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* y[i] = aff(x[i]), i < n (y may be x): lanes' parameters p[0..5) (m, r,
 * sh, flip, zp), a pattern of 4 bytes. */
__attribute__((target("avx2"))) static void qmv_aff_avx2(const uint8_t *x, int64_t n,
							  const __m256i *p, bool s8y, uint8_t *y)
{
	int64_t i = 0;

	for (; i + 32 <= n; i += 32)
		_mm256_storeu_si256((__m256i *)(y + i),
				    qmv_aff32(_mm256_loadu_si256((const __m256i *)(x + i)), p, s8y));
	if (i < n) {
		uint8_t b[32] = { 0 };

		memcpy(b, x + i, n - i);
		_mm256_storeu_si256((__m256i *)b,
				    qmv_aff32(_mm256_loadu_si256((const __m256i *)b), p, s8y));
		memcpy(y + i, b, n - i);
	}
}

/* Parameters of qmv_aff_avx2 for sources s[0..4) (byte k of 4: s[k]);
 * the zero point is the sink's, one per output. */
__attribute__((target("avx2"))) static void qmv_aff_par(const struct qmv_out *o, const int *s,
							  __m256i *p)
{
	const struct qmv_aff *f[4] = { &o->aff[s[0]], &o->aff[s[1]], &o->aff[s[2]], &o->aff[s[3]] };

	p[0] = _mm256_setr_epi32(f[0]->m, f[1]->m, f[2]->m, f[3]->m, f[0]->m, f[1]->m, f[2]->m,
				 f[3]->m);
	p[1] = _mm256_setr_epi32(f[0]->r, f[1]->r, f[2]->r, f[3]->r, f[0]->r, f[1]->r, f[2]->r,
				 f[3]->r);
	p[2] = _mm256_setr_epi32(f[0]->sh, f[1]->sh, f[2]->sh, f[3]->sh, f[0]->sh, f[1]->sh,
				 f[2]->sh, f[3]->sh);
	p[3] = _mm256_set1_epi32((int32_t)((uint32_t)f[0]->flip | (uint32_t)f[1]->flip << 8 |
					   (uint32_t)f[2]->flip << 16 | (uint32_t)f[3]->flip << 24));
	p[4] = _mm256_set1_epi16((int16_t)f[0]->zp);
}

/* The fixed-point path runs (AVX2, tables fitted, switch on). */
static bool qmv_aff_use(const struct qmv_out *o)
{
	return o->aff && mi_quant_isa() == MI_QISA_AVX2 && mvaff_on();
}

/* y[i] = table s of output o at x[i], i < n. */
static void qmv_lut(const struct qmv_out *o, int s, const uint8_t *x, int64_t n, uint8_t *y)
{
	if (qmv_aff_use(o)) {
		int ss[4] = { s, s, s, s };
		__m256i p[5];

		qmv_aff_par(o, ss, p);
		qmv_aff_avx2(x, n, p, o->s8y, y);
	} else if (o->tel && n >= 32 && (x + n <= y || y + n <= x) &&
		   mi_quant_isa() == MI_QISA_AVX2 && mvlut_on()) {
		lut8_tel_pre(x, o->tel + (size_t)s * 256, n, y);
	} else {
		lut8_any(x, o->tab + (size_t)s * 256, n, y);
	}
}

/* Output bytes [b, e) of one sink: the runs they fall in. */
static void qmv_range(void *arg, int64_t b, int64_t e)
{
	const struct qmv_job *j = arg;
	const struct qmv_out *o = j->o;
	int lo = 0, hi = o->nruns - 1;

	while (lo < hi) { /* last run starting at or before b */
		int mid = (lo + hi + 1) / 2;

		if (o->runs[mid].dst <= b)
			lo = mid;
		else
			hi = mid - 1;
	}
	for (int r = lo; b < e; r++) {
		const struct qmv_run *u = &o->runs[r];
		int64_t s = b - u->dst, cnt = u->len - s < e - b ? u->len - s : e - b;
		const uint8_t *x = j->x[u->src] + u->off + s;

		if (o->deq) {
			const struct qact *a = &o->deq[u->src];

			mi_dequantize(x, a->dtype, cnt, a->scale, a->zp, (float *)j->y + b);
		} else if (o->ident[u->src])
			memcpy(j->y + b, x, cnt);
		else
			qmv_lut(o, u->src, x, cnt, j->y + b);
		b += cnt;
	}
}

/* 16 pixels of 4 channel rows into C4 quads (64 bytes). */
static inline void qmv_c4_16(const uint8_t *r0, const uint8_t *r1, const uint8_t *r2,
			     const uint8_t *r3, uint8_t *y)
{
	__m128i a = _mm_loadu_si128((const __m128i *)r0), b = _mm_loadu_si128((const __m128i *)r1);
	__m128i c = _mm_loadu_si128((const __m128i *)r2), d = _mm_loadu_si128((const __m128i *)r3);
	__m128i abl = _mm_unpacklo_epi8(a, b), abh = _mm_unpackhi_epi8(a, b);
	__m128i cdl = _mm_unpacklo_epi8(c, d), cdh = _mm_unpackhi_epi8(c, d);

	_mm_storeu_si128((__m128i *)y, _mm_unpacklo_epi16(abl, cdl));
	_mm_storeu_si128((__m128i *)(y + 16), _mm_unpackhi_epi16(abl, cdl));
	_mm_storeu_si128((__m128i *)(y + 32), _mm_unpacklo_epi16(abh, cdh));
	_mm_storeu_si128((__m128i *)(y + 48), _mm_unpackhi_epi16(abh, cdh));
}

#define QMV_C4_PX 256 /* pixels per step: 4 rows of bytes on the stack */

/* C4 output: quads [b, e) of [n * c / 4], each 4 planes interleaved. */
static void qmv_c4_range(void *arg, int64_t b, int64_t e)
{
	const struct qmv_job *j = arg;
	const struct qmv_out *o = j->o;
	int64_t hw = o->hw;
	uint8_t tmp[4][QMV_C4_PX];

	if (qmv_aff_use(o)) { /* interleave, then requantize the quad in place */
		for (int64_t qd = b; qd < e; qd++) {
			uint8_t *y = j->y + qd * hw * 4;
			const uint8_t *row[4];
			int64_t p = 0;
			__m256i par[5];
			bool id = true;

			for (int k = 0; k < 4; k++) {
				row[k] = j->x[o->pl_src[qd * 4 + k]] + o->pl_off[qd * 4 + k];
				id &= o->ident[o->pl_src[qd * 4 + k]];
			}
			for (; p + 16 <= hw; p += 16)
				qmv_c4_16(row[0] + p, row[1] + p, row[2] + p, row[3] + p, y + p * 4);
			for (; p < hw; p++)
				for (int k = 0; k < 4; k++)
					y[p * 4 + k] = row[k][p];
			if (id)
				continue;
			qmv_aff_par(o, &o->pl_src[qd * 4], par);
			qmv_aff_avx2(y, hw * 4, par, o->s8y, y);
		}
		return;
	}
	for (int64_t qd = b; qd < e; qd++) {
		const uint8_t *row[4];
		uint8_t *y = j->y + qd * hw * 4;

		for (int64_t p0 = 0; p0 < hw; p0 += QMV_C4_PX) {
			int64_t np = hw - p0 < QMV_C4_PX ? hw - p0 : QMV_C4_PX, p = 0;

			for (int k = 0; k < 4; k++) {
				int s = o->pl_src[qd * 4 + k];
				const uint8_t *x = j->x[s] + o->pl_off[qd * 4 + k] + p0;

				if (o->ident[s]) {
					row[k] = x;
				} else {
					qmv_lut(o, s, x, np, tmp[k]);
					row[k] = tmp[k];
				}
			}
			for (; p + 16 <= np; p += 16)
				qmv_c4_16(row[0] + p, row[1] + p, row[2] + p, row[3] + p,
					  y + (p0 + p) * 4);
			for (; p < np; p++)
				for (int k = 0; k < 4; k++)
					y[(p0 + p) * 4 + k] = row[k][p];
		}
	}
}

static int qmv_run(struct mi_graph *g, struct mi_node *n)
{
	const struct qnode *q = n->priv;
	const struct qmove *m = q->mv;
	struct qmv_job j;

	for (int i = 0; i < n->ninputs; i++)
		j.x[i] = mi_in(g, n, i)->data;
	for (int k = 0; k < m->nout; k++) {
		j.o = &m->out[k];
		j.y = mi_out(g, n, k)->data;
		if (j.o->c4)
			par_range(q->nthreads, j.o->numel / (4 * j.o->hw),
				  ((32 << 10) + 4 * j.o->hw - 1) / (4 * j.o->hw), qmv_c4_range, &j);
		else
			par_range(q->nthreads, j.o->numel, 32 << 10, qmv_range, &j);
	}
	return 0;
}

/* Output o can write C4: 4-D, channels a multiple of 4, every channel
 * plane one run (of one source, consecutive bytes). */
static int qmv_planes(const struct mi_tensor *t, struct qmv_out *o)
{
	int64_t np, r = 0;

	if (t->ndim != 4 || t->dims[1] % 4 || t->dims[2] * t->dims[3] <= 0)
		return 0;
	o->c = t->dims[1];
	o->hw = t->dims[2] * t->dims[3];
	np = t->dims[0] * o->c;
	o->pl_src = malloc(np * sizeof(int));
	o->pl_off = malloc(np * sizeof(int64_t));
	if (!o->pl_src || !o->pl_off)
		return -ENOMEM;
	for (int64_t i = 0; i < np; i++) {
		int64_t d = i * o->hw;

		while (r < o->nruns && o->runs[r].dst + o->runs[r].len <= d)
			r++;
		if (r == o->nruns || o->runs[r].dst + o->runs[r].len < d + o->hw) {
			free(o->pl_src);
			free(o->pl_off);
			o->pl_src = NULL;
			o->pl_off = NULL;
			return 0;
		}
		o->pl_src[i] = o->runs[r].src;
		o->pl_off[i] = o->runs[r].off + (d - o->runs[r].dst);
	}
	return 0;
}

/* n (moves on bytes) can write its output in C4 layout. */
static bool qmv_c4_writer(const struct mi_node *n)
{
	const struct qmove *m = ((const struct qnode *)n->priv)->mv;

	return m->nout == 1 && m->out[0].pl_src;
}

static void qmove_free(struct qmove *m)
{
	if (!m)
		return;
	for (int k = 0; k < m->nout; k++) {
		free(m->out[k].runs);
		free(m->out[k].tab);
		free(m->out[k].tel);
		free(m->out[k].aff);
		free(m->out[k].ident);
		free(m->out[k].pl_src);
		free(m->out[k].pl_off);
		free(m->out[k].deq);
	}
	free(m->orig_in);
	free(m->orig_out);
	free(m->killed);
	free(m->consts);
	free(m);
}

static void qmove_undo(struct mi_graph *g, struct mi_node *n, struct qmove *m)
{
	memcpy(n->inputs, m->orig_in, m->orig_nin * sizeof(int));
	n->ninputs = m->orig_nin;
	memcpy(n->outputs, m->orig_out, m->orig_nout * sizeof(int));
	n->noutputs = m->orig_nout;
	for (int i = 0; i < m->nconsts; i++)
		g->tensors[m->consts[i]].flags &= ~MI_TF_CONST;
	for (int i = 0; i < m->nkilled; i++) {
		struct mi_node *k = &g->nodes[m->killed[i]];

		k->dead = false;
		for (int o = 0; o < k->noutputs; o++)
			if (k->outputs[o] >= 0)
				g->tensors[k->outputs[o]].producer = m->killed[i];
	}
}

/* The sink's runs and tables; its sources get node inputs (ins). */
static int qmv_out_build(struct mvctx *c, const int64_t *org, int64_t numel, int *ins,
			 int *nin, struct qmv_out *o)
{
	int cap = 64, last = -1, loc = -1;

	o->numel = numel;
	o->runs = malloc(cap * sizeof(*o->runs));
	if (!o->runs)
		return -ENOMEM;
	for (int64_t i = 0; i < numel; i++) {
		int s = (int)(org[i] >> QMV_SHIFT);
		int64_t off = org[i] & (((int64_t)1 << QMV_SHIFT) - 1);
		struct qmv_run *u = o->nruns ? &o->runs[o->nruns - 1] : NULL;

		if (s != last) { /* at most QMV_MAXSRC (mv_nsrc_ok) */
			int k;

			for (k = 0; k < *nin && ins[k] != c->src_t[s]; k++)
				;
			if (k == *nin)
				ins[(*nin)++] = c->src_t[s];
			loc = k;
			last = s;
		}
		if (u && u->src == loc && u->off + u->len == off) {
			u->len++;
			continue;
		}
		if (o->nruns == cap) {
			struct qmv_run *nr = realloc(o->runs, 2 * cap * sizeof(*nr));

			if (!nr)
				return -ENOMEM;
			o->runs = nr;
			cap *= 2;
		}
		o->runs[o->nruns++] = (struct qmv_run){ i, off, 1, loc };
	}
	return 0;
}

/* Tables of output o for the node's inputs ins[0..nin) (sources). */
static int qmv_tables(struct mvctx *c, const int *ins, int nin, const struct qact *y,
		      struct qmv_out *o)
{
	o->tab = malloc((size_t)nin * 256);
	o->ident = calloc(nin, sizeof(bool));
	if (y)
		o->tel = malloc((size_t)nin * 256);
	if (!y)
		o->deq = malloc(nin * sizeof(*o->deq));
	if (!o->tab || !o->ident || (!y && !o->deq) || (y && !o->tel))
		return -ENOMEM;
	for (int k = 0; k < nin; k++) {
		const struct qact *a = NULL;
		uint8_t idx[256];
		float buf[256];

		for (int s = 0; s < c->nsrc; s++)
			if (c->src_t[s] == ins[k])
				a = &c->src_q[s];
		for (int b = 0; b < 256; b++)
			idx[b] = (uint8_t)b;
		if (!y) { /* the DequantizeLinear kernel's floats */
			o->deq[k] = *a;
			continue;
		}
		mi_dequantize(idx, a->dtype, 256, a->scale, a->zp, buf);
		mi_quantize_f32(buf, 256, y->scale, y->zp, y->dtype, o->tab + (size_t)k * 256);
		o->ident[k] = a->dtype == y->dtype;
		for (int b = 0; b < 256 && o->ident[k]; b++)
			o->ident[k] = o->tab[(size_t)k * 256 + b] == b;
		tel_make(o->tab + (size_t)k * 256, o->tel + (size_t)k * 256);
	}
	if (!y)
		return 0;
	o->s8y = y->dtype == MI_DT_INT8;
	o->aff = malloc(nin * sizeof(*o->aff));
	if (!o->aff)
		return -ENOMEM;
	for (int k = 0; k < nin; k++) {
		const struct qact *a = NULL;

		for (int s = 0; s < c->nsrc; s++)
			if (c->src_t[s] == ins[k])
				a = &c->src_q[s];
		if (!qmv_aff_fit(o->tab + (size_t)k * 256, a, y, &o->aff[k])) {
			free(o->aff);
			o->aff = NULL;
			break;
		}
	}
	return 0;
}

/* Move n's outputs come from at most QMV_MAXSRC sources (its inputs if it
 * writes a sink). */
static bool mv_nsrc_ok(const struct mvctx *c, const struct mi_node *n)
{
	int ids[QMV_MAXSRC], nid = 0, last = -1;

	for (int o = 0; o < n->noutputs; o++) {
		const struct mi_tensor *t = &c->g->tensors[n->outputs[o]];
		const int64_t *org = c->org[n->outputs[o]];

		for (int64_t i = 0, ne = mi_tensor_numel(t); i < ne; i++) {
			int s = (int)(org[i] >> QMV_SHIFT), k;

			if (s == last)
				continue;
			last = s;
			for (k = 0; k < nid && ids[k] != s; k++)
				;
			if (k < nid)
				continue;
			if (nid == QMV_MAXSRC)
				return false;
			ids[nid++] = s;
		}
	}
	return true;
}

/* Runs of consecutive source bytes shorter than QMV_MIN_RUN on average
 * (a Transpose of the last axis: runs of 1): a copy call per few bytes
 * costs more than DQ -> strided fp32 copy -> Q; those stay fp32. */
#define QMV_MIN_RUN 8

static bool mv_short_runs(const int64_t *org, int64_t n)
{
	int64_t runs = 1;

	for (int64_t i = 1; i < n; i++)
		runs += org[i] != org[i - 1] + 1;
	return runs * QMV_MIN_RUN > n;
}

/* A reader that needs no data (the shape only). */
static bool mv_shape_reader(const struct mi_node *n)
{
	return !n->domain[0] && (!strcmp(n->op_type, "Shape") || !strcmp(n->op_type, "Size"));
}

/* ... whose value was computed at plan time. */
static bool mv_shape_only(struct mi_graph *g, struct mi_node *n)
{
	return mv_shape_reader(n) && (mi_out(g, n, 0)->flags & MI_TF_SHAPEVAL) &&
	       mi_out(g, n, 0)->data;
}

/* Live readers of tensor t (their node indices into r, at most max). */
static int mv_readers(struct mi_graph *g, int t, int *r, int max)
{
	int nr = 0;

	for (int i = 0; i < g->nnodes; i++) {
		const struct mi_node *n = &g->nodes[i];
		bool reads = false;

		for (int k = 0; k < n->ninputs && !n->dead; k++)
			reads |= n->inputs[k] == t;
		if (reads && nr < max)
			r[nr] = i;
		nr += reads;
	}
	return nr;
}

/*
 * Move output t's QuantizeLinear qi needs no bytes written: every reader
 * of its output is a DequantizeLinear that mv_through() looked through,
 * read only by moves that run on bytes.  qi and those DQs go into kl.
 */
static bool mv_thru_sink(struct mvctx *c, int t, int qi, const bool *mov, const bool *keep,
			 int *kl, int *nkl)
{
	struct mi_graph *g = c->g;
	struct mi_node *qn = &g->nodes[qi];
	int u = qn->outputs[0], rd[16], nr, n0 = *nkl;
	struct qact qa;

	if (!through_on() || !q_params(g, qn, &qa) || (g->tensors[u].flags & MI_TF_OUTPUT) ||
	    !mv_all_src(c, c->org[t], mi_tensor_numel(&g->tensors[t]), &qa))
		return false;
	nr = mv_readers(g, u, rd, 16);
	if (nr < 1 || nr > 16)
		return false;
	for (int k = 0; k < nr; k++) {
		struct mi_node *d = &g->nodes[rd[k]];
		int rr[16], m, y = d->outputs[0];
		struct qact a;

		if (strcmp(d->op_type, "DequantizeLinear") || d->domain[0] || d->priv ||
		    d->inputs[0] != u || !act_params(g, d, 0, 1, 2, &a) || !same_q(&a, &qa) ||
		    (g->tensors[y].flags & MI_TF_OUTPUT) || c->state[y] <= 0)
			return false;
		m = mv_readers(g, y, rr, 16);
		if (m < 1 || m > 16)
			return false;
		for (int j = 0; j < m; j++)
			if ((!mov[rr[j]] || keep[rr[j]]) && !mv_shape_only(g, &g->nodes[rr[j]]))
				return false;
	}
	kl[(*nkl)++] = qi;
	for (int k = 0; k < nr; k++)
		kl[(*nkl)++] = rd[k];
	(void)n0;
	return true;
}

static int plan_moves(struct mi_graph *g)
{
	struct mvctx c = { .g = g };
	int nt = g->ntensors, nn = g->nnodes, err = 0, nmv = 0, *sinkq = NULL;
	bool *keep = NULL, *mov = NULL;
	struct qnode *first = NULL;
	int *dead = NULL, ndead = 0, *thr = NULL, nthr = 0, nf32 = 0, naff = 0;

	if (!move_on())
		return 0;
	c.org = calloc(nt, sizeof(*c.org));
	c.state = calloc(nt, 1);
	sinkq = malloc(nt * sizeof(int));
	keep = calloc(nn, sizeof(bool));
	mov = calloc(nn, sizeof(bool));
	dead = malloc(nn * sizeof(int));
	thr = malloc(nn * 17 * sizeof(int));
	if (!c.org || !c.state || !sinkq || !keep || !mov || !dead || !thr) {
		err = -ENOMEM;
		goto out;
	}
	/* moves whose every output comes from quantized sources */
	for (int p = 0; p < g->norder; p++) {
		struct mi_node *n = &g->nodes[g->order[p]];
		bool ok = mv_op(n);

		for (int o = 0; o < n->noutputs && ok; o++)
			ok = mv_origins(&c, n->outputs[o]) != NULL;
		mov[g->order[p]] = ok && mv_nsrc_ok(&c, n);
	}
	/* sinks: a move's output read by one per-tensor QuantizeLinear only
	 * (bytes), or by fp32 nodes / the graph's outputs (floats: the DQ's
	 * values; sinkq -2); with short runs (or MI_QUANT_MVF32=0 for the
	 * fp32 readers) the move keeps running in fp32, and so do the moves
	 * it reads */
	for (int t = 0; t < nt; t++)
		sinkq[t] = -1;
	for (int p = g->norder - 1; p >= 0; p--) {
		int ni = g->order[p];
		struct mi_node *n = &g->nodes[ni];

		if (!mov[ni])
			continue;
		for (int o = 0; o < n->noutputs; o++) {
			int t = n->outputs[o], nq = 0, qi = -1, other = 0;
			struct qact y;

			if (g->tensors[t].flags & MI_TF_OUTPUT)
				other++;
			for (int i = 0; i < nn; i++) {
				struct mi_node *r = &g->nodes[i];
				bool reads = false;

				for (int k = 0; k < r->ninputs && !r->dead; k++)
					reads |= r->inputs[k] == t;
				if (!reads || mv_shape_only(g, r))
					continue;
				if (mov[i] && !keep[i])
					continue;
				if (!strcmp(r->op_type, "QuantizeLinear") && !r->domain[0] &&
				    !r->priv && r->inputs[0] == t && q_params(g, r, &y)) {
					nq++;
					qi = i;
				} else {
					other++;
				}
			}
			if ((nq || other) && mv_short_runs(c.org[t], mi_tensor_numel(&g->tensors[t])))
				keep[ni] = true;
			else if (nq == 1 && !other &&
				 mv_thru_sink(&c, t, qi, mov, keep, thr, &nthr))
				continue; /* nobody needs its bytes */
			else if ((other || nq > 1) && mvf32_on())
				sinkq[t] = -2; /* fp32 readers: floats from the sources */
			else if (other || nq > 1)
				keep[ni] = true;
			else if (nq == 1)
				sinkq[t] = qi;
		}
		if (!keep[ni])
			continue;
		for (int k = 0; k < mv_ndata(n); k++) {
			int pr = g->tensors[n->inputs[k]].producer;

			if (pr >= 0 && mov[pr])
				keep[pr] = true;
		}
	}
	/* a kept move's sinks stay fp32 too (the node runs as it is) */
	for (int p = 0; p < g->norder; p++) {
		int ni = g->order[p];
		struct mi_node *n = &g->nodes[ni];

		if (!mov[ni] || !keep[ni])
			continue;
		for (int o = 0; o < n->noutputs; o++)
			sinkq[n->outputs[o]] = -1;
	}
	for (int p = 0; p < g->norder && !err; p++) {
		int ni = g->order[p], ins[QMV_MAXSRC], nin = 0, outs[MI_MAX_DIMS], nout = 0;
		struct mi_node *n = &g->nodes[ni];
		struct qnode *q;
		struct qmove *m;

		if (!mov[ni] || keep[ni])
			continue;
		for (int o = 0; o < n->noutputs; o++)
			if (sinkq[n->outputs[o]] != -1)
				outs[nout++] = o;
		if (!nout) {
			dead[ndead++] = ni;
			continue;
		}
		q = qnode_new(qmv_run);
		m = calloc(1, sizeof(*m));
		if (!q || !m) {
			free(q);
			free(m);
			err = -ENOMEM;
			break;
		}
		q->mv = m;
		m->orig_nin = n->ninputs;
		m->orig_nout = n->noutputs;
		m->orig_in = malloc(n->ninputs * sizeof(int));
		m->orig_out = malloc(n->noutputs * sizeof(int));
		m->killed = malloc(n->noutputs * sizeof(int));
		if (!m->orig_in || !m->orig_out || !m->killed) {
			qnode_free(q);
			err = -ENOMEM;
			break;
		}
		memcpy(m->orig_in, n->inputs, n->ninputs * sizeof(int));
		memcpy(m->orig_out, n->outputs, n->noutputs * sizeof(int));
		m->nout = nout;
		for (int k = 0; k < nout && !err; k++) {
			int t = n->outputs[outs[k]];
			err = qmv_out_build(&c, c.org[t], mi_tensor_numel(&g->tensors[t]), ins, &nin,
					    &m->out[k]);
		}
		for (int k = 0; k < nout && !err; k++) {
			int t = n->outputs[outs[k]];
			struct qact y;

			if (sinkq[t] < 0) {
				err = qmv_tables(&c, ins, nin, NULL, &m->out[k]);
				nf32++;
				continue;
			}
			q_params(g, &g->nodes[sinkq[t]], &y);
			err = qmv_tables(&c, ins, nin, &y, &m->out[k]);
			if (!err)
				err = qmv_planes(&g->tensors[t], &m->out[k]);
			naff += m->out[k].aff != NULL;
		}
		if (!err && nin > n->ninputs) {
			int *ni2 = realloc(n->inputs, nin * sizeof(int));

			if (!ni2)
				err = -ENOMEM;
			else
				n->inputs = ni2;
		}
		if (err) {
			qnode_free(q);
			break;
		}
		/* rewire: inputs the sources, outputs the sinks' bytes */
		memcpy(n->inputs, ins, nin * sizeof(int));
		n->ninputs = nin;
		for (int k = 0; k < nout; k++) {
			int t = m->orig_out[outs[k]], qi = sinkq[t];
			struct mi_node *qn = qi >= 0 ? &g->nodes[qi] : NULL;

			n->outputs[k] = t;
			if (!qn)
				continue;
			n->outputs[k] = qn->outputs[0];
			g->tensors[qn->outputs[0]].producer = ni;
			qn->dead = true;
			m->killed[m->nkilled++] = qi;
		}
		n->noutputs = nout;
		n->priv = q;
		if (!first)
			first = q;
		nmv++;
	}
	/* the moves that only fed others, and the Q -> DQ pairs between moves
	 * that nobody needs: dead, revived with the first */
	if (!err && first && ndead + nthr) {
		int *k = realloc(first->mv->killed,
				 (first->mv->nkilled + ndead + nthr) * sizeof(int));

		if (!k) {
			err = -ENOMEM;
		} else {
			first->mv->killed = k;
			for (int i = 0; i < ndead + nthr; i++) {
				int x = i < ndead ? dead[i] : thr[i - ndead];

				if (g->nodes[x].dead)
					continue;
				g->nodes[x].dead = true;
				k[first->mv->nkilled++] = x;
			}
		}
	}
	/* Shape readers of tensors no longer written: their values were
	 * computed at plan time; dead, their outputs constants meanwhile */
	for (int i = 0; i < nn && !err && first; i++) {
		struct mi_node *r = &g->nodes[i];
		int t = r->ninputs ? r->inputs[0] : -1, pr;
		bool made = false;

		if (r->dead || !mv_shape_reader(r) || t < 0)
			continue;
		pr = g->tensors[t].producer;
		for (int o = 0; pr >= 0 && !g->nodes[pr].dead && o < g->nodes[pr].noutputs; o++)
			made |= g->nodes[pr].outputs[o] == t;
		if (made || pr < 0)
			continue;
		int *k = realloc(first->mv->killed, (first->mv->nkilled + 1) * sizeof(int));
		int *cs = realloc(first->mv->consts, (first->mv->nconsts + 1) * sizeof(int));

		if (k)
			first->mv->killed = k;
		if (cs)
			first->mv->consts = cs;
		if (!k || !cs) {
			err = -ENOMEM;
			break;
		}
		r->dead = true;
		k[first->mv->nkilled++] = i;
		if (!(mi_out(g, r, 0)->flags & MI_TF_CONST)) {
			mi_out(g, r, 0)->flags |= MI_TF_CONST;
			cs[first->mv->nconsts++] = r->outputs[0];
		}
	}
	if (nmv && getenv("MI_QUANT_VERBOSE") && *getenv("MI_QUANT_VERBOSE") == '1')
		fprintf(stderr, "metainfer: int8: %d moves on bytes (%d absorbed, %d Q/DQ between them, %d fp32 outputs)\n",
			nmv, first ? ndead : 0, first ? nthr : 0, nf32);
	if (nmv && getenv("MI_QUANT_VERBOSE") && *getenv("MI_QUANT_VERBOSE") == '1')
		fprintf(stderr, "metainfer: int8: %d move outputs requantized in fixed point\n", naff);
	if (!err)
		err = nmv;
out:
	for (int t = 0; t < nt && c.org; t++)
		free(c.org[t]);
	free(c.org);
	free(c.src_t);
	free(c.src_q);
	free(c.state);
	free(sinkq);
	free(keep);
	free(mov);
	free(dead);
	free(thr);
	return err;
}

/* ---- Concat of quantized tensors ------------------------------------------- */

#define QCAT_MAX 16

struct qcat {
	int n, axis;
	struct qact in[QCAT_MAX];
	struct qact y;
};

/* y = Q(DQ(x)) elementwise (the reference ops' float operations), or a
 * copy when the parameters are equal. */
static void requant_copy(const uint8_t *x, const struct qact *a, const struct qact *y,
			 int64_t n, uint8_t *out)
{
	float buf[1024];

	if (a->scale == y->scale && a->zp == y->zp && a->dtype == y->dtype) {
		memcpy(out, x, n);
		return;
	}
	if (n >= 256) {
		/* 256 possible bytes: requantize them once, then look up */
		uint8_t idx[256], tab[256];

		for (int k = 0; k < 256; k++)
			idx[k] = (uint8_t)k;
		mi_dequantize(idx, a->dtype, 256, a->scale, a->zp, buf);
		mi_quantize_f32(buf, 256, y->scale, y->zp, y->dtype, tab);
		lut8_any(x, tab, n, out);
		return;
	}
	for (int64_t i = 0; i < n; i += 1024) {
		int64_t c = n - i < 1024 ? n - i : 1024;

		mi_dequantize(x + i, a->dtype, c, a->scale, a->zp, buf);
		mi_quantize_f32(buf, c, y->scale, y->zp, y->dtype, out + i);
	}
}

struct qcat_job {
	const struct qcat *c;
	const uint8_t *x[QCAT_MAX];
	int64_t inner[QCAT_MAX], row; /* bytes per input / output per outer index */
	uint8_t *out;
};

/* Output bytes [b, e): the pieces of the inputs they copy, as in order. */
static void qcat_range(void *arg, int64_t b, int64_t e)
{
	const struct qcat_job *j = arg;

	while (b < e) {
		int64_t o = b / j->row, r = b - o * j->row;
		int i = 0;

		while (r >= j->inner[i])
			r -= j->inner[i++];
		int64_t cnt = j->inner[i] - r < e - b ? j->inner[i] - r : e - b;

		requant_copy(j->x[i] + o * j->inner[i] + r, &j->c->in[i], &j->c->y, cnt,
			     j->out + b);
		b += cnt;
	}
}

static int qcat_run(struct mi_graph *g, struct mi_node *n)
{
	struct qnode *q = n->priv;
	const struct qcat *c = q->cat;
	struct mi_tensor *y = mi_out(g, n, 0);
	struct qcat_job j = { .c = c, .out = y->data };

	for (int i = 0; i < c->n; i++) {
		struct mi_tensor *x = mi_in(g, n, i);

		j.x[i] = x->data;
		j.inner[i] = mi_ops_prod(x->dims, c->axis, x->ndim);
		j.row += j.inner[i];
	}
	/* split like a byte table (copies and lookups, ~2-3 us per range); each
	 * output byte is the same function of its input byte either way */
	if (j.row > 0)
		par_range(q->nthreads, mi_tensor_numel(y), 32 << 10, qcat_range, &j);
	return 0;
}

static int try_qconcat(struct mi_graph *g, struct mi_node *n)
{
	struct chain ch;
	struct qcat *c;
	struct qnode *q;
	struct mi_tensor *y = mi_out(g, n, 0);
	int axis, xs[QCAT_MAX];

	if (strcmp(n->op_type, "Concat") || n->domain[0] || n->noutputs != 1 ||
	    n->ninputs < 1 || n->ninputs > QCAT_MAX || !mi_tensor_shape_known(y))
		return 0;
	axis = (int)mi_attr_int(n, "axis", 0);
	if (axis < 0)
		axis += y->ndim;
	if (axis < 0 || axis >= y->ndim)
		return 0;
	follow_chain(g, n->outputs[0], &ch);
	if (!ch.q || ch.act)
		return skip(n, "not followed by a QuantizeLinear");
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->n = n->ninputs;
	c->axis = axis;
	c->y = ch.y;
	for (int i = 0; i < n->ninputs; i++) {
		struct mi_node *d = producer(g, n->inputs[i], "DequantizeLinear");

		if (!d || !act_params(g, d, 0, 1, 2, &c->in[i]) ||
		    !mi_tensor_shape_known(mi_in(g, n, i))) {
			free(c);
			return skip(n, "inputs are not per-tensor uint8/int8 DequantizeLinear");
		}
		xs[i] = c->in[i].t;
	}
	q = qnode_new(qcat_run);
	if (!q) {
		free(c);
		return -ENOMEM;
	}
	q->cat = c;
	n->priv = q;
	/* rewire all inputs (undo keeps in0/in1; save the rest) */
	q->cat_orig = malloc(n->ninputs * sizeof(int));
	if (!q->cat_orig) {
		n->priv = NULL;
		qnode_free(q);
		return -ENOMEM;
	}
	memcpy(q->cat_orig, n->inputs, n->ninputs * sizeof(int));
	rewire_n(g, n, xs, n->ninputs, &ch);
	return 0;
}

/*
 * int8 conv -> int8 conv through a tensor nobody else reads: the producer
 * writes it in C4 layout and the consumer skips its reorder pass (a 1x1
 * consumer reads it directly).  MI_QUANT_C4=0 disables this.
 */
/* p is an int8 conv that can write its output in C4 layout. */
static bool c4_writer(const struct mi_node *p)
{
	const struct qnode *qp = p->priv;

	return qp->is_conv && (qp->ep.mode == MI_QOUT_U8 || qp->ep.mode == MI_QOUT_S8) &&
	       !(qp->cv.s.oc % 4) && (qp->cv.depthwise || !((qp->cv.s.oc / qp->cv.s.group) % 4));
}

MI_QUANT_SWITCH(qdwc4, "MI_QUANT_QDWC4")

/*
 * p, a standalone QuantizeLinear, reads the output of an fp32 Conv (not
 * lib/quant's), which the NCHWc pass runs blocked: the Q then writes C4
 * from blocked floats by 32-bit moves (qdq_q4), as cheap as its planar
 * write.  An int8 depthwise conv may read such a Q's C4 bytes: otherwise
 * the Q writes planar bytes, which it reads from planar floats, and the
 * fp32 conv writing them ends its blocked chain, taking the chain's
 * earlier convs, residual Adds and fused depthwise convs back to NCHW
 * (MobileNetV2 min_cosine features.2-3).  MI_QUANT_QDWC4=0 turns it off.
 */
static bool q_of_fp32_conv(struct mi_graph *g, const struct mi_node *p)
{
	const struct qnode *qp = p->priv;
	int pi;

	if (p->dead || !mi_quant_node_is(p) || !qdq_like(qp) || qp->qdq_deq || !qdwc4_on() ||
	    !qdq_layout_on(2))
		return false;
	pi = g->tensors[p->inputs[0]].producer;
	/* through the activations the NCHWc pass fuses into the conv */
	for (int hop = 0; hop < 3 && pi >= 0; hop++) {
		struct mi_node *a = &g->nodes[pi];
		float lo, hi;
		int si;

		if (a->dead || mi_quant_node_is(a) || a->domain[0])
			return false;
		if (!strcmp(a->op_type, "Conv"))
			return true;
		if (!strcmp(a->op_type, "Mul") && a->ninputs == 2) { /* x * Sigmoid(x) */
			for (int k = 0; k < 2; k++) {
				si = g->tensors[a->inputs[k]].producer;
				if (si >= 0 && !strcmp(g->nodes[si].op_type, "Sigmoid") &&
				    g->nodes[si].inputs[0] == a->inputs[1 - k])
					break;
				si = -1;
			}
			if (si < 0)
				return false;
			pi = g->tensors[g->nodes[si].inputs[0]].producer;
			continue;
		}
		if (a->ninputs < 1 || mi_cpu_act_of(g, a, &lo, &hi) <= 0)
			return false;
		pi = g->tensors[a->inputs[0]].producer;
	}
	return false;
}

/* Every reader of dequantizing node n's output is an fp32 Conv (its data
 * input), which the NCHWc pass runs blocked. */
static bool qdq_convs_read(struct mi_graph *g, const struct mi_node *n)
{
	const struct qnode *q = n->priv;
	int uses = 0;

	if (!mi_quant_node_is(n) || !qdq_like(q) || !q->qdq_deq)
		return false;
	for (int i = 0; i < g->nnodes; i++) {
		const struct mi_node *c = &g->nodes[i];

		for (int k = 0; k < c->ninputs && !c->dead; k++) {
			if (c->inputs[k] != n->outputs[0])
				continue;
			if (k || mi_quant_node_is(c) || c->domain[0] || strcmp(c->op_type, "Conv"))
				return false;
			uses++;
		}
	}
	return uses > 0;
}

/* c, an int8 conv, can read its input (t) in C4 layout: a dense conv, or
 * (AVX2) a depthwise conv that writes C4 too (ok: the tensors in C4) and
 * reads an int8 conv's output (conv_in; a QuantizeLinear writing C4 from
 * planar fp32 costs more than the depthwise conv saves) or a Q of an fp32
 * conv (q_of_fp32_conv). */
static bool c4_reader(const struct mi_node *c, int t, const bool *ok, bool conv_in)
{
	const struct qnode *qc = c->priv;

	if (!qc->is_conv || c->ninputs != 1 || c->inputs[0] != t)
		return false;
	if (qc->cv.depthwise)
		return conv_in && ok[c->outputs[0]] && mi_qconv_dw_c4(&qc->cv, &qc->ep);
	return !((qc->cv.s.c / qc->cv.s.group) % 4);
}

/*
 * An int8 conv's output read only by DequantizeLinear nodes whose floats
 * go to nodes that read planar floats only (not the NCHWc pass's: ReduceMean,
 * Flatten, Gemm, ...; ShuffleNetV2's conv5 -> DQ -> ReduceMean): from C4
 * the DQ transposes (mi_dequantize_c4, 0.041 ms for 1024x7x7), from planes
 * it is one AVX2 pass (0.005 ms), and the conv writes planes as fast.
 * MI_QUANT_DQPL=0: such a tensor may still be C4.
 */
MI_QUANT_SWITCH(dqpl, "MI_QUANT_DQPL")

static bool dq_planar_reader(struct mi_graph *g, const struct mi_node *d)
{
	static const char *const ops[] = { "ReduceMean", "ReduceMax", "ReduceSum", "Flatten",
					   "Reshape", "Gemm", "MatMul", "Transpose", "Squeeze",
					   "Softmax", NULL };
	const struct qnode *q = d->priv;
	int uses = 0;

	if (!mi_quant_node_is(d) || !qdq_like(q) || !q->qdq_deq || d->noutputs != 1 ||
	    (g->tensors[d->outputs[0]].flags & MI_TF_OUTPUT))
		return false;
	for (int i = 0; i < g->nnodes; i++) {
		const struct mi_node *c = &g->nodes[i];
		bool known = false;

		for (int k = 0; k < c->ninputs && !c->dead; k++) {
			if (c->inputs[k] != d->outputs[0])
				continue;
			if (mi_quant_node_is(c) || c->domain[0])
				return false;
			for (int o = 0; ops[o] && !known; o++)
				known = !strcmp(c->op_type, ops[o]);
			if (!known)
				return false;
			uses++;
		}
	}
	return uses > 0;
}

/* How a node can take part in the C4 layout: a conv (writer and/or reader),
 * or a node indifferent to the layout as long as all its quantized inputs
 * and its output share it: int8 Add of equal shapes, byte table, MaxPool
 * (mi_qmaxpool_plane_c4), channel Concat (each input a contiguous block of
 * every image in both layouts
 * when channel counts are multiples of 4). */
enum { C4_NONE, C4_CONV, C4_SAME, C4_QDQ, C4_READ, C4_WRITE };

static int sec4_cur = -1;

/* MI_QUANT_SEC4=0: the SE gate Mul and GlobalAveragePool read planes only. */
static bool sec4_on(void)
{
	return mi_quant_switch(&sec4_cur, "MI_QUANT_SEC4");
}

/* GlobalAveragePool planes apart per thread: at most 64 threads' 16 planes */
#define QGAP_C4_MAX 4096

/* An SE gate Mul whose output an int8 conv reads in C4 layout. */
static bool se_c4_ok(struct mi_graph *g, struct mi_node *p)
{
	struct qnode *qp = p->priv, *qc;
	struct mi_node *c;
	int ci;

	if (p->dead || !mi_quant_node_is(p) || qp->hdr.run != qse_run ||
	    mi_out(g, p, 0)->dims[1] % 4)
		return false;
	ci = mi_graph_sole_consumer(g, p->outputs[0]);
	if (ci < 0)
		return false;
	c = &g->nodes[ci];
	qc = c->priv;
	return mi_quant_node_is(c) && qc->is_conv && c->inputs[0] == p->outputs[0] &&
	       !qc->cv.depthwise && !((qc->cv.s.c / qc->cv.s.group) % 4);
}

static int c4_role(struct mi_graph *g, struct mi_node *n)
{
	const struct qnode *q = n->priv;

	if (n->dead || !mi_quant_node_is(n))
		return C4_NONE;
	if (q->is_conv)
		return C4_CONV;
	/* a standalone 4-D Q writes, a DQ reads, either layout */
	if (qdq_like(q))
		return qdq_layout_on(1) ? C4_QDQ : C4_NONE;
	/* moves on bytes: read planes, may write C4 */
	if (q->hdr.run == qmv_run)
		return qmv_c4_writer(n) && mvc4_on() ? C4_WRITE : C4_NONE;
	if (q->hdr.run == qadd_run) {
		const struct mi_tensor *y = mi_out(g, n, 0);

		for (int k = 0; k < n->ninputs; k++) {
			const struct mi_tensor *x = mi_in(g, n, k);

			if (x->ndim != y->ndim || memcmp(x->dims, y->dims, y->ndim * sizeof(y->dims[0])))
				return C4_NONE;
		}
		return C4_SAME;
	}
	if ((q->hdr.run == qlut_run && q->lut8) || (q->hdr.run == qcat_run && q->cat->axis == 1) ||
	    q->hdr.run == qpool_run)
		return C4_SAME;
	/* reads input 0 in C4, writes planes (the SE Mul: C4 for its conv) */
	if (sec4_on() && ((q->hdr.run == qgap_run && q->gap_hw <= QGAP_C4_MAX) ||
			  (q->hdr.run == qse_run && se_c4_ok(g, n))))
		return C4_READ;
	return C4_NONE;
}

/*
 * Which int8 activations are stored in C4 layout: the largest set of 4-D
 * tensors (channels a multiple of 4, not graph outputs) whose producer
 * writes C4 and whose readers all read it, where a layout-indifferent node
 * keeps its inputs and output in one layout.  Found by removing tensors
 * that break a rule until none does.
 */
static void plan_c4_tensors(struct mi_graph *g)
{
	int nt = g->ntensors;
	bool *ok = calloc(nt, sizeof(bool));
	int *prod = malloc(nt * sizeof(int));
	bool changed = true;

	if (!ok || !prod) {
		free(ok);
		free(prod);
		return;
	}
	for (int t = 0; t < nt; t++) {
		const struct mi_tensor *x = &g->tensors[t];

		prod[t] = -1;
		ok[t] = x->ndim == 4 && mi_tensor_shape_known(x) && !(x->dims[1] % 4) &&
			!(x->flags & MI_TF_OUTPUT) &&
			(x->dtype == MI_DT_UINT8 || x->dtype == MI_DT_INT8);
	}
	for (int i = 0; i < g->nnodes; i++)
		if (!g->nodes[i].dead && c4_role(g, &g->nodes[i]) != C4_NONE &&
		    c4_role(g, &g->nodes[i]) != C4_READ)
			prod[g->nodes[i].outputs[0]] = i;
	for (int t = 0; t < nt; t++)
		if (ok[t] && (prod[t] < 0 || (c4_role(g, &g->nodes[prod[t]]) == C4_CONV &&
					      !c4_writer(&g->nodes[prod[t]]))))
			ok[t] = false;
	/* a Q read only by DQs: nothing gains from C4 there, unless both
	 * fp32 sides are blocked chains (q_of_fp32_conv, qdq_convs_read):
	 * C4 <-> blocked are 32-bit moves, planar <-> blocked byte
	 * transposes, and a planar Q ends its producer's chain */
	for (int t = 0; t < nt; t++) {
		bool other = false, blk;

		if (!ok[t] || c4_role(g, &g->nodes[prod[t]]) != C4_QDQ)
			continue;
		blk = q_of_fp32_conv(g, &g->nodes[prod[t]]);
		for (int i = 0; i < g->nnodes && !other; i++) {
			struct mi_node *n = &g->nodes[i];

			for (int k = 0; k < n->ninputs && !n->dead; k++)
				if (n->inputs[k] == t && c4_role(g, n) != C4_QDQ)
					other = true;
				else if (n->inputs[k] == t && blk)
					blk = qdq_convs_read(g, n);
		}
		ok[t] = other || blk;
	}
	for (int t = 0; t < nt && dqpl_on(); t++) {
		bool dq_only = true;
		int uses = 0;

		if (!ok[t] || c4_role(g, &g->nodes[prod[t]]) != C4_CONV)
			continue;
		for (int i = 0; i < g->nnodes && dq_only; i++) {
			struct mi_node *n = &g->nodes[i];

			for (int k = 0; k < n->ninputs && !n->dead; k++)
				if (n->inputs[k] == t) {
					dq_only &= dq_planar_reader(g, n);
					uses++;
				}
		}
		if (dq_only && uses)
			ok[t] = false;
	}
	while (changed) {
		changed = false;
		for (int i = 0; i < g->nnodes; i++) {
			struct mi_node *n = &g->nodes[i];
			int role = c4_role(g, n);
			bool all = role == C4_SAME && ok[n->outputs[0]];

			if (n->dead)
				continue;
			for (int k = 0; k < n->ninputs; k++) {
				int t = n->inputs[k];
				bool conv_in = prod[t] >= 0 &&
					       (c4_role(g, &g->nodes[prod[t]]) == C4_CONV ||
						q_of_fp32_conv(g, &g->nodes[prod[t]]));

				if (!ok[t] && role == C4_SAME)
					all = false;
				if (ok[t] && (role == C4_NONE || role == C4_WRITE || (role == C4_READ && k) ||
					      (role == C4_CONV && !c4_reader(n, t, ok, conv_in)))) {
					ok[t] = false; /* a reader that needs the planar layout */
					changed = true;
				}
			}
			if (role != C4_SAME || all)
				continue;
			for (int k = 0; k < n->ninputs; k++)
				changed |= ok[n->inputs[k]];
			changed |= ok[n->outputs[0]];
			for (int k = 0; k < n->ninputs; k++)
				ok[n->inputs[k]] = false;
			ok[n->outputs[0]] = false;
		}
	}
	int nc4 = 0, nmvc4 = 0;

	for (int t = 0; t < nt; t++)
		nc4 += ok[t];
	for (int i = 0; i < g->nnodes; i++) {
		struct mi_node *n = &g->nodes[i];
		struct qnode *q = n->priv;

		if (n->dead || !mi_quant_node_is(n))
			continue;
		if (q->hdr.run == qpool_run && ok[n->outputs[0]])
			q->in_c4 = true; /* and writes C4 */
		if (c4_role(g, n) == C4_READ && ok[n->inputs[0]]) {
			q->se_in_c4 = true;
			if (q->hdr.run == qgap_run &&
			    (int64_t)QGAP_PLANES * q->gap_hw * 64 > shared_need)
				shared_need = (int64_t)QGAP_PLANES * q->gap_hw * 64;
		}
		if (c4_role(g, n) == C4_SAME)
			q->px_c4 = ok[n->outputs[0]];
		if (qdq_like(q))
			q->qdq_c4 = ok[n->inputs[0]] || ok[n->outputs[0]];
		if (c4_role(g, n) == C4_WRITE && ok[n->outputs[0]]) {
			q->mv->out[0].c4 = true;
			nmvc4++;
		}
		if (c4_role(g, n) != C4_CONV)
			continue;
		if (ok[n->outputs[0]])
			q->ep.out_c4 = true;
		if (ok[n->inputs[0]])
			q->in_c4 = true;
	}
	if (getenv("MI_QUANT_VERBOSE") && *getenv("MI_QUANT_VERBOSE") == '1')
		fprintf(stderr, "metainfer: int8: %d activations in C4 layout (%d written by moves)\n",
			nc4, nmvc4);
	free(ok);
	free(prod);
}

static void plan_c4(struct mi_graph *g)
{
	const char *e = getenv("MI_QUANT_C4");

	if (e && *e == '0')
		return;
	plan_c4_tensors(g);
	/* SE gate Muls feeding an int8 conv (elementwise: any layout) */
	for (int i = 0; i < g->nnodes; i++) {
		struct mi_node *p = &g->nodes[i];

		if (!se_c4_ok(g, p))
			continue;
		((struct qnode *)p->priv)->se_c4 = true;
		((struct qnode *)g->nodes[mi_graph_sole_consumer(g, p->outputs[0])].priv)->in_c4 = true;
	}
}

/*
 * Readers of tensor t that split their work by channels on the threads
 * (depth 0: also through one byte table): int8 depthwise convs on maps
 * of fewer than 32 pixel vectors with 4+ channel quads per thread
 * (dwt_run), reading t planar.  A table keeps its layout; its planes
 * are shorter than 128 bytes per thread, so par_rows cuts the tensor in
 * flat ranges, i.e. channel ranges too.
 */
static bool chan_readers(struct mi_graph *g, int t, int depth)
{
	int nr = 0;

	for (int i = 0; i < g->nnodes; i++) {
		struct mi_node *n = &g->nodes[i];
		const struct qnode *q = n->priv;
		bool reads = false;

		for (int k = 0; k < n->ninputs && !n->dead; k++)
			reads |= n->inputs[k] == t;
		if (!reads)
			continue;
		nr++;
		if (!mi_quant_node_is(n))
			return false;
		if (q->hdr.run == qlut_run && q->lut8 && depth == 0 && !q->px_c4) {
			const struct mi_tensor *y = mi_out(g, n, 0);

			if (y->ndim != 4 || y->dims[2] * y->dims[3] >= 128 * q->nthreads ||
			    !chan_readers(g, n->outputs[0], 1))
				return false;
			continue;
		}
		if (!q->is_conv || !q->cv.depthwise || q->in_c4 || n->inputs[0] != t ||
		    (q->cv.s.oh * q->cv.s.ow + 15) / 16 >= 32 || q->cv.s.c < 16 * q->nthreads)
			return false;
	}
	return nr > 0;
}

/*
 * A 1x1 conv reading its C4 input in place, on a small map, whose output
 * only channel-split readers take: with MI_QCONV_CHAN each thread computes
 * its chunk of output channels over the whole map, so the depthwise conv
 * after it reads the planes its own core wrote (split by pixels, half of
 * them crossed cores: ~10-40 ns per cache line on the benchmark VM).
 * MI_QUANT_CHAN=0 turns it off.
 */
static void plan_chan(struct mi_graph *g)
{
	const char *e = getenv("MI_QUANT_CHAN");
	int nchan = 0;

	if (e && *e == '0')
		return;
	for (int i = 0; i < g->nnodes; i++) {
		struct mi_node *n = &g->nodes[i];
		struct qnode *q = n->priv;

		if (n->dead || !mi_quant_node_is(n) || !q->is_conv || q->cv.depthwise ||
		    !q->in_c4 || !q->cv.direct1x1 || q->ep.out_c4 || q->nthreads < 2 ||
		    q->cv.s.oh * q->cv.s.ow >= 256)
			continue;
		q->chan = chan_readers(g, n->outputs[0], 0);
		nchan += q->chan;
	}
	if (nchan && getenv("MI_QUANT_VERBOSE") && *getenv("MI_QUANT_VERBOSE") == '1')
		fprintf(stderr, "metainfer: int8: %d convs split by output channels\n", nchan);
}

/* DequantizeLinear nodes nobody reads any more (every consumer now takes
 * the quantized tensor): dead, undone with the node that bypassed them. */
static void kill_unused_dq(struct mi_graph *g)
{
	for (int i = 0; i < g->nnodes; i++) {
		struct mi_node *d = &g->nodes[i];
		struct qnode *owner = NULL;
		bool used = false;

		if (d->dead || strcmp(d->op_type, "DequantizeLinear") || d->domain[0] ||
		    (g->tensors[d->outputs[0]].flags & MI_TF_OUTPUT))
			continue;
		for (int j = 0; j < g->nnodes && !used; j++) {
			struct mi_node *n = &g->nodes[j];

			if (n->dead)
				continue;
			for (int k = 0; k < n->ninputs; k++) {
				if (n->inputs[k] == d->outputs[0])
					used = true;
				if (n->inputs[k] == d->inputs[0] && mi_quant_node_is(n) &&
				    !owner && ((struct qnode *)n->priv)->nkilled < 8)
					owner = n->priv;
			}
		}
		if (!used && owner) {
			d->dead = true;
			owner->killed[owner->nkilled++] = i;
		}
	}
}

int mi_quant_plan(struct mi_graph *g, const struct mi_cpu_opts *opts)
{
	struct qshared *sh;
	int err = 0, nq = 0, nint8;
	bool seg;

	if (opts && opts->reference)
		return 0;
	if (getenv("MI_NO_INT8") && *getenv("MI_NO_INT8") == '1')
		return 0;
	pool_threads = opts && opts->nthreads > 0 ? opts->nthreads : mi_cpu_ncores();
	split_all = getenv("MI_QUANT_SPLIT_ALL") && *getenv("MI_QUANT_SPLIT_ALL") == '1';
	seg = !getenv("MI_QUANT_GAP") || *getenv("MI_QUANT_GAP") != '0';
	mi_quant_set_parallel(pool_for, pool_threads);
	shared_need = 0;
	for (int p = 0; p < g->norder && !err; p++) {
		struct mi_node *n = &g->nodes[g->order[p]];

		if (n->dead || n->priv)
			continue;
		err = try_qlinear(g, n);
		if (!err && !n->priv)
			err = try_qdq(g, n);
		if (!err && !n->priv)
			err = try_qadd(g, n);
		if (!err && !n->priv)
			err = try_qpool(g, n);
		if (!err && !n->priv)
			err = try_qconcat(g, n);
		if (!err && !n->priv)
			err = try_qlut(g, n);
		if (!err && !n->priv)
			err = try_qse(g, n);
		if (!err && !n->priv && seg)
			err = try_qgap(g, n);
		nq += n->priv != NULL && mi_quant_node_is(n);
	}
	if (!err) {
		err = plan_moves(g);
		nq += err > 0 ? err : 0;
		err = err < 0 ? err : 0;
	}
	if (err)
		return mi_graph_err(g, NULL, err, "int8 planning failed");
	if (getenv("MI_QUANT_VERBOSE") && *getenv("MI_QUANT_VERBOSE") == '1') {
		int nqops = 0;

		for (int i = 0; i < g->nnodes; i++) {
			const struct mi_node *n = &g->nodes[i];

			nqops += !n->dead && !n->priv &&
				 (strstr(n->op_type, "QLinear") || strstr(n->op_type, "Integer") ||
				  (strstr(n->op_type, "QuantizeLinear") && !strcmp(n->op_type + strlen(n->op_type) - 14, "QuantizeLinear")));
		}
		fprintf(stderr, "metainfer: int8: %d nodes on int8 kernels (%s), %d quantization ops left on reference kernels\n",
			nq, mi_quant_isa_name(mi_quant_isa()), nqops);
	}
	if (nq) {
		kill_unused_tables(g);
		kill_unused_dq(g);
	}
	nint8 = nq;
	for (int i = 0; i < g->nnodes && !err; i++) {
		err = try_qdq_op(g, &g->nodes[i]);
		nq += g->nodes[i].priv && mi_quant_node_is(&g->nodes[i]) &&
		      ((struct qnode *)g->nodes[i].priv)->hdr.run == qdq_run;
	}
	if (err)
		return mi_graph_err(g, NULL, err, "int8 planning failed");
	if (nint8) {
		plan_c4(g);
		plan_chan(g);
	}
	if (!nq)
		return 0;
	sh = calloc(1, sizeof(*sh));
	if (sh) {
		sh->ws = aligned_alloc(64, ((size_t)shared_need + 127) & ~(size_t)63);
		sh->size = (size_t)shared_need;
	}
	if (!sh || !sh->ws) {
		free(sh);
		sh = NULL;
	}
	for (int i = 0; i < g->nnodes; i++) {
		struct mi_node *n = &g->nodes[i];

		if (!mi_quant_node_is(n))
			continue;
		if (!sh) {
			qnode_fini(g, n);
			continue;
		}
		((struct qnode *)n->priv)->sh = sh;
		sh->refs++;
	}
	return sh ? 0 : mi_graph_err(g, NULL, -ENOMEM, "int8 planning: out of memory");
}
