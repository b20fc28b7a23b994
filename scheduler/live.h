/* SPDX-License-Identifier: MIT */
/*
 * Live adaptation: the hardware state registry, the planner and the
 * meta-controller wired to running inference streams.
 *
 *   health samples --mi_live_push--> registry (3 samples + peers,
 *   hysteresis) --confirmed event--> planner re-solve (CAS solver) ->
 *   per stream: main device (most layers) -> mi_meta_choose() with that
 *   device's confirmed health -> pending structure
 *   stream thread: mi_live_begin() activates it between inferences
 *   (mi_model_set_config), mi_live_end() records the first output.
 *
 * Every confirmed event that changes a stream's placement or structure
 * leaves a chain of timestamps (CLOCK_MONOTONIC ns): detection (the first
 * anomalous sample of the run that confirmed it), confirmation, solve,
 * activation, first output on the new structure.
 *
 * Threads: one pusher (the health sampler or a test) calls mi_live_push
 * and mi_live_device_lost; each stream calls begin/end from its own
 * thread, on its own model; views and chains may be read from any
 * thread.  Documentation/live.rst.
 */
#ifndef MI_LIVE_H
#define MI_LIVE_H

#include <stdbool.h>
#include <stdint.h>

#include <metainfer/metainfer.h>

#include "scheduler.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MI_LIVE_MAX_STREAMS 16

struct mi_live_opts {
	struct mi_registry_opts reg;	/* zero fields: registry defaults */
	struct mi_sched_opts sched;	/* zero: solver defaults */
	double min_accuracy;		/* meta-controller floor, percent */
	/* > 0: this budget (us) for every stream; 0: per stream 1.1 x the
	 * predicted latency of its most accurate configuration on its
	 * first device at nominal health (a healthy device keeps the most
	 * accurate one, a degraded one has to give up some); < 0: none,
	 * the fastest configuration */
	double latency_budget_us;
	uint32_t chain_ring;		/* completed chains kept; 0: 4096 */
	/* move each stream's model to its main device (and the CPU) with
	 * mi_model_set_devices when the placement changes; device names
	 * must then be mi_device_info() names */
	bool move_models;
};

/* A device as the live layer sees it; index = registry id. */
struct mi_live_device {
	const char *name;	/* "cpu", "npu0" */
	const char *klass;	/* comparable devices share it; NULL: name */
	double speed;		/* relative to the model's tables; 0: 1 */
};

enum mi_live_phase {
	MI_LIVE_DETECT,		/* first anomalous sample of the run */
	MI_LIVE_CONFIRM,	/* the registry confirmed it */
	MI_LIVE_SOLVE,		/* placement re-solved, structure chosen */
	MI_LIVE_TAKE,		/* the stream's next begin picked it up */
	MI_LIVE_ACTIVATE,	/* it is in effect (set_devices/config done) */
	MI_LIVE_OUTPUT,		/* first output on the new structure */
	MI_LIVE_NPHASE
};

struct mi_live_chain {
	uint64_t seq;		/* the registry event's */
	int type;		/* enum mi_registry_event_type */
	int device, dim;	/* of the event (dim -1: device event) */
	int stream;
	int from_device, to_device;	/* the stream's main device */
	int from_config, to_config;	/* mi_model_config() index, -1: none */
	int64_t ns[MI_LIVE_NPHASE];
};

struct mi_live_stream_view {
	int device;		/* main device now */
	int config;		/* active configuration, -1: none */
	int32_t choice[MI_SWITCH_MAX_LAYERS];
	int32_t layer_device[MI_SWITCH_MAX_LAYERS];
	int nlayers;		/* placed layers (switchable, or 1) */
	double budget_us;	/* the meta-controller's latency budget */
	uint64_t runs, failures, switches, moves;
	uint64_t switch_failures;	/* activations refused (kept the old) */
	/* since the last mi_live_stream(.., reset = true) */
	uint64_t win_runs;
	uint64_t win_ns, win_max_ns;
};

struct mi_live;

int mi_live_create(const struct mi_live_opts *opts,
		   const struct mi_live_device *devs, int ndevs,
		   struct mi_live **lp);
void mi_live_destroy(struct mi_live *l);
/* Before mi_live_start: a stream running model (its own instance; a
 * model without switchable layers is placed as one layer). */
int mi_live_add_stream(struct mi_live *l, struct mi_model *model, int *id);
/* First solve and choice; the structure is set on each model now. */
int mi_live_start(struct mi_live *l);
struct mi_registry *mi_live_registry(struct mi_live *l);

/* One sample, s->ts_ns on CLOCK_MONOTONIC.  A confirmed change is acted
 * on (solve, choose) before it returns. */
int mi_live_push(struct mi_live *l, int dev, const struct mi_reg_sample *s);
int mi_live_device_lost(struct mi_live *l, int dev);

/* Around every inference of stream id: begin activates a pending
 * structure (and reports the configuration in effect in *config, may be
 * NULL); an activation that fails leaves the model as it was (counted
 * in switch_failures) and the stream runs on.  end records the outcome
 * (status < 0: failed) and its time. */
int mi_live_begin(struct mi_live *l, int id, int *config);
int mi_live_end(struct mi_live *l, int id, int status, uint64_t run_ns);

int mi_live_stream(struct mi_live *l, int id, struct mi_live_stream_view *v,
		   bool reset);
/* Completed chains with index >= from (0 ..); returns how many were
 * copied; *next (may be NULL) gets the index after the last. */
int mi_live_chains(struct mi_live *l, uint64_t from, struct mi_live_chain *out,
		   int max, uint64_t *next);
/* Confirmed events acted on, and those that moved or switched nothing. */
void mi_live_counts(struct mi_live *l, uint64_t *events, uint64_t *idle,
		    uint64_t *superseded);

/*
 * lib/health glue (live_health.c): one vector of lib/health's sampler ->
 * a registry sample of device dev (bandwidth saturation turned into
 * headroom, absent dimensions left absent); a lost or gone device is
 * reported lost once.  Returns 1 when it reported the loss.
 */
struct mi_health_vec;
int mi_live_push_health(struct mi_live *l, int dev,
			const struct mi_health_vec *v);

/* Percentile p (0..100) of n values (sorted in place). */
double mi_live_percentile(double *v, int n, double p);

#ifdef __cplusplus
}
#endif

#endif /* MI_LIVE_H */
