// SPDX-License-Identifier: MIT
/*
 * One quantized unit -> MIcs ops (lib/device/lower.c builds the job).
 *
 * Scales become the uapi's fixed point: a real factor r is M * 2^(S - 31)
 * with M in [2^30, 2^31) (qu_mult_shift), applied as
 * rshift_round(acc * M, 31 - S) + zp, i.e. rounding halves up where
 * QuantizeLinear rounds them to even: results differ from the float QDQ
 * graph by at most one step.  Per op:
 *  - Conv/Gemm: CONV2D / GEMM with the input and weight zero points, the
 *    int32 bias in units of sx * sw[oc] and M/S per output channel from
 *    the CPU kernels' fp32 multiplier mi_qmult(sx, sw[oc], sy) (MatMul:
 *    mi_qmult(sa, sb, sy)): its 24-bit mantissa makes M exact, so both
 *    round the same exact product acc * mult, halves up (multipliers
 *    below 2^-38 excepted: qu_mult_shift caps the shift); a fused
 *    Relu/Clip is the clamp.
 *  - Add: a_mult/b_mult = round(sa / sy * 2^k), round(sb / sy * 2^k),
 *    shift k as large as keeps both below 2^31 (at most 50).  Mul: one
 *    multiplier for sa * sb / sy the same way.
 *  - Relu/Clip and DQ -> Q: CLIP when input and output quantization are
 *    the same, else REQUANTIZE with the clamp.
 *  - MaxPool: MAXPOOL (then REQUANTIZE if the output's parameters
 *    differ; max commutes with a positive scale).
 *  - AveragePool/GlobalAveragePool: AVGPOOL directly when the parameters
 *    are equal (and padding is not counted or there is none), else via
 *    int16: REQUANTIZE to (x - zx) * 128, AVGPOOL (padding counts as 0,
 *    which is real zero there), REQUANTIZE to the output.
 *  - Concat: one COPY (same parameters) or REQUANTIZE per input into its
 *    slice of the output (a strided view).
 *  - Sigmoid, HardSwish, Tanh, ...: LUT with the 256 values computed by
 *    the graph's own reference op on every input value, then quantized as
 *    QuantizeLinear does.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "device/lower-impl.h"
#include "ops/ops.h"
#include "quant/quant-impl.h"

static bool same_q(const struct qu_act *a, const struct qu_act *b)
{
	return a->scale == b->scale && a->zp == b->zp && a->dtype == b->dtype;
}

static bool has_op(const struct lb *b, uint32_t op)
{
	return b->caps->op_mask & (1ull << op);
}

static int32_t dt_min(int dt)
{
	return dt == MI_DT_UINT8 ? 0 : dt == MI_DT_INT16 ? -32768 : -128;
}

static int32_t dt_max(int dt)
{
	return dt == MI_DT_UINT8 ? 255 : dt == MI_DT_INT16 ? 32767 : 127;
}

static int per_tensor_ms(struct lb *b, double r, int *mti, int *sti)
{
	int32_t m, s;
	int err = qu_mult_shift(r, &m, &s);

	if (err)
		return err;
	*mti = lb_const(b, &m, 4, DRM_METAINFER_DTYPE_INT32, DRM_METAINFER_LAYOUT_PLAIN, NULL);
	*sti = lb_const(b, &s, 4, DRM_METAINFER_DTYPE_INT32, DRM_METAINFER_LAYOUT_PLAIN, NULL);
	return *mti < 0 ? *mti : *sti < 0 ? *sti : 0;
}

/*
 * src viewed as dims in layout l -> dst's view (delta bytes in): x with
 * zero point zx, times r, plus zy, clamped to [lo, hi].  same: r is 1 and
 * the dtypes agree, so a COPY (full range) or CLIP does it where the
 * device has them; else REQUANTIZE (r = 1 is M = 2^30, S = 1: exact).
 */
