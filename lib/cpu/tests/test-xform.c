// SPDX-License-Identifier: MIT
/*
 * Transformer fast paths (lib/cpu/eltwise.c + xform_*.c) against the
 * reference executor: GELU chains (Erf and tanh forms, every association
 * of the x * p * 0.5 tail) fused into one node, LayerNormalization,
 * the vector erf.  Each graph runs once with every node on its lib/ops
 * reference op and once planned (planned nodes' outputs pre-filled with
 * NaN), on random shapes; run for every ISA (--isa).  Patterns that
 * must not fuse (wrong constant, shared intermediate) are checked to
 * stay unfused and still correct; mi_cpu_plan_fini() must restore them.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "ops/ops.h"
#include "cpu/cpu.h"
#include "cpu/cpu_plan.h"
#include "cpu/xform.h"

#include "cpu-test.h"

static int last_planned; /* nodes with a fast kernel in check_graph */
static int xf_threads = 2; /* check_graph's planned run */

static unsigned int seed = 777;

static float rfl(void)
{
	seed = seed * 1103515245u + 12345u;
	return (float)((seed >> 9) % 20001) / 10000.0f - 1.0f;
}

static int rint_(int lo, int hi)
{
	seed = seed * 1103515245u + 12345u;
	return lo + (int)((seed >> 8) % (unsigned)(hi - lo + 1));
}

static int tensor(struct mi_graph *g, const char *name, int ndim,
		  const int64_t *dims, unsigned int flags, float scale)
{
	int t = mi_graph_add_tensor(g, name);
	struct mi_tensor *x = &g->tensors[t];

	mi_tensor_set_shape(x, MI_DT_FLOAT, ndim, dims);
	if (flags & (MI_TF_CONST | MI_TF_INPUT)) {
		mi_tensor_alloc(x);
		for (int64_t i = 0; i < mi_tensor_numel(x); i++)
			((float *)x->data)[i] = scale * rfl();
	}
	x->flags |= flags;
	return t;
}

static int scalar(struct mi_graph *g, float v)
{
	int64_t d[1] = { 1 };
	char name[32];
	int t;

	snprintf(name, sizeof(name), "c%d", g->ntensors);
	t = tensor(g, name, 0, d, MI_TF_CONST, 0);
	((float *)g->tensors[t].data)[0] = v;
	return t;
}

/* same shape as tensor `like`, computed */
static int tmp(struct mi_graph *g, int like)
{
	char name[32];

	snprintf(name, sizeof(name), "t%d", g->ntensors);
	return tensor(g, name, g->tensors[like].ndim, g->tensors[like].dims, 0,
		      0);
}

static int node(struct mi_graph *g, const char *op, int a, int b, int out)
{
	int in[2] = { a, b };
	int nd = mi_graph_add_node(g, op, op, in, b >= 0 ? 2 : 1, &out, 1);

	g->nodes[nd].def = mi_op_find(op, "");
	return nd;
}

static int live_nodes(const struct mi_graph *g)
{
	int c = 0;

	for (int i = 0; i < g->nnodes; i++)
		c += !g->nodes[i].dead;
	return c;
}

/* Run g in order: planned nodes get NaN-filled outputs, reference nodes
 * zeroed ones (the executor's contract).  Returns 0 on success. */
static int run_graph(struct mi_graph *g)
{
	for (int p = 0; p < g->norder; p++) {
		struct mi_node *n = &g->nodes[g->order[p]];

		for (int j = 0; j < n->noutputs; j++) {
			struct mi_tensor *y = mi_out(g, n, j);
			int64_t k = mi_tensor_numel(y);

			if (!y->data && mi_tensor_alloc(y))
				return -1;
			for (int64_t i = 0; i < k; i++)
				((float *)y->data)[i] = n->priv ? NAN : 0.0f;
		}
		if (n->priv ? mi_cpu_node_run(g, n) : n->def->run(g, n))
			return -1;
	}
	return 0;
}

/*
 * Plan g (output tensor y, `want` live nodes after planning or -1: not
 * checked), run it, compare with the reference run, undo.
 */
