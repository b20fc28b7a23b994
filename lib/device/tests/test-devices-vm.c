// SPDX-License-Identifier: GPL-2.0-only
/*
 * check-devices (inside the test VM, metainfer.ko + metainfer_sim.ko):
 * two sim chips of different personalities are found by the scan with
 * their capabilities; a gemm + copy job runs on each through io_uring and
 * through the ioctls, bit for bit equal to mi_ref_run; a buffer npu A's
 * job writes is imported by npu B (PRIME, no copy: B's job reads it, the
 * CPU reads B's mapping) and B's job waits for A's out-fence; fail_dma,
 * fail_hang and del_device give -EIO, -ETIMEDOUT, -ENODEV and alive() 0,
 * never a hang; 4 threads share one ring; `metainfer devices --json`
 * lists the chips.
 *
 * With --bench: CPU ns per job and jobs/s of a tiny job, ioctl SUBMIT +
 * WAIT one by one vs io_uring batches at queue depth 1, 8 and 64.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "device/device.h"
#include "device/mi_ref.h"
#include "mi_test.h"
#include "tests/check.h"

#define ID_A 80
#define ID_B 81
#define BO_SIZE 4096

static struct mi_dev *dev_of_sim(unsigned int id)
{
	char node[64];

	snprintf(node, sizeof(node), "/dev/dri/renderD%d", mi_sim_minor(id));
	for (int i = 0; i < mi_dev_count(); i++)
		if (!strcmp(mi_dev_get(i)->node, node))
			return mi_dev_get(i);
	return NULL;
}

/* gemm a[4,8] (bo0 @0) x b[8,4] (bo0 @64) -> int32 [4,4] (bo1 @0), then a
 * copy of 32 int8 from bo0 @0 to bo1 @256. */
static void build_stream(struct mi_stream *s)
{
	struct drm_metainfer_op_gemm g;
	uint32_t sa[2] = { 4, 8 }, sb[2] = { 8, 4 }, so[2] = { 4, 4 };

	mi_stream_init(s);
	memset(&g, 0, sizeof(g));
	g.hdr.op = DRM_METAINFER_OP_GEMM;
	g.a_zp = 3;
	g.b_zp = -2;
	g.a = mi_tensor(0, DRM_METAINFER_DTYPE_INT8, DRM_METAINFER_LAYOUT_PLAIN,
			0, 2, sa);
	g.b = mi_tensor(0, DRM_METAINFER_DTYPE_INT8, DRM_METAINFER_LAYOUT_PLAIN,
			64, 2, sb);
	g.output = mi_tensor(1, DRM_METAINFER_DTYPE_INT32,
			     DRM_METAINFER_LAYOUT_PLAIN, 0, 2, so);
	mi_stream_add(s, &g, sizeof(g));
	mi_copy_job(s, 32, 0, 256);
	mi_stream_finish(s);
}

static uint64_t last_busy_ns;

static int run_one(struct mi_dev *d, struct mi_dev_bo **bos, const void *cmds,
		   size_t len, uint32_t flags, int *status)
{
	struct mi_dev_job job = { .cmds = cmds, .cmds_size = len, .bos = bos,
				  .nbos = 2, .flags = flags };
	struct mi_dev_job *jp = &job;
	int ret = d->ops->submit(d, &jp, 1);

	if (!ret)
		ret = d->ops->wait(d, &job, -1);
	*status = job.status;
	last_busy_ns = job.busy_ns;
	d->ops->job_release(d, &job);
	return ret;
}

