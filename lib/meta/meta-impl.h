/* SPDX-License-Identifier: MIT */
/*
 * lib/meta private state: the switchable layers of a model (from its
 * "metainfer.switch" metadata, Documentation/supernet.rst) and the small
 * JSON reader that parses it.
 */
#ifndef MI_META_IMPL_H
#define MI_META_IMPL_H

#include <stdbool.h>

#include "internal.h"

enum { MJ_NULL, MJ_NUM, MJ_STR, MJ_ARR, MJ_OBJ };

struct mi_mj {
	int type;
	double num;
	char *str;
	int n;
	char **keys;		/* MJ_OBJ */
	struct mi_mj *v;
};

int mi_mj_parse(const char *s, struct mi_mj *root, int *errpos);
void mi_mj_free(struct mi_mj *v);
const struct mi_mj *mi_mj_get(const struct mi_mj *o, const char *key);

/* Where a layer's merged output is read: node, input slot. */
struct mi_switch_use {
	int node, slot;
};

struct mi_switch_layer {
	char *name;
	int nvar;
	char *variants[MI_SWITCH_MAX_VARIANTS];
	int in_ch, out_ch;
	int height, width;			/* output spatial size */
	int in_t;				/* layer input tensor */
	int sel_t[MI_SWITCH_MAX_VARIANTS];	/* one-hot initializers */
	int mul_n[MI_SWITCH_MAX_VARIANTS];	/* Mul(branch, selector) */
	int branch_t[MI_SWITCH_MAX_VARIANTS];	/* branch outputs */
	int merge_n;				/* the Sum */
	int out_t;				/* its output */
	struct mi_switch_use *uses;
	int nuses;
	uint64_t macs[MI_SWITCH_MAX_VARIANTS];
	double lat_us[MI_SWITCH_MAX_VARIANTS];
	enum mi_meta_kind kind[MI_SWITCH_MAX_VARIANTS];
};

struct mi_metactl;

struct mi_switch {
	int nlayers;
	struct mi_switch_layer layers[MI_SWITCH_MAX_LAYERS];
	int ncfg;
	struct mi_switch_config *cfg;
	bool pruned;
	int cur[MI_SWITCH_MAX_LAYERS];
	bool *dead0;		/* per node: dead in the full graph */
	int nnodes;
	struct mi_metactl *ctl;	/* trained controller, NULL: the formula */
};

/*
 * The trained meta-controller (ctl.c, Documentation/supernet.rst): a
 * GBRT over MI_METACTL_NFEAT features of (device table, layer variant,
 * health) predicting log(latency / latency at full health).  Its text is
 * the "metainfer.metactl" metadata entry (tools/supernet/metactl.c
 * writes it).
 */
#define MI_METACTL_KEY	 "metainfer.metactl"
#define MI_METACTL_NFEAT 16

/* The device's per-layer, per-variant latency at full health, us, at
 * nom[layer * MI_SWITCH_MAX_VARIANTS + variant]: its own table (else the
 * model's) times scale[kind]. */
void mi_meta_nominal(const struct mi_switch *sw,
		     const struct mi_meta_device *dev, double *nom);
/* The six health dimensions, absent ones healthy, clamped to [0, 1]. */
void mi_meta_health(const struct mi_meta_device *dev, double *h);
void mi_metactl_features(const struct mi_switch *sw, const double *nom,
			 int layer, int variant, const double *health,
			 float *x);
/* Parse a controller's text and attach it to sw (replacing one). */
int mi_metactl_set(struct mi_switch *sw, const char *text);
void mi_metactl_free(struct mi_metactl *c);
/* fac[layer * MI_SWITCH_MAX_VARIANTS + variant]: how much slower than
 * nom each layer variant runs in this health state (sw->ctl set). */
void mi_metactl_factors(const struct mi_switch *sw, const double *nom,
			const double *health, double *fac);

#endif /* MI_META_IMPL_H */
