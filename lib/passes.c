// SPDX-License-Identifier: MIT
/*
 * Normalization passes.  Each pass returns the number of rewrites it made
 * (>= 0) or -errno, and leaves the graph linked and sorted.
 *
 *  - mi_graph_fold_constants (graph.c): run all-constant subgraphs now.
 *  - mi_pass_fold_batchnorm: BatchNormalization after Conv/Gemm becomes new
 *    weights and bias of that Conv/Gemm.
 *  - mi_pass_remove_noops: Identity, Dropout (inference), Reshape to the
 *    same shape, Transpose pairs that cancel, identity Transposes.
 *  - mi_pass_canonicalize: one form per equivalent pattern: MatMul+Add ->
 *    Gemm, Reshape(x,[d0|0,-1]) -> Flatten(axis=1), Min(Max(x,0),6) ->
 *    Clip(0,6), Relu before Clip(0,6) dropped, x*HardSigmoid(x) and
 *    x*Clip(x+3,0,6)/6 -> HardSwish, the decomposed LayerNorm (ReduceMean,
 *    Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add) -> LayerNormalization.
 *  - mi_graph_dead_nodes (graph.c): drop nodes nobody reads.
 *
 * Passes that need shapes use "static" shapes: shape inference is run with
 * every symbolic input dim bound to two different values, and a dim counts
 * as known only if it came out the same both times.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static bool is_op(const struct mi_node *n, const char *op)
{
	return !n->dead && !n->domain[0] && !strcmp(n->op_type, op);
}

static struct mi_tensor *cin(struct mi_graph *g, struct mi_node *n, int i)
{
	struct mi_tensor *t = mi_in(g, n, i);

	return t && (t->flags & MI_TF_CONST) && t->data ? t : NULL;
}

/* Is input i a constant scalar (any rank, one element) equal to v? */
static bool const_scalar_is(struct mi_graph *g, struct mi_node *n, int i,
			    double v)
{
	struct mi_tensor *t = cin(g, n, i);

	if (!t || mi_tensor_numel(t) != 1 ||
	    (t->dtype != MI_DT_FLOAT && t->dtype != MI_DT_DOUBLE))
		return false;
	return fabs(mi_tensor_get_f64(t, 0) - v) <= 1e-6 * fabs(v) + 1e-7;
}

/* The live node producing tensor t, or NULL. */
static struct mi_node *producer(struct mi_graph *g, int t)
{
	int p = t >= 0 ? g->tensors[t].producer : -1;

	return p >= 0 && !g->nodes[p].dead ? &g->nodes[p] : NULL;
}

/* Add a constant tensor with a fresh name; returns its index. */
static int add_const(struct mi_graph *g, const char *base, int dtype,
		     int ndim, const int64_t *dims, const void *data)
{
	char name[256];
	int t, err;

	for (int k = 0;; k++) {
		snprintf(name, sizeof(name), "%s%s%d", base, "__mi", k);
		if (mi_graph_find_tensor(g, name) < 0)
			break;
	}
	t = mi_graph_add_tensor(g, name);
	if (t < 0)
		return t;
	err = mi_tensor_set_const(&g->tensors[t], dtype, ndim, dims, data);
	if (err)
		return err;
	g->tensors[t].flags |= MI_TF_INITIALIZER;
	return t;
}

/*
 * Bypass node n whose output 0 equals tensor `in` (a no-op): readers of the
 * output read `in` instead.  If the output is a graph output, its name must
 * survive: then in's producer is made to write the output directly, which
 * needs in to be a plain intermediate.  Returns 1 if done, 0 if not legal.
 */
static int bypass(struct mi_graph *g, struct mi_node *n, int in)
{
	int out = n->outputs[0];

	for (int j = 1; j < n->noutputs; j++)
		if (g->tensors[n->outputs[j]].nconsumers ||
		    (g->tensors[n->outputs[j]].flags & MI_TF_OUTPUT))
			return 0;
	if (!(g->tensors[out].flags & MI_TF_OUTPUT)) {
		n->dead = true;
		mi_graph_replace_uses(g, out, in);
		return 1;
	}
	struct mi_node *p = producer(g, in);
	struct mi_tensor *ti = &g->tensors[in];

	if (!p || (ti->flags & (MI_TF_OUTPUT | MI_TF_CONST | MI_TF_INPUT)) ||
	    ti->dtype != g->tensors[out].dtype)
		return 0;
	n->dead = true;
	mi_graph_replace_uses(g, in, out);
	for (int j = 0; j < p->noutputs; j++)
		if (p->outputs[j] == in)
			p->outputs[j] = out;
	return 1;
}

/* ---- static shapes ---------------------------------------------------- */

struct shapes {
	int n;
	int *ndim;		/* -1 unknown */
	int64_t (*dims)[MI_MAX_DIMS]; /* -1 unknown or batch-dependent */
};

static void shapes_free(struct shapes *s)
{
	free(s->ndim);
	free(s->dims);
}

