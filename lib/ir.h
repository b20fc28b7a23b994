/* SPDX-License-Identifier: MIT */
/*
 * Graph IR shared by the ONNX importer, the normalization passes, shape
 * inference and the executors.  Private to libmetainfer.
 *
 * Conventions
 *  - dtypes use ONNX TensorProto.DataType numbering (enum mi_dtype).
 *  - Tensors live in graph->tensors[] and are referred to by index
 *    everywhere (node inputs/outputs, graph inputs/outputs); index -1 in a
 *    node's input list is an omitted optional input ("" in ONNX).
 *  - A tensor's data is non-NULL for initializers, Constant outputs and
 *    folded constants (MI_TF_CONST), and for every tensor while a graph runs.
 *  - dims[i] == -1 means unknown/symbolic (dim_param[i] holds the symbol,
 *    e.g. "N"); ndim == -1 means unknown rank.
 *  - Functions return 0 or -errno; on error they also record a one-line
 *    reason with mi_graph_err() ("node 'conv1' (Conv): pads has 3 values,
 *    expected 4").
 */
#ifndef MI_IR_H
#define MI_IR_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

/* enum mi_dtype (ONNX TensorProto.DataType numbering), MI_MAX_DIMS,
 * mi_dtype_size() and mi_dtype_name() come from the public header. */
#include <metainfer/metainfer.h>

enum mi_tensor_flags {
	MI_TF_INITIALIZER = 1u << 0, /* came from graph.initializer */
	MI_TF_CONST = 1u << 1,       /* data is fixed for every run */
	MI_TF_INPUT = 1u << 2,       /* graph input fed by the caller */
	MI_TF_OUTPUT = 1u << 3,      /* graph output */
	MI_TF_OWNS_DATA = 1u << 4,   /* data was malloc'ed for this tensor */
	MI_TF_SHAPEVAL = 1u << 5,    /* data computed while planning, valid
				      * for the current input shapes only
				      * (Shape of a known shape, and small
				      * integer arithmetic on such values) */
	MI_TF_ARENA = 1u << 6,	     /* data points into the run arena */
	MI_TF_DENSE = 1u << 7,	     /* a device job reads or writes it: the
				      * CPU plan keeps it dense, in its dtype
				      * and shape, planar (set by
				      * mi_model_prepare for a plan) */
};

struct mi_tensor {
	char *name;
	int dtype;
	int ndim;
	int64_t dims[MI_MAX_DIMS];
	char *dim_param[MI_MAX_DIMS];
	void *data;
	size_t nbytes;
	unsigned int flags;
	/* bytes a planner needs in this tensor's buffer when more than
	 * numel * element size (blocked layouts, lib/cpu/nchwc.c); 0 else */
	size_t phys_bytes;
	int producer; /* node index, -1 for inputs/initializers */
	int nconsumers;
};

/* ONNX AttributeProto.AttributeType numbering. */
enum mi_attr_type {
	MI_ATTR_UNDEFINED = 0,
	MI_ATTR_FLOAT = 1,
	MI_ATTR_INT = 2,
	MI_ATTR_STRING = 3,
	MI_ATTR_TENSOR = 4,
	MI_ATTR_GRAPH = 5,
	MI_ATTR_FLOATS = 6,
	MI_ATTR_INTS = 7,
	MI_ATTR_STRINGS = 8,
};

struct mi_attr {
	char *name;
	int type;
	float f;
	int64_t i;
	char *s; /* NUL-terminated copy of a STRING attribute */
	int n;   /* element count of floats/ints/strings */
	float *floats;
	int64_t *ints;
	char **strings;
	struct mi_tensor *t; /* TENSOR attribute (not in graph->tensors) */
};

struct mi_op_def;

struct mi_node {
	char *name;
	char *op_type;
	char *domain; /* "" for the default ONNX domain */
	const struct mi_op_def *def; /* resolved by mi_graph_resolve_ops() */
	int ninputs, noutputs;
	int *inputs;  /* tensor indices, -1 = omitted optional input */
	int *outputs; /* tensor indices */
	int nattrs;
	struct mi_attr *attrs;
	bool dead; /* removed by a pass; skipped everywhere */
	void *priv; /* executor-private data (chosen kernel, packed weights) */
};

struct mi_graph {
	char *name;
	int64_t opset; /* opset of the default domain */
	int ntensors, tensors_cap;
	struct mi_tensor *tensors;
	int nnodes, nodes_cap;
	struct mi_node *nodes;
	int ninputs, noutputs;
	int *inputs;  /* non-initializer graph inputs only */
	int *outputs;
	int *order;   /* topological order of live nodes (mi_graph_toposort) */
	int norder;
	char err[512]; /* last error, one line */
	char err_op[64]; /* op_type of the node the last error names, or "" */
	const char *label; /* file name used as error prefix (not owned) */
	bool allow_unknown_ops; /* loader keeps nodes without a def (info) */
	/* ModelProto.metadata_props (owned copies) */
	int nmeta;
	char **meta_key, **meta_value;
};

