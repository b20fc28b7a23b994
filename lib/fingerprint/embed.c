// SPDX-License-Identifier: MIT
/*
 * The hardware embedding: a fixed-length vector per device (layout in
 * fingerprint.h).  Capabilities are what the device says (GET_PARAM, or
 * cpuid / sysfs for the CPU); probes are what it does (the "bw", "gemm",
 * "launch", "submit", "dw", "int8" curves the suite stored); feedback is
 * how a model's own kernels ran against what was expected.  Advertised
 * peaks alone cannot tell two chips apart whose burst length, SRAM or
 * depthwise unit differ; the probe curves can.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "cpu/cpu.h"
#include "device/device.h"
#include "fingerprint/fp-impl.h"

#define MAXP 64

static float lg(double v, double scale)
{
	return v > 0 ? (float)(log2(v + 1) / scale) : 0;
}

static float clampf(double v, double lo, double hi)
{
	return (float)(v < lo ? lo : v > hi ? hi : v);
}

/* Largest cache of cpu0 (sysfs), bytes; 0 if unknown. */
static uint64_t cpu_cache_bytes(void)
{
	uint64_t best = 0;

	for (int i = 0; i < 8; i++) {
		char path[96], buf[32];
		FILE *f;
		unsigned long v;
		char unit = 0;

		snprintf(path, sizeof(path),
			 "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(buf, sizeof(buf), f) &&
		    sscanf(buf, "%lu%c", &v, &unit) >= 1) {
			uint64_t b = v * (unit == 'K' ? 1024 : unit == 'M' ? 1 << 20 : 1);

			if (b > best)
				best = b;
		}
		fclose(f);
	}
	return best;
}

/* "cpu MHz" of the first processor, in kHz; 0 if absent. */
static uint64_t cpu_khz(void)
{
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[256];
	double mhz = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "cpu MHz", 7) && strchr(line, ':')) {
			mhz = atof(strchr(line, ':') + 1);
			break;
		}
	fclose(f);
	return (uint64_t)(mhz * 1000);
}

static void caps_part(struct mi_dev *d, float *v)
{
	const struct mi_dev_caps *c = &d->caps;
	uint64_t clock = c->clock_khz, macs = c->macs_per_cycle;
	uint64_t sram = c->sram_bytes;

	if (d->kind == MI_DEV_CPU) {
		int isa = mi_cpu_isa_native();

		clock = cpu_khz();
		sram = cpu_cache_bytes();
		/* fp32 MACs per cycle: two FMA ports of the vector width */
		macs = isa == MI_ISA_AVX512 ? 32 : isa == MI_ISA_AVX2 ? 16 : 4;
		v[11] = isa / 2.0f;
		v[12] = lg(mi_cpu_ncores(), 8);
	}
	v[0] = lg(clock, 24);
	v[1] = lg(macs, 16);
	v[2] = lg(c->dma_bw, 40);
	v[3] = lg(c->dma_burst, 16);
	v[4] = lg(sram, 32);
	v[5] = __builtin_popcountll(c->op_mask) / 12.0f;
	v[6] = __builtin_popcountll(c->dtype_mask) / 5.0f;
	v[7] = __builtin_popcountll(c->layout_mask) / 3.0f;
	v[8] = c->preferred_layout / 2.0f;
	v[9] = c->num_queues / 8.0f;
	v[10] = d->kind == MI_DEV_CPU;
	v[13] = lg((double)macs * clock * 1e3, 48);
	v[14] = c->api_version / 4.0f;
	v[15] = d->kind == MI_DEV_EMU;
}

/* y at x by linear interpolation in log2(x), clamped at the ends. */
static double curve_at(const struct mi_fp_probe *p, int n, double x)
{
	if (n == 0)
		return 0;
	if (x <= p[0].x)
		return p[0].y;
	for (int i = 1; i < n; i++)
		if (x <= p[i].x) {
			double a = log2(p[i - 1].x), b = log2(p[i].x);
			double t = b > a ? (log2(x) - a) / (b - a) : 0;

			return p[i - 1].y + t * (p[i].y - p[i - 1].y);
		}
	return p[n - 1].y;
}

static double curve_peak(const struct mi_fp_probe *p, int n, int *at)
{
	double best = 0;

	*at = 0;
	for (int i = 0; i < n; i++)
		if (p[i].y > best) {
			best = p[i].y;
			*at = i;
		}
	return best;
}

/* Smallest x reaching 90% of the peak. */
static double knee_sat(const struct mi_fp_probe *p, int n, double peak)
{
	for (int i = 0; i < n; i++)
		if (p[i].y >= 0.9 * peak)
			return p[i].x;
	return 0;
}

/* After the peak, the last x still above 70% of it when a later point
 * falls below (the SRAM / cache edge); 0 when nothing drops. */