static void reset_shapes(struct mi_graph *g)
{
	for (int i = 0; i < g->ntensors; i++) {
		struct mi_tensor *t = &g->tensors[i];

		if (!(t->flags & (MI_TF_CONST | MI_TF_INPUT))) {
			t->ndim = -1;
			if (t->flags & MI_TF_SHAPEVAL)
				mi_tensor_free_data(t);
			t->flags &= ~MI_TF_SHAPEVAL;
		}
	}
}

static int infer_with(struct mi_graph *g, const struct mi_tensor *decl,
		      int64_t sym, struct shapes *s, bool first)
{
	reset_shapes(g);
	for (int i = 0; i < g->ninputs; i++) {
		struct mi_tensor *t = &g->tensors[g->inputs[i]];

		t->ndim = decl[i].ndim;
		for (int d = 0; d < t->ndim; d++)
			t->dims[d] = decl[i].dims[d] < 0 ? sym : decl[i].dims[d];
	}
	for (int p = 0; p < g->norder; p++) {
		struct mi_node *n = &g->nodes[g->order[p]];
		char save[sizeof(g->err)];
		unsigned char st;

		/* same inference as planning (Shape values included) */
		memcpy(save, g->err, sizeof(save));
		if (mi_infer_node(g, n, &st) || st == MI_NS_DYNAMIC) {
			/* not our business here: the executor reports it */
			memcpy(g->err, save, sizeof(save));
			for (int j = 0; j < n->noutputs; j++)
				mi_out(g, n, j)->ndim = -1;
		}
	}
	for (int i = 0; i < g->ntensors; i++) {
		struct mi_tensor *t = &g->tensors[i];

		if (first) {
			s->ndim[i] = mi_tensor_shape_known(t) ? t->ndim : -1;
			for (int d = 0; d < MI_MAX_DIMS; d++)
				s->dims[i][d] = d < t->ndim ? t->dims[d] : -1;
		} else if (s->ndim[i] >= 0) {
			if (!mi_tensor_shape_known(t) || t->ndim != s->ndim[i])
				s->ndim[i] = -1;
			else
				for (int d = 0; d < t->ndim; d++)
					if (t->dims[d] != s->dims[i][d])
						s->dims[i][d] = -1;
		}
	}
	return 0;
}

static int static_shapes(struct mi_graph *g, struct shapes *s)
{
	struct mi_tensor *decl;
	int err;

	err = mi_graph_toposort(g);
	if (err)
		return err;
	s->n = g->ntensors;
	s->ndim = calloc(g->ntensors + 1, sizeof(int));
	s->dims = calloc(g->ntensors + 1, sizeof(*s->dims));
	decl = calloc(g->ninputs + 1, sizeof(*decl));
	if (!s->ndim || !s->dims || !decl) {
		free(decl);
		shapes_free(s);
		return -ENOMEM;
	}
	for (int i = 0; i < g->ninputs; i++)
		decl[i] = g->tensors[g->inputs[i]];
	for (int i = 0; i < g->ninputs; i++)
		if (decl[i].ndim < 0) {
			/* unknown input rank: nothing is static downstream */
			for (int t = 0; t < g->ntensors; t++)
				s->ndim[t] = (g->tensors[t].flags & MI_TF_CONST) ?
						     g->tensors[t].ndim : -1;
			for (int t = 0; t < g->ntensors; t++)
				memcpy(s->dims[t], g->tensors[t].dims,
				       sizeof(s->dims[t]));
			goto out;
		}
	infer_with(g, decl, 3, s, true);
	infer_with(g, decl, 5, s, false);
out:
	/* restore the declared input shapes */
	for (int i = 0; i < g->ninputs; i++) {
		struct mi_tensor *t = &g->tensors[g->inputs[i]];

		t->ndim = decl[i].ndim;
		memcpy(t->dims, decl[i].dims, sizeof(t->dims));
	}
	reset_shapes(g);
	free(decl);
	return 0;
}

static bool s_known(const struct shapes *s, int t)
{
	return t >= 0 && t < s->n && s->ndim[t] >= 0;
}

/* ---- BatchNormalization folding -------------------------------------- */

/* scale = gamma / sqrt(var + eps), shift = beta - mean * scale */
static int bn_params(struct mi_graph *g, struct mi_node *bn, int64_t c,
		     float **scale, float **shift)
{
	struct mi_tensor *gm = cin(g, bn, 1), *bt = cin(g, bn, 2),
			 *mn = cin(g, bn, 3), *vr = cin(g, bn, 4);
	double eps = mi_attr_float(bn, "epsilon", 1e-5f);

	if (!gm || !bt || !mn || !vr)
		return 0;
	struct mi_tensor *p[4] = { gm, bt, mn, vr };

	for (int i = 0; i < 4; i++)
		if (p[i]->dtype != MI_DT_FLOAT || mi_tensor_numel(p[i]) != c)
			return 0;
	*scale = malloc(c * sizeof(float));
	*shift = malloc(c * sizeof(float));
	if (!*scale || !*shift) {
		free(*scale);
		free(*shift);
		return -ENOMEM;
	}
	for (int64_t i = 0; i < c; i++) {
		double sc = ((float *)gm->data)[i] /
			    sqrt((double)((float *)vr->data)[i] + eps);

		(*scale)[i] = (float)sc;
		(*shift)[i] = (float)(((float *)bt->data)[i] -
				      ((float *)mn->data)[i] * sc);
	}
	return 1;
}

