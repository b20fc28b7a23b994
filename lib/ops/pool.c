// SPDX-License-Identifier: MIT
/*
 * Pooling: MaxPool (Indices output, ceil_mode, dilations, storage_order),
 * AveragePool (count_include_pad, ceil_mode), LpPool, GlobalAveragePool,
 * GlobalMaxPool, GlobalLpPool.  N-d, any float dtype; MaxPool also on
 * integers.
 */
#include <math.h>

#include "ops/ops.h"

enum pool_kind { POOL_MAX, POOL_AVG, POOL_LP };

static int pool_kind(const struct mi_node *n)
{
	if (strstr(n->op_type, "Max"))
		return POOL_MAX;
	if (strstr(n->op_type, "Lp"))
		return POOL_LP;
	return POOL_AVG;
}

static int pool_setup(struct mi_graph *g, struct mi_node *n,
		      struct mi_spatial *s)
{
	struct mi_tensor *x = mi_in(g, n, 0);
	const int64_t *ks;
	int cnt, ret = mi_ops_need_rank(g, n, 0), kind = pool_kind(n);

	if (ret)
		return ret;
	if (!mi_ops_is_float(x->dtype) &&
	    !(kind == POOL_MAX && mi_ops_is_int(x->dtype)))
		return mi_graph_err(g, n, -EOPNOTSUPP, "dtype %s unsupported",
				    mi_dtype_name(x->dtype));
	if (x->ndim < 3)
		return mi_graph_err(g, n, -EINVAL,
				    "X must have rank >= 3, has %d", x->ndim);
	ks = mi_attr_ints(n, "kernel_shape", &cnt);
	if (!ks)
		return mi_graph_err(g, n, -EINVAL,
				    "kernel_shape is required");
	if (cnt != x->ndim - 2)
		return mi_graph_err(g, n, -EINVAL,
				    "kernel_shape has %d values, expected %d",
				    cnt, x->ndim - 2);
	for (int i = 0; i < cnt; i++)
		s->kernel[i] = ks[i];
	if (kind != POOL_MAX && mi_attr_get(n, "dilations")) {
		const int64_t *d = mi_attr_ints(n, "dilations", &cnt);

		for (int i = 0; i < cnt; i++)
			if (d[i] != 1)
				return mi_graph_err(g, n, -EOPNOTSUPP,
						    "dilations are not supported");
	}
	if (kind == POOL_MAX) {
		int64_t so = mi_attr_int(n, "storage_order", 0);

		if (so != 0 && so != 1)
			return mi_graph_err(g, n, -EINVAL,
					    "storage_order %lld is invalid",
					    (long long)so);
	}
	return mi_ops_spatial(g, n, s, x, kind != POOL_LP);
}

static int pool_infer(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0);
	struct mi_spatial s;
	int64_t dims[MI_MAX_DIMS];
	int ret = pool_setup(g, n, &s);

	if (ret)
		return ret;
	dims[0] = x->dims[0];
	dims[1] = x->dims[1];
	for (int i = 0; i < s.nsp; i++)
		dims[i + 2] = s.out[i];
	ret = mi_ops_set_out(g, n, 0, x->dtype, x->ndim, dims);
	if (!ret && n->noutputs > 1)
		ret = mi_ops_set_out(g, n, 1, MI_DT_INT64, x->ndim, dims);
	return ret;
}

