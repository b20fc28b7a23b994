// SPDX-License-Identifier: GPL-2.0-only
/*
 * lib/health on planted /proc and /sys trees (make check-health, ~1 s):
 * every formula against its definition, the CPU's sources (stat, cpufreq,
 * meminfo, PSI, thermal zones, RAPL), an accelerator with scripted
 * counters and its hwmon, personality and fdinfo, absent sensors absent,
 * queue stability over the last 5 samples, a lost and a removed device,
 * and the sampler (thread period, stop, ring, callback).  TAP output.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "device/device.h"
#include "health/health.h"
#include "internal.h"

static int ntest, nfail;

static void ok(int cond, const char *fmt, ...)
{
	va_list ap;

	ntest++;
	if (!cond)
		nfail++;
	printf("%s %d - ", cond ? "ok" : "not ok", ntest);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

static int near(double a, double b)
{
	return fabs(a - b) <= 1e-9 * (1 + fabs(b));
}

static char root[256];

static void mkdirs(const char *path)
{
	char buf[512];

	snprintf(buf, sizeof(buf), "%s", path);
	for (char *p = buf + 1; *p; p++)
		if (*p == '/') {
			*p = 0;
			mkdir(buf, 0755);
			*p = '/';
		}
	mkdir(buf, 0755);
}

/* write ROOT/path (parents created) */
static void put(const char *path, const char *fmt, ...)
{
	char full[512], *slash;
	va_list ap;
	FILE *f;

	snprintf(full, sizeof(full), "%s%s", root, path);
	slash = strrchr(full, '/');
	*slash = 0;
	mkdirs(full);
	*slash = '/';
	f = fopen(full, "w");
	if (!f) {
		perror(full);
		exit(1);
	}
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fclose(f);
}

static void rm(const char *path)
{
	char full[512];

	snprintf(full, sizeof(full), "%s%s", root, path);
	unlink(full);
}

static void lnk(const char *target, const char *path)
{
	char full[512], *slash;

	snprintf(full, sizeof(full), "%s%s", root, path);
	slash = strrchr(full, '/');
	*slash = 0;
	mkdirs(full);
	*slash = '/';
	unlink(full);
	if (symlink(target, full)) {
		perror(full);
		exit(1);
	}
}

static void sub(char *out, const char *dir)
{
	snprintf(out, 300, "%s%s", root, dir);
}

static void test_formulas(void)
{
	double q5[5] = { 0, 4, 0, 4, 0 }, flat[5] = { 3, 3, 3, 3, 3 };
	double m, v;

	ok(near(mi_health_f_thermal(55000, 85000, 25000), 0.5),
	   "thermal: (85 - 55) / (85 - 25) = 0.5");
	ok(mi_health_f_thermal(90000, 85000, 25000) == 0 &&
		   mi_health_f_thermal(20000, 85000, 25000) == 1,
	   "thermal: clamped above throttle (0) and below ambient (1)");
	ok(near(mi_health_f_power(400, 1200), 1 - 400.0 / 1200) &&
		   mi_health_f_power(2000, 1200) == 0,
	   "power: 1 - P / budget, clamped");
	ok(near(mi_health_f_bandwidth(125e6, 500e6), 0.25) &&
		   mi_health_f_bandwidth(1e9, 500e6) == 1,
	   "bandwidth: bytes/s / bandwidth, clamped");
	ok(near(mi_health_f_queue(q5, 5, &m, &v), 1 / (1 + 3.84 / 2.6)) &&
		   near(m, 1.6) && near(v, 3.84),
	   "queue: 0,4,0,4,0 -> mean 1.6, var 3.84, 1 / (1 + var / (mean + 1)) = %.4f",
	   mi_health_f_queue(q5, 5, NULL, NULL));
	ok(mi_health_f_queue(flat, 5, NULL, &v) == 1 && v == 0,
	   "queue: a steady depth of 3 is perfectly stable");
	ok(near(mi_health_f_memory(600, 1000, 10, true), 0.54) &&
		   near(mi_health_f_memory(600, 1000, 10, false), 0.6),
	   "memory: avail / total x (1 - PSI some / 100)");
	ok(near(mi_health_f_compute(0.5, 0.75, 1), 0.375) &&
		   mi_health_f_compute(0.1, 1, 0) == 0,
	   "compute: (1 - busy) x clock ratio x ok ratio");
}

