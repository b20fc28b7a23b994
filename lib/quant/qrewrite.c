// SPDX-License-Identifier: MIT
/*
 * `metainfer quantize`: rewriting the ModelProto (weights, QDQ pairs,
 * QLinear ops) and writing the IR back as a ModelProto.
 */
#include "quant/quantize-impl.h"

/* ---- ModelProto rewriting --------------------------------------------- */

struct pb {
	Onnx__GraphProto *gp;
	Onnx__NodeProto **nodes; /* new node list */
	size_t nn, cap;
	int err;
};

static char *xstrdup(struct pb *p, const char *s)
{
	char *d = strdup(s);

	if (!d)
		p->err = -ENOMEM;
	return d;
}

static char *xfmt(struct pb *p, const char *a, const char *suffix)
{
	char *s;

	if (asprintf(&s, "%s%s", a, suffix) < 0) {
		p->err = -ENOMEM;
		return NULL;
	}
	return s;
}

static void push_node(struct pb *p, Onnx__NodeProto *n)
{
	if (p->nn == p->cap) {
		size_t cap = p->cap ? 2 * p->cap : 64;
		Onnx__NodeProto **nw = realloc(p->nodes, cap * sizeof(*nw));

		if (!nw) {
			p->err = -ENOMEM;
			return;
		}
		p->nodes = nw;
		p->cap = cap;
	}
	p->nodes[p->nn++] = n;
}

/* New node; names are copied. */
static Onnx__NodeProto *new_node(struct pb *p, const char *op, const char *name,
				 const char *const *in, int nin, const char *out)
{
	Onnx__NodeProto *n = calloc(1, sizeof(*n));

	if (!n) {
		p->err = -ENOMEM;
		return NULL;
	}
	onnx__node_proto__init(n);
	n->op_type = xstrdup(p, op);
	n->name = xstrdup(p, name);
	n->input = calloc(nin, sizeof(char *));
	n->output = calloc(1, sizeof(char *));
	if (!n->input || !n->output) {
		p->err = -ENOMEM;
		return n;
	}
	n->n_input = nin;
	for (int i = 0; i < nin; i++)
		n->input[i] = xstrdup(p, in[i]);
	n->n_output = 1;
	n->output[0] = xstrdup(p, out);
	return n;
}

static void node_set_int(struct pb *p, Onnx__NodeProto *n, const char *name, int64_t v)
{
	Onnx__AttributeProto *a = calloc(1, sizeof(*a));
	Onnx__AttributeProto **arr = realloc(n->attribute, (n->n_attribute + 1) * sizeof(*arr));

	if (!a || !arr) {
		free(a);
		if (arr)
			n->attribute = arr;
		p->err = -ENOMEM;
		return;
	}
	n->attribute = arr;
	onnx__attribute_proto__init(a);
	a->name = xstrdup(p, name);
	a->has_type = 1;
	a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
	a->has_i = 1;
	a->i = v;
	n->attribute[n->n_attribute++] = a;
}

/* Append an initializer (data copied). */
static void add_init(struct pb *p, const char *name, int dtype, int ndim,
		     const int64_t *dims, const void *data, size_t nbytes)
{
	Onnx__TensorProto *t = calloc(1, sizeof(*t));
	Onnx__TensorProto **arr = realloc(p->gp->initializer,
					  (p->gp->n_initializer + 1) * sizeof(*arr));

	if (!t || !arr) {
		free(t);
		if (arr)
			p->gp->initializer = arr;
		p->err = -ENOMEM;
		return;
	}
	p->gp->initializer = arr;
	onnx__tensor_proto__init(t);
	t->name = xstrdup(p, name);
	t->has_data_type = 1;
	t->data_type = dtype;
	t->n_dims = ndim;
	t->dims = malloc((ndim + 1) * sizeof(int64_t));
	t->raw_data.data = malloc(nbytes + 1);
	if (!t->dims || !t->raw_data.data)
		p->err = -ENOMEM;
	else {
		if (ndim)
			memcpy(t->dims, dims, ndim * sizeof(int64_t));
		if (nbytes)
			memcpy(t->raw_data.data, data, nbytes);
	}
	t->has_raw_data = 1;
	t->raw_data.len = nbytes;
	p->gp->initializer[p->gp->n_initializer++] = t;
}

static void rename_str(struct pb *p, char **s, const char *to)
{
	char *d = xstrdup(p, to);

	if (d) {
		free(*s);
		*s = d;
	}
}

/* Names of the pieces of quantized activation tensor q. */
static void act_names(const char *t, char **scale, char **zp, char **q, char **dq,
		      struct pb *p)
{
	*scale = xfmt(p, t, "_scale");
	*zp = xfmt(p, t, "_zero_point");
	*q = xfmt(p, t, "_quantized");
	*dq = xfmt(p, t, "_dequantized");
}

struct wq {
	char *dq; /* name of the dequantized weight */
	char *bdq; /* of the dequantized bias (or NULL) */
	char *q, *scale, *zp, *bq, *bscale; /* initializer names (qlinear) */
	int noc;
};

/*
 * Bias correction: rounding the weights shifts each output channel's mean
 * by sum_k (W - Wq)[o][k] * E[x_k] (E[x] per input channel, from the fp32
 * calibration runs; border padding ignored). Random-weight and
 * BN-folded networks carry most of their output in such means, so the
 * shift is added back to the fp32 bias before it is quantized.
 */
