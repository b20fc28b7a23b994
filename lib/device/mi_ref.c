// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * Userspace reference of the MetaInfer command stream.  Follows the
 * "Integer arithmetic" section and the op descriptions of
 * uapi/drm/metainfer_accel.h literally; plain loops, no cleverness.
 */
#include <errno.h>
#include <string.h>

#include "mi_ref.h"

unsigned int mi_ref_dtype_size(uint32_t dtype)
{
	switch (dtype) {
	case DRM_METAINFER_DTYPE_INT8:
	case DRM_METAINFER_DTYPE_UINT8:
		return 1;
	case DRM_METAINFER_DTYPE_INT16:
		return 2;
	case DRM_METAINFER_DTYPE_INT32:
		return 4;
	}
	return 0;
}

int64_t mi_ref_dtype_min(uint32_t dtype)
{
	switch (dtype) {
	case DRM_METAINFER_DTYPE_INT8:
		return INT8_MIN;
	case DRM_METAINFER_DTYPE_UINT8:
		return 0;
	case DRM_METAINFER_DTYPE_INT16:
		return INT16_MIN;
	default:
		return INT32_MIN;
	}
}

int64_t mi_ref_dtype_max(uint32_t dtype)
{
	switch (dtype) {
	case DRM_METAINFER_DTYPE_INT8:
		return INT8_MAX;
	case DRM_METAINFER_DTYPE_UINT8:
		return UINT8_MAX;
	case DRM_METAINFER_DTYPE_INT16:
		return INT16_MAX;
	default:
		return INT32_MAX;
	}
}

/* Wrapping 64-bit arithmetic without signed-overflow UB. */
static int64_t wadd(int64_t a, int64_t b)
{
	return (int64_t)((uint64_t)a + (uint64_t)b);
}

static int64_t wsub(int64_t a, int64_t b)
{
	return (int64_t)((uint64_t)a - (uint64_t)b);
}

static int64_t wmul(int64_t a, int64_t b)
{
	return (int64_t)((uint64_t)a * (uint64_t)b);
}

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

int64_t mi_ref_rshift_round(int64_t v, unsigned int s)
{
	if (s == 0)
		return v;
	return wadd(v, (int64_t)1 << (s - 1)) >> s;
}

int64_t mi_ref_requant(int64_t acc, int32_t m, int32_t s, int32_t zp,
		       int64_t lo, int64_t hi)
{
	int64_t t = clamp64(31 - (int64_t)s, 0, 62);
	int64_t v = wadd(mi_ref_rshift_round(wmul(acc, m), (unsigned int)t), zp);

	return clamp64(v, lo, hi);
}

/* A resolved tensor: base of its buffer image, element strides. */
struct rt {
	uint8_t *base;
	const struct drm_metainfer_tensor *d;
	uint64_t st[4];
	uint32_t shape[4];
	unsigned int es;
	int used;
};

static int rt_init(struct rt *t, const struct drm_metainfer_tensor *d,
		   struct mi_ref_buf *bufs, unsigned int nbufs)
{
	int k, dense = 1;

	memset(t, 0, sizeof(*t));
	t->d = d;
	if (d->dtype == 0 && d->ndim == 0)
		return 0; /* unused tensor */
	if (d->bo_index >= nbufs || d->ndim < 1 || d->ndim > 4)
		return -EINVAL;
	t->es = mi_ref_dtype_size(d->dtype);
	if (!t->es)
		return -EINVAL;
	t->base = bufs[d->bo_index].data;
	t->used = 1;
	for (k = 0; k < 4; k++) {
		t->shape[k] = k < (int)d->ndim ? d->shape[k] : 1;
		if (d->stride[k])
			dense = 0;
	}
	if (dense) {
		uint64_t s = 1;

		for (k = d->ndim - 1; k >= 0; k--) {
			t->st[k] = s;
			s *= d->shape[k];
		}
	} else {
		for (k = 0; k < (int)d->ndim; k++)
			t->st[k] = d->stride[k];
	}
	return 0;
}

static uint8_t *rt_ptr(const struct rt *t, const uint32_t i[4])
{
	uint64_t off = t->d->offset;
	int k;

	for (k = 0; k < (int)t->d->ndim; k++)
		off += (uint64_t)t->es * i[k] * t->st[k];
	return t->base + off;
}

