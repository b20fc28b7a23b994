/* SPDX-License-Identifier: MIT */
/*
 * Placement of a model's quantized units on devices (place.c) and their
 * execution as device jobs beside the CPU nodes (devexec.c).  Private to
 * libmetainfer.
 *
 * The CPU plan is made as always; device jobs are an overlay on it.  A job
 * is a run of consecutive quantized units (lower.h) placed on one
 * accelerator.  Bound to the planned graph, it stands for the live nodes
 * all of whose outputs its units produce (its skip set): those do not run
 * on the CPU.  The job is submitted at the position (in g->order) of its
 * first skipped node and waited for at the first position that reads
 * what it writes (its outputs are copied into the graph's tensors there),
 * so CPU nodes in between run while the device works.  A job that fails
 * runs its skipped nodes on the CPU at that same position; the arena
 * lifetimes of every tensor they touch cover [submit, wait] for that.
 */
#ifndef MI_PLACE_IMPL_H
#define MI_PLACE_IMPL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "device/device.h"
#include "device/lower.h"
#include "metainfer/metainfer.h"

struct mi_model;
struct mi_plan;

/* The lowering (lib/device/lower.h) as a table, so that placement can be
 * tested with a test lowering.  NULL table: nothing goes to accelerators. */
struct mi_lowering {
	int (*find)(struct mi_graph *g, struct mi_qunit **units, int *nunits);
	bool (*supported)(struct mi_graph *g, const struct mi_qunit *u,
			  const struct mi_dev_caps *caps, char *why,
			  size_t whylen);
	int (*job)(struct mi_graph *g, const struct mi_qunit *const *units,
		   int n, const struct mi_dev_caps *caps,
		   struct mi_lower_job **jobp);
	void (*job_free)(struct mi_lower_job *job);
	int (*rebind)(struct mi_lower_job *job, int ti, uint32_t bo_index,
		      uint64_t offset);
};

/* Replace the lowering (tests); NULL restores the built-in one. */
void mi_place_set_lowering(const struct mi_lowering *l);
const struct mi_lowering *mi_place_lowering(void);

#define MI_PLACE_MAX_DEVS 16
/* Default job budget: a job's predicted device time stays within this
 * share of the device's job timeout (place.c), leaving room for a loaded
 * machine and for several processes sharing the device. */
#define MI_PLACE_JOB_BUDGET_PCT 25
/* Buffers per job: constants, activations, up to 14 producers' */
#define MI_PLACE_JOB_BOS 16

struct mi_place_stats {
	uint64_t busy_ns, jobs, faults, bytes_in, bytes_out, nodes;
	uint64_t bytes_const;		/* constants uploaded (at bind) */
	uint64_t shared;		/* inputs passed in a shared BO */
	uint64_t shared_bytes;
};

struct mi_place_job {
	int slot;			/* device: index in place->devs */
	const struct mi_qunit **units;	/* into place->units */
	int nunits;
	struct mi_lower_job *lj;
	uint64_t pred_ns;		/* predicted device time (wall) */
	int *prod;			/* tensors its units' nodes write */
	int nprod;
	/* bound to the planned graph (devexec.c) */
	bool bound;
	int p0, pw;			/* submit / wait positions */
	struct mi_dev_bo *cbo, *abo;	/* constants, activations */
	/* bo_index -> buffer: 0 cbo, 1 abo, 2.. the activation buffers of
	 * producer jobs (src[b]) whose outputs this job reads in place */
	struct mi_dev_bo *bos[MI_PLACE_JOB_BOS];
	struct mi_dev_bo *imp[MI_PLACE_JOB_BOS]; /* owned PRIME imports */
	int src[MI_PLACE_JOB_BOS];
	int nbos;
	int *in_src;			/* per lj->t: producer job, -1 copy */
	uint64_t *off0;			/* per lj->t: offset before chaining */
	bool *out_cpu;			/* per lj->t: copied out at finish */
	struct mi_dev_job dj;
	bool inflight, submitted_ok;
	/* this run */
	int state;			/* MI_PJ_x */
	bool copied;			/* every output is in its graph tensor */
	uint32_t fenced;		/* bit b: src[b] was in flight at submit */
};

