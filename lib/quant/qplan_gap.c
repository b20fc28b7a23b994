// SPDX-License-Identifier: MIT
/*
 * Planner step for int8 execution: GlobalAveragePool of a quantized
 * tensor (through a table or straight from the bytes).
 */
#include "quant/qplan-impl.h"

/* ---- GlobalAveragePool of a quantized tensor --------------------------------- */

/*
 * Sums of np planes of hw pixels into s[]: per plane the blocks of 512 in
 * order, each block's lane sums ((a0 + a1) + (a2 + a3)) added in lane
 * order, then the tail pixels, in double.  The planes are interleaved
 * step by step (independent dependency chains: a 7x7 plane is mostly
 * tail), which does not change any plane's order of additions.
 */
/* the pixels from i0 on, added one by one, eight planes at a time in
 * registers (a 7x7 plane is all tail) */
/* plane p's pixel i: planar (p * hw + i) or in C4 quads ([p / 4][hw][4]) */
#define GAP_AT(x, c4, hw, p, i)                                                  \
	((c4) ? (x)[((int64_t)(p) / 4 * (hw) + (i)) * 4 + (p) % 4] :              \
		(x)[(int64_t)(p) * (hw) + (i)])

__attribute__((always_inline)) static inline void
gap_tail_body(const float *lut, const uint8_t *x, int64_t hw, int64_t i0, int np, double *s,
	      const bool c4)
{
	int p = 0;

	for (; p + 8 <= np; p += 8) {
		double s0 = s[p], s1 = s[p + 1], s2 = s[p + 2], s3 = s[p + 3];
		double s4 = s[p + 4], s5 = s[p + 5], s6 = s[p + 6], s7 = s[p + 7];

		for (int64_t i = i0; i < hw; i++) {
			s0 += lut[GAP_AT(x, c4, hw, p, i)];
			s1 += lut[GAP_AT(x, c4, hw, p + 1, i)];
			s2 += lut[GAP_AT(x, c4, hw, p + 2, i)];
			s3 += lut[GAP_AT(x, c4, hw, p + 3, i)];
			s4 += lut[GAP_AT(x, c4, hw, p + 4, i)];
			s5 += lut[GAP_AT(x, c4, hw, p + 5, i)];
			s6 += lut[GAP_AT(x, c4, hw, p + 6, i)];
			s7 += lut[GAP_AT(x, c4, hw, p + 7, i)];
		}
		s[p] = s0, s[p + 1] = s1, s[p + 2] = s2, s[p + 3] = s3;
		s[p + 4] = s4, s[p + 5] = s5, s[p + 6] = s6, s[p + 7] = s7;
	}
	for (; p < np; p++) {
		double s0 = s[p];

		for (int64_t i = i0; i < hw; i++)
			s0 += lut[GAP_AT(x, c4, hw, p, i)];
		s[p] = s0;
	}
}

static void gap_tail(const float *lut, const uint8_t *x, int64_t hw, int64_t i0, int np,
		     double *s)
{
	gap_tail_body(lut, x, hw, i0, np, s, false);
}

/*
 * gap_sums_c with lib/cpu's AVX2 lanes (gap_vw 8): the four 8-lane float
 * accumulators of a block are vectors fed by gathers, the same float
 * additions in the same order per lane, so the sums are identical.
 */
