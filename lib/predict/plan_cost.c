// SPDX-License-Identifier: MIT
/*
 * A whole plan's latency and memory from its nodes' predicted times.
 *
 * Latency: list scheduling in the plan's execution order.  Each device
 * runs its nodes one after another; a node starts when its device is free
 * and every input has arrived: an input made on another device (or a
 * graph input of an accelerator node) first crosses the link at the
 * accelerator's link bandwidth.  Consecutive nodes of one accelerator
 * that depend on each other form one job and pay its launch once.  Work
 * on different devices overlaps; the result is the finish time of the
 * last node (the critical path).
 *
 * Memory: every node's outputs live on its device from the node to their
 * last consumer (to the end for graph outputs); an output consumed on
 * another device also lives there, as a copy, over the same span.  The
 * peak is the largest sum of live bytes at any step; weights (the nodes'
 * constant inputs) are reported separately.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "predict/predict.h"

static int dev_of(const struct mi_pred_pnode *v, const char *const *names,
		  int ndevs)
{
	for (int d = 0; d < ndevs; d++)
		if (!strcmp(v->device, names[d]))
			return d;
	return -1;
}

static double xfer_ns(const struct mi_pred_dev *a, const struct mi_pred_dev *b,
		      double bytes)
{
	double bw = 0;

	if (a->caps.link_bytes_per_s > 0)
		bw = a->caps.link_bytes_per_s;
	if (b->caps.link_bytes_per_s > 0 &&
	    (bw == 0 || b->caps.link_bytes_per_s < bw))
		bw = b->caps.link_bytes_per_s;
	return bw > 0 ? bytes / bw * 1e9 : 0;
}

int mi_pred_plan(const struct mi_predictor *p, const struct mi_pred_graph *pg,
		 struct mi_pred_dev *const *devs, const char *const *names,
		 int ndevs, struct mi_pred_result *r)
{
	return mi_pred_plan_ns(p, pg, devs, names, ndevs, NULL, r);
}

int mi_pred_plan_ns(const struct mi_predictor *p,
		    const struct mi_pred_graph *pg,
		    struct mi_pred_dev *const *devs, const char *const *names,
		    int ndevs, const double *node_ns, struct mi_pred_result *r)
{
	double freet[MI_PRED_MAXDEV] = { 0 }, *fin = NULL, *cur = NULL;
	int *dv = NULL, last[MI_PRED_MAXDEV], err = -ENOMEM;

	memset(r, 0, sizeof(*r));
	if (ndevs < 1 || ndevs > MI_PRED_MAXDEV)
		return mi_set_error(-EINVAL, "predict: 1 to %d devices",
				    MI_PRED_MAXDEV);
	r->ndevs = ndevs;
	for (int d = 0; d < ndevs; d++) {
		snprintf(r->dev_name[d], sizeof(r->dev_name[d]), "%s", names[d]);
		last[d] = -1;
	}
	fin = calloc(pg->n + 1, sizeof(double));
	dv = calloc(pg->n + 1, sizeof(int));
	cur = calloc((size_t)ndevs * (pg->n + 1), sizeof(double));
	if (!fin || !dv || !cur)
		goto out;
	for (int k = 0; k < pg->n; k++) {
		const struct mi_pred_pnode *v = &pg->v[k];
		const struct mi_pred_dev *dev;
		double t, ready = 0;
		bool cont = false;
		int d = dev_of(v, names, ndevs);

		if (d < 0) {
			err = mi_set_error(-ENODEV,
				"predict: node '%s' is planned on device '%s', which is not among the devices given",
				v->name, v->device);
			goto out;
		}
		dv[k] = d;
		dev = devs[d];
		t = node_ns && node_ns[k] >= 0 ? node_ns[k] :
						 mi_pred_node_ns(p, &v->node, dev);
		for (int i = 0; i < v->ninputs; i++) {
			int s = v->inputs[i];
			double a;

			if (s < 0) {
				if (d == 0 || v->in_bytes[i] <= 0)
					continue;
				a = xfer_ns(devs[0], dev, v->in_bytes[i]);
				r->xfer_ns[d] += a;
			} else if (dv[s] != d) {
				a = fin[s] + xfer_ns(devs[dv[s]], dev,
						     v->in_bytes[i]);
				r->xfer_ns[d] += a - fin[s];
			} else {
				a = fin[s];
				if (s == last[d])
					cont = true;
			}
			ready = fmax(ready, a);
		}
		/* the CPU pays its per-node cost; an accelerator one launch
		 * per job */
		if (d != 0 && cont && last[d] == k - 1)
			t = fmax(t - dev->caps.launch_ns, 0.1 * t);
		else
			r->jobs[d]++;
		fin[k] = fmax(ready, freet[d]) + t;
		freet[d] = fin[k];
		r->busy_ns[d] += t;
		r->weight_bytes[d] += v->node.w_bytes;
		last[d] = k;
		if (fin[k] > r->total_ns)
			r->total_ns = fin[k];
	}
	/* live bytes per device and step */
	for (int k = 0; k < pg->n; k++) {
		const struct mi_pred_pnode *v = &pg->v[k];
		int end = v->is_output || v->last_use < 0 ? pg->n - 1 :
							     v->last_use;
		bool on[MI_PRED_MAXDEV] = { false };

		on[dv[k]] = true;
		for (int j = k + 1; j <= end && j < pg->n; j++)
			for (int i = 0; i < pg->v[j].ninputs; i++)
				if (pg->v[j].inputs[i] == k)
					on[dv[j]] = true;
		for (int d = 0; d < ndevs; d++)
			if (on[d])
				for (int s = k; s <= end; s++)
					cur[(size_t)d * pg->n + s] += v->out_bytes;
	}
	for (int d = 0; d < ndevs; d++)
		for (int s = 0; s < pg->n; s++)
			r->peak_bytes[d] = fmax(r->peak_bytes[d],
						cur[(size_t)d * pg->n + s]);
	err = 0;
