// SPDX-License-Identifier: MIT
/*
 * Quantized ONNX operators, reference implementations (any combination of
 * uint8/int8 inputs, per-tensor or per-axis parameters):
 * QuantizeLinear, DequantizeLinear, QLinearConv, QLinearMatMul,
 * ConvInteger, MatMulInteger.
 *
 * Arithmetic (shared with the int8 fast path, so both agree bit for bit):
 *   QuantizeLinear   q = sat(rne(x / scale) + zp)         (fp32 divide)
 *   DequantizeLinear y = (float)(q - zp) * scale
 *   QLinear*         acc = sum (x - zx)(w - zw) [+ bias]   (int32, exact)
 *                    q = sat(rne((float)acc * mult) + zy)
 *                    mult = (float)(sx * sw) / sy          (fp32)
 */
#include <math.h>
#include <stdlib.h>

#include "ops/ops.h"
#include "quant/quant.h"
#include "quant/quant-impl.h"

/* ---- parameters (scale / zero point, per tensor or per axis) ----------- */

int mi_qparam_read(struct mi_graph *g, struct mi_node *n, int si, int zi,
		   int64_t len, const char *what, struct mi_qparam *p)
{
	struct mi_tensor *s = mi_in(g, n, si), *z = zi >= 0 ? mi_in(g, n, zi) : NULL;
	int64_t ns, nz;

	memset(p, 0, sizeof(*p));
	if (!s || !s->data)
		return mi_graph_err(g, n, -EINVAL, "%s scale is missing", what);
	if (!mi_ops_is_float(s->dtype))
		return mi_graph_err(g, n, -EINVAL, "%s scale must be a float tensor, is %s",
				    what, mi_dtype_name(s->dtype));
	ns = mi_tensor_numel(s);
	if (ns != 1 && ns != len)
		return mi_graph_err(g, n, -EINVAL,
				    "%s scale has %lld values, expected 1 or %lld", what,
				    (long long)ns, (long long)len);
	if (z && z->data) {
		nz = mi_tensor_numel(z);
		if (nz != ns)
			return mi_graph_err(g, n, -EINVAL,
					    "%s zero point has %lld values, scale has %lld",
					    what, (long long)nz, (long long)ns);
		p->dtype = z->dtype;
	} else {
		p->dtype = MI_DT_UINT8;
	}
	p->n = ns;
	p->scale = malloc(ns * sizeof(float));
	p->zp = malloc(ns * sizeof(int32_t));
	if (!p->scale || !p->zp) {
		mi_qparam_free(p);
		return -ENOMEM;
	}
	for (int64_t i = 0; i < ns; i++) {
		p->scale[i] = (float)mi_ops_get_f64(s, i);
		p->zp[i] = z && z->data ? (int32_t)mi_ops_get_i64(z, i) : 0;
	}
	return 0;
}

void mi_qparam_free(struct mi_qparam *p)
{
	free(p->scale);
	free(p->zp);
	p->scale = NULL;
	p->zp = NULL;
}

static int qrange(int dtype, int32_t *lo, int32_t *hi)
{
	switch (dtype) {
	case MI_DT_UINT8:
		*lo = 0, *hi = 255;
		return 0;
	case MI_DT_INT8:
		*lo = -128, *hi = 127;
		return 0;
	case MI_DT_INT32:
		*lo = INT32_MIN, *hi = INT32_MAX;
		return 0;
	default:
		return -EOPNOTSUPP;
	}
}

/* ---- QuantizeLinear / DequantizeLinear ---------------------------------- */

static int qdq_axis(struct mi_graph *g, struct mi_node *n, const struct mi_tensor *x,
		    int *axis, int64_t *len)
{
	struct mi_tensor *s = mi_in(g, n, 1);
	int64_t ns = s ? mi_tensor_numel(s) : -1;
	int r;

	*axis = -1;
	*len = 1;
	if (ns == 1 || !s || s->ndim == 0)
		return 0;
	r = mi_ops_axis(g, n, "axis", mi_attr_int(n, "axis", 1), x->ndim, axis);
	if (r)
		return r;
	*len = x->dims[*axis];
	return 0;
}

