// SPDX-License-Identifier: MIT
/*
 * Fast fp32 element-wise kernels chosen by mi_cpu_plan() after the
 * conv/gemm/pooling pass (so epilogue fusion sees the original graph):
 *  - unary: Relu, LeakyRelu, Sigmoid, Tanh, Erf, Exp, Sqrt, HardSigmoid,
 *    HardSwish, Pow with a constant scalar exponent 1, 2, 3 or 0.5;
 *  - binary Add/Sub/Mul/Div where one operand has the output's shape and
 *    the other is the same shape, a scalar, or a contiguous block of the
 *    output's axes with ones elsewhere (last-axis bias, NCHW [C,1,1]);
 *  - Softmax over the last axis.
 * Plain loops over contiguous rows that GCC vectorizes (libm calls for
 * the transcendental functions: correctness first).  Work is split over
 * the thread pool only above ELT_PAR elements.  Every output element is
 * written; data pointers are read at run time.
 */
/* -O2's "very cheap" cost model leaves runtime-length loops scalar */
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic")

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "cpu.h"
#include "cpu_plan.h"
#include "xform.h"

#define ELT_PAR 65536

enum elt_op {
	E_RELU, E_LEAKY, E_SIGMOID, E_TANH, E_ERF, E_EXP, E_SQRT, E_HSIG,
	E_HSWISH, E_COPY, E_SQUARE, E_CUBE, E_GELU, E_GELU_TANH,
	E_ADD, E_SUB, E_MUL, E_DIV,
	E_SOFTMAX, E_LAYERNORM,
};

#define MAX_CHAIN 10

struct elt_node {
	struct mi_cpu_kernel_hdr hdr;
	int op;
	float alpha, beta;
	int nthreads;
	int64_t total;     /* output elements */
	/* binary: y[o][m][i] = big[o][m][i] op small[m] (or small op big) */
	int big_slot;      /* input slot of the full-shape operand */
	int small_first;   /* small operand is the left operand */
	int64_t outer, mid, inner;
	/* softmax: rows x cols */
	int x_slot;        /* unary: input slot of x (fused GELU) */
	/* general broadcast (binary): y[i] = a[ia] op b[ib] over coalesced
	 * dims with per-input strides (0 on broadcast axes) */
	int gnd;           /* 0: not general */
	int64_t gdims[MI_MAX_DIMS], gsa[MI_MAX_DIMS], gsb[MI_MAX_DIMS];
	int64_t gouter, gna, gnb;
	float eps;         /* LayerNormalization */
	const struct mi_xform_kern *xk;
	/* fused chain (GELU): absorbed nodes, the owner's original output */
	int nabsorbed, absorbed[MAX_CHAIN], orig_out;
};

static const struct {
	const char *name;
	int op;
} unary_ops[] = {
	{ "Relu", E_RELU }, { "LeakyRelu", E_LEAKY },
	{ "Sigmoid", E_SIGMOID }, { "Tanh", E_TANH }, { "Erf", E_ERF },
	{ "Exp", E_EXP }, { "Sqrt", E_SQRT }, { "HardSigmoid", E_HSIG },
	{ "HardSwish", E_HSWISH },
}, binary_ops[] = {
	{ "Add", E_ADD }, { "Sub", E_SUB }, { "Mul", E_MUL }, { "Div", E_DIV },
};

static bool f32_known(const struct mi_tensor *t)
{
	return t && t->dtype == MI_DT_FLOAT && mi_tensor_shape_known(t);
}

static bool same_dims(const struct mi_tensor *a, const struct mi_tensor *b)
{
	if (a->ndim != b->ndim)
		return false;
	for (int i = 0; i < a->ndim; i++)
		if (a->dims[i] != b->dims[i])
			return false;
	return true;
}

/* ---- erf ---------------------------------------------------------------- */
/*
 * erf(x) for |x| < 4 from a table at r = k/128 and the Taylor series of
 * erf around r (d = |x| - r, |d| <= 1/256):
 *   erf(r + d) = erf(r) + c d (1 - r d + (2r^2 - 1)/3 d^2
 *                              - r (2r^2 - 3)/6 d^3),  c = 2/sqrt(pi) e^-r^2
 * evaluated in double; the next term is below 1e-12 relative, so the
 * result is the correctly rounded float in nearly every case.  |x| >= 4:
 * +-1 (erf(4) = 1 - 1.5e-8 rounds to 1.0f).
 */
#define ERF_N 512 /* 4 * 128 */
static struct erf_ent {
	double erf, c, a2, a3; /* a2 = (2r^2-1)/3, a3 = -r(2r^2-3)/6 */
} erf_tab[ERF_N + 1];
static pthread_once_t erf_once = PTHREAD_ONCE_INIT;

static void erf_init(void)
{
	for (int k = 0; k <= ERF_N; k++) {
		double r = k / 128.0;

		erf_tab[k].erf = erf(r);
		erf_tab[k].c = 2 / sqrt(M_PI) * exp(-r * r);
		erf_tab[k].a2 = (2 * r * r - 1) / 3;
		erf_tab[k].a3 = -r * (2 * r * r - 3) / 6;
	}
}

static void erf_run(const float *restrict x, float *restrict y, int64_t n)
{
	for (int64_t i = 0; i < n; i++) {
		float a = fabsf(x[i]);

		if (a < 4.0f) {
			int k = (int)(a * 128.0f + 0.5f);
			const struct erf_ent *t = &erf_tab[k];
			double d = (double)a - k / 128.0;
			double p = 1 + d * (-(k / 128.0) + d * (t->a2 +
							     d * t->a3));
			float v = (float)(t->erf + t->c * d * p);

			y[i] = copysignf(v, x[i]);
		} else {
			/* +-1, NaN stays NaN */
			y[i] = a == a ? copysignf(1.0f, x[i]) : x[i];
		}
	}
}

