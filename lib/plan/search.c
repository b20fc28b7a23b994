// SPDX-License-Identifier: MIT
/*
 * Plan search: beam search over the default plan's decision groups
 * (search-impl.h), then the best few plans and the default one applied
 * and measured; the fastest measured plan within the limits wins.
 *
 * Node times come from three places, best first: calibration sweeps (the
 * CPU: plan k moves every node to its k-th candidate at once, one profiled
 * run gives every node's time for that candidate), the default plan's own
 * profile, and the predictor (scaled per node by measured / predicted of
 * the default where both exist).  Device nodes are always predicted.
 *
 * Hardware intents in the model (intent.c) add a term per region and
 * limits of their own; with them a second beam over the regions' groups
 * adds candidates, and the measured plans are compared by their score.
 *
 * Determinism: groups, options and ties are taken in plan order; the
 * only random draw is the inputs of the verification runs (opts->seed).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "cpu/cpu.h"
#include "plan/plan-impl.h"
#include "plan/place-impl.h"
#include "plan/search-impl.h"
#include "plan/search-state.h"
#include "predict/predict.h"

/* Measured gain a plan needs over the default to replace it. */
#define MI_SEARCH_MARGIN 0.02
/* States the region-only search adds (region_search) */
#define MI_SEARCH_REGION_TOP 2
/* Score per unit of an intent limit a beam state is off by */
#define MI_SEARCH_PENALTY 1e6

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static double elapsed(struct search *s)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - s->t0.tv_sec) + (t.tv_nsec - s->t0.tv_nsec) * 1e-9;
}

int mi_search_parse_weights(const char *str, double w[3])
{
	char *end;
	double v[3];

	for (int i = 0; i < 3; i++) {
		v[i] = strtod(str, &end);
		if (end == str || !isfinite(v[i]) || v[i] < 0)
			return -EINVAL;
		if (i < 2 && *end != ',')
			return -EINVAL;
		str = end + 1;
	}
	if (*end || v[0] + v[1] + v[2] <= 0)
		return -EINVAL;
	memcpy(w, v, sizeof(v));
	return 0;
}

int mi_search_pos_of(const struct mi_pred_graph *pg, const char *name)
{
	for (int k = 0; k < pg->n; k++)
		if (!strcmp(pg->v[k].name, name))
			return k;
	return -1;
}

static int isa_cap(const char *isa)
{
	if (!isa)
		return 0;
	if (!strcmp(isa, "generic"))
		return MI_ISA_CAP_GENERIC;
	if (!strncmp(isa, "avx512", 6))
		return MI_ISA_CAP_AVX512;
	if (!strncmp(isa, "avx2", 4))
		return MI_ISA_CAP_AVX2;
	return 0;
}

static void setup_devs(struct search *s)
{
	struct mi_place *pl = s->m->place;
	struct mi_plan_info pi;

	mi_plan_info(s->def, &pi);
	s->ndevs = pl ? pl->ndevs : 1;
	if (s->ndevs > MI_PRED_MAXDEV)
		s->ndevs = MI_PRED_MAXDEV;
	for (int d = 0; d < s->ndevs; d++) {
		struct mi_pred_dev *v = &s->devs[d];
		const struct mi_pred_dev *k;

		if (d == 0) {
			mi_pred_cpu_dev(v, isa_cap(pi.isa), pi.threads);
			s->names[0] = "cpu";
		} else {
			const struct mi_dev_caps *c = &pl->devs[d]->caps;

			memset(v, 0, sizeof(*v));
			snprintf(v->name, sizeof(v->name), "%s",
				 pl->devs[d]->name);
			v->caps.macs_per_s = (double)c->macs_per_cycle *
					     c->clock_khz * 1e3;
			v->caps.bytes_per_s = (double)c->dma_bw;
			v->caps.link_bytes_per_s = (double)c->dma_bw;
			v->caps.launch_ns = 5000; /* as metainfer predict */
			s->names[d] = pl->devs[d]->name;
		}
		k = s->pred ? mi_pred_dev_find((struct mi_predictor *)s->pred,
					       v->name, false) : NULL;
		if (k)
			*v = *k;
		s->dp[d] = v;
	}
}

int mi_search_slot_of(const struct search *s, const char *dev)
{
	for (int d = 0; d < s->ndevs; d++)
		if (!strcmp(s->names[d], dev))
			return d;
	return 0;
}

static struct sgroup *group_add(struct search *s)
{
	struct sgroup *ng = realloc(s->g, (s->ng + 1) * sizeof(*ng));

	if (!ng)
		return NULL;
	s->g = ng;
	memset(&ng[s->ng], 0, sizeof(*ng));
	return &ng[s->ng++];
}

static bool same_fused(const struct mi_plan_candidate *c,
		       const struct mi_plan_entry *e)
{
	if (c->nfused != e->nfused)
		return false;
	for (int f = 0; f < c->nfused; f++) {
		bool hit = false;

		for (int j = 0; j < e->nfused && !hit; j++)
			hit = !strcmp(c->fused[f], e->fused[j]);
		if (!hit)
			return false;
	}
	return true;
}

/* A node's predicted time with another variant / precision, scaled by
 * what the default's measurement says of the predictor on this node. */
static double pred_variant_ns(struct search *s, int k, const char *variant,
			      bool int8)
{
	struct mi_pred_node n = s->pg.v[k].node;

	n.variant = mi_pred_variant((struct mi_predictor *)s->pred, variant,
				    false);
	n.int8 = int8;
	return mi_pred_node_ns(s->pred, &n, s->dp[0]) * s->scale[k];
}

