// SPDX-License-Identifier: GPL-2.0-only
/*
 * libFuzzer target for the ONNX loader: parse, validate, constant-fold,
 * normalize and plan (shape inference through every op's infer()) an
 * arbitrary byte string as a model.  Any crash, sanitizer report, leak or
 * timeout is a bug; a clean -errno with a one-line message is the expected
 * outcome for garbage.  Loading already runs ops: constant folding executes
 * reference kernels on constant inputs, planning runs every infer().
 *
 * With MI_FUZZ_RUN=1 in the environment, a model that loads is also run
 * once on zeroed inputs (small graphs only): that fuzzes the operator
 * kernels themselves (`make check-fuzz` sets it; `make fuzz-load` does not).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static int do_run;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *e = getenv("MI_FUZZ_RUN");

	do_run = e && *e == '1';
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct mi_model_opts o = {
		.nthreads = 1,
		.max_tensor_bytes = 64u << 20,
	};
	struct mi_model *m = NULL;
	struct mi_value in[16], out[16];
	void *bufs[16] = { 0 };
	int nin, nout, ok = 1;

	if (mi_model_load_buffer(data, size, NULL, "fuzz.onnx", &o, &m)) {
		/* the error must be one line */
		if (strchr(mi_last_error(), '\n'))
			abort();
		return 0;
	}
	if (!do_run)
		goto out;
	nin = mi_model_input_count(m);
	nout = mi_model_output_count(m);
	if (nin > 16 || nout > 16)
		goto out;
	for (int i = 0; i < nin && ok; i++) {
		struct mi_tensor_info ti;
		int64_t n = 1;
		size_t es;

		mi_model_input_info(m, i, &ti);
		es = mi_dtype_size(ti.dtype);
		if (ti.ndim < 0 || !es) {
			ok = 0;
			break;
		}
		memset(&in[i], 0, sizeof(in[i]));
		in[i].dtype = ti.dtype;
		in[i].ndim = ti.ndim;
		for (int d = 0; d < ti.ndim; d++) {
			in[i].dims[d] = ti.dims[d] < 0 ? 1 : ti.dims[d];
			if (in[i].dims[d] > 4096 || (n *= in[i].dims[d]) > 65536)
				ok = 0;
		}
		if (!ok)
			break;
		bufs[i] = calloc(n ? n : 1, es);
		in[i].data = bufs[i];
		in[i].nbytes = n * es;
	}
	/* Keep runs cheap: only small graphs on small inputs. */
	if (ok && m->g.norder <= 64 && m->arena_peak <= (16u << 20))
		mi_model_run(m, in, nin, out, nout);
out:
	for (int i = 0; i < 16; i++)
		free(bufs[i]);
	mi_model_free(m);
	return 0;
}
