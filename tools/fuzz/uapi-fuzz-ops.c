// SPDX-License-Identifier: GPL-2.0-only
/*
 * uapi-fuzz: command-stream generator.  Each op is built to fit the
 * submit's buffers and the device's advertised ops, dtypes and layouts
 * (small shapes: the sim computes them), then mutated now and then.
 */
#include <string.h>

#include "uapi-fuzz.h"

/* ---------------------------------------------------------------- tensors */

static uint32_t esize(uint32_t dtype)
{
	return dtype == DRM_METAINFER_DTYPE_INT32 ? 4 :
	       dtype == DRM_METAINFER_DTYPE_INT16 ? 2 : 1;
}

/* A dtype out of @allowed, mostly one the device advertises. */
static uint32_t pick_dtype(struct proc *p, uint32_t allowed)
{
	uint32_t ok = allowed & (uint32_t)p->dtype_mask, d;
	int tries;

	if (!ok || rare(p, 30))
		ok = allowed;
	for (tries = 0; tries < 16; tries++) {
		d = 1 + below(p, DRM_METAINFER_DTYPE_COUNT - 1);
		if (ok & (1u << d))
			return d;
	}
	return DRM_METAINFER_DTYPE_INT8;
}

#define ACT ((1u << DRM_METAINFER_DTYPE_INT8) | (1u << DRM_METAINFER_DTYPE_UINT8) | \
	     (1u << DRM_METAINFER_DTYPE_INT16))
#define WGT ((1u << DRM_METAINFER_DTYPE_INT8) | (1u << DRM_METAINFER_DTYPE_INT16))
#define ALL (ACT | (1u << DRM_METAINFER_DTYPE_INT32))
#define I32 (1u << DRM_METAINFER_DTYPE_INT32)
#define B8 ((1u << DRM_METAINFER_DTYPE_INT8) | (1u << DRM_METAINFER_DTYPE_UINT8))

static uint32_t pick_layout4(struct proc *p)
{
	uint32_t l = chance(p, 50) ? DRM_METAINFER_LAYOUT_NCHW :
				     DRM_METAINFER_LAYOUT_NHWC;

	if (!(p->layout_mask & (1u << l)) && !rare(p, 50))
		l = l == DRM_METAINFER_LAYOUT_NCHW ? DRM_METAINFER_LAYOUT_NHWC :
						     DRM_METAINFER_LAYOUT_NCHW;
	return l;
}

/*
 * A dense tensor of logical shape @ld (n, c, h, w for 4-D layouts, the
 * shape itself for PLAIN) placed in one of the buffers where it fits,
 * sometimes flush against the buffer's end.
 */
static struct drm_metainfer_tensor tensor(struct proc *p,
					  const struct bolist *bl,
					  uint32_t dtype, uint32_t layout,
					  uint32_t ndim, const uint32_t *ld)
{
	uint32_t shape[4], i, start;
	uint64_t bytes, off = 0, es = esize(dtype);
	uint32_t idx = 0;

	if (layout == DRM_METAINFER_LAYOUT_NHWC) {
		shape[0] = ld[0];
		shape[1] = ld[2];
		shape[2] = ld[3];
		shape[3] = ld[1];
	} else {
		memcpy(shape, ld, sizeof(shape));
	}
	bytes = mi_tensor_bytes(dtype, ndim, shape);
	start = below(p, bl->n ? bl->n : 1);
	for (i = 0; i < bl->n; i++) {
		uint32_t b = (start + i) % bl->n;
		uint64_t room;

		if (bl->size[b] < bytes)
			continue;
		idx = b;
		room = (bl->size[b] - bytes) / es;
		if (chance(p, 25))
			off = room * es;
		else
			off = (rnd(p) % (room + 1)) * es;
		break;
	}
	return mi_tensor(idx, dtype, layout, off, ndim, shape);
}

/* A random logical shape with small extents (the sim computes it). */
static void small_shape(struct proc *p, uint32_t ndim, uint32_t *ld,
			uint32_t max)
{
	uint32_t k;

	for (k = 0; k < 4; k++)
		ld[k] = k < ndim ? 1 + below(p, max) : 0;
}