static int q_infer(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0), *z = mi_in(g, n, 2);
	int dt = z ? z->dtype : MI_DT_UINT8, r;
	bool dq = !strcmp(n->op_type, "DequantizeLinear");

	r = mi_ops_need_rank(g, n, 0);
	if (r)
		return r;
	if (!mi_ops_need_rank(g, n, 1) && mi_in(g, n, 1)->ndim > 1)
		return mi_graph_err(g, n, -EINVAL, "scale must be a scalar or 1-D");
	if (dq) {
		if (x->dtype != MI_DT_UINT8 && x->dtype != MI_DT_INT8 &&
		    x->dtype != MI_DT_INT32)
			return mi_graph_err(g, n, -EOPNOTSUPP,
					    "input dtype %s not supported (uint8, int8, int32)",
					    mi_dtype_name(x->dtype));
		if (z && z->dtype != x->dtype)
			return mi_graph_err(g, n, -EINVAL,
					    "zero point dtype %s differs from input %s",
					    mi_dtype_name(z->dtype), mi_dtype_name(x->dtype));
		return mi_ops_set_out(g, n, 0, MI_DT_FLOAT, x->ndim, x->dims);
	}
	if (x->dtype != MI_DT_FLOAT && x->dtype != MI_DT_INT32)
		return mi_graph_err(g, n, -EOPNOTSUPP,
				    "input dtype %s not supported (float32, int32)",
				    mi_dtype_name(x->dtype));
	if (dt != MI_DT_UINT8 && dt != MI_DT_INT8)
		return mi_graph_err(g, n, -EOPNOTSUPP,
				    "output dtype %s not supported (uint8, int8)",
				    mi_dtype_name(dt));
	return mi_ops_set_out(g, n, 0, dt, x->ndim, x->dims);
}

static int q_run(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0), *y = mi_out(g, n, 0);
	bool dq = !strcmp(n->op_type, "DequantizeLinear");
	struct mi_qparam p;
	int64_t len, inner, total = mi_tensor_numel(x);
	int axis, r;

	r = qdq_axis(g, n, x, &axis, &len);
	if (r)
		return r;
	r = mi_qparam_read(g, n, 1, 2, len, "", &p);
	if (r)
		return r;
	for (int64_t i = 0; !dq && i < p.n; i++)
		if (!(p.scale[i] > 0) || !isfinite(p.scale[i])) {
			double bad = p.scale[i];

			mi_qparam_free(&p);
			return mi_graph_err(g, n, -EINVAL, "scale %g is not positive and finite",
					    bad);
		}
	inner = axis < 0 ? total : mi_ops_prod(x->dims, axis + 1, x->ndim);
	if (dq && x->dtype == MI_DT_INT32) {
		for (int64_t i = 0; i < p.n; i++)
			if (p.zp[i]) {
				mi_qparam_free(&p);
				return mi_graph_err(g, n, -EINVAL,
						    "int32 input needs zero point 0");
			}
	}
	size_t ei = mi_dtype_size(x->dtype), eo = mi_dtype_size(y->dtype);

	for (int64_t off = 0, blk = 0; off < total; off += inner, blk++) {
		int64_t c = p.n == 1 ? 0 : blk % len;
		int64_t cnt = inner < total - off ? inner : total - off;

		if (dq) {
			mi_dequantize((const char *)x->data + off * ei, x->dtype, cnt,
				      p.scale[c], p.zp[c], (float *)y->data + off);
		} else if (x->dtype == MI_DT_FLOAT) {
			mi_quantize_f32((const float *)x->data + off, cnt, p.scale[c],
					p.zp[c], y->dtype, (char *)y->data + off * eo);
		} else {
			/* int32 input (opset 19 style): same formula */
			for (int64_t i = 0; i < cnt; i++) {
				float v = (float)((const int32_t *)x->data)[off + i];

				mi_quantize_f32(&v, 1, p.scale[c], p.zp[c], y->dtype,
						(char *)y->data + (off + i) * eo);
			}
		}
	}
	mi_qparam_free(&p);
	return 0;
}

/* ---- integer convolution (reference) ------------------------------------ */

