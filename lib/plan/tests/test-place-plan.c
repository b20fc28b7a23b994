// SPDX-License-Identifier: GPL-2.0-only
/*
 * A placed model's plan is a value (host only, emulated devices of
 * tools/hetero/hetero-emu.c, the real uapi lowering).
 *
 * Per model and device list: load with the devices, read the plan back
 * (mi_model_plan_get), write it as JSON and parse it again, load the
 * model afresh with the same devices and apply the plan.  Checked: the
 * JSON of the plan read back from both loads is the same text, so is
 * the placement (mi_model_placement_write: device per node, jobs and
 * their units, transfers), and both loads give bit-identical outputs on
 * seeded inputs.  Also applying the plan to the load it came from
 * changes nothing.  Between the loads every device's measured wall rate
 * drops 16x (as another process may measure it), which moves the
 * default rule's time-budget splits: the plan's jobs must not move.
 * -s: first apply a plan with a 1 us job budget (a job per unit, units
 * that share a node kept together) and round-trip that; -t: first run
 * once with the first device's first job timing out (the model is then
 * to be placed again, the device down) and round-trip the plan read
 * back after it.
 *
 *   test-place-plan [-s] DEVICES MODEL.int8.onnx...
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <metainfer/metainfer.h>

#include "device/device.h"
#include "internal.h"
#include "plan/place-impl.h"
#include "plan/plan-impl.h"
#include "tests/check.h"

/* tools/hetero/hetero-emu.c: npu0 (NHWC, every op), npu1 (NCHW, no LUT),
 * npu4 (npu0 without CONV2D) */
int hetero_emu_setup(void);

#define INPUTS 3

/* The text f writes into a malloc'ed string (NULL on failure). */
static char *text_of(int (*wr)(const void *, FILE *), const void *arg)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	int err;

	if (!f)
		return NULL;
	err = wr(arg, f);
	fclose(f);
	if (err) {
		free(buf);
		return NULL;
	}
	return buf;
}

static int wr_plan(const void *p, FILE *f)
{
	return mi_plan_write(p, f);
}

/* The placement without its predicted times (they follow the rates
 * measured in this process, which slow_down changes). */
static int wr_placement(const void *m, FILE *f)
{
	char *buf = NULL, *line, *save;
	size_t len = 0;
	FILE *t = open_memstream(&buf, &len);
	int err;

	if (!t)
		return -ENOMEM;
	err = mi_model_placement_write((struct mi_model *)m, t);
	fclose(t);
	for (line = strtok_r(buf, "\n", &save); !err && line;
	     line = strtok_r(NULL, "\n", &save)) {
		char *pred = strstr(line, ", predicted");

		if (pred)
			*pred = 0;
		fprintf(f, "%s\n", line);
	}
	free(buf);
	return err;
}

static char *plan_text(struct mi_model *m)
{
	struct mi_plan *p;
	char *s;

	if (mi_model_plan_get(m, &p)) {
		fprintf(stderr, "plan_get: %s\n", mi_last_error());
		return NULL;
	}
	s = text_of(wr_plan, p);
	mi_plan_free(p);
	return s;
}

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Run a and b on INPUTS seeded inputs; 0 when every output is the same
 * bits. */
static int same_outputs(struct mi_model *a, struct mi_model *b)
{
	struct mi_tensor_info ti;
	struct mi_value in = { 0 };
	size_t cnt = 1;
	float *x;
	int diff = 0;

	if (mi_model_input_info(a, 0, &ti) || ti.dtype != MI_DT_FLOAT)
		return -1;
	in.name = ti.name;
	in.dtype = ti.dtype;
	in.ndim = ti.ndim;
	for (int d = 0; d < ti.ndim; d++) {
		in.dims[d] = ti.dims[d] < 0 ? 1 : ti.dims[d];
		cnt *= (size_t)in.dims[d];
	}
	x = malloc(cnt * sizeof(*x));
	if (!x)
		return -1;
	in.data = x;
	in.nbytes = cnt * sizeof(*x);
	for (int k = 0; k < INPUTS && !diff; k++) {
		struct mi_value oa, ob;
		uint64_t s = 7 + (uint64_t)k;
		void *keep;

		for (size_t j = 0; j < cnt; j++)
			x[j] = (float)((rng_next(&s) >> 40) *
				       (1.0 / (1ull << 23)) - 1.0);
		if (mi_model_run(a, &in, 1, &oa, 1)) {
			fprintf(stderr, "run: %s\n", mi_last_error());
			diff = -1;
			break;
		}
		keep = malloc(oa.nbytes);
		if (!keep) {
			diff = -1;
			break;
		}
		memcpy(keep, oa.data, oa.nbytes);
		if (mi_model_run(b, &in, 1, &ob, 1)) {
			fprintf(stderr, "run: %s\n", mi_last_error());
			diff = -1;
		} else if (ob.nbytes != oa.nbytes ||
			   memcmp(keep, ob.data, ob.nbytes)) {
			diff = 1;
		}
		free(keep);
	}
	free(x);
	return diff;
}

