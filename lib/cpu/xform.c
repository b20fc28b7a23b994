// SPDX-License-Identifier: MIT
/*
 * Data-movement and reduction fast paths (fp32), planned by
 * mi_cpu_plan_eltwise() after the element-wise kernels:
 *  - Transpose, Slice (constant starts/ends/axes/steps), Concat: each is
 *    one or a few "strided copies" y[yoff + sum i_k ys_k] =
 *    x[xoff + sum i_k xs_k] over a box of dims, with size-1 axes dropped
 *    and mergeable axes merged, so a channel shuffle
 *    [1,2,C/2,HW] -> [1,C/2,2,HW] becomes C memcpy's of HW floats and a
 *    channel-axis Concat one memcpy per input per outer index.  The
 *    output is written in full (no memset as for the reference ops).
 *  - Pad (constant mode, pads >= 0): a fill and one strided copy.
 *  - ReduceMean/Sum/Max/Min over one contiguous block of axes.
 * Everything is decided at plan time from static shapes and constant
 * inputs; the output shape the executor inferred is checked against the
 * plan, anything else stays on the reference ops.
 */
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic")

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "ops/ops.h"
#include "cpu.h"
#include "cpu_plan.h"

#define XF_PAR 65536
#define XF_MAXIN 64

struct copy_desc {
	int nd;
	int64_t dims[MI_MAX_DIMS];
	int64_t xs[MI_MAX_DIMS], ys[MI_MAX_DIMS];
	int64_t xoff, yoff;
	int64_t outer; /* prod dims[0, nd-1) */
};

enum { X_COPY, X_CONCAT, X_REDUCE, X_PAD };
enum { R_SUM, R_MEAN, R_MAX, R_MIN };

struct xf_node {
	struct mi_cpu_kernel_hdr hdr;
	int kind, nthreads;
	int64_t total;            /* output elements */
	int ncopies;
	struct copy_desc c[XF_MAXIN];
	/* reduce: y[o][i] = red_m x[o][m][i] */
	int red;
	float pad_value;          /* X_PAD: border value */
	int64_t outer, mid, inner;
	/* copy folded into this one (fold_copy): original input 0, nodes
	 * marked dead */
	int orig_in, nabsorbed, absorbed[8];
};

/* ---- strided copies ------------------------------------------------------ */
static void desc_finish(struct copy_desc *d)
{
	int k = 0;

	/* drop size-1 axes */
	for (int i = 0; i < d->nd; i++)
		if (d->dims[i] != 1) {
			d->dims[k] = d->dims[i];
			d->xs[k] = d->xs[i];
			d->ys[k] = d->ys[i];
			k++;
		}
	d->nd = k;
	/* merge axis i into i-1 where both strides allow */
	k = 0;
	for (int i = 1; i < d->nd; i++) {
		if (d->xs[k] == d->dims[i] * d->xs[i] &&
		    d->ys[k] == d->dims[i] * d->ys[i]) {
			d->dims[k] *= d->dims[i];
			d->xs[k] = d->xs[i];
			d->ys[k] = d->ys[i];
		} else {
			k++;
			d->dims[k] = d->dims[i];
			d->xs[k] = d->xs[i];
			d->ys[k] = d->ys[i];
		}
	}
	d->nd = d->nd ? k + 1 : 0;
	if (!d->nd) { /* one element */
		d->nd = 1;
		d->dims[0] = 1;
		d->xs[0] = d->ys[0] = 1;
	}
	d->outer = 1;
	for (int i = 0; i < d->nd - 1; i++)
		d->outer *= d->dims[i];
}

