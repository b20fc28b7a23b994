/* SPDX-License-Identifier: MIT */
/*
 * int8 inference: kernels, quantized ONNX ops, the QDQ planner step and
 * `metainfer quantize`.  Private to libmetainfer.
 *
 * Number format (the one VNNI's vpdpbusd wants):
 *  - activations: uint8 with a per-tensor zero point zx (int8 activations
 *    are turned into uint8 by flipping the sign bit, zx += 128);
 *  - weights: int8, symmetric (zero point 0), one scale per output channel;
 *  - accumulation in int32, exact:  acc = sum_k w[k] * x[k] + comp[oc],
 *    comp[oc] = bias_q[oc] - zx * sum_k w[k]  (zero-point compensation);
 *  - requantization in fp32: q = sat(rne((float)acc * mult[oc]) + zy) with
 *    mult = sx * sw[oc] / sy, round-to-nearest-even (the rounding of
 *    QuantizeLinear), fused Relu/Clip as clamp bounds.
 * Every ISA path (AVX-512 VNNI, AVX2, portable C) produces bit-identical
 * results: the integer part is exact and the float part performs the same
 * IEEE operations in the same order.
 */
#ifndef MI_QUANT_H
#define MI_QUANT_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#include "ir.h"

/* ---- ISA dispatch ---------------------------------------------------- */
enum mi_qisa_id {
	MI_QISA_GENERIC = 0,
	MI_QISA_AVX2 = 1,   /* AVX2 + FMA: 8->16 bit widening + vpmaddwd */
	MI_QISA_AVX512 = 2, /* AVX-512 F/BW/VL + VNNI: vpdpbusd */
};

/* Best ISA this CPU supports, lowered by MI_CPU_ISA=avx512|avx2|generic. */
int mi_quant_isa(void);
/* An A/B switch of the kernels: on unless environment variable `name` is
 * "0", read once into *cur (-1: unread; the mi_quant_set_* test hooks set
 * *cur directly). */
bool mi_quant_switch(int *cur, const char *name);
/* One A/B switch: static int name##_cur, int mi_quant_set_##name(on) (tests;
 * returns the setting) and static bool name##_on() (env on first use). */
