// SPDX-License-Identifier: GPL-2.0-only
/*
 * metainfer_sim: the real computation of every op, integer only.
 *
 * The arithmetic is the one the uapi header documents ("Integer
 * arithmetic"), through the shared helpers of metainfer_backend.h
 * (mi_tensor_get/set, mi_rshift_round, mi_requant), so results match the
 * userspace reference bit for bit.  Every op writes its output in logical
 * (n, c, h, w) row-major order.
 *
 * The core has validated every tensor against its buffer; the checks here
 * only make sure an op's tensors agree with each other before indexing, so
 * that no inconsistency can ever make the sim read or write out of bounds.
 */

#include <linux/kernel.h>
#include <linux/sched.h>
#include <linux/math64.h>
#include <linux/bitmap.h>

#include "mi_sim.h"

/* cond_resched() and abort check every this many inner-loop operations */
#define MI_SIM_TICK (1u << 14)

struct mi_sim_ctx {
	const bool *abort;
	u64 work;
};

static int mi_sim_tick(struct mi_sim_ctx *ctx, u64 work)
{
	ctx->work += work;
	if (ctx->work < MI_SIM_TICK)
		return 0;
	ctx->work = 0;
	cond_resched();
	return READ_ONCE(*ctx->abort) ? -ECANCELED : 0;
}

static bool mi_sim_has(const struct mi_op *op, u32 slot)
{
	return op->tensor_mask & (1u << slot);
}

/* Element offset of position p[] in @t, broadcasting dimensions of size 1. */
static u64 mi_sim_idx(const struct mi_tensor *t, const u32 *p)
{
	u64 i = 0;
	int k;

	for (k = 0; k < 4; k++)
		if (t->dim[k] != 1)
			i += p[k] * t->lstride[k];
	return i;
}

/* @t is the shape of @y, or broadcasts to it. */
static bool mi_sim_bcast_ok(const struct mi_tensor *t,
			    const struct mi_tensor *y)
{
	int k;

	for (k = 0; k < 4; k++)
		if (t->dim[k] != 1 && t->dim[k] != y->dim[k])
			return false;
	return true;
}

/* A per-channel parameter (bias, multiplier, shift): one or @n values. */
static bool mi_sim_param_ok(const struct mi_tensor *t, u32 n)
{
	return t->dtype == DRM_METAINFER_DTYPE_INT32 &&
	       (t->elems == 1 || t->elems == n);
}

static s64 mi_sim_param(const struct mi_tensor *t, u32 ch)
{
	return mi_tensor_get(t, t->elems == 1 ? 0 : ch * t->lstride[3]);
}

/*
 * acc + sum over i < n of (a[ia + i * sa] - za) * (b[ib + i * sb] - zb),
 * wrapping in 32 bits (indices and strides in elements).  8-bit operands
 * take a fast path; the result is the same as the generic one's.
 */
static u32 mi_sim_dot(const struct mi_tensor *a, u64 ia, u64 sa, s32 za,
		      const struct mi_tensor *b, u64 ib, u64 sb, s32 zb, u32 n,
		      u32 acc)
{
	const u8 *pa = (const u8 *)a->data + ia;
	const u8 *pb = (const u8 *)b->data + ib;
	s64 xa, xb;
	u32 i;

	if (a->esize != 1 || b->esize != 1) {
		for (i = 0; i < n; i++) {
			xa = mi_tensor_get(a, ia + i * sa) - za;
			xb = mi_tensor_get(b, ib + i * sb) - zb;
			acc += (u32)xa * (u32)xb;
		}
		return acc;
	}
	if (a->dtype == DRM_METAINFER_DTYPE_INT8 &&
	    b->dtype == DRM_METAINFER_DTYPE_INT8) {
		for (i = 0; i < n; i++, pa += sa, pb += sb)
			acc += (u32)((s64)(s8)*pa - za) *
			       (u32)((s64)(s8)*pb - zb);
		return acc;
	}
	for (i = 0; i < n; i++, pa += sa, pb += sb) {
		xa = a->dtype == DRM_METAINFER_DTYPE_INT8 ? (s8)*pa : *pa;
		xb = b->dtype == DRM_METAINFER_DTYPE_INT8 ? (s8)*pb : *pb;
		acc += (u32)(xa - za) * (u32)(xb - zb);
	}
	return acc;
}