/* rows [ob, oe) of the outer index space */
static void desc_run(const struct copy_desc *d, const float *x, float *y,
		     int64_t ob, int64_t oe)
{
	int64_t idx[MI_MAX_DIMS], xo = d->xoff, yo = d->yoff, r = ob;
	int64_t n = d->dims[d->nd - 1], sx = d->xs[d->nd - 1],
		sy = d->ys[d->nd - 1];
	int last = d->nd - 2;

	for (int k = last; k >= 0; k--) {
		idx[k] = r % d->dims[k];
		r /= d->dims[k];
		xo += idx[k] * d->xs[k];
		yo += idx[k] * d->ys[k];
	}
	for (int64_t o = ob; o < oe; o++) {
		const float *xp = x + xo;
		float *yp = y + yo;

		if (sx == 1 && sy == 1)
			memcpy(yp, xp, n * sizeof(float));
		else if (sy == 1)
			for (int64_t i = 0; i < n; i++)
				yp[i] = xp[i * sx];
		else
			for (int64_t i = 0; i < n; i++)
				yp[i * sy] = xp[i * sx];
		/* odometer */
		for (int k = last; k >= 0; k--) {
			xo += d->xs[k];
			yo += d->ys[k];
			if (++idx[k] < d->dims[k])
				break;
			xo -= d->dims[k] * d->xs[k];
			yo -= d->dims[k] * d->ys[k];
			idx[k] = 0;
		}
	}
}

/*
 * Copies split their outer units in one block per thread (mi_chunk); with
 * up to XF_DYN blocks in all, a thread copies its own block first, then
 * claims what is left of the others' in ranges (a quarter of a block),
 * copy by copy: a worker that joins late (ShuffleNetV2's channel shuffles
 * at 2 threads left the caller waiting 44 us per run, static halves) leaves
 * its half to the caller.
 */
#define XF_DYN 64

struct xf_blk {
	struct mi_work w;
} __attribute__((aligned(64)));

struct xf_job {
	const struct xf_node *f;
	const float *x[XF_MAXIN];
	float *y;
	struct xf_blk *blk; /* [copy][thread block], or NULL: static */
};

static bool xf_skip(const struct xf_job *j, int i)
{
	const struct copy_desc *d = &j->f->c[i];

	/* written in place by its producer */
	return j->x[i] == j->y + d->yoff && d->nd == 1;
}

static void copy_thread(void *ctx, int t, int nt)
{
	const struct xf_job *j = ctx;

	for (int i = 0; i < j->f->ncopies; i++) {
		const struct copy_desc *d = &j->f->c[i];
		int64_t b, e;

		if (xf_skip(j, i))
			continue;
		if (!j->blk) {
			mi_chunk(d->outer, t, nt, &b, &e);
			if (e > b)
				desc_run(d, j->x[i], j->y, b, e);
			continue;
		}
		for (int k = 0; k < nt; k++) {
			int bt = (t + k) % nt;
			struct mi_work *w = &j->blk[i * nt + bt].w;
			int64_t b0, e0;

			mi_chunk(d->outer, bt, nt, &b0, &e0);
			while (mi_work_claim(w, &b, &e))
				desc_run(d, j->x[i], j->y, b0 + b, b0 + e);
		}
	}
}

/* ---- reductions ---------------------------------------------------------- */
static void reduce_thread(void *ctx, int t, int nt)
{
	const struct xf_job *j = ctx;
	const struct xf_node *f = j->f;
	int64_t b, e;

	mi_chunk(f->outer, t, nt, &b, &e);
	for (int64_t o = b; o < e; o++) {
		const float *x = j->x[0] + o * f->mid * f->inner;
		float *y = j->y + o * f->inner;

		if (f->inner == 1) {
			double s = 0;
			float m = x[0];

			if (f->red == R_SUM || f->red == R_MEAN) {
				/* 8 float lanes, summed in double */
				float acc[8] = { 0 };
				int64_t i;

				for (i = 0; i + 8 <= f->mid; i += 8)
					for (int k = 0; k < 8; k++)
						acc[k] += x[i + k];
				for (; i < f->mid; i++)
					s += x[i];
				for (int k = 0; k < 8; k++)
					s += acc[k];
				y[0] = (float)(f->red == R_MEAN ? s / f->mid : s);
			} else if (f->red == R_MAX) {
				for (int64_t i = 1; i < f->mid; i++)
					m = x[i] > m || m != m ? x[i] : m;
				y[0] = m;
			} else {
				for (int64_t i = 1; i < f->mid; i++)
					m = x[i] < m || m != m ? x[i] : m;
				y[0] = m;
			}
			continue;
		}
		memcpy(y, x, f->inner * sizeof(float));
		for (int64_t m = 1; m < f->mid; m++) {
			const float *xr = x + m * f->inner;
			int64_t i;

			switch (f->red) {
			case R_SUM:
			case R_MEAN:
				for (i = 0; i < f->inner; i++)
					y[i] += xr[i];
				break;
			case R_MAX:
				for (i = 0; i < f->inner; i++)
					y[i] = xr[i] > y[i] || y[i] != y[i] ?
						       xr[i] : y[i];
				break;
			default:
				for (i = 0; i < f->inner; i++)
					y[i] = xr[i] < y[i] || y[i] != y[i] ?
						       xr[i] : y[i];
			}
		}
		if (f->red == R_MEAN) {
			float r = 1.0f / (float)f->mid;

			for (int64_t i = 0; i < f->inner; i++)
				y[i] *= r;
		}
	}
}

