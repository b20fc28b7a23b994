// SPDX-License-Identifier: MIT
/*
 * Planner step for int8 execution: standalone QuantizeLinear /
 * DequantizeLinear nodes, and the layout contract lib/cpu's blocked
 * planner uses for them.
 */
#include "debug.h"
#include "quant/qplan-impl.h"

/* ---- standalone QuantizeLinear / DequantizeLinear --------------------------- */

/*
 * A QuantizeLinear (fp32 -> uint8/int8) or DequantizeLinear (uint8/int8 ->
 * fp32) left over after the fusions above (the model input, fp32/int8
 * boundaries of mixed-precision files) with a per-tensor scale and zero
 * point: the reference op's kernels (mi_quantize_f32 / mi_dequantize, so
 * the same bytes) split over the threads.
 */
struct qdq_job {
	const struct qnode *q;
	const void *x;
	void *y;
};

static void qdq_range(void *arg, int64_t b, int64_t e)
{
	const struct qdq_job *j = arg;
	const struct qact *a = &j->q->qdq;

	if (j->q->qdq_deq)
		mi_dequantize((const uint8_t *)j->x + b, a->dtype, e - b, a->scale, a->zp,
			      (float *)j->y + b);
	else
		mi_quantize_f32((const float *)j->x + b, e - b, a->scale, a->zp, a->dtype,
				(uint8_t *)j->y + b);
}

/*
 * The same on a 4-D tensor whose quantized side is in C4 layout ([C/4][HW][4]
 * bytes per image, written / read by int8 convs) and/or whose fp32 side is
 * blocked ([ceil(C/B)][HW][B] floats per image, written / read by the NCHWc
 * kernels): items of QDQ_E / G pixels of one group of G channels (G = B when
 * the fp32 side is blocked, else 4), bytes moved to / from the fp32 side's
 * order (or 4-channel floats between planar and C4), then the same
 * elementwise kernels on contiguous runs (so the same values as the planar
 * op).  Pad lanes of a blocked DQ output get the map of byte 0; those of
 * a blocked Q input are quantized and dropped.
 */
#define QDQ_E 4096 /* elements per item: QDQ_E / G pixels */

/* Move np pixels of 4 channels between [np][4] (pix) and 4 rows of row
 * stride rs (rows): to_rows copies pix -> rows, else rows -> pix.  Four
 * 4x4 transposes at a time (pure moves). */
static void qdq_t4(float *pix, float *rows, int64_t rs, int64_t np, bool to_rows)
{
	int64_t p = 0;

#ifdef __SSE2__
	for (; p + 4 <= np; p += 4) {
		__m128 r0, r1, r2, r3;

		if (to_rows) {
			r0 = _mm_loadu_ps(pix + p * 4);
			r1 = _mm_loadu_ps(pix + p * 4 + 4);
			r2 = _mm_loadu_ps(pix + p * 4 + 8);
			r3 = _mm_loadu_ps(pix + p * 4 + 12);
			_MM_TRANSPOSE4_PS(r0, r1, r2, r3);
			_mm_storeu_ps(rows + p, r0);
			_mm_storeu_ps(rows + rs + p, r1);
			_mm_storeu_ps(rows + 2 * rs + p, r2);
			_mm_storeu_ps(rows + 3 * rs + p, r3);
		} else {
			r0 = _mm_loadu_ps(rows + p);
			r1 = _mm_loadu_ps(rows + rs + p);
			r2 = _mm_loadu_ps(rows + 2 * rs + p);
			r3 = _mm_loadu_ps(rows + 3 * rs + p);
			_MM_TRANSPOSE4_PS(r0, r1, r2, r3);
			_mm_storeu_ps(pix + p * 4, r0);
			_mm_storeu_ps(pix + p * 4 + 4, r1);
			_mm_storeu_ps(pix + p * 4 + 8, r2);
			_mm_storeu_ps(pix + p * 4 + 12, r3);
		}
	}
#endif
	for (; p < np; p++)
		for (int l = 0; l < 4; l++) {
			if (to_rows)
				rows[l * rs + p] = pix[p * 4 + l];
			else
				pix[p * 4 + l] = rows[l * rs + p];
		}
}

/*
 * qdq_t16's B = 16 case, 16 pixels per step: the 16 rows in four
 * registers (row 4k + L in lane L of register k), each group of four
 * pixels (64 bytes, byte 16 pp + c = row c, pixel pp) picked from them by
 * two vpermt2b (rows 0-7, rows 8-15) and a blend.  The other way round
 * the same index and mask pick row 4k + L's 16 bytes from the four pixel
 * groups.  Returns the pixels done.
 */
