// SPDX-License-Identifier: MIT
/*
 * ONNX import: ModelProto (protobuf-c, generated at build time from the
 * system's onnx.proto) -> struct mi_graph.
 *
 * Everything read from the file is treated as hostile: sizes are checked
 * against dtype x element count, names and indices are validated, external
 * data must stay inside the model directory and inside its file.  Every
 * failure leaves one line in g->err and returns -errno.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gen/onnx.pb-c.h"
#include "internal.h"

#define MI_MAX_MODEL_BYTES (2ull << 30)

int mi_read_file(const char *path, size_t maxlen, void **bufp, size_t *lenp)
{
	struct stat st;
	size_t len, done = 0;
	char *buf;
	int fd, err;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		err = -errno;
		goto err_close;
	}
	if (!S_ISREG(st.st_mode)) {
		err = S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
		goto err_close;
	}
	if ((uint64_t)st.st_size > maxlen) {
		err = -EFBIG;
		goto err_close;
	}
	len = st.st_size;
	buf = malloc(len ? len : 1);
	if (!buf) {
		err = -ENOMEM;
		goto err_close;
	}
	while (done < len) {
		ssize_t r = read(fd, buf + done, len - done);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			err = r < 0 ? -errno : -EIO;
			free(buf);
			goto err_close;
		}
		done += r;
	}
	close(fd);
	*bufp = buf;
	*lenp = len;
	return 0;
err_close:
	close(fd);
	return err;
}

void mi_tensor_fini(struct mi_tensor *t)
{
	mi_tensor_free_data(t);
	free(t->name);
	t->name = NULL;
	for (int d = 0; d < MI_MAX_DIMS; d++) {
		free(t->dim_param[d]);
		t->dim_param[d] = NULL;
	}
}

/* ---- tensors -------------------------------------------------------- */

struct load_ctx {
	struct mi_graph *g;
	const char *basedir;
};

static int dtype_supported(int dt)
{
	return dt != MI_DT_STRING && mi_dtype_size(dt) != 0;
}

static const char *tname(const Onnx__TensorProto *tp)
{
	return tp->name ? tp->name : "";
}

/* Reject absolute paths and any ".." component: external data must live
 * under the model's directory. */
static bool safe_relpath(const char *p)
{
	const char *c = p;

	if (!*p || *p == '/')
		return false;
	while (*c) {
		const char *e = strchr(c, '/');
		size_t l = e ? (size_t)(e - c) : strlen(c);

		if (l == 2 && c[0] == '.' && c[1] == '.')
			return false;
		if (!e)
			break;
		c = e + 1;
	}
	return true;
}

static int load_external(struct mi_graph *g, const char *basedir,
			 Onnx__TensorProto *tp, void *dst, size_t bytes)
{
	const char *loc = NULL;
	uint64_t offset = 0, length = UINT64_MAX;
	char path[PATH_MAX];
	struct stat st;
	size_t done = 0;
	int fd;

	for (size_t i = 0; i < tp->n_external_data; i++) {
		const Onnx__StringStringEntryProto *e = tp->external_data[i];
		char *end;

		if (!e->key || !e->value)
			continue;
		if (!strcmp(e->key, "location")) {
			loc = e->value;
		} else if (!strcmp(e->key, "offset") ||
			   !strcmp(e->key, "length")) {
			errno = 0;
			unsigned long long v = strtoull(e->value, &end, 10);

			if (errno || end == e->value || *end ||
			    e->value[0] == '-')
				return mi_graph_err(g, NULL, -EINVAL,
					"tensor '%s': bad external data %s '%s'",
					tname(tp), e->key, e->value);
			if (e->key[0] == 'o')
				offset = v;
			else
				length = v;
		}
	}
	if (!loc)
		return mi_graph_err(g, NULL, -EINVAL,
			"tensor '%s': external data without a location",
			tname(tp));
	if (!basedir)
		return mi_graph_err(g, NULL, -EINVAL,
			"tensor '%s': external data '%s' needs a model directory",
			tname(tp), loc);
	if (!safe_relpath(loc))
		return mi_graph_err(g, NULL, -EACCES,
			"tensor '%s': external data location '%s' leaves the model directory",
			tname(tp), loc);
	if (length != UINT64_MAX && length != bytes)
		return mi_graph_err(g, NULL, -EINVAL,
			"tensor '%s': external data length %" PRIu64 " but shape and dtype need %zu bytes",
			tname(tp), length, bytes);
	if (snprintf(path, sizeof(path), "%s/%s", basedir, loc) >=
	    (int)sizeof(path))
		return mi_graph_err(g, NULL, -ENAMETOOLONG,
			"tensor '%s': external data path too long", tname(tp));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int e = -errno;

		return mi_graph_err(g, NULL, e,
			"tensor '%s': external data '%s': %s", tname(tp), loc,
			strerror(-e));
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    offset > (uint64_t)st.st_size ||
	    bytes > (uint64_t)st.st_size - offset) {
		close(fd);
		return mi_graph_err(g, NULL, -EINVAL,
			"tensor '%s': external data '%s' has no %zu bytes at offset %" PRIu64,
			tname(tp), loc, bytes, offset);
	}
	while (done < bytes) {
		ssize_t r = pread(fd, (char *)dst + done, bytes - done,
				  offset + done);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			close(fd);
			return mi_graph_err(g, NULL, -EIO,
				"tensor '%s': short read of external data '%s'",
				tname(tp), loc);
		}
		done += r;
	}
	close(fd);
	return 0;
}

