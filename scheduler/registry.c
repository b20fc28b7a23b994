// SPDX-License-Identifier: MIT
/*
 * The hardware state registry: per device a stream of health samples,
 * aligned to CLOCK_MONOTONIC (clock.c), fused over time and checked for
 * credibility before anything downstream acts on them.
 *
 * Fusion.  A device reporting faster than fast_period_ns is smoothed
 * (exponential, time constant smooth_tau_ns, so the weight follows the
 * real interval); a slower one is interpolated linearly between its last
 * two samples (held, never extrapolated, after the newest).
 *
 * Credibility, per dimension: a two-state machine OK <-> DEGRADED.
 *   OK -> DEGRADED  after confirm_count consecutive samples below
 *                   degrade_below that are also peer_margin below the
 *                   median of comparable devices (same klass, fresh
 *                   samples; with no peer the test is the threshold
 *                   alone).  One odd sample resets nothing but its run.
 *   DEGRADED -> OK  after recover_count consecutive samples at or above
 *                   recover_above: a higher bar and a longer run
 *                   (hysteresis).
 *   In DEGRADED the level the solver uses moves only after
 *   confirm_count consecutive samples peer_margin away from it.
 * A transition within flap_window_ns of the previous one is a flap
 * (counted, times kept).  With flap_limit flaps in the window the
 * dimension is damped: every run needed doubles per flap over the limit
 * (at most 8x) until a whole window passes without a flap or a sample
 * toward the other state.
 *
 * Queue stability comes from the queue depths of the last 5 samples when
 * a sample carries the depth and not the dimension itself:
 * 1 / (1 + k var / (mean + 1)^2), so an intermittent stall shows even
 * when every single depth looks normal.
 *
 * Confirmed changes become events, delivered to subscribers after the
 * state lock is dropped (a subscriber may query the registry), under a
 * delivery lock that unsubscribing waits for (so a subscriber may not
 * unsubscribe from its own callback).
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched-impl.h"

#define QWIN 5
#define MAX_SUBS 8
#define MAX_EVENTS 16

struct reg_dim {
	bool present;
	enum mi_dim_state state;
	double confirmed;
	double ewma;
	double prev_v, last_v;
	int64_t prev_ts, last_ts;
	uint32_t nsamp;
	uint32_t run;		/* toward the other state */
	double run_sum;
	uint32_t lvl_run;	/* level change inside DEGRADED */
	double lvl_sum;
	int lvl_dir;
	int64_t last_transition;
	uint32_t flaps;
	int64_t flap_ts[4];	/* newest first */
	int64_t last_odd;	/* last sample toward the other state */
	bool damped;
};

struct reg_dev {
	char name[32];
	char klass[64];
	bool lost;
	uint64_t samples, jobs, failures;
	double period_ns;
	int64_t last_host;
	struct mi_clock_fit clock;
	struct reg_dim dim[MI_REG_NDIM];
	double qd[QWIN];
	uint32_t qn, qpos;
	double raw[MI_REG_RAW_COUNT];
	uint32_t raw_present;
};

struct reg_sub {
	mi_registry_cb cb;
	void *arg;
};

struct mi_registry {
	pthread_mutex_t lock;
	/* held while callbacks run, so that unsubscribe can wait them out */
	pthread_mutex_t deliver;
	struct mi_registry_opts o;
	struct reg_dev dev[MI_SCHED_MAX_DEVICES];
	int n;
	struct reg_sub sub[MAX_SUBS];
	int n_sub;
	uint64_t seq;
};

/* Events gathered under the lock, delivered after it. */
struct ev_batch {
	struct mi_registry_event ev[MAX_EVENTS];
	int n;
};

static const char *const dim_names[] = {
	[MI_REG_COMPUTE] = "compute",
	[MI_REG_MEMORY] = "memory",
	[MI_REG_BANDWIDTH] = "bandwidth",
	[MI_REG_THERMAL] = "thermal",
	[MI_REG_POWER] = "power",
	[MI_REG_QUEUE] = "queue",
};
_Static_assert(sizeof(dim_names) / sizeof(dim_names[0]) == MI_REG_NDIM,
	       "every health dimension has a name");