__attribute__((target("avx2"), always_inline)) static inline void
gap_sums_avx2_body(const struct qnode *q, const uint8_t *x, int np, double *s, const bool c4)
{
	int64_t hw = q->gap_hw, i = 0;
	const float *lut = q->lut;
	float l[QGAP_PLANES][8];

	for (int p = 0; p < np; p++)
		s[p] = 0.0;
	while (i + 32 <= hw) {
		int64_t b = i, end = i + 512 < hw ? i + 512 : hw;

		for (int p = 0; p < np; p++) {
			const uint8_t *xp = c4 ? x + ((int64_t)p / 4 * hw * 4 + p % 4) :
						 x + p * hw;
			__m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;

#define MI_GAP2(o)                                                                   \
	(c4 ? lut8x4_avx2(lut, xp + (i + (o)) * 4) : lut8x_avx2(lut, xp + i + (o)))
			for (i = b; i + 32 <= end; i += 32) {
				a0 = _mm256_add_ps(a0, MI_GAP2(0));
				a1 = _mm256_add_ps(a1, MI_GAP2(8));
				a2 = _mm256_add_ps(a2, MI_GAP2(16));
				a3 = _mm256_add_ps(a3, MI_GAP2(24));
			}
#undef MI_GAP2
			_mm256_storeu_ps(l[p], _mm256_add_ps(_mm256_add_ps(a0, a1),
							     _mm256_add_ps(a2, a3)));
		}
		for (int m = 0; m < 8; m++)
			for (int p = 0; p < np; p++)
				s[p] += l[p][m];
	}
	gap_tail_body(lut, x, hw, i, np, s, c4);
}

__attribute__((target("avx2"))) static void
gap_sums_avx2(const struct qnode *q, const uint8_t *x, int np, double *s)
{
	gap_sums_avx2_body(q, x, np, s, false);
}

/*
 * The same on C4 input (np a multiple of 4: whole quads): plane p's pixel
 * i looked up at x[(p / 4 * hw + i) * 4 + p % 4], eight pixels 4 bytes
 * apart per vector, instead of taking the quads apart into planes first
 * (qp_c4_apart); the same additions in the same order.
 */
__attribute__((target("avx2"))) static void
gap_sums_avx2_c4(const struct qnode *q, const uint8_t *x, int np, double *s)
{
	gap_sums_avx2_body(q, x, np, s, true);
}

/*
 * gap_sums_avx2_c4 on maps of 32-63 pixels (7x7: the squeeze-excitations
 * and the last pool of EfficientNet-B0 and MobileNetV3-Small), nq quads
 * side by side: a quad's 4 channels are the 4 double lanes of one sum, so
 * each channel's additions keep their order (the block's lane m at m =
 * 0..7, then the tail pixels), the tail pixels are added 4 channels per
 * vpaddpd instead of one by one, and the block's lanes come from 8-byte
 * runs (2 pixels x 4 channels: lut8x_avx2) instead of bytes 4 apart.  The
 * one block of 32: lane (e, c) of the vectors at pixels
 * 2j, 8 + 2j, 16 + 2j, 24 + 2j is gap_sums_avx2_c4's lane m = 2j + e of
 * a0..a3 for channel c (each 0 + entry), summed as it does.
 */
__attribute__((target("avx2"), always_inline)) static inline void
gap_c4s_body(const float *lut, const uint8_t *xq, int64_t hw, double *s, const int nq)
{
	__m256d acc[4] = { _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(),
			   _mm256_setzero_pd() };
	const __m256 z = _mm256_setzero_ps();

	for (int j = 0; j < 4; j++)
		for (int k = 0; k < nq; k++) {
			const uint8_t *xp = xq + (int64_t)k * hw * 4 + 8 * j;
			__m256 v0 = _mm256_add_ps(z, lut8x_avx2(lut, xp));
			__m256 v1 = _mm256_add_ps(z, lut8x_avx2(lut, xp + 32));
			__m256 v2 = _mm256_add_ps(z, lut8x_avx2(lut, xp + 64));
			__m256 v3 = _mm256_add_ps(z, lut8x_avx2(lut, xp + 96));
			__m256 l = _mm256_add_ps(_mm256_add_ps(v0, v1), _mm256_add_ps(v2, v3));

			acc[k] = _mm256_add_pd(acc[k], _mm256_cvtps_pd(_mm256_castps256_ps128(l)));
			acc[k] = _mm256_add_pd(acc[k], _mm256_cvtps_pd(_mm256_extractf128_ps(l, 1)));
		}
	for (int64_t i = 32; i < hw; i++)
		for (int k = 0; k < nq; k++) {
			const uint8_t *xp = xq + ((int64_t)k * hw + i) * 4;
			__m128 v = _mm_setr_ps(lut[xp[0]], lut[xp[1]], lut[xp[2]], lut[xp[3]]);

			acc[k] = _mm256_add_pd(acc[k], _mm256_cvtps_pd(v));
		}
	for (int k = 0; k < nq; k++)
		_mm256_storeu_pd(s + 4 * k, acc[k]);
}

