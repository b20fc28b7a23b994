// SPDX-License-Identifier: GPL-2.0-only
/*
 * milat: per device and queue, log2 histograms of metainfer jobs' queue
 * wait and run time, printed (and cleared) every interval, biolatency
 * style (user side of milat.bpf.c, through its generated skeleton).
 *
 *   milat [options] [INTERVAL [COUNT]] [-- COMMAND [ARGS...]]
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <linux/types.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "mi_bpf_util.h"
#include "milat.h"
#include "milat.skel.h"

static const char *prog = "milat";

struct opts {
	uint64_t interval_s, count;
	int dev;
	uint32_t pid;
	bool millis, timestamp, verbose;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: %s [options] [INTERVAL [COUNT]] [-- COMMAND [ARGS...]]\n"
		"\n"
		"Log2 histograms of metainfer jobs' queue wait (gpu_scheduler:\n"
		"drm_sched_job -> drm_run_job) and run time (drm_run_job ->\n"
		"metainfer:done), per device (render minor) and hardware queue.\n"
		"Printed and cleared every INTERVAL seconds, COUNT times; without\n"
		"INTERVAL, once at the end (Ctrl-C, --duration, COMMAND's exit).\n"
		"\n"
		"  -m, --milliseconds  buckets in milliseconds (default microseconds)\n"
		"  -T, --timestamp     print the time of day with each interval\n"
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

static uint64_t duration_s;

static int parse_args(int argc, char **argv, struct opts *o)
{
	static const struct option lopts[] = {
		{ "milliseconds", no_argument, NULL, 'm' },
		{ "timestamp", no_argument, NULL, 'T' },
		{ "dev", required_argument, NULL, 'd' },
		{ "pid", required_argument, NULL, 'p' },
		{ "duration", required_argument, NULL, 'D' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	uint64_t v;
	int c, pos = 0;

	while ((c = getopt_long(argc, argv, "+mTd:p:D:vh", lopts, NULL)) !=
	       -1) {
		if (strchr("dpD", c) && mi_bpf_parse_u64(optarg, &v)) {
			fprintf(stderr,
				"%s: -%c: not a non-negative number: '%s'\n",
				prog, c, optarg);
			return -EINVAL;
		}
		switch (c) {
		case 'm':
			o->millis = true;
			break;
		case 'T':
			o->timestamp = true;
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
			duration_s = v;
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
	/*
	 * INTERVAL [COUNT] up to "--"; getopt already consumed a "--" that
	 * came right after the options.
	 */
	if (optind > 1 && !strcmp(argv[optind - 1], "--"))
		return 0;
	while (optind < argc && strcmp(argv[optind], "--")) {
		if (pos == 2 || mi_bpf_parse_u64(argv[optind], &v) || !v) {
			fprintf(stderr,
				"%s: unexpected argument '%s' (INTERVAL and COUNT are positive numbers; COMMAND goes after --)\n",
				prog, argv[optind]);
			return -EINVAL;
		}
		if (pos++ == 0)
			o->interval_s = v;
		else
			o->count = v;
		optind++;
	}
	if (optind < argc)
		optind++; /* "--" */
	return 0;
range:
	fprintf(stderr, "%s: option value out of range\n", prog);
	return -ERANGE;
}

static void print_stars(uint64_t val, uint64_t max, int width)
{
	int n = max ? (int)((double)val * width / max) : 0, i;

	if (n > width)
		n = width;
	for (i = 0; i < width; i++)
		putchar(i < n ? '*' : ' ');
}

static void print_hist(const struct milat_key *k, const struct milat_hist *h,
		       bool millis)
{
	static const char *const kinds[] = { "queue wait", "run" };
	const char *unit = millis ? "msecs" : "usecs";
	uint64_t max = 0;
	int i, last = -1;

	for (i = 0; i < MILAT_SLOTS; i++) {
		if (h->slots[i])
			last = i;
		if (h->slots[i] > max)
			max = h->slots[i];
	}
	printf("dev %d queue %u %s: %llu jobs, avg %llu %s", k->dev, k->queue,
	       k->kind < MILAT_KINDS ? kinds[k->kind] : "?",
	       (unsigned long long)h->count,
	       (unsigned long long)(h->count ? h->sum_us / h->count : 0),
	       millis ? "ms" : "us");
	if (k->kind == MILAT_RUN)
		printf(", %llu failed", (unsigned long long)h->failed);
	printf("\n%*s%-*s : count    distribution\n", 5, "", 19, unit);
	for (i = 0; i <= last; i++) {
		uint64_t lo = i ? 1ull << i : 0, hi = (1ull << (i + 1)) - 1;

		printf("%10llu -> %-10llu : %-8llu |", (unsigned long long)lo,
		       (unsigned long long)hi, (unsigned long long)h->slots[i]);
		print_stars(h->slots[i], max, 40);
		printf("|\n");
	}
	printf("\n");
}

