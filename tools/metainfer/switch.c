// SPDX-License-Identifier: GPL-2.0-only
/*
 * metainfer switch: list a switchable model's layers and configurations,
 * run one configuration, or let the meta-controller choose one for given
 * device health (Documentation/supernet.rst).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "cli.h"
#include "device/device.h"
#include "health/health.h"
#include "meta/meta-impl.h"

static void usage(FILE *f, const char *prog)
{
	fprintf(f,
		"usage: %s switch MODEL.onnx [options]\n"
		"\n"
		"  -l, --list               switchable layers and every configuration\n"
		"                           with its held-out accuracy (the default)\n"
		"  -c, --config A,B,C       activate this variant per layer and run\n"
		"      --choose             let the meta-controller pick (then run)\n"
		"      --health K=V,...     device health for --choose: compute, memory,\n"
		"                           bandwidth, thermal, power, queue in [0, 1]\n"
		"                           (default: sampled live from --device, two\n"
		"                           samples 100 ms apart; absent: healthy)\n"
		"      --device NAME        device whose health --choose samples (cpu)\n"
		"      --scale K=V,...      device cost per variant kind: std, dws, group\n"
		"      --latency FILE.json  the device's own latency table for --choose,\n"
		"                           {\"layers\": [[std, dws, group], ...]} in us\n"
		"      --min-accuracy P     accuracy floor for --choose (percent)\n"
		"      --budget-us U        latency budget for --choose\n"
		"  -i, --input FILE.npy     input (default: zeros of the declared shape,\n"
		"                           symbolic dims = 1)\n"
		"      --output FILE.npy    write the first output\n"
		"  -b, --bench N            time N runs, print latency_ms median=.. min=..\n"
		"  -t, --threads N          CPU threads\n",
		prog);
}

static const char *const dims_names[] = { "compute", "memory", "bandwidth",
					  "thermal", "power", "queue" };
static const char *const kind_names[] = { "std", "dws", "group" };

/* "k=v,k=v" against names[n] into vals[], bits into *mask */
static int parse_kv(const char *s, const char *const *names, int n,
		    double *vals, uint32_t *mask)
{
	char *dup = strdup(s), *save = NULL, *tok;
	int err = 0;

	for (tok = strtok_r(dup, ",", &save); tok && !err;
	     tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '='), *end;
		int i;

		if (!eq) {
			err = -EINVAL;
			break;
		}
		*eq = 0;
		for (i = 0; i < n && strcmp(names[i], tok); i++)
			;
		if (i == n) {
			err = -EINVAL;
			break;
		}
		vals[i] = strtod(eq + 1, &end);
		if (*end || end == eq + 1)
			err = -EINVAL;
		if (mask)
			*mask |= 1u << i;
	}
	free(dup);
	return err;
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

_Static_assert(MI_HEALTH_NDIM == 6, "mi_meta_device.health has 6 dims");

/* The device's live health vector (lib/health): two rounds 100 ms
 * apart, since rates need two samples. */
static int sample_health(const char *name, struct mi_meta_device *dev)
{
	struct mi_dev *d = mi_dev_find(name);
	struct mi_health_opts o = { .period_ms = 100, .no_fdinfo = true };
	struct mi_health_vec v;
	struct mi_health *h;
	struct timespec ts = { 0, 100 * 1000 * 1000 };

	if (!d) {
		fprintf(stderr, "switch: no device '%s'\n", name);
		return -ENOENT;
	}
	if (mi_health_create(&d, 1, &o, &h)) {
		fprintf(stderr, "switch: %s\n", mi_last_error());
		return -EIO;
	}
	mi_health_sample(h, NULL);
	nanosleep(&ts, NULL);
	mi_health_sample(h, &v);
	mi_health_destroy(h);
	for (int i = 0; i < MI_HEALTH_NDIM; i++)
		dev->health[i] = v.v[i];
	dev->health_present = v.present;
	printf("health ");
	mi_health_print(stdout, &v, false);
	return 0;
}

