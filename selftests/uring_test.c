// SPDX-License-Identifier: GPL-2.0-only
/*
 * uring_test: job submission through io_uring (IORING_OP_URING_CMD on the
 * DRM fd).  SUBMIT, WAIT, GET_PARAM and GET_COUNTERS give the same results
 * and errors as the ioctls; a batch of SUBMITs costs one io_uring_enter();
 * WAIT runs in io_uring's workers, so a WAIT on a hung job never blocks the
 * submitter; malformed commands (flags, pad, foreign request codes, bad
 * pointers, short or oversized argument structs) get a clean errno in the
 * CQE.  Asynchronous SUBMITs (DRM_METAINFER_URING_CMD_ASYNC) post their CQE
 * when the job finishes, with its status and (CQE32) device time, and no
 * io-wq worker waits for them; every one completes when its job times out,
 * when the process exits or the ring is torn down with it in flight, and
 * when the device is removed.  Every test gets a fresh sim device.
 */
#include <dirent.h>
#include <errno.h>
#include <liburing.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "mi_test.h"

#define N 256

FIXTURE(udev) {
	unsigned int id;
	int fd;
	uint32_t ctx;
	uint32_t bos[2];
	uint8_t *src, *dst;
	struct mi_stream s;
	struct io_uring ring;
	bool ring_ok;
	bool deleted;
};

FIXTURE_VARIANT(udev) {
	const char *pers;
	unsigned int id;
	uint32_t queue;
};

FIXTURE_VARIANT_ADD(udev, u55_q0) {
	.pers = "ethos-u55-high",
	.id = 70,
	.queue = 0,
};

FIXTURE_VARIANT_ADD(udev, dsp_q1) {
	.pers = "dsp-nchw",
	.id = 71,
	.queue = 1,
};

FIXTURE_SETUP(udev)
{
	int i;

	self->fd = -1;
	self->id = variant->id;
	mi_sim_del(self->id);
	ASSERT_EQ(0, mi_sim_new(self->id, variant->pers, NULL)) {
		TH_LOG("cannot create sim device %u (is metainfer_sim loaded?)", self->id);
	}
	self->fd = mi_open_minor(mi_sim_minor(self->id));
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, mi_ctx_create(self->fd, variant->queue,
				   DRM_METAINFER_PRIORITY_NORMAL, &self->ctx));
	self->src = mi_bo_new(self->fd, 4096, &self->bos[0]);
	self->dst = mi_bo_new(self->fd, 4096, &self->bos[1]);
	ASSERT_NE(NULL, self->src);
	ASSERT_NE(NULL, self->dst);
	for (i = 0; i < N; i++)
		self->src[i] = (uint8_t)(i * 7 + 3);
	mi_stream_init(&self->s);
	mi_copy_job(&self->s, N, 0, 0);
	mi_stream_finish(&self->s);
	ASSERT_EQ(0, io_uring_queue_init(512, &self->ring, 0));
	self->ring_ok = true;
}

FIXTURE_TEARDOWN(udev)
{
	if (self->ring_ok)
		io_uring_queue_exit(&self->ring);
	if (self->src)
		munmap(self->src, 4096);
	if (self->dst)
		munmap(self->dst, 4096);
	if (self->fd >= 0)
		close(self->fd);
	mi_stream_free(&self->s);
	if (!self->deleted)
		EXPECT_EQ(0, mi_sim_del(self->id));
}

/* Queue one URING_CMD: request code @op, argument struct @arg. */
static struct io_uring_sqe *queue_cmd(struct io_uring *ring, int fd,
				      uint32_t op, void *arg, uint64_t tag)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
	struct drm_metainfer_uring_cmd *uc;

	if (!sqe)
		return NULL;
	io_uring_prep_rw(IORING_OP_URING_CMD, sqe, fd, NULL, 0, 0);
	sqe->cmd_op = op;
	uc = (struct drm_metainfer_uring_cmd *)sqe->cmd;
	memset(uc, 0, sizeof(*uc));
	uc->arg_ptr = (uintptr_t)arg;
	sqe->user_data = tag;
	return sqe;
}

