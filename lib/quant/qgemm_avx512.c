// SPDX-License-Identifier: MIT
/*
 * int8 micro-kernels, AVX-512 VNNI: the 8x32 vpdpbusd tile and its
 * fused requantization.
 */
#include "quant/qgemm-impl.h"

/* one VNNI row step of the 8x32 tile: row r's 4 int8 weights x 4 uint8 pixels */
#define MI_Q_ROW(r, x0, x1)                                                   \
	w = _mm512_set1_epi32(ap[r]);                                         \
	x0 = _mm512_dpbusd_epi32(x0, b0, w);                                  \
	x1 = _mm512_dpbusd_epi32(x1, b1, w)

/*
 * The k loop of the 8x32 VNNI tile, shared by the plain and the fused
 * requantization tiles: a (8 rows x 4 int8 per k4 step), b (32 pixels x 4
 * uint8 per step, ldb bytes apart) into the accumulators c00..c71.
 */
#define MI_QVNNI_KLOOP()                                                      \
do {                                                                          \
	for (int kq = 0; kq < k4; kq++) {                                     \
		__m512i b0 = _mm512_loadu_si512((const void *)b);             \
		__m512i b1 = _mm512_loadu_si512((const void *)(b + 64));      \
		const int32_t *ap = (const int32_t *)(const void *)a;         \
		__m512i w;                                                    \
                                                                              \
		MI_Q_ROW(0, c00, c01);                                        \
		MI_Q_ROW(1, c10, c11);                                        \
		MI_Q_ROW(2, c20, c21);                                        \
		MI_Q_ROW(3, c30, c31);                                        \
		MI_Q_ROW(4, c40, c41);                                        \
		MI_Q_ROW(5, c50, c51);                                        \
		MI_Q_ROW(6, c60, c61);                                        \
		MI_Q_ROW(7, c70, c71);                                        \
		a += MI_QMR * 4;                                              \
		b += ldb;                                                     \
	}                                                                     \
} while (0)

__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) void
tile_vnni(const int8_t *a, const uint8_t *b, size_t ldb, int k4,
	  int32_t *acc)
{
	__m512i c00 = _mm512_setzero_si512(), c01 = c00, c10 = c00, c11 = c00;
	__m512i c20 = c00, c21 = c00, c30 = c00, c31 = c00;
	__m512i c40 = c00, c41 = c00, c50 = c00, c51 = c00;
	__m512i c60 = c00, c61 = c00, c70 = c00, c71 = c00;

	MI_QVNNI_KLOOP();
#define MI_Q_ST(r, x0, x1)                                                    \
	_mm512_storeu_si512((void *)(acc + (r) * MI_QNR), x0);                \
	_mm512_storeu_si512((void *)(acc + (r) * MI_QNR + 16), x1)
	MI_Q_ST(0, c00, c01);
	MI_Q_ST(1, c10, c11);
	MI_Q_ST(2, c20, c21);
	MI_Q_ST(3, c30, c31);
	MI_Q_ST(4, c40, c41);
	MI_Q_ST(5, c50, c51);
	MI_Q_ST(6, c60, c61);
	MI_Q_ST(7, c70, c71);
#undef MI_Q_ST
}

/*
 * The VNNI tile with the uint8/int8 requantization fused in (full tiles
 * of 8 rows, np <= 32 pixels).  The accumulators start at comp (the same
 * exact int32 sum), the float part is epi_avx512's, operation for
 * operation; the clamped values q - zy lie in the output type's range
 * (qg_rq_fits), so the saturating packs below are exact.  Output: planar
 * rows at out + r * ldo, or C4 (rows 4j..4j+3 interleaved at
 * out + j * ldo * 4; oc0 % 4 == 0).
 */
bool qg_rq_fits(const struct mi_qepi *ep)
{
	float lo = ep->mode == MI_QOUT_U8 ? 0.0f : -128.0f;
	float hi = ep->mode == MI_QOUT_U8 ? 255.0f : 127.0f;

	return (ep->mode == MI_QOUT_U8 || ep->mode == MI_QOUT_S8) &&
	       ep->flo >= lo - (float)ep->zy && ep->fhi <= hi - (float)ep->zy &&
	       ep->zy >= -128 && ep->zy <= 255;
}

