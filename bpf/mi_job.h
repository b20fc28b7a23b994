/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Tracepoint records the eBPF tools read, as laid out by tracefs on the
 * target kernel (events/<system>/<event>/format): the metainfer: events of
 * kernel/mi_trace.h and drm_sched's gpu_scheduler:drm_sched_job and
 * drm_run_job (one event class).  Every record starts with the 8-byte
 * common header.  mi_bpf_check_formats() compares these offsets with the
 * running kernel's before anything is loaded.
 *
 * Types are __u32/__u64 only, which both vmlinux.h (BPF side) and
 * <linux/types.h> (user side) define; include one of them first.
 */
#ifndef MI_JOB_H
#define MI_JOB_H

/* run, timeout; the head of submit and done */
struct mi_tp_job {
	__u64 common;
	__s32 dev;
	__u32 ctx;
	__u32 queue;
	__u32 pad;
	__u64 seqno;
	__u64 fence_ctx;
	__u64 fence_seqno;
};

struct mi_tp_submit {
	struct mi_tp_job job;
	__u32 ops;
	__u32 bos;
};

struct mi_tp_done {
	struct mi_tp_job job;
	__s32 status;
	__u32 pad;
	__u64 busy_ns;
};

/* gpu_scheduler:drm_sched_job and drm_run_job (class drm_sched_job) */
struct mi_tp_sched_job {
	__u64 common;
	__u64 entity; /* struct drm_sched_entity * */
	__u64 fence; /* struct dma_fence *: the job's finished fence */
};

#endif
