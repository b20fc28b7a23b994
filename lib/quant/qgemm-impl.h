/* SPDX-License-Identifier: MIT */
/* Private to lib/quant's int8 GEMM / convolution files (qgemm*.c,
 * qconv.c, qdw*.c): the kernel tables and jobs they share. */
#ifndef MI_QUANT_QGEMM_IMPL_H
#define MI_QUANT_QGEMM_IMPL_H

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <immintrin.h>
#include "quant/quant.h"

typedef void (*tile_fn)(const int8_t *a, const uint8_t *b, size_t ldb,
			int k4, int32_t *acc);

/*
 * mi_qrequant's rounding (quant.h) for a vector: the nearest integer of
 * the exact product acc * m, an exact half to even.
 *
 * AVX-512 (per-instruction rounding): w = rd(x * m), x = (float)a, is the
 * largest float <= the exact product p where x is exact (|a| < 2^24); as
 * every half-integer below 2^22 is a float, floor(w + 1/2) = floor(p +
 * 1/2) (nearest, halves up; rd(w + 1/2) keeps the floor).  Likewise
 * ceil(ru(x * m) - 1/2) is the nearest, halves down.  They differ only
 * where p is exactly a half: the even one of the two.  The integral
 * clamps commute with both.  Lanes with |a| >= 2^24 (a compare per
 * vector; none in the zoo's convs) are redone by mi_qround_exact.
 */
__attribute__((target("avx512f"), noinline, cold, unused)) static __m512i
mi_qround_slow512(__m512i q, __m512i a, __m512 m, __mmask16 k, float flo, float fhi)
{
	int32_t qa[16], qq[16];
	float qm[16];

	_mm512_storeu_si512(qa, a);
	_mm512_storeu_si512(qq, q);
	_mm512_storeu_ps(qm, m);
	for (int i = 0; i < 16; i++)
		if (k >> i & 1)
			qq[i] = (int32_t)mi_qround_exact(qa[i], qm[i], flo, fhi);
	return _mm512_loadu_si512(qq);
}

/* lanes with |a| >= 2^24: a + 2^24 - 1 > 2^25 - 2 unsigned */
__attribute__((target("avx512f"), always_inline)) static inline __mmask16
mi_qwide512(__m512i a)
{
	return _mm512_cmpgt_epu32_mask(_mm512_add_epi32(a, _mm512_set1_epi32(0xffffff)),
				       _mm512_set1_epi32(0x1fffffe));
}

/* (float)a * m clamped to [lo, hi] (integral; NaN -> lo), rounded as
 * mi_qrequant */
__attribute__((target("avx512f"), always_inline)) static inline __m512i
mi_qrq512(__m512i a, __m512 m, __m512 lo, __m512 hi)
{
	const int rd = _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC;
	const int ru = _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC;
	__m512 x = _mm512_cvtepi32_ps(a), h = _mm512_set1_ps(0.5f);
	__m512 w = _mm512_min_ps(_mm512_max_ps(_mm512_mul_round_ps(x, m, rd), lo), hi);
	__m512 u = _mm512_min_ps(_mm512_max_ps(_mm512_mul_round_ps(x, m, ru), lo), hi);
	__m512i q = _mm512_cvt_roundps_epi32(_mm512_add_round_ps(w, h, rd), rd);
	__m512i qdn = _mm512_cvt_roundps_epi32(_mm512_sub_round_ps(u, h, ru), ru);
	__mmask16 k;

	q = _mm512_mask_and_epi32(q, _mm512_cmpneq_epi32_mask(q, qdn), q, _mm512_set1_epi32(~1));
	k = mi_qwide512(a);
	if (__builtin_expect(k != 0, 0))
		q = mi_qround_slow512(q, a, m, k, _mm512_cvtss_f32(lo), _mm512_cvtss_f32(hi));
	return q;
}

/*
 * AVX2 (no per-instruction rounding): cvt rounds the fp32 products f
 * (clamped by the caller or not) to even; lanes where f is a half-integer
 * (the fp32 product cannot tell the side) or |a| >= 2^24 are redone by
 * mi_qround_exact with the clamp [flo, fhi].  A floor, a subtract and two
 * compares per vector.
 */
