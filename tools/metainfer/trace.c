// SPDX-License-Identifier: GPL-2.0-only
/*
 * metainfer trace: record the job lifecycle of every metainfer device
 * (tracefs) and its sensors (GET_COUNTERS), and write a Chrome trace-event
 * JSON file that Perfetto (ui.perfetto.dev) and chrome://tracing open.
 *
 *   metainfer trace [--duration S] [-o FILE.json] [--interval MS]
 *                   [-- COMMAND [ARGS...]]
 *
 * Recording uses a private tracefs instance (instances/metainfer-trace-PID,
 * trace_clock "mono", so that ftrace timestamps and the sensor samples are
 * both CLOCK_MONOTONIC) with the metainfer: events and drm_sched's
 * gpu_scheduler:drm_sched_job / drm_run_job.  A job is followed like the
 * eBPF tools do (bpf/mi_job.bpf.h): submit and drm_sched_job fire back to
 * back in the submitting task (the finished-fence pointer drm_sched prints
 * is tied to the job there), drm_run_job and metainfer:run back to back in
 * the scheduler thread (the pointer is tied to the hardware fence that
 * done names).  Context ids are per file, so (dev, ctx, seqno) alone may
 * be ambiguous between processes; it is only the fallback.
 *
 * The file (Documentation/tracing.rst):
 *  - a process per device (pid = render minor, "renderD128 <name>"), a
 *    thread per hardware queue ("queue N");
 *  - each job's run as a complete slice ("X") on its queue's thread, and
 *    its queue wait as an async slice ("b"/"e", id = job) named
 *    "queue N wait" (waits of queued jobs overlap, runs of one queue
 *    never do: the core gives a queue one job at a time);
 *  - an instant event per job timeout;
 *  - counter tracks per device: temperature_C, clock_MHz, power_mW,
 *    queue_depth (a sensor the device does not have is left out);
 *  - with --timeline FILE (what `metainfer serve --timeline FILE`
 *    wrote: one JSON line per switch chain, CLOCK_MONOTONIC ns), a
 *    process per serve ("metainfer serve PID: live switching"), a thread
 *    per stream, per chain one slice from detection to first output with
 *    its phases nested in it and an instant per move between devices;
 *  - timestamps in microseconds from the start of the recording, events
 *    in timestamp order.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "drm/metainfer_accel.h"

#define EXIT_USAGE 2
#define MAX_DEVS 64
#define MINOR_FIRST 128
#define MAX_TIMELINES 8
/* serve processes in the file: pid + this, clear of render minors */
#define TL_PID_BASE 1000000

static const char *prog = "metainfer trace";
static volatile sig_atomic_t stop;

struct dev {
	int fd, minor;
	uint32_t queues;
	char name[64];
};

struct job {
	int dev;
	uint32_t ctx, queue;
	uint64_t seqno;
	uint64_t fptr; /* drm_sched's (hashed) finished-fence pointer, 0 unknown */
	uint64_t hw; /* hardware fence key, 0 until metainfer:run */
	/* ns, CLOCK_MONOTONIC; 0 unseen */
	int64_t t_submit, t_queue, t_run, t_done;
	int status;
	bool timed_out;
	int tid;
	char comm[17];
};

/* u64 -> job index, open addressing; key 0 is never stored */
struct map {
	uint64_t *keys;
	int *vals;
	size_t cap, used;
};

struct out_event {
	int64_t ts; /* ns from t0 */
	size_t seq; /* insertion order, for stable sorting */
	char *json;
};

struct rec {
	char inst[256]; /* tracefs instance directory */
	int pipe_fd;
	char *line; /* partial line of trace_pipe */
	size_t line_len, line_cap;
	struct job *jobs;
	size_t njobs, jobs_cap;
	struct map by_fptr, by_hw, last_submit, running;
	struct dev devs[MAX_DEVS];
	int ndevs;
	struct out_event *ev;
	size_t nev, ev_cap;
	int64_t t0;
	bool sched_events;
	size_t lost_lines;
};

static void on_signal(int sig)
{
	stop = 1;
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p) {
		fprintf(stderr, "%s: out of memory\n", prog);
		exit(1);
	}
	return p;
}

/* ---- u64 map ------------------------------------------------------ */

static uint64_t mix(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	return k;
}

static void map_put(struct map *m, uint64_t key, int val);

static void map_grow(struct map *m)
{
	struct map n = { .cap = m->cap ? m->cap * 2 : 256 };
	size_t i;

	n.keys = calloc(n.cap, sizeof(*n.keys));
	n.vals = calloc(n.cap, sizeof(*n.vals));
	if (!n.keys || !n.vals) {
		fprintf(stderr, "%s: out of memory\n", prog);
		exit(1);
	}
	for (i = 0; i < m->cap; i++)
		if (m->keys[i] && m->vals[i] >= 0)
			map_put(&n, m->keys[i], m->vals[i]);
	free(m->keys);
	free(m->vals);
	*m = n;
}

