/* SPDX-License-Identifier: MIT */
/*
 * MetaInfer scheduler: the hardware state registry and the hierarchical
 * solver.  A C library (build/scheduler/libmisched.a) fed with plain
 * structs, so that the health sampler (lib/health) and the latency
 * predictor (lib/predict) plug in by filling them; nothing here reads a
 * device or a model itself.
 *
 *   registry   per device a stream of health samples in the device's own
 *              clock -> clocks aligned to CLOCK_MONOTONIC, fused over time,
 *              credibility-checked; confirmed changes become events.
 *   solver     per model: feasible device sets -> layer assignment by the
 *              composite score CAS -> last-moment adjustment from the
 *              latest state; greedy, HEFT and exhaustive baselines share
 *              the problem struct and the cost model.
 *
 * Every function returns 0 or -errno; a bad input also sets one line
 * readable with mi_last_error().  Documentation/scheduler.rst.
 */
#ifndef MI_SCHEDULER_H
#define MI_SCHEDULER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ==== clock alignment ================================================ */

/*
 * A device clock against CLOCK_MONOTONIC: host = offset + slope * device
 * (both in ns), estimated from (device ts, host ts) pairs over a window
 * by a Theil-Sen fit (median of pairwise slopes, then median intercept),
 * so a few pairs delayed in transit do not bend it.
 */
#define MI_CLOCK_WINDOW 32

struct mi_clock_fit {
	int64_t dev0, host0;		/* origin of the window's values */
	double dev[MI_CLOCK_WINDOW];	/* device ts - dev0 */
	double host[MI_CLOCK_WINDOW];	/* host ts - host0 */
	uint32_t n, next;		/* pairs held, ring position */
	double slope;			/* host ns per device ns (1 + drift) */
	double offset;			/* host - host0 at device ts dev0 */
	bool valid;			/* at least two distinct pairs */
};

void mi_clock_fit_init(struct mi_clock_fit *c);
/* Add a pair and refit (O(window^2 log window), window = 32). */
int mi_clock_fit_add(struct mi_clock_fit *c, int64_t dev_ns, int64_t host_ns);
/* A device timestamp on the host clock (identity until valid; with one
 * pair, that pair's offset). */
int64_t mi_clock_to_host(const struct mi_clock_fit *c, int64_t dev_ns);
/* Drift in parts per million ((slope - 1) * 1e6). */
double mi_clock_drift_ppm(const struct mi_clock_fit *c);

/* ==== health samples ================================================= */

/*
 * The six standard dimensions, each in [0, 1], 1 = healthy, in the order
 * of lib/health's vectors.  One difference: lib/health reports bandwidth
 * saturation (1 = saturated); the registry takes bandwidth headroom,
 * 1 - saturation, so that every dimension degrades downwards.
 */
enum mi_reg_dim {
	MI_REG_COMPUTE,		/* compute readiness */
	MI_REG_MEMORY,		/* memory availability */
	MI_REG_BANDWIDTH,	/* 1 - bandwidth saturation */
	MI_REG_THERMAL,		/* thermal headroom */
	MI_REG_POWER,		/* power budget */
	MI_REG_QUEUE,		/* queue stability */
	MI_REG_NDIM
};

const char *mi_reg_dim_name(enum mi_reg_dim d);

/* Raw values that travel with a sample. */
enum mi_reg_raw {
	MI_REG_RAW_QUEUE_DEPTH,	/* jobs queued: queue stability comes from it */
	MI_REG_RAW_TEMP_MC,	/* milli-degrees C */
	MI_REG_RAW_POWER_MW,
	MI_REG_RAW_MEM_FREE_BYTES,
	MI_REG_RAW_COUNT
};

/*
 * One sample.  A dimension (or raw value) is present only when its bit in
 * present (raw_present) is set; an absent one stays absent all the way to
 * the solver, never 0.  ts_ns is in the device's clock.
 */
struct mi_reg_sample {
	int64_t ts_ns;
	uint32_t present;		/* bit d: value[d] is valid */
	uint32_t raw_present;		/* bit r: raw[r] is valid */
	double value[MI_REG_NDIM];
	double raw[MI_REG_RAW_COUNT];
};

/* ==== the registry =================================================== */

struct mi_registry;

