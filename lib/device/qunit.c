// SPDX-License-Identifier: MIT
/*
 * Quantized units of a normalized QDQ graph (lib/device/lower.h): each op
 * whose inputs are DequantizeLinear outputs and whose result (after an
 * optional Relu/Clip) feeds one QuantizeLinear, grouped with those nodes.
 * In the quantized domain such a unit reads 8-bit tensors and writes one,
 * which is what the command stream computes.
 *
 * Activations: per-tensor scale and zero point (uint8 or int8); weights:
 * int8 with one zero point for the tensor and a scale per output channel
 * or per tensor; a bias is int32 (DQ'd with scale sx * sw) or fp32.
 * A DQ constant-folded by normalization (dead, int8 input still there)
 * counts as the DQ it was.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/lower-impl.h"

static bool is_op(const struct mi_node *n, const char *op)
{
	return n && !n->dead && !n->domain[0] && !strcmp(n->op_type, op);
}

static bool const_t(const struct mi_tensor *t)
{
	return t && (t->flags & MI_TF_CONST) && t->data;
}

static struct mi_node *live_producer(struct mi_graph *g, int t)
{
	int p = t >= 0 ? g->tensors[t].producer : -1;

	return p >= 0 && !g->nodes[p].dead ? &g->nodes[p] : NULL;
}

/* The DQ producing t: live, or dead (folded) with its inputs intact. */
static struct mi_node *find_dq(struct mi_graph *g, int t)
{
	struct mi_node *n = live_producer(g, t);

	if (is_op(n, "DequantizeLinear"))
		return n;
	if (n || t < 0 || !(g->tensors[t].flags & MI_TF_CONST))
		return NULL;
	for (int i = 0; i < g->nnodes; i++) {
		struct mi_node *d = &g->nodes[i];

		if (d->dead && d->noutputs == 1 && d->outputs[0] == t &&
		    !strcmp(d->op_type, "DequantizeLinear") && !d->domain[0] &&
		    const_t(mi_in(g, d, 0)))
			return d;
	}
	return NULL;
}

static bool scalar_f(const struct mi_tensor *t, float *v)
{
	if (!const_t(t) || t->dtype != MI_DT_FLOAT || mi_tensor_numel(t) != 1)
		return false;
	*v = *(const float *)t->data;
	return *v > 0 && isfinite(*v);
}

/* Per-tensor quantization of DQ/Q node n (input 1 scale, 2 zero point)
 * on the 8-bit tensor qt. */
static bool act_params(struct mi_graph *g, struct mi_node *n, int qt,
		       struct qu_act *a)
{
	struct mi_tensor *x = &g->tensors[qt], *z = mi_in(g, n, 2);

	if (x->dtype != MI_DT_UINT8 && x->dtype != MI_DT_INT8)
		return false;
	if (!scalar_f(mi_in(g, n, 1), &a->scale))
		return false;
	if (z && (!const_t(z) || mi_tensor_numel(z) != 1))
		return false;
	a->t = qt;
	a->zp = z ? (int32_t)mi_tensor_get_i64(z, 0) : 0;
	a->dtype = x->dtype;
	a->is_const = const_t(x);
	return true;
}

/* Operand i of n as a quantized tensor (through its DQ). */
static struct mi_node *operand(struct mi_graph *g, struct mi_node *n, int i,
			       struct qu_act *a)
{
	struct mi_node *dq = i < n->ninputs ? find_dq(g, n->inputs[i]) : NULL;

	if (!dq && i < n->ninputs && n->inputs[i] >= 0 &&
	    const_t(&g->tensors[n->inputs[i]]) &&
	    g->tensors[n->inputs[i]].dtype == MI_DT_FLOAT &&
	    (is_op(n, "Add") || is_op(n, "Mul"))) {
		memset(a, 0, sizeof(*a));
		a->t = n->inputs[i];
		a->is_const = a->f32 = true;
		a->scale = 1;
		a->dtype = MI_DT_INT32;
		return n;
	}
	if (!dq || !act_params(g, dq, dq->inputs[0], a))
		return NULL;
	if (!a->is_const && dq->dead)
		return NULL;
	return dq;
}

/* The float op's output t: [Relu | Clip] then QuantizeLinear, each the
 * sole reader of the tensor before it. */
