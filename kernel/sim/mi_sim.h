/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * metainfer_sim: internal definitions of the simulated NPU backend.
 */
#ifndef _MI_SIM_H_
#define _MI_SIM_H_

#include <linux/types.h>
#include <linux/device.h>
#include <linux/hrtimer.h>
#include <linux/workqueue.h>
#include <linux/spinlock.h>
#include <linux/atomic.h>
#include <linux/platform_device.h>
#include <linux/overflow.h>
#include <linux/bitmap.h>

#include <metainfer_backend.h>

#define MI_SIM_MAX_ID 1023
/* bumped when the timing/thermal model changes (part of fw_version) */
#define MI_SIM_MODEL_VERSION 2
#define MI_SIM_MAX_QUEUES DRM_METAINFER_MAX_QUEUES
#define MI_SIM_LAYOUT_NCHW DRM_METAINFER_LAYOUT_NCHW
#define MI_SIM_LAYOUT_NHWC DRM_METAINFER_LAYOUT_NHWC
/* every op of the uapi: bits 1 .. DRM_METAINFER_OP_COUNT - 1 */
#define MI_SIM_ALL_OPS ((u32)(((1ULL << DRM_METAINFER_OP_COUNT) - 1) & ~1ULL))
/* throttling: clock = nominal >> level */
#define MI_SIM_MAX_THROTTLE 3
#define MI_SIM_HYSTERESIS_MC 5000
/* jobs with at most this many inner-loop operations are computed inline */
#define MI_SIM_INLINE_WORK 4096
/* words of a bitmap with one bit per op of a job */
#define MI_SIM_CASC_WORDS BITS_TO_LONGS(DRM_METAINFER_MAX_OPS)
/* scheduled busy segments kept for the thermal model */
#define MI_SIM_MAX_SEGS (MI_SIM_MAX_QUEUES + 2)

/**
 * struct mi_sim_personality - what a simulated chip is like
 * @name: preset name (informational once overridden)
 * @macs_int8: MACs per cycle for int8/uint8 operands
 * @macs_int16: MACs per cycle for int16 operands (0: int16 unsupported)
 * @macs_int32: element operations per cycle on int32 data
 * @clock_hz: nominal core clock
 * @sram_bytes: on-chip SRAM
 * @dma_bw: DMA bandwidth to system memory, bytes per second
 * @dma_burst: DMA burst size, bytes
 * @layout: preferred 4-D layout (MI_SIM_LAYOUT_x)
 * @op_mask: bit (1 << DRM_METAINFER_OP_x) per supported op
 * @queues: hardware queues, 1..MI_SIM_MAX_QUEUES
 * @dw_eff_pct: depthwise convolution efficiency, percent of peak
 * @rth_mc_per_w: thermal resistance, m°C per W
 * @ambient_mc: ambient temperature, m°C
 * @throttle_mc: temperature at which the clock steps down, m°C
 * @tau_ms: thermal time constant, ms
 * @fj_per_mac: dynamic energy per MAC, femtojoules
 * @idle_mw: idle (static) power, mW
 * @launch_ns: fixed cost per job (command fetch, setup)
 */
struct mi_sim_personality {
	char name[32];
	u32 macs_int8;
	u32 macs_int16;
	u32 macs_int32;
	u64 clock_hz;
	u64 sram_bytes;
	u64 dma_bw;
	u32 dma_burst;
	u32 layout;
	u32 op_mask;
	u32 queues;
	u32 dw_eff_pct;
	u32 rth_mc_per_w;
	s32 ambient_mc;
	s32 throttle_mc;
	u32 tau_ms;
	u32 fj_per_mac;
	u32 idle_mw;
	u32 launch_ns;
};

/**
 * struct mi_sim_opcost - what one op costs, input to the timing model
 * @work: operations for the compute time (MACs, or elements for
 *	element-wise ops and window elements for pooling)
 * @esize: element size that selects the MACs/cycle figure (1, 2 or 4)
 * @in_bytes: activation bytes read
 * @w_bytes: weight/bias/requant-parameter bytes read (conv2d and gemm)
 * @out_bytes: bytes written
 * @in_sram: part of @in_bytes read from on-chip SRAM (an intermediate
 *	the previous op of the job kept there), not over DMA
 * @out_sram: part of @out_bytes kept in SRAM for the next op, not written
 * @depthwise: a depthwise convolution
 * @layout_sensitive: the op's speed depends on the activation layout
 * @layout: the activation layout
 */
