// SPDX-License-Identifier: MIT
/*
 * Tensor creation and indexing: Constant, ConstantOfShape, Range,
 * Identity, Dropout (inference), Gather, GatherElements, GatherND,
 * NonZero, Trilu, EyeLike, OneHot, ScatterElements, ScatterND.
 */
#include <math.h>
#include <stdlib.h>

#include "ops/ops.h"

#define MAXV 64

/* ---- Constant ---------------------------------------------------------- */

static int const_value(struct mi_graph *g, struct mi_node *n,
		       const struct mi_attr **out)
{
	static const char *const names[] = {
		"value", "value_float", "value_floats", "value_int",
		"value_ints", "value_string", "value_strings", "sparse_value",
	};
	const struct mi_attr *found = NULL;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		const struct mi_attr *a = mi_attr_get(n, names[i]);

		if (!a)
			continue;
		if (found)
			return mi_graph_err(g, n, -EINVAL,
					    "more than one value attribute");
		found = a;
	}
	if (!found)
		return mi_graph_err(g, n, -EINVAL, "no value attribute");
	if (!strcmp(found->name, "value") &&
	    (found->type != MI_ATTR_TENSOR || !found->t))
		return mi_graph_err(g, n, -EINVAL, "value is not a tensor");
	if (!strcmp(found->name, "value_string") ||
	    !strcmp(found->name, "value_strings") ||
	    !strcmp(found->name, "sparse_value") ||
	    (found->t && found->t->dtype == MI_DT_STRING))
		return mi_graph_err(g, n, -EOPNOTSUPP,
				    "%s constants are not supported",
				    found->name);
	if ((!strcmp(found->name, "value_float") && found->type != MI_ATTR_FLOAT) ||
	    (!strcmp(found->name, "value_int") && found->type != MI_ATTR_INT) ||
	    (!strcmp(found->name, "value_floats") && found->type != MI_ATTR_FLOATS) ||
	    (!strcmp(found->name, "value_ints") && found->type != MI_ATTR_INTS))
		return mi_graph_err(g, n, -EINVAL, "%s has the wrong type",
				    found->name);
	*out = found;
	return 0;
}

static int constant_infer(struct mi_graph *g, struct mi_node *n)
{
	const struct mi_attr *a;
	int64_t len;
	int ret = const_value(g, n, &a);

	if (ret)
		return ret;
	if (a->t) {
		if (a->t->ndim < 0 || !mi_dtype_size(a->t->dtype))
			return mi_graph_err(g, n, -EOPNOTSUPP,
					    "tensor dtype %s unsupported",
					    mi_dtype_name(a->t->dtype));
		if (mi_tensor_numel(a->t) > 0 && !a->t->data)
			return mi_graph_err(g, n, -EINVAL,
					    "value tensor has no data");
		return mi_ops_set_out(g, n, 0, a->t->dtype, a->t->ndim,
				      a->t->dims);
	}
	len = a->n;
	if (a->type == MI_ATTR_FLOAT)
		return mi_ops_set_out(g, n, 0, MI_DT_FLOAT, 0, NULL);
	if (a->type == MI_ATTR_INT)
		return mi_ops_set_out(g, n, 0, MI_DT_INT64, 0, NULL);
	return mi_ops_set_out(g, n, 0,
			      a->type == MI_ATTR_FLOATS ? MI_DT_FLOAT :
							  MI_DT_INT64,
			      1, &len);
}

static int constant_run(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *y = mi_ops_out(g, n, 0);
	const struct mi_attr *a;
	int ret = const_value(g, n, &a);
	size_t bytes = (size_t)mi_tensor_numel(y) * mi_dtype_size(y->dtype);

	if (ret)
		return ret;
	if (a->t) {
		if (bytes > a->t->nbytes && a->t->nbytes)
			return mi_graph_err(g, n, -EINVAL,
					    "value tensor data too short");
		if (bytes)
			memcpy(y->data, a->t->data, bytes);
	} else if (a->type == MI_ATTR_FLOAT) {
		*(float *)y->data = a->f;
	} else if (a->type == MI_ATTR_INT) {
		*(int64_t *)y->data = a->i;
	} else if (a->type == MI_ATTR_FLOATS) {
		memcpy(y->data, a->floats, a->n * sizeof(float));
	} else {
		memcpy(y->data, a->ints, a->n * sizeof(int64_t));
	}
	return 0;
}

