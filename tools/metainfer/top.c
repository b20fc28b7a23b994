// SPDX-License-Identifier: GPL-2.0-only
/*
 * metainfer top: a top for MetaInfer accelerators, in the manner of
 * intel_gpu_top.
 *
 * Devices are the render nodes /dev/dri/renderD* whose DRM driver
 * (DRM_IOCTL_VERSION) is "metainfer"; their figures come from
 * GET_COUNTERS (device scope) and GET_PARAM.  Processes are the holders
 * of file descriptors on those nodes, read from /proc/PID/fdinfo/FD (the
 * drm-usage-stats keys drm-client-id, drm-engine-q<i>, drm-memory-system
 * and metainfer-jobs-q<i>); dup()ed descriptors of one open file share a
 * drm-client-id and count once.  Rates are differences between two
 * samples one interval apart, so even --once waits one interval.
 * Documented in Documentation/cli.rst, including the --json format.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "drm/metainfer_accel.h"

int mi_top_main(int argc, char **argv);

#define TOP_MAX_DEVS 64
#define TOP_MAX_QUEUES DRM_METAINFER_MAX_QUEUES

struct top_dev {
	int fd;
	int minor;
	char name[64];
	char backend[32];
	uint64_t queues;
	uint64_t clock_nominal_khz;
	uint64_t lost;
	bool gone;
};

struct top_client {
	uint64_t client_id;
	int pid;
	int minor;
	char comm[32];
	uint64_t engine_ns[TOP_MAX_QUEUES];
	uint64_t jobs[TOP_MAX_QUEUES];
	uint32_t nq;
	uint64_t mem_kib;
	uint64_t t_ns;
};

struct top_sample {
	uint64_t t_ns;
	struct drm_metainfer_get_counters c[TOP_MAX_DEVS];
	struct top_client *cl;
	size_t ncl, cap;
};

static volatile sig_atomic_t top_stop;

static void top_sigint(int sig)
{
	top_stop = 1;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static int xioctl(int fd, unsigned long req, void *arg)
{
	int ret;

	do {
		ret = ioctl(fd, req, arg);
	} while (ret == -1 && (errno == EINTR || errno == EAGAIN));
	return ret == -1 ? -errno : 0;
}

static int get_param(int fd, uint32_t param, uint64_t *v, char *blob,
		     size_t len)
{
	struct drm_metainfer_get_param p;
	int ret;

	memset(&p, 0, sizeof(p));
	p.size = sizeof(p);
	p.param = param;
	if (blob) {
		memset(blob, 0, len);
		p.data_ptr = (uintptr_t)blob;
		p.data_size = len - 1;
	}
	ret = xioctl(fd, DRM_IOCTL_METAINFER_GET_PARAM, &p);
	if (!ret && v)
		*v = p.value;
	return ret;
}

static int get_counters(int fd, struct drm_metainfer_get_counters *c)
{
	memset(c, 0, sizeof(*c));
	c->size = sizeof(*c);
	return xioctl(fd, DRM_IOCTL_METAINFER_GET_COUNTERS, c);
}

/* Is the open DRM node @fd driven by metainfer? */
static bool is_metainfer(int fd)
{
	struct drm_version v;
	char name[32] = "";

	memset(&v, 0, sizeof(v));
	v.name = name;
	v.name_len = sizeof(name) - 1;
	return !xioctl(fd, DRM_IOCTL_VERSION, &v) && !strcmp(name, "metainfer");
}

static int dev_cmp(const void *a, const void *b)
{
	return ((const struct top_dev *)a)->minor -
	       ((const struct top_dev *)b)->minor;
}

