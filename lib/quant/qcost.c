// SPDX-License-Identifier: MIT
/*
 * `metainfer quantize --min-cosine`: the time model of a configuration
 * (step classes, profiles, prediction).
 */
#include "debug.h"
#include "quant/quantize-impl.h"

void qtime_free(struct qtime *tm)
{
	free(tm->n8);
	free(tm->n32);
	free(tm->a8);
	free(tm->a32);
	free(tm->q);
	free(tm->dq);
	free(tm->kq);
	free(tm->prod);
	free(tm->cstart);
	free(tm->cons);
	free(tm->mode);
	free(tm->pt);
	free(tm->side);
}

/* A model to profile: the configuration the flags say now, written with
 * tagged node names and loaded at 1 thread with per-node profiling. */
/* merge: 0 for one profile entry per node (no 1x1 + depthwise or SE fold
 * merges: the fp32 kernels' times per node) */
static int profile_load(struct qctx *c, struct mi_model **m, bool merge)
{
	struct mi_model_opts mo = { .flags = MI_MODEL_PROFILE, .nthreads = 1,
				    .isa = c->isa_cap };
	uint8_t *buf = NULL;
	size_t len = 0;
	bool ql = c->qlinear;
	int err;

	c->tag = true;
	c->qlinear = false;
	err = qz_rewrite(c, c->path, NULL, &buf, &len);
	c->tag = false;
	c->qlinear = ql;
	if (err)
		return err;
#ifdef MI_MODEL_NO_MERGE
	if (!merge)
		mo.flags |= MI_MODEL_NO_MERGE;
#endif
	err = mi_model_load_buffer(buf, len, NULL, "quantized model", &mo, m);
	free(buf);
	if (err < 0)
		return qz_err("--min-cosine: %s", mi_last_error()) ? err : 0;
	return 0;
}

#define NPROF 5

/* The class of a step running IR node x as op (the planner's op type),
 * int8 (i8: in an int8 context, kq: its quantizable node or -1): the
 * operator, for convolutions by kernel, stride and shape: dense 3x3
 * stride 1 of 16+ channels each side (conv3w: Winograd, int8 on AVX2:
 * lib/quant/qwino.c), other dense (conv), 1x1 (conv1x1), 1x1 on one pixel
 * (gemv); int8 dense and 1x1 convs by their weights' bits (qz_wqmax()): 7
 * (conv, conv1x1: on AVX2 the vpmaddubsw tiles, tile_avx2b) or 8 (conv8,
 * conv1x1_8: on AVX2 the int16 tiles, 1.2-1.3x slower; the same kernels
 * as 7 bits with VNNI). */
