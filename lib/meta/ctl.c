// SPDX-License-Identifier: MIT
/*
 * The trained meta-controller: a small GBRT (lib/predict/gbrt.c) fitted
 * offline by tools/supernet/metactl.c on (device, health state,
 * configuration) -> latency data, stored in the model's metadata_props
 * "metainfer.metactl" as
 *
 *   metactl 1 <nfeat>\n<mi_gbrt_write text>
 *
 * The trees model one layer variant at a time (a configuration's latency
 * is the sum over its layers).  Features of variant k of layer l on a
 * device whose full-health table is nom:
 *   0    log(nom[l][k]), us
 *   1-3  kind: std / dws / group (one-hot)
 *   4    log(MACs)
 *   5    log(nom / MACs): compute- vs launch- or memory-bound
 *   6    log(nom / the layer's cheapest variant)
 *   7-12 health: compute, memory, bandwidth saturation, thermal, power,
 *        queue (absent: healthy)
 *   13   log(MACs * r / nom), r the device's least us per MAC over all
 *        layer variants: the share of nom that is compute
 *   14   the slope of log(nom) over log(MACs) across the device's table
 *        (1: compute-bound, 0: launch-bound)
 *   15   log(the device's cheapest layer variant / nom): the launch share
 * They predict g = log(latency / nom); the controller's latency is
 * sum_l nom[l][k_l] * exp(g(health) - g(full health)) (the factors are
 * computed once per layer variant, not per configuration), so a healthy
 * device gets exactly its own table and the trees only model how a state
 * slows each variant down.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "meta/meta-impl.h"
#include "predict/predict.h"

struct mi_metactl {
	struct mi_gbrt t;
};

static const double healthy[6] = { 1, 1, 0, 1, 1, 1 };

void mi_meta_health(const struct mi_meta_device *dev, double *h)
{
	for (int i = 0; i < 6; i++) {
		double x = healthy[i];

		if (dev && (dev->health_present & (1u << i)))
			x = dev->health[i];
		h[i] = x < 0 ? 0 : x > 1 ? 1 : x;
	}
}

void mi_meta_nominal(const struct mi_switch *sw,
		     const struct mi_meta_device *dev, double *nom)
{
	for (int l = 0; l < sw->nlayers; l++) {
		const struct mi_switch_layer *L = &sw->layers[l];

		for (int k = 0; k < L->nvar; k++) {
			int i = l * MI_SWITCH_MAX_VARIANTS + k;
			double s = dev && dev->scale[L->kind[k]] > 0 ?
					   dev->scale[L->kind[k]] : 1;

			nom[i] = (dev && dev->latency_us ? dev->latency_us[i] :
							   L->lat_us[k]) * s;
		}
	}
}

/* Device-level features, from its whole table (the same for every
 * layer variant of one call). */
struct dev_stats {
	double r;	/* least us per MAC */
	double slope;	/* of log nom over log MACs */
	double all;	/* cheapest layer variant, us */
};

static void dev_stats(const struct mi_switch *sw, const double *nom,
		      struct dev_stats *d)
{
	double sx = 0, sy = 0, sxx = 0, sxy = 0;
	int n = 0;

	d->r = INFINITY;
	d->all = INFINITY;
	for (int i = 0; i < sw->nlayers; i++)
		for (int j = 0; j < sw->layers[i].nvar; j++) {
			double u = fmax(nom[i * MI_SWITCH_MAX_VARIANTS + j],
					1e-3);
			double mm = sw->layers[i].macs[j] > 0 ?
					    (double)sw->layers[i].macs[j] : 1;
			double lm = log(mm), lu = log(u);

			d->r = fmin(d->r, u / mm);
			d->all = fmin(d->all, u);
			sx += lm, sy += lu, n++;
			sxx += lm * lm, sxy += lm * lu;
		}
	d->slope = n * sxx - sx * sx > 0 ?
			   (n * sxy - sx * sy) / (n * sxx - sx * sx) : 0;
}

static void features(const struct mi_switch *sw, const double *nom,
		     const struct dev_stats *d, int l, int k,
		     const double *health, float *x)
{
	const struct mi_switch_layer *L = &sw->layers[l];
	const double *row = nom + l * MI_SWITCH_MAX_VARIANTS;
	double t = fmax(row[k], 1e-3), lo = t;
	double macs = L->macs[k] > 0 ? (double)L->macs[k] : 1;

	for (int j = 0; j < L->nvar; j++)
		lo = fmin(lo, fmax(row[j], 1e-3));
	x[0] = log(t);
	for (int i = 0; i < MI_META_KINDS; i++)
		x[1 + i] = L->kind[k] == i;
	x[4] = log(macs);
	x[5] = log(t / macs);
	x[6] = log(t / lo);
	for (int i = 0; i < 6; i++)
		x[7 + i] = health[i];
	x[13] = log(macs * d->r / t);
	x[14] = d->slope;
	x[15] = log(d->all / t);
}

void mi_metactl_features(const struct mi_switch *sw, const double *nom,
			 int l, int k, const double *health, float *x)
{
	struct dev_stats d;

	dev_stats(sw, nom, &d);
	features(sw, nom, &d, l, k, health, x);
}

void mi_metactl_factors(const struct mi_switch *sw, const double *nom,
			const double *health, double *fac)
{
	float x[MI_METACTL_NFEAT], x0[MI_METACTL_NFEAT];
	struct dev_stats d;

	dev_stats(sw, nom, &d);
	for (int l = 0; l < sw->nlayers; l++)
		for (int k = 0; k < sw->layers[l].nvar; k++) {
			features(sw, nom, &d, l, k, health, x);
			features(sw, nom, &d, l, k, healthy, x0);
			fac[l * MI_SWITCH_MAX_VARIANTS + k] =
				exp(mi_gbrt_eval(&sw->ctl->t, x) -
				    mi_gbrt_eval(&sw->ctl->t, x0));
		}
}

void mi_metactl_free(struct mi_metactl *c)
{
	if (!c)
		return;
	mi_gbrt_fini(&c->t);
	free(c);
}

int mi_metactl_set(struct mi_switch *sw, const char *text)
{
	struct mi_metactl *c;
	int ver, nf, err;
	FILE *f;

	if (sscanf(text, "metactl %d %d", &ver, &nf) != 2 || ver != 1 ||
	    nf != MI_METACTL_NFEAT)
		return -EINVAL;
	f = fmemopen((void *)text, strlen(text), "r");
	if (!f)
		return -ENOMEM;
	c = calloc(1, sizeof(*c));
	if (!c) {
		fclose(f);
		return -ENOMEM;
	}
	err = fscanf(f, "metactl %*d %*d") == EOF ? -EINVAL : 0;
	if (!err)
		err = mi_gbrt_read(&c->t, f);
	fclose(f);
	if (!err && c->t.nfeat != MI_METACTL_NFEAT)
		err = -EINVAL;
	if (err) {
		mi_metactl_free(c);
		return err;
	}
	mi_metactl_free(sw->ctl);
	sw->ctl = c;
	return 0;
}
