// SPDX-License-Identifier: MIT
/*
 * Kernel registry, provider order and default CPU planner.
 *
 * mi_cpu_plan() asks the providers in a fixed order (enum
 * mi_cpu_provider): the int8 kernels (lib/quant), the blocked fp32 pass
 * (nchwc.c), this file's fp32 NCHW registry, then the element-wise and
 * data-movement kernels (eltwise.c, xform.c); each claims the live nodes
 * it has a kernel for and the next sees only the rest.  What nobody
 * claims runs on the reference op.
 *
 * The registry lists, per op, the fast NCHW variants with a stable name;
 * per Conv / Gemm / MatMul / pooling / channel-scale node the first whose
 * constraints hold is chosen (registry order = the simple "best known"
 * rule).  It then fuses the node's consumers into its epilogue while the
 * intermediate tensor has that single consumer:
 *
 *     [Add(residual, same shape)]  then  [Relu | Clip | HardSwish |
 *                                         Sigmoid | x*Sigmoid(x)]
 *
 * (a Gemm/MatMul also absorbs an Add of a constant [N] vector as bias).
 * Absorbed nodes are marked dead and the node writes the last absorbed
 * node's output; a residual operand becomes an extra input.  Weights are
 * packed into node->priv once; all nodes share one workspace sized for
 * the largest.  mi_cpu_plan_fini() undoes all of it.
 *
 * With a plan (opts->ctx->req, lib/plan/) every provider claims a node
 * only with the variant the plan names (mi_cpu_plan_allows) and fuses
 * only what it lists; a node the plan gives to this registry or to its
 * reference op but that an earlier provider takes at its turn is claimed
 * first, before any provider runs (req->early).
 */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "ops/ops.h"
#include "cpu/cpu.h"
#include "cpu/cpu_plan.h"
#include "cpu/nchwc.h"

/* lib/quant's provider (lib/quant is always part of the library). */
int mi_quant_plan(struct mi_graph *g, const struct mi_cpu_opts *opts);

/* ---- registry ---------------------------------------------------------- */
enum { K_CONV, K_GEMM, K_POOL, K_GPOOL, K_BMM, K_CHMUL };

struct variant {
	const char *op;
	int dtype;
	const char *layout;
	const char *name;
	int algo;          /* enum mi_conv_algo for Conv */
	unsigned int isas; /* bit per enum mi_isa */
};

#define ALL_ISAS ((1u << MI_ISA_COUNT) - 1)

/* In order of preference; the first whose constraints hold is chosen. */
static const struct variant registry[] = {
	{ "Conv", MI_DT_FLOAT, "NCHW", "conv.dw", MI_CONV_DEPTHWISE, ALL_ISAS },
	{ "Conv", MI_DT_FLOAT, "NCHW", "conv.gemm1x1", MI_CONV_GEMM, ALL_ISAS },
	{ "Conv", MI_DT_FLOAT, "NCHW", "conv.winograd.f4", MI_CONV_WINOGRAD, ALL_ISAS },
	{ "Conv", MI_DT_FLOAT, "NCHW", "conv.im2col", MI_CONV_IM2COL, ALL_ISAS },
	{ "Gemm", MI_DT_FLOAT, "rowmajor", "gemm.packed", 0, ALL_ISAS },
	{ "MatMul", MI_DT_FLOAT, "rowmajor", "matmul.packed", 0, ALL_ISAS },
	{ "MatMul", MI_DT_FLOAT, "rowmajor", "matmul.batched", 0, ALL_ISAS },
	{ "MaxPool", MI_DT_FLOAT, "NCHW", "maxpool.rows", 0, ALL_ISAS },
	{ "AveragePool", MI_DT_FLOAT, "NCHW", "avgpool.rows", 0, ALL_ISAS },
	{ "GlobalAveragePool", MI_DT_FLOAT, "NCHW", "gap.vector", 0, ALL_ISAS },
	{ "GlobalMaxPool", MI_DT_FLOAT, "NCHW", "gmp.vector", 0, ALL_ISAS },
	{ "Mul", MI_DT_FLOAT, "NCHW", "mul.chscale", 0, ALL_ISAS },
};

#define NREG (sizeof(registry) / sizeof(registry[0]))

/* The registry's variant named name for op (NULL: none). */
static const struct variant *variant_named(const char *op, const char *name)
{
	for (size_t i = 0; i < NREG; i++)
		if (!strcmp(registry[i].op, op) && !strcmp(registry[i].name, name))
			return &registry[i];
	return NULL;
}

int mi_cpu_nchw_variants(const char *op, const char **names, int max)
{
	int cnt = 0;

	for (size_t i = 0; i < NREG; i++)
		if (!strcmp(registry[i].op, op)) {
			if (cnt < max)
				names[cnt] = registry[i].name;
			cnt++;
		}
	return cnt;
}

static const char *const prov_names[] = {
	[MI_PROV_NONE] = "ref",
	[MI_PROV_INT8] = "int8",
	[MI_PROV_NCHWC] = "nchwc",
	[MI_PROV_NCHW] = "nchw",
	[MI_PROV_ELTWISE] = "eltwise",
	[MI_PROV_REF] = "ref",
};
_Static_assert(sizeof(prov_names) / sizeof(prov_names[0]) == MI_PROV_COUNT,
	       "a name per provider");

const char *mi_cpu_provider_name(int prov)
{
	return prov >= 0 && prov < MI_PROV_COUNT ? prov_names[prov] : "?";
}

static const struct mi_plan_req *req_of(const struct mi_cpu_opts *opts,
					int ni)
{
	const struct mi_plan_ctx *c = opts ? opts->ctx : NULL;

	if (!c || !c->req || ni < 0 || ni >= c->nnodes || !c->req[ni].variant)
		return NULL;
	return &c->req[ni];
}

const char *mi_cpu_plan_variant(const struct mi_cpu_opts *opts, int ni)
{
	const struct mi_plan_req *r = req_of(opts, ni);

	return r ? r->variant : NULL;
}

bool mi_cpu_plan_allows(const struct mi_cpu_opts *opts, int ni,
			const char *variant)
{
	const struct mi_plan_req *r = req_of(opts, ni);

	return !r || !strcmp(r->variant, variant);
}

bool mi_cpu_plan_allows_fuse(const struct mi_cpu_opts *opts, int ni, int ci)
{
	const struct mi_plan_req *r = req_of(opts, ni);

	if (!r)
		return true;
	for (int i = 0; i < r->nfused; i++)
		if (r->fused[i] == ci)
			return true;
	return false;
}

static const struct variant *find_variant(const char *op)
{
	for (size_t i = 0; i < sizeof(registry) / sizeof(registry[0]); i++)
		if (!strcmp(registry[i].op, op))
			return &registry[i];
	return NULL;
}

