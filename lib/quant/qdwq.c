// SPDX-License-Identifier: MIT
/*
 * int8 depthwise convolution on C4 quads (AVX2): four channels side by
 * side, reading and writing the C4 layout.
 */
#include "quant/qgemm-impl.h"

bool dwq_use(const struct conv_job *j)
{
	return j->dw_isa == MI_QISA_AVX2 && j->ep->out_c4 && mi_qconv_dw_c4(j->cv, j->ep);
}

/*
 * Pad a quad of four channels into C4 pixels (4 bytes, channel c % 4 at
 * byte c % 4): hp rows of wp pixels, zero point in the pads, input ^ flip.
 * Planar input: 16 pixels per step, the four planes' rows interleaved by
 * vpunpck; C4 input (in_c4): the quad plane's rows copied, 4 pixels per
 * step.  Loads run up to 15 bytes past a source row except on the
 * tensor's last bytes (copied exactly); stores up to 16 bytes past a row
 * (into the next row, written after it, or the buffer's slack).
 */
__attribute__((target("avx2"))) static void
dwq_prep_avx2(const struct conv_job *j, int q, uint8_t *dst)
{
	const struct mi_qconv_shape *s = &j->cv->s;
	__m128i z = _mm_set1_epi8((char)j->zx), flip = _mm_set1_epi8((char)j->flip);
	size_t plane = (size_t)s->h * s->w;
	bool lastq = 4 * q + 4 >= s->c;

	for (size_t y = 0; y < j->hp; y++) {
		uint8_t *row = dst + y * j->wp * 4;
		int iy = (int)y - s->pt;

		if (iy < 0 || iy >= s->h) {
			for (size_t x = 0; x < j->wp * 4; x += 16)
				_mm_storeu_si128((__m128i *)(row + x), z);
			continue;
		}
		uint8_t *d = row + (size_t)s->pl * 4;
		bool last = lastq && iy == s->h - 1;
		int x = 0;

		for (int p = 0; p < s->pl; p += 4)
			_mm_storeu_si128((__m128i *)(row + 4 * p), z);
		if (j->in_c4) {
			const uint8_t *sp = j->xsrc + (size_t)q * plane * 4 + (size_t)iy * s->w * 4;

			for (; x + (last ? 4 : 1) <= s->w; x += 4)
				_mm_storeu_si128((__m128i *)(d + 4 * x),
						 _mm_xor_si128(_mm_loadu_si128((const void *)(sp + 4 * x)),
							       flip));
			for (; x < s->w; x++)
				for (int k = 0; k < 4; k++)
					d[4 * x + k] = sp[4 * x + k] ^ j->flip;
		} else {
			const uint8_t *sp = j->xsrc + (size_t)4 * q * plane + (size_t)iy * s->w;

			for (; x + (last ? 16 : 1) <= s->w; x += 16) {
				__m128i c0 = _mm_xor_si128(_mm_loadu_si128((const void *)(sp + x)), flip);
				__m128i c1 = _mm_xor_si128(
					_mm_loadu_si128((const void *)(sp + plane + x)), flip);
				__m128i c2 = _mm_xor_si128(
					_mm_loadu_si128((const void *)(sp + 2 * plane + x)), flip);
				__m128i c3 = _mm_xor_si128(
					_mm_loadu_si128((const void *)(sp + 3 * plane + x)), flip);
				__m128i a0 = _mm_unpacklo_epi8(c0, c1), a1 = _mm_unpackhi_epi8(c0, c1);
				__m128i b0 = _mm_unpacklo_epi8(c2, c3), b1 = _mm_unpackhi_epi8(c2, c3);
				uint8_t *o = d + 4 * x;

				_mm_storeu_si128((__m128i *)o, _mm_unpacklo_epi16(a0, b0));
				_mm_storeu_si128((__m128i *)(o + 16), _mm_unpackhi_epi16(a0, b0));
				_mm_storeu_si128((__m128i *)(o + 32), _mm_unpacklo_epi16(a1, b1));
				_mm_storeu_si128((__m128i *)(o + 48), _mm_unpackhi_epi16(a1, b1));
			}
			for (; x < s->w; x++)
				for (int k = 0; k < 4; k++)
					d[4 * x + k] = sp[k * plane + x] ^ j->flip;
		}
		for (int p = s->pl + s->w; p < (int)j->wp; p += 4)
			_mm_storeu_si128((__m128i *)(row + 4 * p), z);
	}
}