static int step_class(const struct qctx *c, int x, const char *op, bool i8, int kq)
{
	const struct mi_node *n = &c->g->nodes[x];

	if (!strcmp(op, "Conv") || !strcmp(op, "QLinearConv")) {
		int64_t grp = mi_attr_int(n, "group", 1);
		const struct mi_tensor *w = n->ninputs > 1 && n->inputs[1] >= 0 ?
						    &c->g->tensors[n->inputs[1]] : NULL;
		int64_t kk = 1;

		for (int d = 2; w && d < w->ndim; d++)
			kk *= w->dims[d];
		if (grp > 1 && w && w->ndim > 1 && w->dims[1] == 1) {
			/* depthwise: by kernel area (up to 3x3, larger) and
			 * stride (1, more); other grouped convs run (and cost) as
			 * dense ones, per group (priced as depthwise before the
			 * AVX2 fit: a groups=2 3x3 conv 4x its int8 time) */
			const struct mi_attr *st = mi_attr_get(n, "strides");
			bool s2 = false;

			for (int d = 0; st && st->ints && d < st->n; d++)
				s2 |= st->ints[d] > 1;
			return kk <= 9 ? (s2 ? CC_DW3S2 : CC_DW) : (s2 ? CC_DW5S2 : CC_DW5);
		}
		if (kk == 1) {
			/* on one output pixel (an SE block's convs): the GEMV
			 * kernels, 8-bit weights (qz_wqmax()) */
			const struct mi_tensor *y = n->noutputs > 0 ?
							    &c->g->tensors[n->outputs[0]] : NULL;
			int64_t px = 1;

			for (int d = 2; y && d < y->ndim; d++)
				px *= y->dims[d];
			if (y && mi_tensor_shape_known(y) && px == 1)
				return CC_GEMV;
			return i8 && kq >= 0 && qz_wqmax(c, &c->nodes[kq]) > 63 ? CC_CONV1_8 : CC_CONV1;
		}
		if (w && w->ndim == 4 && w->dims[2] == 3 && w->dims[3] == 3 && qz_unit_stride(n) &&
		    w->dims[1] >= MI_QWINO_MIN_C && w->dims[0] >= MI_QWINO_MIN_OC)
			return CC_CONV3W;
		return i8 && kq >= 0 && qz_wqmax(c, &c->nodes[kq]) > 63 ? CC_CONV8 : CC_CONV;
	}
	if (!strcmp(op, "Gemm") || !strcmp(op, "MatMul") || !strcmp(op, "QLinearMatMul"))
		return CC_GEMM;
	if (!strcmp(op, "MaxPool") || !strcmp(op, "AveragePool"))
		return CC_POOL;
	if (!strcmp(op, "GlobalAveragePool") || !strcmp(op, "ReduceMean"))
		return CC_GAP;
	if (!strcmp(op, "Add") || !strcmp(op, "Sub") || !strcmp(op, "Div"))
		return CC_ADD;
	if (!strcmp(op, "Mul")) {
		/* a broadcast of a vector (a squeeze-excitation gate) or
		 * elementwise (a scalar counts as elementwise) */
		int64_t lo = -1, out = n->noutputs > 0 ?
					       mi_tensor_numel(&c->g->tensors[n->outputs[0]]) : -1;

		for (int a = 0; a < n->ninputs; a++) {
			int64_t e = n->inputs[a] >= 0 ?
					    mi_tensor_numel(&c->g->tensors[n->inputs[a]]) : -1;

			if (e >= 0 && (lo < 0 || e < lo))
				lo = e;
		}
		return lo > 1 && lo < out ? CC_SEMUL : CC_MUL;
	}
	if (!strcmp(op, "Sigmoid") || !strcmp(op, "HardSigmoid") || !strcmp(op, "Tanh") ||
	    !strcmp(op, "Exp") || !strcmp(op, "Erf") || !strcmp(op, "Softmax"))
		return CC_SIGM;
	if (!strcmp(op, "HardSwish") || !strcmp(op, "Silu") || !strcmp(op, "Gelu"))
		return CC_HSWISH;
	if (!strcmp(op, "Relu") || !strcmp(op, "Clip") || !strcmp(op, "LeakyRelu") ||
	    !strcmp(op, "PRelu"))
		return CC_RELU;
	/* a copy that reorders (~0.09 ns per element read and written) or
	 * block copies (Concat, Split, Slice: ~0.01-0.03 ns) */
	if (!strcmp(op, "Transpose") || !strcmp(op, "Gather") || !strcmp(op, "DepthToSpace") ||
	    !strcmp(op, "SpaceToDepth"))
		return CC_MOVE;
	if (!strcmp(op, "Concat") || !strcmp(op, "Split") || !strcmp(op, "Slice"))
		return CC_CONCAT;
	if (!strcmp(op, "Reshape") || !strcmp(op, "Flatten") || !strcmp(op, "Squeeze") ||
	    !strcmp(op, "Unsqueeze") || !strcmp(op, "Identity") || !strcmp(op, "Shape"))
		return CC_VIEW;
	return CC_OTHER;
}

/* Channels (dimension 1) of t, 1 for a tensor of fewer dimensions. */
static double tensor_channels(const struct mi_tensor *t)
{
	return t->ndim > 1 && t->dims[1] > 0 ? (double)t->dims[1] : 1;
}

/* A Conv node that is not grouped. */
static bool dense_conv(const struct mi_node *n)
{
	return !strcmp(n->op_type, "Conv") && mi_attr_int(n, "group", 1) == 1;
}

