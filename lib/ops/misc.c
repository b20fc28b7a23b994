// SPDX-License-Identifier: MIT
/*
 * Less common operators: Compress, ReverseSequence, Det, HannWindow,
 * HammingWindow, BlackmanWindow, MaxUnpool, NonMaxSuppression.
 */
#include <math.h>
#include <stdlib.h>

#include "ops/ops.h"

/* ---- Compress -------------------------------------------------------------- */

static int compress_geom(struct mi_graph *g, struct mi_node *n, int *axis,
			 int64_t *len, int64_t *kept)
{
	struct mi_tensor *x = mi_in(g, n, 0), *c = mi_in(g, n, 1);
	const struct mi_attr *a = mi_attr_get(n, "axis");
	int64_t dim, cl;
	int ret;

	if ((ret = mi_ops_need_rank(g, n, 0)) ||
	    (ret = mi_ops_need_rank(g, n, 1)))
		return ret;
	if (c->ndim != 1 || c->dtype != MI_DT_BOOL)
		return mi_graph_err(g, n, -EINVAL,
				    "condition must be a 1-D bool tensor");
	*axis = -1;
	if (a) {
		ret = mi_ops_axis(g, n, "axis", a->i, x->ndim, axis);
		if (ret)
			return ret;
	}
	dim = *axis >= 0 ? x->dims[*axis] : mi_tensor_numel(x);
	cl = c->dims[0];
	if (cl > dim)
		return mi_graph_err(g, n, -EINVAL,
				    "condition has %lld values for %lld elements",
				    (long long)cl, (long long)dim);
	*len = dim;
	if (!c->data)
		return -EAGAIN;
	*kept = 0;
	for (int64_t i = 0; i < cl; i++)
		*kept += ((const uint8_t *)c->data)[i] != 0;
	return 0;
}

static int compress_infer(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0);
	int64_t len, kept = -1, dims[MI_MAX_DIMS];
	int axis, ret = compress_geom(g, n, &axis, &len, &kept);

	if (ret && ret != -EAGAIN)
		return ret;
	if (axis < 0) {
		ret = mi_ops_set_out(g, n, 0, x->dtype, 1, &kept) ?: ret;
	} else {
		memcpy(dims, x->dims, sizeof(dims));
		dims[axis] = kept;
		ret = mi_ops_set_out(g, n, 0, x->dtype, x->ndim, dims) ?: ret;
	}
	return ret;
}

static int compress_run(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0), *c = mi_in(g, n, 1);
	struct mi_tensor *y = mi_ops_out(g, n, 0);
	size_t es = mi_dtype_size(x->dtype);
	const uint8_t *cd = c->data;
	int64_t len, kept, outer = 1, inner = 1, k = 0;
	int axis, ret = compress_geom(g, n, &axis, &len, &kept);

	if (ret)
		return ret;
	if (axis >= 0) {
		outer = mi_ops_prod(x->dims, 0, axis);
		inner = mi_ops_prod(x->dims, axis + 1, x->ndim);
	}
	for (int64_t o = 0; o < outer; o++)
		for (int64_t i = 0; i < c->dims[0]; i++)
			if (cd[i])
				memcpy((char *)y->data + (k++) * inner * es,
				       (const char *)x->data +
					       (o * len + i) * inner * es,
				       inner * es);
	return 0;
}

/* ---- ReverseSequence ------------------------------------------------------------ */

static int revseq_infer(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0), *l = mi_in(g, n, 1);
	int64_t ta = mi_attr_int(n, "time_axis", 0);
	int64_t ba = mi_attr_int(n, "batch_axis", 1);
	int ret;

	if ((ret = mi_ops_need_rank(g, n, 0)) ||
	    (ret = mi_ops_need_rank(g, n, 1)))
		return ret;
	if (x->ndim < 2 || (ta != 0 && ta != 1) || (ba != 0 && ba != 1) ||
	    ta == ba)
		return mi_graph_err(g, n, -EINVAL,
				    "time_axis/batch_axis must be 0 and 1");
	if (l->ndim != 1 || l->dims[0] != x->dims[ba] || !mi_ops_is_int(l->dtype))
		return mi_graph_err(g, n, -EINVAL,
				    "sequence_lens must be [batch] integers");
	return mi_ops_same_as(g, n, 0, 0);
}