const char *mi_reg_dim_name(enum mi_reg_dim d)
{
	return (unsigned)d < MI_REG_NDIM ? dim_names[d] : "?";
}

static void opts_defaults(struct mi_registry_opts *o)
{
#define DEF(f, v) do { if (!o->f) o->f = (v); } while (0)
	DEF(confirm_count, 3);
	DEF(recover_count, 5);
	DEF(degrade_below, 0.5);
	DEF(recover_above, 0.7);
	DEF(peer_margin, 0.15);
	DEF(peer_max_age_ns, 1000000000LL);
	DEF(fast_period_ns, 200000000LL);
	DEF(smooth_tau_ns, 300000000LL);
	DEF(flap_window_ns, 30000000000LL);
	DEF(flap_limit, 3);
	DEF(queue_k, 4.0);
	DEF(fail_prior_jobs, 20.0);
	DEF(flap_penalty, 0.1);
#undef DEF
}

int mi_registry_create(const struct mi_registry_opts *opts,
		       struct mi_registry **regp)
{
	struct mi_registry *reg;

	*regp = NULL;
	reg = calloc(1, sizeof(*reg));
	if (!reg)
		return mi_set_error(-ENOMEM, "registry: out of memory");
	if (opts)
		reg->o = *opts;
	opts_defaults(&reg->o);
	if (reg->o.recover_above < reg->o.degrade_below ||
	    reg->o.degrade_below > 1.0 || reg->o.recover_above > 1.0) {
		free(reg);
		return mi_set_error(-EINVAL,
				    "registry: thresholds need degrade_below <= recover_above <= 1");
	}
	pthread_mutex_init(&reg->lock, NULL);
	pthread_mutex_init(&reg->deliver, NULL);
	*regp = reg;
	return 0;
}

void mi_registry_destroy(struct mi_registry *reg)
{
	if (!reg)
		return;
	pthread_mutex_destroy(&reg->lock);
	pthread_mutex_destroy(&reg->deliver);
	free(reg);
}

static void ev_add(struct mi_registry *reg, struct ev_batch *b,
		   enum mi_registry_event_type type, int dev, int dim,
		   double value, int64_t host_ns)
{
	struct mi_registry_event *e;

	if (b->n == MAX_EVENTS)
		return;
	e = &b->ev[b->n++];
	e->type = type;
	e->device = dev;
	e->dim = dim;
	e->value = value;
	e->host_ns = host_ns;
	e->seq = ++reg->seq;
	if (mi_debug("sched"))
		fprintf(stderr, "sched: event %d dev %s dim %s value %.3f at %lld\n",
			type, reg->dev[dev].name, dim >= 0 ? dim_names[dim] : "-",
			value, (long long)host_ns);
}

/* Deliver outside the lock (subscribers may query the registry). */
static void ev_deliver(struct mi_registry *reg, struct ev_batch *b)
{
	struct reg_sub subs[MAX_SUBS];
	int n;

	if (!b->n)
		return;
	pthread_mutex_lock(&reg->deliver);
	pthread_mutex_lock(&reg->lock);
	n = reg->n_sub;
	memcpy(subs, reg->sub, sizeof(subs));
	pthread_mutex_unlock(&reg->lock);
	for (int i = 0; i < b->n; i++)
		for (int j = 0; j < n; j++)
			subs[j].cb(&b->ev[i], subs[j].arg);
	pthread_mutex_unlock(&reg->deliver);
}