static int64_t rt_get(const struct rt *t, const uint32_t i[4])
{
	const uint8_t *p = rt_ptr(t, i);

	switch (t->d->dtype) {
	case DRM_METAINFER_DTYPE_INT8:
		return (int8_t)p[0];
	case DRM_METAINFER_DTYPE_UINT8:
		return p[0];
	case DRM_METAINFER_DTYPE_INT16: {
		int16_t v;

		memcpy(&v, p, 2);
		return v;
	}
	default: {
		int32_t v;

		memcpy(&v, p, 4);
		return v;
	}
	}
}

static void rt_set(const struct rt *t, const uint32_t i[4], int64_t v)
{
	uint8_t *p = rt_ptr(t, i);

	switch (t->d->dtype) {
	case DRM_METAINFER_DTYPE_INT8:
	case DRM_METAINFER_DTYPE_UINT8:
		p[0] = (uint8_t)v;
		break;
	case DRM_METAINFER_DTYPE_INT16: {
		uint16_t w = (uint16_t)v;

		memcpy(p, &w, 2);
		break;
	}
	default: {
		uint32_t w = (uint32_t)v;

		memcpy(p, &w, 4);
		break;
	}
	}
}

/* Element i of a 1-D tensor. */
static int64_t rt_get1(const struct rt *t, uint32_t i)
{
	uint32_t idx[4] = { i, 0, 0, 0 };

	return rt_get(t, idx);
}

/* Per-channel parameter: one element for all, or one per channel. */
static int64_t rt_chan(const struct rt *t, uint32_t ch)
{
	return rt_get1(t, t->shape[0] == 1 ? 0 : ch);
}

/*
 * Logical (n, c, h, w) <-> the dimensions as stored: NHWC keeps the shape
 * [N,H,W,C]; NCHW and PLAIN keep it as given.
 */
static void lidx(const struct rt *t, uint32_t n, uint32_t c, uint32_t h,
		 uint32_t w, uint32_t out[4])
{
	if (t->d->layout == DRM_METAINFER_LAYOUT_NHWC) {
		out[0] = n;
		out[1] = h;
		out[2] = w;
		out[3] = c;
	} else {
		out[0] = n;
		out[1] = c;
		out[2] = h;
		out[3] = w;
	}
}

static void lshape(const struct rt *t, uint32_t *n, uint32_t *c, uint32_t *h,
		   uint32_t *w)
{
	*n = t->shape[0];
	if (t->d->layout == DRM_METAINFER_LAYOUT_NHWC) {
		*h = t->shape[1];
		*w = t->shape[2];
		*c = t->shape[3];
	} else {
		*c = t->shape[1];
		*h = t->shape[2];
		*w = t->shape[3];
	}
}

static int64_t lget(const struct rt *t, uint32_t n, uint32_t c, uint32_t h,
		    uint32_t w)
{
	uint32_t i[4];

	lidx(t, n, c, h, w, i);
	return rt_get(t, i);
}

static void lset(const struct rt *t, uint32_t n, uint32_t c, uint32_t h,
		 uint32_t w, int64_t v)
{
	uint32_t i[4];

	lidx(t, n, c, h, w, i);
	rt_set(t, i, v);
}

static void bounds(const struct drm_metainfer_requant *rq, uint32_t dtype,
		   int64_t *lo, int64_t *hi)
{
	*lo = rq->act_min > mi_ref_dtype_min(dtype) ? rq->act_min :
						       mi_ref_dtype_min(dtype);
	*hi = rq->act_max < mi_ref_dtype_max(dtype) ? rq->act_max :
						       mi_ref_dtype_max(dtype);
}

/* Visit every index of a shape (dims >= ndim have extent 1). */
#define FOR_EACH_INDEX(shape, i)                                        \
	for (i[0] = 0; i[0] < (shape)[0]; i[0]++)                       \
		for (i[1] = 0; i[1] < (shape)[1]; i[1]++)               \
			for (i[2] = 0; i[2] < (shape)[2]; i[2]++)       \
				for (i[3] = 0; i[3] < (shape)[3]; i[3]++)

static int ref_conv2d(const struct drm_metainfer_op_conv2d *op,
		      struct mi_ref_buf *bufs, unsigned int nbufs)
{
	struct rt x, wt, b, y, mul, sh;
	uint32_t N, Cin, H, W, Cout, Cpg, KH, KW, OH, OW, on, oc, oh, ow;
	uint32_t dummy, ic, kh, kw, g;
	int64_t lo = 0, hi = 0;

