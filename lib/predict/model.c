// SPDX-License-Identifier: MIT
/*
 * From a loaded, planned model to the predictor's plain data: per node of
 * the execution order its features (lib/features.c's MACs, tensor bytes,
 * shapes), the plan entry's variant/precision/device/threads, its
 * producers and tensor lifetimes; and the CPU as devices (one per ISA
 * path and thread count).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "plan/plan-impl.h"
#include "predict/predict.h"

static int op_class(const struct mi_graph *g, const struct mi_node *n)
{
	static const char *const pool[] = { "MaxPool", "AveragePool",
		"GlobalAveragePool", "GlobalMaxPool", "QLinearAveragePool",
		"QLinearGlobalAveragePool", NULL };
	static const char *const norm[] = { "Softmax", "LogSoftmax",
		"LayerNormalization", "BatchNormalization",
		"InstanceNormalization", "ReduceMean", "ReduceSum", "ReduceMax",
		"LRN", NULL };
	static const char *const data[] = { "Reshape", "Transpose", "Concat",
		"Slice", "Gather", "Flatten", "Split", "Squeeze", "Unsqueeze",
		"Shape", "Pad", "Resize", "Expand", "Identity", "Cast",
		"QuantizeLinear", "DequantizeLinear", "Tile", NULL };
	const char *op = n->op_type;

	if (strstr(op, "Conv")) {
		int64_t grp = mi_attr_int(n, "group", 1);
		struct mi_tensor *w = mi_in((struct mi_graph *)g,
					    (struct mi_node *)n,
					    !strcmp(op, "QLinearConv") ? 3 : 1);

		if (grp > 1)
			return MI_PC_DWCONV;
		if (w && w->ndim >= 4 && w->dims[2] * w->dims[3] == 1)
			return MI_PC_CONV1X1;
		return MI_PC_CONV;
	}
	if (strstr(op, "Gemm") || strstr(op, "MatMul"))
		return MI_PC_GEMM;
	for (int i = 0; pool[i]; i++)
		if (!strcmp(op, pool[i]))
			return MI_PC_POOL;
	for (int i = 0; norm[i]; i++)
		if (!strcmp(op, norm[i]))
			return MI_PC_NORM;
	for (int i = 0; data[i]; i++)
		if (!strcmp(op, data[i]))
			return MI_PC_DATA;
	return MI_PC_ELTWISE;
}

static double tbytes(const struct mi_tensor *t)
{
	int64_t n = mi_tensor_numel(t);

	return n > 0 ? (double)n * mi_dtype_size(t->dtype) : 0;
}

static bool is_const(const struct mi_tensor *t)
{
	return t->flags & (MI_TF_CONST | MI_TF_INITIALIZER | MI_TF_SHAPEVAL);
}

static void node_feats(struct mi_graph *g, struct mi_node *n,
		       struct mi_pred_node *f)
{
	struct mi_tensor *y = mi_out(g, n, 0), *a = NULL;
	const int64_t *ks, *st;
	int nk = 0, ns = 0;

	memset(f, 0, sizeof(*f));
	f->cls = op_class(g, n);
	f->groups = (int)mi_attr_int(n, "group", 1);
	for (int i = 0; i < n->ninputs; i++) {
		struct mi_tensor *t = mi_in(g, n, i);

		if (!t)
			continue;
		if (is_const(t)) {
			f->w_bytes += tbytes(t);
		} else {
			f->in_bytes += tbytes(t);
			if (!a)
				a = t;
		}
	}
	for (int i = 0; i < n->noutputs; i++)
		f->out_bytes += tbytes(mi_out(g, n, i));
	f->macs = (double)mi_node_macs(g, n);
	ks = mi_attr_ints(n, "kernel_shape", &nk);
	st = mi_attr_ints(n, "strides", &ns);
	f->kh = nk > 0 ? (int)ks[0] : 1;
	f->kw = nk > 1 ? (int)ks[1] : f->kh;
	f->stride = ns > 0 ? (int)st[0] : 1;
	if (f->cls <= MI_PC_DWCONV && nk == 0) {
		struct mi_tensor *w = mi_in(g, n, 1);

		if (w && w->ndim >= 4) {
			f->kh = (int)w->dims[2];
			f->kw = (int)w->dims[3];
		}
	}
	if (a && a->ndim >= 2)
		f->cin = (double)a->dims[1];
	if (y && y->ndim >= 2 && mi_tensor_shape_known(y)) {
		f->cout = (double)y->dims[1];
		f->out_hw = 1;
		for (int i = 2; i < y->ndim; i++)
			f->out_hw *= (double)y->dims[i];
	}
	if (f->macs <= 0) {
		/* element work: outputs (x window for pooling) */
		f->macs = y ? (double)(mi_tensor_numel(y) > 0 ?
					       mi_tensor_numel(y) : 0) : 0;
		if (f->cls == MI_PC_POOL) {
			if (nk)
				f->macs *= f->kh * f->kw;
			else if (a && a->ndim == 4)
				f->macs *= (double)(a->dims[2] * a->dims[3]);
		}
	}
}

