// SPDX-License-Identifier: MIT
/*
 * mi_model_set_devices: move a loaded model to another set of devices
 * between two runs, for live re-placement (scheduler/live.c).  The new
 * set is selected (mi_dev_select: the CPU always in it) and the model
 * re-planned on it with the shapes it is bound to; the kernels, weights
 * and structure (mi_model_set_config) stay.  On any failure the model
 * keeps the devices and plan it had.  Device pins of an applied plan
 * (mi_model_plan_apply) do not carry over: placement on the new set is
 * the default rules'.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "plan/place-impl.h"

/* Plan m again for the inputs it is bound to (nothing if none yet). */
static int prepare_bound(struct mi_model *m)
{
	struct mi_graph *g = &m->g;
	int32_t *nd;
	int64_t *dims;
	int err;

	if (!m->prepared)
		return 0;
	nd = malloc((g->ninputs + 1) * sizeof(*nd));
	dims = malloc((size_t)(g->ninputs + 1) * MI_MAX_DIMS * sizeof(*dims));
	if (!nd || !dims) {
		free(nd);
		free(dims);
		return -ENOMEM;
	}
	memcpy(nd, m->bound_ndim, g->ninputs * sizeof(*nd));
	memcpy(dims, m->bound_dims,
	       (size_t)g->ninputs * MI_MAX_DIMS * sizeof(*dims));
	m->g.err[0] = 0;
	err = mi_model_prepare(m, nd, dims);
	free(nd);
	free(dims);
	return err == -EAGAIN ? 0 : err;
}

/* Free the placement state p (not m's current one). */
static void place_free(struct mi_model *m, struct mi_place *p)
{
	struct mi_place *cur = m->place;

	m->place = p;
	mi_place_fini(m);
	m->place = cur;
}

int mi_model_set_devices(struct mi_model *m, const char *devices)
{
	struct mi_place *old, *nw;
	bool was_prepared;
	int err;

	if (!m)
		return mi_set_error(-EINVAL, "mi_model_set_devices: NULL model");
	old = m->place;
	was_prepared = m->prepared;
	m->place = NULL;
	err = mi_place_init(m, devices);
	nw = m->place;
	m->place = old;
	if (err) {
		char why[256];	/* mi_last_error() is the buffer written */

		snprintf(why, sizeof(why), "%s", mi_last_error());
		return mi_set_error(err, "%s: %s", m->label, why);
	}
	/* the old placement's jobs are bound to the model's tensors */
	mi_devexec_unbind(m);
	m->place = nw;
	err = prepare_bound(m);
	if (!err) {
		place_free(m, old);
		return 0;
	}
	mi_set_error(err, "%s: re-planning on '%s' failed: %s", m->label,
		     devices ? devices : "cpu",
		     m->g.err[0] ? m->g.err : strerror(-err));
	mi_devexec_unbind(m);
	m->place = old;
	place_free(m, nw);
	m->prepared = was_prepared;
	if (prepare_bound(m))
		m->prepared = false;	/* plans again on the next run */
	return err;
}
