// SPDX-License-Identifier: GPL-2.0-only
/*
 * validate_test: the core validates every command stream and tensor before
 * a backend sees the job.  Each op type has a valid base job (which must
 * be accepted, so the error tests mean something); every other test
 * changes one thing and expects -EINVAL (malformed, out of bounds,
 * overflowing) or -EOPNOTSUPP (not advertised by the device).  The syncobj
 * tests check that VALIDATE_ONLY fails exactly like the real submit.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "mi_fixture.h"

#define BO_SIZE (64 * 1024)
#define NBOS 3

static uint32_t bos[NBOS];

static int make_bos(int fd)
{
	int i, ret;

	if (bos[0])
		return 0;
	for (i = 0; i < NBOS; i++) {
		ret = mi_bo_create(fd, BO_SIZE, &bos[i]);
		if (ret)
			return ret;
	}
	return 0;
}

/* Submit a stream holding the single op @op of @size bytes. */
static int submit_one(int fd, uint32_t ctx, void *op, size_t size)
{
	struct mi_stream s;
	int ret = make_bos(fd);

	if (ret)
		return ret;
	mi_stream_init(&s);
	mi_stream_add(&s, op, size);
	mi_stream_finish(&s);
	ret = mi_submit(fd, ctx, bos, NBOS, s.buf, s.len, NULL);
	mi_stream_free(&s);
	return ret;
}

static int submit_raw(int fd, uint32_t ctx, const void *cmds, size_t len)
{
	int ret = make_bos(fd);

	return ret ? ret : mi_submit(fd, ctx, bos, NBOS, cmds, len, NULL);
}

#define I8 DRM_METAINFER_DTYPE_INT8
#define U8 DRM_METAINFER_DTYPE_UINT8
#define I16 DRM_METAINFER_DTYPE_INT16
#define I32 DRM_METAINFER_DTYPE_INT32
#define PLAIN DRM_METAINFER_LAYOUT_PLAIN
#define NCHW DRM_METAINFER_LAYOUT_NCHW
#define NHWC DRM_METAINFER_LAYOUT_NHWC

static struct drm_metainfer_tensor T1(uint32_t bo, uint32_t dt, uint64_t off,
				      uint32_t n)
{
	uint32_t shape[1] = { n };

	return mi_tensor(bo, dt, PLAIN, off, 1, shape);
}

static struct drm_metainfer_tensor T2(uint32_t bo, uint32_t dt, uint64_t off,
				      uint32_t a, uint32_t b)
{
	uint32_t shape[2] = { a, b };

	return mi_tensor(bo, dt, PLAIN, off, 2, shape);
}

static struct drm_metainfer_tensor T4(uint32_t bo, uint32_t dt, uint32_t lay,
				      uint64_t off, uint32_t a, uint32_t b,
				      uint32_t c, uint32_t d)
{
	uint32_t shape[4] = { a, b, c, d };

	return mi_tensor(bo, dt, lay, off, 4, shape);
}

/* Valid base ops --------------------------------------------------------- */

static struct drm_metainfer_op_copy base_copy(void)
{
	struct drm_metainfer_op_copy op;

	memset(&op, 0, sizeof(op));
	op.hdr.op = DRM_METAINFER_OP_COPY;
	op.input = T1(0, I8, 0, 256);
	op.output = T1(2, I8, 0, 256);
	return op;
}

/* 1x4x8x8 int8 NCHW * 8x4x3x3 -> 1x8x6x6 int32, no bias. */
static struct drm_metainfer_op_conv2d base_conv(void)
{
	struct drm_metainfer_op_conv2d op;

	memset(&op, 0, sizeof(op));
	op.hdr.op = DRM_METAINFER_OP_CONV2D;
	op.stride_h = op.stride_w = 1;
	op.dilation_h = op.dilation_w = 1;
	op.groups = 1;
	op.input = T4(0, I8, NCHW, 0, 1, 4, 8, 8);
	op.weight = T4(1, I8, NCHW, 0, 8, 4, 3, 3);
	op.output = T4(2, I32, NCHW, 0, 1, 8, 6, 6);
	return op;
}

/* Same conv with bias and per-channel requant to int8. */
static struct drm_metainfer_op_conv2d base_conv_rq(void)
{
	struct drm_metainfer_op_conv2d op = base_conv();

	op.hdr.flags = DRM_METAINFER_OP_F_BIAS | DRM_METAINFER_OP_F_REQUANT;
	op.bias = T1(1, I32, 1024, 8);
	op.multiplier = T1(1, I32, 2048, 8);
	op.shift = T1(1, I32, 3072, 8);
	op.output = T4(2, I8, NCHW, 0, 1, 8, 6, 6);
	op.rq.act_min = -128;
	op.rq.act_max = 127;
	return op;
}

/* [4,16] x [16,8] -> [4,8] int32 */
static struct drm_metainfer_op_gemm base_gemm(void)
{
	struct drm_metainfer_op_gemm op;

	memset(&op, 0, sizeof(op));
	op.hdr.op = DRM_METAINFER_OP_GEMM;
	op.a = T2(0, I8, 0, 4, 16);
	op.b = T2(1, I8, 0, 16, 8);
	op.output = T2(2, I32, 0, 4, 8);
	return op;
}

static struct drm_metainfer_op_eltwise base_add(void)
{
	struct drm_metainfer_op_eltwise op;

	memset(&op, 0, sizeof(op));
	op.hdr.op = DRM_METAINFER_OP_ADD;
	op.a_mult = op.b_mult = 1;
	op.rq.act_min = -128;
	op.rq.act_max = 127;
	op.a = T2(0, I8, 0, 8, 8);
	op.b = T2(1, I8, 0, 8, 8);
	op.output = T2(2, I8, 0, 8, 8);
	return op;
}

