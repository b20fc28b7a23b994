// SPDX-License-Identifier: MIT
/*
 * hetero-check: run one model on the CPU and across the CPU and the
 * accelerators (mi_model_opts.devices) over N seeded inputs and compare,
 * through the public API only.  Prints the cosine (min/mean) and top-1
 * agreement of the first output and each device's time, jobs, faults and
 * bytes moved; fails when they miss the limits.
 *
 * The CPU run is the int8 kernels' (--ref int8) or the QDQ graph's in
 * fp32 (--ref qdq): the semantics the lowering follows within one
 * quantization step, and what the CPU part of a placed model runs.
 *
 * Fault tests plant a fault between inferences with --at K:CMD (a shell
 * command run before inference K, e.g. writing a sim chip's fail_dma
 * attribute); --expect-faults then requires that some job failed and
 * reran on the CPU while every output stayed right.  Any other run fails
 * on more than --max-faults faults (default 0): a job that times out and
 * reruns on the CPU still gives the right output, but the devices did not
 * run it.  --procs P runs P processes at once, each over the same inputs.
 * --shared K requires at least K job inputs per inference passed in
 * place from another job's buffer (PRIME or the same BO, no copy).
 *
 * Built twice: hetero-check (public API only, for the VM's accelerators)
 * and hetero-check-emu (with hetero-emu.c: emulated accelerators, for
 * the host).
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <metainfer/metainfer.h>

#define MAX_AT 8

#ifdef HETERO_EMU
/* hetero-emu.c: emulated accelerators for the host build */
int hetero_emu_setup(void);
#endif

struct opts {
	const char *model;
	const char *devices;
	int inputs;
	uint64_t seed;
	double min_cosine;
	int max_top1_diff;
	int no_uring;
	int ref_qdq;
	int expect_faults;
	long max_faults;	/* -1: not given */
	long min_shared;
	int procs;
	int quiet;
	int isa;		/* enum mi_isa_cap of both loads' CPU kernels */
	int at_k[MAX_AT];
	const char *at_cmd[MAX_AT];
	int nat;
};

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform in [-1, 1): the range the exporters' calibration data has. */
static float rng_float(uint64_t *s)
{
	return (float)((rng_next(s) >> 40) * (1.0 / (1ull << 23)) - 1.0);
}

struct input {
	struct mi_value v;
	size_t count;
};

static int make_inputs(struct mi_model *m, struct input **inp, int *nin)
{
	int n = mi_model_input_count(m);
	struct input *in;

	if (n <= 0) {
		fprintf(stderr, "hetero-check: model has no inputs\n");
		return -EINVAL;
	}
	in = calloc(n, sizeof(*in));
	if (!in)
		return -ENOMEM;
	for (int i = 0; i < n; i++) {
		struct mi_tensor_info ti;
		size_t count = 1;

		if (mi_model_input_info(m, i, &ti))
			return -EINVAL;
		if (ti.dtype != MI_DT_FLOAT) {
			fprintf(stderr, "hetero-check: input '%s' is %s; only float inputs are generated\n",
				ti.name, mi_dtype_name(ti.dtype));
			return -EINVAL;
		}
		in[i].v.name = ti.name;
		in[i].v.dtype = ti.dtype;
		in[i].v.ndim = ti.ndim;
		for (int d = 0; d < ti.ndim; d++) {
			in[i].v.dims[d] = ti.dims[d] < 0 ? 1 : ti.dims[d];
			count *= (size_t)in[i].v.dims[d];
		}
		in[i].count = count;
		in[i].v.nbytes = count * sizeof(float);
		in[i].v.data = malloc(in[i].v.nbytes);
		if (!in[i].v.data)
			return -ENOMEM;
	}
	*inp = in;
	*nin = n;
	return 0;
}

static void fill_inputs(struct input *in, int nin, uint64_t seed, int k)
{
	uint64_t s = seed * 1000003u + (uint64_t)k;

	for (int i = 0; i < nin; i++) {
		float *p = in[i].v.data;

		for (size_t j = 0; j < in[i].count; j++)
			p[j] = rng_float(&s);
	}
}

static size_t argmax(const float *p, size_t n)
{
	size_t best = 0;

	for (size_t i = 1; i < n; i++)
		if (p[i] > p[best])
			best = i;
	return best;
}