static int variant_groups(struct search *s)
{
	for (int e = 0; e < s->def->n; e++) {
		const struct mi_plan_entry *pe = &s->def->e[e];
		const struct mi_plan_candidate *c;
		struct sgroup *g;
		int nc = mi_plan_candidates(s->m, pe->name, &c), k;

		k = mi_search_pos_of(&s->pg, pe->name);
		if (nc < 2 || k < 0 || strcmp(pe->device, "cpu"))
			continue;
		g = group_add(s);
		if (!g)
			return -ENOMEM;
		g->entry = strdup(pe->name);
		g->nmem = 1;
		g->pos = malloc(sizeof(int));
		g->opt = calloc(nc + 1, sizeof(*g->opt));
		if (!g->entry || !g->pos || !g->opt)
			return -ENOMEM;
		g->pos[0] = k;
		g->nfused = pe->nfused;
		g->fused = pe->fused;	/* the default plan's, lives as long */
		/* option 0: what the default runs */
		g->opt[0].variant = strdup(pe->variant);
		g->opt[0].lay = strdup(pe->lay_out ? pe->lay_out : "auto");
		g->opt[0].lay_in = strdup(pe->lay_in ? pe->lay_in : "auto");
		g->opt[0].int8 = s->pg.v[k].node.int8;
		g->nopt = 1;
		for (int i = 0; i < nc; i++) {
			struct sopt *op;
			bool nchw;

			/* the reference op is the fallback, never faster:
			 * not searched unless the default runs it */
			if (c[i].is_current || !strcmp(c[i].variant, pe->variant) ||
			    !strcmp(c[i].variant, "ref") || !same_fused(&c[i], pe))
				continue;
			op = &g->opt[g->nopt++];
			op->variant = strdup(c[i].variant);
			/* the NCHW registry's variants read and write NCHW
			 * (the candidate names the node's layout now) */
			nchw = mi_plan_variant_prov(pe->op, c[i].variant) ==
			       MI_PROV_NCHW;
			op->lay = strdup(nchw ? "NCHW" : c[i].layout_out ?
				       c[i].layout_out : "auto");
			op->lay_in = strdup(nchw ? "NCHW" : c[i].layout_in ?
					  c[i].layout_in : "auto");
			op->int8 = c[i].precision &&
				   !strcmp(c[i].precision, "int8");
		}
		for (int i = 0; i < g->nopt; i++) {
			struct mi_pred_node nd = s->pg.v[k].node;

			g->opt[i].ns = malloc(sizeof(double));
			if (!g->opt[i].variant || !g->opt[i].ns ||
			    !g->opt[i].lay || !g->opt[i].lay_in)
				return -ENOMEM;
			nd.int8 = g->opt[i].int8;
			g->opt[i].ws = mi_pred_variant_ws(&nd, g->opt[i].variant);
			g->opt[i].ns[0] = i ? pred_variant_ns(s, k,
						g->opt[i].variant,
						g->opt[i].int8) :
					      s->base_ns[k];
		}
		if (g->nopt < 2) {
			/* only fusion-changing alternatives: not searched */
			for (int i = 0; i < g->nopt; i++) {
				free(g->opt[i].variant);
				free(g->opt[i].lay);
				free(g->opt[i].lay_in);
				free(g->opt[i].ns);
			}
			free(g->opt);
			free(g->pos);
			free(g->entry);
			s->ng--;
			continue;
		}
		s->r->nvar++;
	}
	return 0;
}

static int device_groups(struct search *s)
{
	struct mi_place *pl = s->m->place;
	const struct mi_lowering *lw = mi_place_lowering();
	struct mi_graph *gr = &s->m->g;
	struct mi_plan_rb rb;
	int err;

	if (!pl || s->ndevs < 2 || !pl->nunits || !lw)
		return 0;
	err = mi_plan_rb_init(&rb, s->m);
	if (err)
		return err;
	for (int u = 0; u < pl->nunits; u++) {
		const struct mi_qunit *q = &pl->units[u];
		int cur = pl->unit_slot ? pl->unit_slot[u] : 0;
		struct sgroup *g = group_add(s);
		char why[160];

		err = -ENOMEM;
		if (!g)
			goto out;
		g->dev = true;
		g->pos = calloc(q->nmembers, sizeof(int));
		g->names = calloc(q->nmembers, sizeof(char *));
		g->opt = calloc(s->ndevs, sizeof(*g->opt));
		if (!g->pos || !g->names || !g->opt)
			goto out;
		for (int i = 0; i < q->nmembers; i++) {
			int ni = q->members[i];
			int k = mi_search_pos_of(&s->pg, rb.labels[ni]);

			/* members fused into another entry move with it */
			if (k < 0 || !mi_plan_find(s->def, rb.labels[ni]))
				continue;
			g->pos[g->nmem] = k;
			g->names[g->nmem++] = strdup(rb.labels[ni]);
			if (!g->names[g->nmem - 1])
				goto out;
		}
		for (int d = -1; d < s->ndevs; d++) {
			int slot = d < 0 ? cur : d;
			struct sopt *op;

			if (d == cur)
				continue;
			if (slot > 0 && !lw->supported(gr, q, &pl->devs[slot]->caps,
						       why, sizeof(why))) {
				s->r->pruned++; /* unsupported op: never scored */
				continue;
			}
			op = &g->opt[g->nopt++];
			op->slot = slot;
			op->int8 = true;
			op->ns = malloc((g->nmem + 1) * sizeof(double));
			if (!op->ns)
				goto out;
			for (int i = 0; i < g->nmem; i++)
				op->ns[i] = slot ? -1 : s->cpu_int8_ns[g->pos[i]];
		}
		if (g->nopt < 2 || !g->nmem) {
			for (int i = 0; i < g->nopt; i++)
				free(g->opt[i].ns);
			free(g->opt);
			free(g->pos);
			for (int i = 0; i < g->nmem; i++)
				free(g->names[i]);
			free(g->names);
			s->ng--;
			continue;
		}
		s->r->ndev++;
	}
	err = 0;
out:
	mi_plan_rb_fini(&rb);
	return err;
}

static uint64_t state_hash(const int *c, int n)
{
	uint64_t h = 1469598103934665603ull;

	for (int i = 0; i < n; i++)
		h = (h ^ (uint64_t)(c[i] + 1)) * 1099511628211ull;
	return h;
}

/* True when the state was seen before (and records it). */
static bool seen(struct search *s, uint64_t h)
{
	for (size_t i = 0; i < s->nseen; i++)
		if (s->seen[i] == h)
			return true;
	if (s->nseen == s->capseen) {
		size_t nc = s->capseen ? s->capseen * 2 : 256;
		uint64_t *n = realloc(s->seen, nc * sizeof(*n));

		if (!n)
			return false;
		s->seen = n;
		s->capseen = nc;
	}
	s->seen[s->nseen++] = h;
	return false;
}

