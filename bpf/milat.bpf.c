// SPDX-License-Identifier: GPL-2.0-only
/*
 * milat (kernel side): log2 histograms of queue wait and run time per
 * device and queue, biolatency style; the user side prints and clears them
 * at each interval.  The job lifecycle is followed in mi_job.bpf.h.
 */
#include "mi_job.bpf.h"
#include "milat.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct milat_key);
	__type(value, struct milat_hist);
} hists SEC(".maps");

/* buckets (and sum_us) in milliseconds instead of microseconds */
const volatile bool targ_ms = false;

static const struct milat_hist zero;

static __always_inline __u32 log2_slot(__u64 us)
{
	__u32 slot = 0;

	/* bounded loop: the verifier of 6.1 accepts it */
	for (int i = 0; i < MILAT_SLOTS - 1 && us > 1; i++) {
		us >>= 1;
		slot++;
	}
	return slot;
}

static __always_inline void account(__s32 dev, __u32 queue, __u32 kind,
				    __u64 ns, bool failed)
{
	struct milat_key key = { .dev = dev, .queue = queue, .kind = kind };
	struct milat_hist *h;
	__u64 us = targ_ms ? ns / 1000000 : ns / 1000;
	__u32 slot;

	h = bpf_map_lookup_elem(&hists, &key);
	if (!h) {
		bpf_map_update_elem(&hists, &key, &zero, BPF_NOEXIST);
		h = bpf_map_lookup_elem(&hists, &key);
		if (!h)
			return;
	}
	slot = log2_slot(us);
	if (slot >= MILAT_SLOTS)
		slot = MILAT_SLOTS - 1;
	__sync_fetch_and_add(&h->slots[slot], 1);
	__sync_fetch_and_add(&h->count, 1);
	__sync_fetch_and_add(&h->sum_us, us);
	if (failed)
		__sync_fetch_and_add(&h->failed, 1);
}

static void mi_job_finished(const struct mi_job_state *j, __u64 now,
			    __s32 status, __u64 busy_ns)
{
	__u64 start = j->t_queue ? j->t_queue : j->t_submit;

	account(j->dev, j->queue, MILAT_WAIT,
		j->t_run > start ? j->t_run - start : 0, false);
	account(j->dev, j->queue, MILAT_RUN,
		now > j->t_run ? now - j->t_run : 0, status != 0);
}
