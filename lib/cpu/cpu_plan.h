/* SPDX-License-Identifier: MIT */
/*
 * Seam between the graph executor and the fast CPU kernels.
 *
 * The executor calls mi_cpu_plan() once, after normalization and shape
 * inference, with every tensor shape known.  The planner may choose a fast
 * kernel variant per node (storing its private state in node->priv),
 * fuse epilogues (marking absorbed nodes dead and rewiring outputs), and
 * pre-pack weights.  At run time the executor calls mi_cpu_node_run() for
 * every node whose priv is non-NULL and the op's reference run() otherwise.
 * mi_cpu_plan_fini() releases everything mi_cpu_plan() allocated and
 * undoes the fusions (absorbed nodes live again, outputs restored), so the
 * graph can be re-planned for other input shapes or run by reference.
 *
 * Fusion contract (for the executor's lifetime/arena planning): a fused
 * node writes the last absorbed node's output tensor; a residual Add's
 * other operand is appended to the fused node's inputs (so its lifetime
 * extends to the fused node).  The executor must toposort and compute
 * lifetimes after mi_cpu_plan().
 */
#ifndef MI_CPU_PLAN_H
#define MI_CPU_PLAN_H

#include "ir.h"

struct mi_plan_ctx;

struct mi_cpu_opts {
	int nthreads; /* 0 = number of online cores */
	int reference; /* 1 = choose nothing, run every node's reference */
	int isa;	/* enum mi_isa cap, -1 = the CPU's own */
	bool no_int8;	/* QDQ models run in fp32 (MI_MODEL_NO_INT8) */
	bool no_spin;	/* the caller sleeps on workers (MI_MODEL_NO_SPIN) */
	bool no_merge;	/* every node its own kernel (MI_MODEL_NO_MERGE) */
	/* NULL: the default rules choose every kernel.  Else the model's
	 * planning context (lib/plan/): the variant each node is constrained
	 * to, and where mi_cpu_plan() records who claimed what. */
	struct mi_plan_ctx *ctx;
};

int mi_cpu_plan(struct mi_graph *g, const struct mi_cpu_opts *opts);
int mi_cpu_node_run(struct mi_graph *g, struct mi_node *n);
/* 0 if n is a planned Concat whose inputs are each one contiguous block
 * of the output, at element offsets off[0..ninputs) (lib/cpu/xform.c):
 * an input already at its place is not copied. */
int mi_cpu_concat_inplace(struct mi_graph *g, struct mi_node *n,
			  int64_t *off);
/* 0 if n is a planned copy (Slice, Transpose) whose output is one
 * contiguous block of its input at byte offset *off: the executor may
 * alias it instead of running it. */
int mi_cpu_view_offset(struct mi_graph *g, struct mi_node *n, size_t *off);
void mi_cpu_plan_fini(struct mi_graph *g);

/*
 * Every node->priv set by a planner (lib/cpu or lib/quant) starts with
 * this header.  run() executes the node; fini() (may be NULL) releases the
 * priv and undoes any graph rewrite the planner made for this node (dead
 * nodes, rewired inputs/outputs); it must not free n->priv's header
 * memory twice: mi_cpu_plan_fini() sets n->priv = NULL afterwards.
 */
struct mi_cpu_kernel_hdr {
	int (*run)(struct mi_graph *g, struct mi_node *n);
	void (*fini)(struct mi_graph *g, struct mi_node *n);
	/* optional (NULL: none): how a node planned by one provider meets
	 * the blocked-layout pass of another (lib/cpu/nchwc.c), so that the
	 * pass negotiates layouts through the node, never by calling the
	 * other provider by name */
	const struct mi_layout_ops *lops;
	/* read back by lib/plan/ (NULL / 0: the provider's defaults, see
	 * mi_cpu_provider_name()): the stable variant name
	 * ("conv.im2col"), the main input's and the output's layout
	 * (enum mi_layout) and block (channels per block, 0: none) */
	const char *variant;
	unsigned char lay_in, lay_out;
	unsigned short blk_in, blk_out;
};

/* Tensor layouts a kernel reads or writes. */
enum mi_layout {
	MI_LAYOUT_DEFAULT = 0, /* what the provider uses (NCHW for fp32) */
	MI_LAYOUT_NCHW = 1,
	MI_LAYOUT_NHWC = 2,
	MI_LAYOUT_NCHWC = 3,	/* channels in blocks of blk_* */
};

/*
 * The providers, in the order mi_cpu_plan() asks them: each claims the
 * live nodes it has a kernel for (node->priv) and leaves the others to
 * the next; what nobody claims runs on the reference op.
 */
