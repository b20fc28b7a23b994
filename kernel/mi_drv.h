/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * MetaInfer core: internal definitions shared by the mi_*.c files.
 */
#ifndef _MI_DRV_H_
#define _MI_DRV_H_

#include <linux/atomic.h>
#include <linux/kref.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/spinlock.h>
#include <linux/xarray.h>
#include <linux/dma-fence.h>
#include <linux/iosys-map.h>
#include <drm/drm_device.h>
#include <drm/drm_file.h>
#include <drm/drm_gem_shmem_helper.h>
#include <drm/gpu_scheduler.h>

#include "metainfer_backend.h"

#define MI_DRIVER_NAME "metainfer"
#define MI_DRIVER_DESC "MetaInfer accelerator framework"
#define MI_MAX_CTX_PER_FILE 1024
#define MI_MAX_ERRORS_PER_CTX 4096

extern unsigned int mi_job_timeout_ms;
extern atomic_t mi_hw_fences_live;
extern unsigned long mi_max_bo_size;

/**
 * struct mi_counters - job counters kept per device and per context
 * @jobs_submitted: jobs accepted by SUBMIT
 * @jobs_completed: jobs finished with status 0
 * @jobs_failed: jobs finished with another error than -ETIMEDOUT
 * @jobs_timed_out: jobs finished with -ETIMEDOUT
 * @busy_ns: execution time reported by the backend
 * @macs: MACs reported by the backend
 * @dma_bytes_in: bytes read, reported by the backend
 * @dma_bytes_out: bytes written, reported by the backend
 * @inflight: submitted and not yet finished
 * @stall_ns: memory stall time reported by the backend
 * @queue_wait_ns: time from submit to run_job
 */
struct mi_counters {
	atomic64_t jobs_submitted;
	atomic64_t jobs_completed;
	atomic64_t jobs_failed;
	atomic64_t jobs_timed_out;
	atomic64_t busy_ns;
	atomic64_t macs;
	atomic64_t dma_bytes_in;
	atomic64_t dma_bytes_out;
	atomic64_t inflight;
	atomic64_t stall_ns;
	atomic64_t queue_wait_ns;
};

struct mi_job;
struct mi_pmu;
struct mi_uring_job;

/**
 * struct mi_queue - one hardware queue, driven by one drm_sched
 * @mdev: owning device
 * @index: queue index
 * @sched_ready: @sched was initialised
 * @run_lock: serializes the backend's run_job and reset on this queue
 * @dead: set under @run_lock at unregister; no run_job afterwards
 * @lock: protects @active (taken from any context)
 * @active: the job the backend holds, or NULL
 * @fence_lock: lock of the hardware fences
 * @fence_context: dma_fence context of the hardware fences
 * @fence_seqno: last hardware fence seqno (scheduler thread only)
 * @jobs_run: jobs handed to run_job
 * @resets: timeouts handled on this queue
 * @queued: jobs pushed to an entity of this queue, not yet at run_job
 * @sched: the scheduler
 * @name: scheduler (thread) name
 */
struct mi_queue {
	struct mi_device *mdev;
	u32 index;
	bool sched_ready;
	struct mutex run_lock;
	bool dead;
	spinlock_t lock;
	struct mi_job *active;
	spinlock_t fence_lock;
	u64 fence_context;
	u64 fence_seqno;
	atomic64_t jobs_run;
	atomic64_t resets;
	atomic_t queued;
	struct drm_gpu_scheduler sched;
	char name[32];
};

/**
 * struct mi_device - one registered accelerator
 * @drm: its DRM device (@drm->dev_private points back here)
 * @parent: the backend's device
 * @ops: backend ops
 * @caps: capabilities (copy; name strings point into @name/@backend)
 * @name: personality name
 * @backend: backend module name
 * @priv: backend data
 * @num_queues: number of hardware queues
 * @minor: render minor, -1 until registered
 * @timeout_ms: job timeout of this device
 * @lost: a reset failed; no new work
 * @registered: between register and unregister
 * @reset_lock: serializes resets across queues
 * @queues: the hardware queues
 * @counters: device-wide job counters
 * @bo_count: live buffer objects
 * @bo_bytes: bytes of live buffer objects
 * @bo_seq: last buffer id (tracepoints)
 * @ctx_count: live contexts
 * @file_count: open files
 * @job_count: live job structs
 * @resets: timeouts handled
 * @resets_failed: resets that failed
 * @debugfs: debugfs directory
 * @hwmon: hwmon device, if the backend has sensors
 * @pmu: perf PMU, if one was registered (mi_pmu.c)
 * @uring_lock: protects @uring_jobs and @uring_dead (any context)
 * @uring_jobs: asynchronous io_uring submits whose CQE is not posted yet
 * @uring_dead: set at unregister; no asynchronous submit is armed after
 */
