/* SPDX-License-Identifier: MIT */
/*
 * libmetainfer private interfaces between the importer, graph driver,
 * passes, executor and the tools built from the static library (the
 * metainfer CLI, the conformance runner, the fuzzer, unit tests).
 * Nothing here is exported from libmetainfer.so.
 */
#ifndef MI_INTERNAL_H
#define MI_INTERNAL_H

#include <stdbool.h>
#include <stdio.h>

#include "ir.h"
#include "cpu/cpu_plan.h"

/* Opsets 1..6 are accepted too: most ops are unchanged since then, the
 * ONNX conformance data uses them (pytorch-converted is opset 6), and the
 * legacy forms that differ (broadcast/axis on arithmetic ops) are rejected
 * by the loader; ops see g->opset and reject other legacy attributes. */
#define MI_OPSET_MIN 1
#define MI_OPSET_MAX 17

/* ---- onnx_load.c ---------------------------------------------------- */
/*
 * Parse an ONNX ModelProto into g (initialized by the caller).  basedir
 * resolves external data files (NULL: external data is an error).  Ops are
 * resolved with mi_op_find(); an op MetaInfer lacks fails with -EOPNOTSUPP.
 * On failure g->err holds one line (without the file name).
 */
int mi_onnx_load_buffer(struct mi_graph *g, const void *buf, size_t len,
			const char *basedir);
int mi_onnx_load_file(struct mi_graph *g, const char *path);
/* Read a serialized TensorProto (ONNX test data *.pb) into t (data owned). */
int mi_onnx_read_tensor(const char *path, struct mi_tensor *t, char *err,
			size_t errlen);
/* Read a whole file (at most maxlen bytes) into a malloc'ed buffer. */
int mi_read_file(const char *path, size_t maxlen, void **bufp, size_t *lenp);

/* Free everything a standalone tensor owns (data, name, dim_params). */
void mi_tensor_fini(struct mi_tensor *t);

/* ---- graph.c -------------------------------------------------------- */
/* Recompute producer/nconsumers; reject tensors produced twice, inputs
 * nobody produces and (with toposort) cycles. */
int mi_graph_link(struct mi_graph *g);
/* Topological order of the live nodes into g->order (Kahn, stable). */
int mi_graph_toposort(struct mi_graph *g);
/* Replace every use of tensor from by tensor to (node inputs and graph
 * outputs). */
void mi_graph_replace_uses(struct mi_graph *g, int from, int to);
/* Index of the live node consuming tensor t if it has exactly one consumer
 * and is not a graph output, else -1. */
int mi_graph_sole_consumer(const struct mi_graph *g, int t);
/* Append a node (strings copied); returns its index or -errno. */
int mi_graph_add_node(struct mi_graph *g, const char *name,
		      const char *op_type, const int *inputs, int ninputs,
		      const int *outputs, int noutputs);
/* Append attributes to node n (copies). */
int mi_node_set_int(struct mi_node *n, const char *name, int64_t v);
int mi_node_set_float(struct mi_node *n, const char *name, float v);
int mi_node_set_ints(struct mi_node *n, const char *name, const int64_t *v,
		     int count);
/* Make tensor index t a constant holding a copy of data. */
int mi_tensor_set_const(struct mi_tensor *t, int dtype, int ndim,
			const int64_t *dims, const void *data);

/*
 * Constant folding: run every live node whose inputs are all constants
 * (and Constant nodes) with its reference implementation; its outputs
 * become constants and the node dies.  Returns the number folded.
 */
int mi_graph_fold_constants(struct mi_graph *g);
/* Mark nodes none of whose outputs is used dead; returns count removed. */
int mi_graph_dead_nodes(struct mi_graph *g);

/* ---- infer.c -------------------------------------------------------- */
enum mi_node_state {
	MI_NS_STATIC = 0,	/* shape known after planning, arena output */
	MI_NS_DYNAMIC = 1,	/* shape known only at run time */
	MI_NS_PRECOMPUTED = 2,	/* computed while planning (SHAPEVAL) */
	MI_NS_ALIAS = 3,	/* view op: output shares input's memory */
};

/* Infer one node whose inputs are planned: sets *state to an enum
 * mi_node_state; Shape values and small arithmetic on them get data
 * (MI_TF_SHAPEVAL, owned). */
int mi_infer_node(struct mi_graph *g, struct mi_node *n, unsigned char *state);

/* ---- passes.c ------------------------------------------------------- */
struct mi_pass_stats {
	int folded;	 /* nodes constant-folded */
	int bn_folded;	 /* BatchNormalization folded into Conv/Gemm */
	int noops;	 /* Identity/Dropout/no-op Reshape/Transpose pairs */
	int canonical;	 /* patterns rewritten to a canonical form */
	int dead;	 /* dead nodes removed */
};

