// SPDX-License-Identifier: GPL-2.0-only
/*
 * metainfer health: the live health vectors of lib/health, one line per
 * device per sample (text or JSON).  The first round only primes the
 * rates (busy time, DMA bytes, energy) and is not printed, so every
 * printed line covers one interval.  Documented in
 * Documentation/health.rst.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "internal.h"
#include "device/device.h"
#include "health/health.h"

#define HEALTH_MAX_DEVS 64

struct printer {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool json, primed;
	long rounds, want;
};

static volatile sig_atomic_t health_stop;

static void health_sigint(int sig)
{
	health_stop = 1;
}

static void print_round(const struct mi_health_vec *v, int n, void *arg)
{
	struct printer *p = arg;

	pthread_mutex_lock(&p->lock);
	if (p->primed && (p->want < 0 || p->rounds < p->want)) {
		for (int i = 0; i < n; i++)
			mi_health_print(stdout, &v[i], p->json);
		fflush(stdout);
		p->rounds++;
	}
	p->primed = true;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
}

static void usage(FILE *f, const char *prog)
{
	fprintf(f,
		"usage: %s health [--devices LIST] [--interval MS] [--count N] [--json]\n"
		"\n"
		"Per device six dimensions in [0, 1] (compute readiness, memory\n"
		"availability, bandwidth saturation, thermal headroom, power budget,\n"
		"queue stability); '-' (JSON null) where the device has no sensor.\n"
		"\n"
		"  -d, --devices LIST  device names ('npu0,npu1', 'all'; the CPU is always\n"
		"                      included; default: all)\n"
		"  -i, --interval MS   sampling period, 1..3600000 ms (default 100)\n"
		"  -n, --count N       stop after N samples (default: until Ctrl-C)\n"
		"  -j, --json          one JSON object per device and sample\n"
		"      --proc DIR      read DIR instead of /proc (tests)\n"
		"      --sys DIR       read DIR instead of /sys (tests)\n",
		prog);
}

int mi_cli_health(int argc, char **argv, const char *prog)
{
	static const struct option lopts[] = {
		{ "devices", required_argument, NULL, 'd' },
		{ "interval", required_argument, NULL, 'i' },
		{ "count", required_argument, NULL, 'n' },
		{ "json", no_argument, NULL, 'j' },
		{ "proc", required_argument, NULL, 'P' },
		{ "sys", required_argument, NULL, 'S' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct printer p = { .want = -1 };
	struct mi_health_opts o = { 0 };
	struct mi_dev *devs[HEALTH_MAX_DEVS];
	const char *list = "all";
	struct mi_health *h;
	long interval = 100;
	int c, n, ret;
	char *end;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "d:i:n:jh", lopts, NULL)) != -1) {
		switch (c) {
		case 'd':
			list = optarg;
			break;
		case 'i':
			interval = strtol(optarg, &end, 10);
			if (*end || interval < 1 || interval > 3600000) {
				fprintf(stderr, "%s health: --interval takes 1..3600000 ms, got '%s'\n",
					prog, optarg);
				return 2;
			}
			break;
		case 'n':
			p.want = strtol(optarg, &end, 10);
			if (*end || p.want < 1) {
				fprintf(stderr, "%s health: --count takes a positive count, got '%s'\n",
					prog, optarg);
				return 2;
			}
			break;
		case 'j':
			p.json = true;
			break;
		case 'P':
			o.proc_root = optarg;
			break;
		case 'S':
			o.sys_root = optarg;
			break;
		case 'h':
			usage(stdout, prog);
			return 0;
		default:
			fprintf(stderr, "%s health: unknown or incomplete option '%s' (try --help)\n",
				prog, argv[optind - 1]);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "%s health: unexpected argument '%s'\n", prog,
			argv[optind]);
		return 2;
	}
	n = mi_dev_select(list, devs, HEALTH_MAX_DEVS);
	if (n < 0) {
		fprintf(stderr, "%s health: %s\n", prog, mi_last_error());
		return 1;
	}
	o.period_ms = interval;
	o.ring = 8;
	o.cb = print_round;
	o.cb_arg = &p;
	pthread_mutex_init(&p.lock, NULL);
	pthread_cond_init(&p.cond, NULL);
	ret = mi_health_create(devs, n, &o, &h);
	if (ret) {
		fprintf(stderr, "%s health: %s\n", prog, mi_last_error());
		return 1;
	}
	signal(SIGINT, health_sigint);
	signal(SIGTERM, health_sigint);
	ret = mi_health_start(h);
	if (ret) {
		fprintf(stderr, "%s health: %s\n", prog, mi_last_error());
		mi_health_destroy(h);
		return 1;
	}
	pthread_mutex_lock(&p.lock);
	while (!health_stop && (p.want < 0 || p.rounds < p.want)) {
		struct timespec ts;

		/* wake up now and then to see a signal */
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 50000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&p.cond, &p.lock, &ts);
	}
	pthread_mutex_unlock(&p.lock);
	mi_health_destroy(h);
	pthread_cond_destroy(&p.cond);
	pthread_mutex_destroy(&p.lock);
	return 0;
}