void qz_bias_correction(struct qctx *c, const struct qnode *qn, const float *scale,
			    int axis, const int8_t *wq, double *bias, int64_t nb)
{
	const struct mi_graph *g = c->g;
	const struct mi_tensor *w = &g->tensors[qn->weight];
	const struct qtensor *aq = c->qt_of[qn->act] >= 0 ? &c->qt[c->qt_of[qn->act]] : NULL;
	const float *wf = w->data;

	if (!c->bias_correct || !aq || !aq->csum || aq->ccount <= 0)
		return;
	if (qn->wkind == 0) { /* Conv: W[O][C/G][k...], input NCHW */
		int64_t O = w->dims[0], cpg = w->dims[1];
		int64_t ks = mi_ops_prod(w->dims, 2, w->ndim);
		int64_t G = cpg > 0 ? aq->nch / cpg : 0;

		if (O != nb || G <= 0 || G * cpg != aq->nch || O % G)
			return;
		for (int64_t o = 0; o < O; o++) {
			double s = 0, sc = scale[axis < 0 ? 0 : o];

			for (int64_t ci = 0; ci < cpg; ci++) {
				double m = aq->csum[(o / (O / G)) * cpg + ci] / aq->ccount, e = 0;
				int64_t base = (o * cpg + ci) * ks;

				for (int64_t k = 0; k < ks; k++)
					e += wf[base + k] - wq[base + k] * sc;
				s += e * m;
			}
			bias[o] += s;
		}
	} else { /* Gemm/MatMul: W[K][N] (waxis 1) or W[N][K] (waxis 0) */
		int64_t K = w->dims[qn->waxis ? 0 : 1], N = w->dims[qn->waxis];

		if (N != nb || K != aq->nch)
			return;
		for (int64_t o = 0; o < N; o++) {
			double s = 0, sc = scale[axis < 0 ? 0 : o];

			for (int64_t k = 0; k < K; k++) {
				int64_t i = qn->waxis ? k * N + o : o * K + k;

				s += (wf[i] - wq[i] * sc) * (aq->csum[k] / aq->ccount);
			}
			bias[o] += s;
		}
	}
}

/* Strides and dilations of node n all 1. */
bool qz_unit_stride(const struct mi_node *n)
{
	const struct mi_attr *st = mi_attr_get(n, "strides"), *dl = mi_attr_get(n, "dilations");
	bool unit = true;

	for (int d = 0; st && st->ints && d < st->n; d++)
		unit &= st->ints[d] == 1;
	for (int d = 0; dl && dl->ints && d < dl->n; d++)
		unit &= dl->ints[d] == 1;
	return unit;
}

/*
 * The weights of qnode qn lie in [-qz_wqmax, qz_wqmax]: 127 (8 bits) or 63 (7
 * bits: [-64, 63] is where the AVX2 kernels multiply uint8 x int8 by
 * vpmaddubsw exactly, tile_avx2b).  --weight-bits mixed: 7 bits only where
 * the AVX2 kernels take that route, 8 where 7 would cost accuracy for no
 * time: depthwise convs (their own kernels), the 3x3 stride-1 convs of the
 * AVX2 Winograd path (mi_qwino_fits: int16 transformed weights), GEMVs
 * (mi_qgemm on up to 4 rows, 1x1 convs on one pixel).  This is the
 * choice before --min-cosine's (qnode.w8, qz_wqmax()).
 */
int qz_wqmax_plain(const struct qctx *c, const struct qnode *qn)
{
	const struct mi_graph *g = c->g;
	const struct mi_node *n = &g->nodes[qn->node];
	const struct mi_tensor *w = &g->tensors[qn->weight], *x = &g->tensors[qn->act];
	int64_t px = 1;

	if (c->wbits != WBITS_MIXED)
		return c->wbits == 7 ? 63 : 127;
	if (!mi_tensor_shape_known(x) || x->ndim < 2)
		return 127;
	if (qn->wkind != 0) { /* Gemm/MatMul: rows = the activation's elements / K */
		int64_t k = w->dims[qn->waxis ? 0 : 1];

		return k > 0 && mi_tensor_numel(x) / k > 4 ? 63 : 127;
	}
	int64_t grp = mi_attr_int(n, "group", 1), oc = w->dims[0], ch = w->dims[1] * grp;
	int64_t kh = w->ndim > 3 ? w->dims[2] : 1, kw = w->dims[w->ndim - 1];
	bool unit = qz_unit_stride(n);

	for (int d = 2; d < x->ndim; d++)
		px *= x->dims[d];
	if (grp == ch && oc == ch && kh * kw > 1 && kh <= MI_QDW_KMAX && kw <= MI_QDW_KMAX)
		return 127; /* depthwise */
	if (grp == 1 && kh == 3 && kw == 3 && unit && ch >= MI_QWINO_MIN_C && oc >= MI_QWINO_MIN_OC)
		return 127; /* Winograd */
	if (grp == 1 && kh * kw == 1 && px == 1)
		return 127; /* GEMV */
	return 63;
}

/* qz_wqmax_plain(), or 127 where --min-cosine moved a 7-bit weight to 8 bits
 * (int16 tiles: ~1.25x the 7-bit time, still ~2x faster than fp32) */
int qz_wqmax(const struct qctx *c, const struct qnode *qn)
{
	return qn->w8 ? 127 : qz_wqmax_plain(c, qn);
}

#define WCLIP_LO 0.5   /* weight clipping: limits tried, from max|w| down to */
#define WCLIP_STEPS 50 /* this fraction of it, in this many steps */