static void mutate_tensor(struct proc *p, struct drm_metainfer_tensor *t,
			  const struct bolist *bl)
{
	uint32_t k = below(p, 4);
	uint64_t es = esize(t->dtype), span;

	switch (below(p, 11)) {
	case 0:
		t->dtype = below(p, DRM_METAINFER_DTYPE_COUNT + 1);
		break;
	case 1:
		t->layout = below(p, DRM_METAINFER_LAYOUT_COUNT + 1);
		break;
	case 2:
		t->ndim = below(p, 6);
		break;
	case 3:
		t->shape[k] = chance(p, 50) ? interesting32(p) : t->shape[k] + 1;
		break;
	case 4:
		t->stride[k] = chance(p, 50) ? interesting64(p) : t->shape[k];
		break;
	case 5: /* one element past, or just inside, the buffer's end */
		span = mi_tensor_bytes(t->dtype ? t->dtype : 1,
				       t->ndim < 5 ? t->ndim : 4, t->shape);
		if (t->bo_index < bl->n && bl->size[t->bo_index] >= span)
			t->offset = bl->size[t->bo_index] - span +
				    (chance(p, 50) ? es : 0);
		break;
	case 6:
		t->offset = chance(p, 50) ? interesting64(p) : t->offset + 1;
		break;
	case 7:
		t->bo_index = chance(p, 50) ? bl->n : interesting32(p);
		break;
	case 8:
		if (t->ndim < 4)
			t->shape[t->ndim] = 1;
		break;
	case 9:
		memset(t, 0, sizeof(*t));
		break;
	default: /* broadcast: stride 0 on one dimension */
		if (t->ndim) {
			uint32_t d, s = 1;

			for (d = t->ndim; d-- > 0;) {
				t->stride[d] = s;
				s *= t->shape[d];
			}
			t->stride[below(p, t->ndim)] = 0;
		}
		break;
	}
}

/* ---------------------------------------------------------------- ops */

union op {
	struct drm_metainfer_op_header hdr;
	struct drm_metainfer_op_conv2d conv;
	struct drm_metainfer_op_gemm gemm;
	struct drm_metainfer_op_eltwise elt;
	struct drm_metainfer_op_clip clip;
	struct drm_metainfer_op_pool pool;
	struct drm_metainfer_op_requantize rq;
	struct drm_metainfer_op_copy copy;
	struct drm_metainfer_op_lut lut;
};

static const size_t op_size[DRM_METAINFER_OP_COUNT] = {
	[DRM_METAINFER_OP_CONV2D] = sizeof(struct drm_metainfer_op_conv2d),
	[DRM_METAINFER_OP_GEMM] = sizeof(struct drm_metainfer_op_gemm),
	[DRM_METAINFER_OP_ADD] = sizeof(struct drm_metainfer_op_eltwise),
	[DRM_METAINFER_OP_MUL] = sizeof(struct drm_metainfer_op_eltwise),
	[DRM_METAINFER_OP_RELU] = sizeof(struct drm_metainfer_op_clip),
	[DRM_METAINFER_OP_CLIP] = sizeof(struct drm_metainfer_op_clip),
	[DRM_METAINFER_OP_MAXPOOL] = sizeof(struct drm_metainfer_op_pool),
	[DRM_METAINFER_OP_AVGPOOL] = sizeof(struct drm_metainfer_op_pool),
	[DRM_METAINFER_OP_REQUANTIZE] = sizeof(struct drm_metainfer_op_requantize),
	[DRM_METAINFER_OP_COPY] = sizeof(struct drm_metainfer_op_copy),
	[DRM_METAINFER_OP_LUT] = sizeof(struct drm_metainfer_op_lut),
};

static int32_t dmin(uint32_t d)
{
	return d == DRM_METAINFER_DTYPE_INT8 ? -128 :
	       d == DRM_METAINFER_DTYPE_UINT8 ? 0 :
	       d == DRM_METAINFER_DTYPE_INT16 ? -32768 : INT32_MIN;
}

