// SPDX-License-Identifier: MIT
/*
 * Resize (opset 10: X, scales; 11+: X, roi, scales, sizes) and Upsample
 * (opset 7 scales attribute, 9 scales input).  Modes nearest (all
 * nearest_modes), linear (N-linear), cubic (cubic_coeff_a,
 * exclude_outside); every coordinate_transformation_mode incl.
 * tf_crop_and_resize.  Separable: each output element is a weighted sum
 * over the per-axis neighbours.
 */
#include <math.h>
#include <stdlib.h>

#include "ops/ops.h"

enum { M_NEAREST, M_LINEAR, M_CUBIC };
enum { C_HALF, C_PT_HALF, C_ALIGN, C_ASYM, C_TF_HALF_NN, C_TF_CROP };
enum { N_ROUND_FLOOR, N_ROUND_CEIL, N_FLOOR, N_CEIL, N_SIMPLE };

struct rs {
	int mode, ctm, nmode, excl;
	double a, extrap;
	int r;
	double scale[MI_MAX_DIMS];
	double roi_s[MI_MAX_DIMS], roi_e[MI_MAX_DIMS];
	int64_t in[MI_MAX_DIMS], out[MI_MAX_DIMS];
	double outf[MI_MAX_DIMS]; /* in * scale, unrounded (ONNX reference) */
};

static int pick(const char *s, const char *const *names, int cnt)
{
	for (int i = 0; i < cnt; i++)
		if (!strcmp(s, names[i]))
			return i;
	return -1;
}

