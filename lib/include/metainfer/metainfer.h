/* SPDX-License-Identifier: MIT */
/*
 * libmetainfer public API.
 *
 * Load an ONNX model, query its inputs and outputs, run it on the CPU.
 *
 *	struct mi_model *m;
 *	int ret = mi_model_load("model.onnx", NULL, &m);
 *	if (ret < 0) {
 *		fprintf(stderr, "%s\n", mi_last_error());
 *		return 1;
 *	}
 *	struct mi_value in = { .dtype = MI_DT_FLOAT, .ndim = 4,
 *			       .dims = { 1, 3, 224, 224 }, .data = buf,
 *			       .nbytes = sizeof(buf) };
 *	struct mi_value out;
 *	ret = mi_model_run(m, &in, 1, &out, 1);
 *	...
 *	mi_model_free(m);
 *
 * Conventions (liburing style): constructors return int and take an
 * out-parameter; every function returns 0 (or a count) on success and a
 * negative errno on failure, and never sets errno.  The reason for the last
 * failure of the calling thread is available as one line from
 * mi_last_error().
 */
#ifndef METAINFER_H
#define METAINFER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MI_MAX_DIMS 8

/* Element types, numbered like ONNX TensorProto.DataType. */
enum mi_dtype {
	MI_DT_UNDEFINED = 0,
	MI_DT_FLOAT = 1,
	MI_DT_UINT8 = 2,
	MI_DT_INT8 = 3,
	MI_DT_UINT16 = 4,
	MI_DT_INT16 = 5,
	MI_DT_INT32 = 6,
	MI_DT_INT64 = 7,
	MI_DT_STRING = 8,
	MI_DT_BOOL = 9,
	MI_DT_FLOAT16 = 10,
	MI_DT_DOUBLE = 11,
	MI_DT_UINT32 = 12,
	MI_DT_UINT64 = 13,
	MI_DT_BFLOAT16 = 16,
};

struct mi_model;

/* mi_model_opts.flags */
#define MI_MODEL_REFERENCE	(1u << 0) /* reference kernels only */
#define MI_MODEL_NO_NORMALIZE	(1u << 1) /* skip normalization passes */
#define MI_MODEL_NO_FOLD	(1u << 2) /* skip load-time constant folding */
#define MI_MODEL_NO_ARENA	(1u << 3) /* malloc each tensor, no planning */
#define MI_MODEL_PROFILE	(1u << 4) /* time every node (mi_model_profile) */
#define MI_MODEL_NO_INT8	(1u << 5) /* run QDQ models in fp32 (no int8 kernels) */
#define MI_MODEL_NO_SPIN	(1u << 6) /* the caller sleeps, not spins, on workers */
#define MI_MODEL_PROFILE_CPU	(1u << 7) /* MI_MODEL_PROFILE on the process CPU clock */
#define MI_MODEL_NO_MERGE	(1u << 8) /* no node merges (1x1 + depthwise, SE
					   * fold): one profile entry per node */
#define MI_MODEL_NO_URING	(1u << 9) /* accelerator jobs through ioctls, not
					   * io_uring (Since METAINFER_0.4) */
#define MI_MODEL_FLAGS_MASK	0x3ffu

/* mi_model_opts.isa: the widest instruction set the CPU kernels may use. */
enum mi_isa_cap {
	MI_ISA_CAP_NATIVE = 0,	/* what the CPU has */
	MI_ISA_CAP_GENERIC = 1,	/* portable C */
	MI_ISA_CAP_AVX2 = 2,	/* AVX2 + FMA */
	MI_ISA_CAP_AVX512 = 3,	/* AVX-512 F/BW/DQ/VL (+ VNNI where present) */
};

struct mi_model_opts {
	uint32_t flags;		/* MI_MODEL_*; unknown bits -> -EINVAL */
	int32_t nthreads;	/* 0 = number of online cores */
	uint64_t max_tensor_bytes; /* 0 = default limit (4 GiB) */
	int32_t isa;		/* enum mi_isa_cap; above the CPU's -> -EOPNOTSUPP */
	int32_t reserved32;	/* must be zero */
	/* Devices the model may run on (Since METAINFER_0.4): names as
	 * mi_device_info() gives them, comma-separated, or "all"; NULL or
	 * "cpu" = the CPU only.  The CPU is always one of them. */
	const char *devices;
	uint64_t reserved[2];	/* must be zero */
};

