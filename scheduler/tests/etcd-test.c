// SPDX-License-Identifier: MIT
/*
 * etcd-test (make check-etcd): the registry's etcd backend end to end.
 *
 *  1. a node whose etcd is unreachable says so in one line and keeps
 *     running on local state (it still confirms its planted change);
 *  2. etcd starts on 127.0.0.1 (free ports, a temporary data dir);
 *     S streams of N items each are set up; this process is the solver:
 *     it watches the nodes' prefix and places the streams on the live
 *     devices with mi_solver_solve whenever the view changes;
 *  3. nodes a and b join (2 devices each, lease TTL 2 s); a's sim1 is
 *     planted to degrade (confirmed, published, re-planned around) and
 *     a's sim0 gets one odd sample (never published);
 *  4. b is killed (SIGKILL) mid-run: its lease expires, its keys go,
 *     the watch sees it leave, its streams are re-placed on a;
 *  5. every item completed exactly once: etcd holds one done key per
 *     item and no node reported an item another one did;
 *     Then a's lease is revoked under it: the watch sees a leave, a
 *     takes a new lease at its next refresh and joins again;
 *  6. etcd stops under node a and the watch: a says so in one line and
 *     keeps running; etcd restarts on the same data: a says so in one
 *     line, the watch reopens and sees a change made after the restart;
 *     a stops on SIGTERM (its revoked lease takes its keys at once), etcd
 *     stops, the temporary dir is removed.
 *
 * The gateway codec and the registry spec parser are checked first;
 * then, without an etcd
 * binary (/usr/bin/etcd, /usr/local/bin/etcd or --etcd), a SKIP line.
 *
 *   etcd-test --node-bin PATH [--etcd PATH] [-v]
 */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <pthread.h>

#include "metainfer/metainfer.h"
#include "etcd.h"
#include "etcd-impl.h"
#include "scheduler.h"

#define STREAMS 6
#define ITEMS 30
#define ITEM_MS 15
#define TTL_S 2
#define CLUSTER "t"

static int failures, verbose;
static char tmp[64];
static pid_t etcd_pid, node_pid[2];
static struct mi_etcd_opts eo;
static const char *node_bin_path;

#define CHECK(cond, ...) do { \
		if (!(cond)) { \
			failures++; \
			printf("FAIL %s:%d: ", __FILE__, __LINE__); \
			printf(__VA_ARGS__); \
			printf("\n"); \
		} \
	} while (0)

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void sleep_ms(int ms)
{
	nanosleep(&(struct timespec){ ms / 1000, (ms % 1000) * 1000000L }, NULL);
}

static int free_port(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    getsockname(fd, (struct sockaddr *)&sa, &sl)) {
		perror("etcd-test: free port");
		exit(1);
	}
	port = ntohs(sa.sin_port);
	close(fd);
	return port;
}

/* fork + exec with stdout/stderr into files under tmp. */
static pid_t spawn(char *const argv[], const char *out, const char *err)
{
	pid_t pid;

	fflush(NULL);	/* or the child prints what we buffered */
	pid = fork();
	if (pid < 0) {
		perror("etcd-test: fork");
		exit(1);
	}
	if (!pid) {
		if (!freopen(out, "w", stdout) || !freopen(err, "w", stderr))
			_exit(126);
		execv(argv[0], argv);
		fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	return pid;
}

/* Wait for pid at most ms; its status, or -1 if it still runs. */
static int wait_exit(pid_t pid, int ms)
{
	int64_t end = now_ns() + (int64_t)ms * 1000000;
	int st;

	do {
		if (waitpid(pid, &st, WNOHANG) == pid)
			return st;
		sleep_ms(10);
	} while (now_ns() < end);
	return -1;
}

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
	return remove(p);
}

static void cleanup(void)
{
	for (int i = 0; i < 2; i++)
		if (node_pid[i] > 0) {
			kill(node_pid[i], SIGKILL);
			waitpid(node_pid[i], NULL, 0);
			node_pid[i] = 0;
		}
	if (etcd_pid > 0) {
		kill(etcd_pid, SIGTERM);
		if (wait_exit(etcd_pid, 5000) == -1) {
			kill(etcd_pid, SIGKILL);
			waitpid(etcd_pid, NULL, 0);
		}
		etcd_pid = 0;
	}
	if (tmp[0])
		nftw(tmp, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf;
	long n;

	if (!f)
		return strdup("");
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = calloc(1, (size_t)n + 1);
	if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n)
		buf[0] = 0;
	fclose(f);
	return buf;
}

