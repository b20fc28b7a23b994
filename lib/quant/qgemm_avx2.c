// SPDX-License-Identifier: MIT
/*
 * int8 micro-kernels, generic and AVX2: acc[8][32] = A(8 x 4k4) * B(4k4 x
 * 32) (see qgemm.c for the packing), with the fused requantizing
 * variants and the split-panel (avx2b) tiles.
 */
#include "quant/qgemm-impl.h"

/* ---- micro-kernels: acc[8][32] = A(8 x 4k4) * B(4k4 x 32) ------------- */

void tile_generic(const int8_t *a, const uint8_t *b, size_t ldb,
			 int k4, int32_t *acc)
{
	memset(acc, 0, MI_QMR * MI_QNR * sizeof(int32_t));
	for (int kq = 0; kq < k4; kq++, a += MI_QMR * 4, b += ldb)
		for (int r = 0; r < MI_QMR; r++) {
			const int8_t *ar = a + r * 4;
			int32_t *accr = acc + r * MI_QNR;

			if (!(ar[0] | ar[1] | ar[2] | ar[3]))
				continue;
			for (int p = 0; p < MI_QNR; p++) {
				const uint8_t *bp = b + p * 4;

				accr[p] += ar[0] * bp[0] + ar[1] * bp[1] +
					   ar[2] * bp[2] + ar[3] * bp[3];
			}
		}
}

__attribute__((target("avx2,fma"))) void
tile_avx2(const int8_t *a, const uint8_t *b, size_t ldb, int k4,
	  int32_t *acc)
{
	/* Exact: u8 -> s16 and s8 -> s16, vpmaddwd (no vpmaddubsw, whose
	 * s16 saturation would be wrong).  Lanes 2p, 2p+1 of the two
	 * accumulators per row hold k-pairs of pixel p; one hadd at the end. */
	for (int sub = 0; sub < MI_QNR / 8; sub++) {
		for (int half = 0; half < 2; half++) {
			__m256i c0l = _mm256_setzero_si256(), c0h = c0l;
			__m256i c1l = c0l, c1h = c0l, c2l = c0l, c2h = c0l;
			__m256i c3l = c0l, c3h = c0l;
			const int8_t *ap = a + half * 16;
			const uint8_t *bp = b + sub * 32;

			for (int kq = 0; kq < k4; kq++) {
				__m256i bv = _mm256_loadu_si256((const void *)bp);
				__m256i bl = _mm256_cvtepu8_epi16(
					_mm256_castsi256_si128(bv));
				__m256i bh = _mm256_cvtepu8_epi16(
					_mm256_extracti128_si256(bv, 1));
				__m128i a4 = _mm_loadu_si128((const void *)ap);
				__m256i aw = _mm256_cvtepi8_epi16(a4);
				__m256i w0 = _mm256_permute4x64_epi64(aw, 0x00);
				__m256i w1 = _mm256_permute4x64_epi64(aw, 0x55);
				__m256i w2 = _mm256_permute4x64_epi64(aw, 0xaa);
				__m256i w3 = _mm256_permute4x64_epi64(aw, 0xff);

				c0l = _mm256_add_epi32(c0l, _mm256_madd_epi16(bl, w0));
				c0h = _mm256_add_epi32(c0h, _mm256_madd_epi16(bh, w0));
				c1l = _mm256_add_epi32(c1l, _mm256_madd_epi16(bl, w1));
				c1h = _mm256_add_epi32(c1h, _mm256_madd_epi16(bh, w1));
				c2l = _mm256_add_epi32(c2l, _mm256_madd_epi16(bl, w2));
				c2h = _mm256_add_epi32(c2h, _mm256_madd_epi16(bh, w2));
				c3l = _mm256_add_epi32(c3l, _mm256_madd_epi16(bl, w3));
				c3h = _mm256_add_epi32(c3h, _mm256_madd_epi16(bh, w3));
				ap += MI_QMR * 4;
				bp += ldb;
			}
#define MI_Q_FIN(cl, ch, r)                                                   \
	_mm256_storeu_si256(                                                  \
		(void *)(acc + (half * 4 + (r)) * MI_QNR + sub * 8),          \
		_mm256_permute4x64_epi64(_mm256_hadd_epi32(cl, ch), 0xd8))
			MI_Q_FIN(c0l, c0h, 0);
			MI_Q_FIN(c1l, c1h, 1);
			MI_Q_FIN(c2l, c2h, 2);
			MI_Q_FIN(c3l, c3h, 3);
#undef MI_Q_FIN
		}
	}
}

