// SPDX-License-Identifier: GPL-2.0-only
/*
 * mistall: print each metainfer job whose queue wait or run time reaches a
 * threshold (user side of mistall.bpf.c, through its generated skeleton).
 *
 *   mistall [options] [-- COMMAND [ARGS...]]
 *
 * Runs until Ctrl-C, the end of --duration, or COMMAND's exit (then exits
 * with COMMAND's status).  See --help and Documentation/tracing.rst.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/types.h>
#include <bpf/libbpf.h>

#include "mi_bpf_util.h"
#include "mistall.h"
#include "mistall.skel.h"

static const char *prog = "mistall";

struct opts {
	uint64_t wait_us, run_us, duration_s;
	int dev;
	uint32_t pid;
	bool failed, verbose;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: %s [options] [-- COMMAND [ARGS...]]\n"
		"\n"
		"Print every metainfer job whose queue wait or run time reaches a\n"
		"threshold: device (render minor), submitting pid and comm, context,\n"
		"queue, seqno, wait and run time in microseconds, status.\n"
		"Queue wait runs from gpu_scheduler:drm_sched_job to drm_run_job,\n"
		"run time from drm_run_job to metainfer:done.\n"
		"\n"
		"  -t, --threshold US  both thresholds (default 10000 = 10 ms)\n"
		"  -w, --wait US       queue-wait threshold\n"
		"  -r, --run US        run-time threshold\n"
		"  -x, --failed        also every job that finished with an error\n"
		"  -d, --dev MINOR     only this device (render minor, e.g. 128)\n"
		"  -p, --pid PID       only jobs submitted by this process\n"
		"  -D, --duration S    stop after S seconds\n"
		"  -v, --verbose       libbpf's messages\n"
		"  -h, --help          this text\n"
		"\n"
		"With COMMAND, trace while it runs and exit with its status.\n"
		"Needs root (CAP_BPF and CAP_PERFMON) and metainfer.ko loaded.\n",
		prog);
}

static int parse_args(int argc, char **argv, struct opts *o)
{
	static const struct option lopts[] = {
		{ "threshold", required_argument, NULL, 't' },
		{ "wait", required_argument, NULL, 'w' },
		{ "run", required_argument, NULL, 'r' },
		{ "failed", no_argument, NULL, 'x' },
		{ "dev", required_argument, NULL, 'd' },
		{ "pid", required_argument, NULL, 'p' },
		{ "duration", required_argument, NULL, 'D' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	uint64_t v;
	int c;

	while ((c = getopt_long(argc, argv, "+t:w:r:xd:p:D:vh", lopts, NULL)) !=
	       -1) {
		if (strchr("twrdpD", c) && mi_bpf_parse_u64(optarg, &v)) {
			fprintf(stderr,
				"%s: -%c: not a non-negative number: '%s'\n",
				prog, c, optarg);
			return -EINVAL;
		}
		switch (c) {
		case 't':
			o->wait_us = o->run_us = v;
			break;
		case 'w':
			o->wait_us = v;
			break;
		case 'r':
			o->run_us = v;
			break;
		case 'x':
			o->failed = true;
			break;
		case 'd':
			if (v > 0x7fffffff)
				goto range;
			o->dev = (int)v;
			break;
		case 'p':
			if (!v || v > 0x7fffffff)
				goto range;
			o->pid = (uint32_t)v;
			break;
		case 'D':
			if (!v)
				goto range;
			o->duration_s = v;
			break;
		case 'v':
			o->verbose = true;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return -EINVAL;
		}
	}
	if (o->wait_us > UINT64_MAX / 1000 || o->run_us > UINT64_MAX / 1000)
		goto range;
	return 0;
range:
	fprintf(stderr, "%s: option value out of range\n", prog);
	return -ERANGE;
}

static uint64_t t0_ns;

static int on_event(void *ctx, void *data, size_t len)
{
	const struct mistall_event *e = data;
	char comm[MISTALL_COMM_LEN + 1], st[32];

	if (len < sizeof(*e))
		return 0;
	memcpy(comm, e->comm, MISTALL_COMM_LEN);
	comm[MISTALL_COMM_LEN] = 0;
	printf("%-10.3f %-4d %-7u %-16s %-4u %-2u %-8llu %11llu %11llu %s\n",
	       e->ts_ns > t0_ns ? (e->ts_ns - t0_ns) / 1e9 : 0.0, e->dev,
	       e->pid, comm, e->ctx, e->queue, (unsigned long long)e->seqno,
	       (unsigned long long)(e->wait_ns / 1000),
	       (unsigned long long)(e->run_ns / 1000),
	       mi_bpf_status_str(e->status, st, sizeof(st)));
	fflush(stdout);
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o = { .wait_us = 10000, .run_us = 10000, .dev = -1 };
	struct ring_buffer *rb = NULL;
	struct mistall_bpf *skel;
	uint64_t end_ns = 0;
	pid_t child = 0;
	int err, rc = 1, code;

	if (parse_args(argc, argv, &o))
		return 2;
	mi_bpf_libbpf_output(o.verbose);
	if (mi_bpf_check_formats(prog))
		return 1;
	skel = mistall_bpf__open();
	if (!skel) {
		fprintf(stderr, "%s: cannot open the BPF object: %s\n", prog,
			strerror(errno));
		return 1;
	}
	skel->rodata->min_wait_ns = o.wait_us * 1000;
	skel->rodata->min_run_ns = o.run_us * 1000;
	skel->rodata->report_failed = o.failed;
	skel->rodata->targ_dev = o.dev;
	skel->rodata->targ_pid = o.pid;
	err = mistall_bpf__load(skel);
	if (err) {
		fprintf(stderr, "%s: cannot load the BPF programs: %s\n", prog,
			strerror(-err));
		goto cleanup;
	}
	err = mistall_bpf__attach(skel);
	if (err) {
		fprintf(stderr, "%s: cannot attach to the tracepoints: %s\n",
			prog, strerror(-err));
		goto cleanup;
	}
	rb = ring_buffer__new(bpf_map__fd(skel->maps.events), on_event, NULL,
			      NULL);
	if (!rb) {
		fprintf(stderr, "%s: cannot open the ring buffer: %s\n", prog,
			strerror(errno));
		goto cleanup;
	}
	mi_bpf_signals();
	t0_ns = mi_bpf_now_ns();
	if (o.duration_s)
		end_ns = t0_ns + o.duration_s * 1000000000ull;
	fprintf(stderr,
		"%s: tracing metainfer jobs with queue wait >= %llu us or run >= %llu us%s; Ctrl-C to end\n",
		prog, (unsigned long long)o.wait_us,
		(unsigned long long)o.run_us, o.failed ? " or an error" : "");
	printf("%-10s %-4s %-7s %-16s %-4s %-2s %-8s %11s %11s %s\n", "TIME(s)",
	       "DEV", "PID", "COMM", "CTX", "Q", "SEQNO", "WAIT_US", "RUN_US",
	       "STATUS");
	fflush(stdout);
	if (optind < argc) {
		child = mi_bpf_spawn(prog, argv + optind);
		if (child < 0) {
			fprintf(stderr, "%s: fork: %s\n", prog,
				strerror(-child));
			goto cleanup;
		}
	}
	rc = 0;
	while (!mi_bpf_stop) {
		err = ring_buffer__poll(rb, 100);
		if (err < 0 && err != -EINTR) {
			fprintf(stderr, "%s: ring buffer: %s\n", prog,
				strerror(-err));
			rc = 1;
			break;
		}
		if (child > 0 && mi_bpf_reaped(child, &code)) {
			child = 0;
			rc = code;
			break;
		}
		if (end_ns && mi_bpf_now_ns() >= end_ns)
			break;
	}
	ring_buffer__consume(rb);
	if (child > 0)
		fprintf(stderr, "%s: stopped; %s (pid %d) is still running\n",
			prog, argv[optind], child);
cleanup:
	ring_buffer__free(rb);
	mistall_bpf__destroy(skel);
	return rc;
}