/*
 * Per output channel weight scales of qnode qn for weights in [-qmax,
 * qmax] (kept: computed once per node and qmax; the weights do not change
 * after qz_equalize()).  MI_QUANT_WCLIP=0 (default): max|w| / qmax.  =1, =2:
 * the clipping limit r * max|w| (r from 1 down to WCLIP_LO) whose rounding
 * error sum_i v_i (w_i - s clamp(round(w_i / s)))^2 is least, with v_i = 1
 * (=1) or the calibrated variance of the input channel w_i multiplies (=2):
 * after qz_bias_correction() removes the error's mean, the output channel's
 * error is sum_i (w_i - wq_i s)(x_i - E x_i), whose energy is that sum for
 * uncorrelated inputs.  *err: the sum over all channels.  NULL when out of
 * memory.  Off by default: the benchmark CNNs' weights are uniform
 * (random init), whose least error lies at 0.97-1 x max|w|, and neither
 * variant raised their all-int8 cosine (Documentation/quantization.rst).
 */
const float *qz_weight_scales(struct qctx *c, struct qnode *qn, int qmax, double *err)
{
	const struct mi_graph *g = c->g;
	const struct mi_tensor *w = &g->tensors[qn->weight];
	const struct qtensor *aq = c->qt_of[qn->act] >= 0 ? &c->qt[c->qt_of[qn->act]] : NULL;
	int axis = c->per_channel ? qn->waxis : -1, b = qmax == 127;
	int64_t noc = axis < 0 ? 1 : w->dims[axis];
	int64_t total = mi_tensor_numel(w);
	int64_t inner = axis < 0 ? total : mi_ops_prod(w->dims, axis + 1, w->ndim);
	int64_t outer = total / (noc * inner), per = total / noc;
	const float *wf = w->data;
	float *scale, *cw, *cv = NULL;
	double *var = NULL, tot = 0;
	int64_t G = 1, cpg = 0, ks = 1, K = 0;

	if (qn->wscale[b]) {
		*err = qn->werr[b];
		return qn->wscale[b];
	}
	scale = calloc(noc + 1, sizeof(float));
	cw = malloc((per + 1) * sizeof(float));
	if (!scale || !cw)
		goto fail;
	/* the input channels' variances, where calibrated (see
	 * qz_bias_correction() for the layouts) */
	if (c->wclip == 2 && axis >= 0 && aq && aq->csum && aq->csq && aq->ccount > 0) {
		if (qn->wkind == 0) {
			cpg = w->dims[1];
			ks = mi_ops_prod(w->dims, 2, w->ndim);
			G = cpg > 0 ? aq->nch / cpg : 0;
			if (G > 0 && G * cpg == aq->nch && w->dims[0] % G == 0)
				var = calloc(aq->nch + 1, sizeof(double));
		} else {
			K = w->dims[qn->waxis ? 0 : 1];
			if (K == aq->nch)
				var = calloc(aq->nch + 1, sizeof(double));
		}
		cv = var ? malloc((per + 1) * sizeof(float)) : NULL;
		if (var && !cv)
			goto fail;
		for (int i = 0; var && i < aq->nch; i++) {
			double m = aq->csum[i] / aq->ccount;

			/* a floor keeps constant channels in the sum */
			var[i] = fmax(aq->csq[i] / aq->ccount - m * m, 0);
		}
		double vm = 0;

		for (int i = 0; var && i < aq->nch; i++)
			vm += var[i] / aq->nch;
		for (int i = 0; var && i < aq->nch; i++)
			var[i] += 1e-3 * vm + 1e-30;
	}
	for (int64_t ch = 0; ch < noc; ch++) {
		double mx = 0, best = INFINITY, bs = 1;

		/* the channel's weights (and their inputs' variances) */
		for (int64_t o = 0, e = 0; o < outer; o++)
			for (int64_t j = 0; j < inner; j++, e++) {
				int64_t i = (o * noc + ch) * inner + j;

				cw[e] = wf[i];
				mx = fmax(mx, fabsf(wf[i]));
				if (!cv)
					continue;
				if (qn->wkind == 0) /* W[O][C/G][k...] */
					cv[e] = (float)var[(ch / (w->dims[0] / G)) * cpg + (i / ks) % cpg];
				else /* W[K][N] (waxis 1) or W[N][K] */
					cv[e] = (float)var[qn->waxis ? i / w->dims[1] : i % K];
			}
		if (mx <= 0) {
			scale[ch] = 1.0f;
			continue;
		}
		for (int st = 0; st <= (c->wclip ? WCLIP_STEPS : 0); st++) {
			/* (max|w| itself as before: a float division) */
			float s = st ? (float)(mx * (1 - (1 - WCLIP_LO) * st / WCLIP_STEPS) / qmax) :
				       (float)mx / (float)qmax;
			double e2 = 0;

			for (int64_t e = 0; e < per; e++) {
				float v = nearbyintf(cw[e] / s);
				float d = cw[e] - s * (v < -qmax ? -qmax : v > qmax ? qmax : v);

				e2 += (double)d * d * (cv ? cv[e] : 1.0f);
			}
			if (e2 < best) {
				best = e2;
				bs = s;
			}
		}
		scale[ch] = (float)bs;
		tot += best;
	}
	free(cw);
	free(cv);
	free(var);
	qn->wscale[b] = scale;
	qn->werr[b] = *err = tot;
	return scale;
fail:
	free(scale);
	free(cw);
	free(cv);
	free(var);
	return NULL;
}

