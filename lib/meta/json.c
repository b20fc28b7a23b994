// SPDX-License-Identifier: MIT
/*
 * A small JSON reader for the "metainfer.switch" metadata: text -> tree of
 * struct mi_mj values.  Numbers are doubles; strings are unescaped (\uXXXX
 * below 0x80 only; others become '?', the metadata is ASCII).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "meta/meta-impl.h"

struct mjp {
	const char *s, *end;
	int depth;
};

static void skip_ws(struct mjp *p)
{
	while (p->s < p->end && strchr(" \t\r\n", *p->s))
		p->s++;
}

static int parse_value(struct mjp *p, struct mi_mj *v);

static int parse_str(struct mjp *p, char **out)
{
	const char *q = ++p->s;
	char *o;
	size_t n = 0;

	o = malloc(p->end - q + 1);
	if (!o)
		return -ENOMEM;
	while (p->s < p->end && *p->s != '"') {
		char c = *p->s++;

		if (c == '\\') {
			if (p->s >= p->end)
				break;
			c = *p->s++;
			switch (c) {
			case 'n': c = '\n'; break;
			case 't': c = '\t'; break;
			case 'r': c = '\r'; break;
			case 'b': c = '\b'; break;
			case 'f': c = '\f'; break;
			case 'u': {
				unsigned int cp = 0;

				for (int i = 0; i < 4; i++, p->s++) {
					if (p->s >= p->end)
						goto bad;
					cp = cp * 16 + (unsigned int)strtol(
						(char[]){ *p->s, 0 }, NULL, 16);
				}
				c = cp < 0x80 ? (char)cp : '?';
				break;
			}
			default: break; /* \" \\ \/ */
			}
		}
		o[n++] = c;
	}
	if (p->s >= p->end)
		goto bad;
	p->s++;
	o[n] = 0;
	*out = o;
	return 0;
bad:
	free(o);
	return -EINVAL;
}

static int parse_container(struct mjp *p, struct mi_mj *v, char close)
{
	int cap = 0;

	p->s++;
	if (++p->depth > 32)
		return -EINVAL;
	skip_ws(p);
	if (p->s < p->end && *p->s == close) {
		p->s++;
		p->depth--;
		return 0;
	}
	for (;;) {
		struct mi_mj *nv;
		char *key = NULL;
		int err;

		if (v->n == cap) {
			cap = cap ? 2 * cap : 8;
			nv = realloc(v->v, cap * sizeof(*nv));
			if (!nv)
				return -ENOMEM;
			v->v = nv;
			if (v->type == MJ_OBJ) {
				char **nk = realloc(v->keys,
						    cap * sizeof(*nk));

				if (!nk)
					return -ENOMEM;
				v->keys = nk;
			}
		}
		skip_ws(p);
		if (v->type == MJ_OBJ) {
			if (p->s >= p->end || *p->s != '"')
				return -EINVAL;
			err = parse_str(p, &key);
			if (err)
				return err;
			skip_ws(p);
			if (p->s >= p->end || *p->s != ':') {
				free(key);
				return -EINVAL;
			}
			p->s++;
			v->keys[v->n] = key;
		}
		memset(&v->v[v->n], 0, sizeof(v->v[0]));
		v->n++;
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
		return -EINVAL;
	}
}

static int parse_value(struct mjp *p, struct mi_mj *v)
{
	char *e;

	skip_ws(p);
	if (p->s >= p->end)
		return -EINVAL;
	switch (*p->s) {
	case '{':
		v->type = MJ_OBJ;
		return parse_container(p, v, '}');
	case '[':
		v->type = MJ_ARR;
		return parse_container(p, v, ']');
	case '"':
		v->type = MJ_STR;
		return parse_str(p, &v->str);
	}
	if (p->end - p->s >= 4 && !strncmp(p->s, "true", 4)) {
		v->type = MJ_NUM;
		v->num = 1;
		p->s += 4;
		return 0;
	}
	if (p->end - p->s >= 5 && !strncmp(p->s, "false", 5)) {
		v->type = MJ_NUM;
		p->s += 5;
		return 0;
	}
	if (p->end - p->s >= 4 && !strncmp(p->s, "null", 4)) {
		v->type = MJ_NULL;
		p->s += 4;
		return 0;
	}
	v->type = MJ_NUM;
	v->num = strtod(p->s, &e);
	if (e == p->s || e > p->end)
		return -EINVAL;
	p->s = e;
	return 0;
}

void mi_mj_free(struct mi_mj *v)
{
	for (int i = 0; i < v->n; i++) {
		mi_mj_free(&v->v[i]);
		if (v->type == MJ_OBJ)
			free(v->keys[i]);
	}
	free(v->v);
	free(v->keys);
	free(v->str);
	memset(v, 0, sizeof(*v));
}

int mi_mj_parse(const char *s, struct mi_mj *root, int *errpos)
{
	struct mjp p = { .s = s, .end = s + strlen(s) };
	int err;

	memset(root, 0, sizeof(*root));
	err = parse_value(&p, root);
	if (!err) {
		skip_ws(&p);
		if (p.s != p.end)
			err = -EINVAL;
	}
	if (err) {
		*errpos = (int)(p.s - s);
		mi_mj_free(root);
	}
	return err;
}

const struct mi_mj *mi_mj_get(const struct mi_mj *o, const char *key)
{
	if (!o || o->type != MJ_OBJ)
		return NULL;
	for (int i = 0; i < o->n; i++)
		if (!strcmp(o->keys[i], key))
			return &o->v[i];
	return NULL;
}
