// SPDX-License-Identifier: MIT
/*
 * QuantizeLinear / DequantizeLinear inner loops, per ISA.  Every path does
 * the same IEEE operations as the scalar code (divide, round to nearest
 * even, add the zero point, clamp; or subtract, convert, multiply), so the
 * results are identical.
 */
#include <math.h>
#include <string.h>

#include <immintrin.h>

#include "quant/quant.h"
#include "quant/quant-impl.h"

static void quant_c(const float *x, int64_t n, float scale, float zp, float lo,
		    float hi, int u8, void *y)
{
	for (int64_t i = 0; i < n; i++) {
		float v = nearbyintf(x[i] / scale) + zp;

		/* NaN -> lo, like maxps(v, lo) in the SIMD paths */
		v = !(v >= lo) ? lo : v > hi ? hi : v;
		if (u8)
			((uint8_t *)y)[i] = (uint8_t)(int)v;
		else
			((int8_t *)y)[i] = (int8_t)(int)v;
	}
}

/* A quantization's parameters, broadcast for quant16_avx512(). */
struct q16 {
	__m512 s, rc, z, l, h;
	bool mul; /* x / scale by the reciprocal (mi_rcp_ok) */
};

__attribute__((target("avx512f"), always_inline)) static inline struct q16
q16_init(float scale, float zp, float lo, float hi)
{
	return (struct q16){ .s = _mm512_set1_ps(scale), .rc = _mm512_set1_ps(1.0f / scale),
			     .z = _mm512_set1_ps(zp), .l = _mm512_set1_ps(lo),
			     .h = _mm512_set1_ps(hi), .mul = mi_rcp_ok(scale) };
}

/* The clamped value of 16 floats (x / scale rounded, + zp, clamped to
 * [lo, hi]) as int32: the same operations as quant_c. */
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) static inline __m512i
quant16_avx512(__m512 x, const struct q16 *q)
{
	__m512 v;

	if (q->mul) {
		v = mi_rne_div_avx512(x, q->s, q->rc);
	} else {
		v = _mm512_div_ps(x, q->s);
		v = _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	}
	v = _mm512_add_ps(v, q->z);
	v = _mm512_min_ps(_mm512_max_ps(v, q->l), q->h);
	return _mm512_cvttps_epi32(v);
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) static int64_t
quant_avx512(const float *x, int64_t n, float scale, float zp, float lo, float hi,
	     int u8, void *y)
{
	const struct q16 k = q16_init(scale, zp, lo, hi);
	/* packs work per 128-bit lane: dword j of the packed vector holds
	 * bytes 4j..4j+3 of lane j % 4 of vector j / 4 */
	const __m512i un = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
	int64_t i = 0;

	/* 64 at a time: the values are in [lo, hi], so the saturating
	 * packs only narrow them */
	for (; i + 64 <= n; i += 64) {
		__m512i a = quant16_avx512(_mm512_loadu_ps(x + i), &k);
		__m512i b = quant16_avx512(_mm512_loadu_ps(x + i + 16), &k);
		__m512i c = quant16_avx512(_mm512_loadu_ps(x + i + 32), &k);
		__m512i d = quant16_avx512(_mm512_loadu_ps(x + i + 48), &k);
		__m512i ab = _mm512_packs_epi32(a, b), cd = _mm512_packs_epi32(c, d);
		__m512i q = u8 ? _mm512_packus_epi16(ab, cd) : _mm512_packs_epi16(ab, cd);

		_mm512_storeu_si512((uint8_t *)y + i, _mm512_permutexvar_epi32(un, q));
	}
	for (; i + 16 <= n; i += 16) {
		__m512i q = quant16_avx512(_mm512_loadu_ps(x + i), &k);

		_mm_storeu_si128((__m128i *)((uint8_t *)y + i), _mm512_cvtepi32_epi8(q));
	}
	return i;
}

/* Four float rows (stride rs) -> np C4 quads, 16 pixels at a time. */
__attribute__((target("avx512f,avx512bw,avx512vl"))) static void
quant_c4_avx512(const float *x, int64_t rs, int64_t np, float scale, float zp, float lo,
		float hi, uint8_t *y)
{
	const struct q16 k = q16_init(scale, zp, lo, hi);
	const __m512i b0 = _mm512_set1_epi32(0xff), b01 = _mm512_set1_epi32(0xffff);
	const __m512i b012 = _mm512_set1_epi32(0xffffff);

	for (int64_t p = 0; p < np; p += 16) {
		__mmask16 m = np - p >= 16 ? 0xffff : (__mmask16)((1u << (np - p)) - 1);
		__m512i q0 = quant16_avx512(_mm512_maskz_loadu_ps(m, x + p), &k);
		__m512i q1 = quant16_avx512(_mm512_maskz_loadu_ps(m, x + rs + p), &k);
		__m512i q2 = quant16_avx512(_mm512_maskz_loadu_ps(m, x + 2 * rs + p), &k);
		__m512i q3 = quant16_avx512(_mm512_maskz_loadu_ps(m, x + 3 * rs + p), &k);
		/* byte k of each dword: row k (0xca: a ? b : c bitwise) */
		__m512i d = _mm512_ternarylogic_epi32(b0, q0, _mm512_slli_epi32(q1, 8), 0xca);

		d = _mm512_ternarylogic_epi32(b01, d, _mm512_slli_epi32(q2, 16), 0xca);
		d = _mm512_ternarylogic_epi32(b012, d, _mm512_slli_epi32(q3, 24), 0xca);
		_mm512_mask_storeu_epi32(y + p * 4, m, d);
	}
}