/* Kernel taps [*k0, *k1) with 0 <= i0 + k * dil < in, k < kn. */
static void mi_sim_taps(s64 i0, u32 dil, u32 kn, u32 in, u32 *k0, u32 *k1)
{
	u64 lo = 0, hi = 0;

	if (i0 < 0)
		lo = div_u64(-i0 + dil - 1, dil);
	if (i0 < in)
		hi = div_u64(in - i0 + dil - 1, dil);
	*k0 = min_t(u64, lo, kn);
	*k1 = clamp_t(u64, hi, *k0, kn);
}

/* One output element of a convolution: the wrapped int32 accumulator. */
static u32 mi_sim_conv_acc(const struct mi_op *op, u32 n, u32 oc, u32 oh,
			   u32 ow, u32 c0, u32 icg, u32 acc)
{
	const struct drm_metainfer_op_conv2d *p = &op->u.conv2d;
	const struct mi_tensor *x = &op->t[MI_T_IN0];
	const struct mi_tensor *w = &op->t[MI_T_IN1];
	s64 ih0 = (s64)oh * p->stride_h - p->pad_top;
	s64 iw0 = (s64)ow * p->stride_w - p->pad_left;
	u32 ic, kh, kh0, kh1, kw0, kw1;
	u64 ix, iw;

	mi_sim_taps(ih0, p->dilation_h, w->dim[2], x->dim[2], &kh0, &kh1);
	mi_sim_taps(iw0, p->dilation_w, w->dim[3], x->dim[3], &kw0, &kw1);
	if (kw0 == kw1)
		return acc;
	for (ic = 0; ic < icg; ic++) {
		for (kh = kh0; kh < kh1; kh++) {
			ix = mi_tensor_index(x, n, c0 + ic,
					     ih0 + (s64)kh * p->dilation_h,
					     iw0 + (s64)kw0 * p->dilation_w);
			iw = mi_tensor_index(w, oc, ic, kh, kw0);
			acc = mi_sim_dot(x, ix, x->lstride[3] * p->dilation_w,
					 p->input_zp, w, iw, w->lstride[3],
					 p->weight_zp, kw1 - kw0, acc);
		}
	}
	return acc;
}

static int mi_sim_conv2d(const struct mi_op *op, struct mi_sim_ctx *ctx)
{
	const struct drm_metainfer_op_conv2d *p = &op->u.conv2d;
	const struct mi_tensor *x = &op->t[MI_T_IN0];
	const struct mi_tensor *w = &op->t[MI_T_IN1];
	const struct mi_tensor *b = &op->t[MI_T_BIAS];
	const struct mi_tensor *y = &op->t[MI_T_OUT];
	const struct mi_tensor *tm = &op->t[MI_T_MULT];
	const struct mi_tensor *ts = &op->t[MI_T_SHIFT];
	bool bias = op->flags & DRM_METAINFER_OP_F_BIAS;
	bool rq = op->flags & DRM_METAINFER_OP_F_REQUANT;
	u32 oc_n = y->dim[1], c_n = x->dim[1];
	u32 icg, ocg, n, oc, oh, ow, acc0, acc;
	s32 m = 0, s = 0, zp = p->rq.output_zp;
	s32 lo = op->out_min, hi = op->out_max;
	u64 idx;
	s64 v;
	u64 elt_work;
	int ret;

	if (!p->groups || c_n % p->groups || oc_n % p->groups || !p->stride_h ||
	    !p->stride_w || !p->dilation_h || !p->dilation_w)
		return -EINVAL;
	icg = c_n / p->groups;
	ocg = oc_n / p->groups;
	if (x->dim[0] != y->dim[0] || w->dim[0] != oc_n || w->dim[1] != icg ||
	    (bias && !mi_sim_param_ok(b, oc_n)) ||
	    (rq && (!mi_sim_param_ok(tm, oc_n) || !mi_sim_param_ok(ts, oc_n))))
		return -EINVAL;
	elt_work = (u64)icg * w->dim[2] * w->dim[3] + 1;

	for (n = 0; n < y->dim[0]; n++) {
		for (oc = 0; oc < oc_n; oc++) {
			acc0 = bias ? (u32)mi_sim_param(b, oc) : 0;
			if (rq) {
				m = mi_sim_param(tm, oc);
				s = mi_sim_param(ts, oc);
			}
			for (oh = 0; oh < y->dim[2]; oh++) {
				for (ow = 0; ow < y->dim[3]; ow++) {
					acc = mi_sim_conv_acc(op, n, oc, oh, ow,
							      (oc / ocg) * icg,
							      icg, acc0);
					v = (s32)acc;
					if (rq)
						v = mi_requant(v, m, s, zp, lo,
							       hi);
					idx = mi_tensor_index(y, n, oc, oh, ow);
					mi_tensor_set(y, idx, v);
					ret = mi_sim_tick(ctx, elt_work);
					if (ret)
						return ret;
				}
			}
		}
	}
	return 0;
}

