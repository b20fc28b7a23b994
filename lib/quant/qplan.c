// SPDX-License-Identifier: MIT
/*
 * Planner step for int8 execution (called first by mi_cpu_plan()).
 *
 * Rewrites, node by node:
 *   QLinearConv                                   -> int8 conv
 *   QLinearMatMul (constant int8 B)               -> int8 GEMM
 *   DQ(xq) -> Conv(DQ(wq), [DQ(bq) | b]) [-> Relu | Clip] [-> Q]
 *                                                 -> int8 conv
 *   DQ(xq) -> Gemm / MatMul(DQ(wq)) [-> Relu | Clip] [-> Q]
 *                                                 -> int8 GEMM
 *   DQ(xq) -> Sigmoid | HardSigmoid [-> Mul(DQ(xq), .)], DQ(xq) -> HardSwish
 *                                                 -> 256-entry table lookup
 *   (also Add, MaxPool and Concat of quantized tensors, below)
 * With a trailing Q the node requantizes straight to uint8/int8; without
 * one it writes fp32 (the DequantizeLinear of the accumulator fused in).
 * Relu/Clip become clamp bounds.  The fused node keeps its op_type, reads
 * the quantized activation directly (its only input) and writes the last
 * tensor of the chain; absorbed nodes are marked dead.  Anything that
 * does not match (int8 weights with a zero point, 1-D convs, per-axis
 * activations, ...) keeps running the reference QDQ ops.
 *
 * The int8 path agrees with the QLinear reference ops bit for bit; for QDQ
 * chains it equals the fp32 reference up to fp32 rounding of the
 * accumulation (one output step at most).
 */
#include <immintrin.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "debug.h"
#include "cpu/cpu.h"
#include "cpu/cpu_plan.h"
#include "cpu/nchwc.h"
#include "internal.h"
#include "quant/quant.h"
#include "quant/quant-impl.h"
#include "quant/qplan-impl.h"

struct qmove;

/* ---- node helpers -------------------------------------------------------- */

void qnode_free(struct qnode *q)
{
	if (!q)
		return;
	mi_qconv_fini(&q->cv);
	mi_qweights_free(&q->w);
	free(q->comp);
	free(q->mult);
	free(q->fbias);
	free(q->cat);
	free(q->cat_orig);
	qmove_free(q->mv);
	free(q->lut);
	free(q->lut8);
	free(q->lutb);
	if (q->sh && --q->sh->refs == 0) {
		free(q->sh->ws);
		free(q->sh);
	}
	free(q);
}

/* Undo the rewrite and free (mi_cpu_kernel_hdr.fini). */
void qnode_fini(struct mi_graph *g, struct mi_node *n)
{
	struct qnode *q = n->priv;

	if (q->qdq_phys)
		g->tensors[n->outputs[0]].phys_bytes = 0;
	if (q->mv)
		qmove_undo(g, n, q->mv);
	if (q->orig_ninputs) {
		n->ninputs = q->orig_ninputs;
		n->inputs[0] = q->orig_in0;
		if (q->orig_ninputs > 1)
			n->inputs[1] = q->orig_in1;
		if (q->cat_orig)
			memcpy(n->inputs, q->cat_orig, q->orig_ninputs * sizeof(int));
		n->outputs[0] = q->orig_out0;
	}
	if (q->orig_ninputs || q->mv) {
		for (int i = 0; i < q->nkilled; i++) {
			struct mi_node *k = &g->nodes[q->killed[i]];

			k->dead = false;
			for (int o = 0; o < k->noutputs; o++)
				if (k->outputs[o] >= 0)
					g->tensors[k->outputs[o]].producer = q->killed[i];
		}
	}
	qnode_free(q);
	n->priv = NULL;
}

bool qp_const_t(const struct mi_tensor *t)
{
	return t && (t->flags & MI_TF_CONST) && t->data;
}

static bool const_scalar(const struct mi_tensor *t)
{
	return qp_const_t(t) && mi_tensor_numel(t) == 1;
}

struct mi_node *qp_producer(struct mi_graph *g, int t, const char *op)
{
	int p = t >= 0 ? g->tensors[t].producer : -1;
	struct mi_node *n = p >= 0 ? &g->nodes[p] : NULL;

	if (!n || n->dead || strcmp(n->op_type, op) || n->domain[0])
		return NULL;
	return n;
}

/*
 * DequantizeLinear producing t: the live producer, or a DQ that constant
 * folding already ran (dead, its int8 inputs still there) when t is the
 * folded fp32 constant.
 */
static struct mi_node *find_dq(struct mi_graph *g, int t)
{
	struct mi_node *n = qp_producer(g, t, "DequantizeLinear");

	if (n || t < 0 || !(g->tensors[t].flags & MI_TF_CONST))
		return n;
	for (int i = 0; i < g->nnodes; i++) {
		struct mi_node *d = &g->nodes[i];

		if (d->dead && d->noutputs == 1 && d->outputs[0] == t &&
		    !strcmp(d->op_type, "DequantizeLinear") && !d->domain[0])
			return d;
	}
	return NULL;
}

/* Quantized activation: x u8/s8 with constant scalar scale/zp. */

bool qp_act_params(struct mi_graph *g, struct mi_node *n, int xi, int si, int zi,
		       struct qact *a)
{
	struct mi_tensor *x = mi_in(g, n, xi), *s = mi_in(g, n, si), *z = mi_in(g, n, zi);

	if (!x || (x->dtype != MI_DT_UINT8 && x->dtype != MI_DT_INT8) || !const_scalar(s) ||
	    s->dtype != MI_DT_FLOAT || (z && (!const_scalar(z) || z->dtype != x->dtype)))
		return false;
	a->t = n->inputs[xi];
	a->scale = *(const float *)s->data;
	a->zp = z ? (int32_t)mi_tensor_get_i64(z, 0) : 0;
	a->dtype = x->dtype;
	return a->scale > 0 && isfinite(a->scale);
}

