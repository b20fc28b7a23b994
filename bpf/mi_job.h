/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The metainfer: tracepoint records (kernel/mi_trace.h) as tracefs lays
 * them out (events/metainfer/<event>/format), after the 8-byte common
 * header.  The BPF side takes the same values as raw tracepoint arguments
 * in TP_PROTO order, which mi_trace.h keeps equal to the record's field
 * order; mi_bpf_check_formats() compares these offsets with the running
 * kernel's before anything is loaded, so a module whose tracepoints
 * changed gets one error line instead of wrong numbers.
 *
 * Types are __u32/__u64 only, which <linux/types.h> defines.
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

#endif
