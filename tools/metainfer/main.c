// SPDX-License-Identifier: GPL-2.0-only
/*
 * metainfer: command-line front end of libmetainfer.
 *
 *   metainfer run MODEL.onnx [options]    run a model on the CPU
 *   metainfer info MODEL.onnx [options]   graph summary and feature map
 *   metainfer quantize ...                int8 post-training quantization
 *   metainfer top [options]               accelerator utilization (top.c)
 *   metainfer trace [-- COMMAND]          job and sensor timeline (trace.c)
 *   metainfer plan MODEL.onnx [options]   write / explain the model's plan
 *   metainfer health [options]            live health vectors (health.c)
 *   metainfer switch MODEL.onnx [options] switchable models (switch.c)
 *   metainfer serve MODEL.onnx... [options] live streams (serve.c)
 *
 * Exit status: 0 success, 1 runtime failure (bad model, bad input), 2 usage.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "internal.h"
#include "cli.h"

#ifdef MI_HAVE_QUANT_MAIN
int mi_quant_main(int argc, char **argv);
#endif
int mi_top_main(int argc, char **argv);
int mi_trace_main(int argc, char **argv);
int mi_cli_predict(int argc, char **argv, const char *prog);
int mi_cli_tune(int argc, char **argv, const char *prog);

#define EXIT_USAGE 2

static const char *prog = "metainfer";

static void usage_main(FILE *f)
{
	fprintf(f,
		"usage: %s <command> [options]\n"
		"\n"
		"commands:\n"
		"  run MODEL.onnx       run a model on the CPU (random or .npy inputs)\n"
		"  info MODEL.onnx      op histogram, parameters, MACs, shapes and the\n"
		"                       model feature map, before and after normalization\n"
		"  quantize MODEL.onnx  int8 post-training quantization\n"
		"  top                  accelerator and per-process utilization\n"
		"  trace [-- COMMAND]   record jobs and sensors of the accelerators into a\n"
		"                       Chrome trace-event JSON timeline (Perfetto)\n"
		"  plan MODEL.onnx      write the model's plan (kernel per node) as JSON,\n"
		"                       or --explain it\n"
		"  health               live health vectors of the devices (six dimensions)\n"
		"  fingerprint          measure the devices into the fingerprint DB\n"
		"  predict MODEL.onnx   predicted latency and peak memory of a plan\n"
		"  tune MODEL.onnx      search the plans, write the fastest measured one\n"
		"  switch MODEL.onnx    switchable layers: list, run or choose a configuration\n"
		"  serve MODEL.onnx...  continuous streams with live re-placement and switching\n"
		"  devices              the CPU and the accelerators, with their capabilities\n"
		"  adapt MODEL.onnx     run with the closed loop: recalibrate, re-plan\n"
		"  version              print the library version\n"
		"\n"
		"'%s <command> --help' describes a command's options.\n",
		prog, prog);
}

static void usage_run(FILE *f)
{
	fprintf(f,
		"usage: %s run MODEL.onnx [options]\n"
		"\n"
		"  -i, --input [NAME=]FILE.npy  input data (repeatable; without NAME the\n"
		"                               inputs are taken in declaration order);\n"
		"                               inputs not given get seeded random data of\n"
		"                               their declared shape (symbolic dims = 1)\n"
		"      --output FILE.npy        write the first output to FILE.npy\n"
		"  -o, --output-dir DIR         write DIR/<output name>.npy for every output\n"
		"  -t, --threads N              CPU threads (default: online cores)\n"
		"  -b, --bench N                run N timed iterations after warm-up and\n"
		"                               print 'latency_ms median=.. p90=.. min=..'\n"
		"      --warmup N               warm-up iterations for --bench (default 3)\n"
		"  -d, --dim SYMBOL=VALUE       bind a symbolic dimension for random inputs\n"
		"  -s, --seed N                 seed of the random inputs (default 1)\n"
		"      --reference              reference kernels only (no fast variants)\n"
		"      --no-normalize           skip the normalization passes\n"
		"      --plan FILE.json         run the plan in FILE (metainfer plan);\n"
		"                               its thread count unless --threads\n"
		"      --devices LIST           run on these devices too (names as\n"
		"                               metainfer devices prints them, or all)\n"
		"                               and print per device busy time, jobs and\n"
		"                               bytes moved\n"
		"      --no-uring               accelerator jobs through ioctls\n"
		"  -p, --profile[=N]            time every node over the timed runs and\n"
		"                               print time per op type and the N slowest\n"
		"                               nodes (default 15)\n"
		"  -q, --quiet                  do not print output summaries\n"
		"      --isa generic|avx2|avx512  widest instruction set the CPU kernels\n"
		"                               may use (default: the CPU's own; one it\n"
		"                               lacks is an error)\n"
		"      --no-int8                run QDQ models in fp32 (no int8 kernels)\n"
		"      --no-spin                sleep, not spin, while waiting for the\n"
		"                               worker threads\n"
		"      --profile-cpu            --profile on the process CPU clock\n"
		"  -h, --help                   this text\n",
		prog);
}

static void usage_info(FILE *f)
{
	fprintf(f,
		"usage: %s info MODEL.onnx [options]\n"
		"\n"
		"  -j, --json        one JSON object {\"before\":..,\"after\":..,\"passes\":..}\n"
		"  -n, --nodes       list every node (shapes, MACs, fan-in/out, depth,\n"
		"                    arithmetic intensity)\n"
		"  -d, --dim S=V     bind a symbolic dimension (default 1)\n"
		"  -h, --help        this text\n",
		prog);
}

static int parse_int(const char *s, const char *what, long long min,
		     long long max, long long *out)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max) {
		fprintf(stderr, "%s: bad %s '%s' (expected %lld..%lld)\n", prog,
			what, s, min, max);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

/* ---- symbolic dimension bindings ---------------------------------- */