/* Winograd pays when the 36 GEMMs behind it are big enough to amortize
 * the transforms: enough 4x4 tiles (>= 17x17 maps): on 13x13 and 14x14
 * maps (16 tiles) the NCHWc direct conv, whose tiles run across rows
 * there, is faster (256 channels, 1 thread, per-node CPU time in
 * ResNet-18: 2.0 vs 2.3 ms), 7x7 maps (4 tiles) are 4x slower; and long
 * GEMMs (K = input channels >= 128).
 * Below 128 input channels the other paths were as fast per node
 * (--profile, 1 thread: ResNet 64->64 @56x56 2.0-3.4 ms either way,
 * inception_v3 32->32/64 @109x109 3-6 vs 4-5 ms), while F(4x4,3x3)'s
 * rounding (~5x F(2x2,3x3)'s, transforms reaching 8 and 1/24) adds up:
 * a random-weight inception_v3, whose 3x3 layers on big maps all have
 * 32..96 input channels, missed 1e-4 vs PyTorch (1.76e-4; 6.6e-5 now).
 * The 14x14 figures are AVX-512's; with AVX2 (12 accumulators, the
 * direct tile is half as wide) Winograd wins there from 16 tiles
 * (13x13-16x16 maps): ResNet-18's 3x3 256 @14x14 2.5-2.6 -> 1.5-1.6 ms
 * CPU at 1 thread, ResNet-50's 3.0-3.8 -> 1.4-1.6 ms (AMD Zen 3).
 * Likewise with AVX2 a 3x3
 * conv from 64 input channels runs on Winograd when it keeps its channel
 * count (ResNet's 64 -> 64 @56x56: 2.5 -> 1.3 ms, ResNet-50 sum of node
 * minima 88.7 -> 82.3 ms); not the ones that widen: inception_v3's
 * 80 -> 192 and 64 -> 96 took its error vs PyTorch from 7.7e-5 to
 * 1.11e-4 (the 96 -> 96 ones leave it at 7.7e-5).  A plan may name
 * Winograd where these rules do not take it (conv.winograd.f4). */
static int wino_pays(const struct mi_conv_shape *s, int isa)
{
	int mint = 25, minc = 128;
	int tiles = ((s->oh + 3) / 4) * ((s->ow + 3) / 4);

	if (isa == MI_ISA_AVX2)
		mint = 16;
	if (isa == MI_ISA_AVX2 && s->m == s->c)
		minc = 64;
	return s->c >= minc && s->m >= 16 && tiles >= mint;
}

/* The NCHWc pass leaves Winograd's convs to this planner. */
int mi_cpu_wino_pays(const struct mi_conv_shape *s, int isa)
{
	return wino_pays(s, isa) && mi_conv_supports(MI_CONV_WINOGRAD, s);
}

/* The first registry conv whose constraints hold; with a plan, only the
 * variant it names (Winograd then without the cost rule). */
static const struct variant *pick_conv(const struct mi_conv_shape *s, int isa,
				       const struct mi_cpu_opts *opts, int ni)
{
	bool named = req_of(opts, ni) != NULL;
	size_t i;

	for (i = 0; i < NREG; i++) {
		const struct variant *v = &registry[i];

		if (strcmp(v->op, "Conv") || !(v->isas & (1u << isa)) ||
		    !mi_cpu_plan_allows(opts, ni, v->name))
			continue;
		if (v->algo == MI_CONV_WINOGRAD && !named && !wino_pays(s, isa))
			continue;
		if (mi_conv_supports(v->algo, s))
			return v;
	}
	return NULL;
}

/* ---- per-node state ----------------------------------------------------- */
struct plan_ws {
	void *buf;
	size_t size;
	int refs;
};

#define MAX_ABSORB 4

struct fast_node {
	struct mi_cpu_kernel_hdr hdr;
	int kind;
	const struct variant *v;
	/* conv */
	struct mi_conv cv;
	int64_t xdims[4];
	/* gemm / matmul: C[m x n] = A[m x k] * B' + epilogue */
	struct mi_packed pb;
	int64_t m, n, k;
	ptrdiff_t a_rs, a_cs;
	float *bias;       /* owned, n floats (MI_BIAS_COL) or m (ROW) */
	int bias_kind;
	/* epilogue */
	int act;
	float lo, hi;
	int res_slot;      /* index in n->inputs of the residual, -1 none */
	/* undo */
	int orig_out;
	int orig_ninputs;
	int *orig_inputs;  /* copy when inputs were reallocated */
	int nabsorbed;
	int absorbed[MAX_ABSORB];
	struct plan_ws *ws;
	int nthreads;      /* the workspace was sized for this split */
	/* batched MatMul, both operands computed: nb x [m x k] * [k x n] */
	int64_t nb, bstride; /* bstride 0: B is shared by every batch */
	size_t ws_gemm;      /* per-thread sgemm workspace */
	/* pooling */
	struct mi_pool2d pool;
	int64_t planes, plane_size;
	int isa;
};

static int fast_run(struct mi_graph *g, struct mi_node *n);
static void fast_fini(struct mi_graph *g, struct mi_node *n);

static bool is_op(const struct mi_node *n, const char *op)
{
	return !n->domain[0] && !strcmp(n->op_type, op);
}

static bool float_known(const struct mi_tensor *t)
{
	return t && t->dtype == MI_DT_FLOAT && mi_tensor_shape_known(t);
}

static bool is_const(const struct mi_tensor *t)
{
	return t && t->data && (t->flags & MI_TF_CONST);
}

static bool same_shape(const struct mi_tensor *a, const struct mi_tensor *b)
{
	if (a->ndim != b->ndim)
		return false;
	for (int i = 0; i < a->ndim; i++)
		if (a->dims[i] != b->dims[i])
			return false;
	return true;
}