static struct drm_metainfer_op_clip base_clip(void)
{
	struct drm_metainfer_op_clip op;

	memset(&op, 0, sizeof(op));
	op.hdr.op = DRM_METAINFER_OP_CLIP;
	op.min = -10;
	op.max = 10;
	op.input = T1(0, I8, 0, 100);
	op.output = T1(2, I8, 0, 100);
	return op;
}

/* 1x4x8x8 -> 2x2 stride 2 -> 1x4x4x4 */
static struct drm_metainfer_op_pool base_pool(void)
{
	struct drm_metainfer_op_pool op;

	memset(&op, 0, sizeof(op));
	op.hdr.op = DRM_METAINFER_OP_MAXPOOL;
	op.kernel_h = op.kernel_w = 2;
	op.stride_h = op.stride_w = 2;
	op.input = T4(0, I8, NCHW, 0, 1, 4, 8, 8);
	op.output = T4(2, I8, NCHW, 0, 1, 4, 4, 4);
	return op;
}

static struct drm_metainfer_op_requantize base_requantize(void)
{
	struct drm_metainfer_op_requantize op;

	memset(&op, 0, sizeof(op));
	op.hdr.op = DRM_METAINFER_OP_REQUANTIZE;
	op.axis = 1;
	op.rq.act_min = -128;
	op.rq.act_max = 127;
	op.input = T4(0, I32, NCHW, 0, 1, 4, 2, 2);
	op.output = T4(2, I8, NCHW, 0, 1, 4, 2, 2);
	op.multiplier = T1(1, I32, 0, 4);
	op.shift = T1(1, I32, 64, 4);
	return op;
}

/* 100 int8 through a [256] int8 table (in buffer 1) to 100 int8. */
static struct drm_metainfer_op_lut base_lut(void)
{
	struct drm_metainfer_op_lut op;

	memset(&op, 0, sizeof(op));
	op.hdr.op = DRM_METAINFER_OP_LUT;
	op.input = T1(0, I8, 0, 100);
	op.table = T1(1, I8, 0, 256);
	op.output = T1(2, I8, 0, 100);
	return op;
}

/* One test: build base op @base, apply @mutate, expect @expect. */
#define OP_TEST(name, type, base, expect, mutate)                             \
	TEST_F(dev, name)                                                     \
	{                                                                     \
		struct type op = base();                                      \
		mutate;                                                       \
		ASSERT_EQ(expect, submit_one(self->fd, self->ctx, &op,        \
					     sizeof(op)));                    \
	}

#define COPY_TEST(name, expect, mutate) \
	OP_TEST(name, drm_metainfer_op_copy, base_copy, expect, mutate)
#define CONV_TEST(name, expect, mutate) \
	OP_TEST(name, drm_metainfer_op_conv2d, base_conv, expect, mutate)
#define CONVRQ_TEST(name, expect, mutate) \
	OP_TEST(name, drm_metainfer_op_conv2d, base_conv_rq, expect, mutate)
#define GEMM_TEST(name, expect, mutate) \
	OP_TEST(name, drm_metainfer_op_gemm, base_gemm, expect, mutate)
#define ADD_TEST(name, expect, mutate) \
	OP_TEST(name, drm_metainfer_op_eltwise, base_add, expect, mutate)
#define CLIP_TEST(name, expect, mutate) \
	OP_TEST(name, drm_metainfer_op_clip, base_clip, expect, mutate)
#define POOL_TEST(name, expect, mutate) \
	OP_TEST(name, drm_metainfer_op_pool, base_pool, expect, mutate)
#define RQ_TEST(name, expect, mutate) \
	OP_TEST(name, drm_metainfer_op_requantize, base_requantize, expect, mutate)

/* The bases are accepted. */
COPY_TEST(copy_valid, 0, )
CONV_TEST(conv_valid, 0, )
CONVRQ_TEST(conv_requant_valid, 0, )
GEMM_TEST(gemm_valid, 0, )
ADD_TEST(add_valid, 0, )
CLIP_TEST(clip_valid, 0, )
POOL_TEST(pool_valid, 0, )
RQ_TEST(requantize_valid, 0, )
/* Accepted variations: strided, broadcast, layout conversion, in bounds. */
COPY_TEST(copy_strided_valid, 0,
	  op.input.stride[0] = 2; op.input.shape[0] = 128; op.output.shape[0] = 128)
COPY_TEST(copy_broadcast_valid, 0, op.input.stride[0] = 0; op.input.shape[0] = 256;
	  op.input.stride[0] = 0)
COPY_TEST(copy_last_byte_valid, 0, op.input.offset = BO_SIZE - 256)
COPY_TEST(copy_nchw_to_nhwc_valid, 0, op.input = T4(0, I8, NCHW, 0, 1, 4, 8, 8);
	  op.output = T4(2, I8, NHWC, 0, 1, 8, 8, 4))

/* Stream structure ------------------------------------------------------ */

static void *one_copy_stream(size_t *len)
{
	struct drm_metainfer_op_copy op = base_copy();
	struct mi_stream s;

	mi_stream_init(&s);
	mi_stream_add(&s, &op, sizeof(op));
	mi_stream_finish(&s);
	*len = s.len;
	return s.buf;
}

TEST_F(dev, stream_bad_magic)
{
	size_t len;
	struct drm_metainfer_stream_header *h = one_copy_stream(&len);

	h->magic ^= 1;
	ASSERT_EQ(-EINVAL, submit_raw(self->fd, self->ctx, h, len));
	free(h);
}

