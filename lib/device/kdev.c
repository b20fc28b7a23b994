// SPDX-License-Identifier: MIT
/*
 * MetaInfer accelerators: one device per render node whose DRM driver is
 * "metainfer" (libdrm: drmGetDevices2, drmGetVersion), named npu0, npu1,
 * ... in render-node order.
 *
 * Submission: io_uring IORING_OP_URING_CMD (liburing), one
 * io_uring_submit() per batch.  When the device advertises
 * DRM_METAINFER_URING_CMD_ASYNC the CQE of a SUBMIT comes when the job
 * ends, with its status and (CQE32 ring) its device time; otherwise the
 * CQE carries the SUBMIT result and wait() uses the WAIT ioctl.  Without
 * io_uring (no ring, d->use_uring false, or MI_DEV_JOB_NO_URING) every
 * job is one SUBMIT ioctl and wait() is the WAIT ioctl (busy_ns 0: the
 * ioctl does not report it).
 *
 * Every job gets a binary out-syncobj (job_fence exports it as a
 * sync_file); in-fences (sync_file fds) are imported into syncobjs, as
 * SUBMIT takes syncobjs only.  CQEs of one ring may arrive for any job:
 * one waiter at a time reaps them (k->reaping) and marks their jobs done.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <xf86drm.h>

#include "device/device-impl.h"
#include "debug.h"
#include "internal.h"

#define KDEV_RING_ENTRIES 256
#define KDEV_NODES_MAX 64
/* wait(): margin over the job timeout before giving up on a job */
#define KDEV_WAIT_MARGIN_NS 5000000000ll

struct kdev {
	int fd;
	pthread_mutex_t lock;	/* contexts, done flags, reaping */
	pthread_cond_t cond;
	pthread_mutex_t ring_lock; /* the ring's SQ and CQ */
	uint32_t ctx[DRM_METAINFER_MAX_QUEUES][3];
	struct io_uring ring;
	bool ring_ok, async, cqe32, reaping;
	bool lost;
};

struct kjob {
	struct drm_metainfer_submit sub;
	uint32_t handles[DRM_METAINFER_MAX_BOS];
	struct drm_metainfer_sync in[DRM_METAINFER_MAX_SYNCS];
	uint32_t out_sync;
	bool uring, async, queued, done;
	int status;
	uint64_t busy_ns;
};

/* Nodes added so far (the scan runs with the registry locked). */
static char known_nodes[KDEV_NODES_MAX][64];
static int nknown;

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static int kioctl(int fd, unsigned long req, void *arg)
{
	int r;

	do
		r = ioctl(fd, req, arg);
	while (r < 0 && (errno == EINTR || errno == EAGAIN));
	return r < 0 ? -errno : 0;
}

static int get_param(int fd, uint32_t param, uint32_t index, uint64_t *v)
{
	struct drm_metainfer_get_param p = { .size = sizeof(p),
					     .param = param, .index = index };
	int ret = kioctl(fd, DRM_IOCTL_METAINFER_GET_PARAM, &p);

	if (!ret)
		*v = p.value;
	return ret;
}

static void get_param_str(int fd, uint32_t param, char *buf, size_t len)
{
	struct drm_metainfer_get_param p = { .size = sizeof(p), .param = param,
					     .data_ptr = (uintptr_t)buf,
					     .data_size = len - 1 };

	memset(buf, 0, len);
	if (kioctl(fd, DRM_IOCTL_METAINFER_GET_PARAM, &p))
		buf[0] = 0;
}

static void kdev_destroy(struct mi_dev *d)
{
	struct kdev *k = d->priv;

	if (k->ring_ok)
		io_uring_queue_exit(&k->ring);
	close(k->fd);
	free(k);
	free(d);
}

/* ---- buffers ---------------------------------------------------------- */

static int bo_map(struct mi_dev *d, uint32_t handle, size_t size,
		  struct mi_dev_bo **bop)
{
	struct kdev *k = d->priv;
	struct drm_metainfer_bo_info info = { .size = sizeof(info),
					      .handle = handle };
	struct mi_dev_bo *bo;
	int ret;