__attribute__((target("avx512f,avx512bw,avx512vbmi"), always_inline)) static inline int64_t
qdq_t16_body(uint8_t *pix, uint8_t *rows, int64_t rs, int nrows, int64_t np, bool to_rows,
	     const uint8_t *planes, float *y)
{
	__m512i t[16];

	if (planes)
		lut32_load(planes, t);
	/* byte q: ((q & 15) >> 2 & 1) * 64 + (q & 3) * 16 + (q >> 4) */
	const __m512i base = _mm512_set_epi8(
		115, 99, 83, 67, 51, 35, 19, 3, 115, 99, 83, 67, 51, 35, 19, 3,
		114, 98, 82, 66, 50, 34, 18, 2, 114, 98, 82, 66, 50, 34, 18, 2,
		113, 97, 81, 65, 49, 33, 17, 1, 113, 97, 81, 65, 49, 33, 17, 1,
		112, 96, 80, 64, 48, 32, 16, 0, 112, 96, 80, 64, 48, 32, 16, 0);
	const __mmask64 hi8 = 0xff00ff00ff00ff00ull; /* (q & 15) >= 8: registers 2, 3 */
	int64_t p = 0;

	for (; p + 16 <= np; p += 16) {
		__m512i in[4], out[4];

		for (int k = 0; k < 4; k++) {
			if (to_rows) {
				in[k] = _mm512_loadu_si512(pix + (p + 4 * k) * 16);
				continue;
			}
			in[k] = _mm512_setzero_si512();
			for (int l = 0; l < 4 && 4 * k + l < nrows; l++)
				in[k] = _mm512_mask_broadcast_i32x4(
					in[k], (__mmask16)(0xf << (4 * l)),
					_mm_loadu_si128((const __m128i *)(rows + (4 * k + l) * rs + p)));
		}
#pragma GCC unroll 4
		for (int j = 0; j < 4; j++) {
			__m512i ix = _mm512_add_epi8(base, _mm512_set1_epi8((char)(4 * j)));

			out[j] = _mm512_mask_blend_epi8(hi8, _mm512_permutex2var_epi8(in[0], ix, in[1]),
							_mm512_permutex2var_epi8(in[2], ix, in[3]));
		}
		for (int k = 0; k < 4; k++) {
			if (!to_rows && planes) { /* the four pixels' floats */
				__m512 v[4];

				lut32_vbmi(t, out[k], v);
				for (int i = 0; i < 4; i++)
					_mm512_storeu_ps(y + (p + 4 * k + i) * 16, v[i]);
				continue;
			}
			if (!to_rows) {
				_mm512_storeu_si512(pix + (p + 4 * k) * 16, out[k]);
				continue;
			}
			for (int l = 0; l < 4 && 4 * k + l < nrows; l++)
				_mm_storeu_si128((__m128i *)(rows + (4 * k + l) * rs + p),
						 _mm512_castsi512_si128(_mm512_permutexvar_epi32(
							 _mm512_add_epi32(_mm512_set1_epi32(4 * l),
									  _mm512_setr_epi32(0, 1, 2, 3, 0, 0, 0,
											    0, 0, 0, 0, 0, 0, 0,
											    0, 0)),
							 out[k])));
		}
	}
	return p;
}

__attribute__((target("avx512f,avx512bw,avx512vbmi"))) static int64_t
qdq_t16_vbmi(uint8_t *pix, uint8_t *rows, int64_t rs, int nrows, int64_t np, bool to_rows)
{
	return qdq_t16_body(pix, rows, rs, nrows, np, to_rows, NULL, NULL);
}

/* planar bytes -> 16-lane pixel rows looked up in the table's byte planes
 * straight from registers: y[16 p + c] = lut[row c, pixel p] (pad rows
 * past nrows: lut[0], as qdq_t16 + qdq_deq give).  Returns the pixels done. */
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) static int64_t
qdq_t16_lut_vbmi(const uint8_t *planes, uint8_t *rows, int64_t rs, int nrows, int64_t np,
		 float *y)
{
	return qdq_t16_body(NULL, rows, rs, nrows, np, false, planes, y);
}

