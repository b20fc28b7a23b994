// SPDX-License-Identifier: GPL-2.0-only
/*
 * unplug_test: hot-unplug through the standard driver-core path.
 *
 *   echo metainfer_sim.ID > /sys/bus/platform/drivers/metainfer_sim/unbind
 *   echo metainfer_sim.ID > /sys/bus/platform/drivers/metainfer_sim/bind
 *
 * Unbind with open files, mappings, jobs in flight (a hung one and others
 * queued behind it) and io_uring commands outstanding: every job ends with
 * an error, every later ioctl or io_uring command gets -ENODEV, mappings
 * stay readable and writable, closing is clean, and bind brings the device
 * back usable with the personality it had.  Repeated cycles reuse the same
 * render minor, i.e. each unbound DRM device was freed after its last
 * file closed (a leaked one would keep its minor).  vmrun fails the run on
 * any BUG/WARNING/Oops in the kernel log.
 */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "mi_test.h"

#define N 256
#define DRV "/sys/bus/platform/drivers/metainfer_sim"
#define PDEV "/sys/bus/platform/devices/metainfer_sim"

static int sim_write_drv(const char *file, unsigned int id)
{
	char path[128], name[64];

	snprintf(path, sizeof(path), DRV "/%s", file);
	snprintf(name, sizeof(name), "metainfer_sim.%u", id);
	return mi_write_file(path, name);
}

static int sim_unbind(unsigned int id)
{
	return sim_write_drv("unbind", id);
}

/* Bind and wait for the render node to be openable: its minor. */
static int sim_bind(unsigned int id)
{
	char dev[64];
	int ret, i, m;

	ret = sim_write_drv("bind", id);
	if (ret)
		return ret;
	for (i = 0; i < 500; i++) {
		m = mi_sim_minor(id);
		if (m >= 0) {
			snprintf(dev, sizeof(dev), "/dev/dri/renderD%d", m);
			if (access(dev, R_OK | W_OK) == 0)
				return m;
		}
		usleep(10000);
	}
	return -ETIMEDOUT;
}

/* 1 if the device's "driver" link points at metainfer_sim, else 0. */
static int sim_bound(unsigned int id)
{
	char path[128], target[256];
	ssize_t n;

	snprintf(path, sizeof(path), PDEV ".%u/driver", id);
	n = readlink(path, target, sizeof(target) - 1);
	if (n < 0)
		return 0;
	target[n] = 0;
	n = strlen(target);
	return n >= 14 && !strcmp(target + n - 14, "/metainfer_sim");
}

static long core_refcnt(void)
{
	char buf[32];

	if (mi_read_file("/sys/module/metainfer/refcnt", buf, sizeof(buf)) <= 0)
		return -1;
	return strtol(buf, NULL, 10);
}