static void check_graph(struct mi_graph *g, int y, int want, double tol,
			const char *what)
{
	struct mi_cpu_opts o = { .nthreads = xf_threads, .isa = test_isa }, ro = { .reference = 1 };
	int64_t ny = mi_tensor_numel(&g->tensors[y]);
	int before = live_nodes(g);
	float *ref = malloc(ny * sizeof(float));
	double e;

	g->outputs = malloc(sizeof(int));
	g->outputs[0] = y;
	g->noutputs = 1;
	g->tensors[y].flags |= MI_TF_OUTPUT;
	g->opset = 17;
	CHECK(!mi_graph_toposort(g), "%s: %s", what, g->err);
	CHECK(!mi_cpu_plan(g, &ro), "%s", g->err);
	CHECK(!run_graph(g), "%s: reference run: %s", what, g->err);
	memcpy(ref, g->tensors[y].data, ny * sizeof(float));
	mi_cpu_plan_fini(g);
	/* computed tensors have no memory when planning (as in exec.c) */
	for (int i = 0; i < g->ntensors; i++)
		if (!(g->tensors[i].flags & (MI_TF_CONST | MI_TF_INPUT)))
			mi_tensor_free_data(&g->tensors[i]);
	CHECK(!mi_cpu_plan(g, &o), "%s: %s", what, g->err);
	CHECK(!mi_graph_toposort(g), "%s: %s", what, g->err);
	last_planned = 0;
	for (int i = 0; i < g->nnodes; i++)
		last_planned += g->nodes[i].priv != NULL;
	if (want >= 0)
		CHECK(live_nodes(g) == want, "%s: %d live nodes, want %d",
		      what, live_nodes(g), want);
	CHECK(!run_graph(g), "%s: planned run: %s", what, g->err);
	e = nerr(g->tensors[y].data, ref, ny);
	CHECK(e <= tol, "%s (%lld elements): err %g", what, (long long)ny, e);
	mi_cpu_plan_fini(g);
	CHECK(live_nodes(g) == before, "%s: fini left %d live nodes of %d",
	      what, live_nodes(g), before);
	free(ref);
}

static void rand_shape(int64_t *d, int *nd)
{
	*nd = rint_(1, 4);
	for (int i = 0; i < *nd; i++)
		d[i] = rint_(1, 9);
	/* >= 2: a [N,C,1,1] Mul(x, x) is the channel-scale kernel's */
	d[*nd - 1] = rint_(2, 70);
}

static int64_t prod(const int64_t *d, int nd)
{
	int64_t p = 1;

	for (int i = 0; i < nd; i++)
		p *= d[i];
	return p;
}

/*
 * GELU, Erf form.  scale_form: 0 Div(x, sqrt2), 1 Mul(x, 1/sqrt2),
 * 2 Mul(1/sqrt2, x); tail: 0 Mul(Mul(x, p), 0.5), 1 Mul(Mul(p, 0.5), x),
 * 2 Mul(Mul(x, 0.5), p).  spoil: 0 none, 1 Div by 2 (not GELU),
 * 2 the Erf output also a second consumer's input, 3 add 2 not 1.
 */
static void gelu_erf_case(int scale_form, int tail, int spoil, int big)
{
	struct mi_graph g;
	int64_t d[4];
	int nd, x, u, e, p, q, y, h, extra;
	char what[96];

	rand_shape(d, &nd);
	/* big 1: split by element count; 2: 16K-24K elements, split only
	 * because Erf weighs 8 (elt_weight) */
	if (big)
		d[0] = (big == 1 ? 70000 : 16000 + rint_(0, 8000)) /
			       prod(d + 1, nd - 1) + 1;
	mi_graph_init(&g);
	x = tensor(&g, "x", nd, d, MI_TF_INPUT, 5.0f);
	u = tmp(&g, x), e = tmp(&g, x), p = tmp(&g, x), q = tmp(&g, x);
	y = tmp(&g, x);
	if (scale_form == 0)
		node(&g, "Div", x, scalar(&g, spoil == 1 ? 2.0f : 1.4142135f), u);
	else if (scale_form == 1)
		node(&g, "Mul", x, scalar(&g, 0.70710678f), u);
	else
		node(&g, "Mul", scalar(&g, 0.70710678f), x, u);
	node(&g, "Erf", u, -1, e);
	node(&g, "Add", scalar(&g, spoil == 3 ? 2.0f : 1.0f), e, p);
	if (tail == 0) {
		node(&g, "Mul", x, p, q);
		node(&g, "Mul", q, scalar(&g, 0.5f), y);
	} else if (tail == 1) {
		node(&g, "Mul", p, scalar(&g, 0.5f), q);
		node(&g, "Mul", x, q, y);
	} else {
		h = tmp(&g, x);
		node(&g, "Mul", scalar(&g, 0.5f), x, h);
		node(&g, "Mul", h, p, y);
		q = h;
	}
	if (spoil == 2) {
		/* y2 = y + e: e has two consumers */
		extra = tmp(&g, x);
		node(&g, "Add", y, e, extra);
		y = extra;
	}
	snprintf(what, sizeof(what), "gelu erf scale %d tail %d spoil %d n %lld",
		 scale_form, tail, spoil, (long long)prod(d, nd));
	check_graph(&g, y, spoil ? -1 : 1, 2e-6, what);
	mi_graph_fini(&g);
	(void)q;
}