/* Copy typed repeated fields into dst (count already checked). */
static void copy_typed(void *dst, int dt, const Onnx__TensorProto *tp,
		       size_t n)
{
	for (size_t i = 0; i < n; i++) {
		switch (dt) {
		case MI_DT_FLOAT:
			((float *)dst)[i] = tp->float_data[i];
			break;
		case MI_DT_DOUBLE:
			((double *)dst)[i] = tp->double_data[i];
			break;
		case MI_DT_INT64:
			((int64_t *)dst)[i] = tp->int64_data[i];
			break;
		case MI_DT_UINT32:
			((uint32_t *)dst)[i] = (uint32_t)tp->uint64_data[i];
			break;
		case MI_DT_UINT64:
			((uint64_t *)dst)[i] = tp->uint64_data[i];
			break;
		case MI_DT_INT32:
			((int32_t *)dst)[i] = tp->int32_data[i];
			break;
		case MI_DT_INT16:
		case MI_DT_UINT16:
		case MI_DT_FLOAT16:
		case MI_DT_BFLOAT16:
			((uint16_t *)dst)[i] = (uint16_t)tp->int32_data[i];
			break;
		case MI_DT_INT8:
		case MI_DT_UINT8:
			((uint8_t *)dst)[i] = (uint8_t)tp->int32_data[i];
			break;
		case MI_DT_BOOL:
			((uint8_t *)dst)[i] = tp->int32_data[i] != 0;
			break;
		}
	}
}

static size_t typed_count(int dt, const Onnx__TensorProto *tp)
{
	switch (dt) {
	case MI_DT_FLOAT: return tp->n_float_data;
	case MI_DT_DOUBLE: return tp->n_double_data;
	case MI_DT_INT64: return tp->n_int64_data;
	case MI_DT_UINT32: case MI_DT_UINT64: return tp->n_uint64_data;
	default: return tp->n_int32_data;
	}
}

/*
 * Fill t (name, dtype, shape, owned data) from a TensorProto.  what names
 * the tensor's role in messages.
 */
