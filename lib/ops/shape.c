// SPDX-License-Identifier: MIT
/*
 * Shape and layout operators (dtype-agnostic, by element size): Reshape,
 * Flatten, Squeeze, Unsqueeze, Shape, Size, Expand, Transpose, Concat,
 * Split, Slice, Tile, Pad, DepthToSpace, SpaceToDepth.
 *
 * Attributes that became inputs (Squeeze/Unsqueeze/Split axes from opset
 * 13, Slice from 10, Pad from 11) are read from the input when it is
 * present and from the attribute otherwise.
 */
#include <stdlib.h>

#include "ops/ops.h"

#define MAXV 64

static int known_dtype(struct mi_graph *g, struct mi_node *n, int i)
{
	struct mi_tensor *t = mi_in(g, n, i);
	int ret = mi_ops_need_rank(g, n, i);

	if (ret)
		return ret;
	if (!mi_dtype_size(t->dtype))
		return mi_graph_err(g, n, -EOPNOTSUPP, "dtype %s unsupported",
				    mi_dtype_name(t->dtype));
	return 0;
}

static int copy_run(struct mi_graph *g, struct mi_node *n)
{
	return mi_ops_copy_data(g, n, 0, 0);
}

/* ---- Reshape ------------------------------------------------------------ */

static int reshape_infer(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0), *st = mi_in(g, n, 1);
	int64_t shp[MAXV], dims[MI_MAX_DIMS], known = 1, total;
	int cnt, ret, neg = -1, allowzero = (int)mi_attr_int(n, "allowzero", 0);

	if ((ret = known_dtype(g, n, 0)))
		return ret;
	if (st) {
		ret = mi_ops_input_ints(g, n, 1, shp, MAXV, &cnt);
		if (ret == -EAGAIN && st->ndim == 1 && st->dims[0] >= 0 &&
		    st->dims[0] <= MI_MAX_DIMS) {
			int64_t unk[MI_MAX_DIMS];

			for (int i = 0; i < st->dims[0]; i++)
				unk[i] = -1;
			mi_ops_set_out(g, n, 0, x->dtype, (int)st->dims[0], unk);
		}
		if (ret)
			return ret;
	} else {
		const int64_t *a = mi_attr_ints(n, "shape", &cnt);

		if (!a)
			return mi_graph_err(g, n, -EINVAL, "shape is required");
		if (cnt > MAXV)
			return mi_graph_err(g, n, -EINVAL, "shape too long");
		memcpy(shp, a, cnt * sizeof(int64_t));
	}
	if (cnt > MI_MAX_DIMS)
		return mi_graph_err(g, n, -EOPNOTSUPP,
				    "shape has %d dims, at most %d", cnt,
				    MI_MAX_DIMS);
	total = mi_tensor_numel(x);
	for (int i = 0; i < cnt; i++) {
		int64_t v = shp[i];

		if (v == 0 && !allowzero) {
			if (i >= x->ndim)
				return mi_graph_err(g, n, -EINVAL,
						    "shape[%d] = 0 but input has rank %d",
						    i, x->ndim);
			v = x->dims[i];
		} else if (v == -1) {
			if (neg >= 0)
				return mi_graph_err(g, n, -EINVAL,
						    "more than one -1 in shape");
			neg = i;
		} else if (v < -1) {
			return mi_graph_err(g, n, -EINVAL,
					    "shape[%d] = %lld is invalid", i,
					    (long long)v);
		}
		dims[i] = v;
		if (i != neg) {
			if (v < 0)
				known = -1;
			else if (known >= 0 && v && known > MI_OPS_MAX_NUMEL / v)
				return mi_graph_err(g, n, -EINVAL,
						    "shape is too large");
			else if (known >= 0)
				known *= v;
		}
	}
	if (neg >= 0 && allowzero && known == 0)
		return mi_graph_err(g, n, -EINVAL,
				    "-1 with a 0 dim and allowzero");
	if (neg >= 0) {
		if (total < 0 || known < 0)
			dims[neg] = -1;
		else if (known == 0 || total % known)
			return mi_graph_err(g, n, -EINVAL,
					    "cannot reshape %lld elements with -1",
					    (long long)total);
		else
			dims[neg] = total / known;
	} else if (total >= 0 && known >= 0 && total != known) {
		return mi_graph_err(g, n, -EINVAL,
				    "cannot reshape %lld elements into %lld",
				    (long long)total, (long long)known);
	}
	return mi_ops_set_out(g, n, 0, x->dtype, cnt, dims);
}

/* ---- Flatten ------------------------------------------------------------- */

