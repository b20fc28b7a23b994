// SPDX-License-Identifier: GPL-2.0-only
/*
 * uring_bench: cost of one job through each submission path, printed (not
 * asserted).
 *
 *   uring_bench [--device NAME] [--jobs N] [--qd LIST]
 *
 * Paths, each in rounds of QD jobs (QD jobs in flight at most):
 *   ioctl   QD SUBMIT ioctls, then QD WAIT ioctls;
 *   inline  one io_uring_enter() with QD SUBMIT uring_cmds (CQEs at issue),
 *           then one with QD WAIT uring_cmds (run by io-wq workers);
 *   async   one io_uring_enter() with QD SUBMIT uring_cmds flagged
 *           DRM_METAINFER_URING_CMD_ASYNC (each CQE posted when its job
 *           finishes, device time in big_cqe[0] of the CQE32 ring).
 * The job is a 64-byte COPY; every job's status is checked.  Printed: wall
 * time per job (round time / QD: the median and the minimum over the
 * rounds; a loaded host's stalls dominate the mean, printed last), the
 * modelled chip time per job, and the io-wq worker threads alive after the
 * path ran.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "mi_test.h"

#define MAX_QD 256

enum path { P_IOCTL, P_INLINE, P_ASYNC, P_COUNT };

static const char *const path_name[P_COUNT] = {
	[P_IOCTL] = "ioctl SUBMIT + ioctl WAIT",
	[P_INLINE] = "uring inline SUBMIT + WAIT (io-wq)",
	[P_ASYNC] = "uring async SUBMIT (CQE at job end)",
};

struct bench {
	int fd;
	uint32_t ctx;
	uint32_t bos[2];
	struct mi_stream s;
	struct io_uring ring;
	struct drm_metainfer_submit sub[MAX_QD];
	struct drm_metainfer_wait wait[MAX_QD];
};

static void die(const char *what, int err)
{
	fprintf(stderr, "uring_bench: %s: %s\n", what, strerror(-err));
	exit(1);
}

static void fill_submit(struct bench *b, struct drm_metainfer_submit *sub)
{
	memset(sub, 0, sizeof(*sub));
	sub->size = sizeof(*sub);
	sub->ctx_id = b->ctx;
	sub->bo_count = 2;
	sub->bo_handles = (uintptr_t)b->bos;
	sub->cmds = (uintptr_t)b->s.buf;
	sub->cmds_size = b->s.len;
}

static void queue(struct bench *b, uint32_t op, void *arg, uint32_t flags,
		  uint64_t tag)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&b->ring);
	struct drm_metainfer_uring_cmd *uc;

	if (!sqe)
		die("io_uring_get_sqe", -EBUSY);
	io_uring_prep_rw(IORING_OP_URING_CMD, sqe, b->fd, NULL, 0, 0);
	sqe->cmd_op = op;
	uc = (struct drm_metainfer_uring_cmd *)sqe->cmd;
	memset(uc, 0, sizeof(*uc));
	uc->arg_ptr = (uintptr_t)arg;
	uc->flags = flags;
	sqe->user_data = tag;
}

/* Submit what is queued and reap @n CQEs, each of which must be 0. */
static void submit_reap(struct bench *b, int n, const char *what)
{
	struct io_uring_cqe *cqe;
	int i, ret;

	ret = io_uring_submit(&b->ring);
	if (ret != n)
		die(what, ret < 0 ? ret : -EIO);
	for (i = 0; i < n; i++) {
		ret = io_uring_wait_cqe(&b->ring, &cqe);
		if (ret)
			die(what, ret);
		if (cqe->res)
			die(what, cqe->res);
		io_uring_cqe_seen(&b->ring, cqe);
	}
}

