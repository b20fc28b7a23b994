// SPDX-License-Identifier: MIT
/*
 * `metainfer quantize --min-cosine`: mixed precision, the search for
 * the fastest configuration of fp32 / int8 units that keeps the cosine.
 */
#include "debug.h"
#include "quant/quantize-impl.h"

/* ---- --min-cosine: mixed precision ------------------------------------ */

#define MINCOS_SENS 8      /* inputs the per-unit errors are measured on */
#define MINCOS_REFINE 12   /* refinement trials at most */
#define MINCOS_FRESH 100   /* tail estimate: the minimum over a fresh draw of
			    * as many inputs (the held-out count, and what
			    * tools/bench/cosine.py checks)... */
#define MINCOS_CONF 0.9    /* ...kept with this probability... */
#define MINCOS_MARGIN_Z 1.2816 /* ...plus this many standard errors (one-sided
				* 90% confidence) */
#define MINCOS_TAIL_MIN 16 /* fewer judged inputs: the plain minimum */

static uint64_t fnv1a(const uint8_t *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

void qz_memo_free(struct qctx *c)
{
	for (int i = 0; i < c->nmemo; i++) {
		free(c->memo[i].flags);
		free(c->memo[i].cos);
	}
	free(c->memo);
	c->memo = NULL;
	c->nmemo = c->cmemo = 0;
}

/* The entry of the configuration the flags say now (written as buf), a new
 * one if none; NULL when out of memory or turned off. */
static struct evmemo *memo_get(struct qctx *c, const struct calib *ev, const uint8_t *buf,
			       size_t len)
{
	size_t nf = (size_t)c->nqt + c->nnodes;
	uint8_t *f;
	uint64_t h;
	struct evmemo *e;

	if (c->memo_ev != ev)
		qz_memo_free(c);
	c->memo_ev = ev;
	f = malloc(nf + 1);
	if (!f)
		return NULL;
	for (int i = 0; i < c->nqt; i++)
		f[i] = c->qt[i].fp32;
	for (int i = 0; i < c->nnodes; i++)
		f[c->nqt + i] = c->nodes[i].wfp32 | c->nodes[i].w8 << 1;
	h = fnv1a(buf, len);
	for (int i = 0; i < c->nmemo; i++) {
		e = &c->memo[i];
		if (e->len == len && e->hash == h && !memcmp(e->flags, f, nf)) {
			free(f);
			return e;
		}
	}
	if (c->nmemo == c->cmemo) {
		int nc = c->cmemo ? 2 * c->cmemo : 64;
		struct evmemo *m = realloc(c->memo, nc * sizeof(*m));

		if (!m) {
			free(f);
			return NULL;
		}
		c->memo = m;
		c->cmemo = nc;
	}
	e = &c->memo[c->nmemo];
	e->cos = malloc((ev->nruns + 1) * sizeof(double));
	if (!e->cos) {
		free(f);
		return NULL;
	}
	for (int r = 0; r < ev->nruns; r++)
		e->cos[r] = NAN;
	e->flags = f;
	e->len = len;
	e->hash = h;
	c->nmemo++;
	return e;
}

/* --min-cosine: evaluation inputs run at once, one model instance each */
#define MINCOS_WORKERS 16

/* One evaluation input run on one of the loaded instances. */
struct evrun {
	struct mi_model *m;
	struct mi_value *outs;
	const struct mi_value *in;
	int nin, nout;
	int r;   /* the input, or -1: nothing run */
	int err;
	char msg[256]; /* mi_last_error() is per thread */
};

static void *evrun_fn(void *p)
{
	struct evrun *e = p;

	e->err = mi_model_run(e->m, e->in, e->nin, e->outs, e->nout);
	if (e->err < 0)
		snprintf(e->msg, sizeof(e->msg), "%s", mi_last_error());
	return NULL;
}

/* Instances of the model run side by side: --threads (0: the cores), each
 * at one thread, the inputs split between them (a batch-1 inference keeps
 * two cores busy poorly); 1: one instance at
 * --threads.  The kernels give the same results at any thread count. */
static int eval_workers(const struct qctx *c)
{
	int w = c->nthreads > 0 ? c->nthreads : mi_cpu_ncores();

	return w < 1 ? 1 : w > MINCOS_WORKERS ? MINCOS_WORKERS : w;
}

/*
 * Run the model as rewritten now (written to memory, loaded and run by the
 * library's fast kernels) on the first nruns inputs of ev (or inputs
 * sel[0..nruns-1]).  With c->ref unset, keep its float outputs
 * (concatenated per input) as the reference; otherwise return the minimum
 * and mean over the runs of the outputs' cosine similarity with the
 * reference, and each run's in per (if not NULL).  A run whose cosine is
 * below stop ends the evaluation early (*cmin < stop then tells).  Inputs
 * this configuration was run on before are not run again (struct evmemo);
 * the others run eval_workers() at a time, on as many instances (loaded
 * when first needed), and are taken in order as one after the other:
 * the same numbers and the same early stop whatever the count (a batch
 * may run a few inputs past the stop, for nothing).
 */
int qz_eval_model(struct qctx *c, struct calib *ev, int nruns, const int *sel,
		      double stop, double *cmin, double *cmean, double *per)
{
	uint8_t *buf = NULL;
	size_t len = 0;
	int nw = eval_workers(c), nb = 0, b0 = 0;
	struct mi_model_opts mo = { .nthreads = nw > 1 ? 1 : c->nthreads, .isa = c->isa_cap };
	struct evrun run[MINCOS_WORKERS];
	pthread_t tid[MINCOS_WORKERS];
	bool spawned[MINCOS_WORKERS];
	struct mi_value *outs = NULL;
	struct evmemo *memo = NULL;
	bool keep = !c->ref;
	int err = qz_rewrite(c, c->path, NULL, &buf, &len);

	if (err)
		return err;
	if (!keep)
		memo = memo_get(c, ev, buf, len);
	memset(run, 0, sizeof(run));
	outs = calloc((size_t)nw * (c->orig_noutputs + 1), sizeof(*outs));
	if (keep && outs) {
		c->ref = calloc(nruns, sizeof(*c->ref));
		c->nrefruns = nruns;
	}
	if (!outs || (keep && !c->ref)) {
		free(buf);
		free(outs);
		return -ENOMEM;
	}
	for (int w = 0; w < nw; w++)
		run[w].outs = outs + (size_t)w * (c->orig_noutputs + 1);
	*cmin = 1;
	*cmean = 0;
	for (int rr = 0; rr < nruns && !err && !(*cmin < stop); rr++) {
		double dot = 0, na = 0, nb_ = 0, cs;
		int64_t k = 0;
		int r = sel ? sel[rr] : rr;
		struct evrun *e;

		if (memo && !isnan(memo->cos[r])) {
			cs = memo->cos[r];
			c->nruns_memo++;
			goto got;
		}
		if (rr >= b0 + nb) {
			/* the next batch: this input and those after it
			 * left to run, up to one per instance */
			b0 = rr;
			nb = 0;
			for (int j = rr; j < nruns && nb < nw; j++) {
				int rj = sel ? sel[j] : j, ni = 0;

				if (memo && !isnan(memo->cos[rj]) && j > rr) {
					run[nb++].r = -1;
					continue;
				}
				while (ni < c->g->ninputs && ev->runs[rj][ni].data)
					ni++;
				run[nb].r = rj;
				run[nb].in = ev->runs[rj];
				run[nb].nin = ni;
				run[nb].nout = c->orig_noutputs;
				nb++;
			}
			for (int w = 0; w < nb && !err; w++) {
				if (run[w].r < 0 || run[w].m)
					continue;
				err = mi_model_load_buffer(buf, len, NULL, "quantized model", &mo,
							   &run[w].m);
				if (err < 0) {
					err = qz_err("--min-cosine: %s", mi_last_error()) ? err : 0;
					run[w].m = NULL;
				} else {
					err = 0;
				}
			}
			if (err)
				break;
			for (int w = 1; w < nb; w++) {
				spawned[w] = run[w].r >= 0 &&
					     !pthread_create(&tid[w], NULL, evrun_fn, &run[w]);
				if (run[w].r >= 0 && !spawned[w])
					evrun_fn(&run[w]);
			}
			evrun_fn(&run[0]);
			for (int w = 1; w < nb; w++)
				if (spawned[w])
					pthread_join(tid[w], NULL);
			for (int w = 0; w < nb; w++)
				c->nruns_done += run[w].r >= 0;
		}
		e = &run[rr - b0];
		if (e->err < 0) {
			err = qz_err("--min-cosine: run %d: %s", r, e->msg) ? e->err : 0;
			break;
		}
		for (int i = 0; i < c->orig_noutputs; i++)
			k += e->outs[i].dtype == MI_DT_FLOAT ? (int64_t)(e->outs[i].nbytes / 4) : 0;
		if (keep) {
			if (r > 0 && k != c->nref) {
				err = qz_err("--min-cosine: outputs change size between inputs") ?
					      -EINVAL : 0;
				break;
			}
			c->nref = k;
			c->ref[r] = malloc((k + 1) * sizeof(float));
			if (!c->ref[r]) {
				err = -ENOMEM;
				break;
			}
		} else if (k != c->nref) {
			err = qz_err("--min-cosine: the quantized model's outputs differ in size") ?
				      -EINVAL : 0;
			break;
		}
		k = 0;
		for (int i = 0; i < c->orig_noutputs; i++) {
			const float *y = e->outs[i].data;
			int64_t n = e->outs[i].nbytes / 4;

			if (e->outs[i].dtype != MI_DT_FLOAT)
				continue;
			if (keep)
				memcpy(c->ref[r] + k, y, n * sizeof(float));
			for (int64_t j = 0; j < n; j++) {
				double x = y[j], bb = c->ref[r][k + j];

				dot += x * bb;
				na += x * x;
				nb_ += bb * bb;
			}
			k += n;
		}
		cs = na > 0 && nb_ > 0 ? dot / sqrt(na * nb_) : na == nb_ ? 1.0 : 0.0;
		if (memo)
			memo->cos[r] = cs;
got:
		*cmin = fmin(*cmin, cs);
		*cmean += cs / nruns;
		if (per)
			per[rr] = cs;
	}
	free(buf);
	free(outs);
	for (int w = 0; w < nw; w++)
		mi_model_free(run[w].m);
	return err;
}

/*
 * The probit of q: z with P(N(0,1) < z) = q, by bisection on erfc (exact
 * to the last bits; only a few hundred are needed per judgement).
 */
static double probit(double q)
{
	double lo = -40, hi = 40;

	for (int it = 0; it < 100; it++) {
		double z = (lo + hi) / 2;

		if (0.5 * erfc(-z / sqrt(2)) < q)
			lo = z;
		else
			hi = z;
	}
	return (lo + hi) / 2;
}

/*
 * Fitted tail of the sorted log errors e[0..n-1] (skip: the index left out,
 * or -1): the line a + b * z through the upper half of the normal
 * probability plot (e[i] against the normal quantile q[i] of its plotting
 * position, Blom's (i + 1 - 3/8) / (n + 1/4)), evaluated at z.
 */
static double tail_fit(const double *e, int n, int skip, const double *q, double z)
{
	int m = (n - (skip >= 0)) / 2, n1 = n - (skip >= 0), j = 0;
	double sq = 0, se = 0, sqq = 0, sqe = 0, b;

	for (int i = 0; i < n; i++) {
		int r = j;	/* rank among the n1 kept */

		if (i == skip)
			continue;
		j++;
		if (r < n1 - m)
			continue;
		sq += q[r];
		se += e[i];
		sqq += q[r] * q[r];
		sqe += q[r] * e[i];
	}
	b = (sqe - sq * se / m) / fmax(sqq - sq * sq / m, 1e-300);
	return se / m + b * (z - sq / m);
}

static int cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y ? 1 : 0;
}

