// SPDX-License-Identifier: GPL-2.0-only
/*
 * metainfer predict: a plan's predicted latency (per device and the
 * critical path) and peak memory, without running it
 * (Documentation/predict.rst).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "device/device.h"
#include "fingerprint/fingerprint.h"
#include "predict/predict.h"

#include "cli.h"

int mi_cli_predict(int argc, char **argv, const char *prog);

static void usage_predict(FILE *f, const char *prog)
{
	fprintf(f,
		"usage: %s predict MODEL.onnx [options]\n"
		"\n"
		"Predict the latency (ms, per device and the critical path over all of\n"
		"them) and the peak memory per device of MODEL's plan, without running\n"
		"it.  Without --predictor the estimate is the roofline alone.\n"
		"\n"
		"  -p, --plan FILE        predict this plan (default: the default plan)\n"
		"  -D, --devices LIST     devices the plan may use (\"npu0,npu1\", \"all\";\n"
		"                         default: the CPU only)\n"
		"  -P, --predictor FILE   fitted predictor (trees, device embeddings), as\n"
		"                         predict-eval --save writes it\n"
		"      --db FILE          calibrate each device from its fingerprint in\n"
		"                         FILE (metainfer fingerprint --db), after the\n"
		"                         staleness check\n"
		"  -t, --threads N        CPU threads (default: online cores)\n"
		"      --isa NAME         native (default), generic, avx2, avx512\n"
		"  -j, --json             one JSON object instead of the table\n"
		"  -h, --help             this text\n",
		prog);
}

static void dev_from_predictor(struct mi_predictor *p, struct mi_pred_dev *d)
{
	struct mi_pred_dev *k = p ? mi_pred_dev_find(p, d->name, false) : NULL;

	if (k)
		*d = *k;
}

static void json_str(FILE *f, const char *key, const char *s)
{
	fprintf(f, "\"%s\": \"", key);
	for (; *s; s++)
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(f, "\\u%04x", *s);
		else
			fputc(*s, f);
	fputs("\", ", f);
}

static void print_json(FILE *f, const char *model, const char *plan,
		       const char *pred, const struct mi_pred_graph *pg,
		       const struct mi_pred_result *r)
{
	fputc('{', f);
	json_str(f, "model", model);
	json_str(f, "plan", plan);
	json_str(f, "predictor", pred);
	fprintf(f, "\"nodes\": %d, \"latency_ms\": %.4f, \"devices\": [",
		pg->n, r->total_ns / 1e6);
	for (int d = 0; d < r->ndevs; d++)
		fprintf(f, "%s{\"name\": \"%s\", \"busy_ms\": %.4f, \"transfer_ms\": %.4f, \"jobs\": %d, \"peak_bytes\": %.0f, \"weight_bytes\": %.0f}",
			d ? ", " : "", r->dev_name[d], r->busy_ns[d] / 1e6,
			r->xfer_ns[d] / 1e6, r->jobs[d], r->peak_bytes[d],
			r->weight_bytes[d]);
	fprintf(f, "]}\n");
}

static void print_text(FILE *f, const char *model, const char *plan,
		       const char *pred, const struct mi_pred_graph *pg,
		       const struct mi_pred_result *r)
{
	fprintf(f, "%s: %d nodes, plan %s, %s\n", model, pg->n, plan,
		pred[0] ? pred : "roofline only (no --predictor)");
	fprintf(f, "%-8s %6s %10s %12s %14s %12s\n", "device", "jobs",
		"busy ms", "transfer ms", "peak act MiB", "weights MiB");
	for (int d = 0; d < r->ndevs; d++)
		fprintf(f, "%-8s %6d %10.3f %12.3f %14.2f %12.2f\n",
			r->dev_name[d], r->jobs[d], r->busy_ns[d] / 1e6,
			r->xfer_ns[d] / 1e6, r->peak_bytes[d] / 1048576.0,
			r->weight_bytes[d] / 1048576.0);
	fprintf(f, "latency %.3f ms (critical path over the devices)\n",
		r->total_ns / 1e6);
}

/*
 * --db: the staleness check, then d's measured rows calibrate pd.  A
 * device without a fingerprint keeps its roofline (said on stderr); an
 * unreadable DB is an error.
 */
static int calibrate(const char *prog, struct mi_predictor *p,
		     struct mi_fp_db *db, struct mi_dev *d, int threads,
		     struct mi_pred_dev *pd)
{
	struct mi_fp_opts fo = { .grid = MI_FP_GRID_QUICK };
	uint32_t mask = 0;
	int err = mi_fp_check(db, d, &fo, &mask);

	if (err == -ENOENT) {
		fprintf(stderr, "%s: %s has no fingerprint in the DB; roofline "
			"for it (metainfer fingerprint --devices %s)\n", prog,
			d->name, d->name);
		return 0;
	}
	if (err < 0) {
		fprintf(stderr, "%s: %s: %s\n", prog, d->name, mi_last_error());
		return -1;
	}
	if (err > 0)
		fprintf(stderr, "%s: %s: %d op families of its fingerprint are "
			"stale%s and not used (metainfer fingerprint refreshes "
			"them)\n", prog, d->name, err,
			mask & (1u << 31) ? " (versions changed)" : "");
	err = mi_pred_dev_from_fp(p, db, d, threads, pd);
	if (err == -ENOENT) {
		fprintf(stderr, "%s: %s; roofline for it\n", prog,
			mi_last_error());
		return 0;
	}
	if (err < 0) {
		fprintf(stderr, "%s: %s: %s\n", prog, d->name, mi_last_error());
		return -1;
	}
	fprintf(stderr, "%s: %s calibrated from %d fingerprint rows\n", prog,
		d->name, err);
	return 0;
}

