// SPDX-License-Identifier: MIT
/*
 * The closed loop after deployment (Documentation/predict.rst, "Closed
 * loop"): watch a placed model's device times while it runs, sample its
 * jobs on demand, recalibrate a device's predictor terms when measured and
 * predicted differ by more than the tolerance, and re-plan with the
 * recalibrated predictor (lib/plan/search.c).
 *
 * States, per model:
 *
 *   SAMPLE  a window of o.window runs whose per-job device times are kept
 *           (after load: warm-up; after a re-plan; after jitter).  At its
 *           end, per accelerator: measured = sum of the jobs' median
 *           times, predicted = sum of mi_pred_job_ns().  A device outside
 *           the tolerance is recalibrated (mi_pred_recalibrate) and the
 *           model re-planned, then a new window checks the new plan: one
 *           iteration.  All devices within it: converged.
 *   WATCH   only each run's busy time per device is read (the completion
 *           reports it anyway; nothing is timed or stored).  A device
 *           whose run time leaves the last window's median by more than
 *           o.jitter on two runs in a row (one odd run never acts) opens a
 *           window.
 *
 * The CPU is not recalibrated here: its per-node times need the profiler
 * (MI_MODEL_PROFILE), which this loop does not switch on.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <metainfer/metainfer.h>

#include "internal.h"
#include "plan/place-impl.h"
#include "plan/search-impl.h"
#include "predict/predict.h"

#define ADAPT_TOL	0.20
#define ADAPT_JITTER	0.10
#define ADAPT_WINDOW	5
#define ADAPT_ITERS	3
#define ADAPT_STRIKES	2	/* runs in a row beyond the jitter band */
/* A deployed model runs on: a re-plan's verification is paid once and
 * its gain counted over this many inferences (the search's own default,
 * 1000, is for a one-off tune). */
#define ADAPT_AMORTIZE	100000

enum { A_SAMPLE, A_WATCH };

struct mi_adapt {
	struct mi_model *m;
	struct mi_adapt_opts o;
	struct mi_predictor pred;
	struct mi_adapt_stats st;
	int state;
	int nwin;			/* runs kept in this window */
	char why[64];			/* what opened the window */
	/* per device slot */
	int ndevs;
	uint64_t last_busy[MI_PLACE_MAX_DEVS];
	double base[MI_PLACE_MAX_DEVS];	/* median run busy of the last window */
	int strikes[MI_PLACE_MAX_DEVS];
	double *run_busy[MI_PLACE_MAX_DEVS]; /* per window run */
	/* per job of the current plan: window samples, -1 not run on the
	 * device */
	int njobs;
	double *jsamp;			/* njobs * window */
};

static void say(struct mi_adapt *a, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void say(struct mi_adapt *a, const char *fmt, ...)
{
	va_list ap;

	if (!a->o.log)
		return;
	va_start(ap, fmt);
	vfprintf(a->o.log, fmt, ap);
	va_end(ap);
	fflush(a->o.log);
}

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;

	return a < b ? -1 : a > b;
}

/* Median of the v[i] >= 0 (n at most the window), -1 none. */
static double median(const double *v, int n, int stride)
{
	double t[64];
	int k = 0;

	for (int i = 0; i < n && k < 64; i++)
		if (v[i * stride] >= 0)
			t[k++] = v[i * stride];
	if (!k)
		return -1;
	qsort(t, k, sizeof(double), cmp_double);
	return k & 1 ? t[k / 2] : 0.5 * (t[k / 2 - 1] + t[k / 2]);
}

/* The predictor's view of accelerator slot d: found by name, or added
 * with the advertised caps (as the search's own device setup does). */
static struct mi_pred_dev *pred_dev(struct mi_adapt *a, int d)
{
	struct mi_dev *dev = a->m->place->devs[d];
	struct mi_pred_dev *pd = mi_pred_dev_find(&a->pred, dev->name, true);

