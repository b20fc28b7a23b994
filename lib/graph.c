// SPDX-License-Identifier: MIT
/*
 * Graph structure: linking (producers/consumers), validation, topological
 * order, small editing helpers for the passes, constant folding and
 * dead-node elimination.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int mi_graph_link(struct mi_graph *g)
{
	for (int i = 0; i < g->ntensors; i++) {
		g->tensors[i].producer = -1;
		g->tensors[i].nconsumers = 0;
	}
	for (int i = 0; i < g->nnodes; i++) {
		struct mi_node *n = &g->nodes[i];

		if (n->dead)
			continue;
		for (int j = 0; j < n->noutputs; j++) {
			int o = n->outputs[j];

			if (o < 0 || o >= g->ntensors)
				return mi_graph_err(g, n, -EINVAL,
					"output %d has a bad tensor index", j);
			struct mi_tensor *t = &g->tensors[o];

			if (t->producer >= 0)
				return mi_graph_err(g, n, -EINVAL,
					"output '%s' is also produced by node #%d",
					t->name, t->producer);
			if (t->flags & (MI_TF_INPUT | MI_TF_INITIALIZER))
				return mi_graph_err(g, n, -EINVAL,
					"output '%s' overwrites a graph input or initializer",
					t->name);
			t->producer = i;
		}
	}
	for (int i = 0; i < g->nnodes; i++) {
		struct mi_node *n = &g->nodes[i];

		if (n->dead)
			continue;
		for (int j = 0; j < n->ninputs; j++) {
			int x = n->inputs[j];

			if (x < 0)
				continue;
			if (x >= g->ntensors)
				return mi_graph_err(g, n, -EINVAL,
					"input %d has a bad tensor index", j);
			struct mi_tensor *t = &g->tensors[x];

			if (t->producer < 0 &&
			    !(t->flags & (MI_TF_CONST | MI_TF_INPUT)))
				return mi_graph_err(g, n, -EINVAL,
					"input '%s' is not produced by any node, initializer or graph input",
					t->name);
			t->nconsumers++;
		}
	}
	for (int i = 0; i < g->noutputs; i++) {
		struct mi_tensor *t = &g->tensors[g->outputs[i]];

		if (t->producer < 0 && !(t->flags & (MI_TF_CONST | MI_TF_INPUT)))
			return mi_graph_err(g, NULL, -EINVAL,
				"graph output '%s' is produced by no node, input or initializer",
				t->name);
	}
	return 0;
}

int mi_graph_toposort(struct mi_graph *g)
{
	int *indeg = NULL, *cstart = NULL, *clist = NULL, *queue = NULL;
	int nlive = 0, head = 0, tail = 0, nedges = 0, err = 0;

	err = mi_graph_link(g);
	if (err)
		return err;
	indeg = calloc(g->nnodes + 1, sizeof(int));
	cstart = calloc(g->ntensors + 2, sizeof(int));
	queue = malloc((g->nnodes + 1) * sizeof(int));
	if (!indeg || !cstart || !queue) {
		err = -ENOMEM;
		goto out;
	}
	/* consumer lists in CSR form: tensor -> nodes reading it */
	for (int i = 0; i < g->nnodes; i++) {
		struct mi_node *n = &g->nodes[i];

		if (n->dead)
			continue;
		nlive++;
		for (int j = 0; j < n->ninputs; j++) {
			int x = n->inputs[j];

			if (x < 0 || g->tensors[x].producer < 0)
				continue;
			cstart[x + 1]++;
			indeg[i]++;
			nedges++;
		}
	}
	for (int t = 0; t < g->ntensors; t++)
		cstart[t + 1] += cstart[t];
	clist = malloc((nedges + 1) * sizeof(int));
	if (!clist) {
		err = -ENOMEM;
		goto out;
	}
	{
		int *fill = calloc(g->ntensors + 1, sizeof(int));

		if (!fill) {
			err = -ENOMEM;
			goto out;
		}
		for (int i = 0; i < g->nnodes; i++) {
			struct mi_node *n = &g->nodes[i];

			if (n->dead)
				continue;
			for (int j = 0; j < n->ninputs; j++) {
				int x = n->inputs[j];

				if (x < 0 || g->tensors[x].producer < 0)
					continue;
				clist[cstart[x] + fill[x]++] = i;
			}
		}
		free(fill);
	}
	for (int i = 0; i < g->nnodes; i++)
		if (!g->nodes[i].dead && !indeg[i])
			queue[tail++] = i;
	while (head < tail) {
		struct mi_node *n = &g->nodes[queue[head++]];

		for (int j = 0; j < n->noutputs; j++) {
			int o = n->outputs[j];

			for (int k = cstart[o]; k < cstart[o + 1]; k++)
				if (--indeg[clist[k]] == 0)
					queue[tail++] = clist[k];
		}
	}
	if (tail < nlive) {
		for (int i = 0; i < g->nnodes; i++)
			if (!g->nodes[i].dead && indeg[i] > 0) {
				err = mi_graph_err(g, &g->nodes[i], -EINVAL,
					"graph has a cycle through this node");
				break;
			}
		goto out;
	}
	free(g->order);
	g->order = queue;
	g->norder = tail;
	queue = NULL;