/* ---- ConstantOfShape --------------------------------------------------- */

static int cos_infer(struct mi_graph *g, struct mi_node *n)
{
	const struct mi_attr *a = mi_attr_get(n, "value");
	int64_t v[MAXV];
	int cnt, dt = MI_DT_FLOAT, ret;

	if (a) {
		if (a->type != MI_ATTR_TENSOR || !a->t ||
		    mi_tensor_numel(a->t) != 1 || !a->t->data ||
		    !mi_dtype_size(a->t->dtype))
			return mi_graph_err(g, n, -EINVAL,
					    "value must be a one-element tensor");
		dt = a->t->dtype;
	}
	ret = mi_ops_input_ints(g, n, 0, v, MAXV, &cnt);
	if (ret)
		return ret;
	if (cnt > MI_MAX_DIMS)
		return mi_graph_err(g, n, -EOPNOTSUPP, "shape too long");
	for (int i = 0; i < cnt; i++)
		if (v[i] < 0)
			return mi_graph_err(g, n, -EINVAL,
					    "shape[%d] = %lld is negative", i,
					    (long long)v[i]);
	return mi_ops_set_out(g, n, 0, dt, cnt, v);
}

static int cos_run(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *y = mi_ops_out(g, n, 0);
	const struct mi_attr *a = mi_attr_get(n, "value");
	size_t es = mi_dtype_size(y->dtype);
	int64_t cnt = mi_tensor_numel(y);

	if (!a)
		return 0; /* zero-filled by mi_tensor_alloc */
	for (int64_t i = 0; i < cnt; i++)
		memcpy((char *)y->data + i * es, a->t->data, es);
	return 0;
}

/* ---- Range ----------------------------------------------------------------- */

static int range_count(struct mi_graph *g, struct mi_node *n, int64_t *cnt)
{
	struct mi_tensor *t[3];
	double s, l, d, c;

	for (int i = 0; i < 3; i++) {
		t[i] = mi_in(g, n, i);
		if (!t[i])
			return mi_graph_err(g, n, -EINVAL, "input %d required", i);
		if (!t[i]->data)
			return -EAGAIN;
		if (mi_tensor_numel(t[i]) != 1)
			return mi_graph_err(g, n, -EINVAL,
					    "input %d must be a scalar", i);
	}
	if (mi_ops_is_int(t[0]->dtype)) {
		int64_t si = mi_ops_get_i64(t[0], 0), li = mi_ops_get_i64(t[1], 0);
		int64_t di = mi_ops_get_i64(t[2], 0);

		if (di == 0)
			return mi_graph_err(g, n, -EINVAL, "delta is 0");
		c = ceil(((double)li - (double)si) / (double)di);
	} else {
		s = mi_ops_get_f64(t[0], 0);
		l = mi_ops_get_f64(t[1], 0);
		d = mi_ops_get_f64(t[2], 0);
		if (d == 0 || isnan(d) || isnan(s) || isnan(l))
			return mi_graph_err(g, n, -EINVAL,
					    "delta is 0 or a value is NaN");
		c = ceil((l - s) / d);
	}
	if (c > (double)MI_OPS_MAX_NUMEL)
		return mi_graph_err(g, n, -EINVAL, "range is too long");
	*cnt = c > 0 ? (int64_t)c : 0;
	return 0;
}

