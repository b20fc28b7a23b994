// SPDX-License-Identifier: GPL-2.0-only
/*
 * MetaInfer core: io_uring command submission.
 *
 * IORING_OP_URING_CMD on a MetaInfer DRM fd runs one of the driver's ioctls:
 * sqe->cmd_op is the DRM_IOCTL_METAINFER_* request code and sqe->cmd holds
 * a struct drm_metainfer_uring_cmd pointing at the usual argument struct.
 *
 * Inline mode (flags 0): the command runs at issue and the CQE carries the
 * ioctl's return value, so a batch of SUBMITs costs one io_uring_enter();
 * WAIT is sent to io_uring's worker threads (-EAGAIN from the non-blocking
 * issue) so it never blocks the submitter.
 *
 * Asynchronous SUBMIT (%DRM_METAINFER_URING_CMD_ASYNC): the job is queued at
 * issue and the CQE is posted when it finishes, res = the job's status and,
 * on IORING_SETUP_CQE32 rings, big_cqe[0] = its device time in ns.  Nothing
 * waits per job: the finished fence's callback queues task work
 * (io_uring_cmd_complete_in_task()) that posts the CQE.  6.1 cannot cancel
 * a uring_cmd, and ring teardown waits for every command in flight, so each
 * one must end: the job timeout bounds a running job, a killed context
 * signals its queued jobs, and unregister (mi_uring_kill()) completes those
 * left in the contexts of a removed device with -ENODEV.
 */

#include <linux/io_uring.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <drm/drm_drv.h>
#include <drm/drm_print.h>

#include "mi_drv.h"

/* mi_uring_job.flags bit: the CQE was (or is being) posted */
#define MI_UJ_DONE 0

/**
 * struct mi_uring_job - an asynchronous SUBMIT in flight
 * @ref: references: the command (until its CQE is posted), the job (until
 *	it is freed) and the fence callback (while armed)
 * @cb: callback on the job's finished fence
 * @link: in &mi_device.uring_jobs until the CQE is on its way
 * @ioucmd: the command
 * @mdev: device
 * @fence: the job's finished fence (referenced)
 * @busy_ns: device time, written by the job before its fence signals
 * @status: res of the CQE
 * @flags: MI_UJ_* bits
 */
struct mi_uring_job {
	struct kref ref;
	struct dma_fence_cb cb;
	struct list_head link;
	struct io_uring_cmd *ioucmd;
	struct mi_device *mdev;
	struct dma_fence *fence;
	u64 busy_ns;
	int status;
	unsigned long flags;
};

static struct mi_uring_job **mi_uring_pdu(struct io_uring_cmd *ioucmd)
{
	BUILD_BUG_ON(sizeof(struct mi_uring_job *) > sizeof(ioucmd->pdu));
	return (struct mi_uring_job **)ioucmd->pdu;
}

static void mi_uring_job_release(struct kref *ref)
{
	struct mi_uring_job *uj = container_of(ref, struct mi_uring_job, ref);

	dma_fence_put(uj->fence);
	kfree(uj);
}

/**
 * mi_uring_job_put() - drop a reference to an asynchronous submit
 * @uj: the submit
 */
void mi_uring_job_put(struct mi_uring_job *uj)
{
	kref_put(&uj->ref, mi_uring_job_release);
}

/**
 * mi_uring_job_stats() - record the device time of the job (mi_job_finish)
 * @uj: the submit waiting for the job
 * @busy_ns: the job's execution time
 *
 * Called before the job's fences signal, from any context.
 */
void mi_uring_job_stats(struct mi_uring_job *uj, u64 busy_ns)
{
	WRITE_ONCE(uj->busy_ns, busy_ns);
}

/* Task work of the submitting task (or io_uring's fallback worker). */
static void mi_uring_job_post(struct io_uring_cmd *ioucmd,
			      unsigned int issue_flags)
{
	struct mi_uring_job *uj = *mi_uring_pdu(ioucmd);
	int status = uj->status;
	u64 busy_ns = READ_ONCE(uj->busy_ns);

	/* done with the record before the command (and its file) goes */
	mi_uring_job_put(uj);
	io_uring_cmd_done(ioucmd, status, busy_ns, issue_flags);
}

/*
 * Post the CQE with @status, once: the fence callback and mi_uring_kill()
 * may race.  The command's reference goes with the task work.
 */
static void mi_uring_job_complete(struct mi_uring_job *uj, int status)
{
	unsigned long fl;

	if (test_and_set_bit(MI_UJ_DONE, &uj->flags))
		return;
	spin_lock_irqsave(&uj->mdev->uring_lock, fl);
	list_del_init(&uj->link);
	spin_unlock_irqrestore(&uj->mdev->uring_lock, fl);
	uj->status = status;
	io_uring_cmd_complete_in_task(uj->ioucmd, mi_uring_job_post);
}

static void mi_uring_fence_cb(struct dma_fence *f, struct dma_fence_cb *cb)
{
	struct mi_uring_job *uj = container_of(cb, struct mi_uring_job, cb);

	mi_uring_job_complete(uj, mi_status_to_user(f->error));
	mi_uring_job_put(uj);
}

/**
 * mi_uring_job_arm() - tie an asynchronous submit to its job (mi_job_submit)
 * @uj: the submit
 * @job: its job, armed and not yet pushed
 * @finished: the job's finished fence
 *
 * From here on the CQE is posted when @finished signals, or with -ENODEV
 * when the device is removed first.
 */
void mi_uring_job_arm(struct mi_uring_job *uj, struct mi_job *job,
		      struct dma_fence *finished)
{
	struct mi_device *mdev = uj->mdev;
	bool dead;

	kref_get(&uj->ref);
	job->uring = uj;
	uj->fence = dma_fence_get(finished);

