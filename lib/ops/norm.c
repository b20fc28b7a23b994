// SPDX-License-Identifier: MIT
/*
 * Normalizations and softmax family: BatchNormalization (inference and
 * training_mode), LayerNormalization, InstanceNormalization, LRN,
 * MeanVarianceNormalization, Softmax, LogSoftmax, Hardmax (axis semantics
 * of opset < 13 and >= 13).  Float dtypes; accumulation in double.
 */
#include <math.h>
#include <stdlib.h>

#include "ops/ops.h"

static int float_in(struct mi_graph *g, struct mi_node *n, int i)
{
	struct mi_tensor *t = mi_in(g, n, i);
	int ret = mi_ops_need_rank(g, n, i);

	if (ret)
		return ret;
	if (!mi_ops_is_float(t->dtype))
		return mi_graph_err(g, n, -EOPNOTSUPP,
				    "input %d dtype %s unsupported", i,
				    mi_dtype_name(t->dtype));
	return 0;
}

/* ---- BatchNormalization ---------------------------------------------------- */

static int bn_infer(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0);
	int ret, training = (int)mi_attr_int(n, "training_mode", 0);

	for (int i = 0; i < 5; i++)
		if ((ret = float_in(g, n, i)))
			return ret;
	if (x->ndim < 2)
		return mi_graph_err(g, n, -EINVAL, "X must have rank >= 2");
	if (!mi_attr_int(n, "spatial", 1))
		return mi_graph_err(g, n, -EOPNOTSUPP,
				    "legacy attribute spatial=0 is not supported");
	for (int i = 1; i < 5; i++) {
		struct mi_tensor *p = mi_in(g, n, i);

		if (p->ndim != 1 ||
		    (p->dims[0] >= 0 && x->dims[1] >= 0 &&
		     p->dims[0] != x->dims[1]))
			return mi_graph_err(g, n, -EINVAL,
					    "input %d must have shape [C]", i);
	}
	if (training && n->noutputs > 3)
		return mi_graph_err(g, n, -EOPNOTSUPP,
				    "training outputs beyond running stats");
	ret = mi_ops_same_as(g, n, 0, 0);
	for (int o = 1; o < n->noutputs && !ret; o++)
		ret = mi_ops_set_out(g, n, o, x->dtype, 1, &x->dims[1]);
	return ret;
}

static int bn_run(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0), *y = mi_ops_out(g, n, 0);
	struct mi_tensor *sc = mi_in(g, n, 1), *bi = mi_in(g, n, 2);
	struct mi_tensor *mean = mi_in(g, n, 3), *var = mi_in(g, n, 4);
	struct mi_tensor *o1 = mi_ops_out(g, n, 1), *o2 = mi_ops_out(g, n, 2);
	double eps = mi_attr_float(n, "epsilon", 1e-5f);
	double mom = mi_attr_float(n, "momentum", 0.9f);
	int training = (int)mi_attr_int(n, "training_mode", 0);
	int64_t N = x->dims[0], C = x->dims[1];
	int64_t sz = mi_ops_prod(x->dims, 2, x->ndim);

	for (int64_t c = 0; c < C; c++) {
		double m = mi_ops_rd(mean, c), v = mi_ops_rd(var, c);
		double s, b;

		if (training) {
			double sum = 0, sq = 0, cnt = (double)(N * sz);

			for (int64_t b2 = 0; b2 < N; b2++)
				for (int64_t i = 0; i < sz; i++)
					sum += mi_ops_rd(x, (b2 * C + c) * sz + i);
			m = cnt ? sum / cnt : 0;
			for (int64_t b2 = 0; b2 < N; b2++)
				for (int64_t i = 0; i < sz; i++) {
					double d = mi_ops_rd(
						x, (b2 * C + c) * sz + i) - m;
					sq += d * d;
				}
			v = cnt ? sq / cnt : 0;
			if (o1)
				mi_ops_wr(o1, c,
					  mi_ops_rd(mean, c) * mom + m * (1 - mom));
			if (o2)
				mi_ops_wr(o2, c,
					  mi_ops_rd(var, c) * mom + v * (1 - mom));
		} else {
			if (o1)
				mi_ops_wr(o1, c, m);
			if (o2)
				mi_ops_wr(o2, c, v);
		}
		s = mi_ops_rd(sc, c) / sqrt(v + eps);
		b = mi_ops_rd(bi, c) - m * s;
		for (int64_t b2 = 0; b2 < N; b2++)
			for (int64_t i = 0; i < sz; i++) {
				int64_t idx = (b2 * C + c) * sz + i;

				mi_ops_wr(y, idx, mi_ops_rd(x, idx) * s + b);
			}
	}
	return 0;
}

