/* SPDX-License-Identifier: MIT */
/*
 * Blocked channel layout (NCHWc) kernels, private to lib/cpu/.
 *
 * A blocked tensor [N, C, H, W] is stored as [N, ceil(C/B), H, W, B] with
 * B = the ISA's vector width in floats (16 avx512, 8 avx2, 4 generic):
 * one vector holds B channels of one pixel.  The lanes of the last block
 * past C ("pad lanes") hold unspecified finite-or-not values: every
 * kernel computes them like real lanes but no kernel lets them reach a
 * real channel (direct convolutions only read input channels < C).
 *
 * Kernels take a layout flag per tensor (1 blocked, 0 NCHW) where both
 * are cheap: a direct convolution reads its input one scalar at a time
 * (broadcast), so it reads NCHW as easily as NCHWc, which makes the first
 * convolution of a chain its reorder; outputs and residuals in NCHW are
 * written / read lane by lane (chain ends).  Depthwise, pooling and the
 * channel scale need a blocked input.
 *
 * Each kernel covers a sub-range of the work (channel blocks, output
 * rows) so that the caller splits it over the thread pool.
 */
#ifndef MI_CPU_NCHWC_H
#define MI_CPU_NCHWC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cpu/cpu.h"

/* One image of a convolution (direct, groups 1; a grouped conv runs as
 * one of these per group) or depthwise conv. */
struct mi_nc_conv {
	int c, h, w;       /* input channels and map */
	int m, oh, ow;     /* output channels and map */
	int kh, kw, sh, sw, dh, dw, pt, pl;
	int xblk, yblk, rblk; /* layouts of input, output, residual */
	/* weights: groups 1: [mb][kh][kw][c][B]; depthwise: [cb][kh][kw][B],
	 * zero past m / c (mb = ceil(m / B)) */
	const float *wp;
	const float *bias; /* mb * B floats (zeros past m) */
	int act;
	float lo, hi;
	/* NULL, or (NCHW input, kh x kw > 1: mi_nc_tap_offsets) the input
	 * offset of tap k = (ky * kw + kx) * c + ic, the weights' order:
	 * tiles with every tap in range run one loop over the k */
	const int32_t *koff;
	/* planned choices a plan may name (0: the rule).  ksplit: the flat
	 * direct conv's input channels in chunks of ksplit blocks (0: only
	 * where a block group's weights outgrow the L2); kc1: 1x1 rows'
	 * L1 bytes of weights per input-channel chunk (0: MI_NC_KC1;
	 * MI_NC_KC1_NONE no chunks; MI_NC_KC1_ROW the plain row tiles with
	 * a tail); pb1: positions per sweep of those chunks (0: 96) */
	int ksplit, kc1, pb1;
};
#define MI_NC_KC1 (32 * 1024)
#define MI_NC_KC1_NONE (-1)
#define MI_NC_KC1_ROW (-2)

/* Maps narrower than this are convolved in tiles that run across rows
 * (whole register tiles instead of row tails), in bands of rows. */
#define MI_NC_FLAT_W 20
static inline int mi_nc_band_rows(int oh, int ow)
{
	int bands;

	if (ow >= MI_NC_FLAT_W)
		return 1;
	bands = (oh * ow + 47) / 48;
	return (oh + bands - 1) / bands;
}