/* /proc/stat with the aggregate cpu line and procs_running */
static void put_stat(unsigned user, unsigned sys, unsigned idle,
		     unsigned iowait, unsigned running)
{
	put("/proc/stat",
	    "cpu  %u 0 %u %u %u 0 0 0 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n"
	    "intr 12345 1 2 3\nctxt 99\nprocs_running %u\nprocs_blocked 0\n",
	    user, sys, idle, iowait, running);
}

static void plant_cpu_full(void)
{
	put_stat(100, 100, 700, 100, 2);
	put("/proc/meminfo", "MemTotal:       1000000 kB\nMemFree:   100 kB\n"
			     "MemAvailable:    600000 kB\nBuffers: 1 kB\n");
	put("/proc/pressure/memory",
	    "some avg10=10.00 avg60=1.00 avg300=0.00 total=1\n"
	    "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n");
	put("/proc/pressure/cpu", "some avg10=42.50 avg60=1.00 avg300=0.00 total=1\n");
	put("/proc/pressure/io", "some avg10=3.25 avg60=1.00 avg300=0.00 total=1\n");
	put("/sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq", "1500000\n");
	put("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq", "3000000\n");
	put("/sys/devices/system/cpu/cpu1/cpufreq/scaling_cur_freq", "3000000\n");
	put("/sys/devices/system/cpu/cpu1/cpufreq/cpuinfo_max_freq", "3000000\n");
	/* zone0: 0.5 headroom against its passive trip; zone1: 0.8 */
	put("/sys/class/thermal/thermal_zone0/temp", "55000\n");
	put("/sys/class/thermal/thermal_zone0/trip_point_0_type", "critical\n");
	put("/sys/class/thermal/thermal_zone0/trip_point_0_temp", "105000\n");
	put("/sys/class/thermal/thermal_zone0/trip_point_1_type", "passive\n");
	put("/sys/class/thermal/thermal_zone0/trip_point_1_temp", "85000\n");
	put("/sys/class/thermal/thermal_zone1/temp", "40000\n");
	put("/sys/class/thermal/thermal_zone1/trip_point_0_type", "critical\n");
	put("/sys/class/thermal/thermal_zone1/trip_point_0_temp", "100000\n");
	put("/sys/class/thermal/cooling_device0/type", "Processor\n");
	put("/sys/class/powercap/intel-rapl:0/energy_uj", "1000000\n");
	put("/sys/class/powercap/intel-rapl:0/max_energy_range_uj", "262143328850\n");
	put("/sys/class/powercap/intel-rapl:0/constraint_0_power_limit_uw", "15000000\n");
	/* a subzone (core) is part of the package: ignored */
	put("/sys/class/powercap/intel-rapl:0:0/energy_uj", "5\n");
	put("/sys/class/powercap/intel-rapl:0:0/constraint_0_power_limit_uw", "1\n");
}

static struct mi_dev cpu_dev;