	if (rt_init(&x, &op->input, bufs, nbufs) ||
	    rt_init(&wt, &op->weight, bufs, nbufs) ||
	    rt_init(&b, &op->bias, bufs, nbufs) ||
	    rt_init(&y, &op->output, bufs, nbufs) ||
	    rt_init(&mul, &op->multiplier, bufs, nbufs) ||
	    rt_init(&sh, &op->shift, bufs, nbufs))
		return -EINVAL;
	if (!op->groups || !op->stride_h || !op->stride_w)
		return -EINVAL;
	lshape(&x, &N, &Cin, &H, &W);
	lshape(&wt, &Cout, &Cpg, &KH, &KW);
	lshape(&y, &dummy, &dummy, &OH, &OW);
	if (op->hdr.flags & DRM_METAINFER_OP_F_REQUANT)
		bounds(&op->rq, op->output.dtype, &lo, &hi);

	for (on = 0; on < N; on++)
		for (oc = 0; oc < Cout; oc++) {
			g = oc / (Cout / op->groups);
			for (oh = 0; oh < OH; oh++)
				for (ow = 0; ow < OW; ow++) {
					uint32_t acc = 0;

					if (op->hdr.flags & DRM_METAINFER_OP_F_BIAS)
						acc = (uint32_t)rt_get1(&b, oc);
					for (ic = 0; ic < Cpg; ic++)
						for (kh = 0; kh < KH; kh++)
							for (kw = 0; kw < KW; kw++) {
								int64_t ih = (int64_t)oh * op->stride_h -
									     op->pad_top +
									     (int64_t)kh * op->dilation_h;
								int64_t iw = (int64_t)ow * op->stride_w -
									     op->pad_left +
									     (int64_t)kw * op->dilation_w;
								int64_t xv, wv;

								if (ih < 0 || ih >= H || iw < 0 || iw >= W)
									continue;
								xv = lget(&x, on, g * Cpg + ic,
									  (uint32_t)ih, (uint32_t)iw);
								wv = lget(&wt, oc, ic, kh, kw);
								acc += (uint32_t)wmul(wsub(xv, op->input_zp),
										      wsub(wv, op->weight_zp));
							}
					if (op->hdr.flags & DRM_METAINFER_OP_F_REQUANT)
						lset(&y, on, oc, oh, ow,
						     mi_ref_requant((int32_t)acc,
								    (int32_t)rt_chan(&mul, oc),
								    (int32_t)rt_chan(&sh, oc),
								    op->rq.output_zp, lo, hi));
					else
						lset(&y, on, oc, oh, ow, (int32_t)acc);
				}
		}
	return 0;
}

static int ref_gemm(const struct drm_metainfer_op_gemm *op,
		    struct mi_ref_buf *bufs, unsigned int nbufs)
{
	struct rt a, b, bias, y, mul, sh;
	uint32_t M, K, N, m, n, k;
	int64_t lo = 0, hi = 0;

	if (rt_init(&a, &op->a, bufs, nbufs) ||
	    rt_init(&b, &op->b, bufs, nbufs) ||
	    rt_init(&bias, &op->bias, bufs, nbufs) ||
	    rt_init(&y, &op->output, bufs, nbufs) ||
	    rt_init(&mul, &op->multiplier, bufs, nbufs) ||
	    rt_init(&sh, &op->shift, bufs, nbufs))
		return -EINVAL;
	M = a.shape[0];
	K = a.shape[1];
	N = b.shape[1];
	if (op->hdr.flags & DRM_METAINFER_OP_F_REQUANT)
		bounds(&op->rq, op->output.dtype, &lo, &hi);
	for (m = 0; m < M; m++)
		for (n = 0; n < N; n++) {
			uint32_t acc = 0;
			uint32_t iy[4] = { m, n, 0, 0 };

			if (op->hdr.flags & DRM_METAINFER_OP_F_BIAS)
				acc = (uint32_t)rt_get1(&bias, n);
			for (k = 0; k < K; k++) {
				uint32_t ia[4] = { m, k, 0, 0 };
				uint32_t ib[4] = { k, n, 0, 0 };

				acc += (uint32_t)wmul(wsub(rt_get(&a, ia), op->a_zp),
						      wsub(rt_get(&b, ib), op->b_zp));
			}
			if (op->hdr.flags & DRM_METAINFER_OP_F_REQUANT)
				rt_set(&y, iy,
				       mi_ref_requant((int32_t)acc,
						      (int32_t)rt_chan(&mul, n),
						      (int32_t)rt_chan(&sh, n),
						      op->rq.output_zp, lo, hi));
			else
				rt_set(&y, iy, (int32_t)acc);
		}
	return 0;
}