	ret = kioctl(k->fd, DRM_IOCTL_METAINFER_BO_INFO, &info);
	if (ret)
		return mi_set_error(ret, "%s: BO_INFO: %s", d->name, strerror(-ret));
	if (size > info.bo_size)
		return mi_set_error(-EINVAL, "%s: buffer of %llu bytes, %zu wanted",
				    d->name, (unsigned long long)info.bo_size, size);
	bo = calloc(1, sizeof(*bo));
	if (!bo)
		return -ENOMEM;
	bo->map = mmap(NULL, info.bo_size, PROT_READ | PROT_WRITE, MAP_SHARED,
		       k->fd, info.mmap_offset);
	if (bo->map == MAP_FAILED) {
		ret = -errno;
		free(bo);
		return mi_set_error(ret, "%s: mmap of a buffer: %s", d->name,
				    strerror(-ret));
	}
	bo->dev = d;
	bo->handle = handle;
	bo->size = info.bo_size;
	bo->prime_fd = -1;
	*bop = bo;
	return 0;
}

static int kdev_bo_alloc(struct mi_dev *d, size_t size, struct mi_dev_bo **bop)
{
	struct kdev *k = d->priv;
	struct drm_metainfer_bo_create c = { .size = sizeof(c), .bo_size = size };
	int ret;

	ret = kioctl(k->fd, DRM_IOCTL_METAINFER_BO_CREATE, &c);
	if (ret)
		return mi_set_error(ret, "%s: BO_CREATE of %zu bytes: %s", d->name,
				    size, strerror(-ret));
	ret = bo_map(d, c.handle, size, bop);
	if (ret)
		drmCloseBufferHandle(k->fd, c.handle);
	return ret;
}

static void kdev_bo_free(struct mi_dev_bo *bo)
{
	struct kdev *k = bo->dev->priv;

	munmap(bo->map, bo->size);
	if (bo->prime_fd >= 0)
		close(bo->prime_fd);
	drmCloseBufferHandle(k->fd, bo->handle);
	free(bo);
}

static int kdev_bo_export(struct mi_dev_bo *bo)
{
	struct kdev *k = bo->dev->priv;
	int ret;

	if (bo->prime_fd >= 0)
		return 0;
	ret = drmPrimeHandleToFD(k->fd, bo->handle, DRM_CLOEXEC | DRM_RDWR,
				 &bo->prime_fd);
	if (ret) {
		bo->prime_fd = -1;
		return mi_set_error(-errno ? -errno : -EINVAL,
				    "%s: PRIME export: %s", bo->dev->name,
				    strerror(errno));
	}
	return 0;
}

static int kdev_bo_import(struct mi_dev *d, int fd, size_t size,
			  struct mi_dev_bo **bop)
{
	struct kdev *k = d->priv;
	uint32_t handle;
	int ret;

	if (drmPrimeFDToHandle(k->fd, fd, &handle))
		return mi_set_error(errno ? -errno : -EINVAL,
				    "%s: PRIME import of fd %d: %s", d->name, fd,
				    strerror(errno));
	ret = bo_map(d, handle, size, bop);
	if (ret)
		drmCloseBufferHandle(k->fd, handle);
	return ret;
}

/* ---- submission ------------------------------------------------------- */

static int get_ctx(struct mi_dev *d, uint32_t queue, uint32_t prio,
		   uint32_t *ctx)
{
	struct kdev *k = d->priv;
	struct drm_metainfer_ctx_create c = { .size = sizeof(c), .queue = queue,
					      .priority = prio };
	int ret = 0;

	if (queue >= d->caps.num_queues || queue >= DRM_METAINFER_MAX_QUEUES ||
	    prio > DRM_METAINFER_PRIORITY_HIGH)
		return mi_set_error(-EINVAL, "%s: no queue %u / priority %u",
				    d->name, queue, prio);
	pthread_mutex_lock(&k->lock);
	if (!k->ctx[queue][prio]) {
		ret = kioctl(k->fd, DRM_IOCTL_METAINFER_CTX_CREATE, &c);
		if (!ret)
			k->ctx[queue][prio] = c.ctx_id;
	}
	*ctx = k->ctx[queue][prio];
	pthread_mutex_unlock(&k->lock);
	if (ret)
		return mi_set_error(ret, "%s: CTX_CREATE: %s", d->name,
				    strerror(-ret));
	return 0;
}