static int rs_setup(struct mi_graph *g, struct mi_node *n, struct rs *p)
{
	static const char *const modes[] = { "nearest", "linear", "cubic" };
	static const char *const ctms[] = { "half_pixel", "pytorch_half_pixel",
					    "align_corners", "asymmetric",
					    "tf_half_pixel_for_nn",
					    "tf_crop_and_resize" };
	static const char *const nms[] = { "round_prefer_floor",
					   "round_prefer_ceil", "floor", "ceil" };
	struct mi_tensor *x = mi_in(g, n, 0);
	int upsample = !strcmp(n->op_type, "Upsample");
	int old = upsample || g->opset < 11 || n->ninputs == 2;
	const char *m = mi_attr_string(n, "mode", "nearest");
	double sc[MI_MAX_DIMS + 1];
	int64_t sz[MI_MAX_DIMS];
	int nsc = 0, nsz = 0, ret;

	ret = mi_ops_need_rank(g, n, 0);
	if (ret)
		return ret;
	if (!mi_ops_is_float(x->dtype) && !mi_ops_is_int(x->dtype))
		return mi_graph_err(g, n, -EOPNOTSUPP, "dtype %s unsupported",
				    mi_dtype_name(x->dtype));
	p->r = x->ndim;
	if (!strcmp(m, "bilinear") || !strcmp(m, "trilinear"))
		m = "linear";
	p->mode = pick(m, modes, 3);
	if (p->mode < 0)
		return mi_graph_err(g, n, -EINVAL, "mode '%s' is invalid", m);
	if (old) {
		p->ctm = C_ASYM;
		p->nmode = N_SIMPLE;
	} else {
		const char *c = mi_attr_string(n, "coordinate_transformation_mode",
					       "half_pixel");
		const char *nm = mi_attr_string(n, "nearest_mode",
						"round_prefer_floor");

		p->ctm = pick(c, ctms, 6);
		if (p->ctm < 0)
			return mi_graph_err(g, n, -EINVAL,
					    "coordinate_transformation_mode '%s' is invalid",
					    c);
		p->nmode = pick(nm, nms, 4);
		if (p->nmode < 0)
			return mi_graph_err(g, n, -EINVAL,
					    "nearest_mode '%s' is invalid", nm);
	}
	if (mi_attr_int(n, "antialias", 0))
		return mi_graph_err(g, n, -EOPNOTSUPP,
				    "antialias is not supported");
	if (mi_attr_get(n, "axes"))
		return mi_graph_err(g, n, -EOPNOTSUPP, "axes is not supported");
	p->a = mi_attr_float(n, "cubic_coeff_a", -0.75f);
	p->excl = mi_attr_int(n, "exclude_outside", 0) != 0;
	p->extrap = mi_attr_float(n, "extrapolation_value", 0.0f);
	for (int d = 0; d < p->r; d++) {
		p->in[d] = x->dims[d];
		p->roi_s[d] = 0;
		p->roi_e[d] = 1;
	}

	/* scales / sizes */
	if (upsample && n->ninputs < 2) {
		const float *f = mi_attr_floats(n, "scales", &nsc);

		if (!f)
			return mi_graph_err(g, n, -EINVAL, "scales is required");
		if (nsc > MI_MAX_DIMS)
			nsc = MI_MAX_DIMS + 1;
		for (int i = 0; i < nsc && i < MI_MAX_DIMS; i++)
			sc[i] = f[i];
	} else {
		int si = old ? 1 : 2;
		struct mi_tensor *st = mi_in(g, n, si);

		if (st && st->ndim >= 0 && mi_tensor_numel(st) > 0) {
			ret = mi_ops_input_floats(g, n, si, sc, MI_MAX_DIMS + 1,
						  &nsc);
			if (ret)
				return ret;
		}
		if (!old && mi_in(g, n, 3)) {
			ret = mi_ops_input_ints(g, n, 3, sz, MI_MAX_DIMS, &nsz);
			if (ret)
				return ret;
		}
		if (!old && p->ctm == C_TF_CROP) {
			double roi[2 * MI_MAX_DIMS];
			int nroi;

			ret = mi_ops_input_floats(g, n, 1, roi, 2 * MI_MAX_DIMS,
						  &nroi);
			if (ret == -ENOENT || (!ret && nroi != 2 * p->r))
				return mi_graph_err(g, n, -EINVAL,
						    "roi must have %d values",
						    2 * p->r);
			if (ret)
				return ret;
			for (int d = 0; d < p->r; d++) {
				p->roi_s[d] = roi[d];
				p->roi_e[d] = roi[d + p->r];
			}
		}
	}
	if (nsz && nsc)
		return mi_graph_err(g, n, -EINVAL,
				    "only one of scales and sizes may be given");
	if (!nsz && !nsc)
		return mi_graph_err(g, n, -EINVAL,
				    "one of scales and sizes is required");
	if ((nsc && nsc != p->r) || (nsz && nsz != p->r))
		return mi_graph_err(g, n, -EINVAL,
				    "scales/sizes has %d values, expected %d",
				    nsc ? nsc : nsz, p->r);
	for (int d = 0; d < p->r; d++) {
		if (nsc) {
			double o;

			if (!(sc[d] > 0) || sc[d] > 1e6)
				return mi_graph_err(g, n, -EINVAL,
						    "scale %g is invalid", sc[d]);
			p->scale[d] = sc[d];
			o = p->in[d] < 0 ? -1 : floor(p->in[d] * sc[d]);
			if (o > (double)MI_OPS_MAX_NUMEL)
				return mi_graph_err(g, n, -EINVAL,
						    "output is too large");
			p->out[d] = (int64_t)o;
			p->outf[d] = p->in[d] * sc[d];
		} else {
			if (sz[d] < 0 || sz[d] > MI_OPS_MAX_NUMEL)
				return mi_graph_err(g, n, -EINVAL,
						    "size %lld is invalid",
						    (long long)sz[d]);
			p->out[d] = sz[d];
			p->outf[d] = (double)sz[d];
			p->scale[d] = p->in[d] > 0 ? (double)sz[d] / p->in[d] : 1;
		}
	}
	return 0;
}