/*
 * What a configuration is judged by: the minimum cosine over the n
 * evaluation inputs, or, if lower, an estimate of the minimum over a fresh
 * draw of MINCOS_FRESH inputs.  The minimum of a sample is a random
 * variable, so the errors 1 - cosine are modelled: their logarithms' upper
 * half is fitted by a normal tail (a line through the upper half of the
 * normal probability plot: the logarithms are skewed to the right, so a
 * fit of all of them, as a log-normal, underestimates the tail), and the
 * fit's quantile at 1 - p is taken, p chosen so that MINCOS_FRESH fresh
 * draws all stay within it with probability MINCOS_CONF: (1 - p)^N =
 * MINCOS_CONF.  The search picks the cheapest configuration whose estimate
 * passes, so an estimate high by chance is preferred (selection bias): the
 * estimate is moved up by MINCOS_MARGIN_Z of its standard error (the
 * jackknife's: the estimate with each input left out in turn).  *tail gets
 * that estimate, *se its standard error (in log error).
 */
double qz_judged(const double *per, int n, double *tail, double *se)
{
	double mn = 1, z, t, *e = NULL, *q = NULL, *q1 = NULL, mj = 0, vj = 0, *lj = NULL;

	for (int i = 0; i < n; i++)
		mn = fmin(mn, per[i]);
	*tail = mn;
	*se = 0;
	if (n < MINCOS_TAIL_MIN)
		return mn;
	e = malloc(n * sizeof(*e));
	q = malloc(2 * n * sizeof(*q));
	lj = malloc(n * sizeof(*lj));
	if (!e || !q || !lj) {
		/* out of memory: the plain minimum */
		free(e);
		free(q);
		free(lj);
		return mn;
	}
	q1 = q + n;
	for (int i = 0; i < n; i++) {
		e[i] = log(fmax(1 - per[i], 1e-15));
		q[i] = probit((i + 1 - 0.375) / (n + 0.25));
		q1[i] = i < n - 1 ? probit((i + 1 - 0.375) / (n - 1 + 0.25)) : 0;
	}
	qsort(e, n, sizeof(*e), cmp_dbl);
	z = probit(pow(MINCOS_CONF, 1.0 / MINCOS_FRESH));
	t = tail_fit(e, n, -1, q, z);
	for (int j = 0; j < n; j++) {
		lj[j] = tail_fit(e, n, j, q1, z);
		mj += lj[j] / n;
	}
	for (int j = 0; j < n; j++)
		vj += (lj[j] - mj) * (lj[j] - mj) * (n - 1) / n;
	*se = sqrt(vj);
	*tail = 1 - exp(t + MINCOS_MARGIN_Z * *se);
	free(e);
	free(q);
	free(lj);
	return fmin(mn, *tail);
}

