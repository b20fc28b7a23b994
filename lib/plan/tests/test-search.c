// SPDX-License-Identifier: MIT
/*
 * Plan search (lib/plan/search.c), host only.
 *
 * --check (make check-tune): on every fp32 model given (the CPU) and on
 * every ".int8." model (the CPU plus two emulated accelerators with seeded
 * random timing personalities, one without LUT):
 *   - the default plan is candidate 0 and is measured,
 *   - the tuned plan is never slower than the default on the
 *     verification runs and loads back into a fresh model,
 *   - hard limits are never violated: an impossible --max-mem gives
 *     -EDOM and leaves the model running its default plan; every
 *     candidate of a feasible memory limit is within it; a --min-cosine
 *     winner meets it,
 *   - determinism: with a (synthetic, fitted) predictor and no timing
 *     input, two searches give the same candidates and scores.
 *
 * --bench (make bench-tune): tuned vs default measured (interleaved
 * re-runs of fresh loads after the search, best of 7 x 3; a search that
 * kept the default plan counts 1.000x without re-running the same plan)
 * on the CPU at the thread counts given and on emulated multi-device
 * setups, and the summary table.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <metainfer/metainfer.h>

#include "internal.h"
#include "device/device.h"
#include "plan/plan-impl.h"
#include "plan/search-impl.h"
#include "predict/predict.h"
#include "tests/check.h"

static struct mi_dev *emu[2];

/* npu0: NHWC, every op; npu1: NCHW, no LUT (as tools/hetero). */
static int emu_setup(void)
{
	const uint64_t all_ops = ((1ull << DRM_METAINFER_OP_COUNT) - 1) & ~1ull;
	const uint64_t dtypes = (1ull << DRM_METAINFER_DTYPE_INT8) |
				(1ull << DRM_METAINFER_DTYPE_UINT8) |
				(1ull << DRM_METAINFER_DTYPE_INT16) |
				(1ull << DRM_METAINFER_DTYPE_INT32);
	const uint64_t layouts = (1ull << DRM_METAINFER_LAYOUT_PLAIN) |
				 (1ull << DRM_METAINFER_LAYOUT_NCHW) |
				 (1ull << DRM_METAINFER_LAYOUT_NHWC);
	struct mi_dev_caps nhwc = {
		.op_mask = all_ops, .dtype_mask = dtypes,
		.layout_mask = layouts,
		.preferred_layout = DRM_METAINFER_LAYOUT_NHWC, .num_queues = 2,
		.sram_bytes = 512 << 10, .clock_khz = 500000,
		.macs_per_cycle = 256, .dma_bw = 500000000, .dma_burst = 128,
	};
	struct mi_dev_caps nchw = nhwc;

	nchw.op_mask &= ~(1ull << DRM_METAINFER_OP_LUT);
	nchw.preferred_layout = DRM_METAINFER_LAYOUT_NCHW;
	nchw.sram_bytes = 2 << 20;
	nchw.macs_per_cycle = 64;
	if (mi_dev_emu_add("npu0", &nhwc, &emu[0]) ||
	    mi_dev_emu_add("npu1", &nchw, &emu[1])) {
		fprintf(stderr, "emulated devices: %s\n", mi_last_error());
		return -1;
	}
	return 0;
}

/* Hidden timing parameters drawn like a held-out sim personality. */
static void emu_personalities(uint64_t seed)
{
	for (int d = 0; d < 2; d++) {
		struct mi_pred_simchip c;
		struct mi_dev_emu_timing t = { 0 };

		mi_pred_simchip_random(&c, &seed);
		t.clock_khz = (uint64_t)(c.clock_hz / 1e3);
		t.macs_per_cycle = (uint64_t)c.macs_int8;
		t.dma_bw = (uint64_t)c.dma_bw;
		t.dma_burst = (uint64_t)c.burst;
		t.sram_bytes = (uint64_t)c.sram;
		t.launch_ns = (uint64_t)c.launch_ns;
		t.dw_eff_pct = (uint32_t)c.dw_eff_pct;
		t.preferred_layout = c.nchw_preferred ?
					     DRM_METAINFER_LAYOUT_NCHW :
					     DRM_METAINFER_LAYOUT_NHWC;
		mi_dev_emu_set_timing(emu[d], &t);
	}
}

