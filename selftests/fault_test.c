// SPDX-License-Identifier: GPL-2.0-only
/*
 * fault_test: recovery from the simulator's injected faults.  Every test
 * gets a fresh sim device (its faults must not leak into other tests):
 * hang -> the job ends with -ETIMEDOUT, the queue recovers, later jobs and
 * other contexts run; DMA error -> -EIO, results untouched; failed reset ->
 * the device is lost, new submits get -ENODEV, removing it is clean.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "mi_test.h"

#define N 256

FIXTURE(fdev) {
	unsigned int id;
	int fd;
	int minor;
	uint32_t ctx;
	uint32_t bos[2];
	uint8_t *src, *dst;
	struct mi_stream s;
};

FIXTURE_VARIANT(fdev) {
	const char *pers;
	unsigned int id;
	uint32_t queue;
};

FIXTURE_VARIANT_ADD(fdev, u55_q0) {
	.pers = "ethos-u55-high",
	.id = 60,
	.queue = 0,
};

FIXTURE_VARIANT_ADD(fdev, dsp_q1) {
	.pers = "dsp-nchw",
	.id = 61,
	.queue = 1,
};

FIXTURE_SETUP(fdev)
{
	int i;

	self->fd = -1;
	self->id = variant->id;
	mi_sim_del(self->id);
	ASSERT_EQ(0, mi_sim_new(self->id, variant->pers, NULL)) {
		TH_LOG("cannot create sim device %u (is metainfer_sim loaded?)", self->id);
	}
	self->minor = mi_sim_minor(self->id);
	self->fd = mi_open_minor(self->minor);
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, mi_ctx_create(self->fd, variant->queue,
				   DRM_METAINFER_PRIORITY_NORMAL, &self->ctx));
	self->src = mi_bo_new(self->fd, 4096, &self->bos[0]);
	self->dst = mi_bo_new(self->fd, 4096, &self->bos[1]);
	ASSERT_NE(NULL, self->src);
	ASSERT_NE(NULL, self->dst);
	for (i = 0; i < N; i++)
		self->src[i] = (uint8_t)(i ^ 0xa5);
	mi_stream_init(&self->s);
	mi_copy_job(&self->s, N, 0, 0);
	mi_stream_finish(&self->s);
}

FIXTURE_TEARDOWN(fdev)
{
	if (self->src)
		munmap(self->src, 4096);
	if (self->dst)
		munmap(self->dst, 4096);
	if (self->fd >= 0)
		close(self->fd);
	mi_stream_free(&self->s);
	/* removing the device, lost or not, must be clean (vmrun checks dmesg) */
	EXPECT_EQ(0, mi_sim_del(self->id));
}

static int submit(FIXTURE_DATA(fdev) *self, uint32_t ctx, uint64_t *seq)
{
	return mi_submit(self->fd, ctx, self->bos, 2, self->s.buf, self->s.len, seq);
}

static int dst_ok(FIXTURE_DATA(fdev) *self)
{
	int i;

	for (i = 0; i < N; i++)
		if (self->dst[i] != (uint8_t)(i ^ 0xa5))
			return 0;
	return 1;
}

TEST_F(fdev, hang_times_out_and_recovers)
{
	struct drm_metainfer_get_counters c0, c1;
	uint64_t seq, lost;
	int64_t st;

	ASSERT_EQ(0, mi_counters(self->fd, 0, &c0));
	ASSERT_EQ(0, mi_sim_knob(self->id, "fail_hang", 1));
	ASSERT_EQ(0, submit(self, self->ctx, &seq));
	ASSERT_EQ(0, mi_wait(self->fd, self->ctx, seq, 30000, &st));
	ASSERT_EQ(-ETIMEDOUT, st);
	EXPECT_EQ(0, self->dst[0]);
	ASSERT_EQ(0, mi_counters(self->fd, 0, &c1));
	EXPECT_EQ(c0.jobs_timed_out + 1, c1.jobs_timed_out);
	ASSERT_EQ(0, mi_get_param(self->fd, DRM_METAINFER_PARAM_DEVICE_LOST, 0, &lost));
	EXPECT_EQ(0, lost);
	/* the queue recovered: the next job runs normally */
	ASSERT_EQ(0, submit(self, self->ctx, &seq));
	ASSERT_EQ(0, mi_wait(self->fd, self->ctx, seq, 30000, &st));
	ASSERT_EQ(0, st);
	EXPECT_TRUE(dst_ok(self));
}