/* Output quantization of a QuantizeLinear node (per tensor). */
bool qp_q_params(struct mi_graph *g, struct mi_node *q, struct qact *a)
{
	struct mi_tensor *s = mi_in(g, q, 1), *z = mi_in(g, q, 2);
	struct mi_tensor *y = mi_out(g, q, 0);

	if (!const_scalar(s) || s->dtype != MI_DT_FLOAT || (z && !const_scalar(z)) ||
	    (y->dtype != MI_DT_UINT8 && y->dtype != MI_DT_INT8))
		return false;
	a->t = q->outputs[0];
	a->scale = *(const float *)s->data;
	a->zp = z ? (int32_t)mi_tensor_get_i64(z, 0) : 0;
	a->dtype = y->dtype;
	return a->scale > 0 && isfinite(a->scale);
}

/* int8 weights with zero zero points, scales per `axis` (len noc) or per
 * tensor. */
struct qw {
	const int8_t *q;  /* weights as stored (int8) */
	int8_t *own;      /* recovered from folded fp32 weights, owned */
	float *scale;     /* [noc] */
};

static void qw_free(struct qw *w)
{
	free(w->own);
	free(w->scale);
}

/*
 * Constant folding may already have turned DQ(int8 w) into an fp32
 * constant (and freed the int8 data).  Such a tensor holds q * s[c]
 * exactly; with symmetric quantization max|q| of a channel is qmax (127,
 * or 63 for `quantize --weight-bits 7`), so s = max|w| / qmax and q = w / s
 * recover them.  Accept only when every value lands on an integer in
 * [-128, 127].  Channel c of element i: (i / inner) % noc.
 */
static bool recover_weights_one(const struct mi_tensor *wt, int64_t noc, int64_t inner,
				float qmax, struct qw *out);

/* Per channel first, then per tensor (scale broadcast to noc); 8-bit
 * weights first, then 7-bit. */
static bool recover_weights(const struct mi_tensor *wt, int64_t noc, int64_t inner,
			    struct qw *out)
{
	float *sc;

	if (recover_weights_one(wt, noc, inner, 127.0f, out) ||
	    recover_weights_one(wt, noc, inner, 63.0f, out))
		return true;
	if (!recover_weights_one(wt, 1, mi_tensor_numel(wt), 127.0f, out) &&
	    !recover_weights_one(wt, 1, mi_tensor_numel(wt), 63.0f, out))
		return false;
	sc = realloc(out->scale, noc * sizeof(float));
	if (!sc) {
		qw_free(out);
		return false;
	}
	for (int64_t c = 1; c < noc; c++)
		sc[c] = sc[0];
	out->scale = sc;
	return true;
}

static bool recover_weights_one(const struct mi_tensor *wt, int64_t noc, int64_t inner,
				float qmax, struct qw *out)
{
	int64_t n = mi_tensor_numel(wt);
	const float *w = wt->data;

	if (!qp_const_t(wt) || wt->dtype != MI_DT_FLOAT || n <= 0 || noc <= 0)
		return false;
	out->scale = calloc(noc, sizeof(float));
	out->own = malloc(n);
	if (!out->scale || !out->own)
		goto fail;
	int64_t outer = n / (noc * inner);

	for (int64_t o = 0, i = 0; o < outer; o++)
		for (int64_t c = 0; c < noc; c++) {
			float m = out->scale[c];

			for (int64_t k = 0; k < inner; k++, i++) {
				float a = fabsf(w[i]);

				if (!isfinite(a))
					goto fail;
				m = a > m ? a : m;
			}
			out->scale[c] = m;
		}
	for (int64_t c = 0; c < noc; c++)
		out->scale[c] = out->scale[c] > 0 ? out->scale[c] / qmax : 1.0f;
	for (int64_t o = 0, i = 0; o < outer; o++)
		for (int64_t c = 0; c < noc; c++) {
			float sc = out->scale[c];

			for (int64_t k = 0; k < inner; k++, i++) {
				float v = w[i] / sc, r = nearbyintf(v);

				if (fabsf(v - r) > 1e-3f || r < -128 || r > 127)
					goto fail;
				out->own[i] = (int8_t)r;
			}
		}
	out->q = out->own;
	return true;
fail:
	qw_free(out);
	memset(out, 0, sizeof(*out));
	return false;
}

static bool weight_params(struct mi_graph *g, const struct mi_tensor *w,
			  const struct mi_tensor *s, const struct mi_tensor *z, int axis,
			  int axis_attr, int64_t noc, struct qw *out)
{
	int64_t ns;

	if (!qp_const_t(w) || w->dtype != MI_DT_INT8 || !qp_const_t(s) || s->dtype != MI_DT_FLOAT ||
	    (z && !qp_const_t(z)))
		return false;
	ns = mi_tensor_numel(s);
	if (ns != 1 && (ns != noc || axis_attr != axis))
		return false;
	if (z) {
		if (!qp_const_t(z) || mi_tensor_numel(z) != ns)
			return false;
		for (int64_t i = 0; i < ns; i++)
			if (mi_tensor_get_i64(z, i))
				return false;
	}
	out->q = w->data;
	out->scale = malloc(noc * sizeof(float));
	if (!out->scale)
		return false;
	for (int64_t o = 0; o < noc; o++) {
		out->scale[o] = ((const float *)s->data)[ns == 1 ? 0 : o];
		if (!(out->scale[o] > 0) || !isfinite(out->scale[o])) {
			free(out->scale);
			return false;
		}
	}
	return true;
}

