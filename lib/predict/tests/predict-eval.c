// SPDX-License-Identifier: MIT
/*
 * predict-eval: fit the predictor on some model families and evaluate it
 * on held-out ones, on the CPU (real per-node profiles; each ISA path and
 * thread count is one device) and on simulated NPU personalities drawn at
 * random (the sim's timing model, Documentation/sim.rst), side by side
 * with two baselines: the roofline alone, and a per-device model fitted
 * on that device's own reference measurements only (no transfer across
 * devices).
 *
 *   predict-eval [options] MODEL.onnx...
 *     --eval FAM,...   held-out families (default: leave each family out
 *                      in turn, fitting on the others)
 *     --isa LIST       CPU ISA paths (generic,avx2,avx512; default all the
 *                      CPU has)   --threads LIST (default 1,2)
 *     --runs N         profiled runs per model and device (default 5)
 *     --plans N        candidate plans per held-out model (default 6)
 *     --chips N        held-out sim personalities (default 50)
 *     --save FILE      write the predictor fitted on every model
 *     --trees N --depth N --min-leaf N   tree parameters (150, 5, 8)
 *     --check          test mode: exit 1 when an assertion fails
 *
 * A model's family is its file name up to the first digit or '_'
 * (resnet18 and resnet50 are both "resnet").  Measured latency of a plan
 * is the sum of its nodes' fastest runs (MI_MODEL_PROFILE minima), the
 * figure the predictor is fitted on; predicted is mi_pred_plan's critical
 * path.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "predict/predict.h"
#include "tests/check.h"

#define MAXM	32
#define MAXD	8
#define MAXP	16

struct cdev {
	int isa, threads;
	struct mi_pred_dev d;
};

struct plan_meas {
	struct mi_pred_graph pg;	/* features + measured ns */
	double measured;
};

struct mdata {
	char name[64], family[32];
	/* per device: [0] the default plan, then candidates */
	struct plan_meas pm[MAXD][MAXP];
	int nplans[MAXD];
};

static struct cdev cdevs[MAXD];
static int ncdev;
static struct mdata models[MAXM];
static int nmodels;
static uint64_t seed = 1;
static struct mi_gbrt_params tree_params; /* --trees, --depth, --min-leaf */

static void family_of(const char *path, char *name, size_t nlen, char *fam,
		      size_t flen)
{
	const char *b = strrchr(path, '/');
	size_t i = 0;

	b = b ? b + 1 : path;
	snprintf(name, nlen, "%s", b);
	if (strstr(name, ".onnx"))
		*strstr(name, ".onnx") = 0;
	while (name[i] && !isdigit((unsigned char)name[i]) && name[i] != '_' &&
	       i + 1 < flen) {
		fam[i] = name[i];
		i++;
	}
	fam[i] = 0;
}

/* Run the model once per run on seeded inputs of the declared shapes. */
static int run_model(struct mi_model *m, int runs)
{
	struct mi_value in[8];
	int nin = mi_model_input_count(m), err = 0;
	void *bufs[8] = { 0 };

	if (nin > 8)
		return -E2BIG;
	for (int i = 0; i < nin; i++) {
		struct mi_tensor_info ti;
		size_t n = 1, es;

		mi_model_input_info(m, i, &ti);
		es = mi_dtype_size(ti.dtype);
		memset(&in[i], 0, sizeof(in[i]));
		in[i].dtype = ti.dtype;
		in[i].ndim = ti.ndim;
		for (int k = 0; k < ti.ndim; k++) {
			in[i].dims[k] = ti.dims[k] > 0 ? ti.dims[k] : 1;
			n *= in[i].dims[k];
		}
		bufs[i] = calloc(n ? n : 1, es ? es : 1);
		if (!bufs[i]) {
			err = -ENOMEM;
			goto out;
		}
		if (ti.dtype == MI_DT_FLOAT)
			for (size_t k = 0; k < n; k++)
				((float *)bufs[i])[k] =
					(float)mi_pred_uniform(&seed) - 0.5f;
		in[i].data = bufs[i];
		in[i].nbytes = n * es;
	}
	for (int r = 0; r < runs && !err; r++) {
		struct mi_value out;

		err = mi_model_run(m, in, nin, &out, 1);
	}
out:
	for (int i = 0; i < nin; i++)
		free(bufs[i]);
	return err;
}