static int range_infer(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *s = mi_in(g, n, 0);
	int64_t cnt;
	int ret;

	if (!s)
		return mi_graph_err(g, n, -EINVAL, "start is required");
	for (int i = 1; i < 3; i++)
		if (mi_in(g, n, i) && mi_in(g, n, i)->dtype != s->dtype)
			return mi_graph_err(g, n, -EINVAL, "input dtypes differ");
	if (!mi_ops_is_float(s->dtype) && !mi_ops_is_int(s->dtype))
		return mi_graph_err(g, n, -EOPNOTSUPP, "dtype %s unsupported",
				    mi_dtype_name(s->dtype));
	ret = range_count(g, n, &cnt);
	if (ret == -EAGAIN) {
		int64_t unk = -1;

		mi_ops_set_out(g, n, 0, s->dtype, 1, &unk);
	}
	if (ret)
		return ret;
	return mi_ops_set_out(g, n, 0, s->dtype, 1, &cnt);
}

static int range_run(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *s = mi_in(g, n, 0), *d = mi_in(g, n, 2);
	struct mi_tensor *y = mi_ops_out(g, n, 0);
	int64_t cnt = mi_tensor_numel(y);

	if (mi_ops_is_int(s->dtype)) {
		int64_t v = mi_ops_get_i64(s, 0), dd = mi_ops_get_i64(d, 0);

		for (int64_t i = 0; i < cnt; i++)
			mi_ops_set_i64(y, i, v + i * dd);
	} else {
		double v = mi_ops_get_f64(s, 0), dd = mi_ops_get_f64(d, 0);

		/* numpy.arange accumulates start + i * delta */
		for (int64_t i = 0; i < cnt; i++)
			mi_ops_set_f64(y, i, v + i * dd);
	}
	return 0;
}

/* ---- Identity / Dropout ------------------------------------------------------- */

static int identity_infer(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0);
	int ret = mi_ops_same_as(g, n, 0, 0);

	if (!ret && !mi_dtype_size(x->dtype))
		return mi_graph_err(g, n, -EOPNOTSUPP, "dtype %s unsupported",
				    mi_dtype_name(x->dtype));
	return ret;
}

static int identity_run(struct mi_graph *g, struct mi_node *n)
{
	return mi_ops_copy_data(g, n, 0, 0);
}

static int dropout_infer(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0), *tm = mi_in(g, n, 2);
	struct mi_tensor *r = mi_in(g, n, 1);
	int ret = identity_infer(g, n);

	if (ret)
		return ret;
	if (tm) {
		if (!tm->data)
			return -EAGAIN;
		if (mi_tensor_numel(tm) >= 1 && mi_ops_get_i64(tm, 0)) {
			if (!r || !r->data)
				return mi_graph_err(g, n, -EOPNOTSUPP,
						    "training-mode dropout is not supported");
			if (mi_tensor_numel(r) < 1 || mi_ops_get_f64(r, 0) != 0)
				return mi_graph_err(g, n, -EOPNOTSUPP,
						    "training-mode dropout is not supported");
		}
	}
	return mi_ops_set_out(g, n, 1, g->opset >= 10 ? MI_DT_BOOL : x->dtype,
			      x->ndim, x->dims);
}

static int dropout_run(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *m = mi_ops_out(g, n, 1);
	int ret = mi_ops_copy_data(g, n, 0, 0);

	if (!ret && m && m->data) {
		int64_t cnt = mi_tensor_numel(m);

		for (int64_t i = 0; i < cnt; i++)
			mi_ops_set_f64(m, i, 1);
	}
	return ret;
}

/* ---- Gather ----------------------------------------------------------------------- */

static int index_dtype(struct mi_graph *g, struct mi_node *n, int i)
{
	struct mi_tensor *t = mi_in(g, n, i);

	if (t->dtype != MI_DT_INT64 && t->dtype != MI_DT_INT32)
		return mi_graph_err(g, n, -EINVAL,
				    "indices must be int32/int64, are %s",
				    mi_dtype_name(t->dtype));
	return 0;
}

