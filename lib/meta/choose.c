// SPDX-License-Identifier: MIT
/*
 * The meta-controller: pick a configuration of a switchable model for one
 * device from the model's per-configuration tables (accuracy measured on
 * held-out data, latency per layer variant) and the device's embedding
 * and health vector.  The prediction model is in metainfer.h (above
 * mi_meta_choose) and Documentation/supernet.rst; it is deliberately
 * small: per-variant-kind scale factors are the device embedding, and
 * health scales latency so that a stressed device prefers cheap variants.
 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "meta/meta-impl.h"

enum { H_COMPUTE, H_MEMORY, H_BANDWIDTH, H_THERMAL, H_POWER, H_QUEUE };

static double dim(const struct mi_meta_device *d, int i, double absent)
{
	if (!d || !(d->health_present & (1u << i)))
		return absent;
	return d->health[i] < 0 ? 0 : d->health[i] > 1 ? 1 : d->health[i];
}

static double predict(const struct mi_switch *sw,
		      const struct mi_switch_config *c,
		      const struct mi_meta_device *d)
{
	double compute = fmax(dim(d, H_COMPUTE, 1), 0.05);
	double thermal = dim(d, H_THERMAL, 1);
	double bw = dim(d, H_BANDWIDTH, 0);
	double total = 0;

	for (int l = 0; l < sw->nlayers; l++) {
		const struct mi_switch_layer *L = &sw->layers[l];
		int k = c->choice[l];
		double scale = d && d->scale[L->kind[k]] > 0 ?
				       d->scale[L->kind[k]] : 1;
		uint64_t maxm = 0;

		for (int j = 0; j < L->nvar; j++)
			if (L->macs[j] > maxm)
				maxm = L->macs[j];
		double lat = d && d->latency_us ?
				     d->latency_us[l * MI_SWITCH_MAX_VARIANTS + k] :
				     L->lat_us[k];

		total += lat * scale / compute *
			 (1 + (1 - thermal) * (maxm ? (double)L->macs[k] / maxm :
						       1)) *
			 (1 + bw);
	}
	return total;
}

int mi_meta_choose(const struct mi_model *m, const struct mi_meta_device *dev,
		   const struct mi_meta_goal *goal, int *choice,
		   struct mi_meta_result *res)
{
	const struct mi_switch *sw;
	double floor = goal ? goal->min_accuracy : 0;
	double budget = goal ? goal->latency_budget_us : 0;
	int best = -1, most_acc = -1;
	double best_lat = 0;
	bool best_fits = false;

	if (!m || !choice)
		return mi_set_error(-EINVAL, "mi_meta_choose: NULL argument");
	sw = m->sw;
	if (!sw || !sw->ncfg)
		return mi_set_error(-ENOENT,
			"%s: no switchable layers with measured configurations",
			m->label);
	for (int i = 0; i < sw->ncfg; i++) {
		const struct mi_switch_config *c = &sw->cfg[i];
		double lat = predict(sw, c, dev);
		bool fits;

		if (most_acc < 0 || c->accuracy > sw->cfg[most_acc].accuracy)
			most_acc = i;
		if (c->accuracy < floor)
			continue;
		fits = budget <= 0 || lat <= budget;
		if (best < 0 || (fits && !best_fits)) {
			best = i, best_lat = lat, best_fits = fits;
			continue;
		}
		if (fits != best_fits)
			continue;
		if (budget > 0 && fits) {
			/* most accurate within the budget, then faster */
			if (c->accuracy > sw->cfg[best].accuracy ||
			    (c->accuracy == sw->cfg[best].accuracy &&
			     lat < best_lat))
				best = i, best_lat = lat;
		} else if (lat < best_lat) {
			best = i, best_lat = lat;
		}
	}
	if (best < 0) { /* nothing meets the floor: the most accurate */
		best = most_acc;
		best_lat = predict(sw, &sw->cfg[best], dev);
		best_fits = false;
	}
	for (int l = 0; l < sw->nlayers; l++)
		choice[l] = sw->cfg[best].choice[l];
	if (res) {
		memset(res, 0, sizeof(*res));
		res->config = best;
		res->fits = best_fits;
		res->predicted_us = best_lat;
		res->accuracy = sw->cfg[best].accuracy;
	}
	return 0;
}