static double cosine(const float *a, const float *b, size_t n)
{
	double ab = 0, aa = 0, bb = 0;

	for (size_t i = 0; i < n; i++) {
		ab += (double)a[i] * b[i];
		aa += (double)a[i] * a[i];
		bb += (double)b[i] * b[i];
	}
	if (aa == 0 && bb == 0)
		return 1.0;
	if (aa == 0 || bb == 0)
		return 0.0;
	return ab / sqrt(aa * bb);
}

static int load(const struct opts *o, const char *devices,
		struct mi_model **mp)
{
	struct mi_model_opts mo = { 0 };
	int ret;

	mo.devices = devices;
	mo.isa = o->isa;
	if (!devices && o->ref_qdq)
		mo.flags |= MI_MODEL_NO_INT8;
	if (devices && o->no_uring)
		mo.flags |= MI_MODEL_NO_URING;
	ret = mi_model_load(o->model, &mo, mp);
	if (ret)
		fprintf(stderr, "hetero-check: %s (devices %s): %s\n", o->model,
			devices ? devices : "cpu", mi_last_error());
	return ret;
}

/* Per device: totals over the run; constants (uploaded once, at load)
 * apart from bytes in; shared: inputs read in place from another job. */
static void print_stats(struct mi_model *m, uint64_t *faults, uint64_t *shared)
{
	int n = mi_model_device_count(m);

	*faults = 0;
	*shared = 0;
	for (int i = 0; i < n; i++) {
		struct mi_device_stats st;

		if (mi_model_device_stats(m, i, &st))
			continue;
		*faults += st.faults;
		*shared += st.shared;
		printf("  %-6s nodes %4llu  busy %10.3f ms  jobs %6llu  faults %3llu  in %9llu B  out %9llu B  const %8llu B  shared %5llu (%llu B)\n",
		       st.device, (unsigned long long)st.nodes, st.busy_ns / 1e6,
		       (unsigned long long)st.jobs, (unsigned long long)st.faults,
		       (unsigned long long)st.bytes_in,
		       (unsigned long long)st.bytes_out,
		       (unsigned long long)st.bytes_const,
		       (unsigned long long)st.shared,
		       (unsigned long long)st.shared_bytes);
	}
}