static int emit_requant(struct lb *b, int src, int dst, uint32_t l, int nd,
			const int64_t *dims, uint64_t delta, int32_t zx,
			double r, int32_t zy, int32_t lo, int32_t hi, bool same,
			bool full_range)
{
	if (same && full_range && has_op(b, DRM_METAINFER_OP_COPY)) {
		struct drm_metainfer_op_copy op = { 0 };

		op.hdr.op = DRM_METAINFER_OP_COPY;
		op.hdr.size = sizeof(op);
		lb_desc(b, &op.input, src, l, nd, dims, 0);
		lb_desc(b, &op.output, dst, l, nd, dims, delta);
		return lb_emit(b, &op, sizeof(op));
	}
	if (same && has_op(b, DRM_METAINFER_OP_CLIP)) {
		struct drm_metainfer_op_clip op = { 0 };

		op.hdr.op = DRM_METAINFER_OP_CLIP;
		op.hdr.size = sizeof(op);
		op.min = lo;
		op.max = hi;
		lb_desc(b, &op.input, src, l, nd, dims, 0);
		lb_desc(b, &op.output, dst, l, nd, dims, delta);
		return lb_emit(b, &op, sizeof(op));
	}
	struct drm_metainfer_op_requantize op = { 0 };
	int mti, sti, err = per_tensor_ms(b, same ? 1.0 : r, &mti, &sti);

	if (err)
		return err;
	op.hdr.op = DRM_METAINFER_OP_REQUANTIZE;
	op.hdr.size = sizeof(op);
	op.input_zp = zx;
	op.axis = 0;
	op.rq.output_zp = zy;
	op.rq.act_min = lo;
	op.rq.act_max = hi;
	lb_desc(b, &op.input, src, l, nd, dims, 0);
	lb_desc(b, &op.output, dst, l, nd, dims, delta);
	lb_desc_own(b, &op.multiplier, mti);
	lb_desc_own(b, &op.shift, sti);
	return lb_emit(b, &op, sizeof(op));
}

/* int32 bias and M/S per output channel of a conv / gemm. */
static int conv_consts(struct lb *b, const struct qu_info *qi, int *bti,
		       int *mti, int *sti)
{
	const struct mi_tensor *bt = qi->bias >= 0 ? &b->g->tensors[qi->bias] : NULL;
	int64_t noc = qi->noc;
	int32_t *bias = calloc(noc, 4), *m = malloc(noc * 4), *s = malloc(noc * 4);
	int err = 0;

	if (!bias || !m || !s) {
		err = -ENOMEM;
		goto out;
	}
	for (int64_t o = 0; o < noc && !err; o++) {
		double sc = (double)qi->in[0].scale * qi->wscale[o];
		double v = 0;

		if (bt && qi->bscale) {
			int32_t bq = ((const int32_t *)bt->data)[o];

			v = fabs(qi->bscale[o] - sc) <= 1e-6 * sc ?
				    bq : nearbyint(bq * (double)qi->bscale[o] / sc);
		} else if (bt) {
			v = nearbyint(((const float *)bt->data)[o] / sc);
		}
		bias[o] = (int32_t)(v < -2147483648.0 ? -2147483648.0 :
				    v > 2147483647.0 ? 2147483647.0 : v);
		err = qu_mult_shift(mi_qmult(qi->in[0].scale, qi->wscale[o], qi->out.scale),
				    &m[o], &s[o]);
	}
	if (err)
		goto out;
	*bti = lb_const(b, bias, noc * 4, DRM_METAINFER_DTYPE_INT32, DRM_METAINFER_LAYOUT_PLAIN, NULL);
	*mti = lb_const(b, m, noc * 4, DRM_METAINFER_DTYPE_INT32, DRM_METAINFER_LAYOUT_PLAIN, NULL);
	*sti = lb_const(b, s, noc * 4, DRM_METAINFER_DTYPE_INT32, DRM_METAINFER_LAYOUT_PLAIN, NULL);
	err = *bti < 0 ? *bti : *mti < 0 ? *mti : *sti < 0 ? *sti : 0;
out:
	free(bias);
	free(m);
	free(s);
	return err;
}