out:
	free(indeg);
	free(cstart);
	free(clist);
	free(queue);
	return err;
}

void mi_graph_replace_uses(struct mi_graph *g, int from, int to)
{
	for (int i = 0; i < g->nnodes; i++) {
		struct mi_node *n = &g->nodes[i];

		if (n->dead)
			continue;
		for (int j = 0; j < n->ninputs; j++)
			if (n->inputs[j] == from)
				n->inputs[j] = to;
	}
	for (int i = 0; i < g->noutputs; i++)
		if (g->outputs[i] == from) {
			g->outputs[i] = to;
			g->tensors[to].flags |= MI_TF_OUTPUT;
		}
}

int mi_graph_sole_consumer(const struct mi_graph *g, int t)
{
	int found = -1;

	if (g->tensors[t].flags & MI_TF_OUTPUT)
		return -1;
	for (int i = 0; i < g->nnodes; i++) {
		const struct mi_node *n = &g->nodes[i];

		if (n->dead)
			continue;
		for (int j = 0; j < n->ninputs; j++)
			if (n->inputs[j] == t) {
				if (found >= 0 && found != i)
					return -1;
				if (found == i)
					return -1; /* read twice by one node */
				found = i;
			}
	}
	return found;
}

int mi_graph_add_node(struct mi_graph *g, const char *name,
		      const char *op_type, const int *inputs, int ninputs,
		      const int *outputs, int noutputs)
{
	struct mi_node *n;

	if (g->nnodes == g->nodes_cap) {
		int cap = g->nodes_cap ? 2 * g->nodes_cap : 16;
		struct mi_node *nn = realloc(g->nodes, cap * sizeof(*nn));

		if (!nn)
			return -ENOMEM;
		g->nodes = nn;
		g->nodes_cap = cap;
	}
	n = &g->nodes[g->nnodes];
	memset(n, 0, sizeof(*n));
	n->name = strdup(name ? name : "");
	n->op_type = strdup(op_type);
	n->domain = strdup("");
	n->inputs = malloc((ninputs + 1) * sizeof(int));
	n->outputs = malloc((noutputs + 1) * sizeof(int));
	if (!n->name || !n->op_type || !n->domain || !n->inputs ||
	    !n->outputs) {
		free(n->name);
		free(n->op_type);
		free(n->domain);
		free(n->inputs);
		free(n->outputs);
		return -ENOMEM;
	}
	memcpy(n->inputs, inputs, ninputs * sizeof(int));
	memcpy(n->outputs, outputs, noutputs * sizeof(int));
	n->ninputs = ninputs;
	n->noutputs = noutputs;
	n->def = mi_op_find(op_type, "");
	return g->nnodes++;
}

static struct mi_attr *node_new_attr(struct mi_node *n, const char *name,
				     int type)
{
	struct mi_attr *a = (struct mi_attr *)mi_attr_get(n, name);

	if (a) {
		free(a->ints);
		free(a->floats);
		a->ints = NULL;
		a->floats = NULL;
	} else {
		struct mi_attr *na = realloc(n->attrs,
					     (n->nattrs + 1) * sizeof(*na));

		if (!na)
			return NULL;
		n->attrs = na;
		a = &n->attrs[n->nattrs];
		memset(a, 0, sizeof(*a));
		a->name = strdup(name);
		if (!a->name)
			return NULL;
		n->nattrs++;
	}
	a->type = type;
	return a;
}

int mi_node_set_int(struct mi_node *n, const char *name, int64_t v)
{
	struct mi_attr *a = node_new_attr(n, name, MI_ATTR_INT);

	if (!a)
		return -ENOMEM;
	a->i = v;
	return 0;
}

int mi_node_set_float(struct mi_node *n, const char *name, float v)
{
	struct mi_attr *a = node_new_attr(n, name, MI_ATTR_FLOAT);

	if (!a)
		return -ENOMEM;
	a->f = v;
	return 0;
}