/* Submit what is queued and reap one CQE: its res (tag in *tag). */
static int reap(struct io_uring *ring, uint64_t *tag)
{
	struct io_uring_cqe *cqe;
	int res;

	if (io_uring_wait_cqe(ring, &cqe))
		return -9999;
	res = cqe->res;
	if (tag)
		*tag = cqe->user_data;
	io_uring_cqe_seen(ring, cqe);
	return res;
}

/* One command, synchronously: the CQE's res. */
static int uring_ioctl(struct io_uring *ring, int fd, uint32_t op, void *arg)
{
	if (!queue_cmd(ring, fd, op, arg, 0) || io_uring_submit(ring) != 1)
		return -9998;
	return reap(ring, NULL);
}

static void fill_submit(FIXTURE_DATA(udev) *self,
			struct drm_metainfer_submit *sub)
{
	memset(sub, 0, sizeof(*sub));
	sub->size = sizeof(*sub);
	sub->ctx_id = self->ctx;
	sub->bo_count = 2;
	sub->bo_handles = (uintptr_t)self->bos;
	sub->cmds = (uintptr_t)self->s.buf;
	sub->cmds_size = self->s.len;
}

static int dst_ok(FIXTURE_DATA(udev) *self)
{
	int i;

	for (i = 0; i < N; i++)
		if (self->dst[i] != (uint8_t)(i * 7 + 3))
			return 0;
	return 1;
}

TEST_F(udev, submit_and_wait)
{
	struct drm_metainfer_submit sub;
	struct drm_metainfer_wait w;

	fill_submit(self, &sub);
	ASSERT_EQ(0, uring_ioctl(&self->ring, self->fd,
				 DRM_IOCTL_METAINFER_SUBMIT, &sub));
	ASSERT_NE(0, sub.seqno);
	memset(&w, 0, sizeof(w));
	w.size = sizeof(w);
	w.ctx_id = self->ctx;
	w.seqno = sub.seqno;
	w.timeout_ns = mi_deadline_ms(30000);
	w.status = 1;
	ASSERT_EQ(0, uring_ioctl(&self->ring, self->fd,
				 DRM_IOCTL_METAINFER_WAIT, &w));
	EXPECT_EQ(0, w.status);
	EXPECT_TRUE(dst_ok(self));
}

TEST_F(udev, get_param_matches_ioctl)
{
	struct drm_metainfer_get_param p, q;

	memset(&p, 0, sizeof(p));
	p.size = sizeof(p);
	p.param = DRM_METAINFER_PARAM_NUM_QUEUES;
	q = p;
	ASSERT_EQ(0, mi_ioctl(self->fd, DRM_IOCTL_METAINFER_GET_PARAM, &p));
	ASSERT_EQ(0, uring_ioctl(&self->ring, self->fd,
				 DRM_IOCTL_METAINFER_GET_PARAM, &q));
	EXPECT_EQ(p.value, q.value);
	EXPECT_LE(1, q.value);
}

/* 256 SUBMITs in one io_uring_enter(), every one completes exactly once
 * and in order; the counters see all of them. */