/* The class of a standalone QuantizeLinear (dq false) or DequantizeLinear
 * of quantized tensor qi, by the layout the int8 planner gives its
 * quantized side (lib/quant/qplan.c, plan_c4_tensors()): CC_CONV where that
 * is the C4 layout (a 4-D tensor of 4n channels, written by a convolution
 * for a DQ (through layout-keeping nodes), read by ungrouped convolutions
 * only for a Q), else CC_OTHER
 * (planar: the graph input, an SE gate's product, a tensor a depthwise
 * convolution or another node reads), measured 2-2.5x slower per element
 * (MobileNetV3-Small: 0.36 against 0.15 ns). */
static int qdq_class(const struct qctx *c, int qi, bool dq)
{
	const struct mi_graph *g = c->g;
	const struct mi_tensor *x = &g->tensors[c->qt[qi].t];
	int t = c->qt[qi].t, nr = 0;

	if (x->ndim != 4 || x->dims[1] <= 0 || x->dims[1] % 4)
		return CC_OTHER;
	/* a DQ: the producer, through nodes that keep the layout (an
	 * activation fused into the conv or run as a byte table, Add,
	 * MaxPool, Concat: first inputs), is a convolution */
	for (int hop = 0; dq && hop < 8; hop++) {
		const struct mi_node *n = NULL;

		for (int i = 0; i < g->nnodes && !n; i++)
			for (int a = 0; a < g->nodes[i].noutputs; a++)
				if (g->nodes[i].outputs[a] == t)
					n = &g->nodes[i];
		if (!n || n->ninputs < 1 || n->inputs[0] < 0)
			return CC_OTHER;
		if (!strcmp(n->op_type, "Conv"))
			return CC_CONV;
		if (strcmp(n->op_type, "Relu") && strcmp(n->op_type, "Clip") &&
		    strcmp(n->op_type, "LeakyRelu") && strcmp(n->op_type, "HardSwish") &&
		    strcmp(n->op_type, "HardSigmoid") && strcmp(n->op_type, "Add") &&
		    strcmp(n->op_type, "MaxPool") && strcmp(n->op_type, "Concat"))
			return CC_OTHER;
		t = n->inputs[0];
	}
	for (int i = 0; !dq && i < g->nnodes; i++) {
		const struct mi_node *n = &g->nodes[i];

		for (int a = 0; a < n->ninputs; a++)
			if (n->inputs[a] == t) {
				if (!dense_conv(n))
					return CC_OTHER;
				nr++;
				break;
			}
	}
	return nr ? CC_CONV : CC_OTHER;
}

/* Sizes of IR node x: multiply-adds (quantizable nodes; another node: the
 * channels of its output, per-channel work such as a global pooling's or
 * an SE gate's), elements of its non-constant inputs and outputs, weight
 * elements. */
static void step_sizes(const struct qctx *c, const int *kq, int x, double f[3])
{
	const struct mi_node *n = &c->g->nodes[x];

	f[0] = kq[x] >= 0	  ? qz_node_macs(c, kq[x]) :
	       n->noutputs > 0 ? tensor_channels(&c->g->tensors[n->outputs[0]]) :
				 0;
	f[1] = 0;
	f[2] = kq[x] >= 0 ? (double)mi_tensor_numel(&c->g->tensors[c->nodes[kq[x]].weight]) : 0;
	for (int a = 0; a < n->ninputs; a++)
		if (n->inputs[a] >= 0 && !(c->g->tensors[n->inputs[a]].flags & MI_TF_CONST))
			f[1] += fmax((double)mi_tensor_numel(&c->g->tensors[n->inputs[a]]), 0);
	for (int j = 0; j < n->noutputs; j++)
		f[1] += fmax((double)mi_tensor_numel(&c->g->tensors[n->outputs[j]]), 0);
}

/* The table of the int8 kernels mi_quant_isa() picks: the AVX2 fit on
 * AVX2 (MI_CPU_ISA=avx2 gives an AVX2 host's choice anywhere), else the
 * AVX-512 VNNI one. */
static const double (*cm_table(void))[CC_NCLS][5]
{
	return mi_quant_isa() == MI_QISA_AVX2 ? cm_rate_avx2 : cm_rate_avx512;
}

static bool cm_empty(const double *r)
{
	return !r[0] && !r[1] && !r[2] && !r[3] && !r[4];
}

