// SPDX-License-Identifier: GPL-2.0-only
/*
 * Placement and device jobs on emulated accelerators (host only).
 *
 * A test lowering turns quantized Relu units (DequantizeLinear -> Relu ->
 * QuantizeLinear, one scale) into RELU ops of the uapi command stream,
 * which the emulated devices run bit-exactly.  Checked: the placement
 * rule with devices of different op masks, job grouping (split by a CPU
 * node in between), outputs equal to the CPU-only run, plans with devices
 * (JSON round trip, unknown device rejected), injected faults (-ETIMEDOUT,
 * -EIO, -ENODEV: right output, fault counted, device down, back up), the
 * stats reset, constants uploaded once (bytes_const, not bytes_in), jobs
 * split by the time budget (the default rule from the job timeout, and a
 * plan's max_job_us), and chained jobs: on one device through its own BO
 * and across two devices through a PRIME import, with the producer's
 * fence as in-fence, no copy through the CPU (the stats' shared count),
 * and both rerun on the CPU when the producer fails.
 *
 *   test-place DIR   (the models of gen_place_models.py)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "device/device.h"
#include "plan/place-impl.h"
#include "plan/plan-impl.h"
#include "tests/check.h"

/* -v: print each placement (mi_place_print) while testing */
static bool verbose;

/* ---- the test lowering ---------------------------------------------------- */
static int producer_op(struct mi_graph *g, int t, const char *op)
{
	for (int i = 0; i < g->nnodes; i++) {
		struct mi_node *n = &g->nodes[i];

		if (!n->dead && n->noutputs && n->outputs[0] == t &&
		    !strcmp(n->op_type, op))
			return i;
	}
	return -1;
}

static int consumer_op(struct mi_graph *g, int t, const char *op)
{
	for (int i = 0; i < g->nnodes; i++) {
		struct mi_node *n = &g->nodes[i];

		if (!n->dead && n->ninputs && n->inputs[0] == t &&
		    !strcmp(n->op_type, op))
			return i;
	}
	return -1;
}

static int t_find(struct mi_graph *g, struct mi_qunit **units, int *nunits)
{
	struct mi_qunit *u = calloc(g->nnodes + 1, sizeof(*u));
	int n = 0;

	if (!u)
		return -ENOMEM;
	for (int p = 0; p < g->norder; p++) {
		int ni = g->order[p], d, q;
		struct mi_node *r = &g->nodes[ni];

		if (strcmp(r->op_type, "Relu"))
			continue;
		d = producer_op(g, r->inputs[0], "DequantizeLinear");
		q = consumer_op(g, r->outputs[0], "QuantizeLinear");
		if (d < 0 || q < 0)
			continue;
		u[n].anchor = ni;
		u[n].op = DRM_METAINFER_OP_RELU;
		u[n].members[0] = d;
		u[n].members[1] = ni;
		u[n].members[2] = q;
		u[n].nmembers = 3;
		u[n].inputs[0] = g->nodes[d].inputs[0];
		u[n].ninputs = 1;
		u[n].output = g->nodes[q].outputs[0];
		n++;
	}
	*units = u;
	*nunits = n;
	return 0;
}

static bool t_supported(struct mi_graph *g, const struct mi_qunit *u,
			const struct mi_dev_caps *caps, char *why, size_t wlen)
{
	if (caps->op_mask & (1ull << u->op))
		return true;
	snprintf(why, wlen, "no RELU in the op mask");
	return false;
}

static void set_t(struct drm_metainfer_tensor *d, const struct mi_tensor *x,
		  uint64_t off)
{
	memset(d, 0, sizeof(*d));
	d->bo_index = 1;
	d->dtype = DRM_METAINFER_DTYPE_UINT8;
	d->layout = DRM_METAINFER_LAYOUT_PLAIN;
	d->ndim = 1;
	d->offset = off;
	d->shape[0] = (uint32_t)mi_tensor_numel(x);
}