TEST_F(udev, batch_of_submits)
{
	struct drm_metainfer_get_counters c0, c1;
	struct drm_metainfer_submit *sub;
	struct drm_metainfer_wait w;
	int i, seen[N] = { 0 };
	uint64_t tag;

	sub = calloc(N, sizeof(*sub));
	ASSERT_NE(NULL, sub);
	ASSERT_EQ(0, mi_counters(self->fd, self->ctx, &c0));
	for (i = 0; i < N; i++) {
		fill_submit(self, &sub[i]);
		ASSERT_NE(NULL, queue_cmd(&self->ring, self->fd,
					  DRM_IOCTL_METAINFER_SUBMIT, &sub[i], i));
	}
	ASSERT_EQ(N, io_uring_submit(&self->ring));
	for (i = 0; i < N; i++) {
		ASSERT_EQ(0, reap(&self->ring, &tag));
		ASSERT_GT(N, tag);
		seen[tag]++;
	}
	for (i = 0; i < N; i++) {
		EXPECT_EQ(1, seen[i]);
		if (i)
			EXPECT_LT(sub[i - 1].seqno, sub[i].seqno);
	}
	memset(&w, 0, sizeof(w));
	w.size = sizeof(w);
	w.ctx_id = self->ctx;
	w.seqno = sub[N - 1].seqno;
	w.timeout_ns = mi_deadline_ms(60000);
	ASSERT_EQ(0, uring_ioctl(&self->ring, self->fd,
				 DRM_IOCTL_METAINFER_WAIT, &w));
	EXPECT_EQ(0, w.status);
	memset(&c1, 0, sizeof(c1));
	c1.size = sizeof(c1);
	c1.flags = DRM_METAINFER_COUNTERS_CTX;
	c1.ctx_id = self->ctx;
	ASSERT_EQ(0, uring_ioctl(&self->ring, self->fd,
				 DRM_IOCTL_METAINFER_GET_COUNTERS, &c1));
	EXPECT_EQ(c0.jobs_submitted + N, c1.jobs_submitted);
	EXPECT_EQ(c0.jobs_completed + N, c1.jobs_completed);
	EXPECT_TRUE(dst_ok(self));
	free(sub);
}

/* A WAIT on a hung job runs in a worker: io_uring_submit() returns at once
 * and the CQE arrives at the deadline with -ETIMEDOUT. */
TEST_F(udev, wait_does_not_block_submitter)
{
	struct drm_metainfer_submit sub;
	struct drm_metainfer_wait w;
	int64_t t0, t1, t2, st;

	ASSERT_EQ(0, mi_sim_knob(self->id, "fail_hang", 1));
	fill_submit(self, &sub);
	ASSERT_EQ(0, uring_ioctl(&self->ring, self->fd,
				 DRM_IOCTL_METAINFER_SUBMIT, &sub));
	memset(&w, 0, sizeof(w));
	w.size = sizeof(w);
	w.ctx_id = self->ctx;
	w.seqno = sub.seqno;
	w.timeout_ns = mi_deadline_ms(600);
	ASSERT_NE(NULL, queue_cmd(&self->ring, self->fd,
				  DRM_IOCTL_METAINFER_WAIT, &w, 1));
	t0 = mi_now_ns();
	ASSERT_EQ(1, io_uring_submit(&self->ring));
	t1 = mi_now_ns();
	EXPECT_GT(w.timeout_ns, t1) {
		TH_LOG("io_uring_submit() took %lld ms: WAIT blocked the submitter",
		       (long long)(t1 - t0) / 1000000);
	}
	ASSERT_EQ(-ETIMEDOUT, reap(&self->ring, NULL));
	t2 = mi_now_ns();
	EXPECT_LE(w.timeout_ns, t2);
	/* the job itself ends at the driver's job timeout, and the queue
	 * recovers */
	ASSERT_EQ(0, mi_wait(self->fd, self->ctx, sub.seqno, 30000, &st));
	EXPECT_EQ(-ETIMEDOUT, st);
	ASSERT_EQ(0, uring_ioctl(&self->ring, self->fd,
				 DRM_IOCTL_METAINFER_SUBMIT, &sub));
	ASSERT_EQ(0, mi_wait(self->fd, self->ctx, sub.seqno, 30000, &st));
	EXPECT_EQ(0, st);
	EXPECT_TRUE(dst_ok(self));
}