static int lower_conv(struct lb *b, struct qu_info *qi)
{
	struct mi_graph *g = b->g;
	struct mi_node *n = qi->anchor;
	struct mi_tensor *x = mi_in(g, n, 0), *w = &g->tensors[qi->w];
	struct mi_tensor *y = mi_out(g, n, 0);
	struct drm_metainfer_op_conv2d op = { 0 };
	struct mi_spatial sp = { 0 };
	int64_t O = w->dims[0], IG = w->dims[1], KH = w->dims[2], KW = w->dims[3];
	int64_t group = mi_attr_int(n, "group", 1);
	struct lb_shape wsh = { 4, { O, IG, KH, KW } };
	int xi, wti, bti, mti, sti, yi, err;
	int32_t lo, hi;
	int8_t *wd;

	if (x->ndim != 4 || y->ndim != 4 || group < 1)
		return -EOPNOTSUPP;
	sp.kernel[0] = KH;
	sp.kernel[1] = KW;
	if (mi_ops_spatial(g, n, &sp, x, 0) || sp.out[0] != y->dims[2] ||
	    sp.out[1] != y->dims[3])
		return -EOPNOTSUPP;
	xi = lb_get(b, qi->in[0].t, b->cl);
	if (xi < 0)
		return xi;
	wd = malloc(O * IG * KH * KW);
	if (!wd)
		return -ENOMEM;
	const int8_t *ws = qi->wq;

	for (int64_t o = 0; o < O; o++)
		for (int64_t i = 0; i < IG; i++)
			for (int64_t h = 0; h < KH; h++)
				for (int64_t k = 0; k < KW; k++) {
					int64_t src = ((o * IG + i) * KH + h) * KW + k;
					int64_t dst = b->cl == DRM_METAINFER_LAYOUT_NHWC ?
						((o * KH + h) * KW + k) * IG + i : src;

					wd[dst] = ws[src];
				}
	wti = lb_const(b, wd, O * IG * KH * KW, DRM_METAINFER_DTYPE_INT8, b->cl, &wsh);
	free(wd);
	if (wti < 0)
		return wti;
	err = conv_consts(b, qi, &bti, &mti, &sti);
	if (err)
		return err;
	yi = lb_new_val(b, qi->out.t, b->cl, qi->out.dtype);
	if (yi < 0)
		return yi;
	qu_bounds(qi, &lo, &hi);
	op.hdr.op = DRM_METAINFER_OP_CONV2D;
	op.hdr.size = sizeof(op);
	op.hdr.flags = DRM_METAINFER_OP_F_BIAS | DRM_METAINFER_OP_F_REQUANT;
	op.stride_h = sp.stride[0];
	op.stride_w = sp.stride[1];
	op.dilation_h = sp.dil[0];
	op.dilation_w = sp.dil[1];
	op.pad_top = sp.pad_begin[0];
	op.pad_left = sp.pad_begin[1];
	op.pad_bottom = sp.pad_end[0];
	op.pad_right = sp.pad_end[1];
	op.groups = group;
	op.input_zp = qi->in[0].zp;
	op.weight_zp = qi->wzp;
	op.rq.output_zp = qi->out.zp;
	op.rq.act_min = lo;
	op.rq.act_max = hi;
	lb_desc_own(b, &op.input, xi);
	lb_desc_own(b, &op.weight, wti);
	lb_desc_own(b, &op.bias, bti);
	lb_desc_own(b, &op.output, yi);
	lb_desc_own(b, &op.multiplier, mti);
	lb_desc_own(b, &op.shift, sti);
	return lb_emit(b, &op, sizeof(op));
}

static int lower_gemm(struct lb *b, struct qu_info *qi)
{
	struct mi_graph *g = b->g;
	struct mi_node *n = qi->anchor;
	struct mi_tensor *a = &g->tensors[qi->in[0].t], *w = &g->tensors[qi->w];
	struct drm_metainfer_op_gemm op = { 0 };
	int64_t K = w->dims[qi->gemm_transb ? 1 : 0], N = qi->noc, M;
	struct lb_shape wsh = { 2, { w->dims[0], w->dims[1] } };
	int ai, wti, bti, mti, sti, yi, err;
	int32_t lo, hi;

	if (!strcmp(n->op_type, "Gemm") &&
	    (mi_attr_int(n, "transA", 0) || mi_attr_float(n, "alpha", 1.0f) != 1.0f ||
	     mi_attr_float(n, "beta", 1.0f) != 1.0f))
		return -EOPNOTSUPP;
	if (a->ndim < 1 || a->dims[a->ndim - 1] != K)
		return -EOPNOTSUPP;
	M = mi_tensor_numel(a) / K;
	ai = lb_get(b, qi->in[0].t, DRM_METAINFER_LAYOUT_NCHW);
	if (ai < 0)
		return ai;
	wti = lb_const(b, qi->wq, w->dims[0] * w->dims[1], DRM_METAINFER_DTYPE_INT8,
		       DRM_METAINFER_LAYOUT_PLAIN, &wsh);
	if (wti < 0)
		return wti;
	err = conv_consts(b, qi, &bti, &mti, &sti);
	if (err)
		return err;
	yi = lb_new_val(b, qi->out.t, DRM_METAINFER_LAYOUT_NCHW, qi->out.dtype);
	if (yi < 0)
		return yi;
	qu_bounds(qi, &lo, &hi);
	op.hdr.op = DRM_METAINFER_OP_GEMM;
	op.hdr.size = sizeof(op);
	op.hdr.flags = DRM_METAINFER_OP_F_BIAS | DRM_METAINFER_OP_F_REQUANT;
	op.a_zp = qi->in[0].zp;
	op.b_zp = qi->wzp;
	op.rq.output_zp = qi->out.zp;
	op.rq.act_min = lo;
	op.rq.act_max = hi;
	lb_desc_raw(b, &op.a, ai, DRM_METAINFER_LAYOUT_PLAIN, 2, (int64_t[]){ M, K },
		    (int64_t[]){ K, 1 }, 0);
	lb_desc_raw(b, &op.b, wti, DRM_METAINFER_LAYOUT_PLAIN, 2, (int64_t[]){ K, N },
		    qi->gemm_transb ? (int64_t[]){ 1, K } : (int64_t[]){ N, 1 }, 0);
	lb_desc_own(b, &op.bias, bti);
	lb_desc_raw(b, &op.output, yi, DRM_METAINFER_LAYOUT_PLAIN, 2, (int64_t[]){ M, N },
		    (int64_t[]){ N, 1 }, 0);
	lb_desc_own(b, &op.multiplier, mti);
	lb_desc_own(b, &op.shift, sti);
	return lb_emit(b, &op, sizeof(op));
}

