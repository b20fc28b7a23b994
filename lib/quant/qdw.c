// SPDX-License-Identifier: MIT
/*
 * int8 depthwise convolution, 3x3 and KxK rows per ISA, the padded
 * input planes and the per-channel items.
 */
#include "quant/qgemm-impl.h"

/* ---- depthwise 3x3 ------------------------------------------------------ */

/* acc[ox] += sum over 9 taps; rows: 3 input row pointers. */
#define MI_DW_ROW_BODY                                                         \
	{                                                                      \
		for (int ky = 0; ky < 3; ky++) {                               \
			const uint8_t *r = rows[ky];                           \
			int w0 = w[ky * 3], w1 = w[ky * 3 + 1],                \
			    w2 = w[ky * 3 + 2];                                \
			if (sw == 1 && dw == 1) {                              \
				for (int x = 0; x < ow; x++)                   \
					acc[x] += w0 * r[x] + w1 * r[x + 1] +  \
						  w2 * r[x + 2];               \
			} else {                                               \
				for (int x = 0; x < ow; x++)                   \
					acc[x] += w0 * r[x * sw] +             \
						  w1 * r[x * sw + dw] +        \
						  w2 * r[x * sw + 2 * dw];     \
			}                                                      \
		}                                                              \
	}

typedef void (*dw_row_fn)(int32_t *restrict acc, const uint8_t *const *rows,
			  const int8_t *w, int ow, int sw, int dw);

static void dw_row_generic(int32_t *restrict acc, const uint8_t *const *rows,
			   const int8_t *w, int ow, int sw, int dw)
MI_DW_ROW_BODY

/* Scalar tail from x0. */
static void dw_row_tail(int32_t *restrict acc, const uint8_t *const *rows,
			const int8_t *w, int x0, int ow, int sw, int dw)
{
	for (int x = x0; x < ow; x++)
		acc[x] = 0;
	for (int ky = 0; ky < 3; ky++)
		for (int x = x0; x < ow; x++)
			acc[x] += w[ky * 3] * rows[ky][x * sw] +
				  w[ky * 3 + 1] * rows[ky][x * sw + dw] +
				  w[ky * 3 + 2] * rows[ky][x * sw + 2 * dw];
}

/*
 * SIMD rows, exact in int32: pixels zero-extended to 32-bit lanes are
 * (x, 0) int16 pairs, weights (w, 0) pairs, so vpmaddwd / vpdpwssd give
 * x * w.  Stride 2 widens to 16 bits instead: lane i is the pair
 * (r[2i], r[2i+1]), multiplied by (w0, w1) in one instruction.
 */
/* The epilogue fused into the AVX-512 depthwise rows: requantized
 * uint8/int8, or fp32 (MI_QOUT_F32: epi_one's fma and clamps). */
struct dw_rq {
	int32_t comp;
	float mult, flo, fhi;
	int32_t zy;
	uint8_t *out;
	bool c4;  /* out advances 4 bytes per pixel */
	bool f32; /* out holds floats (4 bytes per pixel, planar) */
	float fb; /* fp32 bias (f32) */
};

struct dw_rqv {
	__m512i comp, zy;
	__m512 mult, lo, hi, fb;
};

__attribute__((target("avx512f,avx512bw,avx512vl"))) static inline void
dw_store(int32_t *acc, int x, __mmask16 m, __m512i a, const struct dw_rq *rq,
	 const struct dw_rqv *v)
{
	if (!rq) {
		_mm512_mask_storeu_epi32(acc + x, m, a);
		return;
	}
	__m512 f = _mm512_cvtepi32_ps(_mm512_add_epi32(a, v->comp));

	if (rq->f32) {
		f = _mm512_min_ps(_mm512_max_ps(_mm512_fmadd_ps(f, v->mult, v->fb), v->lo), v->hi);
		_mm512_mask_storeu_ps((float *)(void *)rq->out + x, m, f);
		return;
	}
	f = _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(f, v->mult), v->lo), v->hi);
	if (rq->c4)
		store16_c4(rq->out + (size_t)x * 4, m,
			   _mm512_add_epi32(_mm512_cvtps_epi32(f), v->zy));
	else
		store16_u8(rq->out + x, m, _mm512_add_epi32(_mm512_cvtps_epi32(f), v->zy));
}

/* 3x3 weights as (w, 0) int16 pairs (stride 1) or (w0, w1), (w2, 0) pairs
 * per kernel row (stride 2), broadcast once per channel. */
struct dw_w3 {
	__m512i wv[9];
	__m512i w01[3], w2[3];
};

__attribute__((target("avx512f,avx512bw,avx512vl"))) static inline void
dw_w3_set(struct dw_w3 *W, const int8_t *w, int sw)
{
	if (sw == 1) {
		for (int t = 0; t < 9; t++)
			W->wv[t] = _mm512_set1_epi32((uint16_t)(int16_t)w[t]);
	} else {
		for (int ky = 0; ky < 3; ky++) {
			W->w01[ky] = _mm512_set1_epi32((uint16_t)(int16_t)w[ky * 3] |
						       ((uint32_t)(uint16_t)(int16_t)w[ky * 3 + 1] << 16));
			W->w2[ky] = _mm512_set1_epi32((uint16_t)(int16_t)w[ky * 3 + 2]);
		}
	}
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) static inline void
dw_rqv_set(struct dw_rqv *v, const struct dw_rq *rq)
{
	if (rq) {
		v->comp = _mm512_set1_epi32(rq->comp);
		v->zy = _mm512_set1_epi32(rq->zy);
		v->mult = _mm512_set1_ps(rq->mult);
		v->lo = _mm512_set1_ps(rq->flo);
		v->hi = _mm512_set1_ps(rq->fhi);
		v->fb = _mm512_set1_ps(rq->fb);
	}
}