static void test_cpu(void)
{
	struct mi_health_opts o = { 0 };
	struct mi_dev *devs[1] = { &cpu_dev };
	struct mi_health_vec v, hist[8];
	struct mi_health *h;
	char proc[300], sys[300];
	double de, p_mw;
	int ret, n;
	unsigned run[] = { 2, 6, 2, 2, 2, 2 };

	cpu_dev.kind = MI_DEV_CPU;
	snprintf(cpu_dev.name, sizeof(cpu_dev.name), "cpu");
	plant_cpu_full();
	sub(proc, "/proc");
	sub(sys, "/sys");
	o.proc_root = proc;
	o.sys_root = sys;
	o.ring = 4;
	ret = mi_health_create(devs, 1, &o, &h);
	ok(!ret, "sampler over the planted CPU");
	if (ret)
		return;
	mi_health_sample(h, &v);
	ok(!mi_health_has(&v, MI_HEALTH_COMPUTE) &&
		   !mi_health_has(&v, MI_HEALTH_POWER) &&
		   !mi_health_has(&v, MI_HEALTH_QUEUE),
	   "first sample: no rates yet (compute, power, queue absent)");
	ok(mi_health_has(&v, MI_HEALTH_MEMORY) &&
		   near(v.v[MI_HEALTH_MEMORY], 0.6 * 0.9),
	   "memory = 600000 / 1000000 x (1 - 10 %%) = %.3f",
	   v.v[MI_HEALTH_MEMORY]);
	ok(mi_health_has(&v, MI_HEALTH_THERMAL) &&
		   near(v.v[MI_HEALTH_THERMAL], 0.5) &&
		   v.raw[MI_HRAW_THROTTLE_MC] == 85000 &&
		   v.raw[MI_HRAW_TEMP_MC] == 55000,
	   "thermal: hottest zone against its passive trip = %.3f",
	   v.v[MI_HEALTH_THERMAL]);
	ok(!mi_health_has(&v, MI_HEALTH_BANDWIDTH),
	   "CPU bandwidth saturation absent (no counter)");
	ok(v.raw[MI_HRAW_PSI_CPU] == 42.5 && v.raw[MI_HRAW_PSI_IO] == 3.25 &&
		   v.raw[MI_HRAW_POWER_BUDGET_MW] == 15000,
	   "raw: PSI cpu/io, RAPL package limit (subzone ignored)");

	usleep(50000);
	put_stat(400, 200, 1100, 100, run[0]); /* +800 jiffies, +400 idle */
	put("/sys/class/powercap/intel-rapl:0/energy_uj", "1500000\n");
	mi_health_sample(h, &v);
	ok(mi_health_has(&v, MI_HEALTH_COMPUTE) &&
		   near(v.v[MI_HEALTH_COMPUTE], 0.5 * 0.75) &&
		   near(v.raw[MI_HRAW_BUSY], 0.5),
	   "compute = (1 - busy 0.5) x cpufreq 2.25/3 GHz = %.4f",
	   v.v[MI_HEALTH_COMPUTE]);
	de = 500000;
	p_mw = de / (v.interval_ns / 1e9) / 1000;
	ok(mi_health_has(&v, MI_HEALTH_POWER) &&
		   near(v.raw[MI_HRAW_POWER_MW], p_mw) &&
		   near(v.v[MI_HEALTH_POWER], mi_health_clamp01(1 - p_mw / 15000)),
	   "power: RAPL 0.5 J over %.1f ms = %.0f mW of 15 W -> %.3f",
	   v.interval_ns / 1e6, p_mw, v.v[MI_HEALTH_POWER]);
	/* the wrap of energy_uj is undone with max_energy_range_uj */
	put("/sys/class/powercap/intel-rapl:0/energy_uj", "100\n");
	mi_health_sample(h, &v);
	ok(mi_health_has(&v, MI_HEALTH_POWER) && v.raw[MI_HRAW_POWER_MW] > 0,
	   "power: an energy counter wrap is not a negative power");

	for (int i = 1; i < 6; i++) {
		put_stat(400 + 100 * i, 200, 1100 + 100 * i, 100, run[i]);
		mi_health_sample(h, &v);
	}
	/* window: the last five procs_running values 6 2 2 2 2 */
	ok(v.raw[MI_HRAW_QUEUE_N] == 5 && near(v.raw[MI_HRAW_QUEUE_MEAN], 2.8) &&
		   near(v.raw[MI_HRAW_QUEUE_VAR], 2.56) &&
		   near(v.v[MI_HEALTH_QUEUE], 1 / (1 + 2.56 / 3.8)),
	   "queue: one burst in the last 5 (6 2 2 2 2) -> var 2.56, stability %.3f",
	   v.v[MI_HEALTH_QUEUE]);
	put_stat(1100, 200, 1800, 100, 2);
	mi_health_sample(h, &v);
	ok(near(v.v[MI_HEALTH_QUEUE], 1) && v.raw[MI_HRAW_QUEUE_VAR] == 0,
	   "queue: the burst left the window of 5 -> stability 1");

	n = mi_health_latest(h, 0, hist, 8);
	ok(n == 4 && hist[0].seq == v.seq && hist[1].seq == v.seq - 1 &&
		   hist[3].seq == v.seq - 3,
	   "ring of 4: the newest four, newest first");
	ok(mi_health_latest(h, 1, hist, 8) == -EINVAL,
	   "latest of an unknown device: -EINVAL (%s)", mi_last_error());

	/* sensors disappear: absent, never zero */
	rm("/sys/class/thermal/thermal_zone0/temp");
	rm("/sys/class/thermal/thermal_zone1/trip_point_0_type");
	rm("/sys/class/powercap/intel-rapl:0/energy_uj");
	rm("/proc/pressure/memory");
	mi_health_sample(h, &v);
	ok(!mi_health_has(&v, MI_HEALTH_THERMAL) &&
		   !(v.raw_present & (1ull << MI_HRAW_TEMP_MC)),
	   "thermal zones without a reading or a trip: thermal absent");
	ok(!mi_health_has(&v, MI_HEALTH_POWER) &&
		   !(v.raw_present & (1ull << MI_HRAW_POWER_MW)),
	   "no RAPL energy: power absent");
	ok(mi_health_has(&v, MI_HEALTH_MEMORY) &&
		   near(v.v[MI_HEALTH_MEMORY], 0.6) &&
		   !(v.raw_present & (1ull << MI_HRAW_PSI_MEM)),
	   "no memory PSI: memory = avail / total alone");
	mi_health_destroy(h);
}