static int cmp_unit(const void *a, const void *b)
{
	const struct unit *x = a, *y = b;

	return x->rank < y->rank ? 1 : x->rank > y->rank ? -1 : x->idx - y->idx;
}

void qz_set_unit(struct qctx *c, const struct unit *u, bool fp32)
{
	if (u->w8)
		c->nodes[u->idx].w8 = fp32;
	else if (u->weight)
		c->nodes[u->idx].wfp32 = fp32;
	else
		c->qt[u->idx].fp32 = fp32;
}

/* The units marked fp in fp32, the rest int8.  A node whose input stays
 * fp32 runs in fp32, so its weight does too (no speed to keep, only
 * error); so does a node whose fp32 output would feed an activation the
 * int8 kernels fuse only from quantized data (the fp32 kernels fuse it into
 * the convolution). */
static void apply_units(struct qctx *c, const struct unit *u, int nu)
{
	for (int i = 0; i < nu; i++)
		qz_set_unit(c, &u[i], u[i].fp);
	for (int i = 0; i < c->nnodes; i++) {
		int qa = c->qt_of[c->nodes[i].act], qo = c->qt_of[c->nodes[i].out];

		if ((qa >= 0 && c->qt[qa].fp32) ||
		    (qo >= 0 && c->qt[qo].fp32 && c->nodes[i].fp32_out_slow))
			c->nodes[i].wfp32 = true;
	}
	/* a tensor read only by nodes that run fp32 would only be rounded
	 * (QuantizeLinear -> DequantizeLinear between fp32 nodes): no int8
	 * node reads it, it costs the Q/DQ passes and splits the fp32
	 * kernels' fusions (an expansion conv from its depthwise conv).  It
	 * stays fp32 (c->keep_rt: quantized as the units say). */
	if (c->keep_rt)
		return;
	for (int qi = 0; qi < c->nqt; qi++) {
		bool all = c->qt[qi].qn_read;

		for (int i = 0; all && i < c->nnodes; i++)
			if (c->nodes[i].act == c->qt[qi].t && !c->nodes[i].wfp32)
				all = false;
		if (all)
			c->qt[qi].fp32 = true;
	}
}

/* qtensor.qn_read: every reader of the tensor is a quantizable node
 * reading it as its activation input, and it is not a graph output. */
static void mark_qn_read(struct qctx *c)
{
	const struct mi_graph *g = c->g;

	for (int qi = 0; qi < c->nqt; qi++) {
		int t = c->qt[qi].t, uses = 0;
		bool ok = true;

		for (int i = 0; i < c->orig_noutputs && i < g->noutputs; i++)
			ok &= g->outputs[i] != t;
		for (int i = 0; ok && i < g->nnodes; i++) {
			const struct mi_node *n = &g->nodes[i];
			bool qn = false;

			if (n->dead)
				continue;
			for (int k = 0; k < c->nnodes; k++)
				qn |= c->nodes[k].node == i && c->nodes[k].act == t;
			for (int j = 0; j < n->ninputs; j++)
				if (n->inputs[j] == t) {
					ok &= qn && j == 0;
					uses++;
				}
		}
		c->qt[qi].qn_read = ok && uses > 0;
	}
}