static int revseq_run(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0), *l = mi_in(g, n, 1);
	struct mi_tensor *y = mi_ops_out(g, n, 0);
	int ta = (int)mi_attr_int(n, "time_axis", 0), ba = 1 - ta;
	size_t es = mi_dtype_size(x->dtype);
	int64_t T = x->dims[ta], B = x->dims[ba];
	int64_t inner = mi_ops_prod(x->dims, 2, x->ndim);

	memcpy(y->data, x->data, mi_tensor_numel(x) * es);
	for (int64_t b = 0; b < B; b++) {
		int64_t len = mi_tensor_get_i64(l, b);

		if (len < 0 || len > T)
			return mi_graph_err(g, n, -EINVAL,
					    "sequence length %lld out of range",
					    (long long)len);
		for (int64_t t = 0; t < len; t++) {
			int64_t src = ta == 0 ? t * B + b : b * T + t;
			int64_t dst = ta == 0 ? (len - 1 - t) * B + b :
						b * T + (len - 1 - t);

			memcpy((char *)y->data + dst * inner * es,
			       (const char *)x->data + src * inner * es,
			       inner * es);
		}
	}
	return 0;
}

/* ---- Det ------------------------------------------------------------------------- */

static int det_infer(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0);
	int ret = mi_ops_need_rank(g, n, 0);

	if (ret)
		return ret;
	if (x->ndim < 2 || x->dims[x->ndim - 1] != x->dims[x->ndim - 2])
		return mi_graph_err(g, n, -EINVAL,
				    "input must be [..., M, M]");
	if (!mi_ops_is_float(x->dtype))
		return mi_graph_err(g, n, -EOPNOTSUPP, "dtype %s unsupported",
				    mi_dtype_name(x->dtype));
	if (x->dims[x->ndim - 1] > 4096)
		return mi_graph_err(g, n, -EOPNOTSUPP, "matrix too large");
	return mi_ops_set_out(g, n, 0, x->dtype, x->ndim - 2, x->dims);
}

static int det_run(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0), *y = mi_ops_out(g, n, 0);
	int64_t m = x->dims[x->ndim - 1];
	int64_t mats = mi_ops_prod(x->dims, 0, x->ndim - 2);
	double *a = malloc((m * m + 1) * sizeof(double));

	if (!a)
		return mi_graph_err(g, n, -ENOMEM, "out of memory");
	for (int64_t k = 0; k < mats; k++) {
		double det = 1;

		for (int64_t i = 0; i < m * m; i++)
			a[i] = mi_ops_rd(x, k * m * m + i);
		/* LU with partial pivoting */
		for (int64_t c = 0; c < m && det != 0; c++) {
			int64_t p = c;

			for (int64_t r = c + 1; r < m; r++)
				if (fabs(a[r * m + c]) > fabs(a[p * m + c]))
					p = r;
			if (a[p * m + c] == 0) {
				det = 0;
				break;
			}
			if (p != c) {
				for (int64_t j = 0; j < m; j++) {
					double t = a[c * m + j];

					a[c * m + j] = a[p * m + j];
					a[p * m + j] = t;
				}
				det = -det;
			}
			det *= a[c * m + c];
			for (int64_t r = c + 1; r < m; r++) {
				double f = a[r * m + c] / a[c * m + c];

				for (int64_t j = c; j < m; j++)
					a[r * m + j] -= f * a[c * m + j];
			}
		}
		mi_ops_wr(y, k, det);
	}
	free(a);
	return 0;
}

/* ---- window functions ------------------------------------------------------------ */

static int window_size(struct mi_graph *g, struct mi_node *n, int64_t *size)
{
	struct mi_tensor *s = mi_in(g, n, 0);

	if (!s)
		return mi_graph_err(g, n, -EINVAL, "size is required");
	if (!s->data)
		return -EAGAIN;
	if (mi_tensor_numel(s) != 1 || !mi_ops_is_int(s->dtype))
		return mi_graph_err(g, n, -EINVAL, "size must be an integer scalar");
	*size = mi_tensor_get_i64(s, 0);
	if (*size < 0 || *size > MI_OPS_MAX_NUMEL)
		return mi_graph_err(g, n, -EINVAL, "size %lld is invalid",
				    (long long)*size);
	return 0;
}