static int flatten_infer(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0);
	int64_t axis = mi_attr_int(n, "axis", 1), dims[2];
	int ret = known_dtype(g, n, 0);

	if (ret)
		return ret;
	if (axis < 0)
		axis += x->ndim;
	if (axis < 0 || axis > x->ndim)
		return mi_graph_err(g, n, -EINVAL,
				    "axis %lld out of range for rank %d",
				    (long long)mi_attr_int(n, "axis", 1), x->ndim);
	dims[0] = mi_ops_prod(x->dims, 0, (int)axis);
	dims[1] = mi_ops_prod(x->dims, (int)axis, x->ndim);
	return mi_ops_set_out(g, n, 0, x->dtype, 2, dims);
}

/* ---- Squeeze / Unsqueeze --------------------------------------------------- */

static int get_axes(struct mi_graph *g, struct mi_node *n, int idx,
		    int64_t *ax, int *cnt)
{
	int ret = mi_ops_input_ints(g, n, idx, ax, MAXV, cnt);

	if (ret == -ENOENT) {
		const int64_t *a = mi_attr_ints(n, "axes", cnt);

		if (*cnt > MAXV)
			return mi_graph_err(g, n, -EINVAL, "too many axes");
		if (a)
			memcpy(ax, a, *cnt * sizeof(int64_t));
		return a ? 0 : -ENOENT;
	}
	return ret;
}

static int squeeze_infer(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0);
	int64_t ax[MAXV], dims[MI_MAX_DIMS];
	int cnt, ret = known_dtype(g, n, 0), drop[MI_MAX_DIMS] = { 0 }, nd = 0;

	if (ret)
		return ret;
	ret = get_axes(g, n, 1, ax, &cnt);
	if (ret == -ENOENT) {
		for (int i = 0; i < x->ndim; i++) {
			if (x->dims[i] < 0)
				return -EAGAIN;
			drop[i] = x->dims[i] == 1;
		}
	} else if (ret) {
		return ret;
	} else {
		for (int i = 0; i < cnt; i++) {
			int a;

			ret = mi_ops_axis(g, n, "axes value", ax[i], x->ndim, &a);
			if (ret)
				return ret;
			if (x->dims[a] >= 0 && x->dims[a] != 1)
				return mi_graph_err(g, n, -EINVAL,
						    "cannot squeeze dim %d of size %lld",
						    a, (long long)x->dims[a]);
			drop[a] = 1;
		}
	}
	for (int i = 0; i < x->ndim; i++)
		if (!drop[i])
			dims[nd++] = x->dims[i];
	return mi_ops_set_out(g, n, 0, x->dtype, nd, dims);
}

static int unsqueeze_infer(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0);
	int64_t ax[MAXV], dims[MI_MAX_DIMS];
	int cnt, ret = known_dtype(g, n, 0), ins[MAXV + MI_MAX_DIMS] = { 0 };
	int r, k = 0;

	if (ret)
		return ret;
	ret = get_axes(g, n, 1, ax, &cnt);
	if (ret == -ENOENT)
		return mi_graph_err(g, n, -EINVAL, "axes are required");
	if (ret)
		return ret;
	r = x->ndim + cnt;
	if (r > MI_MAX_DIMS)
		return mi_graph_err(g, n, -EOPNOTSUPP,
				    "output rank %d exceeds %d", r, MI_MAX_DIMS);
	for (int i = 0; i < cnt; i++) {
		int a;

		ret = mi_ops_axis(g, n, "axes value", ax[i], r, &a);
		if (ret)
			return ret;
		if (ins[a])
			return mi_graph_err(g, n, -EINVAL, "duplicate axis %d",
					    a);
		ins[a] = 1;
	}
	for (int i = 0; i < r; i++)
		dims[i] = ins[i] ? 1 : x->dims[k++];
	return mi_ops_set_out(g, n, 0, x->dtype, r, dims);
}

/* ---- Shape / Size ----------------------------------------------------------------- */

static void shape_range(struct mi_node *n, int r, int64_t *s, int64_t *e)
{
	*s = mi_attr_int(n, "start", 0);
	*e = mi_attr_int(n, "end", r);
	if (*s < 0)
		*s += r;
	if (*e < 0)
		*e += r;
	*s = *s < 0 ? 0 : *s > r ? r : *s;
	*e = *e < 0 ? 0 : *e > r ? r : *e;
	if (*e < *s)
		*e = *s;
}

static int shape_infer(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0);
	int64_t s, e, len;
	int ret = mi_ops_need_rank(g, n, 0);

	if (ret)
		return ret;
	shape_range(n, x->ndim, &s, &e);
	len = e - s;
	return mi_ops_set_out(g, n, 0, MI_DT_INT64, 1, &len);
}

