// SPDX-License-Identifier: MIT
/*
 * Switchable layers: read the "metainfer.switch" metadata, find every
 * layer's selectors, branches and merge in the normalized graph, and
 * activate a configuration by pruning at plan time.
 *
 * A layer is out = Sum_k Mul(branch_k, sel_k) with sel_k a float [1]
 * initializer.  Activating variant c rewires every reader of out to
 * branch_c, kills the Sum and the Muls, and marks dead whatever then has
 * no reader (the other branches): nothing of them runs, and their
 * weights stay in the graph (dead-node removal here never frees
 * constants), so a later switch needs no reload.  The full graph is
 * restored from a snapshot of the dead flags before each switch.  The
 * model is planned again for the input shapes it had.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "meta/meta-impl.h"
#include "cpu/cpu.h"

#define KEY "metainfer.switch"

static int bad(struct mi_model *m, const char *fmt, const char *a,
	       const char *b)
{
	return mi_graph_err(&m->g, NULL, -EINVAL, "%s metadata: %s%s%s", KEY,
			    a, b ? ": " : "", b ? b : "");
}

static int live_node_reading(struct mi_graph *g, int t, const char *op)
{
	for (int i = 0; i < g->nnodes; i++) {
		struct mi_node *n = &g->nodes[i];

		if (n->dead || strcmp(n->op_type, op))
			continue;
		for (int j = 0; j < n->ninputs; j++)
			if (n->inputs[j] == t)
				return i;
	}
	return -1;
}

static int layer_init(struct mi_model *m, struct mi_switch_layer *L,
		      const struct mi_mj *o)
{
	struct mi_graph *g = &m->g;
	const struct mi_mj *v, *sel, *macs, *lat, *name, *in;
	int ni;

	name = mi_mj_get(o, "name");
	if (!name || name->type != MJ_STR)
		return bad(m, NULL, "a layer has no name", NULL);
	L->name = strdup(name->str);
	if (!L->name)
		return -ENOMEM;
	v = mi_mj_get(o, "variants");
	sel = mi_mj_get(o, "select");
	macs = mi_mj_get(o, "macs");
	lat = mi_mj_get(o, "latency_us");
	in = mi_mj_get(o, "input");
	if (!v || v->type != MJ_ARR || !sel || sel->type != MJ_ARR ||
	    v->n != sel->n || v->n < 1 || v->n > MI_SWITCH_MAX_VARIANTS)
		return bad(m, NULL, L->name,
			   "variants and select must be arrays of the same length (1..8)");
	L->nvar = v->n;
	L->in_ch = (int)(mi_mj_get(o, "in_channels") ?
				 mi_mj_get(o, "in_channels")->num : 0);
	L->out_ch = (int)(mi_mj_get(o, "out_channels") ?
				  mi_mj_get(o, "out_channels")->num : 0);
	L->height = (int)(mi_mj_get(o, "height") ?
				  mi_mj_get(o, "height")->num : 0);
	L->width = (int)(mi_mj_get(o, "width") ?
				 mi_mj_get(o, "width")->num : 0);
	L->in_t = in && in->type == MJ_STR ?
			  mi_graph_find_tensor(g, in->str) : -1;
	L->merge_n = -1;
	for (int k = 0; k < L->nvar; k++) {
		const struct mi_mj *s = &sel->v[k];
		struct mi_node *mul;
		int t;

		if (v->v[k].type != MJ_STR || s->type != MJ_STR)
			return bad(m, NULL, L->name, "non-string variant");
		L->variants[k] = strdup(v->v[k].str);
		if (!L->variants[k])
			return -ENOMEM;
		L->kind[k] = !strcmp(v->v[k].str, "dws") ? MI_META_DWS :
			     !strcmp(v->v[k].str, "group") ? MI_META_GROUP :
							     MI_META_STD;
		if (macs && macs->type == MJ_ARR && k < macs->n)
			L->macs[k] = (uint64_t)macs->v[k].num;
		if (lat && lat->type == MJ_ARR && k < lat->n)
			L->lat_us[k] = lat->v[k].num;
		t = mi_graph_find_tensor(g, s->str);
		if (t < 0 || !(g->tensors[t].flags & MI_TF_CONST) ||
		    g->tensors[t].dtype != MI_DT_FLOAT ||
		    mi_tensor_numel(&g->tensors[t]) != 1)
			return bad(m, NULL, s->str,
				   "not a float initializer of one element");
		L->sel_t[k] = t;
		ni = live_node_reading(g, t, "Mul");
		if (ni < 0)
			return bad(m, NULL, s->str, "no Mul reads it");
		mul = &g->nodes[ni];
		L->mul_n[k] = ni;
		L->branch_t[k] = mul->inputs[0] == t ? mul->inputs[1] :
						       mul->inputs[0];
		ni = live_node_reading(g, mul->outputs[0], "Sum");
		if (ni < 0 || (L->merge_n >= 0 && ni != L->merge_n))
			return bad(m, NULL, L->name,
				   "the selected branches do not meet in one Sum");
		L->merge_n = ni;
	}
	if (g->nodes[L->merge_n].ninputs != L->nvar)
		return bad(m, NULL, L->name, "the Sum has other inputs");
	L->out_t = g->nodes[L->merge_n].outputs[0];
	if (g->tensors[L->out_t].flags & MI_TF_OUTPUT)
		return bad(m, NULL, L->name,
			   "a switchable layer may not be a graph output");
	/* the readers of the merged output, to rewire */
	for (int i = 0; i < g->nnodes; i++) {
		struct mi_node *n = &g->nodes[i];

		if (n->dead)
			continue;
		for (int j = 0; j < n->ninputs; j++) {
			struct mi_switch_use *nu;

			if (n->inputs[j] != L->out_t)
				continue;
			nu = realloc(L->uses, (L->nuses + 1) * sizeof(*nu));
			if (!nu)
				return -ENOMEM;
			L->uses = nu;
			L->uses[L->nuses++] = (struct mi_switch_use){ i, j };
		}
	}
	return 0;
}

