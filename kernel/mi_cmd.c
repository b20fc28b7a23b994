// SPDX-License-Identifier: GPL-2.0-only
/*
 * MetaInfer core: command stream parsing and validation.
 *
 * Everything a backend will read or write is checked here, before the job
 * is queued: stream framing, op parameters, and every tensor descriptor
 * against the size of its buffer with overflow-checked arithmetic.  What
 * leaves this file is an array of struct mi_op a backend can execute
 * without any further check.
 */

#include <linux/overflow.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <drm/drm_gem.h>
#include <drm/drm_print.h>

#include "mi_drv.h"

#define MI_DTYPES_ACT                                                     \
	(BIT(DRM_METAINFER_DTYPE_INT8) | BIT(DRM_METAINFER_DTYPE_UINT8) | \
	 BIT(DRM_METAINFER_DTYPE_INT16))
#define MI_DTYPES_WEIGHT \
	(BIT(DRM_METAINFER_DTYPE_INT8) | BIT(DRM_METAINFER_DTYPE_INT16))
#define MI_DTYPES_ALL (MI_DTYPES_ACT | BIT(DRM_METAINFER_DTYPE_INT32))
#define MI_POOL_MAX_KERNEL 65535

static const u32 mi_op_size[DRM_METAINFER_OP_COUNT] = {
	[DRM_METAINFER_OP_CONV2D] = sizeof(struct drm_metainfer_op_conv2d),
	[DRM_METAINFER_OP_GEMM] = sizeof(struct drm_metainfer_op_gemm),
	[DRM_METAINFER_OP_ADD] = sizeof(struct drm_metainfer_op_eltwise),
	[DRM_METAINFER_OP_MUL] = sizeof(struct drm_metainfer_op_eltwise),
	[DRM_METAINFER_OP_RELU] = sizeof(struct drm_metainfer_op_clip),
	[DRM_METAINFER_OP_CLIP] = sizeof(struct drm_metainfer_op_clip),
	[DRM_METAINFER_OP_MAXPOOL] = sizeof(struct drm_metainfer_op_pool),
	[DRM_METAINFER_OP_AVGPOOL] = sizeof(struct drm_metainfer_op_pool),
	[DRM_METAINFER_OP_REQUANTIZE] =
		sizeof(struct drm_metainfer_op_requantize),
	[DRM_METAINFER_OP_COPY] = sizeof(struct drm_metainfer_op_copy),
	[DRM_METAINFER_OP_LUT] = sizeof(struct drm_metainfer_op_lut),
};

/* Parsing state of one job. */
struct mi_cmd_ctx {
	struct mi_device *mdev;
	const struct drm_gem_object *const *objs;
	u32 bo_count;
	u32 dtype_seen;
	u32 layout_seen;
};