static bool bn_foldable(struct mi_graph *g, struct mi_node *bn)
{
	if (!is_op(bn, "BatchNormalization") || bn->ninputs != 5)
		return false;
	if (mi_attr_int(bn, "training_mode", 0) ||
	    !mi_attr_int(bn, "spatial", 1))
		return false;
	/* extra (training) outputs must be unused */
	for (int j = 1; j < bn->noutputs; j++)
		if (g->tensors[bn->outputs[j]].nconsumers ||
		    (g->tensors[bn->outputs[j]].flags & MI_TF_OUTPUT))
			return false;
	return true;
}

/*
 * Make Conv/Gemm node n read the folded weight nw (the shape of its input 1)
 * and bias nb ([nbias]) and write BatchNormalization bn's output; bn dies.
 * Returns 1, or a negative errno.
 */
static int bn_fold_into(struct mi_graph *g, struct mi_node *bn,
			struct mi_node *n, const float *nw, const float *nb,
			int64_t nbias)
{
	int64_t wd[MI_MAX_DIMS];
	int ndim = g->tensors[n->inputs[1]].ndim, tw, tb;

	memcpy(wd, g->tensors[n->inputs[1]].dims, sizeof(wd));
	tw = add_const(g, g->tensors[n->inputs[1]].name, MI_DT_FLOAT, ndim, wd,
		       nw);
	if (tw < 0)
		return tw;
	tb = add_const(g, g->tensors[n->inputs[1]].name, MI_DT_FLOAT, 1,
		       &nbias, nb);
	if (tb < 0)
		return tb;
	if (n->ninputs < 3) {
		int *ni = realloc(n->inputs, 3 * sizeof(int));

		if (!ni)
			return -ENOMEM;
		n->inputs = ni;
		n->ninputs = 3;
	}
	n->inputs[1] = tw;
	n->inputs[2] = tb;
	n->outputs[0] = bn->outputs[0];
	bn->dead = true;
	return 1;
}

static int fold_bn_conv(struct mi_graph *g, struct mi_node *bn,
			struct mi_node *cv)
{
	struct mi_tensor *w = cin(g, cv, 1), *b = NULL;
	float *scale = NULL, *shift = NULL, *nw = NULL, *nb = NULL;
	int64_t oc, per;
	int r, ret = 0;

	if (!w || w->dtype != MI_DT_FLOAT || w->ndim < 3)
		return 0;
	if (cv->ninputs > 2 && cv->inputs[2] >= 0) {
		b = cin(g, cv, 2);
		if (!b || b->dtype != MI_DT_FLOAT)
			return 0;
	}
	oc = w->dims[0];
	per = mi_tensor_numel(w) / (oc ? oc : 1);
	if (b && mi_tensor_numel(b) != oc)
		return 0;
	r = bn_params(g, bn, oc, &scale, &shift);
	if (r <= 0)
		return r;
	nw = malloc(w->nbytes + 1);
	nb = malloc(oc * sizeof(float) + 1);
	if (!nw || !nb) {
		ret = -ENOMEM;
		goto out;
	}
	for (int64_t o = 0; o < oc; o++) {
		for (int64_t k = 0; k < per; k++)
			nw[o * per + k] = ((float *)w->data)[o * per + k] *
					  scale[o];
		nb[o] = (b ? ((float *)b->data)[o] : 0.0f) * scale[o] +
			shift[o];
	}
	ret = bn_fold_into(g, bn, cv, nw, nb, oc);
out:
	free(scale);
	free(shift);
	free(nw);
	free(nb);
	return ret;
}

static int fold_bn_gemm(struct mi_graph *g, struct mi_node *bn,
			struct mi_node *gm)
{
	struct mi_tensor *bw = cin(g, gm, 1), *c = NULL;
	float *scale = NULL, *shift = NULL, *nw = NULL, *nc = NULL;
	float alpha = mi_attr_float(gm, "alpha", 1.0f);
	float beta = mi_attr_float(gm, "beta", 1.0f);
	int transb = (int)mi_attr_int(gm, "transB", 0);
	int64_t k, nf;
	int r, ret = 0;

	if (!bw || bw->dtype != MI_DT_FLOAT || bw->ndim != 2)
		return 0;
	nf = transb ? bw->dims[0] : bw->dims[1];
	k = transb ? bw->dims[1] : bw->dims[0];
	if (gm->ninputs > 2 && gm->inputs[2] >= 0) {
		c = cin(g, gm, 2);
		/* only a per-feature bias ([N] or [1,N]) folds simply */
		if (!c || c->dtype != MI_DT_FLOAT || mi_tensor_numel(c) != nf ||
		    (c->ndim == 2 && c->dims[0] != 1) || c->ndim > 2)
			return 0;
	}
	r = bn_params(g, bn, nf, &scale, &shift);
	if (r <= 0)
		return r;
	nw = malloc(bw->nbytes + 1);
	nc = malloc(nf * sizeof(float) + 1);
	if (!nw || !nc) {
		ret = -ENOMEM;
		goto out;
	}
	for (int64_t i = 0; i < k; i++)
		for (int64_t j = 0; j < nf; j++) {
			int64_t idx = transb ? j * k + i : i * nf + j;

			nw[idx] = ((float *)bw->data)[idx] * alpha * scale[j];
		}
	for (int64_t j = 0; j < nf; j++)
		nc[j] = (c ? beta * ((float *)c->data)[j] : 0.0f) * scale[j] +
			shift[j];
	if (mi_node_set_float(gm, "alpha", 1.0f) ||
	    mi_node_set_float(gm, "beta", 1.0f)) {
		ret = -ENOMEM;
		goto out;
	}
	ret = bn_fold_into(g, bn, gm, nw, nc, nf);
out:
	free(scale);
	free(shift);
	free(nw);
	free(nc);
	return ret;
}

