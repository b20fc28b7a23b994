// SPDX-License-Identifier: MIT
/*
 * int8 GEMM and convolution kernels: uint8 activations x int8 weights,
 * int32 accumulation, fp32 requantization.  See quant.h for the number
 * format.
 *
 * Micro-tile: 8 output channels x 32 pixels.  Weights are packed
 * [block][k4][8 rows][4 k] so that one 32-bit broadcast gives a row's four
 * consecutive k; activations ("B panel") are [k4][32 pixels][4 k] so that
 * one 64-byte load gives 16 pixels x 4 k, exactly vpdpbusd's operands.
 * Convolution input is reordered once to [c/4][H+pads][W+pads][4] so that
 * im2col of a panel is a copy of 4-byte words (memcpy for stride 1) and
 * a 1x1/stride-1 conv needs no im2col at all.  K is ordered
 * (tap, channel quad, channel in quad).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <immintrin.h>

#include "quant/quant.h"

/* ---- ISA selection ---------------------------------------------------- */

static int isa_max = -1;
static int isa_cur = -1;

int mi_quant_isa_max(void)
{
	if (isa_max < 0) {
		__builtin_cpu_init();
		if (__builtin_cpu_supports("avx512f") &&
		    __builtin_cpu_supports("avx512bw") &&
		    __builtin_cpu_supports("avx512vl") &&
		    __builtin_cpu_supports("avx512vnni"))
			isa_max = MI_QISA_AVX512;
		else if (__builtin_cpu_supports("avx2") &&
			 __builtin_cpu_supports("fma"))
			isa_max = MI_QISA_AVX2;
		else
			isa_max = MI_QISA_GENERIC;
	}
	return isa_max;
}

int mi_quant_set_isa(int isa)
{
	int max = mi_quant_isa_max();

	if (isa < MI_QISA_GENERIC)
		isa = MI_QISA_GENERIC;
	isa_cur = isa > max ? max : isa;
	return isa_cur;
}

int mi_quant_isa(void)
{
	if (isa_cur < 0) {
		const char *e = getenv("MI_CPU_ISA");
		int want = MI_QISA_AVX512;

		if (e && !strcmp(e, "generic"))
			want = MI_QISA_GENERIC;
		else if (e && !strcmp(e, "avx2"))
			want = MI_QISA_AVX2;
		mi_quant_set_isa(want);
	}
	return isa_cur;
}

/* AVX-512 VBMI (vpermb) for the depthwise rows; tests turn it off to
 * cover the AVX-512 path without it. */
static int vbmi_cur = -1;

int mi_quant_set_vbmi(int on)
{
	__builtin_cpu_init();
	vbmi_cur = on && __builtin_cpu_supports("avx512vbmi");
	return vbmi_cur;
}

static bool have_vbmi(void)
{
	if (vbmi_cur < 0)
		mi_quant_set_vbmi(1);
	return vbmi_cur;
}

const char *mi_quant_isa_name(int isa)
{
	switch (isa) {
	case MI_QISA_AVX512:
		return "avx512vnni";
	case MI_QISA_AVX2:
		return "avx2";
	default:
		return "generic";
	}
}

/* ---- parallel-for ------------------------------------------------------- */

static void serial_for(int n, mi_qpar_fn fn, void *arg)
{
	for (int i = 0; i < n; i++)
		fn(arg, i, 0);
}

static mi_qparallel_for par_for = serial_for;
static int par_threads = 1;

/* Threads the next kernel call will get (0: par_threads); per caller thread. */
static __thread int call_threads;

void mi_quant_set_call_threads(int n)
{
	call_threads = n;
}

static __thread int par_align;

void mi_quant_par_align(int items)
{
	par_align = items;
}

int mi_quant_par_align_take(void)
{
	int a = par_align > 0 ? par_align : 1;

	par_align = 0;
	return a;
}

void mi_quant_set_parallel(mi_qparallel_for pf, int nthreads)
{
	par_for = pf ? pf : serial_for;
	par_threads = pf && nthreads > 0 ? nthreads : 1;
}

/* ---- weight packing ----------------------------------------------------- */

/* AMX below k4 = 16 (K < 64, padded to 64 in the tiles) from k4 = 8 with
 * 32+ output channels: bench-qconv c32 28x28 oc192 1x1 0.026 vs 0.028 ms
 * (VNNI); K 16 and 24 were slower on AMX (0.21 vs 0.17, 0.085 vs 0.071
 * ms: the tile store + reload of the sums costs more than the VNNI MACs
 * saved), and so looked 32 -> 16 channels at 112x112 (EfficientNet-B0). */
static bool amx_fits(const struct mi_qweights *w)
{
	return w->nblk >= 2 && (w->k4 >= 16 || (w->k4 >= 8 && w->nblk >= 4));
}

/* MI_QUANT_U8S7=0: AVX2 weights in [-64, 63] on the int16 tiles too
 * (tile_avx2w/tile_avx2s), not tile_avx2b (A/B). */
MI_QUANT_SWITCH(u8s7, "MI_QUANT_U8S7")

/* w's AVX2 tiles are tile_avx2b's (vpmaddubsw, exact for 7-bit weights) */
static bool avx2b_use(const struct mi_qweights *w)
{
	return w->s7 && u8s7_on();
}

int mi_qweights_pack(struct mi_qweights *w, int group, int ocg, int k,
		     mi_qw_get get, const void *ctx)
{
	int wmin = 0, wmax = 0;

	memset(w, 0, sizeof(*w));
	if (group <= 0 || ocg <= 0 || k <= 0)
		return -EINVAL;
	w->group = group;
	w->ocg = ocg;
	w->k = k;
	w->k4 = (k + 3) / 4;
	w->nblk = (ocg + MI_QMR - 1) / MI_QMR;
	size_t bytes = (size_t)group * w->nblk * w->k4 * MI_QMR * 4;
	w->packed = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
	w->wsum = calloc((size_t)group * ocg, sizeof(int32_t));
	if (!w->packed || !w->wsum) {
		mi_qweights_free(w);
		return -ENOMEM;
	}
	memset(w->packed, 0, bytes);
	for (int g = 0; g < group; g++)
		for (int o = 0; o < ocg; o++) {
			int8_t *blk = w->packed +
				      ((size_t)(g * w->nblk + o / MI_QMR) *
				       w->k4 * MI_QMR * 4);
			int r = o % MI_QMR;
			int32_t sum = 0;

			for (int kk = 0; kk < k; kk++) {
				int v = get(ctx, g, o, kk);

				blk[(kk / 4) * MI_QMR * 4 + r * 4 + kk % 4] =
					(int8_t)v;
				sum += v;
				wmin = v < wmin ? v : wmin;
				wmax = v > wmax ? v : wmax;
			}
			w->wsum[g * ocg + o] = sum;
		}
	w->s7 = wmin >= -64 && wmax <= 63;
	if (amx_fits(w) && mi_quant_amx() && mi_qamx_pack(w)) {
		mi_qweights_free(w);
		return -ENOMEM;
	}
	/* the int16 weights, unless tile_avx2b takes the int8 ones */
	if ((mi_quant_isa_max() == MI_QISA_AVX2 || mi_quant_isa() == MI_QISA_AVX2) &&
	    !avx2b_use(w)) {
		size_t n = bytes / 4;

		w->w16 = aligned_alloc(64, (bytes * 2 + 63) & ~(size_t)63);
		if (!w->w16) {
			mi_qweights_free(w);
			return -ENOMEM;
		}
		for (size_t i = 0; i < n; i++) {
			const int8_t *q = w->packed + i * 4;
			int16_t *d = w->w16 + i * 4;

			d[0] = q[0];
			d[1] = q[2];
			d[2] = q[1];
			d[3] = q[3];
		}
	}
	return 0;
}

void mi_qweights_free(struct mi_qweights *w)
{
	free(w->packed);
	free(w->wsum);
	free(w->amx);
	free(w->w16);
	memset(w, 0, sizeof(*w));
}

/* ---- micro-kernels: acc[8][32] = A(8 x 4k4) * B(4k4 x 32) ------------- */

typedef void (*tile_fn)(const int8_t *a, const uint8_t *b, size_t ldb,
			int k4, int32_t *acc);

static void tile_generic(const int8_t *a, const uint8_t *b, size_t ldb,
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

__attribute__((target("avx2,fma"))) static void
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
/* MI_QUANT_AVX2NP=0: partial panels (np < 32) compute all 32 pixels on
 * the AVX2 tiles (A/B; tile_avx2b_np, tile_avx2w_body's np) */
MI_QUANT_SWITCH(avx2np, "MI_QUANT_AVX2NP")

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

__attribute__((target("avx2,fma"))) static void
tile_avx2w(const int8_t *a, const uint8_t *b, size_t ldb, int k4, int32_t *acc)
{
	tile_avx2w_body(a, b, ldb, k4, acc, false, MI_QNR);
}

/* tile_avx2w on a pre-split panel (split_panel_avx2, ldb 256) */
__attribute__((target("avx2,fma"))) static void
tile_avx2s(const int8_t *a, const uint8_t *b, size_t ldb, int k4, int32_t *acc)
{
	tile_avx2w_body(a, b, ldb, k4, acc, true, MI_QNR);
}

static void epi_avx2(const int32_t *acc, int ldacc, int rows, int np, const struct mi_qepi *ep,
		     int oc0, void *out, ptrdiff_t ldo);

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
#define MI_Q_RQ2(x, r)                                                        \
	_mm256_add_epi32(_mm256_cvtps_epi32(_mm256_min_ps(                    \
		_mm256_max_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(x),            \
					    _mm256_set1_ps(mp[r])), flo),     \
		fhi)), zy)
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
 * tiles of 8 rows and 32 pixels; the caller's rq_fits): the sums start at
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

		/* MI_QUANT_AVX2NP: only the 16-pixel halves that hold pixels */
		tile_avx2w_body(a, b, ldb, k4, acc, split, avx2np_on() ? np : MI_QNR);
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

__attribute__((target("avx2,fma"))) static void
tile_avx2w_rq(const int8_t *a, const uint8_t *b, size_t ldb, int k4, const struct mi_qepi *ep,
	      int oc0, int np, uint8_t *out, ptrdiff_t ldo)
{
	tile_avx2w_rq_body(a, b, ldb, k4, ep, oc0, np, out, ldo, false);
}

__attribute__((target("avx2,fma"))) static void
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
__attribute__((target("avx2"))) static void
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
__attribute__((target("avx2,fma"))) static void
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
 * tile_avx2b on a partial panel (np < 32 pixels): only the 16-pixel
 * halves that hold pixels, and a half with at most 8 of them on 8 pixels
 * (4 accumulators, one panel load per step).  A 7x7 map's second panel
 * (17 pixels) costs 24 pixel columns instead of 32, a 14x14 map's last
 * (4 pixels) 8 instead of 32.  The sums of the pixels below np are the
 * full tile's (the same additions per lane); acc past them is not written
 * and epi_avx2 stores only np pixels.
 */
__attribute__((target("avx2,fma"))) static void
tile_avx2b_np(const int8_t *a, const uint8_t *b, size_t ldb, int k4, int np, int32_t *acc)
{
	const __m256i one16 = _mm256_set1_epi16(1);

	for (int rh = 0; rh < 2; rh++)
		for (int ph = 0; ph < 2 && ph * 16 < np; ph++) {
			__m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00;
			__m256i c20 = c00, c21 = c00, c30 = c00, c31 = c00;
			const int32_t *ap = (const int32_t *)(const void *)a + rh * 4;
			const uint8_t *bp = b + ph * 64;
			int32_t *o = acc + rh * 4 * MI_QNR + ph * 16;

			if (np - ph * 16 <= 8) {
				MI_QAVX2B_KLOOP8();
			} else {
				MI_QAVX2B_KLOOP();
				_mm256_storeu_si256((void *)(o + 8), c01);
				_mm256_storeu_si256((void *)(o + MI_QNR + 8), c11);
				_mm256_storeu_si256((void *)(o + 2 * MI_QNR + 8), c21);
				_mm256_storeu_si256((void *)(o + 3 * MI_QNR + 8), c31);
			}
			_mm256_storeu_si256((void *)o, c00);
			_mm256_storeu_si256((void *)(o + MI_QNR), c10);
			_mm256_storeu_si256((void *)(o + 2 * MI_QNR), c20);
			_mm256_storeu_si256((void *)(o + 3 * MI_QNR), c30);
		}
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

/* MI_QUANT_AVX2PX=0: tile_avx2b_np's last 1-7 pixels on an 8- or 16-pixel
 * pass (A/B) */
MI_QUANT_SWITCH(avx2px, "MI_QUANT_AVX2PX")

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

/* MI_QUANT_AVX2BI=0: tile_avx2b_rq calls rq_store_avx2 out of line (A/B) */
MI_QUANT_SWITCH(avx2bi, "MI_QUANT_AVX2BI")

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
__attribute__((target("avx2,fma"))) static void
tile_avx2b_rq(const int8_t *a, const uint8_t *b, size_t ldb, int k4, const struct mi_qepi *ep,
	      int oc0, int np, uint8_t *out, ptrdiff_t ldo)
{
	if (np < MI_QNR) {
		int32_t acc[MI_QMR * MI_QNR];

		if (avx2np_on() && avx2px_on())
			tile_avx2b_np2(a, b, ldb, k4, np, acc);
		else if (avx2np_on())
			tile_avx2b_np(a, b, ldb, k4, np, acc);
		else
			tile_avx2b(a, b, ldb, k4, acc);
		epi_avx2(acc, MI_QNR, MI_QMR, np, ep, oc0,
			 ep->out_c4 ? (void *)(out + oc0 % 4) : (void *)out, ldo);
		return;
	}
	if (k4 <= 32 && avx2bi_on())
		tile_avx2b_rq_full(a, b, ldb, k4, ep, oc0, out, ldo, true);
	else
		tile_avx2b_rq_full(a, b, ldb, k4, ep, oc0, out, ldo, false);
}
#undef MI_QAVX2B_KLOOP
#undef MI_Q_B8

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

__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) static void
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
 * (rq_fits), so the saturating packs below are exact.  Output: planar
 * rows at out + r * ldo, or C4 (rows 4j..4j+3 interleaved at
 * out + j * ldo * 4; oc0 % 4 == 0).
 */
static bool rq_fits(const struct mi_qepi *ep)
{
	float lo = ep->mode == MI_QOUT_U8 ? 0.0f : -128.0f;
	float hi = ep->mode == MI_QOUT_U8 ? 255.0f : 127.0f;

	return (ep->mode == MI_QOUT_U8 || ep->mode == MI_QOUT_S8) &&
	       ep->flo >= lo - (float)ep->zy && ep->fhi <= hi - (float)ep->zy &&
	       ep->zy >= -128 && ep->zy <= 255;
}

/*
 * Requantization by saturation, the same bytes with fewer operations: the
 * map f(x) = bytes(sat16(cvt(x)) +sat zy) (saturating packs and add) is
 * nondecreasing wherever cvt does not overflow, and on [flo, fhi] it is
 * the float path's cvt(x) + zy (rq_fits: no saturation there).  A
 * nondecreasing f commutes with the clamp: f(min(max(x, flo), fhi)) =
 * min(max(f(x), f(flo)), f(fhi)), so the two float clamps per 16 sums
 * become two byte clamps per 64 bytes.  cvt cannot overflow when
 * |mult| < 1 (|float(acc)| <= 2^31, the product stays below it); NaN
 * mults fail that test too.  Otherwise (or flo > fhi) the float clamps.
 */
struct rq_sat {
	__m512i zy16, lo8, hi8;
	bool u8;
};

/* (inlined into the AVX-512 kernels: VEX-encoded scalar compares, no
 * call into SSE code with the upper zmm state dirty) */
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) static inline bool
rq_sat_ok(const struct mi_qepi *ep, const float *mult, int n)
{
	float lo = ep->mode == MI_QOUT_U8 ? 0.0f : -128.0f;
	float hi = ep->mode == MI_QOUT_U8 ? 255.0f : 127.0f;

	/* rq_fits, and flo <= fhi */
	if ((ep->mode != MI_QOUT_U8 && ep->mode != MI_QOUT_S8) ||
	    !(ep->flo >= lo - (float)ep->zy && ep->fhi <= hi - (float)ep->zy &&
	      ep->zy >= -128 && ep->zy <= 255 && ep->flo <= ep->fhi))
		return false;
	for (int i = 0; i < n; i++)
		if (!(mult[i] < 1.0f && mult[i] > -1.0f))
			return false;
	return true;
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) static inline void
rq_sat_set(struct rq_sat *r, const struct mi_qepi *ep)
{
	/* f(flo), f(fhi): the vector path's rounding (MXCSR) */
	int lo = _mm_cvtss_si32(_mm_set_ss(ep->flo)) + ep->zy;
	int hi = _mm_cvtss_si32(_mm_set_ss(ep->fhi)) + ep->zy;

	r->u8 = ep->mode == MI_QOUT_U8;
	r->zy16 = _mm512_set1_epi16((short)ep->zy);
	r->lo8 = _mm512_set1_epi8((char)lo);
	r->hi8 = _mm512_set1_epi8((char)hi);
}

/* 16 sums (comp added) times mult, rounded: no clamp */
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) static inline __m512i
rq_sat_cvt(__m512i a, __m512 m)
{
	return _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_cvtepi32_ps(a), m));
}

