// SPDX-License-Identifier: MIT
/*
 * Hardware intents: what a model's author says about regions of it, read
 * from the ONNX metadata_props and honoured by the plan search (search.c,
 * Documentation/search.rst "Hardware intents").
 *
 *   key    metainfer.intent.<name>      <name>: [A-Za-z0-9_-], 1-63 chars
 *   value  KIND:NODES[:opt=val[,opt=val]...]
 *   KIND   LATENCY_CRITICAL | MEMORY_CONSTRAINED | POWER_SENSITIVE
 *   NODES  *  |  A..B (every node from A to B in execution order)  |  A+B+C
 *   opts   weight=W (> 0, default 4)  max_mem=SIZE (MEMORY_CONSTRAINED)
 *          layout=NCHW|NHWC|NCHWc     precisions=int8|fp32|int8+fp32
 *
 * Strict: anything unknown (a key under "metainfer.intent", a kind, an
 * option, a node) is one error naming it; nothing is ignored.  Node names
 * are the plan's (`metainfer plan`); a node the planner fused into
 * another counts as that one.
 */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "plan/plan-impl.h"
#include "plan/search-impl.h"
#include "plan/search-state.h"
#include "predict/predict.h"

const char *const mi_intent_kind_names[MI_INTENT_COUNT] = {
	[MI_INTENT_LATENCY_CRITICAL] = "LATENCY_CRITICAL",
	[MI_INTENT_MEMORY_CONSTRAINED] = "MEMORY_CONSTRAINED",
	[MI_INTENT_POWER_SENSITIVE] = "POWER_SENSITIVE",
};

static_assert(sizeof(mi_intent_kind_names) / sizeof(mi_intent_kind_names[0]) ==
	      MI_INTENT_COUNT, "a name per intent kind");

#define MI_INTENT_WEIGHT 4.0

/* A byte count: a positive number with an optional k/M/G (binary) and B
 * or iB ("64k", "1.5MiB"), n characters of s.  `tune --max-mem` and the
 * intents' max_mem= read it. */
int mi_parse_size(const char *s, size_t n, double *v)
{
	char buf[48], *end;
	double x;

	if (!n || n >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, s, n);
	buf[n] = 0;
	x = strtod(buf, &end);
	if (end == buf || !isfinite(x) || x <= 0)
		return -EINVAL;
	switch (*end) {
	case 'k': case 'K':
		x *= 1024, end++;
		break;
	case 'm': case 'M':
		x *= 1048576, end++;
		break;
	case 'g': case 'G':
		x *= 1073741824.0, end++;
		break;
	}
	if (*end == 'B' || *end == 'i')
		end += strspn(end, "iB");
	if (*end)
		return -EINVAL;
	*v = x;
	return 0;
}

static bool is_eq(const char *s, size_t n, const char *lit)
{
	return strlen(lit) == n && !strncmp(s, lit, n);
}

#define BAD(...) do { snprintf(err, errlen, __VA_ARGS__); return -EINVAL; } while (0)

