// SPDX-License-Identifier: MIT
/*
 * Hardware intents in the plan search (lib/plan/intent.c), host only,
 * the CPU (make check-tune).
 *
 *   test-intent FP32.onnx [INT8.onnx]
 *
 * FP32 is a model whose default plan runs blocked (NCHWc) convolutions
 * into NCHW Concats (SqueezeNet: a fire module is squeeze, expand1x1,
 * expand3x3, Concat); the region is the first such module.
 *   - bad intents: one error naming the kind, option, node, key; the
 *     model still runs,
 *   - MEMORY_CONSTRAINED on the region: the tuned plan's predicted
 *     region peak is below the default's; with max_mem below the
 *     default's peak the default is not eligible and every eligible
 *     candidate is within it; an impossible max_mem is -EDOM,
 *   - LATENCY_CRITICAL on the same region, weighted above the memory
 *     intent, changes the choice back to a faster, larger plan (the
 *     trade-off of blocked direct convs against NCHW ones),
 *   - layout=NCHW on the region: the default is not eligible, the tuned
 *     model's region writes NCHW (three nodes must change together),
 *   - POWER_SENSITIVE weighted far above latency: the tuned plan's
 *     energy estimate is not above the default's,
 *   - precisions: int8 on an fp32 node is -EDOM naming it; fp32 on the
 *     whole fp32 model keeps every node fp32; on INT8 (quantized), int8
 *     on every node prunes the fp32 fallbacks and the tuned plan keeps
 *     every int8 node int8.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <metainfer/metainfer.h>

#include "internal.h"
#include "plan/plan-impl.h"
#include "plan/search-impl.h"
#include "tests/check.h"

static struct mi_model *load(const char *path, uint32_t flags)
{
	struct mi_model_opts o = { .flags = flags, .nthreads = 1 };
	struct mi_model *m = NULL;

	if (mi_model_load(path, &o, &m)) {
		printf("FAIL load %s: %s\n", path, mi_last_error());
		fails++;
		return NULL;
	}
	return m;
}

static int run1(struct mi_model *m)
{
	struct mi_value in[8] = { 0 }, out[8];
	int n = mi_model_input_count(m), err;

	for (int i = 0; i < n && i < 8; i++) {
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
	}
	err = mi_model_run(m, in, n, out, 0);
	for (int i = 0; i < n && i < 8; i++)
		free(in[i].data);
	return err;
}

static void opts(struct mi_search_opts *o, const char *const *iv, int n)
{
	memset(o, 0, sizeof(*o));
	o->w[0] = 1;
	o->w[2] = 1;
	o->top = 3;
	o->runs = 5;
	o->seed = 7;
	o->intents = iv;
	o->nintents = n;
}

/* One search with the intents given; prints its region figures. */
static int search(struct mi_model *m, const char *what, const char *const *iv,
		  int n, struct mi_search_result *r)
{
	struct mi_search_opts o;
	int err;

	opts(&o, iv, n);
	err = mi_search_run(m, &o, r);
	if (err)
		return err;
	printf("     %s: %d groups, %ld scored, %ld pruned; tuned cand %d of %d, %.3f ms measured (default %.3f ms)",
	       what, r->ngroups, r->evaluated, r->pruned, r->best, r->ncand,
	       r->cand[r->best].meas_ns / 1e6, r->cand[0].meas_ns / 1e6);
	for (int i = 0; i < r->intents.n; i++)
		printf(", %s %.4g -> %.4g", r->intents.v[i].name,
		       r->cand[0].ival[i], r->cand[r->best].ival[i]);
	printf("\n");
	return 0;
}

/* The region: the first Concat whose three producers precede it. */
static int fire_region(struct mi_model *m, char *reg, size_t len)
{
	struct mi_plan *p;
	int err = mi_model_plan_get(m, &p);

	if (err)
		return err;
	err = -ENOENT;
	for (int i = 4; i < p->n; i++)
		if (!strcmp(p->e[i].op, "Concat") &&
		    !strcmp(p->e[i - 3].op, "Conv")) {
			snprintf(reg, len, "%s..%s", p->e[i - 3].name,
				 p->e[i].name);
			err = 0;
			break;
		}
	mi_plan_free(p);
	return err;
}

