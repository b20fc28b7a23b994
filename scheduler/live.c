// SPDX-License-Identifier: MIT
/*
 * Live adaptation (live.h): registry events -> re-solve -> structure
 * choice -> activation between two inferences of each stream.
 *
 * Placement problem per stream: its switchable layers in a chain (one
 * layer for a model without them); layer l on device d takes the model's
 * table latency of the active variant / speed[d]; an output crosses
 * devices at 0.5 ns/byte + 20 us.  The planner places all streams on the
 * shared devices and re-solves on confirmed events; a stream's main
 * device is where most of its layers went, and the meta-controller
 * chooses its structure from that device's confirmed health (an OK
 * dimension counts as healthy, so one odd sample changes nothing).
 *
 * Locks: ctl serializes pushes and the callback (solver state, problems);
 * lock guards stream state, pending switches and the chain ring.  The
 * callback runs inside mi_registry_push, on the pusher's thread, with
 * ctl held by mi_live_push.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "live.h"
#include "sched-impl.h"

#define XFER_NS_PER_BYTE 0.5
#define XFER_FIXED_NS 20000.0
#define MEM_PER_LAYER (1ull << 20)

struct live_stream {
	struct mi_model *model;
	int nsw;			/* switchable layers (0: none) */
	int nl;				/* placed layers: max(1, nsw) */
	double lat_us[MI_SWITCH_MAX_LAYERS][MI_SWITCH_MAX_VARIANTS];
	uint32_t out_ch[MI_SWITCH_MAX_LAYERS];
	/* the placement problem */
	struct mi_sched_layer layers[MI_SWITCH_MAX_LAYERS];
	uint32_t preds[MI_SWITCH_MAX_LAYERS];
	struct mi_sched_problem prob;
	double *lat_ns;
	uint64_t *mem;
	double *power;
	int32_t device[MI_SWITCH_MAX_LAYERS];
	double budget_us;
	/* decided (ctl) */
	int main_dev;
	int config;
	/* active (lock) */
	int act_config;
	int32_t act_layer_dev[MI_SWITCH_MAX_LAYERS];
	int act_dev;
	bool pending, awaiting;
	struct mi_live_chain chain;	/* pending or awaiting output */
	int pend_config;
	int32_t pend_layer_dev[MI_SWITCH_MAX_LAYERS];
	int pend_dev;
	uint64_t runs, failures, switches, moves, switch_failures;
	uint64_t win_runs, win_ns, win_max_ns;
};

struct mi_live {
	struct mi_live_opts o;
	int ndev, nstreams;
	struct mi_live_device dev[MI_SCHED_MAX_DEVICES];
	char names[MI_SCHED_MAX_DEVICES][32], klasses[MI_SCHED_MAX_DEVICES][100];
	struct mi_registry *reg;
	struct mi_planner *pl;
	struct mi_sched_model models[MI_LIVE_MAX_STREAMS];
	struct live_stream st[MI_LIVE_MAX_STREAMS];
	struct mi_sched_device sdev[MI_SCHED_MAX_DEVICES];
	double *xfer, *xfix;
	bool started, subscribed;
	pthread_mutex_t ctl, lock;
	/* detection: per device and dimension, the first anomalous sample's
	 * time of the current run, and the run length seen last */
	int64_t det_ns[MI_SCHED_MAX_DEVICES][MI_REG_NDIM];
	uint32_t run[MI_SCHED_MAX_DEVICES][MI_REG_NDIM];
	int64_t cur_ts;
	/* completed chains */
	struct mi_live_chain *ring;
	uint64_t nchains;
	uint64_t events, idle, superseded;
};

static void live_event(const struct mi_registry_event *ev, void *arg);

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

double mi_live_percentile(double *v, int n, double p)
{
	int k;

	if (n <= 0)
		return 0;
	/* insertion sort: n is small (events, runs per second) */
	for (int i = 1; i < n; i++) {
		double x = v[i];
		int j = i - 1;

		for (; j >= 0 && v[j] > x; j--)
			v[j + 1] = v[j];
		v[j + 1] = x;
	}
	k = (int)(p / 100.0 * (n - 1) + 0.5);
	return v[k < 0 ? 0 : k >= n ? n - 1 : k];
}

int mi_live_create(const struct mi_live_opts *opts,
		   const struct mi_live_device *devs, int ndevs,
		   struct mi_live **lp)
{
	struct mi_live *l;
	int ret;

