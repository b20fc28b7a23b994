// SPDX-License-Identifier: MIT
/*
 * Recurrent layers: RNN, GRU (linear_before_reset), LSTM (peepholes),
 * forward/reverse/bidirectional, sequence_lens, initial states, clip,
 * layout 0 and 1, activations Tanh/Sigmoid/Relu.  Float dtypes, computed
 * in double.
 */
#include <math.h>
#include <stdlib.h>

#include "ops/ops.h"

enum { K_RNN, K_GRU, K_LSTM };
enum { A_TANH, A_SIGMOID, A_RELU };

struct rnn {
	int kind, G, ndir, layout, nact;
	int dirs[2]; /* 0 forward, 1 reverse */
	int act[6];
	int64_t T, B, I, H;
	double clip;
};

static double act(int a, double v)
{
	switch (a) {
	case A_SIGMOID: return v >= 0 ? 1 / (1 + exp(-v)) : exp(v) / (1 + exp(v));
	case A_RELU: return v > 0 ? v : 0;
	default: return tanh(v);
	}
}

static int rnn_setup(struct mi_graph *g, struct mi_node *n, struct rnn *r)
{
	struct mi_tensor *x = mi_in(g, n, 0), *w = mi_in(g, n, 1);
	struct mi_tensor *rr = mi_in(g, n, 2);
	const char *dir = mi_attr_string(n, "direction", "forward");
	const struct mi_attr *acts = mi_attr_get(n, "activations");
	int per, ret;

	memset(r, 0, sizeof(*r));
	r->kind = !strcmp(n->op_type, "GRU") ? K_GRU :
		  !strcmp(n->op_type, "LSTM") ? K_LSTM : K_RNN;
	r->G = r->kind == K_GRU ? 3 : r->kind == K_LSTM ? 4 : 1;
	per = r->kind == K_GRU ? 2 : r->kind == K_LSTM ? 3 : 1;
	for (int i = 0; i < 3; i++)
		if ((ret = mi_ops_need_rank(g, n, i)))
			return ret;
	if (!strcmp(dir, "forward")) {
		r->ndir = 1;
	} else if (!strcmp(dir, "reverse")) {
		r->ndir = 1;
		r->dirs[0] = 1;
	} else if (!strcmp(dir, "bidirectional")) {
		r->ndir = 2;
		r->dirs[1] = 1;
	} else {
		return mi_graph_err(g, n, -EINVAL, "direction '%s' is invalid",
				    dir);
	}
	r->layout = (int)mi_attr_int(n, "layout", 0);
	if (r->layout != 0 && r->layout != 1)
		return mi_graph_err(g, n, -EINVAL, "layout must be 0 or 1");
	if (x->ndim != 3 || w->ndim != 3 || rr->ndim != 3)
		return mi_graph_err(g, n, -EINVAL, "X, W and R must be 3-D");
	if (!mi_ops_is_float(x->dtype) || w->dtype != x->dtype ||
	    rr->dtype != x->dtype)
		return mi_graph_err(g, n, -EOPNOTSUPP,
				    "float inputs of one dtype required");
	r->T = x->dims[r->layout ? 1 : 0];
	r->B = x->dims[r->layout ? 0 : 1];
	r->I = x->dims[2];
	r->H = mi_attr_int(n, "hidden_size", w->dims[1] / r->G);
	if (r->H < 1 || r->H > (INT64_C(1) << 24) || w->dims[0] != r->ndir ||
	    w->dims[1] != r->G * r->H || w->dims[2] != r->I ||
	    rr->dims[0] != r->ndir || rr->dims[1] != r->G * r->H ||
	    rr->dims[2] != r->H)
		return mi_graph_err(g, n, -EINVAL,
				    "W/R shapes do not match hidden_size/direction");
	for (int i = 3; i < n->ninputs; i++) {
		struct mi_tensor *t = mi_in(g, n, i);
		int64_t want[3];
		int wn = 0;

		if (!t)
			continue;
		switch (i) {
		case 3: want[0] = r->ndir; want[1] = 2 * r->G * r->H; wn = 2; break;
		case 4: want[0] = r->B; wn = 1; break;
		case 5: case 6:
			want[0] = r->ndir; want[1] = r->B; want[2] = r->H; wn = 3;
			if (r->layout) {
				want[0] = r->B;
				want[1] = r->ndir;
			}
			break;
		default: want[0] = r->ndir; want[1] = 3 * r->H; wn = 2; break;
		}
		if (t->ndim != wn)
			return mi_graph_err(g, n, -EINVAL, "input %d has rank %d",
					    i, t->ndim);
		for (int d = 0; d < wn; d++)
			if (t->dims[d] != want[d])
				return mi_graph_err(g, n, -EINVAL,
						    "input %d has the wrong shape", i);
		if (i == 4 ? !mi_ops_is_int(t->dtype) : t->dtype != x->dtype)
			return mi_graph_err(g, n, -EINVAL,
					    "input %d has the wrong dtype", i);
	}
	r->clip = mi_attr_float(n, "clip", 0);
	if (r->clip < 0)
		return mi_graph_err(g, n, -EINVAL, "clip must be positive");
	if (mi_attr_int(n, "input_forget", 0))
		return mi_graph_err(g, n, -EOPNOTSUPP,
				    "input_forget is not supported");
	r->nact = per * r->ndir;
	for (int i = 0; i < r->nact; i++)
		r->act[i] = (r->kind == K_RNN || i % per) ? A_TANH : A_SIGMOID;
	if (acts) {
		if (acts->type != MI_ATTR_STRINGS || acts->n != r->nact)
			return mi_graph_err(g, n, -EINVAL,
					    "activations must list %d names", r->nact);
		for (int i = 0; i < r->nact; i++) {
			const char *a = acts->strings[i];

			if (!strcasecmp(a, "Tanh"))
				r->act[i] = A_TANH;
			else if (!strcasecmp(a, "Sigmoid"))
				r->act[i] = A_SIGMOID;
			else if (!strcasecmp(a, "Relu"))
				r->act[i] = A_RELU;
			else
				return mi_graph_err(g, n, -EOPNOTSUPP,
						    "activation '%s' is not supported", a);
		}
	}
	return 0;
}