int mi_registry_add_device(struct mi_registry *reg,
			   const struct mi_registry_device_info *info, int *id)
{
	struct ev_batch b = { .n = 0 };
	struct reg_dev *d;

	if (!info || !info->name || !info->klass)
		return mi_set_error(-EINVAL, "registry: a device needs a name and a class");
	pthread_mutex_lock(&reg->lock);
	if (reg->n == MI_SCHED_MAX_DEVICES) {
		pthread_mutex_unlock(&reg->lock);
		return mi_set_error(-ENOSPC, "registry: more than %d devices",
				    MI_SCHED_MAX_DEVICES);
	}
	d = &reg->dev[reg->n];
	memset(d, 0, sizeof(*d));
	snprintf(d->name, sizeof(d->name), "%s", info->name);
	snprintf(d->klass, sizeof(d->klass), "%s", info->klass);
	mi_clock_fit_init(&d->clock);
	for (int k = 0; k < MI_REG_NDIM; k++)
		d->dim[k].confirmed = 1.0;
	if (id)
		*id = reg->n;
	reg->n++;
	ev_add(reg, &b, MI_REG_EV_DEVICE_ADDED, reg->n - 1, -1, 1.0, 0);
	pthread_mutex_unlock(&reg->lock);
	ev_deliver(reg, &b);
	return 0;
}

static int dev_check(struct mi_registry *reg, int dev)
{
	if (dev < 0 || dev >= reg->n)
		return mi_set_error(-EINVAL, "registry: no device %d (%d known)",
				    dev, reg->n);
	return 0;
}

int mi_registry_device_lost(struct mi_registry *reg, int dev, int64_t host_ns)
{
	struct ev_batch b = { .n = 0 };
	int ret;

	pthread_mutex_lock(&reg->lock);
	ret = dev_check(reg, dev);
	if (!ret && !reg->dev[dev].lost) {
		reg->dev[dev].lost = true;
		ev_add(reg, &b, MI_REG_EV_DEVICE_LOST, dev, -1, 0.0, host_ns);
	}
	pthread_mutex_unlock(&reg->lock);
	ev_deliver(reg, &b);
	return ret;
}

int mi_registry_clock_pair(struct mi_registry *reg, int dev, int64_t dev_ns,
			   int64_t host_ns)
{
	int ret;

	pthread_mutex_lock(&reg->lock);
	ret = dev_check(reg, dev);
	if (!ret)
		ret = mi_clock_fit_add(&reg->dev[dev].clock, dev_ns, host_ns);
	pthread_mutex_unlock(&reg->lock);
	return ret;
}

int mi_registry_job_done(struct mi_registry *reg, int dev, bool ok)
{
	int ret;

	pthread_mutex_lock(&reg->lock);
	ret = dev_check(reg, dev);
	if (!ret) {
		reg->dev[dev].jobs++;
		if (!ok)
			reg->dev[dev].failures++;
	}
	pthread_mutex_unlock(&reg->lock);
	return ret;
}

int mi_registry_subscribe(struct mi_registry *reg, mi_registry_cb cb,
			  void *arg)
{
	int ret = 0;

	if (!cb)
		return mi_set_error(-EINVAL, "registry: subscribe needs a callback");
	pthread_mutex_lock(&reg->lock);
	if (reg->n_sub == MAX_SUBS)
		ret = mi_set_error(-ENOSPC, "registry: more than %d subscribers",
				   MAX_SUBS);
	else
		reg->sub[reg->n_sub++] = (struct reg_sub){ cb, arg };
	pthread_mutex_unlock(&reg->lock);
	return ret;
}

int mi_registry_unsubscribe(struct mi_registry *reg, mi_registry_cb cb,
			    void *arg)
{
	int ret = -ENOENT;

	pthread_mutex_lock(&reg->deliver);
	pthread_mutex_lock(&reg->lock);
	for (int i = 0; i < reg->n_sub; i++)
		if (reg->sub[i].cb == cb && reg->sub[i].arg == arg) {
			memmove(&reg->sub[i], &reg->sub[i + 1],
				(reg->n_sub - i - 1) * sizeof(reg->sub[0]));
			reg->n_sub--;
			ret = 0;
			break;
		}
	pthread_mutex_unlock(&reg->lock);
	pthread_mutex_unlock(&reg->deliver);
	return ret;
}

