// SPDX-License-Identifier: MIT
/*
 * etcd-node: a node process for check-etcd.  It owns a few emulated
 * devices (a planted health stream each, pushed into its in-process
 * registry every 50 ms), publishes the registry's confirmed states with
 * the etcd backend, and works the streams a solver assigned to it:
 *
 *   /metainfer/<c>/assign/<stream>    "<node>/<dev>"   (the solver's)
 *   /metainfer/<c>/next/<stream>      "<i>/<n>"        next item, items
 *   /metainfer/<c>/done/<stream>/<i>  "<node>/<dev>"   one per item
 *
 * An item "runs" for --item-ms times its device's slowdown, then
 * completes with one transaction: if the stream is still assigned here
 * and next is still i, next becomes i + 1 and done/<i> is written.  So
 * an item completes exactly once whoever runs it, and an item a killed
 * node was running is run again by the next owner.
 *
 *   etcd-node --node NAME [--registry local|etcd://HOST:PORT/CLUSTER]
 *             --dev NAME:CLASS ... [--ttl S] [--item-ms MS] [--run-ms MS]
 *             [--degrade DEV@MS] [--odd DEV@MS]
 *
 * --degrade: the device's thermal headroom drops to 0.3 from MS on;
 * --odd: one thermal sample of 0.2 at MS (never confirmed, never
 * published).  stdout: "done <stream> <i> <dev>" per completed item,
 * "local <dev> <event> <dim> <value>" per confirmed registry event.
 * stderr: one line when etcd cannot be reached (the node keeps running
 * on local state) and one when it answers again.  SIGTERM: stop, revoke
 * the lease, exit 0.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "metainfer/metainfer.h"
#include "etcd.h"
#include "scheduler.h"

#define MAX_DEV 8
#define MAX_STREAMS 32
#define SAMPLE_NS 50000000LL

static volatile sig_atomic_t stop;

struct dev {
	char name[32], klass[64];
	int id;
	int64_t degrade_ns, odd_ns;	/* < 0: none */
	bool odd_done;
};

struct node {
	const char *name;
	struct mi_registry_backend_cfg cfg;
	struct mi_registry *reg;
	struct mi_etcd_node *pub;
	struct dev dev[MAX_DEV];
	int n_dev;
	int64_t t0, next_sample;
	bool etcd_down;		/* said so on stderr */
	uint64_t items, races, events;
	uint32_t rr;
};

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void on_signal(int sig)
{
	stop = 1;
}

static const char *const ev_names[] = {
	"degraded", "recovered", "damped", "added", "lost",
};

static void on_event(const struct mi_registry_event *ev, void *arg)
{
	struct node *n = arg;

	n->events++;
	if (ev->dim < 0)
		return;
	printf("local %s %s %s %.3f\n", n->dev[ev->device].name,
	       ev_names[ev->type], mi_reg_dim_name(ev->dim), ev->value);
}

/* etcd answered (ok) or not: one line per change on stderr. */
static void etcd_state(struct node *n, bool ok, const char *why)
{
	if (!ok && !n->etcd_down)
		fprintf(stderr, "etcd-node %s: %s; running on local state\n",
			n->name, why);
	else if (ok && n->etcd_down)
		fprintf(stderr, "etcd-node %s: etcd answers again\n", n->name);
	n->etcd_down = !ok;
}

static void push_samples(struct node *n)
{
	int64_t t = now_ns();

	if (t < n->next_sample)
		return;
	n->next_sample = t + SAMPLE_NS;
	for (int i = 0; i < n->n_dev; i++) {
		struct dev *d = &n->dev[i];
		struct mi_reg_sample s = {
			.ts_ns = t,
			.present = 1u << MI_REG_COMPUTE | 1u << MI_REG_THERMAL,
			.value = { [MI_REG_COMPUTE] = 0.95, [MI_REG_THERMAL] = 0.9 },
		};

		if (d->degrade_ns >= 0 && t - n->t0 >= d->degrade_ns)
			s.value[MI_REG_THERMAL] = 0.3;
		if (d->odd_ns >= 0 && !d->odd_done && t - n->t0 >= d->odd_ns) {
			s.value[MI_REG_THERMAL] = 0.2;
			d->odd_done = true;
		}
		if (mi_registry_push(n->reg, d->id, &s))
			fprintf(stderr, "etcd-node %s: %s\n", n->name, mi_last_error());
	}
}

