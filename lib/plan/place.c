// SPDX-License-Identifier: MIT
/*
 * Placement: which device runs each quantized unit of a model.
 *
 * The default rule is ONNX Runtime's: accelerators are asked in the order
 * the model's device list names them; each unit goes to the first one
 * that is up and supports it (mi_qunit_supported), the rest stay on the
 * CPU.  Consecutive units (in topological order) on one device form one
 * job, taking the largest runs the graph allows: a unit joins the open job
 * only when none of its inputs depends on the job through a node outside
 * it (the job could not run as one piece then).  A plan may pin nodes to
 * devices (mi_place_pin); a pinned unit goes where its nodes are pinned or
 * planning fails with the reason.  A plan may also say which job a unit
 * is in (its own placement read back: the plan is a value): then units of
 * one job stay together and a new job starts where the plan's does, with
 * no time budget split (that depends on rates measured in this process).
 *
 * Jobs are also split by a time budget: the kernel fails a job that runs
 * past the device's job timeout (wall time), so a job's predicted time,
 * a roofline per unit (MACs at the slower of the caps' MACs/cycle x clock
 * and the measured wall rate, mi_dev_wall_rate; bytes moved at the DMA
 * bandwidth), stays within MI_PLACE_JOB_BUDGET_PCT of that timeout.  A
 * plan may set the budget itself (max_job_us); a single unit over the
 * budget still runs as a job of its own.
 *
 * Lowering goes through a table (struct mi_lowering); while the uapi
 * lowering is not built in, nothing is placed on accelerators and the
 * placement says so in one line.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "plan/place-impl.h"
#include "plan/plan-impl.h"

/* The uapi lowering (lib/device/lower.c); tests install their own. */
static const struct mi_lowering lowering_uapi = {
	mi_qunits_find, mi_qunit_supported, mi_lower_job, mi_lower_job_free,
	mi_lower_rebind
};
#define MI_LOWERING_BUILTIN (&lowering_uapi)
static const struct mi_lowering *lowering = MI_LOWERING_BUILTIN;

void mi_place_set_lowering(const struct mi_lowering *l)
{
	lowering = l ? l : MI_LOWERING_BUILTIN;
}

const struct mi_lowering *mi_place_lowering(void)
{
	return lowering;
}

int mi_place_init(struct mi_model *m, const char *devices)
{
	struct mi_place *pl = calloc(1, sizeof(*pl));
	int n;

	if (!pl)
		return mi_set_error(-ENOMEM, "out of memory");
	n = mi_dev_select(devices, pl->devs, MI_PLACE_MAX_DEVS);
	if (n < 0) {
		free(pl);
		return n; /* mi_dev_select said why */
	}
	pl->ndevs = n;
	m->place = pl;
	return 0;
}

static void free_jobs(struct mi_place *pl)
{
	for (int j = 0; j < pl->njobs; j++) {
		if (pl->jobs[j].lj && lowering)
			lowering->job_free(pl->jobs[j].lj);
		free(pl->jobs[j].units);
		free(pl->jobs[j].prod);
	}
	free(pl->jobs);
	pl->jobs = NULL;
	pl->njobs = 0;
	free(pl->units);
	pl->units = NULL;
	pl->nunits = 0;
	free(pl->unit_slot);
	pl->unit_slot = NULL;
}

void mi_place_fini(struct mi_model *m)
{
	struct mi_place *pl = m->place;

	if (!pl)
		return;
	mi_devexec_unbind(m);
	free_jobs(pl);
	free(pl->pin);
	free(pl->jpin);
	free(pl->node_job);
	free(pl->shared_node);
	free(pl->tfirst);
	free(pl);
	m->place = NULL;
}

int mi_place_slot(struct mi_model *m, const char *name, char *why,
		  size_t wlen)
{
	struct mi_place *pl = m->place;

	for (int s = 0; pl && s < pl->ndevs; s++)
		if (!strcmp(pl->devs[s]->name, name))
			return s;
	if (!mi_dev_find(name))
		snprintf(why, wlen, "unknown device '%s'", name);
	else
		snprintf(why, wlen,
			 "device '%s' is not one of the model's devices (--devices)",
			 name);
	return -1;
}

