/* SPDX-License-Identifier: MIT */
/*
 * The blocked-layout (NCHWc) pass's private state, shared by its files:
 * nchwc.c (the pass: layout propagation, finishing the nodes),
 * nchwc_match.c (which nodes have a blocked kernel, weight packing),
 * nchwc_fuse.c (epilogue fusion, the 1x1 + depthwise and SE-scale folds,
 * Adds taken over by int8 convs), nchwc_split.c (how the threads share a
 * direct conv) and nchwc_run.c (the node runners).
 */
#ifndef MI_CPU_NCHWC_PASS_H
#define MI_CPU_NCHWC_PASS_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "internal.h"
#include "cpu/cpu_plan.h"
#include "cpu/nchwc.h"

enum { NC_NONE, NC_CONV, NC_DW, NC_GAP, NC_MUL, NC_ADD, NC_POOL, NC_CAT,
       NC_DQ, NC_Q };

/* The layout ops of a node another provider planned (n->priv starts
 * with struct mi_cpu_kernel_hdr), or NULL. */
static inline const struct mi_layout_ops *nc_lops(const struct mi_node *n)
{
	const struct mi_cpu_kernel_hdr *h = n->priv;

	return h ? h->lops : NULL;
}

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
	/* grouped conv (gk > 0): it runs as grp groups of gk ONNX groups
	 * each (gk 2: two groups' weights side by side, zeros across them;
	 * mi_nc_pack_merged); p is one run group's conv (c / grp -> m / grp
	 * channels, both multiples of the block) with wp and bias at group
	 * 0; group i's input, output, residual, weight and bias blocks
	 * follow i groups' worth of them (nc_piece re-bases) */
	int grp, gk;
	/* conv work split (mi_nc_plan_split): sg x sr parts of block groups x
	 * position units, run as pieces, group-major (gmaj: a group's
	 * weights stay in L2 while it sweeps its units, nsub pieces per
	 * group) or unit-major (a unit's input stays in L2 while every
	 * group of the part sweeps it) */
	int mg, units, rb, sg, sr, gmaj, nsub;
	int steal; /* the caller runs every part (as when workers are late) */
	/* 3x3 stride-1 conv on Winograd's shapes: blocked Winograd (wgo set
	 * by mi_nc_classify, wino by finish); want_wgo: what a plan asks of
	 * a conv (-1 the cost rules choose, 0 direct, 1 Winograd, 2 the
	 * grouped direct conv) */
	int wgo, want_wgo;
	struct mi_ncw *wino;
	/* conv with pads: each image is first copied into a zero-padded
	 * map of ph x pw in the shared workspace (no edge tiles) */
	int pad, h0, w0, pt0, pl0, ph, pw;
	/* pad 2: a strided 1x1 conv's input subsampled (ssh x ssw) into
	 * the workspace */
	int ssh, ssw;
	struct nc_ws *ws;
	int slot2;        /* residual / scale / 2nd addend input slot, -1 */
	int act;
	float lo, hi;
	int nthreads;
	/* 1x1 conv that also runs its depthwise consumer (see mi_nc_fuse_xdw) */
	struct nc_node *xdw;
	int xdw_node, xdw_t; /* the depthwise node, the tensor between */
	int xg;              /* groups of expanded channel blocks */
	int xrows, xbands;   /* depthwise output rows per band, bands */
	size_t xslice;       /* floats of one thread's band buffer */
	/* 1x1 conv that also applies the channel scale Mul before it
	 * (mi_nc_fuse_semul): weights scaled per image into p.wp, from wsrc */
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

static inline bool is_op(const struct mi_node *n, const char *op)
{
	return !n->domain[0] && !strcmp(n->op_type, op);
}

static inline bool f32_4d(const struct mi_tensor *t)
{
	return t && t->dtype == MI_DT_FLOAT && mi_tensor_shape_known(t) &&
	       t->ndim == 4;
}

static inline bool is_const(const struct mi_tensor *t)
{
	return t && t->data && (t->flags & MI_TF_CONST);
}

static inline bool same_shape(const struct mi_tensor *a, const struct mi_tensor *b)
{
	if (a->ndim != b->ndim)
		return false;
	for (int i = 0; i < a->ndim; i++)
		if (a->dims[i] != b->dims[i])
			return false;
	return true;
}

static inline int nc_cb(int c, int b)
{
	return (c + b - 1) / b;
}

/* Per-image element counts of the tensors in their layouts. */
static inline int64_t img_size(int c, int64_t hw, int blk, int b)
{
	return (blk ? (int64_t)nc_cb(c, b) * b : c) * hw;
}

/* Units [u0, u1) as positions: rows [*r0, *r1) x columns [*c0, *c1). */
static inline void nc_unit_span(const struct nc_node *f, int u0, int u1, int *r0,
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

/* Items are claimed dynamically (a late or descheduled thread leaves its
 * share to the others), about NC_PER ranges per thread. */
#define NC_PER 4
/* most parts of a conv's work split (nchwc_split.c, nchwc_run.c) */
#define NC_MAXPART 64

/* nchwc_match.c: kind of node n (or NC_NONE); fills f's shape fields. */
int mi_nc_classify(struct mi_graph *g, struct mi_node *n, struct nc_node *f);
/* nchwc_match.c: ONNX grouped weights w [m][cg][kh][kw] packed for k
 * groups of mg outputs merged into one of k * cg inputs */
float *mi_nc_pack_merged(int b, int m, int mg, int cg, int k, int kh, int kw,
			 const float *w);
/* nchwc_fuse.c */
void mi_nc_absorb(struct mi_graph *g, struct mi_node *n, struct nc_node *f,
		  int ci);
int mi_nc_fuse(struct mi_graph *g, struct mi_node *n, struct nc_node *f);
void mi_nc_unfuse(struct mi_graph *g, struct mi_node *n, struct nc_node *f);
void mi_nc_fuse_xdw(struct mi_graph *g, struct nc_ws *ws, int nthreads);
/* f's band plan for its depthwise d: rows > 0 forces that many output
 * rows per band; false (with rows 0) where the bands do not pay. */
bool mi_nc_plan_xdw(struct nc_node *f, const struct nc_node *d, int nthreads,
		    int rows);
int mi_nc_fuse_semul(struct mi_graph *g);
bool mi_nc_add_to_qconv(struct mi_graph *g, int ai, struct nc_node *f,
			const int *kind, const char *blk);
/* nchwc_split.c: the rule's split of f; f->nsub for f's split */
void mi_nc_plan_split(struct nc_node *f);
void mi_nc_split_pieces(struct nc_node *f);
/* nchwc_run.c */
int mi_nc_run(struct mi_graph *g, struct mi_node *n);
void mi_nc_fini(struct mi_graph *g, struct mi_node *n);

#endif /* MI_CPU_NCHWC_PASS_H */