struct mi_device {
	struct drm_device *drm;
	struct device *parent;
	const struct mi_backend_ops *ops;
	struct mi_backend_caps caps;
	char name[64];
	char backend[32];
	void *priv;
	u32 num_queues;
	int minor;
	unsigned int timeout_ms;
	atomic_t lost;
	bool registered;
	struct mutex reset_lock;
	struct mi_queue queues[DRM_METAINFER_MAX_QUEUES];
	struct mi_counters counters;
	atomic_t bo_count;
	atomic64_t bo_bytes;
	atomic64_t bo_seq;
	atomic_t ctx_count;
	atomic_t file_count;
	atomic_t job_count;
	atomic64_t resets;
	atomic64_t resets_failed;
	struct dentry *debugfs;
	struct device *hwmon;
	struct mi_pmu *pmu;
	spinlock_t uring_lock;
	struct list_head uring_jobs;
	bool uring_dead;
};

/**
 * struct mi_file - per open file state (outlives the drm_file while
 * contexts of it are alive)
 * @ref: references: the file and each context
 * @mdev: device
 * @ctxs: contexts by id
 * @client_id: drm-client-id of fdinfo
 * @engine_ns: busy time per queue (fdinfo drm-engine-q<i>)
 * @jobs: finished jobs per queue
 */
struct mi_file {
	struct kref ref;
	struct mi_device *mdev;
	struct xarray ctxs;
	u64 client_id;
	atomic64_t engine_ns[DRM_METAINFER_MAX_QUEUES];
	atomic64_t jobs[DRM_METAINFER_MAX_QUEUES];
};

/**
 * struct mi_ctx - an execution context: one entity on one queue
 * @ref: references: the file's table, lookups and each job
 * @mfile: owning file state (referenced)
 * @mdev: device
 * @q: its queue
 * @id: id within the file
 * @priority: DRM_METAINFER_PRIORITY_x
 * @entity: its drm_sched entity
 * @submit_lock: orders seqno allocation, arm and push
 * @seqno: last issued seqno (under @submit_lock)
 * @last_seqno: last published seqno (read locklessly)
 * @jobs: seqno -> finished fence (with a reference) of unretired jobs
 * @errors: seqno -> xa_mk_value(-status) of retired failed jobs
 * @nr_errors: entries in @errors
 * @errors_evicted: highest seqno whose error was dropped
 * @errors_lock: protects @errors bookkeeping
 * @counters: the context's job counters
 * @queued: jobs pushed to @entity that have not reached run_job yet
 * @drain_wq: woken when @queued drops to zero
 * @closed: destroyed, no more submits (under @submit_lock)
 * @deps_lock: protects @deps
 * @deps: mi_deps of its jobs not yet freed (mi_ctx_cancel_deps())
 * @teardown: the task tearing the context down, or NULL
 */
struct mi_ctx {
	struct kref ref;
	struct mi_file *mfile;
	struct mi_device *mdev;
	struct mi_queue *q;
	u32 id;
	u32 priority;
	struct drm_sched_entity entity;
	struct mutex submit_lock;
	u64 seqno;
	u64 last_seqno;
	struct xarray jobs;
	struct xarray errors;
	unsigned long nr_errors;
	u64 errors_evicted;
	struct mutex errors_lock;
	struct mi_counters counters;
	atomic_t queued;
	wait_queue_head_t drain_wq;
	bool closed;
	spinlock_t deps_lock;
	struct list_head deps;
	struct task_struct *teardown;
};

/* Bits of mi_job.flags */
#define MI_JOB_FINISHED 0
#define MI_JOB_ACCOUNTED 1

/**
 * struct mi_job - a submitted job
 * @base: drm_sched job
 * @mdev: device
 * @ctx: context (referenced)
 * @q: queue
 * @desc: what the backend sees
 * @ops: validated ops
 * @bos: kernel mappings of @objs
 * @objs: the job's buffers (referenced)
 * @bo_count: entries in @objs
 * @hw_fence: fence signalled when the job finishes
 * @flags: MI_JOB_* bits
 * @status: final status
 * @submit_time: when it was queued
 * @start_time: when run_job was called
 * @stats: what the backend reported
 * @seqno: sequence number in its context
 * @uring: the asynchronous io_uring submit waiting for it (referenced), or
 *	NULL
 * @dep: its in-fences as one fence (referenced), or NULL without in-fences
 */
struct mi_job {
	struct drm_sched_job base;
	struct mi_device *mdev;
	struct mi_ctx *ctx;
	struct mi_queue *q;
	struct mi_job_desc desc;
	struct mi_op *ops;
	struct mi_bo_map *bos;
	struct drm_gem_object **objs;
	u32 bo_count;
	struct dma_fence *hw_fence;
	unsigned long flags;
	int status;
	ktime_t submit_time;
	ktime_t start_time;
	struct mi_job_stats stats;
	u64 seqno;
	struct mi_uring_job *uring;
	struct mi_dep *dep;
};

/**
 * struct mi_bo - a buffer object
 * @base: shmem GEM object (must be first)
 * @mdev: device
 * @id: id in tracepoints
 * @counted: included in the device's buffer count
 * @map_lock: protects @map and @mapped
 * @map: kernel mapping, made by the first job that uses the buffer
 * @mapped: @map is valid
 */