static int gather_infer(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0), *ix = mi_in(g, n, 1);
	int64_t dims[MI_MAX_DIMS * 2];
	int axis, nd = 0, ret;

	if ((ret = mi_ops_need_rank(g, n, 0)) ||
	    (ret = mi_ops_need_rank(g, n, 1)) || (ret = index_dtype(g, n, 1)))
		return ret;
	ret = mi_ops_axis(g, n, "axis", mi_attr_int(n, "axis", 0), x->ndim,
			  &axis);
	if (ret)
		return ret;
	for (int i = 0; i < axis; i++)
		dims[nd++] = x->dims[i];
	for (int i = 0; i < ix->ndim; i++)
		dims[nd++] = ix->dims[i];
	for (int i = axis + 1; i < x->ndim; i++)
		dims[nd++] = x->dims[i];
	return mi_ops_set_out(g, n, 0, x->dtype, nd, dims);
}

static int gather_run(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0), *ix = mi_in(g, n, 1);
	struct mi_tensor *y = mi_ops_out(g, n, 0);
	size_t es = mi_dtype_size(x->dtype);
	int axis;
	int64_t outer, inner, nidx = mi_tensor_numel(ix), dim;

	mi_ops_axis(g, n, "axis", mi_attr_int(n, "axis", 0), x->ndim, &axis);
	outer = mi_ops_prod(x->dims, 0, axis);
	inner = mi_ops_prod(x->dims, axis + 1, x->ndim);
	dim = x->dims[axis];
	for (int64_t k = 0; k < nidx; k++) {
		int64_t v = mi_tensor_get_i64(ix, k);

		if (v < -dim || v >= dim)
			return mi_graph_err(g, n, -EINVAL,
					    "index %lld out of range [-%lld, %lld)",
					    (long long)v, (long long)dim,
					    (long long)dim);
	}
	for (int64_t o = 0; o < outer; o++)
		for (int64_t k = 0; k < nidx; k++) {
			int64_t v = mi_tensor_get_i64(ix, k);

			if (v < 0)
				v += dim;
			memcpy((char *)y->data + ((o * nidx + k) * inner) * es,
			       (const char *)x->data + ((o * dim + v) * inner) * es,
			       inner * es);
		}
	return 0;
}

/* ---- GatherElements / ScatterElements ----------------------------------------------- */

static int gel_infer(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0), *ix = mi_in(g, n, 1);
	int scatter = !strcmp(n->op_type, "ScatterElements") ||
		      !strcmp(n->op_type, "Scatter");
	int axis, ret;

	if ((ret = mi_ops_need_rank(g, n, 0)) ||
	    (ret = mi_ops_need_rank(g, n, 1)) || (ret = index_dtype(g, n, 1)))
		return ret;
	if (ix->ndim != x->ndim)
		return mi_graph_err(g, n, -EINVAL,
				    "indices rank %d differs from data rank %d",
				    ix->ndim, x->ndim);
	ret = mi_ops_axis(g, n, "axis", mi_attr_int(n, "axis", 0), x->ndim,
			  &axis);
	if (ret)
		return ret;
	if (scatter) {
		struct mi_tensor *u = mi_in(g, n, 2);
		const char *red = mi_attr_string(n, "reduction", "none");

		if ((ret = mi_ops_need_rank(g, n, 2)))
			return ret;
		if (strcmp(red, "none") && strcmp(red, "add") &&
		    strcmp(red, "mul"))
			return mi_graph_err(g, n, -EOPNOTSUPP,
					    "reduction '%s' unsupported", red);
		if (u->ndim != ix->ndim || u->dtype != x->dtype)
			return mi_graph_err(g, n, -EINVAL,
					    "updates must match indices shape");
		for (int i = 0; i < ix->ndim; i++)
			if (u->dims[i] != ix->dims[i])
				return mi_graph_err(g, n, -EINVAL,
						    "updates must match indices shape");
		return mi_ops_same_as(g, n, 0, 0);
	}
	return mi_ops_set_out(g, n, 0, x->dtype, ix->ndim, ix->dims);
}