static int count_lines(const char *s, const char *needle)
{
	int n = 0;

	for (const char *l = s; *l; ) {
		const char *nl = strchr(l, '\n');
		size_t len = nl ? (size_t)(nl - l) : strlen(l);

		if (!needle || memmem(l, len, needle, strlen(needle)))
			n++;
		l += len + (nl ? 1 : 0);
	}
	return n;
}

/* Debian's etcd-server puts it in /usr/bin; --etcd names another. */
static bool find_etcd(char *out, size_t cap)
{
	static const char *const where[] = { "/usr/bin/etcd", "/usr/local/bin/etcd" };

	for (size_t i = 0; i < sizeof(where) / sizeof(where[0]); i++)
		if (access(where[i], X_OK) == 0) {
			snprintf(out, cap, "%s", where[i]);
			return true;
		}
	return false;
}

/* The gateway codec: base64 both ways, the JSON reader on the shapes
 * etcd answers with, and on cut or malformed text. */
static void test_codec(void)
{
	static const char js[] =
		"{\"header\":{\"revision\":\"42\",\"x\":[1,{\"y\":\"}\"}]},"
		"\"kvs\":[{\"key\":\"YQ==\",\"n\":-7},{\"key\":\"Yg==\",\"q\":\"a\\\"b\"}],"
		"\"ok\":true,\"f\":2.5e-1}";
	const char *e = js + strlen(js), *it, *v, *str;
	unsigned char in[64];
	char enc[96], dec[72];
	int n = 0;

	for (size_t len = 0; len < sizeof(in); len++) {
		for (size_t i = 0; i < len; i++)
			in[i] = (unsigned char)(i * 37 + len * 11);
		etcd_b64_encode(in, len, enc);
		CHECK(strlen(enc) == 4 * ((len + 2) / 3), "b64 of %zu bytes: %zu chars",
		      len, strlen(enc));
		CHECK(etcd_b64_decode(enc, strlen(enc), dec, sizeof(dec)) == (ssize_t)len &&
		      !memcmp(dec, in, len), "b64 round trip of %zu bytes", len);
	}
	CHECK(etcd_b64_decode("YW*=", 4, dec, sizeof(dec)) < 0, "b64 took a '*'");
	CHECK(etcd_b64_decode("YWJj", 4, dec, 3) < 0, "b64 overran its buffer");
	CHECK(etcd_js_int(etcd_js_get(etcd_js_get(js, e, "header"), e, "revision"), e, 0) == 42,
	      "header.revision");
	CHECK(etcd_js_true(etcd_js_get(js, e, "ok"), e), "ok is true");
	CHECK(etcd_js_num(etcd_js_get(js, e, "f"), e, 0) == 0.25, "f is 0.25");
	CHECK(!etcd_js_get(js, e, "y"), "found a nested member at the top");
	it = etcd_js_get(js, e, "kvs");
	while ((v = etcd_js_next(&it, e))) {
		ssize_t l = etcd_js_str(etcd_js_get(v, e, "key"), e, &str);

		CHECK(l == 4 && !memcmp(str, n ? "Yg==" : "YQ==", 4), "kvs[%d].key", n);
		n++;
	}
	CHECK(n == 2, "kvs has %d elements, want 2", n);
	CHECK(etcd_js_int(etcd_js_get(etcd_js_get(js, e, "kvs") + 1, e, "n"), e, 0) == -7,
	      "kvs[0].n");
	for (size_t cut = 0; cut + 1 < strlen(js); cut++)
		CHECK(!etcd_js_skip(js, js + cut), "a cut at %zu still parsed", cut);
	CHECK(etcd_js_skip(js, e) == e, "the whole text is one value");
}

