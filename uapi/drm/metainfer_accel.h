/* SPDX-License-Identifier: GPL-2.0-only WITH Linux-syscall-note */
/*
 * MetaInfer accelerator framework: kernel/user interface.
 *
 * One DRM render node per registered accelerator (driver name "metainfer").
 * Buffers are GEM objects (PRIME export/import through the standard DRM
 * PRIME ioctls, syncobjs through the standard DRM syncobj ioctls); the
 * driver-specific ioctls below live on DRM_COMMAND_BASE.
 *
 * Extensible argument structs
 * ---------------------------
 * Every ioctl argument struct starts with ``__u32 size``, which the caller
 * sets to the number of bytes of the struct it passes (normally
 * ``sizeof(struct ...)`` of the header it was built against).  The kernel
 * uses @size, not the size encoded in the ioctl request code, which is
 * ignored for the MetaInfer ioctls (callers normally use the
 * ``DRM_IOCTL_METAINFER_*`` request codes below unchanged):
 *
 * - @size smaller than the struct's first published size
 *   (``DRM_METAINFER_*_SIZE_VER0``) fails with -EINVAL;
 * - @size larger than the kernel's struct: the extra bytes (from the
 *   kernel's struct size up to @size) must all be zero, otherwise the ioctl
 *   fails with -E2BIG; if they are zero the ioctl works and the kernel
 *   neither reads nor writes them; @size above 4096 is always -E2BIG;
 * - @size between VER0 and the kernel's size (an older caller): the missing
 *   trailing members read as zero and are not written back.
 *
 * The kernel copies in, and writes back, only the first
 * min(@size, kernel struct size) bytes.  New members are only ever appended;
 * nothing is renumbered.  All structs are naturally aligned, have no hidden
 * padding and sizes that are multiples of 8 (identical on i386 and x86_64).
 * Reserved ``pad`` members and undefined ``flags`` bits must be zero
 * (-EINVAL otherwise).
 *
 * Errors common to all ioctls: -EINVAL bad @size / flags / non-zero pad /
 * out-of-range values, -E2BIG non-zero unknown trailing bytes, -EFAULT bad
 * user pointer, -ENOENT unknown handle or context, -ENOTTY unknown ioctl,
 * -ENODEV the device was lost (a reset failed) or removed.
 */
#ifndef __UAPI_METAINFER_ACCEL_H__
#define __UAPI_METAINFER_ACCEL_H__

#include "drm.h"

#if defined(__cplusplus)
extern "C" {
#endif

/** DRM_METAINFER_API_VERSION - value of %DRM_METAINFER_PARAM_API_VERSION */
#define DRM_METAINFER_API_VERSION 1

#define DRM_METAINFER_GET_PARAM 0x00
#define DRM_METAINFER_BO_CREATE 0x01
#define DRM_METAINFER_BO_INFO 0x02
#define DRM_METAINFER_CTX_CREATE 0x03
#define DRM_METAINFER_CTX_DESTROY 0x04
#define DRM_METAINFER_SUBMIT 0x05
#define DRM_METAINFER_WAIT 0x06
#define DRM_METAINFER_GET_COUNTERS 0x07

#define DRM_IOCTL_METAINFER_GET_PARAM                        \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_METAINFER_GET_PARAM, \
		 struct drm_metainfer_get_param)
#define DRM_IOCTL_METAINFER_BO_CREATE                        \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_METAINFER_BO_CREATE, \
		 struct drm_metainfer_bo_create)
#define DRM_IOCTL_METAINFER_BO_INFO                        \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_METAINFER_BO_INFO, \
		 struct drm_metainfer_bo_info)
#define DRM_IOCTL_METAINFER_CTX_CREATE                        \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_METAINFER_CTX_CREATE, \
		 struct drm_metainfer_ctx_create)
#define DRM_IOCTL_METAINFER_CTX_DESTROY                        \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_METAINFER_CTX_DESTROY, \
		 struct drm_metainfer_ctx_destroy)
#define DRM_IOCTL_METAINFER_SUBMIT                        \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_METAINFER_SUBMIT, \
		 struct drm_metainfer_submit)
#define DRM_IOCTL_METAINFER_WAIT                        \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_METAINFER_WAIT, \
		 struct drm_metainfer_wait)
#define DRM_IOCTL_METAINFER_GET_COUNTERS                        \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_METAINFER_GET_COUNTERS, \
		 struct drm_metainfer_get_counters)

/*
 * Limits.  A request above a limit fails with -EINVAL.
 */
/** DRM_METAINFER_MAX_QUEUES - most hardware queues one device may have */
#define DRM_METAINFER_MAX_QUEUES 8
/** DRM_METAINFER_MAX_BOS - most buffer handles in one submit */
#define DRM_METAINFER_MAX_BOS 64
/** DRM_METAINFER_MAX_SYNCS - most in-syncobjs in one submit */
#define DRM_METAINFER_MAX_SYNCS 64
/** DRM_METAINFER_MAX_CMDS_SIZE - largest command stream, in bytes */
#define DRM_METAINFER_MAX_CMDS_SIZE 65536
/** DRM_METAINFER_MAX_OPS - most ops in one command stream */
#define DRM_METAINFER_MAX_OPS 256
/** DRM_METAINFER_MAX_NDIM - most dimensions of a tensor */
#define DRM_METAINFER_MAX_NDIM 4

/* ------------------------------------------------------------------ */
/* GET_PARAM                                                          */
/* ------------------------------------------------------------------ */

/*
 * Parameters.  Scalar parameters return their value in
 * &drm_metainfer_get_param.value.  Blob parameters (marked "blob") copy
 * bytes to &drm_metainfer_get_param.data_ptr and return the blob's full
 * length in value.  Unknown parameters fail with -EINVAL.
 */