static int shape_run(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0), *y = mi_ops_out(g, n, 0);
	int64_t s, e;

	shape_range(n, x->ndim, &s, &e);
	for (int64_t i = s; i < e; i++)
		((int64_t *)y->data)[i - s] = x->dims[i];
	return 0;
}

static int size_infer(struct mi_graph *g, struct mi_node *n)
{
	int ret = mi_ops_need_rank(g, n, 0);

	return ret ? ret : mi_ops_set_out(g, n, 0, MI_DT_INT64, 0, NULL);
}

static int size_run(struct mi_graph *g, struct mi_node *n)
{
	*(int64_t *)mi_ops_out(g, n, 0)->data = mi_tensor_numel(mi_in(g, n, 0));
	return 0;
}

/* ---- Expand ------------------------------------------------------------------------- */

static int expand_infer(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0);
	struct mi_tensor shp;
	struct mi_tensor *ins[2] = { x, &shp };
	int64_t v[MAXV], dims[MI_MAX_DIMS];
	int cnt, nd, ret = known_dtype(g, n, 0);

	if (ret)
		return ret;
	ret = mi_ops_input_ints(g, n, 1, v, MAXV, &cnt);
	if (ret == -ENOENT)
		return mi_graph_err(g, n, -EINVAL, "shape is required");
	if (ret)
		return ret;
	if (cnt > MI_MAX_DIMS)
		return mi_graph_err(g, n, -EOPNOTSUPP, "shape too long");
	memset(&shp, 0, sizeof(shp));
	shp.ndim = cnt;
	for (int i = 0; i < cnt; i++) {
		if (v[i] < 0)
			return mi_graph_err(g, n, -EINVAL,
					    "shape[%d] = %lld is negative", i,
					    (long long)v[i]);
		shp.dims[i] = v[i];
	}
	ret = mi_bcast_infer(g, n, 2, ins, &nd, dims);
	if (ret)
		return ret;
	return mi_ops_set_out(g, n, 0, x->dtype, nd, dims);
}

static int expand_run(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0), *y = mi_ops_out(g, n, 0);
	int64_t st[MI_MAX_DIMS], s = 1;
	int off = y->ndim - x->ndim;

	for (int d = y->ndim - 1; d >= 0; d--) {
		int xd = d - off;

		if (xd < 0 || x->dims[xd] == 1) {
			st[d] = 0;
		} else {
			st[d] = s;
		}
		if (xd >= 0)
			s *= x->dims[xd];
	}
	mi_ops_strided_copy(y->data, x->data, mi_dtype_size(x->dtype), y->ndim,
			    y->dims, st, 0);
	return 0;
}

/* ---- Transpose ------------------------------------------------------------------------- */

static int get_perm(struct mi_graph *g, struct mi_node *n, int r, int *perm)
{
	int cnt, seen[MI_MAX_DIMS] = { 0 };
	const int64_t *p = mi_attr_ints(n, "perm", &cnt);

	if (!p) {
		for (int i = 0; i < r; i++)
			perm[i] = r - 1 - i;
		return 0;
	}
	if (cnt != r)
		return mi_graph_err(g, n, -EINVAL,
				    "perm has %d values, expected %d", cnt, r);
	for (int i = 0; i < r; i++) {
		if (p[i] < 0 || p[i] >= r || seen[p[i]])
			return mi_graph_err(g, n, -EINVAL,
					    "perm is not a permutation");
		seen[p[i]] = 1;
		perm[i] = (int)p[i];
	}
	return 0;
}

static int transpose_infer(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0);
	int perm[MI_MAX_DIMS], ret = known_dtype(g, n, 0);
	int64_t dims[MI_MAX_DIMS];

	if (ret)
		return ret;
	ret = get_perm(g, n, x->ndim, perm);
	if (ret)
		return ret;
	for (int i = 0; i < x->ndim; i++)
		dims[i] = x->dims[perm[i]];
	return mi_ops_set_out(g, n, 0, x->dtype, x->ndim, dims);
}

static int transpose_run(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0), *y = mi_ops_out(g, n, 0);
	int perm[MI_MAX_DIMS], ret = get_perm(g, n, x->ndim, perm);
	int64_t xs[MI_MAX_DIMS], st[MI_MAX_DIMS];

	if (ret)
		return ret;
	mi_ops_strides(x->ndim, x->dims, xs);
	for (int i = 0; i < x->ndim; i++)
		st[i] = xs[perm[i]];
	mi_ops_strided_copy(y->data, x->data, mi_dtype_size(x->dtype), y->ndim,
			    y->dims, st, 0);
	return 0;
}

