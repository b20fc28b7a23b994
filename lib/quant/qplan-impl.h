/* SPDX-License-Identifier: MIT */
/* Private to lib/quant/qplan*.c: the int8 planner's node state and the
 * helpers its files share. */
#ifndef MI_QUANT_QPLAN_IMPL_H
#define MI_QUANT_QPLAN_IMPL_H

#include <immintrin.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include "cpu/cpu.h"
#include "cpu/cpu_plan.h"
#include "cpu/nchwc.h"
#include "internal.h"
#include "quant/quant.h"
#include "quant/quant-impl.h"

struct qshared {
	void *ws;
	size_t size;
	int refs;
};

struct qact {
	int t; /* quantized tensor */
	float scale;
	int zp;
	int dtype;
};

struct qnode {
	struct mi_cpu_kernel_hdr hdr;
	/* undo information for fini() */
	int orig_ninputs, orig_in0, orig_out0;
	int killed[8], nkilled;
	int orig_in1;
	/* Add / MaxPool on quantized data */
	struct mi_qadd_args add;
	struct mi_qpool_shape pool;
	bool pool_s8;
	bool in_c4; /* conv input in C4 layout (written by the producer) */
	float *lut;       /* Sigmoid / SiLU on a quantized input: 256 entries */
	uint8_t *lut8;    /* the same followed by its QuantizeLinear: byte -> byte */
	struct qact se_y; /* SE Mul: output quantization */
	int64_t se_c, se_hw; /* SE Mul: channels (N * C) and pixels per channel */
	bool se_c4;          /* SE Mul: writes the C4 layout for its int8 conv */
	bool se_in_c4;       /* SE Mul (se_c4 too) / GlobalAveragePool: reads C4 */
	uint8_t *lutb;       /* lut's bytes as four 256-entry planes (vpermi2b lookups) */
	int64_t gap_hw;      /* GlobalAveragePool: pixels per plane (planes: se_c) */
	int gap_vw;          /* ... lib/cpu's sum lanes (its ISA's vector width) */
	bool gap_q;          /* ... quantized output (se_y), else fp32 */
	bool gap_exact;      /* ... every double sum of gap_hw entries exact */
	struct qact qdq;     /* standalone Q / DQ: the quantized side */
	bool qdq_deq;        /* ... a DequantizeLinear */
	/* ... on a 4-D tensor [qdq_n, qdq_c, qdq_hw] (qdq_c 0: other shape):
	 * quantized side in C4 layout (qdq_c4), fp32 side blocked in
	 * qdq_fk->b channels (qdq_fk set; the NCHWc pass decides) */
	int64_t qdq_n, qdq_c, qdq_hw;
	bool qdq_c4, qdq_phys;
	const struct mi_nc_kern *qdq_fk;
	/* conv with fp32 output: written blocked in out_b channels (0:
	 * planar), through planar floats at byte blk_off of the shared
	 * workspace (conv_run; the NCHWc pass decides) */
	int out_b;
	size_t blk_off;
	/* ... and a residual Add (+ act) fused (mi_quant_conv_add): its other
	 * operand is input res_in (0: none), q->ep.res's fields */
	int res_in;
	struct qcat *cat; /* Concat */
	struct qmove *mv; /* moves on bytes (qp_plan_moves) */
	int *cat_orig;    /* Concat: original inputs */
	int nthreads; /* planned with */
	bool px_c4;   /* Add / byte table: its tensors are in C4 layout */
	bool chan;    /* conv: split by output channels (qp_plan_chan) */
	bool is_conv;
	struct mi_qconv cv;
	struct mi_qweights w; /* GEMM */
	int64_t k;            /* GEMM: reduction length */
	bool x_signed;
	int zx;
	int32_t *comp;
	float *mult, *fbias;
	struct mi_qepi ep;
	struct qshared *sh;
};

/* Activation chain after the op: [Relu | Clip] [QuantizeLinear]. */
struct chain {
	struct mi_node *act, *q;
	int out; /* last tensor */
	float lo, hi; /* float clamp (relu/clip) */
	struct qact y;
};