/** DRM_METAINFER_PARAM_API_VERSION - %DRM_METAINFER_API_VERSION of the kernel */
#define DRM_METAINFER_PARAM_API_VERSION 0
/** DRM_METAINFER_PARAM_OP_MASK - bit (1 << DRM_METAINFER_OP_x) per supported op */
#define DRM_METAINFER_PARAM_OP_MASK 1
/** DRM_METAINFER_PARAM_DTYPE_MASK - bit (1 << DRM_METAINFER_DTYPE_x) per supported dtype */
#define DRM_METAINFER_PARAM_DTYPE_MASK 2
/**
 * DRM_METAINFER_PARAM_LAYOUT_MASK - bit (1 << DRM_METAINFER_LAYOUT_x) per
 * supported layout (%DRM_METAINFER_LAYOUT_PLAIN is always supported)
 */
#define DRM_METAINFER_PARAM_LAYOUT_MASK 3
/** DRM_METAINFER_PARAM_NUM_QUEUES - number of hardware queues (1..8) */
#define DRM_METAINFER_PARAM_NUM_QUEUES 4
/** DRM_METAINFER_PARAM_SRAM_BYTES - on-chip SRAM, bytes (0: none) */
#define DRM_METAINFER_PARAM_SRAM_BYTES 5
/** DRM_METAINFER_PARAM_CLOCK_KHZ - nominal (maximum) core clock, kHz */
#define DRM_METAINFER_PARAM_CLOCK_KHZ 6
/**
 * DRM_METAINFER_PARAM_MACS_PER_CYCLE - peak multiply-accumulates per cycle
 * for the dtype given in &drm_metainfer_get_param.index (0 if unsupported)
 */
#define DRM_METAINFER_PARAM_MACS_PER_CYCLE 7
/** DRM_METAINFER_PARAM_DMA_BW - DMA bandwidth to system memory, bytes/s */
#define DRM_METAINFER_PARAM_DMA_BW 8
/** DRM_METAINFER_PARAM_DMA_BURST - DMA burst size, bytes */
#define DRM_METAINFER_PARAM_DMA_BURST 9
/** DRM_METAINFER_PARAM_PREFERRED_LAYOUT - the DRM_METAINFER_LAYOUT_x it runs fastest */
#define DRM_METAINFER_PARAM_PREFERRED_LAYOUT 10
/** DRM_METAINFER_PARAM_DEVICE_LOST - 1 once a reset failed (submits get -ENODEV) */
#define DRM_METAINFER_PARAM_DEVICE_LOST 11
/** DRM_METAINFER_PARAM_FW_VERSION - backend firmware/model version, opaque u64 */
#define DRM_METAINFER_PARAM_FW_VERSION 12
/** DRM_METAINFER_PARAM_DEVICE_ID - id unique among live devices (the DRM minor) */
#define DRM_METAINFER_PARAM_DEVICE_ID 13
/** DRM_METAINFER_PARAM_JOB_TIMEOUT_MS - job timeout in milliseconds */
#define DRM_METAINFER_PARAM_JOB_TIMEOUT_MS 14
/** DRM_METAINFER_PARAM_NAME - blob: personality/model name, NUL-terminated */
#define DRM_METAINFER_PARAM_NAME 15
/** DRM_METAINFER_PARAM_BACKEND - blob: backend (vendor module) name, NUL-terminated */
#define DRM_METAINFER_PARAM_BACKEND 16
/**
 * DRM_METAINFER_PARAM_URING_CMD_FLAGS - the &drm_metainfer_uring_cmd.flags
 * bits the kernel accepts (%DRM_METAINFER_URING_CMD_ASYNC, ...)
 */
#define DRM_METAINFER_PARAM_URING_CMD_FLAGS 17

/**
 * struct drm_metainfer_get_param - query a device capability
 *
 * For a blob parameter: when @data_ptr is non-zero the kernel copies
 * min(@data_size, blob length) bytes there (a string blob is truncated
 * without NUL termination if @data_size is too small); @value always returns
 * the full blob length including the NUL.  For scalar parameters @data_ptr
 * and @data_size must be zero.
 */
struct drm_metainfer_get_param {
	/** @size: sizeof(struct drm_metainfer_get_param) (see header comment) */
	__u32 size;
	/** @param: in, one of DRM_METAINFER_PARAM_x */
	__u32 param;
	/** @index: in, sub-index (a dtype for MACS_PER_CYCLE), else 0 */
	__u32 index;
	/** @flags: in, must be 0 */
	__u32 flags;
	/** @value: out, the parameter's value (blob: its length) */
	__u64 value;
	/** @data_ptr: in, user pointer for blob parameters, or 0 */
	__u64 data_ptr;
	/** @data_size: in, bytes available at @data_ptr */
	__u32 data_size;
	/** @pad: must be 0 */
	__u32 pad;
};
#define DRM_METAINFER_GET_PARAM_SIZE_VER0 40

/* ------------------------------------------------------------------ */
/* Buffer objects                                                     */
/* ------------------------------------------------------------------ */

/** DRM_METAINFER_BO_CREATE_FLAGS_MASK - known BO_CREATE flags (none yet) */
#define DRM_METAINFER_BO_CREATE_FLAGS_MASK 0u

/**
 * struct drm_metainfer_bo_create - create a buffer object
 *
 * Creates a zero-filled, page-granular, CPU-mappable buffer (GEM shmem).
 * The handle belongs to the calling file; share buffers with the DRM PRIME
 * ioctls.  Errors: -EINVAL @bo_size is 0 or @flags unknown, -ENOMEM.
 */
struct drm_metainfer_bo_create {
	/** @size: sizeof(struct drm_metainfer_bo_create) */
	__u32 size;
	/** @flags: in, must be 0 (%DRM_METAINFER_BO_CREATE_FLAGS_MASK) */
	__u32 flags;
	/** @bo_size: in, bytes (rounded up to the page size); out, the rounded size */
	__u64 bo_size;
	/** @handle: out, GEM handle */
	__u32 handle;
	/** @pad: must be 0 */
	__u32 pad;
};
#define DRM_METAINFER_BO_CREATE_SIZE_VER0 24