static int t_job(struct mi_graph *g, const struct mi_qunit *const *units,
		 int n, const struct mi_dev_caps *caps,
		 struct mi_lower_job **jobp)
{
	struct mi_lower_job *j = calloc(1, sizeof(*j));
	struct drm_metainfer_stream_header *h;
	struct drm_metainfer_op_clip *op;
	size_t off = 0;

	if (!j)
		return -ENOMEM;
	j->cmds_size = sizeof(*h) + n * sizeof(*op);
	j->cmds = calloc(1, j->cmds_size);
	j->t = calloc(2 * n + 2, sizeof(*j->t));
	if (!j->cmds || !j->t)
		return -ENOMEM;
	/* a constant the stream does not read: counts the upload */
	j->t[0].role = MI_LT_CONST;
	j->t[0].graph_tensor = -1;
	j->t[0].bytes = 64;
	j->t[0].data = calloc(1, 64);
	if (!j->t[0].data)
		return -ENOMEM;
	j->const_bytes = 64;
	j->nt = 1;
	h = j->cmds;
	h->magic = DRM_METAINFER_STREAM_MAGIC;
	h->version = DRM_METAINFER_STREAM_VERSION;
	h->op_count = n;
	op = (void *)(h + 1);
	for (int k = 0; k < n; k++, op++) {
		int in = units[k]->inputs[0], out = units[k]->output;
		const struct mi_tensor *x = &g->tensors[in];
		int ti = -1;
		struct mi_node *dq = &g->nodes[units[k]->members[0]];
		const struct mi_tensor *zp = &g->tensors[dq->inputs[2]];

		for (int i = 0; i < j->nt; i++)
			if (j->t[i].graph_tensor == in)
				ti = i;
		if (ti < 0) {
			ti = j->nt++;
			j->t[ti].role = MI_LT_INPUT;
			j->t[ti].graph_tensor = in;
			j->t[ti].bo_index = 1;
			j->t[ti].offset = off;
			j->t[ti].bytes = mi_tensor_numel(x);
			off += (j->t[ti].bytes + 63) & ~(size_t)63;
		}
		op->hdr.op = DRM_METAINFER_OP_RELU;
		op->hdr.size = sizeof(*op);
		op->min = *(const uint8_t *)zp->data;
		set_t(&op->input, x, j->t[ti].offset);
		j->t[j->nt].role = MI_LT_OUTPUT;
		j->t[j->nt].graph_tensor = out;
		j->t[j->nt].bo_index = 1;
		j->t[j->nt].offset = off;
		j->t[j->nt].bytes = mi_tensor_numel(&g->tensors[out]);
		set_t(&op->output, &g->tensors[out], off);
		off += (j->t[j->nt].bytes + 63) & ~(size_t)63;
		j->nt++;
	}
	j->nops = n;
	j->act_bytes = off;
	j->units = units;
	j->nunits = n;
	*jobp = j;
	return 0;
}

static void t_job_free(struct mi_lower_job *j)
{
	free(j->t[0].data);
	free(j->cmds);
	free(j->t);
	free(j);
}

/* Move input ti: patch the ops that read it. */
static int t_rebind(struct mi_lower_job *j, int ti, uint32_t bo, uint64_t off)
{
	struct drm_metainfer_op_clip *op =
		(void *)((struct drm_metainfer_stream_header *)j->cmds + 1);
	struct mi_lower_tensor *t = &j->t[ti];

	for (int k = 0; k < j->nops; k++, op++)
		if (op->input.bo_index == t->bo_index &&
		    op->input.offset == t->offset) {
			op->input.bo_index = bo;
			op->input.offset = off;
		}
	t->bo_index = bo;
	t->offset = off;
	return 0;
}

static const struct mi_lowering test_lowering = {
	t_find, t_supported, t_job, t_job_free, t_rebind,
};

/* ---- helpers -------------------------------------------------------------- */
static float input[256], ref[256];

