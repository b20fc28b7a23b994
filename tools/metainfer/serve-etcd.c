// SPDX-License-Identifier: GPL-2.0-only
/*
 * metainfer serve --registry etcd://HOST[:PORT][/CLUSTER]: one serve per
 * machine (node), one etcd for all of them.
 *
 *  - The node's registry publishes its confirmed device states under its
 *    lease (mi_etcd_node_start: /metainfer/<c>/nodes/<node>/devices/...);
 *    a watch (mi_etcd_watch_start) reports other nodes joining, their
 *    devices' confirmed changes, and leaving (their lease expired).
 *  - Streams are the cluster's: every serve is started with the same
 *    models and --streams, so stream k exists (loaded, placed) on every
 *    node, and runs on the one that owns it:
 *
 *      /metainfer/<c>/streams/<k>/owner   "<node>"
 *      /metainfer/<c>/streams/<k>/done    "<i>": items 0..i-1 completed
 *
 *    Item i of stream k is its i-th inference; it completes with one
 *    transaction: if owner is still me and done is still i, done = i + 1.
 *    So every item completes exactly once whoever runs it; a run whose
 *    stream moved meanwhile is discarded (and counted).
 *  - A thread looks every 250 ms (at once when the watch sees a node
 *    leave): which nodes are alive (one range of nodes/: a node is alive
 *    while it has a device key, i.e. while its lease lives), who owns
 *    which stream.  It claims the streams of --own nobody has (owner
 *    absent) and adopts those whose owner is not alive, each with a
 *    transaction on the owner and done values it read, so two survivors
 *    cannot both adopt and a partitioned owner's late commit fails.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "etcd.h"
#include "serve-etcd.h"

#define SE_MAX_STREAMS 64
#define SE_MAX_NODES 64
#define SE_SCAN_NS 250000000LL

struct se_stream {
	atomic_bool owned;
	atomic_llong next;	/* next item (the stream thread's while owned) */
	/* counts: committed here, discarded runs, where ownership began */
	atomic_ullong committed, discarded;
	int64_t first_item;
	char from[32];		/* "" claimed, else the node adopted from */
};

struct serve_etcd {
	struct mi_etcd_opts o;
	struct mi_registry *reg;
	struct mi_etcd_node *pub;
	struct mi_etcd_watch *watch;
	int nstreams;
	uint64_t own;
	bool json;
	struct se_stream st[SE_MAX_STREAMS];
	int orphan_looks[SE_MAX_STREAMS];	/* the scanning thread's */
	pthread_t th;
	atomic_bool stop, rescan, down;
	pthread_mutex_t lock;
	pthread_cond_t cond;
};

/* what one scan reads */
struct se_view {
	const struct serve_etcd *e;
	char nodes[SE_MAX_NODES][32];
	int cap[SE_MAX_NODES];	/* its devices published as available */
	int load[SE_MAX_NODES];	/* streams it owns (+ planned adoptions) */
	int nnodes;
	char owner[SE_MAX_STREAMS][32];	/* "" absent */
	char done[SE_MAX_STREAMS][24];	/* "" absent */
};

static int64_t se_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void se_key(const struct serve_etcd *e, int k, const char *what,
		   char *buf, size_t cap)
{
	snprintf(buf, cap, "/metainfer/%s/streams/%d/%s", e->o.cluster, k,
		 what);
}

static int nodes_cb(const char *key, const char *val, size_t len,
		    int64_t mod_rev, void *arg)
{
	struct se_view *v = arg;
	char pfx[96], name[32];
	const char *p, *slash;

	snprintf(pfx, sizeof(pfx), "/metainfer/%s/nodes/", v->e->o.cluster);
	if (strncmp(key, pfx, strlen(pfx)))
		return 0;
	p = key + strlen(pfx);
	slash = strchr(p, '/');
	if (!slash || slash - p >= (long)sizeof(name))
		return 0;
	memcpy(name, p, slash - p);
	name[slash - p] = 0;
	/* key order: a node's keys are adjacent */
	if ((!v->nnodes || strcmp(v->nodes[v->nnodes - 1], name)) &&
	    v->nnodes < SE_MAX_NODES)
		snprintf(v->nodes[v->nnodes++], sizeof(v->nodes[0]), "%s", name);
	if (v->nnodes && !strcmp(v->nodes[v->nnodes - 1], name) &&
	    memmem(val, len, "\"available\":true", 16))
		v->cap[v->nnodes - 1]++;
	return 0;
}