static int window_infer(struct mi_graph *g, struct mi_node *n)
{
	int64_t size = -1, dt = mi_attr_int(n, "output_datatype", MI_DT_FLOAT);
	int ret;

	if (dt < 0 || dt > 16 || (!mi_ops_is_float((int)dt) && !mi_ops_is_int((int)dt)))
		return mi_graph_err(g, n, -EOPNOTSUPP,
				    "output_datatype %lld unsupported", (long long)dt);
	ret = window_size(g, n, &size);
	if (ret && ret != -EAGAIN)
		return ret;
	return mi_ops_set_out(g, n, 0, (int)dt, 1, &size) ?: ret;
}

static int window_run(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *y = mi_ops_out(g, n, 0);
	int64_t N = y->dims[0];
	int periodic = mi_attr_int(n, "periodic", 1) != 0;
	double den = periodic ? (double)N : (double)(N - 1);
	const char *t = n->op_type;

	for (int64_t i = 0; i < N; i++) {
		double x = den > 0 ? 2 * M_PI * i / den : 0, v;

		if (!strcmp(t, "HannWindow"))
			v = 0.5 - 0.5 * cos(x);
		else if (!strcmp(t, "HammingWindow"))
			v = 25.0 / 46 - (1 - 25.0 / 46) * cos(x);
		else
			v = 0.42 - 0.5 * cos(x) + 0.08 * cos(2 * x);
		mi_ops_wr(y, i, v);
	}
	return 0;
}

/* ---- MaxUnpool ---------------------------------------------------------------------- */

static int unpool_shape(struct mi_graph *g, struct mi_node *n, int64_t *dims,
			int use_os)
{
	struct mi_tensor *x = mi_in(g, n, 0), *os = use_os ? mi_in(g, n, 2) : NULL;
	struct mi_spatial s;
	const int64_t *ks;
	int cnt, ret;

	if ((ret = mi_ops_need_rank(g, n, 0)) ||
	    (ret = mi_ops_need_rank(g, n, 1)))
		return ret;
	if (x->ndim < 3)
		return mi_graph_err(g, n, -EINVAL, "X must have rank >= 3");
	ks = mi_attr_ints(n, "kernel_shape", &cnt);
	if (!ks || cnt != x->ndim - 2)
		return mi_graph_err(g, n, -EINVAL,
				    "kernel_shape must have %d values", x->ndim - 2);
	for (int i = 0; i < cnt; i++)
		s.kernel[i] = ks[i];
	{
		struct mi_tensor big = *x;

		/* parse strides/pads only */
		for (int i = 2; i < x->ndim; i++)
			big.dims[i] = -1;
		ret = mi_ops_spatial(g, n, &s, &big, 0);
		if (ret)
			return ret;
	}
	if (os) {
		int64_t v[MI_MAX_DIMS];

		ret = mi_ops_input_ints(g, n, 2, v, MI_MAX_DIMS, &cnt);
		if (ret)
			return ret;
		if (cnt != x->ndim)
			return mi_graph_err(g, n, -EINVAL,
					    "output_shape must have %d values",
					    x->ndim);
		for (int i = 0; i < cnt; i++) {
			if (v[i] < 0)
				return mi_graph_err(g, n, -EINVAL,
						    "output_shape is negative");
			dims[i] = v[i];
		}
		return 0;
	}
	dims[0] = x->dims[0];
	dims[1] = x->dims[1];
	for (int i = 0; i < x->ndim - 2; i++) {
		dims[i + 2] = (x->dims[i + 2] - 1) * s.stride[i] + s.kernel[i] -
			      s.pad_begin[i] - s.pad_end[i];
		if (dims[i + 2] < 0)
			return mi_graph_err(g, n, -EINVAL, "output size negative");
	}
	return 0;
}