static int tensor_from_proto(struct mi_graph *g, const char *basedir,
			     Onnx__TensorProto *tp, struct mi_tensor *t)
{
	int dt = tp->has_data_type ? tp->data_type : MI_DT_UNDEFINED;
	int64_t numel = 1;
	size_t es, bytes;
	int err;

	if (!dtype_supported(dt))
		return mi_graph_err(g, NULL, -EOPNOTSUPP,
			"tensor '%s': unsupported data type %s", tname(tp),
			mi_dtype_name(dt));
	if (tp->n_dims > MI_MAX_DIMS)
		return mi_graph_err(g, NULL, -EOPNOTSUPP,
			"tensor '%s': rank %zu exceeds %d", tname(tp),
			tp->n_dims, MI_MAX_DIMS);
	if (tp->segment)
		return mi_graph_err(g, NULL, -EOPNOTSUPP,
			"tensor '%s': segmented tensors are not supported",
			tname(tp));
	for (size_t i = 0; i < tp->n_dims; i++) {
		int64_t d = tp->dims[i];

		if (d < 0)
			return mi_graph_err(g, NULL, -EINVAL,
				"tensor '%s': negative dimension %" PRId64,
				tname(tp), d);
		if (d && numel > INT64_MAX / d)
			return mi_graph_err(g, NULL, -EINVAL,
				"tensor '%s': element count overflows",
				tname(tp));
		numel *= d;
	}
	es = mi_dtype_size(dt);
	if ((uint64_t)numel > mi_max_tensor_bytes / es)
		return mi_graph_err(g, NULL, -E2BIG,
			"tensor '%s': %" PRId64 " elements exceed the tensor size limit",
			tname(tp), numel);
	bytes = (size_t)numel * es;

	t->dtype = dt;
	t->ndim = (int)tp->n_dims;
	for (int i = 0; i < t->ndim; i++)
		t->dims[i] = tp->dims[i];
	/*
	 * raw_data was malloc'ed by protobuf-c's default allocator: take it
	 * over instead of copying, so that loading a model never holds its
	 * weights twice (malloc's alignment suffices for every dtype).
	 */
	if (tp->has_raw_data && bytes && tp->raw_data.len == bytes &&
	    tp->raw_data.data &&
	    !(tp->has_data_location &&
	      tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) &&
	    !((uintptr_t)tp->raw_data.data % 16)) {
		mi_tensor_free_data(t);
		t->data = tp->raw_data.data;
		t->nbytes = bytes;
		t->flags |= MI_TF_OWNS_DATA;
		tp->raw_data.data = NULL;
		tp->raw_data.len = 0;
		if (dt == MI_DT_BOOL)
			for (size_t i = 0; i < bytes; i++)
				((uint8_t *)t->data)[i] =
					((uint8_t *)t->data)[i] != 0;
		return 0;
	}
	err = mi_tensor_alloc(t);
	if (err)
		return mi_graph_err(g, NULL, err,
			"tensor '%s': cannot allocate %zu bytes", tname(tp),
			bytes);

	if (tp->has_data_location &&
	    tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
		return load_external(g, basedir, tp, t->data, bytes);
	if (tp->has_raw_data) {
		if (tp->raw_data.len != bytes)
			return mi_graph_err(g, NULL, -EINVAL,
				"tensor '%s': raw_data has %zu bytes, %s[%" PRId64 "] needs %zu",
				tname(tp), tp->raw_data.len, mi_dtype_name(dt),
				numel, bytes);
		if (bytes)
			memcpy(t->data, tp->raw_data.data, bytes);
		if (dt == MI_DT_BOOL)
			for (size_t i = 0; i < bytes; i++)
				((uint8_t *)t->data)[i] =
					((uint8_t *)t->data)[i] != 0;
		return 0;
	}
	size_t have = typed_count(dt, tp);

	if (have != (size_t)numel)
		return mi_graph_err(g, NULL, -EINVAL,
			"tensor '%s': %zu values for %" PRId64 " elements",
			tname(tp), have, numel);
	copy_typed(t->data, dt, tp, numel);
	return 0;
}

/* ---- value infos ---------------------------------------------------- */

static int apply_value_info(struct mi_graph *g, const Onnx__ValueInfoProto *vi,
			    struct mi_tensor *t, bool required)
{
	const Onnx__TypeProto *tp = vi->type;
	const Onnx__TypeProto__Tensor *tt;

	if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE ||
	    !tp->tensor_type) {
		if (!required)
			return 0;
		if (tp && tp->value_case != ONNX__TYPE_PROTO__VALUE__NOT_SET &&
		    tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE)
			return mi_graph_err(g, NULL, -EOPNOTSUPP,
				"input '%s': only tensor inputs are supported (sequence/map/optional/sparse found)",
				t->name);
		return mi_graph_err(g, NULL, -EINVAL,
			"input '%s': no tensor type", t->name);
	}
	tt = tp->tensor_type;
	if (tt->has_elem_type && tt->elem_type) {
		if (!dtype_supported(tt->elem_type)) {
			if (!required)
				return 0;
			return mi_graph_err(g, NULL, -EOPNOTSUPP,
				"input '%s': unsupported data type %s",
				t->name, mi_dtype_name(tt->elem_type));
		}
		t->dtype = tt->elem_type;
	} else if (required) {
		return mi_graph_err(g, NULL, -EINVAL,
			"input '%s': no element type", t->name);
	}
	if (!tt->shape) {
		t->ndim = -1;
		return 0;
	}
	if (tt->shape->n_dim > MI_MAX_DIMS) {
		if (!required)
			return 0;
		return mi_graph_err(g, NULL, -EOPNOTSUPP,
			"input '%s': rank %zu exceeds %d", t->name,
			tt->shape->n_dim, MI_MAX_DIMS);
	}
	t->ndim = (int)tt->shape->n_dim;
	for (int i = 0; i < t->ndim; i++) {
		const Onnx__TensorShapeProto__Dimension *d =
			tt->shape->dim[i];

		free(t->dim_param[i]);
		t->dim_param[i] = NULL;
		t->dims[i] = -1;
		if (d->value_case ==
			    ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE &&
		    d->dim_value >= 0) {
			t->dims[i] = d->dim_value;
		} else if (d->value_case ==
				   ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
			   d->dim_param) {
			t->dim_param[i] = strndup(d->dim_param, 63);
			if (!t->dim_param[i])
				return -ENOMEM;
		}
	}
	return 0;
}

/* ---- attributes ----------------------------------------------------- */

