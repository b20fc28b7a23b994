/* SPDX-License-Identifier: MIT */
/*
 * Lowering of a QDQ-quantized graph's int8 ops to the uapi command stream
 * (MIcs, uapi/drm/metainfer_accel.h).  Private to libmetainfer.
 *
 * A quantized unit (struct mi_qunit) is one op of the normalized QDQ graph
 * together with the DequantizeLinear nodes of its inputs, its fused
 * activation and the QuantizeLinear of its output: in the quantized domain
 * it reads 8-bit tensors and writes one.  Placement (lib/plan) decides
 * which units run on which device; mi_lower_job() turns a run of units
 * placed on one device into one job.
 *
 * A lowered job's tensors are listed in job->t: external inputs and
 * outputs (graph tensors, dense NCHW / row-major as the CPU holds them),
 * intermediates that live only inside the job, and constants (weights,
 * biases, multipliers/shifts, tables) whose bytes lower prepared.  The
 * stream refers to buffer 0 for constants and buffer 1 for everything
 * else, at the offsets in job->t; mi_lower_rebind() moves one tensor to
 * another buffer/offset (e.g. a buffer imported from the device that
 * produces it), patching every reference in the stream.
 */
#ifndef MI_DEVICE_LOWER_H
#define MI_DEVICE_LOWER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir.h"
#include "device/device.h"

#define MI_QUNIT_MAX_IN 16
#define MI_QUNIT_MAX_MEMBERS 24

struct mi_qunit {
	int anchor;		/* node index of the op (Conv, Gemm, ...) */
	uint32_t op;		/* DRM_METAINFER_OP_x it lowers to (main op) */
	int members[MI_QUNIT_MAX_MEMBERS]; /* every node it stands for,
					    * anchor included */
	int nmembers;
	int inputs[MI_QUNIT_MAX_IN]; /* quantized activation tensors read */
	int ninputs;
	int output;		/* quantized tensor written (after Q) */
	uint64_t macs;
};

/*
 * Every quantized unit of g (shapes inferred), in topological order.
 * *units is malloc'ed (the caller frees it).  Nodes that are not part of
 * a unit run on the CPU.
 */
int mi_qunits_find(struct mi_graph *g, struct mi_qunit **units, int *nunits);

/* Can dev run u (op mask, dtypes, layouts, limits of the uapi)?  When
 * not, why holds one line ("depthwise conv with dilation 2: ..."). */
bool mi_qunit_supported(struct mi_graph *g, const struct mi_qunit *u,
			const struct mi_dev_caps *caps, char *why,
			size_t whylen);

enum mi_lower_role {
	MI_LT_INPUT = 0,	/* read from a graph tensor before the job */
	MI_LT_OUTPUT = 1,	/* written to a graph tensor by the job */
	MI_LT_TEMP = 2,		/* lives only inside the job */
	MI_LT_CONST = 3,	/* bytes in data, uploaded once */
};

struct mi_lower_tensor {
	enum mi_lower_role role;
	int graph_tensor;	/* index in g->tensors, -1 for TEMP/CONST */
	uint32_t dtype;		/* DRM_METAINFER_DTYPE_x */
	uint32_t layout;	/* DRM_METAINFER_LAYOUT_x */
	uint32_t bo_index;	/* 0 = constants, 1 = activations, or rebound */
	uint32_t pad;
	uint64_t offset;	/* byte offset in that buffer */
	size_t bytes;
	void *data;		/* MI_LT_CONST: the bytes (owned by the job) */
};

struct mi_lower_job {
	void *cmds;		/* the command stream (owned) */
	size_t cmds_size;
	int nops;
	struct mi_lower_tensor *t;
	int nt;
	size_t const_bytes;	/* size buffer 0 needs */
	size_t act_bytes;	/* size buffer 1 needs */
	uint64_t macs;
	const struct mi_qunit *const *units; /* what it runs (the caller's) */
	int nunits;
};

/*
 * Lower units[0..n-1] (consecutive in topological order, all supported by
 * caps) into one job for a device with caps: ops in the device's
 * preferred layout (layout conversions as COPY ops inside the job when
 * the graph's NCHW tensors need them), float scales as the uapi's
 * multiplier/shift, zero points, clamps.  Returns 0 or -errno with a
 * one-line reason (mi_set_error).
 */
int mi_lower_job(struct mi_graph *g, const struct mi_qunit *const *units,
		 int n, const struct mi_dev_caps *caps,
		 struct mi_lower_job **jobp);
void mi_lower_job_free(struct mi_lower_job *job);
/* Point tensor ti of job at (bo_index, offset), patching the stream. */
int mi_lower_rebind(struct mi_lower_job *job, int ti, uint32_t bo_index,
		    uint64_t offset);

#endif /* MI_DEVICE_LOWER_H */