static void expect_einval(struct mi_model *m, const char *spec,
			  const char *needle)
{
	const char *iv[1] = { spec };
	struct mi_search_result r;
	int err;

	err = search(m, spec, iv, 1, &r);
	CHECK(err == -EINVAL, "'%s': expected -EINVAL, got %d", spec, err);
	CHECK(strstr(mi_last_error(), needle) && !strchr(mi_last_error(), '\n'),
	      "'%s': message '%s' lacks '%s'", spec, mi_last_error(), needle);
	mi_search_result_fini(&r);
}

static void check_errors(struct mi_model *m, const char *reg)
{
	char spec[512];
	const char *dd = strstr(reg, "..");

	expect_einval(m, "a=FAST:*", "unknown intent 'FAST'");
	expect_einval(m, "a=MEMORY_CONSTRAINED:nosuchnode", "unknown node 'nosuchnode'");
	expect_einval(m, "a=MEMORY_CONSTRAINED:*:colour=red", "unknown option 'colour'");
	expect_einval(m, "a=LATENCY_CRITICAL:*:max_mem=1M", "max_mem is an option of MEMORY_CONSTRAINED");
	expect_einval(m, "a=POWER_SENSITIVE:*:precisions=int4", "unknown precision 'int4'");
	expect_einval(m, "a=POWER_SENSITIVE:*:layout=NC", "unknown layout 'NC'");
	expect_einval(m, "a=POWER_SENSITIVE:*:weight=-1", "bad weight");
	expect_einval(m, "a=POWER_SENSITIVE", "no nodes");
	expect_einval(m, "b@d=POWER_SENSITIVE:*", "only letters");
	/* a region given backwards */
	snprintf(spec, sizeof(spec), "a=LATENCY_CRITICAL:%s..%.*s", dd + 2,
		 (int)(dd - reg), reg);
	expect_einval(m, spec, "ends before it starts");
	CHECK(!run1(m), "the model does not run after bad intents");
}

static void check_memory(struct mi_model *m, const char *reg)
{
	char mem[512], lat[512], lim[512];
	const char *iv[2] = { mem, lat };
	struct mi_search_result r, r2;
	double peak0, peak;
	int err;

	snprintf(mem, sizeof(mem), "mem=MEMORY_CONSTRAINED:%s:weight=20", reg);
	err = search(m, "MEMORY_CONSTRAINED", iv, 1, &r);
	CHECK(!err, "memory intent: %s", mi_last_error());
	if (err)
		return;
	peak0 = r.cand[0].ival[0];
	peak = r.cand[r.best].ival[0];
	CHECK(r.intents.n == 1 && r.intents.v[0].nnodes == 4,
	      "the region has %d nodes, expected 4",
	      r.intents.n ? r.intents.v[0].nnodes : -1);
	CHECK(peak < peak0, "MEMORY_CONSTRAINED: tuned region peak %.0f is not below the default's %.0f",
	      peak, peak0);
	CHECK(r.cand[r.best].feasible, "winner not feasible");
	mi_search_result_fini(&r);

	/* the trade-off: latency of the same region weighted far above */
	snprintf(lat, sizeof(lat), "lat=LATENCY_CRITICAL:%s:weight=2000", reg);
	err = search(m, "MEMORY_CONSTRAINED + LATENCY_CRITICAL", iv, 2, &r2);
	CHECK(!err, "latency intent: %s", mi_last_error());
	if (!err) {
		CHECK(r2.cand[r2.best].ival[0] > peak,
		      "LATENCY_CRITICAL did not change the choice: region peak %.0f, memory-only %.0f",
		      r2.cand[r2.best].ival[0], peak);
		CHECK(r2.cand[r2.best].meas_ns <= r2.cand[0].meas_ns * 1.02 ||
		      r2.best == 0, "LATENCY_CRITICAL winner %.3f ms slower than the default %.3f ms",
		      r2.cand[r2.best].meas_ns / 1e6, r2.cand[0].meas_ns / 1e6);
		mi_search_result_fini(&r2);
	}

	/* a hard region limit below the default's peak */
	snprintf(lim, sizeof(lim), "mem=MEMORY_CONSTRAINED:%s:max_mem=%.0f", reg,
		 peak0 * 0.95);
	iv[0] = lim;
	err = search(m, "max_mem 95% of the default", iv, 1, &r);
	CHECK(!err, "max_mem %.0f: %s", peak0 * 0.95, mi_last_error());
	if (!err) {
		CHECK(!r.cand[0].feasible && strstr(r.cand[0].why, "max_mem"),
		      "the default (%.0f B) is eligible under max_mem %.0f: '%s'",
		      r.cand[0].ival[0], peak0 * 0.95, r.cand[0].why);
		CHECK(r.best > 0, "the default won under a limit it breaks");
		for (int i = 0; i < r.ncand; i++)
			if (r.cand[i].feasible)
				CHECK(r.cand[i].ival[0] <= peak0 * 0.95,
				      "candidate %d region %.0f > max_mem %.0f",
				      i, r.cand[i].ival[0], peak0 * 0.95);
		mi_search_result_fini(&r);
	}
	snprintf(lim, sizeof(lim), "mem=MEMORY_CONSTRAINED:%s:max_mem=1k", reg);
	err = search(m, "max_mem 1k", iv, 1, &r);
	CHECK(err == -EDOM && strstr(mi_last_error(), "max_mem"),
	      "max_mem 1k: expected -EDOM naming max_mem, got %d '%s'", err,
	      mi_last_error());
	CHECK(!run1(m), "the model does not run after an infeasible search");
	mi_search_result_fini(&r);
}