static int attr_type_of(const Onnx__AttributeProto *a)
{
	if (a->has_type && a->type)
		return a->type;
	/* IR version < 3 models carry no type: derive it from the fields. */
	if (a->n_floats)
		return MI_ATTR_FLOATS;
	if (a->n_ints)
		return MI_ATTR_INTS;
	if (a->n_strings)
		return MI_ATTR_STRINGS;
	if (a->t)
		return MI_ATTR_TENSOR;
	if (a->g)
		return MI_ATTR_GRAPH;
	if (a->has_s)
		return MI_ATTR_STRING;
	if (a->has_f)
		return MI_ATTR_FLOAT;
	if (a->has_i)
		return MI_ATTR_INT;
	return MI_ATTR_UNDEFINED;
}

static char *dup_bytes(const ProtobufCBinaryData *b)
{
	char *s = malloc(b->len + 1);

	if (!s)
		return NULL;
	if (b->len)
		memcpy(s, b->data, b->len);
	s[b->len] = 0;
	return s;
}

static int load_attr(struct load_ctx *c, struct mi_node *n,
		     Onnx__AttributeProto *ap, struct mi_attr *a)
{
	struct mi_graph *g = c->g;
	int type = attr_type_of(ap);

	if (!ap->name || !ap->name[0])
		return mi_graph_err(g, n, -EINVAL, "attribute without a name");
	a->name = strdup(ap->name);
	if (!a->name)
		return -ENOMEM;
	a->type = type;
	switch (type) {
	case MI_ATTR_FLOAT:
		a->f = ap->f;
		break;
	case MI_ATTR_INT:
		a->i = ap->i;
		break;
	case MI_ATTR_STRING:
		a->s = dup_bytes(&ap->s);
		if (!a->s)
			return -ENOMEM;
		break;
	case MI_ATTR_FLOATS:
		if (ap->n_floats > INT_MAX)
			return -E2BIG;
		a->n = (int)ap->n_floats;
		a->floats = malloc(a->n * sizeof(float) + 1);
		if (!a->floats)
			return -ENOMEM;
		if (a->n)
			memcpy(a->floats, ap->floats, a->n * sizeof(float));
		break;
	case MI_ATTR_INTS:
		if (ap->n_ints > INT_MAX)
			return -E2BIG;
		a->n = (int)ap->n_ints;
		a->ints = malloc(a->n * sizeof(int64_t) + 1);
		if (!a->ints)
			return -ENOMEM;
		if (a->n)
			memcpy(a->ints, ap->ints, a->n * sizeof(int64_t));
		break;
	case MI_ATTR_STRINGS:
		if (ap->n_strings > INT_MAX)
			return -E2BIG;
		a->strings = calloc(ap->n_strings + 1, sizeof(char *));
		if (!a->strings)
			return -ENOMEM;
		for (size_t i = 0; i < ap->n_strings; i++) {
			a->strings[i] = dup_bytes(&ap->strings[i]);
			if (!a->strings[i])
				return -ENOMEM;
			a->n = (int)i + 1;
		}
		break;
	case MI_ATTR_TENSOR: {
		int err;

		if (!ap->t)
			return mi_graph_err(g, n, -EINVAL,
				"attribute '%s': TENSOR without a value",
				ap->name);
		a->t = calloc(1, sizeof(*a->t));
		if (!a->t)
			return -ENOMEM;
		a->t->producer = -1;
		a->t->name = strdup(ap->t->name ? ap->t->name : ap->name);
		if (!a->t->name)
			return -ENOMEM;
		err = tensor_from_proto(g, c->basedir, ap->t, a->t);
		if (err) {
			char msg[sizeof(g->err)];

			snprintf(msg, sizeof(msg), "%s", g->err);
			return mi_graph_err(g, n, err, "attribute '%s': %s",
					    ap->name, msg);
		}
		a->t->flags |= MI_TF_CONST;
		break;
	}
	default:
		/* GRAPH(S) (If/Loop/Scan bodies), SPARSE_TENSOR(S), TYPE_PROTO(S)
		 * and TENSORS: kept as an untyped attribute; an op that needs
		 * one reports it as unsupported. */
		a->type = MI_ATTR_UNDEFINED;
		break;
	}
	return 0;
}

/* ---- graph ---------------------------------------------------------- */

/* Name -> tensor index hash table used only while loading. */
struct name_map {
	int *slot;	/* tensor index or -1 */
	size_t cap;	/* power of two */
};

static uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	while (*s)
		h = (h ^ (unsigned char)*s++) * 1099511628211ull;
	return h;
}

