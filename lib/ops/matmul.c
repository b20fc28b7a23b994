// SPDX-License-Identifier: MIT
/* Gemm and MatMul (batched, broadcast, 1-D operands), plus the plain fp32
 * matrix product used by the convolutions. */
#include <stdlib.h>

#include "ops/ops.h"

void mi_ops_sgemm(int64_t M, int64_t N, int64_t K, const float *A,
		  int64_t sam, int64_t sak, const float *B, int64_t sbk,
		  int64_t sbn, float *C, int64_t ldc)
{
	if (sbn == 1) {
		/* C row += A[m,k] * B row k: contiguous inner loop */
		for (int64_t m = 0; m < M; m++) {
			float *c = C + m * ldc;

			for (int64_t k = 0; k < K; k++) {
				float a = A[m * sam + k * sak];
				const float *b = B + k * sbk;

				if (a == 0)
					continue;
				for (int64_t j = 0; j < N; j++)
					c[j] += a * b[j];
			}
		}
	} else if (sak == 1 && sbk == 1) {
		for (int64_t m = 0; m < M; m++)
			for (int64_t j = 0; j < N; j++) {
				const float *a = A + m * sam, *b = B + j * sbn;
				float s = 0;

				for (int64_t k = 0; k < K; k++)
					s += a[k] * b[k];
				C[m * ldc + j] += s;
			}
	} else {
		for (int64_t m = 0; m < M; m++)
			for (int64_t j = 0; j < N; j++) {
				float s = 0;

				for (int64_t k = 0; k < K; k++)
					s += A[m * sam + k * sak] *
					     B[k * sbk + j * sbn];
				C[m * ldc + j] += s;
			}
	}
}

/* ---- Gemm ---------------------------------------------------------------- */

static int gemm_infer(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *a = mi_in(g, n, 0), *b = mi_in(g, n, 1);
	struct mi_tensor *c = mi_in(g, n, 2);
	int ta = mi_attr_int(n, "transA", 0) != 0;
	int tb = mi_attr_int(n, "transB", 0) != 0;
	int64_t M, N, K, K2, dims[2];
	int ret;

	if ((ret = mi_ops_need_rank(g, n, 0)) ||
	    (ret = mi_ops_need_rank(g, n, 1)))
		return ret;
	if (a->ndim != 2 || b->ndim != 2)
		return mi_graph_err(g, n, -EINVAL,
				    "A and B must be 2-D (ranks %d, %d)",
				    a->ndim, b->ndim);
	if (a->dtype != MI_DT_FLOAT || b->dtype != MI_DT_FLOAT ||
	    (c && c->ndim >= 0 && c->dtype != MI_DT_FLOAT))
		return mi_graph_err(g, n, -EOPNOTSUPP,
				    "only float32 is supported, got %s",
				    mi_dtype_name(a->dtype));
	M = a->dims[ta ? 1 : 0];
	K = a->dims[ta ? 0 : 1];
	K2 = b->dims[tb ? 1 : 0];
	N = b->dims[tb ? 0 : 1];
	if (K >= 0 && K2 >= 0 && K != K2)
		return mi_graph_err(g, n, -EINVAL,
				    "inner dimensions differ (%lld vs %lld)",
				    (long long)K, (long long)K2);
	if (c && c->ndim >= 0) {
		if (c->ndim > 2)
			return mi_graph_err(g, n, -EINVAL,
					    "C has rank %d, at most 2", c->ndim);
		for (int i = 0; i < c->ndim; i++) {
			int64_t cd = c->dims[i], od = i == c->ndim - 1 ? N : M;

			if (cd >= 0 && od >= 0 && cd != 1 && cd != od)
				return mi_graph_err(
					g, n, -EINVAL,
					"C dim %lld cannot broadcast to %lld",
					(long long)cd, (long long)od);
		}
	}
	dims[0] = M;
	dims[1] = N;
	return mi_ops_set_out(g, n, 0, MI_DT_FLOAT, 2, dims);
}