/* The stream on d via io_uring and via ioctls vs mi_ref_run. */
static void check_compute(struct mi_dev *d, struct mi_stream *s)
{
	struct mi_dev_bo *bos[2];
	uint8_t in[BO_SIZE], ref[BO_SIZE];
	struct mi_ref_buf rb[2] = { { in, BO_SIZE }, { ref, BO_SIZE } };
	uint64_t st = 0x1234 + d->index;
	int status;

	CHECK(!mi_dev_bo_alloc(d, BO_SIZE, &bos[0]));
	CHECK(!mi_dev_bo_alloc(d, BO_SIZE, &bos[1]));
	for (int i = 0; i < 96; i++)
		in[i] = (uint8_t)mi_rand_range(&st, -128, 127);
	memset(ref, 0x5a, sizeof(ref));
	memcpy(bos[0]->map, in, 96);
	CHECK(!mi_ref_run(s->buf, s->len, rb, 2));
	for (int path = 0; path < 2; path++) {
		memset(bos[1]->map, 0x5a, BO_SIZE);
		CHECK(!run_one(d, bos, s->buf, s->len,
			       path ? MI_DEV_JOB_NO_URING : 0, &status));
		CHECK(status == 0);
		CHECK(!memcmp(bos[1]->map, ref, BO_SIZE));
		/* device time comes with the async CQE (CQE32) only */
		CHECK(path ? last_busy_ns == 0 : last_busy_ns > 0);
		printf("%s: gemm+copy via %s: %s, busy %llu ns\n", d->name,
		       path ? "ioctl" : "io_uring",
		       !memcmp(bos[1]->map, ref, BO_SIZE) ? "bit-exact" : "DIFFERENT",
		       (unsigned long long)last_busy_ns);
	}
	mi_dev_bo_free(bos[0]);
	mi_dev_bo_free(bos[1]);
}

/* A writes x (copy bo0 -> shared), B reads the shared buffer after A's
 * fence (copy shared -> B's own). */
static void check_prime_fence(struct mi_dev *a, struct mi_dev *b)
{
	struct mi_dev_bo *asrc, *shared, *bshared, *bdst;
	struct mi_dev_bo *abos[2], *bbos[2];
	struct mi_stream s;
	struct mi_dev_job ja = { 0 }, jb = { 0 }, *jp;
	int fence = -1;

	CHECK(!mi_dev_bo_alloc(a, BO_SIZE, &asrc));
	CHECK(!mi_dev_bo_alloc(a, BO_SIZE, &shared));
	CHECK(!a->ops->bo_export(shared));
	CHECK(!b->ops->bo_import(b, shared->prime_fd, BO_SIZE, &bshared));
	CHECK(!mi_dev_bo_alloc(b, BO_SIZE, &bdst));
	for (int i = 0; i < 256; i++)
		((uint8_t *)asrc->map)[i] = (uint8_t)(i * 13 + 1);
	mi_stream_init(&s);
	mi_copy_job(&s, 256, 0, 0);
	mi_stream_finish(&s);
	abos[0] = asrc;
	abos[1] = shared;
	bbos[0] = bshared;
	bbos[1] = bdst;
	ja = (struct mi_dev_job){ .cmds = s.buf, .cmds_size = s.len,
				  .bos = abos, .nbos = 2 };
	jp = &ja;
	CHECK(!a->ops->submit(a, &jp, 1));
	CHECK(!a->ops->job_fence(a, &ja, &fence));
	jb = (struct mi_dev_job){ .cmds = s.buf, .cmds_size = s.len,
				  .bos = bbos, .nbos = 2, .in_fences = &fence,
				  .nin_fences = 1 };
	jp = &jb;
	CHECK(!b->ops->submit(b, &jp, 1));
	/* wait for B first: it cannot finish before A */
	CHECK(!b->ops->wait(b, &jb, -1) && jb.status == 0);
	CHECK(!a->ops->wait(a, &ja, -1) && ja.status == 0);
	CHECK(!memcmp(bdst->map, asrc->map, 256));
	/* the CPU sees A's result through B's mapping of the same pages */
	CHECK(!memcmp(bshared->map, asrc->map, 256));
	CHECK(bshared->handle != 0 && bshared->map != shared->map);
	{
		struct mi_dev *cpu = mi_dev_get(0);
		struct mi_dev_bo *cbo = NULL;

		CHECK(!cpu->ops->bo_import(cpu, shared->prime_fd, BO_SIZE, &cbo));
		CHECK(cbo && !memcmp(cbo->map, asrc->map, 256));
		mi_dev_bo_free(cbo);
	}
	printf("prime %s -> %s, fence chained: %s\n", a->name, b->name,
	       !memcmp(bdst->map, asrc->map, 256) ? "ok" : "WRONG");
	a->ops->job_release(a, &ja);
	b->ops->job_release(b, &jb);
	close(fence);
	mi_stream_free(&s);
	mi_dev_bo_free(bshared);
	mi_dev_bo_free(bdst);
	mi_dev_bo_free(shared);
	mi_dev_bo_free(asrc);
}

