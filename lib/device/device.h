/* SPDX-License-Identifier: MIT */
/*
 * lib/device: one interface for every device a model can run on — the CPU
 * and each MetaInfer accelerator (a DRM render node whose driver is
 * "metainfer") — in the ggml-backend style: a struct of identity and
 * capabilities plus an ops table.  Private to libmetainfer; the public view
 * is struct mi_device_info in <metainfer/metainfer.h>.
 *
 * Layering: lib/device uses only the uapi, libdrm and liburing; lib/plan
 * (placement, the executor's device jobs) and the tools use it.
 *
 * Buffers are mapped for the CPU (map) for their whole life.  Jobs name
 * buffers by position in job->bos (the command stream's bo_index); a job
 * waits for sync_file fds (dma-fences of any device, exported with
 * job_fence) before it starts, so jobs chain across devices without the
 * CPU waiting in between.
 */
#ifndef MI_DEVICE_H
#define MI_DEVICE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "drm/metainfer_accel.h"

enum mi_dev_kind {
	MI_DEV_CPU = 0,
	MI_DEV_KERNEL = 1, /* a metainfer render node */
	MI_DEV_EMU = 2,	   /* userspace emulation of the uapi (mi_ref), tests */
};

/* What GET_PARAM says (accelerators) or cpuid (the CPU). */
struct mi_dev_caps {
	uint64_t op_mask;	/* bit DRM_METAINFER_OP_x */
	uint64_t dtype_mask;	/* bit DRM_METAINFER_DTYPE_x */
	uint64_t layout_mask;	/* bit DRM_METAINFER_LAYOUT_x */
	uint32_t preferred_layout; /* DRM_METAINFER_LAYOUT_x */
	uint32_t num_queues;
	uint64_t sram_bytes;
	uint64_t clock_khz;
	uint64_t macs_per_cycle; /* int8 */
	uint64_t dma_bw;	/* bytes per second */
	uint64_t dma_burst;	/* bytes */
	uint64_t fw_version;
	uint64_t device_id;
	uint32_t api_version;
	uint32_t job_timeout_ms;
	uint32_t uring_cmd_flags; /* PARAM_URING_CMD_FLAGS, 0 if absent */
	uint32_t pad;
};

struct mi_dev;

struct mi_dev_bo {
	struct mi_dev *dev;
	uint32_t handle;	/* GEM handle on dev (0 for the CPU/emulation) */
	uint32_t flags;
	size_t size;
	void *map;		/* CPU mapping of the whole buffer */
	int prime_fd;		/* exported dma-buf fd, -1 until bo_export */
	void *priv;
};

/* Counters a device reports (GET_COUNTERS); fields it lacks are 0 and
 * flagged absent in valid. */
struct mi_dev_counters {
	uint64_t busy_ns, jobs_completed, jobs_failed, jobs_timed_out;
	uint64_t macs, dma_bytes_in, dma_bytes_out, stall_ns, queue_wait_ns;
	int64_t temperature_mc, power_mw;
	uint64_t clock_khz;
	uint32_t queue_depth;
	uint32_t valid;		/* DRM_METAINFER_VALID_x */
	uint32_t throttle;	/* DRM_METAINFER_THROTTLE_x */
	uint32_t pad;
};

/* One job: a command stream over bos.  The caller fills the first part
 * and keeps cmds, bos and in_fences valid until wait() returned. */
struct mi_dev_job {
	const void *cmds;
	size_t cmds_size;
	struct mi_dev_bo *const *bos;	/* bo_index -> buffer (on this device:
					 * own or imported) */
	int nbos;
	const int *in_fences;	/* sync_file fds to wait for, or NULL */
	int nin_fences;
	uint32_t queue;		/* 0 .. caps.num_queues-1 */
	uint32_t priority;	/* DRM_METAINFER_PRIORITY_x */
	uint32_t flags;		/* MI_DEV_JOB_x */
	/* filled by the device */
	int status;		/* after wait: 0 or -errno (-ETIMEDOUT hang,
				 * -EIO DMA error, -ENODEV device lost, ...) */
	uint64_t busy_ns;	/* device time of the job (0 if unknown) */
	uint64_t seq;		/* the device's id of the job */
	void *priv;
};

