// SPDX-License-Identifier: MIT
/*
 * Reductions: ReduceSum/Mean/Max/Min/Prod/L1/L2/LogSum/LogSumExp/
 * SumSquare (axes as attribute or, from opset 13 for ReduceSum, as input;
 * keepdims, noop_with_empty_axes), ArgMax/ArgMin (select_last_index),
 * CumSum, TopK.  Accumulation in double.
 */
#include <math.h>
#include <stdlib.h>

#include "ops/ops.h"

#define MAXV 64

enum red { R_SUM, R_MEAN, R_MAX, R_MIN, R_PROD, R_L1, R_L2, R_LOGSUM,
	   R_LOGSUMEXP, R_SUMSQ };

static const struct {
	const char *name;
	enum red r;
} reds[] = {
	{ "ReduceSum", R_SUM },	      { "ReduceMean", R_MEAN },
	{ "ReduceMax", R_MAX },	      { "ReduceMin", R_MIN },
	{ "ReduceProd", R_PROD },     { "ReduceL1", R_L1 },
	{ "ReduceL2", R_L2 },	      { "ReduceLogSum", R_LOGSUM },
	{ "ReduceLogSumExp", R_LOGSUMEXP }, { "ReduceSumSquare", R_SUMSQ },
};

static enum red red_kind(const struct mi_node *n)
{
	for (size_t i = 0; i < sizeof(reds) / sizeof(reds[0]); i++)
		if (!strcmp(reds[i].name, n->op_type))
			return reds[i].r;
	return R_SUM;
}

/* mask[d] = 1 for reduced dims; *noop when nothing is reduced. */
static int red_axes(struct mi_graph *g, struct mi_node *n, int *mask,
		    int *noop)
{
	struct mi_tensor *x = mi_in(g, n, 0);
	int64_t ax[MAXV];
	int cnt, ret, have;

	*noop = 0;
	ret = mi_ops_input_ints(g, n, 1, ax, MAXV, &cnt);
	if (ret == -ENOENT) {
		const int64_t *a = mi_attr_ints(n, "axes", &cnt);

		if (cnt > MAXV)
			return mi_graph_err(g, n, -EINVAL, "too many axes");
		if (a)
			memcpy(ax, a, cnt * sizeof(int64_t));
		ret = 0;
	}
	if (ret)
		return ret;
	have = cnt > 0;
	for (int d = 0; d < x->ndim; d++)
		mask[d] = !have;
	if (!have && mi_attr_int(n, "noop_with_empty_axes", 0)) {
		*noop = 1;
		for (int d = 0; d < x->ndim; d++)
			mask[d] = 0;
		return 0;
	}
	for (int i = 0; i < cnt; i++) {
		int a;

		ret = mi_ops_axis(g, n, "axes value", ax[i], x->ndim, &a);
		if (ret)
			return ret;
		mask[a] = 1;
	}
	return 0;
}

static int red_infer(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0);
	int mask[MI_MAX_DIMS], noop, nd = 0;
	int keep = mi_attr_int(n, "keepdims", 1) != 0;
	int64_t dims[MI_MAX_DIMS];
	int ret = mi_ops_need_rank(g, n, 0);

	if (ret)
		return ret;
	if (!mi_ops_is_float(x->dtype) && !mi_ops_is_int(x->dtype))
		return mi_graph_err(g, n, -EOPNOTSUPP, "dtype %s unsupported",
				    mi_dtype_name(x->dtype));
	ret = red_axes(g, n, mask, &noop);
	if (ret)
		return ret;
	for (int d = 0; d < x->ndim; d++) {
		if (!mask[d])
			dims[nd++] = x->dims[d];
		else if (keep)
			dims[nd++] = 1;
	}
	return mi_ops_set_out(g, n, 0, x->dtype, nd, dims);
}

static int red_run(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0), *y = mi_ops_out(g, n, 0);
	int mask[MI_MAX_DIMS], noop, kd[MI_MAX_DIMS], rd[MI_MAX_DIMS];
	int nk = 0, nr = 0, ret = red_axes(g, n, mask, &noop);
	int64_t xs[MI_MAX_DIMS], nout = 1, nred = 1;
	enum red r = red_kind(n);

	if (ret)
		return ret;
	mi_ops_strides(x->ndim, x->dims, xs);
	for (int d = 0; d < x->ndim; d++) {
		if (mask[d]) {
			rd[nr++] = d;
			nred *= x->dims[d];
		} else {
			kd[nk++] = d;
			nout *= x->dims[d];
		}
	}
	for (int64_t o = 0; o < nout; o++) {
		int64_t base = 0, rr = o;
		double acc;

		for (int i = nk - 1; i >= 0; i--) {
			base += (rr % x->dims[kd[i]]) * xs[kd[i]];
			rr /= x->dims[kd[i]];
		}
		acc = r == R_MAX ? -INFINITY : r == R_MIN ? INFINITY :
		      r == R_PROD ? 1 : 0;
		for (int64_t k = 0; k < nred; k++) {
			int64_t off = base, q = k;
			double v;

			for (int i = nr - 1; i >= 0; i--) {
				off += (q % x->dims[rd[i]]) * xs[rd[i]];
				q /= x->dims[rd[i]];
			}
			v = mi_ops_rd(x, off);
			switch (r) {
			case R_MAX: acc = v > acc ? v : acc; break;
			case R_MIN: acc = v < acc ? v : acc; break;
			case R_PROD: acc *= v; break;
			case R_L1: acc += fabs(v); break;
			case R_L2: case R_SUMSQ: acc += v * v; break;
			case R_LOGSUMEXP: acc += exp(v); break;
			default: acc += v; break;
			}
		}
		switch (r) {
		case R_MEAN: acc = nred ? acc / nred : NAN; break;
		case R_L2: acc = sqrt(acc); break;
		case R_LOGSUM: case R_LOGSUMEXP: acc = log(acc); break;
		default: break;
		}
		if (mi_ops_is_int(y->dtype) && r == R_MEAN)
			acc = trunc(acc);
		mi_ops_wr(y, o, acc);
	}
	return 0;
}

