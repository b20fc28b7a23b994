// SPDX-License-Identifier: MIT
/*
 * Plans as values: read back what the providers chose (struct mi_plan),
 * apply a plan, list the legal choices per node.
 *
 * Read back: after mi_cpu_plan() every live node is either claimed
 * (node->priv, a struct mi_cpu_kernel_hdr naming its variant and
 * layouts; the planning context says which provider claimed it) or runs
 * its reference op ("ref").  A node live before planning and dead after
 * it was absorbed: its owner is the live node that now writes its
 * output, or (a node feeding another, e.g. a DequantizeLinear read by
 * an int8 conv) the first live node downstream of it in the graph as it
 * was before planning.  A node without an owner was removed (nobody
 * reads it any more).
 *
 * Apply: the plan's constraints go into the planning context, the model
 * is planned again, and what it runs is read back and compared with the
 * plan.  A node the plan gives to the NCHW registry or to its reference
 * op but that an earlier provider took (or fused away) is marked "early"
 * (claimed before the providers run) and the model planned once more;
 * any other difference rejects the plan with one line naming the node,
 * and the model is planned again with the constraints it had.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "cpu/cpu.h"
#include "plan/plan-impl.h"
#include "plan/place-impl.h"

/* ---- plan values ------------------------------------------------------- */
int mi_plan_strv_add(char ***v, int *n, const char *s)
{
	char **nv = realloc(*v, (*n + 1) * sizeof(*nv));

	if (!nv)
		return -ENOMEM;
	*v = nv;
	nv[*n] = strdup(s);
	if (!nv[*n])
		return -ENOMEM;
	(*n)++;
	return 0;
}

