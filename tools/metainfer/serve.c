// SPDX-License-Identifier: GPL-2.0-only
/*
 * metainfer serve: continuous inference streams with live adaptation.
 * One thread per stream runs its model back to back; lib/health samples
 * the devices (every 100 ms by default) into the live layer
 * (scheduler/live.h: registry, planner, meta-controller), which re-solves
 * the placement and picks each switchable model's structure when the
 * registry confirms a change; the streams take it between inferences.
 * Once a second: per device its health and confirmed state, per stream
 * latency, placement and structure; each switch's chain as it completes;
 * a summary at the end.  Documentation/live.rst.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "internal.h"
#include "device/device.h"
#include "health/health.h"
#include "live.h"
#include "serve-etcd.h"

#define SERVE_MAX_DEVS 16
#define SERVE_MAX_INJECT 8

struct serve;

struct stream {
	struct serve *sv;
	struct mi_live *live;
	struct mi_model *model;
	const char *path;
	int id;
	struct mi_value *in;
	int nin;
	atomic_bool *stop;
	pthread_t th;
	/* device jobs per device (index in serve.devs) since the last print */
	atomic_ulong jobs[SERVE_MAX_DEVS];
	/* with etcd: the item being run and its inferences so far */
	int64_t item;
	int item_runs;
};

/* --heat DEV:START:END[:LEVEL]: thermal headroom LEVEL on DEV from START
 * to END seconds after the start, in place of what the sampler read
 * (outside the window: its own reading, 1.0 without a sensor). */
struct inject {
	int dev;
	double t0, t1, level;
};

struct serve {
	struct mi_live *live;
	struct mi_dev *devs[SERVE_MAX_DEVS];
	int ndev;
	struct inject inj[SERVE_MAX_INJECT];
	int ninj;
	int64_t t_start;
	pthread_mutex_t lock;
	struct mi_health_vec last[SERVE_MAX_DEVS];
	bool have[SERVE_MAX_DEVS];
	int push_err;
	FILE *timeline;		/* --timeline: one JSON line per chain */
	int runs_per_item;	/* --item-runs */
	struct serve_etcd *etcd;	/* --registry etcd://: streams owned there */
};

static volatile sig_atomic_t serve_stop;