/* One process's run; returns 0 when every limit holds. */
static int run_one(const struct opts *o, int proc)
{
	struct mi_model *cpu = NULL, *het = NULL;
	struct input *in = NULL;
	int nin = 0, ret, top1_diff = 0, bad = 0;
	double cmin = 2.0, csum = 0;
	uint64_t faults = 0, shared = 0;
	float *ref = NULL;

	ret = load(o, NULL, &cpu);
	if (ret)
		return 1;
	ret = load(o, o->devices, &het);
	if (ret)
		goto out;
	ret = make_inputs(cpu, &in, &nin);
	if (ret)
		goto out;

	for (int k = 0; k < o->inputs; k++) {
		struct mi_value out_cpu, out_het;
		size_t n;
		double c;

		for (int a = 0; a < o->nat; a++) {
			if (o->at_k[a] != k || proc != 0)
				continue;
			if (system(o->at_cmd[a]) != 0)
				fprintf(stderr, "hetero-check: --at %d: '%s' failed\n",
					k, o->at_cmd[a]);
		}
		fill_inputs(in, nin, o->seed, k);
		if (mi_model_run(cpu, &in[0].v, nin, &out_cpu, 1)) {
			fprintf(stderr, "hetero-check: cpu run %d: %s\n", k,
				mi_last_error());
			ret = 1;
			goto out;
		}
		if (out_cpu.dtype != MI_DT_FLOAT) {
			fprintf(stderr, "hetero-check: output is %s, not float\n",
				mi_dtype_name(out_cpu.dtype));
			ret = 1;
			goto out;
		}
		n = out_cpu.nbytes / sizeof(float);
		free(ref);
		ref = malloc(out_cpu.nbytes);
		if (!ref) {
			ret = 1;
			goto out;
		}
		memcpy(ref, out_cpu.data, out_cpu.nbytes);
		if (mi_model_run(het, &in[0].v, nin, &out_het, 1)) {
			fprintf(stderr, "hetero-check: run %d on %s: %s\n", k,
				o->devices, mi_last_error());
			ret = 1;
			goto out;
		}
		if (out_het.nbytes != out_cpu.nbytes) {
			fprintf(stderr, "hetero-check: run %d: output size %llu vs %llu\n",
				k, (unsigned long long)out_het.nbytes,
				(unsigned long long)out_cpu.nbytes);
			ret = 1;
			goto out;
		}
		c = cosine(ref, out_het.data, n);
		csum += c;
		if (c < cmin)
			cmin = c;
		if (c < o->min_cosine)
			bad++;
		if (argmax(ref, n) != argmax(out_het.data, n))
			top1_diff++;
	}

	if (!o->quiet || proc == 0) {
		printf("%s on %s%s%s vs cpu %s: %d inputs, cosine min %.6f mean %.6f, top-1 differs on %d\n",
		       o->model, o->devices, o->no_uring ? " (ioctls)" : "",
		       o->procs > 1 ? " [proc]" : "",
		       o->ref_qdq ? "qdq" : "int8", o->inputs, cmin,
		       csum / o->inputs, top1_diff);
		print_stats(het, &faults, &shared);
	} else {
		print_stats(het, &faults, &shared);
	}
	ret = 0;
	if (bad) {
		fprintf(stderr, "hetero-check: %d of %d outputs below cosine %.4f\n",
			bad, o->inputs, o->min_cosine);
		ret = 1;
	}
	if (top1_diff > o->max_top1_diff) {
		fprintf(stderr, "hetero-check: top-1 differs on %d inputs (limit %d)\n",
			top1_diff, o->max_top1_diff);
		ret = 1;
	}
	if (o->expect_faults && proc == 0 && !faults) {
		fprintf(stderr, "hetero-check: faults were planted but none was counted\n");
		ret = 1;
	}
	if (o->max_faults >= 0 && faults > (uint64_t)o->max_faults) {
		fprintf(stderr, "hetero-check: %llu faults (limit %ld): jobs reran on the CPU\n",
			(unsigned long long)faults, o->max_faults);
		ret = 1;
	}
	if (shared < (uint64_t)o->min_shared * o->inputs) {
		fprintf(stderr, "hetero-check: %llu inputs shared in place over %d inferences (want >= %ld each)\n",
			(unsigned long long)shared, o->inputs, o->min_shared);
		ret = 1;
	}
out:
	for (int i = 0; i < nin; i++)
		free(in[i].v.data);
	free(in);
	free(ref);
	mi_model_free(het);
	mi_model_free(cpu);
	return ret ? 1 : 0;
}