static int run(struct mi_model *m, float *y)
{
	struct mi_value in = { .dtype = MI_DT_FLOAT, .ndim = 4,
			       .dims = { 1, 4, 8, 8 }, .data = input,
			       .nbytes = sizeof(input) };
	struct mi_value out;
	int err = mi_model_run(m, &in, 1, &out, 1);

	if (!err)
		memcpy(y, out.data, sizeof(ref));
	return err;
}

static struct mi_model *load(const char *path, const char *devices)
{
	struct mi_model_opts o = { .nthreads = 1, .devices = devices };
	struct mi_model *m = NULL;

	if (mi_model_load(path, &o, &m))
		fprintf(stderr, "load %s: %s\n", path, mi_last_error());
	return m;
}

static void stats(struct mi_model *m, const char *dev,
		  struct mi_device_stats *st)
{
	memset(st, 0, sizeof(*st));
	for (int i = 0; i < mi_model_device_count(m); i++) {
		mi_model_device_stats(m, i, st);
		if (!strcmp(st->device, dev))
			return;
	}
	memset(st, 0, sizeof(*st));
}

static int jobs_on(struct mi_model *m, const char *dev)
{
	struct mi_place *pl = m->place;
	int n = 0;

	for (int k = 0; k < pl->njobs; k++)
		n += pl->jobs[k].bound &&
		     !strcmp(pl->devs[pl->jobs[k].slot]->name, dev);
	return n;
}

static void check_output(struct mi_model *m, const char *what)
{
	float y[256];
	int err = run(m, y);

	CHECK(!err, "%s: run: %s", what, mi_last_error());
	CHECK(!err && !memcmp(y, ref, sizeof(y)),
	      "%s: output differs from the CPU run", what);
}

