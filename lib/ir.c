// SPDX-License-Identifier: MIT
/* Graph IR helpers: tensors, attributes, errors.  See ir.h. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

size_t mi_dtype_size(int dtype)
{
	switch (dtype) {
	case MI_DT_FLOAT: case MI_DT_INT32: case MI_DT_UINT32:
		return 4;
	case MI_DT_UINT8: case MI_DT_INT8: case MI_DT_BOOL:
		return 1;
	case MI_DT_UINT16: case MI_DT_INT16: case MI_DT_FLOAT16:
	case MI_DT_BFLOAT16:
		return 2;
	case MI_DT_INT64: case MI_DT_DOUBLE: case MI_DT_UINT64:
		return 8;
	default:
		return 0;
	}
}

const char *mi_dtype_name(int dtype)
{
	static const char *const names[] = {
		[MI_DT_UNDEFINED] = "undefined", [MI_DT_FLOAT] = "float32",
		[MI_DT_UINT8] = "uint8",	 [MI_DT_INT8] = "int8",
		[MI_DT_UINT16] = "uint16",	 [MI_DT_INT16] = "int16",
		[MI_DT_INT32] = "int32",	 [MI_DT_INT64] = "int64",
		[MI_DT_STRING] = "string",	 [MI_DT_BOOL] = "bool",
		[MI_DT_FLOAT16] = "float16",	 [MI_DT_DOUBLE] = "float64",
		[MI_DT_UINT32] = "uint32",	 [MI_DT_UINT64] = "uint64",
		[MI_DT_BFLOAT16] = "bfloat16",
	};
	if (dtype >= 0 && dtype < (int)(sizeof(names) / sizeof(names[0])) &&
	    names[dtype])
		return names[dtype];
	return "unknown-dtype";
}

int mi_graph_init(struct mi_graph *g)
{
	memset(g, 0, sizeof(*g));
	g->opset = 13;
	return 0;
}

static void attr_fini(struct mi_attr *a)
{
	free(a->name);
	free(a->s);
	free(a->floats);
	free(a->ints);
	if (a->strings)
		for (int i = 0; i < a->n; i++)
			free(a->strings[i]);
	free(a->strings);
	if (a->t) {
		mi_tensor_free_data(a->t);
		free(a->t->name);
		free(a->t);
	}
}

void mi_graph_fini(struct mi_graph *g)
{
	for (int i = 0; i < g->nnodes; i++) {
		struct mi_node *n = &g->nodes[i];

		free(n->name);
		free(n->op_type);
		free(n->domain);
		free(n->inputs);
		free(n->outputs);
		for (int j = 0; j < n->nattrs; j++)
			attr_fini(&n->attrs[j]);
		free(n->attrs);
	}
	for (int i = 0; i < g->ntensors; i++) {
		struct mi_tensor *t = &g->tensors[i];

		mi_tensor_free_data(t);
		free(t->name);
		for (int d = 0; d < MI_MAX_DIMS; d++)
			free(t->dim_param[d]);
	}
	free(g->nodes);
	free(g->tensors);
	free(g->inputs);
	free(g->outputs);
	free(g->order);
	free(g->name);
	for (int i = 0; i < g->nmeta; i++) {
		free(g->meta_key[i]);
		free(g->meta_value[i]);
	}
	free(g->meta_key);
	free(g->meta_value);
	memset(g, 0, sizeof(*g));
}

int mi_graph_add_tensor(struct mi_graph *g, const char *name)
{
	if (g->ntensors == g->tensors_cap) {
		int cap = g->tensors_cap ? 2 * g->tensors_cap : 64;
		struct mi_tensor *nt = realloc(g->tensors, cap * sizeof(*nt));

		if (!nt)
			return -ENOMEM;
		g->tensors = nt;
		g->tensors_cap = cap;
	}
	struct mi_tensor *t = &g->tensors[g->ntensors];

	memset(t, 0, sizeof(*t));
	t->name = strdup(name ? name : "");
	if (!t->name)
		return -ENOMEM;
	t->ndim = -1;
	t->producer = -1;
	return g->ntensors++;
}

int mi_graph_find_tensor(const struct mi_graph *g, const char *name)
{
	for (int i = 0; i < g->ntensors; i++)
		if (!strcmp(g->tensors[i].name, name))
			return i;
	return -1;
}

int mi_graph_err(struct mi_graph *g, const struct mi_node *n, int err,
		 const char *fmt, ...)
{
	va_list ap;
	int off = 0;

	g->err_op[0] = 0;
	if (n) {
		long idx = (n >= g->nodes && n < g->nodes + g->nnodes) ?
				   (long)(n - g->nodes) : -1;

		snprintf(g->err_op, sizeof(g->err_op), "%s",
			 n->op_type ? n->op_type : "");
		if (n->name && n->name[0])
			off = snprintf(g->err, sizeof(g->err),
				       "node '%s' (%s): ", n->name,
				       g->err_op);
		else
			off = snprintf(g->err, sizeof(g->err),
				       "node #%ld (%s): ", idx, g->err_op);
	}
	if (off < 0 || off >= (int)sizeof(g->err))
		off = 0;
	va_start(ap, fmt);
	vsnprintf(g->err + off, sizeof(g->err) - off, fmt, ap);
	va_end(ap);
	/* names come from the model: keep the message on one line */
	for (char *c = g->err; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = '?';
	return err;
}