/* one parallel job over a node's uint8 input: qlut_range, qgap_item */
struct qlut_job {
	const struct qnode *q;
	const uint8_t *x;
	void *y;
};

/*
 * GlobalAveragePool(T(xq)) or GlobalAveragePool(DQ(xq)) [-> Q], T a fp32
 * table node (HardSwish / SiLU ahead of a squeeze-excitation): the pool
 * reads the bytes and looks their 256 values up instead of reading a fp32
 * tensor.  When the SE gate Mul reads the bytes too (qse), T's output has
 * no reader left and T is not run at all (kill_unused_tables).  The sums
 * are lib/cpu's global pooling sums (k_sum: blocks of 512 in four VW-lane
 * float accumulators, the lanes and the tail added in double, VW of
 * lib/cpu's ISA), the mean its float division and the QuantizeLinear the
 * same kernel, so the bytes are those of the unfused nodes.
 */
#define QGAP_PLANES 16 /* planes per work item, summed side by side */

struct qmv_run {
	int64_t dst, off, len;
	int src; /* index into the node's inputs */
};

/* A byte table as ((u * m + r) >> sh) + zp saturated to the sink's type,
 * u the source byte (XOR 0x80 when int8: flip) as unsigned. */
struct qmv_aff {
	int32_t m, r, sh, zp; /* zp: the sink's, added after the shift */
	uint8_t flip;
};

struct qmv_out {
	int nruns;
	struct qmv_run *runs;
	uint8_t *tab;  /* [ninputs][256] */
	uint8_t *tel;  /* [ninputs][256]: tab as qmv_lut's XOR-telescoped slices */
	struct qmv_aff *aff; /* [ninputs]: tab in fixed point (qmv_aff_fit), or NULL */
	bool *ident;   /* [ninputs]: a copy */
	int64_t numel;
	/* 4-D output whose every channel plane is one run: the planes'
	 * sources (pl_src, pl_off: n * c + channel), so it can write C4 */
	int64_t c, hw;
	int *pl_src;
	int64_t *pl_off;
	bool c4; /* writes the C4 layout (qp_plan_c4_tensors) */
	bool s8y; /* the sink is int8 */
	struct qact *deq; /* fp32 output (an fp32 node reads it): [ninputs] DQs */
};

struct qmove {
	int nout;
	struct qmv_out out[MI_MAX_DIMS];
	int orig_nin, orig_nout, *orig_in, *orig_out;
	int *killed, nkilled;
	int *consts, nconsts; /* Shape outputs flagged constant meanwhile */
};

#define QCAT_MAX 16

struct qcat {
	int n, axis;
	struct qact in[QCAT_MAX];
	struct qact y;
};

/* t must exist as itself after planning, dense and planar: a graph
 * output, or a tensor a device job reads or writes (MI_TF_DENSE). */
static inline bool qp_kept(const struct mi_tensor *t)
{
	return t->flags & (MI_TF_OUTPUT | MI_TF_DENSE);
}

extern int qp_pool_threads;
extern __thread int qp_cur_threads;
extern int64_t qp_shared_need;

void qp_pool_for(int n, mi_qpar_fn fn, void *arg);
void qp_par_range(int nthreads, int64_t n, int64_t min,
		      void (*fn)(void *arg, int64_t b, int64_t e), void *arg);
void qp_par_rows(int nthreads, int64_t n, int64_t row, int64_t min,
		     void (*fn)(void *arg, int64_t b, int64_t e), void *arg);
int64_t qp_px_row(const struct mi_tensor *t, bool c4);
void qnode_free(struct qnode *q);
void qnode_fini(struct mi_graph *g, struct mi_node *n);
bool qp_const_t(const struct mi_tensor *t);
struct mi_node *qp_producer(struct mi_graph *g, int t, const char *op);
bool qp_act_params(struct mi_graph *g, struct mi_node *n, int xi, int si, int zi,
		       struct qact *a);
