/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Job lifecycle of metainfer.ko as seen by eBPF, shared by mistall.bpf.c
 * and milat.bpf.c.
 *
 * A job is followed by the identity of its drm_sched "finished" fence
 * (context, seqno), which is unique system-wide:
 *
 *   metainfer:submit            (submitting task) dev, ctx, queue, seqno,
 *                               finished fence; pid and comm come from here
 *   gpu_scheduler:drm_sched_job (same task, entity push) queue wait starts
 *   gpu_scheduler:drm_run_job   (scheduler thread) queue wait ends, run
 *                               starts; remembered per thread because
 *   metainfer:run               (same thread, inside run_job) only names
 *                               the hardware fence, which done uses
 *   metainfer:done              status; run ends.  The including file
 *                               defines mi_job_finished(), called here.
 *
 * gpu_scheduler:drm_sched_process_job is not needed: it follows done from
 * the same dma_fence_signal(), and for a timed-out job only once the
 * scheduler restarts, after the job really ended.
 *
 * All are attached as raw tracepoints (the TP_PROTO arguments): a classic
 * tracepoint program is skipped when it fires while any other BPF program
 * runs on the CPU (bpf_prog_active), e.g. metainfer:done from the sim's
 * completion hrtimer interrupting mi_submit of another process, and the
 * job would never be reported; a raw tracepoint program is only kept from
 * nesting in itself.  The drm_sched structs are read with CO-RE against
 * gpu_sched.ko's BTF; the metainfer: argument order is checked against
 * tracefs by the user side (mi_bpf_util.c, mi_job.h).
 */
#ifndef MI_JOB_BPF_H
#define MI_JOB_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

/* only jobs of this render minor (-1: any) and this process (0: any) */
const volatile int targ_dev = -1;
const volatile __u32 targ_pid = 0;

struct mi_fence_key {
	__u64 context;
	__u64 seqno;
};

struct mi_job_state {
	__u64 t_submit;
	__u64 t_queue; /* drm_sched_job */
	__u64 t_run; /* drm_run_job */
	__u64 seqno;
	__s32 dev;
	__u32 ctx;
	__u32 queue;
	__u32 pid;
	char comm[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct mi_fence_key); /* finished fence */
	__type(value, struct mi_job_state);
} mi_jobs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct mi_fence_key); /* hardware fence */
	__type(value, struct mi_fence_key); /* finished fence */
} mi_hw_to_job SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32); /* scheduler thread id */
	__type(value, struct mi_fence_key); /* job in its run_job */
} mi_running SEC(".maps");

/* drm_sched's types (gpu_sched.ko BTF): only the fields read here */
struct drm_sched_fence___mi {
	struct dma_fence finished;
} __attribute__((preserve_access_index));

struct drm_sched_job___mi {
	struct drm_sched_fence___mi *s_fence;
} __attribute__((preserve_access_index));

static __always_inline void mi_sched_key(struct drm_sched_job___mi *sj,
					 struct mi_fence_key *k)
{
	k->context = BPF_CORE_READ(sj, s_fence, finished.context);
	k->seqno = BPF_CORE_READ(sj, s_fence, finished.seqno);
}

static void mi_job_finished(const struct mi_job_state *j, __u64 now,
			    __s32 status, __u64 busy_ns);

SEC("raw_tp/submit")
int BPF_PROG(mi_submit, int dev, __u32 ctx_id, __u32 queue, __u64 seqno,
	     __u64 fence_ctx, __u64 fence_seqno)
{
	struct mi_fence_key k = { fence_ctx, fence_seqno };
	struct mi_job_state j = {};
	__u32 pid = bpf_get_current_pid_tgid() >> 32;

	if (targ_dev >= 0 && dev != targ_dev)
		return 0;
	if (targ_pid && pid != targ_pid)
		return 0;
	j.t_submit = bpf_ktime_get_ns();
	j.seqno = seqno;
	j.dev = dev;
	j.ctx = ctx_id;
	j.queue = queue;
	j.pid = pid;
	bpf_get_current_comm(j.comm, sizeof(j.comm));
	bpf_map_update_elem(&mi_jobs, &k, &j, BPF_ANY);
	return 0;
}

SEC("raw_tp/drm_sched_job")
int BPF_PROG(mi_sched_job, struct drm_sched_job___mi *sj)
{
	struct mi_fence_key k;
	struct mi_job_state *j;

	mi_sched_key(sj, &k);
	j = bpf_map_lookup_elem(&mi_jobs, &k);
	if (j)
		j->t_queue = bpf_ktime_get_ns();
	return 0;
}

SEC("raw_tp/drm_run_job")
int BPF_PROG(mi_run_job, struct drm_sched_job___mi *sj)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct mi_fence_key k;
	struct mi_job_state *j;

	mi_sched_key(sj, &k);
	j = bpf_map_lookup_elem(&mi_jobs, &k);
	if (!j)
		return 0;
	j->t_run = bpf_ktime_get_ns();
	bpf_map_update_elem(&mi_running, &tid, &k, BPF_ANY);
	return 0;
}

/* the job this scheduler thread is running, if it is (dev, ctx, seqno) */
static __always_inline struct mi_fence_key *
mi_running_job(int dev, __u32 ctx, __u64 seqno, struct mi_job_state **jp)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct mi_fence_key *k = bpf_map_lookup_elem(&mi_running, &tid);
	struct mi_job_state *j;

	if (!k)
		return NULL;
	j = bpf_map_lookup_elem(&mi_jobs, k);
	if (!j || j->dev != dev || j->ctx != ctx || j->seqno != seqno)
		return NULL;
	*jp = j;
	return k;
}

SEC("raw_tp/run")
int BPF_PROG(mi_run, int dev, __u32 ctx_id, __u32 queue, __u64 seqno,
	     __u64 fence_ctx, __u64 fence_seqno)
{
	struct mi_fence_key hw = { fence_ctx, fence_seqno };
	struct mi_job_state *j;
	struct mi_fence_key *k = mi_running_job(dev, ctx_id, seqno, &j);

	if (k)
		bpf_map_update_elem(&mi_hw_to_job, &hw, k, BPF_ANY);
	return 0;
}

SEC("raw_tp/done")
int BPF_PROG(mi_done, int dev, __u32 ctx_id, __u32 queue, __u64 seqno,
	     __u64 fence_ctx, __u64 fence_seqno, int status, __u64 busy_ns)
{
	struct mi_fence_key hw = { fence_ctx, fence_seqno };
	struct mi_fence_key k, *kp;
	struct mi_job_state *j = NULL;
	__u64 now = bpf_ktime_get_ns();

	kp = bpf_map_lookup_elem(&mi_hw_to_job, &hw);
	if (kp) {
		k = *kp;
		bpf_map_delete_elem(&mi_hw_to_job, &hw);
		j = bpf_map_lookup_elem(&mi_jobs, &k);
	} else {
		/* failed inside run_job, before metainfer:run */
		kp = mi_running_job(dev, ctx_id, seqno, &j);
		if (kp)
			k = *kp;
	}
	if (!j)
		return 0;
	if (!j->t_run)
		j->t_run = now;
	mi_job_finished(j, now, status, busy_ns);
	bpf_map_delete_elem(&mi_jobs, &k);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";

#endif
