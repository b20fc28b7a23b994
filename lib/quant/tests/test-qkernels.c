// SPDX-License-Identifier: MIT
/*
 * int8 kernels vs a scalar reference: conv (grouped, depthwise, 1x1,
 * strides, dilations, pads, odd channel counts) and GEMM, every output
 * mode, on every ISA path this CPU has.  Results must be bit-identical.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant/quant.h"
#include "quant/quant-impl.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint32_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 16);
}

static int rndi(int lo, int hi) /* inclusive */
{
	return lo + (int)(rnd() % (uint32_t)(hi - lo + 1));
}

struct wctx {
	const int8_t *w;
	int ocg, kg; /* per-group rows, k per row */
};

static int wget(const void *vctx, int g, int o, int k)
{
	const struct wctx *c = vctx;

	return c->w[((size_t)g * c->ocg + o) * c->kg + k];
}

/*
 * The requantization's definition, in integers (as the accelerators'
 * fixed point): mult = M / 2^sh exactly (M the 24-bit mantissa), the
 * result floor((2 acc M + 2^sh) / 2^(sh+1)) (nearest of the exact
 * product; an exact half to even, as QuantizeLinear), clamped, + zy.  mi_qrequant must equal it.
 */
static int32_t exact_rq(int32_t acc, float mult, int32_t zy, float flo, float fhi)
{
	int e;
	float fm = frexpf(mult, &e);
	int64_t m = (int64_t)ldexpf(fm, 24);
	int sh = 24 - e;
	__int128 p = (__int128)acc * m, r;

	if (!isfinite(mult))
		return mi_qrequant(acc, mult, zy, flo, fhi);
	if (sh <= 0)
		r = p * ((__int128)1 << (sh < -60 ? 60 : -sh));
	else if (sh > 100)
		r = 0; /* |acc m| < 2^55: |product| < 2^-45 */
	else {
		__int128 n = 2 * p + ((__int128)1 << sh);

		r = n >> (sh + 1);
		/* exactly a half: to even */
		if (!(n & (((__int128)1 << (sh + 1)) - 1)) && (r & 1))
			r -= 1;
	}
	if (r < (__int128)flo)
		r = (__int128)flo;
	if (r > (__int128)fhi)
		r = (__int128)fhi;
	return (int32_t)r + zy;
}

/* products whose fp32 value is a half-integer inside the clamp: exact
 * product below it, above it, on it; and wide sums (|acc| >= 2^24) */
static long rq_below, rq_above, rq_on, rq_wide, rq_fails;

static void rq_check(int32_t acc, float mult, int32_t zy, float flo, float fhi)
{
	float v = (float)acc * mult;
	int32_t q = mi_qrequant(acc, mult, zy, flo, fhi);
	int32_t x = exact_rq(acc, mult, zy, flo, fhi);

	if (fabsf(v - nearbyintf(v)) == 0.5f && v > flo && v < fhi) {
		double d = fma((double)acc, (double)mult, -(double)v);

		rq_below += d < 0;
		rq_above += d > 0;
		rq_on += d == 0;
	}
	rq_wide += acc >= (1 << 24) || acc <= -(1 << 24);
	if (q != x && rq_fails++ < 5)
		fprintf(stderr, "FAIL requant: acc %d mult %.9g (fp32 product %.9g): %d, exact %d\n",
			acc, mult, v, q, x);
}

/*
 * Halfway products: for about half the channels mult is chosen so that
 * the fp32 product of one output's sum tot is exactly k + 0.5 inside the
 * clamp, the exact product just below, above or on it -- where rounding
 * the fp32 product would be wrong.  U8/S8 outputs only.
 */
static void tie_mult(const struct mi_qepi *ep, float *mult, int o, int32_t tot)
{
	int lo = (int)ep->flo, hi = (int)ep->fhi;

	if ((ep->mode != MI_QOUT_U8 && ep->mode != MI_QOUT_S8) || !tot || hi <= lo ||
	    rnd() % 2)
		return;
	for (int t = 0; t < 8; t++) {
		float k = (float)rndi(lo, hi - 1) + 0.5f;
		float m = (float)((double)k / tot);

		for (int d = 0; d < 6; d++) {
			if ((float)tot * m == k) {
				mult[o] = m;
				return;
			}
			m = nextafterf(m, ((float)tot * m < k) == (tot > 0) ? INFINITY : -INFINITY);
		}
	}
}

static void ref_out(const struct mi_qepi *ep, int oc, int32_t acc, void *y,
		    size_t idx)
{
	acc += ep->comp[oc];
	if (ep->mode == MI_QOUT_U8 || ep->mode == MI_QOUT_S8)
		rq_check(acc, ep->mult[oc], ep->zy, ep->flo, ep->fhi);
	switch (ep->mode) {
	case MI_QOUT_U8:
		((uint8_t *)y)[idx] = (uint8_t)mi_qrequant(acc, ep->mult[oc], ep->zy,
							   ep->flo, ep->fhi);
		break;
	case MI_QOUT_S8:
		((int8_t *)y)[idx] = (int8_t)mi_qrequant(acc, ep->mult[oc], ep->zy,
							 ep->flo, ep->fhi);
		break;
	case MI_QOUT_S32:
		((int32_t *)y)[idx] = acc;
		break;
	default: {
		float v = fmaf((float)acc, ep->mult[oc], ep->fbias ? ep->fbias[oc] : 0);
		v = v < ep->flo ? ep->flo : v;
		((float *)y)[idx] = v > ep->fhi ? ep->fhi : v;
	}
	}
}

static size_t esize(int mode)
{
	return mode >= MI_QOUT_S32 ? 4 : 1;
}

static void make_epi(struct mi_qepi *ep, int mode, int oc, int32_t *comp,
		     float *mult, float *fbias, int kmax)
{
	memset(ep, 0, sizeof(*ep));
	ep->mode = mode;
	ep->comp = comp;
	ep->mult = mult;
	for (int o = 0; o < oc; o++) {
		/* scale so outputs spread over the range and saturate a bit */
		mult[o] = (float)(rndi(1, 1000) / 1000.0 / (kmax * 40.0 + 1));
		fbias[o] = (float)rndi(-100, 100) / 10.0f;
	}
	if (mode == MI_QOUT_U8) {
		ep->zy = rndi(0, 255);
		int relu = rnd() % 2;
		ep->flo = (float)((relu ? ep->zy : 0) - ep->zy);
		ep->fhi = (float)(255 - ep->zy);
	} else if (mode == MI_QOUT_S8) {
		ep->zy = rndi(-128, 127);
		ep->flo = (float)(-128 - ep->zy);
		ep->fhi = (float)(127 - ep->zy);
	}
	if ((mode == MI_QOUT_U8 || mode == MI_QOUT_S8) && rnd() % 4 == 0) {
		/* a clip inside the range (integer bounds, as the planner's
		 * qbound makes them), and now and then a mult >= 1 (the
		 * kernels' saturation shortcut must then fall back to the
		 * float clamps) */
		float lo = ep->flo, hi = ep->fhi;
		float a = lo + (float)rndi(0, 40), b = hi - (float)rndi(0, 40);

		ep->flo = a < hi ? a : hi;
		ep->fhi = b > ep->flo ? b : ep->flo;
		for (int o = 0; o < oc && rnd() % 2; o++)
			if (rnd() % 4 == 0)
				mult[o] = (float)rndi(1000, 3000) / 1000.0f *
					  (rnd() % 2 ? 1.0f : 1e7f); /* cvt overflows */
	}
	if (mode == MI_QOUT_F32) {
		ep->fbias = rnd() % 2 ? fbias : NULL;
		ep->flo = rnd() % 2 ? 0.0f : -INFINITY;
		ep->fhi = rnd() % 2 ? 6.0f : INFINITY;
	}
}