/* POWER_SENSITIVE weighted far above latency never picks a plan whose
 * energy estimate is above the default's. */
static void check_power(struct mi_model *m)
{
	const char *iv[1] = { "pow=POWER_SENSITIVE:*:weight=2000" };
	struct mi_search_result r;
	int err;

	err = search(m, "POWER_SENSITIVE", iv, 1, &r);
	CHECK(!err, "power intent: %s", mi_last_error());
	if (err)
		return;
	CHECK(r.cand[0].ival[0] > 0, "energy estimate %g", r.cand[0].ival[0]);
	CHECK(r.cand[r.best].ival[0] <= r.cand[0].ival[0],
	      "POWER_SENSITIVE: tuned %.4g pJ above the default's %.4g",
	      r.cand[r.best].ival[0], r.cand[0].ival[0]);
	mi_search_result_fini(&r);
}

/*
 * layout=NCHW on the region: the default's blocked convs break it (one
 * node changed alone still does: the beam must keep such states), the
 * tuned model's region nodes all write NCHW.
 */
static void check_layout(struct mi_model *m, const char *reg)
{
	char spec[512];
	const char *iv[1] = { spec };
	struct mi_search_result r;
	struct mi_plan *p;
	int err, bad = 0, n = 0;

	snprintf(spec, sizeof(spec), "l=LATENCY_CRITICAL:%s:layout=NCHW,weight=1",
		 reg);
	err = search(m, "layout=NCHW", iv, 1, &r);
	CHECK(!err, "layout=NCHW: %s", mi_last_error());
	if (err)
		return;
	CHECK(!r.cand[0].feasible && strstr(r.cand[0].why, "prefers NCHW"),
	      "the blocked default is eligible under layout=NCHW: '%s'",
	      r.cand[0].why);
	if (!mi_model_plan_get(m, &p)) {
		for (int i = 0; i < p->n; i++)
			if (mi_intent_has(&r.intents.v[0], p->e[i].name)) {
				n++;
				bad += strcmp(p->e[i].lay_out, "NCHW") != 0;
			}
		mi_plan_free(p);
	}
	CHECK(n == 4 && !bad, "layout=NCHW: %d of %d region nodes write another layout",
	      bad, n);
	mi_search_result_fini(&r);
}

/* Every node the tuned model runs has a precision prec allows. */
static int count_prec(struct mi_model *m, const char *prec)
{
	struct mi_plan *p;
	int n = 0;

	if (mi_model_plan_get(m, &p))
		return -1;
	for (int i = 0; i < p->n; i++)
		n += p->e[i].precision && !strcmp(p->e[i].precision, prec);
	mi_plan_free(p);
	return n;
}

