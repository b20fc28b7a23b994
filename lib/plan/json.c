// SPDX-License-Identifier: MIT
/*
 * Plan files: a small JSON reader and writer for struct mi_plan.
 *
 * The schema (Documentation/plan.rst) is one object:
 *
 *	{ "schema": "metainfer-plan/2", "model": ..., "fingerprint": "<hex>",
 *	  "isa": ..., "threads": N, "max_job_us": N?,
 *	  "nodes": [ { "name", "op", "device", "job"?, "variant", "layout_in",
 *		       "layout_out", "precision", "qparams"?, "threads"?,
 *		       "fused": [names] }, ... ],
 *	  "removed": [names] }
 *
 * The reader parses RFC 8259 JSON into a tree (strings with \uXXXX
 * escapes as UTF-8, numbers as double) and then maps the tree onto the
 * plan; unknown keys are rejected, so a newer schema's fields are never
 * silently dropped.  Every error is one line with the byte offset or the
 * node it concerns.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan-impl.h"

/* ---- writer ------------------------------------------------------------- */
static void put_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; s && *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static void put_strv(FILE *f, char *const *v, int n)
{
	fputc('[', f);
	for (int i = 0; i < n; i++) {
		if (i)
			fputs(", ", f);
		put_str(f, v[i]);
	}
	fputc(']', f);
}

int mi_plan_json_write(const struct mi_plan *p, FILE *f)
{
	fputs("{\n  \"schema\": ", f);
	put_str(f, MI_PLAN_SCHEMA);
	fputs(",\n  \"model\": ", f);
	put_str(f, p->model ? p->model : "");
	fprintf(f, ",\n  \"fingerprint\": \"%016" PRIx64 "\",\n  \"isa\": ",
		p->fingerprint);
	put_str(f, p->isa ? p->isa : "");
	fprintf(f, ",\n  \"threads\": %d", p->threads);
	if (p->max_job_us)
		fprintf(f, ",\n  \"max_job_us\": %" PRIu64, p->max_job_us);
	fputs(",\n  \"nodes\": [", f);
	for (int i = 0; i < p->n; i++) {
		const struct mi_plan_entry *e = &p->e[i];

		fputs(i ? ",\n    {" : "\n    {", f);
		fputs("\"name\": ", f);
		put_str(f, e->name);
		fputs(", \"op\": ", f);
		put_str(f, e->op);
		fputs(", \"device\": ", f);
		put_str(f, e->device);
		if (mi_plan_entry_job(e))
			fprintf(f, ", \"job\": %d", e->job - 1);
		fputs(", \"variant\": ", f);
		put_str(f, e->variant);
		fputs(", \"layout_in\": ", f);
		put_str(f, e->lay_in);
		fputs(", \"layout_out\": ", f);
		put_str(f, e->lay_out);
		fputs(", \"precision\": ", f);
		put_str(f, e->precision);
		if (e->qparams) {
			fputs(", \"qparams\": ", f);
			put_str(f, e->qparams);
		}
		if (e->threads)
			fprintf(f, ", \"threads\": %d", e->threads);
		fputs(", \"fused\": ", f);
		put_strv(f, e->fused, e->nfused);
		fputc('}', f);
	}
	fputs(p->n ? "\n  ],\n  \"removed\": " : "],\n  \"removed\": ", f);
	put_strv(f, p->removed, p->nremoved);
	fputs("\n}\n", f);
	return ferror(f) ? -EIO : 0;
}

/* ---- reader: JSON text -> tree ------------------------------------------ */
enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ };

struct jv {
	int type;
	double num;
	char *str;		/* J_STR */
	int n;			/* J_ARR / J_OBJ members */
	char **keys;		/* J_OBJ */
	struct jv *v;
};

struct jp {
	const char *s, *end;
	const char *base;
	char *err;
	size_t errlen;
	int depth;
};

