/* SPDX-License-Identifier: GPL-2.0-only OR MIT */
/*
 * Userspace reference of the MetaInfer command stream, written from the
 * arithmetic documented in uapi/drm/metainfer_accel.h (not from the kernel
 * code), so that a device's results can be checked bit for bit.
 */
#ifndef MI_REF_H
#define MI_REF_H

#include <stddef.h>
#include <stdint.h>

#include "drm/metainfer_accel.h"

/** struct mi_ref_buf - a buffer image: what a job's bo_handles[i] holds */
struct mi_ref_buf {
	uint8_t *data;
	size_t size;
};

/**
 * mi_ref_run - execute a command stream on buffer images
 * @cmds: the stream, as passed to SUBMIT
 * @cmds_size: its size in bytes
 * @bufs: one image per bo_index
 * @nbufs: number of images
 *
 * Returns 0, or -EINVAL if the stream is one the reference does not know
 * how to run (the tests only give it valid streams).
 */
int mi_ref_run(const void *cmds, size_t cmds_size, struct mi_ref_buf *bufs,
	       unsigned int nbufs);

/* The documented helpers, exposed for the unit checks in the tests. */
int64_t mi_ref_rshift_round(int64_t v, unsigned int s);
int64_t mi_ref_requant(int64_t acc, int32_t m, int32_t s, int32_t zp,
		       int64_t lo, int64_t hi);
int64_t mi_ref_dtype_min(uint32_t dtype);
int64_t mi_ref_dtype_max(uint32_t dtype);
unsigned int mi_ref_dtype_size(uint32_t dtype);

#endif