/**
 * struct drm_metainfer_bo_info - size and mmap offset of a buffer
 *
 * mmap(2) the DRM fd at @mmap_offset to map the buffer.  Works for imported
 * (PRIME) buffers too.  Errors: -ENOENT unknown handle.
 */
struct drm_metainfer_bo_info {
	/** @size: sizeof(struct drm_metainfer_bo_info) */
	__u32 size;
	/** @handle: in, GEM handle */
	__u32 handle;
	/** @flags: in, must be 0 */
	__u32 flags;
	/** @pad: must be 0 */
	__u32 pad;
	/** @bo_size: out, buffer size in bytes */
	__u64 bo_size;
	/** @mmap_offset: out, fake offset to pass to mmap(2) */
	__u64 mmap_offset;
};
#define DRM_METAINFER_BO_INFO_SIZE_VER0 32

/* ------------------------------------------------------------------ */
/* Contexts                                                           */
/* ------------------------------------------------------------------ */

/** DRM_METAINFER_PRIORITY_LOW - background work */
#define DRM_METAINFER_PRIORITY_LOW 0
/** DRM_METAINFER_PRIORITY_NORMAL - default */
#define DRM_METAINFER_PRIORITY_NORMAL 1
/**
 * DRM_METAINFER_PRIORITY_HIGH - latency-sensitive work (needs CAP_SYS_NICE
 * or DRM master, -EACCES otherwise)
 */
#define DRM_METAINFER_PRIORITY_HIGH 2

/**
 * struct drm_metainfer_ctx_create - create an execution context
 *
 * A context submits to one hardware queue at one priority; its jobs run in
 * submission order (after their in-fences).  Contexts belong to the file
 * and are destroyed when it is closed.  Errors: -EINVAL @queue >=
 * NUM_QUEUES or unknown @priority, -ENOSPC too many contexts (1024 per file).
 */
struct drm_metainfer_ctx_create {
	/** @size: sizeof(struct drm_metainfer_ctx_create) */
	__u32 size;
	/** @flags: in, must be 0 */
	__u32 flags;
	/** @queue: in, hardware queue index, < %DRM_METAINFER_PARAM_NUM_QUEUES */
	__u32 queue;
	/** @priority: in, DRM_METAINFER_PRIORITY_x */
	__u32 priority;
	/** @ctx_id: out, context id (>= 1), unique within the file */
	__u32 ctx_id;
	/** @pad: must be 0 */
	__u32 pad;
};
#define DRM_METAINFER_CTX_CREATE_SIZE_VER0 24

/**
 * struct drm_metainfer_ctx_destroy - destroy a context
 *
 * Jobs already submitted still run to completion (their out-syncobjs are
 * signalled); the context's id becomes invalid at once.
 * Errors: -ENOENT unknown @ctx_id.
 */
struct drm_metainfer_ctx_destroy {
	/** @size: sizeof(struct drm_metainfer_ctx_destroy) */
	__u32 size;
	/** @ctx_id: in, context to destroy */
	__u32 ctx_id;
	/** @flags: in, must be 0 */
	__u32 flags;
	/** @pad: must be 0 */
	__u32 pad;
};
#define DRM_METAINFER_CTX_DESTROY_SIZE_VER0 16

/* ------------------------------------------------------------------ */
/* Submission                                                         */
/* ------------------------------------------------------------------ */

/**
 * struct drm_metainfer_sync - a syncobj and timeline point
 */
struct drm_metainfer_sync {
	/** @handle: syncobj handle */
	__u32 handle;
	/** @flags: must be 0 */
	__u32 flags;
	/** @point: timeline point, 0 for a binary syncobj */
	__u64 point;
};

/**
 * DRM_METAINFER_SUBMIT_VALIDATE_ONLY - validate the job fully (context,
 * buffer handles, bounds, capabilities, in-syncs and out-sync), then return
 * without running it: it fails with the same errno as the same submit
 * without the flag, returns 0 where that one would queue the job, @seqno
 * returns 0 and no syncobj is changed.  Lets userspace probe what a device
 * accepts.
 */
#define DRM_METAINFER_SUBMIT_VALIDATE_ONLY (1u << 0)
/** DRM_METAINFER_SUBMIT_FLAGS_MASK - known SUBMIT flags */
#define DRM_METAINFER_SUBMIT_FLAGS_MASK DRM_METAINFER_SUBMIT_VALIDATE_ONLY

/**
 * struct drm_metainfer_submit - queue a job on a context
 *
 * The job is the command stream at @cmds (see "Command stream" below).  Its
 * tensors name buffers by index into @bo_handles.  Everything is validated
 * before the job is queued; on any error nothing is queued.
 *
 * The job starts once every in-sync's fence has signalled (a syncobj
 * without a fence (at @point) fails with -EINVAL); when it finishes, the
 * job's fence is installed in @out_sync (timeline point @out_point, or
 * replacing the fence of a binary syncobj when @out_point is 0).  The fence
 * signals with the job's status as its error.
 *
 * Errors: -ENOENT unknown @ctx_id, buffer handle (handles of another file
 * are unknown here) or syncobj; -EINVAL malformed stream, tensor out of its
 * buffer's bounds, arithmetic overflow in shapes/strides/offsets, limits
 * exceeded, bad flags or pad; -EOPNOTSUPP an op, dtype or layout the device
 * does not advertise (or rejects for its parameters); -ENODEV device lost;
 * -EFAULT; -ENOMEM.
 */