static int xf_run(struct mi_graph *g, struct mi_node *n)
{
	const struct xf_node *f = n->priv;
	struct mi_tensor *y = mi_out(g, n, 0);
	struct xf_job j = { .f = f, .y = y->data };
	int nin = f->kind == X_CONCAT ? f->ncopies : 1;
	int64_t units;
	int nt;

	if (!y->data || mi_tensor_numel(y) != f->total)
		return mi_graph_err(g, n, -EINVAL,
				    "fast kernel planned for another output shape");
	for (int i = 0; i < nin; i++) {
		struct mi_tensor *x = mi_in(g, n, i);

		if (!x || !x->data)
			return mi_graph_err(g, n, -EINVAL,
					    "fast kernel: missing input");
		j.x[i] = x->data;
	}
	if (f->kind == X_REDUCE) {
		if (mi_tensor_numel(mi_in(g, n, 0)) !=
		    f->outer * f->mid * f->inner)
			return mi_graph_err(g, n, -EINVAL,
					    "fast kernel planned for another input shape");
		units = f->outer;
		nt = f->outer * f->mid * f->inner < XF_PAR ? 1 : f->nthreads;
		mi_pool_run(units < nt ? (int)units : nt, reduce_thread, &j);
		return 0;
	}
	if (f->kind == X_PAD) {
		float *yp = y->data, v = f->pad_value;

		for (int64_t i = 0; i < f->total; i++)
			yp[i] = v;
	}
	if (f->kind == X_COPY || f->kind == X_PAD)
		j.x[0] = mi_in(g, n, 0)->data;
	units = f->c[0].outer;
	for (int i = 1; i < f->ncopies; i++)
		units = f->c[i].outer < units ? f->c[i].outer : units;
	nt = f->total < XF_PAR ? 1 : f->nthreads;
	nt = units < nt ? (int)(units > 0 ? units : 1) : nt;
	if (nt > 1 && f->ncopies * nt <= XF_DYN) {
		struct xf_blk blk[XF_DYN];

		for (int i = 0; i < f->ncopies; i++)
			for (int t = 0; t < nt; t++) {
				int64_t b, e;

				mi_chunk(f->c[i].outer, t, nt, &b, &e);
				mi_work_init(&blk[i * nt + t].w, e - b,
					     (e - b + 3) / 4);
			}
		j.blk = blk;
		mi_pool_run(nt, copy_thread, &j);
		return 0;
	}
	mi_pool_run(nt, copy_thread, &j);
	return 0;
}

static void xf_fini(struct mi_graph *g, struct mi_node *n)
{
	struct xf_node *f = n->priv;

	for (int i = 0; i < f->nabsorbed; i++)
		g->nodes[f->absorbed[i]].dead = false;
	if (f->nabsorbed)
		n->inputs[0] = f->orig_in;
	free(f);
}

