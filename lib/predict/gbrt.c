// SPDX-License-Identifier: MIT
/*
 * Gradient-boosted regression trees, squared loss, in plain C.
 *
 * Each feature is cut into at most nbins candidate thresholds (quantiles
 * of its values in the fit set, computed once); a node's best split is
 * found from per-bin sums of the residuals, so a level costs
 * O(samples x features).  There is no sampling: the same data gives the
 * same trees bit for bit.  The file form is text (one node per line) so
 * it round-trips exactly with "%a" floats.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "predict/predict.h"

struct fit {
	const float *x;
	int n, nfeat, nbins;
	float *thr;		/* [nfeat][nbins] thresholds */
	int *nthr;		/* per feature */
	unsigned char *bin;	/* [n][nfeat] bin of each value */
	float *res;		/* residuals */
	int *idx;		/* sample indices, partitioned per node */
	const struct mi_gbrt_params *p;
	struct mi_gbrt *t;
	double *hs, *hc;	/* per-bin sums scratch */
};

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;

	return (x > y) - (x < y);
}

/* Quantile thresholds of feature f: midpoints between distinct values. */
static void make_bins(struct fit *F, int f, float *tmp)
{
	int n = F->n, k = 0, nd = 0;

	for (int i = 0; i < n; i++)
		tmp[i] = F->x[(size_t)i * F->nfeat + f];
	qsort(tmp, n, sizeof(*tmp), cmp_float);
	for (int i = 0; i < n; i++)
		if (!i || tmp[i] != tmp[nd - 1])
			tmp[nd++] = tmp[i];
	for (int b = 1; b < F->nbins + 1 && nd > 1; b++) {
		int j = (int)((double)b * nd / (F->nbins + 1));
		float v;

		if (j < 1)
			j = 1;
		if (j >= nd)
			break;
		v = 0.5f * (tmp[j - 1] + tmp[j]);
		if (k && v <= F->thr[f * F->nbins + k - 1])
			continue;
		F->thr[f * F->nbins + k++] = v;
	}
	F->nthr[f] = k;
	for (int i = 0; i < n; i++) {
		float v = F->x[(size_t)i * F->nfeat + f];
		int b = 0;

		while (b < k && v > F->thr[f * F->nbins + b])
			b++;
		F->bin[(size_t)i * F->nfeat + f] = (unsigned char)b;
	}
}

static int add_node(struct mi_gbrt *t)
{
	static const struct mi_gbrt_node leaf = { .feat = -1 };
	struct mi_gbrt_node *nn;

	nn = realloc(t->nodes, (t->nnodes + 1) * sizeof(*nn));
	if (!nn)
		return -ENOMEM;
	t->nodes = nn;
	t->nodes[t->nnodes] = leaf;
	return t->nnodes++;
}