static int32_t qget(const struct mi_tensor *t, int64_t i)
{
	return t->dtype == MI_DT_UINT8 ? ((const uint8_t *)t->data)[i] :
					 ((const int8_t *)t->data)[i];
}

/* Node layout of the conv-like ops. */
struct qconv_io {
	int x, w, xs, xz, ws, wz, ys, yz, b; /* input indices, -1 if absent */
};

static void qconv_io_of(const struct mi_node *n, struct qconv_io *io)
{
	if (!strcmp(n->op_type, "QLinearConv"))
		*io = (struct qconv_io){ 0, 3, 1, 2, 4, 5, 6, 7, 8 };
	else /* ConvInteger */
		*io = (struct qconv_io){ 0, 1, -1, 2, -1, 3, -1, -1, -1 };
}

int mi_qconv_geometry(struct mi_graph *g, struct mi_node *n, int xi, int wi,
		      struct mi_spatial *sp, int64_t *oc, int64_t *group)
{
	struct mi_tensor *x = mi_in(g, n, xi), *w = mi_in(g, n, wi);
	int r, cnt;
	const int64_t *ks;

	if ((r = mi_ops_need_rank(g, n, xi)) || (r = mi_ops_need_rank(g, n, wi)))
		return r;
	if (x->ndim != 4 && x->ndim != 3)
		return mi_graph_err(g, n, -EOPNOTSUPP,
				    "only 1-D and 2-D convolutions are supported (input rank %d)",
				    x->ndim);
	if (w->ndim != x->ndim)
		return mi_graph_err(g, n, -EINVAL, "weight rank %d differs from input rank %d",
				    w->ndim, x->ndim);
	if ((x->dtype != MI_DT_UINT8 && x->dtype != MI_DT_INT8) ||
	    (w->dtype != MI_DT_UINT8 && w->dtype != MI_DT_INT8))
		return mi_graph_err(g, n, -EOPNOTSUPP,
				    "input/weight dtypes %s/%s not supported (uint8, int8)",
				    mi_dtype_name(x->dtype), mi_dtype_name(w->dtype));
	*group = mi_attr_int(n, "group", 1);
	*oc = w->dims[0];
	ks = mi_attr_ints(n, "kernel_shape", &cnt);
	if (ks && cnt != x->ndim - 2)
		return mi_graph_err(g, n, -EINVAL, "kernel_shape has %d values", cnt);
	for (int i = 0; i < x->ndim - 2; i++) {
		sp->kernel[i] = ks ? ks[i] : w->dims[i + 2];
		if (w->dims[i + 2] >= 0 && sp->kernel[i] != w->dims[i + 2])
			return mi_graph_err(g, n, -EINVAL,
					    "kernel_shape does not match the weights");
	}
	r = mi_ops_spatial(g, n, sp, x, 0);
	if (r)
		return r;
	if (*group < 1 || (x->dims[1] >= 0 && x->dims[1] % *group) ||
	    (*oc >= 0 && *oc % *group) ||
	    (x->dims[1] >= 0 && w->dims[1] >= 0 && w->dims[1] * *group != x->dims[1]))
		return mi_graph_err(g, n, -EINVAL,
				    "group %lld does not fit %lld input / %lld output channels (weights %lld per group)",
				    (long long)*group, (long long)x->dims[1],
				    (long long)*oc, (long long)w->dims[1]);
	return 0;
}

static int qconv_infer(struct mi_graph *g, struct mi_node *n)
{
	struct qconv_io io;
	struct mi_spatial sp;
	int64_t oc, group, dims[MI_MAX_DIMS];
	int dt, r;

	qconv_io_of(n, &io);
	r = mi_qconv_geometry(g, n, io.x, io.w, &sp, &oc, &group);
	if (r)
		return r;
	if (io.yz >= 0) {
		struct mi_tensor *yz = mi_in(g, n, io.yz);

		dt = yz ? yz->dtype : MI_DT_UINT8;
		if (dt != MI_DT_UINT8 && dt != MI_DT_INT8)
			return mi_graph_err(g, n, -EOPNOTSUPP, "output dtype %s not supported",
					    mi_dtype_name(dt));
	} else {
		dt = MI_DT_INT32;
	}
	dims[0] = mi_in(g, n, io.x)->dims[0];
	dims[1] = oc;
	for (int i = 0; i < sp.nsp; i++)
		dims[2 + i] = sp.out[i];
	return mi_ops_set_out(g, n, 0, dt, sp.nsp + 2, dims);
}

