// SPDX-License-Identifier: MIT
/*
 * Exact int8 Winograd F(2x2, 3x3) for 3x3 stride-1 convs on AVX2 (no
 * VNNI): 16 multiplies per 2x2 output tile and channel instead of 36.
 *
 * Integer transforms, no fractions: with 2G = [2 0 0; 1 1 1; 1 -1 1; 0 0 2]
 * the weight transform U = (2G) g (2G)^T is 4 G g G^T, integer, |U| <=
 * 9 * 128 = 1152; the input transform V = B^T d B (entries 0, +-1) of the
 * uint8 input (int8 flipped by 0x80, pads = zx, as the direct path sees
 * it) has |V| <= 4 * 255 = 1020.  M = sum over channels of U . V by
 * vpmaddwd on channel pairs (int16 x int16 -> int32, no saturation: the
 * -32768 pair never occurs), Y = A^T M A (entries 0, +-1) = 4 x the
 * direct path's int32 sum sum_k w[k] x_u8[k].  vpaddd/vpmaddwd are ring
 * arithmetic mod 2^32, so Y is that exactly whenever 4 x the sum fits in
 * int32: mi_qwino_build checks 4 * 255 * max_o sum |w_o| < 2^31 (else
 * NULL: the direct path).  Y >> 2 then goes through the direct path's
 * epilogue (comp, requantization, every output mode and layout), so the
 * output bytes equal the direct path's and the generic ISA's.
 *
 * Work item: a block of rb tile rows (2 rb output rows, all their
 * tiles) and a chunk of output channels.  The item transforms the
 * block's input (all channels, int16, [16 positions][channel pairs]
 * [tiles][2]: sized to stay in L2), then per 4 output channels runs the
 * 16 GEMMs (4 channels x 16 tiles of int32 sums in registers, like
 * tile_avx2w), the output transform into 4 rows of sums of the block's
 * output pixels (raster order) and the epilogue on them.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <immintrin.h>

#include "quant/quant.h"

#define WR 4  /* output channels per GEMM tile */
#define WT 16 /* tiles per GEMM tile */
#define MCH (16 * 8) /* GEMM sums of 8 tiles x 16 positions (int32) */
#ifndef WOB
#define WOB 2 /* GEMM tiles of output channels per pass over the input */
#endif

struct mi_qwino {
	int c, oc, h, w, oh, ow, pt, pl;
	int c4n;      /* channel quads: ceil(c / 4) */
	int c2n;      /* channel pairs of the transformed input: 2 * c4n */
	int nob;      /* output blocks of WR channels */
	int th, tw;   /* tile rows, tiles per row */
	int rb, nb;   /* tile rows per block, blocks */
	int ldv;      /* tiles per row of V (per channel pair) */
	int lk, lp;   /* staging: even/odd row length, padded input row length */
	int npb;      /* output pixels of a full block */
	size_t v_bytes, m_bytes, y_bytes, p_bytes, e_bytes, ws_per;
	int16_t *u;   /* [nob][16][c2n][WR][2] */
};

static int wino_cur = -1;

int mi_quant_set_wino(int on)
{
	return wino_cur = !!on;
}

bool mi_qwino_on(void)
{
	return wino_cur != 0;
}

static int rup(int a, int b)
{
	return (a + b - 1) / b * b;
}

static size_t rup64(size_t a)
{
	return (a + 63) & ~(size_t)63;
}

bool mi_qwino_fits(const struct mi_qconv_shape *s)
{
	return s->group == 1 && s->kh == 3 && s->kw == 3 && s->sh == 1 && s->sw == 1 &&
	       s->dh == 1 && s->dw == 1 && s->c >= MI_QWINO_MIN_C &&
	       s->oc >= MI_QWINO_MIN_OC && s->oh == s->h + s->pt + s->pb - 2 &&
	       s->ow == s->w + s->pl + s->pr - 2;
}

/* Transformed input of one block in at most ~this many bytes (Zen 3: 512
 * KB L2 per core, shared with the weights of a position and the sums). */
#define WINO_V_BUDGET (256 * 1024)

static size_t v_budget = WINO_V_BUDGET;

void mi_qwino_test_budget(size_t bytes)
{
	v_budget = bytes ? bytes : WINO_V_BUDGET;
}

/* GEMM work of n tiles in 16-tile GEMM tiles, the last up to 8 in an
 * 8-tile one (wino_gemm8, ~10% slower per tile), x 10 */
static int gemm_cost(int n)
{
	int r = n % WT;

	return n / WT * WT * 10 + (r > 8 ? WT * 10 : r ? 88 : 0);
}

struct mi_qwino *mi_qwino_build(const struct mi_qconv_shape *s, mi_qw_get get, const void *ctx)
{
	struct mi_qwino *wn;
	int64_t smax = 0;
	int8_t *wt;