static int rnn_infer(struct mi_graph *g, struct mi_node *n)
{
	struct rnn r;
	int dt, ret = rnn_setup(g, n, &r);
	int64_t yd[4], hd[3];

	if (ret)
		return ret;
	dt = mi_in(g, n, 0)->dtype;
	if (r.layout) {
		yd[0] = r.B; yd[1] = r.T; yd[2] = r.ndir; yd[3] = r.H;
		hd[0] = r.B; hd[1] = r.ndir; hd[2] = r.H;
	} else {
		yd[0] = r.T; yd[1] = r.ndir; yd[2] = r.B; yd[3] = r.H;
		hd[0] = r.ndir; hd[1] = r.B; hd[2] = r.H;
	}
	if ((ret = mi_ops_set_out(g, n, 0, dt, 4, yd)) ||
	    (ret = mi_ops_set_out(g, n, 1, dt, 3, hd)))
		return ret;
	return r.kind == K_LSTM ? mi_ops_set_out(g, n, 2, dt, 3, hd) : 0;
}

static double clipv(const struct rnn *r, double v)
{
	if (r->clip > 0)
		v = v < -r->clip ? -r->clip : v > r->clip ? r->clip : v;
	return v;
}

static int rnn_run(struct mi_graph *g, struct mi_node *n)
{
	struct rnn r;
	struct mi_tensor *x = mi_in(g, n, 0), *w = mi_in(g, n, 1);
	struct mi_tensor *R = mi_in(g, n, 2), *bt = mi_in(g, n, 3);
	struct mi_tensor *sl = mi_in(g, n, 4), *h0 = mi_in(g, n, 5);
	struct mi_tensor *c0 = mi_in(g, n, 6), *pp = mi_in(g, n, 7);
	struct mi_tensor *y = mi_ops_out(g, n, 0), *yh = mi_ops_out(g, n, 1);
	struct mi_tensor *yc = mi_ops_out(g, n, 2);
	int ret = rnn_setup(g, n, &r), lbr = mi_attr_int(n, "linear_before_reset", 0) != 0;
	int64_t H, G, B, T, I;
	double *h, *c, *gx, *gh, *hn;

	if (ret)
		return ret;
	H = r.H;
	G = r.G;
	B = r.B;
	T = r.T;
	I = r.I;
	if (r.kind != K_LSTM)
		yc = NULL;
	h = calloc(H + 1, sizeof(double));
	c = calloc(H + 1, sizeof(double));
	hn = calloc(H + 1, sizeof(double));
	gx = calloc(G * H + 1, sizeof(double));
	gh = calloc(G * H + 1, sizeof(double));
	if (!h || !c || !hn || !gx || !gh) {
		ret = mi_graph_err(g, n, -ENOMEM, "out of memory");
		goto out;
	}
	for (int di = 0; di < r.ndir; di++) {
		int rev = r.dirs[di];
		const int *af = &r.act[di * r.nact / r.ndir];

		for (int64_t b = 0; b < B; b++) {
			int64_t len = sl ? mi_tensor_get_i64(sl, b) : T;

			if (len < 0 || len > T) {
				ret = mi_graph_err(g, n, -EINVAL,
						   "sequence length %lld out of range",
						   (long long)len);
				goto out;
			}
			for (int64_t k = 0; k < H; k++) {
				int64_t si = r.layout ? (b * r.ndir + di) * H + k :
							(di * B + b) * H + k;

				h[k] = h0 ? mi_ops_rd(h0, si) : 0;
				c[k] = c0 ? mi_ops_rd(c0, si) : 0;
			}
			for (int64_t s = 0; s < len; s++) {
				int64_t t = rev ? len - 1 - s : s;
				int64_t xb = r.layout ? (b * T + t) * I : (t * B + b) * I;

				/* gx = W x + Wb, gh = R h + Rb */
				for (int64_t j = 0; j < G * H; j++) {
					double a = bt ? mi_ops_rd(bt, di * 2 * G * H + j) : 0;
					double e = bt ? mi_ops_rd(bt, di * 2 * G * H + G * H + j) : 0;
					int64_t wb = (di * G * H + j) * I, rb = (di * G * H + j) * H;

					for (int64_t k = 0; k < I; k++)
						a += mi_ops_rd(w, wb + k) * mi_ops_rd(x, xb + k);
					for (int64_t k = 0; k < H; k++)
						e += mi_ops_rd(R, rb + k) * h[k];
					gx[j] = a;
					gh[j] = e;
				}
				if (r.kind == K_RNN) {
					for (int64_t k = 0; k < H; k++)
						hn[k] = act(af[0], clipv(&r, gx[k] + gh[k]));
				} else if (r.kind == K_GRU) {
					/* reset gate first: hn holds r . h_{t-1} */
					for (int64_t k = 0; k < H; k++)
						hn[k] = act(af[0], clipv(&r, gx[H + k] + gh[H + k])) * h[k];
					for (int64_t k = 0; k < H; k++) {
						double z = act(af[0], clipv(&r, gx[k] + gh[k]));
						double rg = act(af[0], clipv(&r, gx[H + k] + gh[H + k]));
						double hh;

						if (lbr) {
							hh = gx[2 * H + k] + rg * gh[2 * H + k];
						} else {
							/* (r . h) R_h^T + Rb_h */
							double e = bt ? mi_ops_rd(bt, di * 2 * G * H + G * H + 2 * H + k) : 0;
							int64_t rb = (di * G * H + 2 * H + k) * H;

							for (int64_t q = 0; q < H; q++)
								e += mi_ops_rd(R, rb + q) * hn[q];
							hh = gx[2 * H + k] + e;
						}
						hh = act(af[1], clipv(&r, hh));
						gx[k] = (1 - z) * hh + z * h[k];
					}
					for (int64_t k = 0; k < H; k++)
						hn[k] = gx[k];
				} else {
					for (int64_t k = 0; k < H; k++) {
						double pi = pp ? mi_ops_rd(pp, di * 3 * H + k) : 0;
						double po = pp ? mi_ops_rd(pp, di * 3 * H + H + k) : 0;
						double pf = pp ? mi_ops_rd(pp, di * 3 * H + 2 * H + k) : 0;
						double ig = act(af[0], clipv(&r, gx[k] + gh[k] + pi * c[k]));
						double fg = act(af[0], clipv(&r, gx[2 * H + k] + gh[2 * H + k] + pf * c[k]));
						double cg = act(af[1], clipv(&r, gx[3 * H + k] + gh[3 * H + k]));
						double cn = fg * c[k] + ig * cg;
						double og = act(af[0], clipv(&r, gx[H + k] + gh[H + k] + po * cn));

						c[k] = cn;
						hn[k] = og * act(af[2], cn);
					}
				}
				memcpy(h, hn, H * sizeof(double));
				if (y && y->data)
					for (int64_t k = 0; k < H; k++)
						mi_ops_wr(y, r.layout ?
							  ((b * T + t) * r.ndir + di) * H + k :
							  ((t * r.ndir + di) * B + b) * H + k,
							  h[k]);
			}
			for (int64_t k = 0; k < H; k++) {
				int64_t si = r.layout ? (b * r.ndir + di) * H + k :
							(di * B + b) * H + k;

				if (yh && yh->data)
					mi_ops_wr(yh, si, h[k]);
				if (yc && yc->data)
					mi_ops_wr(yc, si, c[k]);
			}
		}
	}
out:
	free(h);
	free(c);
	free(hn);
	free(gx);
	free(gh);
	return ret;
}

const struct mi_op_def mi_ops_rnn[] = {
	{ "RNN", "", 3, 6, 0, 2, rnn_infer, rnn_run },
	{ "GRU", "", 3, 6, 0, 2, rnn_infer, rnn_run },
	{ "LSTM", "", 3, 8, 0, 3, rnn_infer, rnn_run },
	{ NULL }
};