/*
 * Sums of 4 output rows of dwq_avx2_body (all < oh) at pixels x, x + 1
 * (r0: the first row's input at pixel sw x): input row t of the step
 * (t < 3 sh + kh) is kernel row t - sh i of output row i, so each of its
 * tap-pair vectors (vbroadcasti128 + vpshufb) is built once and feeds
 * every output row that reads it (3x3, stride 1: 12 instead of 24).
 */
__attribute__((target("avx2,fma"), always_inline)) static inline void
dwq_avx2_rows4(const uint8_t *r0, size_t wp, const __m256i *wv, const int kh, const int np,
	       const int sh, const __m256i sel, __m256i a[4])
{
	for (int i = 0; i < 4; i++)
		a[i] = _mm256_setzero_si256();
#pragma GCC unroll 32
	for (int t = 0; t < 3 * sh + kh; t++) {
#pragma GCC unroll 8
		for (int jp = 0; jp < np; jp++) {
			__m256i p = _mm256_shuffle_epi8(
				_mm256_broadcastsi128_si256(_mm_loadu_si128(
					(const __m128i *)(r0 + ((size_t)t * wp + 2 * jp) * 4))),
				sel);

#pragma GCC unroll 4
			for (int i = 0; i < 4; i++) {
				int ky = t - sh * i;

				if (ky >= 0 && ky < kh)
					a[i] = _mm256_add_epi32(
						a[i], _mm256_madd_epi16(p, wv[ky * np + jp]));
			}
		}
	}
}

/*
 * dwq_avx2_rows4 for the last n = 1..3 output rows of a map (oh % 4):
 * input rows t < (n - 1) sh + kh only (the padded plane ends there), each
 * tap-pair vector built once for the n rows that read it, the sums in
 * registers (n constant after inlining: the loops unroll)
 */
__attribute__((target("avx2,fma"), always_inline)) static inline void
dwq_avx2_rowsn(const uint8_t *r0, size_t wp, const __m256i *wv, const int kh, const int np,
	       const int sh, const __m256i sel, __m256i a[4], const int n)
{
	for (int i = 0; i < n; i++)
		a[i] = _mm256_setzero_si256();
#pragma GCC unroll 32
	for (int t = 0; t < (n - 1) * sh + kh; t++) {
#pragma GCC unroll 8
		for (int jp = 0; jp < np; jp++) {
			__m256i p = _mm256_shuffle_epi8(
				_mm256_broadcastsi128_si256(_mm_loadu_si128(
					(const __m128i *)(r0 + ((size_t)t * wp + 2 * jp) * 4))),
				sel);

#pragma GCC unroll 4
			for (int i = 0; i < n; i++) {
				int ky = t - sh * i;

				if (ky >= 0 && ky < kh)
					a[i] = _mm256_add_epi32(
						a[i], _mm256_madd_epi16(p, wv[ky * np + jp]));
			}
		}
	}
}

/* requantize one row's sums (2 C4 pixels) and store them (one if !two) */
__attribute__((target("avx2,fma"), always_inline)) static inline void
dwq_avx2_store(__m256i a, const __m256i comp, const __m256 mult, const __m256 lo,
	       const __m256 hi, const __m256i zy, const __m256i lowb, uint8_t *d, bool two)
{
	__m256i qv = _mm256_add_epi32(mi_qrq256(_mm256_add_epi32(a, comp), mult, lo, hi), zy);

	qv = _mm256_shuffle_epi8(qv, lowb);
	__m128i b = _mm_unpacklo_epi32(_mm256_castsi256_si128(qv), _mm256_extracti128_si256(qv, 1));

	if (two)
		_mm_storel_epi64((__m128i *)d, b);
	else
		_mm_storeu_si32(d, b);
}

/*
 * AVX2 depthwise conv of one channel quad in C4 lanes: lane i of a
 * vector is output pixel x + i / 4, channel i % 4.  Taps (kx, kx + 1) of
 * a kernel row make one int16 pair per lane (one vbroadcasti128 of 4
 * input pixels and a vpshufb that picks and zero-extends the pair: stride
 * 1 pixels (kx, kx + 1) for x and (kx + 1, kx + 2) for x + 1, stride 2
 * (kx, kx + 1) and (kx + 2, kx + 3)), times the channels' weight pairs
 * ((w[kx], 0) for the last tap of an odd row) by vpmaddwd: exact int32
 * sums, as the planar kernels.  Four output rows per step share the
 * weight vectors; the sums are requantized in registers with epi_avx2's
 * float operations (+ comp, * mult, max flo, min hi, round, + zy, low
 * byte) and stored as two C4 pixels (8 bytes), the last pixel of an odd
 * row alone.  xq: dwq_prep_avx2's buffer (reads up to 3 pixels past a
 * row: its next row or the buffer's slack; those lanes meet zero weights
 * or are not stored).
 */