	if (!mi_qwino_fits(s))
		return NULL;
	/* the weights once (get() is a slow callback) */
	wt = malloc((size_t)s->oc * s->c * 9);
	if (!wt)
		return NULL;
	for (int o = 0; o < s->oc; o++) {
		int64_t sum = 0;

		for (int k = 0; k < s->c * 9; k++) {
			int v = get(ctx, 0, o, k);

			wt[(size_t)o * s->c * 9 + k] = (int8_t)v;
			sum += v < 0 ? -v : v;
		}
		smax = sum > smax ? sum : smax;
	}
	/* 4 x the sum of w x_u8 (x_u8 <= 255) must fit in int32 */
	wn = smax * 255 * 4 < ((int64_t)1 << 31) ? calloc(1, sizeof(*wn)) : NULL;
	if (!wn) {
		free(wt);
		return NULL;
	}
	wn->c = s->c;
	wn->oc = s->oc;
	wn->h = s->h;
	wn->w = s->w;
	wn->oh = s->oh;
	wn->ow = s->ow;
	wn->pt = s->pt;
	wn->pl = s->pl;
	wn->c4n = (s->c + 3) / 4;
	wn->c2n = 2 * wn->c4n;
	wn->nob = (s->oc + WR - 1) / WR;
	wn->th = (s->oh + 1) / 2;
	wn->tw = (s->ow + 1) / 2;

	/* tile rows per block: the transformed input within the budget,
	 * the fewest tiles padded to GEMM tiles of WT or 8 (whole tile rows
	 * per block: 28 tiles per row of a 56x56 map in blocks of 4 rows, not
	 * 3), then the fewest blocks (each streams all of U) */
	size_t per_tile = (size_t)16 * wn->c2n * 4;
	int best = -1;

	for (int rb = 1; rb <= wn->th; rb++) {
		int nb = (wn->th + rb - 1) / rb, last = wn->th - (nb - 1) * rb;
		int pad = (nb - 1) * gemm_cost(rb * wn->tw) + gemm_cost(last * wn->tw);

		if (rb > 1 && per_tile * rup(rb * wn->tw, WT) > v_budget)
			break;
		if (best < 0 || pad <= best) {
			best = pad;
			wn->rb = rb;
		}
	}
	wn->nb = (wn->th + wn->rb - 1) / wn->rb;

	int nt = wn->rb * wn->tw;

	wn->ldv = rup(nt, WT);
	/* staging: pairs k and k + 1 of 8-tile chunks read up to rup(tw, 8) */
	wn->lk = rup(rup(wn->tw, 8) + 1, 16);
	wn->lp = 2 * wn->lk;
	wn->npb = 2 * wn->rb * wn->ow;
	wn->v_bytes = rup64((size_t)16 * wn->c2n * wn->ldv * 4);
	wn->m_bytes = rup64((size_t)WOB * WR * 2 * MCH * 4);
	wn->y_bytes = rup64((size_t)WOB * WR * wn->npb * 4 + 64 * 4);
	wn->p_bytes = rup64((size_t)4 * wn->lp * 2); /* C4 row; planar: 4 rows + even/odd */
	wn->e_bytes = rup64((size_t)4 * 2 * 2 * 2 * wn->lk);
	wn->ws_per = wn->v_bytes + wn->m_bytes + wn->y_bytes + wn->p_bytes + wn->e_bytes +
		     rup64(16 * 16 * 2);

	size_t ub = (size_t)16 * wn->nob * wn->c2n * WR * 2 * sizeof(int16_t);

	wn->u = aligned_alloc(64, rup64(ub));
	if (!wn->u) {
		free(wt);
		free(wn);
		return NULL;
	}
	memset(wn->u, 0, rup64(ub));
	for (int o = 0; o < s->oc; o++)
		for (int c = 0; c < s->c; c++) {
			int g[3][3], t[4][3];

			for (int k = 0; k < 9; k++)
				g[k / 3][k % 3] = wt[((size_t)o * s->c + c) * 9 + k];
			/* t = (2G) g */
			for (int j = 0; j < 3; j++) {
				t[0][j] = 2 * g[0][j];
				t[1][j] = g[0][j] + g[1][j] + g[2][j];
				t[2][j] = g[0][j] - g[1][j] + g[2][j];
				t[3][j] = 2 * g[2][j];
			}
			/* u = t (2G)^T */
			for (int i = 0; i < 4; i++) {
				int u[4] = { 2 * t[i][0], t[i][0] + t[i][1] + t[i][2],
					     t[i][0] - t[i][1] + t[i][2], 2 * t[i][2] };

				for (int jj = 0; jj < 4; jj++) {
					size_t at = ((((size_t)(o / WR) * 16 + i * 4 + jj) *
						      wn->c2n + c / 2) * WR + o % WR) * 2 + c % 2;

					wn->u[at] = (int16_t)u[jj];
				}
			}
		}
	free(wt);
	return wn;
}

void mi_qwino_free(struct mi_qwino *wn)
{
	if (!wn)
		return;
	free(wn->u);
	free(wn);
}

size_t mi_qwino_workspace(const struct mi_qwino *wn, int nthreads)
{
	return wn->ws_per * nthreads + 64;
}

struct wino_job {
	const struct mi_qwino *wn;
	const uint8_t *x;
	bool in_c4;
	uint8_t flip, zx;
	const struct mi_qepi *ep;
	uint8_t *y;
	uint8_t *ws;
	mi_qepi_fn epi;
	int nchunk, bpc; /* output blocks in nchunk chunks of bpc */
	/* blocks of tile rows: nbk; block b rows [b * rb, + rb) clipped to
	 * th, or with spread set [b * th / nbk, (b + 1) * th / nbk) (rows
	 * balanced, the longer blocks spread out: wino_split) */
	int nbk, rb;
	bool spread;
};