/* ---- Concat / Split -------------------------------------------------------------------- */

static int concat_infer(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0);
	int64_t dims[MI_MAX_DIMS];
	int axis, ret;

	for (int k = 0; k < n->ninputs; k++)
		if ((ret = known_dtype(g, n, k)))
			return ret;
	if (!mi_attr_get(n, "axis") && g->opset >= 4)
		return mi_graph_err(g, n, -EINVAL, "axis is required");
	ret = mi_ops_axis(g, n, "axis", mi_attr_int(n, "axis", 1), x->ndim,
			  &axis);
	if (ret)
		return ret;
	memcpy(dims, x->dims, sizeof(dims));
	for (int k = 1; k < n->ninputs; k++) {
		struct mi_tensor *t = mi_in(g, n, k);

		if (t->ndim != x->ndim || t->dtype != x->dtype)
			return mi_graph_err(g, n, -EINVAL,
					    "input %d rank/dtype differs", k);
		for (int d = 0; d < x->ndim; d++) {
			if (d == axis) {
				dims[d] = dims[d] < 0 || t->dims[d] < 0 ?
						  -1 :
						  dims[d] + t->dims[d];
			} else if (t->dims[d] >= 0 && dims[d] >= 0 &&
				   t->dims[d] != dims[d]) {
				return mi_graph_err(g, n, -EINVAL,
						    "input %d dim %d is %lld, expected %lld",
						    k, d, (long long)t->dims[d],
						    (long long)dims[d]);
			} else if (dims[d] < 0) {
				dims[d] = t->dims[d];
			}
		}
	}
	return mi_ops_set_out(g, n, 0, x->dtype, x->ndim, dims);
}

static int concat_run(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0), *y = mi_ops_out(g, n, 0);
	size_t es = mi_dtype_size(x->dtype);
	int axis;
	int64_t outer, inner, pos = 0, ylen;

	mi_ops_axis(g, n, "axis", mi_attr_int(n, "axis", 1), x->ndim, &axis);
	outer = mi_ops_prod(y->dims, 0, axis);
	inner = mi_ops_prod(y->dims, axis + 1, y->ndim);
	ylen = y->dims[axis] * inner;
	for (int k = 0; k < n->ninputs; k++) {
		struct mi_tensor *t = mi_in(g, n, k);
		int64_t len = t->dims[axis] * inner;

		for (int64_t o = 0; o < outer; o++)
			memcpy((char *)y->data + (o * ylen + pos) * es,
			       (const char *)t->data + o * len * es, len * es);
		pos += len;
	}
	return 0;
}

static int split_sizes(struct mi_graph *g, struct mi_node *n, int64_t *sz,
		       int *axis)
{
	struct mi_tensor *x = mi_in(g, n, 0);
	int64_t v[MAXV];
	int cnt, ret, no = n->noutputs;

	ret = mi_ops_axis(g, n, "axis", mi_attr_int(n, "axis", 0), x->ndim,
			  axis);
	if (ret)
		return ret;
	ret = mi_ops_input_ints(g, n, 1, v, MAXV, &cnt);
	if (ret == -ENOENT) {
		const int64_t *a = mi_attr_ints(n, "split", &cnt);

		ret = 0;
		if (a) {
			if (cnt > MAXV)
				return mi_graph_err(g, n, -EINVAL,
						    "split too long");
			memcpy(v, a, cnt * sizeof(int64_t));
		} else {
			cnt = -1;
		}
	}
	if (ret)
		return ret;
	if (no > MAXV)
		return mi_graph_err(g, n, -EINVAL, "too many outputs");
	if (cnt >= 0) {
		int64_t sum = 0;

		if (cnt != no)
			return mi_graph_err(g, n, -EINVAL,
					    "split has %d values for %d outputs",
					    cnt, no);
		for (int i = 0; i < cnt; i++) {
			if (v[i] < 0 || v[i] > MI_OPS_MAX_NUMEL)
				return mi_graph_err(g, n, -EINVAL,
						    "split value %lld is invalid",
						    (long long)v[i]);
			sz[i] = v[i];
			sum += v[i];
		}
		if (x->dims[*axis] >= 0 && sum != x->dims[*axis])
			return mi_graph_err(g, n, -EINVAL,
					    "split sums to %lld, dim is %lld",
					    (long long)sum,
					    (long long)x->dims[*axis]);
		return 0;
	}
	for (int i = 0; i < no; i++) {
		int64_t d = x->dims[*axis];

		if (d < 0)
			sz[i] = -1;
		else if (d % no)
			return mi_graph_err(g, n, -EINVAL,
					    "dim %lld does not split into %d equal parts",
					    (long long)d, no);
		else
			sz[i] = d / no;
	}
	return 0;
}