static struct mi_node *out_chain(struct mi_graph *g, int t, struct qu_info *qi,
				 struct mi_node **actp)
{
	int ci = mi_graph_sole_consumer(g, t);
	struct mi_node *c = ci >= 0 ? &g->nodes[ci] : NULL;

	qi->lo = -INFINITY;
	qi->hi = INFINITY;
	*actp = NULL;
	if (is_op(c, "Relu")) {
		qi->lo = 0;
		*actp = c;
	} else if (is_op(c, "Clip") && c->inputs[0] == t) {
		struct mi_tensor *mn = mi_in(g, c, 1), *mx = mi_in(g, c, 2);

		if ((mn && (!const_t(mn) || mn->dtype != MI_DT_FLOAT)) ||
		    (mx && (!const_t(mx) || mx->dtype != MI_DT_FLOAT)))
			return NULL;
		qi->lo = mn ? *(const float *)mn->data :
			      mi_attr_float(c, "min", -INFINITY);
		qi->hi = mx ? *(const float *)mx->data :
			      mi_attr_float(c, "max", INFINITY);
		*actp = c;
	}
	if (*actp) {
		t = (*actp)->outputs[0];
		ci = mi_graph_sole_consumer(g, t);
		c = ci >= 0 ? &g->nodes[ci] : NULL;
	}
	if (!is_op(c, "QuantizeLinear") || c->inputs[0] != t ||
	    !act_params(g, c, c->outputs[0], &qi->out))
		return NULL;
	qi->out.is_const = false;
	return c;
}

static const char *const lut_ops[] = {
	"Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "LeakyRelu", "Elu",
	"Selu", "Softplus", "Softsign", "Exp", "Neg", "Abs", "Erf",
};

static bool lut_op(const struct mi_node *n)
{
	for (size_t i = 0; i < sizeof(lut_ops) / sizeof(lut_ops[0]); i++)
		if (is_op(n, lut_ops[i]))
			return true;
	return false;
}

static void qu_add_member(struct mi_qunit *u, const struct mi_node *n,
			  const struct mi_graph *g)
{
	int idx = (int)(n - g->nodes);

	if (n->dead || u->nmembers >= MI_QUNIT_MAX_MEMBERS)
		return;
	for (int i = 0; i < u->nmembers; i++)
		if (u->members[i] == idx)
			return;
	u->members[u->nmembers++] = idx;
}

/*
 * Normalization constant-folds DQ(int8 w) into an fp32 constant and drops
 * the int8 bytes.  Such a tensor holds q * s[c] exactly; with symmetric
 * weights max|q| of a channel is qmax (127, or 63 for 7-bit weights), so
 * s = max|w| / qmax and q = w / s recover them (as lib/quant does).
 * Accepted only when every value lands on an integer in [-127, 127].
 * Channel of element i: (i / inner) % noc.
 */
static bool recover_one(const struct mi_tensor *wt, int64_t noc, int64_t inner,
			float qmax, struct qu_info *qi)
{
	int64_t n = mi_tensor_numel(wt), outer;
	const float *w = wt->data;

	qi->wscale = calloc(noc, sizeof(float));
	qi->wown = malloc(n);
	if (!qi->wscale || !qi->wown)
		goto fail;
	outer = n / (noc * inner);
	for (int64_t o = 0, i = 0; o < outer; o++)
		for (int64_t c = 0; c < noc; c++)
			for (int64_t k = 0; k < inner; k++, i++) {
				float a = fabsf(w[i]);

				if (!isfinite(a))
					goto fail;
				qi->wscale[c] = a > qi->wscale[c] ? a : qi->wscale[c];
			}
	for (int64_t c = 0; c < noc; c++)
		qi->wscale[c] = qi->wscale[c] > 0 ? qi->wscale[c] / qmax : 1.0f;
	for (int64_t o = 0, i = 0; o < outer; o++)
		for (int64_t c = 0; c < noc; c++)
			for (int64_t k = 0; k < inner; k++, i++) {
				float v = w[i] / qi->wscale[c], r = nearbyintf(v);

				if (fabsf(v - r) > 1e-3f || r < -127 || r > 127)
					goto fail;
				qi->wown[i] = (int8_t)r;
			}
	qi->wq = qi->wown;
	return true;
fail:
	free(qi->wscale);
	free(qi->wown);
	qi->wscale = NULL;
	qi->wown = NULL;
	return false;
}