TEST_F(fdev, hang_wait_deadline_returns_etimedout)
{
	uint64_t seq;
	int64_t st = 1;

	ASSERT_EQ(0, mi_sim_knob(self->id, "fail_hang", 1));
	ASSERT_EQ(0, submit(self, self->ctx, &seq));
	/* the deadline passes before the job's timeout: the ioctl times out */
	ASSERT_EQ(-ETIMEDOUT, mi_wait(self->fd, self->ctx, seq, 20, &st));
	ASSERT_EQ(0, mi_wait(self->fd, self->ctx, seq, 30000, &st));
	ASSERT_EQ(-ETIMEDOUT, st);
}

TEST_F(fdev, hang_then_queued_jobs_complete)
{
	uint64_t seq[4];
	int64_t st;
	int i;

	ASSERT_EQ(0, mi_sim_knob(self->id, "fail_hang", 1));
	for (i = 0; i < 4; i++)
		ASSERT_EQ(0, submit(self, self->ctx, &seq[i]));
	ASSERT_EQ(0, mi_wait(self->fd, self->ctx, seq[0], 30000, &st));
	EXPECT_EQ(-ETIMEDOUT, st);
	for (i = 1; i < 4; i++) {
		ASSERT_EQ(0, mi_wait(self->fd, self->ctx, seq[i], 30000, &st));
		EXPECT_EQ(0, st);
	}
	EXPECT_TRUE(dst_ok(self));
}

TEST_F(fdev, hang_other_context_keeps_running)
{
	uint32_t other;
	uint64_t hung, seq[8];
	uint64_t nq;
	int64_t st;
	int i;

	/* the other context on another hardware queue */
	ASSERT_EQ(0, mi_get_param(self->fd, DRM_METAINFER_PARAM_NUM_QUEUES, 0, &nq));
	ASSERT_LE(2, nq);
	ASSERT_EQ(0, mi_ctx_create(self->fd, variant->queue ^ 1,
				   DRM_METAINFER_PRIORITY_NORMAL, &other));
	ASSERT_EQ(0, mi_sim_knob(self->id, "fail_hang", 1));
	ASSERT_EQ(0, submit(self, self->ctx, &hung));
	usleep(10000);
	for (i = 0; i < 8; i++)
		ASSERT_EQ(0, submit(self, other, &seq[i]));
	/* the other queue finishes its jobs while the hung one is pending */
	ASSERT_EQ(0, mi_wait(self->fd, other, seq[7], 30000, &st));
	EXPECT_EQ(0, st);
	for (i = 0; i < 7; i++) {
		ASSERT_EQ(0, mi_wait(self->fd, other, seq[i], 0, &st));
		EXPECT_EQ(0, st);
	}
	ASSERT_EQ(0, mi_wait(self->fd, self->ctx, hung, 30000, &st));
	EXPECT_EQ(-ETIMEDOUT, st);
}

TEST_F(fdev, dma_error_reports_eio)
{
	struct drm_metainfer_get_counters c0, c1;
	uint64_t seq;
	int64_t st;

	ASSERT_EQ(0, mi_counters(self->fd, self->ctx, &c0));
	ASSERT_EQ(0, mi_sim_knob(self->id, "fail_dma", 1));
	ASSERT_EQ(0, submit(self, self->ctx, &seq));
	ASSERT_EQ(0, mi_wait(self->fd, self->ctx, seq, 30000, &st));
	ASSERT_EQ(-EIO, st);
	EXPECT_EQ(0, self->dst[0]);
	ASSERT_EQ(0, mi_counters(self->fd, self->ctx, &c1));
	EXPECT_EQ(c0.jobs_failed + 1, c1.jobs_failed);
	/* and the next job is fine */
	ASSERT_EQ(0, submit(self, self->ctx, &seq));
	ASSERT_EQ(0, mi_wait(self->fd, self->ctx, seq, 30000, &st));
	ASSERT_EQ(0, st);
	EXPECT_TRUE(dst_ok(self));
}

TEST_F(fdev, failed_reset_loses_device)
{
	uint64_t seq, lost = 0;
	int64_t st;
	long long resets_failed = 0;

	ASSERT_EQ(0, mi_sim_knob(self->id, "fail_reset", 1));
	ASSERT_EQ(0, mi_sim_knob(self->id, "fail_hang", 1));
	ASSERT_EQ(0, submit(self, self->ctx, &seq));
	ASSERT_EQ(0, mi_wait(self->fd, self->ctx, seq, 30000, &st));
	EXPECT_TRUE(st == -ETIMEDOUT || st == -ENODEV) {
		TH_LOG("status %lld", (long long)st);
	}
	ASSERT_EQ(0, mi_get_param(self->fd, DRM_METAINFER_PARAM_DEVICE_LOST, 0, &lost));
	EXPECT_EQ(1, lost);
	ASSERT_EQ(0, mi_dbg_status(self->minor, "resets_failed", &resets_failed));
	EXPECT_LE(1, resets_failed);
	ASSERT_EQ(-ENODEV, submit(self, self->ctx, &seq));
}