static int mi_sim_gemm(const struct mi_op *op, struct mi_sim_ctx *ctx)
{
	const struct drm_metainfer_op_gemm *p = &op->u.gemm;
	const struct mi_tensor *a = &op->t[MI_T_IN0];
	const struct mi_tensor *b = &op->t[MI_T_IN1];
	const struct mi_tensor *bt = &op->t[MI_T_BIAS];
	const struct mi_tensor *y = &op->t[MI_T_OUT];
	const struct mi_tensor *tm = &op->t[MI_T_MULT];
	const struct mi_tensor *ts = &op->t[MI_T_SHIFT];
	bool bias = op->flags & DRM_METAINFER_OP_F_BIAS;
	bool rq = op->flags & DRM_METAINFER_OP_F_REQUANT;
	u32 m_n = y->dim[2], n_n = y->dim[3], k_n = a->dim[3];
	u32 i, j, acc;
	s64 v;
	int ret;

	if (a->dim[2] != m_n || b->dim[2] != k_n || b->dim[3] != n_n ||
	    (bias && !mi_sim_param_ok(bt, n_n)) ||
	    (rq && (!mi_sim_param_ok(tm, n_n) || !mi_sim_param_ok(ts, n_n))))
		return -EINVAL;

	for (i = 0; i < m_n; i++) {
		for (j = 0; j < n_n; j++) {
			acc = bias ? (u32)mi_sim_param(bt, j) : 0;
			acc = mi_sim_dot(a, i * a->lstride[2], a->lstride[3],
					 p->a_zp, b, j * b->lstride[3],
					 b->lstride[2], p->b_zp, k_n, acc);
			v = (s32)acc;
			if (rq)
				v = mi_requant(v, mi_sim_param(tm, j),
					       mi_sim_param(ts, j),
					       p->rq.output_zp, op->out_min,
					       op->out_max);
			mi_tensor_set(y, i * y->lstride[2] + j * y->lstride[3],
				      v);
			ret = mi_sim_tick(ctx, (u64)k_n + 1);
			if (ret)
				return ret;
		}
	}
	return 0;
}

/* Per-element ops: out(p) = fn(op, p) over the output's logical shape. */
typedef s64 (*mi_sim_elt_fn)(const struct mi_op *op, const u32 *p, u32 ch_dim);

static int mi_sim_foreach(const struct mi_op *op, struct mi_sim_ctx *ctx,
			  mi_sim_elt_fn fn, u32 ch_dim)
{
	const struct mi_tensor *y = &op->t[MI_T_OUT];
	u32 p[4];
	int ret;

	for (p[0] = 0; p[0] < y->dim[0]; p[0]++)
		for (p[1] = 0; p[1] < y->dim[1]; p[1]++)
			for (p[2] = 0; p[2] < y->dim[2]; p[2]++)
				for (p[3] = 0; p[3] < y->dim[3]; p[3]++) {
					mi_tensor_set(y, mi_sim_idx(y, p),
						      fn(op, p, ch_dim));
					ret = mi_sim_tick(ctx, 1);
					if (ret)
						return ret;
				}
	return 0;
}

static s64 mi_sim_add_elt(const struct mi_op *op, const u32 *p, u32 unused)
{
	const struct drm_metainfer_op_eltwise *e = &op->u.eltwise;
	s64 a = mi_tensor_get(&op->t[MI_T_IN0],
			      mi_sim_idx(&op->t[MI_T_IN0], p));
	s64 b = mi_tensor_get(&op->t[MI_T_IN1],
			      mi_sim_idx(&op->t[MI_T_IN1], p));
	u64 v;

	a -= e->a_zp;
	b -= e->b_zp;
	if (op->op == DRM_METAINFER_OP_ADD)
		v = (u64)a * (u64)(s64)e->a_mult + (u64)b * (u64)(s64)e->b_mult;
	else
		v = (u64)a * (u64)b * (u64)(s64)e->a_mult;
	v = (u64)mi_rshift_round((s64)v, e->shift) + (u64)(s64)e->rq.output_zp;
	return clamp_t(s64, (s64)v, op->out_min, op->out_max);
}