/* C4 quads -> 16-lane pixel rows looked up in the table's byte planes
 * (qdq_q4 + qdq_deq for B = 16 from registers): per 16 pixels each of the
 * four quad planes (nq real, the rest zero bytes) looked up, then 4x4
 * transposes of 128-bit blocks put pixel j's four quads side by side.
 * Returns the pixels done. */
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) static int64_t
qdq_q4_lut_vbmi(const uint8_t *planes, const uint8_t *quads, int64_t qs, int nq, int64_t np,
		float *y)
{
	__m512i t[16];
	int64_t p = 0;

	lut32_load(planes, t);
	for (; p + 16 <= np; p += 16) {
		__m512 v[4][4];

#pragma GCC unroll 4
		for (int k = 0; k < 4; k++)
			lut32_vbmi(t, k < nq ? _mm512_loadu_si512(quads + k * qs + p * 4) :
					       _mm512_setzero_si512(), v[k]);
#pragma GCC unroll 4
		for (int i = 0; i < 4; i++) {
			__m512 a = _mm512_shuffle_f32x4(v[0][i], v[1][i], 0x44);
			__m512 b = _mm512_shuffle_f32x4(v[0][i], v[1][i], 0xee);
			__m512 c = _mm512_shuffle_f32x4(v[2][i], v[3][i], 0x44);
			__m512 d = _mm512_shuffle_f32x4(v[2][i], v[3][i], 0xee);
			float *o = y + (p + 4 * i) * 16;

			_mm512_storeu_ps(o, _mm512_shuffle_f32x4(a, c, 0x88));
			_mm512_storeu_ps(o + 16, _mm512_shuffle_f32x4(a, c, 0xdd));
			_mm512_storeu_ps(o + 32, _mm512_shuffle_f32x4(b, d, 0x88));
			_mm512_storeu_ps(o + 48, _mm512_shuffle_f32x4(b, d, 0xdd));
		}
	}
	return p;
}

/* Move np pixels of nrows (<= B) channels between B-byte pixel rows (pix,
 * [np][B]) and nrows byte rows of stride rs (rows): to_rows copies pix ->
 * rows, else rows -> pix (lanes past nrows 0).  16x16 byte transposes:
 * four rounds of unpacking rows j and j + 8 each rotate the 8-bit
 * (row, column) index left by one, four rotate it into (column, row). */
static void qdq_t16(uint8_t *pix, int B, uint8_t *rows, int64_t rs, int nrows, int64_t np,
		    bool to_rows)
{
	int64_t p = 0;

	if (B == 16 && mi_quant_isa() == MI_QISA_AVX512 && qp_have_vbmi())
		p = qdq_t16_vbmi(pix, rows, rs, nrows, np, to_rows);
#ifdef __SSE2__
	for (; p + 16 <= np; p += 16) {
		__m128i r[16], t[16];

		for (int k = 0; k < 16; k++) {
			const uint8_t *s = to_rows ? pix + (p + k) * B : rows + k * rs + p;
			int32_t v4;

			if (!to_rows)
				r[k] = k < nrows ? _mm_loadu_si128((const __m128i *)s) :
						   _mm_setzero_si128();
			else if (B == 16)
				r[k] = _mm_loadu_si128((const __m128i *)s);
			else if (B == 8)
				r[k] = _mm_loadl_epi64((const __m128i *)s);
			else {
				memcpy(&v4, s, 4);
				r[k] = _mm_cvtsi32_si128(v4);
			}
		}
		for (int round = 0; round < 4; round++) {
			for (int j = 0; j < 8; j++) {
				t[2 * j] = _mm_unpacklo_epi8(r[j], r[j + 8]);
				t[2 * j + 1] = _mm_unpackhi_epi8(r[j], r[j + 8]);
			}
			memcpy(r, t, sizeof(r));
		}
		for (int k = 0; k < 16; k++) {
			uint8_t *d = to_rows ? rows + k * rs + p : pix + (p + k) * B;
			int32_t v4;

			if (to_rows) {
				if (k < nrows)
					_mm_storeu_si128((__m128i *)d, r[k]);
			} else if (B == 16) {
				_mm_storeu_si128((__m128i *)d, r[k]);
			} else if (B == 8) {
				_mm_storel_epi64((__m128i *)d, r[k]);
			} else {
				v4 = _mm_cvtsi128_si32(r[k]);
				memcpy(d, &v4, 4);
			}
		}
	}
#endif
	for (; p < np; p++)
		for (int l = 0; l < B; l++) {
			if (to_rows && l < nrows)
				rows[l * rs + p] = pix[p * B + l];
			else if (!to_rows)
				pix[p * B + l] = l < nrows ? rows[l * rs + p] : 0;
		}
}

/* Move np pixels between B-byte pixel rows (pix, [np][B]) and the B / 4
 * C4 quad planes at quads + k * qs ([np][4] bytes each), nq of them real:
 * to_quads copies pix -> quads, else quads -> pix (lanes of quads past nq
 * 0).  4x4 (B 16) / 2x4 (B 8) transposes of 32-bit quads (pure moves). */
