// SPDX-License-Identifier: GPL-2.0-only
/*
 * metainfer plan: write a model's default plan as JSON, or explain it
 * (per node the legal candidates and why the default took one, and the
 * model's hardware intents).  Uses the public API, and the search's
 * intents (plan/search-impl.h) for --explain.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metainfer/metainfer.h"
#include "plan/search-impl.h"

#include "cli.h"

static void usage_plan(FILE *f, const char *prog)
{
	fprintf(f,
		"usage: %s plan MODEL.onnx [options]\n"
		"\n"
		"Write the plan the default rules choose for MODEL (every node's kernel\n"
		"variant, layouts, precision, fused nodes; Documentation/plan.rst).\n"
		"Run it, or an edited one, with '%s run MODEL.onnx --plan FILE'.\n"
		"\n"
		"  -o, --output FILE      write the plan to FILE (default: stdout)\n"
		"  -t, --threads N        plan for N CPU threads (default: online cores)\n"
		"      --isa NAME         widest instruction set: native (default),\n"
		"                         generic, avx2, avx512\n"
		"      --apply FILE       apply the plan in FILE first (then write or\n"
		"                         explain what the model runs)\n"
		"  -e, --explain          print per node the legal candidates and why\n"
		"                         the plan takes the one it runs\n"
		"      --devices LIST     place on these devices too (names as metainfer\n"
		"                         devices prints them, or all) and print the\n"
		"                         placement: per node device, jobs, transfers\n"
		"                         (the JSON only with -o)\n"
		"  -h, --help             this text\n",
		prog, prog);
}

int mi_cli_parse_isa(const char *s, int *isa)
{
	static const char *const names[] = { "native", "generic", "avx2",
					     "avx512" };

	for (int i = 0; i < 4; i++)
		if (!strcmp(s, names[i])) {
			*isa = i; /* enum mi_isa_cap */
			return 0;
		}
	return -EINVAL;
}

int mi_cli_threads_opt(const char *prog, const char *arg, int32_t *n)
{
	char *end;
	long v = strtol(arg, &end, 10);

	if (end == arg || *end || v < 0 || v > 1024) {
		fprintf(stderr, "%s: bad thread count '%s' (expected 0..1024)\n",
			prog, arg);
		return -EINVAL;
	}
	*n = (int32_t)v;
	return 0;
}

int mi_cli_isa_opt(const char *prog, const char *arg, int32_t *isa)
{
	int v;

	if (mi_cli_parse_isa(arg, &v)) {
		fprintf(stderr, "%s: unknown ISA '%s' (native, generic, avx2, avx512)\n",
			prog, arg);
		return -EINVAL;
	}
	*isa = v;
	return 0;
}

static void print_fused(FILE *f, const char *const *fused, int n)
{
	if (!n)
		return;
	fputs(" [fuses", f);
	for (int i = 0; i < n; i++)
		fprintf(f, " %s", fused[i]);
	fputc(']', f);
}

static int explain(FILE *f, struct mi_model *m, const struct mi_plan *p)
{
	struct mi_plan_info info;
	struct mi_intents iv;
	int err;

	/* the intents `metainfer tune` honours (bad ones: the error) */
	err = mi_intents_load(m, NULL, 0, &iv);
	if (err)
		return err;
	mi_plan_info(p, &info);
	fprintf(f, "plan of %s: %d nodes, %d threads, ISA %s, fingerprint %016llx\n",
		info.model, info.nodes, info.threads, info.isa,
		(unsigned long long)info.fingerprint);
	for (int i = 0; i < iv.n; i++) {
		char d[320];

		mi_intent_describe(&iv.v[i], d, sizeof(d));
		fprintf(f, "intent %s\n", d);
	}
	for (int i = 0; i < info.nodes; i++) {
		const struct mi_plan_candidate *c;
		struct mi_plan_node nd;
		int nc;

		mi_plan_node(p, i, &nd);
		fprintf(f, "\n%s (%s): %s, %s -> %s, %s", nd.name, nd.op,
			nd.variant, nd.layout_in, nd.layout_out, nd.precision);
		print_fused(f, nd.fused, nd.nfused);
		for (int k = 0, n = 0; k < iv.n; k++)
			if (mi_intent_has(&iv.v[k], nd.name))
				fprintf(f, "%s%s", n++ ? ", " : " [intents: ",
					iv.v[k].name);
		for (int k = 0; k < iv.n; k++)
			if (mi_intent_has(&iv.v[k], nd.name)) {
				fputc(']', f);
				break;
			}
		fputc('\n', f);
		nc = mi_plan_candidates(m, nd.name, &c);
		if (nc < 0) {
			mi_intents_fini(&iv);
			return nc;
		}
		for (int k = 0; k < nc; k++) {
			fprintf(f, "  %c %s", c[k].is_current ? '*' : ' ',
				c[k].variant);
			print_fused(f, c[k].fused, c[k].nfused);
			fprintf(f, ": %s\n", c[k].why);
		}
	}
	mi_intents_fini(&iv);
	return 0;
}