/* The registry spec: local by default, etcd only when asked for. */
static void test_parse(void)
{
	static const char *const bad[] = {
		"etcd", "etcd://", "etcd://:2379", "etcd://localhost:2379",
		"etcd://127.0.0.1:0", "etcd://127.0.0.1:65536", "etcd://127.0.0.1:23x",
		"etcd://127.0.0.1/a/b", "etcd://127.0.0.1/a b", "http://127.0.0.1:2379",
	};
	struct mi_registry_backend_cfg c;

	CHECK(!mi_registry_backend_parse(NULL, &c) && c.kind == MI_REG_BACKEND_LOCAL,
	      "no spec is not local");
	CHECK(!mi_registry_backend_parse("local", &c) && c.kind == MI_REG_BACKEND_LOCAL,
	      "'local' is not local");
	CHECK(!mi_registry_backend_parse("etcd://10.1.2.3", &c) &&
	      c.kind == MI_REG_BACKEND_ETCD && !strcmp(c.etcd.host, "10.1.2.3") &&
	      c.etcd.port == 2379 && !strcmp(c.etcd.cluster, "default") &&
	      c.etcd.ttl_s == 10, "etcd://10.1.2.3: defaults");
	CHECK(!mi_registry_backend_parse("etcd://127.0.0.1:23790/lab-1", &c) &&
	      c.etcd.port == 23790 && !strcmp(c.etcd.cluster, "lab-1"),
	      "etcd://127.0.0.1:23790/lab-1");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(mi_registry_backend_parse(bad[i], &c) == -EINVAL && mi_last_error()[0],
		      "'%s' accepted", bad[i]);
}

/* ==== the solver side ================================================= */

struct solver {
	pthread_mutex_t lock;
	pthread_cond_t cond;	/* changed */
	bool changed;
	int64_t left_ns[3];	/* when node a / b / c left first (0: not yet) */
	int64_t joined_ns[3];	/* joined last */
	int joins[3], lefts[3];
	uint32_t puts_sim0_a, puts_sim1_a;
	bool sim1_degraded_seen;
	char assign[STREAMS][64];
	uint64_t replans;
};

static void on_watch(const struct mi_etcd_event *ev, void *arg)
{
	struct solver *s = arg;
	int node = ev->dev->node[1] ? -1 : ev->dev->node[0] - 'a';

	pthread_mutex_lock(&s->lock);
	s->changed = true;
	pthread_cond_signal(&s->cond);
	if (node > 2)
		node = -1;
	if (ev->type == MI_ETCD_EV_NODE_LEFT && node >= 0) {
		if (!s->left_ns[node])
			s->left_ns[node] = ev->host_ns;
		s->lefts[node]++;
	}
	if (ev->type == MI_ETCD_EV_NODE_JOINED && node >= 0) {
		s->joined_ns[node] = ev->host_ns;
		s->joins[node]++;
	}
	if (ev->type == MI_ETCD_EV_DEVICE_PUT && node == 0) {
		if (!strcmp(ev->dev->dev, "sim0"))
			s->puts_sim0_a++;
		if (!strcmp(ev->dev->dev, "sim1")) {
			s->puts_sim1_a++;
			if (ev->dev->degraded & 1u << MI_REG_THERMAL)
				s->sim1_degraded_seen = true;
		}
	}
	pthread_mutex_unlock(&s->lock);
	if (verbose)
		printf("  watch: %s %s/%s rev %lld slowdown %.2f\n",
		       ev->type == MI_ETCD_EV_NODE_JOINED ? "joined" :
		       ev->type == MI_ETCD_EV_DEVICE_PUT ? "put" :
		       ev->type == MI_ETCD_EV_DEVICE_GONE ? "gone" : "left",
		       ev->dev->node, ev->dev->dev, (long long)ev->revision,
		       ev->dev->state.slowdown);
}

/* Latency of an item by device class: what a predictor would say. */
static double class_ns(const char *klass)
{
	return (strstr(klass, "u55") ? 2.0 : 1.0) * ITEM_MS * 1e6;
}

/*
 * Place the streams on the live devices: one layer per stream (no
 * edges), so the solver balances the devices' busy time, with each
 * device's published confirmed state.  Writes the assignments that
 * changed; returns how many.
 */
static int replan(struct solver *s, struct mi_etcd_watch *w,
		  struct mi_solver *sv)
{
	static struct mi_etcd_device dev[MI_SCHED_MAX_DEVICES];
	static struct mi_sched_layer layers[STREAMS];
	static struct mi_sched_dev_state st[MI_SCHED_MAX_DEVICES];
	static struct mi_sched_device mdev[MI_SCHED_MAX_DEVICES];
	static double lat[STREAMS * MI_SCHED_MAX_DEVICES];
	static double pw[STREAMS * MI_SCHED_MAX_DEVICES];
	static uint64_t mem[STREAMS * MI_SCHED_MAX_DEVICES];
	static double xb[MI_SCHED_MAX_DEVICES * MI_SCHED_MAX_DEVICES];
	int32_t place[STREAMS];
	struct mi_sched_plan plan = { .n_layers = STREAMS, .device = place };
	struct mi_sched_problem p;
	int moved = 0, ret;
	uint32_t n, D;

