/* SPDX-License-Identifier: MIT */
/*
 * NCHWc kernel bodies shared by every ISA (see nchwc.h), included by
 * kern_{generic,avx2,avx512}.c right after kern_impl.h: VW is the block,
 * KMR x KNV the register tile of the direct convolution (output
 * positions x output channel blocks, as the GEMM micro-kernel).
 */
#include "cpu/nchwc.h"

#if VW == 16
#define NTAB mi_nc_kern_avx512
#elif VW == 8
#define NTAB mi_nc_kern_avx2
#else
#define NTAB mi_nc_kern_generic
#endif

/* register tile: up to NC_ACC accumulators, NC_OB output blocks x up
 * to NC_R positions (fewer blocks -> more positions) */
#define NC_OB KNV
#define NC_ACC (KMR * KNV)
#define NC_R 12
/* depthwise: output positions per tile */
#define ND_R 8

/* vact (vec.h), inlined into the unrolled tile epilogues */
static inline __attribute__((always_inline)) vf nc_act(int act, vf x,
							float lo, float hi)
{
	switch (act) {
	case MI_ACT_RELU:
		return vmax(x, vset1(0.0f));
	case MI_ACT_CLIP:
		return vmin(vmax(x, vset1(lo)), vset1(hi));
	case MI_ACT_HSWISH:
		return x * vmin(vmax(x * lo + hi, vset1(0.0f)), vset1(1.0f));
	case MI_ACT_SIGMOID:
		return vsigmoid(x);
	case MI_ACT_SILU:
		return vsilu(x);
	default:
		return x;
	}
}

/* Vector of channels [cb*VW, cb*VW + VW) at position pos of a [c][hw]
 * tensor in layout blk (NCHW lanes past c read as 0). */
static inline vf nc_ld(const float *t, int blk, int cb, int64_t hw,
		       int64_t pos, int c)
{
	vf v;
	int l, n;

	if (blk)
		return vld(t + ((int64_t)cb * hw + pos) * VW);
	v = vset1(0.0f);
	n = c - cb * VW < VW ? c - cb * VW : VW;
	for (l = 0; l < n; l++)
		v[l] = t[((int64_t)cb * VW + l) * hw + pos];
	return v;
}

static inline void nc_st(float *t, int blk, int cb, int64_t hw, int64_t pos,
			 int c, vf v)
{
	int l, n;

	if (blk) {
		vst(t + ((int64_t)cb * hw + pos) * VW, v);
		return;
	}
	n = c - cb * VW < VW ? c - cb * VW : VW;
	for (l = 0; l < n; l++)
		t[((int64_t)cb * VW + l) * hw + pos] = v[l];
}

/*
 * Tile epilogue: y at positions pos0 + r of blocks mb + o gets
 * act(acc[r][o] (+ residual)).  p's fields are read once (stores through
 * y may alias them, so the loop would reload them per vector) and the
 * activation is dispatched once per tile for blocked outputs: with few
 * input channels (16-27: the first convs of MobileNets) the epilogue was
 * ~40 % of a tile's time.
 */
#define NC_EPI_CASE(A)                                                    \
	case A:                                                           \
		if (rb) {                                                 \
			UNROLL_MR for (r = 0; r < R; r++)                 \
				UNROLL_NV for (o = 0; o < OB; o++)        \
					vst(yb + o * os + r * VW,         \
					    nc_act(A, acc[r][o] +         \
						   vld(rb + o * os + r * VW), \
						   lo, hi));              \
		} else {                                                  \
			UNROLL_MR for (r = 0; r < R; r++)                 \
				UNROLL_NV for (o = 0; o < OB; o++)        \
					vst(yb + o * os + r * VW,         \
					    nc_act(A, acc[r][o], lo, hi));\
		}                                                         \
		return;
static inline __attribute__((always_inline)) void
nc_epi(const int R, const int OB, const struct mi_nc_conv *p,
       const float *res, float *y, int mb, int64_t ohw, int64_t pos0,
       vf acc[][NC_OB])
{
	const int act = p->act, yblk = p->yblk, rblk = p->rblk, m = p->m;
	const float lo = p->lo, hi = p->hi;
	int r, o;

	if (yblk && (!res || rblk)) {
		const ptrdiff_t os = (ptrdiff_t)ohw * VW;
		float *yb = y + ((int64_t)mb * ohw + pos0) * VW;
		const float *rb = res ? res + ((int64_t)mb * ohw + pos0) * VW :
					NULL;

		switch (act) {
		NC_EPI_CASE(MI_ACT_NONE)
		NC_EPI_CASE(MI_ACT_RELU)
		NC_EPI_CASE(MI_ACT_CLIP)
		NC_EPI_CASE(MI_ACT_HSWISH)
		NC_EPI_CASE(MI_ACT_SIGMOID)
		NC_EPI_CASE(MI_ACT_SILU)
		default:
			break;
		}
	}
	UNROLL_MR for (r = 0; r < R; r++) {
		int64_t pos = pos0 + r;

		UNROLL_NV for (o = 0; o < OB; o++) {
			vf v = acc[r][o];

			if (res)
				v += nc_ld(res, rblk, mb + o, ohw, pos, m);
			v = nc_act(act, v, lo, hi);
			nc_st(y, yblk, mb + o, ohw, pos, m, v);
		}
	}
}
#undef NC_EPI_CASE

/* ncc_tile's taps through p->koff: acc[r][o] += x[koff[k] + r * rs] *
 * weight k of block o, for k < nk. */
static inline __attribute__((always_inline)) void
ncc_koff(const int OB, const int R, const ptrdiff_t rs, const int32_t *koff,
	 int nk, const float *xp, const float *wt, ptrdiff_t wos,
	 vf acc[NC_ACC][NC_OB])
{
	for (int k = 0; k < nk; k++) {
		const float *xl = xp + koff[k];
		vf wv[NC_OB];
		int r, o;

		UNROLL_NV for (o = 0; o < OB; o++)
			wv[o] = vld(wt + (ptrdiff_t)k * VW + o * wos);
		UNROLL_MR for (r = 0; r < R; r++) {
			vf xv = vset1(xl[r * rs]);

			UNROLL_NV for (o = 0; o < OB; o++)
				acc[r][o] += xv * wv[o];
		}
	}
}

/*
 * Direct convolution tile: R0 consecutive output positions of row oy
 * starting at ox, OB0 output blocks from mb; taps ky in [ky0, ky1),
 * kx in [kx0, kx1) (all valid for every position of the tile).  The
 * input is read by scalar broadcasts, so NCHW and NCHWc differ only in
 * strides: channel ic sits at (ic / VW) * cbs + (ic % VW) * ls, pixel
 * (iy, ix) at (iy * w + ix) * ps.
 */
static inline __attribute__((always_inline)) void
ncc_tile(const int OB0, const int R0, const struct mi_nc_conv *p,
	 const float *x, const float *res, float *y, int mb, int oy, int ox,
	 int ky0, int ky1, int kx0, int kx1)
{
	const int OB = OB0 > NC_OB ? NC_OB : OB0;
	const int R = R0 * OB > NC_ACC ? NC_ACC / OB : R0;
	const int64_t hw = (int64_t)p->h * p->w, ohw = (int64_t)p->oh * p->ow;
	const ptrdiff_t ps = p->xblk ? VW : 1;
	const ptrdiff_t ls = p->xblk ? 1 : hw;
	const ptrdiff_t cbs = hw * VW;
	const ptrdiff_t rstep = p->sw * ps;
	const ptrdiff_t wos = (ptrdiff_t)p->kh * p->kw * p->c * VW;
	const int c = p->c;
	vf acc[NC_ACC][NC_OB];
	int r, o, ky, kx, icb, l;

	UNROLL_MR for (r = 0; r < R; r++)
		UNROLL_NV for (o = 0; o < OB; o++)
			acc[r][o] = vld(p->bias + (mb + o) * VW);
	if (p->koff && ky0 == 0 && ky1 == p->kh && kx0 == 0 && kx1 == p->kw) {
		/* every tap in range, NCHW input (the stem convs: c = 3):
		 * one loop over (ky, kx, ic) instead of three short ones;
		 * strides 1 and 2 as constants (displacements, not a chain
		 * of pointer adds) */
		const float *xp = x + (ptrdiff_t)(oy * p->sh - p->pt) * p->w +
				  ox * p->sw - p->pl;
		const float *wt = p->wp + mb * wos;
		const int nk = p->kh * p->kw * c;

		if (p->sw == 2)
			ncc_koff(OB, R, 2, p->koff, nk, xp, wt, wos, acc);
		else /* 1: mi_nc_tap_offsets */
			ncc_koff(OB, R, 1, p->koff, nk, xp, wt, wos, acc);
		ky1 = ky0; /* done: skip the general loops */
	}
	for (ky = ky0; ky < ky1; ky++) {
		int iy = oy * p->sh - p->pt + ky * p->dh;

		for (kx = kx0; kx < kx1; kx++) {
			int ix = ox * p->sw - p->pl + kx * p->dw;
			const float *xp = x + ((ptrdiff_t)iy * p->w + ix) * ps;
			const float *wt = p->wp + mb * wos +
					  (ptrdiff_t)(ky * p->kw + kx) * c * VW;

			for (icb = 0; icb * VW < c; icb++) {
				const float *xb = xp + icb * cbs;
				const float *wb = wt + (ptrdiff_t)icb * VW * VW;
				int n = c - icb * VW < VW ? c - icb * VW : VW;

				for (l = 0; l < n; l++) {
					vf wv[NC_OB];
					const float *xl = xb + l * ls;

					UNROLL_NV for (o = 0; o < OB; o++)
						wv[o] = vld(wb + l * VW + o * wos);
					UNROLL_MR for (r = 0; r < R; r++) {
						vf xv = vset1(xl[r * rstep]);

						UNROLL_NV for (o = 0; o < OB; o++)
							acc[r][o] += xv * wv[o];
					}
				}
			}
		}
	}
	nc_epi(R, OB, p, res, y, mb, ohw, (int64_t)oy * p->ow + ox, acc);
}