/* A 4-row x 16-pixel AVX2 tile's int32 sums c00..c31 to o (rows MI_QNR
 * apart). */
#define MI_QAVX2_STORE4X16(o)                                                 \
	do {                                                                  \
		_mm256_storeu_si256((void *)(o), c00);                        \
		_mm256_storeu_si256((void *)((o) + 8), c01);                  \
		_mm256_storeu_si256((void *)((o) + MI_QNR), c10);             \
		_mm256_storeu_si256((void *)((o) + MI_QNR + 8), c11);         \
		_mm256_storeu_si256((void *)((o) + 2 * MI_QNR), c20);         \
		_mm256_storeu_si256((void *)((o) + 2 * MI_QNR + 8), c21);     \
		_mm256_storeu_si256((void *)((o) + 3 * MI_QNR), c30);         \
		_mm256_storeu_si256((void *)((o) + 3 * MI_QNR + 8), c31);     \
	} while (0)

/*
 * The k loop of the AVX2 tiles on w->w16 (rows 4 rh.., pixels 16 ph..):
 * c00..c31 += the products.  split: the panel is stored pre-split
 * (split_panel_avx2: per k4 step 128 bytes of (k0, k2) pairs, then 128 of
 * (k1, k3), ldb 256), so the and/shift per step are loads.
 */
#define MI_QAVX2W_KLOOP(split)                                                \
	_Pragma("GCC unroll 2")                                               \
	for (int kq = 0; kq < k4; kq++) {                                     \
		__m256i e0, e1, o0, o1, we, wo;                               \
                                                                              \
		if (split) {                                                  \
			e0 = _mm256_loadu_si256((const void *)bp);            \
			e1 = _mm256_loadu_si256((const void *)(bp + 32));     \
			o0 = _mm256_loadu_si256((const void *)(bp + 128));    \
			o1 = _mm256_loadu_si256((const void *)(bp + 160));    \
		} else {                                                      \
			__m256i b0_ = _mm256_loadu_si256((const void *)bp);   \
			__m256i b1_ = _mm256_loadu_si256((const void *)(bp + 32)); \
                                                                              \
			e0 = _mm256_and_si256(b0_, lo8);                      \
			o0 = _mm256_srli_epi16(b0_, 8);                       \
			e1 = _mm256_and_si256(b1_, lo8);                      \
			o1 = _mm256_srli_epi16(b1_, 8);                       \
		}                                                             \
		MI_Q_W16(0, c00, c01);                                        \
		MI_Q_W16(1, c10, c11);                                        \
		MI_Q_W16(2, c20, c21);                                        \
		MI_Q_W16(3, c30, c31);                                        \
		ap += MI_QMR * 2;                                             \
		bp += ldb;                                                    \
	}
#define MI_Q_W16(r, x0, x1)                                                   \
	we = _mm256_set1_epi32(ap[2 * (r)]);                                  \
	wo = _mm256_set1_epi32(ap[2 * (r) + 1]);                              \
	x0 = _mm256_add_epi32(x0, _mm256_madd_epi16(e0, we));                 \
	x1 = _mm256_add_epi32(x1, _mm256_madd_epi16(e1, we));                 \
	x0 = _mm256_add_epi32(x0, _mm256_madd_epi16(o0, wo));                 \
	x1 = _mm256_add_epi32(x1, _mm256_madd_epi16(o1, wo))