static int gemm_run(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *a = mi_in(g, n, 0), *b = mi_in(g, n, 1);
	struct mi_tensor *c = mi_in(g, n, 2), *y = mi_ops_out(g, n, 0);
	int ta = mi_attr_int(n, "transA", 0) != 0;
	int tb = mi_attr_int(n, "transB", 0) != 0;
	float alpha = mi_attr_float(n, "alpha", 1.0f);
	float beta = mi_attr_float(n, "beta", 1.0f);
	int64_t M = y->dims[0], N = y->dims[1], K = a->dims[ta ? 0 : 1];
	float *o = y->data;
	const float *A = a->data, *B = b->data;

	/* o = A*B first, then scale and add beta*C */
	memset(o, 0, M * N * sizeof(float));
	mi_ops_sgemm(M, N, K, A, ta ? 1 : K, ta ? M : 1, B, tb ? 1 : N,
		     tb ? K : 1, o, N);
	for (int64_t m = 0; m < M; m++)
		for (int64_t j = 0; j < N; j++) {
			float v = alpha * o[m * N + j];

			if (c && beta != 0) {
				const float *cd = c->data;
				int64_t ci = 0;

				if (c->ndim == 2)
					ci = (c->dims[0] == 1 ? 0 : m) *
						     c->dims[1] +
					     (c->dims[1] == 1 ? 0 : j);
				else if (c->ndim == 1)
					ci = c->dims[0] == 1 ? 0 : j;
				v += beta * cd[ci];
			}
			o[m * N + j] = v;
		}
	return 0;
}

/* ---- MatMul ---------------------------------------------------------------- */

struct mm_shape {
	int64_t M, N, K;
	int batch_nd;
	int64_t batch[MI_MAX_DIMS];
	/* padded operand views: [batch..., M, K] and [batch..., K, N] */
	struct mi_tensor av, bv;
};

static int mm_shape(struct mi_graph *g, struct mi_node *n, struct mm_shape *s,
		    int *ondim, int64_t *odims)
{
	struct mi_tensor *a = mi_in(g, n, 0), *b = mi_in(g, n, 1);
	struct mi_tensor *ins[2];
	int an = a->ndim, bn = b->ndim, ret, bnd;

	if (an < 1 || bn < 1)
		return mi_graph_err(g, n, -EINVAL, "operands must be >= 1-D");
	s->av = *a;
	s->bv = *b;
	if (an == 1) {
		s->av.ndim = 2;
		s->av.dims[0] = 1;
		s->av.dims[1] = a->dims[0];
	}
	if (bn == 1) {
		s->bv.ndim = 2;
		s->bv.dims[0] = b->dims[0];
		s->bv.dims[1] = 1;
	}
	s->M = s->av.dims[s->av.ndim - 2];
	s->K = s->av.dims[s->av.ndim - 1];
	s->N = s->bv.dims[s->bv.ndim - 1];
	if (s->K >= 0 && s->bv.dims[s->bv.ndim - 2] >= 0 &&
	    s->K != s->bv.dims[s->bv.ndim - 2])
		return mi_graph_err(g, n, -EINVAL,
				    "inner dimensions differ (%lld vs %lld)",
				    (long long)s->K,
				    (long long)s->bv.dims[s->bv.ndim - 2]);
	/* broadcast batch dims */
	{
		struct mi_tensor ba = s->av, bb = s->bv;

		ba.ndim -= 2;
		bb.ndim -= 2;
		ins[0] = &ba;
		ins[1] = &bb;
		ret = mi_bcast_infer(g, n, 2, ins, &bnd, s->batch);
		if (ret)
			return ret;
	}
	s->batch_nd = bnd;
	*ondim = 0;
	for (int i = 0; i < bnd; i++)
		odims[(*ondim)++] = s->batch[i];
	if (an > 1)
		odims[(*ondim)++] = s->M;
	if (bn > 1)
		odims[(*ondim)++] = s->N;
	return 0;
}

static int matmul_infer(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *a = mi_in(g, n, 0), *b = mi_in(g, n, 1);
	struct mm_shape s;
	int64_t odims[MI_MAX_DIMS + 2];
	int ondim, ret;

	if ((ret = mi_ops_need_rank(g, n, 0)) ||
	    (ret = mi_ops_need_rank(g, n, 1)))
		return ret;
	if (a->dtype != MI_DT_FLOAT || b->dtype != MI_DT_FLOAT)
		return mi_graph_err(g, n, -EOPNOTSUPP,
				    "only float32 is supported, got %s/%s",
				    mi_dtype_name(a->dtype),
				    mi_dtype_name(b->dtype));
	ret = mm_shape(g, n, &s, &ondim, odims);
	if (ret)
		return ret;
	return mi_ops_set_out(g, n, 0, MI_DT_FLOAT, ondim, odims);
}

