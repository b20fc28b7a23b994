/* SPDX-License-Identifier: MIT */
/*
 * CPU reference operators: private helpers shared by the files in lib/ops/.
 *
 * Every operator is a `struct mi_op_def` (lib/ir.h) with infer() and run().
 * Each family file (elementwise.c, conv.c, pool.c, ...) exports one table
 * terminated by an entry whose op_type is NULL; registry.c searches them
 * all in mi_op_find().
 *
 * Plugging in ops from outside lib/ops (quantization, lib/quant/):
 *   lib/quant/ops_quant.c defines
 *       const struct mi_op_def mi_quant_ops[] = {
 *               { "QuantizeLinear", "", 2, 3, 1, 1, q_infer, q_run },
 *               ...
 *               { NULL }
 *       };
 *   registry.c is compiled with -DMI_HAVE_QUANT_OPS whenever that file
 *   exists (lib/ops/ops.mk checks for it), and then searches mi_quant_ops[]
 *   after the built-in tables.  A weak symbol is deliberately not used: a
 *   weak reference does not pull a member out of a static archive, so the
 *   table would silently be missing from programs linked with
 *   libmetainfer.a.  lib/quant's fragment must put ops_quant.o into the
 *   library (lib/lib.mk's LIB_OBJS).  The helpers below (broadcasting,
 *   axis checks, fp16 conversion, attribute/input readers) may be used by
 *   quant too; they are library-private (mi_ops_ prefix).
 */
#ifndef MI_OPS_H
#define MI_OPS_H

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "ir.h"

/* Family tables (each terminated by { NULL }). */
extern const struct mi_op_def mi_ops_elementwise[];
extern const struct mi_op_def mi_ops_matmul[];
extern const struct mi_op_def mi_ops_conv[];
extern const struct mi_op_def mi_ops_pool[];
extern const struct mi_op_def mi_ops_norm[];
extern const struct mi_op_def mi_ops_reduce[];
extern const struct mi_op_def mi_ops_shape[];
extern const struct mi_op_def mi_ops_tensor[];
extern const struct mi_op_def mi_ops_resize[];
extern const struct mi_op_def mi_ops_misc[];
extern const struct mi_op_def mi_ops_rnn[];
#ifdef MI_HAVE_QUANT_OPS
extern const struct mi_op_def mi_quant_ops[];
#endif

/* Upper bound on elements any op will allocate (1 << 34, 16 Gi): a hostile
 * shape attribute fails with a message instead of an allocation storm. */
#define MI_OPS_MAX_NUMEL (INT64_C(1) << 34)

/* Output i, or NULL when it is absent or omitted (index -1). */
static inline struct mi_tensor *mi_ops_out(struct mi_graph *g,
					   struct mi_node *n, int i)
{
	return i < n->noutputs && n->outputs[i] >= 0 ?
		       &g->tensors[n->outputs[i]] :
		       NULL;
}

/* ---- checks ------------------------------------------------------- */
/* -EAGAIN when input i (required) has unknown rank, -EINVAL when it is
 * missing. */
int mi_ops_need_rank(struct mi_graph *g, struct mi_node *n, int i);
/* Normalize axis into [0, rank) (negative counts from the end); -EINVAL
 * with an error naming `what` if out of range. */
int mi_ops_axis(struct mi_graph *g, struct mi_node *n, const char *what,
		int64_t axis, int rank, int *out);
/* Check/set output: dims may contain -1 (unknown). Returns 0 or -EINVAL
 * when the element count overflows MI_OPS_MAX_NUMEL. */
int mi_ops_set_out(struct mi_graph *g, struct mi_node *n, int idx, int dtype,
		   int ndim, const int64_t *dims);
/* Same shape and dtype as input `in` for output `idx`. */
int mi_ops_same_as(struct mi_graph *g, struct mi_node *n, int idx, int in);
/* True for float32/float64/float16/bfloat16. */
int mi_ops_is_float(int dtype);
int mi_ops_is_int(int dtype); /* signed/unsigned integers, not bool */
/* Unknown dims product: -1 if any dim in [from, to) is unknown. */
int64_t mi_ops_prod(const int64_t *dims, int from, int to);

/* ---- constant inputs ---------------------------------------------- */
/* Read input i (an integer tensor, rank <= 1) into vals[max]; count gets
 * its length.  -EAGAIN when its data is not known yet, -ENOENT when the
 * input is omitted, -EINVAL on too many values / non-integer dtype. */
int mi_ops_input_ints(struct mi_graph *g, struct mi_node *n, int i,
		      int64_t *vals, int max, int *count);
/* Same for a float input (any float dtype). */
int mi_ops_input_floats(struct mi_graph *g, struct mi_node *n, int i,
			double *vals, int max, int *count);

/* ---- element access (any numeric dtype incl. float16/bfloat16) ----- */
double mi_ops_get_f64(const struct mi_tensor *t, int64_t i);
/* Saturating double -> int64 (NaN -> 0), never undefined behaviour. */
int64_t mi_ops_f64_to_i64(double v);
void mi_ops_set_f64(struct mi_tensor *t, int64_t i, double v);
int64_t mi_ops_get_i64(const struct mi_tensor *t, int64_t i);
void mi_ops_set_i64(struct mi_tensor *t, int64_t i, int64_t v);
/* Fast path for float32, the generic accessors otherwise. */
static inline double mi_ops_rd(const struct mi_tensor *t, int64_t i)
{
	return t->dtype == MI_DT_FLOAT ? ((const float *)t->data)[i] :
					 mi_ops_get_f64(t, i);
}

