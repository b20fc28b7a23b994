// SPDX-License-Identifier: MIT
/*
 * test-supernet DIR: switchable-model checks on what
 * tools/supernet/check_supernet.py wrote into DIR (supernet.onnx,
 * config_<abc>.onnx, ort_<abc>.npy, test_x.npy, plain.onnx,
 * badmeta.onnx).
 *
 *  - the switch metadata reads back; channel counts chain across layers;
 *  - per configuration: the pruned model (mi_model_set_config) equals the
 *    full one-hot-weighted graph (config_<abc>.onnx in MetaInfer) and
 *    ONNX Runtime's output of that graph, and the unselected branches are
 *    dead while every variant's weights stay resident;
 *  - switching under a loop of runs keeps every output equal to that
 *    configuration's own reference; activation time P50/P99/max;
 *  - bad configurations, a model without switches and bad metadata fail
 *    with a clear error, the model keeping its configuration;
 *  - the meta-controller (the trained one in the model's metadata): a
 *    stressed device gets a cheaper configuration; a truncated
 *    controller fails the load; a model without one gets the formula.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "meta/meta-impl.h"
#include "tests/check.h"

static struct mi_tensor x;
static char dir[512];

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static struct mi_model *load(const char *name)
{
	char p[700];
	struct mi_model *m;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	if (mi_model_load(p, NULL, &m)) {
		printf("FAIL load %s: %s\n", p, mi_last_error());
		exit(1);
	}
	return m;
}

/* Run on the test split; returns a malloc'ed copy of the logits. */
static float *run(struct mi_model *m, size_t *n)
{
	struct mi_value in = { .dtype = MI_DT_FLOAT, .ndim = x.ndim,
			       .data = x.data, .nbytes = x.nbytes };
	struct mi_value out;
	float *r;

	memcpy(in.dims, x.dims, sizeof(in.dims));
	if (mi_model_run(m, &in, 1, &out, 1)) {
		printf("FAIL run: %s\n", mi_last_error());
		exit(1);
	}
	r = malloc(out.nbytes);
	memcpy(r, out.data, out.nbytes);
	*n = out.nbytes / sizeof(float);
	return r;
}

/* max|a-b| / max|b| */
static double relerr(const float *a, const float *b, size_t n)
{
	double e = 0, s = 0;

	for (size_t i = 0; i < n; i++) {
		e = fmax(e, fabs((double)a[i] - b[i]));
		s = fmax(s, fabs((double)b[i]));
	}
	return s ? e / s : e;
}

static void name_of(const int *c, int nl, char *buf)
{
	for (int l = 0; l < nl; l++)
		buf[l] = '0' + c[l];
	buf[nl] = 0;
}

static int cmp_d(const void *a, const void *b)
{
	double x1 = *(const double *)a, x2 = *(const double *)b;

	return x1 < x2 ? -1 : x1 > x2;
}

static int live_nodes(const struct mi_model *m)
{
	int n = 0;

	for (int i = 0; i < m->g.nnodes; i++)
		n += !m->g.nodes[i].dead;
	return n;
}