/* An empty tree: everything absent, nothing crashes. */
static void test_empty(void)
{
	struct mi_health_opts o = { .proc_root = "/nonexistent/proc",
				    .sys_root = "/nonexistent/sys" };
	struct mi_dev *devs[1] = { &cpu_dev };
	struct mi_health_vec v;
	struct mi_health *h;

	ok(!mi_health_create(devs, 1, &o, &h), "sampler over nothing");
	mi_health_sample(h, &v);
	mi_health_sample(h, &v);
	ok(v.present == 0 && v.raw_present == 0,
	   "no /proc, no /sys: every dimension and raw value absent");
	mi_health_destroy(h);
}

/* ---- a scripted accelerator ------------------------------------------ */
static struct mi_dev_counters script;
static int script_err, script_alive = 1;

static int fake_counters(struct mi_dev *d, struct mi_dev_counters *c)
{
	if (script_err)
		return script_err;
	*c = script;
	return 0;
}

static int fake_alive(struct mi_dev *d)
{
	return script_alive;
}

static const struct mi_dev_ops fake_ops = {
	.counters = fake_counters,
	.alive = fake_alive,
};
static const struct mi_dev_ops nocounter_ops = { 0 };

static void test_accel(void)
{
	struct mi_dev *d = calloc(1, sizeof(*d)), *e = calloc(1, sizeof(*e));
	struct mi_dev *devs[2] = { d, e };
	struct mi_health_opts o = { 0 };
	struct mi_health_vec v[2];
	struct mi_health *h;
	char proc[300], sys[300];
	double busy, bw;

	d->ops = &fake_ops;
	d->kind = MI_DEV_KERNEL;
	d->index = 1;
	snprintf(d->name, sizeof(d->name), "npu0");
	snprintf(d->node, sizeof(d->node), "/dev/dri/renderD130");
	d->caps.clock_khz = 500000;
	d->caps.dma_bw = 500000000;
	d->caps.num_queues = 2;
	e->ops = &nocounter_ops;
	e->kind = MI_DEV_EMU;
	e->index = 2;
	snprintf(e->name, sizeof(e->name), "emu0");
	snprintf(e->node, sizeof(e->node), "/dev/dri/renderD131");

	put("/sys/class/drm/renderD130/device/personality",
	    "name=ethos-u55-high\nclock_hz=500000000\nrth_mc_per_w=50000\n"
	    "ambient_mc=25000\nthrottle_mc=85000\nidle_mw=10\n");
	put("/sys/class/drm/renderD130/device/hwmon/hwmon7/temp1_input", "70000\n");
	/* fdinfo: pid 100 has the node twice (dup: one client), pid 200 once */
	lnk("/dev/dri/renderD130", "/proc/100/fd/3");
	lnk("/dev/dri/renderD130", "/proc/100/fd/4");
	lnk("/dev/null", "/proc/100/fd/5");
	lnk("/dev/dri/renderD130", "/proc/200/fd/7");
	lnk("/dev/dri/renderD131", "/proc/200/fd/8");
	put("/proc/100/fdinfo/3", "pos:\t0\ndrm-driver:\tmetainfer\ndrm-client-id:\t7\n"
				  "drm-engine-q0:\t100 ns\ndrm-memory-system:\t1024 KiB\n");
	put("/proc/100/fdinfo/4", "pos:\t0\ndrm-driver:\tmetainfer\ndrm-client-id:\t7\n"
				  "drm-memory-system:\t1024 KiB\n");
	put("/proc/200/fdinfo/7", "pos:\t0\ndrm-driver:\tmetainfer\ndrm-client-id:\t9\n"
				  "drm-memory-system:\t2048 KiB\n");
	put("/proc/200/fdinfo/8", "pos:\t0\ndrm-driver:\tmetainfer\ndrm-client-id:\t11\n"
				  "drm-memory-system:\t4096 KiB\n");

	sub(proc, "/proc");
	sub(sys, "/sys");
	o.proc_root = proc;
	o.sys_root = sys;
	ok(!mi_health_create(devs, 2, &o, &h), "sampler over two accelerators");

	memset(&script, 0, sizeof(script));
	script.valid = DRM_METAINFER_VALID_TEMP | DRM_METAINFER_VALID_POWER |
		       DRM_METAINFER_VALID_CLOCK | DRM_METAINFER_VALID_THROTTLE;
	script.temperature_mc = 55000;
	script.power_mw = 400;
	script.clock_khz = 500000;
	script.queue_depth = 1;
	script.jobs_completed = 10;
	mi_health_sample(h, v);
	ok(!mi_health_has(&v[0], MI_HEALTH_COMPUTE) &&
		   !mi_health_has(&v[0], MI_HEALTH_BANDWIDTH),
	   "first sample: compute and bandwidth absent (no interval)");
	ok(mi_health_has(&v[0], MI_HEALTH_THERMAL) &&
		   near(v[0].v[MI_HEALTH_THERMAL], 0.5),
	   "thermal: counters' 55 C, personality 25..85 C -> 0.5");
	ok(mi_health_has(&v[0], MI_HEALTH_POWER) &&
		   near(v[0].raw[MI_HRAW_POWER_BUDGET_MW], 1200) &&
		   near(v[0].v[MI_HEALTH_POWER], 1 - 400.0 / 1200),
	   "power: 400 mW of (85 - 25) C / 50 C/W = 1200 mW -> %.3f",
	   v[0].v[MI_HEALTH_POWER]);
	ok(v[0].raw[MI_HRAW_CLIENTS] == 2 &&
		   v[0].raw[MI_HRAW_CLIENT_MEM_KB] == 3072,
	   "fdinfo: 2 clients (a dup counts once), 3072 KiB");
	ok(v[1].raw[MI_HRAW_CLIENTS] == 1 && v[1].raw[MI_HRAW_CLIENT_MEM_KB] == 4096,
	   "fdinfo, same walk: the other node's one client, 4096 KiB");
	ok(e->ops->counters == NULL && v[1].present == (1u << MI_HEALTH_MEMORY),
	   "a device without counters or sensors: memory only, the rest absent");

	usleep(30000);
	script.busy_ns += 10000000;
	script.dma_bytes_in += 3000000;
	script.dma_bytes_out += 1000000;
	script.stall_ns += 2500000;
	script.clock_khz = 250000;
	script.throttle = DRM_METAINFER_THROTTLE_THERMAL;
	script.jobs_completed += 3;
	script.jobs_failed += 1;
	script.queue_depth = 3;
	mi_health_sample(h, v);
	busy = 10e6 / v[0].interval_ns;
	bw = 4e6 / (v[0].interval_ns / 1e9);
	ok(mi_health_has(&v[0], MI_HEALTH_COMPUTE) &&
		   near(v[0].v[MI_HEALTH_COMPUTE], (1 - busy) * 0.5 * 0.75),
	   "compute = (1 - busy %.3f) x clock 250/500 MHz x 3 of 4 jobs ok = %.4f",
	   busy, v[0].v[MI_HEALTH_COMPUTE]);
	ok(mi_health_has(&v[0], MI_HEALTH_BANDWIDTH) &&
		   near(v[0].v[MI_HEALTH_BANDWIDTH], mi_health_clamp01(bw / 500e6)) &&
		   near(v[0].raw[MI_HRAW_STALL], 0.25),
	   "bandwidth = 4 MB / %.1f ms / 0.5 GB/s = %.4f; stall 0.25",
	   v[0].interval_ns / 1e6, v[0].v[MI_HEALTH_BANDWIDTH]);
	ok(mi_health_has(&v[0], MI_HEALTH_QUEUE) &&
		   near(v[0].v[MI_HEALTH_QUEUE], 1 / (1 + 1.0 / 3)),
	   "queue: depths 1, 3 -> var 1, mean 2 -> %.3f", v[0].v[MI_HEALTH_QUEUE]);

	script.jobs_timed_out += 1;
	script.busy_ns += 1000;
	mi_health_sample(h, v);
	ok(mi_health_has(&v[0], MI_HEALTH_COMPUTE) && v[0].v[MI_HEALTH_COMPUTE] == 0,
	   "a job timed out in the interval (a hang): compute readiness 0");
	mi_health_sample(h, v);
	ok(v[0].v[MI_HEALTH_COMPUTE] > 0,
	   "next interval without a timeout: compute readiness back (%.3f)",
	   v[0].v[MI_HEALTH_COMPUTE]);

	/* the counters lose their temperature: hwmon's 70 C is used */
	script.valid = DRM_METAINFER_VALID_CLOCK;
	mi_health_sample(h, v);
	ok(near(v[0].v[MI_HEALTH_THERMAL], 0.25) && v[0].raw[MI_HRAW_TEMP_MC] == 70000,
	   "no temperature in the counters: hwmon temp1_input 70 C -> 0.25");
	ok(!mi_health_has(&v[0], MI_HEALTH_POWER) &&
		   !(v[0].raw_present & (1ull << MI_HRAW_POWER_MW)),
	   "no power reading anywhere: power absent (not zero)");
	/* live personality change: a hotter room */
	put("/sys/class/drm/renderD130/device/personality",
	    "rth_mc_per_w=50000\nambient_mc=45000\nthrottle_mc=85000\n");
	mi_health_sample(h, v);
	ok(near(v[0].v[MI_HEALTH_THERMAL], 15.0 / 40),
	   "personality changed live (ambient 45 C): thermal %.3f",
	   v[0].v[MI_HEALTH_THERMAL]);
	/* no personality: hwmon temp1_max is the throttle point */
	rm("/sys/class/drm/renderD130/device/personality");
	put("/sys/class/drm/renderD130/device/hwmon/hwmon7/temp1_max", "95000\n");
	mi_health_sample(h, v);
	ok(near(v[0].v[MI_HEALTH_THERMAL], 25.0 / 70),
	   "no personality: hwmon temp1_max 95 C, default ambient 25 C -> %.3f",
	   v[0].v[MI_HEALTH_THERMAL]);
	rm("/sys/class/drm/renderD130/device/hwmon/hwmon7/temp1_max");
	mi_health_sample(h, v);
	ok(!mi_health_has(&v[0], MI_HEALTH_THERMAL),
	   "a temperature but no throttle point: thermal absent");

	script_alive = 0;
	mi_health_sample(h, v);
	ok((v[0].flags & MI_HEALTH_F_LOST) && mi_health_has(&v[0], MI_HEALTH_COMPUTE) &&
		   v[0].v[MI_HEALTH_COMPUTE] == 0,
	   "device lost (alive 0): flagged, compute readiness 0");
	script_alive = 1;
	script_err = -ENODEV;
	mi_health_sample(h, v);
	ok((v[0].flags & MI_HEALTH_F_GONE) && v[0].present == 0 &&
		   v[0].interval_ns == 0,
	   "device removed (-ENODEV): gone, every dimension absent");
	script_err = 0;
	mi_health_sample(h, v);
	ok(!(v[0].flags & MI_HEALTH_F_GONE) &&
		   !mi_health_has(&v[0], MI_HEALTH_COMPUTE),
	   "back again: a fresh start (no rate across the gap)");
	mi_health_destroy(h);
	free(d);
	free(e);
}

