// SPDX-License-Identifier: GPL-2.0-only
/*
 * Random legal plans against the reference executor.
 *
 * For every model given: run it once with the reference kernels
 * (MI_MODEL_REFERENCE) on seeded random inputs; read the default plan and
 * every node's candidates (mi_plan_candidates); then draw plans: each
 * draw changes 1..4 random nodes (every node with probability 1/2 in
 * graphs of up to 8 nodes) to a random candidate, the nodes a changed
 * node no longer fuses running on their reference op, the other nodes
 * keeping their kernels and fusions with their layouts left to the
 * negotiation ("auto").  Each draw is
 * applied (a rejected one is redrawn and counted), run, and its outputs
 * compared with the reference outputs: max|y - ref| / max|ref| within the
 * plan's tolerance, the largest of its variants' (Winograd 1e-3, int8
 * 5e-2, every other fp32 variant 3e-4).  The default plan is checked the
 * same way first.
 *
 *   test-plan-random [-n DRAWS] [-s SEED] [-t THREADS] [-v] MODEL.onnx...
 *
 * Exit status 1 when any plan's outputs are off, or any model has fewer
 * than DRAWS accepted plans after 20 x DRAWS tries.
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "metainfer/metainfer.h"

struct cand {
	char *variant;
	int nfused;
	char **fused;
};

struct node {
	char *name;
	char *default_variant;
	int ndefault_fused;
	char **default_fused;
	int ncands;
	struct cand *cands;
};

static unsigned long long rng_state;

static unsigned int rnd(void)
{
	rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
	return (unsigned int)(rng_state >> 33);
}

static char **strv_dup(const char *const *v, int n)
{
	char **d = calloc(n + 1, sizeof(*d));

	for (int i = 0; d && i < n; i++)
		d[i] = strdup(v[i]);
	return d;
}

static void strv_free(char **v, int n)
{
	for (int i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}

struct io {
	int n;
	struct mi_value *v;
};

static void io_free(struct io *io)
{
	for (int i = 0; i < io->n; i++)
		free(io->v[i].data);
	free(io->v);
	memset(io, 0, sizeof(*io));
}

/* Seeded inputs of the declared shapes (symbolic dims = 1). */
static int make_inputs(struct mi_model *m, struct io *in)
{
	in->n = mi_model_input_count(m);
	in->v = calloc(in->n + 1, sizeof(*in->v));
	if (!in->v)
		return -ENOMEM;
	for (int i = 0; i < in->n; i++) {
		struct mi_tensor_info ti;
		struct mi_value *v = &in->v[i];
		uint64_t numel = 1;

		mi_model_input_info(m, i, &ti);
		if (ti.ndim < 0)
			return -EOPNOTSUPP;
		v->name = ti.name;
		v->dtype = ti.dtype;
		v->ndim = ti.ndim;
		for (int d = 0; d < ti.ndim; d++) {
			v->dims[d] = ti.dims[d] < 0 ? 1 : ti.dims[d];
			numel *= v->dims[d];
		}
		v->nbytes = numel * mi_dtype_size(ti.dtype);
		v->data = calloc(1, v->nbytes + 1);
		if (!v->data)
			return -ENOMEM;
		if (ti.dtype == MI_DT_FLOAT)
			for (uint64_t k = 0; k < numel; k++)
				((float *)v->data)[k] =
					(float)(rnd() % 20001) / 10000.0f - 1.0f;
		else if (ti.dtype != MI_DT_INT64 && ti.dtype != MI_DT_INT32 &&
			 ti.dtype != MI_DT_BOOL)
			return -EOPNOTSUPP;
	}
	return 0;
}

/* Run and keep copies of the outputs. */
static int run_copy(struct mi_model *m, const struct io *in, struct io *out)
{
	int n = mi_model_output_count(m), err;
	struct mi_value *o = calloc(n + 1, sizeof(*o));

	if (!o)
		return -ENOMEM;
	err = mi_model_run(m, in->v, in->n, o, n);
	if (err) {
		free(o);
		return err;
	}
	out->n = n;
	out->v = o;
	for (int i = 0; i < n; i++) {
		void *d = malloc(o[i].nbytes + 1);

		if (!d)
			return -ENOMEM;
		memcpy(d, o[i].data, o[i].nbytes);
		o[i].data = d;
	}
	return 0;
}