int mi_pass_fold_batchnorm(struct mi_graph *g)
{
	int done = 0, err;

	err = mi_graph_toposort(g);
	if (err)
		return err;
	for (int p = 0; p < g->norder; p++) {
		struct mi_node *bn = &g->nodes[g->order[p]];
		struct mi_node *pr;
		int r = 0;

		if (!bn_foldable(g, bn))
			continue;
		pr = producer(g, bn->inputs[0]);
		if (!pr || mi_graph_sole_consumer(g, bn->inputs[0]) !=
				   (int)(bn - g->nodes))
			continue;
		if (is_op(pr, "Conv") && pr->noutputs == 1)
			r = fold_bn_conv(g, bn, pr);
		else if (is_op(pr, "Gemm") && pr->noutputs == 1)
			r = fold_bn_gemm(g, bn, pr);
		if (r < 0)
			return r;
		if (r) {
			done++;
			/* the Conv now writes bn's output: relink */
			err = mi_graph_link(g);
			if (err)
				return err;
		}
	}
	if (done && (err = mi_graph_toposort(g)))
		return err;
	return done;
}

/* ---- no-op removal ---------------------------------------------------- */

static bool perm_of(const struct mi_node *n, int rank, int64_t *perm)
{
	int cnt;
	const int64_t *p = mi_attr_ints(n, "perm", &cnt);

	if (!p) {
		for (int i = 0; i < rank; i++)
			perm[i] = rank - 1 - i;
		return rank > 0;
	}
	if (cnt != rank || rank > MI_MAX_DIMS)
		return false;
	for (int i = 0; i < rank; i++) {
		if (p[i] < 0 || p[i] >= rank)
			return false;
		perm[i] = p[i];
	}
	return true;
}

static bool reshape_is_noop(struct mi_graph *g, struct mi_node *n,
			    const struct shapes *s)
{
	struct mi_tensor *sh = cin(g, n, 1);
	int x = n->inputs[0], minus = -1;
	int64_t v[MI_MAX_DIMS];

	if (!sh || !s_known(s, x) || sh->ndim != 1 ||
	    mi_tensor_numel(sh) != s->ndim[x] ||
	    (sh->dtype != MI_DT_INT64 && sh->dtype != MI_DT_INT32))
		return false;
	for (int i = 0; i < s->ndim[x]; i++) {
		v[i] = mi_tensor_get_i64(sh, i);
		if (v[i] == 0 && !mi_attr_int(n, "allowzero", 0))
			continue; /* copies the input dim */
		if (v[i] == -1 && minus < 0) {
			minus = i;
			continue;
		}
		if (v[i] < 0 || s->dims[x][i] < 0 || v[i] != s->dims[x][i])
			return false;
	}
	/* one -1 with every other dim kept: it is the remaining dim */
	return true;
}

int mi_pass_remove_noops(struct mi_graph *g)
{
	struct shapes s = { 0 };
	int done = 0, err;

	err = static_shapes(g, &s);
	if (err)
		return err;
	for (int p = 0; p < g->norder; p++) {
		struct mi_node *n = &g->nodes[g->order[p]];
		int r = 0;

		if (n->dead || n->domain[0])
			continue;
		if (is_op(n, "Identity") && n->noutputs == 1 &&
		    n->inputs[0] >= 0) {
			r = bypass(g, n, n->inputs[0]);
		} else if (is_op(n, "Dropout") && n->inputs[0] >= 0) {
			/* inference: y = x unless training_mode is a true
			 * constant */
			struct mi_tensor *tm = n->ninputs > 2 ? mi_in(g, n, 2) :
								NULL;

			if (tm && (!(tm->flags & MI_TF_CONST) || !tm->data ||
				   mi_tensor_get_i64(tm, 0)))
				continue;
			r = bypass(g, n, n->inputs[0]);
		} else if (is_op(n, "Reshape") && n->ninputs >= 2 &&
			   reshape_is_noop(g, n, &s)) {
			r = bypass(g, n, n->inputs[0]);
		} else if (is_op(n, "Transpose") && s_known(&s, n->inputs[0])) {
			int rank = s.ndim[n->inputs[0]];
			int64_t p2[MI_MAX_DIMS], p1[MI_MAX_DIMS];
			struct mi_node *t1 = producer(g, n->inputs[0]);
			bool ident = perm_of(n, rank, p2);

			for (int i = 0; ident && i < rank; i++)
				ident = p2[i] == i;
			if (ident) {
				r = bypass(g, n, n->inputs[0]);
			} else if (t1 && is_op(t1, "Transpose") &&
				   perm_of(n, rank, p2) &&
				   perm_of(t1, rank, p1)) {
				bool id2 = true;

				/* y[i] = x[p1[p2[i]]] */
				for (int i = 0; i < rank; i++)
					if (p1[p2[i]] != i)
						id2 = false;
				if (id2 && t1->inputs[0] >= 0)
					r = bypass(g, n, t1->inputs[0]);
			}
		}
		if (r < 0) {
			shapes_free(&s);
			return r;
		}
		if (r) {
			done++;
			err = mi_graph_link(g);
			if (err) {
				shapes_free(&s);
				return err;
			}
		}
	}
	shapes_free(&s);
	if (done && (err = mi_graph_toposort(g)))
		return err;
	return done;
}