static int unpool_infer(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0), *ix = mi_in(g, n, 1);
	int64_t dims[MI_MAX_DIMS];
	int ret = unpool_shape(g, n, dims, 1);

	if (ret)
		return ret;
	if (ix->dtype != MI_DT_INT64 || ix->ndim != x->ndim)
		return mi_graph_err(g, n, -EINVAL, "I must be int64 shaped like X");
	for (int i = 0; i < x->ndim; i++)
		if (ix->dims[i] != x->dims[i])
			return mi_graph_err(g, n, -EINVAL, "I must be shaped like X");
	return mi_ops_set_out(g, n, 0, x->dtype, x->ndim, dims);
}

/* Indices refer to the output shape computed from the attributes; with an
 * explicit output_shape the result is that unpooled tensor placed at the
 * origin of the (larger) output. */
static int unpool_run(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0), *ix = mi_in(g, n, 1);
	struct mi_tensor *y = mi_ops_out(g, n, 0);
	int64_t cnt = mi_tensor_numel(x), def[MI_MAX_DIMS], ys[MI_MAX_DIMS];
	int64_t dtotal;
	size_t es = mi_dtype_size(x->dtype);
	int ret = unpool_shape(g, n, def, 0), r = x->ndim;

	if (ret)
		return ret;
	dtotal = mi_ops_prod(def, 0, r);
	mi_ops_strides(r, y->dims, ys);
	for (int64_t i = 0; i < cnt; i++) {
		int64_t v = ((const int64_t *)ix->data)[i], off = 0, q;

		if (v < 0 || v >= dtotal)
			return mi_graph_err(g, n, -EINVAL,
					    "index %lld out of range", (long long)v);
		q = v;
		for (int d = r - 1; d >= 0; d--) {
			int64_t c = q % def[d];

			q /= def[d];
			if (c >= y->dims[d])
				return mi_graph_err(g, n, -EINVAL,
						    "index %lld outside output_shape",
						    (long long)v);
			off += c * ys[d];
		}
		memcpy((char *)y->data + off * es, (const char *)x->data + i * es,
		       es);
	}
	return 0;
}

/* ---- NonMaxSuppression ------------------------------------------------------------- */

struct nms_ctx {
	const double *score;
};

static int nms_cmp(const void *a, const void *b, void *arg)
{
	const struct nms_ctx *c = arg;
	int64_t i = *(const int64_t *)a, j = *(const int64_t *)b;

	if (c->score[i] != c->score[j])
		return c->score[i] > c->score[j] ? -1 : 1;
	return i < j ? -1 : i > j;
}

static void nms_box(const struct mi_tensor *bx, int64_t off, int center,
		    double *y1, double *x1, double *y2, double *x2)
{
	double a = mi_ops_rd(bx, off), b = mi_ops_rd(bx, off + 1);
	double c = mi_ops_rd(bx, off + 2), d = mi_ops_rd(bx, off + 3);

	if (center) { /* [x_center, y_center, width, height] */
		*x1 = a - c / 2;
		*x2 = a + c / 2;
		*y1 = b - d / 2;
		*y2 = b + d / 2;
	} else { /* [y1, x1, y2, x2], corners in any order */
		*y1 = fmin(a, c);
		*y2 = fmax(a, c);
		*x1 = fmin(b, d);
		*x2 = fmax(b, d);
	}
}

static double nms_iou(const struct mi_tensor *bx, int64_t oi, int64_t oj,
		      int center)
{
	double ay1, ax1, ay2, ax2, by1, bx1, by2, bx2, iw, ih, inter, uni;

	nms_box(bx, oi, center, &ay1, &ax1, &ay2, &ax2);
	nms_box(bx, oj, center, &by1, &bx1, &by2, &bx2);
	iw = fmin(ax2, bx2) - fmax(ax1, bx1);
	ih = fmin(ay2, by2) - fmax(ay1, by1);
	if (iw <= 0 || ih <= 0)
		return 0;
	inter = iw * ih;
	uni = (ax2 - ax1) * (ay2 - ay1) + (bx2 - bx1) * (by2 - by1) - inter;
	return uni > 0 ? inter / uni : 0;
}

/* Runs the selection; writes triples into out (if not NULL), returns the
 * count or -errno. */