static double sum_prof(const struct mi_pred_graph *pg)
{
	double s = 0;

	for (int k = 0; k < pg->n; k++)
		s += pg->v[k].prof_ns;
	return s;
}

/* A random plan: 1..6 random nodes to a random candidate (what one no
 * longer fuses runs alone, by reference), as test-plan-random draws. */
static int draw_plan(struct mi_model *m, const struct mi_plan *p0,
		     struct mi_plan **out)
{
	struct mi_plan_info pi;
	struct mi_plan *p;
	int err = mi_plan_dup(p0, &p);

	if (err)
		return err;
	mi_plan_info(p0, &pi);
	for (int want = 1 + (int)(mi_pred_rand(&seed) % 6); !err && want > 0;
	     want--) {
		const struct mi_plan_candidate *c;
		struct mi_plan_node nd;
		int nc, k, i = (int)(mi_pred_rand(&seed) % pi.nodes);

		mi_plan_node(p0, i, &nd);
		nc = mi_plan_candidates(m, nd.name, &c);
		if (nc < 1)
			continue;
		k = (int)(mi_pred_rand(&seed) % nc);
		err = mi_plan_set(p, nd.name, c[k].variant, c[k].fused,
				  c[k].nfused);
		for (int f = 0; !err && f < nd.nfused; f++) {
			bool kept = false;

			for (int j = 0; j < c[k].nfused; j++)
				kept |= !strcmp(c[k].fused[j], nd.fused[f]);
			if (!kept)
				err = mi_plan_set(p, nd.fused[f], "ref", NULL,
						  0);
		}
	}
	if (err) {
		mi_plan_free(p);
		return err;
	}
	*out = p;
	return 0;
}

static int profile_plan(struct mi_model *m, struct mi_predictor *pr, int runs,
			struct plan_meas *pm)
{
	int err;

	mi_model_profile_reset(m);
	err = run_model(m, runs);
	if (!err)
		err = mi_pred_graph_build(m, pr, true, &pm->pg);
	if (!err)
		err = mi_pred_graph_profile(m, &pm->pg);
	pm->measured = err ? 0 : sum_prof(&pm->pg);
	return err;
}

static int collect(const char *path, struct mi_predictor *pr, int runs,
		   int nplans)
{
	struct mdata *md = &models[nmodels];

	family_of(path, md->name, sizeof(md->name), md->family,
		  sizeof(md->family));
	for (int d = 0; d < ncdev; d++) {
		struct mi_model_opts o = { .flags = MI_MODEL_PROFILE,
					   .nthreads = cdevs[d].threads,
					   .isa = cdevs[d].isa };
		struct mi_plan *p0 = NULL;
		struct mi_model *m;
		int err;

		err = mi_model_load(path, &o, &m);
		if (err) {
			fprintf(stderr, "%s: %s\n", path, mi_last_error());
			return err;
		}
		run_model(m, 1); /* warm-up */
		err = profile_plan(m, pr, runs, &md->pm[d][0]);
		if (!err)
			err = mi_model_plan_get(m, &p0);
		md->nplans[d] = err ? 0 : 1;
		/* candidate plans: draws the model refuses are skipped */
		for (int k = 0; !err && md->nplans[d] < nplans &&
				md->nplans[d] < MAXP && k < 8 * nplans; k++) {
			struct mi_plan *p;

			if (draw_plan(m, p0, &p))
				continue;
			if (!mi_model_plan_apply(m, p) &&
			    !profile_plan(m, pr, runs,
					  &md->pm[d][md->nplans[d]]))
				md->nplans[d]++;
			mi_plan_free(p);
		}
		mi_plan_free(p0);
		mi_model_free(m);
		if (err) {
			fprintf(stderr, "%s: %s\n", path, mi_last_error());
			return err;
		}
	}
	nmodels++;
	return 0;
}

/* ---- protocol ---------------------------------------------------------- */

enum mode { M_FULL, M_ROOF, M_LOCAL };
static const char *const mode_names[] = { "trees+roofline", "roofline only",
					  "per-device only" };

struct score {
	int node_hit, node_n, model_hit, model_n;
	double rho_sum, logerr;	/* logerr: sum of |ln(pred/meas)| of nodes */
	int rho_n;
};