#define NCC_ARGS                                                          \
	const struct mi_nc_conv *p, const float *x, const float *res,       \
		float *y, int mb, int oy, int ox, int ky0, int ky1, int kx0, \
		int kx1
#define NCC_INST(OB, R)                                                   \
	static void ncc_##OB##_##R(NCC_ARGS)                              \
	{                                                                 \
		ncc_tile(OB, R, p, x, res, y, mb, oy, ox, ky0, ky1, kx0,   \
			 kx1);                                            \
	}
#if NC_OB > 4
#error "instance table covers NC_OB <= 4"
#endif
#define NCC_ROW(OB)                                                       \
	NCC_INST(OB, 1) NCC_INST(OB, 2) NCC_INST(OB, 3) NCC_INST(OB, 4)    \
	NCC_INST(OB, 5) NCC_INST(OB, 6) NCC_INST(OB, 7) NCC_INST(OB, 8)    \
	NCC_INST(OB, 9) NCC_INST(OB, 10) NCC_INST(OB, 11) NCC_INST(OB, 12)
NCC_ROW(1) NCC_ROW(2) NCC_ROW(3) NCC_ROW(4)

typedef void (*ncc_fn)(NCC_ARGS);
#define NCC_TROW(OB)                                                      \
	{ ncc_##OB##_1, ncc_##OB##_2, ncc_##OB##_3, ncc_##OB##_4,          \
	  ncc_##OB##_5, ncc_##OB##_6, ncc_##OB##_7, ncc_##OB##_8,          \
	  ncc_##OB##_9, ncc_##OB##_10, ncc_##OB##_11, ncc_##OB##_12 }
static const ncc_fn ncc_tab[4][12] = {
	NCC_TROW(1), NCC_TROW(2), NCC_TROW(3), NCC_TROW(4),
};

/*
 * 1x1 conv, positions [ox, oxe) of row oy, every one in range: whole
 * register tiles in one call, the tail by the general tile.  With few
 * input channels (16-32: MobileNet expansions) a tile is ~300 cycles of
 * FMAs, and the general path spent ~100 more per tile on its call, its
 * tap loops and the balanced-tile divisions (c16 -> m64: 57 GMAC/s
 * against 86 with 256 input channels).
 */
static inline __attribute__((always_inline)) void
nc1_row(const int OB0, const struct mi_nc_conv *p, const float *x,
	const float *res, float *y, int mb, int oy, int ox, int oxe)
{
	const int OB = OB0 > NC_OB ? NC_OB : OB0;
	const int RM = NC_ACC / OB < NC_R ? NC_ACC / OB : NC_R;
	const int64_t hw = (int64_t)p->h * p->w, ohw = (int64_t)p->oh * p->ow;
	const ptrdiff_t ps = p->xblk ? VW : 1;
	const ptrdiff_t ls = p->xblk ? 1 : hw;
	const ptrdiff_t cbs = hw * VW;
	const ptrdiff_t rstep = p->sw * ps;
	const ptrdiff_t wos = (ptrdiff_t)p->c * VW;
	const int c = p->c;
	const float *wt = p->wp + mb * wos, *bias = p->bias + mb * VW;
	const float *xrow = x + ((ptrdiff_t)(oy * p->sh - p->pt) * p->w -
				 p->pl) * ps;
	int r, o, icb, l;

	for (; oxe - ox >= RM; ox += RM) {
		const float *xp = xrow + (ptrdiff_t)ox * rstep;
		vf acc[NC_ACC][NC_OB];

		UNROLL_MR for (r = 0; r < RM; r++)
			UNROLL_NV for (o = 0; o < OB; o++)
				acc[r][o] = vld(bias + o * VW);
		for (icb = 0; icb * VW < c; icb++) {
			const float *xb = xp + icb * cbs;
			const float *wb = wt + (ptrdiff_t)icb * VW * VW;
			int n = c - icb * VW < VW ? c - icb * VW : VW;

			for (l = 0; l < n; l++) {
				vf wv[NC_OB];
				const float *xl = xb + l * ls;

				UNROLL_NV for (o = 0; o < OB; o++)
					wv[o] = vld(wb + l * VW + o * wos);
				UNROLL_MR for (r = 0; r < RM; r++) {
					vf xv = vset1(xl[r * rstep]);

					UNROLL_NV for (o = 0; o < OB; o++)
						acc[r][o] += xv * wv[o];
				}
			}
		}
		nc_epi(RM, OB, p, res, y, mb, ohw, (int64_t)oy * p->ow + ox,
		       acc);
	}
	if (ox < oxe)
		ncc_tab[OB - 1][oxe - ox - 1](p, x, res, y, mb, oy, ox, 0, 1, 0,
					      1);
}

/*
 * One tile of nc1_rowk: R positions from xp (output yt), OB blocks,
 * input channel blocks [i0, i1): starts from the bias (i0 == 0) or the
 * partial sums in yt, ends with the epilogue (last) or stores them.
 */
static inline __attribute__((always_inline)) void
nc1_tilek(const int OB, const int R, const struct mi_nc_conv *p,
	  const float *xp, const float *wt, const float *bias, float *yt,
	  int i0, int i1, bool last, const float *res, float *y, int mb,
	  int64_t ohw, int64_t pos)
{
	const ptrdiff_t ps = p->xblk ? VW : 1;
	const ptrdiff_t ls = p->xblk ? 1 : (ptrdiff_t)p->h * p->w;
	const ptrdiff_t cbs = (ptrdiff_t)p->h * p->w * VW;
	const ptrdiff_t rstep = p->sw * ps;
	const ptrdiff_t wos = (ptrdiff_t)p->c * VW;
	const ptrdiff_t os = (ptrdiff_t)ohw * VW;
	const int c = p->c;
	vf acc[NC_ACC][NC_OB];
	int r, o, icb, l;

	if (i0) {
		UNROLL_MR for (r = 0; r < R; r++)
			UNROLL_NV for (o = 0; o < OB; o++)
				acc[r][o] = vld(yt + o * os + r * VW);
	} else {
		UNROLL_MR for (r = 0; r < R; r++)
			UNROLL_NV for (o = 0; o < OB; o++)
				acc[r][o] = vld(bias + o * VW);
	}
	for (icb = i0; icb < i1; icb++) {
		const float *xb = xp + icb * cbs;
		const float *wb = wt + (ptrdiff_t)icb * VW * VW;
		int n = c - icb * VW < VW ? c - icb * VW : VW;

		for (l = 0; l < n; l++) {
			vf wv[NC_OB];
			const float *xl = xb + l * ls;

			UNROLL_NV for (o = 0; o < OB; o++)
				wv[o] = vld(wb + l * VW + o * wos);
			UNROLL_MR for (r = 0; r < R; r++) {
				vf xv = vset1(xl[r * rstep]);

				UNROLL_NV for (o = 0; o < OB; o++)
					acc[r][o] += xv * wv[o];
			}
		}
	}
	if (last) {
		nc_epi(R, OB, p, res, y, mb, ohw, pos, acc);
		return;
	}
	UNROLL_MR for (r = 0; r < R; r++)
		UNROLL_NV for (o = 0; o < OB; o++)
			vst(yt + o * os + r * VW, acc[r][o]);
}

/*
 * 1x1 conv rows as nc1_row, with two changes for many input channels
 * (256-2048: ResNet bottlenecks) and short rows (7x7 and 14x14 maps run
 * flat, 49 or 196 positions):
 *  - whole tiles of RM and RM - 1 positions (49 = 4 x 6 + 5 x 5), no
 *    tail: a 1-position tail (6 x 8 + 1) ran at a fraction of the FMA
 *    rate and streamed the group's weights once more for one pixel;
 *  - with kc < the channel blocks, the input channels run in chunks of
 *    kc blocks whose weights stay in L1 (p->kc1 bytes) while tiles of
 *    up to NC1_PB positions sweep them, instead of streaming c x OB
 *    blocks of weights (128 KB for c = 512) from L2 per tile; the partial
 *    sums wait in y (blocked, y != res: the caller checks).
 * Returns false (nothing done) when the row is too short for such tiles.
 */
#define NC1_PB 96
static inline __attribute__((always_inline)) bool
nc1_rowk(const int OB0, const struct mi_nc_conv *p, const float *x,
	 const float *res, float *y, int mb, int oy, int ox, int oxe, int kc)
{
	const int OB = OB0 > NC_OB ? NC_OB : OB0;
	const int RM = NC_ACC / OB < NC_R ? NC_ACC / OB : NC_R;
	const int TPB = (p->pb1 > 0 ? p->pb1 : NC1_PB) / RM > 1 ?
				(p->pb1 > 0 ? p->pb1 : NC1_PB) / RM : 1;
	const int64_t ohw = (int64_t)p->oh * p->ow;
	const ptrdiff_t ps = p->xblk ? VW : 1;
	const ptrdiff_t rstep = p->sw * ps;
	const int ncb = (p->c + VW - 1) / VW;
	const float *wt = p->wp + mb * (ptrdiff_t)p->c * VW;
	const float *bias = p->bias + mb * VW;
	const float *xrow = x + ((ptrdiff_t)(oy * p->sh - p->pt) * p->w -
				 p->pl) * ps;
	float *yrow = y + ((int64_t)mb * ohw + (int64_t)oy * p->ow) * VW;
	const int n = oxe - ox, nsm = (RM - n % RM) % RM;
	const int nbig = (n - nsm * (RM - 1)) / RM, nt = nbig + nsm;

	if (n - nsm * (RM - 1) < 0)
		return false;
	for (int t0 = 0; t0 < nt; t0 += TPB) {
		int t1 = t0 + TPB < nt ? t0 + TPB : nt;

		for (int i0 = 0; i0 < ncb; i0 += kc) {
			int i1 = i0 + kc < ncb ? i0 + kc : ncb;

			for (int t = t0; t < t1; t++) {
				int q = ox + (t < nbig ? t * RM :
						  nbig * RM + (t - nbig) * (RM - 1));
				const float *xp = xrow + (ptrdiff_t)q * rstep;
				float *yt = yrow + (ptrdiff_t)q * VW;
				int64_t pos = (int64_t)oy * p->ow + q;

				if (t < nbig)
					nc1_tilek(OB, RM, p, xp, wt, bias, yt, i0,
						  i1, i1 == ncb, res, y, mb, ohw,
						  pos);
				else
					nc1_tilek(OB, RM - 1, p, xp, wt, bias, yt,
						  i0, i1, i1 == ncb, res, y, mb,
						  ohw, pos);
			}
		}
	}
	return true;
}

/* kc: chunks only with blocked y apart from res (partial sums in y).
 * Without chunks only short rows take nc1_rowk (their tail matters): on
 * long rows of one output block nc1_row was faster (MobileNetV2's 32 -> 16
 * on 112x112: 116 vs 170 us). */
#define NC1_SHORT 256
#define NC1_INST(OB)                                                      \
	static void nc1_row_##OB(const struct mi_nc_conv *p, const float *x, \
				 const float *res, float *y, int mb, int oy, \
				 int ox, int oxe)                          \
	{                                                                 \
		const int ob_ = OB > NC_OB ? NC_OB : OB;                   \
		const int ncb_ = (p->c + VW - 1) / VW;                     \
		const int kc1_ = p->kc1 > 0 ? p->kc1 :                     \
				 p->kc1 == MI_NC_KC1_NONE ? 0 :             \
				 p->kc1 == MI_NC_KC1_ROW ? -1 : MI_NC_KC1;  \
		int kc_ = kc1_ / (VW * VW * 4 * ob_);                      \
                                                                          \
		if (kc_ < 1 || !p->yblk || res == y)                       \
			kc_ = ncb_;                                         \
		if (kc1_ >= 0 &&                                           \
		    (kc_ < ncb_ || (ob_ > 1 && oxe - ox < NC1_SHORT)) &&   \
		    nc1_rowk(OB, p, x, res, y, mb, oy, ox, oxe, kc_))      \
			return;                                             \
		nc1_row(OB, p, x, res, y, mb, oy, ox, oxe);                \
	}