/* One output row, stride 1 or 2, no dilation. */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"), always_inline)) static inline void
dw3_row_body(int32_t *restrict acc, const uint8_t *const *rows, const struct dw_w3 *W,
	     int ow, int sw, const struct dw_rq *rq, const struct dw_rqv *vp)
{
	int x = 0;
	struct dw_rqv v = *vp;

	if (sw == 1) {
		const __m512i *wv = W->wv;

		/* one accumulator per kernel row: short dependency chains */
		for (; x < ow; x += 16) {
			__mmask16 m = ow - x >= 16 ? 0xffff : (__mmask16)((1u << (ow - x)) - 1);
			const uint8_t *r0 = rows[0] + x, *r1 = rows[1] + x, *r2 = rows[2] + x;
			__m512i a0, a1, a2;

#define MI_DW_LD(r) _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, (r)))
			a0 = _mm512_madd_epi16(MI_DW_LD(r0), wv[0]);
			a1 = _mm512_madd_epi16(MI_DW_LD(r1), wv[3]);
			a2 = _mm512_madd_epi16(MI_DW_LD(r2), wv[6]);
			a0 = _mm512_dpwssd_epi32(a0, MI_DW_LD(r0 + 1), wv[1]);
			a1 = _mm512_dpwssd_epi32(a1, MI_DW_LD(r1 + 1), wv[4]);
			a2 = _mm512_dpwssd_epi32(a2, MI_DW_LD(r2 + 1), wv[7]);
			a0 = _mm512_dpwssd_epi32(a0, MI_DW_LD(r0 + 2), wv[2]);
			a1 = _mm512_dpwssd_epi32(a1, MI_DW_LD(r1 + 2), wv[5]);
			a2 = _mm512_dpwssd_epi32(a2, MI_DW_LD(r2 + 2), wv[8]);
#undef MI_DW_LD
			dw_store(acc, x, m, _mm512_add_epi32(_mm512_add_epi32(a0, a1), a2), rq, &v);
		}
	} else {
		const __m512i *w01 = W->w01, *w2 = W->w2;

		for (; x < ow; x += 16) {
			int n = ow - x >= 16 ? 16 : ow - x;
			__mmask16 m = (__mmask16)((1u << n) - 1);
			__mmask32 m2 = n == 16 ? 0xffffffffu : (__mmask32)((1u << (2 * n)) - 1);
			__m512i a[3];

			for (int ky = 0; ky < 3; ky++) {
				const uint8_t *r = rows[ky] + 2 * x;

				a[ky] = _mm512_madd_epi16(_mm512_cvtepu8_epi16(
					_mm256_maskz_loadu_epi8(m2, r)), w01[ky]);
				/* r[2i + 2] in the low half; the high half's
				 * weight is 0 */
				a[ky] = _mm512_dpwssd_epi32(a[ky], _mm512_cvtepu8_epi16(
					_mm256_maskz_loadu_epi8(m2, r + 2)), w2[ky]);
			}
			dw_store(acc, x, m, _mm512_add_epi32(_mm512_add_epi32(a[0], a[1]), a[2]), rq, &v);
		}
	}
}

__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) static void
dw_row_avx512(int32_t *restrict acc, const uint8_t *const *rows, const int8_t *w,
	      int ow, int sw, int dw)
{
	struct dw_w3 W;
	struct dw_rqv v = { 0 };

	if (dw != 1 || (sw != 1 && sw != 2)) {
		memset(acc, 0, ow * sizeof(int32_t));
		dw_row_generic(acc, rows, w, ow, sw, dw);
		return;
	}
	dw_w3_set(&W, w, sw);
	dw3_row_body(acc, rows, &W, ow, sw, NULL, &v);
}

/* One row with the fused requantization (dilated rows: no channel loop). */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) static void
dw_row_avx512_rq(int32_t *restrict acc, const uint8_t *const *rows, const int8_t *w,
		 int ow, int sw, const struct dw_rq *rq)
{
	struct dw_w3 W;
	struct dw_rqv v;

	dw_w3_set(&W, w, sw);
	dw_rqv_set(&v, rq);
	dw3_row_body(acc, rows, &W, ow, sw, rq, &v);
}

/*
 * A whole 3x3 channel (stride 1 or 2, no dilation) with the requantization
 * fused: weights and epilogue constants are broadcast once per channel, not
 * once per (short) row. xp: the padded input plane (row pitch wp); out
 * advances rowstep bytes per output row.
 */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) static void
dw3_chan_avx512_rq(const uint8_t *xp, size_t wp, const int8_t *w, int oh, int ow, int sh,
		   int sw, struct dw_rq rq, size_t rowstep)
{
	struct dw_w3 W;
	struct dw_rqv v;
	uint8_t *out0 = rq.out;

	dw_w3_set(&W, w, sw);
	dw_rqv_set(&v, &rq);
	for (int oy = 0; oy < oh; oy++) {
		const uint8_t *rows[3];

		for (int ky = 0; ky < 3; ky++)
			rows[ky] = xp + ((size_t)oy * sh + ky) * wp;
		rq.out = out0 + oy * rowstep;
		dw3_row_body(NULL, rows, &W, ow, sw, &rq, &v);
	}
}

__attribute__((target("avx2,fma"))) static void
dw_row_avx2(int32_t *restrict acc, const uint8_t *const *rows, const int8_t *w, int ow,
	    int sw, int dw)
{
	int x = 0;

	if (dw != 1 || (sw != 1 && sw != 2)) {
		memset(acc, 0, ow * sizeof(int32_t));
		dw_row_generic(acc, rows, w, ow, sw, dw);
		return;
	}
	if (sw == 1) {
		__m256i wv[9];

		for (int t = 0; t < 9; t++)
			wv[t] = _mm256_set1_epi32((uint16_t)(int16_t)w[t]);
		for (; x + 8 <= ow; x += 8) {
			__m256i a[3];

			for (int ky = 0; ky < 3; ky++) {
				const uint8_t *r = rows[ky] + x;

				a[ky] = _mm256_madd_epi16(_mm256_cvtepu8_epi32(
					_mm_loadl_epi64((const __m128i *)r)), wv[ky * 3]);
				a[ky] = _mm256_add_epi32(a[ky], _mm256_madd_epi16(_mm256_cvtepu8_epi32(
					_mm_loadl_epi64((const __m128i *)(r + 1))), wv[ky * 3 + 1]));
				a[ky] = _mm256_add_epi32(a[ky], _mm256_madd_epi16(_mm256_cvtepu8_epi32(
					_mm_loadl_epi64((const __m128i *)(r + 2))), wv[ky * 3 + 2]));
			}
			_mm256_storeu_si256((__m256i *)(acc + x),
				_mm256_add_epi32(_mm256_add_epi32(a[0], a[1]), a[2]));
		}
	} else {
		__m256i w01[3], w2[3];

		for (int ky = 0; ky < 3; ky++) {
			w01[ky] = _mm256_set1_epi32((uint16_t)(int16_t)w[ky * 3] |
						    ((uint32_t)(uint16_t)(int16_t)w[ky * 3 + 1] << 16));
			w2[ky] = _mm256_set1_epi32((uint16_t)(int16_t)w[ky * 3 + 2]);
		}
		for (; x + 8 <= ow; x += 8) {
			__m256i a = _mm256_setzero_si256();

			for (int ky = 0; ky < 3; ky++) {
				const uint8_t *r = rows[ky] + 2 * x;

				a = _mm256_add_epi32(a, _mm256_madd_epi16(_mm256_cvtepu8_epi16(
					_mm_loadu_si128((const __m128i *)r)), w01[ky]));
				a = _mm256_add_epi32(a, _mm256_madd_epi16(_mm256_cvtepu8_epi16(
					_mm_loadu_si128((const __m128i *)(r + 2))), w2[ky]));
			}
			_mm256_storeu_si256((__m256i *)(acc + x), a);
		}
	}
	dw_row_tail(acc, rows, w, x, ow, sw, dw);
}