#define mi_cmd_dbg(mc, fmt, ...) \
	drm_dbg_driver((mc)->mdev->drm, "submit: " fmt, ##__VA_ARGS__)

static bool mi_mem_is_zero(const void *p, size_t n)
{
	return !memchr_inv(p, 0, n);
}

/*
 * Validate one descriptor and fill @t (t->data holds the byte offset until
 * mi_cmd_resolve() turns it into a kernel address).
 */
static int mi_tensor_check(struct mi_cmd_ctx *mc,
			   const struct drm_metainfer_tensor *d,
			   struct mi_tensor *t, const char *what)
{
	u64 maxidx = 0, elems = 1, span, end, tmp;
	u64 stride[DRM_METAINFER_MAX_NDIM];
	bool dense = true;
	u32 k, esize;

	memset(t, 0, sizeof(*t));
	if (d->bo_index >= mc->bo_count) {
		mi_cmd_dbg(mc, "%s: bo_index %u >= bo_count %u\n", what,
			   d->bo_index, mc->bo_count);
		return -EINVAL;
	}
	esize = mi_dtype_size(d->dtype);
	if (!esize) {
		mi_cmd_dbg(mc, "%s: bad dtype %u\n", what, d->dtype);
		return -EINVAL;
	}
	if (d->layout >= DRM_METAINFER_LAYOUT_COUNT) {
		mi_cmd_dbg(mc, "%s: bad layout %u\n", what, d->layout);
		return -EINVAL;
	}
	if (d->ndim < 1 || d->ndim > DRM_METAINFER_MAX_NDIM ||
	    (d->layout != DRM_METAINFER_LAYOUT_PLAIN && d->ndim != 4)) {
		mi_cmd_dbg(mc, "%s: bad ndim %u\n", what, d->ndim);
		return -EINVAL;
	}
	for (k = 0; k < DRM_METAINFER_MAX_NDIM; k++) {
		if (k < d->ndim) {
			if (!d->shape[k]) {
				mi_cmd_dbg(mc, "%s: zero extent\n", what);
				return -EINVAL;
			}
			if (d->stride[k])
				dense = false;
		} else if (d->shape[k] || d->stride[k]) {
			mi_cmd_dbg(mc, "%s: unused dims not zero\n", what);
			return -EINVAL;
		}
	}
	/* Dense: row-major over the shape as given. */
	for (k = d->ndim; k-- > 0;) {
		if (dense) {
			stride[k] = elems;
		} else {
			stride[k] = d->stride[k];
		}
		if (check_mul_overflow(elems, (u64)d->shape[k], &elems)) {
			mi_cmd_dbg(mc, "%s: element count overflows\n", what);
			return -EINVAL;
		}
		if (check_mul_overflow((u64)(d->shape[k] - 1), stride[k],
				       &tmp) ||
		    check_add_overflow(maxidx, tmp, &maxidx)) {
			mi_cmd_dbg(mc, "%s: stride overflows\n", what);
			return -EINVAL;
		}
	}
	if (check_add_overflow(maxidx, (u64)1, &span) ||
	    check_mul_overflow(span, (u64)esize, &span)) {
		mi_cmd_dbg(mc, "%s: extent overflows\n", what);
		return -EINVAL;
	}
	if (d->offset % esize) {
		mi_cmd_dbg(mc, "%s: offset %llu not aligned to %u\n", what,
			   d->offset, esize);
		return -EINVAL;
	}
	if (check_add_overflow(d->offset, span, &end) ||
	    end > mc->objs[d->bo_index]->size) {
		mi_cmd_dbg(mc,
			   "%s: [%llu, +%llu) outside buffer %u (%zu bytes)\n",
			   what, d->offset, span, d->bo_index,
			   mc->objs[d->bo_index]->size);
		return -EINVAL;
	}

	t->data = (void *)(uintptr_t)d->offset;
	t->bo_index = d->bo_index;
	t->dtype = d->dtype;
	t->layout = d->layout;
	t->ndim = d->ndim;
	t->esize = esize;
	t->elems = elems;
	t->span = span;
	for (k = 0; k < DRM_METAINFER_MAX_NDIM; k++) {
		t->shape[k] = k < d->ndim ? d->shape[k] : 1;
		t->stride[k] = k < d->ndim ? stride[k] : 0;
		t->dim[k] = 1;
		t->lstride[k] = 0;
	}
	switch (d->layout) {
	case DRM_METAINFER_LAYOUT_NCHW:
		for (k = 0; k < 4; k++) {
			t->dim[k] = t->shape[k];
			t->lstride[k] = t->stride[k];
		}
		break;
	case DRM_METAINFER_LAYOUT_NHWC:
		t->dim[0] = t->shape[0];
		t->lstride[0] = t->stride[0];
		t->dim[1] = t->shape[3];
		t->lstride[1] = t->stride[3];
		t->dim[2] = t->shape[1];
		t->lstride[2] = t->stride[1];
		t->dim[3] = t->shape[2];
		t->lstride[3] = t->stride[2];
		break;
	default:
		for (k = 0; k < d->ndim; k++) {
			t->dim[4 - d->ndim + k] = t->shape[k];
			t->lstride[4 - d->ndim + k] = t->stride[k];
		}
		break;
	}
	mc->dtype_seen |= BIT(d->dtype);
	mc->layout_seen |= BIT(d->layout);
	return 0;
}

static int mi_tensor_use(struct mi_cmd_ctx *mc, struct mi_op *op, u32 slot,
			 const struct drm_metainfer_tensor *d, u32 dtypes,
			 const char *what)
{
	int ret = mi_tensor_check(mc, d, &op->t[slot], what);

	if (ret)
		return ret;
	if (!(BIT(d->dtype) & dtypes)) {
		mi_cmd_dbg(mc, "%s: dtype %u not valid here\n", what, d->dtype);
		return -EINVAL;
	}
	op->tensor_mask |= BIT(slot);
	return 0;
}

/* The input/output pair of a one-input op, any dtype: IN0 then OUT. */
static int mi_tensor_use_io(struct mi_cmd_ctx *mc, struct mi_op *op,
			    const struct drm_metainfer_tensor *in,
			    const struct drm_metainfer_tensor *out)
{
	int ret = mi_tensor_use(mc, op, MI_T_IN0, in, MI_DTYPES_ALL, "input");

	if (ret)
		return ret;
	return mi_tensor_use(mc, op, MI_T_OUT, out, MI_DTYPES_ALL, "output");
}

static int mi_tensor_unused(struct mi_cmd_ctx *mc,
			    const struct drm_metainfer_tensor *d,
			    const char *what)
{
	if (!mi_mem_is_zero(d, sizeof(*d))) {
		mi_cmd_dbg(mc, "%s: unused tensor not zero\n", what);
		return -EINVAL;
	}
	return 0;
}

static bool mi_same_dims(const struct mi_tensor *a, const struct mi_tensor *b)
{
	return !memcmp(a->dim, b->dim, sizeof(a->dim));
}

/* Clamp bounds: [lo, hi] intersected with the dtype range of @dtype. */
static int mi_bounds(struct mi_cmd_ctx *mc, struct mi_op *op, u32 dtype, s32 lo,
		     s32 hi)
{
	s32 dlo = mi_dtype_min(dtype), dhi = mi_dtype_max(dtype);

	if (lo > hi) {
		mi_cmd_dbg(mc, "clamp min %d > max %d\n", lo, hi);
		return -EINVAL;
	}
	op->out_min = max(lo, dlo);
	op->out_max = min(hi, dhi);
	if (op->out_min > op->out_max) {
		mi_cmd_dbg(mc, "clamp range outside the output dtype\n");
		return -EINVAL;
	}
	return 0;
}

/* A 1-D int32 PLAIN vector of 1 or @n elements. */
static int mi_vector_check(struct mi_cmd_ctx *mc, const struct mi_tensor *t,
			   u64 n, const char *what)
{
	if (t->layout != DRM_METAINFER_LAYOUT_PLAIN || t->ndim != 1 ||
	    (t->elems != 1 && t->elems != n)) {
		mi_cmd_dbg(mc, "%s: must be a PLAIN vector of 1 or %llu\n",
			   what, n);
		return -EINVAL;
	}
	return 0;
}

/* Requantization (multiplier + shift + rq) for @n output channels. */
static int mi_requant_check(struct mi_cmd_ctx *mc, struct mi_op *op, bool on,
			    const struct drm_metainfer_requant *rq,
			    const struct drm_metainfer_tensor *mult,
			    const struct drm_metainfer_tensor *shift, u64 n)
{
	u32 i32 = BIT(DRM_METAINFER_DTYPE_INT32);
	int ret;

	if (!on) {
		if (!mi_mem_is_zero(rq, sizeof(*rq))) {
			mi_cmd_dbg(mc, "rq set without REQUANT\n");
			return -EINVAL;
		}
		ret = mi_tensor_unused(mc, mult, "multiplier");
		if (!ret)
			ret = mi_tensor_unused(mc, shift, "shift");
		if (ret)
			return ret;
		if (op->t[MI_T_OUT].dtype != DRM_METAINFER_DTYPE_INT32) {
			mi_cmd_dbg(mc,
				   "raw accumulators need an int32 output\n");
			return -EINVAL;
		}
		op->out_min = S32_MIN;
		op->out_max = S32_MAX;
		return 0;
	}
	if (rq->pad) {
		mi_cmd_dbg(mc, "rq.pad not zero\n");
		return -EINVAL;
	}
	ret = mi_tensor_use(mc, op, MI_T_MULT, mult, i32, "multiplier");
	if (!ret)
		ret = mi_tensor_use(mc, op, MI_T_SHIFT, shift, i32, "shift");
	if (!ret)
		ret = mi_vector_check(mc, &op->t[MI_T_MULT], n, "multiplier");
	if (!ret)
		ret = mi_vector_check(mc, &op->t[MI_T_SHIFT], n, "shift");
	if (ret)
		return ret;
	return mi_bounds(mc, op, op->t[MI_T_OUT].dtype, rq->act_min,
			 rq->act_max);
}

static int mi_bias_check(struct mi_cmd_ctx *mc, struct mi_op *op, bool on,
			 const struct drm_metainfer_tensor *bias, u64 n)
{
	const struct mi_tensor *t = &op->t[MI_T_BIAS];
	int ret;

	if (!on)
		return mi_tensor_unused(mc, bias, "bias");
	ret = mi_tensor_use(mc, op, MI_T_BIAS, bias,
			    BIT(DRM_METAINFER_DTYPE_INT32), "bias");
	if (ret)
		return ret;
	if (t->layout != DRM_METAINFER_LAYOUT_PLAIN || t->ndim != 1 ||
	    t->elems != n) {
		mi_cmd_dbg(mc, "bias must be a PLAIN vector of %llu\n", n);
		return -EINVAL;
	}
	return 0;
}

/* Output extent of a sliding window, or 0 if the window does not fit. */
static u64 mi_window_out(u64 in, u64 pad0, u64 pad1, u64 window, u64 stride)
{
	u64 padded = in + pad0 + pad1;

	if (padded < window)
		return 0;
	return (padded - window) / stride + 1;
}

static int mi_op_conv2d(struct mi_cmd_ctx *mc, struct mi_op *op)
{
	const struct drm_metainfer_op_conv2d *c = &op->u.conv2d;
	const struct mi_tensor *in = &op->t[MI_T_IN0];
	const struct mi_tensor *w = &op->t[MI_T_IN1];
	const struct mi_tensor *out = &op->t[MI_T_OUT];
	u64 cin, cout, cpg, kh, kw, eff, oh, ow, macs;
	int ret;

	if (op->flags & ~(DRM_METAINFER_OP_F_BIAS | DRM_METAINFER_OP_F_REQUANT))
		return -EINVAL;
	if (!c->stride_h || !c->stride_w || !c->dilation_h || !c->dilation_w ||
	    !c->groups || c->pad) {
		mi_cmd_dbg(mc, "conv2d: bad stride/dilation/groups/pad\n");
		return -EINVAL;
	}
	ret = mi_tensor_use(mc, op, MI_T_IN0, &c->input, MI_DTYPES_ACT,
			    "input");
	if (!ret)
		ret = mi_tensor_use(mc, op, MI_T_IN1, &c->weight,
				    MI_DTYPES_WEIGHT, "weight");
	if (!ret)
		ret = mi_tensor_use(mc, op, MI_T_OUT, &c->output, MI_DTYPES_ALL,
				    "output");
	if (ret)
		return ret;
	if (in->layout == DRM_METAINFER_LAYOUT_PLAIN ||
	    w->layout != in->layout || out->layout != in->layout) {
		mi_cmd_dbg(mc, "conv2d: layouts must be one of NCHW/NHWC\n");
		return -EINVAL;
	}
	cin = in->dim[1];
	cout = w->dim[0];
	kh = w->dim[2];
	kw = w->dim[3];
	if (cin % c->groups || cout % c->groups ||
	    w->dim[1] != cin / c->groups) {
		mi_cmd_dbg(mc, "conv2d: channels do not match groups\n");
		return -EINVAL;
	}
	cpg = cin / c->groups;
	eff = (u64)c->dilation_h * (kh - 1) + 1;
	oh = mi_window_out(in->dim[2], c->pad_top, c->pad_bottom, eff,
			   c->stride_h);
	eff = (u64)c->dilation_w * (kw - 1) + 1;
	ow = mi_window_out(in->dim[3], c->pad_left, c->pad_right, eff,
			   c->stride_w);
	if (out->dim[0] != in->dim[0] || out->dim[1] != cout ||
	    out->dim[2] != oh || out->dim[3] != ow) {
		mi_cmd_dbg(mc, "conv2d: output shape mismatch\n");
		return -EINVAL;
	}
	ret = mi_bias_check(mc, op, op->flags & DRM_METAINFER_OP_F_BIAS,
			    &c->bias, cout);
	if (!ret)
		ret = mi_requant_check(mc, op,
				       op->flags & DRM_METAINFER_OP_F_REQUANT,
				       &c->rq, &c->multiplier, &c->shift, cout);
	if (ret)
		return ret;
	if (check_mul_overflow(out->elems, cpg, &macs) ||
	    check_mul_overflow(macs, kh, &macs) ||
	    check_mul_overflow(macs, kw, &macs)) {
		mi_cmd_dbg(mc, "conv2d: MAC count overflows\n");
		return -EINVAL;
	}
	op->macs = macs;
	return 0;
}

static int mi_op_gemm(struct mi_cmd_ctx *mc, struct mi_op *op)
{
	const struct drm_metainfer_op_gemm *g = &op->u.gemm;
	const struct mi_tensor *a = &op->t[MI_T_IN0];
	const struct mi_tensor *b = &op->t[MI_T_IN1];
	const struct mi_tensor *out = &op->t[MI_T_OUT];
	u64 macs;
	int ret;

	if (op->flags & ~(DRM_METAINFER_OP_F_BIAS | DRM_METAINFER_OP_F_REQUANT))
		return -EINVAL;
	ret = mi_tensor_use(mc, op, MI_T_IN0, &g->a, MI_DTYPES_ACT, "a");
	if (!ret)
		ret = mi_tensor_use(mc, op, MI_T_IN1, &g->b, MI_DTYPES_ACT,
				    "b");
	if (!ret)
		ret = mi_tensor_use(mc, op, MI_T_OUT, &g->output, MI_DTYPES_ALL,
				    "output");
	if (ret)
		return ret;
	if (a->layout || b->layout || out->layout || a->ndim != 2 ||
	    b->ndim != 2 || out->ndim != 2) {
		mi_cmd_dbg(mc, "gemm: operands must be PLAIN 2-D\n");
		return -EINVAL;
	}
	/* Logical dims of a PLAIN 2-D tensor are (1, 1, rows, cols). */
	if (a->dim[3] != b->dim[2] || out->dim[2] != a->dim[2] ||
	    out->dim[3] != b->dim[3]) {
		mi_cmd_dbg(mc, "gemm: shape mismatch\n");
		return -EINVAL;
	}
	ret = mi_bias_check(mc, op, op->flags & DRM_METAINFER_OP_F_BIAS,
			    &g->bias, b->dim[3]);
	if (!ret)
		ret = mi_requant_check(mc, op,
				       op->flags & DRM_METAINFER_OP_F_REQUANT,
				       &g->rq, &g->multiplier, &g->shift,
				       b->dim[3]);
	if (ret)
		return ret;
	if (check_mul_overflow(out->elems, (u64)a->dim[3], &macs)) {
		mi_cmd_dbg(mc, "gemm: MAC count overflows\n");
		return -EINVAL;
	}
	op->macs = macs;
	return 0;
}

static int mi_op_eltwise(struct mi_cmd_ctx *mc, struct mi_op *op)
{
	const struct drm_metainfer_op_eltwise *e = &op->u.eltwise;
	const struct mi_tensor *a = &op->t[MI_T_IN0];
	const struct mi_tensor *b = &op->t[MI_T_IN1];
	const struct mi_tensor *out = &op->t[MI_T_OUT];
	int ret;

	if (op->flags || e->pad || e->rq.pad || e->shift > 62 ||
	    (op->op == DRM_METAINFER_OP_MUL && e->b_mult)) {
		mi_cmd_dbg(mc, "eltwise: bad flags/pad/shift/b_mult\n");
		return -EINVAL;
	}
	ret = mi_tensor_use(mc, op, MI_T_IN0, &e->a, MI_DTYPES_ALL, "a");
	if (!ret)
		ret = mi_tensor_use(mc, op, MI_T_IN1, &e->b, MI_DTYPES_ALL,
				    "b");
	if (!ret)
		ret = mi_tensor_use(mc, op, MI_T_OUT, &e->output, MI_DTYPES_ALL,
				    "output");
	if (ret)
		return ret;
	if (a->layout != out->layout || b->layout != out->layout ||
	    a->ndim != out->ndim || b->ndim != out->ndim ||
	    !mi_same_dims(a, out) || !mi_same_dims(b, out)) {
		mi_cmd_dbg(mc, "eltwise: operand shapes/layouts differ\n");
		return -EINVAL;
	}
	return mi_bounds(mc, op, out->dtype, e->rq.act_min, e->rq.act_max);
}

static int mi_op_clip(struct mi_cmd_ctx *mc, struct mi_op *op)
{
	const struct drm_metainfer_op_clip *c = &op->u.clip;
	const struct mi_tensor *in = &op->t[MI_T_IN0];
	const struct mi_tensor *out = &op->t[MI_T_OUT];
	int ret;

	if (op->flags || (op->op == DRM_METAINFER_OP_RELU && c->max))
		return -EINVAL;
	ret = mi_tensor_use_io(mc, op, &c->input, &c->output);
	if (ret)
		return ret;
	if (in->dtype != out->dtype || in->layout != out->layout ||
	    in->ndim != out->ndim || !mi_same_dims(in, out)) {
		mi_cmd_dbg(mc, "clip: input/output differ\n");
		return -EINVAL;
	}
	if (op->op == DRM_METAINFER_OP_RELU) {
		if (c->min < mi_dtype_min(in->dtype) ||
		    c->min > mi_dtype_max(in->dtype)) {
			mi_cmd_dbg(mc, "relu: zero point outside dtype\n");
			return -EINVAL;
		}
		return mi_bounds(mc, op, out->dtype, c->min, S32_MAX);
	}
	return mi_bounds(mc, op, out->dtype, c->min, c->max);
}

static int mi_op_pool(struct mi_cmd_ctx *mc, struct mi_op *op)
{
	const struct drm_metainfer_op_pool *p = &op->u.pool;
	const struct mi_tensor *in = &op->t[MI_T_IN0];
	const struct mi_tensor *out = &op->t[MI_T_OUT];
	u32 allowed = op->op == DRM_METAINFER_OP_AVGPOOL ?
			      DRM_METAINFER_OP_F_COUNT_PAD :
			      0;
	int ret;

	if (op->flags & ~allowed)
		return -EINVAL;
	if (!p->kernel_h || !p->kernel_w || p->kernel_h > MI_POOL_MAX_KERNEL ||
	    p->kernel_w > MI_POOL_MAX_KERNEL || !p->stride_h || !p->stride_w ||
	    p->pad_top >= p->kernel_h || p->pad_bottom >= p->kernel_h ||
	    p->pad_left >= p->kernel_w || p->pad_right >= p->kernel_w) {
		mi_cmd_dbg(mc, "pool: bad window/stride/pads\n");
		return -EINVAL;
	}
	ret = mi_tensor_use_io(mc, op, &p->input, &p->output);
	if (ret)
		return ret;
	if (in->layout == DRM_METAINFER_LAYOUT_PLAIN ||
	    out->layout != in->layout || out->dtype != in->dtype) {
		mi_cmd_dbg(mc, "pool: layout/dtype mismatch\n");
		return -EINVAL;
	}
	if (out->dim[0] != in->dim[0] || out->dim[1] != in->dim[1] ||
	    out->dim[2] != mi_window_out(in->dim[2], p->pad_top, p->pad_bottom,
					 p->kernel_h, p->stride_h) ||
	    out->dim[3] != mi_window_out(in->dim[3], p->pad_left, p->pad_right,
					 p->kernel_w, p->stride_w)) {
		mi_cmd_dbg(mc, "pool: output shape mismatch\n");
		return -EINVAL;
	}
	op->out_min = mi_dtype_min(out->dtype);
	op->out_max = mi_dtype_max(out->dtype);
	return 0;
}

static int mi_op_requantize(struct mi_cmd_ctx *mc, struct mi_op *op)
{
	const struct drm_metainfer_op_requantize *r = &op->u.requantize;
	const struct mi_tensor *in = &op->t[MI_T_IN0];
	const struct mi_tensor *out = &op->t[MI_T_OUT];
	int ret;

	if (op->flags)
		return -EINVAL;
	ret = mi_tensor_use_io(mc, op, &r->input, &r->output);
	if (ret)
		return ret;
	if (r->axis >= in->ndim || in->layout != out->layout ||
	    in->ndim != out->ndim || !mi_same_dims(in, out)) {
		mi_cmd_dbg(mc, "requantize: bad axis or shape mismatch\n");
		return -EINVAL;
	}
	return mi_requant_check(mc, op, true, &r->rq, &r->multiplier, &r->shift,
				in->shape[r->axis]);
}

static int mi_op_copy(struct mi_cmd_ctx *mc, struct mi_op *op)
{
	const struct drm_metainfer_op_copy *c = &op->u.copy;
	const struct mi_tensor *in = &op->t[MI_T_IN0];
	const struct mi_tensor *out = &op->t[MI_T_OUT];
	int ret;

	if (op->flags)
		return -EINVAL;
	ret = mi_tensor_use_io(mc, op, &c->input, &c->output);
	if (ret)
		return ret;
	if (in->dtype != out->dtype || !mi_same_dims(in, out) ||
	    (in->layout == DRM_METAINFER_LAYOUT_PLAIN) !=
		    (out->layout == DRM_METAINFER_LAYOUT_PLAIN)) {
		mi_cmd_dbg(mc, "copy: dtype/shape/layout mismatch\n");
		return -EINVAL;
	}
	op->out_min = mi_dtype_min(out->dtype);
	op->out_max = mi_dtype_max(out->dtype);
	return 0;
}

/* The byte ranges of @a and @b share a byte of one buffer. */
static bool mi_tensors_overlap(const struct mi_tensor *a,
			       const struct mi_tensor *b)
{
	u64 a0 = (uintptr_t)a->data, b0 = (uintptr_t)b->data;

	/* data still holds the byte offset here; offset + span fits (checked) */
	return a->bo_index == b->bo_index && a0 < b0 + b->span &&
	       b0 < a0 + a->span;
}

static int mi_op_lut(struct mi_cmd_ctx *mc, struct mi_op *op)
{
	const struct drm_metainfer_op_lut *l = &op->u.lut;
	const struct mi_tensor *in = &op->t[MI_T_IN0];
	const struct mi_tensor *tab = &op->t[MI_T_IN1];
	const struct mi_tensor *out = &op->t[MI_T_OUT];
	u32 u8s = BIT(DRM_METAINFER_DTYPE_INT8) |
		  BIT(DRM_METAINFER_DTYPE_UINT8);
	int ret;

	if (op->flags) {
		mi_cmd_dbg(mc, "lut: flags not zero\n");
		return -EINVAL;
	}
	ret = mi_tensor_use(mc, op, MI_T_IN0, &l->input, u8s, "input");
	if (!ret)
		ret = mi_tensor_use(mc, op, MI_T_IN1, &l->table, u8s, "table");
	if (!ret)
		ret = mi_tensor_use(mc, op, MI_T_OUT, &l->output, u8s,
				    "output");
	if (ret)
		return ret;
	if (tab->layout != DRM_METAINFER_LAYOUT_PLAIN || tab->ndim != 1 ||
	    tab->elems != 256 || tab->dtype != out->dtype) {
		mi_cmd_dbg(mc, "lut: table not PLAIN [256] of output dtype\n");
		return -EINVAL;
	}
	if (in->layout != out->layout || in->ndim != out->ndim ||
	    !mi_same_dims(in, out)) {
		mi_cmd_dbg(mc, "lut: input/output shape or layout differ\n");
		return -EINVAL;
	}
	if (mi_tensors_overlap(tab, out)) {
		mi_cmd_dbg(mc, "lut: table overlaps the output\n");
		return -EINVAL;
	}
	op->out_min = mi_dtype_min(out->dtype);
	op->out_max = mi_dtype_max(out->dtype);
	return 0;
}

static int mi_op_check(struct mi_cmd_ctx *mc, struct mi_op *op)
{
	struct mi_device *mdev = mc->mdev;
	u32 slot, layouts;
	int ret;

	if (!(mdev->caps.op_mask & BIT_ULL(op->op))) {
		mi_cmd_dbg(mc, "op %u not supported by this device\n", op->op);
		return -EOPNOTSUPP;
	}
	mc->dtype_seen = 0;
	mc->layout_seen = 0;
	switch (op->op) {
	case DRM_METAINFER_OP_CONV2D:
		ret = mi_op_conv2d(mc, op);
		break;
	case DRM_METAINFER_OP_GEMM:
		ret = mi_op_gemm(mc, op);
		break;
	case DRM_METAINFER_OP_ADD:
	case DRM_METAINFER_OP_MUL:
		ret = mi_op_eltwise(mc, op);
		break;
	case DRM_METAINFER_OP_RELU:
	case DRM_METAINFER_OP_CLIP:
		ret = mi_op_clip(mc, op);
		break;
	case DRM_METAINFER_OP_MAXPOOL:
	case DRM_METAINFER_OP_AVGPOOL:
		ret = mi_op_pool(mc, op);
		break;
	case DRM_METAINFER_OP_REQUANTIZE:
		ret = mi_op_requantize(mc, op);
		break;
	case DRM_METAINFER_OP_COPY:
		ret = mi_op_copy(mc, op);
		break;
	case DRM_METAINFER_OP_LUT:
		ret = mi_op_lut(mc, op);
		break;
	default:
		ret = -EINVAL;
	}
	if (ret)
		return ret;

	if (mc->dtype_seen & ~mdev->caps.dtype_mask) {
		mi_cmd_dbg(mc, "op %u: dtype mask %#x not supported\n", op->op,
			   mc->dtype_seen);
		return -EOPNOTSUPP;
	}
	layouts = mdev->caps.layout_mask | BIT(DRM_METAINFER_LAYOUT_PLAIN);
	if (mc->layout_seen & ~layouts) {
		mi_cmd_dbg(mc, "op %u: layout mask %#x not supported\n", op->op,
			   mc->layout_seen);
		return -EOPNOTSUPP;
	}
	for (slot = 0; slot < MI_T_COUNT; slot++) {
		const struct mi_tensor *t = &op->t[slot];

		if (!(op->tensor_mask & BIT(slot)))
			continue;
		if (slot == MI_T_OUT)
			op->bytes_out = t->elems * t->esize;
		else
			op->bytes_in += t->elems * t->esize;
	}
	return 0;
}

/**
 * mi_cmd_parse() - parse and validate a command stream
 * @mdev: device the job is for (capabilities)
 * @cmds: kernel copy of the stream
 * @size: bytes at @cmds
 * @objs: the job's buffers, by index
 * @bo_count: number of entries at @objs
 * @ops_out: on success, a kvmalloc'ed array of validated ops
 * @op_count_out: on success, the number of ops
 *
 * Tensor data pointers hold byte offsets until mi_cmd_resolve().
 *
 * Return: 0, -EINVAL for a malformed stream or tensor, -EOPNOTSUPP for an
 * op/dtype/layout the device does not support, -ENOMEM.
 */
int mi_cmd_parse(struct mi_device *mdev, const void *cmds, u32 size,
		 const struct drm_gem_object *const *objs, u32 bo_count,
		 struct mi_op **ops_out, u32 *op_count_out)
{
	struct mi_cmd_ctx mc = {
		.mdev = mdev,
		.objs = objs,
		.bo_count = bo_count,
	};
	struct drm_metainfer_stream_header sh;
	struct mi_op *ops;
	u32 i, pos;
	int ret;

	if (size < sizeof(sh)) {
		mi_cmd_dbg(&mc, "stream shorter than its header\n");
		return -EINVAL;
	}
	memcpy(&sh, cmds, sizeof(sh));
	if (sh.magic != DRM_METAINFER_STREAM_MAGIC ||
	    sh.version != DRM_METAINFER_STREAM_VERSION || sh.flags ||
	    !sh.op_count || sh.op_count > DRM_METAINFER_MAX_OPS) {
		mi_cmd_dbg(&mc, "bad stream header\n");
		return -EINVAL;
	}
	ops = kvcalloc(sh.op_count, sizeof(*ops), GFP_KERNEL);
	if (!ops)
		return -ENOMEM;

	pos = sizeof(sh);
	for (i = 0; i < sh.op_count; i++) {
		struct drm_metainfer_op_header oh;
		struct mi_op *op = &ops[i];

		if (size - pos < sizeof(oh)) {
			mi_cmd_dbg(&mc, "op %u: stream truncated\n", i);
			ret = -EINVAL;
			goto err_free;
		}
		memcpy(&oh, cmds + pos, sizeof(oh));
		if (!oh.op || oh.op >= DRM_METAINFER_OP_COUNT ||
		    oh.size != mi_op_size[oh.op] || oh.pad ||
		    size - pos < oh.size) {
			mi_cmd_dbg(&mc, "op %u: bad header (op %u size %u)\n",
				   i, oh.op, oh.size);
			ret = -EINVAL;
			goto err_free;
		}
		memcpy(&op->u, cmds + pos, oh.size);
		op->op = oh.op;
		op->flags = oh.flags;
		pos += oh.size;
		ret = mi_op_check(&mc, op);
		if (ret) {
			mi_cmd_dbg(&mc, "op %u rejected: %d\n", i, ret);
			goto err_free;
		}
	}
	if (pos != size) {
		mi_cmd_dbg(&mc, "%u trailing bytes after the last op\n",
			   size - pos);
		ret = -EINVAL;
		goto err_free;
	}
	*ops_out = ops;
	*op_count_out = sh.op_count;
	return 0;

err_free:
	kvfree(ops);
	return ret;
}

/**
 * mi_cmd_resolve() - turn tensor offsets into kernel addresses
 * @ops: ops from mi_cmd_parse()
 * @op_count: number of ops
 * @bos: kernel mappings of the job's buffers
 */
void mi_cmd_resolve(struct mi_op *ops, u32 op_count,
		    const struct mi_bo_map *bos)
{
	u32 i, slot;

	for (i = 0; i < op_count; i++) {
		for (slot = 0; slot < MI_T_COUNT; slot++) {
			struct mi_tensor *t = &ops[i].t[slot];

			if (!(ops[i].tensor_mask & BIT(slot)))
				continue;
			t->data = bos[t->bo_index].vaddr + (uintptr_t)t->data;
		}
	}
}
