// SPDX-License-Identifier: MIT
/*
 * Conv (1-D/2-D/3-D..., groups, dilations, pads, auto_pad) through im2col
 * and a plain matrix product, and ConvTranspose (output_padding,
 * output_shape, groups, dilations, auto_pad) as a direct scatter.  fp32.
 */
#include <stdlib.h>

#include "ops/ops.h"

/* Common checks: X [N, C, D...], W [M, C/group, k...] (Conv) or
 * [C, M/group, k...] (ConvTranspose); fills s->kernel. */
static int conv_common(struct mi_graph *g, struct mi_node *n,
		       struct mi_tensor **xp, struct mi_tensor **wp,
		       int64_t *group, int64_t *kernel)
{
	struct mi_tensor *x = mi_in(g, n, 0), *w = mi_in(g, n, 1);
	struct mi_tensor *b = mi_in(g, n, 2);
	const int64_t *ks;
	int cnt, ret, nsp;

	if ((ret = mi_ops_need_rank(g, n, 0)) ||
	    (ret = mi_ops_need_rank(g, n, 1)))
		return ret;
	if (x->dtype != MI_DT_FLOAT || w->dtype != MI_DT_FLOAT ||
	    (b && b->dtype != MI_DT_FLOAT && b->ndim >= 0))
		return mi_graph_err(g, n, -EOPNOTSUPP,
				    "only float32 is supported, got %s",
				    mi_dtype_name(x->dtype));
	if (x->ndim < 3)
		return mi_graph_err(g, n, -EINVAL,
				    "X must have rank >= 3, has %d", x->ndim);
	if (w->ndim != x->ndim)
		return mi_graph_err(g, n, -EINVAL,
				    "W has rank %d, expected %d", w->ndim,
				    x->ndim);
	nsp = x->ndim - 2;
	*group = mi_attr_int(n, "group", 1);
	if (*group < 1 || *group > (INT64_C(1) << 24))
		return mi_graph_err(g, n, -EINVAL, "group %lld is invalid",
				    (long long)*group);
	ks = mi_attr_ints(n, "kernel_shape", &cnt);
	if (ks && cnt != nsp)
		return mi_graph_err(g, n, -EINVAL,
				    "kernel_shape has %d values, expected %d",
				    cnt, nsp);
	for (int i = 0; i < nsp; i++) {
		int64_t wd = w->dims[i + 2];

		if (ks && wd >= 0 && ks[i] != wd)
			return mi_graph_err(
				g, n, -EINVAL,
				"kernel_shape %lld does not match W dim %lld",
				(long long)ks[i], (long long)wd);
		kernel[i] = ks ? ks[i] : wd;
		if (kernel[i] < 0)
			return -EAGAIN;
	}
	if (b && b->ndim >= 0 && b->ndim != 1)
		return mi_graph_err(g, n, -EINVAL, "B must be 1-D");
	*xp = x;
	*wp = w;
	return 0;
}

static int conv_setup(struct mi_graph *g, struct mi_node *n,
		      struct mi_spatial *s, int64_t *group)
{
	struct mi_tensor *x, *w, *b = mi_in(g, n, 2);
	int64_t C, M;
	int ret = conv_common(g, n, &x, &w, group, s->kernel);

	if (ret)
		return ret;
	C = x->dims[1];
	M = w->dims[0];
	if (C >= 0 && w->dims[1] >= 0 && w->dims[1] * *group != C)
		return mi_graph_err(g, n, -EINVAL,
				    "X has %lld channels, W expects %lld x group %lld",
				    (long long)C, (long long)w->dims[1],
				    (long long)*group);
	if (M >= 0 && M % *group)
		return mi_graph_err(g, n, -EINVAL,
				    "%lld output channels not divisible by group %lld",
				    (long long)M, (long long)*group);
	if (b && b->ndim == 1 && b->dims[0] >= 0 && M >= 0 && b->dims[0] != M)
		return mi_graph_err(g, n, -EINVAL,
				    "B has %lld values, expected %lld",
				    (long long)b->dims[0], (long long)M);
	return mi_ops_spatial(g, n, s, x, 0);
}