	mi_etcd_watch_devices(w, dev, MI_SCHED_MAX_DEVICES, &n);
	D = n < MI_SCHED_MAX_DEVICES ? n : MI_SCHED_MAX_DEVICES;
	if (!D)
		return 0;
	for (uint32_t d = 0; d < D; d++) {
		st[d] = dev[d].state;
		mdev[d].mem_bytes = 1ull << 30;
	}
	for (uint32_t l = 0; l < STREAMS; l++)
		for (uint32_t d = 0; d < D; d++) {
			lat[l * D + d] = class_ns(dev[d].klass);
			pw[l * D + d] = 1.0;
			mem[l * D + d] = 1 << 20;
		}
	p = (struct mi_sched_problem){
		.n_layers = STREAMS, .n_devices = D, .streams = 1,
		.layers = layers, .devices = mdev, .lat_ns = lat,
		.mem_bytes = mem, .power_w = pw, .xfer_ns_per_byte = xb,
	};
	ret = mi_solver_solve(sv, &p, st, NULL, &plan);
	if (ret) {
		printf("etcd-test: solve: %s\n", mi_last_error());
		return ret;
	}
	for (int l = 0; l < STREAMS; l++) {
		char want[64], key[96];

		snprintf(want, sizeof(want), "%s/%s", dev[place[l]].node, dev[place[l]].dev);
		if (!strcmp(want, s->assign[l]))
			continue;
		snprintf(key, sizeof(key), "/metainfer/" CLUSTER "/assign/s%d", l);
		ret = mi_etcd_put(&eo, key, want, strlen(want), 0);
		if (ret) {
			printf("etcd-test: %s\n", mi_last_error());
			return ret;
		}
		if (verbose)
			printf("  solver: s%d -> %s\n", l, want);
		snprintf(s->assign[l], sizeof(s->assign[l]), "%s", want);
		moved++;
	}
	s->replans++;
	return moved;
}

struct progress {
	int64_t next[STREAMS];
	int64_t total;
};

static int next_cb(const char *key, const char *val, size_t len,
		   int64_t mod_rev, void *arg)
{
	struct progress *pr = arg;
	const char *sl = strrchr(key, '/');
	int sidx = sl && sl[1] == 's' ? atoi(sl + 2) : -1;
	long long a;

	if (sidx >= 0 && sidx < STREAMS && sscanf(val, "%lld/", &a) == 1) {
		pr->next[sidx] = a;
		pr->total += a;
	}
	return 0;
}

/* who[s][i]: 'a', 'b' or 0, from the done keys */
static char who_etcd[STREAMS][ITEMS];
static int done_keys, done_bad;

static int done_cb(const char *key, const char *val, size_t len,
		   int64_t mod_rev, void *arg)
{
	int sidx, i;

	done_keys++;
	if (sscanf(key, "/metainfer/" CLUSTER "/done/s%d/%d", &sidx, &i) != 2 ||
	    sidx < 0 || sidx >= STREAMS || i < 0 || i >= ITEMS || who_etcd[sidx][i] ||
	    (val[0] != 'a' && val[0] != 'b')) {
		done_bad++;
		return 0;
	}
	who_etcd[sidx][i] = val[0];
	return 0;
}

/* Items a node's log says it completed; duplicates against who_log. */
static char who_log[STREAMS][ITEMS];

static int log_items(const char *log, char node, int *dups, int *mismatch,
		     int *races)
{
	int n = 0;

	for (const char *l = log; *l; ) {
		const char *nl = strchr(l, '\n');
		int sidx, i;

		if (!nl)
			break;	/* a line cut by SIGKILL */
		if (sscanf(l, "done s%d %d", &sidx, &i) == 2 && sidx >= 0 &&
		    sidx < STREAMS && i >= 0 && i < ITEMS) {
			n++;
			if (who_log[sidx][i])
				(*dups)++;
			who_log[sidx][i] = node;
			if (who_etcd[sidx][i] != node)
				(*mismatch)++;
		} else if (!strncmp(l, "race ", 5)) {
			(*races)++;
		}
		l = nl + 1;
	}
	return n;
}