void mi_pred_graph_fini(struct mi_pred_graph *pg)
{
	for (int i = 0; i < pg->n; i++) {
		free(pg->v[i].name);
		free(pg->v[i].op);
		free(pg->v[i].device);
		free(pg->v[i].variant);
		free(pg->v[i].inputs);
		free(pg->v[i].in_bytes);
	}
	free(pg->v);
	memset(pg, 0, sizeof(*pg));
}

int mi_pred_graph_build(struct mi_model *m, struct mi_predictor *p, bool add,
			struct mi_pred_graph *pg)
{
	struct mi_graph *g = &m->g;
	struct mi_plan *plan = NULL;
	struct mi_plan_rb rb;
	int *pos = NULL, err;

	memset(pg, 0, sizeof(*pg));
	err = mi_model_plan_get(m, &plan);
	if (err)
		return err;
	err = mi_plan_rb_init(&rb, m);
	if (err) {
		mi_plan_free(plan);
		return err;
	}
	err = -ENOMEM;
	pos = malloc((g->nnodes + 1) * sizeof(int));
	pg->v = calloc(g->norder + 1, sizeof(*pg->v));
	if (!pos || !pg->v)
		goto out;
	for (int i = 0; i < g->nnodes; i++)
		pos[i] = -1;
	for (int k = 0; k < g->norder; k++)
		pos[g->order[k]] = k;
	for (int t = 0; t < g->ntensors; t++)
		if ((g->tensors[t].flags & MI_TF_INITIALIZER))
			pg->weight_bytes += tbytes(&g->tensors[t]);
	pg->n = g->norder;
	for (int k = 0; k < g->norder; k++) {
		int ni = g->order[k];
		struct mi_node *n = &g->nodes[ni];
		struct mi_pred_pnode *v = &pg->v[k];
		const struct mi_plan_entry *e =
			mi_plan_find(plan, rb.labels[ni]);

		v->last_use = -1;
		v->name = strdup(rb.labels[ni]);
		v->op = strdup(n->op_type);
		v->device = strdup(e && e->device ? e->device : "cpu");
		v->variant = strdup(e && e->variant ? e->variant : "ref");
		v->inputs = calloc(n->ninputs + 1, sizeof(int));
		v->in_bytes = calloc(n->ninputs + 1, sizeof(double));
		if (!v->name || !v->op || !v->device || !v->variant ||
		    !v->inputs || !v->in_bytes)
			goto out;
		node_feats(g, n, &v->node);
		v->node.variant = mi_pred_variant(p, v->variant, add);
		v->node.int8 = (e && e->precision &&
				!strcmp(e->precision, "int8")) ||
			       strstr(n->op_type, "QLinear") ||
			       strstr(n->op_type, "Integer");
		v->node.threads = e && e->threads > 0 ? e->threads :
							 plan->threads;
		v->node.nfused = e ? e->nfused : 0;
		v->ninputs = n->ninputs;
		for (int i = 0; i < n->ninputs; i++) {
			struct mi_tensor *t = mi_in(g, n, i);
			int pr = t ? t->producer : -1;

			v->inputs[i] = -1;
			if (!t || is_const(t))
				continue;
			v->in_bytes[i] = tbytes(t);
			if (pr >= 0 && pr < g->nnodes && pos[pr] >= 0) {
				v->inputs[i] = pos[pr];
				if (k > pg->v[pos[pr]].last_use)
					pg->v[pos[pr]].last_use = k;
			}
		}
		for (int i = 0; i < n->noutputs; i++) {
			struct mi_tensor *t = mi_out(g, n, i);

			v->out_bytes += tbytes(t);
			if (t->flags & MI_TF_OUTPUT)
				v->is_output = true;
		}
	}
	err = 0;
out:
	free(pos);
	mi_plan_rb_fini(&rb);
	mi_plan_free(plan);
	if (err) {
		mi_pred_graph_fini(pg);
		mi_set_error(err, "out of memory");
	}
	return err;
}

int mi_pred_graph_profile(struct mi_model *m, struct mi_pred_graph *pg)
{
	if (!(m->opts.flags & MI_MODEL_PROFILE) || pg->n != m->g.norder)
		return -EINVAL;
	for (int k = 0; k < pg->n; k++) {
		uint64_t ns = 0;

		mi_model_profile_min(m, k, &ns);
		pg->v[k].prof_ns = (double)ns;
	}
	return 0;
}

/*
 * Starting points of the CPU's roofline per ISA path (enum mi_isa_cap):
 * fp32 MACs per second of one core and memory bandwidth; the trees and
 * the device's embedding correct them.  Rough on purpose: they only set
 * the scale the learned factor multiplies.
 */
void mi_pred_cpu_dev(struct mi_pred_dev *d, int isa, int threads)
{
	static const char *const names[] = { "native", "generic", "avx2",
					     "avx512" };
	static const double macs[] = { 40e9, 4e9, 40e9, 60e9 };
	int t = threads > 0 ? threads : 1;

	if (isa < 0 || isa > 3)
		isa = 0;
	memset(d, 0, sizeof(*d));
	snprintf(d->name, sizeof(d->name), "cpu.%s.t%d", names[isa], t);
	d->caps.macs_per_s = macs[isa] * t;
	d->caps.bytes_per_s = 12e9 * sqrt((double)t);
	d->caps.launch_ns = t > 1 ? 2000 : 200;
	d->caps.link_bytes_per_s = 0;
}