static int32_t dmax(uint32_t d)
{
	return d == DRM_METAINFER_DTYPE_INT8 ? 127 :
	       d == DRM_METAINFER_DTYPE_UINT8 ? 255 :
	       d == DRM_METAINFER_DTYPE_INT16 ? 32767 : INT32_MAX;
}

static void clamp_pair(struct proc *p, uint32_t dtype,
		       struct drm_metainfer_requant *rq)
{
	rq->output_zp = (int32_t)below(p, 16) - 8;
	if (chance(p, 60)) {
		rq->act_min = INT32_MIN;
		rq->act_max = INT32_MAX;
	} else {
		int32_t lo = dmin(dtype), hi = dmax(dtype);

		rq->act_min = lo + (int32_t)below(p, 8);
		rq->act_max = hi - (int32_t)below(p, 8);
	}
}

static uint32_t logical_ndim(struct proc *p, uint32_t *layout)
{
	uint32_t ndim = 1 + below(p, 4);

	*layout = DRM_METAINFER_LAYOUT_PLAIN;
	if (ndim == 4 && chance(p, 70))
		*layout = pick_layout4(p);
	return ndim;
}

static size_t gen_unary(struct proc *p, union op *o, uint32_t opc,
			const struct bolist *bl,
			struct drm_metainfer_tensor **ts)
{
	uint32_t ld[4], layout, lout, ndim = logical_ndim(p, &layout);
	uint32_t din = pick_dtype(p, ALL), dout = din;

	lout = layout;
	small_shape(p, ndim, ld, 6);
	switch (opc) {
	case DRM_METAINFER_OP_COPY:
		if (layout != DRM_METAINFER_LAYOUT_PLAIN)
			lout = pick_layout4(p);
		o->copy.input = tensor(p, bl, din, layout, ndim, ld);
		o->copy.output = tensor(p, bl, dout, lout, ndim, ld);
		ts[0] = &o->copy.input;
		ts[1] = &o->copy.output;
		return sizeof(o->copy);
	case DRM_METAINFER_OP_RELU:
	case DRM_METAINFER_OP_CLIP:
		o->clip.min = dmin(din) + (int32_t)below(p, 4);
		o->clip.max = opc == DRM_METAINFER_OP_CLIP ?
				      dmax(din) - (int32_t)below(p, 4) : 0;
		o->clip.input = tensor(p, bl, din, layout, ndim, ld);
		o->clip.output = tensor(p, bl, dout, lout, ndim, ld);
		ts[0] = &o->clip.input;
		ts[1] = &o->clip.output;
		return sizeof(o->clip);
	case DRM_METAINFER_OP_LUT: {
		uint32_t n256 = 256;

		din = pick_dtype(p, B8);
		dout = pick_dtype(p, B8);
		o->lut.input = tensor(p, bl, din, layout, ndim, ld);
		o->lut.output = tensor(p, bl, dout, lout, ndim, ld);
		o->lut.table = tensor(p, bl, dout, DRM_METAINFER_LAYOUT_PLAIN,
				      1, &n256);
		ts[0] = &o->lut.input;
		ts[1] = &o->lut.output;
		ts[2] = &o->lut.table;
		return sizeof(o->lut);
	}
	default: /* REQUANTIZE */ {
		uint32_t axis = below(p, ndim), shape_ax, n1 = 1;

		dout = pick_dtype(p, ALL);
		o->rq.input_zp = (int32_t)below(p, 8);
		o->rq.axis = axis;
		clamp_pair(p, dout, &o->rq.rq);
		o->rq.input = tensor(p, bl, din, layout, ndim, ld);
		o->rq.output = tensor(p, bl, dout, lout, ndim, ld);
		shape_ax = o->rq.input.shape[axis];
		if (chance(p, 50))
			n1 = shape_ax;
		o->rq.multiplier = tensor(p, bl, DRM_METAINFER_DTYPE_INT32,
					  DRM_METAINFER_LAYOUT_PLAIN, 1, &n1);
		o->rq.shift = tensor(p, bl, DRM_METAINFER_DTYPE_INT32,
				     DRM_METAINFER_LAYOUT_PLAIN, 1, &n1);
		ts[0] = &o->rq.input;
		ts[1] = &o->rq.output;
		ts[2] = &o->rq.multiplier;
		ts[3] = &o->rq.shift;
		return sizeof(o->rq);
	}
	}
}