/* Sleep ms, pushing samples on time. */
static void work_sleep(struct node *n, int64_t ns)
{
	int64_t end = now_ns() + ns;

	while (!stop) {
		int64_t left = end - now_ns();

		push_samples(n);
		if (left <= 0)
			break;
		if (left > 10000000)
			left = 10000000;
		nanosleep(&(struct timespec){ 0, left }, NULL);
	}
}

struct streams {
	struct node *n;
	char name[MAX_STREAMS][32];
	char dev[MAX_STREAMS][32];	/* assigned to this node: its device */
	int64_t next[MAX_STREAMS], items[MAX_STREAMS];
	int count;
	const char *prefix;
};

static int find_stream(struct streams *s, const char *name, bool add)
{
	for (int i = 0; i < s->count; i++)
		if (!strcmp(s->name[i], name))
			return i;
	if (!add || s->count == MAX_STREAMS)
		return -1;
	snprintf(s->name[s->count], sizeof(s->name[0]), "%s", name);
	s->dev[s->count][0] = 0;
	s->next[s->count] = s->items[s->count] = 0;
	return s->count++;
}

static int assign_cb(const char *key, const char *val, size_t len,
		     int64_t mod_rev, void *arg)
{
	struct streams *s = arg;
	size_t nl = strlen(s->n->name);
	int i = find_stream(s, key + strlen(s->prefix), true);

	if (i >= 0 && len > nl && !strncmp(val, s->n->name, nl) && val[nl] == '/')
		snprintf(s->dev[i], sizeof(s->dev[i]), "%s", val + nl + 1);
	return 0;
}

static int next_cb(const char *key, const char *val, size_t len,
		   int64_t mod_rev, void *arg)
{
	struct streams *s = arg;
	int i = find_stream(s, key + strlen(s->prefix), true);
	long long a, b;

	if (i >= 0 && sscanf(val, "%lld/%lld", &a, &b) == 2) {
		s->next[i] = a;
		s->items[i] = b;
	}
	return 0;
}

static double dev_slowdown(struct node *n, int id)
{
	struct mi_sched_dev_state st[MAX_DEV];

	if (mi_registry_solver_state(n->reg, st, (uint32_t)n->n_dev))
		return 1.0;
	return st[id].slowdown;
}