int mi_place_pin(struct mi_model *m, const int *pin, int n)
{
	struct mi_place *pl = m->place;
	int *p = NULL;

	if (!pl)
		return 0;
	if (pin) {
		p = malloc((n + 1) * sizeof(*p));
		if (!p)
			return -ENOMEM;
		memcpy(p, pin, n * sizeof(*p));
	}
	free(pl->pin);
	pl->pin = p;
	pl->npin = pin ? n : 0;
	if (!pin) {
		free(pl->jpin);
		pl->jpin = NULL;
	}
	return 0;
}

/* The device a plan pins unit u to (slot + 1), 0 when none: its anchor's,
 * else the first pinned member's. */
static int unit_pin(const struct mi_place *pl, const struct mi_qunit *u)
{
	if (u->anchor < pl->npin && pl->pin[u->anchor])
		return pl->pin[u->anchor];
	for (int k = 0; k < u->nmembers; k++)
		if (u->members[k] < pl->npin && pl->pin[u->members[k]])
			return pl->pin[u->members[k]];
	return 0;
}

/* The plan's job of unit u + 1, 0 when it names none (as unit_pin). */
static int unit_jpin(const struct mi_place *pl, const struct mi_qunit *u)
{
	if (!pl->jpin)
		return 0;
	if (u->anchor < pl->npin && pl->pin[u->anchor])
		return pl->jpin[u->anchor];
	for (int k = 0; k < u->nmembers; k++)
		if (u->members[k] < pl->npin && pl->pin[u->members[k]])
			return pl->jpin[u->members[k]];
	return 0;
}

static bool unit_has(const struct mi_qunit *u, int ni)
{
	for (int k = 0; k < u->nmembers; k++)
		if (u->members[k] == ni)
			return true;
	return false;
}

/*
 * Can u join job j (units so far) without a path j -> outside node -> u?
 * dep[t]: tensor t is written by j or depends on j through other nodes.
 */
static bool can_join(struct mi_graph *g, const struct mi_place_job *j,
		     const struct mi_qunit *u, unsigned char *dep,
		     unsigned char *inj)
{
	bool ok = true;

	memset(dep, 0, g->ntensors + 1);
	memset(inj, 0, g->nnodes + 1);
	for (int k = 0; k < j->nunits; k++)
		for (int i = 0; i < j->units[k]->nmembers; i++)
			inj[j->units[k]->members[i]] = 1;
	/* 1: written by the job, 2: reached through a node outside it */
	for (int p = 0; p < g->norder; p++) {
		int ni = g->order[p];
		struct mi_node *n = &g->nodes[ni];
		unsigned char d = inj[ni];

		if (unit_has(u, ni))
			continue;
		for (int i = 0; !d && i < n->ninputs; i++)
			if (n->inputs[i] >= 0 && dep[n->inputs[i]])
				d = 2;
		for (int i = 0; d && i < n->noutputs; i++)
			if (n->outputs[i] >= 0 && dep[n->outputs[i]] < d)
				dep[n->outputs[i]] = d;
	}
	for (int k = 0; ok && k < u->nmembers; k++) {
		struct mi_node *n = &g->nodes[u->members[k]];

		for (int i = 0; ok && i < n->ninputs; i++)
			ok = n->inputs[i] < 0 || dep[n->inputs[i]] != 2;
	}
	return ok;
}

/* Per unit: the last later unit with a member node in common (a
 * DequantizeLinear both read), or itself. */
static int *share_reach(const struct mi_place *pl)
{
	int *r = malloc((pl->nunits + 1) * sizeof(*r));

	for (int u = 0; r && u < pl->nunits; u++) {
		r[u] = u;
		for (int v = pl->nunits - 1; v > u && r[u] == u; v--)
			for (int i = 0; i < pl->units[u].nmembers; i++)
				if (unit_has(&pl->units[v], pl->units[u].members[i])) {
					r[u] = v;
					break;
				}
	}
	return r;
}

/* Tensors the job's units write (every member's outputs). */
static int job_products(struct mi_graph *g, struct mi_place_job *j)
{
	int cap = 0;

	for (int k = 0; k < j->nunits; k++)
		for (int i = 0; i < j->units[k]->nmembers; i++)
			cap += g->nodes[j->units[k]->members[i]].noutputs;
	j->prod = malloc((cap + 1) * sizeof(int));
	if (!j->prod)
		return -ENOMEM;
	j->nprod = 0;
	for (int k = 0; k < j->nunits; k++)
		for (int i = 0; i < j->units[k]->nmembers; i++) {
			struct mi_node *n = &g->nodes[j->units[k]->members[i]];

			for (int o = 0; o < n->noutputs; o++)
				if (n->outputs[o] >= 0)
					j->prod[j->nprod++] = n->outputs[o];
		}
	return 0;
}

