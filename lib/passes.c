// SPDX-License-Identifier: MIT
/*
 * Normalization passes.  Each pass returns the number of rewrites it made
 * (>= 0) or -errno, and leaves the graph linked and sorted.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int mi_pass_fold_batchnorm(struct mi_graph *g)
{
	(void)g;
	return 0;
}

int mi_pass_remove_noops(struct mi_graph *g)
{
	(void)g;
	return 0;
}

int mi_pass_canonicalize(struct mi_graph *g)
{
	(void)g;
	return 0;
}

int mi_graph_normalize(struct mi_graph *g, unsigned int flags,
		       struct mi_pass_stats *st)
{
	struct mi_pass_stats dummy;
	int r, changed, rounds = 0;

	if (!st)
		st = &dummy;
	memset(st, 0, sizeof(*st));
	do {
		changed = 0;
		if (!(flags & MI_MODEL_NO_FOLD)) {
			r = mi_graph_fold_constants(g);
			if (r < 0)
				return r;
			st->folded += r;
			changed += r;
		}
		r = mi_pass_fold_batchnorm(g);
		if (r < 0)
			return r;
		st->bn_folded += r;
		changed += r;
		r = mi_pass_remove_noops(g);
		if (r < 0)
			return r;
		st->noops += r;
		changed += r;
		r = mi_pass_canonicalize(g);
		if (r < 0)
			return r;
		st->canonical += r;
		changed += r;
		r = mi_graph_dead_nodes(g);
		if (r < 0)
			return r;
		st->dead += r;
		changed += r;
	} while (changed && ++rounds < 8);
	return 0;
}