/* ---- variant setup ------------------------------------------------------ */
static int setup_conv(struct mi_graph *g, struct mi_node *n,
		      struct fast_node *f, int isa, int nthreads,
		      const struct mi_cpu_opts *opts)
{
	struct mi_tensor *x = mi_in(g, n, 0), *w = mi_in(g, n, 1);
	struct mi_tensor *b = mi_in(g, n, 2), *y = mi_out(g, n, 0);
	struct mi_conv_shape s = { 0 };
	struct mi_spatial sp = { 0 };
	char saved[sizeof(g->err)];
	int err;

	if (!float_known(x) || !is_const(w) || w->dtype != MI_DT_FLOAT ||
	    !float_known(y) || x->ndim != 4 || w->ndim != 4 || y->ndim != 4)
		return -EOPNOTSUPP;
	if (b && (!is_const(b) || b->dtype != MI_DT_FLOAT ||
		  mi_tensor_numel(b) != w->dims[0]))
		return -EOPNOTSUPP;
	sp.kernel[0] = w->dims[2];
	sp.kernel[1] = w->dims[3];
	memcpy(saved, g->err, sizeof(saved));
	err = mi_ops_spatial(g, n, &sp, x, 0);
	memcpy(g->err, saved, sizeof(saved));
	if (err || sp.nsp != 2)
		return -EOPNOTSUPP;
	s.n = (int)x->dims[0];
	s.c = (int)x->dims[1];
	s.h = (int)x->dims[2];
	s.w = (int)x->dims[3];
	s.m = (int)w->dims[0];
	s.kh = (int)w->dims[2];
	s.kw = (int)w->dims[3];
	s.group = (int)mi_attr_int(n, "group", 1);
	s.sh = (int)sp.stride[0];
	s.sw = (int)sp.stride[1];
	s.dh = (int)sp.dil[0];
	s.dw = (int)sp.dil[1];
	s.pt = (int)sp.pad_begin[0];
	s.pl = (int)sp.pad_begin[1];
	s.pb = (int)sp.pad_end[0];
	s.pr = (int)sp.pad_end[1];
	s.oh = (int)y->dims[2];
	s.ow = (int)y->dims[3];
	if (s.group < 1 || s.c % s.group || s.m % s.group ||
	    w->dims[1] * s.group != s.c || y->dims[0] != s.n ||
	    y->dims[1] != s.m || sp.out[0] != s.oh || sp.out[1] != s.ow ||
	    s.pt < 0 || s.pl < 0 || s.pb < 0 || s.pr < 0)
		return -EOPNOTSUPP;
	f->v = pick_conv(&s, isa, opts, (int)(n - g->nodes));
	if (!f->v)
		return -EOPNOTSUPP;
	err = mi_conv_init(&f->cv, f->v->algo, isa, nthreads, &s, w->data,
			   b ? b->data : NULL);
	if (err)
		return err;
	f->kind = K_CONV;
	memcpy(f->xdims, x->dims, sizeof(f->xdims));
	return 0;
}

/* Gemm: Y = alpha*A'*B' + beta*C with B (and C) constant.
 * MatMul: Y[..., m, n] = A[..., m, k] * B[k, n] with B constant 2-D. */
static int setup_gemm(struct mi_graph *g, struct mi_node *n,
		      struct fast_node *f, int isa)
{
	struct mi_tensor *a = mi_in(g, n, 0), *b = mi_in(g, n, 1);
	struct mi_tensor *c = mi_in(g, n, 2), *y = mi_out(g, n, 0);
	bool gemm = is_op(n, "Gemm");
	int ta = 0, tb = 0;
	float alpha = 1.0f, beta = 1.0f;
	ptrdiff_t b_rs, b_cs;
	const float *bsrc;
	float *scaled = NULL;
	int err;

	if (!float_known(a) || !is_const(b) || b->dtype != MI_DT_FLOAT ||
	    !float_known(y) || b->ndim != 2 || a->ndim < 2)
		return -EOPNOTSUPP;
	if (gemm) {
		ta = (int)mi_attr_int(n, "transA", 0);
		tb = (int)mi_attr_int(n, "transB", 0);
		alpha = mi_attr_float(n, "alpha", 1.0f);
		beta = mi_attr_float(n, "beta", 1.0f);
		if (a->ndim != 2)
			return -EOPNOTSUPP;
		f->m = ta ? a->dims[1] : a->dims[0];
		f->k = ta ? a->dims[0] : a->dims[1];
	} else {
		if (c)
			return -EOPNOTSUPP;
		f->k = a->dims[a->ndim - 1];
		f->m = mi_tensor_numel(a) / (f->k ? f->k : 1);
	}
	f->n = tb ? b->dims[0] : b->dims[1];
	if ((tb ? b->dims[1] : b->dims[0]) != f->k || f->m < 1 || f->n < 1 ||
	    mi_tensor_numel(y) != f->m * f->n || y->dims[y->ndim - 1] != f->n)
		return -EOPNOTSUPP;
	f->a_rs = ta ? 1 : f->k;
	f->a_cs = ta ? f->m : 1;
	if (c) {
		int64_t nc = mi_tensor_numel(c);

		if (!is_const(c) || c->dtype != MI_DT_FLOAT)
			return -EOPNOTSUPP;
		if (nc == f->n && c->dims[c->ndim - 1] == f->n) {
			f->bias_kind = MI_BIAS_COL;
		} else if (nc == 1) {
			f->bias_kind = MI_BIAS_COL;
		} else if (nc == f->m && c->ndim == 2 && c->dims[1] == 1) {
			f->bias_kind = MI_BIAS_ROW;
		} else {
			return -EOPNOTSUPP;
		}
		f->bias = malloc((f->bias_kind == MI_BIAS_ROW ? f->m : f->n) *
				 sizeof(float));
		if (!f->bias)
			return -ENOMEM;
		for (int64_t i = 0; i < (f->bias_kind == MI_BIAS_ROW ? f->m : f->n);
		     i++)
			f->bias[i] = beta * ((const float *)c->data)[nc == 1 ? 0 : i];
	}
	b_rs = tb ? 1 : f->n;
	b_cs = tb ? f->k : 1;
	bsrc = b->data;
	if (alpha != 1.0f) {
		int64_t nb = f->k * f->n;

		scaled = malloc(nb * sizeof(float));
		if (!scaled)
			return -ENOMEM;
		for (int64_t i = 0; i < nb; i++)
			scaled[i] = alpha * bsrc[i];
		bsrc = scaled;
	}
	err = mi_sgemm_pack_b(isa, f->k, f->n, bsrc, b_rs, b_cs, &f->pb);
	free(scaled);
	if (err)
		return err;
	f->kind = K_GEMM;
	f->v = find_variant(gemm ? "Gemm" : "MatMul");
	return 0;
}

static struct mi_sgemm_args bmm_args(const struct fast_node *f)
{
	struct mi_sgemm_args ga = { 0 };

	ga.isa = f->isa;
	ga.m = f->m, ga.n = f->n, ga.k = f->k;
	ga.a_rs = f->k, ga.a_cs = 1;
	ga.b_rs = f->n, ga.b_cs = 1;
	ga.ldc = f->n;
	ga.nthreads = 1;
	return ga;
}

/* MatMul of two computed tensors: A [..., m, k] x B [..., k, n] with
 * the same leading dims, or B 2-D. */
static int setup_bmm(struct mi_graph *g, struct mi_node *n,
		     struct fast_node *f, int isa)
{
	struct mi_tensor *a = mi_in(g, n, 0), *b = mi_in(g, n, 1);
	struct mi_tensor *y = mi_out(g, n, 0);
	struct mi_sgemm_args ga;
	int64_t na;

	if (!float_known(a) || !float_known(b) || !float_known(y) ||
	    a->ndim < 2 || b->ndim < 2 || n->ninputs != 2)
		return -EOPNOTSUPP;
	f->m = a->dims[a->ndim - 2];
	f->k = a->dims[a->ndim - 1];
	f->n = b->dims[b->ndim - 1];
	if (b->dims[b->ndim - 2] != f->k || f->m < 1 || f->n < 1 || f->k < 1)
		return -EOPNOTSUPP;
	na = mi_tensor_numel(a) / (f->m * f->k);
	if (b->ndim == 2) {
		f->bstride = 0;
	} else {
		if (b->ndim != a->ndim)
			return -EOPNOTSUPP;
		for (int i = 0; i < a->ndim - 2; i++)
			if (a->dims[i] != b->dims[i])
				return -EOPNOTSUPP;
		f->bstride = f->k * f->n;
	}
	if (mi_tensor_numel(y) != na * f->m * f->n ||
	    y->dims[y->ndim - 1] != f->n || y->dims[y->ndim - 2] != f->m)
		return -EOPNOTSUPP;
	f->nb = na;
	f->isa = isa;
	ga = bmm_args(f);
	f->ws_gemm = (mi_sgemm_ws_size(&ga) + 63) & ~(size_t)63;
	f->kind = K_BMM;
	f->v = variant_named("MatMul", "matmul.batched");
	return 0;
}