static int64_t nms_select(struct mi_graph *g, struct mi_node *n, int64_t *out)
{
	struct mi_tensor *bx = mi_in(g, n, 0), *sc = mi_in(g, n, 1);
	struct mi_tensor *mo = mi_in(g, n, 2), *it = mi_in(g, n, 3);
	struct mi_tensor *st = mi_in(g, n, 4);
	int center = mi_attr_int(n, "center_point_box", 0) != 0;
	int64_t B = bx->dims[0], N = bx->dims[1], C = sc->dims[1], total = 0;
	int64_t maxo = mo && mi_tensor_numel(mo) ? mi_ops_get_i64(mo, 0) : 0;
	double iou_t = it && mi_tensor_numel(it) ? mi_ops_get_f64(it, 0) : 0;
	int has_st = st && mi_tensor_numel(st);
	double score_t = has_st ? mi_ops_get_f64(st, 0) : 0;
	int64_t *idx = malloc((N + 1) * sizeof(int64_t));
	int64_t *sel = malloc((N + 1) * sizeof(int64_t));
	double *score = malloc((N + 1) * sizeof(double));
	struct nms_ctx c = { score };

	if (!idx || !sel || !score) {
		free(idx);
		free(sel);
		free(score);
		return mi_graph_err(g, n, -ENOMEM, "out of memory");
	}
	for (int64_t b = 0; b < B; b++)
		for (int64_t cl = 0; cl < C; cl++) {
			int64_t cand = 0, nsel = 0;

			for (int64_t i = 0; i < N; i++) {
				score[i] = mi_ops_rd(sc, (b * C + cl) * N + i);
				if (!has_st || score[i] > score_t)
					idx[cand++] = i;
			}
			qsort_r(idx, cand, sizeof(int64_t), nms_cmp, &c);
			for (int64_t k = 0; k < cand && nsel < maxo; k++) {
				int keep = 1;

				for (int64_t s = 0; s < nsel && keep; s++)
					if (nms_iou(bx, (b * N + idx[k]) * 4,
						    (b * N + sel[s]) * 4,
						    center) > iou_t)
						keep = 0;
				if (!keep)
					continue;
				sel[nsel++] = idx[k];
				if (out) {
					out[total * 3] = b;
					out[total * 3 + 1] = cl;
					out[total * 3 + 2] = idx[k];
				}
				total++;
			}
		}
	free(idx);
	free(sel);
	free(score);
	return total;
}

static int nms_infer(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *bx = mi_in(g, n, 0), *sc = mi_in(g, n, 1);
	int64_t dims[2] = { -1, 3 };
	int ret;

	if ((ret = mi_ops_need_rank(g, n, 0)) ||
	    (ret = mi_ops_need_rank(g, n, 1)))
		return ret;
	if (bx->ndim != 3 || bx->dims[2] != 4 || sc->ndim != 3 ||
	    sc->dims[0] != bx->dims[0] || sc->dims[2] != bx->dims[1])
		return mi_graph_err(g, n, -EINVAL,
				    "boxes must be [B, N, 4] and scores [B, C, N]");
	if (!mi_ops_is_float(bx->dtype) || !mi_ops_is_float(sc->dtype))
		return mi_graph_err(g, n, -EOPNOTSUPP, "float inputs required");
	for (int i = 2; i < 5; i++) {
		struct mi_tensor *t = mi_in(g, n, i);

		if (!t)
			continue;
		if (!t->data)
			return mi_ops_set_out(g, n, 0, MI_DT_INT64, 2, dims) ?: -EAGAIN;
		if (mi_tensor_numel(t) > 1)
			return mi_graph_err(g, n, -EINVAL,
					    "input %d must be a scalar", i);
		if (i == 2 && !mi_ops_is_int(t->dtype))
			return mi_graph_err(g, n, -EINVAL,
					    "max_output_boxes_per_class must be an integer");
		if (i > 2 && !mi_ops_is_float(t->dtype))
			return mi_graph_err(g, n, -EINVAL,
					    "thresholds must be float");
	}
	if (!bx->data || !sc->data)
		return mi_ops_set_out(g, n, 0, MI_DT_INT64, 2, dims) ?: -EAGAIN;
	dims[0] = nms_select(g, n, NULL);
	if (dims[0] < 0)
		return (int)dims[0];
	return mi_ops_set_out(g, n, 0, MI_DT_INT64, 2, dims);
}