static int map_init(struct name_map *m, size_t n)
{
	m->cap = 64;
	while (m->cap < 2 * n + 16)
		m->cap <<= 1;
	m->slot = malloc(m->cap * sizeof(int));
	if (!m->slot)
		return -ENOMEM;
	memset(m->slot, 0xff, m->cap * sizeof(int));
	return 0;
}

static int map_find(const struct name_map *m, const struct mi_graph *g,
		    const char *name)
{
	size_t i = hash_str(name) & (m->cap - 1);

	while (m->slot[i] >= 0) {
		if (!strcmp(g->tensors[m->slot[i]].name, name))
			return m->slot[i];
		i = (i + 1) & (m->cap - 1);
	}
	return -1;
}

static int map_grow(struct name_map *m, const struct mi_graph *g)
{
	struct name_map nm;

	if (map_init(&nm, m->cap))
		return -ENOMEM;
	for (size_t i = 0; i < m->cap; i++) {
		int t = m->slot[i];

		if (t < 0)
			continue;
		size_t j = hash_str(g->tensors[t].name) & (nm.cap - 1);

		while (nm.slot[j] >= 0)
			j = (j + 1) & (nm.cap - 1);
		nm.slot[j] = t;
	}
	free(m->slot);
	*m = nm;
	return 0;
}

/* Find or create the tensor called name. */
static int map_get(struct name_map *m, struct mi_graph *g, const char *name,
		   bool *created)
{
	int t = map_find(m, g, name);

	if (created)
		*created = false;
	if (t >= 0)
		return t;
	if ((size_t)g->ntensors * 2 + 2 > m->cap && map_grow(m, g))
		return -ENOMEM;
	t = mi_graph_add_tensor(g, name);
	if (t < 0)
		return t;
	size_t i = hash_str(name) & (m->cap - 1);

	while (m->slot[i] >= 0)
		i = (i + 1) & (m->cap - 1);
	m->slot[i] = t;
	if (created)
		*created = true;
	return t;
}

static bool is_default_domain(const char *d)
{
	return !d || !d[0] || !strcmp(d, "ai.onnx");
}

static int load_opsets(struct mi_graph *g, const Onnx__ModelProto *mp)
{
	bool have_default = false;

	for (size_t i = 0; i < mp->n_opset_import; i++) {
		const Onnx__OperatorSetIdProto *o = mp->opset_import[i];

		if (!is_default_domain(o->domain))
			continue;
		if (!o->has_version)
			return mi_graph_err(g, NULL, -EINVAL,
				"opset_import for the default domain has no version");
		if (o->version < MI_OPSET_MIN || o->version > MI_OPSET_MAX)
			return mi_graph_err(g, NULL, -EOPNOTSUPP,
				"opset %" PRId64 " of the default domain is not supported (%d..%d)",
				o->version, MI_OPSET_MIN, MI_OPSET_MAX);
		g->opset = o->version;
		have_default = true;
	}
	if (!have_default)
		g->opset = 0;
	return 0;
}