/* Mul(x [N,C,H,W], s [N,C,1,1]) in either order: per-plane scaling. */
static int setup_chmul(struct mi_graph *g, struct mi_node *n,
		       struct fast_node *f, int isa)
{
	struct mi_tensor *a = mi_in(g, n, 0), *b = mi_in(g, n, 1);
	struct mi_tensor *y = mi_out(g, n, 0), *x, *sc;

	if (n->ninputs != 2 || !float_known(a) || !float_known(b) ||
	    !float_known(y) || a->ndim != 4 || b->ndim != 4)
		return -EOPNOTSUPP;
	x = mi_tensor_numel(a) >= mi_tensor_numel(b) ? a : b;
	sc = x == a ? b : a;
	if (sc->dims[0] != x->dims[0] || sc->dims[1] != x->dims[1] ||
	    sc->dims[2] != 1 || sc->dims[3] != 1 || !same_shape(x, y))
		return -EOPNOTSUPP;
	f->isa = isa;
	f->planes = x->dims[0] * x->dims[1];
	f->plane_size = x->dims[2] * x->dims[3];
	f->res_slot = x == a ? 1 : 0; /* slot of the scale tensor */
	f->kind = K_CHMUL;
	f->v = find_variant("Mul");
	return 0;
}

static int setup_pool(struct mi_graph *g, struct mi_node *n,
		      struct fast_node *f, int isa)
{
	struct mi_tensor *x = mi_in(g, n, 0), *y = mi_out(g, n, 0);
	struct mi_spatial sp = { 0 };
	char saved[sizeof(g->err)];
	const int64_t *ks;
	int nk = 0, err;

	if (!float_known(x) || !float_known(y) || x->ndim < 3)
		return -EOPNOTSUPP;
	f->isa = isa;
	f->planes = x->dims[0] * x->dims[1];
	f->plane_size = mi_tensor_numel(x) / (f->planes ? f->planes : 1);
	if (is_op(n, "GlobalAveragePool") || is_op(n, "GlobalMaxPool")) {
		if (mi_tensor_numel(y) != f->planes || f->plane_size < 1)
			return -EOPNOTSUPP;
		f->kind = K_GPOOL;
		f->pool.avg = is_op(n, "GlobalAveragePool");
		f->v = find_variant(n->op_type);
		return 0;
	}
	if (x->ndim != 4 || y->ndim != 4)
		return -EOPNOTSUPP;
	ks = mi_attr_ints(n, "kernel_shape", &nk);
	if (!ks || nk != 2)
		return -EOPNOTSUPP;
	sp.kernel[0] = ks[0];
	sp.kernel[1] = ks[1];
	memcpy(saved, g->err, sizeof(saved));
	err = mi_ops_spatial(g, n, &sp, x, 1);
	memcpy(g->err, saved, sizeof(saved));
	if (err || sp.nsp != 2 || sp.dil[0] != 1 || sp.dil[1] != 1 ||
	    sp.stride[0] != sp.stride[1] || sp.out[0] != y->dims[2] ||
	    sp.out[1] != y->dims[3] || y->dims[0] != x->dims[0] ||
	    y->dims[1] != x->dims[1])
		return -EOPNOTSUPP;
	f->pool.ih = (int)x->dims[2];
	f->pool.iw = (int)x->dims[3];
	f->pool.oh = (int)y->dims[2];
	f->pool.ow = (int)y->dims[3];
	f->pool.kh = (int)ks[0];
	f->pool.kw = (int)ks[1];
	f->pool.s = (int)sp.stride[0];
	f->pool.pt = (int)sp.pad_begin[0];
	f->pool.pl = (int)sp.pad_begin[1];
	f->pool.pb = (int)sp.pad_end[0];
	f->pool.pr = (int)sp.pad_end[1];
	f->pool.avg = is_op(n, "AveragePool");
	f->pool.include_pad = (int)mi_attr_int(n, "count_include_pad", 0);
	if (!mi_pool_supports(&f->pool))
		return -EOPNOTSUPP;
	f->kind = K_POOL;
	f->v = find_variant(n->op_type);
	return 0;
}

/* ---- fusion --------------------------------------------------------------- */
/* Is node `target` an ancestor of tensor t (through live nodes)? */
static bool reaches(struct mi_graph *g, int t, int target, char *seen)
{
	int p = g->tensors[t].producer;

	if (p < 0 || seen[p])
		return false;
	if (p == target)
		return true;
	seen[p] = 1;
	for (int j = 0; j < g->nodes[p].ninputs; j++) {
		int x = g->nodes[p].inputs[j];

		if (x >= 0 && reaches(g, x, target, seen))
			return true;
	}
	return false;
}

int mi_cpu_depends(struct mi_graph *g, int t, int node)
{
	char *seen = calloc(g->nnodes + 1, 1);
	bool r;

	if (!seen)
		return -ENOMEM;
	r = reaches(g, t, node, seen);
	free(seen);
	return r;
}

int mi_cpu_consumers(const struct mi_graph *g, int t, int *list, int max)
{
	int cnt = 0;

	for (int i = 0; i < g->nnodes; i++) {
		const struct mi_node *n = &g->nodes[i];

		if (n->dead)
			continue;
		for (int j = 0; j < n->ninputs; j++)
			if (n->inputs[j] == t) {
				if (cnt < max)
					list[cnt] = i;
				cnt++;
			}
	}
	return cnt;
}

/* Activation of consumer node c, or -1 if it is not one we fuse. */
int mi_cpu_act_of(struct mi_graph *g, struct mi_node *c, float *lo,
		  float *hi)
{
	if (is_op(c, "Relu"))
		return MI_ACT_RELU;
	if (is_op(c, "Sigmoid"))
		return MI_ACT_SIGMOID;
	if (is_op(c, "HardSwish")) {
		*lo = 1.0f / 6.0f;
		*hi = 0.5f;
		return MI_ACT_HSWISH;
	}
	if (is_op(c, "Clip")) {
		struct mi_tensor *tmin = mi_in(g, c, 1), *tmax = mi_in(g, c, 2);

		*lo = -FLT_MAX;
		*hi = FLT_MAX;
		if (c->ninputs > 1 || g->opset >= 11) {
			if ((tmin && (!is_const(tmin) ||
				      tmin->dtype != MI_DT_FLOAT ||
				      mi_tensor_numel(tmin) != 1)) ||
			    (tmax && (!is_const(tmax) ||
				      tmax->dtype != MI_DT_FLOAT ||
				      mi_tensor_numel(tmax) != 1)))
				return -1;
			if (tmin)
				*lo = *(const float *)tmin->data;
			if (tmax)
				*hi = *(const float *)tmax->data;
		} else {
			*lo = mi_attr_float(c, "min", -FLT_MAX);
			*hi = mi_attr_float(c, "max", FLT_MAX);
		}
		return MI_ACT_CLIP;
	}
	return -1;
}

