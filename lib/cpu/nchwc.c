// SPDX-License-Identifier: MIT
/*
 * Blocked-layout (NCHWc) planner pass and node runners.
 *
 * mi_cpu_plan_nchwc() runs before the NCHW planner.  It
 *  1. marks the live fp32 nodes that have an NCHWc kernel: Conv (groups 1:
 *     direct convolution; groups == channels: depthwise), MaxPool /
 *     AveragePool, GlobalAveragePool, the squeeze-excitation channel scale
 *     Mul(x [N,C,H,W], s [N,C,1,1]) and same-shape Add; lib/quant's
 *     standalone DequantizeLinear nodes (and float-output int8 tables)
 *     count as producers of a blocked tensor and its QuantizeLinear nodes
 *     writing C4 as readers (mi_quant_qdq_kind): they stay lib/quant's
 *     nodes and are told their fp32 side's layout (mi_quant_qdq_set_blocked),
 *     so the fp32 islands of mixed int8 files run as blocked chains;
 *  2. fuses into each convolution its single-consumer residual Add and
 *     activation (Relu, Clip, HardSwish, Sigmoid, x*sigmoid(x)), as the
 *     NCHW planner does;
 *  3. propagates the layout: a tensor is blocked when its producer and
 *     every consumer are marked and accept a blocked operand in that slot
 *     and it is not a graph output.  Depthwise, pooling, the channel scale
 *     and Add need a blocked input: a marked node whose input is not
 *     blocked is unmarked, and so is a direct convolution with neither
 *     input nor output blocked (nothing gained over the NCHW kernels);
 *     repeated until nothing changes.  Chains therefore start at a direct
 *     convolution (which reads NCHW natively: it is the reorder) and end
 *     at a node that writes NCHW (lane by lane) for its consumers;
 *  4. sets the blocked tensors' phys_bytes (channels rounded up to the
 *     block) for the arena planner, packs the weights, and claims the
 *     marked nodes (node->priv).
 * mi_cpu_plan_fini() undoes everything (fusions, phys_bytes) through
 * each node's fini.
 *
 * Which convolutions: every conv is marked; a 3x3 stride-1 conv that the
 * Winograd kernel takes (mi_cpu_wino_pays, plan.c) runs on the blocked
 * Winograd (struct mi_ncw, winograd.c; Winograd is ~2x the direct
 * convolution's FLOP rate there), or with MI_CPU_NC_WINO=0 stays NCHW.
 * MI_CPU_NCHWC=0 disables the pass.
 */
#include <errno.h>
#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "ops/ops.h"
#include "cpu/cpu.h"
#include "cpu/cpu_plan.h"
#include "cpu/nchwc.h"

enum { NC_NONE, NC_CONV, NC_DW, NC_GAP, NC_MUL, NC_ADD, NC_POOL, NC_CAT,
       NC_DQ, NC_Q };

/* lib/quant/qplan.c (weak: lib/quant may be absent): standalone
 * DequantizeLinear / QuantizeLinear nodes that write / read their fp32
 * side blocked when told (the quantized side in the int8 planner's
 * layout); they stay lib/quant's nodes. */
int mi_quant_qdq_kind(struct mi_graph *g, struct mi_node *n)
	__attribute__((weak));
void mi_quant_qdq_set_blocked(struct mi_graph *g, struct mi_node *n, int isa)
	__attribute__((weak));
/* ... an int8 conv (kind NC_DQ) that writes its fp32 output blocked takes
 * over the residual Add reading it (and the Add's activation): 0 done */
int mi_quant_conv_add(struct mi_graph *g, struct mi_node *n, struct mi_node *add,
		      int act_node, int act, float lo, float hi)
	__attribute__((weak));

#define NC_MAX_ABSORB 4

struct nc_ws {
	float *buf;
	size_t floats;
	int refs;
};

struct nc_node {
	struct mi_cpu_kernel_hdr hdr;
	int kind;
	const struct mi_nc_kern *k;
	struct mi_nc_conv p;
	struct mi_pool2d pool;
	int64_t xdims[4]; /* main input shape at planning */
	int nb, c, m;     /* batch, input / output channels */
	int64_t hw, ohw;
	int xblk, yblk, bblk; /* main input, output, 2nd operand layouts */
	int flat;         /* 1x1 s1 p0 conv planned as one row of h*w */
	/* conv work split (plan_split): sg x sr parts of block groups x
	 * position units, run as pieces, group-major (gmaj: a group's
	 * weights stay in L2 while it sweeps its units, nsub pieces per
	 * group) or unit-major (a unit's input stays in L2 while every
	 * group of the part sweeps it) */
	int mg, units, rb, sg, sr, gmaj, nsub;
	int steal; /* tests: the caller runs every part (takes from the back) */
	/* 3x3 stride-1 conv on Winograd's shapes: blocked Winograd (wgo set
	 * by classify, wino by finish) */
	int wgo;
	struct mi_ncw *wino;
	/* conv with pads: each image is first copied into a zero-padded
	 * map of ph x pw in the shared workspace (no edge tiles) */
	int pad, h0, w0, pt0, pl0, ph, pw;
	/* pad 2: a strided 1x1 conv's input subsampled (ssh x ssw) into
	 * the workspace; nosub (MI_CPU_NC_SUB=0) keeps the strided tiles */
	int ssh, ssw, nosub;
	struct nc_ws *ws;
	int slot2;        /* residual / scale / 2nd addend input slot, -1 */
	int act;
	float lo, hi;
	int nthreads;
	/* 1x1 conv that also runs its depthwise consumer (see fuse_xdw) */
	struct nc_node *xdw;
	int xdw_node, xdw_t; /* the depthwise node, the tensor between */
	int xg;              /* groups of expanded channel blocks */
	int xrows, xbands;   /* depthwise output rows per band, bands */
	size_t xslice;       /* floats of one thread's band buffer */
	/* 1x1 conv that also applies the channel scale Mul before it
	 * (fuse_semul): weights scaled per image into p.wp, from wsrc */
	struct nc_node *sem;
	int sem_node, sem_slot; /* the Mul node; the scale's input slot */
	int *sem_inputs, sem_ninputs; /* inputs before */
	const float *wsrc;
	/* undo */
	int orig_out, orig_ninputs;
	int *orig_inputs;
	int nabsorbed;
	int absorbed[NC_MAX_ABSORB];
	int phys_t; /* tensor whose phys_bytes this node set, -1 */
};

static bool is_op(const struct mi_node *n, const char *op)
{
	return !n->domain[0] && !strcmp(n->op_type, op);
}

