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

/* Partial vectors (edge columns): n < VW valid lanes, rest zero. */
/*
 * The first n < VW lanes (the others 0 / untouched): masked loads and
 * stores on AVX-512 and AVX2 (no memory access past lane n, no stack
 * round trip, which stalls on store forwarding), a copy otherwise.
 */
#if defined(__x86_64__) && VW == 16
static inline vf vld_part(const float *p, int n)
{
	return _mm512_maskz_loadu_ps((__mmask16)((1u << n) - 1), p);
}

static inline void vst_part(float *p, vf v, int n)
{
	_mm512_mask_storeu_ps(p, (__mmask16)((1u << n) - 1), v);
}
#elif defined(__x86_64__) && VW == 8
static inline __m256i vmask_part(int n)
{
	return _mm256_cmpgt_epi32(_mm256_set1_epi32(n),
				  _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

static inline vf vld_part(const float *p, int n)
{
	return _mm256_maskload_ps(p, vmask_part(n));
}

static inline void vst_part(float *p, vf v, int n)
{
	_mm256_maskstore_ps(p, vmask_part(n), v);
}
#else
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
#endif

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

static void k_epi_row(const struct mi_epi *e, const float *x, float *y,
		      int64_t n, int64_t row, int64_t col0)
{
	int64_t j = 0;

	for (; j + VW <= n; j += VW)
		vst(y + j, epi_vec(e, vld(x + j), row, col0 + j));
	if (j < n)
		vst_part(y + j,
			 epi_vec_part(e, vld_part(x + j, (int)(n - j)), row,
				      col0 + j, (int)(n - j)),
			 (int)(n - j));
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
ukr_body(const int m0_, const int nv0_, const int EPI, int kc,
	 const float *restrict a, const float *restrict b, ptrdiff_t ldb,
	 float *c, ptrdiff_t ldc, int nlast, int acc, const struct mi_epi *epi,
	 int64_t row0, int64_t col0)
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
		b += ldb;
	}

	/*
	 * EPI 1: the common conv epilogue (row bias, then clamp to
	 * [lo, hi]: none/Relu/Clip) in registers; EPI 2: the same plus a
	 * residual added before the clamp.  EPI 0: plain stores, then any
	 * other epilogue as a separate pass over the tile while it is in L1
	 * (its temporaries would push accumulators out of registers).
	 */
	UNROLL_MR for (i = 0; i < m_; i++) {
		float *cr = c + i * ldc;
		const float *rr = EPI == 2 ?
			epi->res + (row0 + i) * epi->ldr + col0 : NULL;
		vf vb, vlo, vhi;

		if (EPI) {
			vb = vset1(epi->bias_kind == MI_BIAS_ROW ?
					   epi->bias[row0 + i] :
					   0.0f);
			vlo = vset1(epi->act == MI_ACT_NONE ? -__builtin_inff() :
				    epi->act == MI_ACT_RELU ? 0.0f :
							      epi->lo);
			vhi = vset1(epi->act == MI_ACT_CLIP ? epi->hi :
							      __builtin_inff());
		}
		UNROLL_NV for (j = 0; j < nv_; j++) {
			vf v = r[i][j];

			if (j < nv_ - 1 || nlast == VW) {
				if (acc)
					v += vld(cr + j * VW);
				if (EPI == 2)
					v += vld(rr + j * VW);
				if (EPI)
					v = vmin(vmax(v + vb, vlo), vhi);
				vst(cr + j * VW, v);
			} else {
				if (acc)
					v += vld_part(cr + j * VW, nlast);
				if (EPI == 2)
					v += vld_part(rr + j * VW, nlast);
				if (EPI)
					v = vmin(vmax(v + vb, vlo), vhi);
				vst_part(cr + j * VW, v, nlast);
			}
		}
	}
	if (!EPI && epi)
		epi_tile(epi, c, ldc, m_, (nv_ - 1) * VW + nlast, row0, col0);
}

#define UKR_ARGS                                                          \
	int kc, const float *restrict a, const float *restrict b,         \
		ptrdiff_t ldb, float *c, ptrdiff_t ldc, int nlast, int acc,  \
		const struct mi_epi *epi, int64_t row0, int64_t col0
#define UKR_PASS kc, a, b, ldb, c, ldc, nlast, acc, epi, row0, col0
#define UKR_INST(M, V)                                                   \
	static void ukr_##M##_##V(UKR_ARGS)                              \
	{                                                                \
		ukr_body(M, V, 0, UKR_PASS);                             \
	}                                                                \
	static void ukr_##M##_##V##_e(UKR_ARGS)                          \
	{                                                                \
		ukr_body(M, V, 1, UKR_PASS);                             \
	}                                                                \
	static void ukr_##M##_##V##_r(UKR_ARGS)                          \
	{                                                                \
		ukr_body(M, V, 2, UKR_PASS);                             \
	}

typedef void (*ukr_fn)(UKR_ARGS);

#if KMR > 8 || KNV > 4
#error "instance table covers KMR <= 8, KNV <= 4"
#endif
#define UKR_ROW(M)                                                          \
	UKR_INST(M, 1) UKR_INST(M, 2) UKR_INST(M, 3) UKR_INST(M, 4)
UKR_ROW(1) UKR_ROW(2) UKR_ROW(3) UKR_ROW(4)
UKR_ROW(5) UKR_ROW(6) UKR_ROW(7) UKR_ROW(8)

#define UKR_TROW(M, E)                                                      \
	{ ukr_##M##_1##E, ukr_##M##_2##E, ukr_##M##_3##E, ukr_##M##_4##E }
static const ukr_fn ukr_tab[3][8][4] = {
	{ UKR_TROW(1, ), UKR_TROW(2, ), UKR_TROW(3, ), UKR_TROW(4, ),
	  UKR_TROW(5, ), UKR_TROW(6, ), UKR_TROW(7, ), UKR_TROW(8, ) },
	{ UKR_TROW(1, _e), UKR_TROW(2, _e), UKR_TROW(3, _e), UKR_TROW(4, _e),
	  UKR_TROW(5, _e), UKR_TROW(6, _e), UKR_TROW(7, _e), UKR_TROW(8, _e) },
	{ UKR_TROW(1, _r), UKR_TROW(2, _r), UKR_TROW(3, _r), UKR_TROW(4, _r),
	  UKR_TROW(5, _r), UKR_TROW(6, _r), UKR_TROW(7, _r), UKR_TROW(8, _r) },
};

static void k_ukr(int kc, const float *restrict a, const float *restrict b,
		  ptrdiff_t ldb, float *c, ptrdiff_t ldc, int mr, int nr,
		  int acc, const struct mi_epi *epi, int64_t row0, int64_t col0)
{
	int nv = (nr + VW - 1) / VW;
	/* 1: row bias + clamp in registers, 2: also a residual */
	int simple = epi && epi->bias_kind != MI_BIAS_COL &&
		     (epi->act == MI_ACT_NONE || epi->act == MI_ACT_RELU ||
		      epi->act == MI_ACT_CLIP) ?
			     (epi->res ? 2 : 1) :
			     0;

	ukr_tab[simple][mr - 1][nv - 1](kc, a, b, ldb, c, ldc,
					nr - (nv - 1) * VW, acc, epi, row0,
					col0);
}

/*
 * Depthwise conv of one plane.  Every input row the outputs need is
 * copied once into a zero-padded row buffer (stride 1), or de-interleaved
 * into even/odd column buffers (stride 2), so each tap of a vector of
 * outputs is one contiguous load; kernel size and stride are compile-time
 * constants in the inner loops, and each tap's weight feeds four output
 * vectors.  The epilogue runs once over the finished plane (few partial
 * vectors for small maps).
 */
static inline void vfill(float *p, int n, float v)
{
	vf vv = vset1(v);
	int i = 0;

	/* short fills are the common case: no libc call */
	for (; i + VW <= n; i += VW)
		vst(p + i, vv);
	for (; i < n; i++)
		p[i] = v;
}

/* n < VW valid lanes, the others pv */
static inline vf vld_fill(const float *p, int n, float pv)
{
#if defined(__x86_64__) && VW == 16
	return _mm512_mask_loadu_ps(vset1(pv), (__mmask16)((1u << n) - 1), p);
#elif defined(__x86_64__) && VW == 8
	return _mm256_blendv_ps(vset1(pv), vld_part(p, n),
				_mm256_castsi256_ps(vmask_part(n)));
#else
	float t[VW] __attribute__((aligned(64)));

	vst(t, vset1(pv));
	memcpy(t, p, n * sizeof(float));
	return vld(t);
#endif
}

/*
 * Copy the input rows a sliding window needs into padded buffers (pad
 * value pv): stride 1 -> rows of pw floats, pr[j] = x[iy][j - pl];
 * stride 2 -> the even and odd padded columns in separate rows of hw
 * floats (ev, od), so that a vector of outputs reads each tap with one
 * contiguous load.  need: padded columns / 2 the window reads (stride 2).
 */
static inline __attribute__((always_inline)) void
prep_rows(const int S, const float *x, int ih, int iw, int rows, int pt,
	  int pl, int need, float pv, float *pad, int pw, float *ev,
	  float *od, int hw)
{
	int r;

	for (r = 0; r < rows; r++) {
		int iy = r - pt;

		if (S == 1) {
			float *pr = pad + (size_t)r * pw;
			int x1 = pl + iw < pw ? pl + iw : pw;

			if (iy < 0 || iy >= ih) {
				vfill(pr, pw, pv);
				continue;
			}
			vfill(pr, pl, pv);
			memcpy(pr + pl, x + (size_t)iy * iw,
			       (x1 - pl) * sizeof(float));
			if (x1 < pw)
				vfill(pr + x1, pw - x1, pv);
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
			int q = pl / 2, i, r0;
			float *de, *dodd;

			if (iy < 0 || iy >= ih) {
				vfill(er, hw, pv);
				vfill(orw, hw, pv);
				continue;
			}
			/* head (left padding); the loop below writes whole
			 * vectors, pv past the input, then the tail */
			for (i = 0; i <= q; i++)
				er[i] = orw[i] = pv;
			de = (pl & 1) ? orw + q : er + q;
			dodd = (pl & 1) ? er + q + 1 : orw + q;
			for (i = 0; 2 * i < iw && i + q < need; i += VW) {
				int n0 = iw - 2 * i, n1 = iw - 2 * i - VW;
				vf a = n0 >= VW ? vld(xr + 2 * i) :
						  vld_fill(xr + 2 * i, n0, pv);
				vf b = n1 >= VW ? vld(xr + 2 * i + VW) :
				       n1 > 0	? vld_fill(xr + 2 * i + VW, n1, pv) :
						  vset1(pv);
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
			 * swapped); fill what follows */
			r0 = i + q;
			if (r0 < hw) {
				if (pl & 1)
					vfill(er + r0 + 1, hw - r0 - 1, pv);
				else
					vfill(er + r0, hw - r0, pv);
				vfill(orw + r0, hw - r0, pv);
			}
		}
	}
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
	int oy, ox;

	prep_rows(S, x, ih, iw, rows, pt, pl, owv + K / 2 + 1, 0.0f, pad, pw, ev, od,
		  hw);
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
			/* raw stores; the epilogue runs once over the plane */
			for (v = 0; v < nvv; v++) {
				int o = ox + v * VW, n = ow - o < VW ? ow - o : VW;

				if (n == VW)
					vst(orow + o, acc[v]);
				else
					vst_part(orow + o, acc[v], n);
			}
		}
	}
	if (e->bias_kind != MI_BIAS_NONE || e->res || e->act != MI_ACT_NONE)
		k_epi_row(e, out, out, (int64_t)oh * ow, c, 0);
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

/*
 * MaxPool / AveragePool of one plane on the same padded row buffers as
 * the depthwise conv (pad value -inf for max, 0 for average); average
 * divides by per-row x per-column window counts (ONNX: count_include_pad
 * counts the explicit pads, never a ceil_mode overhang).
 */
static inline __attribute__((always_inline)) void
pool_plane(const int S, const int AVG, const int KK,
	   const struct mi_pool2d *p, const float *x, float *y, float *ws)
{
	/* KK: square window size as a compile-time constant (0: any) */
	const int kh = KK ? KK : p->kh, kw = KK ? KK : p->kw;
	const int owv = (p->ow + VW - 1) / VW * VW;
	const int rows = (p->oh - 1) * S + kh;
	const int hw = owv + kw / 2 + 2 * VW;
	const int pw = owv + kw - 1 + VW;
	float *rc = ws, *pad = ws + owv, *ev = pad, *od = ev + (size_t)rows * hw;
	int oy, ox, ky, kx;

	prep_rows(S, x, p->ih, p->iw, rows, p->pt, p->pl,
		  owv + kw / 2 + 1, AVG ? 0.0f : -__builtin_inff(), pad,
		  pw, ev, od, hw);
	if (AVG) {
		/* 1 / column count */
		for (ox = 0; ox < owv; ox++) {
			int st = ox * S - p->pl, en = st + kw;
			int lo = p->include_pad ? st : (st > 0 ? st : 0);
			int hi = p->include_pad ? p->iw + p->pr : p->iw;

			en = en < hi ? en : hi;
			rc[ox] = en > lo ? 1.0f / (en - lo) : 0.0f;
		}
	}
	for (oy = 0; oy < p->oh; oy++) {
		float *orow = y + (size_t)oy * p->ow;
		float rrow = 1.0f;

		if (AVG) {
			int st = oy * S - p->pt, en = st + kh;
			int lo = p->include_pad ? st : (st > 0 ? st : 0);
			int hi = p->include_pad ? p->ih + p->pb : p->ih;

			en = en < hi ? en : hi;
			rrow = en > lo ? 1.0f / (en - lo) : 0.0f;
		}
		for (ox = 0; ox < p->ow; ox += VW) {
			vf acc = vset1(AVG ? 0.0f : -__builtin_inff());
			int n = p->ow - ox < VW ? p->ow - ox : VW;

			_Pragma("GCC unroll 4") for (ky = 0; ky < kh; ky++) {
				size_t ro = (size_t)(oy * S + ky);

				_Pragma("GCC unroll 4") for (kx = 0; kx < kw; kx++) {
					const float *src =
						S == 1 ? pad + ro * pw + ox + kx :
						((kx & 1) ? od : ev) + ro * hw +
							ox + kx / 2;

					if (AVG)
						acc += vld(src);
					else
						acc = vmax(acc, vld(src));
				}
			}
			if (AVG)
				acc = acc * vld(rc + ox) * rrow;
			if (n == VW)
				vst(orow + ox, acc);
			else
				vst_part(orow + ox, acc, n);
		}
	}
}

#define POOL_K(S, AVG)                                                   \
	do {                                                             \
		if (p->kh == 3 && p->kw == 3)                            \
			pool_plane(S, AVG, 3, p, x, y, ws);              \
		else if (p->kh == 2 && p->kw == 2)                       \
			pool_plane(S, AVG, 2, p, x, y, ws);              \
		else                                                     \
			pool_plane(S, AVG, 0, p, x, y, ws);              \
	} while (0)

static void k_pool(const struct mi_pool2d *p, const float *x, float *y,
		   float *ws)
{
	if (p->s == 1) {
		if (p->avg)
			POOL_K(1, 1);
		else
			POOL_K(1, 0);
	} else {
		if (p->avg)
			POOL_K(2, 1);
		else
			POOL_K(2, 0);
	}
}
#undef POOL_K

/* Blocks of 512 summed in float vectors, blocks added in double: the
 * reference sums in double, and a mean feeds squeeze-excitation scales
 * whose error the rest of the network amplifies. */
static float k_sum(const float *x, int64_t n)
{
	double s = 0.0;
	int64_t i = 0;
	int l;

	while (i + 4 * VW <= n) {
		vf a0 = vset1(0.0f), a1 = a0, a2 = a0, a3 = a0;
		int64_t end = i + 512 < n ? i + 512 : n;

		for (; i + 4 * VW <= end; i += 4 * VW) {
			a0 += vld(x + i);
			a1 += vld(x + i + VW);
			a2 += vld(x + i + 2 * VW);
			a3 += vld(x + i + 3 * VW);
		}
		a0 = (a0 + a1) + (a2 + a3);
		for (l = 0; l < VW; l++)
			s += a0[l];
	}
	for (; i < n; i++)
		s += x[i];
	return (float)s;
}

static float k_max(const float *x, int64_t n)
{
	vf a0 = vset1(-__builtin_inff());
	int64_t i = 0;
	float s = -__builtin_inff();
	int l;

	for (; i + VW <= n; i += VW)
		a0 = vmax(a0, vld(x + i));
	for (l = 0; l < VW; l++)
		s = a0[l] > s ? a0[l] : s;
	for (; i < n; i++)
		s = x[i] > s ? x[i] : s;
	return s;
}

/* ---- Winograd F(4x4, 3x3) transforms ---------------------------------- */
/* d B (one row of the 6x6 input tile; B^T of F(4,3) with the points
 * 0, 1, -1, 1/2, -2 (and infinity): ~1.4x less rounding error than
 * 0, +-1, +-2 (Barabasz et al., "Error analysis and improving the
 * accuracy of Winograd convolution for DNNs", 2020) */
static inline __attribute__((always_inline)) void
wino_bt(const vf *d, vf *o)
{
	o[0] = d[0] - 1.5f * d[1] - 2.0f * d[2] + 1.5f * d[3] + d[4];
	o[1] = -2.0f * d[1] + d[2] + 5.0f * d[3] + 2.0f * d[4];
	o[2] = 2.0f * d[1] - 5.0f * d[2] + d[3] + 2.0f * d[4];
	o[3] = -2.0f * d[1] - d[2] + 2.0f * d[3] + d[4];
	o[4] = d[1] - 2.0f * d[2] - d[3] + 2.0f * d[4];
	o[5] = d[1] - 1.5f * d[2] - 2.0f * d[3] + 1.5f * d[4] + d[5];
}

static inline __attribute__((always_inline)) void
wino_at(const vf *m, vf *y)
{
	vf a = m[1] + m[2], b = m[1] - m[2];

	y[0] = m[0] + a + m[3] + m[4];
	y[1] = b + 0.5f * m[3] - 2.0f * m[4];
	y[2] = a + 0.25f * m[3] + 4.0f * m[4];
	y[3] = b + 0.125f * m[3] - 8.0f * m[4] + m[5];
}

#if VW == 16
#define SH_EVEN (vi){ 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30 }
#define SH_ODD (vi){ 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31 }
#elif VW == 8
#define SH_EVEN (vi){ 0, 2, 4, 6, 8, 10, 12, 14 }
#define SH_ODD (vi){ 1, 3, 5, 7, 9, 11, 13, 15 }
#else
#define SH_EVEN (vi){ 0, 2, 4, 6 }
#define SH_ODD (vi){ 1, 3, 5, 7 }
#endif

/* Scratch floats of k_wino_in (any VW <= 16). */

/*
 * Input transform of one channel plane x (ih x iw) into the packed GEMM
 * operand: element (xi, tile t) goes to
 *   v[xi * xs + (t / nr) * ps + c * nr + t % nr].
 * The zero-padded plane is built once; per row of tiles its 6 rows are
 * split into 4 column phases (ph[p][i] = row[4i + p]) with two rounds of
 * shuffles, so the 6x6 patches of VW consecutive tiles are 36 contiguous
 * loads, then transformed as B^T d B in registers.
 */
static void k_wino_in(const float *x, int ih, int iw, int pt, int pl, int th,
		      int tw, float *scratch, float *v, size_t xs, size_t ps,
		      int nr, int c)
{
	const int twv = (tw + VW - 1) / VW * VW;
	const int prow = (tw * 4 + 2 + 3) / 4 * 4 + 64; /* padded row */
	const int rows = th * 4 + 2;
	const int pn = twv + VW;                        /* phase length */
	const size_t tst = (size_t)th * tw + VW; /* staging row: all tiles */
	float *pad = scratch, *ph = pad + (size_t)rows * prow;
	float *stg = ph + (size_t)24 * pn;
	int r, i, tx, ty;
	size_t t, nt = (size_t)th * tw;

	for (r = 0; r < rows; r++) {
		float *pr = pad + (size_t)r * prow;
		int iy = r - pt, x1;

		if (iy < 0 || iy >= ih) {
			memset(pr, 0, prow * sizeof(float));
			continue;
		}
		x1 = pl + iw < prow ? pl + iw : prow;
		memset(pr, 0, pl * sizeof(float));
		memcpy(pr + pl, x + (size_t)iy * iw, (x1 - pl) * sizeof(float));
		memset(pr + x1, 0, (prow - x1) * sizeof(float));
	}
	for (ty = 0; ty < th; ty++) {
		size_t t0 = (size_t)ty * tw; /* the tail of a vector
					       * spills into the next row,
					       * which is written after */

		for (r = 0; r < 6; r++) {
			const float *pr = pad + (size_t)(ty * 4 + r) * prow;
			float *p0 = ph + (size_t)r * 4 * pn;

			for (i = 0; i < tw + 1; i += VW) {
				vf a0 = vld(pr + 4 * i), a1 = vld(pr + 4 * i + VW);
				vf a2 = vld(pr + 4 * i + 2 * VW);
				vf a3 = vld(pr + 4 * i + 3 * VW);
				vf e01 = __builtin_shuffle(a0, a1, SH_EVEN);
				vf o01 = __builtin_shuffle(a0, a1, SH_ODD);
				vf e23 = __builtin_shuffle(a2, a3, SH_EVEN);
				vf o23 = __builtin_shuffle(a2, a3, SH_ODD);

				vst(p0 + i, __builtin_shuffle(e01, e23, SH_EVEN));
				vst(p0 + pn + i, __builtin_shuffle(o01, o23, SH_EVEN));
				vst(p0 + 2 * pn + i,
				    __builtin_shuffle(e01, e23, SH_ODD));
				vst(p0 + 3 * pn + i,
				    __builtin_shuffle(o01, o23, SH_ODD));
			}
		}
		for (tx = 0; tx < tw; tx += VW) {
			vf tt[6][6], d[6], col[6], o[6];

			for (r = 0; r < 6; r++) {
				const float *p0 = ph + (size_t)r * 4 * pn + tx;

				d[0] = vld(p0);
				d[1] = vld(p0 + pn);
				d[2] = vld(p0 + 2 * pn);
				d[3] = vld(p0 + 3 * pn);
				d[4] = vld(p0 + 1);
				d[5] = vld(p0 + pn + 1);
				wino_bt(d, tt[r]);
			}
			for (i = 0; i < 6; i++) {
				for (r = 0; r < 6; r++)
					col[r] = tt[r][i];
				wino_bt(col, o);
				for (r = 0; r < 6; r++)
					vst(stg + (size_t)(r * 6 + i) * tst + t0 + tx,
					    o[r]);
			}
		}
	}
	/* scatter: tile t -> panel t / nr, lane t % nr (whole panels) */
	for (i = 0; i < 36; i++) {
		float *vx = v + (size_t)i * xs + (size_t)c * nr;
		const float *src = stg + (size_t)i * tst;

		for (t = 0; t < nt; t += nr) {
			float *dst = vx + (t / nr) * ps;
			size_t run = nt - t < (size_t)nr ? nt - t : (size_t)nr, l;

			for (l = 0; l + VW <= run; l += VW)
				vst(dst + l, vld(src + t + l));
			for (; l < run; l++)
				dst[l] = src[t + l];
		}
	}
}

/*
 * Output transform of one row of tiles of one output channel: m points
 * at element (xi = 0, tile 0 of the row); xs is the distance between
 * consecutive xi.  ostg[i][4*tx + k] = (A^T M A)[i][k] of tile tx
 * (4 rows of 4*twv floats).  Reads up to VW-1 tiles past tw (caller
 * provides slack).
 */
static void k_wino_out(const float *m, size_t xs, int tw, int twv,
		       float *ostg)
{
	int tx, r, j, l;
	vi mlo, mhi, plo, phi;

	for (l = 0; l < VW / 2; l++) {
		mlo[2 * l] = l;
		mlo[2 * l + 1] = VW + l;
		mhi[2 * l] = VW / 2 + l;
		mhi[2 * l + 1] = VW + VW / 2 + l;
	}
	for (l = 0; l < VW / 4; l++)
		for (j = 0; j < 2; j++) {
			plo[4 * l + j] = 2 * l + j;
			plo[4 * l + 2 + j] = VW + 2 * l + j;
			phi[4 * l + j] = VW / 2 + 2 * l + j;
			phi[4 * l + 2 + j] = VW + VW / 2 + 2 * l + j;
		}
	for (tx = 0; tx < tw; tx += VW) {
		vf t[4][6], col[6], y[4];

		for (j = 0; j < 6; j++) {
			vf mm[6], o[4];

			for (r = 0; r < 6; r++)
				mm[r] = vld(m + (size_t)(r * 6 + j) * xs + tx);
			wino_at(mm, o);
			for (r = 0; r < 4; r++)
				t[r][j] = o[r];
		}
		for (r = 0; r < 4; r++) {
			for (j = 0; j < 6; j++)
				col[j] = t[r][j];
			wino_at(col, y);
			/* out[4l + k] = y[k][l]: interleave y0,y1 and y2,y3
			 * lane by lane, then the two results pair by pair */
			{
				vf z01a = __builtin_shuffle(y[0], y[1], mlo);
				vf z01b = __builtin_shuffle(y[0], y[1], mhi);
				vf z23a = __builtin_shuffle(y[2], y[3], mlo);
				vf z23b = __builtin_shuffle(y[2], y[3], mhi);
				float *o = ostg + (size_t)r * 4 * twv + 4 * tx;

				vst(o, __builtin_shuffle(z01a, z23a, plo));
				vst(o + VW, __builtin_shuffle(z01a, z23a, phi));
				vst(o + 2 * VW, __builtin_shuffle(z01b, z23b, plo));
				vst(o + 3 * VW, __builtin_shuffle(z01b, z23b, phi));
			}
		}
	}
}

static void k_scale(const float *x, float s, float *y, int64_t n)
{
	vf vs = vset1(s);
	int64_t i = 0;

	for (; i + VW <= n; i += VW)
		vst(y + i, vld(x + i) * vs);
	for (; i < n; i++)
		y[i] = x[i] * s;
}

const struct mi_cpu_kern KTAB = {
	.isa = KISA,
	.mr = KMR,
	.nr = KNR,
	.ukr = k_ukr,
	.epi_row = k_epi_row,
	.dw = k_dw,
	.pool = k_pool,
	.sum = k_sum,
	.max = k_max,
	.scale = k_scale,
	.wino_in = k_wino_in,
	.wino_out = k_wino_out,
};