/* Each device of list 16x slower in wall time than measured so far. */
static void slow_down(const char *list)
{
	struct mi_dev *devs[8];
	int n = mi_dev_select(list, devs, 8);

	for (int i = 0; i < n; i++) {
		uint64_t r = mi_dev_wall_rate(devs[i], false);

		if (r >= 16)
			mi_dev_wall_rate_cap(devs[i], r / 16, 1000000000ull);
	}
}

static struct mi_model *load(const char *path, const char *devices)
{
	struct mi_model_opts mo = { .devices = devices };
	struct mi_model *m;

	if (mi_model_load(path, &mo, &m)) {
		fprintf(stderr, "%s on %s: %s\n", path, devices, mi_last_error());
		return NULL;
	}
	return m;
}

/* Every unit in a job of its own: a plan with a 1 us budget (and no
 * jobs of its own), so units that share a node split where they may. */
static int one_unit_jobs(struct mi_model *m)
{
	struct mi_plan *p;
	int err = mi_model_plan_get(m, &p);

	if (err)
		return err;
	p->max_job_us = 1;
	for (int k = 0; k < p->n; k++)
		p->e[k].job = 0;
	err = mi_model_plan_apply(m, p);
	mi_plan_free(p);
	return err;
}

/* A run whose first job times out: the device is marked down and the
 * model is to be placed again before its next run; its plan must still
 * read back (it is the one that next run will have). */
static int timed_out_run(struct mi_model *m, const char *devices)
{
	struct mi_dev *d[8];
	struct mi_value in = { 0 }, out;
	struct mi_tensor_info ti;
	size_t cnt = 1;
	float *x;
	int err;

	/* d[0] is the CPU */
	if (mi_dev_select(devices, d, 8) < 2 ||
	    mi_model_input_info(m, 0, &ti))
		return -EINVAL;
	in.name = ti.name;
	in.dtype = ti.dtype;
	in.ndim = ti.ndim;
	for (int k = 0; k < ti.ndim; k++) {
		in.dims[k] = ti.dims[k] < 0 ? 1 : ti.dims[k];
		cnt *= (size_t)in.dims[k];
	}
	x = calloc(cnt, sizeof(*x));
	if (!x)
		return -ENOMEM;
	in.data = x;
	in.nbytes = cnt * sizeof(*x);
	mi_dev_emu_inject(d[1], -ETIMEDOUT, 1);
	err = mi_model_run(m, &in, 1, &out, 1);
	/* the jobs of the plan applied did not fit: the rule groups again */
	CHECK(!m->place->jpin, "a time-out keeps the plan's jobs");
	free(x);
	return err;
}

