// SPDX-License-Identifier: MIT
/*
 * Default planner: builds small graphs with the IR API, plans them, checks
 * which nodes were fused and how the graph was rewired, runs the fused
 * nodes and compares with the scalar reference, then checks that
 * mi_cpu_plan_fini() restores the original graph.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "cpu/cpu.h"
#include "cpu/cpu_plan.h"

#include "cpu-test.h"

static unsigned int seed = 12345;

static float rfl(void)
{
	seed = seed * 1103515245u + 12345u;
	return (float)((seed >> 9) % 20001) / 10000.0f - 1.0f;
}

static int tensor(struct mi_graph *g, const char *name, int ndim,
		  const int64_t *dims, unsigned int flags, bool fill)
{
	int t = mi_graph_add_tensor(g, name);
	struct mi_tensor *x = &g->tensors[t];

	mi_tensor_set_shape(x, MI_DT_FLOAT, ndim, dims);
	if (fill) {
		mi_tensor_alloc(x);
		for (int64_t i = 0; i < mi_tensor_numel(x); i++)
			((float *)x->data)[i] = rfl();
	}
	x->flags |= flags;
	return t;
}

static int node(struct mi_graph *g, const char *op, int nin, const int *in,
		int out)
{
	return mi_graph_add_node(g, op, op, in, nin, &out, 1);
}

static void set_outputs(struct mi_graph *g, int n, const int *outs)
{
	g->outputs = malloc(n * sizeof(int));
	g->noutputs = n;
	for (int i = 0; i < n; i++) {
		g->outputs[i] = outs[i];
		g->tensors[outs[i]].flags |= MI_TF_OUTPUT;
	}
}

/* Run every planned node of g in order (all nodes must be planned). */
static int run_planned(struct mi_graph *g)
{
	for (int p = 0; p < g->norder; p++) {
		struct mi_node *n = &g->nodes[g->order[p]];
		struct mi_tensor *y = mi_out(g, n, 0);

		if (!n->priv)
			return -1;
		if (!y->data && mi_tensor_alloc(y))
			return -1;
		if (mi_cpu_node_run(g, n))
			return -1;
	}
	return 0;
}

static int live_nodes(const struct mi_graph *g)
{
	int c = 0;

	for (int i = 0; i < g->nnodes; i++)
		c += !g->nodes[i].dead;
	return c;
}