static void kjob_free(struct kdev *k, struct kjob *kj)
{
	for (uint32_t i = 0; i < kj->sub.in_sync_count; i++)
		drmSyncobjDestroy(k->fd, kj->in[i].handle);
	if (kj->out_sync)
		drmSyncobjDestroy(k->fd, kj->out_sync);
	free(kj);
}

/* Fill the SUBMIT of job: handles, in-fences as syncobjs, an out-syncobj. */
static int kjob_prepare(struct mi_dev *d, struct mi_dev_job *job,
			struct kjob **kjp)
{
	struct kdev *k = d->priv;
	struct kjob *kj;
	int ret;

	if (job->nbos < 0 || job->nbos > DRM_METAINFER_MAX_BOS ||
	    job->nin_fences < 0 || job->nin_fences > DRM_METAINFER_MAX_SYNCS)
		return mi_set_error(-EINVAL, "%s: %d buffers, %d fences in a job",
				    d->name, job->nbos, job->nin_fences);
	kj = calloc(1, sizeof(*kj));
	if (!kj)
		return -ENOMEM;
	kj->sub.size = sizeof(kj->sub);
	ret = get_ctx(d, job->queue, job->priority, &kj->sub.ctx_id);
	if (ret)
		goto err_free;
	for (int i = 0; i < job->nbos; i++) {
		if (job->bos[i]->dev != d) {
			ret = mi_set_error(-EINVAL,
					   "%s: buffer %d belongs to %s (import it)",
					   d->name, i, job->bos[i]->dev->name);
			goto err_free;
		}
		kj->handles[i] = job->bos[i]->handle;
	}
	for (int i = 0; i < job->nin_fences; i++) {
		if (drmSyncobjCreate(k->fd, 0, &kj->in[i].handle)) {
			ret = -errno;
			goto err_sync;
		}
		kj->sub.in_sync_count = i + 1;
		if (drmSyncobjImportSyncFile(k->fd, kj->in[i].handle,
					     job->in_fences[i])) {
			ret = -errno;
			goto err_sync;
		}
	}
	if (drmSyncobjCreate(k->fd, 0, &kj->out_sync)) {
		ret = -errno;
		goto err_sync;
	}
	kj->sub.out_sync = kj->out_sync;
	kj->sub.bo_count = job->nbos;
	kj->sub.bo_handles = (uintptr_t)kj->handles;
	kj->sub.cmds = (uintptr_t)job->cmds;
	kj->sub.cmds_size = job->cmds_size;
	kj->sub.in_syncs = (uintptr_t)kj->in;
	*kjp = kj;
	return 0;

err_sync:
	mi_set_error(ret, "%s: syncobj for a fence: %s", d->name, strerror(-ret));
err_free:
	kjob_free(k, kj);
	return ret;
}

/* Apply CQEs: under k->lock. */
static void apply_cqe(struct kdev *k, struct io_uring_cqe *cqe)
{
	struct kjob *kj = (struct kjob *)(uintptr_t)cqe->user_data;

	if (!kj)
		return;
	kj->status = cqe->res;
	kj->busy_ns = k->cqe32 ? cqe->big_cqe[0] : 0;
	kj->done = true;
}

/*
 * Reap CQEs until kj is done or deadline (absolute ns) passes; called
 * with k->lock held.  Returns 0 or -ETIME.
 */
static int reap_until(struct kdev *k, struct kjob *kj, int64_t deadline)
{
	while (!kj->done) {
		int64_t left = deadline - now_ns();
		struct io_uring_cqe *cqes[32];
		struct __kernel_timespec ts;
		unsigned int n;

		if (left <= 0)
			return -ETIME;
		if (k->reaping) {
			struct timespec rt;

			clock_gettime(CLOCK_REALTIME, &rt);
			rt.tv_nsec += 2000000;
			if (rt.tv_nsec >= 1000000000) {
				rt.tv_sec++;
				rt.tv_nsec -= 1000000000;
			}
			pthread_cond_timedwait(&k->cond, &k->lock, &rt);
			continue;
		}
		k->reaping = true;
		pthread_mutex_unlock(&k->lock);
		if (left > 20000000)
			left = 20000000;
		ts.tv_sec = 0;
		ts.tv_nsec = left;
		pthread_mutex_lock(&k->ring_lock);
		io_uring_wait_cqe_timeout(&k->ring, &cqes[0], &ts);
		n = io_uring_peek_batch_cqe(&k->ring, cqes, 32);
		pthread_mutex_lock(&k->lock);
		for (unsigned int i = 0; i < n; i++)
			apply_cqe(k, cqes[i]);
		io_uring_cq_advance(&k->ring, n);
		pthread_mutex_unlock(&k->ring_lock);
		k->reaping = false;
		pthread_cond_broadcast(&k->cond);
	}
	return 0;
}

