// SPDX-License-Identifier: GPL-2.0-only
/*
 * jobs_test: job semantics beyond a single submit: in-fences order jobs
 * across contexts, destroying a context lets its jobs finish, jobs of one
 * context run in order, every priority runs, the per-process usage shows
 * in fdinfo (drm-usage-stats keys), and hwmon reports the sensors.
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "mi_fixture.h"

/* A job that takes a while: an int16 gemm, then a copy of a marker. */
static void slow_then_copy(struct mi_stream *s, uint32_t marker_off)
{
	struct drm_metainfer_op_gemm g;
	uint32_t sa[2] = { 32, 64 }, sb[2] = { 64, 32 }, so[2] = { 32, 32 };

	memset(&g, 0, sizeof(g));
	g.hdr.op = DRM_METAINFER_OP_GEMM;
	g.a = mi_tensor(0, DRM_METAINFER_DTYPE_INT8, DRM_METAINFER_LAYOUT_PLAIN, 8192, 2, sa);
	g.b = mi_tensor(0, DRM_METAINFER_DTYPE_INT8, DRM_METAINFER_LAYOUT_PLAIN, 16384, 2, sb);
	g.output = mi_tensor(1, DRM_METAINFER_DTYPE_INT32, DRM_METAINFER_LAYOUT_PLAIN, 8192, 2, so);
	mi_stream_add(s, &g, sizeof(g));
	mi_copy_job(s, 1, marker_off, marker_off);
}

TEST_F(dev, in_fence_orders_contexts)
{
	struct drm_metainfer_submit sub;
	struct drm_metainfer_sync in = { 0 };
	struct drm_metainfer_op_copy cp;
	uint32_t bos[2], other, tl;
	uint8_t *a, *b;
	struct mi_stream s1, s2;
	uint64_t seq1, seq2;
	int64_t st;
	uint32_t one[1] = { 1 };

	a = mi_bo_new(self->fd, 65536, &bos[0]);
	b = mi_bo_new(self->fd, 65536, &bos[1]);
	ASSERT_NE(NULL, a);
	ASSERT_NE(NULL, b);
	a[0] = 0x11;
	ASSERT_EQ(0, mi_syncobj_create(self->fd, 0, &tl));
	ASSERT_EQ(0, mi_ctx_create(self->fd, self->queue ^ 1,
				   DRM_METAINFER_PRIORITY_HIGH, &other));
	/* job 1 (ctx): slow gemm, then a[0] -> b[0]; signals tl point 1 */
	mi_stream_init(&s1);
	slow_then_copy(&s1, 0);
	mi_stream_finish(&s1);
	memset(&sub, 0, sizeof(sub));
	sub.size = sizeof(sub);
	sub.ctx_id = self->ctx;
	sub.bo_count = 2;
	sub.bo_handles = (uintptr_t)bos;
	sub.cmds = (uintptr_t)s1.buf;
	sub.cmds_size = s1.len;
	sub.out_sync = tl;
	sub.out_point = 1;
	ASSERT_EQ(0, mi_ioctl(self->fd, DRM_IOCTL_METAINFER_SUBMIT, &sub));
	seq1 = sub.seqno;
	/* job 2 (other ctx, other queue, high priority): b[0] -> b[1], after tl:1 */
	memset(&cp, 0, sizeof(cp));
	cp.hdr.op = DRM_METAINFER_OP_COPY;
	cp.input = mi_tensor(1, DRM_METAINFER_DTYPE_INT8, DRM_METAINFER_LAYOUT_PLAIN, 0, 1, one);
	cp.output = mi_tensor(1, DRM_METAINFER_DTYPE_INT8, DRM_METAINFER_LAYOUT_PLAIN, 1, 1, one);
	mi_stream_init(&s2);
	mi_stream_add(&s2, &cp, sizeof(cp));
	mi_stream_finish(&s2);
	in.handle = tl;
	in.point = 1;
	memset(&sub, 0, sizeof(sub));
	sub.size = sizeof(sub);
	sub.ctx_id = other;
	sub.bo_count = 2;
	sub.bo_handles = (uintptr_t)bos;
	sub.cmds = (uintptr_t)s2.buf;
	sub.cmds_size = s2.len;
	sub.in_syncs = (uintptr_t)&in;
	sub.in_sync_count = 1;
	ASSERT_EQ(0, mi_ioctl(self->fd, DRM_IOCTL_METAINFER_SUBMIT, &sub));
	seq2 = sub.seqno;
	ASSERT_EQ(0, mi_wait(self->fd, other, seq2, 30000, &st));
	ASSERT_EQ(0, st);
	ASSERT_EQ(0, mi_wait(self->fd, self->ctx, seq1, 0, &st)) {
		TH_LOG("job 2 finished before the job it waited for");
	}
	ASSERT_EQ(0, st);
	/* job 2 saw job 1's result */
	EXPECT_EQ(0x11, b[1]);
	mi_stream_free(&s1);
	mi_stream_free(&s2);
}