/* Four rq_sat_cvt results -> bytes (per 128-bit lane: 4 of a, b, c, d),
 * clamped. */
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) static inline __m512i
rq_sat_pack(const struct rq_sat *r, __m512i a, __m512i b, __m512i c, __m512i d)
{
	__m512i p0 = _mm512_adds_epi16(_mm512_packs_epi32(a, b), r->zy16);
	__m512i p1 = _mm512_adds_epi16(_mm512_packs_epi32(c, d), r->zy16);

	if (r->u8)
		return _mm512_min_epu8(_mm512_max_epu8(_mm512_packus_epi16(p0, p1), r->lo8), r->hi8);
	return _mm512_min_epi8(_mm512_max_epi8(_mm512_packs_epi16(p0, p1), r->lo8), r->hi8);
}

/* Four channels' sums (comp added) -> 16 C4 pixels (64 bytes) */
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) static inline __m512i
rq_sat_c4(const struct rq_sat *r, __m512i a, __m512i b, __m512i c, __m512i d, float ma,
	  float mb, float mc, float md)
{
	/* per lane: a px 0-3, b px 0-3, ... -> px 0 a b c d, px 1 ... */
	const __m512i tr = _mm512_broadcast_i32x4(_mm_setr_epi8(
		0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));

	return _mm512_shuffle_epi8(rq_sat_pack(r, rq_sat_cvt(a, _mm512_set1_ps(ma)),
					       rq_sat_cvt(b, _mm512_set1_ps(mb)),
					       rq_sat_cvt(c, _mm512_set1_ps(mc)),
					       rq_sat_cvt(d, _mm512_set1_ps(md))), tr);
}

typedef void (*tile_rq_fn)(const int8_t *a, const uint8_t *b, size_t ldb,
			   int k4, const struct mi_qepi *ep, int oc0, int np,
			   uint8_t *out, ptrdiff_t ldo);

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
	 _mm512_cvtps_epi32(_mm512_min_ps(                                    \
		_mm512_max_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(x),            \
					    _mm512_set1_ps(mp[r])),           \
			      lo),                                            \
		hi)))
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


__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) static void
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
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) static void
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

/* ---- epilogues: rows x np accumulators -> output ----------------------- */

typedef void (*epi_fn)(const int32_t *acc, int ldacc, int rows, int np,
		       const struct mi_qepi *ep, int oc0, void *out,
		       ptrdiff_t ldo);

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

static void epi_generic(const int32_t *acc, int ldacc, int rows, int np,
			const struct mi_qepi *ep, int oc0, void *out,
			ptrdiff_t ldo)
{
	for (int r = 0; r < rows; r++)
		for (int p = 0; p < np; p++)
			epi_one(ep, oc0 + r, acc[r * ldacc + p], out,
				ep->out_c4 ? ((r / 4) * ldo + p) * 4 + r % 4 :
					     r * ldo + p);
}

__attribute__((target("avx2,fma"))) static void
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
					__m256 f = _mm256_mul_ps(_mm256_cvtepi32_ps(a),
								 _mm256_set1_ps(ep->mult[oc]));
					__m256i q = _mm256_add_epi32(_mm256_cvtps_epi32(
						_mm256_min_ps(_mm256_max_ps(f, lo), hi)), zy);

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
			f = _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(f, m), lo), hi);
			__m256i q = _mm256_add_epi32(_mm256_cvtps_epi32(f), zy);
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

/* Narrow 16 int32 (already in range) to bytes and store n of them.  The
 * empty asm keeps GCC from fusing this into vpmovdb-to-memory, which is
 * microcoded and slow on Zen 4. */
__attribute__((target("avx512f,avx512bw,avx512vl"))) static inline void
store16_u8(uint8_t *dst, __mmask16 m, __m512i q)
{
	__m128i b = _mm512_cvtepi32_epi8(q);

	__asm__("" : "+v"(b));
	_mm_mask_storeu_epi8(dst, m, b);
}

/* Byte 0 of each of n 32-bit lanes to dst + 4 * i (C4 layout). */
__attribute__((target("avx512f,avx512bw,avx512vl"))) static inline void
store16_c4(uint8_t *dst, __mmask16 m, __m512i q)
{
	__mmask64 m64 = 0x1111111111111111ull;

	if (m != 0xffff) /* byte 0 of each active lane: no scalar bit loop */
		m64 = _mm512_test_epi8_mask(_mm512_maskz_set1_epi32(m, 0xff),
					    _mm512_set1_epi32(0xff));
	_mm512_mask_storeu_epi8(dst, m64, q);
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) static void
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
					__m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(a),
								 _mm512_set1_ps(ep->mult[oc]));

					f = _mm512_min_ps(_mm512_max_ps(f, lo), hi);
					__m512i q = _mm512_and_si512(
						_mm512_add_epi32(_mm512_cvtps_epi32(f), zy), byte);

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
			f = _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(f, m), lo), hi);
			__m512i q = _mm512_add_epi32(_mm512_cvtps_epi32(f), zy);
			if (ep->out_c4)
				store16_c4((uint8_t *)out + ((r / 4) * ldo + p) * 4 + r % 4, k, q);
			else
				store16_u8((uint8_t *)out + idx, k, q);
		}
	}
}

struct kernels {
	tile_fn tile;
	epi_fn epi;
	tile_rq_fn tile_rq; /* NULL: tile + epi */
	bool w16; /* tile takes w->w16 */
	bool split; /* tile takes split_panel_avx2's panel (convs) */
};

bool mi_quant_switch(int *cur, const char *name)
{
	if (*cur < 0) {
		const char *e = getenv(name);

		*cur = !(e && !strcmp(e, "0"));
	}
	return *cur;
}

/* the AVX2 tile on the weights widened at pack time (w->w16); off
 * (MI_QAVX2W=0 or tests): tile_avx2, widening per tile */
MI_QUANT_SWITCH(avx2w, "MI_QAVX2W")

/* MI_QUANT_AVX2RQ=0: tile_avx2w's sums go through epi_avx2 (A/B). */
MI_QUANT_SWITCH(avx2rq, "MI_QUANT_AVX2RQ")

/* MI_QUANT_AVX2S=0: conv panels are split into int16 pairs by the AVX2
 * tile at every step, for every output block (A/B). */
MI_QUANT_SWITCH(avx2s, "MI_QUANT_AVX2S")

static struct kernels kernels_for(int isa, const struct mi_qweights *w);

/* kernels_for, for the convs' panels: on AVX2 the panel split once per
 * item (split_panel_avx2), not per output block and step */
static struct kernels conv_kernels(int isa, const struct mi_qweights *w)
{
	struct kernels k = kernels_for(isa, w);

	if (isa == MI_QISA_AVX2 && k.w16 && k.tile == tile_avx2w && avx2s_on()) {
		k.tile = tile_avx2s;
		k.tile_rq = k.tile_rq ? tile_avx2s_rq : NULL;
		k.split = true;
	}
	return k;
}

static struct kernels kernels_for(int isa, const struct mi_qweights *w)
{
	switch (isa) {
	case MI_QISA_AVX512:
		return (struct kernels){ tile_vnni, epi_avx512, tile_vnni_rq, false, false };
	case MI_QISA_AVX2:
		if (avx2b_use(w))
			return (struct kernels){ tile_avx2b, epi_avx2,
						 avx2rq_on() ? tile_avx2b_rq : NULL, false, false };
		if (w->w16 && avx2w_on())
			return (struct kernels){ tile_avx2w, epi_avx2,
						 avx2rq_on() ? tile_avx2w_rq : NULL, true, false };
		return (struct kernels){ tile_avx2, epi_avx2, NULL, false, false };
	default:
		return (struct kernels){ tile_generic, epi_generic, NULL, false, false };
	}
}

static size_t out_elem(int mode)
{
	return mode == MI_QOUT_S32 || mode == MI_QOUT_F32 ? 4 : 1;
}

/* ---- GEMM with constant weights (MatMul / Gemm) ------------------------ */

struct gemm_job {
	const struct mi_qweights *w;
	const uint8_t *a;
	int m, lda, ldy, nchunk, bpc;
	const struct mi_qepi *ep;
	void *y;
	struct kernels k;
	uint8_t *ws; /* per thread: panel + acc + out tile */
	size_t ws_per;
	bool amx;
};

static void gemm_item(void *arg, int item, int tid)
{
	struct gemm_job *j = arg;
	const struct mi_qweights *w = j->w;
	int panel = item / j->nchunk, chunk = item % j->nchunk;
	int p0 = panel * MI_QNR, np = j->m - p0 < MI_QNR ? j->m - p0 : MI_QNR;
	uint8_t *pb = j->ws + tid * j->ws_per;
	int32_t *acc = (int32_t *)(pb + (size_t)w->k4 * MI_QNR * 4);
	uint8_t *ot = (uint8_t *)(acc + 4 * MI_QMR * MI_QNR);
	size_t es = out_elem(j->ep->mode);

	/* B panel: 4 consecutive k of row p are 4 contiguous bytes of A. */
	for (int p = 0; p < MI_QNR; p++) {
		const uint8_t *ar = j->a + (size_t)(p0 + (p < np ? p : 0)) * j->lda;

		for (int kq = 0; kq < w->k4; kq++) {
			uint8_t *d = pb + ((size_t)kq * MI_QNR + p) * 4;
			int kk = kq * 4;

			if (kk + 4 <= w->k) {
				memcpy(d, ar + kk, 4);
			} else {
				memset(d, 0, 4);
				memcpy(d, ar + kk, w->k - kk);
			}
		}
	}
	int b0 = chunk * j->bpc, b1 = b0 + j->bpc;

	if (b1 > w->nblk)
		b1 = w->nblk;
	for (int b = b0; b < b1; b++) {
		int oc0 = b * MI_QMR;
		int rows = w->ocg - oc0 < MI_QMR ? w->ocg - oc0 : MI_QMR;

		/* AMX: pairs of blocks, as in conv_gemm_item */
		bool amx = j->amx && b - b0 < b1 - b0 - (b1 - b0) % 2;

		if (amx && (b - b0) % 4 == 0)
			mi_qamx_tile(w, 0, oc0, b + 4 <= b1 ? 2 : 1, pb, MI_QNR * 4, NULL, 0, acc);
		if (!amx)
			j->k.tile(j->k.w16 ? (const int8_t *)(w->w16 + (size_t)b * w->k4 * MI_QMR * 4) :
					     w->packed + (size_t)b * w->k4 * MI_QMR * 4,
				  pb, MI_QNR * 4, w->k4, acc);
		j->k.epi(amx ? acc + (b - b0) % 4 * MI_QMR * MI_QNR : acc, MI_QNR, rows, np,
			 j->ep, oc0, ot, MI_QNR);
		/* transpose the 8 x np tile into Y[p][oc] */
		for (int p = 0; p < np; p++) {
			uint8_t *dst = (uint8_t *)j->y +
				       ((size_t)(p0 + p) * j->ldy + oc0) * es;

			for (int r = 0; r < rows; r++)
				memcpy(dst + r * es, ot + (r * MI_QNR + p) * es,
				       es);
		}
	}
}

/*
 * Few rows (a classifier's Gemm on one image): a GEMV per row, the packed
 * weights streamed once.  One 64-byte load holds two k4 steps of a block's
 * 8 rows; the row's matching 2 x 4 activation bytes are broadcast to the
 * two halves, so vpdpbusd does 64 multiply-adds with no padding to the
 * 32-pixel panel the tile kernel needs.
 */
#define GEMV_MAX_M 4
#define GEMV_BLK 64 /* blocks per epilogue call */

__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) static void
gemv_vnni(const struct mi_qweights *w, const uint8_t *a, int b0, int b1, int32_t *acc)
{
	const __m512i sel = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
	int k4 = w->k4, kfull = w->k / 4;

	for (int b = b0; b < b1; b++) {
		const int8_t *wp = w->packed + (size_t)b * k4 * MI_QMR * 4;
		__m512i s0 = _mm512_setzero_si512(), s1 = s0;
		__m256i t = _mm256_setzero_si256();
		int kq = 0;

		for (; kq + 4 <= kfull; kq += 4) {
			__m512i x0 = _mm512_permutexvar_epi32(
				sel, _mm512_castsi128_si512(_mm_loadl_epi64((const void *)(a + kq * 4))));
			__m512i x1 = _mm512_permutexvar_epi32(
				sel, _mm512_castsi128_si512(_mm_loadl_epi64((const void *)(a + kq * 4 + 8))));

			s0 = _mm512_dpbusd_epi32(s0, x0, _mm512_loadu_si512((const void *)(wp + kq * 32)));
			s1 = _mm512_dpbusd_epi32(s1, x1,
						 _mm512_loadu_si512((const void *)(wp + kq * 32 + 64)));
		}
		for (; kq < k4; kq++) {
			uint32_t d = 0;

			memcpy(&d, a + kq * 4, kq < kfull ? 4 : w->k - kq * 4);
			t = _mm256_dpbusd_epi32(t, _mm256_set1_epi32((int)d),
						_mm256_loadu_si256((const void *)(wp + kq * 32)));
		}
		s0 = _mm512_add_epi32(s0, s1);
		t = _mm256_add_epi32(t, _mm256_add_epi32(_mm512_castsi512_si256(s0),
							 _mm512_extracti64x4_epi64(s0, 1)));
		_mm256_storeu_si256((void *)(acc + (b - b0) * MI_QMR), t);
	}
}

/*
 * The same on AVX2: the block's 8 rows x 4 k of a k4 step widened to
 * int16 (rows 0-3 and 4-7), times the step's 4 activation bytes widened
 * and broadcast, by vpmaddwd (u8 x s8 pairs: exact in int32); each row's
 * two pair sums are added at the end.  The tile kernel padded one row to
 * a 32-pixel panel: 32x the work (the int8 classifier of MobileNetV2,
 * 1280 x 1000, ~1.2 ms on a Zen 3 core).
 */
__attribute__((target("avx2,fma"))) static void
gemv_avx2(const struct mi_qweights *w, const uint8_t *a, int b0, int b1, int32_t *acc)
{
	const __m256i ord = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
	int k4 = w->k4, kfull = w->k / 4;

	for (int b = b0; b < b1; b++) {
		const int8_t *wp = w->packed + (size_t)b * k4 * MI_QMR * 4;
		__m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
		int kq = 0;

#define MI_GEMV2_X(kk)                                                                   \
	_mm256_broadcastq_epi64(_mm_cvtepu8_epi16(_mm_cvtsi32_si128(d[kk])))
#define MI_GEMV2_W(kk, h)                                                                \
	_mm256_cvtepi8_epi16(_mm_loadu_si128((const void *)(wp + (kq + (kk)) * 32 + 16 * (h))))
		for (; kq + 2 <= kfull; kq += 2) {
			int32_t d[2];

			memcpy(d, a + kq * 4, 8);
			__m256i x0 = MI_GEMV2_X(0), x1 = MI_GEMV2_X(1);

			s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(MI_GEMV2_W(0, 0), x0));
			s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(MI_GEMV2_W(0, 1), x0));
			s2 = _mm256_add_epi32(s2, _mm256_madd_epi16(MI_GEMV2_W(1, 0), x1));
			s3 = _mm256_add_epi32(s3, _mm256_madd_epi16(MI_GEMV2_W(1, 1), x1));
		}
		for (; kq < k4; kq++) {
			int32_t d[1] = { 0 };

			memcpy(d, a + kq * 4, kq < kfull ? 4 : w->k - kq * 4);
			__m256i x0 = MI_GEMV2_X(0);

			s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(MI_GEMV2_W(0, 0), x0));
			s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(MI_GEMV2_W(0, 1), x0));
		}
#undef MI_GEMV2_X
#undef MI_GEMV2_W
		/* lanes (row r, k 0-1), (row r, k 2-3): rows 0 1 4 5 | 2 3 6 7 */
		__m256i h = _mm256_hadd_epi32(_mm256_add_epi32(s0, s2), _mm256_add_epi32(s1, s3));

		_mm256_storeu_si256((void *)(acc + (b - b0) * MI_QMR),
				    _mm256_permutevar8x32_epi32(h, ord));
	}
}

static int gemv2_cur = -1;

/* MI_QUANT_GEMV2=0: AVX2 GEMMs of few rows and 1x1 convs of one pixel
 * through the tile kernel's 32-pixel panel, as before gemv_avx2 (A/B). */
static bool gemv2_on(void)
{
	return mi_quant_switch(&gemv2_cur, "MI_QUANT_GEMV2");
}

int mi_quant_set_gemv2(int on)
{
	gemv2_cur = !!on;
	return gemv2_cur;
}

/* The GEMV kernels of an ISA (AVX-512 VNNI, AVX2). */
static bool gemv_isa(int isa)
{
	return isa == MI_QISA_AVX512 || (isa == MI_QISA_AVX2 && gemv2_on());
}

struct gemv_job {
	const struct mi_qweights *w;
	const uint8_t *a;
	int lda, ldy, nchunk, bpc;
	const struct mi_qepi *ep;
	void *y;
	epi_fn epi;
	int isa;
};