static int conv_infer(struct mi_graph *g, struct mi_node *n)
{
	struct mi_spatial s;
	int64_t group, dims[MI_MAX_DIMS];
	int ret = conv_setup(g, n, &s, &group);

	if (ret)
		return ret;
	dims[0] = mi_in(g, n, 0)->dims[0];
	dims[1] = mi_in(g, n, 1)->dims[0];
	for (int i = 0; i < s.nsp; i++)
		dims[i + 2] = s.out[i];
	return mi_ops_set_out(g, n, 0, MI_DT_FLOAT, s.nsp + 2, dims);
}

/* col[kidx * osz + opos] for one input channel plane. */
static void im2col(const float *x, const struct mi_spatial *s, int64_t kprod,
		   int64_t osz, float *col)
{
	int nsp = s->nsp, last = nsp - 1;
	int64_t ow = s->out[last], iw = s->in[last];
	int64_t rows = osz / ow;

	for (int64_t kidx = 0; kidx < kprod; kidx++) {
		int64_t kpos[MI_MAX_DIMS], r = kidx;
		float *c = col + kidx * osz;

		for (int d = last; d >= 0; d--) {
			kpos[d] = r % s->kernel[d];
			r /= s->kernel[d];
		}
		for (int64_t row = 0; row < rows; row++) {
			int64_t base = 0, rr = row, st = 1;
			int valid = 1;
			int64_t koff = kpos[last] * s->dil[last] -
				       s->pad_begin[last];
			float *cr = c + row * ow;

			for (int d = last - 1; d >= 0; d--) {
				int64_t o = rr % s->out[d], i;

				rr /= s->out[d];
				i = o * s->stride[d] - s->pad_begin[d] +
				    kpos[d] * s->dil[d];
				st *= s->in[d + 1];
				if (i < 0 || i >= s->in[d])
					valid = 0;
				base += i * st;
			}
			if (!valid) {
				memset(cr, 0, ow * sizeof(float));
				continue;
			}
			for (int64_t o = 0; o < ow; o++) {
				int64_t i = o * s->stride[last] + koff;

				cr[o] = (i >= 0 && i < iw) ? x[base + i] : 0;
			}
		}
	}
}

static int conv_run(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0), *w = mi_in(g, n, 1);
	struct mi_tensor *b = mi_in(g, n, 2), *y = mi_ops_out(g, n, 0);
	struct mi_spatial s;
	int64_t group, N, C, M, Cg, Mg, kprod = 1, isz = 1, osz = 1;
	float *col = NULL;
	int ret = conv_setup(g, n, &s, &group), direct = 1;

	if (ret)
		return ret;
	N = x->dims[0];
	C = x->dims[1];
	M = w->dims[0];
	Cg = C / group;
	Mg = M / group;
	for (int i = 0; i < s.nsp; i++) {
		kprod *= s.kernel[i];
		isz *= s.in[i];
		osz *= s.out[i];
		if (s.kernel[i] != 1 || s.stride[i] != 1 ||
		    s.pad_begin[i] || s.pad_end[i])
			direct = 0;
	}
	if (!direct) {
		int64_t ncol = Cg * kprod * osz;

		col = malloc((ncol > 0 ? ncol : 1) * sizeof(float));
		if (!col)
			return mi_graph_err(g, n, -ENOMEM,
					    "out of memory for im2col");
	}
	for (int64_t bn = 0; bn < N; bn++) {
		for (int64_t gi = 0; gi < group; gi++) {
			const float *xg = (const float *)x->data +
					  (bn * C + gi * Cg) * isz;
			const float *wg = (const float *)w->data +
					  gi * Mg * Cg * kprod;
			float *yg = (float *)y->data + (bn * M + gi * Mg) * osz;
			const float *cm = xg;

			if (!direct) {
				for (int64_t c = 0; c < Cg; c++)
					im2col(xg + c * isz, &s, kprod, osz,
					       col + c * kprod * osz);
				cm = col;
			}
			for (int64_t m = 0; m < Mg; m++) {
				float bv = b ? ((const float *)b->data)[gi * Mg + m] : 0;

				for (int64_t o = 0; o < osz; o++)
					yg[m * osz + o] = bv;
			}
			mi_ops_sgemm(Mg, osz, Cg * kprod, wg, Cg * kprod, 1, cm,
				     osz, 1, yg, osz);
		}
	}
	free(col);
	return 0;
}