static s64 mi_sim_clip_elt(const struct mi_op *op, const u32 *p, u32 unused)
{
	s64 x = mi_tensor_get(&op->t[MI_T_IN0],
			      mi_sim_idx(&op->t[MI_T_IN0], p));

	return clamp_t(s64, x, op->out_min, op->out_max);
}

static s64 mi_sim_copy_elt(const struct mi_op *op, const u32 *p, u32 unused)
{
	return mi_tensor_get(&op->t[MI_T_IN0], mi_sim_idx(&op->t[MI_T_IN0], p));
}

static s64 mi_sim_lut_elt(const struct mi_op *op, const u32 *p, u32 unused)
{
	const struct mi_tensor *x = &op->t[MI_T_IN0];
	const struct mi_tensor *tab = &op->t[MI_T_IN1];
	s64 i = mi_tensor_get(x, mi_sim_idx(x, p)) - mi_dtype_min(x->dtype);

	return mi_tensor_get(tab, (u64)i * tab->lstride[3]);
}

static s64 mi_sim_requant_elt(const struct mi_op *op, const u32 *p, u32 cd)
{
	const struct drm_metainfer_op_requantize *r = &op->u.requantize;
	const struct mi_tensor *x = &op->t[MI_T_IN0];
	s64 v = mi_tensor_get(x, mi_sim_idx(x, p)) - r->input_zp;

	return mi_requant(v, mi_sim_param(&op->t[MI_T_MULT], p[cd]),
			  mi_sim_param(&op->t[MI_T_SHIFT], p[cd]),
			  r->rq.output_zp, op->out_min, op->out_max);
}

/* Logical (n, c, h, w) index of dimension @axis of @t's submitted shape. */
static int mi_sim_logical_axis(const struct mi_tensor *t, u32 axis)
{
	static const u8 nhwc[4] = { 0, 2, 3, 1 };

	if (axis >= t->ndim || t->ndim > 4)
		return -EINVAL;
	if (t->layout == DRM_METAINFER_LAYOUT_NHWC)
		return t->ndim == 4 ? nhwc[axis] : -EINVAL;
	return axis + 4 - t->ndim;
}

static int mi_sim_requantize(const struct mi_op *op, struct mi_sim_ctx *ctx)
{
	const struct mi_tensor *x = &op->t[MI_T_IN0];
	const struct mi_tensor *y = &op->t[MI_T_OUT];
	int cd = mi_sim_logical_axis(x, op->u.requantize.axis);

	if (cd < 0 || !mi_sim_bcast_ok(x, y) ||
	    !mi_sim_param_ok(&op->t[MI_T_MULT], x->dim[cd]) ||
	    !mi_sim_param_ok(&op->t[MI_T_SHIFT], x->dim[cd]))
		return -EINVAL;
	/* the channel index must run over x's channel dimension */
	if (x->dim[cd] != y->dim[cd])
		return -EINVAL;
	return mi_sim_foreach(op, ctx, mi_sim_requant_elt, cd);
}

/* floor(a / b) for b > 0 */
static s64 mi_sim_floor_div(s64 a, s64 b)
{
	s64 q = div64_s64(a, b);

	if (q * b != a && a < 0)
		q--;
	return q;
}

/* Window rows [*k0, *k1) of a pooling window that lie inside the input. */
static void mi_sim_window(s64 o, u32 stride, u32 pad, u32 k, u32 in, u32 *k0,
			  u32 *k1)
{
	s64 first = o * stride - pad; /* input index of window element 0 */

	*k0 = first < 0 ? min_t(s64, -first, k) : 0;
	*k1 = clamp_t(s64, (s64)in - first, *k0, k);
}