int mi_pass_fold_batchnorm(struct mi_graph *g);
int mi_pass_remove_noops(struct mi_graph *g);
int mi_pass_canonicalize(struct mi_graph *g);
/* All passes in order, repeated until nothing changes. */
int mi_graph_normalize(struct mi_graph *g, unsigned int model_flags,
		       struct mi_pass_stats *st);

/* ---- exec.c --------------------------------------------------------- */
struct mi_model {
	struct mi_graph g;
	struct mi_model_opts opts;
	char *label;
	struct mi_tensor_info *in_info, *out_info;
	char **in_dim_param, **out_dim_param; /* backing for *_info */
	struct mi_pass_stats stats;
	/* planning state for the current input shapes */
	bool prepared;
	bool cpu_planned;
	int32_t *bound_ndim;	/* per graph input */
	int64_t *bound_dims;	/* per graph input, MI_MAX_DIMS each */
	unsigned char *node_state; /* per node, enum mi_node_state */
	int *last_use;		/* per tensor: order position of last use */
	int *pos_of;		/* per node: position in g.order */
	void *arena;
	size_t arena_size;
	size_t arena_peak;	/* bytes used by the plan */
	uint64_t runs;
	/* MI_MODEL_PROFILE: per node index, allocated on the first run;
	 * prof_min is the fastest single run (valid when prof_calls > 0) */
	uint64_t *prof_ns, *prof_calls, *prof_min;
	int prof_cap;
	/* lib/plan/: the planning context mi_cpu_plan() reads and writes,
	 * the applied plan (NULL: the default rules) and its candidates */
	struct mi_plan_ctx *plan_ctx;
	struct mi_plan *plan;
	struct mi_plan_cands *cands;
	/* lib/meta/: switchable layers (NULL: none) */
	struct mi_switch *sw;
	/* lib/plan/place-impl.h: the model's devices and device jobs */
	struct mi_place *place;
};

/*
 * Plan for input shapes (ndim/dims per graph input; NULL = declared
 * shapes with symbolic dims bound to 1): shape inference in topological
 * order, Shape-value propagation, completeness check, CPU kernel planning
 * and arena memory planning.
 */
int mi_model_prepare(struct mi_model *m, const int32_t *ndim,
		     const int64_t *dims);
/* Shape inference only (no CPU planning, no arena): for info. */
int mi_model_infer_shapes(struct mi_model *m, const int32_t *ndim,
			  const int64_t *dims);
/* Run every node once (inputs bound, model prepared). */
int mi_model_exec(struct mi_model *m);
/* Run node ni on the CPU now (its inputs computed): device fallback. */
int mi_exec_node(struct mi_model *m, int ni);
/* Load without preparing: for tools that inspect the graph (info). */
int mi_model_load_graph(const char *path, const struct mi_model_opts *opts,
			struct mi_model **modelp);
/* Same, and nodes whose op MetaInfer lacks are kept (without a def):
 * shapes downstream of them stay unknown; the model cannot run. */
int mi_model_load_inspect(const char *path, const struct mi_model_opts *opts,
			  struct mi_model **modelp);
/* ---- meta/switch.c -------------------------------------------------- */
/* Read the "metainfer.switch" metadata of a loaded, normalized, not yet
 * planned model (no metadata: 0, m->sw stays NULL). */
int mi_switch_init(struct mi_model *m);
/* After the first planning: every variant's channel counts agree. */
int mi_switch_check(struct mi_model *m);
void mi_switch_fini(struct mi_model *m);

/* ---- error.c -------------------------------------------------------- */
/* Set the thread's last error ("label: reason") and return err. */
int mi_set_error(int err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void mi_clear_error(void);

/* ---- plan/plan.c ---------------------------------------------------- */
/* The model's planning context, created on first use (NULL: no memory;
 * planning then runs without one). */
struct mi_plan_ctx *mi_model_plan_ctx(struct mi_model *m);
void mi_model_plan_fini(struct mi_model *m);

/* ---- npy.c ---------------------------------------------------------- */
/* Read a .npy file (float32/64, int8/32/64, uint8, bool; C order) into a
 * standalone tensor with owned data. */
int mi_npy_read(const char *path, struct mi_tensor *t, char *err,
		size_t errlen);
int mi_npy_write(const char *path, int dtype, int ndim, const int64_t *dims,
		 const void *data, char *err, size_t errlen);

/* ---- features.c ----------------------------------------------------- */
/* Human-readable or JSON report of a graph (op histogram, parameters,
 * MACs, shapes, feature map). */
struct mi_graph_summary {
	int nodes;
	int64_t params;
	int64_t param_bytes;
	int64_t macs;
	int ops_distinct;
};
void mi_graph_summarize(const struct mi_graph *g, struct mi_graph_summary *s);
void mi_graph_print_text(FILE *f, const struct mi_graph *g, bool nodes);
void mi_graph_print_json(FILE *f, const struct mi_graph *g);
/* MACs of one node (0 for ops without multiply-accumulates). */
int64_t mi_node_macs(const struct mi_graph *g, const struct mi_node *n);

#endif /* MI_INTERNAL_H */
