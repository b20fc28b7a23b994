// SPDX-License-Identifier: GPL-2.0-only
/*
 * mistall (kernel side): send one ring-buffer event per metainfer job whose
 * queue wait or run time reaches its threshold, or (report_failed) that
 * finished with an error.  The job lifecycle is followed in mi_job.bpf.h;
 * jobs below the thresholds never leave the kernel.
 */
#include "mi_job.bpf.h"
#include "mistall.h"

const volatile __u64 min_wait_ns = 10000000;
const volatile __u64 min_run_ns = 10000000;
const volatile bool report_failed = false;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");

static void mi_job_finished(const struct mi_job_state *j, __u64 now,
			    __s32 status, __u64 busy_ns)
{
	__u64 start = j->t_queue ? j->t_queue : j->t_submit;
	__u64 wait = j->t_run > start ? j->t_run - start : 0;
	__u64 run = now > j->t_run ? now - j->t_run : 0;
	struct mistall_event *e;

	if (wait < min_wait_ns && run < min_run_ns &&
	    !(report_failed && status))
		return;
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e)
		return;
	e->ts_ns = now;
	e->seqno = j->seqno;
	e->wait_ns = wait;
	e->run_ns = run;
	e->busy_ns = busy_ns;
	e->dev = j->dev;
	e->ctx = j->ctx;
	e->queue = j->queue;
	e->pid = j->pid;
	e->status = status;
	e->pad = 0;
	__builtin_memcpy(e->comm, j->comm, sizeof(e->comm));
	bpf_ringbuf_submit(e, 0);
}
