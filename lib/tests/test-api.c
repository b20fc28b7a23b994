// SPDX-License-Identifier: GPL-2.0-only
/*
 * Public API behaviour: argument and option checking, input/output
 * descriptions, symbolic batch re-planning (batch 3 == three batch-1 runs),
 * inputs by name, load from memory, Shape-chain and data-dependent shapes,
 * arena planning, and that steady-state inference does no heap allocation
 * (malloc/calloc/realloc/aligned_alloc are counted through glibc's
 * replaceable allocator).
 *
 *   test-api DIR    (DIR from gen_pass_models.py)
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---- allocation counter ---------------------------------------------- */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static volatile int counting;
static long nallocs;

void *malloc(size_t n)
{
	if (counting)
		__atomic_add_fetch(&nallocs, 1, __ATOMIC_RELAXED);
	return __libc_malloc(n);
}

void *calloc(size_t a, size_t b)
{
	if (counting)
		__atomic_add_fetch(&nallocs, 1, __ATOMIC_RELAXED);
	return __libc_calloc(a, b);
}

void *realloc(void *p, size_t n)
{
	if (counting)
		__atomic_add_fetch(&nallocs, 1, __ATOMIC_RELAXED);
	return __libc_realloc(p, n);
}

void *aligned_alloc(size_t al, size_t n)
{
	if (counting)
		__atomic_add_fetch(&nallocs, 1, __ATOMIC_RELAXED);
	return __libc_memalign(al, n);
}

void *memalign(size_t al, size_t n)
{
	if (counting)
		__atomic_add_fetch(&nallocs, 1, __ATOMIC_RELAXED);
	return __libc_memalign(al, n);
}

int posix_memalign(void **p, size_t al, size_t n)
{
	if (counting)
		__atomic_add_fetch(&nallocs, 1, __ATOMIC_RELAXED);
	*p = __libc_memalign(al, n);
	return *p ? 0 : ENOMEM;
}

void free(void *p)
{
	__libc_free(p);
}

/* ---- helpers ----------------------------------------------------------- */
static int failures;
static const char *dir;

#define CHECK(cond, ...)                                                   \
	do {                                                               \
		if (!(cond)) {                                             \
			printf("FAIL %s:%d: ", __func__, __LINE__);       \
			printf(__VA_ARGS__);                               \
			printf("\n");                                      \
			failures++;                                        \
			return;                                            \
		}                                                          \
	} while (0)

static void path_of(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", dir, name);
}

static void fill(float *p, int64_t n, unsigned seed)
{
	uint64_t s = seed * 0x9E3779B97F4A7C15ull + 7;

	for (int64_t i = 0; i < n; i++) {
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		p[i] = (float)((s >> 11) / 9007199254740992.0) * 2 - 1;
	}
}

static struct mi_value fval(float *p, int ndim, const int64_t *dims)
{
	struct mi_value v = { .dtype = MI_DT_FLOAT, .ndim = ndim, .data = p };
	int64_t n = 1;

	for (int i = 0; i < ndim; i++) {
		v.dims[i] = dims[i];
		n *= dims[i];
	}
	v.nbytes = n * sizeof(float);
	return v;
}

/* ---- tests --------------------------------------------------------------- */

static void test_errors(void)
{
	struct mi_model_opts o = { 0 };
	struct mi_model *m = NULL;
	char p[512];
	int r;

	r = mi_model_load(NULL, NULL, &m);
	CHECK(r == -EINVAL, "NULL path: %d", r);
	path_of(p, sizeof(p), "api_net.onnx");
	o.flags = 1u << 30;
	r = mi_model_load(p, &o, &m);
	CHECK(r == -EINVAL && !m, "unknown flag: %d", r);
	CHECK(strstr(mi_last_error(), "flags"), "message: %s", mi_last_error());
	o.flags = 0;
	o.reserved[1] = 1;
	r = mi_model_load(p, &o, &m);
	CHECK(r == -EINVAL, "reserved: %d", r);
	path_of(p, sizeof(p), "no-such-model.onnx");
	r = mi_model_load(p, NULL, &m);
	CHECK(r == -ENOENT && !m, "missing file: %d", r);
	CHECK(strstr(mi_last_error(), "no-such-model.onnx: cannot read"),
	      "message: %s", mi_last_error());
	r = mi_model_load_buffer("garbage!", 8, NULL, "mem", NULL, &m);
	CHECK(r == -EINVAL && !m, "garbage buffer: %d", r);
	CHECK(!strncmp(mi_last_error(), "mem: ", 5), "message: %s",
	      mi_last_error());
	printf("ok   errors\n");
}