/* Open every metainfer render node; returns how many, or -errno. */
static int find_devices(struct top_dev *devs, int max, int *denied)
{
	struct dirent *de;
	int n = 0, fd;
	char path[300];
	DIR *d;

	*denied = 0;
	d = opendir("/dev/dri");
	if (!d)
		return 0;
	while ((de = readdir(d)) && n < max) {
		struct top_dev *dev = &devs[n];

		if (strncmp(de->d_name, "renderD", 7) || !isdigit(de->d_name[7]))
			continue;
		snprintf(path, sizeof(path), "/dev/dri/%s", de->d_name);
		fd = open(path, O_RDWR | O_CLOEXEC);
		if (fd < 0) {
			if (errno == EACCES || errno == EPERM)
				(*denied)++;
			continue;
		}
		if (!is_metainfer(fd)) {
			close(fd);
			continue;
		}
		memset(dev, 0, sizeof(*dev));
		dev->fd = fd;
		dev->minor = atoi(de->d_name + 7);
		get_param(fd, DRM_METAINFER_PARAM_NAME, NULL, dev->name,
			  sizeof(dev->name));
		get_param(fd, DRM_METAINFER_PARAM_BACKEND, NULL, dev->backend,
			  sizeof(dev->backend));
		get_param(fd, DRM_METAINFER_PARAM_NUM_QUEUES, &dev->queues, NULL, 0);
		get_param(fd, DRM_METAINFER_PARAM_CLOCK_KHZ,
			  &dev->clock_nominal_khz, NULL, 0);
		n++;
	}
	closedir(d);
	qsort(devs, n, sizeof(devs[0]), dev_cmp);
	return n;
}

static int dev_index(const struct top_dev *devs, int ndev, int minor)
{
	int i;

	for (i = 0; i < ndev; i++)
		if (devs[i].minor == minor)
			return i;
	return -1;
}

static struct top_client *client_find(struct top_sample *s, uint64_t id)
{
	size_t i;

	for (i = 0; i < s->ncl; i++)
		if (s->cl[i].client_id == id)
			return &s->cl[i];
	return NULL;
}

/* Parse one fdinfo file of a metainfer node into @c; 0 or -1. */
static int parse_fdinfo(const char *path, struct top_client *c)
{
	char line[256], key[64];
	unsigned long long v;
	bool ours = false, have_id = false;
	unsigned int q;
	FILE *f = fopen(path, "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%63[^:]:%llu", key, &v) != 2) {
			if (!strncmp(line, "drm-driver:", 11) &&
			    strstr(line + 11, "metainfer"))
				ours = true;
			continue;
		}
		if (!strcmp(key, "drm-client-id")) {
			c->client_id = v;
			have_id = true;
		} else if (sscanf(key, "drm-engine-q%u", &q) == 1 &&
			   q < TOP_MAX_QUEUES) {
			c->engine_ns[q] = v;
			if (q + 1 > c->nq)
				c->nq = q + 1;
		} else if (sscanf(key, "metainfer-jobs-q%u", &q) == 1 &&
			   q < TOP_MAX_QUEUES) {
			c->jobs[q] = v;
		} else if (!strcmp(key, "drm-memory-system")) {
			c->mem_kib = v;
		}
	}
	fclose(f);
	return ours && have_id ? 0 : -1;
}

static void read_comm(int pid, char *comm, size_t len)
{
	char path[64];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/comm", pid);
	comm[0] = 0;
	f = fopen(path, "r");
	if (!f)
		return;
	if (fgets(comm, len, f))
		comm[strcspn(comm, "\n")] = 0;
	fclose(f);
}