static bool recover(struct mi_graph *g, int t, int axis, int64_t noc,
		    struct qu_info *qi)
{
	const struct mi_tensor *wt = &g->tensors[t];
	int64_t inner = 1, n = mi_tensor_numel(wt);
	static const float qmax[2] = { 127.0f, 63.0f };

	if (!const_t(wt) || wt->dtype != MI_DT_FLOAT || n <= 0 || noc <= 0)
		return false;
	for (int k = axis + 1; k < wt->ndim; k++)
		inner *= wt->dims[k];
	qi->w = t;
	qi->wzp = 0;
	qi->noc = noc;
	for (int i = 0; i < 2; i++)
		if (recover_one(wt, noc, inner, qmax[i], qi))
			return true;
	for (int i = 0; i < 2; i++)
		if (recover_one(wt, 1, n, qmax[i], qi)) {
			float s0 = qi->wscale[0], *sc = realloc(qi->wscale, noc * sizeof(float));

			if (!sc)
				return false;
			for (int64_t c = 0; c < noc; c++)
				sc[c] = s0;
			qi->wscale = sc;
			return true;
		}
	return false;
}

/* Weights (input wi) of a conv/gemm: int8 constant through a DQ with a
 * scalar zero point (all entries equal) and scales per axis `axis`, or
 * such a DQ folded to fp32 (then returns the weight tensor's node-less
 * marker: the node itself). */
static struct mi_node *weights(struct mi_graph *g, struct mi_node *n, int wi,
			       int axis, int64_t noc, struct qu_info *qi)
{
	struct mi_node *dq = wi < n->ninputs ? find_dq(g, n->inputs[wi]) : NULL;
	struct mi_tensor *w, *s, *z;
	int64_t ns;

	if (!dq)
		return wi < n->ninputs && recover(g, n->inputs[wi], axis, noc, qi) ? n : NULL;
	w = mi_in(g, dq, 0);
	s = mi_in(g, dq, 1);
	z = mi_in(g, dq, 2);
	if (!const_t(w) || w->dtype != MI_DT_INT8 || !const_t(s) ||
	    s->dtype != MI_DT_FLOAT || (z && !const_t(z)))
		return NULL;
	ns = mi_tensor_numel(s);
	if (ns != 1 && (ns != noc || mi_attr_int(dq, "axis", 1) != axis))
		return NULL;
	qi->wzp = z ? (int)mi_tensor_get_i64(z, 0) : 0;
	for (int64_t i = 1; z && i < mi_tensor_numel(z); i++)
		if (mi_tensor_get_i64(z, i) != qi->wzp)
			return NULL;
	qi->wscale = malloc(noc * sizeof(float));
	if (!qi->wscale)
		return NULL;
	for (int64_t o = 0; o < noc; o++) {
		qi->wscale[o] = ((const float *)s->data)[ns == 1 ? 0 : o];
		if (!(qi->wscale[o] > 0) || !isfinite(qi->wscale[o]))
			return NULL;
	}
	qi->w = dq->inputs[0];
	qi->wq = w->data;
	qi->noc = noc;
	return dq;
}

/* Bias (input bi): fp32 constant, or int32 through a DQ. */
static bool bias(struct mi_graph *g, struct mi_node *n, int bi,
		 struct qu_info *qi, struct mi_qunit *u)
{
	struct mi_tensor *b = mi_in(g, n, bi);
	struct mi_node *dq;

	qi->bias = -1;
	if (!b)
		return true;
	if (mi_tensor_numel(b) != qi->noc)
		return false;
	if (const_t(b) && b->dtype == MI_DT_FLOAT && !find_dq(g, n->inputs[bi])) {
		qi->bias = n->inputs[bi];
		return true;
	}
	dq = find_dq(g, n->inputs[bi]);
	if (!dq)
		return false;
	struct mi_tensor *bq = mi_in(g, dq, 0), *s = mi_in(g, dq, 1);
	int64_t ns = s ? mi_tensor_numel(s) : 0;

