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

/* The int8 kernels' ISA: the best this CPU supports until mi_quant_plan()
 * sets the model's cap (that of lib/cpu) or a test forces one. */
int mi_quant_isa(void);
/* Force an ISA (tests, mi_quant_plan); capped at what the CPU supports.
 * Returns the ISA actually selected. */
int mi_quant_set_isa(int isa);
const char *mi_quant_isa_name(int isa);
/* Highest ISA the CPU supports. */
int mi_quant_isa_max(void);

/*
 * Kernel variants that the tests select to cover each one against the
 * others and the reference (process-wide; each default on, the variant
 * the default rules pick; a plan entry per node later).  Each returns the
 * setting.
 */
/* AVX-512 VBMI (vpermb) where the CPU has it; off: the AVX-512 kernels
 * without it. */
int mi_quant_set_vbmi(int on);
/* Depthwise convs on small maps through gather tables (AVX-512 VBMI); off:
 * the row kernels. */
int mi_quant_set_dwtab(int on);
/* AVX2 depthwise convs a whole channel at a time (dwk_chan_avx2); off: the
 * row kernels. */
int mi_quant_set_dwchan(int on);
/* AVX2 depthwise convs with a C4 output on the C4 quad kernel (dwq_item)
 * where it wins (1); off: planar planes, and the planner keeps their
 * inputs planar; 2: on every shape it takes. */
int mi_quant_set_dwc4(int on);
/* AVX2 GEMMs of up to 4 rows and 1x1 convs of one pixel through a GEMV
 * kernel; off: the tile kernel there. */
int mi_quant_set_gemv2(int on);
/* AMX-INT8 tiles for the dense conv/GEMM tiles (lib/quant/qamx.c): used on
 * the AVX-512 path where the CPU has AMX-TILE + AMX-INT8 and Linux grants
 * the tile state (arch_prctl, once per process); set for the weights
 * packed and the runs that follow.  0 without AMX. */
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
	 * (vpmaddubsw pairs cannot saturate; no w16 then) */
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
 * groups of other than 8k channels) */
#define MI_QCONV_OUT_BLK8 4u
/* A depthwise conv cv with epilogue ep (out_c4 set) runs the AVX2 C4
 * quad kernel and may read a C4 input (mi_quant_set_dwc4(0): never). */
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
 * AVX2 while the variant is on (mi_quant_set_wino, tests).  Same output bytes
 * as the direct path. */
#define MI_QWINO_MIN_C 16
#define MI_QWINO_MIN_OC 16
struct mi_qwino;
/* the epilogue the direct path runs (qgemm.c's epi_avx2) */
typedef void (*mi_qepi_fn)(const int32_t *acc, int ldacc, int rows, int np,
			   const struct mi_qepi *ep, int oc0, void *out, ptrdiff_t ldo);
int mi_quant_set_wino(int on);
/* Off (bench-qconv): the Winograd blocks split as on one thread (fixed
 * rows, channel chunks for the threads), not wino_split's choice */
int mi_quant_set_wsplit(int on);
bool mi_qwino_on(void);
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
/*
 * Requantization rounds the exact product acc * mult (mult the fp32
 * multiplier) to nearest, as the accelerators' fixed point
 * (lib/device/lower_ops.c) does; an exact product of exactly k + 1/2
 * goes to even, as QuantizeLinear (the devices round it up; inside the
 * 8-bit range only a mantissa ending in >= 14 zero bits meets one).
 * Then it clamps to [flo, fhi] (integral; NaN
 * -> flo) and adds zy.  The fp32 product v decides alone unless v is a
 * half-integer (for |v| < 2^22 any other v lies strictly between the same
 * two half-integers as the exact product) or |acc| >= 2^24 ((float)acc
 * rounds): those take mi_qround_exact, every int32 acc exact.  This is
 * exactly what every kernel path computes (mi_qround_fix512/256 in
 * qgemm-impl.h are the vector forms).
 */
static inline float mi_qround_exact(int32_t acc, float mult, float flo, float fhi)
{
	/* p + e is the exact product: e from the double fma */
	double a = acc, m = mult, p = a * m, e = __builtin_fma(a, m, -p);
	double r = __builtin_floor(p), d = p - r;

	/* exactly a half: to even, as QuantizeLinear */
	if (d > 0.5 || (d == 0.5 && (e > 0 || (e == 0 && r != 2 * __builtin_floor(r / 2)))))
		r += 1;
	r = !(r >= flo) ? flo : r; /* NaN -> flo */
	return r > fhi ? fhi : (float)r;
}