static inline void mi_ops_wr(struct mi_tensor *t, int64_t i, double v)
{
	if (t->dtype == MI_DT_FLOAT)
		((float *)t->data)[i] = (float)v;
	else
		mi_ops_set_f64(t, i, v);
}
float mi_half_to_float(uint16_t h);
uint16_t mi_float_to_half(float f);
float mi_bf16_to_float(uint16_t h);
uint16_t mi_float_to_bf16(float f);

/* ---- broadcasting (ONNX multidirectional) -------------------------- */
#define MI_BCAST_MAX 4
/* Output shape of broadcasting the given inputs (dims may be -1). */
int mi_bcast_infer(struct mi_graph *g, struct mi_node *n, int nin,
		   struct mi_tensor *const *ins, int *ndim, int64_t *dims);

/*
 * Iteration plan: the output is walked as `rows` rows of `inner` elements;
 * for row r, input k starts at element mi_bcast_row(b, r, k) and advances
 * by b->step[k] (0 or 1) per element.  Adjacent dims are coalesced.
 */
struct mi_bcast {
	int ndim; /* after coalescing; the last dim is the inner loop */
	int nin;
	int64_t dims[MI_MAX_DIMS];
	int64_t st[MI_BCAST_MAX][MI_MAX_DIMS];
	int64_t rows, inner;
	int64_t step[MI_BCAST_MAX];
};
void mi_bcast_init(struct mi_bcast *b, int nin, struct mi_tensor *const *ins,
		   const struct mi_tensor *out);
void mi_bcast_row(const struct mi_bcast *b, int64_t r, int64_t *offs);

/* ---- spatial ops (conv, pool) -------------------------------------- */
struct mi_spatial {
	int nsp; /* number of spatial dims (rank - 2) */
	int64_t in[MI_MAX_DIMS], out[MI_MAX_DIMS];
	int64_t kernel[MI_MAX_DIMS], stride[MI_MAX_DIMS], dil[MI_MAX_DIMS];
	int64_t pad_begin[MI_MAX_DIMS], pad_end[MI_MAX_DIMS];
};
/*
 * Parse strides/dilations/pads/auto_pad/ceil_mode for a node whose input 0
 * is N x C x D1..Dn; kernel[] must already be filled.  in[] may hold -1;
 * out[] then gets -1 too.  Errors: bad attribute lengths or values.
 */
int mi_ops_spatial(struct mi_graph *g, struct mi_node *n, struct mi_spatial *s,
		   const struct mi_tensor *x, int use_ceil);

/* C[M,N] += A[M,K] * B[K,N] in fp32; element (m,k) of A is at
 * A[m*sam + k*sak], (k,n) of B at B[k*sbk + n*sbn], C rows are ldc apart. */
void mi_ops_sgemm(int64_t M, int64_t N, int64_t K, const float *A,
		  int64_t sam, int64_t sak, const float *B, int64_t sbk,
		  int64_t sbn, float *C, int64_t ldc);

/* ---- misc ------------------------------------------------------------ */
/* Row-major strides (in elements) of a shape. */
void mi_ops_strides(int ndim, const int64_t *dims, int64_t *strides);
/* dst (contiguous, shape dims) = src viewed with element strides sst
 * (may be 0 or negative) starting at element soff. */
void mi_ops_strided_copy(void *dst, const void *src, size_t es, int ndim,
			 const int64_t *dims, const int64_t *sst, int64_t soff);
/* Copy input 0's data into output 0 (same numel and dtype). */
int mi_ops_copy_data(struct mi_graph *g, struct mi_node *n, int out, int in);

/* ONNX Slice on one axis of length dim: start and end as the node gives
 * them (negative counts from the end), *step nonzero and clamped here to
 * [-dim - 1, dim + 1] (a larger |step| selects the same elements and
 * keeps the length arithmetic from overflowing).  Sets *first to the first
 * index taken and returns how many are taken. */
static inline int64_t mi_slice_axis(int64_t dim, int64_t s, int64_t e, int64_t *step,
				    int64_t *first)
{
	int64_t st = *step > dim + 1 ? dim + 1 : *step < -dim - 1 ? -dim - 1 : *step;

	*step = st;
	if (s < 0)
		s = s < -dim ? -1 : s + dim;
	if (e < 0)
		e = e < -dim ? -1 : e + dim;
	if (st > 0) {
		s = s < 0 ? 0 : s > dim ? dim : s;
		e = e < 0 ? 0 : e > dim ? dim : e;
		*first = s;
		return e > s ? (e - s + st - 1) / st : 0;
	}
	s = s < 0 ? 0 : s > dim - 1 ? dim - 1 : s;
	e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
	*first = s;
	return s > e ? (s - e - st - 1) / (-st) : 0;
}

#endif /* MI_OPS_H */
