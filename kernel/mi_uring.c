// SPDX-License-Identifier: GPL-2.0-only
/*
 * MetaInfer core: io_uring command submission.
 *
 * IORING_OP_URING_CMD on a MetaInfer DRM fd runs one of the driver's ioctls:
 * sqe->cmd_op is the DRM_IOCTL_METAINFER_* request code and sqe->cmd holds
 * a struct drm_metainfer_uring_cmd pointing at the usual argument struct.
 * The command runs inline (the CQE carries the ioctl's return value), so a
 * batch of SUBMITs costs one io_uring_enter(); WAIT is sent to io_uring's
 * worker threads (-EAGAIN from the non-blocking issue) so it never blocks
 * the submitter.
 */

#include <linux/io_uring.h>

#include "mi_drv.h"

/**
 * mi_uring_cmd() - &file_operations.uring_cmd of the DRM nodes
 * @ioucmd: the command
 * @issue_flags: IO_URING_F_* issue flags
 *
 * Return: the ioctl's result, or -EAGAIN to be retried from a worker.
 */
int mi_uring_cmd(struct io_uring_cmd *ioucmd, unsigned int issue_flags)
{
	const struct drm_metainfer_uring_cmd *uc = ioucmd->cmd;
	u32 cmd_op = ioucmd->cmd_op;
	u64 arg_ptr = READ_ONCE(uc->arg_ptr);
	unsigned int nr;

	if (READ_ONCE(uc->flags) || READ_ONCE(uc->pad))
		return -EINVAL;
	if (!mi_is_driver_ioctl(cmd_op))
		return -ENOTTY;
	nr = _IOC_NR(cmd_op) - DRM_COMMAND_BASE;
	if (nr == DRM_METAINFER_WAIT && (issue_flags & IO_URING_F_NONBLOCK))
		return -EAGAIN;
	return mi_ioctl_call(ioucmd->file, nr, u64_to_user_ptr(arg_ptr));
}