static int matmul_run(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *y = mi_ops_out(g, n, 0);
	struct mm_shape s;
	int64_t odims[MI_MAX_DIMS + 2], offs[2];
	int ondim, ret;
	struct mi_tensor ba, bb, bo;
	struct mi_tensor *ins[2] = { &ba, &bb };
	struct mi_bcast bc;
	float *o = y->data;
	int64_t mn, nb = 1;

	ret = mm_shape(g, n, &s, &ondim, odims);
	if (ret)
		return ret;
	mn = s.M * s.N;
	memset(o, 0, mi_tensor_numel(y) * sizeof(float));
	if (mn == 0)
		return 0;
	ba = s.av;
	bb = s.bv;
	ba.ndim -= 2;
	bb.ndim -= 2;
	memset(&bo, 0, sizeof(bo));
	bo.ndim = s.batch_nd;
	for (int i = 0; i < s.batch_nd; i++) {
		bo.dims[i] = s.batch[i];
		nb *= s.batch[i];
	}
	if (nb == 0)
		return 0;
	mi_bcast_init(&bc, 2, ins, &bo);
	for (int64_t r = 0; r < bc.rows; r++) {
		mi_bcast_row(&bc, r, offs);
		for (int64_t j = 0; j < bc.inner; j++) {
			int64_t ia = offs[0] + j * bc.step[0];
			int64_t ib = offs[1] + j * bc.step[1];
			int64_t io = r * bc.inner + j;
			const float *A = (const float *)s.av.data + ia * s.M * s.K;
			const float *B = (const float *)s.bv.data + ib * s.K * s.N;

			mi_ops_sgemm(s.M, s.N, s.K, A, s.K, 1, B, s.N, 1,
				     o + io * mn, s.N);
		}
	}
	return 0;
}


/* ---- Einsum ----------------------------------------------------------------- */

#define EIN_MAXIN 8
#define EIN_LABELS (52 + MI_MAX_DIMS) /* a-z, A-Z, then ellipsis dims */

struct ein {
	int nin;
	int nl[EIN_MAXIN];                 /* axes per input */
	int lab[EIN_MAXIN][MI_MAX_DIMS];   /* label of each axis */
	int nout, out[EIN_LABELS];         /* output labels */
	int nsum, sum[EIN_LABELS];         /* contracted labels */
	int64_t size[EIN_LABELS];
	int64_t st[EIN_MAXIN][EIN_LABELS]; /* element stride per label */
};

static int ein_label(char c)
{
	if (c >= 'a' && c <= 'z')
		return c - 'a';
	if (c >= 'A' && c <= 'Z')
		return 26 + c - 'A';
	return -1;
}