/*
 * 7-bit weight cases (tile_avx2b on AVX2, vpmaddubsw): every third
 * iteration draws weights in [-64, 63], mostly the extremes, on
 * activations of mostly 255 (pair sums at the int16 edge: 2 * 255 * -64 =
 * -32640); every ninth all -64 but one -65 on activations 255, which must
 * keep the int16 tiles (-65 * 255 - 64 * 255 = -32895 would saturate).
 */
enum { W8, W7, W7_OUT };
static int s7_cases, s7_out_cases, s7_rgb_cases;

static int wkind(int iter)
{
	return iter % 9 == 8 ? W7_OUT : iter % 3 == 2 ? W7 : W8;
}

static void draw_w7(int8_t *w, size_t n, int kind)
{
	for (size_t i = 0; i < n; i++)
		w[i] = kind == W7_OUT ? -64 : rnd() % 3 ? (rnd() % 2 ? -64 : 63) :
							  (int8_t)rndi(-64, 63);
	if (kind == W7_OUT)
		w[rnd() % n] = -65;
}

/* activation bytes (x_signed: int8) of 255 once made uint8 */
static uint8_t x255(int x_signed)
{
	return x_signed ? 0x7f : 0xff;
}

static int dwq_runs, dwq_in_runs, dwq_tail_runs;
static bool dwq_focus; /* depthwise channel quads, C4 output (dwq_item) */
static int dw_cases, dwtab_cases, densetab_cases, chan_cases;
static bool chan_focus;
static bool px1_focus; /* 1x1 convs on one pixel (SE FCs: the GEMV path) */
static bool dense_focus; /* few input channels (RGB first convs: the gather tables) */
static int px1_cases;
static bool wino_focus; /* 3x3 stride-1 convs (AVX2 Winograd F(2x2,3x3)) */
static bool rgb_focus; /* RGB first convs (AVX2 dense K order, cv.rgb) */
static int rgb_cases;
static int wino_cases;
static int fake_threads = 3;
static int blk8_runs, blk8_refused;

/*
 * The fp32 output blocked by 8 from the tile epilogues (MI_QCONV_OUT_BLK8)
 * against the planar output yk of the same path: the same floats, pad
 * lanes 0.  Refused (-EOPNOTSUPP) runs are counted, not failures.
 */
static int test_blk8(const struct mi_qconv *cv, const void *x, bool x_signed, int zx,
		     const struct mi_qepi *ep, unsigned int flags, const float *yk)
{
	const struct mi_qconv_shape *s = &cv->s;
	size_t ohw = (size_t)s->oh * s->ow, nb = (s->oc + 7) / 8;
	float *yb = malloc(nb * 8 * ohw * sizeof(float));
	int err, fails = 0;

	memset(yb, 0xcd, nb * 8 * ohw * sizeof(float));
	err = mi_qconv_run(cv, x, x_signed, zx, ep, yb, NULL, flags | MI_QCONV_OUT_BLK8);
	if (err == -EOPNOTSUPP) {
		blk8_refused++;
	} else if (err) {
		fprintf(stderr, "FAIL conv blk8 run: %d\n", err);
		fails++;
	} else {
		blk8_runs++;
		for (size_t c = 0; c < nb * 8 && !fails; c++)
			for (size_t p = 0; p < ohw; p++) {
				float v = yb[((c / 8) * ohw + p) * 8 + c % 8];

				if (c < (size_t)s->oc ? memcmp(&v, yk + c * ohw + p, 4) : v != 0.0f) {
					fprintf(stderr,
						"FAIL conv blk8: c%d oc%d g%d %dx%d k%dx%d s%d,%d: channel %zu pixel %zu\n",
						s->c, s->oc, s->group, s->h, s->w, s->kh, s->kw, s->sh,
						s->sw, c, p);
					fails++;
					break;
				}
			}
	}
	free(yb);
	return fails;
}

static int res_runs;

/* act(f + r) (act(r + f) first) as the NCHWc Add computes it */
static float res_ref(const struct mi_qepi *ep, float f, float r)
{
	float v = ep->res_first ? r + f : f + r;

	/* maxps / minps: the second operand unless the first compares
	 * greater / less (NaN: the bound) */
	if (ep->res_act == MI_QRES_RELU)
		v = v > 0.0f ? v : 0.0f;
	if (ep->res_act == MI_QRES_CLIP) {
		v = v > ep->res_lo ? v : ep->res_lo;
		v = v < ep->res_hi ? v : ep->res_hi;
	}
	return v;
}

/*
 * The fused residual Add of the blocked output (ep->res): every act, both
 * operand orders, AVX2 and SSE stores, against the planar output yk of
 * the same path plus the residual, bitwise, pad lanes too (act(0 + r)).
 * The residual holds -0, the negated output (exact zeros of either sign)
 * and a NaN.
 */
static int test_blk8_res(const struct mi_qconv *cv, const void *x, bool x_signed, int zx,
			 const struct mi_qepi *ep0, unsigned int flags, const float *yk)
{
	const struct mi_qconv_shape *s = &cv->s;
	size_t ohw = (size_t)s->oh * s->ow, nb = (s->oc + 7) / 8, nf = nb * 8 * ohw;
	float *yb = malloc(nf * sizeof(float)), *r = malloc(nf * sizeof(float));
	int fails = 0;

	for (size_t i = 0; i < nf; i++) {
		size_t c = i / (8 * ohw) * 8 + i % 8, p = i / 8 % ohw;

		r[i] = (float)(rnd() % 2001 - 1000) / 256.0f;
		if (rnd() % 8 == 0)
			r[i] = c < (size_t)s->oc ? -yk[c * ohw + p] : -0.0f;
		if (rnd() % 16 == 0)
			r[i] = -0.0f;
	}
	r[rnd() % nf] = __builtin_nanf("");
	for (int v = 0; v < 6 && !fails; v++) {
		struct mi_qepi ep = *ep0;
		int err;

		ep.res = r;
		ep.res_act = v % 3;
		ep.res_first = v / 3;
		ep.res_lo = -0.5f;
		ep.res_hi = 1.75f;
		memset(yb, 0xcd, nf * sizeof(float));
		err = mi_qconv_run(cv, x, x_signed, zx, &ep, yb, NULL, flags | MI_QCONV_OUT_BLK8);
		if (err == -EOPNOTSUPP)
			break;
		if (err) {
			fprintf(stderr, "FAIL conv blk8 res run: %d\n", err);
			fails++;
			break;
		}
		res_runs++;
		for (size_t i = 0; i < nf && !fails; i++) {
			size_t c = i / (8 * ohw) * 8 + i % 8, p = i / 8 % ohw;
			float want = res_ref(&ep, c < (size_t)s->oc ? yk[c * ohw + p] : 0.0f, r[i]);

			if (memcmp(&want, yb + i, 4)) {
				fprintf(stderr,
					"FAIL conv blk8 res act %d first %d: c%d oc%d g%d %dx%d k%dx%d s%d,%d: channel %zu pixel %zu: %g, want %g\n",
					ep.res_act, ep.res_first, s->c, s->oc, s->group, s->h, s->w,
					s->kh, s->kw, s->sh, s->sw, c, p, yb[i], want);
				fails++;
			}
		}
	}
	free(yb);
	free(r);
	return fails;
}