/* Flaps in the window ending at now. */
static uint32_t flaps_recent(const struct mi_registry_opts *o,
			     const struct reg_dim *dm, int64_t now)
{
	uint32_t n = 0;

	for (int i = 0; i < 4; i++)
		if (dm->flap_ts[i] && now - dm->flap_ts[i] <= o->flap_window_ns)
			n++;
	return n;
}

/* Flaps that count against the device: a damped dimension counts as
 * flap_limit at least, for as long as it stays damped. */
static uint32_t flaps_effective(const struct mi_registry_opts *o,
				const struct reg_dim *dm, int64_t now)
{
	uint32_t n = flaps_recent(o, dm, now);

	return dm->damped && n < o->flap_limit ? o->flap_limit : n;
}

/* Samples a run needs: doubled per flap over the limit while damped. */
static uint32_t run_needed(const struct mi_registry_opts *o,
			   const struct reg_dim *dm, uint32_t base, int64_t now)
{
	uint32_t over;

	if (!dm->damped)
		return base;
	over = flaps_effective(o, dm, now) + 1 - o->flap_limit;
	if (over > 3)
		over = 3;
	return base << over;
}

/* Median of the comparable devices' latest values of dimension k; false
 * when no peer has a fresh one. */
static bool peer_median(struct mi_registry *reg, int self, int k, int64_t now,
			double *med)
{
	double v[MI_SCHED_MAX_DEVICES];
	int n = 0;

	for (int i = 0; i < reg->n; i++) {
		const struct reg_dev *p = &reg->dev[i];
		const struct reg_dim *pd = &p->dim[k];

		if (i == self || p->lost || !pd->present ||
		    strcmp(p->klass, reg->dev[self].klass) ||
		    llabs(now - pd->last_ts) > reg->o.peer_max_age_ns)
			continue;
		v[n++] = pd->last_v;
	}
	if (!n)
		return false;
	for (int i = 1; i < n; i++)	/* insertion sort: n is small */
		for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
			double t = v[j];

			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	*med = n & 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
	return true;
}

static void transition(struct mi_registry *reg, struct ev_batch *b, int dev,
		       int k, enum mi_dim_state to, double value, int64_t now)
{
	struct reg_dim *dm = &reg->dev[dev].dim[k];

	if (dm->last_transition && now - dm->last_transition <= reg->o.flap_window_ns) {
		dm->flaps++;
		memmove(&dm->flap_ts[1], &dm->flap_ts[0], 3 * sizeof(dm->flap_ts[0]));
		dm->flap_ts[0] = now;
	}
	dm->last_transition = now;
	dm->state = to;
	dm->confirmed = value;
	dm->run = 0;
	dm->run_sum = 0;
	dm->lvl_run = 0;
	ev_add(reg, b, to == MI_DIM_DEGRADED ? MI_REG_EV_DEGRADED :
	       MI_REG_EV_RECOVERED, dev, k, value, now);
	if (!dm->damped && flaps_recent(&reg->o, dm, now) >= reg->o.flap_limit) {
		dm->damped = true;
		ev_add(reg, b, MI_REG_EV_DAMPED, dev, k, value, now);
	}
}

