// SPDX-License-Identifier: MIT
/*
 * Shape inference of one node (mi_infer_node): the op's infer callback,
 * and Shape-value propagation (Shape / Size of known shapes, and small
 * arithmetic on such values, evaluated at planning time).  Below the
 * passes (static shapes for folding) and the executor (planning).
 */
#include <errno.h>
#include <string.h>

#include "internal.h"

/* Shape-value propagation only evaluates small tensors. */
#define MI_SHAPEVAL_MAX_ELEMS 4096

static bool is_op(const struct mi_node *n, const char *op)
{
	return !n->domain[0] && !strcmp(n->op_type, op);
}

static bool tensor_known(const struct mi_tensor *t)
{
	return mi_tensor_shape_known(t) && mi_dtype_size(t->dtype);
}

static bool has_value(const struct mi_tensor *t)
{
	return t->data && (t->flags & (MI_TF_CONST | MI_TF_SHAPEVAL));
}

/* Shape / Size of an input whose shape is known: the value is known too. */
static int eval_shape_op(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0), *y = mi_out(g, n, 0);
	int err = n->def->infer(g, n);

	if (err)
		return err;
	if (!tensor_known(y) || y->dtype != MI_DT_INT64)
		return mi_graph_err(g, n, -EINVAL,
			"shape inference gave no int64 output");
	err = mi_tensor_alloc(y);
	if (err)
		return mi_graph_err(g, n, err, "cannot allocate output");
	int64_t *o = y->data;

	if (is_op(n, "Size")) {
		if (mi_tensor_numel(y) != 1)
			return mi_graph_err(g, n, -EINVAL, "bad output shape");
		o[0] = mi_tensor_numel(x);
		return 0;
	}
	int64_t r = x->ndim, s = mi_attr_int(n, "start", 0),
		e = mi_attr_int(n, "end", r);

	if (s < 0)
		s += r;
	if (e < 0)
		e += r;
	s = s < 0 ? 0 : s > r ? r : s;
	e = e < 0 ? 0 : e > r ? r : e;
	if (mi_tensor_numel(y) != (e > s ? e - s : 0))
		return mi_graph_err(g, n, -EINVAL, "bad output shape");
	for (int64_t i = s; i < e; i++)
		o[i - s] = x->dims[i];
	return 0;
}

int mi_infer_node(struct mi_graph *g, struct mi_node *n, unsigned char *state)
{
	bool all_value = true, any_shapeval = false;
	int64_t out_elems = 0;
	int err;

	if (!n->def) { /* unknown op, loaded for inspection only */
		*state = MI_NS_DYNAMIC;
		return 0;
	}
	for (int j = 0; j < n->ninputs; j++) {
		struct mi_tensor *t = mi_in(g, n, j);

		if (!t)
			continue;
		if (!tensor_known(t)) {
			*state = MI_NS_DYNAMIC;
			return 0;
		}
		if (!has_value(t))
			all_value = false;
		if (t->flags & MI_TF_SHAPEVAL)
			any_shapeval = true;
	}
	if ((is_op(n, "Shape") || is_op(n, "Size")) && n->def->infer) {
		err = eval_shape_op(g, n);
		if (err)
			return err;
		mi_out(g, n, 0)->flags |= MI_TF_SHAPEVAL;
		*state = MI_NS_PRECOMPUTED;
		return 0;
	}
	if (!n->def->infer)
		return mi_graph_err(g, n, -EOPNOTSUPP,
				    "op has no shape inference");
	err = n->def->infer(g, n);
	if (err == -EAGAIN) {
		for (int j = 0; j < n->noutputs; j++)
			mi_out(g, n, j)->ndim = -1;
		*state = MI_NS_DYNAMIC;
		return 0;
	}
	if (err) {
		if (!g->err[0])
			mi_graph_err(g, n, err, "shape inference failed");
		return err;
	}
	for (int j = 0; j < n->noutputs; j++) {
		struct mi_tensor *t = mi_out(g, n, j);

		if (!tensor_known(t))
			return mi_graph_err(g, n, -EINVAL,
				"shape inference left output '%s' unknown",
				t->name);
		out_elems += mi_tensor_numel(t);
	}
	*state = MI_NS_STATIC;
	/* Arithmetic on shape values (Gather/Concat/Unsqueeze of a Shape),
	 * and small Constant nodes left unfolded (MI_MODEL_NO_FOLD):
	 * evaluate now so that Reshape & co. see constant shapes. */
	if (all_value && (any_shapeval || is_op(n, "Constant")) &&
	    out_elems <= MI_SHAPEVAL_MAX_ELEMS && n->def->run) {
		for (int j = 0; j < n->noutputs; j++) {
			err = mi_tensor_alloc(mi_out(g, n, j));
			if (err)
				return mi_graph_err(g, n, err,
						    "cannot allocate output");
		}
		err = n->def->run(g, n);
		if (err) {
			if (!g->err[0])
				mi_graph_err(g, n, err, "evaluation failed");
			return err;
		}
		for (int j = 0; j < n->noutputs; j++)
			mi_out(g, n, j)->flags |= MI_TF_SHAPEVAL;
		*state = MI_NS_PRECOMPUTED;
	}
	return 0;
}