/* Grow the subtree over idx[lo, hi); returns its node index or -errno. */
static int grow(struct fit *F, int lo, int hi, int depth)
{
	int n = hi - lo, best_f = -1, best_b = -1, self;
	double sum = 0, best_gain = 1e-12;

	for (int i = lo; i < hi; i++)
		sum += F->res[F->idx[i]];
	self = add_node(F->t);
	if (self < 0)
		return self;
	F->t->nodes[self].value = (float)(sum / (n ? n : 1));
	if (depth >= F->p->depth || n < 2 * F->p->min_leaf)
		return self;
	for (int f = 0; f < F->nfeat; f++) {
		int nb = F->nthr[f] + 1;
		double sl = 0, cl = 0;

		if (nb < 2)
			continue;
		memset(F->hs, 0, nb * sizeof(double));
		memset(F->hc, 0, nb * sizeof(double));
		for (int i = lo; i < hi; i++) {
			int s = F->idx[i], b = F->bin[(size_t)s * F->nfeat + f];

			F->hs[b] += F->res[s];
			F->hc[b] += 1;
		}
		for (int b = 0; b < nb - 1; b++) {
			double sr, cr, gain;

			sl += F->hs[b];
			cl += F->hc[b];
			cr = n - cl;
			if (cl < F->p->min_leaf || cr < F->p->min_leaf)
				continue;
			sr = sum - sl;
			gain = sl * sl / cl + sr * sr / cr - sum * sum / n;
			if (gain > best_gain) {
				best_gain = gain;
				best_f = f;
				best_b = b;
			}
		}
	}
	if (best_f < 0)
		return self;
	/* partition idx[lo, hi) by the chosen bin, stably */
	{
		int *tmp = malloc(n * sizeof(int)), k = lo, l, r;

		if (!tmp)
			return -ENOMEM;
		memcpy(tmp, F->idx + lo, n * sizeof(int));
		for (int i = 0; i < n; i++)
			if (F->bin[(size_t)tmp[i] * F->nfeat + best_f] <= best_b)
				F->idx[k++] = tmp[i];
		l = k;
		for (int i = 0; i < n; i++)
			if (F->bin[(size_t)tmp[i] * F->nfeat + best_f] > best_b)
				F->idx[k++] = tmp[i];
		free(tmp);
		F->t->nodes[self].feat = best_f;
		F->t->nodes[self].thr = F->thr[best_f * F->nbins + best_b];
		r = grow(F, lo, l, depth + 1);
		if (r < 0)
			return r;
		F->t->nodes[self].left = r;
		r = grow(F, l, hi, depth + 1);
		if (r < 0)
			return r;
		F->t->nodes[self].right = r;
	}
	return self;
}

float mi_gbrt_eval(const struct mi_gbrt *t, const float *x)
{
	float y = t->base;

	for (int k = 0; k < t->ntrees; k++) {
		int i = t->root[k];

		while (t->nodes[i].feat >= 0)
			i = x[t->nodes[i].feat] <= t->nodes[i].thr ?
				    t->nodes[i].left : t->nodes[i].right;
		y += t->lr * t->nodes[i].value;
	}
	return y;
}

void mi_gbrt_fini(struct mi_gbrt *t)
{
	free(t->root);
	free(t->nodes);
	memset(t, 0, sizeof(*t));
}

int mi_gbrt_fit(struct mi_gbrt *t, const float *x, const float *y, int n,
		int nfeat, const struct mi_gbrt_params *up)
{
	struct mi_gbrt_params p = up ? *up : (struct mi_gbrt_params){ 0 };
	struct fit F = { .x = x, .n = n, .nfeat = nfeat, .p = &p, .t = t };
	float *tmp = NULL, *pred = NULL;
	double mean = 0;
	int err = -ENOMEM;

	if (!p.ntrees)
		p.ntrees = 150;
	if (!p.depth)
		p.depth = 5;
	if (!p.min_leaf)
		p.min_leaf = 8;
	if (!p.lr)
		p.lr = 0.1f;
	if (!p.nbins)
		p.nbins = 32;
	if (p.nbins > 255)
		p.nbins = 255;
	memset(t, 0, sizeof(*t));
	if (n <= 0 || nfeat <= 0)
		return -EINVAL;
	F.nbins = p.nbins;
	t->nfeat = nfeat;
	t->lr = p.lr;
	F.thr = calloc((size_t)nfeat * p.nbins, sizeof(float));
	F.nthr = calloc(nfeat, sizeof(int));
	F.bin = malloc((size_t)n * nfeat);
	F.res = malloc(n * sizeof(float));
	F.idx = malloc(n * sizeof(int));
	F.hs = malloc((p.nbins + 1) * sizeof(double));
	F.hc = malloc((p.nbins + 1) * sizeof(double));
	t->root = calloc(p.ntrees, sizeof(int));
	tmp = malloc(n * sizeof(float));
	pred = malloc(n * sizeof(float));
	if (!F.thr || !F.nthr || !F.bin || !F.res || !F.idx || !F.hs ||
	    !F.hc || !t->root || !tmp || !pred)
		goto out;
	for (int f = 0; f < nfeat; f++)
		make_bins(&F, f, tmp);
	for (int i = 0; i < n; i++)
		mean += y[i];
	t->base = (float)(mean / n);
	for (int i = 0; i < n; i++)
		pred[i] = t->base;
	for (int k = 0; k < p.ntrees; k++) {
		int r;

		for (int i = 0; i < n; i++) {
			F.res[i] = y[i] - pred[i];
			F.idx[i] = i;
		}
		r = grow(&F, 0, n, 0);
		if (r < 0) {
			err = r;
			goto out;
		}
		t->root[k] = r;
		t->ntrees = k + 1;
		for (int i = 0; i < n; i++) {
			int j = r;

			while (t->nodes[j].feat >= 0)
				j = x[(size_t)i * nfeat + t->nodes[j].feat] <=
					    t->nodes[j].thr ?
					    t->nodes[j].left :
					    t->nodes[j].right;
			pred[i] += t->lr * t->nodes[j].value;
		}
	}
	err = 0;
out:
	free(F.thr);
	free(F.nthr);
	free(F.bin);
	free(F.res);
	free(F.idx);
	free(F.hs);
	free(F.hc);
	free(tmp);
	free(pred);
	if (err)
		mi_gbrt_fini(t);
	return err;
}