TEST_F(dev, stream_bad_version)
{
	size_t len;
	struct drm_metainfer_stream_header *h = one_copy_stream(&len);

	h->version = DRM_METAINFER_STREAM_VERSION + 1;
	ASSERT_EQ(-EINVAL, submit_raw(self->fd, self->ctx, h, len));
	free(h);
}

TEST_F(dev, stream_header_flags)
{
	size_t len;
	struct drm_metainfer_stream_header *h = one_copy_stream(&len);

	h->flags = 1;
	ASSERT_EQ(-EINVAL, submit_raw(self->fd, self->ctx, h, len));
	free(h);
}

TEST_F(dev, stream_zero_ops)
{
	struct drm_metainfer_stream_header h = {
		.magic = DRM_METAINFER_STREAM_MAGIC,
		.version = DRM_METAINFER_STREAM_VERSION,
	};

	ASSERT_EQ(-EINVAL, submit_raw(self->fd, self->ctx, &h, sizeof(h)));
}

TEST_F(dev, stream_op_count_too_high)
{
	size_t len;
	struct drm_metainfer_stream_header *h = one_copy_stream(&len);

	h->op_count = 2;
	ASSERT_EQ(-EINVAL, submit_raw(self->fd, self->ctx, h, len));
	free(h);
}

TEST_F(dev, stream_trailing_bytes)
{
	size_t len;
	uint8_t *p = one_copy_stream(&len);

	p = realloc(p, len + 8);
	ASSERT_NE(NULL, p);
	memset(p + len, 0, 8);
	ASSERT_EQ(-EINVAL, submit_raw(self->fd, self->ctx, p, len + 8));
	free(p);
}

TEST_F(dev, stream_truncated_op)
{
	size_t len;
	void *p = one_copy_stream(&len);

	ASSERT_EQ(-EINVAL, submit_raw(self->fd, self->ctx, p, len - 8));
	free(p);
}

TEST_F(dev, stream_shorter_than_header)
{
	size_t len;
	void *p = one_copy_stream(&len);

	ASSERT_EQ(-EINVAL, submit_raw(self->fd, self->ctx, p, 8));
	free(p);
}

TEST_F(dev, stream_empty)
{
	size_t len;
	void *p = one_copy_stream(&len);

	ASSERT_EQ(-EINVAL, submit_raw(self->fd, self->ctx, p, 0));
	free(p);
}

TEST_F(dev, stream_too_large)
{
	uint8_t *p = calloc(1, DRM_METAINFER_MAX_CMDS_SIZE + 8);
	size_t len;
	void *one = one_copy_stream(&len);

	ASSERT_NE(NULL, p);
	memcpy(p, one, len);
	ASSERT_EQ(-EINVAL, submit_raw(self->fd, self->ctx, p,
				      DRM_METAINFER_MAX_CMDS_SIZE + 8));
	free(one);
	free(p);
}

TEST_F(dev, stream_too_many_ops)
{
	struct drm_metainfer_op_copy op = base_copy();
	struct mi_stream s;
	int i;

	mi_stream_init(&s);
	for (i = 0; i <= DRM_METAINFER_MAX_OPS; i++)
		mi_stream_add(&s, &op, sizeof(op));
	mi_stream_finish(&s);
	ASSERT_GE(DRM_METAINFER_MAX_CMDS_SIZE, s.len);
	ASSERT_EQ(-EINVAL, submit_raw(self->fd, self->ctx, s.buf, s.len));
	mi_stream_free(&s);
}

TEST_F(dev, stream_max_ops_valid)
{
	struct drm_metainfer_op_copy op = base_copy();
	struct mi_stream s;
	int i;

	op.input.shape[0] = op.output.shape[0] = 16;
	mi_stream_init(&s);
	for (i = 0; i < DRM_METAINFER_MAX_OPS; i++)
		mi_stream_add(&s, &op, sizeof(op));
	mi_stream_finish(&s);
	ASSERT_EQ(0, submit_raw(self->fd, self->ctx, s.buf, s.len));
	mi_stream_free(&s);
}

TEST_F(dev, stream_bad_pointer)
{
	ASSERT_EQ(0, make_bos(self->fd));
	ASSERT_EQ(-EFAULT, mi_submit(self->fd, self->ctx, bos, NBOS,
				     (void *)8, 256, NULL));
}

TEST_F(dev, op_size_larger_than_struct)
{
	struct {
		struct drm_metainfer_op_copy op;
		uint64_t extra;
	} big;

	memset(&big, 0, sizeof(big));
	big.op = base_copy();
	ASSERT_EQ(-EINVAL, submit_one(self->fd, self->ctx, &big, sizeof(big)));
}

TEST_F(dev, op_size_smaller_than_struct)
{
	struct drm_metainfer_op_copy op = base_copy();
	struct mi_stream s;

	mi_stream_init(&s);
	mi_stream_add(&s, &op, sizeof(op));
	mi_stream_finish(&s);
	/* claim 8 bytes less than the op has; the stream still adds up */
	((struct drm_metainfer_op_header *)(s.buf + sizeof(struct drm_metainfer_stream_header)))->size -= 8;
	ASSERT_EQ(-EINVAL, submit_raw(self->fd, self->ctx, s.buf, s.len - 8));
	mi_stream_free(&s);
}

TEST_F(dev, op_size_zero)
{
	struct drm_metainfer_op_copy op = base_copy();
	struct mi_stream s;

	mi_stream_init(&s);
	mi_stream_add(&s, &op, sizeof(op));
	mi_stream_finish(&s);
	((struct drm_metainfer_op_header *)(s.buf + sizeof(struct drm_metainfer_stream_header)))->size = 0;
	ASSERT_EQ(-EINVAL, submit_raw(self->fd, self->ctx, s.buf, s.len));
	mi_stream_free(&s);
}

