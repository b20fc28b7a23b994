// SPDX-License-Identifier: GPL-2.0-only
/*
 * metainfer adapt: run a placed model with the closed loop (lib/plan/
 * adapt.c, Documentation/predict.rst "Closed loop") and print what it
 * recalibrates and re-plans.  --emulate adds emulated accelerators and
 * --update changes one's hidden timing live, as a firmware update would.
 */
#include <errno.h>
#include <stdbool.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <metainfer/metainfer.h>

#include "cli.h"
#include "device/device.h"

#define ADAPT_MAX_EMU	4

struct update {
	long at;		/* before run at (1-based) */
	char dev[32];
	char param[16];		/* dma_bw, clock, macs */
	double factor;
};

static void usage(FILE *f, const char *prog)
{
	fprintf(f,
		"usage: %s adapt MODEL.onnx [options]\n"
		"  run a model on accelerators with the closed loop: device job times\n"
		"  are sampled on demand (warm-up, jitter), a device whose measured\n"
		"  time leaves its prediction by more than the tolerance is\n"
		"  recalibrated and the model re-planned\n"
		"      --devices LIST     devices (default: the emulated ones, or all)\n"
		"      --emulate N        add N emulated accelerators emu0.. (1..%d)\n"
		"      --update R:DEV:PARAM=F  before run R multiply DEV's hidden\n"
		"                         PARAM (dma_bw, clock, macs) by F (an emulated\n"
		"                         device; a metainfer_sim chip: dma_bw, clock)\n"
		"  -n, --runs N           runs (default 40)\n"
		"      --tolerance P      measured/predicted band in %% (default 20)\n"
		"      --jitter P         run-to-run change that opens a window, %% (10)\n"
		"      --predictor FILE   start from a fitted predictor\n"
		"      --save FILE        write the recalibrated predictor there\n"
		"  -t, --threads N        CPU threads\n",
		prog, ADAPT_MAX_EMU);
}

static int parse_update(const char *s, struct update *u)
{
	char *end;
	const char *c1, *c2, *eq;

	u->at = strtol(s, &end, 10);
	if (end == s || *end != ':' || u->at < 1)
		return -EINVAL;
	c1 = end + 1;
	c2 = strchr(c1, ':');
	eq = c2 ? strchr(c2, '=') : NULL;
	if (!c2 || !eq || c2 == c1 || (size_t)(c2 - c1) >= sizeof(u->dev) ||
	    (size_t)(eq - c2 - 1) >= sizeof(u->param))
		return -EINVAL;
	memcpy(u->dev, c1, c2 - c1);
	u->dev[c2 - c1] = 0;
	memcpy(u->param, c2 + 1, eq - c2 - 1);
	u->param[eq - c2 - 1] = 0;
	if (strcmp(u->param, "dma_bw") && strcmp(u->param, "clock") &&
	    strcmp(u->param, "macs"))
		return -EINVAL;
	u->factor = strtod(eq + 1, &end);
	if (end == eq + 1 || *end || !(u->factor > 0) || u->factor > 100)
		return -EINVAL;
	return 0;
}

/*
 * A metainfer_sim chip: its personality attribute (Documentation/sim.rst)
 * changes the live fields, the advertised caps stay.
 */
static int sim_update(struct mi_dev *d, const struct update *u,
		      const char *prog)
{
	const char *key = !strcmp(u->param, "dma_bw") ? "dma_bw" :
			  !strcmp(u->param, "clock") ? "clock_hz" : NULL;
	const char *node = strrchr(d->node, '/');
	char path[160], line[128];
	unsigned long long v = 0;
	bool found = false;
	FILE *f;

	if (!key || !node) {
		fprintf(stderr, "%s adapt: --update: %s of %s is not live\n",
			prog, u->param, u->dev);
		return -EINVAL;
	}
	snprintf(path, sizeof(path), "/sys/class/drm/%s/device/personality",
		 node + 1);
	f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, "%s adapt: %s: %s\n", prog, path,
			strerror(errno));
		return -errno;
	}
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, strlen(key)) &&
		    line[strlen(key)] == '=') {
			v = strtoull(line + strlen(key) + 1, NULL, 0);
			found = true;
		}
	fclose(f);
	if (!found || !v) {
		fprintf(stderr, "%s adapt: %s: no %s\n", prog, path, key);
		return -EINVAL;
	}
	v = (unsigned long long)((double)v * u->factor);
	f = fopen(path, "w");
	if (!f || fprintf(f, "%s=%llu\n", key, v ? v : 1) < 0 || fclose(f)) {
		fprintf(stderr, "%s adapt: writing %s: %s\n", prog, path,
			strerror(errno));
		return -EIO;
	}
	printf("run %ld: %s %s x%g (personality %s=%llu)\n", u->at, u->dev,
	       u->param, u->factor, key, v ? v : 1);
	return 0;
}