static int gel_run(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0), *ix = mi_in(g, n, 1);
	struct mi_tensor *u = mi_in(g, n, 2), *y = mi_ops_out(g, n, 0);
	int scatter = u != NULL;
	const char *red = mi_attr_string(n, "reduction", "none");
	size_t es = mi_dtype_size(x->dtype);
	int64_t xs[MI_MAX_DIMS], cnt = mi_tensor_numel(ix);
	int axis;

	mi_ops_axis(g, n, "axis", mi_attr_int(n, "axis", 0), x->ndim, &axis);
	mi_ops_strides(x->ndim, x->dims, xs);
	for (int d = 0; d < ix->ndim; d++)
		if (d != axis && ix->dims[d] > x->dims[d])
			return mi_graph_err(g, n, -EINVAL,
					    "indices dim %d exceeds data", d);
	if (scatter)
		memcpy(y->data, x->data, mi_tensor_numel(x) * es);
	for (int64_t i = 0; i < cnt; i++) {
		int64_t r = i, off = 0, v = mi_tensor_get_i64(ix, i);
		int64_t dim = x->dims[axis];

		if (v < -dim || v >= dim)
			return mi_graph_err(g, n, -EINVAL,
					    "index %lld out of range",
					    (long long)v);
		if (v < 0)
			v += dim;
		for (int d = ix->ndim - 1; d >= 0; d--) {
			int64_t c = r % ix->dims[d];

			r /= ix->dims[d];
			off += (d == axis ? v : c) * xs[d];
		}
		if (!scatter) {
			memcpy((char *)y->data + i * es,
			       (const char *)x->data + off * es, es);
		} else if (!strcmp(red, "add")) {
			mi_ops_set_f64(y, off, mi_ops_get_f64(y, off) +
						       mi_ops_get_f64(u, i));
		} else if (!strcmp(red, "mul")) {
			mi_ops_set_f64(y, off, mi_ops_get_f64(y, off) *
						       mi_ops_get_f64(u, i));
		} else {
			memcpy((char *)y->data + off * es,
			       (const char *)u->data + i * es, es);
		}
	}
	return 0;
}

/* ---- GatherND / ScatterND ----------------------------------------------------------- */

static int gnd_infer(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0), *ix = mi_in(g, n, 1);
	int64_t b = mi_attr_int(n, "batch_dims", 0), dims[MI_MAX_DIMS * 2], k;
	int nd = 0, ret;

	if ((ret = mi_ops_need_rank(g, n, 0)) ||
	    (ret = mi_ops_need_rank(g, n, 1)))
		return ret;
	if (ix->dtype != MI_DT_INT64)
		return mi_graph_err(g, n, -EINVAL, "indices must be int64");
	if (!strcmp(n->op_type, "ScatterND")) {
		if ((ret = mi_ops_need_rank(g, n, 2)))
			return ret;
		if (strcmp(mi_attr_string(n, "reduction", "none"), "none") &&
		    strcmp(mi_attr_string(n, "reduction", "none"), "add") &&
		    strcmp(mi_attr_string(n, "reduction", "none"), "mul"))
			return mi_graph_err(g, n, -EOPNOTSUPP,
					    "reduction unsupported");
		struct mi_tensor *u = mi_in(g, n, 2);

		if (ix->ndim < 1 || ix->dims[ix->ndim - 1] < 1 ||
		    ix->dims[ix->ndim - 1] > x->ndim)
			return mi_graph_err(g, n, -EINVAL,
					    "indices last dim is invalid");
		k = ix->dims[ix->ndim - 1];
		for (int i = 0; i < ix->ndim - 1; i++)
			dims[nd++] = ix->dims[i];
		for (int i = (int)k; i < x->ndim; i++)
			dims[nd++] = x->dims[i];
		if (u->dtype != x->dtype || u->ndim != nd)
			return mi_graph_err(g, n, -EINVAL,
					    "updates shape/dtype is invalid");
		for (int i = 0; i < nd; i++)
			if (u->dims[i] != dims[i])
				return mi_graph_err(g, n, -EINVAL,
						    "updates shape is invalid");
		return mi_ops_same_as(g, n, 0, 0);
	}
	if (ix->ndim < 1 || b < 0 || b >= ix->ndim || b >= x->ndim)
		return mi_graph_err(g, n, -EINVAL, "batch_dims/rank invalid");
	for (int i = 0; i < b; i++)
		if (ix->dims[i] != x->dims[i])
			return mi_graph_err(g, n, -EINVAL,
					    "batch dims of data and indices differ");
	k = ix->dims[ix->ndim - 1];
	if (k < 0)
		return -EAGAIN;
	if (k < 1 || b + k > x->ndim)
		return mi_graph_err(g, n, -EINVAL,
				    "indices last dim %lld is invalid",
				    (long long)k);
	for (int i = 0; i < ix->ndim - 1; i++)
		dims[nd++] = ix->dims[i];
	for (int i = (int)(b + k); i < x->ndim; i++)
		dims[nd++] = x->dims[i];
	return mi_ops_set_out(g, n, 0, x->dtype, nd, dims);
}