static void gemv_item(void *arg, int item, int tid)
{
	struct gemv_job *j = arg;
	const struct mi_qweights *w = j->w;
	int row = item / j->nchunk, chunk = item % j->nchunk;
	int b0 = chunk * j->bpc, b1 = b0 + j->bpc < w->nblk ? b0 + j->bpc : w->nblk;
	size_t es = out_elem(j->ep->mode);
	int32_t acc[GEMV_BLK * MI_QMR];

	for (int c0 = b0; c0 < b1; c0 += GEMV_BLK) {
		int c1 = c0 + GEMV_BLK < b1 ? c0 + GEMV_BLK : b1;
		int oc0 = c0 * MI_QMR, noc = (c1 * MI_QMR < w->ocg ? c1 * MI_QMR : w->ocg) - oc0;

		if (j->isa == MI_QISA_AVX512)
			gemv_vnni(w, j->a + (size_t)row * j->lda, c0, c1, acc);
		else
			gemv_avx2(w, j->a + (size_t)row * j->lda, c0, c1, acc);
		/* one pixel, noc rows: out[r] */
		j->epi(acc, 1, noc, 1, j->ep, oc0,
		       (uint8_t *)j->y + ((size_t)row * j->ldy + oc0) * es, 1);
	}
}

static size_t gemm_ws_per(const struct mi_qweights *w)
{
	/* panel, 32 x 32 sums (AMX), 8 x 32 output tile */
	return ((size_t)w->k4 * MI_QNR * 4 + 5 * MI_QMR * MI_QNR * 4 + 63) & ~(size_t)63;
}

size_t mi_qgemm_workspace(const struct mi_qweights *w, int m)
{
	int nt = par_threads > 64 ? 64 : par_threads;

	return gemm_ws_per(w) * nt + 64;
}

int mi_qgemm(const struct mi_qweights *w, const uint8_t *a, int m, int lda,
	     const struct mi_qepi *ep, void *y, int ldy, void *ws)
{
	struct gemm_job j = {
		.w = w, .a = a, .m = m, .lda = lda, .ldy = ldy, .ep = ep, .y = y,
		.k = kernels_for(mi_quant_isa(), w),
		.amx = mi_quant_isa() == MI_QISA_AVX512 && w->amx && mi_quant_amx(),
	};
	int npanel = (m + MI_QNR - 1) / MI_QNR;

	if (w->group != 1 || m <= 0)
		return -EINVAL;
	if (m <= GEMV_MAX_M && gemv_isa(mi_quant_isa())) {
		struct gemv_job v = { .w = w, .a = a, .lda = lda, .ldy = ldy, .ep = ep, .y = y,
				      .epi = j.k.epi, .isa = mi_quant_isa() };

		v.nchunk = 2 * par_threads < w->nblk ? 2 * par_threads : w->nblk;
		v.bpc = (w->nblk + v.nchunk - 1) / v.nchunk;
		v.nchunk = (w->nblk + v.bpc - 1) / v.bpc;
		par_for(m * v.nchunk, gemv_item, &v);
		return 0;
	}
	/* split the output channels too when there are few panels */
	j.nchunk = npanel >= 2 * par_threads ? 1 : 2 * par_threads;
	if (j.nchunk > w->nblk)
		j.nchunk = w->nblk;
	j.bpc = (w->nblk + j.nchunk - 1) / j.nchunk;
	j.nchunk = (w->nblk + j.bpc - 1) / j.bpc;
	j.ws_per = gemm_ws_per(w);
	void *own = NULL;

	if (!ws) {
		own = ws = aligned_alloc(64, (mi_qgemm_workspace(w, m) + 63) & ~(size_t)63);
		if (!own)
			return -ENOMEM;
	}
	j.ws = (uint8_t *)(((uintptr_t)ws + 63) & ~(uintptr_t)63);
	par_for(npanel * j.nchunk, gemm_item, &j);
	free(own);
	return 0;
}

/*
 * ---- depthwise on small maps: gather tables ------------------------------
 *
 * 16 consecutive output pixels (flattened, or within one output row) times
 * four taps (flattened over the kernel, or within one kernel row) per
 * vpdpbusd: byte 4i+b of the gathered vector is the input byte of tap b of
 * the group at output pixel i, so one vpdpbusd with the channel's four
 * weights per dword adds four taps of 16 outputs.  The input bytes of one
 * (pixel vector, tap group) lie in a 64-byte window of the unpadded input
 * plane (base offset, load mask); vpermb picks them (index table) and the
 * lanes that fall on padding take the zero point (permute mask).  The
 * tables depend on the shape only (built once per conv, shared by all
 * channels): any stride and dilation, as long as every window fits 64
 * bytes and the tables stay small (7x7 .. 28x28 maps).  Four channels (one
 * C4 quad) per pass share each table entry; their outputs are combined
 * into C4 dwords (one store).  Exact: uint8 x int8 into int32.
 */
#define DWT_MAX_BYTES (40 * 1024)
#define DWT_AMX_K4 64 /* dense tables on AMX: k4 rows of the panel at most */

struct mi_qdwtab {
	int npv, ng, nent; /* pixel vectors, tap groups, table rows */
	int *p0;           /* [npv + 1] first output pixel of each vector */
	int *ent;          /* [npv] its table row */
	int32_t *delta;    /* [npv] added to the row's window offsets */
	int32_t *base;     /* [nent * ng] window offset in the input plane */
	uint64_t *lmask;   /* [nent * ng] window bytes to load */
	uint64_t *pmask;   /* [nent * ng] gathered bytes that are inside the map */
	uint8_t *idx;      /* [nent * ng][64] window byte of each gathered byte */
	uint32_t *wq;      /* [c/4][ng][4] (depthwise), [oc][c][ng]: the group's four weights */
	int gt[4 * 2 * MI_QDW_KMAX]; /* [ng][4] the taps of each group, -1: none */
	void *mem;
	int nwk; /* dense: weight dwords per output channel (c * ng) */
	struct mi_qweights *aw; /* dense: wq as AMX tiles (k = (c * ng + g) * 4 + b), or NULL */
};

static int dwtab_cur = -1;

int mi_quant_set_dwtab(int on)
{
	dwtab_cur = !!on;
	return dwtab_cur;
}

/* MI_QUANT_DWTAB=0 turns the tables off (A/B runs). */
static bool dwtab_on(void)
{
	return mi_quant_switch(&dwtab_cur, "MI_QUANT_DWTAB");
}

static void dwt_free(struct mi_qdwtab *t)
{
	if (t) {
		free(t->mem);
		if (t->aw)
			mi_qweights_free(t->aw);
		free(t->aw);
	}
	free(t);
}

/* One table row: the windows of pixel vector v (n pixels); false when one
 * is wider than 64 bytes. */
static bool dwt_row(struct mi_qdwtab *t, const struct mi_qconv_shape *s, const int *gt,
		    int v, int n)
{
	for (int g = 0; g < t->ng; g++) {
		size_t e = (size_t)t->ent[v] * t->ng + g;
		int lo = INT32_MAX, hi = -1, off[64];
		uint64_t pm = 0;

		for (int i = 0; i < 16 * 4; i++) {
			int tap = gt[4 * g + i % 4], p = t->p0[v] + i / 4;

			off[i] = -1;
			if (i / 4 >= n || tap < 0)
				continue;
			int oy = p / s->ow, ox = p % s->ow;
			int iy = oy * s->sh - s->pt + tap / s->kw * s->dh;
			int ix = ox * s->sw - s->pl + tap % s->kw * s->dw;

			if (iy < 0 || iy >= s->h || ix < 0 || ix >= s->w)
				continue;
			off[i] = iy * s->w + ix;
			lo = off[i] < lo ? off[i] : lo;
			hi = off[i] > hi ? off[i] : hi;
		}
		if (hi >= 0 && hi - lo >= 64)
			return false;
		t->base[e] = hi >= 0 ? lo : 0;
		for (int i = 0; i < 64; i++)
			if (off[i] >= 0) {
				t->idx[e * 64 + i] = (uint8_t)(off[i] - lo);
				pm |= 1ull << i;
			}
		t->pmask[e] = pm;
		t->lmask[e] = hi < 0 ? 0 : hi - lo == 63 ? ~0ull : (2ull << (hi - lo)) - 1;
	}
	return true;
}

/*
 * Tables for one choice of pixel vectors (flat: across output rows, else
 * 16-pixel pieces of one row) and tap groups (flat: across kernel rows,
 * else pieces of one kernel row).  Per-row vectors of output rows whose
 * kernel rows all lie inside the map share one table row (the window
 * offsets move by whole input rows), so large maps need few.  NULL when a
 * window is wider than 64 bytes, the tables would be too large, or out of
 * memory.
 */
static struct mi_qdwtab *dwt_try(const struct mi_qconv_shape *s, size_t nwq, bool flat_px,
				 bool flat_tap)
{
	int taps = s->kh * s->kw, gpr = (s->kw + 3) / 4, rowv = (s->ow + 15) / 16;
	int ng = flat_tap ? (taps + 3) / 4 : s->kh * gpr;
	int npv = flat_px ? (s->oh * s->ow + 15) / 16 : s->oh * rowv;
	int gt[(MI_QDW_KMAX * MI_QDW_KMAX + 3) / 4 * 4 + 4 * MI_QDW_KMAX];
	int nent = 0, first_in = -1; /* first output row inside the map */

	/* gt[4g + b]: tap of slot b of group g, -1: none */
	for (int g = 0; g < ng; g++)
		for (int b = 0; b < 4; b++) {
			int t = flat_tap ? 4 * g + b : g / gpr * s->kw + g % gpr * 4 + b;
			bool ok = flat_tap ? t < taps : g % gpr * 4 + b < s->kw;

			gt[4 * g + b] = ok ? t : -1;
		}
	if (flat_px) {
		nent = npv;
	} else {
		for (int oy = 0; oy < s->oh; oy++) {
			int iy0 = oy * s->sh - s->pt, iy1 = iy0 + (s->kh - 1) * s->dh;
			bool inside = iy0 >= 0 && iy1 < s->h;

			if (!inside || first_in < 0)
				nent += rowv;
			if (inside && first_in < 0)
				first_in = oy;
		}
	}
	size_t ne = (size_t)nent * ng;

	if (ne * (64 + 8 + 8 + 4) > DWT_MAX_BYTES)
		return NULL;

	struct mi_qdwtab *t = calloc(1, sizeof(*t));
	size_t bytes = ne * (64 + 8 + 8 + 4) + (size_t)npv * 12 + 4 + nwq * 4;

	if (!t)
		return NULL;
	t->mem = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
	if (!t->mem) {
		free(t);
		return NULL;
	}
	t->npv = npv;
	t->ng = ng;
	t->nent = nent;
	t->idx = t->mem;
	t->lmask = (uint64_t *)(void *)(t->idx + ne * 64);
	t->pmask = t->lmask + ne;
	t->base = (int32_t *)(void *)(t->pmask + ne);
	t->p0 = t->base + ne;
	t->ent = t->p0 + npv + 1;
	t->delta = t->ent + npv;
	t->wq = (uint32_t *)(void *)(t->delta + npv);
	memset(t->idx, 0, ne * 64);
	t->p0[npv] = s->oh * s->ow;
	for (int v = 0, e = 0; v < npv; v++) {
		int oy = v / rowv, xc = v % rowv, n;
		bool shared = false;

		t->delta[v] = 0;
		if (flat_px) {
			t->p0[v] = v * 16;
			t->ent[v] = e++;
		} else {
			int iy0 = oy * s->sh - s->pt, iy1 = iy0 + (s->kh - 1) * s->dh;

			t->p0[v] = oy * s->ow + xc * 16;
			shared = iy0 >= 0 && iy1 < s->h && oy > first_in;
			if (shared) {
				t->ent[v] = t->ent[v - (oy - first_in) * rowv];
				t->delta[v] = (oy - first_in) * s->sh * s->w;
			} else {
				t->ent[v] = e++;
			}
		}
		n = flat_px ? (t->p0[npv] - t->p0[v] < 16 ? t->p0[npv] - t->p0[v] : 16) :
			      (s->ow - xc * 16 < 16 ? s->ow - xc * 16 : 16);
		if (!shared && !dwt_row(t, s, gt, v, n)) {
			dwt_free(t);
			return NULL;
		}
	}
	memcpy(t->gt, gt, sizeof(int) * 4 * ng);
	return t;
}

/* The tables that fit with the least work (vectors x groups), or NULL;
 * wq gets room for nwq_per_group * ng weight dwords. */
static struct mi_qdwtab *dwt_build(const struct mi_qconv_shape *s, size_t nwq_per_group)
{
	struct mi_qdwtab *best = NULL;

	for (int m = 0; m < 4; m++) {
		int ng = !(m & 2) ? (s->kh * s->kw + 3) / 4 : s->kh * ((s->kw + 3) / 4);
		struct mi_qdwtab *t = dwt_try(s, nwq_per_group * ng, !(m & 1), !(m & 2));

		if (t && (!best || (size_t)t->npv * t->ng < (size_t)best->npv * best->ng ||
			  ((size_t)t->npv * t->ng == (size_t)best->npv * best->ng &&
			   t->nent < best->nent))) {
			dwt_free(best);
			best = t;
		} else {
			dwt_free(t);
		}
	}
	return best;
}

/* weight byte k of output channel o in the dense tables' order */
static int dwt_wget(const void *vctx, int g, int o, int k)
{
	const struct mi_qdwtab *t = vctx;

	return (int8_t)(t->wq[(size_t)o * t->nwk + k / 4] >> (8 * (k % 4)));
}

/* Dense tables: the weights as AMX tiles too, when the CPU has them (no
 * tiles: the VNNI kernel). */
static void dwt_amx_pack(struct mi_qdwtab *t, const struct mi_qconv_shape *s)
{
	struct mi_qweights *w;

	t->nwk = s->c * t->ng;
	if (!mi_quant_amx() || t->nwk > DWT_AMX_K4 || s->oc > 32 || !(w = calloc(1, sizeof(*w))))
		return;
	if (mi_qweights_pack(w, 1, s->oc, t->nwk * 4, dwt_wget, t) ||
	    (!w->amx && mi_qamx_pack(w))) {
		mi_qweights_free(w);
		free(w);
		return;
	}
	t->aw = w;
}

/* ---- convolution ------------------------------------------------------ */

struct conv_get_ctx {
	mi_qw_get get;
	const void *ctx;
	const struct mi_qconv_shape *s;
	int c4;
};

/* packed k = (tap * c4 + cq) * 4 + j  ->  ONNX k = (c * kh + ky) * kw + kx */
static int conv_get(const void *vctx, int g, int o, int k)
{
	const struct conv_get_ctx *c = vctx;
	int j = k % 4, cq = (k / 4) % c->c4, tap = k / 4 / c->c4;
	int ch = cq * 4 + j, cg = c->s->c / c->s->group;

	if (ch >= cg)
		return 0;
	int ky = tap / c->s->kw, kx = tap % c->s->kw;

	return c->get(c->ctx, g, o, (ch * c->s->kh + ky) * c->s->kw + kx);
}

/* rgb packed k = tap * c + ch  ->  ONNX k = (ch * kh + ky) * kw + kx */
static int conv_rgb_get(const void *vctx, int g, int o, int k)
{
	const struct conv_get_ctx *c = vctx;
	int ch = k % c->s->c, tap = k / c->s->c;

	return c->get(c->ctx, g, o, (ch * c->s->kh + tap / c->s->kw) * c->s->kw + tap % c->s->kw);
}

