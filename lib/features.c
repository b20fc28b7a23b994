// SPDX-License-Identifier: MIT
/*
 * Model feature map: what a later latency predictor needs to know about a
 * graph (op-type distribution, shapes, connectivity, compute and memory
 * intensity), plus the classic summary (op histogram, parameters, MACs).
 * Shapes must have been inferred (mi_model_infer_shapes) for MACs/bytes.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static int64_t numel0(const struct mi_tensor *t)
{
	int64_t n = mi_tensor_numel(t);

	return n < 0 ? 0 : n;
}

int64_t mi_node_macs(const struct mi_graph *g, const struct mi_node *n)
{
	struct mi_graph *gg = (struct mi_graph *)g;
	struct mi_node *nn = (struct mi_node *)n;
	const struct mi_tensor *a = mi_in(gg, nn, 0), *w = mi_in(gg, nn, 1);
	const struct mi_tensor *y = mi_out(gg, nn, 0);
	const char *op = n->op_type;

	if (n->domain[0] || !y || !mi_tensor_shape_known(y))
		return 0;
	if (!strcmp(op, "QLinearConv") || !strcmp(op, "QLinearMatMul") ||
	    !strcmp(op, "ConvInteger") || !strcmp(op, "MatMulInteger")) {
		/* weights are input 3 for QLinear*, 1 for *Integer */
		if (op[0] == 'Q') {
			a = mi_in(gg, nn, 0);
			w = mi_in(gg, nn, 3);
		}
		op = strstr(op, "Conv") ? "Conv" : "MatMul";
	}
	if (!a || !w || !mi_tensor_shape_known(a) || !mi_tensor_shape_known(w))
		return 0;
	if (!strcmp(op, "Conv")) {
		int64_t k = 1;

		if (w->ndim < 2)
			return 0;
		for (int i = 1; i < w->ndim; i++)
			k *= w->dims[i]; /* Cin/group x kernel */
		return numel0(y) * k;
	}
	if (!strcmp(op, "ConvTranspose")) {
		int64_t k = 1;

		if (w->ndim < 2)
			return 0;
		for (int i = 1; i < w->ndim; i++)
			k *= w->dims[i]; /* Cout/group x kernel */
		return numel0(a) * k;
	}
	if (!strcmp(op, "Gemm")) {
		int64_t kdim = mi_attr_int(n, "transA", 0) ? a->dims[0] :
							     a->dims[a->ndim - 1];

		return a->ndim == 2 ? numel0(y) * kdim : 0;
	}
	if (!strcmp(op, "MatMul")) {
		if (a->ndim < 1)
			return 0;
		return numel0(y) * a->dims[a->ndim - 1];
	}
	return 0;
}

struct node_feat {
	int64_t macs, params, in_bytes, out_bytes;
	int fan_in, fan_out, depth;
};

struct op_hist {
	const char *op;
	int count;
	int64_t macs;
};

struct feat {
	int nlive;
	struct node_feat *nf;
	struct op_hist *hist;
	int nhist;
	int64_t params, param_bytes, macs, act_bytes;
	int branch_points, merge_points, depth, max_width;
	int ninputs, noutputs;
};

static int cmp_hist(const void *a, const void *b)
{
	const struct op_hist *x = a, *y = b;

	if (x->count != y->count)
		return y->count - x->count;
	return strcmp(x->op, y->op);
}

