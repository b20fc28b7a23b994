// SPDX-License-Identifier: MIT
/*
 * Grouped convolutions on the blocked pass (conv.nchwc.group): small
 * graphs planned, run and compared with lib/ops' reference Conv.
 *
 *   x -> Conv3x3 (c0 -> c) + Relu -(t)-> grouped Conv (c -> m, groups,
 *   k x k, stride, pads, dilation, bias) + [Add(t)] + Relu -(u)->
 *   Conv1x1 (m -> m) -> MaxPool 2x2 s1 -> y
 *
 * (t and u blocked: the grouped conv reads and writes NCHWc), or (lone)
 * x -> grouped Conv + Relu -> y (reads and writes NCHW).  Groups 2, 4, 8
 * and 32, 1x1 and 3x3, strides 1 and 2, batch 1 and 2, 1-3 threads.
 * Pairs of groups of half a block run merged (zero weights across the
 * pair); a quarter block per group, or an odd count of half blocks, must
 * stay off the blocked pass (im2col) and still match.  Outputs are pre-filled with NaN.  Run
 * once per ISA (--isa).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "ops/ops.h"
#include "cpu/cpu.h"
#include "cpu/cpu_plan.h"
#include "cpu/nchwc.h"

#include "cpu-test.h"

static unsigned int seed = 2222;

static unsigned int rnd(unsigned int n)
{
	seed = seed * 1103515245u + 12345u;
	return (seed >> 8) % n;
}

static float rfl(void)
{
	return (float)rnd(20001) / 10000.0f - 1.0f;
}

static int tensor(struct mi_graph *g, const char *name, int64_t d0, int64_t d1,
		  int64_t d2, int64_t d3, unsigned int flags, bool fill)
{
	int t = mi_graph_add_tensor(g, name);
	struct mi_tensor *x = &g->tensors[t];
	int64_t dims[4] = { d0, d1, d2, d3 };

	mi_tensor_set_shape(x, MI_DT_FLOAT, 4, dims);
	if (fill) {
		mi_tensor_alloc(x);
		for (int64_t i = 0; i < mi_tensor_numel(x); i++)
			((float *)x->data)[i] = rfl() * 0.5f;
	}
	x->flags |= flags;
	return t;
}

static int node(struct mi_graph *g, const char *op, int nin, const int *in,
		int out)
{
	int nd = mi_graph_add_node(g, op, op, in, nin, &out, 1);

	g->nodes[nd].def = mi_op_find(op, "");
	return nd;
}

static void set_int(struct mi_node *n, const char *name, int64_t v)
{
	n->attrs = realloc(n->attrs, (n->nattrs + 1) * sizeof(*n->attrs));
	memset(&n->attrs[n->nattrs], 0, sizeof(*n->attrs));
	n->attrs[n->nattrs].name = strdup(name);
	n->attrs[n->nattrs].type = MI_ATTR_INT;
	n->attrs[n->nattrs].i = v;
	n->nattrs++;
}

/* Conv x -> y: k x k, stride s, pad p, dilation d, random weights and
 * bias (weights scaled so outputs stay O(1) whatever c / group). */
static int conv(struct mi_graph *g, int x, int c, int m, int k, int s, int p,
		int d, int group, int y)
{
	int w = tensor(g, "w", m, c / group, k, k,
		       MI_TF_CONST | MI_TF_INITIALIZER, true);
	int b = tensor(g, "b", 1, 1, 1, m, MI_TF_CONST | MI_TF_INITIALIZER,
		       true);
	int64_t pads[4] = { p, p, p, p }, st[2] = { s, s }, dl[2] = { d, d };
	struct mi_tensor *wt = &g->tensors[w];
	float sc = 2.0f / sqrtf((float)(c / group * k * k));
	int nd;

	for (int64_t i = 0; i < mi_tensor_numel(wt); i++)
		((float *)wt->data)[i] *= sc;
	mi_tensor_set_shape(&g->tensors[b], MI_DT_FLOAT, 1, (int64_t[]){ m });
	nd = node(g, "Conv", 3, (int[]){ x, w, b }, y);
	mi_node_set_ints(&g->nodes[nd], "pads", pads, 4);
	mi_node_set_ints(&g->nodes[nd], "strides", st, 2);
	mi_node_set_ints(&g->nodes[nd], "dilations", dl, 2);
	if (group > 1)
		set_int(&g->nodes[nd], "group", group);
	return nd;
}

static void set_output(struct mi_graph *g, int y)
{
	g->outputs = malloc(sizeof(int));
	g->noutputs = 1;
	g->outputs[0] = y;
	g->tensors[y].flags |= MI_TF_OUTPUT;
}

/* Run the live nodes in order (fast kernels where planned), outputs
 * NaN-filled first; copy the graph output into *out. */