/* ---- canonical forms -------------------------------------------------- */

/* Replace node n's op by op_type (same inputs/outputs rewritten by caller). */
static int retype(struct mi_node *n, const char *op_type)
{
	const struct mi_op_def *d = mi_op_find(op_type, "");
	char *s;

	if (!d)
		return -EOPNOTSUPP;
	s = strdup(op_type);
	if (!s)
		return -ENOMEM;
	free(n->op_type);
	n->op_type = s;
	n->def = d;
	return 0;
}

static void clear_attrs(struct mi_node *n)
{
	for (int i = 0; i < n->nattrs; i++) {
		struct mi_attr *a = &n->attrs[i];

		free(a->name);
		free(a->s);
		free(a->floats);
		free(a->ints);
		if (a->strings)
			for (int k = 0; k < a->n; k++)
				free(a->strings[k]);
		free(a->strings);
		if (a->t) {
			mi_tensor_free_data(a->t);
			free(a->t->name);
			free(a->t);
		}
	}
	n->nattrs = 0;
}

/* Clip bounds (attribute form before opset 11, inputs after). */
static bool clip_bounds(struct mi_graph *g, struct mi_node *n, double *lo,
			double *hi)
{
	*lo = -INFINITY;
	*hi = INFINITY;
	if (g->opset < 11) {
		*lo = mi_attr_float(n, "min", -INFINITY);
		*hi = mi_attr_float(n, "max", INFINITY);
		return true;
	}
	for (int i = 1; i < 3 && i < n->ninputs; i++) {
		struct mi_tensor *t;

		if (n->inputs[i] < 0)
			continue;
		t = cin(g, n, i);
		if (!t || mi_tensor_numel(t) != 1 || t->dtype != MI_DT_FLOAT)
			return false;
		if (i == 1)
			*lo = mi_tensor_get_f64(t, 0);
		else
			*hi = mi_tensor_get_f64(t, 0);
	}
	return true;
}

/* Operand of a binary node that is not input k. */
static int other(const struct mi_node *n, int k)
{
	return n->inputs[k ? 0 : 1];
}

/*
 * HardSwish(x) = x * HardSigmoid(x; 1/6, 0.5) = x * Clip(x + 3, 0, 6) / 6.
 * mul: the Mul node; returns x's tensor index when mul computes HardSwish
 * of x through HardSigmoid, else -1.  *dead gets the nodes to remove.
 */
static int match_hardswish(struct mi_graph *g, struct mi_node *mul,
			   struct mi_node **dead, int *ndead)
{
	*ndead = 0;
	if (!is_op(mul, "Mul") || mul->ninputs != 2)
		return -1;
	for (int k = 0; k < 2; k++) {
		struct mi_node *hs = producer(g, mul->inputs[k]);
		int x = other(mul, k);

		if (hs && is_op(hs, "HardSigmoid") && hs->inputs[0] == x &&
		    fabsf(mi_attr_float(hs, "alpha", 0.2f) - 1.0f / 6) < 1e-6f &&
		    fabsf(mi_attr_float(hs, "beta", 0.5f) - 0.5f) < 1e-6f &&
		    mi_graph_sole_consumer(g, mul->inputs[k]) ==
			    (int)(mul - g->nodes)) {
			dead[(*ndead)++] = hs;
			return x;
		}
	}
	return -1;
}

/* x * Clip(x + 3, 0, 6) (then the caller checks "/ 6" or "* 1/6"). */
static int match_relu6_form(struct mi_graph *g, struct mi_node *mul,
			    struct mi_node **dead, int *ndead)
{
	*ndead = 0;
	if (!is_op(mul, "Mul") || mul->ninputs != 2)
		return -1;
	for (int k = 0; k < 2; k++) {
		struct mi_node *cl = producer(g, mul->inputs[k]);
		int x = other(mul, k);
		double lo, hi;

		if (!cl || !is_op(cl, "Clip") || !clip_bounds(g, cl, &lo, &hi) ||
		    lo != 0 || hi != 6 ||
		    mi_graph_sole_consumer(g, mul->inputs[k]) !=
			    (int)(mul - g->nodes))
			continue;
		struct mi_node *add = producer(g, cl->inputs[0]);

		if (!add || !is_op(add, "Add") || add->ninputs != 2 ||
		    mi_graph_sole_consumer(g, cl->inputs[0]) !=
			    (int)(cl - g->nodes))
			continue;
		for (int a = 0; a < 2; a++)
			if (add->inputs[a] == x &&
			    const_scalar_is(g, add, 1 - a, 3.0)) {
				dead[0] = cl;
				dead[1] = add;
				*ndead = 2;
				return x;
			}
	}
	return -1;
}