static void qdq_q4(uint8_t *pix, int B, uint8_t *quads, int64_t qs, int nq, int64_t np,
		   bool to_quads)
{
	int64_t p = 0;

#ifdef __SSE2__
	static const float zero[4];
	const float *s[4];
	float *d[4];
	int st[4];

	for (int k = 0; k < 4; k++) {
		s[k] = k < nq ? (const float *)(quads + k * qs) : zero;
		st[k] = k < nq ? 4 : 0; /* floats per 4 pixels; pad quads read zeros */
		d[k] = (float *)(quads + k * qs);
	}
	if (B == 16 && !to_quads)
		for (; p + 4 <= np; p += 4) {
			__m128 r0 = _mm_loadu_ps(s[0] + p / 4 * st[0]);
			__m128 r1 = _mm_loadu_ps(s[1] + p / 4 * st[1]);
			__m128 r2 = _mm_loadu_ps(s[2] + p / 4 * st[2]);
			__m128 r3 = _mm_loadu_ps(s[3] + p / 4 * st[3]);
			float *o = (float *)(pix + p * 16);

			_MM_TRANSPOSE4_PS(r0, r1, r2, r3);
			_mm_storeu_ps(o, r0);
			_mm_storeu_ps(o + 4, r1);
			_mm_storeu_ps(o + 8, r2);
			_mm_storeu_ps(o + 12, r3);
		}
	if (B == 16 && to_quads)
		for (; p + 4 <= np; p += 4) {
			const float *i = (const float *)(pix + p * 16);
			__m128 r0 = _mm_loadu_ps(i), r1 = _mm_loadu_ps(i + 4);
			__m128 r2 = _mm_loadu_ps(i + 8), r3 = _mm_loadu_ps(i + 12);

			_MM_TRANSPOSE4_PS(r0, r1, r2, r3);
			_mm_storeu_ps(d[0] + p, r0);
			if (nq > 1)
				_mm_storeu_ps(d[1] + p, r1);
			if (nq > 2)
				_mm_storeu_ps(d[2] + p, r2);
			if (nq > 3)
				_mm_storeu_ps(d[3] + p, r3);
		}
	if (B == 8 && !to_quads)
		for (; p + 4 <= np; p += 4) {
			__m128 r0 = _mm_loadu_ps(s[0] + p / 4 * st[0]);
			__m128 r1 = _mm_loadu_ps(s[1] + p / 4 * st[1]);
			float *o = (float *)(pix + p * 8);

			_mm_storeu_ps(o, _mm_unpacklo_ps(r0, r1));
			_mm_storeu_ps(o + 4, _mm_unpackhi_ps(r0, r1));
		}
	if (B == 8 && to_quads)
		for (; p + 4 <= np; p += 4) {
			const float *i = (const float *)(pix + p * 8);
			__m128 r0 = _mm_loadu_ps(i), r1 = _mm_loadu_ps(i + 4);

			_mm_storeu_ps(d[0] + p, _mm_shuffle_ps(r0, r1, _MM_SHUFFLE(2, 0, 2, 0)));
			if (nq > 1)
				_mm_storeu_ps(d[1] + p, _mm_shuffle_ps(r0, r1, _MM_SHUFFLE(3, 1, 3, 1)));
		}
#endif
	for (; p < np; p++)
		for (int k = 0; k < B / 4; k++) {
			if (to_quads && k < nq)
				memcpy(quads + k * qs + p * 4, pix + p * B + 4 * k, 4);
			else if (!to_quads && k < nq)
				memcpy(pix + p * B + 4 * k, quads + k * qs + p * 4, 4);
			else if (!to_quads)
				memset(pix + p * B + 4 * k, 0, 4);
		}
}

/*
 * DequantizeLinear of nrows (<= 8) planar byte rows (rs apart) into pixel
 * rows of 8 floats (lanes past nrows from 0 bytes, as qdq_t16 pads), 8
 * pixels per step: an 8x8 byte transpose in registers, then
 * dequant_avx2's operations per pixel ((q - zp) as float, times scale:
 * the same floats), with no byte buffer between.  Returns the pixels done.
 */