__attribute__((target("avx2,fma"))) static int64_t
quant_avx2(const float *x, int64_t n, float scale, float zp, float lo, float hi,
	   int u8, void *y)
{
	__m256 s = _mm256_set1_ps(scale), z = _mm256_set1_ps(zp);
	__m256 l = _mm256_set1_ps(lo), h = _mm256_set1_ps(hi);
	int64_t i = 0;

	for (; i + 8 <= n; i += 8) {
		__m256 v = _mm256_div_ps(_mm256_loadu_ps(x + i), s);

		v = _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
		v = _mm256_add_ps(v, z);
		v = _mm256_min_ps(_mm256_max_ps(v, l), h);
		__m256i q = _mm256_cvttps_epi32(v);
		__m128i w = _mm_packs_epi32(_mm256_castsi256_si128(q),
					    _mm256_extracti128_si256(q, 1));
		__m128i b = u8 ? _mm_packus_epi16(w, w) : _mm_packs_epi16(w, w);

		_mm_storel_epi64((__m128i *)((uint8_t *)y + i), b);
	}
	return i;
}

void mi_quantize_f32(const float *x, int64_t n, float scale, int32_t zp,
		     int dtype, void *y)
{
	int u8 = dtype == MI_DT_UINT8;
	float lo = u8 ? 0.0f : -128.0f, hi = u8 ? 255.0f : 127.0f;
	int64_t i = 0;

	switch (mi_quant_isa()) {
	case MI_QISA_AVX512:
		i = quant_avx512(x, n, scale, (float)zp, lo, hi, u8, y);
		break;
	case MI_QISA_AVX2:
		i = quant_avx2(x, n, scale, (float)zp, lo, hi, u8, y);
		break;
	}
	quant_c(x + i, n - i, scale, (float)zp, lo, hi, u8, (uint8_t *)y + i);
}


void mi_quantize_c4(const float *x, int64_t rs, int64_t np, float scale, int32_t zp,
		    int dtype, uint8_t *y)
{
	float t[4 * 64];

	if (mi_quant_isa() == MI_QISA_AVX512) {
		int u8 = dtype == MI_DT_UINT8;

		quant_c4_avx512(x, rs, np, scale, (float)zp, u8 ? 0.0f : -128.0f,
				u8 ? 255.0f : 127.0f, y);
		return;
	}
	for (int64_t p0 = 0; p0 < np; p0 += 64) {
		int64_t n = np - p0 < 64 ? np - p0 : 64;

		for (int64_t p = 0; p < n; p++)
			for (int k = 0; k < 4; k++)
				t[p * 4 + k] = x[k * rs + p0 + p];
		mi_quantize_f32(t, n * 4, scale, zp, dtype, y + p0 * 4);
	}
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) static int64_t
dequant_avx512(const void *x, int u8, int64_t n, float scale, int32_t zp, float *y)
{
	__m512 s = _mm512_set1_ps(scale);
	__m512i z = _mm512_set1_epi32(zp);
	int64_t i = 0;

	for (; i + 16 <= n; i += 16) {
		__m128i b = _mm_loadu_si128((const __m128i *)((const uint8_t *)x + i));
		__m512i q = u8 ? _mm512_cvtepu8_epi32(b) : _mm512_cvtepi8_epi32(b);

		_mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(q, z)), s));
	}
	return i;
}

__attribute__((target("avx2,fma"))) static int64_t
dequant_avx2(const void *x, int u8, int64_t n, float scale, int32_t zp, float *y)
{
	__m256 s = _mm256_set1_ps(scale);
	__m256i z = _mm256_set1_epi32(zp);
	int64_t i = 0;

	for (; i + 8 <= n; i += 8) {
		__m128i b = _mm_loadl_epi64((const __m128i *)((const uint8_t *)x + i));
		__m256i q = u8 ? _mm256_cvtepu8_epi32(b) : _mm256_cvtepi8_epi32(b);

		_mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(q, z)), s));
	}
	return i;
}

/* Four rows (stride rs) from C4 quads; the operations of dequant_avx512. */
__attribute__((target("avx512f,avx512bw,avx512vl"))) static void
dequant_c4_avx512(const uint8_t *x, int64_t np, int u8, float scale, int32_t zp, float *y,
		  int64_t rs)
{
	__m512 s = _mm512_set1_ps(scale);
	__m512i z = _mm512_set1_epi32(zp);

	for (int64_t p = 0; p < np; p += 16) {
		__mmask16 m = np - p >= 16 ? 0xffff : (__mmask16)((1u << (np - p)) - 1);
		__m512i d = _mm512_maskz_loadu_epi32(m, x + p * 4);

		for (int k = 0; k < 4; k++) {
			/* byte k of each dword, zero- or sign-extended */
			__m512i q = _mm512_slli_epi32(d, 24 - 8 * k);

			q = u8 ? _mm512_srli_epi32(q, 24) : _mm512_srai_epi32(q, 24);
			_mm512_mask_storeu_ps(y + k * rs + p, m,
					      _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(q, z)), s));
		}
	}
}

void mi_dequantize_c4(const uint8_t *x, int64_t np, int dtype, float scale, int32_t zp,
		      float *y, int64_t rs)
{
	float t[4 * 64];

	if (mi_quant_isa() == MI_QISA_AVX512) {
		dequant_c4_avx512(x, np, dtype == MI_DT_UINT8, scale, zp, y, rs);
		return;
	}
	for (int64_t p0 = 0; p0 < np; p0 += 64) {
		int64_t n = np - p0 < 64 ? np - p0 : 64;

		mi_dequantize(x + p0 * 4, dtype, n * 4, scale, zp, t);
		for (int64_t p = 0; p < n; p++)
			for (int k = 0; k < 4; k++)
				y[k * rs + p0 + p] = t[p * 4 + k];
	}
}