/* val -1 marks a removed entry */
static void map_put(struct map *m, uint64_t key, int val)
{
	size_t i;

	if (!key)
		return;
	if ((m->used + 1) * 2 > m->cap)
		map_grow(m);
	for (i = mix(key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
		if (m->keys[i] == key) {
			m->vals[i] = val;
			return;
		}
		if (!m->keys[i]) {
			m->keys[i] = key;
			m->vals[i] = val;
			m->used++;
			return;
		}
	}
}

static int map_get(const struct map *m, uint64_t key)
{
	size_t i;

	if (!key || !m->cap)
		return -1;
	for (i = mix(key) & (m->cap - 1); m->keys[i];
	     i = (i + 1) & (m->cap - 1))
		if (m->keys[i] == key)
			return m->vals[i];
	return -1;
}

static void map_free(struct map *m)
{
	free(m->keys);
	free(m->vals);
}

/* ---- tracefs ------------------------------------------------------ */

static const char *tracefs_root(void)
{
	static const char *const roots[] = { "/sys/kernel/tracing",
					     "/sys/kernel/debug/tracing" };
	char path[128];
	int i;

	for (i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s/instances", roots[i]);
		if (!access(path, W_OK))
			return roots[i];
	}
	return NULL;
}

static int inst_write(struct rec *r, const char *file, const char *val)
{
	char path[512];
	ssize_t n;
	int fd, err = 0;

	snprintf(path, sizeof(path), "%s/%s", r->inst, file);
	fd = open(path, O_WRONLY | O_TRUNC);
	if (fd < 0)
		return -errno;
	n = write(fd, val, strlen(val));
	if (n < 0)
		err = -errno;
	close(fd);
	return err;
}

static const char *const job_events[] = {
	"metainfer/submit",
	"metainfer/run",
	"metainfer/done",
	"metainfer/timeout",
};
static const char *const sched_events[] = {
	"gpu_scheduler/drm_sched_job",
	"gpu_scheduler/drm_run_job",
};

static int rec_start(struct rec *r)
{
	const char *root = tracefs_root();
	char file[320];
	size_t i;
	int err;

	if (!root) {
		fprintf(stderr,
			"%s: no writable tracefs (mount -t tracefs nodev /sys/kernel/tracing; needs root)\n",
			prog);
		return -ENOENT;
	}
	snprintf(r->inst, sizeof(r->inst), "%s/instances/metainfer-trace-%d",
		 root, (int)getpid());
	if (mkdir(r->inst, 0700)) {
		fprintf(stderr, "%s: %s: %s\n", prog, r->inst, strerror(errno));
		r->inst[0] = 0;
		return -errno;
	}
	err = inst_write(r, "trace_clock", "mono");
	if (err) {
		fprintf(stderr, "%s: cannot select the mono trace clock: %s\n",
			prog, strerror(-err));
		return err;
	}
	inst_write(r, "buffer_size_kb", "8192");
	for (i = 0; i < sizeof(job_events) / sizeof(job_events[0]); i++) {
		snprintf(file, sizeof(file), "events/%s/enable", job_events[i]);
		err = inst_write(r, file, "1");
		if (err) {
			fprintf(stderr,
				"%s: cannot enable tracepoint %s: %s (is metainfer.ko loaded?)\n",
				prog, job_events[i], strerror(-err));
			return err;
		}
	}
	r->sched_events = true;
	for (i = 0; i < sizeof(sched_events) / sizeof(sched_events[0]); i++) {
		snprintf(file, sizeof(file), "events/%s/enable",
			 sched_events[i]);
		if (inst_write(r, file, "1"))
			r->sched_events = false;
	}
	snprintf(file, sizeof(file), "%s/trace_pipe", r->inst);
	r->pipe_fd = open(file, O_RDONLY | O_NONBLOCK);
	if (r->pipe_fd < 0) {
		fprintf(stderr, "%s: %s: %s\n", prog, file, strerror(errno));
		return -errno;
	}
	return inst_write(r, "tracing_on", "1");
}

static void rec_stop(struct rec *r)
{
	if (!r->inst[0])
		return;
	inst_write(r, "tracing_on", "0");
	if (r->pipe_fd >= 0)
		close(r->pipe_fd);
	r->pipe_fd = -1;
	/* removing the instance disables its events and frees its buffers */
	if (rmdir(r->inst))
		fprintf(stderr, "%s: cannot remove %s: %s\n", prog, r->inst,
			strerror(errno));
	r->inst[0] = 0;
}

/* ---- parsing trace_pipe lines ------------------------------------ */

/* value of "key=" in @s as an integer in @base, or false */
static bool field_base(const char *s, const char *key, int base, uint64_t *v)
{
	size_t kl = strlen(key);
	const char *p = s;

	while ((p = strstr(p, key))) {
		if ((p == s || p[-1] == ' ' || p[-1] == ',') && p[kl] == '=') {
			char *end;

			errno = 0;
			*v = strtoull(p + kl + 1, &end, base);
			return !errno && end != p + kl + 1;
		}
		p += kl;
	}
	return false;
}

static bool field_u64(const char *s, const char *key, uint64_t *v)
{
	return field_base(s, key, 10, v);
}

static bool field_i64(const char *s, const char *key, int64_t *v)
{
	uint64_t u;
	const char *p = strstr(s, key);

	if (!p || p[strlen(key)] != '=')
		return false;
	if (p[strlen(key) + 1] == '-') {
		char *end;

		*v = strtoll(p + strlen(key) + 1, &end, 10);
		return true;
	}
	if (!field_u64(s, key, &u))
		return false;
	*v = (int64_t)u;
	return true;
}

/* "fence=A:B" of the metainfer events */
static bool field_fence(const char *s, uint64_t *ctx, uint64_t *seq)
{
	const char *p = strstr(s, " fence=");

	return p && sscanf(p, " fence=%" SCNu64 ":%" SCNu64, ctx, seq) == 2;
}

static uint64_t hw_key(uint64_t ctx, uint64_t seq)
{
	return (ctx << 40) ^ seq ^ (1ull << 63);
}

static struct job *new_job(struct rec *r)
{
	if (r->njobs == r->jobs_cap) {
		r->jobs_cap = r->jobs_cap ? r->jobs_cap * 2 : 256;
		r->jobs = xrealloc(r->jobs, r->jobs_cap * sizeof(*r->jobs));
	}
	memset(&r->jobs[r->njobs], 0, sizeof(r->jobs[0]));
	return &r->jobs[r->njobs++];
}

/* the job of tracked index @i, if it is (dev, ctx, seqno) */
static struct job *job_if(struct rec *r, int i, int dev, uint64_t ctx,
			  uint64_t seqno)
{
	struct job *j;

	if (i < 0 || (size_t)i >= r->njobs)
		return NULL;
	j = &r->jobs[i];
	if (j->dev != dev || j->ctx != ctx || j->seqno != seqno)
		return NULL;
	return j;
}

/* fallback: the oldest job with these ids that has not reached @stage */
static struct job *job_find(struct rec *r, int dev, uint64_t ctx,
			    uint64_t queue, uint64_t seqno, bool running)
{
	size_t i;

	for (i = 0; i < r->njobs; i++) {
		struct job *j = &r->jobs[i];

		if (j->dev == dev && j->ctx == ctx && j->queue == queue &&
		    j->seqno == seqno && !j->t_done && (running || !j->hw))
			return j;
	}
	return NULL;
}

static void parse_line(struct rec *r, char *line)
{
	char *p, *comm, *ev, *args, *end;
	int64_t ts, st;
	uint64_t dev, ctx, queue, seqno, fctx, fseq, v;
	long tid, sec, usec;
	struct job *j;

	/* "<comm>-<tid> [<cpu>] <flags> <sec>.<usec>: <event>: <args>" */
	p = strstr(line, "] ");
	if (!p)
		return;
	end = p;
	while (end > line && *end != '[')
		end--;
	if (end == line)
		return;
	*end = 0;
	comm = line;
	while (*comm == ' ')
		comm++;
	p = end - 1;
	while (p > comm && *p == ' ')
		*p-- = 0;
	p = strrchr(comm, '-');
	if (!p)
		return;
	*p = 0;
	tid = strtol(p + 1, NULL, 10);
	/* timestamp: the first token that is "<digits>.<digits>:" */
	p = strchr(end + 1, ']') + 1;
	for (;;) {
		while (*p == ' ')
			p++;
		if (!*p)
			return;
		if (sscanf(p, "%ld.%ld:", &sec, &usec) == 2 && strchr(p, ':') &&
		    strchr(p, '.') < strchr(p, ':'))
			break;
		p = strchr(p, ' ');
		if (!p)
			return;
	}
	ts = (int64_t)sec * 1000000000LL + (int64_t)usec * 1000;
	p = strchr(p, ':') + 1;
	while (*p == ' ')
		p++;
	ev = p;
	p = strchr(ev, ':');
	if (!p)
		return;
	*p = 0;
	args = p + 1;

	if (!strcmp(ev, "drm_sched_job") || !strcmp(ev, "drm_run_job")) {
		int i;

		/* fence=%p: a hashed pointer, hex without 0x */
		if (!field_base(args, "fence", 16, &v) || !v)
			return;
		if (ev[4] == 's') { /* drm_sched_job: push by the submitter */
			i = map_get(&r->last_submit, (uint64_t)tid + 1);
			if (i < 0 || r->jobs[i].fptr)
				return;
			r->jobs[i].fptr = v;
			r->jobs[i].t_queue = ts;
			map_put(&r->by_fptr, v, i);
			map_put(&r->last_submit, (uint64_t)tid + 1, -1);
		} else {
			i = map_get(&r->by_fptr, v);
			if (i < 0)
				return;
			r->jobs[i].t_run = ts;
			map_put(&r->running, (uint64_t)tid + 1, i);
		}
		return;
	}
	if (!field_u64(args, "dev", &dev) || !field_u64(args, "queue", &queue))
		return;
	if (!strcmp(ev, "submit")) {
		if (!field_u64(args, "ctx", &ctx) ||
		    !field_u64(args, "seqno", &seqno))
			return;
		j = new_job(r);
		j->dev = (int)dev;
		j->ctx = (uint32_t)ctx;
		j->queue = (uint32_t)queue;
		j->seqno = seqno;
		j->t_submit = ts;
		j->tid = (int)tid;
		snprintf(j->comm, sizeof(j->comm), "%s", comm);
		map_put(&r->last_submit, (uint64_t)tid + 1,
			(int)(r->njobs - 1));
		return;
	}
	if (!field_u64(args, "ctx", &ctx) ||
	    !field_u64(args, "seqno", &seqno) ||
	    !field_fence(args, &fctx, &fseq))
		return;
	if (!strcmp(ev, "run")) {
		j = job_if(r, map_get(&r->running, (uint64_t)tid + 1), (int)dev,
			   ctx, seqno);
		if (!j || j->hw)
			j = job_find(r, (int)dev, ctx, queue, seqno, false);
		if (!j)
			return;
		j->hw = hw_key(fctx, fseq);
		if (!j->t_run)
			j->t_run = ts;
		map_put(&r->by_hw, j->hw, (int)(j - r->jobs));
		return;
	}
	j = NULL;
	if (map_get(&r->by_hw, hw_key(fctx, fseq)) >= 0)
		j = &r->jobs[map_get(&r->by_hw, hw_key(fctx, fseq))];
	if (!strcmp(ev, "timeout")) {
		if (j)
			j->timed_out = true;
		return;
	}
	if (strcmp(ev, "done"))
		return;
	/* done without run: failed inside run_job, same thread */
	if (!j)
		j = job_if(r, map_get(&r->running, (uint64_t)tid + 1), (int)dev,
			   ctx, seqno);
	if (!j)
		j = job_find(r, (int)dev, ctx, queue, seqno, true);
	if (!j || j->t_done)
		return;
	if (!j->t_run)
		j->t_run = ts;
	j->t_done = ts;
	j->status = field_i64(args, "status", &st) ? (int)st : 0;
}

/* read what trace_pipe has now; returns 0 or -errno */
static int drain_pipe(struct rec *r)
{
	char buf[65536];
	ssize_t n;
	size_t i;

	for (;;) {
		n = read(r->pipe_fd, buf, sizeof(buf));
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return 0;
			return -errno;
		}
		if (n == 0)
			return 0;
		for (i = 0; i < (size_t)n; i++) {
			if (r->line_len + 1 >= r->line_cap) {
				r->line_cap = r->line_cap ? r->line_cap * 2 :
							    1024;
				r->line = xrealloc(r->line, r->line_cap);
			}
			if (buf[i] != '\n') {
				r->line[r->line_len++] = buf[i];
				continue;
			}
			r->line[r->line_len] = 0;
			if (strstr(r->line, "LOST"))
				r->lost_lines++;
			parse_line(r, r->line);
			r->line_len = 0;
		}
	}
}