static int make_hardswish(struct mi_graph *g, struct mi_node *n, int x,
			  int out, struct mi_node **dead, int ndead)
{
	int err = retype(n, "HardSwish");

	if (err)
		return err == -EOPNOTSUPP ? 0 : err;
	clear_attrs(n);
	n->ninputs = 1;
	n->inputs[0] = x;
	n->outputs[0] = out;
	for (int i = 0; i < ndead; i++)
		dead[i]->dead = true;
	return 1;
}


/* ReduceMean over the last axis only, keepdims. */
static bool reduce_last(struct mi_graph *g, struct mi_node *n,
			const struct shapes *s)
{
	int cnt, x = n->inputs[0];
	const int64_t *ax = mi_attr_ints(n, "axes", &cnt);

	if (!is_op(n, "ReduceMean") || n->ninputs != 1 || !ax || cnt != 1 ||
	    !mi_attr_int(n, "keepdims", 1) || !s_known(s, x))
		return false;
	return ax[0] == -1 || ax[0] == s->ndim[x] - 1;
}

/*
 * LayerNormalization decomposed as exported by PyTorch (opset < 17):
 *   d = x - ReduceMean(x); v = ReduceMean(d ^ 2);
 *   y = d / Sqrt(v + eps) [* gamma] [+ beta]
 * y's last node is turned into LayerNormalization(x, gamma, beta).
 */
static int canon_layernorm(struct mi_graph *g, struct mi_node *last,
			   const struct shapes *s)
{
	struct mi_node *mul = NULL, *div, *sq, *add, *rm2, *pw, *sub, *rm1;
	int gamma = -1, beta = -1, x, self = (int)(last - g->nodes);
	struct mi_node *dead[8];
	int nd = 0;
	double eps = 0;

	if (!mi_op_find("LayerNormalization", ""))
		return 0;
	if (is_op(last, "Mul")) {
		/* a following "+ beta" is part of the pattern: match there */
		int c = mi_graph_sole_consumer(g, last->outputs[0]);

		if (c >= 0 && is_op(&g->nodes[c], "Add") &&
		    g->nodes[c].ninputs == 2 &&
		    (cin(g, &g->nodes[c], 0) || cin(g, &g->nodes[c], 1)))
			return 0;
	}
	div = last;
	if (is_op(last, "Add") && last->ninputs == 2) { /* + beta */
		for (int k = 0; k < 2 && beta < 0; k++) {
			struct mi_node *p = producer(g, last->inputs[k]);

			if (p && (is_op(p, "Mul") || is_op(p, "Div")) &&
			    cin(g, last, 1 - k) &&
			    mi_graph_sole_consumer(g, last->inputs[k]) == self) {
				beta = last->inputs[1 - k];
				div = p;
			}
		}
		if (beta < 0)
			return 0;
		dead[nd++] = div;
	}
	if (is_op(div, "Mul") && div->ninputs == 2) { /* * gamma */
		mul = div;
		div = NULL;
		for (int k = 0; k < 2 && !div; k++) {
			struct mi_node *p = producer(g, mul->inputs[k]);

			if (p && is_op(p, "Div") && cin(g, mul, 1 - k) &&
			    mi_graph_sole_consumer(g, mul->inputs[k]) ==
				    (int)(mul - g->nodes)) {
				gamma = mul->inputs[1 - k];
				div = p;
			}
		}
		if (!div)
			return 0;
		dead[nd++] = div;
	}
	if (!is_op(div, "Div") || div->ninputs != 2 || gamma < 0)
		return 0; /* without a gamma we would have to invent one */
	sq = producer(g, div->inputs[1]);
	sub = producer(g, div->inputs[0]);
	if (!sq || !is_op(sq, "Sqrt") || !sub || !is_op(sub, "Sub") ||
	    mi_graph_sole_consumer(g, div->inputs[1]) != (int)(div - g->nodes))
		return 0;
	add = producer(g, sq->inputs[0]);
	if (!add || !is_op(add, "Add") || add->ninputs != 2 ||
	    mi_graph_sole_consumer(g, sq->inputs[0]) != (int)(sq - g->nodes))
		return 0;
	rm2 = NULL;
	for (int k = 0; k < 2 && !rm2; k++) {
		struct mi_tensor *e = cin(g, add, 1 - k);
		struct mi_node *p = producer(g, add->inputs[k]);

		if (p && e && mi_tensor_numel(e) == 1 &&
		    e->dtype == MI_DT_FLOAT && reduce_last(g, p, s) &&
		    mi_graph_sole_consumer(g, add->inputs[k]) ==
			    (int)(add - g->nodes)) {
			rm2 = p;
			eps = mi_tensor_get_f64(e, 0);
		}
	}
	if (!rm2)
		return 0;
	pw = producer(g, rm2->inputs[0]);
	if (!pw || !is_op(pw, "Pow") || pw->inputs[0] != div->inputs[0] ||
	    !const_scalar_is(g, pw, 1, 2.0) ||
	    mi_graph_sole_consumer(g, rm2->inputs[0]) != (int)(rm2 - g->nodes))
		return 0;
	/* d = Sub(x, ReduceMean(x)) read by exactly Pow and Div */
	if (g->tensors[sub->outputs[0]].nconsumers != 2 ||
	    (g->tensors[sub->outputs[0]].flags & MI_TF_OUTPUT))
		return 0;
	x = sub->inputs[0];
	rm1 = producer(g, sub->inputs[1]);
	if (!rm1 || !reduce_last(g, rm1, s) || rm1->inputs[0] != x ||
	    mi_graph_sole_consumer(g, sub->inputs[1]) != (int)(sub - g->nodes))
		return 0;
	/* gamma/beta must be per last-axis element */
	int64_t c = s->dims[x][s->ndim[x] - 1];
	struct mi_tensor *gt = &g->tensors[gamma];

	if (c < 0 || mi_tensor_numel(gt) != c || gt->ndim != 1 ||
	    (beta >= 0 && (mi_tensor_numel(&g->tensors[beta]) != c ||
			   g->tensors[beta].ndim != 1)))
		return 0;
	if (retype(last, "LayerNormalization"))
		return 0;
	clear_attrs(last);
	int *ni = realloc(last->inputs, 3 * sizeof(int));

	if (!ni)
		return -ENOMEM;
	last->inputs = ni;
	last->inputs[0] = x;
	last->inputs[1] = gamma;
	last->inputs[2] = beta;
	last->ninputs = beta >= 0 ? 3 : 2;
	if (mi_node_set_int(last, "axis", -1) ||
	    mi_node_set_float(last, "epsilon", (float)eps))
		return -ENOMEM;
	dead[nd++] = sq;
	dead[nd++] = add;
	dead[nd++] = rm2;
	dead[nd++] = pw;
	dead[nd++] = sub;
	dead[nd++] = rm1;
	for (int i = 0; i < nd; i++)
		if (dead[i] != last)
			dead[i]->dead = true;
	return 1;
}