void mi_dequantize(const void *x, int dtype, int64_t n, float scale,
		   int32_t zp, float *y)
{
	int64_t i = 0;

	if (dtype == MI_DT_UINT8 || dtype == MI_DT_INT8) {
		int u8 = dtype == MI_DT_UINT8;

		switch (mi_quant_isa()) {
		case MI_QISA_AVX512:
			i = dequant_avx512(x, u8, n, scale, zp, y);
			break;
		case MI_QISA_AVX2:
			i = dequant_avx2(x, u8, n, scale, zp, y);
			break;
		}
		if (u8)
			for (; i < n; i++)
				y[i] = (float)((int32_t)((const uint8_t *)x)[i] - zp) * scale;
		else
			for (; i < n; i++)
				y[i] = (float)((int32_t)((const int8_t *)x)[i] - zp) * scale;
		return;
	}
	for (; i < n; i++)
		y[i] = (float)((int64_t)((const int32_t *)x)[i] - zp) * scale;
}

/* ---- QLinear-style Add: y = Q(act(DQ(a) + DQ(b))) ------------------------ */

static inline float qadd_one(int32_t a, int32_t b, const struct mi_qadd_args *p)
{
	float v = (float)(a - p->za) * p->sa + (float)(b - p->zb) * p->sb;

	if (p->relu)
		v = v > 0.0f ? v : 0.0f;
	v = nearbyintf(v / p->sy) + (float)p->zy;
	return !(v >= p->lo) ? p->lo : v > p->hi ? p->hi : v;
}

/* AVX-512F brings FMA: fp-contract off, or va + vb becomes one vfmadd
 * (see qadd_avx2_body) */
__attribute__((target("avx512f,avx512bw,avx512vl"), optimize("fp-contract=off"))) static int64_t
qadd_avx512(const uint8_t *a, const uint8_t *b, int64_t n, const struct mi_qadd_args *p,
	    uint8_t *y)
{
	__m512 sa = _mm512_set1_ps(p->sa), sb = _mm512_set1_ps(p->sb), sy = _mm512_set1_ps(p->sy);
	__m512i za = _mm512_set1_epi32(p->za), zb = _mm512_set1_epi32(p->zb);
	__m512 zy = _mm512_set1_ps((float)p->zy), lo = _mm512_set1_ps(p->lo);
	__m512 hi = _mm512_set1_ps(p->hi), zero = _mm512_setzero_ps();
	int64_t i = 0;

	for (; i + 16 <= n; i += 16) {
		__m128i ba = _mm_loadu_si128((const __m128i *)(a + i));
		__m128i bb = _mm_loadu_si128((const __m128i *)(b + i));
		__m512i ia = p->a_s8 ? _mm512_cvtepi8_epi32(ba) : _mm512_cvtepu8_epi32(ba);
		__m512i ib = p->b_s8 ? _mm512_cvtepi8_epi32(bb) : _mm512_cvtepu8_epi32(bb);
		__m512 va = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(ia, za)), sa);
		__m512 vb = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(ib, zb)), sb);
		__m512 v = _mm512_add_ps(va, vb);

		if (p->relu)
			v = _mm512_max_ps(v, zero);
		v = _mm512_roundscale_ps(_mm512_div_ps(v, sy),
					 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
		v = _mm512_min_ps(_mm512_max_ps(_mm512_add_ps(v, zy), lo), hi);
		_mm_storeu_si128((__m128i *)(y + i), _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(v)));
	}
	return i;
}

/*
 * The AVX2 Add.  No FMA in the target: with -ffp-contract=fast (gnu11's
 * default) gcc fused va + vb into one vfmadd of a product, which rounds
 * once where qadd_one and the reference DQ -> Add -> Q round twice (3 of
 * the 65536 byte pairs differed on test-quantize's add fma scales).  The
 * flags are template constants (qadd_avx2 dispatches): the loop no longer
 * reloads and tests them per vector (y may alias *p).
 */
__attribute__((target("avx2"), always_inline)) static inline int64_t
qadd_avx2_body(const uint8_t *a, const uint8_t *b, int64_t n, const struct mi_qadd_args *p,
	       uint8_t *y, const bool as8, const bool bs8, const bool ys8, const bool relu)
{
	__m256 sa = _mm256_set1_ps(p->sa), sb = _mm256_set1_ps(p->sb), sy = _mm256_set1_ps(p->sy);
	__m256i za = _mm256_set1_epi32(p->za), zb = _mm256_set1_epi32(p->zb);
	__m256 zy = _mm256_set1_ps((float)p->zy), lo = _mm256_set1_ps(p->lo);
	__m256 hi = _mm256_set1_ps(p->hi), zero = _mm256_setzero_ps();
	int64_t i = 0;

	for (; i + 8 <= n; i += 8) {
		__m128i ba = _mm_loadl_epi64((const __m128i *)(a + i));
		__m128i bb = _mm_loadl_epi64((const __m128i *)(b + i));
		__m256i ia = as8 ? _mm256_cvtepi8_epi32(ba) : _mm256_cvtepu8_epi32(ba);
		__m256i ib = bs8 ? _mm256_cvtepi8_epi32(bb) : _mm256_cvtepu8_epi32(bb);
		__m256 va = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(ia, za)), sa);
		__m256 vb = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(ib, zb)), sb);
		__m256 v = _mm256_add_ps(va, vb);

		if (relu)
			v = _mm256_max_ps(v, zero);
		v = _mm256_round_ps(_mm256_div_ps(v, sy), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
		v = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(v, zy), lo), hi);
		__m256i q = _mm256_cvttps_epi32(v);
		__m128i w = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));

		_mm_storel_epi64((__m128i *)(y + i), ys8 ? _mm_packs_epi16(w, w) :
							   _mm_packus_epi16(w, w));
	}
	return i;
}