/* One item of one assigned stream; false when there was nothing to do. */
static bool work_step(struct node *n, int64_t item_ns)
{
	const struct mi_etcd_opts *o = &n->cfg.etcd;
	char pa[128], pn[128], k_assign[192], k_next[192], k_done[224];
	char mine[96], cur[48], nxt[48];
	struct streams s = { .n = n };
	struct mi_etcd_cmp cmp[2];
	struct mi_etcd_kv put[2];
	int pick = -1, id = -1;
	bool ok;

	snprintf(pa, sizeof(pa), "/metainfer/%s/assign/", o->cluster);
	snprintf(pn, sizeof(pn), "/metainfer/%s/next/", o->cluster);
	s.prefix = pa;
	if (mi_etcd_range(o, pa, assign_cb, &s, NULL))
		goto down;
	s.prefix = pn;
	if (mi_etcd_range(o, pn, next_cb, &s, NULL))
		goto down;
	etcd_state(n, true, NULL);
	for (int k = 0; k < s.count; k++) {
		int i = (int)((n->rr + k) % s.count);

		if (s.dev[i][0] && s.next[i] < s.items[i]) {
			pick = i;
			break;
		}
	}
	if (pick < 0)
		return false;
	n->rr = pick + 1;
	for (int i = 0; i < n->n_dev; i++)
		if (!strcmp(n->dev[i].name, s.dev[pick]))
			id = i;
	if (id < 0) {
		fprintf(stderr, "etcd-node %s: stream %s assigned to an unknown device %s\n",
			n->name, s.name[pick], s.dev[pick]);
		return false;
	}
	/* run it */
	work_sleep(n, (int64_t)(item_ns * dev_slowdown(n, id)));
	if (stop)
		return false;
	snprintf(k_assign, sizeof(k_assign), "%s%s", pa, s.name[pick]);
	snprintf(k_next, sizeof(k_next), "%s%s", pn, s.name[pick]);
	snprintf(k_done, sizeof(k_done), "/metainfer/%s/done/%s/%06lld", o->cluster,
		 s.name[pick], (long long)s.next[pick]);
	snprintf(mine, sizeof(mine), "%s/%s", n->name, s.dev[pick]);
	snprintf(cur, sizeof(cur), "%lld/%lld", (long long)s.next[pick],
		 (long long)s.items[pick]);
	snprintf(nxt, sizeof(nxt), "%lld/%lld", (long long)s.next[pick] + 1,
		 (long long)s.items[pick]);
	cmp[0] = (struct mi_etcd_cmp){ k_assign, mine };
	cmp[1] = (struct mi_etcd_cmp){ k_next, cur };
	put[0] = (struct mi_etcd_kv){ k_next, nxt };
	put[1] = (struct mi_etcd_kv){ k_done, mine };
	if (mi_etcd_txn(o, cmp, 2, put, 2, &ok))
		goto down;
	mi_registry_job_done(n->reg, id, true);
	if (ok) {
		n->items++;
		printf("done %s %lld %s\n", s.name[pick], (long long)s.next[pick],
		       s.dev[pick]);
	} else {
		/* moved or done elsewhere meanwhile: this run is discarded */
		n->races++;
		printf("race %s %lld %s\n", s.name[pick], (long long)s.next[pick],
		       s.dev[pick]);
	}
	return true;
down:
	etcd_state(n, false, mi_last_error());
	return false;
}

static int parse_at(const char *arg, char *dev, size_t cap, int64_t *ms)
{
	const char *at = strchr(arg, '@');

	if (!at || (size_t)(at - arg) >= cap)
		return -1;
	memcpy(dev, arg, at - arg);
	dev[at - arg] = 0;
	*ms = strtoll(at + 1, NULL, 10);
	return 0;
}

static int usage(void)
{
	fprintf(stderr, "usage: etcd-node --node NAME [--registry local|etcd://HOST:PORT/CLUSTER]\n"
		"                 --dev NAME:CLASS ... [--ttl S] [--item-ms MS] [--run-ms MS]\n"
		"                 [--degrade DEV@MS] [--odd DEV@MS]\n");
	return 2;
}