/* The first k units in fp32, the rest int8. */
static void set_prefix(struct qctx *c, struct unit *u, int nu, int k)
{
	for (int i = 0; i < nu; i++)
		u[i].fp = i < k;
	apply_units(c, u, nu);
}

/* Does node k's raw output feed an op other than those that read fp32
 * data as fast as quantized data (Relu/Clip are absorbed already)? */
static bool out_feeds_act(const struct qctx *c, int k)
{
	static const char *const fine[] = { "Conv", "Gemm", "MatMul", "Add", "MaxPool",
					    "Concat", "GlobalAveragePool", "Flatten",
					    "Reshape", NULL };
	const struct mi_graph *g = c->g;
	int y = c->nodes[k].out;

	if (c->nodes[k].act_node >= 0)
		return false;
	for (int i = 0; i < g->nnodes; i++) {
		const struct mi_node *n = &g->nodes[i];
		bool reads = false, ok = false;

		if (n->dead)
			continue;
		for (int j = 0; j < n->ninputs; j++)
			reads |= n->inputs[j] == y;
		for (int f = 0; reads && fine[f]; f++)
			ok |= !strcmp(n->op_type, fine[f]);
		if (reads && !ok)
			return true;
	}
	return false;
}

/* Multiply-adds of quantizable node k (weight elements x output positions). */
double qz_node_macs(const struct qctx *c, int k)
{
	const struct mi_tensor *w = &c->g->tensors[c->nodes[k].weight];
	const struct mi_tensor *y = &c->g->tensors[c->g->nodes[c->nodes[k].node].outputs[0]];
	double wn = (double)mi_tensor_numel(w), yn = (double)mi_tensor_numel(y);
	double noc = (double)w->dims[c->nodes[k].waxis];

	if (!mi_tensor_shape_known(y) || yn <= 0 || noc <= 0)
		return wn;
	return wn * (yn / noc);
}

/* Unit i's fp mark, with (for a tensor) the weights of the nodes it
 * forces to fp32: the node reading it, the node writing it where an fp32
 * output would run its activation unfused. */