__attribute__((target("avx2"))) static int64_t
qadd_avx2(const uint8_t *a, const uint8_t *b, int64_t n, const struct mi_qadd_args *p,
	  uint8_t *y)
{
#define MI_QADD2(x, yy, z)                                                          \
	(p->relu ? qadd_avx2_body(a, b, n, p, y, x, yy, z, true) :                  \
		   qadd_avx2_body(a, b, n, p, y, x, yy, z, false))
	if (p->a_s8 == p->b_s8 && p->b_s8 == p->y_s8) /* the usual case */
		return p->a_s8 ? MI_QADD2(true, true, true) : MI_QADD2(false, false, false);
	return qadd_avx2_body(a, b, n, p, y, p->a_s8, p->b_s8, p->y_s8, p->relu);
#undef MI_QADD2
}

void mi_qadd(const void *a, const void *b, int64_t n, const struct mi_qadd_args *p, void *y)
{
	const uint8_t *ua = a, *ub = b;
	uint8_t *uy = y;
	int64_t i = 0;

	switch (mi_quant_isa()) {
	case MI_QISA_AVX512:
		i = qadd_avx512(ua, ub, n, p, uy);
		break;
	case MI_QISA_AVX2:
		i = qadd_avx2(ua, ub, n, p, uy);
		break;
	}
	for (; i < n; i++) {
		int32_t va = p->a_s8 ? (int8_t)ua[i] : ua[i], vb = p->b_s8 ? (int8_t)ub[i] : ub[i];

		uy[i] = (uint8_t)(int)qadd_one(va, vb, p);
	}
}

/* ---- MaxPool on quantized data (max commutes with quantization) --------- */

__attribute__((target("avx2"))) static void vmax_avx2(uint8_t *t, const uint8_t *r, int n,
						      bool s8)
{
	int i = 0;

	for (; i + 32 <= n; i += 32) {
		__m256i a = _mm256_loadu_si256((const __m256i *)(t + i));
		__m256i b = _mm256_loadu_si256((const __m256i *)(r + i));

		_mm256_storeu_si256((__m256i *)(t + i),
				    s8 ? _mm256_max_epi8(a, b) : _mm256_max_epu8(a, b));
	}
	for (; i < n; i++)
		t[i] = s8 ? ((int8_t)r[i] > (int8_t)t[i] ? r[i] : t[i]) : (r[i] > t[i] ? r[i] : t[i]);
}

__attribute__((target("avx512f,avx512bw"))) static void vmax_avx512(uint8_t *t, const uint8_t *r,
								  int n, bool s8)
{
	for (int i = 0; i < n; i += 64) {
		__mmask64 m = n - i >= 64 ? ~0ull : (1ull << (n - i)) - 1;
		__m512i a = _mm512_maskz_loadu_epi8(m, t + i);
		__m512i b = _mm512_maskz_loadu_epi8(m, r + i);

		_mm512_mask_storeu_epi8(t + i, m, s8 ? _mm512_max_epi8(a, b) : _mm512_max_epu8(a, b));
	}
}

static void vmax_c(uint8_t *t, const uint8_t *r, int n, bool s8)
{
	for (int i = 0; i < n; i++)
		t[i] = s8 ? ((int8_t)r[i] > (int8_t)t[i] ? r[i] : t[i]) : (r[i] > t[i] ? r[i] : t[i]);
}

/*
 * Horizontal pass over outputs [ox0, ox1) whose taps all lie inside the
 * row (no dilation, stride 1 or 2): max of kw byte-shifted masked loads;
 * stride 2 keeps the even bytes (the low byte of each 16-bit word).
 */
__attribute__((target("avx512f,avx512bw,avx512vl"))) static int
hmax_avx512(const uint8_t *t, const struct mi_qpool_shape *s, bool s8, int ox0, int ox1,
	    uint8_t *y)
{
	int step = s->sw == 1 ? 64 : 32, ox = ox0;

	for (; ox < ox1; ox += step) {
		int n = ox1 - ox < step ? ox1 - ox : step;
		int nb = s->sw == 1 ? n : 2 * n - 1; /* bytes read per tap */
		__mmask64 m = nb >= 64 ? ~0ull : (1ull << nb) - 1;
		const uint8_t *r = t + ox * s->sw - s->pl;
		__m512i a = _mm512_maskz_loadu_epi8(m, r);

		for (int kx = 1; kx < s->kw; kx++) {
			__m512i b = _mm512_maskz_loadu_epi8(m, r + kx);

			a = s8 ? _mm512_max_epi8(a, b) : _mm512_max_epu8(a, b);
		}
		if (s->sw == 1) {
			_mm512_mask_storeu_epi8(y + ox, m, a);
		} else {
			__m256i e = _mm512_cvtepi16_epi8(a);

			_mm256_mask_storeu_epi8(y + ox, (__mmask32)((1ull << n) - 1), e);
		}
	}
	return ox1;
}

/*
 * Outputs [ox_lo, ox_hi) of a pooled row whose taps all lie inside the row
 * (no dilation): the first output past those done with 8 (C4: pixels) or
 * 32 (planar: bytes) at a time, by AVX2.
 */
static void hmax_range(const struct mi_qpool_shape *s, int *ox_lo, int *ox_hi)
{
	int lo = (s->pl + s->sw - 1) / s->sw;
	int hi = s->w - 1 - (s->kw - 1) * s->dw + s->pl;

	hi = hi < 0 ? 0 : hi / s->sw + 1;
	if (hi > s->ow)
		hi = s->ow;
	if (lo > hi)
		lo = hi;
	*ox_lo = lo;
	*ox_hi = hi;
}

