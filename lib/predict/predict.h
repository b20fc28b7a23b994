/* SPDX-License-Identifier: MIT */
/*
 * lib/predict: node-time, plan-latency and peak-memory prediction
 * (Documentation/predict.rst).  Private to libmetainfer.
 *
 * Everything the predictor learns from is plain data, so any source of
 * measurements can feed it: per-node profiles of real models on the CPU
 * (each ISA path and thread count is one device), the simulator's timing
 * model, or a fingerprint database:
 *
 *   struct mi_pred_node    what is run: node features + variant + precision
 *   struct mi_pred_dev     where: caps (roofline rates, launch cost) plus an
 *                          embedding vector (emb[0..nemb-1], any source)
 *   struct mi_pred_sample  node + variant + (emb, nemb) + caps + measured ns
 *
 * A node's predicted time is
 *
 *   t = roofline(node, caps) * exp(trees(features, emb) + bias[dev][class])
 *
 * roofline = launch + max(macs / macs_per_s, bytes / bytes_per_s); trees
 * are gradient-boosted regression trees fitted on log(measured/roofline)
 * across devices; bias is a per-device, per-op-class correction that every
 * later measurement refines (mi_pred_refine).  A new device is embedded
 * from at most MI_PRED_REF_MAX measurements (mi_pred_embed).
 */
#ifndef MI_PREDICT_H
#define MI_PREDICT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* Op classes: the roofline and the corrections differ per class. */
enum mi_pred_class {
	MI_PC_CONV = 0,	/* dense conv, kernel > 1x1 */
	MI_PC_CONV1X1,
	MI_PC_DWCONV,	/* depthwise / grouped */
	MI_PC_GEMM,	/* Gemm, MatMul */
	MI_PC_POOL,
	MI_PC_ELTWISE,	/* Add, Mul, Relu, Clip, Sigmoid, ... */
	MI_PC_NORM,	/* Softmax, LayerNorm, BatchNorm, Reduce* */
	MI_PC_DATA,	/* Reshape, Transpose, Concat, Slice, Gather, ... */
	MI_PC_COUNT
};

extern const char *const mi_pred_class_names[MI_PC_COUNT];

/* One planned node, as the predictor sees it. */
struct mi_pred_node {
	int cls;		/* enum mi_pred_class */
	int variant;		/* index in the predictor's variant table, -1 */
	int int8;		/* precision: 1 int8, 0 fp32 */
	int threads;		/* thread split (CPU) */
	int nfused;		/* nodes it absorbs (epilogues) */
	int kh, kw, stride, groups;
	double macs;		/* multiply-accumulates (element ops for the rest) */
	double in_bytes, w_bytes, out_bytes;
	double cin, cout, out_hw; /* channels, output spatial size */
};

/* Roofline rates and fixed costs of a device. */
struct mi_pred_caps {
	double macs_per_s;	/* peak MACs per second (this precision mix) */
	double bytes_per_s;	/* memory / DMA bandwidth */
	double launch_ns;	/* per node (CPU) or per job (accelerator) */
	double link_bytes_per_s; /* transfers to/from the host, 0 = none */
};

#define MI_PRED_MAXEMB	32
#define MI_PRED_REF_MAX	20	/* measurements that embed a new device */

struct mi_pred_dev {
	char name[48];		/* "cpu.avx2.t1", "npu0", "sim.u65-hi" */
	struct mi_pred_caps caps;
	int nemb;
	float emb[MI_PRED_MAXEMB];
	/* incremental correction: per class, sum of log residuals and count */
	double bias_sum[MI_PC_COUNT];
	double bias_n[MI_PC_COUNT];
};

struct mi_pred_sample {
	struct mi_pred_node node;
	const float *emb;	/* the device's embedding */
	int nemb;
	struct mi_pred_caps caps;
	double ns;		/* measured */
	int dev;		/* index into the caller's device table (for the
				 * per-device bias; -1 none) */
};

/* ---- gradient-boosted regression trees (gbrt.c) -------------------- */
struct mi_gbrt_node {
	int feat;		/* -1: leaf */
	float thr;		/* go left when x[feat] <= thr */
	float value;		/* leaf value */
	int left, right;
};