/* ---- depthwise KxK (kernels other than 3x3, up to 7x7) ------------------ */

/* acc[ox] = sum over kh*kw taps; rows: kh input row pointers. */
static void dw_rowk_generic(int32_t *restrict acc, const uint8_t *const *rows,
			    const int8_t *w, int kh, int kw, int ow, int sw, int dw)
{
	memset(acc, 0, ow * sizeof(int32_t));
	for (int ky = 0; ky < kh; ky++)
		for (int kx = 0; kx < kw; kx++) {
			const uint8_t *r = rows[ky] + kx * dw;
			int wv = w[ky * kw + kx];

			for (int x = 0; x < ow; x++)
				acc[x] += wv * r[x * sw];
		}
}

/*
 * AVX2, stride 1 or 2, no dilation: the (x, 0) pairs of dw_row_avx2.  The
 * last (or only: 7-pixel rows) vector reads up to 15 bytes past the row,
 * inside the padded plane's 64-byte slack, and stores its valid lanes.
 */
__attribute__((target("avx2,fma"))) static void
dw_rowk_avx2(int32_t *restrict acc, const uint8_t *const *rows, const int8_t *w, int kh,
	     int kw, int ow, int sw)
{
	for (int x = 0; x < ow; x += 8) {
		__m256i a0 = _mm256_setzero_si256(), a1 = a0;

		for (int ky = 0; ky < kh; ky++)
			for (int kx = 0; kx < kw; kx++) {
				__m256i wv = _mm256_set1_epi32((uint16_t)(int16_t)w[ky * kw + kx]);
				const uint8_t *r = rows[ky] + x * sw + kx;
				__m256i p = sw == 1 ? _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)r)) :
						      _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)r));

				if (kx & 1)
					a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(p, wv));
				else
					a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(p, wv));
			}
		if (x + 8 <= ow) {
			_mm256_storeu_si256((__m256i *)(acc + x), _mm256_add_epi32(a0, a1));
		} else {
			int32_t t[8];

			_mm256_storeu_si256((__m256i *)t, _mm256_add_epi32(a0, a1));
			memcpy(acc + x, t, (size_t)(ow - x) * 4);
		}
	}
}

static int dwchan_cur = -1;

int mi_quant_set_dwchan(int on)
{
	dwchan_cur = !!on;
	return dwchan_cur;
}

/* MI_QUANT_DWCHAN=0: the AVX2 row kernels instead of dwk_chan_avx2 (A/B). */
static bool dwchan_on(void)
{
	return mi_quant_switch(&dwchan_cur, "MI_QUANT_DWCHAN");
}

/* MI_QUANT_DWFULL=0: dwk_chan_avx2 stores a row's last strip with
 * vpmaskmovd (slow on AMD) instead of full vectors (A/B). */
MI_QUANT_SWITCH(dwfull, "MI_QUANT_DWFULL")

/*
 * AVX2, a whole KxK channel (any kernel up to 7x7, stride 1 or 2, no
 * dilation) into int32 rows acc[oy * ow + ox]: int16 pairs times weight
 * pairs by vpmaddwd (exact in int32).  Stride 1: lane i holds (r[i + kx],
 * 0) and the weights (w[kx], 0), one tap per vpmaddwd (interleaving
 * r[kx..] with r[kx + 1..] for two taps per vpmaddwd measured slower on
 * Zen 3).  Stride 2: lane i holds (r[2i + kx], r[2i + kx + 1]) as the
 * 16 bytes lie, and the weights (w[kx], w[kx + 1]) ((w[kx], 0) for the
 * last tap of an odd row): two taps per vpmaddwd, where dw_rowk_avx2
 * paired them with (w[kx], 0).  The weights are broadcast once per
 * channel and four output rows per 8-pixel strip share each weight
 * vector (four independent chains); dw_rowk_avx2 broadcast every weight
 * again for each 8 pixels of each row.  Reads up to 15 bytes past a row,
 * as dw_rowk_avx2 (the padded plane's slack).  Every store is a full
 * vector (full): a row's last strip starts at ow - 8 (rows of 8+), or, on
 * rows narrower than 8, spills up to 7 sums into the next row, which is
 * stored later, or past the plane's last row (the sums' buffer has 64
 * bytes of slack; with dw_defer the next channel's sums follow and are
 * computed later).  Without full (MI_QUANT_DWFULL=0) the last vector
 * stores its valid lanes only (vpmaskmovd, microcoded on Zen).
 */