static int gnd_run(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0), *ix = mi_in(g, n, 1);
	struct mi_tensor *u = mi_in(g, n, 2), *y = mi_ops_out(g, n, 0);
	int scatter = !strcmp(n->op_type, "ScatterND");
	const char *red = mi_attr_string(n, "reduction", "none");
	int64_t b = scatter ? 0 : mi_attr_int(n, "batch_dims", 0);
	int64_t k = ix->dims[ix->ndim - 1];
	int64_t xs[MI_MAX_DIMS], nb = mi_ops_prod(x->dims, 0, (int)b);
	int64_t nq = mi_ops_prod(ix->dims, (int)b, ix->ndim - 1);
	int64_t slice = mi_ops_prod(x->dims, (int)(b + k), x->ndim);
	int64_t bsz = mi_ops_prod(x->dims, (int)b, x->ndim);
	size_t es = mi_dtype_size(x->dtype);

	mi_ops_strides(x->ndim, x->dims, xs);
	if (scatter)
		memcpy(y->data, x->data, mi_tensor_numel(x) * es);
	for (int64_t bi = 0; bi < nb; bi++)
		for (int64_t q = 0; q < nq; q++) {
			int64_t row = bi * nq + q, off = bi * bsz;

			for (int64_t j = 0; j < k; j++) {
				int64_t v = ((int64_t *)ix->data)[row * k + j];
				int64_t dim = x->dims[b + j];

				if (v < -dim || v >= dim)
					return mi_graph_err(g, n, -EINVAL,
							    "index %lld out of range",
							    (long long)v);
				off += (v < 0 ? v + dim : v) * xs[b + j];
			}
			if (!scatter) {
				memcpy((char *)y->data + row * slice * es,
				       (const char *)x->data + off * es,
				       slice * es);
				continue;
			}
			for (int64_t s = 0; s < slice; s++) {
				int64_t ui = row * slice + s;

				if (!strcmp(red, "add"))
					mi_ops_set_f64(y, off + s,
						       mi_ops_get_f64(y, off + s) +
							       mi_ops_get_f64(u, ui));
				else if (!strcmp(red, "mul"))
					mi_ops_set_f64(y, off + s,
						       mi_ops_get_f64(y, off + s) *
							       mi_ops_get_f64(u, ui));
				else
					memcpy((char *)y->data + (off + s) * es,
					       (const char *)u->data + ui * es, es);
			}
		}
	return 0;
}

/* ---- NonZero ----------------------------------------------------------------------- */

static int64_t nz_count(const struct mi_tensor *x)
{
	int64_t cnt = mi_tensor_numel(x), nz = 0;

	for (int64_t i = 0; i < cnt; i++)
		nz += mi_ops_get_f64(x, i) != 0;
	return nz;
}