/* GELU, tanh form; cube_form: 0 Pow(x, 3), 1 Mul(Mul(x, x), x); spoil:
 * 1 wrong coefficient 0.05. */
static void gelu_tanh_case(int cube_form, int tail, int spoil)
{
	struct mi_graph g;
	int64_t d[4];
	int nd, x, c, w, s, z, e, p, q, y, h;
	char what[96];

	rand_shape(d, &nd);
	mi_graph_init(&g);
	x = tensor(&g, "x", nd, d, MI_TF_INPUT, 5.0f);
	c = tmp(&g, x), w = tmp(&g, x), s = tmp(&g, x), z = tmp(&g, x);
	e = tmp(&g, x), p = tmp(&g, x), q = tmp(&g, x), y = tmp(&g, x);
	if (cube_form == 0) {
		node(&g, "Pow", x, scalar(&g, 3.0f), c);
	} else {
		int sq = tmp(&g, x);

		node(&g, "Mul", x, x, sq);
		node(&g, "Mul", sq, x, c);
	}
	node(&g, "Mul", scalar(&g, spoil ? 0.05f : 0.044715f), c, w);
	node(&g, "Add", x, w, s);
	node(&g, "Mul", s, scalar(&g, 0.7978845608f), z);
	node(&g, "Tanh", z, -1, e);
	node(&g, "Add", e, scalar(&g, 1.0f), p);
	if (tail == 0) {
		node(&g, "Mul", p, x, q);
		node(&g, "Mul", scalar(&g, 0.5f), q, y);
	} else if (tail == 1) {
		node(&g, "Mul", scalar(&g, 0.5f), p, q);
		node(&g, "Mul", q, x, y);
	} else {
		h = tmp(&g, x);
		node(&g, "Mul", x, scalar(&g, 0.5f), h);
		node(&g, "Mul", p, h, y);
	}
	snprintf(what, sizeof(what), "gelu tanh cube %d tail %d spoil %d",
		 cube_form, tail, spoil);
	check_graph(&g, y, spoil ? -1 : 1, 2e-6, what);
	mi_graph_fini(&g);
}

static void set_attr(struct mi_graph *g, int nd, const char *name, int type,
		     int64_t i, float f)
{
	struct mi_node *n = &g->nodes[nd];

	n->attrs = realloc(n->attrs, (n->nattrs + 1) * sizeof(*n->attrs));
	memset(&n->attrs[n->nattrs], 0, sizeof(*n->attrs));
	n->attrs[n->nattrs].name = strdup(name);
	n->attrs[n->nattrs].type = type;
	n->attrs[n->nattrs].i = i;
	n->attrs[n->nattrs].f = f;
	n->nattrs++;
}

/* LayerNormalization over axes [axis, nd); bias: 0 none, 1 full;
 * lead1: scale gets a leading 1 axis; bad_scale: scale covers only the
 * last axis while axis < nd - 1 (broadcast: reference only). */