static int apply_update(const struct update *u, const char *prog)
{
	struct mi_dev *d = NULL;
	struct mi_dev_emu_timing t;
	uint64_t *v;

	for (int i = 0; i < mi_dev_count(); i++)
		if (mi_dev_get(i) && !strcmp(mi_dev_get(i)->name, u->dev))
			d = mi_dev_get(i);
	if (d && d->kind == MI_DEV_KERNEL)
		return sim_update(d, u, prog);
	if (!d || mi_dev_emu_get_timing(d, &t)) {
		fprintf(stderr, "%s adapt: --update: %s is not an emulated or simulated device\n",
			prog, u->dev);
		return -ENODEV;
	}
	v = !strcmp(u->param, "dma_bw") ? &t.dma_bw :
	    !strcmp(u->param, "clock") ? &t.clock_khz : &t.macs_per_cycle;
	*v = (uint64_t)((double)*v * u->factor);
	if (!*v)
		*v = 1;
	if (mi_dev_emu_update(d, &t)) {
		fprintf(stderr, "%s adapt: %s\n", prog, mi_last_error());
		return -EIO;
	}
	printf("run %ld: %s %s x%g (firmware update)\n", u->at, u->dev,
	       u->param, u->factor);
	return 0;
}

static int add_emulated(long n, const char *prog)
{
	for (long e = 0; e < n; e++) {
		struct mi_dev_caps caps = {
			.op_mask = ((1ull << DRM_METAINFER_OP_COUNT) - 1) & ~1ull,
			.dtype_mask = (1ull << DRM_METAINFER_DTYPE_INT8) |
				      (1ull << DRM_METAINFER_DTYPE_UINT8) |
				      (1ull << DRM_METAINFER_DTYPE_INT16) |
				      (1ull << DRM_METAINFER_DTYPE_INT32),
			.layout_mask = (1ull << DRM_METAINFER_LAYOUT_PLAIN) |
				       (1ull << DRM_METAINFER_LAYOUT_NCHW) |
				       (1ull << DRM_METAINFER_LAYOUT_NHWC),
			.preferred_layout = DRM_METAINFER_LAYOUT_NHWC,
			.num_queues = 2, .sram_bytes = 512 << 10,
			.clock_khz = 500000, .macs_per_cycle = 256u >> e,
			.dma_bw = 500000000, .dma_burst = 128,
		};
		struct mi_dev_emu_timing t = {
			.clock_khz = caps.clock_khz,
			.macs_per_cycle = caps.macs_per_cycle,
			.dma_bw = caps.dma_bw, .dma_burst = caps.dma_burst,
			.sram_bytes = caps.sram_bytes, .launch_ns = 5000,
			.dw_eff_pct = 100,
			.preferred_layout = caps.preferred_layout,
		};
		struct mi_dev *d;
		char name[16];

		snprintf(name, sizeof(name), "emu%ld", e);
		if (mi_dev_emu_add(name, &caps, &d) ||
		    mi_dev_emu_set_timing(d, &t)) {
			fprintf(stderr, "%s adapt: %s\n", prog, mi_last_error());
			return -1;
		}
	}
	return 0;
}

static int run_random(struct mi_model *m, struct mi_value *in, int *nin)
{
	*nin = mi_model_input_count(m);
	if (*nin > 8)
		return -E2BIG;
	for (int i = 0; i < *nin; i++) {
		struct mi_tensor_info ti;
		size_t k = 1;

		mi_model_input_info(m, i, &ti);
		in[i].name = ti.name;
		in[i].dtype = ti.dtype;
		in[i].ndim = ti.ndim;
		for (int d = 0; d < ti.ndim; d++) {
			in[i].dims[d] = ti.dims[d] > 0 ? ti.dims[d] : 1;
			k *= in[i].dims[d];
		}
		in[i].nbytes = k * mi_dtype_size(ti.dtype);
		in[i].data = calloc(1, in[i].nbytes + 1);
		if (!in[i].data)
			return -ENOMEM;
		if (ti.dtype == MI_DT_FLOAT)
			for (size_t e = 0; e < k; e++)
				((float *)in[i].data)[e] =
					(float)((e * 2654435761u) % 1000) / 500 - 1;
	}
	return 0;
}

/* Nodes the model's plan puts on accelerators. */
static uint64_t placed_nodes(struct mi_model *m)
{
	uint64_t n = 0;

	for (int d = 1; d < mi_model_device_count(m); d++) {
		struct mi_device_stats st;

		if (!mi_model_device_stats(m, d, &st))
			n += st.nodes;
	}
	return n;
}