void qp_follow_chain(struct mi_graph *g, int t, struct chain *c)
{
	int ci;

	memset(c, 0, sizeof(*c));
	c->out = t;
	c->lo = -INFINITY;
	c->hi = INFINITY;
	ci = mi_graph_sole_consumer(g, t);
	if (ci >= 0) {
		struct mi_node *a = &g->nodes[ci];

		if (!strcmp(a->op_type, "Relu") && !a->domain[0]) {
			c->act = a;
			c->lo = 0;
		} else if (!strcmp(a->op_type, "Clip") && !a->domain[0] && a->inputs[0] == t) {
			struct mi_tensor *mn = mi_in(g, a, 1), *mx = mi_in(g, a, 2);

			if ((!mn || (const_scalar(mn) && mn->dtype == MI_DT_FLOAT)) &&
			    (!mx || (const_scalar(mx) && mx->dtype == MI_DT_FLOAT))) {
				c->act = a;
				c->lo = mn ? *(const float *)mn->data :
					     mi_attr_float(a, "min", -INFINITY);
				c->hi = mx ? *(const float *)mx->data :
					     mi_attr_float(a, "max", INFINITY);
			}
		}
		if (c->act) {
			c->out = c->act->outputs[0];
			ci = mi_graph_sole_consumer(g, c->out);
		}
	}
	if (ci >= 0) {
		struct mi_node *q = &g->nodes[ci];

		if (!strcmp(q->op_type, "QuantizeLinear") && !q->domain[0] && q->inputs[0] == c->out &&
		    qp_q_params(g, q, &c->y)) {
			c->q = q;
			c->out = q->outputs[0];
		}
	}
}

/* Quantize a float clamp bound v to the output's integer range. */
static int32_t qbound(float v, const struct qact *y, int32_t qmin, int32_t qmax)
{
	if (isinf(v))
		return v < 0 ? qmin : qmax;
	float r = nearbyintf(v / y->scale) + (float)y->zp;

	return r < qmin ? qmin : r > qmax ? qmax : (int32_t)r;
}

/* Fill comp/mult/fbias/epilogue.  bias_i: int32 biases in units of
 * sx*sw (or NULL), bias_f: float biases (or NULL). */
static int setup_epi(struct qnode *q, int64_t noc, const float *sw, float sx,
		     const int32_t *wsum, const int32_t *bias_i, const float *bias_f,
		     const struct chain *c)
{
	q->comp = malloc(noc * sizeof(int32_t));
	q->mult = malloc(noc * sizeof(float));
	q->fbias = calloc(noc, sizeof(float));
	if (!q->comp || !q->mult || !q->fbias)
		return -ENOMEM;
	int zxu = q->x_signed ? q->zx + 128 : q->zx;

	for (int64_t o = 0; o < noc; o++) {
		int32_t b = 0;

		if (c->q) {
			if (bias_i) {
				b = bias_i[o];
			} else if (bias_f) {
				double v = nearbyint(bias_f[o] / (double)(sx * sw[o]));

				b = (int32_t)(v < -2e9 ? -2e9 : v > 2e9 ? 2e9 : v);
			}
			q->mult[o] = mi_qmult(sx, sw[o], c->y.scale);
		} else {
			q->mult[o] = sx * sw[o];
			q->fbias[o] = bias_f ? bias_f[o] :
				      bias_i ? (float)bias_i[o] * (sx * sw[o]) : 0.0f;
		}
		q->comp[o] = b - zxu * wsum[o];
	}
	q->ep.comp = q->comp;
	q->ep.mult = q->mult;
	if (c->q) {
		int32_t qmin = c->y.dtype == MI_DT_UINT8 ? 0 : -128;
		int32_t qmax = c->y.dtype == MI_DT_UINT8 ? 255 : 127;
		int32_t lo = qbound(c->lo, &c->y, qmin, qmax);
		int32_t hi = qbound(c->hi, &c->y, qmin, qmax);

		q->ep.mode = c->y.dtype == MI_DT_UINT8 ? MI_QOUT_U8 : MI_QOUT_S8;
		q->ep.zy = c->y.zp;
		q->ep.flo = (float)(lo - c->y.zp);
		q->ep.fhi = (float)(hi - c->y.zp);
	} else {
		q->ep.mode = MI_QOUT_F32;
		q->ep.fbias = q->fbias;
		q->ep.flo = c->lo;
		q->ep.fhi = c->hi;
	}
	return 0;
}

/* ---- run ---------------------------------------------------------------- */

/* Below this many multiply-adds a node runs on one thread: waking the
 * pool costs more than the work (a few microseconds each). */
#define QPAR_MIN_MACS (1 << 21)

/*
 * An int8 conv's planar fp32 output ([c][hw]) into the NCHWc blocked
 * layout ([ceil(c / b)][hw][b], pad lanes 0) for the fp32 kernels that
 * read it: pixels [p0, p1), a block of channels at a time by SSE 4x4
 * transposes (pure moves: the values do not change).
 */
struct blk_job {
	const float *x;
	float *y;
	int64_t c, hw;
	int b;
	const float *r;          /* a fused residual Add's operand (or NULL) */
	const struct mi_qepi *ep; /* ... its order and act */
};

/* y = act(y + r) or act(r + y) (the NCHWc Add's float operations, as
 * blk8_store_res in qgemm.c) on n floats, pad lanes too */
static void res_add_range(const struct mi_qepi *ep, const float *r, float *y, int64_t n)
{
	for (int64_t i = 0; i < n; i++) {
		float v = ep->res_first ? r[i] + y[i] : y[i] + r[i];

		if (ep->res_act == MI_QRES_RELU)
			v = v > 0.0f ? v : 0.0f;
		else if (ep->res_act == MI_QRES_CLIP) {
			v = v > ep->res_lo ? v : ep->res_lo;
			v = v < ep->res_hi ? v : ep->res_hi;
		}
		y[i] = v;
	}
}