static size_t gen_eltwise(struct proc *p, union op *o, uint32_t opc,
			  const struct bolist *bl,
			  struct drm_metainfer_tensor **ts)
{
	uint32_t ld[4], layout, ndim = logical_ndim(p, &layout);
	uint32_t dout = pick_dtype(p, ALL);

	small_shape(p, ndim, ld, 6);
	o->elt.a_zp = (int32_t)below(p, 8);
	o->elt.b_zp = (int32_t)below(p, 8);
	o->elt.a_mult = (int32_t)below(p, 9) - 4;
	o->elt.b_mult = opc == DRM_METAINFER_OP_MUL ? 0 : (int32_t)below(p, 9) - 4;
	o->elt.shift = below(p, 63);
	clamp_pair(p, dout, &o->elt.rq);
	o->elt.a = tensor(p, bl, pick_dtype(p, ALL), layout, ndim, ld);
	o->elt.b = tensor(p, bl, pick_dtype(p, ALL), layout, ndim, ld);
	o->elt.output = tensor(p, bl, dout, layout, ndim, ld);
	ts[0] = &o->elt.a;
	ts[1] = &o->elt.b;
	ts[2] = &o->elt.output;
	return sizeof(o->elt);
}

static size_t gen_pool(struct proc *p, union op *o, uint32_t opc,
		       const struct bolist *bl,
		       struct drm_metainfer_tensor **ts)
{
	struct drm_metainfer_op_pool *q = &o->pool;
	uint32_t ld[4], lo[4], layout = pick_layout4(p);
	uint32_t dt = pick_dtype(p, ALL);

	small_shape(p, 4, ld, 6);
	ld[0] = 1 + below(p, 2);
	q->kernel_h = 1 + below(p, ld[2] < 3 ? ld[2] : 3);
	q->kernel_w = 1 + below(p, ld[3] < 3 ? ld[3] : 3);
	q->stride_h = 1 + below(p, 2);
	q->stride_w = 1 + below(p, 2);
	q->pad_top = below(p, q->kernel_h);
	q->pad_bottom = below(p, q->kernel_h);
	q->pad_left = below(p, q->kernel_w);
	q->pad_right = below(p, q->kernel_w);
	if (opc == DRM_METAINFER_OP_AVGPOOL && chance(p, 50))
		q->hdr.flags = DRM_METAINFER_OP_F_COUNT_PAD;
	lo[0] = ld[0];
	lo[1] = ld[1];
	lo[2] = (ld[2] + q->pad_top + q->pad_bottom - q->kernel_h) / q->stride_h + 1;
	lo[3] = (ld[3] + q->pad_left + q->pad_right - q->kernel_w) / q->stride_w + 1;
	q->input = tensor(p, bl, dt, layout, 4, ld);
	q->output = tensor(p, bl, dt, layout, 4, lo);
	ts[0] = &q->input;
	ts[1] = &q->output;
	return sizeof(*q);
}

/* Multiplier and shift vectors (1 or @n elements) and the rq clamp. */
static void gen_requant(struct proc *p, const struct bolist *bl, uint32_t n,
			uint32_t dout, struct drm_metainfer_requant *rq,
			struct drm_metainfer_tensor *mult,
			struct drm_metainfer_tensor *shift)
{
	uint32_t len = chance(p, 50) ? n : 1;

	clamp_pair(p, dout, rq);
	*mult = tensor(p, bl, DRM_METAINFER_DTYPE_INT32,
		       DRM_METAINFER_LAYOUT_PLAIN, 1, &len);
	*shift = tensor(p, bl, DRM_METAINFER_DTYPE_INT32,
			DRM_METAINFER_LAYOUT_PLAIN, 1, &len);
}