static int run_graph(struct mi_graph *g, float **out)
{
	struct mi_tensor *t;

	for (int p = 0; p < g->norder; p++) {
		struct mi_node *n = &g->nodes[g->order[p]];
		struct mi_tensor *y = mi_out(g, n, 0);
		int err;

		if (!y->data) {
			if (mi_tensor_alloc(y))
				return -1;
			for (size_t i = 0; i < y->nbytes / 4; i++)
				((float *)y->data)[i] = NAN;
		}
		err = n->priv ? mi_cpu_node_run(g, n) : n->def->run(g, n);
		if (err)
			return err;
	}
	t = &g->tensors[g->outputs[0]];
	*out = malloc(t->nbytes);
	memcpy(*out, t->data, t->nbytes);
	return 0;
}

static void free_activations(struct mi_graph *g)
{
	for (int i = 0; i < g->ntensors; i++) {
		struct mi_tensor *t = &g->tensors[i];

		if (!(t->flags & (MI_TF_CONST | MI_TF_INPUT)))
			mi_tensor_free_data(t);
	}
}

static const char *variant_of(const struct mi_graph *g, int nd)
{
	const struct mi_cpu_kernel_hdr *h = g->nodes[nd].priv;

	return h && h->variant ? h->variant : "-";
}

struct gcase {
	int nb, c, m, group, k, s, d, hw, nt;
	bool res, lone;
};

/* One case; fits: the grouped kernel runs (groups or pairs of groups
 * are whole blocks). */
static void run_case(const struct gcase *q, bool fits)
{
	struct mi_graph g;
	struct mi_cpu_opts o = { .nthreads = q->nt, .isa = test_isa };
	int p = q->k / 2 * q->d;
	int oh = (q->hw + 2 * p - q->d * (q->k - 1) - 1) / q->s + 1;
	int x, t0, t, u0, u1, u, v, y, ng, nr = -1;
	int64_t ks[2] = { 2, 2 };
	float *fast = NULL, *ref = NULL;
	char what[160];

	snprintf(what, sizeof(what),
		 "n%d c%d m%d g%d k%d s%d d%d hw%d t%d%s%s", q->nb, q->c, q->m,
		 q->group, q->k, q->s, q->d, q->hw, q->nt, q->res ? " res" : "",
		 q->lone ? " lone" : "");
	mi_graph_init(&g);
	g.opset = 17;
	if (q->lone) {
		x = tensor(&g, "x", q->nb, q->c, q->hw, q->hw, MI_TF_INPUT, true);
		u0 = tensor(&g, "u0", q->nb, q->m, oh, oh, 0, false);
		y = tensor(&g, "y", q->nb, q->m, oh, oh, 0, false);
		ng = conv(&g, x, q->c, q->m, q->k, q->s, p, q->d, q->group, u0);
		node(&g, "Relu", 1, (int[]){ u0 }, y);
		t = u = -1;
	} else {
		x = tensor(&g, "x", q->nb, 5, q->hw, q->hw, MI_TF_INPUT, true);
		t0 = tensor(&g, "t0", q->nb, q->c, q->hw, q->hw, 0, false);
		t = tensor(&g, "t", q->nb, q->c, q->hw, q->hw, 0, false);
		u0 = tensor(&g, "u0", q->nb, q->m, oh, oh, 0, false);
		u1 = tensor(&g, "u1", q->nb, q->m, oh, oh, 0, false);
		u = tensor(&g, "u", q->nb, q->m, oh, oh, 0, false);
		v = tensor(&g, "v", q->nb, q->m, oh, oh, 0, false);
		y = tensor(&g, "y", q->nb, q->m, oh - 1, oh - 1, 0, false);
		conv(&g, x, 5, q->c, 3, 1, 1, 1, 1, t0);
		node(&g, "Relu", 1, (int[]){ t0 }, t);
		ng = conv(&g, t, q->c, q->m, q->k, q->s, p, q->d, q->group, u0);
		if (q->res)
			nr = node(&g, "Add", 2, (int[]){ u0, t }, u1);
		node(&g, "Relu", 1, (int[]){ q->res ? u1 : u0 }, u);
		conv(&g, u, q->m, q->m, 1, 1, 0, 1, 1, v);
		mi_node_set_ints(&g.nodes[node(&g, "MaxPool", 1, (int[]){ v }, y)],
				 "kernel_shape", ks, 2);
	}
	set_output(&g, y);
	CHECK(!mi_graph_toposort(&g), "%s", g.err);
	CHECK(!mi_cpu_plan(&g, &o), "%s: %s", what, g.err);
	CHECK(!mi_graph_toposort(&g), "%s", g.err);
	if (fits) {
		CHECK(!strcmp(variant_of(&g, ng), MI_NC_VARIANT_GROUP),
		      "%s: grouped conv runs %s", what, variant_of(&g, ng));
		if (!q->lone)
			CHECK(g.tensors[t].phys_bytes && g.tensors[u].phys_bytes,
			      "%s: grouped conv's input / output not blocked (%d %d)",
			      what, !!g.tensors[t].phys_bytes,
			      !!g.tensors[u].phys_bytes);
		if (nr >= 0)
			CHECK(g.nodes[nr].dead, "%s: residual Add not fused", what);
	} else {
		CHECK(strncmp(variant_of(&g, ng), "conv.nchwc", 10),
		      "%s: partial-block groups on %s", what, variant_of(&g, ng));
	}
	CHECK(!run_graph(&g, &fast), "%s: planned run: %s", what, g.err);
	mi_cpu_plan_fini(&g);
	free_activations(&g);
	CHECK(!mi_graph_toposort(&g), "%s", g.err);
	CHECK(!run_graph(&g, &ref), "%s: reference run: %s", what, g.err);
	if (fast && ref) {
		double er = nerr(fast, ref, mi_tensor_numel(&g.tensors[y]));

		CHECK(er < 2e-5, "%s: err %g", what, er);
	}
	free(fast);
	free(ref);
	free_activations(&g);
	mi_graph_fini(&g);
}

