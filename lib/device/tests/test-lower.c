// SPDX-License-Identifier: MIT
/*
 * check-lower: quantized units lowered to the command stream and run on
 * emulated devices (lib/device/emu.c), host only.
 *
 *   test-lower DIR [INPUTS [MODEL.int8.onnx ...]]
 *
 * DIR holds gen-lower.py's models.  For every op-form model (one unit
 * each), on an NCHW and an NHWC device: random 8-bit inputs; the lowered
 * job run on the device must equal mi_ref_run on the same buffer images
 * byte for byte (with the inputs rebound to a third buffer, so
 * mi_lower_rebind is covered), and differ from the float QDQ graph run by
 * the reference ops by at most one quantization step.  Then a device
 * without LUT / int16 must refuse the units that need them, with a reason.
 * Last, the quantized networks net-cnn.int8.onnx and net-mlp.int8.onnx:
 * every supported unit lowered (consecutive units in one job) and the rest
 * run by the reference ops, against the CPU int8 path (mi_model_run) on
 * INPUTS seeded random inputs: cosine and top-1 agreement; the same for
 * any further quantized models named.
 */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "device/device.h"
#include "device/lower.h"
#include "device/lower-impl.h"
#include "device/mi_ref.h"
#include "internal.h"

static int failures;

#define FAIL(...)                                 \
	do {                                      \
		fprintf(stderr, "FAIL: " __VA_ARGS__); \
		fputc('\n', stderr);              \
		failures++;                       \
	} while (0)

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint32_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(rng_state >> 11);
}

static struct mi_dev *dev_nchw, *dev_nhwc, *dev_min, *dev_none;

static struct mi_dev_caps caps_all(uint32_t pref)
{
	struct mi_dev_caps c = { 0 };

	for (int op = 1; op < DRM_METAINFER_OP_COUNT; op++)
		c.op_mask |= 1ull << op;
	for (int dt = 1; dt < DRM_METAINFER_DTYPE_COUNT; dt++)
		c.dtype_mask |= 1ull << dt;
	c.layout_mask = 1u << DRM_METAINFER_LAYOUT_PLAIN | 1u << DRM_METAINFER_LAYOUT_NCHW |
			1u << DRM_METAINFER_LAYOUT_NHWC;
	c.preferred_layout = pref;
	c.num_queues = 1;
	return c;
}

/* Run the node on the CPU with its reference op. */
static int run_node(struct mi_graph *g, int ni)
{
	struct mi_node *n = &g->nodes[ni];
	int err;

	for (int j = 0; j < n->noutputs; j++) {
		err = mi_tensor_alloc(mi_out(g, n, j));
		if (err)
			return err;
	}
	err = n->def->run(g, n);
	if (err)
		fprintf(stderr, "node %s (%s): %s\n", n->name, n->op_type, g->err);
	return err;
}

/*
 * Run job on dev with the tensors' bytes from g; OUTPUT tensors written
 * back to g.  The device's result must equal mi_ref_run on copies of the
 * same images, byte for byte.  rebind: move the INPUT tensors into a
 * third buffer first.
 */