/* mi_dev_job.flags: submit this job with the SUBMIT ioctl even when the
 * device submits through io_uring (d->use_uring). */
#define MI_DEV_JOB_NO_URING (1u << 0)

/*
 * The ops table.  Members marked optional may be NULL; the rest must be
 * set.  All return 0 or -errno and set a one-line reason (mi_set_error)
 * on failure.
 */
struct mi_dev_ops {
	void (*destroy)(struct mi_dev *d);
	int (*bo_alloc)(struct mi_dev *d, size_t size, struct mi_dev_bo **bop);
	void (*bo_free)(struct mi_dev_bo *bo);
	/* optional: PRIME.  export sets bo->prime_fd (owned by the bo);
	 * import maps a dma-buf fd of another device as a buffer of d
	 * (the fd stays the caller's). */
	int (*bo_export)(struct mi_dev_bo *bo);
	int (*bo_import)(struct mi_dev *d, int fd, size_t size,
			 struct mi_dev_bo **bop);
	/* Queue jobs[0..n-1] in this order as one batch (io_uring: one
	 * io_uring_submit for all; ioctl fallback: one SUBMIT each).  A job
	 * that cannot be queued fails the call; the ones before it stay
	 * queued and must still be waited for. */
	int (*submit)(struct mi_dev *d, struct mi_dev_job *const *jobs, int n);
	/* Wait for one submitted job (timeout_ns < 0: the device's own job
	 * timeout plus a margin; never forever) and fill status/busy_ns.
	 * Returns 0 when the job finished (check job->status), -ETIME when
	 * it is still running at the timeout. */
	int (*wait)(struct mi_dev *d, struct mi_dev_job *job, int64_t timeout_ns);
	/* optional: a sync_file fd that signals when job finishes (for
	 * in_fences of jobs on other devices); the caller closes it */
	int (*job_fence)(struct mi_dev *d, struct mi_dev_job *job, int *fdp);
	/* Free what submit attached to job (after wait, or instead of it
	 * when the device is lost) */
	void (*job_release)(struct mi_dev *d, struct mi_dev_job *job);
	/* optional */
	int (*counters)(struct mi_dev *d, struct mi_dev_counters *c);
	/* optional: 1 when the device answers, 0 when it is lost/down */
	int (*alive)(struct mi_dev *d);
};

struct mi_dev {
	const struct mi_dev_ops *ops;
	enum mi_dev_kind kind;
	int index;		/* position in the registry */
	char name[32];		/* unique: "cpu", "npu0", ... (metainfer devices) */
	char driver[32];	/* "cpu", "metainfer", "emulation" */
	char backend[32];	/* PARAM_BACKEND ("sim"), "" */
	char personality[64];	/* PARAM_NAME ("ethos-u55-high"), CPU model */
	char node[64];		/* "/dev/dri/renderD128", "" */
	struct mi_dev_caps caps;
	bool use_uring;		/* submit through io_uring (else ioctls) */
	atomic_bool down;	/* marked down after a fault; see mi_dev_up() */
	atomic_uint_fast64_t faults; /* jobs that failed and ran elsewhere */
	atomic_uint_fast64_t wall_rate; /* MACs per wall second, 0 unknown,
					 * 1 none (mi_dev_wall_rate) */
	atomic_uint_fast64_t wall_rate_grouped; /* the same, grouped conv */
	void *priv;
};

/*
 * The registry: the CPU is always device 0; accelerators follow in render
 * node order; emulated devices (tests) after them.  Scanned once per
 * process on first use; mi_dev_rescan() looks again (after a hot-plug).
 */