static double knee_drop(const struct mi_fp_probe *p, int n, int at,
			double peak)
{
	for (int i = at + 1; i < n; i++)
		if (p[i].y < 0.7 * peak)
			return p[i - 1].x;
	return 0;
}

static double probe1(const struct mi_fp_probe *p, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(p[i].name, name))
			return p[i].y;
	return 0;
}

static int probes_part(struct mi_fp_db *db, struct mi_dev *d, float *v)
{
	struct mi_fp_probe *all = calloc(MAXP, sizeof(*all)), bw[MAXP], gm[MAXP];
	int n, nb = 0, ng = 0, at;
	double peak, gpeak;

	if (!all)
		return -ENOMEM;
	n = mi_fp_probes(db, d, NULL, all, MAXP);
	if (n < 0) {
		free(all);
		return n;
	}
	if (n > MAXP)
		n = MAXP;
	for (int i = 0; i < n; i++) {
		if (!strcmp(all[i].name, "bw"))
			bw[nb++] = all[i];
		else if (!strcmp(all[i].name, "gemm"))
			gm[ng++] = all[i];
	}
	if (!nb || !ng) {
		free(all);
		return mi_set_error(-ENOENT, "%s: no probes in the DB (run "
				    "metainfer fingerprint)", d->name);
	}
	/* sorted by x (ORDER BY name, x) */
	peak = curve_peak(bw, nb, &at);
	for (int i = 0; i < 8; i++)
		v[i] = peak > 0 ? clampf(curve_at(bw, nb, 64.0 * pow(8, i)) / peak,
					 0, 1) :
				  0;
	v[8] = lg(peak, 40);
	v[9] = lg(knee_sat(bw, nb, peak), 32);
	v[10] = lg(knee_drop(bw, nb, at, peak), 32);
	gpeak = curve_peak(gm, ng, &at);
	for (int i = 0; i < 6; i++)
		v[11 + i] = gpeak > 0 ? clampf(gm[i < ng ? i : ng - 1].y / gpeak, 0, 1) :
					0;
	v[17] = lg(gpeak, 48);
	v[18] = lg(knee_drop(gm, ng, at, gpeak), 16);
	v[19] = lg(probe1(all, n, "launch"), 32);
	v[20] = clampf(probe1(all, n, "dw"), 0, 2);
	v[21] = clampf(probe1(all, n, "int8") / 4, 0, 2);
	v[22] = peak > 0 ? clampf(bw[0].y / peak, 0, 1) : 0;
	v[23] = lg(probe1(all, n, "submit"), 32);
	free(all);
	return 0;
}

/* Family -> feedback group: conv, gemm, element-wise-like, other. */
static int group_of(int family)
{
	switch (family) {
	case MI_FP_CONV:
	case MI_FP_DWCONV:
		return 0;
	case MI_FP_GEMM:
		return 1;
	case MI_FP_POOL:
	case MI_FP_ELTWISE:
	case MI_FP_REORDER:
	case MI_FP_QUANT:
		return 2;
	default:
		return 3;
	}
}

static void feedback_part(const struct mi_fp_feedback *fb, int nfb, float *v)
{
	double sum[4] = { 0 }, sq[4] = { 0 };
	int cnt[4] = { 0 }, total = 0;

	for (int i = 0; i < nfb; i++) {
		double r;
		int g;

		if (fb[i].measured_ns <= 0 || fb[i].expected_ns <= 0)
			continue;
		r = log2(fb[i].measured_ns / fb[i].expected_ns);
		g = group_of(fb[i].family);
		sum[g] += r;
		sq[g] += r * r;
		cnt[g]++;
		total++;
	}
	for (int g = 0; g < 4; g++) {
		double m = cnt[g] ? sum[g] / cnt[g] : 0;

		v[g] = clampf(m / 4, -1, 1);
		if (g < 3)
			v[4 + g] = cnt[g] ? clampf(sqrt(fmax(sq[g] / cnt[g] - m * m, 0)) / 4,
						   0, 1) :
					    0;
	}
	v[7] = lg(total, 10);
}

int mi_fp_embedding(struct mi_fp_db *db, struct mi_dev *d,
		    const struct mi_fp_feedback *fb, int nfb, float *vec, int n)
{
	int err;

	if (!db || !d || !vec || nfb < 0 || (nfb && !fb))
		return mi_set_error(-EINVAL, "mi_fp_embedding: bad arguments");
	if (n < MI_FP_EMBED_DIM)
		return mi_set_error(-EINVAL, "mi_fp_embedding: %d floats, need %d",
				    n, MI_FP_EMBED_DIM);
	memset(vec, 0, MI_FP_EMBED_DIM * sizeof(*vec));
	caps_part(d, vec + MI_FP_EMBED_CAPS);
	err = probes_part(db, d, vec + MI_FP_EMBED_PROBES);
	if (err)
		return err;
	feedback_part(fb, nfb, vec + MI_FP_EMBED_FEEDBACK);
	return MI_FP_EMBED_DIM;
}