/*
 * AVX2 with weights widened at pack time (w->w16; a is that block, cast):
 * a pixel's 4 bytes k0 k1 k2 k3 split in-lane into the int16 pairs
 * (k0, k2) (and 0x00ff) and (k1, k3) (shift right 8), times the row's
 * broadcast (w0, w2) and (w1, w3) by vpmaddwd: exact, one int32 sum per
 * pixel and lane (no horizontal adds), no lane crossing.  4 rows x 16
 * pixels of sums in registers at a time (8 + 4 + 2 ymm).
 */
__attribute__((target("avx2,fma"), always_inline)) static inline void
tile_avx2w_body(const int8_t *a, const uint8_t *b, size_t ldb, int k4, int32_t *acc,
		const bool split, int np)
{
	const __m256i lo8 = _mm256_set1_epi16(0x00ff);

	for (int rh = 0; rh < 2; rh++)
		for (int ph = 0; ph < 2 && ph * 16 < np; ph++) {
			__m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00;
			__m256i c20 = c00, c21 = c00, c30 = c00, c31 = c00;
			const int32_t *ap = (const int32_t *)(const void *)a + rh * 8;
			const uint8_t *bp = b + ph * 64;

			MI_QAVX2W_KLOOP(split);
			int32_t *o = acc + rh * 4 * MI_QNR + ph * 16;

			MI_QAVX2_STORE4X16(o);
		}
}

__attribute__((target("avx2,fma"))) void
tile_avx2w(const int8_t *a, const uint8_t *b, size_t ldb, int k4, int32_t *acc)
{
	tile_avx2w_body(a, b, ldb, k4, acc, false, MI_QNR);
}

/* tile_avx2w on a pre-split panel (split_panel_avx2, ldb 256) */
__attribute__((target("avx2,fma"))) void
tile_avx2s(const int8_t *a, const uint8_t *b, size_t ldb, int k4, int32_t *acc)
{
	tile_avx2w_body(a, b, ldb, k4, acc, true, MI_QNR);
}

/*
 * The requantization and stores of tile_avx2w_rq: four rows (one channel
 * quad, oc0 % 4 == 0 for C4) x 16 pixels of sums, comp added.  Out of
 * line: inlined, its constants pushed the k loop's accumulators to the
 * stack.
 */