/* Errors are the ioctl's: same errno for the same bad argument struct. */
TEST_F(udev, errors_match_ioctl)
{
	struct drm_metainfer_submit sub, bad[6];
	int i, e;

	fill_submit(self, &sub);
	for (i = 0; i < 6; i++)
		bad[i] = sub;
	bad[0].ctx_id = 0xdead;			/* no such context */
	bad[1].flags = 0x80000000;		/* unknown flag */
	bad[2].cmds_size = 3;			/* truncated stream */
	bad[3].bo_handles = 8;			/* unmapped pointer */
	bad[4].size = 8;			/* shorter than VER0 */
	bad[5].bo_count = 1;			/* tensor in a missing BO */
	for (i = 0; i < 6; i++) {
		struct drm_metainfer_submit a = bad[i], b = bad[i];

		e = mi_ioctl(self->fd, DRM_IOCTL_METAINFER_SUBMIT, &a);
		EXPECT_GT(0, e) {
			TH_LOG("bad submit %d accepted by the ioctl", i);
		}
		EXPECT_EQ(e, uring_ioctl(&self->ring, self->fd,
					 DRM_IOCTL_METAINFER_SUBMIT, &b)) {
			TH_LOG("bad submit %d", i);
		}
	}
	/* the device still works */
	ASSERT_EQ(0, uring_ioctl(&self->ring, self->fd,
				 DRM_IOCTL_METAINFER_SUBMIT, &sub));
	ASSERT_EQ(0, mi_wait(self->fd, self->ctx, sub.seqno, 30000, NULL));
}

TEST_F(udev, malformed_commands)
{
	struct drm_metainfer_get_param p;
	struct io_uring_sqe *sqe;
	struct drm_metainfer_uring_cmd *uc;

	memset(&p, 0, sizeof(p));
	p.size = sizeof(p);
	p.param = DRM_METAINFER_PARAM_NUM_QUEUES;
	/* flags and pad must be zero */
	sqe = queue_cmd(&self->ring, self->fd, DRM_IOCTL_METAINFER_GET_PARAM,
			&p, 0);
	ASSERT_NE(NULL, sqe);
	((struct drm_metainfer_uring_cmd *)sqe->cmd)->flags = 1;
	ASSERT_EQ(1, io_uring_submit(&self->ring));
	EXPECT_EQ(-EINVAL, reap(&self->ring, NULL));
	sqe = queue_cmd(&self->ring, self->fd, DRM_IOCTL_METAINFER_GET_PARAM,
			&p, 0);
	ASSERT_NE(NULL, sqe);
	uc = (struct drm_metainfer_uring_cmd *)sqe->cmd;
	uc->pad = 1;
	ASSERT_EQ(1, io_uring_submit(&self->ring));
	EXPECT_EQ(-EINVAL, reap(&self->ring, NULL));
	/* request codes that are not MetaInfer's */
	EXPECT_EQ(-ENOTTY, uring_ioctl(&self->ring, self->fd, DRM_IOCTL_GEM_CLOSE, &p));
	EXPECT_EQ(-ENOTTY, uring_ioctl(&self->ring, self->fd, 0, &p));
	EXPECT_EQ(-ENOTTY, uring_ioctl(&self->ring, self->fd, 0xffffffffu, &p));
	EXPECT_EQ(-ENOTTY, uring_ioctl(&self->ring, self->fd,
				       DRM_IOCTL_METAINFER_GET_PARAM + 0x40, &p));
	/* bad argument pointers */
	EXPECT_EQ(-EFAULT, uring_ioctl(&self->ring, self->fd,
				       DRM_IOCTL_METAINFER_GET_PARAM, NULL));
	EXPECT_EQ(-EFAULT, uring_ioctl(&self->ring, self->fd,
				       DRM_IOCTL_METAINFER_WAIT, (void *)8));
	/* an oversized struct with a non-zero tail */
	{
		uint8_t big[256];

		memset(big, 0, sizeof(big));
		memcpy(big, &p, sizeof(p));
		((struct drm_metainfer_get_param *)big)->size = sizeof(big);
		big[200] = 1;
		EXPECT_EQ(-E2BIG, uring_ioctl(&self->ring, self->fd,
					      DRM_IOCTL_METAINFER_GET_PARAM, big));
		big[200] = 0;
		EXPECT_EQ(0, uring_ioctl(&self->ring, self->fd,
					 DRM_IOCTL_METAINFER_GET_PARAM, big));
	}
	/* still healthy */
	EXPECT_EQ(0, uring_ioctl(&self->ring, self->fd,
				 DRM_IOCTL_METAINFER_GET_PARAM, &p));
}

/* Asynchronous SUBMIT ---------------------------------------------------- */

