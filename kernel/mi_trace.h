/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * MetaInfer core tracepoints (system "metainfer").
 *
 * Keys are numeric only: dev = render minor, ctx = context id (per file),
 * queue, seqno = job sequence number in its context, fence_ctx/fence_seqno
 * = the dma_fence identity (scheduler finished fence at submit, hardware
 * fence at run/done/timeout).
 */
#if !defined(_MI_TRACE_H_) || defined(TRACE_HEADER_MULTI_READ)
#define _MI_TRACE_H_

#include <linux/types.h>
#include <linux/tracepoint.h>

#undef TRACE_SYSTEM
#define TRACE_SYSTEM metainfer
#define TRACE_INCLUDE_FILE mi_trace

/* clang-format off */

TRACE_EVENT(submit,
	TP_PROTO(int dev, u32 ctx, u32 queue, u64 seqno, u64 fence_ctx,
		 u64 fence_seqno, u32 ops, u32 bos),
	TP_ARGS(dev, ctx, queue, seqno, fence_ctx, fence_seqno, ops, bos),
	TP_STRUCT__entry(
		__field(int, dev)
		__field(u32, ctx)
		__field(u32, queue)
		__field(u64, seqno)
		__field(u64, fence_ctx)
		__field(u64, fence_seqno)
		__field(u32, ops)
		__field(u32, bos)
	),
	TP_fast_assign(
		__entry->dev = dev;
		__entry->ctx = ctx;
		__entry->queue = queue;
		__entry->seqno = seqno;
		__entry->fence_ctx = fence_ctx;
		__entry->fence_seqno = fence_seqno;
		__entry->ops = ops;
		__entry->bos = bos;
	),
	TP_printk("dev=%d ctx=%u queue=%u seqno=%llu fence=%llu:%llu ops=%u bos=%u",
		  __entry->dev, __entry->ctx, __entry->queue, __entry->seqno,
		  __entry->fence_ctx, __entry->fence_seqno, __entry->ops,
		  __entry->bos)
);

DECLARE_EVENT_CLASS(mi_job_event,
	TP_PROTO(int dev, u32 ctx, u32 queue, u64 seqno, u64 fence_ctx,
		 u64 fence_seqno),
	TP_ARGS(dev, ctx, queue, seqno, fence_ctx, fence_seqno),
	TP_STRUCT__entry(
		__field(int, dev)
		__field(u32, ctx)
		__field(u32, queue)
		__field(u64, seqno)
		__field(u64, fence_ctx)
		__field(u64, fence_seqno)
	),
	TP_fast_assign(
		__entry->dev = dev;
		__entry->ctx = ctx;
		__entry->queue = queue;
		__entry->seqno = seqno;
		__entry->fence_ctx = fence_ctx;
		__entry->fence_seqno = fence_seqno;
	),
	TP_printk("dev=%d ctx=%u queue=%u seqno=%llu fence=%llu:%llu",
		  __entry->dev, __entry->ctx, __entry->queue, __entry->seqno,
		  __entry->fence_ctx, __entry->fence_seqno)
);

DEFINE_EVENT(mi_job_event, run,
	TP_PROTO(int dev, u32 ctx, u32 queue, u64 seqno, u64 fence_ctx,
		 u64 fence_seqno),
	TP_ARGS(dev, ctx, queue, seqno, fence_ctx, fence_seqno)
);

DEFINE_EVENT(mi_job_event, timeout,
	TP_PROTO(int dev, u32 ctx, u32 queue, u64 seqno, u64 fence_ctx,
		 u64 fence_seqno),
	TP_ARGS(dev, ctx, queue, seqno, fence_ctx, fence_seqno)
);

TRACE_EVENT(done,
	TP_PROTO(int dev, u32 ctx, u32 queue, u64 seqno, u64 fence_ctx,
		 u64 fence_seqno, int status, u64 busy_ns),
	TP_ARGS(dev, ctx, queue, seqno, fence_ctx, fence_seqno, status,
		busy_ns),
	TP_STRUCT__entry(
		__field(int, dev)
		__field(u32, ctx)
		__field(u32, queue)
		__field(u64, seqno)
		__field(u64, fence_ctx)
		__field(u64, fence_seqno)
		__field(int, status)
		__field(u64, busy_ns)
	),
	TP_fast_assign(
		__entry->dev = dev;
		__entry->ctx = ctx;
		__entry->queue = queue;
		__entry->seqno = seqno;
		__entry->fence_ctx = fence_ctx;
		__entry->fence_seqno = fence_seqno;
		__entry->status = status;
		__entry->busy_ns = busy_ns;
	),
	TP_printk("dev=%d ctx=%u queue=%u seqno=%llu fence=%llu:%llu status=%d busy_ns=%llu",
		  __entry->dev, __entry->ctx, __entry->queue, __entry->seqno,
		  __entry->fence_ctx, __entry->fence_seqno, __entry->status,
		  __entry->busy_ns)
);

TRACE_EVENT(reset,
	TP_PROTO(int dev, u32 queue, int ret),
	TP_ARGS(dev, queue, ret),
	TP_STRUCT__entry(
		__field(int, dev)
		__field(u32, queue)
		__field(int, ret)
	),
	TP_fast_assign(
		__entry->dev = dev;
		__entry->queue = queue;
		__entry->ret = ret;
	),
	TP_printk("dev=%d queue=%u ret=%d", __entry->dev, __entry->queue,
		  __entry->ret)
);

DECLARE_EVENT_CLASS(mi_bo_event,
	TP_PROTO(int dev, u64 bo, u64 size),
	TP_ARGS(dev, bo, size),
	TP_STRUCT__entry(
		__field(int, dev)
		__field(u64, bo)
		__field(u64, size)
	),
	TP_fast_assign(
		__entry->dev = dev;
		__entry->bo = bo;
		__entry->size = size;
	),
	TP_printk("dev=%d bo=%llu size=%llu", __entry->dev, __entry->bo,
		  __entry->size)
);

DEFINE_EVENT(mi_bo_event, bo_create,
	TP_PROTO(int dev, u64 bo, u64 size),
	TP_ARGS(dev, bo, size)
);

DEFINE_EVENT(mi_bo_event, bo_destroy,
	TP_PROTO(int dev, u64 bo, u64 size),
	TP_ARGS(dev, bo, size)
);

/* clang-format on */

#endif /* _MI_TRACE_H_ */

/* This part must be outside protection */
#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#include <trace/define_trace.h>