static void check_fault(struct mi_dev *d, unsigned int id, const char *knob,
			int want, struct mi_stream *s)
{
	struct mi_dev_bo *bos[2];
	int status = 1;
	int64_t t0 = mi_now_ns();

	CHECK(!mi_dev_bo_alloc(d, BO_SIZE, &bos[0]));
	CHECK(!mi_dev_bo_alloc(d, BO_SIZE, &bos[1]));
	for (int path = 0; path < 2; path++) {
		CHECK(!mi_sim_knob(id, knob, 1));
		CHECK(!run_one(d, bos, s->buf, s->len,
			       path ? MI_DEV_JOB_NO_URING : 0, &status));
		CHECK(status == want);
		printf("%s %s via %s: status %d (%s) after %.2f s\n", d->name,
		       knob, path ? "ioctl" : "io_uring", status,
		       strerror(-status), (mi_now_ns() - t0) / 1e9);
	}
	CHECK(d->ops->alive(d) == 1);
	mi_dev_bo_free(bos[0]);
	mi_dev_bo_free(bos[1]);
}

/* B waits for a job of A that fails: B's wait returns, bounded. */
static void check_failed_fence(struct mi_dev *a, unsigned int id_a,
			       struct mi_dev *b, struct mi_stream *s)
{
	struct mi_dev_bo *abos[2], *bbos[2];
	struct mi_dev_job ja, jb, *jp;
	int fence = -1;
	int64_t t0 = mi_now_ns();

	for (int i = 0; i < 2; i++) {
		CHECK(!mi_dev_bo_alloc(a, BO_SIZE, &abos[i]));
		CHECK(!mi_dev_bo_alloc(b, BO_SIZE, &bbos[i]));
	}
	CHECK(!mi_sim_knob(id_a, "fail_dma", 1));
	ja = (struct mi_dev_job){ .cmds = s->buf, .cmds_size = s->len,
				  .bos = abos, .nbos = 2 };
	jp = &ja;
	CHECK(!a->ops->submit(a, &jp, 1));
	CHECK(!a->ops->job_fence(a, &ja, &fence));
	jb = (struct mi_dev_job){ .cmds = s->buf, .cmds_size = s->len,
				  .bos = bbos, .nbos = 2, .in_fences = &fence,
				  .nin_fences = 1 };
	jp = &jb;
	CHECK(!b->ops->submit(b, &jp, 1));
	CHECK(!b->ops->wait(b, &jb, -1));
	CHECK(!a->ops->wait(a, &ja, -1) && ja.status == -EIO);
	printf("%s waits for a failed job of %s: status %d after %.2f s\n",
	       b->name, a->name, jb.status, (mi_now_ns() - t0) / 1e9);
	a->ops->job_release(a, &ja);
	b->ops->job_release(b, &jb);
	close(fence);
	for (int i = 0; i < 2; i++) {
		mi_dev_bo_free(abos[i]);
		mi_dev_bo_free(bbos[i]);
	}
}

struct thr {
	struct mi_dev *d;
	int seed, bad;
};

/* 100 jobs of batches of 4 from each of 4 threads on one ring: every
 * wait returns its own job, with the right output. */
static void *thr_main(void *arg)
{
	struct thr *t = arg;
	struct mi_dev_bo *src, *dst[4];
	struct mi_stream s;

	if (mi_dev_bo_alloc(t->d, BO_SIZE, &src)) {
		t->bad++;
		return NULL;
	}
	for (int i = 0; i < 4; i++)
		if (mi_dev_bo_alloc(t->d, BO_SIZE, &dst[i]))
			t->bad++;
	mi_stream_init(&s);
	mi_copy_job(&s, 64, 0, 0);
	mi_stream_finish(&s);
	for (int r = 0; r < 25; r++) {
		struct mi_dev_job jobs[4], *jp[4];
		struct mi_dev_bo *bos[4][2];

		memset(src->map, t->seed * 31 + r, 64);
		for (int i = 0; i < 4; i++) {
			memset(dst[i]->map, 0, 64);
			bos[i][0] = src;
			bos[i][1] = dst[i];
			jobs[i] = (struct mi_dev_job){ .cmds = s.buf,
						       .cmds_size = s.len,
						       .bos = bos[i], .nbos = 2,
						       .queue = i & 1 };
			jp[i] = &jobs[i];
		}
		if (t->d->ops->submit(t->d, jp, 4))
			t->bad++;
		for (int i = 3; i >= 0; i--) {
			if (t->d->ops->wait(t->d, &jobs[i], -1) || jobs[i].status ||
			    memcmp(dst[i]->map, src->map, 64))
				t->bad++;
			t->d->ops->job_release(t->d, &jobs[i]);
		}
	}
	mi_stream_free(&s);
	mi_dev_bo_free(src);
	for (int i = 0; i < 4; i++)
		mi_dev_bo_free(dst[i]);
	return NULL;
}