__attribute__((target("avx2,fma"), noinline, cold, unused)) static __m256i
mi_qround_slow256(__m256i q, __m256i a, __m256 m, int k, float flo, float fhi)
{
	int32_t qa[8], qq[8];
	float qm[8];

	_mm256_storeu_si256((__m256i *)qa, a);
	_mm256_storeu_si256((__m256i *)qq, q);
	_mm256_storeu_ps(qm, m);
	for (int i = 0; i < 8; i++)
		if (k >> i & 1)
			qq[i] = (int32_t)mi_qround_exact(qa[i], qm[i], flo, fhi);
	return _mm256_loadu_si256((const __m256i *)qq);
}

__attribute__((target("avx2,fma"), always_inline)) static inline __m256i
mi_qround_fix256(__m256i a, __m256 m, __m256 f, float flo, float fhi)
{
	__m256i q = _mm256_cvtps_epi32(f);
	__m256 tie = _mm256_cmp_ps(_mm256_sub_ps(f, _mm256_floor_ps(f)), _mm256_set1_ps(0.5f),
				   _CMP_EQ_OQ);
	/* |a| >= 2^24: a + 2^24 - 1 >= 2^25 - 1 unsigned */
	__m256i b = _mm256_add_epi32(a, _mm256_set1_epi32(0xffffff));
	__m256i wide = _mm256_cmpeq_epi32(_mm256_max_epu32(b, _mm256_set1_epi32(0x1ffffff)), b);
	int k = _mm256_movemask_ps(_mm256_or_ps(tie, _mm256_castsi256_ps(wide)));

	if (__builtin_expect(k != 0, 0))
		q = mi_qround_slow256(q, a, m, k, flo, fhi);
	return q;
}

__attribute__((target("avx2,fma"), always_inline)) static inline __m256i
mi_qrq256(__m256i a, __m256 m, __m256 lo, __m256 hi)
{
	__m256 f = _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(a), m), lo), hi);

	return mi_qround_fix256(a, m, f, _mm256_cvtss_f32(lo), _mm256_cvtss_f32(hi));
}

/*
 * Requantization by saturation, the same bytes with fewer operations: the
 * map f(x) = bytes(sat16(cvt(x)) +sat zy) (saturating packs and add) is
 * nondecreasing wherever cvt does not overflow, and on [flo, fhi] it is
 * the float path's cvt(x) + zy (qg_rq_fits: no saturation there).  A
 * nondecreasing f commutes with the clamp: f(min(max(x, flo), fhi)) =
 * min(max(f(x), f(flo)), f(fhi)), so the two float clamps per 16 sums
 * become two byte clamps per 64 bytes.  cvt cannot overflow when
 * |mult| < 1 (|float(acc)| <= 2^31, the product stays below it); NaN
 * mults fail that test too.  Otherwise (or flo > fhi) the float clamps.
 */
struct rq_sat {
	__m512i zy16, lo8, hi8;
	bool u8;
};

typedef void (*tile_rq_fn)(const int8_t *a, const uint8_t *b, size_t ldb,
			   int k4, const struct mi_qepi *ep, int oc0, int np,
			   uint8_t *out, ptrdiff_t ldo);

typedef void (*epi_fn)(const int32_t *acc, int ldacc, int rows, int np,
		       const struct mi_qepi *ep, int oc0, void *out,
		       ptrdiff_t ldo);

