// SPDX-License-Identifier: GPL-2.0-only
/*
 * perf_test: the perf PMU of each device, "metainfer_<render minor>"
 * (kernel/mi_pmu.c): its sysfs files, counters that equal GET_COUNTERS,
 * gauges whose time integral matches the sensors, the events it refuses,
 * and removing a device with events open; and the fdinfo usage stats
 * that `metainfer top` and other DRM client monitors read.
 *
 * `perf_test --load MINOR JOBS FILE [SECONDS]` is the job load the perf(1)
 * and `metainfer top` checks run (tools/metainfer/test-top.sh): it submits
 * JOBS gemm+copy jobs on the device (batches of JOBS until SECONDS have
 * passed, if given) and writes the GET_COUNTERS difference to FILE as
 * "key value" lines.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/perf_event.h>

#include "kselftest_harness.h"
#include "mi_fixture.h"

#define PMU_DIR "/sys/bus/event_source/devices/metainfer_"

/* A job with MACs and DMA: an int8 gemm, then a copy. */
static void gemm_job(struct mi_stream *s)
{
	struct drm_metainfer_op_gemm g;
	uint32_t sa[2] = { 16, 32 }, sb[2] = { 32, 16 }, so[2] = { 16, 16 };

	memset(&g, 0, sizeof(g));
	g.hdr.op = DRM_METAINFER_OP_GEMM;
	g.a = mi_tensor(0, DRM_METAINFER_DTYPE_INT8, DRM_METAINFER_LAYOUT_PLAIN, 0, 2, sa);
	g.b = mi_tensor(0, DRM_METAINFER_DTYPE_INT8, DRM_METAINFER_LAYOUT_PLAIN, 4096, 2, sb);
	g.output = mi_tensor(1, DRM_METAINFER_DTYPE_INT32, DRM_METAINFER_LAYOUT_PLAIN, 0, 2, so);
	mi_stream_add(s, &g, sizeof(g));
	mi_copy_job(s, 64, 8192, 4096);
}

/* Submit @n jobs on a new context of @queue and wait for them. */
static int run_jobs_q(int fd, uint32_t queue, int n)
{
	uint32_t bos[2], ctx;
	struct mi_stream s;
	void *map[2];
	uint64_t seq = 0;
	int64_t st = 0;
	int i, ret;

	map[0] = mi_bo_new(fd, 16384, &bos[0]);
	map[1] = mi_bo_new(fd, 16384, &bos[1]);
	if (!map[0] || !map[1])
		return -ENOMEM;
	ret = mi_ctx_create(fd, queue, DRM_METAINFER_PRIORITY_NORMAL, &ctx);
	if (ret)
		goto out;
	mi_stream_init(&s);
	gemm_job(&s);
	mi_stream_finish(&s);
	for (i = 0; i < n && !ret; i++)
		ret = mi_submit(fd, ctx, bos, 2, s.buf, s.len, &seq);
	if (!ret && n)
		ret = mi_wait(fd, ctx, seq, 60000, &st);
	mi_stream_free(&s);
	mi_ctx_destroy(fd, ctx);
out:
	for (i = 0; i < 2; i++) {
		munmap(map[i], 16384);
		mi_bo_close(fd, bos[i]);
	}
	return ret ? ret : (int)st;
}

static int run_jobs(int fd, int n)
{
	return run_jobs_q(fd, 0, n);
}

static int read_str(const char *path, char *buf, size_t len)
{
	int n = mi_read_file(path, buf, len);

	if (n < 0)
		return n;
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = 0;
	return 0;
}

static int pmu_file(int minor, const char *name, char *buf, size_t len)
{
	char path[256];

	snprintf(path, sizeof(path), PMU_DIR "%d/%s", minor, name);
	return read_str(path, buf, len);
}

static bool pmu_exists(int minor)
{
	char path[128];

	snprintf(path, sizeof(path), PMU_DIR "%d", minor);
	return access(path, F_OK) == 0;
}

static int pmu_type(int minor)
{
	char buf[32];

	return pmu_file(minor, "type", buf, sizeof(buf)) ? -1 : atoi(buf);
}

static int pmu_cpu(int minor)
{
	char buf[64];

	/* one CPU: "0" */
	return pmu_file(minor, "cpumask", buf, sizeof(buf)) ? -1 : atoi(buf);
}