/* ---- kernels ------------------------------------------------------------ */
static void unary_run(const struct elt_node *e, const float *restrict x,
		      float *restrict y, int64_t n)
{
	float a = e->alpha, b = e->beta;
	int64_t i;

	switch (e->op) {
	case E_RELU:
		for (i = 0; i < n; i++)
			y[i] = x[i] > 0 ? x[i] : 0;
		break;
	case E_LEAKY:
		for (i = 0; i < n; i++)
			y[i] = x[i] < 0 ? a * x[i] : x[i];
		break;
	case E_SIGMOID:
		for (i = 0; i < n; i++)
			y[i] = 1.0f / (1.0f + expf(-x[i]));
		break;
	case E_TANH:
		for (i = 0; i < n; i++)
			y[i] = tanhf(x[i]);
		break;
	case E_ERF:
		erf_run(x, y, n);
		break;
	case E_EXP:
		for (i = 0; i < n; i++)
			y[i] = expf(x[i]);
		break;
	case E_SQRT:
		for (i = 0; i < n; i++)
			y[i] = sqrtf(x[i]);
		break;
	case E_HSIG:
		for (i = 0; i < n; i++) {
			float v = a * x[i] + b;

			y[i] = v < 0 ? 0 : v > 1 ? 1 : v;
		}
		break;
	case E_HSWISH:
		for (i = 0; i < n; i++) {
			float v = x[i] * (1.0f / 6) + 0.5f;

			y[i] = x[i] * (v < 0 ? 0 : v > 1 ? 1 : v);
		}
		break;
	case E_COPY:
		memmove(y, x, n * sizeof(float));
		break;
	case E_SQUARE:
		for (i = 0; i < n; i++)
			y[i] = x[i] * x[i];
		break;
	case E_CUBE:
		for (i = 0; i < n; i++)
			y[i] = x[i] * x[i] * x[i];
		break;
	case E_GELU:
	case E_GELU_TANH:
		e->xk->gelu(x, y, n, e->op == E_GELU_TANH);
		break;
	}
}

/* y[i] = x[i] op s (or s op x[i]) */
static void bin_scalar(int op, bool sfirst, const float *restrict x, float s,
		       float *restrict y, int64_t n)
{
	int64_t i;

	switch (op) {
	case E_ADD:
		for (i = 0; i < n; i++)
			y[i] = x[i] + s;
		break;
	case E_MUL:
		for (i = 0; i < n; i++)
			y[i] = x[i] * s;
		break;
	case E_SUB:
		if (sfirst)
			for (i = 0; i < n; i++)
				y[i] = s - x[i];
		else
			for (i = 0; i < n; i++)
				y[i] = x[i] - s;
		break;
	case E_DIV:
		if (sfirst)
			for (i = 0; i < n; i++)
				y[i] = s / x[i];
		else
			for (i = 0; i < n; i++)
				y[i] = x[i] / s;
		break;
	}
}

/* y[i] = a[i] op b[i] */
static void bin_vec(int op, const float *a, const float *b, float *y,
		    int64_t n)
{
	int64_t i;

	switch (op) {
	case E_ADD:
		for (i = 0; i < n; i++)
			y[i] = a[i] + b[i];
		break;
	case E_SUB:
		for (i = 0; i < n; i++)
			y[i] = a[i] - b[i];
		break;
	case E_MUL:
		for (i = 0; i < n; i++)
			y[i] = a[i] * b[i];
		break;
	case E_DIV:
		for (i = 0; i < n; i++)
			y[i] = a[i] / b[i];
		break;
	}
}

static void softmax_row(const float *x, float *y, int64_t n)
{
	float mx = x[0], r;
	double s = 0; /* float sums drift by ~1e-6 over long rows */
	int64_t i;

	for (i = 1; i < n; i++)
		mx = x[i] > mx ? x[i] : mx;
	for (i = 0; i < n; i++)
		y[i] = expf(x[i] - mx);
	for (i = 0; i < n; i++)
		s += y[i];
	r = (float)(1.0 / s);
	for (i = 0; i < n; i++)
		y[i] *= r;
}

struct elt_job {
	const struct elt_node *e;
	const float *x, *s; /* x: full-shape operand, s: small (binary) */
	const float *bias;  /* LayerNormalization (s: scale) */
	float *y;
	int64_t units, ulen; /* work units of ulen elements */
	struct mi_work w;
};

/* Work ranges claimed dynamically (a thread that joins the pool run late
 * leaves its share to the others): about 4 per thread, at least ELT_GRAIN
 * elements (~2 us) each. */
#define ELT_GRAIN 16384

/*
 * Per-element cost of an op in units of a plain Add, for the two
 * thresholds above (split from ELT_PAR / w elements, ranges of at least
 * ELT_GRAIN / w): the transcendental ones (exp, erf, tanh: the fused
 * GELU, Softmax, Sigmoid...) cost ~5-9 Adds an element (the
 * Transformer's GELU on 64 x 512 floats took 45 us on one thread at 2
 * threads, its Softmax on 4 x 64 x 64 14 us; a pool run costs a few us).
 */
#define ELT_HEAVY 8