/* ---- InstanceNormalization --------------------------------------------------- */

static int in_infer(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0);
	int ret;

	for (int i = 0; i < 3; i++)
		if ((ret = float_in(g, n, i)))
			return ret;
	if (x->ndim < 3)
		return mi_graph_err(g, n, -EINVAL, "X must have rank >= 3");
	for (int i = 1; i < 3; i++) {
		struct mi_tensor *p = mi_in(g, n, i);

		if (p->ndim != 1 ||
		    (p->dims[0] >= 0 && x->dims[1] >= 0 &&
		     p->dims[0] != x->dims[1]))
			return mi_graph_err(g, n, -EINVAL,
					    "input %d must have shape [C]", i);
	}
	return mi_ops_same_as(g, n, 0, 0);
}

static int in_run(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0), *y = mi_ops_out(g, n, 0);
	struct mi_tensor *sc = mi_in(g, n, 1), *bi = mi_in(g, n, 2);
	double eps = mi_attr_float(n, "epsilon", 1e-5f);
	int64_t N = x->dims[0], C = x->dims[1];
	int64_t sz = mi_ops_prod(x->dims, 2, x->ndim);

	for (int64_t b = 0; b < N; b++)
		for (int64_t c = 0; c < C; c++) {
			int64_t base = (b * C + c) * sz;
			double sum = 0, sq = 0, m, s;

			for (int64_t i = 0; i < sz; i++)
				sum += mi_ops_rd(x, base + i);
			m = sz ? sum / sz : 0;
			for (int64_t i = 0; i < sz; i++) {
				double d = mi_ops_rd(x, base + i) - m;

				sq += d * d;
			}
			s = mi_ops_rd(sc, c) / sqrt((sz ? sq / sz : 0) + eps);
			for (int64_t i = 0; i < sz; i++)
				mi_ops_wr(y, base + i,
					  (mi_ops_rd(x, base + i) - m) * s +
						  mi_ops_rd(bi, c));
		}
	return 0;
}

/* ---- LayerNormalization -------------------------------------------------------- */

static int ln_infer(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0);
	struct mi_tensor *ins[3] = { x, mi_in(g, n, 1), mi_in(g, n, 2) };
	int64_t dims[MI_MAX_DIMS];
	int ret, axis, nd;

	if ((ret = float_in(g, n, 0)) || (ret = float_in(g, n, 1)))
		return ret;
	if (ins[2] && (ret = float_in(g, n, 2)))
		return ret;
	ret = mi_ops_axis(g, n, "axis", mi_attr_int(n, "axis", -1), x->ndim,
			  &axis);
	if (ret)
		return ret;
	ret = mi_bcast_infer(g, n, ins[2] ? 3 : 2, ins, &nd, dims);
	if (ret)
		return ret;
	if (nd != x->ndim)
		return mi_graph_err(g, n, -EINVAL,
				    "Scale/B do not broadcast to X");
	for (int i = 0; i < nd; i++)
		if (dims[i] >= 0 && x->dims[i] >= 0 && dims[i] != x->dims[i])
			return mi_graph_err(g, n, -EINVAL,
					    "Scale/B do not broadcast to X");
	ret = mi_ops_same_as(g, n, 0, 0);
	for (int i = 0; i < x->ndim; i++)
		dims[i] = i < axis ? x->dims[i] : 1;
	for (int o = 1; o < n->noutputs && o < 3 && !ret; o++) {
		int st = (int)mi_attr_int(n, "stash_type", 1);

		ret = mi_ops_set_out(g, n, o, st == 1 ? MI_DT_FLOAT : x->dtype,
				     x->ndim, dims);
	}
	return ret;
}

