// SPDX-License-Identifier: MIT
/*
 * The node-time predictor: roofline x exp(trees + per-device bias).
 *
 * Tree features (per sample, NF_BASE + nemb floats):
 *   class, variant, int8, threads, nfused, kh, stride, log2 groups,
 *   log10 of macs, in/w/out bytes, cin, cout, output spatial size,
 *   log10 of the roofline's compute, memory and launch terms and of
 *   compute/memory, then the device embedding.
 * The target is ln(measured / roofline), so the trees learn a correction
 * factor; a device nobody fitted on is placed by its embedding.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "predict/predict.h"

#define NF_BASE 19
#define SHRINK	2.0	/* prior weight of the device-wide mean */

const char *const mi_pred_class_names[MI_PC_COUNT] = {
	[MI_PC_CONV] = "conv",	   [MI_PC_CONV1X1] = "conv1x1",
	[MI_PC_DWCONV] = "dwconv", [MI_PC_GEMM] = "gemm",
	[MI_PC_POOL] = "pool",	   [MI_PC_ELTWISE] = "eltwise",
	[MI_PC_NORM] = "norm",	   [MI_PC_DATA] = "data",
};

_Static_assert(sizeof(mi_pred_class_names) / sizeof(mi_pred_class_names[0]) ==
		       MI_PC_COUNT,
	       "every op class needs a name");

void mi_pred_init(struct mi_predictor *p)
{
	memset(p, 0, sizeof(*p));
}

void mi_pred_fini(struct mi_predictor *p)
{
	mi_gbrt_fini(&p->trees);
	for (int i = 0; i < p->nvariants; i++)
		free(p->variants[i]);
	free(p->devs);
	memset(p, 0, sizeof(*p));
}

int mi_pred_variant(struct mi_predictor *p, const char *name, bool add)
{
	if (!name)
		return -1;
	for (int i = 0; i < p->nvariants; i++)
		if (!strcmp(p->variants[i], name))
			return i;
	if (!add || p->nvariants >= MI_PRED_MAXVAR)
		return -1;
	p->variants[p->nvariants] = strdup(name);
	return p->variants[p->nvariants] ? p->nvariants++ : -1;
}

static double compute_ns(const struct mi_pred_node *n,
			 const struct mi_pred_caps *c)
{
	return n->macs / (c->macs_per_s > 0 ? c->macs_per_s : 1e9) * 1e9;
}

static double mem_ns(const struct mi_pred_node *n, const struct mi_pred_caps *c)
{
	return (n->in_bytes + n->w_bytes + n->out_bytes) /
	       (c->bytes_per_s > 0 ? c->bytes_per_s : 1e9) * 1e9;
}

double mi_pred_roofline(const struct mi_pred_node *n,
			const struct mi_pred_caps *c)
{
	return c->launch_ns + fmax(compute_ns(n, c), mem_ns(n, c)) + 1.0;
}

bool mi_pred_dma_bound(const struct mi_pred_node *n,
		       const struct mi_pred_caps *c)
{
	return mem_ns(n, c) > compute_ns(n, c);
}

static float lg(double v)
{
	return (float)log10(v > 1e-3 ? v : 1e-3);
}

static void features(const struct mi_pred_node *n, const float *emb, int nemb,
		     const struct mi_pred_caps *c, int want_nemb, float *x)
{
	double cn = compute_ns(n, c), mn = mem_ns(n, c);

	x[0] = (float)n->cls;
	x[1] = (float)n->variant;
	x[2] = (float)n->int8;
	x[3] = (float)n->threads;
	x[4] = (float)n->nfused;
	x[5] = (float)n->kh;
	x[6] = (float)n->stride;
	x[7] = (float)log2(n->groups > 1 ? n->groups : 1);
	x[8] = lg(n->macs);
	x[9] = lg(n->in_bytes);
	x[10] = lg(n->w_bytes);
	x[11] = lg(n->out_bytes);
	x[12] = lg(n->cin);
	x[13] = lg(n->cout);
	x[14] = lg(n->out_hw);
	x[15] = lg(cn);
	x[16] = lg(mn);
	x[17] = lg(c->launch_ns);
	x[18] = lg(cn) - lg(mn);
	for (int i = 0; i < want_nemb; i++)
		x[NF_BASE + i] = i < nemb && emb ? emb[i] : 0.0f;
}

int mi_pred_fit(struct mi_predictor *p, const struct mi_pred_sample *s, int n,
		const struct mi_gbrt_params *gp)
{
	int nemb = n > 0 ? s[0].nemb : 0, nf = NF_BASE + nemb, err;
	float *x, *y;

	if (n <= 0 || nemb < 0 || nemb > MI_PRED_MAXEMB)
		return -EINVAL;
	x = malloc((size_t)n * nf * sizeof(float));
	y = malloc(n * sizeof(float));
	if (!x || !y) {
		free(x);
		free(y);
		return -ENOMEM;
	}
	for (int i = 0; i < n; i++) {
		features(&s[i].node, s[i].emb, s[i].nemb, &s[i].caps, nemb,
			 x + (size_t)i * nf);
		y[i] = (float)log(fmax(s[i].ns, 1.0) /
				  mi_pred_roofline(&s[i].node, &s[i].caps));
	}
	mi_gbrt_fini(&p->trees);
	err = mi_gbrt_fit(&p->trees, x, y, n, nf, gp);
	free(x);
	free(y);
	if (err)
		return err;
	p->nemb = nemb;
	p->fitted = true;
	return 0;
}

