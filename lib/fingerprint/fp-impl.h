/* SPDX-License-Identifier: MIT */
/* Private to lib/fingerprint: the store, the suite's run state, backends. */
#ifndef MI_FP_IMPL_H
#define MI_FP_IMPL_H

#include <sqlite3.h>
#include <stdint.h>

#include "fingerprint/fingerprint.h"

struct mi_fp_db {
	sqlite3 *db;
};

/* ---- store.c ---------------------------------------------------------- */
/* Versions a device's rows were measured under (the staleness keys). */
struct fp_versions {
	char driver[96];	/* driver/backend */
	char personality[64];
	uint64_t fw_version;
	uint64_t caps_hash;	/* FNV-1a over struct mi_dev_caps */
	char lib_version[96];
};

void mi_fp_versions_of(struct mi_dev *d, const char *lib_version,
		       struct fp_versions *v);
/* The device row of d: id, or -ENOENT when absent and !create.  When the
 * stored versions differ from v, they are updated, every row of the
 * device is marked stale and *changed is set. */
int mi_fp_dev_row(struct mi_fp_db *db, struct mi_dev *d,
		  const struct fp_versions *v, bool create, int64_t *id,
		  bool *changed);
/* 1 if a fresh row with s's key exists, 0 if not (missing or stale);
 * with out, the stored row is copied there. */
int mi_fp_sample_get(struct mi_fp_db *db, int64_t dev,
		     const struct mi_fp_sample *key, struct mi_fp_sample *out);
int mi_fp_sample_put(struct mi_fp_db *db, int64_t dev,
		     const struct mi_fp_sample *s);
int mi_fp_probe_fresh(struct mi_fp_db *db, int64_t dev, const char *name,
		      double x);
int mi_fp_probe_put(struct mi_fp_db *db, int64_t dev, const char *name,
		    double x, double y);
/* Mark rows stale: family < 0 all (probes too), else that family's
 * samples (and, for GEMM, conv and transfer, the probes they feed).
 * Returns the number of rows marked. */
int mi_fp_mark_stale(struct mi_fp_db *db, int64_t dev, int family);
int mi_fp_run_log(struct mi_fp_db *db, int64_t dev, const char *grid,
		  const struct mi_fp_report *rep);
int mi_fp_exec(struct mi_fp_db *db, const char *sql);

/* ---- suite.c: the run state backends see ----------------------------- */
struct fp_run {
	struct mi_fp_db *db;
	struct mi_dev *d;
	int64_t dev;
	int grid;
	int threads;
	bool sweep;		/* full grid, threads not given: also every
				 * core (CPU) */
	void *priv;		/* the backend's */
};

/* Per device kind: the grid and how to measure one point or probe. */
struct fp_backend {
	/* base points of the grid (variant ""): count, at most max stored */
	int (*grid)(struct fp_run *r, struct mi_fp_sample *pts, int max);
	/* the legal variants of a base point, the default first */
	int (*variants)(struct fp_run *r, const struct mi_fp_sample *pt,
			char (*names)[32], int max);
	/* measure s (variant set): fill the timing or fell_back */
	int (*measure)(struct fp_run *r, struct mi_fp_sample *s);
	/* probe points: name and x of index i (0: past the end) */
	int (*probe_point)(struct fp_run *r, int i, char *name, double *x);
	int (*probe)(struct fp_run *r, const char *name, double x, double *y);
	/* the three ops of the staleness check: indices into grid() */
	int (*check_points)(struct fp_run *r, int *idx);
	void (*fini)(struct fp_run *r);
};

extern const struct fp_backend mi_fp_cpu_backend;	/* suite_cpu.c */
extern const struct fp_backend mi_fp_dev_backend;	/* suite_dev.c */

/* Statistics of ns[0..n-1] (sorted in place) into s. */
void mi_fp_stats(double *ns, int n, struct mi_fp_sample *s);
uint64_t mi_fp_now_ns(void);
/* Runs to take: warm-up and measured, by grid. */
void mi_fp_runs(int grid, int *warmup, int *runs);

#endif /* MI_FP_IMPL_H */