static int test_conv(int iter)
{
	struct mi_qconv_shape s;
	int dwise = iter % 5 == 0, one = iter % 5 == 1 || iter % 10 == 3;

	memset(&s, 0, sizeof(s));
	s.group = dwise ? 0 : (rnd() % 4 == 0 ? rndi(2, 3) : 1);
	if (dwise) {
		s.c = s.oc = s.group = rndi(1, 20);
		if (iter % 4 == 0) /* quads (the AVX2 C4 quad kernel), up to 9 */
			s.c = s.oc = s.group = 4 * rndi(1, 9);
		/* 3x3 mostly; also 5x5, 7x7 and non-square kernels */
		s.kh = s.kw = rnd() % 2 ? 3 : rnd() % 2 ? 5 : 0;
		if (!s.kh) {
			s.kh = rndi(1, 7);
			s.kw = rndi(2, 7);
		}
	} else if (iter % 5 == 3) {
		/* deep K and several 16-channel tiles (the AMX tiles: K in
		 * chunks of 64, the last one overlapping) */
		s.c = s.group * rndi(16, 140 / s.group);
		if (rnd() % 2) /* 64-channel multiples (AMX without im2col) */
			s.c = s.group * (64 * rndi(1, 2) - rndi(0, 3));
		s.oc = s.group * rndi(9, 72 / s.group);
		s.kh = one ? 1 : rndi(1, 3);
		s.kw = one ? 1 : rndi(1, 3);
	} else {
		s.c = s.group * rndi(1, 21);
		s.oc = s.group * rndi(1, 19);
		s.kh = one ? 1 : rndi(1, 3);
		s.kw = one ? 1 : rndi(1, 3);
	}
	s.h = rndi(1, iter % 5 == 3 ? 9 : 17);
	s.w = rndi(1, 40);
	if (dwise && iter % 3 == 0) { /* maps too large for the gather tables too */
		s.h = rndi(8, 60);
		s.w = rndi(8, 70);
	}
	/* 1x1 without pads: stride 2 a third of the time (read in place too) */
	s.sh = one ? 1 + (iter % 3 == 0) : rndi(1, 2);
	s.sw = one ? 1 + (iter % 3 == 0) : rndi(1, 2);
	s.dh = one ? 1 : (rnd() % 4 ? 1 : 2);
	s.dw = one ? 1 : (rnd() % 4 ? 1 : 2);
	if (!one) {
		s.pt = rndi(0, 2);
		s.pb = rndi(0, 2);
		s.pl = rndi(0, 2);
		s.pr = rndi(0, 2);
	}
	if (chan_focus) { /* the 1x1 convs MI_QCONV_CHAN applies to */
		s.group = 1 + rnd() % 4 / 3;
		s.c = s.group * 4 * rndi(1, 24);
		s.oc = s.group * rndi(17, 80);
		s.kh = s.kw = s.sh = s.sw = s.dh = s.dw = 1;
		s.pt = s.pb = s.pl = s.pr = 0;
	}
	if (dwq_focus) {
		/* the AVX2 quad kernel: 3x3 and 5x5 (some 1..7, non-square)
		 * at stride 1 and 2, output heights of every residue mod 4
		 * (its last oh % 4 rows) */
		s.c = s.oc = s.group = 4 * rndi(1, 6);
		s.kh = s.kw = rnd() % 4 ? 3 + 2 * rndi(0, 1) : 0;
		if (!s.kh) {
			s.kh = rndi(1, 7);
			s.kw = rndi(1, 7);
		}
		s.sh = rndi(1, 2);
		s.sw = rnd() % 4 ? s.sh : rndi(1, 2);
		s.dh = s.dw = 1;
		s.h = rndi(s.kh, 30);
		s.w = rndi(s.kw, 30);
		s.pt = s.pb = rnd() % 4 ? s.kh / 2 : rndi(0, 3);
		s.pl = s.pr = rnd() % 4 ? s.kw / 2 : rndi(0, 3);
	}
	if (px1_focus) {
		s.group = 1;
		s.c = rndi(1, 300);
		s.oc = rnd() % 2 ? rndi(1, 40) : rndi(41, 600);
		s.h = s.w = 1;
		s.kh = s.kw = s.sh = s.sw = s.dh = s.dw = 1;
		s.pt = s.pb = s.pl = s.pr = 0;
	}
	if (dense_focus) {
		s.group = 1;
		s.c = rndi(1, 4);
		s.oc = rnd() % 2 ? 4 * rndi(1, 8) : rndi(1, 32);
		s.kh = rnd() % 2 ? 3 : rndi(2, 7);
		s.kw = rnd() % 2 ? s.kh : rndi(2, 7);
		s.h = rndi(s.kh, 40);
		s.w = rndi(s.kw, 60);
	}
	if (rgb_focus) {
		/* 1-3 input channels (a few 4..7: channel quads), 3x3/5x5/7x7
		 * (some non-square), strides 1-3, dilations, maps wider than
		 * a panel, over 32 outputs too (the gather tables take fewer
		 * on AVX-512) */
		s.group = 1;
		s.c = rnd() % 6 ? rndi(1, 3) : rndi(4, 7);
		s.oc = rnd() % 2 ? 4 * rndi(1, 20) : rndi(1, 70);
		s.kh = 3 + 2 * rndi(0, 2);
		s.kw = rnd() % 4 ? s.kh : rndi(2, 7);
		s.sh = rnd() % 4 ? rndi(1, 2) : 3;
		s.sw = rnd() % 4 ? rndi(1, 2) : 3;
		s.dh = rnd() % 5 ? 1 : 2;
		s.dw = rnd() % 5 ? 1 : 2;
		s.h = rndi(s.kh, 40);
		s.w = rnd() % 3 ? rndi(s.kw, 50) : rndi(50, 120);
		s.pt = rndi(0, 3);
		s.pb = rndi(0, 3);
		s.pl = rndi(0, 3);
		s.pr = rndi(0, 3);
	}
	if (wino_focus) {
		s.group = 1;
		s.c = rnd() % 4 ? rndi(MI_QWINO_MIN_C, 40) : rndi(41, 100);
		s.oc = rnd() % 4 ? rndi(MI_QWINO_MIN_OC, 40) : rndi(41, 72);
		s.kh = s.kw = 3;
		s.sh = s.sw = s.dh = s.dw = 1;
		s.h = rnd() % 4 ? rndi(1, 12) : rndi(13, 30);
		s.w = rnd() % 4 ? rndi(1, 20) : rndi(21, 45);
		s.pt = rndi(0, 2);
		s.pb = rnd() % 2 ? s.pt : rndi(0, 2);
		s.pl = rndi(0, 2);
		s.pr = rnd() % 2 ? s.pl : rndi(0, 2);
		/* one tile row per block now and then (block edges) */
		mi_qwino_test_budget(rnd() % 2 ? 1 : 0);
	}
	int eh = (s.kh - 1) * s.dh + 1, ew = (s.kw - 1) * s.dw + 1;

	if (s.h + s.pt + s.pb < eh || s.w + s.pl + s.pr < ew)
		return 0; /* no output; skip */
	s.oh = (s.h + s.pt + s.pb - eh) / s.sh + 1;
	s.ow = (s.w + s.pl + s.pr - ew) / s.sw + 1;

	int cg = s.c / s.group, ocg = s.oc / s.group, kg = cg * s.kh * s.kw;
	size_t nx = (size_t)s.c * s.h * s.w, ny = (size_t)s.oc * s.oh * s.ow;
	int8_t *w = malloc((size_t)s.oc * kg);
	uint8_t *x = malloc(nx);
	int32_t *acc = calloc(ny, 4), *bias = malloc(s.oc * 4), *comp = malloc(s.oc * 4);
	float *mult = malloc(s.oc * 4), *fb = malloc(s.oc * 4);
	int x_signed = rnd() % 3 == 0 && !chan_focus;
	int wk = dwise && iter % 2 ? W8 : wkind(iter); /* not on the -128 extremes */
	int zx = x_signed ? rndi(-128, 127) : rndi(0, 255);
	int zxu = x_signed ? zx + 128 : zx;
	int fails = 0;

	for (size_t i = 0; i < (size_t)s.oc * kg; i++)
		w[i] = (int8_t)rndi(-128, 127);
	if (dwise && iter % 2) /* extreme weights (vpmaddwd pairs of -128) */
		for (size_t i = 0; i < (size_t)s.oc * kg; i++)
			w[i] = rnd() % 3 ? -128 : rnd() % 2 ? 127 : w[i];
	if (wk != W8)
		draw_w7(w, (size_t)s.oc * kg, wk);
	for (size_t i = 0; i < nx; i++)
		x[i] = wk == W7_OUT || (wk == W7 && rnd() % 4) ? x255(x_signed) :
										    (uint8_t)rnd();
	for (int o = 0; o < s.oc; o++)
		bias[o] = rndi(-5000, 5000);

	/* reference accumulators of (x - zx) * w */
	for (int o = 0; o < s.oc; o++) {
		int g = o / ocg;

		for (int oy = 0; oy < s.oh; oy++)
			for (int ox = 0; ox < s.ow; ox++) {
				int32_t a = 0;

				for (int c = 0; c < cg; c++)
					for (int ky = 0; ky < s.kh; ky++)
						for (int kx = 0; kx < s.kw; kx++) {
							int iy = oy * s.sh - s.pt + ky * s.dh;
							int ix = ox * s.sw - s.pl + kx * s.dw;
							int xv;

							if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w)
								continue; /* x - zx == 0 */
							uint8_t raw = x[((size_t)(g * cg + c) * s.h + iy) * s.w + ix];
							xv = x_signed ? (int8_t)raw : raw;
							a += (xv - zx) * w[(size_t)o * kg + (c * s.kh + ky) * s.kw + kx];
						}
				acc[((size_t)o * s.oh + oy) * s.ow + ox] = a;
			}
	}

	struct mi_qconv cv;
	struct wctx wc = { w, ocg, kg };

	mi_quant_set_amx(1); /* AMX tiles packed where the CPU has them */
	mi_quant_set_isa(MI_QISA_AVX2); /* and the AVX2 int16 weights */
	if (mi_qconv_init(&cv, &s, wget, &wc)) {
		fprintf(stderr, "conv init failed\n");
		return 1;
	}
	mi_qconv_comp(&cv, bias, zxu, comp);
	if (!cv.depthwise && wk != W8 &&
	    (cv.w.s7 != (wk == W7) || (cv.rgb && cv.rgb->s7 != cv.w.s7))) {
		fprintf(stderr, "FAIL conv iter %d: 7-bit weights %s\n", iter,
			cv.w.s7 ? "with -65 taken as 7-bit" : "not taken as 7-bit");
		fails++;
	}
	s7_cases += !cv.depthwise && cv.w.s7;
	s7_out_cases += !cv.depthwise && wk == W7_OUT;
	s7_rgb_cases += cv.rgb && cv.rgb->s7;
	dw_cases += cv.depthwise;
	px1_cases += px1_focus;
	wino_cases += cv.wino != NULL;
	rgb_cases += cv.rgb != NULL;
	dwtab_cases += cv.depthwise && cv.dwt;
	densetab_cases += !cv.depthwise && cv.dwt;
	/* C4 layouts where the shapes allow them */
	bool in_c4 = !cv.depthwise && cg % 4 == 0 && (rnd() % 2 || chan_focus);
	/* depthwise: C4 input where the AVX2 quad kernel takes it */
	bool dw_in_c4 = cv.depthwise && s.c % 4 == 0 && rnd() % 2;
	bool out_c4 = s.oc % 4 == 0 && (cv.depthwise || ocg % 4 == 0) &&
		      (dwq_focus || rnd() % 2 || (cv.depthwise && rnd() % 2));
	size_t hw = (size_t)s.h * s.w, ohw = (size_t)s.oh * s.ow;
	uint8_t *xin = x;

	/* output modes 1 and 3 split the output channels first
	 * (MI_QCONV_CHAN: 1x1 stride-1 convs reading C4 in place, on the
	 * fake threads) */
	chan_cases += in_c4 && cv.direct1x1 && !x_signed && iter % 2 &&
		      cv.w.nblk >= 2 * fake_threads;

	uint8_t *xc4 = NULL;

	if (dw_in_c4) {
		xc4 = malloc(nx);
		for (int c = 0; c < s.c; c++)
			for (size_t p = 0; p < hw; p++)
				xc4[((c / 4) * hw + p) * 4 + c % 4] = x[c * hw + p];
	}
	if (in_c4) {
		xin = malloc(nx);
		for (int c = 0; c < s.c; c++)
			for (size_t p = 0; p < hw; p++)
				xin[((c / 4) * hw + p) * 4 + c % 4] = x[c * hw + p];
	}
	for (int mode = 0; mode < 4; mode++) {
		struct mi_qepi ep;

		make_epi(&ep, mode, s.oc, comp, mult, fb, kg);
		ep.out_c4 = out_c4 && mode <= MI_QOUT_S8;
		/* the kernels add comp = bias - zxu*wsum to sum(x_u8 * w);
		 * the reference adds the same comp to sum((x - zx) * w) + zx..:
		 * sum(x_u8*w) - zxu*wsum == sum((x-zx)*w), so compare with
		 * acc + bias. */
		struct mi_qepi rep = ep;
		int32_t *rcomp = malloc(s.oc * 4);

		for (int o = 0; o < s.oc; o++) {
			rcomp[o] = bias[o];
			/* ep.mult is rep.mult */
			tie_mult(&ep, mult, o,
				 acc[(size_t)o * s.oh * s.ow + rndi(0, s.oh * s.ow - 1)] + bias[o]);
		}
		rep.comp = rcomp;
		size_t es = esize(mode);
		uint8_t *yr = malloc(ny * es), *yk = malloc(ny * es);

		for (size_t i = 0; i < ny; i++)
			ref_out(&rep, (int)(i / ((size_t)s.oh * s.ow)), acc[i], yr, i);
		/* every ISA; AVX-512 with and without VBMI (depthwise rows),
		 * with VBMI and the depthwise gather tables, then with the AMX
		 * tiles too; then AVX2 with its other variants: the depthwise
		 * row kernels (the channel kernel off), one-pixel 1x1 convs on
		 * the tile kernel (GEMV off), the direct path (no Winograd),
		 * planar depthwise planes (no C4 quad kernel); every one
		 * against the scalar reference */
		for (int path = 0; path <= mi_quant_isa_max() + 4; path++) {
			bool rows = path == mi_quant_isa_max() + 4;
			int isa = rows ? MI_QISA_AVX2 :
				  path > mi_quant_isa_max() ? mi_quant_isa_max() : path;
			bool vbmi = path > mi_quant_isa_max() && !rows;
			bool dwtab = path > mi_quant_isa_max() + 1 && !rows;
			bool amx = path > mi_quant_isa_max() + 2 && !rows;

			if (rows && mi_quant_isa_max() < MI_QISA_AVX2)
				continue;
			mi_quant_set_dwchan(!rows);
			mi_quant_set_gemv2(!rows);
			mi_quant_set_wino(!rows);
			mi_quant_set_dwc4(rows ? 0 : 2); /* every shape */
			if (vbmi && (isa != MI_QISA_AVX512 || !mi_quant_set_vbmi(1)))
				continue;
			if (amx && !mi_quant_set_amx(1))
				continue;
			mi_quant_set_amx(amx);
			mi_quant_set_vbmi(vbmi);
			mi_quant_set_dwtab(dwtab);
			mi_quant_set_isa(isa);
			memset(yk, 0xcd, ny * es);
			bool c4x = in_c4 || (dw_in_c4 && ep.out_c4 && mi_qconv_dw_c4(&cv, &ep));
			bool dwq = cv.depthwise && ep.out_c4 && mi_qconv_dw_c4(&cv, &ep);

			dwq_runs += dwq;
			dwq_tail_runs += dwq && s.oh % 4 && iter % 3;
			dwq_in_runs += dwq && c4x;

			if (mi_qconv_run(&cv, c4x && !in_c4 ? xc4 : xin, x_signed, zx, &ep, yk, NULL,
					 (c4x ? MI_QCONV_IN_C4 : 0) |
						 (mode % 2 ? MI_QCONV_CHAN : 0))) {
				fprintf(stderr, "FAIL conv run refused\n");
				fails++;
			}
			/* fp32: also blocked by 8 straight from the tiles
			 * (MI_QCONV_OUT_BLK8), against this path's planar floats */
			if (mode == MI_QOUT_F32 && !ep.out_c4)
				fails += test_blk8(&cv, c4x && !in_c4 ? xc4 : xin, x_signed, zx, &ep,
						   (c4x ? MI_QCONV_IN_C4 : 0) |
							   (mode % 2 ? MI_QCONV_CHAN : 0),
						   (const float *)(void *)yk);
			if (mode == MI_QOUT_F32 && !ep.out_c4)
				fails += test_blk8_res(&cv, c4x && !in_c4 ? xc4 : xin, x_signed, zx,
						       &ep,
						       (c4x ? MI_QCONV_IN_C4 : 0) |
							       (mode % 2 ? MI_QCONV_CHAN : 0),
						       (const float *)(void *)yk);
			if (ep.out_c4) { /* back to NCHW */
				uint8_t *t = malloc(ny);

				for (int c = 0; c < s.oc; c++)
					for (size_t p = 0; p < ohw; p++)
						t[c * ohw + p] = yk[((c / 4) * ohw + p) * 4 + c % 4];
				memcpy(yk, t, ny);
				free(t);
			}
			if (memcmp(yr, yk, ny * es)) {
				size_t i = 0;

				while (!memcmp(yr + i * es, yk + i * es, es))
					i++;
				fprintf(stderr,
					"FAIL conv iter %d isa %s%s%s%s mode %d%s%s: c%d oc%d g%d %dx%d k%dx%d s%d,%d d%d,%d p%d,%d,%d,%d %s: first diff at %zu\n",
					iter, mi_quant_isa_name(isa),
					amx ? "+vbmi+dwtab+amx" : dwtab ? "+vbmi+dwtab" : vbmi ? "+vbmi" :
					rows ? "-dwrows" : "",
					cv.wino && isa == MI_QISA_AVX2 && !rows ? "+wino" : "",
					cv.rgb && isa == MI_QISA_AVX2 ? "+rgb" : "", mode,
					c4x ? " in-c4" : "",
					ep.out_c4 ? " out-c4" : "", s.c, s.oc, s.group,
					s.h, s.w, s.kh, s.kw, s.sh, s.sw, s.dh, s.dw, s.pt,
					s.pl, s.pb, s.pr, cv.depthwise ? "dw" : cv.direct1x1 ? "1x1" : "im2col", i);
				fails++;
			}
		}
		free(yr);
		free(yk);
		free(rcomp);
	}
	mi_qconv_fini(&cv);
	if (xin != x)
		free(xin);
	free(xc4);
	free(w);
	free(x);
	free(acc);
	free(bias);
	free(comp);
	free(mult);
	free(fb);
	return fails;
}