/* Tunables; zero fields take the defaults given. */
struct mi_registry_opts {
	uint32_t confirm_count;	 /* 3: consecutive anomalous samples */
	uint32_t recover_count;	 /* 5: consecutive good samples to recover */
	double degrade_below;	 /* 0.5: a value under it is anomalous */
	double recover_above;	 /* 0.7: recovery needs values over it */
	double peer_margin;	 /* 0.15: below the peers' median by this */
	int64_t peer_max_age_ns; /* 1 s: older peer samples are not compared */
	int64_t fast_period_ns;	 /* 200 ms: faster reporters are smoothed */
	int64_t smooth_tau_ns;	 /* 300 ms: smoothing time constant */
	int64_t flap_window_ns;	 /* 30 s: a reversal within it is a flap */
	uint32_t flap_limit;	 /* 3 flaps in the window: damped */
	double queue_k;		 /* 4: stability = 1/(1 + k var/(mean+1)^2) */
	double fail_prior_jobs;	 /* 20: failure-rate prior (jobs) */
	double flap_penalty;	 /* 0.1: reliability /= 1 + p * flaps */
};

/* A device as the registry knows it. */
struct mi_registry_device_info {
	const char *name;	/* "sim0" */
	const char *klass;	/* comparable devices share it ("sim:ethos-u55") */
};

enum mi_dim_state { MI_DIM_OK, MI_DIM_DEGRADED };

/* The registry's view of one dimension of one device. */
struct mi_dim_view {
	bool present;		/* ever reported (absent stays absent) */
	enum mi_dim_state state;/* confirmed state */
	double confirmed;	/* value the solver uses (changes on confirm) */
	double fused;		/* smoothed / interpolated latest value */
	uint32_t anomalous_run;	/* consecutive anomalous samples now */
	uint32_t flaps;		/* flaps ever */
	uint32_t flaps_recent;	/* flaps within the flap window */
	int64_t last_flap_ns[4];/* host ns, newest first (0: none) */
	bool damped;		/* flapping: transitions need more samples */
};

struct mi_device_view {
	char name[32];
	char klass[64];
	bool lost;
	uint64_t samples, jobs, failures;
	double period_ns;	/* mean reporting interval (EWMA) */
	bool fast;		/* smoothed (else interpolated) */
	struct mi_dim_view dim[MI_REG_NDIM];
	double raw[MI_REG_RAW_COUNT];
	uint32_t raw_present;
	double reliability;	/* [0, 1] from failure rate and flaps */
	struct mi_clock_fit clock;
};

enum mi_registry_event_type {
	MI_REG_EV_DEGRADED,	/* degradation (or a new degraded level) confirmed */
	MI_REG_EV_RECOVERED,	/* its recovery confirmed (hysteresis) */
	MI_REG_EV_DAMPED,	/* a dimension flaps: damping on */
	MI_REG_EV_DEVICE_ADDED,
	MI_REG_EV_DEVICE_LOST,
};

struct mi_registry_event {
	enum mi_registry_event_type type;
	int device;
	int dim;		/* enum mi_reg_dim, -1 for device events */
	double value;		/* the confirmed value */
	int64_t host_ns;
	uint64_t seq;		/* registry-wide, from 1 */
};

typedef void (*mi_registry_cb)(const struct mi_registry_event *ev, void *arg);

int mi_registry_create(const struct mi_registry_opts *opts,
		       struct mi_registry **regp);
void mi_registry_destroy(struct mi_registry *reg);
/* Devices get ids 0, 1, ... in order; at most MI_SCHED_MAX_DEVICES. */
int mi_registry_add_device(struct mi_registry *reg,
			   const struct mi_registry_device_info *info, int *id);
/* The device is gone (unplugged, failed reset): an event, then it is
 * never offered to a solver again. */
int mi_registry_device_lost(struct mi_registry *reg, int dev, int64_t host_ns);
/* A (device ts, host ts) pair for the clock fit. */
int mi_registry_clock_pair(struct mi_registry *reg, int dev, int64_t dev_ns,
			   int64_t host_ns);
/* One sample; events it confirms go to subscribers before it returns
 * (called without the registry's lock held). */
int mi_registry_push(struct mi_registry *reg, int dev,
		     const struct mi_reg_sample *s);