__attribute__((target("avx2,fma"), always_inline)) static inline void
dwk_chan_avx2_body(const uint8_t *xp, size_t wp, const int8_t *w, int kh, int kw, int oh,
		   int ow, int sh, const int sw, const bool full, int32_t *acc)
{
	__m256i wv[MI_QDW_KMAX * MI_QDW_KMAX];
	/* weight vectors per kernel row: stride 2 pairs taps */
	int np = sw == 1 ? kw : (kw + 1) / 2;

	for (int ky = 0; ky < kh; ky++)
		for (int j = 0; j < np; j++) {
			int kx = sw * j;
			uint32_t hi = sw == 2 && kx + 1 < kw ?
					      (uint16_t)(int16_t)w[ky * kw + kx + 1] : 0;

			wv[ky * np + j] = _mm256_set1_epi32(
				(int)((uint16_t)(int16_t)w[ky * kw + kx] | hi << 16));
		}
	for (int x0 = 0; x0 < ow; x0 += 8) {
		/* full: the last strip of a row 8+ wide moves left onto
		 * the one before it (the same sums again), one narrower
		 * than 8 spills into the next row (stored after it) */
		int x = full && ow >= 8 && x0 + 8 > ow ? ow - 8 : x0;
		int n = full || ow - x >= 8 ? 8 : ow - x;
		__m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(n),
					       _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));

		for (int oy = 0; oy < oh; oy += 4) {
			const uint8_t *r[4];

			for (int i = 0; i < 4; i++) {
				/* rows past the end recompute row oy (not stored) */
				int y = oy + i < oh ? oy + i : oy;

				r[i] = xp + (size_t)y * sh * wp + (size_t)x * sw;
			}
			const uint8_t *r0 = r[0], *r1 = r[1], *r2 = r[2], *r3 = r[3];
			__m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;

#define MI_DWK2_LD(rp)                                                                   \
	(sw == 1 ? _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)((rp) + off)))     \
		 : _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)((rp) + off))))
			for (int ky = 0; ky < kh; ky++)
				for (int j = 0; j < np; j++) {
					__m256i wt = wv[ky * np + j];
					size_t off = (size_t)ky * wp + sw * j;

					a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(MI_DWK2_LD(r0), wt));
					a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(MI_DWK2_LD(r1), wt));
					a2 = _mm256_add_epi32(a2, _mm256_madd_epi16(MI_DWK2_LD(r2), wt));
					a3 = _mm256_add_epi32(a3, _mm256_madd_epi16(MI_DWK2_LD(r3), wt));
				}
#undef MI_DWK2_LD
			__m256i a[4] = { a0, a1, a2, a3 };

			for (int i = 0; i < 4 && oy + i < oh; i++) {
				int32_t *d = acc + (size_t)(oy + i) * ow + x;

				if (n == 8)
					_mm256_storeu_si256((__m256i *)d, a[i]);
				else
					_mm256_maskstore_epi32((int *)d, m, a[i]);
			}
		}
	}
}

/* MI_QUANT_DWVP=0: dwk_chan_avx2 one tap per vpmaddwd at stride 1 (A/B). */
MI_QUANT_SWITCH(dwvp, "MI_QUANT_DWVP")

/*
 * dwk_chan_avx2 at stride 1 (both ways) for K x K kernels, K = 3 or 5,
 * with vertical tap pairs: lane i of P[t] holds the int16 pair (input
 * row oy + t, input row oy + t + 1) at pixel x + i + kx (vpunpcklbw +
 * vpmovzxbw), multiplied by (w[2q][kx], w[2q + 1][kx]) ((w[K-1][kx], 0)
 * for the last pair) it adds two taps of output row oy + t - 2q: the
 * four output rows of a strip share each P, so a kernel column costs
 * 2 (K + 1) / 2 + 2 pair vectors and 4 (K + 1) / 2 vpmaddwd instead of
 * 4 K of each (3x3: 6 and 8 instead of 12 and 12).  The same int32 sums
 * (exact); rows past the plane's last input row are read as that row
 * (weight 0 or sums not stored).  Stores as the body above (full).
 */
__attribute__((target("avx2,fma"), always_inline)) static inline void
dwk_vp_avx2_body(const uint8_t *xp, size_t wp, const int8_t *w, const int k, int oh, int ow,
		 int32_t *acc)
{
	enum { NQ_MAX = 3 };
	const int nq = (k + 1) / 2, np = 2 * nq + 2, ylast = oh + k - 2;
	__m256i wv[NQ_MAX * 5];

	for (int q = 0; q < nq; q++)
		for (int kx = 0; kx < k; kx++) {
			uint32_t hi = 2 * q + 1 < k ? (uint16_t)(int16_t)w[(2 * q + 1) * k + kx] : 0;

			wv[q * k + kx] = _mm256_set1_epi32(
				(int)((uint16_t)(int16_t)w[2 * q * k + kx] | hi << 16));
		}
	for (int x0 = 0; x0 < ow; x0 += 8) {
		int x = ow >= 8 && x0 + 8 > ow ? ow - 8 : x0;

		for (int oy = 0; oy < oh; oy += 4) {
			const uint8_t *r[2 * NQ_MAX + 3];
			__m256i a[4];

			for (int t = 0; t <= np; t++)
				r[t] = xp + (size_t)(oy + t < ylast ? oy + t : ylast) * wp + x;
			for (int i = 0; i < 4; i++)
				a[i] = _mm256_setzero_si256();
#pragma GCC unroll 1
			for (int kx = 0; kx < k; kx++) {
#pragma GCC unroll 8
				for (int t = 0; t < np; t++) {
					__m256i p = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(
						_mm_loadl_epi64((const __m128i *)(r[t] + kx)),
						_mm_loadl_epi64((const __m128i *)(r[t + 1] + kx))));

#pragma GCC unroll 3
					for (int q = 0; q < nq; q++) {
						int i = t - 2 * q;

						if (i >= 0 && i < 4)
							a[i] = _mm256_add_epi32(
								a[i], _mm256_madd_epi16(p, wv[q * k + kx]));
					}
				}
			}
			for (int i = 0; i < 4 && oy + i < oh; i++)
				_mm256_storeu_si256((__m256i *)(acc + (size_t)(oy + i) * ow + x), a[i]);
		}
	}
}

__attribute__((target("avx2,fma"))) static void
dwk_chan_avx2(const uint8_t *xp, size_t wp, const int8_t *w, int kh, int kw, int oh, int ow,
	      int sh, int sw, int32_t *acc)
{
	if (dwfull_on() && dwvp_on() && sw == 1 && sh == 1 && kh == kw && (kh == 3 || kh == 5)) {
		if (kh == 3)
			dwk_vp_avx2_body(xp, wp, w, 3, oh, ow, acc);
		else
			dwk_vp_avx2_body(xp, wp, w, 5, oh, ow, acc);
		return;
	}
	if (dwfull_on() && sw == 1)
		dwk_chan_avx2_body(xp, wp, w, kh, kw, oh, ow, sh, 1, true, acc);
	else if (dwfull_on())
		dwk_chan_avx2_body(xp, wp, w, kh, kw, oh, ow, sh, 2, true, acc);
	else if (sw == 1)
		dwk_chan_avx2_body(xp, wp, w, kh, kw, oh, ow, sh, 1, false, acc);
	else
		dwk_chan_avx2_body(xp, wp, w, kh, kw, oh, ow, sh, 2, false, acc);
}