/* ---- planning ------------------------------------------------------------ */
static void strides(const struct mi_tensor *t, int64_t *s)
{
	int64_t v = 1;

	for (int i = t->ndim - 1; i >= 0; i--) {
		s[i] = v;
		v *= t->dims[i];
	}
}

static bool f32_static(const struct mi_tensor *t)
{
	return t && t->dtype == MI_DT_FLOAT && mi_tensor_shape_known(t);
}

/* constant (or plan-time shape value) integer input i, or -ENOENT */
static int const_ints(struct mi_graph *g, struct mi_node *n, int i,
		      int64_t *v, int max, int *cnt)
{
	struct mi_tensor *t = mi_in(g, n, i);

	if (!t)
		return -ENOENT;
	if (!(t->flags & (MI_TF_CONST | MI_TF_SHAPEVAL)) || !t->data ||
	    (t->dtype != MI_DT_INT64 && t->dtype != MI_DT_INT32) ||
	    t->ndim > 1 || mi_tensor_numel(t) > max)
		return -EINVAL;
	*cnt = (int)mi_tensor_numel(t);
	for (int k = 0; k < *cnt; k++)
		v[k] = t->dtype == MI_DT_INT64 ? ((const int64_t *)t->data)[k] :
						 ((const int32_t *)t->data)[k];
	return 0;
}

static int plan_transpose(struct mi_graph *g, struct mi_node *n,
			  struct xf_node *f)
{
	struct mi_tensor *x = mi_in(g, n, 0), *y = mi_out(g, n, 0);
	int cnt, r = x->ndim, seen[MI_MAX_DIMS] = { 0 };
	const int64_t *p = mi_attr_ints(n, "perm", &cnt);
	int64_t xs[MI_MAX_DIMS];
	struct copy_desc *d = &f->c[0];

	if (n->ninputs != 1 || y->ndim != r || (p && cnt != r))
		return -EOPNOTSUPP;
	strides(x, xs);
	d->nd = r;
	for (int i = 0; i < r; i++) {
		int64_t a = p ? p[i] : r - 1 - i;

		if (a < 0 || a >= r || seen[a] || y->dims[i] != x->dims[a])
			return -EOPNOTSUPP;
		seen[a] = 1;
		d->dims[i] = y->dims[i];
		d->xs[i] = xs[a];
	}
	strides(y, d->ys);
	f->ncopies = 1;
	f->kind = X_COPY;
	desc_finish(d);
	return 0;
}

static int plan_slice(struct mi_graph *g, struct mi_node *n,
		      struct xf_node *f)
{
	struct mi_tensor *x = mi_in(g, n, 0), *y = mi_out(g, n, 0);
	int64_t st[MI_MAX_DIMS], en[MI_MAX_DIMS], ax[MI_MAX_DIMS],
		sp[MI_MAX_DIMS], xs[MI_MAX_DIMS];
	int ns, ne, na = -1, nst = -1, r = x->ndim, seen[MI_MAX_DIMS] = { 0 };
	struct copy_desc *d = &f->c[0];