static int ref_eltwise(const struct drm_metainfer_op_eltwise *op,
		       struct mi_ref_buf *bufs, unsigned int nbufs)
{
	struct rt a, b, y;
	uint32_t i[4];
	int64_t lo, hi;

	if (rt_init(&a, &op->a, bufs, nbufs) ||
	    rt_init(&b, &op->b, bufs, nbufs) ||
	    rt_init(&y, &op->output, bufs, nbufs))
		return -EINVAL;
	bounds(&op->rq, op->output.dtype, &lo, &hi);
	FOR_EACH_INDEX(y.shape, i) {
		int64_t da = wsub(rt_get(&a, i), op->a_zp);
		int64_t db = wsub(rt_get(&b, i), op->b_zp);
		int64_t v;

		if (op->hdr.op == DRM_METAINFER_OP_ADD)
			v = wadd(wmul(da, op->a_mult), wmul(db, op->b_mult));
		else
			v = wmul(wmul(da, db), op->a_mult);
		v = wadd(mi_ref_rshift_round(v, op->shift), op->rq.output_zp);
		rt_set(&y, i, clamp64(v, lo, hi));
	}
	return 0;
}

static int ref_clip(const struct drm_metainfer_op_clip *op,
		    struct mi_ref_buf *bufs, unsigned int nbufs)
{
	struct rt x, y;
	uint32_t i[4];

	if (rt_init(&x, &op->input, bufs, nbufs) ||
	    rt_init(&y, &op->output, bufs, nbufs))
		return -EINVAL;
	FOR_EACH_INDEX(y.shape, i) {
		int64_t v = rt_get(&x, i);

		if (v < op->min)
			v = op->min;
		if (op->hdr.op == DRM_METAINFER_OP_CLIP && v > op->max)
			v = op->max;
		rt_set(&y, i, v);
	}
	return 0;
}

static int64_t floordiv(int64_t a, int64_t b)
{
	int64_t q = a / b;

	if ((a % b) != 0 && ((a < 0) != (b < 0)))
		q--;
	return q;
}

static int ref_pool(const struct drm_metainfer_op_pool *op,
		    struct mi_ref_buf *bufs, unsigned int nbufs)
{
	struct rt x, y;
	uint32_t N, C, H, W, OH, OW, n, c, oh, ow, kh, kw, dummy;

	if (rt_init(&x, &op->input, bufs, nbufs) ||
	    rt_init(&y, &op->output, bufs, nbufs))
		return -EINVAL;
	if (!op->stride_h || !op->stride_w)
		return -EINVAL;
	lshape(&x, &N, &C, &H, &W);
	lshape(&y, &dummy, &dummy, &OH, &OW);
	for (n = 0; n < N; n++)
		for (c = 0; c < C; c++)
			for (oh = 0; oh < OH; oh++)
				for (ow = 0; ow < OW; ow++) {
					int64_t mx = mi_ref_dtype_min(op->input.dtype);
					int64_t s = 0, cnt = 0;

					for (kh = 0; kh < op->kernel_h; kh++)
						for (kw = 0; kw < op->kernel_w; kw++) {
							int64_t ih = (int64_t)oh * op->stride_h -
								     op->pad_top + kh;
							int64_t iw = (int64_t)ow * op->stride_w -
								     op->pad_left + kw;
							int64_t v;

							if (ih < 0 || ih >= H || iw < 0 || iw >= W)
								continue;
							v = lget(&x, n, c, (uint32_t)ih, (uint32_t)iw);
							if (v > mx)
								mx = v;
							s += v;
							cnt++;
						}
					if (op->hdr.op == DRM_METAINFER_OP_MAXPOOL) {
						lset(&y, n, c, oh, ow, mx);
					} else {
						if (op->hdr.flags & DRM_METAINFER_OP_F_COUNT_PAD)
							cnt = (int64_t)op->kernel_h * op->kernel_w;
						lset(&y, n, c, oh, ow,
						     cnt ? floordiv(2 * s + cnt, 2 * cnt) : 0);
					}
				}
	return 0;
}

static int ref_requantize(const struct drm_metainfer_op_requantize *op,
			  struct mi_ref_buf *bufs, unsigned int nbufs)
{
	struct rt x, y, mul, sh;
	uint32_t i[4];
	int64_t lo, hi;