static void wino_rows(const struct mi_qwino *wn, const struct wino_job *j, int blk, int *ty0,
		      int *ty1)
{
	if (j->spread) {
		*ty0 = (int)((int64_t)blk * wn->th / j->nbk);
		*ty1 = (int)((int64_t)(blk + 1) * wn->th / j->nbk);
	} else {
		*ty0 = blk * j->rb;
		*ty1 = *ty0 + j->rb < wn->th ? *ty0 + j->rb : wn->th;
	}
}

/* 32 bytes of padded-row pixels -> 16 even-column bytes, 16 odd ones */
__attribute__((target("avx2"))) static void deint_planar(const uint8_t *p, int lp, uint8_t *e,
							 uint8_t *o)
{
	const __m256i sh = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15,
					    0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);

	for (int x = 0; x < lp; x += 32) {
		__m256i v = _mm256_permute4x64_epi64(
			_mm256_shuffle_epi8(_mm256_loadu_si256((const void *)(p + x)), sh), 0xd8);

		_mm_storeu_si128((void *)(e + x / 2), _mm256_castsi256_si128(v));
		_mm_storeu_si128((void *)(o + x / 2), _mm256_extracti128_si256(v, 1));
	}
}

/*
 * A C4 row (lp pixels x 4 channels c0 c1 c2 c3) -> the staging of its two
 * channel pairs: pair A = (c0, c1), B = (c2, c3), each pixel's pair 2
 * bytes; even pixels at e[0] (A) / e[2] (B), odd ones at e[1] / e[3].
 */
__attribute__((target("avx2"))) static void deint_c4(const uint8_t *p, int lp, uint8_t *const e[4])
{
	/* per lane (pixels a b c d, words A B): Aa Ac | Ab Ad | Ba Bc | Bb Bd */
	const __m256i s1 = _mm256_setr_epi8(0, 1, 8, 9, 4, 5, 12, 13, 2, 3, 10, 11, 6, 7, 14, 15,
					    0, 1, 8, 9, 4, 5, 12, 13, 2, 3, 10, 11, 6, 7, 14, 15);
	const __m256i pm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);

	for (int x = 0; x < lp; x += 8) {
		__m256i v = _mm256_permutevar8x32_epi32(
			_mm256_shuffle_epi8(_mm256_loadu_si256((const void *)(p + (size_t)x * 4)), s1),
			pm);
		__m128i l0 = _mm256_castsi256_si128(v), l1 = _mm256_extracti128_si256(v, 1);

		/* pair k = x / 2 at byte 2k = x */
		_mm_storel_epi64((void *)(e[0] + x), l0);
		_mm_storel_epi64((void *)(e[1] + x), _mm_unpackhi_epi64(l0, l0));
		_mm_storel_epi64((void *)(e[2] + x), l1);
		_mm_storel_epi64((void *)(e[3] + x), _mm_unpackhi_epi64(l1, l1));
	}
}

/* n bytes src ^ flip -> dst */
__attribute__((target("avx2"))) static void copy_flip(uint8_t *dst, const uint8_t *src, size_t n,
						      uint8_t flip)
{
	if (!flip) {
		memcpy(dst, src, n);
		return;
	}
	__m256i f = _mm256_set1_epi8((char)flip);
	size_t i = 0;

	for (; i + 32 <= n; i += 32)
		_mm256_storeu_si256((void *)(dst + i),
				    _mm256_xor_si256(_mm256_loadu_si256((const void *)(src + i)), f));
	for (; i < n; i++)
		dst[i] = src[i] ^ flip;
}

/* staging row of slot sl, channel pair pr (0: channels 4 cq, 4 cq + 1;
 * 1: the next two), even (eo 0) or odd (1) padded columns: lk byte pairs */
static inline uint8_t *stage_at(const struct mi_qwino *wn, uint8_t *es, int sl, int pr, int eo)
{
	return es + (size_t)((sl * 2 + pr) * 2 + eo) * 2 * wn->lk;
}

/*
 * Stage input row iy of channel quad cq into slot sl: per channel pair,
 * the even and odd columns of the padded row (x = ix + pl; pads and rows
 * outside the image: zx), each column's two channels side by side, so
 * that the transform's int16 lanes alternate the pair's channels as the
 * GEMM's vpmaddwd wants them.
 */