/* The requantization and stores of an 8 x 32 tile held in c00..c71 (row r,
 * pixels 0-15 and 16-31), comp already added. */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"), always_inline)) static inline void
rq_store_body(__m512i c00, __m512i c01, __m512i c10, __m512i c11, __m512i c20, __m512i c21,
	      __m512i c30, __m512i c31, __m512i c40, __m512i c41, __m512i c50, __m512i c51,
	      __m512i c60, __m512i c61, __m512i c70, __m512i c71, const struct mi_qepi *ep,
	      int oc0, int np, uint8_t *out, ptrdiff_t ldo, const bool sat)
{
	/* the first np of the 32 pixels are stored */
	__mmask32 m32 = np >= 32 ? ~(__mmask32)0 : ((__mmask32)1 << np) - 1;
	__mmask16 mlo = (__mmask16)m32, mhi = (__mmask16)(m32 >> 16);

	const float *mp = ep->mult + oc0;
	__m512 lo = _mm512_set1_ps(ep->flo), hi = _mm512_set1_ps(ep->fhi);
	__m512i zy = _mm512_set1_epi16((short)ep->zy);
	bool u8 = ep->mode == MI_QOUT_U8;
	/* two rows' (or four channels') int32 -> 16-bit pairs -> bytes */
	struct rq_sat rs;

	rq_sat_set(&rs, ep);
#define MI_Q_RQ(x, r)                                                         \
	(sat ? rq_sat_cvt(x, _mm512_set1_ps(mp[r])) :                         \
	 mi_qrq512(x, _mm512_set1_ps(mp[r]), lo, hi))
#define MI_Q_PK(x, y, z, v) /* bytes, per 128-bit lane: x y z v (4 each) */   \
	(sat ? rq_sat_pack(&rs, x, y, z, v) : ({                              \
		__m512i p0_ = _mm512_add_epi16(_mm512_packs_epi32(x, y), zy); \
		__m512i p1_ = _mm512_add_epi16(_mm512_packs_epi32(z, v), zy); \
		u8 ? _mm512_packus_epi16(p0_, p1_) :                          \
		     _mm512_packs_epi16(p0_, p1_);                            \
	}))
	if (ep->out_c4) {
		/* per lane: ch0 px0-3, ch1 px0-3, ... -> px0 ch0-3, px1 ... */
		const __m512i tr = _mm512_broadcast_i32x4(_mm_setr_epi8(
			0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
		uint8_t *o1 = out + ldo * 4;

		_mm512_mask_storeu_epi32(out, mlo, _mm512_shuffle_epi8(MI_Q_PK(MI_Q_RQ(c00, 0), MI_Q_RQ(c10, 1),
									       MI_Q_RQ(c20, 2), MI_Q_RQ(c30, 3)), tr));
		_mm512_mask_storeu_epi32(o1, mlo, _mm512_shuffle_epi8(MI_Q_PK(MI_Q_RQ(c40, 4), MI_Q_RQ(c50, 5),
									      MI_Q_RQ(c60, 6), MI_Q_RQ(c70, 7)), tr));
		if (mhi) {
			_mm512_mask_storeu_epi32(out + 64, mhi,
						 _mm512_shuffle_epi8(MI_Q_PK(MI_Q_RQ(c01, 0), MI_Q_RQ(c11, 1),
									     MI_Q_RQ(c21, 2), MI_Q_RQ(c31, 3)), tr));
			_mm512_mask_storeu_epi32(o1 + 64, mhi,
						 _mm512_shuffle_epi8(MI_Q_PK(MI_Q_RQ(c41, 4), MI_Q_RQ(c51, 5),
									     MI_Q_RQ(c61, 6), MI_Q_RQ(c71, 7)), tr));
		}
	} else {
		/* per lane dwords: row r px 4L.., row r px 16+4L.., row r+1 ... */
		const __m512i pm = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13,
						     2, 6, 10, 14, 3, 7, 11, 15);
		__m512i v;

#define MI_Q_ST2(r, x0, x1, y0, y1)                                           \
	v = _mm512_permutexvar_epi32(pm, MI_Q_PK(MI_Q_RQ(x0, r), MI_Q_RQ(x1, r), \
						 MI_Q_RQ(y0, (r) + 1),        \
						 MI_Q_RQ(y1, (r) + 1)));      \
	_mm256_mask_storeu_epi8(out + (r) * ldo, m32, _mm512_castsi512_si256(v)); \
	_mm256_mask_storeu_epi8(out + ((r) + 1) * ldo, m32,                   \
				_mm512_extracti64x4_epi64(v, 1))
		MI_Q_ST2(0, c00, c01, c10, c11);
		MI_Q_ST2(2, c20, c21, c30, c31);
		MI_Q_ST2(4, c40, c41, c50, c51);
		MI_Q_ST2(6, c60, c61, c70, c71);
#undef MI_Q_ST2
	}
#undef MI_Q_PK
#undef MI_Q_RQ
}

__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"), always_inline)) static inline void
rq_store_8x32(__m512i c00, __m512i c01, __m512i c10, __m512i c11, __m512i c20, __m512i c21,
	      __m512i c30, __m512i c31, __m512i c40, __m512i c41, __m512i c50, __m512i c51,
	      __m512i c60, __m512i c61, __m512i c70, __m512i c71, const struct mi_qepi *ep,
	      int oc0, int np, uint8_t *out, ptrdiff_t ldo)
{
	if (rq_sat_ok(ep, ep->mult + oc0, 8))
		rq_store_body(c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51, c60, c61,
			      c70, c71, ep, oc0, np, out, ldo, true);
	else
		rq_store_body(c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51, c60, c61,
			      c70, c71, ep, oc0, np, out, ldo, false);
}

__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) void
tile_vnni_rq(const int8_t *a, const uint8_t *b, size_t ldb, int k4,
	     const struct mi_qepi *ep, int oc0, int np, uint8_t *out,
	     ptrdiff_t ldo)
{
	const int32_t *cp = ep->comp + oc0;
	__m512i c00 = _mm512_set1_epi32(cp[0]), c01 = c00;
	__m512i c10 = _mm512_set1_epi32(cp[1]), c11 = c10;
	__m512i c20 = _mm512_set1_epi32(cp[2]), c21 = c20;
	__m512i c30 = _mm512_set1_epi32(cp[3]), c31 = c30;
	__m512i c40 = _mm512_set1_epi32(cp[4]), c41 = c40;
	__m512i c50 = _mm512_set1_epi32(cp[5]), c51 = c50;
	__m512i c60 = _mm512_set1_epi32(cp[6]), c61 = c60;
	__m512i c70 = _mm512_set1_epi32(cp[7]), c71 = c70;

	MI_QVNNI_KLOOP();
	rq_store_8x32(c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51, c60, c61, c70, c71,
		      ep, oc0, np, out, ldo);
}

/* The same from int32 sums acc[8][ldacc] (without comp): the AMX tiles. */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) void
rq_acc_avx512(const int32_t *acc, int ldacc, const struct mi_qepi *ep, int oc0, int np,
	      uint8_t *out, ptrdiff_t ldo)
{
#define MI_Q_LD(r, h)                                                         \
	_mm512_add_epi32(_mm512_loadu_si512((const void *)(acc + (r) * ldacc + (h) * 16)), \
			 _mm512_set1_epi32(ep->comp[oc0 + (r)]))
	rq_store_8x32(MI_Q_LD(0, 0), MI_Q_LD(0, 1), MI_Q_LD(1, 0), MI_Q_LD(1, 1), MI_Q_LD(2, 0),
		      MI_Q_LD(2, 1), MI_Q_LD(3, 0), MI_Q_LD(3, 1), MI_Q_LD(4, 0), MI_Q_LD(4, 1),
		      MI_Q_LD(5, 0), MI_Q_LD(5, 1), MI_Q_LD(6, 0), MI_Q_LD(6, 1), MI_Q_LD(7, 0),
		      MI_Q_LD(7, 1), ep, oc0, np, out, ldo);
#undef MI_Q_LD
}