/*
 * MatMul of two activations [..., M, K] x [..., K, N]: one GEMM per
 * matrix of the batch (an operand with a single matrix is reused), the
 * per-tensor factor sa * sb / sy.
 */
static int lower_matmul(struct lb *b, struct qu_info *qi)
{
	struct mi_graph *g = b->g;
	struct mi_tensor *at = &g->tensors[qi->in[0].t], *bt = &g->tensors[qi->in[1].t];
	struct mi_tensor *yt = &g->tensors[qi->out.t];
	int64_t M, K, N, ba, bb, by;
	int ai, bi, yi, mti, sti, err;
	int32_t lo, hi;

	if (at->ndim < 2 || bt->ndim < 2 || yt->ndim < 2)
		return -EOPNOTSUPP;
	M = at->dims[at->ndim - 2];
	K = at->dims[at->ndim - 1];
	N = bt->dims[bt->ndim - 1];
	if (bt->dims[bt->ndim - 2] != K)
		return -EOPNOTSUPP;
	ba = mi_tensor_numel(at) / (M * K);
	bb = mi_tensor_numel(bt) / (K * N);
	by = mi_tensor_numel(yt) / (M * N);
	if ((ba != by && ba != 1) || (bb != by && bb != 1) ||
	    (ba == by && bb == by && at->ndim != bt->ndim))
		return -EOPNOTSUPP;
	ai = lb_get(b, qi->in[0].t, DRM_METAINFER_LAYOUT_NCHW);
	bi = ai >= 0 ? lb_get(b, qi->in[1].t, DRM_METAINFER_LAYOUT_NCHW) : ai;
	if (bi < 0)
		return bi;
	err = per_tensor_ms(b, mi_qmult(qi->in[0].scale, qi->in[1].scale, qi->out.scale),
			    &mti, &sti);
	if (err)
		return err;
	yi = lb_new_val(b, qi->out.t, DRM_METAINFER_LAYOUT_NCHW, qi->out.dtype);
	if (yi < 0)
		return yi;
	qu_bounds(qi, &lo, &hi);
	for (int64_t i = 0; i < by; i++) {
		struct drm_metainfer_op_gemm op = { 0 };

		op.hdr.op = DRM_METAINFER_OP_GEMM;
		op.hdr.size = sizeof(op);
		op.hdr.flags = DRM_METAINFER_OP_F_REQUANT;
		op.a_zp = qi->in[0].zp;
		op.b_zp = qi->in[1].zp;
		op.rq.output_zp = qi->out.zp;
		op.rq.act_min = lo;
		op.rq.act_max = hi;
		lb_desc_raw(b, &op.a, ai, DRM_METAINFER_LAYOUT_PLAIN, 2, (int64_t[]){ M, K },
			    (int64_t[]){ K, 1 }, (ba == 1 ? 0 : i) * M * K);
		lb_desc_raw(b, &op.b, bi, DRM_METAINFER_LAYOUT_PLAIN, 2, (int64_t[]){ K, N },
			    (int64_t[]){ N, 1 }, (bb == 1 ? 0 : i) * K * N);
		lb_desc_raw(b, &op.output, yi, DRM_METAINFER_LAYOUT_PLAIN, 2, (int64_t[]){ M, N },
			    (int64_t[]){ N, 1 }, i * M * N);
		lb_desc_own(b, &op.multiplier, mti);
		lb_desc_own(b, &op.shift, sti);
		err = lb_emit(b, &op, sizeof(op));
		if (err)
			return err;
	}
	return 0;
}

/* Largest k <= 50 with r * 2^k < 2^31 (at least 0). */
static int64_t sh_numel(const struct lb_shape *sh)
{
	int64_t n = 1;

	for (int k = 0; k < sh->nd; k++)
		n *= sh->dims[k];
	return n;
}

static int fit_shift(double r)
{
	int k = 0;

	while (k < 50 && r * ldexp(1.0, k + 1) < 2147483647.0)
		k++;
	return k;
}

/*
 * Operand of an elementwise unit: its job tensor (a constant is uploaded
 * as stored, row-major).  An fp32 constant (its DQ folded) becomes int32
 * with zero point 0 at a scale fine enough that its rounding is far
 * below an output step: sy / 256 for Add, max|c| / 2^20 for Mul (so
 * that (a - za) * c * a_mult stays inside 64 bits).
 */