double mi_pred_node_ns_raw(const struct mi_predictor *p,
			   const struct mi_pred_node *n, const float *emb,
			   int nemb, const struct mi_pred_caps *c)
{
	float x[NF_BASE + MI_PRED_MAXEMB];
	double roof = mi_pred_roofline(n, c);

	if (!p || !p->fitted)
		return roof;
	features(n, emb, nemb, c, p->nemb, x);
	return roof * exp(mi_gbrt_eval(&p->trees, x));
}

static double dev_bias(const struct mi_pred_dev *d, int cls)
{
	double s = 0, k = 0, g;

	for (int c = 0; c < MI_PC_COUNT; c++) {
		s += d->bias_sum[c];
		k += d->bias_n[c];
	}
	g = s / (k + SHRINK);
	if (cls < 0 || cls >= MI_PC_COUNT)
		return g;
	return (d->bias_sum[cls] + SHRINK * g) / (d->bias_n[cls] + SHRINK);
}

double mi_pred_dev_bias(const struct mi_pred_dev *d, int cls)
{
	return dev_bias(d, cls);
}

double mi_pred_node_ns(const struct mi_predictor *p,
		       const struct mi_pred_node *n,
		       const struct mi_pred_dev *dev)
{
	double t = mi_pred_node_ns_raw(p, n, dev->emb, dev->nemb, &dev->caps);

	return t * exp(dev_bias(dev, n->cls));
}

void mi_pred_embed(struct mi_pred_dev *dev, const struct mi_pred_node *nodes,
		   const double *ns, int n)
{
	double sum[MI_PC_COUNT] = { 0 }, cnt[MI_PC_COUNT] = { 0 }, all = 0;
	double mean;

	if (n > MI_PRED_REF_MAX)
		n = MI_PRED_REF_MAX;
	for (int i = 0; i < n; i++) {
		double r = log(fmax(ns[i], 1.0) /
			       mi_pred_roofline(&nodes[i], &dev->caps));

		sum[nodes[i].cls] += r;
		cnt[nodes[i].cls] += 1;
		all += r;
	}
	mean = n ? all / n : 0;
	for (int c = 0; c < MI_PC_COUNT; c++)
		dev->emb[c] = (float)((sum[c] + SHRINK * mean) /
				      (cnt[c] + SHRINK));
	dev->emb[MI_PC_COUNT] = (float)mean;
	dev->nemb = MI_PRED_CALIB_NEMB;
}

void mi_pred_refine(const struct mi_predictor *p, struct mi_pred_dev *dev,
		    const struct mi_pred_node *n, double ns)
{
	double t = mi_pred_node_ns_raw(p, n, dev->emb, dev->nemb, &dev->caps);

	if (n->cls < 0 || n->cls >= MI_PC_COUNT || ns <= 0)
		return;
	dev->bias_sum[n->cls] += log(ns / t);
	dev->bias_n[n->cls] += 1;
}

struct mi_pred_dev *mi_pred_dev_find(struct mi_predictor *p, const char *name,
				     bool add)
{
	struct mi_pred_dev *d;

	for (int i = 0; i < p->ndevs; i++)
		if (!strcmp(p->devs[i].name, name))
			return &p->devs[i];
	if (!add)
		return NULL;
	d = realloc(p->devs, (p->ndevs + 1) * sizeof(*d));
	if (!d)
		return NULL;
	p->devs = d;
	d = &p->devs[p->ndevs++];
	memset(d, 0, sizeof(*d));
	snprintf(d->name, sizeof(d->name), "%s", name);
	return d;
}

/*
 * File form (text, "%a" floats so it round-trips exactly):
 *   metainfer-predictor 1
 *   nemb N fitted F
 *   variants N / one name per line
 *   devices N / per device: name, caps, nemb + emb, biases
 *   gbrt ... (gbrt.c)
 */