static int parse_opt(struct mi_intent *it, const char *o, size_t n,
		     char *err, size_t errlen)
{
	const char *eq = memchr(o, '=', n);
	size_t kn = eq ? (size_t)(eq - o) : n;
	const char *v = eq ? eq + 1 : o + n;
	size_t vn = eq ? n - kn - 1 : 0;

	if (!eq || !vn)
		BAD("option '%.*s' is not opt=value", (int)n, o);
	if (is_eq(o, kn, "weight")) {
		char buf[32], *end;

		if (vn >= sizeof(buf))
			BAD("bad weight '%.*s' (a number > 0)", (int)vn, v);
		memcpy(buf, v, vn);
		buf[vn] = 0;
		it->weight = strtod(buf, &end);
		if (end == buf || *end || !isfinite(it->weight) ||
		    !(it->weight > 0))
			BAD("bad weight '%.*s' (a number > 0)", (int)vn, v);
	} else if (is_eq(o, kn, "max_mem")) {
		if (it->kind != MI_INTENT_MEMORY_CONSTRAINED)
			BAD("max_mem is an option of MEMORY_CONSTRAINED only");
		if (mi_parse_size(v, vn, &it->max_mem))
			BAD("bad max_mem '%.*s' (bytes > 0, k/M/G suffix)",
			    (int)vn, v);
	} else if (is_eq(o, kn, "layout")) {
		if (!is_eq(v, vn, "NCHW") && !is_eq(v, vn, "NHWC") &&
		    !is_eq(v, vn, "NCHWc"))
			BAD("unknown layout '%.*s' (NCHW, NHWC, NCHWc)",
			    (int)vn, v);
		snprintf(it->layout, sizeof(it->layout), "%.*s", (int)vn, v);
	} else if (is_eq(o, kn, "precisions")) {
		const char *p = v, *end = v + vn;

		it->prec = 0;
		while (p < end) {
			const char *q = memchr(p, '+', end - p);
			size_t pn = q ? (size_t)(q - p) : (size_t)(end - p);

			if (is_eq(p, pn, "int8"))
				it->prec |= MI_INTENT_INT8;
			else if (is_eq(p, pn, "fp32"))
				it->prec |= MI_INTENT_FP32;
			else
				BAD("unknown precision '%.*s' (int8, fp32, int8+fp32)",
				    (int)pn, p);
			p += pn + 1;
		}
		if (!it->prec)
			BAD("precisions: none given");
	} else {
		BAD("unknown option '%.*s' (weight, max_mem, layout, precisions)",
		    (int)kn, o);
	}
	return 0;
}

int mi_intent_parse(const char *name, const char *spec, struct mi_intent *it,
		    char *err, size_t errlen)
{
	const char *c1, *c2, *p;
	size_t kn;
	int k;

	memset(it, 0, sizeof(*it));
	it->weight = MI_INTENT_WEIGHT;
	if (!*name || strlen(name) >= sizeof(it->name))
		BAD("intent name '%s': 1 to %zu characters", name,
		    sizeof(it->name) - 1);
	for (p = name; *p; p++)
		if (!isalnum((unsigned char)*p) && *p != '_' && *p != '-')
			BAD("intent name '%s': only letters, digits, '_' and '-'",
			    name);
	snprintf(it->name, sizeof(it->name), "%s", name);
	c1 = strchr(spec, ':');
	kn = c1 ? (size_t)(c1 - spec) : strlen(spec);
	for (k = 0; k < MI_INTENT_COUNT; k++)
		if (is_eq(spec, kn, mi_intent_kind_names[k]))
			break;
	if (k == MI_INTENT_COUNT)
		BAD("unknown intent '%.*s' (LATENCY_CRITICAL, MEMORY_CONSTRAINED, POWER_SENSITIVE)",
		    (int)kn, spec);
	it->kind = k;
	if (!c1 || !c1[1] || c1[1] == ':')
		BAD("no nodes (KIND:NODES[:opt=val,...], NODES: *, A..B or A+B)");
	c2 = strchr(c1 + 1, ':');
	kn = c2 ? (size_t)(c2 - c1 - 1) : strlen(c1 + 1);
	it->sel = strndup(c1 + 1, kn);
	if (!it->sel)
		BAD("out of memory");
	if (strstr(it->sel, "..") && strchr(it->sel, '+'))
		BAD("nodes '%s': a region A..B or a list A+B, not both",
		    it->sel);
	for (p = c2 ? c2 + 1 : NULL; p && *p;) {
		const char *q = strchr(p, ',');
		size_t on = q ? (size_t)(q - p) : strlen(p);

		if (parse_opt(it, p, on, err, errlen))
			return -EINVAL;
		p += on + (q ? 1 : 0);
		if (q && !*p)
			BAD("empty option after ','");
	}
	if (c2 && !c2[1])
		BAD("empty options after ':'");
	return 0;
}

