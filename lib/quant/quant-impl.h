/* SPDX-License-Identifier: MIT */
/* Helpers shared by the files of lib/quant/ (ops, planner, quantize). */
#ifndef MI_QUANT_IMPL_H
#define MI_QUANT_IMPL_H

#include "ir.h"
#include "ops/ops.h"

/* Scale(s) and zero point(s) of one quantized tensor. */
struct mi_qparam {
	int64_t n; /* 1 = per tensor, else per channel/axis */
	int dtype; /* of the zero point (uint8 when absent) */
	float *scale;
	int32_t *zp;
};

/* Read scale input si and zero point input zi (-1/omitted = 0) of n;
 * len: allowed per-axis length besides 1. */
int mi_qparam_read(struct mi_graph *g, struct mi_node *n, int si, int zi,
		   int64_t len, const char *what, struct mi_qparam *p);
void mi_qparam_free(struct mi_qparam *p);

/* Requantization multiplier, computed the same way everywhere. */
static inline float mi_qmult(float sx, float sw, float sy)
{
	return (sx * sw) / sy;
}

#ifdef __x86_64__
#include <immintrin.h>

/*
 * rne(p / sc) of 16 floats for an 8-bit QuantizeLinear, without the
 * division in the common case.  w = p * rc (rc = 1 / sc in float, a normal
 * number: see mi_rcp_ok) is within 3.01 ulp-units (|w| 2^-24 each) of the
 * rounded quotient q = p / sc (three roundings).  Where |w| <= 1024 and w
 * is farther than 2^-11 (>= |w| 2^-21) from every half-integer, q lies
 * strictly between the same two half-integers and rne(q) = rne(w).  Where
 * |w| > 1024 both round beyond +-1023, which the caller's clamp of
 * r + zp (zp in -128..255) to 8 bits saturates alike.  w - rne(w) is exact
 * (Sterbenz).  Vectors with a lane near a tie (or NaN, infinite) divide.
 */
__attribute__((target("avx512f"), always_inline)) static inline __m512
mi_rne_div_avx512(__m512 p, __m512 sc, __m512 rc)
{
	__m512 w = _mm512_mul_ps(p, rc);
	__m512 r = _mm512_roundscale_ps(w, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__mmask16 ok = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_sub_ps(w, r)),
					  _mm512_set1_ps(0.5f - 0x1p-11f), _CMP_LT_OQ);

	if (__builtin_expect(ok != 0xffff, 0))
		r = _mm512_roundscale_ps(_mm512_div_ps(p, sc),
					 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	return r;
}
#endif

/* 1 / sc is a normal float with a correctly rounded reciprocal (the
 * multiply path of mi_rne_div_avx512 applies). */
static inline bool mi_rcp_ok(float sc)
{
	return sc >= 0x1p-100f && sc <= 0x1p100f;
}

/* y = sat(rne(x / scale) + zp) into uint8/int8 (dtype). */
void mi_quantize_f32(const float *x, int64_t n, float scale, int32_t zp,
		     int dtype, void *y);
/* y[4p + k] = the same of x[k * rs + p] (p < np, k < 4): four float rows
 * into np C4 quads. */
void mi_quantize_c4(const float *x, int64_t rs, int64_t np, float scale, int32_t zp,
		    int dtype, uint8_t *y);
/* y = (float)(x - zp) * scale for uint8/int8/int32 x. */
void mi_dequantize(const void *x, int dtype, int64_t n, float scale,
		   int32_t zp, float *y);
/* y[k * rs + p] = the same of uint8/int8 x[4p + k] (p < np, k < 4): np C4
 * quads into four float rows. */
void mi_dequantize_c4(const uint8_t *x, int64_t np, int dtype, float scale, int32_t zp,
		      float *y, int64_t rs);

struct mi_spatial;
/* Conv geometry of a QLinearConv/ConvInteger-like node (x input xi,
 * weights wi). */
int mi_qconv_geometry(struct mi_graph *g, struct mi_node *n, int xi, int wi,
		      struct mi_spatial *sp, int64_t *oc, int64_t *group);

struct mi_qmm_shape {
	int64_t m, k, n, batch;
	int nbatch, ndim;
	int64_t adims[MI_MAX_DIMS], bdims[MI_MAX_DIMS], odims[MI_MAX_DIMS];
	int64_t out[MI_MAX_DIMS];
};
int mi_qmm_shape(struct mi_graph *g, struct mi_node *n,
		 const struct mi_tensor *a, const struct mi_tensor *b,
		 struct mi_qmm_shape *s);

/* y = Q(act(DQ(a) + DQ(b))), same shapes, per-tensor parameters; the
 * same float operations as the reference ops in the same order. */
struct mi_qadd_args {
	float sa, sb, sy;
	int32_t za, zb, zy;
	bool a_s8, b_s8, y_s8, relu;
	float lo, hi; /* output range (qmin, qmax) */
};
void mi_qadd(const void *a, const void *b, int64_t n, const struct mi_qadd_args *p, void *y);

struct mi_qpool_shape {
	int h, w, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl;
};
/* MaxPool of one uint8 (or int8) plane; tmp: w bytes. */
void mi_qmaxpool_plane(const uint8_t *x, const struct mi_qpool_shape *s, bool s8,
		       uint8_t *tmp, uint8_t *y);
/* The same on one C4 quad plane ([H][W][4] bytes, 4 channels); tmp: 4w
 * bytes. */
void mi_qmaxpool_plane_c4(const uint8_t *x, const struct mi_qpool_shape *s, bool s8,
			  uint8_t *tmp, uint8_t *y);

#endif /* MI_QUANT_IMPL_H */