int mi_cli_adapt(int argc, char **argv, const char *prog)
{
	static const struct option lo[] = {
		{ "devices", required_argument, NULL, 'D' },
		{ "emulate", required_argument, NULL, 'E' },
		{ "update", required_argument, NULL, 'U' },
		{ "runs", required_argument, NULL, 'n' },
		{ "tolerance", required_argument, NULL, 'T' },
		{ "jitter", required_argument, NULL, 'J' },
		{ "predictor", required_argument, NULL, 'P' },
		{ "save", required_argument, NULL, 'S' },
		{ "threads", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct mi_model_opts mo = { 0 };
	struct mi_adapt_opts ao = { .log = stdout };
	struct mi_value in[8] = { 0 }, out[8];
	struct update up[8];
	struct mi_adapt_stats st;
	struct mi_adapt *a = NULL;
	struct mi_model *m = NULL;
	const char *devices = NULL;
	long runs = 40, emulate = 0;
	int nup = 0, nin = 0, c, ret = 1;
	char *end, list[128];

	optind = 1;
	while ((c = getopt_long(argc, argv, "n:t:h", lo, NULL)) != -1) {
		switch (c) {
		case 'D':
			devices = optarg;
			break;
		case 'E':
			emulate = strtol(optarg, &end, 10);
			if (*end || emulate < 1 || emulate > ADAPT_MAX_EMU) {
				fprintf(stderr, "%s adapt: --emulate takes 1..%d, got '%s'\n",
					prog, ADAPT_MAX_EMU, optarg);
				return 2;
			}
			break;
		case 'U':
			if (nup == 8 || parse_update(optarg, &up[nup])) {
				fprintf(stderr, "%s adapt: bad --update '%s' (RUN:DEV:PARAM=FACTOR, PARAM dma_bw, clock or macs; at most 8)\n",
					prog, optarg);
				return 2;
			}
			nup++;
			break;
		case 'n':
			runs = strtol(optarg, &end, 10);
			if (*end || runs < 1 || runs > 1000000) {
				fprintf(stderr, "%s adapt: bad --runs '%s'\n",
					prog, optarg);
				return 2;
			}
			break;
		case 'T':
		case 'J': {
			double v = strtod(optarg, &end);

			if (*end || !(v > 0) || v >= 100) {
				fprintf(stderr, "%s adapt: --%s takes a percentage in (0, 100), got '%s'\n",
					prog, c == 'T' ? "tolerance" : "jitter",
					optarg);
				return 2;
			}
			*(c == 'T' ? &ao.tolerance : &ao.jitter) = v / 100;
			break;
		}
		case 'P':
			ao.predictor = optarg;
			break;
		case 'S':
			ao.save = optarg;
			break;
		case 't':
			if (mi_cli_threads_opt(prog, optarg, &mo.nthreads))
				return 2;
			break;
		case 'h':
			usage(stdout, prog);
			return 0;
		default:
			usage(stderr, prog);
			return 2;
		}
	}
	if (optind != argc - 1) {
		usage(stderr, prog);
		return 2;
	}
	if (emulate && add_emulated(emulate, prog))
		return 1;
	if (!devices) {
		size_t k = 0;

		for (long e = 0; e < emulate; e++)
			k += snprintf(list + k, sizeof(list) - k, "%semu%ld",
				      e ? "," : "", e);
		devices = emulate ? list : "all";
	}
	mo.devices = devices;
	if (mi_model_load(argv[optind], &mo, &m)) {
		fprintf(stderr, "%s adapt: %s\n", prog, mi_last_error());
		return 1;
	}
	if (!placed_nodes(m)) {
		fprintf(stderr, "%s adapt: %s: nothing placed on an accelerator\n",
			prog, argv[optind]);
		goto out;
	}
	c = run_random(m, in, &nin);
	if (!c)
		c = mi_adapt_new(m, &ao, &a);
	if (c) {
		fprintf(stderr, "%s adapt: %s\n", prog,
			c == -ENOMEM ? "out of memory" : mi_last_error());
		goto out;
	}
	for (long r = 1; r <= runs; r++) {
		for (int u = 0; u < nup; u++)
			if (up[u].at == r && apply_update(&up[u], prog))
				goto out;
		if (mi_model_run(m, in, nin, out, 0) || mi_adapt_observe(a) < 0) {
			fprintf(stderr, "%s adapt: run %ld: %s\n", prog, r,
				mi_last_error());
			goto out;
		}
	}
	mi_adapt_stats(a, &st);
	printf("%lu runs: %lu sampled in %lu windows (%lu opened by jitter), %lu recalibrations, %lu re-plans, %lu nodes moved; %s, worst measured/predicted %.2fx\n",
	       (unsigned long)st.runs, (unsigned long)st.sampled,
	       (unsigned long)st.windows, (unsigned long)st.triggers,
	       (unsigned long)st.recals, (unsigned long)st.replans,
	       (unsigned long)st.moved,
	       st.converged ? "converged" : "not converged", st.ratio);
	mi_cli_device_stats(m, stdout);
	ret = 0;
out:
	for (int i = 0; i < 8; i++)
		free(in[i].data);
	mi_adapt_free(a);
	mi_model_free(m);
	return ret;
}