FIXTURE(udev) {
	unsigned int id;
	int fd;
	int minor;
	uint32_t ctx;
	uint32_t bos[2];
	uint8_t *src, *dst;
	struct mi_stream s;
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

/* Open the device, a context on the variant's queue and two mapped BOs. */
static int dev_open(FIXTURE_DATA(udev) *self, uint32_t queue)
{
	int i;

	self->minor = mi_sim_minor(self->id);
	self->fd = mi_open_minor(self->minor);
	if (self->fd < 0)
		return -1;
	if (mi_ctx_create(self->fd, queue, DRM_METAINFER_PRIORITY_NORMAL,
			  &self->ctx))
		return -1;
	self->src = mi_bo_new(self->fd, 4096, &self->bos[0]);
	self->dst = mi_bo_new(self->fd, 4096, &self->bos[1]);
	if (!self->src || !self->dst)
		return -1;
	for (i = 0; i < N; i++)
		self->src[i] = (uint8_t)(i * 5 + 1);
	return 0;
}

static void dev_close(FIXTURE_DATA(udev) *self)
{
	if (self->src)
		munmap(self->src, 4096);
	if (self->dst)
		munmap(self->dst, 4096);
	if (self->fd >= 0)
		close(self->fd);
	self->src = self->dst = NULL;
	self->fd = -1;
}

FIXTURE_SETUP(udev)
{
	self->fd = -1;
	self->id = variant->id;
	mi_sim_del(self->id);
	ASSERT_EQ(0, mi_sim_new(self->id, variant->pers, NULL)) {
		TH_LOG("cannot create sim device %u (is metainfer_sim loaded?)", self->id);
	}
	ASSERT_EQ(0, dev_open(self, variant->queue));
	mi_stream_init(&self->s);
	mi_copy_job(&self->s, N, 0, 0);
	mi_stream_finish(&self->s);
}

FIXTURE_TEARDOWN(udev)
{
	dev_close(self);
	mi_stream_free(&self->s);
	/* bound or not, removing the device must be clean */
	EXPECT_EQ(0, mi_sim_del(self->id));
}

static int submit(FIXTURE_DATA(udev) *self, uint64_t *seq)
{
	return mi_submit(self->fd, self->ctx, self->bos, 2, self->s.buf,
			 self->s.len, seq);
}

static int dst_ok(FIXTURE_DATA(udev) *self)
{
	int i;

	for (i = 0; i < N; i++)
		if (self->dst[i] != (uint8_t)(i * 5 + 1))
			return 0;
	return 1;
}

/* After bind: open again and run one job to completion, correctly. */
static int works(FIXTURE_DATA(udev) *self, uint32_t queue)
{
	uint64_t seq;
	int64_t st = -1;

	dev_close(self);
	if (dev_open(self, queue))
		return 0;
	if (submit(self, &seq) || mi_wait(self->fd, self->ctx, seq, 30000, &st))
		return 0;
	return st == 0 && dst_ok(self);
}

/* A hung job holds the queue; @n more queue up behind it. */
static void submit_stuck(struct __test_metadata *_metadata,
			 FIXTURE_DATA(udev) *self, uint64_t *seq, int n)
{
	int i;

	ASSERT_EQ(0, mi_sim_knob(self->id, "fail_hang", 1));
	for (i = 0; i <= n; i++)
		ASSERT_EQ(0, submit(self, &seq[i]));
}

/* Every ioctl on a file of an unbound device fails with -ENODEV. */
static void expect_dead(struct __test_metadata *_metadata,
			FIXTURE_DATA(udev) *self, uint64_t seq)
{
	uint64_t v, s2;
	uint32_t h, c;
	int64_t st;

	EXPECT_EQ(-ENODEV, mi_get_param(self->fd, DRM_METAINFER_PARAM_API_VERSION, 0, &v));
	EXPECT_EQ(-ENODEV, submit(self, &s2));
	EXPECT_EQ(-ENODEV, mi_wait(self->fd, self->ctx, seq, 1000, &st));
	EXPECT_EQ(-ENODEV, mi_bo_create(self->fd, 4096, &h));
	EXPECT_EQ(-ENODEV, mi_ctx_create(self->fd, 0, DRM_METAINFER_PRIORITY_NORMAL, &c));
	EXPECT_EQ(-ENODEV, mi_ctx_destroy(self->fd, self->ctx));
}

TEST_F(udev, driver_bound_in_sysfs)
{
	char path[128];

	EXPECT_TRUE(sim_bound(self->id));
	snprintf(path, sizeof(path), DRV "/metainfer_sim.%u", self->id);
	EXPECT_EQ(0, access(path, F_OK));
	/* bound twice: refused; unbind twice: refused */
	EXPECT_EQ(-EBUSY, sim_write_drv("bind", self->id));
	ASSERT_EQ(0, sim_unbind(self->id));
	EXPECT_FALSE(sim_bound(self->id));
	EXPECT_EQ(-ENODEV, sim_unbind(self->id));
	EXPECT_EQ(-ENODEV, sim_write_drv("unbind", 9999));
	EXPECT_EQ(-ENODEV, sim_write_drv("bind", 9999));
	ASSERT_LE(0, sim_bind(self->id));
	EXPECT_TRUE(sim_bound(self->id));
}

/* Unbound, the device and its attributes stay; bound again, it is the
 * same chip (its personality) and works. */
TEST_F(udev, unbind_rebind_idle)
{
	char path[128], buf[4096];
	uint64_t khz;

	snprintf(path, sizeof(path), PDEV ".%u/personality", self->id);
	ASSERT_EQ(0, mi_write_file(path, "clock_hz=123456000"));
	dev_close(self);
	ASSERT_EQ(0, sim_unbind(self->id));
	EXPECT_GT(0, mi_sim_minor(self->id));
	EXPECT_LT(0, mi_read_file(path, buf, sizeof(buf)));
	EXPECT_NE(NULL, strstr(buf, "clock_hz=123456000"));
	snprintf(path, sizeof(path), PDEV ".%u/sim_id", self->id);
	EXPECT_LT(0, mi_read_file(path, buf, sizeof(buf)));
	EXPECT_EQ(self->id, strtoul(buf, NULL, 10));
	ASSERT_LE(0, sim_bind(self->id));
	ASSERT_TRUE(works(self, variant->queue));
	ASSERT_EQ(0, mi_get_param(self->fd, DRM_METAINFER_PARAM_CLOCK_KHZ, 0, &khz));
	EXPECT_EQ(123456, khz);
}

/* Unbind under an open file, two mappings and jobs in flight. */
TEST_F(udev, unbind_with_files_mappings_and_jobs)
{
	uint64_t seq[9];
	int64_t t0, ms;
	int i;

	submit_stuck(_metadata, self, seq, 8);
	usleep(20000);
	t0 = mi_now_ns();
	ASSERT_EQ(0, sim_unbind(self->id));
	ms = (mi_now_ns() - t0) / 1000000;
	/* the hung job is aborted, not waited for */
	TH_LOG("unbind with 9 jobs pending took %lld ms", (long long)ms);
	EXPECT_FALSE(sim_bound(self->id));
	expect_dead(_metadata, self, seq[0]);
	/* the mappings still hold the buffers' pages */
	for (i = 0; i < N; i++)
		ASSERT_EQ((uint8_t)(i * 5 + 1), self->src[i]);
	memset(self->dst, 0x5a, 4096);
	EXPECT_EQ(0x5a, self->dst[4095]);
	ASSERT_LE(0, sim_bind(self->id));
	ASSERT_TRUE(works(self, variant->queue));
}

/* Unbind while a WAIT sleeps in another thread's ioctl: it returns with
 * the job's error, and unbind does not wait for the job's timeout. */
struct waiter {
	int fd;
	uint32_t ctx;
	uint64_t seq;
	int ret;
	int64_t status;
};

static void *wait_thread(void *p)
{
	struct waiter *w = p;

	w->ret = mi_wait(w->fd, w->ctx, w->seq, 60000, &w->status);
	return NULL;
}

TEST_F(udev, unbind_wakes_waiters)
{
	struct waiter w = { .fd = self->fd, .ctx = self->ctx };
	uint64_t seq[3], timeout_ms = 0;
	pthread_t th;
	int64_t t0, ms;

	ASSERT_EQ(0, mi_get_param(self->fd, DRM_METAINFER_PARAM_JOB_TIMEOUT_MS, 0,
				  &timeout_ms));
	submit_stuck(_metadata, self, seq, 2);
	w.seq = seq[2];
	ASSERT_EQ(0, pthread_create(&th, NULL, wait_thread, &w));
	usleep(50000);
	t0 = mi_now_ns();
	ASSERT_EQ(0, sim_unbind(self->id));
	ASSERT_EQ(0, pthread_join(th, NULL));
	ms = (mi_now_ns() - t0) / 1000000;
	/* (or -ENODEV if unbind came before the WAIT started) */
	if (w.ret == 0) {
		EXPECT_EQ(-ENODEV, w.status);
	} else {
		EXPECT_EQ(-ENODEV, w.ret);
	}
	TH_LOG("unbind + waiter wake-up: %lld ms (job timeout %llu ms)",
	       (long long)ms, (unsigned long long)timeout_ms);
	EXPECT_LT(ms, (int64_t)timeout_ms * 4);
	ASSERT_LE(0, sim_bind(self->id));
	ASSERT_TRUE(works(self, variant->queue));
}

/* Queue one URING_CMD: request code @op, argument struct @arg. */
static int queue_cmd(struct io_uring *ring, int fd, uint32_t op, void *arg,
		     uint64_t tag)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
	struct drm_metainfer_uring_cmd *uc;

	if (!sqe)
		return -1;
	io_uring_prep_rw(IORING_OP_URING_CMD, sqe, fd, NULL, 0, 0);
	sqe->cmd_op = op;
	uc = (struct drm_metainfer_uring_cmd *)sqe->cmd;
	memset(uc, 0, sizeof(*uc));
	uc->arg_ptr = (uintptr_t)arg;
	sqe->user_data = tag;
	return 0;
}

