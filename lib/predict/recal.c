// SPDX-License-Identifier: MIT
/*
 * Recalibration of one device's predictor terms from the jobs it ran
 * (predict.h, "recalibration"; Documentation/predict.rst, "Closed loop").
 *
 * A device reports one time per job, not per node, and a job holds
 * nodes of several op classes, so the per-class corrections are fitted
 * jointly: with f[c] the factor of class c and e_k(f) a node's share of
 * its job's predicted time (the launch paid once, as mi_pred_plan()),
 *
 *   P_j(f) = sum_{k in j} e_k(f),
 *   f[c]  <- f[c] * sum_j a_jc * M_j / P_j(f) / sum_j a_jc,
 *   a_jc   = sum_{k in j, class c} e_k(f),
 *
 * the multiplicative update of a non-negative linear fit (each job's
 * error shared among its classes by their predicted time).  Classes
 * only ever seen together move together; a class alone in some job is
 * pinned by it.  The fitted factors are then added to the device's
 * per-class log bias with MI_PRED_RECAL_WEIGHT, so a later
 * recalibration starts from them.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "predict/predict.h"

#define RECAL_ITERS	60

/* Node times of job j with class factors f (NULL: 1), into e[]. */
static double job_times(const struct mi_predictor *p,
			const struct mi_pred_dev *dev,
			const struct mi_pred_jobs *jobs, int j, const double *f,
			double *e)
{
	double sum = 0, launch = dev->caps.launch_ns;

	for (int k = jobs->first[j], i = 0; k < jobs->first[j + 1]; k++, i++) {
		const struct mi_pred_node *n = &jobs->nodes[k];
		double t = mi_pred_node_ns(p, n, dev);

		if (f && n->cls >= 0 && n->cls < MI_PC_COUNT)
			t *= f[n->cls];
		if (i)
			t = fmax(t - launch, 0.1 * t);
		if (e)
			e[i] = t;
		sum += t;
	}
	return sum;
}

double mi_pred_job_ns(const struct mi_predictor *p,
		      const struct mi_pred_dev *dev,
		      const struct mi_pred_jobs *jobs, int j)
{
	if (!jobs || j < 0 || j >= jobs->njobs)
		return 0;
	return job_times(p, dev, jobs, j, NULL, NULL);
}

static int max_job_nodes(const struct mi_pred_jobs *jobs)
{
	int mx = 0;

	for (int j = 0; j < jobs->njobs; j++)
		if (jobs->first[j + 1] - jobs->first[j] > mx)
			mx = jobs->first[j + 1] - jobs->first[j];
	return mx;
}

int mi_pred_recalibrate(const struct mi_predictor *p, struct mi_pred_dev *dev,
			const struct mi_pred_jobs *jobs,
			struct mi_pred_recal *r)
{
	double f[MI_PC_COUNT], num[MI_PC_COUNT], den[MI_PC_COUNT];
	double dma_w = 0, dma_t = 0, cmp_w = 0, cmp_t = 0;
	bool seen[MI_PC_COUNT] = { false };
	struct mi_pred_recal own;
	int mx, nused = 0;
	double *e;

	if (!r)
		r = &own;
	memset(r, 0, sizeof(*r));
	if (!dev || !jobs || jobs->njobs < 1 || !jobs->first || !jobs->nodes ||
	    !jobs->meas_ns)
		return mi_set_error(-EINVAL, "recalibrate: no jobs");
	mx = max_job_nodes(jobs);
	e = calloc(mx + 1, sizeof(double));
	if (!e)
		return -ENOMEM;
	for (int c = 0; c < MI_PC_COUNT; c++) {
		f[c] = 1;
		r->factor[c] = 1;
	}
	for (int j = 0; j < jobs->njobs; j++) {
		if (jobs->meas_ns[j] <= 0 || jobs->first[j + 1] <= jobs->first[j])
			continue;
		nused++;
		r->meas_ns += jobs->meas_ns[j];
		r->pred_ns += job_times(p, dev, jobs, j, NULL, NULL);
		for (int k = jobs->first[j]; k < jobs->first[j + 1]; k++)
			if (jobs->nodes[k].cls >= 0 &&
			    jobs->nodes[k].cls < MI_PC_COUNT)
				seen[jobs->nodes[k].cls] = true;
	}
	if (!nused || r->pred_ns <= 0) {
		free(e);
		return mi_set_error(-EINVAL, "recalibrate: no measured job");
	}
	for (int it = 0; it < RECAL_ITERS; it++) {
		memset(num, 0, sizeof(num));
		memset(den, 0, sizeof(den));
		for (int j = 0; j < jobs->njobs; j++) {
			double m = jobs->meas_ns[j], pj;

			if (m <= 0 || jobs->first[j + 1] <= jobs->first[j])
				continue;
			pj = job_times(p, dev, jobs, j, f, e);
			if (pj <= 0)
				continue;
			for (int k = jobs->first[j], i = 0;
			     k < jobs->first[j + 1]; k++, i++) {
				int c = jobs->nodes[k].cls;

				if (c < 0 || c >= MI_PC_COUNT)
					continue;
				num[c] += e[i] * m / pj;
				den[c] += e[i];
			}
		}
		for (int c = 0; c < MI_PC_COUNT; c++)
			if (den[c] > 0)
				f[c] *= num[c] / den[c];
	}
	/* the factors, and which kind of node they moved most */
	for (int j = 0; j < jobs->njobs; j++) {
		if (jobs->meas_ns[j] <= 0 || jobs->first[j + 1] <= jobs->first[j])
			continue;
		r->after_ns += job_times(p, dev, jobs, j, f, NULL);
		job_times(p, dev, jobs, j, NULL, e);
		for (int k = jobs->first[j], i = 0; k < jobs->first[j + 1];
		     k++, i++) {
			const struct mi_pred_node *n = &jobs->nodes[k];
			double fc = n->cls >= 0 && n->cls < MI_PC_COUNT ?
					    f[n->cls] : 1;

			if (mi_pred_dma_bound(n, &dev->caps)) {
				dma_w += e[i];
				dma_t += e[i] * log(fc);
			} else {
				cmp_w += e[i];
				cmp_t += e[i] * log(fc);
			}
		}
	}
	free(e);
	r->dma_factor = dma_w > 0 ? exp(dma_t / dma_w) : 1;
	r->compute_factor = cmp_w > 0 ? exp(cmp_t / cmp_w) : 1;
	r->dma = fabs(log(r->dma_factor)) >= fabs(log(r->compute_factor));
	/* fold in: the new log bias of a class is the old one plus its
	 * fitted factor, weighted to outweigh the earlier refinements */
	{
		double target[MI_PC_COUNT];

		for (int c = 0; c < MI_PC_COUNT; c++)
			target[c] = mi_pred_dev_bias(dev, c) + log(f[c]);
		for (int c = 0; c < MI_PC_COUNT; c++) {
			if (!seen[c])
				continue;
			r->factor[c] = f[c];
			dev->bias_sum[c] = target[c] * MI_PRED_RECAL_WEIGHT;
			dev->bias_n[c] = MI_PRED_RECAL_WEIGHT;
		}
	}
	return 0;
}
