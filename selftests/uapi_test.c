// SPDX-License-Identifier: GPL-2.0-only
/*
 * uapi_test: every MetaInfer ioctl's happy path, its size test (short ->
 * EINVAL, longer with a non-zero tail -> E2BIG, longer with a zero tail ->
 * works), unknown flags and non-zero padding (-> EINVAL), and unknown or
 * foreign handles (-> ENOENT).  One error path per test.
 */
#include <assert.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "mi_fixture.h"

/* The uapi's sizes: multiples of 8, no hidden tail padding, equal to VER0. */
#define SIZE_OK(type, ver0)                                                   \
	static_assert(sizeof(struct type) % 8 == 0, #type " size % 8");       \
	static_assert(sizeof(struct type) == (ver0), #type " size != VER0")
SIZE_OK(drm_metainfer_get_param, DRM_METAINFER_GET_PARAM_SIZE_VER0);
SIZE_OK(drm_metainfer_bo_create, DRM_METAINFER_BO_CREATE_SIZE_VER0);
SIZE_OK(drm_metainfer_bo_info, DRM_METAINFER_BO_INFO_SIZE_VER0);
SIZE_OK(drm_metainfer_ctx_create, DRM_METAINFER_CTX_CREATE_SIZE_VER0);
SIZE_OK(drm_metainfer_ctx_destroy, DRM_METAINFER_CTX_DESTROY_SIZE_VER0);
SIZE_OK(drm_metainfer_submit, DRM_METAINFER_SUBMIT_SIZE_VER0);
SIZE_OK(drm_metainfer_wait, DRM_METAINFER_WAIT_SIZE_VER0);
SIZE_OK(drm_metainfer_get_counters, DRM_METAINFER_GET_COUNTERS_SIZE_VER0);
#define SIZE8(type) static_assert(sizeof(struct type) % 8 == 0, #type " size % 8")
SIZE8(drm_metainfer_sync);
SIZE8(drm_metainfer_stream_header);
SIZE8(drm_metainfer_op_header);
SIZE8(drm_metainfer_tensor);
SIZE8(drm_metainfer_requant);
SIZE8(drm_metainfer_op_conv2d);
SIZE8(drm_metainfer_op_gemm);
SIZE8(drm_metainfer_op_eltwise);
SIZE8(drm_metainfer_op_clip);
SIZE8(drm_metainfer_op_pool);
SIZE8(drm_metainfer_op_requantize);
SIZE8(drm_metainfer_op_copy);
SIZE8(drm_metainfer_op_lut);
static_assert(sizeof(struct drm_metainfer_op_lut) == 232, "op_lut size is frozen");
/* 64-bit members are 8-byte aligned (same layout on i386 and x86_64). */
static_assert(offsetof(struct drm_metainfer_tensor, offset) % 8 == 0, "tensor.offset");
static_assert(offsetof(struct drm_metainfer_tensor, stride) % 8 == 0, "tensor.stride");
static_assert(offsetof(struct drm_metainfer_submit, bo_handles) % 8 == 0, "submit.bo_handles");
static_assert(offsetof(struct drm_metainfer_submit, seqno) % 8 == 0, "submit.seqno");
static_assert(offsetof(struct drm_metainfer_wait, timeout_ns) % 8 == 0, "wait.timeout_ns");
static_assert(offsetof(struct drm_metainfer_op_conv2d, input) % 8 == 0, "conv2d.input");
static_assert(offsetof(struct drm_metainfer_op_gemm, a) % 8 == 0, "gemm.a");
static_assert(offsetof(struct drm_metainfer_op_eltwise, a) % 8 == 0, "eltwise.a");
static_assert(offsetof(struct drm_metainfer_op_requantize, input) % 8 == 0, "requantize.input");
static_assert(DRM_METAINFER_OP_COUNT == 12, "op numbering is frozen");
static_assert(DRM_METAINFER_OP_LUT == 11, "op numbering is frozen");
static_assert(offsetof(struct drm_metainfer_op_lut, table) == 16, "lut.table");
/* every op a kernel of this header may advertise: bits 1..11 */
#define KNOWN_OPS 0xffeull
static_assert((((1ull << DRM_METAINFER_OP_COUNT) - 1) & ~1ull) == KNOWN_OPS,
	      "known-op mask");

enum ioc_id {
	IOC_GET_PARAM,
	IOC_BO_CREATE,
	IOC_BO_INFO,
	IOC_CTX_CREATE,
	IOC_CTX_DESTROY,
	IOC_SUBMIT,
	IOC_WAIT,
	IOC_GET_COUNTERS,
};

/* Per-test state that valid arguments point into. */
static uint32_t job_bos[2];
static struct mi_stream job_stream;

static int make_job(int fd)
{
	uint8_t *src;
	int i;

	if (job_bos[0])
		return 0;
	src = mi_bo_new(fd, 4096, &job_bos[0]);
	if (!src || mi_bo_create(fd, 4096, &job_bos[1]))
		return -ENOMEM;
	for (i = 0; i < 256; i++)
		src[i] = (uint8_t)(i * 7 + 1);
	munmap(src, 4096);
	mi_stream_init(&job_stream);
	mi_copy_job(&job_stream, 256, 0, 0);
	mi_stream_finish(&job_stream);
	return 0;
}

/*
 * Fill @buf with valid arguments for ioctl @id on @fd/@ctx; returns the
 * kernel struct size, or -errno if the preparation failed.
 */
static int fill_valid(int fd, uint32_t ctx, enum ioc_id id, void *buf)
{
	switch (id) {
	case IOC_GET_PARAM: {
		struct drm_metainfer_get_param *p = buf;

		p->param = DRM_METAINFER_PARAM_API_VERSION;
		return sizeof(*p);
	}
	case IOC_BO_CREATE: {
		struct drm_metainfer_bo_create *p = buf;

		p->bo_size = 4096;
		return sizeof(*p);
	}
	case IOC_BO_INFO: {
		struct drm_metainfer_bo_info *p = buf;
		int ret = mi_bo_create(fd, 8192, &p->handle);

		return ret ? ret : (int)sizeof(*p);
	}
	case IOC_CTX_CREATE: {
		struct drm_metainfer_ctx_create *p = buf;

		p->priority = DRM_METAINFER_PRIORITY_NORMAL;
		return sizeof(*p);
	}
	case IOC_CTX_DESTROY: {
		struct drm_metainfer_ctx_destroy *p = buf;
		int ret = mi_ctx_create(fd, 0, DRM_METAINFER_PRIORITY_LOW, &p->ctx_id);

		return ret ? ret : (int)sizeof(*p);
	}
	case IOC_SUBMIT: {
		struct drm_metainfer_submit *p = buf;
		int ret = make_job(fd);

		if (ret)
			return ret;
		p->ctx_id = ctx;
		p->bo_count = 2;
		p->bo_handles = (uintptr_t)job_bos;
		p->cmds = (uintptr_t)job_stream.buf;
		p->cmds_size = job_stream.len;
		return sizeof(*p);
	}
	case IOC_WAIT: {
		struct drm_metainfer_wait *p = buf;
		uint64_t seq = 0;
		int ret = make_job(fd);

		if (!ret)
			ret = mi_submit(fd, ctx, job_bos, 2, job_stream.buf,
					job_stream.len, &seq);
		if (ret)
			return ret;
		p->seqno = seq;
		p->ctx_id = ctx;
		p->timeout_ns = mi_deadline_ms(20000);
		return sizeof(*p);
	}
	case IOC_GET_COUNTERS:
		return sizeof(struct drm_metainfer_get_counters);
	}
	return -EINVAL;
}

static const unsigned long ioc_req[] = {
	[IOC_GET_PARAM] = DRM_IOCTL_METAINFER_GET_PARAM,
	[IOC_BO_CREATE] = DRM_IOCTL_METAINFER_BO_CREATE,
	[IOC_BO_INFO] = DRM_IOCTL_METAINFER_BO_INFO,
	[IOC_CTX_CREATE] = DRM_IOCTL_METAINFER_CTX_CREATE,
	[IOC_CTX_DESTROY] = DRM_IOCTL_METAINFER_CTX_DESTROY,
	[IOC_SUBMIT] = DRM_IOCTL_METAINFER_SUBMIT,
	[IOC_WAIT] = DRM_IOCTL_METAINFER_WAIT,
	[IOC_GET_COUNTERS] = DRM_IOCTL_METAINFER_GET_COUNTERS,
};

/* Offsets of each struct's flags and pad members. */
static const size_t ioc_flags_off[] = {
	[IOC_GET_PARAM] = offsetof(struct drm_metainfer_get_param, flags),
	[IOC_BO_CREATE] = offsetof(struct drm_metainfer_bo_create, flags),
	[IOC_BO_INFO] = offsetof(struct drm_metainfer_bo_info, flags),
	[IOC_CTX_CREATE] = offsetof(struct drm_metainfer_ctx_create, flags),
	[IOC_CTX_DESTROY] = offsetof(struct drm_metainfer_ctx_destroy, flags),
	[IOC_SUBMIT] = offsetof(struct drm_metainfer_submit, flags),
	[IOC_WAIT] = offsetof(struct drm_metainfer_wait, flags),
	[IOC_GET_COUNTERS] = offsetof(struct drm_metainfer_get_counters, flags),
};

static const size_t ioc_pad_off[] = {
	[IOC_GET_PARAM] = offsetof(struct drm_metainfer_get_param, pad),
	[IOC_BO_CREATE] = offsetof(struct drm_metainfer_bo_create, pad),
	[IOC_BO_INFO] = offsetof(struct drm_metainfer_bo_info, pad),
	[IOC_CTX_CREATE] = offsetof(struct drm_metainfer_ctx_create, pad),
	[IOC_CTX_DESTROY] = offsetof(struct drm_metainfer_ctx_destroy, pad),
	[IOC_SUBMIT] = offsetof(struct drm_metainfer_submit, pad),
	[IOC_WAIT] = offsetof(struct drm_metainfer_wait, pad),
	[IOC_GET_COUNTERS] = offsetof(struct drm_metainfer_get_counters, pad),
};

/* Flag bits no version of each ioctl defines (outside the known mask). */
static const uint32_t ioc_bad_flag[] = {
	[IOC_GET_PARAM] = 1u << 0,
	[IOC_BO_CREATE] = 1u << 31,
	[IOC_BO_INFO] = 1u << 0,
	[IOC_CTX_CREATE] = 1u << 0,
	[IOC_CTX_DESTROY] = 1u << 0,
	[IOC_SUBMIT] = 1u << 31,
	[IOC_WAIT] = 1u << 0,
	[IOC_GET_COUNTERS] = 1u << 31,
};

struct ioc_buf {
	uint64_t words[64]; /* 512 bytes, 8-aligned */
};

enum how { VALID, SHORT, LONG_ZERO, LONG_NONZERO, BAD_FLAG, BAD_PAD };

/*
 * Call ioctl @id with valid arguments changed as @how says; returns the
 * ioctl result.  For LONG_* the extra tail must stay untouched.
 */
static int call(struct __test_metadata *_metadata, int fd, uint32_t ctx,
		enum ioc_id id, enum how how)
{
	struct ioc_buf b;
	uint8_t *p = (uint8_t *)&b;
	int ksize, ret;
	uint32_t size;

	memset(&b, 0, sizeof(b));
	ksize = fill_valid(fd, ctx, id, p);
	if (ksize < 0) {
		TH_LOG("could not prepare valid arguments: %s", strerror(-ksize));
		return 1000;
	}
	size = ksize;
	switch (how) {
	case VALID:
		break;
	case SHORT:
		size = ksize - 8;
		break;
	case LONG_ZERO:
		size = ksize + 16;
		break;
	case LONG_NONZERO:
		size = ksize + 16;
		p[ksize + 13] = 0x5a;
		break;
	case BAD_FLAG:
		*(uint32_t *)(p + ioc_flags_off[id]) |= ioc_bad_flag[id];
		break;
	case BAD_PAD:
		*(uint32_t *)(p + ioc_pad_off[id]) = 1;
		break;
	}
	memcpy(p, &size, sizeof(size));
	ret = mi_ioctl(fd, ioc_req[id], p);
	if (how == LONG_ZERO || how == LONG_NONZERO) {
		int k;

		for (k = ksize; k < ksize + 16; k++)
			if (p[k] != (how == LONG_NONZERO && k == ksize + 13 ? 0x5a : 0)) {
				TH_LOG("the kernel wrote byte %d of the unknown tail", k);
				return 1001;
			}
	}
	return ret;
}

/* Size, flags and padding tests for every ioctl. */
#define IOCTL_TESTS(name, id)                                                  \
	TEST_F(dev, name##_valid)                                              \
	{                                                                      \
		ASSERT_EQ(0, call(_metadata, self->fd, self->ctx, id, VALID)); \
	}                                                                      \
	TEST_F(dev, name##_size_short)                                         \
	{                                                                      \
		ASSERT_EQ(-EINVAL,                                             \
			  call(_metadata, self->fd, self->ctx, id, SHORT));    \
	}                                                                      \
	TEST_F(dev, name##_size_long_zero_tail)                                \
	{                                                                      \
		ASSERT_EQ(0,                                                   \
			  call(_metadata, self->fd, self->ctx, id, LONG_ZERO)); \
	}                                                                      \
	TEST_F(dev, name##_size_long_nonzero_tail)                             \
	{                                                                      \
		ASSERT_EQ(-E2BIG, call(_metadata, self->fd, self->ctx, id,     \
				       LONG_NONZERO));                         \
	}                                                                      \
	TEST_F(dev, name##_unknown_flags)                                      \
	{                                                                      \
		ASSERT_EQ(-EINVAL,                                             \
			  call(_metadata, self->fd, self->ctx, id, BAD_FLAG)); \
	}                                                                      \
	TEST_F(dev, name##_nonzero_pad)                                        \
	{                                                                      \
		ASSERT_EQ(-EINVAL,                                             \
			  call(_metadata, self->fd, self->ctx, id, BAD_PAD));  \
	}

IOCTL_TESTS(get_param, IOC_GET_PARAM)
IOCTL_TESTS(bo_create, IOC_BO_CREATE)
IOCTL_TESTS(bo_info, IOC_BO_INFO)
IOCTL_TESTS(ctx_create, IOC_CTX_CREATE)
IOCTL_TESTS(ctx_destroy, IOC_CTX_DESTROY)
IOCTL_TESTS(submit, IOC_SUBMIT)
IOCTL_TESTS(wait, IOC_WAIT)
IOCTL_TESTS(get_counters, IOC_GET_COUNTERS)

TEST_F(dev, size_zero)
{
	struct drm_metainfer_get_param p = { .size = 0 };

	ASSERT_EQ(-EINVAL, mi_ioctl(self->fd, DRM_IOCTL_METAINFER_GET_PARAM, &p));
}

TEST_F(dev, unknown_ioctl)
{
	uint64_t buf[8] = { 64 };

	ASSERT_EQ(-ENOTTY,
		  mi_ioctl(self->fd, DRM_IOWR(DRM_COMMAND_BASE + 0x3f, uint64_t[8]), buf));
}

TEST_F(dev, bad_user_pointer)
{
	ASSERT_EQ(-EFAULT, mi_ioctl(self->fd, DRM_IOCTL_METAINFER_GET_PARAM,
				    (void *)8));
}

/* GET_PARAM ------------------------------------------------------------- */

TEST_F(dev, get_param_scalars)
{
	uint64_t v, ops, dtypes, layouts;
	uint32_t p;

	for (p = DRM_METAINFER_PARAM_API_VERSION; p <= DRM_METAINFER_PARAM_JOB_TIMEOUT_MS; p++)
		ASSERT_EQ(0, mi_get_param(self->fd, p, 0, &v)) {
			TH_LOG("param %u", p);
		}
	ASSERT_EQ(0, mi_get_param(self->fd, DRM_METAINFER_PARAM_API_VERSION, 0, &v));
	EXPECT_EQ(DRM_METAINFER_API_VERSION, v);
	ASSERT_EQ(0, mi_get_param(self->fd, DRM_METAINFER_PARAM_OP_MASK, 0, &ops));
	EXPECT_NE(0, ops);
	EXPECT_EQ(0, ops & ~KNOWN_OPS);
	ASSERT_EQ(0, mi_get_param(self->fd, DRM_METAINFER_PARAM_DTYPE_MASK, 0, &dtypes));
	EXPECT_NE(0, dtypes & (1u << DRM_METAINFER_DTYPE_INT8));
	EXPECT_EQ(0, dtypes & ~(((1ull << DRM_METAINFER_DTYPE_COUNT) - 1) & ~1ull));
	ASSERT_EQ(0, mi_get_param(self->fd, DRM_METAINFER_PARAM_LAYOUT_MASK, 0, &layouts));
	EXPECT_NE(0, layouts & (1u << DRM_METAINFER_LAYOUT_PLAIN));
	ASSERT_EQ(0, mi_get_param(self->fd, DRM_METAINFER_PARAM_NUM_QUEUES, 0, &v));
	EXPECT_LE(1, v);
	EXPECT_GE(DRM_METAINFER_MAX_QUEUES, v);
	ASSERT_EQ(0, mi_get_param(self->fd, DRM_METAINFER_PARAM_CLOCK_KHZ, 0, &v));
	EXPECT_LT(0, v);
	ASSERT_EQ(0, mi_get_param(self->fd, DRM_METAINFER_PARAM_MACS_PER_CYCLE,
				  DRM_METAINFER_DTYPE_INT8, &v));
	EXPECT_LT(0, v);
	ASSERT_EQ(0, mi_get_param(self->fd, DRM_METAINFER_PARAM_DEVICE_LOST, 0, &v));
	EXPECT_EQ(0, v);
	ASSERT_EQ(0, mi_get_param(self->fd, DRM_METAINFER_PARAM_JOB_TIMEOUT_MS, 0, &v));
	EXPECT_LT(0, v);
}

TEST_F(dev, get_param_name_blob)
{
	char name[128];
	uint64_t len;

	ASSERT_EQ(0, mi_get_param_str(self->fd, DRM_METAINFER_PARAM_NAME, name,
				      sizeof(name)));
	EXPECT_STREQ(variant->pers, name);
	ASSERT_EQ(0, mi_get_param(self->fd, DRM_METAINFER_PARAM_NAME, 0, &len));
	EXPECT_EQ(strlen(variant->pers) + 1, len);
}

TEST_F(dev, get_param_blob_truncated)
{
	struct drm_metainfer_get_param p = { .size = sizeof(p) };
	char buf[8];

	memset(buf, 'x', sizeof(buf));
	p.param = DRM_METAINFER_PARAM_NAME;
	p.data_ptr = (uintptr_t)buf;
	p.data_size = 3;
	ASSERT_EQ(0, mi_ioctl(self->fd, DRM_IOCTL_METAINFER_GET_PARAM, &p));
	EXPECT_EQ(strlen(variant->pers) + 1, p.value);
	EXPECT_EQ(0, memcmp(buf, variant->pers, 3));
	EXPECT_EQ('x', buf[3]);
}

TEST_F(dev, get_param_backend_blob)
{
	char name[128];

	ASSERT_EQ(0, mi_get_param_str(self->fd, DRM_METAINFER_PARAM_BACKEND,
				      name, sizeof(name)));
	EXPECT_STREQ("metainfer_sim", name);
}

TEST_F(dev, get_param_unknown)
{
	ASSERT_EQ(-EINVAL, mi_get_param(self->fd, 0x7fffffff, 0, NULL));
}

TEST_F(dev, get_param_scalar_with_data_ptr)
{
	struct drm_metainfer_get_param p = { .size = sizeof(p) };
	uint64_t buf;

	p.param = DRM_METAINFER_PARAM_API_VERSION;
	p.data_ptr = (uintptr_t)&buf;
	p.data_size = sizeof(buf);
	ASSERT_EQ(-EINVAL, mi_ioctl(self->fd, DRM_IOCTL_METAINFER_GET_PARAM, &p));
}

TEST_F(dev, get_param_blob_bad_pointer)
{
	struct drm_metainfer_get_param p = { .size = sizeof(p) };

	p.param = DRM_METAINFER_PARAM_NAME;
	p.data_ptr = 8;
	p.data_size = 16;
	ASSERT_EQ(-EFAULT, mi_ioctl(self->fd, DRM_IOCTL_METAINFER_GET_PARAM, &p));
}

/* Buffers --------------------------------------------------------------- */

TEST_F(dev, bo_create_rounds_to_pages)
{
	struct drm_metainfer_bo_create c = { .size = sizeof(c), .bo_size = 5000 };
	uint64_t size;
	long page = sysconf(_SC_PAGESIZE);

	ASSERT_EQ(0, mi_ioctl(self->fd, DRM_IOCTL_METAINFER_BO_CREATE, &c));
	EXPECT_NE(0, c.handle);
	EXPECT_EQ((5000 + page - 1) / page * page, c.bo_size);
	ASSERT_EQ(0, mi_bo_info(self->fd, c.handle, &size, NULL));
	EXPECT_EQ(c.bo_size, size);
}

TEST_F(dev, bo_create_zero_size)
{
	uint32_t h;

	ASSERT_EQ(-EINVAL, mi_bo_create(self->fd, 0, &h));
}

TEST_F(dev, bo_mmap_zero_filled_and_coherent)
{
	uint32_t h;
	uint64_t size;
	uint8_t *a, *b;
	size_t i;

	ASSERT_EQ(0, mi_bo_create(self->fd, 3 * 4096, &h));
	a = mi_bo_map(self->fd, h, &size);
	ASSERT_NE(NULL, a);
	b = mi_bo_map(self->fd, h, NULL);
	ASSERT_NE(NULL, b);
	for (i = 0; i < size; i++)
		ASSERT_EQ(0, a[i]);
	a[size - 1] = 0xab;
	a[0] = 0x12;
	EXPECT_EQ(0xab, b[size - 1]);
	EXPECT_EQ(0x12, b[0]);
	munmap(a, size);
	munmap(b, size);
}

TEST_F(dev, bo_info_unknown_handle)
{
	ASSERT_EQ(-ENOENT, mi_bo_info(self->fd, 0x7ffffff0, NULL, NULL));
}

TEST_F(dev, bo_info_closed_handle)
{
	uint32_t h;

	ASSERT_EQ(0, mi_bo_create(self->fd, 4096, &h));
	ASSERT_EQ(0, mi_bo_close(self->fd, h));
	ASSERT_EQ(-ENOENT, mi_bo_info(self->fd, h, NULL, NULL));
}

TEST_F(dev, bo_info_foreign_handle)
{
	int fd2 = mi_open_minor(self->minor);
	uint32_t h;

	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, mi_bo_create(fd2, 4096, &h));
	ASSERT_EQ(-ENOENT, mi_bo_info(self->fd, h, NULL, NULL));
	close(fd2);
}

/* Contexts -------------------------------------------------------------- */

TEST_F(dev, ctx_create_every_priority)
{
	uint32_t prio, ids[3];

	for (prio = DRM_METAINFER_PRIORITY_LOW; prio <= DRM_METAINFER_PRIORITY_HIGH; prio++) {
		ASSERT_EQ(0, mi_ctx_create(self->fd, self->queue, prio, &ids[prio]));
		EXPECT_LE(1, ids[prio]);
		EXPECT_NE(self->ctx, ids[prio]);
	}
	EXPECT_NE(ids[0], ids[1]);
	EXPECT_NE(ids[1], ids[2]);
	for (prio = 0; prio < 3; prio++)
		EXPECT_EQ(0, mi_ctx_destroy(self->fd, ids[prio]));
}

TEST_F(dev, ctx_create_bad_queue)
{
	uint64_t nq;
	uint32_t c;

	ASSERT_EQ(0, mi_get_param(self->fd, DRM_METAINFER_PARAM_NUM_QUEUES, 0, &nq));
	ASSERT_EQ(-EINVAL, mi_ctx_create(self->fd, (uint32_t)nq,
					 DRM_METAINFER_PRIORITY_NORMAL, &c));
}

TEST_F(dev, ctx_create_bad_priority)
{
	uint32_t c;

	ASSERT_EQ(-EINVAL, mi_ctx_create(self->fd, 0, 3, &c));
}

TEST_F(dev, ctx_destroy_twice)
{
	uint32_t c;

	ASSERT_EQ(0, mi_ctx_create(self->fd, 0, DRM_METAINFER_PRIORITY_NORMAL, &c));
	ASSERT_EQ(0, mi_ctx_destroy(self->fd, c));
	ASSERT_EQ(-ENOENT, mi_ctx_destroy(self->fd, c));
}

TEST_F(dev, ctx_destroy_foreign)
{
	int fd2 = mi_open_minor(self->minor);
	uint32_t c;

	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, mi_ctx_create(fd2, 0, DRM_METAINFER_PRIORITY_NORMAL, &c));
	/* same id may exist here: destroy ours first so the id is unknown */
	if (c == self->ctx)
		ASSERT_EQ(0, mi_ctx_destroy(self->fd, self->ctx));
	ASSERT_EQ(-ENOENT, mi_ctx_destroy(self->fd, c));
	EXPECT_EQ(0, mi_ctx_destroy(fd2, c));
	close(fd2);
}

/* Submit and wait ------------------------------------------------------- */

TEST_F(dev, submit_wait_copy)
{
	uint64_t seq1, seq2;
	int64_t status = 1;
	uint8_t *dst;
	int i;

	ASSERT_EQ(0, make_job(self->fd));
	ASSERT_EQ(0, mi_submit(self->fd, self->ctx, job_bos, 2, job_stream.buf,
			       job_stream.len, &seq1));
	EXPECT_EQ(1, seq1);
	ASSERT_EQ(0, mi_submit(self->fd, self->ctx, job_bos, 2, job_stream.buf,
			       job_stream.len, &seq2));
	EXPECT_EQ(seq1 + 1, seq2);
	ASSERT_EQ(0, mi_wait(self->fd, self->ctx, seq2, 20000, &status));
	EXPECT_EQ(0, status);
	ASSERT_EQ(0, mi_wait(self->fd, self->ctx, seq1, 0, &status));
	EXPECT_EQ(0, status);
	dst = mi_bo_map(self->fd, job_bos[1], NULL);
	ASSERT_NE(NULL, dst);
	for (i = 0; i < 256; i++)
		ASSERT_EQ((uint8_t)(i * 7 + 1), dst[i]);
	for (; i < 4096; i++)
		ASSERT_EQ(0, dst[i]);
	munmap(dst, 4096);
}

TEST_F(dev, submit_validate_only)
{
	struct drm_metainfer_submit s = { .size = sizeof(s) };
	struct drm_metainfer_get_counters c0, c1;
	uint8_t *dst;

	ASSERT_EQ(0, make_job(self->fd));
	ASSERT_EQ(0, mi_counters(self->fd, self->ctx, &c0));
	s.flags = DRM_METAINFER_SUBMIT_VALIDATE_ONLY;
	s.ctx_id = self->ctx;
	s.bo_count = 2;
	s.bo_handles = (uintptr_t)job_bos;
	s.cmds = (uintptr_t)job_stream.buf;
	s.cmds_size = job_stream.len;
	ASSERT_EQ(0, mi_ioctl(self->fd, DRM_IOCTL_METAINFER_SUBMIT, &s));
	EXPECT_EQ(0, s.seqno);
	ASSERT_EQ(0, mi_counters(self->fd, self->ctx, &c1));
	EXPECT_EQ(c0.jobs_submitted, c1.jobs_submitted);
	usleep(20000);
	dst = mi_bo_map(self->fd, job_bos[1], NULL);
	ASSERT_NE(NULL, dst);
	EXPECT_EQ(0, dst[0]);
	munmap(dst, 4096);
}

TEST_F(dev, wait_seqno_zero)
{
	int64_t st;

	ASSERT_EQ(-EINVAL, mi_wait(self->fd, self->ctx, 0, 10, &st));
}

TEST_F(dev, wait_seqno_never_issued)
{
	int64_t st;

	ASSERT_EQ(-EINVAL, mi_wait(self->fd, self->ctx, 5, 10, &st));
}

TEST_F(dev, wait_unknown_ctx)
{
	int64_t st;

	ASSERT_EQ(-ENOENT, mi_wait(self->fd, self->ctx + 100, 1, 10, &st));
}

TEST_F(dev, submit_unknown_ctx)
{
	ASSERT_EQ(0, make_job(self->fd));
	ASSERT_EQ(-ENOENT, mi_submit(self->fd, self->ctx + 100, job_bos, 2,
				     job_stream.buf, job_stream.len, NULL));
}

TEST_F(dev, submit_destroyed_ctx)
{
	ASSERT_EQ(0, make_job(self->fd));
	ASSERT_EQ(0, mi_ctx_destroy(self->fd, self->ctx));
	ASSERT_EQ(-ENOENT, mi_submit(self->fd, self->ctx, job_bos, 2,
				     job_stream.buf, job_stream.len, NULL));
}

TEST_F(dev, submit_foreign_ctx)
{
	int fd2 = mi_open_minor(self->minor);

	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, make_job(self->fd));
	/* fd2 has no contexts at all: our ctx id means nothing there */
	ASSERT_EQ(-ENOENT, mi_submit(fd2, self->ctx, job_bos, 2,
				     job_stream.buf, job_stream.len, NULL));
	close(fd2);
}

TEST_F(dev, submit_unknown_bo)
{
	uint32_t bos[2];

	ASSERT_EQ(0, make_job(self->fd));
	bos[0] = job_bos[0];
	bos[1] = 0x7ffffff0;
	ASSERT_EQ(-ENOENT, mi_submit(self->fd, self->ctx, bos, 2,
				     job_stream.buf, job_stream.len, NULL));
}

/* A job naming a buffer of another open file is rejected. */
TEST_F(dev, submit_foreign_bo)
{
	int fd2 = mi_open_minor(self->minor);
	uint32_t bos[2], h, i;

	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, make_job(self->fd));
	/* a handle number that exists in fd2 but not in ours */
	for (i = 0; i < 8; i++)
		ASSERT_EQ(0, mi_bo_create(fd2, 4096, &h));
	ASSERT_EQ(-ENOENT, mi_bo_info(self->fd, h, NULL, NULL));
	bos[0] = job_bos[0];
	bos[1] = h;
	ASSERT_EQ(-ENOENT, mi_submit(self->fd, self->ctx, bos, 2,
				     job_stream.buf, job_stream.len, NULL));
	close(fd2);
}

TEST_F(dev, submit_bad_bo_pointer)
{
	ASSERT_EQ(0, make_job(self->fd));
	ASSERT_EQ(-EFAULT, mi_submit(self->fd, self->ctx, (uint32_t *)8, 2,
				     job_stream.buf, job_stream.len, NULL));
}

TEST_F(dev, submit_too_many_bos)
{
	uint32_t bos[DRM_METAINFER_MAX_BOS + 1];
	int i;

	ASSERT_EQ(0, make_job(self->fd));
	for (i = 0; i <= DRM_METAINFER_MAX_BOS; i++)
		bos[i] = job_bos[i & 1];
	ASSERT_EQ(-EINVAL, mi_submit(self->fd, self->ctx, bos,
				     DRM_METAINFER_MAX_BOS + 1, job_stream.buf,
				     job_stream.len, NULL));
}

static int submit_syncs(int fd, uint32_t ctx, struct drm_metainfer_sync *in,
			uint32_t nin, uint32_t out, uint64_t out_point,
			uint64_t *seqno)
{
	struct drm_metainfer_submit s = { .size = sizeof(s) };
	int ret;

	s.ctx_id = ctx;
	s.bo_count = 2;
	s.bo_handles = (uintptr_t)job_bos;
	s.cmds = (uintptr_t)job_stream.buf;
	s.cmds_size = job_stream.len;
	s.in_syncs = (uintptr_t)in;
	s.in_sync_count = nin;
	s.out_sync = out;
	s.out_point = out_point;
	ret = mi_ioctl(fd, DRM_IOCTL_METAINFER_SUBMIT, &s);
	if (!ret && seqno)
		*seqno = s.seqno;
	return ret;
}

TEST_F(dev, submit_unknown_in_syncobj)
{
	struct drm_metainfer_sync in = { .handle = 0x7ffffff0 };

	ASSERT_EQ(0, make_job(self->fd));
	ASSERT_EQ(-ENOENT, submit_syncs(self->fd, self->ctx, &in, 1, 0, 0, NULL));
}

TEST_F(dev, submit_unknown_out_syncobj)
{
	ASSERT_EQ(0, make_job(self->fd));
	ASSERT_EQ(-ENOENT, submit_syncs(self->fd, self->ctx, NULL, 0,
					0x7ffffff0, 0, NULL));
}

TEST_F(dev, submit_in_sync_nonzero_flags)
{
	struct drm_metainfer_sync in = { .flags = 1 };

	ASSERT_EQ(0, make_job(self->fd));
	ASSERT_EQ(0, mi_syncobj_create(self->fd, DRM_SYNCOBJ_CREATE_SIGNALED,
				       &in.handle));
	ASSERT_EQ(-EINVAL, submit_syncs(self->fd, self->ctx, &in, 1, 0, 0, NULL));
}

TEST_F(dev, submit_in_sync_without_fence)
{
	struct drm_metainfer_sync in = { 0 };

	ASSERT_EQ(0, make_job(self->fd));
	ASSERT_EQ(0, mi_syncobj_create(self->fd, 0, &in.handle));
	ASSERT_EQ(-EINVAL, submit_syncs(self->fd, self->ctx, &in, 1, 0, 0, NULL));
}

TEST_F(dev, submit_timeline_out_and_in)
{
	struct drm_metainfer_sync in = { 0 };
	uint32_t tl;
	uint64_t s1, s2, point = 0;
	int64_t st;

	ASSERT_EQ(0, make_job(self->fd));
	ASSERT_EQ(0, mi_syncobj_create(self->fd, 0, &tl));
	ASSERT_EQ(0, submit_syncs(self->fd, self->ctx, NULL, 0, tl, 5, &s1));
	in.handle = tl;
	in.point = 5;
	ASSERT_EQ(0, submit_syncs(self->fd, self->ctx, &in, 1, tl, 6, &s2));
	ASSERT_EQ(0, mi_syncobj_timeline_wait(self->fd, tl, 6, 20000,
					      DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT));
	ASSERT_EQ(0, mi_syncobj_query(self->fd, tl, &point));
	EXPECT_EQ(6, point);
	ASSERT_EQ(0, mi_wait(self->fd, self->ctx, s1, 0, &st));
	EXPECT_EQ(0, st);
	ASSERT_EQ(0, mi_wait(self->fd, self->ctx, s2, 0, &st));
	EXPECT_EQ(0, st);
}

TEST_F(dev, submit_binary_out_syncobj)
{
	uint32_t so;
	uint64_t s1;

	ASSERT_EQ(0, make_job(self->fd));
	ASSERT_EQ(0, mi_syncobj_create(self->fd, 0, &so));
	ASSERT_EQ(0, submit_syncs(self->fd, self->ctx, NULL, 0, so, 0, &s1));
	ASSERT_EQ(0, mi_syncobj_timeline_wait(self->fd, so, 0, 20000,
					      DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT));
}

/* Counters -------------------------------------------------------------- */

TEST_F(dev, counters_count_jobs)
{
	struct drm_metainfer_get_counters d0, d1, c1;
	uint64_t seq;
	int64_t st;
	int i;

	ASSERT_EQ(0, make_job(self->fd));
	ASSERT_EQ(0, mi_counters(self->fd, 0, &d0));
	for (i = 0; i < 3; i++)
		ASSERT_EQ(0, mi_submit(self->fd, self->ctx, job_bos, 2,
				       job_stream.buf, job_stream.len, &seq));
	ASSERT_EQ(0, mi_wait(self->fd, self->ctx, seq, 20000, &st));
	ASSERT_EQ(0, st);
	ASSERT_EQ(0, mi_counters(self->fd, 0, &d1));
	ASSERT_EQ(0, mi_counters(self->fd, self->ctx, &c1));
	EXPECT_LE(d0.jobs_submitted + 3, d1.jobs_submitted);
	EXPECT_LE(d0.jobs_completed + 3, d1.jobs_completed);
	EXPECT_LT(d0.timestamp_ns, d1.timestamp_ns);
	EXPECT_LT(d0.busy_ns, d1.busy_ns);
	EXPECT_LE(d0.dma_bytes_in + 3 * 256, d1.dma_bytes_in);
	EXPECT_LE(d0.dma_bytes_out + 3 * 256, d1.dma_bytes_out);
	EXPECT_EQ(3, c1.jobs_submitted);
	EXPECT_EQ(3, c1.jobs_completed);
	EXPECT_EQ(0, c1.jobs_failed);
	EXPECT_EQ(0, c1.queue_depth);
}

TEST_F(dev, counters_unknown_ctx)
{
	struct drm_metainfer_get_counters c;

	ASSERT_EQ(-ENOENT, mi_counters(self->fd, self->ctx + 100, &c));
}

TEST_F(dev, counters_device_scope_with_ctx)
{
	struct drm_metainfer_get_counters c = { .size = sizeof(c) };

	c.ctx_id = self->ctx;
	ASSERT_EQ(-EINVAL, mi_ioctl(self->fd, DRM_IOCTL_METAINFER_GET_COUNTERS, &c));
}

TEST_F(dev, counters_sensors_valid)
{
	struct drm_metainfer_get_counters c;

	ASSERT_EQ(0, mi_counters(self->fd, 0, &c));
	/* the simulator models all four sensors */
	EXPECT_EQ(DRM_METAINFER_VALID_TEMP | DRM_METAINFER_VALID_POWER |
		  DRM_METAINFER_VALID_CLOCK | DRM_METAINFER_VALID_THROTTLE, c.valid);
	EXPECT_LT(0, c.clock_khz);
	EXPECT_LT(-50000, c.temp_mc);
}

TEST_HARNESS_MAIN
