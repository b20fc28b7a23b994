// SPDX-License-Identifier: GPL-2.0-only
/*
 * Userspace unit test of metainfer_sim's computation and models: compiles
 * mi_sim_exec.c and mi_sim_model.c unchanged against shim.h.
 *
 *   sim_ut op     read one op (format written by sim_ref.py) on stdin, run
 *                 mi_sim_exec_op() and print "ret R" then the output's
 *                 elements in logical (n, c, h, w) order
 *   sim_ut model  check the timing/thermal model against closed forms
 */
#include <stdlib.h>
#include <math.h>

#include "mi_sim.h"

/* Resolve a tensor like the core does: dense strides, logical view. */
static void ut_resolve(struct mi_tensor *t)
{
	static const int nhwc[4] = { 0, 3, 1, 2 };
	u64 st[4] = { 0 }, dense = 1;
	int k, all0 = 1, off;

	for (k = 0; k < 4; k++)
		if (t->stride[k])
			all0 = 0;
	for (k = (int)t->ndim - 1; k >= 0; k--) {
		st[k] = all0 ? dense : t->stride[k];
		dense *= t->shape[k];
	}
	for (k = t->ndim; k < 4; k++)
		t->shape[k] = 1;
	memcpy(t->stride, st, sizeof(st));
	t->elems = dense;
	t->esize = mi_dtype_size(t->dtype);
	if (t->layout == DRM_METAINFER_LAYOUT_NHWC) {
		for (k = 0; k < 4; k++) {
			t->dim[k] = t->shape[nhwc[k]];
			t->lstride[k] = st[nhwc[k]];
		}
		return;
	}
	off = 4 - (int)t->ndim;
	for (k = 0; k < 4; k++) {
		t->dim[k] = 1;
		t->lstride[k] = 0;
	}
	for (k = 0; k < (int)t->ndim; k++) {
		t->dim[k + off] = t->shape[k];
		t->lstride[k + off] = st[k];
	}
}

static int ut_op(void)
{
	static struct mi_op op;
	long long v[64], n, x;
	bool abort_run = false;
	int np, i, slot, ret;
	struct mi_tensor *t, *y;
	u32 *raw;
	u32 a, b, c, d;

	if (scanf("%d", &np) != 1 || np < 4 || np > 64)
		return 2;
	for (i = 0; i < np; i++)
		if (scanf("%lld", &v[i]) != 1)
			return 2;
	op.op = v[0];
	op.flags = v[1];
	op.out_min = v[2];
	op.out_max = v[3];
	/* the op's parameters follow its header as 32-bit words */
	raw = (u32 *)((char *)&op.u + sizeof(struct drm_metainfer_op_header));
	for (i = 4; i < np; i++)
		raw[i - 4] = (u32)v[i];
	while (scanf("%d", &slot) == 1 && slot >= 0 && slot < MI_T_COUNT) {
		t = &op.t[slot];
		if (scanf("%u %u %u", &t->dtype, &t->layout, &t->ndim) != 3 ||
		    t->ndim < 1 || t->ndim > 4)
			return 2;
		for (i = 0; i < 4; i++)
			if (scanf("%u", &t->shape[i]) != 1)
				return 2;
		for (i = 0; i < 4; i++)
			if (scanf("%llu",
				  (unsigned long long *)&t->stride[i]) != 1)
				return 2;
		if (scanf("%lld", &n) != 1 || n < 1)
			return 2;
		ut_resolve(t);
		t->data = calloc(n + 1, 4);
		if (!t->data)
			return 2;
		for (i = 0; i < n; i++) {
			if (scanf("%lld", &x) != 1)
				return 2;
			mi_tensor_set(t, i, x);
		}
		op.tensor_mask |= 1u << slot;
	}
	ret = mi_sim_exec_op(&op, &abort_run);
	printf("ret %d\n", ret);
	y = &op.t[MI_T_OUT];
	for (a = 0; a < y->dim[0]; a++)
		for (b = 0; b < y->dim[1]; b++)
			for (c = 0; c < y->dim[2]; c++)
				for (d = 0; d < y->dim[3]; d++)
					printf("%lld\n",
					       (long long)mi_tensor_get(
						       y,
						       mi_tensor_index(y, a, b,
								       c, d)));
	return 0;
}

static int fails;

static void ut_expect(bool ok, const char *what, double got, double want)
{
	if (!ok) {
		printf("FAIL %s: got %.6g want %.6g\n", what, got, want);
		fails++;
	}
}