	if (!const_t(bq) || bq->dtype != MI_DT_INT32 || !const_t(s) ||
	    s->dtype != MI_DT_FLOAT || (ns != 1 && ns != qi->noc))
		return false;
	qi->bscale = malloc(qi->noc * sizeof(float));
	if (!qi->bscale)
		return false;
	for (int64_t o = 0; o < qi->noc; o++)
		qi->bscale[o] = ((const float *)s->data)[ns == 1 ? 0 : o];
	qi->bias = dq->inputs[0];
	if (u)
		qu_add_member(u, dq, g);
	return true;
}

void qu_info_fini(struct qu_info *qi)
{
	free(qi->wscale);
	free(qi->bscale);
	free(qi->wown);
	qi->wscale = qi->bscale = NULL;
	qi->wown = NULL;
}

/*
 * Match node ni as the anchor of a unit; fills u (when non-NULL) and qi.
 * Returns true on a match.
 */
static bool match(struct mi_graph *g, int ni, struct mi_qunit *u,
		  struct qu_info *qi)
{
	struct mi_node *n = &g->nodes[ni], *dq, *act = NULL, *q;
	struct mi_tensor *y;
	int nops = 0;

	memset(qi, 0, sizeof(*qi));
	qi->anchor = n;
	qi->bias = -1;
	if (n->dead || n->domain[0] || n->noutputs < 1)
		return false;
	y = mi_out(g, n, 0);
	if (u) {
		memset(u, 0, sizeof(*u));
		u->anchor = ni;
	}
	if (is_op(n, "QuantizeLinear")) {
		/* DQ -> Q: requantization */
		dq = live_producer(g, n->inputs[0]);
		if (!is_op(dq, "DequantizeLinear") ||
		    !act_params(g, dq, dq->inputs[0], &qi->in[0]) ||
		    qi->in[0].is_const ||
		    !act_params(g, n, n->outputs[0], &qi->out))
			return false;
		qi->kind = QU_REQUANT;
		qi->nin = 1;
		qi->lo = -INFINITY;
		qi->hi = INFINITY;
		if (u) {
			qu_add_member(u, dq, g);
			qu_add_member(u, n, g);
			u->op = DRM_METAINFER_OP_REQUANTIZE;
			u->inputs[u->ninputs++] = qi->in[0].t;
			u->output = qi->out.t;
		}
		return true;
	}
	if (is_op(n, "Conv"))
		qi->kind = QU_CONV, nops = 1;
	else if (is_op(n, "MatMul") && n->ninputs == 2 &&
		 !const_t(mi_in(g, n, 1)))
		qi->kind = QU_MATMUL, nops = 2;
	else if (is_op(n, "Gemm") || is_op(n, "MatMul"))
		qi->kind = QU_GEMM, nops = 1;
	else if (is_op(n, "Add"))
		qi->kind = QU_ADD, nops = 2;
	else if (is_op(n, "Mul"))
		qi->kind = QU_MUL, nops = 2;
	else if (is_op(n, "Relu") || is_op(n, "Clip"))
		qi->kind = QU_CLIP, nops = 1;
	else if (is_op(n, "MaxPool") && n->noutputs == 1)
		qi->kind = QU_MAXPOOL, nops = 1;
	else if (is_op(n, "AveragePool") || is_op(n, "GlobalAveragePool"))
		qi->kind = QU_AVGPOOL, nops = 1;
	else if (is_op(n, "Concat") && n->ninputs <= MI_QUNIT_MAX_IN)
		qi->kind = QU_CONCAT, nops = n->ninputs;
	else if (lut_op(n))
		qi->kind = QU_LUT, nops = 1;
	else
		return false;
	if (!mi_tensor_shape_known(y))
		return false;
	for (int i = 0; i < nops; i++) {
		dq = operand(g, n, i, &qi->in[i]);
		if (!dq)
			return false;
		if (qi->in[i].is_const && qi->kind != QU_ADD &&
		    qi->kind != QU_MUL && qi->kind != QU_MATMUL)
			return false;
		if (u && !dq->dead)
			qu_add_member(u, dq, g);
	}
	qi->nin = nops;
	if (qi->kind == QU_ADD || qi->kind == QU_MUL) {
		if (qi->in[0].is_const && qi->in[1].is_const)
			return false;
	}
	if (qi->kind == QU_CONV) {
		struct mi_tensor *w = mi_in(g, n, 1);

		if (!w || w->ndim != 4 || !weights(g, n, 1, 0, w->dims[0], qi))
			goto fail;
		if (!bias(g, n, 2, qi, u))
			goto fail;
	} else if (qi->kind == QU_GEMM) {
		struct mi_tensor *w = mi_in(g, n, 1);
		bool gemm = is_op(n, "Gemm");

		qi->gemm_transb = gemm && mi_attr_int(n, "transB", 0);
		if (!w || w->ndim != 2)
			goto fail;
		if (!weights(g, n, 1, qi->gemm_transb ? 0 : 1,
			     w->dims[qi->gemm_transb ? 0 : 1], qi))
			goto fail;
		if (gemm && !bias(g, n, 2, qi, u))
			goto fail;
	}
	if (u && qi->w >= 0 && qi->wscale) {
		dq = find_dq(g, n->inputs[1]);
		if (dq && !dq->dead)
			qu_add_member(u, dq, g);
	}
	q = out_chain(g, n->outputs[0], qi, &act);
	if (!q)
		goto fail;
	if (qi->kind == QU_CLIP && act)
		goto fail; /* Relu -> Relu: the first one's unit takes both */
	if (qi->kind == QU_CLIP) {
		qi->lo = is_op(n, "Relu") ? 0 : -INFINITY;
		qi->hi = INFINITY;
		if (is_op(n, "Clip")) {
			struct mi_tensor *mn = mi_in(g, n, 1), *mx = mi_in(g, n, 2);

			if ((mn && (!const_t(mn) || mn->dtype != MI_DT_FLOAT)) ||
			    (mx && (!const_t(mx) || mx->dtype != MI_DT_FLOAT)))
				goto fail;
			qi->lo = mn ? *(const float *)mn->data :
				      mi_attr_float(n, "min", -INFINITY);
			qi->hi = mx ? *(const float *)mx->data :
				      mi_attr_float(n, "max", INFINITY);
		}
	}
	if (u) {
		static const uint32_t ops[] = {
			[QU_CONV] = DRM_METAINFER_OP_CONV2D,
			[QU_GEMM] = DRM_METAINFER_OP_GEMM,
			[QU_MATMUL] = DRM_METAINFER_OP_GEMM,
			[QU_ADD] = DRM_METAINFER_OP_ADD,
			[QU_MUL] = DRM_METAINFER_OP_MUL,
			[QU_CLIP] = DRM_METAINFER_OP_CLIP,
			[QU_MAXPOOL] = DRM_METAINFER_OP_MAXPOOL,
			[QU_AVGPOOL] = DRM_METAINFER_OP_AVGPOOL,
			[QU_CONCAT] = DRM_METAINFER_OP_COPY,
			[QU_LUT] = DRM_METAINFER_OP_LUT,
			[QU_REQUANT] = DRM_METAINFER_OP_REQUANTIZE,
		};

		qu_add_member(u, n, g);
		if (act)
			qu_add_member(u, act, g);
		qu_add_member(u, q, g);
		u->op = ops[qi->kind];
		for (int i = 0; i < qi->nin; i++)
			if (!qi->in[i].is_const)
				u->inputs[u->ninputs++] = qi->in[i].t;
		u->output = qi->out.t;
		u->macs = (uint64_t)mi_node_macs(g, n);
	}
	return true;
fail:
	qu_info_fini(qi);
	return false;
}

