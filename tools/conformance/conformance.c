// SPDX-License-Identifier: GPL-2.0-only
/*
 * mi-conformance: run the ONNX backend test cases (model.onnx plus
 * test_data_set_N/{input,output}_K.pb) through libmetainfer.
 *
 * Per case it prints PASS, FAIL (with the largest error) or UNSUPPORTED
 * (op or attribute MetaInfer lacks), and closes with
 * "N passed, N failed, N skipped" and the unsupported ops by count.
 * Values are compared like ONNX's backend tests (numpy.testing
 * assert_allclose): |got - want| <= abs_tol + rel_tol * |want|, rel_tol 1e-3,
 * abs_tol 1e-7; integers and booleans exactly; NaN equals NaN.
 *
 * Each case runs in a forked child so that a crashing or hanging kernel is
 * reported as a FAIL of that case instead of ending the run.
 * Exit status: 0 when nothing failed, 1 otherwise, 2 on usage errors.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "ops/ops.h"

#define DEFAULT_ROOT "/usr/share/libonnx-testdata/data"

static double rel_tol = 1e-3, abs_tol = 1e-7;
static int reference, verbose, timeout_s = 120;

/* Known failures: "<suite>/<case>  <why>" per line, '#' comments. */
struct xfail {
	char name[160];
	bool seen;
};
static struct xfail xfails[128];
static int nxfails;

static int load_xfail(const char *path)
{
	FILE *f = fopen(path, "r");
	char line[512];

	if (!f) {
		fprintf(stderr, "mi-conformance: %s: %s\n", path, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		char name[160];

		if (line[0] == '#' || sscanf(line, "%159s", name) != 1)
			continue;
		if (!strchr(line + strlen(name), '#') &&
		    strspn(line + strlen(name), " \t\n") ==
			    strlen(line + strlen(name))) {
			fprintf(stderr,
				"mi-conformance: %s: '%s' has no justification\n",
				path, name);
			fclose(f);
			return -1;
		}
		if (nxfails < 128)
			snprintf(xfails[nxfails++].name, sizeof(xfails[0].name),
				 "%s", name);
	}
	fclose(f);
	return 0;
}

static struct xfail *find_xfail(const char *label)
{
	for (int i = 0; i < nxfails; i++)
		if (!strcmp(xfails[i].name, label))
			return &xfails[i];
	return NULL;
}

enum { R_PASS, R_FAIL, R_UNSUP };

struct result {
	int kind;
	char msg[900];
	char op[64];
};

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted entries of dir starting with prefix (NULL: all but dot-files). */
static int list_dir(const char *dir, const char *prefix, char ***out)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char **v = NULL;
	int n = 0, cap = 0;

	*out = NULL;
	if (!d)
		return -errno;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		if (prefix && strncmp(e->d_name, prefix, strlen(prefix)))
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 64;
			char **nv = realloc(v, cap * sizeof(*v));

			if (!nv)
				break;
			v = nv;
		}
		v[n++] = strdup(e->d_name);
	}
	closedir(d);
	/* numeric order for input_10 after input_9 */
	qsort(v, n, sizeof(*v), cmp_str);
	*out = v;
	return n;
}