NC1_INST(1) NC1_INST(2) NC1_INST(3) NC1_INST(4)
static void (*const nc1_tab[4])(const struct mi_nc_conv *, const float *,
				const float *, float *, int, int, int,
				int) = { nc1_row_1, nc1_row_2, nc1_row_3,
					 nc1_row_4 };

/*
 * The same for convs on NCHW input through p->koff (the stem convs:
 * 3 channels, every tap of the row's interior in range): one loop over
 * the kh * kw * c taps per tile, column stride S as a constant.
 */
static inline __attribute__((always_inline)) void
ncr_row(const int S, const int OB0, const struct mi_nc_conv *p,
	const float *x, const float *res, float *y, int mb, int oy, int ox,
	int oxe)
{
	const int OB = OB0 > NC_OB ? NC_OB : OB0;
	const int RM = NC_ACC / OB < NC_R ? NC_ACC / OB : NC_R;
	const int64_t ohw = (int64_t)p->oh * p->ow;
	const ptrdiff_t wos = (ptrdiff_t)p->kh * p->kw * p->c * VW;
	const int nk = p->kh * p->kw * p->c;
	const float *wt = p->wp + mb * wos, *bias = p->bias + mb * VW;
	const float *xrow = x + (ptrdiff_t)(oy * p->sh - p->pt) * p->w - p->pl;
	const int32_t *koff = p->koff;
	int r, o;

	for (; oxe - ox >= RM; ox += RM) {
		vf acc[NC_ACC][NC_OB];

		UNROLL_MR for (r = 0; r < RM; r++)
			UNROLL_NV for (o = 0; o < OB; o++)
				acc[r][o] = vld(bias + o * VW);
		ncc_koff(OB, RM, S, koff, nk, xrow + (ptrdiff_t)ox * S, wt, wos,
			 acc);
		nc_epi(RM, OB, p, res, y, mb, ohw, (int64_t)oy * p->ow + ox,
		       acc);
	}
	if (ox < oxe)
		ncc_tab[OB - 1][oxe - ox - 1](p, x, res, y, mb, oy, ox, 0, p->kh,
					      0, p->kw);
}

#define NCR_INST(S, OB)                                                   \
	static void ncr_row_##S##_##OB(const struct mi_nc_conv *p,         \
				       const float *x, const float *res,    \
				       float *y, int mb, int oy, int ox,    \
				       int oxe)                             \
	{                                                                 \
		ncr_row(S, OB, p, x, res, y, mb, oy, ox, oxe);             \
	}
NCR_INST(1, 1) NCR_INST(1, 2) NCR_INST(1, 3) NCR_INST(1, 4)
NCR_INST(2, 1) NCR_INST(2, 2) NCR_INST(2, 3) NCR_INST(2, 4)
static void (*const ncr_tab[2][4])(const struct mi_nc_conv *, const float *,
				   const float *, float *, int, int, int,
				   int) = {
	{ ncr_row_1_1, ncr_row_1_2, ncr_row_1_3, ncr_row_1_4 },
	{ ncr_row_2_1, ncr_row_2_2, ncr_row_2_3, ncr_row_2_4 },
};

/*
 * Direct convolution tile over R0 consecutive output positions of the
 * flattened map (q0 .. q0 + R0 - 1, rows oy * ow + ox, possibly
 * crossing rows), OB0 output blocks from mb; every tap of every
 * position in range (the planner pads the input).  Small maps (7x7,
 * 14x14) then fill whole tiles instead of 4 + 3 per row, and a tile of
 * few blocks x many positions reads fewer weight bytes per FMA (the
 * weights of large convs stream from L2 once per tile).
 */