struct dim_bind {
	char *sym;
	int64_t val;
};

static int add_dim(struct dim_bind *b, int *nb, int max, const char *arg)
{
	const char *eq = strchr(arg, '=');
	long long v;

	if (!eq || eq == arg || *nb >= max) {
		fprintf(stderr, "%s: --dim expects SYMBOL=VALUE\n", prog);
		return -EINVAL;
	}
	if (parse_int(eq + 1, "dimension", 0, 1ll << 32, &v))
		return -EINVAL;
	b[*nb].sym = strndup(arg, eq - arg);
	b[*nb].val = v;
	(*nb)++;
	return 0;
}

static int64_t bound_dim(const struct dim_bind *b, int nb, const char *sym)
{
	for (int i = 0; sym && i < nb; i++)
		if (!strcmp(b[i].sym, sym))
			return b[i].val;
	return 1;
}

/* ---- random inputs ------------------------------------------------ */

static uint64_t rng_next(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*s = x;
	return x;
}

static void fill_random(struct mi_tensor *t, uint64_t *seed)
{
	int64_t n = mi_tensor_numel(t);

	for (int64_t i = 0; i < n; i++) {
		uint64_t r = rng_next(seed);
		double u = (double)(r >> 11) / 9007199254740992.0; /* [0,1) */

		switch (t->dtype) {
		case MI_DT_FLOAT:
			((float *)t->data)[i] = (float)(2 * u - 1);
			break;
		case MI_DT_DOUBLE:
			((double *)t->data)[i] = 2 * u - 1;
			break;
		case MI_DT_INT64:
			((int64_t *)t->data)[i] = r % 2;
			break;
		case MI_DT_INT32:
			((int32_t *)t->data)[i] = r % 2;
			break;
		case MI_DT_BOOL:
			((uint8_t *)t->data)[i] = r & 1;
			break;
		case MI_DT_UINT8:
			((uint8_t *)t->data)[i] = r & 0xff;
			break;
		case MI_DT_INT8:
			((int8_t *)t->data)[i] = (int8_t)(r & 0xff);
			break;
		default:
			break; /* zeros */
		}
	}
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

struct prof_row {
	const char *label, *op;
	int fast, nodes;
	uint64_t ns, min;	/* summed over the runs; fastest run */
};

static int cmp_prof(const void *a, const void *b)
{
	const struct prof_row *x = a, *y = b;

	return x->ns < y->ns ? 1 : x->ns > y->ns ? -1 : 0;
}

/*
 * --profile: time per op type, then the slowest nodes, per run (the
 * timed runs when --bench is given, else the single run), each with the
 * sum of its nodes' fastest runs ("min").  "fast" counts nodes run by a
 * fast kernel variant; "[reference]" marks the others.
 */
static int print_profile(struct mi_model *m, int top)
{
	int n = mi_model_profile_count(m), nt = 0;
	struct prof_row *ops = calloc(n + 1, sizeof(*ops));
	struct prof_row *nodes = calloc(n + 1, sizeof(*nodes));
	uint64_t total = 0, tmin = 0, runs = 0;

	if (!ops || !nodes) {
		free(ops);
		free(nodes);
		fprintf(stderr, "%s: out of memory\n", prog);
		return -1;
	}
	for (int i = 0; i < n; i++) {
		struct mi_node_profile p;
		uint64_t pmin;
		int k;

		if (mi_model_profile(m, i, &p) || mi_model_profile_min(m, i, &pmin))
			continue;
		nodes[i] = (struct prof_row){ .label = p.name, .op = p.op_type,
					      .fast = p.fast, .ns = p.ns,
					      .min = pmin };
		total += p.ns;
		tmin += pmin;
		runs = p.calls > runs ? p.calls : runs;
		for (k = 0; k < nt && strcmp(ops[k].label, p.op_type); k++)
			;
		if (k == nt)
			ops[nt++].label = p.op_type;
		ops[k].nodes++;
		ops[k].fast += p.fast;
		ops[k].ns += p.ns;
		ops[k].min += pmin;
	}
	if (!runs)
		runs = 1;
	qsort(ops, nt, sizeof(*ops), cmp_prof);
	qsort(nodes, n, sizeof(*nodes), cmp_prof);
	printf("profile: %d nodes, %.3f ms per run in nodes, %.3f ms sum of node minima "
	       "(%llu runs)\n", n, total / 1e6 / runs, tmin / 1e6, (unsigned long long)runs);
	printf("  %-24s %6s %6s %10s %7s %10s\n", "op type", "nodes", "fast",
	       "ms/run", "share", "min ms");
	for (int k = 0; k < nt; k++)
		printf("  %-24s %6d %6d %10.3f %6.1f%% %10.3f\n", ops[k].label,
		       ops[k].nodes, ops[k].fast, ops[k].ns / 1e6 / runs,
		       total ? 100.0 * ops[k].ns / total : 0.0, ops[k].min / 1e6);
	if (top > 0 && n > 0)
		printf("  slowest nodes:\n");
	for (int i = 0; i < n && i < top; i++)
		printf("  %10.3f ms %6.1f%%  %-18s %s%s  (min %.3f)\n",
		       nodes[i].ns / 1e6 / runs,
		       total ? 100.0 * nodes[i].ns / total : 0.0, nodes[i].op,
		       nodes[i].label[0] ? nodes[i].label : "(unnamed)",
		       nodes[i].fast ? "" : " [reference]", nodes[i].min / 1e6);
	free(ops);
	free(nodes);
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void print_value(const struct mi_value *v)
{
	struct mi_tensor t = { .dtype = v->dtype, .ndim = v->ndim,
			       .data = v->data };
	double mn = INFINITY, mx = -INFINITY, sum = 0;
	int64_t n;
	char sh[128];
	int o;

	memcpy(t.dims, v->dims, sizeof(t.dims));
	n = mi_tensor_numel(&t);
	o = snprintf(sh, sizeof(sh), "%s[", mi_dtype_name(v->dtype));
	for (int i = 0; i < v->ndim && o < (int)sizeof(sh); i++)
		o += snprintf(sh + o, sizeof(sh) - o, "%s%" PRId64,
			      i ? "," : "", v->dims[i]);
	if (o < (int)sizeof(sh))
		snprintf(sh + o, sizeof(sh) - o, "]");
	if (mi_dtype_size(v->dtype) == 0 || v->dtype == MI_DT_FLOAT16 ||
	    v->dtype == MI_DT_BFLOAT16 || n <= 0) {
		printf("output '%s': %s\n", v->name, sh);
		return;
	}
	for (int64_t i = 0; i < n; i++) {
		double x = mi_tensor_get_f64(&t, i);

		mn = x < mn ? x : mn;
		mx = x > mx ? x : mx;
		sum += x;
	}
	printf("output '%s': %s min=%.6g max=%.6g mean=%.6g\n", v->name, sh, mn,
	       mx, sum / n);
}

struct input_arg {
	char *name; /* NULL: positional */
	char *file;
};

static int cmd_run(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "input", required_argument, NULL, 'i' },
		{ "output", required_argument, NULL, 'O' },
		{ "output-dir", required_argument, NULL, 'o' },
		{ "threads", required_argument, NULL, 't' },
		{ "bench", required_argument, NULL, 'b' },
		{ "warmup", required_argument, NULL, 'w' },
		{ "dim", required_argument, NULL, 'd' },
		{ "seed", required_argument, NULL, 's' },
		{ "reference", no_argument, NULL, 'R' },
		{ "no-normalize", no_argument, NULL, 'N' },
		{ "profile", optional_argument, NULL, 'p' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ "plan", required_argument, NULL, 'P' },
		{ "isa", required_argument, NULL, 'I' },
		{ "no-int8", no_argument, NULL, '8' },
		{ "no-spin", no_argument, NULL, 'S' },
		{ "profile-cpu", no_argument, NULL, 'C' },
		{ "devices", required_argument, NULL, 'D' },
		{ "no-uring", no_argument, NULL, 'U' },
		{ 0 }
	};
	struct mi_model_opts mo = { 0 };
	const char *plan_path = NULL;
	struct mi_plan *plan = NULL;
	struct input_arg in_args[64];
	struct dim_bind binds[16];
	struct mi_tensor *tens = NULL;
	struct mi_value *ins = NULL, *outs = NULL;
	const char *out_file = NULL, *out_dir = NULL, *model_path;
	long long threads = 0, bench = 0, warmup = 3, seed = 1, top = -1;
	int nin_args = 0, nbinds = 0, quiet = 0, c, ret = 1, err;
	struct mi_model *m = NULL;
	double *lat = NULL;
	char ebuf[512];
	int nin = 0, nout = 0;

	optind = 1;
	while ((c = getopt_long(argc, argv, "i:o:t:b:d:s:p::qh", lopts, NULL)) !=
	       -1) {
		switch (c) {
		case 'i': {
			char *eq = strchr(optarg, '=');

			if (nin_args >= 64) {
				fprintf(stderr, "%s: too many --input\n", prog);
				return EXIT_USAGE;
			}
			in_args[nin_args].name =
				eq ? strndup(optarg, eq - optarg) : NULL;
			in_args[nin_args].file = eq ? eq + 1 : optarg;
			nin_args++;
			break;
		}
		case 'O':
			out_file = optarg;
			break;
		case 'o':
			out_dir = optarg;
			break;
		case 't':
			if (parse_int(optarg, "thread count", 0, 1024, &threads))
				return EXIT_USAGE;
			break;
		case 'b':
			if (parse_int(optarg, "iteration count", 1, 1000000,
				      &bench))
				return EXIT_USAGE;
			break;
		case 'w':
			if (parse_int(optarg, "warm-up count", 0, 1000000,
				      &warmup))
				return EXIT_USAGE;
			break;
		case 'd':
			if (add_dim(binds, &nbinds, 16, optarg))
				return EXIT_USAGE;
			break;
		case 's':
			if (parse_int(optarg, "seed", 0, INT64_MAX, &seed))
				return EXIT_USAGE;
			break;
		case 'R':
			mo.flags |= MI_MODEL_REFERENCE;
			break;
		case 'N':
			mo.flags |= MI_MODEL_NO_NORMALIZE;
			break;
		case 'p':
			top = 15;
			if (optarg && parse_int(optarg, "node count", 0, 1000000,
						&top))
				return EXIT_USAGE;
			mo.flags |= MI_MODEL_PROFILE;
			break;
		case 'q':
			quiet = 1;
			break;
		case 'I':
			if (!strcmp(optarg, "generic")) {
				mo.isa = MI_ISA_CAP_GENERIC;
			} else if (!strcmp(optarg, "avx2")) {
				mo.isa = MI_ISA_CAP_AVX2;
			} else if (!strcmp(optarg, "avx512")) {
				mo.isa = MI_ISA_CAP_AVX512;
			} else {
				fprintf(stderr,
					"%s: --isa %s: expected generic, avx2 or avx512\n",
					prog, optarg);
				return EXIT_USAGE;
			}
			break;
		case '8':
			mo.flags |= MI_MODEL_NO_INT8;
			break;
		case 'S':
			mo.flags |= MI_MODEL_NO_SPIN;
			break;
		case 'C':
			mo.flags |= MI_MODEL_PROFILE_CPU;
			break;
		case 'P':
			plan_path = optarg;
			break;
		case 'D':
			mo.devices = optarg;
			break;
		case 'U':
			mo.flags |= MI_MODEL_NO_URING;
			break;
		case 'h':
			usage_run(stdout);
			return 0;
		default:
			usage_run(stderr);
			return EXIT_USAGE;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "%s run: expected one MODEL.onnx argument\n",
			prog);
		usage_run(stderr);
		return EXIT_USAGE;
	}
	model_path = argv[optind];
	mo.nthreads = (int)threads;
	if (plan_path) {
		struct mi_plan_info pi;

		if (mi_plan_read(plan_path, &plan)) {
			fprintf(stderr, "%s: %s\n", prog, mi_last_error());
			return 1;
		}
		mi_plan_info(plan, &pi);
		if (!threads)
			mo.nthreads = pi.threads;
	}

	err = mi_model_load(model_path, &mo, &m);
	if (!err && plan)
		err = mi_model_plan_apply(m, plan);
	mi_plan_free(plan);
	if (err) {
		fprintf(stderr, "%s: %s\n", prog, mi_last_error());
		mi_model_free(m);
		return 1;
	}
	nin = mi_model_input_count(m);
	nout = mi_model_output_count(m);
	tens = calloc(nin + 1, sizeof(*tens));
	ins = calloc(nin + 1, sizeof(*ins));
	outs = calloc(nout + 1, sizeof(*outs));
	lat = calloc(bench + 1, sizeof(*lat));
	if (!tens || !ins || !outs || !lat) {
		fprintf(stderr, "%s: out of memory\n", prog);
		goto out;
	}
	/* Inputs from files. */
	for (int a = 0; a < nin_args; a++) {
		struct mi_tensor_info info;
		int k = -1;

		if (in_args[a].name) {
			for (int i = 0; i < nin; i++) {
				mi_model_input_info(m, i, &info);
				if (!strcmp(info.name, in_args[a].name))
					k = i;
			}
			if (k < 0) {
				fprintf(stderr, "%s: %s: model has no input '%s'\n",
					prog, model_path, in_args[a].name);
				goto out;
			}
		} else {
			k = a;
			if (k >= nin) {
				fprintf(stderr, "%s: %s: %d inputs given, the model has %d\n",
					prog, model_path, nin_args, nin);
				goto out;
			}
		}
		if (tens[k].data) {
			fprintf(stderr, "%s: input %d given twice\n", prog, k);
			goto out;
		}
		if (mi_npy_read(in_args[a].file, &tens[k], ebuf, sizeof(ebuf))) {
			fprintf(stderr, "%s: %s\n", prog, ebuf);
			goto out;
		}
	}
	/* Random data for the rest. */
	uint64_t rs = (uint64_t)seed * 0x9E3779B97F4A7C15ull + 1;

	for (int i = 0; i < nin; i++) {
		struct mi_tensor_info info;

		mi_model_input_info(m, i, &info);
		if (!tens[i].data) {
			if (info.ndim < 0) {
				fprintf(stderr, "%s: %s: input '%s' has unknown rank; give it with --input\n",
					prog, model_path, info.name);
				goto out;
			}
			tens[i].dtype = info.dtype;
			tens[i].ndim = info.ndim;
			for (int d = 0; d < info.ndim; d++)
				tens[i].dims[d] = info.dims[d] >= 0 ?
					info.dims[d] :
					bound_dim(binds, nbinds,
						  info.dim_param[d]);
			if (mi_tensor_alloc(&tens[i])) {
				fprintf(stderr, "%s: input '%s' is too large\n",
					prog, info.name);
				goto out;
			}
			fill_random(&tens[i], &rs);
		}
		ins[i].name = info.name;
		ins[i].dtype = tens[i].dtype;
		ins[i].ndim = tens[i].ndim;
		memcpy(ins[i].dims, tens[i].dims, sizeof(ins[i].dims));
		ins[i].data = tens[i].data;
		ins[i].nbytes = tens[i].nbytes;
	}

	int iters = bench ? (int)(warmup + bench) : 1;

	for (int it = 0; it < iters; it++) {
		double t0 = now_ms();

		err = mi_model_run(m, ins, nin, outs, nout);
		if (err) {
			fprintf(stderr, "%s: %s\n", prog, mi_last_error());
			goto out;
		}
		if (bench && it >= warmup)
			lat[it - warmup] = now_ms() - t0;
		if (top >= 0 && bench && it == warmup - 1)
			mi_model_profile_reset(m);
	}
	if (!quiet)
		for (int i = 0; i < nout; i++)
			print_value(&outs[i]);
	if (out_file && nout > 0 &&
	    mi_npy_write(out_file, outs[0].dtype, outs[0].ndim, outs[0].dims,
			 outs[0].data, ebuf, sizeof(ebuf))) {
		fprintf(stderr, "%s: %s\n", prog, ebuf);
		goto out;
	}
	if (out_dir) {
		if (mkdir(out_dir, 0777) && errno != EEXIST) {
			fprintf(stderr, "%s: %s: %s\n", prog, out_dir,
				strerror(errno));
			goto out;
		}
		for (int i = 0; i < nout; i++) {
			char path[4096], safe[256];
			size_t k;

			/* output names may hold '/' or odd bytes */
			for (k = 0; outs[i].name[k] && k < sizeof(safe) - 1; k++) {
				char ch = outs[i].name[k];

				safe[k] = (ch == '/' || ch < 0x20) ? '_' : ch;
			}
			safe[k] = 0;
			if (!k || !strcmp(safe, ".") || !strcmp(safe, ".."))
				snprintf(safe, sizeof(safe), "output_%d", i);
			snprintf(path, sizeof(path), "%s/%s.npy", out_dir, safe);
			if (mi_npy_write(path, outs[i].dtype, outs[i].ndim,
					 outs[i].dims, outs[i].data, ebuf,
					 sizeof(ebuf))) {
				fprintf(stderr, "%s: %s\n", prog, ebuf);
				goto out;
			}
		}
	}
	if (top >= 0 && print_profile(m, (int)top))
		goto out;
	if (bench) {
		qsort(lat, bench, sizeof(*lat), cmp_double);
		int p90 = (int)ceil(0.9 * bench) - 1;

		printf("latency_ms median=%.3f p90=%.3f min=%.3f\n",
		       bench % 2 ? lat[bench / 2] :
				   (lat[bench / 2 - 1] + lat[bench / 2]) / 2,
		       lat[p90 < 0 ? 0 : p90], lat[0]);
	}
	if (mo.devices)
		mi_cli_device_stats(m, stdout);
	ret = 0;
out:
	for (int i = 0; i < nin && tens; i++)
		mi_tensor_fini(&tens[i]);
	for (int a = 0; a < nin_args; a++)
		free(in_args[a].name);
	for (int b = 0; b < nbinds; b++)
		free(binds[b].sym);
	free(tens);
	free(ins);
	free(outs);
	free(lat);
	mi_model_free(m);
	return ret;
}