bool qp_q_params(struct mi_graph *g, struct mi_node *q, struct qact *a);
void qp_follow_chain(struct mi_graph *g, int t, struct chain *c);
struct qnode *qnode_new(int (*run)(struct mi_graph *, struct mi_node *));
void qdq_dims(struct qnode *q, const struct mi_tensor *t);
bool qdq_like(const struct qnode *q);
void qp_kill(struct mi_graph *g, struct qnode *q, struct mi_node *p);
int qp_skip(const struct mi_node *n, const char *why);
int qadd_run(struct mi_graph *g, struct mi_node *n);
int qpool_run(struct mi_graph *g, struct mi_node *n);
bool qp_same_q(const struct qact *a, const struct qact *b);
int try_qadd(struct mi_graph *g, struct mi_node *n);
int try_qpool(struct mi_graph *g, struct mi_node *n);
bool qp_have_vbmi(void);
void qp_lut8_any(const uint8_t *x, const uint8_t *lut, int64_t n, uint8_t *y);
void qp_lut_f32(const struct qnode *q, const uint8_t *x, int64_t n, float *y);
int qlut_run(struct mi_graph *g, struct mi_node *n);
int try_qlut(struct mi_graph *g, struct mi_node *n);
void qp_c4_apart(const uint8_t *src, int64_t n, uint8_t *d, int64_t ds);
int qse_run(struct mi_graph *g, struct mi_node *n);
struct qnode *qnode_new_lut(int (*run)(struct mi_graph *, struct mi_node *),
				   const float *lut, const struct qact *a);
int try_qse(struct mi_graph *g, struct mi_node *n);
int qgap_run(struct mi_graph *g, struct mi_node *n);
int try_qgap(struct mi_graph *g, struct mi_node *n);
void kill_unused_tables(struct mi_graph *g);
void qdq_deq(const struct qnode *q, const uint8_t *x, int64_t n, float *y);
bool qdq_layout_run(const struct qnode *q, const void *x, void *y);
int qdq_run(struct mi_graph *g, struct mi_node *n);
int try_qdq_op(struct mi_graph *g, struct mi_node *n);
int qmv_run(struct mi_graph *g, struct mi_node *n);
bool qmv_c4_writer(const struct mi_node *n);
void qmove_free(struct qmove *m);
void qmove_undo(struct mi_graph *g, struct mi_node *n, struct qmove *m);
int qp_plan_moves(struct mi_graph *g);
int qcat_run(struct mi_graph *g, struct mi_node *n);
int try_qconcat(struct mi_graph *g, struct mi_node *n);
void qp_plan_c4_tensors(struct mi_graph *g);
void qp_plan_c4(struct mi_graph *g);
void qp_plan_chan(struct mi_graph *g);

/*
 * lut[x[0..7]] as a vector from eight scalar loads (vmovss + vinsertps):
 * on Zen 3 ~1.5x the rate of one vgatherdps of the same eight entries
 * (qse_direct_avx2, gap_sums_avx2 and lut_avx2 take it).
 */
__attribute__((target("avx2"), always_inline)) static inline __m256
lut8x_avx2(const float *lut, const uint8_t *x)
{
	return _mm256_setr_ps(lut[x[0]], lut[x[1]], lut[x[2]], lut[x[3]], lut[x[4]], lut[x[5]],
			      lut[x[6]], lut[x[7]]);
}

/* lut[x[0]], lut[x[4]], .., lut[x[28]]: eight pixels of one channel of a
 * C4 quad */
__attribute__((target("avx2"), always_inline)) static inline __m256
lut8x4_avx2(const float *lut, const uint8_t *x)
{
	return _mm256_setr_ps(lut[x[0]], lut[x[4]], lut[x[8]], lut[x[12]], lut[x[16]],
			      lut[x[20]], lut[x[24]], lut[x[28]]);
}