#define MI_QUANT_SWITCH(name, env)                                \
	static int name##_cur = -1;                               \
	int mi_quant_set_##name(int on)                           \
	{                                                         \
		return name##_cur = !!on;                         \
	}                                                         \
	static bool name##_on(void)                               \
	{                                                         \
		return mi_quant_switch(&name##_cur, env);         \
	}

/* Force an ISA (tests); capped at what the CPU supports.  Returns the ISA
 * actually selected. */
int mi_quant_set_isa(int isa);
const char *mi_quant_isa_name(int isa);
/* Highest ISA the CPU supports (ignores MI_CPU_ISA). */
int mi_quant_isa_max(void);
/* Use AVX-512 VBMI where the CPU has it (default on; tests switch it off
 * to cover the AVX-512 kernels without it).  Returns the setting. */
int mi_quant_set_vbmi(int on);
/* AVX2: the dense tile on weights widened to int16 at pack time (built
 * when the CPU's best ISA is AVX2 or the current ISA is AVX2 at pack
 * time), or (off; MI_QAVX2W=0) the tile widening them per call. */
int mi_quant_set_avx2w(int on);
/* Depthwise convs on small maps through gather tables (AVX-512 VBMI; default
 * on; tests switch it off to cover the row kernels).  Returns the setting. */
int mi_quant_set_dwtab(int on);
/* AVX2 depthwise convs a whole channel at a time (dwk_chan_avx2; default
 * on, MI_QUANT_DWCHAN=0 off; tests switch it off to cover the row
 * kernels).  Returns the setting. */
int mi_quant_set_dwchan(int on);
/* Transpose / Reshape / Slice / Split / Concat / Gather ... between
 * DequantizeLinear and QuantizeLinear nodes on the bytes (qplan.c
 * plan_moves; default on, MI_QUANT_MOVE=0 off).  Returns the setting. */
int mi_quant_set_move(int on);
/* ... and write the C4 layout for an int8 conv that reads it (default on,
 * MI_QUANT_MVC4=0 off).  Returns the setting. */
int mi_quant_set_mvc4(int on);
/* ... look through Q -> DQ pairs between moves (MI_QUANT_MVTHROUGH=0
 * off), and write the floats an fp32 reader takes (MI_QUANT_MVF32=0 off). */
int mi_quant_set_through(int on);
int mi_quant_set_mvf32(int on);
/* ... and look a move's byte tables up with slices made at plan time,
 * the last bytes of a plane by an overlapping vector (default on,
 * MI_QUANT_MVLUT=0: lut8_any, the last bytes one at a time). */
int mi_quant_set_mvlut(int on);
/* ... and, where a table is a fixed-point requantization giving all 256
 * bytes (fitted at plan time), compute it (default on, MI_QUANT_MVAFF=0:
 * the tables). */
int mi_quant_set_mvaff(int on);
/* An int8 conv's output read only by DQs for planar-only fp32 readers
 * (ReduceMean, Gemm, ...) stays planar (default on, MI_QUANT_DQPL=0: may
 * be C4). */
int mi_quant_set_dqpl(int on);
/* AVX2 MaxPool (stride 1 or 2, no dilation): horizontal passes 8 C4
 * pixels or 32 bytes at a time (default on, MI_QUANT_HMAX2=0 off: byte by
 * byte).  Returns the setting. */
int mi_quant_set_hmax2(int on);
/* ... and (default on, MI_QUANT_HMAX3=0 off) the rows of taps read once,
 * the last vector of a row overlapping the one before, C4 edge pixels 4
 * channels at a time.  Returns the setting. */
int mi_quant_set_hmax3(int on);
/* tile_avx2b_rq with the requantization inlined (default on,
 * MI_QUANT_AVX2BI=0: called out of line).  Returns the setting. */
int mi_quant_set_avx2bi(int on);
/* tile_avx2b's RGB first-conv panels of one output row gathered in
 * registers (default on, MI_QUANT_RGBR=0: through rows in memory).
 * Returns the setting. */
int mi_quant_set_rgbr(int on);
/* tile_avx2b's partial panels: the last 1-3 pixels a pixel at a time, 8
 * rows per vector (default on, MI_QUANT_AVX2PX=0: an 8- or 16-pixel
 * pass).  Returns the setting. */
int mi_quant_set_avx2px(int on);
/* AVX2 stride-2 im2col 8 pixels at a time (default on, MI_QUANT_S2V=0
 * off: one pixel at a time).  Returns the setting. */
int mi_quant_set_s2v(int on);
/* dwk_chan_avx2 stores full vectors only (default on, MI_QUANT_DWFULL=0
 * off: masked stores of a row's last strip).  Returns the setting. */
int mi_quant_set_dwfull(int on);
/* AVX2 depthwise planes padded with 16-byte vectors (default on,
 * MI_QUANT_DWPREP=0 off: memcpy/memset per row).  Returns the setting. */
int mi_quant_set_dwprep(int on);
/* dwk_chan_avx2 pairs vertical taps at stride 1, 3x3 and 5x5 (default
 * on, MI_QUANT_DWVP=0 off).  Returns the setting. */
int mi_quant_set_dwvp(int on);
/* AVX2 table lookups load 8 entries by vinsertps (default on,
 * MI_QUANT_LUTI=0 off: vgatherdps).  Returns the setting. */
int mi_quant_set_luti(int on);
/* AVX2 byte tables by the telescoping XOR (default on, MI_QUANT_LUT8X=0
 * off: a compare and blend per slice).  Returns the setting. */
int mi_quant_set_lut8x(int on);
/* AVX2 SE gate Mul on planes under 256 pixels in registers (default on,
 * MI_QUANT_SEDIRECT=0 off: products through a float buffer).  Returns the
 * setting. */
int mi_quant_set_sedirect(int on);
/* AVX2 GlobalAveragePool reads C4 input in place (default on,
 * MI_QUANT_GAPC4=0 off: quads taken apart into planes).  Returns the
 * setting. */
int mi_quant_set_gapc4(int on);
/* ... and on maps of 32-63 pixels sums a quad's 4 channels as the lanes of
 * one double vector (gap_sums_avx2_c4s; default on, MI_QUANT_GAPC4S=0
 * off).  Same additions per channel, same bytes.  Returns the setting. */
int mi_quant_set_gapc4s(int on);
/* A QuantizeLinear of an fp32 conv's output writes C4 for an int8
 * depthwise conv, and for DQs read by fp32 convs (default on,
 * MI_QUANT_QDWC4=0 off: planar; read when planning).  Returns the
 * setting. */
int mi_quant_set_qdwc4(int on);
/* An int8 conv with fp32 output writes it in the NCHWc blocked layout
 * when the NCHWc pass asks (default on, MI_QUANT_CONVBLK=0 off: planar;
 * read when planning).  Returns the setting. */
int mi_quant_set_convblk(int on);
/* AVX2 depthwise convs with a C4 output on the C4 quad kernel (dwq_item)
 * where it wins (1, default; MI_QUANT_DWC4=0 off: planar planes, and the
 * planner keeps their inputs planar; 2: on every shape it takes, for
 * tests and A/B).  Returns the setting. */
int mi_quant_set_dwc4(int on);
/* The quad kernel's last oh % 4 output rows in one step with shared tap
 * pairs (default on; MI_QUANT_DWQT=0 off: each row alone, the old loop).
 * Same sums, same bytes.  Returns the setting. */
int mi_quant_set_dwqt(int on);
/* The quad kernel's weight pairs by vpunpck from 8-byte kernel rows (default
 * on; MI_QUANT_DWQW=0 off: scalar stores).  Returns the setting. */
int mi_quant_set_dwqw(int on);
/* The quad kernel's 3x3 steps with their four row stores unrolled (default
 * on; MI_QUANT_DWQU=0 off).  Returns the setting. */
int mi_quant_set_dwqu(int on);
/* AVX2 dense tiles on weights that all lie in [-64, 63] (7-bit, `metainfer
 * quantize --weight-bits 7`) by vpmaddubsw, uint8 x int8 into int16 pairs
 * that cannot saturate (tile_avx2b; default on, MI_QUANT_U8S7=0 off: the
 * int16 tiles).  Read when weights are packed (no w16 copy then) and at
 * every run.  Returns the setting. */
int mi_quant_set_u8s7(int on);
/* AVX2 dense tiles on partial panels (np < 32 pixels) compute only the
 * 16-pixel halves that hold pixels, tile_avx2b a half of up to 8 on 8
 * (default on, MI_QUANT_AVX2NP=0 off: all 32).  Returns the setting. */
int mi_quant_set_avx2np(int on);
/* AVX2 dense tile with the uint8/int8 requantization in registers (full
 * tiles; default on, MI_QUANT_AVX2RQ=0 off: int32 sums, then
 * epi_avx2).  Returns the setting. */
int mi_quant_set_avx2rq(int on);
/* AVX2 convs split each pixel panel into int16 pairs once for all output
 * blocks (default on, MI_QUANT_AVX2S=0 off: the tile splits at every
 * step).  Returns the setting. */
int mi_quant_set_avx2s(int on);
/* AVX2 dense convs on 1-3 input channels (RGB first convs) with K in
 * tap-major order, the channels of consecutive taps packed densely
 * (147 bytes per pixel for 7x7 on 3 channels, not 196) and their own
 * im2col into the split panels (default on, MI_QUANT_RGB=0 off: channel
 * quads).  Returns the setting. */
int mi_quant_set_rgb(int on);
/* AVX2 GEMMs of up to 4 rows and 1x1 convs of one pixel through a GEMV
 * kernel (default on, MI_QUANT_GEMV2=0 off; tests switch it off to cover
 * the tile kernel there).  Returns the setting. */
int mi_quant_set_gemv2(int on);
/* AMX-INT8 tiles for the dense conv/GEMM tiles (lib/quant/qamx.c): used on
 * the AVX-512 path where the CPU has AMX-TILE + AMX-INT8 and Linux grants
 * the tile state (arch_prctl, once per process).  MI_QUANT_AMX=0 turns it
 * off; mi_quant_set_amx() sets it for the weights packed and the runs that
 * follow (tests).  Returns the setting (0 without AMX). */
int mi_quant_set_amx(int on);
bool mi_quant_amx(void);

/* Parallel-for used by the kernels (default: serial).  Calls
 * fn(arg, i, tid) for every i in [0, n), tid in [0, nthreads). */
typedef void (*mi_qpar_fn)(void *arg, int i, int tid);
typedef void (*mi_qparallel_for)(int n, mi_qpar_fn fn, void *arg);
void mi_quant_set_parallel(mi_qparallel_for pf, int nthreads);
/* Threads the parallel-for will really use for the calls that follow from
 * this thread (a node run on fewer threads than planned); 0: nthreads. */
void mi_quant_set_call_threads(int n);
/* the next parallel-for keeps groups of this many items on one thread
 * (default 1); _take returns it and resets it */
void mi_quant_par_align(int items);
int mi_quant_par_align_take(void);

/* ---- packed weights --------------------------------------------------- */
#define MI_QMR 8  /* output channels per micro-tile */
#define MI_QNR 32 /* pixels (GEMM columns) per micro-tile */

/*
 * Weights of a quantized GEMM/conv, packed for the micro-kernels:
 * rows = output channels (per group), K = reduction length.  Layout
 * [group][ceil(ocg/8)][k4][8][4] int8 (k4 = ceil(K/4)), zero padded.
 */
struct mi_qweights {
	int group, ocg, k, k4, nblk; /* nblk = ceil(ocg / 8) */
	int8_t *packed;
	int32_t *wsum;     /* [group * ocg] sum over k */
	/* AMX tiles (NULL unless mi_quant_amx() at pack time and k4 >= 16,
	 * or k4 >= 8 with nblk >= 4):
	 * [group][kc][(nblk + 1) * 8][64] int8 (a zero block at the end), kc = ceil(k4 / 16) chunks of 16
	 * k4 rows; the last chunk starts at row k4 - 16 and holds zeros for
	 * the rows the previous chunk covered. */
	int8_t *amx;
	int kc;
	/* AVX2 (NULL unless the CPU's best quantized ISA is AVX2, or AVX2
	 * was selected at pack time): packed's layout in int16, each row's
	 * 4 weights w0 w1 w2 w3 stored as w0 w2 w1 w3 (the two vpmaddwd
	 * pairs of tile_avx2w); freed again by mi_qconv_init where the conv
	 * takes the Winograd path (mi_qwino_on() at init) */
	int16_t *w16;
	/* every weight in [-64, 63]: the AVX2 tiles are tile_avx2b's
	 * (vpmaddubsw pairs cannot saturate; no w16 then unless
	 * MI_QUANT_U8S7=0 at pack time) */
	bool s7;
};

/* w(g, o, k) callback gives weight k of output channel o of group g. */
typedef int (*mi_qw_get)(const void *ctx, int g, int o, int k);
int mi_qweights_pack(struct mi_qweights *w, int group, int ocg, int k,
		     mi_qw_get get, const void *ctx);
void mi_qweights_free(struct mi_qweights *w);
/* AMX (qamx.c): pack w->amx from w->packed; acc[nr * 16][32] = the
 * tiles of output channels o0.. (o0 % 8 == 0, o0 / 8 + 2 * nr - 1 <=
 * nblk) of group g over a B panel (k4 rows of 32 pixels x 4 bytes,
 * ldb bytes apart, all readable).  toff non-NULL (k4 % 16 == 0): row r
 * is at b + toff[r / (16 * cpt)] + (r % (16 * cpt)) * ldb instead (one
 * offset per conv tap, cpt chunks of 16 rows per tap). */
int mi_qamx_pack(struct mi_qweights *w);
void mi_qamx_tile(const struct mi_qweights *w, int g, int o0, int nr,
		  const uint8_t *b, size_t ldb, const ptrdiff_t *toff, int cpt,
		  int32_t *acc);

/* ---- epilogue ----------------------------------------------------------- */
enum mi_qout_mode {
	MI_QOUT_U8 = 0,  /* requantize to uint8 */
	MI_QOUT_S8 = 1,  /* requantize to int8 */
	MI_QOUT_S32 = 2, /* raw int32 accumulator (+ comp) */
	MI_QOUT_F32 = 3, /* fma((float)acc, mult, fbias), clamped */
};

struct mi_qepi {
	int mode;
	const int32_t *comp; /* [OC] added to every accumulator (required) */
	const float *mult;   /* [OC] (U8/S8/F32) */
	const float *fbias;  /* [OC] (F32, may be NULL = 0) */
	int32_t zy;          /* output zero point (U8/S8) */
	float flo, fhi;      /* clamp before rounding: U8/S8 in q - zy units */
	/* U8/S8 conv output in "C4" layout: per image [C/4][H*W][4] (channel
	 * c of pixel p at ((c / 4) * H*W + p) * 4 + c % 4); needs C % 4 == 0
	 * (and C/group % 4 == 0).  The next int8 conv reads it without a
	 * reorder pass (MI_QCONV_IN_C4). */
	bool out_c4;
	/* F32 written blocked (MI_QCONV_OUT_BLK8): a residual Add fused,
	 * y = act(f + res) (res_first: act(res + f), the Add's operand
	 * order) with res in y's layout, one fp32 add as the NCHWc Add;
	 * res_act MI_QRES_* (NULL res: no Add) */
	const float *res;
	int res_act;
	bool res_first;
	float res_lo, res_hi;
};

enum { MI_QRES_NONE = 0, MI_QRES_RELU = 1, MI_QRES_CLIP = 2 };

/* ---- GEMM: Y[m][n] = sum_k A[m][k] * W[n][k]  (MatMul with constant
 * weights; A uint8 activations with zero point za, W packed, group 1).
 * comp must already hold -za * wsum (+ bias).  Output row-major, ldy
 * elements per row. */
int mi_qgemm(const struct mi_qweights *w, const uint8_t *a, int m, int lda,
	     const struct mi_qepi *ep, void *y, int ldy, void *ws);
/* Workspace bytes mi_qgemm() needs for m rows (ws NULL: allocated). */
size_t mi_qgemm_workspace(const struct mi_qweights *w, int m);

/* ---- convolution (NCHW, one image) ---------------------------------- */
struct mi_qconv_shape {
	int c, h, w;       /* input */
	int oc, oh, ow;    /* output */
	int kh, kw, sh, sw, dh, dw;
	int pt, pl, pb, pr; /* pads */
	int group;
};

struct mi_qconv {
	struct mi_qconv_shape s;
	bool depthwise;     /* group == c == oc, kernel up to MI_QDW_KMAX^2: direct kernel */
	bool direct1x1;     /* 1x1, stride 1, no pad: input is the B matrix */
	int c4;             /* ceil(c / group / 4) channel quads per group */
	struct mi_qweights w;
	int8_t *dww;        /* depthwise: [oc][kh * kw] */
	int32_t *wsum_dw;   /* depthwise: [oc] */
	struct mi_qdwtab *dwt; /* depthwise on small maps: gather tables (qgemm.c) */
	struct mi_qwino *wino; /* 3x3 stride 1 on AVX2: Winograd F(2x2,3x3) (qwino.c) */
	/* group 1, c < 4, AVX2: the weights in k = tap * c + ch order
	 * (fewer k steps than w's channel quads), or NULL */
	struct mi_qweights *rgb;
};

/* Prepare a conv: weights w(g,o,c,ky,kx) via get(ctx, g, o, k) with
 * k = (c * kh + ky) * kw + kx in ONNX order (c within the group). */
int mi_qconv_init(struct mi_qconv *cv, const struct mi_qconv_shape *s,
		  mi_qw_get get, const void *ctx);
void mi_qconv_fini(struct mi_qconv *cv);
/* Workspace bytes needed by mi_qconv_run (per call). */
size_t mi_qconv_workspace(const struct mi_qconv *cv);
/* x: input image (uint8, or int8 when x_signed), zx its zero point in
 * that type's range; ep->comp must hold bias_q - zx_u8 * wsum where
 * zx_u8 = zx (+128 if x_signed): use mi_qconv_comp().  ws: workspace of
 * mi_qconv_workspace() bytes (NULL: allocated here). */
#define MI_QDW_KMAX 7 /* largest depthwise kernel side on the direct path */
#define MI_QCONV_IN_C4 1u /* x is in C4 layout (depthwise: if mi_qconv_dw_c4) */
/* split the output channels first: thread t computes chunk t of the
 * output blocks over every pixel (a 1x1 conv reading C4 directly, split
 * over the threads; else ignored) */
#define MI_QCONV_CHAN 2u
/* fp32 output (MI_QOUT_F32, not out_c4) written straight into the NCHWc
 * layout blocked by 8, [ceil(oc / 8)][oh * ow][8] with pad lanes 0, from
 * the tile epilogues: the same floats as the planar output.  -EOPNOTSUPP
 * (nothing done) where the path cannot (AMX, Winograd, GEMV, depthwise,
 * groups of other than 8k channels; MI_QUANT_BLKEPI=0 always) */
#define MI_QCONV_OUT_BLK8 4u
/* MI_QUANT_BLKEPI switch (tests): 0 refuses MI_QCONV_OUT_BLK8 */
int mi_quant_set_blkepi(int on);
/* MI_QUANT_RESAVX switch (tests): 0 adds ep->res with SSE, not AVX2 */
int mi_quant_set_res_avx(int on);
/* A depthwise conv cv with epilogue ep (out_c4 set) runs the AVX2 C4
 * quad kernel and may read a C4 input (MI_QUANT_DWC4=0: never). */
bool mi_qconv_dw_c4(const struct mi_qconv *cv, const struct mi_qepi *ep);
int mi_qconv_run(const struct mi_qconv *cv, const void *x, bool x_signed,
		 int zx, const struct mi_qepi *ep, void *y, void *ws,
		 unsigned int flags);
/* comp[o] = bias[o] (or 0) - zx_u8 * wsum[o]. */
void mi_qconv_comp(const struct mi_qconv *cv, const int32_t *bias, int zx_u8,
		   int32_t *comp);

/* ---- exact int8 Winograd F(2x2, 3x3) for AVX2 (qwino.c) ---------------
 * 3x3 stride-1 convs of group 1 with at least MI_QWINO_MIN_C input and
 * MI_QWINO_MIN_OC output channels: mi_qconv_init builds it when the
 * quantized ISA is AVX2 (as the w16 weights) and mi_qconv_run takes it on
 * AVX2 while the switch is on (MI_QUANT_WINO=0 off).  Same output bytes
 * as the direct path. */
#define MI_QWINO_MIN_C 16
#define MI_QWINO_MIN_OC 16
struct mi_qwino;
/* the epilogue the direct path runs (qgemm.c's epi_avx2) */
typedef void (*mi_qepi_fn)(const int32_t *acc, int ldacc, int rows, int np,
			   const struct mi_qepi *ep, int oc0, void *out, ptrdiff_t ldo);
int mi_quant_set_wino(int on);
/* MI_QUANT_WSPLIT switch (tests): 0 splits the Winograd blocks as on one
 * thread (fixed rows, channel chunks for the threads) */
int mi_quant_set_wsplit(int on);
/* MI_QUANT_CHUNK8 switch (tests): 0 splits 1x1 convs on few panels in ~4
 * items a thread, never ~8 */
int mi_quant_set_chunk8(int on);
bool mi_qwino_on(void);
/* A block's last 1-2 tiles one at a time, 8 channels per vector (default
 * on, MI_QUANT_WINO1=0: on the 8-tile GEMM).  Returns the setting. */
int mi_quant_set_wino1(int on);
/* Winograd output tiles that leave a tile row stored by runs (default on,
 * MI_QUANT_WOSEG=0: a tile at a time).  Returns the setting. */
int mi_quant_set_woseg(int on);
bool mi_qwino_fits(const struct mi_qconv_shape *s);
/* NULL: the shape does not fit, the weights could overflow the exact
 * int32 sums (4 * 255 * max_o sum |w_o| >= 2^31), or no memory. */
struct mi_qwino *mi_qwino_build(const struct mi_qconv_shape *s, mi_qw_get get, const void *ctx);
void mi_qwino_free(struct mi_qwino *wn);
size_t mi_qwino_workspace(const struct mi_qwino *wn, int nthreads);
/* tests: transformed input of a block in at most this many bytes (0: the
 * default; 1: one tile row per block) */
void mi_qwino_test_budget(size_t bytes);
/* x: planar or (in_c4) C4 input, bytes ^ flip are uint8 with zero point
 * zx; ws: mi_qwino_workspace() bytes; pf(n, fn, arg) on nt threads. */
int mi_qwino_run(const struct mi_qwino *wn, const void *x, bool in_c4, uint8_t flip,
		 uint8_t zx, const struct mi_qepi *ep, void *y, void *ws, mi_qepi_fn epi,
		 mi_qparallel_for pf, int nt);

/* ---- reference helpers (tests) -------------------------------------- */
/* Scalar requantization: exactly what every kernel path computes. */
static inline int32_t mi_qrequant(int32_t acc, float mult, int32_t zy,
				  float flo, float fhi)
{
	float v = (float)acc * mult;
	v = !(v >= flo) ? flo : v; /* NaN -> flo, as maxps(v, flo) */
	v = v > fhi ? fhi : v;
	return (int32_t)__builtin_nearbyintf(v) + zy;
}

/* ---- ops, planner, CLI ------------------------------------------------ */
/* Quantized ONNX ops (reference implementations, any dtype combination),
 * terminated by { NULL }; searched by mi_op_find() (lib/ops/registry.c). */
extern const struct mi_op_def mi_quant_ops[];

struct mi_cpu_opts;
/* Planner step (called first by mi_cpu_plan()): rewrites QDQ chains and
 * QLinear nodes to int8 kernels.  node->priv starts with struct
 * mi_cpu_kernel_hdr (lib/cpu/cpu_plan.h); its fini() frees the priv and
 * undoes the rewrite.  MI_NO_INT8=1 disables the step. */
int mi_quant_plan(struct mi_graph *g, const struct mi_cpu_opts *opts);
/* True when node->priv was set by mi_quant_plan(). */
bool mi_quant_node_is(const struct mi_node *n);

/* `metainfer quantize ...`; returns the exit status. */
int mi_quant_main(int argc, char **argv);

#endif /* MI_QUANT_H */
