/* SPDX-License-Identifier: MIT */
/*
 * lib/health: live health vectors per device.  Private to libmetainfer
 * (the scheduler and the CLI use it); Documentation/health.rst defines
 * every dimension's formula and source.
 *
 * A vector holds six standard dimensions in [0, 1], each with a bit in
 * present: a dimension whose sensor the device lacks is absent (bit
 * clear, value 0 only as a placeholder), never a zero reading.  All
 * dimensions but bandwidth saturation read 1 = healthy; bandwidth
 * saturation reads 1 = the device's DMA bandwidth is used up.  Rates need
 * two samples: a device's first sample has no compute readiness,
 * bandwidth saturation or (CPU) power budget.
 *
 * Sources: accelerators through their ops table (ops->counters, which is
 * GET_COUNTERS), hwmon and the sim's personality attribute under sysfs,
 * and /proc/PID/fdinfo; the CPU through /proc/stat, /proc/meminfo, PSI,
 * cpufreq, thermal zones and RAPL.  Every root (/proc, /sys) comes from
 * struct mi_health_opts, so tests plant their own trees.
 *
 * A sampler (struct mi_health) covers a set of devices: mi_health_sample()
 * takes one round now; mi_health_start() runs a thread that takes one
 * every period (it sleeps while stopped); each round goes into a ring of
 * the last opts.ring vectors per device and to the callback.
 */
#ifndef MI_HEALTH_H
#define MI_HEALTH_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct mi_dev;

enum mi_health_dim {
	MI_HEALTH_COMPUTE = 0,	/* compute readiness */
	MI_HEALTH_MEMORY,	/* memory availability */
	MI_HEALTH_BANDWIDTH,	/* bandwidth saturation (1 = saturated) */
	MI_HEALTH_THERMAL,	/* thermal headroom */
	MI_HEALTH_POWER,	/* power budget left */
	MI_HEALTH_QUEUE,	/* queue stability */
	MI_HEALTH_NDIM,
};

/* Raw inputs of a vector, each flagged in raw_present when read. */
enum mi_health_raw {
	MI_HRAW_BUSY,		/* busy fraction over the interval */
	MI_HRAW_CLOCK_KHZ,	/* current clock (CPU: mean scaling_cur_freq) */
	MI_HRAW_CLOCK_MAX_KHZ,	/* nominal / maximum clock */
	MI_HRAW_THROTTLE,	/* DRM_METAINFER_THROTTLE_x bits */
	MI_HRAW_JOBS_DONE,	/* jobs completed in the interval */
	MI_HRAW_JOBS_FAILED,	/* jobs failed in the interval */
	MI_HRAW_JOBS_TIMED_OUT,	/* jobs timed out in the interval */
	MI_HRAW_LOST,		/* 1: device lost / marked down */
	MI_HRAW_MEM_AVAIL_KB,	/* /proc/meminfo MemAvailable */
	MI_HRAW_MEM_TOTAL_KB,	/* /proc/meminfo MemTotal */
	MI_HRAW_CLIENT_MEM_KB,	/* fdinfo drm-memory-system, all clients */
	MI_HRAW_CLIENTS,	/* fdinfo: open files (drm-client-id) */
	MI_HRAW_DMA_BPS,	/* DMA bytes/s in + out */
	MI_HRAW_DMA_BW,		/* the device's DMA bandwidth, bytes/s */
	MI_HRAW_STALL,		/* stall_ns / busy_ns over the interval */
	MI_HRAW_TEMP_MC,	/* temperature (CPU: hottest zone) */
	MI_HRAW_THROTTLE_MC,	/* throttle / trip temperature */
	MI_HRAW_AMBIENT_MC,	/* ambient temperature */
	MI_HRAW_POWER_MW,	/* power draw */
	MI_HRAW_POWER_BUDGET_MW,/* sustainable power / RAPL limit */
	MI_HRAW_QUEUE_DEPTH,	/* queue depth now (CPU: procs_running) */
	MI_HRAW_QUEUE_MEAN,	/* mean depth over the window */
	MI_HRAW_QUEUE_VAR,	/* variance of the depth over the window */
	MI_HRAW_QUEUE_N,	/* samples in the window (2..5) */
	MI_HRAW_PSI_CPU,	/* PSI "some" avg10, percent */
	MI_HRAW_PSI_MEM,
	MI_HRAW_PSI_IO,
	MI_HEALTH_RAW_COUNT,
};

