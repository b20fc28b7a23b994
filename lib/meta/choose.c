// SPDX-License-Identifier: MIT
/*
 * The meta-controller: pick a configuration of a switchable model for one
 * device from the model's per-configuration accuracy (measured on
 * held-out data), the device's latency table at full health (its own, or
 * the model's scaled per variant kind: the device embedding) and its
 * health vector.  The latency under that health comes from the model's
 * trained controller (ctl.c) when it has one; a model without one gets
 * the hand-written fallback below.  Documentation/supernet.rst.
 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "meta/meta-impl.h"

enum { H_COMPUTE, H_MEMORY, H_BANDWIDTH, H_THERMAL, H_POWER, H_QUEUE };

/*
 * Fallback for models without a trained controller: a busy or throttled
 * device slows everything, a hot one MAC-heavy variants most.
 */
static double formula(const struct mi_switch *sw, const double *nom,
		      const double *h, const int *choice)
{
	double compute = fmax(h[H_COMPUTE], 0.05);
	double total = 0;

	for (int l = 0; l < sw->nlayers; l++) {
		const struct mi_switch_layer *L = &sw->layers[l];
		int k = choice[l];
		uint64_t maxm = 0;

		for (int j = 0; j < L->nvar; j++)
			if (L->macs[j] > maxm)
				maxm = L->macs[j];
		total += nom[l * MI_SWITCH_MAX_VARIANTS + k] / compute *
			 (1 + (1 - h[H_THERMAL]) *
				      (maxm ? (double)L->macs[k] / maxm : 1)) *
			 (1 + h[H_BANDWIDTH]);
	}
	return total;
}

/* fac: the trained controller's slow-down per layer variant, or NULL */
static double predict(const struct mi_switch *sw,
		      const struct mi_switch_config *c, const double *nom,
		      const double *fac, const double *h)
{
	double total = 0;

	if (!fac)
		return formula(sw, nom, h, c->choice);
	for (int l = 0; l < sw->nlayers; l++) {
		int i = l * MI_SWITCH_MAX_VARIANTS + c->choice[l];

		total += nom[i] * fac[i];
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
	double best_lat = 0, h[6];
	double nom[MI_SWITCH_MAX_LAYERS * MI_SWITCH_MAX_VARIANTS];
	double fac[MI_SWITCH_MAX_LAYERS * MI_SWITCH_MAX_VARIANTS];
	bool best_fits = false;

	if (!m || !choice)
		return mi_set_error(-EINVAL, "mi_meta_choose: NULL argument");
	sw = m->sw;
	if (!sw || !sw->ncfg)
		return mi_set_error(-ENOENT,
			"%s: no switchable layers with measured configurations",
			m->label);
	mi_meta_nominal(sw, dev, nom);
	mi_meta_health(dev, h);
	if (sw->ctl)
		mi_metactl_factors(sw, nom, h, fac);
	for (int i = 0; i < sw->ncfg; i++) {
		const struct mi_switch_config *c = &sw->cfg[i];
		double lat = predict(sw, c, nom, sw->ctl ? fac : NULL, h);
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
		best_lat = predict(sw, &sw->cfg[best], nom, sw->ctl ? fac : NULL,
				   h);
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