static pid_t start_node(const char *name, const char *spec, char *const extra[],
			int n_extra)
{
	char out[96], err[96], ttl[8], item[8];
	char *argv[32];
	int k = 0;

	snprintf(out, sizeof(out), "%s/%s.out", tmp, name);
	snprintf(err, sizeof(err), "%s/%s.err", tmp, name);
	snprintf(ttl, sizeof(ttl), "%d", TTL_S);
	snprintf(item, sizeof(item), "%d", ITEM_MS);
	argv[k++] = (char *)node_bin_path;
	argv[k++] = "--node";
	argv[k++] = (char *)name;
	argv[k++] = "--registry";
	argv[k++] = (char *)spec;
	argv[k++] = "--ttl";
	argv[k++] = ttl;
	argv[k++] = "--item-ms";
	argv[k++] = item;
	for (int i = 0; i < n_extra; i++)
		argv[k++] = extra[i];
	argv[k] = NULL;
	return spawn(argv, out, err);
}

static char *node_file(const char *name, const char *ext)
{
	char path[96];

	snprintf(path, sizeof(path), "%s/%s.%s", tmp, name, ext);
	return slurp(path);
}

/* etcd on the given URLs and data dir; 0 once it answers. */
static int start_etcd(const char *bin, const char *url_c, const char *url_p,
		      const char *data, const char *log)
{
	char cluster[96], v[8];
	int ret;

	snprintf(cluster, sizeof(cluster), "t=%s", url_p);
	etcd_pid = spawn((char *[]){ (char *)bin, "--name", "t",
		"--data-dir", (char *)data, "--listen-client-urls", (char *)url_c,
		"--advertise-client-urls", (char *)url_c, "--listen-peer-urls",
		(char *)url_p, "--initial-advertise-peer-urls", (char *)url_p,
		"--initial-cluster", cluster, "--logger", "zap", "--log-level",
		"warn", NULL }, log, log);
	for (int i = 0; ; i++) {
		ret = mi_etcd_get(&eo, "/metainfer/probe", v, sizeof(v), NULL, NULL);
		if (ret == -ENOENT)
			return 0;
		if (i == 150 || wait_exit(etcd_pid, 0) != -1) {
			printf("FAIL: etcd did not come up on %s: %s (log %s)\n", url_c,
			       mi_last_error(), log);
			if (i < 150)
				etcd_pid = 0;	/* it exited: reaped */
			return -1;
		}
		sleep_ms(100);
	}
}