/* Queue stability uses the variance over this many samples. */
#define MI_HEALTH_QUEUE_WINDOW 5

/* mi_health_vec.flags */
#define MI_HEALTH_F_GONE (1u << 0) /* the device is absent: no dimension */
#define MI_HEALTH_F_LOST (1u << 1) /* lost / marked down: compute 0 */

struct mi_health_vec {
	double v[MI_HEALTH_NDIM];
	uint32_t present;	/* bit (1 << MI_HEALTH_x) */
	uint32_t flags;		/* MI_HEALTH_F_x */
	int dev_index;		/* mi_dev.index */
	char dev_name[32];
	uint64_t seq;		/* round number of the sampler, from 1 */
	uint64_t mono_ns;	/* CLOCK_MONOTONIC in the middle of the read */
	uint64_t dev_ns;	/* the device's own clock; 0 when unknown */
	uint64_t interval_ns;	/* since this device's previous sample */
	double raw[MI_HEALTH_RAW_COUNT];
	uint64_t raw_present;	/* bit (1 << MI_HRAW_x) */
};

static inline bool mi_health_has(const struct mi_health_vec *v,
				 enum mi_health_dim d)
{
	return v->present & (1u << d);
}

typedef void (*mi_health_cb)(const struct mi_health_vec *vecs, int n,
			     void *arg);

struct mi_health_opts {
	const char *proc_root;	/* NULL: "/proc" */
	const char *sys_root;	/* NULL: "/sys" */
	uint32_t period_ms;	/* 0: 100 */
	uint32_t ring;		/* vectors kept per device; 0: 64 */
	int64_t ambient_mc;	/* ambient when no sensor says; 0: 25 C */
	bool no_fdinfo;		/* skip the /proc/PID/fdinfo scan */
	mi_health_cb cb;	/* optional: called after every round */
	void *cb_arg;
};

struct mi_health;

extern const char *const mi_health_dim_names[MI_HEALTH_NDIM];
extern const char *const mi_health_raw_names[MI_HEALTH_RAW_COUNT];

/* A sampler over devs[0..n-1] (the pointers stay the caller's). */
int mi_health_create(struct mi_dev *const *devs, int n,
		     const struct mi_health_opts *opts, struct mi_health **hp);
void mi_health_destroy(struct mi_health *h);
/* One round now: fills out[0..n-1] (may be NULL) and returns n or -errno. */
int mi_health_sample(struct mi_health *h, struct mi_health_vec *out);
/* Periodic sampling on a thread; start while models run, stop when idle. */
int mi_health_start(struct mi_health *h);
void mi_health_stop(struct mi_health *h);
int mi_health_set_period(struct mi_health *h, uint32_t period_ms);
/* The last max vectors of device i (position in devs), newest first;
 * returns how many were copied. */
int mi_health_latest(struct mi_health *h, int i, struct mi_health_vec *out,
		     int max);

/* One line per vector, text ("cpu compute=0.812 ...") or JSON. */
void mi_health_print(FILE *f, const struct mi_health_vec *v, bool json);

/*
 * The formulas (dims.c), on raw inputs; each returns a value in [0, 1].
 * Exposed for the tests and documented in Documentation/health.rst.
 */
double mi_health_clamp01(double x);
double mi_health_f_thermal(double t_mc, double throttle_mc, double ambient_mc);
double mi_health_f_power(double p_mw, double budget_mw);
double mi_health_f_bandwidth(double bytes_per_s, double bw);
double mi_health_f_queue(const double *depth, int n, double *mean,
			 double *var);
double mi_health_f_memory(double avail_kb, double total_kb, double psi_some,
			  bool have_psi);
double mi_health_f_compute(double busy, double clock_ratio, double ok_ratio);

#endif /* MI_HEALTH_H */