static int run_job(struct mi_dev *dev, struct mi_lower_job *job, struct mi_graph *g,
		   bool rebind)
{
	struct mi_dev_bo *bo[3] = { NULL, NULL, NULL };
	struct mi_ref_buf img[3];
	size_t in_bytes = 64;
	int nbo = 2, err;

	if (rebind) {
		for (int i = 0; i < job->nt; i++) {
			if (job->t[i].role != MI_LT_INPUT)
				continue;
			err = mi_lower_rebind(job, i, 2, in_bytes);
			if (err)
				return err;
			in_bytes += (job->t[i].bytes + 63) & ~(size_t)63;
		}
		nbo = 3;
	}
	if ((err = mi_dev_bo_alloc(dev, job->const_bytes, &bo[0])) ||
	    (err = mi_dev_bo_alloc(dev, job->act_bytes, &bo[1])) ||
	    (rebind && (err = mi_dev_bo_alloc(dev, in_bytes, &bo[2]))))
		goto out;
	for (int i = 0; i < nbo; i++)
		memset(bo[i]->map, 0xa5, bo[i]->size); /* stale bytes */
	for (int i = 0; i < job->nt; i++) {
		const struct mi_lower_tensor *t = &job->t[i];
		uint8_t *dst = (uint8_t *)bo[t->bo_index]->map + t->offset;

		if (t->role == MI_LT_CONST)
			memcpy(dst, t->data, t->bytes);
		if (t->role == MI_LT_INPUT) {
			const struct mi_tensor *gt = &g->tensors[t->graph_tensor];

			if (gt->nbytes != t->bytes || !gt->data) {
				FAIL("input %s: %zu bytes in the graph, %zu in the job", gt->name,
				     gt->nbytes, t->bytes);
				err = -EINVAL;
				goto out;
			}
			memcpy(dst, gt->data, t->bytes);
		}
	}
	for (int i = 0; i < nbo; i++) {
		img[i].size = bo[i]->size;
		img[i].data = malloc(img[i].size);
		memcpy(img[i].data, bo[i]->map, img[i].size);
	}
	struct mi_dev_bo *const bos[3] = { bo[0], bo[1], bo[2] };
	struct mi_dev_job dj = { .cmds = job->cmds, .cmds_size = job->cmds_size,
				 .bos = bos, .nbos = nbo };
	struct mi_dev_job *djp = &dj;

	err = dev->ops->submit(dev, &djp, 1);
	if (!err)
		err = dev->ops->wait(dev, &dj, -1);
	if (!err)
		err = dj.status;
	dev->ops->job_release(dev, &dj);
	if (!err) {
		int r = mi_ref_run(job->cmds, job->cmds_size, img, nbo);

		if (r)
			FAIL("mi_ref_run: %d", r);
		for (int i = 0; i < nbo && !r; i++)
			if (memcmp(img[i].data, bo[i]->map, img[i].size))
				FAIL("%s: buffer %d differs from mi_ref_run", dev->name, i);
	}
	for (int i = 0; i < nbo; i++)
		free(img[i].data);
	if (err) {
		FAIL("%s: job failed: %d (%s)", dev->name, err, mi_last_error());
		goto out;
	}
	for (int i = 0; i < job->nt; i++) {
		const struct mi_lower_tensor *t = &job->t[i];
		struct mi_tensor *gt;

		if (t->role != MI_LT_OUTPUT)
			continue;
		gt = &g->tensors[t->graph_tensor];
		err = mi_tensor_alloc(gt);
		if (err || gt->nbytes != t->bytes) {
			FAIL("output %s: size", gt->name);
			err = -EINVAL;
			goto out;
		}
		memcpy(gt->data, (uint8_t *)bo[t->bo_index]->map + t->offset, t->bytes);
	}
out:
	for (int i = 0; i < 3; i++)
		mi_dev_bo_free(bo[i]);
	return err;
}

static struct mi_model *load_graph(const char *path)
{
	struct mi_model *m;

	if (mi_model_load_graph(path, NULL, &m)) {
		FAIL("%s: %s", path, mi_last_error());
		return NULL;
	}
	if (mi_model_infer_shapes(m, NULL, NULL)) {
		FAIL("%s: shapes: %s", path, m->g.err);
		mi_model_free(m);
		return NULL;
	}
	return m;
}

static bool is_dq(const struct mi_node *n)
{
	return !strcmp(n->op_type, "DequantizeLinear");
}

/* ---- one op form ------------------------------------------------------- */

struct form_stats {
	int models, runs, elems, off1;
};