static void check_precisions(struct mi_model *m, const char *reg,
			     const char *int8_path)
{
	const char *iv[1];
	char spec[4096];
	struct mi_search_result r, r0;
	struct mi_model *q;
	const char *dd = strstr(reg, "..");
	int err, n8;

	snprintf(spec, sizeof(spec), "p=LATENCY_CRITICAL:%.*s:precisions=int8",
		 (int)(dd - reg), reg);
	iv[0] = spec;
	err = search(m, "int8 on an fp32 conv", iv, 1, &r);
	CHECK(err == -EDOM && strstr(mi_last_error(), "runs fp32, intent 'p' allows int8"),
	      "int8 on an fp32 node: expected -EDOM naming it, got %d '%s'",
	      err, mi_last_error());
	mi_search_result_fini(&r);
	iv[0] = "p=POWER_SENSITIVE:*:precisions=fp32";
	err = search(m, "fp32 everywhere", iv, 1, &r);
	CHECK(!err && count_prec(m, "int8") == 0,
	      "fp32 everywhere: %d, %d int8 nodes", err, count_prec(m, "int8"));
	mi_search_result_fini(&r);
	if (!int8_path)
		return;
	q = load(int8_path, MI_MODEL_PROFILE);
	if (!q)
		return;
	err = search(q, "int8 model, no intent", NULL, 0, &r0);
	CHECK(!err, "int8 model: %s", mi_last_error());
	n8 = count_prec(q, "int8");
	iv[0] = "p=LATENCY_CRITICAL:*:precisions=int8+fp32";
	err = err ? err : search(q, "int8+fp32 everywhere", iv, 1, &r);
	CHECK(!err && r.pruned == r0.pruned,
	      "int8+fp32 (no limit) pruned %ld, without intents %ld", r.pruned,
	      r0.pruned);
	if (!err)
		mi_search_result_fini(&r);
	/* int8 on the nodes that run int8 (their fp32 fallbacks pruned) */
	{
		struct mi_plan *p;
		char *s = spec;
		size_t left = sizeof(spec);
		int nq = 0;

		if (!mi_model_plan_reset(q) && !mi_model_plan_get(q, &p)) {
			int k = snprintf(s, left, "p=LATENCY_CRITICAL:");

			for (int i = 0; i < p->n && k > 0 && (size_t)k < left; i++)
				if (p->e[i].precision &&
				    !strcmp(p->e[i].precision, "int8")) {
					s += k;
					left -= k;
					k = snprintf(s, left, "%s%s", nq++ ? "+" : "",
						     p->e[i].name);
				}
			if (k > 0 && (size_t)k < left)
				snprintf(s + k, left - k, ":precisions=int8");
			mi_plan_free(p);
		}
		iv[0] = spec;
		err = nq ? search(q, "int8 on the int8 nodes", iv, 1, &r) : -ENOENT;
		CHECK(!err, "int8 on %d int8 nodes: %d %s", nq, err,
		      mi_last_error());
		if (!err) {
			CHECK(r.pruned > r0.pruned,
			      "precisions=int8 pruned %ld states, without it %ld",
			      r.pruned, r0.pruned);
			CHECK(count_prec(q, "int8") == n8,
			      "tuned runs %d int8 nodes, the default %d",
			      count_prec(q, "int8"), n8);
			mi_search_result_fini(&r);
		}
	}
	mi_search_result_fini(&r0);
	mi_model_free(q);
}

int main(int argc, char **argv)
{
	struct mi_model *m;
	char reg[400];
	double t0 = now_s();

	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: test-intent FP32.onnx [INT8.onnx]\n");
		return 2;
	}
	m = load(argv[1], MI_MODEL_PROFILE);
	if (!m)
		return 1;
	CHECK(!run1(m), "%s does not run", argv[1]);
	if (fire_region(m, reg, sizeof(reg))) {
		printf("FAIL %s: no Conv x3 + Concat region\n", argv[1]);
		mi_model_free(m);
		return 1;
	}
	printf("     region %s\n", reg);
	check_errors(m, reg);
	check_memory(m, reg);
	check_power(m);
	check_layout(m, reg);
	check_precisions(m, reg, argc > 2 ? argv[2] : NULL);
	mi_model_free(m);
	printf("test-intent: %d checks, %d failed, %.1f s\n", checks, fails,
	       now_s() - t0);
	return fails ? 1 : 0;
}