static int nonzero_infer(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0);
	int64_t dims[2];
	int ret = mi_ops_need_rank(g, n, 0);

	if (ret)
		return ret;
	dims[0] = x->ndim;
	dims[1] = x->data ? nz_count(x) : -1;
	ret = mi_ops_set_out(g, n, 0, MI_DT_INT64, 2, dims);
	return ret ? ret : x->data ? 0 : -EAGAIN;
}

static int nonzero_run(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0), *y = mi_ops_out(g, n, 0);
	int64_t cnt = mi_tensor_numel(x), nz = y->dims[1], k = 0;
	int64_t *o = y->data;

	for (int64_t i = 0; i < cnt && k < nz; i++) {
		int64_t r = i;

		if (mi_ops_get_f64(x, i) == 0)
			continue;
		for (int d = x->ndim - 1; d >= 0; d--) {
			o[d * nz + k] = r % x->dims[d];
			r /= x->dims[d];
		}
		k++;
	}
	return 0;
}

/* ---- Trilu / EyeLike ------------------------------------------------------------------- */

static int trilu_infer(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0), *k = mi_in(g, n, 1);
	int ret = mi_ops_same_as(g, n, 0, 0);

	if (ret)
		return ret;
	if (x->ndim < 2)
		return mi_graph_err(g, n, -EINVAL, "input must be >= 2-D");
	if (k && k->ndim >= 0 && mi_tensor_numel(k) != 1)
		return mi_graph_err(g, n, -EINVAL, "k must be a scalar");
	return 0;
}

static int trilu_run(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0), *kt = mi_in(g, n, 1);
	struct mi_tensor *y = mi_ops_out(g, n, 0);
	int upper = mi_attr_int(n, "upper", 1) != 0;
	int64_t k = kt ? mi_ops_get_i64(kt, 0) : 0;
	int64_t R = x->dims[x->ndim - 2], C = x->dims[x->ndim - 1];
	int64_t mats = mi_ops_prod(x->dims, 0, x->ndim - 2);
	size_t es = mi_dtype_size(x->dtype);

	for (int64_t m = 0; m < mats; m++)
		for (int64_t i = 0; i < R; i++)
			for (int64_t j = 0; j < C; j++) {
				int64_t off = (m * R + i) * C + j;
				int keep = upper ? j - i >= k : j - i <= k;

				if (keep)
					memcpy((char *)y->data + off * es,
					       (const char *)x->data + off * es, es);
			}
	return 0;
}

static int eyelike_infer(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0);
	int ret = mi_ops_need_rank(g, n, 0);
	int64_t dt = mi_attr_int(n, "dtype", x->dtype);

	if (ret)
		return ret;
	if (x->ndim != 2)
		return mi_graph_err(g, n, -EINVAL, "input must be 2-D");
	if (dt < 0 || dt > 16 || (!mi_ops_is_float((int)dt) &&
				  !mi_ops_is_int((int)dt) && dt != MI_DT_BOOL))
		return mi_graph_err(g, n, -EOPNOTSUPP, "dtype %lld unsupported",
				    (long long)dt);
	return mi_ops_set_out(g, n, 0, (int)dt, 2, x->dims);
}

static int eyelike_run(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *y = mi_ops_out(g, n, 0);
	int64_t k = mi_attr_int(n, "k", 0);

	if (k >= y->dims[1] || k <= -y->dims[0])
		return 0; /* the diagonal lies outside the matrix */
	for (int64_t i = 0; i < y->dims[0]; i++) {
		int64_t j = i + k;

		if (j >= 0 && j < y->dims[1])
			mi_ops_set_f64(y, i * y->dims[1] + j, 1);
	}
	return 0;
}

/* ---- OneHot ------------------------------------------------------------------------------ */