/* Zero point of w per output channel, from a scalar or [oc] tensor. */
static int wzp_read(struct mi_graph *g, struct mi_node *n, int idx, int64_t oc,
		    int32_t **out)
{
	struct mi_tensor *z = idx >= 0 ? mi_in(g, n, idx) : NULL;
	int64_t nz = z ? mi_tensor_numel(z) : 1;

	*out = calloc(oc ? oc : 1, sizeof(int32_t));
	if (!*out)
		return -ENOMEM;
	if (!z)
		return 0;
	if (nz != 1 && nz != oc) {
		free(*out);
		*out = NULL; /* callers free it again on their error path */
		return mi_graph_err(g, n, -EINVAL,
				    "weight zero point has %lld values, expected 1 or %lld",
				    (long long)nz, (long long)oc);
	}
	for (int64_t o = 0; o < oc; o++)
		(*out)[o] = (int32_t)mi_ops_get_i64(z, nz == 1 ? 0 : o);
	return 0;
}

static int qconv_run(struct mi_graph *g, struct mi_node *n)
{
	struct qconv_io io;
	struct mi_spatial sp;
	int64_t oc, group;
	int r;

	qconv_io_of(n, &io);
	r = mi_qconv_geometry(g, n, io.x, io.w, &sp, &oc, &group);
	if (r)
		return r;
	struct mi_tensor *x = mi_in(g, n, io.x), *w = mi_in(g, n, io.w);
	struct mi_tensor *y = mi_out(g, n, 0), *b = io.b >= 0 ? mi_in(g, n, io.b) : NULL;
	struct mi_tensor *xz = mi_in(g, n, io.xz);
	int32_t zx = xz ? (int32_t)mi_ops_get_i64(xz, 0) : 0, *zw = NULL;
	struct mi_qparam xs = { 0 }, ws = { 0 }, ys = { 0 };
	float *mult = NULL;
	int32_t lo = 0, hi = 0;

	if (xz && mi_tensor_numel(xz) != 1)
		return mi_graph_err(g, n, -EINVAL, "input zero point must be a scalar");
	if (xz && xz->dtype != x->dtype)
		return mi_graph_err(g, n, -EINVAL, "input zero point dtype differs from input");
	r = wzp_read(g, n, io.wz, oc, &zw);
	if (r)
		return r;
	if (b && (b->dtype != MI_DT_INT32 || mi_tensor_numel(b) != oc)) {
		r = mi_graph_err(g, n, -EINVAL, "bias must be int32 with %lld values",
				 (long long)oc);
		goto out;
	}
	if (io.ys >= 0) {
		if ((r = mi_qparam_read(g, n, io.xs, -1, 1, "x", &xs)) ||
		    (r = mi_qparam_read(g, n, io.ws, -1, oc, "w", &ws)) ||
		    (r = mi_qparam_read(g, n, io.ys, io.yz, 1, "y", &ys)))
			goto out;
		mult = malloc(oc * sizeof(float));
		if (!mult) {
			r = -ENOMEM;
			goto out;
		}
		for (int64_t o = 0; o < oc; o++)
			mult[o] = mi_qmult(xs.scale[0], ws.scale[ws.n == 1 ? 0 : o],
					   ys.scale[0]);
		qrange(y->dtype, &lo, &hi);
	}
	int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2];
	int64_t W = x->ndim == 4 ? x->dims[3] : 1;
	int64_t OH = sp.out[0], OW = sp.nsp == 2 ? sp.out[1] : 1;
	int64_t KH = sp.kernel[0], KW = sp.nsp == 2 ? sp.kernel[1] : 1;
	int64_t SH = sp.stride[0], SW = sp.nsp == 2 ? sp.stride[1] : 1;
	int64_t DH = sp.dil[0], DW = sp.nsp == 2 ? sp.dil[1] : 1;
	int64_t PT = sp.pad_begin[0], PL = sp.nsp == 2 ? sp.pad_begin[1] : 0;
	int64_t cg = C / group, ocg = oc / group;

	for (int64_t nn = 0; nn < N; nn++)
		for (int64_t o = 0; o < oc; o++) {
			int64_t gi = o / ocg;

			for (int64_t oy = 0; oy < OH; oy++)
				for (int64_t ox = 0; ox < OW; ox++) {
					int32_t acc = b ? ((const int32_t *)b->data)[o] : 0;

					for (int64_t c = 0; c < cg; c++)
						for (int64_t ky = 0; ky < KH; ky++) {
							int64_t iy = oy * SH - PT + ky * DH;

							if (iy < 0 || iy >= H)
								continue;
							for (int64_t kx = 0; kx < KW; kx++) {
								int64_t ix = ox * SW - PL + kx * DW;

								if (ix < 0 || ix >= W)
									continue;
								int32_t xv = qget(x, ((nn * C + gi * cg + c) * H + iy) * W + ix);
								int32_t wv = qget(w, ((o * cg + c) * KH + ky) * KW + kx);

								acc += (xv - zx) * (wv - zw[o]);
							}
						}
					int64_t yi = ((nn * oc + o) * OH + oy) * OW + ox;

					if (!mult) {
						((int32_t *)y->data)[yi] = acc;
						continue;
					}
					int32_t q = mi_qrequant(acc, mult[o], ys.zp[0],
								(float)(lo - ys.zp[0]),
								(float)(hi - ys.zp[0]));
					if (y->dtype == MI_DT_UINT8)
						((uint8_t *)y->data)[yi] = (uint8_t)q;
					else
						((int8_t *)y->data)[yi] = (int8_t)q;
				}
		}
	r = 0;
