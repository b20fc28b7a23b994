// SPDX-License-Identifier: MIT
/*
 * int8 depthwise convolution, the AVX-512 bodies: 3x3 rows with the
 * fused requantization, KxK rows and channels, and the VBMI channel
 * kernel.
 */
#include "quant/qdw-impl.h"

/*
 * SIMD rows, exact in int32: pixels zero-extended to 32-bit lanes are
 * (x, 0) int16 pairs, weights (w, 0) pairs, so vpmaddwd / vpdpwssd give
 * x * w.  Stride 2 widens to 16 bits instead: lane i is the pair
 * (r[2i], r[2i+1]), multiplied by (w0, w1) in one instruction.
 */

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
	__m512i q = _mm512_add_epi32(mi_qrq512(_mm512_add_epi32(a, v->comp), v->mult, v->lo, v->hi),
				     v->zy);

	if (rq->c4)
		store16_c4(rq->out + (size_t)x * 4, m, q);
	else
		store16_u8(rq->out + x, m, q);
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

__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) void
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
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) void
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
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) void
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

/*
 * AVX-512, stride 1 or 2, no dilation: same (x, 0) pair trick as the 3x3
 * rows (stride 2 takes the pair (r[2i], r[2i+1]) times (w, 0)); exact.
 */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) void
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

__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) void
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
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi"))) void
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