/* Queue an asynchronous SUBMIT of @sub (its seqno pre-set to 0). */
static struct io_uring_sqe *queue_async(struct io_uring *ring, int fd,
					struct drm_metainfer_submit *sub,
					uint64_t tag)
{
	struct io_uring_sqe *sqe;

	sub->seqno = 0;
	sqe = queue_cmd(ring, fd, DRM_IOCTL_METAINFER_SUBMIT, sub, tag);
	if (sqe)
		((struct drm_metainfer_uring_cmd *)sqe->cmd)->flags =
			DRM_METAINFER_URING_CMD_ASYNC;
	return sqe;
}

/* Reap one CQE within @ms: res, tag and (CQE32 rings) big_cqe[0]. */
static int reap_timed(struct io_uring *ring, int ms, uint64_t *tag,
		      uint64_t *res2)
{
	struct __kernel_timespec ts = { .tv_sec = ms / 1000,
					.tv_nsec = (ms % 1000) * 1000000ll };
	struct io_uring_cqe *cqe;
	int res;

	if (io_uring_wait_cqe_timeout(ring, &cqe, &ts))
		return -9999;
	res = cqe->res;
	if (tag)
		*tag = cqe->user_data;
	if (res2)
		*res2 = (ring->flags & IORING_SETUP_CQE32) ? cqe->big_cqe[0] : 0;
	io_uring_cqe_seen(ring, cqe);
	return res;
}

/* io_uring worker threads ("iou-wrk-*") of this process. */
static int iou_workers(void)
{
	char path[300], comm[64];
	struct dirent *de;
	int n = 0, len;
	DIR *d = opendir("/proc/self/task");

	if (!d)
		return -1;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", de->d_name);
		len = mi_read_file(path, comm, sizeof(comm));
		if (len > 0 && !strncmp(comm, "iou-wrk", 7))
			n++;
	}
	closedir(d);
	return n;
}

/* Wait until the device has @n open files (async commands hold theirs). */
static int wait_files(unsigned int id, long long n, int ms)
{
	long long v = -1;
	int minor = mi_sim_minor(id), i;

	for (i = 0; i < ms / 10; i++) {
		if (!mi_dbg_status(minor, "files", &v) && v == n)
			return 0;
		usleep(10000);
	}
	return v < 0 ? -ENOENT : -ETIMEDOUT;
}

/* Close the fixture's fd and unmap its buffers (each mmap holds the file). */
static void drop_file(FIXTURE_DATA(udev) *self)
{
	munmap(self->src, 4096);
	munmap(self->dst, 4096);
	self->src = self->dst = NULL;
	close(self->fd);
	self->fd = -1;
}

TEST_F(udev, async_advertised)
{
	uint64_t v = 0;

	ASSERT_EQ(0, mi_get_param(self->fd, DRM_METAINFER_PARAM_URING_CMD_FLAGS,
				  0, &v));
	EXPECT_EQ(DRM_METAINFER_URING_CMD_FLAGS_MASK, v);
	EXPECT_NE(0, v & DRM_METAINFER_URING_CMD_ASYNC);
}

/* The CQE comes when the job has finished: status 0, the output written,
 * and on a CQE32 ring the job's device time, which is what the context's
 * busy_ns counter grew by. */
TEST_F(udev, async_submit_cqe32)
{
	struct drm_metainfer_get_counters c0, c1;
	struct drm_metainfer_submit sub;
	struct io_uring r32;
	uint64_t res2 = 0, tag = 0;
	int64_t st = 1;

	ASSERT_EQ(0, io_uring_queue_init(8, &r32, IORING_SETUP_CQE32));
	ASSERT_EQ(0, mi_counters(self->fd, self->ctx, &c0));
	fill_submit(self, &sub);
	ASSERT_NE(NULL, queue_async(&r32, self->fd, &sub, 7));
	ASSERT_EQ(1, io_uring_submit(&r32));
	/* the seqno is written at issue, before the CQE */
	EXPECT_LT(0, sub.seqno);
	EXPECT_EQ(0, reap_timed(&r32, 30000, &tag, &res2));
	EXPECT_EQ(7, tag);
	EXPECT_TRUE(dst_ok(self));
	ASSERT_EQ(0, mi_counters(self->fd, self->ctx, &c1));
	EXPECT_EQ(c0.jobs_completed + 1, c1.jobs_completed);
	EXPECT_LT(0, res2);
	EXPECT_EQ(c1.busy_ns - c0.busy_ns, res2);
	ASSERT_EQ(0, mi_wait(self->fd, self->ctx, sub.seqno, 1000, &st));
	EXPECT_EQ(0, st);
	io_uring_queue_exit(&r32);
}