/* Shape inference with the declared shapes (symbolic dims bound). */
static int infer_for_info(struct mi_model *m, const struct dim_bind *b, int nb)
{
	struct mi_graph *g = &m->g;
	int32_t *nd = calloc(g->ninputs + 1, sizeof(int32_t));
	int64_t *dims = calloc((size_t)(g->ninputs + 1) * MI_MAX_DIMS,
			       sizeof(int64_t));
	int err = -ENOMEM;

	if (!nd || !dims)
		goto out;
	for (int i = 0; i < g->ninputs; i++) {
		struct mi_tensor_info info;

		mi_model_input_info(m, i, &info);
		if (info.ndim < 0) {
			err = -EAGAIN;
			goto out;
		}
		nd[i] = info.ndim;
		for (int d = 0; d < info.ndim; d++)
			dims[i * MI_MAX_DIMS + d] =
				info.dims[d] >= 0 ?
					info.dims[d] :
					bound_dim(b, nb, info.dim_param[d]);
	}
	err = mi_model_infer_shapes(m, nd, dims);
out:
	free(nd);
	free(dims);
	return err;
}

static int cmd_info(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "nodes", no_argument, NULL, 'n' },
		{ "dim", required_argument, NULL, 'd' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct mi_model_opts mo = { .flags = MI_MODEL_NO_NORMALIZE |
					     MI_MODEL_NO_FOLD };
	struct dim_bind binds[16];
	int json = 0, nodes = 0, nbinds = 0, c, err, ret = 1;
	struct mi_pass_stats st;
	struct mi_model *m = NULL;
	const char *path;

	optind = 1;
	while ((c = getopt_long(argc, argv, "jnd:h", lopts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = 1;
			break;
		case 'n':
			nodes = 1;
			break;
		case 'd':
			if (add_dim(binds, &nbinds, 16, optarg))
				return EXIT_USAGE;
			break;
		case 'h':
			usage_info(stdout);
			return 0;
		default:
			usage_info(stderr);
			return EXIT_USAGE;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "%s info: expected one MODEL.onnx argument\n",
			prog);
		usage_info(stderr);
		return EXIT_USAGE;
	}
	path = argv[optind];
	err = mi_model_load_inspect(path, &mo, &m);
	if (err) {
		fprintf(stderr, "%s: %s\n", prog, mi_last_error());
		goto out;
	}
	err = infer_for_info(m, binds, nbinds);
	if (err && err != -EAGAIN) {
		fprintf(stderr, "%s: %s: %s\n", prog, path, m->g.err);
		goto out;
	}
	{
		int nu = 0;

		for (int i = 0; i < m->g.nnodes; i++)
			if (!m->g.nodes[i].def) {
				if (!nu++)
					fprintf(stderr, "%s: %s: unsupported ops (shapes after them unknown, the model cannot run):",
						prog, path);
				fprintf(stderr, " %s", m->g.nodes[i].op_type);
			}
		if (nu)
			fprintf(stderr, "\n");
	}
	if (json) {
		printf("{\"model\":\"");
		for (const char *p = path; *p; p++)
			printf((*p == '"' || *p == '\\') ? "\\%c" :
			       (unsigned char)*p < 0x20 ? "?" : "%c", *p);
		printf("\",\"opset\":%" PRId64 ",\"before\":", m->g.opset);
		mi_graph_print_json(stdout, &m->g);
	} else {
		printf("model %s (opset %" PRId64 ")\n", path, m->g.opset);
		printf("before normalization:\n");
		mi_graph_print_text(stdout, &m->g, nodes);
	}
	err = mi_graph_normalize(&m->g, 0, &st);
	if (!err)
		err = infer_for_info(m, binds, nbinds);
	if (err && err != -EAGAIN) {
		fflush(stdout);
		fprintf(stderr, "%s: %s: normalization: %s\n", prog, path,
			m->g.err);
		goto out;
	}
	if (json) {
		printf(",\"after\":");
		mi_graph_print_json(stdout, &m->g);
		printf(",\"passes\":{\"folded\":%d,\"bn_folded\":%d,\"noops\":%d,\"canonical\":%d,\"dead\":%d}}\n",
		       st.folded, st.bn_folded, st.noops, st.canonical,
		       st.dead);
	} else {
		printf("after normalization (folded %d, batchnorm folded %d, no-ops removed %d, canonicalized %d, dead removed %d):\n",
		       st.folded, st.bn_folded, st.noops, st.canonical,
		       st.dead);
		mi_graph_print_text(stdout, &m->g, nodes);
	}
	ret = 0;
out:
	for (int b = 0; b < nbinds; b++)
		free(binds[b].sym);
	mi_model_free(m);
	return ret;
}

int main(int argc, char **argv)
{
	const char *cmd;

	if (argc < 2) {
		usage_main(stderr);
		return EXIT_USAGE;
	}
	cmd = argv[1];
	if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") ||
	    !strcmp(cmd, "help")) {
		usage_main(stdout);
		return 0;
	}
	if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
		printf("metainfer %s\n", mi_version());
		return 0;
	}
	if (!strcmp(cmd, "run"))
		return cmd_run(argc - 1, argv + 1);
	if (!strcmp(cmd, "info"))
		return cmd_info(argc - 1, argv + 1);
	if (!strcmp(cmd, "top"))
		return mi_top_main(argc - 1, argv + 1);
	if (!strcmp(cmd, "trace"))
		return mi_trace_main(argc - 1, argv + 1);
	if (!strcmp(cmd, "plan"))
		return mi_cli_plan(argc - 1, argv + 1, prog);
	if (!strcmp(cmd, "fingerprint"))
		return mi_cli_fingerprint(argc - 1, argv + 1, prog);
	if (!strcmp(cmd, "health"))
		return mi_cli_health(argc - 1, argv + 1, prog);
	if (!strcmp(cmd, "predict"))
		return mi_cli_predict(argc - 1, argv + 1, prog);
	if (!strcmp(cmd, "tune"))
		return mi_cli_tune(argc - 1, argv + 1, prog);
	if (!strcmp(cmd, "switch"))
		return mi_cli_switch(argc - 1, argv + 1, prog);
	if (!strcmp(cmd, "serve"))
		return mi_cli_serve(argc - 1, argv + 1, prog);
	if (!strcmp(cmd, "devices"))
		return mi_cli_devices(argc - 1, argv + 1, prog);
	if (!strcmp(cmd, "adapt"))
		return mi_cli_adapt(argc - 1, argv + 1, prog);
	if (!strcmp(cmd, "quantize")) {
#ifdef MI_HAVE_QUANT_MAIN
		return mi_quant_main(argc - 1, argv + 1);
#else
		fprintf(stderr, "%s: quantize is not built into this binary\n",
			prog);
		return 1;
#endif
	}
	fprintf(stderr, "%s: unknown command '%s'\n", prog, cmd);
	usage_main(stderr);
	return EXIT_USAGE;
}