static double step_model(int ctx, int cls, const double f[3])
{
	static const int sibling[CM_NCTX] = { CM_A32, CM_N32, CM_A8, CM_N8, CM_Q, CM_DQ };
	/* a class split from another after a table was fitted */
	static const int parent[CC_NCLS] = { [CC_CONV3W] = CC_CONV + 1, [CC_GEMV] = CC_CONV1 + 1,
					     [CC_CONV8] = CC_CONV + 1, [CC_CONV1_8] = CC_CONV1 + 1 };
	const double(*cm)[CC_NCLS][5] = cm_table();
	const double *r = cm[ctx][cls];

	/* a class the table has no row for in this context nor its sibling:
	 * its parent's; then a class the fit saw no step of in this context:
	 * as in the sibling context (alone / inside a run of its kind), else
	 * as an Add */
	if (cm_empty(r) && cm_empty(cm[sibling[ctx]][cls]) && parent[cls])
		r = cm[ctx][cls = parent[cls] - 1];
	if (cm_empty(r))
		r = cm[sibling[ctx]][cls];
	if (cm_empty(r) && ctx <= CM_A8)
		r = cm[ctx][CC_ADD];

	return r[0] * f[0] + r[1] * f[1] + r[2] * f[2] + r[3] + r[4] * fmax(f[1] - CM_BIG, 0);
}

/* Run the NPROF models once each on evaluation input 0 and cost each step
 * that ran by the cost model (timed: in turn, so that load from other
 * processes hits them alike, MINCOS_PROF_RUNS times after one warm-up,
 * each step's minimum time); add each node's time to ns[p][node] (where
 * pick[p], if not NULL, says so), each standalone QuantizeLinear's to
 * q[qi], each DequantizeLinear's to dq[qi] (from the models whose qdq[p]
 * is set).  kq: per IR node, its quantizable node or -1. */