static int streams_cb(const char *key, const char *val, size_t len,
		      int64_t mod_rev, void *arg)
{
	struct se_view *v = arg;
	char pfx[96], what[16];
	int k;

	snprintf(pfx, sizeof(pfx), "/metainfer/%s/streams/", v->e->o.cluster);
	if (strncmp(key, pfx, strlen(pfx)) ||
	    sscanf(key + strlen(pfx), "%d/%15s", &k, what) != 2 || k < 0 ||
	    k >= v->e->nstreams)
		return 0;
	if (!strcmp(what, "owner"))
		snprintf(v->owner[k], sizeof(v->owner[k]), "%.*s", (int)len, val);
	else if (!strcmp(what, "done"))
		snprintf(v->done[k], sizeof(v->done[k]), "%.*s", (int)len, val);
	return 0;
}

static int node_index(const struct se_view *v, const char *node)
{
	for (int i = 0; i < v->nnodes; i++)
		if (!strcmp(v->nodes[i], node))
			return i;
	return -1;
}

static bool alive(const struct se_view *v, const char *node)
{
	return node_index(v, node) >= 0;
}

/*
 * The node an orphaned stream should go to: the live one with the least
 * load per available device (ties: the name first in key order), its
 * load counted up so the next orphan sees it.  Every node computes the
 * same from the same keys; -1 if no node has an available device.
 */
static int pick_adopter(struct se_view *v)
{
	int best = -1;

	for (int i = 0; i < v->nnodes; i++) {
		if (!v->cap[i])
			continue;
		/* (load + 1) / cap compared without division */
		if (best < 0 || (int64_t)(v->load[i] + 1) * v->cap[best] <
					(int64_t)(v->load[best] + 1) * v->cap[i])
			best = i;
	}
	if (best >= 0)
		v->load[best]++;
	return best;
}

static void set_down(struct serve_etcd *e, bool down)
{
	if (atomic_exchange(&e->down, down) == down)
		return;
	if (down)
		fprintf(stderr, "serve: etcd: %s; streams held until it answers\n",
			mi_last_error());
	else
		fprintf(stderr, "serve: etcd answers again\n");
}

/* Take stream k from owner (NULL: nobody) at the done value read. */
static void take(struct serve_etcd *e, int k, const struct se_view *v)
{
	char ko[128], kd[128], nd[24];
	const char *old = v->owner[k][0] ? v->owner[k] : NULL;
	const char *done = v->done[k][0] ? v->done[k] : NULL;
	struct mi_etcd_cmp cmp[2];
	struct mi_etcd_kv put[2];
	struct se_stream *s = &e->st[k];
	int64_t item = done ? strtoll(done, NULL, 10) : 0;
	bool ok;

	se_key(e, k, "owner", ko, sizeof(ko));
	se_key(e, k, "done", kd, sizeof(kd));
	snprintf(nd, sizeof(nd), "%" PRId64, item);
	cmp[0] = (struct mi_etcd_cmp){ ko, old };
	cmp[1] = (struct mi_etcd_cmp){ kd, done };
	put[0] = (struct mi_etcd_kv){ ko, e->o.node };
	put[1] = (struct mi_etcd_kv){ kd, nd };
	if (mi_etcd_txn(&e->o, cmp, 2, put, 2, &ok)) {
		set_down(e, true);
		return;
	}
	if (!ok)
		return;		/* someone else was faster: next scan */
	atomic_store(&s->next, item);
	s->first_item = item;
	snprintf(s->from, sizeof(s->from), "%s", old ? old : "");
	atomic_store(&s->owned, true);
	if (e->json)
		printf("{\"etcd_event\": \"%s\", \"stream\": %d, \"from\": \"%s\", \"item\": %" PRId64 "}\n",
		       old ? "adopted" : "claimed", k, old ? old : "", item);
	else if (old)
		printf("etcd: stream %d adopted from %s at item %" PRId64 " (%s left)\n",
		       k, old, item, old);
	else
		printf("etcd: stream %d claimed at item %" PRId64 "\n", k, item);
	fflush(stdout);
}

static void scan(struct serve_etcd *e)
{
	static struct se_view v;	/* one scanning thread */
	char pn[96], ps[96];

	memset(&v, 0, sizeof(v));
	v.e = e;
	snprintf(pn, sizeof(pn), "/metainfer/%s/nodes/", e->o.cluster);
	snprintf(ps, sizeof(ps), "/metainfer/%s/streams/", e->o.cluster);
	/* nodes first: a stream claimed after its owner published is never
	 * seen with its owner missing */
	if (mi_etcd_range(&e->o, pn, nodes_cb, &v, NULL) ||
	    mi_etcd_range(&e->o, ps, streams_cb, &v, NULL)) {
		set_down(e, true);
		return;
	}
	set_down(e, false);
	for (int k = 0; k < e->nstreams; k++) {
		int i = v.owner[k][0] ? node_index(&v, v.owner[k]) : -1;

		if (i >= 0)
			v.load[i]++;
	}
	for (int k = 0; k < e->nstreams; k++) {
		struct se_stream *s = &e->st[k];
		bool mine = !strcmp(v.owner[k], e->o.node);
		bool orphan = v.owner[k][0] && !alive(&v, v.owner[k]);
		int to = orphan ? pick_adopter(&v) : -1;

		/* an orphan that its adopter leaves (slow, or it saw other
		 * keys) is taken by anyone after 4 looks (1 s) */
		if (!orphan)
			e->orphan_looks[k] = 0;
		else if (to < 0 || strcmp(v.nodes[to], e->o.node))
			if (++e->orphan_looks[k] < 4)
				continue;

		if (atomic_load(&s->owned) && !mine) {
			atomic_store(&s->owned, false);
			if (e->json)
				printf("{\"etcd_event\": \"lost\", \"stream\": %d, \"to\": \"%s\"}\n",
				       k, v.owner[k]);
			else
				printf("etcd: stream %d lost to %s\n", k,
				       v.owner[k][0] ? v.owner[k] : "nobody");
			fflush(stdout);
			continue;
		}
		if (atomic_load(&s->owned))
			continue;
		if (mine || orphan || (!v.owner[k][0] && (e->own >> k & 1)))
			take(e, k, &v);
	}
}