static int configs_init(struct mi_model *m, struct mi_switch *sw,
			const struct mi_mj *a)
{
	if (!a)
		return 0;
	if (a->type != MJ_ARR)
		return bad(m, NULL, "configs is not an array", NULL);
	sw->cfg = calloc(a->n + 1, sizeof(*sw->cfg));
	if (!sw->cfg)
		return -ENOMEM;
	for (int i = 0; i < a->n; i++) {
		const struct mi_mj *c = mi_mj_get(&a->v[i], "choice");
		const struct mi_mj *acc = mi_mj_get(&a->v[i], "accuracy");
		struct mi_switch_config *d = &sw->cfg[sw->ncfg];

		if (!c || c->type != MJ_ARR || c->n != sw->nlayers)
			return bad(m, NULL, "a configuration's choice does not name every layer",
				   NULL);
		d->latency_us = 0;
		for (int l = 0; l < c->n; l++) {
			int k = (int)c->v[l].num;

			if (k < 0 || k >= sw->layers[l].nvar)
				return bad(m, NULL, "a configuration names a variant out of range",
					   NULL);
			d->choice[l] = k;
			d->latency_us += sw->layers[l].lat_us[k];
		}
		d->accuracy = acc ? acc->num : 0;
		sw->ncfg++;
	}
	return 0;
}

int mi_switch_init(struct mi_model *m)
{
	struct mi_graph *g = &m->g;
	const char *text = NULL, *ctl = NULL;
	const struct mi_mj *layers;
	struct mi_switch *sw;
	struct mi_mj root;
	int err, pos;

	for (int i = 0; i < g->nmeta; i++)
		if (!strcmp(g->meta_key[i], KEY))
			text = g->meta_value[i];
		else if (!strcmp(g->meta_key[i], MI_METACTL_KEY))
			ctl = g->meta_value[i];
	if (!text)
		return 0;
	if (mi_mj_parse(text, &root, &pos))
		return mi_graph_err(g, NULL, -EINVAL,
				    "%s metadata: malformed JSON at byte %d",
				    KEY, pos);
	sw = calloc(1, sizeof(*sw));
	if (!sw) {
		mi_mj_free(&root);
		return -ENOMEM;
	}
	m->sw = sw;
	layers = mi_mj_get(&root, "layers");
	if (!layers || layers->type != MJ_ARR || layers->n < 1 ||
	    layers->n > MI_SWITCH_MAX_LAYERS) {
		err = bad(m, NULL, "layers must be an array of 1..16 layers",
			  NULL);
		goto out;
	}
	for (int l = 0; l < layers->n; l++) {
		sw->nlayers++;
		err = layer_init(m, &sw->layers[l], &layers->v[l]);
		if (err)
			goto out;
	}
	err = configs_init(m, sw, mi_mj_get(&root, "configs"));
	if (err)
		goto out;
	sw->nnodes = g->nnodes;
	sw->dead0 = calloc(g->nnodes + 1, sizeof(bool));
	if (!sw->dead0) {
		err = -ENOMEM;
		goto out;
	}
	for (int i = 0; i < g->nnodes; i++)
		sw->dead0[i] = g->nodes[i].dead;
	for (int l = 0; l < sw->nlayers; l++)
		sw->cur[l] = -1;
	if (ctl && mi_metactl_set(sw, ctl))
		err = mi_graph_err(g, NULL, -EINVAL,
				   "%s metadata: not a controller of version 1 with %d features",
				   MI_METACTL_KEY, MI_METACTL_NFEAT);
out:
	mi_mj_free(&root);
	return err;
}