/*
 * A tensor passed to or returned from mi_model_run().  For inputs, name may
 * be NULL (inputs are then taken in declaration order) and data points to
 * nbytes of dense row-major elements.  For outputs, MetaInfer fills every
 * field; data stays valid until the next mi_model_run() or mi_model_free()
 * on the same model and must not be freed.
 */
struct mi_value {
	const char *name;
	int32_t dtype;		/* enum mi_dtype */
	int32_t ndim;
	int64_t dims[MI_MAX_DIMS];
	void *data;
	uint64_t nbytes;
};

/*
 * Static description of a model input or output.  dims[i] == -1 marks a
 * symbolic dimension whose name is dim_param[i] (e.g. "batch"); ndim == -1
 * means the rank is unknown.  Strings belong to the model.
 */
struct mi_tensor_info {
	const char *name;
	int32_t dtype;
	int32_t ndim;
	int64_t dims[MI_MAX_DIMS];
	const char *dim_param[MI_MAX_DIMS];
};

/* Load and prepare path (an ONNX ModelProto).  opts may be NULL. */
int mi_model_load(const char *path, const struct mi_model_opts *opts,
		  struct mi_model **modelp);
/* Same, from memory; basedir resolves external data (NULL = none allowed),
 * label names the model in error messages. */
int mi_model_load_buffer(const void *buf, size_t len, const char *basedir,
			 const char *label, const struct mi_model_opts *opts,
			 struct mi_model **modelp);
void mi_model_free(struct mi_model *model);

int mi_model_input_count(const struct mi_model *model);
int mi_model_output_count(const struct mi_model *model);
int mi_model_input_info(const struct mi_model *model, int index,
			struct mi_tensor_info *info);
int mi_model_output_info(const struct mi_model *model, int index,
			 struct mi_tensor_info *info);

/*
 * Run the model once.  inputs[ninputs] must cover every model input (by
 * name, or in order when names are NULL); outputs receives the first
 * noutputs model outputs.  Symbolic dimensions are bound from the inputs;
 * a change of input shape re-plans the model.
 */
int mi_model_run(struct mi_model *model, const struct mi_value *inputs,
		 int ninputs, struct mi_value *outputs, int noutputs);

/* Size of one element (0 for unsupported types) and a name ("float32"). */
size_t mi_dtype_size(int dtype);
const char *mi_dtype_name(int dtype);

/* One-line reason for the calling thread's last failure ("" if none). */
const char *mi_last_error(void);

/* Library version, "MAJOR.MINOR.PATCH". */
const char *mi_version(void);

/*
 * Per-node profile of a model loaded with MI_MODEL_PROFILE: wall-clock
 * time of every node summed over the runs since the last reset.  Index
 * runs over the nodes in execution order, 0 .. mi_model_profile_count()-1
 * (a node that absorbed others, e.g. a Conv with its Relu, is one entry);
 * name and op_type stay valid until mi_model_free().  Returns 0, -ENOENT
 * for an index out of range, -EINVAL without MI_MODEL_PROFILE.
 */
struct mi_node_profile {
	const char *name;	/* node name, "" when the model has none */
	const char *op_type;
	int32_t fast;		/* 1 = a fast kernel variant ran it */
	int32_t reserved;
	uint64_t calls;
	uint64_t ns;		/* total wall-clock nanoseconds */
};

int mi_model_profile_count(const struct mi_model *model);
int mi_model_profile(const struct mi_model *model, int index,
		     struct mi_node_profile *prof);
void mi_model_profile_reset(struct mi_model *model);

/*
 * The same node's fastest single run since the last reset, in ns (0 when
 * it has not run).  On a shared machine the sum of these minima is a
 * steadier figure for comparing two builds than the sums above, which
 * include every preemption.  Same index and return values as
 * mi_model_profile().  Since METAINFER_0.2.
 */
int mi_model_profile_min(const struct mi_model *model, int index,
			 uint64_t *min_ns);

/*
 * Plans (Documentation/plan.rst).  A plan says, for every node of the
 * normalized graph, which kernel variant runs it (a stable name such as
 * "conv.im2col", or "ref" for the reference op), with which layouts and
 * precision, which nodes it absorbs (fused) and for how many threads.
 * mi_model_plan_get() reads back what the model runs now (after
 * mi_model_load(): what the default rules chose); mi_model_plan_apply()
 * runs another plan, or rejects it with one line (mi_last_error()) naming
 * the node and the reason, the model keeping the plan it had.  Plans are
 * written to and read from versioned JSON files.  Since METAINFER_0.3.
 */
struct mi_plan;