	*lp = NULL;
	if (!devs || ndevs < 1 || ndevs > MI_SCHED_MAX_DEVICES)
		return mi_set_error(-EINVAL, "live: %d devices (1..%d)", ndevs,
				    MI_SCHED_MAX_DEVICES);
	l = calloc(1, sizeof(*l));
	if (!l)
		return mi_set_error(-ENOMEM, "live: out of memory");
	if (opts)
		l->o = *opts;
	if (!l->o.chain_ring)
		l->o.chain_ring = 4096;
	pthread_mutex_init(&l->ctl, NULL);
	pthread_mutex_init(&l->lock, NULL);
	l->ring = calloc(l->o.chain_ring, sizeof(*l->ring));
	l->xfer = calloc((size_t)ndevs * ndevs, sizeof(double));
	l->xfix = calloc((size_t)ndevs * ndevs, sizeof(double));
	if (!l->ring || !l->xfer || !l->xfix) {
		ret = mi_set_error(-ENOMEM, "live: out of memory");
		goto err_free;
	}
	ret = mi_registry_create(&l->o.reg, &l->reg);
	if (ret)
		goto err_free;
	l->ndev = ndevs;
	for (int d = 0; d < ndevs; d++) {
		struct mi_registry_device_info info;
		int id;

		if (!devs[d].name || !*devs[d].name) {
			ret = mi_set_error(-EINVAL, "live: device %d has no name", d);
			goto err_free;
		}
		snprintf(l->names[d], sizeof(l->names[d]), "%s", devs[d].name);
		snprintf(l->klasses[d], sizeof(l->klasses[d]), "%s",
			 devs[d].klass ? devs[d].klass : devs[d].name);
		l->dev[d].name = l->names[d];
		l->dev[d].klass = l->klasses[d];
		l->dev[d].speed = devs[d].speed > 0 ? devs[d].speed : 1.0;
		l->sdev[d].mem_bytes = 1ull << 40;
		info.name = l->names[d];
		info.klass = l->klasses[d];
		ret = mi_registry_add_device(l->reg, &info, &id);
		if (ret)
			goto err_free;
		for (int e = 0; e < ndevs; e++) {
			l->xfer[d * ndevs + e] = d == e ? 0 : XFER_NS_PER_BYTE;
			l->xfix[d * ndevs + e] = d == e ? 0 : XFER_FIXED_NS;
		}
	}
	*lp = l;
	return 0;

err_free:
	mi_live_destroy(l);
	return ret;
}

void mi_live_destroy(struct mi_live *l)
{
	if (!l)
		return;
	if (l->subscribed)
		mi_registry_unsubscribe(l->reg, live_event, l);
	mi_planner_destroy(l->pl);
	mi_registry_destroy(l->reg);
	for (int i = 0; i < l->nstreams; i++) {
		free(l->st[i].lat_ns);
		free(l->st[i].mem);
		free(l->st[i].power);
	}
	free(l->ring);
	free(l->xfer);
	free(l->xfix);
	pthread_mutex_destroy(&l->ctl);
	pthread_mutex_destroy(&l->lock);
	free(l);
}

struct mi_registry *mi_live_registry(struct mi_live *l)
{
	return l->reg;
}