/*
 * Per-op definition.  Shape inference and execution live together so that
 * constant folding is "run the op at load time".
 *
 * infer(): set dtype/ndim/dims of every output from the inputs' dtype and
 *   shape, reading input data where it is known (t->data != NULL) for ops
 *   whose output shape depends on values (Reshape, Slice, Expand, ...).
 *   Returns 0 when all output shapes are known, -EAGAIN when they depend on
 *   data not available yet (the executor calls infer again at run time,
 *   when every input has data), or -EINVAL/-EOPNOTSUPP with g->err set for
 *   invalid or unsupported attributes/inputs.
 * run(): every input has data, every output has been allocated to the
 *   shape infer() produced (mi_tensor_alloc).  Compute the outputs.
 */
struct mi_op_def {
	const char *op_type;
	const char *domain; /* "" default ONNX domain */
	int min_inputs, max_inputs;   /* max < 0: variadic, no upper bound */
	int min_outputs, max_outputs; /* checked by the loader */
	int (*infer)(struct mi_graph *g, struct mi_node *n);
	int (*run)(struct mi_graph *g, struct mi_node *n);
};

/* Look up an op by type/domain (domain NULL or "" = default).  NULL if
 * MetaInfer has no implementation. */
const struct mi_op_def *mi_op_find(const char *op_type, const char *domain);

/* ---- graph construction / access ---------------------------------- */
int mi_graph_init(struct mi_graph *g);
void mi_graph_fini(struct mi_graph *g);
/* Add a tensor (name copied); returns its index or -ENOMEM. */
int mi_graph_add_tensor(struct mi_graph *g, const char *name);
/* Index of the tensor called name, or -1. */
int mi_graph_find_tensor(const struct mi_graph *g, const char *name);

static inline struct mi_tensor *mi_in(struct mi_graph *g, struct mi_node *n,
				      int i)
{
	return (i < n->ninputs && n->inputs[i] >= 0) ?
		       &g->tensors[n->inputs[i]] :
		       NULL;
}

static inline struct mi_tensor *mi_out(struct mi_graph *g, struct mi_node *n,
				       int i)
{
	return i < n->noutputs ? &g->tensors[n->outputs[i]] : NULL;
}

/* Record a one-line error for node n (may be NULL); returns err. */
int mi_graph_err(struct mi_graph *g, const struct mi_node *n, int err,
		 const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* ---- attributes ---------------------------------------------------- */
const struct mi_attr *mi_attr_get(const struct mi_node *n, const char *name);
int64_t mi_attr_int(const struct mi_node *n, const char *name, int64_t def);
float mi_attr_float(const struct mi_node *n, const char *name, float def);
/* NULL if absent. */
const char *mi_attr_string(const struct mi_node *n, const char *name,
			   const char *def);
/* Returns the array and stores its length in *count; NULL/0 if absent. */
const int64_t *mi_attr_ints(const struct mi_node *n, const char *name,
			    int *count);
const float *mi_attr_floats(const struct mi_node *n, const char *name,
			    int *count);

/* ---- tensors -------------------------------------------------------- */
/* Element count of a fully known shape; -1 if any dim is unknown. */
int64_t mi_tensor_numel(const struct mi_tensor *t);
/* True when rank and every dim are known. */
bool mi_tensor_shape_known(const struct mi_tensor *t);
/* Set dtype and shape (dims copied). */
void mi_tensor_set_shape(struct mi_tensor *t, int dtype, int ndim,
			 const int64_t *dims);
/* Allocate (or reuse, if large enough and owned) zeroed data for the
 * current dtype/shape.  -ENOMEM, -EINVAL when the shape is unknown or the
 * size overflows. */
int mi_tensor_alloc(struct mi_tensor *t);
/* Largest tensor mi_tensor_alloc() will create (default 4 GiB); a guard
 * against hostile models asking for absurd shapes. */
extern uint64_t mi_max_tensor_bytes;
/* Free owned data, keep the shape. */
void mi_tensor_free_data(struct mi_tensor *t);
/* Read element i of an integer tensor (int8..int64, uint8..uint64, bool)
 * as int64; for index/shape inputs such as Reshape's shape. */
int64_t mi_tensor_get_i64(const struct mi_tensor *t, int64_t i);
/* Read element i as double (any numeric dtype). */
double mi_tensor_get_f64(const struct mi_tensor *t, int64_t i);

#endif /* MI_IR_H */