int mi_node_set_ints(struct mi_node *n, const char *name, const int64_t *v,
		     int count)
{
	struct mi_attr *a = node_new_attr(n, name, MI_ATTR_INTS);

	if (!a)
		return -ENOMEM;
	a->ints = malloc((count + 1) * sizeof(int64_t));
	if (!a->ints)
		return -ENOMEM;
	memcpy(a->ints, v, count * sizeof(int64_t));
	a->n = count;
	return 0;
}

int mi_tensor_set_const(struct mi_tensor *t, int dtype, int ndim,
			const int64_t *dims, const void *data)
{
	int err;

	mi_tensor_free_data(t);
	mi_tensor_set_shape(t, dtype, ndim, dims);
	err = mi_tensor_alloc(t);
	if (err)
		return err;
	if (data && t->nbytes)
		memcpy(t->data, data, t->nbytes);
	t->flags |= MI_TF_CONST;
	return 0;
}

/* Ops whose result is not a function of their inputs. */
static bool nondeterministic(const struct mi_node *n)
{
	static const char *const ops[] = {
		"RandomNormal", "RandomUniform", "RandomNormalLike",
		"RandomUniformLike", "Multinomial", "Bernoulli",
	};

	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		if (!strcmp(n->op_type, ops[i]))
			return true;
	return false;
}

#define MI_FOLD_MAX_BYTES (64u << 20)

int mi_graph_fold_constants(struct mi_graph *g)
{
	int folded = 0, err;

	err = mi_graph_toposort(g);
	if (err)
		return err;
	for (int p = 0; p < g->norder; p++) {
		struct mi_node *n = &g->nodes[g->order[p]];
		size_t in_bytes = 0, out_bytes = 0;
		bool all_const = true;

		if (n->dead || !n->def || !n->def->run || !n->def->infer ||
		    nondeterministic(n))
			continue;
		for (int j = 0; j < n->ninputs; j++) {
			struct mi_tensor *t = mi_in(g, n, j);

			if (!t)
				continue;
			if (!(t->flags & MI_TF_CONST) || !t->data) {
				all_const = false;
				break;
			}
			in_bytes += t->nbytes;
		}
		if (!all_const)
			continue;
		err = n->def->infer(g, n);
		if (err == -EAGAIN)
			continue;
		if (err)
			return err;
		for (int j = 0; j < n->noutputs; j++) {
			struct mi_tensor *t = mi_out(g, n, j);
			int64_t ne = mi_tensor_numel(t);

			if (ne < 0 || !mi_dtype_size(t->dtype))
				return mi_graph_err(g, n, -EINVAL,
					"shape inference left output '%s' unknown",
					t->name);
			out_bytes += (size_t)ne * mi_dtype_size(t->dtype);
		}
		/* Do not blow a small model up into a huge one. */
		if (out_bytes > MI_FOLD_MAX_BYTES && out_bytes > 4 * in_bytes)
			continue;
		for (int j = 0; j < n->noutputs; j++) {
			err = mi_tensor_alloc(mi_out(g, n, j));
			if (err)
				return mi_graph_err(g, n, err,
					"cannot allocate output '%s'",
					mi_out(g, n, j)->name);
		}
		err = n->def->run(g, n);
		if (err) {
			if (!g->err[0])
				mi_graph_err(g, n, err, "constant folding failed");
			return err;
		}
		for (int j = 0; j < n->noutputs; j++)
			mi_out(g, n, j)->flags |= MI_TF_CONST;
		n->dead = true;
		folded++;
	}
	if (folded) {
		err = mi_graph_toposort(g);
		if (err)
			return err;
	}
	return folded;
}

int mi_graph_dead_nodes(struct mi_graph *g)
{
	unsigned char *used;
	int removed = 0, err;

	err = mi_graph_toposort(g);
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
			if (used[n->outputs[j]])
				live = true;
		if (!live) {
			n->dead = true;
			removed++;
			continue;
		}
		for (int j = 0; j < n->ninputs; j++)
			if (n->inputs[j] >= 0)
				used[n->inputs[j]] = 1;
	}
	/* Constants nobody reads any more (folded-away weights): drop data. */
	for (int t = 0; t < g->ntensors; t++) {
		struct mi_tensor *x = &g->tensors[t];

		if (!used[t] && (x->flags & MI_TF_CONST) &&
		    !(x->flags & MI_TF_OUTPUT))
			mi_tensor_free_data(x);
	}
	free(used);
	if (removed) {
		err = mi_graph_toposort(g);
		if (err)
			return err;
	}
	return removed;
}