	if (pd && pd->caps.macs_per_s <= 0) {
		pd->caps.macs_per_s = (double)dev->caps.macs_per_cycle *
				      dev->caps.clock_khz * 1e3;
		pd->caps.bytes_per_s = (double)dev->caps.dma_bw;
		pd->caps.link_bytes_per_s = (double)dev->caps.dma_bw;
		pd->caps.launch_ns = 5000; /* as the search and predict */
	}
	return pd;
}

static int window_open(struct mi_adapt *a, const char *why)
{
	struct mi_place *pl = a->m->place;

	a->state = A_SAMPLE;
	a->nwin = 0;
	snprintf(a->why, sizeof(a->why), "%s", why);
	a->njobs = pl ? pl->njobs : 0;
	free(a->jsamp);
	a->jsamp = calloc((size_t)(a->njobs + 1) * a->o.window,
			  sizeof(double));
	a->st.windows++;
	return a->jsamp ? 0 : -ENOMEM;
}

/* Device busy of this run per slot, from the running totals. */
static void run_busy(struct mi_adapt *a, double *b)
{
	struct mi_place *pl = a->m->place;

	for (int d = 0; d < a->ndevs; d++) {
		b[d] = (double)(pl->st[d].busy_ns - a->last_busy[d]);
		a->last_busy[d] = pl->st[d].busy_ns;
	}
}

static void resync(struct mi_adapt *a)
{
	struct mi_place *pl = a->m->place;

	for (int d = 0; d < a->ndevs; d++) {
		a->last_busy[d] = pl->st[d].busy_ns;
		a->strikes[d] = 0;
	}
}

/* Per plan node position the device slot it runs on. */
static int *node_slots(struct mi_model *m)
{
	struct mi_graph *g = &m->g;
	int *s = calloc(g->norder + 1, sizeof(int));

	if (!s)
		return NULL;
	for (int k = 0; k < g->norder; k++) {
		int j = mi_place_node_job(m, g->order[k]);

		s[k] = j < 0 ? 0 : m->place->jobs[j].slot;
	}
	return s;
}

/*
 * The device's jobs of this window as the predictor sees them.  Arrays
 * are owned by the caller (free first, nodes, meas).
 */
static int device_jobs(struct mi_adapt *a, const struct mi_pred_graph *pg,
		       int d, struct mi_pred_jobs *jb)
{
	struct mi_model *m = a->m;
	struct mi_place *pl = m->place;
	int *first = calloc(a->njobs + 2, sizeof(int));
	struct mi_pred_node *nodes = calloc(pg->n + 1, sizeof(*nodes));
	double *meas = calloc(a->njobs + 1, sizeof(double));
	int nj = 0, nn = 0;

	if (!first || !nodes || !meas) {
		free(first);
		free(nodes);
		free(meas);
		return -ENOMEM;
	}
	for (int j = 0; j < a->njobs && j < pl->njobs; j++) {
		double med;
		int n0 = nn;

		if (pl->jobs[j].slot != d || !pl->jobs[j].bound)
			continue;
		med = median(&a->jsamp[j], a->nwin, a->njobs);
		if (med <= 0)
			continue;
		for (int k = 0; k < pg->n; k++)
			if (mi_place_node_job(m, m->g.order[k]) == j)
				nodes[nn++] = pg->v[k].node;
		if (nn == n0)
			continue;
		first[nj] = n0;
		meas[nj++] = med;
	}
	first[nj] = nn;
	jb->njobs = nj;
	jb->first = first;
	jb->nodes = nodes;
	jb->meas_ns = meas;
	return 0;
}

static void jobs_free(struct mi_pred_jobs *jb)
{
	free((void *)jb->first);
	free((void *)jb->nodes);
	free((void *)jb->meas_ns);
}

static int replan(struct mi_adapt *a, int *moved)
{
	struct mi_search_opts so = { 0 };
	struct mi_search_result r;
	int *before = node_slots(a->m), *after, err;

	*moved = 0;
	if (!before)
		return -ENOMEM;
	so.pred = &a->pred;
	so.calib = -1;		/* no profiler: the predictor scores */
	so.top = a->o.search_top;
	so.runs = a->o.search_runs;
	so.seed = 1;
	so.amortize = ADAPT_AMORTIZE;
	err = mi_search_run(a->m, &so, &r);
	if (err) {
		free(before);
		return err;
	}
	after = node_slots(a->m);
	for (int k = 0; after && k < a->m->g.norder; k++)
		*moved += before[k] != after[k];
	if (r.kept_default && r.note[0])
		say(a, "  re-plan kept the default plan: %s\n", r.note);
	mi_search_result_fini(&r);
	free(before);
	free(after);
	a->st.replans++;
	a->st.moved += *moved;
	return after ? 0 : -ENOMEM;
}