static int ln_run(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0), *y = mi_ops_out(g, n, 0);
	struct mi_tensor *sc = mi_in(g, n, 1), *bi = mi_in(g, n, 2);
	struct mi_tensor *ins[2] = { sc, bi ? bi : sc };
	struct mi_tensor *mo = mi_ops_out(g, n, 1), *io = mi_ops_out(g, n, 2);
	double eps = mi_attr_float(n, "epsilon", 1e-5f);
	struct mi_bcast bc;
	int64_t offs[2], outer, inner;
	int axis, ret;

	ret = mi_ops_axis(g, n, "axis", mi_attr_int(n, "axis", -1), x->ndim,
			  &axis);
	if (ret)
		return ret;
	outer = mi_ops_prod(x->dims, 0, axis);
	inner = mi_ops_prod(x->dims, axis, x->ndim);
	for (int64_t o = 0; o < outer; o++) {
		double sum = 0, sq = 0, m, inv;

		for (int64_t i = 0; i < inner; i++)
			sum += mi_ops_rd(x, o * inner + i);
		m = inner ? sum / inner : 0;
		for (int64_t i = 0; i < inner; i++) {
			double d = mi_ops_rd(x, o * inner + i) - m;

			sq += d * d;
		}
		inv = 1 / sqrt((inner ? sq / inner : 0) + eps);
		for (int64_t i = 0; i < inner; i++)
			mi_ops_wr(y, o * inner + i,
				  (mi_ops_rd(x, o * inner + i) - m) * inv);
		if (mo && mo->data)
			mi_ops_wr(mo, o, m);
		if (io && io->data)
			mi_ops_wr(io, o, inv);
	}
	if (mi_tensor_numel(y) == 0)
		return 0;
	mi_bcast_init(&bc, 2, ins, y);
	for (int64_t r = 0; r < bc.rows; r++) {
		mi_bcast_row(&bc, r, offs);
		for (int64_t j = 0; j < bc.inner; j++) {
			int64_t yo = r * bc.inner + j;
			double v = mi_ops_rd(y, yo) *
				   mi_ops_rd(sc, offs[0] + j * bc.step[0]);

			if (bi)
				v += mi_ops_rd(bi, offs[1] + j * bc.step[1]);
			mi_ops_wr(y, yo, v);
		}
	}
	return 0;
}

/* ---- Softmax / LogSoftmax / Hardmax --------------------------------------------- */

static int sm_geom(struct mi_graph *g, struct mi_node *n, int64_t *outer,
		   int64_t *len, int64_t *inner)
{
	struct mi_tensor *x = mi_in(g, n, 0);
	int old = g->opset < 13, axis, ret;

	ret = mi_ops_axis(g, n, "axis",
			  mi_attr_int(n, "axis", old ? 1 : -1), x->ndim, &axis);
	if (ret)
		return ret;
	*outer = mi_ops_prod(x->dims, 0, axis);
	if (old) {
		*len = mi_ops_prod(x->dims, axis, x->ndim);
		*inner = 1;
	} else {
		*len = x->dims[axis];
		*inner = mi_ops_prod(x->dims, axis + 1, x->ndim);
	}
	return 0;
}

static int sm_infer(struct mi_graph *g, struct mi_node *n)
{
	int64_t a, b, c;
	int ret = float_in(g, n, 0);

	if (ret)
		return ret;
	if (mi_in(g, n, 0)->ndim == 0)
		return mi_graph_err(g, n, -EINVAL, "input must have rank >= 1");
	ret = sm_geom(g, n, &a, &b, &c);
	if (ret)
		return ret;
	return mi_ops_same_as(g, n, 0, 0);
}

static int sm_run(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0), *y = mi_ops_out(g, n, 0);
	int64_t outer, len, inner;
	int logsm = !strcmp(n->op_type, "LogSoftmax");
	int hard = !strcmp(n->op_type, "Hardmax");
	int ret = sm_geom(g, n, &outer, &len, &inner);

	if (ret)
		return ret;
	for (int64_t o = 0; o < outer; o++)
		for (int64_t i = 0; i < inner; i++) {
			int64_t base = o * len * inner + i, best = 0;
			double mx = -INFINITY, sum = 0;

			for (int64_t k = 0; k < len; k++) {
				double v = mi_ops_rd(x, base + k * inner);

				if (v > mx) {
					mx = v;
					best = k;
				}
			}
			if (hard) {
				for (int64_t k = 0; k < len; k++)
					mi_ops_wr(y, base + k * inner, k == best);
				continue;
			}
			for (int64_t k = 0; k < len; k++)
				sum += exp(mi_ops_rd(x, base + k * inner) - mx);
			for (int64_t k = 0; k < len; k++) {
				double v = mi_ops_rd(x, base + k * inner) - mx;

				mi_ops_wr(y, base + k * inner,
					  logsm ? v - log(sum) : exp(v) / sum);
			}
		}
	return 0;
}

/* ---- LRN ------------------------------------------------------------------------ */

static int lrn_infer(struct mi_graph *g, struct mi_node *n)
{
	int ret = float_in(g, n, 0);

	if (ret)
		return ret;
	if (mi_in(g, n, 0)->ndim < 3)
		return mi_graph_err(g, n, -EINVAL, "X must have rank >= 3");
	if (mi_attr_int(n, "size", 0) < 1)
		return mi_graph_err(g, n, -EINVAL, "size must be >= 1");
	return mi_ops_same_as(g, n, 0, 0);
}