void mi_place_set_max_job(struct mi_model *m, uint64_t ns)
{
	if (m->place)
		m->place->max_job_ns = ns;
}

uint64_t mi_place_max_job(const struct mi_model *m)
{
	return m->place ? m->place->max_job_ns : 0;
}

/* The job budget on device d in ns, 0 for none. */
static uint64_t job_budget(const struct mi_place *pl, const struct mi_dev *d)
{
	if (pl->max_job_ns)
		return pl->max_job_ns;
	return (uint64_t)d->caps.job_timeout_ms * 1000000ull *
	       MI_PLACE_JOB_BUDGET_PCT / 100;
}

static uint64_t tensor_bytes(const struct mi_tensor *x)
{
	int64_t n = mi_tensor_numel(x);

	return n > 0 ? (uint64_t)n * mi_dtype_size(x->dtype) : 0;
}

/*
 * Predicted wall time of unit u on d: the slower of its MACs at the
 * device's rate and its bytes (activations in and out, constants) at the
 * DMA bandwidth.  rate: MACs per second, 0 unknown.
 */
static uint64_t unit_ns(struct mi_graph *g, const struct mi_qunit *u,
			const struct mi_dev *d, uint64_t rate)
{
	uint64_t bytes = tensor_bytes(&g->tensors[u->output]), tm = 0, td = 0;

	for (int i = 0; i < u->ninputs; i++)
		bytes += tensor_bytes(&g->tensors[u->inputs[i]]);
	for (int k = 0; k < u->nmembers; k++) {
		const struct mi_node *n = &g->nodes[u->members[k]];

		for (int i = 0; i < n->ninputs; i++)
			if (n->inputs[i] >= 0 &&
			    (g->tensors[n->inputs[i]].flags & MI_TF_CONST))
				bytes += tensor_bytes(&g->tensors[n->inputs[i]]);
	}
	if (rate)
		tm = (uint64_t)((double)u->macs * 1e9 / (double)rate);
	if (d->caps.dma_bw)
		td = (uint64_t)((double)bytes * 1e9 / (double)d->caps.dma_bw);
	return tm > td ? tm : td;
}

/* MACs per second d is planned with for unit u: the slower of caps and
 * wall (grouped convs have their own wall rate). */
static uint64_t dev_rate(struct mi_graph *g, struct mi_dev *d,
			 const struct mi_qunit *u)
{
	const struct mi_node *a = &g->nodes[u->anchor];
	bool grouped = u->op == DRM_METAINFER_OP_CONV2D &&
		       mi_attr_int(a, "group", 1) > 1;
	uint64_t caps = d->caps.macs_per_cycle * d->caps.clock_khz * 1000ull;
	uint64_t wall = mi_dev_wall_rate(d, grouped);

	if (!caps || (wall && wall < caps))
		return wall;
	return caps;
}

static int add_job(struct mi_place *pl, int slot, int cap)
{
	struct mi_place_job *j = &pl->jobs[pl->njobs];

	memset(j, 0, sizeof(*j));
	j->slot = slot;
	j->units = calloc(cap + 1, sizeof(*j->units));
	if (!j->units)
		return -ENOMEM;
	pl->njobs++;
	return 0;
}

/* Choose a device per unit (pins first, then the default rule). */
static int choose(struct mi_model *m)
{
	struct mi_place *pl = m->place;
	struct mi_graph *g = &m->g;
	char why[200];

	for (int u = 0; u < pl->nunits; u++) {
		const struct mi_qunit *q = &pl->units[u];
		int pin = unit_pin(pl, q);

		pl->unit_slot[u] = 0;
		if (pin > 1) {
			struct mi_dev *d = pl->devs[pin - 1];

			bool ok = false;

			why[0] = 0;
			if (!mi_dev_up(d))
				snprintf(why, sizeof(why), "it is down");
			else
				ok = lowering->supported(g, q, &d->caps, why,
							 sizeof(why));
			if (!ok && !why[0])
				snprintf(why, sizeof(why), "it cannot run it");
			if (!ok)
				return mi_graph_err(g, &g->nodes[q->anchor],
					-EINVAL, "the plan puts it on %s, but %s",
					d->name, why);
			pl->unit_slot[u] = pin - 1;
			continue;
		}
		if (pin == 1)
			continue;
		for (int s = 1; s < pl->ndevs; s++) {
			struct mi_dev *d = pl->devs[s];

			if (mi_dev_up(d) &&
			    lowering->supported(g, q, &d->caps, why, sizeof(why))) {
				pl->unit_slot[u] = s;
				break;
			}
		}
	}
	return 0;
}