struct mi_gbrt {
	int nfeat;
	float base;		/* initial prediction (mean target) */
	float lr;
	int ntrees, nnodes;
	int *root;		/* per tree: index into nodes */
	struct mi_gbrt_node *nodes;
};

struct mi_gbrt_params {
	int ntrees;		/* 0: 150 */
	int depth;		/* 0: 5 */
	int min_leaf;		/* 0: 8 */
	float lr;		/* 0: 0.1 */
	int nbins;		/* candidate thresholds per feature, 0: 32 */
};

/* Fit on x[n][nfeat] -> y[n]; deterministic (no sampling). */
int mi_gbrt_fit(struct mi_gbrt *t, const float *x, const float *y, int n,
		int nfeat, const struct mi_gbrt_params *p);
float mi_gbrt_eval(const struct mi_gbrt *t, const float *x);
void mi_gbrt_fini(struct mi_gbrt *t);
int mi_gbrt_write(const struct mi_gbrt *t, FILE *f);
int mi_gbrt_read(struct mi_gbrt *t, FILE *f);

/* ---- the predictor (predict.c) ------------------------------------- */
#define MI_PRED_MAXVAR	64

struct mi_predictor {
	int nemb;		/* embedding length the trees were fitted on */
	bool fitted;		/* false: roofline only */
	struct mi_gbrt trees;
	int nvariants;
	char *variants[MI_PRED_MAXVAR];
	int ndevs;
	struct mi_pred_dev *devs; /* devices it knows (embeddings, biases) */
};

void mi_pred_init(struct mi_predictor *p);
void mi_pred_fini(struct mi_predictor *p);
/* Variant name -> index (added when add is set and there is room), -1. */
int mi_pred_variant(struct mi_predictor *p, const char *name, bool add);
/* The analytic term alone, ns. */
double mi_pred_roofline(const struct mi_pred_node *n,
			const struct mi_pred_caps *c);
/* Whether the memory term of the roofline is the larger one. */
bool mi_pred_dma_bound(const struct mi_pred_node *n,
		       const struct mi_pred_caps *c);
/* The per-class log correction dev applies to class cls (shrunk). */
double mi_pred_dev_bias(const struct mi_pred_dev *d, int cls);
/* Fit the trees on samples[n] (all with the same nemb). */
int mi_pred_fit(struct mi_predictor *p, const struct mi_pred_sample *s,
		int n, const struct mi_gbrt_params *gp);
/* Node time in ns on dev (its embedding and bias). */
double mi_pred_node_ns(const struct mi_predictor *p,
		       const struct mi_pred_node *n,
		       const struct mi_pred_dev *dev);
/* Same without the per-device bias (what the trees alone say). */
double mi_pred_node_ns_raw(const struct mi_predictor *p,
			   const struct mi_pred_node *n, const float *emb,
			   int nemb, const struct mi_pred_caps *c);
/*
 * The calibration embedding from a device's reference measurements (at
 * most MI_PRED_REF_MAX are used): per op class the shrunk mean of
 * log(measured / roofline), and the overall mean.  Sets dev->nemb =
 * MI_PRED_CALIB_NEMB and dev->emb.  Other embeddings (a fingerprint's)
 * may be appended after it by the caller.
 */
#define MI_PRED_CALIB_NEMB	(MI_PC_COUNT + 1)
void mi_pred_embed(struct mi_pred_dev *dev, const struct mi_pred_node *nodes,
		   const double *ns, int n);
/* Fold one later measurement into dev's per-class bias. */
void mi_pred_refine(const struct mi_predictor *p, struct mi_pred_dev *dev,
		    const struct mi_pred_node *n, double ns);
/* Devices the predictor keeps (found by name; added when add). */
struct mi_pred_dev *mi_pred_dev_find(struct mi_predictor *p, const char *name,
				     bool add);
/* A small text file: header, variants, devices, trees.  -errno. */
int mi_pred_save(const struct mi_predictor *p, const char *path);
int mi_pred_load(struct mi_predictor *p, const char *path);