int mi_qconv_init(struct mi_qconv *cv, const struct mi_qconv_shape *s,
		  mi_qw_get get, const void *ctx)
{
	memset(cv, 0, sizeof(*cv));
	if (s->group <= 0 || s->c % s->group || s->oc % s->group ||
	    s->kh <= 0 || s->kw <= 0 || s->sh <= 0 || s->sw <= 0 ||
	    s->dh <= 0 || s->dw <= 0 || s->oh <= 0 || s->ow <= 0)
		return -EINVAL;
	if ((int64_t)(s->oh - 1) * s->sh + (int64_t)(s->kh - 1) * s->dh >=
		    (int64_t)s->h + s->pt + s->pb ||
	    (int64_t)(s->ow - 1) * s->sw + (int64_t)(s->kw - 1) * s->dw >=
		    (int64_t)s->w + s->pl + s->pr ||
	    s->pt < 0 || s->pl < 0 || s->pb < 0 || s->pr < 0)
		return -EINVAL;
	cv->s = *s;
	if (s->group == s->c && s->oc == s->c && s->kh <= MI_QDW_KMAX &&
	    s->kw <= MI_QDW_KMAX && s->kh * s->kw > 1) {
		int nt = s->kh * s->kw;

		cv->depthwise = true;
		cv->dww = malloc((size_t)s->oc * nt);
		cv->wsum_dw = calloc(s->oc, sizeof(int32_t));
		if (!cv->dww || !cv->wsum_dw) {
			mi_qconv_fini(cv);
			return -ENOMEM;
		}
		for (int o = 0; o < s->oc; o++)
			for (int t = 0; t < nt; t++) {
				int v = get(ctx, o, 0, t);

				cv->dww[o * nt + t] = (int8_t)v;
				cv->wsum_dw[o] += v;
			}
		cv->dwt = dwt_build(s, (s->c + 3) / 4 * 4); /* NULL: the row kernels */
		/* [c / 4][ng][c % 4]: a quad's four weights of a group side
		 * by side (channels past c: 0) */
		for (int c = 0; cv->dwt && c < (s->c + 3) / 4 * 4; c++)
			for (int g = 0; g < cv->dwt->ng; g++) {
				uint32_t d = 0;

				for (int b = 0, tap; b < 4 && c < s->c; b++)
					if ((tap = cv->dwt->gt[4 * g + b]) >= 0)
						d |= (uint32_t)(uint8_t)cv->dww[(size_t)c * nt + tap]
						     << (8 * b);
				cv->dwt->wq[((size_t)(c / 4) * cv->dwt->ng + g) * 4 + c % 4] = d;
			}
		return 0;
	}
	int cg = s->c / s->group;

	cv->c4 = (cg + 3) / 4;
	cv->direct1x1 = s->kh == 1 && s->kw == 1 && s->sh == 1 && s->sw == 1 &&
			!(s->pt | s->pl | s->pb | s->pr) && s->oh == s->h &&
			s->ow == s->w;
	struct conv_get_ctx c = { get, ctx, s, cv->c4 };
	int err = mi_qweights_pack(&cv->w, s->group, s->oc / s->group,
				   s->kh * s->kw * cv->c4 * 4, conv_get, &c);

	/* RGB first convs on AVX2: the dense K order too (conv_rgb_item),
	 * where it saves k steps */
	if (!err && s->group == 1 && s->c < 4 && (s->kh * s->kw * s->c + 3) / 4 < cv->w.k4 &&
	    (mi_quant_isa_max() == MI_QISA_AVX2 || mi_quant_isa() == MI_QISA_AVX2) &&
	    (cv->rgb = calloc(1, sizeof(*cv->rgb)))) {
		if (mi_qweights_pack(cv->rgb, 1, s->oc, s->kh * s->kw * s->c, conv_rgb_get, &c) ||
		    (!cv->rgb->w16 && !avx2b_use(cv->rgb))) {
			mi_qweights_free(cv->rgb);
			free(cv->rgb);
			cv->rgb = NULL;
		}
	}

	/* a few input channels (first convs, RGB) and outputs: the gather
	 * tables too, weights [oc][c][ng] (NULL: the GEMM path, faster from
	 * ~64 output channels on: its input reorder and im2col are shared by
	 * more channels) */
	if (!err && s->group == 1 && s->c <= 4 && s->oc <= 32 && s->kh * s->kw > 1 &&
	    s->kh <= MI_QDW_KMAX && s->kw <= MI_QDW_KMAX &&
	    (cv->dwt = dwt_build(s, (size_t)s->oc * s->c))) {
		int ng = cv->dwt->ng;

		for (int o = 0; o < s->oc; o++)
			for (int ci = 0; ci < s->c; ci++)
				for (int g = 0; g < ng; g++) {
					uint32_t d = 0;

					for (int b = 0, tap; b < 4; b++)
						if ((tap = cv->dwt->gt[4 * g + b]) >= 0)
							d |= (uint32_t)(uint8_t)get(ctx, 0, o,
										 ci * s->kh * s->kw + tap)
							     << (8 * b);
					cv->dwt->wq[((size_t)o * s->c + ci) * ng + g] = d;
				}
		dwt_amx_pack(cv->dwt, s);
	}
	if (!err && mi_qwino_fits(s) &&
	    (mi_quant_isa_max() == MI_QISA_AVX2 || mi_quant_isa() == MI_QISA_AVX2))
		cv->wino = mi_qwino_build(s, get, ctx); /* NULL: the direct path */
	if (cv->wino && mi_qwino_on()) { /* the int16 weights go unused: the memory back */
		free(cv->w.w16);
		cv->w.w16 = NULL;
	}
	return err;
}

void mi_qconv_fini(struct mi_qconv *cv)
{
	mi_qweights_free(&cv->w);
	free(cv->dww);
	free(cv->wsum_dw);
	dwt_free(cv->dwt);
	mi_qwino_free(cv->wino);
	if (cv->rgb)
		mi_qweights_free(cv->rgb);
	free(cv->rgb);
	memset(cv, 0, sizeof(*cv));
}

void mi_qconv_comp(const struct mi_qconv *cv, const int32_t *bias, int zx_u8,
		   int32_t *comp)
{
	const int32_t *ws = cv->depthwise ? cv->wsum_dw : cv->w.wsum;

	for (int o = 0; o < cv->s.oc; o++)
		comp[o] = (bias ? bias[o] : 0) - zx_u8 * ws[o];
}

static size_t conv_xi_bytes(const struct mi_qconv *cv)
{
	const struct mi_qconv_shape *s = &cv->s;
	size_t hp = s->h + s->pt + s->pb, wp = s->w + s->pl + s->pr;

	if (cv->depthwise)
		return (hp * wp + 64) * s->c;
	/* slack: panels and taps read past the last plane (AMX rows) */
	return (size_t)s->group * cv->c4 * hp * wp * 4 + MI_QNR * 4 + 64 +
	       (size_t)s->kw * s->dw * 4;
}

static size_t conv_ws_per_thread(const struct mi_qconv *cv)
{
	if (cv->depthwise) /* a channel quad's sums */
		return ((size_t)cv->s.oh * cv->s.ow * 16 + 64 + 63) & ~(size_t)63;
	/* panel, then 32 x 32 sums (the AMX tiles; VNNI uses 8 x 32), then
	 * the AVX2 split panel (conv_kernels) */
	return ((size_t)cv->w.k4 * MI_QNR * 4 + 4 * MI_QMR * MI_QNR * 4 +
		(cv->w.w16 ? (size_t)cv->w.k4 * 256 : 0) + 63) &
	       ~(size_t)63;
}

size_t mi_qconv_workspace(const struct mi_qconv *cv)
{
	/* per-thread area for up to 64 threads */
	int nt = par_threads > 64 ? 64 : par_threads;
	size_t b = ((conv_xi_bytes(cv) + 63) & ~(size_t)63) + conv_ws_per_thread(cv) * nt + 64;

	if (cv->wino && mi_qwino_workspace(cv->wino, nt) > b)
		b = mi_qwino_workspace(cv->wino, nt);
	return b;
}

struct conv_job {
	const struct mi_qconv *cv;
	const uint8_t *xsrc;
	uint8_t flip; /* 0x80 for int8 input */
	uint8_t zx;
	uint8_t *xi;
	size_t hp, wp;
	int npanel;
	int nchunk, bpc; /* output blocks split in nchunk chunks of bpc */
	const struct mi_qepi *ep;
	uint8_t *y;
	struct kernels k;
	uint8_t *ws;
	size_t ws_per;
	int dw_isa;
	bool in_c4;     /* xsrc is C4 */
	bool in_direct; /* 1x1, no pads: read xsrc directly, no reorder */
	bool amx;       /* AMX tiles for pairs of output blocks */
	bool amx_rows;  /* conv_amx_rows_item: no im2col */
	bool dw_defer;  /* depthwise, C4 output, not fused: a quad's sums, then one epilogue */
	bool chan;      /* items chunk-major (MI_QCONV_CHAN) */
	bool rgb;       /* cv->rgb: planar xi, conv_rgb_panel */
	bool blk8;      /* fp32 output blocked by 8 (MI_QCONV_OUT_BLK8) */
};

/* Interleave one row of 4 planar channels (NULL: the fill byte) into
 * 4-byte pixels, 16 pixels per step with masked loads and stores (no
 * partial-vector copies through memory). */
__attribute__((target("avx512f,avx512bw,avx512vl"))) static void
prep_row_avx512(const uint8_t *const sp[4], uint8_t fill, uint8_t flip, int w,
		uint8_t *r8)
{
	__m128i vf = _mm_set1_epi8((char)flip), vfill = _mm_set1_epi8((char)fill);

	for (int x = 0; x < w; x += 16) {
		int n = w - x < 16 ? w - x : 16;
		__mmask16 m = (__mmask16)(n == 16 ? 0xffff : (1u << n) - 1);
		__m128i c[4];

		for (int q = 0; q < 4; q++)
			c[q] = sp[q] ? _mm_xor_si128(_mm_maskz_loadu_epi8(m, sp[q] + x), vf) : vfill;
		__m128i a0 = _mm_unpacklo_epi8(c[0], c[1]), a1 = _mm_unpackhi_epi8(c[0], c[1]);
		__m128i b0 = _mm_unpacklo_epi8(c[2], c[3]), b1 = _mm_unpackhi_epi8(c[2], c[3]);
		__m512i v = _mm512_castsi128_si512(_mm_unpacklo_epi16(a0, b0));

		v = _mm512_inserti32x4(v, _mm_unpackhi_epi16(a0, b0), 1);
		v = _mm512_inserti32x4(v, _mm_unpacklo_epi16(a1, b1), 2);
		v = _mm512_inserti32x4(v, _mm_unpackhi_epi16(a1, b1), 3);
		_mm512_mask_storeu_epi32(r8 + (size_t)x * 4, m, v);
	}
}

/* Reorder one group-channel-quad plane of the input into xi. */
static void conv_prep_item(void *arg, int item, int tid)
{
	struct conv_job *j = arg;
	const struct mi_qconv_shape *s = &j->cv->s;
	int g = item / j->cv->c4, cq = item % j->cv->c4;
	int cg = s->c / s->group;
	uint32_t *dst = (uint32_t *)(void *)(j->xi + (size_t)item * j->hp * j->wp * 4);
	uint32_t fill = j->zx * 0x01010101u;
	const uint8_t *src[4];
	size_t plane = (size_t)s->h * s->w;

	for (int q = 0; q < 4; q++) {
		int ch = cq * 4 + q;

		src[q] = ch < cg ? j->xsrc + (size_t)(g * cg + ch) * plane : NULL;
	}
	for (size_t y = 0; y < j->hp; y++) {
		uint32_t *row = dst + y * j->wp;
		int iy = (int)y - s->pt;

		if (iy < 0 || iy >= s->h) {
			for (size_t x = 0; x < j->wp; x++)
				row[x] = fill;
			continue;
		}
		for (int x = 0; x < s->pl; x++)
			row[x] = fill;
		for (int x = s->w + s->pl; x < (int)j->wp; x++)
			row[x] = fill;
		uint8_t *r8 = (uint8_t *)(row + s->pl);

		if (j->in_c4) {
			const uint8_t *sr = j->xsrc + (((size_t)(g * j->cv->c4 + cq) * s->h + iy) *
						       s->w) * 4;

			if (!j->flip) {
				memcpy(r8, sr, (size_t)s->w * 4);
			} else {
				for (int x = 0; x < s->w * 4; x++)
					r8[x] = sr[x] ^ j->flip;
			}
			continue;
		}
		const uint8_t *sp[4];
		uint8_t fillrow[16];
		int x = 0;

		memset(fillrow, j->zx ^ j->flip, sizeof(fillrow));
		for (int q = 0; q < 4; q++)
			sp[q] = src[q] ? src[q] + (size_t)iy * s->w : NULL;
		if (j->dw_isa == MI_QISA_AVX512) {
			prep_row_avx512(sp, j->zx, j->flip, s->w, r8);
			continue;
		}
		/* 16 pixels x 4 channels at a time: two rounds of byte
		 * interleaving (SSE2, every x86-64) */
		__m128i flip = _mm_set1_epi8((char)j->flip);

		/* the last < 16 pixels go through 16-byte copies of the rows
		 * (no byte loop) */
		for (; x < s->w; x += 16) {
			__m128i c[4];
			int n = s->w - x < 16 ? s->w - x : 16;
			uint8_t tail[4][16], out[64];

			for (int q = 0; q < 4; q++) {
				const uint8_t *sq = sp[q] ? sp[q] + x : fillrow;

				if (n < 16 && sp[q]) {
					memcpy(tail[q], sq, n);
					sq = tail[q];
				}
				c[q] = _mm_xor_si128(_mm_loadu_si128((const __m128i *)sq), flip);
			}
			__m128i a0 = _mm_unpacklo_epi8(c[0], c[1]), a1 = _mm_unpackhi_epi8(c[0], c[1]);
			__m128i b0 = _mm_unpacklo_epi8(c[2], c[3]), b1 = _mm_unpackhi_epi8(c[2], c[3]);
			uint8_t *o = n == 16 ? r8 + x * 4 : out;

			_mm_storeu_si128((__m128i *)o, _mm_unpacklo_epi16(a0, b0));
			_mm_storeu_si128((__m128i *)(o + 16), _mm_unpackhi_epi16(a0, b0));
			_mm_storeu_si128((__m128i *)(o + 32), _mm_unpacklo_epi16(a1, b1));
			_mm_storeu_si128((__m128i *)(o + 48), _mm_unpackhi_epi16(a1, b1));
			if (n < 16)
				memcpy(r8 + x * 4, out, (size_t)n * 4);
		}
	}
}

/* dst[i] = src[2 * i] for n 4-byte pixels (im2col of a stride-2 run). */
__attribute__((target("avx512f,avx512bw,avx512vl"))) static void
copy_s2_avx512(uint8_t *dst, const uint8_t *src, int n)
{
	const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24,
					       26, 28, 30);

	for (int i = 0; i < n; i += 16) {
		int k = n - i < 16 ? n - i : 16; /* reads 2k - 1 pixels */
		__mmask32 m = ((__mmask32)1 << (2 * k - 1)) - 1;
		__m512i lo = _mm512_maskz_loadu_epi32((__mmask16)m, src + (size_t)i * 8);
		__m512i hi = _mm512_maskz_loadu_epi32((__mmask16)(m >> 16), src + (size_t)i * 8 + 64);

		_mm512_mask_storeu_epi32(dst + (size_t)i * 4, (__mmask16)(((uint32_t)1 << k) - 1),
					 _mm512_permutex2var_epi32(lo, even, hi));
	}
}

/*
 * The same on AVX2, 8 pixels (the even dwords of two 32-byte loads:
 * shufps + vpermq) per step while another output follows (so no load
 * reads past the run's last tap); the rest one pixel at a time.
 */
__attribute__((target("avx2"))) static void copy_s2_avx2(uint8_t *dst, const uint8_t *src, int n)
{
	int i = 0;

	for (; i + 8 < n; i += 8) {
		__m256 l = _mm256_loadu_ps((const float *)(const void *)(src + (size_t)i * 8));
		__m256 h = _mm256_loadu_ps((const float *)(const void *)(src + (size_t)i * 8 + 32));

		_mm256_storeu_si256((__m256i *)(dst + (size_t)i * 4),
				    _mm256_permute4x64_epi64(
					    _mm256_castps_si256(_mm256_shuffle_ps(l, h, 0x88)), 0xd8));
	}
	for (; i < n; i++)
		memcpy(dst + i * 4, src + (size_t)i * 8, 4);
}

/* MI_QUANT_S2V=0: AVX2 stride-2 im2col one pixel at a time (A/B). */
MI_QUANT_SWITCH(s2v, "MI_QUANT_S2V")

/* MI_QUANT_RGB=0: RGB first convs on channel quads (A/B). */
MI_QUANT_SWITCH(rgb, "MI_QUANT_RGB")

/* cv->rgb: input channel `item` padded into xi as a planar hp x wp plane
 * (bytes ^ flip, pads zx), 32 bytes per step. */
__attribute__((target("avx2"))) static void conv_rgb_prep_item(void *arg, int item, int tid)
{
	const struct conv_job *j = arg;
	const struct mi_qconv_shape *s = &j->cv->s;
	const uint8_t *src = j->xsrc + (size_t)item * s->h * s->w;
	uint8_t *dst = j->xi + (size_t)item * j->hp * j->wp, zx = j->zx, flip = j->flip;
	const __m256i vf = _mm256_set1_epi8((char)flip);
	size_t wp = j->wp;
	int w = s->w, pl = s->pl;

	(void)tid;
	memset(dst, zx, (size_t)s->pt * wp);
	for (int y = 0; y < s->h; y++) {
		uint8_t *row = dst + (s->pt + (size_t)y) * wp;
		const uint8_t *sr = src + (size_t)y * w;
		int x = 0;

		memset(row, zx, pl);
		for (; x + 32 <= w; x += 32)
			_mm256_storeu_si256((void *)(row + pl + x),
					    _mm256_xor_si256(_mm256_loadu_si256((const void *)(sr + x)),
							     vf));
		for (; x < w; x++)
			row[pl + x] = sr[x] ^ flip;
		memset(row + pl + w, zx, s->pr);
	}
	memset(dst + (s->pt + (size_t)s->h) * wp, zx, (size_t)s->pb * wp);
}

/* MI_QUANT_RGBR=0: conv_rgb_panel writes every panel through its rows
 * (A/B) */
MI_QUANT_SWITCH(rgbr, "MI_QUANT_RGBR")

/*
 * conv_rgb_panel for tile_avx2b on 32 pixels of one output row (stride 1
 * or 2; off: the first pixel's offset in xi's planes): each k4 step's 4
 * rows of 32 bytes gathered in registers (stride 2: the even bytes of two
 * loads, vpshufb + vpunpcklqdq + vpermq) and transposed to 4-byte pixels
 * as conv_rgb_panel does in place, without its 16-byte row stores that
 * the 32-byte loads of the transpose read back (store forwarding fails
 * there); rows past K are 0 (their weights are 0).  The same panel bytes.
 */