/* |acc| >= 2^24: (float)acc may round */
static inline bool mi_qacc_wide(int32_t acc)
{
	return (uint32_t)acc + 0xffffffu > 0x1fffffeu;
}

static inline int32_t mi_qrequant(int32_t acc, float mult, int32_t zy,
				  float flo, float fhi)
{
	float v = (float)acc * mult, r;

	v = !(v >= flo) ? flo : v; /* NaN -> flo, as maxps(v, flo) */
	v = v > fhi ? fhi : v;
	r = __builtin_nearbyintf(v);
	if (__builtin_expect(__builtin_fabsf(v - r) == 0.5f || mi_qacc_wide(acc), 0))
		r = mi_qround_exact(acc, mult, flo, fhi);
	return (int32_t)r + zy;
}

/* ---- ops, planner, CLI ------------------------------------------------ */
/* Quantized ONNX ops (reference implementations, any dtype combination),
 * terminated by { NULL }; searched by mi_op_find() (lib/ops/registry.c). */
extern const struct mi_op_def mi_quant_ops[];

struct mi_cpu_opts;
/* Planner step (called first by mi_cpu_plan()): rewrites QDQ chains and
 * QLinear nodes to int8 kernels.  node->priv starts with struct
 * mi_cpu_kernel_hdr (lib/cpu/cpu_plan.h); its fini() frees the priv and
 * undoes the rewrite, and its lops (struct mi_layout_ops) negotiate the
 * fp32 side's layout with lib/cpu's blocked pass. */
int mi_quant_plan(struct mi_graph *g, const struct mi_cpu_opts *opts);

/* Options of mi_quantize() (`metainfer quantize`, tools/quant/quantize.c,
 * which documents each); mi_quant_opts_default() gives the defaults. */
#define MI_QUANT_WBITS_MIXED 0 /* 7 bits where the AVX2 kernels gain, else 8 */
#define MI_QUANT_WBITS_AUTO (-1) /* MIXED where the int8 kernels are AVX2's, else 8 */
struct mi_quant_opts {
	const char *calib;	/* directory of .npy calibration inputs, or NULL */
	int nrandom;		/* else this many seeded random inputs */
	long seed;		/* of the random inputs */
	int nthreads;		/* 0: the cores */
	int isa;		/* enum mi_isa_cap of the models it runs */
	bool qlinear;		/* QLinearConv/QLinearMatMul where possible */
	bool per_channel;	/* weight scales per output channel */
	bool bias_correct;	/* fold the weight rounding's mean shift into biases */
	bool equalize;		/* cross-layer channel equalization first */
	bool mse, mse_act;	/* activation ranges by least error (after readers) */
	double percentile;	/* clip ranges at this percentile of |x| (0: off) */
	int wbits;		/* 7, 8, MI_QUANT_WBITS_MIXED or _AUTO */
	int wclip;		/* weight scales: 0 max|w|, 1 least rounding error, 2
				 * the same weighted by the input variances */
	double min_cos;		/* mixed precision target (0: all int8) */
	int w8fb;		/* --min-cosine: 7-bit weights try 8 bits before
				 * fp32: 1 in the ranking, 2 after the search */
	const char *cost;	/* --min-cosine unit costs: model, profile, macs,
				 * steps (print them for costfit.py, stop) */
	bool keep_round_trips;	/* keep tensors only fp32 nodes read quantized */
	bool no_refine;		/* no refinement back to int8 after the search */
	double search_cos;	/* tests: the search's own target (0: min_cos) */
	bool list_prefixes;	/* tests: judge every prefix of the ranking */
	bool all_fp32;		/* tests: write every unit fp32 */
	int decompose;		/* 1, 2: print the error decomposition, write nothing */
};
void mi_quant_opts_default(struct mi_quant_opts *o);
/* Quantize the ONNX file model into out; prints a summary line on stdout
 * and one-line errors on stderr.  Returns the exit status (0 or 1). */
int mi_quantize(const char *model, const char *out, const struct mi_quant_opts *o);

#endif /* MI_QUANT_H */