static void usage(FILE *f, const char *argv0)
{
	fprintf(f,
		"usage: %s MODEL.onnx --devices LIST [options]\n"
		"Runs MODEL on the CPU and across LIST over seeded inputs and compares.\n"
		"  -d, --devices LIST     devices ('npu0,npu1', 'all')\n"
		"  -n, --inputs N         seeded inputs (default 100)\n"
		"  -s, --seed S           seed (default 1)\n"
		"  -c, --min-cosine C     lowest cosine allowed per output (default 0.999)\n"
		"  -t, --max-top1-diff K  inputs whose top-1 may differ (default 0)\n"
		"      --no-uring         accelerator jobs through ioctls\n"
		"  -r, --ref MODE         CPU run to compare with: int8 (the int8 kernels,\n"
		"                         default) or qdq (the QDQ graph in fp32)\n"
		"      --at K:CMD         run shell CMD before inference K (fault tests)\n"
		"      --expect-faults    fail unless some job failed and reran on the CPU\n"
		"      --max-faults N     fail on more than N faults (default 0, none\n"
		"                         with --expect-faults)\n"
		"      --shared K         fail unless K job inputs per inference come from\n"
		"                         another job's buffer in place (PRIME / same BO)\n"
		"  -p, --procs P          P processes at once (default 1)\n"
		"  -i, --isa NAME         CPU kernels of both runs: native (default),\n"
		"                         generic, avx2, avx512\n"
		"  -q, --quiet            one summary per process\n",
		argv0);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "devices", required_argument, NULL, 'd' },
		{ "inputs", required_argument, NULL, 'n' },
		{ "seed", required_argument, NULL, 's' },
		{ "min-cosine", required_argument, NULL, 'c' },
		{ "max-top1-diff", required_argument, NULL, 't' },
		{ "no-uring", no_argument, NULL, 'U' },
		{ "ref", required_argument, NULL, 'r' },
		{ "at", required_argument, NULL, 'A' },
		{ "expect-faults", no_argument, NULL, 'F' },
		{ "max-faults", required_argument, NULL, 'M' },
		{ "shared", required_argument, NULL, 'S' },
		{ "procs", required_argument, NULL, 'p' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "isa", required_argument, NULL, 'i' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct opts o = { .inputs = 100, .seed = 1, .min_cosine = 0.999,
			  .procs = 1, .max_faults = -1 };
	int c, fails = 0;

	while ((c = getopt_long(argc, argv, "d:n:s:c:t:p:r:i:qh", lo, NULL)) != -1) {
		char *end;

		switch (c) {
		case 'd': o.devices = optarg; break;
		case 'n': o.inputs = atoi(optarg); break;
		case 's': o.seed = strtoull(optarg, NULL, 0); break;
		case 'c': o.min_cosine = atof(optarg); break;
		case 't': o.max_top1_diff = atoi(optarg); break;
		case 'U': o.no_uring = 1; break;
		case 'r':
			if (strcmp(optarg, "int8") && strcmp(optarg, "qdq")) {
				fprintf(stderr, "hetero-check: --ref is int8 or qdq, not '%s'\n",
					optarg);
				return 2;
			}
			o.ref_qdq = !strcmp(optarg, "qdq");
			break;
		case 'F': o.expect_faults = 1; break;
		case 'M':
		case 'S': {
			long v = strtol(optarg, &end, 10);

			if (end == optarg || *end || v < 0) {
				fprintf(stderr, "hetero-check: --%s wants a count, not '%s'\n",
					c == 'M' ? "max-faults" : "shared", optarg);
				return 2;
			}
			if (c == 'M')
				o.max_faults = v;
			else
				o.min_shared = v;
			break;
		}
		case 'p': o.procs = atoi(optarg); break;
		case 'q': o.quiet = 1; break;
		case 'i': {
			/* enum mi_isa_cap order */
			static const char *const names[] = { "native", "generic",
							      "avx2", "avx512" };

			o.isa = -1;
			for (int k = 0; k < 4; k++)
				if (!strcmp(optarg, names[k]))
					o.isa = k;
			if (o.isa < 0) {
				fprintf(stderr, "hetero-check: --isa is native, generic, avx2 or avx512, not '%s'\n",
					optarg);
				return 2;
			}
			break;
		}
		case 'A':
			if (o.nat == MAX_AT) {
				fprintf(stderr, "hetero-check: at most %d --at\n", MAX_AT);
				return 2;
			}
			o.at_k[o.nat] = (int)strtol(optarg, &end, 10);
			if (end == optarg || *end != ':' || !end[1]) {
				fprintf(stderr, "hetero-check: --at wants K:CMD, not '%s'\n",
					optarg);
				return 2;
			}
			o.at_cmd[o.nat++] = end + 1;
			break;
		case 'h': usage(stdout, argv[0]); return 0;
		default: usage(stderr, argv[0]); return 2;
		}
	}
	if (optind != argc - 1 || !o.devices || o.inputs <= 0 || o.procs <= 0 ||
	    o.procs > 64) {
		usage(stderr, argv[0]);
		return 2;
	}
	o.model = argv[optind];
	if (o.max_faults < 0 && !o.expect_faults)
		o.max_faults = 0;
#ifdef HETERO_EMU
	if (hetero_emu_setup())
		return 1;
#endif
	if (o.procs == 1)
		return run_one(&o, 0);

	fflush(stdout);
	for (int p = 0; p < o.procs; p++) {
		pid_t pid = fork();

		if (pid < 0) {
			perror("hetero-check: fork");
			return 1;
		}
		if (pid == 0)
			_exit(run_one(&o, p));
	}
	for (int p = 0; p < o.procs; p++) {
		int st;

		if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
			fails++;
	}
	printf("%d processes x %d inferences: %d failed\n", o.procs, o.inputs,
	       fails);
	return fails ? 1 : 0;
}