/* ---- tests ---------------------------------------------------------------- */
static void test_relu3(const char *path, struct mi_dev *e0, struct mi_dev *e1)
{
	struct mi_device_stats st;
	struct mi_model *m;
	struct mi_plan *p = NULL, *q = NULL;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	m = load(path, "cpu");
	CHECK(m && !run(m, ref), "cpu-only run");
	mi_model_free(m);

	/* emu1 lacks RELU: everything goes to emu0, as one job */
	m = load(path, "emu1,emu0");
	if (!m)
		return;
	CHECK(mi_model_device_count(m) == 3, "3 devices, got %d",
	      mi_model_device_count(m));
	CHECK(jobs_on(m, "emu0") == 1 && jobs_on(m, "emu1") == 0,
	      "one job on emu0, got %d/%d", jobs_on(m, "emu0"),
	      jobs_on(m, "emu1"));
	if (verbose)
		mi_place_print(m, stderr);
	check_output(m, "relu3 on emu0");
	stats(m, "emu0", &st);
	/* in: q0; out: q3 only (q1, q2 are read inside the job); the
	 * job's constant uploaded once, at bind */
	CHECK(st.jobs == 1 && st.bytes_in == 256 && st.bytes_out == 256 &&
	      st.bytes_const == 64 && st.nodes >= 3 && !st.faults && !st.shared,
	      "emu0 stats: jobs %llu in %llu out %llu const %llu nodes %llu",
	      (unsigned long long)st.jobs, (unsigned long long)st.bytes_in,
	      (unsigned long long)st.bytes_out,
	      (unsigned long long)st.bytes_const, (unsigned long long)st.nodes);
	mi_model_device_stats_reset(m);
	stats(m, "emu0", &st);
	CHECK(!st.jobs && !st.bytes_in && !st.busy_ns && !st.bytes_const &&
	      st.nodes, "stats reset");
	/* per inference: activations only, no constants again */
	for (int r = 0; r < 3; r++)
		check_output(m, "relu3 again");
	stats(m, "emu0", &st);
	CHECK(st.jobs == 3 && st.bytes_in == 3 * 256 && !st.bytes_const,
	      "3 runs: jobs %llu in %llu const %llu",
	      (unsigned long long)st.jobs, (unsigned long long)st.bytes_in,
	      (unsigned long long)st.bytes_const);
	mi_model_device_stats_reset(m);

	/* the plan names the devices and round-trips through JSON */
	CHECK(!mi_model_plan_get(m, &p), "plan get");
	f = open_memstream(&buf, &len);
	if (p && f) {
		int on = 0;

		for (int i = 0; i < p->n; i++)
			on += !strcmp(p->e[i].device, "emu0");
		CHECK(on >= 3, "plan puts %d nodes on emu0", on);
		mi_plan_write(p, f);
		fclose(f);
		CHECK(!mi_plan_parse(buf, len, &q), "parse: %s", mi_last_error());
		CHECK(q && !mi_model_plan_apply(m, q), "apply: %s",
		      mi_last_error());
		CHECK(jobs_on(m, "emu0") == 1, "job after apply");
		check_output(m, "applied plan");
		/* the plan moves everything to the CPU */
		for (int i = 0; q && i < q->n; i++) {
			free(q->e[i].device);
			q->e[i].device = strdup("cpu");
		}
		CHECK(q && !mi_model_plan_apply(m, q), "apply cpu: %s",
		      mi_last_error());
		CHECK(jobs_on(m, "emu0") == 0, "plan pinned to the cpu");
		check_output(m, "plan on the cpu");
		/* a device that cannot run the unit: rejected */
		for (int i = 0; q && i < q->n; i++)
			if (!strcmp(q->e[i].op, "Relu")) {
				free(q->e[i].device);
				q->e[i].device = strdup("emu1");
			}
		CHECK(q && mi_model_plan_apply(m, q) == -EINVAL &&
		      strstr(mi_last_error(), "puts it on emu1") &&
		      strstr(mi_last_error(), "no RELU"),
		      "unsupported pin: %s", mi_last_error());
		CHECK(jobs_on(m, "emu0") == 0, "old plan kept");
		check_output(m, "after a rejected plan");
		/* unknown device: rejected with one line */
		for (int i = 0; q && i < q->n; i++)
			if (!strcmp(q->e[i].op, "Relu")) {
				free(q->e[i].device);
				q->e[i].device = strdup("nosuch");
			}
		CHECK(q && mi_model_plan_apply(m, q) == -EINVAL &&
		      strstr(mi_last_error(), "unknown device 'nosuch'") &&
		      !strchr(mi_last_error(), '\n'),
		      "unknown device: %s", mi_last_error());
		mi_model_plan_reset(m);
	}
	free(buf);
	mi_plan_free(p);
	mi_plan_free(q);

	/* faults: the right output, counted, device down then up */
	static const int errs[] = { -ETIMEDOUT, -EIO, -ENODEV };

	for (int k = 0; k < 3; k++) {
		mi_model_device_stats_reset(m);
		mi_dev_emu_inject(e0, errs[k], 1);
		check_output(m, "fault");
		stats(m, "emu0", &st);
		CHECK(st.faults == 1 && !st.jobs, "fault %d counted: %llu",
		      errs[k], (unsigned long long)st.faults);
		CHECK(atomic_load(&e0->down), "fault %d: emu0 marked down",
		      errs[k]);
		if (errs[k] == -ENODEV) {
			/* lost: later runs avoid it */
			CHECK(!mi_dev_up(e0), "lost device is not up");
			check_output(m, "device lost");
			stats(m, "emu0", &st);
			CHECK(!st.jobs && st.faults == 1, "lost: no jobs");
			mi_dev_emu_inject(e0, 0, 0);
		}
		CHECK(mi_dev_up(e0), "emu0 answers again");
		check_output(m, "after fault");
		stats(m, "emu0", &st);
		CHECK(st.jobs == 1, "emu0 used again after fault %d", errs[k]);
	}
	mi_model_free(m);

	/* no accelerator supports it: all on the CPU */
	m = load(path, "emu1");
	CHECK(m && jobs_on(m, "emu1") == 0, "emu1 takes nothing");
	if (m)
		check_output(m, "emu1 only");
	mi_model_free(m);
	(void)e1;
}

