// SPDX-License-Identifier: GPL-2.0-only
/*
 * Each normalization pass on its own: for every model listed in
 * DIR/manifest.txt (written by gen_pass_models.py), load it twice without
 * normalization, apply only the named pass (+ dead-node elimination) to one
 * copy, check the rewrite count and which ops are gone / present, then run
 * both on the same seeded inputs and compare the outputs.
 *
 *   test-passes DIR
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static int failures;

#define CHECK(cond, ...)                                                   \
	do {                                                               \
		if (!(cond)) {                                             \
			printf("FAIL %s: ", model);                       \
			printf(__VA_ARGS__);                               \
			printf("\n");                                      \
			failures++;                                        \
			goto out;                                          \
		}                                                          \
	} while (0)

static int count_op(const struct mi_graph *g, const char *op)
{
	int c = 0;

	for (int i = 0; i < g->nnodes; i++)
		if (!g->nodes[i].dead && !strcmp(g->nodes[i].op_type, op))
			c++;
	return c;
}

static int apply(struct mi_graph *g, const char *pass)
{
	if (!strcmp(pass, "bn"))
		return mi_pass_fold_batchnorm(g);
	if (!strcmp(pass, "noops"))
		return mi_pass_remove_noops(g);
	if (!strcmp(pass, "canon"))
		return mi_pass_canonicalize(g);
	if (!strcmp(pass, "fold"))
		return mi_graph_fold_constants(g);
	if (!strcmp(pass, "dead"))
		return mi_graph_dead_nodes(g);
	return -EINVAL;
}

static uint64_t rng = 0x1234567;

static float frand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (float)((rng >> 11) / 9007199254740992.0) * 8.0f - 4.0f;
}

static void test_model(const char *dir, const char *line)
{
	char model[256], pass[32], absent[512], present[512], path[1024];
	struct mi_model_opts o = { .flags = MI_MODEL_NO_NORMALIZE |
					    MI_MODEL_NO_FOLD |
					    MI_MODEL_REFERENCE };
	struct mi_model *ref = NULL, *m = NULL;
	struct mi_value in[8], out_ref[8], out[8];
	float *buf[8] = { 0 };
	int min_rw, r, nin = 0, nout;

	if (sscanf(line, "%255s %31s %d absent=%511s present=%511s", model,
		   pass, &min_rw, absent, present) != 5)
		return;
	snprintf(path, sizeof(path), "%s/%s", dir, model);
	r = mi_model_load(path, &o, &ref);
	CHECK(!r, "load: %s", mi_last_error());
	r = mi_model_load_graph(path, &o, &m);
	CHECK(!r, "load: %s", mi_last_error());

	r = apply(&m->g, pass);
	CHECK(r >= 0, "pass %s failed: %s", pass, m->g.err);
	if (min_rw)
		CHECK(r >= min_rw, "pass %s made %d rewrites, expected >= %d",
		      pass, r, min_rw);
	else
		CHECK(r == 0, "pass %s made %d rewrites, expected none", pass,
		      r);
	r = mi_graph_dead_nodes(&m->g);
	CHECK(r >= 0, "dead-node elimination failed: %s", m->g.err);
	if (strcmp(absent, "-"))
		for (char *s = strtok(absent, ","); s; s = strtok(NULL, ","))
			CHECK(!count_op(&m->g, s), "%s still present", s);
	if (strcmp(present, "-"))
		for (char *s = strtok(present, ","); s; s = strtok(NULL, ","))
			CHECK(count_op(&m->g, s), "%s missing", s);

	/* same results before and after */
	nin = mi_model_input_count(ref);
	nout = mi_model_output_count(ref);
	CHECK(nin <= 8 && nout <= 8, "too many inputs/outputs");
	for (int i = 0; i < nin; i++) {
		struct mi_tensor_info ti;
		int64_t n = 1;

		mi_model_input_info(ref, i, &ti);
		memset(&in[i], 0, sizeof(in[i]));
		in[i].dtype = ti.dtype;
		in[i].ndim = ti.ndim;
		for (int d = 0; d < ti.ndim; d++) {
			in[i].dims[d] = ti.dims[d] < 0 ? 3 : ti.dims[d];
			n *= in[i].dims[d];
		}
		buf[i] = malloc(n * sizeof(float));
		for (int64_t k = 0; k < n; k++)
			buf[i][k] = frand();
		in[i].data = buf[i];
		in[i].nbytes = n * sizeof(float);
	}
	r = mi_model_run(ref, in, nin, out_ref, nout);
	CHECK(!r, "run (unnormalized): %s", mi_last_error());
	r = mi_model_run(m, in, nin, out, nout);
	CHECK(!r, "run (after %s): %s", pass, mi_last_error());
	for (int i = 0; i < nout; i++) {
		int64_t n = out_ref[i].nbytes / sizeof(float);
		double maxref = 0, maxerr = 0;

		CHECK(out[i].nbytes == out_ref[i].nbytes &&
			      out[i].ndim == out_ref[i].ndim &&
			      !strcmp(out[i].name, out_ref[i].name),
		      "output %d differs in shape or name ('%s' vs '%s')", i,
		      out[i].name, out_ref[i].name);
		for (int64_t k = 0; k < n; k++) {
			double a = ((float *)out[i].data)[k];
			double b = ((float *)out_ref[i].data)[k];

			maxref = fmax(maxref, fabs(b));
			maxerr = fmax(maxerr, fabs(a - b));
		}
		CHECK(maxerr <= 1e-5 * fmax(maxref, 1.0),
		      "output %d: max error %.3g (max |ref| %.3g)", i, maxerr,
		      maxref);
	}
	printf("ok   %s (%s)\n", model, pass);
out:
	for (int i = 0; i < 8; i++)
		free(buf[i]);
	mi_model_free(ref);
	mi_model_free(m);
}

int main(int argc, char **argv)
{
	char path[1024], line[2048];
	FILE *f;
	int n = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: test-passes DIR\n");
		return 2;
	}
	snprintf(path, sizeof(path), "%s/manifest.txt", argv[1]);
	f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, "test-passes: %s: %s\n", path, strerror(errno));
		return 1;
	}
	while (fgets(line, sizeof(line), f)) {
		test_model(argv[1], line);
		n++;
	}
	fclose(f);
	printf("test-passes: %d models, %d failed\n", n, failures);
	return failures || !n;
}
