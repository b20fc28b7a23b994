/* SPDX-License-Identifier: MIT */
/*
 * lib/fingerprint: what a device is really good at, measured.
 *
 *  - A standard micro-benchmark suite per device (suite.c, suite_cpu.c,
 *    suite_dev.c): per op family the zoo uses, over a grid of shapes,
 *    dtypes, layouts and every kernel variant that is legal for the shape,
 *    the median / p90 / min of repeated runs after a warm-up, the achieved
 *    rate and whether the run fell back to a reference kernel.  The CPU
 *    runs one-node ONNX models through the normal executor with a plan
 *    naming the variant; accelerators (any struct mi_dev taking command
 *    streams: kernel devices, emulated ones) run uapi jobs and report
 *    device time (job->busy_ns).
 *  - Micro-architecture probes: bandwidth versus size, GEMM throughput
 *    versus size, launch latency, depthwise efficiency.
 *  - A SQLite store (store.c) keyed by the device's identity; each device
 *    row keeps the versions it was measured under (driver, firmware,
 *    personality and a hash of its capabilities, library build), and a
 *    change of any of them marks all its rows stale.  Runs are
 *    incremental: only missing or stale rows are measured.
 *  - A staleness check (mi_fp_check): three common ops re-timed; a family
 *    whose op moved by more than a threshold is marked stale.
 *  - The hardware embedding (embed.c): a fixed-length vector per device
 *    from capabilities, probes and optional runtime feedback, the input
 *    of the latency predictor (lib/predict).
 *
 * Private to libmetainfer and its tools (not in the public header).  All
 * functions return 0 (or a count) or -errno with a one-line reason
 * (mi_set_error / mi_last_error()).
 */
#ifndef MI_FINGERPRINT_H
#define MI_FINGERPRINT_H

#include <stdbool.h>
#include <stdint.h>

struct mi_dev;
struct mi_fp_db;

/* Op families of the suite (the "family" column). */
enum mi_fp_family {
	MI_FP_CONV = 0,	   /* dense / grouped conv, by kernel size */
	MI_FP_DWCONV,	   /* depthwise conv */
	MI_FP_GEMM,	   /* Gemm / MatMul / uapi GEMM */
	MI_FP_POOL,	   /* max / average / global pooling */
	MI_FP_ELTWISE,	   /* Add, Mul, Relu, Sigmoid, Clip */
	MI_FP_REORDER,	   /* layout changes (Transpose, COPY NCHW->NHWC) */
	MI_FP_QUANT,	   /* QuantizeLinear / DequantizeLinear / REQUANTIZE */
	MI_FP_TRANSFER,	   /* host <-> device buffer copies */
	MI_FP_FAMILY_COUNT
};

/* "conv", "dwconv", ...; NULL out of range. */
const char *mi_fp_family_name(int family);
/* The family named s, or -EINVAL. */
int mi_fp_family_parse(const char *s);

/*
 * One measured point.  p[] holds the shape, by family:
 *   CONV/DWCONV: n, cin, h, w, cout, k (square kernel), stride, groups
 *   GEMM:        m, k, n
 *   POOL:        n, c, h, w, k (0: global), stride
 *   ELTWISE, QUANT, REORDER: elements (p[0]); REORDER: n, c, h, w
 *   TRANSFER:    bytes
 * Unused entries are 0.  work is MACs (conv, gemm) or bytes moved (the
 * rest); rate is work per second (MAC/s or B/s) at the median.
 */
#define MI_FP_NPARAM 8

struct mi_fp_sample {
	int family;		/* enum mi_fp_family */
	char op[24];		/* "Conv", "QLinearConv", "gemm", "copy", ... */
	char variant[32];	/* plan variant ("conv.im2col", "ref"), or
				 * "device" for a command-stream device */
	char dtype[8];		/* "fp32", "int8", "int16", "uint8" */
	char layout[8];		/* "NCHW", "NHWC", "plain" */
	int64_t p[MI_FP_NPARAM];
	int threads;		/* CPU threads (1 for devices) */
	double median_ns, p90_ns, min_ns; /* 0 when fell_back */
	int runs;
	double work, rate;
	bool fell_back;		/* the variant asked for did not run (a
				 * reference kernel did, or the device
				 * rejected the op: no timing then) */
	bool stale;
};

/* A probe curve point (probe table): name, x, y. */
struct mi_fp_probe {
	char name[24];		/* "bw", "gemm", "launch", ... */
	double x, y;
};

/* Suite grids. */
enum mi_fp_grid {
	MI_FP_GRID_FULL = 0,
	MI_FP_GRID_QUICK = 1,	/* a few shapes per family; < 60 s on a CPU */
	MI_FP_GRID_TINY = 2,	/* the smallest points only (tests) */
};

/* Progress of a suite run (called after each point, and once at the start
 * with done == 0): points done / total, seconds so far and the estimate of
 * what is left (< 0 while unknown), what was just measured. */
typedef void (*mi_fp_progress_fn)(void *arg, int done, int total,
				  double elapsed_s, double eta_s,
				  const char *what);