static int elt_weight(const struct elt_node *e)
{
	switch (e->op) {
	case E_SIGMOID:
	case E_TANH:
	case E_ERF:
	case E_EXP:
	case E_GELU:
	case E_GELU_TANH:
	case E_SOFTMAX:
		return ELT_HEAVY;
	default:
		return 1;
	}
}

static int64_t elt_grain(const struct elt_node *e, int64_t units,
			 int64_t ulen, int nt)
{
	int64_t g = mi_work_grain(units, nt, 4);
	int64_t min = (ELT_GRAIN / elt_weight(e) + ulen - 1) / ulen;

	return g > min ? g : min;
}

static void elt_range(const struct elt_job *j, int64_t b, int64_t end)
{
	const struct elt_node *e = j->e;
	int64_t u;

	if (e->op == E_SOFTMAX) {
		if (e->xk)
			e->xk->softmax(j->x + b * j->ulen, j->y + b * j->ulen,
				       end - b, j->ulen);
		else
			for (u = b; u < end; u++)
				softmax_row(j->x + u * j->ulen,
					    j->y + u * j->ulen, j->ulen);
		return;
	}
	if (e->op == E_LAYERNORM) {
		e->xk->layernorm(j->x + b * j->ulen, j->y + b * j->ulen,
				 end - b, j->ulen, j->s, j->bias, e->eps);
		return;
	}
	if (e->op < E_ADD) {
		unary_run(e, j->x + b * j->ulen, j->y + b * j->ulen,
			  (end - b) * j->ulen);
		return;
	}
	if (e->inner == 1 && e->mid > 1) {
		/* unit = one outer row of mid elements, operand s[0..mid) */
		for (u = b; u < end; u++) {
			const float *x = j->x + u * e->mid;
			float *y = j->y + u * e->mid;

			if (e->small_first)
				bin_vec(e->op, j->s, x, y, e->mid);
			else
				bin_vec(e->op, x, j->s, y, e->mid);
		}
		return;
	}
	if (e->mid == 1) {
		/* scalar operand: units are 1024-element blocks */
		int64_t lo = b * j->ulen, hi = end * j->ulen;

		if (hi > e->total)
			hi = e->total;
		if (hi > lo)
			bin_scalar(e->op, e->small_first, j->x + lo, j->s[0],
				   j->y + lo, hi - lo);
		return;
	}
	/* unit = one (outer, mid) row of inner elements */
	for (u = b; u < end; u++)
		bin_scalar(e->op, e->small_first, j->x + u * e->inner,
			   j->s[u % e->mid], j->y + u * e->inner, e->inner);
}

static void elt_thread(void *ctx, int t, int nt)
{
	struct elt_job *j = ctx;
	int64_t b, e;

	while (mi_work_claim(&j->w, &b, &e))
		elt_range(j, b, e);
}

struct same_job {
	int op;
	const float *a, *b;
	float *y;
	int64_t n;
	struct mi_work w; /* blocks of 16 elements */
};

static void same_thread(void *ctx, int t, int nt)
{
	struct same_job *j = ctx;
	int64_t b, e;

	while (mi_work_claim(&j->w, &b, &e)) {
		b *= 16, e *= 16;
		if (e > j->n)
			e = j->n;
		if (e > b)
			bin_vec(j->op, j->a + b, j->b + b, j->y + b, e - b);
	}
}

static int nthreads_for(const struct elt_node *e, int64_t units)
{
	int nt = e->total * elt_weight(e) < ELT_PAR ? 1 : e->nthreads;

	return units < nt ? (int)(units > 0 ? units : 1) : nt;
}

/* ---- general broadcasting -------------------------------------------------- */
struct gen_job {
	const struct elt_node *e;
	const float *a, *b;
	float *y;
	struct mi_work w; /* output rows */
};

static void gen_rows(const struct elt_node *e, const float *a, const float *b,
		     float *y, int64_t ob, int64_t oe)
{
	int last = e->gnd - 2;
	int64_t idx[MI_MAX_DIMS], ia = 0, ib = 0, r = ob;
	int64_t n = e->gdims[e->gnd - 1], sa = e->gsa[e->gnd - 1],
		sb = e->gsb[e->gnd - 1];

	for (int k = last; k >= 0; k--) {
		idx[k] = r % e->gdims[k];
		r /= e->gdims[k];
		ia += idx[k] * e->gsa[k];
		ib += idx[k] * e->gsb[k];
	}
	for (int64_t o = ob; o < oe; o++) {
		float *yr = y + o * n;

		if (sa == 1 && sb == 1)
			bin_vec(e->op, a + ia, b + ib, yr, n);
		else if (sa == 1 && sb == 0)
			bin_scalar(e->op, false, a + ia, b[ib], yr, n);
		else if (sa == 0 && sb == 1)
			bin_scalar(e->op, true, b + ib, a[ia], yr, n);
		else
			for (int64_t i = 0; i < n; i++) {
				float u = a[ia + i * sa], v = b[ib + i * sb];

				yr[i] = e->op == E_ADD ? u + v :
					e->op == E_SUB ? u - v :
					e->op == E_MUL ? u * v : u / v;
			}
		for (int k = last; k >= 0; k--) {
			ia += e->gsa[k];
			ib += e->gsb[k];
			if (++idx[k] < e->gdims[k])
				break;
			ia -= e->gdims[k] * e->gsa[k];
			ib -= e->gdims[k] * e->gsb[k];
			idx[k] = 0;
		}
	}
}