__attribute__((target("avx2"))) static int64_t
qdq_t8_deq_avx2(const uint8_t *rows, int64_t rs, int nrows, int64_t np, bool u8,
		float scale, int32_t zp, float *y)
{
	const __m256 s = _mm256_set1_ps(scale);
	const __m256i z = _mm256_set1_epi32(zp);
	int64_t p = 0;

	for (; p + 8 <= np; p += 8) {
		__m128i r[8], t[4], u[4], v[4];

		for (int k = 0; k < 8; k++)
			r[k] = k < nrows ? _mm_loadl_epi64((const __m128i *)(rows + k * rs + p)) :
					   _mm_setzero_si128();
		for (int k = 0; k < 4; k++)
			t[k] = _mm_unpacklo_epi8(r[2 * k], r[2 * k + 1]);
		u[0] = _mm_unpacklo_epi16(t[0], t[1]);
		u[1] = _mm_unpackhi_epi16(t[0], t[1]);
		u[2] = _mm_unpacklo_epi16(t[2], t[3]);
		u[3] = _mm_unpackhi_epi16(t[2], t[3]);
		v[0] = _mm_unpacklo_epi32(u[0], u[2]); /* pixels 0, 1 */
		v[1] = _mm_unpackhi_epi32(u[0], u[2]); /* 2, 3 */
		v[2] = _mm_unpacklo_epi32(u[1], u[3]); /* 4, 5 */
		v[3] = _mm_unpackhi_epi32(u[1], u[3]); /* 6, 7 */
		for (int k = 0; k < 8; k++) {
			__m128i b = k & 1 ? _mm_unpackhi_epi64(v[k / 2], v[k / 2]) : v[k / 2];
			__m256i q = u8 ? _mm256_cvtepu8_epi32(b) : _mm256_cvtepi8_epi32(b);

			_mm256_storeu_ps(y + (p + k) * 8,
					 _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(q, z)), s));
		}
	}
	return p;
}

/* The node's byte -> float map on n contiguous bytes: a DequantizeLinear,
 * or a float-output table node (qlut_range's kernels). */
void qdq_deq(const struct qnode *q, const uint8_t *x, int64_t n, float *y)
{
	if (!q->lut) {
		mi_dequantize(x, q->qdq.dtype, n, q->qdq.scale, q->qdq.zp, y);
		return;
	}
	qp_lut_f32(q, x, n, y);
}

static void qdq_item(const struct qnode *q, const void *xv, void *yv, int64_t i)
{
	const struct qact *a = &q->qdq;
	const int B = q->qdq_fk ? q->qdq_fk->b : 0, G = B ? B : 4, P = QDQ_E / G;
	const int64_t C = q->qdq_c, HW = q->qdq_hw, nch = (HW + P - 1) / P;
	const int64_t ng = (C + G - 1) / G, img = i / (ng * nch), grp = i / nch % ng;
	const int64_t p0 = i % nch * P, np = HW - p0 < P ? HW - p0 : P;
	const int64_t c0 = grp * G, cnt = C - c0 < G ? C - c0 : G;
	const int64_t fimg = (B ? ng * B : C) * HW, fofs = img * fimg + (B ? grp * HW * B + p0 * B : 0);
	const uint8_t *xq = (const uint8_t *)xv + img * C * HW;
	uint8_t *yq = (uint8_t *)yv + img * C * HW;
	float tf[QDQ_E];
	uint8_t tb[QDQ_E];

	if (q->qdq_deq) {
		float *y = (float *)yv + fofs;

		if (B && q->qdq_c4) { /* C4 quads -> pixel rows of B lanes */
			int64_t d = 0;

			if (B == 16 && q->lutb && mi_quant_isa() == MI_QISA_AVX512 && qp_have_vbmi())
				d = qdq_q4_lut_vbmi(q->lutb, xq + c0 * HW + p0 * 4, HW * 4,
						    (int)(cnt + 3) / 4, np, y);
			qdq_q4(tb, B, (uint8_t *)xq + c0 * HW + (p0 + d) * 4, HW * 4, (int)(cnt + 3) / 4,
			       np - d, false);
			qdq_deq(q, tb, (np - d) * B, y + d * B);
		} else if (B) { /* planar -> pixel rows of B lanes */
			int64_t d = 0;

			if (B == 16 && q->lutb && mi_quant_isa() == MI_QISA_AVX512 && qp_have_vbmi())
				d = qdq_t16_lut_vbmi(q->lutb, (uint8_t *)xq + c0 * HW + p0, HW,
						     (int)cnt, np, y);
			else if (B == 8 && !q->lut && mi_quant_isa() >= MI_QISA_AVX2 &&
				 (a->dtype == MI_DT_UINT8 || a->dtype == MI_DT_INT8))
				d = qdq_t8_deq_avx2(xq + c0 * HW + p0, HW, (int)cnt, np,
						    a->dtype == MI_DT_UINT8, a->scale, a->zp, y);
			qdq_t16(tb, B, (uint8_t *)xq + c0 * HW + p0 + d, HW, (int)cnt, np - d, false);
			qdq_deq(q, tb, (np - d) * B, y + d * B);
		} else if (!q->lut) { /* C4 -> planar */
			mi_dequantize_c4(xq + c0 * HW + p0 * 4, np, a->dtype, a->scale, a->zp,
					 (float *)yv + img * fimg + c0 * HW + p0, HW);
		} else {
			y = (float *)yv + img * fimg + c0 * HW + p0;
			qdq_deq(q, xq + c0 * HW + p0 * 4, np * 4, tf);
			qdq_t4(tf, y, HW, np, true);
		}
		return;
	}
	if (B) {
		const float *x = (const float *)xv + fofs;

		if (q->qdq_c4) { /* pixel rows of B lanes -> C4 quads */
			mi_quantize_f32(x, np * B, a->scale, a->zp, a->dtype, tb);
			qdq_q4(tb, B, yq + c0 * HW + p0 * 4, HW * 4, (int)(cnt + 3) / 4, np, true);
		} else { /* pixel rows of B lanes -> planar */
			mi_quantize_f32(x, np * B, a->scale, a->zp, a->dtype, tb);
			qdq_t16(tb, B, yq + c0 * HW + p0, HW, (int)cnt, np, true);
		}
		return;
	}
	/* planar -> C4 */
	mi_quantize_c4((const float *)xv + img * fimg + c0 * HW + p0, HW, np, a->scale, a->zp,
		       a->dtype, yq + c0 * HW + p0 * 4);
}