/* End of a window: compare, recalibrate, re-plan or settle. */
static int window_close(struct mi_adapt *a)
{
	struct mi_pred_graph pg;
	bool recal = false;
	double worst = 1;
	char line[512];
	int err, moved = 0, nrec = 0;
	size_t len = 0;

	err = mi_pred_graph_build(a->m, &a->pred, true, &pg);
	if (err)
		return err;
	line[0] = 0;
	for (int d = 1; d < a->ndevs; d++) {
		struct mi_pred_dev *pd = pred_dev(a, d);
		struct mi_pred_jobs jb;
		struct mi_pred_recal rc;
		double meas = 0, pr = 0, ratio;

		a->base[d] = median(a->run_busy[d], a->nwin, 1);
		if (!pd) {
			err = -ENOMEM;
			break;
		}
		err = device_jobs(a, &pg, d, &jb);
		if (err)
			break;
		for (int j = 0; j < jb.njobs; j++) {
			meas += jb.meas_ns[j];
			pr += mi_pred_job_ns(&a->pred, pd, &jb, j);
		}
		if (!jb.njobs || pr <= 0) {
			jobs_free(&jb);
			continue;
		}
		ratio = meas / pr;
		if (fabs(log(ratio)) > fabs(log(worst)))
			worst = ratio;
		if (fabs(ratio - 1) <= a->o.tolerance) {
			jobs_free(&jb);
			continue;
		}
		err = mi_pred_recalibrate(&a->pred, pd, &jb, &rc);
		jobs_free(&jb);
		if (err)
			break;
		recal = true;
		nrec++;
		a->st.recals++;
		if (len < sizeof(line))
			len += snprintf(line + len, sizeof(line) - len,
					"%sdevice %s: measured %.2fx predicted (%s-bound ops) -> recalibrated",
					nrec > 1 ? "; " : "",
					a->m->place->devs[d]->name, ratio,
					rc.dma ? "dma" : "compute");
	}
	mi_pred_graph_fini(&pg);
	if (err)
		return err;
	a->st.ratio = worst;
	if (!recal) {
		if (a->st.iters) {
			say(a, "converged after %d recalibration%s (%s): measured %.2fx predicted\n",
			      a->st.iters, a->st.iters > 1 ? "s" : "", a->why,
			      worst);
			if (a->st.iters > a->st.max_iters_seen)
				a->st.max_iters_seen = a->st.iters;
		}
		a->st.iters = 0;
		a->st.converged = 1;
		a->state = A_WATCH;
		resync(a);
		return 0;
	}
	a->st.converged = 0;
	a->st.iters++;
	if (a->st.iters > a->o.max_iters) {
		say(a, "%s; not converged after %d recalibrations: watching\n",
		      line, a->o.max_iters);
		a->st.nonconverged++;
		a->st.iters = 0;
		a->state = A_WATCH;
		resync(a);
		return 0;
	}
	if (a->o.save && (err = mi_pred_save(&a->pred, a->o.save)))
		return err;
	err = replan(a, &moved);
	if (err)
		return err;
	say(a, "%s, re-planned: %d node%s moved (iteration %d, %s)\n", line,
	      moved, moved == 1 ? "" : "s", a->st.iters, a->why);
	resync(a);
	err = window_open(a, "after re-plan");
	return err ? err : 1;
}

