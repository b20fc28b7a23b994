// SPDX-License-Identifier: GPL-2.0-only
/*
 * proc_test: process lifetime.  A process killed with jobs in flight, or
 * one that closes its file or exits with jobs queued, leaks no buffer
 * (the core's debugfs bo_count returns to where it was), no file, context
 * or job, and another process using the device at the same time is
 * unaffected.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "mi_fixture.h"

#define BIG (1 << 20)

/* Wait up to ~10 s for a debugfs status value to come back to @want. */
static long long settle(int minor, const char *key, long long want)
{
	long long v = -1;
	int i;

	for (i = 0; i < 200; i++) {
		if (!strcmp(key, "bo_count"))
			v = mi_dbg_bo_count(minor);
		else if (mi_dbg_status(minor, key, &v))
			v = -1;
		if (v == want)
			break;
		usleep(50000);
	}
	return v;
}

/*
 * A process that keeps the device busy: big buffers, a gemm + copy job
 * submitted @njobs times; writes one byte to @ready when all are queued,
 * then sleeps (or exits/closes, per @how).
 */
enum busy_end { BUSY_SLEEP, BUSY_EXIT, BUSY_CLOSE_THEN_SLEEP };

static void busy_child(int minor, uint32_t queue, int njobs, int ready,
		       enum busy_end how)
{
	struct drm_metainfer_op_gemm g;
	uint32_t bos[3], sa[2] = { 48, 64 }, sb[2] = { 64, 48 }, so[2] = { 48, 48 };
	struct mi_stream s;
	uint32_t ctx;
	int fd, i;

	fd = mi_open_minor(minor);
	if (fd < 0 || mi_ctx_create(fd, queue, DRM_METAINFER_PRIORITY_NORMAL, &ctx))
		_exit(10);
	for (i = 0; i < 3; i++)
		if (mi_bo_create(fd, BIG, &bos[i]))
			_exit(11);
	memset(&g, 0, sizeof(g));
	g.hdr.op = DRM_METAINFER_OP_GEMM;
	g.a = mi_tensor(0, DRM_METAINFER_DTYPE_INT8, DRM_METAINFER_LAYOUT_PLAIN, 0, 2, sa);
	g.b = mi_tensor(1, DRM_METAINFER_DTYPE_INT8, DRM_METAINFER_LAYOUT_PLAIN, 0, 2, sb);
	g.output = mi_tensor(2, DRM_METAINFER_DTYPE_INT32, DRM_METAINFER_LAYOUT_PLAIN, 0, 2, so);
	mi_stream_init(&s);
	mi_stream_add(&s, &g, sizeof(g));
	mi_copy_job(&s, 4096, 0, 65536);
	mi_stream_finish(&s);
	for (i = 0; i < njobs; i++)
		if (mi_submit(fd, ctx, bos, 3, s.buf, s.len, NULL))
			_exit(12);
	if (how == BUSY_CLOSE_THEN_SLEEP)
		close(fd);
	if (write(ready, "r", 1) != 1)
		_exit(13);
	if (how == BUSY_EXIT)
		_exit(0);
	for (;;)
		pause();
}

/* A process doing checked jobs: exit 0 if every job succeeded. */
static void worker_child(int minor, uint32_t queue, int njobs)
{
	uint32_t bos[2], ctx;
	struct mi_stream s;
	uint8_t *src, *dst;
	uint64_t seq;
	int64_t st;
	int fd, i, k;

	fd = mi_open_minor(minor);
	if (fd < 0 || mi_ctx_create(fd, queue, DRM_METAINFER_PRIORITY_NORMAL, &ctx))
		_exit(20);
	src = mi_bo_new(fd, 4096, &bos[0]);
	dst = mi_bo_new(fd, 4096, &bos[1]);
	if (!src || !dst)
		_exit(21);
	mi_stream_init(&s);
	mi_copy_job(&s, 512, 0, 0);
	mi_stream_finish(&s);
	for (i = 0; i < njobs; i++) {
		memset(src, i + 1, 512);
		if (mi_submit(fd, ctx, bos, 2, s.buf, s.len, &seq))
			_exit(22);
		if (mi_wait(fd, ctx, seq, 30000, &st) || st)
			_exit(23);
		for (k = 0; k < 512; k++)
			if (dst[k] != (uint8_t)(i + 1))
				_exit(24);
	}
	_exit(0);
}