struct mi_sim_opcost {
	u64 work;
	u32 esize;
	u64 in_bytes;
	u64 w_bytes;
	u64 out_bytes;
	u64 in_sram;
	u64 out_sram;
	bool depthwise;
	bool layout_sensitive;
	u32 layout;
};

/**
 * struct mi_sim_opbreak - breakdown of an op's modelled time
 * @compute_ns: MAC-array time
 * @dma_ns: time to move the op's bytes once
 * @tiling_ns: re-fetch time when the working set exceeds SRAM
 * @layout_ns: layout conversion time
 * @refetch_bytes: extra bytes read because of tiling
 * @layout_bytes: extra bytes moved for the layout conversion
 */
struct mi_sim_opbreak {
	u64 compute_ns;
	u64 dma_ns;
	u64 tiling_ns;
	u64 layout_ns;
	u64 refetch_bytes;
	u64 layout_bytes;
};

/**
 * struct mi_sim_seg - a scheduled busy interval of the MAC array
 * @start: start, ktime ns
 * @end: end, ktime ns
 * @power_mw: power drawn during it
 */
struct mi_sim_seg {
	s64 start;
	s64 end;
	u32 power_mw;
};

enum mi_sim_qstate {
	MI_SIM_Q_IDLE,
	MI_SIM_Q_COMPUTE, /* worker computing */
	MI_SIM_Q_TIMER, /* results ready, waiting for modelled time */
	MI_SIM_Q_HUNG, /* never completes (fail_hang) */
};

struct mi_sim_dev;

/**
 * struct mi_sim_queue - one hardware queue (at most one job in flight)
 * @sdev: owning device
 * @idx: queue index
 * @state: MI_SIM_Q_x, under &mi_sim_dev.lock
 * @abort: reset in progress: the worker stops early, arms no timer
 * @job: job in flight, or NULL
 * @t_run: when run_job() was called, ktime ns
 * @status: status to complete the job with
 * @stats: statistics to report with it
 * @casc: bit k: op k's output may stay in SRAM (mi_sim_cascade_scan())
 * @kept: bytes the job kept in SRAM (for &mi_sim_status.sram_kept)
 * @work: computes the job
 * @timer: completes the job when its modelled time has passed
 */
struct mi_sim_queue {
	struct mi_sim_dev *sdev;
	u32 idx;
	enum mi_sim_qstate state;
	bool abort;
	struct mi_job *job;
	s64 t_run;
	int status;
	struct mi_job_stats stats;
	unsigned long casc[MI_SIM_CASC_WORDS];
	u64 kept;
	struct work_struct work;
	struct hrtimer timer;
};

/**
 * struct mi_sim_status - a snapshot of a device for debugfs (sim_state)
 * @temp_mc: temperature now, m°C
 * @power_mw: power drawn now, mW
 * @clock_hz: current (possibly throttled) clock
 * @throttle_level: clock = nominal >> level
 * @throttle_events: times the level went up
 * @jobs_done: jobs completed with status 0
 * @jobs_failed: jobs completed with an error (fail_dma, bad op)
 * @jobs_hung: jobs hung by fail_hang
 * @jobs_queued: queues with a job in flight
 * @resets: reset() calls
 * @busy_ns: modelled time of the completed jobs
 * @model_ns: modelled time of every scheduled job
 * @late_ns: total time the real computation overran the model
 * @macs: MACs of the completed jobs
 * @dma_in: bytes read by the completed jobs
 * @dma_out: bytes written by the completed jobs
 * @sram_kept: bytes of intermediates the completed jobs kept in SRAM
 *	(each saved one write and one read over DMA)
 * @energy_uj: energy of the scheduled jobs, µJ
 * @last_job_ns: modelled time of the last scheduled job
 * @max_wall_ns: longest wall-clock time from run_job() to completion
 */
struct mi_sim_status {
	s64 temp_mc;
	u32 power_mw;
	u64 clock_hz;
	u32 throttle_level;
	u64 throttle_events;
	u64 jobs_done;
	u64 jobs_failed;
	u64 jobs_hung;
	u32 jobs_queued;
	u64 resets;
	u64 busy_ns;
	u64 model_ns;
	u64 late_ns;
	u64 macs;
	u64 dma_in;
	u64 dma_out;
	u64 sram_kept;
	u64 energy_uj;
	u64 last_job_ns;
	u64 max_wall_ns;
};