/* Conv(pad 1) -> Add(residual) -> Relu */
static void test_conv_add_relu(int nofuse)
{
	struct mi_graph g;
	struct mi_cpu_opts o = { .nthreads = 2, .isa = test_isa };
	int64_t dx[4] = { 1, 8, 10, 10 }, dw[4] = { 16, 8, 3, 3 },
		db[1] = { 16 }, dy[4] = { 1, 16, 10, 10 };
	int64_t pads[4] = { 1, 1, 1, 1 };
	struct mi_conv_shape s = { .n = 1, .c = 8, .h = 10, .w = 10, .m = 16,
				   .kh = 3, .kw = 3, .group = 1, .sh = 1,
				   .sw = 1, .dh = 1, .dw = 1, .pt = 1,
				   .pl = 1, .pb = 1, .pr = 1, .oh = 10,
				   .ow = 10 };
	float ref[1600];
	int x, w, b, r, t1, t2, y, cv, add, relu;

	mi_graph_init(&g);
	x = tensor(&g, "x", 4, dx, MI_TF_INPUT, true);
	r = tensor(&g, "r", 4, dy, MI_TF_INPUT, true);
	w = tensor(&g, "w", 4, dw, MI_TF_CONST | MI_TF_INITIALIZER, true);
	b = tensor(&g, "b", 1, db, MI_TF_CONST | MI_TF_INITIALIZER, true);
	t1 = tensor(&g, "t1", 4, dy, 0, false);
	t2 = tensor(&g, "t2", 4, dy, 0, false);
	y = tensor(&g, "y", 4, dy, 0, false);
	cv = node(&g, "Conv", 3, (int[]){ x, w, b }, t1);
	mi_node_set_ints(&g.nodes[cv], "pads", pads, 4);
	add = node(&g, "Add", 2, (int[]){ r, t1 }, t2);
	relu = node(&g, "Relu", 1, (int[]){ t2 }, y);
	set_outputs(&g, 1, &y);
	CHECK(!mi_graph_toposort(&g), "%s", g.err);
	/* a plan naming the conv's variant with nothing fused */
	struct mi_plan_req req[3] = { [0] = { .variant = "conv.im2col",
					      .prov = MI_PROV_NCHW } };
	struct mi_plan_ctx ctx = { .nnodes = 3, .req = req };

	if (nofuse)
		o.ctx = &ctx;
	CHECK(!mi_cpu_plan(&g, &o), "%s", g.err);
	CHECK(g.nodes[cv].priv, "conv not planned");
	if (nofuse) {
		CHECK(!g.nodes[add].dead && !g.nodes[relu].dead, "fused anyway");
		mi_cpu_plan_fini(&g);
		mi_plan_ctx_reset(&ctx);
		mi_graph_fini(&g);
		return;
	}
	CHECK(g.nodes[add].dead && g.nodes[relu].dead, "not fused");
	CHECK(g.nodes[cv].outputs[0] == y, "conv does not write y");
	CHECK(g.nodes[cv].ninputs == 4 && g.nodes[cv].inputs[3] == r,
	      "residual not an input");
	CHECK(!mi_graph_toposort(&g) && g.norder == 1, "order %d", g.norder);
	CHECK(!run_planned(&g), "run failed: %s", g.err);
	mi_conv_ref(&s, g.tensors[x].data, g.tensors[w].data,
		    g.tensors[b].data, g.tensors[r].data, MI_ACT_RELU, 0, 0,
		    ref);
	CHECK(nerr(g.tensors[y].data, ref, 1600) < 1e-5, "err %g",
	      nerr(g.tensors[y].data, ref, 1600));
	mi_cpu_plan_fini(&g);
	CHECK(!g.nodes[cv].priv && !g.nodes[add].dead && !g.nodes[relu].dead,
	      "fini did not revive");
	CHECK(g.nodes[cv].outputs[0] == t1 && g.nodes[cv].ninputs == 3,
	      "fini did not restore the conv");
	CHECK(g.norder == 3, "order not rebuilt (%d)", g.norder);
	mi_graph_fini(&g);
}

/* depthwise stride 2 -> x*sigmoid(x) */
static void test_dw_silu(void)
{
	struct mi_graph g;
	struct mi_cpu_opts o = { .nthreads = 1, .isa = test_isa };
	int64_t dx[4] = { 1, 12, 9, 9 }, dw[4] = { 12, 1, 3, 3 },
		dy[4] = { 1, 12, 5, 5 };
	int64_t pads[4] = { 1, 1, 1, 1 }, st[2] = { 2, 2 };
	struct mi_conv_shape s = { .n = 1, .c = 12, .h = 9, .w = 9, .m = 12,
				   .kh = 3, .kw = 3, .group = 12, .sh = 2,
				   .sw = 2, .dh = 1, .dw = 1, .pt = 1,
				   .pl = 1, .pb = 1, .pr = 1, .oh = 5,
				   .ow = 5 };
	float ref[300];
	int x, w, t, u, y, cv, sg, mul;

	mi_graph_init(&g);
	x = tensor(&g, "x", 4, dx, MI_TF_INPUT, true);
	w = tensor(&g, "w", 4, dw, MI_TF_CONST, true);
	t = tensor(&g, "t", 4, dy, 0, false);
	u = tensor(&g, "u", 4, dy, 0, false);
	y = tensor(&g, "y", 4, dy, 0, false);
	cv = node(&g, "Conv", 2, (int[]){ x, w }, t);
	mi_node_set_ints(&g.nodes[cv], "pads", pads, 4);
	mi_node_set_ints(&g.nodes[cv], "strides", st, 2);
	mi_node_set_int(&g.nodes[cv], "group", 12);
	sg = node(&g, "Sigmoid", 1, (int[]){ t }, u);
	mul = node(&g, "Mul", 2, (int[]){ u, t }, y);
	set_outputs(&g, 1, &y);
	CHECK(!mi_graph_toposort(&g), "%s", g.err);
	CHECK(!mi_cpu_plan(&g, &o), "%s", g.err);
	CHECK(g.nodes[sg].dead && g.nodes[mul].dead, "silu not fused");
	CHECK(!mi_graph_toposort(&g), "%s", g.err);
	CHECK(!run_planned(&g), "run failed: %s", g.err);
	mi_conv_ref(&s, g.tensors[x].data, g.tensors[w].data, NULL, NULL,
		    MI_ACT_SILU, 0, 0, ref);
	CHECK(nerr(g.tensors[y].data, ref, 300) < 1e-5, "err %g",
	      nerr(g.tensors[y].data, ref, 300));
	mi_cpu_plan_fini(&g);
	CHECK(!g.nodes[sg].dead && !g.nodes[mul].dead &&
		      g.nodes[cv].outputs[0] == t,
	      "not restored");
	mi_graph_fini(&g);
}

