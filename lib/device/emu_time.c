// SPDX-License-Identifier: MIT
/*
 * Modelled device time for emulated accelerators: the timing formulas of
 * metainfer_sim (Documentation/sim.rst, kernel/sim/mi_sim_model.c) in
 * floating point, per op of a command stream,
 *
 *   t_op = max(compute, dma) + tiling + layout,  T = launch_ns + sum t_op
 *   compute = work / (macs_per_cycle(esize) * clock)  (/ dw_eff for
 *             depthwise convolutions),
 *   dma     = (in + weights + out) bytes rounded up to bursts / dma_bw,
 *   tiling  = (ceil(ws / sram) - 1) * min(in, weights) / dma_bw when the
 *             working set ws exceeds SRAM (ops with weights only),
 *   layout  = 2 * (in + out) / dma_bw for a conv or pool whose layout is
 *             not the preferred one,
 *
 * without the sim's on-chip cascades.  It lets host tests give two
 * emulated chips the same advertised peaks and different hidden
 * parameters (burst, SRAM, depthwise efficiency), as real chips differ.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "device/device.h"
#include "device/mi_ref.h"
#include "internal.h"

static double numel(const struct drm_metainfer_tensor *t)
{
	double n = 1;

	for (unsigned int i = 0; i < t->ndim && i < 4; i++)
		n *= t->shape[i];
	return n;
}

static double tbytes(const struct drm_metainfer_tensor *t)
{
	return numel(t) * mi_ref_dtype_size(t->dtype);
}

static double dma_ns(const struct mi_dev_emu_timing *m, double bytes)
{
	double burst = m->dma_burst ? m->dma_burst : 1;

	if (bytes <= 0)
		return 0;
	return ceil(bytes / burst) * burst * 1e9 / (m->dma_bw ? m->dma_bw : 1);
}

static double op_ns(const struct mi_dev_emu_timing *m, double work,
		    unsigned int esize, bool dw, double in, double w, double out,
		    bool lay_sens, uint32_t layout)
{
	double mpc = m->macs_per_cycle ? m->macs_per_cycle : 1;
	double comp, t, ws = in + w + out;

	if (esize == 2)
		mpc /= 2;
	else if (esize >= 4)
		mpc /= 4;
	if (mpc < 1)
		mpc = 1;
	comp = work * 1e9 / (mpc * (m->clock_khz ? m->clock_khz : 1) * 1e3);
	if (dw)
		comp = comp * 100 / (m->dw_eff_pct ? m->dw_eff_pct : 1);
	t = fmax(comp, dma_ns(m, ws));
	if (w > 0 && m->sram_bytes && ws > m->sram_bytes)
		t += dma_ns(m, (ceil(ws / m->sram_bytes) - 1) * fmin(in, w));
	if (lay_sens && layout != m->preferred_layout)
		t += dma_ns(m, 2 * (in + out));
	return t;
}

uint64_t mi_dev_emu_time(const struct mi_dev_emu_timing *m, const void *cmds,
			 size_t size)
{
	const struct drm_metainfer_stream_header *sh = cmds;
	const uint8_t *p = cmds, *end = p + size;
	double total = m->launch_ns;

	if (size < sizeof(*sh))
		return (uint64_t)total;
	p += sizeof(*sh);
	for (uint32_t i = 0; i < sh->op_count && p + 16 <= end; i++) {
		const struct drm_metainfer_op_header *h = (const void *)p;

		if (h->size < sizeof(*h) || p + h->size > end)
			break;
		switch (h->op) {
		case DRM_METAINFER_OP_CONV2D: {
			const struct drm_metainfer_op_conv2d *c = (const void *)p;
			const struct drm_metainfer_tensor *o = &c->output;
			bool nhwc = c->input.layout == DRM_METAINFER_LAYOUT_NHWC;
			double kk = nhwc ? (double)c->weight.shape[1] * c->weight.shape[2] :
					   (double)c->weight.shape[2] * c->weight.shape[3];
			double cin = nhwc ? c->weight.shape[3] : c->weight.shape[1];
			uint32_t cin_all = nhwc ? c->input.shape[3] : c->input.shape[1];

			total += op_ns(m, numel(o) * cin * kk,
				       mi_ref_dtype_size(c->input.dtype),
				       c->groups > 1 && c->groups == cin_all,
				       tbytes(&c->input), tbytes(&c->weight),
				       tbytes(o), true, c->input.layout);
			break;
		}
		case DRM_METAINFER_OP_GEMM: {
			const struct drm_metainfer_op_gemm *g = (const void *)p;

			total += op_ns(m, numel(&g->output) * g->a.shape[1],
				       mi_ref_dtype_size(g->a.dtype), false,
				       tbytes(&g->a), tbytes(&g->b),
				       tbytes(&g->output), false, 0);
			break;
		}
		case DRM_METAINFER_OP_ADD:
		case DRM_METAINFER_OP_MUL: {
			const struct drm_metainfer_op_eltwise *e = (const void *)p;

			total += op_ns(m, numel(&e->output),
				       mi_ref_dtype_size(e->a.dtype), false,
				       tbytes(&e->a) + tbytes(&e->b), 0,
				       tbytes(&e->output), false, 0);
			break;
		}
		case DRM_METAINFER_OP_MAXPOOL:
		case DRM_METAINFER_OP_AVGPOOL: {
			const struct drm_metainfer_op_pool *q = (const void *)p;

			total += op_ns(m, numel(&q->output) * q->kernel_h * q->kernel_w,
				       mi_ref_dtype_size(q->input.dtype), false,
				       tbytes(&q->input), 0, tbytes(&q->output),
				       true, q->input.layout);
			break;
		}
		default: {
			/* relu/clip, requantize, copy, lut: input then output
			 * right after the op-specific head; take the sizes
			 * from the last two tensors of the shapes we know */
			const struct drm_metainfer_tensor *in, *out;

			if (h->op == DRM_METAINFER_OP_RELU || h->op == DRM_METAINFER_OP_CLIP) {
				const struct drm_metainfer_op_clip *c = (const void *)p;

				in = &c->input;
				out = &c->output;
			} else if (h->op == DRM_METAINFER_OP_REQUANTIZE) {
				const struct drm_metainfer_op_requantize *r = (const void *)p;

				in = &r->input;
				out = &r->output;
			} else if (h->op == DRM_METAINFER_OP_COPY) {
				const struct drm_metainfer_op_copy *c = (const void *)p;

				in = &c->input;
				out = &c->output;
			} else if (h->op == DRM_METAINFER_OP_LUT) {
				const struct drm_metainfer_op_lut *l = (const void *)p;

				in = &l->input;
				out = &l->output;
			} else {
				break;
			}
			total += op_ns(m, numel(out), mi_ref_dtype_size(in->dtype),
				       false, tbytes(in), 0, tbytes(out), false, 0);
			break;
		}
		}
		p += h->size;
	}
	return (uint64_t)fmin(total, 9e18);
}