static int rs_infer(struct mi_graph *g, struct mi_node *n)
{
	struct rs p;
	int ret = rs_setup(g, n, &p);

	if (ret == -EAGAIN && mi_in(g, n, 0)->ndim >= 0) {
		struct mi_tensor *x = mi_in(g, n, 0);
		int64_t dims[MI_MAX_DIMS];

		for (int d = 0; d < x->ndim; d++)
			dims[d] = -1;
		mi_ops_set_out(g, n, 0, x->dtype, x->ndim, dims);
	}
	if (ret)
		return ret;
	return mi_ops_set_out(g, n, 0, mi_in(g, n, 0)->dtype, p.r, p.out);
}

static double rs_coord(const struct rs *p, int d, int64_t xo, int *outside)
{
	double s = p->scale[d], x = (double)xo;
	int64_t in = p->in[d];
	double out = p->outf[d];

	switch (p->ctm) {
	case C_HALF: return (x + 0.5) / s - 0.5;
	case C_PT_HALF: return out > 1 ? (x + 0.5) / s - 0.5 : 0;
	case C_ALIGN: return out == 1 ? 0 : x * (in - 1) / (out - 1);
	case C_TF_HALF_NN: return (x + 0.5) / s;
	case C_TF_CROP: {
		double v;

		if (out > 1)
			v = p->roi_s[d] * (in - 1) +
			    x * (p->roi_e[d] - p->roi_s[d]) * (in - 1) /
				    (out - 1);
		else
			v = 0.5 * (p->roi_s[d] + p->roi_e[d]) * (in - 1);
		if (v < 0 || v > in - 1)
			*outside = 1;
		return v;
	}
	default: return x / s;
	}
}

/* Neighbours of one output coordinate along axis d: up to 4. */
static int rs_taps(const struct rs *p, int d, int64_t xo, int64_t *idx,
		   double *w, int *outside)
{
	int64_t in = p->in[d];
	double x = rs_coord(p, d, xo, outside);
	int cnt = 0;

	if (!isfinite(x) || fabs(x) > 1e15) {
		*outside = 1;
		x = 0;
	}

	if (p->mode == M_NEAREST) {
		double f = floor(x), fr = x - f;
		int64_t i;

		switch (p->nmode) {
		case N_ROUND_FLOOR: i = (int64_t)(fr <= 0.5 ? f : f + 1); break;
		case N_ROUND_CEIL: i = (int64_t)(fr < 0.5 ? f : f + 1); break;
		case N_FLOOR: i = (int64_t)f; break;
		case N_CEIL: i = (int64_t)ceil(x); break;
		default: i = p->scale[d] < 1 ? (int64_t)ceil(x) : (int64_t)x; break;
		}
		idx[0] = i < 0 ? 0 : i >= in ? in - 1 : i;
		w[0] = 1;
		return 1;
	}
	if (p->mode == M_LINEAR) {
		double f = floor(x), t = x - f;
		int64_t i0 = (int64_t)f;

		if (x < 0) {
			idx[0] = 0;
			w[0] = 1;
			return 1;
		}
		if (x >= in - 1) {
			idx[0] = in - 1;
			w[0] = 1;
			return 1;
		}
		idx[cnt] = i0;
		w[cnt++] = 1 - t;
		if (t != 0) {
			idx[cnt] = i0 + 1;
			w[cnt++] = t;
		}
		return cnt;
	}
	/* cubic */
	{
		double f = floor(x), t = x - f, A = p->a, c[4], sum = 0;
		int64_t i0 = (int64_t)f;

		c[0] = ((A * (t + 1) - 5 * A) * (t + 1) + 8 * A) * (t + 1) - 4 * A;
		c[1] = ((A + 2) * t - (A + 3)) * t * t + 1;
		c[2] = ((A + 2) * (1 - t) - (A + 3)) * (1 - t) * (1 - t) + 1;
		c[3] = ((A * (2 - t) - 5 * A) * (2 - t) + 8 * A) * (2 - t) - 4 * A;
		for (int k = 0; k < 4; k++) {
			int64_t i = i0 - 1 + k;

			if (p->excl && (i < 0 || i >= in))
				c[k] = 0;
			sum += c[k];
		}
		for (int k = 0; k < 4; k++) {
			int64_t i = i0 - 1 + k;

			if (c[k] == 0)
				continue;
			idx[cnt] = i < 0 ? 0 : i >= in ? in - 1 : i;
			w[cnt++] = p->excl && sum != 0 ? c[k] / sum : c[k];
		}
		if (!cnt) {
			idx[0] = i0 < 0 ? 0 : i0 >= in ? in - 1 : i0;
			w[0] = 0;
			cnt = 1;
		}
		return cnt;
	}
}

