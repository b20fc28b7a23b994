// SPDX-License-Identifier: MIT
/*
 * The six dimensions' formulas and the vector's printed forms.  Each
 * formula takes raw readings and returns a value in [0, 1]; which source
 * feeds which input is in sources (cpu.c, accel.c), the definitions with
 * their reasons in Documentation/health.rst.
 */
#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "health/health.h"

const char *const mi_health_dim_names[MI_HEALTH_NDIM] = {
	[MI_HEALTH_COMPUTE] = "compute",
	[MI_HEALTH_MEMORY] = "memory",
	[MI_HEALTH_BANDWIDTH] = "bandwidth",
	[MI_HEALTH_THERMAL] = "thermal",
	[MI_HEALTH_POWER] = "power",
	[MI_HEALTH_QUEUE] = "queue",
};
static_assert(sizeof(mi_health_dim_names) / sizeof(mi_health_dim_names[0]) ==
		      MI_HEALTH_NDIM,
	      "a name per dimension");

const char *const mi_health_raw_names[MI_HEALTH_RAW_COUNT] = {
	[MI_HRAW_BUSY] = "busy",
	[MI_HRAW_CLOCK_KHZ] = "clock_khz",
	[MI_HRAW_CLOCK_MAX_KHZ] = "clock_max_khz",
	[MI_HRAW_THROTTLE] = "throttle",
	[MI_HRAW_JOBS_DONE] = "jobs_done",
	[MI_HRAW_JOBS_FAILED] = "jobs_failed",
	[MI_HRAW_JOBS_TIMED_OUT] = "jobs_timed_out",
	[MI_HRAW_LOST] = "lost",
	[MI_HRAW_MEM_AVAIL_KB] = "mem_avail_kb",
	[MI_HRAW_MEM_TOTAL_KB] = "mem_total_kb",
	[MI_HRAW_CLIENT_MEM_KB] = "client_mem_kb",
	[MI_HRAW_CLIENTS] = "clients",
	[MI_HRAW_DMA_BPS] = "dma_bps",
	[MI_HRAW_DMA_BW] = "dma_bw",
	[MI_HRAW_STALL] = "stall",
	[MI_HRAW_TEMP_MC] = "temp_mc",
	[MI_HRAW_THROTTLE_MC] = "throttle_mc",
	[MI_HRAW_AMBIENT_MC] = "ambient_mc",
	[MI_HRAW_POWER_MW] = "power_mw",
	[MI_HRAW_POWER_BUDGET_MW] = "power_budget_mw",
	[MI_HRAW_QUEUE_DEPTH] = "queue_depth",
	[MI_HRAW_QUEUE_MEAN] = "queue_mean",
	[MI_HRAW_QUEUE_VAR] = "queue_var",
	[MI_HRAW_QUEUE_N] = "queue_n",
	[MI_HRAW_PSI_CPU] = "psi_cpu",
	[MI_HRAW_PSI_MEM] = "psi_mem",
	[MI_HRAW_PSI_IO] = "psi_io",
};
static_assert(sizeof(mi_health_raw_names) / sizeof(mi_health_raw_names[0]) ==
		      MI_HEALTH_RAW_COUNT,
	      "a name per raw value");

double mi_health_clamp01(double x)
{
	if (!(x > 0)) /* also NaN */
		return 0;
	return x > 1 ? 1 : x;
}

/* (throttle - T) / (throttle - ambient): 1 at ambient, 0 at throttle. */
double mi_health_f_thermal(double t_mc, double throttle_mc, double ambient_mc)
{
	if (throttle_mc <= ambient_mc)
		return t_mc < throttle_mc ? 1 : 0;
	return mi_health_clamp01((throttle_mc - t_mc) / (throttle_mc - ambient_mc));
}

/* 1 - P / budget: the share of the sustainable power still unused. */
double mi_health_f_power(double p_mw, double budget_mw)
{
	if (budget_mw <= 0)
		return 0;
	return mi_health_clamp01(1 - p_mw / budget_mw);
}

