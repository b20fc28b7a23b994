/* SPDX-License-Identifier: MIT */
/*
 * Private to lib/device/{qunit,lower,lower_ops}.c: what a quantized unit
 * means in numbers (struct qu_info, read back from the graph by
 * qu_analyze) and the job builder the per-op emitters write into.
 */
#ifndef MI_DEVICE_LOWER_IMPL_H
#define MI_DEVICE_LOWER_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "device/lower.h"
#include "internal.h"

enum qu_kind {
	QU_CONV,
	QU_GEMM,	/* Gemm, or MatMul with a constant right operand */
	QU_MATMUL,	/* MatMul of two quantized activations (attention) */
	QU_ADD,
	QU_MUL,
	QU_CLIP,	/* Relu / Clip between DQ and Q */
	QU_MAXPOOL,
	QU_AVGPOOL,	/* AveragePool and GlobalAveragePool */
	QU_CONCAT,
	QU_LUT,		/* any single-input elementwise function: a table */
	QU_REQUANT,	/* DQ -> Q with other parameters */
};

/* A quantized operand: int8/uint8 tensor t with one scale and zero point. */
struct qu_act {
	int t;
	float scale;
	int32_t zp;
	int dtype;	/* MI_DT_INT8 / MI_DT_UINT8 */
	bool is_const;	/* t holds constant bytes (a DQ of an initializer) */
	bool f32;	/* t is an fp32 constant (a folded DQ): Add/Mul take
			 * it as int32 at a scale lowering chooses */
};

struct qu_info {
	enum qu_kind kind;
	struct mi_node *anchor;
	int nin;
	struct qu_act in[MI_QUNIT_MAX_IN];
	struct qu_act out;
	float lo, hi;		/* float clamp of a fused Relu/Clip */
	/* conv / gemm: int8 weights, zero point, per output channel scales */
	int w;			/* tensor of the weights (its dims) */
	const int8_t *wq;	/* the int8 weights, as w is laid out */
	int8_t *wown;		/* wq when recovered from folded fp32 */
	int wzp;
	float *wscale;		/* [noc], malloc'ed (qu_info_fini) */
	int64_t noc;
	int bias;		/* tensor: int32 (DQ'd, bscale) or fp32, or -1 */
	float *bscale;		/* [noc] scales of an int32 bias, or NULL */
	bool gemm_transb;	/* B stored [N, K] */
};

/* Read unit u's parameters back from g; 0 or -EOPNOTSUPP with why. */
int qu_analyze(struct mi_graph *g, const struct mi_qunit *u,
	       struct qu_info *qi, char *why, size_t whylen);
void qu_info_fini(struct qu_info *qi);

/* real scale -> (M, S) with r = M * 2^(S - 31), M in [2^30, 2^31) */
int qu_mult_shift(double r, int32_t *m, int32_t *s);
/* quantized clamp bounds for the output of qi (fused act + dtype range) */
void qu_bounds(const struct qu_info *qi, int32_t *lo, int32_t *hi);
uint32_t qu_drm_dtype(int mi_dtype);

/* ---- the job builder (lower.c) ------------------------------------ */

/* Shape of a job tensor as stored (logical NCHW order for 4-D). */
struct lb_shape {
	int nd;
	int64_t dims[4];
};


/* Where a graph tensor lives in the job being built. */
struct lb_val {
	int gt;			/* graph tensor */
	int ti;			/* job tensor holding it */
	uint32_t layout;	/* of ti: PLAIN / NCHW / NHWC */
};

/* A reference of the stream to a job tensor (for mi_lower_rebind). */
struct lb_ref {
	size_t pos;		/* byte offset of the drm_metainfer_tensor */
	int ti;
	uint64_t delta;		/* offset inside ti (a Concat slice) */
};

struct lb {
	struct mi_graph *g;
	const struct mi_dev_caps *caps;
	const struct mi_qunit *const *units;
	int nunits;
	uint32_t cl;		/* compute layout of 4-D ops: NCHW / NHWC */
	uint8_t *cmds;
	size_t size, cap;
	int nops;
	struct mi_lower_tensor *t;
	struct lb_shape *sh;	/* beside t */
	int nt, tcap, shcap;
	struct lb_val *v;
	int nv, vcap;
	struct lb_ref *refs;
	int nrefs, refcap;
	struct { const void *d; int ti; uint64_t delta; } pend[8];
	int npend;		/* descriptors made since the last lb_emit */
	uint64_t ops_used, dtypes_used, layouts_used;
	uint64_t macs;
	int err;
};

/* Job tensor of graph tensor gt in layout want (NCHW dims of g's tensor),
 * converting (COPY into a TEMP) or adding it as an INPUT; -errno. */
int lb_get(struct lb *b, int gt, uint32_t want);
/* Like lb_get, but in whatever layout it already has. */
int lb_get_any(struct lb *b, int gt, uint32_t *layout);
/* A new TEMP for graph tensor gt (the job's result for it) in layout l,
 * dtype dt (MI_DT_x); registered as gt's value. */
int lb_new_val(struct lb *b, int gt, uint32_t l, int dt);
/* A constant job tensor holding a copy of data, shape sh (1-D if NULL:
 * bytes / element size), layout l. */
int lb_const(struct lb *b, const void *data, size_t bytes, uint32_t dtype,
	     uint32_t l, const struct lb_shape *sh);
/* A temp that no graph tensor names (e.g. int16 intermediates). */
int lb_temp(struct lb *b, uint32_t dtype, uint32_t l, const struct lb_shape *sh);
/* Graph tensor gt's dims as an lb_shape (rank <= 4, else -EOPNOTSUPP). */
int lb_gshape(struct lb *b, int gt, struct lb_shape *sh);

/* Descriptor of job tensor ti viewed with logical dims (NCHW order for
 * 4-D) dims[nd] in layout l, starting delta bytes into it.  Strides come
 * from ti's stored shape and layout; a stored extent of 1 under a larger
 * view extent broadcasts (stride 0). */
void lb_desc(struct lb *b, struct drm_metainfer_tensor *d, int ti,
	     uint32_t l, int nd, const int64_t *dims, uint64_t delta);
/* The same over ti's own shape in its own layout. */
void lb_desc_own(struct lb *b, struct drm_metainfer_tensor *d, int ti);
/* Explicit shape and strides (elements) in the descriptor's order. */
void lb_desc_raw(struct lb *b, struct drm_metainfer_tensor *d, int ti,
		 uint32_t l, int nd, const int64_t *shape,
		 const int64_t *stride, uint64_t delta);
/* Element stride of logical dim k of ti as stored. */
int64_t lb_stride(const struct lb *b, int ti, int k);
/* Append op (size bytes at op, header filled by the caller); tensor
 * descriptors inside it were made with lb_desc*, which recorded their
 * job tensors in order; lb_emit fixes their positions. */
int lb_emit(struct lb *b, const void *op, size_t size);

/* Lower u alone without building anything: the ops, dtypes and layouts
 * its job would use on caps (qunit.c's mi_qunit_supported). */
int mi_lower_probe(struct mi_graph *g, const struct mi_qunit *u,
		   const struct mi_dev_caps *caps, uint64_t *ops,
		   uint64_t *dtypes, uint64_t *layouts, char *why,
		   size_t whylen);

/* per-kind emitters (lower_ops.c) */
int lb_unit(struct lb *b, const struct mi_qunit *u, struct qu_info *qi);

#endif /* MI_DEVICE_LOWER_IMPL_H */
