// SPDX-License-Identifier: MIT
/*
 * int8 GEMM epilogues: rows x np int32 accumulators -> int32, fp32 or
 * requantized uint8/int8 output (generic, AVX2, AVX-512).
 */
#include "quant/qgemm-impl.h"

/* ---- epilogues: rows x np accumulators -> output ----------------------- */

static inline void epi_one(const struct mi_qepi *ep, int oc, int32_t a,
			   void *out, ptrdiff_t idx)
{
	a += ep->comp[oc];
	switch (ep->mode) {
	case MI_QOUT_U8:
		((uint8_t *)out)[idx] = (uint8_t)mi_qrequant(
			a, ep->mult[oc], ep->zy, ep->flo, ep->fhi);
		break;
	case MI_QOUT_S8:
		((int8_t *)out)[idx] = (int8_t)mi_qrequant(
			a, ep->mult[oc], ep->zy, ep->flo, ep->fhi);
		break;
	case MI_QOUT_S32:
		((int32_t *)out)[idx] = a;
		break;
	default: {
		float v = __builtin_fmaf((float)a, ep->mult[oc],
					 ep->fbias ? ep->fbias[oc] : 0.0f);
		v = !(v >= ep->flo) ? ep->flo : v;
		v = v > ep->fhi ? ep->fhi : v;
		((float *)out)[idx] = v;
	}
	}
}

void epi_generic(const int32_t *acc, int ldacc, int rows, int np,
			const struct mi_qepi *ep, int oc0, void *out,
			ptrdiff_t ldo)
{
	for (int r = 0; r < rows; r++)
		for (int p = 0; p < np; p++)
			epi_one(ep, oc0 + r, acc[r * ldacc + p], out,
				ep->out_c4 ? ((r / 4) * ldo + p) * 4 + r % 4 :
					     r * ldo + p);
}