COPY_TEST(op_zero, -EINVAL, op.hdr.op = 0)
COPY_TEST(op_unknown, -EINVAL, op.hdr.op = DRM_METAINFER_OP_COUNT)
COPY_TEST(op_header_pad, -EINVAL, op.hdr.pad = 1)
COPY_TEST(op_unknown_flag, -EINVAL, op.hdr.flags = 1u << 31)
COPY_TEST(op_flag_of_other_op, -EINVAL, op.hdr.flags = DRM_METAINFER_OP_F_BIAS)

/* Tensors ---------------------------------------------------------------- */

COPY_TEST(tensor_bo_index_out_of_range, -EINVAL, op.input.bo_index = NBOS)
COPY_TEST(tensor_offset_at_end, -EINVAL, op.input.offset = BO_SIZE)
COPY_TEST(tensor_last_element_past_end, -EINVAL, op.output.offset = BO_SIZE - 255)
COPY_TEST(tensor_offset_overflow, -EINVAL, op.input.offset = UINT64_MAX - 16)
COPY_TEST(tensor_offset_huge, -EINVAL, op.input.offset = 1ull << 63)
COPY_TEST(tensor_offset_misaligned, -EINVAL, op.input = T1(0, I32, 2, 16);
	  op.output = T1(2, I32, 0, 16))
COPY_TEST(tensor_stride_out_of_bounds, -EINVAL, op.input.stride[0] = 1ull << 40)
COPY_TEST(tensor_stride_overflow, -EINVAL, op.input.stride[0] = 1ull << 62)
COPY_TEST(tensor_stride_wraps_to_in_bounds, -EINVAL,
	  /* 2 * (2^63) wraps to 0 in 64 bits: must still be rejected */
	  op.input.shape[0] = 3; op.output.shape[0] = 3;
	  op.input.stride[0] = 1ull << 63)
COPY_TEST(tensor_stride_times_esize_overflow, -EINVAL,
	  op.input = T1(0, I32, 0, 2); op.output = T1(2, I32, 0, 2);
	  op.input.stride[0] = 1ull << 62)
COPY_TEST(tensor_shape_product_overflow, -EINVAL,
	  op.input = T4(0, I8, PLAIN, 0, 65536, 65536, 65536, 65536);
	  op.output = T4(2, I8, PLAIN, 0, 65536, 65536, 65536, 65536))
COPY_TEST(tensor_shape_huge, -EINVAL, op.input.shape[0] = UINT32_MAX;
	  op.output.shape[0] = UINT32_MAX)
COPY_TEST(tensor_shape_zero, -EINVAL, op.input.shape[0] = 0; op.output.shape[0] = 0)
COPY_TEST(tensor_ndim_zero, -EINVAL, op.input.ndim = 0)
COPY_TEST(tensor_ndim_five, -EINVAL, op.input.ndim = 5)
COPY_TEST(tensor_unused_shape_nonzero, -EINVAL, op.input.shape[2] = 1)
COPY_TEST(tensor_unused_stride_nonzero, -EINVAL, op.input.stride[3] = 1)
COPY_TEST(tensor_dtype_zero, -EINVAL, op.input.dtype = 0; op.output.dtype = 0)
COPY_TEST(tensor_dtype_unknown, -EINVAL, op.input.dtype = DRM_METAINFER_DTYPE_COUNT;
	  op.output.dtype = DRM_METAINFER_DTYPE_COUNT)
COPY_TEST(tensor_layout_unknown, -EINVAL, op.input.layout = DRM_METAINFER_LAYOUT_COUNT)
COPY_TEST(tensor_nchw_not_4d, -EINVAL, op.input = T2(0, I8, 0, 16, 16);
	  op.input.layout = NCHW; op.output = T2(2, I8, 0, 16, 16);
	  op.output.layout = NCHW)
COPY_TEST(copy_shape_mismatch, -EINVAL, op.output.shape[0] = 255)
COPY_TEST(copy_dtype_mismatch, -EINVAL, op.output.dtype = U8)
COPY_TEST(copy_ndim_mismatch, -EINVAL, op.output = T2(2, I8, 0, 16, 16))

/* Op parameters ---------------------------------------------------------- */

CONV_TEST(conv_output_h_mismatch, -EINVAL, op.output.shape[2] = 7)
CONV_TEST(conv_output_c_mismatch, -EINVAL, op.output.shape[1] = 7)
CONV_TEST(conv_batch_mismatch, -EINVAL, op.output.shape[0] = 2)
CONV_TEST(conv_stride_zero, -EINVAL, op.stride_h = 0)
CONV_TEST(conv_dilation_zero, -EINVAL, op.dilation_w = 0)
CONV_TEST(conv_groups_zero, -EINVAL, op.groups = 0)
CONV_TEST(conv_groups_not_dividing, -EINVAL, op.groups = 3)
CONV_TEST(conv_weight_cin_mismatch, -EINVAL, op.weight.shape[1] = 3)
CONV_TEST(conv_kernel_larger_than_input, -EINVAL,
	  op.weight = T4(1, I8, NCHW, 0, 8, 4, 9, 9))