static void check_threads(struct mi_dev *d)
{
	pthread_t th[4];
	struct thr t[4];
	int bad = 0;

	for (int i = 0; i < 4; i++) {
		t[i] = (struct thr){ .d = d, .seed = i + 1 };
		pthread_create(&th[i], NULL, thr_main, &t[i]);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		bad += t[i].bad;
	}
	CHECK(bad == 0);
	printf("%s: 4 threads x 100 jobs on one ring: %d wrong\n", d->name, bad);
}

static void check_unplug(struct mi_dev *d, unsigned int id, struct mi_stream *s)
{
	struct mi_dev_bo *bos[2];
	int status = 1, ret;

	CHECK(!mi_dev_bo_alloc(d, BO_SIZE, &bos[0]));
	CHECK(!mi_dev_bo_alloc(d, BO_SIZE, &bos[1]));
	CHECK(!mi_sim_del(id));
	ret = run_one(d, bos, s->buf, s->len, 0, &status);
	CHECK(ret == -ENODEV || status == -ENODEV);
	ret = run_one(d, bos, s->buf, s->len, MI_DEV_JOB_NO_URING, &status);
	CHECK(ret == -ENODEV || status == -ENODEV);
	CHECK(d->ops->alive(d) == 0);
	printf("%s removed: submit %d, alive %d\n", d->name, ret,
	       d->ops->alive(d));
	mi_dev_bo_free(bos[0]);
	mi_dev_bo_free(bos[1]);
}

static double bench(struct mi_dev *d, struct mi_stream *s, int depth,
		    bool uring, int total)
{
	struct mi_dev_bo *bos[2];
	struct mi_dev_job *jobs = calloc(depth, sizeof(*jobs));
	struct mi_dev_job **jp = calloc(depth, sizeof(*jp));
	struct timespec c0, c1;

	mi_dev_bo_alloc(d, BO_SIZE, &bos[0]);
	mi_dev_bo_alloc(d, BO_SIZE, &bos[1]);
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
	for (int done = 0; done < total; done += depth) {
		for (int i = 0; i < depth; i++) {
			jobs[i] = (struct mi_dev_job){
				.cmds = s->buf, .cmds_size = s->len, .bos = bos,
				.nbos = 2, .flags = uring ? 0 : MI_DEV_JOB_NO_URING };
			jp[i] = &jobs[i];
		}
		if (d->ops->submit(d, jp, depth))
			fails++;
		for (int i = 0; i < depth; i++) {
			d->ops->wait(d, &jobs[i], -1);
			d->ops->job_release(d, &jobs[i]);
		}
	}
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
	mi_dev_bo_free(bos[0]);
	mi_dev_bo_free(bos[1]);
	free(jobs);
	free(jp);
	return ((c1.tv_sec - c0.tv_sec) * 1e9 + (c1.tv_nsec - c0.tv_nsec)) /
	       total;
}