struct mi_plan_info {
	const char *model;	/* label of the model it was made for */
	const char *isa;	/* instruction set the kernels were made for */
	int32_t threads;
	int32_t nodes;		/* entries, 0 .. nodes-1 for mi_plan_node() */
	uint64_t fingerprint;	/* hash of the normalized graph */
};

struct mi_plan_node {
	const char *name;	/* node name, "<op>#<index>" if it has none */
	const char *op;
	const char *device;	/* "cpu", or an accelerator ("npu0") */
	const char *variant;
	const char *layout_in;	/* "NCHW", "NCHW16c", ... or "auto" */
	const char *layout_out;
	const char *precision;	/* "fp32", "int8" */
	const char *qparams;	/* int8: where the scales come from, or NULL */
	int32_t threads;
	int32_t nfused;
	const char *const *fused; /* names of the nodes absorbed */
};

int mi_model_plan_get(struct mi_model *model, struct mi_plan **planp);
int mi_model_plan_apply(struct mi_model *model, const struct mi_plan *plan);
/* Back to the default rules. */
int mi_model_plan_reset(struct mi_model *model);

int mi_plan_read(const char *path, struct mi_plan **planp);
int mi_plan_parse(const char *buf, size_t len, struct mi_plan **planp);
int mi_plan_write(const struct mi_plan *plan, FILE *f);
int mi_plan_dup(const struct mi_plan *plan, struct mi_plan **planp);
void mi_plan_free(struct mi_plan *plan);

int mi_plan_info(const struct mi_plan *plan, struct mi_plan_info *info);
/* Entry index (0 .. info.nodes-1); strings valid until mi_plan_free(). */
int mi_plan_node(const struct mi_plan *plan, int index,
		 struct mi_plan_node *node);
/* Replace (or add) the entry of node name: variant, the nodes it fuses;
 * its layouts and precision become "auto" (whatever the variant gives). */
int mi_plan_set(struct mi_plan *plan, const char *name, const char *variant,
		const char *const *fused, int nfused);
/* Remove the entry of node name (-ENOENT: none). */
int mi_plan_unset(struct mi_plan *plan, const char *name);
/* The thread split of node name: 1 runs it on the calling thread alone,
 * 0 on all the model's threads (-ENOENT: no entry).  Since METAINFER_0.7. */
int mi_plan_set_threads(struct mi_plan *plan, const char *name, int threads);

/*
 * The legal choices for one node of the model: every kernel variant that
 * supports it (with and without the fusion it can take), "ref" always.
 * *cands points to an array owned by the model, valid until the next
 * mi_plan_candidates(), mi_model_plan_apply() or mi_model_free(); the
 * count is returned.  -ENOENT: no such node.
 */
struct mi_plan_candidate {
	const char *variant;
	const char *layout_in, *layout_out;
	const char *precision;
	int32_t is_current;	/* what the model runs now */
	int32_t nfused;
	const char *const *fused;
	const char *why;	/* one line: why it is legal / chosen / not */
};

int mi_plan_candidates(struct mi_model *model, const char *node,
		       const struct mi_plan_candidate **cands);

/*
 * Devices (Documentation/devices.rst).  Device 0 is the CPU; every
 * MetaInfer accelerator (a render node whose DRM driver is "metainfer")
 * follows.  Strings stay valid for the life of the process.  Since
 * METAINFER_0.4.
 */
struct mi_device_info {
	const char *name;	/* "cpu", "npu0", ...: what opts.devices takes */
	const char *driver;	/* "cpu", "metainfer" */
	const char *backend;	/* the kernel backend ("sim"), "" */
	const char *node;	/* "/dev/dri/renderD128", "" for the CPU */
	const char *kind;	/* "cpu", "npu" */
	const char *personality; /* the chip's name (PARAM_NAME), CPU model */
	uint64_t fw_version;
	uint64_t op_mask;	/* bit DRM_METAINFER_OP_x (uapi) */
	uint64_t dtype_mask;	/* bit DRM_METAINFER_DTYPE_x */
	uint64_t layout_mask;	/* bit DRM_METAINFER_LAYOUT_x */
	uint32_t preferred_layout;
	uint32_t num_queues;
	uint64_t macs_per_cycle;
	uint64_t clock_khz;
	uint64_t sram_bytes;
	uint64_t dma_bw;	/* bytes/s */
	uint64_t dma_burst;
	int64_t temperature_mc;	/* INT64_MIN: no sensor */
	int64_t power_mw;	/* INT64_MIN: no sensor */
	int32_t up;		/* 0: marked down after a fault */
	int32_t reserved;
};