/* Quantize weight (and bias) of qnode k; emit their DequantizeLinear. */
static void quantize_weight(struct qctx *c, struct pb *p, struct qnode *qn,
			    struct wq *out)
{
	struct mi_graph *g = c->g;
	const struct mi_tensor *w = &g->tensors[qn->weight];
	int axis = c->per_channel ? qn->waxis : -1;
	int64_t noc = axis < 0 ? 1 : w->dims[axis];
	int64_t total = mi_tensor_numel(w);
	int64_t inner = axis < 0 ? total : mi_ops_prod(w->dims, axis + 1, w->ndim);
	const float *wf = w->data;
	float *scale = calloc(noc, sizeof(float));
	int8_t *wq = malloc(total + 1), *zp = calloc(noc, 1);
	const float *sc;
	double werr;
	const char *wn = w->name;
	const struct mi_tensor *xt = &g->tensors[qn->act];
	/* bias in int32 needs the activation scale; fp32 bias otherwise */
	float sx = c->qt_of[qn->act] >= 0 ? c->qt[c->qt_of[qn->act]].scale : 0.0f;
	int qmax = qz_wqmax(c, qn);

	memset(out, 0, sizeof(*out));
	if (!scale || !wq || !zp) {
		p->err = -ENOMEM;
		goto out;
	}
	(void)xt;
	/* symmetric, max |w| (or the clipping limit) at +-qmax (7 bits: 63,
	 * so every weight lies in [-64, 63], the AVX2 vpmaddubsw kernels'
	 * exact range); clipped weights saturate at +-qmax */
	sc = qz_weight_scales(c, qn, qmax, &werr);
	if (!sc) {
		p->err = -ENOMEM;
		goto out;
	}
	memcpy(scale, sc, noc * sizeof(float));
	for (int64_t i = 0; i < total; i++) {
		int64_t ch = axis < 0 ? 0 : (i / inner) % noc;
		float v = nearbyintf(wf[i] / scale[ch]);

		wq[i] = (int8_t)(v < -qmax ? -qmax : v > qmax ? qmax : v);
	}
	out->q = xfmt(p, wn, "_quantized");
	out->scale = xfmt(p, wn, "_scale");
	out->zp = xfmt(p, wn, "_zero_point");
	out->dq = xfmt(p, wn, "_dequantized");
	out->noc = (int)noc;
	if (p->err)
		goto out;
	add_init(p, out->q, ONNX__TENSOR_PROTO__DATA_TYPE__INT8, w->ndim, w->dims, wq, total);
	add_init(p, out->scale, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, axis < 0 ? 0 : 1, &noc,
		 scale, noc * 4);
	add_init(p, out->zp, ONNX__TENSOR_PROTO__DATA_TYPE__INT8, axis < 0 ? 0 : 1, &noc, zp, noc);
	const char *in[3] = { out->q, out->scale, out->zp };
	char *nm = xfmt(p, wn, "_DequantizeLinear");
	Onnx__NodeProto *n = new_node(p, "DequantizeLinear", nm ? nm : "", in, 3, out->dq);

	free(nm);
	if (n && axis >= 0)
		node_set_int(p, n, "axis", axis);
	push_node(p, n);

	if (qn->bias >= 0 && sx > 0) {
		const struct mi_tensor *b = &g->tensors[qn->bias];
		int64_t nb = mi_tensor_numel(b);

		if (nb != (axis < 0 ? nb : noc) || (axis < 0 && false))
			goto out;
		float *bs = malloc(nb * sizeof(float));
		int32_t *bq = malloc(nb * sizeof(int32_t));
		double *bf = malloc(nb * sizeof(double));

		if (!bs || !bq || !bf) {
			free(bs);
			free(bq);
			free(bf);
			p->err = -ENOMEM;
			goto out;
		}
		for (int64_t o = 0; o < nb; o++)
			bf[o] = ((const float *)b->data)[o];
		qz_bias_correction(c, qn, scale, axis, wq, bf, nb);
		for (int64_t o = 0; o < nb; o++) {
			bs[o] = sx * scale[axis < 0 ? 0 : o];
			double v = nearbyint(bf[o] / bs[o]);

			bq[o] = (int32_t)(v < -2147483647.0 ? -2147483647.0 :
					  v > 2147483647.0 ? 2147483647.0 : v);
		}
		out->bq = xfmt(p, b->name, "_quantized");
		out->bscale = xfmt(p, b->name, "_scale");
		out->bdq = xfmt(p, b->name, "_dequantized");
		if (!p->err) {
			add_init(p, out->bq, ONNX__TENSOR_PROTO__DATA_TYPE__INT32, 1, &nb, bq, nb * 4);
			add_init(p, out->bscale, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, &nb, bs,
				 nb * 4);
			const char *bin[2] = { out->bq, out->bscale };
			char *bnm = xfmt(p, b->name, "_DequantizeLinear");
			Onnx__NodeProto *bn = new_node(p, "DequantizeLinear", bnm ? bnm : "",
						       bin, 2, out->bdq);

			free(bnm);
			if (bn)
				node_set_int(p, bn, "axis", 0);
			push_node(p, bn);
		}
		free(bs);
		free(bq);
		free(bf);
	}
out:
	free(scale);
	free(wq);
	free(zp);
}

static void wq_free(struct wq *w)
{
	free(w->dq);
	free(w->bdq);
	free(w->q);
	free(w->scale);
	free(w->zp);
	free(w->bq);
	free(w->bscale);
}

