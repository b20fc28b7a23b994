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

/* A resolved tensor of buffer @bo at byte @off (no memory behind it). */
static struct mi_tensor ut_t(u32 bo, u64 off, u32 dtype, u32 layout, u32 ndim,
			     u32 s0, u32 s1, u32 s2, u32 s3)
{
	struct mi_tensor t = { 0 };
	u32 sh[4] = { s0, s1, s2, s3 };

	t.bo_index = bo;
	t.dtype = dtype;
	t.layout = layout;
	t.ndim = ndim;
	memcpy(t.shape, sh, sizeof(sh));
	ut_resolve(&t);
	t.data = (void *)(uintptr_t)(0x100000 * (bo + 1) + off);
	t.span = t.elems * t.esize;
	return t;
}

#define NHWC_I8(bo, off, h, w, c)                                             \
	ut_t(bo, off, DRM_METAINFER_DTYPE_INT8, DRM_METAINFER_LAYOUT_NHWC, 4, \
	     1, h, w, c)
#define VEC_I32(bo, off, n)                                                  \
	ut_t(bo, off, DRM_METAINFER_DTYPE_INT32, DRM_METAINFER_LAYOUT_PLAIN, \
	     1, n, 0, 0, 0)

/* 3x3 conv, 16 -> 16 channels, 16x16 int8 NHWC, requantized per tensor. */
static void ut_conv(struct mi_op *op, struct mi_tensor in, u64 w_off,
		    struct mi_tensor out)
{
	memset(op, 0, sizeof(*op));
	op->op = DRM_METAINFER_OP_CONV2D;
	op->flags = DRM_METAINFER_OP_F_REQUANT;
	op->u.conv2d.groups = 1;
	op->t[MI_T_IN0] = in;
	op->t[MI_T_IN1] = ut_t(1, w_off, DRM_METAINFER_DTYPE_INT8,
			       DRM_METAINFER_LAYOUT_NHWC, 4, 16, 3, 3, 16);
	op->t[MI_T_MULT] = VEC_I32(1, w_off + 4096, 1);
	op->t[MI_T_SHIFT] = VEC_I32(1, w_off + 4100, 1);
	op->t[MI_T_OUT] = out;
	op->tensor_mask = BIT(MI_T_IN0) | BIT(MI_T_IN1) | BIT(MI_T_OUT) |
			  BIT(MI_T_MULT) | BIT(MI_T_SHIFT);
	op->macs = 16 * 16 * 16 * 16 * 9;
}

static void ut_relu(struct mi_op *op, struct mi_tensor in, struct mi_tensor out)
{
	memset(op, 0, sizeof(*op));
	op->op = DRM_METAINFER_OP_RELU;
	op->t[MI_T_IN0] = in;
	op->t[MI_T_OUT] = out;
	op->tensor_mask = BIT(MI_T_IN0) | BIT(MI_T_OUT);
}

static void ut_expect(bool ok, const char *what, double got, double want);

/*
 * On-chip intermediates (Documentation/sim.rst), hand-computed for
 * conv -> relu -> conv on 16x16x16 int8 tensors (4096 bytes each; conv
 * weights 2304 + 8 bytes of requant parameters; 589824 MACs per conv) at
 * 256 MACs/cycle, 500 MHz, 0.5 GB/s, bursts of 128 bytes, no launch cost:
 *   conv alone:    ws = 4096 + 2312 + 4096 = 10504; dma 83 bursts =
 *                  10624 B = 21248 ns > compute 4608 ns
 *   relu alone:    dma 8192 B = 16384 ns
 *   conv, out kept in SRAM / conv, in from SRAM: dma 6408 -> 51 bursts =
 *                  6528 B = 13056 ns;  relu, both on chip: compute 32 ns
 */
