// SPDX-License-Identifier: MIT
/*
 * `metainfer quantize`: post-training static quantization.
 *
 *  1. Load the fp32 model into the IR (no normalization, so tensor names
 *     match the file) and find the quantizable nodes: Conv, Gemm and
 *     MatMul whose weight is an fp32 initializer.
 *  2. Tensors to quantize: the activation input of each such node and its
 *     "output point" (its output, or the output of a Relu/Clip that is the
 *     output's sole consumer); graph outputs stay fp32.
 *  3. Calibrate: run the model (library executor, fast kernels) on the
 *     calibration inputs with those tensors marked as graph outputs, and
 *     keep each tensor's min/max, then (default) clip it where a histogram
 *     of |x| says the squared quantization error is smallest (or at a
 *     percentile of |x|); with --range mse-act a tensor whose readers
 *     apply a HardSigmoid, HardSwish, Sigmoid or SiLU gets both ends from
 *     a signed histogram, judged by the error after that function
 *     (qz_mse_range()). Per-channel activation means give the bias
 *     correction of the weights' rounding (qz_bias_correction()).
 *  4. Rewrite the ModelProto (protobuf-c): uint8 asymmetric activations
 *     (QuantizeLinear -> DequantizeLinear pairs), int8 symmetric weights
 *     per output channel (or per tensor) as DequantizeLinear of int8
 *     initializers, int32 biases with scale sx*sw; --format qlinear turns
 *     Conv/MatMul into QLinearConv/QLinearMatMul where the pattern allows.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu/cpu.h"
#include "gen/onnx.pb-c.h"
#include "internal.h"
#include "metainfer/metainfer.h"
#include "quant/quant.h"
#include "quant/quant-impl.h"

#include <stdarg.h>
#include "quant/quantize-impl.h"

/* One-line error on stderr; returns 1 (the exit status). */
__attribute__((format(printf, 1, 2))) int qz_err(const char *fmt, ...)
{
	va_list ap;

	fputs("metainfer quantize: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return 1;
}

#define MINCOS_INPUTS 200 /* --min-cosine with --calib-random: inputs searched on */
#define MINCOS_HOLD 100   /* and held out for the final check */

int qz_consumers(const struct mi_graph *g, int t, int *only)
{
	int cnt = 0;

	for (int i = 0; i < g->nnodes; i++) {
		const struct mi_node *n = &g->nodes[i];

		if (n->dead)
			continue;
		for (int j = 0; j < n->ninputs; j++)
			if (n->inputs[j] == t) {
				cnt++;
				if (only)
					*only = i;
				break;
			}
	}
	return cnt;
}

bool qz_is_graph_output(const struct mi_graph *g, int t)
{
	for (int i = 0; i < g->noutputs; i++)
		if (g->outputs[i] == t)
			return true;
	return false;
}

bool qz_is_weight(const struct mi_graph *g, int t, int ndim_min, int ndim_max)
{
	const struct mi_tensor *w = t >= 0 ? &g->tensors[t] : NULL;

	return w && (w->flags & MI_TF_CONST) && w->data && w->dtype == MI_DT_FLOAT &&
	       w->ndim >= ndim_min && w->ndim <= ndim_max;
}

static int qt_add(struct qctx *c, int t)
{
	if (c->qt_of[t] >= 0)
		return 0;
	struct qtensor *nq = realloc(c->qt, (c->nqt + 1) * sizeof(*nq));

	if (!nq)
		return -ENOMEM;
	c->qt = nq;
	memset(&c->qt[c->nqt], 0, sizeof(c->qt[0]));
	c->qt[c->nqt].t = t;
	c->qt[c->nqt].mn = INFINITY;
	c->qt[c->nqt].mx = -INFINITY;
	c->qt[c->nqt].caxis = -1;
	c->qt_of[t] = c->nqt++;
	return 0;
}

/* Find quantizable nodes and the tensors to calibrate. */
static int find_nodes(struct qctx *c)
{
	struct mi_graph *g = c->g;

	c->qt_of = malloc(g->ntensors * sizeof(int));
	c->nodes = calloc(g->nnodes + 1, sizeof(*c->nodes));
	if (!c->qt_of || !c->nodes)
		return -ENOMEM;
	for (int i = 0; i < g->ntensors; i++)
		c->qt_of[i] = -1;
	for (int i = 0; i < g->nnodes; i++) {
		struct mi_node *n = &g->nodes[i];
		struct qnode q = { .node = i, .bias = -1, .act_node = -1 };

		if (n->dead || n->domain[0] || n->ninputs < 2)
			continue;
		q.act = n->inputs[0];
		q.weight = n->inputs[1];
		if (q.act < 0 || g->tensors[q.act].dtype != MI_DT_FLOAT ||
		    (g->tensors[q.act].flags & MI_TF_CONST))
			continue;
		if (!strcmp(n->op_type, "Conv")) {
			if (!qz_is_weight(g, q.weight, 3, 4))
				continue;
			q.wkind = 0;
			q.waxis = 0;
			if (n->ninputs > 2 && n->inputs[2] >= 0) {
				if (!qz_is_weight(g, n->inputs[2], 1, 1))
					continue;
				q.bias = n->inputs[2];
			}
		} else if (!strcmp(n->op_type, "Gemm")) {
			if (!qz_is_weight(g, q.weight, 2, 2) || mi_attr_int(n, "transA", 0) ||
			    mi_attr_float(n, "alpha", 1.0f) != 1.0f ||
			    mi_attr_float(n, "beta", 1.0f) != 1.0f)
				continue;
			q.wkind = 1;
			q.waxis = mi_attr_int(n, "transB", 0) ? 0 : 1;
			if (n->ninputs > 2 && n->inputs[2] >= 0) {
				if (!qz_is_weight(g, n->inputs[2], 1, 1))
					continue; /* 2-D C: not quantized */
				q.bias = n->inputs[2];
			}
		} else if (!strcmp(n->op_type, "MatMul")) {
			if (!qz_is_weight(g, q.weight, 2, 2))
				continue;
			q.wkind = 2;
			q.waxis = 1;
		} else {
			continue;
		}
		/* output point: through a sole Relu/Clip consumer */
		int y = n->outputs[0], only = -1;

		q.out = y;
		if (!qz_is_graph_output(g, y) && qz_consumers(g, y, &only) == 1) {
			struct mi_node *a = &g->nodes[only];

			if (!strcmp(a->op_type, "Relu") ||
			    (!strcmp(a->op_type, "Clip") && a->inputs[0] == y)) {
				q.out = a->outputs[0];
				q.act_node = only;
			}
		}
		q.oname = g->tensors[y].name;
		c->nodes[c->nnodes++] = q;
		if (qt_add(c, q.act))
			return -ENOMEM;
		/* per-channel means of the activation for the bias correction:
		 * NCHW channels for Conv, the last (reduced) axis otherwise */
		const struct mi_tensor *at = &g->tensors[q.act];
		struct qtensor *aq = &c->qt[c->qt_of[q.act]];
		int ax = q.wkind == 0 ? 1 : at->ndim - 1;

		if (((c->bias_correct && q.bias >= 0) || c->wclip == 2) && aq->caxis < 0 &&
		    ax >= 0 && ax < at->ndim && mi_tensor_shape_known(at) && at->dims[ax] > 0) {
			aq->nch = (int)at->dims[ax];
			aq->csum = calloc(aq->nch, sizeof(double));
			/* the sums of squares only for the weighted clipping */
			aq->csq = c->wclip == 2 ? calloc(aq->nch, sizeof(double)) : NULL;
			if (!aq->csum || (c->wclip == 2 && !aq->csq))
				return -ENOMEM;
			aq->caxis = ax;
		}
		if (!qz_is_graph_output(g, q.out) && qt_add(c, q.out))
			return -ENOMEM;
	}
	/* Add (residual) and MaxPool run on quantized data too: quantize
	 * their inputs and output (through a sole Relu after Add) */
	for (int i = 0; i < g->nnodes; i++) {
		struct mi_node *n = &g->nodes[i];
		bool add = !strcmp(n->op_type, "Add"), pool = !strcmp(n->op_type, "MaxPool");
		int y, only = -1;

		if (n->dead || n->domain[0] || (!add && !pool) || n->noutputs != 1)
			continue;
		bool ok = true;

		for (int j = 0; j < n->ninputs; j++) {
			const struct mi_tensor *t = n->inputs[j] >= 0 ? &g->tensors[n->inputs[j]] : NULL;

			if (!t || t->dtype != MI_DT_FLOAT || (t->flags & MI_TF_CONST) ||
			    !mi_tensor_shape_known(t))
				ok = false;
		}
		y = n->outputs[0];
		if (!ok || (add && (n->ninputs != 2 ||
				    mi_tensor_numel(&g->tensors[n->inputs[0]]) !=
					    mi_tensor_numel(&g->tensors[n->inputs[1]]))))
			continue;
		if (add && !qz_is_graph_output(g, y) && qz_consumers(g, y, &only) == 1 &&
		    !strcmp(g->nodes[only].op_type, "Relu"))
			y = g->nodes[only].outputs[0];
		if (qz_is_graph_output(g, y))
			continue;
		for (int j = 0; j < n->ninputs; j++)
			if (qt_add(c, n->inputs[j]))
				return -ENOMEM;
		if (qt_add(c, y))
			return -ENOMEM;
	}
	return 0;
}

/* ---- --decompose: where the all-int8 error comes from ------------------ */

static int producer_of(const struct mi_graph *g, int t)
{
	for (int i = 0; i < g->nnodes; i++)
		if (!g->nodes[i].dead)
			for (int j = 0; j < g->nodes[i].noutputs; j++)
				if (g->nodes[i].outputs[j] == t)
					return i;
	return -1;
}

static bool depthwise_conv(const struct mi_graph *g, const struct mi_node *n)
{
	const struct mi_tensor *w = &g->tensors[n->inputs[1]];

	return !strcmp(n->op_type, "Conv") && mi_attr_int(n, "group", 1) > 1 && w->dims[1] == 1;
}

/* a debug class of quantized tensor i: what produces it, what reads it */
static const char *act_class(const struct qctx *c, int i)
{
	const struct mi_graph *g = c->g;
	int t = c->qt[i].t, p = producer_of(g, t);
	bool act = false, sig = false;

	if (p < 0)
		return "input";
	if (!strcmp(g->nodes[p].op_type, "Relu") || !strcmp(g->nodes[p].op_type, "Clip")) {
		act = true;
		p = producer_of(g, g->nodes[p].inputs[0]);
		if (p < 0)
			return "act(?)";
	}
	for (int k = 0; k < g->nnodes; k++)
		for (int j = 0; !g->nodes[k].dead && j < g->nodes[k].ninputs; j++)
			if (g->nodes[k].inputs[j] == t && (!strcmp(g->nodes[k].op_type, "Sigmoid") ||
							   !strcmp(g->nodes[k].op_type, "HardSwish") ||
							   !strcmp(g->nodes[k].op_type, "HardSigmoid")))
				sig = true;
	if (!strcmp(g->nodes[p].op_type, "Conv")) {
		bool dw = depthwise_conv(g, &g->nodes[p]);

		if (act)
			return dw ? "dw-conv+relu" : "conv+relu";
		if (sig)
			return dw ? "dw-conv->silu" : "conv->silu";
		return dw ? "dw-conv linear" : "conv linear";
	}
	if (!strcmp(g->nodes[p].op_type, "Add"))
		return act ? "add+relu" : "add";
	if (!strcmp(g->nodes[p].op_type, "Mul"))
		return "mul";
	return g->nodes[p].op_type;
}

static const char *weight_class(const struct qctx *c, int k)
{
	const struct mi_graph *g = c->g;
	const struct mi_node *n = &g->nodes[c->nodes[k].node];
	const struct mi_tensor *w = &g->tensors[c->nodes[k].weight];

	if (c->nodes[k].wkind)
		return "w gemm/matmul";
	if (depthwise_conv(g, n))
		return "w depthwise";
	if (w->ndim == 4 && w->dims[2] == 1 && w->dims[3] == 1)
		return mi_attr_int(n, "group", 1) > 1 ? "w grouped 1x1" : "w 1x1";
	return "w kxk";
}

/*
 * --decompose (mode 1): the cosine with the fp32 model on the evaluation
 * inputs of all int8, weights only, activations only, and each class of
 * activations (weights fp32) and of weights (activations fp32) alone, on
 * stdout (mode 2: the first three only); nothing is written.
 */
static int decompose(struct qctx *c, struct calib *ev, int mode)
{
	const char *cls[64];
	int ncls = 0, err;
	double cmin, cmean;

	for (int i = 0; i < c->nqt; i++)
		c->qt[i].fp32 = true;
	for (int k = 0; k < c->nnodes; k++)
		c->nodes[k].wfp32 = true;
	err = qz_eval_model(c, ev, ev->nruns, NULL, 0, &cmin, &cmean, NULL);
	int npass = mode == 2 ? 3 : 3 + 64;

	for (int pass = 0; pass < npass && !err; pass++) {
		const char *want = pass >= 3 ? (pass - 3 < ncls ? cls[pass - 3] : NULL) : "";
		int nq = 0;
		double macs = 0, qm = 0;

		if (!want)
			break;
		for (int i = 0; i < c->nqt; i++) {
			const char *k = act_class(c, i);

			c->qt[i].fp32 = !(pass == 0 || pass == 2 || (pass >= 3 && !strcmp(k, want)));
			nq += !c->qt[i].fp32;
			if (pass == 0) {
				bool seen = false;

				for (int j = 0; j < ncls; j++)
					seen |= !strcmp(cls[j], k);
				if (!seen && ncls < 64)
					cls[ncls++] = k;
			}
		}
		for (int k = 0; k < c->nnodes; k++) {
			const char *w = weight_class(c, k);

			c->nodes[k].wfp32 = !(pass == 0 || pass == 1 || (pass >= 3 && !strcmp(w, want)));
			nq += !c->nodes[k].wfp32;
			macs += qz_node_macs(c, k);
			qm += c->nodes[k].wfp32 ? 0 : qz_node_macs(c, k);
			if (pass == 0) {
				bool seen = false;

				for (int j = 0; j < ncls; j++)
					seen |= !strcmp(cls[j], w);
				if (!seen && ncls < 64)
					cls[ncls++] = w;
			}
		}
		err = qz_eval_model(c, ev, ev->nruns, NULL, 0, &cmin, &cmean, NULL);
		printf("decompose: %-20s %3d units int8 (%4.1f%% of the weights' MACs): cosine min "
		       "%.6f mean %.6f, 1-mean %.3e\n",
		       pass == 0 ? "all int8" : pass == 1 ? "weights only" : pass == 2 ?
		       "activations only" : want, nq, 100 * qm / macs, cmin, cmean, 1 - cmean);
		fflush(stdout);
	}
	return err;
}

/* Fill a qctx from the options (the fields the command line sets). */
static void ctx_from_opts(struct qctx *c, const struct mi_quant_opts *o)
{
	c->per_channel = o->per_channel;
	c->qlinear = o->qlinear;
	c->bias_correct = o->bias_correct;
	c->equalize = o->equalize;
	c->percentile = o->percentile;
	c->mse = o->mse;
	c->mse_act = o->mse_act;
	c->min_cos = o->min_cos;
	c->wbits = o->wbits;
	c->wclip = o->wclip;
	c->w8fb = o->w8fb;
	c->cost = o->cost;
	c->keep_rt = o->keep_round_trips;
	c->no_down = o->no_refine;
	c->prefixes = o->list_prefixes;
	c->isa_cap = o->isa;
	c->nthreads = o->nthreads;
}

void mi_quant_opts_default(struct mi_quant_opts *o)
{
	*o = (struct mi_quant_opts){ .seed = 1234, .per_channel = true, .bias_correct = true,
				     .mse = true, .equalize = true, .wbits = MI_QUANT_WBITS_AUTO,
				     .w8fb = 2 };
}

int mi_quantize(const char *model, const char *out, const struct mi_quant_opts *o)
{
	const char *calib = o->calib;
	long nrandom = o->nrandom, seed = o->seed;
	struct qctx c = { 0 };
	struct calib cal = { 0 }, ev = { 0 };
	int err, rc = 1;

	ctx_from_opts(&c, o);
	/* the int8 kernels of the ISA the models run with */
	mi_quant_set_isa(o->isa > MI_ISA_CAP_NATIVE ? o->isa - 1 : mi_cpu_isa());
	if (c.wbits == WBITS_AUTO)
		c.wbits = mi_quant_isa() == MI_QISA_AVX2 ? WBITS_MIXED : 8;

	struct mi_model_opts mo = { .flags = MI_MODEL_NO_NORMALIZE, .nthreads = o->nthreads,
				    .isa = o->isa };

	err = mi_model_load_graph(model, &mo, &c.m);
	if (err < 0)
		return qz_err("%s", mi_last_error());
	c.g = &c.m->g;
	c.path = model;
	/* BatchNorm into Conv/Gemm, Identity/Dropout away: what runs fast */
	err = mi_pass_fold_batchnorm(c.g);
	if (err >= 0)
		err = mi_pass_remove_noops(c.g);
	if (err >= 0)
		err = mi_graph_dead_nodes(c.g);
	if (err >= 0)
		err = mi_graph_toposort(c.g);
	if (!err)
		err = mi_model_infer_shapes(c.m, NULL, NULL);
	if (!err)
		err = find_nodes(&c);
	if (err) {
		qz_err("%s: %s", model, err == -ENOMEM ? "out of memory" : c.g->err);
		goto out;
	}
	if (!c.nnodes) {
		qz_err("%s: no Conv/Gemm/MatMul with constant fp32 weights to quantize", model);
		goto out;
	}
	err = calib ? qz_calib_dir(&c, calib, &cal) : qz_calib_random(&c, (int)nrandom, seed, &cal);
	if (err)
		goto out;
	if (c.equalize) {
		err = qz_equalize(&c, &cal);
		if (err < 0)
			goto out;
		printf("equalized the channels of %d tensor groups\n", err);
	}
	err = qz_calibrate(&c, &cal);
	if (err)
		goto out;
	/* back to the graph as loaded (the planner rewired it for the runs) */
	mi_cpu_plan_fini(c.g);
	for (int i = c.orig_noutputs; i < c.g->noutputs; i++)
		c.g->tensors[c.g->outputs[i]].flags &= ~MI_TF_OUTPUT;
	c.g->noutputs = c.orig_noutputs;
	err = mi_graph_toposort(c.g);
	if (err) {
		qz_err("%s: %s", model, c.g->err);
		goto out;
	}
	c.search_cos = o->search_cos > 0 ? o->search_cos : c.min_cos;
	if (o->all_fp32) { /* test hook: the fp32 model as rewritten */
		for (int i = 0; i < c.nqt; i++)
			c.qt[i].fp32 = true;
		for (int k = 0; k < c.nnodes; k++)
			c.nodes[k].wfp32 = true;
	}
	if (o->decompose) {
		err = qz_calib_random(&c, MINCOS_INPUTS + MINCOS_HOLD, seed, &ev);
		if (!err)
			err = decompose(&c, &ev, o->decompose);
		if (!err)
			rc = 0;
		goto out;
	}
	if (c.min_cos > 0 && !calib) {
		/* judged on more inputs than the calibration's: the first
		 * nrandom are the calibration inputs, the rest new; the last
		 * MINCOS_HOLD are held out of the search */
		int ns = nrandom > MINCOS_INPUTS ? (int)nrandom : MINCOS_INPUTS;

		err = qz_calib_random(&c, ns + MINCOS_HOLD, seed, &ev);
		if (!err)
			err = qz_mixed_precision(&c, &ev, ns);
	} else if (c.min_cos > 0) {
		err = qz_mixed_precision(&c, &cal, cal.nruns);
	}
	if (err)
		goto out;
	err = qz_rewrite(&c, model, out, NULL, NULL);
	if (err)
		goto out;
	int nq = 0;

	for (int i = 0; i < c.nnodes; i++)
		nq += c.nodes[i].node >= 0 && !c.nodes[i].wfp32;
	int n7 = 0;

	for (int i = 0; i < c.nnodes; i++)
		n7 += c.nodes[i].node >= 0 && !c.nodes[i].wfp32 && qz_wqmax(&c, &c.nodes[i]) == 63;
	printf("quantized %d nodes (%s weights, %d of them 7-bit (--weight-bits %s), %d activation tensors, %d calibration runs, %s) -> %s\n",
	       nq, c.per_channel ? "per-channel" : "per-tensor", n7,
	       c.wbits == WBITS_MIXED ? "mixed" : c.wbits == 7 ? "7" : "8", c.nqt, cal.nruns,
	       c.qlinear ? "qlinear" : "qdq", out);
	rc = 0;
out:
	qz_calib_free(&cal, !calib);
	qz_calib_free(&ev, true);
	for (int i = 0; i < c.nqt; i++) {
		free(c.qt[i].hist);
		free(c.qt[i].csum);
		free(c.qt[i].csq);
	}
	free(c.qt);
	free(c.qt_of);
	for (int r = 0; c.ref && r < c.nrefruns; r++)
		free(c.ref[r]);
	free(c.ref);
	qz_memo_free(&c);
	free(c.src);
	for (int i = 0; i < c.nnodes; i++) {
		free(c.nodes[i].wscale[0]);
		free(c.nodes[i].wscale[1]);
	}
	free(c.nodes);
	mi_model_free(c.m);
	return rc;
}