struct drm_metainfer_submit {
	/** @size: sizeof(struct drm_metainfer_submit) */
	__u32 size;
	/** @flags: in, DRM_METAINFER_SUBMIT_x */
	__u32 flags;
	/** @ctx_id: in, context to run on */
	__u32 ctx_id;
	/** @bo_count: in, entries at @bo_handles (<= %DRM_METAINFER_MAX_BOS) */
	__u32 bo_count;
	/** @bo_handles: in, user pointer to __u32 GEM handles */
	__u64 bo_handles;
	/** @cmds: in, user pointer to the command stream */
	__u64 cmds;
	/** @cmds_size: in, bytes at @cmds (<= %DRM_METAINFER_MAX_CMDS_SIZE) */
	__u32 cmds_size;
	/** @in_sync_count: in, entries at @in_syncs (<= %DRM_METAINFER_MAX_SYNCS) */
	__u32 in_sync_count;
	/** @in_syncs: in, user pointer to struct drm_metainfer_sync[] */
	__u64 in_syncs;
	/** @out_sync: in, syncobj handle to signal, 0 for none */
	__u32 out_sync;
	/** @pad: must be 0 */
	__u32 pad;
	/** @out_point: in, timeline point for @out_sync, 0 for binary */
	__u64 out_point;
	/** @seqno: out, job sequence number within the context (>= 1) */
	__u64 seqno;
};
#define DRM_METAINFER_SUBMIT_SIZE_VER0 72

/**
 * struct drm_metainfer_wait - wait for a job and read its status
 *
 * Waits until job @seqno of @ctx_id has finished or CLOCK_MONOTONIC reaches
 * @timeout_ns (absolute; a time in the past polls).  Returns 0 when the job
 * has finished, with its result in @status: 0 success, -ETIMEDOUT the job
 * hung and was aborted by a reset, -EIO the device reported an error
 * (e.g. a DMA fault), -ENODEV the device was lost or removed with the job
 * pending, -ECANCELED the job was dropped (its context was torn down).
 *
 * The status of every job of a live context stays readable.
 * Errors: -ETIMEDOUT (ioctl) the job had not finished by @timeout_ns,
 * -ENOENT unknown context, -EINVAL @seqno is 0 or was never issued,
 * -EINTR/-ERESTARTSYS a signal arrived.
 */
struct drm_metainfer_wait {
	/** @size: sizeof(struct drm_metainfer_wait) */
	__u32 size;
	/** @flags: in, must be 0 */
	__u32 flags;
	/** @ctx_id: in, context */
	__u32 ctx_id;
	/** @pad: must be 0 */
	__u32 pad;
	/** @seqno: in, job sequence number returned by SUBMIT */
	__u64 seqno;
	/** @timeout_ns: in, absolute CLOCK_MONOTONIC deadline in ns */
	__s64 timeout_ns;
	/** @status: out, the job's status: 0 or a negative errno */
	__s64 status;
};
#define DRM_METAINFER_WAIT_SIZE_VER0 40

/* ------------------------------------------------------------------ */
/* Counters                                                           */
/* ------------------------------------------------------------------ */

/** DRM_METAINFER_COUNTERS_CTX - read the counters of context @ctx_id */
#define DRM_METAINFER_COUNTERS_CTX (1u << 0)
/** DRM_METAINFER_COUNTERS_FLAGS_MASK - known GET_COUNTERS flags */
#define DRM_METAINFER_COUNTERS_FLAGS_MASK DRM_METAINFER_COUNTERS_CTX

/* Bits of &drm_metainfer_get_counters.valid: the sensor fields present. */
/** DRM_METAINFER_VALID_TEMP - @temp_mc holds a reading */
#define DRM_METAINFER_VALID_TEMP (1u << 0)
/** DRM_METAINFER_VALID_POWER - @power_mw holds a reading */
#define DRM_METAINFER_VALID_POWER (1u << 1)
/** DRM_METAINFER_VALID_CLOCK - @clock_khz holds a reading */
#define DRM_METAINFER_VALID_CLOCK (1u << 2)
/** DRM_METAINFER_VALID_THROTTLE - @throttle holds a reading */
#define DRM_METAINFER_VALID_THROTTLE (1u << 3)

/* Bits of &drm_metainfer_get_counters.throttle */
/** DRM_METAINFER_THROTTLE_THERMAL - clock reduced because of temperature */
#define DRM_METAINFER_THROTTLE_THERMAL (1u << 0)
/** DRM_METAINFER_THROTTLE_POWER - clock reduced because of a power limit */
#define DRM_METAINFER_THROTTLE_POWER (1u << 1)

/**
 * struct drm_metainfer_get_counters - read performance counters
 *
 * Device scope (flags 0, @ctx_id 0) counts every job of the device since it
 * was registered; context scope (%DRM_METAINFER_COUNTERS_CTX) the jobs of
 * one context of the calling file.  Counters are monotonic except
 * @queue_depth.  Sensor fields (@temp_mc .. @throttle) are device-wide in
 * both scopes and meaningful only when their bit is set in @valid (a device
 * without the sensor leaves it clear; absent is not zero).
 * Errors: -ENOENT unknown context, -EINVAL @ctx_id non-zero in device scope.
 */
struct drm_metainfer_get_counters {
	/** @size: sizeof(struct drm_metainfer_get_counters) */
	__u32 size;
	/** @flags: in, DRM_METAINFER_COUNTERS_x */
	__u32 flags;
	/** @ctx_id: in, context for %DRM_METAINFER_COUNTERS_CTX, else 0 */
	__u32 ctx_id;
	/** @pad: must be 0 */
	__u32 pad;
	/** @timestamp_ns: out, CLOCK_MONOTONIC time of the sample */
	__u64 timestamp_ns;
	/** @jobs_submitted: out, jobs accepted by SUBMIT */
	__u64 jobs_submitted;
	/** @jobs_completed: out, jobs finished with status 0 */
	__u64 jobs_completed;
	/** @jobs_failed: out, jobs finished with an error other than a timeout */
	__u64 jobs_failed;
	/** @jobs_timed_out: out, jobs aborted by the job timeout */
	__u64 jobs_timed_out;
	/** @busy_ns: out, time jobs spent executing on the device */
	__u64 busy_ns;
	/** @macs: out, multiply-accumulates executed */
	__u64 macs;
	/** @dma_bytes_in: out, bytes the device read from system memory */
	__u64 dma_bytes_in;
	/** @dma_bytes_out: out, bytes the device wrote to system memory */
	__u64 dma_bytes_out;
	/** @queue_depth: out, jobs submitted and not yet finished (a gauge) */
	__u64 queue_depth;
	/** @stall_ns: out, execution time the compute units waited on memory */
	__u64 stall_ns;
	/** @queue_wait_ns: out, time jobs waited between submit and execution */
	__u64 queue_wait_ns;
	/** @valid: out, DRM_METAINFER_VALID_x bits for the sensor fields */
	__u64 valid;
	/** @temp_mc: out, device temperature, millidegrees Celsius */
	__s64 temp_mc;
	/** @power_mw: out, device power draw, milliwatts */
	__u64 power_mw;
	/** @clock_khz: out, current core clock, kHz */
	__u64 clock_khz;
	/** @throttle: out, DRM_METAINFER_THROTTLE_x bits now in effect */
	__u64 throttle;
};
#define DRM_METAINFER_GET_COUNTERS_SIZE_VER0 152