static bool hit(double pred, double meas)
{
	return meas > 0 && fabs(pred - meas) <= 0.1 * meas;
}

static void node_score(struct score *sc, double pred, double meas)
{
	sc->node_hit += hit(pred, meas);
	sc->node_n++;
	sc->logerr += fabs(log(pred / meas));
}

/* Reference nodes of a device: up to want nodes spread over the graphs of
 * the fit models' default plans (every k-th node that ran). */
static int ref_nodes(const bool *fit, int d, int want,
		     struct mi_pred_node *nodes, double *ns)
{
	int total = 0, n = 0, step, i = 0;

	for (int m = 0; m < nmodels; m++)
		if (fit[m])
			total += models[m].pm[d][0].pg.n;
	step = total / (want ? want : 1);
	if (step < 1)
		step = 1;
	for (int m = 0; m < nmodels && n < want; m++) {
		const struct mi_pred_graph *pg = &models[m].pm[d][0].pg;

		if (!fit[m])
			continue;
		for (int k = 0; k < pg->n && n < want; k++, i++)
			if (i % step == step / 2 && pg->v[k].prof_ns > 0) {
				nodes[n] = pg->v[k].node;
				ns[n++] = pg->v[k].prof_ns;
			}
	}
	return n;
}

static void embed_dev(struct mi_predictor *p, struct mi_pred_dev *dev,
		      const struct mi_pred_node *nodes, const double *ns,
		      int n, int nembed)
{
	memset(dev->bias_sum, 0, sizeof(dev->bias_sum));
	memset(dev->bias_n, 0, sizeof(dev->bias_n));
	mi_pred_embed(dev, nodes, ns, nembed < n ? nembed : n);
	for (int i = 0; i < n; i++)
		mi_pred_refine(p, dev, &nodes[i], ns[i]);
}