/*
 * Horizontal pass of the C4 MaxPool, AVX2, stride 1 or 2, no dilation: 8
 * output pixels (dwords of 4 channels) per step over [ox0, ox1), the max
 * of kw loads byte by byte; stride 2 keeps the even dwords of two loads
 * (shufps + vpermq).  Reads up to one pixel past the last tap (tmp's
 * slack).  Returns the first output not done.
 */
__attribute__((target("avx2"))) static int
hmax_c4_avx2(const uint8_t *t, const struct mi_qpool_shape *s, bool s8, int ox0, int ox1,
	     uint8_t *y)
{
	int ox = ox0;

	for (; ox + 8 <= ox1; ox += 8) {
		const uint8_t *r = t + (size_t)(ox * s->sw - s->pl) * 4;
		__m256i a = _mm256_setzero_si256();

		for (int kx = 0; kx < s->kw; kx++) {
			__m256i b;

			if (s->sw == 1) {
				b = _mm256_loadu_si256((const __m256i *)(r + kx * 4));
			} else {
				__m256 l = _mm256_loadu_ps((const float *)(const void *)(r + kx * 4));
				__m256 h = _mm256_loadu_ps(
					(const float *)(const void *)(r + kx * 4 + 32));

				b = _mm256_permute4x64_epi64(
					_mm256_castps_si256(_mm256_shuffle_ps(l, h, 0x88)), 0xd8);
			}
			a = !kx ? b : s8 ? _mm256_max_epi8(a, b) : _mm256_max_epu8(a, b);
		}
		_mm256_storeu_si256((__m256i *)(y + (size_t)ox * 4), a);
	}
	return ox;
}

/*
 * The same for a planar row: 32 output bytes per step; stride 2 keeps the
 * even bytes of two loads (mask, vpackuswb, vpermq).  Reads up to one byte
 * past the last tap.
 */
__attribute__((target("avx2"))) static int
hmax_avx2(const uint8_t *t, const struct mi_qpool_shape *s, bool s8, int ox0, int ox1,
	  uint8_t *y)
{
	const __m256i lo8 = _mm256_set1_epi16(0x00ff);
	int ox = ox0;

	for (; ox + 32 <= ox1; ox += 32) {
		const uint8_t *r = t + ox * s->sw - s->pl;
		__m256i a = _mm256_setzero_si256();

		for (int kx = 0; kx < s->kw; kx++) {
			__m256i b;

			if (s->sw == 1) {
				b = _mm256_loadu_si256((const __m256i *)(r + kx));
			} else {
				__m256i l = _mm256_and_si256(
					_mm256_loadu_si256((const __m256i *)(r + kx)), lo8);
				__m256i h = _mm256_and_si256(
					_mm256_loadu_si256((const __m256i *)(r + kx + 32)), lo8);

				b = _mm256_permute4x64_epi64(_mm256_packus_epi16(l, h), 0xd8);
			}
			a = !kx ? b : s8 ? _mm256_max_epi8(a, b) : _mm256_max_epu8(a, b);
		}
		_mm256_storeu_si256((__m256i *)(y + ox), a);
	}
	return ox;
}

/*
 * Vertical pass in one go: t[0, n) = max of rows r[0..nr) (nr >= 1), 32
 * bytes per step, the last step overlapping the one before (the rows are
 * not t, so the bytes written twice are the same); under 32 bytes scalar.
 */
__attribute__((target("avx2"))) static void vmax_rows_avx2(uint8_t *t, const uint8_t *const *r,
							   int nr, int n, bool s8)
{
	int i = 0;

	if (nr == 1) {
		memcpy(t, r[0], n);
		return;
	}
	if (n >= 32)
		for (;; i += 32) {
			if (i + 32 > n)
				i = n - 32;
			__m256i a = _mm256_loadu_si256((const __m256i *)(r[0] + i));

			for (int k = 1; k < nr; k++) {
				__m256i b = _mm256_loadu_si256((const __m256i *)(r[k] + i));

				a = s8 ? _mm256_max_epi8(a, b) : _mm256_max_epu8(a, b);
			}
			_mm256_storeu_si256((__m256i *)(t + i), a);
			if (i + 32 >= n)
				return;
		}
	for (; i < n; i++) {
		int m = s8 ? (int8_t)r[0][i] : r[0][i];

		for (int k = 1; k < nr; k++) {
			int e = s8 ? (int8_t)r[k][i] : r[k][i];

			m = e > m ? e : m;
		}
		t[i] = (uint8_t)m;
	}
}

/*
 * The 16-byte form of hmax_avx2 (SSE on the low halves): outputs
 * [ox0, ox1), at least 16 of them, the last step overlapping.
 */
__attribute__((target("avx2"))) static void hmax16_avx2(const uint8_t *t,
							 const struct mi_qpool_shape *s, bool s8,
							 int ox0, int ox1, uint8_t *y)
{
	const __m128i lo8 = _mm_set1_epi16(0x00ff);

	for (int ox = ox0;; ox += 16) {
		if (ox + 16 > ox1)
			ox = ox1 - 16;
		const uint8_t *r = t + ox * s->sw - s->pl;
		__m128i a = _mm_setzero_si128();

		for (int kx = 0; kx < s->kw; kx++) {
			__m128i b;

			if (s->sw == 1) {
				b = _mm_loadu_si128((const __m128i *)(r + kx));
			} else {
				__m128i l = _mm_and_si128(_mm_loadu_si128((const __m128i *)(r + kx)),
							  lo8);
				__m128i h = _mm_and_si128(
					_mm_loadu_si128((const __m128i *)(r + kx + 16)), lo8);

				b = _mm_packus_epi16(l, h);
			}
			a = !kx ? b : s8 ? _mm_max_epi8(a, b) : _mm_max_epu8(a, b);
		}
		_mm_storeu_si128((__m128i *)(y + ox), a);
		if (ox + 16 >= ox1)
			return;
	}
}