/*
 * AVX-512, stride 1 or 2, no dilation: same (x, 0) pair trick as the 3x3
 * rows (stride 2 takes the pair (r[2i], r[2i+1]) times (w, 0)); exact.
 */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) static void
dw_rowk_avx512(int32_t *restrict acc, const uint8_t *const *rows, const int8_t *w,
	       int kh, int kw, int ow, int sw, const struct dw_rq *rq)
{
	struct dw_rqv v = { 0 };

	dw_rqv_set(&v, rq);
	for (int x = 0; x < ow; x += 16) {
		int n = ow - x >= 16 ? 16 : ow - x;
		__mmask16 m = (__mmask16)((1u << n) - 1);
		__mmask32 m2 = n == 16 ? 0xffffffffu : (__mmask32)((1u << (2 * n)) - 1);
		__m512i a0 = _mm512_setzero_si512(), a1 = _mm512_setzero_si512();

		for (int ky = 0; ky < kh; ky++) {
			const int8_t *wr = w + ky * kw;
			__m512i a = ky & 1 ? a1 : a0;

			for (int kx = 0; kx < kw; kx++) {
				__m512i wv = _mm512_set1_epi32((uint16_t)(int16_t)wr[kx]), p;

				if (sw == 1)
					p = _mm512_cvtepu8_epi32(
						_mm_maskz_loadu_epi8(m, rows[ky] + x + kx));
				else
					p = _mm512_cvtepu8_epi16(
						_mm256_maskz_loadu_epi8(m2, rows[ky] + 2 * x + kx));
				a = _mm512_dpwssd_epi32(a, p, wv);
			}
			if (ky & 1)
				a1 = a;
			else
				a0 = a;
		}
		dw_store(acc, x, m, _mm512_add_epi32(a0, a1), rq, &v);
	}
}

/*
 * A whole KxK channel (stride 1 or 2, no dilation): four output rows at a
 * time share each tap's weight broadcast and give four independent
 * vpdpwssd chains (rows are short: 7..56 pixels). Fused requantization
 * (rq) or int32 rows into acc. Exact, same sums as dw_rowk_avx512.
 */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"), always_inline)) static inline void
dwk_chan_body(const uint8_t *xp, size_t wp, const int8_t *w, int kh, int kw, int oh, int ow,
	      int sh, const int sw, int32_t *acc, struct dw_rq *rq, size_t rowstep)
{
	struct dw_rqv v = { 0 };
	uint8_t *out0 = rq ? rq->out : NULL;

	dw_rqv_set(&v, rq);
	for (int x = 0; x < ow; x += 16) {
		int n = ow - x >= 16 ? 16 : ow - x;
		__mmask16 m = (__mmask16)((1u << n) - 1);
		__mmask32 m2 = n == 16 ? 0xffffffffu : (__mmask32)((1u << (2 * n)) - 1);

		for (int oy = 0; oy < oh; oy += 4) {
			const uint8_t *r[4];
			__m512i a[4];

			for (int i = 0; i < 4; i++) {
				/* rows past the end recompute row oy (not stored) */
				int y = oy + i < oh ? oy + i : oy;

				r[i] = xp + (size_t)y * sh * wp + (size_t)x * sw;
			}
			/* four named chains: the compiler keeps them in registers */
			const uint8_t *r0 = r[0], *r1 = r[1], *r2 = r[2], *r3 = r[3];
			__m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;

#define MI_DWK_LD(rp)                                                                   \
	(sw == 1 ? _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, (rp) + off))                \
		 : _mm512_cvtepu8_epi16(_mm256_maskz_loadu_epi8(m2, (rp) + off)))
			for (int ky = 0; ky < kh; ky++)
				for (int kx = 0; kx < kw; kx++) {
					__m512i wv = _mm512_set1_epi32((uint16_t)(int16_t)w[ky * kw + kx]);
					size_t off = (size_t)ky * wp + kx;

					a0 = _mm512_dpwssd_epi32(a0, MI_DWK_LD(r0), wv);
					a1 = _mm512_dpwssd_epi32(a1, MI_DWK_LD(r1), wv);
					a2 = _mm512_dpwssd_epi32(a2, MI_DWK_LD(r2), wv);
					a3 = _mm512_dpwssd_epi32(a3, MI_DWK_LD(r3), wv);
				}
#undef MI_DWK_LD
			a[0] = a0;
			a[1] = a1;
			a[2] = a2;
			a[3] = a3;
			for (int i = 0; i < 4 && oy + i < oh; i++) {
				if (rq)
					rq->out = out0 + (size_t)(oy + i) * rowstep;
				dw_store(acc ? acc + (size_t)(oy + i) * ow : NULL, x, m, a[i], rq, &v);
			}
		}
	}
}

__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) static void
dwk_chan_avx512(const uint8_t *xp, size_t wp, const int8_t *w, int kh, int kw, int oh, int ow,
		int sh, int sw, int32_t *acc, struct dw_rq *rq, size_t rowstep)
{
	if (sw == 1)
		dwk_chan_body(xp, wp, w, kh, kw, oh, ow, sh, 1, acc, rq, rowstep);
	else
		dwk_chan_body(xp, wp, w, kh, kw, oh, ow, sh, 2, acc, rq, rowstep);
}

/*
 * A whole depthwise channel (any kernel up to 7x7, stride 1 or 2, no
 * dilation) with vpermb + vpdpbusd: dword lane i of the permuted row holds
 * the input bytes i*sw + 4g .. i*sw + 4g + 3, so one vpdpbusd with the
 * broadcast weights (w[ky][4g..4g+3], zero past kw) adds four taps of 16
 * outputs (uint8 x int8 into int32: exact).  Requantization fused (rq,
 * uint8/int8 out) or int32 rows into acc.  Same sums as dwk_chan_body.
 */
/* The input plane is read unpadded (h x iw, pads pt/pl): masked loads
 * fill the pad bytes with the zero point zx, so no padded copy is made. */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi"))) static void
