/* SPDX-License-Identifier: MIT */
/*
 * The plan search's working state, shared by search.c and the intents'
 * part of the search in intent.c.  Private to lib/plan.
 */
#ifndef MI_SEARCH_STATE_H
#define MI_SEARCH_STATE_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "plan/search-impl.h"
#include "predict/predict.h"

struct sopt {
	char *variant;		/* variant groups */
	bool int8;
	int slot;		/* device groups: device slot */
	double *ns;		/* per member position: time, -1 predict */
	bool measured;		/* ns from a calibration sweep */
	char *lay;		/* variant groups: the layout it writes */
	char *lay_in;		/* and the one it reads */
	double ws;		/* variant groups: workspace bytes */
};

struct sgroup {
	bool dev;		/* device group (else variant group) */
	char *entry;		/* variant groups: plan entry name */
	int nfused;
	char **fused;
	int nmem;
	int *pos;		/* member positions in pg */
	char **names;		/* device groups: member plan entry names */
	int nopt;
	struct sopt *opt;	/* opt[0]: the default's choice */
};

struct search {
	struct mi_model *m;
	const struct mi_search_opts *o;
	struct mi_search_result *r;
	struct mi_predictor own;
	const struct mi_predictor *pred;
	struct mi_plan *def;
	struct mi_pred_graph pg;
	int ndevs;
	struct mi_pred_dev devs[MI_PRED_MAXDEV];
	struct mi_pred_dev *dp[MI_PRED_MAXDEV];
	const char *names[MI_PRED_MAXDEV];
	char **devname0;	/* pg's device strings as built */
	int ng;
	struct sgroup *g;
	double *base_ns;	/* per position, the default's, -1 predict */
	double *scale;		/* per position: measured / predicted */
	double *cpu_int8_ns;	/* per position on the CPU (device groups) */
	double int8_macs;	/* of the default plan */
	double loss0;		/* default's measured 1 - cosine */
	double L0, M0, score0;	/* the default's */
	int nfixed;		/* candidates measured whatever is predicted */
	/* evaluation scratch */
	double *ns;
	bool *int8;
	/* verification */
	int nin, nout;
	struct mi_value *in;
	float **ref;
	size_t *refn;
	struct timespec t0;
	uint64_t *seen;
	size_t nseen, capseen;
	/* intents (r->intents): per intent its region (per position), per
	 * position the allowed precisions and the preferred layout (NULL:
	 * none, or no option of the node has it), the intent setting them */
	unsigned char *region[MI_SEARCH_MAXINTENT];
	unsigned *prec;
	int *prec_from;
	const char **pref;
	int *pref_from;
	double *base_ws, *ws;	/* per position: workspace bytes */
	const char **base_lay, **lay;	/* per position: written layout */
	const char **base_lay_in, **lay_in;	/* and read layout */
	double *live;		/* per position: live activation bytes */
	double ival0[MI_SEARCH_MAXINTENT];	/* the default's, normalizers */
	double imean0[MI_SEARCH_MAXINTENT];	/* memory: its mean over steps */
	bool def_ok;		/* the default meets every hard limit */
	/* evaluate(): how far the state is from the intents' limits (0:
	 * within, INFINITY: another hard limit removed it) */
	double penalty, penalty0;
};

int mi_search_pos_of(const struct mi_pred_graph *pg, const char *name);
int mi_search_slot_of(const struct search *s, const char *dev);

/* intent.c: the model's intents in the search (r->intents, the per
 * position limits); a region's value (and for memory its mean over the
 * region's steps); the intents' hard limits on the state evaluate() just
 * set up; the measured scores of the verified plans (returns the weight
 * on latency). */
int mi_search_intents_setup(struct search *s);
double mi_search_region_value(struct search *s, int i, double *mean);
bool mi_search_intent_limits(struct search *s,
			     const struct mi_search_cand *c, char *why,
			     size_t wlen);
double mi_search_measured_scores(struct search *s);

#endif /* MI_SEARCH_STATE_H */