struct mi_bo {
	struct drm_gem_shmem_object base;
	struct mi_device *mdev;
	u64 id;
	bool counted;
	struct mutex map_lock;
	struct iosys_map map;
	bool mapped;
};

static inline struct mi_device *to_mi_device(struct drm_device *drm)
{
	return drm->dev_private;
}

static inline struct mi_job *to_mi_job(struct drm_sched_job *sj)
{
	return container_of(sj, struct mi_job, base);
}

/* mi_drv.c */
bool mi_device_is_lost(struct mi_device *mdev);
void mi_device_mark_lost(struct mi_device *mdev);
int mi_get_param_ioctl(struct drm_device *drm, void *data,
		       struct drm_file *file);
long mi_ioctl_call(struct file *filp, unsigned int index, void __user *uarg);
bool mi_is_driver_ioctl(unsigned int cmd);

/* mi_uring.c */
struct io_uring_cmd;
int mi_uring_cmd(struct io_uring_cmd *ioucmd, unsigned int issue_flags);
void mi_uring_job_arm(struct mi_uring_job *uj, struct mi_job *job,
		      struct dma_fence *finished);
void mi_uring_job_stats(struct mi_uring_job *uj, u64 busy_ns);
void mi_uring_job_put(struct mi_uring_job *uj);
void mi_uring_kill(struct mi_device *mdev);

/* mi_dep.c */
struct mi_dep;
struct mi_dep *mi_dep_create(struct dma_fence **fences, u32 count);
void mi_dep_arm(struct mi_dep *dep);
void mi_dep_cancel(struct mi_dep *dep);
struct dma_fence *mi_dep_fence(struct mi_dep *dep);
void mi_dep_put(struct mi_dep *dep);
void mi_ctx_track_dep(struct mi_ctx *ctx, struct mi_dep *dep);
void mi_ctx_untrack_dep(struct mi_ctx *ctx, struct mi_dep *dep);
unsigned int mi_ctx_cancel_deps(struct mi_ctx *ctx);

/* mi_gem.c */
struct drm_gem_object *mi_gem_create_object(struct drm_device *drm,
					    size_t size);
struct drm_gem_object *
mi_gem_prime_import_sg_table(struct drm_device *drm,
			     struct dma_buf_attachment *attach,
			     struct sg_table *sgt);
int mi_bo_create_ioctl(struct drm_device *drm, void *data,
		       struct drm_file *file);
int mi_bo_info_ioctl(struct drm_device *drm, void *data, struct drm_file *file);
int mi_bo_vmap(struct drm_gem_object *obj, void **vaddr);

/* mi_cmd.c */
int mi_cmd_parse(struct mi_device *mdev, const void *cmds, u32 size,
		 const struct drm_gem_object *const *objs, u32 bo_count,
		 struct mi_op **ops_out, u32 *op_count_out);
void mi_cmd_resolve(struct mi_op *ops, u32 op_count,
		    const struct mi_bo_map *bos);

/* mi_job.c */
int mi_queues_init(struct mi_device *mdev);
void mi_queues_fini(struct mi_device *mdev);
void mi_queues_kill(struct mi_device *mdev);
int mi_ctx_create_ioctl(struct drm_device *drm, void *data,
			struct drm_file *file);
int mi_ctx_destroy_ioctl(struct drm_device *drm, void *data,
			 struct drm_file *file);
int mi_submit_ioctl(struct drm_device *drm, void *data, struct drm_file *file);
int mi_job_submit(struct drm_device *drm, struct drm_metainfer_submit *args,
		  struct drm_file *file, struct mi_uring_job *uj);
int mi_status_to_user(int err);
int mi_wait_ioctl(struct drm_device *drm, void *data, struct drm_file *file);
struct mi_ctx *mi_ctx_lookup(struct mi_file *mfile, u32 id);
void mi_jobs_wait_all(void);
void mi_ctx_put(struct mi_ctx *ctx);
void mi_file_ctxs_fini(struct mi_file *mfile);
void mi_file_put(struct mi_file *mfile);

/* mi_perf.c */
void mi_counters_account(struct mi_job *job, int status);
int mi_get_counters_ioctl(struct drm_device *drm, void *data,
			  struct drm_file *file);
int mi_read_hw_counters(struct mi_device *mdev, struct mi_hw_counters *c);

/* mi_pmu.c */
void mi_pmu_init(struct mi_device *mdev);
void mi_pmu_fini(struct mi_device *mdev);
void mi_pmu_module_init(void);
void mi_pmu_module_fini(void);

/* mi_fdinfo.c */
void mi_show_fdinfo(struct seq_file *m, struct file *f);

/* mi_debugfs.c */
void mi_debugfs_init(struct mi_device *mdev);
void mi_debugfs_fini(struct mi_device *mdev);
void mi_debugfs_module_init(void);
void mi_debugfs_module_fini(void);

/* mi_hwmon.c */
int mi_hwmon_init(struct mi_device *mdev);
void mi_hwmon_fini(struct mi_device *mdev);

#endif /* _MI_DRV_H_ */
