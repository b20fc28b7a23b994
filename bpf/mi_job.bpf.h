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
 * The tracepoint records are read as the structs below; the user side
 * checks their offsets against tracefs before loading (mi_bpf_util.c).
 */
#ifndef MI_JOB_BPF_H
#define MI_JOB_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

#include "mi_job.h"

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

static __always_inline void mi_fence_key_of(struct dma_fence *f,
					    struct mi_fence_key *k)
{
	k->context = BPF_CORE_READ(f, context);
	k->seqno = BPF_CORE_READ(f, seqno);
}

static void mi_job_finished(const struct mi_job_state *j, __u64 now,
			    __s32 status, __u64 busy_ns);

SEC("tp/metainfer/submit")
int mi_submit(struct mi_tp_submit *tp)
{
	struct mi_fence_key k = { tp->job.fence_ctx, tp->job.fence_seqno };
	struct mi_job_state j = {};
	__u32 pid = bpf_get_current_pid_tgid() >> 32;

	if (targ_dev >= 0 && tp->job.dev != targ_dev)
		return 0;
	if (targ_pid && pid != targ_pid)
		return 0;
	j.t_submit = bpf_ktime_get_ns();
	j.seqno = tp->job.seqno;
	j.dev = tp->job.dev;
	j.ctx = tp->job.ctx;
	j.queue = tp->job.queue;
	j.pid = pid;
	bpf_get_current_comm(j.comm, sizeof(j.comm));
	bpf_map_update_elem(&mi_jobs, &k, &j, BPF_ANY);
	return 0;
}

SEC("tp/gpu_scheduler/drm_sched_job")
int mi_sched_job(struct mi_tp_sched_job *tp)
{
	struct mi_fence_key k;
	struct mi_job_state *j;

	mi_fence_key_of((struct dma_fence *)tp->fence, &k);
	j = bpf_map_lookup_elem(&mi_jobs, &k);
	if (j)
		j->t_queue = bpf_ktime_get_ns();
	return 0;
}

SEC("tp/gpu_scheduler/drm_run_job")
int mi_run_job(struct mi_tp_sched_job *tp)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct mi_fence_key k;
	struct mi_job_state *j;

	mi_fence_key_of((struct dma_fence *)tp->fence, &k);
	j = bpf_map_lookup_elem(&mi_jobs, &k);
	if (!j)
		return 0;
	j->t_run = bpf_ktime_get_ns();
	bpf_map_update_elem(&mi_running, &tid, &k, BPF_ANY);
	return 0;
}

/* the job this scheduler thread is running, if it is the one @tp names */
static __always_inline struct mi_fence_key *
mi_running_job(const struct mi_tp_job *tp, struct mi_job_state **jp)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct mi_fence_key *k = bpf_map_lookup_elem(&mi_running, &tid);
	struct mi_job_state *j;

	if (!k)
		return NULL;
	j = bpf_map_lookup_elem(&mi_jobs, k);
	if (!j || j->dev != tp->dev || j->ctx != tp->ctx ||
	    j->seqno != tp->seqno)
		return NULL;
	*jp = j;
	return k;
}

SEC("tp/metainfer/run")
int mi_run(struct mi_tp_job *tp)
{
	struct mi_fence_key hw = { tp->fence_ctx, tp->fence_seqno };
	struct mi_job_state *j;
	struct mi_fence_key *k = mi_running_job(tp, &j);

	if (k)
		bpf_map_update_elem(&mi_hw_to_job, &hw, k, BPF_ANY);
	return 0;
}

SEC("tp/metainfer/done")
int mi_done(struct mi_tp_done *tp)
{
	struct mi_fence_key hw = { tp->job.fence_ctx, tp->job.fence_seqno };
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
		kp = mi_running_job(&tp->job, &j);
		if (kp)
			k = *kp;
	}
	if (!j)
		return 0;
	if (!j->t_run)
		j->t_run = now;
	mi_job_finished(j, now, tp->status, tp->busy_ns);
	bpf_map_delete_elem(&mi_jobs, &k);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";

#endif