/* Largest normalized error over the float outputs; exact elsewhere. */
static double out_err(const struct io *ref, const struct io *got)
{
	double worst = 0;

	for (int i = 0; i < ref->n; i++) {
		const struct mi_value *r = &ref->v[i], *g = &got->v[i];
		double mx = 0, md = 0;
		uint64_t n;

		if (r->nbytes != g->nbytes || r->dtype != g->dtype)
			return INFINITY;
		if (r->dtype != MI_DT_FLOAT) {
			if (memcmp(r->data, g->data, r->nbytes))
				return INFINITY;
			continue;
		}
		n = r->nbytes / sizeof(float);
		for (uint64_t k = 0; k < n; k++) {
			double a = ((const float *)r->data)[k];
			double b = ((const float *)g->data)[k];

			if (isnan(a) != isnan(b))
				return INFINITY;
			if (isnan(a))
				continue;
			mx = fmax(mx, fabs(a));
			md = fmax(md, fabs(a - b));
		}
		worst = fmax(worst, md / fmax(mx, 1e-12));
	}
	return worst;
}

/* The plan's tolerance: the loosest of the variants it runs. */
static double plan_tol(const struct mi_plan *p)
{
	struct mi_plan_info pi;
	double tol = 3e-4;

	mi_plan_info(p, &pi);
	for (int i = 0; i < pi.nodes; i++) {
		struct mi_plan_node nd;

		mi_plan_node(p, i, &nd);
		if (!strcmp(nd.precision, "int8") || strstr(nd.variant, "int8"))
			tol = fmax(tol, 5e-2);
		else if (strstr(nd.variant, "winograd") ||
			 strstr(nd.variant, "conv.nchwc"))
			/* the blocked pass runs some 3x3 convs on Winograd */
			tol = fmax(tol, 1e-3);
	}
	return tol;
}

static int load_nodes(struct mi_model *m, const struct mi_plan *p,
		      struct node **nodesp, int *np)
{
	struct mi_plan_info pi;
	struct node *nodes;

	mi_plan_info(p, &pi);
	nodes = calloc(pi.nodes + 1, sizeof(*nodes));
	if (!nodes)
		return -ENOMEM;
	for (int i = 0; i < pi.nodes; i++) {
		const struct mi_plan_candidate *c;
		struct mi_plan_node nd;
		int nc;

		mi_plan_node(p, i, &nd);
		nodes[i].name = strdup(nd.name);
		nodes[i].default_variant = strdup(nd.variant);
		nodes[i].ndefault_fused = nd.nfused;
		nodes[i].default_fused = strv_dup(nd.fused, nd.nfused);
		nc = mi_plan_candidates(m, nd.name, &c);
		if (nc < 1) {
			fprintf(stderr, "FAIL %s: no candidates (%s)\n", nd.name,
				mi_last_error());
			*nodesp = nodes;
			*np = i + 1;
			return -EINVAL;
		}
		nodes[i].cands = calloc(nc, sizeof(struct cand));
		nodes[i].ncands = nc;
		for (int k = 0; k < nc; k++) {
			nodes[i].cands[k].variant = strdup(c[k].variant);
			nodes[i].cands[k].nfused = c[k].nfused;
			nodes[i].cands[k].fused = strv_dup(c[k].fused,
							   c[k].nfused);
		}
	}
	*nodesp = nodes;
	*np = pi.nodes;
	return 0;
}

static void nodes_free(struct node *nodes, int n)
{
	for (int i = 0; i < n; i++) {
		free(nodes[i].name);
		free(nodes[i].default_variant);
		strv_free(nodes[i].default_fused, nodes[i].ndefault_fused);
		for (int k = 0; k < nodes[i].ncands; k++) {
			free(nodes[i].cands[k].variant);
			strv_free(nodes[i].cands[k].fused,
				  nodes[i].cands[k].nfused);
		}
		free(nodes[i].cands);
	}
	free(nodes);
}

static bool has(char *const *v, int n, const char *s)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(v[i], s))
			return true;
	return false;
}

/* Entries that run on one thread. */
static int nserial(const struct mi_plan *p)
{
	struct mi_plan_info info;
	struct mi_plan_node nd;
	int k = 0;

	if (mi_plan_info(p, &info))
		return -1;
	for (int i = 0; i < info.nodes; i++)
		if (!mi_plan_node(p, i, &nd) && nd.threads == 1)
			k++;
	return k;
}

