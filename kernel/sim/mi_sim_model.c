// SPDX-License-Identifier: GPL-2.0-only
/*
 * metainfer_sim: timing and thermal models (integer arithmetic only).
 *
 * Formulas are documented in Documentation/sim.rst; keep both in sync.
 */

#include <linux/kernel.h>
#include <linux/math64.h>
#include <linux/overflow.h>
#include <linux/bitmap.h>

#include "mi_sim.h"

/**
 * mi_sim_muldiv() - a * b / c, saturating instead of faulting
 * @a: first factor
 * @b: second factor
 * @c: divisor; 0 saturates
 *
 * x86's mul_u64_u64_div_u64() raises #DE when the quotient does not fit;
 * this one never does.
 *
 * Return: floor(a * b / c), or U64_MAX if that does not fit in 64 bits.
 */
u64 mi_sim_muldiv(u64 a, u64 b, u64 c)
{
	u64 prod, q, r, hi;

	if (!c)
		return U64_MAX;
	if (!check_mul_overflow(a, b, &prod))
		return div64_u64(prod, c);
	/* a * b = (q * c + r) * b = q * b * c + r * b */
	q = div64_u64_rem(a, c, &r);
	if (check_mul_overflow(q, b, &hi))
		return U64_MAX;
	if (check_mul_overflow(r, b, &prod))
		return U64_MAX; /* r < c, so only with absurd b and c */
	if (check_add_overflow(hi, div64_u64(prod, c), &q))
		return U64_MAX;
	return q;
}

/* Time to move @bytes over the DMA port, rounded up to whole bursts. */
static u64 mi_sim_dma_ns(const struct mi_sim_personality *p, u64 bytes)
{
	u64 burst = max_t(u64, p->dma_burst, 1);
	u64 bursts = div64_u64(bytes, burst) + (bytes % burst ? 1 : 0);

	if (!bytes)
		return 0;
	return mi_sim_muldiv(mi_sim_muldiv(bursts, burst, 1), NSEC_PER_SEC,
			     p->dma_bw);
}

/* MACs (or element operations) per cycle for operands of @esize bytes. */
static u32 mi_sim_macs_per_cycle(const struct mi_sim_personality *p, u32 esize)
{
	u32 r;

	switch (esize) {
	case 1:
		r = p->macs_int8;
		break;
	case 2:
		r = p->macs_int16;
		break;
	default:
		r = p->macs_int32;
		break;
	}
	return r ?: 1; /* no vector path: one operation per cycle */
}

/**
 * mi_sim_op_time() - modelled time of one op
 * @p: personality
 * @clock_hz: current (possibly throttled) core clock
 * @c: what the op does (MACs, bytes, layout, ...)
 * @b: filled with the breakdown of the result
 *
 * t = max(compute, dma) + tiling + layout, where
 *   compute = work / (macs_per_cycle[esize] * clock) * 100 / dw_eff_pct
 *             (the last factor for depthwise convolutions only; a
 *             macs_per_cycle of 0 counts as 1),
 *   dma     = (in + weights + out - in_sram - out_sram) bytes / dma_bw,
 *             rounded up to bursts (on-chip intermediates move no bytes),
 *   tiling  = (ceil(ws / sram) - 1) * min(in, weights) bytes / dma_bw
 *             when the working set ws = in + weights + out exceeds SRAM
 *             (ops with weights only; streaming ops need no re-fetch),
 *   layout  = 2 * (in + out) bytes / dma_bw when the op's activation
 *             layout differs from the preferred one (a transpose pass
 *             reads and writes each tensor once more).
 *
 * Return: modelled nanoseconds (saturating).
 */
