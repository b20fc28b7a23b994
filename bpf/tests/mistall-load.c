// SPDX-License-Identifier: GPL-2.0-only
/*
 * mistall-load: a known job mix with planted stalls, for the tests of
 * mistall, milat and `metainfer trace` (bpf/tests/run-bpf-tests).
 *
 *   mistall-load --list FILE [--sim ID] [--jobs N] [--slow-ms MS] [--hang]
 *               [--go FILE]
 *
 * On metainfer_sim device ID (default 0), one context per queue (with
 * --go, the jobs start once FILE exists, so that two loads submit at the
 * same time):
 *  1. N small COPY jobs (default 20), alternating queues 0 and 1, each
 *     waited for before the next: the "normal" jobs, well under any stall
 *     threshold;
 *  2. with --slow-ms: the device's launch cost is set to MS milliseconds
 *     (the personality's live launch_ns), one job runs on queue 1
 *     ("slow": long run, status 0), and the launch cost is restored;
 *  3. with --hang: fail_hang makes the next job on queue 0 hang until the
 *     core's job timeout ("hang": long run, -ETIMEDOUT), and a second job
 *     submitted right behind it on the same context waits for it
 *     ("behind": long queue wait, short run, status 0).
 *
 * FILE gets one line per job, in submission order:
 *   KIND DEV CTX QUEUE SEQNO STATUS PID
 * (DEV = render minor, STATUS = the status WAIT reported, PID = this
 * process: context ids are per file, so two loads at once have the same
 * CTX and SEQNO and only PID tells their jobs apart).  Exit 0 when
 * every job finished as expected, 1 otherwise.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mi_test.h"

static FILE *list;
static int fd, minor;
static uint32_t bos[2];
static struct mi_stream s;

static void die(const char *what, int err)
{
	fprintf(stderr, "mistall-load: %s: %s\n", what, strerror(-err));
	exit(1);
}

static uint64_t submit(uint32_t ctx)
{
	uint64_t seq;
	int ret = mi_submit(fd, ctx, bos, 2, s.buf, s.len, &seq);

	if (ret)
		die("SUBMIT", ret);
	return seq;
}

/* wait for a job and list it; returns its status */
static int64_t finish(const char *kind, uint32_t ctx, uint32_t queue,
		      uint64_t seq)
{
	int64_t st;
	int ret = mi_wait(fd, ctx, seq, 30000, &st);

	if (ret)
		die("WAIT", ret);
	fprintf(list, "%s %d %u %u %llu %lld %d\n", kind, minor, ctx, queue,
		(unsigned long long)seq, (long long)st, (int)getpid());
	fflush(list);
	return st;
}

static int set_launch_ns(unsigned int id, long long ns)
{
	char path[128], val[64];

	snprintf(path, sizeof(path),
		 "/sys/bus/platform/devices/metainfer_sim.%u/personality", id);
	snprintf(val, sizeof(val), "launch_ns=%lld", ns);
	return mi_write_file(path, val);
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "list", required_argument, NULL, 'l' },
		{ "sim", required_argument, NULL, 's' },
		{ "jobs", required_argument, NULL, 'n' },
		{ "slow-ms", required_argument, NULL, 'S' },
		{ "hang", no_argument, NULL, 'H' },
		{ "go", required_argument, NULL, 'g' },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	unsigned int id = 0, jobs = 20, slow_ms = 0;
	const char *go = NULL;
	bool hang = false;
	uint32_t ctx[2];
	uint64_t seq, seq2;
	long long launch;
	char path[128];
	int c, ret, bad = 0;
	unsigned int i;
	void *src;

	while ((c = getopt_long(argc, argv, "l:s:n:S:Hg:h", lopts, NULL)) !=
	       -1) {
		switch (c) {
		case 'l':
			list = fopen(optarg, "w");
			if (!list)
				die(optarg, -errno);
			break;
		case 's':
			id = strtoul(optarg, NULL, 0);
			break;
		case 'n':
			jobs = strtoul(optarg, NULL, 0);
			break;
		case 'S':
			slow_ms = strtoul(optarg, NULL, 0);
			break;
		case 'H':
			hang = true;
			break;
		case 'g':
			go = optarg;
			break;
		default:
			fprintf(stderr,
				"usage: mistall-load --list FILE [--sim ID] [--jobs N] [--slow-ms MS] [--hang] [--go FILE]\n");
			return c == 'h' ? 0 : 2;
		}
	}
	if (!list) {
		fprintf(stderr, "mistall-load: --list FILE is required\n");
		return 2;
	}
	minor = mi_sim_minor(id);
	if (minor < 0)
		die("no such sim device", minor);
	fd = mi_open_minor(minor);
	if (fd < 0)
		die("open", fd);
	src = mi_bo_new(fd, 4096, &bos[0]);
	if (!src)
		die("BO_CREATE", -ENOMEM);
	memset(src, 0x5a, 64);
	ret = mi_bo_create(fd, 4096, &bos[1]);
	if (ret)
		die("BO_CREATE", ret);
	for (i = 0; i < 2; i++) {
		ret = mi_ctx_create(fd, i, DRM_METAINFER_PRIORITY_NORMAL,
				    &ctx[i]);
		if (ret)
			die("CTX_CREATE", ret);
	}
	mi_stream_init(&s);
	mi_copy_job(&s, 64, 0, 0);
	mi_stream_finish(&s);

	for (i = 0; go && access(go, F_OK); i++) {
		if (i == 60000)
			die(go, -ETIMEDOUT);
		usleep(1000);
	}
	for (i = 0; i < jobs; i++) {
		seq = submit(ctx[i & 1]);
		bad |= finish("normal", ctx[i & 1], i & 1, seq) != 0;
	}
	if (slow_ms) {
		snprintf(
			path, sizeof(path),
			"/sys/bus/platform/devices/metainfer_sim.%u/personality",
			id);
		ret = mi_read_key(path, "launch_ns", &launch);
		if (ret)
			die("personality launch_ns", ret);
		ret = set_launch_ns(id, (long long)slow_ms * 1000000);
		if (ret)
			die("set launch_ns", ret);
		seq = submit(ctx[1]);
		bad |= finish("slow", ctx[1], 1, seq) != 0;
		ret = set_launch_ns(id, launch);
		if (ret)
			die("restore launch_ns", ret);
	}
	if (hang) {
		ret = mi_sim_knob(id, "fail_hang", 1);
		if (ret)
			die("fail_hang", ret);
		seq = submit(ctx[0]);
		seq2 = submit(ctx[0]);
		bad |= finish("hang", ctx[0], 0, seq) != -ETIMEDOUT;
		bad |= finish("behind", ctx[0], 0, seq2) != 0;
	}
	fclose(list);
	mi_stream_free(&s);
	close(fd);
	if (bad)
		fprintf(stderr,
			"mistall-load: a job finished with an unexpected status\n");
	return bad;
}