out:
	free(zw);
	free(mult);
	mi_qparam_free(&xs);
	mi_qparam_free(&ws);
	mi_qparam_free(&ys);
	return r;
}

/* ---- integer matmul (reference) ----------------------------------------- */

struct qmm_io {
	int a, b, as, az, bs, bz, ys, yz;
};

static void qmm_io_of(const struct mi_node *n, struct qmm_io *io)
{
	if (!strcmp(n->op_type, "QLinearMatMul"))
		*io = (struct qmm_io){ 0, 3, 1, 2, 4, 5, 6, 7 };
	else /* MatMulInteger */
		*io = (struct qmm_io){ 0, 1, -1, 2, -1, 3, -1, -1 };
}

/* numpy matmul shapes: a [..., M, K], b [..., K, N] (1-D operands get a
 * unit dim that is removed from the output). */
int mi_qmm_shape(struct mi_graph *g, struct mi_node *n, const struct mi_tensor *a,
		 const struct mi_tensor *b, struct mi_qmm_shape *s)
{
	int ra = a->ndim, rb = b->ndim;

	if (ra < 1 || rb < 1)
		return mi_graph_err(g, n, -EINVAL, "matmul inputs must have rank >= 1");
	s->m = ra >= 2 ? a->dims[ra - 2] : 1;
	s->k = a->dims[ra - 1];
	s->n = rb >= 2 ? b->dims[rb - 1] : 1;
	int64_t kb = rb >= 2 ? b->dims[rb - 2] : b->dims[0];

	if (s->k >= 0 && kb >= 0 && s->k != kb)
		return mi_graph_err(g, n, -EINVAL, "matmul inner dims differ: %lld vs %lld",
				    (long long)s->k, (long long)kb);
	int ba = ra > 2 ? ra - 2 : 0, bb = rb > 2 ? rb - 2 : 0;

	s->nbatch = ba > bb ? ba : bb;
	s->batch = 1;
	for (int i = 0; i < s->nbatch; i++) {
		int64_t da = i - (s->nbatch - ba) >= 0 ? a->dims[i - (s->nbatch - ba)] : 1;
		int64_t db = i - (s->nbatch - bb) >= 0 ? b->dims[i - (s->nbatch - bb)] : 1;

		s->adims[i] = i - (s->nbatch - ba) >= 0 ? da : 1;
		s->bdims[i] = i - (s->nbatch - bb) >= 0 ? db : 1;
		if (da != db && da != 1 && db != 1)
			return mi_graph_err(g, n, -EINVAL, "matmul batch dims %lld and %lld do not broadcast",
					    (long long)da, (long long)db);
		s->odims[i] = da == 1 ? db : da;
		s->batch *= s->odims[i];
	}
	s->ndim = 0;
	for (int i = 0; i < s->nbatch; i++)
		s->out[s->ndim++] = s->odims[i];
	if (ra >= 2)
		s->out[s->ndim++] = s->m;
	if (rb >= 2)
		s->out[s->ndim++] = s->n;
	return 0;
}

