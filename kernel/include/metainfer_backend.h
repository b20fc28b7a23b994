/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * MetaInfer backend API: how an accelerator driver plugs into metainfer.ko.
 *
 * A backend (a vendor module, or metainfer_sim.ko) calls
 * mi_device_register() once per accelerator instance with a capability
 * description and an ops table.  The core creates a DRM render node for it
 * and owns everything user-facing: buffers, contexts, queues (one drm_sched
 * per hardware queue), validation, fences, timeouts, counters, tracepoints,
 * fdinfo, hwmon and debugfs.  The backend only ever sees fully validated
 * jobs through kernel mappings: every tensor of every op has been
 * bounds-checked against its buffer and resolved to a kernel address, every
 * op/dtype/layout is one the backend advertised.  A backend never touches
 * user pointers.
 *
 * Contexts: ops are called in process context unless noted.  mi_job_done()
 * may be called from any context (hrtimer, hard or soft irq, workqueue).
 */
#ifndef _METAINFER_BACKEND_H_
#define _METAINFER_BACKEND_H_

#include <linux/types.h>
#include <linux/kernel.h>
#include <linux/minmax.h>
#include <linux/limits.h>
#include <drm/metainfer_accel.h>

struct device;
struct dentry;
struct mi_device;
struct mi_job;

/**
 * struct mi_backend_caps - what a device can do (static for its lifetime)
 * @name: personality/model name shown to userspace (copied at register)
 * @backend: backend module name, e.g. "metainfer_sim" (copied)
 * @op_mask: bit (1 << DRM_METAINFER_OP_x) per supported op
 * @dtype_mask: bit (1 << DRM_METAINFER_DTYPE_x) per supported dtype
 * @layout_mask: bit (1 << DRM_METAINFER_LAYOUT_x) per supported 4-D layout
 *	(PLAIN is implied)
 * @num_queues: hardware queues, 1..%DRM_METAINFER_MAX_QUEUES
 * @clock_khz: nominal core clock
 * @sram_bytes: on-chip SRAM
 * @macs_per_cycle: peak MACs per cycle, indexed by DRM_METAINFER_DTYPE_x
 * @dma_bw: DMA bandwidth, bytes per second
 * @dma_burst: DMA burst size, bytes
 * @preferred_layout: DRM_METAINFER_LAYOUT_x the device runs fastest
 * @fw_version: opaque firmware/model version (fingerprint staleness checks)
 */
struct mi_backend_caps {
	const char *name;
	const char *backend;
	u64 op_mask;
	u32 dtype_mask;
	u32 layout_mask;
	u32 num_queues;
	u32 clock_khz;
	u64 sram_bytes;
	u32 macs_per_cycle[DRM_METAINFER_DTYPE_COUNT];
	u64 dma_bw;
	u32 dma_burst;
	u32 preferred_layout;
	u64 fw_version;
};

/*
 * Tensor slots of a struct mi_op.  Which slots an op uses:
 *   CONV2D:     IN0=input IN1=weight [BIAS] OUT [MULT SHIFT]
 *   GEMM:       IN0=a IN1=b [BIAS] OUT [MULT SHIFT]
 *   ADD, MUL:   IN0=a IN1=b OUT
 *   RELU, CLIP, MAXPOOL, AVGPOOL, COPY: IN0 OUT
 *   REQUANTIZE: IN0 OUT MULT SHIFT
 *   LUT:        IN0=input IN1=table OUT
 * &mi_op.tensor_mask has bit (1 << slot) for every slot in use.
 */
#define MI_T_IN0 0
#define MI_T_IN1 1
#define MI_T_BIAS 2
#define MI_T_OUT 3
#define MI_T_MULT 4
#define MI_T_SHIFT 5
#define MI_T_COUNT 6

/**
 * struct mi_tensor - a validated tensor, resolved to a kernel address
 * @data: kernel address of element 0 (buffer mapping + offset)
 * @bo_index: index into &mi_job_desc.bos
 * @dtype: DRM_METAINFER_DTYPE_x
 * @layout: DRM_METAINFER_LAYOUT_x
 * @ndim: number of dimensions as submitted
 * @esize: bytes per element
 * @shape: extents as submitted (entries >= @ndim are 1)
 * @stride: strides in elements as submitted, dense ones filled in
 * @dim: logical extents (n, c, h, w); PLAIN tensors are right-aligned
 *	(a [M,K] matrix is (1, 1, M, K)), NHWC is permuted to (n, c, h, w)
 * @lstride: strides in elements matching @dim
 * @elems: number of logical elements (product of @shape)
 * @span: bytes from @data to the end of its highest element; every element
 *	is inside [@data, @data + @span)
 *
 * Element (n, c, h, w) is at @data + @esize * (n * lstride[0] +
 * c * lstride[1] + h * lstride[2] + w * lstride[3]); see mi_tensor_get().
 */