__attribute__((target("avx2"))) static void wino_stage(const struct wino_job *j, int cq, int iy,
						       int sl, uint8_t *ps, uint8_t *es)
{
	const struct mi_qwino *wn = j->wn;
	size_t hw = (size_t)wn->h * wn->w;
	int lp = wn->lp, w = wn->w, pl = wn->pl;
	bool in = iy >= 0 && iy < wn->h;
	uint8_t *e[4] = { stage_at(wn, es, sl, 0, 0), stage_at(wn, es, sl, 0, 1),
			  stage_at(wn, es, sl, 1, 0), stage_at(wn, es, sl, 1, 1) };

	if (j->in_c4) {
		if (!in) {
			for (int q = 0; q < 4; q++)
				memset(e[q], j->zx, (size_t)2 * wn->lk);
			return;
		}
		memset(ps, j->zx, (size_t)pl * 4);
		copy_flip(ps + (size_t)pl * 4, j->x + ((size_t)cq * hw + (size_t)iy * w) * 4,
			  (size_t)w * 4, j->flip);
		memset(ps + (size_t)(pl + w) * 4, j->zx, (size_t)(lp - pl - w) * 4);
		deint_c4(ps, lp, e);
		return;
	}
	/* planar: each channel's even/odd columns, then byte-interleaved
	 * in pairs */
	uint8_t *eo = ps + (size_t)4 * lp; /* [4 channels][even, odd][lk] */

	for (int q = 0; q < 4; q++) {
		int ch = cq * 4 + q;
		uint8_t *p = ps + (size_t)q * lp;

		if (!in || ch >= wn->c) {
			memset(p, j->zx, lp);
		} else {
			memset(p, j->zx, pl);
			copy_flip(p + pl, j->x + (size_t)ch * hw + (size_t)iy * w, w, j->flip);
			memset(p + pl + w, j->zx, lp - pl - w);
		}
		deint_planar(p, lp, eo + (size_t)q * 2 * wn->lk, eo + (size_t)q * 2 * wn->lk + wn->lk);
	}
	for (int pr = 0; pr < 2; pr++)
		for (int h = 0; h < 2; h++) {
			const uint8_t *a = eo + (size_t)(2 * pr) * 2 * wn->lk + h * wn->lk;
			const uint8_t *b = a + (size_t)2 * wn->lk;
			uint8_t *d = e[pr * 2 + h];

			for (int k = 0; k < wn->lk; k += 16) {
				__m128i va = _mm_loadu_si128((const void *)(a + k));
				__m128i vb = _mm_loadu_si128((const void *)(b + k));

				_mm_storeu_si128((void *)(d + 2 * k), _mm_unpacklo_epi8(va, vb));
				_mm_storeu_si128((void *)(d + 2 * k + 16), _mm_unpackhi_epi8(va, vb));
			}
		}
}

/*
 * B^T d B of one channel pair at tiles k..k+7 of a tile row (int16 lanes:
 * tile, channel of the pair): rows[r] = the staging of input row r of the
 * tiles (even columns, odd lk pairs later); position p = 4 i + jj goes to
 * d + p * ps.
 */
__attribute__((target("avx2"))) static inline void
wino_in8(uint8_t *const rows[4], int lk, int k, int16_t *d, size_t ps)
{
#define MI_W_LD(r, odd, off)                                                   \
	_mm256_cvtepu8_epi16(_mm_loadu_si128(                                  \
		(const void *)(rows[r] + (size_t)(odd) * 2 * lk + 2 * (k + (off)))))
#define MI_W_ROW(dst, odd, off)                                                \
	do {                                                                   \
		if (i == 0)                                                    \
			dst = _mm256_sub_epi16(MI_W_LD(0, odd, off), MI_W_LD(2, odd, off)); \
		else if (i == 1)                                               \
			dst = _mm256_add_epi16(MI_W_LD(1, odd, off), MI_W_LD(2, odd, off)); \
		else if (i == 2)                                               \
			dst = _mm256_sub_epi16(MI_W_LD(2, odd, off), MI_W_LD(1, odd, off)); \
		else                                                           \
			dst = _mm256_sub_epi16(MI_W_LD(1, odd, off), MI_W_LD(3, odd, off)); \
	} while (0)
#pragma GCC unroll 4
	for (int i = 0; i < 4; i++) {
		/* row i of B^T d: d0 - d2, d1 + d2, d2 - d1, d1 - d3 */
		__m256i te, te1, to, to1;

		MI_W_ROW(te, 0, 0);
		MI_W_ROW(te1, 0, 1);
		MI_W_ROW(to, 1, 0);
		MI_W_ROW(to1, 1, 1);
		/* columns 2k .. 2k + 3: e[k], o[k], e[k + 1], o[k + 1] */
		_mm256_storeu_si256((void *)(d + (4 * i + 0) * ps), _mm256_sub_epi16(te, te1));
		_mm256_storeu_si256((void *)(d + (4 * i + 1) * ps), _mm256_add_epi16(to, te1));
		_mm256_storeu_si256((void *)(d + (4 * i + 2) * ps), _mm256_sub_epi16(te1, to));
		_mm256_storeu_si256((void *)(d + (4 * i + 3) * ps), _mm256_sub_epi16(to, to1));
	}
#undef MI_W_ROW
#undef MI_W_LD
}

/* Input transform of tile rows ty0..ty1-1 into v[16][c2n][ldv][2]. */
__attribute__((target("avx2"))) static void wino_in(const struct wino_job *j, int ty0, int ty1,
						    int16_t *v, uint8_t *ps, uint8_t *es,
						    int16_t *tmp)
{
	const struct mi_qwino *wn = j->wn;
	int tw = wn->tw, lk = wn->lk;
	size_t pstride = (size_t)wn->c2n * wn->ldv * 2; /* int16 per position */

	for (int cq = 0; cq < wn->c4n; cq++)
		for (int ty = ty0; ty < ty1; ty++) {
			/* input rows 2 ty - pt + 0..3 in slots (2 ty + r) % 4:
			 * the next tile row reuses two */
			for (int r = ty == ty0 ? 0 : 2; r < 4; r++)
				wino_stage(j, cq, 2 * ty - wn->pt + r, (2 * ty + r) % 4, ps, es);
			for (int pr = 0; pr < 2; pr++) {
				uint8_t *rows[4];
				int c2 = cq * 2 + pr;

				for (int r = 0; r < 4; r++)
					rows[r] = stage_at(wn, es, (2 * ty + r) % 4, pr, 0);
				for (int tx = 0; tx < tw; tx += 8) {
					int t0 = (ty - ty0) * tw + tx;

					/* past the block's tiles padded to WT: via tmp */
					if (t0 + 8 <= wn->ldv) {
						wino_in8(rows, lk, tx, v + ((size_t)c2 * wn->ldv + t0) * 2,
							 pstride);
						continue;
					}
					wino_in8(rows, lk, tx, tmp, 16);
					for (int p = 0; p < 16; p++)
						memcpy(v + p * pstride + ((size_t)c2 * wn->ldv + t0) * 2,
						       tmp + p * 16, (size_t)(wn->ldv - t0) * 4);
				}
			}
		}
}