static int split_infer(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0);
	int64_t sz[MAXV], dims[MI_MAX_DIMS];
	int axis, ret = known_dtype(g, n, 0);

	if (ret)
		return ret;
	ret = split_sizes(g, n, sz, &axis);
	if (ret)
		return ret;
	for (int i = 0; i < n->noutputs && !ret; i++) {
		memcpy(dims, x->dims, sizeof(dims));
		dims[axis] = sz[i];
		ret = mi_ops_set_out(g, n, i, x->dtype, x->ndim, dims);
	}
	return ret;
}

static int split_run(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0);
	size_t es = mi_dtype_size(x->dtype);
	int64_t sz[MAXV], outer, inner, pos = 0, xlen;
	int axis, ret = split_sizes(g, n, sz, &axis);

	if (ret)
		return ret;
	outer = mi_ops_prod(x->dims, 0, axis);
	inner = mi_ops_prod(x->dims, axis + 1, x->ndim);
	xlen = x->dims[axis] * inner;
	for (int k = 0; k < n->noutputs; k++) {
		struct mi_tensor *y = mi_ops_out(g, n, k);
		int64_t len = sz[k] * inner;

		if (y && y->data)
			for (int64_t o = 0; o < outer; o++)
				memcpy((char *)y->data + o * len * es,
				       (const char *)x->data +
					       (o * xlen + pos) * es,
				       len * es);
		pos += len;
	}
	return 0;
}

/* ---- Slice ----------------------------------------------------------------------------- */

struct slice_plan {
	int64_t start[MI_MAX_DIMS], step[MI_MAX_DIMS], len[MI_MAX_DIMS];
};

static int slice_plan(struct mi_graph *g, struct mi_node *n,
		      struct slice_plan *p)
{
	struct mi_tensor *x = mi_in(g, n, 0);
	int64_t st[MAXV], en[MAXV], ax[MAXV], sp[MAXV];
	int ns, ne, na, nst, ret, seen[MI_MAX_DIMS] = { 0 };

	if (n->ninputs >= 3) {
		if ((ret = mi_ops_input_ints(g, n, 1, st, MAXV, &ns)) ||
		    (ret = mi_ops_input_ints(g, n, 2, en, MAXV, &ne)))
			return ret == -ENOENT ?
				       mi_graph_err(g, n, -EINVAL,
						    "starts/ends are required") :
				       ret;
		ret = mi_ops_input_ints(g, n, 3, ax, MAXV, &na);
		if (ret == -ENOENT)
			na = -1;
		else if (ret)
			return ret;
		ret = mi_ops_input_ints(g, n, 4, sp, MAXV, &nst);
		if (ret == -ENOENT)
			nst = -1;
		else if (ret)
			return ret;
	} else {
		const int64_t *a = mi_attr_ints(n, "starts", &ns);
		const int64_t *b = mi_attr_ints(n, "ends", &ne);
		const int64_t *c = mi_attr_ints(n, "axes", &na);

		if (!a || !b)
			return mi_graph_err(g, n, -EINVAL,
					    "starts/ends are required");
		if (ns > MAXV || ne > MAXV || na > MAXV)
			return mi_graph_err(g, n, -EINVAL, "too many values");
		memcpy(st, a, ns * 8);
		memcpy(en, b, ne * 8);
		if (c)
			memcpy(ax, c, na * 8);
		else
			na = -1;
		nst = -1;
	}
	if (ns != ne || (na >= 0 && na != ns) || (nst >= 0 && nst != ns))
		return mi_graph_err(g, n, -EINVAL,
				    "starts/ends/axes/steps lengths differ");
	for (int d = 0; d < x->ndim; d++) {
		p->start[d] = 0;
		p->step[d] = 1;
		p->len[d] = x->dims[d];
	}
	for (int i = 0; i < ns; i++) {
		int a;
		int64_t dim, step = nst >= 0 ? sp[i] : 1;

		ret = mi_ops_axis(g, n, "axes value", na >= 0 ? ax[i] : i,
				  x->ndim, &a);
		if (ret)
			return ret;
		if (seen[a])
			return mi_graph_err(g, n, -EINVAL, "axis %d repeated", a);
		seen[a] = 1;
		if (step == 0)
			return mi_graph_err(g, n, -EINVAL, "step is 0");
		dim = x->dims[a];
		if (dim < 0) {
			p->len[a] = -1;
			continue;
		}
		p->len[a] = mi_slice_axis(dim, st[i], en[i], &step, &p->start[a]);
		p->step[a] = step;
	}
	return 0;
}