dw_chan_vbmi(const uint8_t *src, int h, int iw, int pt, int pl, uint8_t zx, const int8_t *w,
	     int kh, int kw, int oh, int ow, int sh, int sw, int32_t *acc, struct dw_rq *rq,
	     size_t rowstep)
{
	const __m512i zxv = _mm512_set1_epi8((char)zx);
	struct dw_rqv v = { 0 };
	uint8_t *out0 = rq ? rq->out : NULL;
	__m512i idx[2], wv[MI_QDW_KMAX][2];
	int ng = (kw + 3) / 4;

	dw_rqv_set(&v, rq);
	for (int g = 0; g < ng; g++) {
		uint8_t ix[64];

		for (int b = 0; b < 64; b++)
			ix[b] = (uint8_t)((b / 4) * sw + 4 * g + b % 4);
		idx[g] = _mm512_loadu_si512(ix);
		for (int ky = 0; ky < kh; ky++) {
			uint32_t d = 0;

			for (int t = 0; t < 4 && 4 * g + t < kw; t++)
				d |= (uint32_t)(uint8_t)w[ky * kw + 4 * g + t] << (8 * t);
			wv[ky][g] = _mm512_set1_epi32((int)d);
		}
	}
	if (ow <= 8) {
		/* narrow maps (7x7): two output rows per vector, lanes 0-7 from
		 * row oy's input rows and lanes 8-15 from row oy+1's (vpermi2b) */
		__m512i idx2[2];
		__mmask16 m = (__mmask16)((1u << ow) - 1);
		int need = (ow - 1) * sw + kw, start = -pl;
		int lo = start < 0 ? -start : 0, hi = iw - start < need ? iw - start : need;
		__mmask64 lm = hi > lo ? (((__mmask64)1 << hi) - 1) & ~(((__mmask64)1 << lo) - 1) : 0;

		for (int g = 0; g < ng; g++) {
			uint8_t ix[64];

			for (int b = 0; b < 64; b++)
				ix[b] = (uint8_t)((b / 32) * 64 + (b / 4 % 8) * sw + 4 * g + b % 4);
			idx2[g] = _mm512_loadu_si512(ix);
		}
		for (int oy = 0; oy < oh; oy += 2) {
			__m512i a0 = _mm512_setzero_si512(), a1 = a0;

			for (int ky = 0; ky < kh; ky++) {
				int iy0 = oy * sh + ky - pt, iy1 = iy0 + sh;
				__m512i r0 = zxv, r1 = zxv;

				if (iy0 >= 0 && iy0 < h)
					r0 = _mm512_mask_loadu_epi8(zxv, lm, src + (ptrdiff_t)iy0 * iw + start);
				if (oy + 1 < oh && iy1 >= 0 && iy1 < h)
					r1 = _mm512_mask_loadu_epi8(zxv, lm, src + (ptrdiff_t)iy1 * iw + start);
				if (ky & 1)
					a1 = _mm512_dpbusd_epi32(a1, _mm512_permutex2var_epi8(r0, idx2[0], r1),
								 wv[ky][0]);
				else
					a0 = _mm512_dpbusd_epi32(a0, _mm512_permutex2var_epi8(r0, idx2[0], r1),
								 wv[ky][0]);
				if (ng > 1)
					a1 = _mm512_dpbusd_epi32(a1, _mm512_permutex2var_epi8(r0, idx2[1], r1),
								 wv[ky][1]);
			}
			a0 = _mm512_add_epi32(a0, a1);
			for (int i = 0; i < 2 && oy + i < oh; i++) {
				if (rq)
					rq->out = out0 + (size_t)(oy + i) * rowstep;
				dw_store(acc ? acc + (size_t)(oy + i) * ow : NULL, 0, m,
					 i ? _mm512_shuffle_i64x2(a0, a0, 0xee) : a0, rq, &v);
			}
		}
		return;
	}
	for (int x = 0; x < ow; x += 16) {
		int n = ow - x >= 16 ? 16 : ow - x;
		__mmask16 m = (__mmask16)((1u << n) - 1);
		int need = (n - 1) * sw + kw; /* input bytes read: <= 37 */
		int start = x * sw - pl;      /* input column of byte 0 */
		int lo = start < 0 ? -start : 0, hi = iw - start < need ? iw - start : need;
		/* bytes lo..hi-1 lie inside the row; the rest are padding */
		__mmask64 lm = hi > lo ? (((__mmask64)1 << hi) - 1) & ~(((__mmask64)1 << lo) - 1) : 0;

		for (int oy = 0; oy < oh; oy++) {
			__m512i a0 = _mm512_setzero_si512(), a1 = a0;

			for (int ky = 0; ky < kh; ky++) {
				int iy = oy * sh + ky - pt;
				__m512i row = zxv;

				if (iy >= 0 && iy < h)
					row = _mm512_mask_loadu_epi8(zxv, lm,
								     src + (ptrdiff_t)iy * iw + start);

				if (ky & 1)
					a1 = _mm512_dpbusd_epi32(a1, _mm512_permutexvar_epi8(idx[0], row),
								 wv[ky][0]);
				else
					a0 = _mm512_dpbusd_epi32(a0, _mm512_permutexvar_epi8(idx[0], row),
								 wv[ky][0]);
				if (ng > 1)
					a1 = _mm512_dpbusd_epi32(a1, _mm512_permutexvar_epi8(idx[1], row),
								 wv[ky][1]);
			}
			if (rq)
				rq->out = out0 + (size_t)oy * rowstep;
			dw_store(acc ? acc + (size_t)oy * ow : NULL, x, m, _mm512_add_epi32(a0, a1),
				 rq, &v);
		}
	}
}

MI_QUANT_SWITCH(dwprep, "MI_QUANT_DWPREP")

/*
 * dw_prep_item's copy on AVX2 with 16-byte vectors, no library calls
 * (MobileNet rows are 7-56 bytes): per row a zero-point vector at the
 * left pad, the data (xor flip) from row + pl, a zero-point vector from
 * the right pad on.  Each store may run up to 16 bytes past the row: into
 * the next row, written after it, or into the plane's 64 bytes of slack.
 * The loads run up to 15 bytes past a source row except on the tensor's
 * last row (copied exactly).
 */