/* MatMul(x[2,3,20], W[20,7]) -> Add(bias[7]) -> Clip(-0.5, 0.5) */
static void test_matmul_bias_clip(void)
{
	struct mi_graph g;
	struct mi_cpu_opts o = { .isa = test_isa };
	int64_t dx[3] = { 2, 3, 20 }, dw[2] = { 20, 7 }, db[1] = { 7 },
		dy[3] = { 2, 3, 7 }, d1[1] = { 1 };
	float ref[42];
	int x, w, b, lo, hi, t1, t2, y, mm, add, clip;
	const float *xv, *wv, *bv;

	mi_graph_init(&g);
	x = tensor(&g, "x", 3, dx, MI_TF_INPUT, true);
	w = tensor(&g, "w", 2, dw, MI_TF_CONST, true);
	b = tensor(&g, "b", 1, db, MI_TF_CONST, true);
	lo = tensor(&g, "lo", 0, d1, MI_TF_CONST, true);
	hi = tensor(&g, "hi", 0, d1, MI_TF_CONST, true);
	*(float *)g.tensors[lo].data = -0.5f;
	*(float *)g.tensors[hi].data = 0.5f;
	t1 = tensor(&g, "t1", 3, dy, 0, false);
	t2 = tensor(&g, "t2", 3, dy, 0, false);
	y = tensor(&g, "y", 3, dy, 0, false);
	mm = node(&g, "MatMul", 2, (int[]){ x, w }, t1);
	add = node(&g, "Add", 2, (int[]){ t1, b }, t2);
	clip = node(&g, "Clip", 3, (int[]){ t2, lo, hi }, y);
	set_outputs(&g, 1, &y);
	CHECK(!mi_graph_toposort(&g), "%s", g.err);
	CHECK(!mi_cpu_plan(&g, &o), "%s", g.err);
	CHECK(g.nodes[mm].priv && g.nodes[add].dead && g.nodes[clip].dead,
	      "not fused");
	CHECK(!mi_graph_toposort(&g), "%s", g.err);
	CHECK(!run_planned(&g), "run failed: %s", g.err);
	xv = g.tensors[x].data, wv = g.tensors[w].data, bv = g.tensors[b].data;
	for (int i = 0; i < 6; i++)
		for (int j = 0; j < 7; j++) {
			double s = bv[j];

			for (int k = 0; k < 20; k++)
				s += (double)xv[i * 20 + k] * wv[k * 7 + j];
			ref[i * 7 + j] = s < -0.5 ? -0.5f : s > 0.5 ? 0.5f : (float)s;
		}
	CHECK(nerr(g.tensors[y].data, ref, 42) < 1e-5, "err %g",
	      nerr(g.tensors[y].data, ref, 42));
	mi_cpu_plan_fini(&g);
	mi_graph_fini(&g);
}