static int rs_run(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0), *y = mi_ops_out(g, n, 0);
	struct rs p;
	int ret = rs_setup(g, n, &p), r;
	int64_t total = mi_tensor_numel(y), xs[MI_MAX_DIMS];
	/* per-axis tap tables: taps[d][o*4 + k] */
	int64_t *tidx[MI_MAX_DIMS] = { 0 };
	double *tw[MI_MAX_DIMS] = { 0 };
	int *tcnt[MI_MAX_DIMS] = { 0 }, *tout[MI_MAX_DIMS] = { 0 };

	if (ret)
		return ret;
	r = p.r;
	for (int d = 0; d < r; d++)
		if (p.in[d] == 0 && p.out[d] > 0)
			return mi_graph_err(g, n, -EINVAL,
					    "cannot resize an empty axis");
	if (total == 0)
		return 0;
	mi_ops_strides(r, x->dims, xs);
	for (int d = 0; d < r; d++) {
		int64_t o = p.out[d];

		tidx[d] = malloc(o * 4 * sizeof(int64_t));
		tw[d] = malloc(o * 4 * sizeof(double));
		tcnt[d] = malloc(o * sizeof(int));
		tout[d] = calloc(o, sizeof(int));
		if (!tidx[d] || !tw[d] || !tcnt[d] || !tout[d]) {
			ret = -ENOMEM;
			goto out;
		}
		for (int64_t i = 0; i < o; i++)
			tcnt[d][i] = rs_taps(&p, d, i, tidx[d] + i * 4,
					     tw[d] + i * 4, &tout[d][i]);
	}
	for (int64_t e = 0; e < total; e++) {
		int64_t c[MI_MAX_DIMS], rr = e;
		int k[MI_MAX_DIMS] = { 0 }, outside = 0;
		double acc = 0;

		for (int d = r - 1; d >= 0; d--) {
			c[d] = rr % p.out[d];
			rr /= p.out[d];
			outside |= tout[d][c[d]];
		}
		if (outside) {
			mi_ops_wr(y, e, p.extrap);
			continue;
		}
		/* iterate over the product of taps */
		for (;;) {
			int64_t off = 0;
			double w = 1;
			int d;

			for (d = 0; d < r; d++) {
				off += tidx[d][c[d] * 4 + k[d]] * xs[d];
				w *= tw[d][c[d] * 4 + k[d]];
			}
			acc += w * mi_ops_rd(x, off);
			for (d = r - 1; d >= 0; d--) {
				if (++k[d] < tcnt[d][c[d]])
					break;
				k[d] = 0;
			}
			if (d < 0)
				break;
		}
		if (mi_ops_is_int(y->dtype))
			acc = nearbyint(acc);
		mi_ops_wr(y, e, acc);
	}
out:
	for (int d = 0; d < r; d++) {
		free(tidx[d]);
		free(tw[d]);
		free(tcnt[d]);
		free(tout[d]);
	}
	return ret ? mi_graph_err(g, n, ret, "out of memory") : 0;
}

const struct mi_op_def mi_ops_resize[] = {
	{ "Resize", "", 1, 4, 1, 1, rs_infer, rs_run },
	{ "Upsample", "", 1, 2, 1, 1, rs_infer, rs_run },
	{ NULL }
};
