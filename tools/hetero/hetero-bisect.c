// SPDX-License-Identifier: MIT
/*
 * hetero-bisect: where does a placed model first part from the CPU?
 *
 * For one seeded input (hetero-check's generator), keeps the first C of
 * the plan's device entries on their device and moves the rest to the
 * CPU (a plan applied to the same load), and bisects on C for the first
 * entry whose device placement changes the output bits.  For that
 * entry's unit it prints its quantized output against the QDQ graph run
 * in fp32 (the semantics the lowering follows), computed once on the
 * device and once on the CPU (every other entry on the device, so the
 * tensor is a dense job border): elements per step difference, and the
 * first ones that differ.
 *
 *   hetero-bisect MODEL -d DEVICES -k INPUT [-s SEED] [-o DIR [-t NAME]]
 *
 * Built with the emulated devices (hetero-emu.c), like hetero-check-emu;
 * Documentation/testing.rst has what it found.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <metainfer/metainfer.h>

#include "internal.h"
#include "plan/plan-impl.h"

int hetero_emu_setup(void);

/* -o DIR: the compared tensors as .npy there; -t NAME: also the QDQ
 * run's tensor NAME (e.g. the unit's input) */
static const char *dump_dir, *dump_name;

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static float rng_float(uint64_t *s)
{
	return (float)((rng_next(s) >> 40) * (1.0 / (1ull << 23)) - 1.0);
}

static int load(const char *path, const char *devices, uint32_t flags,
		struct mi_model **mp)
{
	struct mi_model_opts mo = { .flags = flags, .devices = devices };
	int ret = mi_model_load(path, &mo, mp);

	if (ret)
		fprintf(stderr, "hetero-bisect: %s: %s\n", path, mi_last_error());
	return ret;
}

static double cosine(const float *a, const float *b, size_t n)
{
	double ab = 0, aa = 0, bb = 0;

	for (size_t i = 0; i < n; i++) {
		ab += (double)a[i] * b[i];
		aa += (double)a[i] * a[i];
		bb += (double)b[i] * b[i];
	}
	return aa && bb ? ab / sqrt(aa * bb) : aa == bb;
}

/* Run m on in; out: a copy of the first output (caller frees). */
static int run(struct mi_model *m, struct mi_value *in, float **out,
	       size_t *n)
{
	struct mi_value o;

	if (mi_model_run(m, in, 1, &o, 1)) {
		fprintf(stderr, "hetero-bisect: run: %s\n", mi_last_error());
		return -1;
	}
	*n = o.nbytes / sizeof(float);
	*out = malloc(o.nbytes);
	if (!*out)
		return -1;
	memcpy(*out, o.data, o.nbytes);
	return 0;
}

/* The plan with only the first c device entries (idx) on their device;
 * but: that one entry on the CPU, every other on its device. */
static int apply_prefix(struct mi_model *m, const struct mi_plan *base,
			const int *idx, int ndev, int c, int but)
{
	struct mi_plan *p;
	int err = mi_plan_dup(base, &p);

	if (err)
		return err;
	for (int k = 0; k < ndev; k++) {
		if (but >= 0 ? k != but : k < c)
			continue;
		free(p->e[idx[k]].device);
		p->e[idx[k]].device = strdup("cpu");
	}
	err = mi_model_plan_apply(m, p);
	if (err)
		fprintf(stderr, "hetero-bisect: apply %d: %s\n", c,
			mi_last_error());
	mi_plan_free(p);
	return err;
}

static int find_tensor(struct mi_graph *g, const char *name)
{
	for (int t = 0; t < g->ntensors; t++)
		if (g->tensors[t].name && !strcmp(g->tensors[t].name, name))
			return t;
	return -1;
}

/* The first int8 tensor after node name's output (its unit's Q), along
 * single readers; -1 if none. */
static int unit_output(struct mi_graph *g, const char *name)
{
	int t = -1;

	for (int i = 0; i < g->nnodes; i++)
		if (g->nodes[i].name && !strcmp(g->nodes[i].name, name))
			t = g->nodes[i].outputs[0];
	for (int hop = 0; hop < 4 && t >= 0; hop++) {
		int nx = -1;

		if (g->tensors[t].dtype == MI_DT_INT8 ||
		    g->tensors[t].dtype == MI_DT_UINT8)
			return t;
		for (int j = 0; j < g->nnodes; j++)
			if (!g->nodes[j].dead && g->nodes[j].ninputs &&
			    g->nodes[j].inputs[0] == t)
				nx = j;
		t = nx >= 0 ? g->nodes[nx].outputs[0] : -1;
	}
	return -1;
}