static int nms_run(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *y = mi_ops_out(g, n, 0);
	int64_t total = nms_select(g, n, NULL);

	if (total < 0)
		return (int)total;
	if (total != y->dims[0])
		return mi_graph_err(g, n, -EINVAL, "selection size changed");
	total = nms_select(g, n, y->data);
	return total < 0 ? (int)total : 0;
}


/* ---- NegativeLogLikelihoodLoss / SoftmaxCrossEntropyLoss ------------------------- */

static int loss_infer(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0), *t = mi_in(g, n, 1);
	struct mi_tensor *w = mi_in(g, n, 2);
	const char *red = mi_attr_string(n, "reduction", "mean");
	int64_t dims[MI_MAX_DIMS];
	int ret, nd = 0;

	if ((ret = mi_ops_need_rank(g, n, 0)) ||
	    (ret = mi_ops_need_rank(g, n, 1)))
		return ret;
	if (!mi_ops_is_float(x->dtype) || !mi_ops_is_int(t->dtype))
		return mi_graph_err(g, n, -EINVAL,
				    "input must be float and target integer");
	if (x->ndim < 2 || t->ndim != x->ndim - 1)
		return mi_graph_err(g, n, -EINVAL,
				    "input must be [N, C, ...] and target [N, ...]");
	for (int i = 0; i < t->ndim; i++)
		if (t->dims[i] != x->dims[i ? i + 1 : 0])
			return mi_graph_err(g, n, -EINVAL,
					    "target shape does not match input");
	if (w && (w->ndim != 1 || w->dims[0] != x->dims[1] ||
		  w->dtype != x->dtype))
		return mi_graph_err(g, n, -EINVAL, "weight must be [C]");
	if (strcmp(red, "none") && strcmp(red, "sum") && strcmp(red, "mean"))
		return mi_graph_err(g, n, -EINVAL, "reduction '%s' is invalid",
				    red);
	if (!strcmp(red, "none"))
		for (int i = 0; i < t->ndim; i++)
			dims[nd++] = t->dims[i];
	ret = mi_ops_set_out(g, n, 0, x->dtype, nd, dims);
	if (!ret)
		ret = mi_ops_set_out(g, n, 1, x->dtype, x->ndim, x->dims);
	return ret;
}

static int loss_run(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0), *t = mi_in(g, n, 1);
	struct mi_tensor *w = mi_in(g, n, 2), *y = mi_ops_out(g, n, 0);
	struct mi_tensor *lp = mi_ops_out(g, n, 1);
	const char *red = mi_attr_string(n, "reduction", "mean");
	const struct mi_attr *ia = mi_attr_get(n, "ignore_index");
	int sce = !strcmp(n->op_type, "SoftmaxCrossEntropyLoss");
	int64_t N = x->dims[0], C = x->dims[1];
	int64_t D = mi_ops_prod(x->dims, 2, x->ndim);
	double sum = 0, wsum = 0, *logp = NULL;
	int64_t cnt = 0;

	if (sce) {
		/* log_softmax over axis 1 */
		logp = malloc((N * C * D + 1) * sizeof(double));
		if (!logp)
			return mi_graph_err(g, n, -ENOMEM, "out of memory");
		for (int64_t b = 0; b < N; b++)
			for (int64_t d = 0; d < D; d++) {
				double mx = -INFINITY, se = 0;

				for (int64_t c = 0; c < C; c++)
					mx = fmax(mx, mi_ops_rd(x, (b * C + c) * D + d));
				for (int64_t c = 0; c < C; c++)
					se += exp(mi_ops_rd(x, (b * C + c) * D + d) - mx);
				for (int64_t c = 0; c < C; c++) {
					int64_t o = (b * C + c) * D + d;

					logp[o] = mi_ops_rd(x, o) - mx - log(se);
					if (lp && lp->data)
						mi_ops_wr(lp, o, logp[o]);
				}
			}
	}
	for (int64_t b = 0; b < N; b++)
		for (int64_t d = 0; d < D; d++) {
			int64_t tv = mi_tensor_get_i64(t, b * D + d), o;
			double l, wt = 1;

			if (ia && tv == ia->i) {
				if (!strcmp(red, "none"))
					mi_ops_wr(y, b * D + d, 0);
				continue;
			}
			if (tv < 0 || tv >= C) {
				free(logp);
				return mi_graph_err(g, n, -EINVAL,
						    "target %lld out of range",
						    (long long)tv);
			}
			o = (b * C + tv) * D + d;
			l = -(sce ? logp[o] : mi_ops_rd(x, o));
			if (w)
				wt = mi_ops_rd(w, tv);
			l *= wt;
			wsum += wt;
			cnt++;
			sum += l;
			if (!strcmp(red, "none"))
				mi_ops_wr(y, b * D + d, l);
		}
	free(logp);
	if (!strcmp(red, "sum"))
		mi_ops_wr(y, 0, sum);
	else if (!strcmp(red, "mean"))
		mi_ops_wr(y, 0, w ? sum / wsum : sum / cnt);
	return 0;
}