/* attr.config of event @name from its sysfs file ("event=0x10"). */
static long long ev_config(int minor, const char *name)
{
	char file[128], buf[64];

	snprintf(file, sizeof(file), "events/%s", name);
	if (pmu_file(minor, file, buf, sizeof(buf)) || strncmp(buf, "event=", 6))
		return -1;
	return strtoll(buf + 6, NULL, 0);
}

static int perf_open(int type, uint64_t config, int pid, int cpu,
		     uint64_t period)
{
	struct perf_event_attr a;
	int fd;

	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = type;
	a.config = config;
	a.sample_period = period;
	fd = syscall(SYS_perf_event_open, &a, pid, cpu, -1, 0);
	return fd < 0 ? -errno : fd;
}

/* Open event @name of the device's PMU on its CPU; fd or -errno. */
static int ev_open(int minor, const char *name)
{
	long long config = ev_config(minor, name);
	int type = pmu_type(minor);

	if (config < 0 || type < 0)
		return -ENOENT;
	return perf_open(type, config, -1, pmu_cpu(minor), 0);
}

static int64_t ev_read(int fd)
{
	uint64_t v;

	if (read(fd, &v, sizeof(v)) != sizeof(v))
		return -errno;
	return v;
}

static const char *const counter_events[] = {
	"busy-ns", "jobs", "jobs-failed", "macs", "dma-bytes-in",
	"dma-bytes-out", "stall-ns", "jobs-submitted", "jobs-timed-out",
	"queue-wait-ns",
};
#define N_COUNTERS (sizeof(counter_events) / sizeof(counter_events[0]))

static uint64_t counter_of(const struct drm_metainfer_get_counters *c,
			   unsigned int i)
{
	const uint64_t v[N_COUNTERS] = {
		c->busy_ns, c->jobs_completed, c->jobs_failed, c->macs,
		c->dma_bytes_in, c->dma_bytes_out, c->stall_ns,
		c->jobs_submitted, c->jobs_timed_out, c->queue_wait_ns,
	};

	return v[i];
}

TEST_F(dev, sysfs_files)
{
	static const char *const gauges[] = { "temperature-mC", "power-mW",
					      "clock-kHz", "queue-depth" };
	static const char *const units[] = { "mC", "mW", "kHz", "jobs" };
	char buf[128], file[128];
	unsigned int i;

	ASSERT_TRUE(pmu_exists(self->minor));
	EXPECT_LT(0, pmu_type(self->minor));
	EXPECT_LE(0, pmu_cpu(self->minor));
	ASSERT_EQ(0, pmu_file(self->minor, "format/event", buf, sizeof(buf)));
	EXPECT_STREQ("config:0-7", buf);
	for (i = 0; i < N_COUNTERS; i++) {
		EXPECT_LE(0, ev_config(self->minor, counter_events[i]))
			TH_LOG("events/%s", counter_events[i]);
		snprintf(file, sizeof(file), "events/%s.unit", counter_events[i]);
		EXPECT_EQ(0, pmu_file(self->minor, file, buf, sizeof(buf)));
	}
	ASSERT_EQ(0, pmu_file(self->minor, "events/busy-ns.unit", buf, sizeof(buf)));
	EXPECT_STREQ("ns", buf);
	for (i = 0; i < 4; i++) {
		EXPECT_LE(0x10, ev_config(self->minor, gauges[i]));
		snprintf(file, sizeof(file), "events/%s.unit", gauges[i]);
		ASSERT_EQ(0, pmu_file(self->minor, file, buf, sizeof(buf)));
		EXPECT_STREQ(units[i], buf);
		snprintf(file, sizeof(file), "events/%s.scale", gauges[i]);
		ASSERT_EQ(0, pmu_file(self->minor, file, buf, sizeof(buf)));
		EXPECT_STREQ("1e-6", buf);
	}
}

/* Every counter event moves by exactly what GET_COUNTERS moves by. */
TEST_F(dev, counters_equal_get_counters)
{
	struct drm_metainfer_get_counters c0, c1;
	int fds[N_COUNTERS];
	unsigned int i;

	for (i = 0; i < N_COUNTERS; i++) {
		fds[i] = ev_open(self->minor, counter_events[i]);
		ASSERT_LE(0, fds[i]) TH_LOG("open %s: %s", counter_events[i],
					    strerror(-fds[i]));
		EXPECT_EQ(0, ev_read(fds[i]));
	}
	ASSERT_EQ(0, mi_counters(self->fd, 0, &c0));
	ASSERT_EQ(0, run_jobs(self->fd, 12));
	ASSERT_EQ(0, mi_counters(self->fd, 0, &c1));
	for (i = 0; i < N_COUNTERS; i++) {
		EXPECT_EQ(counter_of(&c1, i) - counter_of(&c0, i),
			  ev_read(fds[i]))
			TH_LOG("%s", counter_events[i]);
		close(fds[i]);
	}
	EXPECT_EQ(12, c1.jobs_completed - c0.jobs_completed);
	EXPECT_LT(0, c1.macs - c0.macs);
	EXPECT_LT(0, c1.busy_ns - c0.busy_ns);
	EXPECT_LT(0, c1.dma_bytes_in - c0.dma_bytes_in);
}