/* Are the two consumers cons[] of tensor t the pair of x * Sigmoid(x)
 * (SiLU), the Sigmoid read by the Mul alone?  *sgi / *muli: their nodes. */
bool mi_cpu_silu_pair(struct mi_graph *g, int t, const int cons[2], int *sgi,
		      int *muli)
{
	struct mi_node *c0 = &g->nodes[cons[0]], *c1 = &g->nodes[cons[1]];
	struct mi_node *sg, *mul;
	int u;

	if (is_op(c0, "Sigmoid") && is_op(c1, "Mul"))
		sg = c0, mul = c1, *sgi = cons[0], *muli = cons[1];
	else if (is_op(c1, "Sigmoid") && is_op(c0, "Mul"))
		sg = c1, mul = c0, *sgi = cons[1], *muli = cons[0];
	else
		return false;
	u = sg->outputs[0];
	return mul->ninputs == 2 &&
	       ((mul->inputs[0] == t && mul->inputs[1] == u) ||
		(mul->inputs[1] == t && mul->inputs[0] == u)) &&
	       mi_graph_sole_consumer(g, u) == *muli &&
	       same_shape(mi_out(g, mul, 0), &g->tensors[t]);
}

static void absorb(struct mi_graph *g, struct mi_node *n, struct fast_node *f,
		   int ci)
{
	struct mi_node *c = &g->nodes[ci];

	f->absorbed[f->nabsorbed++] = ci;
	c->dead = true;
	n->outputs[0] = c->outputs[0];
	/* keep producers current for the next fusion step */
	g->tensors[n->outputs[0]].producer = (int)(n - g->nodes);
}

/* Append tensor t to n's inputs (residual). */
static int add_input(struct mi_node *n, struct fast_node *f, int t)
{
	int *in = malloc((n->ninputs + 2) * sizeof(int));
	int slot = n->ninputs;

	if (!in)
		return -ENOMEM;
	memcpy(in, n->inputs, n->ninputs * sizeof(int));
	/* Conv/Gemm: keep the optional bias slot explicit */
	if (slot < 3) {
		for (; slot < 3; slot++)
			in[slot] = -1;
	}
	in[slot] = t;
	f->orig_inputs = n->inputs;
	n->inputs = in;
	n->ninputs = slot + 1;
	f->res_slot = slot;
	return 0;
}

/* May consumer ci be fused into n: not claimed by another provider, and
 * listed by the plan if there is one. */
static bool fusable(struct mi_graph *g, const struct mi_cpu_opts *opts,
		    int ni, int ci)
{
	return !g->nodes[ci].priv && mi_cpu_plan_allows_fuse(opts, ni, ci);
}

static int fuse(struct mi_graph *g, struct mi_node *n, struct fast_node *f,
		const struct mi_cpu_opts *opts)
{
	int ni = (int)(n - g->nodes);

	while (f->nabsorbed < MAX_ABSORB - 1 && f->act == MI_ACT_NONE) {
		int t = n->outputs[0];
		struct mi_tensor *tt = &g->tensors[t];
		int cons[2], nc;
		struct mi_node *c;
		float lo = 0, hi = 0;
		int act;

		if (tt->flags & MI_TF_OUTPUT)
			break;
		nc = mi_cpu_consumers(g, t, cons, 2);
		if (nc == 2) {
			int sgi, muli;

			if (!mi_cpu_silu_pair(g, t, cons, &sgi, &muli) ||
			    !fusable(g, opts, ni, sgi) ||
			    !fusable(g, opts, ni, muli))
				break;
			f->act = MI_ACT_SILU;
			absorb(g, n, f, sgi);
			absorb(g, n, f, muli);
			break;
		}
		if (nc != 1)
			break;
		c = &g->nodes[cons[0]];
		if (!fusable(g, opts, ni, cons[0]))
			break;
		if (c->noutputs != 1 || !same_shape(mi_out(g, c, 0), tt) ||
		    mi_out(g, c, 0)->dtype != MI_DT_FLOAT)
			break;
		act = mi_cpu_act_of(g, c, &lo, &hi);
		if (act > 0) {
			f->act = act;
			f->lo = lo;
			f->hi = hi;
			absorb(g, n, f, cons[0]);
			break;
		}
		if (is_op(c, "Add") && c->ninputs == 2 && f->res_slot < 0) {
			int other = c->inputs[0] == t ? c->inputs[1] :
							c->inputs[0];
			struct mi_tensor *ot = &g->tensors[other];
			int cyc;

			if (other == t)
				break;
			/* Gemm/MatMul + constant row vector: bias */
			if (f->kind == K_GEMM && !f->bias && is_const(ot) &&
			    ot->dtype == MI_DT_FLOAT &&
			    mi_tensor_numel(ot) == f->n &&
			    ot->dims[ot->ndim - 1] == f->n) {
				f->bias = malloc(f->n * sizeof(float));
				if (!f->bias)
					return -ENOMEM;
				memcpy(f->bias, ot->data, f->n * sizeof(float));
				f->bias_kind = MI_BIAS_COL;
				absorb(g, n, f, cons[0]);
				continue;
			}
			if (!float_known(ot) || !same_shape(ot, tt))
				break;
			cyc = mi_cpu_depends(g, other, ni);
			if (cyc < 0)
				return cyc;
			if (cyc)
				break;
			if (add_input(n, f, other))
				return -ENOMEM;
			absorb(g, n, f, cons[0]);
			continue;
		}
		break;
	}
	return 0;
}

/* ---- plan / run / fini ------------------------------------------------------ */
static int pool_threads(const struct fast_node *f)
{
	return f->planes < f->nthreads ? (int)f->planes : f->nthreads;
}

static size_t fast_ws_size(const struct fast_node *f, int nthreads)
{
	if (f->kind == K_CONV)
		return f->cv.ws_size;
	if (f->kind == K_GPOOL || f->kind == K_CHMUL)
		return 0;
	if (f->kind == K_BMM)
		return f->ws_gemm * (f->nb < nthreads ? f->nb : nthreads);
	if (f->kind == K_POOL)
		return ((mi_pool_ws_floats(&f->pool) * sizeof(float) + 63) & ~63ul) *
		       pool_threads(f);
	{
		struct mi_sgemm_args ga = { 0 };

		ga.isa = f->pb.isa;
		ga.m = f->m, ga.n = f->n, ga.k = f->k;
		ga.pb = &f->pb;
		ga.nthreads = nthreads;
		return mi_sgemm_ws_size(&ga);
	}
}

