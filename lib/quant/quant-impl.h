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

/* y = sat(rne(x / scale) + zp) into uint8/int8 (dtype). */
void mi_quantize_f32(const float *x, int64_t n, float scale, int32_t zp,
		     int dtype, void *y);
/* y = (float)(x - zp) * scale for uint8/int8/int32 x. */
void mi_dequantize(const void *x, int dtype, int64_t n, float scale,
		   int32_t zp, float *y);

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