/* ------------------------------------------------------------------ */
/* io_uring                                                           */
/* ------------------------------------------------------------------ */

/**
 * struct drm_metainfer_uring_cmd - an io_uring command on a MetaInfer fd
 *
 * Any MetaInfer ioctl can be issued as an ``IORING_OP_URING_CMD`` on the DRM
 * fd: set ``sqe->cmd_op`` to its ``DRM_IOCTL_METAINFER_*`` request code and
 * put this struct in ``sqe->cmd`` (it fits the 16 bytes of a normal 64-byte
 * SQE).  The argument struct at @arg_ptr is the same as for the ioctl, with
 * the same size rules and results; the CQE's res is what the ioctl would
 * return (0 or -errno).  Blocking commands (WAIT) run in io_uring's worker
 * threads, never in the submitting task.  Other DRM ioctls (PRIME, GEM_CLOSE,
 * syncobj) are not available this way (-ENOTTY).
 *
 * Asynchronous SUBMIT (%DRM_METAINFER_URING_CMD_ASYNC in @flags, advertised
 * by %DRM_METAINFER_PARAM_URING_CMD_FLAGS): the job is validated and queued
 * at issue, @seqno is written back then, and the CQE is posted when the job
 * finishes: res is the job's status (as &drm_metainfer_wait.status: 0,
 * -ETIMEDOUT, -EIO, -ENODEV, -ECANCELED); on a ring set up with
 * IORING_SETUP_CQE32, big_cqe[0] is the job's device time in ns (0 if it
 * never ran).  A submit that fails validation posts its CQE at once with
 * the ioctl's -errno and leaves @seqno alone (pre-set it to 0 to tell the
 * two apart).  Every asynchronous SUBMIT completes: a hung job ends at the
 * job timeout, a removed device completes its commands with -ENODEV.
 * Other commands with the flag, and %DRM_METAINFER_SUBMIT_VALIDATE_ONLY
 * with it, fail with -EINVAL.
 */
struct drm_metainfer_uring_cmd {
	/** @arg_ptr: user pointer to the ioctl's argument struct */
	__u64 arg_ptr;
	/** @flags: DRM_METAINFER_URING_CMD_x */
	__u32 flags;
	/** @pad: must be 0 */
	__u32 pad;
};

/**
 * DRM_METAINFER_URING_CMD_ASYNC - SUBMIT only: post the CQE when the job
 * finishes, with its status (and device time on CQE32 rings)
 */
#define DRM_METAINFER_URING_CMD_ASYNC (1u << 0)
/** DRM_METAINFER_URING_CMD_FLAGS_MASK - known &drm_metainfer_uring_cmd.flags */
#define DRM_METAINFER_URING_CMD_FLAGS_MASK DRM_METAINFER_URING_CMD_ASYNC

/* ------------------------------------------------------------------ */
/* Command stream                                                     */
/* ------------------------------------------------------------------ */

/*
 * A command stream is a struct drm_metainfer_stream_header followed by
 * @op_count ops, back to back.  Each op starts with a struct
 * drm_metainfer_op_header whose @size is the size of that op's struct
 * (exactly, for this API version).  The stream must end exactly after the
 * last op.  Ops run in order; each op sees the results of the ones before.
 *
 * Tensors
 * -------
 * A struct drm_metainfer_tensor names a buffer (@bo_index into the submit's
 * @bo_handles), a byte @offset (a multiple of the element size), @ndim
 * (1..4) dimensions with @shape (each >= 1) and @stride in ELEMENTS per
 * dimension (>= 0; 0 broadcasts that dimension; all four strides 0 means
 * "dense": row-major over @shape as given).  Element (i0..i(ndim-1)) lives
 * at byte offset + esize * sum(ik * stride[k]).  The kernel rejects with
 * -EINVAL any tensor whose highest element lies outside its buffer or whose
 * address computation overflows 64 bits.  Unused @shape/@stride entries
 * (k >= ndim) must be zero.  A tensor an op does not use (e.g. no bias)
 * must be all zero.
 *
 * Layouts: %DRM_METAINFER_LAYOUT_PLAIN tensors are plain arrays.  4-D
 * activation tensors are %DRM_METAINFER_LAYOUT_NCHW (shape [N,C,H,W]) or
 * %DRM_METAINFER_LAYOUT_NHWC (shape [N,H,W,C]); convolution weights use the
 * same two layouts as [O,I,KH,KW] (NCHW) or [O,KH,KW,I] (NHWC).  Ops index
 * 4-D tensors by the logical (n, c, h, w) position, so e.g. COPY from an
 * NCHW to an NHWC tensor converts the layout.
 *
 * Integer arithmetic (exact; a userspace reference reproduces it bit for
 * bit).  Values are read as their dtype and widened to 64-bit signed.
 *
 * - conv2d/gemm accumulators are 32-bit two's complement and wrap on
 *   overflow: acc = bias[oc] + sum((x - x_zp) * (w - w_zp)) (mod 2^32).
 * - every other intermediate (add/mul/requantize, the requant product and
 *   the zero-point addition) is 64-bit two's complement and wraps.
 * - rshift_round(v, s) = s == 0 ? v : (v + 2^(s-1)) >> s (arithmetic shift,
 *   i.e. floor; so halves round towards +infinity), 0 <= s <= 62, the
 *   addition in wrapping 64-bit arithmetic.
 * - requant(acc, M, S, out_zp, lo, hi) with M = multiplier[ch] and
 *   S = shift[ch] (both int32, per channel or per tensor):
 *   t = clamp(31 - S, 0, 62); v = rshift_round((s64)acc * M, t) + out_zp;
 *   result = clamp(v, lo, hi).  The real-valued scale is M * 2^(S - 31).
 * - clamp bounds lo/hi are always the intersection of the op's
 *   [act_min, act_max] with the output dtype's range (an empty intersection
 *   is -EINVAL at submit).
 */

