/* SPDX-License-Identifier: MIT */
/*
 * Kernel bodies shared by every ISA.  The including file defines
 *   VW   floats per vector (4, 8, 16)
 *   KMR  GEMM micro-tile rows
 *   KNV  GEMM micro-tile width in vectors (NR = KNV * VW)
 *   KISA enum mi_isa value
 *   KTAB name of the struct mi_cpu_kern table to define
 * and its target (#pragma GCC target) before including this file.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cpu/cpu.h"
#include "cpu/vec.h"

#define KNR (KNV * VW)

#define UNROLL_MR _Pragma("GCC unroll 32")
#define UNROLL_NV _Pragma("GCC unroll 8")

/* Epilogue of one full vector at (row, col). */
static inline vf epi_vec(const struct mi_epi *e, vf v, int64_t row,
			 int64_t col)
{
	if (e->bias_kind == MI_BIAS_ROW)
		v += e->bias[row];
	else if (e->bias_kind == MI_BIAS_COL)
		v += vld(e->bias + col);
	if (e->res)
		v += vld(e->res + row * e->ldr + col);
	return vact(e->act, v, e->lo, e->hi);
}

static void k_epi_row(const struct mi_epi *e, const float *x, float *y,
		      int64_t n, int64_t row, int64_t col0)
{
	int64_t j = 0;

	for (; j + VW <= n; j += VW)
		vst(y + j, epi_vec(e, vld(x + j), row, col0 + j));
	for (; j < n; j++)
		y[j] = mi_epi_scalar(e, x[j], row, col0 + j);
}

/* Partial vectors (edge columns): n < VW valid lanes, rest zero. */
static inline vf vld_part(const float *p, int n)
{
	float t[VW] __attribute__((aligned(64))) = { 0 };

	memcpy(t, p, n * sizeof(float));
	return vld(t);
}

static inline void vst_part(float *p, vf v, int n)
{
	float t[VW] __attribute__((aligned(64)));

	vst(t, v);
	memcpy(p, t, n * sizeof(float));
}

static inline vf epi_vec_part(const struct mi_epi *e, vf v, int64_t row,
			      int64_t col, int n)
{
	if (e->bias_kind == MI_BIAS_ROW)
		v += e->bias[row];
	else if (e->bias_kind == MI_BIAS_COL)
		v += vld_part(e->bias + col, n);
	if (e->res)
		v += vld_part(e->res + row * e->ldr + col, n);
	return vact(e->act, v, e->lo, e->hi);
}

/* Epilogue over an m x n tile of C that is still in L1. */
static __attribute__((noinline)) void epi_tile(const struct mi_epi *e,
					       float *c, ptrdiff_t ldc, int m,
					       int n, int64_t row0,
					       int64_t col0)
{
	for (int i = 0; i < m; i++) {
		float *cr = c + i * ldc;
		int j = 0;

		for (; j + VW <= n; j += VW)
			vst(cr + j, epi_vec(e, vld(cr + j), row0 + i, col0 + j));
		if (j < n)
			vst_part(cr + j,
				 epi_vec_part(e, vld_part(cr + j, n - j),
					      row0 + i, col0 + j, n - j),
				 n - j);
	}
}

/*
 * Micro-kernel body for an m_ x (nv_ vectors) tile, m_ <= KMR, nv_ <=
 * KNV; the packed panels are always KMR x KNR wide.  nlast: valid lanes
 * of the last vector (VW when full).  Instantiated for every (m_, nv_)
 * so edge tiles cost only what they compute.
 */