/* sums over channel pairs of u x v: row r's tiles 0..7 at m + r * 2 * MCH,
 * tiles 8..15 MCH later */
__attribute__((target("avx2"))) static void wino_gemm(const int16_t *u, const int16_t *v,
						      int c2n, int ldv, int32_t *m)
{
	__m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00;
	__m256i c20 = c00, c21 = c00, c30 = c00, c31 = c00;
	const int32_t *up = (const int32_t *)(const void *)u;

#pragma GCC unroll 2
	for (int k = 0; k < c2n; k++) {
		__m256i b0 = _mm256_loadu_si256((const void *)v);
		__m256i b1 = _mm256_loadu_si256((const void *)(v + 16));
		__m256i w;

#define MI_W_R(r, x0, x1)                                                      \
	w = _mm256_set1_epi32(up[r]);                                          \
	x0 = _mm256_add_epi32(x0, _mm256_madd_epi16(b0, w));                   \
	x1 = _mm256_add_epi32(x1, _mm256_madd_epi16(b1, w))
		MI_W_R(0, c00, c01);
		MI_W_R(1, c10, c11);
		MI_W_R(2, c20, c21);
		MI_W_R(3, c30, c31);
#undef MI_W_R
		up += WR;
		v += (size_t)ldv * 2;
	}
	_mm256_storeu_si256((void *)m, c00);
	_mm256_storeu_si256((void *)(m + MCH), c01);
	_mm256_storeu_si256((void *)(m + 2 * MCH), c10);
	_mm256_storeu_si256((void *)(m + 3 * MCH), c11);
	_mm256_storeu_si256((void *)(m + 4 * MCH), c20);
	_mm256_storeu_si256((void *)(m + 5 * MCH), c21);
	_mm256_storeu_si256((void *)(m + 6 * MCH), c30);
	_mm256_storeu_si256((void *)(m + 7 * MCH), c31);
}

/* The same for 8 tiles (a block's last tiles past its 16-tile GEMM tiles:
 * 14x14 maps have 49 = 3 x 16 + 1) */
__attribute__((target("avx2"))) static void wino_gemm8(const int16_t *u, const int16_t *v,
						       int c2n, int ldv, int32_t *m)
{
	__m256i c0 = _mm256_setzero_si256(), c1 = c0, c2 = c0, c3 = c0;
	const int32_t *up = (const int32_t *)(const void *)u;

#pragma GCC unroll 2
	for (int k = 0; k < c2n; k++) {
		__m256i b = _mm256_loadu_si256((const void *)v);

		c0 = _mm256_add_epi32(c0, _mm256_madd_epi16(b, _mm256_set1_epi32(up[0])));
		c1 = _mm256_add_epi32(c1, _mm256_madd_epi16(b, _mm256_set1_epi32(up[1])));
		c2 = _mm256_add_epi32(c2, _mm256_madd_epi16(b, _mm256_set1_epi32(up[2])));
		c3 = _mm256_add_epi32(c3, _mm256_madd_epi16(b, _mm256_set1_epi32(up[3])));
		up += WR;
		v += (size_t)ldv * 2;
	}
	_mm256_storeu_si256((void *)m, c0);
	_mm256_storeu_si256((void *)(m + 2 * MCH), c1);
	_mm256_storeu_si256((void *)(m + 4 * MCH), c2);
	_mm256_storeu_si256((void *)(m + 6 * MCH), c3);
}

/*
 * One tile's sums for the 8 channels of two GEMM tiles (u1 NULL: the 4
 * of u0), the channels in the vector lanes: per channel pair the tile's
 * (v, v') broadcast, times the 8 channels' (u, u') by one vpmaddwd.  For
 * a block's last 1-2 tiles (13x13 and 14x14 maps have 49 = 3 x 16 + 1):
 * wino_gemm8 computes 8 tiles for them, 4 vpmaddwd per channel pair and 4
 * channels, this 1 per tile and 8 channels (SqueezeNet 1.1's 13x13 convs
 * 48 -> 192 and 64 -> 256 1.08x, fastest calls alternated, Zen 3; on 4
 * tiles it measured 0.98x).  The same int32 sums (the
 * same products, added in the same order).  Sum of channel c to
 * m[c * 2 * MCH].
 */