static int wait_child(pid_t pid)
{
	int status;

	if (waitpid(pid, &status, 0) != pid)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Run a busy child that ends per @how, with a checked worker alongside. */
static void lifetime_case(struct __test_metadata *_metadata, int minor,
			  uint32_t queue, enum busy_end how, int kill_it)
{
	long long bos0, files0, ctxs0, live = 0;
	int p[2];
	pid_t busy, worker;
	char c;

	bos0 = settle(minor, "bo_count", mi_dbg_bo_count(minor));
	ASSERT_LE(0, bos0);
	ASSERT_EQ(0, mi_dbg_status(minor, "files", &files0));
	ASSERT_EQ(0, mi_dbg_status(minor, "contexts", &ctxs0));
	ASSERT_EQ(0, pipe(p));
	busy = fork();
	ASSERT_LE(0, busy);
	if (busy == 0)
		busy_child(minor, queue, 40, p[1], how);
	worker = fork();
	ASSERT_LE(0, worker);
	if (worker == 0)
		worker_child(minor, queue ^ 1, 20);
	ASSERT_EQ(1, read(p[0], &c, 1));
	if (kill_it) {
		mi_dbg_status(minor, "jobs_live", &live);
		TH_LOG("killing the busy process with %lld jobs live", live);
		ASSERT_EQ(0, kill(busy, SIGKILL));
		ASSERT_EQ(128 + SIGKILL, wait_child(busy));
	} else if (how == BUSY_EXIT) {
		ASSERT_EQ(0, wait_child(busy));
	}
	/* the other process is unaffected */
	ASSERT_EQ(0, wait_child(worker));
	if (!kill_it && how != BUSY_EXIT) {
		ASSERT_EQ(0, kill(busy, SIGKILL));
		wait_child(busy);
	}
	/* nothing of the busy process is left (the fixture's own file remains) */
	EXPECT_EQ(bos0, settle(minor, "bo_count", bos0));
	EXPECT_EQ(files0, settle(minor, "files", files0));
	EXPECT_EQ(ctxs0, settle(minor, "contexts", ctxs0));
	EXPECT_EQ(0, settle(minor, "jobs_live", 0));
	close(p[0]);
	close(p[1]);
}

TEST_F_TIMEOUT(dev, killed_mid_job_leaks_nothing, 120)
{
	lifetime_case(_metadata, self->minor, self->queue, BUSY_SLEEP, 1);
}

TEST_F_TIMEOUT(dev, exit_with_jobs_queued_leaks_nothing, 120)
{
	lifetime_case(_metadata, self->minor, self->queue, BUSY_EXIT, 0);
}

TEST_F_TIMEOUT(dev, close_with_jobs_queued_leaks_nothing, 120)
{
	lifetime_case(_metadata, self->minor, self->queue, BUSY_CLOSE_THEN_SLEEP, 0);
}

TEST_F(dev, device_works_after_killed_process)
{
	uint32_t bos[2];
	struct mi_stream s;
	uint8_t *src, *dst;
	uint64_t seq;
	int64_t st;
	int p[2];
	pid_t busy;
	char c;

	ASSERT_EQ(0, pipe(p));
	busy = fork();
	ASSERT_LE(0, busy);
	if (busy == 0)
		busy_child(self->minor, self->queue, 20, p[1], BUSY_SLEEP);
	ASSERT_EQ(1, read(p[0], &c, 1));
	ASSERT_EQ(0, kill(busy, SIGKILL));
	ASSERT_EQ(128 + SIGKILL, wait_child(busy));
	/* same queue, right after: runs normally */
	src = mi_bo_new(self->fd, 4096, &bos[0]);
	dst = mi_bo_new(self->fd, 4096, &bos[1]);
	ASSERT_NE(NULL, src);
	ASSERT_NE(NULL, dst);
	memset(src, 0x3c, 100);
	mi_stream_init(&s);
	mi_copy_job(&s, 100, 0, 0);
	mi_stream_finish(&s);
	ASSERT_EQ(0, mi_submit(self->fd, self->ctx, bos, 2, s.buf, s.len, &seq));
	ASSERT_EQ(0, mi_wait(self->fd, self->ctx, seq, 30000, &st));
	ASSERT_EQ(0, st);
	EXPECT_EQ(0x3c, dst[99]);
	mi_stream_free(&s);
}

TEST_F(dev, bo_count_tracks_create_and_close)
{
	long long n0, n1;
	uint32_t h[5];
	int i;

	n0 = mi_dbg_bo_count(self->minor);
	ASSERT_LE(0, n0);
	for (i = 0; i < 5; i++)
		ASSERT_EQ(0, mi_bo_create(self->fd, 4096, &h[i]));
	n1 = mi_dbg_bo_count(self->minor);
	EXPECT_EQ(n0 + 5, n1);
	for (i = 0; i < 5; i++)
		ASSERT_EQ(0, mi_bo_close(self->fd, h[i]));
	EXPECT_EQ(n0, settle(self->minor, "bo_count", n0));
}

TEST_HARNESS_MAIN