static void test_split(const char *path)
{
	struct mi_model *m = load(path, "cpu");
	struct mi_device_stats st;

	CHECK(m && !run(m, ref), "split: cpu-only run");
	mi_model_free(m);
	m = load(path, "emu0");
	if (!m)
		return;
	if (verbose)
		mi_place_print(m, stderr);
	/* Relu, Relu | Sigmoid on the CPU | Relu: two jobs */
	CHECK(jobs_on(m, "emu0") == 2, "split: 2 jobs, got %d",
	      jobs_on(m, "emu0"));
	check_output(m, "split");
	stats(m, "emu0", &st);
	CHECK(st.jobs == 2, "split: emu0 ran %llu jobs",
	      (unsigned long long)st.jobs);
	mi_model_free(m);
}

/*
 * emu2 (RELU, 1 MB/s DMA, 5 ms job timeout): a Relu unit moves 522 bytes
 * (256 in, 256 out, the scales and zero points), 522 us predicted; the
 * default budget (25% of the timeout, 1.25 ms) takes two: relu3 runs as
 * two jobs, the second reading the first's output in place (same BO, the
 * first's fence as in-fence).
 */
static void test_budget(const char *path, struct mi_dev *e2)
{
	struct mi_device_stats st;
	struct mi_plan *p = NULL, *q = NULL;
	struct mi_model *m = load(path, "emu2");
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	if (!m)
		return;
	if (verbose)
		mi_place_print(m, stderr);
	CHECK(jobs_on(m, "emu2") == 2, "budget: 2 jobs, got %d",
	      jobs_on(m, "emu2"));
	CHECK(m->place->njobs == 2 && m->place->jobs[0].pred_ns == 1044000 &&
	      m->place->jobs[1].pred_ns == 522000,
	      "budget: predicted %llu + %llu ns",
	      (unsigned long long)m->place->jobs[0].pred_ns,
	      (unsigned long long)(m->place->njobs > 1 ?
				   m->place->jobs[1].pred_ns : 0));
	CHECK(m->place->njobs == 2 && m->place->jobs[1].nbos == 3 &&
	      m->place->jobs[1].bos[2] == m->place->jobs[0].abo &&
	      m->place->jobs[1].src[2] == 0,
	      "budget: job 1 reads job 0's buffer");
	mi_model_device_stats_reset(m);
	check_output(m, "budget split");
	stats(m, "emu2", &st);
	/* in: q0 only; q2 passed in place; out: q3 */
	CHECK(st.jobs == 2 && st.bytes_in == 256 && st.bytes_out == 256 &&
	      st.shared == 1 && st.shared_bytes == 256 && !st.faults,
	      "budget: jobs %llu in %llu out %llu shared %llu",
	      (unsigned long long)st.jobs, (unsigned long long)st.bytes_in,
	      (unsigned long long)st.bytes_out, (unsigned long long)st.shared);

	/* the producer fails: the consumer ran on its stale buffer with
	 * status 0 (as the kernel does); both rerun on the CPU */
	mi_model_device_stats_reset(m);
	mi_dev_emu_inject(e2, -EIO, 1);
	check_output(m, "producer fault");
	stats(m, "emu2", &st);
	CHECK(st.faults == 1 && st.jobs == 1 && !st.bytes_out,
	      "producer fault: faults %llu jobs %llu out %llu",
	      (unsigned long long)st.faults, (unsigned long long)st.jobs,
	      (unsigned long long)st.bytes_out);
	CHECK(mi_dev_up(e2), "emu2 answers again");
	check_output(m, "after producer fault");
	/* a time-out makes the next run place the model again */
	mi_dev_emu_inject(e2, -ETIMEDOUT, 1);
	check_output(m, "producer time-out");
	CHECK(!m->prepared, "time-out: placed again before the next run");
	check_output(m, "after the time-out");
	CHECK(m->prepared && jobs_on(m, "emu2") == 2,
	      "placed again: %d jobs", jobs_on(m, "emu2"));

	/* the plan carries the budget: 600 us, one unit per job (the jobs
	 * it read back with pin the grouping: dropped, the budget groups) */
	CHECK(!mi_model_plan_get(m, &p), "budget: plan get");
	f = open_memstream(&buf, &len);
	if (p && f) {
		p->max_job_us = 600;
		for (int k = 0; k < p->n; k++)
			p->e[k].job = 0;
		mi_plan_write(p, f);
		fclose(f);
		CHECK(strstr(buf, "\"max_job_us\": 600") != NULL,
		      "plan file has max_job_us");
		CHECK(!mi_plan_parse(buf, len, &q) && q->max_job_us == 600,
		      "parse max_job_us: %s", mi_last_error());
		CHECK(q && !mi_model_plan_apply(m, q), "apply: %s",
		      mi_last_error());
		CHECK(jobs_on(m, "emu2") == 3, "max_job_us 600: 3 jobs, got %d",
		      jobs_on(m, "emu2"));
		mi_model_device_stats_reset(m);
		check_output(m, "max_job_us 600");
		stats(m, "emu2", &st);
		CHECK(st.jobs == 3 && st.shared == 2 && st.bytes_in == 256,
		      "3 chained jobs: jobs %llu shared %llu in %llu",
		      (unsigned long long)st.jobs, (unsigned long long)st.shared,
		      (unsigned long long)st.bytes_in);
		mi_plan_free(q);
		q = NULL;
		/* not a positive integer: rejected with the key named */
		memcpy(strstr(buf, "\"max_job_us\": 600") + 14, "0.5", 3);
		CHECK(mi_plan_parse(buf, len, &q) && !q &&
		      strstr(mi_last_error(), "max_job_us"),
		      "max_job_us 0.5: %s", mi_last_error());
		mi_plan_free(q);
	}
	free(buf);
	mi_plan_free(p);
	mi_model_free(m);
}