int qu_analyze(struct mi_graph *g, const struct mi_qunit *u,
	       struct qu_info *qi, char *why, size_t whylen)
{
	if (u->anchor < 0 || u->anchor >= g->nnodes || !match(g, u->anchor, NULL, qi)) {
		if (why)
			snprintf(why, whylen, "node %d is not a quantized unit",
				 u->anchor);
		return -EOPNOTSUPP;
	}
	return 0;
}

int mi_qunits_find(struct mi_graph *g, struct mi_qunit **units, int *nunits)
{
	struct mi_qunit *us = NULL;
	int n = 0, cap = 0;
	bool *taken;

	*units = NULL;
	*nunits = 0;
	if (!g->order)
		return mi_set_error(-EINVAL, "quantized units: graph not sorted");
	taken = calloc(g->nnodes ? g->nnodes : 1, sizeof(*taken));
	if (!taken)
		return -ENOMEM;
	for (int p = 0; p < g->norder; p++) {
		int ni = g->order[p];
		struct mi_qunit u;
		struct qu_info qi;
		bool clash = false;

		if (taken[ni] || !match(g, ni, &u, &qi))
			continue;
		qu_info_fini(&qi);
		/* a Relu/Q already fused into an earlier unit's chain */
		for (int i = 0; i < u.nmembers; i++) {
			struct mi_node *m = &g->nodes[u.members[i]];

			if (taken[u.members[i]] && !is_op(m, "DequantizeLinear"))
				clash = true;
		}
		if (clash)
			continue;
		if (n == cap) {
			struct mi_qunit *nu;

			cap = cap ? 2 * cap : 16;
			nu = realloc(us, cap * sizeof(*us));
			if (!nu) {
				free(us);
				free(taken);
				return -ENOMEM;
			}
			us = nu;
		}
		for (int i = 0; i < u.nmembers; i++)
			taken[u.members[i]] = true;
		us[n++] = u;
	}
	free(taken);
	*units = us;
	*nunits = n;
	return 0;
}