/* Group consecutive units per device into jobs and lower each. */
static int group(struct mi_model *m)
{
	struct mi_place *pl = m->place;
	struct mi_graph *g = &m->g;
	unsigned char *dep = malloc(g->ntensors + 1);
	unsigned char *inj = malloc(g->nnodes + 1);
	struct mi_place_job *open = NULL;
	uint64_t budget[MI_PLACE_MAX_DEVS];
	int *reachv = share_reach(pl), reach = -1, open_jpin = 0;
	int err = 0;

	pl->jobs = calloc(pl->nunits + 1, sizeof(*pl->jobs));
	if (!dep || !inj || !pl->jobs || !reachv) {
		err = -ENOMEM;
		goto out;
	}
	for (int s = 0; s < pl->ndevs; s++)
		budget[s] = s ? job_budget(pl, pl->devs[s]) : 0;
	for (int u = 0; u < pl->nunits && !err; u++) {
		int s = pl->unit_slot[u], jp = unit_jpin(pl, &pl->units[u]);
		uint64_t t;
		bool split;

		if (!s) {
			open = NULL;
			reach = -1;
			continue;
		}
		t = budget[s] ? unit_ns(g, &pl->units[u], pl->devs[s],
					dev_rate(g, pl->devs[s], &pl->units[u])) : 0;
		/* a budget split never separates units that share a node (a
		 * DequantizeLinear read by both): neither job could stand
		 * for it alone; the plan's jobs replace the budget */
		if (jp)
			split = open && jp != open_jpin;
		else
			split = open && budget[s] &&
				open->pred_ns + t > budget[s] && reach < u;
		if (!open || open->slot != s || split ||
		    !can_join(g, open, &pl->units[u], dep, inj)) {
			err = add_job(pl, s, pl->nunits - u);
			open = &pl->jobs[pl->njobs - 1];
			reach = -1;
		}
		open_jpin = jp;
		if (!err) {
			open->units[open->nunits++] = &pl->units[u];
			open->pred_ns += t;
			if (reachv[u] > reach)
				reach = reachv[u];
		}
	}
	for (int k = 0; k < pl->njobs && !err; k++) {
		struct mi_place_job *j = &pl->jobs[k];

		err = job_products(g, j);
		if (err)
			break;
		if (lowering->job(g, j->units, j->nunits,
				  &pl->devs[j->slot]->caps, &j->lj)) {
			/* not lowerable after all: its units stay on the CPU */
			j->lj = NULL;
			snprintf(pl->note, sizeof(pl->note),
				 "job %d on %s not lowered: %s", k,
				 pl->devs[j->slot]->name, mi_last_error());
			mi_clear_error();
		}
	}
out:
	free(reachv);
	free(dep);
	free(inj);
	return err;
}

int mi_place_prepare(struct mi_model *m)
{
	struct mi_place *pl = m->place;
	struct mi_graph *g = &m->g;
	int err;

	if (!pl)
		return 0;
	mi_devexec_unbind(m);
	free_jobs(pl);
	pl->note[0] = 0;
	if (pl->ndevs < 2)
		return 0;
	if (!lowering) {
		snprintf(pl->note, sizeof(pl->note),
			 "no lowering to the command stream in this build: every node runs on the CPU");
		return 0;
	}
	err = lowering->find(g, &pl->units, &pl->nunits);
	if (err) {
		snprintf(pl->note, sizeof(pl->note),
			 "no quantized units found: %s", mi_last_error());
		mi_clear_error();
		pl->units = NULL;
		pl->nunits = 0;
		return 0;
	}
	pl->unit_slot = calloc(pl->nunits + 1, sizeof(int));
	if (!pl->unit_slot)
		return -ENOMEM;
	err = choose(m);
	if (!err)
		err = group(m);
	return err;
}

int mi_place_node_job(const struct mi_model *m, int ni)
{
	const struct mi_place *pl = m->place;

	return mi_devexec_skips(pl, ni) ? pl->node_job[ni] : -1;
}