__attribute__((target("avx2,fma"), always_inline)) static inline void
dwq_avx2_body(const uint8_t *xq, size_t wp, const __m256i *wv, const int kh, const int kw,
	      int oh, int ow, int sh, const int sw, const __m256i comp, const __m256 mult,
	      const struct mi_qepi *ep, uint8_t *out)
{
	const int np = (kw + 1) / 2;
	__m256i sel = sw == 1 ? _mm256_setr_epi8(0, -1, 4, -1, 1, -1, 5, -1, 2, -1, 6, -1, 3, -1,
						  7, -1, 4, -1, 8, -1, 5, -1, 9, -1, 6, -1, 10,
						  -1, 7, -1, 11, -1) :
				_mm256_setr_epi8(0, -1, 4, -1, 1, -1, 5, -1, 2, -1, 6, -1, 3, -1,
						 7, -1, 8, -1, 12, -1, 9, -1, 13, -1, 10, -1, 14,
						 -1, 11, -1, 15, -1);
	__m256 lo = _mm256_set1_ps(ep->flo), hi = _mm256_set1_ps(ep->fhi);
	__m256i zy = _mm256_set1_epi32(ep->zy);
	__m256i lowb = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
					-1, 0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
					-1, -1);

	int oy = 0;

	/* full steps of 4 rows: each input row's tap-pair vectors once */
	for (; oy + 4 <= oh; oy += 4) {
		const uint8_t *r0 = xq + (size_t)oy * sh * wp * 4;

		for (int x = 0; x < ow; x += 2) {
			__m256i a[4];

			if (sh == 1)
				dwq_avx2_rows4(r0 + (size_t)sw * x * 4, wp, wv, kh, np, 1, sel, a);
			else
				dwq_avx2_rows4(r0 + (size_t)sw * x * 4, wp, wv, kh, np, 2, sel, a);
			/* 3x3: the four rows' stores unrolled keep a[] in
			 * registers (56x56-112x112 maps ~9% faster; 5x5 kernels
			 * ~5% slower so, register pressure) */
			if (kh <= 3) {
#pragma GCC unroll 4
				for (int i = 0; i < 4; i++)
					dwq_avx2_store(a[i], comp, mult, lo, hi, zy, lowb,
						       out + ((size_t)(oy + i) * ow + x) * 4,
						       x + 1 < ow);
			} else {
				for (int i = 0; i < 4; i++)
					dwq_avx2_store(a[i], comp, mult, lo, hi, zy, lowb,
						       out + ((size_t)(oy + i) * ow + x) * 4,
						       x + 1 < ow);
			}
		}
	}
	/* the last 1-3 rows in one step, tap pairs shared */
	if (oy < oh) {
		const uint8_t *r0 = xq + (size_t)oy * sh * wp * 4;
		int n = oh - oy;

		for (int x = 0; x < ow; x += 2) {
			const uint8_t *rx = r0 + (size_t)sw * x * 4;
			__m256i a[4];

			if (n == 3 && sh == 1)
				dwq_avx2_rowsn(rx, wp, wv, kh, np, 1, sel, a, 3);
			else if (n == 3)
				dwq_avx2_rowsn(rx, wp, wv, kh, np, 2, sel, a, 3);
			else if (n == 2 && sh == 1)
				dwq_avx2_rowsn(rx, wp, wv, kh, np, 1, sel, a, 2);
			else if (n == 2)
				dwq_avx2_rowsn(rx, wp, wv, kh, np, 2, sel, a, 2);
			else
				dwq_avx2_rowsn(rx, wp, wv, kh, np, 1, sel, a, 1);
			for (int i = 0; i < n; i++)
				dwq_avx2_store(a[i], comp, mult, lo, hi, zy, lowb,
					       out + ((size_t)(oy + i) * ow + x) * 4, x + 1 < ow);
		}
	}
}

/*
 * The weight pair vectors of a quad: wv[ky np + jp] lane l holds
 * (w[c][ky][2 jp], w[c][ky][2 jp + 1]) of channel c = l % 4, 0 past kw.
 * Each kernel row of the four channels is loaded as 8 bytes (masked to
 * kw), the 16-bit pairs transposed by two rounds of vpunpck (channel
 * quads of pair jp in 8 bytes) and sign-extended to int16: the scalar
 * loop's values.
 */