static void qdq_item_fn(void *arg, int i, int tid)
{
	const struct qdq_job *j = arg;

	qdq_item(j->q, j->x, j->y, i);
}

/* Runs q in the layouts above when one side is not planar (false: both
 * are; one pixel per channel: C4 is the planar layout). */
bool qdq_layout_run(const struct qnode *q, const void *x, void *y)
{
	struct qdq_job j = { q, x, y };
	int G = q->qdq_fk ? q->qdq_fk->b : 4, P = QDQ_E / G;
	int64_t items = q->qdq_n * ((q->qdq_c + G - 1) / G) * ((q->qdq_hw + P - 1) / P);

	if (!(q->qdq_c4 && q->qdq_hw > 1) && !q->qdq_fk)
		return false;
	/* split from ~2-3 us of work (as qp_par_range), counted in real elements:
	 * items round small maps up (a 7x7 plane group is one 4096-element
	 * item), and those ran slower split */
	if (q->nthreads <= 1 || q->qdq_n * q->qdq_c * q->qdq_hw < 32 << 10) {
		for (int64_t i = 0; i < items; i++)
			qdq_item(q, x, y, i);
		return true;
	}
	qp_cur_threads = q->nthreads;
	qp_pool_for((int)items, qdq_item_fn, &j);
	return true;
}

int qdq_run(struct mi_graph *g, struct mi_node *n)
{
	const struct qnode *q = n->priv;
	struct qdq_job j = { q, mi_in(g, n, 0)->data, mi_out(g, n, 0)->data };

	if (qdq_layout_run(q, j.x, j.y))
		return 0;
	qp_par_range(q->nthreads, mi_tensor_numel(mi_in(g, n, 0)), 16 << 10,
		  qdq_range, &j);
	return 0;
}

/*
 * An int8 conv with fp32 output (the last int8 node before an fp32
 * island of a mixed file) can write it blocked for the NCHWc kernels
 * (conv_run: planar floats transposed), so the fp32 convs, depthwise
 * convs and residual Adds it feeds run as blocked chains instead of on
 * the NCHW kernels (MobileNetV2's features.7 depthwise conv, 0.19 ms on
 * the NCHW kernel).
 */