/* 32 <= hw < 64, np a multiple of 4 (whole quads) */
__attribute__((target("avx2"))) static void
gap_sums_avx2_c4s(const struct qnode *q, const uint8_t *x, int np, double *s)
{
	int64_t hw = q->gap_hw;
	int c4 = 0;

	for (; c4 + 4 <= np / 4; c4 += 4)
		gap_c4s_body(q->lut, x + (int64_t)c4 * hw * 4, hw, s + 4 * c4, 4);
	for (; c4 + 2 <= np / 4; c4 += 2)
		gap_c4s_body(q->lut, x + (int64_t)c4 * hw * 4, hw, s + 4 * c4, 2);
	for (; c4 < np / 4; c4++)
		gap_c4s_body(q->lut, x + (int64_t)c4 * hw * 4, hw, s + 4 * c4, 1);
}

static void gap_sums_c(const struct qnode *q, const uint8_t *x, int np, double *s)
{
	int64_t hw = q->gap_hw, i = 0;
	int vw = q->gap_vw;
	const float *lut = q->lut;
	float l[QGAP_PLANES][16];

	for (int p = 0; p < np; p++)
		s[p] = 0.0;
	while (i + 4 * vw <= hw) {
		int64_t b = i, end = i + 512 < hw ? i + 512 : hw;

		for (int p = 0; p < np; p++) {
			const uint8_t *xp = x + p * hw;
			float a[4][16] = { { 0 } };

			for (i = b; i + 4 * vw <= end; i += 4 * vw)
				for (int k = 0; k < 4; k++)
					for (int m = 0; m < vw; m++)
						a[k][m] += lut[xp[i + k * vw + m]];
			for (int m = 0; m < vw; m++)
				l[p][m] = (a[0][m] + a[1][m]) + (a[2][m] + a[3][m]);
		}
		for (int m = 0; m < vw; m++)
			for (int p = 0; p < np; p++)
				s[p] += l[p][m];
	}
	gap_tail(lut, x, hw, i, np, s);
}

/*
 * True when every double sum of up to n entries of lut, or of float sums
 * of them, is exact, so that the order of double additions cannot change
 * it: the entries are finite, each a multiple of u (the smallest nonzero
 * entry's ulp, a power of two not above any entry's ulp).  A float sum of
 * multiples of u is one too (rounded, it is a multiple of a float spacing
 * above u), so every partial double sum is an integer multiple of u, of
 * magnitude at most n * max|entry| (float roundings add well under a
 * factor 2) <= 2^52 u: exact.  (Subnormal entries get a u below their
 * ulp: only stricter.)
 */
static bool lut_sums_exact(const float *lut, int64_t n)
{
	double mx = 0, u = 0;

	for (int i = 0; i < 256; i++) {
		float v = fabsf(lut[i]);
		int e;

		if (!isfinite(v))
			return false;
		if (v == 0)
			continue;
		frexpf(v, &e); /* v in [2^(e-1), 2^e): ulp 2^(e-24) */
		if (u == 0 || ldexp(1.0, e - 24) < u)
			u = ldexp(1.0, e - 24);
		if (v > mx)
			mx = v;
	}
	return mx == 0 || (double)n * mx <= ldexp(u, 52);
}

/*
 * Planes of under 64 pixels are all tail: k_sum adds their pixels one by
 * one in double.  With gap_exact those sums are exact, whatever the order:
 * the np planes' bytes (contiguous) are looked up 64 at a time into f, and
 * each plane's floats are added 16 at a time (two double vectors, then
 * the lanes).  A plane of zeros sums to +0 in both orders (+0 start).
 */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi"))) static void
