// SPDX-License-Identifier: GPL-2.0-only
/*
 * mi_tracecount (kernel side): count each metainfer: tracepoint.  Attached
 * by selftests/mi_tracecount.c through its generated skeleton.
 */
#include <linux/types.h>
#include <bpf/bpf_helpers.h>

#include "mi_tracecount.h"

__u64 counts[MI_TC_COUNT];

#define COUNT(idx, name)                                   \
	SEC("tracepoint/metainfer/" #name)                 \
	int mi_##name(void *ctx)                           \
	{                                                  \
		__sync_fetch_and_add(&counts[idx], 1);     \
		return 0;                                  \
	}

COUNT(MI_TC_SUBMIT, submit)
COUNT(MI_TC_RUN, run)
COUNT(MI_TC_DONE, done)
COUNT(MI_TC_TIMEOUT, timeout)
COUNT(MI_TC_RESET, reset)
COUNT(MI_TC_BO_CREATE, bo_create)
COUNT(MI_TC_BO_DESTROY, bo_destroy)

char LICENSE[] SEC("license") = "GPL";