/* One present value v of dimension k at host time now. */
static void dim_sample(struct mi_registry *reg, struct ev_batch *b, int dev,
		       int k, double v, int64_t now)
{
	const struct mi_registry_opts *o = &reg->o;
	struct reg_dim *dm = &reg->dev[dev].dim[k];
	double med;

	/* fusion */
	if (!dm->nsamp) {
		dm->ewma = v;
		dm->prev_v = v;
		dm->prev_ts = now;
		dm->confirmed = v >= o->degrade_below ? v : 1.0;
	} else {
		double dt = (double)(now - dm->last_ts);
		double a = dt > 0 ? 1.0 - exp(-dt / (double)o->smooth_tau_ns) : 0.0;

		dm->ewma += a * (v - dm->ewma);
		dm->prev_v = dm->last_v;
		dm->prev_ts = dm->last_ts;
	}
	dm->last_v = v;
	dm->last_ts = now;
	dm->nsamp++;
	dm->present = true;
	/* damping ends after a window without flaps or odd samples */
	if (dm->damped && !flaps_recent(o, dm, now) &&
	    now - dm->last_odd > o->flap_window_ns)
		dm->damped = false;

	/* credibility */
	if (dm->state == MI_DIM_OK) {
		bool odd = v < o->degrade_below;

		if (odd && peer_median(reg, dev, k, now, &med))
			odd = v < med - o->peer_margin;
		if (!odd) {
			dm->run = 0;
			dm->run_sum = 0;
			/* the OK level follows credible samples only */
			dm->confirmed += 0.2 * (v - dm->confirmed);
			return;
		}
		dm->last_odd = now;
		dm->run++;
		dm->run_sum += v;
		if (dm->run >= run_needed(o, dm, o->confirm_count, now))
			transition(reg, b, dev, k, MI_DIM_DEGRADED,
				   dm->run_sum / dm->run, now);
		return;
	}
	if (v >= o->recover_above) {
		dm->last_odd = now;
		dm->lvl_run = 0;
		dm->run++;
		dm->run_sum += v;
		if (dm->run >= run_needed(o, dm, o->recover_count, now))
			transition(reg, b, dev, k, MI_DIM_OK,
				   dm->run_sum / dm->run, now);
		return;
	}
	dm->run = 0;
	dm->run_sum = 0;
	/* a new level inside DEGRADED, confirmed like a degradation */
	if (fabs(v - dm->confirmed) > o->peer_margin) {
		int dir = v > dm->confirmed ? 1 : -1;

		if (dm->lvl_run && dir != dm->lvl_dir)
			dm->lvl_run = 0, dm->lvl_sum = 0;
		dm->lvl_dir = dir;
		dm->lvl_run++;
		dm->lvl_sum += v;
		if (dm->lvl_run >= run_needed(o, dm, o->confirm_count, now)) {
			dm->confirmed = dm->lvl_sum / dm->lvl_run;
			dm->lvl_run = 0;
			dm->lvl_sum = 0;
			ev_add(reg, b, MI_REG_EV_DEGRADED, dev, k, dm->confirmed, now);
		}
	} else {
		dm->lvl_run = 0;
		dm->lvl_sum = 0;
	}
}

static double queue_stability(const struct reg_dev *d, double k)
{
	double mean = 0, var = 0;

	for (int i = 0; i < QWIN; i++)
		mean += d->qd[i];
	mean /= QWIN;
	for (int i = 0; i < QWIN; i++)
		var += (d->qd[i] - mean) * (d->qd[i] - mean);
	var /= QWIN;
	return 1.0 / (1.0 + k * var / ((mean + 1) * (mean + 1)));
}