/* Fit on the fit models of every CPU device; score the held-out ones. */
static int cpu_fold(const bool *fit, enum mode mode, struct score *sc,
		    const char *save)
{
	struct mi_pred_node rn[MAXD][MI_PRED_REF_MAX];
	double rns[MAXD][MI_PRED_REF_MAX];
	int nref[MAXD], ns = 0, cap = 0, err = 0;
	struct mi_pred_sample *s = NULL;
	struct mi_predictor p;
	struct mi_predictor local[MAXD];

	mi_pred_init(&p);
	for (int d = 0; d < ncdev; d++) {
		mi_pred_cpu_dev(&cdevs[d].d, cdevs[d].isa, cdevs[d].threads);
		nref[d] = ref_nodes(fit, d, MI_PRED_REF_MAX, rn[d], rns[d]);
		mi_pred_embed(&cdevs[d].d, rn[d], rns[d], nref[d]);
		mi_pred_init(&local[d]);
	}
	for (int m = 0; m < nmodels; m++)
		for (int d = 0; fit[m] && d < ncdev; d++)
			for (int k = 0; k < models[m].nplans[d]; k++)
				cap += models[m].pm[d][k].pg.n;
	s = calloc(cap + 1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	for (int m = 0; m < nmodels; m++)
		for (int d = 0; fit[m] && d < ncdev; d++)
			for (int k = 0; k < models[m].nplans[d]; k++) {
				const struct mi_pred_graph *pg =
					&models[m].pm[d][k].pg;

				for (int j = 0; j < pg->n; j++) {
					if (pg->v[j].prof_ns <= 0)
						continue;
					s[ns].node = pg->v[j].node;
					s[ns].emb = cdevs[d].d.emb;
					s[ns].nemb = cdevs[d].d.nemb;
					s[ns].caps = cdevs[d].d.caps;
					s[ns].ns = pg->v[j].prof_ns;
					s[ns++].dev = d;
				}
			}
	if (mode == M_FULL && ns)
		err = mi_pred_fit(&p, s, ns, &tree_params);
	for (int d = 0; !err && d < ncdev; d++) {
		if (mode == M_FULL) {
			for (int i = 0; i < nref[d]; i++)
				mi_pred_refine(&p, &cdevs[d].d, &rn[d][i],
					       rns[d][i]);
		} else if (mode == M_LOCAL) {
			struct mi_pred_sample ls[MI_PRED_REF_MAX];
			struct mi_gbrt_params gp = { .min_leaf = 2 };

			for (int i = 0; i < nref[d]; i++) {
				ls[i] = (struct mi_pred_sample){
					.node = rn[d][i], .caps = cdevs[d].d.caps,
					.ns = rns[d][i], .dev = d };
			}
			if (nref[d])
				err = mi_pred_fit(&local[d], ls, nref[d], &gp);
		} else {
			cdevs[d].d.nemb = 0;
		}
	}
	if (!err && save && mode == M_FULL) {
		for (int d = 0; d < ncdev; d++) {
			struct mi_pred_dev *pd =
				mi_pred_dev_find(&p, cdevs[d].d.name, true);

			if (pd)
				*pd = cdevs[d].d;
		}
		err = mi_pred_save(&p, save);
	}
	for (int m = 0; !err && m < nmodels; m++) {
		if (fit[m])
			continue;
		for (int d = 0; d < ncdev; d++) {
			const struct mi_predictor *pp = mode == M_LOCAL ?
								&local[d] : &p;
			struct mi_pred_dev *dv = &cdevs[d].d;
			const char *cpu = "cpu";
			double pred[MAXP], meas[MAXP];
			int np = models[m].nplans[d];

			for (int k = 0; k < np; k++) {
				struct plan_meas *pm = &models[m].pm[d][k];
				struct mi_pred_result r;

				for (int j = 0; k == 0 && j < pm->pg.n; j++) {
					double t;

					if (pm->pg.v[j].prof_ns <= 0)
						continue;
					t = mi_pred_node_ns(pp, &pm->pg.v[j].node,
							    dv);
					node_score(sc, t, pm->pg.v[j].prof_ns);
				}
				err = mi_pred_plan(pp, &pm->pg, &dv, &cpu, 1,
						   &r);
				if (err)
					break;
				pred[k] = r.total_ns;
				meas[k] = pm->measured;
			}
			if (err)
				break;
			if (np > 0) {
				sc->model_hit += hit(pred[0], meas[0]);
				sc->model_n++;
			}
			if (np > 2) {
				sc->rho_sum += mi_pred_spearman(pred, meas, np);
				sc->rho_n++;
			}
		}
	}
	for (int d = 0; d < ncdev; d++)
		mi_pred_fini(&local[d]);
	mi_pred_fini(&p);
	free(s);
	return err;
}

/* ---- simulated personalities ------------------------------------------- */

#define SIM_FIT_CHIPS	16
#define SIM_KMAX	50
static const int sim_k[] = { 5, 10, 20, 50 };
#define NSIMK ((int)(sizeof(sim_k) / sizeof(sim_k[0])))

/* The nodes of a model (default plan, first device) the sim can run. */
static int sim_nodes(int m, const struct mi_pred_simchip *c,
		     const struct mi_pred_node **v, double *ns, int max)
{
	const struct mi_pred_graph *pg = &models[m].pm[0][0].pg;
	int n = 0;

	for (int k = 0; k < pg->n && n < max; k++) {
		double t = mi_pred_simchip_ns(c, &pg->v[k].node);

		if (t > 0) {
			v[n] = &pg->v[k].node;
			ns[n++] = t;
		}
	}
	return n;
}

/* Reference kernels of a chip: fit-model nodes spread evenly, the first
 * MI_PRED_REF_MAX at offset 1/2, the rest at other offsets. */
static int sim_refs(const bool *fit, const struct mi_pred_simchip *c,
		    struct mi_pred_node *rn, double *rns, int want)
{
	static const struct mi_pred_node *v[4096];
	static double ns[4096];
	int total = 0, n = 0;

	for (int m = 0; m < nmodels; m++)
		if (fit[m])
			total += sim_nodes(m, c, v + total, ns + total,
					   4096 - total);
	for (int pass = 0; pass < 3 && n < want && total; pass++) {
		int per = pass ? (want - MI_PRED_REF_MAX + 1) / 2 :
				 MI_PRED_REF_MAX;
		double off = pass == 0 ? 0.5 : pass == 1 ? 0.25 : 0.75;

		for (int i = 0; i < per && n < want; i++) {
			int j = (int)((i + off) * total / per);

			rn[n] = *v[j < total ? j : total - 1];
			rns[n++] = ns[j < total ? j : total - 1];
		}
	}
	return n;
}

static int sim_eval(const bool *fit, int nchips, uint64_t chip_seed,
		    struct score sc[][NSIMK])
{
	static const struct mi_pred_node *v[4096];
	static double ns[4096];
	struct mi_pred_sample *s = NULL;
	struct mi_pred_dev fdev[SIM_FIT_CHIPS];
	struct mi_predictor p;
	uint64_t fs = 12345;
	int n = 0, err = 0;

	mi_pred_init(&p);
	s = calloc(SIM_FIT_CHIPS * 4096, sizeof(*s));
	if (!s)
		return -ENOMEM;
	for (int c = 0; c < SIM_FIT_CHIPS; c++) {
		struct mi_pred_simchip chip;
		struct mi_pred_node rn[MI_PRED_REF_MAX];
		double rns[MI_PRED_REF_MAX];
		int nr;

		mi_pred_simchip_random(&chip, &fs);
		mi_pred_simchip_dev(&chip, &fdev[c]);
		nr = sim_refs(fit, &chip, rn, rns, MI_PRED_REF_MAX);
		mi_pred_embed(&fdev[c], rn, rns, nr);
		for (int m = 0; m < nmodels; m++) {
			int k;

			if (!fit[m])
				continue;
			k = sim_nodes(m, &chip, v, ns, 4096);
			for (int i = 0; i < k && n < SIM_FIT_CHIPS * 4096; i++) {
				s[n].node = *v[i];
				s[n].emb = fdev[c].emb;
				s[n].nemb = fdev[c].nemb;
				s[n].caps = fdev[c].caps;
				s[n].ns = ns[i];
				s[n++].dev = c;
			}
		}
	}
	if (n)
		err = mi_pred_fit(&p, s, n, &tree_params);
	for (int c = 0; !err && c < nchips; c++) {
		struct mi_pred_simchip chip;
		struct mi_pred_node rn[SIM_KMAX];
		double rns[SIM_KMAX];
		int nr;

		mi_pred_simchip_random(&chip, &chip_seed);
		nr = sim_refs(fit, &chip, rn, rns, SIM_KMAX);
		for (int ki = 0; ki < NSIMK; ki++) {
			int kk = sim_k[ki] < nr ? sim_k[ki] : nr;

			for (int mode = 0; mode < 3; mode++) {
				struct mi_predictor local;
				const struct mi_predictor *pp = &p;
				struct mi_pred_dev dev;
				struct score *o = &sc[mode][ki];
				double pr[4096], me[4096];
				int np = 0;

				mi_pred_init(&local);
				mi_pred_simchip_dev(&chip, &dev);
				if (mode == M_FULL) {
					embed_dev(&p, &dev, rn, rns, kk,
						  MI_PRED_REF_MAX);
				} else if (mode == M_ROOF) {
					pp = NULL;
				} else {
					struct mi_pred_sample ls[SIM_KMAX];
					struct mi_gbrt_params gp = {
						.min_leaf = 2 };

					for (int i = 0; i < kk; i++)
						ls[i] = (struct mi_pred_sample){
							.node = rn[i],
							.caps = dev.caps,
							.ns = rns[i] };
					err = mi_pred_fit(&local, ls, kk, &gp);
					pp = &local;
				}
				for (int m = 0; !err && m < nmodels; m++) {
					double tp = 0, tm = 0;
					int k;

					if (fit[m])
						continue;
					k = sim_nodes(m, &chip, v, ns, 4096);
					for (int i = 0; i < k; i++) {
						double t = mi_pred_node_ns(pp, v[i],
									   &dev);

						node_score(o, t, ns[i]);
						tp += t;
						tm += ns[i];
						if (np < 4096) {
							pr[np] = t;
							me[np++] = ns[i];
						}
					}
					if (k) {
						o->model_hit += hit(tp, tm);
						o->model_n++;
					}
				}
				if (np > 2) {
					o->rho_sum += mi_pred_spearman(pr, me, np);
					o->rho_n++;
				}
				mi_pred_fini(&local);
			}
		}
	}
	mi_pred_fini(&p);
	free(s);
	return err;
}

/* ---- plan cost on a hand-made graph ------------------------------------ */

/*
 * a (cpu) -> b (npu) -> c (npu) -> e (cpu);  a -> d (cpu) -> e.
 * Roofline only, no launch: a = d = e = 1000 ns on the CPU; b, c = 4000
 * ns on the npu, 1 MB across its 1 GB/s link = 1e6 ns each way.  b and c
 * are one job; d overlaps with them; a's output lives on both devices.
 */
static void test_plan_cost(void)
{
	struct mi_pred_pnode v[5];
	struct mi_pred_graph pg = { .n = 5, .v = v };
	struct mi_pred_dev cpu = { .caps = { 1e9, 1e15, 0, 0 } },
			   npu = { .caps = { 1e9, 1e15, 0, 1e9 } };
	struct mi_pred_dev *dv[2] = { &cpu, &npu };
	const char *names[2] = { "cpu", "npu0" }, *one[1] = { "cpu" };
	static const char *const dev[5] = { "cpu", "npu0", "npu0", "cpu", "cpu" };
	static const double macs[5] = { 1000, 4000, 4000, 1000, 1000 };
	static int in[5][2] = { { -1, -1 }, { 0, -1 }, { 1, -1 }, { 0, -1 },
				{ 2, 3 } };
	static double inb[2] = { 1e6, 1e6 };
	struct mi_pred_result r;
	int err;

	memset(v, 0, sizeof(v));
	for (int k = 0; k < 5; k++) {
		v[k].name = (char *)"n";
		v[k].device = (char *)dev[k];
		v[k].node.cls = MI_PC_ELTWISE;
		v[k].node.macs = macs[k];
		v[k].ninputs = 2;
		v[k].inputs = in[k];
		v[k].in_bytes = inb;
		v[k].out_bytes = 1e6;
	}
	v[0].last_use = 3;
	v[1].last_use = 2;
	v[2].last_use = 4;
	v[3].last_use = 4;
	v[4].is_output = true;
	err = mi_pred_plan(NULL, &pg, dv, names, 2, &r);
	/* a ends 1001; b starts after a 1e6 ns transfer; c continues b's
	 * job; e waits for c's result to come back */
	CHECK(!err, "plan: %s", mi_last_error());
	CHECK(r.jobs[1] == 1 && r.jobs[0] == 3, "jobs %d/%d", r.jobs[0],
	      r.jobs[1]);
	CHECK(fabs(r.total_ns - (1001 + 1e6 + 4001 + 4001 + 1e6 + 1001)) < 1,
	      "critical path %.0f", r.total_ns);
	CHECK(fabs(r.busy_ns[0] - 3003) < 1, "cpu busy %.0f", r.busy_ns[0]);
	/* step 2: the npu holds a's copy, b's and c's outputs; step 3: the
	 * cpu a, c's copy and d */
	CHECK(fabs(r.peak_bytes[0] - 3e6) < 1 && fabs(r.peak_bytes[1] - 3e6) < 1,
	      "peak %.0f / %.0f", r.peak_bytes[0], r.peak_bytes[1]);
	err = mi_pred_plan(NULL, &pg, dv, one, 1, &r);
	CHECK(err == -ENODEV && strstr(mi_last_error(), "npu0"),
	      "a device not given: %d %s", err, mi_last_error());
	if (!fails)
		printf("plan cost: critical path, one job per accelerator run, overlap, transfers, peak memory ok\n");
}

/* ---- main -------------------------------------------------------------- */

static double pct(int a, int b)
{
	return b ? 100.0 * a / b : 0;
}

static void print_row(const char *what, const char *mode, const struct score *s)
{
	printf("%-22s %-16s %7.1f%% %6d %7.1f%% %5d %8.3f %8.3f\n", what, mode,
	       pct(s->node_hit, s->node_n), s->node_n,
	       pct(s->model_hit, s->model_n), s->model_n,
	       s->rho_n ? s->rho_sum / s->rho_n : 0,
	       s->node_n ? s->logerr / s->node_n : 0);
}

static int parse_list(const char *s, const char *const *names, int nn,
		      int *out, int max)
{
	char buf[256], *tok, *save;
	int n = 0;

	snprintf(buf, sizeof(buf), "%s", s);
	for (tok = strtok_r(buf, ",", &save); tok && n < max;
	     tok = strtok_r(NULL, ",", &save)) {
		int v = -1;

		for (int i = 0; names && i < nn; i++)
			if (!strcmp(tok, names[i]))
				v = i;
		if (!names)
			v = atoi(tok);
		if (v < 0 || (!names && v < 1))
			return -EINVAL;
		out[n++] = v;
	}
	return n;
}

static bool same_file_preds(struct mi_predictor *a, struct mi_predictor *b)
{
	for (int m = 0; m < nmodels; m++) {
		const struct mi_pred_graph *pg = &models[m].pm[0][0].pg;

		for (int k = 0; k < pg->n; k++) {
			const struct mi_pred_dev *da = &a->devs[0],
						 *db = &b->devs[0];

			if (mi_pred_node_ns(a, &pg->v[k].node, da) !=
			    mi_pred_node_ns(b, &pg->v[k].node, db))
				return false;
		}
	}
	return true;
}

int main(int argc, char **argv)
{
	static const char *const isas[] = { "native", "generic", "avx2",
					    "avx512" };
	static const struct option lo[] = {
		{ "eval", required_argument, NULL, 'e' },
		{ "isa", required_argument, NULL, 'i' },
		{ "threads", required_argument, NULL, 't' },
		{ "runs", required_argument, NULL, 'r' },
		{ "plans", required_argument, NULL, 'p' },
		{ "chips", required_argument, NULL, 'c' },
		{ "save", required_argument, NULL, 's' },
		{ "check", no_argument, NULL, 'C' },
		{ "trees", required_argument, NULL, 'T' },
		{ "depth", required_argument, NULL, 'H' },
		{ "min-leaf", required_argument, NULL, 'L' },
		{ 0 }
	};
	int isa[4] = { 1, 2, 3 }, nisa = 3, thr[4] = { 1, 2 }, nthr = 2;
	int runs = 5, nplans = 6, nchips = 50, check = 0, c;
	const char *eval = NULL, *save = NULL;
	char fams[MAXM][32];
	int nfam = 0;
	struct score cpu[3] = { 0 }, sim[3][NSIMK];
	double t0 = now_s(), t1;

	memset(sim, 0, sizeof(sim));
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'e': eval = optarg; break;
		case 'i': nisa = parse_list(optarg, isas, 4, isa, 4); break;
		case 't': nthr = parse_list(optarg, NULL, 0, thr, 4); break;
		case 'r': runs = atoi(optarg); break;
		case 'p': nplans = atoi(optarg); break;
		case 'c': nchips = atoi(optarg); break;
		case 's': save = optarg; break;
		case 'C': check = 1; break;
		case 'T': tree_params.ntrees = atoi(optarg); break;
		case 'H': tree_params.depth = atoi(optarg); break;
		case 'L': tree_params.min_leaf = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: %s [--eval FAM,..] [--isa LIST] [--threads LIST] [--runs N] [--plans N] [--chips N] [--save FILE] [--check] MODEL.onnx...\n",
				argv[0]);
			return 2;
		}
	}
	if (nisa < 1 || nthr < 1 || runs < 1 || nplans < 1 || nplans > MAXP ||
	    optind >= argc || argc - optind > MAXM) {
		fprintf(stderr, "%s: bad options or no models\n", argv[0]);
		return 2;
	}
	for (int i = 0; i < nisa; i++)
		for (int j = 0; j < nthr; j++) {
			struct mi_model_opts o = { .isa = isa[i] };
			struct mi_model *m;

			/* only the ISA paths this CPU has */
			if (mi_model_load(argv[optind], &o, &m))
				continue;
			mi_model_free(m);
			if (ncdev < MAXD)
				cdevs[ncdev++] = (struct cdev){ .isa = isa[i], .threads = thr[j] };
		}
	{
		struct mi_predictor vocab;

		mi_pred_init(&vocab);
		for (int i = optind; i < argc; i++)
			if (collect(argv[i], &vocab, runs, nplans))
				return 1;
		mi_pred_fini(&vocab);
	}
	t1 = now_s();
	for (int m = 0; m < nmodels; m++) {
		bool dup = false;

		for (int f = 0; f < nfam; f++)
			dup |= !strcmp(fams[f], models[m].family);
		if (!dup)
			snprintf(fams[nfam++], 32, "%s", models[m].family);
	}
	printf("%d models (%d families), %d CPU devices:", nmodels, nfam, ncdev);
	for (int d = 0; d < ncdev; d++) {
		mi_pred_cpu_dev(&cdevs[d].d, cdevs[d].isa, cdevs[d].threads);
		printf(" %s", cdevs[d].d.name);
	}
	printf("; profiling %.1f s\n", t1 - t0);
	for (int f = 0; f < (eval ? 1 : nfam); f++) {
		bool fit[MAXM];
		int nfit = 0;

		for (int m = 0; m < nmodels; m++) {
			char key[40];

			snprintf(key, sizeof(key), ",%s,", models[m].family);
			if (eval) {
				char list[300];

				snprintf(list, sizeof(list), ",%s,", eval);
				fit[m] = !strstr(list, key);
			} else {
				fit[m] = strcmp(models[m].family, fams[f]);
			}
			nfit += fit[m];
		}
		if (!nfit || nfit == nmodels)
			continue;
		for (int mode = 0; mode < 3; mode++)
			if (cpu_fold(fit, mode, &cpu[mode],
				     mode == M_FULL && f == 0 ? save : NULL)) {
				fprintf(stderr, "fold failed: %s\n",
					mi_last_error());
				return 1;
			}
		if (sim_eval(fit, nchips, 777 + f, sim))
			return 1;
	}
	printf("\nheld-out models (%s), fit on the other families; fit %.1f s\n",
	       eval ? eval : "each family in turn", now_s() - t1);
	printf("%-22s %-16s %8s %6s %8s %5s %8s %8s\n", "devices", "predictor",
	       "node±10%", "nodes", "model±10%", "n", "Spearman", "|ln err|");
	for (int mode = 0; mode < 3; mode++)
		print_row("CPU (real, held-out)", mode_names[mode], &cpu[mode]);
	for (int ki = 0; ki < NSIMK; ki++)
		for (int mode = 0; mode < 3; mode++) {
			char what[40];

			snprintf(what, sizeof(what), "sim new chip, k=%d",
				 sim_k[ki]);
			print_row(what, mode_names[mode], &sim[mode][ki]);
		}
	printf("(CPU Spearman: predicted vs measured latency of %d candidate plans per held-out model and device; sim Spearman: node times per chip)\n",
	       nplans);
	if (save) {
		struct mi_predictor a, b;

		CHECK(!mi_pred_load(&a, save), "load %s", save);
		CHECK(!mi_pred_save(&a, "predict-eval.tmp") &&
			      !mi_pred_load(&b, "predict-eval.tmp"),
		      "save/load again");
		if (!fails) {
			CHECK(a.ndevs > 0 && same_file_preds(&a, &b),
			      "round trip changes predictions");
			printf("round trip: %d devices, %d trees, predictions identical\n",
			       a.ndevs, a.trees.ntrees);
		}
		remove("predict-eval.tmp");
		mi_pred_fini(&a);
		mi_pred_fini(&b);
	}
	if (check)
		test_plan_cost();
	if (check) {
		double ef = cpu[M_FULL].logerr / cpu[M_FULL].node_n,
		       er = cpu[M_ROOF].logerr / cpu[M_ROOF].node_n;
		double s5 = sim[M_FULL][0].logerr / sim[M_FULL][0].node_n,
		       s50 = sim[M_FULL][NSIMK - 1].logerr /
			     sim[M_FULL][NSIMK - 1].node_n,
		       sl = sim[M_LOCAL][2].logerr / sim[M_LOCAL][2].node_n,
		       s20 = sim[M_FULL][2].logerr / sim[M_FULL][2].node_n;

		CHECK(cpu[M_FULL].node_n > 0, "no held-out CPU nodes");
		CHECK(ef < er, "CPU: trees %.3f not better than roofline %.3f",
		      ef, er);
		CHECK(s20 < sl, "sim: trees %.3f not better than the per-device model %.3f",
		      s20, sl);
		CHECK(s50 < s5, "sim: 50 measurements (%.3f) not better than 5 (%.3f)",
		      s50, s5);
		CHECK(pct(sim[M_FULL][2].node_hit, sim[M_FULL][2].node_n) >= 60,
		      "sim k=20: only %.1f%% of nodes within 10%%",
		      pct(sim[M_FULL][2].node_hit, sim[M_FULL][2].node_n));
		printf("%s\n", fails ? "FAILED" : "all checks passed");
	}
	return fails ? 1 : 0;
}