static bool f32_4d(const struct mi_tensor *t)
{
	return t && t->dtype == MI_DT_FLOAT && mi_tensor_shape_known(t) &&
	       t->ndim == 4;
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

const struct mi_nc_kern *mi_nc_kern_get(int isa)
{
#ifdef __x86_64__
	if (isa == MI_ISA_AVX512)
		return &mi_nc_kern_avx512;
	if (isa == MI_ISA_AVX2)
		return &mi_nc_kern_avx2;
#endif
	(void)isa;
	return &mi_nc_kern_generic;
}

float *mi_nc_pack_weights(int b, int dw, int m, int c, int kh, int kw,
			  const float *w)
{
	int mb = (m + b - 1) / b;
	size_t n = dw ? (size_t)mb * kh * kw * b : (size_t)mb * kh * kw * c * b;
	float *p = mi_cpu_alloc(n * sizeof(float));

	if (!p)
		return NULL;
	memset(p, 0, n * sizeof(float));
	for (int o = 0; o < m; o++)
		for (int ky = 0; ky < kh; ky++)
			for (int kx = 0; kx < kw; kx++) {
				if (dw) {
					p[(((size_t)(o / b) * kh + ky) * kw + kx) * b +
					  o % b] = w[((size_t)o * kh + ky) * kw + kx];
					continue;
				}
				for (int i = 0; i < c; i++)
					p[((((size_t)(o / b) * kh + ky) * kw + kx) *
						   c + i) * b + o % b] =
						w[(((size_t)o * c + i) * kh + ky) * kw + kx];
			}
	return p;
}

float *mi_nc_pack_bias(int b, int m, const float *bias)
{
	size_t n = (size_t)(m + b - 1) / b * b;
	float *p = mi_cpu_alloc(n * sizeof(float));

	if (!p)
		return NULL;
	memset(p, 0, n * sizeof(float));
	if (bias)
		memcpy(p, bias, m * sizeof(float));
	return p;
}

/* ---- classification -------------------------------------------------- */
int32_t *mi_nc_tap_offsets(const struct mi_nc_conv *p)
{
	int64_t nk = (int64_t)p->c * p->kh * p->kw;
	int64_t hw = (int64_t)p->h * p->w;
	int32_t *t;

	if (p->xblk || p->kh * p->kw < 2 || p->sw > 2 || nk > MI_NC_KOFF_MAX ||
	    (int64_t)p->c * hw > INT32_MAX)
		return NULL;
	t = mi_cpu_alloc((size_t)nk * sizeof(*t));
	if (!t)
		return NULL;
	for (int ky = 0; ky < p->kh; ky++)
		for (int kx = 0; kx < p->kw; kx++)
			for (int ic = 0; ic < p->c; ic++)
				t[(ky * p->kw + kx) * p->c + ic] =
					(int32_t)(ic * hw +
						  (int64_t)ky * p->dh * p->w +
						  kx * p->dw);
	return t;
}

static int conv_shape(struct mi_graph *g, struct mi_node *n,
		      struct mi_conv_shape *s)
{
	struct mi_tensor *x = mi_in(g, n, 0), *w = mi_in(g, n, 1);
	struct mi_tensor *b = mi_in(g, n, 2), *y = mi_out(g, n, 0);
	struct mi_spatial sp = { 0 };
	char saved[sizeof(g->err)];
	int err;

	if (!f32_4d(x) || !is_const(w) || w->dtype != MI_DT_FLOAT ||
	    w->ndim != 4 || !f32_4d(y) || n->ninputs > 3)
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
	*s = (struct mi_conv_shape){
		.n = (int)x->dims[0], .c = (int)x->dims[1],
		.h = (int)x->dims[2], .w = (int)x->dims[3],
		.m = (int)w->dims[0], .kh = (int)w->dims[2],
		.kw = (int)w->dims[3],
		.group = (int)mi_attr_int(n, "group", 1),
		.sh = (int)sp.stride[0], .sw = (int)sp.stride[1],
		.dh = (int)sp.dil[0], .dw = (int)sp.dil[1],
		.pt = (int)sp.pad_begin[0], .pl = (int)sp.pad_begin[1],
		.pb = (int)sp.pad_end[0], .pr = (int)sp.pad_end[1],
		.oh = (int)y->dims[2], .ow = (int)y->dims[3],
	};
	if (s->group < 1 || s->c % s->group || s->m % s->group ||
	    w->dims[1] * s->group != s->c || y->dims[0] != s->n ||
	    y->dims[1] != s->m || sp.out[0] != s->oh || sp.out[1] != s->ow ||
	    s->pt < 0 || s->pl < 0 || s->pb < 0 || s->pr < 0 || s->sh < 1 ||
	    s->sw < 1 || s->dh < 1 || s->dw < 1 || s->oh < 1 || s->ow < 1)
		return -EOPNOTSUPP;
	if (s->group == 1)
		return NC_CONV;
	if (s->group == s->c && s->m == s->c)
		return NC_DW;
	return -EOPNOTSUPP;
}

/*
 * Direct convolution vs the NCHW kernels (build/mi-cpu-bench -f nchwc,
 * AVX-512, 1 thread): faster everywhere except (a) Winograd's shapes and
 * (b) KxK convs whose weights per register tile of output blocks
 * (kh*kw*c*ob*B floats, streamed once per row tile) outgrow the L2:
 * 3x3 c=512 on 7x7 ran at 55 GFLOP/s vs im2col's 84, c=256 at 115 vs
 * 106 (590 KiB).
 */
static bool direct_pays(const struct mi_conv_shape *s,
			const struct mi_nc_kern *k)
{
	int64_t mt = s->m < k->ob * k->b ? s->m : k->ob * k->b;

	if (mi_cpu_wino_pays(s))
		return false;
	/* narrow maps: tiles across rows reuse each weight vector for a
	 * full register tile (3x3 c=512 on 7x7: 1.9 vs im2col's 3.1 ms) */
	if (s->ow < MI_NC_FLAT_W)
		return true;
	return (int64_t)s->kh * s->kw * s->c * mt * 4 <= (1 << 20);
}

static int pool_shape(struct mi_graph *g, struct mi_node *n,
		      struct mi_pool2d *p)
{
	struct mi_tensor *x = mi_in(g, n, 0), *y = mi_out(g, n, 0);
	struct mi_spatial sp = { 0 };
	char saved[sizeof(g->err)];
	const int64_t *ks;
	int nk = 0, err;

	if (!f32_4d(x) || !f32_4d(y) || n->noutputs != 1)
		return -EOPNOTSUPP;
	ks = mi_attr_ints(n, "kernel_shape", &nk);
	if (!ks || nk != 2 || ks[0] < 1 || ks[1] < 1 || ks[0] > 64 || ks[1] > 64)
		return -EOPNOTSUPP;
	sp.kernel[0] = ks[0];
	sp.kernel[1] = ks[1];
	memcpy(saved, g->err, sizeof(saved));
	err = mi_ops_spatial(g, n, &sp, x, 1);
	memcpy(g->err, saved, sizeof(saved));
	if (err || sp.nsp != 2 || sp.dil[0] != 1 || sp.dil[1] != 1 ||
	    sp.stride[0] != sp.stride[1] || sp.out[0] != y->dims[2] ||
	    sp.out[1] != y->dims[3] || y->dims[0] != x->dims[0] ||
	    y->dims[1] != x->dims[1] || sp.pad_begin[0] < 0 ||
	    sp.pad_begin[1] < 0 || sp.pad_end[0] < 0 || sp.pad_end[1] < 0)
		return -EOPNOTSUPP;
	*p = (struct mi_pool2d){
		.ih = (int)x->dims[2], .iw = (int)x->dims[3],
		.oh = (int)y->dims[2], .ow = (int)y->dims[3],
		.kh = (int)ks[0], .kw = (int)ks[1], .s = (int)sp.stride[0],
		.pt = (int)sp.pad_begin[0], .pl = (int)sp.pad_begin[1],
		.pb = (int)sp.pad_end[0], .pr = (int)sp.pad_end[1],
		.avg = is_op(n, "AveragePool"),
		.include_pad = (int)mi_attr_int(n, "count_include_pad", 0),
	};
	/* a window entirely in the padding has no ONNX max */
	if (!p->avg && (p->pt >= p->kh || p->pl >= p->kw))
		return -EOPNOTSUPP;
	return NC_POOL;
}

/*
 * A channel Concat of 4-D tensors whose channel counts are all multiples
 * of the block is the same bytes in NCHW and in NCHWc (per image, input
 * k's blocks follow the blocks before it): the NCHW Concat kernel (and
 * the in-place Concat of exec.c) serves blocked tensors unchanged, so the
 * node passes the layout through and is not claimed (NC_CAT).
 */
static bool concat_blocks(struct mi_graph *g, struct mi_node *n, int b)
{
	struct mi_tensor *y = mi_out(g, n, 0);
	int64_t axis = mi_attr_int(n, "axis", 0), c = 0;

	if (n->ninputs < 1 || (axis != 1 && axis != -3))
		return false;
	for (int i = 0; i < n->ninputs; i++) {
		struct mi_tensor *x = mi_in(g, n, i);

		if (!f32_4d(x) || x->dims[1] % b || x->dims[0] != y->dims[0] ||
		    x->dims[2] != y->dims[2] || x->dims[3] != y->dims[3])
			return false;
		c += x->dims[1];
	}
	return c == y->dims[1];
}

/* Winograd's convs run blocked (mi_ncw): 1, or 0 (MI_CPU_NC_WINO=0) they
 * stay on the NCHW planner's Winograd. */
static int nc_wino = 1;

/* Kind of node n (or NC_NONE); fills f's shape fields. */
static int classify(struct mi_graph *g, struct mi_node *n, struct nc_node *f)
{
	struct mi_tensor *y = mi_out(g, n, 0), *a, *b;

	if (!n->dead && n->priv && mi_quant_qdq_kind && mi_quant_qdq_set_blocked) {
		int k = mi_quant_qdq_kind(g, n);

		f->slot2 = -1;
		return k == 1 ? NC_DQ : k == 2 ? NC_Q : NC_NONE;
	}
	if (n->dead || n->priv || n->noutputs != 1 || n->domain[0] ||
	    !f32_4d(y) || y->data)
		return NC_NONE;
	f->slot2 = -1;
	if (is_op(n, "Conv")) {
		struct mi_conv_shape s;
		int kind = conv_shape(g, n, &s);

		if (kind < 0)
			return NC_NONE;
		if (kind == NC_CONV && !direct_pays(&s, f->k)) {
			/* Winograd's shapes: the blocked Winograd */
			if (!nc_wino || !mi_cpu_wino_pays(&s))
				return NC_NONE;
			f->wgo = 1;
		}
		f->p = (struct mi_nc_conv){
			.c = s.c, .h = s.h, .w = s.w, .m = s.m, .oh = s.oh,
			.ow = s.ow, .kh = s.kh, .kw = s.kw, .sh = s.sh,
			.sw = s.sw, .dh = s.dh, .dw = s.dw, .pt = s.pt,
			.pl = s.pl,
		};
		f->nb = s.n;
		f->c = s.c;
		f->m = s.m;
		return kind;
	}
	if (is_op(n, "Concat"))
		return concat_blocks(g, n, f->k->b) ? NC_CAT : NC_NONE;
	a = mi_in(g, n, 0);
	if (!f32_4d(a))
		return NC_NONE;
	f->nb = (int)a->dims[0];
	f->c = f->m = (int)a->dims[1];
	f->hw = a->dims[2] * a->dims[3];
	f->ohw = y->dims[2] * y->dims[3];
	if (is_op(n, "GlobalAveragePool"))
		return y->dims[2] == 1 && y->dims[3] == 1 ? NC_GAP : NC_NONE;
	if (is_op(n, "MaxPool") || is_op(n, "AveragePool"))
		return pool_shape(g, n, &f->pool) < 0 ? NC_NONE : NC_POOL;
	if (n->ninputs != 2 || !f32_4d(b = mi_in(g, n, 1)))
		return NC_NONE;
	if (is_op(n, "Add"))
		return same_shape(a, y) && same_shape(b, y) ? NC_ADD : NC_NONE;
	if (is_op(n, "Mul")) {
		int xs = same_shape(a, y) ? 0 : 1;
		struct mi_tensor *x = xs ? b : a, *s = xs ? a : b;

		if (!same_shape(x, y) || s->dims[0] != x->dims[0] ||
		    s->dims[1] != x->dims[1] || s->dims[2] != 1 ||
		    s->dims[3] != 1 || f->ohw < 2)
			return NC_NONE;
		f->hw = f->ohw;
		f->slot2 = 1 - xs;
		return NC_MUL;
	}
	return NC_NONE;
}

/* ---- fusion (plan.c's helpers: mi_cpu_depends/consumers/act_of) ------- */
static void absorb(struct mi_graph *g, struct mi_node *n, struct nc_node *f,
		   int ci)
{
	struct mi_node *c = &g->nodes[ci];

	f->absorbed[f->nabsorbed++] = ci;
	c->dead = true;
	n->outputs[0] = c->outputs[0];
	g->tensors[n->outputs[0]].producer = (int)(n - g->nodes);
}

static int add_residual(struct mi_node *n, struct nc_node *f, int t)
{
	int *in = malloc(4 * sizeof(int));

	if (!in)
		return -ENOMEM;
	for (int i = 0; i < 3; i++)
		in[i] = i < n->ninputs ? n->inputs[i] : -1;
	in[3] = t;
	f->orig_inputs = n->inputs;
	n->inputs = in;
	n->ninputs = 4;
	f->slot2 = 3;
	return 0;
}

static int fuse(struct mi_graph *g, struct mi_node *n, struct nc_node *f)
{
	int ni = (int)(n - g->nodes);

	while (f->nabsorbed < NC_MAX_ABSORB - 1 && f->act == MI_ACT_NONE) {
		int t = n->outputs[0], cons[2], nc, act;
		struct mi_tensor *tt = &g->tensors[t];
		struct mi_node *c;
		float lo = 0, hi = 0;

		if (tt->flags & MI_TF_OUTPUT)
			break;
		nc = mi_cpu_consumers(g, t, cons, 2);
		if (nc == 2) {
			int sgi, muli;

			if (!mi_cpu_silu_pair(g, t, cons, &sgi, &muli) ||
			    g->nodes[sgi].priv || g->nodes[muli].priv)
				break;
			f->act = MI_ACT_SILU;
			absorb(g, n, f, sgi);
			absorb(g, n, f, muli);
			break;
		}
		if (nc != 1)
			break;
		c = &g->nodes[cons[0]];
		if (c->priv || c->noutputs != 1 ||
		    !same_shape(mi_out(g, c, 0), tt) ||
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
		if (is_op(c, "Add") && c->ninputs == 2 && f->slot2 < 0) {
			int other = c->inputs[0] == t ? c->inputs[1] : c->inputs[0];
			struct mi_tensor *ot = &g->tensors[other];
			int cyc;

			if (other == t || !f32_4d(ot) || !same_shape(ot, tt))
				break;
			cyc = mi_cpu_depends(g, other, ni);
			if (cyc < 0)
				return cyc;
			if (cyc)
				break;
			if (add_residual(n, f, other))
				return -ENOMEM;
			absorb(g, n, f, cons[0]);
			continue;
		}
		break;
	}
	return 0;
}

static void unfuse(struct mi_graph *g, struct mi_node *n, struct nc_node *f)
{
	for (int i = f->nabsorbed - 1; i >= 0; i--) {
		struct mi_node *c = &g->nodes[f->absorbed[i]];

		c->dead = false;
		g->tensors[c->outputs[0]].producer = f->absorbed[i];
	}
	n->outputs[0] = f->orig_out;
	g->tensors[f->orig_out].producer = (int)(n - g->nodes);
	if (f->orig_inputs) {
		free(n->inputs);
		n->inputs = f->orig_inputs;
		f->orig_inputs = NULL;
	}
	n->ninputs = f->orig_ninputs;
	f->nabsorbed = 0;
}

/* ---- layout propagation ----------------------------------------------- */
/* Does node (kind, f) accept a blocked tensor in input slot j? */
static bool accepts(int kind, const struct nc_node *f, int j)
{
	switch (kind) {
	case NC_CONV:
	case NC_DW:
		return j == 0 || j == f->slot2;
	case NC_GAP:
	case NC_POOL:
	case NC_Q:
		return j == 0;
	case NC_MUL:
		return j != f->slot2;
	case NC_ADD:
	case NC_CAT:
		return true;
	default:
		return false;
	}
}

static bool produces_blocked(int kind)
{
	return kind == NC_CONV || kind == NC_DW || kind == NC_MUL ||
	       kind == NC_ADD || kind == NC_POOL || kind == NC_CAT ||
	       kind == NC_DQ;
}

static int nc_cb(int c, int b)
{
	return (c + b - 1) / b;
}

static bool tensor_blocked(struct mi_graph *g, int t, const int *kind,
			   struct nc_node **fs, int b)
{
	struct mi_tensor *tt = &g->tensors[t];
	int uses = 0;

	if (tt->producer < 0 || !produces_blocked(kind[tt->producer]) ||
	    (tt->flags & MI_TF_OUTPUT) || tt->ndim != 4)
		return false;
	/* padding at most half the channels (8 of 16: half of every vector
	 * and of the tensor's memory wasted) */
	if (2 * nc_cb((int)tt->dims[1], b) * b > 3 * tt->dims[1])
		return false;
	for (int i = 0; i < g->nnodes; i++) {
		struct mi_node *n = &g->nodes[i];

		if (n->dead)
			continue;
		for (int j = 0; j < n->ninputs; j++) {
			if (n->inputs[j] != t)
				continue;
			if (!kind[i] || !accepts(kind[i], fs[i], j))
				return false;
			uses++;
		}
	}
	return uses > 0;
}

/* ---- run ---------------------------------------------------------------- */
struct nc_job {
	const struct nc_node *f;
	const float *x, *b;
	float *y;
	int64_t items;
	int pad; /* conv: the padding copy */
	struct mi_work w;
};

/* Per-image element counts of the tensors in their layouts. */
static int64_t img_size(int c, int64_t hw, int blk, int b)
{
	return (blk ? (int64_t)nc_cb(c, b) * b : c) * hw;
}

/* Items [b, e) of job j (run on nt threads). */
static void nc_range(const struct nc_job *j, int64_t b, int64_t e, int nt)
{
	const struct nc_node *f = j->f;
	const struct mi_nc_kern *k = f->k;
	const int B = k->b;
	int64_t i;

	if (f->kind == NC_CONV && j->pad && f->pad == 2) {
		/* items: planes of the input image, every sh-th row and
		 * sw-th column copied into an ph x pw plane */
		int esz = f->xblk ? B : 1;

		for (i = b; i < e; i++) {
			const float *xp = j->x + i * f->h0 * f->w0 * esz;
			float *yp = j->y + i * f->ph * f->pw * esz;

			for (int r = 0; r < f->ph; r++) {
				const float *s = xp + (size_t)r * f->ssh * f->w0 * esz;
				float *d = yp + (size_t)r * f->pw * esz;

				/* constant sizes: inlined vector moves */
#define NC_SUBCOPY(E)                                                     \
	for (int q = 0; q < f->pw; q++)                                   \
		memcpy(d + (size_t)q * (E), s + (size_t)q * f->ssw * (E), \
		       (E) * sizeof(float))
				switch (esz) {
				case 16: NC_SUBCOPY(16); break;
				case 8: NC_SUBCOPY(8); break;
				case 4: NC_SUBCOPY(4); break;
				default: NC_SUBCOPY(1); break;
				}
#undef NC_SUBCOPY
			}
		}
		return;
	}
	if (f->kind == NC_CONV && j->pad) {
		/* items: planes of the input image */
		int esz = f->xblk ? B : 1;

		for (i = b; i < e; i++) {
			const float *xp = j->x + i * f->h0 * f->w0 * esz;
			float *yp = j->y + i * f->ph * f->pw * esz;
			int r, rows = f->h0 < f->ph - f->pt0 ? f->h0 : f->ph - f->pt0;
			int cols = f->w0 < f->pw - f->pl0 ? f->w0 : f->pw - f->pl0;
			size_t rw = (size_t)f->pw * esz;

			memset(yp, 0, f->pt0 * rw * sizeof(float));
			for (r = 0; r < rows; r++) {
				float *d = yp + (f->pt0 + r) * rw;

				memset(d, 0, (size_t)f->pl0 * esz * sizeof(float));
				memcpy(d + f->pl0 * esz, xp + (size_t)r * f->w0 * esz,
				       (size_t)cols * esz * sizeof(float));
				memset(d + (f->pl0 + cols) * esz, 0,
				       (size_t)(f->pw - f->pl0 - cols) * esz *
					       sizeof(float));
			}
			memset(yp + (f->pt0 + rows) * rw, 0,
			       (size_t)(f->ph - f->pt0 - rows) * rw * sizeof(float));
		}
		return;
	}
	if (f->kind == NC_DW || f->kind == NC_POOL) {
		/* items: image x channel block x output row */
		int cb = nc_cb(f->c, B);
		int oh = f->kind == NC_DW ? f->p.oh : f->pool.oh;
		int64_t ohw = f->kind == NC_DW ? (int64_t)f->p.oh * f->p.ow :
			      (int64_t)f->pool.oh * f->pool.ow;
		int64_t xi = img_size(f->c, f->kind == NC_DW ?
				      (int64_t)f->p.h * f->p.w : f->hw, 1, B);
		int64_t yi = img_size(f->m, ohw, f->yblk, B);
		int64_t ri = img_size(f->m, ohw, f->bblk, B);

		for (i = b; i < e;) {
			int n = (int)(i / ((int64_t)cb * oh));
			int c = (int)(i / oh % cb), r0 = (int)(i % oh);
			int r1 = e - i < oh - r0 ? (int)(r0 + e - i) : oh;

			if (f->kind == NC_DW)
				k->dw(&f->p, j->x + n * xi,
				      j->b ? j->b + n * ri : NULL, j->y + n * yi, c,
				      c + 1, r0, r1);
			else
				k->pool(&f->pool, f->c, j->x + n * xi,
					j->y + n * yi, f->yblk, c, c + 1, r0, r1);
			i += r1 - r0;
		}
		return;
	}
	{
		/* items: image x channel block */
		int cb = nc_cb(f->c, B);
		int64_t xi = img_size(f->c, f->hw, 1, B);
		int64_t yi = img_size(f->c, f->hw, f->yblk, B);

		for (i = b; i < e; i++) {
			int n = (int)(i / cb), c = (int)(i % cb);

			if (f->kind == NC_GAP)
				k->gap(j->x + n * xi, f->c, f->hw, j->y + n * f->c,
				       c, c + 1);
			else if (f->kind == NC_MUL)
				k->chmul(j->x + n * xi, j->b + n * f->c, f->c,
					 f->hw, j->y + n * yi, f->yblk, c, c + 1);
			else
				k->add(j->x + n * xi, j->b + n * xi, f->c, f->hw,
				       j->y + n * yi, f->yblk, f->act, f->lo,
				       f->hi, c, c + 1);
		}
	}
}

/* Items are claimed dynamically (a late or descheduled thread leaves its
 * share to the others), about NC_PER ranges per thread. */
#define NC_PER 4

static void nc_thread(void *ctx, int t, int nt)
{
	struct nc_job *j = ctx;
	int64_t b, e;

	if (nt == 1) {
		nc_range(j, 0, j->items, 1);
		return;
	}
	while (mi_work_claim(&j->w, &b, &e))
		nc_range(j, b, e, nt);
}

static void nc_launch(struct nc_job *j, int nt)
{
	nt = nt < j->items ? nt : (int)j->items;
	nt = nt > 1 ? nt : 1;
	mi_work_init(&j->w, j->items, mi_work_grain(j->items, nt, NC_PER));
	mi_pool_run(nt, nc_thread, j);
}

/* Units [u0, u1) as positions: rows [*r0, *r1) x columns [*c0, *c1). */
static void nc_unit_span(const struct nc_node *f, int u0, int u1, int *r0,
			 int *r1, int *c0, int *c1)
{
	if (f->flat) {
		*r0 = 0;
		*r1 = 1;
		*c0 = (int)((int64_t)u0 * f->p.ow / f->units);
		*c1 = (int)((int64_t)u1 * f->p.ow / f->units);
	} else {
		*r0 = u0 * f->rb;
		*r1 = u1 * f->rb < f->p.oh ? u1 * f->rb : f->p.oh;
		*c0 = 0;
		*c1 = f->p.ow;
	}
}

/*
 * A conv's parts (plan_split) as pieces: thread t runs part t's pieces
 * from the front, then takes the pieces left in the other parts from
 * their back (a late or descheduled thread leaves its part's tail to the
 * others; the owner keeps its front, contiguous in weights and input).
 */
#define NC_MAXPART 64

struct nc_part {
	uint64_t fb; /* front | back << 32, only through __atomic builtins */
} __attribute__((aligned(64)));

struct nc_cjob {
	const struct nc_node *f;
	const float *x, *r;
	float *y;
	int np;
	struct nc_part part[NC_MAXPART];
};

/* Part p's output blocks [*b0, *b1), units [*u0, *u1); returns its
 * pieces (group-major: groups of up to ob blocks x nsub unit ranges). */
static int nc_part_span(const struct nc_node *f, int p, int *b0, int *b1,
			int *u0, int *u1)
{
	int pg = p / f->sr, pr = p % f->sr, mb = nc_cb(f->m, f->k->b);

	*b0 = pg * mb / f->sg;
	*b1 = (pg + 1) * mb / f->sg;
	*u0 = (int)((int64_t)pr * f->units / f->sr);
	*u1 = (int)((int64_t)(pr + 1) * f->units / f->sr);
	if (f->gmaj)
		return (*b1 - *b0 + f->k->ob - 1) / f->k->ob *
		       (f->nsub < *u1 - *u0 ? f->nsub : *u1 - *u0);
	return *u1 - *u0;
}

static void nc_piece(const struct nc_cjob *j, int p, int k)
{
	const struct nc_node *f = j->f;
	const int ob = f->k->ob;
	int b0, b1, u0, u1, r0, r1, c0, c1;

	nc_part_span(f, p, &b0, &b1, &u0, &u1);
	if (f->gmaj) {
		int nu = u1 - u0, ns = f->nsub < nu ? f->nsub : nu;
		int s = k % ns;

		b0 += k / ns * ob;
		b1 = b0 + ob < b1 ? b0 + ob : b1;
		u1 = u0 + (s + 1) * nu / ns;
		u0 += s * nu / ns;
	} else {
		u0 += k;
		u1 = u0 + 1;
	}
	nc_unit_span(f, u0, u1, &r0, &r1, &c0, &c1);
	f->k->conv(&f->p, j->x, j->r, j->y, b0, b1, r0, r1, c0, c1);
}

/* Take a piece of part q: the front one (own) or the back one. */
static int nc_take(struct nc_part *q, bool front)
{
	uint64_t s = __atomic_load_n(&q->fb, __ATOMIC_RELAXED), n;
	uint32_t fr, bk;

	do {
		fr = (uint32_t)s;
		bk = (uint32_t)(s >> 32);
		if (fr >= bk)
			return -1;
		n = front ? s + 1 : s - (1ull << 32);
	} while (!__atomic_compare_exchange_n(&q->fb, &s, n, true,
					      __ATOMIC_RELAXED,
					      __ATOMIC_RELAXED));
	return front ? (int)fr : (int)bk - 1;
}

static void nc_conv_thread(void *ctx, int t, int nt)
{
	struct nc_cjob *j = ctx;
	int k;

	for (int i = 0; i < j->np; i++) {
		int p = (t + i) % j->np;

		while ((k = nc_take(&j->part[p], i == 0)) >= 0)
			nc_piece(j, p, k);
	}
}

static void nc_conv_launch(struct nc_cjob *j)
{
	const struct nc_node *f = j->f;
	int g0, g1, u0, u1;

	j->np = f->sg * f->sr;
	for (int p = 0; p < j->np; p++)
		__atomic_store_n(&j->part[p].fb,
				 (uint64_t)nc_part_span(f, p, &g0, &g1, &u0, &u1)
					 << 32,
				 __ATOMIC_RELAXED);
	if (f->steal)
		nc_conv_thread(j, 0, j->np);
	else
		mi_pool_run(j->np, nc_conv_thread, j);
}

/*
 * 1x1 conv + depthwise conv in one pass (fuse_xdw): an item is (image,
 * band of depthwise output rows, group of expanded channel blocks).  It
 * computes the expanded channels of the group for the input rows the band
 * needs into the thread's buffer (blocked, L2-sized), then the depthwise
 * rows from there: the expanded tensor never goes to memory, and each
 * thread reads only its own groups' weights.  Both kernels run unchanged
 * on re-based parameters: the group's channels start at block 0 (weights,
 * bias and depthwise output offset), the buffer holds input rows
 * [i0, i1) (the depthwise sees a map of i1 - i0 rows and top pad pt + i0;
 * rows outside [i0, i1) are padding or not needed by the band).
 */
struct nc_xjob {
	const struct nc_node *f;
	const float *x;
	float *y;
	struct mi_work w;
};

static void nc_xdw_thread(void *ctx, int t, int nt)
{
	struct nc_xjob *j = ctx;
	const struct nc_node *f = j->f, *d = f->xdw;
	const struct mi_nc_kern *k = f->k;
	const int B = k->b, cbe = nc_cb(f->m, B);
	const int H = d->p.h, W = d->p.w;
	const int64_t xi = img_size(f->c, (int64_t)H * W, f->xblk, B);
	const int64_t ohw = (int64_t)d->p.oh * d->p.ow;
	const int64_t yi = img_size(d->m, ohw, d->yblk, B);
	float *buf = f->ws->buf + (size_t)t * f->xslice;
	int64_t b, e, i;

	while (mi_work_claim(&j->w, &b, &e))
		for (i = b; i < e; i++) {
			int g = (int)(i % f->xg);
			int band = (int)(i / f->xg % f->xbands);
			int n = (int)(i / ((int64_t)f->xg * f->xbands));
			int g0 = g * cbe / f->xg, g1 = (g + 1) * cbe / f->xg;
			int r0 = band * f->xrows;
			int r1 = r0 + f->xrows < d->p.oh ? r0 + f->xrows : d->p.oh;
			int i0 = r0 * d->p.sh - d->p.pt;
			int i1 = (r1 - 1) * d->p.sh - d->p.pt +
				 (d->p.kh - 1) * d->p.dh + 1;
			struct mi_nc_conv pa = f->p, pd = d->p;

			i0 = i0 > 0 ? i0 : 0;
			i1 = i1 < H ? i1 : H;
			i1 = i1 > i0 ? i1 : i0;
			pa.ow = (i1 - i0) * W;
			pa.m = f->m - g0 * B < (g1 - g0) * B ? f->m - g0 * B :
							       (g1 - g0) * B;
			pa.wp += (size_t)g0 * f->p.kh * f->p.kw * f->p.c * B;
			pa.bias += (size_t)g0 * B;
			pa.yblk = 1;
			if (pa.ow)
				k->conv(&pa, j->x + n * xi + (int64_t)i0 * W *
							    (f->xblk ? B : 1),
					NULL, buf, 0, g1 - g0, 0, 1, 0, pa.ow);
			pd.h = i1 - i0;
			pd.pt = d->p.pt + i0;
			pd.c = pd.m = d->m - g0 * B;
			pd.wp += (size_t)g0 * d->p.kh * d->p.kw * B;
			pd.bias += (size_t)g0 * B;
			k->dw(&pd, buf, NULL, j->y + n * yi + (int64_t)g0 * B * ohw,
			      0, g1 - g0, r0, r1);
		}
}

static void nc_xdw_run(const struct nc_node *f, const float *x, float *y)
{
	const struct nc_node *d = f->xdw;
	struct nc_xjob j = { .f = f, .x = x, .y = y };
	int64_t items = (int64_t)f->nb * f->xbands * f->xg;
	double work = (double)f->nb * f->p.ow * f->m * f->c +
		      (double)f->nb * d->p.oh * d->p.ow * d->c * d->p.kh * d->p.kw;
	int nt = work < 65536.0 ? 1 : f->nthreads;

	nt = nt < items ? nt : (int)items;
	/* items are a band of a group of channels: claimed one by one */
	mi_work_init(&j.w, items, nt > 1 ? 1 : items);
	mi_pool_run(nt, nc_xdw_thread, &j);
}

/* p.wp = wsrc with input channel ic scaled by s[ic] (fuse_semul). */
static void scale_weights(const struct nc_node *f, const float *s)
{
	const int B = f->k->b, c = f->c, mb = nc_cb(f->m, B);
	float *w = (float *)f->p.wp;

	for (int o = 0; o < mb; o++)
		for (int ic = 0; ic < c; ic++) {
			const float *a = f->wsrc + ((size_t)o * c + ic) * B;
			float *d = w + ((size_t)o * c + ic) * B;
			float sc = s[ic];

			for (int l = 0; l < B; l++)
				d[l] = a[l] * sc;
		}
}

static int nc_run(struct mi_graph *g, struct mi_node *n)
{
	const struct nc_node *f = n->priv;
	int xs = f->kind == NC_MUL ? 1 - f->slot2 : 0;
	struct mi_tensor *x = mi_in(g, n, xs), *y = mi_out(g, n, 0);
	struct mi_tensor *b = f->slot2 >= 0 ? mi_in(g, n, f->slot2) : NULL;
	struct nc_job j = { .f = f };
	int B = f->k->b, nt = f->nthreads;
	double work;

	if (!x->data || !y->data || (b && !b->data))
		return mi_graph_err(g, n, -EINVAL, "fast kernel: missing data");
	if (x->ndim != 4 || memcmp(x->dims, f->xdims, sizeof(f->xdims)))
		return mi_graph_err(g, n, -EINVAL,
				    "fast kernel planned for another input shape");
	j.x = x->data;
	j.b = b ? b->data : NULL;
	j.y = y->data;
	if (f->xdw) {
		nc_xdw_run(f, x->data, y->data);
		return 0;
	}
	if (f->kind == NC_CONV) {
		int64_t xi = img_size(f->c, (int64_t)f->h0 * f->w0, f->xblk, B);
		int64_t yi = img_size(f->m, (int64_t)f->p.oh * f->p.ow, f->yblk, B);
		int64_t ri = img_size(f->m, (int64_t)f->p.oh * f->p.ow, f->bblk, B);
		const float *x0 = x->data, *r0 = j.b;
		struct nc_cjob cj = { .f = f };

		work = (double)f->p.oh * f->p.ow * f->m * f->c * f->p.kh *
		       f->p.kw;
		for (int i = 0; i < f->nb; i++) {
			if (f->sem)
				scale_weights(f, (const float *)mi_in(g, n,
						f->sem_slot)->data + (int64_t)i * f->c);
			cj.x = x0 + i * xi;
			cj.r = r0 ? r0 + i * ri : NULL;
			cj.y = (float *)y->data + i * yi;
			if (f->wino) {
				mi_ncw_run(f->wino, cj.x, cj.r, cj.y, f->ws->buf);
				continue;
			}
			if (f->pad) {
				struct nc_job pj = j;

				pj.x = cj.x;
				pj.pad = 1; /* f->pad: which copy */
				pj.y = f->ws->buf;
				pj.items = f->xblk ? nc_cb(f->c, B) : f->c;
				nc_launch(&pj, work < 65536.0 ? 1 : nt);
				cj.x = f->ws->buf;
			}
			nc_conv_launch(&cj);
		}
		return 0;
	}
	switch (f->kind) {
	case NC_DW:
		j.items = (int64_t)f->nb * nc_cb(f->c, B) * f->p.oh;
		work = (double)f->nb * f->p.oh * f->p.ow * f->c * f->p.kh *
		       f->p.kw;
		break;
	case NC_POOL:
		j.items = (int64_t)f->nb * nc_cb(f->c, B) * f->pool.oh;
		work = (double)f->nb * f->ohw * f->c * f->pool.kh * f->pool.kw;
		break;
	default:
		j.items = (int64_t)f->nb * nc_cb(f->c, B);
		work = (double)f->nb * f->hw * f->c;
		break;
	}
	nc_launch(&j, work < 65536.0 ? 1 : nt);
	return 0;
}

static void nc_fini(struct mi_graph *g, struct mi_node *n)
{
	struct nc_node *f = n->priv;

	if (f->xdw) {
		struct mi_node *d = &g->nodes[f->xdw_node];

		g->tensors[n->outputs[0]].producer = f->xdw_node;
		d->dead = false;
		n->outputs[0] = f->xdw_t;
		d->priv = f->xdw;
		nc_fini(g, d);
		d->priv = NULL;
		f->xdw = NULL;
	}
	if (f->sem) {
		struct mi_node *mn = &g->nodes[f->sem_node];

		mn->dead = false;
		free(n->inputs);
		n->inputs = f->sem_inputs;
		n->ninputs = f->sem_ninputs;
		mn->priv = f->sem;
		nc_fini(g, mn);
		mn->priv = NULL;
		f->sem = NULL;
		mi_cpu_free((void *)f->p.wp);
		f->p.wp = f->wsrc;
	}
	if (f->wino) {
		mi_ncw_fini(f->wino);
		free(f->wino);
	}
	unfuse(g, n, f);
	if (f->phys_t >= 0)
		g->tensors[f->phys_t].phys_bytes = 0;
	if (f->ws && --f->ws->refs == 0) {
		mi_cpu_free(f->ws->buf);
		free(f->ws);
	}
	mi_cpu_free((void *)f->p.wp);
	mi_cpu_free((void *)f->p.bias);
	mi_cpu_free((void *)f->p.koff);
	free(f);
}

/*
 * How the threads share a direct conv (one image).  Work is output blocks
 * (in groups of k->ob, the register tile's) x position units (bands of
 * rows, or chunks of ~48 pixels of a flat 1x1 conv), cut into sg x sr
 * rectangular parts, one per thread.  The choice minimizes the largest
 * part's cost: its FLOPs plus the bytes it must fetch from outside its
 * core's L2, weighted NC_FLOP_PER_BYTE (a core does ~150 GFLOP/s and
 * pulls ~20 GB/s from L3).  A part streams its groups' weights once if
 * they fit in the L2 budget or when it runs group-major, and its input
 * once if it fits or when it runs unit-major; so where weights dominate
 * (7x7 and 14x14 maps of 256-2048 channels) the threads split the output
 * channels and each keeps only its half of the weights, and where
 * activations dominate (56x56 maps) they split rows.
 */
#define NC_FLOP_PER_BYTE 8.0

static double nc_l2_budget(void)
{
	static double l2;

	if (!l2) {
		long v = sysconf(_SC_LEVEL2_CACHE_SIZE);

		/* half the L2: room for the input, output and the other
		 * operand of the tile */
		l2 = v > 0 ? (double)v / 2 : 512.0 * 1024;
	}
	return l2;
}

/* Cost of the largest part of an sg x sr split; *gmaj its best order. */
static int nc_tieu = 1;

static double split_cost(const struct nc_node *f, int sg, int sr, int *gmaj)
{
	const int B = f->k->b, mb = nc_cb(f->m, B);
	const double l2 = nc_l2_budget();
	int blocks = (mb + sg - 1) / sg, nu = (f->units + sr - 1) / sr;
	int ng = (blocks + f->k->ob - 1) / f->k->ob;
	int r0, r1, c0, c1, ih;
	double pos, flops, wp, xp, bg, bu;

	nc_unit_span(f, 0, nu, &r0, &r1, &c0, &c1);
	pos = (double)(r1 - r0) * (c1 - c0);
	flops = 2.0 * f->p.kh * f->p.kw * f->c * blocks * B * pos;
	wp = 4.0 * f->p.kh * f->p.kw * f->c * blocks * B;
	/* input rows the part reads */
	ih = (r1 - r0 - 1) * f->p.sh + (f->p.kh - 1) * f->p.dh + 1;
	ih = ih < f->p.h ? ih : f->p.h;
	xp = 4.0 * (f->xblk ? nc_cb(f->c, B) * B : f->c) * ih *
	     (f->flat ? (double)(c1 - c0) : f->p.w);
	bg = wp + xp * (xp <= l2 ? 1 : ng);
	bu = xp + wp * (wp <= l2 ? 1 : nu);
	/* ties of flat 1x1 convs: unit-major while the weights take at
	 * most half the budget (each unit's input stays in L1 for every
	 * group: ResNet-50's 64 -> 256 on 56x56 and 128 -> 512 on 28x28
	 * 1.3-1.4x faster than group-major at 1 thread), group-major above
	 * (1024 -> 256 on 14x14: 3-5 % faster); MI_CPU_NC_TIEU=0: always
	 * group-major (the old order) */
	*gmaj = f->flat ? bg < bu || (bg == bu && (!nc_tieu || wp > l2 / 2)) :
			  bg < bu;
	return flops / NC_FLOP_PER_BYTE + (*gmaj ? bg : bu);
}

/* MI_CPU_NC_SPLIT="<sg>x<sr><g|u>[s]" forces a split where it fits, and
 * with 's' the caller alone runs all parts (the others' from the back, as
 * when workers are late): tests.  MI_CPU_NC_VERBOSE=1 prints each split. */
#define NC_SPLIT_WBYTES (64 * 1024)
static void plan_split(struct nc_node *f)
{
	const int B = f->k->b, mb = nc_cb(f->m, B);
	const char *env = getenv("MI_CPU_NC_SPLIT");
	int nt = f->nthreads > 1 ? f->nthreads : 1, fsg = 0, fsr = 0;
	char fo = 0, fs = 0;
	double best = -1;

	/* as the other node runs: small convs stay on one thread, unless
	 * their weights alone (read once, mostly from beyond the L2: the
	 * squeeze-excitation FCs on 1x1 maps) take longer than a split */
	if ((double)f->p.oh * f->p.ow * f->m * f->c * f->p.kh * f->p.kw <
		    65536.0 &&
	    4.0 * f->m * f->c * f->p.kh * f->p.kw < NC_SPLIT_WBYTES)
		nt = 1;
	nt = nt < NC_MAXPART ? nt : NC_MAXPART;

	f->mg = (mb + f->k->ob - 1) / f->k->ob;
	f->rb = mi_nc_band_rows(f->p.oh, f->p.ow);
	f->units = f->flat ? (f->p.ow + 47) / 48 :
			     (f->p.oh + f->rb - 1) / f->rb;
	if (env && sscanf(env, "%dx%d%c%c", &fsg, &fsr, &fo, &fs) < 3)
		fsg = fsr = 0;
	f->steal = fs == 's';
	f->sg = f->sr = 1;
	for (int np = nt; np >= 1; np--)
		for (int sg = 1; sg <= np; sg++) {
			int sr = np / sg, gm;
			double c;

			if (sg * sr != np || sg > mb || sr > f->units)
				continue;
			c = split_cost(f, sg, sr, &gm);
			if (fsg && sg == fsg && sr == fsr) {
				best = 0;
				f->sg = sg;
				f->sr = sr;
				f->gmaj = fo == 'g';
			} else if (best < 0 || c < best) {
				best = c;
				f->sg = sg;
				f->sr = sr;
				f->gmaj = gm;
			}
		}
	/* group-major parts: enough pieces per part to rebalance */
	{
		int ng = ((mb + f->sg - 1) / f->sg + f->k->ob - 1) / f->k->ob;
		int nu = (f->units + f->sr - 1) / f->sr;

		f->nsub = f->sg * f->sr == 1 ? 1 : (NC_PER + ng - 1) / ng;
		f->nsub = f->nsub < nu ? f->nsub : nu;
		f->nsub = f->nsub > 1 ? f->nsub : 1;
	}
	if (getenv("MI_CPU_NC_VERBOSE"))
		fprintf(stderr,
			"nchwc conv c%d m%d %dx%d -> %dx%d k%dx%d: %d groups x %d units, split %dx%d %s-major, %d sub\n",
			f->c, f->m, f->p.h, f->p.w, f->p.oh, f->p.ow, f->p.kh,
			f->p.kw, f->mg, f->units, f->sg, f->sr,
			f->gmaj ? "group" : "unit", f->nsub);
}

/* The conv kernel's copy of f's layouts and activation. */
static void nc_conv_layouts(struct nc_node *f)
{
	f->p.xblk = f->xblk;
	f->p.yblk = f->yblk;
	f->p.rblk = f->bblk;
	f->p.act = f->act;
	f->p.lo = f->lo;
	f->p.hi = f->hi;
}

/* finish() for a conv on the blocked Winograd (f's layouts set). */
static int finish_wino(struct mi_graph *g, struct mi_node *n, struct nc_node *f,
		       struct nc_ws *ws)
{
	struct mi_tensor *w = mi_in(g, n, 1), *bs = mi_in(g, n, 2);
	int err;

	f->p.bias = mi_nc_pack_bias(f->k->b, f->m, bs ? bs->data : NULL);
	f->wino = calloc(1, sizeof(*f->wino));
	if (!f->p.bias || !f->wino)
		return -ENOMEM;
	nc_conv_layouts(f);
	f->h0 = f->p.h;
	f->w0 = f->p.w;
	err = mi_ncw_init(f->wino, f->k, &f->p, w->data, f->nthreads);
	if (err) {
		free(f->wino);
		f->wino = NULL;
		return err;
	}
	if (f->wino->ws_floats > ws->floats)
		ws->floats = f->wino->ws_floats;
	f->ws = ws;
	ws->refs++;
	if (getenv("MI_CPU_NC_VERBOSE"))
		fprintf(stderr,
			"nchwc winograd c%d m%d %dx%d: %d tiles, layouts %d%d%d\n",
			f->c, f->m, f->p.oh, f->p.ow, f->wino->nt, f->xblk,
			f->yblk, f->bblk);
	return 0;
}

/* Pack weights, set layouts; node n becomes f's. */
static int finish(struct mi_graph *g, struct mi_node *n, struct nc_node *f,
		  const char *blk, struct nc_ws *ws)
{
	const int B = f->k->b;
	int xs = f->kind == NC_MUL ? 1 - f->slot2 : 0;
	struct mi_tensor *x = mi_in(g, n, xs), *y = mi_out(g, n, 0);

	memcpy(f->xdims, x->dims, sizeof(f->xdims));
	f->xblk = blk[n->inputs[xs]];
	f->yblk = blk[n->outputs[0]];
	f->bblk = f->slot2 >= 0 && n->inputs[f->slot2] >= 0 ?
			  blk[n->inputs[f->slot2]] : 0;
	if (f->yblk) {
		f->phys_t = n->outputs[0];
		y->phys_bytes = (size_t)img_size(f->m, y->dims[2] * y->dims[3],
						 1, B) * f->nb * sizeof(float);
	}
	if (f->kind == NC_CONV && f->wgo)
		return finish_wino(g, n, f, ws);
	if (f->kind == NC_CONV || f->kind == NC_DW) {
		struct mi_tensor *w = mi_in(g, n, 1), *bs = mi_in(g, n, 2);
		const char *sub = getenv("MI_CPU_NC_SUB");

		f->p.wp = mi_nc_pack_weights(B, f->kind == NC_DW, f->m, f->c,
					     f->p.kh, f->p.kw, w->data);
		f->p.bias = mi_nc_pack_bias(B, f->m, bs ? bs->data : NULL);
		if (!f->p.wp || !f->p.bias)
			return -ENOMEM;
		nc_conv_layouts(f);
		f->nosub = sub && *sub == '0';
		f->h0 = f->p.h;
		f->w0 = f->p.w;
		if (f->kind == NC_CONV && f->p.kh == 1 && f->p.kw == 1 &&
		    (f->p.sh > 1 || f->p.sw > 1) && !f->p.pt && !f->p.pl &&
		    (f->p.oh - 1) * f->p.sh < f->p.h &&
		    (f->p.ow - 1) * f->p.sw < f->p.w && !f->nosub) {
			/* (an end pad that a sample would read: pad copy) */
			/* strided 1x1 (ResNet downsampling): the input's
			 * sampled pixels are copied into the workspace, the
			 * conv runs flat on them (full register tiles,
			 * contiguous input) */
			size_t fl = (size_t)(f->xblk ? nc_cb(f->c, B) * B : f->c) *
				    f->p.oh * f->p.ow;

			f->pad = 2;
			f->ssh = f->p.sh;
			f->ssw = f->p.sw;
			f->ph = f->p.h = f->p.oh;
			f->pw = f->p.w = f->p.ow;
			f->p.sh = f->p.sw = 1;
			if (fl > ws->floats)
				ws->floats = fl;
			f->ws = ws;
			ws->refs++;
		}
		if (f->kind == NC_CONV && f->p.kh == 1 && f->p.kw == 1 &&
		    f->p.sh == 1 && f->p.sw == 1 && !f->p.pt && !f->p.pl &&
		    f->p.oh == f->p.h && f->p.ow == f->p.w) {
			/* one row of h*w pixels: no row tails */
			f->flat = 1;
			f->p.w = f->p.ow = f->p.h * f->p.w;
			f->p.h = f->p.oh = 1;
		}
		if (!f->pad) {
			f->h0 = f->p.h;
			f->w0 = f->p.w;
		}
		if (f->kind == NC_CONV && !f->pad &&
		    (f->p.pt || f->p.pl ||
		     (f->p.oh - 1) * f->p.sh - f->p.pt + (f->p.kh - 1) * f->p.dh >= f->p.h ||
		     (f->p.ow - 1) * f->p.sw - f->p.pl + (f->p.kw - 1) * f->p.dw >= f->p.w)) {
			int eh = (f->p.oh - 1) * f->p.sh + (f->p.kh - 1) * f->p.dh + 1;
			int ew = (f->p.ow - 1) * f->p.sw + (f->p.kw - 1) * f->p.dw + 1;
			size_t fl;

			f->pad = 1;
			f->pt0 = f->p.pt;
			f->pl0 = f->p.pl;
			f->ph = eh > f->p.pt + f->p.h ? eh : f->p.pt + f->p.h;
			f->pw = ew > f->p.pl + f->p.w ? ew : f->p.pl + f->p.w;
			f->p.h = f->ph;
			f->p.w = f->pw;
			f->p.pt = f->p.pl = 0;
			fl = (size_t)(f->xblk ? nc_cb(f->c, B) * B : f->c) * f->ph *
			     f->pw;
			if (fl > ws->floats)
				ws->floats = fl;
			f->ws = ws;
			ws->refs++;
		}
		if (f->kind == NC_CONV) {
			/* NULL (not needed) on failure */
			f->p.koff = mi_nc_tap_offsets(&f->p);
			plan_split(f);
		}
	}
	return 0;
}

/*
 * A 1x1 conv whose blocked output is read only by a depthwise conv (the
 * expansion of an inverted residual) runs that depthwise conv too, band
 * by band (nc_xdw_thread).  Groups of XDW_GROUP channels; bands as tall
 * as fit XDW_BUF floats of buffer per group, unless the rows recomputed
 * at band edges would add more than a quarter to the 1x1 conv (then
 * nothing is fused).  MI_CPU_XDW=0 disables it, MI_CPU_XDW_ROWS=n forces
 * n output rows per band (tests).
 */
#define XDW_GROUP 64
#define XDW_BUF (96 * 1024)

static int xdw_in_rows(const struct mi_nc_conv *d, int rows)
{
	int r = (rows - 1) * d->sh + (d->kh - 1) * d->dh + 1;

	return r < d->h ? r : d->h;
}

static bool plan_xdw(struct nc_node *f, const struct nc_node *d,
		     int nthreads)
{
	const char *env = getenv("MI_CPU_XDW_ROWS");
	const int B = f->k->b, cbe = nc_cb(f->m, B);
	int gb = XDW_GROUP / B > f->k->ob ? XDW_GROUP / B : f->k->ob;
	int gmax, rows, bands;

	f->xg = (cbe + gb - 1) / gb;
	gmax = (cbe + f->xg - 1) / f->xg;
	if (env && atoi(env) > 0) {
		rows = atoi(env);
	} else {
		for (rows = d->p.oh; rows > 1; rows--)
			if ((int64_t)xdw_in_rows(&d->p, rows) * d->p.w * gmax * B <=
			    XDW_BUF)
				break;
	}
	rows = rows < d->p.oh ? rows : d->p.oh;
	bands = (d->p.oh + rows - 1) / rows;
	rows = (d->p.oh + bands - 1) / bands;
	if (!(env && atoi(env) > 0) &&
	    4 * (int64_t)bands * xdw_in_rows(&d->p, rows) > 5 * (int64_t)d->p.h)
		return false;
	f->xrows = rows;
	f->xbands = bands;
	if (nthreads > 1) {
		/* threads claim items one by one: the group count (up to
		 * 4x more, smaller groups) with the shortest makespan in
		 * block-bands, ceil(items / nt) x the largest group (11
		 * groups of 3-4 blocks on 2 threads: 6 x 4 = 24 for 21) */
		int best = f->xg;
		int64_t bm = -1;

		for (int xg = f->xg; xg <= cbe && xg <= 4 * f->xg; xg++) {
			int64_t items = (int64_t)f->nb * bands * xg;
			int64_t ms = (items + nthreads - 1) / nthreads *
				     ((cbe + xg - 1) / xg);

			if (bm < 0 || ms < bm) {
				bm = ms;
				best = xg;
			}
		}
		f->xg = best;
		gmax = (cbe + f->xg - 1) / f->xg;
	}
	f->xslice = ((size_t)xdw_in_rows(&d->p, rows) * d->p.w * gmax * B + 15) &
		    ~(size_t)15;
	return true;
}

static void fuse_xdw(struct mi_graph *g, struct nc_ws *ws, int nthreads)
{
	const char *env = getenv("MI_CPU_XDW");

	if (env && !strcmp(env, "0"))
		return;
	for (int ni = 0; ni < g->nnodes; ni++) {
		struct mi_node *n = &g->nodes[ni], *dn;
		const struct mi_cpu_kernel_hdr *h = n->priv;
		struct nc_node *f = n->priv, *d;
		int t = n->outputs[0], c;

		if (n->dead || !h || h->run != nc_run || f->kind != NC_CONV ||
		    !f->flat || f->pad || f->slot2 >= 0 || !f->yblk || f->xdw ||
		    (g->tensors[t].flags & MI_TF_OUTPUT) ||
		    mi_cpu_consumers(g, t, &c, 1) != 1)
			continue;
		dn = &g->nodes[c];
		h = dn->priv;
		d = dn->priv;
		if (!h || h->run != nc_run || d->kind != NC_DW || d->slot2 >= 0 ||
		    dn->inputs[0] != t || d->nb != f->nb || d->c != f->m ||
		    (int64_t)d->p.h * d->p.w != f->p.ow ||
		    !plan_xdw(f, d, nthreads))
			continue;
		if (getenv("MI_CPU_NC_VERBOSE"))
			fprintf(stderr,
				"nchwc xdw c%d m%d -> dw %dx%d k%dx%d s%d -> %dx%d: %d groups x %d bands of %d rows\n",
				f->c, f->m, d->p.h, d->p.w, d->p.kh, d->p.kw,
				d->p.sh, d->p.oh, d->p.ow, f->xg, f->xbands,
				f->xrows);
		f->xdw = d;
		f->xdw_node = c;
		f->xdw_t = t;
		dn->priv = NULL;
		dn->dead = true;
		n->outputs[0] = dn->outputs[0];
		g->tensors[n->outputs[0]].producer = ni;
		if (f->xslice * nthreads > ws->floats)
			ws->floats = f->xslice * nthreads;
		f->ws = ws;
		ws->refs++;
	}
}

/*
 * The squeeze-excitation scale Mul(x, s) read only by a 1x1 conv folds
 * into that conv: W (s * x) = (W diag(s)) x, so the conv scales a copy of
 * its weights by s (per image, c * m multiplies) and reads x, instead of
 * a pass that writes and rereads the whole scaled map.  Done where the
 * weights are at most half the map (m <= hw / 2).  MI_CPU_SEFOLD=0
 * disables it.
 */
static int fuse_semul(struct mi_graph *g)
{
	const char *env = getenv("MI_CPU_SEFOLD");

	if (env && !strcmp(env, "0"))
		return 0;
	for (int ni = 0; ni < g->nnodes; ni++) {
		struct mi_node *n = &g->nodes[ni], *mn;
		const struct mi_cpu_kernel_hdr *h = n->priv;
		struct nc_node *f = n->priv, *m;
		int t = n->ninputs > 0 ? n->inputs[0] : -1, pr, c, *in;
		size_t wn;
		float *wsc;

		if (n->dead || !h || h->run != nc_run || f->kind != NC_CONV ||
		    !f->flat || f->pad || f->xdw || f->sem || t < 0 ||
		    2 * (int64_t)f->m > f->p.ow ||
		    (g->tensors[t].flags & MI_TF_OUTPUT) ||
		    (pr = g->tensors[t].producer) < 0 ||
		    mi_cpu_consumers(g, t, &c, 1) != 1)
			continue;
		mn = &g->nodes[pr];
		h = mn->priv;
		m = mn->priv;
		if (mn->dead || !h || h->run != nc_run || m->kind != NC_MUL ||
		    m->nb != f->nb || m->c != f->c || !m->xblk)
			continue;
		wn = (size_t)nc_cb(f->m, f->k->b) * f->c * f->k->b;
		wsc = mi_cpu_alloc(wn * sizeof(float));
		in = malloc((n->ninputs + 1) * sizeof(int));
		if (!wsc || !in) {
			mi_cpu_free(wsc);
			free(in);
			return -ENOMEM;
		}
		memcpy(in, n->inputs, n->ninputs * sizeof(int));
		in[0] = mn->inputs[1 - m->slot2];
		in[n->ninputs] = mn->inputs[m->slot2];
		f->sem = m;
		f->sem_node = pr;
		f->sem_slot = n->ninputs;
		f->sem_inputs = n->inputs;
		f->sem_ninputs = n->ninputs;
		n->inputs = in;
		n->ninputs++;
		f->wsrc = f->p.wp;
		f->p.wp = wsc;
		f->xblk = f->p.xblk = 1;
		mn->priv = NULL;
		mn->dead = true;
	}
	return 0;
}

int mi_nc_kforce = -1;
int mi_nc_d3 = 1, mi_nc_r1 = 1;
/* 1x1 rows (nc1_rowk): L1 bytes of weights per input-channel chunk (0: no
 * chunks, -1: the plain nc1_row tiles with a tail), positions per sweep
 * (0: NC1_PB); MI_CPU_NC_KC1, MI_CPU_NC_PB1 (tests, A/B) */
int mi_nc_kc1 = 32 * 1024, mi_nc_pb1;

/*
 * A 1x1 stride-1 conv reading NCHW (a chain start) stays blocked when its
 * output's only reader is a depthwise conv, which needs a blocked input:
 * the pair then runs as one node (fuse_xdw) instead of both on the NCHW
 * kernels.  Such starts: ShuffleNet's channel shuffles, fp32 islands of
 * mixed int8 files after an int8 node writing NCHW fp32 (per-node CPU
 * time, 1 thread: ShuffleNetV2 fp32 4.1 -> 3.5 ms, seven depthwise convs
 * fused; MobileNetV2 min_cosine file features.4 0.47 -> 0.38 ms).
 * MI_CPU_NC_X1=0 turns it off.
 */
static bool x1_keep(struct mi_graph *g, struct mi_node *n, const struct nc_node *f,
		    const int *kind, const char *blk)
{
	int c[2];
	const char *e = getenv("MI_CPU_NC_X1");

	if (e && *e == '0')
		return false;
	if (!blk[n->outputs[0]]) {
		/* also one writing NCHW whose input is a blocked SE scale Mul
		 * read by it alone, where fuse_semul folds the Mul into it
		 * (mixed int8 files: the project conv of an fp32 block before
		 * an int8 one; EfficientNet-B0 min_cosine features.2.0 Mul +
		 * project 0.40 -> 0.22 ms).  MI_CPU_NC_X1SE=0 turns it off. */
		int t = n->inputs[0], p = g->tensors[t].producer;
		const char *se = getenv("MI_CPU_NC_X1SE");

		return !(se && *se == '0') && blk[t] && p >= 0 && kind[p] == NC_MUL &&
		       2 * (int64_t)f->m <= (int64_t)f->p.oh * f->p.ow &&
		       mi_cpu_consumers(g, t, c, 2) == 1;
	}
	return mi_cpu_consumers(g, n->outputs[0], c, 2) == 1 && kind[c[0]] == NC_DW;
}

/*
 * A blocked Add (node ai, f) whose operand is the blocked fp32 output of
 * an int8 conv (kind NC_DQ), read by nothing else, and whose other operand
 * is computed before that conv: the conv's epilogue adds it
 * (mi_quant_conv_add), no pass over the three tensors here.  The later
 * conv of two candidates (ResNet's downsample and conv3).  The Add's
 * absorbed activation goes with it.  true: the Add is lib/quant's now.
 */
static bool add_to_qconv(struct mi_graph *g, int ai, struct nc_node *f,
			 const int *kind, const char *blk)
{
	struct mi_node *n = &g->nodes[ai];
	int best = -1, bpos = -1, pos[2] = { -1, -1 }, a;

	if (!mi_quant_conv_add || f->nabsorbed > 1 || !blk[n->outputs[0]])
		return false;
	for (int s = 0; s < 2; s++) {
		int p = g->tensors[n->inputs[s]].producer;

		for (int o = 0; p >= 0 && o < g->norder; o++)
			if (g->order[o] == p)
				pos[s] = o;
	}
	for (int s = 0; s < 2; s++) {
		int t = n->inputs[s], p = g->tensors[t].producer;

		if (p < 0 || kind[p] != NC_DQ || !blk[t] || pos[s] < 0 ||
		    (g->tensors[t].flags & MI_TF_OUTPUT) ||
		    mi_graph_sole_consumer(g, t) != ai || pos[1 - s] >= pos[s] ||
		    pos[s] <= bpos)
			continue;
		best = p;
		bpos = pos[s];
	}
	if (best < 0)
		return false;
	a = f->nabsorbed ? f->absorbed[0] : -1;
	unfuse(g, n, f);
	if (!mi_quant_conv_add(g, &g->nodes[best], n, a, f->act, f->lo, f->hi))
		return true;
	if (a >= 0)
		absorb(g, n, f, a);
	return false;
}

int mi_cpu_plan_nchwc(struct mi_graph *g, int nthreads, int isa)
{
	const char *env = getenv("MI_CPU_NCHWC");
	const char *ks = getenv("MI_CPU_NC_KSPLIT");
	int *kind = NULL, err = 0;
	struct nc_node **fs = NULL;
	char *blk = NULL;
	struct nc_ws *ws;
	bool changed;

	if (env && !strcmp(env, "0"))
		return 0;
	if (ks)
		mi_nc_kforce = atoi(ks);
	ks = getenv("MI_CPU_NC_DW3");
	mi_nc_d3 = !(ks && *ks == '0');
	ks = getenv("MI_CPU_NC_ROW1");
	mi_nc_r1 = !(ks && *ks == '0');
	ks = getenv("MI_CPU_NC_KC1");
	if (ks)
		mi_nc_kc1 = atoi(ks);
	ks = getenv("MI_CPU_NC_PB1");
	if (ks)
		mi_nc_pb1 = atoi(ks);
	ks = getenv("MI_CPU_NC_TIEU");
	nc_tieu = !(ks && *ks == '0');
	ks = getenv("MI_CPU_NC_WINO");
	nc_wino = !(ks && *ks == '0');
	ws = calloc(1, sizeof(*ws));
	if (!ws)
		return -ENOMEM;
	kind = calloc(g->nnodes + 1, sizeof(*kind));
	fs = calloc(g->nnodes + 1, sizeof(*fs));
	blk = calloc(g->ntensors + 1, 1);
	if (!kind || !fs || !blk) {
		err = -ENOMEM;
		goto out;
	}
	for (int p = 0; p < g->norder; p++) {
		int ni = g->order[p];
		struct mi_node *n = &g->nodes[ni];
		struct nc_node *f = calloc(1, sizeof(*f));

		if (!f) {
			err = -ENOMEM;
			goto out;
		}
		f->k = mi_nc_kern_get(isa);
		if (n->dead || !(kind[ni] = classify(g, n, f))) {
			free(f);
			continue;
		}
		f->kind = kind[ni];
		f->k = mi_nc_kern_get(isa);
		f->nthreads = nthreads;
		f->phys_t = -1;
		f->orig_out = n->outputs[0];
		f->orig_ninputs = n->ninputs;
		f->hdr.run = nc_run;
		f->hdr.fini = nc_fini;
		fs[ni] = f;
		if ((kind[ni] == NC_CONV || kind[ni] == NC_DW) &&
		    !getenv("MI_CPU_NOFUSE")) {
			err = fuse(g, n, f);
			if (err)
				goto out;
		}
		if (kind[ni] == NC_ADD) {
			/* a following activation */
			int c[2];
			struct mi_tensor *tt = mi_out(g, n, 0);

			if (!(tt->flags & MI_TF_OUTPUT) &&
			    mi_cpu_consumers(g, n->outputs[0], c, 2) == 1 &&
			    !g->nodes[c[0]].priv &&
			    g->nodes[c[0]].noutputs == 1 &&
			    same_shape(mi_out(g, &g->nodes[c[0]], 0), tt) &&
			    (f->act = mi_cpu_act_of(g, &g->nodes[c[0]], &f->lo,
					     &f->hi)) > 0)
				absorb(g, n, f, c[0]);
			else
				f->act = MI_ACT_NONE;
			f->slot2 = 1;
		}
	}
	do {
		changed = false;
		for (int t = 0; t < g->ntensors; t++)
			blk[t] = tensor_blocked(g, t, kind, fs,
						 mi_nc_kern_get(isa)->b);
		for (int i = 0; i < g->nnodes; i++) {
			struct mi_node *n = &g->nodes[i];
			bool drop = false;

			if (!kind[i])
				continue;
			switch (kind[i]) {
			case NC_CONV:
				/* on a 1x1 map (squeeze-excitation FCs) NCHW
				 * and blocked are the same pixel: the lane by
				 * lane ends cost nothing, and the NCHW GEMM has
				 * N = 1 (edge tiles, B packed per call) */
				if (fs[i]->p.h * fs[i]->p.w == 1 &&
				    fs[i]->p.oh * fs[i]->p.ow == 1)
					break;
				/* at a chain boundary a 1x1 stride-1 conv reads
				 * or writes NCHW lane by lane where the NCHW
				 * GEMM streams it (ResNet-50, ShuffleNet ran
				 * slower): chains need more than that */
				drop = !blk[n->inputs[0]] && !blk[n->outputs[0]];
				if (fs[i]->p.kh == 1 && fs[i]->p.kw == 1 &&
				    fs[i]->p.sh == 1 && fs[i]->p.sw == 1 &&
				    (!blk[n->inputs[0]] || !blk[n->outputs[0]]) &&
				    !x1_keep(g, n, fs[i], kind, blk))
					drop = true;
				break;
			case NC_MUL:
				drop = !blk[n->inputs[1 - fs[i]->slot2]];
				break;
			case NC_ADD:
				drop = !blk[n->inputs[0]] || !blk[n->inputs[1]];
				break;
			case NC_CAT:
				drop = !blk[n->outputs[0]];
				for (int j = 0; j < n->ninputs; j++)
					drop |= !blk[n->inputs[j]];
				break;
			case NC_DQ: /* writes either layout */
				break;
			default:
				drop = !blk[n->inputs[0]];
				break;
			}
			if (drop) {
				kind[i] = NC_NONE;
				changed = true;
			}
		}
	} while (changed);
	/* unfuse the dropped ones first (their absorbed nodes come back) */
	for (int i = g->nnodes - 1; i >= 0; i--)
		if (fs[i] && !kind[i]) {
			unfuse(g, &g->nodes[i], fs[i]);
			free(fs[i]);
			fs[i] = NULL;
		}
	/* pass 1: the Adds, after every int8 conv was told its layout */
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < g->nnodes; i++) {
			if (!fs[i] || (kind[i] == NC_ADD) != pass)
				continue;
			if (kind[i] == NC_DQ || kind[i] == NC_Q) {
				/* lib/quant's node: told its fp32 side's layout */
				struct mi_node *n = &g->nodes[i];

				if (blk[kind[i] == NC_DQ ? n->outputs[0] : n->inputs[0]])
					mi_quant_qdq_set_blocked(g, n, isa);
			}
			/* a Concat passes the layout through, run by the NCHW
			 * kernel; lib/quant's nodes and the Adds it takes over
			 * are not the NCHWc pass's either */
			if (kind[i] == NC_DQ || kind[i] == NC_Q || kind[i] == NC_CAT ||
			    (pass && add_to_qconv(g, i, fs[i], kind, blk))) {
				free(fs[i]);
				fs[i] = NULL;
				continue;
			}
			g->nodes[i].priv = fs[i];
			err = finish(g, &g->nodes[i], fs[i], blk, ws);
			fs[i] = NULL;
			if (err)
				goto out;
		}
	fuse_xdw(g, ws, nthreads);
	err = fuse_semul(g);
	if (!err && ws->refs) {
		ws->buf = mi_cpu_alloc(ws->floats * sizeof(float));
		if (!ws->buf)
			err = -ENOMEM;
	}
out:
	if (!ws->refs)
		free(ws);
	if (fs)
		for (int i = g->nnodes - 1; i >= 0; i--)
			if (fs[i]) {
				unfuse(g, &g->nodes[i], fs[i]);
				free(fs[i]);
			}
	free(kind);
	free(fs);
	free(blk);
	return err;
}