static int load_node(struct load_ctx *c, struct name_map *map,
		     Onnx__NodeProto *np, int idx)
{
	struct mi_graph *g = c->g;
	struct mi_node *n = &g->nodes[idx];
	int err;

	memset(n, 0, sizeof(*n));
	g->nnodes = idx + 1;
	n->name = strdup(np->name ? np->name : "");
	n->op_type = strdup(np->op_type ? np->op_type : "");
	n->domain = strdup(is_default_domain(np->domain) ? "" : np->domain);
	if (!n->name || !n->op_type || !n->domain)
		return -ENOMEM;
	if (!n->op_type[0])
		return mi_graph_err(g, n, -EINVAL, "node without op_type");
	if (np->n_input > 4096 || np->n_output > 4096)
		return mi_graph_err(g, n, -E2BIG, "too many inputs/outputs");
	if (!n->domain[0] && !g->opset)
		return mi_graph_err(g, n, -EINVAL,
			"model imports no opset for the default domain");

	n->ninputs = (int)np->n_input;
	n->noutputs = (int)np->n_output;
	n->inputs = malloc((n->ninputs + 1) * sizeof(int));
	n->outputs = malloc((n->noutputs + 1) * sizeof(int));
	if (!n->inputs || !n->outputs)
		return -ENOMEM;
	for (int i = 0; i < n->ninputs; i++) {
		const char *nm = np->input[i] ? np->input[i] : "";

		if (!nm[0]) {
			n->inputs[i] = -1;
			continue;
		}
		n->inputs[i] = map_get(map, g, nm, NULL);
		if (n->inputs[i] < 0)
			return n->inputs[i];
		n = &g->nodes[idx];
	}
	for (int i = 0; i < n->noutputs; i++) {
		const char *nm = np->output[i] ? np->output[i] : "";
		char anon[96];
		bool created;
		int t;

		if (!nm[0]) {
			/* Omitted optional output: a private tensor nobody
			 * reads, so that ops can always write their outputs. */
			snprintf(anon, sizeof(anon), "\x01unused:%d:%d", idx, i);
			nm = anon;
		}
		t = map_get(map, g, nm, &created);
		if (t < 0)
			return t;
		n = &g->nodes[idx];
		struct mi_tensor *tt = &g->tensors[t];

		if (tt->flags & (MI_TF_INITIALIZER | MI_TF_INPUT))
			return mi_graph_err(g, n, -EINVAL,
				"output '%s' overwrites a graph input or initializer",
				nm);
		if (tt->producer >= 0)
			return mi_graph_err(g, n, -EINVAL,
				"output '%s' is also produced by node #%d",
				nm, tt->producer);
		for (int j = 0; j < i; j++)
			if (n->outputs[j] == t)
				return mi_graph_err(g, n, -EINVAL,
					"output '%s' listed twice", nm);
		tt->producer = idx;
		n->outputs[i] = t;
	}
	if (np->n_attribute > 4096)
		return mi_graph_err(g, n, -E2BIG, "too many attributes");
	n->attrs = calloc(np->n_attribute + 1, sizeof(*n->attrs));
	if (!n->attrs)
		return -ENOMEM;
	for (size_t i = 0; i < np->n_attribute; i++) {
		n->nattrs = (int)i + 1;
		err = load_attr(c, n, np->attribute[i], &n->attrs[i]);
		if (err)
			return err == -ENOMEM ?
				       mi_graph_err(g, n, err, "out of memory") :
				       err;
		for (size_t j = 0; j < i; j++)
			if (!strcmp(n->attrs[j].name, n->attrs[i].name))
				return mi_graph_err(g, n, -EINVAL,
					"attribute '%s' given twice",
					n->attrs[i].name);
	}

	/* Opset < 7 arithmetic: broadcast=1 with an axis aligns the second
	 * input at that axis, which numpy-style broadcasting does not do. */
	if (g->opset < 7 && !n->domain[0] && mi_attr_int(n, "broadcast", 0) &&
	    mi_attr_get(n, "axis")) {
		/* ... unless it is the suffix alignment numpy uses too:
		 * axis == rank(A) - rank(B), with both ranks known now
		 * (graph inputs and initializers). */
		struct mi_tensor *a = mi_in(g, n, 0), *b = mi_in(g, n, 1);
		int64_t axis = mi_attr_int(n, "axis", 0);

		if (!a || !b || a->ndim < 0 || b->ndim < 0 ||
		    !(a->flags & (MI_TF_INPUT | MI_TF_CONST)) ||
		    !(b->flags & (MI_TF_INPUT | MI_TF_CONST)) ||
		    (axis < 0 ? axis + a->ndim : axis) != a->ndim - b->ndim)
			return mi_graph_err(g, n, -EOPNOTSUPP,
				"unsupported legacy attribute 'axis' with broadcast=1 (opset %" PRId64 ")",
				g->opset);
	}

	n->def = mi_op_find(n->op_type, n->domain);
	if (!n->def && g->allow_unknown_ops)
		return 0;
	if (!n->def) {
		if (n->domain[0])
			return mi_graph_err(g, n, -EOPNOTSUPP,
				"unsupported op (domain '%s')", n->domain);
		return mi_graph_err(g, n, -EOPNOTSUPP, "unsupported op");
	}
	const struct mi_op_def *d = n->def;

	if (n->ninputs < d->min_inputs ||
	    (d->max_inputs >= 0 && n->ninputs > d->max_inputs))
		return mi_graph_err(g, n, -EINVAL,
			"%d inputs, expected %d..%d", n->ninputs, d->min_inputs,
			d->max_inputs);
	if (n->noutputs < d->min_outputs ||
	    (d->max_outputs >= 0 && n->noutputs > d->max_outputs))
		return mi_graph_err(g, n, -EINVAL,
			"%d outputs, expected %d..%d", n->noutputs,
			d->min_outputs, d->max_outputs);
	for (int i = 0; i < d->min_inputs && i < n->ninputs; i++)
		if (n->inputs[i] < 0)
			return mi_graph_err(g, n, -EINVAL,
				"required input %d is empty", i);
	return 0;
}