CONV_TEST(conv_pad_field_nonzero, -EINVAL, op.pad = 1)
CONV_TEST(conv_layout_mismatch, -EINVAL, op.weight = T4(1, I8, NHWC, 0, 8, 3, 3, 4))
CONV_TEST(conv_input_plain, -EINVAL, op.input.layout = PLAIN)
CONV_TEST(conv_raw_output_not_int32, -EINVAL, op.output.dtype = I8)
CONV_TEST(conv_rq_without_flag, -EINVAL, op.rq.act_max = 5)
CONV_TEST(conv_bias_without_flag, -EINVAL, op.bias = T1(1, I32, 1024, 8))
CONV_TEST(conv_bias_flag_without_tensor, -EINVAL, op.hdr.flags = DRM_METAINFER_OP_F_BIAS)
CONV_TEST(conv_input_int32, -EINVAL, op.input.dtype = I32)
CONVRQ_TEST(conv_bias_wrong_length, -EINVAL, op.bias.shape[0] = 7)
CONVRQ_TEST(conv_bias_not_int32, -EINVAL, op.bias.dtype = I16)
CONVRQ_TEST(conv_multiplier_wrong_length, -EINVAL, op.multiplier.shape[0] = 4)
CONVRQ_TEST(conv_shift_missing, -EINVAL, memset(&op.shift, 0, sizeof(op.shift)))
CONVRQ_TEST(conv_act_min_above_max, -EINVAL, op.rq.act_min = 10; op.rq.act_max = 9)
CONVRQ_TEST(conv_act_range_outside_dtype, -EINVAL, op.rq.act_min = 200; op.rq.act_max = 300)
CONVRQ_TEST(conv_rq_pad_nonzero, -EINVAL, op.rq.pad = 1)
CONVRQ_TEST(conv_requant_per_tensor_valid, 0, op.multiplier.shape[0] = 1;
	    op.shift.shape[0] = 1)
GEMM_TEST(gemm_k_mismatch, -EINVAL, op.b.shape[0] = 15)
GEMM_TEST(gemm_output_mismatch, -EINVAL, op.output.shape[1] = 7)
GEMM_TEST(gemm_not_2d, -EINVAL, op.a = T1(0, I8, 0, 64))
GEMM_TEST(gemm_transposed_b_valid, 0, op.b.stride[0] = 1; op.b.stride[1] = 16)
ADD_TEST(add_shape_mismatch, -EINVAL, op.b.shape[1] = 7)
ADD_TEST(add_shift_too_big, -EINVAL, op.shift = 63)
ADD_TEST(add_pad_nonzero, -EINVAL, op.pad = 1)
ADD_TEST(add_act_min_above_max, -EINVAL, op.rq.act_min = 1; op.rq.act_max = 0)
ADD_TEST(add_broadcast_valid, 0, op.b.stride[0] = 0; op.b.stride[1] = 1)
ADD_TEST(mul_with_b_mult, -EINVAL, op.hdr.op = DRM_METAINFER_OP_MUL; op.b_mult = 1)
ADD_TEST(mul_valid, 0, op.hdr.op = DRM_METAINFER_OP_MUL; op.b_mult = 0)
CLIP_TEST(clip_min_above_max, -EINVAL, op.min = 11)
CLIP_TEST(clip_dtype_mismatch, -EINVAL, op.output.dtype = U8)
CLIP_TEST(relu_with_max, -EINVAL, op.hdr.op = DRM_METAINFER_OP_RELU)
CLIP_TEST(relu_valid, 0, op.hdr.op = DRM_METAINFER_OP_RELU; op.max = 0)
POOL_TEST(pool_kernel_zero, -EINVAL, op.kernel_h = 0)
POOL_TEST(pool_stride_zero, -EINVAL, op.stride_w = 0)
POOL_TEST(pool_pad_not_below_kernel, -EINVAL, op.pad_top = 2;
	  op.output.shape[2] = 5)
POOL_TEST(pool_output_mismatch, -EINVAL, op.output.shape[3] = 3)
POOL_TEST(pool_channel_mismatch, -EINVAL, op.output.shape[1] = 3)
POOL_TEST(pool_dtype_mismatch, -EINVAL, op.output.dtype = U8)
POOL_TEST(maxpool_count_pad_flag, -EINVAL, op.hdr.flags = DRM_METAINFER_OP_F_COUNT_PAD)
POOL_TEST(avgpool_count_pad_valid, 0, op.hdr.op = DRM_METAINFER_OP_AVGPOOL;
	  op.hdr.flags = DRM_METAINFER_OP_F_COUNT_PAD)
RQ_TEST(requantize_axis_out_of_range, -EINVAL, op.axis = 4)
RQ_TEST(requantize_multiplier_count, -EINVAL, op.multiplier.shape[0] = 3)
RQ_TEST(requantize_shape_mismatch, -EINVAL, op.output.shape[3] = 1)
RQ_TEST(requantize_multiplier_not_int32, -EINVAL, op.multiplier.dtype = I16)

/*
 * LUT, one field per test.  A device that does not advertise the op
 * (dsp-nchw) rejects every well-framed LUT with -EOPNOTSUPP before
 * looking at it: that is what sends userspace to its CPU fallback.
 */
#define LUT_TEST(name, expect, mutate)                                       \
	TEST_F(dev, name)                                                    \
	{                                                                    \
		struct drm_metainfer_op_lut op = base_lut();                 \
		uint64_t ops = 0;                                            \
		mutate;                                                      \
		ASSERT_EQ(0, mi_get_param(self->fd,                          \
					  DRM_METAINFER_PARAM_OP_MASK, 0,    \
					  &ops));                            \
		ASSERT_EQ((ops >> DRM_METAINFER_OP_LUT) & 1 ? (expect) :     \
							      -EOPNOTSUPP,   \
			  submit_one(self->fd, self->ctx, &op, sizeof(op))); \
	}

LUT_TEST(lut_valid, 0, )
LUT_TEST(lut_uint8_valid, 0, op.input.dtype = U8; op.table.dtype = U8;
	 op.output.dtype = U8)