/** DRM_METAINFER_STREAM_MAGIC - &drm_metainfer_stream_header.magic ("MIcs") */
#define DRM_METAINFER_STREAM_MAGIC 0x7363494du
/** DRM_METAINFER_STREAM_VERSION - &drm_metainfer_stream_header.version */
#define DRM_METAINFER_STREAM_VERSION 1

/* dtypes (0 is invalid) */
#define DRM_METAINFER_DTYPE_INT8 1
#define DRM_METAINFER_DTYPE_UINT8 2
#define DRM_METAINFER_DTYPE_INT16 3
#define DRM_METAINFER_DTYPE_INT32 4
#define DRM_METAINFER_DTYPE_COUNT 5

/* layouts */
#define DRM_METAINFER_LAYOUT_PLAIN 0
#define DRM_METAINFER_LAYOUT_NCHW 1
#define DRM_METAINFER_LAYOUT_NHWC 2
#define DRM_METAINFER_LAYOUT_COUNT 3

/* ops (0 is invalid) */
#define DRM_METAINFER_OP_CONV2D 1
#define DRM_METAINFER_OP_GEMM 2
#define DRM_METAINFER_OP_ADD 3
#define DRM_METAINFER_OP_MUL 4
#define DRM_METAINFER_OP_RELU 5
#define DRM_METAINFER_OP_CLIP 6
#define DRM_METAINFER_OP_MAXPOOL 7
#define DRM_METAINFER_OP_AVGPOOL 8
#define DRM_METAINFER_OP_REQUANTIZE 9
#define DRM_METAINFER_OP_COPY 10
/*
 * DRM_METAINFER_OP_LUT (11, struct drm_metainfer_op_lut): added after API
 * version 1 without a version bump; like every op, a device runs it only
 * if it advertises bit 11 in %DRM_METAINFER_PARAM_OP_MASK (a kernel that
 * predates it rejects op 11 with -EINVAL).
 */
#define DRM_METAINFER_OP_LUT 11
/* DRM_METAINFER_OP_COUNT - one more than the highest op number */
#define DRM_METAINFER_OP_COUNT 12

/* Op header flags */
/** DRM_METAINFER_OP_F_BIAS - conv2d/gemm: the @bias tensor is used */
#define DRM_METAINFER_OP_F_BIAS (1u << 0)
/**
 * DRM_METAINFER_OP_F_REQUANT - conv2d/gemm: requantize the accumulators
 * (@rq, @multiplier, @shift); without it the output is the raw int32
 * accumulator and @rq, @multiplier and @shift must be zero
 */
#define DRM_METAINFER_OP_F_REQUANT (1u << 1)
/** DRM_METAINFER_OP_F_COUNT_PAD - avgpool: divide by the full window size */
#define DRM_METAINFER_OP_F_COUNT_PAD (1u << 2)

/**
 * struct drm_metainfer_stream_header - start of a command stream
 */
struct drm_metainfer_stream_header {
	/** @magic: %DRM_METAINFER_STREAM_MAGIC */
	__u32 magic;
	/** @version: %DRM_METAINFER_STREAM_VERSION */
	__u32 version;
	/** @op_count: number of ops that follow (1..%DRM_METAINFER_MAX_OPS) */
	__u32 op_count;
	/** @flags: must be 0 */
	__u32 flags;
};

/**
 * struct drm_metainfer_op_header - start of every op
 */
struct drm_metainfer_op_header {
	/** @op: DRM_METAINFER_OP_x */
	__u32 op;
	/** @size: bytes of the whole op struct, header included */
	__u32 size;
	/** @flags: DRM_METAINFER_OP_F_x valid for this op, others must be 0 */
	__u32 flags;
	/** @pad: must be 0 */
	__u32 pad;
};

/**
 * struct drm_metainfer_tensor - a strided view of part of a buffer
 */
struct drm_metainfer_tensor {
	/** @bo_index: index into the submit's @bo_handles */
	__u32 bo_index;
	/** @dtype: DRM_METAINFER_DTYPE_x */
	__u32 dtype;
	/** @layout: DRM_METAINFER_LAYOUT_x */
	__u32 layout;
	/** @ndim: number of dimensions, 1..4 (4 for NCHW/NHWC) */
	__u32 ndim;
	/** @offset: byte offset of element 0 in the buffer */
	__u64 offset;
	/** @shape: extent per dimension, >= 1; entries >= @ndim are 0 */
	__u32 shape[4];
	/** @stride: stride per dimension in elements; all 0 = dense */
	__u64 stride[4];
};

/**
 * struct drm_metainfer_requant - output requantization parameters
 *
 * Used with a @multiplier and a @shift tensor (int32, PLAIN, ndim 1, with
 * either one element (per tensor) or one per output channel).
 */
struct drm_metainfer_requant {
	/** @output_zp: output zero point added after scaling */
	__s32 output_zp;
	/** @act_min: lower clamp (fused activation); intersected with the dtype range */
	__s32 act_min;
	/** @act_max: upper clamp; must be >= @act_min */
	__s32 act_max;
	/** @pad: must be 0 */
	__u32 pad;
};