TEST_F(dev, jobs_of_a_context_run_in_order)
{
	uint32_t bos[2];
	uint8_t *a, *b;
	struct mi_stream s[16];
	uint64_t seq = 0;
	int64_t st;
	int i;

	a = mi_bo_new(self->fd, 4096, &bos[0]);
	b = mi_bo_new(self->fd, 4096, &bos[1]);
	ASSERT_NE(NULL, a);
	ASSERT_NE(NULL, b);
	for (i = 0; i < 16; i++)
		a[i] = (uint8_t)(i + 1);
	/* job i copies a[i] over b[0]: the last one to run wins */
	for (i = 0; i < 16; i++) {
		mi_stream_init(&s[i]);
		mi_copy_job(&s[i], 1, i, 0);
		mi_stream_finish(&s[i]);
		ASSERT_EQ(0, mi_submit(self->fd, self->ctx, bos, 2, s[i].buf,
				       s[i].len, &seq));
	}
	ASSERT_EQ(0, mi_wait(self->fd, self->ctx, seq, 30000, &st));
	ASSERT_EQ(0, st);
	EXPECT_EQ(16, b[0]);
	for (i = 0; i < 16; i++)
		mi_stream_free(&s[i]);
}

TEST_F(dev, destroy_context_with_jobs_queued)
{
	uint32_t bos[2], c2, tl;
	uint8_t *a, *b;
	struct mi_stream s;
	struct drm_metainfer_submit sub;
	int i;

	a = mi_bo_new(self->fd, 65536, &bos[0]);
	b = mi_bo_new(self->fd, 65536, &bos[1]);
	ASSERT_NE(NULL, a);
	ASSERT_NE(NULL, b);
	a[0] = 0x77;
	ASSERT_EQ(0, mi_syncobj_create(self->fd, 0, &tl));
	ASSERT_EQ(0, mi_ctx_create(self->fd, self->queue, DRM_METAINFER_PRIORITY_LOW, &c2));
	mi_stream_init(&s);
	slow_then_copy(&s, 0);
	mi_stream_finish(&s);
	for (i = 0; i < 4; i++) {
		memset(&sub, 0, sizeof(sub));
		sub.size = sizeof(sub);
		sub.ctx_id = c2;
		sub.bo_count = 2;
		sub.bo_handles = (uintptr_t)bos;
		sub.cmds = (uintptr_t)s.buf;
		sub.cmds_size = s.len;
		sub.out_sync = tl;
		sub.out_point = i + 1;
		ASSERT_EQ(0, mi_ioctl(self->fd, DRM_IOCTL_METAINFER_SUBMIT, &sub));
	}
	ASSERT_EQ(0, mi_ctx_destroy(self->fd, c2));
	/* "jobs already submitted still run to completion" */
	ASSERT_EQ(0, mi_syncobj_timeline_wait(self->fd, tl, 4, 30000, 0));
	EXPECT_EQ(0x77, b[0]);
	mi_stream_free(&s);
}

TEST_F(dev, every_priority_runs)
{
	uint32_t bos[2], c[3], p;
	uint8_t *a, *b;
	struct mi_stream s;
	uint64_t seq[3];
	int64_t st;

	a = mi_bo_new(self->fd, 4096, &bos[0]);
	b = mi_bo_new(self->fd, 4096, &bos[1]);
	ASSERT_NE(NULL, a);
	ASSERT_NE(NULL, b);
	mi_stream_init(&s);
	mi_copy_job(&s, 64, 0, 0);
	mi_stream_finish(&s);
	for (p = 0; p < 3; p++) {
		ASSERT_EQ(0, mi_ctx_create(self->fd, self->queue, p, &c[p]));
		ASSERT_EQ(0, mi_submit(self->fd, c[p], bos, 2, s.buf, s.len, &seq[p]));
	}
	for (p = 0; p < 3; p++) {
		ASSERT_EQ(0, mi_wait(self->fd, c[p], seq[p], 30000, &st));
		EXPECT_EQ(0, st);
	}
	mi_stream_free(&s);
}