	if (y->ndim != r)
		return -EOPNOTSUPP;
	if (n->ninputs >= 3) {
		int e3, e4;

		if (const_ints(g, n, 1, st, MI_MAX_DIMS, &ns) ||
		    const_ints(g, n, 2, en, MI_MAX_DIMS, &ne))
			return -EOPNOTSUPP;
		e3 = const_ints(g, n, 3, ax, MI_MAX_DIMS, &na);
		e4 = const_ints(g, n, 4, sp, MI_MAX_DIMS, &nst);
		if ((e3 && e3 != -ENOENT) || (e4 && e4 != -ENOENT))
			return -EOPNOTSUPP;
		if (e3)
			na = -1;
		if (e4)
			nst = -1;
	} else {
		const int64_t *a = mi_attr_ints(n, "starts", &ns);
		const int64_t *b = mi_attr_ints(n, "ends", &ne);
		const int64_t *c = mi_attr_ints(n, "axes", &na);

		if (!a || !b || ns > MI_MAX_DIMS || ne > MI_MAX_DIMS ||
		    (c && na > MI_MAX_DIMS))
			return -EOPNOTSUPP;
		memcpy(st, a, ns * sizeof(int64_t));
		memcpy(en, b, ne * sizeof(int64_t));
		if (c)
			memcpy(ax, c, na * sizeof(int64_t));
		else
			na = -1;
	}
	if (ns != ne || (na >= 0 && na != ns) || (nst >= 0 && nst != ns))
		return -EOPNOTSUPP;
	strides(x, xs);
	d->nd = r;
	d->xoff = 0;
	for (int i = 0; i < r; i++) {
		d->dims[i] = x->dims[i];
		d->xs[i] = xs[i];
	}
	for (int i = 0; i < ns; i++) {
		int64_t a = na >= 0 ? ax[i] : i, dim, s, step, len;

		if (a < 0)
			a += r;
		if (a < 0 || a >= r || seen[a])
			return -EOPNOTSUPP;
		seen[a] = 1;
		step = nst >= 0 ? sp[i] : 1;
		dim = x->dims[a];
		if (step == 0)
			return -EOPNOTSUPP;
		len = mi_slice_axis(dim, st[i], en[i], &step, &s);
		if (len != y->dims[a] || len < 1)
			return -EOPNOTSUPP;
		d->dims[a] = len;
		d->xs[a] = xs[a] * step;
		d->xoff += s * xs[a];
	}
	for (int i = 0; i < r; i++)
		if (d->dims[i] != y->dims[i])
			return -EOPNOTSUPP;
	strides(y, d->ys);
	f->ncopies = 1;
	f->kind = X_COPY;
	desc_finish(d);
	return 0;
}

static int plan_concat(struct mi_graph *g, struct mi_node *n,
		       struct xf_node *f)
{
	struct mi_tensor *y = mi_out(g, n, 0);
	int64_t axis = mi_attr_int(n, "axis", 1), pos = 0, outer = 1, inner = 1;
	int r = y->ndim;

	if (n->ninputs < 1 || n->ninputs > XF_MAXIN || r < 1)
		return -EOPNOTSUPP;
	if (axis < 0)
		axis += r;
	if (axis < 0 || axis >= r)
		return -EOPNOTSUPP;
	for (int i = 0; i < axis; i++)
		outer *= y->dims[i];
	for (int i = axis + 1; i < r; i++)
		inner *= y->dims[i];
	for (int k = 0; k < n->ninputs; k++) {
		struct mi_tensor *x = mi_in(g, n, k);
		struct copy_desc *d = &f->c[k];

		if (!f32_static(x) || x->ndim != r)
			return -EOPNOTSUPP;
		for (int i = 0; i < r; i++)
			if (i != axis && x->dims[i] != y->dims[i])
				return -EOPNOTSUPP;
		d->nd = 2;
		d->dims[0] = outer;
		d->dims[1] = x->dims[axis] * inner;
		d->xs[0] = d->dims[1];
		d->xs[1] = 1;
		d->ys[0] = y->dims[axis] * inner;
		d->ys[1] = 1;
		d->xoff = 0;
		d->yoff = pos * inner;
		pos += x->dims[axis];
		if (d->dims[1] == 0)
			return -EOPNOTSUPP;
		desc_finish(d);
	}
	if (pos != y->dims[axis])
		return -EOPNOTSUPP;
	f->ncopies = n->ninputs;
	f->kind = X_CONCAT;
	return 0;
}

/* Pad, mode constant, pads >= 0 (constant input or attribute), value
 * constant: fill + one strided copy; all pads 0 is a plain copy (view). */