static void test_form(const char *path, const char *form, struct form_stats *st)
{
	struct mi_dev *devs[2] = { dev_nchw, dev_nhwc };
	struct mi_model *m = load_graph(path);
	struct mi_graph *g;
	struct mi_qunit *units = NULL;
	int nu = 0;

	if (!m)
		return;
	g = &m->g;
	if (mi_qunits_find(g, &units, &nu) || nu != 1) {
		FAIL("%s: %d quantized units, expected 1", path, nu);
		goto out;
	}
	st->models++;
	for (int d = 0; d < 2; d++) {
		const struct mi_qunit *up = &units[0];
		struct mi_lower_job *job;
		char why[256];
		int out = units[0].output;
		uint8_t *ref;
		size_t nb;

		if (!mi_qunit_supported(g, up, &devs[d]->caps, why, sizeof(why))) {
			FAIL("%s on %s: not supported: %s", path, devs[d]->name, why);
			continue;
		}
		/* random quantized inputs, then the float graph */
		for (int i = 0; i < g->ninputs; i++) {
			struct mi_tensor *t = &g->tensors[g->inputs[i]];

			if (mi_tensor_alloc(t))
				goto out;
			for (size_t k = 0; k < t->nbytes; k++)
				((uint8_t *)t->data)[k] = (uint8_t)rnd();
		}
		for (int p = 0; p < g->norder; p++)
			if (run_node(g, g->order[p])) {
				FAIL("%s: float reference failed", path);
				goto out;
			}
		nb = g->tensors[out].nbytes;
		ref = malloc(nb);
		memcpy(ref, g->tensors[out].data, nb);
		memset(g->tensors[out].data, 0x5a, nb);
		if (mi_lower_job(g, &up, 1, &devs[d]->caps, &job)) {
			FAIL("%s: lower: %s", path, mi_last_error());
			free(ref);
			continue;
		}
		if (!run_job(devs[d], job, g, true)) {
			const struct mi_tensor *t = &g->tensors[out];
			int off = 0, worst = 0;

			for (size_t k = 0; k < nb; k++) {
				int a = t->dtype == MI_DT_INT8 ? ((int8_t *)t->data)[k] :
								 ((uint8_t *)t->data)[k];
				int r = t->dtype == MI_DT_INT8 ? ((int8_t *)ref)[k] : ref[k];
				int e = abs(a - r);

				off += e == 1;
				worst = e > worst ? e : worst;
			}
			if (worst > 1)
				FAIL("%s on %s: %d steps from the float QDQ graph", path,
				     devs[d]->name, worst);
			st->runs++;
			st->elems += nb;
			st->off1 += off;
		}
		mi_lower_job_free(job);
		free(ref);
	}
	/* a device without LUT and int16 must say why it cannot */
	{
		char why[256] = "";
		bool ok = mi_qunit_supported(g, &units[0], &dev_min->caps, why, sizeof(why));
		bool lut = !strcmp(form, "lut");

		if (lut && (ok || !strstr(why, "LUT")))
			FAIL("%s: a device without LUT: supported %d (%s)", path, ok, why);
		if (!lut && !ok && !strstr(why, "int16"))
			FAIL("%s: refused by the minimal device: %s", path, why);
	}
out:
	free(units);
	mi_model_free(m);
}

/* ---- whole networks ------------------------------------------------------ */

/* Run g with every unit dev supports lowered (runs of consecutive units
 * in one job) and everything else by the reference ops; counts units
 * lowered and jobs. */
static int run_hybrid(struct mi_graph *g, struct mi_qunit *units, int nu, struct mi_dev *dev,
		      int *nlowered, int *njobs)
{
	int *unit_of = malloc(g->nnodes * sizeof(int)), *pend = malloc(g->nnodes * sizeof(int));
	const struct mi_qunit **cur = malloc(nu * sizeof(*cur));
	int npend = 0, ncur = 0, err = 0;

	for (int i = 0; i < g->nnodes; i++)
		unit_of[i] = -1;
	*nlowered = *njobs = 0;
	for (int u = 0; u < nu; u++) {
		char why[256];

		if (!mi_qunit_supported(g, &units[u], &dev->caps, why, sizeof(why)))
			continue;
		for (int i = 0; i < units[u].nmembers; i++)
			if (!is_dq(&g->nodes[units[u].members[i]]))
				unit_of[units[u].members[i]] = u;
	}
	for (int p = 0; p <= g->norder && !err; p++) {
		int ni = p < g->norder ? g->order[p] : -1;

		if (ni >= 0 && is_dq(&g->nodes[ni])) {
			if (ncur)
				pend[npend++] = ni;
			else
				err = run_node(g, ni);
			continue;
		}
		if (ni >= 0 && unit_of[ni] >= 0) {
			const struct mi_qunit *u = &units[unit_of[ni]];

			bool have = false;

			/* members of one unit need not be adjacent in order */
			for (int i = 0; i < ncur; i++)
				have |= cur[i] == u;
			if (!have)
				cur[ncur++] = u;
			continue;
		}
		if (ncur) {
			struct mi_lower_job *job;

			err = mi_lower_job(g, cur, ncur, &dev->caps, &job);
			if (err) {
				FAIL("lower %d units: %s", ncur, mi_last_error());
				break;
			}
			err = run_job(dev, job, g, false);
			mi_lower_job_free(job);
			*nlowered += ncur;
			(*njobs)++;
			ncur = 0;
			/* a DQ whose input stayed inside the job has no
			 * reader outside it either */
			for (int i = 0; i < npend && !err; i++)
				if (mi_in(g, &g->nodes[pend[i]], 0)->data)
					err = run_node(g, pend[i]);
			npend = 0;
		}
		if (ni >= 0 && !err)
			err = run_node(g, ni);
	}
	free(unit_of);
	free(pend);
	free(cur);
	return err;
}

