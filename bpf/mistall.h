/* SPDX-License-Identifier: GPL-2.0-only */
/* mistall: the event mistall.bpf.c sends for each stalled job. */
#ifndef MISTALL_H
#define MISTALL_H

#define MISTALL_COMM_LEN 16

struct mistall_event {
	__u64 ts_ns; /* CLOCK_MONOTONIC at metainfer:done */
	__u64 seqno;
	__u64 wait_ns; /* drm_sched_job (or submit) -> drm_run_job */
	__u64 run_ns; /* drm_run_job -> metainfer:done */
	__u64 busy_ns; /* the device's own figure (metainfer:done) */
	__s32 dev; /* render minor */
	__u32 ctx;
	__u32 queue;
	__u32 pid; /* submitting process */
	__s32 status; /* 0 or -errno */
	__u32 pad;
	char comm[MISTALL_COMM_LEN];
};

#endif