__attribute__((target("avx2"))) static void rgb_panel_row(const struct conv_job *j, size_t off,
							   uint8_t *t)
{
	const struct mi_qconv_shape *s = &j->cv->s;
	int K = s->kh * s->kw * s->c;
	size_t plane = j->hp * j->wp;
	const __m256i even = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15,
					      0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
	int ky = 0, kx = 0, ch = 0;

	for (int kq = 0; kq < (K + 3) / 4; kq++) {
		__m256i r[4];
		uint8_t *o = t + (size_t)kq * 4 * MI_QNR;

		for (int i = 0; i < 4; i++) {
			if (4 * kq + i >= K) {
				r[i] = _mm256_setzero_si256();
				continue;
			}
			const uint8_t *src = j->xi + ch * plane + (size_t)ky * s->dh * j->wp +
					     (size_t)kx * s->dw + off;

			if (s->sw == 1) {
				r[i] = _mm256_loadu_si256((const void *)src);
			} else {
				__m256i a = _mm256_shuffle_epi8(_mm256_loadu_si256((const void *)src),
								even);
				__m256i b = _mm256_shuffle_epi8(
					_mm256_loadu_si256((const void *)(src + 32)), even);

				/* lanes: a0 b0 | a1 b1 (8 even bytes each) -> a0 a1 b0 b1 */
				r[i] = _mm256_permute4x64_epi64(_mm256_unpacklo_epi64(a, b), 0xd8);
			}
			if (++ch == s->c) {
				ch = 0;
				if (++kx == s->kw) {
					kx = 0;
					ky++;
				}
			}
		}
		__m256i l01 = _mm256_unpacklo_epi8(r[0], r[1]), h01 = _mm256_unpackhi_epi8(r[0], r[1]);
		__m256i l23 = _mm256_unpacklo_epi8(r[2], r[3]), h23 = _mm256_unpackhi_epi8(r[2], r[3]);
		__m256i q0 = _mm256_unpacklo_epi16(l01, l23), q1 = _mm256_unpackhi_epi16(l01, l23);
		__m256i q2 = _mm256_unpacklo_epi16(h01, h23), q3 = _mm256_unpackhi_epi16(h01, h23);

		_mm256_storeu_si256((void *)o, _mm256_permute2x128_si256(q0, q1, 0x20));
		_mm256_storeu_si256((void *)(o + 32), _mm256_permute2x128_si256(q2, q3, 0x20));
		_mm256_storeu_si256((void *)(o + 64), _mm256_permute2x128_si256(q0, q1, 0x31));
		_mm256_storeu_si256((void *)(o + 96), _mm256_permute2x128_si256(q2, q3, 0x31));
	}
}

/*
 * cv->rgb's im2col of pixels p0..p0+np: the K = taps * c rows of 32 bytes
 * (k = tap * c + ch) into t, 16 pixels per step on stride 1 and 2 (a row
 * of a run writes up to 15 bytes past it, rewritten by the next run or
 * row; the last row's land in t's slack), then the rows in fours to the
 * split panel sp (tile_avx2s: per k4 step the (k0, k2) uint16 pairs of
 * the 32 pixels, then (k1, k3)), or (sp NULL) in place to tile_avx2b's
 * panel (per k4 step the 32 pixels' 4 bytes).  Rows past K: any bytes,
 * their weights are 0.  xi's planes have a plane of slack after them (conv_xi_bytes),
 * the 32-byte loads of a run stay in it.
 */
__attribute__((target("avx2"))) static void
conv_rgb_panel(const struct conv_job *j, int p0, int np, uint8_t *t, uint8_t *sp)
{
	const struct mi_qconv_shape *s = &j->cv->s;
	int run_pp[MI_QNR], run_len[MI_QNR], nrun = 0, K = s->kh * s->kw * s->c;
	size_t run_off[MI_QNR], plane = j->hp * j->wp;
	const __m256i even = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15,
					      0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);

	if (!sp && np == MI_QNR && p0 % s->ow + MI_QNR <= s->ow && (s->sw == 1 || s->sw == 2) &&
	    rgbr_on()) {
		int p = p0;

		rgb_panel_row(j, (size_t)(p / s->ow) * s->sh * j->wp + (size_t)(p % s->ow) * s->sw,
			      t);
		return;
	}
	for (int pp = 0; pp < np;) {
		int p = p0 + pp, oy = p / s->ow, ox = p % s->ow;
		int len = s->ow - ox < np - pp ? s->ow - ox : np - pp;

		run_off[nrun] = (size_t)oy * s->sh * j->wp + (size_t)ox * s->sw;
		run_len[nrun] = len;
		run_pp[nrun++] = pp;
		pp += len;
	}
	/* k = (ky * kw + kx) * c + ch, no divisions per row */
	for (int k = 0, ky = 0, kx = 0, ch = 0; k < K; k++) {
		const uint8_t *src0 = j->xi + ch * plane + (size_t)ky * s->dh * j->wp +
				      (size_t)kx * s->dw;
		uint8_t *row = t + (size_t)k * MI_QNR;

		if (++ch == s->c) {
			ch = 0;
			if (++kx == s->kw) {
				kx = 0;
				ky++;
			}
		}

		for (int r = 0; r < nrun; r++) {
			const uint8_t *src = src0 + run_off[r];
			uint8_t *dst = row + run_pp[r];

			if (s->sw == 1) {
				for (int i = 0; i < run_len[r]; i += 16)
					_mm_storeu_si128((void *)(dst + i),
							 _mm_loadu_si128((const void *)(src + i)));
			} else if (s->sw == 2) {
				for (int i = 0; i < run_len[r]; i += 16) {
					__m256i v = _mm256_shuffle_epi8(
						_mm256_loadu_si256((const void *)(src + 2 * i)), even);

					_mm_storeu_si128((void *)(dst + i),
							 _mm256_castsi256_si128(
								 _mm256_permute4x64_epi64(v, 0x08)));
				}
			} else {
				for (int i = 0; i < run_len[r]; i++)
					dst[i] = src[(size_t)i * s->sw];
			}
		}
	}
	if (!sp) { /* tile_avx2b's panel: each step's 4 rows to 4-byte pixels, in place */
		for (int kq = 0; kq < (K + 3) / 4; kq++) {
			uint8_t *r = t + (size_t)kq * 4 * MI_QNR;
			__m256i r0 = _mm256_loadu_si256((const void *)r);
			__m256i r1 = _mm256_loadu_si256((const void *)(r + MI_QNR));
			__m256i r2 = _mm256_loadu_si256((const void *)(r + 2 * MI_QNR));
			__m256i r3 = _mm256_loadu_si256((const void *)(r + 3 * MI_QNR));
			__m256i l01 = _mm256_unpacklo_epi8(r0, r1), h01 = _mm256_unpackhi_epi8(r0, r1);
			__m256i l23 = _mm256_unpacklo_epi8(r2, r3), h23 = _mm256_unpackhi_epi8(r2, r3);
			/* lanes: pixels 0-3 | 16-19, 4-7 | 20-23, 8-11 | 24-27, 12-15 | 28-31 */
			__m256i q0 = _mm256_unpacklo_epi16(l01, l23), q1 = _mm256_unpackhi_epi16(l01, l23);
			__m256i q2 = _mm256_unpacklo_epi16(h01, h23), q3 = _mm256_unpackhi_epi16(h01, h23);

			_mm256_storeu_si256((void *)r, _mm256_permute2x128_si256(q0, q1, 0x20));
			_mm256_storeu_si256((void *)(r + 32), _mm256_permute2x128_si256(q2, q3, 0x20));
			_mm256_storeu_si256((void *)(r + 64), _mm256_permute2x128_si256(q0, q1, 0x31));
			_mm256_storeu_si256((void *)(r + 96), _mm256_permute2x128_si256(q2, q3, 0x31));
		}
		return;
	}
	for (int kq = 0; kq < (K + 3) / 4; kq++, sp += 256) {
		const uint8_t *r = t + (size_t)kq * 4 * MI_QNR;

		for (int h = 0; h < 2; h++) {
			__m256i a0 = _mm256_cvtepu8_epi16(_mm_loadu_si128((const void *)(r + h * 16)));
			__m256i a1 = _mm256_cvtepu8_epi16(
				_mm_loadu_si128((const void *)(r + MI_QNR + h * 16)));
			__m256i a2 = _mm256_cvtepu8_epi16(
				_mm_loadu_si128((const void *)(r + 2 * MI_QNR + h * 16)));
			__m256i a3 = _mm256_cvtepu8_epi16(
				_mm_loadu_si128((const void *)(r + 3 * MI_QNR + h * 16)));
			/* lanes: pixels 0-3 | 8-11 (lo), 4-7 | 12-15 (hi) */
			__m256i el = _mm256_unpacklo_epi16(a0, a2), eh = _mm256_unpackhi_epi16(a0, a2);
			__m256i ol = _mm256_unpacklo_epi16(a1, a3), oh = _mm256_unpackhi_epi16(a1, a3);

			_mm256_storeu_si256((void *)(sp + h * 64), _mm256_permute2x128_si256(el, eh, 0x20));
			_mm256_storeu_si256((void *)(sp + h * 64 + 32),
					    _mm256_permute2x128_si256(el, eh, 0x31));
			_mm256_storeu_si256((void *)(sp + 128 + h * 64),
					    _mm256_permute2x128_si256(ol, oh, 0x20));
			_mm256_storeu_si256((void *)(sp + 128 + h * 64 + 32),
					    _mm256_permute2x128_si256(ol, oh, 0x31));
		}
	}
}

/*
 * A panel item's (group, pixel panel, output blocks blk0..blk1): items run
 * over groups, then panels, then chunks of j->bpc output blocks.
 */
static void conv_item_decode(const struct conv_job *j, int item, int *g, int *panel,
			     int *blk0, int *blk1)
{
	int chunk = item % j->nchunk, nblk = j->cv->w.nblk;

	if (j->chan) {
		int gp = j->cv->s.group * j->npanel;

		chunk = item / gp;
		item = item % gp * j->nchunk;
	}
	*g = item / j->nchunk / j->npanel;
	*panel = item / j->nchunk % j->npanel;
	*blk0 = chunk * j->bpc;
	*blk1 = *blk0 + j->bpc < nblk ? *blk0 + j->bpc : nblk;
}

/* MI_QUANT_BLKEPI=0: MI_QCONV_OUT_BLK8 refused, the caller goes through
 * planar floats (A/B). */
MI_QUANT_SWITCH(blkepi, "MI_QUANT_BLKEPI")

/*
 * An output block's planar floats t (8 rows of MI_QNR, rows past the
 * block's channels already 0) to np pixels of the NCHWc layout blocked
 * by 8 at y (8 floats a pixel): SSE 4x4 transposes, pure moves.
 */
static void blk8_store(const float *t, int np, float *y)
{
	int p = 0;

#ifdef __SSE2__
	for (; p + 4 <= np; p += 4)
		for (int g = 0; g < 8; g += 4) {
			const float *r = t + g * MI_QNR + p;
			__m128 r0 = _mm_loadu_ps(r), r1 = _mm_loadu_ps(r + MI_QNR);
			__m128 r2 = _mm_loadu_ps(r + 2 * MI_QNR), r3 = _mm_loadu_ps(r + 3 * MI_QNR);

			_MM_TRANSPOSE4_PS(r0, r1, r2, r3);
			_mm_storeu_ps(y + p * 8 + g, r0);
			_mm_storeu_ps(y + (p + 1) * 8 + g, r1);
			_mm_storeu_ps(y + (p + 2) * 8 + g, r2);
			_mm_storeu_ps(y + (p + 3) * 8 + g, r3);
		}
#endif
	for (; p < np; p++)
		for (int l = 0; l < 8; l++)
			y[p * 8 + l] = t[l * MI_QNR + p];
}

/*
 * blk8_store with the residual Add fused (ep->res, in y's layout at r):
 * y = act(f + r), or act(r + f) with ep->res_first, as the NCHWc Add
 * computes it (one fp32 add, then vmax(v, 0) / vmin(vmax(v, lo), hi):
 * the second operand on equality or NaN), so the bytes are the same.
 */
static inline float res1(const struct mi_qepi *ep, float f, float r)
{
	float v = ep->res_first ? r + f : f + r;

	if (ep->res_act == MI_QRES_RELU)
		v = v > 0.0f ? v : 0.0f;
	else if (ep->res_act == MI_QRES_CLIP) {
		v = v > ep->res_lo ? v : ep->res_lo;
		v = v < ep->res_hi ? v : ep->res_hi;
	}
	return v;
}

/* MI_QUANT_RESAVX=0: the SSE store (tests: both paths) */
MI_QUANT_SWITCH(res_avx, "MI_QUANT_RESAVX")

static void blk8_store_res(const float *t, int np, float *y, const float *r,
			   const struct mi_qepi *ep)
{
	int p = 0;

#ifdef __SSE2__
	const __m128 lo = _mm_set1_ps(ep->res_act == MI_QRES_RELU ? 0.0f : ep->res_lo);
	const __m128 hi = _mm_set1_ps(ep->res_hi);
	const int act = ep->res_act;
	const bool first = ep->res_first;

	for (; p + 4 <= np; p += 4)
		for (int g = 0; g < 8; g += 4) {
			const float *s = t + g * MI_QNR + p;
			__m128 v[4] = { _mm_loadu_ps(s), _mm_loadu_ps(s + MI_QNR),
					_mm_loadu_ps(s + 2 * MI_QNR), _mm_loadu_ps(s + 3 * MI_QNR) };

			_MM_TRANSPOSE4_PS(v[0], v[1], v[2], v[3]);
			for (int i = 0; i < 4; i++) {
				size_t o = (size_t)(p + i) * 8 + g;
				__m128 rv = _mm_loadu_ps(r + o);
				__m128 a = first ? _mm_add_ps(rv, v[i]) : _mm_add_ps(v[i], rv);

				if (act)
					a = _mm_max_ps(a, lo);
				if (act == MI_QRES_CLIP)
					a = _mm_min_ps(a, hi);
				_mm_storeu_ps(y + o, a);
			}
		}
#endif
	for (; p < np; p++)
		for (int l = 0; l < 8; l++)
			y[p * 8 + l] = res1(ep, t[l * MI_QNR + p], r[p * 8 + l]);
}

/* blk8_store_res with whole 8-channel pixels in AVX registers */
__attribute__((target("avx2"))) static void
blk8_store_res_avx2(const float *t, int np, float *y, const float *r, const struct mi_qepi *ep)
{
	const __m256 lo = _mm256_set1_ps(ep->res_act == MI_QRES_RELU ? 0.0f : ep->res_lo);
	const __m256 hi = _mm256_set1_ps(ep->res_hi);
	const int act = ep->res_act;
	const bool first = ep->res_first;
	int p = 0;

	for (; p + 4 <= np; p += 4) {
		const float *s = t + p;
		__m128 a0 = _mm_loadu_ps(s), a1 = _mm_loadu_ps(s + MI_QNR);
		__m128 a2 = _mm_loadu_ps(s + 2 * MI_QNR), a3 = _mm_loadu_ps(s + 3 * MI_QNR);
		__m128 b0 = _mm_loadu_ps(s + 4 * MI_QNR), b1 = _mm_loadu_ps(s + 5 * MI_QNR);
		__m128 b2 = _mm_loadu_ps(s + 6 * MI_QNR), b3 = _mm_loadu_ps(s + 7 * MI_QNR);

		_MM_TRANSPOSE4_PS(a0, a1, a2, a3);
		_MM_TRANSPOSE4_PS(b0, b1, b2, b3);
		__m256 v[4] = { _mm256_set_m128(b0, a0), _mm256_set_m128(b1, a1),
				_mm256_set_m128(b2, a2), _mm256_set_m128(b3, a3) };

		for (int i = 0; i < 4; i++) {
			size_t o = (size_t)(p + i) * 8;
			__m256 rv = _mm256_loadu_ps(r + o);
			__m256 x = first ? _mm256_add_ps(rv, v[i]) : _mm256_add_ps(v[i], rv);

			if (act)
				x = _mm256_max_ps(x, lo);
			if (act == MI_QRES_CLIP)
				x = _mm256_min_ps(x, hi);
			_mm256_storeu_ps(y + o, x);
		}
	}
	for (; p < np; p++)
		for (int l = 0; l < 8; l++)
			y[p * 8 + l] = res1(ep, t[l * MI_QNR + p], r[p * 8 + l]);
}

/* MI_QUANT_CHUNK8=0: a 1x1 conv on a few panels splits into ~4 items a
 * thread, never 8 (A/B) */
MI_QUANT_SWITCH(chunk8, "MI_QUANT_CHUNK8")