/*
 * Predict one state.  Returns false when a hard limit removes it (the
 * reason in why when given).  The score is set either way.
 */
static bool evaluate(struct search *s, const int *choice,
		     struct mi_search_cand *c, char *why, size_t wlen)
{
	struct mi_pred_graph *pg = &s->pg;
	const struct mi_intents *iv = &s->r->intents;
	struct mi_pred_result res;
	double mem = 0, i8 = 0, score, imean[MI_SEARCH_MAXINTENT];
	const double *w = s->o->w;

	for (int k = 0; k < pg->n; k++) {
		s->ns[k] = s->base_ns[k];
		s->int8[k] = pg->v[k].node.int8;
		pg->v[k].device = s->devname0[k];
		s->ws[k] = s->base_ws[k];
		s->lay[k] = s->base_lay[k];
		s->lay_in[k] = s->base_lay_in[k];
	}
	for (int gi = 0; gi < s->ng; gi++) {
		const struct sgroup *g = &s->g[gi];
		const struct sopt *op = &g->opt[choice[gi]];

		if (!choice[gi])
			continue;
		for (int i = 0; i < g->nmem; i++) {
			int k = g->pos[i];

			if (g->dev) {
				pg->v[k].device = (char *)s->names[op->slot];
				s->ns[k] = op->ns[i];
				s->ws[k] = 0;
			} else if (!strcmp(pg->v[k].device, "cpu")) {
				s->ns[k] = op->ns[i];
				s->ws[k] = op->ws;
				s->lay[k] = op->lay;
				s->lay_in[k] = op->lay_in;
			}
			s->int8[k] = op->int8;
		}
	}
	s->penalty = INFINITY;
	if (mi_pred_plan_ns(s->pred, pg, s->dp, s->names, s->ndevs, s->ns,
			    &res))
		return false;
	for (int k = 0; k < pg->n; k++)
		if (s->int8[k])
			i8 += pg->v[k].node.macs;
	for (int d = 0; d < res.ndevs; d++)
		mem += res.peak_bytes[d] + res.weight_bytes[d];
	c->pred_ns = res.total_ns;
	c->pred_mem = mem;
	c->pred_loss = s->int8_macs > 0 ? s->loss0 * i8 / s->int8_macs : 0;
	if (iv->n && mi_pred_plan_live(pg, s->names, s->ndevs, s->live))
		return false;
	for (int i = 0; i < iv->n; i++)
		c->ival[i] = mi_search_region_value(s, i, &imean[i]);
	if (s->L0 <= 0) { /* the default itself: the normalizers */
		memcpy(s->ival0, c->ival, sizeof(s->ival0));
		memcpy(s->imean0, imean, sizeof(s->imean0));
		c->score = 0;
	} else {
		score = w[0] * c->pred_ns / s->L0 +
			w[1] * (s->M0 > 0 ? c->pred_mem / s->M0 : 0) +
			w[2] * c->pred_loss / 0.01;
		/* a region's memory: half its peak, half its mean over
		 * the region's steps, so that a change which lowers the
		 * bytes in use but not yet the peak still counts (the
		 * peak usually needs several nodes changed together) */
		for (int i = 0; i < iv->n; i++) {
			double x = s->ival0[i] > 0 ? c->ival[i] / s->ival0[i] : 0;

			if (iv->v[i].kind == MI_INTENT_MEMORY_CONSTRAINED &&
			    s->imean0[i] > 0)
				x = (x + imean[i] / s->imean0[i]) / 2;
			score += iv->v[i].weight * x;
		}
		c->score = score;
	}
	for (int d = 0; d < res.ndevs; d++) {
		double dm = res.peak_bytes[d] + res.weight_bytes[d];

		if (s->o->max_mem > 0 && dm > s->o->max_mem) {
			if (why)
				snprintf(why, wlen,
					 "%s needs %.4g MiB, more than --max-mem %.4g MiB",
					 res.dev_name[d], dm / 1048576.0,
					 s->o->max_mem / 1048576.0);
			return false;
		}
	}
	if (s->o->min_cosine > 0 && 1 - c->pred_loss < s->o->min_cosine) {
		if (why)
			snprintf(why, wlen,
				 "predicted cosine %.4f is below --min-cosine %.4f",
				 1 - c->pred_loss, s->o->min_cosine);
		return false;
	}
	s->penalty = 0;
	return iv->n ? mi_search_intent_limits(s, c, why, wlen) : true;
}

/* ---- measuring ------------------------------------------------------ */

static int make_inputs(struct search *s)
{
	uint64_t seed = s->o->seed ? s->o->seed : 1;

	s->nin = mi_model_input_count(s->m);
	s->in = calloc(s->nin + 1, sizeof(*s->in));
	if (!s->in)
		return -ENOMEM;
	for (int i = 0; i < s->nin; i++) {
		struct mi_tensor_info ti;
		size_t n = 1, es;

		mi_model_input_info(s->m, i, &ti);
		s->in[i].name = ti.name;
		s->in[i].dtype = ti.dtype;
		s->in[i].ndim = ti.ndim < 0 ? 0 : ti.ndim;
		for (int d = 0; d < s->in[i].ndim; d++) {
			s->in[i].dims[d] = ti.dims[d] > 0 ? ti.dims[d] : 1;
			n *= s->in[i].dims[d];
		}
		es = mi_dtype_size(ti.dtype);
		if (!es)
			return mi_set_error(-EINVAL, "%s: input '%s' has a type the search cannot fill",
					    s->m->label, ti.name);
		s->in[i].data = calloc(n + 1, es);
		s->in[i].nbytes = n * es;
		if (!s->in[i].data)
			return -ENOMEM;
		if (ti.dtype == MI_DT_FLOAT)
			for (size_t j = 0; j < n; j++)
				((float *)s->in[i].data)[j] =
					(float)(2 * mi_pred_uniform(&seed) - 1);
	}
	return 0;
}

