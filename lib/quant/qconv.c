// SPDX-License-Identifier: MIT
/*
 * int8 convolution: setup (mi_qconv_init), the input reorder, the
 * im2col panels and the GEMM items, and the entry point mi_qconv_run.
 */
#include "quant/qgemm-impl.h"

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
		    (!cv->rgb->w16 && !qg_avx2b_use(cv->rgb))) {
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
	 * the AVX2 split panel (qg_conv_kernels) */
	return ((size_t)cv->w.k4 * MI_QNR * 4 + 4 * MI_QMR * MI_QNR * 4 +
		(cv->w.w16 ? (size_t)cv->w.k4 * 256 : 0) + 63) &
	       ~(size_t)63;
}

size_t mi_qconv_workspace(const struct mi_qconv *cv)
{
	/* per-thread area for up to 64 threads */
	int nt = qg_par_threads > 64 ? 64 : qg_par_threads;
	size_t b = ((conv_xi_bytes(cv) + 63) & ~(size_t)63) + conv_ws_per_thread(cv) * nt + 64;

	if (cv->wino && mi_qwino_workspace(cv->wino, nt) > b)
		b = mi_qwino_workspace(cv->wino, nt);
	return b;
}

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

	if (!sp && np == MI_QNR && p0 % s->ow + MI_QNR <= s->ow && (s->sw == 1 || s->sw == 2)) {
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
					} else if (s->sw == 2 && j->dw_isa == MI_QISA_AVX2) {
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
	size_t es = qg_out_elem(j->ep->mode);
	bool rq = j->k.tile_rq && qg_rq_fits(j->ep);

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

			if (j->ep->res && j->dw_isa >= MI_QISA_AVX2)
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
	size_t plane = j->hp * j->wp * 4, es = qg_out_elem(j->ep->mode);
	uint8_t *tmp = j->ws + tid * j->ws_per; /* 8 x 32 bytes */
	int32_t *acc = (int32_t *)(tmp + (size_t)w->k4 * MI_QNR * 4);
	const uint8_t *xg = j->xi + (size_t)g * cv->c4 * plane;
	ptrdiff_t toff[AMX_ROWS_TAPS];
	int rq_off[MI_QNR], rp[MI_QNR], rlen[MI_QNR], nrun = 0;
	bool rq = qg_rq_fits(j->ep);

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

	return qg_gemv_isa(isa) && !cv->depthwise && s->group == 1 && s->kh == 1 &&
	       s->kw == 1 && s->h == 1 && s->w == 1 && s->oh == 1 && s->ow == 1;
}

/* a: c4 * 4 bytes of room (the workspace's reorder buffer) */
static void conv_gemv(const struct mi_qconv *cv, const uint8_t *x, uint8_t flip,
		      const struct mi_qepi *ep, void *y, uint8_t *a, int isa)
{
	const struct mi_qweights *w = &cv->w;
	struct gemv_job v = { .w = w, .a = a, .ep = ep, .y = y,
			      .epi = qg_kernels_for(isa, &cv->w).epi, .isa = isa };
	int nt = qg_call_threads > 0 ? qg_call_threads : qg_par_threads;

	/* the padding channels' weights are 0: any byte there */
	for (int c = 0; c < cv->s.c; c++)
		a[c] = x[c] ^ flip;
	memset(a + cv->s.c, 0, (size_t)w->k4 * 4 - cv->s.c);
	v.nchunk = 2 * nt < w->nblk ? 2 * nt : w->nblk;
	v.bpc = (w->nblk + v.nchunk - 1) / v.nchunk;
	v.nchunk = (w->nblk + v.bpc - 1) / v.bpc;
	qg_par_for(v.nchunk, qg_gemv_item, &v);
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
		.k = qg_conv_kernels(isa, &cv->w), .dw_isa = isa,
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

		if (ep->mode != MI_QOUT_F32 || ep->out_c4 || j.amx || wino ||
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
		mi_qwino_run(cv->wino, x, j.in_c4, j.flip, j.zx, ep, y, ws, epi_avx2, qg_par_for,
			     qg_call_threads > 0 ? qg_call_threads : qg_par_threads);
	} else if (conv_gemv_use(cv, isa)) {
		conv_gemv(cv, x, j.flip, ep, y, j.xi, isa);
	} else if (dwt_use(cv, isa, ep) && !(flags & MI_QCONV_IN_C4)) {
		dwt_run(cv, x, j.zx, j.flip, ep, y);
	} else if (cv->depthwise && dwq_use(&j)) {
		qg_par_for(s->c / 4, dwq_item, &j);
	} else if (cv->depthwise) {
		j.dw_defer = ep->out_c4 && !dw_fused(&j);
		qg_par_for((s->c + 3) / 4, dw_quad_item, &j);
	} else {
		j.amx_rows = j.amx && !cv->direct1x1 && !j.in_direct && s->sh == 1 && s->sw == 1 &&
			     cv->c4 % 16 == 0 && s->kh * s->kw <= AMX_ROWS_TAPS;
		j.npanel = ((j.amx_rows ? s->oh * (int)j.wp : s->oh * s->ow) + MI_QNR - 1) / MI_QNR;
		/* RGB first convs: planar planes, conv_rgb_panel's im2col
		 * (the split panel, or tile_avx2b's in place) */
		if (cv->rgb && isa == MI_QISA_AVX2 && !j.in_c4) {
			struct kernels kr = qg_conv_kernels(isa, cv->rgb);

			j.rgb = kr.split || kr.tile == tile_avx2b;
			if (j.rgb)
				j.k = kr;
		}
		if (j.rgb)
			qg_par_for(s->c, conv_rgb_prep_item, &j);
		else if (!j.in_direct)
			qg_par_for(s->group * cv->c4, conv_prep_item, &j);
		/* few pixel panels for the threads (7x7 and 14x14 maps): each
		 * panel's output blocks are split in chunks too. Only for convs
		 * reading their C4 input directly or AMX rows: a chunk would
		 * redo the panel's im2col (3x3 convs on 13x13 maps at 2 threads
		 * got ~4% slower).  AMX chunks hold whole pairs of blocks. */
		int items = s->group * j.npanel, nt = qg_call_threads > 0 ? qg_call_threads : qg_par_threads;

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
			int tgt = items >= 2 * nt && macs >= ((int64_t)8 << 20) * nt ?
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
		qg_par_for(items * j.nchunk, j.amx_rows ? conv_amx_rows_item : conv_gemm_item, &j);
	}
	free(own);
	return 0;
}