static void layernorm_case(int bias, bool lead1, bool bad_scale, bool big)
{
	struct mi_graph g;
	int64_t d[4], sd[5];
	int nd, axis, x, sc, bi = -1, y, n, snd;
	char what[96];

	rand_shape(d, &nd);
	if (nd < 2)
		d[nd++] = rint_(2, 5);
	if (big)
		d[0] = 70000 / prod(d + 1, nd - 1) + 1;
	axis = rint_(1, nd - 1);
	if (bad_scale && axis == nd - 1)
		axis--;
	snd = 0;
	if (lead1)
		sd[snd++] = 1;
	for (int i = bad_scale ? nd - 1 : axis; i < nd; i++)
		sd[snd++] = d[i];
	mi_graph_init(&g);
	x = tensor(&g, "x", nd, d, MI_TF_INPUT, 3.0f);
	for (int64_t i = 0; i < prod(d, nd); i++)
		((float *)g.tensors[x].data)[i] += (float)(i % 7);
	sc = tensor(&g, "scale", snd, sd, MI_TF_CONST, 2.0f);
	if (bias)
		bi = tensor(&g, "bias", snd, sd, MI_TF_CONST, 1.0f);
	y = tmp(&g, x);
	n = mi_graph_add_node(&g, "ln", "LayerNormalization",
			      (int[]){ x, sc, bi }, bias ? 3 : 2, &y, 1);
	g.nodes[n].def = mi_op_find("LayerNormalization", "");
	set_attr(&g, n, "axis", MI_ATTR_INT, axis - (rint_(0, 1) ? nd : 0), 0);
	set_attr(&g, n, "epsilon", MI_ATTR_FLOAT, 0, 1e-3f);
	snprintf(what, sizeof(what), "layernorm nd %d axis %d bias %d lead1 %d bad %d",
		 nd, axis, bias, lead1, bad_scale);
	check_graph(&g, y, 1, 2e-6, what);
	/* planned unless the scale only broadcasts */
	CHECK(last_planned == !bad_scale, "%s: planned %d", what,
	      last_planned);
	mi_graph_fini(&g);
}

static void set_ints(struct mi_graph *g, int nd, const char *name,
		     const int64_t *v, int cnt)
{
	struct mi_node *n = &g->nodes[nd];

	n->attrs = realloc(n->attrs, (n->nattrs + 1) * sizeof(*n->attrs));
	memset(&n->attrs[n->nattrs], 0, sizeof(*n->attrs));
	n->attrs[n->nattrs].name = strdup(name);
	n->attrs[n->nattrs].type = MI_ATTR_INTS;
	n->attrs[n->nattrs].n = cnt;
	n->attrs[n->nattrs].ints = malloc((cnt + 1) * sizeof(int64_t));
	memcpy(n->attrs[n->nattrs].ints, v, cnt * sizeof(int64_t));
	n->nattrs++;
}

static int const_i64(struct mi_graph *g, const int64_t *v, int cnt)
{
	int64_t d[1] = { cnt };
	char name[32];
	int t = mi_graph_add_tensor(g, (snprintf(name, sizeof(name), "i%d",
						 g->ntensors), name));
	struct mi_tensor *x = &g->tensors[t];

	mi_tensor_set_shape(x, MI_DT_INT64, 1, d);
	mi_tensor_alloc(x);
	memcpy(x->data, v, cnt * sizeof(int64_t));
	x->flags |= MI_TF_CONST;
	return t;
}

static void shuffle(int *p, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = i;
	for (int i = n - 1; i > 0; i--) {
		int j = rint_(0, i), t = p[i];

		p[i] = p[j];
		p[j] = t;
	}
}

/* Transpose with a random permutation (incl. the channel shuffle) */
static void transpose_case(bool shuffle_form, bool big)
{
	struct mi_graph g;
	int64_t d[6], yd[6], perm[6];
	int nd, x, y, n, p[6];
	char what[96];

	if (shuffle_form) {
		nd = 5;
		d[0] = 1, d[1] = 2, d[2] = rint_(1, 60), d[3] = rint_(1, 14);
		d[4] = rint_(1, 14);
		if (big)
			d[2] = 116, d[3] = d[4] = 28;
		p[0] = 0, p[1] = 2, p[2] = 1, p[3] = 3, p[4] = 4;
	} else {
		nd = rint_(1, 6);
		for (int i = 0; i < nd; i++)
			d[i] = rint_(1, 7);
		shuffle(p, nd);
	}
	for (int i = 0; i < nd; i++)
		perm[i] = p[i], yd[i] = d[p[i]];
	mi_graph_init(&g);
	x = tensor(&g, "x", nd, d, MI_TF_INPUT, 1.0f);
	y = tensor(&g, "y", nd, yd, 0, 0);
	n = node(&g, "Transpose", x, -1, y);
	set_ints(&g, n, "perm", perm, nd);
	snprintf(what, sizeof(what), "transpose nd %d shuffle %d", nd,
		 shuffle_form);
	check_graph(&g, y, 1, 0, what);
	CHECK(last_planned == 1, "%s: not planned", what);
	mi_graph_fini(&g);
}