TEST_F(fdev, lost_device_fails_queued_jobs)
{
	uint64_t seq[3];
	int64_t st;
	int i;

	ASSERT_EQ(0, mi_sim_knob(self->id, "fail_reset", 1));
	ASSERT_EQ(0, mi_sim_knob(self->id, "fail_hang", 1));
	for (i = 0; i < 3; i++)
		ASSERT_EQ(0, submit(self, self->ctx, &seq[i]));
	ASSERT_EQ(0, mi_wait(self->fd, self->ctx, seq[0], 30000, &st));
	EXPECT_TRUE(st == -ETIMEDOUT || st == -ENODEV);
	for (i = 1; i < 3; i++) {
		ASSERT_EQ(0, mi_wait(self->fd, self->ctx, seq[i], 30000, &st));
		EXPECT_NE(0, st);
	}
	EXPECT_EQ(0, self->dst[0]);
}

TEST_F(fdev, lost_device_new_context_submit)
{
	uint64_t seq;
	int64_t st;
	uint32_t c2;
	int ret;

	ASSERT_EQ(0, mi_sim_knob(self->id, "fail_reset", 1));
	ASSERT_EQ(0, mi_sim_knob(self->id, "fail_hang", 1));
	ASSERT_EQ(0, submit(self, self->ctx, &seq));
	ASSERT_EQ(0, mi_wait(self->fd, self->ctx, seq, 30000, &st));
	/* a context created after the loss cannot run anything either */
	ret = mi_ctx_create(self->fd, variant->queue, DRM_METAINFER_PRIORITY_NORMAL, &c2);
	if (ret == 0) {
		ASSERT_EQ(-ENODEV, submit(self, c2, &seq));
	} else {
		ASSERT_EQ(-ENODEV, ret);
	}
}

TEST_F(fdev, remove_device_with_jobs_in_flight)
{
	uint64_t seq[4];
	int64_t st;
	int i;

	ASSERT_EQ(0, mi_sim_knob(self->id, "fail_hang", 1));
	for (i = 0; i < 4; i++)
		ASSERT_EQ(0, submit(self, self->ctx, &seq[i]));
	/* remove the chip under the open file: jobs end, the file gets -ENODEV */
	ASSERT_EQ(0, mi_sim_del(self->id));
	ASSERT_EQ(-ENODEV, submit(self, self->ctx, &seq[0]));
	i = mi_wait(self->fd, self->ctx, seq[3], 1000, &st);
	EXPECT_TRUE(i == -ENODEV || (i == 0 && st != 0)) {
		TH_LOG("wait after removal: %d status %lld", i, (long long)st);
	}
	/* the teardown's del_device then finds nothing: recreate for it */
	ASSERT_EQ(0, mi_sim_new(self->id, variant->pers, NULL));
}

/* SUBMIT of the fixture's copy on @ctx after @in (0: none), signalling @out. */
static int submit_sync(FIXTURE_DATA(fdev) *self, uint32_t ctx, uint32_t in,
		       uint32_t out, uint64_t *seq)
{
	struct drm_metainfer_sync sync = { .handle = in };
	struct drm_metainfer_submit sb;

	memset(&sb, 0, sizeof(sb));
	sb.size = sizeof(sb);
	sb.ctx_id = ctx;
	sb.bo_count = 2;
	sb.bo_handles = (uintptr_t)self->bos;
	sb.cmds = (uintptr_t)self->s.buf;
	sb.cmds_size = self->s.len;
	sb.out_sync = out;
	if (in) {
		sb.in_syncs = (uintptr_t)&sync;
		sb.in_sync_count = 1;
	}
	if (mi_ioctl(self->fd, DRM_IOCTL_METAINFER_SUBMIT, &sb))
		return -errno;
	*seq = sb.seqno;
	return 0;
}

/*
 * A job behind a failed in-fence does not run: A fails (-EIO), B after A
 * and C after B end with -ECANCELED and the output stays untouched (B and
 * C copy the same data, so a run would show).
 */