static int ein_parse(struct mi_graph *g, struct mi_node *n, struct ein *e)
{
	const char *eq = mi_attr_string(n, "equation", NULL);
	char buf[256], *arrow, *p;
	int used[EIN_LABELS] = { 0 }, cnt[EIN_LABELS] = { 0 }, isout[EIN_LABELS] = { 0 };
	int ell_rank = 0, k = 0, ret;
	size_t len = 0;

	if (!eq)
		return mi_graph_err(g, n, -EINVAL, "equation is required");
	for (const char *q = eq; *q; q++)
		if (*q != ' ') {
			if (len + 1 >= sizeof(buf))
				return mi_graph_err(g, n, -EINVAL,
						    "equation is too long");
			buf[len++] = *q;
		}
	buf[len] = 0;
	memset(e, 0, sizeof(*e));
	e->nin = n->ninputs;
	if (e->nin < 1 || e->nin > EIN_MAXIN)
		return mi_graph_err(g, n, -EOPNOTSUPP, "%d inputs unsupported",
				    e->nin);
	for (int i = 0; i < EIN_LABELS; i++)
		e->size[i] = -1;
	arrow = strstr(buf, "->");
	if (arrow)
		*arrow = 0;
	p = buf;
	/* input terms */
	for (int i = 0; i < e->nin; i++) {
		struct mi_tensor *t = mi_in(g, n, i);
		int letters = 0, ell = -1, ax = 0;
		char *end = strchr(p, ',');

		if ((ret = mi_ops_need_rank(g, n, i)))
			return ret;
		if ((i < e->nin - 1) != (end != NULL))
			return mi_graph_err(g, n, -EINVAL,
					    "equation has the wrong number of inputs");
		if (end)
			*end = 0;
		for (char *q = p; *q; q++) {
			if (!strncmp(q, "...", 3)) {
				if (ell >= 0)
					return mi_graph_err(g, n, -EINVAL,
							    "two ellipses in a term");
				ell = letters;
				q += 2;
			} else if (ein_label(*q) < 0) {
				return mi_graph_err(g, n, -EINVAL,
						    "bad character '%c' in equation", *q);
			} else {
				letters++;
			}
		}
		if (letters > t->ndim || (ell < 0 && letters != t->ndim))
			return mi_graph_err(g, n, -EINVAL,
					    "term %d has %d labels for rank %d",
					    i, letters, t->ndim);
		if (ell >= 0 && t->ndim - letters > ell_rank)
			ell_rank = t->ndim - letters;
		/* assign labels; ellipsis dims right-aligned */
		for (char *q = p; *q; q++) {
			if (!strncmp(q, "...", 3)) {
				int ne = t->ndim - letters;

				for (int j = 0; j < ne; j++)
					e->lab[i][ax++] = -(ne - j); /* fixed below */
				q += 2;
			} else {
				e->lab[i][ax++] = ein_label(*q);
			}
		}
		e->nl[i] = ax;
		p = end ? end + 1 : p + strlen(p);
	}
	if (ell_rank > MI_MAX_DIMS)
		return mi_graph_err(g, n, -EINVAL, "ellipsis too long");
	/* ellipsis labels: 52 + position counted from the left of ell_rank */
	for (int i = 0; i < e->nin; i++)
		for (int a = 0; a < e->nl[i]; a++)
			if (e->lab[i][a] < 0)
				e->lab[i][a] = 52 + ell_rank + e->lab[i][a];
	/* sizes (ellipsis dims broadcast: 1 stretches) */
	for (int i = 0; i < e->nin; i++) {
		struct mi_tensor *t = mi_in(g, n, i);
		int64_t ts[MI_MAX_DIMS];

		mi_ops_strides(t->ndim, t->dims, ts);
		for (int a = 0; a < e->nl[i]; a++) {
			int l = e->lab[i][a];
			int64_t d = t->dims[a];

			used[l] = 1;
			cnt[l]++;
			if (l >= 52 && d == 1)
				continue; /* broadcast: stride stays 0 */
			if (e->size[l] >= 0 && d != e->size[l])
				return mi_graph_err(g, n, -EINVAL,
						    "label size mismatch (%lld vs %lld)",
						    (long long)d,
						    (long long)e->size[l]);
			e->size[l] = d;
			e->st[i][l] += ts[a];
		}
	}
	for (int l = 52; l < 52 + ell_rank; l++)
		if (used[l] && e->size[l] < 0)
			e->size[l] = 1;
	/* output */
	if (arrow) {
		char *q = arrow + 2;

		for (; *q; q++) {
			if (!strncmp(q, "...", 3)) {
				for (int j = 0; j < ell_rank; j++) {
					e->out[k++] = 52 + j;
					isout[52 + j] = 1;
				}
				q += 2;
				continue;
			}
			int l = ein_label(*q);

			if (l < 0 || !used[l] || isout[l])
				return mi_graph_err(g, n, -EINVAL,
						    "bad output label '%c'", *q);
			isout[l] = 1;
			e->out[k++] = l;
		}
	} else {
		for (int j = 0; j < ell_rank; j++) {
			e->out[k++] = 52 + j;
			isout[52 + j] = 1;
		}
		/* numpy order: by character code (upper case first) */
		for (int l = 26; l < 52; l++)
			if (cnt[l] == 1) {
				e->out[k++] = l;
				isout[l] = 1;
			}
		for (int l = 0; l < 26; l++)
			if (cnt[l] == 1) {
				e->out[k++] = l;
				isout[l] = 1;
			}
	}
	if (k > MI_MAX_DIMS)
		return mi_graph_err(g, n, -EOPNOTSUPP, "output rank %d too big", k);
	e->nout = k;
	{
		/* bound the brute-force work (product of all label sizes) */
		double work = 1;

		for (int l = 0; l < EIN_LABELS; l++)
			if (used[l] && e->size[l] > 0)
				work *= (double)e->size[l];
		if (work > 1e12)
			return mi_graph_err(g, n, -EOPNOTSUPP,
					    "equation needs too much work");
	}
	for (int l = 0; l < EIN_LABELS; l++)
		if (used[l] && !isout[l])
			e->sum[e->nsum++] = l;
	for (int i = 0; i < e->nin; i++)
		if (mi_in(g, n, i)->dtype != mi_in(g, n, 0)->dtype)
			return mi_graph_err(g, n, -EINVAL, "input dtypes differ");
	if (!mi_ops_is_float(mi_in(g, n, 0)->dtype))
		return mi_graph_err(g, n, -EOPNOTSUPP, "dtype %s unsupported",
				    mi_dtype_name(mi_in(g, n, 0)->dtype));
	return 0;
}