static void blk_range(void *arg, int64_t p0, int64_t p1)
{
	const struct blk_job *j = arg;
	const int64_t hw = j->hw, nb = (j->c + j->b - 1) / j->b;
	const int b = j->b;

	for (int64_t cb = 0; cb < nb; cb++) {
		const float *s = j->x + cb * b * hw;
		float *d = j->y + cb * hw * b;
		int64_t p = p0;

#ifdef __SSE2__
		/* whole blocks: 4 pixels x b channels (full cache lines) a step */
		for (; (cb + 1) * b <= j->c && p + 4 <= p1; p += 4)
			for (int g = 0; g < b; g += 4) {
				const float *r = s + g * hw + p;
				__m128 r0 = _mm_loadu_ps(r), r1 = _mm_loadu_ps(r + hw);
				__m128 r2 = _mm_loadu_ps(r + 2 * hw), r3 = _mm_loadu_ps(r + 3 * hw);

				_MM_TRANSPOSE4_PS(r0, r1, r2, r3);
				_mm_storeu_ps(d + p * b + g, r0);
				_mm_storeu_ps(d + (p + 1) * b + g, r1);
				_mm_storeu_ps(d + (p + 2) * b + g, r2);
				_mm_storeu_ps(d + (p + 3) * b + g, r3);
			}
#endif
		for (; p < p1; p++)
			for (int l = 0; l < b; l++)
				d[p * b + l] = cb * b + l < j->c ? s[l * hw + p] : 0.0f;
		if (j->r)
			res_add_range(j->ep, j->r + (cb * hw + p0) * b, d + p0 * b, (p1 - p0) * b);
	}
}

static int conv_run(struct mi_graph *g, struct mi_node *n)
{
	struct qnode *q = n->priv;
	struct mi_tensor *x = mi_in(g, n, 0), *y = mi_out(g, n, 0);
	const struct mi_qconv_shape *s = &q->cv.s;
	int64_t macs = (int64_t)s->oc * s->oh * s->ow * (s->c / s->group) * s->kh * s->kw;

	/* A depthwise multiply-add costs ~30x a dense one (one channel per
	 * vector, latency-bound): count it 16x, or its nodes of 0.05-0.1 ms
	 * all stay on one thread. */
	/* a dense conv that reorders its input first runs two pool dispatches:
	 * it splits from twice the work */
	bool prep = !q->cv.depthwise && !(q->in_c4 && q->cv.direct1x1 && !q->x_signed);
	int64_t work = q->cv.depthwise ? macs * 16 : prep ? macs / 2 : macs;

	/* a dense conv on up to 4 pixels (the squeeze-excitation FCs) is a
	 * GEMV streaming its weights once: split from 32K multiply-adds
	 * (EfficientNet-B0's 48 -> 1152 FCs, 55K: half the time at 2 threads) */
	if (!q->cv.depthwise && (int64_t)s->oh * s->ow <= 4)
		work *= 64;

	/* a dense conv on a map of 512+ pixels splits in pixel ranges (16+
	 * panels), like the depthwise convs and tables around it: each
	 * core reads the pixels it wrote, so it pays from a quarter of that */
	int64_t lim = !q->cv.depthwise && (int64_t)s->oh * s->ow >= 512 ? QPAR_MIN_MACS / 4
									: QPAR_MIN_MACS;

	qp_cur_threads = work < lim ? 1 : q->nthreads;
	mi_quant_set_call_threads(qp_cur_threads);
	size_t xs = (size_t)s->c * s->h * s->w;
	size_t ys = (size_t)s->oc * s->oh * s->ow * (q->ep.mode >= MI_QOUT_S32 ? 4 : 1);
	int64_t nb = x->dims[0];

	if (q->out_b) /* blocked fp32: [ceil(oc / B)][oh * ow][B] per image */
		ys = (size_t)(s->oc + q->out_b - 1) / q->out_b * q->out_b * s->oh * s->ow * 4;
	for (int64_t b = 0; b < nb; b++) {
		uint8_t *yb = (uint8_t *)y->data + b * ys;
		float *pl = (float *)((uint8_t *)q->sh->ws + q->blk_off);
		unsigned int fl = (q->in_c4 ? MI_QCONV_IN_C4 : 0) | (q->chan ? MI_QCONV_CHAN : 0);
		const uint8_t *xb = (const uint8_t *)x->data + b * xs;
		int err = -EOPNOTSUPP;

		/* blocked by 8: straight from the tile epilogues where the
		 * kernel can (no planar floats through memory), else planar
		 * into the workspace and transposed */
		const float *rb = q->res_in ? (const float *)mi_in(g, n, q->res_in)->data +
						      b * (ys / sizeof(float)) : NULL;

		if (q->out_b == 8) {
			q->ep.res = rb;
			err = mi_qconv_run(&q->cv, xb, q->x_signed, q->zx, &q->ep, yb, q->sh->ws,
					   fl | MI_QCONV_OUT_BLK8);
			q->ep.res = NULL;
			if (!err)
				continue;
		}
		if (err == -EOPNOTSUPP)
			err = mi_qconv_run(&q->cv, xb, q->x_signed, q->zx, &q->ep,
					   q->out_b ? (void *)pl : yb, q->sh->ws, fl);
		if (err)
			return mi_graph_err(g, n, err, "int8 conv failed");
		if (q->out_b) {
			struct blk_job j = { pl, (float *)yb, s->oc, (int64_t)s->oh * s->ow, q->out_b,
					     rb, &q->ep };

			/* ranges of ~16K floats, as the standalone DQ */
			qp_par_range(q->nthreads, j.hw, (16 << 10) / s->oc + 1, blk_range, &j);
		}
	}
	return 0;
}

static int gemm_run(struct mi_graph *g, struct mi_node *n)
{
	struct qnode *q = n->priv;
	struct mi_tensor *x = mi_in(g, n, 0), *y = mi_out(g, n, 0);
	int64_t m = mi_tensor_numel(x) / q->k;

	if (m == 0) /* empty batch: nothing to write */
		return 0;
	/* a few rows (a classifier on one image) run as GEMVs that stream the
	 * weights once, memory-bound: worth splitting from 128K weights */
	int64_t work = m * q->k * q->w.ocg * (m <= 4 ? 16 : 1);

	qp_cur_threads = work < QPAR_MIN_MACS ? 1 : q->nthreads;
	int err = mi_qgemm(&q->w, x->data, (int)m, (int)q->k, &q->ep, y->data, q->w.ocg,
			   q->sh->ws);

	return err ? mi_graph_err(g, n, err, "int8 gemm failed") : 0;
}