/* depthwise gather tables (qdwt.c) */
struct mi_qdwtab {
	int npv, ng, nent; /* pixel vectors, tap groups, table rows */
	int *p0;           /* [npv + 1] first output pixel of each vector */
	int *ent;          /* [npv] its table row */
	int32_t *delta;    /* [npv] added to the row's window offsets */
	int32_t *base;     /* [nent * ng] window offset in the input plane */
	uint64_t *lmask;   /* [nent * ng] window bytes to load */
	uint64_t *pmask;   /* [nent * ng] gathered bytes that are inside the map */
	uint8_t *idx;      /* [nent * ng][64] window byte of each gathered byte */
	uint32_t *wq;      /* [c/4][ng][4] (depthwise), [oc][c][ng]: the group's four weights */
	int gt[4 * 2 * MI_QDW_KMAX]; /* [ng][4] the taps of each group, -1: none */
	void *mem;
	int nwk; /* dense: weight dwords per output channel (c * ng) */
	struct mi_qweights *aw; /* dense: wq as AMX tiles (k = (c * ng + g) * 4 + b), or NULL */
};

struct kernels {
	tile_fn tile;
	epi_fn epi;
	tile_rq_fn tile_rq; /* NULL: tile + epi */
	bool w16; /* tile takes w->w16 */
	bool split; /* tile takes split_panel_avx2's panel (convs) */
};

struct gemv_job {
	const struct mi_qweights *w;
	const uint8_t *a;
	int lda, ldy, nchunk, bpc;
	const struct mi_qepi *ep;
	void *y;
	epi_fn epi;
	int isa;
};

struct conv_job {
	const struct mi_qconv *cv;
	const uint8_t *xsrc;
	uint8_t flip; /* 0x80 for int8 input */
	uint8_t zx;
	uint8_t *xi;
	size_t hp, wp;
	int npanel;
	int nchunk, bpc; /* output blocks split in nchunk chunks of bpc */
	const struct mi_qepi *ep;
	uint8_t *y;
	struct kernels k;
	uint8_t *ws;
	size_t ws_per;
	int dw_isa;
	bool in_c4;     /* xsrc is C4 */
	bool in_direct; /* 1x1, no pads: read xsrc directly, no reorder */
	bool amx;       /* AMX tiles for pairs of output blocks */
	bool amx_rows;  /* conv_amx_rows_item: no im2col */
	bool dw_defer;  /* depthwise, C4 output, not fused: a quad's sums, then one epilogue */
	bool chan;      /* items chunk-major (MI_QCONV_CHAN) */
	bool rgb;       /* cv->rgb: planar xi, conv_rgb_panel */
	bool blk8;      /* fp32 output blocked by 8 (MI_QCONV_OUT_BLK8) */
};

extern mi_qparallel_for qg_par_for;
extern int qg_par_threads;
extern __thread int qg_call_threads;

bool qg_have_vbmi(void);
bool qg_avx2b_use(const struct mi_qweights *w);
void tile_generic(const int8_t *a, const uint8_t *b, size_t ldb,
			 int k4, int32_t *acc);
__attribute__((target("avx2,fma"))) void
tile_avx2(const int8_t *a, const uint8_t *b, size_t ldb, int k4,
	  int32_t *acc);
__attribute__((target("avx2,fma"))) void
tile_avx2w(const int8_t *a, const uint8_t *b, size_t ldb, int k4, int32_t *acc);
__attribute__((target("avx2,fma"))) void
tile_avx2s(const int8_t *a, const uint8_t *b, size_t ldb, int k4, int32_t *acc);
__attribute__((target("avx2,fma"))) void
tile_avx2w_rq(const int8_t *a, const uint8_t *b, size_t ldb, int k4, const struct mi_qepi *ep,
	      int oc0, int np, uint8_t *out, ptrdiff_t ldo);
__attribute__((target("avx2,fma"))) void
tile_avx2s_rq(const int8_t *a, const uint8_t *b, size_t ldb, int k4, const struct mi_qepi *ep,
	      int oc0, int np, uint8_t *out, ptrdiff_t ldo);
__attribute__((target("avx2"))) void
split_panel_avx2(const uint8_t *b, size_t ldb, int k4, uint8_t *sp);
__attribute__((target("avx2,fma"))) void
tile_avx2b(const int8_t *a, const uint8_t *b, size_t ldb, int k4, int32_t *acc);
__attribute__((target("avx2,fma"))) void
tile_avx2b_rq(const int8_t *a, const uint8_t *b, size_t ldb, int k4, const struct mi_qepi *ep,
	      int oc0, int np, uint8_t *out, ptrdiff_t ldo);
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) void
tile_vnni(const int8_t *a, const uint8_t *b, size_t ldb, int k4,
	  int32_t *acc);