/**
 * struct drm_metainfer_op_conv2d - 2-D convolution (grouped, depthwise)
 *
 * @input [N,Cin,H,W] int8/uint8/int16; @weight [Cout,Cin/groups,KH,KW]
 * int8/int16 (same layout as @input); @bias int32 PLAIN [Cout]
 * (%DRM_METAINFER_OP_F_BIAS); @output [N,Cout,OH,OW] in the input's
 * layout: int32 without %DRM_METAINFER_OP_F_REQUANT, else int8/uint8/int16
 * or int32 with multiplier/shift per output channel.
 * OH = (H + pad_top + pad_bottom - dilation_h * (KH - 1) - 1) / stride_h + 1
 * (must be >= 1 and equal @output's H; same for W).  Cin and Cout must be
 * multiples of @groups; depthwise is groups == Cin == Cout (or Cout a
 * multiple of Cin).  Output channel oc of group g = oc / (Cout / groups)
 * reads input channels g * Cin/groups ...:
 * acc = bias[oc] + sum over ic, kh, kw of (x[n, g*Cin/groups + ic,
 * oh*stride_h - pad_top + kh*dilation_h, ow*stride_w - pad_left +
 * kw*dilation_w] - input_zp) * (w[oc, ic, kh, kw] - weight_zp), wrapping
 * int32; positions outside the input contribute nothing (x == input_zp).
 * Output = acc, or requant(acc, ...) (see above).
 */
struct drm_metainfer_op_conv2d {
	/** @hdr: op %DRM_METAINFER_OP_CONV2D, flags BIAS/REQUANT */
	struct drm_metainfer_op_header hdr;
	/** @stride_h: vertical stride, >= 1 */
	__u32 stride_h;
	/** @stride_w: horizontal stride, >= 1 */
	__u32 stride_w;
	/** @dilation_h: vertical dilation, >= 1 */
	__u32 dilation_h;
	/** @dilation_w: horizontal dilation, >= 1 */
	__u32 dilation_w;
	/** @pad_top: implicit zero rows above */
	__u32 pad_top;
	/** @pad_left: implicit zero columns left */
	__u32 pad_left;
	/** @pad_bottom: implicit zero rows below */
	__u32 pad_bottom;
	/** @pad_right: implicit zero columns right */
	__u32 pad_right;
	/** @groups: number of groups, >= 1 */
	__u32 groups;
	/** @pad: must be 0 */
	__u32 pad;
	/** @input_zp: input zero point */
	__s32 input_zp;
	/** @weight_zp: weight zero point */
	__s32 weight_zp;
	/** @rq: requantization (with %DRM_METAINFER_OP_F_REQUANT) */
	struct drm_metainfer_requant rq;
	/** @input: activations */
	struct drm_metainfer_tensor input;
	/** @weight: filters */
	struct drm_metainfer_tensor weight;
	/** @bias: int32 bias per output channel, or all zero */
	struct drm_metainfer_tensor bias;
	/** @output: result */
	struct drm_metainfer_tensor output;
	/** @multiplier: int32 requant multipliers, or all zero */
	struct drm_metainfer_tensor multiplier;
	/** @shift: int32 requant shifts, or all zero */
	struct drm_metainfer_tensor shift;
};

/**
 * struct drm_metainfer_op_gemm - matrix multiply
 *
 * @a [M,K] and @b [K,N] PLAIN 2-D, int8/uint8/int16 (each); @bias int32
 * [N]; @output [M,N] PLAIN 2-D (int32, or requantized per column n as for
 * conv2d).  acc[m,n] = bias[n] + sum_k (a[m,k] - a_zp) * (b[k,n] - b_zp),
 * wrapping int32.  Use @stride to pass transposed operands.
 */
struct drm_metainfer_op_gemm {
	/** @hdr: op %DRM_METAINFER_OP_GEMM, flags BIAS/REQUANT */
	struct drm_metainfer_op_header hdr;
	/** @a_zp: zero point of @a */
	__s32 a_zp;
	/** @b_zp: zero point of @b */
	__s32 b_zp;
	/** @rq: requantization (with %DRM_METAINFER_OP_F_REQUANT) */
	struct drm_metainfer_requant rq;
	/** @a: left operand [M,K] */
	struct drm_metainfer_tensor a;
	/** @b: right operand [K,N] */
	struct drm_metainfer_tensor b;
	/** @bias: int32 [N], or all zero */
	struct drm_metainfer_tensor bias;
	/** @output: result [M,N] */
	struct drm_metainfer_tensor output;
	/** @multiplier: int32 requant multipliers, or all zero */
	struct drm_metainfer_tensor multiplier;
	/** @shift: int32 requant shifts, or all zero */
	struct drm_metainfer_tensor shift;
};

/**
 * struct drm_metainfer_op_eltwise - element-wise add or mul
 *
 * @a, @b and @output have the same @ndim and logical shape (broadcast with
 * stride 0) and the same layout; any dtypes.  With wrapping 64-bit math:
 * ADD: v = (a - a_zp) * a_mult + (b - b_zp) * b_mult;
 * MUL: v = (a - a_zp) * (b - b_zp) * a_mult (@b_mult must be 0);
 * output = clamp(rshift_round(v, @shift) + output_zp, lo, hi).
 * Plain integer addition is a_mult = b_mult = 1, shift 0, zero points 0.
 */
struct drm_metainfer_op_eltwise {
	/** @hdr: op %DRM_METAINFER_OP_ADD or %DRM_METAINFER_OP_MUL, flags 0 */
	struct drm_metainfer_op_header hdr;
	/** @a_zp: zero point of @a */
	__s32 a_zp;
	/** @b_zp: zero point of @b */
	__s32 b_zp;
	/** @a_mult: multiplier of @a (ADD) or of the product (MUL) */
	__s32 a_mult;
	/** @b_mult: multiplier of @b (ADD); 0 for MUL */
	__s32 b_mult;
	/** @shift: right shift, 0..62 */
	__u32 shift;
	/** @pad: must be 0 */
	__u32 pad;
	/** @rq: @rq.output_zp, @rq.act_min, @rq.act_max */
	struct drm_metainfer_requant rq;
	/** @a: first input */
	struct drm_metainfer_tensor a;
	/** @b: second input */
	struct drm_metainfer_tensor b;
	/** @output: result */
	struct drm_metainfer_tensor output;
};