static int profile_run(struct qctx *c, struct calib *ev, struct mi_model **m,
		       double **ns, bool **pick, const bool *qdq, double *q, double *dq,
		       const int *kq, bool timed)
{
	struct mi_value *outs = calloc(c->orig_noutputs + 1, sizeof(*outs));
	bool dump = mi_debug("quant") || (c->cost && !strcmp(c->cost, "steps"));
	struct mi_node_profile pr;
	double *best[NPROF] = { NULL };
	int err = outs ? 0 : -ENOMEM, ni = 0;

	while (ni < c->g->ninputs && ev->runs[0][ni].data)
		ni++;
	for (int p = 0; p < NPROF && !err; p++) {
		int np = mi_model_profile_count(m[p]);

		best[p] = malloc((np + 1) * sizeof(double));
		if (!best[p])
			err = -ENOMEM;
		for (int i = 0; !err && i < np; i++)
			best[p][i] = INFINITY;
	}
	for (int r = 0; r <= (timed ? MINCOS_PROF_RUNS : 0) && !err; r++)
		for (int p = 0; p < NPROF && !err; p++) {
			int np = mi_model_profile_count(m[p]);

			mi_model_profile_reset(m[p]);
			err = mi_model_run(m[p], ev->runs[0], ni, outs, c->orig_noutputs);
			if (err < 0) {
				err = qz_err("--min-cosine: %s", mi_last_error()) ? err : 0;
				break;
			}
			err = 0;
			for (int i = 0; (r > 0 || !timed) && i < np && !mi_model_profile(m[p], i, &pr);
			     i++)
				best[p][i] = timed ? fmin(best[p][i], (double)pr.ns) : 0;
		}
	for (int p = 0; p < NPROF && !err; p++) {
		int np = mi_model_profile_count(m[p]);

		for (int i = 0; i < np && !mi_model_profile(m[p], i, &pr); i++) {
			int x, at = 0, ctx = -1, cls = CC_OTHER;
			double f[3] = { 0, 0, 0 };

			/* the step's context, class and sizes: the cost model's
			 * input, or with MI_DEBUG=quant and timed steps, a
			 * line to fit it to */
			if (sscanf(pr.name, "mi#n%d%n", &x, &at) == 1 && !pr.name[at] && x >= 0 &&
			    x < c->g->nnodes) {
				ctx = p == 0 ? CM_N32 : p == 1 ? CM_A32 : p == 2 ? CM_N8 : CM_A8;
				cls = step_class(c, x, pr.op_type, ctx >= CM_N8, kq[x]);
				step_sizes(c, kq, x, f);
			} else if (sscanf(pr.name, "mi#q%d%n", &x, &at) == 1 && !pr.name[at] &&
				   x >= 0 && x < c->nqt) {
				ctx = CM_Q;
			} else if (sscanf(pr.name, "mi#d%d%n", &x, &at) == 1 && !pr.name[at] &&
				   x >= 0 && x < c->nqt) {
				ctx = CM_DQ;
			}
			if (ctx == CM_Q || ctx == CM_DQ) {
				cls = qdq_class(c, x, ctx == CM_DQ);
				f[0] = tensor_channels(&c->g->tensors[c->qt[x].t]);
				f[1] = fmax((double)mi_tensor_numel(&c->g->tensors[c->qt[x].t]), 0);
			}
			if (ctx >= 0 && !timed)
				best[p][i] = pr.calls ? step_model(ctx, cls, f) : 0;
			if (ctx >= 0 && timed && dump && (ctx > CM_A8 || !pick[p] || pick[p][x])) {
				/* and the shape of its (first) output: channels, pixels */
				const struct mi_tensor *y =
					ctx > CM_A8 ? &c->g->tensors[c->qt[x].t] :
					c->g->nodes[x].noutputs ? &c->g->tensors[c->g->nodes[x].outputs[0]] :
								  NULL;
				int64_t ch = y && y->ndim > 1 ? y->dims[1] : 1, hw = 1;

				for (int d = 2; y && d < y->ndim; d++)
					hw *= y->dims[d];
				/* ... the cost model's time, the int8 ISA (its table) */
				fprintf(stderr,
					"step %d %s %s %s %.0f %.0f %.0f %d %.1f %d %lld %lld %.1f %s\n", p,
					cm_ctx_name[ctx], pr.op_type, cm_cls_name[cls], f[0], f[1],
					f[2], (int)pr.calls, best[p][i], x, (long long)ch, (long long)hw,
					step_model(ctx, cls, f), mi_quant_isa_name(mi_quant_isa()));
			}
			if (ctx >= CM_N32 && ctx <= CM_A8) {
				if (!pick[p] || pick[p][x])
					ns[p][x] += best[p][i];
			} else if (qdq[p] && ctx == CM_Q) {
				q[x] += best[p][i];
			} else if (qdq[p] && ctx == CM_DQ) {
				dq[x] += best[p][i];
			}
		}
	}
	for (int p = 0; p < NPROF; p++)
		free(best[p]);
	free(outs);
	return err;
}