/* MatMul of two computed tensors, batched, and with a shared 2-D B */
static void test_batched_matmul(int shared_b)
{
	struct mi_graph g;
	struct mi_cpu_opts o = { .nthreads = 2, .isa = test_isa };
	int64_t da[4] = { 2, 3, 7, 9 }, db4[4] = { 2, 3, 9, 5 },
		db2[2] = { 9, 5 }, dy[4] = { 2, 3, 7, 5 };
	float ref[210];
	int a, b, y, mm;
	const float *av, *bv;

	mi_graph_init(&g);
	a = tensor(&g, "a", 4, da, MI_TF_INPUT, true);
	b = shared_b ? tensor(&g, "b", 2, db2, MI_TF_INPUT, true) :
		       tensor(&g, "b", 4, db4, MI_TF_INPUT, true);
	y = tensor(&g, "y", 4, dy, 0, false);
	mm = node(&g, "MatMul", 2, (int[]){ a, b }, y);
	set_outputs(&g, 1, &y);
	CHECK(!mi_graph_toposort(&g), "%s", g.err);
	CHECK(!mi_cpu_plan(&g, &o), "%s", g.err);
	CHECK(g.nodes[mm].priv, "batched MatMul not planned");
	CHECK(!run_planned(&g), "run failed: %s", g.err);
	av = g.tensors[a].data, bv = g.tensors[b].data;
	for (int bt = 0; bt < 6; bt++)
		for (int i = 0; i < 7; i++)
			for (int j = 0; j < 5; j++) {
				double s = 0;

				for (int k = 0; k < 9; k++)
					s += (double)av[(bt * 7 + i) * 9 + k] *
					     bv[(shared_b ? 0 : bt * 45) + k * 5 + j];
				ref[(bt * 7 + i) * 5 + j] = (float)s;
			}
	CHECK(nerr(g.tensors[y].data, ref, 210) < 1e-5, "err %g",
	      nerr(g.tensors[y].data, ref, 210));
	mi_cpu_plan_fini(&g);
	mi_graph_fini(&g);
}

/* Mul(s [N,C,1,1], x [N,C,H,W]): channel scaling (squeeze-excitation);
 * from 64K elements split over nt threads (planes claimed) */
static void test_channel_scale(int nt, int n, int c, int h, int w)
{
	struct mi_graph g;
	struct mi_cpu_opts o = { .nthreads = nt, .isa = test_isa };
	int64_t dx[4] = { n, c, h, w }, ds[4] = { n, c, 1, 1 };
	int64_t tot = (int64_t)n * c * h * w;
	float *ref = malloc(tot * sizeof(float));
	int x, sc, y, mul;
	const float *xv, *sv;

	mi_graph_init(&g);
	x = tensor(&g, "x", 4, dx, MI_TF_INPUT, true);
	sc = tensor(&g, "s", 4, ds, MI_TF_INPUT, true);
	y = tensor(&g, "y", 4, dx, 0, false);
	mul = node(&g, "Mul", 2, (int[]){ sc, x }, y);
	set_outputs(&g, 1, &y);
	CHECK(!mi_graph_toposort(&g), "%s", g.err);
	CHECK(!mi_cpu_plan(&g, &o), "%s", g.err);
	CHECK(g.nodes[mul].priv, "channel scale not planned");
	CHECK(!run_planned(&g), "run failed: %s", g.err);
	xv = g.tensors[x].data, sv = g.tensors[sc].data;
	for (int64_t i = 0; i < tot; i++)
		ref[i] = xv[i] * sv[i / (h * w)];
	CHECK(nerr(g.tensors[y].data, ref, tot) == 0, "scale %dx%dx%dx%d t%d: err %g",
	      n, c, h, w, nt, nerr(g.tensors[y].data, ref, tot));
	free(ref);
	mi_cpu_plan_fini(&g);
	mi_graph_fini(&g);
}

/* An intermediate that is also a graph output, or read twice, is not
 * fused away. */