static void roundtrip(const char *path, const char *devices, int mode)
{
	struct mi_model *a = load(path, devices), *b = NULL;
	struct mi_plan *p = NULL;
	char *ja = NULL, *jb = NULL, *pa = NULL, *pb = NULL, *ja2 = NULL;
	char *pa2 = NULL;
	int before = fails;

	CHECK(a, "%s on %s: load", path, devices);
	if (!a)
		return;
	CHECK(mode != 's' || !one_unit_jobs(a), "%s on %s: one unit per job: %s",
	      path, devices, mi_last_error());
	/* -t: with a plan (its jobs) applied first, as `run --plan` */
	if (mode == 't') {
		struct mi_plan *own;

		CHECK(!mi_model_plan_get(a, &own) && !mi_model_plan_apply(a, own),
		      "%s on %s: apply its own plan: %s", path, devices,
		      mi_last_error());
		mi_plan_free(own);
	}
	CHECK(mode != 't' || !timed_out_run(a, devices),
	      "%s on %s: a run with a time-out: %s", path, devices,
	      mi_last_error());
	ja = plan_text(a);
	pa = text_of(wr_placement, a);
	CHECK(ja && pa, "%s on %s: plan / placement", path, devices);
	if (!ja || !pa)
		goto out;
	/* another process measures other wall rates (mi_dev_wall_rate):
	 * the default rule would split jobs elsewhere, the plan must not */
	slow_down(devices);
	/* through the JSON text, as `metainfer plan -o` and `run --plan` */
	CHECK(!mi_plan_parse(ja, strlen(ja), &p), "%s on %s: parse: %s", path,
	      devices, mi_last_error());
	if (!p)
		goto out;
	b = load(path, devices);
	CHECK(b, "%s on %s: second load", path, devices);
	if (!b)
		goto out;
	CHECK(!mi_model_plan_apply(b, p), "%s on %s: apply to a fresh load: %s",
	      path, devices, mi_last_error());
	jb = plan_text(b);
	pb = text_of(wr_placement, b);
	CHECK(jb && !strcmp(ja, jb),
	      "%s on %s: the applied plan reads back differently", path,
	      devices);
	CHECK(pb && !strcmp(pa, pb),
	      "%s on %s: the applied plan places differently:\n--- default\n%s--- applied\n%s",
	      path, devices, pa, pb ? pb : "(none)\n");
	CHECK(!same_outputs(a, b), "%s on %s: outputs differ", path, devices);
	/* and on the load the plan came from: nothing moves */
	CHECK(!mi_model_plan_apply(a, p), "%s on %s: apply to its own load: %s",
	      path, devices, mi_last_error());
	ja2 = plan_text(a);
	pa2 = text_of(wr_placement, a);
	CHECK(ja2 && !strcmp(ja, ja2) && pa2 && !strcmp(pa, pa2),
	      "%s on %s: re-applying its own plan changes it", path, devices);
	/* an edit of a device alone (what a search does) drops that
	 * entry's job: it is not written */
	for (int k = 0; p && k < p->n; k++) {
		if (!p->e[k].job)
			continue;
		free(p->e[k].device);
		p->e[k].device = strdup("cpu");
		CHECK(!mi_plan_entry_job(&p->e[k]),
		      "%s on %s: a moved entry keeps its job", path, devices);
		break;
	}
	free(jb);
	jb = p ? text_of(wr_plan, p) : NULL;
	CHECK(jb && !strstr(jb, "\"device\": \"cpu\", \"job\""),
	      "%s on %s: a job written for a CPU entry", path, devices);
	if (fails == before)
		printf("%s on %s%s: plan and placement round-trip\n", path,
		       devices, mode == 's' ? " (a job per unit)" :
				mode == 't' ? " (after a time-out)" : "");
out:
	free(ja);
	free(jb);
	free(ja2);
	free(pa);
	free(pb);
	free(pa2);
	mi_plan_free(p);
	mi_model_free(b);
	mi_model_free(a);
}

int main(int argc, char **argv)
{
	int mode = argc > 1 && (!strcmp(argv[1], "-s") ||
				!strcmp(argv[1], "-t")) ? argv[1][1] : 0;
	int a = mode ? 2 : 1;

	if (argc < a + 2) {
		fprintf(stderr, "usage: %s [-s|-t] DEVICES MODEL.onnx...\n",
			argv[0]);
		return 2;
	}
	if (hetero_emu_setup())
		return 1;
	for (int i = a + 1; i < argc; i++)
		roundtrip(argv[i], argv[a], mode);
	if (fails) {
		fprintf(stderr, "test-place-plan: %d fails\n", fails);
		return 1;
	}
	printf("test-place-plan: OK\n");
	return 0;
}