static int test_gemm(int iter)
{
	int m = rnd() % 4 ? rndi(1, 70) : rndi(1, 5), n = rndi(1, 40), k = rndi(1, 90);

	if (iter % 4 == 1) { /* deep K, several 16-column AMX tiles */
		n = rndi(9, 80);
		k = rndi(60, 300);
	}
	int lda = k + rndi(0, 3), ldy = n + rndi(0, 2);
	int8_t *w = malloc((size_t)n * k);
	uint8_t *a = malloc((size_t)m * lda);
	int32_t *comp = malloc(n * 4), *acc = malloc((size_t)m * n * 4);
	float *mult = malloc(n * 4), *fb = malloc(n * 4);
	int za = rndi(0, 255), fails = 0;
	struct mi_qweights qw;
	struct wctx wc = { w, n, k };

	for (int i = 0; i < n * k; i++)
		w[i] = (int8_t)rndi(-128, 127);
	if (wkind(iter) != W8)
		draw_w7(w, (size_t)n * k, wkind(iter));
	for (int i = 0; i < m * lda; i++)
		a[i] = wkind(iter) == W7_OUT || (wkind(iter) == W7 && rnd() % 4) ? 255 :
										   (uint8_t)rnd();
	for (int i = 0; i < m; i++)
		for (int o = 0; o < n; o++) {
			int32_t s = 0;

			for (int kk = 0; kk < k; kk++)
				s += (a[i * lda + kk] - za) * w[o * k + kk];
			acc[i * n + o] = s;
		}
	mi_quant_set_amx(1);
	mi_quant_set_isa(MI_QISA_AVX2); /* the AVX2 int16 weights too */
	if (mi_qweights_pack(&qw, 1, n, k, wget, &wc))
		return 1;
	if (wkind(iter) != W8 && qw.s7 != (wkind(iter) == W7)) {
		fprintf(stderr, "FAIL gemm iter %d: 7-bit weights %s\n", iter,
			qw.s7 ? "with -65 taken as 7-bit" : "not taken as 7-bit");
		fails++;
	}
	int32_t *bias = malloc(n * 4);

	for (int o = 0; o < n; o++) {
		bias[o] = rndi(-3000, 3000);
		if (iter % 3 == 2 && rnd() % 4 == 0) /* sums beyond 2^24 */
			bias[o] += rnd() % 2 ? 1 << 25 : -(1 << 25);
		comp[o] = bias[o] - za * qw.wsum[o];
	}
	for (int mode = 0; mode < 4; mode++) {
		struct mi_qepi ep, rep;
		size_t es = esize(mode);
		uint8_t *yr = calloc((size_t)m * ldy, es), *yk = calloc((size_t)m * ldy, es);

		make_epi(&ep, mode, n, comp, mult, fb, k);
		for (int o = 0; o < n; o++)
			tie_mult(&ep, mult, o, acc[rndi(0, m - 1) * n + o] + bias[o]);
		rep = ep;
		rep.comp = bias;
		for (int i = 0; i < m; i++)
			for (int o = 0; o < n; o++)
				ref_out(&rep, o, acc[i * n + o], yr, (size_t)i * ldy + o);
		/* every ISA, then AVX-512 with the AMX tiles, then AVX2 with
		 * few rows on the tile kernel (GEMV off) */
		for (int path = 0; path <= mi_quant_isa_max() + 2; path++) {
			bool tiles = path == mi_quant_isa_max() + 2;
			int isa = tiles ? MI_QISA_AVX2 :
				  path > mi_quant_isa_max() ? mi_quant_isa_max() : path;
			bool amx = path > mi_quant_isa_max() && !tiles;

			if (tiles && (mi_quant_isa_max() < MI_QISA_AVX2 || m > 4))
				continue;
			mi_quant_set_gemv2(!tiles);
			if (amx && (isa != MI_QISA_AVX512 || !mi_quant_set_amx(1)))
				continue;
			mi_quant_set_amx(amx);
			mi_quant_set_isa(isa);
			memset(yk, 0, (size_t)m * ldy * es);
			mi_qgemm(&qw, a, m, lda, &ep, yk, ldy, NULL);
			if (memcmp(yr, yk, (size_t)m * ldy * es)) {
				fprintf(stderr, "FAIL gemm iter %d isa %s%s mode %d m%d n%d k%d\n",
					iter, mi_quant_isa_name(isa), amx ? "+amx" : tiles ? "-gemv" : "",
					mode, m, n, k);
				fails++;
			}
		}
		free(yr);
		free(yk);
	}
	mi_qweights_free(&qw);
	free(w);
	free(a);
	free(comp);
	free(acc);
	free(mult);
	free(fb);
	free(bias);
	return fails;
}

