// SPDX-License-Identifier: GPL-2.0-only
/*
 * stress_test: 10,000 jobs from 4 processes (both sim devices, both hardware
 * queues of each), pipelined, with nothing lost: every job finishes with
 * status 0, its result is in place, its timeline point is signalled, and
 * the kernel counts each job exactly once (per-context submitted ==
 * completed == 2500, device counters move by exactly the jobs run).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "mi_test.h"

#define PROCS 4
#define JOBS_PER_PROC 2500
#define WINDOW 128
#define SLOT 8

static const char *const pers[2] = { "ethos-u55-high", "dsp-nchw" };

/* One process: returns 0 or a distinct failure code. */
static int stress_proc(int minor, uint32_t queue, uint32_t tag)
{
	size_t bytes = (size_t)JOBS_PER_PROC * SLOT;
	struct drm_metainfer_get_counters c;
	struct drm_metainfer_submit sub;
	struct mi_stream *st;
	uint32_t bos[2], ctx, tl;
	uint64_t *src, *dst, seq, first = 0, point = 0;
	int64_t status;
	int fd, i;

	fd = mi_open_minor(minor);
	if (fd < 0 || mi_ctx_create(fd, queue, DRM_METAINFER_PRIORITY_NORMAL, &ctx))
		return 2;
	src = mi_bo_new(fd, bytes, &bos[0]);
	dst = mi_bo_new(fd, bytes, &bos[1]);
	if (!src || !dst || mi_syncobj_create(fd, 0, &tl))
		return 3;
	for (i = 0; i < JOBS_PER_PROC; i++)
		src[i] = ((uint64_t)tag << 32) | (uint32_t)(i * 2654435761u);
	/* job i copies slot i: a lost or repeated job shows in the data */
	st = calloc(JOBS_PER_PROC, sizeof(*st));
	if (!st)
		return 4;
	for (i = 0; i < JOBS_PER_PROC; i++) {
		mi_stream_init(&st[i]);
		mi_copy_job(&st[i], SLOT, (uint64_t)i * SLOT, (uint64_t)i * SLOT);
		mi_stream_finish(&st[i]);
	}
	for (i = 0; i < JOBS_PER_PROC; i++) {
		if (i >= WINDOW) {
			int ret = mi_wait(fd, ctx, first + i - WINDOW, 60000, &status);

			if (ret || status) {
				fprintf(stderr, "# tag %#x: job %d: wait %d status %lld\n",
					tag, i - WINDOW, ret, (long long)status);
				return 5;
			}
		}
		memset(&sub, 0, sizeof(sub));
		sub.size = sizeof(sub);
		sub.ctx_id = ctx;
		sub.bo_count = 2;
		sub.bo_handles = (uintptr_t)bos;
		sub.cmds = (uintptr_t)st[i].buf;
		sub.cmds_size = st[i].len;
		sub.out_sync = tl;
		sub.out_point = i + 1;
		if (mi_ioctl(fd, DRM_IOCTL_METAINFER_SUBMIT, &sub))
			return 6;
		seq = sub.seqno;
		if (!first)
			first = seq;
		if (seq != first + i)
			return 7;
	}
	for (i = 0; i < JOBS_PER_PROC; i++) {
		int ret = mi_wait(fd, ctx, first + i, 60000, &status);

		if (ret || status) {
			fprintf(stderr, "# tag %#x: job %d: wait %d status %lld\n",
				tag, i, ret, (long long)status);
			return 8;
		}
	}
	if (mi_syncobj_timeline_wait(fd, tl, JOBS_PER_PROC, 60000, 0) ||
	    mi_syncobj_query(fd, tl, &point) || point != JOBS_PER_PROC)
		return 9;
	for (i = 0; i < JOBS_PER_PROC; i++)
		if (dst[i] != src[i])
			return 10;
	if (mi_counters(fd, ctx, &c))
		return 11;
	if (c.jobs_submitted != JOBS_PER_PROC || c.jobs_completed != JOBS_PER_PROC ||
	    c.jobs_failed || c.jobs_timed_out || c.queue_depth) {
		fprintf(stderr, "# ctx counters: submitted %llu completed %llu failed %llu timed out %llu depth %llu\n",
			(unsigned long long)c.jobs_submitted,
			(unsigned long long)c.jobs_completed,
			(unsigned long long)c.jobs_failed,
			(unsigned long long)c.jobs_timed_out,
			(unsigned long long)c.queue_depth);
		return 12;
	}
	for (i = 0; i < JOBS_PER_PROC; i++)
		mi_stream_free(&st[i]);
	free(st);
	close(fd);
	return 0;
}

/* (the 6.1 harness has a timeout only for fixture tests) */
FIXTURE(stress) {
	int unused;
};

FIXTURE_SETUP(stress)
{
}

FIXTURE_TEARDOWN(stress)
{
}

TEST_F_TIMEOUT(stress, ten_thousand_jobs_four_processes, 900)
{
	struct drm_metainfer_get_counters before[2], after[2];
	int minor[2], fds[2], d, p, status;
	pid_t pid[PROCS];
	int64_t t0;

	for (d = 0; d < 2; d++) {
		fds[d] = mi_open_named(pers[d], &minor[d]);
		ASSERT_LE(0, fds[d]) {
			TH_LOG("no '%s' device (selftests/run-tests creates it)", pers[d]);
		}
		ASSERT_EQ(0, mi_counters(fds[d], 0, &before[d]));
	}
	t0 = mi_now_ns();
	for (p = 0; p < PROCS; p++) {
		pid[p] = fork();
		ASSERT_LE(0, pid[p]);
		if (pid[p] == 0)
			_exit(stress_proc(minor[p / 2], p % 2, 0x100 + p));
	}
	for (p = 0; p < PROCS; p++) {
		ASSERT_EQ(pid[p], waitpid(pid[p], &status, 0));
		EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) {
			TH_LOG("process %d (device %s, queue %d) failed with code %d",
			       p, pers[p / 2], p % 2,
			       WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status));
		}
	}
	TH_LOG("%d jobs from %d processes in %.1f s", PROCS * JOBS_PER_PROC,
	       PROCS, (mi_now_ns() - t0) / 1e9);
	for (d = 0; d < 2; d++) {
		ASSERT_EQ(0, mi_counters(fds[d], 0, &after[d]));
		/* exactly the jobs of this test: each completed once */
		EXPECT_EQ(2 * JOBS_PER_PROC,
			  after[d].jobs_submitted - before[d].jobs_submitted);
		EXPECT_EQ(2 * JOBS_PER_PROC,
			  after[d].jobs_completed - before[d].jobs_completed);
		EXPECT_EQ(before[d].jobs_failed, after[d].jobs_failed);
		close(fds[d]);
	}
}

TEST_HARNESS_MAIN
