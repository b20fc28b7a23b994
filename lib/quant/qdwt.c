// SPDX-License-Identifier: MIT
/*
 * int8 depthwise convolution on small maps through gather tables
 * (AVX-512 VBMI / AMX): table building and the kernels.
 */
#include "quant/qgemm-impl.h"

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

static int dwtab_cur = -1;

int mi_quant_set_dwtab(int on)
{
	dwtab_cur = !!on;
	return dwtab_cur;
}

/* Off (tests): no tables, the other depthwise kernels. */
static bool dwtab_on(void)
{
	return dwtab_cur != 0;
}

void dwt_free(struct mi_qdwtab *t)
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
struct mi_qdwtab *dwt_build(const struct mi_qconv_shape *s, size_t nwq_per_group)
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
void dwt_amx_pack(struct mi_qdwtab *t, const struct mi_qconv_shape *s)
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
#define MI_DWT_RQ(a, m) _mm512_add_epi32(mi_qrq512(a, m, lo, hi), zy)
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
#define MI_DWT_RQ(a, c) _mm512_add_epi32(mi_qrq512(a, _mm512_set1_ps(ep->mult[c]), lo, hi), zy)
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
	size_t es = qg_out_elem(ep->mode);
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
bool dwt_use(const struct mi_qconv *cv, int isa, const struct mi_qepi *ep)
{
	return cv->dwt && dwtab_on() && isa == MI_QISA_AVX512 && qg_have_vbmi() &&
	       (ep->mode == MI_QOUT_U8 || ep->mode == MI_QOUT_S8 ||
		(cv->depthwise && ep->mode == MI_QOUT_F32 && !ep->out_c4));
}

void dwt_run(const struct mi_qconv *cv, const uint8_t *x, uint8_t zx, uint8_t flip,
		    const struct mi_qepi *ep, uint8_t *y)
{
	if (!cv->depthwise) {
		struct dwt_job j = { cv, x, zx, flip, ep, y, 1 };

		qg_par_for((cv->dwt->npv + 7) / 8,
			cv->dwt->aw && mi_quant_amx() ? dwt_amx_item : dwt_dense_item, &j);
		return;
	}
	int nq = (cv->s.c + 3) / 4, nt = qg_call_threads > 0 ? qg_call_threads : qg_par_threads;
	struct dwt_job j = { cv, x, zx, flip, ep, y, 1 };

	/* maps of 512+ pixels: one pixel range per thread (few channel quads:
	 * more); smaller maps (cheap to share between the cores, costly to cut
	 * in pixels) split the pixels only when they have few quads */
	if (nt > 1 && (nq < 4 * nt || cv->dwt->npv >= 32)) {
		j.nsplit = nq < 4 * nt ? (4 * nt + nq - 1) / nq : nt;
		j.nsplit = (j.nsplit + nt - 1) / nt * nt;
		j.nsplit = j.nsplit < cv->dwt->npv ? j.nsplit : cv->dwt->npv;
	}
	qg_par_for(nq * j.nsplit, dwt_item, &j);
}