/* Every client of our devices, except this process's own files. */
static void scan_clients(struct top_sample *s, const struct top_dev *devs,
			 int ndev)
{
	char path[300], link[128];
	struct dirent *pe, *fe;
	int self = getpid();
	DIR *proc, *fds;

	s->ncl = 0;
	proc = opendir("/proc");
	if (!proc)
		return;
	while ((pe = readdir(proc))) {
		int pid = atoi(pe->d_name);

		if (pid <= 0 || pid == self)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/fd", pid);
		fds = opendir(path);
		if (!fds)
			continue;
		while ((fe = readdir(fds))) {
			struct top_client c;
			ssize_t n;
			int minor;

			if (fe->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "/proc/%d/fd/%s", pid,
				 fe->d_name);
			n = readlink(path, link, sizeof(link) - 1);
			if (n <= 0)
				continue;
			link[n] = 0;
			if (sscanf(link, "/dev/dri/renderD%d", &minor) != 1 ||
			    dev_index(devs, ndev, minor) < 0)
				continue;
			memset(&c, 0, sizeof(c));
			snprintf(path, sizeof(path), "/proc/%d/fdinfo/%s", pid,
				 fe->d_name);
			if (parse_fdinfo(path, &c) || client_find(s, c.client_id))
				continue;
			/* /proc scans are slow: each client has its own time */
			c.t_ns = now_ns();
			c.pid = pid;
			c.minor = minor;
			read_comm(pid, c.comm, sizeof(c.comm));
			if (s->ncl == s->cap) {
				size_t cap = s->cap ? 2 * s->cap : 16;
				struct top_client *p =
					realloc(s->cl, cap * sizeof(*p));

				if (!p)
					break;
				s->cl = p;
				s->cap = cap;
			}
			s->cl[s->ncl++] = c;
		}
		closedir(fds);
	}
	closedir(proc);
}

static void take_sample(struct top_sample *s, struct top_dev *devs, int ndev)
{
	int i;

	s->t_ns = now_ns();
	for (i = 0; i < ndev; i++) {
		/* a removed device answers -ENODEV from then on */
		if (get_counters(devs[i].fd, &s->c[i])) {
			memset(&s->c[i], 0, sizeof(s->c[i]));
			devs[i].gone = true;
		}
		get_param(devs[i].fd, DRM_METAINFER_PARAM_DEVICE_LOST,
			  &devs[i].lost, NULL, 0);
	}
	scan_clients(s, devs, ndev);
}

static double rate(uint64_t a, uint64_t b, double dt_s)
{
	return b >= a && dt_s > 0 ? (double)(b - a) / dt_s : 0;
}

static uint64_t sum(const uint64_t *v, uint32_t n)
{
	uint64_t t = 0;
	uint32_t i;

	for (i = 0; i < n; i++)
		t += v[i];
	return t;
}

static void throttle_str(const struct drm_metainfer_get_counters *c,
			 char *buf, size_t len, bool json)
{
	static const struct {
		uint64_t bit;
		const char *name;
	} kinds[] = {
		{ DRM_METAINFER_THROTTLE_THERMAL, "thermal" },
		{ DRM_METAINFER_THROTTLE_POWER, "power" },
	};
	size_t i, n = 0;

	if (!(c->valid & DRM_METAINFER_VALID_THROTTLE)) {
		snprintf(buf, len, json ? "null" : "n/a");
		return;
	}
	buf[0] = 0;
	if (json)
		n += snprintf(buf + n, len - n, "[");
	for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]) && n < len; i++) {
		if (!(c->throttle & kinds[i].bit))
			continue;
		n += snprintf(buf + n, len - n, json ? "%s\"%s\"" : "%s%s",
			      n > (json ? 1u : 0u) ? "," : "", kinds[i].name);
	}
	if (json && n < len)
		snprintf(buf + n, len - n, "]");
	else if (!json && !n)
		snprintf(buf, len, "-");
}

/* JSON string of @s (device and process names are short and plain). */
static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(f, "\\u%04x", *s);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