/* On a plain ring the CQE carries the status only. */
TEST_F(udev, async_submit_plain_ring)
{
	struct drm_metainfer_submit sub;

	fill_submit(self, &sub);
	ASSERT_NE(NULL, queue_async(&self->ring, self->fd, &sub, 1));
	ASSERT_EQ(1, io_uring_submit(&self->ring));
	EXPECT_EQ(0, reap_timed(&self->ring, 30000, NULL, NULL));
	EXPECT_TRUE(dst_ok(self));
	EXPECT_LT(0, sub.seqno);
}

/* 64 asynchronous SUBMITs in one io_uring_enter(): 64 CQEs, one per job,
 * whose device times add up to the context's busy_ns. */
TEST_F(udev, async_batch)
{
	struct drm_metainfer_get_counters c0, c1;
	struct drm_metainfer_submit sub[64];
	int i, seen[64] = { 0 };
	uint64_t tag, res2, sum = 0;
	struct io_uring r32;

	ASSERT_EQ(0, io_uring_queue_init(64, &r32, IORING_SETUP_CQE32));
	ASSERT_EQ(0, mi_counters(self->fd, self->ctx, &c0));
	for (i = 0; i < 64; i++) {
		fill_submit(self, &sub[i]);
		ASSERT_NE(NULL, queue_async(&r32, self->fd, &sub[i], i));
	}
	ASSERT_EQ(64, io_uring_submit(&r32));
	EXPECT_EQ(0, iou_workers());
	for (i = 0; i < 64; i++) {
		ASSERT_EQ(0, reap_timed(&r32, 60000, &tag, &res2));
		ASSERT_GT(64, tag);
		seen[tag]++;
		sum += res2;
	}
	for (i = 0; i < 64; i++) {
		EXPECT_EQ(1, seen[i]);
		EXPECT_LT(0, sub[i].seqno);
	}
	ASSERT_EQ(0, mi_counters(self->fd, self->ctx, &c1));
	EXPECT_EQ(c0.jobs_completed + 64, c1.jobs_completed);
	EXPECT_EQ(c1.busy_ns - c0.busy_ns, sum);
	io_uring_queue_exit(&r32);
}

/* A rejected submit posts its CQE at once with the ioctl's errno and leaves
 * seqno alone; the flag is SUBMIT-only and excludes VALIDATE_ONLY. */