static void gen_thread(void *ctx, int t, int nt)
{
	struct gen_job *j = ctx;
	int64_t b, e;

	while (mi_work_claim(&j->w, &b, &e))
		gen_rows(j->e, j->a, j->b, j->y, b, e);
}

static int elt_run(struct mi_graph *g, struct mi_node *n)
{
	const struct elt_node *e = n->priv;
	struct mi_tensor *y = mi_out(g, n, 0);
	struct elt_job j = { .e = e, .y = y->data };

	if (!y->data || mi_tensor_numel(y) != e->total)
		return mi_graph_err(g, n, -EINVAL,
				    "fast kernel planned for another output shape");
	if (e->gnd) {
		struct mi_tensor *a = mi_in(g, n, 0), *b = mi_in(g, n, 1);
		struct gen_job gj = { .e = e, .y = y->data };

		if (!a->data || !b->data || mi_tensor_numel(a) != e->gna ||
		    mi_tensor_numel(b) != e->gnb)
			return mi_graph_err(g, n, -EINVAL,
					    "fast kernel: missing or resized input");
		gj.a = a->data;
		gj.b = b->data;
		int nt = nthreads_for(e, e->gouter);

		mi_work_init(&gj.w, e->gouter,
			     elt_grain(e, e->gouter, e->gdims[e->gnd - 1], nt));
		mi_pool_run(nt, gen_thread, &gj);
		return 0;
	}
	if (e->op >= E_ADD && e->op <= E_DIV) {
		struct mi_tensor *a = mi_in(g, n, e->big_slot);
		struct mi_tensor *s = mi_in(g, n, 1 - e->big_slot);

		if (!a->data || !s->data || mi_tensor_numel(a) != e->total)
			return mi_graph_err(g, n, -EINVAL,
					    "fast kernel: missing or resized input");
		if (mi_tensor_numel(s) == e->total) {
			struct same_job sj = {
				.op = e->op, .a = mi_in(g, n, 0)->data,
				.b = mi_in(g, n, 1)->data, .y = y->data,
				.n = e->total,
			};

			int nt = nthreads_for(e, e->total / 16);

			mi_work_init(&sj.w, (e->total + 15) / 16,
				     elt_grain(e, (e->total + 15) / 16, 16, nt));
			mi_pool_run(nt, same_thread, &sj);
			return 0;
		}
		if (mi_tensor_numel(s) != e->mid)
			return mi_graph_err(g, n, -EINVAL,
					    "fast kernel: resized input");
		j.x = a->data;
		j.s = s->data;
		if (e->mid == 1) {
			j.ulen = 1024;
			j.units = (e->total + 1023) / 1024;
		} else if (e->inner == 1) {
			j.units = e->outer;
			j.ulen = e->mid;
		} else {
			j.units = e->outer * e->mid;
			j.ulen = e->inner;
		}
	} else {
		struct mi_tensor *x = mi_in(g, n, e->x_slot);

		if (!x->data || mi_tensor_numel(x) != e->total)
			return mi_graph_err(g, n, -EINVAL,
					    "fast kernel: missing or resized input");
		j.x = x->data;
		if (e->op == E_LAYERNORM) {
			struct mi_tensor *sc = mi_in(g, n, 1);
			struct mi_tensor *bi = mi_in(g, n, 2);

			if (!sc || !sc->data || mi_tensor_numel(sc) != e->inner ||
			    (bi && (!bi->data ||
				    mi_tensor_numel(bi) != e->inner)))
				return mi_graph_err(g, n, -EINVAL,
						    "fast kernel: missing or resized input");
			j.s = sc->data;
			j.bias = bi ? bi->data : NULL;
			j.ulen = e->inner;
			j.units = e->total / e->inner;
		} else if (e->op == E_SOFTMAX) {
			j.ulen = e->inner;
			j.units = e->total / e->inner;
		} else {
			/* blocks of 1024 elements, the last one short */
			j.ulen = 1024;
			j.units = e->total / 1024;
		}
	}
	int nt = nthreads_for(e, j.units);

	mi_work_init(&j.w, j.units, elt_grain(e, j.units, j.ulen, nt));
	mi_pool_run(nt, elt_thread, &j);
	if (e->op < E_ADD && e->total % 1024) {
		int64_t done = j.units * 1024;

		unary_run(e, j.x + done, j.y + done, e->total - done);
	}
	return 0;
}

static void elt_fini(struct mi_graph *g, struct mi_node *n)
{
	struct elt_node *e = n->priv;

	/* undo a chain fusion (the executor re-sorts and re-links) */
	for (int i = 0; i < e->nabsorbed; i++)
		g->nodes[e->absorbed[i]].dead = false;
	if (e->nabsorbed)
		n->outputs[0] = e->orig_out;
	free(e);
}

/* ---- planning ----------------------------------------------------------- */
static int plan_pow(struct mi_graph *g, struct mi_node *n,
		    struct elt_node *e)
{
	struct mi_tensor *p = mi_in(g, n, 1);
	float v;

	if (n->ninputs != 2 || !p || !p->data || !(p->flags & MI_TF_CONST) ||
	    p->dtype != MI_DT_FLOAT || mi_tensor_numel(p) != 1)
		return -EOPNOTSUPP;
	v = *(const float *)p->data;
	if (v == 1)
		e->op = E_COPY;
	else if (v == 2)
		e->op = E_SQUARE;
	else if (v == 3)
		e->op = E_CUBE;
	else if (v == 0.5f)
		e->op = E_SQRT;
	else
		return -EOPNOTSUPP;
	return 0;
}