static int rounds;

static void count_round(const struct mi_health_vec *v, int n, void *arg)
{
	__atomic_add_fetch(&rounds, 1, __ATOMIC_SEQ_CST);
}

static void test_sampler(void)
{
	struct mi_health_opts o = { .period_ms = 20, .cb = count_round,
				    .no_fdinfo = true };
	struct mi_dev *devs[1] = { &cpu_dev };
	struct mi_health *h;
	char proc[300], sys[300];
	int a, b;

	sub(proc, "/proc");
	sub(sys, "/sys");
	o.proc_root = proc;
	o.sys_root = sys;
	ok(mi_health_create(devs, 0, &o, &h) == -EINVAL,
	   "no devices: -EINVAL (%s)", mi_last_error());
	ok(!mi_health_create(devs, 1, &o, &h), "sampler, period 20 ms");
	usleep(100000);
	ok(__atomic_load_n(&rounds, __ATOMIC_SEQ_CST) == 0,
	   "not started: no sampling");
	mi_health_start(h);
	usleep(300000);
	mi_health_stop(h);
	a = __atomic_load_n(&rounds, __ATOMIC_SEQ_CST);
	ok(a >= 5 && a <= 30, "started for 300 ms at 20 ms: %d rounds", a);
	usleep(150000);
	b = __atomic_load_n(&rounds, __ATOMIC_SEQ_CST);
	ok(b <= a + 1, "stopped: the thread sleeps (%d -> %d)", a, b);
	ok(mi_health_set_period(h, 0) == -EINVAL, "period 0: -EINVAL (%s)",
	   mi_last_error());
	mi_health_set_period(h, 5);
	mi_health_start(h);
	usleep(200000);
	mi_health_destroy(h);
	a = __atomic_load_n(&rounds, __ATOMIC_SEQ_CST);
	ok(a - b >= 5, "restarted at 5 ms for 200 ms: %d more rounds; destroy joins", a - b);
}

int main(void)
{
	char cmd[300];

	snprintf(root, sizeof(root), "/tmp/test-health.XXXXXX");
	if (!mkdtemp(root)) {
		perror("mkdtemp");
		return 1;
	}
	test_formulas();
	test_cpu();
	test_empty();
	test_accel();
	test_sampler();
	printf("1..%d\n", ntest);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	if (system(cmd))
		fprintf(stderr, "could not remove %s\n", root);
	if (nfail)
		printf("# %d of %d failed\n", nfail, ntest);
	return nfail ? 1 : 0;
}