/* QuantizeLinear / DequantizeLinear loops: every ISA equals the scalar
 * formula (ties included). */
static int test_qdq(int iter)
{
	int n = rndi(1, 300), fails = 0;
	float *x = malloc(n * 4), *yr = malloc(n * 4), *yk = malloc(n * 4);
	uint8_t *qr = malloc(n), *qk = malloc(n);
	float scale = (float)rndi(1, 1000) / 997.0f;
	int dt = rnd() % 2 ? MI_DT_UINT8 : MI_DT_INT8;
	int zp = dt == MI_DT_UINT8 ? rndi(0, 255) : rndi(-128, 127);

	for (int i = 0; i < n; i++) /* half-integers hit the ties */
		x[i] = rnd() % 4 ? (float)rndi(-40000, 40000) / 100.0f :
				   ((float)rndi(-300, 300) + 0.5f) * scale;
	for (int i = 0; i < n; i++) {
		float v = nearbyintf(x[i] / scale) + (float)zp;
		float lo = dt == MI_DT_UINT8 ? 0 : -128, hi = dt == MI_DT_UINT8 ? 255 : 127;

		v = v < lo ? lo : v > hi ? hi : v;
		qr[i] = (uint8_t)(int)v;
		yr[i] = (float)((dt == MI_DT_UINT8 ? (int32_t)qr[i] : (int32_t)(int8_t)qr[i]) - zp) *
			scale;
	}
	for (int isa = 0; isa <= mi_quant_isa_max(); isa++) {
		mi_quant_set_isa(isa);
		mi_quantize_f32(x, n, scale, zp, dt, qk);
		mi_dequantize(qr, dt, n, scale, zp, yk);
		if (memcmp(qr, qk, n) || memcmp(yr, yk, n * 4)) {
			fprintf(stderr, "FAIL q/dq iter %d isa %s n %d\n", iter,
				mi_quant_isa_name(isa), n);
			fails++;
		}
	}
	free(x), free(yr), free(yk), free(qr), free(qk);
	return fails;
}

