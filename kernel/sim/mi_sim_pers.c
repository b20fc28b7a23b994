// SPDX-License-Identifier: GPL-2.0-only
/*
 * metainfer_sim: personalities (named presets) and key=value overrides.
 *
 * The presets model Arm Ethos-U NPUs as configured by Arm's Vela compiler
 * (ethosu/config_files/Arm/vela.ini): core clock, off-chip port bandwidth
 * (clock * clock_scale * bus width) and burst length, dedicated SRAM arena
 * size, MACs per cycle of the product range.  Energy, thermal and
 * depthwise-efficiency figures are not published by Arm; the values used
 * here are stated assumptions (see Documentation/sim.rst).
 */

#include <linux/kernel.h>
#include <linux/string.h>
#include <linux/ctype.h>
#include <linux/seq_file.h>

#include "mi_sim.h"

#define MI_SIM_NHWC MI_SIM_LAYOUT_NHWC
#define MI_SIM_NCHW MI_SIM_LAYOUT_NCHW

static const struct mi_sim_personality mi_sim_presets[] = {
	{
		/* Ethos-U55-128, Deep Embedded: 200 MHz, Flash 0.1 GB/s */
		.name = "ethos-u55-deep",
		.macs_int8 = 128,
		.macs_int16 = 64,
		.macs_int32 = 8,
		.clock_hz = 200000000,
		.sram_bytes = 393216,
		.dma_bw = 100000000,
		.dma_burst = 128,
		.layout = MI_SIM_NHWC,
		.op_mask = MI_SIM_ALL_OPS,
		.queues = 2,
		.dw_eff_pct = 25,
		.rth_mc_per_w = 60000,
		.ambient_mc = 25000,
		.throttle_mc = 85000,
		.tau_ms = 2000,
		.fj_per_mac = 500,
		.idle_mw = 5,
		.launch_ns = 5000,
	},
	{
		/* Ethos-U55-256, High-End Embedded: 500 MHz, Flash 0.5 GB/s */
		.name = "ethos-u55-high",
		.macs_int8 = 256,
		.macs_int16 = 128,
		.macs_int32 = 16,
		.clock_hz = 500000000,
		.sram_bytes = 524288,
		.dma_bw = 500000000,
		.dma_burst = 128,
		.layout = MI_SIM_NHWC,
		.op_mask = MI_SIM_ALL_OPS,
		.queues = 2,
		.dw_eff_pct = 25,
		.rth_mc_per_w = 50000,
		.ambient_mc = 25000,
		.throttle_mc = 85000,
		.tau_ms = 2000,
		.fj_per_mac = 400,
		.idle_mw = 10,
		.launch_ns = 4000,
	},
	{
		/* Ethos-U65-256, Mid-End: 500 MHz, DRAM 3.75 GB/s burst 128 */
		.name = "ethos-u65-mid",
		.macs_int8 = 256,
		.macs_int16 = 128,
		.macs_int32 = 16,
		.clock_hz = 500000000,
		.sram_bytes = 393216,
		.dma_bw = 3750000000ULL,
		.dma_burst = 128,
		.layout = MI_SIM_NHWC,
		.op_mask = MI_SIM_ALL_OPS,
		.queues = 2,
		.dw_eff_pct = 25,
		.rth_mc_per_w = 40000,
		.ambient_mc = 25000,
		.throttle_mc = 85000,
		.tau_ms = 3000,
		.fj_per_mac = 350,
		.idle_mw = 20,
		.launch_ns = 3000,
	},
	{
		/* Ethos-U65-512, High-End: 1 GHz, DRAM 3.75 GB/s burst 128 */
		.name = "ethos-u65-high",
		.macs_int8 = 512,
		.macs_int16 = 256,
		.macs_int32 = 32,
		.clock_hz = 1000000000,
		.sram_bytes = 524288,
		.dma_bw = 3750000000ULL,
		.dma_burst = 128,
		.layout = MI_SIM_NHWC,
		.op_mask = MI_SIM_ALL_OPS,
		.queues = 2,
		.dw_eff_pct = 25,
		.rth_mc_per_w = 30000,
		.ambient_mc = 25000,
		.throttle_mc = 85000,
		.tau_ms = 3000,
		.fj_per_mac = 300,
		.idle_mw = 30,
		.launch_ns = 2000,
	},
	{
		/* Ethos-U65-512, Client-Server: 1 GHz, DRAM 12 GB/s burst 128 */
		.name = "ethos-u65-server",
		.macs_int8 = 512,
		.macs_int16 = 256,
		.macs_int32 = 32,
		.clock_hz = 1000000000,
		.sram_bytes = 524288,
		.dma_bw = 12000000000ULL,
		.dma_burst = 128,
		.layout = MI_SIM_NHWC,
		.op_mask = MI_SIM_ALL_OPS,
		.queues = 2,
		.dw_eff_pct = 25,
		.rth_mc_per_w = 20000,
		.ambient_mc = 25000,
		.throttle_mc = 85000,
		.tau_ms = 4000,
		.fj_per_mac = 300,
		.idle_mw = 50,
		.launch_ns = 2000,
	},
	{
		/*
		 * Not an Ethos-U: a DSP-like vector engine that prefers NCHW,
		 * runs depthwise at full rate and int32 too, with a large
		 * SRAM but few MACs.  Its figures are assumptions chosen to
		 * differ from the Ethos-U presets along every axis.
		 */
		.name = "dsp-nchw",
		.macs_int8 = 64,
		.macs_int16 = 32,
		.macs_int32 = 16,
		.clock_hz = 800000000,
		.sram_bytes = 2097152,
		.dma_bw = 6400000000ULL,
		.dma_burst = 64,
		.layout = MI_SIM_NCHW,
		/* no table-lookup unit: LUT falls back to the host */
		.op_mask = MI_SIM_ALL_OPS & ~BIT(DRM_METAINFER_OP_LUT),
		.queues = 2,
		.dw_eff_pct = 100,
		.rth_mc_per_w = 25000,
		.ambient_mc = 25000,
		.throttle_mc = 90000,
		.tau_ms = 1000,
		.fj_per_mac = 900,
		.idle_mw = 40,
		.launch_ns = 8000,
	},
};