static void ut_cascade(const struct mi_sim_personality *p0)
{
	struct mi_sim_personality p = *p0;
	unsigned long casc[MI_SIM_CASC_WORDS];
	struct mi_tensor x = NHWC_I8(0, 0, 16, 16, 16);
	struct mi_tensor y1 = NHWC_I8(2, 0, 16, 16, 16);
	struct mi_tensor y2 = NHWC_I8(2, 8192, 16, 16, 16);
	struct mi_tensor z = NHWC_I8(2, 16384, 16, 16, 16);
	struct mi_job_stats js;
	static struct mi_op ops[4];
	u64 t, work, kept;
	u32 i;

	p.launch_ns = 0;
	ut_conv(&ops[0], x, 0, y1);
	ut_relu(&ops[1], y1, y2);
	ut_conv(&ops[2], y2, 8192, z);
	mi_sim_cascade_scan(ops, 3, casc);
	ut_expect(test_bit(0, casc) && test_bit(1, casc) && !test_bit(2, casc),
		  "chain qualifies", casc[0], 3);

	/* one job, SRAM = the conv's working set exactly: both stay on chip */
	p.sram_bytes = 10504;
	t = mi_sim_job_time(&p, p.clock_hz, ops, 3, casc, &js, &work, &kept);
	ut_expect(t == 13056 + 32 + 13056, "cascaded job time", t, 26144);
	ut_expect(js.busy_ns == t, "busy", js.busy_ns, t);
	ut_expect(js.dma_bytes_in == 6408 + 2312, "cascaded dma in",
		  js.dma_bytes_in, 8720);
	ut_expect(js.dma_bytes_out == 4096, "cascaded dma out",
		  js.dma_bytes_out, 4096);
	ut_expect(kept == 8192, "kept in SRAM", kept, 8192);
	ut_expect(js.stall_ns == (13056 - 4608) * 2, "cascaded stall",
		  js.stall_ns, (13056 - 4608) * 2);

	/* the same ops as three jobs: everything over DMA */
	for (t = 0, i = 0; i < 3; i++) {
		struct mi_job_stats j1;

		mi_sim_cascade_scan(&ops[i], 1, casc);
		t += mi_sim_job_time(&p, p.clock_hz, &ops[i], 1, casc, &j1,
				     &work, &kept);
		ut_expect(kept == 0, "single op keeps nothing", kept, 0);
	}
	ut_expect(t == 21248 + 16384 + 21248, "three jobs", t, 58880);

	/* one byte less SRAM: nothing stays on chip, the convs tile
	 * (2 tiles: re-fetch min(4096, 2312) = 2312 -> 19 bursts = 4864 ns)
	 */
	p.sram_bytes = 10503;
	mi_sim_cascade_scan(ops, 3, casc);
	t = mi_sim_job_time(&p, p.clock_hz, ops, 3, casc, &js, &work, &kept);
	ut_expect(kept == 0, "just over SRAM keeps nothing", kept, 0);
	ut_expect(t == 2 * (21248 + 4864) + 16384, "just over SRAM time", t,
		  68608);
	ut_expect(js.dma_bytes_in == 6408 * 2 + 4096 + 2 * 2312 &&
			  js.dma_bytes_out == 3 * 4096,
		  "just over SRAM dma", js.dma_bytes_in, 21536);

	/* a later op reading the intermediate keeps it in memory */
	p.sram_bytes = 1 << 20;
	ut_relu(&ops[3], y1, x);
	mi_sim_cascade_scan(ops, 4, casc);
	ut_expect(!test_bit(0, casc) && test_bit(1, casc), "later reader",
		  casc[0], 2);
	/* ... so does an overlapping view read later (part of y2) */
	ut_relu(&ops[3], NHWC_I8(2, 8192 + 4095, 1, 1, 1),
		NHWC_I8(0, 0, 1, 1, 1));
	mi_sim_cascade_scan(ops, 4, casc);
	ut_expect(test_bit(0, casc) && !test_bit(1, casc), "overlap read later",
		  casc[0], 1);
	/* a different view of the same bytes is not the intermediate */
	ut_relu(&ops[1], NHWC_I8(2, 0, 16, 16, 8), NHWC_I8(2, 8192, 16, 16, 8));
	mi_sim_cascade_scan(ops, 2, casc);
	ut_expect(!test_bit(0, casc), "other view", casc[0], 0);
	/* in place (relu y1 -> y1) still feeds the next op from SRAM */
	ut_relu(&ops[1], y1, y1);
	ut_conv(&ops[2], y1, 8192, z);
	mi_sim_cascade_scan(ops, 3, casc);
	ut_expect(test_bit(0, casc) && test_bit(1, casc), "in place", casc[0],
		  3);
	/* gemm's b (a weight operand) is not fed from SRAM */
	ops[1].op = DRM_METAINFER_OP_GEMM;
	ops[1].t[MI_T_IN1] = y1;
	ops[1].t[MI_T_IN0] = x;
	ops[1].tensor_mask |= BIT(MI_T_IN1);
	mi_sim_cascade_scan(ops, 2, casc);
	ut_expect(!test_bit(0, casc), "gemm weight operand", casc[0], 0);
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
	ut_cascade(&p);
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