/* ---- matching ------------------------------------------------------------- */

struct wget_ctx {
	const int8_t *w;
	int64_t ocg, kg;
	bool transposed; /* w is [k][n] (MatMul, Gemm transB=0) */
	int64_t n;
};

static int wget_conv(const void *vctx, int g, int o, int k)
{
	const struct wget_ctx *c = vctx;

	return c->w[((int64_t)g * c->ocg + o) * c->kg + k];
}

static int wget_gemm(const void *vctx, int g, int o, int k)
{
	const struct wget_ctx *c = vctx;

	return c->transposed ? c->w[(int64_t)k * c->n + o] : c->w[(int64_t)o * c->kg + k];
}

struct qnode *qnode_new(int (*run)(struct mi_graph *, struct mi_node *))
{
	struct qnode *q = calloc(1, sizeof(*q));

	if (q) {
		q->hdr.run = run;
		q->hdr.fini = qnode_fini;
		q->hdr.lops = &qnode_lops;
		q->nthreads = qp_pool_threads;
	}
	return q;
}

/* A standalone Q / DQ (or float-output table) on a 4-D tensor t: its shape. */
void qdq_dims(struct qnode *q, const struct mi_tensor *t)
{
	if (t->ndim == 4 && mi_tensor_shape_known(t) && t->dims[0] > 0 && t->dims[1] > 0 &&
	    t->dims[2] * t->dims[3] > 0) {
		q->qdq_n = t->dims[0];
		q->qdq_c = t->dims[1];
		q->qdq_hw = t->dims[2] * t->dims[3];
	}
}

/* ... one whose sides may take the C4 / blocked layouts (qdq_item). */
bool qdq_like(const struct qnode *q)
{
	return q->qdq_c && (q->hdr.run == qdq_run || (q->hdr.run == qlut_run && !q->lut8));
}

/* Conv geometry (2-D only) into a kernel shape. */
static bool conv_shape(struct mi_graph *g, struct mi_node *n, int xi, int wi,
		       struct mi_qconv_shape *s)
{
	struct mi_spatial sp;
	int64_t oc, group;
	struct mi_tensor *x = mi_in(g, n, xi);
	int err;

	if (!x || x->ndim != 4 || !mi_tensor_shape_known(x))
		return false;
	/* geometry helper wants int8/uint8 inputs: check dtypes ourselves */
	memset(&sp, 0, sizeof(sp));
	struct mi_tensor *w = mi_in(g, n, wi);

	if (!w || w->ndim != 4)
		return false;
	int sv_x = x->dtype, sv_w = w->dtype;

	x->dtype = MI_DT_UINT8;
	w->dtype = MI_DT_INT8;
	err = mi_qconv_geometry(g, n, xi, wi, &sp, &oc, &group);
	x->dtype = sv_x;
	w->dtype = sv_w;
	g->err[0] = 0;
	if (err || sp.nsp != 2)
		return false;
	*s = (struct mi_qconv_shape){
		.c = (int)x->dims[1], .h = (int)x->dims[2], .w = (int)x->dims[3],
		.oc = (int)oc, .oh = (int)sp.out[0], .ow = (int)sp.out[1],
		.kh = (int)sp.kernel[0], .kw = (int)sp.kernel[1],
		.sh = (int)sp.stride[0], .sw = (int)sp.stride[1],
		.dh = (int)sp.dil[0], .dw = (int)sp.dil[1],
		.pt = (int)sp.pad_begin[0], .pl = (int)sp.pad_begin[1],
		.pb = (int)sp.pad_end[0], .pr = (int)sp.pad_end[1],
		.group = (int)group,
	};
	return true;
}

int64_t qp_shared_need;

static int plan_conv(struct mi_graph *g, struct mi_node *n, const struct qact *xa,
		     const struct qw *w, const struct mi_qconv_shape *s, const int32_t *bias_i,
		     const float *bias_f, const struct chain *c)
{
	struct qnode *q = qnode_new(conv_run);
	struct wget_ctx wc = { w->q, s->oc / s->group,
			       (int64_t)(s->c / s->group) * s->kh * s->kw, false, 0 };
	int err;

	if (!q)
		return -ENOMEM;
	q->is_conv = true;
	q->x_signed = xa->dtype == MI_DT_INT8;
	q->zx = xa->zp;
	err = mi_qconv_init(&q->cv, s, wget_conv, &wc);
	if (!err)
		err = setup_epi(q, s->oc, w->scale, xa->scale,
				q->cv.depthwise ? q->cv.wsum_dw : q->cv.w.wsum, bias_i, bias_f, c);
	if (err) {
		qnode_free(q);
		return err;
	}
	size_t need = mi_qconv_workspace(&q->cv);

	if ((int64_t)need > qp_shared_need)
		qp_shared_need = need;
	n->priv = q;
	return 0;
}

static int plan_gemm(struct mi_graph *g, struct mi_node *n, const struct qact *xa,
		     const struct qw *w, int64_t k, int64_t noc, bool transposed,
		     int64_t m, const int32_t *bias_i, const float *bias_f,
		     const struct chain *c)
{
	struct qnode *q = qnode_new(gemm_run);
	struct wget_ctx wc = { w->q, noc, k, transposed, noc };
	int err;

	if (!q)
		return -ENOMEM;
	if (k > INT32_MAX / 2 || noc > INT32_MAX / 2 || m > INT32_MAX / 2) {
		free(q);
		return 0;
	}
	q->x_signed = false;
	q->zx = xa->zp;
	q->k = k;
	err = mi_qweights_pack(&q->w, 1, (int)noc, (int)k, wget_gemm, &wc);
	if (!err)
		err = setup_epi(q, noc, w->scale, xa->scale, q->w.wsum, bias_i, bias_f, c);
	if (err) {
		qnode_free(q);
		return err;
	}
	size_t need = mi_qgemm_workspace(&q->w, (int)m);

	if ((int64_t)need > qp_shared_need)
		qp_shared_need = need;
	n->priv = q;
	return 0;
}