gap_small_vbmi(const __m512i t[16], const uint8_t *x, int hw, int np, double *s)
{
	float f[QGAP_PLANES * 64 + 64];
	int n = np * hw;

	for (int i = 0; i < n; i += 64) {
		__mmask64 m = n - i >= 64 ? ~0ull : (1ull << (n - i)) - 1;
		__m512 v[4];

		lut32_vbmi(t, _mm512_maskz_loadu_epi8(m, x + i), v);
		_mm512_storeu_ps(f + i, v[0]);
		_mm512_storeu_ps(f + i + 16, v[1]);
		_mm512_storeu_ps(f + i + 32, v[2]);
		_mm512_storeu_ps(f + i + 48, v[3]);
	}
	for (int p = 0; p < np; p++) {
		const float *fp = f + p * hw;
		__m512d a = _mm512_setzero_pd(), b = a;
		int i = 0;

		for (; i + 16 <= hw; i += 16) {
			a = _mm512_add_pd(a, _mm512_cvtps_pd(_mm256_loadu_ps(fp + i)));
			b = _mm512_add_pd(b, _mm512_cvtps_pd(_mm256_loadu_ps(fp + i + 8)));
		}
		if (i + 8 <= hw) {
			a = _mm512_add_pd(a, _mm512_cvtps_pd(_mm256_loadu_ps(fp + i)));
			i += 8;
		}
		if (i < hw)
			b = _mm512_add_pd(b, _mm512_cvtps_pd(_mm256_maskz_loadu_ps(
						     (__mmask8)((1u << (hw - i)) - 1), fp + i)));
		s[p] = 0.0 + _mm512_reduce_add_pd(_mm512_add_pd(a, b));
	}
}

/*
 * the table outputs of one plane's pixels [b, end) in whole 64-pixel steps
 * summed as k_sum does (four accumulators, (a0 + a1) + (a2 + a3)); *pi
 * gets the first pixel not summed
 */
__attribute__((target("avx512f,avx512bw,avx512vbmi"), always_inline)) static inline __m512
lut_block_sum(const __m512i t[16], const uint8_t *xp, int64_t b, int64_t end, int64_t *pi)
{
	__m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, v[4];
	int64_t i;

	for (i = b; i + 64 <= end; i += 64) {
		lut32_vbmi(t, _mm512_loadu_si512(xp + i), v);
		a0 = _mm512_add_ps(a0, v[0]);
		a1 = _mm512_add_ps(a1, v[1]);
		a2 = _mm512_add_ps(a2, v[2]);
		a3 = _mm512_add_ps(a3, v[3]);
	}
	*pi = i;
	return _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3));
}

/*
 * The same with gap_exact on planes of 64+ pixels: the float block sums as
 * k_sum's (four accumulators, (a0 + a1) + (a2 + a3)), then their lanes and
 * the tail pixels added in double vectors in any order (exact), a plane
 * at a time.
 */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi"))) static void