__attribute__((target("avx2,fma"), always_inline)) static inline void
rq_store_avx2_in(__m256i c00, __m256i c01, __m256i c10, __m256i c11, __m256i c20,
		 __m256i c21, __m256i c30, __m256i c31, const struct mi_qepi *ep, int oc0,
		 uint8_t *out, ptrdiff_t ldo)
{
	const __m256 flo = _mm256_set1_ps(ep->flo), fhi = _mm256_set1_ps(ep->fhi);
	const __m256i zy = _mm256_set1_epi32(ep->zy);
	bool u8 = ep->mode == MI_QOUT_U8;
	const float *mp = ep->mult + oc0;
#define MI_Q_RQ2(x, r) _mm256_add_epi32(mi_qrq256(x, _mm256_set1_ps(mp[r]), flo, fhi), zy)
#define MI_Q_PK2(x, y) (u8 ? _mm256_packus_epi16(x, y) : _mm256_packs_epi16(x, y))
	__m256i q00 = MI_Q_RQ2(c00, 0), q01 = MI_Q_RQ2(c01, 0);
	__m256i q10 = MI_Q_RQ2(c10, 1), q11 = MI_Q_RQ2(c11, 1);
	__m256i q20 = MI_Q_RQ2(c20, 2), q21 = MI_Q_RQ2(c21, 2);
	__m256i q30 = MI_Q_RQ2(c30, 3), q31 = MI_Q_RQ2(c31, 3);

	if (ep->out_c4) {
		uint8_t *o = out;
		/* per lane: ch0 px0-3, ch1 px0-3, ... -> px0 ch0-3, px1 ... */
		const __m256i tr = _mm256_setr_epi8(
			0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15,
			0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
		__m256i v0 = MI_Q_PK2(_mm256_packs_epi32(q00, q10),
				      _mm256_packs_epi32(q20, q30));
		__m256i v1 = MI_Q_PK2(_mm256_packs_epi32(q01, q11),
				      _mm256_packs_epi32(q21, q31));

		/* lanes: pixels 0-3 | 4-7 (v0), 8-11 | 12-15 (v1) */
		_mm256_storeu_si256((void *)o, _mm256_shuffle_epi8(v0, tr));
		_mm256_storeu_si256((void *)(o + 32), _mm256_shuffle_epi8(v1, tr));
	} else {
		uint8_t *o = out;
		/* per lane: row r px 0-3, 8-11, row r+1 px 0-3, 8-11
		 * (lane 1: 4-7, 12-15); vpermd puts each row's 16 in order */
		const __m256i pm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
		__m256i v0 = _mm256_permutevar8x32_epi32(
			MI_Q_PK2(_mm256_packs_epi32(q00, q01),
				 _mm256_packs_epi32(q10, q11)), pm);
		__m256i v1 = _mm256_permutevar8x32_epi32(
			MI_Q_PK2(_mm256_packs_epi32(q20, q21),
				 _mm256_packs_epi32(q30, q31)), pm);

		_mm_storeu_si128((void *)o, _mm256_castsi256_si128(v0));
		_mm_storeu_si128((void *)(o + ldo), _mm256_extracti128_si256(v0, 1));
		_mm_storeu_si128((void *)(o + 2 * ldo), _mm256_castsi256_si128(v1));
		_mm_storeu_si128((void *)(o + 3 * ldo), _mm256_extracti128_si256(v1, 1));
	}
#undef MI_Q_PK2
#undef MI_Q_RQ2
}

__attribute__((target("avx2,fma"), noinline)) static void
rq_store_avx2(__m256i c00, __m256i c01, __m256i c10, __m256i c11, __m256i c20, __m256i c21,
	      __m256i c30, __m256i c31, const struct mi_qepi *ep, int oc0, uint8_t *out,
	      ptrdiff_t ldo)
{
	rq_store_avx2_in(c00, c01, c10, c11, c20, c21, c30, c31, ep, oc0, out, ldo);
}

/*
 * tile_avx2w with epi_avx2's uint8/int8 requantization in registers (full
 * tiles of 8 rows and 32 pixels; the caller's qg_rq_fits): the sums start at
 * comp (the same int32 sums), then per 8 pixels of a row the float
 * operations of epi_avx2 (cvt, * mult, max flo, min fhi, round, + zy),
 * whose int32 results lie in the output type's range, so the saturating
 * packs keep them.  C4: a channel quad's four rows packed to bytes
 * (vpackssdw, vpackuswb/vpacksswb) and transposed to pixel-major by
 * vpshufb, one 32-byte store per 8 pixels; planar: 16 bytes per row and
 * 16 pixels.  Partial panels (np < 32) take tile_avx2w + epi_avx2: the
 * stores would run into pixels that are not the tile's.
 */
__attribute__((target("avx2,fma"), always_inline)) static inline void
tile_avx2w_rq_body(const int8_t *a, const uint8_t *b, size_t ldb, int k4,
		   const struct mi_qepi *ep, int oc0, int np, uint8_t *out, ptrdiff_t ldo,
		   const bool split)
{
	const __m256i lo8 = _mm256_set1_epi16(0x00ff);

	if (np < MI_QNR) {
		int32_t acc[MI_QMR * MI_QNR];

		/* only the 16-pixel halves that hold pixels */
		tile_avx2w_body(a, b, ldb, k4, acc, split, np);
		epi_avx2(acc, MI_QNR, MI_QMR, np, ep, oc0,
			 ep->out_c4 ? (void *)(out + oc0 % 4) : (void *)out, ldo);
		return;
	}
	for (int rh = 0; rh < 2; rh++)
		for (int ph = 0; ph < 2; ph++) {
			const int32_t *cp = ep->comp + oc0 + rh * 4;
			__m256i c00 = _mm256_set1_epi32(cp[0]), c01 = c00;
			__m256i c10 = _mm256_set1_epi32(cp[1]), c11 = c10;
			__m256i c20 = _mm256_set1_epi32(cp[2]), c21 = c20;
			__m256i c30 = _mm256_set1_epi32(cp[3]), c31 = c30;
			const int32_t *ap = (const int32_t *)(const void *)a + rh * 8;
			const uint8_t *bp = b + ph * 64;

			MI_QAVX2W_KLOOP(split);
			rq_store_avx2(c00, c01, c10, c11, c20, c21, c30, c31, ep, oc0 + rh * 4,
				      ep->out_c4 ? out + (rh * ldo + ph * 16) * 4 :
						   out + rh * 4 * ldo + ph * 16,
				      ldo);
		}
}

__attribute__((target("avx2,fma"))) void
tile_avx2w_rq(const int8_t *a, const uint8_t *b, size_t ldb, int k4, const struct mi_qepi *ep,
	      int oc0, int np, uint8_t *out, ptrdiff_t ldo)
{
	tile_avx2w_rq_body(a, b, ldb, k4, ep, oc0, np, out, ldo, false);
}

__attribute__((target("avx2,fma"))) void
tile_avx2s_rq(const int8_t *a, const uint8_t *b, size_t ldb, int k4, const struct mi_qepi *ep,
	      int oc0, int np, uint8_t *out, ptrdiff_t ldo)
{
	tile_avx2w_rq_body(a, b, ldb, k4, ep, oc0, np, out, ldo, true);
}

/*
 * The panel (k4 steps of 32 pixels x 4 bytes, ldb apart) split for
 * tile_avx2s: per step 128 bytes of and 0x00ff ((k0, k2) int16 pairs per
 * pixel), then 128 of shift right 8 ((k1, k3)).
 */
__attribute__((target("avx2"))) void
split_panel_avx2(const uint8_t *b, size_t ldb, int k4, uint8_t *sp)
{
	const __m256i lo8 = _mm256_set1_epi16(0x00ff);

	for (int kq = 0; kq < k4; kq++, b += ldb, sp += 256)
		for (int v = 0; v < 4; v++) {
			__m256i x = _mm256_loadu_si256((const void *)(b + v * 32));

			_mm256_storeu_si256((void *)(sp + v * 32), _mm256_and_si256(x, lo8));
			_mm256_storeu_si256((void *)(sp + 128 + v * 32), _mm256_srli_epi16(x, 8));
		}
}

/*
 * AVX2 on 7-bit weights (w->s7: every weight in [-64, 63]), the int8
 * packed weights and the plain uint8 panel (32 pixels x 4 k per step, ldb
 * apart; no split, no int16 weights).  Per k4 step, row and 8 pixels:
 *   t = vpmaddubsw(b, w)  b: 32 uint8 (unsigned operand), w: the row's
 *                         four int8 weights broadcast (signed operand);
 *                         int16 lanes a0 w0 + a1 w1 and a2 w2 + a3 w3
 *   c += vpmaddwd(t, 1)   the pixel's two pair sums into its int32 lane
 * Exact: a in [0, 255], w in [-64, 63] give a pair sum in
 * [2 * 255 * -64, 2 * 255 * 63] = [-32640, 32130], inside int16, so the
 * saturation of vpmaddubsw never happens and the int32 sums are the int16
 * tiles' (and vpdpbusd's) to the bit.  3 uops per 32 MACs (2 multiplies)
 * where tile_avx2s takes 4 (2 vpmaddwd + 2 vpaddd).  Two vpmaddubsw
 * results added by vpaddw before the vpmaddwd would need 4 * 255 * |w| <=
 * 32767, weights in [-32, 31]: not for 7 bits.  One weight outside
 * [-64, 63] (-65 next to -64 on a = 255: -32895) would saturate: such
 * weights keep the int16 tiles (w->s7 false).
 */
#define MI_Q_B8(r, x0, x1)                                                    \
	w = _mm256_set1_epi32(ap[r]);                                         \
	x0 = _mm256_add_epi32(x0, _mm256_madd_epi16(_mm256_maddubs_epi16(b0, w), one16)); \
	x1 = _mm256_add_epi32(x1, _mm256_madd_epi16(_mm256_maddubs_epi16(b1, w), one16))

#define MI_QAVX2B_KLOOP()                                                     \
	_Pragma("GCC unroll 2")                                               \
	for (int kq = 0; kq < k4; kq++) {                                     \
		__m256i b0 = _mm256_loadu_si256((const void *)bp);            \
		__m256i b1 = _mm256_loadu_si256((const void *)(bp + 32));     \
		__m256i w;                                                    \
                                                                              \
		MI_Q_B8(0, c00, c01);                                         \
		MI_Q_B8(1, c10, c11);                                         \
		MI_Q_B8(2, c20, c21);                                         \
		MI_Q_B8(3, c30, c31);                                         \
		ap += MI_QMR;                                                 \
		bp += ldb;                                                    \
	}

/* acc[8][32]: 4 rows x 16 pixels of sums in registers at a time */
__attribute__((target("avx2,fma"))) void
tile_avx2b(const int8_t *a, const uint8_t *b, size_t ldb, int k4, int32_t *acc)
{
	const __m256i one16 = _mm256_set1_epi16(1);

	for (int rh = 0; rh < 2; rh++)
		for (int ph = 0; ph < 2; ph++) {
			__m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00;
			__m256i c20 = c00, c21 = c00, c30 = c00, c31 = c00;
			const int32_t *ap = (const int32_t *)(const void *)a + rh * 4;
			const uint8_t *bp = b + ph * 64;

			MI_QAVX2B_KLOOP();
			int32_t *o = acc + rh * 4 * MI_QNR + ph * 16;

			MI_QAVX2_STORE4X16(o);
		}
}

/* tile_avx2b's k loop on 8 pixels (b0 only): a pass of 4 rows x 8 */
#define MI_Q_B4(r, x0)                                                        \
	w = _mm256_set1_epi32(ap[r]);                                         \
	x0 = _mm256_add_epi32(x0, _mm256_madd_epi16(_mm256_maddubs_epi16(b0, w), one16))

#define MI_QAVX2B_KLOOP8()                                                    \
	_Pragma("GCC unroll 2")                                               \
	for (int kq = 0; kq < k4; kq++) {                                     \
		__m256i b0 = _mm256_loadu_si256((const void *)bp);            \
		__m256i w;                                                    \
                                                                              \
		MI_Q_B4(0, c00);                                              \
		MI_Q_B4(1, c10);                                              \
		MI_Q_B4(2, c20);                                              \
		MI_Q_B4(3, c30);                                              \
		ap += MI_QMR;                                                 \
		bp += ldb;                                                    \
	}

/*
 * N (1..7) pixels p0.. of tile_avx2b's panel, all 8 rows at once: per
 * k4 step the 8 rows' 4 weights are one vector, each pixel's 4 bytes
 * are broadcast, vpmaddubsw + vpmaddwd(1) + vpaddd into the pixel's 8
 * row sums (2 multiplies per pixel and step, where an 8-pixel pass costs
 * 16 whatever its pixels): the same products and pair sums as the tile,
 * so the same int32 sums.  Into acc[row][MI_QNR].
 */
__attribute__((target("avx2,fma"), always_inline)) static inline void
tile_avx2b_px_n(const int8_t *a, const uint8_t *b, size_t ldb, int k4, int p0, int32_t *acc,
		const int N)
{
	const __m256i one16 = _mm256_set1_epi16(1);
	__m256i c[7];
	int32_t t[8];

	for (int i = 0; i < N; i++)
		c[i] = _mm256_setzero_si256();
	for (int kq = 0; kq < k4; kq++) {
		__m256i w = _mm256_loadu_si256((const void *)(a + (size_t)kq * MI_QMR * 4));
		const uint8_t *bp = b + kq * ldb + p0 * 4;

		for (int i = 0; i < N; i++) {
			int32_t v;

			memcpy(&v, bp + i * 4, 4);
			c[i] = _mm256_add_epi32(
				c[i], _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi32(v), w),
							one16));
		}
	}
	for (int i = 0; i < N; i++) {
		_mm256_storeu_si256((void *)t, c[i]);
		for (int r = 0; r < MI_QMR; r++)
			acc[r * MI_QNR + p0 + i] = t[r];
	}
}