/* One output pixel of a C4 row (4 channels, any window): the max of its
 * taps inside the row, the neutral value if none. */
__attribute__((target("avx2"))) static inline void hmax_c4_px(const uint8_t *t,
							       const struct mi_qpool_shape *s,
							       bool s8, int ox, uint8_t *y)
{
	__m128i a = _mm_set1_epi8(s8 ? (char)0x80 : 0);

	for (int kx = 0; kx < s->kw; kx++) {
		int ix = ox * s->sw - s->pl + kx * s->dw, v;

		if (ix < 0 || ix >= s->w)
			continue;
		memcpy(&v, t + (size_t)ix * 4, 4);
		a = s8 ? _mm_max_epi8(a, _mm_cvtsi32_si128(v)) : _mm_max_epu8(a, _mm_cvtsi32_si128(v));
	}
	int m = _mm_cvtsi128_si32(a);

	memcpy(y + (size_t)ox * 4, &m, 4);
}

/* The rows of output row oy inside the plane (rows of w bytes). */
static int pool_rows(const uint8_t *x, const struct mi_qpool_shape *s, int oy, size_t w,
		     const uint8_t **r)
{
	int nr = 0;

	for (int ky = 0; ky < s->kh; ky++) {
		int iy = oy * s->sh - s->pt + ky * s->dh;

		if (iy >= 0 && iy < s->h)
			r[nr++] = x + (size_t)iy * w;
	}
	return nr;
}

/*
 * The form of mi_qmaxpool_plane on AVX2 (kh <= 64): each row
 * of taps read once (vmax_rows_avx2); outputs with their taps inside
 * the row (stride 1 or 2, no dilation) 32 or 16 at a time, the last
 * vector overlapping the one before; the rest byte by byte.
 */
__attribute__((target("avx2"))) static void qmaxpool_plane3(const uint8_t *x,
							     const struct mi_qpool_shape *s,
							     bool s8, uint8_t *tmp, uint8_t *y)
{
	const uint8_t *r[64];
	bool hv = s->dw == 1 && (s->sw == 1 || s->sw == 2);
	int ox_lo, ox_hi;

	hmax_range(s, &ox_lo, &ox_hi);
	if (!hv || ox_hi - ox_lo < 16)
		ox_lo = ox_hi = 0;
	for (int oy = 0; oy < s->oh; oy++) {
		uint8_t *yr = y + (size_t)oy * s->ow;
		int nr = pool_rows(x, s, oy, s->w, r);

		if (!nr) {
			memset(yr, s8 ? 0x80 : 0, s->ow);
			continue;
		}
		vmax_rows_avx2(tmp, r, nr, s->w, s8);
		if (ox_hi - ox_lo >= 32) {
			int ox = hmax_avx2(tmp, s, s8, ox_lo, ox_hi, yr);

			if (ox < ox_hi)
				hmax_avx2(tmp, s, s8, ox_hi - 32, ox_hi, yr);
		} else if (ox_hi > ox_lo) {
			hmax16_avx2(tmp, s, s8, ox_lo, ox_hi, yr);
		}
		for (int ox = 0; ox < s->ow; ox++) {
			int m = s8 ? -128 : 0;

			if (ox == ox_lo && ox_hi > ox_lo)
				ox = ox_hi;
			if (ox == s->ow)
				break;
			for (int kx = 0; kx < s->kw; kx++) {
				int ix = ox * s->sw - s->pl + kx * s->dw;

				if (ix < 0 || ix >= s->w)
					continue;
				int e = s8 ? (int8_t)tmp[ix] : tmp[ix];

				m = e > m ? e : m;
			}
			yr[ox] = (uint8_t)m;
		}
	}
}

/* max of two vectors of bytes, signed or not */
__attribute__((target("avx2"), always_inline)) static inline __m256i vmax8(__m256i a, __m256i b,
									  const bool s8)
{
	return s8 ? _mm256_max_epi8(a, b) : _mm256_max_epu8(a, b);
}

/*
 * The horizontal pass of qmaxpool_c4_3 on outputs [ox0, ox1) (at least
 * 8), hmax_c4_avx2's loads and maxes with the last step moved back onto
 * the one before; KW and SW: the kernel width and stride when known at
 * compile time (the specialized copies), 0: s's.
 */
__attribute__((target("avx2"), always_inline)) static inline void
hmax_c4_k(const uint8_t *t, const struct mi_qpool_shape *s, int ox0, int ox1, uint8_t *y,
	  const int KW, const int SW, const bool s8)
{
	const int kw = KW ? KW : s->kw, sw = SW ? SW : s->sw;

	for (int ox = ox0;; ox += 8) {
		if (ox + 8 > ox1)
			ox = ox1 - 8;
		const uint8_t *r = t + (size_t)(ox * sw - s->pl) * 4;
		__m256i a = _mm256_setzero_si256();

		for (int kx = 0; kx < kw; kx++) {
			__m256i b;

			if (sw == 1) {
				b = _mm256_loadu_si256((const __m256i *)(r + kx * 4));
			} else {
				__m256 l = _mm256_loadu_ps((const float *)(const void *)(r + kx * 4));
				__m256 h = _mm256_loadu_ps(
					(const float *)(const void *)(r + kx * 4 + 32));

				b = _mm256_permute4x64_epi64(
					_mm256_castps_si256(_mm256_shuffle_ps(l, h, 0x88)), 0xd8);
			}
			a = !kx ? b : vmax8(a, b, s8);
		}
		_mm256_storeu_si256((__m256i *)(y + (size_t)ox * 4), a);
		if (ox + 8 >= ox1)
			return;
	}
}