struct mi_tensor {
	void *data;
	u32 bo_index;
	u32 dtype;
	u32 layout;
	u32 ndim;
	u32 esize;
	u32 shape[DRM_METAINFER_MAX_NDIM];
	u64 stride[DRM_METAINFER_MAX_NDIM];
	u32 dim[4];
	u64 lstride[4];
	u64 elems;
	u64 span;
};

/**
 * struct mi_op - one validated op of a job
 * @op: DRM_METAINFER_OP_x
 * @flags: DRM_METAINFER_OP_F_x from the op header
 * @tensor_mask: bit (1 << MI_T_x) per tensor slot in use
 * @out_min: lower clamp bound: [act_min, act_max] (or the op's own bounds)
 *	intersected with the output dtype range; dtype range if unused
 * @out_max: upper clamp bound, as @out_min
 * @macs: multiply-accumulates this op performs (0 for non-MAC ops)
 * @bytes_in: bytes of its input tensors (logical elements x element size)
 * @bytes_out: bytes of its output tensor
 * @t: resolved tensors by MI_T_x slot
 * @u: the op exactly as submitted (parameters: strides, pads, zero points,
 *	...); its embedded struct drm_metainfer_tensor descriptors are the raw
 *	user values: use @t instead
 */
struct mi_op {
	u32 op;
	u32 flags;
	u32 tensor_mask;
	s32 out_min;
	s32 out_max;
	u64 macs;
	u64 bytes_in;
	u64 bytes_out;
	struct mi_tensor t[MI_T_COUNT];
	union {
		struct drm_metainfer_op_header hdr;
		struct drm_metainfer_op_conv2d conv2d;
		struct drm_metainfer_op_gemm gemm;
		struct drm_metainfer_op_eltwise eltwise;
		struct drm_metainfer_op_clip clip;
		struct drm_metainfer_op_pool pool;
		struct drm_metainfer_op_requantize requantize;
		struct drm_metainfer_op_copy copy;
		struct drm_metainfer_op_lut lut;
	} u;
};

/**
 * struct mi_bo_map - a buffer of the job, mapped for the kernel
 * @vaddr: kernel virtual address of byte 0
 * @size: size in bytes
 */
struct mi_bo_map {
	void *vaddr;
	u64 size;
};

/**
 * struct mi_job_desc - what a backend sees of a job
 * @queue: hardware queue index
 * @ctx_id: submitting context (ids are per file: use for tracing only)
 * @priority: DRM_METAINFER_PRIORITY_x of the context
 * @op_count: number of entries at @ops
 * @seqno: job sequence number within its context
 * @ops: the validated ops, in execution order
 * @bo_count: number of entries at @bos
 * @bos: the job's buffers, mapped and pinned until the job is finished
 * @macs: sum of &mi_op.macs
 * @bytes_in: sum of &mi_op.bytes_in
 * @bytes_out: sum of &mi_op.bytes_out
 *
 * Valid from the run_job() call until mi_job_done() for it returns, or
 * until reset() of its queue returns.
 */
struct mi_job_desc {
	u32 queue;
	u32 ctx_id;
	u32 priority;
	u32 op_count;
	u64 seqno;
	const struct mi_op *ops;
	u32 bo_count;
	const struct mi_bo_map *bos;
	u64 macs;
	u64 bytes_in;
	u64 bytes_out;
};

/**
 * struct mi_job_stats - what a finished job did, reported by the backend
 * @macs: multiply-accumulates executed
 * @dma_bytes_in: bytes read from system memory
 * @dma_bytes_out: bytes written to system memory
 * @busy_ns: modelled/measured execution time
 * @stall_ns: part of @busy_ns the compute units waited on memory
 */
struct mi_job_stats {
	u64 macs;
	u64 dma_bytes_in;
	u64 dma_bytes_out;
	u64 busy_ns;
	u64 stall_ns;
};

/**
 * struct mi_hw_counters - device-wide sensor readings
 * @valid: DRM_METAINFER_VALID_x bits: which fields below hold a reading
 * @temp_mc: temperature, millidegrees Celsius
 * @power_mw: power draw, milliwatts
 * @clock_khz: current core clock, kHz
 * @throttle: DRM_METAINFER_THROTTLE_x bits in effect
 */