static int onehot_infer(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *ix = mi_in(g, n, 0), *dp = mi_in(g, n, 1);
	struct mi_tensor *vals = mi_in(g, n, 2);
	int64_t dims[MI_MAX_DIMS], depth;
	int ret, axis, r;

	if ((ret = mi_ops_need_rank(g, n, 0)) ||
	    (ret = mi_ops_need_rank(g, n, 2)))
		return ret;
	if (!dp)
		return mi_graph_err(g, n, -EINVAL, "depth is required");
	if (mi_tensor_numel(vals) != 2)
		return mi_graph_err(g, n, -EINVAL, "values must have 2 elements");
	r = ix->ndim + 1;
	ret = mi_ops_axis(g, n, "axis", mi_attr_int(n, "axis", -1), r, &axis);
	if (ret)
		return ret;
	if (!dp->data)
		depth = -1;
	else if (mi_tensor_numel(dp) != 1)
		return mi_graph_err(g, n, -EINVAL, "depth must be a scalar");
	else
		depth = mi_ops_get_i64(dp, 0); /* saturating */
	if (dp->data && (depth < 1 || depth > MI_OPS_MAX_NUMEL))
		return mi_graph_err(g, n, -EINVAL, "depth %lld is invalid",
				    (long long)depth);
	for (int i = 0, k = 0; i < r; i++)
		dims[i] = i == axis ? depth : ix->dims[k++];
	ret = mi_ops_set_out(g, n, 0, vals->dtype, r, dims);
	return ret ? ret : depth < 0 ? -EAGAIN : 0;
}

static int onehot_run(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *ix = mi_in(g, n, 0), *vals = mi_in(g, n, 2);
	struct mi_tensor *y = mi_ops_out(g, n, 0);
	size_t es = mi_dtype_size(y->dtype);
	int axis;
	int64_t depth, outer, inner, total = mi_tensor_numel(y);

	mi_ops_axis(g, n, "axis", mi_attr_int(n, "axis", -1), y->ndim, &axis);
	depth = y->dims[axis];
	outer = mi_ops_prod(y->dims, 0, axis);
	inner = mi_ops_prod(y->dims, axis + 1, y->ndim);
	for (int64_t i = 0; i < total; i++)
		memcpy((char *)y->data + i * es, vals->data, es);
	for (int64_t o = 0; o < outer; o++)
		for (int64_t j = 0; j < inner; j++) {
			int64_t v = mi_ops_get_i64(ix, o * inner + j);

			if (v < 0)
				v += depth;
			if (v < 0 || v >= depth)
				continue;
			memcpy((char *)y->data + ((o * depth + v) * inner + j) * es,
			       (const char *)vals->data + es, es);
		}
	return 0;
}

const struct mi_op_def mi_ops_tensor[] = {
	{ "Constant", "", 0, 0, 1, 1, constant_infer, constant_run },
	{ "ConstantOfShape", "", 1, 1, 1, 1, cos_infer, cos_run },
	{ "Range", "", 3, 3, 1, 1, range_infer, range_run },
	{ "Identity", "", 1, 1, 1, 1, identity_infer, identity_run },
	{ "Dropout", "", 1, 3, 1, 2, dropout_infer, dropout_run },
	{ "Gather", "", 2, 2, 1, 1, gather_infer, gather_run },
	{ "GatherElements", "", 2, 2, 1, 1, gel_infer, gel_run },
	{ "ScatterElements", "", 3, 3, 1, 1, gel_infer, gel_run },
	{ "Scatter", "", 3, 3, 1, 1, gel_infer, gel_run },
	{ "GatherND", "", 2, 2, 1, 1, gnd_infer, gnd_run },
	{ "ScatterND", "", 3, 3, 1, 1, gnd_infer, gnd_run },
	{ "NonZero", "", 1, 1, 1, 1, nonzero_infer, nonzero_run },
	{ "Trilu", "", 1, 2, 1, 1, trilu_infer, trilu_run },
	{ "EyeLike", "", 1, 1, 1, 1, eyelike_infer, eyelike_run },
	{ "OneHot", "", 3, 3, 1, 1, onehot_infer, onehot_run },
	{ NULL }
};