/* ---- what a device can run ------------------------------------------ */

static int why_set(char *why, size_t whylen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int why_set(char *why, size_t whylen, const char *fmt, ...)
{
	va_list ap;

	if (why && whylen) {
		va_start(ap, fmt);
		vsnprintf(why, whylen, fmt, ap);
		va_end(ap);
	}
	return 0;
}

static const char *const op_names[DRM_METAINFER_OP_COUNT] = {
	[DRM_METAINFER_OP_CONV2D] = "CONV2D", [DRM_METAINFER_OP_GEMM] = "GEMM",
	[DRM_METAINFER_OP_ADD] = "ADD",	      [DRM_METAINFER_OP_MUL] = "MUL",
	[DRM_METAINFER_OP_RELU] = "RELU",     [DRM_METAINFER_OP_CLIP] = "CLIP",
	[DRM_METAINFER_OP_MAXPOOL] = "MAXPOOL",
	[DRM_METAINFER_OP_AVGPOOL] = "AVGPOOL",
	[DRM_METAINFER_OP_REQUANTIZE] = "REQUANTIZE",
	[DRM_METAINFER_OP_COPY] = "COPY",     [DRM_METAINFER_OP_LUT] = "LUT",
};

static const char *const dtype_names[DRM_METAINFER_DTYPE_COUNT] = {
	"?", "int8", "uint8", "int16", "int32",
};

bool mi_qunit_supported(struct mi_graph *g, const struct mi_qunit *u,
			const struct mi_dev_caps *caps, char *why,
			size_t whylen)
{
	const struct mi_node *n = &g->nodes[u->anchor];
	uint64_t ops = 0, dts = 0, lts = 0, miss;

	if (why && whylen)
		why[0] = 0;
	if (mi_lower_probe(g, u, caps, &ops, &dts, &lts, why, whylen))
		return false;
	miss = ops & ~caps->op_mask;
	if (miss) {
		int b = __builtin_ctzll(miss);

		why_set(why, whylen, "%s '%s': device lacks op %s", n->op_type,
			n->name ? n->name : "", b < DRM_METAINFER_OP_COUNT &&
			op_names[b] ? op_names[b] : "?");
		return false;
	}
	miss = dts & ~caps->dtype_mask;
	if (miss) {
		int b = __builtin_ctzll(miss);

		why_set(why, whylen, "%s '%s': device lacks dtype %s", n->op_type,
			n->name ? n->name : "",
			b < DRM_METAINFER_DTYPE_COUNT ? dtype_names[b] : "?");
		return false;
	}
	miss = lts & ~(caps->layout_mask | 1u << DRM_METAINFER_LAYOUT_PLAIN);
	if (miss) {
		why_set(why, whylen, "%s '%s': device lacks layout %s", n->op_type,
			n->name ? n->name : "",
			miss & (1u << DRM_METAINFER_LAYOUT_NCHW) ? "NCHW" : "NHWC");
		return false;
	}
	return true;
}