/* Job outcome, for the failure rate in reliability. */
int mi_registry_job_done(struct mi_registry *reg, int dev, bool ok);
/* Up to 8 subscribers.  Callbacks may query the registry, not
 * unsubscribe; after mi_registry_unsubscribe returns, cb(arg) is not
 * running and never runs again (-ENOENT if it was not subscribed). */
int mi_registry_subscribe(struct mi_registry *reg, mi_registry_cb cb,
			  void *arg);
int mi_registry_unsubscribe(struct mi_registry *reg, mi_registry_cb cb,
			    void *arg);
int mi_registry_device(struct mi_registry *reg, int dev,
		       struct mi_device_view *out);
/* The fused value of a dimension at host time host_ns (interpolated
 * between samples for a slow reporter, smoothed for a fast one);
 * -ENODATA when the dimension is absent. */
int mi_registry_fused(struct mi_registry *reg, int dev, enum mi_reg_dim d,
		      int64_t host_ns, double *value);
int mi_registry_count(struct mi_registry *reg);
uint64_t mi_registry_seq(struct mi_registry *reg);

/* ==== the solver ===================================================== */

#define MI_SCHED_MAX_DEVICES 64
#define MI_SCHED_UNSUPPORTED (-1.0)	/* in lat_ns: the device lacks the op */

/* One layer (node or fused group) of a model: a DAG in topological order
 * (every pred index is smaller than the layer's own). */
struct mi_sched_layer {
	const uint32_t *preds;
	uint32_t n_preds;
	uint64_t out_bytes;	/* sent to each consumer on another device */
};

struct mi_sched_device {
	uint64_t mem_bytes;	/* memory limit for this problem */
};

/*
 * A placement problem.  Per (layer, device) arrays are [l * n_devices + d].
 * lat_ns < 0: unsupported there (a hard limit).  The cost model:
 * each device runs its layers one at a time in priority order (upward
 * rank); a layer starts when its device is free and every input has
 * arrived; an input from another device costs xfer_fixed_ns[a][b] +
 * out_bytes * xfer_ns_per_byte[a][b].  With S streams of the model, a
 * layer's output is ready lat after its start, but its device stays busy
 * S x lat (every stream's instance of it runs there).  Makespan = last
 * finish (one inference's latency under S streams).  Energy = sum of
 * lat * power (one inference).
 */
struct mi_sched_problem {
	uint32_t n_layers, n_devices;
	uint32_t streams;		/* concurrent streams; 0 means 1 */
	const struct mi_sched_layer *layers;
	const struct mi_sched_device *devices;
	const double *lat_ns;		/* [L * D] predicted latency */
	const uint64_t *mem_bytes;	/* [L * D] resident bytes there */
	const double *power_w;		/* [L * D] power while running */
	const double *xfer_ns_per_byte;	/* [D * D], 0 on the diagonal */
	const double *xfer_fixed_ns;	/* [D * D] or NULL */
};

/* Latest state per device as the solver sees it (the registry fills it
 * with mi_registry_solver_state; tests and other sources may too). */
struct mi_sched_dev_state {
	bool available;		/* false: lost, never placed on */
	double slowdown;	/* latency multiplier >= 1 (throttled) */
	double xfer_slowdown;	/* transfer multiplier >= 1 (saturated) */
	double mem_fraction;	/* usable share of mem_bytes, (0, 1] */
	double reliability;	/* [0, 1] */
};

void mi_sched_dev_state_nominal(struct mi_sched_dev_state *st, uint32_t n);
/* Confirmed state only: one odd sample never changes what it returns. */
int mi_registry_solver_state(struct mi_registry *reg,
			     struct mi_sched_dev_state *st, uint32_t n);

struct mi_sched_opts {
	double w_latency, w_power, w_reliability;	/* 0.7, 0.15, 0.15 */
	uint32_t refine_passes;	/* 2: improvement sweeps over the plan */
	uint32_t refine_work;	/* 256: refinement re-times at most this many
				 * layers per layer of the problem */
	double adjust_margin;	/* 0.2: last-moment move needs 20% gain */
};

/* A placement: device per layer plus its cost by the problem's model. */
struct mi_sched_plan {
	uint32_t n_layers;
	int32_t *device;	/* [n_layers], caller's array */
	double makespan_ns;
	double energy_j;
	double cas;		/* mean CAS of the chosen placements */
	uint32_t moved;		/* layers moved by adjust/failover */
};