/*
 * QuantizeLinear's division-free path (mi_rne_div_avx512: multiply by the
 * reciprocal, divide only near a tie) on the values that break it: within
 * a few ulps of every half-integer quotient, huge, tiny, subnormal, zero,
 * NaN and infinite inputs, scales inside and outside the reciprocal's
 * range; every ISA vs the scalar division.
 */
static int test_qdiv(int iter)
{
	int n = rndi(16, 700), fails = 0;
	float *x = malloc(n * 4);
	uint8_t *qr = malloc(n), *qk = malloc(n);
	float scale = rnd() % 8 ? (float)rndi(1, 100000) / 99991.0f * ldexpf(1.0f, rndi(-12, 6)) :
				  ldexpf((float)rndi(1, 1000), rndi(-140, 120));
	int dt = rnd() % 2 ? MI_DT_UINT8 : MI_DT_INT8;
	int zp = dt == MI_DT_UINT8 ? rndi(0, 255) : rndi(-128, 127);
	float lo = dt == MI_DT_UINT8 ? 0 : -128, hi = dt == MI_DT_UINT8 ? 255 : 127;

	for (int i = 0; i < n; i++) {
		int k = rnd() % 16;
		float v;

		if (k < 10) { /* a half-integer quotient, then nudged a few ulps */
			v = ((float)rndi(-300, 300) + 0.5f) * scale;
			for (int u = rndi(-6, 6); u; u += u < 0 ? 1 : -1)
				v = nextafterf(v, u < 0 ? -INFINITY : INFINITY);
		} else if (k < 13) {
			v = ldexpf((float)rndi(-1000000, 1000000), rndi(-160, 100));
		} else {
			static const float sp[] = { 0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-45f,
						    -1e-45f, 3e38f, -3e38f, 0x1p23f, 0x1p22f + 0.5f };

			v = sp[rnd() % (sizeof(sp) / sizeof(sp[0]))];
		}
		x[i] = v;
	}
	for (int i = 0; i < n; i++) {
		float v = nearbyintf(x[i] / scale) + (float)zp;

		v = !(v >= lo) ? lo : v > hi ? hi : v;
		qr[i] = (uint8_t)(int)v;
	}
	for (int isa = 0; isa <= mi_quant_isa_max(); isa++) {
		mi_quant_set_isa(isa);
		mi_quantize_f32(x, n, scale, zp, dt, qk);
		if (memcmp(qr, qk, n)) {
			fprintf(stderr, "FAIL q near ties iter %d isa %s n %d scale %g\n", iter,
				mi_quant_isa_name(isa), n, scale);
			fails++;
		}
	}
	free(x), free(qr), free(qk);
	return fails;
}

/*
 * Four planar float rows <-> C4 quads (the standalone Q/DQ between planar
 * fp32 and C4 int8 tensors): QuantizeLinear of every row, near-tie, huge,
 * NaN and infinite values included, and DequantizeLinear back into four
 * rows of stride rs; every ISA vs the scalar formulas.  Bytes past np and
 * floats past each row's np must stay untouched.
 */
static int test_qdq_c4(int iter)
{
	int np = rndi(1, 90), rs = np + rndi(0, 20), fails = 0;
	float *x = malloc(4 * rs * 4), *yr = malloc(4 * rs * 4), *yk = malloc(4 * rs * 4);
	uint8_t *qr = malloc(4 * np + 8), *qk = malloc(4 * np + 8), *b = malloc(4 * np);
	float scale = rnd() % 8 ? (float)rndi(1, 100000) / 99991.0f * ldexpf(1.0f, rndi(-12, 6)) :
				  ldexpf((float)rndi(1, 1000), rndi(-140, 120));
	int dt = rnd() % 2 ? MI_DT_UINT8 : MI_DT_INT8;
	int zp = dt == MI_DT_UINT8 ? rndi(0, 255) : rndi(-128, 127);
	float lo = dt == MI_DT_UINT8 ? 0 : -128, hi = dt == MI_DT_UINT8 ? 255 : 127;

	for (int i = 0; i < 4 * rs; i++) {
		int k = rnd() % 16;
		float v;

		if (k < 8) {
			v = ((float)rndi(-300, 300) + 0.5f) * scale;
			for (int u = rndi(-3, 3); u; u += u < 0 ? 1 : -1)
				v = nextafterf(v, u < 0 ? -INFINITY : INFINITY);
		} else if (k < 14) {
			v = (float)rndi(-300, 300) * scale * 0.37f;
		} else {
			static const float sp[] = { 0.0f, -0.0f, INFINITY, -INFINITY, NAN, 3e38f };

			v = sp[rnd() % (sizeof(sp) / sizeof(sp[0]))];
		}
		x[i] = v;
	}
	memset(qr, 0xa5, 4 * np + 8);
	for (int p = 0; p < np; p++)
		for (int k = 0; k < 4; k++) {
			float v = nearbyintf(x[k * rs + p] / scale) + (float)zp;

			v = !(v >= lo) ? lo : v > hi ? hi : v;
			qr[p * 4 + k] = (uint8_t)(int)v;
		}
	for (int i = 0; i < 4 * np; i++)
		b[i] = (uint8_t)rnd();
	for (int i = 0; i < 4 * rs; i++)
		yr[i] = -7.0f;
	for (int p = 0; p < np; p++)
		for (int k = 0; k < 4; k++)
			yr[k * rs + p] = (float)((dt == MI_DT_UINT8 ? (int32_t)b[p * 4 + k] :
								 (int32_t)(int8_t)b[p * 4 + k]) - zp) * scale;
	for (int isa = 0; isa <= mi_quant_isa_max(); isa++) {
		mi_quant_set_isa(isa);
		memset(qk, 0xa5, 4 * np + 8);
		mi_quantize_c4(x, rs, np, scale, zp, dt, qk);
		for (int i = 0; i < 4 * rs; i++)
			yk[i] = -7.0f;
		mi_dequantize_c4(b, np, dt, scale, zp, yk, rs);
		if (memcmp(qr, qk, 4 * np + 8) || memcmp(yr, yk, 4 * rs * 4)) {
			fprintf(stderr, "FAIL q/dq c4 iter %d isa %s np %d rs %d scale %g %s\n", iter,
				mi_quant_isa_name(isa), np, rs, scale,
				memcmp(qr, qk, 4 * np + 8) ? "quantize" : "dequantize");
			fails++;
		}
	}
	free(x), free(yr), free(yk), free(qr), free(qk), free(b);
	return fails;
}

