// SPDX-License-Identifier: MIT
/* Public model API: load, describe, run, free.  See metainfer.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "cpu/cpu.h"
#include "plan/place-impl.h"

static int model_error(struct mi_model *m, int err)
{
	const char *why = m->g.err[0] ? m->g.err : strerror(-err);

	return mi_set_error(err, "%s: %s", m->label, why);
}

void mi_model_free(struct mi_model *m)
{
	if (!m)
		return;
	if (m->cpu_planned)
		mi_cpu_plan_fini(&m->g);
	mi_place_fini(m);
	mi_model_plan_fini(m);
	mi_switch_fini(m);
	mi_graph_fini(&m->g);
	free(m->arena);
	free(m->label);
	free(m->in_info);
	free(m->out_info);
	free(m->bound_ndim);
	free(m->bound_dims);
	free(m->node_state);
	free(m->last_use);
	free(m->pos_of);
	free(m->prof_ns);
	free(m->prof_calls);
	free(m->prof_min);
	free(m);
}

static int check_opts(const struct mi_model_opts *o)
{
	if (!o)
		return 0;
	if (o->flags & ~MI_MODEL_FLAGS_MASK)
		return mi_set_error(-EINVAL, "unknown model flags 0x%x",
				    o->flags & ~MI_MODEL_FLAGS_MASK);
	for (size_t i = 0; i < sizeof(o->reserved) / sizeof(o->reserved[0]);
	     i++)
		if (o->reserved[i])
			return mi_set_error(-EINVAL,
					    "reserved model options must be zero");
	if (o->reserved32)
		return mi_set_error(-EINVAL,
				    "reserved model options must be zero");
	if (o->nthreads < 0)
		return mi_set_error(-EINVAL, "negative thread count");
	if (o->isa < MI_ISA_CAP_NATIVE || o->isa > MI_ISA_CAP_AVX512)
		return mi_set_error(-EINVAL, "unknown ISA cap %d", o->isa);
	if (o->isa != MI_ISA_CAP_NATIVE &&
	    o->isa - 1 > mi_cpu_isa_native())
		return mi_set_error(-EOPNOTSUPP,
				    "ISA cap %s: this CPU lacks it",
				    mi_cpu_isa_name(o->isa - 1));
	return 0;
}

static void fill_info(struct mi_tensor_info *info, const struct mi_tensor *t)
{
	memset(info, 0, sizeof(*info));
	info->name = t->name;
	info->dtype = t->dtype;
	info->ndim = t->ndim;
	for (int d = 0; d < MI_MAX_DIMS; d++) {
		info->dims[d] = d < t->ndim ? t->dims[d] : 0;
		info->dim_param[d] = d < t->ndim ? t->dim_param[d] : NULL;
	}
}

static int build_info(struct mi_model *m)
{
	struct mi_graph *g = &m->g;

	m->in_info = calloc(g->ninputs + 1, sizeof(*m->in_info));
	m->out_info = calloc(g->noutputs + 1, sizeof(*m->out_info));
	m->bound_ndim = calloc(g->ninputs + 1, sizeof(int32_t));
	m->bound_dims = calloc((size_t)(g->ninputs + 1) * MI_MAX_DIMS,
			       sizeof(int64_t));
	if (!m->in_info || !m->out_info || !m->bound_ndim || !m->bound_dims)
		return -ENOMEM;
	for (int i = 0; i < g->ninputs; i++)
		fill_info(&m->in_info[i], &g->tensors[g->inputs[i]]);
	for (int i = 0; i < g->noutputs; i++)
		fill_info(&m->out_info[i], &g->tensors[g->outputs[i]]);
	return 0;
}

static int model_open(const void *buf, size_t len, const char *path,
		      const char *basedir, const char *label,
		      const struct mi_model_opts *opts, bool prepare,
		      bool allow_unknown, struct mi_model **modelp)
{
	struct mi_model *m;
	int err;

	*modelp = NULL;
	mi_clear_error();
	err = check_opts(opts);
	if (err)
		return err;
	m = calloc(1, sizeof(*m));
	if (!m)
		return mi_set_error(-ENOMEM, "out of memory");
	if (opts)
		m->opts = *opts;
	mi_max_tensor_bytes = m->opts.max_tensor_bytes ?
				      m->opts.max_tensor_bytes :
				      4ull << 30;
	mi_graph_init(&m->g);
	m->label = strdup(label ? label : path ? path : "<buffer>");
	if (!m->label) {
		free(m);
		return mi_set_error(-ENOMEM, "out of memory");
	}
	m->g.label = m->label;
	m->g.allow_unknown_ops = allow_unknown;
	m->opts.devices = NULL; /* the caller's string: parsed now */
	err = mi_place_init(m, opts ? opts->devices : NULL);
	if (err) {
		mi_graph_fini(&m->g);
		free(m->label);
		free(m);
		return err;
	}
	if (path)
		err = mi_onnx_load_file(&m->g, path);
	else
		err = mi_onnx_load_buffer(&m->g, buf, len, basedir);
	if (err)
		goto err_free;
	err = build_info(m);
	if (err)
		goto err_free;
	if (!(m->opts.flags & MI_MODEL_NO_NORMALIZE)) {
		err = mi_graph_normalize(&m->g, m->opts.flags, &m->stats);
		if (err)
			goto err_free;
	} else if (!(m->opts.flags & MI_MODEL_NO_FOLD)) {
		err = mi_graph_fold_constants(&m->g);
		if (err < 0)
			goto err_free;
		m->stats.folded = err;
	}
	/* Graph outputs may have been renamed by passes: refresh. */
	for (int i = 0; i < m->g.noutputs; i++)
		fill_info(&m->out_info[i], &m->g.tensors[m->g.outputs[i]]);
	err = mi_switch_init(m);
	if (err)
		goto err_free;
	if (prepare) {
		err = mi_model_prepare(m, NULL, NULL);
		if (err == -EAGAIN) /* unknown input rank: plan at run time */
			err = 0;
		else if (!err)
			err = mi_switch_check(m);
		if (err)
			goto err_free;
	}
	*modelp = m;
	return 0;