/* One random plan derived from the default p0; with threads > 1 a
 * quarter of the nodes also run on one thread. */
static int draw(const struct mi_plan *p0, const struct node *nodes, int n,
		int threads, struct mi_plan **out, int *changed)
{
	struct mi_plan *p;
	int k = 0, err;
	char *pick;

	err = mi_plan_dup(p0, &p);
	if (err)
		return err;
	pick = calloc(n + 1, 1);
	if (!pick) {
		mi_plan_free(p);
		return -ENOMEM;
	}
	if (n <= 8) {
		for (int i = 0; i < n; i++)
			pick[i] = rnd() % 2;
	} else {
		int want = 1 + (int)(rnd() % 4);

		for (int i = 0; i < want; i++)
			pick[rnd() % n] = 1;
	}
	/* the others keep their kernels; their layouts follow the changed
	 * nodes (a conv moved out of a blocked chain changes its
	 * neighbours' layouts, which a plan naming them would refuse) */
	for (int i = 0; !err && i < n; i++)
		if (!pick[i] && nodes[i].default_variant)
			err = mi_plan_set(p, nodes[i].name,
					  nodes[i].default_variant,
					  (const char *const *)nodes[i].default_fused,
					  nodes[i].ndefault_fused);
	for (int i = 0; !err && i < n; i++) {
		const struct node *nd = &nodes[i];
		const struct cand *c;

		if (!pick[i])
			continue;
		c = &nd->cands[rnd() % nd->ncands];
		k++;
		err = mi_plan_set(p, nd->name, c->variant,
				  (const char *const *)c->fused, c->nfused);
		/* what it no longer fuses runs on its own, by reference */
		for (int f = 0; !err && f < nd->ndefault_fused; f++)
			if (!has(c->fused, c->nfused, nd->default_fused[f]))
				err = mi_plan_set(p, nd->default_fused[f], "ref",
						  NULL, 0);
	}
	for (int i = 0; !err && threads > 1 && i < n; i++)
		if (rnd() % 4 == 0) {
			err = mi_plan_set_threads(p, nodes[i].name, 1);
			if (err == -ENOENT)	/* fused into another: no entry */
				err = 0;
		}
	free(pick);
	if (err) {
		mi_plan_free(p);
		return err;
	}
	*out = p;
	*changed = k;
	return 0;
}