/* A gauge counts value x us: over an interval its mean is the reading. */
TEST_F(dev, gauges_integrate_sensors)
{
	static const char *const names[] = { "clock-kHz", "temperature-mC",
					     "power-mW", "queue-depth" };
	struct drm_metainfer_get_counters c;
	int64_t v0[4], v1[4], t0, t1;
	double mean[4];
	int fds[4], i, j;

	for (i = 0; i < 4; i++) {
		fds[i] = ev_open(self->minor, names[i]);
		ASSERT_LE(0, fds[i]) TH_LOG("open %s: %s", names[i],
					    strerror(-fds[i]));
	}
	/* never backwards, across samples (every 10 ms) */
	for (j = 0; j < 40; j++) {
		for (i = 0; i < 4; i++) {
			v1[i] = ev_read(fds[i]);
			if (j)
				EXPECT_LE(v0[i], v1[i]) TH_LOG("%s read %d", names[i], j);
			v0[i] = v1[i];
		}
		usleep(3000);
	}
	t0 = mi_now_ns();
	for (i = 0; i < 4; i++)
		v0[i] = ev_read(fds[i]);
	usleep(600 * 1000);
	for (i = 0; i < 4; i++)
		v1[i] = ev_read(fds[i]);
	t1 = mi_now_ns();
	ASSERT_EQ(0, mi_counters(self->fd, 0, &c));
	for (i = 0; i < 4; i++) {
		mean[i] = (double)(v1[i] - v0[i]) / ((t1 - t0) / 1000.0);
		close(fds[i]);
	}
	ASSERT_TRUE(c.valid & DRM_METAINFER_VALID_CLOCK);
	/* idle: clock and power hold still, temperature moves slowly */
	EXPECT_LT(0.95 * c.clock_khz, mean[0]) TH_LOG("clock %.0f vs %llu",
		mean[0], (unsigned long long)c.clock_khz);
	EXPECT_GT(1.05 * c.clock_khz, mean[0]);
	EXPECT_LT(0.9 * c.temp_mc, mean[1]) TH_LOG("temp %.0f vs %lld",
		mean[1], (long long)c.temp_mc);
	EXPECT_GT(1.1 * c.temp_mc, mean[1]);
	EXPECT_LT(0.85 * c.power_mw, mean[2]) TH_LOG("power %.0f vs %llu",
		mean[2], (unsigned long long)c.power_mw);
	EXPECT_GT(1.15 * c.power_mw + 1, mean[2]);
	EXPECT_GT(0.05, mean[3]) TH_LOG("queue depth %.3f", mean[3]);
}

/* A "key: value" of /proc/self/fdinfo/@fd, or -1. */
static long long fdinfo(int fd, const char *key)
{
	char path[64];
	long long v;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	return mi_read_key(path, key, &v) ? -1 : v;
}

/*
 * drm-client-id tells open files apart and is shared by dup()s; a file's
 * drm-engine-q<i> moves by exactly the busy time of its jobs on queue i,
 * metainfer-jobs-q<i> by their number, drm-memory-system is its buffers.
 */