static void *se_main(void *arg)
{
	struct serve_etcd *e = arg;
	int64_t next = 0;

	while (!atomic_load(&e->stop)) {
		int64_t t = se_now();

		if (t >= next || atomic_exchange(&e->rescan, false)) {
			scan(e);
			next = t + SE_SCAN_NS;
		}
		pthread_mutex_lock(&e->lock);
		if (!atomic_load(&e->stop) && !atomic_load(&e->rescan)) {
			struct timespec ts;

			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 20000000;
			if (ts.tv_nsec >= 1000000000) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000;
			}
			pthread_cond_timedwait(&e->cond, &e->lock, &ts);
		}
		pthread_mutex_unlock(&e->lock);
	}
	return NULL;
}

static void on_watch(const struct mi_etcd_event *ev, void *arg)
{
	struct serve_etcd *e = arg;
	const struct mi_etcd_device *d = ev->dev;

	static const char *const what[] = { "joined", "device", "gone", "left" };

	if (!strcmp(d->node, e->o.node))
		return;		/* our own keys */
	if (e->json) {
		if (ev->type != MI_ETCD_EV_DEVICE_GONE)
			printf("{\"etcd_event\": \"%s\", \"node\": \"%s\", \"device\": \"%s\", \"available\": %s, \"slowdown\": %.4f, \"degraded\": %s, \"revision\": %" PRId64 "}\n",
			       what[ev->type], d->node, d->dev,
			       d->state.available ? "true" : "false",
			       d->state.slowdown, d->degraded ? "true" : "false",
			       ev->revision);
		goto out;
	}
	switch (ev->type) {
	case MI_ETCD_EV_NODE_JOINED:
		printf("etcd: node %s joined (revision %" PRId64 ")\n", d->node,
		       ev->revision);
		break;
	case MI_ETCD_EV_DEVICE_PUT:
		printf("etcd: %s/%s confirmed: available %s, slowdown %.2f%s\n",
		       d->node, d->dev, d->state.available ? "yes" : "no",
		       d->state.slowdown, d->degraded ? " (degraded)" : "");
		break;
	case MI_ETCD_EV_DEVICE_GONE:
		break;
	case MI_ETCD_EV_NODE_LEFT:
		printf("etcd: node %s left (its lease is gone, revision %" PRId64 ")\n",
		       d->node, ev->revision);
		break;
	}
out:
	if (ev->type == MI_ETCD_EV_NODE_LEFT) {
		pthread_mutex_lock(&e->lock);
		atomic_store(&e->rescan, true);
		pthread_cond_signal(&e->cond);
		pthread_mutex_unlock(&e->lock);
	}
	fflush(stdout);
}

int serve_etcd_start(struct mi_registry *reg, const struct serve_etcd_opts *o,
		     struct serve_etcd **ep)
{
	struct mi_registry_backend_cfg cfg;
	struct serve_etcd *e;
	int ret;

	*ep = NULL;
	ret = mi_registry_backend_parse(o->spec, &cfg);
	if (ret)
		return ret;
	if (cfg.kind != MI_REG_BACKEND_ETCD)
		return 0;	/* local: nothing to start */
	if (o->nstreams > SE_MAX_STREAMS)
		return mi_set_error(-EINVAL, "etcd: at most %d streams",
				    SE_MAX_STREAMS);
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->o = cfg.etcd;
	snprintf(e->o.node, sizeof(e->o.node), "%s", o->node);
	if (o->ttl_s)
		e->o.ttl_s = o->ttl_s;
	e->reg = reg;
	e->nstreams = o->nstreams;
	e->own = o->own;
	e->json = o->json;
	pthread_mutex_init(&e->lock, NULL);
	pthread_cond_init(&e->cond, NULL);
	ret = mi_etcd_node_start(reg, &e->o, &e->pub);
	if (ret)
		goto err_free;
	ret = mi_etcd_watch_start(&e->o, on_watch, e, &e->watch);
	if (ret)
		goto err_node;
	if (pthread_create(&e->th, NULL, se_main, e)) {
		ret = mi_set_error(-EAGAIN, "etcd: cannot start a thread");
		goto err_watch;
	}
	*ep = e;
	return 0;
err_watch:
	mi_etcd_watch_stop(e->watch);
err_node:
	mi_etcd_node_stop(e->pub, true);
err_free:
	free(e);
	return ret;
}