/* uint8/int8 MaxPool plane vs a direct loop over the window */
/* Scalar MaxPool of one plane (the reference). */
static void ref_pool(const uint8_t *x, const struct mi_qpool_shape *s, bool s8, uint8_t *y)
{
	for (int oy = 0; oy < s->oh; oy++)
		for (int ox = 0; ox < s->ow; ox++) {
			int m = s8 ? -128 : 0;

			for (int ky = 0; ky < s->kh; ky++)
				for (int kx = 0; kx < s->kw; kx++) {
					int iy = oy * s->sh - s->pt + ky * s->dh;
					int ix = ox * s->sw - s->pl + kx * s->dw;

					if (iy < 0 || iy >= s->h || ix < 0 || ix >= s->w)
						continue;
					int e = s8 ? (int8_t)x[iy * s->w + ix] : x[iy * s->w + ix];

					m = e > m ? e : m;
				}
			y[oy * s->ow + ox] = (uint8_t)m;
		}
}

/* The C4 MaxPool on 4 random planes interleaved vs ref_pool per plane. */
static int test_pool_c4(int iter, const struct mi_qpool_shape *s, bool s8)
{
	size_t hw = (size_t)s->h * s->w, ohw = (size_t)s->oh * s->ow;
	uint8_t *x = malloc(hw * 4), *x4 = malloc(hw * 4), *yr = malloc(ohw * 4);
	uint8_t *y4 = malloc(ohw * 4), *tmp = malloc(4 * s->w + 64);
	int fails = 0;

	for (size_t i = 0; i < hw * 4; i++)
		x[i] = (uint8_t)rnd();
	for (int c = 0; c < 4; c++) {
		ref_pool(x + c * hw, s, s8, yr + c * ohw);
		for (size_t p = 0; p < hw; p++)
			x4[p * 4 + c] = x[c * hw + p];
	}
	for (int isa = 0; isa <= mi_quant_isa_max(); isa++) {
		mi_quant_set_isa(isa);
		memset(y4, 0x5a, ohw * 4);
		mi_qmaxpool_plane_c4(x4, s, s8, tmp, y4);
		for (size_t i = 0; i < ohw * 4; i++)
			if (y4[i] != yr[(i % 4) * ohw + i / 4]) {
				fprintf(stderr,
					"FAIL maxpool c4 iter %d isa %s %dx%d k %dx%d s %d,%d d %d,%d p %d,%d %s at %zu\n",
					iter, mi_quant_isa_name(isa), s->h, s->w, s->kh, s->kw, s->sh,
					s->sw, s->dh, s->dw, s->pt, s->pl, s8 ? "s8" : "u8", i);
				fails++;
				break;
			}
	}
	free(x), free(x4), free(yr), free(y4), free(tmp);
	return fails;
}

static int pool_check(int iter, const struct mi_qpool_shape *sp, bool s8);

static int pool_both(int iter, const struct mi_qpool_shape *s, bool s8)
{
	return pool_check(iter, s, s8);
}

/*
 * MaxPools of the benchmark nets (SqueezeNet 1.1's 3x3 stride 2 ceil
 * mode, ShuffleNetV2's padded one), and output widths just under, at and
 * over the AVX2 vectors (8 C4 pixels, 16 and 32 planar bytes) with and
 * without a ceil-mode last window hanging over the row.
 */
static int test_pool_fixed(void)
{
	static const int net[][6] = { /* h, w, k, s, pad, right pad */
		{ 111, 111, 3, 2, 0, 1 }, { 55, 55, 3, 2, 0, 1 }, { 27, 27, 3, 2, 0, 1 },
		{ 112, 112, 3, 2, 1, 1 }, { 13, 13, 3, 2, 0, 1 }, { 14, 14, 2, 2, 0, 0 },
	};
	static const int ows[] = { 1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 33, 47, 63, 64, 65 };
	int fails = 0, iter = 0;

	for (size_t i = 0; i < sizeof(net) / sizeof(net[0]); i++)
		for (int s8 = 0; s8 < 2; s8++) {
			const int *n = net[i];
			struct mi_qpool_shape s = {
				.h = n[0], .w = n[1], .kh = n[2], .kw = n[2], .sh = n[3],
				.sw = n[3], .dh = 1, .dw = 1, .pt = n[4], .pl = n[4],
			};

			/* ceil mode: a last window that starts inside the row */
			s.oh = (s.h + s.pt + n[5] - s.kh + s.sh - 1) / s.sh + 1;
			s.ow = (s.w + s.pl + n[5] - s.kw + s.sw - 1) / s.sw + 1;
			if ((s.oh - 1) * s.sh >= s.h + s.pt)
				s.oh--;
			if ((s.ow - 1) * s.sw >= s.w + s.pl)
				s.ow--;
			fails += pool_both(1000 + iter++, &s, s8);
		}
	for (size_t i = 0; i < sizeof(ows) / sizeof(ows[0]); i++)
		for (int v = 0; v < 8; v++) {
			int k = 2 + v % 2, st = 1 + v / 2 % 2, ceil = v / 4;
			struct mi_qpool_shape s = {
				.h = 5, .kh = k, .kw = k, .sh = st, .sw = st, .dh = 1, .dw = 1,
				.pt = v % 2, .pl = v % 2, .ow = ows[i],
			};

			/* ow outputs; ceil: the last window one column short */
			s.w = (s.ow - 1) * st + k - 2 * s.pl - ceil;
			if (s.w < 1)
				continue;
			s.oh = (s.h + 2 * s.pt - k) / st + 1;
			fails += pool_both(1000 + iter++, &s, v % 3 == 0);
		}
	return fails;
}

static int test_pool(int iter)
{
	struct mi_qpool_shape s;
	bool s8 = rnd() % 2;

	s.kh = rndi(1, 4);
	s.kw = rndi(1, 4);
	s.sh = rndi(1, 3);
	s.sw = rnd() % 3 ? rndi(1, 2) : 3;
	s.dh = rnd() % 4 ? 1 : 2;
	s.dw = rnd() % 4 ? 1 : 2;
	s.pt = rndi(0, s.kh - 1);
	s.pl = rndi(0, s.kw - 1);
	s.h = rndi(1, 40);
	s.w = rndi(1, 150);
	int eh = (s.kh - 1) * s.dh + 1, ew = (s.kw - 1) * s.dw + 1;
	int pb = rndi(0, s.kh - 1), pr = rndi(0, s.kw - 1);

	s.oh = (s.h + s.pt + pb - eh) / s.sh + 1;
	s.ow = (s.w + s.pl + pr - ew) / s.sw + 1;
	if (s.oh < 1 || s.ow < 1)
		return 0;
	return pool_both(iter, &s, s8);
}

/* The plane MaxPool and the C4 one vs a direct loop over the window. */
static int pool_check(int iter, const struct mi_qpool_shape *sp, bool s8)
{
	struct mi_qpool_shape s = *sp;
	int fails = 0;
	uint8_t *x = malloc((size_t)s.h * s.w), *yr = malloc((size_t)s.oh * s.ow);
	uint8_t *yk = malloc((size_t)s.oh * s.ow), *tmp = malloc(s.w + 64);

	for (int i = 0; i < s.h * s.w; i++)
		x[i] = (uint8_t)rnd();
	for (int oy = 0; oy < s.oh; oy++)
		for (int ox = 0; ox < s.ow; ox++) {
			int m = s8 ? -128 : 0;

			for (int ky = 0; ky < s.kh; ky++)
				for (int kx = 0; kx < s.kw; kx++) {
					int iy = oy * s.sh - s.pt + ky * s.dh;
					int ix = ox * s.sw - s.pl + kx * s.dw;

					if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w)
						continue;
					int e = s8 ? (int8_t)x[iy * s.w + ix] : x[iy * s.w + ix];

					m = e > m ? e : m;
				}
			yr[oy * s.ow + ox] = (uint8_t)m;
		}
	for (int isa = 0; isa <= mi_quant_isa_max(); isa++) {
		mi_quant_set_isa(isa);
		memset(yk, 0x5a, (size_t)s.oh * s.ow);
		mi_qmaxpool_plane(x, &s, s8, tmp, yk);
		if (memcmp(yr, yk, (size_t)s.oh * s.ow)) {
			fprintf(stderr,
				"FAIL maxpool iter %d isa %s %dx%d k %dx%d s %d,%d d %d,%d p %d,%d %s\n",
				iter, mi_quant_isa_name(isa), s.h, s.w, s.kh, s.kw, s.sh, s.sw,
				s.dh, s.dw, s.pt, s.pl, s8 ? "s8" : "u8");
			fails++;
		}
	}
	free(x), free(yr), free(yk), free(tmp);
	return fails + test_pool_c4(iter, &s, s8);
}