struct mi_solver;

/* Workspace for problems up to max_layers x max_devices; solving does not
 * allocate. */
int mi_solver_create(uint32_t max_layers, uint32_t max_devices,
		     const struct mi_sched_opts *opts, struct mi_solver **sp);
void mi_solver_destroy(struct mi_solver *s);
/* Check a problem (topological order, array sizes, every layer placeable
 * somewhere); -EINVAL / -ENOSPC with one line otherwise. */
int mi_sched_problem_check(const struct mi_sched_problem *p);
/* What other models already placed take from each device: busy ns per
 * period (their streams' work) and resident bytes. */
struct mi_sched_base {
	const double *load_ns;		/* [D] or NULL */
	const uint64_t *mem_bytes;	/* [D] or NULL */
};

/* The hierarchical solve.  st and base may be NULL (nominal, empty). */
int mi_solver_solve(struct mi_solver *s, const struct mi_sched_problem *p,
		    const struct mi_sched_dev_state *st,
		    const struct mi_sched_base *base,
		    struct mi_sched_plan *plan);
/* Last-moment adjustment: revalidate plan against the latest state just
 * before execution; layers on unavailable devices are moved (failover),
 * a layer whose device got slower moves if another finishes it
 * adjust_margin earlier.  Never violates a hard limit. */
int mi_solver_adjust(struct mi_solver *s, const struct mi_sched_problem *p,
		     const struct mi_sched_dev_state *st,
		     const struct mi_sched_base *base,
		     struct mi_sched_plan *plan);
/* Cost of a placement by the problem's model (and its hard limits:
 * -ENOSPC over memory, -EOPNOTSUPP unsupported, -ENODEV unavailable). */
int mi_sched_evaluate(struct mi_solver *s, const struct mi_sched_problem *p,
		      const struct mi_sched_dev_state *st,
		      const struct mi_sched_base *base,
		      struct mi_sched_plan *plan);

/* Baselines, same problem and plan.  Greedy: ONNX Runtime's provider
 * order (first device that supports a node, so consecutive nodes form the
 * largest subgraphs).  HEFT: upward rank, earliest finish time.
 * Exhaustive: every placement, minimum makespan; -E2BIG beyond
 * max_evals placements. */
int mi_sched_greedy(struct mi_solver *s, const struct mi_sched_problem *p,
		    const struct mi_sched_dev_state *st,
		    struct mi_sched_plan *plan);
int mi_sched_heft(struct mi_solver *s, const struct mi_sched_problem *p,
		  const struct mi_sched_dev_state *st,
		  struct mi_sched_plan *plan);
int mi_sched_exhaustive(struct mi_solver *s, const struct mi_sched_problem *p,
			const struct mi_sched_dev_state *st, uint64_t max_evals,
			struct mi_sched_plan *plan);

/* ==== several models, re-planning on registry events ================= */

struct mi_sched_model {
	const struct mi_sched_problem *problem;	/* its streams included */
	int32_t *device;	/* [n_layers]: the current placement */
	struct mi_sched_plan plan;
};

struct mi_planner;

/*
 * Places several models on the same devices (in the given order; each
 * model's streams load the devices the next ones see, and memory is
 * shared), subscribes to reg (may be NULL) and re-plans when it confirms
 * a change.  On a device loss the lost device's layers move to the
 * others at once (failover), then a full re-plan.
 */
int mi_planner_create(struct mi_registry *reg, const struct mi_sched_opts *o,
		      struct mi_sched_model *models, uint32_t n_models,
		      struct mi_planner **pp);
void mi_planner_destroy(struct mi_planner *pl);
/* Solve now if a change is pending (or force); 1 if it re-planned. */
int mi_planner_update(struct mi_planner *pl, bool force);
/* The last-moment adjustment of every model's placement with the
 * registry's state now (mi_solver_adjust), just before running: cheap
 * (one pass), never past a hard limit; *moved: layers moved. */
int mi_planner_adjust(struct mi_planner *pl, uint32_t *moved);
/* Re-plans so far (the first solve included). */
uint64_t mi_planner_replans(struct mi_planner *pl);

#ifdef __cplusplus
}
#endif

#endif /* MI_SCHEDULER_H */
