/* SPDX-License-Identifier: MIT */
/*
 * Private structures of lib/plan/: a plan as a value (struct mi_plan),
 * its JSON form (json.c) and the model's planning state.
 */
#ifndef MI_PLAN_IMPL_H
#define MI_PLAN_IMPL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "metainfer/metainfer.h"

/* /2: device may name an accelerator; /1 plans (CPU only) still read */
#define MI_PLAN_SCHEMA "metainfer-plan/2"
#define MI_PLAN_SCHEMA_V1 "metainfer-plan/1"

/* One node of the normalized graph as the plan runs it. */
struct mi_plan_entry {
	char *name;		/* node name, or "<op>#<index>" (see apply.c) */
	char *op;
	char *device;		/* "cpu" */
	int job;		/* device job of the placement + 1 (JSON
				 * "job": N), 0: none, or the default rule */
	char *job_dev;		/* the device job was given for: an edit of
				 * device alone (a search) drops the job */
	char *variant;		/* stable kernel variant name, "ref" */
	char *lay_in, *lay_out;	/* "NCHW", "NCHW16c", ..., "auto" */
	char *precision;	/* "fp32", "int8" */
	char *qparams;		/* int8: where the scales come from; NULL */
	int threads;		/* the thread split the kernel was made for */
	int nfused;		/* nodes absorbed into this one */
	char **fused;
};

struct mi_plan {
	char *model;		/* label of the model it was made for */
	char *isa;
	int threads;
	uint64_t fingerprint;
	uint64_t max_job_us;	/* device job budget (place.c), 0: default */
	int n, cap;
	struct mi_plan_entry *e;
	int nremoved;		/* nodes planning removed (read by nobody) */
	char **removed;
};

/* e's job (+ 1) if it still holds: given for the device e names. */
static inline int mi_plan_entry_job(const struct mi_plan_entry *e)
{
	return e->job && e->job_dev && e->device &&
	       !strcmp(e->job_dev, e->device) ? e->job : 0;
}

int mi_plan_entry_add(struct mi_plan *p, struct mi_plan_entry **ep);
void mi_plan_entry_fini(struct mi_plan_entry *e);
int mi_plan_strv_add(char ***v, int *n, const char *s);
struct mi_plan_entry *mi_plan_find(const struct mi_plan *p, const char *name);

/* Reading back what a model runs (apply.c). */
struct mi_model;
/* A placed model one of whose jobs timed out places again before its
 * next run (devexec.c); reading its plan or placement does it first, so
 * they are what that run will have.  0 or -errno. */
int mi_plan_settle(struct mi_model *m);
struct mi_plan_ctx;

struct mi_plan_rb {
	struct mi_model *m;
	struct mi_plan_ctx *c;
	char **labels;		/* per node: its name in plans */
	int *producer;		/* per tensor: live node writing it now, -1 */
	int *owner;		/* per node: where it went (itself if live,
				 * -1: dead before planning, or removed) */
};

int mi_plan_rb_init(struct mi_plan_rb *r, struct mi_model *m);
void mi_plan_rb_fini(struct mi_plan_rb *r);
int mi_plan_readback(struct mi_model *m, struct mi_plan_rb *r,
		     struct mi_plan **planp);
int mi_plan_label_find(char **labels, int n, const char *name);
int mi_plan_prov_of(const struct mi_plan_rb *r, int i);
int mi_plan_variant_prov(const char *op, const char *variant);
void mi_plan_layout_of(const struct mi_plan_rb *r, int i, bool out, char *buf,
		       size_t len);
const char *mi_plan_precision_of(const struct mi_plan_rb *r, int i);

/* The model's last mi_plan_candidates() answer (candidates.c). */
struct mi_plan_cands {
	int n;
	struct mi_plan_candidate *c;
	char **strs;		/* every string the candidates point to */
	int nstrs;
	const char ***fused;	/* per candidate */
};

void mi_plan_cands_free(struct mi_plan_cands *c);

/* json.c: errors as one line into err. */
int mi_plan_json_write(const struct mi_plan *p, FILE *f);
int mi_plan_json_parse(const char *buf, size_t len, struct mi_plan **planp,
		       char *err, size_t errlen);

#endif /* MI_PLAN_IMPL_H */