/* ---- devices and sensors ------------------------------------------ */

static int dev_ioctl(int fd, unsigned long req, void *arg)
{
	int ret;

	do {
		ret = ioctl(fd, req, arg);
	} while (ret == -1 && (errno == EINTR || errno == EAGAIN));
	return ret ? -errno : 0;
}

static void open_devices(struct rec *r)
{
	int minor;

	for (minor = MINOR_FIRST;
	     minor < MINOR_FIRST + 64 && r->ndevs < MAX_DEVS; minor++) {
		struct drm_metainfer_get_param gp = { .size = sizeof(gp) };
		char path[64], drv[32] = "";
		struct drm_version ver = { .name = drv,
					   .name_len = sizeof(drv) - 1 };
		struct dev *d = &r->devs[r->ndevs];
		int fd;

		snprintf(path, sizeof(path), "/dev/dri/renderD%d", minor);
		fd = open(path, O_RDWR | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (dev_ioctl(fd, DRM_IOCTL_VERSION, &ver) ||
		    strcmp(drv, "metainfer")) {
			close(fd);
			continue;
		}
		d->fd = fd;
		d->minor = minor;
		gp.param = DRM_METAINFER_PARAM_NUM_QUEUES;
		d->queues = 1;
		if (!dev_ioctl(fd, DRM_IOCTL_METAINFER_GET_PARAM, &gp))
			d->queues = (uint32_t)gp.value;
		memset(&gp, 0, sizeof(gp));
		gp.size = sizeof(gp);
		gp.param = DRM_METAINFER_PARAM_NAME;
		gp.data_ptr = (uintptr_t)d->name;
		gp.data_size = sizeof(d->name) - 1;
		if (dev_ioctl(fd, DRM_IOCTL_METAINFER_GET_PARAM, &gp))
			d->name[0] = 0;
		d->name[sizeof(d->name) - 1] = 0;
		r->ndevs++;
	}
}

static void add_event(struct rec *r, int64_t ts, const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0) {
		fprintf(stderr, "%s: out of memory\n", prog);
		exit(1);
	}
	va_end(ap);
	if (r->nev == r->ev_cap) {
		r->ev_cap = r->ev_cap ? r->ev_cap * 2 : 1024;
		r->ev = xrealloc(r->ev, r->ev_cap * sizeof(*r->ev));
	}
	r->ev[r->nev].ts = ts;
	r->ev[r->nev].seq = r->nev;
	r->ev[r->nev].json = s;
	r->nev++;
}