enum mi_cpu_provider {
	MI_PROV_NONE = 0,	/* the reference op (variant "ref") */
	MI_PROV_INT8 = 1,	/* lib/quant: int8 kernels for QDQ / QLinear */
	MI_PROV_NCHWC = 2,	/* lib/cpu/nchwc.c: blocked fp32 */
	MI_PROV_NCHW = 3,	/* lib/cpu/plan.c: the fp32 NCHW registry */
	MI_PROV_ELTWISE = 4,	/* lib/cpu/eltwise.c, xform.c */
	MI_PROV_REF = 5,	/* a plan pinned the node to its reference op */
	MI_PROV_COUNT
};

const char *mi_cpu_provider_name(int prov);

/* What a plan asks of one node (lib/plan/ fills it). */
struct mi_plan_req {
	const char *variant;	/* NULL: the default rules choose */
	int prov;		/* enum mi_cpu_provider of variant */
	bool early;		/* claimed before the providers run: an
				 * earlier provider took it at its turn */
	int nfused;		/* nodes (indices) fused into it */
	int *fused;
	bool serial;		/* runs on the calling thread alone (the
				 * plan's "threads": 1) */
};

/*
 * Planning context of a model (owned by lib/plan/).  req (may be NULL)
 * holds a plan's constraints, per node index; the rest mi_cpu_plan()
 * writes: which provider claimed each node, the graph before planning
 * (liveness, first output, inputs) so that fusions can be read back, and
 * the fingerprint of that graph.
 */
struct mi_plan_ctx {
	int nnodes;
	struct mi_plan_req *req;
	unsigned char *prov;	/* enum mi_cpu_provider per node */
	unsigned char *live;	/* live before planning */
	int *out0;		/* outputs[0] before planning, -1 none */
	int *in_off, *in_idx;	/* inputs before planning: node i's are
				 * in_idx[in_off[i] .. in_off[i + 1]) */
	uint64_t fingerprint;
	int nthreads, isa;	/* what the kernels were planned for */
};

void mi_plan_ctx_reset(struct mi_plan_ctx *ctx); /* frees what planning wrote */

/*
 * What the planning context tells a provider about node index ni:
 * whether it may claim the node with the named variant (a provider whose
 * variants the plan does not name asks with its provider-level name,
 * e.g. "nchwc"), and whether consumer node ci may be fused into it.
 * Both are true without a plan.
 */
bool mi_cpu_plan_allows(const struct mi_cpu_opts *opts, int ni,
			const char *variant);
/* The variant the plan names for node index ni, NULL when it names none
 * (or there is no plan). */
const char *mi_cpu_plan_variant(const struct mi_cpu_opts *opts, int ni);
bool mi_cpu_plan_allows_fuse(const struct mi_cpu_opts *opts, int ni, int ci);

/* The fp32 NCHW registry (plan.c): its variant names for op (count
 * returned, at most max stored), and whether variant supports node n as
 * the graph is now (0, -EOPNOTSUPP; *by_rule: the default's cost rule
 * would take it too). */
int mi_cpu_nchw_variants(const char *op, const char **names, int max);
int mi_cpu_nchw_supports(struct mi_graph *g, struct mi_node *n,
			 const char *variant, int isa, bool *by_rule);

/*
 * Layout negotiation of a node another provider planned (e.g. lib/quant's
 * standalone DequantizeLinear/QuantizeLinear and int8 convs with fp32
 * output) with the blocked-layout pass.  Every member is optional.
 */
enum mi_layout_role {
	MI_LAYOUT_FIXED = 0,	 /* reads and writes NCHW only */
	MI_LAYOUT_PRODUCER = 1, /* can write its fp32 output blocked */
	MI_LAYOUT_CONSUMER = 2, /* can read its fp32 input blocked */
};

struct mi_layout_ops {
	/* enum mi_layout_role of n as planned */
	int (*role)(struct mi_graph *g, struct mi_node *n);
	/* the pass decided n's fp32 side is blocked, block of ISA isa */
	void (*set_blocked)(struct mi_graph *g, struct mi_node *n, int isa);
	/* n (a PRODUCER, blocked) takes over the residual Add reading its
	 * output, with that Add's activation (act_node -1: none): 0 done
	 * (the Add and act_node dead, undone by n's fini), -EOPNOTSUPP
	 * when n cannot (nothing changed) */
	int (*take_add)(struct mi_graph *g, struct mi_node *n,
			struct mi_node *add, int act_node, int act, float lo,
			float hi);
};

#endif /* MI_CPU_PLAN_H */