/* Number of devices (>= 1), or -errno. */
int mi_device_count(void);
int mi_device_info(int index, struct mi_device_info *info);

/*
 * Per device a model ran on, since load or the last reset: device time
 * (busy ns from job completions for accelerators, wall for the CPU), jobs,
 * jobs that failed and reran on the CPU, and bytes moved to and from the
 * device.  Index 0 .. mi_model_device_count()-1; 0 is the CPU.
 */
struct mi_device_stats {
	const char *device;
	uint64_t busy_ns;
	uint64_t jobs;
	uint64_t faults;
	uint64_t bytes_in;
	uint64_t bytes_out;
	uint64_t nodes;		/* nodes of the plan placed on it */
	/* Formerly reserved (0 before them): constants uploaded, once
	 * per plan (not in bytes_in); job inputs taken from another job's
	 * buffer (PRIME or the same BO, no copy) and their bytes. */
	uint64_t bytes_const;
	uint64_t shared;
	uint64_t shared_bytes;
};

int mi_model_device_count(const struct mi_model *model);
int mi_model_device_stats(const struct mi_model *model, int index,
			  struct mi_device_stats *st);
void mi_model_device_stats_reset(struct mi_model *model);
/* The model's placement as text: its devices, per node the device (and
 * job), the jobs and the transfers between devices.  Since METAINFER_0.4. */
int mi_model_placement_write(struct mi_model *model, FILE *f);

/*
 * Switchable models (Documentation/supernet.rst).  A model exported by
 * tools/supernet/supernet.py holds several variants of some layers
 * (standard, depthwise-separable, grouped + shuffle conv), each layer's
 * output being the sum of its variants weighted by one-hot initializers;
 * the metadata_props entry "metainfer.switch" describes them and the
 * held-out accuracy of every configuration.  mi_model_set_config()
 * activates one configuration between runs: every variant's weights stay
 * resident, the unselected branches are pruned at plan time (not
 * computed); NULL goes back to the full graph (every branch computed and
 * weighted by the file's initializers).  Since METAINFER_0.4.
 */
#define MI_SWITCH_MAX_LAYERS	16
#define MI_SWITCH_MAX_VARIANTS	8

struct mi_switch_info {
	const char *name;	/* layer name ("L0") */
	int32_t nvariants;
	int32_t current;	/* active variant, -1: the full graph */
	int32_t in_channels;
	int32_t out_channels;
	const char *variants[MI_SWITCH_MAX_VARIANTS]; /* "std", "dws", ... */
	uint64_t macs[MI_SWITCH_MAX_VARIANTS];	/* per variant, batch 1 */
	double latency_us[MI_SWITCH_MAX_VARIANTS]; /* the model's table */
};

/* One configuration the model's metadata measured. */
struct mi_switch_config {
	int32_t choice[MI_SWITCH_MAX_LAYERS];	/* variant per layer */
	double accuracy;	/* held-out accuracy, percent */
	double latency_us;	/* sum of the layers' table entries */
};

/* Switchable layers (0: not a switchable model). */
int mi_model_switch_count(const struct mi_model *model);
int mi_model_switch_info(const struct mi_model *model, int layer,
			 struct mi_switch_info *info);
/* Configurations listed in the metadata (0 .. count-1). */
int mi_model_config_count(const struct mi_model *model);
int mi_model_config(const struct mi_model *model, int index,
		    struct mi_switch_config *cfg);
/* choice[mi_model_switch_count()] or NULL (full graph).  -ENOENT: not a
 * switchable model; -EINVAL: a variant out of range (the model keeps the
 * configuration it had). */
int mi_model_set_config(struct mi_model *model, const int *choice);
/* The active configuration; returns 1 when pruned, 0 for the full graph. */
int mi_model_get_config(const struct mi_model *model, int *choice);

/*
 * Move a loaded model to another set of devices between runs (live
 * re-placement): devices as in mi_model_opts.devices (NULL or "cpu": the
 * CPU only).  The model is re-planned there for the shapes it is bound
 * to; kernels, weights and the active configuration stay.  On failure
 * (-ENODEV unknown device, or planning failed) it keeps the devices and
 * plan it had.  Device pins of an applied plan do not carry over.  Since
 * METAINFER_0.5.
 */
int mi_model_set_devices(struct mi_model *model, const char *devices);