static int submit_ioctl(struct mi_dev *d, struct kjob *kj)
{
	struct kdev *k = d->priv;
	int ret = kioctl(k->fd, DRM_IOCTL_METAINFER_SUBMIT, &kj->sub);

	if (ret)
		return mi_set_error(ret, "%s: SUBMIT: %s", d->name, strerror(-ret));
	kj->queued = true;
	return 0;
}

static int kdev_submit(struct mi_dev *d, struct mi_dev_job *const *jobs, int n)
{
	struct kdev *k = d->priv;
	int ret = 0, nq = 0, first_err = -1;

	for (int j = 0; j < n; j++) {
		struct mi_dev_job *job = jobs[j];
		struct kjob *kj = NULL;

		job->priv = NULL;
		job->status = 0;
		job->busy_ns = 0;
		job->seq = 0;
		ret = kjob_prepare(d, job, &kj);
		if (ret) {
			first_err = j;
			break;
		}
		job->priv = kj;
		kj->uring = k->ring_ok && d->use_uring &&
			    !(job->flags & MI_DEV_JOB_NO_URING);
		if (!kj->uring) {
			ret = submit_ioctl(d, kj);
			if (ret) {
				first_err = j;
				break;
			}
			job->seq = kj->sub.seqno;
			continue;
		}
		pthread_mutex_lock(&k->ring_lock);
		{
			struct io_uring_sqe *sqe = io_uring_get_sqe(&k->ring);
			struct drm_metainfer_uring_cmd *uc;

			if (!sqe) {
				io_uring_submit(&k->ring);
				sqe = io_uring_get_sqe(&k->ring);
			}
			if (!sqe) {
				pthread_mutex_unlock(&k->ring_lock);
				ret = mi_set_error(-EBUSY, "%s: io_uring full",
						   d->name);
				first_err = j;
				break;
			}
			io_uring_prep_rw(IORING_OP_URING_CMD, sqe, k->fd, NULL,
					 0, 0);
			sqe->cmd_op = DRM_IOCTL_METAINFER_SUBMIT;
			uc = (struct drm_metainfer_uring_cmd *)sqe->cmd;
			memset(uc, 0, sizeof(*uc));
			uc->arg_ptr = (uintptr_t)&kj->sub;
			kj->async = k->async;
			if (kj->async)
				uc->flags = DRM_METAINFER_URING_CMD_ASYNC;
			sqe->user_data = (uintptr_t)kj;
			nq++;
		}
		pthread_mutex_unlock(&k->ring_lock);
	}
	if (nq) {
		int r;

		pthread_mutex_lock(&k->ring_lock);
		r = io_uring_submit(&k->ring);
		pthread_mutex_unlock(&k->ring_lock);
		if (r < 0)
			/* nothing went in: the jobs are lost, say so */
			return mi_set_error(r, "%s: io_uring_submit: %s", d->name,
					    strerror(-r));
	}
	/*
	 * Which io_uring SUBMITs were accepted: async ones wrote their seqno
	 * at issue (a refused one leaves it 0 and posts its -errno at once);
	 * inline ones post their result in the CQE now.
	 */
	for (int j = 0; j < (first_err >= 0 ? first_err : n); j++) {
		struct kjob *kj = jobs[j]->priv;

		if (!kj->uring)
			continue;
		if (kj->async && kj->sub.seqno) {
			kj->queued = true;
			jobs[j]->seq = kj->sub.seqno;
			continue;
		}
		pthread_mutex_lock(&k->lock);
		reap_until(k, kj, now_ns() + 5000000000ll);
		pthread_mutex_unlock(&k->lock);
		if (!kj->async && kj->done && !kj->status) {
			kj->done = false; /* the job itself runs on */
			kj->queued = true;
			jobs[j]->seq = kj->sub.seqno;
			continue;
		}
		if (kj->async && kj->sub.seqno) {
			kj->queued = true; /* ran already */
			jobs[j]->seq = kj->sub.seqno;
			continue;
		}
		if (ret == 0) {
			ret = kj->done ? kj->status : -ETIME;
			mi_set_error(ret, "%s: SUBMIT (io_uring): %s", d->name,
				     strerror(-ret));
		}
		kj->done = true;
	}
	return ret;
}