static int reap(struct io_uring *ring, uint64_t *tag)
{
	struct io_uring_cqe *cqe;
	int res;

	if (io_uring_wait_cqe(ring, &cqe))
		return -9999;
	res = cqe->res;
	*tag = cqe->user_data;
	io_uring_cqe_seen(ring, cqe);
	return res;
}

/* Unbind with io_uring WAITs outstanding (in io_uring's workers): each
 * completes exactly once, with the job's error; commands sent afterwards
 * get -ENODEV; the ring tears down (6.1 waits for every command). */
#define NW 4
TEST_F(udev, unbind_with_uring_commands_outstanding)
{
	struct drm_metainfer_wait w[NW];
	struct drm_metainfer_submit sub;
	struct drm_metainfer_get_param gp;
	struct drm_metainfer_ctx_create cc;
	struct io_uring ring;
	uint64_t seq[NW], tag;
	int seen[NW] = { 0 };
	int i, res;

	ASSERT_EQ(0, io_uring_queue_init(64, &ring, 0));
	submit_stuck(_metadata, self, seq, NW - 1);
	for (i = 0; i < NW; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		w[i].size = sizeof(w[i]);
		w[i].ctx_id = self->ctx;
		w[i].seqno = seq[i];
		w[i].timeout_ns = mi_deadline_ms(60000);
		ASSERT_EQ(0, queue_cmd(&ring, self->fd, DRM_IOCTL_METAINFER_WAIT,
				       &w[i], i));
	}
	ASSERT_EQ(NW, io_uring_submit(&ring));
	usleep(50000);
	ASSERT_EQ(0, sim_unbind(self->id));
	for (i = 0; i < NW; i++) {
		res = reap(&ring, &tag);
		ASSERT_GT(NW, tag);
		EXPECT_EQ(0, seen[tag]);
		seen[tag] = 1;
		if (res == 0) {
			EXPECT_EQ(-ENODEV, w[tag].status);
		} else {
			EXPECT_EQ(-ENODEV, res);
		}
	}

	/* after the unplug: SUBMIT, GET_PARAM and CTX_CREATE over io_uring */
	memset(&sub, 0, sizeof(sub));
	sub.size = sizeof(sub);
	sub.ctx_id = self->ctx;
	sub.bo_count = 2;
	sub.bo_handles = (uintptr_t)self->bos;
	sub.cmds = (uintptr_t)self->s.buf;
	sub.cmds_size = self->s.len;
	memset(&gp, 0, sizeof(gp));
	gp.size = sizeof(gp);
	gp.param = DRM_METAINFER_PARAM_API_VERSION;
	memset(&cc, 0, sizeof(cc));
	cc.size = sizeof(cc);
	cc.priority = DRM_METAINFER_PRIORITY_NORMAL;
	ASSERT_EQ(0, queue_cmd(&ring, self->fd, DRM_IOCTL_METAINFER_SUBMIT, &sub, 0));
	ASSERT_EQ(0, queue_cmd(&ring, self->fd, DRM_IOCTL_METAINFER_GET_PARAM, &gp, 1));
	ASSERT_EQ(0, queue_cmd(&ring, self->fd, DRM_IOCTL_METAINFER_CTX_CREATE, &cc, 2));
	ASSERT_EQ(3, io_uring_submit(&ring));
	for (i = 0; i < 3; i++) {
		res = reap(&ring, &tag);
		EXPECT_EQ(-ENODEV, res) {
			TH_LOG("command %llu after unbind: %d", (unsigned long long)tag, res);
		}
	}
	io_uring_queue_exit(&ring);
	ASSERT_LE(0, sim_bind(self->id));
	ASSERT_TRUE(works(self, variant->queue));
}