__attribute__((target("avx2,fma"))) static void tile_avx2b_px(const int8_t *a, const uint8_t *b,
							       size_t ldb, int k4, int p0, int n,
							       int32_t *acc)
{
	switch (n) {
	case 1: tile_avx2b_px_n(a, b, ldb, k4, p0, acc, 1); break;
	case 2: tile_avx2b_px_n(a, b, ldb, k4, p0, acc, 2); break;
	case 3: tile_avx2b_px_n(a, b, ldb, k4, p0, acc, 3); break;
	case 4: tile_avx2b_px_n(a, b, ldb, k4, p0, acc, 4); break;
	case 5: tile_avx2b_px_n(a, b, ldb, k4, p0, acc, 5); break;
	case 6: tile_avx2b_px_n(a, b, ldb, k4, p0, acc, 6); break;
	case 7: tile_avx2b_px_n(a, b, ldb, k4, p0, acc, 7); break;
	}
}

/*
 * tile_avx2b_np with the last 1-3 pixels past the 16- and 8-pixel passes
 * (np % 8) on tile_avx2b_px: a partial panel of 17 pixels (7x7 maps: 49
 * = 32 + 17; 55x55 maps) costs 17 pixel columns instead of 24, of 9
 * (13x13 maps) 9 instead of 16 (1x1 convs at 7x7 1.11-1.13x, 512 -> 1000
 * at 13x13 1.03x; fastest calls alternated, Zen 3); 4-7 pixels take an
 * 8-pixel pass (4 on tile_avx2b_px measured 0.99x).
 */