/* Predicted ns per inference of the configuration the flags say now. */
double qz_predict_time(const struct qctx *c, struct qtime *tm)
{
	const struct mi_graph *g = c->g;
	double t = 0;

	for (int i = 0; i < g->ntensors; i++) {
		int qi = c->qt_of[i];

		/* graph inputs; the rest is set by their producers */
		tm->side[i] = qi >= 0 && !c->qt[qi].fp32;
	}
	for (int o = 0; o < g->norder; o++) {
		int ni = g->order[o], k = tm->kq[ni];
		const struct mi_node *n = &g->nodes[ni];
		bool i8 = true;

		if (k >= 0) {
			int qa = c->qt_of[c->nodes[k].act];

			i8 = !c->nodes[k].wfp32 && qa >= 0 && !c->qt[qa].fp32;
		} else {
			for (int a = 0; a < n->ninputs; a++) {
				int x = n->inputs[a];

				if (x >= 0 && !(g->tensors[x].flags & MI_TF_CONST))
					i8 &= tm->side[x];
			}
		}
		tm->mode[ni] = i8;
		for (int j = 0; j < n->noutputs; j++) {
			int x = n->outputs[j], qi = c->qt_of[x];

			tm->side[x] = qi >= 0 ? !c->qt[qi].fp32 : i8;
		}
	}
	for (int o = 0; o < g->norder; o++) {
		int ni = g->order[o];
		const struct mi_node *n = &g->nodes[ni];
		bool i8 = tm->mode[ni], bin = false, bout = false;

		for (int a = 0; a < n->ninputs; a++) {
			int x = n->inputs[a], qi, p;

			if (x < 0 || (g->tensors[x].flags & MI_TF_CONST))
				continue;
			qi = c->qt_of[x];
			p = tm->prod[x];
			if (i8)
				bin |= p >= 0 && !tm->mode[p];
			else
				bin |= (qi >= 0 && !c->qt[qi].fp32) || (p >= 0 && tm->mode[p]);
		}
		for (int j = 0; j < n->noutputs; j++) {
			int x = n->outputs[j], qi = c->qt_of[x];

			if (!i8 && qi >= 0 && !c->qt[qi].fp32)
				bout = true;
			for (int e = tm->cstart[x]; e < tm->cstart[x + 1]; e++)
				bout |= tm->mode[tm->cons[e]] != i8;
		}
		if (i8)
			tm->pt[ni] = (tm->n8[ni] + (tm->a8[ni] - tm->n8[ni]) * (bin + bout) / 2) *
				     (tm->kq[ni] >= 0 && c->nodes[tm->kq[ni]].w8 ? MINCOS_W8_RATE : 1);
		else
			tm->pt[ni] = tm->n32[ni] + (tm->a32[ni] - tm->n32[ni]) * (bin + bout) / 2;
		t += tm->pt[ni];
	}
	for (int qi = 0; qi < c->nqt; qi++) {
		int x = c->qt[qi].t, p = tm->prod[x];

		if (c->qt[qi].fp32)
			continue;
		if (p < 0 || !tm->mode[p])
			t += tm->q[qi];
		for (int e = tm->cstart[x]; e < tm->cstart[x + 1]; e++)
			if (!tm->mode[tm->cons[e]]) {
				t += tm->dq[qi];
				break;
			}
	}
	return t;
}

/* Take the profiles; the flags are left all int8. */
int qtime_init(struct qctx *c, struct calib *ev, struct unit *u, int nu,
		      struct qtime *tm)
{
	const struct mi_graph *g = c->g;
	double qn = 0, qe = 0, dn = 0, de = 0;
	bool *pick[2] = { calloc(g->nnodes + 1, sizeof(bool)), calloc(g->nnodes + 1, sizeof(bool)) };
	struct mi_model *pm[NPROF] = { NULL };
	int err = 0, ne = 0;

