// SPDX-License-Identifier: GPL-2.0-only
/*
 * metainfer tune: search the model's plans (lib/plan/search.c) and write
 * the fastest measured one within the limits (Documentation/search.rst).
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "device/device.h"
#include "plan/search-impl.h"
#include "predict/predict.h"

#include "cli.h"

int mi_cli_tune(int argc, char **argv, const char *prog);

static void usage_tune(FILE *f, const char *prog)
{
	fprintf(f,
		"usage: %s tune MODEL.onnx [options] -o PLAN.json\n"
		"\n"
		"Search MODEL's plans (kernel variant, layout and precision per node,\n"
		"device of each quantized unit), score them by\n"
		"w1 * latency + w2 * peak memory + w3 * accuracy loss (each against the\n"
		"default plan), measure the best few and the default plan, and write the\n"
		"fastest measured one that meets the limits.  `metainfer run --plan\n"
		"PLAN.json` runs it.  Hardware intents in the model's metadata\n"
		"(metainfer.intent.NAME) add per-region weights and limits.\n"
		"\n"
		"  -o, --output FILE      the tuned plan (JSON)\n"
		"  -D, --devices LIST     devices the plan may use (\"npu0,npu1\", \"all\";\n"
		"                         default: the CPU only)\n"
		"  -w, --weights W1,W2,W3 latency, memory, accuracy weights (default 1,0,1)\n"
		"      --max-mem SIZE     peak memory per device (bytes, or k/M/G suffix)\n"
		"      --min-cosine C     outputs' cosine against the fp32 reference\n"
		"      --budget S         seconds for the whole search (default: none)\n"
		"  -i, --intent N=SPEC    a hardware intent besides the model's own\n"
		"                         metainfer.intent.N metadata (SPEC: KIND:NODES\n"
		"                         [:opt=val,...], Documentation/search.rst)\n"
		"  -k, --top K            plans measured besides the default (default 5)\n"
		"  -r, --runs N           timed runs per measured plan (default 5)\n"
		"  -P, --predictor FILE   fitted predictor (predict-eval --save)\n"
		"      --seed N           inputs of the verification runs (default 1)\n"
		"  -t, --threads N        CPU threads (default: online cores)\n"
		"      --isa NAME         native (default), generic, avx2, avx512\n"
		"  -q, --quiet            no progress line\n"
		"  -h, --help             this text\n",
		prog);
}

static bool plan_has_int8(const struct mi_plan *p)
{
	struct mi_plan_info pi;
	struct mi_plan_node nd;

	mi_plan_info(p, &pi);
	for (int i = 0; i < pi.nodes; i++)
		if (!mi_plan_node(p, i, &nd) &&
		    (!strcmp(nd.precision, "int8") || strcmp(nd.device, "cpu")))
			return true;
	return false;
}

/* Per intent the region's figure: ms, MiB or uJ. */
static double ival_unit(const struct mi_intent *it, double v)
{
	return it->kind == MI_INTENT_MEMORY_CONSTRAINED ? v / 1048576.0 :
							  v / 1e6;
}

static void line(const char *what, const struct mi_search_cand *c,
		 const struct mi_intents *iv)
{
	printf("%-8s %10.3f %10.3f %10.2f %10.5f", what,
	       c->pred_ns / 1e6, c->measured ? c->meas_ns / 1e6 : NAN,
	       c->pred_mem / 1048576.0, c->measured ? c->cosine : NAN);
	for (int i = 0; i < iv->n; i++)
		printf(" %10.3f", ival_unit(&iv->v[i], c->ival[i]));
	printf("  %s\n", c->why);
}