struct mi_nc_kern {
	int b; /* block (floats per vector) */
	int ob; /* output channel blocks per conv tile */
	/* Direct conv: output blocks [mb0, mb1), output rows [oy0, oy1),
	 * columns [ox0, ox1).  res may be NULL. */
	void (*conv)(const struct mi_nc_conv *p, const float *x,
		     const float *res, float *y, int mb0, int mb1, int oy0,
		     int oy1, int ox0, int ox1);
	/* Depthwise (c == m, one tap set per channel): blocks [cb0, cb1),
	 * rows [oy0, oy1); input blocked. */
	void (*dw)(const struct mi_nc_conv *p, const float *x,
		   const float *res, float *y, int cb0, int cb1, int oy0,
		   int oy1);
	/* NCHW x [c][hw] -> blocked y, blocks [cb0, cb1) (pad lanes 0). */
	void (*to_blk)(const float *x, int c, int64_t hw, float *y, int cb0,
		       int cb1);
	/* blocked x -> NCHW y [c][hw], blocks [cb0, cb1). */
	void (*from_blk)(const float *x, int c, int64_t hw, float *y,
			 int cb0, int cb1);
	/* Global average pool of blocked x (blocks [cb0, cb1)) into NCHW
	 * y[c]: mean over hw (accumulated in double). */
	void (*gap)(const float *x, int c, int64_t hw, float *y, int cb0,
		    int cb1);
	/* y = x * s[channel] (squeeze-excitation), x blocked, s[c] NCHW;
	 * y in layout yblk. */
	void (*chmul)(const float *x, const float *s, int c, int64_t hw,
		      float *y, int yblk, int cb0, int cb1);
	/* y = act(a + b), a and b blocked, y in layout yblk. */
	void (*add)(const float *a, const float *b, int c, int64_t hw,
		    float *y, int yblk, int act, float lo, float hi, int cb0,
		    int cb1);
	/* Max / average pool (struct mi_pool2d semantics, any stride,
	 * kernel <= 16x16), blocked x, y in layout yblk. */
	void (*pool)(const struct mi_pool2d *p, int c, const float *x,
		     float *y, int yblk, int cb0, int cb1, int oy0, int oy1);
	/* Winograd F(4x4, 3x3) transforms (struct mi_ncw): input block cb,
	 * tile rows [ty0, ty1) of blocked x (p's map and pads) into v,
	 * element xi of tile t at v[xi * xs + (cb * nt + t) * b]; output
	 * block mb from mt (same layout) + bias (+ res), activation, into y
	 * (layouts p->yblk, p->rblk). */
	void (*wino_in)(const struct mi_nc_conv *p, const float *x, float *v,
			size_t xs, int tw, int nt, int cb, int ty0, int ty1);
	void (*wino_out)(const struct mi_nc_conv *p, const float *mt,
			 size_t xs, int tw, int nt, const float *res, float *y,
			 int mb, int ty0, int ty1);
};

const struct mi_nc_kern *mi_nc_kern_get(int isa);
extern const struct mi_nc_kern mi_nc_kern_generic, mi_nc_kern_avx2,
	mi_nc_kern_avx512;

/* Pack weights for struct mi_nc_conv (B floats per block); returns a
 * mi_cpu_alloc()ed buffer or NULL.  w: [m][c][kh][kw] (groups 1) or
 * [c][1][kh][kw] (dw = 1). */
float *mi_nc_pack_weights(int b, int dw, int m, int c, int kh, int kw,
			  const float *w);
float *mi_nc_pack_bias(int b, int m, const float *bias);
/* p->koff for p as it will run (input map p->h x p->w): a mi_cpu_alloc()ed
 * table of c * kh * kw offsets, or NULL where it does not apply (blocked
 * input, 1x1, column stride > 2, more than MI_NC_KOFF_MAX taps, offsets
 * past int32). */
#define MI_NC_KOFF_MAX 1024
int32_t *mi_nc_tap_offsets(const struct mi_nc_conv *p);

/*
 * Winograd F(4x4, 3x3) on blocked data (winograd.c): a 3x3 stride-1 conv
 * (groups 1, dilation 1, pads <= 2, p as for the direct conv: shape,
 * pads, layouts, activation, packed bias) whose input transform reads
 * NCHWc (an NCHW input is reordered first), whose 36 GEMMs run as 1x1
 * convs on the transformed tiles (the blocked 1x1 kernel), and whose
 * output transform writes either layout with bias, residual and
 * activation fused.
 */