/* {"layers": [[us per variant], ...]}, one row per switchable layer */
static int read_latency(const char *path, const struct mi_model *m,
			double *lat)
{
	const struct mi_mj *rows;
	struct mi_mj root;
	size_t len;
	void *buf;
	int pos, err = -EINVAL;

	if (mi_read_file(path, 1 << 20, &buf, &len)) {
		fprintf(stderr, "switch: cannot read %s\n", path);
		return -EIO;
	}
	buf = realloc(buf, len + 1);
	((char *)buf)[len] = 0;
	if (mi_mj_parse(buf, &root, &pos)) {
		fprintf(stderr, "switch: %s: malformed JSON at byte %d\n", path,
			pos);
		free(buf);
		return -EINVAL;
	}
	rows = mi_mj_get(&root, "layers");
	if (!rows || rows->type != MJ_ARR ||
	    rows->n != mi_model_switch_count(m))
		goto bad;
	for (int l = 0; l < rows->n; l++) {
		struct mi_switch_info in;

		mi_model_switch_info(m, l, &in);
		if (rows->v[l].type != MJ_ARR || rows->v[l].n != in.nvariants)
			goto bad;
		for (int k = 0; k < in.nvariants; k++)
			lat[l * MI_SWITCH_MAX_VARIANTS + k] =
				rows->v[l].v[k].num;
	}
	err = 0;
bad:
	if (err)
		fprintf(stderr,
			"switch: %s: \"layers\" needs one row of variant latencies per switchable layer\n",
			path);
	mi_mj_free(&root);
	free(buf);
	return err;
}

static void list(struct mi_model *m)
{
	int nl = mi_model_switch_count(m), nc = mi_model_config_count(m);

	for (int l = 0; l < nl; l++) {
		struct mi_switch_info in;

		mi_model_switch_info(m, l, &in);
		printf("layer %s: %d -> %d channels, variants", in.name,
		       in.in_channels, in.out_channels);
		for (int k = 0; k < in.nvariants; k++)
			printf(" %d=%s (%llu MAC, %.1f us)", k, in.variants[k],
			       (unsigned long long)in.macs[k],
			       in.latency_us[k]);
		printf("\n");
	}
	printf("%d configurations:\n", nc);
	for (int i = 0; i < nc; i++) {
		struct mi_switch_config c;

		mi_model_config(m, i, &c);
		printf("  ");
		for (int l = 0; l < nl; l++)
			printf("%s%d", l ? "," : "", c.choice[l]);
		printf("  accuracy %6.2f%%  latency %7.1f us\n", c.accuracy,
		       c.latency_us);
	}
}