static void test_info_and_batch(void)
{
	struct mi_model *m = NULL;
	struct mi_tensor_info ii, oi;
	float x[3 * 3 * 16 * 16], y1[3][10];
	struct mi_value in, out;
	char p[512];
	int r;

	path_of(p, sizeof(p), "api_net.onnx");
	r = mi_model_load(p, NULL, &m);
	CHECK(!r, "load: %s", mi_last_error());
	CHECK(mi_model_input_count(m) == 1 && mi_model_output_count(m) == 1,
	      "counts");
	CHECK(!mi_model_input_info(m, 0, &ii) && !strcmp(ii.name, "x") &&
		      ii.ndim == 4 && ii.dims[0] == -1 && ii.dim_param[0] &&
		      !strcmp(ii.dim_param[0], "N") && ii.dims[1] == 3,
	      "input info");
	CHECK(!mi_model_output_info(m, 0, &oi) && !strcmp(oi.name, "y"),
	      "output info");
	CHECK(mi_model_input_info(m, 1, &ii) == -EINVAL, "index check");
	/* no BatchNormalization left after normalization */
	for (int i = 0; i < m->g.nnodes; i++)
		CHECK(m->g.nodes[i].dead ||
			      strcmp(m->g.nodes[i].op_type, "BatchNormalization"),
		      "BatchNormalization not folded");
	fill(x, 3 * 3 * 16 * 16, 1);
	/* three batch-1 runs */
	for (int b = 0; b < 3; b++) {
		int64_t d[4] = { 1, 3, 16, 16 };

		in = fval(x + b * 3 * 16 * 16, 4, d);
		r = mi_model_run(m, &in, 1, &out, 1);
		CHECK(!r, "run b=1: %s", mi_last_error());
		CHECK(out.ndim == 2 && out.dims[0] == 1 && out.dims[1] == 10,
		      "output shape");
		memcpy(y1[b], out.data, sizeof(y1[b]));
	}
	/* one batch-3 run (re-plans) must agree */
	int64_t d3[4] = { 3, 3, 16, 16 };

	in = fval(x, 4, d3);
	r = mi_model_run(m, &in, 1, &out, 1);
	CHECK(!r, "run b=3: %s", mi_last_error());
	CHECK(out.dims[0] == 3 && out.nbytes == sizeof(y1), "batch-3 shape");
	for (int i = 0; i < 30; i++) {
		float a = ((float *)out.data)[i], b = y1[i / 10][i % 10];

		CHECK(fabsf(a - b) <= 1e-5f * (1 + fabsf(b)),
		      "batch 3 differs from batch 1 at %d: %g vs %g", i, a, b);
	}
	/* bad inputs */
	int64_t bad[4] = { 1, 4, 16, 16 };

	in = fval(x, 4, bad);
	r = mi_model_run(m, &in, 1, &out, 1);
	CHECK(r == -EINVAL && strstr(mi_last_error(), "dim 1 is 4"),
	      "wrong dim: %d %s", r, mi_last_error());
	in = fval(x, 4, d3);
	in.nbytes -= 4;
	r = mi_model_run(m, &in, 1, &out, 1);
	CHECK(r == -EINVAL, "wrong nbytes: %d", r);
	in = fval(x, 4, d3);
	in.dtype = MI_DT_INT32;
	r = mi_model_run(m, &in, 1, &out, 1);
	CHECK(r == -EINVAL && strstr(mi_last_error(), "int32"), "wrong dtype");
	in = fval(x, 4, d3);
	in.name = "nope";
	r = mi_model_run(m, &in, 1, &out, 1);
	CHECK(r == -ENOENT, "unknown name: %d", r);
	in.name = "x";
	r = mi_model_run(m, &in, 1, &out, 1);
	CHECK(!r, "by name: %s", mi_last_error());
	r = mi_model_run(m, &in, 1, &out, 2);
	CHECK(r == -EINVAL, "too many outputs: %d", r);
	r = mi_model_run(m, NULL, 0, &out, 1);
	CHECK(r == -EINVAL && strstr(mi_last_error(), "missing"),
	      "missing input: %d", r);
	mi_model_free(m);
	printf("ok   info, batch re-planning, input checks\n");
}