static int einsum_infer(struct mi_graph *g, struct mi_node *n)
{
	struct ein *e = malloc(sizeof(*e));
	int64_t dims[MI_MAX_DIMS];
	int ret;

	if (!e)
		return -ENOMEM;
	ret = ein_parse(g, n, e);
	if (!ret) {
		for (int k = 0; k < e->nout; k++)
			dims[k] = e->size[e->out[k]];
		ret = mi_ops_set_out(g, n, 0, mi_in(g, n, 0)->dtype, e->nout,
				     dims);
	}
	free(e);
	return ret;
}

static int einsum_run(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *y = mi_ops_out(g, n, 0);
	struct ein *e = malloc(sizeof(*e));
	int64_t total, nsum = 1, inner = 1, isz[EIN_MAXIN];
	int ret, last;

	if (!e)
		return -ENOMEM;
	ret = ein_parse(g, n, e);
	if (ret)
		goto out;
	total = mi_tensor_numel(y);
	for (int s = 0; s < e->nsum; s++)
		nsum *= e->size[e->sum[s]];
	last = e->nsum ? e->sum[e->nsum - 1] : -1;
	if (last >= 0)
		inner = e->size[last];
	for (int i = 0; i < e->nin; i++)
		isz[i] = last >= 0 ? e->st[i][last] : 0;
	for (int64_t o = 0; o < total; o++) {
		int64_t base[EIN_MAXIN] = { 0 }, r = o;
		double acc = 0;

		for (int k = e->nout - 1; k >= 0; k--) {
			int l = e->out[k];
			int64_t c = r % e->size[l];

			r /= e->size[l];
			for (int i = 0; i < e->nin; i++)
				base[i] += c * e->st[i][l];
		}
		for (int64_t s = 0; inner && s < nsum / inner; s++) {
			int64_t off[EIN_MAXIN], q = s;

			memcpy(off, base, sizeof(off));
			for (int k = e->nsum - 2; k >= 0; k--) {
				int l = e->sum[k];
				int64_t c = q % e->size[l];

				q /= e->size[l];
				for (int i = 0; i < e->nin; i++)
					off[i] += c * e->st[i][l];
			}
			for (int64_t j = 0; j < inner; j++) {
				double v = 1;

				for (int i = 0; i < e->nin; i++)
					v *= mi_ops_rd(mi_in(g, n, i),
						       off[i] + j * isz[i]);
				acc += v;
			}
		}
		mi_ops_wr(y, o, acc);
	}
out:
	free(e);
	return ret;
}

const struct mi_op_def mi_ops_matmul[] = {
	{ "Gemm", "", 2, 3, 1, 1, gemm_infer, gemm_run },
	{ "MatMul", "", 2, 2, 1, 1, matmul_infer, matmul_run },
	{ "Einsum", "", 1, EIN_MAXIN, 1, 1, einsum_infer, einsum_run },
	{ NULL }
};