static bool conv_blk_ok(struct mi_graph *g, struct mi_node *n)
{
	const struct qnode *q = n->priv;
	const struct mi_tensor *y = n->noutputs == 1 ? mi_out(g, n, 0) : NULL;
	const struct mi_qconv_shape *s = &q->cv.s;

	if (!q->is_conv || q->ep.mode != MI_QOUT_F32 || !q->sh || !y || y->dtype != MI_DT_FLOAT ||
	    y->ndim != 4 || !mi_tensor_shape_known(y) || y->dims[1] != s->oc ||
	    y->dims[2] * y->dims[3] != (int64_t)s->oh * s->ow)
		return false;
	/* the transposition goes through memory beyond ~128K floats per
	 * image (0.3-0.5 ns a float on Zen 3): worth it for readers that
	 * the NCHW kernels run several times slower, depthwise convs and
	 * residual Adds (ShuffleNetV2's conv1 -> MaxPool was 0.07 ms slower) */
	if ((int64_t)s->oc * s->oh * s->ow <= (128 << 10))
		return true;
	for (int i = 0; i < g->nnodes; i++) {
		const struct mi_node *c = &g->nodes[i];

		if (c->dead || c->domain[0] || c->ninputs < 1)
			continue;
		if (!strcmp(c->op_type, "Add") && c->ninputs == 2 &&
		    (c->inputs[0] == n->outputs[0] || c->inputs[1] == n->outputs[0]))
			return true;
		if (!strcmp(c->op_type, "Conv") && c->inputs[0] == n->outputs[0] &&
		    mi_attr_int(c, "group", 1) == s->oc && s->oc > 1)
			return true;
	}
	return false;
}

/* lops->role: MI_LAYOUT_PRODUCER if n is a standalone DequantizeLinear
 * (or an int8 conv with fp32 output) that can write its fp32 output
 * blocked, MI_LAYOUT_CONSUMER a QuantizeLinear that can read a blocked
 * input, else MI_LAYOUT_FIXED. */
static int qnode_role(struct mi_graph *g, struct mi_node *n)
{
	const struct qnode *q = n->priv;

	if (!n->dead && qnode_is(n) && conv_blk_ok(g, n))
		return MI_LAYOUT_PRODUCER;
	if (n->dead || !qnode_is(n) || !qdq_like(q))
		return MI_LAYOUT_FIXED;
	/* a Q writing planar bytes reads planar floats: its fp32 producer
	 * writes them lane by lane as cheaply as the Q would transpose
	 * (EfficientNet-B0 features.2.1 expand -> Q -> int8 depthwise, per-node
	 * CPU time 0.13 ms planar vs 0.27 ms blocked -> planar) */
	if (!q->qdq_deq && !q->qdq_c4)
		return MI_LAYOUT_FIXED;
	return q->qdq_deq ? MI_LAYOUT_PRODUCER : MI_LAYOUT_CONSUMER;
}

/* lops->set_blocked: the NCHWc pass stores n's fp32 side blocked for ISA
 * isa. */
static void qnode_set_blocked(struct mi_graph *g, struct mi_node *n, int isa)
{
	struct qnode *q = n->priv;
	const struct mi_nc_kern *k = mi_nc_kern_get(isa);

	if (!qnode_role(g, n) || k->b > 16 || k->b % 4)
		return;
	if (q->is_conv) {
		const struct mi_qconv_shape *s = &q->cv.s;
		size_t off = (mi_qconv_workspace(&q->cv) + 63) & ~(size_t)63;
		size_t need = off + (size_t)s->oc * s->oh * s->ow * sizeof(float);
		int64_t nb = mi_out(g, n, 0)->dims[0];

		if (need > q->sh->size) { /* room for the planar floats */
			void *ws = aligned_alloc(64, (need + 127) & ~(size_t)63);

			if (!ws)
				return;
			free(q->sh->ws);
			q->sh->ws = ws;
			q->sh->size = need;
		}
		q->blk_off = off;
		q->out_b = k->b;
		g->tensors[n->outputs[0]].phys_bytes =
			(size_t)nb * ((s->oc + k->b - 1) / k->b) * k->b * s->oh * s->ow * sizeof(float);
		q->qdq_phys = true;
		if (mi_debug("quant"))
			fprintf(stderr, "metainfer: int8: Conv '%s': fp32 output blocked by %d\n",
				n->name, k->b);
		return;
	}
	q->qdq_fk = k;
	if (q->qdq_deq) {
		g->tensors[n->outputs[0]].phys_bytes =
			(size_t)(q->qdq_n * ((q->qdq_c + k->b - 1) / k->b) * k->b * q->qdq_hw) *
			sizeof(float);
		q->qdq_phys = true;
	}
	if (mi_debug("quant"))
		fprintf(stderr, "metainfer: int8: %s '%s': fp32 side blocked by %d, quantized side %s\n",
			n->op_type, n->name, k->b, q->qdq_c4 ? "C4" : "planar");
}