/* ---- ArgMax / ArgMin ----------------------------------------------------- */

static int arg_infer(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0);
	int keep = mi_attr_int(n, "keepdims", 1) != 0, axis, nd = 0;
	int64_t dims[MI_MAX_DIMS];
	int ret = mi_ops_need_rank(g, n, 0);

	if (ret)
		return ret;
	if (!mi_ops_is_float(x->dtype) && !mi_ops_is_int(x->dtype))
		return mi_graph_err(g, n, -EOPNOTSUPP, "dtype %s unsupported",
				    mi_dtype_name(x->dtype));
	ret = mi_ops_axis(g, n, "axis", mi_attr_int(n, "axis", 0), x->ndim,
			  &axis);
	if (ret)
		return ret;
	for (int d = 0; d < x->ndim; d++) {
		if (d != axis)
			dims[nd++] = x->dims[d];
		else if (keep)
			dims[nd++] = 1;
	}
	return mi_ops_set_out(g, n, 0, MI_DT_INT64, nd, dims);
}

static int arg_run(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0), *y = mi_ops_out(g, n, 0);
	int last = mi_attr_int(n, "select_last_index", 0) != 0, axis;
	int ismax = !strcmp(n->op_type, "ArgMax");
	int64_t outer, len, inner;

	mi_ops_axis(g, n, "axis", mi_attr_int(n, "axis", 0), x->ndim, &axis);
	outer = mi_ops_prod(x->dims, 0, axis);
	len = x->dims[axis];
	inner = mi_ops_prod(x->dims, axis + 1, x->ndim);
	for (int64_t o = 0; o < outer; o++)
		for (int64_t i = 0; i < inner; i++) {
			int64_t best = 0;
			double bv = 0;

			for (int64_t k = 0; k < len; k++) {
				double v = mi_ops_rd(x, (o * len + k) * inner + i);
				int better = k == 0 ||
					     (ismax ? (last ? v >= bv : v > bv) :
						      (last ? v <= bv : v < bv));

				if (better) {
					bv = v;
					best = k;
				}
			}
			((int64_t *)y->data)[o * inner + i] = best;
		}
	return 0;
}

/* ---- CumSum ------------------------------------------------------------------- */

static int cumsum_infer(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0), *a = mi_in(g, n, 1);
	int ret = mi_ops_same_as(g, n, 0, 0);

	if (ret)
		return ret;
	if (!mi_ops_is_float(x->dtype) && !mi_ops_is_int(x->dtype))
		return mi_graph_err(g, n, -EOPNOTSUPP, "dtype %s unsupported",
				    mi_dtype_name(x->dtype));
	if (!a || (a->ndim >= 0 && a->ndim > 1) ||
	    (a->ndim >= 0 && mi_tensor_numel(a) != 1 && mi_tensor_numel(a) >= 0))
		return mi_graph_err(g, n, -EINVAL, "axis must be a scalar");
	if (!mi_ops_is_int(a->dtype))
		return mi_graph_err(g, n, -EINVAL, "axis must be an integer");
	return 0;
}

static int cumsum_run(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0), *y = mi_ops_out(g, n, 0);
	int excl = mi_attr_int(n, "exclusive", 0) != 0;
	int rev = mi_attr_int(n, "reverse", 0) != 0, axis;
	int64_t outer, len, inner;
	int ret = mi_ops_axis(g, n, "axis", mi_tensor_get_i64(mi_in(g, n, 1), 0),
			      x->ndim, &axis);

	if (ret)
		return ret;
	outer = mi_ops_prod(x->dims, 0, axis);
	len = x->dims[axis];
	inner = mi_ops_prod(x->dims, axis + 1, x->ndim);
	for (int64_t o = 0; o < outer; o++)
		for (int64_t i = 0; i < inner; i++) {
			double acc = 0;

			for (int64_t t = 0; t < len; t++) {
				int64_t k = rev ? len - 1 - t : t;
				int64_t off = (o * len + k) * inner + i;
				double v = mi_ops_rd(x, off);

				if (excl) {
					mi_ops_wr(y, off, acc);
					acc += v;
				} else {
					acc += v;
					mi_ops_wr(y, off, acc);
				}
			}
		}
	return 0;
}