struct mi_hw_counters {
	u32 valid;
	s64 temp_mc;
	u64 power_mw;
	u64 clock_khz;
	u64 throttle;
};

/**
 * struct mi_backend_ops - backend entry points
 *
 * @run_job: REQUIRED.  Start @job on its queue (&mi_job_desc.queue).  The
 *	core keeps at most one job per queue in flight, so the queue is idle
 *	when this is called.  Called from the queue's scheduler thread (may
 *	sleep, should return quickly).  Return 0 if the job was started: the
 *	backend then calls mi_job_done() exactly once for it, or, if reset()
 *	of its queue is called first, never.  Return a negative errno to fail
 *	the job at once (its status becomes that errno; no mi_job_done()).
 * @reset: REQUIRED.  A job on @queue exceeded the job timeout, or the
 *	device is being unregistered with a job in flight on @queue.  Stop
 *	that job synchronously: when reset() returns the backend no longer
 *	accesses its buffers and will never call mi_job_done() for it (the
 *	core finishes it with -ETIMEDOUT or -ENODEV).  Return 0 if the queue
 *	works again, a negative errno if the device is unusable: the core
 *	then marks the device lost (new submits fail with -ENODEV; queued jobs
 *	finish with -ENODEV) and calls no more run_job().
 * @check_op: optional.  Veto an op the core validated, for limits the
 *	capability masks cannot express (window too large, ...).  Return 0,
 *	-EOPNOTSUPP or -EINVAL.  Called at submit, process context.
 * @read_counters: optional.  Fill @c with current sensor readings; set
 *	only the @c->valid bits of sensors the device has.  Without it the
 *	device has no sensors (no hwmon, valid = 0).  May sleep.
 * @debugfs_init: optional.  Add backend files (fault knobs, ...) to the
 *	device's debugfs directory @dir; the core removes them at
 *	unregister.
 */
struct mi_backend_ops {
	int (*run_job)(struct mi_device *mdev, struct mi_job *job);
	int (*reset)(struct mi_device *mdev, u32 queue);
	int (*check_op)(struct mi_device *mdev, const struct mi_op *op);
	int (*read_counters)(struct mi_device *mdev, struct mi_hw_counters *c);
	void (*debugfs_init)(struct mi_device *mdev, struct dentry *dir);
};

int mi_device_register(struct device *parent, const struct mi_backend_ops *ops,
		       const struct mi_backend_caps *caps, void *priv,
		       struct mi_device **out);
void mi_device_unregister(struct mi_device *mdev);
void *mi_device_priv(const struct mi_device *mdev);
int mi_device_minor(const struct mi_device *mdev);
const struct mi_job_desc *mi_job_desc(const struct mi_job *job);
void mi_job_done(struct mi_job *job, int status,
		 const struct mi_job_stats *stats);

/* ---- Reference arithmetic shared by every backend (see the uapi) ---- */

/**
 * mi_dtype_size() - bytes per element of a dtype
 * @dtype: DRM_METAINFER_DTYPE_x
 *
 * Return: 1, 2 or 4, or 0 for an unknown dtype.
 */
static inline u32 mi_dtype_size(u32 dtype)
{
	switch (dtype) {
	case DRM_METAINFER_DTYPE_INT8:
	case DRM_METAINFER_DTYPE_UINT8:
		return 1;
	case DRM_METAINFER_DTYPE_INT16:
		return 2;
	case DRM_METAINFER_DTYPE_INT32:
		return 4;
	}
	return 0;
}

/**
 * mi_dtype_min() - smallest value of a dtype
 * @dtype: DRM_METAINFER_DTYPE_x
 *
 * Return: the minimum.
 */
static inline s32 mi_dtype_min(u32 dtype)
{
	switch (dtype) {
	case DRM_METAINFER_DTYPE_INT8:
		return S8_MIN;
	case DRM_METAINFER_DTYPE_UINT8:
		return 0;
	case DRM_METAINFER_DTYPE_INT16:
		return S16_MIN;
	}
	return S32_MIN;
}

/**
 * mi_dtype_max() - largest value of a dtype
 * @dtype: DRM_METAINFER_DTYPE_x
 *
 * Return: the maximum.
 */
static inline s32 mi_dtype_max(u32 dtype)
{
	switch (dtype) {
	case DRM_METAINFER_DTYPE_INT8:
		return S8_MAX;
	case DRM_METAINFER_DTYPE_UINT8:
		return U8_MAX;
	case DRM_METAINFER_DTYPE_INT16:
		return S16_MAX;
	}
	return S32_MAX;
}