/*
 * Two accelerators: the plan puts relu0/relu1 on emu2 and relu2 on emu0;
 * emu0 imports emu2's activation buffer (PRIME: the same memory, no copy
 * through the CPU) and waits for emu2's fence.
 */
static void test_prime(const char *path)
{
	struct mi_device_stats st, st2;
	struct mi_plan *p = NULL;
	struct mi_model *m = load(path, "emu2,emu0");
	struct mi_place_job *j0, *j1;

	if (!m)
		return;
	CHECK(!mi_model_plan_get(m, &p), "prime: plan get");
	for (int i = 0; p && i < p->n; i++)
		if (!strcmp(p->e[i].name, "relu2") || !strcmp(p->e[i].name, "dq2") ||
		    !strcmp(p->e[i].name, "q2")) {
			free(p->e[i].device);
			p->e[i].device = strdup("emu0");
		}
	CHECK(p && !mi_model_plan_apply(m, p), "prime: apply: %s",
	      mi_last_error());
	mi_plan_free(p);
	if (verbose)
		mi_place_print(m, stderr);
	CHECK(jobs_on(m, "emu2") == 1 && jobs_on(m, "emu0") == 1,
	      "prime: one job each, got %d/%d", jobs_on(m, "emu2"),
	      jobs_on(m, "emu0"));
	if (m->place->njobs != 2) {
		mi_model_free(m);
		return;
	}
	j0 = &m->place->jobs[0];
	j1 = &m->place->jobs[1];
	mi_model_device_stats_reset(m);
	check_output(m, "prime");
	CHECK(j1->nbos == 3 && j1->imp[2] && j1->bos[2] == j1->imp[2] &&
	      j1->imp[2]->dev == m->place->devs[j1->slot] &&
	      j0->abo->prime_fd >= 0 &&
	      !memcmp(j1->imp[2]->map, j0->abo->map, j0->abo->size),
	      "prime: emu0 reads emu2's buffer through an import");
	/* one write through the exporter is seen through the import */
	if (j1->nbos == 3 && j1->imp[2]) {
		((volatile unsigned char *)j0->abo->map)[0] ^= 0x5a;
		CHECK(((volatile unsigned char *)j1->imp[2]->map)[0] ==
		      ((volatile unsigned char *)j0->abo->map)[0],
		      "prime: the same memory");
	}
	stats(m, "emu2", &st2);
	stats(m, "emu0", &st);
	CHECK(st2.jobs == 1 && st2.bytes_in == 256 && !st2.bytes_out &&
	      st.jobs == 1 && st.shared == 1 && st.shared_bytes == 256 &&
	      !st.bytes_in && st.bytes_out == 256,
	      "prime: emu2 in %llu out %llu, emu0 in %llu shared %llu out %llu",
	      (unsigned long long)st2.bytes_in, (unsigned long long)st2.bytes_out,
	      (unsigned long long)st.bytes_in, (unsigned long long)st.shared,
	      (unsigned long long)st.bytes_out);
	mi_model_free(m);
}