/* bytes/s moved over the device's bandwidth. */
double mi_health_f_bandwidth(double bytes_per_s, double bw)
{
	if (bw <= 0)
		return 0;
	return mi_health_clamp01(bytes_per_s / bw);
}

/*
 * 1 / (1 + var / (mean + 1)) over the window: a steady queue (any depth)
 * gives 1; a queue that fills and drains between samples (an intermittent
 * stall) gives a low value even when every single depth is unremarkable.
 * Dividing by mean + 1 makes the index scale-free for deep queues
 * (Poisson-like arrivals, var = mean, give about 0.5).
 */
double mi_health_f_queue(const double *depth, int n, double *mean, double *var)
{
	double m = 0, s = 0;

	for (int i = 0; i < n; i++)
		m += depth[i];
	m = n ? m / n : 0;
	for (int i = 0; i < n; i++)
		s += (depth[i] - m) * (depth[i] - m);
	s = n ? s / n : 0;
	if (mean)
		*mean = m;
	if (var)
		*var = s;
	return mi_health_clamp01(1 / (1 + s / (m + 1)));
}

/* MemAvailable / MemTotal, scaled by the time nobody stalls on memory. */
double mi_health_f_memory(double avail_kb, double total_kb, double psi_some,
			  bool have_psi)
{
	double r;

	if (total_kb <= 0)
		return 0;
	r = avail_kb / total_kb;
	if (have_psi)
		r *= 1 - psi_some / 100;
	return mi_health_clamp01(r);
}

/* Idle share x clock share x share of jobs that finished well. */
double mi_health_f_compute(double busy, double clock_ratio, double ok_ratio)
{
	return mi_health_clamp01((1 - mi_health_clamp01(busy)) *
				 mi_health_clamp01(clock_ratio) *
				 mi_health_clamp01(ok_ratio));
}

void mi_health_print(FILE *f, const struct mi_health_vec *v, bool json)
{
	int i;

	if (!json) {
		fprintf(f, "%-8s seq=%-4" PRIu64 " t=%.3f", v->dev_name, v->seq,
			v->mono_ns / 1e9);
		for (i = 0; i < MI_HEALTH_NDIM; i++) {
			if (mi_health_has(v, i))
				fprintf(f, " %s=%.3f", mi_health_dim_names[i],
					v->v[i]);
			else
				fprintf(f, " %s=-", mi_health_dim_names[i]);
		}
		if (v->flags & MI_HEALTH_F_GONE)
			fprintf(f, " GONE");
		else if (v->flags & MI_HEALTH_F_LOST)
			fprintf(f, " LOST");
		fputc('\n', f);
		return;
	}
	fprintf(f, "{\"device\":\"%s\",\"index\":%d,\"seq\":%" PRIu64
		   ",\"mono_ns\":%" PRIu64,
		v->dev_name, v->dev_index, v->seq, v->mono_ns);
	if (v->dev_ns)
		fprintf(f, ",\"dev_ns\":%" PRIu64, v->dev_ns);
	else
		fprintf(f, ",\"dev_ns\":null");
	fprintf(f, ",\"interval_ns\":%" PRIu64 ",\"gone\":%s,\"lost\":%s",
		v->interval_ns, v->flags & MI_HEALTH_F_GONE ? "true" : "false",
		v->flags & MI_HEALTH_F_LOST ? "true" : "false");
	for (i = 0; i < MI_HEALTH_NDIM; i++) {
		if (mi_health_has(v, i))
			fprintf(f, ",\"%s\":%.6g", mi_health_dim_names[i],
				v->v[i]);
		else
			fprintf(f, ",\"%s\":null", mi_health_dim_names[i]);
	}
	fprintf(f, ",\"raw\":{");
	for (i = 0; i < MI_HEALTH_RAW_COUNT; i++)
		if (v->raw_present & (1ull << i))
			fprintf(f, "%s\"%s\":%.10g",
				(v->raw_present & ((1ull << i) - 1)) ? "," : "",
				mi_health_raw_names[i], v->raw[i]);
	fprintf(f, "}}\n");
}