static int load_graph(struct load_ctx *c, Onnx__GraphProto *gp)
{
	struct mi_graph *g = c->g;
	struct name_map map = { 0 };
	int err;

	if (gp->n_node > 1000000 || gp->n_initializer > 1000000 ||
	    gp->n_input > 100000 || gp->n_output > 100000)
		return mi_graph_err(g, NULL, -E2BIG, "graph too large");
	if (gp->n_sparse_initializer)
		return mi_graph_err(g, NULL, -EOPNOTSUPP,
			"sparse initializers are not supported");
	g->name = strdup(gp->name ? gp->name : "");
	if (!g->name)
		return -ENOMEM;
	err = map_init(&map, gp->n_initializer + gp->n_input + gp->n_node);
	if (err)
		return err;

	/* initializers */
	for (size_t i = 0; i < gp->n_initializer; i++) {
		Onnx__TensorProto *tp = gp->initializer[i];
		bool created;
		int t;

		if (!tp->name || !tp->name[0]) {
			err = mi_graph_err(g, NULL, -EINVAL,
				"initializer #%zu has no name", i);
			goto out;
		}
		t = map_get(&map, g, tp->name, &created);
		if (t < 0) {
			err = t;
			goto out;
		}
		if (!created) {
			err = mi_graph_err(g, NULL, -EINVAL,
				"initializer '%s' defined twice", tp->name);
			goto out;
		}
		err = tensor_from_proto(g, c->basedir, tp, &g->tensors[t]);
		if (err)
			goto out;
		g->tensors[t].flags |= MI_TF_INITIALIZER | MI_TF_CONST;
	}

	/* inputs (those that are also initializers are constants) */
	g->inputs = malloc((gp->n_input + 1) * sizeof(int));
	if (!g->inputs) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < gp->n_input; i++) {
		const Onnx__ValueInfoProto *vi = gp->input[i];
		bool created;
		int t;

		if (!vi->name || !vi->name[0]) {
			err = mi_graph_err(g, NULL, -EINVAL,
				"graph input #%zu has no name", i);
			goto out;
		}
		t = map_get(&map, g, vi->name, &created);
		if (t < 0) {
			err = t;
			goto out;
		}
		if (g->tensors[t].flags & MI_TF_INITIALIZER)
			continue;
		if (g->tensors[t].flags & MI_TF_INPUT) {
			err = mi_graph_err(g, NULL, -EINVAL,
				"graph input '%s' declared twice", vi->name);
			goto out;
		}
		err = apply_value_info(g, vi, &g->tensors[t], true);
		if (err)
			goto out;
		g->tensors[t].flags |= MI_TF_INPUT;
		g->inputs[g->ninputs++] = t;
	}

	/* nodes */
	g->nodes = calloc(gp->n_node + 1, sizeof(*g->nodes));
	if (!g->nodes) {
		err = -ENOMEM;
		goto out;
	}
	g->nodes_cap = (int)gp->n_node + 1;
	for (size_t i = 0; i < gp->n_node; i++) {
		err = load_node(c, &map, gp->node[i], (int)i);
		if (err)
			goto out;
	}

	/* value_info: shapes/dtypes of intermediates, informative only */
	for (size_t i = 0; i < gp->n_value_info; i++) {
		const Onnx__ValueInfoProto *vi = gp->value_info[i];
		int t = vi->name ? map_find(&map, g, vi->name) : -1;

		if (t < 0 || g->tensors[t].flags & (MI_TF_CONST | MI_TF_INPUT))
			continue;
		err = apply_value_info(g, vi, &g->tensors[t], false);
		if (err)
			goto out;
	}

	/* outputs */
	if (!gp->n_output) {
		err = mi_graph_err(g, NULL, -EINVAL, "graph has no outputs");
		goto out;
	}
	g->outputs = malloc(gp->n_output * sizeof(int));
	if (!g->outputs) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < gp->n_output; i++) {
		const Onnx__ValueInfoProto *vi = gp->output[i];
		int t = vi->name && vi->name[0] ? map_find(&map, g, vi->name) :
						  -1;

		if (t < 0) {
			err = mi_graph_err(g, NULL, -EINVAL,
				"graph output '%s' is produced by no node, input or initializer",
				vi->name ? vi->name : "");
			goto out;
		}
		for (int j = 0; j < g->noutputs; j++)
			if (g->outputs[j] == t) {
				err = mi_graph_err(g, NULL, -EINVAL,
					"graph output '%s' listed twice",
					vi->name);
				goto out;
			}
		g->tensors[t].flags |= MI_TF_OUTPUT;
		g->outputs[g->noutputs++] = t;
	}
	err = mi_graph_link(g);
	if (!err)
		err = mi_graph_toposort(g);
out:
	free(map.slot);
	return err;
}

static Onnx__ModelProto *unpack_model(struct mi_graph *g, const void *buf,
				      size_t len)
{
	Onnx__ModelProto *mp;

	if (!len) {
		mi_graph_err(g, NULL, -EINVAL, "empty file");
		return NULL;
	}
	mp = onnx__model_proto__unpack(NULL, len, buf);
	if (!mp)
		mi_graph_err(g, NULL, -EINVAL,
			"not a valid ONNX model (protobuf parse failed: truncated or garbled)");
	return mp;
}