/* One output element of a pooling op; @work gets the elements visited. */
static s64 mi_sim_pool_elt(const struct mi_op *op, u32 n, u32 c, u32 oh, u32 ow,
			   u64 *work)
{
	const struct drm_metainfer_op_pool *p = &op->u.pool;
	const struct mi_tensor *x = &op->t[MI_T_IN0];
	bool avg = op->op == DRM_METAINFER_OP_AVGPOOL;
	s64 ih0 = (s64)oh * p->stride_h - p->pad_top;
	s64 iw0 = (s64)ow * p->stride_w - p->pad_left;
	s64 acc = avg ? 0 : mi_dtype_min(x->dtype), v;
	u32 kh0, kh1, kw0, kw1, kh, kw;
	u64 cnt;

	mi_sim_window(oh, p->stride_h, p->pad_top, p->kernel_h, x->dim[2], &kh0,
		      &kh1);
	mi_sim_window(ow, p->stride_w, p->pad_left, p->kernel_w, x->dim[3],
		      &kw0, &kw1);
	for (kh = kh0; kh < kh1; kh++) {
		for (kw = kw0; kw < kw1; kw++) {
			v = mi_tensor_get(x, mi_tensor_index(x, n, c, ih0 + kh,
							     iw0 + kw));
			if (avg)
				acc += v;
			else if (v > acc)
				acc = v;
		}
	}
	cnt = (u64)(kh1 - kh0) * (kw1 - kw0);
	*work = cnt + 1;
	if (!avg)
		return acc;
	if (op->flags & DRM_METAINFER_OP_F_COUNT_PAD)
		cnt = (u64)p->kernel_h * p->kernel_w;
	return cnt ? mi_sim_floor_div(2 * acc + (s64)cnt, 2 * (s64)cnt) : 0;
}

static int mi_sim_pool(const struct mi_op *op, struct mi_sim_ctx *ctx)
{
	const struct drm_metainfer_op_pool *p = &op->u.pool;
	const struct mi_tensor *x = &op->t[MI_T_IN0];
	const struct mi_tensor *y = &op->t[MI_T_OUT];
	u32 n, c, oh, ow;
	u64 work;
	s64 v;
	int ret;

	if (x->dim[0] != y->dim[0] || x->dim[1] != y->dim[1] || !p->stride_h ||
	    !p->stride_w)
		return -EINVAL;

	for (n = 0; n < y->dim[0]; n++) {
		for (c = 0; c < y->dim[1]; c++) {
			for (oh = 0; oh < y->dim[2]; oh++) {
				for (ow = 0; ow < y->dim[3]; ow++) {
					v = mi_sim_pool_elt(op, n, c, oh, ow,
							    &work);
					mi_tensor_set(y,
						      mi_tensor_index(y, n, c,
								      oh, ow),
						      v);
					ret = mi_sim_tick(ctx, work);
					if (ret)
						return ret;
				}
			}
		}
	}
	return 0;
}

/**
 * mi_sim_exec_op() - compute one validated op
 * @op: the op, its tensors resolved to kernel addresses by the core
 * @abort: polled now and then; when it becomes true the op stops early
 *
 * Return: 0, -ECANCELED if aborted, -EINVAL if the op's tensors do not
 * agree with each other (never expected after the core's validation),
 * -EOPNOTSUPP for an op this backend does not know.
 */
int mi_sim_exec_op(const struct mi_op *op, const bool *abort)
{
	struct mi_sim_ctx ctx = { .abort = abort };
	const struct mi_tensor *y = &op->t[MI_T_OUT];

	if (!mi_sim_has(op, MI_T_IN0) || !mi_sim_has(op, MI_T_OUT))
		return -EINVAL;

	switch (op->op) {
	case DRM_METAINFER_OP_CONV2D:
		return mi_sim_conv2d(op, &ctx);
	case DRM_METAINFER_OP_GEMM:
		return mi_sim_gemm(op, &ctx);
	case DRM_METAINFER_OP_ADD:
	case DRM_METAINFER_OP_MUL:
		if (!mi_sim_has(op, MI_T_IN1) ||
		    !mi_sim_bcast_ok(&op->t[MI_T_IN0], y) ||
		    !mi_sim_bcast_ok(&op->t[MI_T_IN1], y))
			return -EINVAL;
		return mi_sim_foreach(op, &ctx, mi_sim_add_elt, 0);
	case DRM_METAINFER_OP_RELU:
	case DRM_METAINFER_OP_CLIP:
		if (!mi_sim_bcast_ok(&op->t[MI_T_IN0], y))
			return -EINVAL;
		return mi_sim_foreach(op, &ctx, mi_sim_clip_elt, 0);
	case DRM_METAINFER_OP_COPY:
		if (!mi_sim_bcast_ok(&op->t[MI_T_IN0], y))
			return -EINVAL;
		return mi_sim_foreach(op, &ctx, mi_sim_copy_elt, 0);
	case DRM_METAINFER_OP_MAXPOOL:
	case DRM_METAINFER_OP_AVGPOOL:
		return mi_sim_pool(op, &ctx);
	case DRM_METAINFER_OP_REQUANTIZE:
		return mi_sim_requantize(op, &ctx);
	case DRM_METAINFER_OP_LUT:
		/* 8-bit input: index x - dtype_min is 0..255 */
		if (!mi_sim_has(op, MI_T_IN1) || op->t[MI_T_IN0].esize != 1 ||
		    op->t[MI_T_IN1].elems != 256 ||
		    op->t[MI_T_IN1].dim[3] != 256 ||
		    !mi_sim_bcast_ok(&op->t[MI_T_IN0], y))
			return -EINVAL;
		return mi_sim_foreach(op, &ctx, mi_sim_lut_elt, 0);
	}
	return -EOPNOTSUPP;
}