bool qg_rq_fits(const struct mi_qepi *ep);
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) void
tile_vnni_rq(const int8_t *a, const uint8_t *b, size_t ldb, int k4,
	     const struct mi_qepi *ep, int oc0, int np, uint8_t *out,
	     ptrdiff_t ldo);
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) void
rq_acc_avx512(const int32_t *acc, int ldacc, const struct mi_qepi *ep, int oc0, int np,
	      uint8_t *out, ptrdiff_t ldo);
void epi_generic(const int32_t *acc, int ldacc, int rows, int np,
			const struct mi_qepi *ep, int oc0, void *out,
			ptrdiff_t ldo);
__attribute__((target("avx2,fma"))) void
epi_avx2(const int32_t *acc, int ldacc, int rows, int np,
	 const struct mi_qepi *ep, int oc0, void *out, ptrdiff_t ldo);
__attribute__((target("avx512f,avx512bw,avx512vl"))) void
epi_avx512(const int32_t *acc, int ldacc, int rows, int np,
	   const struct mi_qepi *ep, int oc0, void *out, ptrdiff_t ldo);
struct kernels qg_conv_kernels(int isa, const struct mi_qweights *w);
struct kernels qg_kernels_for(int isa, const struct mi_qweights *w);
size_t qg_out_elem(int mode);
bool qg_gemv_isa(int isa);
void qg_gemv_item(void *arg, int item, int tid);
void dwt_free(struct mi_qdwtab *t);
struct mi_qdwtab *dwt_build(const struct mi_qconv_shape *s, size_t nwq_per_group);
void dwt_amx_pack(struct mi_qdwtab *t, const struct mi_qconv_shape *s);
bool dwt_use(const struct mi_qconv *cv, int isa, const struct mi_qepi *ep);
void dwt_run(const struct mi_qconv *cv, const uint8_t *x, uint8_t zx, uint8_t flip,
		    const struct mi_qepi *ep, uint8_t *y);
bool dw_fused(const struct conv_job *j);
void dw_quad_item(void *arg, int item, int tid);
bool dwq_use(const struct conv_job *j);
__attribute__((target("avx2,fma"))) void dwq_item(void *arg, int q, int tid);

/* (inlined into the AVX-512 kernels: VEX-encoded scalar compares, no
 * call into SSE code with the upper zmm state dirty) */
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) static inline bool
rq_sat_ok(const struct mi_qepi *ep, const float *mult, int n)
{
	float lo = ep->mode == MI_QOUT_U8 ? 0.0f : -128.0f;
	float hi = ep->mode == MI_QOUT_U8 ? 255.0f : 127.0f;

	/* qg_rq_fits, and flo <= fhi */
	if ((ep->mode != MI_QOUT_U8 && ep->mode != MI_QOUT_S8) ||
	    !(ep->flo >= lo - (float)ep->zy && ep->fhi <= hi - (float)ep->zy &&
	      ep->zy >= -128 && ep->zy <= 255 && ep->flo <= ep->fhi))
		return false;
	for (int i = 0; i < n; i++)
		if (!(mult[i] < 1.0f && mult[i] > -1.0f))
			return false;
	return true;
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) static inline void
rq_sat_set(struct rq_sat *r, const struct mi_qepi *ep)
{
	/* f(flo), f(fhi): the vector path's rounding (MXCSR) */
	int lo = _mm_cvtss_si32(_mm_set_ss(ep->flo)) + ep->zy;
	int hi = _mm_cvtss_si32(_mm_set_ss(ep->fhi)) + ep->zy;

	r->u8 = ep->mode == MI_QOUT_U8;
	r->zy16 = _mm512_set1_epi16((short)ep->zy);
	r->lo8 = _mm512_set1_epi8((char)lo);
	r->hi8 = _mm512_set1_epi8((char)hi);
}