err_free:
	if (err == -ENOMEM && !m->g.err[0])
		mi_graph_err(&m->g, NULL, err, "out of memory");
	model_error(m, err);
	mi_model_free(m);
	return err;
}

int mi_model_load(const char *path, const struct mi_model_opts *opts,
		  struct mi_model **modelp)
{
	if (!path || !modelp)
		return mi_set_error(-EINVAL, "mi_model_load: NULL argument");
	return model_open(NULL, 0, path, NULL, path, opts, true, false, modelp);
}

int mi_model_load_graph(const char *path, const struct mi_model_opts *opts,
			struct mi_model **modelp)
{
	if (!path || !modelp)
		return mi_set_error(-EINVAL, "mi_model_load: NULL argument");
	return model_open(NULL, 0, path, NULL, path, opts, false, false, modelp);
}

int mi_model_load_inspect(const char *path, const struct mi_model_opts *opts,
			  struct mi_model **modelp)
{
	if (!path || !modelp)
		return mi_set_error(-EINVAL, "mi_model_load: NULL argument");
	return model_open(NULL, 0, path, NULL, path, opts, false, true, modelp);
}

int mi_model_load_buffer(const void *buf, size_t len, const char *basedir,
			 const char *label, const struct mi_model_opts *opts,
			 struct mi_model **modelp)
{
	if ((!buf && len) || !modelp)
		return mi_set_error(-EINVAL,
				    "mi_model_load_buffer: NULL argument");
	return model_open(buf, len, NULL, basedir, label, opts, true, false,
			  modelp);
}

int mi_model_input_count(const struct mi_model *m)
{
	return m ? m->g.ninputs : -EINVAL;
}

int mi_model_output_count(const struct mi_model *m)
{
	return m ? m->g.noutputs : -EINVAL;
}

int mi_model_input_info(const struct mi_model *m, int i,
			struct mi_tensor_info *info)
{
	if (!m || !info || i < 0 || i >= m->g.ninputs)
		return -EINVAL;
	*info = m->in_info[i];
	return 0;
}

int mi_model_output_info(const struct mi_model *m, int i,
			 struct mi_tensor_info *info)
{
	if (!m || !info || i < 0 || i >= m->g.noutputs)
		return -EINVAL;
	*info = m->out_info[i];
	return 0;
}