static int plan_pad(struct mi_graph *g, struct mi_node *n, struct xf_node *f)
{
	struct mi_tensor *x = mi_in(g, n, 0), *y = mi_out(g, n, 0);
	const char *mode = mi_attr_string(n, "mode", "constant");
	int64_t pads[2 * MI_MAX_DIMS], xs[MI_MAX_DIMS];
	int r = x->ndim, cnt = 0;
	struct copy_desc *d = &f->c[0];
	bool any = false;

	if (strcmp(mode, "constant") || y->ndim != r || n->ninputs > 3)
		return -EOPNOTSUPP;
	f->pad_value = 0;
	if (g->opset >= 11) {
		struct mi_tensor *v = mi_in(g, n, 2);

		if (const_ints(g, n, 1, pads, 2 * MI_MAX_DIMS, &cnt))
			return -EOPNOTSUPP;
		if (v) {
			if (!(v->flags & MI_TF_CONST) || !v->data ||
			    v->dtype != MI_DT_FLOAT || mi_tensor_numel(v) != 1)
				return -EOPNOTSUPP;
			f->pad_value = *(const float *)v->data;
		}
	} else {
		const int64_t *a = mi_attr_ints(n, "pads", &cnt);

		if (!a || cnt > 2 * MI_MAX_DIMS || n->ninputs != 1)
			return -EOPNOTSUPP;
		memcpy(pads, a, cnt * sizeof(int64_t));
		f->pad_value = mi_attr_float(n, "value", 0.0f);
	}
	if (cnt != 2 * r)
		return -EOPNOTSUPP;
	strides(x, xs);
	strides(y, d->ys);
	d->nd = r;
	d->xoff = d->yoff = 0;
	for (int i = 0; i < r; i++) {
		if (pads[i] < 0 || pads[r + i] < 0 ||
		    y->dims[i] != x->dims[i] + pads[i] + pads[r + i])
			return -EOPNOTSUPP;
		any |= pads[i] || pads[r + i];
		d->dims[i] = x->dims[i];
		d->xs[i] = xs[i];
		d->yoff += pads[i] * d->ys[i];
	}
	if (mi_tensor_numel(x) < 1)
		return -EOPNOTSUPP;
	f->ncopies = 1;
	f->kind = any ? X_PAD : X_COPY;
	desc_finish(d);
	return 0;
}

static int plan_reduce(struct mi_graph *g, struct mi_node *n,
		       struct xf_node *f)
{
	static const struct {
		const char *name;
		int red;
	} reds[] = {
		{ "ReduceSum", R_SUM }, { "ReduceMean", R_MEAN },
		{ "ReduceMax", R_MAX }, { "ReduceMin", R_MIN },
	};
	struct mi_tensor *x = mi_in(g, n, 0), *y = mi_out(g, n, 0);
	int64_t ax[MI_MAX_DIMS];
	int cnt = 0, mask[MI_MAX_DIMS] = { 0 }, k = -1, l = -1, err;

	f->red = -1;
	for (size_t i = 0; i < sizeof(reds) / sizeof(reds[0]); i++)
		if (!strcmp(n->op_type, reds[i].name))
			f->red = reds[i].red;
	if (f->red < 0 || x->ndim < 1)
		return -EOPNOTSUPP;
	err = const_ints(g, n, 1, ax, MI_MAX_DIMS, &cnt);
	if (err == -ENOENT) {
		const int64_t *a = mi_attr_ints(n, "axes", &cnt);

		if (cnt > MI_MAX_DIMS)
			return -EOPNOTSUPP;
		if (a)
			memcpy(ax, a, cnt * sizeof(int64_t));
		else
			cnt = 0;
	} else if (err) {
		return -EOPNOTSUPP;
	}
	if (!cnt && mi_attr_int(n, "noop_with_empty_axes", 0))
		return -EOPNOTSUPP;
	for (int i = 0; i < cnt; i++) {
		int64_t a = ax[i] < 0 ? ax[i] + x->ndim : ax[i];

		if (a < 0 || a >= x->ndim)
			return -EOPNOTSUPP;
		mask[a] = 1;
	}
	for (int i = 0; i < x->ndim; i++) {
		if (!cnt)
			mask[i] = 1;
		if (mask[i] && x->dims[i] != 1) {
			if (k < 0)
				k = i;
			else
				for (int m = l + 1; m < i; m++)
					if (x->dims[m] != 1)
						return -EOPNOTSUPP;
			l = i;
		}
	}
	if (k < 0)
		return -EOPNOTSUPP; /* nothing to reduce: a copy */
	f->outer = f->mid = f->inner = 1;
	for (int i = 0; i < x->ndim; i++) {
		if (i < k)
			f->outer *= x->dims[i];
		else if (i <= l)
			f->mid *= x->dims[i];
		else
			f->inner *= x->dims[i];
	}
	if (mi_tensor_numel(y) != f->outer * f->inner || f->mid < 1)
		return -EOPNOTSUPP;
	f->kind = X_REDUCE;
	return 0;
}

