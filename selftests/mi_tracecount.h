/* SPDX-License-Identifier: GPL-2.0-only */
/* Shared between mi_tracecount.bpf.c and mi_tracecount.c. */
#ifndef MI_TRACECOUNT_H
#define MI_TRACECOUNT_H

enum mi_tc_event {
	MI_TC_SUBMIT,
	MI_TC_RUN,
	MI_TC_DONE,
	MI_TC_TIMEOUT,
	MI_TC_RESET,
	MI_TC_BO_CREATE,
	MI_TC_BO_DESTROY,
	MI_TC_COUNT,
};

#endif
