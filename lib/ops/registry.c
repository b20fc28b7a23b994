// SPDX-License-Identifier: MIT
/* Operator registry: mi_op_find() over every family table.  See ops.h for
 * how lib/quant plugs its table in. */
#include <string.h>

#include "ops/ops.h"

static const struct mi_op_def *const mi_op_tables[] = {
	mi_ops_elementwise, mi_ops_matmul, mi_ops_conv,
	mi_ops_pool,	    mi_ops_norm,   mi_ops_reduce,
	mi_ops_shape,	    mi_ops_tensor, mi_ops_resize,
	mi_ops_misc,	    mi_ops_rnn,
#ifdef MI_HAVE_QUANT_OPS
	mi_quant_ops,
#endif
};

const struct mi_op_def *mi_op_find(const char *op_type, const char *domain)
{
	if (!op_type)
		return NULL;
	if (!domain || !strcmp(domain, "ai.onnx"))
		domain = "";
	for (size_t t = 0; t < sizeof(mi_op_tables) / sizeof(mi_op_tables[0]);
	     t++)
		for (const struct mi_op_def *d = mi_op_tables[t]; d->op_type;
		     d++)
			if (!strcmp(d->op_type, op_type) &&
			    !strcmp(d->domain ? d->domain : "", domain))
				return d;
	return NULL;
}