LUT_TEST(lut_int8_to_uint8_valid, 0, op.table.dtype = U8; op.output.dtype = U8)
LUT_TEST(lut_nhwc_valid, 0, op.input = T4(0, I8, NHWC, 0, 1, 5, 5, 4);
	 op.output = T4(2, I8, NHWC, 0, 1, 5, 5, 4))
LUT_TEST(lut_strided_table_valid, 0, op.table.stride[0] = 3)
LUT_TEST(lut_table_next_to_output_valid, 0, op.table = T1(2, I8, 100, 256))
LUT_TEST(lut_flags, -EINVAL, op.hdr.flags = DRM_METAINFER_OP_F_BIAS)
LUT_TEST(lut_input_int16, -EINVAL, op.input.dtype = I16)
LUT_TEST(lut_input_int32, -EINVAL, op.input.dtype = I32)
LUT_TEST(lut_output_int16, -EINVAL, op.output.dtype = I16; op.table.dtype = I16)
LUT_TEST(lut_table_dtype_not_output, -EINVAL, op.table.dtype = U8)
LUT_TEST(lut_table_255, -EINVAL, op.table.shape[0] = 255)
LUT_TEST(lut_table_257, -EINVAL, op.table.shape[0] = 257)
LUT_TEST(lut_table_2d, -EINVAL, op.table = T2(1, I8, 0, 16, 16))
LUT_TEST(lut_table_4d_nchw, -EINVAL, op.table = T4(1, I8, NCHW, 0, 1, 1, 16, 16))
LUT_TEST(lut_table_missing, -EINVAL, memset(&op.table, 0, sizeof(op.table)))
LUT_TEST(lut_table_past_end, -EINVAL, op.table.offset = BO_SIZE - 255)
LUT_TEST(lut_table_bo_index, -EINVAL, op.table.bo_index = NBOS)
LUT_TEST(lut_table_overlaps_output, -EINVAL, op.table = T1(2, I8, 99, 256))
LUT_TEST(lut_input_past_end, -EINVAL, op.input.offset = BO_SIZE - 99)
LUT_TEST(lut_output_past_end, -EINVAL, op.output.offset = BO_SIZE - 99;
	 op.table = T1(1, I8, 0, 256))
LUT_TEST(lut_shape_mismatch, -EINVAL, op.output.shape[0] = 99)
LUT_TEST(lut_ndim_mismatch, -EINVAL, op.output = T2(2, I8, 0, 10, 10))
LUT_TEST(lut_layout_mismatch, -EINVAL, op.input = T4(0, I8, NCHW, 0, 1, 4, 5, 5);
	 op.output = T4(2, I8, NHWC, 0, 1, 5, 5, 4))

/*
 * Framing is checked before the op mask: on every device a bad header pad
 * or size is -EINVAL, and the op's size is exact (shorter, or longer even
 * with a zero tail, fails).
 */
TEST_F(dev, lut_header_pad)
{
	struct drm_metainfer_op_lut op = base_lut();

	op.hdr.pad = 1;
	ASSERT_EQ(-EINVAL, submit_one(self->fd, self->ctx, &op, sizeof(op)));
}

TEST_F(dev, lut_size_short)
{
	struct drm_metainfer_op_lut op = base_lut();

	ASSERT_EQ(-EINVAL, submit_one(self->fd, self->ctx, &op, sizeof(op) - 8));
}

TEST_F(dev, lut_size_long)
{
	struct {
		struct drm_metainfer_op_lut op;
		uint64_t tail;
	} big = { .op = base_lut() };

	ASSERT_EQ(-EINVAL, submit_one(self->fd, self->ctx, &big, sizeof(big)));
}

/* Syncobjs and VALIDATE_ONLY --------------------------------------------- */

/*
 * The probe (DRM_METAINFER_SUBMIT_VALIDATE_ONLY) and the real submit agree
 * on every rejection, including the in-syncs and the out-sync, and the
 * probe changes no syncobj.  Each test sends one valid COPY job with the
 * in-syncs and out-sync of its case, first as a probe, then for real.
 */
struct sync_case {
	struct drm_metainfer_sync in[2];
	uint32_t nin;
	uint64_t in_ptr;	/* replaces &in when non-zero */
	uint32_t out;
	uint64_t out_point;
};

static int sync_submit(int fd, uint32_t ctx, const struct sync_case *c,
		       uint32_t flags, uint64_t *seqno)
{
	struct drm_metainfer_op_copy op = base_copy();
	struct drm_metainfer_submit s;
	struct mi_stream st;
	int ret = make_bos(fd);

	if (ret)
		return ret;
	mi_stream_init(&st);
	mi_stream_add(&st, &op, sizeof(op));
	mi_stream_finish(&st);
	memset(&s, 0, sizeof(s));
	s.size = sizeof(s);
	s.flags = flags;
	s.ctx_id = ctx;
	s.bo_count = NBOS;
	s.bo_handles = (uintptr_t)bos;
	s.cmds = (uintptr_t)st.buf;
	s.cmds_size = st.len;
	s.in_sync_count = c->nin;
	s.in_syncs = c->in_ptr ? c->in_ptr : (uintptr_t)c->in;
	s.out_sync = c->out;
	s.out_point = c->out_point;
	s.seqno = 12345;
	ret = mi_ioctl(fd, DRM_IOCTL_METAINFER_SUBMIT, &s);
	if (seqno)
		*seqno = s.seqno;
	mi_stream_free(&st);
	return ret;
}