/* Offsets (in matrices) of batch index bi in a and b. */
static void qmm_batch_off(const struct mi_qmm_shape *s, int64_t bi, int64_t *oa, int64_t *ob)
{
	int64_t sa = 1, sb = 1;

	*oa = *ob = 0;
	for (int i = s->nbatch - 1; i >= 0; i--) {
		int64_t idx = bi % s->odims[i];

		bi /= s->odims[i];
		*oa += (s->adims[i] == 1 ? 0 : idx) * sa;
		*ob += (s->bdims[i] == 1 ? 0 : idx) * sb;
		sa *= s->adims[i];
		sb *= s->bdims[i];
	}
}

static int qmm_infer(struct mi_graph *g, struct mi_node *n)
{
	struct qmm_io io;
	struct mi_qmm_shape s;
	struct mi_tensor *a, *b;
	int r, dt = MI_DT_INT32;

	qmm_io_of(n, &io);
	if ((r = mi_ops_need_rank(g, n, io.a)) || (r = mi_ops_need_rank(g, n, io.b)))
		return r;
	a = mi_in(g, n, io.a);
	b = mi_in(g, n, io.b);
	if ((a->dtype != MI_DT_UINT8 && a->dtype != MI_DT_INT8) ||
	    (b->dtype != MI_DT_UINT8 && b->dtype != MI_DT_INT8))
		return mi_graph_err(g, n, -EOPNOTSUPP, "input dtypes %s/%s not supported (uint8, int8)",
				    mi_dtype_name(a->dtype), mi_dtype_name(b->dtype));
	r = mi_qmm_shape(g, n, a, b, &s);
	if (r)
		return r;
	if (io.yz >= 0) {
		struct mi_tensor *yz = mi_in(g, n, io.yz);

		dt = yz ? yz->dtype : MI_DT_UINT8;
		if (dt != MI_DT_UINT8 && dt != MI_DT_INT8)
			return mi_graph_err(g, n, -EOPNOTSUPP, "output dtype %s not supported",
					    mi_dtype_name(dt));
	}
	return mi_ops_set_out(g, n, 0, dt, s.ndim, s.out);
}