static int key_cmp(const void *a, const void *b)
{
	const struct milat_key *x = a, *y = b;

	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	if (x->queue != y->queue)
		return x->queue < y->queue ? -1 : 1;
	return x->kind < y->kind ? -1 : x->kind > y->kind;
}

/* print every histogram in key order and clear the map */
static int print_and_clear(int fd, const struct opts *o)
{
	struct milat_key keys[1024], *prev = NULL;
	struct milat_hist h;
	int n = 0, i;

	if (o->timestamp) {
		char buf[32];
		time_t t = time(NULL);

		strftime(buf, sizeof(buf), "%H:%M:%S", localtime(&t));
		printf("%s\n", buf);
	}
	while (n < 1024 && !bpf_map_get_next_key(fd, prev, &keys[n])) {
		prev = &keys[n];
		n++;
	}
	qsort(keys, n, sizeof(keys[0]), key_cmp);
	if (!n)
		printf("no metainfer jobs finished\n\n");
	for (i = 0; i < n; i++) {
		if (bpf_map_lookup_elem(fd, &keys[i], &h))
			continue;
		print_hist(&keys[i], &h, o->millis);
	}
	for (i = 0; i < n; i++)
		bpf_map_delete_elem(fd, &keys[i]);
	fflush(stdout);
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o = { .dev = -1 };
	struct milat_bpf *skel;
	uint64_t now, end_ns = 0, next_ns = 0, printed = 0;
	pid_t child = 0;
	int err, rc = 1, code, fd;

	if (parse_args(argc, argv, &o))
		return 2;
	mi_bpf_libbpf_output(o.verbose);
	if (mi_bpf_check_formats(prog))
		return 1;
	skel = milat_bpf__open();
	if (!skel) {
		fprintf(stderr, "%s: cannot open the BPF object: %s\n", prog,
			strerror(errno));
		return 1;
	}
	skel->rodata->targ_dev = o.dev;
	skel->rodata->targ_pid = o.pid;
	skel->rodata->targ_ms = o.millis;
	err = milat_bpf__load(skel);
	if (err) {
		fprintf(stderr, "%s: cannot load the BPF programs: %s\n", prog,
			strerror(-err));
		goto cleanup;
	}
	err = milat_bpf__attach(skel);
	if (err) {
		fprintf(stderr, "%s: cannot attach to the tracepoints: %s\n",
			prog, strerror(-err));
		goto cleanup;
	}
	fd = bpf_map__fd(skel->maps.hists);
	mi_bpf_signals();
	now = mi_bpf_now_ns();
	if (duration_s)
		end_ns = now + duration_s * 1000000000ull;
	if (o.interval_s)
		next_ns = now + o.interval_s * 1000000000ull;
	fprintf(stderr, "%s: tracing metainfer job latency; Ctrl-C to end\n",
		prog);
	if (optind < argc) {
		child = mi_bpf_spawn(prog, argv + optind);
		if (child < 0) {
			fprintf(stderr, "%s: fork: %s\n", prog,
				strerror(-child));
			goto cleanup;
		}
	}
	rc = 0;
	for (;;) {
		usleep(50000);
		now = mi_bpf_now_ns();
		if (mi_bpf_stop || (end_ns && now >= end_ns))
			break;
		if (child > 0 && mi_bpf_reaped(child, &code)) {
			child = 0;
			rc = code;
			break;
		}
		if (next_ns && now >= next_ns) {
			print_and_clear(fd, &o);
			next_ns += o.interval_s * 1000000000ull;
			if (o.count && ++printed >= o.count)
				goto done;
		}
	}
	/* the last (partial) interval, or the only one */
	print_and_clear(fd, &o);
done:
	if (child > 0)
		fprintf(stderr, "%s: stopped; %s (pid %d) is still running\n",
			prog, argv[optind], child);
cleanup:
	milat_bpf__destroy(skel);
	return rc;
}