/* Random cases: groups from {2, 4, 8, 32}; mode 0: 1-2 blocks per
 * group; 1: pairs of groups are whole blocks (merged: half a block per
 * group in one or both of input and output); 2: a quarter block per
 * group (im2col). */
static void random_case(int it, int mode)
{
	static const int groups[] = { 2, 4, 8, 32 };
	const int B = mi_nc_kern_get(test_isa)->b;
	struct gcase q = { 0 };
	int cg, mg;

	q.group = groups[it % 4];
	cg = B * (1 + (int)rnd(q.group >= 32 ? 1 : 2));
	mg = q.group >= 32 ? cg : B * (1 + (int)rnd(2));
	if (mode == 1) {
		cg = it % 3 == 1 ? B : B / 2;
		mg = it % 3 == 2 ? B : B / 2;
	} else if (mode == 2) {
		/* ResNeXt's 4 channels per group with AVX-512 */
		cg = B / 4;
		mg = 2 * cg;
	}
	q.c = cg * q.group;
	q.m = mg * q.group;
	q.k = rnd(3) ? 3 : 1;
	q.s = 1 + (int)rnd(2);
	q.d = q.k == 3 && rnd(4) == 0 ? 2 : 1;
	q.hw = (q.group >= 32 ? 5 : 6) + (int)rnd(q.group >= 32 ? 5 : 11);
	q.nb = 1 + (int)rnd(2);
	q.nt = 1 + (int)rnd(3);
	q.res = q.c == q.m && q.s == 1 && rnd(2);
	q.lone = it % 5 == 4;
	run_case(&q, mode < 2);
}

int main(int argc, char **argv)
{
	int B;

	test_isa_arg(argc, argv);
	B = mi_nc_kern_get(test_isa)->b;
	printf("test-nchwc-group: isa=%s block=%d\n", mi_cpu_isa_name(test_isa),
	       B);
	/* fixed: RegNet-style 2 blocks per group, 3x3 s2 pads, batch 2 */
	run_case(&(struct gcase){ .nb = 2, .c = 4 * B, .m = 4 * B, .group = 2,
				  .k = 3, .s = 2, .d = 1, .hw = 14, .nt = 2 },
		 true);
	/* ResNeXt-style 32 groups of one block, residual, 3 threads */
	run_case(&(struct gcase){ .nb = 1, .c = 32 * B, .m = 32 * B,
				  .group = 32, .k = 3, .s = 1, .d = 1, .hw = 7,
				  .nt = 3, .res = true },
		 true);
	/* 1x1 grouped (ShuffleNet v1 / RegNet style), dilated 3x3, lone */
	run_case(&(struct gcase){ .nb = 2, .c = 8 * B, .m = 4 * B, .group = 4,
				  .k = 1, .s = 1, .d = 1, .hw = 9, .nt = 2 },
		 true);
	run_case(&(struct gcase){ .nb = 1, .c = 8 * B, .m = 8 * B, .group = 8,
				  .k = 3, .s = 1, .d = 2, .hw = 11, .nt = 2,
				  .lone = true },
		 true);
	for (int it = 0; it < 60; it++)
		random_case(it, 0);
	for (int it = 0; it < 30; it++)
		random_case(it, 1);
	for (int it = 0; it < 8; it++)
		random_case(it, 2);
	/* an odd group count of half blocks: im2col */
	run_case(&(struct gcase){ .nb = 1, .c = 3 * B / 2, .m = 3 * B / 2,
				  .group = 3, .k = 3, .s = 1, .d = 1, .hw = 8,
				  .nt = 1 },
		 false);
	/* two groups of half a block: one merged group (a dense conv) */
	run_case(&(struct gcase){ .nb = 2, .c = B, .m = B, .group = 2, .k = 3,
				  .s = 1, .d = 1, .hw = 9, .nt = 2, .res = true },
		 true);
	printf("test-nchwc-group: %d checks, %d failed\n", checks, failures);
	return failures ? 1 : 0;
}