void mi_intent_fini(struct mi_intent *it)
{
	for (int j = 0; j < it->nnodes; j++)
		free(it->nodes[j]);
	free(it->nodes);
	free(it->sel);
	memset(it, 0, sizeof(*it));
}

void mi_intents_fini(struct mi_intents *v)
{
	for (int i = 0; i < v->n; i++)
		mi_intent_fini(&v->v[i]);
	free(v->v);
	memset(v, 0, sizeof(*v));
}

bool mi_intent_has(const struct mi_intent *it, const char *node)
{
	for (int j = 0; j < it->nnodes; j++)
		if (!strcmp(it->nodes[j], node))
			return true;
	return false;
}

/* Execution-order position of the plan entry that node name ended in. */
static int node_pos(struct mi_plan_rb *rb, const int *pos, const char *name,
		    size_t n, const struct mi_intent *it)
{
	struct mi_graph *g = &rb->m->g;
	char buf[160];
	int i, o;

	snprintf(buf, sizeof(buf), "%.*s", (int)n, name);
	i = n < sizeof(buf) ? mi_plan_label_find(rb->labels, g->nnodes, buf) : -1;
	if (i < 0)
		return mi_set_error(-EINVAL, "%s: intent '%s': unknown node '%s'",
				    rb->m->label, it->name, buf);
	o = rb->owner[i];
	if (o < 0 || pos[o] < 0)
		return mi_set_error(-EINVAL, "%s: intent '%s': node '%s' is removed by the normalization passes (see metainfer plan)",
				    rb->m->label, it->name, buf);
	return pos[o];
}

static int resolve(struct mi_plan_rb *rb, const int *pos, struct mi_intent *it)
{
	struct mi_graph *g = &rb->m->g;
	unsigned char *in = calloc(g->norder + 1, 1);
	const char *dd = strstr(it->sel, "..");
	int err = 0;

	if (!in)
		return -ENOMEM;
	if (!strcmp(it->sel, "*")) {
		memset(in, 1, g->norder);
	} else if (dd) {
		int a = node_pos(rb, pos, it->sel, dd - it->sel, it), b;

		b = a < 0 ? a : node_pos(rb, pos, dd + 2, strlen(dd + 2), it);
		if (b < 0) {
			err = b;
			goto out;
		}
		if (a > b) {
			err = mi_set_error(-EINVAL, "%s: intent '%s': region '%s' ends before it starts (execution order)",
					   rb->m->label, it->name, it->sel);
			goto out;
		}
		memset(in + a, 1, b - a + 1);
	} else {
		for (const char *p = it->sel; *p;) {
			const char *q = strchr(p, '+');
			size_t n = q ? (size_t)(q - p) : strlen(p);
			int k = node_pos(rb, pos, p, n, it);

			if (k < 0) {
				err = k;
				goto out;
			}
			in[k] = 1;
			p += n + (q ? 1 : 0);
		}
	}
	for (int k = 0; k < g->norder && !err; k++)
		if (in[k])
			err = mi_plan_strv_add(&it->nodes, &it->nnodes,
					       rb->labels[g->order[k]]);
out:
	free(in);
	return err;
}

static int add(struct mi_model *m, struct mi_intents *v, const char *name,
	       const char *spec)
{
	struct mi_intent it, *nv;
	char err[200];

	if (mi_intent_parse(name, spec, &it, err, sizeof(err))) {
		mi_intent_fini(&it);
		return mi_set_error(-EINVAL, "%s: intent '%s': %s", m->label,
				    name, err);
	}
	for (int i = 0; i < v->n; i++)
		if (!strcmp(v->v[i].name, it.name)) {
			mi_intent_fini(&it);
			return mi_set_error(-EINVAL, "%s: intent '%s' is given twice",
					    m->label, name);
		}
	nv = realloc(v->v, (v->n + 1) * sizeof(*nv));
	if (!nv) {
		mi_intent_fini(&it);
		return -ENOMEM;
	}
	v->v = nv;
	v->v[v->n++] = it;
	return 0;
}