static int pool_run(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0), *y = mi_ops_out(g, n, 0);
	struct mi_tensor *yi = n->noutputs > 1 ? mi_ops_out(g, n, 1) : NULL;
	struct mi_spatial s;
	int kind = pool_kind(n), ret = pool_setup(g, n, &s);
	int include_pad = (int)mi_attr_int(n, "count_include_pad", 0);
	int colmajor = (int)mi_attr_int(n, "storage_order", 0);
	double p = (double)mi_attr_int(n, "p", 2);
	int64_t planes, isz = 1, osz = 1, kprod = 1;
	const float *xf = x->dtype == MI_DT_FLOAT ? x->data : NULL;
	float *yf = y->dtype == MI_DT_FLOAT ? y->data : NULL;
	int64_t istr[MI_MAX_DIMS], cstr[MI_MAX_DIMS];

	if (ret)
		return ret;
	planes = x->dims[0] * x->dims[1];
	for (int i = 0; i < s.nsp; i++) {
		isz *= s.in[i];
		osz *= s.out[i];
		kprod *= s.kernel[i];
	}
	mi_ops_strides(s.nsp, s.in, istr);
	/* column-major spatial strides for storage_order 1 */
	{
		int64_t st = 1;

		for (int i = 0; i < s.nsp; i++) {
			cstr[i] = st;
			st *= s.in[i];
		}
	}
	for (int64_t pl = 0; pl < planes; pl++) {
		int64_t xb = pl * isz;

		for (int64_t op = 0; op < osz; op++) {
			int64_t start[MI_MAX_DIMS], r = op;
			double acc = kind == POOL_MAX ? -INFINITY : 0;
			int64_t cnt = 0, best = -1, padcnt = 1;

			for (int d = s.nsp - 1; d >= 0; d--) {
				int64_t o = r % s.out[d], st, en;

				r /= s.out[d];
				start[d] = o * s.stride[d] - s.pad_begin[d];
				/* window size counted with padding, limited
				 * to the padded input (ceil_mode overhang is
				 * never counted) */
				st = start[d];
				en = st + (s.kernel[d] - 1) * s.dil[d] + 1;
				if (en > s.in[d] + s.pad_end[d])
					en = s.in[d] + s.pad_end[d];
				padcnt *= en > st ? en - st : 0;
			}
			for (int64_t k = 0; k < kprod; k++) {
				int64_t rk = k, off = 0, coff = 0;
				int valid = 1;
				double v;

				for (int d = s.nsp - 1; d >= 0; d--) {
					int64_t kk = rk % s.kernel[d];
					int64_t i = start[d] + kk * s.dil[d];

					rk /= s.kernel[d];
					if (i < 0 || i >= s.in[d]) {
						valid = 0;
						break;
					}
					off += i * istr[d];
					coff += i * cstr[d];
				}
				if (!valid)
					continue;
				v = xf ? xf[xb + off] : mi_ops_get_f64(x, xb + off);
				cnt++;
				if (kind == POOL_MAX) {
					if (v > acc || best < 0) {
						acc = v;
						best = colmajor ? coff : off;
					}
				} else if (kind == POOL_AVG) {
					acc += v;
				} else {
					acc += pow(fabs(v), p);
				}
			}
			if (kind == POOL_AVG)
				acc = include_pad ? (padcnt ? acc / padcnt : 0) :
					(cnt ? acc / cnt : 0);
			else if (kind == POOL_LP)
				acc = pow(acc, 1.0 / p);
			else if (best < 0)
				acc = 0;
			if (yf)
				yf[pl * osz + op] = (float)acc;
			else
				mi_ops_set_f64(y, pl * osz + op, acc);
			if (yi)
				((int64_t *)yi->data)[pl * osz + op] =
					best < 0 ? -1 : xb + best;
		}
	}
	return 0;
}

/* ---- global pools ------------------------------------------------------------ */

static int gpool_infer(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0);
	int64_t dims[MI_MAX_DIMS];
	int ret = mi_ops_need_rank(g, n, 0);

	if (ret)
		return ret;
	if (x->ndim < 3)
		return mi_graph_err(g, n, -EINVAL,
				    "X must have rank >= 3, has %d", x->ndim);
	if (!mi_ops_is_float(x->dtype))
		return mi_graph_err(g, n, -EOPNOTSUPP, "dtype %s unsupported",
				    mi_dtype_name(x->dtype));
	dims[0] = x->dims[0];
	dims[1] = x->dims[1];
	for (int i = 2; i < x->ndim; i++)
		dims[i] = 1;
	return mi_ops_set_out(g, n, 0, x->dtype, x->ndim, dims);
}

static int gpool_run(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0), *y = mi_ops_out(g, n, 0);
	int kind = pool_kind(n);
	double p = (double)mi_attr_int(n, "p", 2);
	int64_t planes = x->dims[0] * x->dims[1];
	int64_t sz = mi_ops_prod(x->dims, 2, x->ndim);

	for (int64_t pl = 0; pl < planes; pl++) {
		double acc = kind == POOL_MAX ? -INFINITY : 0;

		for (int64_t i = 0; i < sz; i++) {
			double v = mi_ops_get_f64(x, pl * sz + i);

			if (kind == POOL_MAX)
				acc = v > acc ? v : acc;
			else if (kind == POOL_AVG)
				acc += v;
			else
				acc += pow(fabs(v), p);
		}
		if (kind == POOL_AVG)
			acc = sz ? acc / sz : 0;
		else if (kind == POOL_LP)
			acc = pow(acc, 1.0 / p);
		mi_ops_set_f64(y, pl, acc);
	}
	return 0;
}

const struct mi_op_def mi_ops_pool[] = {
	{ "MaxPool", "", 1, 1, 1, 2, pool_infer, pool_run },
	{ "AveragePool", "", 1, 1, 1, 1, pool_infer, pool_run },
	{ "LpPool", "", 1, 1, 1, 1, pool_infer, pool_run },
	{ "GlobalMaxPool", "", 1, 1, 1, 1, gpool_infer, gpool_run },
	{ "GlobalAveragePool", "", 1, 1, 1, 1, gpool_infer, gpool_run },
	{ "GlobalLpPool", "", 1, 1, 1, 1, gpool_infer, gpool_run },
	{ NULL }
};