/* Unbind while threads keep issuing ioctls (contexts created and
 * destroyed, buffers created, jobs submitted, parameters read): each call
 * returns 0 or -ENODEV, never anything else, and the kernel log stays
 * clean; once one has seen -ENODEV, every later call does. */
struct storm {
	int fd;
	uint32_t queue;
	FIXTURE_DATA(udev) *self;
	volatile int *stop;
	long calls;
	int bad;
	int revived;
};

static void *storm_thread(void *p)
{
	struct storm *st = p;
	int dead = 0;

	while (!*st->stop) {
		uint32_t c, h;
		uint64_t v, seq;
		int r[4];

		r[0] = mi_ctx_create(st->fd, st->queue, DRM_METAINFER_PRIORITY_NORMAL, &c);
		r[1] = r[0] ? -ENODEV : mi_submit(st->fd, c, st->self->bos, 2,
						  st->self->s.buf, st->self->s.len, &seq);
		if (!r[0])
			mi_ctx_destroy(st->fd, c);
		r[2] = mi_bo_create(st->fd, 4096, &h);
		if (!r[2])
			mi_bo_close(st->fd, h);
		r[3] = mi_get_param(st->fd, DRM_METAINFER_PARAM_NUM_QUEUES, 0, &v);
		for (int i = 0; i < 4; i++) {
			if (r[i] && r[i] != -ENODEV)
				st->bad = r[i];
			if (r[i] == -ENODEV)
				dead = 1;
			else if (dead && !r[i])
				st->revived = 1;
		}
		st->calls++;
	}
	return NULL;
}