/* Run once; outputs into out[] (float, copied) when given. */
static int run_once(struct search *s, struct mi_model *m, float **out,
		    size_t *outn)
{
	int no = mi_model_output_count(m), err;
	struct mi_value *ov = calloc(no + 1, sizeof(*ov));

	if (!ov)
		return -ENOMEM;
	err = mi_model_run(m, s->in, s->nin, ov, no);
	for (int i = 0; !err && out && i < no; i++) {
		size_t n = ov[i].dtype == MI_DT_FLOAT ?
				   ov[i].nbytes / sizeof(float) : 0;

		free(out[i]);
		out[i] = malloc((n + 1) * sizeof(float));
		if (!out[i]) {
			err = -ENOMEM;
			break;
		}
		memcpy(out[i], ov[i].data, n * sizeof(float));
		outn[i] = n;
	}
	free(ov);
	return err;
}

static double cosine(struct search *s, float **out, size_t *outn)
{
	double dot = 0, a = 0, b = 0;

	for (int i = 0; i < s->nout; i++) {
		size_t n = outn[i] < s->refn[i] ? outn[i] : s->refn[i];

		for (size_t j = 0; j < n; j++) {
			dot += (double)out[i][j] * s->ref[i][j];
			a += (double)out[i][j] * out[i][j];
			b += (double)s->ref[i][j] * s->ref[i][j];
		}
	}
	if (a == 0 && b == 0)
		return 1;
	return a > 0 && b > 0 ? dot / sqrt(a * b) : 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* One timed run: the wall time on the CPU; with accelerators the sum of
 * every device's busy time (the CPU's: wall outside device steps). */
static int timed_run(struct search *s, double *ns)
{
	int nd = mi_model_device_count(s->m), err;
	double t;

	if (nd > 1)
		mi_model_device_stats_reset(s->m);
	t = now_s();
	err = run_once(s, s->m, NULL, NULL);
	t = now_s() - t;
	if (err)
		return err;
	*ns = t * 1e9;
	if (nd > 1) {
		*ns = 0;
		for (int d = 0; d < nd; d++) {
			struct mi_device_stats st;

			if (!mi_model_device_stats(s->m, d, &st))
				*ns += (double)st.busy_ns;
		}
	}
	return 0;
}

/* The plan of a state: the default with its choices. */
static int state_plan(struct search *s, const int *choice,
		      struct mi_plan **planp)
{
	struct mi_plan *p;
	int err = mi_plan_dup(s->def, &p);

	if (err)
		return err;
	/* layouts follow from the variants: a neighbour's fixed layout
	 * would make a changed node's plan unrealizable */
	for (int k = 0; k < p->n && !err; k++) {
		char *li = strdup("auto"), *lo = strdup("auto");

		if (!li || !lo) {
			free(li);
			free(lo);
			err = -ENOMEM;
			break;
		}
		free(p->e[k].lay_in);
		free(p->e[k].lay_out);
		p->e[k].lay_in = li;
		p->e[k].lay_out = lo;
	}
	for (int gi = 0; gi < s->ng && !err; gi++) {
		const struct sgroup *g = &s->g[gi];
		const struct sopt *op = &g->opt[choice[gi]];

		if (!choice[gi])
			continue;
		if (!g->dev) {
			err = mi_plan_set(p, g->entry, op->variant,
					  (const char *const *)g->fused,
					  g->nfused);
			continue;
		}
		for (int i = 0; i < g->nmem && !err; i++) {
			struct mi_plan_entry *e = mi_plan_find(p, g->names[i]);
			char *d = strdup(s->names[op->slot]);

			if (!e || !d) {
				free(d);
				err = -ENOMEM;
				break;
			}
			free(e->device);
			e->device = d;
		}
	}
	if (err) {
		mi_plan_free(p);
		return err;
	}
	*planp = p;
	return 0;
}

static void progress(struct search *s, const char *what, int i, int n)
{
	if (!s->o->progress)
		return;
	fprintf(s->o->progress, "\rtune: %-10s %3d/%-3d %6.1f s", what, i, n,
		elapsed(s));
	fflush(s->o->progress);
}

/* Measure candidate c (apply, warm up, median of runs, cosine). */
static int verify(struct search *s, struct mi_search_cand *c, bool is_default)
{
	struct mi_plan *p = NULL;
	double *t, t0;
	float **out = calloc(s->nout + 1, sizeof(*out));
	size_t *outn = calloc(s->nout + 1, sizeof(*outn));
	int runs = s->o->runs > 0 ? s->o->runs : 5;
	int warm = s->o->warmup > 0 ? s->o->warmup : 1, err;

	t = calloc(runs, sizeof(*t));
	err = !out || !outn || !t ? -ENOMEM : state_plan(s, c->choice, &p);
	if (err)
		goto out;
	/* the default plan is what the default rules make, not its
	 * read-back applied as pins */
	t0 = now_s();
	err = is_default ? mi_model_plan_reset(s->m) :
			   mi_model_plan_apply(s->m, p);
	s->r->compile_s += now_s() - t0;
	if (err) {
		snprintf(c->why, sizeof(c->why), "%s", mi_last_error());
		s->r->rejected++;
		err = 0;
		goto out;
	}
	c->applied = true;
	t0 = now_s();
	err = run_once(s, s->m, out, outn);
	for (int i = 1; !err && i < warm; i++)
		err = run_once(s, s->m, NULL, NULL);
	for (int i = 0; !err && i < runs; i++)
		err = timed_run(s, &t[i]);
	s->r->run_s += now_s() - t0;
	if (err) {
		snprintf(c->why, sizeof(c->why), "run failed: %s",
			 mi_last_error());
		err = 0;
		goto out;
	}
	qsort(t, runs, sizeof(*t), cmp_double);
	c->meas_ns = runs & 1 ? t[runs / 2] :
				(t[runs / 2 - 1] + t[runs / 2]) / 2;
	c->cosine = cosine(s, out, outn);
	c->measured = true;
	c->feasible = true;
	if (s->o->min_cosine > 0 && c->cosine < s->o->min_cosine) {
		c->feasible = false;
		snprintf(c->why, sizeof(c->why),
			 "measured cosine %.4f is below --min-cosine %.4f",
			 c->cosine, s->o->min_cosine);
	}
	if ((s->o->max_mem > 0 && c->pred_mem > 0) || s->r->intents.n) {
		struct mi_search_cand tmp = *c;
		char why[160] = "";

		if (!evaluate(s, c->choice, &tmp, why, sizeof(why)) && why[0]) {
			c->feasible = false;
			snprintf(c->why, sizeof(c->why), "%s", why);
		}
	}
out:
	for (int i = 0; out && i < s->nout; i++)
		free(out[i]);
	free(out);
	free(outn);
	free(t);
	mi_plan_free(p);
	return err;
}