static int canon_node(struct mi_graph *g, struct mi_node *n,
		      const struct shapes *s)
{
	struct mi_node *dead[4];
	int ndead, x;

	/* LayerNormalization from its decomposed form */
	if (is_op(n, "Add") || is_op(n, "Mul")) {
		int r = canon_layernorm(g, n, s);

		if (r)
			return r;
	}

	/* HardSwish: x * HardSigmoid(x) */
	x = match_hardswish(g, n, dead, &ndead);
	if (x >= 0 && g->tensors[x].dtype != MI_DT_UNDEFINED)
		return make_hardswish(g, n, x, n->outputs[0], dead, ndead);
	/* HardSwish: (x * Clip(x+3, 0, 6)) / 6 or * (1/6) */
	if ((is_op(n, "Div") && const_scalar_is(g, n, 1, 6.0)) ||
	    (is_op(n, "Mul") && (const_scalar_is(g, n, 1, 1.0 / 6) ||
				 const_scalar_is(g, n, 0, 1.0 / 6)))) {
		int k = is_op(n, "Mul") && const_scalar_is(g, n, 0, 1.0 / 6);
		struct mi_node *mul = producer(g, n->inputs[k ? 1 : 0]);

		if (mul && mi_graph_sole_consumer(g, n->inputs[k ? 1 : 0]) ==
				   (int)(n - g->nodes)) {
			x = match_relu6_form(g, mul, dead, &ndead);
			if (x >= 0) {
				dead[ndead++] = mul;
				return make_hardswish(g, n, x, n->outputs[0],
						      dead, ndead);
			}
		}
	}
	/* Clip(0, 6) of Relu(x) == Clip(0, 6) of x */
	if (is_op(n, "Clip")) {
		double lo, hi;
		struct mi_node *r = producer(g, n->inputs[0]);

		if (r && is_op(r, "Relu") && clip_bounds(g, n, &lo, &hi) &&
		    lo >= 0 &&
		    mi_graph_sole_consumer(g, n->inputs[0]) ==
			    (int)(n - g->nodes)) {
			n->inputs[0] = r->inputs[0];
			r->dead = true;
			return 1;
		}
	}
	/* Min(Max(x, 0), 6) -> Clip(x, 0, 6) (opset >= 11 input form) */
	if (is_op(n, "Min") && n->ninputs == 2 && g->opset >= 11) {
		for (int k = 0; k < 2; k++) {
			struct mi_node *mx = producer(g, n->inputs[1 - k]);

			if (!const_scalar_is(g, n, k, 6.0) || !mx ||
			    !is_op(mx, "Max") || mx->ninputs != 2 ||
			    mi_graph_sole_consumer(g, n->inputs[1 - k]) !=
				    (int)(n - g->nodes))
				continue;
			for (int a = 0; a < 2; a++) {
				if (!const_scalar_is(g, mx, a, 0.0))
					continue;
				int xi = mx->inputs[1 - a];
				int c6 = n->inputs[k], c0 = mx->inputs[a];
				int *ni;

				if (g->tensors[c6].ndim != 0 ||
				    g->tensors[c0].ndim != 0 ||
				    retype(n, "Clip"))
					continue; /* Clip wants scalars */
				ni = realloc(n->inputs, 3 * sizeof(int));
				if (!ni)
					return -ENOMEM;
				n->inputs = ni;
				n->ninputs = 3;
				n->inputs[0] = xi;
				n->inputs[1] = c0;
				n->inputs[2] = c6;
				mx->dead = true;
				return 1;
			}
		}
	}
	/* MatMul(A[M,K], B[K,N] const) + C const -> Gemm(A, B, C) */
	if (is_op(n, "Add") && n->ninputs == 2) {
		for (int k = 0; k < 2; k++) {
			struct mi_node *mm = producer(g, n->inputs[k]);
			struct mi_tensor *c = cin(g, n, 1 - k), *b;
			int a;

			if (!mm || !is_op(mm, "MatMul") || !c ||
			    mi_graph_sole_consumer(g, n->inputs[k]) !=
				    (int)(n - g->nodes))
				continue;
			a = mm->inputs[0];
			b = cin(g, mm, 1);
			if (!b || b->ndim != 2 || !s_known(s, a) ||
			    s->ndim[a] != 2 || b->dtype != MI_DT_FLOAT ||
			    c->dtype != MI_DT_FLOAT)
				continue;
			/* bias must broadcast along rows: [N] or [1,N] */
			if (mi_tensor_numel(c) != b->dims[1] ||
			    (c->ndim == 2 && c->dims[0] != 1) || c->ndim > 2)
				continue;
			int ci = n->inputs[1 - k];
			int *ni = realloc(n->inputs, 3 * sizeof(int));

			if (!ni)
				return -ENOMEM;
			n->inputs = ni;
			if (retype(n, "Gemm"))
				continue;
			clear_attrs(n);
			n->ninputs = 3;
			n->inputs[0] = a;
			n->inputs[1] = mm->inputs[1];
			n->inputs[2] = ci;
			mm->dead = true;
			return 1;
		}
	}
	/* Reshape(x, [d0 or 0, -1]) of a rank >= 2 x -> Flatten(x, axis=1) */
	if (is_op(n, "Reshape") && n->ninputs >= 2) {
		struct mi_tensor *sh = cin(g, n, 1);
		int xi = n->inputs[0];

		if (sh && sh->ndim == 1 && mi_tensor_numel(sh) == 2 &&
		    (sh->dtype == MI_DT_INT64 || sh->dtype == MI_DT_INT32) &&
		    s_known(s, xi) && s->ndim[xi] >= 2 &&
		    mi_tensor_get_i64(sh, 1) == -1 &&
		    ((mi_tensor_get_i64(sh, 0) == 0 &&
		      !mi_attr_int(n, "allowzero", 0)) ||
		     (s->dims[xi][0] >= 0 &&
		      mi_tensor_get_i64(sh, 0) == s->dims[xi][0]))) {
			if (retype(n, "Flatten"))
				return 0;
			clear_attrs(n);
			n->ninputs = 1;
			if (mi_node_set_int(n, "axis", 1))
				return -ENOMEM;
			return 1;
		}
	}
	return 0;
}

