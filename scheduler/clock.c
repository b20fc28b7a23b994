// SPDX-License-Identifier: MIT
/*
 * Device clock -> CLOCK_MONOTONIC.  Each device stamps its samples with
 * its own clock (a counter that started at some unknown time and runs a
 * few ppm fast or slow).  From (device ts, host ts) pairs we fit
 * host = offset + slope * device over the last MI_CLOCK_WINDOW pairs with
 * the Theil-Sen estimator: slope = median of the pairwise slopes,
 * offset = median of host - slope * device.  Pairs whose host stamp came
 * late (scheduling delay, a slow read) are outliers that a least-squares
 * fit would follow; the medians ignore up to ~29% of them.
 *
 * Values are kept relative to the first pair (dev0, host0) so that the
 * doubles hold nanoseconds exactly for weeks of uptime.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sched-impl.h"

void mi_clock_fit_init(struct mi_clock_fit *c)
{
	memset(c, 0, sizeof(*c));
	c->slope = 1.0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median_sorted(double *v, uint32_t n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n & 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void clock_refit(struct mi_clock_fit *c)
{
	double slopes[MI_CLOCK_WINDOW * (MI_CLOCK_WINDOW - 1) / 2];
	double resid[MI_CLOCK_WINDOW];
	uint32_t ns = 0;

	for (uint32_t i = 0; i < c->n; i++)
		for (uint32_t j = i + 1; j < c->n; j++) {
			double dd = c->dev[j] - c->dev[i];

			if (fabs(dd) < 1.0)
				continue;
			slopes[ns++] = (c->host[j] - c->host[i]) / dd;
		}
	if (ns) {
		c->slope = median_sorted(slopes, ns);
		c->valid = true;
	}
	for (uint32_t i = 0; i < c->n; i++)
		resid[i] = c->host[i] - c->slope * c->dev[i];
	c->offset = median_sorted(resid, c->n);
}

int mi_clock_fit_add(struct mi_clock_fit *c, int64_t dev_ns, int64_t host_ns)
{
	if (!c->n && !c->next) {
		c->dev0 = dev_ns;
		c->host0 = host_ns;
	}
	c->dev[c->next] = (double)(dev_ns - c->dev0);
	c->host[c->next] = (double)(host_ns - c->host0);
	c->next = (c->next + 1) % MI_CLOCK_WINDOW;
	if (c->n < MI_CLOCK_WINDOW)
		c->n++;
	clock_refit(c);
	return 0;
}

int64_t mi_clock_to_host(const struct mi_clock_fit *c, int64_t dev_ns)
{
	if (!c->n)
		return dev_ns;
	return c->host0 +
	       (int64_t)llround(c->offset + c->slope * (double)(dev_ns - c->dev0));
}

double mi_clock_drift_ppm(const struct mi_clock_fit *c)
{
	return (c->slope - 1.0) * 1e6;
}
