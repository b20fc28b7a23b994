// SPDX-License-Identifier: MIT
/*
 * `metainfer quantize`: calibration (running the fp32 model on the
 * calibration inputs, histograms, MSE / percentile ranges, shared ranges
 * of Concat and data movement).
 */
#include "quant/quantize-impl.h"

/* ---- calibration ------------------------------------------------------ */

static uint64_t rng_next(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*s = x;
	return x;
}

static void observe(struct qctx *c, int pass)
{
	for (int i = 0; i < c->nqt; i++) {
		struct qtensor *q = &c->qt[i];
		const struct mi_tensor *t = &c->g->tensors[q->t];
		int64_t n = mi_tensor_numel(t);
		const float *d = t->data;

		if (!d || t->dtype != MI_DT_FLOAT || n <= 0)
			continue;
		if (pass == 0) {
			for (int64_t k = 0; k < n; k++) {
				q->mn = d[k] < q->mn ? d[k] : q->mn;
				q->mx = d[k] > q->mx ? d[k] : q->mx;
			}
			q->seen = true;
			if (q->csum && t->ndim > q->caxis && t->dims[q->caxis] == q->nch) {
				int64_t inner = mi_ops_prod(t->dims, q->caxis + 1, t->ndim);
				int64_t outer = n / (inner * q->nch);

				for (int64_t o = 0; o < outer; o++)
					for (int ch = 0; ch < q->nch; ch++) {
						const float *r = d + (o * q->nch + ch) * inner;
						double s = 0, s2 = 0;

						for (int64_t k = 0; k < inner; k++)
							s += r[k];
						q->csum[ch] += s;
						if (!q->csq)
							continue;
						for (int64_t k = 0; k < inner; k++)
							s2 += (double)r[k] * r[k];
						q->csq[ch] += s2;
					}
				q->ccount += (double)outer * inner;
			}
		} else if (q->hist && q->hmax > 0 && c->mse && q->fn != ACT_ID) {
			double f = HIST_BINS / q->hmax;

			for (int64_t k = 0; k < n; k++) {
				int b = (int)((d[k] - q->hlo) * f);

				q->hist[b < 0 ? 0 : b >= HIST_BINS ? HIST_BINS - 1 : b]++;
			}
		} else if (q->hist && q->hmax > 0) {
			double f = HIST_BINS / q->hmax;

			for (int64_t k = 0; k < n; k++) {
				int b = (int)(fabs(d[k]) * f);

				q->hist[b >= HIST_BINS ? HIST_BINS - 1 : b]++;
			}
		}
	}
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int qz_calib_random(struct qctx *c, int count, uint64_t seed, struct calib *cal)
{
	struct mi_graph *g = c->g;

	cal->runs = calloc(count, sizeof(*cal->runs));
	if (!cal->runs)
		return -ENOMEM;
	uint64_t s = seed * 0x9E3779B97F4A7C15ull + 7;

	for (int r = 0; r < count; r++) {
		cal->runs[r] = calloc(g->ninputs + 1, sizeof(struct mi_value));
		if (!cal->runs[r])
			return -ENOMEM;
		cal->nruns++;
		for (int i = 0; i < g->ninputs; i++) {
			struct mi_tensor *t = &g->tensors[g->inputs[i]];
			struct mi_value *v = &cal->runs[r][i];
			int64_t n = 1;

			v->dtype = t->dtype;
			v->ndim = t->ndim;
			for (int d = 0; d < t->ndim; d++) {
				v->dims[d] = t->dims[d] < 0 ? 1 : t->dims[d];
				n *= v->dims[d];
			}
			if (t->dtype != MI_DT_FLOAT)
				return qz_err("input '%s' is %s: --calib-random fills float32 inputs only",
					    t->name, mi_dtype_name(t->dtype)) ? -EINVAL : 0;
			v->nbytes = n * 4;
			v->data = malloc(v->nbytes + 1);
			if (!v->data)
				return -ENOMEM;
			for (int64_t k = 0; k < n; k++) {
				double u = (double)(rng_next(&s) >> 11) / 9007199254740992.0;

				((float *)v->data)[k] = (float)(2 * u - 1);
			}
		}
	}
	return 0;
}

int qz_calib_dir(struct qctx *c, const char *dir, struct calib *cal)
{
	struct mi_graph *g = c->g;
	DIR *d = opendir(dir);
	struct dirent *e;
	char **names = NULL;
	int nn = 0, err = 0;

	if (!d)
		return qz_err("%s: %s", dir, strerror(errno)) ? -ENOENT : 0;
	if (g->ninputs != 1) {
		closedir(d);
		return qz_err("--calib DIR needs a model with one input (this one has %d); use --calib-random",
			    g->ninputs) ? -EINVAL : 0;
	}
	while ((e = readdir(d))) {
		size_t l = strlen(e->d_name);

		if (l > 4 && !strcmp(e->d_name + l - 4, ".npy")) {
			char **nw = realloc(names, (nn + 1) * sizeof(*names));

			if (!nw || asprintf(&nw[nn], "%s/%s", dir, e->d_name) < 0) {
				names = nw;
				err = -ENOMEM;
				break;
			}
			names = nw;
			nn++;
		}
	}
	closedir(d);
	if (!err && !nn)
		err = qz_err("%s: no .npy files", dir) ? -ENOENT : 0;
	if (!err)
		qsort(names, nn, sizeof(*names), cmp_str);
	cal->runs = calloc(nn + 1, sizeof(*cal->runs));
	cal->owned = calloc(nn + 1, sizeof(*cal->owned));
	if (!cal->runs || !cal->owned)
		err = -ENOMEM;
	for (int i = 0; i < nn && !err; i++) {
		char msg[256];
		struct mi_tensor *t = &cal->owned[cal->nowned];

		if (mi_npy_read(names[i], t, msg, sizeof(msg))) {
			err = qz_err("%s: %s", names[i], msg) ? -EINVAL : 0;
			break;
		}
		cal->nowned++;
		cal->runs[i] = calloc(2, sizeof(struct mi_value));
		if (!cal->runs[i]) {
			err = -ENOMEM;
			break;
		}
		cal->nruns++;
		struct mi_value *v = &cal->runs[i][0];

		v->dtype = t->dtype;
		v->ndim = t->ndim;
		memcpy(v->dims, t->dims, sizeof(v->dims));
		v->data = t->data;
		v->nbytes = t->nbytes;
	}
	for (int i = 0; i < nn; i++)
		free(names[i]);
	free(names);
	return err;
}

void qz_calib_free(struct calib *cal, bool own_data)
{
	for (int r = 0; r < cal->nruns; r++) {
		if (own_data && cal->runs[r])
			for (int i = 0; cal->runs[r][i].data; i++)
				free(cal->runs[r][i].data);
		free(cal->runs[r]);
	}
	free(cal->runs);
	for (int i = 0; i < cal->nowned; i++)
		mi_tensor_fini(&cal->owned[i]);
	free(cal->owned);
}

/*
 * The clipping limit L (on |x|) that minimizes the expected squared error
 * of quantizing the histogrammed values: clipped values cost (|x| - L)^2,
 * the others the rounding error step^2 / 12, step = the clipped range
 * / 255. Limits below hmax / 16 are not considered.
 */
static double mse_limit(const struct qtensor *q)
{
	double w = q->hmax / HIST_BINS, s0 = 0, s1 = 0, s2 = 0, tot = 0;
	double best = INFINITY, lim_best = q->hmax;

	for (int b = 0; b < HIST_BINS; b++)
		tot += q->hist[b];
	/* sweep b from the top: s* = sums over bins above b (clipped) */
	for (int b = HIST_BINS - 1; b >= HIST_BINS / 16; b--) {
		double lim = (b + 1) * w;
		double hi = fmin(q->mx, lim), lo = fmax(q->mn, -lim);
		double step = (fmax(hi, 0) - fmin(lo, 0)) / 255.0;
		double clip = s2 - 2 * lim * s1 + lim * lim * s0;
		double err = clip + (tot - s0) * step * step / 12.0;

		if (err < best) {
			best = err;
			lim_best = lim;
		}
		double cnt = q->hist[b], cen = (b + 0.5) * w;

		s0 += cnt;
		s1 += cnt * cen;
		s2 += cnt * cen * cen;
	}
	return lim_best;
}

/*
 * What the readers of a quantized tensor do with it: the error that
 * matters is the one after that function (act_fn()), e.g. a HardSigmoid
 * gate ignores everything outside [-3, 3] and a SiLU its far negative
 * values.
 */
static int act_fn(const struct mi_graph *g, int t, float *fa, float *fb)
{
	int nc = 0, cons[3], hs = -1, sg = -1, mul = -1;

	if (qz_is_graph_output(g, t))
		return ACT_ID;
	for (int i = 0; i < g->nnodes && nc < 3; i++) {
		const struct mi_node *n = &g->nodes[i];

		if (n->dead)
			continue;
		for (int j = 0; j < n->ninputs; j++)
			if (n->inputs[j] == t) {
				cons[nc++] = i;
				break;
			}
	}
	if (nc < 1 || nc > 2)
		return ACT_ID;
	for (int k = 0; k < nc; k++) {
		const struct mi_node *n = &g->nodes[cons[k]];

		if (n->domain[0] || n->noutputs != 1 || n->inputs[0] != t)
			return ACT_ID;
		if (!strcmp(n->op_type, "HardSigmoid"))
			hs = cons[k];
		else if (!strcmp(n->op_type, "Sigmoid"))
			sg = cons[k];
		else if (!strcmp(n->op_type, "Mul") && n->ninputs == 2)
			mul = cons[k];
		else if (nc == 1 && !strcmp(n->op_type, "Relu"))
			return ACT_RELU;
		else if (nc == 1 && !strcmp(n->op_type, "HardSwish")) {
			*fa = 1.0f / 6;
			*fb = 0.5f;
			return ACT_HSWISH;
		} else
			return ACT_ID;
	}
	if (hs >= 0) {
		*fa = mi_attr_float(&g->nodes[hs], "alpha", 0.2f);
		*fb = mi_attr_float(&g->nodes[hs], "beta", 0.5f);
	}
	if (nc == 1)
		return hs >= 0 ? ACT_HSIG : sg >= 0 ? ACT_SIG : ACT_ID;
	/* x * f(x): the Mul reads x and the HardSigmoid's/Sigmoid's output */
	int gate = hs >= 0 ? hs : sg;

	if (mul < 0 || gate < 0 || g->nodes[mul].inputs[1] != g->nodes[gate].outputs[0])
		return ACT_ID;
	return hs >= 0 ? ACT_HSWISH : ACT_SILU;
}

/* f(x) and f'(x) of act_fn()'s function */
static double act_eval(int fn, double a, double b, double x, double *dfdx)
{
	double h, s;

	switch (fn) {
	case ACT_RELU:
		*dfdx = x > 0;
		return x > 0 ? x : 0;
	case ACT_HSIG:
	case ACT_HSWISH:
		h = a * x + b;
		s = h <= 0 ? 0 : h >= 1 ? 1 : h;
		if (fn == ACT_HSIG) {
			*dfdx = h > 0 && h < 1 ? a : 0;
			return s;
		}
		*dfdx = s + (h > 0 && h < 1 ? a * x : 0);
		return x * s;
	case ACT_SIG:
	case ACT_SILU:
		s = 1 / (1 + exp(-x));
		if (fn == ACT_SIG) {
			*dfdx = s * (1 - s);
			return s;
		}
		*dfdx = s + x * s * (1 - s);
		return x * s;
	default:
		*dfdx = 1;
		return x;
	}
}

#define MSE_CAND 256 /* clipping limits tried per side */

/*
 * The range [lo, hi] (lo <= 0 <= hi, at bin edges of the signed histogram)
 * that minimizes the expected squared quantization error after the
 * readers' function f: a value clipped to an end costs (f(x) - f(end))^2,
 * the others the rounding error f'(x)^2 step^2 / 12, step = (hi - lo) /
 * 255. Without a saturating f (identity, Relu, the x * f(x) ones) ranges
 * below 1/16 of the calibrated one are not considered.
 */
void qz_mse_range(const struct qtensor *q, double *lo_out, double *hi_out)
{
	int B = HIST_BINS, iz, st, nl = 0, nh = 0, il[MSE_CAND + 2], ih[MSE_CAND + 2];
	double w = q->hmax / B, fx[HIST_BINS], d2[HIST_BINS + 1], cl[MSE_CAND + 2],
	       ch[MSE_CAND + 2], best = INFINITY;
	bool sat = q->fn == ACT_HSIG || q->fn == ACT_SIG;

	iz = (int)nearbyint(-q->hlo / w);
	iz = iz < 0 ? 0 : iz > B ? B : iz;
	d2[0] = 0;
	for (int b = 0; b < B; b++) {
		double df, x = q->hlo + (b + 0.5) * w;

		fx[b] = act_eval(q->fn, q->fa, q->fb, x, &df);
		d2[b + 1] = d2[b] + q->hist[b] * df * df;
	}
	/* candidate edges: every st-th from 0 out, plus the extremes */
	st = (B + MSE_CAND - 1) / MSE_CAND;
	for (int i = iz; i >= 0; i -= st)
		il[nl++] = i;
	if (il[nl - 1] != 0)
		il[nl++] = 0;
	for (int i = iz; i <= B; i += st)
		ih[nh++] = i;
	if (ih[nh - 1] != B)
		ih[nh++] = B;
	for (int k = 0; k < nl; k++) {
		double df, fe = act_eval(q->fn, q->fa, q->fb, q->hlo + il[k] * w, &df), e = 0;

		for (int b = 0; b < il[k]; b++)
			e += q->hist[b] * (fx[b] - fe) * (fx[b] - fe);
		cl[k] = e;
	}
	for (int k = 0; k < nh; k++) {
		double df, fe = act_eval(q->fn, q->fa, q->fb, q->hlo + ih[k] * w, &df), e = 0;

		for (int b = ih[k]; b < B; b++)
			e += q->hist[b] * (fx[b] - fe) * (fx[b] - fe);
		ch[k] = e;
	}
	*lo_out = q->hlo;
	*hi_out = q->hlo + q->hmax;
	for (int a = 0; a < nl; a++)
		for (int k = 0; k < nh; k++) {
			double span = (ih[k] - il[a]) * w, step = span / 255.0;
			double err = cl[a] + ch[k] + (d2[ih[k]] - d2[il[a]]) * step * step / 12.0;

			if (ih[k] == il[a] || (!sat && span < q->hmax / 16) || !(err < best))
				continue;
			best = err;
			*lo_out = q->hlo + il[a] * w;
			*hi_out = q->hlo + ih[k] * w;
		}
}

/* A move of one data input: the same values, rearranged. */
static bool move_op(const struct mi_node *n)
{
	static const char *const ops[] = { "Identity", "Reshape", "Flatten", "Squeeze",
					   "Unsqueeze", "Transpose", "Slice", "Split",
					   "Gather", NULL };

	if (n->dead || n->domain[0] || n->ninputs < 1 || n->inputs[0] < 0)
		return false;
	for (int i = 0; ops[i]; i++)
		if (!strcmp(n->op_type, ops[i]))
			return true;
	return false;
}

/*
 * A quantized Concat input that nothing else reads, written by a quantized
 * node (not a MaxPool or a move, which keep their input's parameters),
 * takes the Concat output's parameters: the node then quantizes straight
 * to them and the Concat copies bytes, where the input's own parameters
 * cost a second rounding at the Concat (to the output's grid, which the
 * values end on either way).
 */
static void share_concat_params(struct qctx *c)
{
	struct mi_graph *g = c->g;

	for (int o = 0; o < g->norder; o++) {
		const struct mi_node *n = &g->nodes[g->order[o]];
		int qy = n->noutputs == 1 && n->outputs[0] >= 0 ? c->qt_of[n->outputs[0]] : -1;

		if (n->dead || n->domain[0] || strcmp(n->op_type, "Concat") || qy < 0)
			continue;
		for (int k = 0; k < n->ninputs; k++) {
			int x = n->inputs[k], pr, qx;
			bool out = false;

			qx = x >= 0 ? c->qt_of[x] : -1;
			pr = x >= 0 ? g->tensors[x].producer : -1;
			/* the model's own outputs (calibration adds more) */
			for (int i = 0; i < c->orig_noutputs; i++)
				out |= g->outputs[i] == x;
			if (qx < 0 || pr < 0 || out || qz_consumers(g, x, NULL) != 1 ||
			    !strcmp(g->nodes[pr].op_type, "MaxPool") || move_op(&g->nodes[pr]))
				continue;
			c->qt[qx].scale = c->qt[qy].scale;
			c->qt[qx].zp = c->qt[qy].zp;
		}
	}
}

/*
 * A quantized tensor that moves (Transpose, Reshape, Slice, Split,
 * Gather, ...) make from one quantized tensor alone takes that tensor's
 * parameters: DQ -> moves -> Q then round-trips every byte exactly (the
 * runtime copies the bytes, qplan.c plan_moves) instead of rounding the
 * values a second time.
 */
static void share_move_params(struct qctx *c)
{
	struct mi_graph *g = c->g;

	share_concat_params(c);
	for (int o = 0; o < g->norder; o++) {
		const struct mi_node *n = &g->nodes[g->order[o]];

		if (!move_op(n))
			continue;
		for (int k = 0; k < n->noutputs; k++) {
			int qo = n->outputs[k] >= 0 ? c->qt_of[n->outputs[k]] : -1, t = n->inputs[0];

			if (qo < 0)
				continue;
			/* up through unquantized moves to a quantized source */
			while (c->qt_of[t] < 0 && g->tensors[t].producer >= 0 &&
			       move_op(&g->nodes[g->tensors[t].producer]))
				t = g->nodes[g->tensors[t].producer].inputs[0];
			if (c->qt_of[t] < 0)
				continue;
			c->qt[qo].scale = c->qt[c->qt_of[t]].scale;
			c->qt[qo].zp = c->qt[c->qt_of[t]].zp;
		}
	}
}

int qz_calibrate(struct qctx *c, struct calib *cal)
{
	struct mi_graph *g = c->g;
	int *outs = realloc(g->outputs, (g->noutputs + c->nqt) * sizeof(int));

	if (!outs)
		return -ENOMEM;
	c->orig_noutputs = g->noutputs;
	g->outputs = outs;
	for (int i = 0; i < c->nqt && c->mse_act; i++)
		c->qt[i].fn = act_fn(g, c->qt[i].t, &c->qt[i].fa, &c->qt[i].fb);
	/* Mark every calibrated tensor as a graph output so no fusion hides
	 * it and the arena keeps it until the run ends. */
	for (int i = 0; i < c->nqt; i++) {
		struct mi_tensor *t = &g->tensors[c->qt[i].t];

		if (!(t->flags & MI_TF_OUTPUT) && !(t->flags & MI_TF_INPUT)) {
			t->flags |= MI_TF_OUTPUT;
			g->outputs[g->noutputs++] = c->qt[i].t;
		}
	}
	int passes = c->percentile > 0 || c->mse ? 2 : 1;

	for (int pass = 0; pass < passes; pass++) {
		for (int r = 0; r < cal->nruns; r++) {
			int ni = 0;

			while (ni < g->ninputs && cal->runs[r][ni].data)
				ni++;
			if (mi_model_run(c->m, cal->runs[r], ni, NULL, 0) < 0)
				return qz_err("calibration run %d: %s", r, mi_last_error()) ? -EINVAL : 0;
			/* inputs point at the caller's buffers: observe now */
			observe(c, pass);
		}
		if (pass == 0 && passes == 2)
			for (int i = 0; i < c->nqt; i++) {
				struct qtensor *q = &c->qt[i];

				q->hmax = fmax(fabs(q->mn), fabs(q->mx));
				if (c->mse && q->seen && q->fn != ACT_ID) { /* signed, 0 included */
					q->hlo = fmin(q->mn, 0);
					q->hmax = fmax(q->mx, 0) - q->hlo;
				}
				q->hist = calloc(HIST_BINS, sizeof(uint32_t));
				if (!q->hist)
					return -ENOMEM;
			}
	}
	for (int i = 0; i < c->nqt; i++) {
		struct qtensor *q = &c->qt[i];

		if (!q->seen)
			return qz_err("tensor '%s' was not computed during calibration",
				    g->tensors[q->t].name) ? -EINVAL : 0;
		if (q->hist && q->hmax > 0 && c->mse && q->fn == ACT_ID) {
			double lim = mse_limit(q);

			q->mn = fmax(q->mn, -lim);
			q->mx = fmin(q->mx, lim);
		} else if (q->hist && q->hmax > 0 && c->mse) {
			double lo, hi;

			qz_mse_range(q, &lo, &hi);
			q->mn = fmax(q->mn, lo);
			q->mx = fmin(q->mx, hi);
		} else if (q->hist && q->hmax > 0) {
			uint64_t tot = 0, acc = 0;
			int b;

			for (b = 0; b < HIST_BINS; b++)
				tot += q->hist[b];
			for (b = 0; b < HIST_BINS; b++) {
				acc += q->hist[b];
				if (acc >= tot * (c->percentile / 100.0))
					break;
			}
			double lim = (b + 1) * q->hmax / HIST_BINS;

			q->mn = fmax(q->mn, -lim);
			q->mx = fmin(q->mx, lim);
		}
		double mn = fmin(q->mn, 0), mx = fmax(q->mx, 0);

		if (mx - mn < 1e-8)
			mx = mn + 1e-8;
		q->scale = (float)((mx - mn) / 255.0);
		double z = nearbyint(-mn / q->scale);

		q->zp = z < 0 ? 0 : z > 255 ? 255 : (int)z;
	}
	/* MaxPool output: the input's parameters, so DQ -> MaxPool -> Q runs
	 * on uint8 directly (max commutes with quantization) */
	for (int o = 0; o < g->norder; o++) {
		struct mi_node *n = &g->nodes[g->order[o]];
		int qi, qo;

		if (strcmp(n->op_type, "MaxPool") || n->domain[0] || n->noutputs != 1 ||
		    n->inputs[0] < 0)
			continue;
		qi = c->qt_of[n->inputs[0]];
		qo = c->qt_of[n->outputs[0]];
		if (qi >= 0 && qo >= 0) {
			c->qt[qo].scale = c->qt[qi].scale;
			c->qt[qo].zp = c->qt[qi].zp;
		}
	}
	share_move_params(c);
	return 0;
}
