// SPDX-License-Identifier: GPL-2.0-only
/* Links against build/libmetainfer.so using only the public header: load a
 * model, describe it, run it on zeros, check an error path. */
#include <metainfer/metainfer.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
	struct mi_model *m;
	struct mi_tensor_info ii;
	struct mi_value in = { 0 }, out;
	int64_t n = 1;

	if (argc != 2)
		return 2;
	if (mi_model_load("/nonexistent/model.onnx", NULL, &m) != -ENOENT ||
	    !strstr(mi_last_error(), "/nonexistent/model.onnx")) {
		printf("FAIL so-smoke: error path: %s\n", mi_last_error());
		return 1;
	}
	if (mi_model_load(argv[1], NULL, &m)) {
		printf("FAIL so-smoke: %s\n", mi_last_error());
		return 1;
	}
	mi_model_input_info(m, 0, &ii);
	in.dtype = ii.dtype;
	in.ndim = ii.ndim;
	for (int d = 0; d < ii.ndim; d++) {
		in.dims[d] = ii.dims[d] < 0 ? 2 : ii.dims[d];
		n *= in.dims[d];
	}
	in.nbytes = n * mi_dtype_size(ii.dtype);
	in.data = calloc(1, in.nbytes);
	if (mi_model_run(m, &in, 1, &out, 1) || out.dims[0] != in.dims[0]) {
		printf("FAIL so-smoke: run: %s\n", mi_last_error());
		return 1;
	}
	printf("ok   so-smoke: libmetainfer %s ran %s -> %s %s[%lld,...]\n",
	       mi_version(), argv[1], out.name, mi_dtype_name(out.dtype),
	       (long long)out.dims[0]);
	free(in.data);
	mi_model_free(m);
	return 0;
}