int mi_registry_push(struct mi_registry *reg, int dev,
		     const struct mi_reg_sample *s)
{
	struct ev_batch b = { .n = 0 };
	double val[MI_REG_NDIM];
	uint32_t present;
	struct reg_dev *d;
	int64_t now;
	int ret;

	if (!s)
		return mi_set_error(-EINVAL, "registry: no sample");
	if (s->present >> MI_REG_NDIM || s->raw_present >> MI_REG_RAW_COUNT)
		return mi_set_error(-EINVAL, "registry: unknown bits in a sample's present masks");
	for (int k = 0; k < MI_REG_NDIM; k++)
		if (s->present & (1u << k) &&
		    !(s->value[k] >= 0.0 && s->value[k] <= 1.0))
			return mi_set_error(-EINVAL, "registry: %s value %g outside [0, 1]",
					    dim_names[k], s->value[k]);
	for (int r = 0; r < MI_REG_RAW_COUNT; r++)
		if (s->raw_present & (1u << r) && !isfinite(s->raw[r]))
			return mi_set_error(-EINVAL, "registry: raw value %d not finite", r);

	pthread_mutex_lock(&reg->lock);
	ret = dev_check(reg, dev);
	if (ret)
		goto out;
	d = &reg->dev[dev];
	if (d->lost) {
		ret = mi_set_error(-ENODEV, "registry: device %s is lost", d->name);
		goto out;
	}
	now = mi_clock_to_host(&d->clock, s->ts_ns);
	if (d->samples && now < d->last_host) {
		ret = mi_set_error(-EINVAL, "registry: %s sample goes back in time (%lld < %lld)",
				   d->name, (long long)now, (long long)d->last_host);
		goto out;
	}
	if (d->samples) {
		double dt = (double)(now - d->last_host);

		d->period_ns = d->samples == 1 ? dt : d->period_ns + 0.25 * (dt - d->period_ns);
	}
	d->last_host = now;
	d->samples++;

	present = s->present;
	memcpy(val, s->value, sizeof(val));
	for (int r = 0; r < MI_REG_RAW_COUNT; r++)
		if (s->raw_present & (1u << r))
			d->raw[r] = s->raw[r];
	d->raw_present |= s->raw_present;
	if (s->raw_present & (1u << MI_REG_RAW_QUEUE_DEPTH)) {
		d->qd[d->qpos] = s->raw[MI_REG_RAW_QUEUE_DEPTH];
		d->qpos = (d->qpos + 1) % QWIN;
		if (d->qn < QWIN)
			d->qn++;
		if (d->qn == QWIN && !(present & (1u << MI_REG_QUEUE))) {
			val[MI_REG_QUEUE] = queue_stability(d, reg->o.queue_k);
			present |= 1u << MI_REG_QUEUE;
		}
	}
	for (int k = 0; k < MI_REG_NDIM; k++)
		if (present & (1u << k))
			dim_sample(reg, &b, dev, k, val[k], now);
out:
	pthread_mutex_unlock(&reg->lock);
	ev_deliver(reg, &b);
	return ret;
}

static double dev_reliability(const struct mi_registry_opts *o,
			      const struct reg_dev *d, int64_t now)
{
	double fr = (double)d->failures / ((double)d->jobs + o->fail_prior_jobs);
	uint32_t flaps = 0;

	for (int k = 0; k < MI_REG_NDIM; k++)
		flaps += flaps_effective(o, &d->dim[k], now);
	return mi_clamp01(1.0 - fr) / (1.0 + o->flap_penalty * flaps);
}

int mi_registry_device(struct mi_registry *reg, int dev,
		       struct mi_device_view *out)
{
	const struct reg_dev *d;
	int ret;

	pthread_mutex_lock(&reg->lock);
	ret = dev_check(reg, dev);
	if (ret)
		goto out;
	d = &reg->dev[dev];
	memset(out, 0, sizeof(*out));
	memcpy(out->name, d->name, sizeof(out->name));
	memcpy(out->klass, d->klass, sizeof(out->klass));
	out->lost = d->lost;
	out->samples = d->samples;
	out->jobs = d->jobs;
	out->failures = d->failures;
	out->period_ns = d->period_ns;
	out->fast = d->samples > 1 && d->period_ns < (double)reg->o.fast_period_ns;
	for (int k = 0; k < MI_REG_NDIM; k++) {
		const struct reg_dim *dm = &d->dim[k];
		struct mi_dim_view *v = &out->dim[k];

		v->present = dm->present;
		if (!dm->present)
			continue;
		v->state = dm->state;
		v->confirmed = dm->confirmed;
		v->fused = out->fast ? dm->ewma : dm->last_v;
		v->anomalous_run = dm->run;
		v->flaps = dm->flaps;
		v->flaps_recent = flaps_recent(&reg->o, dm, d->last_host);
		memcpy(v->last_flap_ns, dm->flap_ts, sizeof(v->last_flap_ns));
		v->damped = dm->damped;
	}
	memcpy(out->raw, d->raw, sizeof(out->raw));
	out->raw_present = d->raw_present;
	out->reliability = dev_reliability(&reg->o, d, d->last_host);
	out->clock = d->clock;
out:
	pthread_mutex_unlock(&reg->lock);
	return ret;
}