gap_exact_vbmi(const __m512i t[16], const float *lut, const uint8_t *x, int64_t hw, int np,
	       double *s)
{
	for (int p = 0; p < np; p++) {
		const uint8_t *xp = x + p * hw;
		__m512d d0 = _mm512_setzero_pd(), d1 = d0;
		int64_t i = 0;

		while (i + 64 <= hw) {
			int64_t end = i + 512 < hw ? i + 512 : hw;
			__m512 l = lut_block_sum(t, xp, i, end, &i);

			d0 = _mm512_add_pd(d0, _mm512_cvtps_pd(_mm512_castps512_ps256(l)));
			d1 = _mm512_add_pd(d1, _mm512_cvtps_pd(_mm256_castpd_ps(
						       _mm512_extractf64x4_pd(_mm512_castps_pd(l), 1))));
		}
		double e = 0.0;

		if (hw - i < 16) /* a short tail: one by one */
			for (; i < hw; i++)
				e += lut[xp[i]];
		if (i < hw) { /* r < 64 tail pixels, masked lanes 0 */
			int r = (int)(hw - i);
			__m512 v[4];

			lut32_vbmi(t, _mm512_maskz_loadu_epi8((1ull << r) - 1, xp + i), v);
#pragma GCC unroll 4
			for (int k = 0; k < 4; k++) {
				int c = r - 16 * k;
				__mmask8 m0 = c >= 8 ? 0xff : c > 0 ? (__mmask8)((1u << c) - 1) : 0;
				__mmask8 m1 = c >= 16 ? 0xff : c > 8 ? (__mmask8)((1u << (c - 8)) - 1) : 0;

				d0 = _mm512_add_pd(d0, _mm512_maskz_cvtps_pd(m0, _mm512_castps512_ps256(v[k])));
				d1 = _mm512_add_pd(d1, _mm512_maskz_cvtps_pd(
							       m1, _mm256_castpd_ps(_mm512_extractf64x4_pd(
									   _mm512_castps_pd(v[k]), 1))));
			}
		}
		s[p] = e + _mm512_reduce_add_pd(_mm512_add_pd(d0, d1));
	}
}

/* the same for VW = 16, 64 bytes looked up per step */
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) static void
gap_sums_vbmi(const struct qnode *q, const uint8_t *x, int np, double *s)
{
	int64_t hw = q->gap_hw, i = 0;
	const float *lut = q->lut;
	float l[QGAP_PLANES][16];
	__m512i t[16];

	lut32_load(q->lutb, t);
	if (q->gap_exact && hw < 64) {
		gap_small_vbmi(t, x, (int)hw, np, s);
		return;
	}
	if (q->gap_exact) {
		gap_exact_vbmi(t, q->lut, x, hw, np, s);
		return;
	}
	for (int p = 0; p < np; p++)
		s[p] = 0.0;
	while (i + 64 <= hw) {
		int64_t b = i, end = i + 512 < hw ? i + 512 : hw;

		for (int p = 0; p < np; p++) {
			_mm512_storeu_ps(l[p], lut_block_sum(t, x + p * hw, b, end, &i));
		}
		for (int m = 0; m < 16; m++)
			for (int p = 0; p < np; p++)
				s[p] += l[p][m];
	}
	/* the tail of 16 planes 4 pixels at a time: one dword gather (4
	 * pixels of each plane), put pixel-major (byte 16j + p = pixel j of
	 * plane p), looked up: v[j] holds pixel j of the 16 planes, added
	 * into each plane's double sum in order */
	if (np == QGAP_PLANES && hw <= (1 << 26) && i + 4 <= hw) {
		const __m512i tr = _mm512_set_epi8(
			63, 59, 55, 51, 47, 43, 39, 35, 31, 27, 23, 19, 15, 11, 7, 3,
			62, 58, 54, 50, 46, 42, 38, 34, 30, 26, 22, 18, 14, 10, 6, 2,
			61, 57, 53, 49, 45, 41, 37, 33, 29, 25, 21, 17, 13, 9, 5, 1,
			60, 56, 52, 48, 44, 40, 36, 32, 28, 24, 20, 16, 12, 8, 4, 0);
		const __m512i off = _mm512_mullo_epi32(
			_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
			_mm512_set1_epi32((int)hw));
		__m512d s0 = _mm512_loadu_pd(s), s1 = _mm512_loadu_pd(s + 8);

		for (; i + 4 <= hw; i += 4) {
			__m512i b = _mm512_i32gather_epi32(off, x + i, 1);
			__m512 v[4];

			lut32_vbmi(t, _mm512_permutexvar_epi8(tr, b), v);
#pragma GCC unroll 4
			for (int k = 0; k < 4; k++) {
				__m512d h = _mm512_castps_pd(v[k]);

				s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(v[k])));
				s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(
							       _mm256_castpd_ps(_mm512_extractf64x4_pd(h, 1))));
			}
		}
		_mm512_storeu_pd(s, s0);
		_mm512_storeu_pd(s + 8, s1);
	}
	gap_tail(lut, x, hw, i, np, s);
}

