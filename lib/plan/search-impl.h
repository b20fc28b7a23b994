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
 * Hard limits (max_mem per device, min_cosine, units a device does not
 * support) remove a state before it is scored.
 */
#ifndef MI_SEARCH_IMPL_H
#define MI_SEARCH_IMPL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct mi_model;
struct mi_plan;
struct mi_predictor;

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
};

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