u64 mi_sim_op_time(const struct mi_sim_personality *p, u64 clock_hz,
		   const struct mi_sim_opcost *c, struct mi_sim_opbreak *b)
{
	u64 mpc = mi_sim_macs_per_cycle(p, c->esize);
	u64 io, ws, tiles, t;

	memset(b, 0, sizeof(*b));
	if (c->work) {
		b->compute_ns = mi_sim_muldiv(c->work, NSEC_PER_SEC,
					      mpc * max_t(u64, clock_hz, 1));
		if (c->depthwise)
			b->compute_ns = mi_sim_muldiv(b->compute_ns, 100,
						      p->dw_eff_pct ?: 1);
	}
	io = mi_sim_sat_add(mi_sim_sat_add(c->in_bytes, c->w_bytes),
			    c->out_bytes);
	ws = io;
	b->dma_ns = mi_sim_dma_ns(
		p, io - min(io, mi_sim_sat_add(c->in_sram, c->out_sram)));
	if (c->w_bytes && ws > p->sram_bytes && p->sram_bytes) {
		tiles = div64_u64(ws + p->sram_bytes - 1, p->sram_bytes);
		b->refetch_bytes = mi_sim_muldiv(
			tiles - 1, min(c->in_bytes, c->w_bytes), 1);
		b->tiling_ns = mi_sim_dma_ns(p, b->refetch_bytes);
	}
	if (c->layout_sensitive && c->layout != p->layout) {
		b->layout_bytes = mi_sim_muldiv(
			mi_sim_sat_add(c->in_bytes, c->out_bytes), 2, 1);
		b->layout_ns = mi_sim_dma_ns(p, b->layout_bytes);
	}
	t = max(b->compute_ns, b->dma_ns);
	t = mi_sim_sat_add(t, b->tiling_ns);
	return mi_sim_sat_add(t, b->layout_ns);
}

/* Working set of an op: every tensor it touches, as the model counts them. */
static u64 mi_sim_ws(const struct mi_sim_opcost *c)
{
	return mi_sim_sat_add(mi_sim_sat_add(c->in_bytes, c->w_bytes),
			      c->out_bytes);
}

/**
 * mi_sim_job_time() - modelled time and statistics of a whole job
 * @p: personality
 * @clock_hz: current (possibly throttled) core clock
 * @ops: the job's ops
 * @n: number of ops
 * @casc: from mi_sim_cascade_scan(): op outputs that qualify to stay on chip
 * @js: filled with the job's statistics
 * @work: filled with the sum of the ops' work (for the power model)
 * @sram_kept: filled with the bytes of intermediates kept in SRAM
 *
 * T = launch_ns + sum of the ops' times.  The output of op k stays in
 * SRAM (no DMA out for op k, no DMA in for op k+1) when it qualifies and
 * the working sets of both op k and op k+1 fit in SRAM:
 * in + weights + out <= sram_bytes for each (Documentation/sim.rst,
 * "On-chip intermediates").
 *
 * Return: T in nanoseconds (saturating, at most S64_MAX / 4).
 */
u64 mi_sim_job_time(const struct mi_sim_personality *p, u64 clock_hz,
		    const struct mi_op *ops, u32 n, const unsigned long *casc,
		    struct mi_job_stats *js, u64 *work, u64 *sram_kept)
{
	struct mi_sim_opcost c, next;
	struct mi_sim_opbreak b;
	u64 total = p->launch_ns, t, in_c = 0;
	bool keep;
	u32 i;

	memset(js, 0, sizeof(*js));
	*work = 0;
	*sram_kept = 0;
	if (n)
		mi_sim_op_cost(&ops[0], &next);
	for (i = 0; i < n; i++) {
		c = next;
		keep = false;
		if (i + 1 < n) {
			mi_sim_op_cost(&ops[i + 1], &next);
			keep = test_bit(i, casc) &&
			       mi_sim_ws(&c) <= p->sram_bytes &&
			       mi_sim_ws(&next) <= p->sram_bytes;
		}
		c.in_sram = min(in_c, c.in_bytes);
		c.out_sram = keep ? c.out_bytes : 0;
		in_c = keep ? mi_sim_cascade_bytes(&ops[i + 1],
						   &ops[i].t[MI_T_OUT]) :
			      0;
		t = mi_sim_op_time(p, clock_hz, &c, &b);
		/* ktime arithmetic in the engine must not overflow */
		total = min_t(u64, mi_sim_sat_add(total, t), S64_MAX / 4);
		*work = mi_sim_sat_add(*work, c.work);
		*sram_kept = mi_sim_sat_add(*sram_kept, c.out_sram);
		js->macs += ops[i].macs;
		js->dma_bytes_in += c.in_bytes - c.in_sram + c.w_bytes +
				    b.refetch_bytes + b.layout_bytes / 2;
		js->dma_bytes_out +=
			c.out_bytes - c.out_sram + b.layout_bytes / 2;
		js->stall_ns += t - min(t, b.compute_ns);
	}
	js->busy_ns = total;
	return total;
}