static int ut_model(void)
{
	struct mi_sim_personality p = {
		.macs_int8 = 256,
		.macs_int16 = 128,
		.macs_int32 = 0,
		.clock_hz = 500000000,
		.sram_bytes = 524288,
		.dma_bw = 500000000,
		.dma_burst = 128,
		.layout = DRM_METAINFER_LAYOUT_NHWC,
		.dw_eff_pct = 25,
		.rth_mc_per_w = 50000,
		.ambient_mc = 25000,
		.tau_ms = 1000,
		.fj_per_mac = 400,
		.idle_mw = 10,
	};
	struct mi_sim_opcost c = { 0 };
	struct mi_sim_opbreak br;
	double maxabs = 0, e, g;
	s64 temp;
	u64 x, t;
	int i;

	for (x = 0; x < (24u << 16); x += 13) {
		e = exp(-(double)x / 65536.0);
		g = mi_sim_exp_neg(x) / 65536.0;
		maxabs = fmax(maxabs, fabs(g - e));
	}
	ut_expect(maxabs < 3e-4, "exp_neg max abs error", maxabs, 3e-4);

	/* 2 W for 1 s steps: T = 25 + 100 * (1 - e^-t) °C */
	temp = 25000;
	for (i = 1; i <= 5; i++) {
		temp = mi_sim_thermal_at(&p, temp, 2000, NSEC_PER_SEC);
		e = 25000 + 100000 * (1 - exp(-i));
		ut_expect(fabs(temp - e) < 100, "heating", temp, e);
	}
	/* then cooling at idle (10 mW -> T_ss = 25.5 °C) */
	temp = mi_sim_thermal_at(&p, temp, 10, 20 * NSEC_PER_SEC);
	ut_expect(llabs(temp - 25500) < 100, "cooling", temp, 25500);

	/* int8 op, compute bound: 1e6 MACs / 256 / 500 MHz = 7812 ns */
	c.work = 1000000;
	c.esize = 1;
	c.in_bytes = 1000;
	t = mi_sim_op_time(&p, p.clock_hz, &c, &br);
	ut_expect(br.compute_ns == 7812, "compute", br.compute_ns, 7812);
	/* 1000 bytes -> 8 bursts of 128 = 1024 bytes / 0.5 GB/s = 2048 ns */
	ut_expect(br.dma_ns == 2048, "dma", br.dma_ns, 2048);
	ut_expect(t == 7812, "max(compute, dma)", t, 7812);
	/* depthwise at 25 %: 4x the compute time */
	c.depthwise = true;
	t = mi_sim_op_time(&p, p.clock_hz, &c, &br);
	ut_expect(br.compute_ns == 31248, "depthwise", br.compute_ns, 31248);
	c.depthwise = false;
	/* half clock (throttled): twice the compute time */
	t = mi_sim_op_time(&p, p.clock_hz >> 1, &c, &br);
	ut_expect(br.compute_ns == 15625, "throttled", br.compute_ns, 15625);
	/* int16 at 128 MACs/cycle */
	c.esize = 2;
	t = mi_sim_op_time(&p, p.clock_hz, &c, &br);
	ut_expect(br.compute_ns == 15625, "int16", br.compute_ns, 15625);
	/* int32 with no rate: one operation per cycle */
	c.esize = 4;
	t = mi_sim_op_time(&p, p.clock_hz, &c, &br);
	ut_expect(br.compute_ns == 2000000, "int32 fallback", br.compute_ns,
		  2000000);

	/* working set 100000 + 600000 + 50000 > 512 KiB: 2 tiles, re-fetch
	 * min(in, w) = 100000 bytes (782 bursts = 100096 bytes: 200192 ns)
	 */
	memset(&c, 0, sizeof(c));
	c.esize = 1;
	c.in_bytes = 100000;
	c.w_bytes = 600000;
	c.out_bytes = 50000;
	c.layout_sensitive = true;
	c.layout = DRM_METAINFER_LAYOUT_NCHW;
	t = mi_sim_op_time(&p, p.clock_hz, &c, &br);
	ut_expect(br.refetch_bytes == 100000, "refetch", br.refetch_bytes,
		  100000);
	ut_expect(br.tiling_ns == 200192, "tiling", br.tiling_ns, 200192);
	/* layout: 2 * (100000 + 50000) = 300000 bytes -> 300032: 600064 ns */
	ut_expect(br.layout_ns == 600064, "layout", br.layout_ns, 600064);
	ut_expect(t == br.dma_ns + br.tiling_ns + br.layout_ns, "sum", t,
		  br.dma_ns + br.tiling_ns + br.layout_ns);
	c.layout = DRM_METAINFER_LAYOUT_NHWC;
	mi_sim_op_time(&p, p.clock_hz, &c, &br);
	ut_expect(br.layout_ns == 0, "preferred layout", br.layout_ns, 0);

	/* power: 1e12 MACs in 1 s at 400 fJ = 400 mW, + 10 mW idle */
	ut_expect(mi_sim_power_mw(&p, 1000000000000ULL, NSEC_PER_SEC) == 410,
		  "power", mi_sim_power_mw(&p, 1000000000000ULL, NSEC_PER_SEC),
		  410);
	/* saturation instead of a division fault */
	ut_expect(mi_sim_muldiv(U64_MAX, U64_MAX, 1) == U64_MAX, "saturate", 0,
		  0);
	ut_expect(mi_sim_muldiv(1ULL << 62, 1000, 1ULL << 40) == 4194304000ULL,
		  "muldiv", 0, 0);
	ut_expect(mi_sim_muldiv(5, 7, 0) == U64_MAX, "muldiv by 0", 0, 0);
	printf("model: %d failure(s)\n", fails);
	return fails ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "op"))
		return ut_op();
	if (argc == 2 && !strcmp(argv[1], "model"))
		return ut_model();
	fprintf(stderr, "usage: sim_ut op|model\n");
	return 2;
}