static bool is_int8(const char *path)
{
	return strstr(path, ".int8.") != NULL;
}

static struct mi_model *load(const char *path, int threads, uint32_t flags,
			     const char *devices)
{
	struct mi_model_opts o = { .flags = flags, .nthreads = threads,
				   .devices = devices };
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

/* A fitted predictor in which every variant has its own cost factor. */
static int synth_predictor(struct mi_model *m, struct mi_predictor *p)
{
	struct mi_pred_graph pg;
	struct mi_pred_sample *s = NULL;
	struct mi_pred_dev cpu;
	int n = 0, cap = 0, err;

	mi_pred_init(p);
	mi_pred_cpu_dev(&cpu, 0, 1);
	err = mi_pred_graph_build(m, p, true, &pg);
	if (err)
		return err;
	for (int k = 0; k < pg.n; k++) {
		const struct mi_plan_candidate *c;
		int nc = mi_plan_candidates(m, pg.v[k].name, &c);

		for (int i = 0; i < nc; i++) {
			uint64_t h = 5381;

			if (n == cap) {
				cap = cap ? 2 * cap : 256;
				s = realloc(s, cap * sizeof(*s));
				if (!s)
					return -ENOMEM;
			}
			for (const char *q = c[i].variant; *q; q++)
				h = h * 33 + (unsigned char)*q;
			s[n].node = pg.v[k].node;
			s[n].node.variant = mi_pred_variant(p, c[i].variant, true);
			s[n].emb = NULL;
			s[n].nemb = 0;
			s[n].caps = cpu.caps;
			s[n].dev = -1;
			s[n].ns = mi_pred_roofline(&s[n].node, &cpu.caps) *
				  (1 + 0.25 * (h % 5));
			n++;
		}
	}
	err = n ? mi_pred_fit(p, s, n, NULL) : -ENOENT;
	free(s);
	mi_pred_graph_fini(&pg);
	return err;
}

static void base_opts(struct mi_search_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->w[0] = 1;
	o->w[2] = 1;
	o->top = 3;
	o->runs = 3;
	o->seed = 7;
	o->amortize = 1e9;	/* always verify: the checks need candidates */
}

static void check_invariants(const char *what, struct mi_search_result *r,
			     const struct mi_search_opts *o)
{
	const struct mi_search_cand *b = &r->cand[r->best];

	CHECK(r->ncand >= 1, "%s: no candidates", what);
	for (int g = 0; g < r->ngroups; g++)
		CHECK(r->cand[0].choice[g] == 0,
		      "%s: candidate 0 is not the default plan", what);
	CHECK(r->cand[0].measured, "%s: the default plan was not measured: %s",
	      what, r->cand[0].why);
	CHECK(b->feasible, "%s: winner not feasible", what);
	CHECK(b->meas_ns <= r->cand[0].meas_ns,
	      "%s: tuned %.3f ms slower than default %.3f ms", what,
	      b->meas_ns / 1e6, r->cand[0].meas_ns / 1e6);
	for (int i = 0; i < r->ncand; i++) {
		const struct mi_search_cand *c = &r->cand[i];

		if (i && o->max_mem > 0)
			CHECK(c->pred_mem <= o->max_mem,
			      "%s: candidate %d needs %.0f > max-mem %.0f",
			      what, i, c->pred_mem, o->max_mem);
		if (c->feasible && o->min_cosine > 0)
			CHECK(c->cosine >= o->min_cosine,
			      "%s: feasible candidate %d cosine %.5f < %.5f",
			      what, i, c->cosine, o->min_cosine);
	}
	CHECK(r->plan != NULL, "%s: no plan", what);
}

static void check_model(const char *path, int threads)
{
	bool i8 = is_int8(path);
	const char *devs = i8 ? "npu0,npu1" : NULL;
	struct mi_model *m, *m2, *ref = NULL;
	struct mi_search_opts o;
	struct mi_search_result r, r2;
	struct mi_predictor p;
	char what[300];
	double t0 = now_s(), mem;
	int err;

	if (i8)
		emu_personalities(42);
	m = load(path, threads, MI_MODEL_PROFILE, devs);
	if (!m)
		return;
	if (i8)
		ref = load(path, threads, MI_MODEL_NO_INT8, NULL);
	base_opts(&o);
	o.ref = ref;
	if (i8)
		o.min_cosine = 0.9;
	snprintf(what, sizeof(what), "%s %s", path, i8 ? "cpu+npu0+npu1" : "cpu");
	err = mi_search_run(m, &o, &r);
	CHECK(!err, "%s: search: %s", what, mi_last_error());
	if (err)
		goto out;
	check_invariants(what, &r, &o);
	/* the tuned plan is a valid plan of the model */
	m2 = load(path, threads, 0, devs);
	if (m2) {
		err = mi_model_plan_apply(m2, r.plan);
		CHECK(!err, "%s: tuned plan does not apply to a fresh load: %s",
		      what, mi_last_error());
		CHECK(!err && !run1(m2), "%s: tuned plan does not run", what);
		mi_model_free(m2);
	}
	mem = r.cand[0].pred_mem;
	printf("ok   %s: %d groups (%d variant, %d device), %ld scored, %ld pruned, %d rejected; default %.3f ms, tuned %.3f ms (cand %d)\n",
	       what, r.ngroups, r.nvar, r.ndev, r.evaluated, r.pruned,
	       r.rejected, r.cand[0].meas_ns / 1e6, r.cand[r.best].meas_ns / 1e6,
	       r.best);
	mi_search_result_fini(&r);

	/* an impossible memory limit: -EDOM, the default plan still runs */
	o.max_mem = mem / 4;
	o.runs = 1;
	err = mi_search_run(m, &o, &r);
	CHECK(err == -EDOM, "%s: max-mem %.0f: expected -EDOM, got %d", what,
	      o.max_mem, err);
	CHECK(strstr(mi_last_error(), "no plan meets the limits"),
	      "%s: message '%s'", what, mi_last_error());
	CHECK(!run1(m), "%s: model does not run after an infeasible search",
	      what);
	mi_search_result_fini(&r);

	/* a memory limit the default just meets */
	o.max_mem = mem * 1.0001;
	err = mi_search_run(m, &o, &r);
	CHECK(!err, "%s: max-mem %.0f: %s", what, o.max_mem, mi_last_error());
	if (!err)
		check_invariants(what, &r, &o);
	mi_search_result_fini(&r);

	/* determinism: the predictor alone, twice */
	if (!synth_predictor(m, &p)) {
		base_opts(&o);
		o.pred = &p;
		o.calib = -1;
		o.runs = 1;
		o.ref = ref;
		err = mi_search_run(m, &o, &r);
		CHECK(!err, "%s: synthetic predictor: %s", what, mi_last_error());
		err = err ? err : mi_search_run(m, &o, &r2);
		CHECK(!err, "%s: synthetic predictor again: %s", what,
		      mi_last_error());
		if (!err) {
			CHECK(r.ncand == r2.ncand && r.ngroups == r2.ngroups,
			      "%s: %d vs %d candidates", what, r.ncand,
			      r2.ncand);
			for (int i = 0; i < r.ncand && i < r2.ncand; i++) {
				CHECK(r.cand[i].score == r2.cand[i].score,
				      "%s: candidate %d score %g vs %g", what, i,
				      r.cand[i].score, r2.cand[i].score);
				CHECK(!memcmp(r.cand[i].choice, r2.cand[i].choice,
					      r.ngroups * sizeof(int)),
				      "%s: candidate %d differs", what, i);
			}
			double bp = r.cand[0].pred_ns;

			for (int i = 1; i < r.ncand; i++) {
				CHECK(r.cand[i].score <= r.cand[0].score + 1e-9,
				      "%s: candidate %d scored %g, worse than the default's %g",
				      what, i, r.cand[i].score, r.cand[0].score);
				bp = fmin(bp, r.cand[i].pred_ns);
			}
			CHECK(!r.nvar || r.ncand > 1,
			      "%s: the synthetic predictor found nothing better", what);
			printf("ok   %s: deterministic, %d candidates, best predicted %.3f ms vs default %.3f ms\n",
			       what, r.ncand, bp / 1e6, r.cand[0].pred_ns / 1e6);
			mi_search_result_fini(&r2);
		}
		mi_search_result_fini(&r);
		mi_pred_fini(&p);
	} else {
		CHECK(0, "%s: synthetic predictor fit", what);
	}
out:
	printf("     %s: %.2f s\n", what, now_s() - t0);
	mi_model_free(ref);
	mi_model_free(m);
}

/* ---- bench ---------------------------------------------------------- */

struct brow {
	char model[64], setup[48];
	double def_ms, tuned_ms, tune_s, search_s, compile_s, run_s;
	bool kept;
};

static double measure(struct mi_model *m, int runs)
{
	int nd = mi_model_device_count(m);
	double best = INFINITY;

	for (int i = 0; i < runs; i++) {
		double t = now_s(), ns = 0;

		if (nd > 1)
			mi_model_device_stats_reset(m);
		run1(m);
		t = (now_s() - t) * 1e9;
		if (nd > 1) {
			for (int d = 0; d < nd; d++) {
				struct mi_device_stats st;

				if (!mi_model_device_stats(m, d, &st))
					ns += (double)st.busy_ns;
			}
			t = ns;
		}
		best = fmin(best, t);
	}
	return best;
}

static int bench_one(const char *path, int threads, const char *devs,
		     const char *setup, struct brow *row)
{
	struct mi_model *m, *d, *ref = NULL;
	struct mi_search_opts o;
	struct mi_search_result r;
	double t0 = now_s(), a = 0, b = 0;
	const char *base = strrchr(path, '/');
	int err;

	m = load(path, threads, MI_MODEL_PROFILE, devs);
	d = load(path, threads, 0, devs);
	if (devs)
		ref = load(path, threads, MI_MODEL_NO_INT8, NULL);
	if (!m || !d) {
		mi_model_free(m);
		mi_model_free(d);
		mi_model_free(ref);
		return -1;
	}
	base_opts(&o);
	o.top = 5;
	o.runs = 5;
	o.amortize = 0;	/* the default rule */
	o.ref = ref;
	err = mi_search_run(m, &o, &r);
	memset(row, 0, sizeof(*row));
	snprintf(row->model, sizeof(row->model), "%s", base ? base + 1 : path);
	snprintf(row->setup, sizeof(row->setup), "%s", setup);
	row->tune_s = now_s() - t0;
	if (err) {
		printf("%-28s %-14s search failed: %s\n", row->model, setup,
		       mi_last_error());
		mi_model_free(m);
		mi_model_free(d);
		mi_model_free(ref);
		return -1;
	}
	row->search_s = r.search_s;
	row->compile_s = r.compile_s;
	row->run_s = r.run_s;
	row->kept = r.kept_default || r.best == 0;
	/* held-out re-measurement: fresh default model vs the tuned one,
	 * interleaved, best of 5 rounds of 3 */
	mi_model_free(m);
	if (row->kept) {
		/* the same plan as the default: nothing to re-measure */
		row->def_ms = row->tuned_ms = r.cand[0].meas_ns / 1e6;
		printf("%-28s %-14s %9.3f %9.3f %7.3fx %7.2f %7.2f %7.2f %7.2f %s\n",
		       row->model, setup, row->def_ms, row->tuned_ms, 1.0,
		       row->tune_s, row->search_s, row->compile_s, row->run_s,
		       !r.kept_default ? "default measured fastest" :
		       strstr(r.note, "gain") ? "kept default: gain < cost" :
						"kept default: none predicted better");
		fflush(stdout);
		mi_search_result_fini(&r);
		mi_model_free(d);
		mi_model_free(ref);
		return 0;
	}
	m = load(path, threads, 0, devs);
	if (!m || mi_model_plan_apply(m, r.plan)) {
		printf("%-28s %-14s tuned plan: %s\n", row->model, setup,
		       mi_last_error());
		mi_search_result_fini(&r);
		mi_model_free(m);
		mi_model_free(d);
		mi_model_free(ref);
		return -1;
	}
	a = b = INFINITY;
	for (int k = 0; k < 7; k++) {
		a = fmin(a, measure(d, 3));
		b = fmin(b, measure(m, 3));
	}
	row->def_ms = a / 1e6;
	row->tuned_ms = b / 1e6;
	printf("%-28s %-14s %9.3f %9.3f %7.3fx %7.2f %7.2f %7.2f %7.2f cand %d of %d\n",
	       row->model, setup, row->def_ms, row->tuned_ms,
	       row->def_ms / row->tuned_ms, row->tune_s, row->search_s,
	       row->compile_s, row->run_s, r.best, r.ncand);
	fflush(stdout);
	mi_search_result_fini(&r);
	mi_model_free(m);
	mi_model_free(d);
	mi_model_free(ref);
	return 0;
}

static void summary(const char *cls, const struct brow *rows, int n,
		    const char *prefix)
{
	double lg = 0, tmax = 0, tsum = 0;
	int k = 0, never = 0, within = 0;

	for (int i = 0; i < n; i++) {
		if (strncmp(rows[i].setup, prefix, strlen(prefix)))
			continue;
		lg += log(rows[i].def_ms / rows[i].tuned_ms);
		never += rows[i].tuned_ms <= rows[i].def_ms;
		within += rows[i].tuned_ms <= rows[i].def_ms * 1.02;
		tmax = fmax(tmax, rows[i].tune_s);
		tsum += rows[i].tune_s;
		k++;
	}
	if (!k)
		return;
	printf("%-22s %6d %10.3fx %6d/%-3d %6d/%-3d %9.2f %9.2f\n", cls, k,
	       exp(lg / k), never, k, within, k, tsum / k, tmax);
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "check", no_argument, NULL, 'c' },
		{ "bench", no_argument, NULL, 'b' },
		{ "threads", required_argument, NULL, 't' },
		{ "setups", required_argument, NULL, 's' },
		{ 0 }
	};
	int c, bench = 0, setups = 3, nthr = 0, thr[4];
	struct brow *rows;
	int nrows = 0;
	double t0 = now_s();

	while ((c = getopt_long(argc, argv, "cbt:s:", lopts, NULL)) != -1) {
		switch (c) {
		case 'c':
			bench = 0;
			break;
		case 'b':
			bench = 1;
			break;
		case 't':
			for (char *s = strtok(optarg, ","); s && nthr < 4;
			     s = strtok(NULL, ","))
				thr[nthr++] = atoi(s);
			break;
		case 's':
			setups = atoi(optarg);
			break;
		default:
			fprintf(stderr, "usage: test-search [--check|--bench] [-t 1,2] [--setups N] MODEL...\n");
			return 2;
		}
	}
	if (!nthr)
		thr[nthr++] = 1;
	if (emu_setup())
		return 1;
	if (!bench) {
		for (int i = optind; i < argc; i++)
			check_model(argv[i], thr[0]);
		printf("test-search: %d checks, %d failed, %.1f s\n", checks,
		       fails, now_s() - t0);
		return fails ? 1 : 0;
	}
	rows = calloc((size_t)(argc + 1) * (nthr + setups + 1), sizeof(*rows));
	if (!rows)
		return 1;
	printf("%-28s %-14s %9s %9s %8s %7s %7s %7s %7s\n", "model", "setup",
	       "default", "tuned", "speedup", "tune s", "search", "compile",
	       "run");
	for (int i = optind; i < argc; i++) {
		if (!is_int8(argv[i])) {
			for (int t = 0; t < nthr; t++) {
				char su[48];

				snprintf(su, sizeof(su), "cpu.t%d", thr[t]);
				nrows += !bench_one(argv[i], thr[t], NULL, su,
						    &rows[nrows]);
			}
			continue;
		}
		for (int k = 0; k < setups; k++) {
			char su[48];

			emu_personalities(1000 + k);
			snprintf(su, sizeof(su), "emu2.seed%d", 1000 + k);
			nrows += !bench_one(argv[i], 1, "npu0,npu1", su,
					    &rows[nrows]);
		}
	}
	printf("\n%-22s %6s %11s %10s %10s %9s %9s\n", "setup", "runs",
	       "geo-mean", "never-slower", "within 2%", "tune s", "max s");
	summary("CPU, 1 thread", rows, nrows, "cpu.t1");
	summary("CPU, 2 threads", rows, nrows, "cpu.t2");
	summary("CPU + 2 emulated NPUs", rows, nrows, "emu2");
	printf("bench-tune: %.1f s\n", now_s() - t0);
	free(rows);
	return 0;
}