__attribute__((target("avx2"))) static void
dw_prep_avx2(const struct conv_job *j, const struct mi_qconv_shape *s, int c, uint8_t *dst,
	     const uint8_t *src)
{
	__m128i z = _mm_set1_epi8((char)j->zx), flip = _mm_set1_epi8((char)j->flip);

	for (size_t y = 0; y < j->hp; y++) {
		uint8_t *row = dst + y * j->wp;
		int iy = (int)y - s->pt;

		if (iy < 0 || iy >= s->h) {
			for (size_t x = 0; x < j->wp; x += 16)
				_mm_storeu_si128((__m128i *)(row + x), z);
			continue;
		}
		const uint8_t *sp = src + (size_t)iy * s->w;
		bool last = c == s->c - 1 && iy == s->h - 1;
		int x = 0;

		_mm_storeu_si128((__m128i *)row, z);
		for (; x + (last ? 16 : 1) <= s->w; x += 16)
			_mm_storeu_si128((__m128i *)(row + s->pl + x),
					 _mm_xor_si128(_mm_loadu_si128((const __m128i *)(sp + x)),
						       flip));
		for (; x < s->w; x++)
			row[s->pl + x] = sp[x] ^ j->flip;
		_mm_storeu_si128((__m128i *)(row + s->pl + s->w), z);
	}
}

static void dw_prep_item(void *arg, int c, int tid)
{
	struct conv_job *j = arg;
	const struct mi_qconv_shape *s = &j->cv->s;
	uint8_t *dst = j->xi + (size_t)c * (j->hp * j->wp + 64);
	const uint8_t *src = j->xsrc + (size_t)c * s->h * s->w;

	if (j->dw_isa == MI_QISA_AVX2 && s->pl <= 16 && s->pr <= 16 && dwprep_on()) {
		dw_prep_avx2(j, s, c, dst, src);
		return;
	}

	for (size_t y = 0; y < j->hp; y++) {
		uint8_t *row = dst + y * j->wp;
		int iy = (int)y - s->pt;

		if (iy < 0 || iy >= s->h) {
			memset(row, j->zx, j->wp);
			continue;
		}
		/* pads are a byte or two: no memset calls */
		for (int x = 0; x < s->pl; x++)
			row[x] = j->zx;
		for (size_t x = s->pl + s->w; x < j->wp; x++)
			row[x] = j->zx;
		const uint8_t *sp = src + (size_t)iy * s->w;

		if (j->flip)
			for (int x = 0; x < s->w; x++)
				row[s->pl + x] = sp[x] ^ 0x80;
		else
			memcpy(row + s->pl, sp, s->w);
	}
}

/* The epilogues the AVX-512 depthwise kernels fuse (dw_store): uint8 /
 * int8, and planar fp32. */
static bool dw_rq_mode(const struct mi_qepi *ep)
{
	return ep->mode == MI_QOUT_U8 || ep->mode == MI_QOUT_S8 ||
	       (ep->mode == MI_QOUT_F32 && !ep->out_c4);
}

static struct dw_rq dw_rq_of(const struct mi_qepi *ep, int c, uint8_t *out)
{
	return (struct dw_rq){ ep->comp[c], ep->mult[c], ep->flo, ep->fhi, ep->zy, out,
			       ep->out_c4, ep->mode == MI_QOUT_F32,
			       ep->fbias ? ep->fbias[c] : 0.0f };
}

/* Requantization fused into the AVX-512 depthwise kernels. */
bool dw_fused(const struct conv_job *j)
{
	const struct mi_qconv_shape *s = &j->cv->s;

	return j->dw_isa == MI_QISA_AVX512 && s->dw == 1 && (s->sw == 1 || s->sw == 2) &&
	       dw_rq_mode(j->ep);
}

/* The channel runs dw_chan_vbmi on the unpadded input (no dw_prep_item). */
static bool dw_direct(const struct conv_job *j)
{
	const struct mi_qconv_shape *s = &j->cv->s;

	return j->dw_isa == MI_QISA_AVX512 && qg_have_vbmi() && !j->flip && s->dw == 1 &&
	       s->dh == 1 && (s->sw == 1 || s->sw == 2) && dw_rq_mode(j->ep);
}