static size_t gen_gemm(struct proc *p, union op *o, const struct bolist *bl,
		       struct drm_metainfer_tensor **ts)
{
	struct drm_metainfer_op_gemm *g = &o->gemm;
	uint32_t m = 1 + below(p, 8), k = 1 + below(p, 8), n = 1 + below(p, 8);
	uint32_t sa[4] = { m, k }, sb[4] = { k, n }, so[4] = { m, n };
	uint32_t dout = DRM_METAINFER_DTYPE_INT32;
	bool requant = chance(p, 50);

	if (requant)
		dout = pick_dtype(p, ALL);
	g->a_zp = (int32_t)below(p, 4);
	g->b_zp = (int32_t)below(p, 4);
	g->a = tensor(p, bl, pick_dtype(p, ACT), 0, 2, sa);
	g->b = tensor(p, bl, pick_dtype(p, ACT), 0, 2, sb);
	g->output = tensor(p, bl, dout, 0, 2, so);
	ts[0] = &g->a;
	ts[1] = &g->b;
	ts[2] = &g->output;
	if (chance(p, 50)) {
		g->hdr.flags |= DRM_METAINFER_OP_F_BIAS;
		g->bias = tensor(p, bl, DRM_METAINFER_DTYPE_INT32, 0, 1, &n);
		ts[3] = &g->bias;
	}
	if (requant) {
		g->hdr.flags |= DRM_METAINFER_OP_F_REQUANT;
		gen_requant(p, bl, n, dout, &g->rq, &g->multiplier, &g->shift);
		ts[4] = &g->multiplier;
		ts[5] = &g->shift;
	}
	return sizeof(*g);
}

static size_t gen_conv(struct proc *p, union op *o, const struct bolist *bl,
		       struct drm_metainfer_tensor **ts)
{
	struct drm_metainfer_op_conv2d *c = &o->conv;
	uint32_t layout = pick_layout4(p), ld[4], lw[4], lo[4];
	uint32_t cin = 1 + below(p, 4), groups = 1, cout, kh, kw, eh, ew;
	uint32_t dout = DRM_METAINFER_DTYPE_INT32;
	bool requant = chance(p, 50);

	if (chance(p, 30)) { /* depthwise */
		groups = cin;
		cout = cin * (1 + below(p, 2));
	} else {
		cout = 1 + below(p, 4);
		if (cin % 2 == 0 && cout % 2 == 0 && chance(p, 30))
			groups = 2;
	}
	ld[0] = 1 + below(p, 2);
	ld[1] = cin;
	ld[2] = 1 + below(p, 6);
	ld[3] = 1 + below(p, 6);
	c->stride_h = 1 + below(p, 2);
	c->stride_w = 1 + below(p, 2);
	c->dilation_h = 1 + below(p, 2);
	c->dilation_w = 1 + below(p, 2);
	c->pad_top = below(p, 2);
	c->pad_bottom = below(p, 2);
	c->pad_left = below(p, 2);
	c->pad_right = below(p, 2);
	c->groups = groups;
	kh = 1 + below(p, 3);
	kw = 1 + below(p, 3);
	eh = c->dilation_h * (kh - 1) + 1;
	ew = c->dilation_w * (kw - 1) + 1;
	if (eh > ld[2] + c->pad_top + c->pad_bottom) {
		kh = 1;
		eh = 1;
	}
	if (ew > ld[3] + c->pad_left + c->pad_right) {
		kw = 1;
		ew = 1;
	}
	lw[0] = cout;
	lw[1] = cin / groups;
	lw[2] = kh;
	lw[3] = kw;
	lo[0] = ld[0];
	lo[1] = cout;
	lo[2] = (ld[2] + c->pad_top + c->pad_bottom - eh) / c->stride_h + 1;
	lo[3] = (ld[3] + c->pad_left + c->pad_right - ew) / c->stride_w + 1;
	if (requant)
		dout = pick_dtype(p, ALL);
	c->input_zp = (int32_t)below(p, 4);
	c->weight_zp = (int32_t)below(p, 4);
	c->input = tensor(p, bl, pick_dtype(p, ACT), layout, 4, ld);
	c->weight = tensor(p, bl, pick_dtype(p, WGT), layout, 4, lw);
	c->output = tensor(p, bl, dout, layout, 4, lo);
	ts[0] = &c->input;
	ts[1] = &c->weight;
	ts[2] = &c->output;
	if (chance(p, 50)) {
		c->hdr.flags |= DRM_METAINFER_OP_F_BIAS;
		c->bias = tensor(p, bl, DRM_METAINFER_DTYPE_INT32, 0, 1, &cout);
		ts[3] = &c->bias;
	}
	if (requant) {
		c->hdr.flags |= DRM_METAINFER_OP_F_REQUANT;
		gen_requant(p, bl, cout, dout, &c->rq, &c->multiplier, &c->shift);
		ts[4] = &c->multiplier;
		ts[5] = &c->shift;
	}
	return sizeof(*c);
}