int mi_registry_fused(struct mi_registry *reg, int dev, enum mi_reg_dim k,
		      int64_t host_ns, double *value)
{
	const struct reg_dim *dm;
	const struct reg_dev *d;
	int ret;

	if ((unsigned)k >= MI_REG_NDIM)
		return mi_set_error(-EINVAL, "registry: no health dimension %d", k);
	pthread_mutex_lock(&reg->lock);
	ret = dev_check(reg, dev);
	if (ret)
		goto out;
	d = &reg->dev[dev];
	dm = &d->dim[k];
	if (!dm->present) {
		ret = -ENODATA;
		goto out;
	}
	if (d->samples > 1 && d->period_ns < (double)reg->o.fast_period_ns) {
		*value = dm->ewma;
	} else if (host_ns >= dm->last_ts || dm->last_ts == dm->prev_ts) {
		*value = dm->last_v;
	} else if (host_ns <= dm->prev_ts) {
		*value = dm->prev_v;
	} else {
		double f = (double)(host_ns - dm->prev_ts) /
			   (double)(dm->last_ts - dm->prev_ts);

		*value = dm->prev_v + f * (dm->last_v - dm->prev_v);
	}
out:
	pthread_mutex_unlock(&reg->lock);
	return ret;
}

int mi_registry_count(struct mi_registry *reg)
{
	int n;

	pthread_mutex_lock(&reg->lock);
	n = reg->n;
	pthread_mutex_unlock(&reg->lock);
	return n;
}

uint64_t mi_registry_seq(struct mi_registry *reg)
{
	uint64_t s;

	pthread_mutex_lock(&reg->lock);
	s = reg->seq;
	pthread_mutex_unlock(&reg->lock);
	return s;
}

void mi_sched_dev_state_nominal(struct mi_sched_dev_state *st, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		st[i] = (struct mi_sched_dev_state){
			.available = true, .slowdown = 1.0,
			.xfer_slowdown = 1.0, .mem_fraction = 1.0,
			.reliability = 1.0,
		};
}

/*
 * Confirmed state -> what the solver needs.  Only DEGRADED dimensions
 * act (an OK one means "as predicted"): compute, thermal and power slow
 * the device by 1 / level (the worst of them), bandwidth slows its
 * transfers, memory shrinks the usable share, queue stability lowers
 * reliability.
 */
int mi_registry_solver_state(struct mi_registry *reg,
			     struct mi_sched_dev_state *st, uint32_t n)
{
	static const int slow_dims[] = { MI_REG_COMPUTE, MI_REG_THERMAL,
					 MI_REG_POWER };
	int ret = 0;

	pthread_mutex_lock(&reg->lock);
	if (n > (uint32_t)reg->n) {
		ret = mi_set_error(-EINVAL, "registry: %u devices asked, %d known",
				   n, reg->n);
		goto out;
	}
	mi_sched_dev_state_nominal(st, n);
	for (uint32_t i = 0; i < n; i++) {
		const struct reg_dev *d = &reg->dev[i];
		const struct reg_dim *dm;

		st[i].available = !d->lost;
		for (int j = 0; j < 3; j++) {
			dm = &d->dim[slow_dims[j]];
			if (dm->present && dm->state == MI_DIM_DEGRADED) {
				double f = 1.0 / fmax(0.05, dm->confirmed);

				st[i].slowdown = fmax(st[i].slowdown, f);
			}
		}
		dm = &d->dim[MI_REG_BANDWIDTH];
		if (dm->present && dm->state == MI_DIM_DEGRADED)
			st[i].xfer_slowdown = 1.0 / fmax(0.05, dm->confirmed);
		dm = &d->dim[MI_REG_MEMORY];
		if (dm->present && dm->state == MI_DIM_DEGRADED)
			st[i].mem_fraction = fmax(0.01, dm->confirmed);
		st[i].reliability = dev_reliability(&reg->o, d, d->last_host);
		dm = &d->dim[MI_REG_QUEUE];
		if (dm->present && dm->state == MI_DIM_DEGRADED)
			st[i].reliability *= dm->confirmed;
	}
out:
	pthread_mutex_unlock(&reg->lock);
	return ret;
}