static void fast_free(struct fast_node *f)
{
	if (f->kind == K_CONV)
		mi_conv_fini(&f->cv);
	mi_packed_free(&f->pb);
	free(f->bias);
	free(f);
}

/* The registry's claim of node n (0 also when it has no variant for n). */
static int nchw_claim(struct mi_graph *g, struct mi_node *n,
		      const struct mi_cpu_opts *opts, int isa, int nthreads,
		      struct plan_ws *ws, size_t *wsmax)
{
	int ni = (int)(n - g->nodes);
	struct fast_node *f;
	int err;

	if (n->dead || n->priv || n->noutputs != 1 || mi_out(g, n, 0)->data)
		return 0;
	if (!find_variant(n->op_type) || n->domain[0])
		return 0;
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->res_slot = -1;
	f->orig_out = n->outputs[0];
	f->orig_ninputs = n->ninputs;
	f->hdr.run = fast_run;
	f->hdr.fini = fast_fini;
	f->hdr.lay_in = f->hdr.lay_out = MI_LAYOUT_NCHW;
	f->nthreads = nthreads;
	if (is_op(n, "Conv")) {
		err = setup_conv(g, n, f, isa, nthreads, opts);
	} else if (is_op(n, "Gemm") || is_op(n, "MatMul")) {
		err = setup_gemm(g, n, f, isa);
		if (err == -EOPNOTSUPP && is_op(n, "MatMul")) {
			free(f->bias);
			f->bias = NULL;
			err = setup_bmm(g, n, f, isa);
		}
	} else if (is_op(n, "Mul")) {
		err = setup_chmul(g, n, f, isa);
	} else {
		err = setup_pool(g, n, f, isa);
	}
	if (!err && !mi_cpu_plan_allows(opts, ni, f->v->name))
		err = -EOPNOTSUPP;
	if (err) {
		fast_free(f);
		return err == -EOPNOTSUPP ? 0 : err;
	}
	f->hdr.variant = f->v->name;
	f->ws = ws;
	ws->refs++;
	n->priv = f;
	if (f->kind == K_CONV || f->kind == K_GEMM) {
		err = fuse(g, n, f, opts);
		if (err)
			return err;
	}
	if (fast_ws_size(f, nthreads) > *wsmax)
		*wsmax = fast_ws_size(f, nthreads);
	return 0;
}

/* The fp32 NCHW provider: every live node in order, after the early
 * claims a plan asked for (done first, by mi_cpu_plan()). */
static int nchw_plan(struct mi_graph *g, const struct mi_cpu_opts *opts,
		     int isa, int nthreads, bool early)
{
	struct plan_ws *ws = calloc(1, sizeof(*ws));
	size_t wsmax = 0;
	int err = 0;

	if (!ws)
		return -ENOMEM;
	for (int p = 0; p < g->norder && !err; p++) {
		int ni = g->order[p];
		const struct mi_plan_req *r = req_of(opts, ni);

		if (early && !(r && r->early && r->prov == MI_PROV_NCHW))
			continue;
		err = nchw_claim(g, &g->nodes[ni], opts, isa, nthreads, ws,
				 &wsmax);
	}
	if (!err && ws->refs) {
		ws->buf = mi_cpu_alloc(wsmax);
		ws->size = wsmax;
		if (!ws->buf)
			err = -ENOMEM;
	}
	if (!ws->refs)
		free(ws);
	return err;
}

int mi_cpu_nchw_supports(struct mi_graph *g, struct mi_node *n,
			 const char *variant, int isa, bool *by_rule)
{
	int ni = (int)(n - g->nodes), err;
	struct mi_plan_req *req = calloc(ni + 1, sizeof(*req));
	struct mi_plan_ctx c = { .nnodes = ni + 1, .req = req };
	struct mi_cpu_opts o = { .ctx = &c };
	struct fast_node *f;

	f = calloc(1, sizeof(*f));
	if (!req || !f) {
		free(req);
		free(f);
		return -ENOMEM;
	}
	req[ni].variant = variant;
	req[ni].prov = MI_PROV_NCHW;
	f->res_slot = -1;
	f->nthreads = 1;
	if (!variant_named(n->op_type, variant) || n->domain[0] ||
	    n->noutputs != 1)
		err = -EOPNOTSUPP;
	else if (is_op(n, "Conv"))
		err = setup_conv(g, n, f, isa, 1, &o);
	else if (is_op(n, "Gemm") || (is_op(n, "MatMul") &&
				      !strcmp(variant, "matmul.packed")))
		err = setup_gemm(g, n, f, isa);
	else if (is_op(n, "MatMul"))
		err = setup_bmm(g, n, f, isa);
	else if (is_op(n, "Mul"))
		err = setup_chmul(g, n, f, isa);
	else
		err = setup_pool(g, n, f, isa);
	if (!err && strcmp(f->v->name, variant))
		err = -EOPNOTSUPP;
	/* only Winograd has a cost rule on top of its constraints */
	if (!err && by_rule)
		*by_rule = f->kind != K_CONV || f->cv.algo != MI_CONV_WINOGRAD ||
			   wino_pays(&f->cv.s, isa);
	fast_free(f);
	free(req);
	return err;
}

/* ---- the reference op as a claimed node (a plan's "ref" pin) ------------ */
struct ref_node {
	struct mi_cpu_kernel_hdr hdr;
};

static int ref_run(struct mi_graph *g, struct mi_node *n)
{
	/* the executor zeroes the outputs of unclaimed nodes for the
	 * reference ops; do the same */
	for (int j = 0; j < n->noutputs; j++) {
		struct mi_tensor *t = mi_out(g, n, j);

		if (t && t->data)
			memset(t->data, 0, t->nbytes);
	}
	return n->def->run(g, n);
}

static void ref_fini(struct mi_graph *g, struct mi_node *n)
{
	free(n->priv);
}

static int ref_pin(struct mi_graph *g, const struct mi_cpu_opts *opts)
{
	for (int p = 0; p < g->norder; p++) {
		int ni = g->order[p];
		const struct mi_plan_req *r = req_of(opts, ni);
		struct mi_node *n = &g->nodes[ni];
		struct ref_node *rn;

		if (!r || !r->early || r->prov != MI_PROV_REF || n->dead ||
		    n->priv || !n->def || !n->def->run)
			continue;
		rn = calloc(1, sizeof(*rn));
		if (!rn)
			return -ENOMEM;
		rn->hdr.run = ref_run;
		rn->hdr.fini = ref_fini;
		rn->hdr.variant = "ref";
		n->priv = rn;
	}
	return 0;
}

/* ---- the providers ------------------------------------------------------- */
struct provider {
	int id;
	int (*plan)(struct mi_graph *g, const struct mi_cpu_opts *opts,
		    int isa, int nthreads);
};

static int prov_int8(struct mi_graph *g, const struct mi_cpu_opts *opts,
		     int isa, int nthreads)
{
	if (opts && opts->no_int8)
		return 0;
	return mi_quant_plan(g, opts);
}