/* One (group, pixel panel): im2col into the panel, all output blocks. */
static void conv_gemm_item(void *arg, int item, int tid)
{
	struct conv_job *j = arg;
	const struct mi_qconv *cv = j->cv;
	const struct mi_qconv_shape *s = &cv->s;
	const struct mi_qweights *w = j->rgb ? cv->rgb : &cv->w;
	int g, panel, blk0, blk1;

	conv_item_decode(j, item, &g, &panel, &blk0, &blk1);
	int npix = s->oh * s->ow;
	int p0 = panel * MI_QNR, np = npix - p0 < MI_QNR ? npix - p0 : MI_QNR;
	uint8_t *pb = j->ws + tid * j->ws_per;
	/* the workspace's layout is cv->w's (cv->rgb has fewer k steps) */
	int32_t *acc = (int32_t *)(pb + (size_t)cv->w.k4 * MI_QNR * 4);
	uint8_t *sp = pb + (size_t)cv->w.k4 * MI_QNR * 4 + 4 * MI_QMR * MI_QNR * 4;
	const uint8_t *xg = (j->in_direct ? j->xsrc : j->xi) +
			    (size_t)g * cv->c4 * j->hp * j->wp * 4;
	const uint8_t *b;
	size_t ldb;

	if (j->rgb) {
		conv_rgb_panel(j, p0, np, pb, j->k.split ? sp : NULL);
		b = j->k.split ? sp : pb;
		ldb = j->k.split ? 256 : MI_QNR * 4;
	} else if (cv->direct1x1 && ((j->in_direct && np < MI_QNR) || (j->amx && w->k4 < 16))) {
		/* the caller's tensor has no slack after it: copy the
		 * partial last panel; AMX with k4 < 16 reads 16 rows (the
		 * sums' memory after the panel: qamx.c) */
		for (int kq = 0; kq < w->k4; kq++)
			memcpy(pb + (size_t)kq * MI_QNR * 4,
			       xg + ((size_t)kq * j->hp * j->wp + p0) * 4, (size_t)np * 4);
		b = pb;
		ldb = MI_QNR * 4;
	} else if (cv->direct1x1) {
		b = xg + (size_t)p0 * 4;
		ldb = j->hp * j->wp * 4;
	} else {
		/* runs of pixels on the same output row */
		int run_oy[MI_QNR], run_ox[MI_QNR], run_len[MI_QNR], run_pp[MI_QNR];
		int nrun = 0;

		for (int pp = 0; pp < np;) {
			int p = p0 + pp, oy = p / s->ow, ox = p % s->ow;
			int len = s->ow - ox < np - pp ? s->ow - ox : np - pp;

			run_oy[nrun] = oy;
			run_ox[nrun] = ox;
			run_len[nrun] = len;
			run_pp[nrun++] = pp;
			pp += len;
		}
		size_t plane = j->hp * j->wp * 4;
		int taps = s->kh * s->kw;

		for (int t = 0; t < taps; t++) {
			int ky = t / s->kw, kx = t % s->kw;

			for (int cq = 0; cq < cv->c4; cq++) {
				const uint8_t *src0 = xg + cq * plane;
				uint8_t *dst0 = pb + ((size_t)(t * cv->c4 + cq) * MI_QNR) * 4;

				for (int r = 0; r < nrun; r++) {
					const uint8_t *src = src0 +
						(((size_t)run_oy[r] * s->sh + ky * s->dh) * j->wp +
						 (size_t)run_ox[r] * s->sw + kx * s->dw) * 4;
					uint8_t *dst = dst0 + run_pp[r] * 4;

					if (s->sw == 1) {
						memcpy(dst, src, run_len[r] * 4);
					} else if (s->sw == 2 && j->dw_isa == MI_QISA_AVX512) {
						copy_s2_avx512(dst, src, run_len[r]);
					} else if (s->sw == 2 && j->dw_isa == MI_QISA_AVX2 &&
						   s2v_on()) {
						copy_s2_avx2(dst, src, run_len[r]);
					} else {
						for (int i = 0; i < run_len[r]; i++)
							memcpy(dst + i * 4, src + (size_t)i * s->sw * 4, 4);
					}
				}
			}
		}
		b = pb;
		ldb = MI_QNR * 4;
	}
	if (j->k.split && !j->rgb) {
		split_panel_avx2(b, ldb, w->k4, sp);
		b = sp;
		ldb = 256;
	}
	size_t es = out_elem(j->ep->mode);
	bool rq = j->k.tile_rq && rq_fits(j->ep);

	for (int blk = blk0; blk < blk1; blk++) {
		int o0 = blk * MI_QMR;
		int rows = w->ocg - o0 < MI_QMR ? w->ocg - o0 : MI_QMR;
		int oc0 = g * w->ocg + o0;

		/* AMX: 16 or 32 channels' sums at a time (an even number of
		 * blocks), each block then takes its 8 rows */
		bool amx = j->amx && blk - blk0 < blk1 - blk0 - (blk1 - blk0) % 2;
		const int32_t *ab = amx ? acc + (blk - blk0) % 4 * MI_QMR * MI_QNR : acc;
		size_t wo = (size_t)(g * w->nblk + blk) * w->k4 * MI_QMR * 4;
		const int8_t *wb = j->k.w16 ? (const int8_t *)(w->w16 + wo) : w->packed + wo;
		uint8_t *yc4 = j->y + ((size_t)(oc0 / 4) * npix + p0) * 4;

		if (amx && (blk - blk0) % 4 == 0)
			mi_qamx_tile(w, g, o0, blk + 4 <= blk1 ? 2 : 1, b, ldb, NULL, 0, acc);
		if (j->blk8) {
			/* the floats into the second 8 x 32 block of the sums'
			 * area (unused without AMX), then blocked to y */
			float *t = (float *)(acc + MI_QMR * MI_QNR);

			j->k.tile(wb, b, ldb, w->k4, acc);
			j->k.epi(acc, MI_QNR, rows, np, j->ep, oc0, t, MI_QNR);
			if (rows < MI_QMR)
				memset(t + rows * MI_QNR, 0, (size_t)(MI_QMR - rows) * MI_QNR * 4);
			size_t yo = ((size_t)(oc0 / 8) * npix + p0) * 8;

			if (j->ep->res && j->dw_isa >= MI_QISA_AVX2 && res_avx_on())
				blk8_store_res_avx2(t, np, (float *)(void *)j->y + yo,
						    j->ep->res + yo, j->ep);
			else if (j->ep->res)
				blk8_store_res(t, np, (float *)(void *)j->y + yo, j->ep->res + yo, j->ep);
			else
				blk8_store(t, np, (float *)(void *)j->y + yo);
			continue;
		}
		if (rq && rows == MI_QMR && (!j->ep->out_c4 || !(oc0 % 4))) {
			uint8_t *yo = j->ep->out_c4 ? yc4 : j->y + (size_t)oc0 * npix + p0;

			if (amx)
				rq_acc_avx512(ab, MI_QNR, j->ep, oc0, np, yo, npix);
			else
				j->k.tile_rq(wb, b, ldb, w->k4, j->ep, oc0, np, yo, npix);
			continue;
		}
		if (!amx)
			j->k.tile(wb, b, ldb, w->k4, acc);
		j->k.epi(ab, MI_QNR, rows, np, j->ep, oc0,
			 j->ep->out_c4 ? yc4 + oc0 % 4 : j->y + ((size_t)oc0 * npix + p0) * es,
			 npix);
	}
}

/*
 * AMX on stride-1 convs with 64-channel multiples (cv->c4 % 16 == 0): no
 * im2col.  The panel is 32 consecutive pixels of the padded grid
 * (q = oy * wp + ox, ox < wp): input pixel (oy + ky*dh, ox + kx*dw) of tap
 * (ky, kx) is q + ky*dh*wp + kx*dw in the reordered input, so each tap's
 * B tiles load straight from xi (channel quads hp*wp*4 bytes apart).
 * Columns ox >= ow are computed and dropped; the 32 pixels are
 * requantized into the thread's buffer and copied out by row runs.
 */
#define AMX_ROWS_TAPS 49

static void conv_amx_rows_item(void *arg, int item, int tid)
{
	struct conv_job *j = arg;
	const struct mi_qconv *cv = j->cv;
	const struct mi_qconv_shape *s = &cv->s;
	const struct mi_qweights *w = &cv->w;
	int g, panel, blk0, blk1;

	conv_item_decode(j, item, &g, &panel, &blk0, &blk1);
	int npix = s->oh * s->ow, wp = (int)j->wp, q0 = panel * MI_QNR;
	size_t plane = j->hp * j->wp * 4, es = out_elem(j->ep->mode);
	uint8_t *tmp = j->ws + tid * j->ws_per; /* 8 x 32 bytes */
	int32_t *acc = (int32_t *)(tmp + (size_t)w->k4 * MI_QNR * 4);
	const uint8_t *xg = j->xi + (size_t)g * cv->c4 * plane;
	ptrdiff_t toff[AMX_ROWS_TAPS];
	int rq_off[MI_QNR], rp[MI_QNR], rlen[MI_QNR], nrun = 0;
	bool rq = rq_fits(j->ep);

	for (int t = 0; t < s->kh * s->kw; t++)
		toff[t] = ((ptrdiff_t)(t / s->kw) * s->dh * wp + (t % s->kw) * s->dw) * 4;
	/* runs of valid pixels: (offset in the panel, output pixel, length) */
	for (int q = q0, qe = q0 + MI_QNR < s->oh * wp ? q0 + MI_QNR : s->oh * wp; q < qe;) {
		int oy = q / wp, ox = q % wp;

		if (ox < s->ow) {
			rq_off[nrun] = q - q0;
			rp[nrun] = oy * s->ow + ox;
			rlen[nrun++] = s->ow - ox < qe - q ? s->ow - ox : qe - q;
		}
		q = (oy + 1) * wp; /* the run ends at the row's end or qe */
	}
	for (int blk = blk0, nr; blk < blk1; blk += 2 * nr) {
		nr = blk + 4 <= blk1 ? 2 : 1;
		mi_qamx_tile(w, g, blk * MI_QMR, nr, xg + (size_t)q0 * 4, plane, toff,
			     cv->c4 / 16, acc);
		for (int b = blk; b < blk + 2 * nr && b < blk1; b++) {
			int o0 = b * MI_QMR, rows = w->ocg - o0 < MI_QMR ? w->ocg - o0 : MI_QMR;
			int oc0 = g * w->ocg + o0;
			const int32_t *ab = acc + (b - blk) * MI_QMR * MI_QNR;

			if (rq && rows == MI_QMR && (!j->ep->out_c4 || !(oc0 % 4))) {
				rq_acc_avx512(ab, MI_QNR, j->ep, oc0, MI_QNR, tmp, MI_QNR);
				for (int r = 0; r < nrun; r++) {
					if (j->ep->out_c4) {
						for (int jq = 0; jq < 2; jq++)
							memcpy(j->y + ((size_t)(oc0 / 4 + jq) * npix + rp[r]) * 4,
							       tmp + (jq * MI_QNR + rq_off[r]) * 4, rlen[r] * 4);
					} else {
						for (int i = 0; i < MI_QMR; i++)
							memcpy(j->y + (size_t)(oc0 + i) * npix + rp[r],
							       tmp + i * MI_QNR + rq_off[r], rlen[r]);
					}
				}
				continue;
			}
			for (int r = 0; r < nrun; r++)
				j->k.epi(ab + rq_off[r], MI_QNR, rows, rlen[r], j->ep, oc0,
					 j->ep->out_c4 ? j->y + ((size_t)(oc0 / 4) * npix + rp[r]) * 4 + oc0 % 4 :
							 j->y + ((size_t)oc0 * npix + rp[r]) * es,
					 npix);
		}
	}
}

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

/* ---- depthwise gather-table kernel (see dwt_try) ------------------------- */

struct dwt_job {
	const struct mi_qconv *cv;
	const uint8_t *x;
	uint8_t zx, flip;
	const struct mi_qepi *ep;
	uint8_t *y;
	int nsplit;
};

/* Pixel vectors v0..v1 of channels c0..c0+nc-1 (nc <= 4; a C4 output has
 * whole quads). */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi"), always_inline))
static inline void
dwt_quad_body(const struct dwt_job *j, int c0, int nc, int v0, int v1, const bool flip,
	      const bool full, const bool unm)
{
	const struct mi_qconv_shape *s = &j->cv->s;
	const struct mi_qdwtab *t = j->cv->dwt;
	const struct mi_qepi *ep = j->ep;
	size_t plane = (size_t)s->h * s->w, npix = (size_t)s->oh * s->ow;
	const uint8_t *x0 = j->x + c0 * plane;
	const uint8_t *x1 = x0 + (nc > 1) * plane, *x2 = x0 + (nc > 2) * 2 * plane;
	const uint8_t *x3 = x0 + (nc > 3) * 3 * plane;
	/* full quads: plane k at x0 + k * plane (fewer live pointers) */
	const size_t xs3 = 3 * plane;
	const uint32_t *wq4 = t->wq + (size_t)(c0 / 4) * t->ng * 4;
	const __m512i zxv = _mm512_set1_epi8((char)j->zx), fv = _mm512_set1_epi8((char)0x80);
	const __m512 lo = _mm512_set1_ps(ep->flo), hi = _mm512_set1_ps(ep->fhi);
	const __m512i zy = _mm512_set1_epi32(ep->zy);
	/* channels past nc repeat channel c0 (computed, not stored) */
	const __m512i cp0 = _mm512_set1_epi32(ep->comp[c0]);
	const __m512i cp1 = _mm512_set1_epi32(ep->comp[c0 + (nc > 1)]);
	const __m512i cp2 = _mm512_set1_epi32(ep->comp[c0 + (nc > 2) * 2]);
	const __m512i cp3 = _mm512_set1_epi32(ep->comp[c0 + (nc > 3) * 3]);
	const __m512 m0 = _mm512_set1_ps(ep->mult[c0]);
	const __m512 m1 = _mm512_set1_ps(ep->mult[c0 + (nc > 1)]);
	const __m512 m2 = _mm512_set1_ps(ep->mult[c0 + (nc > 2) * 2]);
	const __m512 m3 = _mm512_set1_ps(ep->mult[c0 + (nc > 3) * 3]);
	/* the four channels' sums -> bytes by rq_sat_pack (the same bytes as
	 * dw_store's formula), then C4 pixels or a 16-byte lane per plane */
	const bool sat = rq_sat_ok(ep, ep->mult + c0, nc);
	const __m512i pc = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
	const __m512i tr = _mm512_broadcast_i32x4(_mm_setr_epi8(
		0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
	struct rq_sat rs;

	rq_sat_set(&rs, ep);
	for (int v = v0; v < v1; v++) {
		/* the sums start at comp (dw_store adds it after the taps:
		 * the same int32) */
		__m512i a0 = cp0, a1 = cp1, a2 = cp2, a3 = cp3;
		size_t e = (size_t)t->ent[v] * t->ng;
		int32_t dv = t->delta[v];

		for (int g = 0; g < t->ng; g++, e++) {
			__m512i ix = _mm512_load_si512(t->idx + e * 64);
			__mmask64 lm = t->lmask[e], pm = t->pmask[e];
			int32_t b = t->base[e] + dv;

#define MI_DWT_GATHER(xp)                                                                \
	_mm512_mask_permutexvar_epi8(                                                    \
		zxv, pm, ix,                                                             \
		flip ? _mm512_xor_si512(_mm512_maskz_loadu_epi8(lm, (xp) + b), fv)     \
		     : _mm512_maskz_loadu_epi8(lm, (xp) + b))
			const uint32_t *wg = wq4 + 4 * g;

			if (full) {
				const uint8_t *xb = x0 + b;

#define MI_DWT_LD(p) (unm ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi8(lm, (p)))
#define MI_DWT_GATHER_AT(p)                                                              \
	_mm512_mask_permutexvar_epi8(zxv, pm, ix,                                        \
				     flip ? _mm512_xor_si512(MI_DWT_LD(p), fv) : MI_DWT_LD(p))
				a0 = _mm512_dpbusd_epi32(a0, MI_DWT_GATHER_AT(xb),
							 _mm512_set1_epi32((int)wg[0]));
				a1 = _mm512_dpbusd_epi32(a1, MI_DWT_GATHER_AT(xb + plane),
							 _mm512_set1_epi32((int)wg[1]));
				a2 = _mm512_dpbusd_epi32(a2, MI_DWT_GATHER_AT(xb + 2 * plane),
							 _mm512_set1_epi32((int)wg[2]));
				a3 = _mm512_dpbusd_epi32(a3, MI_DWT_GATHER_AT(xb + xs3),
							 _mm512_set1_epi32((int)wg[3]));
#undef MI_DWT_GATHER_AT
#undef MI_DWT_LD
				continue;
			}
			a0 = _mm512_dpbusd_epi32(a0, MI_DWT_GATHER(x0), _mm512_set1_epi32((int)wg[0]));
			a1 = _mm512_dpbusd_epi32(a1, MI_DWT_GATHER(x1), _mm512_set1_epi32((int)wg[1]));
			a2 = _mm512_dpbusd_epi32(a2, MI_DWT_GATHER(x2), _mm512_set1_epi32((int)wg[2]));
			a3 = _mm512_dpbusd_epi32(a3, MI_DWT_GATHER(x3), _mm512_set1_epi32((int)wg[3]));
#undef MI_DWT_GATHER
		}
		int p0 = t->p0[v], n = t->p0[v + 1] - p0;
		__mmask16 m;

		n = n < 16 ? n : 16;
		m = (__mmask16)((1u << n) - 1);
		if (sat) {
			__m512i d = rq_sat_pack(&rs, rq_sat_cvt(a0, m0), rq_sat_cvt(a1, m1),
						rq_sat_cvt(a2, m2), rq_sat_cvt(a3, m3));

			if (ep->out_c4) {
				_mm512_mask_storeu_epi32(j->y + ((size_t)(c0 / 4) * npix + p0) * 4, m,
							 _mm512_shuffle_epi8(d, tr));
				continue;
			}
			uint8_t *yp = j->y + c0 * npix + p0;

			d = _mm512_permutexvar_epi32(pc, d); /* lane c: channel c */
			_mm_mask_storeu_epi8(yp, m, _mm512_castsi512_si128(d));
			if (nc > 1)
				_mm_mask_storeu_epi8(yp + npix, m, _mm512_extracti32x4_epi32(d, 1));
			if (nc > 2)
				_mm_mask_storeu_epi8(yp + 2 * npix, m, _mm512_extracti32x4_epi32(d, 2));
			if (nc > 3)
				_mm_mask_storeu_epi8(yp + 3 * npix, m, _mm512_extracti32x4_epi32(d, 3));
			continue;
		}
		if (ep->mode == MI_QOUT_F32) { /* dw_store's fp32 epilogue, planar */
			float *yf = (float *)(void *)j->y + c0 * npix + p0;

#define MI_DWT_F32(a, mv, c)                                                             \
	_mm512_min_ps(_mm512_max_ps(_mm512_fmadd_ps(_mm512_cvtepi32_ps(a), mv,           \
						    _mm512_set1_ps(ep->fbias ? ep->fbias[c] : 0.0f)), \
				    lo), hi)
			_mm512_mask_storeu_ps(yf, m, MI_DWT_F32(a0, m0, c0));
			if (nc > 1)
				_mm512_mask_storeu_ps(yf + npix, m, MI_DWT_F32(a1, m1, c0 + 1));
			if (nc > 2)
				_mm512_mask_storeu_ps(yf + 2 * npix, m, MI_DWT_F32(a2, m2, c0 + 2));
			if (nc > 3)
				_mm512_mask_storeu_ps(yf + 3 * npix, m, MI_DWT_F32(a3, m3, c0 + 3));
#undef MI_DWT_F32
			continue;
		}
		/* the requantization of dw_store, four channels */
#define MI_DWT_RQ(a, m)                                                                  \
	_mm512_add_epi32(_mm512_cvtps_epi32(_mm512_min_ps(                               \
		_mm512_max_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(a), m), lo), hi)), zy)
		a0 = MI_DWT_RQ(a0, m0);
		a1 = MI_DWT_RQ(a1, m1);
		a2 = MI_DWT_RQ(a2, m2);
		a3 = MI_DWT_RQ(a3, m3);
#undef MI_DWT_RQ
		if (ep->out_c4) {
			__m512i d = a0;

			d = _mm512_mask_blend_epi8(0x2222222222222222ull, d, _mm512_slli_epi32(a1, 8));
			d = _mm512_mask_blend_epi8(0x4444444444444444ull, d, _mm512_slli_epi32(a2, 16));
			d = _mm512_mask_blend_epi8(0x8888888888888888ull, d, _mm512_slli_epi32(a3, 24));
			_mm512_mask_storeu_epi32(j->y + ((size_t)(c0 / 4) * npix + p0) * 4, m, d);
		} else {
			uint8_t *yp = j->y + c0 * npix + p0;

			store16_u8(yp, m, a0);
			if (nc > 1)
				store16_u8(yp + npix, m, a1);
			if (nc > 2)
				store16_u8(yp + 2 * npix, m, a2);
			if (nc > 3)
				store16_u8(yp + 3 * npix, m, a3);
		}
	}
}