static inline __attribute__((always_inline)) void
ukr_body(const int m0_, const int nv0_, int kc, const float *restrict a,
	 const float *restrict b, float *c, ptrdiff_t ldc, int nlast, int acc,
	 const struct mi_epi *epi, int64_t row0, int64_t col0)
{
	/* Instances past KMR/KNV exist only to fill the table; clamp them.
	 * r must stay exactly KMR x KNV or GCC stops keeping it in
	 * registers. */
	const int m_ = m0_ > KMR ? KMR : m0_;
	const int nv_ = nv0_ > KNV ? KNV : nv0_;
	vf r[KMR][KNV];
	int i, j, k;

	UNROLL_MR for (i = 0; i < m_; i++)
		UNROLL_NV for (j = 0; j < nv_; j++)
			r[i][j] = vset1(0.0f);

	for (k = 0; k < kc; k++) {
		vf bv[KNV];

		UNROLL_NV for (j = 0; j < nv_; j++)
			bv[j] = vld(b + j * VW);
		UNROLL_MR for (i = 0; i < m_; i++) {
			vf av = vset1(a[i]);

			UNROLL_NV for (j = 0; j < nv_; j++)
				r[i][j] += av * bv[j];
		}
		a += KMR;
		b += KNR;
	}

	/* Plain stores first: keeping the epilogue's temporaries out of
	 * this function keeps all accumulators in registers. */
	UNROLL_MR for (i = 0; i < m_; i++) {
		float *cr = c + i * ldc;

		UNROLL_NV for (j = 0; j < nv_; j++) {
			vf v = r[i][j];

			if (j < nv_ - 1 || nlast == VW) {
				if (acc)
					v += vld(cr + j * VW);
				vst(cr + j * VW, v);
			} else {
				if (acc)
					v += vld_part(cr + j * VW, nlast);
				vst_part(cr + j * VW, v, nlast);
			}
		}
	}
	if (epi)
		epi_tile(epi, c, ldc, m_, (nv_ - 1) * VW + nlast, row0, col0);
}

#define UKR_ARGS                                                          \
	int kc, const float *restrict a, const float *restrict b, float *c, \
		ptrdiff_t ldc, int nlast, int acc, const struct mi_epi *epi, \
		int64_t row0, int64_t col0
#define UKR_PASS kc, a, b, c, ldc, nlast, acc, epi, row0, col0
#define UKR_INST(M, V)                                                   \
	static void ukr_##M##_##V(UKR_ARGS)                              \
	{                                                                \
		ukr_body(M, V, UKR_PASS);                                \
	}

typedef void (*ukr_fn)(UKR_ARGS);

#if KMR > 8 || KNV > 4
#error "instance table covers KMR <= 8, KNV <= 4"
#endif
#define UKR_ROW(M)                                                          \
	UKR_INST(M, 1) UKR_INST(M, 2) UKR_INST(M, 3) UKR_INST(M, 4)
UKR_ROW(1) UKR_ROW(2) UKR_ROW(3) UKR_ROW(4)
UKR_ROW(5) UKR_ROW(6) UKR_ROW(7) UKR_ROW(8)

#define UKR_TROW(M) { ukr_##M##_1, ukr_##M##_2, ukr_##M##_3, ukr_##M##_4 }
static const ukr_fn ukr_tab[8][4] = {
	UKR_TROW(1), UKR_TROW(2), UKR_TROW(3), UKR_TROW(4),
	UKR_TROW(5), UKR_TROW(6), UKR_TROW(7), UKR_TROW(8),
};

static void k_ukr(int kc, const float *restrict a, const float *restrict b,
		  float *c, ptrdiff_t ldc, int mr, int nr, int acc,
		  const struct mi_epi *epi, int64_t row0, int64_t col0)
{
	int nv = (nr + VW - 1) / VW;

	ukr_tab[mr - 1][nv - 1](kc, a, b, c, ldc, nr - (nv - 1) * VW, acc,
				epi, row0, col0);
}

/*
 * Depthwise conv of one plane.  Every input row the outputs need is
 * copied once into a zero-padded row buffer (stride 1), or de-interleaved
 * into even/odd column buffers (stride 2), so each tap of a vector of
 * outputs is one contiguous load; kernel size and stride are compile-time
 * constants in the inner loops, taps live in registers and the epilogue
 * is applied before the single store.
 */