static int channels(const struct mi_tensor *t)
{
	return t->ndim == 4 ? (int)t->dims[1] : -1;
}

int mi_switch_check(struct mi_model *m)
{
	struct mi_switch *sw = m->sw;
	struct mi_graph *g = &m->g;

	if (!sw || sw->pruned)
		return 0;
	for (int l = 0; l < sw->nlayers; l++) {
		struct mi_switch_layer *L = &sw->layers[l];
		const struct mi_tensor *o = &g->tensors[L->out_t];

		if (L->in_t >= 0 && channels(&g->tensors[L->in_t]) != L->in_ch)
			return mi_graph_err(g, NULL, -EINVAL,
				"switchable layer %s: input has %d channels, the metadata says %d",
				L->name, channels(&g->tensors[L->in_t]),
				L->in_ch);
		for (int k = 0; k < L->nvar; k++) {
			const struct mi_tensor *b = &g->tensors[L->branch_t[k]];

			if (channels(b) != L->out_ch || b->ndim != o->ndim ||
			    memcmp(b->dims, o->dims, o->ndim * sizeof(int64_t)))
				return mi_graph_err(g, NULL, -EINVAL,
					"switchable layer %s: variant %s gives %d channels, the layer has %d",
					L->name, L->variants[k], channels(b),
					L->out_ch);
		}
	}
	return 0;
}

void mi_switch_fini(struct mi_model *m)
{
	struct mi_switch *sw = m->sw;

	if (!sw)
		return;
	for (int l = 0; l < sw->nlayers; l++) {
		free(sw->layers[l].name);
		for (int k = 0; k < sw->layers[l].nvar; k++)
			free(sw->layers[l].variants[k]);
		free(sw->layers[l].uses);
	}
	free(sw->cfg);
	free(sw->dead0);
	mi_metactl_free(sw->ctl);
	free(sw);
	m->sw = NULL;
}

/* Dead-node removal that keeps every constant's data (the other
 * variants' weights). */
static int prune(struct mi_graph *g)
{
	unsigned char *used;
	int err = mi_graph_toposort(g);

	if (err)
		return err;
	used = calloc(g->ntensors + 1, 1);
	if (!used)
		return -ENOMEM;
	for (int i = 0; i < g->noutputs; i++)
		used[g->outputs[i]] = 1;
	for (int p = g->norder - 1; p >= 0; p--) {
		struct mi_node *n = &g->nodes[g->order[p]];
		bool live = false;

		for (int j = 0; j < n->noutputs; j++)
			live |= used[n->outputs[j]];
		if (!live) {
			n->dead = true;
			continue;
		}
		for (int j = 0; j < n->ninputs; j++)
			if (n->inputs[j] >= 0)
				used[n->inputs[j]] = 1;
	}
	free(used);
	return mi_graph_toposort(g);
}