/* ---- calibration: measured CPU node times --------------------------- */

static void profile_into(struct search *s, double *ns)
{
	for (int k = 0; k < s->pg.n && k < s->m->g.norder; k++) {
		uint64_t v = 0;

		mi_model_profile_min(s->m, k, &v);
		ns[k] = v ? (double)v : -1;
	}
}

static int profiled_runs(struct search *s)
{
	int err = 0;

	mi_model_profile_reset(s->m);
	for (int i = 0; i < 3 && !err; i++)	/* warm-up, then two timed */
		err = run_once(s, s->m, NULL, NULL);
	return err;
}

/*
 * Sweep r applies the default with the variant groups in use[] at their
 * option r and reads the per-node profile: one run measures all their
 * r-th candidates.  A sweep the apply step rejects (a choice that makes a
 * neighbour's variant unrealizable) is split in halves, three times at
 * most; what is still rejected stays predicted.
 */
static int sweep(struct search *s, int r, const unsigned char *use, int depth,
		 double *tmp)
{
	int *choice = calloc(s->ng + 1, sizeof(int)), n = 0, err = 0;
	struct mi_plan *p = NULL;

	if (!choice)
		return -ENOMEM;
	for (int gi = 0; gi < s->ng; gi++)
		if (use[gi]) {
			choice[gi] = r;
			n++;
		}
	if (!n || (s->o->budget_s > 0 && elapsed(s) > s->o->budget_s / 3))
		goto out;
	err = state_plan(s, choice, &p);
	if (err)
		goto out;
	if (mi_model_plan_apply(s->m, p) || profiled_runs(s)) {
		unsigned char *half;
		int k = 0;

		s->r->rejected++;
		if (depth >= 3 || n < 2)
			goto out;
		half = calloc(s->ng + 1, 1);
		if (!half) {
			err = -ENOMEM;
			goto out;
		}
		for (int gi = 0; gi < s->ng; gi++)
			if (use[gi])
				half[gi] = k++ < n / 2;
		err = sweep(s, r, half, depth + 1, tmp);
		for (int gi = 0; gi < s->ng; gi++)
			half[gi] = use[gi] && !half[gi];
		if (!err)
			err = sweep(s, r, half, depth + 1, tmp);
		free(half);
		goto out;
	}
	profile_into(s, tmp);
	for (int gi = 0; gi < s->ng; gi++) {
		struct sgroup *g = &s->g[gi];

		if (use[gi] && tmp[g->pos[0]] > 0) {
			g->opt[r].ns[0] = tmp[g->pos[0]];
			g->opt[r].measured = true;
		}
	}
out:
	mi_plan_free(p);
	free(choice);
	return err;
}

static int calibrate(struct search *s, double *tmp)
{
	int maxopt = 0, sweeps, err = 0;
	double t0 = now_s();
	unsigned char *use = calloc(s->ng + 1, 1);

	if (!use)
		return -ENOMEM;
	for (int gi = 0; gi < s->ng; gi++)
		if (!s->g[gi].dev && s->g[gi].nopt > maxopt)
			maxopt = s->g[gi].nopt;
	sweeps = s->o->calib > 0 && s->o->calib < maxopt - 1 ? s->o->calib :
							       maxopt - 1;
	for (int r = 1; r <= sweeps && !err; r++) {
		progress(s, "calibrate", r, sweeps);
		for (int gi = 0; gi < s->ng; gi++)
			use[gi] = !s->g[gi].dev && s->g[gi].nopt > r;
		err = sweep(s, r, use, 0, tmp);
	}
	free(use);
	s->r->calib_s = now_s() - t0;
	if (err)
		return err;
	return mi_model_plan_reset(s->m);
}

/* ---- the search ----------------------------------------------------- */

struct bstate {
	int *c;
	double score;
};

static int cmp_state(const void *a, const void *b)
{
	const struct bstate *x = a, *y = b;

	return x->score < y->score ? -1 : x->score > y->score;
}

/* Keep the top list (distinct states, by score) at most n long. */
static void top_insert(struct bstate *top, int *ntop, int n, const int *c,
		       double score, int ng)
{
	int i = *ntop;

	if (i == n && top[n - 1].score <= score)
		return;
	if (i == n)
		i--;
	else
		(*ntop)++;
	while (i > 0 && top[i - 1].score > score) {
		memcpy(top[i].c, top[i - 1].c, ng * sizeof(int));
		top[i].score = top[i - 1].score;
		i--;
	}
	memcpy(top[i].c, c, ng * sizeof(int));
	top[i].score = score;
}

static struct bstate *states_new(int n, int ng)
{
	struct bstate *b = calloc(n + 1, sizeof(*b));

	for (int i = 0; b && i < n; i++) {
		b[i].c = calloc(ng + 1, sizeof(int));
		if (!b[i].c) {
			while (i--)
				free(b[i].c);
			free(b);
			return NULL;
		}
	}
	return b;
}

static void states_free(struct bstate *b, int n)
{
	for (int i = 0; b && i < n; i++)
		free(b[i].c);
	free(b);
}