__attribute__((target("avx2"))) static void dwq_wpairs_avx2(const int8_t *w, int kh, int kw,
							     __m256i *wv)
{
	int8_t buf[4 * MI_QDW_KMAX * MI_QDW_KMAX + 8];
	size_t n = (size_t)kh * kw;
	int np = (kw + 1) / 2;
	__m128i m = _mm_cmpgt_epi8(_mm_set1_epi8((char)kw),
				   _mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7));

	memcpy(buf, w, 4 * n);
	memset(buf + 4 * n, 0, 8);
	for (int ky = 0; ky < kh; ky++) {
		const int8_t *r = buf + (size_t)ky * kw;
		int64_t r0, r1, r2, r3;

		memcpy(&r0, r, 8);
		memcpy(&r1, r + n, 8);
		memcpy(&r2, r + 2 * n, 8);
		memcpy(&r3, r + 3 * n, 8);
		__m128i a = _mm_and_si128(_mm_set_epi64x(r1, r0), m);
		__m128i b = _mm_and_si128(_mm_set_epi64x(r3, r2), m);
		__m128i lo = _mm_unpacklo_epi16(a, b), hi = _mm_unpackhi_epi16(a, b);
		__m128i t[2] = { _mm_unpacklo_epi16(lo, hi), _mm_unpackhi_epi16(lo, hi) };

		for (int jp = 0; jp < np; jp++) {
			__m128i v = jp % 2 ? _mm_unpackhi_epi64(t[jp / 2], t[jp / 2]) :
					     _mm_unpacklo_epi64(t[jp / 2], t[jp / 2]);

			wv[ky * np + jp] = _mm256_cvtepi8_epi16(v);
		}
	}
}

__attribute__((target("avx2,fma"))) void dwq_item(void *arg, int q, int tid)
{
	struct conv_job *j = arg;
	const struct mi_qconv_shape *s = &j->cv->s;
	const struct mi_qepi *ep = j->ep;
	/* the quad's four planes' room in xi (4 hp wp + 256 bytes) */
	uint8_t *xq = j->xi + (size_t)4 * q * (j->hp * j->wp + 64);
	uint8_t *out = j->y + (size_t)q * s->oh * s->ow * 4;
	const int8_t *w = j->cv->dww + (size_t)4 * q * s->kh * s->kw;
	__m256i wv[MI_QDW_KMAX * ((MI_QDW_KMAX + 1) / 2)];

	(void)tid;
	dwq_prep_avx2(j, q, xq);
	dwq_wpairs_avx2(w, s->kh, s->kw, wv);
	int c = 4 * q;
	__m256i comp = _mm256_setr_epi32(ep->comp[c], ep->comp[c + 1], ep->comp[c + 2],
					 ep->comp[c + 3], ep->comp[c], ep->comp[c + 1],
					 ep->comp[c + 2], ep->comp[c + 3]);
	__m256 mult = _mm256_setr_ps(ep->mult[c], ep->mult[c + 1], ep->mult[c + 2],
				     ep->mult[c + 3], ep->mult[c], ep->mult[c + 1],
				     ep->mult[c + 2], ep->mult[c + 3]);

	if (s->kh == 3 && s->kw == 3 && s->sw == 1)
		dwq_avx2_body(xq, j->wp, wv, 3, 3, s->oh, s->ow, s->sh, 1, comp, mult, ep, out);
	else if (s->kh == 3 && s->kw == 3)
		dwq_avx2_body(xq, j->wp, wv, 3, 3, s->oh, s->ow, s->sh, 2, comp, mult, ep, out);
	else if (s->kh == 5 && s->kw == 5 && s->sw == 1)
		dwq_avx2_body(xq, j->wp, wv, 5, 5, s->oh, s->ow, s->sh, 1, comp, mult, ep, out);
	else if (s->kh == 5 && s->kw == 5)
		dwq_avx2_body(xq, j->wp, wv, 5, 5, s->oh, s->ow, s->sh, 2, comp, mult, ep, out);
	else if (s->sw == 1)
		dwq_avx2_body(xq, j->wp, wv, s->kh, s->kw, s->oh, s->ow, s->sh, 1, comp, mult, ep,
			      out);
	else
		dwq_avx2_body(xq, j->wp, wv, s->kh, s->kw, s->oh, s->ow, s->sh, 2, comp, mult, ep,
			      out);
}
