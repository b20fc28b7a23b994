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

#include "cpu.h"
#include "cpu_plan.h"

#define ELT_PAR 65536

enum elt_op {
	E_RELU, E_LEAKY, E_SIGMOID, E_TANH, E_ERF, E_EXP, E_SQRT, E_HSIG,
	E_HSWISH, E_COPY, E_SQUARE, E_CUBE,
	E_ADD, E_SUB, E_MUL, E_DIV,
	E_SOFTMAX,
};

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
	float *y;
	int64_t units, ulen; /* work units of ulen elements */
};

static void elt_thread(void *ctx, int t, int nt)
{
	const struct elt_job *j = ctx;
	const struct elt_node *e = j->e;
	int64_t b, end, u;

	mi_chunk(j->units, t, nt, &b, &end);
	if (e->op == E_SOFTMAX) {
		for (u = b; u < end; u++)
			softmax_row(j->x + u * j->ulen, j->y + u * j->ulen,
				    j->ulen);
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

struct same_job {
	int op;
	const float *a, *b;
	float *y;
	int64_t n;
};

static void same_thread(void *ctx, int t, int nt)
{
	const struct same_job *j = ctx;
	int64_t b, e;

	mi_chunk((j->n + 15) / 16, t, nt, &b, &e);
	b *= 16, e *= 16;
	if (e > j->n)
		e = j->n;
	if (e > b)
		bin_vec(j->op, j->a + b, j->b + b, j->y + b, e - b);
}

static int nthreads_for(const struct elt_node *e, int64_t units)
{
	int nt = e->total < ELT_PAR ? 1 : e->nthreads;

	return units < nt ? (int)(units > 0 ? units : 1) : nt;
}

static int elt_run(struct mi_graph *g, struct mi_node *n)
{
	const struct elt_node *e = n->priv;
	struct mi_tensor *y = mi_out(g, n, 0);
	struct elt_job j = { .e = e, .y = y->data };

	if (!y->data || mi_tensor_numel(y) != e->total)
		return mi_graph_err(g, n, -EINVAL,
				    "fast kernel planned for another output shape");
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

			mi_pool_run(nthreads_for(e, e->total / 16), same_thread,
				    &sj);
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
		struct mi_tensor *x = mi_in(g, n, 0);

		if (!x->data || mi_tensor_numel(x) != e->total)
			return mi_graph_err(g, n, -EINVAL,
					    "fast kernel: missing or resized input");
		j.x = x->data;
		if (e->op == E_SOFTMAX) {
			j.ulen = e->inner;
			j.units = e->total / e->inner;
		} else {
			/* blocks of 1024 elements, the last one short */
			j.ulen = 1024;
			j.units = e->total / 1024;
		}
	}
	mi_pool_run(nthreads_for(e, j.units), elt_thread, &j);
	if (e->op < E_ADD && e->total % 1024) {
		int64_t done = j.units * 1024;

		unary_run(e, j.x + done, j.y + done, e->total - done);
	}
	return 0;
}

static void elt_fini(struct mi_graph *g, struct mi_node *n)
{
	free(n->priv);
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
		return -EOPNOTSUPP;
	}
	e->small_first = e->big_slot == 1;
	if (same_dims(a, b)) {
		e->outer = e->mid = 1;
		e->inner = e->total;
		return 0;
	}
	return plan_bcast(e->big_slot ? a : b, y, e);
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

static int plan_node(struct mi_graph *g, struct mi_node *n, int nthreads)
{
	struct mi_tensor *y;
	struct elt_node *e;
	int err = -EOPNOTSUPP;

	if (n->dead || n->priv || n->domain[0] || n->noutputs != 1 ||
	    n->ninputs < 1)
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

int mi_cpu_plan_eltwise(struct mi_graph *g, int nthreads)
{
	pthread_once(&erf_once, erf_init);
	for (int p = 0; p < g->norder; p++) {
		int err = plan_node(g, &g->nodes[g->order[p]], nthreads);

		if (err)
			return err;
	}
	return 0;
}