static int compute(const struct mi_graph *cg, struct feat *f)
{
	struct mi_graph *g = (struct mi_graph *)cg;
	int *cons = calloc(g->ntensors + 1, sizeof(int));
	unsigned char *counted = calloc(g->ntensors + 1, 1);
	int *depth = calloc(g->nnodes + 1, sizeof(int));
	int *width = calloc(g->norder + 2, sizeof(int));

	memset(f, 0, sizeof(*f));
	f->nf = calloc(g->nnodes + 1, sizeof(*f->nf));
	f->hist = calloc(g->nnodes + 1, sizeof(*f->hist));
	if (!cons || !counted || !depth || !width || !f->nf || !f->hist) {
		free(cons);
		free(counted);
		free(depth);
		free(width);
		return -1;
	}
	for (int p = 0; p < g->norder; p++) {
		struct mi_node *n = &g->nodes[g->order[p]];

		for (int j = 0; j < n->ninputs; j++)
			if (n->inputs[j] >= 0)
				cons[n->inputs[j]]++;
	}
	for (int p = 0; p < g->norder; p++) {
		int ni = g->order[p];
		struct mi_node *n = &g->nodes[ni];
		struct node_feat *nf = &f->nf[ni];
		int d = 0, k;

		f->nlive++;
		nf->macs = mi_node_macs(g, n);
		f->macs += nf->macs;
		for (int j = 0; j < n->ninputs; j++) {
			struct mi_tensor *t = mi_in(g, n, j);

			if (!t)
				continue;
			int64_t b = numel0(t) * mi_dtype_size(t->dtype);

			nf->in_bytes += b;
			if (t->flags & MI_TF_CONST) {
				nf->params += numel0(t);
				if (!counted[n->inputs[j]]) {
					counted[n->inputs[j]] = 1;
					f->params += numel0(t);
					f->param_bytes += b;
				}
			} else {
				nf->fan_in++;
				if (t->producer >= 0 &&
				    depth[t->producer] > d)
					d = depth[t->producer];
			}
		}
		depth[ni] = d + 1;
		nf->depth = d + 1;
		if (d + 1 > f->depth)
			f->depth = d + 1;
		for (int j = 0; j < n->noutputs; j++) {
			struct mi_tensor *t = mi_out(g, n, j);

			nf->out_bytes += numel0(t) * mi_dtype_size(t->dtype);
			nf->fan_out += cons[n->outputs[j]];
		}
		f->act_bytes += nf->out_bytes;
		if (nf->fan_out > 1)
			f->branch_points++;
		if (nf->fan_in > 1)
			f->merge_points++;
		for (k = 0; k < f->nhist; k++)
			if (!strcmp(f->hist[k].op, n->op_type))
				break;
		if (k == f->nhist) {
			f->hist[k].op = n->op_type;
			f->nhist++;
		}
		f->hist[k].count++;
		f->hist[k].macs += nf->macs;
	}
	/* Width: how many nodes share each depth level (parallel branches). */
	for (int p = 0; p < g->norder; p++) {
		int dd = depth[g->order[p]];

		if (dd <= g->norder && ++width[dd] > f->max_width)
			f->max_width = width[dd];
	}
	qsort(f->hist, f->nhist, sizeof(*f->hist), cmp_hist);
	f->ninputs = g->ninputs;
	f->noutputs = g->noutputs;
	free(cons);
	free(counted);
	free(depth);
	free(width);
	return 0;
}

static void feat_free(struct feat *f)
{
	free(f->nf);
	free(f->hist);
}

void mi_graph_summarize(const struct mi_graph *g, struct mi_graph_summary *s)
{
	struct feat f;

	memset(s, 0, sizeof(*s));
	if (compute(g, &f))
		return;
	s->nodes = f.nlive;
	s->params = f.params;
	s->param_bytes = f.param_bytes;
	s->macs = f.macs;
	s->ops_distinct = f.nhist;
	feat_free(&f);
}

static void shape_str(const struct mi_tensor *t, char *buf, size_t len)
{
	int o = 0;

	if (t->ndim < 0) {
		snprintf(buf, len, "%s[?]", mi_dtype_name(t->dtype));
		return;
	}
	o = snprintf(buf, len, "%s[", mi_dtype_name(t->dtype));
	for (int i = 0; i < t->ndim && o < (int)len; i++) {
		if (t->dims[i] >= 0)
			o += snprintf(buf + o, len - o, "%s%" PRId64,
				      i ? "," : "", t->dims[i]);
		else
			o += snprintf(buf + o, len - o, "%s%s", i ? "," : "",
				      t->dim_param[i] ? t->dim_param[i] : "?");
	}
	if (o < (int)len)
		snprintf(buf + o, len - o, "]");
}

static double intensity(const struct node_feat *nf)
{
	int64_t b = nf->in_bytes + nf->out_bytes;

	return b ? 2.0 * (double)nf->macs / (double)b : 0.0;
}

void mi_graph_print_text(FILE *out, const struct mi_graph *cg, bool nodes)
{
	struct mi_graph *g = (struct mi_graph *)cg;
	struct feat f;
	char sh[160];

	if (compute(g, &f)) {
		fprintf(out, "  (out of memory)\n");
		return;
	}
	fprintf(out, "  nodes %d, parameters %" PRId64 " (%.2f MB), MACs %" PRId64 " (%.3f G)\n",
		f.nlive, f.params, f.param_bytes / 1e6, f.macs, f.macs / 1e9);
	fprintf(out, "  inputs:\n");
	for (int i = 0; i < g->ninputs; i++) {
		shape_str(&g->tensors[g->inputs[i]], sh, sizeof(sh));
		fprintf(out, "    %s: %s\n", g->tensors[g->inputs[i]].name, sh);
	}
	fprintf(out, "  outputs:\n");
	for (int i = 0; i < g->noutputs; i++) {
		shape_str(&g->tensors[g->outputs[i]], sh, sizeof(sh));
		fprintf(out, "    %s: %s\n", g->tensors[g->outputs[i]].name, sh);
	}
	fprintf(out, "  op histogram (count, share of MACs):\n");
	for (int k = 0; k < f.nhist; k++)
		fprintf(out, "    %-24s %5d  %5.1f%%\n", f.hist[k].op,
			f.hist[k].count,
			f.macs ? 100.0 * f.hist[k].macs / f.macs : 0.0);
	fprintf(out, "  feature map:\n");
	fprintf(out, "    op types %d, depth %d, max width %d, branch points %d, merge points %d\n",
		f.nhist, f.depth, f.max_width, f.branch_points,
		f.merge_points);
	fprintf(out, "    activation bytes %" PRId64 ", mean arithmetic intensity %.2f flop/byte\n",
		f.act_bytes,
		f.act_bytes ? 2.0 * f.macs / (double)(f.act_bytes + f.param_bytes) :
			      0.0);
	if (nodes) {
		fprintf(out, "  nodes (op, name, output shape, MACs, params, fan-in/out, depth, flop/byte):\n");
		for (int p = 0; p < g->norder; p++) {
			int ni = g->order[p];
			struct mi_node *n = &g->nodes[ni];
			struct node_feat *nf = &f.nf[ni];

			shape_str(mi_out(g, n, 0), sh, sizeof(sh));
			fprintf(out, "    %-18s %-28s %-26s %12" PRId64 " %10" PRId64 " %2d/%-2d %4d %8.2f\n",
				n->op_type, n->name[0] ? n->name : "-", sh,
				nf->macs, nf->params, nf->fan_in, nf->fan_out,
				nf->depth, intensity(nf));
		}
	}
	feat_free(&f);
}