/* vmax_rows_avx2 with NR rows known at compile time (2 or 3), n >= 32 */
__attribute__((target("avx2"), always_inline)) static inline void
vmax_rows_k(uint8_t *t, const uint8_t *const *r, int n, const int NR, const bool s8)
{
	for (int i = 0;; i += 32) {
		if (i + 32 > n)
			i = n - 32;
		__m256i a = vmax8(_mm256_loadu_si256((const __m256i *)(r[0] + i)),
				  _mm256_loadu_si256((const __m256i *)(r[1] + i)), s8);

		if (NR == 3)
			a = vmax8(a, _mm256_loadu_si256((const __m256i *)(r[2] + i)), s8);
		_mm256_storeu_si256((__m256i *)(t + i), a);
		if (i + 32 >= n)
			return;
	}
}

/*
 * The same for a C4 quad plane: outputs with their taps inside the row
 * (stride 1 or 2, no dilation) 8 pixels at a time, the last step
 * overlapping the one before; the others (the ceil-mode or padded edges,
 * any stride or dilation) a pixel of 4 channels at a time (hmax_c4_px).
 * KW, SW (0: s's) and s8 known at compile time in the copies
 * qmaxpool_c4_3 dispatches to (3x3 and 2x2 kernels), 2- and 3-row
 * vertical passes too: the generic loops' branches per tap and per byte
 * op were half their time (SqueezeNet 1.1's 3x3/2 MaxPools ~1.5x).
 */
__attribute__((target("avx2"), always_inline)) static inline void
qmaxpool_c4_3k(const uint8_t *x, const struct mi_qpool_shape *s, uint8_t *tmp, uint8_t *y,
	       const int KW, const int SW, const bool s8)
{
	const uint8_t *r[64];
	bool hv = s->dw == 1 && (s->sw == 1 || s->sw == 2);
	int ox_lo, ox_hi, w4 = s->w * 4;

	hmax_range(s, &ox_lo, &ox_hi);
	if (!hv || ox_hi - ox_lo < 8)
		ox_lo = ox_hi = 0;
	for (int oy = 0; oy < s->oh; oy++) {
		uint8_t *yr = y + (size_t)oy * s->ow * 4;
		int nr = pool_rows(x, s, oy, (size_t)w4, r);

		if (!nr) {
			memset(yr, s8 ? 0x80 : 0, (size_t)s->ow * 4);
			continue;
		}
		if (KW && nr == 3 && w4 >= 32)
			vmax_rows_k(tmp, r, w4, 3, s8);
		else if (KW && nr == 2 && w4 >= 32)
			vmax_rows_k(tmp, r, w4, 2, s8);
		else
			vmax_rows_avx2(tmp, r, nr, w4, s8);
		if (ox_hi > ox_lo)
			hmax_c4_k(tmp, s, ox_lo, ox_hi, yr, KW, SW, s8);
		for (int ox = 0; ox < ox_lo; ox++)
			hmax_c4_px(tmp, s, s8, ox, yr);
		for (int ox = ox_hi; ox < s->ow; ox++)
			hmax_c4_px(tmp, s, s8, ox, yr);
	}
}

__attribute__((target("avx2"))) static void qmaxpool_c4_3(const uint8_t *x,
							   const struct mi_qpool_shape *s, bool s8,
							   uint8_t *tmp, uint8_t *y)
{
	bool k3 = s->kw == 3 && s->dw == 1, k2 = s->kw == 2 && s->dw == 1;

	if (k3 && s->sw == 2 && !s8)
		qmaxpool_c4_3k(x, s, tmp, y, 3, 2, false);
	else if (k3 && s->sw == 2)
		qmaxpool_c4_3k(x, s, tmp, y, 3, 2, true);
	else if (k3 && s->sw == 1 && !s8)
		qmaxpool_c4_3k(x, s, tmp, y, 3, 1, false);
	else if (k3 && s->sw == 1)
		qmaxpool_c4_3k(x, s, tmp, y, 3, 1, true);
	else if (k2 && s->sw == 2 && !s8)
		qmaxpool_c4_3k(x, s, tmp, y, 2, 2, false);
	else if (k2 && s->sw == 2)
		qmaxpool_c4_3k(x, s, tmp, y, 2, 2, true);
	else if (!s8)
		qmaxpool_c4_3k(x, s, tmp, y, 0, 0, false);
	else
		qmaxpool_c4_3k(x, s, tmp, y, 0, 0, true);
}