static inline __attribute__((always_inline)) void
ncq_tile(const int OB0, const int R0, const struct mi_nc_conv *p,
	 const float *x, const float *res, float *y, int mb, int64_t q0,
	 int icb0, int icb1, float *part)
{
	const int OB = OB0 > NC_OB ? NC_OB : OB0;
	const int R = R0 * OB > NC_ACC ? NC_ACC / OB : R0;
	const int64_t ohw = (int64_t)p->oh * p->ow;
	const ptrdiff_t ps = p->xblk ? VW : 1;
	const ptrdiff_t ls = p->xblk ? 1 : (ptrdiff_t)p->h * p->w;
	const ptrdiff_t cbs = (ptrdiff_t)p->h * p->w * VW;
	const ptrdiff_t wos = (ptrdiff_t)p->kh * p->kw * p->c * VW;
	const int c = p->c, cfull = c / VW;
	ptrdiff_t off[NC_ACC];
	vf acc[NC_ACC][NC_OB];
	int r, o, ky, kx, icb, l;
	int oy = (int)(q0 / p->ow), ox = (int)(q0 % p->ow);

	UNROLL_MR for (r = 0; r < R; r++) {
		off[r] = ((ptrdiff_t)(oy * p->sh - p->pt) * p->w +
			  ox * p->sw - p->pl) * ps;
		if (++ox == p->ow) {
			ox = 0;
			oy++;
		}
	}
	UNROLL_MR for (r = 0; r < R; r++)
		UNROLL_NV for (o = 0; o < OB; o++)
			acc[r][o] = icb0 ? vld(part + (r * NC_OB + o) * VW) :
					   vld(p->bias + (mb + o) * VW);
	for (ky = 0; ky < p->kh; ky++) {
		for (kx = 0; kx < p->kw; kx++) {
			const float *xp = x + ((ptrdiff_t)ky * p->dh * p->w +
					       (ptrdiff_t)kx * p->dw) * ps;
			const float *wt = p->wp + mb * wos +
					  (ptrdiff_t)(ky * p->kw + kx) * c * VW;

			for (icb = icb0; icb < icb1; icb++) {
				const float *xb = xp + icb * cbs;
				const float *wb = wt + (ptrdiff_t)icb * VW * VW;
				int n = icb < cfull ? VW : c - cfull * VW;

				for (l = 0; l < n; l++) {
					vf wv[NC_OB];
					const float *xl = xb + l * ls;

					UNROLL_NV for (o = 0; o < OB; o++)
						wv[o] = vld(wb + l * VW + o * wos);
					UNROLL_MR for (r = 0; r < R; r++) {
						vf xv = vset1(xl[off[r]]);

						UNROLL_NV for (o = 0; o < OB; o++)
							acc[r][o] += xv * wv[o];
					}
				}
			}
		}
	}
	if (icb1 <= cfull) {
		/* more input channels to come: partial sums */
		UNROLL_MR for (r = 0; r < R; r++)
			UNROLL_NV for (o = 0; o < OB; o++)
				vst(part + (r * NC_OB + o) * VW, acc[r][o]);
		return;
	}
	nc_epi(R, OB, p, res, y, mb, ohw, q0, acc);
}

#define NCQ_ARGS                                                          \
	const struct mi_nc_conv *p, const float *x, const float *res,       \
		float *y, int mb, int64_t q0, int icb0, int icb1, float *part
#define NCQ_INST(OB, R)                                                   \
	static void ncq_##OB##_##R(NCQ_ARGS)                              \
	{                                                                 \
		ncq_tile(OB, R, p, x, res, y, mb, q0, icb0, icb1, part);   \
	}
#define NCQ_ROW(OB)                                                       \
	NCQ_INST(OB, 1) NCQ_INST(OB, 2) NCQ_INST(OB, 3) NCQ_INST(OB, 4)    \
	NCQ_INST(OB, 5) NCQ_INST(OB, 6) NCQ_INST(OB, 7) NCQ_INST(OB, 8)    \
	NCQ_INST(OB, 9) NCQ_INST(OB, 10) NCQ_INST(OB, 11) NCQ_INST(OB, 12)
NCQ_ROW(1) NCQ_ROW(2) NCQ_ROW(3) NCQ_ROW(4)

