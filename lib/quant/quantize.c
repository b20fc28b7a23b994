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
 *     (mse_range()). Per-channel activation means give the bias
 *     correction of the weights' rounding (bias_correction()).
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

/* One-line error on stderr; returns 1 (the exit status). */
__attribute__((format(printf, 1, 2))) static int QERR(const char *fmt, ...)
{
	va_list ap;

	fputs("metainfer quantize: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return 1;
}

/* the function the readers of a quantized tensor apply (act_fn()) */
enum { ACT_ID, ACT_RELU, ACT_HSIG, ACT_HSWISH, ACT_SIG, ACT_SILU };

struct qtensor {
	int t;          /* IR tensor index */
	double mn, mx;  /* calibrated range */
	float scale;
	int zp;
	bool seen;
	uint32_t *hist; /* percentile mode: |x| histogram; mse: signed */
	double hmax;    /* histogram range (|x| up to hmax; signed: hlo + hmax) */
	double hlo;     /* signed histogram: its lowest value */
	int fn;         /* mse: the function its readers apply (ACT_*) */
	float fa, fb;   /* HardSigmoid's alpha and beta */
	int caxis;      /* channel axis of the per-channel means, or -1 */
	int nch;        /* channels (caxis >= 0) */
	double *csum;   /* per-channel sums over the calibration runs */
	double *csq;    /* and sums of squares (the weight clipping's weights) */
	double ccount;  /* values summed per channel */
	bool fp32;      /* --min-cosine: left unquantized */
	bool qn_read;   /* --min-cosine: read only by quantizable nodes (as
			 * their activation; not a graph output) */
	double sens;    /* --min-cosine: error with only this tensor quantized */
};

struct qnode {
	int node;     /* IR node index */
	int act;      /* activation input tensor */
	int weight;   /* weight initializer */
	int bias;     /* bias initializer or -1 */
	int wkind;    /* 0 conv, 1 gemm, 2 matmul */
	int waxis;    /* axis of the output channels in the weight */
	int out;      /* output point tensor */
	int act_node; /* Relu/Clip node absorbed into the output point, or -1 */
	const char *oname; /* the node's output name (the planner may rewire
			    * the IR node during calibration) */
	bool wfp32;   /* --min-cosine: weight (so the node) left in fp32 */
	bool w8;      /* --min-cosine: 8-bit weights where wqmax() gives 7 */
	float *wscale[2]; /* weight scales for qmax 63 / 127 (weight_scales()) */
	double werr[2];   /* and their weighted squared rounding errors */
	bool fp32_out_slow; /* an fp32 output would run its activation
			     * (SiLU, HardSwish, ...) unfused: go fp32 whole */
	double sens;  /* --min-cosine: error with only this weight quantized */
};

struct qctx {
	struct mi_model *m;
	struct mi_graph *g;
	struct qnode *nodes;
	int nnodes;
	struct qtensor *qt;
	int nqt;
	int *qt_of; /* per IR tensor: index in qt or -1 */
	int orig_noutputs; /* graph outputs before calibration added more */
	bool per_channel, qlinear;
	bool bias_correct; /* fold the weight rounding's mean shift into the bias */
	bool equalize;     /* scale channels towards equal spread first */
	int wclip;         /* weight scales: 0 max|w| (default), 1 clipped where
			    * the squared rounding error is least, 2 that error
			    * weighted by the input channels' variances
			    * (MI_QUANT_WCLIP) */
	int w8fb;          /* --min-cosine: 7-bit weights try 8 bits before
			    * fp32: 1 in the ranking (w8 units), 2 after the
			    * search (MI_QUANT_W8FB; 0: off) */
	double percentile; /* 0 = min/max */
	bool mse;          /* ranges minimizing the quantization error */
	bool mse_act;      /* ... after the readers' function (--range mse-act) */
	double min_cos;    /* --min-cosine target (0 = all int8) */
	int wbits;         /* --weight-bits: 8, 7, WBITS_MIXED (wqmax()) or WBITS_AUTO */
	double search_cos; /* the target of the search (before the final
			    * check on all inputs): min_cos, or for tests
			    * MI_MINCOS_SEARCH_TARGET */
	int nthreads;
	const char *path;  /* the fp32 model */
	void *src;         /* its bytes (read once) */
	size_t srclen;
	float **ref;       /* fp32 outputs of each calibration run, concatenated */
	int64_t nref;      /* floats per run */
	int nrefruns;
	bool tag;          /* name every written node after its IR index (the
			    * --min-cosine profile maps times back by name) */
	struct evmemo *memo; /* --min-cosine: per-input cosines of the
			      * configurations evaluated so far */
	int nmemo, cmemo;
	const struct calib *memo_ev; /* the inputs they are of */
	long nruns_done, nruns_memo; /* runs made, cosines taken from the memo */
};

#define HIST_BINS 2048
#define MINCOS_INPUTS 200 /* --min-cosine with --calib-random: inputs searched on */
#define MINCOS_HOLD 100   /* and held out for the final check */

static int consumers(const struct mi_graph *g, int t, int *only)
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

static bool is_graph_output(const struct mi_graph *g, int t)
{
	for (int i = 0; i < g->noutputs; i++)
		if (g->outputs[i] == t)
			return true;
	return false;
}

static bool is_weight(const struct mi_graph *g, int t, int ndim_min, int ndim_max)
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
			if (!is_weight(g, q.weight, 3, 4))
				continue;
			q.wkind = 0;
			q.waxis = 0;
			if (n->ninputs > 2 && n->inputs[2] >= 0) {
				if (!is_weight(g, n->inputs[2], 1, 1))
					continue;
				q.bias = n->inputs[2];
			}
		} else if (!strcmp(n->op_type, "Gemm")) {
			if (!is_weight(g, q.weight, 2, 2) || mi_attr_int(n, "transA", 0) ||
			    mi_attr_float(n, "alpha", 1.0f) != 1.0f ||
			    mi_attr_float(n, "beta", 1.0f) != 1.0f)
				continue;
			q.wkind = 1;
			q.waxis = mi_attr_int(n, "transB", 0) ? 0 : 1;
			if (n->ninputs > 2 && n->inputs[2] >= 0) {
				if (!is_weight(g, n->inputs[2], 1, 1))
					continue; /* 2-D C: not quantized */
				q.bias = n->inputs[2];
			}
		} else if (!strcmp(n->op_type, "MatMul")) {
			if (!is_weight(g, q.weight, 2, 2))
				continue;
			q.wkind = 2;
			q.waxis = 1;
		} else {
			continue;
		}
		/* output point: through a sole Relu/Clip consumer */
		int y = n->outputs[0], only = -1;

		q.out = y;
		if (!is_graph_output(g, y) && consumers(g, y, &only) == 1) {
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
		if (!is_graph_output(g, q.out) && qt_add(c, q.out))
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
		if (add && !is_graph_output(g, y) && consumers(g, y, &only) == 1 &&
		    !strcmp(g->nodes[only].op_type, "Relu"))
			y = g->nodes[only].outputs[0];
		if (is_graph_output(g, y))
			continue;
		for (int j = 0; j < n->ninputs; j++)
			if (qt_add(c, n->inputs[j]))
				return -ENOMEM;
		if (qt_add(c, y))
			return -ENOMEM;
	}
	return 0;
}

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

/* Calibration inputs: a list of per-input arrays (one run each). */
struct calib {
	int nruns;
	struct mi_value **runs; /* [nruns][ninputs] */
	struct mi_tensor *owned; /* npy tensors to free */
	int nowned;
};