#define NSTORM 3
TEST_F(udev, unbind_under_ioctl_storm)
{
	struct storm st[NSTORM];
	pthread_t th[NSTORM];
	volatile int stop = 0;
	int i;

	for (i = 0; i < NSTORM; i++) {
		st[i] = (struct storm){ .fd = self->fd, .queue = variant->queue,
					.self = self, .stop = &stop };
		ASSERT_EQ(0, pthread_create(&th[i], NULL, storm_thread, &st[i]));
	}
	usleep(200000);
	ASSERT_EQ(0, sim_unbind(self->id));
	usleep(100000);
	stop = 1;
	for (i = 0; i < NSTORM; i++) {
		ASSERT_EQ(0, pthread_join(th[i], NULL));
		EXPECT_EQ(0, st[i].bad) {
			TH_LOG("thread %d: an ioctl failed with %d", i, st[i].bad);
		}
		EXPECT_EQ(0, st[i].revived);
		EXPECT_LT(0, st[i].calls);
	}
	TH_LOG("%ld, %ld, %ld rounds of 4 ioctls", st[0].calls, st[1].calls,
	       st[2].calls);
	ASSERT_LE(0, sim_bind(self->id));
	ASSERT_TRUE(works(self, variant->queue));
}

/* A buffer exported as a dma-buf outlives its unbound exporter: another
 * chip that imported it keeps reading it in jobs, and after the importer
 * drops it nothing is left behind (vmrun checks the kernel log). */