static void set_group(const struct qctx *c, struct unit *u, const int *wunit, int i, bool fp)
{
	u[i].fp = fp;
	if (u[i].weight)
		return;
	for (int k = 0; k < c->nnodes; k++)
		if (c->qt_of[c->nodes[k].act] == u[i].idx ||
		    (c->qt_of[c->nodes[k].out] == u[i].idx && c->nodes[k].fp32_out_slow))
			u[wunit[k]].fp = fp;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static const char *unit_name(const struct qctx *c, const struct unit *u)
{
	const struct mi_graph *g = c->g;

	if (!u->weight)
		return g->tensors[c->qt[u->idx].t].name;
	if (g->nodes[c->nodes[u->idx].node].name && g->nodes[c->nodes[u->idx].node].name[0])
		return g->nodes[c->nodes[u->idx].node].name;
	return c->nodes[u->idx].oname;
}

/* Evaluate the configuration the flags say on n evaluation inputs (in the
 * order ord, or the first n), stopping at the first one below the target;
 * *pass: the judged cosine (qz_judged()) reaches it, and if hold > 0, also
 * that of inputs hold..n-1 alone (the held-out ones, which the search did
 * not choose by; *tail: the lower of the two).  MI_DEBUG=quant prints
 * each judgement and its inputs' cosines on stderr. */
static int try_config(struct qctx *c, struct calib *ev, int n, const int *ord, int hold,
		      double target, double *per, bool *pass, double *cmin, double *tail)
{
	double cmean, se = 0, htail = 1, hse = 0;
	int err = qz_eval_model(c, ev, n, ord, target, cmin, &cmean, per);

	*pass = false;
	*tail = *cmin;
	if (!err && *cmin >= target) {
		*pass = qz_judged(per, n, tail, &se) >= target;
		if (hold > 0 && hold < n) {
			bool hpass = qz_judged(per + hold, n - hold, &htail, &hse) >= target;

			*pass = *pass && hpass;
			*tail = fmin(*tail, htail);
		}
	}
	if (!err && mi_debug("quant")) {
		fprintf(stderr, "judged %d inputs (held out from %d): target %.17g min %.17g tail "
			"%.17g se %.17g held-out tail %.17g se %.17g %s%s", n, hold, target, *cmin,
			*tail, se, htail, hse, *cmin < target ? "stopped" : *pass ? "pass" : "fail",
			*cmin < target ? "\n" : ":");
		for (int i = 0; i < n && *cmin >= target; i++)
			fprintf(stderr, " %.17g%s", per[i], i + 1 < n ? "" : "\n");
	}
	return err;
}

static int cmp_run(const void *a, const void *b)
{
	const double *x = *(const double *const *)a, *y = *(const double *const *)b;

	return *x < *y ? -1 : *x > *y ? 1 : 0;
}

/*
 * Accuracy-aware mixed precision.
 *  1. Each unit's error alone is measured (the model with only that tensor
 *     or weight quantized, on the MINCOS_SENS evaluation inputs the
 *     all-int8 model does worst on), and its cost: the time it adds to the
 *     all-int8 model when it alone goes fp32 (qz_predict_time()).
 *  2. Units are ranked by error per unit of cost; the shortest prefix of
 *     the ranking whose fp32 makes the configuration pass (qz_judged() >=
 *     c->min_cos over all evaluation inputs) is found by bisection (errors
 *     of separate units are close to additive).
 *  3. Refinement: the prefix's units, the ones whose return to int8 saves
 *     most time first, go back to int8 one at a time while it still passes
 *     (at most MINCOS_REFINE trials).
 *  4. (default, --w8-fallback 2) A weight at 7 bits (qz_wqmax_plain()) the
 *     result leaves in fp32 on a node that could run int8 tries 8 bits
 *     (int16 tiles, MINCOS_W8_RATE of the 7-bit time, still ~1.5-2x faster
 *     than fp32), the largest predicted saving first, each kept when the
 *     configuration passes on all inputs and the held-out ones.
 * --w8-fallback 1 instead gives such a weight three levels in the ranking:
 * besides its unit (fp32) a "w8" unit moves it to 8 bits.  Its error is not
 * measured but split from the weight's: the 7-bit error times the 8-bit
 * weights' share of their rounding error (qz_weight_scales(): ~1/4) stays with
 * the fp32 step, the rest goes to the 8-bit one, which costs
 * MINCOS_W8_RATE - 1 of the node's int8 time (the fp32 step's cost is
 * counted from 8 bits), so the ranking takes the 8-bit step first and the
 * search stays one bisection over one ranking.  It moves many weights to
 * 8 bits that 7 would have done for (Documentation/quantization.rst:
 * slower on 3 of 5 CNNs).  --w8-fallback 0: neither.
 */
int qz_mixed_precision(struct qctx *c, struct calib *ev, int n)
{
	int nall = ev->nruns, nu = 0, nsens = n < MINCOS_SENS ? n : MINCOS_SENS, lo, hi, err;
	int ntry = 0, nkept = 0, nevals = 0;
	int nmax = 2 * c->nnodes + c->nqt + 1;
	struct unit *u = calloc(nmax, sizeof(*u));
	struct qtime tm = { 0 };
	double cmin, cmean, tail, tse, jd, best = 0, macs = 0, t8 = 0, t32 = 0, tcur = 0, t0 = now_s();
	double *per = calloc(nall + 1, sizeof(double));
	const double **ordp = calloc(n + 1, sizeof(*ordp));
	int *ord = calloc(n + 1, sizeof(int)), *cand = calloc(nmax, sizeof(int));
	double *gain = calloc(nmax, sizeof(double));
	int *wunit = calloc(c->nnodes + 1, sizeof(int)), *kept = calloc(nmax, sizeof(int));
	int *w8u = calloc(c->nnodes + 1, sizeof(int)), *wfu = calloc(c->nnodes + 1, sizeof(int));
	bool pass, macs_only;
	const char *cost;

	if (!u || !per || !ordp || !ord || !cand || !gain || !wunit || !kept || !w8u || !wfu) {
		err = -ENOMEM;
		goto out;
	}
	mark_qn_read(c);
	for (int i = 0; i < c->nqt; i++)
		u[nu++] = (struct unit){ .weight = false, .idx = i };
	for (int i = 0; i < c->nnodes; i++) {
		double m = qz_node_macs(c, i);
		int qa = c->qt_of[c->nodes[i].act];

		int qo = c->qt_of[c->nodes[i].out];

		w8u[i] = -1;
		wfu[i] = nu;
		u[nu++] = (struct unit){ .weight = true, .idx = i, .cost = m };
		if (qa >= 0)
			u[qa].cost += m; /* the nodes it feeds leave int8 too */
		c->nodes[i].fp32_out_slow = out_feeds_act(c, i);
		if (qo >= 0 && c->nodes[i].fp32_out_slow)
			u[qo].cost += m; /* and so does its producer */
		macs += m;
	}
	for (int i = 0; c->w8fb == 1 && c->wbits == WBITS_MIXED && i < c->nnodes; i++)
		if (qz_wqmax_plain(c, &c->nodes[i]) == 63) {
			w8u[i] = nu;
			u[nu++] = (struct unit){ .weight = true, .w8 = true, .idx = i,
						 .cost = qz_node_macs(c, i) * (MINCOS_W8_RATE - 1) };
		}
	/* the reference: everything in fp32 */
	for (int i = 0; i < nu; i++)
		qz_set_unit(c, &u[i], true);
	err = qz_eval_model(c, ev, nall, NULL, 0, &cmin, &cmean, NULL);
	for (int i = 0; i < nu; i++)
		qz_set_unit(c, &u[i], false);
	if (!err) {
		printf("min-cosine: fp32 outputs of %d inputs (%d at a time, %.0f s)\n", nall,
		       eval_workers(c), now_s() - t0);
		fflush(stdout);
		err = qz_eval_model(c, ev, nall, NULL, 0, &cmin, &cmean, per);
	}
	if (err)
		goto out;
	/* inputs the all-int8 model does worst on first: the sensitivities
	 * are measured on those, and failing configurations fail early */
	for (int r = 0; r < n; r++)
		ordp[r] = &per[r];
	qsort(ordp, n, sizeof(*ordp), cmp_run);
	for (int r = 0; r < n; r++)
		ord[r] = (int)(ordp[r] - per);
	jd = qz_judged(per, nall, &tail, &tse);
	printf("min-cosine: all int8: cosine min %.9f mean %.9f over %d inputs, tail estimate "
	       "%.9f\n", cmin, cmean, nall, tail);
	if (jd >= c->min_cos)
		goto out;
	/* costs: the cost model's times of the planned steps (--cost
	 * profile: measured times; macs: multiply-adds, as when planning the
	 * profile models fails) */
	cost = c->cost ? c->cost : "model";
	macs_only = !strcmp(cost, "macs");
	tm.timed = !strcmp(cost, "profile") || !strcmp(cost, "steps");
	err = macs_only ? 0 : qtime_init(c, ev, u, nu, &tm);
	if (err == -ENOMEM)
		goto out;
	if (tm.ok) {
		t8 = qz_predict_time(c, &tm);
		for (int i = 0; i < nu; i++)
			u[i].fp = true;
		apply_units(c, u, nu);
		t32 = qz_predict_time(c, &tm);
		for (int i = 0; i < nu; i++) {
			for (int j = 0; j < nu; j++)
				u[j].fp = j == i;
			apply_units(c, u, nu);
			u[i].cost = qz_predict_time(c, &tm) - t8;
		}
		/* a three-level weight's fp32 step starts from 8 bits */
		for (int k = 0; k < c->nnodes; k++)
			if (w8u[k] >= 0)
				u[wfu[k]].cost -= u[w8u[k]].cost;
		printf("min-cosine: %s at 1 thread: all int8 %.3f ms, all fp32 %.3f ms (%.0f s)\n",
		       tm.timed ? "profiled" : "cost model", t8 * 1e-6, t32 * 1e-6, now_s() - t0);
		/* the input of tools/quant/costfit.py: the step lines, then stop */
		if (!strcmp(cost, "steps")) {
			err = qz_err("--min-cosine: --cost steps: stopped after the profiles") ?
				      -ECANCELED : 0;
			goto out;
		}
	} else if (macs_only) {
		printf("min-cosine: costs are multiply-adds (--cost macs)\n");
	} else {
		printf("min-cosine: planning the cost models failed (%s): costs are multiply-adds\n",
		       mi_last_error());
	}
	err = 0;
	for (int i = 0; i < nu; i++) /* the weights measured at 7 bits */
		qz_set_unit(c, &u[i], !u[i].w8);
	for (int i = 0; i < nu && !err; i++) {
		if (u[i].w8)
			continue; /* below */
		qz_set_unit(c, &u[i], false);
		err = qz_eval_model(c, ev, nsens, ord, 0, &cmin, &cmean, NULL);
		u[i].sens = fmax(1 - cmean, 0);
		qz_set_unit(c, &u[i], true);
		if ((i + 1) % (nu / 4 + 1) == 0 || i + 1 == nu) {
			printf("min-cosine: errors of %d of %d units measured (%.0f s)\n", i + 1, nu,
			       now_s() - t0);
			fflush(stdout);
		}
	}
	if (err)
		goto out;
	/* the three-level weights' errors: the 7-bit error split by the
	 * rounding errors' ratio (8 bits ~1/4 of 7) */
	for (int k = 0; k < c->nnodes; k++) {
		double e7, e8, f;

		if (w8u[k] < 0)
			continue;
		if (!qz_weight_scales(c, &c->nodes[k], 63, &e7) ||
		    !qz_weight_scales(c, &c->nodes[k], 127, &e8)) {
			err = -ENOMEM;
			goto out;
		}
		f = e7 > 0 ? fmin(e8 / e7, 1) : 0.25;
		u[w8u[k]].sens = u[wfu[k]].sens * (1 - f);
		u[wfu[k]].sens *= f;
	}
	/* costs within a thousandth of the model count alike (timing
	 * resolution; fp32 may even be faster) */
	for (int i = 0; i < nu; i++)
		u[i].rank = tm.ok ? u[i].sens / fmax(u[i].cost, 1e-3 * t8)
				  : u[i].sens / (u[i].cost + 0.01 * macs + 1);
	qsort(u, nu, sizeof(*u), cmp_unit);
	if (mi_debug("quant"))
		for (int i = 0; i < nu; i++)
			fprintf(stderr, "unit %3d %s %-70s sens %.3e cost %8.1f us macs %.0f rank "
				"%.3e\n", i, u[i].w8 ? "8" : u[i].weight ? "w" : "a", unit_name(c, &u[i]), u[i].sens,
				u[i].cost * 1e-3, u[i].weight ? qz_node_macs(c, u[i].idx) : 0.0, u[i].rank);
	/* test hook: every prefix of the ranking on all inputs, so that a
	 * test can replay the searches below for any targets */
	for (int k = 0; c->prefixes && k <= nu; k++) {
		set_prefix(c, u, nu, k);
		err = qz_eval_model(c, ev, nall, NULL, 0, &cmin, &cmean, per);
		if (err)
			goto out;
		fprintf(stderr, "prefix %d:", k);
		for (int i = 0; i < nall; i++)
			fprintf(stderr, " %.17g%s", per[i], i + 1 < nall ? "" : "\n");
	}
	/* f(0) fails; f(nu) (all fp32) is taken to pass */
	lo = 0;
	hi = nu;
	while (hi - lo > 1) {
		int mid = (lo + hi) / 2;

		set_prefix(c, u, nu, mid);
		err = try_config(c, ev, n, ord, 0, c->search_cos, per, &pass, &cmin, &tail);
		nevals++;
		if (err)
			goto out;
		if (mi_debug("quant"))
			fprintf(stderr, "bisection: %d units in fp32: %s\n", mid,
				pass ? "passed" : "failed");
		printf("min-cosine: bisection step %d: %d of %d units in fp32: %s (cosine min %.9f, "
		       "%.0f s)\n", nevals, mid, nu, pass ? "passed" : "failed", cmin, now_s() - t0);
		fflush(stdout);
		if (pass) {
			hi = mid;
			best = cmin;
		} else {
			lo = mid;
		}
	}
	set_prefix(c, u, nu, hi);
	if (hi == nu) {
		err = qz_eval_model(c, ev, n, NULL, 0, &best, &cmean, NULL);
		if (err)
			goto out;
	}
	printf("min-cosine: bisection: %d of %d units in fp32 (%d evaluations, %.0f s)%s", hi, nu,
	       nevals, now_s() - t0, tm.ok ? "" : "\n");
	if (tm.ok)
		printf(", predicted %.3f ms\n", (tcur = qz_predict_time(c, &tm)) * 1e-6);
	/* refinement: back to int8, the largest saving first; a tensor goes
	 * back with the weights of the nodes it kept in fp32 */
	for (int i = 0; i < nu; i++)
		if (u[i].weight && !u[i].w8)
			wunit[u[i].idx] = i;
	for (int i = 0; tm.ok && i < hi; i++) {
		set_group(c, u, wunit, i, false);
		apply_units(c, u, nu);
		gain[i] = tcur - qz_predict_time(c, &tm);
		set_group(c, u, wunit, i, true);
		cand[i] = i;
	}
	apply_units(c, u, nu);
	for (int a = 0; tm.ok && a < hi; a++)
		for (int b = a + 1; b < hi; b++)
			if (gain[cand[b]] > gain[cand[a]]) {
				int x = cand[a];

				cand[a] = cand[b];
				cand[b] = x;
			}
	for (int a = 0; tm.ok && a < hi && ntry < MINCOS_REFINE; a++) {
		struct unit *v = &u[cand[a]];
		double tnew;

		if (!v->fp)
			continue;
		set_group(c, u, wunit, cand[a], false);
		apply_units(c, u, nu);
		tnew = qz_predict_time(c, &tm);
		if (tcur - tnew < 1e-3 * t8) {
			/* saves nothing now (or never did) */
			set_group(c, u, wunit, cand[a], true);
			apply_units(c, u, nu);
			continue;
		}
		err = try_config(c, ev, n, ord, 0, c->search_cos, per, &pass, &cmin, &tail);
		ntry++;
		if (err)
			goto out;
		printf("min-cosine: refine %d/%d: %s %s to %s (-%.3f ms): %s (cosine min %.9f, tail "
		       "%.9f)\n", ntry, MINCOS_REFINE, v->weight ? "weight" : "tensor",
		       v->w8 ? "7 bits" : "int8",
		       unit_name(c, v), (tcur - tnew) * 1e-6, pass ? "kept" : "undone", cmin, tail);
		fflush(stdout);
		if (pass) {
			tcur = tnew;
			best = cmin;
			kept[nkept++] = cand[a];
		} else {
			set_group(c, u, wunit, cand[a], true);
			apply_units(c, u, nu);
		}
	}
	/* hold-out check: the search chose among configurations by the first
	 * n inputs, so a marginal pass there is optimistic; the result must
	 * pass on all inputs, and on the held-out ones alone.  If not, the kept
	 * refinements are undone (last first), then the prefix grows in
	 * steps of 1/8 of the rest until it passes, and a bisection on all
	 * inputs between the last failing and the passing prefix finds the
	 * shortest passing one (a step can overshoot by many units). */
	int hlo = -1;

	while (nall > n) {
		err = try_config(c, ev, nall, NULL, n, c->min_cos, per, &pass, &cmin, &tail);
		if (err)
			goto out;
		printf("min-cosine: check on all %d inputs (%d held out), %d units in fp32 + %d "
		       "refinements: %s (cosine min %.9f, tail %.9f)\n", nall, nall - n, hi, nkept,
		       pass ? "passed" : "failed", cmin, tail);
		fflush(stdout);
		if (pass) {
			best = cmin;
			break;
		}
		if (nkept > 0) {
			set_group(c, u, wunit, kept[--nkept], true);
			apply_units(c, u, nu);
			continue;
		}
		if (hi >= nu)
			break;
		hlo = hi;
		hi += (nu - hi + 7) / 8;
		set_prefix(c, u, nu, hi);
	}
	while (pass && hlo >= 0 && hi - hlo > 1) {
		int mid = hlo + (hi - hlo) / 2;
		double mmin, mtail;

		set_prefix(c, u, nu, mid);
		err = try_config(c, ev, nall, NULL, n, c->min_cos, per, &pass, &mmin, &mtail);
		if (err)
			goto out;
		printf("min-cosine: check on all %d inputs, %d units in fp32: %s (cosine min %.9f, "
		       "tail %.9f)\n", nall, mid, pass ? "passed" : "failed", mmin, mtail);
		fflush(stdout);
		if (pass) {
			hi = mid;
			best = mmin;
		} else {
			hlo = mid;
		}
		pass = true;
	}
	if (hlo >= 0) {
		set_prefix(c, u, nu, hi);
		printf("min-cosine: after the checks on all inputs: %d units in fp32\n", hi);
	}
	/* --w8-fallback 2: the 7-bit weights left in fp32 whose nodes could
	 * run int8 try 8 bits, the largest predicted saving first, each kept
	 * when the configuration passes the check on all inputs */
	int ncand = 0, ntry8 = 0;

	tcur = tm.ok ? qz_predict_time(c, &tm) : 0;
	for (int k = 0; c->w8fb == 2 && c->wbits == WBITS_MIXED && tm.ok && k < c->nnodes; k++) {
		if (!c->nodes[k].wfp32 || qz_wqmax_plain(c, &c->nodes[k]) != 63)
			continue;
		u[wunit[k]].fp = false;
		c->nodes[k].w8 = true;
		apply_units(c, u, nu);
		gain[ncand] = c->nodes[k].wfp32 ? 0 : tcur - qz_predict_time(c, &tm);
		u[wunit[k]].fp = true;
		c->nodes[k].w8 = false;
		apply_units(c, u, nu);
		if (gain[ncand] >= 1e-3 * t8)
			cand[ncand++] = k;
	}
	for (int a = 0; a < ncand; a++)
		for (int b = a + 1; b < ncand; b++)
			if (gain[b] > gain[a]) {
				double g_ = gain[a];
				int x = cand[a];

				gain[a] = gain[b];
				cand[a] = cand[b];
				gain[b] = g_;
				cand[b] = x;
			}
	for (int a = 0; a < ncand && ntry8 < MINCOS_REFINE; a++) {
		int k = cand[a];
		double mmin, mtail;

		u[wunit[k]].fp = false;
		c->nodes[k].w8 = true;
		apply_units(c, u, nu);
		err = try_config(c, ev, nall, NULL, nall > n ? n : 0, c->min_cos, per, &pass, &mmin,
				 &mtail);
		ntry8++;
		if (err)
			goto out;
		printf("min-cosine: weight %s to 8 bits (-%.3f ms): %s (cosine min %.9f, tail %.9f)\n",
		       unit_name(c, &u[wunit[k]]), gain[a] * 1e-6, pass ? "kept" : "undone", mmin,
		       mtail);
		fflush(stdout);
		if (pass) {
			best = mmin;
		} else {
			u[wunit[k]].fp = true;
			c->nodes[k].w8 = false;
			apply_units(c, u, nu);
		}
	}
	/* the other way: units left int8 whose fp32 the cost model predicts
	 * faster in the configuration at hand (a lone int8 depthwise conv
	 * between fp32 convs pays a QuantizeLinear and a DequantizeLinear and
	 * may run slower than the fp32 one; the ranking priced every unit
	 * against the all-int8 model), the largest saving first, each kept
	 * when the configuration passes the check on all inputs, at most
	 * MINCOS_REFINE trials (c->no_down: none) */
	int ndown = 0, ntryd = 0;

	tcur = tm.ok ? qz_predict_time(c, &tm) : 0;
	for (int i = 0; tm.ok && !c->no_down && i < nu; i++) {
		double tnew;

		if (u[i].w8 || u[i].fp || (u[i].weight && c->nodes[u[i].idx].wfp32) ||
		    (!u[i].weight && c->qt[u[i].idx].fp32))
			continue;
		u[i].fp = true;
		apply_units(c, u, nu);
		tnew = qz_predict_time(c, &tm);
		u[i].fp = false;
		apply_units(c, u, nu);
		if (tcur - tnew >= 1e-3 * t8) {
			gain[ndown] = tcur - tnew;
			cand[ndown++] = i;
		}
	}
	for (int a = 0; a < ndown; a++)
		for (int b = a + 1; b < ndown; b++)
			if (gain[b] > gain[a]) {
				double g_ = gain[a];
				int x = cand[a];

				gain[a] = gain[b];
				cand[a] = cand[b];
				gain[b] = g_;
				cand[b] = x;
			}
	for (int a = 0; a < ndown && ntryd < MINCOS_REFINE; a++) {
		struct unit *v = &u[cand[a]];
		double mmin, mtail, tnew;

		v->fp = true;
		apply_units(c, u, nu);
		tnew = qz_predict_time(c, &tm);
		if (tcur - tnew < 1e-3 * t8) { /* an earlier one took it along */
			v->fp = false;
			apply_units(c, u, nu);
			continue;
		}
		err = try_config(c, ev, nall, NULL, nall > n ? n : 0, c->min_cos, per, &pass, &mmin,
				 &mtail);
		ntryd++;
		if (err)
			goto out;
		printf("min-cosine: %s %s to fp32 (-%.3f ms): %s (cosine min %.9f, tail %.9f)\n",
		       v->weight ? "weight" : "tensor", unit_name(c, v), (tcur - tnew) * 1e-6,
		       pass ? "kept" : "undone", mmin, mtail);
		fflush(stdout);
		if (pass) {
			best = mmin;
			tcur = tnew;
		} else {
			v->fp = false;
			apply_units(c, u, nu);
		}
	}
	if (tm.ok)
		tcur = qz_predict_time(c, &tm);
	if (tm.ok && mi_debug("quant")) {
		qz_predict_time(c, &tm);
		for (int o = 0; o < c->g->norder; o++) {
			int ni = c->g->order[o];

			fprintf(stderr, "node %-60s %s %8.1f us (int8 %8.1f alone %8.1f fp32 %8.1f alone %8.1f)\n",
				c->g->nodes[ni].name, tm.mode[ni] ? "int8" : "fp32",
				tm.pt[ni] * 1e-3, tm.n8[ni] * 1e-3, tm.a8[ni] * 1e-3,
				tm.n32[ni] * 1e-3, tm.a32[ni] * 1e-3);
		}
		for (int qi = 0; qi < c->nqt; qi++)
			fprintf(stderr, "tensor %-60s %s q %8.1f us dq %8.1f us\n",
				c->g->tensors[c->qt[qi].t].name, c->qt[qi].fp32 ? "fp32" : "int8",
				tm.q[qi] * 1e-3, tm.dq[qi] * 1e-3);
	}
	int nt = 0, nw = 0, n8 = 0;
	double left = 0;

	for (int i = 0; i < c->nqt; i++)
		nt += c->qt[i].fp32;
	for (int i = 0; i < c->nnodes; i++) {
		nw += c->nodes[i].wfp32;
		n8 += !c->nodes[i].wfp32 && c->nodes[i].w8;
		left += c->nodes[i].wfp32 ? qz_node_macs(c, i) : 0;
	}
	printf("min-cosine: %d of %d activation tensors and %d of %d weights (%.1f%% of the "
	       "multiply-adds) left in fp32: cosine min %.9f",
	       nt, c->nqt, nw, c->nnodes, macs > 0 ? 100 * left / macs : 0.0, best);
	if (tm.ok)
		printf("; predicted %.3f ms at 1 thread (all int8 %.3f, all fp32 %.3f)", tcur * 1e-6,
		       t8 * 1e-6, t32 * 1e-6);
	printf("; %d of %d refinements kept; %.0f s\n", nkept, ntry, now_s() - t0);
	printf("min-cosine: %d weights at 8 bits instead of 7\n", n8);
	printf("min-cosine: %ld inference runs, %ld cosines reused\n", c->nruns_done,
	       c->nruns_memo);
out:
	qtime_free(&tm);
	free(u);
	free(per);
	free(ordp);
	free(ord);
	free(cand);
	free(gain);
	free(wunit);
	free(kept);
	free(w8u);
	free(wfu);
	return err;
}