int mi_intents_load(struct mi_model *m, const char *const *extra, int nextra,
		    struct mi_intents *v)
{
	struct mi_graph *g = &m->g;
	struct mi_plan_rb rb;
	int *pos = NULL, err = 0;

	memset(v, 0, sizeof(*v));
	for (int i = 0; i < g->nmeta && !err; i++) {
		const char *k = g->meta_key[i];

		if (strncmp(k, "metainfer.intent", 16))
			continue;
		if (strncmp(k, MI_INTENT_KEY, strlen(MI_INTENT_KEY)))
			err = mi_set_error(-EINVAL, "%s: unknown metadata key '%s' (intents are " MI_INTENT_KEY "<name>)",
					   m->label, k);
		else
			err = add(m, v, k + strlen(MI_INTENT_KEY),
				  g->meta_value[i]);
	}
	for (int i = 0; i < nextra && !err; i++) {
		const char *eq = strchr(extra[i], '=');
		char name[64];

		if (!eq || eq == extra[i] || eq - extra[i] >= (int)sizeof(name)) {
			err = mi_set_error(-EINVAL, "intent '%s' is not NAME=KIND:NODES[:opts]",
					   extra[i]);
			break;
		}
		snprintf(name, sizeof(name), "%.*s", (int)(eq - extra[i]),
			 extra[i]);
		err = add(m, v, name, eq + 1);
	}
	if (err || !v->n)
		goto out;
	err = mi_plan_rb_init(&rb, m);
	if (err)
		goto out;
	pos = malloc((g->nnodes + 1) * sizeof(int));
	if (!pos) {
		err = -ENOMEM;
	} else {
		for (int i = 0; i < g->nnodes; i++)
			pos[i] = -1;
		for (int k = 0; k < g->norder; k++)
			pos[g->order[k]] = k;
	}
	for (int i = 0; i < v->n && !err; i++)
		err = resolve(&rb, pos, &v->v[i]);
	free(pos);
	mi_plan_rb_fini(&rb);
out:
	if (err == -ENOMEM)
		mi_set_error(err, "out of memory");
	if (err)
		mi_intents_fini(v);
	return err;
}

void mi_intent_describe(const struct mi_intent *it, char *buf, size_t len)
{
	/* a long node list: its start */
	int cut = strlen(it->sel) > 72 ? 64 : 72;
	int n = snprintf(buf, len, "%s: %s on %d node%s (%.*s%s), weight %g",
			 it->name, mi_intent_kind_names[it->kind], it->nnodes,
			 it->nnodes == 1 ? "" : "s", cut, it->sel,
			 strlen(it->sel) > 72 ? "..." : "", it->weight);

	if (n > 0 && (size_t)n < len && it->max_mem > 0)
		n += snprintf(buf + n, len - n, ", max_mem %.4g MiB",
			      it->max_mem / 1048576.0);
	if (n > 0 && (size_t)n < len && it->layout[0])
		n += snprintf(buf + n, len - n, ", layout %s", it->layout);
	if (n > 0 && (size_t)n < len && it->prec)
		snprintf(buf + n, len - n, ", precisions %s",
			 it->prec == (MI_INTENT_INT8 | MI_INTENT_FP32) ?
				 "int8+fp32" :
			 it->prec == MI_INTENT_INT8 ? "int8" : "fp32");
}

/* ---- in the search (search.c) -------------------------------------- */

/* "NCHWc" is any blocked layout NCHW<k>c; the others match exactly. */
static bool lay_match(const char *lay, const char *pref)
{
	size_t n;

	if (!lay)
		return false;
	if (strcmp(pref, "NCHWc"))
		return !strcmp(lay, pref);
	n = strlen(lay);
	return n > 5 && !strncmp(lay, "NCHW", 4) && lay[n - 1] == 'c' &&
	       strspn(lay + 4, "0123456789") == n - 5;
}