static inline __attribute__((always_inline)) vf
dw_epi(const struct mi_epi *e, vf v, int c, int64_t col, int n)
{
	if (n == VW)
		return epi_vec(e, v, c, col);
	return epi_vec_part(e, v, c, col, n);
}

/* Source of tap t (= ky*K + kx) for the output vector at (oy, ox). */
static inline __attribute__((always_inline)) const float *
dw_src(const int K, const int S, const float *pad, const float *ev,
       const float *od, int pw, int hw, int oy, int ox, int t)
{
	int ky = t / K, kx = t % K;
	size_t ro = (size_t)(oy * S + ky);

	if (S == 1)
		return pad + ro * pw + ox + kx;
	return ((kx & 1) ? od : ev) + ro * hw + ox + kx / 2;
}

static inline __attribute__((always_inline)) void
dw_plane(const int K, const int S, const float *x, int ih, int iw,
	 const float *w, int pt, int pl, float *out, int oh, int ow,
	 const struct mi_epi *e, int c, float *ws)
{
	const int owv = (ow + VW - 1) / VW * VW;
	const int rows = (oh - 1) * S + K;
	/* stride 1: padded rows of pw; stride 2: even/odd rows of hw each */
	const int hw = owv + K / 2 + 2 * VW;
	const int pw = owv + K - 1 + VW;
	float *pad = ws, *ev = ws, *od = ws + (size_t)rows * hw;
	int r, oy, ox;

	for (r = 0; r < rows; r++) {
		int iy = r - pt;

		if (S == 1) {
			float *pr = pad + (size_t)r * pw;
			int x1 = pl + iw < pw ? pl + iw : pw;

			if (iy < 0 || iy >= ih) {
				memset(pr, 0, pw * sizeof(float));
				continue;
			}
			/* pr[j] = x[iy][j - pl] */
			memset(pr, 0, pl * sizeof(float));
			memcpy(pr + pl, x + (size_t)iy * iw,
			       (x1 - pl) * sizeof(float));
			if (x1 < pw)
				memset(pr + x1, 0, (pw - x1) * sizeof(float));
		} else {
			/*
			 * Padded column p = x column p - pl; even padded
			 * columns go to ev, odd ones to od.  With XE[i] =
			 * x[2i], XO[i] = x[2i+1] and pl = 2q (+1):
			 *   pl even: ev[j] = XE[j-q], od[j] = XO[j-q]
			 *   pl odd:  ev[j] = XO[j-q-1], od[j] = XE[j-q]
			 * De-interleaved straight from x (reading back a
			 * freshly copied row would stall on store forwarding).
			 */
			float *er = ev + (size_t)r * hw, *orw = od + (size_t)r * hw;
			const float *xr = x + (size_t)iy * iw;
			int q = pl / 2, need = owv + K / 2 + 1, i, r0;
			float *de, *dodd;

			if (iy < 0 || iy >= ih) {
				memset(er, 0, hw * sizeof(float));
				memset(orw, 0, hw * sizeof(float));
				continue;
			}
			/* head (left padding); the loop below writes whole
			 * vectors, zero past the input, then the tail */
			for (i = 0; i <= q; i++)
				er[i] = orw[i] = 0.0f;
			de = (pl & 1) ? orw + q : er + q;
			dodd = (pl & 1) ? er + q + 1 : orw + q;
			for (i = 0; 2 * i < iw && i + q < need; i += VW) {
				int n0 = iw - 2 * i, n1 = iw - 2 * i - VW;
				vf a = n0 >= VW ? vld(xr + 2 * i) :
						  vld_part(xr + 2 * i, n0);
				vf b = n1 >= VW ? vld(xr + 2 * i + VW) :
				       n1 > 0	? vld_part(xr + 2 * i + VW, n1) :
						  vset1(0.0f);
#if VW == 16
				vst(de + i, __builtin_shuffle(a, b, (vi){ 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30 }));
				vst(dodd + i, __builtin_shuffle(a, b, (vi){ 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31 }));
#elif VW == 8
				vst(de + i, __builtin_shuffle(a, b, (vi){ 0, 2, 4, 6, 8, 10, 12, 14 }));
				vst(dodd + i, __builtin_shuffle(a, b, (vi){ 1, 3, 5, 7, 9, 11, 13, 15 }));
#else
				vst(de + i, __builtin_shuffle(a, b, (vi){ 0, 2, 4, 6 }));
				vst(dodd + i, __builtin_shuffle(a, b, (vi){ 1, 3, 5, 7 }));
#endif
			}
			/* de/dodd wrote [q, i+q) and [q+1, i+q+1) (pl odd:
			 * swapped); zero what follows */
			for (r0 = i + q; r0 < hw; r0++) {
				if (r0 > i + q || !(pl & 1))
					er[r0] = 0.0f;
				orw[r0] = 0.0f;
			}
		}
	}
	for (oy = 0; oy < oh; oy++) {
		float *orow = out + (size_t)oy * ow;

		/* 4 output vectors per pass: each tap's weight is broadcast
		 * once for 4 loads and 4 FMAs */
		for (ox = 0; ox < ow; ox += 4 * VW) {
			vf acc[4];
			int nvv = (ow - ox + VW - 1) / VW, v, t;

			if (nvv > 4)
				nvv = 4;
			if (nvv == 4) {
				acc[0] = acc[1] = acc[2] = acc[3] = vset1(0.0f);
				_Pragma("GCC unroll 25") for (t = 0; t < K * K; t++) {
					const float *src = dw_src(K, S, pad, ev, od,
								  pw, hw, oy, ox, t);
					vf wt = vset1(w[t]);

					acc[0] += wt * vld(src);
					acc[1] += wt * vld(src + VW);
					acc[2] += wt * vld(src + 2 * VW);
					acc[3] += wt * vld(src + 3 * VW);
				}
			} else {
				for (v = 0; v < nvv; v++) {
					acc[v] = vset1(0.0f);
					_Pragma("GCC unroll 25") for (t = 0; t < K * K; t++)
						acc[v] += vset1(w[t]) *
							  vld(dw_src(K, S, pad, ev, od,
								     pw, hw, oy,
								     ox + v * VW, t));
				}
			}
			for (v = 0; v < nvv; v++) {
				int o = ox + v * VW, n = ow - o < VW ? ow - o : VW;

				if (n == VW)
					vst(orow + o, dw_epi(e, acc[v], c,
							     (int64_t)oy * ow + o, VW));
				else
					vst_part(orow + o,
						 dw_epi(e, acc[v], c,
							(int64_t)oy * ow + o, n),
						 n);
			}
		}
	}
}

static void k_dw(const float *x, int ih, int iw, const float *w, int k,
		 int stride, int pt, int pl, float *out, int oh, int ow,
		 const struct mi_epi *e, int c, float *ws)
{
	if (k == 3 && stride == 1)
		dw_plane(3, 1, x, ih, iw, w, pt, pl, out, oh, ow, e, c, ws);
	else if (k == 3)
		dw_plane(3, 2, x, ih, iw, w, pt, pl, out, oh, ow, e, c, ws);
	else if (stride == 1)
		dw_plane(5, 1, x, ih, iw, w, pt, pl, out, oh, ow, e, c, ws);
	else
		dw_plane(5, 2, x, ih, iw, w, pt, pl, out, oh, ow, e, c, ws);
}

const struct mi_cpu_kern KTAB = {
	.isa = KISA,
	.mr = KMR,
	.nr = KNR,
	.ukr = k_ukr,
	.epi_row = k_epi_row,
	.dw = k_dw,
};