/* Signal point @point of timeline syncobj @h from the CPU. */
static int timeline_signal(int fd, uint32_t h, uint64_t point)
{
	struct drm_syncobj_timeline_array a;

	memset(&a, 0, sizeof(a));
	a.handles = (uintptr_t)&h;
	a.points = (uintptr_t)&point;
	a.count_handles = 1;
	return mi_ioctl(fd, DRM_IOCTL_SYNCOBJ_TIMELINE_SIGNAL, &a);
}

/* Has syncobj @h a fence at @point?  1 signalled, 0 pending, -EINVAL none. */
static int sync_state(int fd, uint32_t h, uint64_t point)
{
	int ret = mi_syncobj_timeline_wait(fd, h, point, 0, 0);

	return ret == 0 ? 1 : ret == -ETIME ? 0 : ret;
}

/*
 * One case: @SIG is a signalled binary syncobj, @NONE one without a fence,
 * @TL a timeline signalled up to point 1, @OUT a fresh binary syncobj that
 * is the out-sync unless @setup changes it.  Both submits must return
 * @expect; the probe must leave @OUT without a fence and @TL at point 1.
 */
#define SYNC_TEST(name, expect, setup)                                        \
	TEST_F(dev, name)                                                     \
	{                                                                     \
		struct sync_case c;                                           \
		uint32_t SIG, NONE, TL, OUT;                                  \
		uint64_t seq = 1, pt = 0;                                     \
		int fd = self->fd;                                            \
                                                                              \
		ASSERT_EQ(0, mi_syncobj_create(fd, DRM_SYNCOBJ_CREATE_SIGNALED, \
					       &SIG));                        \
		ASSERT_EQ(0, mi_syncobj_create(fd, 0, &NONE));                \
		ASSERT_EQ(0, mi_syncobj_create(fd, 0, &TL));                  \
		ASSERT_EQ(0, timeline_signal(fd, TL, 1));                     \
		ASSERT_EQ(0, mi_syncobj_create(fd, 0, &OUT));                 \
		memset(&c, 0, sizeof(c));                                     \
		c.out = OUT;                                                  \
		(void)SIG;                                                    \
		(void)NONE;                                                   \
		setup;                                                        \
		EXPECT_EQ(expect, sync_submit(fd, self->ctx, &c,              \
				DRM_METAINFER_SUBMIT_VALIDATE_ONLY, &seq));   \
		if (!(expect))                                                \
			EXPECT_EQ(0, seq);                                    \
		EXPECT_EQ(-EINVAL, sync_state(fd, OUT, 0));                   \
		ASSERT_EQ(0, mi_syncobj_query(fd, TL, &pt));                  \
		EXPECT_EQ(1, pt);                                             \
		EXPECT_EQ(expect, sync_submit(fd, self->ctx, &c, 0, &seq));   \
		if (expect) {                                                 \
			EXPECT_EQ(-EINVAL, sync_state(fd, OUT, 0));           \
		} else {                                                      \
			EXPECT_LT(0, seq);                                    \
			EXPECT_EQ(0, mi_wait(fd, self->ctx, seq, 20000, NULL)); \
			if (c.out)                                            \
				EXPECT_EQ(1, sync_state(fd, c.out, c.out_point)); \
		}                                                             \
	}

/* accepted: a signalled in-sync, a binary out-sync */
SYNC_TEST(sync_valid, 0, c.in[0].handle = SIG; c.nin = 1)
/* accepted: wait for point 1 of a timeline, signal its point 2 */
SYNC_TEST(sync_timeline_valid, 0, c.in[0].handle = TL; c.in[0].point = 1;
	  c.nin = 1; c.out = TL; c.out_point = 2)
/* accepted: two in-syncs, no out-sync */
SYNC_TEST(sync_two_in_valid, 0, c.in[0].handle = SIG; c.in[1].handle = TL;
	  c.in[1].point = 1; c.nin = 2; c.out = 0)
SYNC_TEST(sync_in_unknown_handle, -ENOENT, c.in[0].handle = 0xdead; c.nin = 1)
SYNC_TEST(sync_in_handle_zero, -ENOENT, c.nin = 1)
SYNC_TEST(sync_in_second_unknown, -ENOENT, c.in[0].handle = SIG;
	  c.in[1].handle = 0xdead; c.nin = 2)
SYNC_TEST(sync_in_never_signalled, -EINVAL, c.in[0].handle = NONE; c.nin = 1)
SYNC_TEST(sync_in_flags, -EINVAL, c.in[0].handle = SIG; c.in[0].flags = 1;
	  c.nin = 1)
SYNC_TEST(sync_in_point_past_last, -EINVAL, c.in[0].handle = TL;
	  c.in[0].point = 2; c.nin = 1)
SYNC_TEST(sync_in_point_on_binary, -EINVAL, c.in[0].handle = SIG;
	  c.in[0].point = 1; c.nin = 1)
SYNC_TEST(sync_in_bad_pointer, -EFAULT, c.nin = 1; c.in_ptr = 8)
SYNC_TEST(sync_in_count_too_high, -EINVAL, c.nin = DRM_METAINFER_MAX_SYNCS + 1)
SYNC_TEST(sync_out_unknown, -ENOENT, c.out = 0xdead)
SYNC_TEST(sync_out_unknown_timeline_point, -ENOENT, c.out = 0xdead;
	  c.out_point = 3)
SYNC_TEST(sync_out_point_without_out, -EINVAL, c.out = 0; c.out_point = 1)