static void test_net(const char *dir, const char *name, int ninputs)
{
	char path[4096];
	struct mi_model *cpu = NULL, *h;
	struct mi_qunit *units = NULL;
	int nu = 0, nq = 0;

	snprintf(path, sizeof(path), "%s%s%s", dir ? dir : "", dir ? "/" : "", name);
	h = load_graph(path);
	if (!h)
		return;
	if (mi_model_load(path, NULL, &cpu)) {
		FAIL("%s: %s", path, mi_last_error());
		goto out;
	}
	if (mi_qunits_find(&h->g, &units, &nu))
		goto out;
	for (int i = 0; i < h->g.nnodes; i++)
		nq += !h->g.nodes[i].dead && !strcmp(h->g.nodes[i].op_type, "QuantizeLinear");
	/* d == 2: a device with no ops, i.e. the reference ops alone: the
	 * baseline the lowered runs are judged against */
	for (int d = 0; d < 3; d++) {
		struct mi_dev *dev = d == 2 ? dev_none : d ? dev_nhwc : dev_nchw;
		double cmin = 1, csum = 0;
		int same = 0, rows = 0, nl = 0, nj = 0;

		for (int s = 0; s < ninputs; s++) {
			struct mi_graph *g = &h->g;
			struct mi_tensor *x = &g->tensors[g->inputs[0]];
			struct mi_tensor *y = &g->tensors[g->outputs[0]];
			struct mi_value in = { 0 }, out = { 0 };
			float *xv;

			rng_state = 0x1234567ull + s * 7919;
			if (mi_tensor_alloc(x))
				goto out;
			xv = x->data;
			for (int64_t i = 0; i < mi_tensor_numel(x); i++)
				xv[i] = (float)(rnd() % 20001) / 10000.0f - 1.0f;
			in.dtype = MI_DT_FLOAT;
			in.ndim = x->ndim;
			memcpy(in.dims, x->dims, sizeof(in.dims));
			in.data = x->data;
			in.nbytes = x->nbytes;
			if (mi_model_run(cpu, &in, 1, &out, 1)) {
				FAIL("%s: CPU run: %s", name, mi_last_error());
				goto out;
			}
			if (run_hybrid(g, units, nu, dev, &nl, &nj)) {
				FAIL("%s: lowered run failed", name);
				goto out;
			}
			const float *a = out.data, *b = y->data;
			int64_t n = mi_tensor_numel(y), cols = y->dims[y->ndim - 1];
			double ab = 0, aa = 0, bb = 0;

			for (int64_t i = 0; i < n; i++) {
				ab += (double)a[i] * b[i];
				aa += (double)a[i] * a[i];
				bb += (double)b[i] * b[i];
			}
			double c = aa > 0 && bb > 0 ? ab / sqrt(aa * bb) : (aa == bb);

			cmin = c < cmin ? c : cmin;
			csum += c;
			for (int64_t r = 0; r < n / cols; r++) {
				int64_t ia = 0, ib = 0;

				for (int64_t k = 1; k < cols; k++) {
					ia = a[r * cols + k] > a[r * cols + ia] ? k : ia;
					ib = b[r * cols + k] > b[r * cols + ib] ? k : ib;
				}
				same += ia == ib;
				rows++;
			}
		}
		printf("  %-18s %-9s %d of %d units lowered (graph has %d Q nodes), %d job(s); "
		       "vs CPU int8: cosine mean %.6f min %.6f, top-1 %d/%d\n",
		       name, dev->name, nl, nu, nq, nj, csum / ninputs, cmin, same, rows);
		if (d == 0) {
			/* what stays on the CPU: nodes no unit stands for */
			printf("  %-18s on the CPU:", name);
			for (int p = 0; p < h->g.norder; p++) {
				int ni = h->g.order[p];
				bool in = false;

				for (int u = 0; u < nu && !in; u++)
					for (int i = 0; i < units[u].nmembers; i++)
						in |= units[u].members[i] == ni;
				if (!in)
					printf(" %s", h->g.nodes[ni].op_type);
			}
			printf("\n");
		}
		if (d == 2)
			continue;
		if (nl != nu)
			FAIL("%s on %s: %d of %d units lowered", name, dev->name, nl, nu);
		if (cmin < 0.999 || same < rows * 0.95)
			FAIL("%s on %s: cosine %.6f, top-1 %d/%d", name, dev->name, cmin, same, rows);
	}
out:
	free(units);
	mi_model_free(cpu);
	mi_model_free(h);
}

