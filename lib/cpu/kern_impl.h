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
 * Depthwise conv of one plane.  The input is copied once into a
 * zero-padded buffer (stride 1) or into de-interleaved even/odd column
 * buffers (stride 2), so every tap of a vector of outputs is one
 * contiguous load.
 */
static void k_dw(const float *x, int ih, int iw, const float *w, int k,
		 int stride, int pt, int pl, float *out, int oh, int ow,
		 const struct mi_epi *e, int c, float *ws)
{
	int owv = (ow + VW - 1) / VW * VW;
	int rows = (oh - 1) * stride + k;
	int pw, r, oy, ox, ky, kx;
	float *p0, *p1, *acc;
	float wk[25];

	for (r = 0; r < k * k; r++)
		wk[r] = w[r];

	if (stride == 1) {
		pw = owv + k - 1;
		p0 = ws;
		p1 = NULL;
		acc = p0 + (size_t)rows * pw;
		for (r = 0; r < rows; r++) {
			float *pr = p0 + (size_t)r * pw;
			int iy = r - pt;
			int x0, x1;

			if (iy < 0 || iy >= ih) {
				memset(pr, 0, pw * sizeof(float));
				continue;
			}
			/* pr[j] = x[iy][j - pl] */
			x0 = pl > 0 ? pl : 0;
			x1 = pl + iw < pw ? pl + iw : pw;
			if (x0 > 0)
				memset(pr, 0, x0 * sizeof(float));
			memcpy(pr + x0, x + (size_t)iy * iw + (x0 - pl),
			       (x1 - x0) * sizeof(float));
			if (x1 < pw)
				memset(pr + x1, 0, (pw - x1) * sizeof(float));
		}
		for (oy = 0; oy < oh; oy++) {
			for (ox = 0; ox < owv; ox += VW) {
				vf s = vset1(0.0f);

				for (ky = 0; ky < k; ky++) {
					const float *pr =
						p0 + (size_t)(oy + ky) * pw + ox;

					for (kx = 0; kx < k; kx++)
						s += wk[ky * k + kx] *
						     vld(pr + kx);
				}
				vst(acc + ox, s);
			}
			k_epi_row(e, acc, out + (size_t)oy * ow, ow, c,
				  (int64_t)oy * ow);
		}
		return;
	}

	/* stride 2: even columns in p0, odd columns in p1 */
	pw = owv + k / 2 + 1;
	p0 = ws;
	p1 = p0 + (size_t)rows * pw;
	acc = p1 + (size_t)rows * pw;
	for (r = 0; r < rows; r++) {
		float *pe = p0 + (size_t)r * pw, *po = p1 + (size_t)r * pw;
		int iy = r - pt;
		const float *xr = x + (size_t)iy * iw;
		int j;

		if (iy < 0 || iy >= ih) {
			memset(pe, 0, pw * sizeof(float));
			memset(po, 0, pw * sizeof(float));
			continue;
		}
		for (j = 0; j < pw; j++) {
			int ie = 2 * j - pl, io = 2 * j + 1 - pl;

			pe[j] = (ie >= 0 && ie < iw) ? xr[ie] : 0.0f;
			po[j] = (io >= 0 && io < iw) ? xr[io] : 0.0f;
		}
	}
	for (oy = 0; oy < oh; oy++) {
		for (ox = 0; ox < owv; ox += VW) {
			vf s = vset1(0.0f);

			for (ky = 0; ky < k; ky++) {
				size_t ro = (size_t)(2 * oy + ky) * pw + ox;

				for (kx = 0; kx < k; kx++) {
					const float *src =
						(kx & 1) ? p1 + ro : p0 + ro;

					s += wk[ky * k + kx] * vld(src + kx / 2);
				}
			}
			vst(acc + ox, s);
		}
		k_epi_row(e, acc, out + (size_t)oy * ow, ow, c,
			  (int64_t)oy * ow);
	}
}

const struct mi_cpu_kern KTAB = {
	.isa = KISA,
	.mr = KMR,
	.nr = KNR,
	.ukr = k_ukr,
	.epi_row = k_epi_row,
	.dw = k_dw,
};