static int test_model(const char *path, int draws, int threads, int verbose,
		      int *nacc, int *ndrawn)
{
	struct mi_model_opts ro = { .flags = MI_MODEL_REFERENCE,
				    .nthreads = threads };
	struct mi_model_opts fo = { .nthreads = threads };
	struct mi_model *rm = NULL, *m = NULL;
	struct io in = { 0 }, ref = { 0 }, got = { 0 };
	struct mi_plan *p0 = NULL;
	struct node *nodes = NULL;
	int nn = 0, accepted = 0, drawn = 0, rejected = 0, serial = 0, ret = 1;
	double worst = 0, e;
	const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	char label[256];

	/* conformance networks are all model.onnx: name them by their dir */
	if (!strcmp(base, "model.onnx") && base > path) {
		const char *d = base - 1;

		while (d > path && d[-1] != '/')
			d--;
		snprintf(label, sizeof(label), "%.*s", (int)(base - 1 - d), d);
	} else {
		snprintf(label, sizeof(label), "%s", base);
	}
	if (mi_model_load(path, &ro, &rm) || mi_model_load(path, &fo, &m)) {
		printf("skip %s: %s\n", label, mi_last_error());
		ret = 2;
		goto out;
	}
	if (make_inputs(rm, &in)) {
		printf("skip %s: inputs of unknown rank or type\n", label);
		ret = 2;
		goto out;
	}
	if (run_copy(rm, &in, &ref)) {
		printf("skip %s: the reference run fails: %s\n", label,
		       mi_last_error());
		ret = 2;
		goto out;
	}
	if (mi_model_plan_get(m, &p0) || load_nodes(m, p0, &nodes, &nn)) {
		printf("FAIL %s: %s\n", label, mi_last_error());
		goto out;
	}
	if (run_copy(m, &in, &got)) {
		printf("FAIL %s: default plan: %s\n", label, mi_last_error());
		goto out;
	}
	e = out_err(&ref, &got);
	io_free(&got);
	if (!(e <= plan_tol(p0))) {
		printf("FAIL %s: default plan: error %.3g > %.3g\n", label, e,
		       plan_tol(p0));
		goto out;
	}
	worst = e;
	while (accepted < draws && drawn < 20 * draws) {
		struct mi_plan *p;
		int changed, err;

		drawn++;
		if (draw(p0, nodes, nn, threads, &p, &changed)) {
			printf("FAIL %s: out of memory\n", label);
			goto out;
		}
		err = mi_model_plan_apply(m, p);
		if (err) {
			rejected++;
			if (verbose)
				printf("     %s: rejected: %s\n", label,
				       mi_last_error());
			mi_plan_free(p);
			continue;
		}
		if (threads > 1) {
			struct mi_plan *rb = NULL;
			int want = nserial(p), have = -1;

			if (!mi_model_plan_get(m, &rb))
				have = nserial(rb);
			mi_plan_free(rb);
			if (have != want) {
				printf("FAIL %s: plan %d: %d nodes on one thread, %d read back\n",
				       label, drawn, want, have);
				mi_plan_free(p);
				goto out;
			}
			serial += want;
		}
		err = run_copy(m, &in, &got);
		e = err ? INFINITY : out_err(&ref, &got);
		io_free(&got);
		if (!(e <= plan_tol(p))) {
			printf("FAIL %s: plan %d (%d nodes changed): %s\n", label,
			       drawn, changed,
			       err ? mi_last_error() : "outputs off");
			printf("     error %.3g > tolerance %.3g; the plan:\n", e,
			       plan_tol(p));
			mi_plan_write(p, stdout);
			mi_plan_free(p);
			goto out;
		}
		worst = fmax(worst, e);
		accepted++;
		mi_plan_free(p);
	}
	printf("%s %s: %d random plans ok of %d drawn (%d rejected, %.0f%%), %d nodes (%d on one thread), max error %.2g\n",
	       accepted >= draws ? "ok  " : "FAIL", label, accepted, drawn,
	       rejected, drawn ? 100.0 * rejected / drawn : 0.0, nn, serial,
	       worst);
	*nacc += accepted;
	*ndrawn += drawn;
	ret = accepted >= draws ? 0 : 1;
out:
	nodes_free(nodes, nn);
	mi_plan_free(p0);
	io_free(&in);
	io_free(&ref);
	mi_model_free(rm);
	mi_model_free(m);
	return ret;
}

int main(int argc, char **argv)
{
	int draws = 20, threads = 2, verbose = 0, c, fails = 0, ok = 0, skip = 0;
	int nacc = 0, ndrawn = 0;
	unsigned long long seed = 1;

	while ((c = getopt(argc, argv, "n:s:t:v")) != -1) {
		switch (c) {
		case 'n':
			draws = atoi(optarg);
			break;
		case 's':
			seed = strtoull(optarg, NULL, 0);
			break;
		case 't':
			threads = atoi(optarg);
			break;
		case 'v':
			verbose = 1;
			break;
		default:
			fprintf(stderr, "usage: %s [-n DRAWS] [-s SEED] [-t THREADS] [-v] MODEL.onnx...\n",
				argv[0]);
			return 2;
		}
	}
	if (optind >= argc || draws < 1) {
		fprintf(stderr, "usage: %s [-n DRAWS] [-s SEED] [-t THREADS] [-v] MODEL.onnx...\n",
			argv[0]);
		return 2;
	}
	for (int i = optind; i < argc; i++) {
		int r;

		rng_state = seed * 0x9e3779b97f4a7c15ull + (unsigned int)i;
		r = test_model(argv[i], draws, threads, verbose, &nacc, &ndrawn);
		fails += r == 1;
		ok += r == 0;
		skip += r == 2;
		fflush(stdout);
	}
	printf("%s: %d models ok, %d failed, %d skipped; %d plans accepted of %d drawn (rejection rate %.0f%%)\n",
	       fails ? "FAIL" : "ok  ", ok, fails, skip, nacc, ndrawn,
	       ndrawn ? 100.0 * (ndrawn - nacc) / ndrawn : 0.0);
	return fails ? 1 : 0;
}