/**
 * struct drm_metainfer_op_clip - RELU or CLIP, element-wise
 *
 * @input and @output have the same dtype, layout and logical shape.
 * RELU: out = max(x, @min) (@min is the zero point; @max must be 0).
 * CLIP: out = min(max(x, @min), @max), @min <= @max.
 */
struct drm_metainfer_op_clip {
	/** @hdr: op %DRM_METAINFER_OP_RELU or %DRM_METAINFER_OP_CLIP, flags 0 */
	struct drm_metainfer_op_header hdr;
	/** @min: lower bound (RELU: the zero point) */
	__s32 min;
	/** @max: upper bound (CLIP), 0 for RELU */
	__s32 max;
	/** @input: source */
	struct drm_metainfer_tensor input;
	/** @output: result */
	struct drm_metainfer_tensor output;
};

/**
 * struct drm_metainfer_op_pool - max or average pooling
 *
 * @input [N,C,H,W] and @output [N,C,OH,OW], same dtype and layout (NCHW or
 * NHWC).  OH = (H + pad_top + pad_bottom - kernel_h) / stride_h + 1 (>= 1,
 * must equal @output's H; same for W).  Window positions outside the input
 * are skipped.  MAXPOOL: the maximum of the window's valid elements (the
 * dtype minimum if none).  AVGPOOL: s = sum of the valid elements, n = their
 * count (kernel_h * kernel_w with %DRM_METAINFER_OP_F_COUNT_PAD);
 * out = floor((2 * s + n) / (2 * n)) (halves round towards +infinity;
 * 0 if n == 0).
 */
struct drm_metainfer_op_pool {
	/** @hdr: op %DRM_METAINFER_OP_MAXPOOL or AVGPOOL; flags COUNT_PAD (avg only) */
	struct drm_metainfer_op_header hdr;
	/** @kernel_h: window height, 1..65535 */
	__u32 kernel_h;
	/** @kernel_w: window width, 1..65535 */
	__u32 kernel_w;
	/** @stride_h: vertical stride, >= 1 */
	__u32 stride_h;
	/** @stride_w: horizontal stride, >= 1 */
	__u32 stride_w;
	/** @pad_top: rows above, < @kernel_h */
	__u32 pad_top;
	/** @pad_left: columns left, < @kernel_w */
	__u32 pad_left;
	/** @pad_bottom: rows below, < @kernel_h */
	__u32 pad_bottom;
	/** @pad_right: columns right, < @kernel_w */
	__u32 pad_right;
	/** @input: source */
	struct drm_metainfer_tensor input;
	/** @output: result */
	struct drm_metainfer_tensor output;
};

/**
 * struct drm_metainfer_op_requantize - per-channel requantization
 *
 * @input and @output have the same layout and logical shape; any dtypes.
 * Channel of an element = its index in dimension @axis of @input's shape
 * as given (e.g. 1 for NCHW, 3 for NHWC).  @multiplier and @shift have one
 * element or shape[@axis] elements.  With wrapping 64-bit math:
 * out = requant(x - input_zp, M[ch], S[ch], output_zp, lo, hi), where the
 * product (x - input_zp) * M also wraps in 64 bits.
 */
struct drm_metainfer_op_requantize {
	/** @hdr: op %DRM_METAINFER_OP_REQUANTIZE, flags 0 */
	struct drm_metainfer_op_header hdr;
	/** @input_zp: subtracted from every input element */
	__s32 input_zp;
	/** @axis: channel dimension, < @input.ndim */
	__u32 axis;
	/** @rq: output zero point and clamp */
	struct drm_metainfer_requant rq;
	/** @input: source */
	struct drm_metainfer_tensor input;
	/** @output: result */
	struct drm_metainfer_tensor output;
	/** @multiplier: int32 multipliers */
	struct drm_metainfer_tensor multiplier;
	/** @shift: int32 shifts */
	struct drm_metainfer_tensor shift;
};

/**
 * struct drm_metainfer_op_copy - element-wise copy
 *
 * Same dtype and logical shape; layouts may differ (a layout conversion).
 */
struct drm_metainfer_op_copy {
	/** @hdr: op %DRM_METAINFER_OP_COPY, flags 0 */
	struct drm_metainfer_op_header hdr;
	/** @input: source */
	struct drm_metainfer_tensor input;
	/** @output: destination */
	struct drm_metainfer_tensor output;
};

/**
 * struct drm_metainfer_op_lut - element-wise table lookup
 *
 * A 256-entry table maps every 8-bit input value to an output value: the
 * quantized form of a non-linear activation (Sigmoid, HardSwish, SiLU,
 * Tanh, GELU, ...), as the table-lookup units of real NPUs do.  @input is
 * int8 or uint8; @table is PLAIN, ndim 1, shape [256], of @output's dtype
 * (int8 or uint8); @input and @output have the same layout and logical
 * shape (and @ndim).  out = table[x - dtype_min(@input.dtype)] (index 0
 * is the smallest input value: -128 for int8, 0 for uint8).  @table may
 * be strided; its bytes must not overlap @output's in the same buffer.
 * Errors: -EINVAL for anything else; -EOPNOTSUPP on a device without bit
 * %DRM_METAINFER_OP_LUT in its op mask.
 */
struct drm_metainfer_op_lut {
	/** @hdr: op %DRM_METAINFER_OP_LUT, flags 0 */
	struct drm_metainfer_op_header hdr;
	/** @table: the 256 output values */
	struct drm_metainfer_tensor table;
	/** @input: source */
	struct drm_metainfer_tensor input;
	/** @output: result */
	struct drm_metainfer_tensor output;
};

#if defined(__cplusplus)
}
#endif

#endif /* __UAPI_METAINFER_ACCEL_H__ */