static void test_no_malloc(int threads)
{
	struct mi_model_opts o = { .nthreads = threads };
	struct mi_model *m = NULL;
	float x[2 * 3 * 16 * 16];
	int64_t d[4] = { 2, 3, 16, 16 };
	struct mi_value in, out;
	size_t acts = 0;
	char p[512];
	int r;

	path_of(p, sizeof(p), "api_net.onnx");
	r = mi_model_load(p, &o, &m);
	CHECK(!r, "load: %s", mi_last_error());
	fill(x, 2 * 3 * 16 * 16, 2);
	in = fval(x, 4, d);
	r = mi_model_run(m, &in, 1, &out, 1); /* plans for batch 2 */
	CHECK(!r, "run: %s", mi_last_error());
	/* the arena reuses memory: smaller than all activations together */
	for (int i = 0; i < m->g.ntensors; i++)
		if (m->g.tensors[i].flags & MI_TF_ARENA)
			acts += m->g.tensors[i].nbytes;
	CHECK(m->arena_peak > 0 && m->arena_peak < acts,
	      "arena %zu bytes for %zu bytes of activations", m->arena_peak,
	      acts);
	nallocs = 0;
	counting = 1;
	for (int i = 0; i < 5 && !r; i++)
		r = mi_model_run(m, &in, 1, &out, 1);
	counting = 0;
	CHECK(!r, "run: %s", mi_last_error());
	CHECK(nallocs == 0, "%ld heap allocations in 5 steady-state runs (%d threads)",
	      nallocs, threads);
	size_t peak = m->arena_peak;

	/* the counter works: a new batch size re-plans, which allocates */
	d[0] = 1;
	in = fval(x, 4, d);
	nallocs = 0;
	counting = 1;
	r = mi_model_run(m, &in, 1, &out, 1);
	counting = 0;
	CHECK(!r && nallocs > 0, "re-planning run counted %ld allocations",
	      nallocs);

	mi_model_free(m);
	printf("ok   steady state does no heap allocation (%d thread%s; arena %zu of %zu activation bytes)\n",
	       threads, threads == 1 ? "" : "s", peak, acts);
}

/* MI_MODEL_PROFILE: every node timed once per run, no steady-state
 * allocation, reset, and the API refuses models loaded without it. */
static void test_profile(void)
{
	struct mi_model_opts o = { .nthreads = 1, .flags = MI_MODEL_PROFILE };
	struct mi_model *m = NULL;
	float x[2 * 3 * 16 * 16];
	int64_t d[4] = { 2, 3, 16, 16 };
	struct mi_node_profile np;
	struct mi_value in, out;
	uint64_t ns = 0, nmin = 0, mn;
	char p[512];
	int r, n;

	path_of(p, sizeof(p), "api_net.onnx");
	r = mi_model_load(p, NULL, &m);
	CHECK(!r, "load: %s", mi_last_error());
	CHECK(mi_model_profile_count(m) == 0 &&
	      mi_model_profile(m, 0, &np) == -EINVAL &&
	      mi_model_profile_min(m, 0, &mn) == -EINVAL,
	      "profile without MI_MODEL_PROFILE");
	mi_model_free(m);
	r = mi_model_load(p, &o, &m);
	CHECK(!r, "load: %s", mi_last_error());
	fill(x, 2 * 3 * 16 * 16, 3);
	in = fval(x, 4, d);
	r = mi_model_run(m, &in, 1, &out, 1);
	CHECK(!r, "run: %s", mi_last_error());
	mi_model_profile_reset(m);
	nallocs = 0;
	counting = 1;
	for (int i = 0; i < 3 && !r; i++)
		r = mi_model_run(m, &in, 1, &out, 1);
	counting = 0;
	CHECK(!r, "run: %s", mi_last_error());
	CHECK(nallocs == 0, "%ld heap allocations while profiling", nallocs);
	n = mi_model_profile_count(m);
	CHECK(n > 0 && n == m->g.norder, "%d profiled nodes, %d in order", n,
	      m->g.norder);
	for (int i = 0; i < n; i++) {
		r = mi_model_profile(m, i, &np);
		CHECK(!r && np.op_type && np.name, "node %d", i);
		CHECK(np.calls == 3, "node %d (%s) ran %llu times, expected 3", i,
		      np.op_type, (unsigned long long)np.calls);
		ns += np.ns;
		/* the fastest of 3 runs is at most their mean */
		r = mi_model_profile_min(m, i, &mn);
		CHECK(!r && mn * 3 <= np.ns,
		      "node %d (%s): min %llu ns of 3 runs totalling %llu", i, np.op_type,
		      (unsigned long long)mn, (unsigned long long)np.ns);
		nmin += mn;
	}
	CHECK(ns > 0 && nmin > 0, "no time recorded");
	CHECK(mi_model_profile(m, n, &np) == -ENOENT &&
	      mi_model_profile(m, -1, &np) == -ENOENT &&
	      mi_model_profile_min(m, n, &mn) == -ENOENT &&
	      mi_model_profile_min(m, -1, &mn) == -ENOENT, "index out of range");
	mi_model_profile_reset(m);
	r = mi_model_profile(m, 0, &np);
	CHECK(!r && np.calls == 0 && np.ns == 0, "reset");
	mn = 1;
	r = mi_model_profile_min(m, 0, &mn);
	CHECK(!r && mn == 0, "reset: min %llu", (unsigned long long)mn);
	/* one run after the reset: its time is both the sum and the min */
	r = mi_model_run(m, &in, 1, &out, 1);
	CHECK(!r, "run: %s", mi_last_error());
	for (int i = 0; i < n; i++) {
		r = mi_model_profile(m, i, &np) || mi_model_profile_min(m, i, &mn);
		CHECK(!r && np.calls == 1 && mn == np.ns, "node %d: one run: min %llu, sum %llu",
		      i, (unsigned long long)mn, (unsigned long long)np.ns);
	}
	mi_model_free(m);
	printf("ok   per-node profile (%d nodes)\n", n);
}

