// SPDX-License-Identifier: MIT
/*
 * Emulated accelerators for hetero-check-emu, the host build of
 * hetero-check: two devices that run the command stream with the uapi's
 * userspace emulation (lib/device/mi_ref.c), one NHWC with every op, one
 * NCHW without LUT, so real models are placed, lowered and checked on a
 * machine with no metainfer render node.  They are named npu0 and npu1
 * like the first two accelerators of check-hetero's VM, and report the
 * VM's job timeout, so placement sizes jobs by their measured wall rate
 * (the reference runs on this CPU) and chains them.  Two more take
 * their capabilities and fail, for the fault tests: every job on npu2
 * ends with -EIO (a DMA error: the device is marked down, answers again
 * at the next run, fails again), and npu3 is lost at its first job
 * (-ENODEV: down for good), so each inference reruns every job's nodes
 * on the CPU.  npu4 is npu0 without CONV2D: every conv stays on the CPU
 * and the other units form many small jobs between them.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>

#include <metainfer/metainfer.h>

#include "device/device.h"

int hetero_emu_setup(void);

int hetero_emu_setup(void)
{
	const uint64_t all_ops = ((1ull << DRM_METAINFER_OP_COUNT) - 1) & ~1ull;
	const uint64_t dtypes = (1ull << DRM_METAINFER_DTYPE_INT8) |
				(1ull << DRM_METAINFER_DTYPE_UINT8) |
				(1ull << DRM_METAINFER_DTYPE_INT16) |
				(1ull << DRM_METAINFER_DTYPE_INT32);
	const uint64_t layouts = (1ull << DRM_METAINFER_LAYOUT_PLAIN) |
				 (1ull << DRM_METAINFER_LAYOUT_NCHW) |
				 (1ull << DRM_METAINFER_LAYOUT_NHWC);
	struct mi_dev_caps nhwc = {
		.op_mask = all_ops, .dtype_mask = dtypes,
		.layout_mask = layouts,
		.preferred_layout = DRM_METAINFER_LAYOUT_NHWC, .num_queues = 2,
		.sram_bytes = 512 << 10, .clock_khz = 500000,
		.macs_per_cycle = 256, .dma_bw = 500000000, .dma_burst = 128,
		/* as the sims in the VM: jobs are sized to a share of it */
		.job_timeout_ms = 2000,
	};
	struct mi_dev_caps nchw = nhwc, noconv = nhwc;
	struct mi_dev *d;

	noconv.op_mask &= ~(1ull << DRM_METAINFER_OP_CONV2D);
	nchw.op_mask &= ~(1ull << DRM_METAINFER_OP_LUT);
	nchw.preferred_layout = DRM_METAINFER_LAYOUT_NCHW;
	nchw.sram_bytes = 2 << 20;
	nchw.macs_per_cycle = 64;
	if (mi_dev_emu_add("npu0", &nhwc, &d) ||
	    mi_dev_emu_add("npu1", &nchw, &d) ||
	    mi_dev_emu_add("npu2", &nhwc, &d) ||
	    mi_dev_emu_inject(d, -EIO, INT_MAX) ||
	    mi_dev_emu_add("npu3", &nchw, &d) ||
	    mi_dev_emu_inject(d, -ENODEV, 1) ||
	    mi_dev_emu_add("npu4", &noconv, &d)) {
		fprintf(stderr, "hetero-check: emulated devices: %s\n",
			mi_last_error());
		return -1;
	}
	return 0;
}