static const struct sgroup *group_at(const struct search *s, int k)
{
	for (int gi = 0; gi < s->ng; gi++)
		if (!s->g[gi].dev && s->g[gi].pos[0] == k)
			return &s->g[gi];
	return NULL;
}

static bool e_prec_is(const struct search *s, int k)
{
	const struct mi_plan_entry *e = mi_plan_find(s->def, s->pg.v[k].name);

	return e && e->precision && (!strcmp(e->precision, "int8") ||
				     !strcmp(e->precision, "fp32"));
}

int mi_search_intents_setup(struct search *s)
{
	struct mi_intents *iv = &s->r->intents;
	struct mi_pred_graph *pg = &s->pg;
	int n = pg->n, err;

	err = mi_intents_load(s->m, s->o->intents, s->o->nintents, iv);
	if (err)
		return err;
	if (iv->n > MI_SEARCH_MAXINTENT)
		return mi_set_error(-EINVAL, "%s: %d intents, at most %d",
				    s->m->label, iv->n, MI_SEARCH_MAXINTENT);
	s->base_ws = calloc(n + 1, sizeof(double));
	s->ws = calloc(n + 1, sizeof(double));
	s->live = calloc(n + 1, sizeof(double));
	s->base_lay = calloc(n + 1, sizeof(char *));
	s->lay = calloc(n + 1, sizeof(char *));
	s->base_lay_in = calloc(n + 1, sizeof(char *));
	s->lay_in = calloc(n + 1, sizeof(char *));
	s->pref = calloc(n + 1, sizeof(char *));
	s->prec = calloc(n + 1, sizeof(unsigned));
	s->prec_from = calloc(n + 1, sizeof(int));
	s->pref_from = calloc(n + 1, sizeof(int));
	if (!s->base_ws || !s->ws || !s->live || !s->base_lay || !s->lay ||
	    !s->base_lay_in || !s->lay_in ||
	    !s->pref || !s->prec || !s->prec_from || !s->pref_from)
		return -ENOMEM;
	for (int k = 0; k < n; k++) {
		const struct mi_plan_entry *e = mi_plan_find(s->def,
							     pg->v[k].name);

		if (!strcmp(pg->v[k].device, "cpu"))
			s->base_ws[k] = mi_pred_variant_ws(&pg->v[k].node,
							   pg->v[k].variant);
		s->base_lay[k] = e && e->lay_out ? e->lay_out : "auto";
		s->base_lay_in[k] = e && e->lay_in ? e->lay_in : "auto";
	}
	for (int i = 0; i < iv->n; i++) {
		const struct mi_intent *it = &iv->v[i];

		s->region[i] = calloc(n + 1, 1);
		if (!s->region[i])
			return -ENOMEM;
		for (int j = 0; j < it->nnodes; j++) {
			int k = mi_search_pos_of(pg, it->nodes[j]);

			if (k >= 0)
				s->region[i][k] = 1;
		}
		for (int k = 0; k < n; k++) {
			const struct sgroup *g;
			bool any;

			if (!s->region[i][k])
				continue;
			if (it->prec && s->prec[k] && !(s->prec[k] & it->prec))
				return mi_set_error(-EINVAL, "%s: intents '%s' and '%s' allow no common precision on node '%s'",
						    s->m->label,
						    iv->v[s->prec_from[k]].name,
						    it->name, pg->v[k].name);
			/* precisions bind the float / int8 compute; shape
			 * arithmetic (int64) is not in the action space */
			if (it->prec && e_prec_is(s, k)) {
				s->prec[k] = s->prec[k] ? s->prec[k] & it->prec :
							  it->prec;
				s->prec_from[k] = i;
			}
			if (!it->layout[0])
				continue;
			/* a preferred layout binds only nodes with an
			 * option in it; the others keep theirs */
			g = group_at(s, k);
			any = lay_match(s->base_lay[k], it->layout);
			for (int o = 1; g && o < g->nopt; o++)
				any = any || lay_match(g->opt[o].lay, it->layout);
			if (!any)
				continue;
			if (s->pref[k] && strcmp(s->pref[k], it->layout))
				return mi_set_error(-EINVAL, "%s: intents '%s' and '%s' prefer different layouts on node '%s'",
						    s->m->label,
						    iv->v[s->pref_from[k]].name,
						    it->name, pg->v[k].name);
			s->pref[k] = it->layout;
			s->pref_from[k] = i;
		}
	}
	return 0;
}