/*
 * Meta-controller: pick a configuration for one device.  Inputs: the
 * model's per-configuration accuracy and latency tables (above), the
 * device's embedding (its own latency table at full health, or the
 * model's; times the relative cost of each variant kind on it, 1 = as in
 * the table) and its health vector (lib/health's six dimensions, in
 * [0, 1], with a present mask; absent dimensions count as healthy).  The
 * latency under that health comes from the controller trained offline
 * and stored in the model ("metainfer.metactl" metadata,
 * tools/supernet/metactl.c); a model without one gets a fixed fallback
 * formula (Documentation/supernet.rst).
 * Goal: with latency_budget_us > 0, the most accurate configuration whose
 * prediction fits the budget (the fastest if none does); otherwise the
 * fastest; both among configurations at or above min_accuracy (if none
 * is, the most accurate one).
 */
enum mi_meta_kind {
	MI_META_STD = 0,	/* standard conv */
	MI_META_DWS = 1,	/* depthwise-separable */
	MI_META_GROUP = 2,	/* grouped conv + channel shuffle */
	MI_META_KINDS,
};

struct mi_meta_device {
	/* this device's own latency table, us per layer and variant at
	 * [layer * MI_SWITCH_MAX_VARIANTS + variant] (e.g. measured there
	 * with supernet.py --measure-latency); NULL: the model's table */
	const double *latency_us;
	double scale[MI_META_KINDS];	/* 0 = 1 */
	double health[6];	/* compute, memory, bandwidth, thermal,
				 * power, queue (lib/health order) */
	uint32_t health_present; /* bit per dimension */
	uint32_t reserved;
};

struct mi_meta_goal {
	double min_accuracy;	/* percent; 0 = any */
	double latency_budget_us; /* 0 = none: minimize latency */
};

struct mi_meta_result {
	int32_t config;		/* index for mi_model_config() */
	int32_t fits;		/* 1: meets the budget and the floor */
	double predicted_us;
	double accuracy;
};

int mi_meta_choose(const struct mi_model *model,
		   const struct mi_meta_device *dev,
		   const struct mi_meta_goal *goal, int *choice,
		   struct mi_meta_result *res);

/*
 * The closed loop after deployment (Documentation/predict.rst, "Closed
 * loop").  Call mi_adapt_observe() after every mi_model_run() of a model
 * placed on accelerators: it samples the device jobs' times in windows
 * (after creation, after a re-plan, and when a device's run time jitters),
 * recalibrates a device's predictor terms when measured and predicted
 * differ by more than the tolerance, and re-plans the model (the plan
 * search with the recalibrated predictor).  Since METAINFER_0.6.
 */
struct mi_adapt;

struct mi_adapt_opts {
	double tolerance;	/* |measured / predicted - 1| band, 0: 0.20 */
	double jitter;		/* run-to-run change that opens a window,
				 * 0: 0.10 */
	int32_t window;		/* sampled runs per window (<= 64), 0: 5 */
	int32_t max_iters;	/* recalibrations before giving up, 0: 3 */
	int32_t search_top;	/* plans a re-plan verifies, 0: 3 */
	int32_t search_runs;	/* timed runs per verified plan, 0: 3 */
	const char *predictor;	/* predictor file to start from, NULL: the
				 * roofline of the advertised caps */
	const char *save;	/* written after each recalibration, NULL */
	FILE *log;		/* one line per recalibration, NULL: quiet */
	uint64_t reserved[4];	/* must be zero */
};

struct mi_adapt_stats {
	uint64_t runs;		/* observed */
	uint64_t sampled;	/* runs inside sampling windows */
	uint64_t windows;	/* sampling windows opened */
	uint64_t triggers;	/* of them: opened by jitter */
	uint64_t recals;	/* device recalibrations */
	uint64_t replans;
	uint64_t moved;		/* nodes moved between devices, all re-plans */
	uint64_t nonconverged;	/* episodes that hit max_iters */
	int32_t iters;		/* recalibrations of the episode under way */
	int32_t max_iters_seen;	/* most any converged episode needed */
	int32_t converged;	/* 1: the last window was within tolerance */
	int32_t sampling;	/* 1: a window is open */
	double ratio;		/* worst measured / predicted, last window */
};

int mi_adapt_new(struct mi_model *model, const struct mi_adapt_opts *opts,
		 struct mi_adapt **adaptp);
/* 1 when it re-planned the model, 0, or -errno. */
int mi_adapt_observe(struct mi_adapt *adapt);
int mi_adapt_stats(const struct mi_adapt *adapt, struct mi_adapt_stats *st);
void mi_adapt_free(struct mi_adapt *adapt);

#ifdef __cplusplus
}
#endif

#endif /* METAINFER_H */