/* One round of @qd jobs through @p. */
static void round_of(struct bench *b, enum path p, int qd)
{
	int64_t st;
	int i, ret;

	for (i = 0; i < qd; i++)
		fill_submit(b, &b->sub[i]);
	switch (p) {
	case P_IOCTL:
		for (i = 0; i < qd; i++) {
			ret = mi_ioctl(b->fd, DRM_IOCTL_METAINFER_SUBMIT, &b->sub[i]);
			if (ret)
				die("SUBMIT", ret);
		}
		for (i = 0; i < qd; i++) {
			ret = mi_wait(b->fd, b->ctx, b->sub[i].seqno, 60000, &st);
			if (ret || st)
				die("WAIT", ret ? ret : (int)st);
		}
		break;
	case P_INLINE:
		for (i = 0; i < qd; i++)
			queue(b, DRM_IOCTL_METAINFER_SUBMIT, &b->sub[i], 0, i);
		submit_reap(b, qd, "uring SUBMIT");
		for (i = 0; i < qd; i++) {
			memset(&b->wait[i], 0, sizeof(b->wait[i]));
			b->wait[i].size = sizeof(b->wait[i]);
			b->wait[i].ctx_id = b->ctx;
			b->wait[i].seqno = b->sub[i].seqno;
			b->wait[i].timeout_ns = mi_deadline_ms(60000);
			b->wait[i].status = 1;
			queue(b, DRM_IOCTL_METAINFER_WAIT, &b->wait[i], 0, i);
		}
		submit_reap(b, qd, "uring WAIT");
		for (i = 0; i < qd; i++)
			if (b->wait[i].status)
				die("uring WAIT status", (int)b->wait[i].status);
		break;
	case P_ASYNC:
		for (i = 0; i < qd; i++)
			queue(b, DRM_IOCTL_METAINFER_SUBMIT, &b->sub[i],
			      DRM_METAINFER_URING_CMD_ASYNC, i);
		submit_reap(b, qd, "uring async SUBMIT");
		break;
	default:
		break;
	}
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

static int iou_workers(void)
{
	char path[300], comm[64];
	struct dirent *de;
	int n = 0;
	DIR *d = opendir("/proc/self/task");

	if (!d)
		return -1;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", de->d_name);
		if (mi_read_file(path, comm, sizeof(comm)) > 0 &&
		    !strncmp(comm, "iou-wrk", 7))
			n++;
	}
	closedir(d);
	return n;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "device", required_argument, NULL, 'd' },
		{ "jobs", required_argument, NULL, 'n' },
		{ "qd", required_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *dev = NULL, *qdlist = "1,8,64";
	int qds[8], nqd = 0, c, i, ret;
	double us[P_COUNT][8], best[P_COUNT][8], mean[P_COUNT][8];
	double chip[P_COUNT][8];
	int workers[P_COUNT][8];
	struct drm_metainfer_get_counters c0, c1;
	long jobs = 2048;
	struct bench *b;
	int64_t *lat;
	char name[64] = "?";
	uint64_t flags = 0;
	enum path p;
	char *end;

	while ((c = getopt_long(argc, argv, "d:n:q:h", opts, NULL)) != -1) {
		switch (c) {
		case 'd':
			dev = optarg;
			break;
		case 'n':
			jobs = strtol(optarg, NULL, 0);
			break;
		case 'q':
			qdlist = optarg;
			break;
		default:
			fprintf(stderr,
				"usage: uring_bench [--device NAME] [--jobs N] [--qd 1,8,64]\n");
			return c == 'h' ? 0 : 2;
		}
	}
	for (end = (char *)qdlist; *end && nqd < 8;) {
		qds[nqd] = (int)strtol(end, &end, 10);
		if (qds[nqd] < 1 || qds[nqd] > MAX_QD) {
			fprintf(stderr, "uring_bench: queue depths are 1..%d\n", MAX_QD);
			return 2;
		}
		nqd++;
		if (*end == ',')
			end++;
		else if (*end)
			break;
	}
	if (!nqd || *end || jobs < 1) {
		fprintf(stderr, "uring_bench: bad --qd or --jobs\n");
		return 2;
	}

	b = calloc(1, sizeof(*b));
	if (!b)
		die("calloc", -ENOMEM);
	b->fd = mi_open_named(dev, NULL);
	if (b->fd < 0)
		die(dev ? dev : "no metainfer device", b->fd);
	mi_get_param_str(b->fd, DRM_METAINFER_PARAM_NAME, name, sizeof(name));
	ret = mi_get_param(b->fd, DRM_METAINFER_PARAM_URING_CMD_FLAGS, 0, &flags);
	if (ret || !(flags & DRM_METAINFER_URING_CMD_ASYNC))
		die("asynchronous uring SUBMIT not advertised", ret ? ret : -EOPNOTSUPP);
	ret = mi_ctx_create(b->fd, 0, DRM_METAINFER_PRIORITY_NORMAL, &b->ctx);
	if (ret)
		die("CTX_CREATE", ret);
	if (!mi_bo_new(b->fd, 4096, &b->bos[0]))
		die("BO_CREATE", -ENOMEM);
	ret = mi_bo_create(b->fd, 4096, &b->bos[1]);
	if (ret)
		die("BO_CREATE", ret);
	mi_stream_init(&b->s);
	mi_copy_job(&b->s, 64, 0, 0);
	mi_stream_finish(&b->s);
	ret = io_uring_queue_init(2 * MAX_QD, &b->ring, IORING_SETUP_CQE32);
	if (ret)
		die("io_uring_queue_init", ret);
	lat = calloc(jobs, sizeof(*lat));
	if (!lat)
		die("calloc", -ENOMEM);

	/* async first, so that its worker count is not the inline path's */
	for (p = P_ASYNC;; p = p == P_ASYNC ? P_IOCTL : p + 1) {
		for (i = 0; i < nqd; i++) {
			long r, rounds = (jobs + qds[i] - 1) / qds[i];
			int64_t t0, t1;

			round_of(b, p, qds[i]);		/* warm up */
			mi_counters(b->fd, 0, &c0);
			t0 = mi_now_ns();
			for (r = 0; r < rounds; r++) {
				t1 = mi_now_ns();
				round_of(b, p, qds[i]);
				lat[r] = mi_now_ns() - t1;
			}
			mean[p][i] = (mi_now_ns() - t0) / 1e3 / (rounds * qds[i]);
			qsort(lat, rounds, sizeof(*lat), cmp_i64);
			us[p][i] = lat[rounds / 2] / 1e3 / qds[i];
			best[p][i] = lat[0] / 1e3 / qds[i];
			mi_counters(b->fd, 0, &c1);
			chip[p][i] = (c1.busy_ns - c0.busy_ns) / 1e3 /
				     (rounds * qds[i]);
			workers[p][i] = iou_workers();
		}
		if (p == P_INLINE)
			break;
	}

	printf("%s: wall time per job in us, median (min), %ld jobs per cell, 64-byte COPY%s\n",
	       name, jobs,
	       getenv("VMRUN") ? ", inside the QEMU TCG test VM (emulated CPU, not hardware speed)" : "");
	printf("%-38s", "path");
	for (i = 0; i < nqd; i++)
		printf("  QD %-13d", qds[i]);
	printf("  io-wq threads after\n");
	for (p = 0; p < P_COUNT; p++) {
		printf("%-38s", path_name[p]);
		for (i = 0; i < nqd; i++)
			printf("  %6.1f (%6.1f)", us[p][i], best[p][i]);
		printf("  ");
		for (i = 0; i < nqd; i++)
			printf("%s%d", i ? "/" : "", workers[p][i]);
		printf("\n");
	}
	printf("mean wall time per job in us:\n");
	for (p = 0; p < P_COUNT; p++) {
		printf("%-38s", path_name[p]);
		for (i = 0; i < nqd; i++)
			printf("  %6.1f         ", mean[p][i]);
		printf("\n");
	}
	printf("%-38s", "(modelled chip time per job)");
	for (i = 0; i < nqd; i++)
		printf("  %6.1f         ", chip[P_IOCTL][i]);
	printf("\n");

	io_uring_queue_exit(&b->ring);
	mi_stream_free(&b->s);
	close(b->fd);
	free(lat);
	free(b);
	return 0;
}