struct mi_ncw {
	const struct mi_nc_kern *k;
	struct mi_nc_conv p;   /* the conv (p.wp unused) */
	struct mi_nc_conv g;   /* one GEMM: 1x1 conv c -> m over nt positions */
	float *u;              /* [36][mb][c][b] transformed weights */
	int th, tw, nt;        /* tile rows, tiles per row, tiles */
	size_t xs_v, xs_m;     /* floats between consecutive xi in V, M */
	size_t ws_floats;      /* workspace of mi_ncw_run */
	int nthreads;
};
bool mi_ncw_supports(const struct mi_nc_conv *p);
/* p->bias must be set (mi_nc_pack_bias); w: [m][c][3][3]. */
int mi_ncw_init(struct mi_ncw *wg, const struct mi_nc_kern *k,
		const struct mi_nc_conv *p, const float *w, int nthreads);
/* One image; ws: wg->ws_floats floats, 64-byte aligned. */
void mi_ncw_run(const struct mi_ncw *wg, const float *x, const float *res,
		float *y, float *ws);
void mi_ncw_fini(struct mi_ncw *wg);

/* The blocked pass's conv variants (the names plans use). */
#define MI_NC_VARIANT_DIRECT "conv.nchwc.direct"
#define MI_NC_VARIANT_WINO "conv.nchwc.winograd"
#define MI_NC_VARIANT_GROUP "conv.nchwc.group"

/* The blocked conv variants a plan may name for node n as the graph is
 * now, with ISA isa's block (count, at most max stored): direct for any
 * dense fp32 conv the pass can block, the blocked Winograd for its 3x3
 * stride-1 shapes, the grouped direct conv for other groups > 1 whose
 * channels and outputs per group (or per pair of groups) are multiples
 * of the block. */
struct mi_graph;
struct mi_node;
int mi_cpu_nchwc_conv_variants(struct mi_graph *g, struct mi_node *n,
			       int isa, const char **names, int max);

/* plan.c: would the NCHW planner run this conv with Winograd on ISA isa? */
int mi_cpu_wino_pays(const struct mi_conv_shape *s, int isa);

/* plan.c's fusion helpers, shared with the NCHWc pass.  Does tensor t
 * depend on node `node` through live nodes (1: fusing an Add that reads t
 * into that node would make a cycle; 0: no; -ENOMEM)?  The live consumers
 * of tensor t (count; the first max in list).  The activation of node c
 * (MI_ACT_*, with its Clip bounds or HardSwish constants in lo/hi), or -1
 * when it is not one the kernels fuse. */
struct mi_graph;
struct mi_node;
int mi_cpu_depends(struct mi_graph *g, int t, int node);
int mi_cpu_consumers(const struct mi_graph *g, int t, int *list, int max);
int mi_cpu_act_of(struct mi_graph *g, struct mi_node *c, float *lo,
		  float *hi);
bool mi_cpu_silu_pair(struct mi_graph *g, int t, const int cons[2], int *sgi,
		      int *muli);

/* Planner pass (nchwc.c): runs chains of Conv / depthwise / pooling /
 * channel-scale / Add nodes in the blocked layout, with the kernels of
 * ISA isa (opts: no_merge; may be NULL). */
struct mi_cpu_opts;
int mi_cpu_plan_nchwc(struct mi_graph *g, int nthreads, int isa,
		      const struct mi_cpu_opts *opts);
/* Planned state of a blocked conv node n that a plan may name instead
 * of the rule's: its work split (sg x sr parts, group- or unit-major;
 * steal: the caller runs every part, taking the others' from the back,
 * as when workers are late) and, for a 1x1 conv running its depthwise
 * consumer, that consumer's output rows per band.  -EINVAL where it does
 * not apply (not such a node, more parts than threads or units). */
int mi_nc_conv_set_split(struct mi_node *n, int sg, int sr, bool gmaj,
			 bool steal);
int mi_nc_xdw_set_rows(struct mi_node *n, int rows);

#endif /* MI_CPU_NCHWC_H */