int mi_live_add_stream(struct mi_live *l, struct mi_model *model, int *id)
{
	struct live_stream *s;
	int n, D = l->ndev;

	if (!model)
		return mi_set_error(-EINVAL, "live: NULL model");
	if (l->started)
		return mi_set_error(-EBUSY, "live: streams are added before start");
	if (l->nstreams >= MI_LIVE_MAX_STREAMS)
		return mi_set_error(-ENOSPC, "live: at most %d streams",
				    MI_LIVE_MAX_STREAMS);
	s = &l->st[l->nstreams];
	memset(s, 0, sizeof(*s));
	s->model = model;
	n = mi_model_switch_count(model);
	s->nsw = n > 0 && mi_model_config_count(model) > 0 ? n : 0;
	s->nl = s->nsw ? s->nsw : 1;
	s->config = s->act_config = -1;
	for (int i = 0; i < s->nsw; i++) {
		struct mi_switch_info info;
		int ret = mi_model_switch_info(model, i, &info);

		if (ret)
			return ret;
		for (int k = 0; k < info.nvariants; k++)
			s->lat_us[i][k] = info.latency_us[k] > 0 ?
						  info.latency_us[k] : 1.0;
		s->out_ch[i] = info.out_channels;
	}
	if (!s->nsw) {
		s->lat_us[0][0] = 1000.0;	/* unknown: 1 ms anywhere */
		s->out_ch[0] = 0;
	}
	s->lat_ns = calloc((size_t)s->nl * D, sizeof(double));
	s->mem = calloc((size_t)s->nl * D, sizeof(uint64_t));
	s->power = calloc((size_t)s->nl * D, sizeof(double));
	if (!s->lat_ns || !s->mem || !s->power) {
		free(s->lat_ns);
		free(s->mem);
		free(s->power);
		return mi_set_error(-ENOMEM, "live: out of memory");
	}
	for (int i = 0; i < s->nl; i++) {
		s->preds[i] = i - 1;
		s->layers[i].preds = i ? &s->preds[i] : NULL;
		s->layers[i].n_preds = i ? 1 : 0;
		/* 8x8 feature maps of fp32 (the supernet's digits) */
		s->layers[i].out_bytes = (uint64_t)s->out_ch[i] * 64 * 4;
		for (int d = 0; d < D; d++) {
			s->mem[i * D + d] = MEM_PER_LAYER;
			s->power[i * D + d] = 1.0;
		}
	}
	s->prob = (struct mi_sched_problem){
		.n_layers = s->nl, .n_devices = D, .streams = 1,
		.layers = s->layers, .devices = l->sdev, .lat_ns = s->lat_ns,
		.mem_bytes = s->mem, .power_w = s->power,
		.xfer_ns_per_byte = l->xfer, .xfer_fixed_ns = l->xfix,
	};
	l->models[l->nstreams].problem = &s->prob;
	l->models[l->nstreams].device = s->device;
	if (id)
		*id = l->nstreams;
	l->nstreams++;
	return 0;
}

/* Latencies of the problem for configuration cfg (-1: variant 0). */
static void stream_set_lat(struct mi_live *l, struct live_stream *s, int cfg)
{
	struct mi_switch_config c = { 0 };

	if (cfg >= 0)
		mi_model_config(s->model, cfg, &c);
	for (int i = 0; i < s->nl; i++)
		for (int d = 0; d < l->ndev; d++)
			s->lat_ns[i * l->ndev + d] =
				s->lat_us[i][c.choice[i]] * 1000.0 / l->dev[d].speed;
}

static int main_device(struct mi_live *l, const struct live_stream *s)
{
	int cnt[MI_SCHED_MAX_DEVICES] = { 0 }, best = 0;

	for (int i = 0; i < s->nl; i++)
		if (s->device[i] >= 0 && s->device[i] < l->ndev)
			cnt[s->device[i]]++;
	for (int d = 1; d < l->ndev; d++)
		if (cnt[d] > cnt[best])
			best = d;
	return best;
}

/* The meta-controller's view of device d: confirmed health only. */
static void meta_device(struct mi_live *l, int d, struct mi_meta_device *md)
{
	struct mi_device_view v;

	memset(md, 0, sizeof(*md));
	for (int k = 0; k < MI_META_KINDS; k++)
		md->scale[k] = 1.0 / l->dev[d].speed;
	if (mi_registry_device(l->reg, d, &v))
		return;
	for (int k = 0; k < MI_REG_NDIM; k++) {
		const struct mi_dim_view *dv = &v.dim[k];
		double x = dv->state == MI_DIM_DEGRADED ? dv->confirmed : 1.0;

		if (!dv->present)
			continue;
		/* the registry keeps bandwidth headroom, lib/health (and
		 * the meta-controller) saturation */
		md->health[k] = k == MI_REG_BANDWIDTH ? 1.0 - x : x;
		md->health_present |= 1u << k;
	}
}

static int choose(struct mi_live *l, struct live_stream *s, int dev)
{
	struct mi_meta_device md;
	struct mi_meta_goal g = { .min_accuracy = l->o.min_accuracy };
	struct mi_meta_result r;
	int choice[MI_SWITCH_MAX_LAYERS];

	if (!s->nsw)
		return -1;
	meta_device(l, dev, &md);
	g.latency_budget_us = s->budget_us > 0 ? s->budget_us : 0;
	if (mi_meta_choose(s->model, &md, &g, choice, &r))
		return s->config;
	return r.config;
}