/* Bias of a QDQ node: DQ(int32) or fp32 constant, noc values. */
static bool read_bias(struct mi_graph *g, int t, int64_t noc, float **bf)
{
	struct mi_tensor *b = t >= 0 ? &g->tensors[t] : NULL;
	struct mi_node *dq;

	*bf = NULL;
	if (!b)
		return true;
	if (qp_const_t(b) && b->dtype == MI_DT_FLOAT && mi_tensor_numel(b) == noc) {
		*bf = malloc(noc * sizeof(float));
		if (*bf)
			memcpy(*bf, b->data, noc * sizeof(float));
		return *bf != NULL;
	}
	dq = qp_producer(g, t, "DequantizeLinear");
	if (!dq)
		return false;
	struct mi_tensor *bq = mi_in(g, dq, 0), *bs = mi_in(g, dq, 1), *bz = mi_in(g, dq, 2);

	if (!qp_const_t(bq) || bq->dtype != MI_DT_INT32 || mi_tensor_numel(bq) != noc ||
	    !qp_const_t(bs) || (bz && !qp_const_t(bz)))
		return false;
	int64_t ns = mi_tensor_numel(bs);

	if (ns != 1 && ns != noc)
		return false;
	*bf = malloc(noc * sizeof(float));
	if (!*bf)
		return false;
	for (int64_t o = 0; o < noc; o++) {
		int64_t zp = bz ? mi_tensor_get_i64(bz, bz && mi_tensor_numel(bz) == noc ? o : 0) : 0;

		(*bf)[o] = (float)(((const int32_t *)bq->data)[o] - zp) *
			   ((const float *)bs->data)[ns == 1 ? 0 : o];
	}
	return true;
}

void qp_kill(struct mi_graph *g, struct qnode *q, struct mi_node *p)
{
	p->dead = true;
	q->killed[q->nkilled++] = (int)(p - g->nodes);
}

static void kill_if_unused(struct mi_graph *g, struct qnode *q, struct mi_node *p,
			   struct mi_node *user)
{
	/* p's output feeds only `user` (which no longer reads it) */
	if (p && !p->dead && mi_graph_sole_consumer(g, p->outputs[0]) == (int)(user - g->nodes))
		qp_kill(g, q, p);
}

static void rewire(struct mi_graph *g, struct mi_node *n, int xq, const struct chain *c,
		   struct mi_node *xdq, struct mi_node *wdq, struct mi_node *bdq)
{
	struct qnode *q = n->priv;

	q->orig_ninputs = n->ninputs;
	q->orig_in0 = n->inputs[0];
	q->orig_in1 = n->ninputs > 1 ? n->inputs[1] : -1;
	q->orig_out0 = n->outputs[0];
	kill_if_unused(g, q, xdq, n);
	kill_if_unused(g, q, wdq, n);
	if (bdq != wdq)
		kill_if_unused(g, q, bdq, n);
	n->inputs[0] = xq;
	n->ninputs = 1;
	if (c->act)
		qp_kill(g, q, c->act);
	if (c->q)
		qp_kill(g, q, c->q);
	n->outputs[0] = c->out;
	g->tensors[c->out].producer = (int)(n - g->nodes);
}

int qp_skip(const struct mi_node *n, const char *why)
{
	static int dbg = -1;

	if (dbg < 0)
		dbg = mi_debug("quant");
	if (dbg)
		fprintf(stderr, "metainfer: int8: node '%s' (%s) not planned: %s\n", n->name,
			n->op_type, why);
	return 0;
}