/* ---- TopK ------------------------------------------------------------------------- */

static int topk_k(struct mi_graph *g, struct mi_node *n, int64_t *k)
{
	struct mi_tensor *kt = mi_in(g, n, 1);

	if (!kt) {
		if (!mi_attr_get(n, "k"))
			return mi_graph_err(g, n, -EINVAL, "k is required");
		*k = mi_attr_int(n, "k", 0);
	} else {
		if (!kt->data)
			return -EAGAIN;
		if (mi_tensor_numel(kt) != 1 || !mi_ops_is_int(kt->dtype))
			return mi_graph_err(g, n, -EINVAL,
					    "K must be a one-element integer tensor");
		*k = mi_tensor_get_i64(kt, 0);
	}
	return 0;
}

static int topk_infer(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0);
	int64_t k = -1, dims[MI_MAX_DIMS];
	int axis, ret = mi_ops_need_rank(g, n, 0);

	if (ret)
		return ret;
	if (!mi_ops_is_float(x->dtype) && !mi_ops_is_int(x->dtype))
		return mi_graph_err(g, n, -EOPNOTSUPP, "dtype %s unsupported",
				    mi_dtype_name(x->dtype));
	ret = mi_ops_axis(g, n, "axis", mi_attr_int(n, "axis", -1), x->ndim,
			  &axis);
	if (ret)
		return ret;
	memcpy(dims, x->dims, sizeof(dims));
	ret = topk_k(g, n, &k);
	if (ret == -EAGAIN)
		k = -1;
	else if (ret)
		return ret;
	else if (k < 0 || (x->dims[axis] >= 0 && k > x->dims[axis]))
		return mi_graph_err(g, n, -EINVAL, "k = %lld is out of range",
				    (long long)k);
	dims[axis] = k;
	if ((ret = mi_ops_set_out(g, n, 0, x->dtype, x->ndim, dims)) ||
	    (ret = mi_ops_set_out(g, n, 1, MI_DT_INT64, x->ndim, dims)))
		return ret;
	return k < 0 ? -EAGAIN : 0;
}

struct topk_ctx {
	const double *v;
	int largest;
};

static int topk_cmp(const void *a, const void *b, void *arg)
{
	const struct topk_ctx *c = arg;
	int64_t i = *(const int64_t *)a, j = *(const int64_t *)b;
	double x = c->v[i], y = c->v[j];

	if (x != y)
		return (c->largest ? x > y : x < y) ? -1 : 1;
	return i < j ? -1 : i > j;
}

static int topk_run(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0), *y = mi_ops_out(g, n, 0);
	struct mi_tensor *yi = mi_ops_out(g, n, 1);
	struct topk_ctx c;
	int axis;
	int64_t outer, len, inner, k;
	double *v;
	int64_t *idx;

	mi_ops_axis(g, n, "axis", mi_attr_int(n, "axis", -1), x->ndim, &axis);
	outer = mi_ops_prod(x->dims, 0, axis);
	len = x->dims[axis];
	inner = mi_ops_prod(x->dims, axis + 1, x->ndim);
	k = y->dims[axis];
	v = malloc((len + 1) * sizeof(double));
	idx = malloc((len + 1) * sizeof(int64_t));
	if (!v || !idx) {
		free(v);
		free(idx);
		return -ENOMEM;
	}
	c.v = v;
	c.largest = mi_attr_int(n, "largest", 1) != 0;
	for (int64_t o = 0; o < outer; o++)
		for (int64_t i = 0; i < inner; i++) {
			for (int64_t t = 0; t < len; t++) {
				v[t] = mi_ops_rd(x, (o * len + t) * inner + i);
				idx[t] = t;
			}
			qsort_r(idx, len, sizeof(int64_t), topk_cmp, &c);
			for (int64_t t = 0; t < k; t++) {
				int64_t off = (o * k + t) * inner + i;

				mi_ops_wr(y, off, v[idx[t]]);
				if (yi && yi->data)
					((int64_t *)yi->data)[off] = idx[t];
			}
		}
	free(v);
	free(idx);
	return 0;
}

#define RED(NAME) { NAME, "", 1, 2, 1, 1, red_infer, red_run }

const struct mi_op_def mi_ops_reduce[] = {
	RED("ReduceSum"),
	RED("ReduceMean"),
	RED("ReduceMax"),
	RED("ReduceMin"),
	RED("ReduceProd"),
	RED("ReduceL1"),
	RED("ReduceL2"),
	RED("ReduceLogSum"),
	RED("ReduceLogSumExp"),
	RED("ReduceSumSquare"),
	{ "ArgMax", "", 1, 1, 1, 1, arg_infer, arg_run },
	{ "ArgMin", "", 1, 1, 1, 1, arg_infer, arg_run },
	{ "CumSum", "", 2, 2, 1, 1, cumsum_infer, cumsum_run },
	{ "TopK", "", 1, 2, 2, 2, topk_infer, topk_run },
	{ NULL }
};