/* 16 sums (comp added) times mult, rounded: no clamp */
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) static inline __m512i
rq_sat_cvt(__m512i a, __m512 m)
{
	/* mi_qrq512 without the clamps (the packs saturate what they would
	 * clamp: +-2^30 for the wide lanes mi_qround_exact redoes) */
	const int rd = _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC;
	const int ru = _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC;
	__m512 x = _mm512_cvtepi32_ps(a), h = _mm512_set1_ps(0.5f);
	__m512i q = _mm512_cvt_roundps_epi32(
		_mm512_add_round_ps(_mm512_mul_round_ps(x, m, rd), h, rd), rd);
	__m512i qdn = _mm512_cvt_roundps_epi32(
		_mm512_sub_round_ps(_mm512_mul_round_ps(x, m, ru), h, ru), ru);
	__mmask16 k = mi_qwide512(a);

	q = _mm512_mask_and_epi32(q, _mm512_cmpneq_epi32_mask(q, qdn), q, _mm512_set1_epi32(~1));

	if (__builtin_expect(k != 0, 0))
		q = mi_qround_slow512(q, a, m, k, -0x1p30f, 0x1p30f);
	return q;
}

/* Four rq_sat_cvt results -> bytes (per 128-bit lane: 4 of a, b, c, d),
 * clamped. */
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) static inline __m512i
rq_sat_pack(const struct rq_sat *r, __m512i a, __m512i b, __m512i c, __m512i d)
{
	__m512i p0 = _mm512_adds_epi16(_mm512_packs_epi32(a, b), r->zy16);
	__m512i p1 = _mm512_adds_epi16(_mm512_packs_epi32(c, d), r->zy16);

	if (r->u8)
		return _mm512_min_epu8(_mm512_max_epu8(_mm512_packus_epi16(p0, p1), r->lo8), r->hi8);
	return _mm512_min_epi8(_mm512_max_epi8(_mm512_packs_epi16(p0, p1), r->lo8), r->hi8);
}

/* Four channels' sums (comp added) -> 16 C4 pixels (64 bytes) */
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) static inline __m512i
rq_sat_c4(const struct rq_sat *r, __m512i a, __m512i b, __m512i c, __m512i d, float ma,
	  float mb, float mc, float md)
{
	/* per lane: a px 0-3, b px 0-3, ... -> px 0 a b c d, px 1 ... */
	const __m512i tr = _mm512_broadcast_i32x4(_mm_setr_epi8(
		0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));

	return _mm512_shuffle_epi8(rq_sat_pack(r, rq_sat_cvt(a, _mm512_set1_ps(ma)),
					       rq_sat_cvt(b, _mm512_set1_ps(mb)),
					       rq_sat_cvt(c, _mm512_set1_ps(mc)),
					       rq_sat_cvt(d, _mm512_set1_ps(md))), tr);
}

/* Narrow 16 int32 (already in range) to bytes and store n of them.  The
 * empty asm keeps GCC from fusing this into vpmovdb-to-memory, which is
 * microcoded and slow on Zen 4. */
__attribute__((target("avx512f,avx512bw,avx512vl"))) static inline void
store16_u8(uint8_t *dst, __mmask16 m, __m512i q)
{
	__m128i b = _mm512_cvtepi32_epi8(q);

	__asm__("" : "+v"(b));
	_mm_mask_storeu_epi8(dst, m, b);
}

/* Byte 0 of each of n 32-bit lanes to dst + 4 * i (C4 layout). */
__attribute__((target("avx512f,avx512bw,avx512vl"))) static inline void
store16_c4(uint8_t *dst, __mmask16 m, __m512i q)
{
	__mmask64 m64 = 0x1111111111111111ull;

	if (m != 0xffff) /* byte 0 of each active lane: no scalar bit loop */
		m64 = _mm512_test_epi8_mask(_mm512_maskz_set1_epi32(m, 0xff),
					    _mm512_set1_epi32(0xff));
	_mm512_mask_storeu_epi8(dst, m64, q);
}

#endif /* MI_QUANT_QGEMM_IMPL_H */