const struct mi_attr *mi_attr_get(const struct mi_node *n, const char *name)
{
	for (int i = 0; i < n->nattrs; i++)
		if (!strcmp(n->attrs[i].name, name))
			return &n->attrs[i];
	return NULL;
}

int64_t mi_attr_int(const struct mi_node *n, const char *name, int64_t def)
{
	const struct mi_attr *a = mi_attr_get(n, name);

	return a && a->type == MI_ATTR_INT ? a->i : def;
}

float mi_attr_float(const struct mi_node *n, const char *name, float def)
{
	const struct mi_attr *a = mi_attr_get(n, name);

	if (a && a->type == MI_ATTR_FLOAT)
		return a->f;
	if (a && a->type == MI_ATTR_INT)
		return (float)a->i;
	return def;
}

const char *mi_attr_string(const struct mi_node *n, const char *name,
			   const char *def)
{
	const struct mi_attr *a = mi_attr_get(n, name);

	return a && a->type == MI_ATTR_STRING ? a->s : def;
}

const int64_t *mi_attr_ints(const struct mi_node *n, const char *name,
			    int *count)
{
	const struct mi_attr *a = mi_attr_get(n, name);

	if (!a || a->type != MI_ATTR_INTS) {
		*count = 0;
		return NULL;
	}
	*count = a->n;
	return a->ints;
}

const float *mi_attr_floats(const struct mi_node *n, const char *name,
			    int *count)
{
	const struct mi_attr *a = mi_attr_get(n, name);

	if (!a || a->type != MI_ATTR_FLOATS) {
		*count = 0;
		return NULL;
	}
	*count = a->n;
	return a->floats;
}

int64_t mi_tensor_numel(const struct mi_tensor *t)
{
	int64_t n = 1;

	if (t->ndim < 0)
		return -1;
	for (int i = 0; i < t->ndim; i++) {
		if (t->dims[i] < 0)
			return -1;
		if (t->dims[i] && n > INT64_MAX / t->dims[i])
			return -1;
		n *= t->dims[i];
	}
	return n;
}

bool mi_tensor_shape_known(const struct mi_tensor *t)
{
	return mi_tensor_numel(t) >= 0;
}

void mi_tensor_set_shape(struct mi_tensor *t, int dtype, int ndim,
			 const int64_t *dims)
{
	t->dtype = dtype;
	t->ndim = ndim;
	for (int i = 0; i < ndim && i < MI_MAX_DIMS; i++)
		t->dims[i] = dims[i];
}

uint64_t mi_max_tensor_bytes = 4ull << 30;

int mi_tensor_alloc(struct mi_tensor *t)
{
	int64_t n = mi_tensor_numel(t);
	size_t es = mi_dtype_size(t->dtype);
	size_t bytes;

	if (n < 0 || !es)
		return -EINVAL;
	if ((uint64_t)n > SIZE_MAX / es)
		return -EINVAL;
	bytes = (size_t)n * es;
	if (t->phys_bytes > bytes)
		bytes = t->phys_bytes;
	if (bytes > mi_max_tensor_bytes)
		return -E2BIG;
	if (t->data && (t->flags & MI_TF_OWNS_DATA) && t->nbytes >= bytes) {
		memset(t->data, 0, bytes);
		t->nbytes = bytes;
		return 0;
	}
	mi_tensor_free_data(t);
	t->data = calloc(1, bytes ? bytes : 1);
	if (!t->data)
		return -ENOMEM;
	t->nbytes = bytes;
	t->flags |= MI_TF_OWNS_DATA;
	return 0;
}

void mi_tensor_free_data(struct mi_tensor *t)
{
	if (t->flags & MI_TF_OWNS_DATA)
		free(t->data);
	t->data = NULL;
	t->nbytes = 0;
	t->flags &= ~(MI_TF_OWNS_DATA | MI_TF_ARENA);
}

int64_t mi_tensor_get_i64(const struct mi_tensor *t, int64_t i)
{
	const void *p = t->data;

	switch (t->dtype) {
	case MI_DT_INT64: return ((const int64_t *)p)[i];
	case MI_DT_INT32: return ((const int32_t *)p)[i];
	case MI_DT_INT16: return ((const int16_t *)p)[i];
	case MI_DT_INT8: return ((const int8_t *)p)[i];
	case MI_DT_UINT8: case MI_DT_BOOL: return ((const uint8_t *)p)[i];
	case MI_DT_UINT16: return ((const uint16_t *)p)[i];
	case MI_DT_UINT32: return ((const uint32_t *)p)[i];
	case MI_DT_UINT64: return (int64_t)((const uint64_t *)p)[i];
	case MI_DT_FLOAT: return (int64_t)((const float *)p)[i];
	case MI_DT_DOUBLE: return (int64_t)((const double *)p)[i];
	default: return 0;
	}
}

double mi_tensor_get_f64(const struct mi_tensor *t, int64_t i)
{
	switch (t->dtype) {
	case MI_DT_FLOAT: return ((const float *)t->data)[i];
	case MI_DT_DOUBLE: return ((const double *)t->data)[i];
	default: return (double)mi_tensor_get_i64(t, i);
	}
}