static u64 mi_sim_tbytes(const struct mi_op *op, u32 slot)
{
	const struct mi_tensor *t = &op->t[slot];

	return mi_sim_has(op, slot) ? mi_sim_muldiv(t->elems, t->esize, 1) : 0;
}

/**
 * mi_sim_op_cost() - describe an op for the timing model
 * @op: the op
 * @c: filled in
 */
void mi_sim_op_cost(const struct mi_op *op, struct mi_sim_opcost *c)
{
	const struct mi_tensor *x = &op->t[MI_T_IN0];
	const struct mi_tensor *y = &op->t[MI_T_OUT];

	memset(c, 0, sizeof(*c));
	c->esize = x->esize;
	c->in_bytes = mi_sim_tbytes(op, MI_T_IN0);
	c->out_bytes = mi_sim_tbytes(op, MI_T_OUT);
	c->layout = x->layout;
	c->work = y->elems;

	switch (op->op) {
	case DRM_METAINFER_OP_CONV2D:
	case DRM_METAINFER_OP_GEMM:
		c->work = op->macs;
		c->esize = max(x->esize, op->t[MI_T_IN1].esize);
		c->w_bytes = mi_sim_tbytes(op, MI_T_IN1) +
			     mi_sim_tbytes(op, MI_T_BIAS) +
			     mi_sim_tbytes(op, MI_T_MULT) +
			     mi_sim_tbytes(op, MI_T_SHIFT);
		if (op->op == DRM_METAINFER_OP_CONV2D) {
			c->layout_sensitive = true;
			c->depthwise = op->u.conv2d.groups > 1 &&
				       op->u.conv2d.groups == x->dim[1];
		}
		break;
	case DRM_METAINFER_OP_ADD:
	case DRM_METAINFER_OP_MUL:
		c->esize = max(x->esize, op->t[MI_T_IN1].esize);
		c->in_bytes += mi_sim_tbytes(op, MI_T_IN1);
		break;
	case DRM_METAINFER_OP_MAXPOOL:
	case DRM_METAINFER_OP_AVGPOOL:
		c->work = mi_sim_muldiv(
			y->elems,
			(u64)op->u.pool.kernel_h * op->u.pool.kernel_w, 1);
		c->layout_sensitive = true;
		break;
	case DRM_METAINFER_OP_REQUANTIZE:
		c->in_bytes += mi_sim_tbytes(op, MI_T_MULT) +
			       mi_sim_tbytes(op, MI_T_SHIFT);
		break;
	case DRM_METAINFER_OP_COPY:
		c->work = 0; /* a pure DMA transfer */
		break;
	case DRM_METAINFER_OP_LUT:
		/* one lookup per element; the table is read like an input */
		c->in_bytes += mi_sim_tbytes(op, MI_T_IN1);
		break;
	}
	if (c->layout == DRM_METAINFER_LAYOUT_PLAIN)
		c->layout_sensitive = false;
}

/*
 * Slots of @op whose bytes the timing model counts as activation input
 * (in_bytes): the ones an on-chip intermediate may feed.  Weights, gemm's
 * b, bias and requantization/table parameters are not among them.
 */