static void test_no_fuse(void)
{
	struct mi_graph g;
	struct mi_cpu_opts o = { .isa = test_isa };
	int64_t dx[4] = { 1, 4, 5, 5 }, dw[4] = { 4, 4, 1, 1 };
	int x, w, t, y1, y2, cv, r1, r2;

	mi_graph_init(&g);
	x = tensor(&g, "x", 4, dx, MI_TF_INPUT, true);
	w = tensor(&g, "w", 4, dw, MI_TF_CONST, true);
	t = tensor(&g, "t", 4, dx, 0, false);
	y1 = tensor(&g, "y1", 4, dx, 0, false);
	y2 = tensor(&g, "y2", 4, dx, 0, false);
	cv = node(&g, "Conv", 2, (int[]){ x, w }, t);
	r1 = node(&g, "Relu", 1, (int[]){ t }, y1);
	r2 = node(&g, "Sigmoid", 1, (int[]){ t }, y2);
	set_outputs(&g, 2, (int[]){ y1, y2 });
	CHECK(!mi_graph_toposort(&g), "%s", g.err);
	CHECK(!mi_cpu_plan(&g, &o), "%s", g.err);
	CHECK(g.nodes[cv].priv && !g.nodes[r1].dead && !g.nodes[r2].dead &&
		      g.nodes[cv].outputs[0] == t,
	      "fused a shared intermediate");
	CHECK(live_nodes(&g) == 3, "live %d", live_nodes(&g));
	mi_cpu_plan_fini(&g);
	mi_graph_fini(&g);

	/* reference option: nothing planned */
	mi_graph_init(&g);
	x = tensor(&g, "x", 4, dx, MI_TF_INPUT, true);
	w = tensor(&g, "w", 4, dw, MI_TF_CONST, true);
	t = tensor(&g, "t", 4, dx, 0, false);
	cv = node(&g, "Conv", 2, (int[]){ x, w }, t);
	set_outputs(&g, 1, &t);
	o.reference = 1;
	CHECK(!mi_graph_toposort(&g), "%s", g.err);
	CHECK(!mi_cpu_plan(&g, &o) && !g.nodes[cv].priv, "planned anyway");
	mi_cpu_plan_fini(&g);
	mi_graph_fini(&g);
}

/* ---- element-wise fast paths vs the reference ops (lib/ops) ---------- */
static void set_attr_float(struct mi_graph *g, int nd, const char *name,
			   float v)
{
	struct mi_node *n = &g->nodes[nd];

	n->attrs = realloc(n->attrs, (n->nattrs + 1) * sizeof(*n->attrs));
	memset(&n->attrs[n->nattrs], 0, sizeof(*n->attrs));
	n->attrs[n->nattrs].name = strdup(name);
	n->attrs[n->nattrs].type = MI_ATTR_FLOAT;
	n->attrs[n->nattrs].f = v;
	n->nattrs++;
}

static void set_attr_int(struct mi_graph *g, int nd, const char *name,
			 int64_t v)
{
	struct mi_node *n = &g->nodes[nd];

	n->attrs = realloc(n->attrs, (n->nattrs + 1) * sizeof(*n->attrs));
	memset(&n->attrs[n->nattrs], 0, sizeof(*n->attrs));
	n->attrs[n->nattrs].name = strdup(name);
	n->attrs[n->nattrs].type = MI_ATTR_INT;
	n->attrs[n->nattrs].i = v;
	n->nattrs++;
}

/* Random values in [lo, lo + scale * 2]. */
static void refill(struct mi_tensor *t, float scale, float lo)
{
	for (int64_t i = 0; i < mi_tensor_numel(t); i++)
		((float *)t->data)[i] = lo + scale * (rfl() + 1.0f);
}

/*
 * One node op(a[, b]) -> y: plan, expect planned == want; when planned,
 * run the fast kernel (output pre-filled with NaN: every element must be
 * written) and the reference op and compare.  b_const: b is a constant
 * holding the given value(s).
 */
/* threads of elt_case's plans: the large cases run on 1, 2 and 3 */
static int elt_threads = 2;