/* qu_mult_shift: r == M * 2^(S - 31) to 31 bits, M in [2^30, 2^31),
 * and what the device computes with it (mi_ref_requant) is round(x * r). */
static void test_mult_shift(void)
{
	int bad = 0;

	for (int i = 0; i < 20000; i++) {
		double r = ldexp(1.0 + (rnd() % 1000000) / 1e6, (int)(rnd() % 60) - 40);
		int32_t m, s;
		int64_t x = (int64_t)(rnd() % 200001) - 100000;
		double want = x * r, got;

		if (qu_mult_shift(r, &m, &s)) {
			bad++;
			continue;
		}
		got = (double)mi_ref_requant(x, m, s, 0, INT64_MIN, INT64_MAX);
		/* half a unit of rounding plus the 31-bit multiplier's error */
		bad += (s > -31 && (m < (1 << 30) || fabs(ldexp(m, s - 31) / r - 1) > 1e-9)) ||
		       fabs(got - want) > 0.5 + fabs(want) * 1e-9 + (s <= -31 ? 1 : 0);
	}
	if (bad)
		FAIL("qu_mult_shift: %d of 20000 scales wrong", bad);
	printf("  scales   20000 random real scales as multiplier/shift: %d wrong\n", bad);
}

static const char *const forms[] = {
	"conv", "gemm", "add", "mul", "clip", "requant", "pool", "concat", "lut",
};

int main(int argc, char **argv)
{
	struct mi_dev_caps c;
	const char *dir;
	int ninputs = argc > 2 ? atoi(argv[2]) : 20;
	struct timespec t0, t1;

	if (argc < 2) {
		fprintf(stderr, "usage: %s DIR [INPUTS [MODEL.int8.onnx ...]]\n", argv[0]);
		return 2;
	}
	dir = argv[1];
	clock_gettime(CLOCK_MONOTONIC, &t0);
	c = caps_all(DRM_METAINFER_LAYOUT_NCHW);
	if (mi_dev_emu_add("emu-nchw", &c, &dev_nchw))
		return 1;
	c = caps_all(DRM_METAINFER_LAYOUT_NHWC);
	if (mi_dev_emu_add("emu-nhwc", &c, &dev_nhwc))
		return 1;
	c = caps_all(DRM_METAINFER_LAYOUT_NHWC);
	c.op_mask &= ~(1ull << DRM_METAINFER_OP_LUT);
	c.dtype_mask &= ~(1ull << DRM_METAINFER_DTYPE_INT16);
	if (mi_dev_emu_add("emu-min", &c, &dev_min))
		return 1;
	c.op_mask = 0;
	if (mi_dev_emu_add("reference", &c, &dev_none))
		return 1;

	test_mult_shift();
	for (size_t f = 0; f < sizeof(forms) / sizeof(forms[0]); f++) {
		struct form_stats st = { 0 };
		char path[4096];

		for (int i = 0;; i++) {
			FILE *fp;

			snprintf(path, sizeof(path), "%s/%s-%02d.onnx", dir, forms[f], i);
			fp = fopen(path, "rb");
			if (!fp)
				break;
			fclose(fp);
			test_form(path, forms[f], &st);
		}
		printf("  %-8s %2d models, %3d lowered runs: bit-exact with mi_ref, "
		       "%d of %d outputs one step from the float QDQ graph\n",
		       forms[f], st.models, st.runs, st.off1, st.elems);
		if (!st.models)
			FAIL("no %s models in %s", forms[f], dir);
	}
	test_net(dir, "net-cnn.int8.onnx", ninputs);
	test_net(dir, "net-mlp.int8.onnx", ninputs);
	for (int i = 3; i < argc; i++)
		test_net(NULL, argv[i], ninputs);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("test-lower: %s, %d failure(s), %.1f s\n", failures ? "FAIL" : "ok", failures,
	       (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9);
	return failures ? 1 : 0;
}