const char *mi_place_node_device(const struct mi_model *m, int ni)
{
	int j = mi_place_node_job(m, ni);

	return j < 0 ? "cpu" : m->place->devs[m->place->jobs[j].slot]->name;
}

static const char *node_label(const struct mi_graph *g, int ni)
{
	return g->nodes[ni].name && g->nodes[ni].name[0] ? g->nodes[ni].name :
							     g->nodes[ni].op_type;
}

/* The live node that writes tensor t now, -1 for none (input, constant). */
static int live_producer(const struct mi_graph *g, int t)
{
	for (int p = 0; p < g->norder; p++) {
		const struct mi_node *n = &g->nodes[g->order[p]];

		for (int o = 0; o < n->noutputs; o++)
			if (n->outputs[o] == t)
				return g->order[p];
	}
	return -1;
}

void mi_place_print(struct mi_model *m, FILE *f)
{
	struct mi_place *pl = m->place;
	struct mi_graph *g = &m->g;
	uint64_t tbytes = 0;
	int ntr = 0;

	if (!pl)
		return;
	fprintf(f, "devices:");
	for (int s = 0; s < pl->ndevs; s++)
		fprintf(f, " %s%s", pl->devs[s]->name,
			mi_dev_up(pl->devs[s]) ? "" : " (down)");
	fprintf(f, "\n");
	if (pl->note[0])
		fprintf(f, "note: %s\n", pl->note);
	fprintf(f, "nodes:\n");
	for (int p = 0; p < g->norder; p++) {
		int ni = g->order[p], j = mi_place_node_job(m, ni);

		fprintf(f, "  %-32s %-20s %-8s", node_label(g, ni),
			g->nodes[ni].op_type, mi_place_node_device(m, ni));
		if (j >= 0)
			fprintf(f, " job %d", j);
		fprintf(f, "\n");
	}
	fprintf(f, "jobs: %d\n", pl->nbound);
	for (int k = 0; k < pl->njobs; k++) {
		struct mi_place_job *j = &pl->jobs[k];

		if (!j->bound)
			continue;
		fprintf(f, "  job %d on %s: %d units, %d ops, %llu MACs", k,
			pl->devs[j->slot]->name, j->nunits, j->lj->nops,
			(unsigned long long)j->lj->macs);
		if (j->pred_ns)
			fprintf(f, ", predicted %.3f ms of %.3f ms",
				j->pred_ns / 1e6,
				job_budget(pl, pl->devs[j->slot]) / 1e6);
		fprintf(f, "\n");
	}
	fprintf(f, "transfers:\n");
	for (int k = 0; k < pl->njobs; k++) {
		struct mi_place_job *j = &pl->jobs[k];

		if (!j->bound)
			continue;
		for (int i = 0; i < j->lj->nt; i++) {
			const struct mi_lower_tensor *t = &j->lj->t[i];
			int pr;

			if (t->role != MI_LT_INPUT && t->role != MI_LT_OUTPUT)
				continue;
			if (t->role == MI_LT_INPUT) {
				bool inplace = j->in_src && j->in_src[i] >= 0;

				pr = live_producer(g, t->graph_tensor);
				fprintf(f, "  %-32s %s -> %s, %zu bytes%s\n",
					g->tensors[t->graph_tensor].name,
					pr < 0 ? "cpu" : mi_place_node_device(m, pr),
					pl->devs[j->slot]->name, t->bytes,
					inplace ? " (in place, fenced)" : "");
			} else if (j->out_cpu && !j->out_cpu[i]) {
				continue; /* read in place by jobs only */
			} else {
				fprintf(f, "  %-32s %s -> cpu, %zu bytes\n",
					g->tensors[t->graph_tensor].name,
					pl->devs[j->slot]->name, t->bytes);
			}
			ntr++;
			tbytes += t->bytes;
		}
	}
	fprintf(f, "  %d transfers, %llu bytes\n", ntr,
		(unsigned long long)tbytes);
}

int mi_model_placement_write(struct mi_model *m, FILE *f)
{
	int err;

	if (!m || !f)
		return mi_set_error(-EINVAL, "mi_model_placement_write: bad arguments");
	if (!m->place) {
		fprintf(f, "devices: cpu\n");
		return 0;
	}
	err = mi_plan_settle(m);
	if (err)
		return err;
	mi_place_print(m, f);
	return ferror(f) ? -EIO : 0;
}