static int operand(struct lb *b, struct qu_act *a, const struct qu_info *qi,
		   const struct lb_shape *ysh, uint32_t *l)
{
	struct lb_shape sh;
	const struct mi_tensor *t = &b->g->tensors[a->t];
	int64_t n = mi_tensor_numel(t), ny = 1;
	int err, ti;

	if (!a->is_const)
		return lb_get_any(b, a->t, l);
	err = lb_gshape(b, a->t, &sh);
	if (err)
		return err;
	for (int k = 0; k < ysh->nd; k++)
		ny *= ysh->dims[k];
	*l = sh.nd == 4 ? DRM_METAINFER_LAYOUT_NCHW : DRM_METAINFER_LAYOUT_PLAIN;
	if (!a->f32 && n == 1 && ny > 1) {
		/* a scalar over the whole output: all strides 0 would read as
		 * dense, so it is stored expanded */
		uint8_t *e = malloc(ny);

		if (!e)
			return -ENOMEM;
		memset(e, *(const uint8_t *)t->data, ny);
		*l = ysh->nd == 4 ? DRM_METAINFER_LAYOUT_NCHW : DRM_METAINFER_LAYOUT_PLAIN;
		ti = lb_const(b, e, ny, qu_drm_dtype(t->dtype), *l, ysh);
		free(e);
		return ti;
	}
	if (!a->f32)
		return lb_const(b, t->data, n, qu_drm_dtype(t->dtype), *l, &sh);
	const float *c = t->data;
	int32_t *q = malloc(n * 4);
	float mx = 0;

	if (!q)
		return -ENOMEM;
	for (int64_t i = 0; i < n; i++)
		mx = fabsf(c[i]) > mx ? fabsf(c[i]) : mx;
	if (n == 1 && ny > 1) {
		/* expanded, as above */
		float c0 = c[0];

		free(q);
		q = malloc(ny * 4);
		if (!q)
			return -ENOMEM;
		a->scale = qi->kind == QU_ADD ? qi->out.scale / 256 : mx > 0 ? mx / 1048576.0f : 1;
		a->zp = 0;
		double v = nearbyint(c0 / (double)a->scale);

		for (int64_t i = 0; i < ny; i++)
			q[i] = (int32_t)v;
		*l = ysh->nd == 4 ? DRM_METAINFER_LAYOUT_NCHW : DRM_METAINFER_LAYOUT_PLAIN;
		ti = lb_const(b, q, ny * 4, DRM_METAINFER_DTYPE_INT32, *l, ysh);
		free(q);
		return ti;
	}
	a->scale = qi->kind == QU_ADD ? qi->out.scale / 256 : mx > 0 ? mx / 1048576.0f : 1;
	a->zp = 0;
	for (int64_t i = 0; i < n; i++) {
		double v = nearbyint(c[i] / (double)a->scale);

		if (!(fabs(v) < 2147483647.0)) {
			free(q);
			return -EOPNOTSUPP;
		}
		q[i] = (int32_t)v;
	}
	ti = lb_const(b, q, n * 4, DRM_METAINFER_DTYPE_INT32, *l, &sh);
	free(q);
	return ti;
}

static int lower_eltwise(struct lb *b, struct qu_info *qi)
{
	struct drm_metainfer_op_eltwise op = { 0 };
	struct lb_shape ysh;
	uint32_t l = DRM_METAINFER_LAYOUT_PLAIN, la, lbb;
	int ai, bi, yi, err, k;
	int32_t lo, hi;
	double ra, rb;

	err = lb_gshape(b, qi->out.t, &ysh);
	if (err)
		return err;
	ai = operand(b, &qi->in[0], qi, &ysh, &la);
	bi = ai >= 0 ? operand(b, &qi->in[1], qi, &ysh, &lbb) : ai;
	if (bi < 0)
		return bi;
	if (ysh.nd == 4)
		l = !qi->in[0].is_const && b->sh[ai].nd == 4 ? la :
		    !qi->in[1].is_const && b->sh[bi].nd == 4 ? lbb : b->cl;
	yi = lb_new_val(b, qi->out.t, l, qi->out.dtype);
	if (yi >= 0 && ysh.nd < 4 &&
	    (sh_numel(&b->sh[ai]) == 1 || sh_numel(&b->sh[bi]) == 1)) {
		/* a one-element activation broadcast over everything: a
		 * leading unit dimension gives its view a non-zero stride
		 * (all zero would read as dense) */
		memmove(ysh.dims + 1, ysh.dims, ysh.nd * sizeof(ysh.dims[0]));
		ysh.dims[0] = 1;
		ysh.nd++;
		if (ysh.nd == 4)
			l = DRM_METAINFER_LAYOUT_PLAIN;
	}
	if (yi < 0)
		return yi;
	qu_bounds(qi, &lo, &hi);
	op.hdr.size = sizeof(op);
	op.a_zp = qi->in[0].zp;
	op.b_zp = qi->in[1].zp;
	if (qi->kind == QU_ADD) {
		op.hdr.op = DRM_METAINFER_OP_ADD;
		ra = (double)qi->in[0].scale / qi->out.scale;
		rb = (double)qi->in[1].scale / qi->out.scale;
		k = fit_shift(ra > rb ? ra : rb);
		op.a_mult = (int32_t)llround(ldexp(ra, k));
		op.b_mult = (int32_t)llround(ldexp(rb, k));
	} else {
		op.hdr.op = DRM_METAINFER_OP_MUL;
		ra = (double)qi->in[0].scale * qi->in[1].scale / qi->out.scale;
		k = fit_shift(ra);
		op.a_mult = (int32_t)llround(ldexp(ra, k));
	}
	op.shift = k;
	op.rq.output_zp = qi->out.zp;
	op.rq.act_min = lo;
	op.rq.act_max = hi;
	lb_desc(b, &op.a, ai, l, ysh.nd, ysh.dims, 0);
	lb_desc(b, &op.b, bi, l, ysh.nd, ysh.dims, 0);
	lb_desc(b, &op.output, yi, l, ysh.nd, ysh.dims, 0);
	return lb_emit(b, &op, sizeof(op));
}