/* ---- GridSample (opset 16, 4-D, PyTorch grid_sample semantics) -------------------- */

static int gs_infer(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0), *gr = mi_in(g, n, 1);
	const char *m = mi_attr_string(n, "mode", "bilinear");
	const char *p = mi_attr_string(n, "padding_mode", "zeros");
	int64_t dims[4];
	int ret;

	if ((ret = mi_ops_need_rank(g, n, 0)) ||
	    (ret = mi_ops_need_rank(g, n, 1)))
		return ret;
	if (x->ndim != 4 || gr->ndim != 4 || gr->dims[3] != 2 ||
	    gr->dims[0] != x->dims[0])
		return mi_graph_err(g, n, -EOPNOTSUPP,
				    "only X [N,C,H,W] with grid [N,Ho,Wo,2] is supported");
	if (!mi_ops_is_float(x->dtype) || !mi_ops_is_float(gr->dtype))
		return mi_graph_err(g, n, -EOPNOTSUPP, "float inputs required");
	if (strcmp(m, "bilinear") && strcmp(m, "nearest") && strcmp(m, "bicubic"))
		return mi_graph_err(g, n, -EINVAL, "mode '%s' is invalid", m);
	if (strcmp(p, "zeros") && strcmp(p, "border") && strcmp(p, "reflection"))
		return mi_graph_err(g, n, -EINVAL, "padding_mode '%s' is invalid", p);
	dims[0] = x->dims[0];
	dims[1] = x->dims[1];
	dims[2] = gr->dims[1];
	dims[3] = gr->dims[2];
	return mi_ops_set_out(g, n, 0, x->dtype, 4, dims);
}

static double gs_reflect(double v, double lo2, double hi2)
{
	double mn, span, extra, flips;

	if (lo2 == hi2)
		return 0;
	mn = lo2 / 2;
	span = (hi2 - lo2) / 2;
	v = fabs(v - mn);
	extra = fmod(v, span);
	flips = floor(v / span);
	return fmod(flips, 2) == 0 ? extra + mn : span - extra + mn;
}

/* padding applied to a (real or integer) source coordinate */
static double gs_pad(double v, int64_t size, int pad, int align)
{
	if (pad == 1) { /* border */
		v = v < 0 ? 0 : v > size - 1 ? size - 1 : v;
	} else if (pad == 2) { /* reflection */
		v = align ? gs_reflect(v, 0, 2.0 * (size - 1)) :
			    gs_reflect(v, -1, 2.0 * size - 1);
		v = v < 0 ? 0 : v > size - 1 ? size - 1 : v;
	}
	return v;
}

static double gs_fetch(const struct mi_tensor *x, int64_t base, int64_t H,
		       int64_t W, double yy, double xx)
{
	if (!(xx >= 0 && xx <= W - 1 && yy >= 0 && yy <= H - 1))
		return 0;
	return mi_ops_rd(x, base + (int64_t)yy * W + (int64_t)xx);
}

static double gs_cubic(double t, int k, double A)
{
	double v = k == 0 ? t + 1 : k == 1 ? t : k == 2 ? 1 - t : 2 - t;

	if (k == 1 || k == 2)
		return ((A + 2) * v - (A + 3)) * v * v + 1;
	return ((A * v - 5 * A) * v + 8 * A) * v - 4 * A;
}