static void elt_case(const char *op, int nda, const int64_t *da, int ndb,
		     const int64_t *db, int ndy, const int64_t *dy,
		     float scale, float lo, bool want, int64_t axis,
		     const float *bconst)
{
	struct mi_graph g;
	struct mi_cpu_opts o = { .nthreads = elt_threads, .isa = test_isa };
	int a, b = -1, y, nd, nin = ndb >= 0 ? 2 : 1;
	const struct mi_op_def *def = mi_op_find(op, "");
	struct mi_tensor *yt;
	float *fast;
	int64_t ny;
	double e;

	mi_graph_init(&g);
	a = tensor(&g, "a", nda, da, MI_TF_INPUT, true);
	refill(&g.tensors[a], scale, lo);
	if (nin == 2) {
		b = tensor(&g, "b", ndb, db, bconst ? MI_TF_CONST : MI_TF_INPUT,
			   true);
		if (bconst)
			((float *)g.tensors[b].data)[0] = bconst[0];
		else
			refill(&g.tensors[b], scale, lo);
	}
	y = tensor(&g, "y", ndy, dy, 0, false);
	nd = node(&g, op, nin, (int[]){ a, b }, y);
	if (!strcmp(op, "LeakyRelu"))
		set_attr_float(&g, nd, "alpha", 0.3f);
	if (!strcmp(op, "HardSigmoid")) {
		set_attr_float(&g, nd, "alpha", 0.25f);
		set_attr_float(&g, nd, "beta", 0.4f);
	}
	if (axis != 99)
		set_attr_int(&g, nd, "axis", axis);
	g.opset = 17;
	g.nodes[nd].def = def;
	set_outputs(&g, 1, &y);
	CHECK(def, "no reference op %s", op);
	CHECK(!mi_graph_toposort(&g), "%s", g.err);
	CHECK(!mi_cpu_plan(&g, &o), "%s", g.err);
	CHECK(!!g.nodes[nd].priv == want, "%s: planned %d, want %d", op,
	      !!g.nodes[nd].priv, want);
	if (!def || !g.nodes[nd].priv) {
		mi_cpu_plan_fini(&g);
		mi_graph_fini(&g);
		return;
	}
	yt = &g.tensors[y];
	mi_tensor_alloc(yt);
	ny = mi_tensor_numel(yt);
	for (int64_t i = 0; i < ny; i++)
		((float *)yt->data)[i] = NAN;
	CHECK(!mi_cpu_node_run(&g, &g.nodes[nd]), "%s run: %s", op, g.err);
	fast = malloc(ny * sizeof(float));
	memcpy(fast, yt->data, ny * sizeof(float));
	CHECK(!def->run(&g, &g.nodes[nd]), "%s reference: %s", op, g.err);
	e = nerr(fast, yt->data, ny);
	CHECK(e <= 1e-6, "%s (%lld elements): err %g", op, (long long)ny, e);
	free(fast);
	mi_cpu_plan_fini(&g);
	mi_graph_fini(&g);
}

/* Erf's table + series: per-element relative error vs double erf() over
 * a dense sweep of [-6, 6], tiny values, +-inf and NaN. */
static void test_erf_sweep(void)
{
	struct mi_graph g;
	struct mi_cpu_opts o = { .nthreads = 1, .isa = test_isa };
	int64_t n = 200003, d[1] = { n };
	int x, y, nd;
	float *xv, *yv;
	double worst = 0;

	mi_graph_init(&g);
	x = tensor(&g, "x", 1, d, MI_TF_INPUT, true);
	y = tensor(&g, "y", 1, d, 0, false);
	nd = node(&g, "Erf", 1, (int[]){ x }, y);
	set_outputs(&g, 1, &y);
	xv = g.tensors[x].data;
	for (int64_t i = 0; i < n - 8; i++)
		xv[i] = -6.0f + 12.0f * i / (n - 9);
	xv[n - 8] = 1e-30f, xv[n - 7] = -3e-9f, xv[n - 6] = 1e-3f;
	xv[n - 5] = INFINITY, xv[n - 4] = -INFINITY, xv[n - 3] = 0.0f;
	xv[n - 2] = 3.99999f, xv[n - 1] = NAN;
	CHECK(!mi_graph_toposort(&g), "%s", g.err);
	CHECK(!mi_cpu_plan(&g, &o), "%s", g.err);
	CHECK(g.nodes[nd].priv, "Erf not planned");
	if (g.nodes[nd].priv) {
		mi_tensor_alloc(&g.tensors[y]);
		CHECK(!mi_cpu_node_run(&g, &g.nodes[nd]), "%s", g.err);
		yv = g.tensors[y].data;
		for (int64_t i = 0; i < n - 1; i++) {
			double r = erf((double)xv[i]);
			double e = fabs(yv[i] - r) / fmax(fabs(r), 1e-37);

			worst = e > worst || isnan(e) ? e : worst;
		}
		CHECK(worst <= 1e-6, "erf relative error %g", worst);
		CHECK(isnan(yv[n - 1]), "erf(NaN) = %g", yv[n - 1]);
	}
	mi_cpu_plan_fini(&g);
	mi_graph_fini(&g);
}