/* Relu / Clip between DQ and Q, and DQ -> Q. */
static int lower_requant(struct lb *b, struct qu_info *qi)
{
	struct lb_shape sh;
	uint32_t l;
	int xi, yi, err;
	int32_t lo, hi;

	err = lb_gshape(b, qi->out.t, &sh);
	if (err)
		return err;
	xi = lb_get_any(b, qi->in[0].t, &l);
	if (xi < 0)
		return xi;
	yi = lb_new_val(b, qi->out.t, l, qi->out.dtype);
	if (yi < 0)
		return yi;
	qu_bounds(qi, &lo, &hi);
	return emit_requant(b, xi, yi, l, sh.nd, sh.dims, 0, qi->in[0].zp,
			    (double)qi->in[0].scale / qi->out.scale, qi->out.zp,
			    lo, hi, same_q(&qi->in[0], &qi->out),
			    lo == dt_min(qi->out.dtype) && hi == dt_max(qi->out.dtype));
}

/* Window geometry of a pool node; pad_end grown to cover a ceil_mode
 * overhang (skipped positions, as ONNX does for MaxPool). */
static int pool_geom(struct lb *b, struct mi_node *n, struct mi_spatial *sp,
		     bool *grown)
{
	struct mi_graph *g = b->g;
	struct mi_tensor *x = mi_in(g, n, 0), *y = mi_out(g, n, 0);

	memset(sp, 0, sizeof(*sp));
	*grown = false;
	if (x->ndim != 4 || y->ndim != 4)
		return -EOPNOTSUPP;
	if (!strcmp(n->op_type, "GlobalAveragePool")) {
		sp->kernel[0] = x->dims[2];
		sp->kernel[1] = x->dims[3];
		sp->stride[0] = sp->stride[1] = 1;
		sp->dil[0] = sp->dil[1] = 1;
	} else {
		int cnt;
		const int64_t *ks = mi_attr_ints(n, "kernel_shape", &cnt);

		if (!ks || cnt != 2)
			return -EOPNOTSUPP;
		sp->kernel[0] = ks[0];
		sp->kernel[1] = ks[1];
		if (mi_ops_spatial(g, n, sp, x, 1))
			return -EOPNOTSUPP;
	}
	for (int i = 0; i < 2; i++) {
		int64_t need = (y->dims[2 + i] - 1) * sp->stride[i] + sp->kernel[i] -
			       x->dims[2 + i] - sp->pad_begin[i];

		if (sp->dil[i] != 1 || sp->kernel[i] > 65535)
			return -EOPNOTSUPP;
		if (need > sp->pad_end[i])
			*grown = true;
		if (need < 0)
			need = 0;
		sp->pad_end[i] = need;
		if (sp->pad_begin[i] >= sp->kernel[i] || sp->pad_end[i] >= sp->kernel[i])
			return -EOPNOTSUPP;
	}
	return 0;
}

static void pool_op(struct lb *b, struct drm_metainfer_op_pool *op, uint32_t kind,
		    const struct mi_spatial *sp, int src, int dst, bool count_pad)
{
	memset(op, 0, sizeof(*op));
	op->hdr.op = kind;
	op->hdr.size = sizeof(*op);
	op->hdr.flags = count_pad ? DRM_METAINFER_OP_F_COUNT_PAD : 0;
	op->kernel_h = sp->kernel[0];
	op->kernel_w = sp->kernel[1];
	op->stride_h = sp->stride[0];
	op->stride_w = sp->stride[1];
	op->pad_top = sp->pad_begin[0];
	op->pad_left = sp->pad_begin[1];
	op->pad_bottom = sp->pad_end[0];
	op->pad_right = sp->pad_end[1];
	lb_desc_own(b, &op->input, src);
	lb_desc_own(b, &op->output, dst);
}