__attribute__((target("avx2,fma"))) static void
tile_avx2b_np2(const int8_t *a, const uint8_t *b, size_t ldb, int k4, int np, int32_t *acc)
{
	const __m256i one16 = _mm256_set1_epi16(1);
	int n16 = np >= 16 ? 16 : 0, n8 = np - n16 >= 8 ? 8 : 0;

	if (np - n16 - n8 > 3) /* 4+ pixels: one 8-pixel pass measured faster */
		n8 += 8;

	for (int rh = 0; rh < 2; rh++) {
		const int32_t *ap0 = (const int32_t *)(const void *)a + rh * 4;
		int32_t *o = acc + rh * 4 * MI_QNR;

		if (n16) {
			__m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00;
			__m256i c20 = c00, c21 = c00, c30 = c00, c31 = c00;
			const int32_t *ap = ap0;
			const uint8_t *bp = b;

			MI_QAVX2B_KLOOP();
			MI_QAVX2_STORE4X16(o);
		}
		for (int p8 = n16; p8 < n16 + n8; p8 += 8) {
			__m256i c00 = _mm256_setzero_si256(), c10 = c00, c20 = c00, c30 = c00;
			const int32_t *ap = ap0;
			const uint8_t *bp = b + p8 * 4;

			MI_QAVX2B_KLOOP8();
			_mm256_storeu_si256((void *)(o + p8), c00);
			_mm256_storeu_si256((void *)(o + MI_QNR + p8), c10);
			_mm256_storeu_si256((void *)(o + 2 * MI_QNR + p8), c20);
			_mm256_storeu_si256((void *)(o + 3 * MI_QNR + p8), c30);
		}
	}
	if (np > n16 + n8)
		tile_avx2b_px(a, b, ldb, k4, n16 + n8, np - n16 - n8, acc);
}
#undef MI_QAVX2B_KLOOP8
#undef MI_Q_B4