/* ---- models, plans and devices (model.c) --------------------------- */
struct mi_model;
struct mi_plan;

/* A model's planned nodes with what the predictor and the plan cost need. */
struct mi_pred_pnode {
	char *name;
	char *op;
	char *device;		/* the plan entry's device, "cpu" */
	char *variant;
	struct mi_pred_node node;
	int ninputs;
	int *inputs;		/* producing pnode per input, -1: graph input
				 * or constant */
	double *in_bytes;	/* per input */
	double out_bytes;	/* all outputs */
	int last_use;		/* position of the last consumer, -1 output */
	bool is_output;
	double prof_ns;		/* measured (fastest run), 0 = none */
};

struct mi_pred_graph {
	int n;
	struct mi_pred_pnode *v;	/* execution order */
	double weight_bytes;
};

/* Features of every node of a loaded model as it is planned now (after
 * mi_model_plan_apply when a plan was applied).  Nodes whose variant the
 * predictor lacks get variant -1 (add: registered). */
int mi_pred_graph_build(struct mi_model *m, struct mi_predictor *p, bool add,
			struct mi_pred_graph *pg);
/* Read the model's fastest per-node times (MI_MODEL_PROFILE) into
 * pg->v[].prof_ns. */
int mi_pred_graph_profile(struct mi_model *m, struct mi_pred_graph *pg);
void mi_pred_graph_fini(struct mi_pred_graph *pg);

/* CPU device description: name "cpu.<isa>.t<threads>" and roofline rates
 * for that ISA and thread count. */
void mi_pred_cpu_dev(struct mi_pred_dev *d, int isa, int threads);

/* ---- the fingerprint database as measurements (fpdb.c) ------------- */
struct mi_dev;
struct mi_fp_db;
struct mi_fp_sample;

/* The node a fingerprint row measured, as a model node of the same op
 * would be seen (variant looked up in p, -1 when p lacks it).  -EINVAL
 * for rows that are not nodes (transfers). */
int mi_pred_fp_node(struct mi_predictor *p, const struct mi_fp_sample *s,
		    struct mi_pred_node *n);
/*
 * Calibrate pd (its caps already set: mi_pred_cpu_dev or the device's
 * GET_PARAM figures) from d's fingerprint rows at this thread count (all
 * counts when the fingerprint has none at it): the calibration embedding
 * from up to MI_PRED_REF_MAX rows spread over the op classes, the
 * per-class bias from every row, the link bandwidth from the fastest
 * transfer.  Stale and fell-back rows are skipped.  Returns the rows
 * used, -ENOENT (no fingerprint, or no usable row) with a reason.
 */
int mi_pred_dev_from_fp(struct mi_predictor *p, struct mi_fp_db *db,
			struct mi_dev *d, int threads, struct mi_pred_dev *pd);

/* ---- plan latency and memory (plan_cost.c) ------------------------- */
#define MI_PRED_MAXDEV	8

struct mi_pred_result {
	double total_ns;		/* critical path */
	int ndevs;
	char dev_name[MI_PRED_MAXDEV][48];
	double busy_ns[MI_PRED_MAXDEV];	/* sum of node times per device */
	double xfer_ns[MI_PRED_MAXDEV];	/* transfers into the device */
	int jobs[MI_PRED_MAXDEV];
	double peak_bytes[MI_PRED_MAXDEV]; /* activations, tensor lifetimes */
	double weight_bytes[MI_PRED_MAXDEV];
};

/*
 * Critical path over the planned nodes: each device runs its nodes in
 * order, a node starts when its inputs are there (plus a transfer when
 * they come from another device) and its device is free; consecutive
 * dependent nodes on one accelerator form one job (one launch).  devs[i]
 * is the device of pg nodes whose device name equals devs[i].name, or,
 * for "cpu", devs[0].  -ENODEV when a node names a device not given.
 */
int mi_pred_plan(const struct mi_predictor *p, const struct mi_pred_graph *pg,
		 struct mi_pred_dev *const *devs, const char *const *names,
		 int ndevs, struct mi_pred_result *r);
/* Same with known node times: node_ns[k] >= 0 is used for pg->v[k]
 * instead of the prediction (measured times; the plan search). */