int mi_dev_count(void);
struct mi_dev *mi_dev_get(int index);
struct mi_dev *mi_dev_find(const char *name);
int mi_dev_rescan(void);
/*
 * Parse a device list ("npu0,npu2", "all", "cpu"): fills devs (at most
 * max) and returns the count, or -EINVAL/-ENODEV with a one-line reason
 * naming the bad entry.  The CPU is always included (first).
 */
int mi_dev_select(const char *list, struct mi_dev **devs, int max);
/* Add an emulated accelerator with these capabilities (tests): runs the
 * command stream with mi_ref_run on the CPU, bit-exact to the uapi. */
int mi_dev_emu_add(const char *name, const struct mi_dev_caps *caps,
		   struct mi_dev **devp);
/* Make the next count jobs of an emulated device finish with status err
 * (-ETIMEDOUT, -EIO, -ENODEV: the device then stays lost), for tests of
 * the fallback paths.  count 0 stops it. */
int mi_dev_emu_inject(struct mi_dev *d, int err, int count);
/*
 * Modelled time for an emulated device (emu_time.c): with a timing set,
 * a job's busy_ns is the sim's documented model with these parameters
 * (which need not match the advertised caps: the hidden parameters of
 * a chip), not the wall time of the reference.  NULL: wall time again.
 */
struct mi_dev_emu_timing {
	uint64_t clock_khz;
	uint64_t macs_per_cycle;	/* int8; int16 half, int32 a quarter */
	uint64_t dma_bw;		/* bytes per second */
	uint64_t dma_burst;		/* bytes */
	uint64_t sram_bytes;
	uint64_t launch_ns;
	uint32_t dw_eff_pct;		/* depthwise efficiency, 1..100 */
	uint32_t preferred_layout;	/* DRM_METAINFER_LAYOUT_x */
};
int mi_dev_emu_set_timing(struct mi_dev *d, const struct mi_dev_emu_timing *t);
/* The timing in use; -ENODATA when none is set. */
int mi_dev_emu_get_timing(struct mi_dev *d, struct mi_dev_emu_timing *t);
/* A live personality change, as a firmware update: new timing, the
 * firmware version incremented, the advertised caps unchanged. */
int mi_dev_emu_update(struct mi_dev *d, const struct mi_dev_emu_timing *t);
/* Run-to-run noise: every job's busy_ns times 1 + u * pct / 100, u
 * uniform in [-1, 1) from seed (0 pct: none); pct < 100. */
int mi_dev_emu_set_noise(struct mi_dev *d, uint32_t pct, uint64_t seed);
uint64_t mi_dev_emu_time(const struct mi_dev_emu_timing *t, const void *cmds,
			 size_t size);

/*
 * probe.c: MACs per second of wall time this accelerator achieves on
 * int8 GEMM and 3x3 conv jobs (the slower), or with grouped on a
 * depthwise conv, measured once per process (0 when it runs neither: no
 * GEMM/CONV2D or int8, a fault).  Placement sizes jobs by it
 * against the device's job timeout, which counts wall time.
 */
uint64_t mi_dev_wall_rate(struct mi_dev *d, bool grouped);
/* A job of macs MACs took at least ns of wall time (it timed out): the
 * wall rate is at most that from now on. */
void mi_dev_wall_rate_cap(struct mi_dev *d, uint64_t macs, uint64_t ns);

/* Down/up bookkeeping: a device that faulted is skipped by later
 * placements until mi_dev_up() sees it answer again (ops->alive). */
void mi_dev_mark_down(struct mi_dev *d, int err);
bool mi_dev_up(struct mi_dev *d);

/* Convenience wrappers over the ops table. */
static inline int mi_dev_bo_alloc(struct mi_dev *d, size_t size,
				  struct mi_dev_bo **bop)
{
	return d->ops->bo_alloc(d, size, bop);
}

static inline void mi_dev_bo_free(struct mi_dev_bo *bo)
{
	if (bo)
		bo->dev->ops->bo_free(bo);
}

#endif /* MI_DEVICE_H */
