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

const char *const mi_intent_kind_names[MI_INTENT_COUNT] = {
	[MI_INTENT_LATENCY_CRITICAL] = "LATENCY_CRITICAL",
	[MI_INTENT_MEMORY_CONSTRAINED] = "MEMORY_CONSTRAINED",
	[MI_INTENT_POWER_SENSITIVE] = "POWER_SENSITIVE",
};

static_assert(sizeof(mi_intent_kind_names) / sizeof(mi_intent_kind_names[0]) ==
	      MI_INTENT_COUNT, "a name per intent kind");

#define MI_INTENT_WEIGHT 4.0

static int parse_size(const char *s, size_t n, double *v)
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
		if (parse_size(v, vn, &it->max_mem))
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
	if (kn >= sizeof(it->sel))
		BAD("node list longer than %zu characters", sizeof(it->sel) - 1);
	snprintf(it->sel, sizeof(it->sel), "%.*s", (int)kn, c1 + 1);
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

void mi_intents_fini(struct mi_intents *v)
{
	for (int i = 0; i < v->n; i++) {
		for (int j = 0; j < v->v[i].nnodes; j++)
			free(v->v[i].nodes[j]);
		free(v->v[i].nodes);
	}
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

	if (mi_intent_parse(name, spec, &it, err, sizeof(err)))
		return mi_set_error(-EINVAL, "%s: intent '%s': %s", m->label,
				    name, err);
	for (int i = 0; i < v->n; i++)
		if (!strcmp(v->v[i].name, it.name))
			return mi_set_error(-EINVAL, "%s: intent '%s' is given twice",
					    m->label, name);
	nv = realloc(v->v, (v->n + 1) * sizeof(*nv));
	if (!nv)
		return -ENOMEM;
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
	int n = snprintf(buf, len, "%s: %s on %d node%s (%s), weight %g",
			 it->name, mi_intent_kind_names[it->kind], it->nnodes,
			 it->nnodes == 1 ? "" : "s", it->sel, it->weight);

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