static int slice_infer(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0);
	struct slice_plan p;
	int ret = known_dtype(g, n, 0);

	if (ret)
		return ret;
	ret = slice_plan(g, n, &p);
	if (ret == -EAGAIN) {
		int64_t dims[MI_MAX_DIMS];

		for (int i = 0; i < x->ndim; i++)
			dims[i] = -1;
		mi_ops_set_out(g, n, 0, x->dtype, x->ndim, dims);
	}
	if (ret)
		return ret;
	return mi_ops_set_out(g, n, 0, x->dtype, x->ndim, p.len);
}

static int slice_run(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0), *y = mi_ops_out(g, n, 0);
	struct slice_plan p;
	int64_t xs[MI_MAX_DIMS], st[MI_MAX_DIMS], off = 0;
	int ret = slice_plan(g, n, &p);

	if (ret)
		return ret;
	mi_ops_strides(x->ndim, x->dims, xs);
	for (int d = 0; d < x->ndim; d++) {
		st[d] = xs[d] * p.step[d];
		if (p.len[d] > 0)
			off += p.start[d] * xs[d];
	}
	mi_ops_strided_copy(y->data, x->data, mi_dtype_size(x->dtype), y->ndim,
			    y->dims, st, off);
	return 0;
}

/* ---- Tile ------------------------------------------------------------------------------- */

static int tile_infer(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0);
	int64_t rep[MAXV], dims[MI_MAX_DIMS];
	int cnt, ret = known_dtype(g, n, 0);

	if (ret)
		return ret;
	ret = mi_ops_input_ints(g, n, 1, rep, MAXV, &cnt);
	if (ret == -ENOENT)
		return mi_graph_err(g, n, -EINVAL, "repeats is required");
	if (ret)
		return ret;
	if (cnt != x->ndim)
		return mi_graph_err(g, n, -EINVAL,
				    "repeats has %d values, expected %d", cnt,
				    x->ndim);
	for (int i = 0; i < cnt; i++) {
		if (rep[i] < 0 || rep[i] > MI_OPS_MAX_NUMEL)
			return mi_graph_err(g, n, -EINVAL,
					    "repeats[%d] = %lld is invalid", i,
					    (long long)rep[i]);
		dims[i] = x->dims[i] < 0 ? -1 :
			  (x->dims[i] && rep[i] > MI_OPS_MAX_NUMEL / x->dims[i]) ?
					   MI_OPS_MAX_NUMEL + 1 :
					   x->dims[i] * rep[i];
	}
	return mi_ops_set_out(g, n, 0, x->dtype, x->ndim, dims);
}

static int tile_run(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0), *y = mi_ops_out(g, n, 0);
	size_t es = mi_dtype_size(x->dtype);
	int64_t total = mi_tensor_numel(y), xs[MI_MAX_DIMS];

	mi_ops_strides(x->ndim, x->dims, xs);
	for (int64_t i = 0; i < total; i++) {
		int64_t r = i, off = 0;

		for (int d = y->ndim - 1; d >= 0; d--) {
			off += (r % y->dims[d]) % x->dims[d] * xs[d];
			r /= y->dims[d];
		}
		memcpy((char *)y->data + i * es, (const char *)x->data + off * es,
		       es);
	}
	return 0;
}

/* ---- Pad --------------------------------------------------------------------------------- */

static int pad_get(struct mi_graph *g, struct mi_node *n, int64_t *pads)
{
	struct mi_tensor *x = mi_in(g, n, 0);
	int cnt, ret;
	int64_t v[MAXV];

	if (n->ninputs >= 2) {
		ret = mi_ops_input_ints(g, n, 1, v, MAXV, &cnt);
		if (ret == -ENOENT)
			return mi_graph_err(g, n, -EINVAL, "pads is required");
		if (ret)
			return ret;
	} else {
		const int64_t *a = mi_attr_ints(n, "pads", &cnt);

		if (!a)
			a = mi_attr_ints(n, "paddings", &cnt);
		if (!a)
			return mi_graph_err(g, n, -EINVAL, "pads is required");
		if (cnt > MAXV)
			return mi_graph_err(g, n, -EINVAL, "too many pads");
		memcpy(v, a, cnt * 8);
	}
	if (cnt != 2 * x->ndim)
		return mi_graph_err(g, n, -EINVAL,
				    "pads has %d values, expected %d", cnt,
				    2 * x->ndim);
	for (int i = 0; i < cnt; i++) {
		if (v[i] > (INT64_C(1) << 32) || v[i] < -(INT64_C(1) << 32))
			return mi_graph_err(g, n, -EINVAL,
					    "pads value %lld is out of range",
					    (long long)v[i]);
		pads[i] = v[i];
	}
	return 0;
}