/* Steps between the int8 tensor name in a and b (element counts). */
static void compare_tensor(struct mi_model *a, struct mi_model *b,
			   const char *name)
{
	int ta = find_tensor(&a->g, name), tb = find_tensor(&b->g, name);
	const struct mi_tensor *x, *y;
	long hist[8] = { 0 };
	int64_t n;

	if (ta < 0 || tb < 0) {
		printf("  tensor %s: not in both graphs\n", name);
		return;
	}
	x = &a->g.tensors[ta];
	y = &b->g.tensors[tb];
	n = mi_tensor_numel(x);
	if (!x->data || !y->data || x->dtype != y->dtype ||
	    n != mi_tensor_numel(y) ||
	    (x->dtype != MI_DT_INT8 && x->dtype != MI_DT_UINT8)) {
		printf("  tensor %s: no comparable int8 data\n", name);
		return;
	}
	for (int64_t i = 0; i < n; i++) {
		int va = x->dtype == MI_DT_INT8 ? ((int8_t *)x->data)[i] :
						  ((uint8_t *)x->data)[i];
		int vb = y->dtype == MI_DT_INT8 ? ((int8_t *)y->data)[i] :
						  ((uint8_t *)y->data)[i];
		int d = abs(va - vb);

		hist[d > 7 ? 7 : d]++;
		if (d && hist[1] + hist[2] + hist[3] + hist[4] + hist[5] +
			 hist[6] + hist[7] <= 4)
			printf("    [%lld] %d, QDQ run %d\n", (long long)i, va, vb);
	}
	if (dump_dir) {
		char path[512], flat[400];

		snprintf(flat, sizeof(flat), "%s", name);
		for (char *q = flat; *q; q++)
			if (*q == '/')
				*q = '_';
		snprintf(path, sizeof(path), "%s/%s.npy", dump_dir, flat);
		mi_npy_write(path, x->dtype, x->ndim, x->dims, x->data, NULL, 0);
		snprintf(path, sizeof(path), "%s/qdq.%s.npy", dump_dir, flat);
		mi_npy_write(path, y->dtype, y->ndim, y->dims, y->data, NULL, 0);
	}
	printf("  tensor %s (%lld elements) vs the QDQ run, steps: 0:%ld 1:%ld 2:%ld 3:%ld 4..6:%ld >=7:%ld\n",
	       name, (long long)n, hist[0], hist[1], hist[2], hist[3],
	       hist[4] + hist[5] + hist[6], hist[7]);
}

int main(int argc, char **argv)
{
	const char *devices = "npu0";
	uint64_t seed = 1;
	int k = 0, c, ndev = 0, lo, hi, *idx;
	struct mi_model *cpu, *het, *qdq;
	struct mi_plan *base;
	struct mi_value in;
	struct mi_tensor_info ti;
	float *ref, *out, *buf;
	size_t n, cnt = 1;
	uint64_t s;

	while ((c = getopt(argc, argv, "d:k:s:o:t:")) != -1) {
		switch (c) {
		case 'o': dump_dir = optarg; break;
		case 't': dump_name = optarg; break;
		case 'd': devices = optarg; break;
		case 'k': k = atoi(optarg); break;
		case 's': seed = strtoull(optarg, NULL, 0); break;
		default:
			fprintf(stderr, "usage: %s MODEL [-d DEV] [-k INPUT] [-s SEED]\n",
				argv[0]);
			return 2;
		}
	}
	if (optind != argc - 1)
		return 2;
	if (hetero_emu_setup())
		return 1;
	/* QDQ run without an arena keeps every tensor it computes */
	if (load(argv[optind], NULL, 0, &cpu) ||
	    load(argv[optind], devices, MI_MODEL_NO_ARENA, &het) ||
	    load(argv[optind], NULL, MI_MODEL_NO_INT8 | MI_MODEL_NO_ARENA,
		 &qdq))
		return 1;
	if (mi_model_input_info(cpu, 0, &ti))
		return 1;
	memset(&in, 0, sizeof(in));
	in.name = ti.name;
	in.dtype = MI_DT_FLOAT;
	in.ndim = ti.ndim;
	for (int d = 0; d < ti.ndim; d++) {
		in.dims[d] = ti.dims[d] < 0 ? 1 : ti.dims[d];
		cnt *= in.dims[d];
	}
	buf = malloc(cnt * sizeof(float));
	s = seed * 1000003u + (uint64_t)k;
	for (size_t j = 0; j < cnt; j++)
		buf[j] = rng_float(&s);
	in.data = buf;
	in.nbytes = cnt * sizeof(float);
	if (run(cpu, &in, &ref, &n) || mi_model_plan_get(het, &base))
		return 1;
	idx = calloc(base->n + 1, sizeof(*idx));
	for (int i = 0; i < base->n; i++)
		if (strcmp(base->e[i].device, "cpu"))
			idx[ndev++] = i;
	if (run(het, &in, &out, &n))
		return 1;
	printf("input %d: %d device entries, all placed: cosine %.6f\n", k,
	       ndev, cosine(ref, out, n));
	if (!memcmp(ref, out, n * sizeof(float))) {
		printf("identical\n");
		return 0;
	}
	free(out);
	lo = 0;
	hi = ndev;
	while (hi - lo > 1) {
		int mid = (lo + hi) / 2;

		if (apply_prefix(het, base, idx, ndev, mid, -1) ||
		    run(het, &in, &out, &n))
			return 1;
		printf("  first %d on device: cosine %.6f\n", mid,
		       cosine(ref, out, n));
		if (!memcmp(ref, out, n * sizeof(float)))
			lo = mid;
		else
			hi = mid;
		free(out);
	}
	printf("first entry that changes the output: #%d %s (%s)\n",
	       hi - 1, base->e[idx[hi - 1]].name, base->e[idx[hi - 1]].op);
	if (run(qdq, &in, &out, &n))
		return 1;
	free(out);
	if (dump_name)
		compare_tensor(qdq, qdq, dump_name);
	/* the entry's unit on its device after the prefix, then on the CPU
	 * with everything else on the device */
	for (int pass = 0; pass < 2; pass++) {
		int t;

		if (apply_prefix(het, base, idx, ndev, hi, pass ? hi - 1 : -1) ||
		    run(het, &in, &out, &n))
			return 1;
		free(out);
		t = unit_output(&het->g, base->e[idx[hi - 1]].name);
		printf(" %s:\n", pass ? "the entry alone on the cpu" :
					"on the device");
		if (t >= 0)
			compare_tensor(het, qdq, het->g.tensors[t].name);
	}
	return 0;
}
