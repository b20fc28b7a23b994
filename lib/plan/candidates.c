// SPDX-License-Identifier: MIT
/*
 * The action space: the legal (variant, layout, precision, fusion)
 * choices of one node.
 *
 * A node's candidates are what it runs now (with its fusion), its
 * reference op (always legal, nothing fused), and every variant of the
 * fp32 NCHW registry whose constraints hold for it, unfused and, where
 * the node fuses consumers now, with that fusion.  The int8 and blocked
 * fp32 providers choose by their own rules (a plan may keep what they
 * chose, or move the node to the registry or to its reference op); what
 * a choice does to the neighbours' layouts shows when the plan is
 * applied.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "cpu/nchwc.h"
#include "plan/plan-impl.h"

void mi_plan_cands_free(struct mi_plan_cands *c)
{
	if (!c)
		return;
	for (int i = 0; i < c->n; i++)
		free(c->fused[i]);
	free(c->fused);
	free(c->c);
	for (int i = 0; i < c->nstrs; i++)
		free(c->strs[i]);
	free(c->strs);
	free(c);
}

static const char *keep(struct mi_plan_cands *c, const char *s)
{
	char **ns;

	if (!s)
		return NULL;
	ns = realloc(c->strs, (c->nstrs + 1) * sizeof(*ns));
	if (!ns)
		return NULL;
	c->strs = ns;
	ns[c->nstrs] = strdup(s);
	return ns[c->nstrs] ? ns[c->nstrs++] : NULL;
}

static int add(struct mi_plan_cands *c, const char *variant, const char *li,
	       const char *lo, const char *prec, char *const *fused,
	       int nfused, int current, const char *why)
{
	struct mi_plan_candidate *nc, *x;
	const char ***nf;

	for (int i = 0; i < c->n; i++)
		if (!strcmp(c->c[i].variant, variant) &&
		    c->c[i].nfused == nfused)
			return 0;
	nc = realloc(c->c, (c->n + 1) * sizeof(*nc));
	if (!nc)
		return -ENOMEM;
	c->c = nc;
	nf = realloc(c->fused, (c->n + 1) * sizeof(*nf));
	if (!nf)
		return -ENOMEM;
	c->fused = nf;
	nf[c->n] = calloc(nfused + 1, sizeof(char *));
	if (!nf[c->n])
		return -ENOMEM;
	x = &nc[c->n];
	memset(x, 0, sizeof(*x));
	x->variant = keep(c, variant);
	x->layout_in = keep(c, li);
	x->layout_out = keep(c, lo);
	x->precision = keep(c, prec);
	x->why = keep(c, why);
	x->is_current = current;
	for (int i = 0; i < nfused; i++)
		if (!(nf[c->n][i] = keep(c, fused[i])))
			return -ENOMEM;
	x->nfused = nfused;
	x->fused = nf[c->n];
	c->n++;
	if (!x->variant || !x->layout_in || !x->layout_out || !x->precision ||
	    !x->why)
		return -ENOMEM;
	return 0;
}

static const char *why_current(const struct mi_model *m, int prov)
{
	if (m->plan)
		return "named by the applied plan";
	switch (prov) {
	case MI_PROV_INT8:
		return "default: the int8 provider (asked first) matched a quantized pattern";
	case MI_PROV_NCHWC:
		return "default: the blocked fp32 provider (asked before the NCHW registry) took it";
	case MI_PROV_NCHW:
		return "default: the first NCHW registry variant whose constraints hold";
	case MI_PROV_ELTWISE:
		return "default: the element-wise / data-movement provider took it";
	default:
		return "default: no provider has a kernel for it";
	}
}

/* Does registry variant v support node i as the graph was before
 * planning (its own inputs and output, not a fused node's)? */
static int nchw_supports(struct mi_plan_rb *r, int i, const char *v,
			 bool *by_rule)
{
	struct mi_graph *g = &r->m->g;
	struct mi_node *n = &g->nodes[i];
	int *in = n->inputs, nin = n->ninputs, out0 = -1, err;

	n->inputs = r->c->in_idx + r->c->in_off[i];
	n->ninputs = r->c->in_off[i + 1] - r->c->in_off[i];
	if (n->noutputs > 0) {
		out0 = n->outputs[0];
		n->outputs[0] = r->c->out0[i];
	}
	err = mi_cpu_nchw_supports(g, n, v, r->c->isa, by_rule);
	n->inputs = in;
	n->ninputs = nin;
	if (n->noutputs > 0)
		n->outputs[0] = out0;
	return err;
}

/* The blocked pass's conv variants for node i, on the graph as it was
 * before planning (as nchw_supports). */