/* metainfer run --devices: what each device did. */
void mi_cli_device_stats(struct mi_model *m, FILE *f)
{
	struct mi_device_stats st;

	fprintf(f, "%-10s %12s %8s %7s %12s %12s %6s\n", "device", "busy_ms",
		"jobs", "faults", "bytes_in", "bytes_out", "nodes");
	for (int i = 0; i < mi_model_device_count(m); i++) {
		if (mi_model_device_stats(m, i, &st))
			continue;
		fprintf(f, "%-10s %12.3f %8llu %7llu %12llu %12llu %6llu\n",
			st.device, st.busy_ns / 1e6,
			(unsigned long long)st.jobs,
			(unsigned long long)st.faults,
			(unsigned long long)st.bytes_in,
			(unsigned long long)st.bytes_out,
			(unsigned long long)st.nodes);
	}
}

int mi_cli_plan(int argc, char **argv, const char *prog)
{
	static const struct option lopts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "threads", required_argument, NULL, 't' },
		{ "isa", required_argument, NULL, 'I' },
		{ "apply", required_argument, NULL, 'a' },
		{ "explain", no_argument, NULL, 'e' },
		{ "devices", required_argument, NULL, 'D' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct mi_model_opts mo = { 0 };
	const char *out = NULL, *apply = NULL;
	struct mi_plan *p = NULL, *in = NULL;
	struct mi_model *m = NULL;
	int c, ret = 1, do_explain = 0;
	FILE *f;

	optind = 1;
	while ((c = getopt_long(argc, argv, "o:t:eh", lopts, NULL)) != -1) {
		switch (c) {
		case 'o':
			out = optarg;
			break;
		case 't':
			if (mi_cli_threads_opt(prog, optarg, &mo.nthreads))
				return 2;
			break;
		case 'I':
			if (mi_cli_isa_opt(prog, optarg, &mo.isa))
				return 2;
			break;
		case 'a':
			apply = optarg;
			break;
		case 'e':
			do_explain = 1;
			break;
		case 'D':
			mo.devices = optarg;
			break;
		case 'h':
			usage_plan(stdout, prog);
			return 0;
		default:
			usage_plan(stderr, prog);
			return 2;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "%s plan: expected one MODEL.onnx argument\n",
			prog);
		return 2;
	}
	if (mi_model_load(argv[optind], &mo, &m) ||
	    (apply && (mi_plan_read(apply, &in) ||
		       mi_model_plan_apply(m, in))) ||
	    mi_model_plan_get(m, &p)) {
		fprintf(stderr, "%s: %s\n", prog, mi_last_error());
		goto out;
	}
	if (mo.devices && !do_explain) {
		mi_model_placement_write(m, stdout);
		if (!out) {
			ret = 0;
			goto out;
		}
	}
	f = out ? fopen(out, "w") : stdout;
	if (!f) {
		fprintf(stderr, "%s: cannot write %s: %s\n", prog, out,
			strerror(errno));
		goto out;
	}
	ret = do_explain ? explain(f, m, p) : mi_plan_write(p, f);
	if (out && fclose(f) && !ret)
		ret = -EIO;
	if (ret) {
		fprintf(stderr, "%s: %s\n", prog, mi_last_error());
		ret = 1;
	}
out:
	mi_plan_free(p);
	mi_plan_free(in);
	mi_model_free(m);
	return ret;
}