/* Q -> DQ pair for activation tensor qi. */
static void emit_qdq(struct qctx *c, struct pb *p, int qi)
{
	const struct qtensor *q = &c->qt[qi];
	const char *tn = c->g->tensors[q->t].name;
	char *s, *z, *qn, *dqn, *n1, *n2;
	uint8_t zp = (uint8_t)q->zp;

	act_names(tn, &s, &z, &qn, &dqn, p);
	if (c->tag) {
		char b1[32], b2[32];

		snprintf(b1, sizeof(b1), "mi#q%d", qi);
		snprintf(b2, sizeof(b2), "mi#d%d", qi);
		n1 = xstrdup(p, b1);
		n2 = xstrdup(p, b2);
	} else {
		n1 = xfmt(p, tn, "_QuantizeLinear");
		n2 = xfmt(p, tn, "_DequantizeLinear");
	}
	if (!p->err) {
		add_init(p, s, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 0, NULL, &q->scale, 4);
		add_init(p, z, ONNX__TENSOR_PROTO__DATA_TYPE__UINT8, 0, NULL, &zp, 1);
		const char *in1[3] = { tn, s, z }, *in2[3] = { qn, s, z };

		push_node(p, new_node(p, "QuantizeLinear", n1, in1, 3, qn));
		push_node(p, new_node(p, "DequantizeLinear", n2, in2, 3, dqn));
	}
	free(s);
	free(z);
	free(qn);
	free(dqn);
	free(n1);
	free(n2);
}

static int find_pnode(Onnx__GraphProto *gp, const char *out0)
{
	for (size_t i = 0; i < gp->n_node; i++)
		if (gp->node[i]->n_output && !strcmp(gp->node[i]->output[0], out0))
			return (int)i;
	return -1;
}

static int64_t opset_of(const Onnx__ModelProto *mp)
{
	for (size_t i = 0; i < mp->n_opset_import; i++) {
		const Onnx__OperatorSetIdProto *o = mp->opset_import[i];

		if (!o->domain || !o->domain[0] || !strcmp(o->domain, "ai.onnx"))
			return o->version;
	}
	return 0;
}

/* Drop initializers nobody uses any more (the fp32 weights), and graph
 * inputs that only declared them (IR < 4 models list initializers there). */
static void drop_unused_inits(Onnx__GraphProto *gp)
{
	size_t k = 0, ki = 0;

	for (size_t i = 0; i < gp->n_initializer; i++) {
		Onnx__TensorProto *t = gp->initializer[i];
		bool used = false;

		for (size_t j = 0; j < gp->n_node && !used; j++)
			for (size_t a = 0; a < gp->node[j]->n_input; a++)
				if (!strcmp(gp->node[j]->input[a], t->name)) {
					used = true;
					break;
				}
		for (size_t j = 0; j < gp->n_output && !used; j++)
			used = !strcmp(gp->output[j]->name, t->name);
		if (used) {
			gp->initializer[k++] = t;
			continue;
		}
		/* remove a graph input of the same name */
		ki = 0;
		for (size_t j = 0; j < gp->n_input; j++) {
			if (!strcmp(gp->input[j]->name, t->name))
				onnx__value_info_proto__free_unpacked(gp->input[j], NULL);
			else
				gp->input[ki++] = gp->input[j];
		}
		gp->n_input = ki;
		onnx__tensor_proto__free_unpacked(t, NULL);
	}
	gp->n_initializer = k;
}

/* Replace Conv/MatMul QDQ groups by QLinearConv/QLinearMatMul. */
static void to_qlinear(struct qctx *c, struct pb *p, Onnx__NodeProto **orig, size_t norig,
		       const struct wq *wqs)
{
	struct mi_graph *g = c->g;

	for (int k = 0; k < c->nnodes; k++) {
		const struct qnode *qn = &c->nodes[k];
		const struct wq *w = &wqs[k];
		int qo = c->qt_of[qn->out], qa = c->qt_of[qn->act];

		if (qn->wkind == 1 || qo < 0 || qa < 0 || !w->q || c->qt[qo].fp32 ||
		    c->qt[qa].fp32)
			continue;
		if (qn->act_node >= 0 && c->qt[qo].zp != 0)
			continue; /* Relu/Clip not implied by saturation */
		if (qn->bias >= 0 && !w->bq)
			continue;
		int pi = find_pnode(p->gp, qn->oname);

		if (pi < 0)
			continue;
		Onnx__NodeProto *pn = p->gp->node[pi];
		const char *xn = g->tensors[qn->act].name, *yn = g->tensors[qn->out].name;
		char *xs, *xz, *xq, *xdq, *ys, *yz, *yq, *ydq;

		act_names(xn, &xs, &xz, &xq, &xdq, p);
		act_names(yn, &ys, &yz, &yq, &ydq, p);
		if (p->err)
			return;
		const char *in[9] = { xq, xs, xz, w->q, w->scale, w->zp, ys, yz, w->bq };
		int nin = qn->wkind == 0 ? (w->bq ? 9 : 8) : 8;
		Onnx__NodeProto *nn = new_node(p, qn->wkind == 0 ? "QLinearConv" : "QLinearMatMul",
					       pn->name ? pn->name : "", in, nin, yq);

		if (nn && qn->wkind == 0) {
			/* keep the conv attributes */
			nn->attribute = pn->attribute;
			nn->n_attribute = pn->n_attribute;
			pn->attribute = NULL;
			pn->n_attribute = 0;
		}
		/* replace the conv by the QLinear node; remove the act node and
		 * the Q of the output (its DQ stays for the consumers) */
		if (nn) {
			onnx__node_proto__free_unpacked(pn, NULL);
			p->gp->node[pi] = nn;
		}
		char *qname = xfmt(p, yn, "_QuantizeLinear");
		const char *actout = qn->act_node >= 0 ? yn : NULL;

		for (size_t i = 0; i < p->gp->n_node; i++) {
			Onnx__NodeProto *x = p->gp->node[i];

			if (!x)
				continue;
			if ((qname && x->name && !strcmp(x->name, qname) &&
			     !strcmp(x->op_type, "QuantizeLinear")) ||
			    (actout && x->n_output && !strcmp(x->output[0], actout) &&
			     (!strcmp(x->op_type, "Relu") || !strcmp(x->op_type, "Clip")))) {
				onnx__node_proto__free_unpacked(x, NULL);
				p->gp->node[i] = NULL;
			}
		}
		free(qname);
		/* compact */
		size_t m = 0;

		for (size_t i = 0; i < p->gp->n_node; i++)
			if (p->gp->node[i])
				p->gp->node[m++] = p->gp->node[i];
		p->gp->n_node = m;
		free(xs), free(xz), free(xq), free(xdq), free(ys), free(yz), free(yq), free(ydq);
	}
	(void)orig;
	(void)norig;
}