/* Slice with random starts/ends/steps (some negative, some out of
 * range), axes given or not, as inputs (opset >= 10) */
static void slice_case(void)
{
	struct mi_graph g;
	int64_t d[5], yd[5], st[5], en[5], ax[5], sp[5];
	int nd = rint_(1, 5), na, x, y, n, ins[5], p[5];
	bool axes = rint_(0, 1), steps = rint_(0, 1);
	char what[96];

	for (int i = 0; i < nd; i++)
		d[i] = yd[i] = rint_(1, 9);
	na = axes ? rint_(1, nd) : nd;
	shuffle(p, nd);
	for (int i = 0; i < na; i++) {
		int a = axes ? p[i] : i;
		int64_t dim = d[a], s, e, step, len;

		step = steps ? (rint_(0, 3) ? rint_(1, 3) : -rint_(1, 3)) : 1;
		st[i] = rint_(-(int)dim - 2, (int)dim + 2);
		en[i] = rint_(0, 5) ? rint_(-(int)dim - 2, (int)dim + 2) :
				       (step > 0 ? INT64_MAX : INT64_MIN);
		ax[i] = axes ? (rint_(0, 1) ? a : a - nd) : i;
		sp[i] = step;
		/* expected length (ONNX rules) */
		s = st[i] < 0 ? (st[i] < -dim ? -1 : st[i] + dim) : st[i];
		e = en[i] < 0 ? (en[i] < -dim ? -1 : en[i] + dim) : en[i];
		if (step > 0) {
			s = s < 0 ? 0 : s > dim ? dim : s;
			e = e < 0 ? 0 : e > dim ? dim : e;
			len = e > s ? (e - s + step - 1) / step : 0;
		} else {
			s = s < 0 ? 0 : s > dim - 1 ? dim - 1 : s;
			e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
			len = s > e ? (s - e - step - 1) / -step : 0;
		}
		if (len == 0) { /* keep the output non-empty */
			st[i] = 0, en[i] = dim, sp[i] = 1;
			len = dim;
		}
		yd[a] = len;
	}
	mi_graph_init(&g);
	x = tensor(&g, "x", nd, d, MI_TF_INPUT, 1.0f);
	y = tensor(&g, "y", nd, yd, 0, 0);
	ins[0] = x;
	ins[1] = const_i64(&g, st, na);
	ins[2] = const_i64(&g, en, na);
	ins[3] = axes || steps ? const_i64(&g, ax, na) : -1;
	ins[4] = steps ? const_i64(&g, sp, na) : -1;
	n = mi_graph_add_node(&g, "slice", "Slice", ins,
			      steps ? 5 : axes ? 4 : 3, &y, 1);
	g.nodes[n].def = mi_op_find("Slice", "");
	snprintf(what, sizeof(what), "slice nd %d axes %d steps %d", nd, axes,
		 steps);
	check_graph(&g, y, 1, 0, what);
	CHECK(last_planned == 1, "%s: not planned", what);
	mi_graph_fini(&g);
}

static void concat_case(bool big)
{
	struct mi_graph g;
	int64_t d[4], yd[4];
	int nd = rint_(1, 4), nin = rint_(1, 5), axis = rint_(0, nd - 1);
	int ins[5], y, n;
	char what[96];

	for (int i = 0; i < nd; i++)
		d[i] = yd[i] = rint_(1, 6);
	if (big)
		d[nd - 1] = yd[nd - 1] = 30000;
	mi_graph_init(&g);
	yd[axis] = 0;
	for (int k = 0; k < nin; k++) {
		char name[8];

		d[axis] = rint_(1, 5);
		yd[axis] += d[axis];
		snprintf(name, sizeof(name), "x%d", k);
		ins[k] = tensor(&g, name, nd, d, MI_TF_INPUT, 1.0f);
	}
	y = tensor(&g, "y", nd, yd, 0, 0);
	n = mi_graph_add_node(&g, "concat", "Concat", ins, nin, &y, 1);
	g.nodes[n].def = mi_op_find("Concat", "");
	set_attr(&g, n, "axis", MI_ATTR_INT, axis - (rint_(0, 1) ? nd : 0), 0);
	snprintf(what, sizeof(what), "concat nd %d inputs %d axis %d", nd, nin,
		 axis);
	check_graph(&g, y, 1, 0, what);
	CHECK(last_planned == 1, "%s: not planned", what);
	mi_graph_fini(&g);
}