/* ---- ConvTranspose -------------------------------------------------------- */

static int convt_setup(struct mi_graph *g, struct mi_node *n,
		       struct mi_spatial *s, int64_t *group, int64_t *M)
{
	struct mi_tensor *x, *w, *b = mi_in(g, n, 2);
	const int64_t *op, *os;
	int opn, osn, ret, nsp;
	const char *ap;

	ret = conv_common(g, n, &x, &w, group, s->kernel);
	if (ret)
		return ret;
	nsp = x->ndim - 2;
	if (x->dims[1] >= 0 && w->dims[0] >= 0 && x->dims[1] != w->dims[0])
		return mi_graph_err(g, n, -EINVAL,
				    "X has %lld channels, W has %lld",
				    (long long)x->dims[1], (long long)w->dims[0]);
	if (x->dims[1] >= 0 && x->dims[1] % *group)
		return mi_graph_err(g, n, -EINVAL,
				    "channels not divisible by group");
	*M = w->dims[1] < 0 ? -1 : w->dims[1] * *group;
	if (b && b->ndim == 1 && b->dims[0] >= 0 && *M >= 0 && b->dims[0] != *M)
		return mi_graph_err(g, n, -EINVAL,
				    "B has %lld values, expected %lld",
				    (long long)b->dims[0], (long long)*M);
	/* reuse the attribute parser for strides/dilations/pads only */
	ap = mi_attr_string(n, "auto_pad", "NOTSET");
	{
		struct mi_tensor fake = *x;

		/* parse with a big enough input so no window check fails */
		for (int i = 0; i < nsp; i++)
			fake.dims[i + 2] = -1;
		ret = mi_ops_spatial(g, n, s, &fake, 0);
		if (ret)
			return ret;
	}
	op = mi_attr_ints(n, "output_padding", &opn);
	if (op && opn != nsp)
		return mi_graph_err(g, n, -EINVAL,
				    "output_padding has %d values, expected %d",
				    opn, nsp);
	os = mi_attr_ints(n, "output_shape", &osn);
	if (os && osn != nsp && osn != nsp + 2)
		return mi_graph_err(g, n, -EINVAL,
				    "output_shape has %d values, expected %d",
				    osn, nsp);
	if (os && osn == nsp + 2)
		os += 2;
	for (int i = 0; i < nsp; i++) {
		int64_t in = x->dims[i + 2], opad = op ? op[i] : 0;
		int64_t ek = (s->kernel[i] - 1) * s->dil[i] + 1, o, total;

		s->in[i] = in;
		if (opad < 0 || opad >= (INT64_C(1) << 24) ||
		    (opad >= s->stride[i] && opad >= s->dil[i]))
			return mi_graph_err(g, n, -EINVAL,
					    "output_padding %lld is invalid",
					    (long long)opad);
		if (in < 0) {
			s->out[i] = -1;
			continue;
		}
		if (os) {
			o = os[i];
			if (o < 1 || o > (INT64_C(1) << 30))
				return mi_graph_err(g, n, -EINVAL,
						    "output_shape %lld is invalid",
						    (long long)o);
		} else if (!strcmp(ap, "SAME_UPPER") ||
			   !strcmp(ap, "SAME_LOWER")) {
			o = in * s->stride[i];
		} else {
			o = -1;
		}
		if (o >= 0) {
			total = s->stride[i] * (in - 1) + opad + ek - o;
			if (total < 0)
				total = 0;
			if (!strcmp(ap, "SAME_LOWER")) {
				s->pad_begin[i] = total - total / 2;
				s->pad_end[i] = total / 2;
			} else if (os || !strcmp(ap, "SAME_UPPER")) {
				s->pad_begin[i] = total / 2;
				s->pad_end[i] = total - total / 2;
			}
		} else {
			if (!strcmp(ap, "VALID"))
				s->pad_begin[i] = s->pad_end[i] = 0;
			o = s->stride[i] * (in - 1) + opad + ek -
			    s->pad_begin[i] - s->pad_end[i];
		}
		if (o < 1)
			return mi_graph_err(g, n, -EINVAL,
					    "output size %lld is not positive",
					    (long long)o);
		s->out[i] = o;
	}
	return 0;
}