int mi_model_run(struct mi_model *m, const struct mi_value *inputs,
		 int ninputs, struct mi_value *outputs, int noutputs)
{
	struct mi_graph *g;
	const struct mi_value *map[256];
	int32_t ndim[256];
	int64_t (*dims)[MI_MAX_DIMS];
	bool same;
	int err;

	if (!m || (!inputs && ninputs) || (!outputs && noutputs) ||
	    ninputs < 0 || noutputs < 0)
		return mi_set_error(-EINVAL, "mi_model_run: bad arguments");
	g = &m->g;
	if (g->ninputs > 256)
		return mi_set_error(-E2BIG, "%s: more than 256 inputs",
				    m->label);
	if (noutputs > g->noutputs)
		return mi_set_error(-EINVAL,
			"%s: %d outputs requested, the model has %d",
			m->label, noutputs, g->noutputs);
	memset(map, 0, sizeof(map));
	for (int i = 0; i < ninputs; i++) {
		int k = -1;

		if (inputs[i].name) {
			for (int j = 0; j < g->ninputs; j++)
				if (!strcmp(g->tensors[g->inputs[j]].name,
					    inputs[i].name))
					k = j;
			if (k < 0)
				return mi_set_error(-ENOENT,
					"%s: model has no input '%s'",
					m->label, inputs[i].name);
		} else {
			k = i;
			if (k >= g->ninputs)
				return mi_set_error(-EINVAL,
					"%s: %d inputs given, the model has %d",
					m->label, ninputs, g->ninputs);
		}
		if (map[k])
			return mi_set_error(-EINVAL, "%s: input '%s' given twice",
					    m->label, m->in_info[k].name);
		map[k] = &inputs[i];
	}
	dims = (int64_t (*)[MI_MAX_DIMS])m->bound_dims;
	same = m->prepared;
	for (int k = 0; k < g->ninputs; k++) {
		const struct mi_tensor_info *d = &m->in_info[k];
		const struct mi_value *v = map[k];
		int64_t numel = 1;

		if (!v)
			return mi_set_error(-EINVAL, "%s: input '%s' missing",
					    m->label, d->name);
		if (v->dtype != d->dtype)
			return mi_set_error(-EINVAL,
				"%s: input '%s' is %s, the model expects %s",
				m->label, d->name, mi_dtype_name(v->dtype),
				mi_dtype_name(d->dtype));
		if (v->ndim < 0 || v->ndim > MI_MAX_DIMS ||
		    (d->ndim >= 0 && v->ndim != d->ndim))
			return mi_set_error(-EINVAL,
				"%s: input '%s' has rank %d, the model expects %d",
				m->label, d->name, v->ndim, d->ndim);
		for (int i = 0; i < v->ndim; i++) {
			if (v->dims[i] < 0 ||
			    (d->ndim >= 0 && d->dims[i] >= 0 &&
			     v->dims[i] != d->dims[i]))
				return mi_set_error(-EINVAL,
					"%s: input '%s' dim %d is %lld, the model expects %lld",
					m->label, d->name, i,
					(long long)v->dims[i],
					(long long)d->dims[i]);
			if (v->dims[i] && numel > INT64_MAX / v->dims[i])
				return mi_set_error(-EINVAL,
					"%s: input '%s' is too large",
					m->label, d->name);
			numel *= v->dims[i];
		}
		if ((uint64_t)numel * mi_dtype_size(v->dtype) != v->nbytes ||
		    (!v->data && v->nbytes))
			return mi_set_error(-EINVAL,
				"%s: input '%s' has %llu bytes, its shape needs %llu",
				m->label, d->name,
				(unsigned long long)v->nbytes,
				(unsigned long long)numel *
					mi_dtype_size(v->dtype));
		ndim[k] = v->ndim;
		if (m->bound_ndim[k] != v->ndim ||
		    memcmp(dims[k], v->dims, v->ndim * sizeof(int64_t)))
			same = false;
	}
	if (!same) {
		int64_t *nd = malloc((size_t)(g->ninputs + 1) * MI_MAX_DIMS *
				     sizeof(int64_t));

		if (!nd)
			return mi_set_error(-ENOMEM, "out of memory");
		for (int k = 0; k < g->ninputs; k++) {
			memset(nd + k * MI_MAX_DIMS, 0,
			       MI_MAX_DIMS * sizeof(int64_t));
			memcpy(nd + k * MI_MAX_DIMS, map[k]->dims,
			       map[k]->ndim * sizeof(int64_t));
		}
		err = mi_model_prepare(m, ndim, nd);
		free(nd);
		if (err)
			return model_error(m, err);
	}
	for (int k = 0; k < g->ninputs; k++) {
		struct mi_tensor *t = &g->tensors[g->inputs[k]];

		t->data = map[k]->data;
		t->nbytes = map[k]->nbytes;
	}
	err = mi_model_exec(m);
	if (err)
		return model_error(m, err);
	for (int i = 0; i < noutputs; i++) {
		struct mi_tensor *t = &g->tensors[g->outputs[i]];
		struct mi_value *o = &outputs[i];

		memset(o, 0, sizeof(*o));
		o->name = m->out_info[i].name;
		o->dtype = t->dtype;
		o->ndim = t->ndim;
		memcpy(o->dims, t->dims, sizeof(o->dims));
		o->data = t->data;
		o->nbytes = t->nbytes;
	}
	return 0;
}