enum mi_sim_ftype { MI_SIM_F_U32, MI_SIM_F_U64, MI_SIM_F_S32, MI_SIM_F_LAYOUT };

struct mi_sim_field {
	const char *key;
	size_t off;
	enum mi_sim_ftype type;
	s64 min;
	s64 max;
	bool live; /* may change while the device is registered */
};

#define F(k, m, t, lo, hi, l)                                            \
	{                                                                \
		.key = k, .off = offsetof(struct mi_sim_personality, m), \
		.type = t, .min = lo, .max = hi, .live = l               \
	}

static const struct mi_sim_field mi_sim_fields[] = {
	F("macs_int8", macs_int8, MI_SIM_F_U32, 1, 1 << 20, false),
	F("macs_int16", macs_int16, MI_SIM_F_U32, 0, 1 << 20, false),
	F("macs_int32", macs_int32, MI_SIM_F_U32, 0, 1 << 20, false),
	F("clock_hz", clock_hz, MI_SIM_F_U64, 1000, 100000000000LL, true),
	F("sram_bytes", sram_bytes, MI_SIM_F_U64, 1024, 1LL << 40, true),
	F("dma_bw", dma_bw, MI_SIM_F_U64, 1000, 1LL << 44, true),
	F("dma_burst", dma_burst, MI_SIM_F_U32, 1, 1 << 20, true),
	F("layout", layout, MI_SIM_F_LAYOUT, 0, 1, true),
	F("op_mask", op_mask, MI_SIM_F_U32, 0, MI_SIM_ALL_OPS, false),
	F("queues", queues, MI_SIM_F_U32, 1, MI_SIM_MAX_QUEUES, false),
	F("dw_eff_pct", dw_eff_pct, MI_SIM_F_U32, 1, 100, true),
	F("rth_mc_per_w", rth_mc_per_w, MI_SIM_F_U32, 0, 10000000, true),
	F("ambient_mc", ambient_mc, MI_SIM_F_S32, -50000, 150000, true),
	F("throttle_mc", throttle_mc, MI_SIM_F_S32, -50000, 250000, true),
	F("tau_ms", tau_ms, MI_SIM_F_U32, 1, 3600000, true),
	F("fj_per_mac", fj_per_mac, MI_SIM_F_U32, 0, 1000000000, true),
	F("idle_mw", idle_mw, MI_SIM_F_U32, 0, 1000000, true),
	F("launch_ns", launch_ns, MI_SIM_F_U32, 0, 1000000000, true),
};

#undef F

/**
 * mi_sim_pers_find() - look up a named preset
 * @name: preset name (exact match)
 *
 * Return: the preset, or NULL if there is none by that name.
 */