int mi_pred_save(const struct mi_predictor *p, const char *path)
{
	FILE *f = fopen(path, "w");
	int err = 0;

	if (!f)
		return -errno;
	fprintf(f, "metainfer-predictor 1\nnemb %d fitted %d\nvariants %d\n",
		p->nemb, p->fitted, p->nvariants);
	for (int i = 0; i < p->nvariants; i++)
		fprintf(f, "%s\n", p->variants[i]);
	fprintf(f, "devices %d\n", p->ndevs);
	for (int i = 0; i < p->ndevs; i++) {
		const struct mi_pred_dev *d = &p->devs[i];

		fprintf(f, "%s %a %a %a %a %d", d->name, d->caps.macs_per_s,
			d->caps.bytes_per_s, d->caps.launch_ns,
			d->caps.link_bytes_per_s, d->nemb);
		for (int k = 0; k < d->nemb; k++)
			fprintf(f, " %a", d->emb[k]);
		for (int c = 0; c < MI_PC_COUNT; c++)
			fprintf(f, " %a %a", d->bias_sum[c], d->bias_n[c]);
		fputc('\n', f);
	}
	if (p->fitted)
		err = mi_gbrt_write(&p->trees, f);
	if (fclose(f) && !err)
		err = -EIO;
	return err;
}

int mi_pred_load(struct mi_predictor *p, const char *path)
{
	FILE *f = fopen(path, "r");
	int ver, fitted, nv, nd, err = -EINVAL;
	char buf[256];

	mi_pred_init(p);
	if (!f)
		return -errno;
	if (fscanf(f, "metainfer-predictor %d nemb %d fitted %d variants %d",
		   &ver, &p->nemb, &fitted, &nv) != 4 || ver != 1 ||
	    p->nemb < 0 || p->nemb > MI_PRED_MAXEMB || nv < 0 ||
	    nv > MI_PRED_MAXVAR)
		goto out;
	for (int i = 0; i < nv; i++) {
		if (fscanf(f, "%255s", buf) != 1 ||
		    mi_pred_variant(p, buf, true) != i)
			goto out;
	}
	if (fscanf(f, " devices %d", &nd) != 1 || nd < 0 || nd > 4096)
		goto out;
	for (int i = 0; i < nd; i++) {
		struct mi_pred_dev *d;

		if (fscanf(f, "%47s", buf) != 1)
			goto out;
		d = mi_pred_dev_find(p, buf, true);
		if (!d) {
			err = -ENOMEM;
			goto out;
		}
		if (fscanf(f, "%la %la %la %la %d", &d->caps.macs_per_s,
			   &d->caps.bytes_per_s, &d->caps.launch_ns,
			   &d->caps.link_bytes_per_s, &d->nemb) != 5 ||
		    d->nemb < 0 || d->nemb > MI_PRED_MAXEMB)
			goto out;
		for (int k = 0; k < d->nemb; k++)
			if (fscanf(f, "%a", &d->emb[k]) != 1)
				goto out;
		for (int c = 0; c < MI_PC_COUNT; c++)
			if (fscanf(f, "%la %la", &d->bias_sum[c],
				   &d->bias_n[c]) != 2)
				goto out;
	}
	if (fitted) {
		if (mi_gbrt_read(&p->trees, f) ||
		    p->trees.nfeat != NF_BASE + p->nemb)
			goto out;
		p->fitted = true;
	}
	err = 0;
out:
	fclose(f);
	if (err)
		mi_pred_fini(p);
	return err;
}

/* ---- statistics ---------------------------------------------------- */

uint64_t mi_pred_rand(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

double mi_pred_uniform(uint64_t *s)
{
	return (mi_pred_rand(s) >> 11) * (1.0 / 9007199254740992.0);
}

static const double *rank_key;

static int cmp_rank(const void *a, const void *b)
{
	double x = rank_key[*(const int *)a], y = rank_key[*(const int *)b];

	return (x > y) - (x < y);
}

/* Ranks with ties averaged. */
static void ranks(const double *v, int n, double *r, int *idx)
{
	for (int i = 0; i < n; i++)
		idx[i] = i;
	rank_key = v;
	qsort(idx, n, sizeof(int), cmp_rank);
	for (int i = 0; i < n;) {
		int j = i;

		while (j + 1 < n && v[idx[j + 1]] == v[idx[i]])
			j++;
		for (int k = i; k <= j; k++)
			r[idx[k]] = 0.5 * (i + j);
		i = j + 1;
	}
}

double mi_pred_spearman(const double *a, const double *b, int n)
{
	double *ra = malloc(n * sizeof(double)), *rb = malloc(n * sizeof(double));
	int *idx = malloc(n * sizeof(int));
	double ma = 0, mb = 0, sab = 0, saa = 0, sbb = 0, rho = 0;

	if (!ra || !rb || !idx || n < 2)
		goto out;
	ranks(a, n, ra, idx);
	ranks(b, n, rb, idx);
	for (int i = 0; i < n; i++) {
		ma += ra[i];
		mb += rb[i];
	}
	ma /= n;
	mb /= n;
	for (int i = 0; i < n; i++) {
		sab += (ra[i] - ma) * (rb[i] - mb);
		saa += (ra[i] - ma) * (ra[i] - ma);
		sbb += (rb[i] - mb) * (rb[i] - mb);
	}
	rho = saa > 0 && sbb > 0 ? sab / sqrt(saa * sbb) : 0;
out:
	free(ra);
	free(rb);
	free(idx);
	return rho;
}
