// SPDX-License-Identifier: GPL-2.0-only
/*
 * mi_bench: cost of the MetaInfer submission path, printed (not asserted).
 *
 *   mi_bench [--device NAME] [--roundtrips N] [--pipelined N]
 *   mi_bench --short [--hang-sim ID]
 *
 * Measures one SUBMIT + WAIT round trip of a tiny COPY job (median and
 * mean over N) and N jobs submitted back to back then waited for
 * (pipelined).  Every job's status is checked.  --short runs a handful of
 * jobs only (the tracepoint check's workload); --hang-sim ID also makes
 * one job of sim device ID hang so the timeout and reset paths run.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "mi_test.h"

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

static void die(const char *what, int err)
{
	fprintf(stderr, "mi_bench: %s: %s\n", what, strerror(-err));
	exit(1);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "device", required_argument, NULL, 'd' },
		{ "roundtrips", required_argument, NULL, 'r' },
		{ "pipelined", required_argument, NULL, 'p' },
		{ "short", no_argument, NULL, 's' },
		{ "hang-sim", required_argument, NULL, 'H' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *dev = NULL;
	long roundtrips = 200, pipelined = 1000, hang_sim = -1;
	int shortrun = 0, c, fd, ret;
	uint32_t bos[2], ctx;
	struct mi_stream s;
	struct drm_metainfer_get_counters c0, c1;
	char name[64] = "?";
	int64_t *lat, t0, t1, st;
	uint64_t seq = 0, first = 0;
	uint8_t *src;
	long i;

	while ((c = getopt_long(argc, argv, "d:r:p:sH:h", opts, NULL)) != -1) {
		switch (c) {
		case 'd':
			dev = optarg;
			break;
		case 'r':
			roundtrips = strtol(optarg, NULL, 0);
			break;
		case 'p':
			pipelined = strtol(optarg, NULL, 0);
			break;
		case 's':
			shortrun = 1;
			break;
		case 'H':
			hang_sim = strtol(optarg, NULL, 0);
			break;
		default:
			fprintf(stderr,
				"usage: mi_bench [--device NAME] [--roundtrips N] [--pipelined N] | --short [--hang-sim ID]\n");
			return c == 'h' ? 0 : 2;
		}
	}
	if (shortrun) {
		roundtrips = 5;
		pipelined = 10;
	}
	if (roundtrips < 1 || pipelined < 1) {
		fprintf(stderr, "mi_bench: counts must be >= 1\n");
		return 2;
	}

	fd = mi_open_named(dev, NULL);
	if (fd < 0)
		die(dev ? dev : "no metainfer device", fd);
	mi_get_param_str(fd, DRM_METAINFER_PARAM_NAME, name, sizeof(name));
	if (hang_sim >= 0 && mi_sim_minor(hang_sim) != mi_fd_minor(fd)) {
		close(fd);
		fd = mi_open_minor(mi_sim_minor(hang_sim));
		if (fd < 0)
			die("opening the --hang-sim device", fd);
	}
	ret = mi_ctx_create(fd, 0, DRM_METAINFER_PRIORITY_NORMAL, &ctx);
	if (ret)
		die("CTX_CREATE", ret);
	src = mi_bo_new(fd, 4096, &bos[0]);
	if (!src)
		die("BO_CREATE", -ENOMEM);
	memset(src, 0x5a, 64);
	ret = mi_bo_create(fd, 4096, &bos[1]);
	if (ret)
		die("BO_CREATE", ret);
	mi_stream_init(&s);
	mi_copy_job(&s, 64, 0, 0);
	mi_stream_finish(&s);

	lat = calloc(roundtrips, sizeof(*lat));
	if (!lat)
		die("calloc", -ENOMEM);
	/* warm up */
	ret = mi_submit(fd, ctx, bos, 2, s.buf, s.len, &seq);
	if (!ret)
		ret = mi_wait(fd, ctx, seq, 30000, &st);
	if (ret || st)
		die("warm-up job", ret ? ret : (int)st);

	mi_counters(fd, 0, &c0);
	for (i = 0; i < roundtrips; i++) {
		t0 = mi_now_ns();
		ret = mi_submit(fd, ctx, bos, 2, s.buf, s.len, &seq);
		if (ret)
			die("SUBMIT", ret);
		ret = mi_wait(fd, ctx, seq, 30000, &st);
		if (ret || st)
			die("WAIT", ret ? ret : (int)st);
		lat[i] = mi_now_ns() - t0;
	}
	mi_counters(fd, 0, &c1);
	qsort(lat, roundtrips, sizeof(*lat), cmp_i64);
	{
		int64_t sum = 0;

		for (i = 0; i < roundtrips; i++)
			sum += lat[i];
		printf("%s: submit+wait round trip: median %.1f us, mean %.1f us, min %.1f us over %ld jobs (modelled chip time %.1f us/job)\n",
		       name, lat[roundtrips / 2] / 1e3, sum / 1e3 / roundtrips,
		       lat[0] / 1e3, roundtrips,
		       (c1.busy_ns - c0.busy_ns) / 1e3 / roundtrips);
	}

	mi_counters(fd, 0, &c0);
	t0 = mi_now_ns();
	for (i = 0; i < pipelined; i++) {
		ret = mi_submit(fd, ctx, bos, 2, s.buf, s.len, &seq);
		if (ret)
			die("SUBMIT (pipelined)", ret);
		if (!first)
			first = seq;
	}
	ret = mi_wait(fd, ctx, seq, 120000, &st);
	t1 = mi_now_ns();
	if (ret || st)
		die("WAIT (pipelined)", ret ? ret : (int)st);
	for (i = 0; i < pipelined; i++) {
		ret = mi_wait(fd, ctx, first + i, 0, &st);
		if (ret || st)
			die("job status (pipelined)", ret ? ret : (int)st);
	}
	mi_counters(fd, 0, &c1);
	printf("%s: %ld pipelined jobs: %.1f ms total, %.1f us/job, %.0f jobs/s (modelled chip time %.1f us/job)\n",
	       name, pipelined, (t1 - t0) / 1e6, (t1 - t0) / 1e3 / pipelined,
	       pipelined * 1e9 / (double)(t1 - t0),
	       (c1.busy_ns - c0.busy_ns) / 1e3 / pipelined);
	if (getenv("VMRUN"))
		printf("(measured inside the QEMU TCG test VM: emulated CPU, not hardware speed)\n");

	if (hang_sim >= 0) {
		ret = mi_sim_knob(hang_sim, "fail_hang", 1);
		if (ret)
			die("fail_hang knob", ret);
		ret = mi_submit(fd, ctx, bos, 2, s.buf, s.len, &seq);
		if (!ret)
			ret = mi_wait(fd, ctx, seq, 60000, &st);
		if (ret)
			die("hung job", ret);
		printf("%s: injected hang: job status %s\n", name,
		       st == -ETIMEDOUT ? "-ETIMEDOUT (recovered)" : strerror((int)-st));
		if (st != -ETIMEDOUT)
			return 1;
	}
	mi_stream_free(&s);
	free(lat);
	munmap(src, 4096);
	close(fd);
	return 0;
}