TEST_F(fdev, failed_in_fence_cancels_jobs_behind_it)
{
	uint32_t sa, sbo, other;
	uint64_t a, b, c;
	int64_t st;

	ASSERT_EQ(0, mi_syncobj_create(self->fd, 0, &sa));
	ASSERT_EQ(0, mi_syncobj_create(self->fd, 0, &sbo));
	ASSERT_EQ(0, mi_ctx_create(self->fd, variant->queue,
				   DRM_METAINFER_PRIORITY_NORMAL, &other));
	ASSERT_EQ(0, mi_sim_knob(self->id, "fail_dma", 1));
	ASSERT_EQ(0, submit_sync(self, self->ctx, 0, sa, &a));
	ASSERT_EQ(0, submit_sync(self, other, sa, sbo, &b));
	ASSERT_EQ(0, submit_sync(self, self->ctx, sbo, 0, &c));
	ASSERT_EQ(0, mi_wait(self->fd, self->ctx, a, 30000, &st));
	ASSERT_EQ(-EIO, st);
	ASSERT_EQ(0, mi_wait(self->fd, other, b, 30000, &st));
	EXPECT_EQ(-ECANCELED, st);
	ASSERT_EQ(0, mi_wait(self->fd, self->ctx, c, 30000, &st));
	EXPECT_EQ(-ECANCELED, st);
	EXPECT_EQ(0, self->dst[0]);
	EXPECT_FALSE(dst_ok(self));
	/* a job behind a successful in-fence runs */
	ASSERT_EQ(0, submit_sync(self, self->ctx, 0, sa, &a));
	ASSERT_EQ(0, submit_sync(self, other, sa, 0, &b));
	ASSERT_EQ(0, mi_wait(self->fd, other, b, 30000, &st));
	EXPECT_EQ(0, st);
	EXPECT_TRUE(dst_ok(self));
}

/*
 * Destroying a context whose job waits for an in-fence that has not
 * signalled (H hangs until the job timeout) cancels that job at once: the
 * destroy does not wait for H, the job never runs, its out-syncobj
 * signals.
 */
TEST_F(fdev, destroy_cancels_job_behind_pending_in_fence)
{
	uint32_t sh, sbo, other;
	uint64_t h, b, tmo_ms;
	int64_t t0, t1, st;

	ASSERT_EQ(0, mi_get_param(self->fd, DRM_METAINFER_PARAM_JOB_TIMEOUT_MS,
				  0, &tmo_ms));
	ASSERT_EQ(0, mi_syncobj_create(self->fd, 0, &sh));
	ASSERT_EQ(0, mi_syncobj_create(self->fd, 0, &sbo));
	/* on the other queue, so only the in-fence holds it back */
	ASSERT_EQ(0, mi_ctx_create(self->fd, variant->queue ^ 1,
				   DRM_METAINFER_PRIORITY_NORMAL, &other));
	ASSERT_EQ(0, mi_sim_knob(self->id, "fail_hang", 1));
	ASSERT_EQ(0, submit_sync(self, self->ctx, 0, sh, &h));
	ASSERT_EQ(0, submit_sync(self, other, sh, sbo, &b));
	t0 = mi_now_ns();
	ASSERT_EQ(0, mi_ctx_destroy(self->fd, other));
	t1 = mi_now_ns();
	/* the destroy did not wait for H */
	EXPECT_GT((int64_t)tmo_ms * 1000000 / 2, t1 - t0) {
		TH_LOG("CTX_DESTROY took %lld ms, job timeout %llu ms",
		       (long long)((t1 - t0) / 1000000),
		       (unsigned long long)tmo_ms);
	}
	EXPECT_EQ(0, mi_syncobj_timeline_wait(self->fd, sbo, 0, 1000, 0));
	ASSERT_EQ(0, mi_wait(self->fd, self->ctx, h, 30000, &st));
	EXPECT_EQ(-ETIMEDOUT, st);
	/* neither H nor the cancelled job wrote anything */
	EXPECT_EQ(0, self->dst[0]);
}

/*
 * The child of the killed_* tests: on its own file, job A runs to the end
 * (A's finished fence becomes its context's signalled last_scheduled).
 * With @hung 0, H hangs (a context on the same queue) and B waits for H
 * through a syncobj.  With @hung > 0, a high-priority context queues
 * @hung hanging jobs on the same queue and B (after A, no in-fence) waits
 * behind them longer than the teardown's drain bound, so the kill path
 * gets it.  Then it reports and waits to be killed.  Returns an exit
 * status on failure only.
 */