static int run_bench(struct mi_dev *d)
{
	static const int depths[] = { 1, 8, 64 };
	struct mi_stream s;

	mi_stream_init(&s);
	mi_copy_job(&s, 64, 0, 0);
	mi_stream_finish(&s);
	printf("bench-devices (QEMU TCG: CPU time, not hardware figures), %s %s\n",
	       d->name, d->personality);
	printf("%-6s %18s %12s %18s %12s\n", "depth", "ioctl ns/job", "jobs/s",
	       "io_uring ns/job", "jobs/s");
	for (int i = 0; i < 3; i++) {
		int64_t w0 = mi_now_ns();
		double ci = bench(d, &s, depths[i], false, 256);
		double wi = (mi_now_ns() - w0) / 256.0;
		int64_t w1 = mi_now_ns();
		double cu = bench(d, &s, depths[i], true, 256);
		double wu = (mi_now_ns() - w1) / 256.0;

		printf("%-6d %18.0f %12.0f %18.0f %12.0f\n", depths[i], ci,
		       1e9 / wi, cu, 1e9 / wu);
	}
	mi_stream_free(&s);
	return fails ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct mi_dev *a, *b;
	struct mi_stream s;
	char cmd[512];

	mi_sim_del(ID_A);
	mi_sim_del(ID_B);
	if (mi_sim_new(ID_A, "ethos-u55-high", NULL) ||
	    mi_sim_new(ID_B, "dsp-nchw", NULL)) {
		fprintf(stderr, "cannot create sim devices\n");
		return 1;
	}
	mi_dev_rescan();
	a = dev_of_sim(ID_A);
	b = dev_of_sim(ID_B);
	CHECK(a && b);
	if (!a || !b)
		return 1;
	if (argc > 1 && !strcmp(argv[1], "--bench"))
		return run_bench(a);
	printf("%s %s: ops %#llx layout %u macs %llu clock %llu kHz sram %llu uring %#x\n",
	       a->name, a->personality, (unsigned long long)a->caps.op_mask,
	       a->caps.preferred_layout, (unsigned long long)a->caps.macs_per_cycle,
	       (unsigned long long)a->caps.clock_khz,
	       (unsigned long long)a->caps.sram_bytes, a->caps.uring_cmd_flags);
	printf("backend '%s'\n", a->backend);
	CHECK(!strcmp(a->driver, "metainfer") && *a->backend);
	CHECK(!strcmp(a->personality, "ethos-u55-high"));
	CHECK(!strcmp(b->personality, "dsp-nchw"));
	CHECK(a->caps.macs_per_cycle == 256 && b->caps.macs_per_cycle == 64);
	CHECK(a->caps.clock_khz == 500000 && b->caps.clock_khz == 800000);
	CHECK(a->caps.sram_bytes == 512 * 1024 && b->caps.sram_bytes == 2048 * 1024);
	CHECK(a->caps.preferred_layout == DRM_METAINFER_LAYOUT_NHWC);
	CHECK(b->caps.preferred_layout == DRM_METAINFER_LAYOUT_NCHW);
	CHECK(a->caps.op_mask & (1ull << DRM_METAINFER_OP_LUT));
	CHECK(!(b->caps.op_mask & (1ull << DRM_METAINFER_OP_LUT)));
	CHECK(a->caps.num_queues == 2 && a->use_uring);
	CHECK(a->caps.uring_cmd_flags & DRM_METAINFER_URING_CMD_ASYNC);

	build_stream(&s);
	check_compute(a, &s);
	check_compute(b, &s);
	check_prime_fence(a, b);
	check_prime_fence(b, a);
	check_threads(a);
	if (argc > 1) {
		snprintf(cmd, sizeof(cmd),
			 "%s devices --json | /usr/bin/python3 -c 'import json, sys; "
			 "d = json.load(sys.stdin)[\"devices\"]; "
			 "p = [x[\"personality\"] for x in d]; "
			 "assert \"ethos-u55-high\" in p and \"dsp-nchw\" in p, p'",
			 argv[1]);
		CHECK(system(cmd) == 0);
		snprintf(cmd, sizeof(cmd), "%s devices", argv[1]);
		CHECK(system(cmd) == 0);
	}
	check_fault(a, ID_A, "fail_dma", -EIO, &s);
	check_fault(b, ID_B, "fail_hang", -ETIMEDOUT, &s);
	check_failed_fence(a, ID_A, b, &s);
	check_unplug(b, ID_B, &s);
	mi_stream_free(&s);
	mi_sim_del(ID_A);
	printf("check-devices: %s\n", fails ? "FAIL" : "ok");
	return fails ? 1 : 0;
}