/* only: the groups searched (NULL: all; the others stay at 0). */
static int beam_search(struct search *s, struct bstate *top, int *ntop,
		       int ktop, const unsigned char *only)
{
	int bw = s->o->beam > 0 ? s->o->beam : 8, nb = 1, maxopt = 1;
	struct bstate *beam, *next;
	int cap, err = -ENOMEM;

	for (int gi = 0; gi < s->ng; gi++)
		if (s->g[gi].nopt > maxopt)
			maxopt = s->g[gi].nopt;
	cap = bw * maxopt;
	beam = states_new(bw, s->ng);
	next = states_new(cap, s->ng);
	if (!beam || !next)
		goto out;
	beam[0].score = s->score0 + (s->def_ok ? 0 :
				     MI_SEARCH_PENALTY * s->penalty0);
	seen(s, state_hash(beam[0].c, s->ng));
	for (int gi = 0; gi < s->ng; gi++) {
		int nn = 0;

		if (s->o->budget_s > 0 && elapsed(s) > s->o->budget_s / 2)
			break;
		if (only && !only[gi])
			continue;
		if (gi % 8 == 0)
			progress(s, "search", gi, s->ng);
		for (int b = 0; b < nb; b++) {
			for (int o = 0; o < s->g[gi].nopt; o++) {
				struct mi_search_cand c = { 0 };
				int *st = next[nn].c;

				memcpy(st, beam[b].c, s->ng * sizeof(int));
				st[gi] = o;
				if (o == beam[b].c[gi]) {
					next[nn++].score = beam[b].score;
					continue;
				}
				if (seen(s, state_hash(st, s->ng)))
					continue;
				s->r->evaluated++;
				if (!evaluate(s, st, &c, NULL, 0)) {
					s->r->pruned++;
					/* an intent's limit may need several
					 * nodes changed together: the state
					 * stays in the beam, behind every state
					 * within the limits, never a candidate */
					if (isfinite(s->penalty))
						next[nn++].score = c.score +
							MI_SEARCH_PENALTY * s->penalty;
					continue;
				}
				next[nn++].score = c.score;
				/* only plans predicted better than the default
				 * are worth measuring (any, when the default
				 * breaks an intent's limit) */
				if (c.score < s->score0 - 1e-9 || !s->def_ok)
					top_insert(top, ntop, ktop, st, c.score,
						   s->ng);
			}
		}
		qsort(next, nn, sizeof(*next), cmp_state);
		nb = nn < bw ? nn : bw;
		for (int b = 0; b < nb; b++) {
			memcpy(beam[b].c, next[b].c, s->ng * sizeof(int));
			beam[b].score = next[b].score;
		}
		if (!nb)
			break;
	}
	err = 0;
out:
	states_free(beam, bw);
	states_free(next, cap);
	return err;
}

/*
 * With intents, a second beam over the groups of the intents' regions
 * only (the others at the default's choice) adds its best few states:
 * a plan that changes only the region is the intent's direct answer, and
 * the first beam's top list may hold only states that also change other
 * nodes (which the apply step may reject).
 */
static int region_search(struct search *s, struct bstate **top2, int *ntop2)
{
	unsigned char *only = calloc(s->ng + 1, 1);
	int n = 0, err;

	if (!only)
		return -ENOMEM;
	for (int gi = 0; gi < s->ng; gi++)
		for (int i = 0; i < s->g[gi].nmem && !only[gi]; i++)
			for (int k = 0; k < s->r->intents.n && !only[gi]; k++)
				only[gi] = s->region[k][s->g[gi].pos[i]];
	for (int gi = 0; gi < s->ng; gi++)
		n += only[gi];
	err = n && n < s->ng ? 0 : 1;	/* none, or the first beam again */
	if (!err) {
		*top2 = states_new(MI_SEARCH_REGION_TOP, s->ng);
		err = *top2 ? 0 : -ENOMEM;
	}
	if (!err) {
		s->nseen = 0;	/* its states may have been seen, not kept */
		err = beam_search(s, *top2, ntop2, MI_SEARCH_REGION_TOP, only);
	}
	free(only);
	return err > 0 ? 0 : err;
}

static void search_fini(struct search *s)
{
	for (int gi = 0; gi < s->ng; gi++) {
		struct sgroup *g = &s->g[gi];

		for (int i = 0; i < g->nopt; i++) {
			free(g->opt[i].variant);
			free(g->opt[i].lay);
			free(g->opt[i].lay_in);
			free(g->opt[i].ns);
		}
		free(g->opt);
		free(g->pos);
		free(g->entry);
		for (int i = 0; g->names && i < g->nmem; i++)
			free(g->names[i]);
		free(g->names);
	}
	free(s->g);
	if (s->devname0)
		for (int k = 0; k < s->pg.n; k++)
			s->pg.v[k].device = s->devname0[k];
	free(s->devname0);
	mi_pred_graph_fini(&s->pg);
	mi_plan_free(s->def);
	free(s->base_ns);
	free(s->scale);
	free(s->cpu_int8_ns);
	free(s->ns);
	free(s->int8);
	for (int i = 0; s->in && i < s->nin; i++)
		free(s->in[i].data);
	free(s->in);
	for (int i = 0; s->ref && i < s->nout; i++)
		free(s->ref[i]);
	free(s->ref);
	free(s->refn);
	free(s->seen);
	for (int i = 0; i < MI_SEARCH_MAXINTENT; i++)
		free(s->region[i]);
	free(s->prec);
	free(s->prec_from);
	free(s->pref);
	free(s->pref_from);
	free(s->base_ws);
	free(s->ws);
	free(s->base_lay);
	free(s->lay);
	free(s->base_lay_in);
	free(s->lay_in);
	free(s->live);
	mi_pred_fini(&s->own);
}

void mi_search_result_fini(struct mi_search_result *r)
{
	for (int i = 0; i < r->ncand; i++)
		free(r->cand[i].choice);
	free(r->cand);
	mi_plan_free(r->plan);
	mi_intents_fini(&r->intents);
	memset(r, 0, sizeof(*r));
}

/* Default node times: profile where there is one, the predictor else;
 * the per-node scale carries measured / predicted to the alternatives. */