static int calib_random(struct qctx *c, int count, uint64_t seed, struct calib *cal)
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
				return QERR("input '%s' is %s: --calib-random fills float32 inputs only",
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

static int calib_dir(struct qctx *c, const char *dir, struct calib *cal)
{
	struct mi_graph *g = c->g;
	DIR *d = opendir(dir);
	struct dirent *e;
	char **names = NULL;
	int nn = 0, err = 0;

	if (!d)
		return QERR("%s: %s", dir, strerror(errno)) ? -ENOENT : 0;
	if (g->ninputs != 1) {
		closedir(d);
		return QERR("--calib DIR needs a model with one input (this one has %d); use --calib-random",
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
		err = QERR("%s: no .npy files", dir) ? -ENOENT : 0;
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
			err = QERR("%s: %s", names[i], msg) ? -EINVAL : 0;
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

static void calib_free(struct calib *cal, bool own_data)
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

	if (is_graph_output(g, t))
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
static void mse_range(const struct qtensor *q, double *lo_out, double *hi_out)
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
 * MI_QUANT_SHARE_CONCAT=0 keeps the inputs' own ranges.
 */
static int uf_root(int *par, int x)
{
	while (par[x] != x)
		x = par[x] = par[par[x]];
	return x;
}

/*
 * MI_QUANT_SHARE_REGION=1 (experiment): the quantized tensors linked by
 * moves and Concats (a ShuffleNetV2 stage) share one range, the union of
 * theirs, so every move between them copies bytes.
 */
static void share_region_params(struct qctx *c)
{
	struct mi_graph *g = c->g;
	const char *e = getenv("MI_QUANT_SHARE_REGION");
	int *par;

	if (!e || *e != '1')
		return;
	par = malloc(g->ntensors * sizeof(int));
	if (!par)
		return;
	for (int t = 0; t < g->ntensors; t++)
		par[t] = t;
	for (int i = 0; i < g->nnodes; i++) {
		const struct mi_node *n = &g->nodes[i];
		int nd = !strcmp(n->op_type, "Concat") ? n->ninputs : 1;

		if (n->dead || (!move_op(n) && strcmp(n->op_type, "Concat")))
			continue;
		for (int k = 0; k < nd; k++)
			for (int o = 0; o < n->noutputs; o++)
				if (n->inputs[k] >= 0 && n->outputs[o] >= 0)
					par[uf_root(par, n->inputs[k])] = uf_root(par, n->outputs[o]);
	}
	for (int i = 0; i < c->nqt; i++) {
		double mn = INFINITY, mx = -INFINITY, z;
		int r = uf_root(par, c->qt[i].t), cnt = 0;

		for (int j = 0; j < c->nqt; j++)
			if (uf_root(par, c->qt[j].t) == r) {
				mn = fmin(mn, c->qt[j].mn);
				mx = fmax(mx, c->qt[j].mx);
				cnt++;
			}
		if (cnt < 2)
			continue;
		mn = fmin(mn, 0);
		mx = fmax(mx, 0);
		if (mx - mn < 1e-8)
			mx = mn + 1e-8;
		c->qt[i].scale = (float)((mx - mn) / 255.0);
		z = nearbyint(-mn / c->qt[i].scale);
		c->qt[i].zp = z < 0 ? 0 : z > 255 ? 255 : (int)z;
	}
	free(par);
}

static void share_concat_params(struct qctx *c)
{
	struct mi_graph *g = c->g;
	const char *e = getenv("MI_QUANT_SHARE_CONCAT");

	if (e && *e == '0')
		return;
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
			if (qx < 0 || pr < 0 || out || consumers(g, x, NULL) != 1 ||
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
 * values a second time.  MI_QUANT_SHARE_MOVES=0 keeps their own ranges.
 */
static void share_move_params(struct qctx *c)
{
	struct mi_graph *g = c->g;
	const char *e = getenv("MI_QUANT_SHARE_MOVES");

	share_concat_params(c);
	if (e && *e == '0')
		return;
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

static int calibrate(struct qctx *c, struct calib *cal)
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
				return QERR("calibration run %d: %s", r, mi_last_error()) ? -EINVAL : 0;
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
			return QERR("tensor '%s' was not computed during calibration",
				    g->tensors[q->t].name) ? -EINVAL : 0;
		if (q->hist && q->hmax > 0 && c->mse && q->fn == ACT_ID) {
			double lim = mse_limit(q);

			q->mn = fmax(q->mn, -lim);
			q->mx = fmin(q->mx, lim);
		} else if (q->hist && q->hmax > 0 && c->mse) {
			double lo, hi;

			mse_range(q, &lo, &hi);
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
	share_region_params(c);
	share_move_params(c);
	return 0;
}

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
	return is_weight(g, t, ndim, ndim) && consumers(g, t, NULL) == 1;
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

		if (!n || is_graph_output(g, t) || !eq_shape_ok(g, t, gr->nch))
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
static int equalize(struct qctx *c, struct calib *cal)
{
	struct mi_graph *g = c->g;
	int *prod = malloc((g->ntensors + 1) * sizeof(int)), *gid = malloc((g->ntensors + 1) * sizeof(int));
	struct eqgroup *grs = NULL;
	int ngr = 0, nscaled = 0, err = 0, nout0 = g->noutputs, *outs;
	double **ms = NULL; /* per tensor: per-channel sums of squares */
	bool eqmax = getenv("MI_QUANT_EQ_MAX") != NULL;
	double alpha = getenv("MI_QUANT_EQ_ALPHA") ? strtod(getenv("MI_QUANT_EQ_ALPHA"), NULL) : EQ_ALPHA;

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
			err = QERR("equalization run %d: %s", r, mi_last_error()) ? -EINVAL : 0;
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

					if (eqmax) {
						for (int64_t k = 0; k < inner; k++)
							s = fmax(s, (double)d[k] * d[k]);
						ms[t][ch] = fmax(ms[t][ch], s);
						continue;
					}
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
static void bias_correction(struct qctx *c, const struct qnode *qn, const float *scale,
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

#define WBITS_MIXED 0
/* the default: mixed where the int8 kernels are the AVX2 ones (no VNNI:
 * mi_quant_isa(), so MI_CPU_ISA=avx2 gives an AVX2 host's file anywhere),
 * else 8 */
#define WBITS_AUTO (-1)

/* Strides and dilations of node n all 1. */
static bool unit_stride(const struct mi_node *n)
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
 * The weights of qnode qn lie in [-wqmax, wqmax]: 127 (8 bits) or 63 (7
 * bits: [-64, 63] is where the AVX2 kernels multiply uint8 x int8 by
 * vpmaddubsw exactly, tile_avx2b).  --weight-bits mixed: 7 bits only where
 * the AVX2 kernels take that route, 8 where 7 would cost accuracy for no
 * time: depthwise convs (their own kernels), the 3x3 stride-1 convs of the
 * AVX2 Winograd path (mi_qwino_fits: int16 transformed weights), GEMVs
 * (mi_qgemm on up to 4 rows, 1x1 convs on one pixel).  This is the
 * choice before --min-cosine's (qnode.w8, wqmax()).
 */
static int wqmax_plain(const struct qctx *c, const struct qnode *qn)
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
	bool unit = unit_stride(n);

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

/* wqmax_plain(), or 127 where --min-cosine moved a 7-bit weight to 8 bits
 * (int16 tiles: ~1.25x the 7-bit time, still ~2x faster than fp32) */
static int wqmax(const struct qctx *c, const struct qnode *qn)
{
	return qn->w8 ? 127 : wqmax_plain(c, qn);
}

#define WCLIP_LO 0.5   /* weight clipping: limits tried, from max|w| down to */
#define WCLIP_STEPS 50 /* this fraction of it, in this many steps */

/*
 * Per output channel weight scales of qnode qn for weights in [-qmax,
 * qmax] (kept: computed once per node and qmax; the weights do not change
 * after equalize()).  MI_QUANT_WCLIP=0 (default): max|w| / qmax.  =1, =2:
 * the clipping limit r * max|w| (r from 1 down to WCLIP_LO) whose rounding
 * error sum_i v_i (w_i - s clamp(round(w_i / s)))^2 is least, with v_i = 1
 * (=1) or the calibrated variance of the input channel w_i multiplies (=2):
 * after bias_correction() removes the error's mean, the output channel's
 * error is sum_i (w_i - wq_i s)(x_i - E x_i), whose energy is that sum for
 * uncorrelated inputs.  *err: the sum over all channels.  NULL when out of
 * memory.  Off by default: the benchmark CNNs' weights are uniform
 * (random init), whose least error lies at 0.97-1 x max|w|, and neither
 * variant raised their all-int8 cosine (Documentation/quantization.rst).
 */
static const float *weight_scales(struct qctx *c, struct qnode *qn, int qmax, double *err)
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
	 * bias_correction() for the layouts) */
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
	int qmax = wqmax(c, qn);

	memset(out, 0, sizeof(*out));
	if (!scale || !wq || !zp) {
		p->err = -ENOMEM;
		goto out;
	}
	(void)xt;
	/* symmetric, max |w| (or the clipping limit) at +-qmax (7 bits: 63,
	 * so every weight lies in [-64, 63], the AVX2 vpmaddubsw kernels'
	 * exact range); clipped weights saturate at +-qmax */
	sc = weight_scales(c, qn, qmax, &werr);
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
		bias_correction(c, qn, scale, axis, wq, bf, nb);
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
static int rewrite(struct qctx *c, const char *in_path, const char *out_path,
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
			return QERR("%s: cannot read: %s", in_path, strerror(-err)) ? err : 0;
	}
	mp = onnx__model_proto__unpack(NULL, c->srclen, c->src);
	if (!mp || !mp->graph)
		return QERR("%s: not a valid ONNX model", in_path) ? -EINVAL : 0;
	int64_t opset = opset_of(mp);

	if (opset < 10) {
		onnx__model_proto__free_unpacked(mp, NULL);
		return QERR("%s: opset %lld has no QuantizeLinear (needs >= 10)", in_path,
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
				err = QERR("%s: node '%s' (%s) has a subgraph: not supported",
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
				err = QERR("%s: constant '%s' has no data", in_path, g->tensors[t].name) ?
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
		err = QERR("%s: cannot write: %s", out_path, strerror(errno)) ? -EIO : 0;
		if (f)
			fclose(f);
	} else if (fclose(f)) {
		err = QERR("%s: cannot write: %s", out_path, strerror(errno)) ? -EIO : 0;
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
		QERR("out of memory");
	else if (err == -EOPNOTSUPP && !p.err)
		;
	else if (err == -EOPNOTSUPP)
		QERR("%s: a tensor or attribute type cannot be written", in_path);
	return err;
}

/* ---- --min-cosine: mixed precision ------------------------------------ */

#define MINCOS_SENS 8      /* inputs the per-unit errors are measured on */
#define MINCOS_PROF_RUNS 10 /* timed runs per profile (min per node) */
#define MINCOS_REFINE 12   /* refinement trials at most */
#define MINCOS_FRESH 100   /* tail estimate: the minimum over a fresh draw of
			    * as many inputs (the held-out count, and what
			    * tools/bench/cosine.py checks)... */
#define MINCOS_CONF 0.9    /* ...kept with this probability... */
#define MINCOS_MARGIN_Z 1.2816 /* ...plus this many standard errors (one-sided
				* 90% confidence) */
#define MINCOS_TAIL_MIN 16 /* fewer judged inputs: the plain minimum */
/* time of a dense conv / Gemm on 8-bit weights (the AVX2 int16 tiles)
 * over its time on 7-bit ones (vpmaddubsw; the profiles' and the cost
 * model's): Documentation/quantization.rst */
#define MINCOS_W8_RATE 1.25

/*
 * A configuration evaluated before: the fp32/int8 flags of every tensor
 * and weight (what rewrite() writes depends on nothing else while the
 * search runs), the written model's length and hash (a check), and the
 * cosine of each evaluation input run on it so far (NaN: not run).  The
 * search meets configurations again (the check on all inputs after the
 * refinement runs the last configuration that passed on the search's
 * inputs, undoing a refinement returns to one), and a run's outputs depend
 * on the model and the input only, so the cosines are taken from here
 * instead of running again: the same numbers, in the same order.
 * MI_MINCOS_MEMO=0 turns it off.
 */
struct evmemo {
	uint8_t *flags;
	size_t len;
	uint64_t hash;
	double *cos;
};

static uint64_t fnv1a(const uint8_t *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

static void memo_free(struct qctx *c)
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

	if (getenv("MI_MINCOS_MEMO") && !strcmp(getenv("MI_MINCOS_MEMO"), "0"))
		return NULL;
	if (c->memo_ev != ev)
		memo_free(c);
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
 * two cores busy poorly); 1 (or MI_MINCOS_PAR=0): one instance at
 * --threads.  The kernels give the same results at any thread count. */
static int eval_workers(const struct qctx *c)
{
	int w = c->nthreads > 0 ? c->nthreads : mi_cpu_ncores();

	if (getenv("MI_MINCOS_PAR") && !strcmp(getenv("MI_MINCOS_PAR"), "0"))
		return 1;
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
static int eval_model(struct qctx *c, struct calib *ev, int nruns, const int *sel,
		      double stop, double *cmin, double *cmean, double *per)
{
	uint8_t *buf = NULL;
	size_t len = 0;
	int nw = eval_workers(c), nb = 0, b0 = 0;
	struct mi_model_opts mo = { .nthreads = nw > 1 ? 1 : c->nthreads };
	struct evrun run[MINCOS_WORKERS];
	pthread_t tid[MINCOS_WORKERS];
	bool spawned[MINCOS_WORKERS];
	struct mi_value *outs = NULL;
	struct evmemo *memo = NULL;
	bool keep = !c->ref;
	int err = rewrite(c, c->path, NULL, &buf, &len);

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
					err = QERR("--min-cosine: %s", mi_last_error()) ? err : 0;
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
			err = QERR("--min-cosine: run %d: %s", r, e->msg) ? e->err : 0;
			break;
		}
		for (int i = 0; i < c->orig_noutputs; i++)
			k += e->outs[i].dtype == MI_DT_FLOAT ? (int64_t)(e->outs[i].nbytes / 4) : 0;
		if (keep) {
			if (r > 0 && k != c->nref) {
				err = QERR("--min-cosine: outputs change size between inputs") ?
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
			err = QERR("--min-cosine: the quantized model's outputs differ in size") ?
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
static double judged(const double *per, int n, double *tail, double *se)
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

/* A unit of --min-cosine's search: an activation tensor or a weight. */
struct unit {
	bool weight; /* c->nodes[idx]'s weight, else c->qt[idx] */
	bool w8;     /* (a weight) its 8-bit step: "fp" = 8 bits, not 7 */
	int idx;
	bool fp;     /* in fp32 in the configuration at hand */
	double sens; /* error (1 - mean cosine) with only this unit in int8 */
	double cost; /* ns per inference it adds when it alone goes fp32 */
	double rank;
};

static int cmp_unit(const void *a, const void *b)
{
	const struct unit *x = a, *y = b;

	return x->rank < y->rank ? 1 : x->rank > y->rank ? -1 : x->idx - y->idx;
}

static void set_unit(struct qctx *c, const struct unit *u, bool fp32)
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
	const char *rt = getenv("MI_MINCOS_RT");

	for (int i = 0; i < nu; i++)
		set_unit(c, &u[i], u[i].fp);
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
	 * stays fp32 (MI_MINCOS_RT=0: quantized as the units say). */
	if (rt && *rt == '0')
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
static double node_macs(const struct qctx *c, int k)
{
	const struct mi_tensor *w = &c->g->tensors[c->nodes[k].weight];
	const struct mi_tensor *y = &c->g->tensors[c->g->nodes[c->nodes[k].node].outputs[0]];
	double wn = (double)mi_tensor_numel(w), yn = (double)mi_tensor_numel(y);
	double noc = (double)w->dims[c->nodes[k].waxis];

	if (!mi_tensor_shape_known(y) || yn <= 0 || noc <= 0)
		return wn;
	return wn * (yn / noc);
}

/*
 * The time model of a configuration, from five models planned on the real
 * kernels (1 thread; each step costed by the cost model, or with
 * MI_MINCOS_COST=profile timed, min over runs per step):
 *  - all int8 and all fp32: each node's time inside a run of its own kind;
 *  - every activation quantized, every weight fp32: each fp32 node alone
 *    between int8 data (reading a DequantizeLinear, writing a
 *    QuantizeLinear: planar data, layout conversions, nothing fused), and
 *    each quantized tensor's standalone QuantizeLinear and DequantizeLinear;
 *  - every activation quantized, the weights of every other quantizable
 *    node (in execution order) fp32, and the same with the others: each
 *    int8 node between fp32 nodes.
 * A configuration runs each node as in the all-int8 model (a quantizable
 * node with its input and weight quantized, another node with every input
 * on the int8 side) or as in the fp32 one; a node whose inputs or outputs
 * cross to the other kind costs its "alone" time (half of the difference
 * per side); each quantized tensor an fp32 node writes adds a
 * QuantizeLinear, each one an fp32 node reads a DequantizeLinear.
 */
struct qtime {
	double *n8, *n32; /* per IR node: ns in the all-int8 / all-fp32 model */
	double *a8, *a32; /* per IR node: ns alone between the other kind */
	double *q, *dq;   /* per quantized tensor: standalone Q / DQ ns */
	int *kq;          /* per IR node: quantizable node index or -1 */
	int *prod;        /* per IR tensor: producing node or -1 */
	int *cstart, *cons; /* per IR tensor: its consumer nodes are
			     * cons[cstart[t] .. cstart[t + 1] - 1] */
	bool *mode;       /* scratch, per node: runs as in the all-int8 model */
	double *pt;       /* scratch, per node: its predicted time */
	bool *side;       /* scratch, per tensor: readable by an int8 node */
	bool ok;          /* profiles taken (else costs are multiply-adds) */
	bool timed;       /* the profiles' steps timed (MI_MINCOS_COST=profile),
			   * else costed by the model (cm_rate) */
};

static void qtime_free(struct qtime *tm)
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
static int profile_load(struct qctx *c, struct mi_model **m)
{
	struct mi_model_opts mo = { .flags = MI_MODEL_PROFILE, .nthreads = 1 };
	uint8_t *buf = NULL;
	size_t len = 0;
	bool ql = c->qlinear;
	int err;

	c->tag = true;
	c->qlinear = false;
	err = rewrite(c, c->path, NULL, &buf, &len);
	c->tag = false;
	c->qlinear = ql;
	if (err)
		return err;
	err = mi_model_load_buffer(buf, len, NULL, "quantized model", &mo, m);
	free(buf);
	if (err < 0)
		return QERR("--min-cosine: %s", mi_last_error()) ? err : 0;
	return 0;
}

#define NPROF 5

/*
 * The cost model (the default; MI_MINCOS_COST=profile times the steps
 * instead): the five models of qtime_init() are planned and run once,
 * which tells which steps the planner made (fused nodes leave no step of
 * their own, a fused activation runs inside its convolution); each step's
 * time is then a fixed function of its kind and sizes:
 *   ns = a * multiply-adds (a step without weights: output channels)
 *        + b * elements read and written + c * weight elements + d
 *        + e * elements read and written beyond CM_BIG
 * with a, b, c, d, e per context (the step in the all-fp32 model, an fp32 step
 * alone between int8 data, in the all-int8 model, an int8 step alone
 * between fp32 data, a standalone QuantizeLinear or DequantizeLinear) and
 * per class of the step's operator (below), fitted by least squares
 * (relative error) to the per-step minima of timed runs of MobileNetV2,
 * EfficientNet-B0, MobileNetV3-Small, ShuffleNetV2 and ResNet-50 at 1
 * thread by tools/quant/costfit.py (Documentation/quantization.rst: refit
 * after kernel changes), one table per int8 ISA: cm_rate_avx512 on an
 * Emerald Rapids core (AVX-512 VNNI; also the generic kernels' table),
 * cm_rate_avx2 on a Zen 3 core (AVX2 + FMA).  No time is measured, so the
 * choice depends on the model, the flags and mi_quant_isa() only (the
 * same on every machine of an int8 ISA; MI_CPU_ISA=avx2 gives an AVX2
 * host's choice on an AVX-512 one).
 */
enum { CM_N32, CM_A32, CM_N8, CM_A8, CM_Q, CM_DQ, CM_NCTX };
enum { CC_CONV, CC_CONV1, CC_DW, CC_DW3S2, CC_DW5, CC_DW5S2, CC_GEMM, CC_POOL, CC_GAP, CC_ADD,
       CC_MUL, CC_SEMUL, CC_SIGM, CC_HSWISH, CC_RELU, CC_MOVE, CC_CONCAT, CC_VIEW, CC_OTHER,
       CC_CONV3W, CC_GEMV, CC_CONV8, CC_CONV1_8, CC_NCLS };
static const char *const cm_ctx_name[] = { "n32", "a32", "n8", "a8", "q", "dq" };
static const char *const cm_cls_name[] = { "conv", "conv1x1", "dwconv", "dw3s2",
					    "dw5", "dw5s2", "gemm", "pool", "gap", "add",
					    "mul", "semul", "sigmoid", "hswish", "relu",
					    "move", "concat", "view", "other", "conv3w", "gemv",
					    "conv8", "conv1x1_8" };
_Static_assert(sizeof(cm_ctx_name) / sizeof(cm_ctx_name[0]) == CM_NCTX, "a name per context");
_Static_assert(sizeof(cm_cls_name) / sizeof(cm_cls_name[0]) == CC_NCLS, "a name per class");
/* elements (read and written) past which a step's data leave the 2 MB L2
 * cache (fp32: 1 MB each side): each one beyond costs e more */
#define CM_BIG 262144.0

/* ns per multiply-add, per element, per weight element, per step, per
 * element beyond CM_BIG
 * (fitted with weights 1 / sqrt(ns): relative errors, large steps
 * counting more).  Written by tools/quant/costfit.py fit --write: edit
 * the tool, not the table. */
/* cm_rate avx512vnni: begin */
static const double cm_rate_avx512[CM_NCTX][CC_NCLS][5] = {
	{ /* n32 */
		{ 0.009932, 0.3008, 0.268, 2000, 0.3233 }, /* conv */
		{ 0.01176, 0.06132, 0.2196, 1604, 0.1034 }, /* conv1x1 */
		{ 0.03604, 0, 1.721, 2000, 0.07795 }, /* dwconv */
		{ 0.04146, 0.02304, 1.383, 2000, 0.1038 }, /* dw3s2 */
		{ 0.04165, 0, 1.63, 0, 0 }, /* dw5 */
		{ 0.03377, 0, 1.274, 0, 0.1331 }, /* dw5s2 */
		{ 0.1411, 0, 0.1411, 0, 0 }, /* gemm */
		{ 0, 0.2271, 0, 0, 0.006703 }, /* pool */
		{ 1.969, 0.04358, 0, 30.79, 0.2004 }, /* gap */
		{ 0.7941, 0.09515, 0, 235.8, 0.001961 }, /* add */
		{ 0.7941, 0.09515, 0, 235.8, 0.001961 }, /* mul */
		{ 0.3108, 0.05588, 0, 144.8, 0.1157 }, /* semul */
		{ 0, 0.00286, 0, 569.5, 0 }, /* sigmoid */
		{ 0, 0, 0, 0, 0 }, /* hswish */
		{ 0, 0, 0, 0, 0 }, /* relu */
		{ 11.7, 0.05997, 0, 222.9, 0 }, /* move */
		{ 2.109, 0.004509, 0, 0, 0 }, /* concat */
		{ 0.07934, 0.0001825, 0, 238.9, 0 }, /* view */
		{ 0, 0, 0, 0, 0 }, /* other */
		{ 0, 0, 0, 0, 0 }, /* conv3w */
		{ 0, 0, 0, 0, 0 }, /* gemv */
		{ 0, 0, 0, 0, 0 }, /* conv8 */
		{ 0, 0, 0, 0, 0 }, /* conv1x1_8 */
	},
	{ /* a32 */
		{ 0.01037, 0.1706, 0.2583, 0, 0.4844 }, /* conv */
		{ 0.01223, 0.009393, 0.2994, 838, 0.08879 }, /* conv1x1 */
		{ 0.0868, 0, 1.733, 2000, 0 }, /* dwconv */
		{ 0.08102, 0.04501, 2.291, 2000, 0.04003 }, /* dw3s2 */
		{ 0.05171, 0, 1.317, 2000, 0 }, /* dw5 */
		{ 0.04984, 0, 0.9062, 0, 0.06794 }, /* dw5s2 */
		{ 0.2767, 0, 0, 0, 0 }, /* gemm */
		{ 0, 0.07367, 0, 0, 0.006702 }, /* pool */
		{ 7.511, 0.147, 0, 909.6, 0 }, /* gap */
		{ 0.7941, 0.09515, 0, 235.8, 0.001961 }, /* add */
		{ 0.7941, 0.09515, 0, 235.8, 0.001961 }, /* mul */
		{ 33.17, 0.0445, 0, 2000, 0 }, /* semul */
		{ 0.2133, 0.01489, 0, 705.3, 0.0347 }, /* sigmoid */
		{ 0.3404, 0.01085, 0, 595, 0.007717 }, /* hswish */
		{ 0, 0, 0, 0, 0 }, /* relu */
		{ 10.89, 0.05884, 0, 221.7, 0 }, /* move */
		{ 2.356, 0.004294, 0, 0, 0 }, /* concat */
		{ 0.08193, 2.132e-05, 0, 246.7, 0 }, /* view */
		{ 0, 0, 0, 0, 0 }, /* other */
		{ 0, 0, 0, 0, 0 }, /* conv3w */
		{ 0, 0, 0, 0, 0 }, /* gemv */
		{ 0, 0, 0, 0, 0 }, /* conv8 */
		{ 0, 0, 0, 0, 0 }, /* conv1x1_8 */
	},
	{ /* n8 */
		{ 0.0008447, 0.05979, 0.1002, 2000, 0.4396 }, /* conv */
		{ 0.0005249, 0.07871, 0.0904, 2000, 0.002817 }, /* conv1x1 */
		{ 0.02823, 0, 0.8839, 1303, 0.01933 }, /* dwconv */
		{ 0.03464, 0, 0.6027, 1070, 0.004654 }, /* dw3s2 */
		{ 0.01814, 0.001451, 0.4423, 2000, 0.009411 }, /* dw5 */
		{ 0.02211, 0, 0.8465, 0, 0.05686 }, /* dw5s2 */
		{ 0.07031, 0, 0, 0, 0 }, /* gemm */
		{ 0, 0.08323, 0, 0, 0 }, /* pool */
		{ 7.09, 0.1465, 0, 830.7, 0 }, /* gap */
		{ 0.9774, 0.09229, 0, 242.7, 0 }, /* add */
		{ 0.9774, 0.09229, 0, 242.7, 0 }, /* mul */
		{ 22.99, 0.02787, 0, 2000, 0 }, /* semul */
		{ 0.1349, 0.01295, 0, 643.5, 0.02235 }, /* sigmoid */
		{ 0, 0.01043, 0, 632.9, 0.01227 }, /* hswish */
		{ 0, 0, 0, 0, 0 }, /* relu */
		{ 7.717, 0.06749, 0, 223.2, 0 }, /* move */
		{ 2.042, 0.004374, 0, 0, 0 }, /* concat */
		{ 0.08379, 8.678e-05, 0, 250.4, 0 }, /* view */
		{ 0, 0, 0, 0, 0 }, /* other */
		{ 0, 0, 0, 0, 0 }, /* conv3w */
		{ 0, 0, 0, 0, 0 }, /* gemv */
		{ 0, 0, 0, 0, 0 }, /* conv8 */
		{ 0, 0, 0, 0, 0 }, /* conv1x1_8 */
	},
	{ /* a8 */
		{ 0.0009161, 0.08175, 0.08969, 0, 0.392 }, /* conv */
		{ 0.0005761, 0.07456, 0.09106, 2000, 0.009 }, /* conv1x1 */
		{ 0.02857, 0, 0.9116, 1151, 0.02308 }, /* dwconv */
		{ 0.03292, 0, 0.5689, 1792, 0.009863 }, /* dw3s2 */
		{ 0.01831, 0.001465, 0.4761, 1370, 0.008353 }, /* dw5 */
		{ 0.02166, 0, 0.871, 0, 0.05997 }, /* dw5s2 */
		{ 0.07081, 0, 0, 0, 0 }, /* gemm */
		{ 0, 0, 0, 0, 0 }, /* pool */
		{ 0, 0, 0, 0, 0 }, /* gap */
		{ 0, 0, 0, 0, 0 }, /* add */
		{ 0, 0, 0, 0, 0 }, /* mul */
		{ 0, 0, 0, 0, 0 }, /* semul */
		{ 0, 0, 0, 0, 0 }, /* sigmoid */
		{ 0, 0, 0, 0, 0 }, /* hswish */
		{ 0, 0, 0, 0, 0 }, /* relu */
		{ 0, 0, 0, 0, 0 }, /* move */
		{ 0, 0, 0, 0, 0 }, /* concat */
		{ 0, 0, 0, 0, 0 }, /* view */
		{ 0, 0, 0, 0, 0 }, /* other */
		{ 0, 0, 0, 0, 0 }, /* conv3w */
		{ 0, 0, 0, 0, 0 }, /* gemv */
		{ 0, 0, 0, 0, 0 }, /* conv8 */
		{ 0, 0, 0, 0, 0 }, /* conv1x1_8 */
	},
	{ /* q */
		{ 2.083, 0.209, 0, 301.3, 0.08404 }, /* conv */
		{ 0, 0, 0, 0, 0 }, /* conv1x1 */
		{ 0, 0, 0, 0, 0 }, /* dwconv */
		{ 0, 0, 0, 0, 0 }, /* dw3s2 */
		{ 0, 0, 0, 0, 0 }, /* dw5 */
		{ 0, 0, 0, 0, 0 }, /* dw5s2 */
		{ 0, 0, 0, 0, 0 }, /* gemm */
		{ 0, 0, 0, 0, 0 }, /* pool */
		{ 0, 0, 0, 0, 0 }, /* gap */
		{ 0, 0, 0, 0, 0 }, /* add */
		{ 0, 0, 0, 0, 0 }, /* mul */
		{ 0, 0, 0, 0, 0 }, /* semul */
		{ 0, 0, 0, 0, 0 }, /* sigmoid */
		{ 0, 0, 0, 0, 0 }, /* hswish */
		{ 0, 0, 0, 0, 0 }, /* relu */
		{ 0, 0, 0, 0, 0 }, /* move */
		{ 0, 0, 0, 0, 0 }, /* concat */
		{ 0, 0, 0, 0, 0 }, /* view */
		{ 0, 0.1847, 0, 390.7, 0.1062 }, /* other */
		{ 0, 0, 0, 0, 0 }, /* conv3w */
		{ 0, 0, 0, 0, 0 }, /* gemv */
		{ 0, 0, 0, 0, 0 }, /* conv8 */
		{ 0, 0, 0, 0, 0 }, /* conv1x1_8 */
	},
	{ /* dq */
		{ 0.5367, 0.1548, 0, 274.4, 0.1289 }, /* conv */
		{ 0, 0, 0, 0, 0 }, /* conv1x1 */
		{ 0, 0, 0, 0, 0 }, /* dwconv */
		{ 0, 0, 0, 0, 0 }, /* dw3s2 */
		{ 0, 0, 0, 0, 0 }, /* dw5 */
		{ 0, 0, 0, 0, 0 }, /* dw5s2 */
		{ 0, 0, 0, 0, 0 }, /* gemm */
		{ 0, 0, 0, 0, 0 }, /* pool */
		{ 0, 0, 0, 0, 0 }, /* gap */
		{ 0, 0, 0, 0, 0 }, /* add */
		{ 0, 0, 0, 0, 0 }, /* mul */
		{ 0, 0, 0, 0, 0 }, /* semul */
		{ 0, 0, 0, 0, 0 }, /* sigmoid */
		{ 0, 0, 0, 0, 0 }, /* hswish */
		{ 0, 0, 0, 0, 0 }, /* relu */
		{ 0, 0, 0, 0, 0 }, /* move */
		{ 0, 0, 0, 0, 0 }, /* concat */
		{ 0, 0, 0, 0, 0 }, /* view */
		{ 0.2956, 0.1435, 0, 392, 0.2126 }, /* other */
		{ 0, 0, 0, 0, 0 }, /* conv3w */
		{ 0, 0, 0, 0, 0 }, /* gemv */
		{ 0, 0, 0, 0, 0 }, /* conv8 */
		{ 0, 0, 0, 0, 0 }, /* conv1x1_8 */
	},
};
/* cm_rate avx512vnni: end */

/* cm_rate avx2: begin */
static const double cm_rate_avx2[CM_NCTX][CC_NCLS][5] = {
	{ /* n32 */
		{ 0.0208, 0.2482, 0.3361, 2000, 0 }, /* conv */
		{ 0.02135, 0.0758, 0.1728, 2000, 0.1248 }, /* conv1x1 */
		{ 0.05218, 0, 4.694, 2000, 0 }, /* dwconv */
		{ 0.07407, 0, 4.021, 2000, 0 }, /* dw3s2 */
		{ 0.05895, 0, 3.221, 0, 0 }, /* dw5 */
		{ 0.04185, 0, 2.205, 0, 0.1171 }, /* dw5s2 */
		{ 0.2472, 0, 0, 2000, 0 }, /* gemm */
		{ 0, 0.1012, 0, 0, 0.09424 }, /* pool */
		{ 2.238, 0.07509, 0, 159.9, 0.03127 }, /* gap */
		{ 0.7421, 0.1118, 0, 632.1, 0 }, /* add */
		{ 0.7421, 0.1118, 0, 632.1, 0 }, /* mul */
		{ 1.856, 0.06675, 0, 0, 0.01462 }, /* semul */
		{ 0, 0, 0, 1183, 0 }, /* sigmoid */
		{ 0, 0, 0, 0, 0 }, /* hswish */
		{ 0, 0, 0, 0, 0 }, /* relu */
		{ 7.707, 0.05327, 0, 603.1, 0 }, /* move */
		{ 3.536, 0.008351, 0, 0, 0 }, /* concat */
		{ 0.05735, 0.0007514, 0, 615.7, 0 }, /* view */
		{ 0, 0, 0, 0, 0 }, /* other */
		{ 0.008541, 0, 0.736, 0, 1.923 }, /* conv3w */
		{ 0.2411, 2.678, 0, 1630, 0 }, /* gemv */
		{ 0, 0, 0, 0, 0 }, /* conv8 */
		{ 0, 0, 0, 0, 0 }, /* conv1x1_8 */
	},
	{ /* a32 */
		{ 0.02095, 0.2824, 0.3823, 2000, 0 }, /* conv */
		{ 0.02102, 0.05489, 0.2362, 1009, 0.09499 }, /* conv1x1 */
		{ 0.1038, 0, 4.252, 2000, 0 }, /* dwconv */
		{ 0.1171, 0, 5.115, 2000, 0 }, /* dw3s2 */
		{ 0.06774, 0, 2.436, 2000, 0 }, /* dw5 */
		{ 0.06321, 0, 1.679, 0, 0 }, /* dw5s2 */
		{ 0.2543, 0, 0, 2000, 0 }, /* gemm */
		{ 0, 0.1885, 0, 0, 0 }, /* pool */
		{ 8.597, 0.2695, 0, 852.8, 0.0235 }, /* gap */
		{ 0.7421, 0.1118, 0, 632.1, 0 }, /* add */
		{ 0.7421, 0.1118, 0, 632.1, 0 }, /* mul */
		{ 42.85, 0.09494, 0, 2000, 0 }, /* semul */
		{ 0, 0.07719, 0, 1349, 0.002415 }, /* sigmoid */
		{ 0.3284, 0.05203, 0, 1120, 0.00105 }, /* hswish */
		{ 0, 0, 0, 0, 0 }, /* relu */
		{ 7.707, 0.05327, 0, 603.1, 0 }, /* move */
		{ 43.12, 0.05653, 0, 0, 0 }, /* concat */
		{ 0, 0.1829, 0, 210.5, 0 }, /* view */
		{ 0, 0, 0, 0, 0 }, /* other */
		{ 0.008832, 0, 0.7408, 0, 2.208 }, /* conv3w */
		{ 0.1172, 2.122, 0.1172, 1624, 0 }, /* gemv */
		{ 0, 0, 0, 0, 0 }, /* conv8 */
		{ 0, 0, 0, 0, 0 }, /* conv1x1_8 */
	},
	{ /* n8 */
		{ 0.01087, 0.2222, 0.08082, 2000, 0.1742 }, /* conv */
		{ 0.009496, 0.1387, 0.1386, 2000, 0.01671 }, /* conv1x1 */
		{ 0.06209, 0, 5.672, 2000, 0 }, /* dwconv */
		{ 0.08296, 0, 5.85, 2000, 0 }, /* dw3s2 */
		{ 0.04249, 0, 4.057, 2000, 0 }, /* dw5 */
		{ 0.06135, 0, 3.576, 0, 0 }, /* dw5s2 */
		{ 0.03632, 0, 0.03632, 2000, 0 }, /* gemm */
		{ 0, 0.2293, 0, 0, 0 }, /* pool */
		{ 8.888, 0.2693, 0, 1272, 0.007442 }, /* gap */
		{ 0.5842, 0.1118, 0, 632.1, 0 }, /* add */
		{ 0.5842, 0.1118, 0, 632.1, 0 }, /* mul */
		{ 0, 0.2276, 0, 811.1, 0.1039 }, /* semul */
		{ 0.051, 0.07772, 0, 1275, 0.0005439 }, /* sigmoid */
		{ 0, 0.05102, 0, 1405, 0 }, /* hswish */
		{ 0, 0, 0, 0, 0 }, /* relu */
		{ 0, 139.3, 0, 0, 0 }, /* move */
		{ 46.36, 0.04971, 0, 0, 0 }, /* concat */
		{ 0, 0.1323, 0, 445.9, 0 }, /* view */
		{ 0, 0, 0, 0, 0 }, /* other */
		{ 0.007969, 0.0326, 0.07877, 0, 0.1635 }, /* conv3w */
		{ 0.06572, 2.001, 0, 2000, 0 }, /* gemv */
		{ 0.01353, 0.1723, 0.2793, 0, 0.271 }, /* conv8 */
		{ 0.01236, 0.1184, 0.2914, 2000, 0 }, /* conv1x1_8 */
	},
	{ /* a8 */
		{ 0.01097, 0.2146, 0.0754, 2000, 0.1252 }, /* conv */
		{ 0.009538, 0.1265, 0.1426, 2000, 0.03769 }, /* conv1x1 */
		{ 0.06829, 0, 5.752, 2000, 0 }, /* dwconv */
		{ 0.09679, 0, 5.102, 2000, 0 }, /* dw3s2 */
		{ 0.06836, 0, 2.73, 2000, 0 }, /* dw5 */
		{ 0.06015, 0, 3.801, 0, 0 }, /* dw5s2 */
		{ 0.07219, 0, 0, 2000, 0 }, /* gemm */
		{ 0, 0, 0, 0, 0 }, /* pool */
		{ 0, 0, 0, 0, 0 }, /* gap */
		{ 0, 0, 0, 0, 0 }, /* add */
		{ 0, 0, 0, 0, 0 }, /* mul */
		{ 0, 0, 0, 0, 0 }, /* semul */
		{ 0, 0, 0, 0, 0 }, /* sigmoid */
		{ 0, 0, 0, 0, 0 }, /* hswish */
		{ 0, 0, 0, 0, 0 }, /* relu */
		{ 0, 0, 0, 0, 0 }, /* move */
		{ 0, 0, 0, 0, 0 }, /* concat */
		{ 0, 0, 0, 0, 0 }, /* view */
		{ 0, 0, 0, 0, 0 }, /* other */
		{ 0.007786, 0.1344, 0.09779, 0, 0 }, /* conv3w */
		{ 0.03107, 2.661, 0.03107, 1870, 0 }, /* gemv */
		{ 0.01372, 0.1412, 0.2617, 0, 0.2594 }, /* conv8 */
		{ 0.01238, 0.1212, 0.2885, 2000, 0 }, /* conv1x1_8 */
	},
	{ /* q */
		{ 3.519, 0.2225, 0, 959.9, 0 }, /* conv */
		{ 0, 0, 0, 0, 0 }, /* conv1x1 */
		{ 0, 0, 0, 0, 0 }, /* dwconv */
		{ 0, 0, 0, 0, 0 }, /* dw3s2 */
		{ 0, 0, 0, 0, 0 }, /* dw5 */
		{ 0, 0, 0, 0, 0 }, /* dw5s2 */
		{ 0, 0, 0, 0, 0 }, /* gemm */
		{ 0, 0, 0, 0, 0 }, /* pool */
		{ 0, 0, 0, 0, 0 }, /* gap */
		{ 0, 0, 0, 0, 0 }, /* add */
		{ 0, 0, 0, 0, 0 }, /* mul */
		{ 0, 0, 0, 0, 0 }, /* semul */
		{ 0, 0, 0, 0, 0 }, /* sigmoid */
		{ 0, 0, 0, 0, 0 }, /* hswish */
		{ 0, 0, 0, 0, 0 }, /* relu */
		{ 0, 0, 0, 0, 0 }, /* move */
		{ 0, 0, 0, 0, 0 }, /* concat */
		{ 0, 0, 0, 0, 0 }, /* view */
		{ 0.1589, 0.2271, 0, 798.2, 0 }, /* other */
		{ 0, 0, 0, 0, 0 }, /* conv3w */
		{ 0, 0, 0, 0, 0 }, /* gemv */
		{ 0, 0, 0, 0, 0 }, /* conv8 */
		{ 0, 0, 0, 0, 0 }, /* conv1x1_8 */
	},
	{ /* dq */
		{ 0.9065, 0.1529, 0, 2000, 0.04041 }, /* conv */
		{ 0, 0, 0, 0, 0 }, /* conv1x1 */
		{ 0, 0, 0, 0, 0 }, /* dwconv */
		{ 0, 0, 0, 0, 0 }, /* dw3s2 */
		{ 0, 0, 0, 0, 0 }, /* dw5 */
		{ 0, 0, 0, 0, 0 }, /* dw5s2 */
		{ 0, 0, 0, 0, 0 }, /* gemm */
		{ 0, 0, 0, 0, 0 }, /* pool */
		{ 0, 0, 0, 0, 0 }, /* gap */
		{ 0, 0, 0, 0, 0 }, /* add */
		{ 0, 0, 0, 0, 0 }, /* mul */
		{ 0, 0, 0, 0, 0 }, /* semul */
		{ 0, 0, 0, 0, 0 }, /* sigmoid */
		{ 0, 0, 0, 0, 0 }, /* hswish */
		{ 0, 0, 0, 0, 0 }, /* relu */
		{ 0, 0, 0, 0, 0 }, /* move */
		{ 0, 0, 0, 0, 0 }, /* concat */
		{ 0, 0, 0, 0, 0 }, /* view */
		{ 0, 0.1755, 0, 1466, 0.02876 }, /* other */
		{ 0, 0, 0, 0, 0 }, /* conv3w */
		{ 0, 0, 0, 0, 0 }, /* gemv */
		{ 0, 0, 0, 0, 0 }, /* conv8 */
		{ 0, 0, 0, 0, 0 }, /* conv1x1_8 */
	},
};
/* cm_rate avx2: end */

/* The class of a step running IR node x as op (the planner's op type),
 * int8 (i8: in an int8 context, kq: its quantizable node or -1): the
 * operator, for convolutions by kernel, stride and shape: dense 3x3
 * stride 1 of 16+ channels each side (conv3w: Winograd, int8 on AVX2:
 * lib/quant/qwino.c), other dense (conv), 1x1 (conv1x1), 1x1 on one pixel
 * (gemv); int8 dense and 1x1 convs by their weights' bits (wqmax()): 7
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
			 * kernels, 8-bit weights (wqmax()) */
			const struct mi_tensor *y = n->noutputs > 0 ?
							    &c->g->tensors[n->outputs[0]] : NULL;
			int64_t px = 1;

			for (int d = 2; y && d < y->ndim; d++)
				px *= y->dims[d];
			if (y && mi_tensor_shape_known(y) && px == 1)
				return CC_GEMV;
			return i8 && kq >= 0 && wqmax(c, &c->nodes[kq]) > 63 ? CC_CONV1_8 : CC_CONV1;
		}
		if (w && w->ndim == 4 && w->dims[2] == 3 && w->dims[3] == 3 && unit_stride(n) &&
		    w->dims[1] >= MI_QWINO_MIN_C && w->dims[0] >= MI_QWINO_MIN_OC)
			return CC_CONV3W;
		return i8 && kq >= 0 && wqmax(c, &c->nodes[kq]) > 63 ? CC_CONV8 : CC_CONV;
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

	f[0] = kq[x] >= 0	  ? node_macs(c, kq[x]) :
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
	const char *cm = getenv("MI_MINCOS_COST");
	bool dump = getenv("MI_MINCOS_DEBUG") || (cm && !strcmp(cm, "steps"));
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
				err = QERR("--min-cosine: %s", mi_last_error()) ? err : 0;
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
			 * input, or with MI_MINCOS_DEBUG=1 and timed steps, a
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
static double predict_time(const struct qctx *c, struct qtime *tm)
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
static int qtime_init(struct qctx *c, struct calib *ev, struct unit *u, int nu,
		      struct qtime *tm)
{
	const struct mi_graph *g = c->g;
	const char *xdw = getenv("MI_CPU_XDW"), *sef = getenv("MI_CPU_SEFOLD");
	char *xdw0 = xdw ? strdup(xdw) : NULL, *sef0 = sef ? strdup(sef) : NULL;
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
	    !tm->kq || !tm->prod || !tm->cstart || !tm->cons || !tm->mode || !tm->pt || !tm->side ||
	    (xdw && !xdw0) || (sef && !sef0)) {
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
	setenv("MI_CPU_XDW", "0", 1);
	setenv("MI_CPU_SEFOLD", "0", 1);
	for (int i = 0; i < nu; i++)
		set_unit(c, &u[i], true);
	err = profile_load(c, &pm[0]);
	for (int i = 0; i < c->nqt; i++)
		c->qt[i].fp32 = false;
	if (!err)
		err = profile_load(c, &pm[1]);
	if (xdw0)
		setenv("MI_CPU_XDW", xdw0, 1);
	else
		unsetenv("MI_CPU_XDW");
	if (sef0)
		setenv("MI_CPU_SEFOLD", sef0, 1);
	else
		unsetenv("MI_CPU_SEFOLD");
	for (int i = 0; i < nu; i++)
		set_unit(c, &u[i], false);
	if (!err)
		err = profile_load(c, &pm[2]);
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
		err = profile_load(c, &pm[3 + par]);
	}
	for (int i = 0; i < nu; i++)
		set_unit(c, &u[i], false);
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
	free(xdw0);
	free(sef0);
	return err;
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
 * *pass: the judged cosine (judged()) reaches it, and if hold > 0, also
 * that of inputs hold..n-1 alone (the held-out ones, which the search did
 * not choose by; *tail: the lower of the two).  MI_MINCOS_DEBUG=1 prints
 * each judgement and its inputs' cosines on stderr. */
static int try_config(struct qctx *c, struct calib *ev, int n, const int *ord, int hold,
		      double target, double *per, bool *pass, double *cmin, double *tail)
{
	double cmean, se = 0, htail = 1, hse = 0;
	int err = eval_model(c, ev, n, ord, target, cmin, &cmean, per);

	*pass = false;
	*tail = *cmin;
	if (!err && *cmin >= target) {
		*pass = judged(per, n, tail, &se) >= target;
		if (hold > 0 && hold < n) {
			bool hpass = judged(per + hold, n - hold, &htail, &hse) >= target;

			*pass = *pass && hpass;
			*tail = fmin(*tail, htail);
		}
	}
	if (!err && getenv("MI_MINCOS_DEBUG")) {
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
 *     all-int8 model when it alone goes fp32 (predict_time()).
 *  2. Units are ranked by error per unit of cost; the shortest prefix of
 *     the ranking whose fp32 makes the configuration pass (judged() >=
 *     c->min_cos over all evaluation inputs) is found by bisection (errors
 *     of separate units are close to additive).
 *  3. Refinement: the prefix's units, the ones whose return to int8 saves
 *     most time first, go back to int8 one at a time while it still passes
 *     (at most MINCOS_REFINE trials).
 *  4. (default, MI_QUANT_W8FB=2) A weight at 7 bits (wqmax_plain()) the
 *     result leaves in fp32 on a node that could run int8 tries 8 bits
 *     (int16 tiles, MINCOS_W8_RATE of the 7-bit time, still ~1.5-2x faster
 *     than fp32), the largest predicted saving first, each kept when the
 *     configuration passes on all inputs and the held-out ones.
 * MI_QUANT_W8FB=1 instead gives such a weight three levels in the ranking:
 * besides its unit (fp32) a "w8" unit moves it to 8 bits.  Its error is not
 * measured but split from the weight's: the 7-bit error times the 8-bit
 * weights' share of their rounding error (weight_scales(): ~1/4) stays with
 * the fp32 step, the rest goes to the 8-bit one, which costs
 * MINCOS_W8_RATE - 1 of the node's int8 time (the fp32 step's cost is
 * counted from 8 bits), so the ranking takes the 8-bit step first and the
 * search stays one bisection over one ranking.  It moves many weights to
 * 8 bits that 7 would have done for (Documentation/quantization.rst:
 * slower on 3 of 5 CNNs).  MI_QUANT_W8FB=0: neither.
 */
static int mixed_precision(struct qctx *c, struct calib *ev, int n)
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
		double m = node_macs(c, i);
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
		if (wqmax_plain(c, &c->nodes[i]) == 63) {
			w8u[i] = nu;
			u[nu++] = (struct unit){ .weight = true, .w8 = true, .idx = i,
						 .cost = node_macs(c, i) * (MINCOS_W8_RATE - 1) };
		}
	/* the reference: everything in fp32 */
	for (int i = 0; i < nu; i++)
		set_unit(c, &u[i], true);
	err = eval_model(c, ev, nall, NULL, 0, &cmin, &cmean, NULL);
	for (int i = 0; i < nu; i++)
		set_unit(c, &u[i], false);
	if (!err) {
		printf("min-cosine: fp32 outputs of %d inputs (%d at a time, %.0f s)\n", nall,
		       eval_workers(c), now_s() - t0);
		fflush(stdout);
		err = eval_model(c, ev, nall, NULL, 0, &cmin, &cmean, per);
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
	jd = judged(per, nall, &tail, &tse);
	printf("min-cosine: all int8: cosine min %.9f mean %.9f over %d inputs, tail estimate "
	       "%.9f\n", cmin, cmean, nall, tail);
	if (jd >= c->min_cos)
		goto out;
	/* costs: the cost model's times of the planned steps (MI_MINCOS_COST=
	 * profile: measured times; =macs: multiply-adds, as when planning the
	 * profile models fails) */
	cost = getenv("MI_MINCOS_COST") ? getenv("MI_MINCOS_COST") : "model";
	macs_only = !strcmp(cost, "macs");
	tm.timed = !strcmp(cost, "profile") || !strcmp(cost, "steps");
	err = macs_only ? 0 : qtime_init(c, ev, u, nu, &tm);
	if (err == -ENOMEM)
		goto out;
	if (tm.ok) {
		t8 = predict_time(c, &tm);
		for (int i = 0; i < nu; i++)
			u[i].fp = true;
		apply_units(c, u, nu);
		t32 = predict_time(c, &tm);
		for (int i = 0; i < nu; i++) {
			for (int j = 0; j < nu; j++)
				u[j].fp = j == i;
			apply_units(c, u, nu);
			u[i].cost = predict_time(c, &tm) - t8;
		}
		/* a three-level weight's fp32 step starts from 8 bits */
		for (int k = 0; k < c->nnodes; k++)
			if (w8u[k] >= 0)
				u[wfu[k]].cost -= u[w8u[k]].cost;
		printf("min-cosine: %s at 1 thread: all int8 %.3f ms, all fp32 %.3f ms (%.0f s)\n",
		       tm.timed ? "profiled" : "cost model", t8 * 1e-6, t32 * 1e-6, now_s() - t0);
		/* the input of tools/quant/costfit.py: the step lines, then stop */
		if (!strcmp(cost, "steps")) {
			err = QERR("--min-cosine: MI_MINCOS_COST=steps: stopped after the profiles") ?
				      -ECANCELED : 0;
			goto out;
		}
	} else if (macs_only) {
		printf("min-cosine: costs are multiply-adds (MI_MINCOS_COST=macs)\n");
	} else {
		printf("min-cosine: planning the cost models failed (%s): costs are multiply-adds\n",
		       mi_last_error());
	}
	err = 0;
	for (int i = 0; i < nu; i++) /* the weights measured at 7 bits */
		set_unit(c, &u[i], !u[i].w8);
	for (int i = 0; i < nu && !err; i++) {
		if (u[i].w8)
			continue; /* below */
		set_unit(c, &u[i], false);
		err = eval_model(c, ev, nsens, ord, 0, &cmin, &cmean, NULL);
		u[i].sens = fmax(1 - cmean, 0);
		set_unit(c, &u[i], true);
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
		if (!weight_scales(c, &c->nodes[k], 63, &e7) ||
		    !weight_scales(c, &c->nodes[k], 127, &e8)) {
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
	if (getenv("MI_MINCOS_DEBUG"))
		for (int i = 0; i < nu; i++)
			fprintf(stderr, "unit %3d %s %-70s sens %.3e cost %8.1f us macs %.0f rank "
				"%.3e\n", i, u[i].w8 ? "8" : u[i].weight ? "w" : "a", unit_name(c, &u[i]), u[i].sens,
				u[i].cost * 1e-3, u[i].weight ? node_macs(c, u[i].idx) : 0.0, u[i].rank);
	/* test hook: every prefix of the ranking on all inputs, so that a
	 * test can replay the searches below for any targets */
	for (int k = 0; getenv("MI_MINCOS_PREFIXES") && k <= nu; k++) {
		set_prefix(c, u, nu, k);
		err = eval_model(c, ev, nall, NULL, 0, &cmin, &cmean, per);
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
		if (getenv("MI_MINCOS_DEBUG"))
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
		err = eval_model(c, ev, n, NULL, 0, &best, &cmean, NULL);
		if (err)
			goto out;
	}
	printf("min-cosine: bisection: %d of %d units in fp32 (%d evaluations, %.0f s)%s", hi, nu,
	       nevals, now_s() - t0, tm.ok ? "" : "\n");
	if (tm.ok)
		printf(", predicted %.3f ms\n", (tcur = predict_time(c, &tm)) * 1e-6);
	/* refinement: back to int8, the largest saving first; a tensor goes
	 * back with the weights of the nodes it kept in fp32 */
	for (int i = 0; i < nu; i++)
		if (u[i].weight && !u[i].w8)
			wunit[u[i].idx] = i;
	for (int i = 0; tm.ok && i < hi; i++) {
		set_group(c, u, wunit, i, false);
		apply_units(c, u, nu);
		gain[i] = tcur - predict_time(c, &tm);
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
		tnew = predict_time(c, &tm);
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
	/* MI_QUANT_W8FB=2: the 7-bit weights left in fp32 whose nodes could
	 * run int8 try 8 bits, the largest predicted saving first, each kept
	 * when the configuration passes the check on all inputs */
	int ncand = 0, ntry8 = 0;

	tcur = tm.ok ? predict_time(c, &tm) : 0;
	for (int k = 0; c->w8fb == 2 && c->wbits == WBITS_MIXED && tm.ok && k < c->nnodes; k++) {
		if (!c->nodes[k].wfp32 || wqmax_plain(c, &c->nodes[k]) != 63)
			continue;
		u[wunit[k]].fp = false;
		c->nodes[k].w8 = true;
		apply_units(c, u, nu);
		gain[ncand] = c->nodes[k].wfp32 ? 0 : tcur - predict_time(c, &tm);
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
	 * MINCOS_REFINE trials (MI_MINCOS_DOWN=0: none) */
	int ndown = 0, ntryd = 0;
	const char *down = getenv("MI_MINCOS_DOWN");

	tcur = tm.ok ? predict_time(c, &tm) : 0;
	for (int i = 0; tm.ok && !(down && *down == '0') && i < nu; i++) {
		double tnew;

		if (u[i].w8 || u[i].fp || (u[i].weight && c->nodes[u[i].idx].wfp32) ||
		    (!u[i].weight && c->qt[u[i].idx].fp32))
			continue;
		u[i].fp = true;
		apply_units(c, u, nu);
		tnew = predict_time(c, &tm);
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
		tnew = predict_time(c, &tm);
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
		tcur = predict_time(c, &tm);
	if (tm.ok && getenv("MI_MINCOS_DEBUG")) {
		predict_time(c, &tm);
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
		left += c->nodes[i].wfp32 ? node_macs(c, i) : 0;
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

/* ---- command line ------------------------------------------------------ */

/* ---- MI_QUANT_DECOMPOSE: where the all-int8 error comes from ---------- */

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
 * MI_QUANT_DECOMPOSE=1: the cosine with the fp32 model on the evaluation
 * inputs of all int8, weights only, activations only, and each class of
 * activations (weights fp32) and of weights (activations fp32) alone, on
 * stdout; nothing is written.
 */
static int decompose(struct qctx *c, struct calib *ev)
{
	const char *cls[64];
	int ncls = 0, err;
	double cmin, cmean;

	for (int i = 0; i < c->nqt; i++)
		c->qt[i].fp32 = true;
	for (int k = 0; k < c->nnodes; k++)
		c->nodes[k].wfp32 = true;
	err = eval_model(c, ev, ev->nruns, NULL, 0, &cmin, &cmean, NULL);
	int npass = atoi(getenv("MI_QUANT_DECOMPOSE")) == 2 ? 3 : 3 + 64;

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
			macs += node_macs(c, k);
			qm += c->nodes[k].wfp32 ? 0 : node_macs(c, k);
			if (pass == 0) {
				bool seen = false;

				for (int j = 0; j < ncls; j++)
					seen |= !strcmp(cls[j], w);
				if (!seen && ncls < 64)
					cls[ncls++] = w;
			}
		}
		err = eval_model(c, ev, ev->nruns, NULL, 0, &cmin, &cmean, NULL);
		printf("decompose: %-20s %3d units int8 (%4.1f%% of the weights' MACs): cosine min "
		       "%.6f mean %.6f, 1-mean %.3e\n",
		       pass == 0 ? "all int8" : pass == 1 ? "weights only" : pass == 2 ?
		       "activations only" : want, nq, 100 * qm / macs, cmin, cmean, 1 - cmean);
		fflush(stdout);
	}
	return err;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: metainfer quantize MODEL.onnx (--calib DIR | --calib-random N) -o OUT.onnx\n"
		"                          [--format qdq|qlinear] [--per-channel|--per-tensor]\n"
		"                          [--range mse|mse-act|minmax | --percentile P] [--no-bias-correction]\n"
		"                          [--no-equalize] [--weight-bits 7|8|mixed|auto]\n"
		"                          [--min-cosine C] [--seed S] [--threads N]\n"
		"\n"
		"Post-training static int8 quantization: uint8 asymmetric activations\n"
		"(ranges calibrated by running the fp32 model), int8 symmetric weights of\n"
		"Conv/Gemm/MatMul (per output channel unless --per-tensor), int32 biases.\n"
		"\n"
		"  --calib DIR          calibration inputs: every DIR/*.npy (one-input models)\n"
		"  --calib-random N     N seeded random inputs, uniform in [-1, 1)\n"
		"  -o, --output FILE    the quantized model\n"
		"  --format qdq         QuantizeLinear/DequantizeLinear pairs (default)\n"
		"  --format qlinear     QLinearConv/QLinearMatMul where possible\n"
		"  --per-channel        per output channel weight scales (default)\n"
		"  --per-tensor         one weight scale per tensor\n"
		"  --range mse          activation ranges clipped where the quantization error\n"
		"                       (clipping + rounding) of the calibration values is\n"
		"                       smallest (default)\n"
		"  --range mse-act      the same, measured after the readers' HardSigmoid,\n"
		"                       HardSwish, Sigmoid or SiLU where they apply one\n"
		"  --range minmax       activation ranges = calibration min/max\n"
		"  --percentile P       clip activation ranges at the P-th percentile of |x|\n"
		"                       (e.g. 99.99) instead of min/max\n"
		"  --no-bias-correction keep biases as they are (default: add the mean output\n"
		"                       shift that weight rounding causes, from calibration)\n"
		"  --no-equalize        keep the channels as they are (default: where Relu,\n"
		"                       pooling and Add between Conv/Gemm layers allow, scale\n"
		"                       each channel towards equal spread, an fp32-equivalent\n"
		"                       rewrite that lowers the per-tensor activation error)\n"
		"  --weight-bits B      8: weights in [-127, 127]; 7: in [-63, 63], where\n"
		"                       the AVX2 int8 kernels (hosts without VNNI) multiply\n"
		"                       them by vpmaddubsw, exactly and ~1.2-1.3x faster on\n"
		"                       dense convs (twice the weight rounding error);\n"
		"                       mixed: 7 bits where the AVX2 kernels take that route\n"
		"                       (dense convs, Gemm/MatMul on 5+ rows), 8 for depthwise\n"
		"                       convs, 3x3 stride-1 convs (Winograd) and GEMVs;\n"
		"                       auto (default): mixed where this host's int8 kernels\n"
		"                       are the AVX2 ones (MI_CPU_ISA=avx2 selects them on\n"
		"                       any x86 host), else 8.  So by default the file\n"
		"                       depends on the host's ISA; VNNI kernels run any of\n"
		"                       them at the same speed; with --min-cosine, the 7-bit\n"
		"                       weights the search leaves in fp32 try 8 bits\n"
		"  --min-cosine C       mixed precision: leave in fp32 the tensors and weights\n"
		"                       whose quantization costs most accuracy per unit of\n"
		"                       time (a cost model of the planned kernels at 1\n"
		"                       thread, nothing timed: the same model and options\n"
		"                       give the same file), as few as give an output\n"
		"                       cosine similarity >= C with the fp32 model (e.g. 0.99)\n"
		"                       on the evaluation inputs (the calibration inputs; with\n"
		"                       --calib-random at least 200 drawn alike for the search\n"
		"                       and 100 more for a final check, which must also pass\n"
		"                       on those 100 alone): both their minimum and a tail\n"
		"                       estimate (normal fit of the upper half of the log\n"
		"                       errors 1 - cosine: the minimum a fresh draw of 100\n"
		"                       inputs keeps with probability 0.9, plus 1.28 jackknife\n"
		"                       standard errors) must reach C\n"
		"  --seed S             seed of --calib-random (default 1234)\n"
		"  --threads N          threads for the calibration runs; --min-cosine runs\n"
		"                       N evaluation inputs at a time (default: the cores)\n");
}

int mi_quant_main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "calib", required_argument, NULL, 'c' },
		{ "calib-random", required_argument, NULL, 'r' },
		{ "output", required_argument, NULL, 'o' },
		{ "format", required_argument, NULL, 'f' },
		{ "per-channel", no_argument, NULL, 'P' },
		{ "per-tensor", no_argument, NULL, 'T' },
		{ "percentile", required_argument, NULL, 'p' },
		{ "no-bias-correction", no_argument, NULL, 'B' },
		{ "no-equalize", no_argument, NULL, 'E' },
		{ "range", required_argument, NULL, 'R' },
		{ "seed", required_argument, NULL, 's' },
		{ "threads", required_argument, NULL, 't' },
		{ "min-cosine", required_argument, NULL, 'm' },
		{ "weight-bits", required_argument, NULL, 'W' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *calib = NULL, *out = NULL, *model;
	long nrandom = 0, seed = 1234, threads = 0;
	struct qctx c = { .per_channel = true, .bias_correct = true, .mse = true,
			  .equalize = true, .wbits = WBITS_AUTO };
	struct calib cal = { 0 }, ev = { 0 };
	int opt, err, rc = 1;
	char *end;

	/* A/B switches of the weight scales and the 8-bit step (weight_scales(),
	 * mixed_precision()) */
	c.wclip = getenv("MI_QUANT_WCLIP") ? atoi(getenv("MI_QUANT_WCLIP")) : 0;
	c.w8fb = getenv("MI_QUANT_W8FB") ? atoi(getenv("MI_QUANT_W8FB")) : 2;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "o:h", lo, NULL)) != -1) {
		switch (opt) {
		case 'c':
			calib = optarg;
			break;
		case 'r':
			nrandom = strtol(optarg, &end, 10);
			if (*end || nrandom < 1 || nrandom > 100000)
				return QERR("--calib-random: '%s' is not a count in 1..100000", optarg);
			break;
		case 'o':
			out = optarg;
			break;
		case 'f':
			if (!strcmp(optarg, "qdq"))
				c.qlinear = false;
			else if (!strcmp(optarg, "qlinear"))
				c.qlinear = true;
			else
				return QERR("--format: '%s' is not qdq or qlinear", optarg);
			break;
		case 'P':
			c.per_channel = true;
			break;
		case 'T':
			c.per_channel = false;
			break;
		case 'B':
			c.bias_correct = false;
			break;
		case 'E':
			c.equalize = false;
			break;
		case 'R':
			c.percentile = 0;
			c.mse = false;
			c.mse_act = false;
			if (!strcmp(optarg, "mse") || !strcmp(optarg, "mse-act"))
				c.mse = true;
			else if (strcmp(optarg, "minmax"))
				return QERR("--range: '%s' is not minmax, mse or mse-act", optarg);
			c.mse_act = !strcmp(optarg, "mse-act");
			break;
		case 'p':
			c.mse = false;
			c.percentile = strtod(optarg, &end);
			if (*end || !(c.percentile > 50 && c.percentile <= 100))
				return QERR("--percentile: '%s' is not in (50, 100]", optarg);
			break;
		case 's':
			seed = strtol(optarg, &end, 10);
			if (*end || seed < 0)
				return QERR("--seed: '%s' is not a non-negative number", optarg);
			break;
		case 't':
			threads = strtol(optarg, &end, 10);
			if (*end || threads < 0 || threads > 1024)
				return QERR("--threads: '%s' is not a thread count", optarg);
			break;
		case 'm':
			c.min_cos = strtod(optarg, &end);
			if (*end || !(c.min_cos > 0 && c.min_cos <= 1))
				return QERR("--min-cosine: '%s' is not in (0, 1]", optarg);
			break;
		case 'W':
			if (strcmp(optarg, "7") && strcmp(optarg, "8") && strcmp(optarg, "mixed") &&
			    strcmp(optarg, "auto"))
				return QERR("--weight-bits: '%s' is not 7, 8, mixed or auto", optarg);
			c.wbits = optarg[0] == '7' ? 7 : optarg[0] == '8' ? 8 :
				  optarg[0] == 'm' ? WBITS_MIXED : WBITS_AUTO;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind + 1 != argc || !out || (!calib == !nrandom)) {
		usage(stderr);
		return 2;
	}
	model = argv[optind];
	if (c.wbits == WBITS_AUTO)
		c.wbits = mi_quant_isa() == MI_QISA_AVX2 ? WBITS_MIXED : 8;

	struct mi_model_opts mo = { .flags = MI_MODEL_NO_NORMALIZE, .nthreads = (int)threads };

	err = mi_model_load_graph(model, &mo, &c.m);
	if (err < 0)
		return QERR("%s", mi_last_error());
	c.g = &c.m->g;
	c.path = model;
	c.nthreads = (int)threads;
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
		QERR("%s: %s", model, err == -ENOMEM ? "out of memory" : c.g->err);
		goto out;
	}
	if (!c.nnodes) {
		QERR("%s: no Conv/Gemm/MatMul with constant fp32 weights to quantize", model);
		goto out;
	}
	err = calib ? calib_dir(&c, calib, &cal) : calib_random(&c, (int)nrandom, seed, &cal);
	if (err)
		goto out;
	if (c.equalize) {
		err = equalize(&c, &cal);
		if (err < 0)
			goto out;
		printf("equalized the channels of %d tensor groups\n", err);
	}
	err = calibrate(&c, &cal);
	if (err)
		goto out;
	/* back to the graph as loaded (the planner rewired it for the runs) */
	mi_cpu_plan_fini(c.g);
	for (int i = c.orig_noutputs; i < c.g->noutputs; i++)
		c.g->tensors[c.g->outputs[i]].flags &= ~MI_TF_OUTPUT;
	c.g->noutputs = c.orig_noutputs;
	err = mi_graph_toposort(c.g);
	if (err) {
		QERR("%s: %s", model, c.g->err);
		goto out;
	}
	c.search_cos = c.min_cos;
	if (getenv("MI_MINCOS_SEARCH_TARGET"))
		c.search_cos = strtod(getenv("MI_MINCOS_SEARCH_TARGET"), NULL);
	if (getenv("MI_QUANT_FP32")) { /* test hook: the fp32 model as rewritten */
		for (int i = 0; i < c.nqt; i++)
			c.qt[i].fp32 = true;
		for (int k = 0; k < c.nnodes; k++)
			c.nodes[k].wfp32 = true;
	}
	if (getenv("MI_QUANT_DECOMPOSE")) {
		err = calib_random(&c, MINCOS_INPUTS + MINCOS_HOLD, seed, &ev);
		if (!err)
			err = decompose(&c, &ev);
		if (!err)
			rc = 0;
		goto out;
	}
	if (c.min_cos > 0 && !calib) {
		/* judged on more inputs than the calibration's: the first
		 * nrandom are the calibration inputs, the rest new; the last
		 * MINCOS_HOLD are held out of the search */
		int ns = nrandom > MINCOS_INPUTS ? (int)nrandom : MINCOS_INPUTS;

		err = calib_random(&c, ns + MINCOS_HOLD, seed, &ev);
		if (!err)
			err = mixed_precision(&c, &ev, ns);
	} else if (c.min_cos > 0) {
		err = mixed_precision(&c, &cal, cal.nruns);
	}
	if (err)
		goto out;
	err = rewrite(&c, model, out, NULL, NULL);
	if (err)
		goto out;
	int nq = 0;

	for (int i = 0; i < c.nnodes; i++)
		nq += c.nodes[i].node >= 0 && !c.nodes[i].wfp32;
	int n7 = 0;

	for (int i = 0; i < c.nnodes; i++)
		n7 += c.nodes[i].node >= 0 && !c.nodes[i].wfp32 && wqmax(&c, &c.nodes[i]) == 63;
	printf("quantized %d nodes (%s weights, %d of them 7-bit (--weight-bits %s), %d activation tensors, %d calibration runs, %s) -> %s\n",
	       nq, c.per_channel ? "per-channel" : "per-tensor", n7,
	       c.wbits == WBITS_MIXED ? "mixed" : c.wbits == 7 ? "7" : "8", c.nqt, cal.nruns,
	       c.qlinear ? "qlinear" : "qdq", out);
	rc = 0;
out:
	calib_free(&cal, !calib);
	calib_free(&ev, true);
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
	memo_free(&c);
	free(c.src);
	for (int i = 0; i < c.nnodes; i++) {
		free(c.nodes[i].wscale[0]);
		free(c.nodes[i].wscale[1]);
	}
	free(c.nodes);
	mi_model_free(c.m);
	return rc;
}