/* ---- IR -> ModelProto ---------------------------------------------------- */

static Onnx__TensorProto *tensor_to_proto(struct pb *p, const struct mi_tensor *t,
					  const char *name)
{
	Onnx__TensorProto *tp = calloc(1, sizeof(*tp));
	size_t es = mi_dtype_size(t->dtype);

	if (!tp) {
		p->err = -ENOMEM;
		return NULL;
	}
	onnx__tensor_proto__init(tp);
	tp->name = xstrdup(p, name ? name : t->name ? t->name : "");
	tp->has_data_type = 1;
	tp->data_type = t->dtype;
	tp->n_dims = t->ndim;
	tp->dims = malloc((t->ndim + 1) * sizeof(int64_t));
	size_t nb = es && t->ndim >= 0 ? (size_t)mi_tensor_numel(t) * es : 0;

	tp->raw_data.data = malloc(nb + 1);
	if (!tp->dims || !tp->raw_data.data) {
		p->err = -ENOMEM;
		return tp;
	}
	memcpy(tp->dims, t->dims, t->ndim * sizeof(int64_t));
	if (nb && t->data)
		memcpy(tp->raw_data.data, t->data, nb);
	tp->has_raw_data = 1;
	tp->raw_data.len = nb;
	if (!es)
		p->err = -EOPNOTSUPP;
	return tp;
}

static Onnx__AttributeProto *attr_to_proto(struct pb *p, const struct mi_attr *a)
{
	Onnx__AttributeProto *ap = calloc(1, sizeof(*ap));

	if (!ap) {
		p->err = -ENOMEM;
		return NULL;
	}
	onnx__attribute_proto__init(ap);
	ap->name = xstrdup(p, a->name);
	ap->has_type = 1;
	ap->type = a->type;
	switch (a->type) {
	case MI_ATTR_FLOAT:
		ap->has_f = 1;
		ap->f = a->f;
		break;
	case MI_ATTR_INT:
		ap->has_i = 1;
		ap->i = a->i;
		break;
	case MI_ATTR_STRING:
		ap->has_s = 1;
		ap->s.data = (uint8_t *)xstrdup(p, a->s ? a->s : "");
		ap->s.len = a->s ? strlen(a->s) : 0;
		break;
	case MI_ATTR_FLOATS:
		ap->floats = malloc((a->n + 1) * sizeof(float));
		if (!ap->floats)
			p->err = -ENOMEM;
		else
			memcpy(ap->floats, a->floats, a->n * sizeof(float));
		ap->n_floats = ap->floats ? a->n : 0;
		break;
	case MI_ATTR_INTS:
		ap->ints = malloc((a->n + 1) * sizeof(int64_t));
		if (!ap->ints)
			p->err = -ENOMEM;
		else
			memcpy(ap->ints, a->ints, a->n * sizeof(int64_t));
		ap->n_ints = ap->ints ? a->n : 0;
		break;
	case MI_ATTR_STRINGS:
		ap->strings = calloc(a->n + 1, sizeof(ProtobufCBinaryData));
		if (!ap->strings) {
			p->err = -ENOMEM;
			break;
		}
		ap->n_strings = a->n;
		for (int i = 0; i < a->n; i++) {
			ap->strings[i].data = (uint8_t *)xstrdup(p, a->strings[i]);
			ap->strings[i].len = strlen(a->strings[i]);
		}
		break;
	case MI_ATTR_TENSOR:
		ap->t = tensor_to_proto(p, a->t, "");
		break;
	default:
		p->err = -EOPNOTSUPP;
	}
	return ap;
}