static int base_times(struct search *s)
{
	struct mi_pred_graph *pg = &s->pg;
	int n = pg->n;
	double sum_m = 0, sum_p = 0;

	s->base_ns = malloc((n + 1) * sizeof(double));
	s->scale = malloc((n + 1) * sizeof(double));
	s->cpu_int8_ns = malloc((n + 1) * sizeof(double));
	s->ns = malloc((n + 1) * sizeof(double));
	s->int8 = malloc((n + 1) * sizeof(bool));
	s->devname0 = malloc((n + 1) * sizeof(char *));
	if (!s->base_ns || !s->scale || !s->cpu_int8_ns || !s->ns ||
	    !s->int8 || !s->devname0)
		return -ENOMEM;
	for (int k = 0; k < n; k++)
		s->devname0[k] = pg->v[k].device;
	if ((s->m->opts.flags & MI_MODEL_PROFILE) && s->o->calib >= 0) {
		int err = profiled_runs(s);

		if (err)
			return err;
		profile_into(s, s->base_ns);
	} else {
		for (int k = 0; k < n; k++)
			s->base_ns[k] = -1;
	}
	for (int k = 0; k < n; k++) {
		bool cpu = !strcmp(pg->v[k].device, "cpu");
		double p = mi_pred_node_ns(s->pred, &pg->v[k].node, s->dp[0]);

		if (!cpu)
			s->base_ns[k] = -1;
		s->scale[k] = 1;
		if (cpu && s->base_ns[k] > 0 && p > 0) {
			s->scale[k] = s->base_ns[k] / p;
			sum_m += s->base_ns[k];
			sum_p += p;
		}
		if (pg->v[k].node.int8)
			s->int8_macs += pg->v[k].node.macs;
	}
	/* nodes with no measurement of their own: the model-wide ratio */
	for (int k = 0; k < n; k++) {
		struct mi_pred_node nd = pg->v[k].node;
		double g = sum_p > 0 ? sum_m / sum_p : 1;

		if (s->base_ns[k] <= 0 && !strcmp(pg->v[k].device, "cpu"))
			s->scale[k] = g;
		nd.int8 = 1;
		s->cpu_int8_ns[k] = strcmp(pg->v[k].device, "cpu") ||
						    s->base_ns[k] <= 0 ?
					    mi_pred_node_ns(s->pred, &nd,
							    s->dp[0]) * g :
					    s->base_ns[k];
	}
	return 0;
}

static int reference(struct search *s)
{
	float **out;
	size_t *outn;
	int err;

	s->nout = mi_model_output_count(s->m);
	s->ref = calloc(s->nout + 1, sizeof(*s->ref));
	s->refn = calloc(s->nout + 1, sizeof(*s->refn));
	out = calloc(s->nout + 1, sizeof(*out));
	outn = calloc(s->nout + 1, sizeof(*outn));
	if (!s->ref || !s->refn || !out || !outn) {
		free(out);
		free(outn);
		return -ENOMEM;
	}
	err = run_once(s, s->o->ref ? s->o->ref : s->m, s->ref, s->refn);
	if (!err && s->o->ref) {
		err = run_once(s, s->m, out, outn);
		if (!err)
			s->loss0 = fmax(0, 1 - cosine(s, out, outn));
	}
	for (int i = 0; i < s->nout; i++)
		free(out[i]);
	free(out);
	free(outn);
	return err;
}

int mi_search_run(struct mi_model *m, const struct mi_search_opts *o,
		  struct mi_search_result *r)
{
	struct mi_search_opts oo = *o;
	struct search s = { .m = m, .o = &oo, .r = r };
	struct bstate *top = NULL, *top2 = NULL;
	struct mi_search_cand dc = { 0 };
	int ktop = o->top > 0 ? o->top : 5, ntop = 0, ntop2 = 0, err, best = -1;
	double t0;