int mi_cli_switch(int argc, char **argv, const char *prog)
{
	static const struct option lo[] = {
		{ "list", no_argument, NULL, 'l' },
		{ "config", required_argument, NULL, 'c' },
		{ "choose", no_argument, NULL, 'C' },
		{ "health", required_argument, NULL, 'H' },
		{ "device", required_argument, NULL, 'D' },
		{ "scale", required_argument, NULL, 'S' },
		{ "latency", required_argument, NULL, 'L' },
		{ "min-accuracy", required_argument, NULL, 'A' },
		{ "budget-us", required_argument, NULL, 'B' },
		{ "input", required_argument, NULL, 'i' },
		{ "output", required_argument, NULL, 'o' },
		{ "bench", required_argument, NULL, 'b' },
		{ "threads", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct mi_model_opts opts = { 0 };
	struct mi_meta_device dev = { 0 };
	struct mi_meta_goal goal = { 0 };
	const char *cfg = NULL, *inpath = NULL, *outpath = NULL;
	const char *devname = "cpu", *latpath = NULL;
	double lat[MI_SWITCH_MAX_LAYERS * MI_SWITCH_MAX_VARIANTS];
	bool given_health = false;
	int choice[MI_SWITCH_MAX_LAYERS], nl, bench = 0, opt, rc = 1;
	bool choose = false, run = false;
	struct mi_tensor x = { 0 };
	struct mi_model *m = NULL;
	struct mi_value in = { .dtype = MI_DT_FLOAT }, out;
	char err[256];
	double t0;

	while ((opt = getopt_long(argc, argv, "lc:i:b:t:h", lo, NULL)) != -1) {
		switch (opt) {
		case 'l': break;
		case 'c': cfg = optarg; run = true; break;
		case 'C': choose = run = true; break;
		case 'H':
			if (parse_kv(optarg, dims_names, 6, dev.health,
				     &dev.health_present)) {
				fprintf(stderr, "%s switch: bad --health '%s'\n",
					prog, optarg);
				return 2;
			}
			given_health = true;
			break;
		case 'D': devname = optarg; break;
		case 'L': latpath = optarg; break;
		case 'S':
			if (parse_kv(optarg, kind_names, 3, dev.scale, NULL)) {
				fprintf(stderr, "%s switch: bad --scale '%s'\n",
					prog, optarg);
				return 2;
			}
			break;
		case 'A': goal.min_accuracy = atof(optarg); break;
		case 'B': goal.latency_budget_us = atof(optarg); break;
		case 'i': inpath = optarg; break;
		case 'o': outpath = optarg; break;
		case 'b': bench = atoi(optarg); break;
		case 't': opts.nthreads = atoi(optarg); break;
		case 'h': usage(stdout, prog); return 0;
		default: usage(stderr, prog); return 2;
		}
	}
	if (optind + 1 != argc) {
		usage(stderr, prog);
		return 2;
	}
	if (mi_model_load(argv[optind], &opts, &m)) {
		fprintf(stderr, "%s\n", mi_last_error());
		return 1;
	}
	nl = mi_model_switch_count(m);
	if (nl <= 0) {
		fprintf(stderr, "%s: no switchable layers\n", argv[optind]);
		goto out;
	}
	if (!run) {
		list(m);
		rc = 0;
		goto out;
	}
	if (choose) {
		struct mi_meta_result r;

		if (!given_health && sample_health(devname, &dev))
			goto out;
		if (latpath) {
			if (read_latency(latpath, m, lat))
				goto out;
			dev.latency_us = lat;
		}
		if (mi_meta_choose(m, &dev, &goal, choice, &r)) {
			fprintf(stderr, "%s\n", mi_last_error());
			goto out;
		}
		printf("chose");
		for (int l = 0; l < nl; l++)
			printf("%s%d", l ? "," : " ", choice[l]);
		printf(": accuracy %.2f%%, predicted %.1f us%s\n", r.accuracy,
		       r.predicted_us,
		       r.fits ? "" : " (does not meet the goal: closest)");
	} else {
		const char *s = cfg;

		for (int l = 0; l < nl; l++) {
			char *end;

			choice[l] = (int)strtol(s, &end, 10);
			if (end == s || (l < nl - 1 && *end != ',') ||
			    (l == nl - 1 && *end)) {
				fprintf(stderr,
					"%s switch: --config needs %d comma-separated variants\n",
					prog, nl);
				rc = 2;
				goto out;
			}
			s = end + 1;
		}
	}
	t0 = now_ms();
	if (mi_model_set_config(m, choice)) {
		fprintf(stderr, "%s\n", mi_last_error());
		goto out;
	}
	printf("config");
	for (int l = 0; l < nl; l++)
		printf("%s%d", l ? "," : " ", choice[l]);
	printf(": activated in %.3f ms\n", now_ms() - t0);
	if (inpath) {
		if (mi_npy_read(inpath, &x, err, sizeof(err))) {
			fprintf(stderr, "%s: %s\n", inpath, err);
			goto out;
		}
	} else {
		struct mi_tensor_info ti;

		mi_model_input_info(m, 0, &ti);
		x.dtype = MI_DT_FLOAT;
		x.ndim = ti.ndim;
		for (int d = 0; d < ti.ndim; d++)
			x.dims[d] = ti.dims[d] < 0 ? 1 : ti.dims[d];
		x.nbytes = (size_t)mi_tensor_numel(&x) * sizeof(float);
		x.data = calloc(1, x.nbytes + 1);
		x.flags = MI_TF_OWNS_DATA;
	}
	in.ndim = x.ndim;
	memcpy(in.dims, x.dims, sizeof(in.dims));
	in.data = x.data;
	in.nbytes = x.nbytes;
	if (mi_model_run(m, &in, 1, &out, 1)) {
		fprintf(stderr, "%s\n", mi_last_error());
		goto out;
	}
	if (outpath && mi_npy_write(outpath, out.dtype, out.ndim, out.dims,
				    out.data, err, sizeof(err))) {
		fprintf(stderr, "%s: %s\n", outpath, err);
		goto out;
	}
	if (bench > 0) {
		double *t = calloc(bench, sizeof(double));

		for (int i = 0; i < bench; i++) {
			t0 = now_ms();
			mi_model_run(m, &in, 1, &out, 1);
			t[i] = now_ms() - t0;
		}
		qsort(t, bench, sizeof(double), cmp_d);
		printf("latency_ms median=%.4f min=%.4f\n", t[bench / 2], t[0]);
		free(t);
	}
	rc = 0;
out:
	mi_tensor_fini(&x);
	mi_model_free(m);
	return rc;
}