static int convt_infer(struct mi_graph *g, struct mi_node *n)
{
	struct mi_spatial s;
	int64_t group, M, dims[MI_MAX_DIMS];
	int ret = convt_setup(g, n, &s, &group, &M);

	if (ret)
		return ret;
	dims[0] = mi_in(g, n, 0)->dims[0];
	dims[1] = M;
	for (int i = 0; i < s.nsp; i++)
		dims[i + 2] = s.out[i];
	return mi_ops_set_out(g, n, 0, MI_DT_FLOAT, s.nsp + 2, dims);
}

static int convt_run(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0), *w = mi_in(g, n, 1);
	struct mi_tensor *b = mi_in(g, n, 2), *y = mi_ops_out(g, n, 0);
	struct mi_spatial s;
	int64_t group, M, N, C, Cg, Mg, kprod = 1, isz = 1, osz = 1;
	int64_t *ooff;
	int ret = convt_setup(g, n, &s, &group, &M);
	const float *X = x->data, *W = w->data;
	float *Y = y->data;

	if (ret)
		return ret;
	N = x->dims[0];
	C = x->dims[1];
	Cg = C / group;
	Mg = M / group;
	for (int i = 0; i < s.nsp; i++) {
		kprod *= s.kernel[i];
		isz *= s.in[i];
		osz *= s.out[i];
	}
	/* ooff[ipos * kprod + kidx]: output offset or -1 */
	ooff = malloc((isz * kprod > 0 ? isz * kprod : 1) * sizeof(*ooff));
	if (!ooff)
		return mi_graph_err(g, n, -ENOMEM, "out of memory");
	for (int64_t ip = 0; ip < isz; ip++)
		for (int64_t k = 0; k < kprod; k++) {
			int64_t r = ip, rk = k, off = 0, st = 1;
			int valid = 1;

			for (int d = s.nsp - 1; d >= 0; d--) {
				int64_t i = r % s.in[d], kk = rk % s.kernel[d];
				int64_t o = i * s.stride[d] + kk * s.dil[d] -
					    s.pad_begin[d];

				r /= s.in[d];
				rk /= s.kernel[d];
				if (o < 0 || o >= s.out[d])
					valid = 0;
				off += o * st;
				st *= s.out[d];
			}
			ooff[ip * kprod + k] = valid ? off : -1;
		}
	for (int64_t bn = 0; bn < N; bn++)
		for (int64_t m = 0; m < M; m++) {
			float bv = b ? ((const float *)b->data)[m] : 0;
			float *yo = Y + (bn * M + m) * osz;

			for (int64_t o = 0; o < osz; o++)
				yo[o] = bv;
		}
	for (int64_t bn = 0; bn < N; bn++)
		for (int64_t gi = 0; gi < group; gi++)
			for (int64_t c = 0; c < Cg; c++) {
				int64_t ci = gi * Cg + c;
				const float *xc = X + (bn * C + ci) * isz;

				for (int64_t m = 0; m < Mg; m++) {
					const float *wk = W + (ci * Mg + m) * kprod;
					float *yo = Y + (bn * M + gi * Mg + m) * osz;

					for (int64_t ip = 0; ip < isz; ip++) {
						float xv = xc[ip];
						const int64_t *oo = ooff + ip * kprod;

						for (int64_t k = 0; k < kprod; k++)
							if (oo[k] >= 0)
								yo[oo[k]] += xv * wk[k];
					}
				}
			}
	free(ooff);
	return 0;
}

const struct mi_op_def mi_ops_conv[] = {
	{ "Conv", "", 2, 3, 1, 1, conv_infer, conv_run },
	{ "ConvTranspose", "", 2, 3, 1, 1, convt_infer, convt_run },
	{ NULL }
};