static void auto_budget(struct mi_live *l, struct live_stream *s)
{
	struct mi_meta_device md;
	struct mi_meta_goal g = { .min_accuracy = 100.0 };	/* most accurate */
	struct mi_meta_result r;
	int choice[MI_SWITCH_MAX_LAYERS];

	s->budget_us = 0;
	if (!s->nsw || l->o.latency_budget_us < 0)
		return;
	if (l->o.latency_budget_us > 0) {
		s->budget_us = l->o.latency_budget_us;
		return;
	}
	memset(&md, 0, sizeof(md));
	for (int k = 0; k < MI_META_KINDS; k++)
		md.scale[k] = 1.0 / l->dev[s->main_dev].speed;
	if (!mi_meta_choose(s->model, &md, &g, choice, &r))
		s->budget_us = 1.1 * r.predicted_us;
}

static int set_config(struct live_stream *s, int cfg)
{
	struct mi_switch_config c;
	int ret;

	if (cfg < 0 || !s->nsw)
		return 0;
	ret = mi_model_config(s->model, cfg, &c);
	if (!ret)
		ret = mi_model_set_config(s->model, c.choice);
	return ret;
}

/* The model follows its stream's main device (the CPU always with it). */
static int move_model(struct mi_live *l, struct live_stream *s, int dev)
{
	if (!l->o.move_models)
		return 0;
	return mi_model_set_devices(s->model, l->names[dev]);
}

int mi_live_start(struct mi_live *l)
{
	int ret;

	if (l->started)
		return mi_set_error(-EBUSY, "live: started already");
	if (!l->nstreams)
		return mi_set_error(-EINVAL, "live: no streams");
	for (int i = 0; i < l->nstreams; i++)
		stream_set_lat(l, &l->st[i], -1);
	ret = mi_planner_create(l->reg, &l->o.sched, l->models, l->nstreams,
				&l->pl);
	if (ret)
		return ret;
	ret = mi_planner_update(l->pl, true);
	if (ret < 0)
		return ret;
	for (int i = 0; i < l->nstreams; i++) {
		struct live_stream *s = &l->st[i];

		s->main_dev = main_device(l, s);
		auto_budget(l, s);
		s->config = choose(l, s, s->main_dev);
		ret = set_config(s, s->config);
		if (ret)
			return ret;
		s->act_config = s->config;
		s->act_dev = s->main_dev;
		memcpy(s->act_layer_dev, s->device, sizeof(s->device));
		if (s->config >= 0)
			stream_set_lat(l, s, s->config);
	}
	/* the latencies of the chosen structures, placed */
	ret = mi_planner_update(l->pl, true);
	if (ret < 0)
		return ret;
	for (int i = 0; i < l->nstreams; i++) {
		struct live_stream *s = &l->st[i];

		s->main_dev = s->act_dev = main_device(l, s);
		memcpy(s->act_layer_dev, s->device, sizeof(s->device));
		ret = move_model(l, s, s->act_dev);
		if (ret)
			return ret;
	}
	ret = mi_registry_subscribe(l->reg, live_event, l);
	if (ret)
		return ret;
	l->subscribed = true;
	l->started = true;
	return 0;
}

static void chain_done(struct mi_live *l, const struct mi_live_chain *c)
{
	l->ring[l->nchains % l->o.chain_ring] = *c;
	l->nchains++;
}

/* Registry callback: a confirmed change.  ctl is held (mi_live_push or
 * mi_live_device_lost). */