/*
 * The small operand s right-aligned against y: its non-1 axes must form
 * one contiguous block [k, l] equal to y's axes there.  Then
 * y[o][m][i] = big[o][m][i] op s[m] with outer = prod y[0..k),
 * mid = prod y[k..l], inner = prod y(l..).
 */
static int plan_bcast(const struct mi_tensor *s, const struct mi_tensor *y,
		      struct elt_node *e)
{
	int off = y->ndim - s->ndim, k = -1, l = -1;

	if (off < 0)
		return -EOPNOTSUPP;
	for (int i = 0; i < s->ndim; i++) {
		if (s->dims[i] == 1)
			continue;
		if (s->dims[i] != y->dims[i + off])
			return -EOPNOTSUPP;
		if (k < 0)
			k = i + off;
		else if (l != i + off - 1)
			/* a 1 between two non-1 axes that y has > 1 */
			for (int m = l + 1; m < i + off; m++)
				if (y->dims[m] != 1)
					return -EOPNOTSUPP;
		l = i + off;
	}
	if (k < 0)
		k = l = y->ndim; /* scalar: mid = 1 */
	e->outer = e->mid = e->inner = 1;
	for (int i = 0; i < y->ndim; i++) {
		if (i < k)
			e->outer *= y->dims[i];
		else if (i <= l)
			e->mid *= y->dims[i];
		else
			e->inner *= y->dims[i];
	}
	return 0;
}

/*
 * Any numpy broadcast of a and b to y: strides per y axis (0 where the
 * input has 1 or lacks the axis), size-1 axes dropped, axes merged where
 * both inputs allow; rows of the last merged axis.
 */
static int plan_general(const struct mi_tensor *a, const struct mi_tensor *b,
			const struct mi_tensor *y, struct elt_node *e)
{
	int r = y->ndim, k = 0, oa = r - a->ndim, ob = r - b->ndim;
	int64_t d[MI_MAX_DIMS], sa[MI_MAX_DIMS], sb[MI_MAX_DIMS], va = 1, vb = 1;

	if (oa < 0 || ob < 0 || r < 1)
		return -EOPNOTSUPP;
	for (int i = r - 1; i >= 0; i--) {
		int64_t da = i >= oa ? a->dims[i - oa] : 1;
		int64_t db = i >= ob ? b->dims[i - ob] : 1;

		if ((da != 1 && da != y->dims[i]) ||
		    (db != 1 && db != y->dims[i]))
			return -EOPNOTSUPP;
		d[i] = y->dims[i];
		sa[i] = da == 1 ? 0 : va;
		sb[i] = db == 1 ? 0 : vb;
		va *= da;
		vb *= db;
	}
	for (int i = 0; i < r; i++) {
		if (d[i] == 1)
			continue;
		if (k && e->gsa[k - 1] == d[i] * sa[i] &&
		    e->gsb[k - 1] == d[i] * sb[i]) {
			e->gdims[k - 1] *= d[i];
			e->gsa[k - 1] = sa[i];
			e->gsb[k - 1] = sb[i];
			continue;
		}
		e->gdims[k] = d[i];
		e->gsa[k] = sa[i];
		e->gsb[k] = sb[i];
		k++;
	}
	if (!k) {
		e->gdims[0] = 1;
		e->gsa[0] = e->gsb[0] = 0;
		k = 1;
	}
	e->gnd = k;
	e->gouter = 1;
	for (int i = 0; i < k - 1; i++)
		e->gouter *= e->gdims[i];
	e->gna = mi_tensor_numel(a);
	e->gnb = mi_tensor_numel(b);
	return 0;
}

static int plan_binary(struct mi_graph *g, struct mi_node *n,
		       struct elt_node *e)
{
	struct mi_tensor *a = mi_in(g, n, 0), *b = mi_in(g, n, 1);
	struct mi_tensor *y = mi_out(g, n, 0);

	if (n->ninputs != 2 || !f32_known(a) || !f32_known(b))
		return -EOPNOTSUPP;
	if (same_dims(a, y)) {
		e->big_slot = 0;
	} else if (same_dims(b, y)) {
		e->big_slot = 1;
	} else {
		return plan_general(a, b, y, e);
	}
	e->small_first = e->big_slot == 1;
	if (same_dims(a, b)) {
		e->outer = e->mid = 1;
		e->inner = e->total;
		return 0;
	}
	if (plan_bcast(e->big_slot ? a : b, y, e))
		return plan_general(a, b, y, e);
	return 0;
}

static int plan_softmax(struct mi_graph *g, struct mi_node *n,
			struct elt_node *e)
{
	struct mi_tensor *x = mi_in(g, n, 0);
	int64_t axis = mi_attr_int(n, "axis", g->opset >= 13 ? -1 : 1);

	if (!f32_known(x) || x->ndim < 1)
		return -EOPNOTSUPP;
	if (axis < 0)
		axis += x->ndim;
	/* opset < 13 flattens from axis on: same as last-axis when the
	 * axis is the last one */
	if (axis != x->ndim - 1 || x->dims[axis] < 1)
		return -EOPNOTSUPP;
	e->op = E_SOFTMAX;
	e->inner = x->dims[axis];
	return 0;
}