TEST_F(dev, fdinfo_usage_stats)
{
	struct drm_metainfer_get_counters c0, c1;
	char eng[32], jobs[32], other[32];
	int fd2, fd3;
	uint32_t bo;

	fd2 = mi_open_minor(self->minor);
	ASSERT_LE(0, fd2);
	fd3 = dup(fd2);
	ASSERT_LE(0, fd3);
	EXPECT_LT(0, fdinfo(fd2, "drm-client-id"));
	EXPECT_NE(fdinfo(self->fd, "drm-client-id"), fdinfo(fd2, "drm-client-id"));
	EXPECT_EQ(fdinfo(fd2, "drm-client-id"), fdinfo(fd3, "drm-client-id"));
	snprintf(eng, sizeof(eng), "drm-engine-q%u", self->queue);
	snprintf(other, sizeof(other), "drm-engine-q%u", self->queue ^ 1);
	snprintf(jobs, sizeof(jobs), "metainfer-jobs-q%u", self->queue);
	EXPECT_EQ(0, fdinfo(fd2, eng));
	EXPECT_EQ(0, fdinfo(fd2, "drm-memory-system"));

	ASSERT_EQ(0, mi_counters(fd2, 0, &c0));
	ASSERT_EQ(0, run_jobs_q(fd2, self->queue, 5));
	ASSERT_EQ(0, mi_counters(fd2, 0, &c1));
	EXPECT_LT(0, c1.busy_ns - c0.busy_ns);
	EXPECT_EQ(c1.busy_ns - c0.busy_ns, fdinfo(fd3, eng));
	EXPECT_EQ(0, fdinfo(fd3, other));
	EXPECT_EQ(5, fdinfo(fd3, jobs));
	EXPECT_EQ(0, fdinfo(self->fd, eng));
	/* buffers count while the file holds them */
	ASSERT_EQ(0, mi_bo_create(fd2, 65536, &bo));
	EXPECT_EQ(64, fdinfo(fd3, "drm-memory-system"));
	ASSERT_EQ(0, mi_bo_close(fd2, bo));
	EXPECT_EQ(0, fdinfo(fd3, "drm-memory-system"));
	close(fd3);
	close(fd2);
}

TEST_F(dev, refused_events)
{
	int type = pmu_type(self->minor), cpu = pmu_cpu(self->minor);
	long nr = sysconf(_SC_NPROCESSORS_ONLN);
	int fd;

	ASSERT_LT(0, type);
	EXPECT_EQ(-ENOENT, perf_open(type, 0xff, -1, cpu, 0));
	EXPECT_EQ(-ENOENT, perf_open(type, 0x0a, -1, cpu, 0));
	/* sampling */
	EXPECT_EQ(-EINVAL, perf_open(type, 0, -1, cpu, 1000));
	/* per task */
	fd = perf_open(type, 0, 0, -1, 0);
	EXPECT_GT(0, fd);
	if (fd >= 0)
		close(fd);
	/* another CPU than the one in cpumask */
	if (nr > 1)
		EXPECT_EQ(-EINVAL, perf_open(type, 0, -1, cpu ? 0 : 1, 0));
}

/* CPU hotplug of a CPU the events are not on leaves them counting. */
TEST_F(dev, cpu_hotplug)
{
	const char *online = "/sys/devices/system/cpu/cpu1/online";
	int fd, cpu = pmu_cpu(self->minor);

	if (cpu != 0 || access(online, W_OK))
		SKIP(return, "no CPU 1 to take offline");
	fd = ev_open(self->minor, "jobs");
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, mi_write_file(online, "0"));
	ASSERT_EQ(0, run_jobs(self->fd, 2));
	ASSERT_EQ(0, mi_write_file(online, "1"));
	ASSERT_EQ(0, run_jobs(self->fd, 1));
	EXPECT_EQ(3, ev_read(fd));
	EXPECT_EQ(0, pmu_cpu(self->minor));
	close(fd);
}

#define UNPLUG_ID 61

static int new_dev(int *minor)
{
	int ret = mi_sim_new(UNPLUG_ID, "ethos-u55-high", NULL);

	if (ret)
		return ret < 0 ? ret : -errno;
	*minor = mi_sim_minor(UNPLUG_ID);
	return *minor < 0 ? *minor : 0;
}

static bool wait_pmu_gone(int minor)
{
	int i;

	for (i = 0; i < 300 && pmu_exists(minor); i++)
		usleep(10000);
	return !pmu_exists(minor);
}

/*
 * Removing a device with events open: they keep their last counts, the
 * PMU stays (unusable) until they are closed, then goes; the next device
 * gets its own.
 */