/* microseconds since t0, for "ts" and "dur" */
#define US(r, t) ((double)((t) - (r)->t0) / 1000.0)

static void sample(struct rec *r)
{
	int i;

	for (i = 0; i < r->ndevs; i++) {
		struct drm_metainfer_get_counters c = { .size = sizeof(c) };
		const struct dev *d = &r->devs[i];
		int64_t ts;

		if (dev_ioctl(d->fd, DRM_IOCTL_METAINFER_GET_COUNTERS, &c))
			continue;
		ts = (int64_t)c.timestamp_ns;
		if (ts < r->t0)
			ts = r->t0;
		if (c.valid & DRM_METAINFER_VALID_TEMP)
			add_event(
				r, ts,
				"{\"ph\":\"C\",\"name\":\"temperature_C\",\"pid\":%d,\"ts\":%.3f,\"args\":{\"value\":%.3f}}",
				d->minor, US(r, ts), c.temp_mc / 1000.0);
		if (c.valid & DRM_METAINFER_VALID_CLOCK)
			add_event(
				r, ts,
				"{\"ph\":\"C\",\"name\":\"clock_MHz\",\"pid\":%d,\"ts\":%.3f,\"args\":{\"value\":%.3f}}",
				d->minor, US(r, ts), c.clock_khz / 1000.0);
		if (c.valid & DRM_METAINFER_VALID_POWER)
			add_event(
				r, ts,
				"{\"ph\":\"C\",\"name\":\"power_mW\",\"pid\":%d,\"ts\":%.3f,\"args\":{\"value\":%" PRIu64
				"}}",
				d->minor, US(r, ts), (uint64_t)c.power_mw);
		add_event(
			r, ts,
			"{\"ph\":\"C\",\"name\":\"queue_depth\",\"pid\":%d,\"ts\":%.3f,\"args\":{\"value\":%" PRIu64
			"}}",
			d->minor, US(r, ts), (uint64_t)c.queue_depth);
	}
}