TEST_F(dev, counters_model_work)
{
	struct drm_metainfer_get_counters c0, c1;
	uint32_t bos[2];
	struct mi_stream s;
	uint64_t seq;
	int64_t st;

	ASSERT_NE(NULL, mi_bo_new(self->fd, 65536, &bos[0]));
	ASSERT_NE(NULL, mi_bo_new(self->fd, 65536, &bos[1]));
	mi_stream_init(&s);
	slow_then_copy(&s, 0);
	mi_stream_finish(&s);
	ASSERT_EQ(0, mi_counters(self->fd, self->ctx, &c0));
	ASSERT_EQ(0, mi_submit(self->fd, self->ctx, bos, 2, s.buf, s.len, &seq));
	ASSERT_EQ(0, mi_wait(self->fd, self->ctx, seq, 30000, &st));
	ASSERT_EQ(0, st);
	ASSERT_EQ(0, mi_counters(self->fd, self->ctx, &c1));
	/* the gemm is 32 x 32 x 64 MACs */
	EXPECT_EQ(c0.macs + 32 * 32 * 64, c1.macs);
	EXPECT_LT(c0.busy_ns, c1.busy_ns);
	EXPECT_LE(c0.dma_bytes_in + 32 * 64 * 2, c1.dma_bytes_in);
	EXPECT_LE(c0.dma_bytes_out + 32 * 32 * 4, c1.dma_bytes_out);
	mi_stream_free(&s);
}

/* fdinfo: the generic DRM usage keys (Documentation/gpu/drm-usage-stats.rst). */
TEST_F(dev, fdinfo_usage_keys)
{
	char path[64], buf[4096];
	uint32_t bos[2];
	struct mi_stream s;
	uint64_t seq;
	int64_t st;
	long long busy = -1;

	ASSERT_NE(NULL, mi_bo_new(self->fd, 65536, &bos[0]));
	ASSERT_NE(NULL, mi_bo_new(self->fd, 65536, &bos[1]));
	mi_stream_init(&s);
	slow_then_copy(&s, 0);
	mi_stream_finish(&s);
	ASSERT_EQ(0, mi_submit(self->fd, self->ctx, bos, 2, s.buf, s.len, &seq));
	ASSERT_EQ(0, mi_wait(self->fd, self->ctx, seq, 30000, &st));
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", self->fd);
	ASSERT_LT(0, mi_read_file(path, buf, sizeof(buf)));
	EXPECT_NE(NULL, strstr(buf, "drm-driver:\tmetainfer")) {
		TH_LOG("fdinfo:\n%s", buf);
	}
	EXPECT_NE(NULL, strstr(buf, "drm-client-id:"));
	EXPECT_NE(NULL, strstr(buf, "drm-memory-"));
	snprintf(path, sizeof(path), "drm-engine-q%u", self->queue);
	{
		char fpath[64];

		snprintf(fpath, sizeof(fpath), "/proc/self/fdinfo/%d", self->fd);
		ASSERT_EQ(0, mi_read_key(fpath, path, &busy)) {
			TH_LOG("no %s in fdinfo:\n%s", path, buf);
		}
	}
	EXPECT_LT(0, busy);
	mi_stream_free(&s);
}

TEST_F(dev, hwmon_reports_temperature)
{
	char path[600], buf[64];
	struct dirent *de;
	int sim = mi_sim_id_of_minor(self->minor), found = 0;
	DIR *d;

	ASSERT_LE(0, sim);
	snprintf(path, sizeof(path), "/sys/bus/platform/devices/metainfer_sim.%d/hwmon", sim);
	d = opendir(path);
	ASSERT_NE(NULL, d);
	while ((de = readdir(d))) {
		if (strncmp(de->d_name, "hwmon", 5))
			continue;
		snprintf(path, sizeof(path),
			 "/sys/bus/platform/devices/metainfer_sim.%d/hwmon/%s/temp1_input",
			 sim, de->d_name);
		ASSERT_LT(0, mi_read_file(path, buf, sizeof(buf)));
		/* millidegrees, around the personality's 25 C ambient */
		EXPECT_LT(0, atol(buf));
		EXPECT_GT(200000, atol(buf));
		found = 1;
	}
	closedir(d);
	EXPECT_TRUE(found);
}

TEST_HARNESS_MAIN