static void test_buffer_and_shape_chain(void)
{
	struct mi_model *m = NULL;
	float x[3 * 16], *y;
	struct mi_value in, out;
	char p[512];
	void *buf;
	size_t len;
	int r;

	path_of(p, sizeof(p), "api_shape.onnx");
	r = mi_read_file(p, 1 << 20, &buf, &len);
	CHECK(!r, "read");
	r = mi_model_load_buffer(buf, len, NULL, "api_shape", NULL, &m);
	free(buf);
	CHECK(!r, "load_buffer: %s", mi_last_error());
	for (int b = 1; b <= 3; b += 2) {
		int64_t d[4] = { b, 4, 2, 2 };

		fill(x, b * 16, b);
		in = fval(x, 4, d);
		r = mi_model_run(m, &in, 1, &out, 1);
		CHECK(!r, "run: %s", mi_last_error());
		CHECK(out.ndim == 2 && out.dims[0] == b && out.dims[1] == 16,
		      "shape [%lld,%lld]", (long long)out.dims[0],
		      (long long)out.dims[1]);
		y = out.data;
		for (int i = 0; i < b * 16; i++)
			CHECK(y[i] == (x[i] > 0 ? x[i] : 0), "value %d", i);
	}
	/* the Reshape saw a planned (not run-time) shape, and as a view of
	 * the input it shares the caller's buffer instead of copying */
	for (int i = 0; i < m->g.nnodes; i++)
		if (!strcmp(m->g.nodes[i].op_type, "Reshape")) {
			struct mi_node *n = &m->g.nodes[i];

			CHECK(m->node_state[i] == MI_NS_ALIAS,
			      "Reshape is not a planned view (state %d)",
			      m->node_state[i]);
			CHECK(m->g.tensors[n->outputs[0]].data == x,
			      "Reshape output does not alias its input");
		}
	mi_model_free(m);
	printf("ok   load from memory, Shape-chain planning\n");
}

static void test_dynamic(void)
{
	struct mi_model *m = NULL;
	float x[8];
	int64_t d[1] = { 8 };
	struct mi_value in, out;
	char p[512];
	int r;

	path_of(p, sizeof(p), "api_dyn.onnx");
	r = mi_model_load(p, NULL, &m);
	CHECK(!r, "load: %s", mi_last_error());
	for (int k = 0; k <= 8; k += 4) {
		for (int i = 0; i < 8; i++)
			x[i] = i < k ? 1.0f + i : -1.0f;
		in = fval(x, 1, d);
		r = mi_model_run(m, &in, 1, &out, 1);
		CHECK(!r, "run: %s", mi_last_error());
		CHECK(out.ndim == 2 && out.dims[0] == 1 && out.dims[1] == k,
		      "NonZero count %lld, expected %d",
		      (long long)out.dims[1], k);
		for (int i = 0; i < k; i++)
			CHECK(((float *)out.data)[i] == i + 1.0f, "index %d", i);
	}
	mi_model_free(m);
	printf("ok   data-dependent shapes\n");
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: test-api DIR\n");
		return 2;
	}
	dir = argv[1];
	test_errors();
	test_info_and_batch();
	test_no_malloc(1);
	test_no_malloc(2);
	test_profile();
	test_buffer_and_shape_chain();
	test_dynamic();
	printf("test-api: %d failed\n", failures);
	return failures != 0;
}