int main(int argc, char **argv)
{
	const char *spec = "local";
	int64_t item_ms = 10, run_ms = 0, ttl = 2;
	struct node n = { 0 };
	struct {
		char dev[32];
		int64_t ms;
		bool degrade;
	} plant[16];
	int n_plant = 0, ret;

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!v)
			return usage();
		i++;
		if (!strcmp(a, "--node")) {
			n.name = v;
		} else if (!strcmp(a, "--registry")) {
			spec = v;
		} else if (!strcmp(a, "--dev")) {
			const char *c = strchr(v, ':');
			struct dev *d = &n.dev[n.n_dev];

			if (!c || n.n_dev == MAX_DEV || (size_t)(c - v) >= sizeof(d->name))
				return usage();
			memcpy(d->name, v, c - v);
			snprintf(d->klass, sizeof(d->klass), "%s", c + 1);
			d->degrade_ns = d->odd_ns = -1;
			n.n_dev++;
		} else if (!strcmp(a, "--ttl")) {
			ttl = strtoll(v, NULL, 10);
		} else if (!strcmp(a, "--item-ms")) {
			item_ms = strtoll(v, NULL, 10);
		} else if (!strcmp(a, "--run-ms")) {
			run_ms = strtoll(v, NULL, 10);
		} else if ((!strcmp(a, "--degrade") || !strcmp(a, "--odd")) && n_plant < 16) {
			if (parse_at(v, plant[n_plant].dev, sizeof(plant[0].dev),
				     &plant[n_plant].ms))
				return usage();
			plant[n_plant++].degrade = a[2] == 'd';
		} else {
			return usage();
		}
	}
	if (!n.name || !n.n_dev || ttl < 1 || item_ms < 0)
		return usage();
	for (int p = 0; p < n_plant; p++) {
		struct dev *d = NULL;

		for (int i = 0; i < n.n_dev; i++)
			if (!strcmp(n.dev[i].name, plant[p].dev))
				d = &n.dev[i];
		if (!d) {
			fprintf(stderr, "etcd-node %s: no device %s\n", n.name, plant[p].dev);
			return 2;
		}
		if (plant[p].degrade)
			d->degrade_ns = plant[p].ms * 1000000LL;
		else
			d->odd_ns = plant[p].ms * 1000000LL;
	}
	if (mi_registry_backend_parse(spec, &n.cfg)) {
		fprintf(stderr, "etcd-node: %s\n", mi_last_error());
		return 2;
	}
	if (mi_registry_create(NULL, &n.reg)) {
		fprintf(stderr, "etcd-node: %s\n", mi_last_error());
		return 1;
	}
	for (int i = 0; i < n.n_dev; i++) {
		struct mi_registry_device_info info = { n.dev[i].name, n.dev[i].klass };

		if (mi_registry_add_device(n.reg, &info, &n.dev[i].id)) {
			fprintf(stderr, "etcd-node: %s\n", mi_last_error());
			return 1;
		}
	}
	mi_registry_subscribe(n.reg, on_event, &n);
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);

	if (n.cfg.kind == MI_REG_BACKEND_ETCD) {
		snprintf(n.cfg.etcd.node, sizeof(n.cfg.etcd.node), "%s", n.name);
		n.cfg.etcd.ttl_s = (uint32_t)ttl;
		ret = mi_etcd_node_start(n.reg, &n.cfg.etcd, &n.pub);
		if (ret == -EINVAL) {
			fprintf(stderr, "etcd-node: %s\n", mi_last_error());
			return 2;	/* a bad name is not an outage */
		}
		if (ret)
			etcd_state(&n, false, mi_last_error());
		else {
			struct mi_etcd_node_status st;

			mi_etcd_node_status(n.pub, &st);
			printf("node %s: publishing to etcd %s:%u, lease %lld\n", n.name,
			       n.cfg.etcd.host, n.cfg.etcd.port, (long long)st.lease);
		}
	} else {
		printf("node %s: registry local\n", n.name);
	}

	n.t0 = now_ns();
	while (!stop && (!run_ms || now_ns() - n.t0 < run_ms * 1000000LL)) {
		push_samples(&n);
		if (n.pub && work_step(&n, item_ms * 1000000LL))
			continue;
		work_sleep(&n, 10000000);
	}
	if (n.pub) {
		struct mi_etcd_node_status st;

		mi_etcd_node_status(n.pub, &st);
		mi_etcd_node_stop(n.pub, !n.etcd_down);
		printf("node %s: stopped: items %llu, races %llu, published %llu, "
		       "relets %llu, registry events %llu\n", n.name,
		       (unsigned long long)n.items, (unsigned long long)n.races,
		       (unsigned long long)st.publishes, (unsigned long long)st.relets,
		       (unsigned long long)n.events);
	} else {
		printf("node %s: stopped: registry local, registry events %llu\n",
		       n.name, (unsigned long long)n.events);
	}
	mi_registry_unsubscribe(n.reg, on_event, &n);
	mi_registry_destroy(n.reg);
	return 0;
}