void fuzz_gen_op(struct proc *p, struct mi_stream *s, const struct bolist *bl)
{
	struct drm_metainfer_tensor *ts[6] = { 0 };
	union op o;
	uint32_t opc;
	size_t size;
	int tries;

	memset(&o, 0, sizeof(o));
	for (tries = 0; tries < 8; tries++) {
		opc = 1 + below(p, DRM_METAINFER_OP_COUNT - 1);
		if ((p->op_mask & (1ull << opc)) || rare(p, 30))
			break;
	}
	o.hdr.op = opc;
	switch (opc) {
	case DRM_METAINFER_OP_CONV2D:
		size = gen_conv(p, &o, bl, ts);
		break;
	case DRM_METAINFER_OP_GEMM:
		size = gen_gemm(p, &o, bl, ts);
		break;
	case DRM_METAINFER_OP_ADD:
	case DRM_METAINFER_OP_MUL:
		size = gen_eltwise(p, &o, opc, bl, ts);
		break;
	case DRM_METAINFER_OP_MAXPOOL:
	case DRM_METAINFER_OP_AVGPOOL:
		size = gen_pool(p, &o, opc, bl, ts);
		break;
	default:
		size = gen_unary(p, &o, opc, bl, ts);
		break;
	}

	if (chance(p, 30)) {
		int n = 1 + (int)below(p, 2), i;

		for (i = 0; i < n; i++) {
			struct drm_metainfer_tensor *t = ts[below(p, 6)];
			uint32_t *words = (uint32_t *)&o;
			size_t nparam = (size - sizeof(o.hdr)) / 4;

			switch (below(p, 8)) {
			case 0:
			case 1:
			case 2:
			case 3:
			case 4:
				if (t)
					mutate_tensor(p, t, bl);
				break;
			case 5: /* a parameter word (before the tensors, mostly) */
				words[4 + below(p, nparam < 16 ? nparam : 16)] =
					interesting32(p);
				break;
			case 6:
				o.hdr.flags ^= 1u << below(p, 4);
				break;
			default:
				if (chance(p, 50))
					o.hdr.pad = 1;
				else
					o.hdr.op = below(p, DRM_METAINFER_OP_COUNT + 2);
				break;
			}
		}
	}
	if (rare(p, 20)) {
		/* a tensor broadcast over 2^30+ elements: aborted by the timeout */
		struct drm_metainfer_tensor *t = ts[0];

		if (t && t->ndim == 4 && opc == DRM_METAINFER_OP_COPY) {
			o.copy.output.shape[0] = o.copy.input.shape[0] = 1 << 15;
			o.copy.output.shape[1] = o.copy.input.shape[1] = 1 << 15;
			o.copy.input.stride[0] = o.copy.output.stride[0] = 0;
			o.copy.input.stride[1] = o.copy.output.stride[1] = 0;
			o.copy.input.stride[2] = o.copy.output.stride[2] = 0;
			o.copy.input.stride[3] = o.copy.output.stride[3] = 1;
		}
	}
	mi_stream_add(s, &o, size);
	if (o.hdr.op < DRM_METAINFER_OP_COUNT && op_size[o.hdr.op] &&
	    rare(p, 20)) /* a wrong op size */
		((struct drm_metainfer_op_header *)(s->buf + s->len - size))->size += 8;
}

