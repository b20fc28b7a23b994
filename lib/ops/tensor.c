// SPDX-License-Identifier: MIT
#include "ops/ops.h"

const struct mi_op_def mi_ops_tensor[] = {
	{ NULL }
};