	for (int o = 0; o < g->norder; o++)
		ne += g->nodes[g->order[o]].ninputs;
	tm->n8 = calloc(g->nnodes + 1, sizeof(double));
	tm->n32 = calloc(g->nnodes + 1, sizeof(double));
	tm->a8 = calloc(g->nnodes + 1, sizeof(double));
	tm->a32 = calloc(g->nnodes + 1, sizeof(double));
	tm->q = calloc(c->nqt + 1, sizeof(double));
	tm->dq = calloc(c->nqt + 1, sizeof(double));
	tm->kq = malloc((g->nnodes + 1) * sizeof(int));
	tm->prod = malloc((g->ntensors + 1) * sizeof(int));
	tm->cstart = calloc(g->ntensors + 2, sizeof(int));
	tm->cons = malloc((ne + 1) * sizeof(int));
	tm->mode = calloc(g->nnodes + 1, sizeof(bool));
	tm->pt = calloc(g->nnodes + 1, sizeof(double));
	tm->side = calloc(g->ntensors + 1, sizeof(bool));
	if (!pick[0] || !pick[1] || !tm->n8 || !tm->n32 || !tm->a8 || !tm->a32 || !tm->q || !tm->dq ||
	    !tm->kq || !tm->prod || !tm->cstart || !tm->cons || !tm->mode || !tm->pt || !tm->side) {
		err = -ENOMEM;
		goto out;
	}
	for (int i = 0; i < g->nnodes; i++)
		tm->kq[i] = -1;
	for (int k = 0; k < c->nnodes; k++)
		tm->kq[c->nodes[k].node] = k;
	for (int i = 0; i < g->ntensors; i++)
		tm->prod[i] = -1;
	/* consumers of each tensor (a node once per tensor), by counting */
	for (int pass = 0; pass < 2; pass++) {
		for (int o = 0; o < g->norder; o++) {
			const struct mi_node *n = &g->nodes[g->order[o]];

			for (int j = 0; pass == 0 && j < n->noutputs; j++)
				tm->prod[n->outputs[j]] = g->order[o];
			for (int a = 0; a < n->ninputs; a++) {
				int x = n->inputs[a], dup = 0;

				for (int b = 0; b < a; b++)
					dup |= n->inputs[b] == x;
				if (x < 0 || dup)
					continue;
				if (pass == 0)
					tm->cstart[x + 1]++;
				else
					tm->cons[tm->cstart[x]++] = g->order[o];
			}
		}
		if (pass == 0)
			for (int i = 0; i < g->ntensors; i++)
				tm->cstart[i + 1] += tm->cstart[i];
		else
			for (int i = g->ntensors; i > 0; i--)
				tm->cstart[i] = tm->cstart[i - 1];
		tm->cstart[0] = 0;
	}
	/* the fp32 kernels per node: with the expansion + depthwise convs
	 * fused or SE scales folded, two nodes' time goes into one */
	for (int i = 0; i < nu; i++)
		qz_set_unit(c, &u[i], true);
	err = profile_load(c, &pm[0], false);
	for (int i = 0; i < c->nqt; i++)
		c->qt[i].fp32 = false;
	if (!err)
		err = profile_load(c, &pm[1], false);
	for (int i = 0; i < nu; i++)
		qz_set_unit(c, &u[i], false);
	if (!err)
		err = profile_load(c, &pm[2], true);
	/* every other quantizable node int8 (in execution order), then the
	 * others: the int8 nodes' times alone */
	for (int par = 0; par < 2 && !err; par++) {
		int pos = 0;

		for (int o = 0; o < g->norder; o++) {
			int k = tm->kq[g->order[o]];

			if (k >= 0) {
				c->nodes[k].wfp32 = pos++ % 2 != par;
				pick[par][g->order[o]] = !c->nodes[k].wfp32;
			}
		}
		err = profile_load(c, &pm[3 + par], true);
	}
	for (int i = 0; i < nu; i++)
		qz_set_unit(c, &u[i], false);
	if (!err) {
		double *ns[NPROF] = { tm->n32, tm->a32, tm->n8, tm->a8, tm->a8 };
		bool *pk[NPROF] = { NULL, NULL, NULL, pick[0], pick[1] };
		const bool qdq[NPROF] = { false, true, false, false, false };

		err = profile_run(c, ev, pm, ns, pk, qdq, tm->q, tm->dq, tm->kq, tm->timed);
	}
	for (int p = 0; p < NPROF; p++)
		mi_model_free(pm[p]);
	if (err)
		goto out;
	/* other nodes' times alone: as in their own kind's model */
	for (int i = 0; i < g->nnodes; i++)
		if (tm->kq[i] < 0)
			tm->a8[i] = tm->n8[i];
	/* standalone Q/DQ missing in the profiles (fused or absent there):
	 * the measured ones' ns per element */
	for (int qi = 0; qi < c->nqt; qi++) {
		double e = (double)mi_tensor_numel(&g->tensors[c->qt[qi].t]);

		qn += tm->q[qi] > 0 ? tm->q[qi] : 0;
		qe += tm->q[qi] > 0 ? e : 0;
		dn += tm->dq[qi] > 0 ? tm->dq[qi] : 0;
		de += tm->dq[qi] > 0 ? e : 0;
	}
	for (int qi = 0; qi < c->nqt; qi++) {
		double e = (double)mi_tensor_numel(&g->tensors[c->qt[qi].t]);

		if (tm->q[qi] <= 0)
			tm->q[qi] = qe > 0 ? e * qn / qe : de > 0 ? e * dn / de : 0;
		if (tm->dq[qi] <= 0)
			tm->dq[qi] = de > 0 ? e * dn / de : qe > 0 ? e * qn / qe : 0;
	}
	tm->ok = true;
out:
	free(pick[0]);
	free(pick[1]);
	return err;
}