/* One channel plane; tmp: w bytes. */
void mi_qmaxpool_plane(const uint8_t *x, const struct mi_qpool_shape *s, bool s8,
		       uint8_t *tmp, uint8_t *y)
{
	bool v = mi_quant_isa() >= MI_QISA_AVX2;
	/* outputs whose horizontal taps are all inside the row */
	int ox_lo = (s->pl + s->sw - 1) / s->sw;
	int ox_hi = s->w - 1 - (s->kw - 1) * s->dw + s->pl;
	bool v512 = mi_quant_isa() >= MI_QISA_AVX512;
	bool hv = v512 && s->dw == 1 && (s->sw == 1 || s->sw == 2);
	bool hv2 = v && !v512 && s->dw == 1 && (s->sw == 1 || s->sw == 2);

	if (v && !v512 && s->kh <= 64) {
		qmaxpool_plane3(x, s, s8, tmp, y);
		return;
	}
	ox_hi = ox_hi < 0 ? 0 : ox_hi / s->sw + 1;
	if (ox_hi > s->ow)
		ox_hi = s->ow;
	if (ox_lo > ox_hi)
		ox_lo = ox_hi;

	for (int oy = 0; oy < s->oh; oy++) {
		bool any = false;

		for (int ky = 0; ky < s->kh; ky++) {
			int iy = oy * s->sh - s->pt + ky * s->dh;

			if (iy < 0 || iy >= s->h)
				continue;
			if (!any)
				memcpy(tmp, x + (size_t)iy * s->w, s->w);
			else if (v512)
				vmax_avx512(tmp, x + (size_t)iy * s->w, s->w, s8);
			else if (v)
				vmax_avx2(tmp, x + (size_t)iy * s->w, s->w, s8);
			else
				vmax_c(tmp, x + (size_t)iy * s->w, s->w, s8);
			any = true;
		}
		for (int ox = 0; ox < s->ow; ox++) {
			int m = s8 ? -128 : 0;

			if (hv && any && ox == ox_lo && ox_lo < ox_hi) {
				hmax_avx512(tmp, s, s8, ox_lo, ox_hi, y + (size_t)oy * s->ow);
				ox = ox_hi - 1;
				continue;
			}
			if (hv2 && any && ox == ox_lo) {
				ox = hmax_avx2(tmp, s, s8, ox_lo, ox_hi, y + (size_t)oy * s->ow);
				if (ox == s->ow)
					break;
			}

			for (int kx = 0; kx < s->kw && any; kx++) {
				int ix = ox * s->sw - s->pl + kx * s->dw;

				if (ix < 0 || ix >= s->w)
					continue;
				int e = s8 ? (int8_t)tmp[ix] : tmp[ix];

				m = e > m ? e : m;
			}
			y[(size_t)oy * s->ow + ox] = (uint8_t)m;
		}
	}
}

/* Horizontal pass of the C4 MaxPool, AVX-512: 16 output pixels (4 bytes,
 * one per channel) per step, each tap's pixels gathered by index; taps
 * outside the row keep the neutral value. */
__attribute__((target("avx512f,avx512bw"))) static void
hmax_c4_avx512(const uint8_t *t, const struct mi_qpool_shape *s, bool s8, uint8_t *y)
{
	const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14,
					       15);
	const __m512i neutral = _mm512_set1_epi8(s8 ? (char)0x80 : 0);
	const __m512i wv = _mm512_set1_epi32(s->w);

	for (int ox = 0; ox < s->ow; ox += 16) {
		__mmask16 m = s->ow - ox >= 16 ? 0xffff : (__mmask16)((1u << (s->ow - ox)) - 1);
		__m512i base = _mm512_mullo_epi32(_mm512_add_epi32(lane, _mm512_set1_epi32(ox)),
						  _mm512_set1_epi32(s->sw));
		__m512i acc = neutral;

		for (int kx = 0; kx < s->kw; kx++) {
			__m512i ix = _mm512_add_epi32(base, _mm512_set1_epi32(kx * s->dw - s->pl));
			__mmask16 ok = m & _mm512_cmpge_epi32_mask(ix, _mm512_setzero_si512()) &
				       _mm512_cmplt_epi32_mask(ix, wv);
			__m512i v = _mm512_mask_i32gather_epi32(neutral, ok, ix, (const void *)t, 4);

			acc = s8 ? _mm512_max_epi8(acc, v) : _mm512_max_epu8(acc, v);
		}
		_mm512_mask_storeu_epi32(y + (size_t)ox * 4, m, acc);
	}
}

void mi_qmaxpool_plane_c4(const uint8_t *x, const struct mi_qpool_shape *s, bool s8,
			  uint8_t *tmp, uint8_t *y)
{
	int w4 = s->w * 4, ox_lo, ox_hi;
	bool v = mi_quant_isa() >= MI_QISA_AVX2, v512 = mi_quant_isa() >= MI_QISA_AVX512;
	bool hv2 = v && !v512 && s->dw == 1 && (s->sw == 1 || s->sw == 2);

	if (v && !v512 && s->kh <= 64) {
		qmaxpool_c4_3(x, s, s8, tmp, y);
		return;
	}
	hmax_range(s, &ox_lo, &ox_hi);

	for (int oy = 0; oy < s->oh; oy++) {
		uint8_t *yr = y + (size_t)oy * s->ow * 4;
		bool any = false;

		for (int ky = 0; ky < s->kh; ky++) {
			int iy = oy * s->sh - s->pt + ky * s->dh;

			if (iy < 0 || iy >= s->h)
				continue;
			if (!any)
				memcpy(tmp, x + (size_t)iy * w4, w4);
			else if (v512)
				vmax_avx512(tmp, x + (size_t)iy * w4, w4, s8);
			else if (v)
				vmax_avx2(tmp, x + (size_t)iy * w4, w4, s8);
			else
				vmax_c(tmp, x + (size_t)iy * w4, w4, s8);
			any = true;
		}
		if (!any) {
			memset(yr, s8 ? 0x80 : 0, (size_t)s->ow * 4);
			continue;
		}
		if (v512) {
			hmax_c4_avx512(tmp, s, s8, yr);
			continue;
		}
		for (int ox = 0; ox < s->ow; ox++) {
			if (hv2 && ox == ox_lo) {
				ox = hmax_c4_avx2(tmp, s, s8, ox_lo, ox_hi, yr);
				if (ox == s->ow)
					break;
			}
			for (int c = 0; c < 4; c++) {
				int m = s8 ? -128 : 0;

				for (int kx = 0; kx < s->kw; kx++) {
					int ix = ox * s->sw - s->pl + kx * s->dw;

					if (ix < 0 || ix >= s->w)
						continue;
					int e = s8 ? (int8_t)tmp[ix * 4 + c] : tmp[ix * 4 + c];

					m = e > m ? e : m;
				}
				yr[ox * 4 + c] = (uint8_t)m;
			}
		}
	}
}