static int jfail(struct jp *p, const char *fmt, ...)
{
	va_list ap;
	int off;

	if (p->err[0])
		return -EINVAL;
	off = snprintf(p->err, p->errlen, "malformed JSON at byte %td: ",
		       p->s - p->base);
	va_start(ap, fmt);
	if (off >= 0 && (size_t)off < p->errlen)
		vsnprintf(p->err + off, p->errlen - off, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static void jfree(struct jv *v)
{
	free(v->str);
	for (int i = 0; i < v->n; i++) {
		if (v->keys)
			free(v->keys[i]);
		jfree(&v->v[i]);
	}
	free(v->keys);
	free(v->v);
	memset(v, 0, sizeof(*v));
}

static void skip_ws(struct jp *p)
{
	while (p->s < p->end &&
	       (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' || *p->s == '\r'))
		p->s++;
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static int put_utf8(char *o, unsigned int cp)
{
	if (cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (char)(0xc0 | cp >> 6);
		o[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (char)(0xe0 | cp >> 12);
		o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		o[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (char)(0xf0 | cp >> 18);
	o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	o[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

static int read_u4(struct jp *p, unsigned int *cp)
{
	*cp = 0;
	if (p->end - p->s < 4)
		return jfail(p, "short \\u escape");
	for (int i = 0; i < 4; i++) {
		int h = hexval((unsigned char)*p->s++);

		if (h < 0)
			return jfail(p, "bad \\u escape");
		*cp = *cp << 4 | (unsigned int)h;
	}
	return 0;
}

/* p->s at the opening quote */
static int parse_str(struct jp *p, char **out)
{
	const char *q;
	char *o, *buf;

	p->s++;
	for (q = p->s; q < p->end && *q != '"'; q++)
		if (*q == '\\')
			q++;
	if (q >= p->end)
		return jfail(p, "unterminated string");
	/* escapes never grow: \uXXXX (6 bytes) -> at most 4 */
	buf = o = malloc(q - p->s + 1);
	if (!buf)
		return -ENOMEM;
	while (*p->s != '"') {
		unsigned char c = (unsigned char)*p->s++;
		unsigned int cp, lo;

		if (c < 0x20) {
			free(buf);
			return jfail(p, "control character in string");
		}
		if (c != '\\') {
			*o++ = (char)c;
			continue;
		}
		c = (unsigned char)*p->s++;
		switch (c) {
		case '"': case '\\': case '/':
			*o++ = (char)c;
			break;
		case 'b': *o++ = '\b'; break;
		case 'f': *o++ = '\f'; break;
		case 'n': *o++ = '\n'; break;
		case 'r': *o++ = '\r'; break;
		case 't': *o++ = '\t'; break;
		case 'u':
			if (read_u4(p, &cp)) {
				free(buf);
				return -EINVAL;
			}
			if (cp >= 0xd800 && cp < 0xdc00 && p->end - p->s >= 6 &&
			    p->s[0] == '\\' && p->s[1] == 'u') {
				p->s += 2;
				if (read_u4(p, &lo)) {
					free(buf);
					return -EINVAL;
				}
				if (lo >= 0xdc00 && lo < 0xe000)
					cp = 0x10000 + ((cp - 0xd800) << 10) +
					     (lo - 0xdc00);
			}
			if (!cp) {
				free(buf);
				return jfail(p, "NUL in string");
			}
			o += put_utf8(o, cp);
			break;
		default:
			free(buf);
			return jfail(p, "bad escape '\\%c'", c);
		}
	}
	p->s++;
	*o = 0;
	*out = buf;
	return 0;
}

static int parse_value(struct jp *p, struct jv *v);

static int push(struct jv *v, int *cap)
{
	if (v->n == *cap) {
		int nc = *cap ? 2 * *cap : 8;
		struct jv *nv = realloc(v->v, nc * sizeof(*nv));
		char **nk;

		if (!nv)
			return -ENOMEM;
		v->v = nv;
		if (v->type == J_OBJ) {
			nk = realloc(v->keys, nc * sizeof(*nk));
			if (!nk)
				return -ENOMEM;
			v->keys = nk;
		}
		*cap = nc;
	}
	memset(&v->v[v->n], 0, sizeof(v->v[0]));
	if (v->type == J_OBJ)
		v->keys[v->n] = NULL;
	v->n++;
	return 0;
}

static int parse_container(struct jp *p, struct jv *v, char close)
{
	int cap = 0, err;

	p->s++;
	if (++p->depth > 32)
		return jfail(p, "nested too deeply");
	skip_ws(p);
	if (p->s < p->end && *p->s == close) {
		p->s++;
		p->depth--;
		return 0;
	}
	for (;;) {
		skip_ws(p);
		err = push(v, &cap);
		if (err)
			return err;
		if (v->type == J_OBJ) {
			if (p->s >= p->end || *p->s != '"')
				return jfail(p, "expected a key");
			err = parse_str(p, &v->keys[v->n - 1]);
			if (err)
				return err;
			skip_ws(p);
			if (p->s >= p->end || *p->s != ':')
				return jfail(p, "expected ':'");
			p->s++;
		}
		err = parse_value(p, &v->v[v->n - 1]);
		if (err)
			return err;
		skip_ws(p);
		if (p->s < p->end && *p->s == ',') {
			p->s++;
			continue;
		}
		if (p->s < p->end && *p->s == close) {
			p->s++;
			p->depth--;
			return 0;
		}
		return jfail(p, "expected ',' or '%c'", close);
	}
}

static int parse_value(struct jp *p, struct jv *v)
{
	skip_ws(p);
	if (p->s >= p->end)
		return jfail(p, "unexpected end");
	switch (*p->s) {
	case '{':
		v->type = J_OBJ;
		return parse_container(p, v, '}');
	case '[':
		v->type = J_ARR;
		return parse_container(p, v, ']');
	case '"':
		v->type = J_STR;
		return parse_str(p, &v->str);
	}
	if (p->end - p->s >= 4 && !memcmp(p->s, "null", 4)) {
		v->type = J_NULL;
		p->s += 4;
		return 0;
	}
	if (p->end - p->s >= 4 && !memcmp(p->s, "true", 4)) {
		v->type = J_BOOL;
		v->num = 1;
		p->s += 4;
		return 0;
	}
	if (p->end - p->s >= 5 && !memcmp(p->s, "false", 5)) {
		v->type = J_BOOL;
		p->s += 5;
		return 0;
	}
	if (*p->s == '-' || (*p->s >= '0' && *p->s <= '9')) {
		char tmp[64], *e;
		size_t k = 0;

		while (p->s + k < p->end && k < sizeof(tmp) - 1 &&
		       strchr("+-0123456789.eE", p->s[k]))
			k++;
		memcpy(tmp, p->s, k);
		tmp[k] = 0;
		v->type = J_NUM;
		v->num = strtod(tmp, &e);
		if (e != tmp + k)
			return jfail(p, "bad number");
		p->s += k;
		return 0;
	}
	return jfail(p, "unexpected character '%c'", *p->s);
}

/* ---- tree -> plan --------------------------------------------------------- */
static int perr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static const struct jv *member(const struct jv *o, const char *key)
{
	for (int i = 0; i < o->n; i++)
		if (!strcmp(o->keys[i], key))
			return &o->v[i];
	return NULL;
}

static bool known_key(const char *k, const char *const *keys)
{
	for (; *keys; keys++)
		if (!strcmp(k, *keys))
			return true;
	return false;
}

static int get_str(const struct jv *o, const char *key, bool required,
		   char **out, const char *where, char *err, size_t errlen)
{
	const struct jv *v = member(o, key);

	if (!v) {
		if (!required)
			return 0;
		return perr(err, errlen, "%s: missing \"%s\"", where, key);
	}
	if (v->type != J_STR)
		return perr(err, errlen, "%s: \"%s\" must be a string", where,
			    key);
	*out = strdup(v->str);
	return *out ? 0 : -ENOMEM;
}

static int get_int(const struct jv *o, const char *key, int *out,
		   const char *where, char *err, size_t errlen)
{
	const struct jv *v = member(o, key);

	if (!v)
		return 0;
	if (v->type != J_NUM || v->num != (int)v->num || v->num < 0 ||
	    v->num > 4096)
		return perr(err, errlen, "%s: \"%s\" must be an integer 0..4096",
			    where, key);
	*out = (int)v->num;
	return 0;
}

static int get_strv(const struct jv *o, const char *key, char ***v, int *n,
		    const char *where, char *err, size_t errlen)
{
	const struct jv *a = member(o, key);

	if (!a)
		return 0;
	if (a->type != J_ARR)
		return perr(err, errlen, "%s: \"%s\" must be an array of names",
			    where, key);
	for (int i = 0; i < a->n; i++) {
		if (a->v[i].type != J_STR)
			return perr(err, errlen,
				    "%s: \"%s\" must be an array of names",
				    where, key);
		if (mi_plan_strv_add(v, n, a->v[i].str))
			return -ENOMEM;
	}
	return 0;
}

static const char *const top_keys[] = { "schema", "model", "fingerprint",
					"isa", "threads", "max_job_us", "nodes",
					"removed", NULL };
static const char *const node_keys[] = { "name", "op", "device", "job",
					 "variant", "layout_in", "layout_out",
					 "precision", "qparams", "threads",
					 "fused", NULL };

static int map_node(const struct jv *o, int idx, struct mi_plan *p, char *err,
		    size_t errlen)
{
	struct mi_plan_entry *e;
	char where[96];
	int ret;

	snprintf(where, sizeof(where), "plan node %d", idx);
	if (o->type != J_OBJ)
		return perr(err, errlen, "%s: must be an object", where);
	ret = mi_plan_entry_add(p, &e);
	if (ret)
		return ret;
	ret = get_str(o, "name", true, &e->name, where, err, errlen);
	if (!ret)
		snprintf(where, sizeof(where), "plan node '%.64s'", e->name);
	for (int i = 0; !ret && i < o->n; i++)
		if (!known_key(o->keys[i], node_keys))
			ret = perr(err, errlen, "%s: unknown key \"%s\"", where,
				   o->keys[i]);
	if (!ret)
		ret = get_str(o, "op", true, &e->op, where, err, errlen);
	if (!ret)
		ret = get_str(o, "device", false, &e->device, where, err, errlen);
	if (!ret && member(o, "job")) {
		int job = 0;

		ret = get_int(o, "job", &job, where, err, errlen);
		e->job = job + 1;
		/* a job belongs to the device the entry names */
		if (!ret && !(e->job_dev = strdup(e->device ? e->device : "cpu")))
			ret = -ENOMEM;
	}
	if (!ret)
		ret = get_str(o, "variant", true, &e->variant, where, err,
			      errlen);
	if (!ret)
		ret = get_str(o, "layout_in", false, &e->lay_in, where, err,
			      errlen);
	if (!ret)
		ret = get_str(o, "layout_out", false, &e->lay_out, where, err,
			      errlen);
	if (!ret)
		ret = get_str(o, "precision", false, &e->precision, where, err,
			      errlen);
	if (!ret)
		ret = get_str(o, "qparams", false, &e->qparams, where, err,
			      errlen);
	if (!ret)
		ret = get_int(o, "threads", &e->threads, where, err, errlen);
	if (!ret)
		ret = get_strv(o, "fused", &e->fused, &e->nfused, where, err,
			       errlen);
	/* absent optional fields: what the schema says they default to */
	if (!ret && !e->device && !(e->device = strdup("cpu")))
		ret = -ENOMEM;
	if (!ret && !e->lay_in && !(e->lay_in = strdup("auto")))
		ret = -ENOMEM;
	if (!ret && !e->lay_out && !(e->lay_out = strdup("auto")))
		ret = -ENOMEM;
	if (!ret && !e->precision && !(e->precision = strdup("auto")))
		ret = -ENOMEM;
	return ret;
}

static int map_plan(const struct jv *root, struct mi_plan *p, char *err,
		    size_t errlen)
{
	const struct jv *v;
	char *fp = NULL, *end;
	int ret;

	if (root->type != J_OBJ)
		return perr(err, errlen, "plan: the top level must be an object");
	v = member(root, "schema");
	if (!v || v->type != J_STR)
		return perr(err, errlen, "plan: missing \"schema\" (expected \"%s\")",
			    MI_PLAN_SCHEMA);
	if (strcmp(v->str, MI_PLAN_SCHEMA) && strcmp(v->str, MI_PLAN_SCHEMA_V1)) {
		/* metainfer-plan/1 is the first schema: nothing older maps */
		if (!strncmp(v->str, "metainfer-plan/", 15))
			return perr(err, errlen,
				    "plan: schema \"%.32s\" is not supported (this version reads %s and %s)",
				    v->str, MI_PLAN_SCHEMA, MI_PLAN_SCHEMA_V1);
		return perr(err, errlen, "plan: not a MetaInfer plan (schema \"%.32s\")",
			    v->str);
	}
	for (int i = 0; i < root->n; i++)
		if (!known_key(root->keys[i], top_keys))
			return perr(err, errlen, "plan: unknown key \"%s\"",
				    root->keys[i]);
	ret = get_str(root, "model", false, &p->model, "plan", err, errlen);
	if (!ret)
		ret = get_str(root, "isa", false, &p->isa, "plan", err, errlen);
	if (!ret)
		ret = get_int(root, "threads", &p->threads, "plan", err, errlen);
	if (!ret)
		ret = get_str(root, "fingerprint", true, &fp, "plan", err, errlen);
	if (ret)
		return ret;
	v = member(root, "max_job_us");
	if (v && (v->type != J_NUM || v->num != (double)(uint64_t)v->num ||
		  v->num < 1 || v->num > 3.6e9)) {
		free(fp);
		return perr(err, errlen,
			    "plan: \"max_job_us\" must be an integer 1..3600000000");
	}
	if (v)
		p->max_job_us = (uint64_t)v->num;
	p->fingerprint = strtoull(fp, &end, 16);
	if (!*fp || *end || strlen(fp) > 16) {
		free(fp);
		return perr(err, errlen, "plan: \"fingerprint\" must be 1-16 hex digits");
	}
	free(fp);
	v = member(root, "nodes");
	if (!v || v->type != J_ARR)
		return perr(err, errlen, "plan: \"nodes\" must be an array");
	for (int i = 0; i < v->n; i++) {
		ret = map_node(&v->v[i], i, p, err, errlen);
		if (ret)
			return ret;
	}
	/* /1 maps to /2 unchanged: it knew only the CPU */
	if (!strcmp(member(root, "schema")->str, MI_PLAN_SCHEMA_V1))
		for (int i = 0; i < p->n; i++)
			if (strcmp(p->e[i].device, "cpu"))
				return perr(err, errlen,
					    "plan node '%.64s': device \"%.32s\" in a %s plan (it knows only \"cpu\")",
					    p->e[i].name, p->e[i].device,
					    MI_PLAN_SCHEMA_V1);
	return get_strv(root, "removed", &p->removed, &p->nremoved, "plan", err,
			errlen);
}

int mi_plan_json_parse(const char *buf, size_t len, struct mi_plan **planp,
		       char *err, size_t errlen)
{
	struct jp p = { .s = buf, .end = buf + len, .base = buf, .err = err,
			.errlen = errlen };
	struct jv root = { 0 };
	struct mi_plan *plan;
	int ret;

	err[0] = 0;
	ret = parse_value(&p, &root);
	if (!ret) {
		skip_ws(&p);
		if (p.s != p.end)
			ret = jfail(&p, "trailing characters");
	}
	if (ret) {
		if (ret == -ENOMEM)
			snprintf(err, errlen, "out of memory");
		jfree(&root);
		return ret;
	}
	plan = calloc(1, sizeof(*plan));
	if (!plan) {
		jfree(&root);
		return -ENOMEM;
	}
	ret = map_plan(&root, plan, err, errlen);
	jfree(&root);
	if (ret) {
		if (ret == -ENOMEM)
			snprintf(err, errlen, "out of memory");
		mi_plan_free(plan);
		return ret;
	}
	*planp = plan;
	return 0;
}