/* A live IR node as a NodeProto; inputs renamed by the caller. */
static Onnx__NodeProto *node_to_proto(struct pb *p, const struct mi_graph *g,
				      const struct mi_node *n)
{
	Onnx__NodeProto *np = calloc(1, sizeof(*np));

	if (!np) {
		p->err = -ENOMEM;
		return NULL;
	}
	onnx__node_proto__init(np);
	np->name = xstrdup(p, n->name ? n->name : "");
	np->op_type = xstrdup(p, n->op_type);
	if (n->domain && n->domain[0])
		np->domain = xstrdup(p, n->domain);
	np->input = calloc(n->ninputs + 1, sizeof(char *));
	np->output = calloc(n->noutputs + 1, sizeof(char *));
	np->attribute = calloc(n->nattrs + 1, sizeof(*np->attribute));
	if (!np->input || !np->output || !np->attribute) {
		p->err = -ENOMEM;
		return np;
	}
	np->n_input = n->ninputs;
	for (int i = 0; i < n->ninputs; i++)
		np->input[i] = xstrdup(p, n->inputs[i] >= 0 ? g->tensors[n->inputs[i]].name : "");
	np->n_output = n->noutputs;
	for (int i = 0; i < n->noutputs; i++)
		np->output[i] = xstrdup(p, g->tensors[n->outputs[i]].name);
	np->n_attribute = n->nattrs;
	for (int i = 0; i < n->nattrs; i++)
		np->attribute[i] = attr_to_proto(p, &n->attrs[i]);
	return np;
}

static Onnx__ValueInfoProto *value_info(struct pb *p, const struct mi_tensor *t)
{
	Onnx__ValueInfoProto *v = calloc(1, sizeof(*v));
	Onnx__TypeProto *tp = calloc(1, sizeof(*tp));
	Onnx__TypeProto__Tensor *tt = calloc(1, sizeof(*tt));
	Onnx__TensorShapeProto *sh = calloc(1, sizeof(*sh));

	if (!v || !tp || !tt || !sh) {
		free(v), free(tp), free(tt), free(sh);
		p->err = -ENOMEM;
		return NULL;
	}
	onnx__value_info_proto__init(v);
	onnx__type_proto__init(tp);
	onnx__type_proto__tensor__init(tt);
	onnx__tensor_shape_proto__init(sh);
	v->name = xstrdup(p, t->name);
	v->type = tp;
	tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
	tp->tensor_type = tt;
	tt->has_elem_type = 1;
	tt->elem_type = t->dtype;
	if (t->ndim < 0)
		return v;
	tt->shape = sh;
	sh->dim = calloc(t->ndim + 1, sizeof(*sh->dim));
	if (!sh->dim) {
		p->err = -ENOMEM;
		return v;
	}
	for (int d = 0; d < t->ndim; d++) {
		Onnx__TensorShapeProto__Dimension *dm = calloc(1, sizeof(*dm));

		if (!dm) {
			p->err = -ENOMEM;
			return v;
		}
		onnx__tensor_shape_proto__dimension__init(dm);
		if (t->dims[d] >= 0) {
			dm->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
			dm->dim_value = t->dims[d];
		} else if (t->dim_param[d]) {
			dm->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
			dm->dim_param = xstrdup(p, t->dim_param[d]);
		}
		sh->dim[sh->n_dim++] = dm;
	}
	return v;
}

static void push_init(struct pb *p, Onnx__TensorProto *t)
{
	Onnx__TensorProto **arr = realloc(p->gp->initializer,
					  (p->gp->n_initializer + 1) * sizeof(*arr));

	if (!arr || !t) {
		p->err = -ENOMEM;
		if (t)
			onnx__tensor_proto__free_unpacked(t, NULL);
		return;
	}
	p->gp->initializer = arr;
	p->gp->initializer[p->gp->n_initializer++] = t;
}

/*
 * Write the quantized model: the graph comes from the IR (BatchNorm
 * already folded into the convolutions), the model header (IR version,
 * opsets, producer, metadata) from the original file.
 */