int mi_pred_plan_ns(const struct mi_predictor *p,
		    const struct mi_pred_graph *pg,
		    struct mi_pred_dev *const *devs, const char *const *names,
		    int ndevs, const double *node_ns, struct mi_pred_result *r);
/* Bytes of activations live at each step (all devices, copies included,
 * as the peaks above count them) into live[pg->n].  -ENODEV as above. */
int mi_pred_plan_live(const struct mi_pred_graph *pg, const char *const *names,
		      int ndevs, double *live);
/* Workspace bytes a conv node allocates with this kernel variant (im2col
 * columns, Winograd tiles and filter); 0 for the others. */
double mi_pred_variant_ws(const struct mi_pred_node *n, const char *variant);

/* ---- the simulator's timing model (sim.c) -------------------------- */
/* Hidden and visible parameters of a sim personality (Documentation/
 * sim.rst, "Timing model"). */
struct mi_pred_simchip {
	char name[48];
	double macs_int8;	/* MACs per cycle */
	double ops_int32;	/* element ops per cycle */
	double clock_hz;
	double dma_bw;		/* bytes/s */
	double burst;		/* bytes */
	double sram;		/* bytes */
	double launch_ns;
	double dw_eff_pct;	/* depthwise efficiency */
	int nchw_preferred;	/* 0: activations must be transposed */
};

/* A personality with every parameter drawn in a plausible range. */
void mi_pred_simchip_random(struct mi_pred_simchip *c, uint64_t *seed);
/* The node's modelled time as one job (int8), ns; < 0 if the chip cannot
 * run it (its class is not an accelerator op). */
double mi_pred_simchip_ns(const struct mi_pred_simchip *c,
			  const struct mi_pred_node *n);
/* Caps as GET_PARAM would give them (the hidden parameters not). */
void mi_pred_simchip_dev(const struct mi_pred_simchip *c,
			 struct mi_pred_dev *d);

/* ---- recalibration from measured device jobs (recal.c) ------------ */
/*
 * Jobs a device ran, as the predictor sees them: job j is the nodes
 * nodes[first[j]] .. nodes[first[j + 1] - 1] in submission order, and the
 * device measured meas_ns[j] for it (a median over sampled runs).  A
 * job's predicted time is its nodes' times with the launch paid once, as
 * mi_pred_plan() counts it.
 */
struct mi_pred_jobs {
	int njobs;
	const int *first;		/* njobs + 1 entries */
	const struct mi_pred_node *nodes;
	const double *meas_ns;
};

struct mi_pred_recal {
	double meas_ns, pred_ns;	/* all jobs, before */
	double after_ns;		/* predicted with the new terms */
	double factor[MI_PC_COUNT];	/* applied per class, 1 unchanged */
	double dma_factor;		/* time-weighted over dma-bound nodes */
	double compute_factor;		/* ... over compute-bound nodes */
	bool dma;			/* dma-bound ops moved most */
};

/* Weight a recalibrated class's correction gets in dev's bias: far more
 * than the few measurements folded in before, so it replaces them. */
#define MI_PRED_RECAL_WEIGHT	1000.0

/* Predicted time of job j on dev, ns. */
double mi_pred_job_ns(const struct mi_predictor *p,
		      const struct mi_pred_dev *dev,
		      const struct mi_pred_jobs *jobs, int j);
/*
 * Fit per-class factors so that the predicted job times match the
 * measured ones (multiplicative updates, each job's error shared among
 * its classes by their predicted time) and fold them into dev's
 * per-class bias.  Fills r (may be NULL).  -EINVAL without usable jobs.
 */
int mi_pred_recalibrate(const struct mi_predictor *p, struct mi_pred_dev *dev,
			const struct mi_pred_jobs *jobs,
			struct mi_pred_recal *r);

/* ---- small statistics (stats.c) ------------------------------------ */
double mi_pred_spearman(const double *a, const double *b, int n);
uint64_t mi_pred_rand(uint64_t *s);	/* splitmix64 */
double mi_pred_uniform(uint64_t *s);	/* [0, 1) */

#endif /* MI_PREDICT_H */