int mi_adapt_observe(struct mi_adapt *a)
{
	struct mi_place *pl;
	double b[MI_PLACE_MAX_DEVS];

	if (!a)
		return mi_set_error(-EINVAL, "adapt: no loop");
	pl = a->m->place;
	a->st.runs++;
	if (!pl || a->ndevs < 2)
		return 0;
	run_busy(a, b);
	if (a->state == A_SAMPLE) {
		if (!a->jsamp)
			return -ENOMEM;
		if (pl->njobs != a->njobs)	/* re-placed under us */
			return window_open(a, "placement changed");
		for (int j = 0; j < a->njobs; j++)
			a->jsamp[a->nwin * a->njobs + j] =
				pl->jobs[j].bound && pl->jobs[j].state == MI_PJ_DEV ?
					(double)pl->jobs[j].dj.busy_ns : -1;
		for (int d = 0; d < a->ndevs; d++)
			a->run_busy[d][a->nwin] = b[d];
		a->st.sampled++;
		if (++a->nwin < a->o.window)
			return 0;
		return window_close(a);
	}
	/* watching: two runs in a row beyond the band open a window */
	for (int d = 1; d < a->ndevs; d++) {
		if (a->base[d] <= 0)
			continue;
		if (fabs(b[d] / a->base[d] - 1) > a->o.jitter)
			a->strikes[d]++;
		else
			a->strikes[d] = 0;
		if (a->strikes[d] >= ADAPT_STRIKES) {
			char why[64];

			snprintf(why, sizeof(why), "jitter on %s: %+.0f%%",
				 pl->devs[d]->name,
				 (b[d] / a->base[d] - 1) * 100);
			a->st.triggers++;
			return window_open(a, why);
		}
	}
	return 0;
}

int mi_adapt_new(struct mi_model *m, const struct mi_adapt_opts *o,
		 struct mi_adapt **ap)
{
	struct mi_adapt *a;
	int err;

	if (!m || !ap)
		return mi_set_error(-EINVAL, "adapt: no model");
	if (o && (o->tolerance < 0 || o->tolerance >= 1 || o->jitter < 0 ||
		  o->jitter >= 1 || o->window < 0 || o->window > 64 ||
		  o->max_iters < 0))
		return mi_set_error(-EINVAL, "adapt: option out of range");
	for (int i = 0; o && i < 4; i++)
		if (o->reserved[i])
			return mi_set_error(-EINVAL, "adapt: reserved field set");
	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	if (o)
		a->o = *o;
	if (!a->o.tolerance)
		a->o.tolerance = ADAPT_TOL;
	if (!a->o.jitter)
		a->o.jitter = ADAPT_JITTER;
	if (!a->o.window)
		a->o.window = ADAPT_WINDOW;
	if (!a->o.max_iters)
		a->o.max_iters = ADAPT_ITERS;
	if (!a->o.search_top)
		a->o.search_top = 3;
	if (!a->o.search_runs)
		a->o.search_runs = 3;
	a->m = m;
	mi_pred_init(&a->pred);
	if (a->o.predictor && (err = mi_pred_load(&a->pred, a->o.predictor))) {
		mi_adapt_free(a);
		return mi_set_error(err, "adapt: %s: cannot load the predictor (%s)",
				    o->predictor, strerror(-err));
	}
	a->ndevs = m->place ? m->place->ndevs : 1;
	for (int d = 0; d < a->ndevs; d++) {
		a->run_busy[d] = calloc(a->o.window, sizeof(double));
		if (!a->run_busy[d]) {
			mi_adapt_free(a);
			return -ENOMEM;
		}
	}
	if (m->place)
		resync(a);
	if (window_open(a, "warm-up")) {
		mi_adapt_free(a);
		return -ENOMEM;
	}
	*ap = a;
	return 0;
}

int mi_adapt_stats(const struct mi_adapt *a, struct mi_adapt_stats *st)
{
	if (!a || !st)
		return mi_set_error(-EINVAL, "adapt: no loop");
	*st = a->st;
	st->sampling = a->state == A_SAMPLE;
	return 0;
}

void mi_adapt_free(struct mi_adapt *a)
{
	if (!a)
		return;
	for (int d = 0; d < MI_PLACE_MAX_DEVS; d++)
		free(a->run_busy[d]);
	free(a->jsamp);
	mi_pred_fini(&a->pred);
	free(a);
}