/*
 * The full tiles of tile_avx2b_rq.  inl: rq_store_avx2 inlined, taken
 * for K <= 128 (k4 <= 32), where the requantization is a large part of
 * the tile: the call and the sums passed in ymm0-7 go (1x1 convs, C4,
 * Zen 3, 1 thread, fastest calls of the two alternated: 64 -> 16 at
 * 55x55 1.20x, 16 -> 64 1.15x, 128 -> 32 at 27x27 1.06x); with larger K
 * the inlined form measured 1-7% slower (1024 -> 256 at 14x14 0.93x),
 * as tile_avx2w_rq's did (its 8 more registers for the split pairs went
 * to the stack).
 */
__attribute__((target("avx2,fma"), always_inline)) static inline void
tile_avx2b_rq_full(const int8_t *a, const uint8_t *b, size_t ldb, int k4,
		   const struct mi_qepi *ep, int oc0, uint8_t *out, ptrdiff_t ldo, const bool inl)
{
	const __m256i one16 = _mm256_set1_epi16(1);

	for (int rh = 0; rh < 2; rh++)
		for (int ph = 0; ph < 2; ph++) {
			const int32_t *cp = ep->comp + oc0 + rh * 4;
			__m256i c00 = _mm256_set1_epi32(cp[0]), c01 = c00;
			__m256i c10 = _mm256_set1_epi32(cp[1]), c11 = c10;
			__m256i c20 = _mm256_set1_epi32(cp[2]), c21 = c20;
			__m256i c30 = _mm256_set1_epi32(cp[3]), c31 = c30;
			const int32_t *ap = (const int32_t *)(const void *)a + rh * 4;
			const uint8_t *bp = b + ph * 64;

			MI_QAVX2B_KLOOP();
			uint8_t *o = ep->out_c4 ? out + (rh * ldo + ph * 16) * 4 :
						  out + rh * 4 * ldo + ph * 16;

			if (inl)
				rq_store_avx2_in(c00, c01, c10, c11, c20, c21, c30, c31, ep,
						 oc0 + rh * 4, o, ldo);
			else
				rq_store_avx2(c00, c01, c10, c11, c20, c21, c30, c31, ep,
					      oc0 + rh * 4, o, ldo);
		}
}

/* tile_avx2b with the requantization in registers (tile_avx2w_rq's) */
__attribute__((target("avx2,fma"))) void
tile_avx2b_rq(const int8_t *a, const uint8_t *b, size_t ldb, int k4, const struct mi_qepi *ep,
	      int oc0, int np, uint8_t *out, ptrdiff_t ldo)
{
	if (np < MI_QNR) {
		int32_t acc[MI_QMR * MI_QNR];

		tile_avx2b_np2(a, b, ldb, k4, np, acc);
		epi_avx2(acc, MI_QNR, MI_QMR, np, ep, oc0,
			 ep->out_c4 ? (void *)(out + oc0 % 4) : (void *)out, ldo);
		return;
	}
	if (k4 <= 32)
		tile_avx2b_rq_full(a, b, ldb, k4, ep, oc0, out, ldo, true);
	else
		tile_avx2b_rq_full(a, b, ldb, k4, ep, oc0, out, ldo, false);
}
#undef MI_QAVX2B_KLOOP
#undef MI_Q_B8