static int prov_nchwc(struct mi_graph *g, const struct mi_cpu_opts *opts,
		      int isa, int nthreads)
{
	return mi_cpu_plan_nchwc(g, nthreads, isa, opts);
}

static int prov_nchw(struct mi_graph *g, const struct mi_cpu_opts *opts,
		     int isa, int nthreads)
{
	return nchw_plan(g, opts, isa, nthreads, false);
}

static int prov_eltwise(struct mi_graph *g, const struct mi_cpu_opts *opts,
			int isa, int nthreads)
{
	return mi_cpu_plan_eltwise(g, nthreads, isa);
}

static const struct provider providers[] = {
	{ MI_PROV_INT8, prov_int8 },
	{ MI_PROV_NCHWC, prov_nchwc },
	{ MI_PROV_NCHW, prov_nchw },
	{ MI_PROV_ELTWISE, prov_eltwise },
};

/* Who claimed what: every claimed node not yet recorded is prov's. */
static void record(struct mi_graph *g, struct mi_plan_ctx *c, int prov)
{
	if (!c || !c->prov)
		return;
	for (int i = 0; i < g->nnodes && i < c->nnodes; i++)
		if (g->nodes[i].priv && !c->prov[i])
			c->prov[i] = (unsigned char)prov;
}

void mi_plan_ctx_reset(struct mi_plan_ctx *c)
{
	if (!c)
		return;
	free(c->prov);
	free(c->live);
	free(c->out0);
	free(c->in_off);
	free(c->in_idx);
	c->prov = c->live = NULL;
	c->out0 = c->in_off = c->in_idx = NULL;
	c->fingerprint = 0;
}

static uint64_t fnv(uint64_t h, const void *p, size_t len)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < len; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

static uint64_t fnv_str(uint64_t h, const char *s)
{
	return fnv(h, s ? s : "", (s ? strlen(s) : 0) + 1);
}

static uint64_t fnv_tensor(uint64_t h, const struct mi_graph *g, int t)
{
	const struct mi_tensor *x;

	if (t < 0)
		return fnv(h, "-", 1);
	x = &g->tensors[t];
	h = fnv_str(h, x->name);
	/* a shape known only at run time is not part of the graph */
	if (!mi_tensor_shape_known(x))
		return fnv(h, "?", 1);
	h = fnv(h, &x->dtype, sizeof(x->dtype));
	h = fnv(h, &x->ndim, sizeof(x->ndim));
	if (x->ndim > 0)
		h = fnv(h, x->dims, x->ndim * sizeof(x->dims[0]));
	return h;
}

/* Snapshot the graph before planning and hash it: the live nodes' names,
 * ops, inputs and outputs (names, dtypes, shapes) in index order. */
static int snapshot(struct mi_graph *g, struct mi_plan_ctx *c)
{
	uint64_t h = 0xcbf29ce484222325ull;
	int nin = 0;

	mi_plan_ctx_reset(c);
	for (int i = 0; i < g->nnodes; i++)
		nin += g->nodes[i].ninputs;
	c->nnodes = g->nnodes;
	c->prov = calloc(g->nnodes + 1, 1);
	c->live = calloc(g->nnodes + 1, 1);
	c->out0 = calloc(g->nnodes + 1, sizeof(int));
	c->in_off = calloc(g->nnodes + 1, sizeof(int));
	c->in_idx = calloc(nin + 1, sizeof(int));
	if (!c->prov || !c->live || !c->out0 || !c->in_off || !c->in_idx) {
		mi_plan_ctx_reset(c);
		return -ENOMEM;
	}
	nin = 0;
	for (int i = 0; i < g->nnodes; i++) {
		const struct mi_node *n = &g->nodes[i];

		c->live[i] = !n->dead;
		c->out0[i] = n->noutputs > 0 ? n->outputs[0] : -1;
		c->in_off[i] = nin;
		memcpy(c->in_idx + nin, n->inputs, n->ninputs * sizeof(int));
		nin += n->ninputs;
		if (n->dead)
			continue;
		h = fnv_str(h, n->name);
		h = fnv_str(h, n->domain);
		h = fnv_str(h, n->op_type);
		for (int j = 0; j < n->ninputs; j++)
			h = fnv_tensor(h, g, n->inputs[j]);
		for (int j = 0; j < n->noutputs; j++)
			h = fnv_tensor(h, g, n->outputs[j]);
	}
	c->in_off[g->nnodes] = nin;
	c->fingerprint = h;
	return 0;
}

int mi_cpu_plan(struct mi_graph *g, const struct mi_cpu_opts *opts)
{
	int nthreads = opts && opts->nthreads > 0 ? opts->nthreads :
						    mi_cpu_ncores();
	struct mi_plan_ctx *c = opts ? opts->ctx : NULL;
	int isa = mi_cpu_opts_isa(opts), err = 0;

	mi_cpu_set_nthreads(nthreads);
	if (c) {
		err = snapshot(g, c);
		if (err)
			return mi_graph_err(g, NULL, err, "CPU planning: out of memory");
		c->nthreads = nthreads;
		c->isa = isa;
	}
	if (opts && opts->reference)
		return 0;
	/* what a plan gives to the reference op or to the registry but an
	 * earlier provider would take */
	err = ref_pin(g, opts);
	record(g, c, MI_PROV_REF);
	if (!err)
		err = nchw_plan(g, opts, isa, nthreads, true);
	record(g, c, MI_PROV_NCHW);
	for (size_t i = 0; !err && i < sizeof(providers) / sizeof(providers[0]);
	     i++) {
		err = providers[i].plan(g, opts, isa, nthreads);
		record(g, c, providers[i].id);
	}
	if (err) {
		mi_cpu_plan_fini(g);
		if (g->err[0])
			return err;
		return mi_graph_err(g, NULL, err, "CPU planning failed: %s",
				    err == -ENOMEM ? "out of memory" : "error");
	}
	return 0;
}

struct pool_job {
	const struct fast_node *f;
	const float *x;
	float *y;
	struct mi_work work; /* planes */
};

static void pool_thread(void *ctx, int t, int nt)
{
	struct pool_job *j = ctx;
	const struct fast_node *f = j->f;
	const struct mi_cpu_kern *kt = mi_cpu_kern_get(f->isa);
	int64_t b, e, p;

	if (f->kind == K_GPOOL) {
		while (mi_work_claim(&j->work, &b, &e))
			for (p = b; p < e; p++) {
				const float *xp = j->x + p * f->plane_size;

				j->y[p] = f->pool.avg ?
					kt->sum(xp, f->plane_size) /
						f->plane_size :
					kt->max(xp, f->plane_size);
			}
		return;
	}
	{
		size_t per = (mi_pool_ws_floats(&f->pool) * sizeof(float) + 63) &
			     ~63ul;
		float *ws = (float *)((char *)f->ws->buf + per * t);
		size_t isz = (size_t)f->pool.ih * f->pool.iw;
		size_t osz = (size_t)f->pool.oh * f->pool.ow;

		while (mi_work_claim(&j->work, &b, &e))
			for (p = b; p < e; p++)
				kt->pool(&f->pool, j->x + p * isz,
					 j->y + p * osz, ws);
	}
}