static void strv_free(char **v, int n)
{
	for (int i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

int mi_plan_entry_add(struct mi_plan *p, struct mi_plan_entry **ep)
{
	if (p->n == p->cap) {
		int nc = p->cap ? 2 * p->cap : 32;
		struct mi_plan_entry *ne = realloc(p->e, nc * sizeof(*ne));

		if (!ne)
			return -ENOMEM;
		p->e = ne;
		p->cap = nc;
	}
	*ep = &p->e[p->n++];
	memset(*ep, 0, sizeof(**ep));
	return 0;
}

void mi_plan_entry_fini(struct mi_plan_entry *e)
{
	free(e->name);
	free(e->op);
	free(e->device);
	free(e->job_dev);
	free(e->variant);
	free(e->lay_in);
	free(e->lay_out);
	free(e->precision);
	free(e->qparams);
	strv_free(e->fused, e->nfused);
	memset(e, 0, sizeof(*e));
}

struct mi_plan_entry *mi_plan_find(const struct mi_plan *p, const char *name)
{
	for (int i = 0; i < p->n; i++)
		if (!strcmp(p->e[i].name, name))
			return &p->e[i];
	return NULL;
}

void mi_plan_free(struct mi_plan *p)
{
	if (!p)
		return;
	for (int i = 0; i < p->n; i++)
		mi_plan_entry_fini(&p->e[i]);
	free(p->e);
	strv_free(p->removed, p->nremoved);
	free(p->model);
	free(p->isa);
	free(p);
}

static char *dup0(const char *s)
{
	return s ? strdup(s) : NULL;
}

static int entry_copy(struct mi_plan_entry *d, const struct mi_plan_entry *s)
{
	d->name = dup0(s->name);
	d->op = dup0(s->op);
	d->device = dup0(s->device);
	d->job = s->job;
	d->job_dev = dup0(s->job_dev);
	d->variant = dup0(s->variant);
	d->lay_in = dup0(s->lay_in);
	d->lay_out = dup0(s->lay_out);
	d->precision = dup0(s->precision);
	d->qparams = dup0(s->qparams);
	d->threads = s->threads;
	if (!d->name || !d->op || !d->device || !d->variant || !d->lay_in ||
	    !d->lay_out || !d->precision || (s->qparams && !d->qparams) ||
	    (s->job_dev && !d->job_dev))
		return -ENOMEM;
	for (int i = 0; i < s->nfused; i++)
		if (mi_plan_strv_add(&d->fused, &d->nfused, s->fused[i]))
			return -ENOMEM;
	return 0;
}

int mi_plan_dup(const struct mi_plan *s, struct mi_plan **planp)
{
	struct mi_plan *p = calloc(1, sizeof(*p));
	int err = 0;

	if (!p)
		return mi_set_error(-ENOMEM, "out of memory");
	p->model = dup0(s->model);
	p->isa = dup0(s->isa);
	p->threads = s->threads;
	p->fingerprint = s->fingerprint;
	p->max_job_us = s->max_job_us;
	if ((s->model && !p->model) || (s->isa && !p->isa))
		err = -ENOMEM;
	for (int i = 0; !err && i < s->n; i++) {
		struct mi_plan_entry *e;

		err = mi_plan_entry_add(p, &e);
		if (!err)
			err = entry_copy(e, &s->e[i]);
	}
	for (int i = 0; !err && i < s->nremoved; i++)
		err = mi_plan_strv_add(&p->removed, &p->nremoved, s->removed[i]);
	if (err) {
		mi_plan_free(p);
		return mi_set_error(err, "out of memory");
	}
	*planp = p;
	return 0;
}

int mi_plan_info(const struct mi_plan *p, struct mi_plan_info *info)
{
	if (!p || !info)
		return -EINVAL;
	memset(info, 0, sizeof(*info));
	info->model = p->model ? p->model : "";
	info->isa = p->isa ? p->isa : "";
	info->threads = p->threads;
	info->nodes = p->n;
	info->fingerprint = p->fingerprint;
	return 0;
}

int mi_plan_node(const struct mi_plan *p, int index, struct mi_plan_node *nd)
{
	const struct mi_plan_entry *e;

	if (!p || !nd)
		return -EINVAL;
	if (index < 0 || index >= p->n)
		return -ENOENT;
	e = &p->e[index];
	memset(nd, 0, sizeof(*nd));
	nd->name = e->name;
	nd->op = e->op;
	nd->device = e->device;
	nd->variant = e->variant;
	nd->layout_in = e->lay_in;
	nd->layout_out = e->lay_out;
	nd->precision = e->precision;
	nd->qparams = e->qparams;
	nd->threads = e->threads;
	nd->nfused = e->nfused;
	nd->fused = (const char *const *)e->fused;
	return 0;
}

int mi_plan_set(struct mi_plan *p, const char *name, const char *variant,
		const char *const *fused, int nfused)
{
	struct mi_plan_entry *e, ne = { 0 };
	const char *op = "";
	int err = 0;

	if (!p || !name || !variant || nfused < 0 || (nfused && !fused))
		return mi_set_error(-EINVAL, "mi_plan_set: bad arguments");
	e = mi_plan_find(p, name);
	if (e)
		op = e->op;
	ne.name = strdup(name);
	ne.op = strdup(op);
	ne.device = strdup(e ? e->device : "cpu");
	ne.job = e ? mi_plan_entry_job(e) : 0;
	ne.job_dev = ne.job ? strdup(e->device) : NULL;
	ne.variant = strdup(variant);
	ne.lay_in = strdup("auto");
	ne.lay_out = strdup("auto");
	ne.precision = strdup("auto");
	ne.threads = e ? e->threads : 0;
	if (!ne.name || !ne.op || !ne.device || !ne.variant || !ne.lay_in ||
	    !ne.lay_out || !ne.precision || (ne.job && !ne.job_dev))
		err = -ENOMEM;
	for (int i = 0; !err && i < nfused; i++)
		err = mi_plan_strv_add(&ne.fused, &ne.nfused, fused[i]);
	if (!err && !e)
		err = mi_plan_entry_add(p, &e);
	if (err) {
		mi_plan_entry_fini(&ne);
		return mi_set_error(err, "out of memory");
	}
	if (e->name)
		mi_plan_entry_fini(e);
	*e = ne;
	return 0;
}

int mi_plan_unset(struct mi_plan *p, const char *name)
{
	struct mi_plan_entry *e = p && name ? mi_plan_find(p, name) : NULL;

	if (!e)
		return -ENOENT;
	mi_plan_entry_fini(e);
	memmove(e, e + 1, (p->e + p->n - e - 1) * sizeof(*e));
	p->n--;
	return 0;
}

int mi_plan_set_threads(struct mi_plan *p, const char *name, int threads)
{
	struct mi_plan_entry *e;

	if (!p || !name || threads < 0)
		return mi_set_error(-EINVAL, "mi_plan_set_threads: bad arguments");
	e = mi_plan_find(p, name);
	if (!e)
		return mi_set_error(-ENOENT, "mi_plan_set_threads: no node '%s' in the plan",
				    name);
	e->threads = threads;
	return 0;
}

int mi_plan_write(const struct mi_plan *p, FILE *f)
{
	if (!p || !f)
		return mi_set_error(-EINVAL, "mi_plan_write: bad arguments");
	if (mi_plan_json_write(p, f))
		return mi_set_error(-EIO, "cannot write the plan");
	return 0;
}

int mi_plan_parse(const char *buf, size_t len, struct mi_plan **planp)
{
	char err[256];
	int ret;

	if (!buf || !planp)
		return mi_set_error(-EINVAL, "mi_plan_parse: bad arguments");
	ret = mi_plan_json_parse(buf, len, planp, err, sizeof(err));
	return ret ? mi_set_error(ret, "%s", err) : 0;
}

int mi_plan_read(const char *path, struct mi_plan **planp)
{
	char err[256];
	void *buf;
	size_t len;
	int ret;

	if (!path || !planp)
		return mi_set_error(-EINVAL, "mi_plan_read: bad arguments");
	ret = mi_read_file(path, 64u << 20, &buf, &len);
	if (ret)
		return mi_set_error(ret, "%s: %s", path, strerror(-ret));
	ret = mi_plan_json_parse(buf, len, planp, err, sizeof(err));
	free(buf);
	return ret ? mi_set_error(ret, "%s: %s", path, err) : 0;
}

/* ---- the model's planning state ----------------------------------------- */
static void req_free(struct mi_plan_req *req, int n)
{
	if (!req)
		return;
	for (int i = 0; i < n; i++)
		free(req[i].fused);
	free(req);
}

struct mi_plan_ctx *mi_model_plan_ctx(struct mi_model *m)
{
	if (!m->plan_ctx)
		m->plan_ctx = calloc(1, sizeof(*m->plan_ctx));
	return m->plan_ctx;
}

void mi_model_plan_fini(struct mi_model *m)
{
	if (m->plan_ctx) {
		mi_plan_ctx_reset(m->plan_ctx);
		req_free(m->plan_ctx->req, m->plan_ctx->nnodes);
		free(m->plan_ctx);
		m->plan_ctx = NULL;
	}
	mi_plan_free(m->plan);
	m->plan = NULL;
	mi_plan_cands_free(m->cands);
	m->cands = NULL;
}

/* ---- node names ------------------------------------------------------------ */
/* A node's name in plans: its own if it has one no other node has, else
 * "<op>#<index>" (indices of the normalized graph: the fingerprint makes
 * sure a plan meets the same graph). */
static char **node_labels(const struct mi_graph *g)
{
	char **l = calloc(g->nnodes + 1, sizeof(*l));

	if (!l)
		return NULL;
	for (int i = 0; i < g->nnodes; i++) {
		const struct mi_node *n = &g->nodes[i];
		bool uniq = n->name && n->name[0];
		char buf[128];

		for (int j = 0; uniq && j < g->nnodes; j++)
			uniq = j == i || !g->nodes[j].name ||
			       strcmp(g->nodes[j].name, n->name);
		if (uniq && !strchr(n->name, '#')) {
			l[i] = strdup(n->name);
		} else {
			snprintf(buf, sizeof(buf), "%s#%d", n->op_type, i);
			l[i] = strdup(buf);
		}
		if (!l[i]) {
			strv_free(l, i);
			return NULL;
		}
	}
	return l;
}

int mi_plan_label_find(char **l, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(l[i], name))
			return i;
	return -1;
}

/* ---- read back ------------------------------------------------------------- */
static bool is_live_now(const struct mi_plan_rb *r, int i)
{
	return !r->m->g.nodes[i].dead;
}

/* The owner of node i, absorbed by planning (see the head comment). */
static int find_owner(struct mi_plan_rb *r, int i, int depth)
{
	const struct mi_graph *g = &r->m->g;
	int t = r->c->out0[i];

	if (t < 0 || depth > 16)
		return -1;
	if (r->producer[t] >= 0)
		return r->producer[t];
	for (int k = 0; k < g->nnodes; k++) {
		if (!r->c->live[k] || k == i)
			continue;
		for (int j = r->c->in_off[k]; j < r->c->in_off[k + 1]; j++) {
			int o;

			if (r->c->in_idx[j] != t)
				continue;
			if (is_live_now(r, k))
				return k;
			o = find_owner(r, k, depth + 1);
			if (o >= 0)
				return o;
		}
	}
	return -1;
}

int mi_plan_prov_of(const struct mi_plan_rb *r, int i)
{
	const struct mi_node *n = &r->m->g.nodes[i];

	if (!n->priv)
		return MI_PROV_NONE;
	return r->c->prov ? r->c->prov[i] : MI_PROV_NONE;
}

static void lower(char *d, const char *s, size_t len)
{
	size_t k = 0;

	for (; s[k] && k + 1 < len; k++)
		d[k] = (char)tolower((unsigned char)s[k]);
	d[k] = 0;
}

static void variant_of(const struct mi_plan_rb *r, int i, char *buf, size_t len)
{
	const struct mi_node *n = &r->m->g.nodes[i];
	const struct mi_cpu_kernel_hdr *h = n->priv;
	char op[64];

	if (!h) {
		snprintf(buf, len, "ref");
		return;
	}
	if (h->variant) {
		snprintf(buf, len, "%s", h->variant);
		return;
	}
	lower(op, n->op_type, sizeof(op));
	snprintf(buf, len, "%s.%s", op, mi_cpu_provider_name(mi_plan_prov_of(r, i)));
}

void mi_plan_layout_of(const struct mi_plan_rb *r, int i, bool out, char *buf,
		      size_t len)
{
	struct mi_graph *g = &r->m->g;
	struct mi_node *n = &g->nodes[i];
	const struct mi_cpu_kernel_hdr *h = n->priv;
	const struct mi_tensor *t = out ? mi_out(g, n, 0) : mi_in(g, n, 0);
	int lay = h ? (out ? h->lay_out : h->lay_in) : MI_LAYOUT_NCHW;
	int blk = h ? (out ? h->blk_out : h->blk_in) : 0;
	int prov = mi_plan_prov_of(r, i);

	if (lay == MI_LAYOUT_DEFAULT &&
	    (prov == MI_PROV_INT8 || prov == MI_PROV_NCHWC)) {
		snprintf(buf, len, "auto");
		return;
	}
	if (lay == MI_LAYOUT_NCHWC && blk > 0) {
		snprintf(buf, len, "NCHW%dc", blk);
		return;
	}
	if (lay == MI_LAYOUT_NHWC) {
		snprintf(buf, len, "NHWC");
		return;
	}
	snprintf(buf, len, t && t->ndim == 4 ? "NCHW" : "plain");
}

const char *mi_plan_precision_of(const struct mi_plan_rb *r, int i)
{
	struct mi_graph *g = &r->m->g;
	const struct mi_tensor *t = mi_out(g, &g->nodes[i], 0);

	if (mi_plan_prov_of(r, i) == MI_PROV_INT8)
		return "int8";
	if (!t || t->dtype == MI_DT_FLOAT)
		return "fp32";
	if (!mi_dtype_size(t->dtype))
		return "auto";	/* known only at run time */
	return mi_dtype_name(t->dtype);
}

void mi_plan_rb_fini(struct mi_plan_rb *r)
{
	if (r->labels)
		strv_free(r->labels, r->m->g.nnodes);
	free(r->producer);
	free(r->owner);
}

int mi_plan_rb_init(struct mi_plan_rb *r, struct mi_model *m)
{
	struct mi_graph *g = &m->g;

	memset(r, 0, sizeof(*r));
	r->m = m;
	r->c = m->plan_ctx;
	if (!m->prepared || !r->c || !r->c->live || r->c->nnodes != g->nnodes)
		return mi_set_error(-EAGAIN,
			"%s: the model is not planned yet (its input shapes are unknown until the first run)",
			m->label);
	r->labels = node_labels(g);
	r->producer = malloc((g->ntensors + 1) * sizeof(int));
	r->owner = malloc((g->nnodes + 1) * sizeof(int));
	if (!r->labels || !r->producer || !r->owner) {
		mi_plan_rb_fini(r);
		return mi_set_error(-ENOMEM, "out of memory");
	}
	for (int t = 0; t < g->ntensors; t++)
		r->producer[t] = -1;
	for (int i = 0; i < g->nnodes; i++)
		if (!g->nodes[i].dead)
			for (int j = 0; j < g->nodes[i].noutputs; j++)
				if (g->nodes[i].outputs[j] >= 0)
					r->producer[g->nodes[i].outputs[j]] = i;
	for (int i = 0; i < g->nnodes; i++)
		r->owner[i] = !r->c->live[i] ? -1 :
			      !g->nodes[i].dead ? i : find_owner(r, i, 0);
	return 0;
}

int mi_plan_readback(struct mi_model *m, struct mi_plan_rb *r, struct mi_plan **planp)
{
	struct mi_graph *g = &m->g;
	struct mi_plan *p = calloc(1, sizeof(*p));
	int err = 0;

	if (!p)
		return -ENOMEM;
	p->model = strdup(m->label ? m->label : "");
	p->isa = strdup(mi_cpu_isa_name(r->c->isa));
	p->threads = r->c->nthreads;
	p->fingerprint = r->c->fingerprint;
	p->max_job_us = mi_place_max_job(m) / 1000;
	if (!p->model || !p->isa)
		err = -ENOMEM;
	for (int i = 0; !err && i < g->nnodes; i++) {
		struct mi_plan_entry *e;
		char v[96], li[32], lo[32];

		if (r->owner[i] != i)
			continue;
		err = mi_plan_entry_add(p, &e);
		if (err)
			break;
		variant_of(r, i, v, sizeof(v));
		mi_plan_layout_of(r, i, false, li, sizeof(li));
		mi_plan_layout_of(r, i, true, lo, sizeof(lo));
		e->name = strdup(r->labels[i]);
		e->op = strdup(g->nodes[i].op_type);
		e->device = strdup(mi_place_node_device(m, i));
		/* the grouping into jobs is the plan's too: the default rule
		 * splits by measured rates, which another run measures anew */
		e->job = mi_place_node_job(m, i) + 1;
		e->job_dev = e->job ? strdup(e->device) : NULL;
		e->variant = strdup(v);
		e->lay_in = strdup(li);
		e->lay_out = strdup(lo);
		e->precision = strdup(mi_plan_precision_of(r, i));
		if (mi_plan_prov_of(r, i) == MI_PROV_INT8)
			e->qparams = strdup("model");
		e->threads = r->c->req && r->c->req[i].serial ? 1 :
							       r->c->nthreads;
		if (!e->name || !e->op || !e->device || !e->variant ||
		    !e->lay_in || !e->lay_out || !e->precision ||
		    (e->job && !e->job_dev) ||
		    (mi_plan_prov_of(r, i) == MI_PROV_INT8 && !e->qparams))
			err = -ENOMEM;
		for (int k = 0; !err && k < g->nnodes; k++)
			if (k != i && r->owner[k] == i)
				err = mi_plan_strv_add(&e->fused, &e->nfused,
						       r->labels[k]);
	}
	for (int i = 0; !err && i < g->nnodes; i++)
		if (r->c->live[i] && r->owner[i] < 0)
			err = mi_plan_strv_add(&p->removed, &p->nremoved,
					       r->labels[i]);
	if (err) {
		mi_plan_free(p);
		return err;
	}
	*planp = p;
	return 0;
}

static int replan(struct mi_model *m);

int mi_plan_settle(struct mi_model *m)
{
	int err;

	if (m->prepared || !m->place || !m->plan_ctx || !m->plan_ctx->live)
		return 0;
	err = replan(m);
	return err ? mi_set_error(err, "%s: placing again failed: %s",
				  m->label,
				  m->g.err[0] ? m->g.err : strerror(-err)) : 0;
}

int mi_model_plan_get(struct mi_model *m, struct mi_plan **planp)
{
	struct mi_plan_rb r;
	int err;

	if (!m || !planp)
		return mi_set_error(-EINVAL, "mi_model_plan_get: bad arguments");
	err = mi_plan_settle(m);
	if (err)
		return err;
	err = mi_plan_rb_init(&r, m);
	if (err)
		return err;
	err = mi_plan_readback(m, &r, planp);
	mi_plan_rb_fini(&r);
	return err ? mi_set_error(err, "out of memory") : 0;
}

/* ---- variants --------------------------------------------------------------- */
/* The provider of variant name for op, or -1 for a name none has: "ref",
 * a registry name, or "<op>.<provider>[.<detail>]" (lower-case op). */
int mi_plan_variant_prov(const char *op, const char *v)
{
	static const int named[] = { MI_PROV_INT8, MI_PROV_NCHWC,
				     MI_PROV_ELTWISE };
	const char *names[16];
	char lop[64], pre[96];
	int n;

	if (!strcmp(v, "ref"))
		return MI_PROV_REF;
	n = mi_cpu_nchw_variants(op, names, 16);
	for (int i = 0; i < n && i < 16; i++)
		if (!strcmp(names[i], v))
			return MI_PROV_NCHW;
	lower(lop, op, sizeof(lop));
	for (size_t i = 0; i < sizeof(named) / sizeof(named[0]); i++) {
		size_t k;

		snprintf(pre, sizeof(pre), "%s.%s", lop,
			 mi_cpu_provider_name(named[i]));
		k = strlen(pre);
		if (!strncmp(v, pre, k) && (!v[k] || (v[k] == '.' && v[k + 1])))
			return named[i];
	}
	return -1;
}

static bool layout_ok(const char *l)
{
	char *end;
	long b;

	if (!strcmp(l, "auto") || !strcmp(l, "NCHW") || !strcmp(l, "NHWC") ||
	    !strcmp(l, "plain"))
		return true;
	if (strncmp(l, "NCHW", 4))
		return false;
	b = strtol(l + 4, &end, 10);
	return b > 0 && b <= 256 && !strcmp(end, "c");
}

static bool precision_ok(const char *p)
{
	if (!strcmp(p, "auto") || !strcmp(p, "fp32") || !strcmp(p, "int8"))
		return true;
	for (int dt = 2; dt <= MI_DT_BFLOAT16; dt++)
		if (mi_dtype_size(dt) && !strcmp(p, mi_dtype_name(dt)))
			return true;
	return false;
}

static bool same_or_auto(const char *want, const char *got)
{
	return !strcmp(want, "auto") || !strcmp(want, got);
}

/* ---- apply ------------------------------------------------------------------- */
static int replan(struct mi_model *m)
{
	struct mi_graph *g = &m->g;
	int32_t *nd = malloc((g->ninputs + 1) * sizeof(*nd));
	int64_t *dims = malloc((size_t)(g->ninputs + 1) * MI_MAX_DIMS *
			       sizeof(*dims));
	int err;

	if (!nd || !dims) {
		free(nd);
		free(dims);
		return -ENOMEM;
	}
	memcpy(nd, m->bound_ndim, g->ninputs * sizeof(*nd));
	memcpy(dims, m->bound_dims,
	       (size_t)g->ninputs * MI_MAX_DIMS * sizeof(*dims));
	err = mi_model_prepare(m, nd, dims);
	free(nd);
	free(dims);
	return err;
}

/* The plan's constraints per node, checked against the model; pins,
 * jpins: per node the device slot + 1 and the plan's job + 1. */
static int build_req(struct mi_model *m, const struct mi_plan *p,
		     char **labels, struct mi_plan_req **reqp, int *pins,
		     int *jpins, char *why, size_t wlen)
{
	struct mi_graph *g = &m->g;
	struct mi_plan_ctx *c = m->plan_ctx;
	struct mi_plan_req *req = calloc(g->nnodes + 1, sizeof(*req));
	unsigned char *seen = calloc(g->nnodes + 1, 1);
	int err = -EINVAL;

	if (!req || !seen) {
		err = -ENOMEM;
		snprintf(why, wlen, "out of memory");
		goto out;
	}
#define BAD(...) do { snprintf(why, wlen, __VA_ARGS__); goto out; } while (0)
	for (int k = 0; k < p->n; k++) {
		const struct mi_plan_entry *e = &p->e[k];
		int i = mi_plan_label_find(labels, g->nnodes, e->name), prov;
		int slot;
		char dwhy[160];

		if (i < 0 || !c->live[i])
			BAD("node '%s': no such node in the model", e->name);
		if (seen[i])
			BAD("node '%s': listed twice", e->name);
		seen[i] = 1;
		/* mi_plan_set() of a node the plan did not list: no op */
		if (e->op[0] && strcmp(e->op, g->nodes[i].op_type))
			BAD("node '%s': the plan says op %s, the model has %s",
			    e->name, e->op, g->nodes[i].op_type);
		slot = mi_place_slot(m, e->device, dwhy, sizeof(dwhy));
		if (slot < 0)
			BAD("node '%s': %s", e->name, dwhy);
		if (pins)
			pins[i] = slot + 1;
		if (jpins)
			jpins[i] = slot ? mi_plan_entry_job(e) : 0;
		prov = mi_plan_variant_prov(g->nodes[i].op_type, e->variant);
		if (prov < 0)
			BAD("node '%s': unknown variant '%s' for %s", e->name,
			    e->variant, g->nodes[i].op_type);
		if (!layout_ok(e->lay_in) || !layout_ok(e->lay_out))
			BAD("node '%s': bad layout '%s' (NCHW, NHWC, NCHW<k>c, plain or auto)",
			    e->name, layout_ok(e->lay_in) ? e->lay_out : e->lay_in);
		if (!precision_ok(e->precision))
			BAD("node '%s': bad precision '%s'", e->name,
			    e->precision);
		if (e->threads && e->threads != c->nthreads && e->threads != 1)
			BAD("node '%s': %d threads: a node runs on 1 thread or on all the model's %d",
			    e->name, e->threads, c->nthreads);
		if (e->threads == 1 && c->nthreads > 1) {
			if (slot)
				BAD("node '%s': a thread split is for CPU nodes, it is on %s",
				    e->name, e->device);
			req[i].serial = true;
		}
		req[i].variant = e->variant;
		req[i].prov = prov;
		req[i].fused = calloc(e->nfused + 1, sizeof(int));
		if (!req[i].fused) {
			err = -ENOMEM;
			BAD("out of memory");
		}
	}
	for (int k = 0; k < p->n; k++) {
		const struct mi_plan_entry *e = &p->e[k];
		int i = mi_plan_label_find(labels, g->nnodes, e->name);

		for (int f = 0; f < e->nfused; f++) {
			int j = mi_plan_label_find(labels, g->nnodes, e->fused[f]);

			if (j < 0 || !c->live[j])
				BAD("node '%s': fuses '%s', no such node in the model",
				    e->name, e->fused[f]);
			if (seen[j])
				BAD("node '%s': '%s' is listed twice", e->name,
				    e->fused[f]);
			seen[j] = 1;
			req[i].fused[req[i].nfused++] = j;
			if (pins)
				pins[j] = pins[i];
			if (jpins)
				jpins[j] = jpins[i];
		}
	}
	for (int k = 0; k < p->nremoved; k++) {
		int j = mi_plan_label_find(labels, g->nnodes, p->removed[k]);

		if (j < 0 || !c->live[j])
			BAD("removed node '%s': no such node in the model",
			    p->removed[k]);
		if (seen[j])
			BAD("node '%s': listed twice", p->removed[k]);
		seen[j] = 1;
	}
	for (int i = 0; i < g->nnodes; i++)
		if (c->live[i] && !seen[i])
			BAD("node '%s': not in the plan", labels[i]);
#undef BAD
	err = 0;
	*reqp = req;
	req = NULL;
out:
	free(seen);
	req_free(req, g->nnodes);
	return err;
}

static bool strv_has(char *const *v, int n, const char *s)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(v[i], s))
			return true;
	return false;
}