TEST(remove_device_with_events_open)
{
	int minor, minor2, fd, fds[3], i;
	int64_t before[3], after[3];
	static const char *const names[] = { "jobs", "busy-ns",
					     "temperature-mC" };
	char node[64];

	if (!mi_sim_present())
		SKIP(return, "metainfer_sim is not loaded");
	mi_sim_del(UNPLUG_ID);
	ASSERT_EQ(0, new_dev(&minor));
	ASSERT_TRUE(pmu_exists(minor));
	snprintf(node, sizeof(node), "/dev/dri/renderD%d", minor);
	fd = open(node, O_RDWR);
	ASSERT_LE(0, fd);
	for (i = 0; i < 3; i++) {
		fds[i] = ev_open(minor, names[i]);
		ASSERT_LE(0, fds[i]);
	}
	ASSERT_EQ(0, run_jobs(fd, 4));
	usleep(50 * 1000);
	for (i = 0; i < 3; i++)
		before[i] = ev_read(fds[i]);
	EXPECT_EQ(4, before[0]);
	EXPECT_LT(0, before[1]);

	ASSERT_EQ(0, mi_sim_del(UNPLUG_ID));
	close(fd);
	/* reads still work: the counts up to the removal, then no more */
	for (i = 0; i < 3; i++) {
		after[i] = ev_read(fds[i]);
		EXPECT_LE(before[i], after[i]);
	}
	EXPECT_EQ(4, after[0]);
	EXPECT_EQ(before[1], after[1]);
	usleep(50 * 1000);
	EXPECT_EQ(after[2], ev_read(fds[2])) TH_LOG("a gauge after removal");
	/* the PMU is held by the events but opens nothing new */
	EXPECT_TRUE(pmu_exists(minor));
	EXPECT_EQ(-ENODEV, ev_open(minor, "jobs"));

	/*
	 * A new device meanwhile: the old minor is held until the events let
	 * the old drm_device go, so it gets another one, and its own PMU.
	 */
	ASSERT_EQ(0, new_dev(&minor2));
	EXPECT_NE(minor, minor2);
	EXPECT_TRUE(pmu_exists(minor2));
	ASSERT_EQ(0, mi_sim_del(UNPLUG_ID));
	EXPECT_FALSE(pmu_exists(minor2));

	for (i = 0; i < 3; i++)
		close(fds[i]);
	/* the last close queues the unregistration behind a grace period */
	EXPECT_TRUE(wait_pmu_gone(minor));

	/* with no events open the PMU goes with the device */
	ASSERT_EQ(0, new_dev(&minor));
	ASSERT_TRUE(pmu_exists(minor));
	fds[0] = ev_open(minor, "jobs");
	ASSERT_LE(0, fds[0]);
	snprintf(node, sizeof(node), "/dev/dri/renderD%d", minor);
	fd = open(node, O_RDWR);
	ASSERT_LE(0, fd);
	EXPECT_EQ(0, run_jobs(fd, 1));
	close(fd);
	EXPECT_EQ(1, ev_read(fds[0]));
	close(fds[0]);
	EXPECT_TRUE(pmu_exists(minor));
	ASSERT_EQ(0, mi_sim_del(UNPLUG_ID));
	EXPECT_FALSE(pmu_exists(minor));
}

/* The load of the perf(1) and `metainfer top` checks. */
static int load_main(int argc, char **argv)
{
	struct drm_metainfer_get_counters c0, c1;
	int fd, minor, jobs, ret;
	int64_t until = 0;
	uint32_t hold;
	void *held;
	FILE *f;

	if (argc != 5 && argc != 6) {
		fprintf(stderr, "usage: %s --load MINOR JOBS FILE [SECONDS]\n",
			argv[0]);
		return 2;
	}
	if (argc == 6)
		until = mi_now_ns() + (int64_t)(atof(argv[5]) * 1e9);
	minor = atoi(argv[2]);
	jobs = atoi(argv[3]);
	fd = mi_open_minor(minor);
	if (fd < 0) {
		fprintf(stderr, "perf_test: renderD%d: %s\n", minor, strerror(-fd));
		return 1;
	}
	/* run_jobs() makes and closes its buffers per batch; this one keeps
	 * the client's memory (fdinfo drm-memory-system) >= 32 KiB all along,
	 * whenever `metainfer top` samples it */
	held = mi_bo_new(fd, 32768, &hold);
	if (!held || mi_counters(fd, 0, &c0))
		return 1;
	do
		ret = run_jobs(fd, jobs);
	while (!ret && mi_now_ns() < until);
	if (ret || mi_counters(fd, 0, &c1)) {
		fprintf(stderr, "perf_test: jobs failed: %d\n", ret);
		return 1;
	}
	f = fopen(argv[4], "w");
	if (!f)
		return 1;
	fprintf(f, "jobs %llu\nbusy_ns %llu\nmacs %llu\n",
		(unsigned long long)(c1.jobs_completed - c0.jobs_completed),
		(unsigned long long)(c1.busy_ns - c0.busy_ns),
		(unsigned long long)(c1.macs - c0.macs));
	fclose(f);
	munmap(held, 32768);
	mi_bo_close(fd, hold);
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "--load"))
		return load_main(argc, argv);
	return test_harness_run(argc, argv);
}