	spin_lock_irq(&mdev->uring_lock);
	dead = mdev->uring_dead;
	if (!dead)
		list_add_tail(&uj->link, &mdev->uring_jobs);
	spin_unlock_irq(&mdev->uring_lock);
	if (dead) {
		mi_uring_job_complete(uj, -ENODEV);
		return;
	}
	kref_get(&uj->ref);
	if (dma_fence_add_callback(finished, &uj->cb, mi_uring_fence_cb))
		mi_uring_fence_cb(finished, &uj->cb);
}

/**
 * mi_uring_kill() - complete every asynchronous submit of a removed device
 * @mdev: device, its queues already killed
 *
 * Jobs the backend held have finished (-ENODEV) and posted their CQEs;
 * jobs still queued in contexts end only when their file is closed, which
 * the commands themselves prevent (io_uring holds the file).  Their
 * commands complete here with -ENODEV; no new one is armed afterwards.
 */
void mi_uring_kill(struct mi_device *mdev)
{
	struct mi_uring_job *uj;

	spin_lock_irq(&mdev->uring_lock);
	mdev->uring_dead = true;
	while ((uj = list_first_entry_or_null(&mdev->uring_jobs,
					      struct mi_uring_job, link))) {
		/* on the list, the command's reference is still held */
		kref_get(&uj->ref);
		list_del_init(&uj->link);
		spin_unlock_irq(&mdev->uring_lock);
		mi_uring_job_complete(uj, -ENODEV);
		if (dma_fence_remove_callback(uj->fence, &uj->cb))
			mi_uring_job_put(uj);
		mi_uring_job_put(uj);
		spin_lock_irq(&mdev->uring_lock);
	}
	spin_unlock_irq(&mdev->uring_lock);
}

/*
 * Copy the submit arguments in by the uapi's size rule (as mi_ioctl_call()
 * does), queue the job with @uj armed, and write the seqno back.
 */
static int mi_uring_submit_async(struct io_uring_cmd *ioucmd, void __user *uarg)
{
	struct drm_file *file = ioucmd->file->private_data;
	struct drm_device *drm = file->minor->dev;
	struct drm_metainfer_submit args;
	struct mi_uring_job *uj;
	u32 usize, copy;
	int ret;

	/* SUBMIT is DRM_RENDER_ALLOW without AUTH/MASTER: open to any file */
	if (get_user(usize, (u32 __user *)uarg))
		return -EFAULT;
	if (usize < DRM_METAINFER_SUBMIT_SIZE_VER0)
		return -EINVAL;
	if (usize > sizeof(args)) {
		if (usize > PAGE_SIZE)
			return -E2BIG;
		ret = check_zeroed_user(uarg + sizeof(args),
					usize - sizeof(args));
		if (ret < 0)
			return ret;
		if (!ret)
			return -E2BIG;
	}
	copy = min_t(u32, usize, sizeof(args));
	memset(&args, 0, sizeof(args));
	if (copy_from_user(&args, uarg, copy))
		return -EFAULT;
	/* a probe has no job to wait for: use the inline mode */
	if (args.flags & DRM_METAINFER_SUBMIT_VALIDATE_ONLY)
		return -EINVAL;

	uj = kzalloc(sizeof(*uj), GFP_KERNEL);
	if (!uj)
		return -ENOMEM;
	kref_init(&uj->ref);
	INIT_LIST_HEAD(&uj->link);
	INIT_LIST_HEAD(&uj->cb.node);
	uj->ioucmd = ioucmd;
	uj->mdev = to_mi_device(drm);
	*mi_uring_pdu(ioucmd) = uj;

	ret = mi_job_submit(drm, &args, file, uj);
	if (ret) {
		mi_uring_job_put(uj);
		return ret;
	}
	/*
	 * The job is queued and the CQE will follow it.  If the seqno cannot
	 * be written back the CQE still comes; userspace that pre-set seqno
	 * to 0 sees that it was not.
	 */
	if (put_user(args.seqno,
		     (u64 __user *)(uarg + offsetof(struct drm_metainfer_submit,
						    seqno))))
		drm_dbg_driver(drm, "uring: seqno write-back failed\n");
	return -EIOCBQUEUED;
}

/**
 * mi_uring_cmd() - &file_operations.uring_cmd of the DRM nodes
 * @ioucmd: the command
 * @issue_flags: IO_URING_F_* issue flags
 *
 * Return: the ioctl's result, -EAGAIN to be retried from a worker, or
 * -EIOCBQUEUED for an asynchronous SUBMIT (its CQE follows the job).
 */
int mi_uring_cmd(struct io_uring_cmd *ioucmd, unsigned int issue_flags)
{
	const struct drm_metainfer_uring_cmd *uc = ioucmd->cmd;
	u32 cmd_op = ioucmd->cmd_op;
	u64 arg_ptr = READ_ONCE(uc->arg_ptr);
	u32 flags = READ_ONCE(uc->flags);
	unsigned int nr;

	if ((flags & ~DRM_METAINFER_URING_CMD_FLAGS_MASK) || READ_ONCE(uc->pad))
		return -EINVAL;
	if (!mi_is_driver_ioctl(cmd_op))
		return -ENOTTY;
	nr = _IOC_NR(cmd_op) - DRM_COMMAND_BASE;
	if (flags & DRM_METAINFER_URING_CMD_ASYNC) {
		if (nr != DRM_METAINFER_SUBMIT)
			return -EINVAL;
		return mi_uring_submit_async(ioucmd, u64_to_user_ptr(arg_ptr));
	}
	if (nr == DRM_METAINFER_WAIT && (issue_flags & IO_URING_F_NONBLOCK))
		return -EAGAIN;
	return mi_ioctl_call(ioucmd->file, nr, u64_to_user_ptr(arg_ptr));
}