const struct mi_sim_personality *mi_sim_pers_find(const char *name)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(mi_sim_presets); i++)
		if (!strcmp(mi_sim_presets[i].name, name))
			return &mi_sim_presets[i];
	return NULL;
}

/**
 * mi_sim_pers_list() - print the names of all presets
 * @buf: sysfs page buffer
 *
 * Return: number of bytes written.
 */
ssize_t mi_sim_pers_list(char *buf)
{
	ssize_t n = 0;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(mi_sim_presets); i++)
		n += sysfs_emit_at(buf, n, "%s\n", mi_sim_presets[i].name);
	return n;
}

static int mi_sim_pers_set_one(struct mi_sim_personality *p, char *tok,
			       bool live_only)
{
	const struct mi_sim_field *f = NULL;
	char *val = strchr(tok, '=');
	void *dst;
	s64 v;
	size_t i;
	int ret;

	if (!val)
		return -EINVAL;
	*val++ = '\0';
	for (i = 0; i < ARRAY_SIZE(mi_sim_fields); i++)
		if (!strcmp(mi_sim_fields[i].key, tok))
			f = &mi_sim_fields[i];
	if (!f)
		return -EINVAL;
	if (live_only && !f->live)
		return -EBUSY;

	if (f->type == MI_SIM_F_LAYOUT) {
		if (!strcasecmp(val, "nchw"))
			v = MI_SIM_LAYOUT_NCHW;
		else if (!strcasecmp(val, "nhwc"))
			v = MI_SIM_LAYOUT_NHWC;
		else
			return -EINVAL;
	} else {
		ret = kstrtos64(val, 0, &v);
		if (ret)
			return ret;
		if (v < f->min || v > f->max)
			return -ERANGE;
	}

	dst = (u8 *)p + f->off;
	switch (f->type) {
	case MI_SIM_F_U32:
	case MI_SIM_F_LAYOUT:
		*(u32 *)dst = v;
		break;
	case MI_SIM_F_S32:
		*(s32 *)dst = v;
		break;
	case MI_SIM_F_U64:
		*(u64 *)dst = v;
		break;
	}
	return 0;
}

/**
 * mi_sim_pers_apply() - apply a list of key=value overrides
 * @p: personality to modify (only modified if every pair is valid)
 * @str: whitespace- or comma-separated key=value pairs; modified in place
 * @live_only: reject keys that cannot change on a registered device
 *
 * Return: 0, -EINVAL for an unknown key or malformed value, -ERANGE for a
 * value out of range, -EBUSY for a key that cannot change any more.
 */
int mi_sim_pers_apply(struct mi_sim_personality *p, char *str, bool live_only)
{
	struct mi_sim_personality tmp = *p;
	char *tok;
	int ret;

	while ((tok = strsep(&str, " \t\n,")) != NULL) {
		if (!*tok)
			continue;
		ret = mi_sim_pers_set_one(&tmp, tok, live_only);
		if (ret)
			return ret;
	}
	tmp.op_mask &= MI_SIM_ALL_OPS; /* bit 0 is no op */
	/* int8 is always advertised, so it needs a MAC rate */
	if (!tmp.macs_int8)
		return -EINVAL;
	*p = tmp;
	return 0;
}

/**
 * mi_sim_pers_show() - print a personality as key=value lines
 * @p: personality
 * @buf: sysfs page buffer
 *
 * Return: number of bytes written.
 */
ssize_t mi_sim_pers_show(const struct mi_sim_personality *p, char *buf)
{
	ssize_t n = sysfs_emit(buf, "name=%s\n", p->name);
	const struct mi_sim_field *f;
	const void *src;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(mi_sim_fields); i++) {
		f = &mi_sim_fields[i];
		src = (const u8 *)p + f->off;
		switch (f->type) {
		case MI_SIM_F_U32:
			n += sysfs_emit_at(buf, n, "%s=%u\n", f->key,
					   *(const u32 *)src);
			break;
		case MI_SIM_F_S32:
			n += sysfs_emit_at(buf, n, "%s=%d\n", f->key,
					   *(const s32 *)src);
			break;
		case MI_SIM_F_U64:
			n += sysfs_emit_at(buf, n, "%s=%llu\n", f->key,
					   *(const u64 *)src);
			break;
		case MI_SIM_F_LAYOUT:
			n += sysfs_emit_at(buf, n, "%s=%s\n", f->key,
					   *(const u32 *)src ==
							   MI_SIM_LAYOUT_NCHW ?
						   "nchw" :
						   "nhwc");
			break;
		}
	}
	return n;
}
