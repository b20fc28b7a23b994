// SPDX-License-Identifier: MIT
/* Default CPU planner.  Until fast variants are registered, every node
 * runs its reference implementation (node->priv stays NULL). */
#include <errno.h>

#include "cpu/cpu_plan.h"

int mi_cpu_plan(struct mi_graph *g, const struct mi_cpu_opts *opts)
{
	(void)g;
	(void)opts;
	return 0;
}

int mi_cpu_node_run(struct mi_graph *g, struct mi_node *n)
{
	return mi_graph_err(g, n, -EINVAL, "no fast kernel planned");
}

void mi_cpu_plan_fini(struct mi_graph *g)
{
	(void)g;
}