static void qgap_item(void *arg, int it, int tid)
{
	const struct qlut_job *j = arg;
	const struct qnode *q = j->q;
	int64_t p0 = (int64_t)it * QGAP_PLANES;
	int np = q->se_c - p0 < QGAP_PLANES ? (int)(q->se_c - p0) : QGAP_PLANES;
	double s[QGAP_PLANES];
	float m[QGAP_PLANES];
	const uint8_t *x = j->x + p0 * q->gap_hw;

	if (q->se_in_c4 && np % 4 == 0 && q->gap_vw == 8 && mi_quant_isa() >= MI_QISA_AVX2 && !(mi_cpu_isa() == MI_ISA_AVX512 && qp_have_vbmi())) {
		if (q->gap_hw >= 32 && q->gap_hw < 64)
			gap_sums_avx2_c4s(q, x, np, s);
		else
			gap_sums_avx2_c4(q, x, np, s);
		goto mean;
	}
	if (q->se_in_c4) { /* C4 input: its np / 4 quads apart into planes */
		uint8_t *pl = (uint8_t *)q->sh->ws + (size_t)tid * QGAP_PLANES * q->gap_hw;

		for (int c4 = 0; c4 < np / 4; c4++)
			qp_c4_apart(j->x + (p0 + 4 * c4) * q->gap_hw, q->gap_hw, pl + 4 * c4 * q->gap_hw,
				 q->gap_hw);
		x = pl;
	}
	if (q->gap_vw == 16 && mi_cpu_isa() == MI_ISA_AVX512 && qp_have_vbmi())
		gap_sums_vbmi(q, x, np, s);
	else if (q->gap_vw == 8 && mi_quant_isa() >= MI_QISA_AVX2)
		gap_sums_avx2(q, x, np, s);
	else
		gap_sums_c(q, x, np, s);
mean:
	for (int p = 0; p < np; p++)
		m[p] = (float)s[p] / q->gap_hw;
	if (q->gap_q)
		mi_quantize_f32(m, np, q->se_y.scale, q->se_y.zp, q->se_y.dtype,
				(uint8_t *)j->y + p0);
	else
		memcpy((float *)j->y + p0, m, np * sizeof(float));
}

int qgap_run(struct mi_graph *g, struct mi_node *n)
{
	const struct qnode *q = n->priv;
	struct qlut_job j = { q, mi_in(g, n, 0)->data, mi_out(g, n, 0)->data };

	/* one thread below ~8K pixels (~3 us at ~0.4 ns per pixel) */
	qp_cur_threads = q->se_c * q->gap_hw >= 8 << 10 ? q->nthreads : 1;
	qp_pool_for((int)((q->se_c + QGAP_PLANES - 1) / QGAP_PLANES), qgap_item, &j);
	return 0;
}

