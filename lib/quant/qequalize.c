// SPDX-License-Identifier: MIT
/*
 * `metainfer quantize`: cross-layer channel equalization.
 */
#include "quant/quantize-impl.h"

/* ---- channel equalization --------------------------------------------- */

/*
 * Per-tensor uint8 activations give every channel of a tensor the same
 * step, so a channel whose values are small carries far more relative
 * error than a large one.  Where the graph lets a channel be scaled
 * without changing the model -- a "channel group" of tensors linked by
 * Relu, MaxPool, AveragePool/GlobalAveragePool, Flatten (to [N, C]) and
 * same-shape Add, written only by Conv/Gemm (whose output channel c is
 * multiplied by t_c: weights and bias) and read only by those ops and by
 * Conv/Gemm (input channel c divided by t_c: weights) -- the channels are
 * scaled towards equal spread (cross-layer equalization, Nagel et al.
 * 2019, with the activations' spreads from a calibration pass instead of
 * the weights' ranges).  t_c = (S / s_c)^alpha, s_c the channel's RMS
 * relative to its tensor's largest channel RMS (the largest ratio over the
 * group's quantized tensors), alpha = 1/2: the geometric compromise
 * between the activations' error (falls as the channels even out) and
 * the readers' weight error (their per-output-channel scale is set by the
 * largest column).  Everything positive-homogeneous commutes with the
 * scaling, so the fp32 model computes the same function (up to float
 * rounding).  Clip, Sigmoid, Mul, Concat, reshapes, graph outputs end a
 * group unscaled.
 */
#define EQ_ALPHA 0.5
#define EQ_MIN_RATIO 1e-3 /* channel spreads below this ratio count as it */

struct eqgroup {
	int *t, nt;       /* tensors */
	int *prod, np;    /* Conv/Gemm writing a group tensor */
	int *cons, nc;    /* Conv/Gemm reading a group tensor (input 0) */
	int nch;
	double *ss;       /* per channel: largest relative mean square */
};

static bool eq_const(const struct mi_graph *g, int t, int ndim)
{
	return qz_is_weight(g, t, ndim, ndim) && qz_consumers(g, t, NULL) == 1;
}

/* can node n scale its output channels (weights and bias)? */
static bool eq_producer_ok(const struct mi_graph *g, const struct mi_node *n)
{
	if (!strcmp(n->op_type, "Conv"))
		return n->noutputs == 1 && n->ninputs >= 2 && eq_const(g, n->inputs[1], 4) &&
		       (n->ninputs < 3 || n->inputs[2] < 0 || eq_const(g, n->inputs[2], 1));
	if (!strcmp(n->op_type, "Gemm"))
		return n->noutputs == 1 && n->ninputs >= 2 && eq_const(g, n->inputs[1], 2) &&
		       !mi_attr_int(n, "transA", 0) &&
		       (n->ninputs < 3 || n->inputs[2] < 0 || eq_const(g, n->inputs[2], 1));
	return false;
}

/* the channel axis of tensor t (1 for NCHW and [N, C]) has nch channels */
static bool eq_shape_ok(const struct mi_graph *g, int t, int nch)
{
	const struct mi_tensor *x = &g->tensors[t];

	return x->dtype == MI_DT_FLOAT && mi_tensor_shape_known(x) && x->ndim >= 2 &&
	       x->dims[1] == nch;
}

static bool eq_passes(const struct mi_node *n)
{
	static const char *const ok[] = { "Relu", "MaxPool", "AveragePool",
					  "GlobalAveragePool", "Flatten", "Add", NULL };

	for (int i = 0; ok[i]; i++)
		if (!strcmp(n->op_type, ok[i]))
			return n->noutputs == 1 && !n->domain[0];
	return false;
}

static int eq_push(int **v, int *n, int x)
{
	for (int i = 0; i < *n; i++)
		if ((*v)[i] == x)
			return 0;
	int *nv = realloc(*v, (*n + 1) * sizeof(int));

	if (!nv)
		return -ENOMEM;
	*v = nv;
	nv[(*n)++] = x;
	return 1;
}

/* Grow the group from tensor t0 (written by a Conv/Gemm); false if some
 * member's producer or reader does not let its channels scale. */