static int try_qdq(struct mi_graph *g, struct mi_node *n)
{
	bool conv = !strcmp(n->op_type, "Conv"), gemm = !strcmp(n->op_type, "Gemm");
	bool matmul = !strcmp(n->op_type, "MatMul");
	struct mi_node *xdq, *wdq, *bdq = NULL;
	struct qact xa;
	struct qw w = { 0 };
	struct chain c;
	float *bf = NULL;
	int err = 0;

	if ((!conv && !gemm && !matmul) || n->domain[0] || n->ninputs < 2)
		return 0;
	xdq = qp_producer(g, n->inputs[0], "DequantizeLinear");
	wdq = find_dq(g, n->inputs[1]);
	if (!xdq || !qp_act_params(g, xdq, 0, 1, 2, &xa))
		return qp_skip(n, "input is not a per-tensor uint8/int8 DequantizeLinear");
	if (mi_tensor_numel(mi_in(g, xdq, 1)) != 1)
		return qp_skip(n, "activation scale is not per tensor");
	struct mi_tensor *wt = mi_in(g, n, 1);
	/* the int8 weights: DQ inputs if still there, else recovered */
	struct mi_tensor *wq = wdq ? mi_in(g, wdq, 0) : NULL;

	if (!wt || !mi_tensor_shape_known(wt))
		return qp_skip(n, "weight shape unknown");
	if (wq && !wq->data)
		wq = NULL;
	if (!wq && !(wt->flags & MI_TF_CONST))
		return qp_skip(n, "weights are not DequantizeLinear of constant int8");
	int wrank = wt->ndim;
	int ax_attr = wdq ? (int)mi_attr_int(wdq, "axis", 1) : 0;

	if (ax_attr < 0)
		ax_attr += wrank;
	int bi = n->ninputs > 2 ? n->inputs[2] : -1;

	if (bi >= 0)
		bdq = qp_producer(g, bi, "DequantizeLinear");
	qp_follow_chain(g, n->outputs[0], &c);
	if (conv) {
		struct mi_qconv_shape s;

		if (!conv_shape(g, n, 0, 1, &s) || wrank != 4)
			return qp_skip(n, "not a 2-D convolution with known shapes");
		if (wq ? !weight_params(g, wq, mi_in(g, wdq, 1), mi_in(g, wdq, 2), 0, ax_attr, s.oc, &w) :
			 !recover_weights(wt, s.oc, mi_tensor_numel(wt) / s.oc, &w))
			return qp_skip(n, "weights are not constant int8 with zero zero points (per tensor or per output channel)");
		if (!read_bias(g, bi, s.oc, &bf))
			goto out;
		err = plan_conv(g, n, &xa, &w, &s, NULL, bf, &c);
	} else {
		struct mi_tensor *x = mi_in(g, n, 0);
		bool trans;
		int64_t k, noc, m;

		if (wrank != 2 || xa.dtype != MI_DT_UINT8 || !mi_tensor_shape_known(x) ||
		    x->ndim < 1)
			return qp_skip(n, "not uint8 activations / 2-D weights with known shapes");
		if (gemm) {
			if (mi_attr_int(n, "transA", 0) || mi_attr_float(n, "alpha", 1) != 1.0f ||
			    mi_attr_float(n, "beta", 1) != 1.0f || x->ndim != 2)
				return qp_skip(n, "Gemm with transA/alpha/beta");
			trans = !mi_attr_int(n, "transB", 0);
		} else {
			trans = true;
			if (bi >= 0)
				return qp_skip(n, "MatMul with a third input");
		}
		k = trans ? wt->dims[0] : wt->dims[1];
		noc = trans ? wt->dims[1] : wt->dims[0];
		if (x->dims[x->ndim - 1] != k)
			return qp_skip(n, "inner dimension mismatch");
		m = mi_tensor_numel(x) / k;
		if (wq ? !weight_params(g, wq, mi_in(g, wdq, 1), mi_in(g, wdq, 2), trans ? 1 : 0,
					ax_attr, noc, &w) :
			 !recover_weights(wt, noc, trans ? 1 : k, &w))
			return qp_skip(n, "weights are not constant int8 with zero zero points (per tensor or per output column)");
		if (!read_bias(g, bi, noc, &bf))
			goto out;
		err = plan_gemm(g, n, &xa, &w, k, noc, trans, m, NULL, bf, &c);
	}
	if (!err && n->priv)
		rewire(g, n, xa.t, &c, xdq, wdq, bdq);
out:
	qw_free(&w);
	free(bf);
	return err;
}

static int try_qlinear(struct mi_graph *g, struct mi_node *n)
{
	bool conv = !strcmp(n->op_type, "QLinearConv");
	bool mm = !strcmp(n->op_type, "QLinearMatMul");
	struct qact xa;
	struct qw w = { 0 };
	struct chain c;
	int err = 0;

	if ((!conv && !mm) || n->domain[0])
		return 0;
	memset(&c, 0, sizeof(c));
	c.out = n->outputs[0];
	c.lo = -INFINITY;
	c.hi = INFINITY;
	if (!qp_act_params(g, n, 0, 1, 2, &xa))
		return 0;
	/* output params: inputs 6, 7 */
	struct mi_tensor *ys = mi_in(g, n, 6), *yz = mi_in(g, n, 7), *y = mi_out(g, n, 0);

	if (!const_scalar(ys) || ys->dtype != MI_DT_FLOAT || (yz && !const_scalar(yz)))
		return 0;
	c.q = NULL;
	c.y.scale = *(const float *)ys->data;
	c.y.zp = yz ? (int32_t)mi_tensor_get_i64(yz, 0) : 0;
	c.y.dtype = y->dtype;
	if (!(c.y.scale > 0))
		return 0;
	struct mi_tensor *wq = mi_in(g, n, 3);
	struct chain cq = c;

	cq.q = n; /* marks "requantize"; never killed (see below) */
	if (conv) {
		struct mi_qconv_shape s;
		struct mi_tensor *b = mi_in(g, n, 8);

		if (!conv_shape(g, n, 0, 3, &s) || !wq || wq->ndim != 4)
			return 0;
		if (!weight_params(g, wq, mi_in(g, n, 4), mi_in(g, n, 5), 0, 0, s.oc, &w))
			return 0;
		if (b && (!qp_const_t(b) || b->dtype != MI_DT_INT32 || mi_tensor_numel(b) != s.oc))
			goto out;
		err = plan_conv(g, n, &xa, &w, &s, b ? b->data : NULL, NULL, &cq);
	} else {
		struct mi_tensor *x = mi_in(g, n, 0);

		if (!wq || wq->ndim != 2 || xa.dtype != MI_DT_UINT8 || !mi_tensor_shape_known(x) ||
		    x->ndim < 2 || x->dims[x->ndim - 1] != wq->dims[0])
			return 0;
		if (!weight_params(g, wq, mi_in(g, n, 4), mi_in(g, n, 5), 1, 1, wq->dims[1], &w))
			goto out;
		err = plan_gemm(g, n, &xa, &w, wq->dims[0], wq->dims[1], true,
				mi_tensor_numel(x) / wq->dims[0], NULL, NULL, &cq);
	}
out:
	qw_free(&w);
	return err;
}

static void kill_unused_dq(struct mi_graph *g)
{
	for (int i = 0; i < g->nnodes; i++) {
		struct mi_node *d = &g->nodes[i];
		struct qnode *owner = NULL;
		bool used = false;

		if (d->dead || strcmp(d->op_type, "DequantizeLinear") || d->domain[0] ||
		    (g->tensors[d->outputs[0]].flags & MI_TF_OUTPUT))
			continue;
		for (int j = 0; j < g->nnodes && !used; j++) {
			struct mi_node *n = &g->nodes[j];

			if (n->dead)
				continue;
			for (int k = 0; k < n->ninputs; k++) {
				if (n->inputs[k] == d->outputs[0])
					used = true;
				if (n->inputs[k] == d->inputs[0] && qnode_is(n) &&
				    !owner && ((struct qnode *)n->priv)->nkilled < 8)
					owner = n->priv;
			}
		}
		if (!used && owner) {
			d->dead = true;
			owner->killed[owner->nkilled++] = i;
		}
	}
}