int qz_rewrite(struct qctx *c, const char *in_path, const char *out_path,
		   uint8_t **bufp, size_t *lenp)
{
	struct mi_graph *g = c->g;
	Onnx__ModelProto *mp;
	Onnx__GraphProto *gp;
	struct pb p = { 0 };
	struct wq *wqs = NULL;
	bool *need = NULL;
	int err;

	if (!c->src) {
		err = mi_read_file(in_path, (size_t)4 << 30, &c->src, &c->srclen);
		if (err)
			return qz_err("%s: cannot read: %s", in_path, strerror(-err)) ? err : 0;
	}
	mp = onnx__model_proto__unpack(NULL, c->srclen, c->src);
	if (!mp || !mp->graph)
		return qz_err("%s: not a valid ONNX model", in_path) ? -EINVAL : 0;
	int64_t opset = opset_of(mp);

	if (opset < 10) {
		onnx__model_proto__free_unpacked(mp, NULL);
		return qz_err("%s: opset %lld has no QuantizeLinear (needs >= 10)", in_path,
			    (long long)opset) ? -EOPNOTSUPP : 0;
	}
	if (opset < 13 && c->per_channel) {
		fprintf(stderr, "metainfer quantize: opset %lld < 13: per-tensor weight scales\n",
			(long long)opset);
		c->per_channel = false;
	}
	/* a fresh graph, keeping the original's name and doc string */
	gp = calloc(1, sizeof(*gp));
	wqs = calloc(c->nnodes + 1, sizeof(*wqs));
	need = calloc(g->ntensors + 1, sizeof(bool));
	if (!gp || !wqs || !need) {
		free(gp);
		err = -ENOMEM;
		goto out;
	}
	onnx__graph_proto__init(gp);
	gp->name = mp->graph->name;
	mp->graph->name = NULL;
	onnx__graph_proto__free_unpacked(mp->graph, NULL);
	mp->graph = gp;
	p.gp = gp;
	/* inputs / outputs */
	gp->input = calloc(g->ninputs + 1, sizeof(*gp->input));
	gp->output = calloc(c->orig_noutputs + 1, sizeof(*gp->output));
	if (!gp->input || !gp->output) {
		err = -ENOMEM;
		goto out;
	}
	for (int i = 0; i < g->ninputs; i++)
		gp->input[gp->n_input++] = value_info(&p, &g->tensors[g->inputs[i]]);
	for (int i = 0; i < c->orig_noutputs; i++)
		gp->output[gp->n_output++] = value_info(&p, &g->tensors[g->outputs[i]]);
	/* weight DQs first (they depend on initializers only) */
	for (int k = 0; k < c->nnodes; k++)
		if (!c->nodes[k].wfp32)
			quantize_weight(c, &p, &c->nodes[k], &wqs[k]);
	for (int i = 0; i < c->nqt; i++)
		if ((g->tensors[c->qt[i].t].flags & MI_TF_INPUT) && !c->qt[i].fp32)
			emit_qdq(c, &p, i);
	for (int o = 0; o < g->norder && !p.err; o++) {
		struct mi_node *n = &g->nodes[g->order[o]];
		Onnx__NodeProto *pn;
		int k = -1;

		for (int j = 0; j < n->nattrs; j++)
			if (n->attrs[j].type == MI_ATTR_GRAPH) {
				err = qz_err("%s: node '%s' (%s) has a subgraph: not supported",
					   in_path, n->name, n->op_type) ? -EOPNOTSUPP : 0;
				goto out;
			}
		for (int j = 0; j < c->nnodes; j++)
			if (c->nodes[j].node == g->order[o])
				k = j;
		pn = node_to_proto(&p, g, n);
		if (!pn)
			break;
		if (c->tag) {
			char b[32];

			snprintf(b, sizeof(b), "mi#n%d", g->order[o]);
			rename_str(&p, &pn->name, b);
		}
		for (int a = 0; a < n->ninputs; a++) {
			int t = n->inputs[a];

			if (t < 0)
				continue;
			if (k >= 0 && a == 1 && wqs[k].dq) {
				rename_str(&p, &pn->input[a], wqs[k].dq);
			} else if (k >= 0 && a == 2 && wqs[k].bdq) {
				rename_str(&p, &pn->input[a], wqs[k].bdq);
			} else if (c->qt_of[t] >= 0 && !c->qt[c->qt_of[t]].fp32) {
				char *dq = xfmt(&p, g->tensors[t].name, "_dequantized");

				if (dq) {
					free(pn->input[a]);
					pn->input[a] = dq;
				}
			} else if (g->tensors[t].flags & MI_TF_CONST) {
				need[t] = true;
			}
		}
		push_node(&p, pn);
		for (int j = 0; j < n->noutputs; j++) {
			int t = n->outputs[j];

			if (c->qt_of[t] >= 0 && !(g->tensors[t].flags & MI_TF_INPUT) &&
			    !c->qt[c->qt_of[t]].fp32)
				emit_qdq(c, &p, c->qt_of[t]);
		}
	}
	/* constants the emitted nodes read (folded ones included) */
	for (int t = 0; t < g->ntensors && !p.err; t++)
		if (need[t]) {
			if (!g->tensors[t].data) {
				err = qz_err("%s: constant '%s' has no data", in_path, g->tensors[t].name) ?
					      -EINVAL : 0;
				goto out;
			}
			push_init(&p, tensor_to_proto(&p, &g->tensors[t], NULL));
		}
	if (p.err) {
		err = p.err;
		goto out;
	}
	gp->node = p.nodes;
	gp->n_node = p.nn;
	p.nodes = NULL;
	if (c->qlinear)
		to_qlinear(c, &p, NULL, 0, wqs);
	drop_unused_inits(gp);
	if (p.err) {
		err = p.err;
		goto out;
	}
	size_t sz = onnx__model_proto__get_packed_size(mp);
	uint8_t *ob = malloc(sz + 1);
	FILE *f;

	if (!ob) {
		err = -ENOMEM;
		goto out;
	}
	onnx__model_proto__pack(mp, ob);
	if (bufp) {
		*bufp = ob;
		*lenp = sz;
		ob = NULL;
		goto out;
	}
	f = fopen(out_path, "wb");
	if (!f || fwrite(ob, 1, sz, f) != sz) {
		err = qz_err("%s: cannot write: %s", out_path, strerror(errno)) ? -EIO : 0;
		if (f)
			fclose(f);
	} else if (fclose(f)) {
		err = qz_err("%s: cannot write: %s", out_path, strerror(errno)) ? -EIO : 0;
	}
	free(ob);
out:
	if (p.nodes) {
		for (size_t i = 0; i < p.nn; i++)
			if (p.nodes[i])
				onnx__node_proto__free_unpacked(p.nodes[i], NULL);
		free(p.nodes);
	}
	for (int k = 0; wqs && k < c->nnodes; k++)
		wq_free(&wqs[k]);
	free(wqs);
	free(need);
	onnx__model_proto__free_unpacked(mp, NULL);
	if (err == -ENOMEM)
		qz_err("out of memory");
	else if (err == -EOPNOTSUPP && !p.err)
		;
	else if (err == -EOPNOTSUPP)
		qz_err("%s: a tensor or attribute type cannot be written", in_path);
	return err;
}