out:
	free(fin);
	free(dv);
	free(cur);
	return err;
}

/*
 * Workspace a conv variant allocates while it runs, from the kernels'
 * own sizes: im2col's column buffer Cg * kh * kw * Ho * Wo elements
 * (lib/ops/conv.c, lib/quant), Winograd F(4,3)'s transformed input and
 * GEMM outputs 36 * (C + M) * tiles plus its transformed filter, 36/9 of
 * the weights (lib/cpu/winograd.c; tiles of 4x4 outputs, a square output
 * assumed).  Direct, depthwise and 1x1 GEMM variants: none counted.
 */
double mi_pred_variant_ws(const struct mi_pred_node *n, const char *variant)
{
	double es = n->int8 ? 1 : 4, g = n->groups > 0 ? n->groups : 1;

	if (!variant || n->cls > MI_PC_DWCONV)
		return 0;
	if (strstr(variant, "winograd")) {
		double t = ceil(sqrt(n->out_hw) / 4);

		return 36 * (n->cin + n->cout) * t * t * 4 + n->w_bytes * 3;
	}
	if (strstr(variant, "im2col")) {
		if (n->kh * n->kw == 1 && n->stride == 1)
			return 0;
		return n->cin / g * n->kh * n->kw * n->out_hw * es;
	}
	return 0;
}

int mi_pred_plan_live(const struct mi_pred_graph *pg, const char *const *names,
		      int ndevs, double *live)
{
	int *dv = calloc(pg->n + 1, sizeof(int));

	if (!dv)
		return -ENOMEM;
	for (int k = 0; k < pg->n; k++) {
		dv[k] = dev_of(&pg->v[k], names, ndevs);
		live[k] = 0;
		if (dv[k] < 0) {
			free(dv);
			return -ENODEV;
		}
	}
	/* as mi_pred_plan_ns: a tensor lives from its node to its last
	 * consumer, once on its device and once per other consumer device */
	for (int k = 0; k < pg->n; k++) {
		const struct mi_pred_pnode *v = &pg->v[k];
		int end = v->is_output || v->last_use < 0 ? pg->n - 1 :
							     v->last_use;
		bool on[MI_PRED_MAXDEV] = { false };
		int copies = 0;

		on[dv[k]] = true;
		for (int j = k + 1; j <= end && j < pg->n; j++)
			for (int i = 0; i < pg->v[j].ninputs; i++)
				if (pg->v[j].inputs[i] == k)
					on[dv[j]] = true;
		for (int d = 0; d < ndevs; d++)
			copies += on[d];
		for (int s = k; s <= end && s < pg->n; s++)
			live[s] += copies * v->out_bytes;
	}
	free(dv);
	return 0;
}