static int eq_grow(const struct mi_graph *g, const int *prod, struct eqgroup *gr, int t0)
{
	int err = eq_push(&gr->t, &gr->nt, t0);

	gr->nch = (int)g->tensors[t0].dims[1];
	for (int i = 0; i < gr->nt && err >= 0; i++) {
		int t = gr->t[i], p = prod[t];
		const struct mi_node *n = p >= 0 ? &g->nodes[p] : NULL;

		if (!n || qz_is_graph_output(g, t) || !eq_shape_ok(g, t, gr->nch))
			return 0;
		if (eq_producer_ok(g, n)) {
			err = eq_push(&gr->prod, &gr->np, p);
		} else if (eq_passes(n)) {
			for (int j = 0; j < n->ninputs && err >= 0; j++)
				if (n->inputs[j] >= 0)
					err = eq_push(&gr->t, &gr->nt, n->inputs[j]);
			if (!strcmp(n->op_type, "Flatten") &&
			    (mi_attr_int(n, "axis", 1) != 1 ||
			     mi_tensor_numel(&g->tensors[n->inputs[0]]) !=
				     mi_tensor_numel(&g->tensors[t])))
				return 0;
			if (!strcmp(n->op_type, "Add") &&
			    (n->ninputs != 2 || n->inputs[0] < 0 || n->inputs[1] < 0 ||
			     mi_tensor_numel(&g->tensors[n->inputs[0]]) !=
				     mi_tensor_numel(&g->tensors[t]) ||
			     mi_tensor_numel(&g->tensors[n->inputs[1]]) !=
				     mi_tensor_numel(&g->tensors[t])))
				return 0;
		} else {
			return 0;
		}
		for (int k = 0; k < g->nnodes && err >= 0; k++) {
			const struct mi_node *r = &g->nodes[k];
			bool reads = false;

			if (r->dead)
				continue;
			for (int j = 0; j < r->ninputs; j++)
				if (r->inputs[j] == t) {
					if (j > 0 && strcmp(r->op_type, "Add"))
						return 0; /* a weight or a bias */
					reads = true;
				}
			if (!reads)
				continue;
			if (eq_passes(r)) {
				err = eq_push(&gr->t, &gr->nt, r->outputs[0]);
			} else if ((!strcmp(r->op_type, "Conv") && r->ninputs >= 2 &&
				    eq_const(g, r->inputs[1], 4)) ||
				   (!strcmp(r->op_type, "Gemm") && r->ninputs >= 2 &&
				    !mi_attr_int(r, "transA", 0) && eq_const(g, r->inputs[1], 2))) {
				err = eq_push(&gr->cons, &gr->nc, k);
			} else {
				return 0;
			}
		}
	}
	return err < 0 ? err : 1;
}

/* scale output channel (prod) or input channel (!prod) c of node n by f */
static void eq_scale(struct mi_graph *g, const struct mi_node *n, bool prod, int c, double f)
{
	struct mi_tensor *w = &g->tensors[n->inputs[1]];
	float *wd = w->data;
	bool gemm = !strcmp(n->op_type, "Gemm");
	int64_t d0 = w->dims[0], d1 = w->dims[1], inner = mi_ops_prod(w->dims, 2, w->ndim);

	if (gemm) {
		/* W[K][N] (transB = 0) or W[N][K]: scale row or column c */
		bool rows = prod == !!mi_attr_int(n, "transB", 0);

		for (int64_t i = 0; i < (rows ? d1 : d0); i++)
			wd[rows ? c * d1 + i : i * d1 + c] *= (float)f;
	} else if (prod) {
		for (int64_t i = 0; i < d1 * inner; i++)
			wd[c * d1 * inner + i] *= (float)f;
	} else { /* input channel c: group c / d1, column c % d1 of its outputs */
		int64_t G = d1 > 0 ? g->tensors[n->inputs[0]].dims[1] / d1 : 1;
		int64_t opg = d0 / (G > 0 ? G : 1), gi = c / d1, ci = c % d1;

		for (int64_t o = gi * opg; o < (gi + 1) * opg; o++)
			for (int64_t k = 0; k < inner; k++)
				wd[(o * d1 + ci) * inner + k] *= (float)f;
	}
	if (prod && n->ninputs > 2 && n->inputs[2] >= 0) {
		struct mi_tensor *b = &g->tensors[n->inputs[2]];

		((float *)b->data)[c] *= (float)f;
	}
}

/*
 * Find the channel groups, measure their channels' spread on the
 * calibration inputs and rescale the weights.  Returns the number of
 * groups scaled or -errno.
 */