/* Reduce over a random axis set; planned iff the reduced axes (ignoring
 * size-1 ones) are contiguous */
static void reduce_case(const char *op, bool keep, bool as_input)
{
	struct mi_graph g;
	int64_t d[5], yd[5], ax[5];
	int nd = rint_(1, 5), na = 0, ny = 0, x, y, n, mask[5] = { 0 };
	int k = -1, l = -1;
	bool contiguous = true, any = false;
	char what[96];

	for (int i = 0; i < nd; i++) {
		d[i] = rint_(1, 8);
		if (rint_(0, 2) == 0) {
			mask[i] = 1;
			ax[na++] = rint_(0, 1) ? i : i - nd;
		}
	}
	for (int i = 0; i < nd; i++) {
		if (!na)
			mask[i] = 1;
		if (mask[i] && d[i] != 1) {
			if (k >= 0)
				for (int m = l + 1; m < i; m++)
					if (d[m] != 1)
						contiguous = false;
			if (k < 0)
				k = i;
			l = i;
			any = true;
		}
		if (!mask[i])
			yd[ny++] = d[i];
		else if (keep)
			yd[ny++] = 1;
	}
	mi_graph_init(&g);
	x = tensor(&g, "x", nd, d, MI_TF_INPUT, 4.0f);
	y = tensor(&g, "y", ny, yd, 0, 0);
	if (as_input && na) {
		int ins[2] = { x, const_i64(&g, ax, na) };

		n = mi_graph_add_node(&g, "red", op, ins, 2, &y, 1);
	} else {
		n = mi_graph_add_node(&g, "red", op, &x, 1, &y, 1);
		if (na)
			set_ints(&g, n, "axes", ax, na);
	}
	g.nodes[n].def = mi_op_find(op, "");
	set_attr(&g, n, "keepdims", MI_ATTR_INT, keep, 0);
	snprintf(what, sizeof(what), "%s nd %d axes %d keep %d input %d", op,
		 nd, na, keep, as_input);
	check_graph(&g, y, 1, 1e-6, what);
	CHECK(last_planned == (contiguous && any), "%s: planned %d, want %d",
	      what, last_planned, contiguous && any);
	mi_graph_fini(&g);
}

/* Pad (constant mode) with random non-negative pads as an input and a
 * constant value; all-zero pads included (a copy) */
static void pad_case(bool zero)
{
	struct mi_graph g;
	int64_t d[4], yd[4], pads[8];
	int nd = rint_(1, 4), x, y, n, ins[3];
	char what[96];

	for (int i = 0; i < nd; i++) {
		d[i] = rint_(1, 7);
		pads[i] = zero ? 0 : rint_(0, 3);
		pads[nd + i] = zero ? 0 : rint_(0, 3);
		yd[i] = d[i] + pads[i] + pads[nd + i];
	}
	mi_graph_init(&g);
	x = tensor(&g, "x", nd, d, MI_TF_INPUT, 1.0f);
	y = tensor(&g, "y", nd, yd, 0, 0);
	ins[0] = x;
	ins[1] = const_i64(&g, pads, 2 * nd);
	ins[2] = scalar(&g, 1.5f);
	n = mi_graph_add_node(&g, "pad", "Pad", ins, 3, &y, 1);
	g.nodes[n].def = mi_op_find("Pad", "");
	snprintf(what, sizeof(what), "pad nd %d zero %d", nd, zero);
	check_graph(&g, y, 1, 0, what);
	CHECK(last_planned == 1, "%s: not planned", what);
	mi_graph_fini(&g);
}