static void json_str(FILE *out, const char *s)
{
	fputc('"', out);
	for (; *s; s++) {
		unsigned char c = *s;

		if (c == '"' || c == '\\')
			fprintf(out, "\\%c", c);
		else if (c < 0x20)
			fprintf(out, "\\u%04x", c);
		else
			fputc(c, out);
	}
	fputc('"', out);
}

static void json_shape(FILE *out, const struct mi_tensor *t)
{
	fputc('[', out);
	for (int i = 0; i < t->ndim; i++) {
		if (i)
			fputc(',', out);
		if (t->dims[i] >= 0)
			fprintf(out, "%" PRId64, t->dims[i]);
		else
			json_str(out, t->dim_param[i] ? t->dim_param[i] : "?");
	}
	fputc(']', out);
}

static void json_tensors(FILE *out, struct mi_graph *g, const int *idx, int n)
{
	fputc('[', out);
	for (int i = 0; i < n; i++) {
		const struct mi_tensor *t = &g->tensors[idx[i]];

		fprintf(out, "%s{\"name\":", i ? "," : "");
		json_str(out, t->name);
		fprintf(out, ",\"dtype\":\"%s\",\"shape\":",
			mi_dtype_name(t->dtype));
		json_shape(out, t);
		fputc('}', out);
	}
	fputc(']', out);
}

void mi_graph_print_json(FILE *out, const struct mi_graph *cg)
{
	struct mi_graph *g = (struct mi_graph *)cg;
	struct feat f;

	if (compute(g, &f)) {
		fprintf(out, "null");
		return;
	}
	fprintf(out, "{\"nodes\":%d,\"params\":%" PRId64 ",\"param_bytes\":%" PRId64 ",\"macs\":%" PRId64,
		f.nlive, f.params, f.param_bytes, f.macs);
	fprintf(out, ",\"inputs\":");
	json_tensors(out, g, g->inputs, g->ninputs);
	fprintf(out, ",\"outputs\":");
	json_tensors(out, g, g->outputs, g->noutputs);
	fprintf(out, ",\"op_histogram\":{");
	for (int k = 0; k < f.nhist; k++) {
		fprintf(out, "%s", k ? "," : "");
		json_str(out, f.hist[k].op);
		fprintf(out, ":{\"count\":%d,\"macs\":%" PRId64 "}",
			f.hist[k].count, f.hist[k].macs);
	}
	fprintf(out, "},\"feature_map\":{\"op_types\":%d,\"depth\":%d,\"max_width\":%d,\"branch_points\":%d,\"merge_points\":%d,\"activation_bytes\":%" PRId64 ",\"node_list\":[",
		f.nhist, f.depth, f.max_width, f.branch_points, f.merge_points,
		f.act_bytes);
	for (int p = 0; p < g->norder; p++) {
		int ni = g->order[p];
		struct mi_node *n = &g->nodes[ni];
		struct node_feat *nf = &f.nf[ni];

		fprintf(out, "%s{\"op\":", p ? "," : "");
		json_str(out, n->op_type);
		fprintf(out, ",\"name\":");
		json_str(out, n->name);
		fprintf(out, ",\"inputs\":[");
		for (int j = 0, first = 1; j < n->ninputs; j++) {
			struct mi_tensor *t = mi_in(g, n, j);

			if (!t)
				continue;
			fprintf(out, "%s", first ? "" : ",");
			first = 0;
			json_shape(out, t);
		}
		fprintf(out, "],\"outputs\":[");
		for (int j = 0; j < n->noutputs; j++) {
			fprintf(out, "%s", j ? "," : "");
			json_shape(out, mi_out(g, n, j));
		}
		fprintf(out, "],\"macs\":%" PRId64 ",\"params\":%" PRId64 ",\"bytes\":%" PRId64 ",\"fan_in\":%d,\"fan_out\":%d,\"depth\":%d,\"intensity\":%.4f}",
			nf->macs, nf->params, nf->in_bytes + nf->out_bytes,
			nf->fan_in, nf->fan_out, nf->depth, intensity(nf));
	}
	fprintf(out, "]}}");
	feat_free(&f);
}