	memset(r, 0, sizeof(*r));
	if (!m || o->top < 0 || o->max_mem < 0 || o->min_cosine < 0 ||
	    o->min_cosine > 1 || o->budget_s < 0 || o->w[0] < 0 ||
	    o->w[1] < 0 || o->w[2] < 0)
		return mi_set_error(-EINVAL, "search: bad options");
	if (oo.w[0] + oo.w[1] + oo.w[2] <= 0) {
		oo.w[0] = 1;
		oo.w[2] = 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &s.t0);
	mi_pred_init(&s.own);
	s.pred = o->pred ? o->pred : &s.own;
	/* the default rules' plan, whatever the model ran before */
	err = mi_model_plan_reset(m);
	if (!err)
		err = mi_model_plan_get(m, &s.def);
	if (err)
		goto out;
	err = mi_pred_graph_build(m, (struct mi_predictor *)s.pred, false,
				  &s.pg);
	if (err)
		goto out;
	setup_devs(&s);
	for (int k = 0; k < s.pg.n; k++)
		if (mi_search_slot_of(&s, s.pg.v[k].device) == 0 &&
		    strcmp(s.pg.v[k].device, "cpu")) {
			err = mi_set_error(-ENODEV, "search: node '%s' is on %s, not one of the model's devices",
					   s.pg.v[k].name, s.pg.v[k].device);
			goto out;
		}
	err = make_inputs(&s);
	if (!err)
		err = reference(&s);
	if (!err)
		err = base_times(&s);
	if (!err)
		err = variant_groups(&s);
	if (!err)
		err = device_groups(&s);
	if (!err)
		err = mi_search_intents_setup(&s);
	if (err)
		goto out;
	r->ngroups = s.ng;
	if ((m->opts.flags & MI_MODEL_PROFILE) && o->calib >= 0 && s.ng) {
		double *tmp = malloc((s.pg.n + 1) * sizeof(double));

		err = tmp ? calibrate(&s, tmp) : -ENOMEM;
		free(tmp);
		if (err)
			goto out;
	}
	/* the default: normalizers, and its own limits */
	dc.choice = calloc(s.ng + 1, sizeof(int));
	if (!dc.choice) {
		err = -ENOMEM;
		goto out;
	}
	evaluate(&s, dc.choice, &dc, NULL, 0);
	s.L0 = dc.pred_ns;
	s.M0 = dc.pred_mem;
	s.def_ok = evaluate(&s, dc.choice, &dc, NULL, 0);
	s.penalty0 = s.penalty;
	s.score0 = dc.score;
	top = states_new(ktop, s.ng);
	if (!top) {
		err = -ENOMEM;
		goto out;
	}
	t0 = now_s();
	err = beam_search(&s, top, &ntop, ktop, NULL);
	if (!err && r->intents.n)
		err = region_search(&s, &top2, &ntop2);
	r->search_s = now_s() - t0 + r->calib_s;
	if (err)
		goto out;
	r->cand = calloc(ntop + ntop2 + 2, sizeof(*r->cand));
	if (!r->cand) {
		err = -ENOMEM;
		goto out;
	}
	r->cand[0] = dc;
	dc.choice = NULL;
	r->ncand = 1;
	/* With accelerators the default's plan applied as pins need not
	 * place what the default rules place: measure it too. */
	if (s.ndevs > 1 && r->ngroups) {
		struct mi_search_cand *c = &r->cand[r->ncand++];

		c->choice = calloc(s.ng + 1, sizeof(int));
		if (!c->choice) {
			err = -ENOMEM;
			goto out;
		}
		evaluate(&s, c->choice, c, NULL, 0);
		s.nfixed = 2;
	}
	for (int i = 0; i < ntop; i++) {
		struct mi_search_cand *c = &r->cand[r->ncand];

		c->choice = top[i].c;
		top[i].c = NULL;
		evaluate(&s, c->choice, c, NULL, 0);
		r->ncand++;
	}
	for (int i = 0; i < ntop2; i++) {
		struct mi_search_cand *c = &r->cand[r->ncand];
		bool dup = false;

		for (int k = 1; k < r->ncand && !dup; k++)
			dup = !memcmp(r->cand[k].choice, top2[i].c,
				      s.ng * sizeof(int));
		if (dup)
			continue;
		c->choice = top2[i].c;
		top2[i].c = NULL;
		evaluate(&s, c->choice, c, NULL, 0);
		r->ncand++;
	}
	{
		/* worth verifying?  The best predicted latency gain over
		 * `amortize` inferences against what verifying costs */
		double amort = o->amortize > 0 ? o->amortize : 1000, gain = 0;
		int runs = (o->runs > 0 ? o->runs : 5) +
			   (o->warmup > 0 ? o->warmup : 1) + 1;
		double cost = (r->ncand - 1) * runs * r->cand[0].pred_ns;
		char why[160] = "";
		int nf = s.nfixed ? s.nfixed : 1;
		bool def_ok = evaluate(&s, r->cand[0].choice, &dc, why,
				       sizeof(why));

		for (int i = nf; i < r->ncand; i++)
			gain = fmax(gain, r->cand[0].pred_ns - r->cand[i].pred_ns);
		/* intents ask for more than speed: not counted in ms */
		if (def_ok && (r->ncand == nf ||
			       (!r->intents.n && gain * amort < cost))) {
			r->kept_default = true;
			snprintf(r->note, sizeof(r->note),
				 r->ncand == nf ?
				 "no plan within the limits is predicted better: kept the default plan" :
				 "predicted gain %.3f ms x %.0f runs < verification cost %.1f ms: kept the default plan",
				 gain / 1e6, amort, cost / 1e6);
			while (r->ncand > nf)
				free(r->cand[--r->ncand].choice);
		}
	}
	for (int i = 0; i < r->ncand; i++) {
		progress(&s, "verify", i + 1, r->ncand);
		if (i && o->budget_s > 0 && elapsed(&s) > o->budget_s) {
			snprintf(r->cand[i].why, sizeof(r->cand[i].why),
				 "not measured: --budget spent");
			continue;
		}
		err = verify(&s, &r->cand[i], i == 0);
		if (err)
			goto out;
	}
	/* the default once more, last: drift over the verification (a
	 * warming machine, a neighbour's load) must not favour the plans
	 * measured later */
	if (r->ncand > 1 && r->cand[0].measured) {
		struct mi_search_cand again = r->cand[0];

		again.choice = r->cand[0].choice;
		err = verify(&s, &again, true);
		if (err)
			goto out;
		if (again.measured && again.meas_ns < r->cand[0].meas_ns)
			r->cand[0].meas_ns = again.meas_ns;
	}
	/* The fastest measured eligible plan; another plan replaces a
	 * feasible default only when it is faster by more than the noise
	 * of the verification median (MI_SEARCH_MARGIN).  With intents the
	 * lowest measured score instead, by more than that noise's share
	 * of it. */
	if (r->intents.n) {
		double lat_w = mi_search_measured_scores(&s);

		for (int i = 0; i < r->ncand; i++) {
			const struct mi_search_cand *c = &r->cand[i];

			if (!c->feasible)
				continue;
			if (i && r->cand[0].feasible &&
			    c->mscore >= r->cand[0].mscore -
						 MI_SEARCH_MARGIN * lat_w)
				continue;
			if (best < 0 || c->mscore < r->cand[best].mscore)
				best = i;
		}
	}
	for (int i = 0; !r->intents.n && i < r->ncand; i++) {
		const struct mi_search_cand *c = &r->cand[i];

		if (!c->feasible)
			continue;
		if (i && r->cand[0].feasible &&
		    c->meas_ns >= r->cand[0].meas_ns * (1 - MI_SEARCH_MARGIN))
			continue;
		if (best < 0 || c->meas_ns < r->cand[best].meas_ns)
			best = i;
	}
	if (s.o->progress)
		fputc('\n', s.o->progress);
	if (best < 0) {
		err = mi_set_error(-EDOM, "%s: no plan meets the limits (default: %s)",
				   m->label, r->cand[0].why[0] ? r->cand[0].why :
								 "infeasible");
		mi_model_plan_reset(m);
		goto out;
	}
	r->best = best;
	if (best == 0) {
		err = mi_model_plan_reset(m);
		if (!err)
			err = mi_plan_dup(s.def, &r->plan);
	} else {
		err = state_plan(&s, r->cand[best].choice, &r->plan);
		if (!err)
			err = mi_model_plan_apply(m, r->plan);
	}

out:
	free(dc.choice);
	states_free(top, ktop);
	states_free(top2, MI_SEARCH_REGION_TOP);
	search_fini(&s);
	if (err == -ENOMEM)
		mi_set_error(err, "search: out of memory");
	return err;
}
