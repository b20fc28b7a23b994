// SPDX-License-Identifier: GPL-2.0-only
/*
 * edge_test: corner cases of buffers, contexts and waiting: the same buffer
 * named twice in a job, buffers closed while a job uses them, limits on
 * sizes, syncs and contexts, polling waits, a signal interrupting a wait,
 * a context destroyed while another thread waits on it.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "mi_fixture.h"

/* A job that keeps the chip busy for a while: a 96x96x96 int8 gemm. */
static void gemm_job(struct mi_stream *s, uint32_t src_bo, uint32_t dst_bo)
{
	struct drm_metainfer_op_gemm g;
	uint32_t sa[2] = { 96, 96 }, so[2] = { 96, 96 };

	memset(&g, 0, sizeof(g));
	g.hdr.op = DRM_METAINFER_OP_GEMM;
	g.a = mi_tensor(src_bo, DRM_METAINFER_DTYPE_INT8, DRM_METAINFER_LAYOUT_PLAIN, 0, 2, sa);
	g.b = mi_tensor(src_bo, DRM_METAINFER_DTYPE_INT8, DRM_METAINFER_LAYOUT_PLAIN, 16384, 2, sa);
	g.output = mi_tensor(dst_bo, DRM_METAINFER_DTYPE_INT32, DRM_METAINFER_LAYOUT_PLAIN, 0, 2, so);
	mi_stream_add(s, &g, sizeof(g));
}

TEST_F(dev, same_buffer_twice_in_one_job)
{
	uint32_t h, bos[2];
	uint8_t *p;
	struct mi_stream s;
	uint64_t seq;
	int64_t st;

	p = mi_bo_new(self->fd, 8192, &h);
	ASSERT_NE(NULL, p);
	memset(p, 0x6b, 100);
	bos[0] = bos[1] = h;
	/* copy the first 100 bytes to offset 4096 of the same buffer */
	mi_stream_init(&s);
	mi_copy_job(&s, 100, 0, 4096);
	mi_stream_finish(&s);
	ASSERT_EQ(0, mi_submit(self->fd, self->ctx, bos, 2, s.buf, s.len, &seq));
	ASSERT_EQ(0, mi_wait(self->fd, self->ctx, seq, 30000, &st));
	ASSERT_EQ(0, st);
	EXPECT_EQ(0x6b, p[4096 + 99]);
	mi_stream_free(&s);
}

TEST_F(dev, buffers_closed_while_job_runs)
{
	long long n0 = mi_dbg_bo_count(self->minor), n = -1;
	uint32_t bos[2];
	struct mi_stream s;
	uint64_t seq;
	int64_t st;
	int i;

	ASSERT_LE(0, n0);
	ASSERT_EQ(0, mi_bo_create(self->fd, 65536, &bos[0]));
	ASSERT_EQ(0, mi_bo_create(self->fd, 65536, &bos[1]));
	mi_stream_init(&s);
	gemm_job(&s, 0, 1);
	mi_stream_finish(&s);
	ASSERT_EQ(0, mi_submit(self->fd, self->ctx, bos, 2, s.buf, s.len, &seq));
	/* the job holds its own references */
	ASSERT_EQ(0, mi_bo_close(self->fd, bos[0]));
	ASSERT_EQ(0, mi_bo_close(self->fd, bos[1]));
	ASSERT_EQ(0, mi_wait(self->fd, self->ctx, seq, 30000, &st));
	EXPECT_EQ(0, st);
	for (i = 0; i < 100 && (n = mi_dbg_bo_count(self->minor)) != n0; i++)
		usleep(20000);
	EXPECT_EQ(n0, n);
	mi_stream_free(&s);
}

TEST_F(dev, bo_create_above_limit)
{
	uint32_t h;
	int ret = mi_bo_create(self->fd, 1ull << 40, &h);

	/* a TiB: refused, with one of the documented errors */
	EXPECT_TRUE(ret == -EINVAL || ret == -ENOMEM || ret == -E2BIG) {
		TH_LOG("BO_CREATE(1 TiB) returned %d", ret);
	}
}

TEST_F(dev, bo_create_size_overflow)
{
	uint32_t h;
	int ret = mi_bo_create(self->fd, UINT64_MAX - 100, &h);

	/* rounding up to a page must not wrap to a small size */
	EXPECT_TRUE(ret == -EINVAL || ret == -ENOMEM || ret == -E2BIG) {
		TH_LOG("BO_CREATE(~2^64) returned %d", ret);
	}
}

TEST_F(dev, mmap_beyond_buffer)
{
	uint64_t off;
	uint32_t h;
	void *p;

	ASSERT_EQ(0, mi_bo_create(self->fd, 4096, &h));
	ASSERT_EQ(0, mi_bo_info(self->fd, h, NULL, &off));
	p = mmap(NULL, 8192, PROT_READ, MAP_SHARED, self->fd, (off_t)off);
	EXPECT_EQ(MAP_FAILED, p);
	if (p != MAP_FAILED)
		munmap(p, 8192);
}