static int kdev_wait(struct mi_dev *d, struct mi_dev_job *job, int64_t timeout_ns)
{
	struct kdev *k = d->priv;
	struct kjob *kj = job->priv;
	int64_t deadline;
	int ret;

	if (!kj || !kj->queued)
		return mi_set_error(-EINVAL, "%s: wait for a job not queued",
				    d->name);
	if (timeout_ns < 0)
		timeout_ns = (int64_t)d->caps.job_timeout_ms * 1000000ll +
			     KDEV_WAIT_MARGIN_NS;
	deadline = now_ns() + timeout_ns;
	if (kj->async) {
		pthread_mutex_lock(&k->lock);
		ret = reap_until(k, kj, deadline);
		pthread_mutex_unlock(&k->lock);
		if (ret)
			return mi_set_error(ret, "%s: job %llu still running",
					    d->name, (unsigned long long)job->seq);
	} else if (!kj->done) {
		struct drm_metainfer_wait w = { .size = sizeof(w),
						.ctx_id = kj->sub.ctx_id,
						.seqno = kj->sub.seqno,
						.timeout_ns = deadline };

		ret = kioctl(k->fd, DRM_IOCTL_METAINFER_WAIT, &w);
		if (ret == -ETIMEDOUT)
			return mi_set_error(-ETIME, "%s: job %llu still running",
					    d->name, (unsigned long long)job->seq);
		if (ret)
			w.status = ret; /* -ENODEV: the device went away */
		kj->status = w.status;
		kj->done = true;
	}
	job->status = kj->status;
	job->busy_ns = kj->busy_ns;
	if (job->status == -ENODEV)
		k->lost = true;
	return 0;
}

static int kdev_job_fence(struct mi_dev *d, struct mi_dev_job *job, int *fdp)
{
	struct kdev *k = d->priv;
	struct kjob *kj = job->priv;

	if (!kj || !kj->queued)
		return mi_set_error(-EINVAL, "%s: fence of a job not queued",
				    d->name);
	if (drmSyncobjExportSyncFile(k->fd, kj->out_sync, fdp))
		return mi_set_error(-errno, "%s: export of a job fence: %s",
				    d->name, strerror(errno));
	return 0;
}

static void kdev_job_release(struct mi_dev *d, struct mi_dev_job *job)
{
	struct kdev *k = d->priv;
	struct kjob *kj = job->priv;

	if (!kj)
		return;
	/* a pending io_uring CQE names kj: it must have come first (every
	 * async SUBMIT ends by the job timeout) */
	if (kj->async && kj->queued && !kj->done) {
		pthread_mutex_lock(&k->lock);
		if (reap_until(k, kj, now_ns() + (int64_t)d->caps.job_timeout_ms *
					      1000000ll + KDEV_WAIT_MARGIN_NS)) {
			pthread_mutex_unlock(&k->lock);
			return; /* leak rather than free what the ring names */
		}
		pthread_mutex_unlock(&k->lock);
	}
	kjob_free(k, kj);
	job->priv = NULL;
}