static int plan_one(struct mi_graph *g, struct mi_node *n, int nthreads)
{
	struct mi_tensor *y;
	struct xf_node *f;
	int err = -EOPNOTSUPP;

	if (n->dead || n->priv || n->domain[0] || n->noutputs != 1 ||
	    n->ninputs < 1)
		return 0;
	y = mi_out(g, n, 0);
	if (!f32_static(y) || y->data || (y->flags & MI_TF_CONST) ||
	    !f32_static(mi_in(g, n, 0)) || mi_tensor_numel(y) < 1)
		return 0;
	if (strcmp(n->op_type, "Transpose") && strcmp(n->op_type, "Slice") &&
	    strcmp(n->op_type, "Concat") && strcmp(n->op_type, "Pad") &&
	    strncmp(n->op_type, "Reduce", 6))
		return 0;
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->hdr.run = xf_run;
	f->hdr.fini = xf_fini;
	f->nthreads = nthreads;
	f->total = mi_tensor_numel(y);
	if (!strcmp(n->op_type, "Transpose"))
		err = plan_transpose(g, n, f);
	else if (!strcmp(n->op_type, "Slice"))
		err = plan_slice(g, n, f);
	else if (!strcmp(n->op_type, "Concat"))
		err = plan_concat(g, n, f);
	else if (!strcmp(n->op_type, "Pad"))
		err = plan_pad(g, n, f);
	else
		err = plan_reduce(g, n, f);
	if (err) {
		free(f);
		return 0;
	}
	n->priv = f;
	return 0;
}

/* ---- copy folding ---------------------------------------------------------- */
static bool pure_view(const struct mi_node *n)
{
	static const char *const ops[] = { "Reshape", "Flatten", "Squeeze",
					   "Unsqueeze" };

	if (n->dead || n->priv || n->domain[0] || n->noutputs != 1)
		return false;
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		if (!strcmp(n->op_type, ops[i]))
			return true;
	return false;
}

/*
 * y = T(view(S(x))): T's input, read through views, is S's contiguous
 * output t.  S maps t's flat index (digits over S's dims D, row-major,
 * digit j of weight B_j) to x; T reads t-flat offsets i * s_k.  Each T
 * axis is cut where it crosses a digit of D (it must step through whole
 * digits: s_k a multiple of B_j, and B_j D_j a multiple of s_k when it
 * continues into the next digit); every piece then reads x with stride
 * (s_k / B_j) * xs_j, so T reads x directly.  -1 when it does not fit.
 */