static int kill_child(unsigned int minor, uint32_t queue, int hung, int ready)
{
	struct drm_metainfer_submit sb;
	struct drm_metainfer_sync in = { 0 };
	struct mi_stream s;
	uint32_t bos[2], c1, c2, sync;
	uint64_t seq;
	int64_t st;
	int fd, i;

	fd = mi_open_minor(minor);
	if (fd < 0 || mi_ctx_create(fd, queue, DRM_METAINFER_PRIORITY_NORMAL, &c1) ||
	    mi_ctx_create(fd, queue, hung ? DRM_METAINFER_PRIORITY_HIGH :
			  DRM_METAINFER_PRIORITY_NORMAL, &c2) ||
	    !mi_bo_new(fd, 4096, &bos[0]) || !mi_bo_new(fd, 4096, &bos[1]) ||
	    mi_syncobj_create(fd, 0, &sync))
		return 10;
	mi_stream_init(&s);
	mi_copy_job(&s, N, 0, 0);
	mi_stream_finish(&s);
	/* A: finished, so it is the entity's signalled last_scheduled fence */
	if (mi_submit(fd, c1, bos, 2, s.buf, s.len, &seq) ||
	    mi_wait(fd, c1, seq, 30000, &st) || st)
		return 11;
	if (mi_sim_knob(mi_sim_id_of_minor(minor), "fail_hang", hung ? hung : 1))
		return 12;
	memset(&sb, 0, sizeof(sb));
	sb.size = sizeof(sb);
	sb.ctx_id = c2;
	sb.bo_count = 2;
	sb.bo_handles = (uintptr_t)bos;
	sb.cmds = (uintptr_t)s.buf;
	sb.cmds_size = s.len;
	sb.out_sync = sync;
	for (i = 0; i < (hung ? hung : 1); i++)
		if (mi_ioctl(fd, DRM_IOCTL_METAINFER_SUBMIT, &sb))
			return 13;
	sb.ctx_id = c1;
	sb.out_sync = 0;
	if (!hung) {
		in.handle = sync;
		sb.in_sync_count = 1;
		sb.in_syncs = (uintptr_t)&in;
	}
	if (mi_ioctl(fd, DRM_IOCTL_METAINFER_SUBMIT, &sb))
		return 14;
	if (write(ready, "r", 1) != 1)
		return 15;
	for (;;)
		pause();
}

/* Fork kill_child(), kill it once ready, wait for its jobs and fences. */
static void kill_and_count(struct __test_metadata *_metadata,
			   FIXTURE_DATA(fdev) *self,
			   const FIXTURE_VARIANT(fdev) *variant, int hung)
{
	long long before, live = -1, jobs = -1;
	int p[2], status, i;
	pid_t pid;
	char c;

	ASSERT_EQ(0, mi_dbg_status(self->minor, "hw_fences_live", &before)) {
		TH_LOG("no hw_fences_live in the device's debugfs status");
	}
	ASSERT_EQ(0, pipe(p));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		close(p[0]);
		_exit(kill_child(self->minor, variant->queue, hung, p[1]));
	}
	close(p[1]);
	i = read(p[0], &c, 1);
	close(p[0]);
	if (i != 1)
		kill(pid, SIGKILL);
	ASSERT_EQ(1, i) {
		waitpid(pid, &status, 0);
		TH_LOG("child failed: exit %d", WEXITSTATUS(status));
	}
	kill(pid, SIGKILL);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	/* the hung jobs time out, the rest is cleaned up asynchronously */
	for (i = 0; i < 600; i++) {
		if (!mi_dbg_status(self->minor, "jobs_live", &jobs) && !jobs &&
		    !mi_dbg_status(self->minor, "hw_fences_live", &live) &&
		    live == before)
			break;
		usleep(50000);
	}
	EXPECT_EQ(0, jobs);
	EXPECT_EQ(before, live);
}

/*
 * A process killed with a job still queued behind an unfinished in-fence
 * (B behind the hung H): its file's teardown must free every fence.
 */
TEST_F_TIMEOUT(fdev, killed_with_queued_job_frees_fences, 60)
{
	kill_and_count(_metadata, self, variant, 0);
}

/*
 * The same when the queued job cannot reach the queue within the
 * teardown's drain bound and drm_sched's second (five hung high-priority
 * jobs ahead of it, the bound being two job timeouts and a second), so
 * drm_sched's kill path drops it.  Debian 6.1's kill path leaked a
 * reference to the context's last scheduled fence (A's, and through it
 * A's hardware fence) per killed job.
 */
TEST_F_TIMEOUT(fdev, killed_behind_long_queue_frees_fences, 60)
{
	kill_and_count(_metadata, self, variant, 5);
}

TEST_HARNESS_MAIN