static int gs_run(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0), *gr = mi_in(g, n, 1);
	struct mi_tensor *y = mi_ops_out(g, n, 0);
	const char *m = mi_attr_string(n, "mode", "bilinear");
	const char *ps = mi_attr_string(n, "padding_mode", "zeros");
	int mode = !strcmp(m, "nearest") ? 1 : !strcmp(m, "bicubic") ? 2 : 0;
	int pad = !strcmp(ps, "border") ? 1 : !strcmp(ps, "reflection") ? 2 : 0;
	int align = mi_attr_int(n, "align_corners", 0) != 0;
	int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3];
	int64_t Ho = y->dims[2], Wo = y->dims[3];

	for (int64_t b = 0; b < N; b++)
		for (int64_t oh = 0; oh < Ho; oh++)
			for (int64_t ow = 0; ow < Wo; ow++) {
				int64_t go = ((b * Ho + oh) * Wo + ow) * 2;
				double gx = mi_ops_rd(gr, go), gy = mi_ops_rd(gr, go + 1);
				double ix = align ? (gx + 1) / 2 * (W - 1) :
						    ((gx + 1) * W - 1) / 2;
				double iy = align ? (gy + 1) / 2 * (H - 1) :
						    ((gy + 1) * H - 1) / 2;

				if (!isfinite(ix) || !isfinite(iy) ||
				    fabs(ix) > 1e15 || fabs(iy) > 1e15)
					ix = iy = -2; /* samples padding */
				if (mode != 2) {
					ix = gs_pad(ix, W, pad, align);
					iy = gs_pad(iy, H, pad, align);
				}
				for (int64_t c = 0; c < C; c++) {
					int64_t base = (b * C + c) * H * W;
					double v = 0;

					if (mode == 1) {
						v = gs_fetch(x, base, H, W, nearbyint(iy),
							     nearbyint(ix));
					} else if (mode == 0) {
						double x0 = floor(ix), y0 = floor(iy);
						double tx = ix - x0, ty = iy - y0;

						v = gs_fetch(x, base, H, W, y0, x0) * (1 - tx) * (1 - ty) +
						    gs_fetch(x, base, H, W, y0, x0 + 1) * tx * (1 - ty) +
						    gs_fetch(x, base, H, W, y0 + 1, x0) * (1 - tx) * ty +
						    gs_fetch(x, base, H, W, y0 + 1, x0 + 1) * tx * ty;
					} else {
						double x0 = floor(ix), y0 = floor(iy);
						double tx = ix - x0, ty = iy - y0;

						for (int i = 0; i < 4; i++)
							for (int j = 0; j < 4; j++) {
								double yy = gs_pad(y0 - 1 + i, H, pad, align);
								double xx = gs_pad(x0 - 1 + j, W, pad, align);

								v += gs_fetch(x, base, H, W, yy, xx) *
								     gs_cubic(ty, i, -0.75) *
								     gs_cubic(tx, j, -0.75);
							}
					}
					mi_ops_wr(y, ((b * C + c) * Ho + oh) * Wo + ow, v);
				}
			}
	return 0;
}

const struct mi_op_def mi_ops_misc[] = {
	{ "Compress", "", 2, 2, 1, 1, compress_infer, compress_run },
	{ "ReverseSequence", "", 2, 2, 1, 1, revseq_infer, revseq_run },
	{ "Det", "", 1, 1, 1, 1, det_infer, det_run },
	{ "HannWindow", "", 1, 1, 1, 1, window_infer, window_run },
	{ "HammingWindow", "", 1, 1, 1, 1, window_infer, window_run },
	{ "BlackmanWindow", "", 1, 1, 1, 1, window_infer, window_run },
	{ "MaxUnpool", "", 2, 3, 1, 1, unpool_infer, unpool_run },
	{ "NonMaxSuppression", "", 2, 5, 1, 1, nms_infer, nms_run },
	{ "GridSample", "", 2, 2, 1, 1, gs_infer, gs_run },
	{ "NegativeLogLikelihoodLoss", "", 2, 3, 1, 1, loss_infer, loss_run },
	{ "SoftmaxCrossEntropyLoss", "", 2, 3, 1, 2, loss_infer, loss_run },
	{ NULL }
};