/* ---- GELU chains ---------------------------------------------------------- */
/*
 * Exact GELU as exported by PyTorch/transformers:
 *   u = x / sqrt(2)  (Div by ~1.41421 or Mul by ~0.70711)
 *   e = Erf(u); p = e + 1; then x * p * 0.5 in any association:
 *   Mul(Mul(x, p), 0.5) | Mul(Mul(p, 0.5), x) | Mul(Mul(x, 0.5), p)
 * and the tanh approximation
 *   c = x^3 (Pow(x, 3) or Mul(Mul(x, x), x)); s = x + 0.044715 c;
 *   z = s * sqrt(2/pi); e = Tanh(z); p = e + 1; same tail.
 * Every intermediate must be fp32 with x's shape (the x^3 and scale steps
 * too), have this chain as its only consumer and not be a graph output.
 * The first node of the chain (owner) then computes the whole chain from
 * x and writes the last node's output; the others are marked dead and
 * restored by elt_fini.  Anything else is left to the per-node kernels.
 */
struct chain {
	struct mi_graph *g;
	int x;                     /* tensor */
	int nodes[MAX_CHAIN], n;   /* absorbed, owner excluded */
};

static struct mi_node *live_producer(struct mi_graph *g, int t)
{
	int p = t >= 0 ? g->tensors[t].producer : -1;
	struct mi_node *n = p >= 0 ? &g->nodes[p] : NULL;

	if (!n || n->dead || n->priv || n->domain[0] || n->noutputs != 1)
		return NULL;
	return n;
}

static bool const_scalar(struct mi_graph *g, int t, float *v)
{
	struct mi_tensor *c = t >= 0 ? &g->tensors[t] : NULL;

	if (!c || !(c->flags & MI_TF_CONST) || !c->data ||
	    c->dtype != MI_DT_FLOAT || mi_tensor_numel(c) != 1)
		return false;
	*v = *(const float *)c->data;
	return true;
}

static bool near(float v, double want)
{
	return fabs(v - want) <= 1e-4 * fabs(want);
}

/* t: an intermediate of the chain; has shape x, fp32, one consumer */
static struct mi_node *next_of(struct chain *c, int t)
{
	struct mi_graph *g = c->g;
	int ci = mi_graph_sole_consumer(g, t);
	struct mi_node *n;

	if (ci < 0 || !same_dims(&g->tensors[t], &g->tensors[c->x]) ||
	    g->tensors[t].dtype != MI_DT_FLOAT)
		return NULL;
	n = &g->nodes[ci];
	if (n->dead || n->priv || n->domain[0] || n->noutputs != 1 ||
	    c->n >= MAX_CHAIN)
		return NULL;
	c->nodes[c->n++] = ci;
	return n;
}

/* binary node n with input t: the other input (or -1) */
static int other_in(const struct mi_node *n, int t)
{
	if (n->ninputs != 2)
		return -1;
	if (n->inputs[0] == t)
		return n->inputs[1];
	if (n->inputs[1] == t)
		return n->inputs[0];
	return -1;
}

static bool is(const struct mi_node *n, const char *op)
{
	return n && !strcmp(n->op_type, op);
}

/* from p = 1 + f(x): the x * p * 0.5 tail; returns the last node or NULL */
static struct mi_node *gelu_tail(struct chain *c, struct mi_node *addn)
{
	struct mi_graph *g = c->g;
	int p = addn->outputs[0], o;
	struct mi_node *m1 = next_of(c, p), *m2, *h;
	float v;

	if (!is(m1, "Mul") || (o = other_in(m1, p)) < 0)
		return NULL;
	if (o == c->x || (const_scalar(g, o, &v) && v == 0.5f)) {
		int want = o == c->x ? -2 : c->x;

		m2 = next_of(c, m1->outputs[0]);
		if (!is(m2, "Mul") || (o = other_in(m2, m1->outputs[0])) < 0)
			return NULL;
		if (want == -2 ? !(const_scalar(g, o, &v) && v == 0.5f) :
				 o != want)
			return NULL;
		return same_dims(mi_out(g, m2, 0), &g->tensors[c->x]) ? m2 : NULL;
	}
	/* Mul(Mul(x, 0.5), p) */
	h = live_producer(g, o);
	if (!is(h, "Mul") || other_in(h, c->x) < 0 ||
	    !const_scalar(g, other_in(h, c->x), &v) || v != 0.5f ||
	    mi_graph_sole_consumer(g, o) != (int)(m1 - g->nodes) ||
	    !same_dims(&g->tensors[o], &g->tensors[c->x]) || c->n >= MAX_CHAIN)
		return NULL;
	c->nodes[c->n++] = (int)(h - g->nodes);
	return same_dims(mi_out(g, m1, 0), &g->tensors[c->x]) ? m1 : NULL;
}

/* p = Add(t, 1) where t is the output of node f */
static struct mi_node *plus_one(struct chain *c, struct mi_node *f)
{
	struct mi_node *a = next_of(c, f->outputs[0]);
	float v;

	if (!is(a, "Add") ||
	    !const_scalar(c->g, other_in(a, f->outputs[0]), &v) || v != 1.0f)
		return NULL;
	return a;
}

/* Erf node: owner is u's producer (x / sqrt 2) */
static struct mi_node *match_gelu_erf(struct chain *c, struct mi_node *erf,
				      struct mi_node **owner)
{
	struct mi_graph *g = c->g;
	int u = erf->inputs[0];
	struct mi_node *un = live_producer(g, u), *a;
	float v;