static int pad_infer(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0);
	int64_t pads[2 * MI_MAX_DIMS], dims[MI_MAX_DIMS];
	const char *mode = mi_attr_string(n, "mode", "constant");
	int ret = known_dtype(g, n, 0);

	if (ret)
		return ret;
	if (strcmp(mode, "constant") && strcmp(mode, "reflect") &&
	    strcmp(mode, "edge"))
		return mi_graph_err(g, n, -EOPNOTSUPP,
				    "mode '%s' is not supported", mode);
	if (n->ninputs >= 4 && mi_in(g, n, 3))
		return mi_graph_err(g, n, -EOPNOTSUPP,
				    "axes input is not supported");
	ret = pad_get(g, n, pads);
	if (ret == -EAGAIN) {
		for (int i = 0; i < x->ndim; i++)
			dims[i] = -1;
		mi_ops_set_out(g, n, 0, x->dtype, x->ndim, dims);
	}
	if (ret)
		return ret;
	for (int i = 0; i < x->ndim; i++) {
		int64_t d = x->dims[i];

		if (d < 0) {
			dims[i] = -1;
			continue;
		}
		dims[i] = d + pads[i] + pads[i + x->ndim];
		if (dims[i] < 0)
			return mi_graph_err(g, n, -EINVAL,
					    "pads make dim %d negative", i);
		if (strcmp(mode, "constant") && d == 0 && dims[i] > 0)
			return mi_graph_err(g, n, -EINVAL,
					    "cannot %s-pad an empty dim", mode);
	}
	return mi_ops_set_out(g, n, 0, x->dtype, x->ndim, dims);
}

static int pad_run(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0), *y = mi_ops_out(g, n, 0);
	struct mi_tensor *cv = mi_in(g, n, 2);
	int64_t pads[2 * MI_MAX_DIMS], xs[MI_MAX_DIMS];
	const char *mode = mi_attr_string(n, "mode", "constant");
	int m = !strcmp(mode, "reflect") ? 1 : !strcmp(mode, "edge") ? 2 : 0;
	size_t es = mi_dtype_size(x->dtype);
	int64_t total = mi_tensor_numel(y), r = x->ndim;
	int ret = pad_get(g, n, pads);
	char cval[8] = { 0 };

	if (ret)
		return ret;
	/* constant value as one element of the output dtype */
	{
		struct mi_tensor tmp = *y;

		tmp.data = cval;
		if (cv && cv->data && mi_tensor_numel(cv) >= 1) {
			if (mi_ops_is_float(cv->dtype))
				mi_ops_set_f64(&tmp, 0, mi_ops_get_f64(cv, 0));
			else
				mi_ops_set_i64(&tmp, 0, mi_ops_get_i64(cv, 0));
		} else if (!cv) {
			mi_ops_set_f64(&tmp, 0, mi_attr_float(n, "value", 0));
		}
	}
	mi_ops_strides(x->ndim, x->dims, xs);
	for (int64_t i = 0; i < total; i++) {
		int64_t rr = i, off = 0;
		int outside = 0;

		for (int d = (int)r - 1; d >= 0; d--) {
			int64_t o = rr % y->dims[d], c = o - pads[d];
			int64_t dim = x->dims[d];

			rr /= y->dims[d];
			if (c < 0 || c >= dim) {
				if (m == 0) {
					outside = 1;
					break;
				} else if (m == 2) {
					c = c < 0 ? 0 : dim - 1;
				} else if (dim == 1) {
					c = 0;
				} else {
					int64_t period = 2 * (dim - 1);

					c %= period;
					if (c < 0)
						c += period;
					if (c >= dim)
						c = period - c;
				}
			}
			off += c * xs[d];
		}
		memcpy((char *)y->data + i * es,
		       outside ? cval : (const char *)x->data + off * es, es);
	}
	return 0;
}

/* ---- DepthToSpace / SpaceToDepth ------------------------------------------------------------ */