struct chmul_job {
	const struct fast_node *f;
	const float *x, *s;
	float *y;
	struct mi_work work; /* planes, claimed (a late thread's share
			      * goes to the others) */
};

static void chmul_thread(void *ctx, int t, int nt)
{
	struct chmul_job *j = ctx;
	const struct fast_node *f = j->f;
	const struct mi_cpu_kern *kt = mi_cpu_kern_get(f->isa);
	int64_t b, e, p;

	while (mi_work_claim(&j->work, &b, &e))
		for (p = b; p < e; p++)
			kt->scale(j->x + p * f->plane_size, j->s[p],
				  j->y + p * f->plane_size, f->plane_size);
}

struct bmm_job {
	const struct fast_node *f;
	const float *a, *b;
	float *y;
};

static void bmm_thread(void *ctx, int t, int nt)
{
	const struct bmm_job *j = ctx;
	const struct fast_node *f = j->f;
	struct mi_sgemm_args ga = bmm_args(f);
	void *ws = (char *)f->ws->buf + f->ws_gemm * t;
	int64_t b, e, i;

	mi_chunk(f->nb, t, nt, &b, &e);
	for (i = b; i < e; i++) {
		ga.a = j->a + i * f->m * f->k;
		ga.b = j->b + i * f->bstride;
		ga.c = j->y + i * f->m * f->n;
		mi_sgemm(&ga, ws);
	}
}

static int fast_run(struct mi_graph *g, struct mi_node *n)
{
	struct fast_node *f = n->priv;
	struct mi_tensor *x = mi_in(g, n, 0), *y = mi_out(g, n, 0);
	const float *res = NULL;

	if (!x->data || !y->data)
		return mi_graph_err(g, n, -EINVAL, "fast kernel: missing data");
	if (f->kind == K_CHMUL) {
		struct chmul_job j = {
			.f = f,
			.x = mi_in(g, n, 1 - f->res_slot)->data,
			.s = mi_in(g, n, f->res_slot)->data,
			.y = y->data,
		};
		int64_t tot = f->planes * f->plane_size;
		int nt = tot < 65536 ? 1 : pool_threads(f);

		if (!j.x || !j.s ||
		    mi_tensor_numel(mi_in(g, n, 1 - f->res_slot)) != tot)
			return mi_graph_err(g, n, -EINVAL,
					    "fast kernel planned for another input shape");
		mi_work_init(&j.work, f->planes, mi_work_grain(f->planes, nt, 4));
		mi_pool_run(nt, chmul_thread, &j);
		return 0;
	}
	if (f->res_slot >= 0) {
		res = mi_in(g, n, f->res_slot)->data;
		if (!res)
			return mi_graph_err(g, n, -EINVAL,
					    "fast kernel: missing residual");
	}
	if (f->kind == K_POOL || f->kind == K_GPOOL) {
		struct pool_job j = { .f = f, .x = x->data, .y = y->data };
		int nt = f->kind == K_POOL ? pool_threads(f) :
			 (f->planes * f->plane_size < 32768 ? 1 :
							     pool_threads(f));

		if (mi_tensor_numel(x) != f->planes * f->plane_size)
			return mi_graph_err(g, n, -EINVAL,
					    "fast kernel planned for another input shape");
		mi_work_init(&j.work, f->planes, mi_work_grain(f->planes, nt, 4));
		mi_pool_run(nt, pool_thread, &j);
		return 0;
	}
	if (f->kind == K_BMM) {
		struct mi_tensor *b = mi_in(g, n, 1);
		struct bmm_job j = { .f = f, .a = x->data, .b = b->data,
				     .y = y->data };

		if (!b->data || mi_tensor_numel(x) != f->nb * f->m * f->k)
			return mi_graph_err(g, n, -EINVAL,
					    "fast kernel planned for another input shape");
		mi_pool_run(f->nb < f->nthreads ? (int)f->nb : f->nthreads,
			    bmm_thread, &j);
		return 0;
	}
	if (f->kind == K_CONV) {
		if (x->ndim != 4 || memcmp(x->dims, f->xdims, sizeof(f->xdims)))
			return mi_graph_err(g, n, -EINVAL,
					    "fast kernel planned for another input shape");
		mi_conv_run(&f->cv, x->data, y->data, res, f->act, f->lo,
			    f->hi, f->ws->buf);
		return 0;
	}
	{
		struct mi_sgemm_args ga = { 0 };

		if (mi_tensor_numel(x) != f->m * f->k)
			return mi_graph_err(g, n, -EINVAL,
					    "fast kernel planned for another input shape");
		ga.isa = f->pb.isa;
		ga.m = f->m, ga.n = f->n, ga.k = f->k;
		ga.a = x->data, ga.a_rs = f->a_rs, ga.a_cs = f->a_cs;
		ga.pb = &f->pb;
		ga.c = y->data, ga.ldc = f->n;
		ga.epi.bias_kind = f->bias ? f->bias_kind : MI_BIAS_NONE;
		ga.epi.bias = f->bias;
		ga.epi.res = res;
		ga.epi.ldr = f->n;
		ga.epi.act = f->act;
		ga.epi.lo = f->lo;
		ga.epi.hi = f->hi;
		ga.nthreads = f->nthreads;
		mi_sgemm(&ga, f->ws->buf);
	}
	return 0;
}

static void fast_fini(struct mi_graph *g, struct mi_node *n)
{
	struct fast_node *f = n->priv;

	/* undo the fusion */
	for (int i = 0; i < f->nabsorbed; i++)
		g->nodes[f->absorbed[i]].dead = false;
	n->outputs[0] = f->orig_out;
	if (f->orig_inputs) {
		free(n->inputs);
		n->inputs = f->orig_inputs;
	}
	n->ninputs = f->orig_ninputs;
	if (f->ws && --f->ws->refs == 0) {
		mi_cpu_free(f->ws->buf);
		free(f->ws);
	}
	fast_free(f);
}

int mi_cpu_node_run(struct mi_graph *g, struct mi_node *n)
{
	const struct mi_cpu_kernel_hdr *h = n->priv;

	if (!h || !h->run)
		return mi_graph_err(g, n, -EINVAL, "no fast kernel planned");
	return h->run(g, n);
}

void mi_cpu_plan_fini(struct mi_graph *g)
{
	bool undone = false;

	/* reverse order: later fusions may have rewired earlier ones' uses */
	for (int i = g->nnodes - 1; i >= 0; i--) {
		struct mi_node *n = &g->nodes[i];
		const struct mi_cpu_kernel_hdr *h = n->priv;

		if (!h)
			continue;
		if (h->fini)
			h->fini(g, n);
		n->priv = NULL;
		undone = true;
	}
	if (undone)
		mi_graph_toposort(g);
}