/*
 * lops->take_add: the residual Add `add` (both operands and its output
 * blocked, an absorbed activation: node act_node (-1: none), act, lo, hi)
 * reads n's blocked fp32 output, n's only reader, and its other operand
 * is ready before n runs: n takes the Add over (ep.res in its blocked
 * epilogue, blk8_store_res, or after the transposition of the fallback).
 * The NCHWc pass then neither reads n's output back nor writes the sum
 * separately (ResNet-50's layer1/layer2 Adds, 0.12-0.25 ms each).
 * 0 done (the Add and act_node dead, undone by qnode_fini), else nothing
 * changed.
 */
static int qnode_take_add(struct mi_graph *g, struct mi_node *n, struct mi_node *add,
			  int act_node, int act, float lo, float hi)
{
	struct qnode *q = n->priv;
	int t = n->outputs[0], s, other, out;

	if (n->dead || !qnode_is(n) || !q->is_conv || !q->out_b ||
	    q->ep.mode != MI_QOUT_F32 || q->res_in || !q->qdq_phys || n->noutputs != 1 ||
	    n->ninputs != 1 || q->orig_ninputs < 2 || q->nkilled + 2 > 8 || add->dead ||
	    add->ninputs != 2 || add->noutputs != 1 ||
	    (act != MI_ACT_NONE && act != MI_ACT_RELU && act != MI_ACT_CLIP))
		return -EOPNOTSUPP;
	s = add->inputs[0] == t ? 0 : add->inputs[1] == t ? 1 : -1;
	if (s < 0 || add->inputs[1 - s] == t || mi_graph_sole_consumer(g, t) != (int)(add - g->nodes))
		return -EOPNOTSUPP;
	other = add->inputs[1 - s];
	out = act_node >= 0 ? g->nodes[act_node].outputs[0] : add->outputs[0];
	qp_kill(g, q, add);
	if (act_node >= 0)
		qp_kill(g, q, &g->nodes[act_node]);
	n->inputs[1] = other;
	n->ninputs = 2;
	q->res_in = 1;
	q->ep.res_act = act == MI_ACT_RELU ? MI_QRES_RELU : act == MI_ACT_CLIP ? MI_QRES_CLIP :
					     MI_QRES_NONE;
	q->ep.res_first = s == 1;
	q->ep.res_lo = lo;
	q->ep.res_hi = hi;
	n->outputs[0] = out;
	g->tensors[out].producer = (int)(n - g->nodes);
	g->tensors[out].phys_bytes = g->tensors[t].phys_bytes;
	g->tensors[t].phys_bytes = 0;
	if (mi_debug("quant"))
		fprintf(stderr, "metainfer: int8: Conv '%s': Add '%s'%s fused\n", n->name,
			add->name, act_node >= 0 ? " + act" : "");
	return 0;
}

const struct mi_layout_ops qnode_lops = {
	.role = qnode_role,
	.set_blocked = qnode_set_blocked,
	.take_add = qnode_take_add,
};

/* The same through lib/cpu/nchwc.c's weak references, until it calls
 * through n->priv's lops only. */
int mi_quant_qdq_kind(struct mi_graph *g, struct mi_node *n)
{
	return qnode_is(n) ? qnode_role(g, n) : MI_LAYOUT_FIXED;
}

void mi_quant_qdq_set_blocked(struct mi_graph *g, struct mi_node *n, int isa)
{
	if (qnode_is(n))
		qnode_set_blocked(g, n, isa);
}

int mi_quant_conv_add(struct mi_graph *g, struct mi_node *n, struct mi_node *add,
		      int act_node, int act, float lo, float hi)
{
	return qnode_is(n) ? qnode_take_add(g, n, add, act_node, act, lo, hi) : -EOPNOTSUPP;
}

int try_qdq_op(struct mi_graph *g, struct mi_node *n)
{
	bool dq = !strcmp(n->op_type, "DequantizeLinear");
	struct mi_tensor *x = mi_in(g, n, 0), *y = n->noutputs == 1 ? mi_out(g, n, 0) : NULL;
	struct qact a;
	struct qnode *q;

	if (n->dead || n->priv || n->domain[0] || (!dq && strcmp(n->op_type, "QuantizeLinear")) ||
	    !x || !y || n->ninputs < 2)
		return 0;
	if (dq ? !qp_act_params(g, n, 0, 1, 2, &a) || y->dtype != MI_DT_FLOAT :
		 x->dtype != MI_DT_FLOAT || !qp_q_params(g, n, &a) ||
		 (mi_in(g, n, 2) && mi_in(g, n, 2)->dtype != y->dtype))
		return 0;
	q = qnode_new(qdq_run);
	if (!q)
		return -ENOMEM;
	q->qdq = a;
	q->qdq_deq = dq;
	qdq_dims(q, x);
	n->priv = q;
	return 0;
}