TEST_F(udev, async_errors)
{
	struct drm_metainfer_submit sub, bad[5];
	struct drm_metainfer_get_param p;
	struct io_uring_sqe *sqe;
	int i, e;

	fill_submit(self, &sub);
	for (i = 0; i < 5; i++)
		bad[i] = sub;
	bad[0].ctx_id = 0xdead;
	bad[1].flags = 0x80000000;
	bad[2].cmds_size = 3;
	bad[3].bo_handles = 8;
	bad[4].size = 8;
	for (i = 0; i < 5; i++) {
		struct drm_metainfer_submit a = bad[i], b = bad[i];

		e = mi_ioctl(self->fd, DRM_IOCTL_METAINFER_SUBMIT, &a);
		EXPECT_GT(0, e);
		ASSERT_NE(NULL, queue_async(&self->ring, self->fd, &b, i));
		ASSERT_EQ(1, io_uring_submit(&self->ring));
		EXPECT_EQ(e, reap_timed(&self->ring, 5000, NULL, NULL)) {
			TH_LOG("bad submit %d", i);
		}
		EXPECT_EQ(0, b.seqno);
	}
	/* VALIDATE_ONLY has no job to wait for */
	sub.flags = DRM_METAINFER_SUBMIT_VALIDATE_ONLY;
	ASSERT_NE(NULL, queue_async(&self->ring, self->fd, &sub, 0));
	ASSERT_EQ(1, io_uring_submit(&self->ring));
	EXPECT_EQ(-EINVAL, reap_timed(&self->ring, 5000, NULL, NULL));
	/* other commands, unknown flag bits */
	memset(&p, 0, sizeof(p));
	p.size = sizeof(p);
	p.param = DRM_METAINFER_PARAM_NUM_QUEUES;
	sqe = queue_cmd(&self->ring, self->fd, DRM_IOCTL_METAINFER_GET_PARAM, &p, 0);
	ASSERT_NE(NULL, sqe);
	((struct drm_metainfer_uring_cmd *)sqe->cmd)->flags = DRM_METAINFER_URING_CMD_ASYNC;
	ASSERT_EQ(1, io_uring_submit(&self->ring));
	EXPECT_EQ(-EINVAL, reap_timed(&self->ring, 5000, NULL, NULL));
	fill_submit(self, &sub);
	sqe = queue_async(&self->ring, self->fd, &sub, 0);
	ASSERT_NE(NULL, sqe);
	((struct drm_metainfer_uring_cmd *)sqe->cmd)->flags |=
		~DRM_METAINFER_URING_CMD_FLAGS_MASK;
	ASSERT_EQ(1, io_uring_submit(&self->ring));
	EXPECT_EQ(-EINVAL, reap_timed(&self->ring, 5000, NULL, NULL));
	/* and the good one still works */
	ASSERT_NE(NULL, queue_async(&self->ring, self->fd, &sub, 0));
	ASSERT_EQ(1, io_uring_submit(&self->ring));
	EXPECT_EQ(0, reap_timed(&self->ring, 30000, NULL, NULL));
}

/* A hung job: the submit returns at once, no worker thread waits for it,
 * and the CQE comes at the job timeout with -ETIMEDOUT; the queue recovers. */
TEST_F(udev, async_job_timeout)
{
	struct drm_metainfer_submit sub;
	uint64_t res2 = 0, tmo = 0;
	struct io_uring_cqe *cqe;
	struct io_uring r32;
	int64_t t0, t2;

	ASSERT_EQ(0, mi_get_param(self->fd, DRM_METAINFER_PARAM_JOB_TIMEOUT_MS,
				  0, &tmo));
	ASSERT_EQ(0, io_uring_queue_init(8, &r32, IORING_SETUP_CQE32));
	ASSERT_EQ(0, mi_sim_knob(self->id, "fail_hang", 1));
	fill_submit(self, &sub);
	ASSERT_NE(NULL, queue_async(&r32, self->fd, &sub, 1));
	t0 = mi_now_ns();
	ASSERT_EQ(1, io_uring_submit(&r32));
	/* the submit did not wait for the hung job: no CQE yet */
	EXPECT_EQ(-EAGAIN, io_uring_peek_cqe(&r32, &cqe));
	EXPECT_EQ(0, iou_workers());
	EXPECT_EQ(-ETIMEDOUT, reap_timed(&r32, 60000, NULL, &res2));
	t2 = mi_now_ns();
	EXPECT_LE((int64_t)tmo * 1000000, t2 - t0);
	/* it ran (hung) for the whole timeout */
	EXPECT_LE(tmo * 1000000, res2);
	EXPECT_EQ(0, iou_workers());
	ASSERT_NE(NULL, queue_async(&r32, self->fd, &sub, 2));
	ASSERT_EQ(1, io_uring_submit(&r32));
	EXPECT_EQ(0, reap_timed(&r32, 30000, NULL, NULL));
	EXPECT_TRUE(dst_ok(self));
	io_uring_queue_exit(&r32);
}

/* Submit a hung job and three queued behind it, asynchronously. */
static int submit_hung_four(FIXTURE_DATA(udev) *self, struct io_uring *ring,
			    struct drm_metainfer_submit *sub)
{
	int i, ret = mi_sim_knob(self->id, "fail_hang", 1);