int main(int argc, char **argv)
{
	struct mi_model *m, *f;
	struct mi_switch_info info[MI_SWITCH_MAX_LAYERS];
	char err[256], cname[MI_SWITCH_MAX_LAYERS + 1], p[700];
	float **ref;
	double *sw_ns;
	int nl, nc, nsw = 0, full_live;
	size_t n;

	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	snprintf(dir, sizeof(dir), "%s", argv[1]);
	snprintf(p, sizeof(p), "%s/test_x.npy", dir);
	if (mi_npy_read(p, &x, err, sizeof(err))) {
		printf("FAIL %s: %s\n", p, err);
		return 1;
	}
	m = load("supernet.onnx");
	nl = mi_model_switch_count(m);
	nc = mi_model_config_count(m);
	CHECK(nl == 3, "%d switchable layers, expected 3", nl);
	CHECK(nc == 27, "%d configurations, expected 27", nc);
	if (nl != 3 || nc != 27)
		return 1;
	for (int l = 0; l < nl; l++) {
		CHECK(!mi_model_switch_info(m, l, &info[l]), "info %d", l);
		CHECK(info[l].nvariants == 3 && info[l].current == -1,
		      "layer %d: %d variants, current %d", l,
		      info[l].nvariants, info[l].current);
		if (l)
			CHECK(info[l].in_channels == info[l - 1].out_channels,
			      "layer %s takes %d channels, %s gives %d",
			      info[l].name, info[l].in_channels,
			      info[l - 1].name, info[l - 1].out_channels);
	}
	printf("ok   %d switchable layers (%s %d->%d, %s %d->%d, %s %d->%d), %d configurations\n",
	       nl, info[0].name, info[0].in_channels, info[0].out_channels,
	       info[1].name, info[1].in_channels, info[1].out_channels,
	       info[2].name, info[2].in_channels, info[2].out_channels, nc);
	full_live = live_nodes(m);
	{
		float *full = run(m, &n);
		struct mi_model *d;
		float *dd;
		int def[3] = { 0 }, got[3];

		/* the file's own selection == the metadata's default */
		for (int l = 0; l < nl; l++)
			for (int k = 0; k < 3; k++)
				if (*(float *)m->g.tensors[m->sw->layers[l].sel_t[k]].data)
					def[l] = k;
		d = load("supernet.onnx");
		CHECK(!mi_model_set_config(d, def), "set default: %s",
		      mi_last_error());
		CHECK(mi_model_get_config(d, got) == 1 &&
		      !memcmp(got, def, sizeof(def)), "get_config");
		dd = run(d, &n);
		CHECK(relerr(dd, full, n) < 1e-5,
		      "default pruned vs full graph: %g", relerr(dd, full, n));
		free(dd);
		free(full);
		mi_model_free(d);
	}

	ref = calloc(nc, sizeof(*ref));
	sw_ns = calloc(nc * 10 + 1, sizeof(double));
	for (int i = 0; i < nc; i++) {
		struct mi_switch_config c;
		struct mi_tensor o;
		float *full;
		double t0, e_full, e_ort;
		int choice[3];

		mi_model_config(m, i, &c);
		for (int l = 0; l < nl; l++)
			choice[l] = c.choice[l];
		name_of(choice, nl, cname);
		snprintf(p, sizeof(p), "config_%s.onnx", cname);
		f = load(p);
		full = run(f, &n);
		mi_model_free(f);
		t0 = now_ns();
		CHECK(!mi_model_set_config(m, choice), "set %s: %s", cname,
		      mi_last_error());
		sw_ns[nsw++] = now_ns() - t0;
		ref[i] = run(m, &n);
		e_full = relerr(ref[i], full, n);
		snprintf(p, sizeof(p), "%s/ort_%s.npy", dir, cname);
		CHECK(!mi_npy_read(p, &o, err, sizeof(err)), "%s: %s", p, err);
		e_ort = relerr(ref[i], o.data, n);
		CHECK(o.nbytes == n * sizeof(float) && e_ort < 1e-4,
		      "config %s vs ONNX Runtime: %g", cname, e_ort);
		CHECK(e_full < 1e-5, "config %s pruned vs full graph: %g",
		      cname, e_full);
		mi_tensor_fini(&o);
		free(full);
		/* pruned: no selector Mul, no unselected branch runs */
		for (int l = 0; l < nl; l++) {
			const struct mi_switch_layer *L = &m->sw->layers[l];

			for (int k = 0; k < L->nvar; k++) {
				int pn = m->g.tensors[L->branch_t[k]].producer;

				CHECK(m->g.nodes[L->mul_n[k]].dead,
				      "%s: selector Mul of %s.%d runs", cname,
				      L->name, k);
				CHECK(k == choice[l] || pn < 0 ||
				      m->g.nodes[pn].dead,
				      "%s: unselected %s.%d runs", cname,
				      L->name, k);
				CHECK(m->g.tensors[L->sel_t[k]].data,
				      "%s: selector weights freed", cname);
			}
		}
		CHECK(live_nodes(m) < full_live, "%s: %d live nodes, full %d",
		      cname, live_nodes(m), full_live);
		if (i < 3 || e_ort >= 1e-4)
			printf("ok   config %s: vs ORT %.2g, vs full graph %.2g, %d of %d nodes, acc %.2f%%\n",
			       cname, e_ort, e_full, live_nodes(m), full_live,
			       c.accuracy);
	}
	/* every branch's weights are still there */
	for (int t = 0; t < m->g.ntensors; t++)
		if (m->g.tensors[t].flags & MI_TF_INITIALIZER)
			CHECK(m->g.tensors[t].data, "initializer %s freed",
			      m->g.tensors[t].name);
	printf("ok   27 configurations: pruned == full graph (< 1e-5) == ONNX Runtime (< 1e-4)\n");

	/* switching under a loop of runs */
	srand(7);
	for (int it = 0; it < 200; it++) {
		struct mi_switch_config c;
		int i = rand() % nc, choice[3];
		float *o;
		double t0;

		mi_model_config(m, i, &c);
		for (int l = 0; l < nl; l++)
			choice[l] = c.choice[l];
		t0 = now_ns();
		CHECK(!mi_model_set_config(m, choice), "switch: %s",
		      mi_last_error());
		sw_ns[nsw++] = now_ns() - t0;
		for (int r = 0; r < 2; r++) {
			o = run(m, &n);
			CHECK(relerr(o, ref[i], n) == 0,
			      "iteration %d config %d run %d differs: %g", it,
			      i, r, relerr(o, ref[i], n));
			free(o);
		}
	}
	qsort(sw_ns, nsw, sizeof(double), cmp_d);
	printf("ok   200 switches under load, every output equal to its configuration's reference\n");
	printf("ok   switch (activation) time over %d switches: P50 %.3f ms, P99 %.3f ms, max %.3f ms\n",
	       nsw, sw_ns[nsw / 2] / 1e6, sw_ns[nsw * 99 / 100] / 1e6,
	       sw_ns[nsw - 1] / 1e6);

	/* errors */
	{
		int bad1[3] = { 0, 3, 0 }, bad2[3] = { -1, 0, 0 }, keep[3],
		    now[3];
		float *o;
		struct mi_model *pl;
		const char *e;

		mi_model_get_config(m, keep);
		CHECK(mi_model_set_config(m, bad1) == -EINVAL, "variant 3");
		e = mi_last_error();
		CHECK(strstr(e, "layer L1 has variants 0..2, not 3"),
		      "message: %s", e);
		printf("ok   bad config: %s\n", e);
		CHECK(mi_model_set_config(m, bad2) == -EINVAL, "variant -1");
		mi_model_get_config(m, now);
		CHECK(!memcmp(keep, now, sizeof(now)), "config changed");
		o = run(m, &n);
		for (int i = 0; i < nc; i++) {
			struct mi_switch_config c;

			mi_model_config(m, i, &c);
			if (c.choice[0] == keep[0] && c.choice[1] == keep[1] &&
			    c.choice[2] == keep[2])
				CHECK(relerr(o, ref[i], n) == 0,
				      "output changed after a bad config");
		}
		free(o);
		CHECK(!mi_model_set_config(m, NULL), "back to full");
		CHECK(mi_model_get_config(m, now) == 0, "full graph");
		CHECK(live_nodes(m) == full_live, "full graph restored");
		pl = load("plain.onnx");
		CHECK(mi_model_switch_count(pl) == 0, "plain has switches");
		CHECK(mi_model_set_config(pl, keep) == -ENOENT, "plain set");
		printf("ok   no switches: %s\n", mi_last_error());
		mi_model_free(pl);
		snprintf(p, sizeof(p), "%s/badmeta.onnx", dir);
		CHECK(mi_model_load(p, NULL, &pl) == -EINVAL,
		      "bad metadata loads");
		e = mi_last_error();
		CHECK(strstr(e, "metainfer.switch metadata"), "message: %s", e);
		printf("ok   bad metadata: %s\n", e);
		snprintf(p, sizeof(p), "%s/badctl.onnx", dir);
		CHECK(mi_model_load(p, NULL, &pl) == -EINVAL,
		      "a truncated controller loads");
		e = mi_last_error();
		CHECK(strstr(e, "metainfer.metactl metadata"), "message: %s", e);
		printf("ok   bad controller: %s\n", e);
	}

	/* meta-controller: the trained one check_supernet.py stored */
	CHECK(m->sw && m->sw->ctl, "supernet.onnx has no trained controller");
	{
		struct mi_meta_device healthy = { .health_present = 0x3f,
			.health = { 1, 1, 0, 1, 1, 1 } };
		struct mi_meta_device hot = healthy, slow = healthy;
		struct mi_meta_goal goal = { .min_accuracy = 0 };
		struct mi_meta_result rh, rs, rt;
		struct mi_switch_config best;
		int ch[3], cs[3], ct[3], top = 0;

		for (int i = 0; i < nc; i++) {
			struct mi_switch_config c;

			mi_model_config(m, i, &c);
			mi_model_config(m, top, &best);
			if (c.accuracy > best.accuracy ||
			    (c.accuracy == best.accuracy &&
			     c.latency_us < best.latency_us))
				top = i;
		}
		mi_model_config(m, top, &best);
		goal.latency_budget_us = best.latency_us * 1.001;
		CHECK(!mi_meta_choose(m, &healthy, &goal, ch, &rh), "choose");
		CHECK(rh.fits && rh.accuracy == best.accuracy,
		      "healthy: %.2f%% in %.1f us, best %.2f%%", rh.accuracy,
		      rh.predicted_us, best.accuracy);
		slow.health[0] = 0.4;	/* compute readiness */
		CHECK(!mi_meta_choose(m, &slow, &goal, cs, &rs), "choose");
		hot.health[3] = 0.0;	/* thermal headroom */
		CHECK(!mi_meta_choose(m, &hot, &goal, ct, &rt), "choose");
		mi_model_config(m, rs.config, &best);
		CHECK(rs.config != rh.config || !rs.fits,
		      "a busy device keeps the configuration");
		CHECK(rt.config != rh.config || !rt.fits,
		      "a hot device keeps the configuration");
		{
			struct mi_switch_config ch_h, ch_s, ch_t;

			mi_model_config(m, rh.config, &ch_h);
			mi_model_config(m, rs.config, &ch_s);
			mi_model_config(m, rt.config, &ch_t);
			CHECK(ch_t.latency_us < ch_h.latency_us &&
			      ch_s.latency_us < ch_h.latency_us,
			      "busy %.1f us / hot %.1f us: not cheaper than healthy %.1f us",
			      ch_s.latency_us, ch_t.latency_us,
			      ch_h.latency_us);
		}
		printf("ok   meta-controller, budget %.1f us: healthy -> %d%d%d (%.2f%%, %.1f us); compute 0.4 -> %d%d%d (%.2f%%, %.1f us); thermal 0 -> %d%d%d (%.2f%%, %.1f us)\n",
		       goal.latency_budget_us, ch[0], ch[1], ch[2], rh.accuracy,
		       rh.predicted_us, cs[0], cs[1], cs[2], rs.accuracy,
		       rs.predicted_us, ct[0], ct[1], ct[2], rt.accuracy,
		       rt.predicted_us);
		/* a device whose own table makes dws ten times slower */
		{
			double tab[MI_SWITCH_MAX_LAYERS * MI_SWITCH_MAX_VARIANTS];
			struct mi_meta_device own = healthy;
			struct mi_meta_goal fast = { 0 };
			int co[3];

			for (int l = 0; l < nl; l++)
				for (int k = 0; k < 3; k++)
					tab[l * MI_SWITCH_MAX_VARIANTS + k] =
						info[l].latency_us[k] *
						(k == MI_META_DWS ? 10 : 1);
			own.latency_us = tab;
			CHECK(!mi_meta_choose(m, &healthy, &fast, ch, &rh),
			      "choose");
			CHECK(!mi_meta_choose(m, &own, &fast, co, &rs),
			      "choose");
			CHECK(co[0] != MI_META_DWS && co[1] != MI_META_DWS &&
			      co[2] != MI_META_DWS,
			      "own table: %d%d%d has a dws layer", co[0], co[1],
			      co[2]);
			printf("ok   fastest: model's table -> %d%d%d (%.1f us); device table with dws x10 -> %d%d%d (%.1f us)\n",
			       ch[0], ch[1], ch[2], rh.predicted_us, co[0],
			       co[1], co[2], rs.predicted_us);
		}
		/* without a stored controller: the fallback formula */
		{
			struct mi_model *fm = load("config_000.onnx");
			struct mi_meta_result rf;

			CHECK(fm->sw && !fm->sw->ctl,
			      "config_000.onnx has a controller");
			CHECK(!mi_meta_choose(fm, &hot, &goal, ch, &rf) &&
			      rf.config >= 0,
			      "fallback: %s", mi_last_error());
			printf("ok   no stored controller: the formula, thermal 0 -> %d%d%d (%.1f us)\n",
			       ch[0], ch[1], ch[2], rf.predicted_us);
			mi_model_free(fm);
		}
		goal.latency_budget_us = 0;
		goal.min_accuracy = 101;
		CHECK(!mi_meta_choose(m, &healthy, &goal, ch, &rh) && !rh.fits,
		      "impossible floor");
	}
	for (int i = 0; i < nc; i++)
		free(ref[i]);
	free(ref);
	free(sw_ns);
	mi_model_free(m);
	mi_tensor_fini(&x);
	printf("%s test-supernet\n", fails ? "FAIL" : "PASS");
	return fails ? 1 : 0;
}
