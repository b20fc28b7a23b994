// SPDX-License-Identifier: MIT
/*
 * int8 depthwise convolution, the AVX2 bodies: 3x3 and KxK rows, the
 * whole-channel kernel (dwk_chan_avx2) and the padded input planes.
 */
#include "quant/qdw-impl.h"

__attribute__((target("avx2,fma"))) void
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
/*
 * AVX2, stride 1 or 2, no dilation: the (x, 0) pairs of dw_row_avx2.  The
 * last (or only: 7-pixel rows) vector reads up to 15 bytes past the row,
 * inside the padded plane's 64-byte slack, and stores its valid lanes.
 */
__attribute__((target("avx2,fma"))) void
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
 * vector: a row's last strip starts at ow - 8 (rows of 8+), or, on
 * rows narrower than 8, spills up to 7 sums into the next row, which is
 * stored later, or past the plane's last row (the sums' buffer has 64
 * bytes of slack; with dw_defer the next channel's sums follow and are
 * computed later); no masked stores (vpmaskmovd, microcoded on Zen).
 */
__attribute__((target("avx2,fma"), always_inline)) static inline void
dwk_chan_avx2_body(const uint8_t *xp, size_t wp, const int8_t *w, int kh, int kw, int oh,
		   int ow, int sh, const int sw, int32_t *acc)
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
		/* the last strip of a row 8+ wide moves left onto the one
		 * before it (the same sums again), one narrower than 8
		 * spills into the next row (stored after it) */
		int x = ow >= 8 && x0 + 8 > ow ? ow - 8 : x0;

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

				_mm256_storeu_si256((__m256i *)d, a[i]);
			}
		}
	}
}

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
 * (weight 0 or sums not stored).  Stores as the body above (full vectors).
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

__attribute__((target("avx2,fma"))) void
dwk_chan_avx2(const uint8_t *xp, size_t wp, const int8_t *w, int kh, int kw, int oh, int ow,
	      int sh, int sw, int32_t *acc)
{
	if (sw == 1 && sh == 1 && kh == kw && (kh == 3 || kh == 5)) {
		if (kh == 3)
			dwk_vp_avx2_body(xp, wp, w, 3, oh, ow, acc);
		else
			dwk_vp_avx2_body(xp, wp, w, 5, oh, ow, acc);
		return;
	}
	if (sw == 1)
		dwk_chan_avx2_body(xp, wp, w, kh, kw, oh, ow, sh, 1, acc);
	else
		dwk_chan_avx2_body(xp, wp, w, kh, kw, oh, ow, sh, 2, acc);
}

/*
 * dw_prep_item's copy on AVX2 with 16-byte vectors, no library calls
 * (MobileNet rows are 7-56 bytes): per row a zero-point vector at the
 * left pad, the data (xor flip) from row + pl, a zero-point vector from
 * the right pad on.  Each store may run up to 16 bytes past the row: into
 * the next row, written after it, or into the plane's 64 bytes of slack.
 * The loads run up to 15 bytes past a source row except on the tensor's
 * last row (copied exactly).
 */
__attribute__((target("avx2"))) void
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