/*
 * Compare what the model runs (got) with the plan.  Returns 0 when they
 * agree, 1 when a node was marked early (plan again), -EINVAL with the
 * first difference in why.
 */
static int compare(struct mi_model *m, const struct mi_plan *want,
		   const struct mi_plan *got, struct mi_plan_rb *r,
		   struct mi_plan_req *req, char *why, size_t wlen)
{
	struct mi_graph *g = &m->g;
	int again = 0;

	why[0] = 0;
#define DIFF(...) do { if (!why[0]) snprintf(why, wlen, __VA_ARGS__); } while (0)
	for (int k = 0; k < want->n; k++) {
		const struct mi_plan_entry *e = &want->e[k];
		int i = mi_plan_label_find(r->labels, g->nnodes, e->name);
		const struct mi_plan_entry *ge = mi_plan_find(got, e->name);
		struct mi_plan_req *q = &req[i];
		bool movable = q->prov == MI_PROV_REF || q->prov == MI_PROV_NCHW;

		if (!ge) {
			int o = r->owner[i];

			if (movable && !q->early) {
				q->early = true;
				again = 1;
				continue;
			}
			if (o >= 0)
				DIFF("node '%s': fused into '%s' by its provider, the plan runs it on its own",
				     e->name, r->labels[o]);
			else
				DIFF("node '%s': removed by planning, the plan runs it",
				     e->name);
			continue;
		}
		if (strcmp(e->variant, ge->variant)) {
			int prov = mi_plan_prov_of(r, i);

			if (movable && !q->early && prov != q->prov) {
				q->early = true;
				again = 1;
				continue;
			}
			DIFF("node '%s': variant '%s' is not realizable here (its provider chose '%s')",
			     e->name, e->variant, ge->variant);
			continue;
		}
		if (!same_or_auto(e->lay_in, ge->lay_in) ||
		    !same_or_auto(e->lay_out, ge->lay_out))
			DIFF("node '%s': layout %s -> %s is not what %s gives here (%s -> %s)",
			     e->name, e->lay_in, e->lay_out, e->variant,
			     ge->lay_in, ge->lay_out);
		if (!same_or_auto(e->precision, ge->precision))
			DIFF("node '%s': precision %s is not what %s gives (%s)",
			     e->name, e->precision, e->variant, ge->precision);
		for (int f = 0; f < e->nfused; f++)
			if (!strv_has(ge->fused, ge->nfused, e->fused[f]))
				DIFF("node '%s': fusing '%s' is not legal here",
				     e->name, e->fused[f]);
		for (int f = 0; f < ge->nfused; f++)
			if (!strv_has(e->fused, e->nfused, ge->fused[f])) {
				int j = mi_plan_label_find(r->labels, g->nnodes,
						   ge->fused[f]);
				struct mi_plan_req *qj = j >= 0 ? &req[j] : NULL;

				/* the plan runs it on its own: pin it first */
				if (qj && qj->variant && !qj->early &&
				    (qj->prov == MI_PROV_REF ||
				     qj->prov == MI_PROV_NCHW)) {
					qj->early = true;
					again = 1;
					continue;
				}
				DIFF("node '%s': %s also fuses '%s', which the plan does not list",
				     e->name, e->variant, ge->fused[f]);
			}
	}
#undef DIFF
	if (again)
		return 1;
	return why[0] ? -EINVAL : 0;
}