typedef void (*ncq_fn)(NCQ_ARGS);
#define NCQ_TROW(OB)                                                      \
	{ ncq_##OB##_1, ncq_##OB##_2, ncq_##OB##_3, ncq_##OB##_4,          \
	  ncq_##OB##_5, ncq_##OB##_6, ncq_##OB##_7, ncq_##OB##_8,          \
	  ncq_##OB##_9, ncq_##OB##_10, ncq_##OB##_11, ncq_##OB##_12 }
static const ncq_fn ncq_tab[4][12] = {
	NCQ_TROW(1), NCQ_TROW(2), NCQ_TROW(3), NCQ_TROW(4),
};

/* Flattened positions [q0, q1), blocks [mb0, mb1): chunks of about
 * NCQ_CHUNK positions (their input stays cached while every block group
 * sweeps it), balanced tiles within a chunk. */
#define NCQ_CHUNK 96
/* Rows narrower than this run as flattened tiles (row tails of >= 10%
 * of the register tile otherwise; mi_nc_flat_w() for the planner). */
#define NCQ_MAXW MI_NC_FLAT_W
/*
 * A block group whose weights outgrow half the L2 (3x3 with 512 input
 * channels: 1.18 MB) streamed them from L2 and beyond once per tile (9
 * tiles on a 7x7 map).  Such groups run in input-channel chunks of at most
 * NCQ_KBYTES of weights, which stay in L1 for all tiles of the chunk; the
 * partial sums wait in a stack buffer (ResNet-18's 3x3 512 @7x7: 2.42-2.52
 * -> 2.14-2.20 ms CPU at 1 thread).  p->ksplit = n > 0 names chunks of n
 * channel blocks instead.
 */
#define NCQ_KBYTES (32 * 1024)
#define NCQ_KSPLIT (1024 * 1024)
static void nc_conv_flat(const struct mi_nc_conv *p, const float *x,
			 const float *res, float *y, int mb0, int mb1,
			 int64_t q0, int64_t q1)
{
	int64_t nch = (q1 - q0 + NCQ_CHUNK - 1) / NCQ_CHUNK;
	int64_t csz = (q1 - q0 + nch - 1) / nch;
	const int cfull = p->c / VW, ncb = cfull + (p->c % VW != 0);
	const int64_t tapw = (int64_t)p->kh * p->kw * VW * NC_OB * VW * 4;
	int kb = ncb;
	float part[NCQ_CHUNK * NC_OB * VW] __attribute__((aligned(64)));

	if (p->ksplit > 0) {
		kb = p->ksplit;
	} else if (tapw * ncb > NCQ_KSPLIT) {
		kb = (int)(NCQ_KBYTES / tapw);
		kb = kb > 1 ? kb : 1;
	}
	for (int64_t qc = q0; qc < q1; qc += csz) {
		int64_t qe = qc + csz < q1 ? qc + csz : q1;

		for (int mb = mb0; mb < mb1; mb += NC_OB) {
			int ob = mb1 - mb < NC_OB ? mb1 - mb : NC_OB;
			int rmax = NC_ACC / ob < NC_R ? NC_ACC / ob : NC_R;

			for (int i0 = 0; i0 < ncb; i0 += kb) {
				int i1 = i0 + kb < ncb ? i0 + kb : ncb;
				int64_t q = qc;

				/* i1 == ncb: the last chunk finishes the tile
				 * (cfull + 1 covers a tail block) */
				if (i1 == ncb)
					i1 = cfull + 1;
				while (q < qe) {
					int64_t left = qe - q, nt = (left + rmax - 1) / rmax;
					int run = (int)((left + nt - 1) / nt);

					ncq_tab[ob - 1][run - 1](p, x, res, y, mb, q, i0,
								 i1, part + (q - qc) * NC_OB * VW);
					q += run;
				}
			}
		}
	}
}

/* Valid tap range [*k0, *k1) for output coordinate o. */
static inline void nc_taps(int o, int s, int pad, int d, int k, int in,
			   int *k0, int *k1)
{
	int i0 = o * s - pad, a = 0, b = k;

	while (a < k && i0 + a * d < 0)
		a++;
	while (b > a && i0 + (b - 1) * d >= in)
		b--;
	*k0 = a;
	*k1 = b;
}

/* Interior output columns [*l, *r): every tap in range. */
static inline void nc_interior(int s, int pad, int d, int k, int in, int on,
			       int *l, int *r)
{
	int a = 0, b = on;

	while (a < on && a * s - pad < 0)
		a++;
	while (b > a && (b - 1) * s - pad + (k - 1) * d >= in)
		b--;
	*l = a;
	*r = b > a ? b : a;
}

static void nc_conv(const struct mi_nc_conv *p, const float *x,
		    const float *res, float *y, int mb0, int mb1, int oy0,
		    int oy1, int ox0, int ox1)
{
	int oy, ox, mb, oxl, oxr, oyl, oyr;
	/* rows of whole tiles in one call: 1x1 convs, and convs on NCHW
	 * input through p->koff (column stride 1 or 2) */
	const bool r1 = (p->kh == 1 && p->kw == 1) || p->koff;

	nc_interior(p->sw, p->pl, p->dw, p->kw, p->w, p->ow, &oxl, &oxr);
	nc_interior(p->sh, p->pt, p->dh, p->kh, p->h, p->oh, &oyl, &oyr);
	if (p->ow < NCQ_MAXW && oy0 >= oyl && oy1 <= oyr && oy1 > oy0 &&
	    ((oy1 - oy0 == 1 && ox0 >= oxl && ox1 <= oxr) ||
	     (ox0 == 0 && ox1 == p->ow && oxl == 0 && oxr == p->ow))) {
		/* every tap in range: tiles run across rows */
		if (ox1 > ox0)
			nc_conv_flat(p, x, res, y, mb0, mb1,
				     (int64_t)oy0 * p->ow + ox0,
				     (int64_t)(oy1 - 1) * p->ow + ox1);
		return;
	}
	for (oy = oy0; oy < oy1; oy++) {
		int ky0, ky1;

		nc_taps(oy, p->sh, p->pt, p->dh, p->kh, p->h, &ky0, &ky1);
		for (mb = mb0; mb < mb1; mb += NC_OB) {
			int ob = mb1 - mb < NC_OB ? mb1 - mb : NC_OB;
			int rmax = NC_ACC / ob < NC_R ? NC_ACC / ob : NC_R;

			for (ox = ox0; ox < ox1;) {
				int run = 1, kx0 = 0, kx1 = p->kw;

				if (r1 && ky0 == 0 && ky1 == p->kh && ox >= oxl &&
				    ox < oxr) {
					int e = oxr < ox1 ? oxr : ox1;

					if (p->koff)
						ncr_tab[p->sw - 1][ob - 1](
							p, x, res, y, mb, oy, ox, e);
					else
						nc1_tab[ob - 1](p, x, res, y, mb, oy,
								ox, e);
					ox = e;
					continue;
				}
				if (ox >= oxl && ox < oxr) {
					/* balanced tiles: 7 = 4 + 3, not 6 + 1 */
					int left = oxr < ox1 ? oxr - ox : ox1 - ox;
					int nt = (left + rmax - 1) / rmax;

					run = (left + nt - 1) / nt;
				} else {
					nc_taps(ox, p->sw, p->pl, p->dw, p->kw,
						p->w, &kx0, &kx1);
				}
				ncc_tab[ob - 1][run - 1](p, x, res, y, mb, oy, ox,
							 ky0, ky1, kx0, kx1);
				ox += run;
			}
		}
	}
}

/* Depthwise tile: R0 positions of row oy from ox, channel block cb. */
static inline __attribute__((always_inline)) void
ncd_tile(const int R0, const struct mi_nc_conv *p, const float *x,
	 const float *res, float *y, int cb, int oy, int ox, int ky0,
	 int ky1, int kx0, int kx1)
{
	const int R = R0 > ND_R ? ND_R : R0;
	const int64_t ohw = (int64_t)p->oh * p->ow;
	const float *xc = x + (int64_t)cb * p->h * p->w * VW;
	const float *wc = p->wp + (int64_t)cb * p->kh * p->kw * VW;
	const ptrdiff_t rstep = (ptrdiff_t)p->sw * VW;
	vf acc[ND_R], b = vld(p->bias + cb * VW);
	int r, ky, kx;

	UNROLL_MR for (r = 0; r < R; r++)
		acc[r] = b;
	for (ky = ky0; ky < ky1; ky++) {
		int iy = oy * p->sh - p->pt + ky * p->dh;
		const float *xr = xc + (ptrdiff_t)iy * p->w * VW;

		for (kx = kx0; kx < kx1; kx++) {
			int ix = ox * p->sw - p->pl + kx * p->dw;
			const float *xp = xr + (ptrdiff_t)ix * VW;
			vf wv = vld(wc + (ky * p->kw + kx) * VW);

			UNROLL_MR for (r = 0; r < R; r++)
				acc[r] += wv * vld(xp + r * rstep);
		}
	}
	{
		vf a2[ND_R][NC_OB];

		UNROLL_MR for (r = 0; r < R; r++)
			a2[r][0] = acc[r];
		nc_epi(R, 1, p, res, y, cb, ohw, (int64_t)oy * p->ow + ox, a2);
	}
}

#define NCD_ARGS                                                          \
	const struct mi_nc_conv *p, const float *x, const float *res,       \
		float *y, int cb, int oy, int ox, int ky0, int ky1, int kx0, \
		int kx1
#define NCD_INST(R)                                                       \
	static void ncd_##R(NCD_ARGS)                                     \
	{                                                                 \
		ncd_tile(R, p, x, res, y, cb, oy, ox, ky0, ky1, kx0, kx1); \
	}
NCD_INST(1) NCD_INST(2) NCD_INST(3) NCD_INST(4)
NCD_INST(5) NCD_INST(6) NCD_INST(7) NCD_INST(8)

typedef void (*ncd_fn)(NCD_ARGS);
static const ncd_fn ncd_tab[8] = { ncd_1, ncd_2, ncd_3, ncd_4,
				   ncd_5, ncd_6, ncd_7, ncd_8 };

/*
 * 3x3 depthwise, dilation 1, column stride S (1 or 2): R interior
 * positions of row oy from ox (every column tap in range), rows ky in
 * [ky0, ky1).  The taps are unrolled, so an input vector is loaded once
 * and serves the (up to 3) taps that read it, and a row runs its whole
 * tiles in one call: the general tile reloaded every tap's input and
 * spent most of its time outside the FMAs (~25 GMAC/s on MobileNetV2's
 * 112x112 / 56x56 maps).
 */
#if VW == 16
#define ND3_R 16
#else
#define ND3_R 8
#endif
static inline __attribute__((always_inline)) void
ncd3_tile(const int S, const int R0, const struct mi_nc_conv *p,
	  const float *xc, const float *wc, vf b, const float *res, float *y,
	  int cb, int oy, int ox, int ky0, int ky1, int64_t ohw)
{
	const int R = R0 > ND3_R ? ND3_R : R0;
	const ptrdiff_t rs = (ptrdiff_t)p->w * VW;
	const float *x0 = xc + (ptrdiff_t)(oy * p->sh - p->pt) * rs +
			  (ptrdiff_t)(ox * S - p->pl) * VW;
	vf acc[ND3_R][NC_OB];
	int r, ky;

	UNROLL_MR for (r = 0; r < R; r++)
		acc[r][0] = b;
	_Pragma("GCC unroll 3") for (ky = 0; ky < 3; ky++) {
		const float *xr = x0 + ky * rs;
		vf w0, w1, w2;

		if (ky < ky0 || ky >= ky1)
			continue;
		w0 = vld(wc + (ky * 3) * VW);
		w1 = vld(wc + (ky * 3 + 1) * VW);
		w2 = vld(wc + (ky * 3 + 2) * VW);
		UNROLL_MR for (r = 0; r < R; r++) {
			acc[r][0] += w0 * vld(xr + (S * r) * VW);
			acc[r][0] += w1 * vld(xr + (S * r + 1) * VW);
			acc[r][0] += w2 * vld(xr + (S * r + 2) * VW);
		}
	}
	nc_epi(R, 1, p, res, y, cb, ohw, (int64_t)oy * p->ow + ox, acc);
}

#define NCD3_ARGS                                                         \
	const struct mi_nc_conv *p, const float *xc, const float *wc, vf b, \
		const float *res, float *y, int cb, int oy, int ox, int ky0,  \
		int ky1, int64_t ohw
#define NCD3_INST(S, R)                                                   \
	static void ncd3_##S##_##R(NCD3_ARGS)                             \
	{                                                                 \
		ncd3_tile(S, R, p, xc, wc, b, res, y, cb, oy, ox, ky0, ky1, \
			  ohw);                                           \
	}
#define NCD3_ROW(S)                                                       \
	NCD3_INST(S, 1) NCD3_INST(S, 2) NCD3_INST(S, 3) NCD3_INST(S, 4)    \
	NCD3_INST(S, 5) NCD3_INST(S, 6) NCD3_INST(S, 7) NCD3_INST(S, 8)    \
	NCD3_INST(S, 9) NCD3_INST(S, 10) NCD3_INST(S, 11) NCD3_INST(S, 12) \
	NCD3_INST(S, 13) NCD3_INST(S, 14) NCD3_INST(S, 15)
NCD3_ROW(1) NCD3_ROW(2)
typedef void (*ncd3_fn)(NCD3_ARGS);
#define NCD3_TROW(S)                                                      \
	{ ncd3_##S##_1, ncd3_##S##_2, ncd3_##S##_3, ncd3_##S##_4,          \
	  ncd3_##S##_5, ncd3_##S##_6, ncd3_##S##_7, ncd3_##S##_8,          \
	  ncd3_##S##_9, ncd3_##S##_10, ncd3_##S##_11, ncd3_##S##_12,       \
	  ncd3_##S##_13, ncd3_##S##_14, ncd3_##S##_15 }
static const ncd3_fn ncd3_tab[2][15] = { NCD3_TROW(1), NCD3_TROW(2) };

/* Interior columns [ox, oxe) of row oy: whole tiles here, the tail by
 * one call. */
static inline __attribute__((always_inline)) void
ncd3_row(const int S, const struct mi_nc_conv *p, const float *x,
	 const float *res, float *y, int cb, int oy, int ox, int oxe,
	 int ky0, int ky1)
{
	const int64_t ohw = (int64_t)p->oh * p->ow;
	const float *xc = x + (int64_t)cb * p->h * p->w * VW;
	const float *wc = p->wp + (int64_t)cb * 9 * VW;
	const vf b = vld(p->bias + cb * VW);

	for (; oxe - ox >= ND3_R; ox += ND3_R)
		ncd3_tile(S, ND3_R, p, xc, wc, b, res, y, cb, oy, ox, ky0, ky1,
			  ohw);
	if (ox < oxe)
		ncd3_tab[S - 1][oxe - ox - 1](p, xc, wc, b, res, y, cb, oy, ox,
					      ky0, ky1, ohw);
}

static void ncd3_row1(const struct mi_nc_conv *p, const float *x,
		      const float *res, float *y, int cb, int oy, int ox,
		      int oxe, int ky0, int ky1)
{
	ncd3_row(1, p, x, res, y, cb, oy, ox, oxe, ky0, ky1);
}

static void ncd3_row2(const struct mi_nc_conv *p, const float *x,
		      const float *res, float *y, int cb, int oy, int ox,
		      int oxe, int ky0, int ky1)
{
	ncd3_row(2, p, x, res, y, cb, oy, ox, oxe, ky0, ky1);
}

/*
 * The same for 5x5 (the 3x3 kernel above is kept as it is: made generic
 * over K it ran 3x3 rows 2-9 % slower).  An input vector serves up to 5
 * taps; R x 1 accumulators and 5 weights per row of taps.
 */
static inline __attribute__((always_inline)) void
ncd5_tile(const int S, const int R0, const struct mi_nc_conv *p,
	  const float *xc, const float *wc, vf b, const float *res, float *y,
	  int cb, int oy, int ox, int ky0, int ky1, int64_t ohw)
{
	const int R = R0 > ND3_R ? ND3_R : R0;
	const ptrdiff_t rs = (ptrdiff_t)p->w * VW;
	const float *x0 = xc + (ptrdiff_t)(oy * p->sh - p->pt) * rs +
			  (ptrdiff_t)(ox * S - p->pl) * VW;
	vf acc[ND3_R][NC_OB];
	int r, ky;

	UNROLL_MR for (r = 0; r < R; r++)
		acc[r][0] = b;
	_Pragma("GCC unroll 5") for (ky = 0; ky < 5; ky++) {
		const float *xr = x0 + ky * rs;
		vf w0, w1, w2, w3, w4;

		if (ky < ky0 || ky >= ky1)
			continue;
		w0 = vld(wc + (ky * 5) * VW);
		w1 = vld(wc + (ky * 5 + 1) * VW);
		w2 = vld(wc + (ky * 5 + 2) * VW);
		w3 = vld(wc + (ky * 5 + 3) * VW);
		w4 = vld(wc + (ky * 5 + 4) * VW);
		UNROLL_MR for (r = 0; r < R; r++) {
			acc[r][0] += w0 * vld(xr + (S * r) * VW);
			acc[r][0] += w1 * vld(xr + (S * r + 1) * VW);
			acc[r][0] += w2 * vld(xr + (S * r + 2) * VW);
			acc[r][0] += w3 * vld(xr + (S * r + 3) * VW);
			acc[r][0] += w4 * vld(xr + (S * r + 4) * VW);
		}
	}
	nc_epi(R, 1, p, res, y, cb, ohw, (int64_t)oy * p->ow + ox, acc);
}

#define NCD5_INST(S, R)                                                   \
	static void ncd5_##S##_##R(NCD3_ARGS)                             \
	{                                                                 \
		ncd5_tile(S, R, p, xc, wc, b, res, y, cb, oy, ox, ky0, ky1, \
			  ohw);                                           \
	}
#define NCD5_ROW(S)                                                       \
	NCD5_INST(S, 1) NCD5_INST(S, 2) NCD5_INST(S, 3) NCD5_INST(S, 4)    \
	NCD5_INST(S, 5) NCD5_INST(S, 6) NCD5_INST(S, 7) NCD5_INST(S, 8)    \
	NCD5_INST(S, 9) NCD5_INST(S, 10) NCD5_INST(S, 11) NCD5_INST(S, 12) \
	NCD5_INST(S, 13) NCD5_INST(S, 14) NCD5_INST(S, 15)
NCD5_ROW(1) NCD5_ROW(2)
#define NCD5_TROW(S)                                                      \
	{ ncd5_##S##_1, ncd5_##S##_2, ncd5_##S##_3, ncd5_##S##_4,          \
	  ncd5_##S##_5, ncd5_##S##_6, ncd5_##S##_7, ncd5_##S##_8,          \
	  ncd5_##S##_9, ncd5_##S##_10, ncd5_##S##_11, ncd5_##S##_12,       \
	  ncd5_##S##_13, ncd5_##S##_14, ncd5_##S##_15 }
static const ncd3_fn ncd5_tab[2][15] = { NCD5_TROW(1), NCD5_TROW(2) };

static inline __attribute__((always_inline)) void
ncd5_row(const int S, const struct mi_nc_conv *p, const float *x,
	 const float *res, float *y, int cb, int oy, int ox, int oxe,
	 int ky0, int ky1)
{
	const int64_t ohw = (int64_t)p->oh * p->ow;
	const float *xc = x + (int64_t)cb * p->h * p->w * VW;
	const float *wc = p->wp + (int64_t)cb * 25 * VW;
	const vf b = vld(p->bias + cb * VW);

	for (; oxe - ox >= ND3_R; ox += ND3_R)
		ncd5_tile(S, ND3_R, p, xc, wc, b, res, y, cb, oy, ox, ky0, ky1,
			  ohw);
	if (ox < oxe)
		ncd5_tab[S - 1][oxe - ox - 1](p, xc, wc, b, res, y, cb, oy, ox,
					      ky0, ky1, ohw);
}

static void ncd5_row1(const struct mi_nc_conv *p, const float *x,
		      const float *res, float *y, int cb, int oy, int ox,
		      int oxe, int ky0, int ky1)
{
	ncd5_row(1, p, x, res, y, cb, oy, ox, oxe, ky0, ky1);
}

static void ncd5_row2(const struct mi_nc_conv *p, const float *x,
		      const float *res, float *y, int cb, int oy, int ox,
		      int oxe, int ky0, int ky1)
{
	ncd5_row(2, p, x, res, y, cb, oy, ox, oxe, ky0, ky1);
}

static void nc_dw(const struct mi_nc_conv *p, const float *x,
		  const float *res, float *y, int cb0, int cb1, int oy0,
		  int oy1)
{
	int cb, oy, ox, oxl, oxr;
	const bool d3 = p->kh == 3 && p->kw == 3 && p->dh == 1 &&
			p->dw == 1 && (p->sw == 1 || p->sw == 2);
	const bool d5 = p->kh == 5 && p->kw == 5 && p->dh == 1 &&
			p->dw == 1 && (p->sw == 1 || p->sw == 2);

	nc_interior(p->sw, p->pl, p->dw, p->kw, p->w, p->ow, &oxl, &oxr);
	for (cb = cb0; cb < cb1; cb++)
		for (oy = oy0; oy < oy1; oy++) {
			int ky0, ky1, kx0, kx1;

			nc_taps(oy, p->sh, p->pt, p->dh, p->kh, p->h, &ky0, &ky1);
			for (ox = 0; ox < oxl && ox < p->ow; ox++) {
				nc_taps(ox, p->sw, p->pl, p->dw, p->kw, p->w,
					&kx0, &kx1);
				ncd_1(p, x, res, y, cb, oy, ox, ky0, ky1, kx0, kx1);
			}
			if (d3 && ox < oxr) {
				(p->sw == 1 ? ncd3_row1 : ncd3_row2)(
					p, x, res, y, cb, oy, ox, oxr, ky0, ky1);
				ox = oxr;
			}
			if (d5 && ox < oxr) {
				(p->sw == 1 ? ncd5_row1 : ncd5_row2)(
					p, x, res, y, cb, oy, ox, oxr, ky0, ky1);
				ox = oxr;
			}
			/* balanced tiles of <= ND_R positions (7 = 4 + 3) */
			while (ox < oxr) {
				int left = oxr - ox, nt = (left + ND_R - 1) / ND_R;
				int run = (left + nt - 1) / nt;

				ncd_tab[run - 1](p, x, res, y, cb, oy, ox, ky0, ky1, 0,
						 p->kw);
				ox += run;
			}
			for (; ox < p->ow; ox++) {
				kx0 = 0, kx1 = p->kw;
				if (ox >= oxr)
					nc_taps(ox, p->sw, p->pl, p->dw, p->kw,
						p->w, &kx0, &kx1);
				ncd_1(p, x, res, y, cb, oy, ox, ky0, ky1, kx0, kx1);
			}
		}
}

static void nc_to_blk(const float *x, int c, int64_t hw, float *y, int cb0,
		      int cb1)
{
	for (int cb = cb0; cb < cb1; cb++)
		for (int64_t i = 0; i < hw; i++)
			vst(y + ((int64_t)cb * hw + i) * VW,
			    nc_ld(x, 0, cb, hw, i, c));
}

static void nc_from_blk(const float *x, int c, int64_t hw, float *y,
			int cb0, int cb1)
{
	for (int cb = cb0; cb < cb1; cb++) {
		int n = c - cb * VW < VW ? c - cb * VW : VW;

		for (int l = 0; l < n; l++) {
			const float *s = x + (int64_t)cb * hw * VW + l;
			float *d = y + ((int64_t)cb * VW + l) * hw;

			for (int64_t i = 0; i < hw; i++)
				d[i] = s[i * VW];
		}
	}
}

/* Chunks of 64 pixels summed in float vectors, chunks added in double
 * (the reference sums in double; see k_sum). */
static void nc_gap(const float *x, int c, int64_t hw, float *y, int cb0,
		   int cb1)
{
	for (int cb = cb0; cb < cb1; cb++) {
		const float *xc = x + (int64_t)cb * hw * VW;
		double s[VW] = { 0 };
		int n = c - cb * VW < VW ? c - cb * VW : VW, l;
		int64_t i = 0;

		while (i < hw) {
			int64_t e = i + 64 < hw ? i + 64 : hw;
			vf a0 = vset1(0.0f), a1 = a0;

			for (; i + 1 < e; i += 2) {
				a0 += vld(xc + i * VW);
				a1 += vld(xc + (i + 1) * VW);
			}
			if (i < e)
				a0 += vld(xc + i++ * VW);
			a0 += a1;
			for (l = 0; l < VW; l++)
				s[l] += a0[l];
		}
		for (l = 0; l < n; l++)
			y[cb * VW + l] = (float)(s[l] / (double)hw);
	}
}

static void nc_chmul(const float *x, const float *s, int c, int64_t hw,
		     float *y, int yblk, int cb0, int cb1)
{
	for (int cb = cb0; cb < cb1; cb++) {
		int n = c - cb * VW < VW ? c - cb * VW : VW;
		vf sv = n == VW ? vld(s + cb * VW) : vld_part(s + cb * VW, n);
		const float *xc = x + (int64_t)cb * hw * VW;

		if (yblk) {
			float *yc = y + (int64_t)cb * hw * VW;

			for (int64_t i = 0; i < hw; i++)
				vst(yc + i * VW, vld(xc + i * VW) * sv);
		} else {
			for (int64_t i = 0; i < hw; i++)
				nc_st(y, 0, cb, hw, i, c, vld(xc + i * VW) * sv);
		}
	}
}

static void nc_add(const float *a, const float *b, int c, int64_t hw,
		   float *y, int yblk, int act, float lo, float hi, int cb0,
		   int cb1)
{
	for (int cb = cb0; cb < cb1; cb++) {
		int64_t o = (int64_t)cb * hw * VW;

		for (int64_t i = 0; i < hw; i++) {
			vf v = nc_act(act, vld(a + o + i * VW) + vld(b + o + i * VW),
				    lo, hi);

			nc_st(y, yblk, cb, hw, i, c, v);
		}
	}
}

/* One output position of a pooling window, clipped to the map. */
static inline void ncp_one(const struct mi_pool2d *p, int c, const float *xc,
			   float *y, int yblk, int cb, int oy, int ox, int ky0,
			   int ky1, float rrow)
{
	const int64_t ohw = (int64_t)p->oh * p->ow;
	int kx0, kx1, rx0 = ox * p->s - p->pl, rx1 = rx0 + p->kw;
	vf acc = vset1(p->avg ? 0.0f : -__builtin_inff());

	nc_taps(ox, p->s, p->pl, 1, p->kw, p->iw, &kx0, &kx1);
	for (int ky = ky0; ky < ky1; ky++) {
		const float *xr = xc + ((int64_t)(oy * p->s - p->pt + ky) * p->iw +
					rx0) * VW;

		if (p->avg)
			for (int kx = kx0; kx < kx1; kx++)
				acc += vld(xr + kx * VW);
		else
			for (int kx = kx0; kx < kx1; kx++)
				acc = vmax(acc, vld(xr + kx * VW));
	}
	if (p->avg) {
		int lo = p->include_pad ? rx0 : (rx0 > 0 ? rx0 : 0);
		int hi = p->include_pad ? p->iw + p->pr : p->iw;

		rx1 = rx1 < hi ? rx1 : hi;
		acc *= rrow * (rx1 > lo ? 1.0f / (rx1 - lo) : 0.0f);
	}
	nc_st(y, yblk, cb, ohw, (int64_t)oy * p->ow + ox, c, acc);
}

/*
 * Positions [ox0, ox1) of row oy whose whole KH x KW window lies in the
 * map (xr: the window's top row at column 0): fixed trip counts, no tap
 * clipping; the average divides as ncp_one does (rrow * 1 / KW).
 */
static inline __attribute__((always_inline)) void
ncp_interior(const int KH, const int KW, const int AVG,
	     const struct mi_pool2d *p, int c, const float *xr, float *y,
	     int yblk, int cb, int oy, int ox0, int ox1)
{
	const int64_t ohw = (int64_t)p->oh * p->ow, rs = (int64_t)p->iw * VW;
	const int64_t step = (int64_t)p->s * VW;
	const vf scale = vset1((1.0f / KH) * (1.0f / KW));
	const float *xp = xr + (int64_t)(ox0 * p->s - p->pl) * VW;
	int ox, ky, kx;

	for (ox = ox0; ox < ox1; ox++, xp += step) {
		vf acc = vld(xp);

		UNROLL_NV for (ky = 0; ky < KH; ky++)
			UNROLL_NV for (kx = !ky; kx < KW; kx++) {
				vf v = vld(xp + ky * rs + kx * VW);

				acc = AVG ? acc + v : vmax(acc, v);
			}
		if (AVG)
			acc *= scale;
		nc_st(y, yblk, cb, ohw, (int64_t)oy * p->ow + ox, c, acc);
	}
}

static void nc_pool(const struct mi_pool2d *p, int c, const float *x,
		    float *y, int yblk, int cb0, int cb1, int oy0, int oy1)
{
	const int64_t ihw = (int64_t)p->ih * p->iw;
	int oxl, oxr;

	nc_interior(p->s, p->pl, 1, p->kw, p->iw, p->ow, &oxl, &oxr);
	for (int cb = cb0; cb < cb1; cb++) {
		const float *xc = x + (int64_t)cb * ihw * VW;

		for (int oy = oy0; oy < oy1; oy++) {
			int ky0, ky1, ry0 = oy * p->s - p->pt, ry1 = ry0 + p->kh;
			float rrow = 1.0f;
			int ox = 0, fast = 0;

			nc_taps(oy, p->s, p->pt, 1, p->kh, p->ih, &ky0, &ky1);
			if (p->avg) {
				int lo = p->include_pad ? ry0 : (ry0 > 0 ? ry0 : 0);
				int hi = p->include_pad ? p->ih + p->pb : p->ih;

				ry1 = ry1 < hi ? ry1 : hi;
				rrow = ry1 > lo ? 1.0f / (ry1 - lo) : 0.0f;
			}
			if (ky0 == 0 && ky1 == p->kh && oxl < oxr) {
				const float *xr = xc + (int64_t)ry0 * p->iw * VW;

				for (; ox < oxl; ox++)
					ncp_one(p, c, xc, y, yblk, cb, oy, ox, ky0,
						ky1, rrow);
				fast = 1;
				if (p->kh == 3 && p->kw == 3 && !p->avg)
					ncp_interior(3, 3, 0, p, c, xr, y, yblk, cb,
						     oy, oxl, oxr);
				else if (p->kh == 2 && p->kw == 2 && !p->avg)
					ncp_interior(2, 2, 0, p, c, xr, y, yblk, cb,
						     oy, oxl, oxr);
				else if (p->kh == 3 && p->kw == 3)
					ncp_interior(3, 3, 1, p, c, xr, y, yblk, cb,
						     oy, oxl, oxr);
				else if (p->kh == 2 && p->kw == 2)
					ncp_interior(2, 2, 1, p, c, xr, y, yblk, cb,
						     oy, oxl, oxr);
				else
					fast = 0;
				if (fast)
					ox = oxr;
			}
			for (; ox < p->ow; ox++)
				ncp_one(p, c, xc, y, yblk, cb, oy, ox, ky0, ky1,
					rrow);
		}
	}
}

/* ---- Winograd F(4x4, 3x3) on blocked data (winograd.c's mi_ncw_*) ------ */
/*
 * Input transform of channel block cb, tile rows [ty0, ty1) (tw tiles per
 * row, nt per image): V = B^T d B of each tile's 6x6 patch, vectorized
 * over the block's channels (no shuffles: a pixel is one vector).
 * Element xi = 6 * (row of B^T d) + column of tile t goes to
 * v[xi * xs + (cb * nt + t) * VW], so V[xi] is a blocked map of nt
 * positions (the GEMM runs as a 1x1 conv on it).  x is blocked; patches
 * that reach the padding or past the map are gathered with zeros.
 */
static void ncw_in(const struct mi_nc_conv *p, const float *x, float *v,
		   size_t xs, int tw, int nt, int cb, int ty0, int ty1)
{
	const int h = p->h, w = p->w;
	const float *xc = x + (size_t)cb * h * w * VW;
	float *vc = v + (size_t)cb * nt * VW;
	float patch[36 * VW] __attribute__((aligned(64)));

	for (int ty = ty0; ty < ty1; ty++)
		for (int tx = 0; tx < tw; tx++) {
			const int iy0 = ty * 4 - p->pt, ix0 = tx * 4 - p->pl;
			const size_t t = (size_t)ty * tw + tx;
			const float *src;
			ptrdiff_t rs;
			vf tt[6][6], d[6], col[6], o[6];
			int r, i;

			if (iy0 >= 0 && ix0 >= 0 && iy0 + 6 <= h && ix0 + 6 <= w) {
				src = xc + ((size_t)iy0 * w + ix0) * VW;
				rs = (ptrdiff_t)w * VW;
			} else {
				for (r = 0; r < 6; r++)
					for (i = 0; i < 6; i++) {
						int iy = iy0 + r, ix = ix0 + i;

						vst(patch + (r * 6 + i) * VW,
						    iy >= 0 && iy < h && ix >= 0 &&
								    ix < w ?
							    vld(xc + ((size_t)iy * w + ix) * VW) :
							    vset1(0.0f));
					}
				src = patch;
				rs = 6 * VW;
			}
			for (r = 0; r < 6; r++) {
				for (i = 0; i < 6; i++)
					d[i] = vld(src + r * rs + i * VW);
				wino_bt(d, tt[r]);
			}
			for (i = 0; i < 6; i++) {
				for (r = 0; r < 6; r++)
					col[r] = tt[r][i];
				wino_bt(col, o);
				for (r = 0; r < 6; r++)
					vst(vc + (size_t)(r * 6 + i) * xs + t * VW, o[r]);
			}
		}
}

/*
 * Output transform of output block mb, tile rows [ty0, ty1): Y = A^T M A
 * of each tile (M as V above), + bias, + residual, activation, stored
 * into y's 4x4 pixels that lie in the map (layout p->yblk, residual
 * p->rblk).  ACT is a constant per instance; fast: blocked y and residual.
 */
static inline __attribute__((always_inline)) void
ncw_out_t(const int ACT, const bool fast, const struct mi_nc_conv *p,
	  const float *mt, size_t xs, int tw, int nt, const float *res,
	  float *y, int mb, int ty0, int ty1)
{
	const int oh = p->oh, ow = p->ow, m = p->m;
	const int64_t ohw = (int64_t)oh * ow;
	const float lo = p->lo, hi = p->hi;
	const float *mc = mt + (size_t)mb * nt * VW;
	const vf bias = vld(p->bias + mb * VW);
	float *yb = y + (size_t)mb * ohw * VW;
	const float *rb = res ? res + (size_t)mb * ohw * VW : NULL;

	for (int ty = ty0; ty < ty1; ty++)
		for (int tx = 0; tx < tw; tx++) {
			const size_t t = (size_t)ty * tw + tx;
			vf tt[4][6], mm[6], o[4], yv[4];
			int r, j, k;

			for (j = 0; j < 6; j++) {
				for (r = 0; r < 6; r++)
					mm[r] = vld(mc + (size_t)(r * 6 + j) * xs + t * VW);
				wino_at(mm, o);
				for (r = 0; r < 4; r++)
					tt[r][j] = o[r];
			}
			for (r = 0; r < 4 && ty * 4 + r < oh; r++) {
				const int oy = ty * 4 + r;

				wino_at(tt[r], yv);
				for (k = 0; k < 4 && tx * 4 + k < ow; k++) {
					const int64_t pos = (int64_t)oy * ow + tx * 4 + k;
					vf a = yv[k] + bias;

					if (fast) {
						if (rb)
							a += vld(rb + pos * VW);
						vst(yb + pos * VW, nc_act(ACT, a, lo, hi));
					} else {
						if (res)
							a += nc_ld(res, p->rblk, mb, ohw, pos, m);
						nc_st(y, p->yblk, mb, ohw, pos, m,
						      nc_act(ACT, a, lo, hi));
					}
				}
			}
		}
}

#define NCW_CASE(A)                                                       \
	case A:                                                           \
		if (fast)                                                 \
			ncw_out_t(A, true, p, mt, xs, tw, nt, res, y, mb, ty0, \
				  ty1);                                   \
		else                                                      \
			ncw_out_t(A, false, p, mt, xs, tw, nt, res, y, mb, ty0, \
				  ty1);                                   \
		return;
static void ncw_out(const struct mi_nc_conv *p, const float *mt, size_t xs,
		    int tw, int nt, const float *res, float *y, int mb, int ty0,
		    int ty1)
{
	const bool fast = p->yblk && (!res || p->rblk);

	switch (p->act) {
	NCW_CASE(MI_ACT_RELU)
	NCW_CASE(MI_ACT_CLIP)
	NCW_CASE(MI_ACT_HSWISH)
	NCW_CASE(MI_ACT_SIGMOID)
	NCW_CASE(MI_ACT_SILU)
	default:
		NCW_CASE(MI_ACT_NONE)
	}
}
#undef NCW_CASE

const struct mi_nc_kern NTAB = {
	.b = VW,
	.ob = NC_OB,
	.conv = nc_conv,
	.dw = nc_dw,
	.to_blk = nc_to_blk,
	.from_blk = nc_from_blk,
	.gap = nc_gap,
	.chmul = nc_chmul,
	.add = nc_add,
	.pool = nc_pool,
	.wino_in = ncw_in,
	.wino_out = ncw_out,
};