static void print_json(FILE *f, const struct top_dev *devs, int ndev,
		       const struct top_sample *a, const struct top_sample *b)
{
	double dt = (b->t_ns - a->t_ns) / 1e9;
	char thr[64];
	size_t k;
	int i;

	fprintf(f, "{\"version\":1,\"timestamp_ns\":%" PRIu64
		   ",\"interval_s\":%.3f,\"devices\":[",
		b->t_ns, dt);
	for (i = 0; i < ndev; i++) {
		const struct drm_metainfer_get_counters *c0 = &a->c[i], *c = &b->c[i];
		const struct top_dev *d = &devs[i];
		/* GET_COUNTERS' own timestamps bracket exactly its counts */
		double ddt = c->timestamp_ns > c0->timestamp_ns ?
				     (c->timestamp_ns - c0->timestamp_ns) / 1e9 :
				     dt;
		double util = d->queues ? rate(c0->busy_ns, c->busy_ns, ddt) /
						  1e7 / d->queues : 0;

		throttle_str(c, thr, sizeof(thr), true);
		fprintf(f, "%s{\"minor\":%d,\"node\":\"/dev/dri/renderD%d\",\"name\":",
			i ? "," : "", d->minor, d->minor);
		json_str(f, d->name);
		fprintf(f, ",\"backend\":");
		json_str(f, d->backend);
		fprintf(f, ",\"queues\":%" PRIu64 ",\"lost\":%s"
			   ",\"utilization_pct\":%.2f,\"jobs_per_s\":%.2f"
			   ",\"failed_per_s\":%.2f",
			d->queues, d->lost ? "true" : "false", util,
			rate(c0->jobs_completed, c->jobs_completed, ddt),
			rate(c0->jobs_failed + c0->jobs_timed_out,
			     c->jobs_failed + c->jobs_timed_out, ddt));
		fprintf(f, ",\"jobs_submitted\":%llu,\"jobs_completed\":%llu"
			   ",\"jobs_failed\":%llu,\"jobs_timed_out\":%llu"
			   ",\"busy_ns\":%llu,\"macs\":%llu,\"queue_depth\":%llu",
			(unsigned long long)c->jobs_submitted,
			(unsigned long long)c->jobs_completed,
			(unsigned long long)c->jobs_failed,
			(unsigned long long)c->jobs_timed_out,
			(unsigned long long)c->busy_ns,
			(unsigned long long)c->macs,
			(unsigned long long)c->queue_depth);
		if (c->valid & DRM_METAINFER_VALID_TEMP)
			fprintf(f, ",\"temperature_mc\":%lld", (long long)c->temp_mc);
		else
			fprintf(f, ",\"temperature_mc\":null");
		if (c->valid & DRM_METAINFER_VALID_POWER)
			fprintf(f, ",\"power_mw\":%llu", (unsigned long long)c->power_mw);
		else
			fprintf(f, ",\"power_mw\":null");
		if (c->valid & DRM_METAINFER_VALID_CLOCK)
			fprintf(f, ",\"clock_khz\":%llu", (unsigned long long)c->clock_khz);
		else
			fprintf(f, ",\"clock_khz\":null");
		fprintf(f, ",\"clock_nominal_khz\":%" PRIu64 ",\"throttle\":%s"
			   ",\"removed\":%s}",
			d->clock_nominal_khz, thr, d->gone ? "true" : "false");
	}
	fprintf(f, "],\"clients\":[");
	for (k = 0; k < b->ncl; k++) {
		const struct top_client *c = &b->cl[k];
		const struct top_client *p = client_find((struct top_sample *)a,
							 c->client_id);
		uint64_t busy = sum(c->engine_ns, c->nq), jobs = sum(c->jobs, c->nq);
		double cdt = p ? (c->t_ns - p->t_ns) / 1e9 : 0;
		uint32_t q;

		fprintf(f, "%s{\"pid\":%d,\"comm\":", k ? "," : "", c->pid);
		json_str(f, c->comm);
		fprintf(f, ",\"minor\":%d,\"client_id\":%" PRIu64 ",\"engine_ns\":{",
			c->minor, c->client_id);
		for (q = 0; q < c->nq; q++)
			fprintf(f, "%s\"q%u\":%" PRIu64, q ? "," : "", q,
				c->engine_ns[q]);
		fprintf(f, "},\"busy_pct\":%.2f,\"jobs\":%" PRIu64
			   ",\"jobs_per_s\":%.2f,\"memory_kib\":%" PRIu64 "}",
			p ? rate(sum(p->engine_ns, p->nq), busy, cdt) / 1e7 : 0,
			jobs, p ? rate(sum(p->jobs, p->nq), jobs, cdt) : 0,
			c->mem_kib);
	}
	fprintf(f, "]}\n");
	fflush(f);
}