/* Text form: "gbrt NFEAT NTREES NNODES LR BASE", roots, then per node
 * "FEAT THR VALUE LEFT RIGHT" with %a floats (exact). */
int mi_gbrt_write(const struct mi_gbrt *t, FILE *f)
{
	fprintf(f, "gbrt %d %d %d %a %a\n", t->nfeat, t->ntrees, t->nnodes,
		t->lr, t->base);
	for (int k = 0; k < t->ntrees; k++)
		fprintf(f, "%d%c", t->root[k], k + 1 < t->ntrees ? ' ' : '\n');
	for (int i = 0; i < t->nnodes; i++) {
		const struct mi_gbrt_node *nd = &t->nodes[i];

		fprintf(f, "%d %a %a %d %d\n", nd->feat, nd->thr, nd->value,
			nd->left, nd->right);
	}
	return ferror(f) ? -EIO : 0;
}

int mi_gbrt_read(struct mi_gbrt *t, FILE *f)
{
	int nf, nt, nn;
	float lr, base;

	memset(t, 0, sizeof(*t));
	if (fscanf(f, " gbrt %d %d %d %a %a", &nf, &nt, &nn, &lr, &base) != 5 ||
	    nf <= 0 || nf > 4096 || nt < 0 || nt > 100000 || nn < nt ||
	    nn > 10000000)
		return -EINVAL;
	t->root = calloc(nt ? nt : 1, sizeof(int));
	t->nodes = calloc(nn ? nn : 1, sizeof(*t->nodes));
	if (!t->root || !t->nodes) {
		mi_gbrt_fini(t);
		return -ENOMEM;
	}
	t->nfeat = nf;
	t->lr = lr;
	t->base = base;
	t->ntrees = nt;
	t->nnodes = nn;
	for (int k = 0; k < nt; k++)
		if (fscanf(f, "%d", &t->root[k]) != 1 || t->root[k] < 0 ||
		    t->root[k] >= nn)
			goto bad;
	for (int i = 0; i < nn; i++) {
		struct mi_gbrt_node *nd = &t->nodes[i];

		if (fscanf(f, "%d %a %a %d %d", &nd->feat, &nd->thr, &nd->value,
			   &nd->left, &nd->right) != 5 || nd->feat >= nf)
			goto bad;
		/* children come after their parent: no cycles */
		if (nd->feat >= 0 &&
		    (nd->left <= i || nd->right <= i || nd->left >= nn ||
		     nd->right >= nn))
			goto bad;
	}
	return 0;
bad:
	mi_gbrt_fini(t);
	return -EINVAL;
}