static int compose(const struct copy_desc *S, struct copy_desc *T)
{
	int64_t B[MI_MAX_DIMS], w = 1;
	struct copy_desc o = *T;
	int nd = 0;

	for (int j = S->nd - 1; j >= 0; j--) {
		B[j] = w;
		w *= S->dims[j];
	}
	if (T->xoff != 0)
		return -1; /* T itself reads from an offset: keep it simple */
	for (int k = 0; k < T->nd; k++) {
		int64_t sk = T->xs[k], e = T->dims[k], yk = T->ys[k];
		int64_t pd[MI_MAX_DIMS], px[MI_MAX_DIMS], py[MI_MAX_DIMS];
		int np = 0;

		while (e > 1) {
			int j;
			int64_t cap;

			for (j = 0; j < S->nd; j++)
				if (sk >= B[j] && sk < B[j] * S->dims[j])
					break;
			if (j == S->nd || sk <= 0 || sk % B[j] ||
			    np == MI_MAX_DIMS)
				return -1;
			cap = B[j] * S->dims[j] / sk; /* steps left in digit j */
			pd[np] = e <= cap ? e : cap;
			px[np] = sk / B[j] * S->xs[j];
			py[np] = yk;
			if (e > cap && (e % cap || (B[j] * S->dims[j]) % sk))
				return -1;
			np++;
			if (e <= cap)
				break;
			e /= cap;
			sk *= cap;
			yk *= cap;
		}
		if (nd + np > MI_MAX_DIMS)
			return -1;
		for (int q = np - 1; q >= 0; q--) { /* outer piece first */
			o.dims[nd] = pd[q];
			o.xs[nd] = px[q];
			o.ys[nd] = py[q];
			nd++;
		}
	}
	o.nd = nd;
	o.xoff = S->xoff;
	o.yoff = T->yoff;
	*T = o;
	return 0;
}

static void fold_copy(struct mi_graph *g, struct mi_node *n)
{
	struct xf_node *f = n->priv, *sf;
	struct copy_desc d;
	int chain[8], nc = 0, u = n->inputs[0], ni = (int)(n - g->nodes);
	int consumer = ni;
	struct mi_node *p;

	if (!f || f->hdr.run != xf_run || f->kind != X_COPY || n->dead)
		return;
	for (;;) {
		p = g->tensors[u].producer >= 0 ?
			    &g->nodes[g->tensors[u].producer] : NULL;
		if (!p || mi_graph_sole_consumer(g, u) != consumer ||
		    nc >= 7)
			return;
		if (!pure_view(p))
			break;
		chain[nc++] = (int)(p - g->nodes);
		consumer = (int)(p - g->nodes);
		u = p->inputs[0];
	}
	sf = p->priv;
	if (p->dead || !sf || sf->hdr.run != xf_run || sf->kind != X_COPY ||
	    p->noutputs != 1 || p->outputs[0] != u)
		return;
	d = f->c[0];
	if (compose(&sf->c[0], &d))
		return;
	desc_finish(&d);
	f->c[0] = d;
	f->orig_in = n->inputs[0];
	n->inputs[0] = p->inputs[0];
	for (int i = 0; i < nc; i++) {
		g->nodes[chain[i]].dead = true;
		f->absorbed[f->nabsorbed++] = chain[i];
	}
	p->dead = true;
	f->absorbed[f->nabsorbed++] = (int)(p - g->nodes);
}

int mi_cpu_concat_inplace(struct mi_graph *g, struct mi_node *n,
			  int64_t *off)
{
	const struct xf_node *f = n->priv;

	if (!f || f->hdr.run != xf_run || f->kind != X_CONCAT ||
	    f->ncopies != n->ninputs)
		return -1;
	for (int k = 0; k < f->ncopies; k++) {
		if (f->c[k].nd != 1 || f->c[k].xs[0] != 1 || f->c[k].ys[0] != 1)
			return -1;
		off[k] = f->c[k].yoff;
	}
	return 0;
}

int mi_cpu_view_offset(struct mi_graph *g, struct mi_node *n, size_t *off)
{
	const struct xf_node *f = n->priv;

	if (!f || f->hdr.run != xf_run || f->kind != X_COPY ||
	    f->c[0].nd != 1 || f->c[0].xs[0] != 1 || f->c[0].ys[0] != 1 ||
	    f->c[0].yoff != 0 || f->c[0].xoff < 0)
		return -1;
	*off = (size_t)f->c[0].xoff * sizeof(float);
	return 0;
}

int mi_cpu_plan_xform(struct mi_graph *g, int nthreads)
{
	for (int p = 0; p < g->norder; p++) {
		int err = plan_one(g, &g->nodes[g->order[p]], nthreads);

		if (err)
			return err;
	}
	/* in order: a folded copy can be the source of a later fold */
	for (int p = 0; p < g->norder; p++)
		fold_copy(g, &g->nodes[g->order[p]]);
	return 0;
}