/* ---- output ------------------------------------------------------- */

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			fprintf(f, "\\%c", ch);
		else if (ch < 0x20 || ch >= 0x7f)
			fprintf(f, "\\u%04x", ch);
		else
			fputc(ch, f);
	}
	fputc('"', f);
}

static void job_events_add(struct rec *r, int64_t t_end)
{
	size_t i;

	for (i = 0; i < r->njobs; i++) {
		struct job *j = &r->jobs[i];
		int64_t q0 = j->t_queue ? j->t_queue : j->t_submit;
		int64_t run0 = j->t_run ? j->t_run : t_end;
		int64_t done = j->t_done ? j->t_done : t_end;
		char comm[64], *p = comm;
		const char *c;

		/* the comm, JSON-escaped (ftrace comms are plain, be safe) */
		for (c = j->comm; *c && p < comm + sizeof(comm) - 7; c++) {
			if (*c == '"' || *c == '\\')
				*p++ = '\\';
			if ((unsigned char)*c < 0x20)
				continue;
			*p++ = *c;
		}
		*p = 0;
		if (run0 < q0)
			run0 = q0;
		add_event(
			r, q0,
			"{\"ph\":\"b\",\"cat\":\"wait\",\"name\":\"queue %u wait\",\"id\":\"job%zu\",\"pid\":%d,\"tid\":%u,\"ts\":%.3f,\"args\":{\"ctx\":%u,\"seqno\":%" PRIu64
			",\"submitter\":\"%s\",\"submitter_tid\":%d}}",
			j->queue, i, j->dev, j->queue, US(r, q0), j->ctx,
			j->seqno, comm, j->tid);
		add_event(
			r, run0,
			"{\"ph\":\"e\",\"cat\":\"wait\",\"name\":\"queue %u wait\",\"id\":\"job%zu\",\"pid\":%d,\"tid\":%u,\"ts\":%.3f}",
			j->queue, i, j->dev, j->queue, US(r, run0));
		if (!j->t_run)
			continue;
		add_event(
			r, run0,
			"{\"ph\":\"X\",\"cat\":\"run\",\"name\":\"ctx %u job %" PRIu64
			"\",\"pid\":%d,\"tid\":%u,\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"ctx\":%u,\"seqno\":%" PRIu64
			",\"status\":%d,\"finished\":%s,\"wait_us\":%.3f,\"submitter\":\"%s\",\"submitter_tid\":%d}}",
			j->ctx, j->seqno, j->dev, j->queue, US(r, run0),
			(double)(done - run0) / 1000.0, j->ctx, j->seqno,
			j->status, j->t_done ? "true" : "false",
			(double)(run0 - q0) / 1000.0, comm, j->tid);
		if (j->timed_out)
			add_event(
				r, done,
				"{\"ph\":\"i\",\"s\":\"t\",\"name\":\"timeout ctx %u job %" PRIu64
				"\",\"pid\":%d,\"tid\":%u,\"ts\":%.3f}",
				j->ctx, j->seqno, j->dev, j->queue,
				US(r, done));
	}
}

