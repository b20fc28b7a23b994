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

static void k_ukr(int kc, const float *restrict a, const float *restrict b,
		  float *c, ptrdiff_t ldc, int mr, int nr, int acc,
		  const struct mi_epi *epi, int64_t row0, int64_t col0)
{
	vf r[KMR][KNV];
	int i, j, k;

	UNROLL_MR for (i = 0; i < KMR; i++)
		UNROLL_NV for (j = 0; j < KNV; j++)
			r[i][j] = vset1(0.0f);

	for (k = 0; k < kc; k++) {
		vf bv[KNV];

		UNROLL_NV for (j = 0; j < KNV; j++)
			bv[j] = vld(b + j * VW);
		UNROLL_MR for (i = 0; i < KMR; i++) {
			vf av = vset1(a[i]);

			UNROLL_NV for (j = 0; j < KNV; j++)
				r[i][j] += av * bv[j];
		}
		a += KMR;
		b += KNR;
	}

	if (mr == KMR && nr == KNR) {
		UNROLL_MR for (i = 0; i < KMR; i++) {
			float *cr = c + i * ldc;

			UNROLL_NV for (j = 0; j < KNV; j++) {
				vf v = r[i][j];

				if (acc)
					v += vld(cr + j * VW);
				if (epi)
					v = epi_vec(epi, v, row0 + i,
						    col0 + j * VW);
				vst(cr + j * VW, v);
			}
		}
		return;
	}

	/* Edge tile: spill, then write the valid part element-wise. */
	{
		float t[KMR * KNR] __attribute__((aligned(64)));

		UNROLL_MR for (i = 0; i < KMR; i++)
			UNROLL_NV for (j = 0; j < KNV; j++)
				vst(t + i * KNR + j * VW, r[i][j]);
		for (i = 0; i < mr; i++) {
			float *cr = c + i * ldc;

			for (j = 0; j < nr; j++) {
				float v = t[i * KNR + j];

				if (acc)
					v += cr[j];
				if (epi)
					v = mi_epi_scalar(epi, v, row0 + i,
							  col0 + j);
				cr[j] = v;
			}
		}
	}
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