/* Rewire the graph for choice (NULL: the full graph) and plan it. */
static int activate(struct mi_model *m, const int *choice)
{
	struct mi_switch *sw = m->sw;
	struct mi_graph *g = &m->g;
	int32_t ndim[256];
	int64_t *dims = NULL;
	bool bound = m->prepared;
	int err;

	if (bound) {
		dims = malloc((size_t)(g->ninputs + 1) * MI_MAX_DIMS *
			      sizeof(int64_t));
		if (!dims)
			return -ENOMEM;
		memcpy(ndim, m->bound_ndim, g->ninputs * sizeof(int32_t));
		memcpy(dims, m->bound_dims,
		       (size_t)g->ninputs * MI_MAX_DIMS * sizeof(int64_t));
	}
	/* back to the unplanned full graph */
	if (m->cpu_planned) {
		mi_cpu_plan_fini(g);
		m->cpu_planned = false;
	}
	m->prepared = false;
	for (int i = 0; i < sw->nnodes; i++)
		g->nodes[i].dead = sw->dead0[i];
	for (int l = 0; l < sw->nlayers; l++) {
		struct mi_switch_layer *L = &sw->layers[l];

		for (int u = 0; u < L->nuses; u++)
			g->nodes[L->uses[u].node].inputs[L->uses[u].slot] =
				L->out_t;
		sw->cur[l] = -1;
	}
	sw->pruned = false;
	err = mi_graph_link(g);
	if (!err && choice) {
		for (int l = 0; l < sw->nlayers; l++) {
			struct mi_switch_layer *L = &sw->layers[l];
			int c = choice[l];

			for (int u = 0; u < L->nuses; u++)
				g->nodes[L->uses[u].node]
					.inputs[L->uses[u].slot] =
					L->branch_t[c];
			g->nodes[L->merge_n].dead = true;
			for (int k = 0; k < L->nvar; k++)
				g->nodes[L->mul_n[k]].dead = true;
			sw->cur[l] = c;
		}
		sw->pruned = true;
		err = mi_graph_link(g);
		if (!err)
			err = prune(g);
	}
	if (!err) {
		err = mi_model_prepare(m, bound ? ndim : NULL, dims);
		if (err == -EAGAIN)
			err = 0;
	}
	free(dims);
	return err;
}

int mi_model_set_config(struct mi_model *m, const int *choice)
{
	struct mi_switch *sw;
	int prev[MI_SWITCH_MAX_LAYERS];
	bool was_pruned;
	int err;

	if (!m)
		return mi_set_error(-EINVAL, "mi_model_set_config: NULL model");
	sw = m->sw;
	if (!sw)
		return mi_set_error(-ENOENT, "%s: no switchable layers",
				    m->label);
	for (int l = 0; choice && l < sw->nlayers; l++)
		if (choice[l] < 0 || choice[l] >= sw->layers[l].nvar)
			return mi_set_error(-EINVAL,
				"%s: layer %s has variants 0..%d, not %d",
				m->label, sw->layers[l].name,
				sw->layers[l].nvar - 1, choice[l]);
	memcpy(prev, sw->cur, sizeof(prev));
	was_pruned = sw->pruned;
	m->g.err[0] = 0;
	err = activate(m, choice);
	if (err) {
		mi_set_error(err, "%s: switching failed: %s", m->label,
			     m->g.err[0] ? m->g.err : strerror(-err));
		activate(m, was_pruned ? prev : NULL);
		return err;
	}
	return 0;
}

int mi_model_get_config(const struct mi_model *m, int *choice)
{
	if (!m || !choice)
		return -EINVAL;
	if (!m->sw)
		return -ENOENT;
	for (int l = 0; l < m->sw->nlayers; l++)
		choice[l] = m->sw->cur[l];
	return m->sw->pruned;
}

int mi_model_switch_count(const struct mi_model *m)
{
	if (!m)
		return -EINVAL;
	return m->sw ? m->sw->nlayers : 0;
}

int mi_model_switch_info(const struct mi_model *m, int layer,
			 struct mi_switch_info *info)
{
	const struct mi_switch_layer *L;

	if (!m || !info)
		return -EINVAL;
	if (!m->sw || layer < 0 || layer >= m->sw->nlayers)
		return -ENOENT;
	L = &m->sw->layers[layer];
	memset(info, 0, sizeof(*info));
	info->name = L->name;
	info->nvariants = L->nvar;
	info->current = m->sw->cur[layer];
	info->in_channels = L->in_ch;
	info->out_channels = L->out_ch;
	for (int k = 0; k < L->nvar; k++) {
		info->variants[k] = L->variants[k];
		info->macs[k] = L->macs[k];
		info->latency_us[k] = L->lat_us[k];
	}
	return 0;
}

int mi_model_config_count(const struct mi_model *m)
{
	if (!m)
		return -EINVAL;
	return m->sw ? m->sw->ncfg : 0;
}

int mi_model_config(const struct mi_model *m, int index,
		    struct mi_switch_config *cfg)
{
	if (!m || !cfg)
		return -EINVAL;
	if (!m->sw || index < 0 || index >= m->sw->ncfg)
		return -ENOENT;
	*cfg = m->sw->cfg[index];
	return 0;
}