static int lrn_run(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0), *y = mi_ops_out(g, n, 0);
	int64_t size = mi_attr_int(n, "size", 1);
	double alpha = mi_attr_float(n, "alpha", 1e-4f);
	double beta = mi_attr_float(n, "beta", 0.75f);
	double bias = mi_attr_float(n, "bias", 1.0f);
	int64_t N = x->dims[0], C = x->dims[1];
	int64_t sz = mi_ops_prod(x->dims, 2, x->ndim);
	int64_t lo = (size - 1) / 2, hi = size - 1 - lo;

	for (int64_t b = 0; b < N; b++)
		for (int64_t c = 0; c < C; c++)
			for (int64_t i = 0; i < sz; i++) {
				double sq = 0, v;

				int64_t k0 = c - lo < 0 ? 0 : c - lo;
				int64_t k1 = hi > C - 1 - c ? C - 1 : c + hi;

				for (int64_t k = k0; k <= k1; k++) {
					v = mi_ops_rd(x, (b * C + k) * sz + i);
					sq += v * v;
				}
				v = mi_ops_rd(x, (b * C + c) * sz + i);
				mi_ops_wr(y, (b * C + c) * sz + i,
					  v / pow(bias + alpha / size * sq, beta));
			}
	return 0;
}

/* ---- MeanVarianceNormalization ---------------------------------------------------- */

static int mvn_axes(struct mi_graph *g, struct mi_node *n, int *mask)
{
	struct mi_tensor *x = mi_in(g, n, 0);
	static const int64_t def[] = { 0, 2, 3 };
	const int64_t *ax;
	int cnt, a, ret;

	ax = mi_attr_ints(n, "axes", &cnt);
	if (!ax) {
		ax = def;
		cnt = 3;
	}
	memset(mask, 0, MI_MAX_DIMS * sizeof(int));
	for (int i = 0; i < cnt; i++) {
		ret = mi_ops_axis(g, n, "axes value", ax[i], x->ndim, &a);
		if (ret)
			return ret;
		mask[a] = 1;
	}
	return 0;
}

static int mvn_infer(struct mi_graph *g, struct mi_node *n)
{
	int mask[MI_MAX_DIMS];
	int ret = float_in(g, n, 0);

	if (!ret)
		ret = mvn_axes(g, n, mask);
	return ret ? ret : mi_ops_same_as(g, n, 0, 0);
}

static int mvn_run(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0), *y = mi_ops_out(g, n, 0);
	int mask[MI_MAX_DIMS], ret = mvn_axes(g, n, mask);
	int64_t total = mi_tensor_numel(x), groups = 1, st[MI_MAX_DIMS];
	double *sum, *sq;
	int64_t *cnt;

	if (ret)
		return ret;
	mi_ops_strides(x->ndim, x->dims, st);
	for (int d = 0; d < x->ndim; d++)
		if (!mask[d])
			groups *= x->dims[d];
	sum = calloc(groups + 1, sizeof(double));
	sq = calloc(groups + 1, sizeof(double));
	cnt = calloc(groups + 1, sizeof(int64_t));
	if (!sum || !sq || !cnt) {
		free(sum);
		free(sq);
		free(cnt);
		return -ENOMEM;
	}
	for (int pass = 0; pass < 3; pass++)
		for (int64_t i = 0; i < total; i++) {
			int64_t gidx = 0, r = i;
			double v = mi_ops_rd(x, i), m;

			for (int d = 0; d < x->ndim; d++) {
				int64_t c = r / st[d];

				r %= st[d];
				if (!mask[d])
					gidx = gidx * x->dims[d] + c;
			}
			if (pass == 0) {
				sum[gidx] += v;
				cnt[gidx]++;
				continue;
			}
			m = sum[gidx] / cnt[gidx];
			if (pass == 1)
				sq[gidx] += (v - m) * (v - m);
			else
				mi_ops_wr(y, i,
					  (v - m) / sqrt(sq[gidx] / cnt[gidx] + 1e-9));
		}
	free(sum);
	free(sq);
	free(cnt);
	return 0;
}

const struct mi_op_def mi_ops_norm[] = {
	{ "BatchNormalization", "", 5, 5, 1, 5, bn_infer, bn_run },
	{ "InstanceNormalization", "", 3, 3, 1, 1, in_infer, in_run },
	{ "LayerNormalization", "", 2, 3, 1, 3, ln_infer, ln_run },
	{ "Softmax", "", 1, 1, 1, 1, sm_infer, sm_run },
	{ "LogSoftmax", "", 1, 1, 1, 1, sm_infer, sm_run },
	{ "Hardmax", "", 1, 1, 1, 1, sm_infer, sm_run },
	{ "LRN", "", 1, 1, 1, 1, lrn_infer, lrn_run },
	{ "MeanVarianceNormalization", "", 1, 1, 1, 1, mvn_infer, mvn_run },
	{ NULL }
};