enum { MI_PJ_IDLE, MI_PJ_INFLIGHT, MI_PJ_DEV, MI_PJ_CPU };

struct mi_place {
	struct mi_dev *devs[MI_PLACE_MAX_DEVS]; /* the model's; cpu first */
	int ndevs;
	struct mi_place_stats st[MI_PLACE_MAX_DEVS];
	int *pin;			/* per node: slot + 1, 0 = free */
	int *jpin;			/* per node: the plan's job + 1 (beside
					 * pin, may be NULL), 0 = the rule's */
	int npin;
	struct mi_qunit *units;
	int nunits;
	int *unit_slot;			/* per unit: its device slot */
	struct mi_place_job *jobs;
	int njobs;
	int nbound;
	int *node_job;			/* per node: job whose skip set it is in */
	bool *shared_node;		/* per node: two jobs stand for it; it
					 * runs on the CPU (devexec.c) */
	int nnodes;
	int *tfirst;			/* per tensor: earliest arena position */
	int ntensors;
	uint64_t step_ns;		/* this run: time in device steps */
	uint64_t max_job_ns;		/* plan entry: job budget, 0 = the
					 * default rule (place.c) */
	bool replan;			/* a job timed out: place again */
	char note[160];			/* why nothing is placed, or "" */
};

/* place.c */
/* The model's devices from a list (mi_dev_select; error: one line). */
int mi_place_init(struct mi_model *m, const char *devices);
void mi_place_fini(struct mi_model *m);
/* Slot of device name among m's devices, -1 when unknown (why says so). */
int mi_place_slot(struct mi_model *m, const char *name, char *why,
		  size_t wlen);
/* Per node device pins from an applied plan (slot + 1, 0 free; copied),
 * NULL to clear (the job pins too). */
int mi_place_pin(struct mi_model *m, const int *pin, int n);
/* Before CPU planning (shapes inferred): find units, choose devices,
 * group and lower jobs. */
int mi_place_prepare(struct mi_model *m);
/* Set the job budget (predicted device ns per job, 0: the default rule);
 * takes effect at the next prepare. */
void mi_place_set_max_job(struct mi_model *m, uint64_t ns);
uint64_t mi_place_max_job(const struct mi_model *m);
/* Device name node ni runs on ("cpu" when none). */
const char *mi_place_node_device(const struct mi_model *m, int ni);
int mi_place_node_job(const struct mi_model *m, int ni);
/* Human-readable placement: per job its device, units, nodes; transfers. */
void mi_place_print(struct mi_model *m, FILE *f);

/* devexec.c */
/* After CPU planning and lifetimes: bind jobs, extend lifetimes, make
 * buffers and upload constants. */
int mi_devexec_bind(struct mi_model *m);
void mi_devexec_unbind(struct mi_model *m);
/* Run-loop hooks: before position p (p == norder: the end). */
int mi_devexec_step(struct mi_model *m, int p);
/* Whether node ni is done by a job (not run on the CPU). */
static inline bool mi_devexec_skips(const struct mi_place *pl, int ni)
{
	return pl && pl->nbound && ni < pl->nnodes && pl->node_job[ni] >= 0 &&
	       pl->jobs[pl->node_job[ni]].bound;
}
/* Around one run: the CPU's busy time is the run's wall time outside
 * device steps. */
void mi_devexec_run_begin(struct mi_model *m);
void mi_devexec_run_end(struct mi_model *m, uint64_t wall_ns);
/* Abandon jobs still in flight (a run that failed). */
void mi_devexec_abort(struct mi_model *m);

#endif /* MI_PLACE_IMPL_H */