static u32 mi_sim_act_slots(const struct mi_op *op)
{
	switch (op->op) {
	case DRM_METAINFER_OP_ADD:
	case DRM_METAINFER_OP_MUL:
		return BIT(MI_T_IN0) | BIT(MI_T_IN1);
	}
	return BIT(MI_T_IN0);
}

static bool mi_sim_same_view(const struct mi_tensor *a,
			     const struct mi_tensor *b)
{
	return a->bo_index == b->bo_index && a->data == b->data &&
	       a->dtype == b->dtype && a->layout == b->layout &&
	       a->ndim == b->ndim &&
	       !memcmp(a->shape, b->shape, sizeof(a->shape)) &&
	       !memcmp(a->stride, b->stride, sizeof(a->stride));
}

static bool mi_sim_overlap(const struct mi_tensor *a, const struct mi_tensor *b)
{
	const u8 *a0 = a->data, *b0 = b->data;

	return a->bo_index == b->bo_index && a0 < b0 + b->span &&
	       b0 < a0 + a->span;
}

/* Does an input of @op other than exact views of @t touch @t's bytes? */
static bool mi_sim_reads_other(const struct mi_op *op,
			       const struct mi_tensor *t, bool allow_same)
{
	u32 act = mi_sim_act_slots(op), slot;

	for (slot = 0; slot < MI_T_COUNT; slot++) {
		if (slot == MI_T_OUT || !mi_sim_has(op, slot) ||
		    !mi_sim_overlap(&op->t[slot], t))
			continue;
		if (allow_same && (act & BIT(slot)) &&
		    mi_sim_same_view(&op->t[slot], t))
			continue;
		return true;
	}
	return false;
}

/**
 * mi_sim_cascade_scan() - which op outputs may stay in SRAM
 * @ops: the job's ops
 * @n: number of ops
 * @ok: bitmap of at least @n bits, filled in
 *
 * Sets bit k when the output of op k is an intermediate that the next op
 * alone consumes (Documentation/sim.rst, "On-chip intermediates"): op k+1
 * reads exactly that view through an activation input, no other input of
 * op k+1 and no input of a later op touches its bytes (up to an op that
 * overwrites exactly that view, op k+1 included: in-place ops).  Whether it then
 * fits in SRAM is for the timing model (mi_sim_job_time()) to decide.
 */
void mi_sim_cascade_scan(const struct mi_op *ops, u32 n, unsigned long *ok)
{
	const struct mi_tensor *t;
	u32 k, j, slot, act;
	bool fed;

	bitmap_zero(ok, n);
	for (k = 0; k + 1 < n; k++) {
		if (!mi_sim_has(&ops[k], MI_T_OUT))
			continue;
		t = &ops[k].t[MI_T_OUT];
		act = mi_sim_act_slots(&ops[k + 1]);
		fed = false;
		for (slot = 0; slot < MI_T_COUNT; slot++)
			if ((act & BIT(slot)) &&
			    mi_sim_has(&ops[k + 1], slot) &&
			    mi_sim_same_view(&ops[k + 1].t[slot], t))
				fed = true;
		if (!fed || mi_sim_reads_other(&ops[k + 1], t, true))
			continue;
		/* until an op overwrites exactly this view, nobody else reads it */
		for (j = k + 1; j < n; j++) {
			if (j > k + 1 && mi_sim_reads_other(&ops[j], t, false))
				break;
			if (mi_sim_has(&ops[j], MI_T_OUT) &&
			    mi_sim_same_view(&ops[j].t[MI_T_OUT], t)) {
				j = n;
				break;
			}
		}
		if (j == n)
			__set_bit(k, ok);
	}
}

/**
 * mi_sim_cascade_bytes() - bytes of @op's activation inputs that are
 * exact views of @t (what it reads from SRAM when @t stays on chip)
 * @op: the consumer
 * @t: the producer's output
 *
 * Return: the bytes, as the timing model counts them (elements x size).
 */
u64 mi_sim_cascade_bytes(const struct mi_op *op, const struct mi_tensor *t)
{
	u32 act = mi_sim_act_slots(op), slot;
	u64 b = 0;

	for (slot = 0; slot < MI_T_COUNT; slot++)
		if ((act & BIT(slot)) && mi_sim_has(op, slot) &&
		    mi_sim_same_view(&op->t[slot], t))
			b += mi_sim_tbytes(op, slot);
	return b;
}