static int lower_pool(struct lb *b, struct qu_info *qi)
{
	struct mi_node *n = qi->anchor;
	struct drm_metainfer_op_pool op;
	struct mi_spatial sp;
	struct lb_shape xsh, ysh;
	bool grown, max = qi->kind == QU_MAXPOOL, same = same_q(&qi->in[0], &qi->out);
	bool cip = !max && mi_attr_int(n, "count_include_pad", 0);
	bool pads, full;
	int xi, yi, ti, err;
	int32_t lo, hi;

	err = pool_geom(b, n, &sp, &grown);
	if (!err)
		err = lb_gshape(b, qi->in[0].t, &xsh);
	if (!err)
		err = lb_gshape(b, qi->out.t, &ysh);
	if (err)
		return err;
	pads = sp.pad_begin[0] || sp.pad_begin[1] || sp.pad_end[0] || sp.pad_end[1];
	if (cip && grown)
		return -EOPNOTSUPP;
	xi = lb_get(b, qi->in[0].t, b->cl);
	if (xi < 0)
		return xi;
	yi = lb_new_val(b, qi->out.t, b->cl, qi->out.dtype);
	if (yi < 0)
		return yi;
	qu_bounds(qi, &lo, &hi);
	full = lo == dt_min(qi->out.dtype) && hi == dt_max(qi->out.dtype);
	if (max || (same && (!cip || !pads))) {
		uint32_t kind = max ? DRM_METAINFER_OP_MAXPOOL : DRM_METAINFER_OP_AVGPOOL;

		if (same && full) {
			pool_op(b, &op, kind, &sp, xi, yi, false);
			return lb_emit(b, &op, sizeof(op));
		}
		ti = lb_temp(b, b->t[xi].dtype, b->cl, &ysh);
		if (ti < 0)
			return ti;
		pool_op(b, &op, kind, &sp, xi, ti, false);
		err = lb_emit(b, &op, sizeof(op));
		return err ? err : emit_requant(b, ti, yi, b->cl, 4, ysh.dims, 0,
						qi->in[0].zp,
						(double)qi->in[0].scale / qi->out.scale,
						qi->out.zp, lo, hi, same, full);
	}
	/* through int16 at 128 steps per input step */
	int t16a = lb_temp(b, DRM_METAINFER_DTYPE_INT16, b->cl, &xsh);
	int t16b = lb_temp(b, DRM_METAINFER_DTYPE_INT16, b->cl, &ysh);

	if (t16a < 0 || t16b < 0)
		return t16a < 0 ? t16a : t16b;
	err = emit_requant(b, xi, t16a, b->cl, 4, xsh.dims, 0, qi->in[0].zp, 128.0, 0,
			   -32768, 32767, false, false);
	if (err)
		return err;
	pool_op(b, &op, DRM_METAINFER_OP_AVGPOOL, &sp, t16a, t16b, cip);
	err = lb_emit(b, &op, sizeof(op));
	return err ? err : emit_requant(b, t16b, yi, b->cl, 4, ysh.dims, 0, 0,
					(double)qi->in[0].scale / (128.0 * qi->out.scale),
					qi->out.zp, lo, hi, false, false);
}

static int lower_concat(struct lb *b, struct qu_info *qi)
{
	struct mi_node *n = qi->anchor;
	struct lb_shape ysh, xsh;
	uint32_t l = DRM_METAINFER_LAYOUT_PLAIN, lx;
	int64_t axis = mi_attr_int(n, "axis", 0), off = 0;
	int yi, xi, err;
	int32_t lo, hi;
	bool full;

	err = lb_gshape(b, qi->out.t, &ysh);
	if (err)
		return err;
	if (axis < 0)
		axis += ysh.nd;
	if (axis < 0 || axis >= ysh.nd)
		return -EOPNOTSUPP;
	if (ysh.nd == 4) {
		xi = lb_get_any(b, qi->in[0].t, &lx);
		if (xi < 0)
			return xi;
		l = b->sh[xi].nd == 4 ? lx : b->cl;
	}
	yi = lb_new_val(b, qi->out.t, l, qi->out.dtype);
	if (yi < 0)
		return yi;
	qu_bounds(qi, &lo, &hi);
	full = lo == dt_min(qi->out.dtype) && hi == dt_max(qi->out.dtype);
	for (int i = 0; i < qi->nin; i++) {
		err = lb_gshape(b, qi->in[i].t, &xsh);
		if (err)
			return err;
		if (xsh.nd != ysh.nd)
			return -EOPNOTSUPP;
		xi = lb_get_any(b, qi->in[i].t, &lx);
		if (xi < 0)
			return xi;
		err = emit_requant(b, xi, yi, l, xsh.nd, xsh.dims,
				   (uint64_t)(off * lb_stride(b, yi, axis)),
				   qi->in[i].zp, (double)qi->in[i].scale / qi->out.scale,
				   qi->out.zp, lo, hi, same_q(&qi->in[i], &qi->out), full);
		if (err)
			return err;
		off += xsh.dims[axis];
	}
	return 0;
}