static void test_eltwise(void)
{
	static const char *const unary[] = {
		"Relu", "LeakyRelu", "Sigmoid", "Tanh", "Erf", "Exp", "Sqrt",
		"HardSigmoid", "HardSwish",
	};
	static const char *const binary[] = { "Add", "Sub", "Mul", "Div" };
	static const float pw[] = { 1, 2, 3, 0.5f, 2.5f };

	for (int rt = 0; rt < 6; rt++) {
		/* r == 3: large enough to use the thread pool (ranges claimed
		 * dynamically), on 1, 2 and 3 threads */
		int r = rt < 3 ? rt : 3;

		elt_threads = rt < 3 ? 2 : rt - 2;
		int64_t d[4] = { 1 + r, 2 + r % 3 * 5, 3 + r * 7,
				 r == 3 ? 1700 : 5 + r * 3 };
		int64_t c[3] = { d[1], 1, 1 }, last[1] = { d[3] };
		int64_t sc[1] = { 1 }, mid[4] = { 1, d[1], d[2], 1 };
		int64_t bad[3] = { d[1], 1, d[3] };

		for (size_t i = 0; i < sizeof(unary) / sizeof(*unary); i++)
			elt_case(unary[i], 4, d, -1, NULL, 4, d, 4,
				 !strcmp(unary[i], "Sqrt") ? 0 : -4, true, 99,
				 NULL);
		for (size_t i = 0; i < sizeof(pw) / sizeof(*pw); i++)
			elt_case("Pow", 4, d, 0, NULL, 4, d, 2, pw[i] == 0.5f ?
				 0 : -2, pw[i] != 2.5f, 99, &pw[i]);
		for (size_t i = 0; i < sizeof(binary) / sizeof(*binary); i++) {
			const char *op = binary[i];

			elt_case(op, 4, d, 4, d, 4, d, 2, 0.5f, true, 99, NULL);
			elt_case(op, 4, d, 0, NULL, 4, d, 2, 0.5f, true, 99,
				 NULL);
			elt_case(op, 1, sc, 4, d, 4, d, 2, 0.5f, true, 99,
				 NULL);
			elt_case(op, 4, d, 1, last, 4, d, 2, 0.5f, true, 99,
				 NULL);
			elt_case(op, 1, last, 4, d, 4, d, 2, 0.5f, true, 99,
				 NULL);
			elt_case(op, 4, d, 3, c, 4, d, 2, 0.5f, true, 99, NULL);
			elt_case(op, 3, c, 4, d, 4, d, 2, 0.5f, true, 99, NULL);
			elt_case(op, 4, mid, 4, d, 4, d, 2, 0.5f, true, 99,
				 NULL);
			/* [C,1,W] against [N,C,H,W]: not one block (general
			 * broadcast path) */
			elt_case(op, 4, d, 3, bad, 4, d, 2, 0.5f, true, 99,
				 NULL);
		}
		elt_case("Softmax", 4, d, -1, NULL, 4, d, 8, -8, true, 99,
			 NULL);
		elt_case("Softmax", 4, d, -1, NULL, 4, d, 8, -8, true, 3,
			 NULL);
		elt_case("Softmax", 4, d, -1, NULL, 4, d, 8, -8, false, 1,
			 NULL);
	}
}

/*
 * Pool runs whose workers finish well after the caller: past the
 * caller's spin (yield-poll), and past its yield-poll too (futex sleep).
 * Index 0 waits for the other indices to start, so that workers (not the
 * caller) run them when the machine lets them; mi_pool_run() must return
 * only once every index has finished, each run exactly once.
 */
struct late_ctx {
	atomic_int started, ran[4], finished[4];
	long work_us;
	pthread_t caller;
	atomic_int by_worker;
};

static long late_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000L + ts.tv_nsec / 1000;
}