int mi_cli_predict(int argc, char **argv, const char *prog)
{
	static const struct option lopts[] = {
		{ "plan", required_argument, NULL, 'p' },
		{ "devices", required_argument, NULL, 'D' },
		{ "predictor", required_argument, NULL, 'P' },
		{ "threads", required_argument, NULL, 't' },
		{ "isa", required_argument, NULL, 'I' },
		{ "db", required_argument, NULL, 'B' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct mi_model_opts mo = { 0 };
	const char *plan_path = NULL, *pred_path = NULL, *devlist = NULL;
	const char *db_path = NULL;
	struct mi_fp_db *db = NULL;
	char label[600];
	struct mi_pred_dev devs[MI_PRED_MAXDEV], *dp[MI_PRED_MAXDEV];
	const char *names[MI_PRED_MAXDEV];
	struct mi_dev *md[MI_PRED_MAXDEV];
	struct mi_predictor pred, *pp = NULL;
	struct mi_pred_graph pg = { 0 };
	struct mi_pred_result res;
	struct mi_plan *plan = NULL;
	struct mi_plan_info pi;
	struct mi_model *m = NULL;
	int c, ret = 1, json = 0, nd, isa;

	optind = 1;
	while ((c = getopt_long(argc, argv, "p:D:P:t:jh", lopts, NULL)) != -1) {
		switch (c) {
		case 'p':
			plan_path = optarg;
			break;
		case 'D':
			devlist = optarg;
			break;
		case 'P':
			pred_path = optarg;
			break;
		case 't':
			if (mi_cli_threads_opt(prog, optarg, &mo.nthreads))
				return 2;
			break;
		case 'I':
			if (mi_cli_isa_opt(prog, optarg, &mo.isa))
				return 2;
			break;
		case 'B':
			db_path = optarg;
			break;
		case 'j':
			json = 1;
			break;
		case 'h':
			usage_predict(stdout, prog);
			return 0;
		default:
			usage_predict(stderr, prog);
			return 2;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "%s predict: expected one MODEL.onnx argument\n",
			prog);
		return 2;
	}
	mi_pred_init(&pred);
	if (pred_path) {
		int err = mi_pred_load(&pred, pred_path);

		if (err) {
			fprintf(stderr, "%s: %s: %s\n", prog, pred_path,
				err == -EINVAL ? "not a predictor file" :
						 strerror(-err));
			return 1;
		}
		pp = &pred;
	}
	nd = mi_dev_select(devlist ? devlist : "cpu", md, MI_PRED_MAXDEV);
	if (nd < 0) {
		fprintf(stderr, "%s: %s\n", prog, mi_last_error());
		goto out;
	}
	if (db_path && mi_fp_db_open(db_path, &db)) {
		fprintf(stderr, "%s: %s\n", prog, mi_last_error());
		goto out;
	}
	mo.devices = devlist;
	if (mi_model_load(argv[optind], &mo, &m) ||
	    (plan_path && (mi_plan_read(plan_path, &plan) ||
			   mi_model_plan_apply(m, plan))) ||
	    mi_pred_graph_build(m, pp ? pp : &pred, false, &pg)) {
		fprintf(stderr, "%s: %s\n", prog, mi_last_error());
		goto out;
	}
	mi_plan_free(plan);
	plan = NULL;
	if (mi_model_plan_get(m, &plan)) {
		fprintf(stderr, "%s: %s\n", prog, mi_last_error());
		goto out;
	}
	mi_plan_info(plan, &pi);
	if (mi_cli_parse_isa(pi.isa, &isa))
		isa = 0;
	for (int d = 0; d < nd; d++) {
		if (d == 0) {
			mi_pred_cpu_dev(&devs[0], isa, pi.threads);
			names[0] = "cpu";
		} else {
			const struct mi_dev_caps *k = &md[d]->caps;

			memset(&devs[d], 0, sizeof(devs[d]));
			snprintf(devs[d].name, sizeof(devs[d].name), "%s",
				 md[d]->name);
			devs[d].caps.macs_per_s = (double)k->macs_per_cycle *
						  k->clock_khz * 1e3;
			devs[d].caps.bytes_per_s = (double)k->dma_bw;
			devs[d].caps.link_bytes_per_s = (double)k->dma_bw;
			devs[d].caps.launch_ns = 5000; /* until measured */
			names[d] = md[d]->name;
		}
		dev_from_predictor(pp, &devs[d]);
		if (db && calibrate(prog, pp ? pp : &pred, db, md[d], pi.threads,
				    &devs[d]))
			goto out;
		dp[d] = &devs[d];
	}
	if (mi_pred_plan(pp, &pg, dp, names, nd, &res)) {
		fprintf(stderr, "%s: %s\n", prog, mi_last_error());
		goto out;
	}
	snprintf(label, sizeof(label), "%s%s%s", pred_path ? pred_path : "",
		 pred_path && db_path ? " + " : "",
		 db_path ? "fingerprint calibration" : "");
	(json ? print_json : print_text)(stdout, argv[optind],
					 plan_path ? plan_path : "default",
					 label, &pg, &res);
	ret = 0;
out:
	mi_pred_graph_fini(&pg);
	mi_plan_free(plan);
	mi_model_free(m);
	mi_pred_fini(&pred);
	mi_fp_db_close(db);
	return ret;
}