static void print_text(FILE *f, const struct top_dev *devs, int ndev,
		       const struct top_sample *a, const struct top_sample *b,
		       bool clear)
{
	double dt = (b->t_ns - a->t_ns) / 1e9;
	char thr[64], temp[16], power[16], clock[32];
	size_t k;
	int i;

	if (clear)
		fputs("\033[H\033[2J", f);
	fprintf(f, "metainfer top - %d device%s, interval %.2f s\n\n", ndev,
		ndev == 1 ? "" : "s", dt);
	fprintf(f, "%-11s %-18s %6s %8s %6s %7s %7s %11s %s\n", "DEVICE",
		"NAME", "UTIL%", "JOBS/S", "QUEUE", "TEMP C", "POWER W",
		"CLOCK MHz", "THROTTLE");
	for (i = 0; i < ndev; i++) {
		const struct drm_metainfer_get_counters *c0 = &a->c[i], *c = &b->c[i];
		const struct top_dev *d = &devs[i];
		/* GET_COUNTERS' own timestamps bracket exactly its counts */
		double ddt = c->timestamp_ns > c0->timestamp_ns ?
				     (c->timestamp_ns - c0->timestamp_ns) / 1e9 :
				     dt;
		double util = d->queues ? rate(c0->busy_ns, c->busy_ns, ddt) /
						  1e7 / d->queues : 0;
		char node[24];

		throttle_str(c, thr, sizeof(thr), false);
		snprintf(temp, sizeof(temp), "n/a");
		snprintf(power, sizeof(power), "n/a");
		snprintf(clock, sizeof(clock), "n/a");
		if (c->valid & DRM_METAINFER_VALID_TEMP)
			snprintf(temp, sizeof(temp), "%.1f", c->temp_mc / 1000.0);
		if (c->valid & DRM_METAINFER_VALID_POWER)
			snprintf(power, sizeof(power), "%.2f", c->power_mw / 1000.0);
		if (c->valid & DRM_METAINFER_VALID_CLOCK)
			snprintf(clock, sizeof(clock), "%.0f/%.0f",
				 c->clock_khz / 1000.0,
				 d->clock_nominal_khz / 1000.0);
		snprintf(node, sizeof(node), "renderD%d", d->minor);
		fprintf(f, "%-11s %-18.18s %6.1f %8.1f %6llu %7s %7s %11s %s%s\n",
			node, d->name, util,
			rate(c0->jobs_completed, c->jobs_completed, ddt),
			(unsigned long long)c->queue_depth, temp, power, clock,
			thr, d->gone ? " REMOVED" : d->lost ? " LOST" : "");
	}
	fprintf(f, "\n%-7s %-16s %-11s %7s %6s %8s %9s\n", "PID", "COMM",
		"DEVICE", "CLIENT", "BUSY%", "JOBS/S", "MEM KiB");
	for (k = 0; k < b->ncl; k++) {
		const struct top_client *c = &b->cl[k];
		const struct top_client *p = client_find((struct top_sample *)a,
							 c->client_id);
		double cdt = p ? (c->t_ns - p->t_ns) / 1e9 : 0;
		char node[24];

		snprintf(node, sizeof(node), "renderD%d", c->minor);
		fprintf(f, "%-7d %-16.16s %-11s %7" PRIu64 " %6.1f %8.1f %9" PRIu64 "\n",
			c->pid, c->comm, node, c->client_id,
			p ? rate(sum(p->engine_ns, p->nq),
				 sum(c->engine_ns, c->nq), cdt) / 1e7 : 0,
			p ? rate(sum(p->jobs, p->nq), sum(c->jobs, c->nq), cdt) : 0,
			c->mem_kib);
	}
	if (!b->ncl)
		fprintf(f, "(no process has a metainfer device open)\n");
	fflush(f);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: metainfer top [--once] [--json] [-d SECONDS] [-n COUNT]\n"
		"\n"
		"Per device: utilization, jobs/s, queue depth, temperature, power,\n"
		"clock and throttle state; per process: busy %%, jobs/s and memory\n"
		"(from /proc/PID/fdinfo).  Refreshes every interval until Ctrl-C.\n"
		"\n"
		"  -d, --delay SECONDS  interval between samples (default 1)\n"
		"  -n, --iterations N   stop after N reports\n"
		"  -1, --once           one report (one interval) and exit\n"
		"  -j, --json           one JSON object per report and line\n"
		"  -h, --help           this text\n");
}

