/* SPDX-License-Identifier: MIT */
/*
 * Plan search (search.c, Documentation/search.rst).  Private to
 * libmetainfer and its tools.
 *
 * The action space is a list of decision groups taken from the model's
 * default plan: one per plan entry with more than one candidate (its
 * variant, which also decides layout and precision: an int8 node's fp32
 * variants are its fp32 fallback), and one per quantized unit when the
 * model has accelerators (the device it is pinned to, the CPU included).
 * A state picks one option per group; option 0 is always the default's
 * choice, so the all-zero state is the default plan.
 *
 * Score of a state (lower is better), each term normalized by the
 * default plan's value:
 *
 *   w1 * L / L0  +  w2 * M / M0  +  w3 * A / 0.01
 *
 * L predicted latency (critical path, mi_pred_plan_ns, with measured node
 * times where the calibration runs have them), M peak memory (activations
 * plus weights, summed over devices), A predicted accuracy loss
 * (1 - cosine against the fp32 reference; 0.01 = one point of cosine).
 * plus, per hardware intent of the model (below), weight * V / V0 of its
 * region.  Hard limits (max_mem per device, min_cosine, units a device
 * does not support, the intents' precisions, layouts and region max_mem)
 * remove a state before it is ranked.
 */
#ifndef MI_SEARCH_IMPL_H
#define MI_SEARCH_IMPL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct mi_model;
struct mi_plan;
struct mi_predictor;

/*
 * Hardware intents (intent.c, Documentation/search.rst "Hardware
 * intents"): metadata_props "metainfer.intent.<name>" of the model, value
 * "KIND:NODES[:opt=val,...]".  They add a weighted term per region to the
 * search's score and hard limits (region peak memory, precisions, layout).
 */
#define MI_INTENT_KEY	"metainfer.intent."

enum mi_intent_kind {
	MI_INTENT_LATENCY_CRITICAL,
	MI_INTENT_MEMORY_CONSTRAINED,
	MI_INTENT_POWER_SENSITIVE,
	MI_INTENT_COUNT
};

#define MI_INTENT_FP32	1u
#define MI_INTENT_INT8	2u

struct mi_intent {
	char name[64];		/* the key's <name> */
	int kind;		/* enum mi_intent_kind */
	char *sel;		/* NODES as written: "*", "A..B", "A+B+C" */
	double weight;		/* of the region's score term, default 4 */
	double max_mem;		/* region peak bytes, 0: no limit */
	char layout[8];		/* "NCHW", "NHWC", "NCHWc", "": any */
	unsigned prec;		/* allowed MI_INTENT_FP32/INT8, 0: any */
	int nnodes;		/* resolved (mi_intents_load): plan entry */
	char **nodes;		/* names, execution order, no duplicates */
};

struct mi_intents {
	int n;
	struct mi_intent *v;
};

extern const char *const mi_intent_kind_names[MI_INTENT_COUNT];

/* A byte count ("64k", "1.5MiB"): n characters of s; -EINVAL if bad. */
int mi_parse_size(const char *s, size_t n, double *v);
/* One spec; -EINVAL with one line in err naming what is wrong.  Free
 * it with mi_intent_fini() either way. */
int mi_intent_parse(const char *name, const char *spec, struct mi_intent *it,
		    char *err, size_t errlen);
void mi_intent_fini(struct mi_intent *it);
/*
 * The model's intents (its metadata) plus extra "NAME=SPEC" strings,
 * resolved against its planned nodes.  -EINVAL (mi_last_error: one line
 * naming the key, intent, option or node) on anything unknown.
 */
int mi_intents_load(struct mi_model *m, const char *const *extra, int nextra,
		    struct mi_intents *v);
void mi_intents_fini(struct mi_intents *v);
/* True when node (a plan entry name) is in intent it. */
bool mi_intent_has(const struct mi_intent *it, const char *node);
/* "mem: MEMORY_CONSTRAINED on 5 nodes (a..b), max_mem 1 MiB, ..." */
void mi_intent_describe(const struct mi_intent *it, char *buf, size_t len);

struct mi_search_opts {
	double w[3];		/* latency, memory, accuracy; all 0: 1, 0, 1 */
	double max_mem;		/* bytes per device, 0: no limit */
	double min_cosine;	/* against the reference, 0: no limit */
	double budget_s;	/* wall time for the whole search, 0: none */
	int top;		/* plans verified besides the default, 0: 5 */
	int beam;		/* states kept per step, 0: 8 */
	int runs;		/* timed runs per verified plan, 0: 5 */
	int warmup;		/* untimed runs first, 0: 1 */
	int calib;		/* calibration sweeps (CPU node times), -1
				 * none, 0: one per candidate rank */
	double amortize;	/* inferences the gain is counted over before
				 * it must pay for verification, 0: 1000 */
	uint64_t seed;		/* inputs of the verification runs */
	/* The predictor (NULL: roofline only) */
	const struct mi_predictor *pred;
	/* Reference outputs' model (an fp32 load of the same file), NULL:
	 * the default plan's outputs are the reference. */
	struct mi_model *ref;
	FILE *progress;		/* one updating line, NULL: quiet */
	/* Intents besides the model's own, "NAME=KIND:NODES[:opts]" */
	const char *const *intents;
	int nintents;
};

#define MI_SEARCH_MAXINTENT	8

/* One plan that was predicted and (maybe) measured. */
struct mi_search_cand {
	int *choice;		/* per group */
	double score;
	double pred_ns;		/* predicted latency */
	double pred_mem;	/* predicted peak bytes (all devices) */
	double pred_loss;	/* predicted 1 - cosine */
	bool applied;		/* apply accepted it */
	bool measured;
	double meas_ns;		/* median of the timed runs */
	double cosine;		/* outputs against the reference */
	bool feasible;		/* measured and within the limits */
	char why[160];		/* why dropped, "" */
	/* per intent: the region's node time (ns, LATENCY_CRITICAL), peak
	 * bytes (MEMORY_CONSTRAINED), energy estimate (pJ, POWER_SENSITIVE) */
	double ival[MI_SEARCH_MAXINTENT];
	double mscore;		/* score with the measured latency, intents */
};

struct mi_search_result {
	int ngroups;		/* decision groups */
	int nvar, ndev;		/* of them: variant and device groups */
	long evaluated;		/* states scored */
	long pruned;		/* states removed by a hard limit */
	int rejected;		/* plans mi_model_plan_apply() refused */
	int ncand;		/* cand[0] is the default */
	struct mi_search_cand *cand;
	int best;		/* index into cand */
	bool kept_default;	/* the search decided not to verify */
	double search_s, compile_s, run_s, calib_s;
	struct mi_plan *plan;	/* the winner (owned) */
	char note[200];		/* one line: why the default was kept, "" */
	struct mi_intents intents;	/* the ones honoured (owned) */
};

/*
 * Search m's plans (loaded with MI_MODEL_PROFILE for the calibration
 * sweeps; without it the predictor alone scores).  On return m runs the
 * winner.  -EDOM when no plan meets the hard limits (mi_last_error says
 * which), -EINVAL bad options.
 */
int mi_search_run(struct mi_model *m, const struct mi_search_opts *o,
		  struct mi_search_result *r);
void mi_search_result_fini(struct mi_search_result *r);

/* "w1,w2,w3" -> w; -EINVAL on anything else (negative, all zero). */
int mi_search_parse_weights(const char *s, double w[3]);

#endif /* MI_SEARCH_IMPL_H */