int try_qgap(struct mi_graph *g, struct mi_node *n)
{
	if (strcmp(n->op_type, "GlobalAveragePool") || n->domain[0] || n->ninputs != 1 ||
	    n->noutputs != 1 || n->inputs[0] < 0)
		return 0;
	struct mi_tensor *x = mi_in(g, n, 0), *y = mi_out(g, n, 0);
	int p = x->producer;
	struct mi_node *pn = p >= 0 ? &g->nodes[p] : NULL, *dx = NULL;
	const struct qnode *tq = NULL;
	struct qact a;

	if (!pn || pn->dead || x->dtype != MI_DT_FLOAT || y->dtype != MI_DT_FLOAT ||
	    !mi_tensor_shape_known(x) || x->ndim < 3 || !mi_tensor_shape_known(y) ||
	    mi_tensor_numel(y) != x->dims[0] * x->dims[1] || !mi_tensor_numel(y))
		return 0;
	if (qnode_is(pn) && ((struct qnode *)pn->priv)->hdr.run == qlut_run &&
	    !((struct qnode *)pn->priv)->lut8 && pn->outputs[0] == n->inputs[0])
		tq = pn->priv;
	else if (!strcmp(pn->op_type, "DequantizeLinear") && !pn->domain[0] &&
		 qp_act_params(g, pn, 0, 1, 2, &a))
		dx = pn;
	if (!tq && !dx)
		return qp_skip(n, "input is not a fp32 table or DequantizeLinear of a quantized tensor");
	int xt = tq ? pn->inputs[0] : a.t;

	if (mi_tensor_numel(&g->tensors[xt]) != mi_tensor_numel(x) ||
	    mi_tensor_numel(x) < mi_tensor_numel(y))
		return qp_skip(n, "GlobalAveragePool input size");
	struct qnode *q = qnode_new_lut(qgap_run, tq ? tq->lut : NULL, &a);

	if (!q)
		return -ENOMEM;
	q->se_c = x->dims[0] * x->dims[1];
	q->gap_hw = mi_tensor_numel(x) / q->se_c;
	q->gap_vw = mi_cpu_isa() == MI_ISA_AVX512 ? 16 : mi_cpu_isa() == MI_ISA_AVX2 ? 8 : 4;
	q->gap_exact = lut_sums_exact(q->lut, q->gap_hw);
	/* a QuantizeLinear as the only reader: quantize the means */
	int qi = mi_graph_sole_consumer(g, n->outputs[0]);
	struct mi_node *qn = qi >= 0 ? &g->nodes[qi] : NULL;

	if (qn && !strcmp(qn->op_type, "QuantizeLinear") && !qn->domain[0] && !qn->dead &&
	    !qn->priv && qn->ninputs >= 2 && qn->inputs[0] == n->outputs[0] &&
	    qn->noutputs == 1 && qp_q_params(g, qn, &q->se_y) &&
	    mi_tensor_numel(mi_out(g, qn, 0)) == mi_tensor_numel(y))
		q->gap_q = true;
	n->priv = q;
	q->orig_ninputs = n->ninputs;
	q->orig_in0 = n->inputs[0];
	q->orig_in1 = -1;
	q->orig_out0 = n->outputs[0];
	n->inputs[0] = xt;
	if (q->gap_q) {
		qp_kill(g, q, qn);
		n->outputs[0] = qn->outputs[0];
		g->tensors[n->outputs[0]].producer = (int)(n - g->nodes);
	}
	return 0;
}

/* fp32 table nodes whose output nobody reads any more (the SE pool and
 * gate Mul read the bytes): dead, undone with a node reading their input. */
void kill_unused_tables(struct mi_graph *g)
{
	for (int i = 0; i < g->nnodes; i++) {
		struct mi_node *t = &g->nodes[i];
		struct qnode *owner = NULL;
		bool used = false;

		if (t->dead || !qnode_is(t) || ((struct qnode *)t->priv)->hdr.run != qlut_run ||
		    ((struct qnode *)t->priv)->lut8 || (g->tensors[t->outputs[0]].flags & MI_TF_OUTPUT))
			continue;
		for (int j = 0; j < g->nnodes && !used; j++) {
			struct mi_node *n = &g->nodes[j];

			if (n->dead || j == i)
				continue;
			for (int k = 0; k < n->ninputs; k++) {
				if (n->inputs[k] == t->outputs[0])
					used = true;
				if (n->inputs[k] == t->inputs[0] && qnode_is(n) && !owner &&
				    ((struct qnode *)n->priv)->hdr.run != qlut_run &&
				    ((struct qnode *)n->priv)->nkilled < 8)
					owner = n->priv;
			}
		}
		if (!used && owner) {
			t->dead = true;
			owner->killed[owner->nkilled++] = i;
		}
	}
}