/**
 * mi_top_main() - `metainfer top`
 * @argc: argument count, argv[0] being "top"
 * @argv: arguments
 *
 * Return: 0, 1 when there is no device, 2 for a usage error.
 */
int mi_top_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "delay", required_argument, NULL, 'd' },
		{ "iterations", required_argument, NULL, 'n' },
		{ "once", no_argument, NULL, '1' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct top_sample s[2] = { 0 };
	struct top_dev devs[TOP_MAX_DEVS];
	long count = -1, done = 0;
	bool json = false, clear;
	double delay = 1.0;
	int ndev, denied, opt, cur = 0, i;
	struct timespec ts;
	char *end;

	optind = 1;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "d:n:1jh", opts, NULL)) != -1) {
		switch (opt) {
		case 'd':
			delay = strtod(optarg, &end);
			if (*end || !(delay >= 0.01 && delay <= 3600)) {
				fprintf(stderr, "metainfer top: --delay takes 0.01..3600 seconds, got '%s'\n",
					optarg);
				return 2;
			}
			break;
		case 'n':
			count = strtol(optarg, &end, 10);
			if (*end || count < 1) {
				fprintf(stderr, "metainfer top: --iterations takes a positive count, got '%s'\n",
					optarg);
				return 2;
			}
			break;
		case '1':
			count = 1;
			break;
		case 'j':
			json = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			fprintf(stderr, "metainfer top: unknown or incomplete option '%s' (try --help)\n",
				argv[optind - 1]);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "metainfer top: unexpected argument '%s'\n",
			argv[optind]);
		return 2;
	}

	ndev = find_devices(devs, TOP_MAX_DEVS, &denied);
	if (ndev <= 0) {
		if (denied)
			fprintf(stderr, "metainfer top: no metainfer device found (%d render node%s could not be opened: permission denied)\n",
				denied, denied == 1 ? "" : "s");
		else
			fprintf(stderr, "metainfer top: no metainfer device found (no /dev/dri/renderD* with DRM driver \"metainfer\")\n");
		return 1;
	}
	clear = !json && isatty(STDOUT_FILENO);
	signal(SIGINT, top_sigint);
	signal(SIGTERM, top_sigint);

	take_sample(&s[cur], devs, ndev);
	while (!top_stop && (count < 0 || done < count)) {
		ts.tv_sec = (time_t)delay;
		ts.tv_nsec = (long)((delay - ts.tv_sec) * 1e9);
		while (nanosleep(&ts, &ts) && errno == EINTR && !top_stop)
			;
		if (top_stop)
			break;
		take_sample(&s[cur ^ 1], devs, ndev);
		if (json)
			print_json(stdout, devs, ndev, &s[cur], &s[cur ^ 1]);
		else
			print_text(stdout, devs, ndev, &s[cur], &s[cur ^ 1], clear);
		cur ^= 1;
		done++;
	}
	for (i = 0; i < ndev; i++)
		close(devs[i].fd);
	free(s[0].cl);
	free(s[1].cl);
	return 0;
}