static int d2s_infer(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0);
	int64_t b = mi_attr_int(n, "blocksize", 0), dims[4];
	int d2s = !strcmp(n->op_type, "DepthToSpace");
	int ret = known_dtype(g, n, 0);
	const char *mode = mi_attr_string(n, "mode", "DCR");

	if (ret)
		return ret;
	if (x->ndim != 4)
		return mi_graph_err(g, n, -EINVAL, "input must be 4-D");
	if (b < 1 || b > 65536)
		return mi_graph_err(g, n, -EINVAL, "blocksize %lld is invalid",
				    (long long)b);
	if (strcmp(mode, "DCR") && strcmp(mode, "CRD"))
		return mi_graph_err(g, n, -EINVAL, "mode '%s' is invalid", mode);
	memcpy(dims, x->dims, sizeof(dims));
	if (d2s) {
		if (dims[1] >= 0 && dims[1] % (b * b))
			return mi_graph_err(g, n, -EINVAL,
					    "channels not divisible by blocksize^2");
		dims[1] = dims[1] < 0 ? -1 : dims[1] / (b * b);
		dims[2] = dims[2] < 0 ? -1 : dims[2] * b;
		dims[3] = dims[3] < 0 ? -1 : dims[3] * b;
	} else {
		if ((dims[2] >= 0 && dims[2] % b) || (dims[3] >= 0 && dims[3] % b))
			return mi_graph_err(g, n, -EINVAL,
					    "spatial dims not divisible by blocksize");
		dims[1] = dims[1] < 0 ? -1 : dims[1] * b * b;
		dims[2] = dims[2] < 0 ? -1 : dims[2] / b;
		dims[3] = dims[3] < 0 ? -1 : dims[3] / b;
	}
	return mi_ops_set_out(g, n, 0, x->dtype, 4, dims);
}

static int d2s_run(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0), *y = mi_ops_out(g, n, 0);
	int64_t b = mi_attr_int(n, "blocksize", 1);
	int d2s = !strcmp(n->op_type, "DepthToSpace");
	int crd = !strcmp(mi_attr_string(n, "mode", "DCR"), "CRD");
	size_t es = mi_dtype_size(x->dtype);
	/* work on the "small spatial" side: N, C (big), H, W (small) */
	const struct mi_tensor *big = d2s ? x : y;
	int64_t N = big->dims[0], C = big->dims[1], H = big->dims[2];
	int64_t W = big->dims[3], c2 = C / (b * b);

	for (int64_t nn = 0; nn < N; nn++)
		for (int64_t c = 0; c < C; c++)
			for (int64_t h = 0; h < H; h++)
				for (int64_t w = 0; w < W; w++) {
					int64_t oc, bh, bw, so, bo;

					if (crd) {
						oc = c / (b * b);
						bh = (c % (b * b)) / b;
						bw = c % b;
					} else {
						oc = c % c2;
						bh = c / (c2 * b);
						bw = (c / c2) % b;
					}
					bo = ((nn * C + c) * H + h) * W + w;
					so = ((nn * c2 + oc) * H * b + h * b + bh) *
						     W * b +
					     w * b + bw;
					if (d2s)
						memcpy((char *)y->data + so * es,
						       (const char *)x->data + bo * es,
						       es);
					else
						memcpy((char *)y->data + bo * es,
						       (const char *)x->data + so * es,
						       es);
				}
	return 0;
}

const struct mi_op_def mi_ops_shape[] = {
	{ "Reshape", "", 1, 2, 1, 1, reshape_infer, copy_run },
	{ "Flatten", "", 1, 1, 1, 1, flatten_infer, copy_run },
	{ "Squeeze", "", 1, 2, 1, 1, squeeze_infer, copy_run },
	{ "Unsqueeze", "", 1, 2, 1, 1, unsqueeze_infer, copy_run },
	{ "Shape", "", 1, 1, 1, 1, shape_infer, shape_run },
	{ "Size", "", 1, 1, 1, 1, size_infer, size_run },
	{ "Expand", "", 2, 2, 1, 1, expand_infer, expand_run },
	{ "Transpose", "", 1, 1, 1, 1, transpose_infer, transpose_run },
	{ "Concat", "", 1, 1024, 1, 1, concat_infer, concat_run },
	{ "Split", "", 1, 2, 1, 1024, split_infer, split_run },
	{ "Slice", "", 1, 5, 1, 1, slice_infer, slice_run },
	{ "Tile", "", 2, 2, 1, 1, tile_infer, tile_run },
	{ "Pad", "", 1, 4, 1, 1, pad_infer, pad_run },
	{ "DepthToSpace", "", 1, 1, 1, 1, d2s_infer, d2s_run },
	{ "SpaceToDepth", "", 1, 1, 1, 1, d2s_infer, d2s_run },
	{ NULL }
};