/* The probe reports an unknown buffer handle like the submit does. */
TEST_F(dev, validate_only_unknown_bo)
{
	struct drm_metainfer_op_copy op = base_copy();
	struct drm_metainfer_submit s;
	uint32_t handles[NBOS];
	struct mi_stream st;

	ASSERT_EQ(0, make_bos(self->fd));
	memcpy(handles, bos, sizeof(handles));
	handles[1] = 0xdead;
	mi_stream_init(&st);
	mi_stream_add(&st, &op, sizeof(op));
	mi_stream_finish(&st);
	memset(&s, 0, sizeof(s));
	s.size = sizeof(s);
	s.flags = DRM_METAINFER_SUBMIT_VALIDATE_ONLY;
	s.ctx_id = self->ctx;
	s.bo_count = NBOS;
	s.bo_handles = (uintptr_t)handles;
	s.cmds = (uintptr_t)st.buf;
	s.cmds_size = st.len;
	EXPECT_EQ(-ENOENT, mi_ioctl(self->fd, DRM_IOCTL_METAINFER_SUBMIT, &s));
	s.flags = 0;
	EXPECT_EQ(-ENOENT, mi_ioctl(self->fd, DRM_IOCTL_METAINFER_SUBMIT, &s));
	mi_stream_free(&st);
}

/*
 * GEM_CLOSE and SYNCOBJ_DESTROY are DRM core ioctls: an unknown handle is
 * -EINVAL there, not -ENOENT (Documentation/uapi.rst says so).
 */
TEST_F(dev, core_ioctls_unknown_handle)
{
	EXPECT_EQ(-EINVAL, mi_bo_close(self->fd, 0xdead));
	EXPECT_EQ(-EINVAL, mi_syncobj_destroy(self->fd, 0xdead));
}

/* Capabilities ----------------------------------------------------------- */

/*
 * A chip created here without MAXPOOL and without int16: the core rejects
 * what it does not advertise with -EOPNOTSUPP.
 */
#define LIMITED_ID 90

static int open_limited(uint32_t *ctx, int *minor)
{
	char params[96];
	int fd;

	snprintf(params, sizeof(params), "op_mask=0x%x macs_int16=0",
		 ((1u << DRM_METAINFER_OP_COUNT) - 2) & ~(1u << DRM_METAINFER_OP_MAXPOOL));
	mi_sim_del(LIMITED_ID);
	if (mi_sim_new(LIMITED_ID, "ethos-u55-deep", params))
		return -ENODEV;
	*minor = mi_sim_minor(LIMITED_ID);
	fd = mi_open_minor(*minor);
	if (fd >= 0 && mi_ctx_create(fd, 0, DRM_METAINFER_PRIORITY_NORMAL, ctx)) {
		close(fd);
		return -EINVAL;
	}
	return fd;
}

TEST(limited_device_advertises_less)
{
	uint64_t ops, dtypes;
	uint32_t ctx;
	int minor, fd = open_limited(&ctx, &minor);

	ASSERT_LE(0, fd);
	ASSERT_EQ(0, mi_get_param(fd, DRM_METAINFER_PARAM_OP_MASK, 0, &ops));
	EXPECT_EQ(0, ops & (1u << DRM_METAINFER_OP_MAXPOOL));
	EXPECT_NE(0, ops & (1u << DRM_METAINFER_OP_AVGPOOL));
	ASSERT_EQ(0, mi_get_param(fd, DRM_METAINFER_PARAM_DTYPE_MASK, 0, &dtypes));
	EXPECT_EQ(0, dtypes & (1u << DRM_METAINFER_DTYPE_INT16));
	close(fd);
	EXPECT_EQ(0, mi_sim_del(LIMITED_ID));
}

TEST(unsupported_op)
{
	struct drm_metainfer_op_pool op = base_pool();
	uint32_t ctx;
	int minor, fd = open_limited(&ctx, &minor);

	ASSERT_LE(0, fd);
	ASSERT_EQ(0, make_bos(fd));
	ASSERT_EQ(-EOPNOTSUPP, submit_one(fd, ctx, &op, sizeof(op)));
	op.hdr.op = DRM_METAINFER_OP_AVGPOOL;
	EXPECT_EQ(0, submit_one(fd, ctx, &op, sizeof(op)));
	close(fd);
	EXPECT_EQ(0, mi_sim_del(LIMITED_ID));
}

TEST(unsupported_dtype)
{
	struct drm_metainfer_op_copy op = base_copy();
	uint32_t ctx;
	int minor, fd = open_limited(&ctx, &minor);

	ASSERT_LE(0, fd);
	op.input = T1(0, I16, 0, 16);
	op.output = T1(2, I16, 0, 16);
	ASSERT_EQ(-EOPNOTSUPP, submit_one(fd, ctx, &op, sizeof(op)));
	close(fd);
	EXPECT_EQ(0, mi_sim_del(LIMITED_ID));
}

TEST(unsupported_validate_only)
{
	struct drm_metainfer_submit s = { .size = sizeof(s) };
	struct drm_metainfer_op_pool op = base_pool();
	struct mi_stream st;
	uint32_t ctx;
	int minor, fd = open_limited(&ctx, &minor);

	ASSERT_LE(0, fd);
	ASSERT_EQ(0, make_bos(fd));
	mi_stream_init(&st);
	mi_stream_add(&st, &op, sizeof(op));
	mi_stream_finish(&st);
	s.flags = DRM_METAINFER_SUBMIT_VALIDATE_ONLY;
	s.ctx_id = ctx;
	s.bo_count = NBOS;
	s.bo_handles = (uintptr_t)bos;
	s.cmds = (uintptr_t)st.buf;
	s.cmds_size = st.len;
	ASSERT_EQ(-EOPNOTSUPP, mi_ioctl(fd, DRM_IOCTL_METAINFER_SUBMIT, &s));
	mi_stream_free(&st);
	close(fd);
	EXPECT_EQ(0, mi_sim_del(LIMITED_ID));
}

TEST_HARNESS_MAIN