/* One step of it: the 32 bytes k looked up in the slices d. */
__attribute__((target("avx2"))) static inline __m256i tel32_avx2(const __m256i *d, __m256i k)
{
	const __m256i s16 = _mm256_set1_epi8(16), hb = _mm256_set1_epi8((char)0x80);
	__m256i a = k, b = _mm256_xor_si256(k, hb);
	__m256i rl = _mm256_shuffle_epi8(d[0], a), rh = _mm256_shuffle_epi8(d[8], b);

#pragma GCC unroll 7
	for (int j = 1; j < 8; j++) {
		a = _mm256_sub_epi8(a, s16);
		b = _mm256_sub_epi8(b, s16);
		rl = _mm256_xor_si256(rl, _mm256_shuffle_epi8(d[j], a));
		rh = _mm256_xor_si256(rh, _mm256_shuffle_epi8(d[8 + j], b));
	}
	return _mm256_blendv_epi8(rl, rh, k);
}

/* Byte order that comes out in order after an 8-bit then a 16-bit unpack
 * of four vectors: position 16L + 4v + m takes byte 16v + 4L + m. */
__attribute__((target("avx512f,avx512bw"), always_inline)) static inline __m512i lane_perm(void)
{
	return _mm512_set_epi8(63, 62, 61, 60, 47, 46, 45, 44, 31, 30, 29, 28, 15, 14, 13, 12,
			       59, 58, 57, 56, 43, 42, 41, 40, 27, 26, 25, 24, 11, 10, 9, 8,
			       55, 54, 53, 52, 39, 38, 37, 36, 23, 22, 21, 20, 7, 6, 5, 4,
			       51, 50, 49, 48, 35, 34, 33, 32, 19, 18, 17, 16, 3, 2, 1, 0);
}

/*
 * lut[x[0..63]] as four vectors of 16 floats, in order (v[0] = entries of
 * x[0..15], ...), without gathers: each byte plane is two 128-entry
 * vpermi2b lookups picked by bit 7, the planes interleaved into dwords.
 * Unpacking works within 128-bit lanes, so the indices are first permuted
 * (position 16L + 4v + m takes x[16v + 4L + m]) to come out in order.
 */
__attribute__((target("avx512f,avx512bw,avx512vbmi"), always_inline)) static inline void
lut32_vbmi(const __m512i t[16], __m512i x, __m512 v[4])
{
	__m512i k = _mm512_permutexvar_epi8(lane_perm(), x), b[4];
	__mmask64 hi = _mm512_movepi8_mask(k);

#pragma GCC unroll 4
	for (int p = 0; p < 4; p++)
		b[p] = _mm512_mask_blend_epi8(hi, _mm512_permutex2var_epi8(t[4 * p], k, t[4 * p + 1]),
					      _mm512_permutex2var_epi8(t[4 * p + 2], k, t[4 * p + 3]));
	__m512i w0 = _mm512_unpacklo_epi8(b[0], b[1]), w1 = _mm512_unpackhi_epi8(b[0], b[1]);
	__m512i w2 = _mm512_unpacklo_epi8(b[2], b[3]), w3 = _mm512_unpackhi_epi8(b[2], b[3]);

	v[0] = _mm512_castsi512_ps(_mm512_unpacklo_epi16(w0, w2));
	v[1] = _mm512_castsi512_ps(_mm512_unpackhi_epi16(w0, w2));
	v[2] = _mm512_castsi512_ps(_mm512_unpacklo_epi16(w1, w3));
	v[3] = _mm512_castsi512_ps(_mm512_unpackhi_epi16(w1, w3));
}

__attribute__((target("avx512f,avx512bw,avx512vbmi"), always_inline)) static inline void
lut32_load(const uint8_t *planes, __m512i t[16])
{
#pragma GCC unroll 16
	for (int i = 0; i < 16; i++)
		t[i] = _mm512_load_si512(planes + 64 * i);
}

/* The layout negotiation of lib/quant's nodes with lib/cpu's blocked pass
 * (qplan_qdq.c); every qnode carries it in hdr.lops. */
extern const struct mi_layout_ops qnode_lops;

/* n was planned by lib/quant (its priv is a struct qnode): known by the
 * header's fini, which only lib/quant's nodes have. */
static inline bool qnode_is(const struct mi_node *n)
{
	const struct mi_cpu_kernel_hdr *h = n->priv;

	return h && h->fini == qnode_fini;
}

#endif /* MI_QUANT_QPLAN_IMPL_H */
