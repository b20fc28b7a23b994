/* SPDX-License-Identifier: MIT */
/*
 * Per-ISA row kernels for the transformer/shuffle fast paths (GELU,
 * LayerNormalization, Softmax), compiled once per ISA from
 * xform_impl.h like the GEMM kernels (kern_impl.h).  Private to lib/cpu.
 */
#ifndef MI_CPU_XFORM_H
#define MI_CPU_XFORM_H

#include <stdint.h>

struct mi_xform_kern {
	/* y[0:n] = 0.5 x (1 + erf(x / sqrt 2))  (tanh_form = 0: exact GELU)
	 *        = x * sigmoid(2 sqrt(2/pi) (x + 0.044715 x^3))  (tanh_form) */
	void (*gelu)(const float *x, float *y, int64_t n, int tanh_form);
	/* y[0:n] = erf(x[0:n]) (polynomial, <= ~2e-7 absolute) */
	void (*erf)(const float *x, float *y, int64_t n);
	/* rows of d: y = (x - mean) / sqrt(var + eps) * scale + bias
	 * (scale/bias: d floats; bias may be NULL) */
	void (*layernorm)(const float *x, float *y, int64_t rows, int64_t d,
			  const float *scale, const float *bias, float eps);
	/* rows of d: y = softmax(x) over each row */
	void (*softmax)(const float *x, float *y, int64_t rows, int64_t d);
};

const struct mi_xform_kern *mi_xform_kern_get(int isa);

/* Transpose / Slice / Concat / Reduce* fast paths (xform.c); called by
 * mi_cpu_plan_eltwise() */
struct mi_graph;
int mi_cpu_plan_xform(struct mi_graph *g, int nthreads);

#endif /* MI_CPU_XFORM_H */