static void set_req(struct mi_model *m, struct mi_plan_req *req)
{
	struct mi_plan_ctx *c = m->plan_ctx;

	req_free(c->req, c->nnodes);
	c->req = req;
}

int mi_model_plan_apply(struct mi_model *m, const struct mi_plan *plan)
{
	struct mi_plan_ctx *c;
	struct mi_plan_req *req = NULL, *old;
	struct mi_plan *copy = NULL, *got = NULL;
	struct mi_plan_rb r;
	char why[600];
	int err, round, *pins = NULL, *old_pins = NULL;
	int *jpins = NULL, *old_jpins = NULL;
	uint64_t old_max_job = mi_place_max_job(m);

	if (!m || !plan)
		return mi_set_error(-EINVAL, "mi_model_plan_apply: bad arguments");
	err = mi_plan_settle(m);
	if (err)
		return err;
	err = mi_plan_rb_init(&r, m);
	if (err)
		return err;
	c = m->plan_ctx;
	if (plan->fingerprint != c->fingerprint) {
		int known = 0;

		for (int k = 0; k < plan->n; k++)
			known += mi_plan_label_find(r.labels, m->g.nnodes,
					    plan->e[k].name) >= 0;
		mi_plan_rb_fini(&r);
		if (known * 2 < plan->n || !plan->n)
			return mi_set_error(-EINVAL,
				"%s: the plan is for another model ('%s'; fingerprint %016llx, this model's %016llx)",
				m->label, plan->model ? plan->model : "",
				(unsigned long long)plan->fingerprint,
				(unsigned long long)c->fingerprint);
		return mi_set_error(-EINVAL,
			"%s: stale plan: the graph or its input shapes changed since it was made (fingerprint %016llx, now %016llx)",
			m->label, (unsigned long long)plan->fingerprint,
			(unsigned long long)c->fingerprint);
	}
	if (plan->threads && plan->threads != c->nthreads) {
		mi_plan_rb_fini(&r);
		return mi_set_error(-EINVAL,
			"%s: the plan was made for %d threads, the model runs %d",
			m->label, plan->threads, c->nthreads);
	}
	if (plan->isa && plan->isa[0] && strcmp(plan->isa, mi_cpu_isa_name(c->isa))) {
		mi_plan_rb_fini(&r);
		return mi_set_error(-EINVAL,
			"%s: the plan was made for ISA %s, the model uses %s",
			m->label, plan->isa, mi_cpu_isa_name(c->isa));
	}
	pins = calloc(m->g.nnodes + 1, sizeof(*pins));
	jpins = calloc(m->g.nnodes + 1, sizeof(*jpins));
	err = mi_plan_dup(plan, &copy);
	if (!err && (!pins || !jpins))
		err = -ENOMEM;
	if (!err)
		err = build_req(m, copy, r.labels, &req, pins, jpins, why,
				sizeof(why));
	if (!err && m->place) {
		/* placement reads the pins while planning */
		old_pins = m->place->pin;
		old_jpins = m->place->jpin;
		m->place->pin = pins;
		m->place->jpin = jpins;
		m->place->npin = m->g.nnodes;
		pins = NULL;
		jpins = NULL;
		mi_place_set_max_job(m, copy->max_job_us * 1000);
	}
	free(pins);
	free(jpins);
	mi_plan_rb_fini(&r);
	if (err) {
		mi_plan_free(copy);
		return err == -ENOMEM ? mi_set_error(err, "out of memory") :
					mi_set_error(err, "%s: %s", m->label, why);
	}
	/* from here on a failure plans again with the old constraints */
	old = c->req;
	c->req = req;
	for (round = 0; round < 8; round++) {
		err = replan(m);
		if (err) {
			snprintf(why, sizeof(why), "planning failed: %s",
				 m->g.err[0] ? m->g.err : strerror(-err));
			err = -EINVAL;
			break;
		}
		err = mi_plan_rb_init(&r, m);
		if (!err) {
			err = mi_plan_readback(m, &r, &got);
			if (!err)
				err = compare(m, copy, got, &r, req, why,
					      sizeof(why));
			mi_plan_free(got);
			got = NULL;
			mi_plan_rb_fini(&r);
		}
		if (err != 1)
			break;
	}
	if (err == 1) {
		snprintf(why, sizeof(why), "the plan's pins did not settle");
		err = -EINVAL;
	}
	if (err) {
		c->req = old;
		req_free(req, c->nnodes);
		mi_plan_free(copy);
		if (m->place) {
			free(m->place->pin);
			free(m->place->jpin);
			m->place->pin = old_pins;
			m->place->jpin = old_jpins;
			old_pins = NULL;
			old_jpins = NULL;
			if (!m->place->pin)
				m->place->npin = 0;
			mi_place_set_max_job(m, old_max_job);
		}
		replan(m);
		free(old_pins);
		free(old_jpins);
		return mi_set_error(err, "%s: %s", m->label, why);
	}
	req_free(old, c->nnodes);
	free(old_pins);
	free(old_jpins);
	mi_plan_free(m->plan);
	m->plan = copy;
	mi_plan_cands_free(m->cands);
	m->cands = NULL;
	return 0;
}

int mi_model_plan_reset(struct mi_model *m)
{
	int err;

	if (!m || !m->plan_ctx)
		return mi_set_error(-EINVAL, "mi_model_plan_reset: bad arguments");
	set_req(m, NULL);
	mi_place_pin(m, NULL, 0);
	mi_place_set_max_job(m, 0);
	mi_plan_free(m->plan);
	m->plan = NULL;
	err = m->prepared ? replan(m) : 0;
	return err ? mi_set_error(err, "%s: planning failed", m->label) : 0;
}