static int ev_cmp(const void *a, const void *b)
{
	const struct out_event *x = a, *y = b;

	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static bool dev_known(const struct rec *r, int minor)
{
	int i;

	for (i = 0; i < r->ndevs; i++)
		if (r->devs[i].minor == minor)
			return true;
	return false;
}

static int write_json(struct rec *r, const char *path, char **cmd)
{
	FILE *f = strcmp(path, "-") ? fopen(path, "w") : stdout;
	uint32_t maxq[256] = {};
	int i, minors[256], nminors = 0;
	size_t k;
	int err = 0;

	if (!f) {
		fprintf(stderr, "%s: %s: %s\n", prog, path, strerror(errno));
		return -errno;
	}
	qsort(r->ev, r->nev, sizeof(*r->ev), ev_cmp);
	fprintf(f,
		"{\"displayTimeUnit\":\"ms\",\"otherData\":{\"tool\":\"metainfer trace\",\"clock\":\"CLOCK_MONOTONIC\",\"t0_ns\":%" PRId64
		",\"command\":",
		r->t0);
	if (cmd && cmd[0])
		json_str(f, cmd[0]);
	else
		fputs("null", f);
	fputs("},\n\"traceEvents\":[\n", f);
	/* metadata: devices seen (opened, or only named by events) */
	for (i = 0; i < r->ndevs; i++) {
		minors[nminors] = r->devs[i].minor;
		maxq[nminors++] = r->devs[i].queues;
	}
	for (k = 0; k < r->njobs; k++) {
		int m = r->jobs[k].dev, n;

		for (n = 0; n < nminors && minors[n] != m; n++)
			;
		if (n == nminors) {
			if (nminors == 256)
				continue;
			minors[nminors] = m;
			maxq[nminors++] = 0;
		}
		if (r->jobs[k].queue + 1 > maxq[n])
			maxq[n] = r->jobs[k].queue + 1;
	}
	for (i = 0; i < nminors; i++) {
		const char *name = "";
		uint32_t q;
		int n;

		for (n = 0; n < r->ndevs; n++)
			if (r->devs[n].minor == minors[i])
				name = r->devs[n].name;
		fprintf(f,
			"{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":",
			minors[i]);
		{
			char label[96];

			snprintf(label, sizeof(label), "renderD%d%s%s%s",
				 minors[i], name[0] ? " " : "", name,
				 dev_known(r, minors[i]) ? "" : " (gone)");
			json_str(f, label);
		}
		fputs("}},\n", f);
		fprintf(f,
			"{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%d,\"tid\":0,\"args\":{\"sort_index\":%d}},\n",
			minors[i], minors[i]);
		for (q = 0; q < maxq[i]; q++)
			fprintf(f,
				"{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%u,\"args\":{\"name\":\"queue %u\"}},\n",
				minors[i], q, q);
	}
	for (k = 0; k < r->nev; k++)
		fprintf(f, "%s%s\n", r->ev[k].json, k + 1 < r->nev ? "," : "");
	fputs("]}\n", f);
	if (fflush(f) || ferror(f))
		err = -EIO;
	if (f != stdout && fclose(f))
		err = -errno;
	if (err)
		fprintf(stderr, "%s: writing %s: %s\n", prog, path,
			strerror(-err));
	return err;
}

/* ---- serve's switch timeline ------------------------------------ */

/* The value after "key": in a flat JSON line (serve writes them). */
static const char *jv(const char *line, const char *key)
{
	char pat[64];
	const char *p;

	snprintf(pat, sizeof(pat), "\"%s\"", key);
	p = strstr(line, pat);
	if (!p)
		return NULL;
	p += strlen(pat);
	while (*p == ' ')
		p++;
	if (*p++ != ':')
		return NULL;
	while (*p == ' ')
		p++;
	return p;
}

static bool jv_i64(const char *line, const char *key, int64_t *v)
{
	const char *p = jv(line, key);
	char *e;

	if (!p)
		return false;
	*v = strtoll(p, &e, 10);
	return e != p;
}

/* A string value without escapes (names serve prints) into buf. */
static bool jv_str(const char *line, const char *key, char *buf, size_t cap)
{
	const char *p = jv(line, key);
	size_t n = 0;

	if (!p || *p++ != '"')
		return false;
	while (p[n] && p[n] != '"' && p[n] != '\\')
		n++;
	if (p[n] != '"' || n >= cap)
		return false;
	memcpy(buf, p, n);
	buf[n] = 0;
	return true;
}

static const char *const tl_phase[] = {
	"detect", "confirm", "solve", "take", "activate", "output",
};
/* the slice from one phase to the next, nested in the chain's slice */
static const char *const tl_step[] = {
	"confirm (credibility)", "solve + choose", "wait for the stream",
	"activate", "first output",
};

/*
 * One chain line: a slice detect -> output on its stream's thread with
 * the five steps nested in it.  Returns 1 if added, 0 if blank, another
 * kind of serve line or before the recording (a stale file), -1 if not a
 * serve timeline line or a malformed chain.
 */
static int tl_chain(struct rec *r, const char *line, int *pid_out,
		    int *stream_out)
{
	char type[32], dev[64], dim[32], from[64], to[64];
	int64_t ns[6], pid, stream, ev, fc, tc;
	char name[384];
	int p;

	/* a blank line or another kind of serve line ("start"): skipped;
	 * anything else is not a serve timeline */
	if (line[strspn(line, " \t\r\n")] == 0)
		return 0;
	if (!strstr(line, "\"timeline\": \""))
		return -1;
	if (!strstr(line, "\"timeline\": \"chain\""))
		return 0;
	if (!jv_i64(line, "pid", &pid) || !jv_i64(line, "event", &ev) ||
	    !jv_i64(line, "stream", &stream) ||
	    !jv_i64(line, "from_config", &fc) ||
	    !jv_i64(line, "to_config", &tc) ||
	    !jv_str(line, "type", type, sizeof(type)) ||
	    !jv_str(line, "device", dev, sizeof(dev)) ||
	    !jv_str(line, "dim", dim, sizeof(dim)) ||
	    !jv_str(line, "from_device", from, sizeof(from)) ||
	    !jv_str(line, "to_device", to, sizeof(to)) || pid < 0 ||
	    pid > 4194304 || stream < 0 || stream > 1023)
		return -1;
	for (p = 0; p < 6; p++) {
		char key[32];

		snprintf(key, sizeof(key), "%s_ns", tl_phase[p]);
		if (!jv_i64(line, key, &ns[p]) || (p && ns[p] < ns[p - 1]))
			return -1;
	}
	if (ns[0] < r->t0)
		return 0;
	pid += TL_PID_BASE;
	snprintf(name, sizeof(name), "%s %s %s: %s -> %s, configuration %d -> %d",
		 dev, dim, type, from, to, (int)fc, (int)tc);
	add_event(
		r, ns[0],
		"{\"ph\":\"X\",\"cat\":\"switch\",\"name\":\"%s\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"event\":%" PRId64
		",\"device\":\"%s\",\"dim\":\"%s\",\"type\":\"%s\",\"from_device\":\"%s\",\"to_device\":\"%s\",\"from_config\":%d,\"to_config\":%d,\"confirm_to_output_ms\":%.3f,\"detect_to_output_ms\":%.3f}}",
		name, (int)pid, (int)stream, US(r, ns[0]),
		(double)(ns[5] - ns[0]) / 1000.0, ev, dev, dim, type, from, to,
		(int)fc, (int)tc, (ns[5] - ns[1]) / 1e6, (ns[5] - ns[0]) / 1e6);
	for (p = 0; p < 5; p++)
		add_event(
			r, ns[p],
			"{\"ph\":\"X\",\"cat\":\"switch\",\"name\":\"%s\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"event\":%" PRId64
			"}}",
			tl_step[p], (int)pid, (int)stream, US(r, ns[p]),
			(double)(ns[p + 1] - ns[p]) / 1000.0, ev);
	if (strcmp(from, to))
		add_event(
			r, ns[4],
			"{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"switch\",\"name\":\"move %s -> %s\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"args\":{\"event\":%" PRId64
			"}}",
			from, to, (int)pid, (int)stream, US(r, ns[4]), ev);
	*pid_out = (int)pid;
	*stream_out = (int)stream;
	return 1;
}

/*
 * Merge a serve timeline file.  serve's timestamps are CLOCK_MONOTONIC,
 * as are the "mono" ftrace clock and GET_COUNTERS': no conversion.
 * Returns the chains added, or -1 (with one line) if the file cannot be
 * read or has a malformed chain line.
 */
static int tl_merge(struct rec *r, const char *path)
{
	FILE *f = fopen(path, "r");
	int pids[64], npids = 0, tids[64][2], ntids = 0, n = 0, lineno = 0;
	char *line = NULL;
	size_t cap = 0;
	int i, ret = 0;

	if (!f) {
		fprintf(stderr, "%s: --timeline %s: %s\n", prog, path,
			strerror(errno));
		return -1;
	}
	while (getline(&line, &cap, f) > 0) {
		int pid, stream, k;

		lineno++;
		k = tl_chain(r, line, &pid, &stream);
		if (k < 0) {
			fprintf(stderr, "%s: --timeline %s:%d: not a chain line of metainfer serve\n",
				prog, path, lineno);
			ret = -1;
			break;
		}
		if (!k)
			continue;
		n++;
		for (i = 0; i < npids && pids[i] != pid; i++)
			;
		if (i == npids && npids < 64)
			pids[npids++] = pid;
		for (i = 0; i < ntids &&
			    (tids[i][0] != pid || tids[i][1] != stream); i++)
			;
		if (i == ntids && ntids < 64) {
			tids[ntids][0] = pid;
			tids[ntids++][1] = stream;
		}
	}
	free(line);
	fclose(f);
	/* names: metadata sorts first (ts of the recording's start) */
	for (i = 0; i < npids; i++)
		add_event(
			r, r->t0,
			"{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"metainfer serve %d: live switching\"}}",
			pids[i], pids[i] - TL_PID_BASE);
	for (i = 0; i < ntids; i++)
		add_event(
			r, r->t0,
			"{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"stream %d\"}}",
			tids[i][0], tids[i][1], tids[i][1]);
	return ret < 0 ? ret : n;
}

/* ---- command line ------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: metainfer trace [options] [-- COMMAND [ARGS...]]\n"
		"\n"
		"Record the job lifecycle of every metainfer device (tracefs: the\n"
		"metainfer: and gpu_scheduler: tracepoints) and its sensors\n"
		"(GET_COUNTERS: temperature, clock, power, queue depth), and write a\n"
		"Chrome trace-event JSON file for Perfetto or chrome://tracing.\n"
		"\n"
		"  -o, --output FILE     the JSON file (default metainfer-trace.json;\n"
		"                        - for stdout)\n"
		"  -d, --duration S      stop after S seconds (default: 10, or when\n"
		"                        COMMAND exits)\n"
		"  -i, --interval MS     sensor sampling period (default 100)\n"
		"  -L, --timeline FILE   merge the switch chains that 'metainfer serve\n"
		"                        --timeline FILE' wrote (read at the end;\n"
		"                        repeatable)\n"
		"  -U, --user-only       record no kernel events or sensors (no tracefs\n"
		"                        needed): only the --timeline files, e.g. of\n"
		"                        serve on emulated devices\n"
		"  -h, --help            this text\n"
		"\n"
		"With COMMAND, record while it runs and exit with its status.\n"
		"Ctrl-C stops the recording and writes the file.  Needs root\n"
		"(except --user-only).\n");
}

int mi_trace_main(int argc, char **argv);

int mi_trace_main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "duration", required_argument, NULL, 'd' },
		{ "interval", required_argument, NULL, 'i' },
		{ "timeline", required_argument, NULL, 'L' },
		{ "user-only", no_argument, NULL, 'U' },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	const char *out = "metainfer-trace.json";
	double duration = 0;
	long interval_ms = 100;
	struct rec r = { .pipe_fd = -1 };
	struct sigaction sa = { .sa_handler = on_signal };
	int64_t end = 0, next, t;
	const char *tl[MAX_TIMELINES];
	int ntl = 0, chains = 0;
	bool user_only = false;
	pid_t child = 0;
	int c, rc = 1, err, status;
	char *e;
	size_t i;

	while ((c = getopt_long(argc, argv, "+o:d:i:L:Uh", lopts, NULL)) !=
	       -1) {
		switch (c) {
		case 'L':
			if (ntl == MAX_TIMELINES) {
				fprintf(stderr, "%s: at most %d --timeline files\n",
					prog, MAX_TIMELINES);
				return EXIT_USAGE;
			}
			tl[ntl++] = optarg;
			break;
		case 'U':
			user_only = true;
			break;
		case 'o':
			out = optarg;
			break;
		case 'd':
			duration = strtod(optarg, &e);
			if (*e || !(duration > 0) || duration > 1e6) {
				fprintf(stderr,
					"%s: --duration: not a positive number of seconds: '%s'\n",
					prog, optarg);
				return EXIT_USAGE;
			}
			break;
		case 'i':
			interval_ms = strtol(optarg, &e, 10);
			if (*e || interval_ms < 1 || interval_ms > 60000) {
				fprintf(stderr,
					"%s: --interval: not 1..60000 ms: '%s'\n",
					prog, optarg);
				return EXIT_USAGE;
			}
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (optind < argc && strcmp(argv[optind - 1], "--")) {
		fprintf(stderr,
			"%s: unexpected argument '%s' (COMMAND goes after --)\n",
			prog, argv[optind]);
		return EXIT_USAGE;
	}
	if (optind >= argc && !duration)
		duration = 10;
	if (user_only && !ntl) {
		fprintf(stderr, "%s: --user-only needs a --timeline file\n",
			prog);
		return EXIT_USAGE;
	}

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	if (!user_only) {
		open_devices(&r);
		if (rec_start(&r))
			goto cleanup;
	}
	if (!user_only && !r.sched_events)
		fprintf(stderr,
			"%s: no gpu_scheduler tracepoints: jobs are matched by their ids only\n",
			prog);
	r.t0 = now_ns();
	if (duration)
		end = r.t0 + (int64_t)(duration * 1e9);
	if (optind < argc) {
		child = fork();
		if (child < 0) {
			fprintf(stderr, "%s: fork: %s\n", prog,
				strerror(errno));
			goto cleanup;
		}
		if (child == 0) {
			signal(SIGINT, SIG_DFL);
			signal(SIGTERM, SIG_DFL);
			execvp(argv[optind], argv + optind);
			fprintf(stderr, "%s: %s: %s\n", prog, argv[optind],
				strerror(errno));
			_exit(127);
		}
	}
	fprintf(stderr, "%s: recording %d device%s%s\n", prog, r.ndevs,
		r.ndevs == 1 ? "" : "s", child ? "" : "; Ctrl-C to end");
	rc = 0;
	next = r.t0;
	for (;;) {
		t = now_ns();
		if (t >= next && !user_only) {
			sample(&r);
			next += interval_ms * 1000000LL;
			if (next < t)
				next = t + interval_ms * 1000000LL;
		}
		err = user_only ? 0 : drain_pipe(&r);
		if (err) {
			fprintf(stderr, "%s: trace_pipe: %s\n", prog,
				strerror(-err));
			rc = 1;
			break;
		}
		if (child > 0 && waitpid(child, &status, WNOHANG) == child) {
			child = 0;
			rc = WIFEXITED(status) ? WEXITSTATUS(status) :
						 128 + WTERMSIG(status);
			break;
		}
		if (stop || (end && t >= end))
			break;
		usleep(20000);
	}
	/* the last events: everything before tracing stops */
	t = now_ns();
	if (!user_only) {
		inst_write(&r, "tracing_on", "0");
		sample(&r);
		drain_pipe(&r);
	}
	if (child > 0)
		fprintf(stderr, "%s: stopped; %s (pid %d) is still running\n",
			prog, argv[optind], (int)child);
	job_events_add(&r, t);
	for (i = 0; i < (size_t)ntl; i++) {
		int k = tl_merge(&r, tl[i]);

		if (k < 0)
			rc = 1;
		else
			chains += k;
	}
	if (write_json(&r, out,
		       child >= 0 && optind < argc ? argv + optind : NULL))
		rc = 1;
	else
		fprintf(stderr, "%s: %zu jobs, %d switch chains, %zu events -> %s%s\n",
			prog, r.njobs, chains, r.nev, out,
			r.lost_lines ?
				" (ftrace lost events: the buffer overflowed)" :
				"");
cleanup:
	rec_stop(&r);
	for (i = 0; i < r.nev; i++)
		free(r.ev[i].json);
	free(r.ev);
	free(r.jobs);
	free(r.line);
	map_free(&r.by_fptr);
	map_free(&r.by_hw);
	map_free(&r.last_submit);
	map_free(&r.running);
	for (c = 0; c < r.ndevs; c++)
		close(r.devs[c].fd);
	return rc;
}