TEST_F(udev, exported_buffer_survives_unbind)
{
	unsigned int other_id = self->id + 10;
	uint32_t ih[2], octx;
	uint8_t *odst;
	uint64_t seq;
	int64_t st = -1;
	int dmabuf, ofd, i;

	mi_sim_del(other_id);
	ASSERT_EQ(0, mi_sim_new(other_id, variant->pers, NULL));
	ofd = mi_open_minor(mi_sim_minor(other_id));
	ASSERT_LE(0, ofd);
	ASSERT_EQ(0, mi_prime_export(self->fd, self->bos[0], &dmabuf));
	ASSERT_EQ(0, mi_prime_import(ofd, dmabuf, &ih[0]));
	close(dmabuf);
	odst = mi_bo_new(ofd, 4096, &ih[1]);
	ASSERT_NE(NULL, odst);
	ASSERT_EQ(0, mi_ctx_create(ofd, variant->queue, DRM_METAINFER_PRIORITY_NORMAL,
				   &octx));
	dev_close(self);
	ASSERT_EQ(0, sim_unbind(self->id));
	ASSERT_EQ(0, mi_submit(ofd, octx, ih, 2, self->s.buf, self->s.len, &seq));
	ASSERT_EQ(0, mi_wait(ofd, octx, seq, 30000, &st));
	EXPECT_EQ(0, st);
	for (i = 0; i < N; i++)
		ASSERT_EQ((uint8_t)(i * 5 + 1), odst[i]);
	munmap(odst, 4096);
	close(ofd);
	EXPECT_EQ(0, mi_sim_del(other_id));
	ASSERT_LE(0, sim_bind(self->id));
	ASSERT_TRUE(works(self, variant->queue));
}

/* Unbound devices are removed cleanly, by del_device or with the module
 * (unload_test covers the latter); the id can be used again. */
TEST_F(udev, del_device_while_unbound)
{
	dev_close(self);
	ASSERT_EQ(0, sim_unbind(self->id));
	ASSERT_EQ(0, mi_sim_del(self->id));
	ASSERT_EQ(0, mi_sim_new(self->id, variant->pers, NULL));
	ASSERT_TRUE(works(self, variant->queue));
}

/* Cycles of open, map, submit, unbind, close, bind: each unbound DRM
 * device is freed (its minor comes back) and the module references the
 * files held are dropped. */
TEST_F(udev, rebind_cycles_free_everything)
{
	uint64_t seq[5];
	long ref0, ref;
	int cycle, i, m, m1 = -1;

	dev_close(self);
	ref0 = core_refcnt();
	ASSERT_LE(0, ref0);
	for (cycle = 0; cycle < 6; cycle++) {
		ASSERT_EQ(0, dev_open(self, variant->queue));
		EXPECT_EQ(ref0 + 1, core_refcnt());
		submit_stuck(_metadata, self, seq, 4);
		ASSERT_EQ(0, sim_unbind(self->id));
		dev_close(self);
		/* a job's last reference may drop a moment after the close */
		for (i = 0; i < 50; i++) {
			m = sim_bind(self->id);
			ASSERT_LE(0, m);
			if (m1 < 0 || m == m1)
				break;
			ASSERT_EQ(0, sim_unbind(self->id));
			usleep(100000);
		}
		if (m1 < 0)
			m1 = m;
		ASSERT_EQ(m1, m) {
			TH_LOG("cycle %d: render minor %d, not %d: a DRM device was not freed",
			       cycle, m, m1);
		}
		ref = core_refcnt();
		EXPECT_EQ(ref0, ref);
	}
	ASSERT_TRUE(works(self, variant->queue));
}

TEST_HARNESS_MAIN