static int kdev_counters(struct mi_dev *d, struct mi_dev_counters *c)
{
	struct kdev *k = d->priv;
	struct drm_metainfer_get_counters g = { .size = sizeof(g) };
	int ret = kioctl(k->fd, DRM_IOCTL_METAINFER_GET_COUNTERS, &g);

	if (ret)
		return mi_set_error(ret, "%s: GET_COUNTERS: %s", d->name,
				    strerror(-ret));
	memset(c, 0, sizeof(*c));
	c->busy_ns = g.busy_ns;
	c->jobs_completed = g.jobs_completed;
	c->jobs_failed = g.jobs_failed;
	c->jobs_timed_out = g.jobs_timed_out;
	c->macs = g.macs;
	c->dma_bytes_in = g.dma_bytes_in;
	c->dma_bytes_out = g.dma_bytes_out;
	c->stall_ns = g.stall_ns;
	c->queue_wait_ns = g.queue_wait_ns;
	c->temperature_mc = g.temp_mc;
	c->power_mw = g.power_mw;
	c->clock_khz = g.clock_khz;
	c->queue_depth = g.queue_depth;
	c->valid = g.valid;
	c->throttle = g.throttle;
	return 0;
}

static int kdev_alive(struct mi_dev *d)
{
	struct kdev *k = d->priv;
	uint64_t lost = 0;

	if (get_param(k->fd, DRM_METAINFER_PARAM_DEVICE_LOST, 0, &lost))
		return 0;
	return !lost;
}

static const struct mi_dev_ops kdev_ops = {
	.destroy = kdev_destroy,
	.bo_alloc = kdev_bo_alloc,
	.bo_free = kdev_bo_free,
	.bo_export = kdev_bo_export,
	.bo_import = kdev_bo_import,
	.submit = kdev_submit,
	.wait = kdev_wait,
	.job_fence = kdev_job_fence,
	.job_release = kdev_job_release,
	.counters = kdev_counters,
	.alive = kdev_alive,
};

/* ---- discovery -------------------------------------------------------- */

static void read_caps(int fd, struct mi_dev_caps *c)
{
	uint64_t v;

	memset(c, 0, sizeof(*c));
#define P(param, field)                                 \
	do {                                            \
		if (!get_param(fd, param, 0, &v))       \
			c->field = v;                   \
	} while (0)
	P(DRM_METAINFER_PARAM_API_VERSION, api_version);
	P(DRM_METAINFER_PARAM_OP_MASK, op_mask);
	P(DRM_METAINFER_PARAM_DTYPE_MASK, dtype_mask);
	P(DRM_METAINFER_PARAM_LAYOUT_MASK, layout_mask);
	P(DRM_METAINFER_PARAM_PREFERRED_LAYOUT, preferred_layout);
	P(DRM_METAINFER_PARAM_NUM_QUEUES, num_queues);
	P(DRM_METAINFER_PARAM_SRAM_BYTES, sram_bytes);
	P(DRM_METAINFER_PARAM_CLOCK_KHZ, clock_khz);
	P(DRM_METAINFER_PARAM_DMA_BW, dma_bw);
	P(DRM_METAINFER_PARAM_DMA_BURST, dma_burst);
	P(DRM_METAINFER_PARAM_FW_VERSION, fw_version);
	P(DRM_METAINFER_PARAM_DEVICE_ID, device_id);
	P(DRM_METAINFER_PARAM_JOB_TIMEOUT_MS, job_timeout_ms);
	P(DRM_METAINFER_PARAM_URING_CMD_FLAGS, uring_cmd_flags);
#undef P
	if (!get_param(fd, DRM_METAINFER_PARAM_MACS_PER_CYCLE,
		       DRM_METAINFER_DTYPE_INT8, &v))
		c->macs_per_cycle = v;
	if (!c->num_queues)
		c->num_queues = 1;
	if (!c->job_timeout_ms)
		c->job_timeout_ms = 10000;
}