/* metadata_props, kept for lib/meta (switchable models). */
static int load_metadata(struct mi_graph *g, const Onnx__ModelProto *mp)
{
	size_t n = mp->n_metadata_props;

	if (!n)
		return 0;
	g->meta_key = calloc(n, sizeof(char *));
	g->meta_value = calloc(n, sizeof(char *));
	if (!g->meta_key || !g->meta_value)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const Onnx__StringStringEntryProto *e = mp->metadata_props[i];

		g->meta_key[i] = strdup(e->key ? e->key : "");
		g->meta_value[i] = strdup(e->value ? e->value : "");
		g->nmeta++;
		if (!g->meta_key[i] || !g->meta_value[i])
			return -ENOMEM;
	}
	return 0;
}

/* Convert an unpacked model (consumed: raw tensor data is taken over). */
static int load_model(struct mi_graph *g, Onnx__ModelProto *mp,
		      const char *basedir)
{
	struct load_ctx c = { .g = g, .basedir = basedir };
	int err;

	if (!mp->graph) {
		err = mi_graph_err(g, NULL, -EINVAL,
			"not an ONNX model (no graph)");
		goto out;
	}
	if (mp->n_functions) {
		/* Model-local functions would make their op_types resolvable;
		 * MetaInfer does not inline them. */
	}
	err = load_opsets(g, mp);
	if (!err)
		err = load_graph(&c, mp->graph);
	if (!err)
		err = load_metadata(g, mp);
	if (err == -ENOMEM && !g->err[0])
		mi_graph_err(g, NULL, err, "out of memory");
out:
	onnx__model_proto__free_unpacked(mp, NULL);
	return err;
}

int mi_onnx_load_buffer(struct mi_graph *g, const void *buf, size_t len,
			const char *basedir)
{
	Onnx__ModelProto *mp = unpack_model(g, buf, len);

	return mp ? load_model(g, mp, basedir) : -EINVAL;
}

int mi_onnx_load_file(struct mi_graph *g, const char *path)
{
	Onnx__ModelProto *mp;
	char dir[PATH_MAX];
	const char *slash;
	struct stat st;
	void *map;
	int fd, err;

	/* Map the file only while protobuf-c unpacks it. */
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		return mi_graph_err(g, NULL, err, "cannot read: %s",
				    strerror(-err));
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		err = S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
		close(fd);
		return mi_graph_err(g, NULL, err, "cannot read: %s",
				    strerror(-err));
	}
	if ((uint64_t)st.st_size > MI_MAX_MODEL_BYTES) {
		close(fd);
		return mi_graph_err(g, NULL, -EFBIG, "file larger than 2 GiB");
	}
	if (!st.st_size) {
		close(fd);
		return mi_graph_err(g, NULL, -EINVAL, "empty file");
	}
	map = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED) {
		err = -errno;
		return mi_graph_err(g, NULL, err, "cannot map: %s",
				    strerror(-err));
	}
	mp = unpack_model(g, map, st.st_size);
	munmap(map, st.st_size);
	if (!mp)
		return -EINVAL;
	slash = strrchr(path, '/');
	if (slash)
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	else
		snprintf(dir, sizeof(dir), ".");
	if (!dir[0])
		snprintf(dir, sizeof(dir), "/");
	return load_model(g, mp, dir);
}

int mi_onnx_read_tensor(const char *path, struct mi_tensor *t, char *errbuf,
			size_t errlen)
{
	struct mi_graph g;
	Onnx__TensorProto *tp;
	size_t len;
	void *buf;
	int err;

	memset(t, 0, sizeof(*t));
	t->producer = -1;
	err = mi_read_file(path, MI_MAX_MODEL_BYTES, &buf, &len);
	if (err) {
		snprintf(errbuf, errlen, "%s: cannot read: %s", path,
			 strerror(-err));
		return err;
	}
	tp = onnx__tensor_proto__unpack(NULL, len, buf);
	free(buf);
	if (!tp) {
		snprintf(errbuf, errlen, "%s: not a TensorProto", path);
		return -EINVAL;
	}
	mi_graph_init(&g);
	t->name = strdup(tp->name ? tp->name : "");
	err = t->name ? tensor_from_proto(&g, NULL, tp, t) : -ENOMEM;
	if (err) {
		snprintf(errbuf, errlen, "%s: %s", path,
			 g.err[0] ? g.err : strerror(-err));
		mi_tensor_fini(t);
	}
	mi_graph_fini(&g);
	onnx__tensor_proto__free_unpacked(tp, NULL);
	return err;
}