/*
 * A rewrite of n made a tensor that must stay (qp_kept) vanish: a node it
 * absorbed wrote it, and n neither writes nor reads it now.
 */
static bool hides_kept(struct mi_graph *g, struct mi_node *n)
{
	const struct qnode *q = n->priv;

	for (int i = 0; q && qnode_is(n) && i < q->nkilled; i++) {
		const struct mi_node *k = &g->nodes[q->killed[i]];

		for (int o = 0; o < k->noutputs; o++) {
			int t = k->outputs[o];
			bool used = false;

			if (t < 0 || !qp_kept(&g->tensors[t]))
				continue;
			for (int j = 0; j < n->noutputs; j++)
				used |= n->outputs[j] == t;
			for (int j = 0; j < n->ninputs; j++)
				used |= n->inputs[j] == t;
			if (!used)
				return true;
		}
	}
	return false;
}

/* The rewrites of one node, first match wins. */
static int (*const tries[])(struct mi_graph *, struct mi_node *) = {
	try_qlinear, try_qdq, try_qadd, try_qpool, try_qconcat, try_qlut,
	try_qse, try_qgap,
};

/*
 * The first rewrite of n that matches and keeps every qp_kept tensor.  A
 * device job's border (MI_TF_DENSE) that only a rewrite hiding it would
 * run on the int8 kernels: that rewrite is taken anyway, the border has
 * no producer or reader left and the job is not bound (devexec.c), so its
 * units run on the CPU's int8 kernels, never the QDQ ops in fp32.
 */
static int plan_node(struct mi_graph *g, struct mi_node *n)
{
	const size_t ntries = sizeof(tries) / sizeof(tries[0]);
	size_t hid = ntries;
	int err = 0;

	for (size_t r = 0; r < ntries && !err && !n->priv; r++) {
		err = tries[r](g, n);
		if (err || !hides_kept(g, n))
			continue;
		qnode_fini(g, n);
		if (hid == ntries)
			hid = r;
	}
	if (!err && !n->priv && hid < ntries) {
		err = tries[hid](g, n);
		if (mi_debug("quant"))
			fprintf(stderr, "metainfer: int8: node '%s' (%s) fuses a device job's border away: that job runs on the CPU\n",
				n->name, n->op_type);
	}
	return err;
}

int mi_quant_plan(struct mi_graph *g, const struct mi_cpu_opts *opts)
{
	struct qshared *sh;
	int err = 0, nq = 0, nint8;

	if (opts && opts->reference)
		return 0;
	if (opts && opts->no_int8)
		return 0;
	/* the int8 kernels of the model's ISA cap, as lib/cpu's */
	mi_quant_set_isa(opts && opts->isa >= 0 ? opts->isa : mi_cpu_isa());
	qp_pool_threads = opts && opts->nthreads > 0 ? opts->nthreads : mi_cpu_ncores();
	mi_quant_set_parallel(qp_pool_for, qp_pool_threads);
	qp_shared_need = 0;
	for (int p = 0; p < g->norder && !err; p++) {
		struct mi_node *n = &g->nodes[g->order[p]];

		if (n->dead || n->priv)
			continue;
		err = plan_node(g, n);
		nq += n->priv != NULL && qnode_is(n);
	}
	if (!err) {
		err = qp_plan_moves(g);
		nq += err > 0 ? err : 0;
		err = err < 0 ? err : 0;
	}
	if (err)
		return mi_graph_err(g, NULL, err, "int8 planning failed");
	if (mi_debug("quant")) {
		int nqops = 0;

		for (int i = 0; i < g->nnodes; i++) {
			const struct mi_node *n = &g->nodes[i];

			nqops += !n->dead && !n->priv &&
				 (strstr(n->op_type, "QLinear") || strstr(n->op_type, "Integer") ||
				  (strstr(n->op_type, "QuantizeLinear") && !strcmp(n->op_type + strlen(n->op_type) - 14, "QuantizeLinear")));
		}
		fprintf(stderr, "metainfer: int8: %d nodes on int8 kernels (%s), %d quantization ops left on reference kernels\n",
			nq, mi_quant_isa_name(mi_quant_isa()), nqops);
	}
	if (nq) {
		kill_unused_tables(g);
		kill_unused_dq(g);
	}
	nint8 = nq;
	for (int i = 0; i < g->nnodes && !err; i++) {
		err = try_qdq_op(g, &g->nodes[i]);
		nq += g->nodes[i].priv && qnode_is(&g->nodes[i]) &&
		      ((struct qnode *)g->nodes[i].priv)->hdr.run == qdq_run;
	}
	if (err)
		return mi_graph_err(g, NULL, err, "int8 planning failed");
	if (nint8) {
		qp_plan_c4(g);
		qp_plan_chan(g);
	}
	if (!nq)
		return 0;
	sh = calloc(1, sizeof(*sh));
	if (sh) {
		sh->ws = aligned_alloc(64, ((size_t)qp_shared_need + 127) & ~(size_t)63);
		sh->size = (size_t)qp_shared_need;
	}
	if (!sh || !sh->ws) {
		free(sh);
		sh = NULL;
	}
	for (int i = 0; i < g->nnodes; i++) {
		struct mi_node *n = &g->nodes[i];

		if (!qnode_is(n))
			continue;
		if (!sh) {
			qnode_fini(g, n);
			continue;
		}
		((struct qnode *)n->priv)->sh = sh;
		sh->refs++;
	}
	return sh ? 0 : mi_graph_err(g, NULL, -ENOMEM, "int8 planning: out of memory");
}