/* Open node; add it when its driver is metainfer.  1 added, 0 not ours. */
static int kdev_open(const char *node, int nth, int (*add)(struct mi_dev *d))
{
	drmVersionPtr ver;
	struct mi_dev *d;
	struct kdev *k;
	int fd, ret;

	fd = open(node, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		if (mi_debug("device"))
			fprintf(stderr, "metainfer: %s: %s\n", node, strerror(errno));
		return 0;
	}
	ver = drmGetVersion(fd);
	if (!ver || strcmp(ver->name, "metainfer")) {
		drmFreeVersion(ver);
		close(fd);
		return 0;
	}
	drmFreeVersion(ver);
	d = calloc(1, sizeof(*d));
	k = calloc(1, sizeof(*k));
	if (!d || !k) {
		free(d);
		free(k);
		close(fd);
		return 0;
	}
	k->fd = fd;
	pthread_mutex_init(&k->lock, NULL);
	pthread_mutex_init(&k->ring_lock, NULL);
	pthread_cond_init(&k->cond, NULL);
	d->ops = &kdev_ops;
	d->kind = MI_DEV_KERNEL;
	d->priv = k;
	snprintf(d->name, sizeof(d->name), "npu%d", nth);
	snprintf(d->driver, sizeof(d->driver), "metainfer");
	snprintf(d->node, sizeof(d->node), "%.63s", node);
	get_param_str(fd, DRM_METAINFER_PARAM_BACKEND, d->backend,
		      sizeof(d->backend));
	get_param_str(fd, DRM_METAINFER_PARAM_NAME, d->personality,
		      sizeof(d->personality));
	read_caps(fd, &d->caps);
	k->async = d->caps.uring_cmd_flags & DRM_METAINFER_URING_CMD_ASYNC;
	/* CQE32 carries the device time of async SUBMITs */
	ret = io_uring_queue_init(KDEV_RING_ENTRIES, &k->ring,
				  k->async ? IORING_SETUP_CQE32 : 0);
	if (ret && k->async)
		ret = io_uring_queue_init(KDEV_RING_ENTRIES, &k->ring, 0);
	else if (!ret)
		k->cqe32 = k->async;
	k->ring_ok = !ret;
	d->use_uring = k->ring_ok;
	if (!k->ring_ok && mi_debug("device"))
		fprintf(stderr, "metainfer: %s: no io_uring (%s), ioctls\n",
			node, strerror(-ret));
	if (add(d)) {
		kdev_destroy(d);
		return 0;
	}
	return 1;
}

static int node_minor(const char *node)
{
	const char *p = strstr(node, "renderD");

	return p ? atoi(p + 7) : -1;
}

static int cmp_node(const void *a, const void *b)
{
	return node_minor(a) - node_minor(b);
}

int mi_kdev_scan(int (*add)(struct mi_dev *d))
{
	char nodes[KDEV_NODES_MAX][64];
	drmDevicePtr devs[KDEV_NODES_MAX];
	int n, nn = 0, added = 0;
	struct dirent *de;
	DIR *dir;

	n = drmGetDevices2(0, devs, KDEV_NODES_MAX);
	for (int i = 0; i < n; i++) {
		if (devs[i]->available_nodes & (1 << DRM_NODE_RENDER) &&
		    nn < KDEV_NODES_MAX)
			snprintf(nodes[nn++], sizeof(nodes[0]), "%.63s",
				 devs[i]->nodes[DRM_NODE_RENDER]);
	}
	if (n > 0)
		drmFreeDevices(devs, n);
	/*
	 * libdrm skips platform devices without a device-tree name
	 * (OF_FULLNAME), such as metainfer_sim's: add the render nodes of
	 * /dev/dri it did not list.
	 */
	dir = opendir("/dev/dri");
	while (dir && (de = readdir(dir)) && nn < KDEV_NODES_MAX) {
		char path[64];
		bool listed = false;

		if (strncmp(de->d_name, "renderD", 7))
			continue;
		snprintf(path, sizeof(path), "/dev/dri/%.40s", de->d_name);
		for (int i = 0; i < nn; i++)
			listed |= !strcmp(nodes[i], path);
		if (!listed)
			snprintf(nodes[nn++], sizeof(nodes[0]), "%s", path);
	}
	if (dir)
		closedir(dir);
	qsort(nodes, nn, sizeof(nodes[0]), cmp_node);
	for (int i = 0; i < nn; i++) {
		bool known = false;

		for (int j = 0; j < nknown; j++)
			known |= !strcmp(known_nodes[j], nodes[i]);
		if (known || nknown >= KDEV_NODES_MAX)
			continue;
		if (kdev_open(nodes[i], nknown, add)) {
			snprintf(known_nodes[nknown++], sizeof(known_nodes[0]),
				 "%.63s", nodes[i]);
			added++;
		}
	}
	return added;
}