	if (ret)
		return ret;
	for (i = 0; i < 4; i++) {
		fill_submit(self, &sub[i]);
		if (!queue_async(ring, self->fd, &sub[i], i))
			return -ENOSPC;
	}
	ret = io_uring_submit(ring);
	if (ret != 4)
		return ret < 0 ? ret : -EIO;
	for (i = 0; i < 4; i++)
		if (!sub[i].seqno)
			return -EINVAL;
	return 0;
}

/* Ring torn down with commands in flight: the jobs still run, and the
 * commands complete (they hold the DRM file: it closes only then). */
TEST_F(udev, async_ring_teardown)
{
	struct drm_metainfer_submit sub[4];
	int64_t st = 1;
	int i;

	ASSERT_EQ(0, submit_hung_four(self, &self->ring, sub));
	io_uring_queue_exit(&self->ring);
	self->ring_ok = false;
	ASSERT_EQ(0, mi_wait(self->fd, self->ctx, sub[0].seqno, 60000, &st));
	EXPECT_EQ(-ETIMEDOUT, st);
	for (i = 1; i < 4; i++) {
		ASSERT_EQ(0, mi_wait(self->fd, self->ctx, sub[i].seqno, 30000, &st));
		EXPECT_EQ(0, st);
	}
	drop_file(self);
	EXPECT_EQ(0, wait_files(self->id, 0, 20000));
}

/* The submitting process exits with its ring open and commands in flight:
 * they complete from io_uring's fallback worker, the jobs run, and the
 * file is released. */
TEST_F(udev, async_process_exit)
{
	struct drm_metainfer_submit *sub;
	int64_t st = 1;
	int i, status;
	pid_t pid;

	sub = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		   -1, 0);
	ASSERT_NE(MAP_FAILED, sub);
	memset(sub, 0, 4 * sizeof(*sub));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		struct io_uring r;

		if (io_uring_queue_init(8, &r, 0))
			_exit(2);
		_exit(submit_hung_four(self, &r, sub) ? 3 : 0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	ASSERT_EQ(0, WEXITSTATUS(status));
	ASSERT_EQ(0, mi_wait(self->fd, self->ctx, sub[0].seqno, 60000, &st));
	EXPECT_EQ(-ETIMEDOUT, st);
	for (i = 1; i < 4; i++) {
		ASSERT_EQ(0, mi_wait(self->fd, self->ctx, sub[i].seqno, 30000, &st));
		EXPECT_EQ(0, st);
	}
	/* the fixture's ring was inherited too: drop it before counting */
	io_uring_queue_exit(&self->ring);
	self->ring_ok = false;
	drop_file(self);
	EXPECT_EQ(0, wait_files(self->id, 0, 20000));
	munmap(sub, 4096);
}

/* The device is removed with a hung job and three queued behind it: every
 * command completes with -ENODEV (not at the job timeout: that would be
 * -ETIMEDOUT), and later submits fail at once. */
TEST_F(udev, async_device_removal)
{
	struct drm_metainfer_submit sub[4];
	int i, seen[4] = { 0 };
	uint64_t tag;

	ASSERT_EQ(0, submit_hung_four(self, &self->ring, sub));
	ASSERT_EQ(0, mi_sim_del(self->id));
	self->deleted = true;
	for (i = 0; i < 4; i++) {
		ASSERT_EQ(-ENODEV, reap_timed(&self->ring, 30000, &tag, NULL));
		ASSERT_GT(4, tag);
		seen[tag]++;
	}
	for (i = 0; i < 4; i++)
		EXPECT_EQ(1, seen[i]);
	fill_submit(self, &sub[0]);
	ASSERT_NE(NULL, queue_async(&self->ring, self->fd, &sub[0], 9));
	ASSERT_EQ(1, io_uring_submit(&self->ring));
	EXPECT_EQ(-ENODEV, reap_timed(&self->ring, 5000, NULL, NULL));
}

TEST_HARNESS_MAIN