__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi"))) static void
dwt_item(void *arg, int item, int tid)
{
	const struct dwt_job *j = arg;
	const struct mi_qdwtab *t = j->cv->dwt;
	/* part-major: a thread's contiguous block of items is a pixel range
	 * of every quad, the rows the conv before wrote on that thread */
	int nq = (j->cv->s.c + 3) / 4, quad = item % nq, part = item / nq, c0 = quad * 4;
	int nc = j->cv->s.c - c0 < 4 ? j->cv->s.c - c0 : 4;
	int v0 = (int)((int64_t)t->npv * part / j->nsplit);
	int v1 = (int)((int64_t)t->npv * (part + 1) / j->nsplit);

	/* unmasked 64-byte window loads where they stay inside the tensor
	 * (the bytes past the window are not picked: pmask) */
	bool unm = nc == 4 && (size_t)(j->cv->s.c - c0 - 4) * j->cv->s.h * j->cv->s.w >= 64;

	if (unm && j->flip)
		dwt_quad_body(j, c0, 4, v0, v1, true, true, true);
	else if (unm)
		dwt_quad_body(j, c0, 4, v0, v1, false, true, true);
	else if (nc == 4 && j->flip)
		dwt_quad_body(j, c0, 4, v0, v1, true, true, false);
	else if (nc == 4)
		dwt_quad_body(j, c0, 4, v0, v1, false, true, false);
	else if (j->flip)
		dwt_quad_body(j, c0, nc, v0, v1, true, false, false);
	else
		dwt_quad_body(j, c0, nc, v0, v1, false, false, false);
}

/* Four channels' requantized pixel vector: one C4 store, or per plane. */
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) static inline void
dwt_store4(const struct dwt_job *j, int o, __mmask16 m, int p0, size_t npix, __m512i a0,
	   __m512i a1, __m512i a2, __m512i a3)
{
	int nc = j->cv->s.oc - o < 4 ? j->cv->s.oc - o : 4;

	if (j->ep->out_c4) {
		__m512i d = a0;

		d = _mm512_mask_blend_epi8(0x2222222222222222ull, d, _mm512_slli_epi32(a1, 8));
		d = _mm512_mask_blend_epi8(0x4444444444444444ull, d, _mm512_slli_epi32(a2, 16));
		d = _mm512_mask_blend_epi8(0x8888888888888888ull, d, _mm512_slli_epi32(a3, 24));
		_mm512_mask_storeu_epi32(j->y + ((size_t)(o / 4) * npix + p0) * 4, m, d);
	} else {
		uint8_t *yp = j->y + (size_t)o * npix + p0;

		store16_u8(yp, m, a0);
		if (nc > 1)
			store16_u8(yp + npix, m, a1);
		if (nc > 2)
			store16_u8(yp + 2 * npix, m, a2);
		if (nc > 3)
			store16_u8(yp + 3 * npix, m, a3);
	}
}

/*
 * Dense convs with few input channels (c <= 4: the RGB first convs) on the
 * same tables: per pixel vector the c * ng gathered vectors are made once
 * and each output channel quad adds them with its weights (K = c * ng * 4
 * instead of the GEMM's taps * 4 with channel 4 padding; no input reorder,
 * no im2col).
 */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi"), always_inline))
static inline void
dwt_dense_body(const struct dwt_job *j, int v0, int v1, const bool flip)
{
	const struct mi_qconv_shape *s = &j->cv->s;
	const struct mi_qdwtab *t = j->cv->dwt;
	const struct mi_qepi *ep = j->ep;
	size_t plane = (size_t)s->h * s->w, npix = (size_t)s->oh * s->ow;
	int nk = s->c * t->ng;
	const __m512i zxv = _mm512_set1_epi8((char)j->zx), fv = _mm512_set1_epi8((char)0x80);
	const __m512 lo = _mm512_set1_ps(ep->flo), hi = _mm512_set1_ps(ep->fhi);
	const __m512i zy = _mm512_set1_epi32(ep->zy);
	__m512i gv[4 * 2 * MI_QDW_KMAX];
	struct rq_sat rs;

	rq_sat_set(&rs, ep);

	for (int v = v0; v < v1; v++) {
		size_t e0 = (size_t)t->ent[v] * t->ng;
		int32_t dv = t->delta[v];
		int p0 = t->p0[v], n = t->p0[v + 1] - p0;
		__mmask16 m;

		for (int ci = 0; ci < s->c; ci++)
			for (int g = 0; g < t->ng; g++) {
				size_t e = e0 + g;
				__m512i w = _mm512_maskz_loadu_epi8(t->lmask[e], j->x + ci * plane +
									  t->base[e] + dv);

				if (flip)
					w = _mm512_xor_si512(w, fv);
				gv[ci * t->ng + g] = _mm512_mask_permutexvar_epi8(
					zxv, t->pmask[e], _mm512_load_si512(t->idx + e * 64), w);
			}
		n = n < 16 ? n : 16;
		m = (__mmask16)((1u << n) - 1);
		/* two channel quads at a time: eight independent sums, named
		 * (registers, not an array) */
		for (int o = 0; o < s->oc; o += 8) {
			int oo[8];

			for (int k = 0; k < 8; k++)
				oo[k] = o + k < s->oc ? o + k : o; /* past oc: computed, not stored */
			const uint32_t *w0 = t->wq + (size_t)oo[0] * nk, *w1 = t->wq + (size_t)oo[1] * nk;
			const uint32_t *w2 = t->wq + (size_t)oo[2] * nk, *w3 = t->wq + (size_t)oo[3] * nk;
			const uint32_t *w4 = t->wq + (size_t)oo[4] * nk, *w5 = t->wq + (size_t)oo[5] * nk;
			const uint32_t *w6 = t->wq + (size_t)oo[6] * nk, *w7 = t->wq + (size_t)oo[7] * nk;
			__m512i a0 = _mm512_set1_epi32(ep->comp[oo[0]]), a1 = _mm512_set1_epi32(ep->comp[oo[1]]);
			__m512i a2 = _mm512_set1_epi32(ep->comp[oo[2]]), a3 = _mm512_set1_epi32(ep->comp[oo[3]]);
			__m512i a4 = _mm512_set1_epi32(ep->comp[oo[4]]), a5 = _mm512_set1_epi32(ep->comp[oo[5]]);
			__m512i a6 = _mm512_set1_epi32(ep->comp[oo[6]]), a7 = _mm512_set1_epi32(ep->comp[oo[7]]);

			for (int i = 0; i < nk; i++) {
				__m512i x = gv[i];

				a0 = _mm512_dpbusd_epi32(a0, x, _mm512_set1_epi32((int)w0[i]));
				a1 = _mm512_dpbusd_epi32(a1, x, _mm512_set1_epi32((int)w1[i]));
				a2 = _mm512_dpbusd_epi32(a2, x, _mm512_set1_epi32((int)w2[i]));
				a3 = _mm512_dpbusd_epi32(a3, x, _mm512_set1_epi32((int)w3[i]));
				a4 = _mm512_dpbusd_epi32(a4, x, _mm512_set1_epi32((int)w4[i]));
				a5 = _mm512_dpbusd_epi32(a5, x, _mm512_set1_epi32((int)w5[i]));
				a6 = _mm512_dpbusd_epi32(a6, x, _mm512_set1_epi32((int)w6[i]));
				a7 = _mm512_dpbusd_epi32(a7, x, _mm512_set1_epi32((int)w7[i]));
			}
			if (ep->out_c4 && rq_sat_ok(ep, ep->mult + o, s->oc - o < 8 ? s->oc - o : 8)) {
				uint8_t *yq = j->y + ((size_t)(o / 4) * npix + p0) * 4;
				const float *mo = ep->mult;

				_mm512_mask_storeu_epi32(yq, m, rq_sat_c4(&rs, a0, a1, a2, a3, mo[oo[0]],
									  mo[oo[1]], mo[oo[2]], mo[oo[3]]));
				if (o + 4 < s->oc)
					_mm512_mask_storeu_epi32(yq + npix * 4, m,
								 rq_sat_c4(&rs, a4, a5, a6, a7, mo[oo[4]],
									   mo[oo[5]], mo[oo[6]], mo[oo[7]]));
				continue;
			}
#define MI_DWT_RQ(a, c)                                                                  \
	_mm512_add_epi32(_mm512_cvtps_epi32(_mm512_min_ps(                               \
		_mm512_max_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(a), _mm512_set1_ps(ep->mult[c])), \
			      lo), hi)), zy)
			a0 = MI_DWT_RQ(a0, oo[0]);
			a1 = MI_DWT_RQ(a1, oo[1]);
			a2 = MI_DWT_RQ(a2, oo[2]);
			a3 = MI_DWT_RQ(a3, oo[3]);
			a4 = MI_DWT_RQ(a4, oo[4]);
			a5 = MI_DWT_RQ(a5, oo[5]);
			a6 = MI_DWT_RQ(a6, oo[6]);
			a7 = MI_DWT_RQ(a7, oo[7]);
#undef MI_DWT_RQ
			dwt_store4(j, o, m, p0, npix, a0, a1, a2, a3);
			if (o + 4 < s->oc)
				dwt_store4(j, o + 4, m, p0, npix, a4, a5, a6, a7);
		}
	}
}

/* Items: runs of 8 pixel vectors. */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi"))) static void
dwt_dense_item(void *arg, int item, int tid)
{
	const struct dwt_job *j = arg;
	int npv = j->cv->dwt->npv, v0 = item * 8, v1 = v0 + 8 < npv ? v0 + 8 : npv;

	if (j->flip)
		dwt_dense_body(j, v0, v1, true);
	else
		dwt_dense_body(j, v0, v1, false);
}

/*
 * The same dense convs on AMX tiles: two pixel vectors' gathered vectors
 * are the rows of a 32-pixel B panel ([k4][32][4], exactly the VNNI
 * path's panel), one mi_qamx_tile gives the sums of up to 32 output
 * channels, the VNNI path's epilogue stores each vector's pixels.  Exact:
 * int32 sums of the same products.
 */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi"))) static void
dwt_amx_item(void *arg, int item, int tid)
{
	const struct dwt_job *j = arg;
	const struct mi_qconv_shape *s = &j->cv->s;
	const struct mi_qdwtab *t = j->cv->dwt;
	const struct mi_qepi *ep = j->ep;
	size_t plane = (size_t)s->h * s->w, npix = (size_t)s->oh * s->ow;
	size_t es = out_elem(ep->mode);
	int v0 = item * 8, v1 = v0 + 8 < t->npv ? v0 + 8 : t->npv;
	const __m512i zxv = _mm512_set1_epi8((char)j->zx), fv = _mm512_set1_epi8((char)j->flip);
	/* 16 readable rows at least (qamx.c: k4 < 16 reads 16) */
	_Alignas(64) uint8_t panel[DWT_AMX_K4 * MI_QNR * 4];
	_Alignas(64) int32_t acc[32 * MI_QNR];
	const bool sat = ep->out_c4 && rq_sat_ok(ep, ep->mult, s->oc);
	struct rq_sat rs;

	rq_sat_set(&rs, ep);

	for (int v = v0; v < v1; v += 2) {
		for (int h = 0; h < 2; h++) {
			int vv = v + h < v1 ? v + h : v; /* past v1: computed, not stored */
			size_t e0 = (size_t)t->ent[vv] * t->ng;
			int32_t dv = t->delta[vv];

			for (int ci = 0; ci < s->c; ci++)
				for (int g = 0; g < t->ng; g++) {
					size_t e = e0 + g;
					__m512i x = _mm512_maskz_loadu_epi8(t->lmask[e], j->x + ci * plane +
										 t->base[e] + dv);

					x = _mm512_xor_si512(x, fv);
					_mm512_store_si512(panel + ((size_t)(ci * t->ng + g) * MI_QNR + 16 * h) * 4,
							   _mm512_mask_permutexvar_epi8(
								   zxv, t->pmask[e],
								   _mm512_load_si512(t->idx + e * 64), x));
				}
		}
		mi_qamx_tile(t->aw, 0, 0, s->oc > 16 ? 2 : 1, panel, MI_QNR * 4, NULL, 0, acc);
		for (int h = 0; h < 2 && v + h < v1; h++) {
			int p0 = t->p0[v + h], n = t->p0[v + h + 1] - p0;

			n = n < 16 ? n : 16;
			if (sat) { /* dwt_dense_body's C4 stores */
				__mmask16 m = (__mmask16)((1u << n) - 1);
				const int32_t *a = acc + 16 * h;
				const float *mo = ep->mult;

#define MI_DWT_ACC(o) _mm512_add_epi32(_mm512_load_si512(a + (o) * MI_QNR), \
				       _mm512_set1_epi32(ep->comp[o]))
				for (int o = 0; o < s->oc; o += 4)
					_mm512_mask_storeu_epi32(
						j->y + ((size_t)(o / 4) * npix + p0) * 4, m,
						rq_sat_c4(&rs, MI_DWT_ACC(o), MI_DWT_ACC(o + 1),
							  MI_DWT_ACC(o + 2), MI_DWT_ACC(o + 3), mo[o],
							  mo[o + 1], mo[o + 2], mo[o + 3]));
#undef MI_DWT_ACC
				continue;
			}
			epi_avx512(acc + 16 * h, MI_QNR, s->oc, n, ep, 0,
				   ep->out_c4 ? j->y + (size_t)p0 * 4 : j->y + (size_t)p0 * es, npix);
		}
	}
}

/* The gather-table path applies (AVX-512 VBMI, requantized output). */
static bool dwt_use(const struct mi_qconv *cv, int isa, const struct mi_qepi *ep)
{
	return cv->dwt && dwtab_on() && isa == MI_QISA_AVX512 && have_vbmi() &&
	       (ep->mode == MI_QOUT_U8 || ep->mode == MI_QOUT_S8 ||
		(cv->depthwise && ep->mode == MI_QOUT_F32 && !ep->out_c4));
}

static void dwt_run(const struct mi_qconv *cv, const uint8_t *x, uint8_t zx, uint8_t flip,
		    const struct mi_qepi *ep, uint8_t *y)
{
	if (!cv->depthwise) {
		struct dwt_job j = { cv, x, zx, flip, ep, y, 1 };

		par_for((cv->dwt->npv + 7) / 8,
			cv->dwt->aw && mi_quant_amx() ? dwt_amx_item : dwt_dense_item, &j);
		return;
	}
	int nq = (cv->s.c + 3) / 4, nt = call_threads > 0 ? call_threads : par_threads;
	struct dwt_job j = { cv, x, zx, flip, ep, y, 1 };

	/* maps of 512+ pixels: one pixel range per thread (few channel quads:
	 * more); smaller maps (cheap to share between the cores, costly to cut
	 * in pixels) split the pixels only when they have few quads */
	if (nt > 1 && (nq < 4 * nt || cv->dwt->npv >= 32)) {
		j.nsplit = nq < 4 * nt ? (4 * nt + nq - 1) / nq : nt;
		j.nsplit = (j.nsplit + nt - 1) / nt * nt;
		j.nsplit = j.nsplit < cv->dwt->npv ? j.nsplit : cv->dwt->npv;
	}
	par_for(nq * j.nsplit, dwt_item, &j);
}