	if (rt_init(&x, &op->input, bufs, nbufs) ||
	    rt_init(&y, &op->output, bufs, nbufs) ||
	    rt_init(&mul, &op->multiplier, bufs, nbufs) ||
	    rt_init(&sh, &op->shift, bufs, nbufs))
		return -EINVAL;
	if (op->axis >= 4)
		return -EINVAL;
	bounds(&op->rq, op->output.dtype, &lo, &hi);
	FOR_EACH_INDEX(x.shape, i) {
		uint32_t ch = i[op->axis];

		rt_set(&y, i,
		       mi_ref_requant(wsub(rt_get(&x, i), op->input_zp),
				      (int32_t)rt_chan(&mul, ch),
				      (int32_t)rt_chan(&sh, ch), op->rq.output_zp,
				      lo, hi));
	}
	return 0;
}

static int ref_copy(const struct drm_metainfer_op_copy *op,
		    struct mi_ref_buf *bufs, unsigned int nbufs)
{
	struct rt x, y;
	uint32_t i[4];

	if (rt_init(&x, &op->input, bufs, nbufs) ||
	    rt_init(&y, &op->output, bufs, nbufs))
		return -EINVAL;
	if (x.d->ndim == 4 && x.d->layout != y.d->layout) {
		uint32_t n, c, h, w;

		lshape(&x, &n, &c, &h, &w);
		uint32_t ls[4] = { n, c, h, w };

		FOR_EACH_INDEX(ls, i)
			lset(&y, i[0], i[1], i[2], i[3],
			     lget(&x, i[0], i[1], i[2], i[3]));
		return 0;
	}
	FOR_EACH_INDEX(x.shape, i)
		rt_set(&y, i, rt_get(&x, i));
	return 0;
}

static int ref_lut(const struct drm_metainfer_op_lut *op,
		   struct mi_ref_buf *bufs, unsigned int nbufs)
{
	struct rt tab, x, y;
	uint32_t i[4];

	if (rt_init(&tab, &op->table, bufs, nbufs) ||
	    rt_init(&x, &op->input, bufs, nbufs) ||
	    rt_init(&y, &op->output, bufs, nbufs))
		return -EINVAL;
	if (!tab.used || tab.shape[0] != 256 || !x.used || !y.used)
		return -EINVAL;
	FOR_EACH_INDEX(x.shape, i)
		rt_set(&y, i, rt_get1(&tab, (uint32_t)(rt_get(&x, i) -
					 mi_ref_dtype_min(x.d->dtype))));
	return 0;
}

int mi_ref_run(const void *cmds, size_t cmds_size, struct mi_ref_buf *bufs,
	       unsigned int nbufs)
{
	const uint8_t *p = cmds;
	struct drm_metainfer_stream_header sh;
	size_t off = sizeof(sh);
	uint32_t k;
	int ret;

	if (cmds_size < sizeof(sh))
		return -EINVAL;
	memcpy(&sh, p, sizeof(sh));
	if (sh.magic != DRM_METAINFER_STREAM_MAGIC)
		return -EINVAL;
	for (k = 0; k < sh.op_count; k++) {
		struct drm_metainfer_op_header h;
		const void *op = p + off;

		if (cmds_size - off < sizeof(h))
			return -EINVAL;
		memcpy(&h, op, sizeof(h));
		if (h.size < sizeof(h) || h.size > cmds_size - off)
			return -EINVAL;
		switch (h.op) {
		case DRM_METAINFER_OP_CONV2D:
			ret = ref_conv2d(op, bufs, nbufs);
			break;
		case DRM_METAINFER_OP_GEMM:
			ret = ref_gemm(op, bufs, nbufs);
			break;
		case DRM_METAINFER_OP_ADD:
		case DRM_METAINFER_OP_MUL:
			ret = ref_eltwise(op, bufs, nbufs);
			break;
		case DRM_METAINFER_OP_RELU:
		case DRM_METAINFER_OP_CLIP:
			ret = ref_clip(op, bufs, nbufs);
			break;
		case DRM_METAINFER_OP_MAXPOOL:
		case DRM_METAINFER_OP_AVGPOOL:
			ret = ref_pool(op, bufs, nbufs);
			break;
		case DRM_METAINFER_OP_REQUANTIZE:
			ret = ref_requantize(op, bufs, nbufs);
			break;
		case DRM_METAINFER_OP_COPY:
			ret = ref_copy(op, bufs, nbufs);
			break;
		case DRM_METAINFER_OP_LUT:
			ret = ref_lut(op, bufs, nbufs);
			break;
		default:
			return -EINVAL;
		}
		if (ret)
			return ret;
		off += h.size;
	}
	return 0;
}