/* pJ per multiply-accumulate and per byte: Horowitz, "Computing's energy
 * problem", ISSCC 2014, 45 nm: int8 0.2 + 0.03, fp32 3.7 + 0.9; a 64-bit
 * access of an 8 KB SRAM 10 pJ (on-chip tensors), DRAM 640 pJ per 32 bits
 * (data crossing between devices). */
#define PJ_MAC_INT8	0.23
#define PJ_MAC_FP32	4.6
#define PJ_BYTE_SRAM	1.25
#define PJ_BYTE_DRAM	160.0

static double node_time(struct search *s, int k)
{
	const struct mi_pred_pnode *v = &s->pg.v[k];

	if (s->ns[k] >= 0)
		return s->ns[k];
	return mi_pred_node_ns(s->pred, &v->node,
			       s->dp[mi_search_slot_of(s, v->device)]);
}

static bool concrete(const char *lay)
{
	return lay && *lay && strcmp(lay, "auto") && strcmp(lay, "any");
}

/* Bytes of the copies the plan makes of node k's inputs when their
 * producer (on the same device) writes another layout than k reads. */
static double reorder_bytes(struct search *s, int k)
{
	const struct mi_pred_pnode *v = &s->pg.v[k];
	double b = 0;

	if (!concrete(s->lay_in[k]))
		return 0;
	for (int i = 0; i < v->ninputs; i++) {
		int p = v->inputs[i];

		if (p >= 0 && concrete(s->lay[p]) &&
		    strcmp(s->lay[p], s->lay_in[k]) &&
		    !strcmp(s->pg.v[p].device, v->device))
			b += v->in_bytes[i];
	}
	return b;
}

/* The region value intent i scores (struct mi_search_cand.ival). */
double mi_search_region_value(struct search *s, int i, double *mean)
{
	const struct mi_intent *it = &s->r->intents.v[i];
	const struct mi_pred_graph *pg = &s->pg;
	const unsigned char *in = s->region[i];
	double v = 0, w = 0;
	int a = -1, b = -1;

	for (int k = 0; k < pg->n; k++) {
		const struct mi_pred_pnode *p = &pg->v[k];

		if (!in[k])
			continue;
		if (a < 0)
			a = k;
		b = k;
		switch (it->kind) {
		case MI_INTENT_LATENCY_CRITICAL:
			v += node_time(s, k);
			break;
		case MI_INTENT_MEMORY_CONSTRAINED:
			w += p->node.w_bytes;
			break;
		case MI_INTENT_POWER_SENSITIVE:
			v += p->node.macs * (s->int8[k] ? PJ_MAC_INT8 :
							  PJ_MAC_FP32) +
			     (p->node.in_bytes + p->node.out_bytes +
			      p->node.w_bytes + s->ws[k]) * PJ_BYTE_SRAM;
			for (int j = 0; j < p->ninputs; j++)
				if (p->inputs[j] >= 0 &&
				    strcmp(pg->v[p->inputs[j]].device, p->device))
					v += p->in_bytes[j] * PJ_BYTE_DRAM;
			break;
		}
	}
	*mean = v;
	if (it->kind != MI_INTENT_MEMORY_CONSTRAINED || a < 0)
		return v;
	/* what is in use while the region runs: live activations, the
	 * running node's workspace and the reorder copies of its inputs at
	 * each of its steps, plus the region's weights */
	*mean = 0;
	for (int k = a; k <= b; k++) {
		double u = s->live[k] + s->ws[k] + reorder_bytes(s, k);

		v = fmax(v, u);
		*mean += u / (b - a + 1);
	}
	*mean += w;
	return v + w;
}