/* 2^(-i/16) in Q16, i = 0..16 */
static const u32 mi_sim_exp2_tab[17] = {
	65536, 62757, 60097, 57549, 55109, 52773, 50535, 48393, 46341,
	44376, 42495, 40693, 38968, 37316, 35734, 34219, 32768,
};

/**
 * mi_sim_exp_neg() - e^(-x) in Q16 fixed point
 * @x_q16: x >= 0 in Q16
 *
 * Computed as 2^(-x * log2(e)) with a 17-entry table and linear
 * interpolation; the absolute error is below 3e-4.
 *
 * Return: e^(-x) in Q16, 0..65536.
 */
u32 mi_sim_exp_neg(u64 x_q16)
{
	u64 y, f;
	u32 k, i, lo, hi, v;

	if (x_q16 >= (u64)32 << 16)
		return 0;
	y = (x_q16 * 94548) >> 16; /* log2(e) in Q16 */
	k = y >> 16;
	if (k >= 17)
		return 0;
	f = y & 0xffff;
	i = f >> 12;
	lo = mi_sim_exp2_tab[i];
	hi = mi_sim_exp2_tab[i + 1];
	v = lo - (u32)(((u64)(lo - hi) * (f & 0xfff)) >> 12);
	return v >> k;
}

/**
 * mi_sim_thermal_at() - temperature after a constant-power interval
 * @p: personality (ambient, thermal resistance, time constant)
 * @temp_mc: temperature at the start, m°C
 * @power_mw: power over the interval, mW
 * @dt_ns: length of the interval
 *
 * First-order model: the steady state is Tss = ambient + P * Rth and
 * T(t + dt) = Tss + (T(t) - Tss) * e^(-dt / tau).
 *
 * Return: temperature at the end of the interval, m°C.
 */
s64 mi_sim_thermal_at(const struct mi_sim_personality *p, s64 temp_mc,
		      u32 power_mw, u64 dt_ns)
{
	s64 tss =
		p->ambient_mc + div_u64((u64)power_mw * p->rth_mc_per_w, 1000);
	u64 x = mi_sim_muldiv(dt_ns, 65536,
			      (u64)max_t(u32, p->tau_ms, 1) * NSEC_PER_MSEC);
	s64 d = temp_mc - tss;
	u32 e = mi_sim_exp_neg(x);

	/* |d| < 2^40 m°C, e <= 2^16: the product fits in s64 */
	d = clamp_t(s64, d, -(1LL << 40), 1LL << 40);
	return tss + div_s64(d * e, 65536);
}

/**
 * mi_sim_power_mw() - power drawn while running a job
 * @p: personality
 * @macs: MACs the job executes
 * @busy_ns: modelled duration of the job
 *
 * P = idle + fj_per_mac * macs / busy_ns / 1000 (1 fJ/ns = 1 µW).
 *
 * Return: power in mW, at most U32_MAX.
 */
u32 mi_sim_power_mw(const struct mi_sim_personality *p, u64 macs, u64 busy_ns)
{
	u64 dyn = mi_sim_muldiv(macs, p->fj_per_mac,
				mi_sim_muldiv(max_t(u64, busy_ns, 1), 1000, 1));

	return min_t(u64, (u64)p->idle_mw + dyn, U32_MAX);
}