static void late_fn(void *ctx, int t, int nt)
{
	struct late_ctx *c = ctx;
	long t0 = late_now_us();

	atomic_fetch_add(&c->ran[t], 1);
	if (t) {
		if (!pthread_equal(pthread_self(), c->caller))
			atomic_fetch_add(&c->by_worker, 1);
		atomic_fetch_add(&c->started, 1);
		while (late_now_us() - t0 < c->work_us)
			;
		atomic_store(&c->finished[t], 1);
		return;
	}
	while (atomic_load(&c->started) < nt - 1 && late_now_us() - t0 < 50000)
		;
	atomic_store(&c->finished[0], 1);
}

static void test_pool_late_workers(void)
{
	static const long work_us[] = { 5, 60, 300, 2500 };
	int joined = 0, runs = 0;

	for (int nt = 1; nt <= 3; nt++)
		for (size_t w = 0; w < sizeof(work_us) / sizeof(*work_us); w++)
			for (int r = 0; r < 20; r++) {
				/* static: a worker still running after the
				 * return must not write into a dead frame */
				static struct late_ctx c;
				int bad = 0;

				memset(&c, 0, sizeof(c));
				c.work_us = work_us[w];
				c.caller = pthread_self();

				mi_pool_run(nt, late_fn, &c);
				runs += nt > 1;
				joined += atomic_load(&c.by_worker) > 0;
				for (int t = 0; t < nt; t++)
					bad += atomic_load(&c.ran[t]) != 1 ||
					       !atomic_load(&c.finished[t]);
				CHECK(!bad, "nt %d worker work %ld us round %d", nt,
				      work_us[w], r);
				if (bad)
					return;
			}
	/* on a loaded machine workers may join none: nothing was tested */
	printf("test-cpu-plan: pool: workers joined %d of %d runs\n", joined,
	       runs);
}

/* Serial mode (a node the plan gives one thread): every index runs in
 * the caller, exactly once; the previous mode comes back. */
struct serial_ctx {
	pthread_t caller;
	atomic_int ran[4], elsewhere;
};

/* index 0 gives workers up to 20 ms to take the others, so that a pool
 * ignoring serial mode is seen running them elsewhere */
static void serial_fn(void *ctx, int t, int nt)
{
	struct serial_ctx *c = ctx;

	atomic_fetch_add(&c->ran[t], 1);
	if (!pthread_equal(pthread_self(), c->caller))
		atomic_fetch_add(&c->elsewhere, 1);
	if (!t) {
		long t0 = late_now_us();

		while (late_now_us() - t0 < 20000 &&
		       atomic_load(&c->ran[nt - 1]) < atomic_load(&c->ran[0]))
			;
	}
}

static void test_pool_serial(void)
{
	struct serial_ctx c = { .caller = pthread_self() };
	bool was = mi_pool_serial(true);

	CHECK(!was, "serial mode on before the test");
	CHECK(mi_pool_serial(true), "serial mode not kept");
	for (int r = 0; r < 10; r++)
		mi_pool_run(4, serial_fn, &c);
	mi_pool_serial(false);
	for (int t = 0; t < 4; t++)
		CHECK(atomic_load(&c.ran[t]) == 10, "index %d ran %d times of 10",
		      t, atomic_load(&c.ran[t]));
	CHECK(!atomic_load(&c.elsewhere), "%d serial chunks ran off the caller",
	      atomic_load(&c.elsewhere));
	CHECK(!mi_pool_serial(false), "serial mode not restored");
}

int main(int argc, char **argv)
{
	test_isa_arg(argc, argv);
	printf("test-cpu-plan: isa=%s\n", mi_cpu_isa_name(test_isa));
	test_conv_add_relu(0);
	test_conv_add_relu(1);
	test_dw_silu();
	test_matmul_bias_clip();
	test_batched_matmul(0);
	test_batched_matmul(1);
	test_channel_scale(2, 2, 3, 4, 5);
	test_channel_scale(2, 1, 40, 56, 56);
	test_channel_scale(3, 2, 21, 37, 45);
	test_no_fuse();
	test_eltwise();
	test_erf_sweep();
	test_pool_late_workers();
	test_pool_serial();
	printf("test-cpu-plan: %d checks, %d failed\n", checks, failures);
	return failures ? 1 : 0;
}