/* Hard limits of the intents: precisions, layouts, region memory. */
bool mi_search_intent_limits(struct search *s,
			     const struct mi_search_cand *c, char *why,
			     size_t wlen)
{
	const struct mi_intents *iv = &s->r->intents;
	const struct mi_pred_graph *pg = &s->pg;
	bool said = false;

	/* s->penalty: nodes off their precision or layout, plus each
	 * region's excess over its max_mem as a share of it */
	for (int k = 0; k < pg->n; k++) {
		unsigned p = s->int8[k] ? MI_INTENT_INT8 : MI_INTENT_FP32;

		if (s->prec[k] && !(s->prec[k] & p)) {
			if (why && !said)
				snprintf(why, wlen, "node '%s' runs %s, intent '%s' allows %s",
					 pg->v[k].name, s->int8[k] ? "int8" : "fp32",
					 iv->v[s->prec_from[k]].name,
					 s->int8[k] ? "fp32" : "int8");
			said = true;
			s->penalty += 1;
		}
		if (s->pref[k] && !lay_match(s->lay[k], s->pref[k])) {
			if (why && !said)
				snprintf(why, wlen, "node '%s' writes %s, intent '%s' prefers %s",
					 pg->v[k].name, s->lay[k],
					 iv->v[s->pref_from[k]].name, s->pref[k]);
			said = true;
			s->penalty += 1;
		}
	}
	for (int i = 0; i < iv->n; i++)
		if (iv->v[i].max_mem > 0 && c->ival[i] > iv->v[i].max_mem) {
			if (why && !said)
				snprintf(why, wlen, "region of intent '%s' needs %.4g MiB, more than its max_mem %.4g MiB",
					 iv->v[i].name, c->ival[i] / 1048576.0,
					 iv->v[i].max_mem / 1048576.0);
			said = true;
			s->penalty += c->ival[i] / iv->v[i].max_mem - 1;
		}
	return !said;
}

/*
 * With intents the measured plans are compared by their score with the
 * measured latency in place of the predicted one: the plan's latency
 * term by measured / the default's measured, a LATENCY_CRITICAL region's
 * by the plan's measured / predicted.  Returns the weight on latency (a
 * 1% slower plan scores at most that / 100 worse).
 */
double mi_search_measured_scores(struct search *s)
{
	struct mi_search_result *r = s->r;
	const struct mi_intents *iv = &r->intents;
	const double *w = s->o->w;
	double m0 = r->cand[0].meas_ns, lat_w = w[0];

	for (int i = 0; i < iv->n; i++)
		if (iv->v[i].kind == MI_INTENT_LATENCY_CRITICAL)
			lat_w += iv->v[i].weight;
	for (int i = 0; i < r->ncand; i++) {
		struct mi_search_cand *c = &r->cand[i];
		double f = c->pred_ns > 0 ? c->meas_ns / c->pred_ns : 1;

		if (!c->measured)
			continue;
		c->mscore = c->score + w[0] * (m0 > 0 ? c->meas_ns / m0 : 0) -
			    w[0] * (s->L0 > 0 ? c->pred_ns / s->L0 : 0);
		for (int k = 0; k < iv->n; k++)
			if (iv->v[k].kind == MI_INTENT_LATENCY_CRITICAL &&
			    s->ival0[k] > 0)
				c->mscore += iv->v[k].weight * c->ival[k] *
					     (f - 1) / s->ival0[k];
	}
	return lat_w;
}
