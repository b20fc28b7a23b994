// SPDX-License-Identifier: MIT
/*
 * lib/health vectors into the live layer: the one place where the
 * scheduler sees lib/health's struct, so that live.c stays fed by plain
 * registry samples (tests and benchmarks inject those directly).
 */
#include <errno.h>

#include "health/health.h"
#include "live.h"
#include "sched-impl.h"

int mi_live_push_health(struct mi_live *l, int dev,
			const struct mi_health_vec *v)
{
	struct mi_reg_sample s = { .ts_ns = (int64_t)v->mono_ns };
	struct mi_device_view dv;
	int ret;

	ret = mi_registry_device(mi_live_registry(l), dev, &dv);
	if (ret)
		return ret;
	if (dv.lost)
		return 0;	/* lost for good: its samples mean nothing */
	if (v->flags & (MI_HEALTH_F_LOST | MI_HEALTH_F_GONE)) {
		ret = mi_live_device_lost(l, dev);
		return ret ? ret : 1;
	}
	for (int k = 0; k < MI_HEALTH_NDIM && k < MI_REG_NDIM; k++) {
		if (!mi_health_has(v, k))
			continue;
		s.present |= 1u << k;
		s.value[k] = k == MI_HEALTH_BANDWIDTH ? 1.0 - v->v[k] : v->v[k];
	}
	if (v->raw_present & (1ull << MI_HRAW_QUEUE_DEPTH)) {
		s.raw_present |= 1u << MI_REG_RAW_QUEUE_DEPTH;
		s.raw[MI_REG_RAW_QUEUE_DEPTH] = v->raw[MI_HRAW_QUEUE_DEPTH];
	}
	if (v->raw_present & (1ull << MI_HRAW_TEMP_MC)) {
		s.raw_present |= 1u << MI_REG_RAW_TEMP_MC;
		s.raw[MI_REG_RAW_TEMP_MC] = v->raw[MI_HRAW_TEMP_MC];
	}
	if (v->raw_present & (1ull << MI_HRAW_POWER_MW)) {
		s.raw_present |= 1u << MI_REG_RAW_POWER_MW;
		s.raw[MI_REG_RAW_POWER_MW] = v->raw[MI_HRAW_POWER_MW];
	}
	if (!s.present && !s.raw_present)
		return 0;
	return mi_live_push(l, dev, &s);
}