static void live_event(const struct mi_registry_event *ev, void *arg)
{
	struct mi_live *l = arg;
	int64_t t_confirm = now_ns(), t_det, t_solve;
	bool any = false;

	if (ev->type != MI_REG_EV_DEGRADED && ev->type != MI_REG_EV_RECOVERED &&
	    ev->type != MI_REG_EV_DEVICE_LOST)
		return;
	if (ev->dim >= 0 && ev->device >= 0 && ev->device < l->ndev)
		t_det = l->run[ev->device][ev->dim] ?
				l->det_ns[ev->device][ev->dim] : l->cur_ts;
	else
		t_det = t_confirm;
	if (ev->dim >= 0 && ev->device >= 0 && ev->device < l->ndev)
		l->run[ev->device][ev->dim] = 0;
	if (mi_planner_update(l->pl, true) < 0)
		return;		/* keeps the placement it had */
	for (int i = 0; i < l->nstreams; i++) {
		struct live_stream *s = &l->st[i];

		s->main_dev = main_device(l, s);
		s->config = choose(l, s, s->main_dev);
	}
	t_solve = now_ns();
	pthread_mutex_lock(&l->lock);
	l->events++;
	for (int i = 0; i < l->nstreams; i++) {
		struct live_stream *s = &l->st[i];
		const int32_t *cur = s->pending ? s->pend_layer_dev :
				     s->act_layer_dev;
		int cur_cfg = s->pending ? s->pend_config : s->act_config;
		int cur_dev = s->pending ? s->pend_dev : s->act_dev;
		struct mi_live_chain *c = &s->chain;

		if (s->config == cur_cfg && s->main_dev == cur_dev &&
		    !memcmp(cur, s->device, s->nl * sizeof(int32_t)))
			continue;
		any = true;
		if (s->pending || s->awaiting)
			l->superseded++;
		memset(c, 0, sizeof(*c));
		c->seq = ev->seq;
		c->type = ev->type;
		c->device = ev->device;
		c->dim = ev->dim;
		c->stream = i;
		c->from_device = s->act_dev;
		c->to_device = s->main_dev;
		c->from_config = s->act_config;
		c->to_config = s->config;
		c->ns[MI_LIVE_DETECT] = t_det;
		c->ns[MI_LIVE_CONFIRM] = t_confirm;
		c->ns[MI_LIVE_SOLVE] = t_solve;
		s->pend_config = s->config;
		s->pend_dev = s->main_dev;
		memcpy(s->pend_layer_dev, s->device, sizeof(s->device));
		s->pending = true;
		s->awaiting = false;
	}
	if (!any)
		l->idle++;
	pthread_mutex_unlock(&l->lock);
	/* the solver's latencies follow the structures chosen */
	for (int i = 0; i < l->nstreams; i++)
		if (l->st[i].config >= 0)
			stream_set_lat(l, &l->st[i], l->st[i].config);
}

static int check_dev(struct mi_live *l, int dev)
{
	if (!l->started)
		return mi_set_error(-EINVAL, "live: not started");
	if (dev < 0 || dev >= l->ndev)
		return mi_set_error(-EINVAL, "live: no device %d", dev);
	return 0;
}

int mi_live_push(struct mi_live *l, int dev, const struct mi_reg_sample *s)
{
	struct mi_device_view v;
	int ret = check_dev(l, dev);

	if (ret)
		return ret;
	pthread_mutex_lock(&l->ctl);
	l->cur_ts = s->ts_ns;
	ret = mi_registry_push(l->reg, dev, s);
	if (!ret && !mi_registry_device(l->reg, dev, &v)) {
		for (int k = 0; k < MI_REG_NDIM; k++) {
			uint32_t r = v.dim[k].anomalous_run;

			if (r && !l->run[dev][k])
				l->det_ns[dev][k] = s->ts_ns;
			l->run[dev][k] = r;
		}
	}
	pthread_mutex_unlock(&l->ctl);
	return ret;
}

int mi_live_device_lost(struct mi_live *l, int dev)
{
	int ret = check_dev(l, dev);

	if (ret)
		return ret;
	pthread_mutex_lock(&l->ctl);
	ret = mi_registry_device_lost(l->reg, dev, now_ns());
	pthread_mutex_unlock(&l->ctl);
	return ret;
}

static int check_stream(struct mi_live *l, int id)
{
	if (!l->started)
		return mi_set_error(-EINVAL, "live: not started");
	if (id < 0 || id >= l->nstreams)
		return mi_set_error(-EINVAL, "live: no stream %d", id);
	return 0;
}