static int nchwc_variants(struct mi_plan_rb *r, int i, const char **names,
			  int max)
{
	struct mi_graph *g = &r->m->g;
	struct mi_node *n = &g->nodes[i];
	int *in = n->inputs, nin = n->ninputs, out0 = -1, k;

	n->inputs = r->c->in_idx + r->c->in_off[i];
	n->ninputs = r->c->in_off[i + 1] - r->c->in_off[i];
	if (n->noutputs > 0) {
		out0 = n->outputs[0];
		n->outputs[0] = r->c->out0[i];
	}
	k = mi_cpu_nchwc_conv_variants(g, n, r->c->isa, names, max);
	n->inputs = in;
	n->ninputs = nin;
	if (n->noutputs > 0)
		n->outputs[0] = out0;
	return k;
}

int mi_plan_candidates(struct mi_model *m, const char *node,
		       const struct mi_plan_candidate **cands)
{
	struct mi_plan_cands *c = NULL;
	struct mi_plan *got = NULL;
	const struct mi_plan_entry *ge;
	struct mi_plan_rb r;
	const char *names[16];
	char lay[32], why[160];
	int i, err, nv;

	if (!m || !node || !cands)
		return mi_set_error(-EINVAL, "mi_plan_candidates: bad arguments");
	err = mi_plan_rb_init(&r, m);
	if (err)
		return err;
	i = mi_plan_label_find(r.labels, m->g.nnodes, node);
	if (i < 0 || !r.c->live[i]) {
		mi_plan_rb_fini(&r);
		return mi_set_error(-ENOENT, "%s: no node '%s'", m->label, node);
	}
	c = calloc(1, sizeof(*c));
	err = c ? mi_plan_readback(m, &r, &got) : -ENOMEM;
	if (err)
		goto out;
	ge = mi_plan_find(got, node);
	if (ge)
		err = add(c, ge->variant, ge->lay_in, ge->lay_out,
			  ge->precision, ge->fused, ge->nfused, 1,
			  why_current(m, mi_plan_prov_of(&r, i)));
	mi_plan_layout_of(&r, i, false, lay, sizeof(lay));
	if (!err && r.owner[i] >= 0 && r.owner[i] != i) {
		snprintf(why, sizeof(why),
			 "the reference op; legal on its own when '%s' does not fuse it",
			 r.labels[r.owner[i]]);
		err = add(c, "ref", lay, lay, mi_plan_precision_of(&r, i), NULL,
			  0, 0, why);
	} else if (!err) {
		err = add(c, "ref", lay, lay, "fp32", NULL, 0,
			  ge && !strcmp(ge->variant, "ref"),
			  "the reference op: always legal");
	}
	/* a blocked conv may switch between the blocked pass's kernels:
	 * the chain keeps its layouts and fusions */
	if (!err && ge && mi_plan_prov_of(&r, i) == MI_PROV_NCHWC) {
		nv = nchwc_variants(&r, i, names, 16);
		for (int k = 0; !err && k < nv && k < 16; k++)
			if (strcmp(ge->variant, names[k]))
				err = add(c, names[k], ge->lay_in, ge->lay_out,
					  ge->precision, ge->fused, ge->nfused,
					  0, "legal; the blocked pass's cost rule took the other kernel");
	}
	nv = mi_cpu_nchw_variants(m->g.nodes[i].op_type, names, 16);
	for (int k = 0; !err && k < nv && k < 16; k++) {
		bool by_rule = false;
		int s = nchw_supports(&r, i, names[k], &by_rule);
		bool cur = ge && !strcmp(ge->variant, names[k]);

		if (s == -ENOMEM)
			err = s;
		if (s)
			continue;
		snprintf(why, sizeof(why), "%s",
			 !by_rule ? "legal; the default's cost rule does not take it here" :
			 cur ? "named by the plan" :
			       "legal; the default took another variant or provider");
		mi_plan_layout_of(&r, i, false, lay, sizeof(lay));
		if (!strcmp(lay, "auto"))
			snprintf(lay, sizeof(lay), "NCHW");
		err = add(c, names[k], lay, lay, "fp32", NULL, 0, 0, why);
		if (!err && ge && ge->nfused)
			err = add(c, names[k], lay, lay, "fp32", ge->fused,
				  ge->nfused, 0, why);
	}
out:
	mi_plan_free(got);
	mi_plan_rb_fini(&r);
	if (err) {
		mi_plan_cands_free(c);
		return mi_set_error(err, "out of memory");
	}
	mi_plan_cands_free(m->cands);
	m->cands = c;
	*cands = c->c;
	return c->n;
}
