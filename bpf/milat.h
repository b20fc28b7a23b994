/* SPDX-License-Identifier: GPL-2.0-only */
/* milat: the histograms milat.bpf.c fills, one per device, queue and kind. */
#ifndef MILAT_H
#define MILAT_H

/* log2 buckets of microseconds (-m: milliseconds), the last one open */
#define MILAT_SLOTS 27

enum milat_kind {
	MILAT_WAIT, /* queue wait: drm_sched_job (or submit) -> drm_run_job */
	MILAT_RUN, /* run: drm_run_job -> metainfer:done */
	MILAT_KINDS,
};

struct milat_key {
	__s32 dev; /* render minor */
	__u32 queue;
	__u32 kind; /* enum milat_kind */
	__u32 pad;
};

struct milat_hist {
	__u64 slots[MILAT_SLOTS];
	__u64 count;
	__u64 sum_us; /* in the histogram's unit */
	__u64 failed; /* jobs that finished with an error (run only) */
};

#endif