/* Add/Sub/Mul/Div with random numpy broadcasting of both operands */
static void bcast_case(const char *op, bool big)
{
	struct mi_graph g;
	int64_t y[5], da[5], db[5];
	int nd = rint_(1, 5), na = rint_(1, nd), nb = rint_(1, nd), a, b, t;
	char what[96];

	for (int i = 0; i < nd; i++)
		y[i] = rint_(1, 6);
	if (big)
		y[nd - 1] = 40000;
	for (int i = 0; i < na; i++)
		da[i] = rint_(0, 2) ? y[nd - na + i] : 1;
	for (int i = 0; i < nb; i++)
		db[i] = rint_(0, 2) ? y[nd - nb + i] : 1;
	/* y is the broadcast of a and b */
	for (int i = 0; i < nd; i++) {
		int64_t ea = i >= nd - na ? da[i - (nd - na)] : 1;
		int64_t eb = i >= nd - nb ? db[i - (nd - nb)] : 1;

		y[i] = ea > eb ? ea : eb;
	}
	mi_graph_init(&g);
	a = tensor(&g, "a", na, da, MI_TF_INPUT, 2.0f);
	b = tensor(&g, "b", nb, db, MI_TF_INPUT, 2.0f);
	if (!strcmp(op, "Div"))
		for (int64_t i = 0; i < mi_tensor_numel(&g.tensors[b]); i++)
			((float *)g.tensors[b].data)[i] += 3.0f;
	t = tensor(&g, "y", nd, y, 0, 0);
	node(&g, op, a, b, t);
	snprintf(what, sizeof(what), "%s broadcast nd %d/%d/%d", op, na, nb, nd);
	check_graph(&g, t, 1, 1e-6, what);
	CHECK(last_planned == 1, "%s: not planned", what);
	mi_graph_fini(&g);
}

/*
 * Slice -> Reshape -> Transpose (attention head split): the Transpose
 * reads the Slice's input directly when the axes line up (split form:
 * the sliced last axis is split in two, always foldable), or not (merge
 * form: the Reshape merges a sliced axis with its neighbour, folded only
 * when that stays one strided axis).  Results must match either way.
 */
static void fold_case(bool split)
{
	struct mi_graph g;
	int64_t d[3], sd[3], rd[4], yd[4], perm[4], st[1], en[1], ax[1];
	int x, s, r, y, n, ins[4], nr, p[4];
	char what[96];

	d[0] = rint_(1, 9), d[1] = rint_(1, 4), d[2] = 4 * rint_(1, 6);
	ax[0] = split ? 2 : rint_(0, 2);
	memcpy(sd, d, sizeof(d));
	st[0] = rint_(0, 1) * (d[ax[0]] / 2);
	en[0] = st[0] + (d[ax[0]] - st[0]) / (split ? 4 : 1) * (split ? 2 : 1);
	if (en[0] <= st[0])
		en[0] = st[0] + 1;
	if (split)
		en[0] = st[0] + 4 * ((en[0] - st[0] + 3) / 4);
	if (en[0] > d[ax[0]]) {
		st[0] = 0;
		en[0] = d[ax[0]];
	}
	sd[ax[0]] = en[0] - st[0];
	if (split) {
		nr = 4;
		rd[0] = sd[0], rd[1] = sd[1], rd[2] = 4, rd[3] = sd[2] / 4;
	} else {
		nr = 2;
		rd[0] = sd[0] * sd[1], rd[1] = sd[2];
	}
	shuffle(p, nr);
	for (int i = 0; i < nr; i++)
		perm[i] = p[i], yd[i] = rd[p[i]];
	mi_graph_init(&g);
	x = tensor(&g, "x", 3, d, MI_TF_INPUT, 1.0f);
	s = tensor(&g, "s", 3, sd, 0, 0);
	r = tensor(&g, "r", nr, rd, 0, 0);
	y = tensor(&g, "y", nr, yd, 0, 0);
	ins[0] = x;
	ins[1] = const_i64(&g, st, 1);
	ins[2] = const_i64(&g, en, 1);
	ins[3] = const_i64(&g, ax, 1);
	n = mi_graph_add_node(&g, "slice", "Slice", ins, 4, &s, 1);
	g.nodes[n].def = mi_op_find("Slice", "");
	n = node(&g, "Reshape", s, const_i64(&g, rd, nr), r);
	n = node(&g, "Transpose", r, -1, y);
	set_ints(&g, n, "perm", perm, nr);
	snprintf(what, sizeof(what), "fold split %d axis %lld [%lld,%lld)",
		 split, (long long)ax[0], (long long)st[0], (long long)en[0]);
	check_graph(&g, y, split ? 1 : -1, 0, what);
	mi_graph_fini(&g);
}