int mi_live_begin(struct mi_live *l, int id, int *config)
{
	struct live_stream *s;
	int cfg, dev, ret = check_stream(l, id);
	int64_t t_take;

	if (ret)
		return ret;
	s = &l->st[id];
	pthread_mutex_lock(&l->lock);
	if (!s->pending) {
		if (config)
			*config = s->act_config;
		pthread_mutex_unlock(&l->lock);
		return 0;
	}
	cfg = s->pend_config;
	dev = s->pend_dev;
	pthread_mutex_unlock(&l->lock);
	t_take = now_ns();
	/* only this thread runs, moves or reconfigures the stream's model */
	if (dev != s->act_dev)
		ret = move_model(l, s, dev);
	if (!ret && cfg != s->act_config) {
		ret = set_config(s, cfg);
		/* moved, not reconfigured: back where the structure was */
		if (ret && dev != s->act_dev)
			move_model(l, s, s->act_dev);
	}
	pthread_mutex_lock(&l->lock);
	if (ret) {
		/* the model keeps the devices and structure it had (both
		 * calls promise it) and runs on: the switch is dropped, the
		 * next event tries again */
		s->switch_failures++;
		if (s->pend_config == cfg && s->pend_dev == dev)
			s->pending = false;
		if (config)
			*config = s->act_config;
		pthread_mutex_unlock(&l->lock);
		return 0;
	}
	if (cfg != s->act_config)
		s->switches++;
	if (dev != s->act_dev ||
	    memcmp(s->pend_layer_dev, s->act_layer_dev, s->nl * sizeof(int32_t)))
		s->moves++;
	s->act_config = cfg;
	s->act_dev = dev;
	memcpy(s->act_layer_dev, s->pend_layer_dev, sizeof(s->act_layer_dev));
	/* a newer event may have replaced the pending one meanwhile: then
	 * it stays pending and the next begin takes it */
	if (s->pend_config == cfg && s->pend_dev == dev) {
		s->pending = false;
		s->awaiting = true;
		s->chain.ns[MI_LIVE_TAKE] = t_take;
		s->chain.ns[MI_LIVE_ACTIVATE] = now_ns();
	}
	if (config)
		*config = cfg;
	pthread_mutex_unlock(&l->lock);
	return 0;
}

int mi_live_end(struct mi_live *l, int id, int status, uint64_t run_ns)
{
	struct live_stream *s;
	int ret = check_stream(l, id);

	if (ret)
		return ret;
	s = &l->st[id];
	pthread_mutex_lock(&l->lock);
	s->runs++;
	if (status < 0)
		s->failures++;
	s->win_runs++;
	s->win_ns += run_ns;
	if (run_ns > s->win_max_ns)
		s->win_max_ns = run_ns;
	if (s->awaiting && status >= 0) {
		s->chain.ns[MI_LIVE_OUTPUT] = now_ns();
		chain_done(l, &s->chain);
		s->awaiting = false;
	}
	pthread_mutex_unlock(&l->lock);
	return 0;
}

int mi_live_stream(struct mi_live *l, int id, struct mi_live_stream_view *v,
		   bool reset)
{
	struct live_stream *s;
	int ret = check_stream(l, id);

	if (ret)
		return ret;
	s = &l->st[id];
	memset(v, 0, sizeof(*v));
	pthread_mutex_lock(&l->lock);
	v->device = s->act_dev;
	v->config = s->act_config;
	v->nlayers = s->nl;
	memcpy(v->layer_device, s->act_layer_dev, sizeof(v->layer_device));
	if (s->act_config >= 0) {
		struct mi_switch_config c;

		if (!mi_model_config(s->model, s->act_config, &c))
			memcpy(v->choice, c.choice, sizeof(v->choice));
	}
	v->budget_us = s->budget_us;
	v->runs = s->runs;
	v->failures = s->failures;
	v->switches = s->switches;
	v->moves = s->moves;
	v->switch_failures = s->switch_failures;
	v->win_runs = s->win_runs;
	v->win_ns = s->win_ns;
	v->win_max_ns = s->win_max_ns;
	if (reset)
		s->win_runs = s->win_ns = s->win_max_ns = 0;
	pthread_mutex_unlock(&l->lock);
	return 0;
}

int mi_live_chains(struct mi_live *l, uint64_t from, struct mi_live_chain *out,
		   int max, uint64_t *next)
{
	int n = 0;

	pthread_mutex_lock(&l->lock);
	if (l->nchains > l->o.chain_ring && from < l->nchains - l->o.chain_ring)
		from = l->nchains - l->o.chain_ring;
	for (; from < l->nchains && n < max; from++)
		out[n++] = l->ring[from % l->o.chain_ring];
	if (next)
		*next = from;
	pthread_mutex_unlock(&l->lock);
	return n;
}

void mi_live_counts(struct mi_live *l, uint64_t *events, uint64_t *idle,
		    uint64_t *superseded)
{
	pthread_mutex_lock(&l->lock);
	if (events)
		*events = l->events;
	if (idle)
		*idle = l->idle;
	if (superseded)
		*superseded = l->superseded;
	pthread_mutex_unlock(&l->lock);
}
