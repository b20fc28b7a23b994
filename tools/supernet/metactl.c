// SPDX-License-Identifier: MIT
/*
 * metactl MODEL.onnx [--stored] [--out FILE] [--devices N] [--states N]
 *         [--trees N] [--depth D] [--eval N]
 *         [--seed S] [--max-regret PCT] [--max-miss PCT] [--min-hot PCT]
 *         [--beat-formula]
 *
 * Trains the meta-controller of a switchable model (lib/meta/ctl.c) and
 * evaluates it against the hand-written fallback on held-out devices;
 * with --stored, evaluates the controller the model holds instead.
 *
 * Data: for N devices (two thirds simulated NPUs with random
 * personalities, mi_pred_simchip_random, timed by the simulator's timing
 * model; one third CPU-like devices with random roofline rates and
 * per-class efficiencies, timed by lib/predict's roofline) and N health
 * states each (random lib/health vectors plus the corners), every
 * configuration's latency is computed from the nodes of its variants
 * (std: Conv 3x3; dws: depthwise 3x3 + Conv 1x1; group: grouped 3x3 (4
 * groups) + shuffle) under that state: thermal headroom below 0.5 drops
 * the clock by one throttle level (clock >> level, Documentation/sim.rst)
 * per 1/6 (at most 3), a power budget below 0.25 halves it, bandwidth
 * saturation b leaves (1 - 0.9 b) of the DMA bandwidth, memory
 * availability m leaves max(m, 0.1) of the SRAM, compute readiness c
 * divides the time by max(c, 0.05), queue instability (1 - q) adds 2 (1 -
 * q) launches per node.  The device's embedding is its per-layer table at
 * full health (what a fingerprint measures).  Accuracy is the model's
 * metadata (held-out, per configuration).
 *
 * Evaluation (on --eval other devices, drawn from another seed), for the
 * trained controller and for the fallback formula, each state:
 *   fastest: regret = latency(chosen) / latency(oracle) - 1;
 *   budget:  budget = 1.1 x the full-health latency of the most accurate
 *            configuration (as scheduler/live.c sets it); oracle = the
 *            most accurate configuration that truly fits; a miss is a
 *            choice that does not fit while the oracle does; regret =
 *            accuracy(oracle) - accuracy(chosen) over the rest.
 *   hot:     state 1 (thermal headroom 0) where the healthy state's
 *            budget choice no longer fits and a faster one exists: the
 *            share of devices that get a faster configuration.
 * Exit 1 when the trained controller's mean fastest regret exceeds
 * --max-regret, its budget misses exceed --max-miss, or its hot share is
 * under --min-hot (percent), and with --beat-formula when its mean
 * fastest regret or its budget misses are above the formula's.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "meta/meta-impl.h"
#include "predict/predict.h"

#define NTAB (MI_SWITCH_MAX_LAYERS * MI_SWITCH_MAX_VARIANTS)
#define MAXN 3	/* nodes per variant */

struct dev {
	bool sim;
	struct mi_pred_simchip chip;
	struct mi_pred_caps caps;
	double eff[MI_PC_COUNT];	/* CPU-like: rate per op class */
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double logu(uint64_t *s, double lo, double hi)
{
	return exp(log(lo) + mi_pred_uniform(s) * (log(hi) - log(lo)));
}

static void dev_random(struct dev *d, uint64_t *seed, bool sim)
{
	memset(d, 0, sizeof(*d));
	d->sim = sim;
	if (sim) {
		mi_pred_simchip_random(&d->chip, seed);
		return;
	}
	d->caps.macs_per_s = logu(seed, 5e9, 200e9);
	d->caps.bytes_per_s = logu(seed, 5e9, 60e9);
	d->caps.launch_ns = logu(seed, 200, 5000);
	for (int c = 0; c < MI_PC_COUNT; c++)
		d->eff[c] = 0.3 + 0.7 * mi_pred_uniform(seed);
	d->eff[MI_PC_DWCONV] = logu(seed, 0.03, 0.5);
}

/* The nodes of variant kind of layer L, batch 1, fp32 sizes. */
static int variant_nodes(const struct mi_switch_layer *L, int kind,
			 struct mi_pred_node *n)
{
	double ci = L->in_ch, co = L->out_ch;
	double hw = (double)L->height * L->width;
	int nn = 0;