int qz_equalize(struct qctx *c, struct calib *cal)
{
	struct mi_graph *g = c->g;
	int *prod = malloc((g->ntensors + 1) * sizeof(int)), *gid = malloc((g->ntensors + 1) * sizeof(int));
	struct eqgroup *grs = NULL;
	int ngr = 0, nscaled = 0, err = 0, nout0 = g->noutputs, *outs;
	double **ms = NULL; /* per tensor: per-channel sums of squares */
	const double alpha = EQ_ALPHA;

	if (!prod || !gid) {
		err = -ENOMEM;
		goto out;
	}
	for (int i = 0; i < g->ntensors; i++)
		prod[i] = gid[i] = -1;
	for (int i = 0; i < g->nnodes; i++)
		for (int j = 0; !g->nodes[i].dead && j < g->nodes[i].noutputs; j++)
			if (g->nodes[i].outputs[j] >= 0)
				prod[g->nodes[i].outputs[j]] = i;
	for (int i = 0; i < g->nnodes && !err; i++) {
		const struct mi_node *n = &g->nodes[i];
		struct eqgroup gr = { 0 };
		int y = n->noutputs ? n->outputs[0] : -1;

		if (n->dead || y < 0 || gid[y] >= 0 || !eq_producer_ok(g, n) ||
		    !mi_tensor_shape_known(&g->tensors[y]) || g->tensors[y].ndim < 2)
			continue;
		int ok = eq_grow(g, prod, &gr, y);

		for (int j = 0; ok > 0 && j < gr.nt; j++)
			ok = gid[gr.t[j]] < 0;
		if (ok > 0 && gr.nch > 1) {
			struct eqgroup *ng = realloc(grs, (ngr + 1) * sizeof(*grs));

			if (!ng) {
				ok = -ENOMEM;
			} else {
				grs = ng;
				for (int j = 0; j < gr.nt; j++)
					gid[gr.t[j]] = ngr;
				grs[ngr++] = gr;
				continue;
			}
		}
		if (ok < 0)
			err = ok;
		free(gr.t);
		free(gr.prod);
		free(gr.cons);
	}
	if (err || !ngr)
		goto out;
	/* one fp32 pass: per-channel mean squares of the group tensors */
	ms = calloc(g->ntensors, sizeof(*ms));
	outs = realloc(g->outputs, (g->noutputs + g->ntensors) * sizeof(int));
	if (!ms || !outs) {
		err = -ENOMEM;
		goto out;
	}
	g->outputs = outs;
	for (int t = 0; t < g->ntensors; t++) {
		if (gid[t] < 0)
			continue;
		ms[t] = calloc(grs[gid[t]].nch, sizeof(double));
		if (!ms[t]) {
			err = -ENOMEM;
			goto out_outputs;
		}
		if (!(g->tensors[t].flags & MI_TF_OUTPUT)) {
			g->tensors[t].flags |= MI_TF_OUTPUT;
			g->outputs[g->noutputs++] = t;
		}
	}
	for (int r = 0; r < cal->nruns && !err; r++) {
		int ni = 0;

		while (ni < g->ninputs && cal->runs[r][ni].data)
			ni++;
		if (mi_model_run(c->m, cal->runs[r], ni, NULL, 0) < 0) {
			err = qz_err("equalization run %d: %s", r, mi_last_error()) ? -EINVAL : 0;
			break;
		}
		for (int t = 0; t < g->ntensors; t++) {
			const struct mi_tensor *x = &g->tensors[t];
			int nch = gid[t] >= 0 ? grs[gid[t]].nch : 0;

			if (!nch || !x->data)
				continue;
			int64_t inner = mi_ops_prod(x->dims, 2, x->ndim), outer = x->dims[0];

			for (int64_t o = 0; o < outer; o++)
				for (int ch = 0; ch < nch; ch++) {
					const float *d = (const float *)x->data + (o * nch + ch) * inner;
					double s = 0;

					for (int64_t k = 0; k < inner; k++)
						s += (double)d[k] * d[k];
					ms[t][ch] += s / inner;
				}
		}
	}
	for (int i = 0; i < ngr && !err; i++) {
		struct eqgroup *gr = &grs[i];
		double *sc = calloc(gr->nch, sizeof(double));
		int nq = 0;

		if (!sc) {
			err = -ENOMEM;
			break;
		}
		/* the largest relative spread over the quantized tensors */
		for (int j = 0; j < gr->nt; j++) {
			int t = gr->t[j];
			double top = 0;

			if (c->qt_of[t] < 0)
				continue;
			nq++;
			for (int ch = 0; ch < gr->nch; ch++)
				top = fmax(top, ms[t][ch]);
			for (int ch = 0; ch < gr->nch && top > 0; ch++)
				sc[ch] = fmax(sc[ch], sqrt(ms[t][ch] / top));
		}
		if (nq) {
			for (int ch = 0; ch < gr->nch; ch++) {
				double f = pow(fmax(sc[ch], EQ_MIN_RATIO), -alpha);

				for (int k = 0; k < gr->np; k++)
					eq_scale(g, &g->nodes[gr->prod[k]], true, ch, f);
				for (int k = 0; k < gr->nc; k++)
					eq_scale(g, &g->nodes[gr->cons[k]], false, ch, 1 / f);
			}
			nscaled++;
		}
		free(sc);
	}
out_outputs:
	for (int i = nout0; i < g->noutputs; i++)
		g->tensors[g->outputs[i]].flags &= ~MI_TF_OUTPUT;
	g->noutputs = nout0;
	/* planned with the old weights (and outputs): plan again on the
	 * next run */
	c->m->prepared = false;
out:
	for (int t = 0; ms && t < g->ntensors; t++)
		free(ms[t]);
	free(ms);
	for (int i = 0; i < ngr; i++) {
		free(grs[i].t);
		free(grs[i].prod);
		free(grs[i].cons);
	}
	free(grs);
	free(prod);
	free(gid);
	return err ? err : nscaled;
}