static void dw_item(void *arg, int c, int tid)
{
	struct conv_job *j = arg;
	const struct mi_qconv *cv = j->cv;
	const struct mi_qconv_shape *s = &cv->s;
	const uint8_t *xp = j->xi + (size_t)c * (j->hp * j->wp + 64);
	size_t npix = (size_t)s->oh * s->ow;
	/* dw_defer: channel c % 4 of the quad's sums */
	int32_t *acc = (int32_t *)(void *)(j->ws + tid * j->ws_per) + j->dw_defer * (c % 4) * npix;
	dw_row_fn row = j->dw_isa == MI_QISA_AVX512 ? dw_row_avx512 :
			j->dw_isa == MI_QISA_AVX2   ? dw_row_avx2 :
						      dw_row_generic;
	size_t es = qg_out_elem(j->ep->mode);
	uint8_t *yc = j->ep->out_c4 ? j->y + (c / 4) * npix * 4 + c % 4 : j->y + c * npix * es;
	size_t rowstep = j->ep->out_c4 ? (size_t)s->ow * 4 : (size_t)s->ow * es;

	bool fused = dw_fused(j);

	if (dw_direct(j)) {
		struct dw_rq rq = dw_rq_of(j->ep, c, yc);

		dw_chan_vbmi(j->xsrc + (size_t)c * s->h * s->w, s->h, s->w, s->pt, s->pl, j->zx,
			     cv->dww + (size_t)c * s->kh * s->kw, s->kh, s->kw, s->oh, s->ow, s->sh,
			     s->sw, NULL, &rq, rowstep);
		return;
	}

	if (j->dw_isa == MI_QISA_AVX2 && dwchan_on() && s->dw == 1 && s->dh == 1 &&
	    (s->sw == 1 || s->sw == 2)) {
		dwk_chan_avx2(xp, j->wp, cv->dww + (size_t)c * s->kh * s->kw, s->kh, s->kw, s->oh,
			      s->ow, s->sh, s->sw, acc);
		if (!j->dw_defer)
			j->k.epi(acc, s->oh * s->ow, 1, s->oh * s->ow, j->ep, c, yc, 0);
		return;
	}
	if (s->kh != 3 || s->kw != 3) {
		const uint8_t *rows[MI_QDW_KMAX];
		const int8_t *wc = cv->dww + (size_t)c * s->kh * s->kw;
		bool simd = j->dw_isa == MI_QISA_AVX512 && s->dw == 1 &&
			    (s->sw == 1 || s->sw == 2);

		if (simd && s->dh == 1) {
			struct dw_rq rq = dw_rq_of(j->ep, c, yc);

			dwk_chan_avx512(xp, j->wp, wc, s->kh, s->kw, s->oh, s->ow, s->sh, s->sw,
					fused ? NULL : acc, fused ? &rq : NULL, rowstep);
			if (!fused && !j->dw_defer)
				j->k.epi(acc, s->oh * s->ow, 1, s->oh * s->ow, j->ep, c, yc, 0);
			return;
		}
		for (int oy = 0; oy < s->oh; oy++) {
			int32_t *ar = acc + (size_t)oy * s->ow;

			for (int ky = 0; ky < s->kh; ky++)
				rows[ky] = xp + ((size_t)oy * s->sh + ky * s->dh) * j->wp;
			if (fused) {
				struct dw_rq rq = dw_rq_of(j->ep, c, yc + oy * rowstep);

				dw_rowk_avx512(ar, rows, wc, s->kh, s->kw, s->ow, s->sw, &rq);
			} else if (simd) {
				dw_rowk_avx512(ar, rows, wc, s->kh, s->kw, s->ow, s->sw, NULL);
			} else if (j->dw_isa == MI_QISA_AVX2 && s->dw == 1 &&
				   (s->sw == 1 || s->sw == 2)) {
				dw_rowk_avx2(ar, rows, wc, s->kh, s->kw, s->ow, s->sw);
			} else {
				dw_rowk_generic(ar, rows, wc, s->kh, s->kw, s->ow, s->sw, s->dw);
			}
		}
		if (!fused && !j->dw_defer)
			j->k.epi(acc, s->oh * s->ow, 1, s->oh * s->ow, j->ep, c, yc, 0);
		return;
	}

	if (fused && s->dh == 1) {
		struct dw_rq rq = dw_rq_of(j->ep, c, yc);

		dw3_chan_avx512_rq(xp, j->wp, cv->dww + c * 9, s->oh, s->ow, s->sh, s->sw, rq,
				   rowstep);
		return;
	}
	for (int oy = 0; oy < s->oh; oy++) {
		const uint8_t *rows[3];
		int32_t *ar = acc + (size_t)oy * s->ow;

		for (int ky = 0; ky < 3; ky++)
			rows[ky] = xp + ((size_t)oy * s->sh + ky * s->dh) * j->wp;
		if (fused) {
			struct dw_rq rq = dw_rq_of(j->ep, c, yc + oy * rowstep);
			dw_row_avx512_rq(ar, rows, cv->dww + c * 9, s->ow, s->sw, &rq);
			continue;
		}
		if (row == dw_row_generic)
			memset(ar, 0, s->ow * sizeof(int32_t));
		if (row == dw_row_avx2 && s->dw == 1 && (s->sw == 1 || s->sw == 2) && s->ow % 8)
			dw_rowk_avx2(ar, rows, cv->dww + c * 9, 3, 3, s->ow, s->sw); /* no scalar tail */
		else
			row(ar, rows, cv->dww + c * 9, s->ow, s->sw, s->dw);
	}
	if (!fused && !j->dw_defer)
		j->k.epi(acc, s->oh * s->ow, 1, s->oh * s->ow, j->ep, c, yc, 0);
}

/*
 * Four channels per work item, each padded and then convolved by the same
 * thread: one pool dispatch per depthwise node instead of two (no barrier
 * between the copy and its only reader), the padded plane is still in
 * this core's cache, and with a C4 output the four channels that share
 * every output cache line are written by one thread (no false sharing).
 */
void dw_quad_item(void *arg, int item, int tid)
{
	struct conv_job *j = arg;
	int c1 = item * 4 + 4 < j->cv->s.c ? item * 4 + 4 : j->cv->s.c;

	bool direct = dw_direct(j);

	for (int c = item * 4; c < c1; c++) {
		if (!direct)
			dw_prep_item(arg, c, tid);
		dw_item(arg, c, tid);
	}
	if (j->dw_defer) { /* the quad's four channels in one C4 epilogue */
		size_t npix = (size_t)j->cv->s.oh * j->cv->s.ow;

		j->k.epi((int32_t *)(void *)(j->ws + tid * j->ws_per), npix, c1 - item * 4, npix,
			 j->ep, item * 4, j->y + (size_t)item * npix * 4, npix);
	}
}

static int dwc4_cur = -1;
static bool dwc4_all;

/* on = 2: every shape the kernel takes (tests), not only the small maps */
int mi_quant_set_dwc4(int on)
{
	dwc4_all = on == 2;
	return dwc4_cur = !!on;
}

/* MI_QUANT_DWC4=0: AVX2 depthwise convs with a C4 output take the
 * per-channel planes (dw_prep_item, dwk_chan_avx2, epi_avx2) (A/B);
 * MI_QUANT_DWC4=2: the quad kernel on every shape it takes (A/B). */
static bool dwc4_on(void)
{
	if (dwc4_cur < 0) {
		const char *e = getenv("MI_QUANT_DWC4");

		dwc4_all = e && !strcmp(e, "2");
	}
	return mi_quant_switch(&dwc4_cur, "MI_QUANT_DWC4");
}

/* MI_QUANT_DWQ5S2=0: 5x5 depthwise convs of stride 2 on the planes (A/B) */
MI_QUANT_SWITCH(dwq5s2, "MI_QUANT_DWQ5S2")

/* The AVX2 quad kernel (dwq_item) applies: uint8/int8 output (C4 by the
 * caller), no dilation, stride 1 or 2, kernels up to MI_QDW_KMAX (used
 * for 3x3 and 5x5 kernels, maps of any size: with the tap pairs shared by
 * the 4 rows of a step it beats the planes there, bench-qconv; 5x5 of
 * stride 2 measured even until the last rows and the weight pairs were
 * vectorized, then 0.098 -> 0.059 ms on 14x14 c576) */
bool mi_qconv_dw_c4(const struct mi_qconv *cv, const struct mi_qepi *ep)
{
	const struct mi_qconv_shape *s = &cv->s;

	return mi_quant_isa() == MI_QISA_AVX2 && cv->depthwise && s->c % 4 == 0 &&
	       (ep->mode == MI_QOUT_U8 || ep->mode == MI_QOUT_S8) && s->dw == 1 &&
	       s->dh == 1 && (s->sw == 1 || s->sw == 2) && (s->sh == 1 || s->sh == 2) &&
	       s->kw <= MI_QDW_KMAX && s->kh <= MI_QDW_KMAX && dwc4_on() &&
	       (dwc4_all || (s->kh == 3 && s->kw == 3) ||
		(s->kh == 5 && s->kw == 5 && ((s->sh == 1 && s->sw == 1) || dwq5s2_on())));
}