int mi_cli_tune(int argc, char **argv, const char *prog)
{
	static const struct option lopts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "devices", required_argument, NULL, 'D' },
		{ "weights", required_argument, NULL, 'w' },
		{ "max-mem", required_argument, NULL, 'M' },
		{ "min-cosine", required_argument, NULL, 'C' },
		{ "budget", required_argument, NULL, 'B' },
		{ "intent", required_argument, NULL, 'i' },
		{ "top", required_argument, NULL, 'k' },
		{ "runs", required_argument, NULL, 'r' },
		{ "predictor", required_argument, NULL, 'P' },
		{ "seed", required_argument, NULL, 'S' },
		{ "threads", required_argument, NULL, 't' },
		{ "isa", required_argument, NULL, 'I' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct mi_search_opts so = { .w = { 1, 0, 1 }, .progress = stderr };
	struct mi_model_opts mo = { .flags = MI_MODEL_PROFILE };
	struct mi_model_opts ro = { .flags = MI_MODEL_NO_INT8 };
	struct mi_search_result res = { 0 };
	const char *out = NULL, *pred_path = NULL;
	struct mi_predictor pred;
	struct mi_model *m = NULL, *ref = NULL;
	struct mi_plan *def = NULL;
	struct mi_dev *md[MI_PRED_MAXDEV];
	const char *intents[MI_SEARCH_MAXINTENT + 1];
	int c, ret = 1, err;
	char *end;
	FILE *f;

	optind = 1;
	opterr = 0;	/* one line of our own instead */
	while ((c = getopt_long(argc, argv, "o:D:w:k:r:P:t:i:qh", lopts,
				NULL)) != -1) {
		switch (c) {
		case 'o':
			out = optarg;
			break;
		case 'D':
			mo.devices = optarg;
			break;
		case 'w':
			if (mi_search_parse_weights(optarg, so.w)) {
				fprintf(stderr, "%s tune: bad --weights '%s' (three numbers >= 0, not all 0: w1,w2,w3)\n",
					prog, optarg);
				return 2;
			}
			break;
		case 'M':
			if (mi_parse_size(optarg, strlen(optarg), &so.max_mem)) {
				fprintf(stderr, "%s tune: bad --max-mem '%s' (bytes > 0, k/M/G suffix)\n",
					prog, optarg);
				return 2;
			}
			break;
		case 'C':
			so.min_cosine = strtod(optarg, &end);
			if (end == optarg || *end || !(so.min_cosine >= 0) ||
			    so.min_cosine > 1) {
				fprintf(stderr, "%s tune: bad --min-cosine '%s' (0 to 1)\n",
					prog, optarg);
				return 2;
			}
			break;
		case 'B':
			so.budget_s = strtod(optarg, &end);
			if (end == optarg || *end || !(so.budget_s > 0)) {
				fprintf(stderr, "%s tune: bad --budget '%s' (seconds > 0)\n",
					prog, optarg);
				return 2;
			}
			break;
		case 'i':
			if (so.nintents == MI_SEARCH_MAXINTENT) {
				fprintf(stderr, "%s tune: more than %d --intent options\n",
					prog, MI_SEARCH_MAXINTENT);
				return 2;
			}
			intents[so.nintents++] = optarg;
			so.intents = intents;
			break;
		case 'k':
		case 'r':
			{
				long v = strtol(optarg, &end, 10);

				if (end == optarg || *end || v < 1 || v > 1000) {
					fprintf(stderr, "%s tune: bad --%s '%s' (1 to 1000)\n",
						prog, c == 'k' ? "top" : "runs",
						optarg);
					return 2;
				}
				*(c == 'k' ? &so.top : &so.runs) = (int)v;
			}
			break;
		case 'P':
			pred_path = optarg;
			break;
		case 'S':
			so.seed = strtoull(optarg, &end, 0);
			if (end == optarg || *end) {
				fprintf(stderr, "%s tune: bad --seed '%s'\n",
					prog, optarg);
				return 2;
			}
			break;
		case 't':
			if (mi_cli_threads_opt(prog, optarg, &mo.nthreads))
				return 2;
			break;
		case 'I':
			if (mi_cli_isa_opt(prog, optarg, &mo.isa))
				return 2;
			break;
		case 'q':
			so.progress = NULL;
			break;
		case 'h':
			usage_tune(stdout, prog);
			return 0;
		default:
			fprintf(stderr, "%s tune: bad option '%s' (see %s tune --help)\n",
				prog, argv[optind - 1], prog);
			return 2;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "%s tune: expected one MODEL.onnx argument\n",
			prog);
		return 2;
	}
	if (!out) {
		fprintf(stderr, "%s tune: -o PLAN.json is required\n", prog);
		return 2;
	}
	mi_pred_init(&pred);
	if (pred_path) {
		err = mi_pred_load(&pred, pred_path);
		if (err) {
			fprintf(stderr, "%s: %s: %s\n", prog, pred_path,
				err == -EINVAL ? "not a predictor file" :
						 strerror(-err));
			goto out;
		}
		so.pred = &pred;
	}
	if (mi_dev_select(mo.devices ? mo.devices : "cpu", md,
			  MI_PRED_MAXDEV) < 0 ||
	    mi_model_load(argv[optind], &mo, &m) ||
	    mi_model_plan_get(m, &def)) {
		fprintf(stderr, "%s: %s\n", prog, mi_last_error());
		goto out;
	}
	/* quantized or placed: accuracy against an fp32 run of the file */
	ro.nthreads = mo.nthreads;
	ro.isa = mo.isa;
	if (plan_has_int8(def) && mi_model_load(argv[optind], &ro, &ref)) {
		fprintf(stderr, "%s: %s\n", prog, mi_last_error());
		goto out;
	}
	so.ref = ref;
	err = mi_search_run(m, &so, &res);
	if (err) {
		if (so.progress && err != -EDOM)
			fputc('\n', stderr);
		fprintf(stderr, "%s: %s\n", prog, mi_last_error());
		goto out;
	}
	f = fopen(out, "w");
	if (!f || mi_plan_write(res.plan, f) || fclose(f)) {
		fprintf(stderr, "%s: cannot write %s: %s\n", prog, out,
			strerror(errno));
		goto out;
	}
	printf("%s: %d decision groups (%d variant, %d device), %ld plans scored, %ld pruned by limits, %d rejected by apply\n",
	       argv[optind], res.ngroups, res.nvar, res.ndev, res.evaluated,
	       res.pruned, res.rejected);
	for (int i = 0; i < res.intents.n; i++) {
		char d[320];

		mi_intent_describe(&res.intents.v[i], d, sizeof(d));
		printf("intent %s\n", d);
	}
	printf("%-8s %10s %10s %10s %10s", "plan", "pred ms", "meas ms",
	       "mem MiB", "cosine");
	for (int i = 0; i < res.intents.n; i++) {
		const struct mi_intent *it = &res.intents.v[i];
		char h[80];

		snprintf(h, sizeof(h), "%.6s %s", it->name,
			 it->kind == MI_INTENT_LATENCY_CRITICAL ? "ms" :
			 it->kind == MI_INTENT_MEMORY_CONSTRAINED ? "MiB" : "uJ");
		printf(" %10s", h);
	}
	putchar('\n');
	line("default", &res.cand[0], &res.intents);
	for (int i = 1; i < res.ncand; i++) {
		char name[16];

		snprintf(name, sizeof(name), "cand%d", i);
		line(name, &res.cand[i], &res.intents);
	}
	line("tuned", &res.cand[res.best], &res.intents);
	if (res.cand[0].measured && res.cand[res.best].meas_ns > 0)
		printf("speedup %.3fx (measured, default / tuned)%s\n",
		       res.cand[0].meas_ns / res.cand[res.best].meas_ns,
		       res.best ? "" : ": the default plan is the fastest");
	printf("time: search %.3f s (calibration %.3f s), compile %.3f s, run %.3f s\n",
	       res.search_s, res.calib_s, res.compile_s, res.run_s);
	if (res.note[0])
		printf("%s\n", res.note);
	printf("wrote %s\n", out);
	ret = 0;
out:
	mi_search_result_fini(&res);
	mi_plan_free(def);
	mi_model_free(ref);
	mi_model_free(m);
	mi_pred_fini(&pred);
	return ret;
}
