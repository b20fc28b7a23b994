/* SPDX-License-Identifier: MIT */
/* Private to lib/quant/qdw*.c: the depthwise row and channel kernels per
 * ISA that qdw.c dispatches to. */
#ifndef MI_QUANT_QDW_IMPL_H
#define MI_QUANT_QDW_IMPL_H

#include "quant/qgemm-impl.h"

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

void dw_row_generic(int32_t *restrict acc, const uint8_t *const *rows,
		    const int8_t *w, int ow, int sw, int dw);
/* Scalar tail from x0. */
void dw_row_tail(int32_t *restrict acc, const uint8_t *const *rows,
		 const int8_t *w, int x0, int ow, int sw, int dw);
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) void
dw_row_avx512(int32_t *restrict acc, const uint8_t *const *rows, const int8_t *w,
	      int ow, int sw, int dw);
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) void
dw_row_avx512_rq(int32_t *restrict acc, const uint8_t *const *rows, const int8_t *w,
		 int ow, int sw, const struct dw_rq *rq);
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) void
dw3_chan_avx512_rq(const uint8_t *xp, size_t wp, const int8_t *w, int oh, int ow, int sh,
		   int sw, struct dw_rq rq, size_t rowstep);
__attribute__((target("avx2,fma"))) void
dw_row_avx2(int32_t *restrict acc, const uint8_t *const *rows, const int8_t *w, int ow,
	    int sw, int dw);
__attribute__((target("avx2,fma"))) void
dw_rowk_avx2(int32_t *restrict acc, const uint8_t *const *rows, const int8_t *w, int kh,
	     int kw, int ow, int sw);
__attribute__((target("avx2,fma"))) void
dwk_chan_avx2(const uint8_t *xp, size_t wp, const int8_t *w, int kh, int kw, int oh, int ow,
	      int sh, int sw, int32_t *acc);
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) void
dw_rowk_avx512(int32_t *restrict acc, const uint8_t *const *rows, const int8_t *w,
	       int kh, int kw, int ow, int sw, const struct dw_rq *rq);
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) void
dwk_chan_avx512(const uint8_t *xp, size_t wp, const int8_t *w, int kh, int kw, int oh, int ow,
		int sh, int sw, int32_t *acc, struct dw_rq *rq, size_t rowstep);
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi"))) void
dw_chan_vbmi(const uint8_t *src, int h, int iw, int pt, int pl, uint8_t zx, const int8_t *w,
	     int kh, int kw, int oh, int ow, int sh, int sw, int32_t *acc, struct dw_rq *rq,
	     size_t rowstep);
__attribute__((target("avx2"))) void
dw_prep_avx2(const struct conv_job *j, const struct mi_qconv_shape *s, int c, uint8_t *dst,
	     const uint8_t *src);

#endif /* MI_QUANT_QDW_IMPL_H */