/**
 * struct mi_sim_dev - one simulated chip
 * @pdev: the platform device handed to the core as parent
 * @mdev: the core's device, NULL while the driver is not bound
 * @id: user-chosen id (new_device)
 * @probe_err: result of the last probe (new_device reports it)
 * @lock: protects @pers, the queues' state, the thermal state, counters
 * @pers: personality (live-tunable fields may change at any time)
 * @wq: workqueue running the computation
 * @q: hardware queues
 * @array_free: when the shared MAC array becomes idle, ktime ns
 * @segs: scheduled busy segments not yet folded into @temp_mc
 * @nsegs: entries in @segs
 * @temp_mc: temperature at @temp_t
 * @temp_t: time of @temp_mc, ktime ns
 * @level: throttle level (clock = nominal >> level)
 * @fail_hang: debugfs knob: hang the next N jobs
 * @fail_dma: debugfs knob: fail the next N jobs with -EIO
 * @fail_reset: debugfs knob: fail the next N resets
 * @debugfs: this device's directory under /sys/kernel/debug/metainfer_sim
 * @st: counters shown in debugfs (temperature fields unused)
 */
struct mi_sim_dev {
	struct platform_device *pdev;
	struct mi_device *mdev;
	u32 id;
	int probe_err;
	spinlock_t lock;
	struct mi_sim_personality pers;
	struct workqueue_struct *wq;
	struct mi_sim_queue q[MI_SIM_MAX_QUEUES];
	s64 array_free;
	struct mi_sim_seg segs[MI_SIM_MAX_SEGS];
	u32 nsegs;
	s64 temp_mc;
	s64 temp_t;
	u32 level;
	atomic_t fail_hang;
	atomic_t fail_dma;
	atomic_t fail_reset;
	struct dentry *debugfs;
	struct mi_sim_status st;
};

/* a + b, saturating at U64_MAX */
static inline u64 mi_sim_sat_add(u64 a, u64 b)
{
	u64 s;

	return check_add_overflow(a, b, &s) ? U64_MAX : s;
}

/* mi_sim_pers.c */
const struct mi_sim_personality *mi_sim_pers_find(const char *name);
ssize_t mi_sim_pers_list(char *buf);
int mi_sim_pers_apply(struct mi_sim_personality *p, char *str, bool live_only);
ssize_t mi_sim_pers_show(const struct mi_sim_personality *p, char *buf);

/* mi_sim_model.c */
u64 mi_sim_muldiv(u64 a, u64 b, u64 c);
u64 mi_sim_op_time(const struct mi_sim_personality *p, u64 clock_hz,
		   const struct mi_sim_opcost *c, struct mi_sim_opbreak *b);
u64 mi_sim_job_time(const struct mi_sim_personality *p, u64 clock_hz,
		    const struct mi_op *ops, u32 n, const unsigned long *casc,
		    struct mi_job_stats *js, u64 *work, u64 *sram_kept);
u32 mi_sim_exp_neg(u64 x_q16);
s64 mi_sim_thermal_at(const struct mi_sim_personality *p, s64 temp_mc,
		      u32 power_mw, u64 dt_ns);
u32 mi_sim_power_mw(const struct mi_sim_personality *p, u64 work, u64 busy_ns);

/* mi_sim_exec.c */
int mi_sim_exec_op(const struct mi_op *op, const bool *abort);
void mi_sim_op_cost(const struct mi_op *op, struct mi_sim_opcost *c);
void mi_sim_cascade_scan(const struct mi_op *ops, u32 n, unsigned long *ok);
u64 mi_sim_cascade_bytes(const struct mi_op *op, const struct mi_tensor *t);

/* mi_sim_engine.c */
int mi_sim_engine_init(struct mi_sim_dev *sdev);
void mi_sim_engine_fini(struct mi_sim_dev *sdev);
void mi_sim_engine_status(struct mi_sim_dev *sdev, struct mi_sim_status *st);
void mi_sim_pers_get(struct mi_sim_dev *sdev, struct mi_sim_personality *p);
int mi_sim_pers_update(struct mi_sim_dev *sdev, char *str);
int mi_sim_backend_register(struct mi_sim_dev *sdev);
void mi_sim_backend_unregister(struct mi_sim_dev *sdev);

/* mi_sim_debugfs.c */
void mi_sim_debugfs_init(struct mi_sim_dev *sdev);
void mi_sim_debugfs_fini(struct mi_sim_dev *sdev);
void mi_sim_debugfs_files(struct mi_sim_dev *sdev, struct dentry *dir);
void mi_sim_debugfs_root_init(void);
void mi_sim_debugfs_root_fini(void);

#endif /* _MI_SIM_H_ */