__attribute__((target("avx2,fma"))) void
epi_avx2(const int32_t *acc, int ldacc, int rows, int np,
	 const struct mi_qepi *ep, int oc0, void *out, ptrdiff_t ldo)
{
	__m256 lo = _mm256_set1_ps(ep->flo), hi = _mm256_set1_ps(ep->fhi);
	__m256i zy = _mm256_set1_epi32(ep->zy);

	if (ep->out_c4 && rows % 4 == 0 &&
	    (ep->mode == MI_QOUT_U8 || ep->mode == MI_QOUT_S8)) {
		/* C4: four channels' low bytes (epi_one's truncation) combined
		 * into one dword per pixel */
		__m256i byte = _mm256_set1_epi32(0xff);

		for (int r = 0; r < rows; r += 4) {
			int p = 0;

			for (; p + 8 <= np; p += 8) {
				__m256i d = _mm256_setzero_si256();

				for (int k = 0; k < 4; k++) {
					int oc = oc0 + r + k;
					__m256i a = _mm256_add_epi32(
						_mm256_loadu_si256((const void *)(acc + (r + k) * ldacc + p)),
						_mm256_set1_epi32(ep->comp[oc]));
					__m256i q = _mm256_add_epi32(
						mi_qrq256(a, _mm256_set1_ps(ep->mult[oc]), lo, hi), zy);

					d = _mm256_or_si256(d, _mm256_slli_epi32(_mm256_and_si256(q, byte),
										 8 * k));
				}
				_mm256_storeu_si256((void *)((uint8_t *)out + ((r / 4) * ldo + p) * 4), d);
			}
			for (int k = 0; k < 4; k++)
				for (int pp = p; pp < np; pp++)
					epi_one(ep, oc0 + r + k, acc[(r + k) * ldacc + pp], out,
						((r / 4) * ldo + pp) * 4 + k);
		}
		return;
	}
	if (ep->out_c4) {
		epi_generic(acc, ldacc, rows, np, ep, oc0, out, ldo);
		return;
	}

	for (int r = 0; r < rows; r++) {
		int oc = oc0 + r;
		__m256i comp = _mm256_set1_epi32(ep->comp[oc]);
		__m256 m = _mm256_set1_ps(ep->mode != MI_QOUT_S32 ?
						  ep->mult[oc] : 0.0f);
		__m256 fb = _mm256_set1_ps(ep->fbias ? ep->fbias[oc] : 0.0f);
		const int32_t *ar = acc + r * ldacc;
		int p = 0;

		for (; p + 8 <= np; p += 8) {
			__m256i a = _mm256_add_epi32(
				_mm256_loadu_si256((const void *)(ar + p)), comp);
			ptrdiff_t idx = r * ldo + p;

			if (ep->mode == MI_QOUT_S32) {
				_mm256_storeu_si256((void *)((int32_t *)out + idx), a);
				continue;
			}
			__m256 f = _mm256_cvtepi32_ps(a);
			if (ep->mode == MI_QOUT_F32) {
				f = _mm256_fmadd_ps(f, m, fb);
				f = _mm256_min_ps(_mm256_max_ps(f, lo), hi);
				_mm256_storeu_ps((float *)out + idx, f);
				continue;
			}
			__m256i q = _mm256_add_epi32(mi_qrq256(a, m, lo, hi), zy);
			__m128i q16 = _mm_packs_epi32(_mm256_castsi256_si128(q),
						      _mm256_extracti128_si256(q, 1));
			__m128i q8 = ep->mode == MI_QOUT_U8 ?
					     _mm_packus_epi16(q16, q16) :
					     _mm_packs_epi16(q16, q16);
			_mm_storel_epi64((void *)((uint8_t *)out + idx), q8);
		}
		for (; p < np; p++)
			epi_one(ep, oc, ar[p], out, r * ldo + p);
	}
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) void
epi_avx512(const int32_t *acc, int ldacc, int rows, int np,
	   const struct mi_qepi *ep, int oc0, void *out, ptrdiff_t ldo)
{
	__m512 lo = _mm512_set1_ps(ep->flo), hi = _mm512_set1_ps(ep->fhi);
	__m512i zy = _mm512_set1_epi32(ep->zy);

	if (ep->out_c4 && rows % 4 == 0 &&
	    (ep->mode == MI_QOUT_U8 || ep->mode == MI_QOUT_S8)) {
		/* C4: four channels' bytes combined into one dword store */
		__m512i byte = _mm512_set1_epi32(0xff);

		for (int r = 0; r < rows; r += 4) {
			for (int p = 0; p < np; p += 16) {
				__mmask16 k = np - p >= 16 ? 0xffff :
							     (__mmask16)((1u << (np - p)) - 1);
				__m512i word = _mm512_setzero_si512();

				for (int j = 0; j < 4; j++) {
					int oc = oc0 + r + j;
					__m512i a = _mm512_add_epi32(
						_mm512_maskz_loadu_epi32(k, acc + (r + j) * ldacc + p),
						_mm512_set1_epi32(ep->comp[oc]));
					__m512i q = _mm512_and_si512(
						_mm512_add_epi32(mi_qrq512(a, _mm512_set1_ps(ep->mult[oc]),
									   lo, hi), zy), byte);

					word = _mm512_or_si512(word, _mm512_slli_epi32(q, 8 * j));
				}
				_mm512_mask_storeu_epi32((uint8_t *)out + ((r / 4) * ldo + p) * 4, k,
							 word);
			}
		}
		return;
	}

	for (int r = 0; r < rows; r++) {
		int oc = oc0 + r;
		__m512i comp = _mm512_set1_epi32(ep->comp[oc]);
		__m512 m = _mm512_set1_ps(ep->mode != MI_QOUT_S32 ?
						  ep->mult[oc] : 0.0f);
		__m512 fb = _mm512_set1_ps(ep->fbias ? ep->fbias[oc] : 0.0f);
		const int32_t *ar = acc + r * ldacc;

		for (int p = 0; p < np; p += 16) {
			__mmask16 k = np - p >= 16 ? 0xffff :
						     (__mmask16)((1u << (np - p)) - 1);
			__m512i a = _mm512_add_epi32(
				_mm512_maskz_loadu_epi32(k, ar + p), comp);
			ptrdiff_t idx = r * ldo + p;

			if (ep->mode == MI_QOUT_S32) {
				_mm512_mask_storeu_epi32((int32_t *)out + idx, k, a);
				continue;
			}
			__m512 f = _mm512_cvtepi32_ps(a);
			if (ep->mode == MI_QOUT_F32) {
				f = _mm512_fmadd_ps(f, m, fb);
				f = _mm512_min_ps(_mm512_max_ps(f, lo), hi);
				_mm512_mask_storeu_ps((float *)out + idx, k, f);
				continue;
			}
			__m512i q = _mm512_add_epi32(mi_qrq512(a, m, lo, hi), zy);
			if (ep->out_c4)
				store16_c4((uint8_t *)out + ((r / 4) * ldo + p) * 4 + r % 4, k, q);
			else
				store16_u8((uint8_t *)out + idx, k, q);
		}
	}
}