TEST_F(dev, too_many_in_syncs)
{
	struct drm_metainfer_sync in[DRM_METAINFER_MAX_SYNCS + 1];
	struct drm_metainfer_submit sub = { .size = sizeof(sub) };
	uint32_t bos[2], so;
	struct mi_stream s;
	int i;

	ASSERT_EQ(0, mi_bo_create(self->fd, 4096, &bos[0]));
	ASSERT_EQ(0, mi_bo_create(self->fd, 4096, &bos[1]));
	ASSERT_EQ(0, mi_syncobj_create(self->fd, DRM_SYNCOBJ_CREATE_SIGNALED, &so));
	memset(in, 0, sizeof(in));
	for (i = 0; i <= DRM_METAINFER_MAX_SYNCS; i++)
		in[i].handle = so;
	mi_stream_init(&s);
	mi_copy_job(&s, 16, 0, 0);
	mi_stream_finish(&s);
	sub.ctx_id = self->ctx;
	sub.bo_count = 2;
	sub.bo_handles = (uintptr_t)bos;
	sub.cmds = (uintptr_t)s.buf;
	sub.cmds_size = s.len;
	sub.in_syncs = (uintptr_t)in;
	sub.in_sync_count = DRM_METAINFER_MAX_SYNCS + 1;
	ASSERT_EQ(-EINVAL, mi_ioctl(self->fd, DRM_IOCTL_METAINFER_SUBMIT, &sub));
	/* the maximum itself is fine */
	sub.in_sync_count = DRM_METAINFER_MAX_SYNCS;
	EXPECT_EQ(0, mi_ioctl(self->fd, DRM_IOCTL_METAINFER_SUBMIT, &sub));
	mi_stream_free(&s);
}

TEST_F(dev, in_syncs_bad_pointer)
{
	struct drm_metainfer_submit sub = { .size = sizeof(sub) };
	uint32_t bos[2];
	struct mi_stream s;

	ASSERT_EQ(0, mi_bo_create(self->fd, 4096, &bos[0]));
	ASSERT_EQ(0, mi_bo_create(self->fd, 4096, &bos[1]));
	mi_stream_init(&s);
	mi_copy_job(&s, 16, 0, 0);
	mi_stream_finish(&s);
	sub.ctx_id = self->ctx;
	sub.bo_count = 2;
	sub.bo_handles = (uintptr_t)bos;
	sub.cmds = (uintptr_t)s.buf;
	sub.cmds_size = s.len;
	sub.in_syncs = 8;
	sub.in_sync_count = 1;
	ASSERT_EQ(-EFAULT, mi_ioctl(self->fd, DRM_IOCTL_METAINFER_SUBMIT, &sub));
	mi_stream_free(&s);
}

TEST_F(dev, zero_bos)
{
	struct mi_stream s;

	mi_stream_init(&s);
	mi_copy_job(&s, 16, 0, 0);
	mi_stream_finish(&s);
	/* the tensors name bo 0 and 1, but the job has none */
	ASSERT_EQ(-EINVAL, mi_submit(self->fd, self->ctx, NULL, 0, s.buf, s.len, NULL));
	mi_stream_free(&s);
}

TEST_F(dev, context_limit)
{
	uint32_t c;
	int i, ret = 0;

	/* 1024 per file (the fixture holds one) */
	for (i = 0; i < 1100; i++) {
		ret = mi_ctx_create(self->fd, 0, DRM_METAINFER_PRIORITY_LOW, &c);
		if (ret)
			break;
	}
	EXPECT_EQ(-ENOSPC, ret);
	EXPECT_EQ(1023, i);
}

TEST_F(dev, macs_param_bad_dtype)
{
	uint64_t v = 1;
	int ret = mi_get_param(self->fd, DRM_METAINFER_PARAM_MACS_PER_CYCLE,
			       DRM_METAINFER_DTYPE_COUNT, &v);

	EXPECT_TRUE(ret == -EINVAL || (ret == 0 && v == 0)) {
		TH_LOG("ret %d value %llu", ret, (unsigned long long)v);
	}
}

TEST_F(dev, wait_past_deadline_polls)
{
	struct drm_metainfer_wait w = { .size = sizeof(w) };
	uint32_t bos[2];
	struct mi_stream s;
	uint64_t seq;
	int64_t t0;
	int ret;

	ASSERT_EQ(0, mi_bo_create(self->fd, 65536, &bos[0]));
	ASSERT_EQ(0, mi_bo_create(self->fd, 65536, &bos[1]));
	mi_stream_init(&s);
	gemm_job(&s, 0, 1);
	gemm_job(&s, 0, 1);
	mi_stream_finish(&s);
	ASSERT_EQ(0, mi_submit(self->fd, self->ctx, bos, 2, s.buf, s.len, &seq));
	w.ctx_id = self->ctx;
	w.seqno = seq;
	w.timeout_ns = 0; /* long past */
	t0 = mi_now_ns();
	ret = mi_ioctl(self->fd, DRM_IOCTL_METAINFER_WAIT, &w);
	/* either the job was already done, or the poll says not yet */
	EXPECT_TRUE(ret == 0 || ret == -ETIMEDOUT);
	EXPECT_GT(1000000000, mi_now_ns() - t0);
	w.timeout_ns = mi_deadline_ms(30000);
	ASSERT_EQ(0, mi_ioctl(self->fd, DRM_IOCTL_METAINFER_WAIT, &w));
	EXPECT_EQ(0, w.status);
	mi_stream_free(&s);
}