__attribute__((target("avx2"))) static void wino_gemm1(const int16_t *u0, const int16_t *u1,
						       const int16_t *v, int c2n, int ldv,
						       int32_t *m)
{
	const int32_t *vp = (const int32_t *)(const void *)v;
	int32_t t[8];

	if (u1) {
		__m256i a = _mm256_setzero_si256();

		for (int k = 0; k < c2n; k++) {
			__m256i w = _mm256_inserti128_si256(
				_mm256_castsi128_si256(_mm_loadu_si128((const void *)(u0 + k * 8))),
				_mm_loadu_si128((const void *)(u1 + k * 8)), 1);

			a = _mm256_add_epi32(a, _mm256_madd_epi16(
							w, _mm256_set1_epi32(vp[(size_t)k * ldv])));
		}
		_mm256_storeu_si256((void *)t, a);
	} else {
		__m128i a = _mm_setzero_si128();

		for (int k = 0; k < c2n; k++)
			a = _mm_add_epi32(a, _mm_madd_epi16(_mm_loadu_si128((const void *)(u0 + k * 8)),
							    _mm_set1_epi32(vp[(size_t)k * ldv])));
		_mm_storeu_si128((void *)t, a);
	}
	for (int c = 0; c < (u1 ? 8 : 4); c++)
		m[(size_t)c * 2 * MCH] = t[c];
}

/*
 * Output transform of 8 consecutive tiles t0.. of a block (t0 % 8 == 0,
 * tiles of the block's tile rows in raster order) of one output channel:
 * m[16 positions][8 tiles]; Y = (A^T M A) / 4 into the block's sums yr
 * (raster order, ow per output row, ny output rows).  8 tiles that leave
 * their tile row or the map (tile rows of 28 tiles: 1 group in 3.5; odd
 * maps) go through t, one copy per run of tiles in a tile row and
 * output row.
 */
__attribute__((target("avx2"))) static void wino_out8(const struct mi_qwino *wn, const int32_t *m,
						      int t0, int nt, int ny, int32_t *yr)
{
	int tw = wn->tw, ow = wn->ow;
	__m256i s[4], d[4];

	/* A^T rows: 1 1 1 0, 0 1 -1 -1 (loads in the expressions: an array
	 * of 16 vectors became a rep movsq to the stack) */
#define MI_W_Q(p) _mm256_loadu_si256((const void *)(m + (p) * 8))
	for (int c = 0; c < 4; c++) {
		__m256i q1 = MI_W_Q(4 + c), q2 = MI_W_Q(8 + c);

		s[c] = _mm256_add_epi32(_mm256_add_epi32(MI_W_Q(c), q1), q2);
		d[c] = _mm256_sub_epi32(_mm256_sub_epi32(q1, q2), MI_W_Q(12 + c));
	}
#undef MI_W_Q
	__m256i y00 = _mm256_srai_epi32(_mm256_add_epi32(_mm256_add_epi32(s[0], s[1]), s[2]), 2);
	__m256i y01 = _mm256_srai_epi32(_mm256_sub_epi32(_mm256_sub_epi32(s[1], s[2]), s[3]), 2);
	__m256i y10 = _mm256_srai_epi32(_mm256_add_epi32(_mm256_add_epi32(d[0], d[1]), d[2]), 2);
	__m256i y11 = _mm256_srai_epi32(_mm256_sub_epi32(_mm256_sub_epi32(d[1], d[2]), d[3]), 2);
	__m256i lo0 = _mm256_unpacklo_epi32(y00, y01), hi0 = _mm256_unpackhi_epi32(y00, y01);
	__m256i lo1 = _mm256_unpacklo_epi32(y10, y11), hi1 = _mm256_unpackhi_epi32(y10, y11);
	/* output rows 2 ty, 2 ty + 1 of the 8 tiles: 16 pixels each */
	__m256i r00 = _mm256_permute2x128_si256(lo0, hi0, 0x20);
	__m256i r01 = _mm256_permute2x128_si256(lo0, hi0, 0x31);
	__m256i r10 = _mm256_permute2x128_si256(lo1, hi1, 0x20);
	__m256i r11 = _mm256_permute2x128_si256(lo1, hi1, 0x31);
	int ty = t0 / tw, tx = t0 % tw;

	if (tx + 8 <= tw && 2 * tx + 16 <= ow) { /* within one tile row and the map */
		int32_t *o = yr + (size_t)2 * ty * ow + 2 * tx;

		_mm256_storeu_si256((void *)o, r00);
		_mm256_storeu_si256((void *)(o + 8), r01);
		if (2 * ty + 1 < ny) {
			_mm256_storeu_si256((void *)(o + ow), r10);
			_mm256_storeu_si256((void *)(o + ow + 8), r11);
		}
		return;
	}
	int32_t t[2][16];

	_mm256_storeu_si256((void *)t[0], r00);
	_mm256_storeu_si256((void *)(t[0] + 8), r01);
	_mm256_storeu_si256((void *)t[1], r10);
	_mm256_storeu_si256((void *)(t[1] + 8), r11);
	{
		/* the 8 tiles' runs within a tile row (a row's end, the
		 * next row's start): one copy per run and output row, the
		 * last tile's second column dropped past ow */
		for (int i = 0; i < 8 && t0 + i < nt;) {
			int tt = t0 + i, y = tt / tw * 2, x = tt % tw * 2;
			int n = tw - tt % tw, npx;

			n = n < 8 - i ? n : 8 - i;
			n = n < nt - tt ? n : nt - tt;
			npx = 2 * n < ow - x ? 2 * n : ow - x;
			for (int dy = 0; dy < 2 && y + dy < ny; dy++) {
				/* up to 16 sums: no memcpy call */
				int32_t *dst = yr + (size_t)(y + dy) * ow + x;
				const int32_t *sr = t[dy] + 2 * i;
				int k = 0;

				if (npx >= 8) {
					_mm256_storeu_si256((void *)dst, _mm256_loadu_si256((const void *)sr));
					k = 8;
				}
				for (; k < npx; k++)
					dst[k] = sr[k];
			}
			i += n;
		}
	}
}