static int wbound_get(const void *ctx, int g, int o, int k)
{
	return -128;
}

/* Winograd only where 4 x the int32 sums cannot overflow: weights all
 * -128 on 1827 input channels fit (4 * 255 * 1827 * 9 * 128 < 2^31), on
 * 1828 they do not (the direct path). */
static int test_wino_bound(void)
{
	struct mi_qconv_shape s = { .c = 1827, .h = 2, .w = 2, .oc = 16, .oh = 2, .ow = 2,
				    .kh = 3, .kw = 3, .sh = 1, .sw = 1, .dh = 1, .dw = 1,
				    .pt = 1, .pl = 1, .pb = 1, .pr = 1, .group = 1 };
	struct mi_qwino *a = mi_qwino_build(&s, wbound_get, NULL), *b;

	s.c = 1828;
	b = mi_qwino_build(&s, wbound_get, NULL);
	if (!a || b) {
		fprintf(stderr, "FAIL winograd bound: c1827 %s, c1828 %s\n", a ? "built" : "refused",
			b ? "built" : "refused");
		mi_qwino_free(a);
		mi_qwino_free(b);
		return 1;
	}
	mi_qwino_free(a);
	return 0;
}

/* A parallel-for that runs the items in reverse order on one thread but
 * hands out thread ids 0..fake_threads-1: the kernels' work splitting and
 * per-thread workspaces are exercised without real threads. */
static void fake_for(int n, mi_qpar_fn fn, void *arg)
{
	for (int i = n - 1; i >= 0; i--)
		fn(arg, i, i % fake_threads);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 300, fails = 0;

	printf("int8 kernels: ISA paths generic..%s\n",
	       mi_quant_isa_name(mi_quant_isa_max()));
	if (mi_quant_isa_max() == MI_QISA_AVX512 && mi_quant_set_amx(1))
		printf("int8 kernels: AMX-INT8 tiles tested against the other paths\n");
	else
		printf("int8 kernels: SKIP AMX-INT8 cases: no AMX on this CPU (or not granted by the OS)\n");
	for (int i = 0; i < n; i++) {
		/* every other case as if on 2 or 3 threads */
		fake_threads = 2 + i % 4 / 2;
		mi_quant_set_parallel(i % 2 ? fake_for : NULL, fake_threads);
		fails += test_conv(i);
		fails += test_gemm(i);
		fails += test_qdq(i);
		fails += test_qdiv(i);
		fails += test_qdq_c4(i);
		fails += test_pool(i);
	}
	fails += test_pool_fixed();
	/* 1x1 convs split by output channels first, on 2 and 3 fake threads */
	chan_focus = true;
	for (int i = 0; i < n / 10; i++) {
		fake_threads = 2 + i % 2;
		mi_quant_set_parallel(fake_for, fake_threads);
		fails += test_conv(2 * i + 1);
	}
	chan_focus = false;
	/* 1x1 convs on one pixel, 1 to 3 (fake) threads */
	px1_focus = true;
	for (int i = 0; i < n / 10; i++) {
		fake_threads = 2 + i % 2;
		mi_quant_set_parallel(i % 3 ? fake_for : NULL, fake_threads);
		fails += test_conv(3 * i + 1);
	}
	px1_focus = false;
	/* dense convs on 1 to 4 input channels (gather tables, AMX tiles) */
	dense_focus = true;
	for (int i = 0; i < n / 10; i++) {
		fake_threads = 2 + i % 2;
		mi_quant_set_parallel(i % 3 ? fake_for : NULL, fake_threads);
		fails += test_conv(5 * i + 2);
	}
	dense_focus = false;
	/* 3x3 stride-1 convs: Winograd on AVX2 vs the others, 1 to 3 (fake)
	 * threads */
	wino_focus = true;
	for (int i = 0; i < n / 4; i++) {
		fake_threads = 2 + i % 2;
		mi_quant_set_parallel(i % 3 ? fake_for : NULL, fake_threads);
		fails += test_conv(5 * i + 2);
	}
	wino_focus = false;
	mi_qwino_test_budget(0);
	/* RGB first convs: the AVX2 dense K order vs the others, 1 to 3
	 * (fake) threads */
	rgb_focus = true;
	for (int i = 0; i < n / 5; i++) {
		fake_threads = 2 + i % 2;
		mi_quant_set_parallel(i % 3 ? fake_for : NULL, fake_threads);
		fails += test_conv(5 * i + 2);
	}
	rgb_focus = false;
	/* depthwise convs on the AVX2 quad kernel (dwq_item), 1 to 3 (fake)
	 * threads */
	dwq_focus = true;
	for (int i = 0; i < n / 5; i++) {
		fake_threads = 2 + i % 2;
		mi_quant_set_parallel(i % 3 ? fake_for : NULL, fake_threads);
		fails += test_conv(5 * i);
	}
	dwq_focus = false;
	fails += test_wino_bound();
	/* every path was compared with mi_qrequant, which equals exact_rq */
	printf("requantization: %ld fp32 products on a half-integer (exact product %ld below, %ld above, %ld on it), %ld sums beyond 2^24: %ld differ from the exact rounding\n",
	       rq_below + rq_above + rq_on, rq_below, rq_above, rq_on, rq_wide, rq_fails);
	fails += rq_fails;
	if (n >= 50 && (!rq_below || !rq_above || !rq_on || !rq_wide)) {
		fprintf(stderr, "FAIL requantization: a kind of halfway product or wide sum not drawn\n");
		fails++;
	}
	printf("%d random conv + %d gemm cases x 4 output modes, %d q/dq + %d q-near-tie + %d q/dq-c4 + %d maxpool cases, x %d ISAs: %d failures\n",
	       n, n, n, n, n, n, mi_quant_isa_max() + 1, fails);
	printf("  (%d depthwise conv cases, %d with gather tables; %d dense ones with tables; %d 1x1 split by output channels; %d 1x1 on one pixel; %d 3x3 with Winograd; %d RGB first convs)\n",
	       dw_cases, dwtab_cases, densetab_cases, chan_cases, px1_cases, wino_cases, rgb_cases);
	printf("  (%d depthwise runs on the AVX2 C4 quad kernel, %d of them reading C4, %d with oh %% 4 rows left in one step)\n",
	       dwq_runs, dwq_in_runs, dwq_tail_runs);
	if (mi_quant_isa_max() >= MI_QISA_AVX2 && !dwq_tail_runs) {
		fprintf(stderr, "FAIL no quad-kernel depthwise run with oh %% 4 rows left\n");
		fails++;
	}
	printf("  (%d fp32 runs blocked by 8 from the tile epilogues, %d refused)\n", blk8_runs,
	       blk8_refused);
	printf("  (%d of them with a residual Add fused)\n", res_runs);
	if (mi_quant_isa_max() >= MI_QISA_AVX2 && !blk8_runs) {
		fprintf(stderr, "FAIL no fp32 run blocked by 8 from the tiles\n");
		fails++;
	}
	printf("  (%d dense convs on 7-bit weights (tile_avx2b on AVX2), %d of them RGB first convs; %d with one weight -65, kept off it)\n",
	       s7_cases, s7_rgb_cases, s7_out_cases);
	return fails ? 1 : 0;
}