struct mi_fp_opts {
	int grid;		/* enum mi_fp_grid */
	int threads;		/* CPU threads of the grid; 0: 1 (and the
				 * number of cores too with the full grid) */
	const char *lib_version; /* NULL: this build (mi_version() + the
				  * ELF build id); tests fake one */
	const char *lock_path;	/* NULL: /tmp/metainfer-fingerprint.lock */
	int lock_wait_ms;	/* how long to wait for another suite (0: 60 s) */
	double threshold;	/* mi_fp_check: relative change that makes a
				 * family stale (0: 0.5, i.e. +-50%) */
	mi_fp_progress_fn progress; /* optional */
	void *progress_arg;
};

/* What a run did. */
struct mi_fp_report {
	int measured;		/* points measured now */
	int skipped;		/* already in the DB and fresh */
	int fell_back;		/* of the measured ones */
	int stale_marked;	/* rows found stale by versions or the check */
	double seconds;
	char clock_state[96];	/* governor / frequency / load at the start */
};

/* Open (creating it and its tables if needed) the DB at path. */
int mi_fp_db_open(const char *path, struct mi_fp_db **dbp);
void mi_fp_db_close(struct mi_fp_db *db);

/*
 * Bring d's fingerprint up to date: compare the stored versions with the
 * device's (a change marks every row stale), then measure every point of
 * the grid and every probe that is missing or stale, under the suite lock.
 * report may be NULL.
 */
int mi_fp_run(struct mi_fp_db *db, struct mi_dev *d,
	      const struct mi_fp_opts *opts, struct mi_fp_report *report);

/*
 * The staleness check before use: versions as in mi_fp_run, then three
 * common ops re-timed (a 3x3 conv, a GEMM, an element-wise op); every
 * family whose op moved by more than opts->threshold against the stored
 * median has its rows marked stale.  Returns the number of families
 * marked stale (0: fresh), -ENOENT if d was never fingerprinted.
 * stale_mask (may be NULL) gets bit (1 << family) per stale family,
 * bit 31 for a version change.
 */
int mi_fp_check(struct mi_fp_db *db, struct mi_dev *d,
		const struct mi_fp_opts *opts, uint32_t *stale_mask);

/*
 * Measured samples of d.  family < 0: all; op and variant NULL: any.
 * Fills at most max samples (samples may be NULL with max 0 to count)
 * and returns how many match, or -ENOENT when d has no fingerprint.
 * Stale rows are returned with stale set.
 */
int mi_fp_lookup(struct mi_fp_db *db, struct mi_dev *d, int family,
		 const char *op, const char *variant,
		 struct mi_fp_sample *samples, int max);

/* Probe points of d named name (NULL: all), as mi_fp_lookup. */
int mi_fp_probes(struct mi_fp_db *db, struct mi_dev *d, const char *name,
		 struct mi_fp_probe *probes, int max);

/*
 * Runtime feedback for the embedding: the warm-up time of one of the
 * model's own kernels and what the fingerprint has for the same family
 * and a similar size (the caller's estimate, e.g. the predictor's).
 */
struct mi_fp_feedback {
	int family;
	double measured_ns;
	double expected_ns;
};

/*
 * The hardware embedding: MI_FP_EMBED_DIM floats, each roughly in
 * [-1, 2], laid out as
 *   [0, 16)  capabilities (GET_PARAM, or cpuid/sysfs for the CPU), log-
 *            scaled: 0 clock, 1 MACs per cycle, 2 DMA bandwidth, 3 burst,
 *            4 SRAM (CPU: largest cache), 5-7 op / dtype / layout
 *            counts, 8 preferred layout, 9 queues, 10 is-CPU, 11 ISA
 *            level, 12 cores, 13 peak MAC/s, 14 API version, 15 emulated;
 *  [16, 40)  probes: 16-23 bandwidth at 64 * 8^i bytes relative to the
 *            peak, 24 peak bandwidth, 25 saturation knee, 26 drop knee
 *            (SRAM / cache edge; 0: none), 27-32 GEMM MAC/s at the probe
 *            sizes relative to the peak, 33 GEMM peak, 34 its drop knee,
 *            35 launch latency, 36 depthwise efficiency (dw / dense MAC
 *            rate), 37 int8 efficiency / 4, 38 small-transfer efficiency,
 *            39 submit round trip;
 *  [40, 48)  runtime feedback: 40-43 mean log2(measured / expected) / 4
 *            per group (conv, gemm, element-wise-like, transfers), 44-46
 *            its spread for the first three, 47 sample count (log);
 *            zeros without feedback.
 * Needs d's probes in db (mi_fp_run); returns MI_FP_EMBED_DIM, -ENOENT
 * without a fingerprint, -EINVAL if n < MI_FP_EMBED_DIM.
 */
#define MI_FP_EMBED_DIM 48
#define MI_FP_EMBED_CAPS 0
#define MI_FP_EMBED_PROBES 16
#define MI_FP_EMBED_FEEDBACK 40

int mi_fp_embedding(struct mi_fp_db *db, struct mi_dev *d,
		    const struct mi_fp_feedback *fb, int nfb, float *vec,
		    int n);

/* The library version a run records by default (mi_version() plus the
 * build id of the object holding libmetainfer). */
const char *mi_fp_lib_version(void);

#endif /* MI_FINGERPRINT_H */