static int run(const char *etcd_bin)
{
	char spec[96], dead_spec[96], url_c[64], url_p[64], data[96], eout[96];
	int64_t t_start = now_ns(), t_kill = 0, t_replan = 0, killed_at = 0;
	struct solver s = { .lock = PTHREAD_MUTEX_INITIALIZER,
			    .cond = PTHREAD_COND_INITIALIZER };
	bool b_had_streams = false, b_streams[STREAMS] = { false };
	int cport = free_port(), pport = free_port(), dead = free_port();
	struct mi_registry_backend_cfg cfg;
	struct mi_etcd_watch *w = NULL;
	struct mi_solver *sv = NULL;
	struct progress pr;
	pid_t x_pid;
	int ret, st;

	snprintf(tmp, sizeof(tmp), "/tmp/mi-etcd-XXXXXX");
	if (!mkdtemp(tmp)) {
		perror("etcd-test: mkdtemp");
		return 1;
	}
	atexit(cleanup);

	/* 1: unreachable etcd -> one line, local state goes on */
	snprintf(dead_spec, sizeof(dead_spec), "etcd://127.0.0.1:%d/" CLUSTER, dead);
	x_pid = start_node("x", dead_spec, (char *[]){ "--dev", "sim0:sim:u65",
		"--degrade", "sim0@200", "--run-ms", "1000" }, 6);

	/* 2: etcd */
	snprintf(url_c, sizeof(url_c), "http://127.0.0.1:%d", cport);
	snprintf(url_p, sizeof(url_p), "http://127.0.0.1:%d", pport);
	snprintf(data, sizeof(data), "%s/etcd.data", tmp);
	snprintf(eout, sizeof(eout), "%s/etcd.log", tmp);
	snprintf(spec, sizeof(spec), "etcd://127.0.0.1:%d/" CLUSTER, cport);
	ret = mi_registry_backend_parse(spec, &cfg);
	CHECK(!ret, "parse %s: %s", spec, mi_last_error());
	eo = cfg.etcd;
	if (start_etcd(etcd_bin, url_c, url_p, data, eout))
		return 1;
	printf("etcd %s up after %.2f s (data %s)\n", url_c,
	       (now_ns() - t_start) / 1e9, data);

	st = wait_exit(x_pid, 10000);
	{
		char *out = node_file("x", "out"), *err = node_file("x", "err");

		CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "node x (etcd unreachable) did not run to its end: status %d", st);
		CHECK(count_lines(err, NULL) == 1 && count_lines(err, "cannot reach") == 1,
		      "node x: want one line saying etcd cannot be reached, got '%s'", err);
		CHECK(count_lines(out, "local sim0 degraded thermal") == 1,
		      "node x: local state did not go on: '%s'", out);
		printf("unreachable etcd: %s", err);
		free(out);
		free(err);
	}

	/* what one request costs here (one connection each) */
	{
		int64_t t0 = now_ns();
		char v[8];

		for (int i = 0; i < 50; i++)
			mi_etcd_get(&eo, "/metainfer/probe", v, sizeof(v), NULL, NULL);
		printf("gateway: one range request %.2f ms (mean of 50)\n",
		       (now_ns() - t0) / 50 / 1e6);
	}

	/* 3: streams, the watch, the nodes */
	ret = mi_etcd_delete_prefix(&eo, "/metainfer/" CLUSTER "/");
	for (int l = 0; l < STREAMS && !ret; l++) {
		char key[64], val[32];

		snprintf(key, sizeof(key), "/metainfer/" CLUSTER "/next/s%d", l);
		snprintf(val, sizeof(val), "0/%d", ITEMS);
		ret = mi_etcd_put(&eo, key, val, strlen(val), 0);
	}
	if (!ret)
		ret = mi_solver_create(STREAMS, MI_SCHED_MAX_DEVICES, NULL, &sv);
	if (!ret)
		ret = mi_etcd_watch_start(&eo, on_watch, &s, &w);
	if (ret) {
		printf("FAIL: setting up: %s\n", mi_last_error());
		return 1;
	}
	node_pid[0] = start_node("a", spec, (char *[]){ "--dev", "sim0:sim:u65",
		"--dev", "sim1:sim:u65", "--odd", "sim0@300", "--degrade", "sim1@800" }, 8);
	node_pid[1] = start_node("b", spec, (char *[]){ "--dev", "sim0:sim:u55",
		"--dev", "sim1:sim:u65" }, 4);

	/* 4: solve on every change; kill b a third of the way through */
	for (;;) {
		bool changed;

		/* a change, or 20 ms to look at the progress */
		pthread_mutex_lock(&s.lock);
		if (!s.changed) {
			struct timespec ts;

			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 20000000;
			if (ts.tv_nsec >= 1000000000) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000;
			}
			pthread_cond_timedwait(&s.cond, &s.lock, &ts);
		}
		changed = s.changed;
		s.changed = false;
		pthread_mutex_unlock(&s.lock);
		if (changed) {
			ret = replan(&s, w, sv);
			if (ret < 0)
				break;
			if (ret > 0 && t_kill && s.left_ns[1] && !t_replan)
				t_replan = now_ns();
			continue;
		}
		memset(&pr, 0, sizeof(pr));
		ret = mi_etcd_range(&eo, "/metainfer/" CLUSTER "/next/", next_cb, &pr, NULL);
		if (ret) {
			printf("FAIL: progress: %s\n", mi_last_error());
			break;
		}
		if (pr.total == STREAMS * ITEMS)
			break;
		if (!t_kill && pr.total >= STREAMS * ITEMS / 3) {
			for (int l = 0; l < STREAMS; l++)
				if (s.assign[l][0] == 'b' && pr.next[l] < ITEMS)
					b_streams[l] = b_had_streams = true;
			kill(node_pid[1], SIGKILL);
			waitpid(node_pid[1], NULL, 0);
			node_pid[1] = 0;
			t_kill = now_ns();
			killed_at = pr.total;
			printf("b killed (SIGKILL) at %lld of %d items\n",
			       (long long)killed_at, STREAMS * ITEMS);
		}
		if (now_ns() - t_start > 60000000000LL) {
			printf("FAIL: streams not done after 60 s (%lld of %d items)\n",
			       (long long)pr.total, STREAMS * ITEMS);
			break;
		}
	}
	CHECK(b_had_streams, "b had no unfinished stream when it was killed");
	CHECK(s.left_ns[1] && t_kill, "the watch never saw b leave");
	CHECK(!s.left_ns[0], "the watch saw a leave");
	if (s.left_ns[1] && t_kill) {
		double exp_s = (s.left_ns[1] - t_kill) / 1e9;

		CHECK(exp_s > 0.3 && exp_s < TTL_S + 3.0,
		      "b left %.2f s after the kill, lease TTL %d s", exp_s, TTL_S);
		printf("b's lease expired %.2f s after the kill (TTL %d s), its streams re-placed %.1f ms after it left\n",
		       exp_s, TTL_S, t_replan ? (t_replan - s.left_ns[1]) / 1e6 : -1.0);
	}
	CHECK(t_replan, "no re-plan after b left");
	for (int l = 0; l < STREAMS; l++)
		CHECK(s.assign[l][0] == 'a', "stream s%d still on %s", l, s.assign[l]);
	CHECK(s.puts_sim0_a == 1, "a/sim0 published %u times: its one odd sample was published",
	      s.puts_sim0_a);
	CHECK(s.puts_sim1_a == 2 && s.sim1_degraded_seen,
	      "a/sim1 published %u times, degraded seen %d: want its start and its confirmed degradation",
	      s.puts_sim1_a, s.sim1_degraded_seen);

	/* 5: exactly once */
	ret = mi_etcd_range(&eo, "/metainfer/" CLUSTER "/done/", done_cb, NULL, NULL);
	CHECK(!ret, "range done: %s", mi_last_error());
	{
		int missing = 0, by_a = 0, by_b = 0, taken = 0, dups = 0, mism = 0;
		int races = 0, la, lb;
		char *ao = node_file("a", "out"), *bo = node_file("b", "out");

		for (int l = 0; l < STREAMS; l++)
			for (int i = 0; i < ITEMS; i++) {
				missing += !who_etcd[l][i];
				by_a += who_etcd[l][i] == 'a';
				by_b += who_etcd[l][i] == 'b';
				taken += b_streams[l] && who_etcd[l][i] == 'a';
			}
		la = log_items(ao, 'a', &dups, &mism, &races);
		lb = log_items(bo, 'b', &dups, &mism, &races);
		CHECK(done_keys == STREAMS * ITEMS && !done_bad && !missing,
		      "done keys %d (bad %d, missing %d), want %d", done_keys, done_bad,
		      missing, STREAMS * ITEMS);
		CHECK(!dups && !mism, "node logs: %d items reported twice, %d not as etcd has them",
		      dups, mism);
		CHECK(la == by_a && lb <= by_b && lb >= by_b - 1,
		      "logs say a %d b %d, etcd a %d b %d", la, lb, by_a, by_b);
		CHECK(by_b > 0 && taken > 0, "b did %d items, a took over %d of b's", by_b, taken);
		printf("%d items in %d streams, each completed once: a %d, b %d (a took over %d of b's streams' items); %d runs discarded by a move\n",
		       done_keys, STREAMS, by_a, by_b, taken, races);
		free(ao);
		free(bo);
	}

	/* 5b: a's lease revoked under it: it leaves, takes a new lease and
	 * publishes again */
	{
		char *ao = node_file("a", "out"), *l = strstr(ao, ", lease ");
		long long lease = l ? atoll(l + 8) : 0;
		int64_t t0 = now_ns(), t_back = 0;

		CHECK(lease, "node a did not say its lease");
		ret = lease ? mi_etcd_lease_revoke(&eo, lease) : -EINVAL;
		CHECK(!ret, "revoke a's lease: %s", mi_last_error());
		while (!ret && now_ns() - t0 < (TTL_S + 3) * 1000000000LL) {
			pthread_mutex_lock(&s.lock);
			if (s.left_ns[0] && s.joins[0] == 2)
				t_back = s.joined_ns[0];
			pthread_mutex_unlock(&s.lock);
			if (t_back)
				break;
			sleep_ms(20);
		}
		CHECK(s.left_ns[0] && t_back, "a did not leave and join again after its lease was revoked");
		if (t_back)
			printf("a's lease revoked: a left, then joined again with a new lease %.2f s later\n",
			       (t_back - s.left_ns[0]) / 1e9);
		free(ao);
	}

	/* 6: etcd goes away under a and the watch, then comes back */
	kill(etcd_pid, SIGTERM);
	st = wait_exit(etcd_pid, 10000);
	CHECK(st != -1, "etcd did not stop on SIGTERM");
	if (st != -1)
		etcd_pid = 0;
	sleep_ms(1000);
	CHECK(wait_exit(node_pid[0], 0) == -1, "node a died when etcd went away");
	{
		struct mi_etcd_watch_status ws;
		char *err = node_file("a", "err");

		mi_etcd_watch_status(w, &ws);
		CHECK(!ws.connected && ws.error[0], "the watch did not notice etcd leave");
		CHECK(count_lines(err, NULL) == 1 && count_lines(err, "running on local state") == 1,
		      "node a: want one line when etcd went away, got '%s'", err);
		printf("etcd stopped under a: %s", err);
		free(err);
	}
	if (!etcd_pid && !start_etcd(etcd_bin, url_c, url_p, data, eout)) {
		static const char c_val[] =
			"{\"dev\":\"sim0\",\"class\":\"sim:u65\",\"dims\":{},"
			"\"solver\":{\"available\":true,\"slowdown\":1,\"xfer_slowdown\":1,"
			"\"mem_fraction\":1,\"reliability\":1}}";
		int64_t t0 = now_ns();
		struct mi_etcd_watch_status ws;
		bool seen = false, back = false;
		char *err = NULL;

		/* a change after the restart reaches the reopened watch */
		ret = mi_etcd_put(&eo, "/metainfer/" CLUSTER "/nodes/c/devices/sim0",
				  c_val, strlen(c_val), 0);
		CHECK(!ret, "put c: %s", mi_last_error());
		while (now_ns() - t0 < 5000000000LL && !(seen && back)) {
			sleep_ms(20);
			pthread_mutex_lock(&s.lock);
			seen = s.joins[2] == 1;
			pthread_mutex_unlock(&s.lock);
			free(err);
			err = node_file("a", "err");
			back = count_lines(err, "answers again") == 1;
		}
		mi_etcd_watch_status(w, &ws);
		CHECK(seen && ws.connected && ws.reconnects == 1,
		      "after etcd's restart the watch saw c join %d, connected %d, reconnects %llu",
		      seen, ws.connected, (unsigned long long)ws.reconnects);
		CHECK(back && count_lines(err, NULL) == 2,
		      "node a: want one line when etcd came back, got '%s'", err);
		printf("etcd restarted: a change made then reached the reopened watch in %.2f s; a: %s",
		       (now_ns() - t0) / 1e9, back ? strchr(err, '\n') + 1 : "(nothing)\n");
		free(err);
	}

	/* a stops: its revoked lease takes its keys at once */
	kill(node_pid[0], SIGTERM);
	st = wait_exit(node_pid[0], 10000);
	CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	      "node a did not stop cleanly on SIGTERM: status %d", st);
	if (st != -1)
		node_pid[0] = 0;
	for (int i = 0, lefts = 0; i < 300; i++) {
		pthread_mutex_lock(&s.lock);
		lefts = s.lefts[0];
		pthread_mutex_unlock(&s.lock);
		if (lefts == 2)
			break;
		CHECK(i < 299, "the watch did not see a leave when it stopped (%d leaves)", lefts);
		sleep_ms(20);
	}
	{
		char *out = node_file("a", "out");

		CHECK(strstr(out, "relets 1,"), "node a did not take exactly one new lease");
		free(out);
	}
	mi_etcd_watch_stop(w);
	mi_solver_destroy(sv);
	cleanup();
	CHECK(access(tmp, F_OK) && errno == ENOENT, "%s still there", tmp);
	printf("%s check-etcd in %.1f s (%llu solves)\n", failures ? "FAIL" : "PASS",
	       (now_ns() - t_start) / 1e9, (unsigned long long)s.replans);
	return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
	const char *node_bin = NULL, *etcd_given = NULL;
	char etcd_bin[512];

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--node-bin") && i + 1 < argc)
			node_bin = argv[++i];
		else if (!strcmp(argv[i], "--etcd") && i + 1 < argc)
			etcd_given = argv[++i];
		else if (!strcmp(argv[i], "-v"))
			verbose = 1;
		else {
			fprintf(stderr, "usage: etcd-test --node-bin PATH [--etcd PATH] [-v]\n");
			return 2;
		}
	}
	if (!node_bin) {
		fprintf(stderr, "usage: etcd-test --node-bin PATH [--etcd PATH] [-v]\n");
		return 2;
	}
	test_codec();
	test_parse();
	if (etcd_given) {
		snprintf(etcd_bin, sizeof(etcd_bin), "%s", etcd_given);
		if (access(etcd_bin, X_OK)) {
			printf("FAIL: --etcd %s: %s\n", etcd_bin, strerror(errno));
			return 1;
		}
	} else if (!find_etcd(etcd_bin, sizeof(etcd_bin))) {
		printf("SKIP check-etcd: etcd is not installed (apt-get install etcd-server);"
		       " codec and spec parser checks %s\n", failures ? "FAILED" : "passed");
		return failures ? 1 : 0;
	}
	node_bin_path = node_bin;
	return run(etcd_bin);
}