	memset(n, 0, MAXN * sizeof(*n));
	for (int i = 0; i < MAXN; i++) {
		n[i].variant = -1;
		n[i].int8 = 1;
		n[i].threads = 1;
		n[i].stride = 1;
		n[i].out_hw = hw;
	}
#define NODE(c, k, g, ci_, co_, m)                                          \
	do {                                                                \
		n[nn].cls = (c), n[nn].kh = n[nn].kw = (k);                 \
		n[nn].groups = (g), n[nn].cin = (ci_), n[nn].cout = (co_);  \
		n[nn].macs = (m), n[nn].in_bytes = 4 * (ci_) * hw;          \
		n[nn].w_bytes = 4 * (m) / hw, n[nn].out_bytes = 4 * (co_) * hw; \
		nn++;                                                       \
	} while (0)
	switch (kind) {
	case MI_META_DWS:
		NODE(MI_PC_DWCONV, 3, (int)ci, ci, ci, 9 * ci * hw);
		NODE(MI_PC_CONV1X1, 1, 1, ci, co, ci * co * hw);
		break;
	case MI_META_GROUP:
		NODE(MI_PC_DWCONV, 3, 4, ci, co, 9 * ci * co / 4 * hw);
		NODE(MI_PC_DATA, 1, 1, co, co, co * hw);
		n[nn - 1].w_bytes = 0;
		break;
	default:
		NODE(MI_PC_CONV, 3, 1, ci, co, 9 * ci * co * hw);
		break;
	}
#undef NODE
	return nn;
}

/* One layer variant on d in health state h, us. */
static double variant_us(const struct dev *d, const struct mi_switch_layer *L,
			 int k, const double *h)
{
	struct mi_pred_node n[MAXN];
	int nn = variant_nodes(L, L->kind[k], n), level;
	double clock = 1, t = 0, launch;

	level = h[3] >= 0.5 ? 0 : (int)fmin(3, ceil((0.5 - h[3]) * 6));
	clock = 1.0 / (1 << level) * (h[4] < 0.25 ? 0.5 : 1);
	if (d->sim) {
		struct mi_pred_simchip c = d->chip;

		c.clock_hz *= clock;
		c.dma_bw *= 1 - 0.9 * h[2];
		c.sram *= fmax(h[1], 0.1);
		for (int i = 0; i < nn; i++)
			t += mi_pred_simchip_ns(&c, &n[i]);
		launch = c.launch_ns;
	} else {
		struct mi_pred_caps c = d->caps;

		c.bytes_per_s *= 1 - 0.9 * h[2];
		for (int i = 0; i < nn; i++) {
			struct mi_pred_caps cc = c;

			cc.macs_per_s *= clock * d->eff[n[i].cls];
			t += mi_pred_roofline(&n[i], &cc);
		}
		launch = c.launch_ns;
	}
	t += 2 * (1 - h[5]) * launch * nn;
	return t / fmax(h[0], 0.05) / 1e3;
}

static double config_us(const struct dev *d, const struct mi_switch *sw,
			const int *choice, const double *h)
{
	double t = 0;

	for (int l = 0; l < sw->nlayers; l++)
		t += variant_us(d, &sw->layers[l], choice[l], h);
	return t;
}

static const double healthy[6] = { 1, 1, 0, 1, 1, 1 };

/* State s of a device: 0 healthy, 1 hot, 2 busy, then random. */
static void state(int s, uint64_t *seed, double *h)
{
	memcpy(h, healthy, sizeof(healthy));
	if (s == 1) {
		h[3] = 0;
		return;
	}
	if (s == 2) {
		h[0] = 0.4;
		return;
	}
	for (int i = 0; i < 6; i++)
		if (mi_pred_uniform(seed) < 0.5)
			h[i] = mi_pred_uniform(seed);
	if (mi_pred_uniform(seed) < 0.3)
		h[2] = 1 - h[2]; /* saturation: high is stressed */
}

static void dev_meta(const struct dev *d, const struct mi_switch *sw,
		     double *tab, const double *h, struct mi_meta_device *md)
{
	memset(md, 0, sizeof(*md));
	for (int l = 0; l < sw->nlayers; l++)
		for (int k = 0; k < sw->layers[l].nvar; k++)
			tab[l * MI_SWITCH_MAX_VARIANTS + k] =
				variant_us(d, &sw->layers[l], k, healthy);
	md->latency_us = tab;
	memcpy(md->health, h, sizeof(md->health));
	md->health_present = 0x3f;
}

struct opts {
	const char *model, *out;
	bool stored, beat;
	int devices, states, eval, trees, depth;
	uint64_t seed;
	double max_regret, max_miss, min_hot;
};

static int train(struct mi_model *m, const struct opts *o, char **text)
{
	const struct mi_switch *sw = m->sw;
	size_t rows = (size_t)o->devices * o->states * sw->nlayers *
		      MI_SWITCH_MAX_VARIANTS, r = 0;
	float *x = malloc(rows * MI_METACTL_NFEAT * sizeof(*x));
	float *y = malloc(rows * sizeof(*y));
	struct mi_gbrt_params gp = { .ntrees = o->trees, .depth = o->depth };
	struct mi_gbrt t;
	uint64_t seed = o->seed;
	double t0 = now_s(), t1;
	size_t len = 0;
	FILE *f;
	int err;

	if (!x || !y) {
		free(x);
		free(y);
		return -ENOMEM;
	}
	for (int i = 0; i < o->devices; i++) {
		struct dev d;
		double tab[NTAB], nom[NTAB], h[6];
		struct mi_meta_device md;

		dev_random(&d, &seed, i % 3 != 2);
		for (int s = 0; s < o->states; s++) {
			state(s, &seed, h);
			dev_meta(&d, sw, tab, h, &md);
			mi_meta_nominal(sw, &md, nom);
			for (int l = 0; l < sw->nlayers; l++) {
				const struct mi_switch_layer *L = &sw->layers[l];

				for (int k = 0; k < L->nvar; k++, r++) {
					mi_metactl_features(sw, nom, l, k, h,
						x + r * MI_METACTL_NFEAT);
					y[r] = log(variant_us(&d, L, k, h) /
						   nom[l * MI_SWITCH_MAX_VARIANTS + k]);
				}
			}
		}
	}
	t1 = now_s();
	err = mi_gbrt_fit(&t, x, y, (int)r, MI_METACTL_NFEAT, &gp);
	free(x);
	free(y);
	if (err)
		return err;
	printf("data: %d devices x %d states x %d layer variants = %zu rows in %.2f s; fit %d trees in %.2f s\n",
	       o->devices, o->states, (int)(r / o->devices / o->states),
	       r, t1 - t0, t.ntrees, now_s() - t1);
	f = open_memstream(text, &len);
	if (!f) {
		mi_gbrt_fini(&t);
		return -ENOMEM;
	}
	fprintf(f, "metactl 1 %d\n", MI_METACTL_NFEAT);
	err = mi_gbrt_write(&t, f);
	fclose(f);
	mi_gbrt_fini(&t);
	return err;
}

struct score {
	double regret_sum, regret_max, acc_sum, logerr, choose_s;
	int n, nb, miss, hot_ok, hot_n;
};

static int most_accurate(const struct mi_switch *sw, const double *lat,
			 double budget)
{
	int best = -1;

	for (int c = 0; c < sw->ncfg; c++) {
		if (budget > 0 && lat[c] > budget)
			continue;
		if (best < 0 || sw->cfg[c].accuracy > sw->cfg[best].accuracy ||
		    (sw->cfg[c].accuracy == sw->cfg[best].accuracy &&
		     lat[c] < lat[best]))
			best = c;
	}
	return best;
}

static void evaluate(struct mi_model *m, struct mi_metactl *ctl,
		     const struct opts *o, struct score *sc)
{
	struct mi_switch *sw = m->sw;
	uint64_t seed = o->seed ^ 0x9e3779b97f4a7c15ull;
	double *lat = calloc(sw->ncfg, sizeof(*lat));
	double *lat0 = calloc(sw->ncfg, sizeof(*lat0));

	memset(sc, 0, sizeof(*sc));
	sw->ctl = ctl;
	for (int i = 0; lat && lat0 && i < o->eval; i++) {
		struct dev d;
		double tab[NTAB], h[6], budget, t0;
		int top, chose_healthy = -1, err;

		dev_random(&d, &seed, i % 3 != 2);
		for (int c = 0; c < sw->ncfg; c++)
			lat0[c] = config_us(&d, sw, sw->cfg[c].choice, healthy);
		top = most_accurate(sw, lat0, 0);
		budget = 1.1 * lat0[top];
		for (int s = 0; s < o->states; s++) {
			struct mi_meta_device md;
			struct mi_meta_goal fast = { 0 };
			struct mi_meta_goal bud = { .latency_budget_us = budget };
			struct mi_meta_result r;
			int ch[MI_SWITCH_MAX_LAYERS], best = 0, orc;

			state(s, &seed, h);
			dev_meta(&d, sw, tab, h, &md);
			for (int c = 0; c < sw->ncfg; c++) {
				lat[c] = config_us(&d, sw, sw->cfg[c].choice, h);
				if (lat[c] < lat[best])
					best = c;
			}
			t0 = now_s();
			err = mi_meta_choose(m, &md, &fast, ch, &r);
			sc->choose_s += now_s() - t0;
			if (err)
				continue;
			sc->logerr += fabs(log(r.predicted_us / lat[r.config]));
			sc->regret_sum += lat[r.config] / lat[best] - 1;
			sc->regret_max = fmax(sc->regret_max,
					      lat[r.config] / lat[best] - 1);
			sc->n++;
			if (mi_meta_choose(m, &md, &bud, ch, &r))
				continue;
			orc = most_accurate(sw, lat, budget);
			if (s == 0)
				chose_healthy = r.config;
			if (s == 1 && chose_healthy >= 0 &&
			    lat[chose_healthy] > budget &&
			    lat[best] < lat[chose_healthy]) {
				/* hot: the healthy choice no longer fits and
				 * a cheaper one exists */
				sc->hot_n++;
				sc->hot_ok += lat[r.config] <
					      lat[chose_healthy];
			}
			if (orc < 0)
				continue;	/* nothing fits */
			sc->nb++;
			if (lat[r.config] > budget)
				sc->miss++;
			else
				sc->acc_sum += sw->cfg[orc].accuracy -
					       sw->cfg[r.config].accuracy;
		}
	}
	sw->ctl = NULL;
	free(lat);
	free(lat0);
}

static void print_score(const char *name, const struct score *s)
{
	printf("%-9s %.1f us per choice, |log error| %.3f; fastest: mean regret %5.1f %%, max %6.1f %% (%d states); budget: %4.1f %% missed, accuracy regret %.2f points (%d states); hot -> cheaper %d/%d\n",
	       name, 1e6 * s->choose_s / (s->n ? s->n : 1),
	       s->logerr / (s->n ? s->n : 1), 100 * s->regret_sum / (s->n ? s->n : 1),
	       100 * s->regret_max, s->n,
	       100.0 * s->miss / (s->nb ? s->nb : 1),
	       s->acc_sum / (s->nb - s->miss > 0 ? s->nb - s->miss : 1), s->nb,
	       s->hot_ok, s->hot_n);
}

int main(int argc, char **argv)
{
	struct opts o = { .devices = 300, .states = 24, .eval = 60,
			  .trees = 100, .depth = 6,
			  .seed = 1, .max_regret = -1, .max_miss = -1,
			  .min_hot = -1 };
	struct mi_model *m;
	struct score tr, fo;
	struct mi_metactl *ctl = NULL;
	char *text = NULL;
	int err, rc = 0;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (a[0] != '-') {
			o.model = a;
			continue;
		}
		if (!strcmp(a, "--stored")) {
			o.stored = true;
			continue;
		}
		if (!strcmp(a, "--beat-formula")) {
			o.beat = true;
			continue;
		}
		if (!v) {
			fprintf(stderr, "metactl: %s needs a value\n", a);
			return 2;
		}
		i++;
		if (!strcmp(a, "--out"))
			o.out = v;
		else if (!strcmp(a, "--devices"))
			o.devices = atoi(v);
		else if (!strcmp(a, "--trees"))
			o.trees = atoi(v);
		else if (!strcmp(a, "--depth"))
			o.depth = atoi(v);
		else if (!strcmp(a, "--states"))
			o.states = atoi(v);
		else if (!strcmp(a, "--eval"))
			o.eval = atoi(v);
		else if (!strcmp(a, "--seed"))
			o.seed = strtoull(v, NULL, 0);
		else if (!strcmp(a, "--max-regret"))
			o.max_regret = atof(v);
		else if (!strcmp(a, "--max-miss"))
			o.max_miss = atof(v);
		else if (!strcmp(a, "--min-hot"))
			o.min_hot = atof(v);
		else {
			fprintf(stderr, "metactl: unknown option %s\n", a);
			return 2;
		}
	}
	if (!o.model || o.devices < 3 || o.states < 3 || o.eval < 0 ||
	    o.trees < 1 || o.depth < 1 || o.depth > 12) {
		fprintf(stderr, "usage: metactl MODEL.onnx [--stored] [--out FILE] [--devices N>=3] [--states N>=3] [--trees N] [--depth 1..12] [--eval N] [--seed S] [--max-regret PCT] [--max-miss PCT] [--min-hot PCT] [--beat-formula]\n");
		return 2;
	}
	if (mi_model_load(o.model, NULL, &m)) {
		fprintf(stderr, "metactl: %s\n", mi_last_error());
		return 1;
	}
	if (!m->sw || !m->sw->ncfg) {
		fprintf(stderr, "metactl: %s: not a switchable model with configurations\n",
			o.model);
		mi_model_free(m);
		return 1;
	}
	for (int l = 0; l < m->sw->nlayers; l++)
		if (m->sw->layers[l].height <= 0 || m->sw->layers[l].width <= 0) {
			fprintf(stderr, "metactl: layer %s has no height/width in its metadata\n",
				m->sw->layers[l].name);
			mi_model_free(m);
			return 1;
		}
	if (o.stored) {
		if (!m->sw->ctl) {
			fprintf(stderr, "metactl: %s holds no trained controller\n",
				o.model);
			mi_model_free(m);
			return 1;
		}
		ctl = m->sw->ctl;
	} else {
		struct mi_switch tmp = { 0 };

		err = train(m, &o, &text);
		if (err) {
			fprintf(stderr, "metactl: training failed: %s\n",
				strerror(-err));
			mi_model_free(m);
			return 1;
		}
		if (o.out) {
			FILE *f = fopen(o.out, "w");

			if (!f || fputs(text, f) < 0 || fclose(f)) {
				fprintf(stderr, "metactl: cannot write %s\n",
					o.out);
				rc = 1;
			}
		}
		if (mi_metactl_set(&tmp, text)) {
			fprintf(stderr, "metactl: the written controller does not read back\n");
			rc = 1;
		}
		ctl = tmp.ctl;
	}
	/* evaluate() attaches the controller it scores; a stored one that
	 * was not asked for goes */
	if (m->sw->ctl != ctl)
		mi_metactl_free(m->sw->ctl);
	m->sw->ctl = NULL;
	if (o.eval > 0 && ctl) {
		evaluate(m, ctl, &o, &tr);
		evaluate(m, NULL, &o, &fo);
		printf("held out: %d devices x %d states\n", o.eval, o.states);
		print_score("trained", &tr);
		print_score("formula", &fo);
		if (o.max_regret >= 0 &&
		    100 * tr.regret_sum / (tr.n ? tr.n : 1) > o.max_regret) {
			printf("FAIL: trained mean regret above %.1f %%\n",
			       o.max_regret);
			rc = 1;
		}
		if (o.max_miss >= 0 &&
		    100.0 * tr.miss / (tr.nb ? tr.nb : 1) > o.max_miss) {
			printf("FAIL: trained budget misses above %.1f %%\n",
			       o.max_miss);
			rc = 1;
		}
		if (o.beat && (tr.regret_sum / (tr.n ? tr.n : 1) >
			       fo.regret_sum / (fo.n ? fo.n : 1) ||
			       (double)tr.miss / (tr.nb ? tr.nb : 1) >
			       (double)fo.miss / (fo.nb ? fo.nb : 1))) {
			printf("FAIL: the trained controller does worse than the formula\n");
			rc = 1;
		}
		if (o.min_hot >= 0 && 100.0 * tr.hot_ok < o.min_hot * tr.hot_n) {
			printf("FAIL: hot devices got a faster configuration in under %.0f %% of cases\n",
			       o.min_hot);
			rc = 1;
		}
	}
	mi_metactl_free(ctl);
	free(text);
	mi_model_free(m);
	return rc;
}
