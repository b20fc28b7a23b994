// SPDX-License-Identifier: GPL-2.0-only
/*
 * metainfer fingerprint: bring the fingerprint DB up to date for the
 * selected devices (lib/fingerprint), with a progress bar and a time
 * estimate on stderr, and print per device what was measured (text or
 * JSON).  --check runs only the staleness check.  Documented in
 * Documentation/fingerprint.rst.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "internal.h"
#include "device/device.h"
#include "fingerprint/fingerprint.h"

#define FP_MAX_DEVS 64

static void usage(FILE *f, const char *prog)
{
	fprintf(f,
		"usage: %s fingerprint [--devices LIST] [--quick] [--db FILE] [--json]\n"
		"                        [--threads N] [--check] [--threshold X]\n"
		"\n"
		"Measure what each device is good at (op families x shapes x dtypes x\n"
		"layouts x kernel variants, plus bandwidth / GEMM / launch probes) into a\n"
		"SQLite DB.  Incremental: only missing or stale points are measured.\n"
		"\n"
		"  --devices LIST   devices (\"cpu\", \"npu0,npu1\", \"all\"; default cpu)\n"
		"  --quick          the quick grid (a few shapes per family)\n"
		"  --db FILE        the DB (default metainfer-fingerprint.db)\n"
		"  --json           one JSON object per device on stdout\n"
		"  --threads N      CPU threads of the grid (default 1)\n"
		"  --check          only the staleness check (three ops re-timed)\n"
		"  --threshold X    relative change the check calls stale (default 0.5)\n",
		prog);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void progress(void *arg, int done, int total, double el, double eta,
		     const char *what)
{
	int w = 30, k = total ? done * w / total : w;

	fprintf(stderr, "\r[%.*s%*s] %3d/%-3d %5.1f s", k,
		"##############################", w - k, "", done, total, el);
	if (eta >= 0)
		fprintf(stderr, ", ~%.0f s left", eta);
	fprintf(stderr, "  %-36.36s", what);
	if (done == total)
		fputc('\n', stderr);
	fflush(stderr);
}

int mi_cli_fingerprint(int argc, char **argv, const char *prog)
{
	static const struct option lo[] = {
		{ "devices", required_argument, NULL, 'd' },
		{ "quick", no_argument, NULL, 'q' },
		{ "db", required_argument, NULL, 'D' },
		{ "json", no_argument, NULL, 'j' },
		{ "threads", required_argument, NULL, 't' },
		{ "check", no_argument, NULL, 'c' },
		{ "threshold", required_argument, NULL, 'T' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct mi_fp_opts o = { .grid = MI_FP_GRID_FULL };
	const char *devs = "cpu", *dbpath = "metainfer-fingerprint.db";
	struct mi_dev *dv[FP_MAX_DEVS];
	struct mi_fp_db *db = NULL;
	bool json = false, check = false;
	int c, n, err, rc = 0;
	char *end;

	optind = 1;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'd':
			devs = optarg;
			break;
		case 'q':
			o.grid = MI_FP_GRID_QUICK;
			break;
		case 'D':
			dbpath = optarg;
			break;
		case 'j':
			json = true;
			break;
		case 't':
			o.threads = strtol(optarg, &end, 10);
			if (*end || o.threads < 1 || o.threads > 1024) {
				fprintf(stderr, "%s fingerprint: bad --threads '%s'\n",
					prog, optarg);
				return 2;
			}
			break;
		case 'c':
			check = true;
			break;
		case 'T':
			o.threshold = strtod(optarg, &end);
			if (*end || !(o.threshold > 0 && o.threshold < 100)) {
				fprintf(stderr, "%s fingerprint: bad --threshold '%s'\n",
					prog, optarg);
				return 2;
			}
			break;
		case 'h':
			usage(stdout, prog);
			return 0;
		default:
			usage(stderr, prog);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "%s fingerprint: unexpected argument '%s'\n", prog,
			argv[optind]);
		return 2;
	}
	n = mi_dev_select(devs, dv, FP_MAX_DEVS);
	if (n < 0) {
		fprintf(stderr, "%s fingerprint: %s\n", prog, mi_last_error());
		return 1;
	}
	/* the CPU is always selected; name it only when asked for */
	if (strcmp(devs, "all") && !strstr(devs, "cpu") && n > 1) {
		memmove(dv, dv + 1, (n - 1) * sizeof(*dv));
		n--;
	}
	err = mi_fp_db_open(dbpath, &db);
	if (err) {
		fprintf(stderr, "%s fingerprint: %s\n", prog, mi_last_error());
		return 1;
	}
	if (!json && !check)
		o.progress = progress;
	for (int i = 0; i < n; i++) {
		struct mi_fp_report rep;
		uint32_t mask = 0;

		if (check) {
			double t0 = now_s();
			int k = mi_fp_check(db, dv[i], &o, &mask);
			double s = now_s() - t0;

			if (k < 0) {
				fprintf(stderr, "%s fingerprint: %s\n", prog,
					mi_last_error());
				rc = 1;
				continue;
			}
			if (json) {
				printf("{\"device\":\"%s\",\"stale_families\":[",
				       dv[i]->name);
				for (int f = 0, first = 1; f < MI_FP_FAMILY_COUNT; f++)
					if (mask & (1u << f)) {
						printf("%s\"%s\"", first ? "" : ",",
						       mi_fp_family_name(f));
						first = 0;
					}
				printf("],\"versions_changed\":%s,\"seconds\":%.3f}\n",
				       mask & 0x80000000u ? "true" : "false", s);
			} else {
				printf("%s: %s", dv[i]->name, k ? "stale:" : "fresh");
				for (int f = 0; f < MI_FP_FAMILY_COUNT; f++)
					if (mask & (1u << f))
						printf(" %s", mi_fp_family_name(f));
				printf("%s (%.2f s)\n",
				       mask & 0x80000000u ? " (versions changed)" : "", s);
			}
			continue;
		}
		if (!json)
			fprintf(stderr, "%s (%s, %s):\n", dv[i]->name, dv[i]->driver,
				dv[i]->personality);
		err = mi_fp_run(db, dv[i], &o, &rep);
		if (err) {
			if (!json)
				fputc('\n', stderr);
			fprintf(stderr, "%s fingerprint: %s: %s\n", prog, dv[i]->name,
				mi_last_error());
			rc = 1;
			continue;
		}
		if (json)
			printf("{\"device\":\"%s\",\"db\":\"%s\",\"grid\":\"%s\","
			       "\"measured\":%d,\"skipped\":%d,\"fell_back\":%d,"
			       "\"versions_changed\":%s,\"seconds\":%.3f,"
			       "\"clock\":\"%s\"}\n",
			       dv[i]->name, dbpath,
			       o.grid == MI_FP_GRID_QUICK ? "quick" : "full",
			       rep.measured, rep.skipped, rep.fell_back,
			       rep.stale_marked ? "true" : "false", rep.seconds,
			       rep.clock_state);
		else
			printf("%s: measured %d, up to date %d, fell back %d, %.1f s (%s)\n",
			       dv[i]->name, rep.measured, rep.skipped, rep.fell_back,
			       rep.seconds, rep.clock_state);
	}
	mi_fp_db_close(db);
	return rc;
}