/*
 * The 256 outputs of the unit's float function: the anchor's own
 * reference op run on a 256-element tensor holding every dequantized
 * input value (its tensors are borrowed for the call and restored), the
 * fused clamp, then QuantizeLinear's rounding (rne(v / sy) + zy,
 * saturated).
 */
static int lut_table(struct lb *b, struct qu_info *qi, uint8_t table[256])
{
	struct mi_graph *g = b->g;
	struct mi_node *n = qi->anchor;
	struct mi_tensor *xt = mi_in(g, n, 0), *yt = mi_out(g, n, 0);
	struct mi_tensor xs = *xt, ys = *yt;
	float xin[256], yout[256];
	int32_t base = dt_min(qi->in[0].dtype), qmin = dt_min(qi->out.dtype);
	int32_t qmax = dt_max(qi->out.dtype);
	int err;

	if (!n->def || !n->def->run)
		return -EOPNOTSUPP;
	for (int i = 0; i < 256; i++)
		xin[i] = (float)(base + i - qi->in[0].zp) * qi->in[0].scale;
	xt->ndim = yt->ndim = 1;
	xt->dims[0] = yt->dims[0] = 256;
	xt->data = xin;
	yt->data = yout;
	xt->nbytes = yt->nbytes = sizeof(xin);
	xt->flags &= ~MI_TF_OWNS_DATA;
	yt->flags &= ~MI_TF_OWNS_DATA;
	err = n->def->run(g, n);
	*xt = xs;
	*yt = ys;
	if (err)
		return -EOPNOTSUPP;
	for (int i = 0; i < 256; i++) {
		float v = yout[i], q;

		v = v < qi->lo ? qi->lo : v > qi->hi ? qi->hi : v;
		q = nearbyintf(v / qi->out.scale) + (float)qi->out.zp;
		if (isnan(q))
			return -EOPNOTSUPP;
		q = q < qmin ? qmin : q > qmax ? qmax : q;
		table[i] = (uint8_t)(int8_t)(int32_t)q;
		if (qi->out.dtype == MI_DT_UINT8)
			table[i] = (uint8_t)(int32_t)q;
	}
	return 0;
}

static int lower_lut(struct lb *b, struct qu_info *qi)
{
	struct drm_metainfer_op_lut op = { 0 };
	struct lb_shape sh;
	uint8_t table[256];
	uint32_t l;
	int xi, yi, ti, err;

	err = lb_gshape(b, qi->out.t, &sh);
	if (!err)
		err = lut_table(b, qi, table);
	if (err)
		return err;
	xi = lb_get_any(b, qi->in[0].t, &l);
	if (xi < 0)
		return xi;
	yi = lb_new_val(b, qi->out.t, l, qi->out.dtype);
	if (yi < 0)
		return yi;
	ti = lb_const(b, table, 256, qu_drm_dtype(qi->out.dtype), DRM_METAINFER_LAYOUT_PLAIN,
		      NULL);
	if (ti < 0)
		return ti;
	op.hdr.op = DRM_METAINFER_OP_LUT;
	op.hdr.size = sizeof(op);
	lb_desc_own(b, &op.table, ti);
	lb_desc(b, &op.input, xi, l, sh.nd, sh.dims, 0);
	lb_desc(b, &op.output, yi, l, sh.nd, sh.dims, 0);
	return lb_emit(b, &op, sizeof(op));
}

int lb_unit(struct lb *b, const struct mi_qunit *u, struct qu_info *qi)
{
	switch (qi->kind) {
	case QU_CONV:
		return lower_conv(b, qi);
	case QU_GEMM:
		return lower_gemm(b, qi);
	case QU_MATMUL:
		return lower_matmul(b, qi);
	case QU_ADD:
	case QU_MUL:
		return lower_eltwise(b, qi);
	case QU_CLIP:
	case QU_REQUANT:
		return lower_requant(b, qi);
	case QU_MAXPOOL:
	case QU_AVGPOOL:
		return lower_pool(b, qi);
	case QU_CONCAT:
		return lower_concat(b, qi);
	case QU_LUT:
		return lower_lut(b, qi);
	}
	return -EOPNOTSUPP;
}