static void serve_sigint(int sig)
{
	serve_stop = 1;
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void on_round(const struct mi_health_vec *v, int n, void *arg)
{
	struct serve *sv = arg;
	double t = (now_ns() - sv->t_start) / 1e9;

	for (int i = 0; i < n && i < sv->ndev; i++) {
		struct mi_health_vec x = v[i];

		for (int j = 0; j < sv->ninj; j++) {
			const struct inject *in = &sv->inj[j];

			if (in->dev != i)
				continue;
			/* the injected sensor reads the whole run: LEVEL in
			 * the window, outside it the device's own sensor or,
			 * without one, full headroom */
			if (t >= in->t0 && t < in->t1)
				x.v[MI_HEALTH_THERMAL] = in->level;
			else if (!mi_health_has(&x, MI_HEALTH_THERMAL))
				x.v[MI_HEALTH_THERMAL] = 1.0;
			x.present |= 1u << MI_HEALTH_THERMAL;
		}
		if (mi_live_push_health(sv->live, i, &x) < 0)
			sv->push_err++;
		pthread_mutex_lock(&sv->lock);
		sv->last[i] = x;
		sv->have[i] = true;
		pthread_mutex_unlock(&sv->lock);
	}
}

/* Where the stream's last inference ran its device jobs. */
static void count_jobs(struct stream *s)
{
	int n = mi_model_device_count(s->model);

	for (int k = 1; k < n; k++) {
		struct mi_device_stats ds;

		if (mi_model_device_stats(s->model, k, &ds) || !ds.jobs)
			continue;
		for (int d = 0; d < s->sv->ndev; d++)
			if (!strcmp(s->sv->devs[d]->name, ds.device))
				atomic_fetch_add(&s->jobs[d], ds.jobs);
	}
	mi_model_device_stats_reset(s->model);
}

static void *stream_main(void *arg)
{
	struct stream *s = arg;
	struct mi_value out;

	while (!atomic_load(s->stop)) {
		int64_t t0, item = 0;
		int ret;

		/* with etcd: only a stream this node owns runs, item by item
		 * (--item-runs inferences each, all again if it moved) */
		if (s->sv->etcd && !serve_etcd_owns(s->sv->etcd, s->id, &item)) {
			s->item_runs = 0;
			usleep(5000);
			continue;
		}
		if (s->sv->etcd && item != s->item) {
			s->item = item;
			s->item_runs = 0;
		}
		if (mi_live_begin(s->live, s->id, NULL) < 0) {
			usleep(1000);
			continue;
		}
		t0 = now_ns();
		ret = mi_model_run(s->model, s->in, s->nin, &out, 1);
		mi_live_end(s->live, s->id, ret, now_ns() - t0);
		count_jobs(s);
		if (s->sv->etcd && !ret &&
		    ++s->item_runs >= s->sv->runs_per_item) {
			serve_etcd_commit(s->sv->etcd, s->id, item);
			s->item_runs = 0;
		}
	}
	return NULL;
}

/* Inputs of a model: symbolic dimensions 1, float data seeded. */
static int make_inputs(struct stream *s)
{
	int n = mi_model_input_count(s->model);

	s->in = calloc(n > 0 ? n : 1, sizeof(*s->in));
	if (!s->in)
		return -ENOMEM;
	for (int i = 0; i < n; i++) {
		struct mi_tensor_info ti;
		struct mi_value *v = &s->in[i];
		size_t cnt = 1, es;

		if (mi_model_input_info(s->model, i, &ti))
			return -EINVAL;
		es = mi_dtype_size(ti.dtype);
		if (!es || ti.ndim < 0)
			return mi_set_error(-EINVAL, "%s: input %s: unsupported type or rank",
					    s->path, ti.name);
		v->name = ti.name;
		v->dtype = ti.dtype;
		v->ndim = ti.ndim;
		for (int d = 0; d < ti.ndim; d++) {
			v->dims[d] = ti.dims[d] > 0 ? ti.dims[d] : 1;
			cnt *= v->dims[d];
		}
		v->nbytes = cnt * es;
		v->data = calloc(1, v->nbytes);
		if (!v->data)
			return -ENOMEM;
		if (ti.dtype == MI_DT_FLOAT)
			for (size_t k = 0; k < cnt; k++)
				((float *)v->data)[k] = ((k * 37) % 17) / 16.0f;
	}
	s->nin = n;
	return 0;
}

static const char *const dim_short[MI_REG_NDIM] = {
	"compute", "memory", "bandwidth", "thermal", "power", "queue",
};

static void fmt_choice(char *buf, size_t len, const struct mi_live_stream_view *v)
{
	size_t o = 0;

	if (v->config < 0) {
		snprintf(buf, len, "-");
		return;
	}
	buf[0] = 0;
	for (int i = 0; i < v->nlayers && o < len; i++)
		o += snprintf(buf + o, len - o, "%s%d", i ? "," : "",
			      v->choice[i]);
}

static void fmt_place(char *buf, size_t len, struct serve *sv,
		      const struct mi_live_stream_view *v)
{
	size_t o = 0;

	buf[0] = 0;
	for (int i = 0; i < v->nlayers && o < len; i++)
		o += snprintf(buf + o, len - o, "%s%s", i ? "," : "",
			      sv->devs[v->layer_device[i]]->name);
}

static void fmt_jobs(char *buf, size_t len, struct serve *sv,
		     struct stream *st)
{
	size_t o = 0;

	buf[0] = 0;
	for (int d = 0; d < sv->ndev && o < len; d++) {
		unsigned long n = atomic_exchange(&st->jobs[d], 0);

		if (n)
			o += snprintf(buf + o, len - o, "%s%s:%lu",
				      o ? "," : "", sv->devs[d]->name, n);
	}
	if (!o)
		snprintf(buf, len, "-");
}

static void print_second(struct serve *sv, struct stream *st, int nstreams,
			 double t, bool json)
{
	struct mi_registry *reg = mi_live_registry(sv->live);

	if (json)
		printf("{\"t\": %.1f, \"devices\": [", t);
	else
		printf("--- %.1f s\n", t);
	for (int d = 0; d < sv->ndev; d++) {
		struct mi_device_view dv;
		struct mi_health_vec hv;
		bool have;

		if (mi_registry_device(reg, d, &dv))
			continue;
		pthread_mutex_lock(&sv->lock);
		hv = sv->last[d];
		have = sv->have[d];
		pthread_mutex_unlock(&sv->lock);
		if (json) {
			printf("%s{\"name\": \"%s\", \"lost\": %s, \"health\": {",
			       d ? ", " : "", dv.name, dv.lost ? "true" : "false");
			for (int k = 0; k < MI_REG_NDIM; k++) {
				printf("%s\"%s\": ", k ? ", " : "", dim_short[k]);
				if (have && mi_health_has(&hv, k))
					printf("%.3f", hv.v[k]);
				else
					printf("null");
			}
			printf("}, \"degraded\": [");
			for (int k = 0, f = 0; k < MI_REG_NDIM; k++)
				if (dv.dim[k].present &&
				    dv.dim[k].state == MI_DIM_DEGRADED)
					printf("%s{\"dim\": \"%s\", \"level\": %.3f}",
					       f++ ? ", " : "", dim_short[k],
					       dv.dim[k].confirmed);
			printf("]}");
			continue;
		}
		printf("device %-6s%s", dv.name, dv.lost ? " LOST" : "");
		for (int k = 0; k < MI_REG_NDIM; k++) {
			if (!have || !mi_health_has(&hv, k)) {
				printf(" %s=-", dim_short[k]);
				continue;
			}
			printf(" %s=%.2f%s", dim_short[k], hv.v[k],
			       dv.dim[k].state == MI_DIM_DEGRADED ? "!" : "");
		}
		printf("\n");
	}
	if (json)
		printf("], \"streams\": [");
	for (int i = 0; i < nstreams; i++) {
		struct mi_live_stream_view v;
		char ch[64], pl[256], jb[256];
		double mean;

		if (mi_live_stream(sv->live, i, &v, true))
			continue;
		fmt_choice(ch, sizeof(ch), &v);
		fmt_place(pl, sizeof(pl), sv, &v);
		fmt_jobs(jb, sizeof(jb), sv, &st[i]);
		mean = v.win_runs ? v.win_ns / 1e6 / v.win_runs : 0;
		if (json) {
			printf("%s{\"stream\": %d, \"runs\": %llu, \"mean_ms\": %.3f, \"max_ms\": %.3f, \"device\": \"%s\", \"placement\": \"%s\", \"device_jobs\": \"%s\", \"structure\": \"%s\", \"switches\": %llu, \"moves\": %llu, \"failures\": %llu}",
			       i ? ", " : "", i,
			       (unsigned long long)v.win_runs, mean,
			       v.win_max_ns / 1e6, sv->devs[v.device]->name,
			       pl, jb, ch, (unsigned long long)v.switches,
			       (unsigned long long)v.moves,
			       (unsigned long long)v.failures);
			continue;
		}
		printf("stream %d  %5llu runs/s  mean %.3f ms  max %.3f ms  on %s [%s]  jobs %s  structure %s  switches %llu  moves %llu  failed %llu\n",
		       i, (unsigned long long)v.win_runs, mean,
		       v.win_max_ns / 1e6, sv->devs[v.device]->name, pl, jb, ch,
		       (unsigned long long)v.switches,
		       (unsigned long long)v.moves,
		       (unsigned long long)v.failures);
	}
	if (json)
		printf("]}\n");
	fflush(stdout);
}

static const char *ev_name(int type)
{
	switch (type) {
	case MI_REG_EV_DEGRADED:
		return "degraded";
	case MI_REG_EV_RECOVERED:
		return "recovered";
	case MI_REG_EV_DEVICE_LOST:
		return "lost";
	default:
		return "event";
	}
}

static void print_chain(struct serve *sv, const struct mi_live_chain *c,
			bool json)
{
	const int64_t *t = c->ns;
	double dc = (t[MI_LIVE_CONFIRM] - t[MI_LIVE_DETECT]) / 1e6;
	double cs = (t[MI_LIVE_SOLVE] - t[MI_LIVE_CONFIRM]) / 1e6;
	double sa = (t[MI_LIVE_ACTIVATE] - t[MI_LIVE_SOLVE]) / 1e6;
	double ao = (t[MI_LIVE_OUTPUT] - t[MI_LIVE_ACTIVATE]) / 1e6;
	double co = (t[MI_LIVE_OUTPUT] - t[MI_LIVE_CONFIRM]) / 1e6;
	const char *dim = c->dim >= 0 ? dim_short[c->dim] : "device";

	if (json) {
		printf("{\"event\": %llu, \"type\": \"%s\", \"device\": \"%s\", \"dim\": \"%s\", \"stream\": %d, \"from_device\": \"%s\", \"to_device\": \"%s\", \"from_config\": %d, \"to_config\": %d, \"detect_confirm_ms\": %.3f, \"confirm_solve_ms\": %.3f, \"solve_activate_ms\": %.3f, \"activate_output_ms\": %.3f, \"confirm_output_ms\": %.3f}\n",
		       (unsigned long long)c->seq, ev_name(c->type),
		       sv->devs[c->device]->name, dim, c->stream,
		       sv->devs[c->from_device]->name,
		       sv->devs[c->to_device]->name, c->from_config,
		       c->to_config, dc, cs, sa, ao, co);
		return;
	}
	printf("event %llu: %s %s %s -> stream %d %s->%s, configuration %d->%d; detect->confirm %.1f ms, solve %.3f ms, activate %.3f ms, first output %.3f ms (confirm->output %.3f ms)\n",
	       (unsigned long long)c->seq, sv->devs[c->device]->name, dim,
	       ev_name(c->type), c->stream, sv->devs[c->from_device]->name,
	       sv->devs[c->to_device]->name, c->from_config, c->to_config,
	       dc, cs, sa, ao, co);
}

static const char *const phase_key[MI_LIVE_NPHASE] = {
	"detect", "confirm", "solve", "take", "activate", "output",
};

/*
 * --timeline FILE: each completed chain as one JSON line with its phases'
 * absolute CLOCK_MONOTONIC timestamps (ns), the clock of ftrace's "mono"
 * trace_clock, so that `metainfer trace --timeline FILE` can put the
 * switches on the same axis as the devices' jobs.  Flushed per line: a
 * killed serve leaves every chain it completed.
 */
static void timeline_chain(struct serve *sv, const struct mi_live_chain *c)
{
	FILE *f = sv->timeline;

	if (!f)
		return;
	fprintf(f, "{\"timeline\": \"chain\", \"pid\": %d, \"event\": %llu, \"type\": \"%s\", \"device\": \"%s\", \"dim\": \"%s\", \"stream\": %d, \"from_device\": \"%s\", \"to_device\": \"%s\", \"from_config\": %d, \"to_config\": %d",
		(int)getpid(), (unsigned long long)c->seq, ev_name(c->type),
		sv->devs[c->device]->name,
		c->dim >= 0 ? dim_short[c->dim] : "device", c->stream,
		sv->devs[c->from_device]->name, sv->devs[c->to_device]->name,
		c->from_config, c->to_config);
	for (int p = 0; p < MI_LIVE_NPHASE; p++)
		fprintf(f, ", \"%s_ns\": %lld", phase_key[p],
			(long long)c->ns[p]);
	fprintf(f, "}\n");
	fflush(f);
}

static void timeline_start(struct serve *sv, int nstreams)
{
	FILE *f = sv->timeline;

	if (!f)
		return;
	fprintf(f, "{\"timeline\": \"start\", \"pid\": %d, \"clock\": \"CLOCK_MONOTONIC\", \"start_ns\": %lld, \"streams\": %d, \"devices\": [",
		(int)getpid(), (long long)sv->t_start, nstreams);
	for (int d = 0; d < sv->ndev; d++)
		fprintf(f, "%s\"%s\"", d ? ", " : "", sv->devs[d]->name);
	fprintf(f, "]}\n");
	fflush(f);
}

static void summary(struct serve *sv, int nstreams, bool json)
{
	static struct mi_live_chain ch[4096];
	static double a[4096], b[4096];
	uint64_t events, idle, sup, runs = 0, failures = 0;
	int n = mi_live_chains(sv->live, 0, ch, 4096, NULL);

	for (int i = 0; i < n; i++) {
		a[i] = (ch[i].ns[MI_LIVE_OUTPUT] - ch[i].ns[MI_LIVE_CONFIRM]) / 1e6;
		b[i] = (ch[i].ns[MI_LIVE_OUTPUT] - ch[i].ns[MI_LIVE_DETECT]) / 1e6;
	}
	mi_live_counts(sv->live, &events, &idle, &sup);
	for (int i = 0; i < nstreams; i++) {
		struct mi_live_stream_view v;

		if (!mi_live_stream(sv->live, i, &v, false)) {
			runs += v.runs;
			failures += v.failures;
		}
	}
	if (json) {
		printf("{\"summary\": {\"runs\": %llu, \"failures\": %llu, \"events\": %llu, \"events_without_change\": %llu, \"superseded\": %llu, \"chains\": %d, \"confirm_output_p50_ms\": %.3f, \"confirm_output_p99_ms\": %.3f, \"detect_output_p50_ms\": %.3f, \"detect_output_p99_ms\": %.3f}}\n",
		       (unsigned long long)runs, (unsigned long long)failures,
		       (unsigned long long)events, (unsigned long long)idle,
		       (unsigned long long)sup, n,
		       mi_live_percentile(a, n, 50), mi_live_percentile(a, n, 99),
		       mi_live_percentile(b, n, 50), mi_live_percentile(b, n, 99));
		return;
	}
	printf("summary: %llu runs, %llu failed; %llu confirmed events (%llu changed nothing, %llu superseded), %d switch chains",
	       (unsigned long long)runs, (unsigned long long)failures,
	       (unsigned long long)events, (unsigned long long)idle,
	       (unsigned long long)sup, n);
	if (n)
		printf("; confirm->first output P50 %.3f ms P99 %.3f ms; detect->first output P50 %.1f ms P99 %.1f ms",
		       mi_live_percentile(a, n, 50), mi_live_percentile(a, n, 99),
		       mi_live_percentile(b, n, 50), mi_live_percentile(b, n, 99));
	printf("\n");
}

static void usage(FILE *f, const char *prog)
{
	fprintf(f,
		"usage: %s serve MODEL.onnx... [options]\n"
		"\n"
		"Continuous inference streams (one thread each) with live adaptation:\n"
		"health sampled into the registry; a confirmed change re-solves the\n"
		"placement and the meta-controller picks the structure of switchable\n"
		"models, taken between inferences.  Prints once a second per device\n"
		"health ('!' = confirmed degraded) and per stream latency, placement\n"
		"and structure; each switch's latency chain; a summary at the end.\n"
		"\n"
		"  -d, --devices LIST     devices ('npu0,npu1', 'all'; the CPU is always\n"
		"                         included; default: all)\n"
		"  -s, --streams N        streams per model, 1..16 in all (default 1)\n"
		"  -T, --duration S       seconds to run, 0 = until Ctrl-C (default 10)\n"
		"  -i, --interval MS      health sampling period (default 100)\n"
		"  -t, --threads N        threads per stream's model (default 1)\n"
		"      --min-accuracy P   meta-controller accuracy floor, percent (default 0)\n"
		"      --budget US        latency budget per inference in us; default: 1.1 x\n"
		"                         the most accurate configuration's healthy prediction\n"
		"      --emulate N        add N emulated accelerators emu0.. (host demo)\n"
		"      --heat DEV:START:END[:LEVEL]\n"
		"                         thermal headroom LEVEL (default 0.2) on DEV from\n"
		"                         START to END seconds, in place of its sensor\n"
		"                         (its reading, or 1.0 without one, outside the\n"
		"                         window; host demo; repeatable)\n"
		"      --registry SPEC    'local' (default) or etcd://HOST[:PORT][/CLUSTER]:\n"
		"                         publish confirmed device states to etcd, watch\n"
		"                         the other nodes, run only the streams this\n"
		"                         node owns there and adopt a dead node's\n"
		"      --node NAME        this node's name in etcd (default: hostname)\n"
		"      --ttl S            etcd lease TTL, 2..3600 (default 10)\n"
		"      --own LIST         streams to claim when nobody owns them\n"
		"                         ('0,2-3', 'all', 'none'; default all)\n"
		"      --item-runs N      inferences per etcd item, i.e. per commit\n"
		"                         (default 1)\n"
		"      --timeline FILE    write each switch chain as a JSON line with\n"
		"                         CLOCK_MONOTONIC timestamps, for\n"
		"                         'metainfer trace --timeline FILE'\n"
		"  -j, --json             one JSON object per second, event and summary\n"
		"  -q, --quiet            only events and the summary\n",
		prog);
}

static int parse_heat(const char *prog, const char *arg, struct serve *sv,
		      const char **names, int *n)
{
	char name[32];
	double t0, t1, level = 0.2;
	int k;

	if (*n >= SERVE_MAX_INJECT) {
		fprintf(stderr, "%s serve: at most %d --heat options\n", prog,
			SERVE_MAX_INJECT);
		return -1;
	}
	k = sscanf(arg, "%31[^:]:%lf:%lf:%lf", name, &t0, &t1, &level);
	if (k < 3 || t0 < 0 || t1 <= t0 || level < 0 || level > 1) {
		fprintf(stderr, "%s serve: --heat takes DEV:START:END[:LEVEL] (seconds, level 0..1), got '%s'\n",
			prog, arg);
		return -1;
	}
	names[*n] = strdup(name);
	sv->inj[*n] = (struct inject){ .dev = -1, .t0 = t0, .t1 = t1,
				       .level = level };
	(*n)++;
	return 0;
}

/* --own LIST: stream numbers "0,2-3" or "all" / "none" */
static int parse_own(const char *prog, const char *arg, uint64_t *own)
{
	const char *p = arg;

	if (!strcmp(arg, "all") || !strcmp(arg, "none")) {
		*own = arg[0] == 'a' ? ~0ull : 0;
		return 0;
	}
	*own = 0;
	while (*p) {
		char *e;
		long a = strtol(p, &e, 10), b = a;

		if (e == p || a < 0 || a >= 64)
			goto bad;
		if (*e == '-') {
			p = e + 1;
			b = strtol(p, &e, 10);
			if (e == p || b < a || b >= 64)
				goto bad;
		}
		for (long k = a; k <= b; k++)
			*own |= 1ull << k;
		if (*e == ',')
			e++;
		else if (*e)
			goto bad;
		p = e;
	}
	return 0;
bad:
	fprintf(stderr, "%s serve: --own takes stream numbers like '0,2-3', 'all' or 'none', got '%s'\n",
		prog, arg);
	return -1;
}

static double dev_speed(const struct mi_dev *d)
{
	/* relative to the CPU the models' tables were measured on (about
	 * 50 GMAC/s, Documentation/live.rst) */
	double s;

	if (d->kind == MI_DEV_CPU)
		return 1.0;
	s = (double)d->caps.macs_per_cycle * d->caps.clock_khz * 1e3 / 50e9;
	return s < 0.1 ? 0.1 : s > 10 ? 10 : s;
}

int mi_cli_serve(int argc, char **argv, const char *prog)
{
	static const struct option lopts[] = {
		{ "devices", required_argument, NULL, 'd' },
		{ "streams", required_argument, NULL, 's' },
		{ "duration", required_argument, NULL, 'T' },
		{ "interval", required_argument, NULL, 'i' },
		{ "threads", required_argument, NULL, 't' },
		{ "min-accuracy", required_argument, NULL, 'A' },
		{ "budget", required_argument, NULL, 'B' },
		{ "emulate", required_argument, NULL, 'E' },
		{ "heat", required_argument, NULL, 'H' },
		{ "timeline", required_argument, NULL, 'L' },
		{ "registry", required_argument, NULL, 'R' },
		{ "node", required_argument, NULL, 'N' },
		{ "ttl", required_argument, NULL, 'U' },
		{ "own", required_argument, NULL, 'O' },
		{ "item-runs", required_argument, NULL, 'I' },
		{ "json", no_argument, NULL, 'j' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static struct serve sv;
	struct mi_live_device ld[SERVE_MAX_DEVS];
	char klass[SERVE_MAX_DEVS][100];
	const char *heat_dev[SERVE_MAX_INJECT];
	struct mi_live_opts lo = { .move_models = true };
	struct mi_health_opts ho = { 0 };
	struct stream st[MI_LIVE_MAX_STREAMS];
	struct mi_health *h = NULL;
	atomic_bool stop = false;
	const char *list = "all";
	long per = 1, emulate = 0, interval = 100;
	double duration = 10;
	int32_t threads = 1;
	bool json = false, quiet = false;
	int c, ns = 0, ret = 1, nmodels, started = 0;
	uint64_t next = 0, own = ~0ull;
	const char *registry = NULL;
	char node[32] = "";
	long ttl = 0;
	char *end;

	memset(st, 0, sizeof(st));
	sv.runs_per_item = 1;
	pthread_mutex_init(&sv.lock, NULL);
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "d:s:T:i:t:jqh", lopts, NULL)) != -1) {
		switch (c) {
		case 'd':
			list = optarg;
			break;
		case 's':
			per = strtol(optarg, &end, 10);
			if (*end || per < 1 || per > MI_LIVE_MAX_STREAMS) {
				fprintf(stderr, "%s serve: --streams takes 1..%d, got '%s'\n",
					prog, MI_LIVE_MAX_STREAMS, optarg);
				return 2;
			}
			break;
		case 'T':
			duration = strtod(optarg, &end);
			if (*end || duration < 0 || duration > 1e6) {
				fprintf(stderr, "%s serve: --duration takes seconds >= 0, got '%s'\n",
					prog, optarg);
				return 2;
			}
			break;
		case 'i':
			interval = strtol(optarg, &end, 10);
			if (*end || interval < 1 || interval > 60000) {
				fprintf(stderr, "%s serve: --interval takes 1..60000 ms, got '%s'\n",
					prog, optarg);
				return 2;
			}
			break;
		case 't':
			if (mi_cli_threads_opt(prog, optarg, &threads))
				return 2;
			break;
		case 'A':
			lo.min_accuracy = strtod(optarg, &end);
			if (*end || lo.min_accuracy < 0 || lo.min_accuracy > 100) {
				fprintf(stderr, "%s serve: --min-accuracy takes 0..100, got '%s'\n",
					prog, optarg);
				return 2;
			}
			break;
		case 'B':
			lo.latency_budget_us = strtod(optarg, &end);
			if (*end || lo.latency_budget_us <= 0) {
				fprintf(stderr, "%s serve: --budget takes microseconds > 0, got '%s'\n",
					prog, optarg);
				return 2;
			}
			break;
		case 'E':
			emulate = strtol(optarg, &end, 10);
			if (*end || emulate < 0 || emulate > 8) {
				fprintf(stderr, "%s serve: --emulate takes 0..8, got '%s'\n",
					prog, optarg);
				return 2;
			}
			break;
		case 'H':
			if (parse_heat(prog, optarg, &sv, heat_dev, &sv.ninj))
				return 2;
			break;
		case 'L':
			if (sv.timeline)
				fclose(sv.timeline);
			sv.timeline = fopen(optarg, "w");
			if (!sv.timeline) {
				fprintf(stderr, "%s serve: --timeline: %s: %s\n",
					prog, optarg, strerror(errno));
				return 1;
			}
			break;
		case 'R':
			registry = optarg;
			break;
		case 'N':
			if (!*optarg || strlen(optarg) >= sizeof(node) ||
			    strchr(optarg, '/')) {
				fprintf(stderr, "%s serve: --node takes a name of 1..%zu characters without '/', got '%s'\n",
					prog, sizeof(node) - 1, optarg);
				return 2;
			}
			snprintf(node, sizeof(node), "%s", optarg);
			break;
		case 'U':
			ttl = strtol(optarg, &end, 10);
			if (*end || ttl < 2 || ttl > 3600) {
				fprintf(stderr, "%s serve: --ttl takes 2..3600 s, got '%s'\n",
					prog, optarg);
				return 2;
			}
			break;
		case 'O':
			if (parse_own(prog, optarg, &own))
				return 2;
			break;
		case 'I':
			sv.runs_per_item = strtol(optarg, &end, 10);
			if (*end || sv.runs_per_item < 1 ||
			    sv.runs_per_item > 1000000) {
				fprintf(stderr, "%s serve: --item-runs takes 1..1000000, got '%s'\n",
					prog, optarg);
				return 2;
			}
			break;
		case 'j':
			json = true;
			break;
		case 'q':
			quiet = true;
			break;
		case 'h':
			usage(stdout, prog);
			return 0;
		default:
			fprintf(stderr, "%s serve: unknown or incomplete option '%s' (try --help)\n",
				prog, argv[optind - 1]);
			return 2;
		}
	}
	nmodels = argc - optind;
	if (nmodels < 1) {
		fprintf(stderr, "%s serve: no model (try --help)\n", prog);
		return 2;
	}
	if (nmodels * per > MI_LIVE_MAX_STREAMS) {
		fprintf(stderr, "%s serve: %ld streams, at most %d\n", prog,
			nmodels * per, MI_LIVE_MAX_STREAMS);
		return 2;
	}
	for (long e = 0; e < emulate; e++) {
		struct mi_dev_caps caps = {
			.op_mask = ((1ull << DRM_METAINFER_OP_COUNT) - 1) & ~1ull,
			.dtype_mask = (1ull << DRM_METAINFER_DTYPE_INT8) |
				      (1ull << DRM_METAINFER_DTYPE_UINT8) |
				      (1ull << DRM_METAINFER_DTYPE_INT32),
			.layout_mask = (1ull << DRM_METAINFER_LAYOUT_PLAIN) |
				       (1ull << DRM_METAINFER_LAYOUT_NCHW),
			.preferred_layout = DRM_METAINFER_LAYOUT_NCHW,
			.num_queues = 1, .sram_bytes = 1 << 20,
			.clock_khz = 500000, .macs_per_cycle = 256u >> e,
			.dma_bw = 1000000000, .dma_burst = 128,
		};
		char name[16];

		snprintf(name, sizeof(name), "emu%ld", e);
		if (mi_dev_emu_add(name, &caps, NULL)) {
			fprintf(stderr, "%s serve: %s\n", prog, mi_last_error());
			return 1;
		}
	}
	sv.ndev = mi_dev_select(list, sv.devs, SERVE_MAX_DEVS);
	if (sv.ndev < 0) {
		fprintf(stderr, "%s serve: %s\n", prog, mi_last_error());
		return 1;
	}
	if (emulate && !strcmp(list, "all")) {
		/* the scan does not list emulated devices: add them */
		for (long e = 0; e < emulate && sv.ndev < SERVE_MAX_DEVS; e++) {
			char name[16];

			snprintf(name, sizeof(name), "emu%ld", e);
			sv.devs[sv.ndev] = mi_dev_find(name);
			if (sv.devs[sv.ndev])
				sv.ndev++;
		}
	}
	for (int j = 0; j < sv.ninj; j++) {
		for (int d = 0; d < sv.ndev; d++)
			if (!strcmp(sv.devs[d]->name, heat_dev[j]))
				sv.inj[j].dev = d;
		if (sv.inj[j].dev < 0) {
			fprintf(stderr, "%s serve: --heat: no device '%s' in the list\n",
				prog, heat_dev[j]);
			return 2;
		}
	}
	for (int d = 0; d < sv.ndev; d++) {
		const struct mi_dev *dv = sv.devs[d];

		snprintf(klass[d], sizeof(klass[d]), "%s:%s", dv->driver,
			 dv->personality);
		ld[d] = (struct mi_live_device){ .name = dv->name,
						 .klass = klass[d],
						 .speed = dev_speed(dv) };
	}
	ret = mi_live_create(&lo, ld, sv.ndev, &sv.live);
	if (ret) {
		fprintf(stderr, "%s serve: %s\n", prog, mi_last_error());
		return 1;
	}
	ret = 1;
	for (int m = 0; m < nmodels; m++) {
		for (long k = 0; k < per; k++) {
			struct mi_model_opts mo = { .nthreads = threads,
						    .devices = list };
			struct stream *s = &st[ns];
			char dl[512];

			if (emulate && !strcmp(list, "all")) {
				size_t o = 0;

				for (int d = 1; d < sv.ndev && o < sizeof(dl); d++)
					o += snprintf(dl + o, sizeof(dl) - o, "%s%s",
						      o ? "," : "", sv.devs[d]->name);
				mo.devices = o ? dl : "cpu";
			}
			s->path = argv[optind + m];
			if (mi_model_load(s->path, &mo, &s->model) ||
			    make_inputs(s) ||
			    mi_live_add_stream(sv.live, s->model, &s->id)) {
				fprintf(stderr, "%s serve: %s: %s\n", prog, s->path,
					mi_last_error());
				if (s->model)
					ns++;	/* freed below */
				goto out;
			}
			s->live = sv.live;
			s->sv = &sv;
			s->stop = &stop;
			ns++;
		}
	}
	if (mi_live_start(sv.live)) {
		fprintf(stderr, "%s serve: %s\n", prog, mi_last_error());
		goto out;
	}
	if (registry) {
		struct serve_etcd_opts eo = { .spec = registry, .node = node,
					      .ttl_s = ttl, .nstreams = ns,
					      .own = own, .json = json };

		if (!node[0]) {
			gethostname(node, sizeof(node) - 1);
			node[strcspn(node, "/")] = 0;
		}
		c = serve_etcd_start(mi_live_registry(sv.live), &eo, &sv.etcd);
		if (c == -EINVAL) {
			fprintf(stderr, "%s serve: --registry: %s\n", prog,
				mi_last_error());
			goto out;
		}
		if (c)
			fprintf(stderr, "%s serve: %s; running every stream on local state\n",
				prog, mi_last_error());
	}
	ho.period_ms = interval;
	ho.ring = 8;
	ho.cb = on_round;
	ho.cb_arg = &sv;
	if (mi_health_create(sv.devs, sv.ndev, &ho, &h)) {
		fprintf(stderr, "%s serve: %s\n", prog, mi_last_error());
		goto out;
	}
	signal(SIGINT, serve_sigint);
	signal(SIGTERM, serve_sigint);
	sv.t_start = now_ns();
	timeline_start(&sv, ns);
	for (; started < ns; started++)
		if (pthread_create(&st[started].th, NULL, stream_main,
				   &st[started])) {
			fprintf(stderr, "%s serve: cannot start a stream thread\n",
				prog);
			goto out;
		}
	if (mi_health_start(h)) {
		fprintf(stderr, "%s serve: %s\n", prog, mi_last_error());
		goto out;
	}
	for (int sec = 1; !serve_stop; sec++) {
		int64_t until = sv.t_start + sec * 1000000000LL;
		struct mi_live_chain ch[64];
		int n;

		while (!serve_stop && now_ns() < until) {
			usleep(20000);
			while ((n = mi_live_chains(sv.live, next, ch, 64, &next)) > 0)
				for (int i = 0; i < n; i++) {
					print_chain(&sv, &ch[i], json);
					timeline_chain(&sv, &ch[i]);
				}
			fflush(stdout);
		}
		if (!quiet)
			print_second(&sv, st, ns, (now_ns() - sv.t_start) / 1e9,
				     json);
		if (!quiet && sv.etcd)
			serve_etcd_print(sv.etcd, json, false);
		if (duration > 0 && sec >= duration)
			break;
	}
	ret = 0;
out:
	mi_health_destroy(h);	/* stops the sampler: no more pushes */
	atomic_store(&stop, true);
	for (int i = 0; i < started; i++)
		pthread_join(st[i].th, NULL);
	if (!ret) {
		struct mi_live_chain ch[64];
		int n;

		while ((n = mi_live_chains(sv.live, next, ch, 64, &next)) > 0)
			for (int i = 0; i < n; i++) {
				print_chain(&sv, &ch[i], json);
				timeline_chain(&sv, &ch[i]);
			}
		summary(&sv, ns, json);
		if (sv.etcd)
			serve_etcd_print(sv.etcd, json, true);
	}
	serve_etcd_stop(sv.etcd);	/* revokes: the others adopt at once */
	mi_live_destroy(sv.live);
	for (int i = 0; i < ns; i++) {
		for (int k = 0; k < st[i].nin; k++)
			free(st[i].in[k].data);
		free(st[i].in);
		mi_model_free(st[i].model);
	}
	for (int j = 0; j < sv.ninj; j++)
		free((char *)heat_dev[j]);
	if (sv.timeline && fclose(sv.timeline) && !ret) {
		fprintf(stderr, "%s serve: --timeline: %s\n", prog,
			strerror(errno));
		ret = 1;
	}
	return ret;
}
