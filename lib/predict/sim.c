// SPDX-License-Identifier: MIT
/*
 * The simulated NPU's timing model (Documentation/sim.rst, "Timing
 * model") for one node run as a one-op int8 job, and random personalities
 * to evaluate the predictor on chips it was never fitted on.  This is the
 * time metainfer_sim.ko reports as a job's busy_ns, computed here without
 * a kernel so that a test can draw hundreds of chips in a second.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "predict/predict.h"

static double bursts(double b, double burst)
{
	return ceil(b / burst) * burst;
}

/* log-uniform in [lo, hi] */
static double logu(uint64_t *s, double lo, double hi)
{
	return exp(log(lo) + mi_pred_uniform(s) * (log(hi) - log(lo)));
}

void mi_pred_simchip_random(struct mi_pred_simchip *c, uint64_t *seed)
{
	static const double burst[] = { 32, 64, 128, 256 };

	memset(c, 0, sizeof(*c));
	c->macs_int8 = round(logu(seed, 32, 4096));
	c->ops_int32 = round(logu(seed, 8, 64));
	c->clock_hz = logu(seed, 200e6, 1.5e9);
	c->dma_bw = logu(seed, 0.1e9, 16e9);
	c->burst = burst[mi_pred_rand(seed) % 4];
	c->sram = round(logu(seed, 64 << 10, 4 << 20));
	c->launch_ns = logu(seed, 1000, 20000);
	c->dw_eff_pct = 10 + 90 * mi_pred_uniform(seed);
	c->nchw_preferred = mi_pred_rand(seed) & 1;
	snprintf(c->name, sizeof(c->name), "sim.%.0fx%.0fM.%.1fG",
		 c->macs_int8, c->clock_hz / 1e6, c->dma_bw / 1e9);
}

double mi_pred_simchip_ns(const struct mi_pred_simchip *c,
			  const struct mi_pred_node *n)
{
	/* int8 tensors: a quarter of the fp32 model's bytes */
	double in = n->in_bytes / 4, w = n->w_bytes / 4, out = n->out_bytes / 4;
	double work, compute, dma, tiling = 0, layout = 0, ws = in + w + out;
	bool convlike = n->cls <= MI_PC_GEMM;

	switch (n->cls) {
	case MI_PC_CONV:
	case MI_PC_CONV1X1:
	case MI_PC_DWCONV:
	case MI_PC_GEMM:
	case MI_PC_POOL:
	case MI_PC_ELTWISE:
		work = n->macs;
		break;
	case MI_PC_DATA:
		work = 0; /* a copy */
		break;
	default:
		return -1; /* not an accelerator op: runs on the CPU */
	}
	compute = work / (c->macs_int8 * c->clock_hz) * 1e9;
	if (n->cls == MI_PC_DWCONV)
		compute *= 100 / c->dw_eff_pct;
	dma = bursts(ws, c->burst) / c->dma_bw * 1e9;
	if (convlike && ws > c->sram)
		tiling = bursts((ceil(ws / c->sram) - 1) * fmin(in, w),
				c->burst) / c->dma_bw * 1e9;
	if (!c->nchw_preferred && (convlike || n->cls == MI_PC_POOL) &&
	    n->cls != MI_PC_GEMM)
		layout = bursts(2 * (in + out), c->burst) / c->dma_bw * 1e9;
	return c->launch_ns + fmax(compute, dma) + tiling + layout;
}

void mi_pred_simchip_dev(const struct mi_pred_simchip *c,
			 struct mi_pred_dev *d)
{
	memset(d, 0, sizeof(*d));
	snprintf(d->name, sizeof(d->name), "%s", c->name);
	d->caps.macs_per_s = c->macs_int8 * c->clock_hz;
	/* the roofline sees int8 bytes through the fp32 features */
	d->caps.bytes_per_s = c->dma_bw * 4;
	d->caps.launch_ns = c->launch_ns; /* a launch-cost probe */
	d->caps.link_bytes_per_s = c->dma_bw;
}