	if (!un || erf->ninputs != 1 || un->ninputs != 2 ||
	    mi_graph_sole_consumer(g, u) != (int)(erf - g->nodes))
		return NULL;
	if (is(un, "Div") && const_scalar(g, un->inputs[1], &v) &&
	    near(v, M_SQRT2))
		c->x = un->inputs[0];
	else if (is(un, "Mul") && const_scalar(g, un->inputs[1], &v) &&
		 near(v, M_SQRT1_2))
		c->x = un->inputs[0];
	else if (is(un, "Mul") && const_scalar(g, un->inputs[0], &v) &&
		 near(v, M_SQRT1_2))
		c->x = un->inputs[1];
	else
		return NULL;
	if (!f32_known(&g->tensors[c->x]) ||
	    !same_dims(&g->tensors[u], &g->tensors[c->x]))
		return NULL;
	c->nodes[c->n++] = (int)(erf - g->nodes);
	if (!same_dims(mi_out(g, erf, 0), &g->tensors[c->x]) ||
	    !(a = plus_one(c, erf)))
		return NULL;
	*owner = un;
	return gelu_tail(c, a);
}

/* Tanh node: owner is the x^3 node */
static struct mi_node *match_gelu_tanh(struct chain *c, struct mi_node *th,
				       struct mi_node **owner)
{
	struct mi_graph *g = c->g;
	struct mi_node *zn = live_producer(g, th->inputs[0]), *sn, *wn, *cn, *sq;
	int s, w, cube, t;
	float v;

	/* z = s * sqrt(2/pi) */
	if (!is(zn, "Mul") || th->ninputs != 1)
		return NULL;
	if (const_scalar(g, zn->inputs[1], &v) && near(v, 0.7978845608))
		s = zn->inputs[0];
	else if (const_scalar(g, zn->inputs[0], &v) && near(v, 0.7978845608))
		s = zn->inputs[1];
	else
		return NULL;
	/* s = x + w, w = cube * 0.044715 */
	sn = live_producer(g, s);
	if (!is(sn, "Add") || sn->ninputs != 2)
		return NULL;
	for (int k = 0; k < 2; k++) {
		wn = live_producer(g, sn->inputs[k]);
		if (!is(wn, "Mul") || wn->ninputs != 2)
			continue;
		for (int q = 0; q < 2; q++) {
			if (!const_scalar(g, wn->inputs[q], &v) ||
			    !near(v, 0.044715))
				continue;
			cube = wn->inputs[1 - q];
			cn = live_producer(g, cube);
			c->x = sn->inputs[1 - k];
			w = sn->inputs[k];
			if (is(cn, "Pow") && cn->ninputs == 2 &&
			    cn->inputs[0] == c->x &&
			    const_scalar(g, cn->inputs[1], &v) && v == 3.0f)
				sq = NULL;
			else if (is(cn, "Mul") && (t = other_in(cn, c->x)) >= 0 &&
				 (sq = live_producer(g, t)) && is(sq, "Mul") &&
				 sq->ninputs == 2 && sq->inputs[0] == c->x &&
				 sq->inputs[1] == c->x &&
				 mi_graph_sole_consumer(g, t) ==
					 (int)(cn - g->nodes))
				;
			else
				continue;
			goto found;
		}
	}
	return NULL;
found:
	if (!f32_known(&g->tensors[c->x]))
		return NULL;
	/* owner: x*x (or the Pow); the rest in order */
	if (sq) {
		*owner = sq;
		if (next_of(c, sq->outputs[0]) != cn)
			return NULL;
	} else {
		*owner = cn;
	}
	if (next_of(c, cube) != wn || next_of(c, w) != sn ||
	    next_of(c, s) != zn || next_of(c, zn->outputs[0]) != th)
		return NULL;
	{
		struct mi_node *a = plus_one(c, th);

		return a ? gelu_tail(c, a) : NULL;
	}
}

static int plan_gelu(struct mi_graph *g, struct mi_node *n, int nthreads,
		     const struct mi_xform_kern *xk)
{
	struct chain c = { .g = g, .x = -1 };
	struct mi_node *owner = NULL, *last = NULL;
	struct elt_node *e;
	bool tanh_form = is(n, "Tanh");

	if (n->dead || n->priv || n->domain[0] || n->noutputs != 1 ||
	    n->ninputs != 1 || !f32_known(mi_in(g, n, 0)))
		return 0;
	last = tanh_form ? match_gelu_tanh(&c, n, &owner) :
			   match_gelu_erf(&c, n, &owner);
	if (!last || !owner || owner->priv || owner->noutputs != 1 ||
	    (mi_out(g, last, 0)->flags & MI_TF_CONST) ||
	    mi_out(g, last, 0)->data)
		return 0;
	for (int i = 0; i < c.n; i++)
		if (g->nodes[c.nodes[i]].priv)
			return 0;
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->hdr.run = elt_run;
	e->hdr.fini = elt_fini;
	e->nthreads = nthreads;
	e->op = tanh_form ? E_GELU_TANH : E_GELU;
	e->xk = xk;
	e->x_slot = owner->inputs[0] == c.x ? 0 : 1;
	e->total = mi_tensor_numel(&g->tensors[c.x]);
	e->orig_out = owner->outputs[0];
	e->nabsorbed = c.n;
	memcpy(e->absorbed, c.nodes, sizeof(c.nodes));
	for (int i = 0; i < c.n; i++)
		g->nodes[c.nodes[i]].dead = true;
	owner->outputs[0] = last->outputs[0];
	g->tensors[owner->outputs[0]].producer = (int)(owner - g->nodes);
	owner->priv = e;
	return 0;
}

