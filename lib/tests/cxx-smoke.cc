// SPDX-License-Identifier: GPL-2.0-only
/* The public header from C++: every declaration must have C linkage, or
 * this fails to link against build/libmetainfer.so.  Loads a model with
 * MI_MODEL_PROFILE, runs it on zeros and reads the profile back. */
#include <metainfer/metainfer.h>
#include <cstdio>
#include <vector>

int main(int argc, char **argv)
{
	struct mi_model_opts o = {};
	struct mi_model *m = nullptr;
	struct mi_tensor_info ii;
	struct mi_value in = {}, out;
	struct mi_node_profile np;
	uint64_t mn = 0;
	int64_t n = 1;

	if (argc != 2)
		return 2;
	o.nthreads = 1;
	o.flags = MI_MODEL_PROFILE;
	if (mi_model_load(argv[1], &o, &m) || mi_model_input_info(m, 0, &ii)) {
		std::printf("FAIL cxx-smoke: %s\n", mi_last_error());
		return 1;
	}
	in.dtype = ii.dtype;
	in.ndim = ii.ndim;
	for (int d = 0; d < ii.ndim; d++) {
		in.dims[d] = ii.dims[d] < 0 ? 2 : ii.dims[d];
		n *= in.dims[d];
	}
	std::vector<char> buf(n * mi_dtype_size(ii.dtype));
	in.data = buf.data();
	in.nbytes = buf.size();
	if (mi_model_run(m, &in, 1, &out, 1) || mi_model_profile_count(m) < 1 ||
	    mi_model_profile(m, 0, &np) || mi_model_profile_min(m, 0, &mn) ||
	    np.calls != 1 || mn != np.ns) {
		std::printf("FAIL cxx-smoke: run/profile: %s\n", mi_last_error());
		return 1;
	}
	mi_model_free(m);
	std::printf("ok   C++ program linked against libmetainfer.so (%s)\n", mi_version());
	return 0;
}
