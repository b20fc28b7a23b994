// SPDX-License-Identifier: GPL-2.0-only
/*
 * MetaInfer core: tracepoint definitions.
 */

#include "mi_drv.h"

#ifndef __CHECKER__
#define CREATE_TRACE_POINTS
#include "mi_trace.h"
#endif