static void on_alarm(int sig)
{
}

TEST_F(dev, signal_interrupts_wait)
{
	struct drm_metainfer_wait w = { .size = sizeof(w) };
	struct sigaction sa;
	uint32_t bos[2];
	struct mi_stream s;
	uint64_t seq;
	int64_t st = 0;
	int ret;

	ASSERT_EQ(0, mi_bo_create(self->fd, 4096, &bos[0]));
	ASSERT_EQ(0, mi_bo_create(self->fd, 4096, &bos[1]));
	ASSERT_EQ(0, mi_sim_knob(mi_sim_id_of_minor(self->minor), "fail_hang", 1));
	mi_stream_init(&s);
	mi_copy_job(&s, 16, 0, 0);
	mi_stream_finish(&s);
	ASSERT_EQ(0, mi_submit(self->fd, self->ctx, bos, 2, s.buf, s.len, &seq));
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm; /* no SA_RESTART */
	ASSERT_EQ(0, sigaction(SIGALRM, &sa, NULL));
	w.ctx_id = self->ctx;
	w.seqno = seq;
	w.timeout_ns = mi_deadline_ms(30000);
	ualarm(100000, 0);
	ret = ioctl(self->fd, DRM_IOCTL_METAINFER_WAIT, &w) ? -errno : 0;
	/* interrupted (the hung job takes the full job timeout) */
	EXPECT_EQ(-EINTR, ret);
	/* waiting again gets the hang's status */
	ASSERT_EQ(0, mi_wait(self->fd, self->ctx, seq, 30000, &st));
	EXPECT_EQ(-ETIMEDOUT, st);
	mi_stream_free(&s);
}

struct waiter {
	int fd;
	uint32_t ctx;
	uint64_t seq;
	int ret;
	int64_t status;
};

static void *wait_thread(void *arg)
{
	struct waiter *w = arg;

	w->ret = mi_wait(w->fd, w->ctx, w->seq, 30000, &w->status);
	return NULL;
}

TEST_F(dev, destroy_context_while_waiting)
{
	struct waiter w = { .fd = self->fd };
	uint32_t bos[2], c2;
	struct mi_stream s;
	pthread_t t;

	ASSERT_EQ(0, mi_bo_create(self->fd, 65536, &bos[0]));
	ASSERT_EQ(0, mi_bo_create(self->fd, 65536, &bos[1]));
	ASSERT_EQ(0, mi_ctx_create(self->fd, self->queue, DRM_METAINFER_PRIORITY_NORMAL, &c2));
	mi_stream_init(&s);
	gemm_job(&s, 0, 1);
	gemm_job(&s, 0, 1);
	gemm_job(&s, 0, 1);
	mi_stream_finish(&s);
	ASSERT_EQ(0, mi_submit(self->fd, c2, bos, 2, s.buf, s.len, &w.seq));
	w.ctx = c2;
	ASSERT_EQ(0, pthread_create(&t, NULL, wait_thread, &w));
	usleep(1000);
	ASSERT_EQ(0, mi_ctx_destroy(self->fd, c2));
	ASSERT_EQ(0, pthread_join(t, NULL));
	/* the waiter returned: with the job's status, or the id is gone */
	EXPECT_TRUE((w.ret == 0 && w.status == 0) || w.ret == -ENOENT) {
		TH_LOG("wait returned %d, status %lld", w.ret, (long long)w.status);
	}
	mi_stream_free(&s);
}

TEST_F(dev, close_file_while_another_thread_waits)
{
	struct waiter w;
	uint32_t bos[2], ctx;
	struct mi_stream s;
	pthread_t t;
	int fd2 = mi_open_minor(self->minor);

	ASSERT_LE(0, fd2);
	w.fd = fd2;
	ASSERT_EQ(0, mi_bo_create(fd2, 65536, &bos[0]));
	ASSERT_EQ(0, mi_bo_create(fd2, 65536, &bos[1]));
	ASSERT_EQ(0, mi_ctx_create(fd2, self->queue, DRM_METAINFER_PRIORITY_NORMAL, &ctx));
	mi_stream_init(&s);
	gemm_job(&s, 0, 1);
	gemm_job(&s, 0, 1);
	mi_stream_finish(&s);
	ASSERT_EQ(0, mi_submit(fd2, ctx, bos, 2, s.buf, s.len, &w.seq));
	w.ctx = ctx;
	ASSERT_EQ(0, pthread_create(&t, NULL, wait_thread, &w));
	usleep(1000);
	/* the waiting ioctl holds the file; close only drops our fd */
	ASSERT_EQ(0, close(fd2));
	ASSERT_EQ(0, pthread_join(t, NULL));
	EXPECT_TRUE(w.ret == 0 || w.ret == -EBADF);
	mi_stream_free(&s);
}

TEST_HARNESS_MAIN