static void wino_item(void *arg, int item, int tid)
{
	const struct wino_job *j = arg;
	const struct mi_qwino *wn = j->wn;
	int blk = item / j->nchunk, chunk = item % j->nchunk;
	int ty0, ty1;

	wino_rows(wn, j, blk, &ty0, &ty1);
	int ob0 = chunk * j->bpc, ob1 = ob0 + j->bpc < wn->nob ? ob0 + j->bpc : wn->nob;
	uint8_t *w = j->ws + (size_t)tid * wn->ws_per;
	int16_t *v = (int16_t *)(void *)w;
	int32_t *m = (int32_t *)(void *)(w + wn->v_bytes);
	int32_t *yacc = (int32_t *)(void *)(w + wn->v_bytes + wn->m_bytes);
	uint8_t *ps = w + wn->v_bytes + wn->m_bytes + wn->y_bytes;
	uint8_t *es = ps + wn->p_bytes;
	int16_t *tmp = (int16_t *)(void *)(es + wn->e_bytes);
	int nt = (ty1 - ty0) * wn->tw, ng = (nt + WT - 1) / WT;
	int oy0 = 2 * ty0, oy1 = 2 * ty1 < wn->oh ? 2 * ty1 : wn->oh;
	int npix = wn->oh * wn->ow, p0 = oy0 * wn->ow, np = (oy1 - oy0) * wn->ow;
	size_t es_out = j->ep->mode == MI_QOUT_S32 || j->ep->mode == MI_QOUT_F32 ? 4 : 1;
	size_t vps = (size_t)wn->c2n * wn->ldv * 2;

	if (ob0 >= ob1)
		return;
	wino_in(j, ty0, ty1, v, ps, es, tmp);
	for (int ob = ob0; ob < ob1; ob += WOB) {
		int nob = ob1 - ob < WOB ? ob1 - ob : WOB;
		int oc0 = ob * WR, rows = wn->oc - oc0 < nob * WR ? wn->oc - oc0 : nob * WR;

		/* per 16 tiles: the 16 GEMMs of nob x WR channels, each input
		 * slice from L1 for the nob tiles, the sums (16 KB) in L1 for
		 * the output transform */
		for (int g = 0; g < ng; g++) {
			int left = nt - g * WT;
			bool half = left <= 8;

			if (left <= 2) {
				/* the other tiles of the 8 out8 reads (it stores
				 * only these): the group before's sums, or (no group
				 * before) 0 */
				for (int r = 0; r < nob * WR && !g; r++)
					for (int p = 0; p < 16; p++)
						for (int t = left; t < 8; t++)
							m[(size_t)r * 2 * MCH + p * 8 + t] = 0;
				for (int p = 0; p < 16; p++)
					for (int b = 0; b < nob; b += 2)
						for (int tl = 0; tl < left; tl++)
							wino_gemm1(
								wn->u + ((size_t)(ob + b) * 16 + p) *
										wn->c2n * WR * 2,
								b + 1 < nob ?
									wn->u + ((size_t)(ob + b + 1) * 16 + p) *
											wn->c2n * WR * 2 :
									NULL,
								v + p * vps + (size_t)(g * WT + tl) * 2,
								wn->c2n, wn->ldv,
								m + (size_t)b * WR * 2 * MCH + p * 8 + tl);
			} else {
				for (int p = 0; p < 16; p++)
					for (int b = 0; b < nob; b++)
						(half ? wino_gemm8 : wino_gemm)(
							wn->u + ((size_t)(ob + b) * 16 + p) * wn->c2n * WR * 2,
							v + p * vps + (size_t)g * WT * 2, wn->c2n, wn->ldv,
							m + (size_t)b * WR * 2 * MCH + p * 8);
			}
			for (int r = 0; r < rows; r++)
				for (int h = 0; h < 2 && g * WT + h * 8 < nt; h++)
					wino_out8(wn, m + (size_t)(r * 2 + h) * MCH, g * WT + h * 8, nt,
						  oy1 - oy0, yacc + (size_t)r * np);
		}
		uint8_t *out = j->ep->out_c4 ? j->y + ((size_t)(oc0 / 4) * npix + p0) * 4 + oc0 % 4 :
					       j->y + ((size_t)oc0 * npix + p0) * es_out;

		j->epi(yacc, np, rows, np, j->ep, oc0, out, npix);
	}
}

/* Off (bench-qconv): the threads share the blocks of wn->rb rows (and
 * output channel chunks) as on one thread, not wino_split's choice */
static int wsplit_cur = -1;

int mi_quant_set_wsplit(int on)
{
	return wsplit_cur = !!on;
}

/*
 * Finish time of the slowest of nt threads running j's nbk * nchunk
 * items as lib/quant's pool hands them out (qplan.c pool_for, items
 * claimed one at a time when there are few): thread t owns the t-th
 * contiguous range, runs it in order, then takes the next items of the
 * ranges after its own; the thread free first claims first.  Item costs
 * in gemm_cost units: its GEMM's and its weights' share of the output
 * blocks, and its block's input transform and per-chunk costs, 14% of the
 * block's GEMM up
 * to 256 output channels, 3600 / oc % above (a chunk more cost +16% at 64
 * channels on 56x56, +12.5% at 256 on 14x14: BENCH_SPLIT=2 bench-qconv;
 * +3-7% at 512 in ResNet-50).
 */
