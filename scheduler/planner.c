// SPDX-License-Identifier: MIT
/*
 * Several models on the same devices, re-planned when the registry
 * confirms a change.  Models are placed in the order given: each one's
 * streams load the devices the next ones see (busy ns per inference
 * period: streams x its layers' latencies there) and its resident bytes
 * come off their memory.  The registry's callback only marks the plan
 * stale; mi_planner_update() solves, on the caller's thread, with the
 * confirmed state, so a sample that confirms nothing changes nothing.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "sched-impl.h"

struct mi_planner {
	struct mi_registry *reg;
	struct mi_sched_model *models;
	uint32_t n_models, max_l, max_d;
	struct mi_solver *solver;
	pthread_mutex_t lock;
	bool stale;
	uint64_t replans;
	struct mi_sched_dev_state st[MI_SCHED_MAX_DEVICES];
	double load[MI_SCHED_MAX_DEVICES];
	uint64_t mem[MI_SCHED_MAX_DEVICES];
};

static void planner_event(const struct mi_registry_event *ev, void *arg)
{
	struct mi_planner *pl = arg;

	if (ev->type == MI_REG_EV_DEVICE_ADDED && ev->device >= (int)pl->max_d)
		return;		/* not a device of these problems */
	pthread_mutex_lock(&pl->lock);
	pl->stale = true;
	pthread_mutex_unlock(&pl->lock);
}

int mi_planner_create(struct mi_registry *reg, const struct mi_sched_opts *o,
		      struct mi_sched_model *models, uint32_t n_models,
		      struct mi_planner **pp)
{
	struct mi_planner *pl;
	uint32_t max_l = 0, max_d = 0;
	int ret;

	*pp = NULL;
	if (!models || !n_models)
		return mi_set_error(-EINVAL, "planner: no models");
	for (uint32_t i = 0; i < n_models; i++) {
		const struct mi_sched_problem *p = models[i].problem;

		ret = mi_sched_problem_check(p);
		if (ret)
			return ret;
		if (!models[i].device)
			return mi_set_error(-EINVAL, "planner: model %u needs a placement array",
					    i);
		if (i && p->n_devices != models[0].problem->n_devices)
			return mi_set_error(-EINVAL, "planner: model %u has %u devices, model 0 %u",
					    i, p->n_devices, models[0].problem->n_devices);
		if (p->n_layers > max_l)
			max_l = p->n_layers;
		max_d = p->n_devices;
	}
	if (reg && (uint32_t)mi_registry_count(reg) < max_d)
		return mi_set_error(-EINVAL, "planner: problems have %u devices, the registry %d",
				    max_d, mi_registry_count(reg));
	pl = calloc(1, sizeof(*pl));
	if (!pl)
		return mi_set_error(-ENOMEM, "planner: out of memory");
	ret = mi_solver_create(max_l, max_d, o, &pl->solver);
	if (ret) {
		free(pl);
		return ret;
	}
	pthread_mutex_init(&pl->lock, NULL);
	pl->reg = reg;
	pl->models = models;
	pl->n_models = n_models;
	pl->max_l = max_l;
	pl->max_d = max_d;
	pl->stale = true;
	for (uint32_t i = 0; i < n_models; i++) {
		models[i].plan.n_layers = models[i].problem->n_layers;
		models[i].plan.device = models[i].device;
	}
	if (reg) {
		ret = mi_registry_subscribe(reg, planner_event, pl);
		if (ret) {
			mi_planner_destroy(pl);
			return ret;
		}
	}
	*pp = pl;
	return 0;
}

void mi_planner_destroy(struct mi_planner *pl)
{
	if (!pl)
		return;
	if (pl->reg)
		mi_registry_unsubscribe(pl->reg, planner_event, pl);
	mi_solver_destroy(pl->solver);
	pthread_mutex_destroy(&pl->lock);
	free(pl);
}

int mi_planner_update(struct mi_planner *pl, bool force)
{
	uint32_t D = pl->max_d;
	bool stale;
	int ret;

	pthread_mutex_lock(&pl->lock);
	stale = pl->stale;
	pl->stale = false;
	pthread_mutex_unlock(&pl->lock);
	if (!stale && !force)
		return 0;
	if (pl->reg) {
		ret = mi_registry_solver_state(pl->reg, pl->st, D);
		if (ret)
			return ret;
	} else {
		mi_sched_dev_state_nominal(pl->st, D);
	}
	memset(pl->load, 0, sizeof(pl->load));
	memset(pl->mem, 0, sizeof(pl->mem));
	for (uint32_t i = 0; i < pl->n_models; i++) {
		struct mi_sched_model *m = &pl->models[i];
		const struct mi_sched_problem *p = m->problem;
		struct mi_sched_base base = { pl->load, pl->mem };

		ret = mi_solver_solve(pl->solver, p, pl->st, &base, &m->plan);
		if (ret) {
			/* models before it keep their new placements, it
			 * keeps its last one; the next update retries */
			pthread_mutex_lock(&pl->lock);
			pl->stale = true;
			pthread_mutex_unlock(&pl->lock);
			return ret;
		}
		for (uint32_t l = 0; l < p->n_layers; l++) {
			int d = m->device[l];

			pl->load[d] += pl->solver->S * pl->solver->lat[l * D + d];
			pl->mem[d] += p->mem_bytes[l * D + d];
		}
	}
	pl->replans++;
	return 1;
}

int mi_planner_adjust(struct mi_planner *pl, uint32_t *moved)
{
	uint32_t D = pl->max_d, total = 0;
	int ret;

	if (pl->reg) {
		ret = mi_registry_solver_state(pl->reg, pl->st, D);
		if (ret)
			return ret;
	} else {
		mi_sched_dev_state_nominal(pl->st, D);
	}
	memset(pl->load, 0, sizeof(pl->load));
	memset(pl->mem, 0, sizeof(pl->mem));
	for (uint32_t i = 0; i < pl->n_models; i++) {
		struct mi_sched_model *m = &pl->models[i];
		const struct mi_sched_problem *p = m->problem;
		struct mi_sched_base base = { pl->load, pl->mem };

		ret = mi_solver_adjust(pl->solver, p, pl->st, &base, &m->plan);
		if (ret)
			return ret;
		total += m->plan.moved;
		for (uint32_t l = 0; l < p->n_layers; l++) {
			int d = m->device[l];

			pl->load[d] += pl->solver->S * pl->solver->lat[l * D + d];
			pl->mem[d] += p->mem_bytes[l * D + d];
		}
	}
	if (moved)
		*moved = total;
	return 0;
}

uint64_t mi_planner_replans(struct mi_planner *pl)
{
	return pl->replans;
}