int mi_pass_canonicalize(struct mi_graph *g)
{
	struct shapes s = { 0 };
	int done = 0, err;

	err = static_shapes(g, &s);
	if (err)
		return err;
	for (int p = 0; p < g->norder; p++) {
		struct mi_node *n = &g->nodes[g->order[p]];
		int r;

		if (n->dead || n->domain[0])
			continue;
		r = canon_node(g, n, &s);
		if (r < 0) {
			shapes_free(&s);
			return r;
		}
		if (r) {
			done++;
			err = mi_graph_link(g);
			if (err) {
				shapes_free(&s);
				return err;
			}
		}
	}
	shapes_free(&s);
	if (done && (err = mi_graph_toposort(g)))
		return err;
	return done;
}

int mi_graph_normalize(struct mi_graph *g, unsigned int flags,
		       struct mi_pass_stats *st)
{
	struct mi_pass_stats dummy;
	int r, changed, rounds = 0;

	if (!st)
		st = &dummy;
	memset(st, 0, sizeof(*st));
	do {
		changed = 0;
		if (!(flags & MI_MODEL_NO_FOLD)) {
			r = mi_graph_fold_constants(g);
			if (r < 0)
				return r;
			st->folded += r;
			changed += r;
		}
		r = mi_pass_fold_batchnorm(g);
		if (r < 0)
			return r;
		st->bn_folded += r;
		changed += r;
		r = mi_pass_remove_noops(g);
		if (r < 0)
			return r;
		st->noops += r;
		changed += r;
		r = mi_pass_canonicalize(g);
		if (r < 0)
			return r;
		st->canonical += r;
		changed += r;
		r = mi_graph_dead_nodes(g);
		if (r < 0)
			return r;
		st->dead += r;
		changed += r;
	} while (changed && ++rounds < 8);
	return 0;
}