/**
 * mi_tensor_index() - element index of logical position (n, c, h, w)
 * @t: tensor
 * @n: batch index, < dim[0]
 * @c: channel index, < dim[1]
 * @h: row index, < dim[2]
 * @w: column index, < dim[3]
 *
 * Return: the element offset from @t->data (multiply by @t->esize for bytes).
 */
static inline u64 mi_tensor_index(const struct mi_tensor *t, u32 n, u32 c,
				  u32 h, u32 w)
{
	return n * t->lstride[0] + c * t->lstride[1] + h * t->lstride[2] +
	       w * t->lstride[3];
}

/**
 * mi_logical_axis() - logical (n, c, h, w) index of a dimension as submitted
 * @t: tensor
 * @axis: dimension index into @t->shape (< @t->ndim)
 *
 * Return: 0..3, the index into @t->dim / @t->lstride of that dimension
 * (e.g. NHWC axis 3 (C) is logical 1; a PLAIN [M,K] axis 0 is logical 2).
 */
static inline u32 mi_logical_axis(const struct mi_tensor *t, u32 axis)
{
	static const u8 nhwc[4] = { 0, 2, 3, 1 };

	if (t->layout == DRM_METAINFER_LAYOUT_NHWC)
		return nhwc[axis & 3];
	if (t->layout == DRM_METAINFER_LAYOUT_NCHW)
		return axis & 3;
	return (4 - t->ndim + axis) & 3;
}

/**
 * mi_tensor_get() - read one element, widened to s64
 * @t: tensor
 * @idx: element offset from mi_tensor_index()
 *
 * Return: the value.
 */
static inline s64 mi_tensor_get(const struct mi_tensor *t, u64 idx)
{
	switch (t->dtype) {
	case DRM_METAINFER_DTYPE_INT8:
		return ((const s8 *)t->data)[idx];
	case DRM_METAINFER_DTYPE_UINT8:
		return ((const u8 *)t->data)[idx];
	case DRM_METAINFER_DTYPE_INT16:
		return ((const s16 *)t->data)[idx];
	case DRM_METAINFER_DTYPE_INT32:
		return ((const s32 *)t->data)[idx];
	}
	return 0;
}

/**
 * mi_tensor_set() - store one element (truncated to the dtype; clamp first)
 * @t: tensor
 * @idx: element offset from mi_tensor_index()
 * @v: value
 */
static inline void mi_tensor_set(const struct mi_tensor *t, u64 idx, s64 v)
{
	switch (t->dtype) {
	case DRM_METAINFER_DTYPE_INT8:
		((s8 *)t->data)[idx] = (s8)v;
		break;
	case DRM_METAINFER_DTYPE_UINT8:
		((u8 *)t->data)[idx] = (u8)v;
		break;
	case DRM_METAINFER_DTYPE_INT16:
		((s16 *)t->data)[idx] = (s16)v;
		break;
	case DRM_METAINFER_DTYPE_INT32:
		((s32 *)t->data)[idx] = (s32)v;
		break;
	}
}

/**
 * mi_rshift_round() - arithmetic right shift rounding halves up
 * @v: value
 * @s: shift, 0..62
 *
 * Return: floor((@v + 2^(@s-1)) / 2^@s), the addition wrapping in 64 bits.
 */
static inline s64 mi_rshift_round(s64 v, u32 s)
{
	if (s == 0)
		return v;
	if (s > 62)
		s = 62;
	return (s64)((u64)v + (1ULL << (s - 1))) >> s;
}

/**
 * mi_requant() - scale an accumulator to the output (see the uapi)
 * @acc: accumulator (or input minus zero point), wrapped to s64
 * @mult: multiplier M (int32)
 * @shift: shift S (int32); scale is M * 2^(S - 31)
 * @zp: output zero point
 * @lo: lower clamp bound
 * @hi: upper clamp bound
 *
 * Return: clamp(rshift_round(acc * M, clamp(31 - S, 0, 62)) + zp, lo, hi),
 * the product and the sum wrapping in 64 bits.
 */
static inline s64 mi_requant(s64 acc, s32 mult, s32 shift, s32 zp, s32 lo,
			     s32 hi)
{
	s64 t = 31 - (s64)shift;
	s64 v;

	t = clamp_t(s64, t, 0, 62);
	v = (s64)((u64)acc * (u64)(s64)mult);
	v = mi_rshift_round(v, (u32)t);
	v = (s64)((u64)v + (u64)(s64)zp);
	return clamp_t(s64, v, lo, hi);
}

#endif /* _METAINFER_BACKEND_H_ */