/* MI_QUANT_DWPREP=0: AVX2 depthwise planes padded by memcpy/memset per
 * row (A/B). */
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
static bool dw_fused(const struct conv_job *j)
{
	const struct mi_qconv_shape *s = &j->cv->s;

	return j->dw_isa == MI_QISA_AVX512 && s->dw == 1 && (s->sw == 1 || s->sw == 2) &&
	       dw_rq_mode(j->ep);
}

/* The channel runs dw_chan_vbmi on the unpadded input (no dw_prep_item). */
static bool dw_direct(const struct conv_job *j)
{
	const struct mi_qconv_shape *s = &j->cv->s;

	return j->dw_isa == MI_QISA_AVX512 && have_vbmi() && !j->flip && s->dw == 1 &&
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
	size_t es = out_elem(j->ep->mode);
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
static void dw_quad_item(void *arg, int item, int tid)
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

static bool dwq_use(const struct conv_job *j)
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
	__m256 f = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(a, comp)), mult);
	__m256i qv =
		_mm256_add_epi32(_mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(f, lo), hi)), zy);

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
	      const struct mi_qepi *ep, uint8_t *out, bool reuse, bool tail, bool unroll)
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
	for (; oy + 4 <= oh && reuse; oy += 4) {
		const uint8_t *r0 = xq + (size_t)oy * sh * wp * 4;

		for (int x = 0; x < ow; x += 2) {
			__m256i a[4];

			if (sh == 1)
				dwq_avx2_rows4(r0 + (size_t)sw * x * 4, wp, wv, kh, np, 1, sel, a);
			else
				dwq_avx2_rows4(r0 + (size_t)sw * x * 4, wp, wv, kh, np, 2, sel, a);
			/* 3x3: the four rows' stores unrolled keep a[] in
			 * registers (56x56-112x112 maps ~9% faster; 5x5 kernels
			 * ~5% slower so, register pressure; MI_QUANT_DWQU=0: a
			 * loop) */
			if (kh <= 3 && unroll) {
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
	/* the last 1-3 rows in one step, tap pairs shared (dwqt_on) */
	if (reuse && tail && oy < oh) {
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
		oy = oh;
	}
	/* the last 1-3 rows: each row's taps alone */
	for (; oy < oh; oy += 4) {
		const uint8_t *r[4];

		for (int i = 0; i < 4; i++)
			r[i] = xq + (size_t)(oy + i < oh ? oy + i : oy) * sh * wp * 4;
		for (int x = 0; x < ow; x += 2) {
			__m256i a[4];

			for (int i = 0; i < 4; i++)
				a[i] = _mm256_setzero_si256();
			for (int ky = 0; ky < kh; ky++)
				for (int jp = 0; jp < np; jp++) {
					size_t off = ((size_t)ky * wp + (size_t)sw * x + 2 * jp) * 4;
					__m256i wt = wv[ky * np + jp];

					for (int i = 0; i < 4; i++) {
						__m256i p = _mm256_shuffle_epi8(
							_mm256_broadcastsi128_si256(_mm_loadu_si128(
								(const __m128i *)(r[i] + off))),
							sel);

						a[i] = _mm256_add_epi32(a[i], _mm256_madd_epi16(p, wt));
					}
				}
			for (int i = 0; i < 4 && oy + i < oh; i++)
				dwq_avx2_store(a[i], comp, mult, lo, hi, zy, lowb,
					       out + ((size_t)(oy + i) * ow + x) * 4, x + 1 < ow);
		}
	}
}

/* MI_QUANT_DWQR=0: dwq_item builds each output row's tap pairs alone (A/B) */
static int dwqr_cur = -1;

/* MI_QUANT_DWQT=0: the last oh % 4 rows of dwq_item build their tap pairs
 * per row, with the sums in memory (A/B) */
MI_QUANT_SWITCH(dwqt, "MI_QUANT_DWQT")

/* MI_QUANT_DWQW=0: dwq_item builds its weight pairs by scalar stores into
 * an int16 array copied to each vector (a store-forwarding stall per
 * vector: ~7% of a 7x7 map's quad) (A/B) */
MI_QUANT_SWITCH(dwqw, "MI_QUANT_DWQW")

/* MI_QUANT_DWQU=0: dwq_item's 3x3 steps store their four rows in a loop
 * (a[] in memory) (A/B) */
MI_QUANT_SWITCH(dwqu, "MI_QUANT_DWQU")

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

/* dwq_wpairs_avx2's vectors by scalar stores (MI_QUANT_DWQW=0) */
__attribute__((target("avx2"))) static void dwq_wpairs_scalar(const int8_t *w, int kh, int kw,
							       __m256i *wv)
{
	int np = (kw + 1) / 2;

	for (int ky = 0; ky < kh; ky++)
		for (int jp = 0; jp < np; jp++) {
			int16_t p[16];

			for (int l = 0; l < 8; l++) {
				const int8_t *wc = w + (size_t)(l % 4) * kh * kw + ky * kw;
				int kx = 2 * jp;

				p[2 * l] = wc[kx];
				p[2 * l + 1] = kx + 1 < kw ? wc[kx + 1] : 0;
			}
			memcpy(&wv[ky * np + jp], p, sizeof(p));
		}
}

__attribute__((target("avx2,fma"))) static void dwq_item(void *arg, int q, int tid)
{
	struct conv_job *j = arg;
	const struct mi_qconv_shape *s = &j->cv->s;
	const struct mi_qepi *ep = j->ep;
	/* the quad's four planes' room in xi (4 hp wp + 256 bytes) */
	uint8_t *xq = j->xi + (size_t)4 * q * (j->hp * j->wp + 64);
	uint8_t *out = j->y + (size_t)q * s->oh * s->ow * 4;
	const int8_t *w = j->cv->dww + (size_t)4 * q * s->kh * s->kw;
	__m256i wv[MI_QDW_KMAX * ((MI_QDW_KMAX + 1) / 2)];

	bool reuse = mi_quant_switch(&dwqr_cur, "MI_QUANT_DWQR");
	bool tail = dwqt_on(), unroll = dwqu_on();

	(void)tid;
	dwq_prep_avx2(j, q, xq);
	if (dwqw_on())
		dwq_wpairs_avx2(w, s->kh, s->kw, wv);
	else
		dwq_wpairs_scalar(w, s->kh, s->kw, wv);
	int c = 4 * q;
	__m256i comp = _mm256_setr_epi32(ep->comp[c], ep->comp[c + 1], ep->comp[c + 2],
					 ep->comp[c + 3], ep->comp[c], ep->comp[c + 1],
					 ep->comp[c + 2], ep->comp[c + 3]);
	__m256 mult = _mm256_setr_ps(ep->mult[c], ep->mult[c + 1], ep->mult[c + 2],
				     ep->mult[c + 3], ep->mult[c], ep->mult[c + 1],
				     ep->mult[c + 2], ep->mult[c + 3]);

	if (s->kh == 3 && s->kw == 3 && s->sw == 1)
		dwq_avx2_body(xq, j->wp, wv, 3, 3, s->oh, s->ow, s->sh, 1, comp, mult, ep, out,
			      reuse, tail, unroll);
	else if (s->kh == 3 && s->kw == 3)
		dwq_avx2_body(xq, j->wp, wv, 3, 3, s->oh, s->ow, s->sh, 2, comp, mult, ep, out,
			      reuse, tail, unroll);
	else if (s->kh == 5 && s->kw == 5 && s->sw == 1)
		dwq_avx2_body(xq, j->wp, wv, 5, 5, s->oh, s->ow, s->sh, 1, comp, mult, ep, out,
			      reuse, tail, unroll);
	else if (s->kh == 5 && s->kw == 5)
		dwq_avx2_body(xq, j->wp, wv, 5, 5, s->oh, s->ow, s->sh, 2, comp, mult, ep, out,
			      reuse, tail, unroll);
	else if (s->sw == 1)
		dwq_avx2_body(xq, j->wp, wv, s->kh, s->kw, s->oh, s->ow, s->sh, 1, comp, mult, ep,
			      out, reuse, tail, unroll);
	else
		dwq_avx2_body(xq, j->wp, wv, s->kh, s->kw, s->oh, s->ow, s->sh, 2, comp, mult, ep,
			      out, reuse, tail, unroll);
}

/*
 * 1x1 convs on a one-pixel map (the squeeze-excitation blocks' two FCs):
 * the packed weights are the GEMM's (k = input channel), so mi_qgemm's
 * GEMV kernel applies, with no reorder and no 32-pixel panel for one
 * pixel.  Planar and C4 inputs and outputs of one pixel are the same
 * bytes (channel c at byte c).
 */
static bool conv_gemv_use(const struct mi_qconv *cv, int isa)
{
	const struct mi_qconv_shape *s = &cv->s;

	return gemv_isa(isa) && !cv->depthwise && s->group == 1 && s->kh == 1 &&
	       s->kw == 1 && s->h == 1 && s->w == 1 && s->oh == 1 && s->ow == 1;
}

/* a: c4 * 4 bytes of room (the workspace's reorder buffer) */
static void conv_gemv(const struct mi_qconv *cv, const uint8_t *x, uint8_t flip,
		      const struct mi_qepi *ep, void *y, uint8_t *a, int isa)
{
	const struct mi_qweights *w = &cv->w;
	struct gemv_job v = { .w = w, .a = a, .ep = ep, .y = y,
			      .epi = kernels_for(isa, &cv->w).epi, .isa = isa };
	int nt = call_threads > 0 ? call_threads : par_threads;

	/* the padding channels' weights are 0: any byte there */
	for (int c = 0; c < cv->s.c; c++)
		a[c] = x[c] ^ flip;
	memset(a + cv->s.c, 0, (size_t)w->k4 * 4 - cv->s.c);
	v.nchunk = 2 * nt < w->nblk ? 2 * nt : w->nblk;
	v.bpc = (w->nblk + v.nchunk - 1) / v.nchunk;
	v.nchunk = (w->nblk + v.bpc - 1) / v.bpc;
	par_for(v.nchunk, gemv_item, &v);
}

int mi_qconv_run(const struct mi_qconv *cv, const void *x, bool x_signed,
		 int zx, const struct mi_qepi *ep, void *y, void *ws,
		 unsigned int flags)
{
	const struct mi_qconv_shape *s = &cv->s;
	int isa = mi_quant_isa();

	if ((flags & MI_QCONV_IN_C4) && cv->depthwise &&
	    !(ep->out_c4 && mi_qconv_dw_c4(cv, ep)))
		return -EINVAL;
	if ((flags & MI_QCONV_IN_C4) && !cv->depthwise && (s->c / s->group) % 4)
		return -EINVAL;
	if (ep->out_c4 && ((ep->mode != MI_QOUT_U8 && ep->mode != MI_QOUT_S8) ||
			   s->oc % 4 || (!cv->depthwise && (s->oc / s->group) % 4)))
		return -EINVAL;
	struct conv_job j = {
		.cv = cv, .xsrc = x, .flip = x_signed ? 0x80 : 0,
		.zx = (uint8_t)(x_signed ? zx + 128 : zx), .ep = ep, .y = y,
		.k = conv_kernels(isa, &cv->w), .dw_isa = isa,
		.in_c4 = flags & MI_QCONV_IN_C4,
		/* 1x1 without pads, any stride: panels read the C4 input (a
		 * strided 1x1 conv would reorder 4x the pixels it uses) */
		.in_direct = (flags & MI_QCONV_IN_C4) && s->kh == 1 && s->kw == 1 &&
			     !(s->pt | s->pl | s->pb | s->pr) && !x_signed,
		.amx = isa == MI_QISA_AVX512 && cv->w.amx && mi_quant_amx(),
	};
	void *own = NULL;

	if (!ws) {
		own = ws = aligned_alloc(64, (mi_qconv_workspace(cv) + 63) & ~(size_t)63);
		if (!own)
			return -ENOMEM;
	}
	/* fp32 blocked by 8 from the tile epilogues: the dense GEMM path
	 * without AMX, output blocks within a group's channels */
	if (flags & MI_QCONV_OUT_BLK8) {
		bool wino = cv->wino && isa == MI_QISA_AVX2 && mi_qwino_on();

		if (!blkepi_on() || ep->mode != MI_QOUT_F32 || ep->out_c4 || j.amx || wino ||
		    conv_gemv_use(cv, isa) || cv->depthwise ||
		    (dwt_use(cv, isa, ep) && !(flags & MI_QCONV_IN_C4)) ||
		    (s->group > 1 && cv->w.ocg % 8))
			return -EOPNOTSUPP;
		j.blk8 = true;
	}
	j.hp = s->h + s->pt + s->pb;
	j.wp = s->w + s->pl + s->pr;
	j.xi = (uint8_t *)(((uintptr_t)ws + 63) & ~(uintptr_t)63);
	j.ws = j.xi + ((conv_xi_bytes(cv) + 63) & ~(size_t)63);
	j.ws_per = conv_ws_per_thread(cv);
	if (cv->wino && isa == MI_QISA_AVX2 && mi_qwino_on()) {
		mi_qwino_run(cv->wino, x, j.in_c4, j.flip, j.zx, ep, y, ws, epi_avx2, par_for,
			     call_threads > 0 ? call_threads : par_threads);
	} else if (conv_gemv_use(cv, isa)) {
		conv_gemv(cv, x, j.flip, ep, y, j.xi, isa);
	} else if (dwt_use(cv, isa, ep) && !(flags & MI_QCONV_IN_C4)) {
		dwt_run(cv, x, j.zx, j.flip, ep, y);
	} else if (cv->depthwise && dwq_use(&j)) {
		par_for(s->c / 4, dwq_item, &j);
	} else if (cv->depthwise) {
		j.dw_defer = ep->out_c4 && !dw_fused(&j);
		par_for((s->c + 3) / 4, dw_quad_item, &j);
	} else {
		j.amx_rows = j.amx && !cv->direct1x1 && !j.in_direct && s->sh == 1 && s->sw == 1 &&
			     cv->c4 % 16 == 0 && s->kh * s->kw <= AMX_ROWS_TAPS;
		j.npanel = ((j.amx_rows ? s->oh * (int)j.wp : s->oh * s->ow) + MI_QNR - 1) / MI_QNR;
		/* RGB first convs: planar planes, conv_rgb_panel's im2col
		 * (the split panel, or tile_avx2b's in place) */
		if (cv->rgb && isa == MI_QISA_AVX2 && !j.in_c4 && rgb_on()) {
			struct kernels kr = conv_kernels(isa, cv->rgb);

			j.rgb = kr.split || kr.tile == tile_avx2b;
			if (j.rgb)
				j.k = kr;
		}
		if (j.rgb)
			par_for(s->c, conv_rgb_prep_item, &j);
		else if (!j.in_direct)
			par_for(s->group * cv->c4, conv_prep_item, &j);
		/* few pixel panels for the threads (7x7 and 14x14 maps): each
		 * panel's output blocks are split in chunks too. Only for convs
		 * reading their C4 input directly or AMX rows: a chunk would
		 * redo the panel's im2col (3x3 convs on 13x13 maps at 2 threads
		 * got ~4% slower).  AMX chunks hold whole pairs of blocks. */
		int items = s->group * j.npanel, nt = call_threads > 0 ? call_threads : par_threads;

		j.nchunk = 1;
		j.bpc = cv->w.nblk;
		if (nt > 1 && (flags & MI_QCONV_CHAN) && j.in_direct && cv->direct1x1 &&
		    cv->w.nblk >= 2 * nt) {
			/* one chunk of output channels per thread, every pixel:
			 * the thread's planes are what a channel-split reader
			 * (a depthwise conv on a small map) takes on that core */
			j.bpc = (cv->w.nblk + nt - 1) / nt;
			j.bpc += j.amx && j.bpc % 2;
			j.nchunk = (cv->w.nblk + j.bpc - 1) / j.bpc;
			j.chan = true;
		} else if (nt > 1 && items < 4 * nt && ((j.in_direct && cv->direct1x1) || j.amx_rows)) {
			/* ~8 items a thread where they stay over 1M
			 * multiply-adds and a pixel split is possible (items
			 * of 1/14 of a 14x14 map left one thread up to one
			 * item behind: ResNet-50 layer3's 1x1 convs) */
			int64_t macs = (int64_t)s->oc * s->oh * s->ow * (s->c / s->group);
			int tgt = items >= 2 * nt && macs >= ((int64_t)8 << 20) * nt && chunk8_on() ?
					  8 : 4;

			j.nchunk = (tgt * nt + items - 1) / items;
			j.nchunk = j.nchunk < cv->w.nblk ? j.nchunk : cv->w.nblk;
			j.bpc = (cv->w.nblk + j.nchunk - 1) / j.nchunk;
			j.bpc += j.amx && j.bpc % 2 && j.bpc < cv->w.nblk;
			j.nchunk = (cv->w.nblk + j.bpc - 1) / j.bpc;
			/* under 2 panels per thread (maps up to ~96 pixels) a
			 * pixel split cannot balance (32 + 17 pixels on 7x7):
			 * chunk-major, each thread a range of output channels
			 * (and of the weights, which stay in its cache) */
			j.chan = items < 2 * nt;
		}
		mi_quant_par_align(j.chan ? 1 : 2 * j.nchunk); /* pairs of panels: planar lines */
		par_for(items * j.nchunk, j.amx_rows ? conv_amx_rows_item : conv_gemm_item, &j);
	}
	free(own);
	return 0;
}