static int64_t wino_makespan(const struct mi_qwino *wn, int nt, const struct wino_job *j)
{
	int n = j->nbk * j->nchunk, next[16], end[16];
	int tr = 3600 / wn->oc < 14 ? 3600 / wn->oc : 14;
	/* weights over 256 KB come from L3 for every item (its chunk's
	 * share): ~40 units a pass (32 bytes per c x oc at ~16 B a cycle,
	 * against 16 tiles' GEMM, 160 units, at ~32 multiply-adds a cycle) */
	int64_t wu = (int64_t)32 * wn->c * wn->oc > (256 << 10) ? 40 : 0;
	int64_t fin[16], worst = 0;

	for (int t = 0; t < nt; t++) {
		next[t] = (int)((int64_t)n * t / nt);
		end[t] = (int)((int64_t)n * (t + 1) / nt);
		fin[t] = 0;
	}
	for (int done = 0; done < n; done++) {
		int t = 0, u = -1, i, ty0, ty1, ob, tiles;

		for (int k = 1; k < nt; k++)
			if (fin[k] < fin[t])
				t = k;
		for (int k = 0; k < nt && u < 0; k++)
			if (next[(t + k) % nt] < end[(t + k) % nt])
				u = (t + k) % nt;
		i = next[u]++;
		wino_rows(wn, j, i / j->nchunk, &ty0, &ty1);
		tiles = (ty1 - ty0) * wn->tw;
		ob = wn->nob - i % j->nchunk * j->bpc;
		ob = ob < j->bpc ? ob : j->bpc;
		if (ob > 0)
			fin[t] += ((int64_t)gemm_cost(tiles) + wu) * ob * 100 / wn->nob +
				  (int64_t)gemm_cost(tiles) * tr;
		worst = fin[t] > worst ? fin[t] : worst;
	}
	return worst;
}

/*
 * The split of a conv over nt > 1 threads: blocks of tile rows (wn->rb,
 * the last one shorter, or nbk blocks of balanced rows, at most wn->rb:
 * the workspace's) x chunks of output channels (each redoing its block's
 * input transform), the least makespan (wino_makespan); unless another is
 * 2% better, wn->rb rows and nt / gcd(nb, nt) chunks as before.
 * ResNet's 28x28 map of 14 tile rows: 4+4 | 4+2 -> 3+4 | 3+4; 56x56 (28
 * rows, 64 channels): 8 blocks of 3-4 rows, not 7 x 2 chunks (the
 * repeated transform is 16% of the GEMM there).
 */
static void wino_split(const struct mi_qwino *wn, int nt, struct wino_job *j)
{
	int a = wn->nb, b = nt;
	int64_t best;
	struct wino_job c = *j;

	while (b) {
		int t = a % b;

		a = b;
		b = t;
	}
	j->nbk = wn->nb;
	j->rb = wn->rb;
	j->spread = false;
	j->nchunk = 1;
	if (nt > 1 && wn->nb < 4 * nt) {
		j->nchunk = nt / a;
		j->nchunk = j->nchunk < (wn->nob + 1) / 2 ? j->nchunk : (wn->nob + 1) / 2;
		j->nchunk = j->nchunk < 1 ? 1 : j->nchunk;
	}
	j->bpc = (wn->nob + j->nchunk - 1) / j->nchunk;
	j->nchunk = (wn->nob + j->bpc - 1) / j->bpc;
	if (nt < 2 || nt > 16 || !wsplit_cur)
		return;
	best = wino_makespan(wn, nt, j);
	c.rb = wn->rb;
	c.spread = true;
	for (c.nbk = wn->nb; c.nbk <= wn->th && c.nbk <= 8 * nt; c.nbk++)
		for (int nc = 1; nc <= 4 && nc <= (wn->nob + 1) / 2; nc++) {
			int64_t m;

			if ((wn->th + c.nbk - 1) / c.nbk > wn->rb)
				continue;
			c.bpc = (wn->nob + nc - 1) / nc;
			c.nchunk = (wn->nob + c.bpc - 1) / c.bpc;
			m = wino_makespan(wn, nt, &c);
			/* 2% better (the model is rough) */
			if (m * 50 < best * 49) {
				best = m;
				*j = c;
			}
		}
}

int mi_qwino_run(const struct mi_qwino *wn, const void *x, bool in_c4, uint8_t flip,
		 uint8_t zx, const struct mi_qepi *ep, void *y, void *ws, mi_qepi_fn epi,
		 mi_qparallel_for pf, int nt)
{
	struct wino_job j = {
		.wn = wn, .x = x, .in_c4 = in_c4, .flip = flip, .zx = zx, .ep = ep, .y = y,
		.ws = (uint8_t *)(((uintptr_t)ws + 63) & ~(uintptr_t)63), .epi = epi,
	};

	/* few blocks for the threads (7 on a 56x56 map, 1 on 7x7): output
	 * channel chunks too, as many as make the items a multiple of the
	 * threads, each chunk redoing its block's input transform; or
	 * blocks of balanced rows (wino_split) */
	wino_split(wn, nt, &j);
	pf(j.nbk * j.nchunk, wino_item, &j);
	return 0;
}