/* ---- LayerNormalization ----------------------------------------------------- */
/* x [..., D...] normalized over axes [axis, ndim); scale (and bias) have
 * exactly the normalized axes' shape (leading 1s allowed); the optional
 * Mean / InvStdDev outputs unused. */
static int plan_layernorm(struct mi_graph *g, struct mi_node *n,
			  struct elt_node *e)
{
	struct mi_tensor *x = mi_in(g, n, 0), *y = mi_out(g, n, 0);
	int64_t axis = mi_attr_int(n, "axis", -1), d = 1;

	if (!f32_known(x) || !same_dims(x, y) || x->ndim < 1 ||
	    n->ninputs < 2 || n->ninputs > 3)
		return -EOPNOTSUPP;
	for (int i = 1; i < n->noutputs; i++) {
		int t = n->outputs[i];

		if (t >= 0 && (g->tensors[t].nconsumers ||
			       (g->tensors[t].flags & MI_TF_OUTPUT)))
			return -EOPNOTSUPP;
	}
	if (axis < 0)
		axis += x->ndim;
	if (axis < 0 || axis >= x->ndim)
		return -EOPNOTSUPP;
	for (int i = axis; i < x->ndim; i++)
		d *= x->dims[i];
	for (int k = 1; k < n->ninputs; k++) {
		struct mi_tensor *p = mi_in(g, n, k);
		int off;

		if (!p && k == 2)
			continue;
		if (!f32_known(p) || mi_tensor_numel(p) != d ||
		    p->ndim > x->ndim)
			return -EOPNOTSUPP;
		off = x->ndim - p->ndim;
		for (int i = 0; i < p->ndim; i++)
			if (off + i < axis ? p->dims[i] != 1 :
					     p->dims[i] != x->dims[off + i])
				return -EOPNOTSUPP;
	}
	if (d < 1)
		return -EOPNOTSUPP;
	e->op = E_LAYERNORM;
	e->inner = d;
	e->eps = mi_attr_float(n, "epsilon", 1e-5f);
	return 0;
}

static int plan_node(struct mi_graph *g, struct mi_node *n, int nthreads,
		     const struct mi_xform_kern *xk)
{
	struct mi_tensor *y;
	struct elt_node *e;
	int err = -EOPNOTSUPP;

	if (n->dead || n->priv || n->domain[0] || n->ninputs < 1 ||
	    (n->noutputs != 1 && strcmp(n->op_type, "LayerNormalization")))
		return 0;
	y = mi_out(g, n, 0);
	if (!f32_known(y) || y->data || !f32_known(mi_in(g, n, 0)) ||
	    mi_tensor_numel(y) < 1)
		return 0;
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->hdr.run = elt_run;
	e->hdr.fini = elt_fini;
	e->nthreads = nthreads;
	e->total = mi_tensor_numel(y);
	e->xk = xk;
	for (size_t i = 0; i < sizeof(unary_ops) / sizeof(unary_ops[0]); i++)
		if (!strcmp(n->op_type, unary_ops[i].name)) {
			e->op = unary_ops[i].op;
			err = same_dims(mi_in(g, n, 0), y) ? 0 : -EOPNOTSUPP;
		}
	for (size_t i = 0; i < sizeof(binary_ops) / sizeof(binary_ops[0]);
	     i++)
		if (!strcmp(n->op_type, binary_ops[i].name)) {
			e->op = binary_ops[i].op;
			err = plan_binary(g, n, e);
		}
	if (!strcmp(n->op_type, "Pow") && same_dims(mi_in(g, n, 0), y))
		err = plan_pow(g, n, e);
	if (!strcmp(n->op_type, "Softmax") && same_dims(mi_in(g, n, 0), y))
		err = plan_softmax(g, n, e);
	if (!strcmp(n->op_type, "LayerNormalization"))
		err = plan_layernorm(g, n, e);
	if (e->op == E_LEAKY)
		e->alpha = mi_attr_float(n, "alpha", 0.01f);
	if (e->op == E_HSIG) {
		e->alpha = mi_attr_float(n, "alpha", 0.2f);
		e->beta = mi_attr_float(n, "beta", 0.5f);
	}
	if (err) {
		free(e);
		return 0;
	}
	n->priv = e;
	return 0;
}

extern const struct mi_xform_kern mi_xform_kern_generic;
#ifdef __x86_64__
extern const struct mi_xform_kern mi_xform_kern_avx2;
extern const struct mi_xform_kern mi_xform_kern_avx512;
#endif

const struct mi_xform_kern *mi_xform_kern_get(int isa)
{
#ifdef __x86_64__
	if (isa == MI_ISA_AVX512)
		return &mi_xform_kern_avx512;
	if (isa == MI_ISA_AVX2)
		return &mi_xform_kern_avx2;
#endif
	return &mi_xform_kern_generic;
}

int mi_cpu_plan_eltwise(struct mi_graph *g, int nthreads, int isa)
{
	const struct mi_xform_kern *xk = mi_xform_kern_get(isa);
	int err;

	pthread_once(&erf_once, erf_init);
	/* chains first: they claim nodes the per-node pass would take */
	for (int p = 0; p < g->norder; p++) {
		struct mi_node *n = &g->nodes[g->order[p]];

		if (is(n, "Erf") || is(n, "Tanh")) {
			err = plan_gelu(g, n, nthreads, xk);
			if (err)
				return err;
		}
	}
	for (int p = 0; p < g->norder; p++) {
		err = plan_node(g, &g->nodes[g->order[p]], nthreads, xk);
		if (err)
			return err;
	}
	return mi_cpu_plan_xform(g, nthreads);
}