/* The vector erf of the table: absolute error over a dense sweep. */
static void test_verf(void)
{
	const struct mi_xform_kern *k = mi_xform_kern_get(test_isa);
	int n = 120001;
	float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
	float *g = malloc(n * sizeof(float));
	double worst = 0, wg = 0;

	for (int i = 0; i < n; i++)
		x[i] = -7.0f + 14.0f * i / (n - 1);
	x[0] = NAN, x[1] = INFINITY, x[2] = -INFINITY, x[3] = 1e-30f;
	k->erf(x, y, n);
	k->gelu(x, g, n, 0);
	for (int i = 3; i < n; i++) {
		double r = erf((double)x[i]);
		double rg = 0.5 * x[i] * (1 + erf(x[i] / sqrt(2.0)));
		double e = fabs(y[i] - r), eg;

		worst = e > worst || isnan(e) ? e : worst;
		/* GELU: relative to max(|x|, 1) (the scale of the output) */
		eg = fabs(g[i] - rg) / fmax(fabs(x[i]), 1.0);
		wg = eg > wg || isnan(eg) ? eg : wg;
	}
	CHECK(worst <= 3e-7, "vector erf abs error %g", worst);
	CHECK(wg <= 3e-7, "vector gelu error %g", wg);
	CHECK(isnan(y[0]) && y[1] == 1.0f && y[2] == -1.0f,
	      "erf(nan, inf, -inf) = %g %g %g", y[0], y[1], y[2]);
	free(x), free(y), free(g);
}

int main(int argc, char **argv)
{
	test_isa_arg(argc, argv);
	printf("test-xform: isa=%s\n", mi_cpu_isa_name(test_isa));
	test_verf();
	for (int sf = 0; sf < 3; sf++)
		for (int t = 0; t < 3; t++)
			gelu_erf_case(sf, t, 0, sf == 1 && t == 2);
	for (int sp = 1; sp <= 3; sp++)
		gelu_erf_case(sp == 1 ? 0 : sp, sp % 3, sp, false);
	/* GELUs split over 2 and 3 threads from 8K elements */
	for (xf_threads = 2; xf_threads <= 3; xf_threads++)
		for (int r = 0; r < 4; r++)
			gelu_erf_case(r % 3, r % 3, 0, 2);
	xf_threads = 2;
	for (int cf = 0; cf < 2; cf++)
		for (int t = 0; t < 3; t++)
			gelu_tanh_case(cf, t, 0);
	gelu_tanh_case(0, 1, 1);
	for (int r = 0; r < 6; r++)
		layernorm_case(r & 1, r >= 4, false, r == 3);
	layernorm_case(1, false, true, false);
	layernorm_case(0, true, true, false);
	for (int r = 0; r < 12; r++) {
		transpose_case(r < 3, r == 0);
		slice_case();
		slice_case();
		concat_case(r == 1);
		pad_case(r == 0);
	}
	/* the copies large enough to split, on 3 threads and 1 too (the
	 * odd count: blocks of unequal size claimed by other threads) */
	for (xf_threads = 1; xf_threads <= 3; xf_threads += 2)
		for (int r = 0; r < 4; r++) {
			transpose_case(true, true);
			concat_case(true);
		}
	xf_threads = 2;
	for (int r = 0; r < 16; r++) {
		fold_case(true);
		fold_case(false);
	}
	for (int r = 0; r < 16; r++) {
		static const char *const ops[] = { "Add", "Sub", "Mul", "Div" };

		for (int k = 0; k < 4; k++)
			bcast_case(ops[k], r == 0);
	}
	for (int r = 0; r < 10; r++) {
		static const char *const ops[] = { "ReduceMean", "ReduceSum",
						   "ReduceMax", "ReduceMin" };

		for (int k = 0; k < 4; k++)
			reduce_case(ops[k], r & 1, (r & 2) && k == 1);
	}
	printf("test-xform: %d checks, %d failed\n", checks, failures);
	return failures ? 1 : 0;
}