/* The wait comes after CPU nodes of another branch ran (overlap), with
 * and without the arena. */
static void test_branch(const char *path)
{
	static const char *const modes[] = { "arena", "no arena" };

	for (int k = 0; k < 2; k++) {
		struct mi_model_opts o = { .nthreads = 1, .flags = k ?
					   MI_MODEL_NO_ARENA : 0 };
		struct mi_model *m = NULL;
		struct mi_place_job *j;

		CHECK(!mi_model_load(path, &o, &m) && !run(m, ref),
		      "branch: cpu-only run");
		mi_model_free(m);
		o.devices = "emu0";
		m = NULL;
		CHECK(!mi_model_load(path, &o, &m), "branch: load");
		if (!m)
			return;
		if (verbose)
			mi_place_print(m, stderr);
		CHECK(jobs_on(m, "emu0") == 1, "branch (%s): one job", modes[k]);
		j = &m->place->jobs[0];
		CHECK(j->bound && j->pw > j->p0 + 1,
		      "branch (%s): wait at %d after submit at %d", modes[k],
		      j->pw, j->p0);
		check_output(m, "branch");
		check_output(m, "branch, second run");
		mi_model_free(m);
	}
}

int main(int argc, char **argv)
{
	struct mi_dev_caps relu = {
		.op_mask = 1ull << DRM_METAINFER_OP_RELU,
		.dtype_mask = 1ull << DRM_METAINFER_DTYPE_UINT8,
		.num_queues = 1,
	}, none = { .num_queues = 1 }, slow = relu;
	struct mi_dev *e0, *e1, *e2;
	struct mi_model *m;
	char path[4096];

	if (argc == 3 && !strcmp(argv[1], "-v")) {
		verbose = true;
		argv++;
		argc--;
	}
	if (argc != 2) {
		fprintf(stderr, "usage: test-place [-v] DIR\n");
		return 2;
	}
	for (int i = 0; i < 256; i++)
		input[i] = ((i * 37) % 101 - 50) * 0.013f;
	mi_place_set_lowering(&test_lowering);
	slow.dma_bw = 1000000;
	slow.job_timeout_ms = 5;
	if (mi_dev_emu_add("emu0", &relu, &e0) ||
	    mi_dev_emu_add("emu1", &none, &e1) ||
	    mi_dev_emu_add("emu2", &slow, &e2)) {
		fprintf(stderr, "emu devices: %s\n", mi_last_error());
		return 1;
	}
	/* unknown device in the options: one line */
	snprintf(path, sizeof(path), "%s/relu3.onnx", argv[1]);
	m = load(path, "emu0,nosuch");
	CHECK(!m && strstr(mi_last_error(), "no device 'nosuch'"),
	      "unknown device: %s", mi_last_error());
	test_relu3(path, e0, e1);
	test_budget(path, e2);
	test_prime(path);
	snprintf(path, sizeof(path), "%s/split.onnx", argv[1]);
	test_split(path);
	snprintf(path, sizeof(path), "%s/branch.onnx", argv[1]);
	test_branch(path);
	printf("test-place: %s\n", fails ? "FAILED" : "ok");
	return fails ? 1 : 0;
}