static int qmm_run(struct mi_graph *g, struct mi_node *n)
{
	struct qmm_io io;
	struct mi_qmm_shape s;
	struct mi_tensor *a, *b, *y = mi_out(g, n, 0);
	struct mi_qparam as = { 0 }, bs = { 0 }, ys = { 0 };
	int32_t *za = NULL, *zb = NULL, lo = 0, hi = 0;
	int r;

	qmm_io_of(n, &io);
	a = mi_in(g, n, io.a);
	b = mi_in(g, n, io.b);
	r = mi_qmm_shape(g, n, a, b, &s);
	if (r)
		return r;
	/* a's zero point/scale: scalar or per row (M); b's: scalar or per
	 * column (N) */
	if ((r = wzp_read(g, n, io.az, s.m, &za)) || (r = wzp_read(g, n, io.bz, s.n, &zb)))
		goto out;
	if (io.ys >= 0) {
		if ((r = mi_qparam_read(g, n, io.as, -1, s.m, "a", &as)) ||
		    (r = mi_qparam_read(g, n, io.bs, -1, s.n, "b", &bs)) ||
		    (r = mi_qparam_read(g, n, io.ys, io.yz, 1, "y", &ys)))
			goto out;
		qrange(y->dtype, &lo, &hi);
	}
	for (int64_t bi = 0; bi < s.batch; bi++) {
		int64_t oa, ob;

		qmm_batch_off(&s, bi, &oa, &ob);
		for (int64_t i = 0; i < s.m; i++)
			for (int64_t j = 0; j < s.n; j++) {
				int32_t acc = 0;

				for (int64_t k = 0; k < s.k; k++)
					acc += (qget(a, (oa * s.m + i) * s.k + k) - za[i]) *
					       (qget(b, (ob * s.k + k) * s.n + j) - zb[j]);
				int64_t yi = (bi * s.m + i) * s.n + j;

				if (io.ys < 0) {
					((int32_t *)y->data)[yi] = acc;
					continue;
				}
				float mult = mi_qmult(as.scale[as.n == 1 ? 0 : i],
						      bs.scale[bs.n == 1 ? 0 : j], ys.scale[0]);
				int32_t q = mi_qrequant(acc, mult, ys.zp[0], (float)(lo - ys.zp[0]),
							(float)(hi - ys.zp[0]));

				if (y->dtype == MI_DT_UINT8)
					((uint8_t *)y->data)[yi] = (uint8_t)q;
				else
					((int8_t *)y->data)[yi] = (int8_t)q;
			}
	}
	r = 0;
out:
	free(za);
	free(zb);
	mi_qparam_free(&as);
	mi_qparam_free(&bs);
	mi_qparam_free(&ys);
	return r;
}

/* ---- DynamicQuantizeLinear ---------------------------------------------- */

static int dql_infer(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0);
	int r = mi_ops_need_rank(g, n, 0);

	if (r)
		return r;
	if (x->dtype != MI_DT_FLOAT)
		return mi_graph_err(g, n, -EOPNOTSUPP, "input dtype %s not supported (float32)",
				    mi_dtype_name(x->dtype));
	if ((r = mi_ops_set_out(g, n, 0, MI_DT_UINT8, x->ndim, x->dims)) ||
	    (r = mi_ops_set_out(g, n, 1, MI_DT_FLOAT, 0, NULL)))
		return r;
	return mi_ops_set_out(g, n, 2, MI_DT_UINT8, 0, NULL);
}

static int dql_run(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0);
	int64_t cnt = mi_tensor_numel(x);
	const float *xf = x->data;
	float mn = 0.0f, mx = 0.0f, scale, zpf;
	uint8_t zp;

	for (int64_t i = 0; i < cnt; i++) {
		mn = xf[i] < mn ? xf[i] : mn;
		mx = xf[i] > mx ? xf[i] : mx;
	}
	scale = (mx - mn) / 255.0f;
	zpf = scale > 0 ? nearbyintf(0.0f - mn / scale) : 0.0f;
	zp = (uint8_t)(zpf < 0 ? 0 : zpf > 255 ? 255 : zpf);
	if (scale > 0)
		mi_quantize_f32(xf, cnt, scale, zp, MI_DT_UINT8, mi_out(g, n, 0)->data);
	else
		memset(mi_out(g, n, 0)->data, 0, cnt);
	if (mi_out(g, n, 1))
		*(float *)mi_out(g, n, 1)->data = scale;
	if (mi_out(g, n, 2))
		*(uint8_t *)mi_out(g, n, 2)->data = zp;
	return 0;
}

const struct mi_op_def mi_quant_ops[] = {
	{ "DynamicQuantizeLinear", "", 1, 1, 1, 3, dql_infer, dql_run },
	{ "QuantizeLinear", "", 2, 3, 1, 1, q_infer, q_run },
	{ "DequantizeLinear", "", 2, 3, 1, 1, q_infer, q_run },
	{ "QLinearConv", "", 8, 9, 1, 1, qconv_infer, qconv_run },
	{ "ConvInteger", "", 2, 4, 1, 1, qconv_infer, qconv_run },
	{ "QLinearMatMul", "", 8, 8, 1, 1, qmm_infer, qmm_run },
	{ "MatMulInteger", "", 2, 4, 1, 1, qmm_infer, qmm_run },
	{ NULL }
};