static void free_list(char **v, int n)
{
	for (int i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/* Index in "input_12.pb" -> 12 */
static int pb_index(const char *name)
{
	const char *u = strrchr(name, '_');

	return u ? atoi(u + 1) : 0;
}

static int cmp_pb(const void *a, const void *b)
{
	return pb_index(*(char *const *)a) - pb_index(*(char *const *)b);
}

/* Guess the op a message is about: "node 'x' (Op): ..." -> "Op". */
static void op_from_msg(const char *msg, char *op, size_t len)
{
	const char *p = strstr(msg, "node ");
	const char *l, *r;

	op[0] = 0;
	if (!p)
		p = msg;
	l = strstr(p, " (");
	r = l ? strstr(l, "): ") : NULL;
	if (l && r && (size_t)(r - l - 2) < len)
		snprintf(op, len, "%.*s", (int)(r - l - 2), l + 2);
}

static double elem(const struct mi_tensor *t, int64_t i)
{
	if (t->dtype == MI_DT_FLOAT16)
		return mi_half_to_float(((const uint16_t *)t->data)[i]);
	if (t->dtype == MI_DT_BFLOAT16)
		return mi_bf16_to_float(((const uint16_t *)t->data)[i]);
	return mi_tensor_get_f64(t, i);
}

static bool is_float(int dt)
{
	return dt == MI_DT_FLOAT || dt == MI_DT_DOUBLE ||
	       dt == MI_DT_FLOAT16 || dt == MI_DT_BFLOAT16;
}

static void shape_str(int ndim, const int64_t *d, char *buf, size_t len)
{
	int o = snprintf(buf, len, "[");

	for (int i = 0; i < ndim && o < (int)len; i++)
		o += snprintf(buf + o, len - o, "%s%lld", i ? "," : "",
			      (long long)d[i]);
	if (o < (int)len)
		snprintf(buf + o, len - o, "]");
}

/* 0 if equal within tolerance, else 1 with msg filled. */
static int compare(const struct mi_value *got, const struct mi_tensor *want,
		   int k, char *msg, size_t len)
{
	struct mi_tensor g = { .dtype = got->dtype, .ndim = got->ndim,
			       .data = got->data };
	char s1[128], s2[128];
	double worst = 0, worst_rel = 0;
	int64_t n, bad = 0, at = -1;

	memcpy(g.dims, got->dims, sizeof(g.dims));
	if (got->dtype != want->dtype) {
		snprintf(msg, len, "output %d '%s': dtype %s, expected %s", k,
			 got->name, mi_dtype_name(got->dtype),
			 mi_dtype_name(want->dtype));
		return 1;
	}
	if (got->ndim != want->ndim ||
	    memcmp(got->dims, want->dims, got->ndim * sizeof(int64_t))) {
		shape_str(got->ndim, got->dims, s1, sizeof(s1));
		shape_str(want->ndim, want->dims, s2, sizeof(s2));
		snprintf(msg, len, "output %d '%s': shape %s, expected %s", k,
			 got->name, s1, s2);
		return 1;
	}
	n = mi_tensor_numel(&g);
	for (int64_t i = 0; i < n; i++) {
		double a = elem(&g, i), b = elem(want, i);
		double err, tol;

		if (!is_float(want->dtype)) {
			if (mi_tensor_get_i64(&g, i) != mi_tensor_get_i64(want, i)) {
				if (!bad++)
					at = i;
				err = fabs(a - b);
				if (err > worst)
					worst = err;
			}
			continue;
		}
		if (isnan(a) && isnan(b))
			continue;
		if (isinf(b) && a == b)
			continue;
		err = fabs(a - b);
		tol = abs_tol + rel_tol * fabs(b);
		if (!(err <= tol)) {
			if (!bad++ || err > worst)
				at = i;
			if (!(err <= worst))
				worst = err;
			if (fabs(b) > 0 && err / fabs(b) > worst_rel)
				worst_rel = err / fabs(b);
		}
	}
	if (!bad)
		return 0;
	snprintf(msg, len,
		 "output %d '%s': %lld of %lld elements differ, max abs err %.3g (max rel %.3g) e.g. at %lld: got %.9g expected %.9g",
		 k, got->name, (long long)bad, (long long)n, worst, worst_rel,
		 (long long)at, elem(&g, at), elem(want, at));
	return 1;
}

static void run_case(const char *dir, struct result *r)
{
	char path[4096], ebuf[600];
	struct mi_model_opts mo = { 0 };
	struct mi_model *m = NULL;
	char **sets = NULL;
	int nsets, err;

	r->kind = R_FAIL;
	snprintf(path, sizeof(path), "%s/model.onnx", dir);
	if (reference)
		mo.flags |= MI_MODEL_REFERENCE;
	err = mi_model_load(path, &mo, &m);
	if (err) {
		const char *e = mi_last_error();
		const char *rel = strstr(e, "model.onnx: ");

		snprintf(r->msg, sizeof(r->msg), "%s", rel ? rel + 12 : e);
		op_from_msg(r->msg, r->op, sizeof(r->op));
		if (err == -EOPNOTSUPP)
			r->kind = R_UNSUP;
		return;
	}
	nsets = list_dir(dir, "test_data_set_", &sets);
	if (nsets <= 0) {
		snprintf(r->msg, sizeof(r->msg), "no test_data_set_* directories");
		goto out;
	}
	for (int s = 0; s < nsets; s++) {
		char sd[2048], **files = NULL;
		int nf, nin = 0, nout = 0;
		struct mi_tensor ins[64], want[64];
		struct mi_value vin[64], vout[64];

		memset(ins, 0, sizeof(ins));
		memset(want, 0, sizeof(want));
		snprintf(sd, sizeof(sd), "%s/%s", dir, sets[s]);
		nf = list_dir(sd, NULL, &files);
		if (nf < 0) {
			snprintf(r->msg, sizeof(r->msg), "%s: unreadable", sets[s]);
			goto out;
		}
		qsort(files, nf, sizeof(*files), cmp_pb);
		err = 0;
		for (int i = 0; i < nf && !err; i++) {
			bool is_in = !strncmp(files[i], "input_", 6);
			bool is_out = !strncmp(files[i], "output_", 7);
			struct mi_tensor *t;

			if (!is_in && !is_out)
				continue;
			if ((is_in ? nin : nout) >= 64) {
				err = -E2BIG;
				snprintf(r->msg, sizeof(r->msg), "too many tensors");
				break;
			}
			t = is_in ? &ins[nin++] : &want[nout++];
			snprintf(path, sizeof(path), "%s/%s", sd, files[i]);
			err = mi_onnx_read_tensor(path, t, ebuf, sizeof(ebuf));
			if (err) {
				const char *b = strrchr(ebuf, '/');

				snprintf(r->msg, sizeof(r->msg), "%s/%s", sets[s],
					 b ? b + 1 : ebuf);
				/* sequences, optionals, strings */
				if (err == -EOPNOTSUPP || err == -EINVAL) {
					r->kind = R_UNSUP;
					snprintf(r->op, sizeof(r->op),
						 "(non-tensor or string data)");
				}
			}
		}
		free_list(files, nf);
		if (!err && nin != mi_model_input_count(m)) {
			snprintf(r->msg, sizeof(r->msg),
				 "%s has %d inputs, the model %d", sets[s], nin,
				 mi_model_input_count(m));
			err = -EINVAL;
		}
		if (!err && nout > mi_model_output_count(m)) {
			snprintf(r->msg, sizeof(r->msg),
				 "%s has %d outputs, the model %d", sets[s],
				 nout, mi_model_output_count(m));
			err = -EINVAL;
		}
		if (!err) {
			for (int i = 0; i < nin; i++) {
				struct mi_tensor_info ii;

				/* ONNX stores bfloat16 test data as uint16 */
				if (!mi_model_input_info(m, i, &ii) &&
				    ii.dtype == MI_DT_BFLOAT16 &&
				    ins[i].dtype == MI_DT_UINT16)
					ins[i].dtype = MI_DT_BFLOAT16;
				memset(&vin[i], 0, sizeof(vin[i]));
				vin[i].dtype = ins[i].dtype;
				vin[i].ndim = ins[i].ndim;
				memcpy(vin[i].dims, ins[i].dims,
				       sizeof(vin[i].dims));
				vin[i].data = ins[i].data;
				vin[i].nbytes = ins[i].nbytes;
			}
			err = mi_model_run(m, vin, nin, vout, nout);
			if (err) {
				const char *e = mi_last_error();
				const char *rel = strstr(e, "model.onnx: ");

				snprintf(r->msg, sizeof(r->msg), "%s: %s",
					 sets[s], rel ? rel + 12 : e);
				op_from_msg(r->msg, r->op, sizeof(r->op));
				if (err == -EOPNOTSUPP)
					r->kind = R_UNSUP;
			}
		}
		for (int i = 0; !err && i < nout; i++) {
			char cm[700];

			if (vout[i].dtype == MI_DT_BFLOAT16 &&
			    want[i].dtype == MI_DT_UINT16)
				want[i].dtype = MI_DT_BFLOAT16;
			if (compare(&vout[i], &want[i], i, cm, sizeof(cm))) {
				snprintf(r->msg, sizeof(r->msg), "%s: %s",
					 sets[s], cm);
				err = -EDOM;
			}
		}
		for (int i = 0; i < nin; i++)
			mi_tensor_fini(&ins[i]);
		for (int i = 0; i < nout; i++)
			mi_tensor_fini(&want[i]);
		if (err)
			goto out;
	}
	r->kind = R_PASS;
out:
	free_list(sets, nsets > 0 ? nsets : 0);
	mi_model_free(m);
}

/* Fork, run the case in the child, read its result back. */
static void run_isolated(const char *dir, struct result *r)
{
	int fds[2];
	pid_t pid;
	int status;
	ssize_t got = 0;

	memset(r, 0, sizeof(*r));
	if (pipe(fds)) {
		run_case(dir, r);
		return;
	}
	fflush(stdout);
	pid = fork();
	if (pid < 0) {
		close(fds[0]);
		close(fds[1]);
		run_case(dir, r);
		return;
	}
	if (!pid) {
		close(fds[0]);
		alarm(timeout_s);
		run_case(dir, r);
		ssize_t w = write(fds[1], r, sizeof(*r));

		_exit(w == sizeof(*r) ? 0 : 3);
	}
	close(fds[1]);
	while (got < (ssize_t)sizeof(*r)) {
		ssize_t n = read(fds[0], (char *)r + got, sizeof(*r) - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += n;
	}
	close(fds[0]);
	waitpid(pid, &status, 0);
	if (got != sizeof(*r)) {
		memset(r, 0, sizeof(*r));
		r->kind = R_FAIL;
		if (WIFSIGNALED(status))
			snprintf(r->msg, sizeof(r->msg), "crashed: %s%s",
				 strsignal(WTERMSIG(status)),
				 WTERMSIG(status) == SIGALRM ? " (timeout)" :
							       "");
		else
			snprintf(r->msg, sizeof(r->msg),
				 "runner child exited with %d",
				 WEXITSTATUS(status));
	}
	r->msg[sizeof(r->msg) - 1] = 0;
	r->op[sizeof(r->op) - 1] = 0;
}

struct unsup {
	char op[64];
	int count;
};

static int cmp_unsup(const void *a, const void *b)
{
	const struct unsup *x = a, *y = b;

	return x->count != y->count ? y->count - x->count :
				      strcmp(x->op, y->op);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: mi-conformance [options] [CASE_DIR | SUITE_DIR]...\n"
		"\n"
		"Without directories: every case under " DEFAULT_ROOT "/{node,\n"
		"pytorch-converted,pytorch-operator,simple}.\n"
		"\n"
		"  -f, --filter SUBSTR  only cases whose path contains SUBSTR (repeatable)\n"
		"  -r, --reference      reference kernels only\n"
		"  -q, --quiet          print only FAIL lines and the summary\n"
		"  -v, --verbose        also print why cases are UNSUPPORTED\n"
		"      --rtol X --atol X  tolerances (default 1e-3, 1e-7)\n"
		"      --timeout S      per-case limit in seconds (default 120)\n"
		"      --xfail FILE     known failures, one '<suite>/<case> # why' per\n"
		"                       line; they print XFAIL and do not fail the run\n"
		"  -h, --help\n");
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "filter", required_argument, NULL, 'f' },
		{ "reference", no_argument, NULL, 'r' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "rtol", required_argument, NULL, 'R' },
		{ "atol", required_argument, NULL, 'A' },
		{ "timeout", required_argument, NULL, 'T' },
		{ "xfail", required_argument, NULL, 'X' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	static const char *const suites[] = { "node", "pytorch-converted",
					      "pytorch-operator", "simple" };
	const char *filters[32];
	int nfilters = 0, quiet = 0, c;
	char **cases = NULL;
	int ncases = 0, cap = 0;
	int npass = 0, nfail = 0, nskip = 0, nxfail = 0;
	struct unsup *us = NULL;
	int nus = 0;
	double t0;
	struct timespec ts;

	while ((c = getopt_long(argc, argv, "f:rqvh", lopts, NULL)) != -1) {
		switch (c) {
		case 'f':
			if (nfilters < 32)
				filters[nfilters++] = optarg;
			break;
		case 'r':
			reference = 1;
			break;
		case 'q':
			quiet = 1;
			break;
		case 'v':
			verbose = 1;
			break;
		case 'R':
			rel_tol = atof(optarg);
			break;
		case 'A':
			abs_tol = atof(optarg);
			break;
		case 'T':
			timeout_s = atoi(optarg);
			break;
		case 'X':
			if (load_xfail(optarg))
				return 2;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}

	/* Collect case directories. */
	int nroots = argc - optind;
	char *roots[256];

	if (!nroots) {
		for (size_t i = 0; i < 4; i++) {
			char p[4096];

			snprintf(p, sizeof(p), "%s/%s", DEFAULT_ROOT, suites[i]);
			roots[nroots++] = strdup(p);
		}
	} else {
		if (nroots > 256)
			nroots = 256;
		for (int i = 0; i < nroots; i++)
			roots[i] = strdup(argv[optind + i]);
	}
	for (int i = 0; i < nroots; i++) {
		char p[4096];
		struct stat st;
		char **ents;
		int n;

		snprintf(p, sizeof(p), "%s/model.onnx", roots[i]);
		if (!stat(p, &st)) {
			if (ncases == cap) {
				cap = cap ? 2 * cap : 1024;
				cases = realloc(cases, cap * sizeof(*cases));
			}
			cases[ncases++] = strdup(roots[i]);
			continue;
		}
		n = list_dir(roots[i], NULL, &ents);
		if (n < 0) {
			fprintf(stderr, "mi-conformance: %s: %s\n", roots[i],
				strerror(-n));
			return 2;
		}
		for (int k = 0; k < n; k++) {
			snprintf(p, sizeof(p), "%s/%s/model.onnx", roots[i],
				 ents[k]);
			if (stat(p, &st))
				continue;
			if (ncases == cap) {
				cap = cap ? 2 * cap : 1024;
				cases = realloc(cases, cap * sizeof(*cases));
			}
			snprintf(p, sizeof(p), "%s/%s", roots[i], ents[k]);
			cases[ncases++] = strdup(p);
		}
		free_list(ents, n);
	}
	us = calloc(ncases + 1, sizeof(*us));
	clock_gettime(CLOCK_MONOTONIC, &ts);
	t0 = ts.tv_sec + ts.tv_nsec / 1e9;

	for (int i = 0; i < ncases; i++) {
		const char *name = cases[i];
		struct result r;
		const char *label;
		bool keep = !nfilters;

		for (int f = 0; f < nfilters; f++)
			if (strstr(name, filters[f]))
				keep = true;
		if (!keep)
			continue;
		/* "node/test_abs" from ".../data/node/test_abs" */
		label = name + strlen(name);
		for (int slashes = 0; label > name; label--)
			if (label[-1] == '/' && ++slashes == 2)
				break;
		run_isolated(name, &r);
		switch (r.kind) {
		case R_PASS:
			if (find_xfail(label))
				printf("XPASS %s: listed as a known failure but passes; remove it from the list\n",
				       label);
			npass++;
			if (!quiet)
				printf("PASS %s\n", label);
			break;
		case R_FAIL:
			if (find_xfail(label)) {
				nxfail++;
				printf("XFAIL %s: %s\n", label, r.msg);
				break;
			}
			nfail++;
			printf("FAIL %s: %s\n", label, r.msg);
			break;
		default: {
			int k;

			nskip++;
			if (!r.op[0])
				snprintf(r.op, sizeof(r.op), "%s",
					 strstr(r.msg, "data type string") ?
						 "(string tensors)" :
					 strstr(r.msg, "only tensor inputs") ?
						 "(sequence/optional values)" :
					 strstr(r.msg, "opset") ? "(opset)" :
								  "?");
			for (k = 0; k < nus; k++)
				if (!strcmp(us[k].op, r.op))
					break;
			if (k == nus)
				snprintf(us[nus++].op, sizeof(us[0].op), "%s",
					 r.op);
			us[k].count++;
			if (!quiet)
				printf("UNSUPPORTED %s: %s%s%s\n", label, r.op,
				       verbose ? " -- " : "",
				       verbose ? r.msg : "");
			break;
		}
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &ts);
	qsort(us, nus, sizeof(*us), cmp_unsup);
	if (nus) {
		printf("unsupported (cases):");
		for (int k = 0; k < nus; k++)
			printf(" %s(%d)", us[k].op, us[k].count);
		printf("\n");
	}
	if (nxfail)
		printf("%d known failures (--xfail)\n", nxfail);
	printf("%d passed, %d failed, %d skipped (%.1f s)\n", npass, nfail,
	       nskip, ts.tv_sec + ts.tv_nsec / 1e9 - t0);
	for (int i = 0; i < ncases; i++)
		free(cases[i]);
	for (int i = 0; i < nroots; i++)
		free(roots[i]);
	free(cases);
	free(us);
	return nfail ? 1 : 0;
}