bool serve_etcd_owns(struct serve_etcd *e, int k, int64_t *item)
{
	if (k < 0 || k >= e->nstreams || !atomic_load(&e->st[k].owned) ||
	    atomic_load(&e->down))
		return false;
	*item = atomic_load(&e->st[k].next);
	return true;
}

int serve_etcd_commit(struct serve_etcd *e, int k, int64_t item)
{
	struct se_stream *s = &e->st[k];
	char ko[128], kd[128], cur[24], nxt[24];
	struct mi_etcd_cmp cmp[2];
	struct mi_etcd_kv put[1];
	bool ok;

	se_key(e, k, "owner", ko, sizeof(ko));
	se_key(e, k, "done", kd, sizeof(kd));
	snprintf(cur, sizeof(cur), "%" PRId64, item);
	snprintf(nxt, sizeof(nxt), "%" PRId64, item + 1);
	cmp[0] = (struct mi_etcd_cmp){ ko, e->o.node };
	cmp[1] = (struct mi_etcd_cmp){ kd, cur };
	put[0] = (struct mi_etcd_kv){ kd, nxt };
	if (mi_etcd_txn(&e->o, cmp, 2, put, 1, &ok)) {
		/* not known whether it landed: the next scan re-reads done */
		atomic_store(&s->owned, false);
		atomic_fetch_add(&s->discarded, 1);
		set_down(e, true);
		return -EIO;
	}
	if (!ok) {
		atomic_store(&s->owned, false);
		atomic_fetch_add(&s->discarded, 1);
		return 0;
	}
	atomic_store(&s->next, item + 1);
	atomic_fetch_add(&s->committed, 1);
	return 1;
}

void serve_etcd_print(struct serve_etcd *e, bool json, bool final)
{
	struct mi_etcd_node_status ns;
	struct mi_etcd_device dev[64];
	uint32_t ndev = 0;
	char nodes[256] = "";
	size_t o = 0;

	mi_etcd_node_status(e->pub, &ns);
	mi_etcd_watch_devices(e->watch, dev, 64, &ndev);
	for (uint32_t i = 0; i < ndev && o < sizeof(nodes); i++)
		if (!i || strcmp(dev[i].node, dev[i - 1].node))
			o += snprintf(nodes + o, sizeof(nodes) - o, "%s%s",
				      o ? "," : "", dev[i].node);
	if (json)
		printf("{\"etcd\": {\"node\": \"%s\", \"final\": %s, \"connected\": %s, \"lease\": %" PRId64
		       ", \"nodes\": \"%s\", \"streams\": [",
		       e->o.node, final ? "true" : "false",
		       ns.connected ? "true" : "false", ns.lease, nodes);
	else
		printf("etcd %s: node %s, lease %" PRId64 ", nodes %s\n",
		       final ? "summary" : (ns.connected ? "connected" : "DOWN"),
		       e->o.node, ns.lease, nodes[0] ? nodes : "-");
	for (int k = 0; k < e->nstreams; k++) {
		struct se_stream *s = &e->st[k];
		unsigned long long c = atomic_load(&s->committed);
		unsigned long long d = atomic_load(&s->discarded);
		bool own = atomic_load(&s->owned);
		long long next = atomic_load(&s->next);

		if (json) {
			printf("%s{\"stream\": %d, \"owned\": %s, \"next\": %lld, \"committed\": %llu, \"discarded\": %llu}",
			       k ? ", " : "", k, own ? "true" : "false", next,
			       c, d);
			continue;
		}
		if (!own && !c && !d)
			continue;
		printf("etcd stream %d: %s, next item %lld, committed here %llu, discarded %llu\n",
		       k, own ? "owned" : "not owned", next, c, d);
	}
	if (json)
		printf("]}}\n");
	fflush(stdout);
}

void serve_etcd_stop(struct serve_etcd *e)
{
	if (!e)
		return;
	pthread_mutex_lock(&e->lock);
	atomic_store(&e->stop, true);
	pthread_cond_signal(&e->cond);
	pthread_mutex_unlock(&e->lock);
	pthread_join(e->th, NULL);
	mi_etcd_watch_stop(e->watch);
	mi_etcd_node_stop(e->pub, true);
	free(e);
}
