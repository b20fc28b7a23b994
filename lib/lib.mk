# SPDX-License-Identifier: GPL-2.0-only
# libmetainfer: static + shared library from lib/*.c, lib/ops/*.c, lib/cpu/*.c
# (new files in those directories are picked up automatically; other
# directories add objects as extra prerequisites of $(LIB_A), see
# lib/quant/quant.mk) plus the protobuf-c code generated at build time from
# the system's onnx.proto.
#
# Programs linking $(LIB_A) need $(LIB_LDLIBS).

ONNX_PROTO ?= /usr/include/onnx/onnx.proto
LIB_SRCS := $(wildcard lib/*.c lib/ops/*.c lib/cpu/*.c)
LIB_OBJS := $(patsubst %.c,$(O)/%.o,$(LIB_SRCS)) $(O)/gen/onnx.pb-c.o
LIB_CFLAGS := $(CFLAGS_COMMON) -pthread \
	$(shell pkg-config --cflags libdrm 2>/dev/null || echo -I/usr/include/libdrm)
# libdrm and liburing: lib/device (accelerators through their render nodes);
# libsqlite3: lib/fingerprint (the fingerprint DB)
LIB_LDLIBS := -lprotobuf-c -lm -pthread -ldrm -luring -lsqlite3
LIB_A := $(O)/libmetainfer.a
LIB_SO := $(O)/libmetainfer.so

# Generated ONNX protobuf-c code (never committed).
$(O)/gen/onnx.pb-c.c $(O)/gen/onnx.pb-c.h: $(ONNX_PROTO)
	@mkdir -p $(O)/gen
	cp $(ONNX_PROTO) $(O)/gen/onnx.proto
	cd $(O)/gen && protoc-c --c_out=. onnx.proto

$(O)/gen/onnx.pb-c.o: $(O)/gen/onnx.pb-c.c $(O)/gen/onnx.pb-c.h
	$(CC) -std=gnu11 -g $(OPT) -fPIC -I$(O)/gen -c $< -o $@

$(O)/lib/onnx_load.o: $(O)/gen/onnx.pb-c.h

$(O)/lib/%.o: lib/%.c $(wildcard lib/*.h lib/ops/*.h lib/cpu/*.h lib/device/*.h lib/include/metainfer/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(LIB_CFLAGS) -c $< -o $@

$(LIB_A): $(LIB_OBJS)
	@rm -f $@
	ar rcs $@ $^

# The shared library exports only the public API (lib/libmetainfer.map);
# libmetainfer.so (for -lmetainfer) links to the soname file.
$(LIB_SO).0: $(LIB_A) lib/libmetainfer.map
	$(CC) -shared -Wl,-soname,libmetainfer.so.0 \
		-Wl,--version-script=lib/libmetainfer.map \
		-o $@ -Wl,--whole-archive $(LIB_A) -Wl,--no-whole-archive \
		$(LIB_LDLIBS)

$(LIB_SO): $(LIB_SO).0
	ln -sf libmetainfer.so.0 $@

ALL += $(LIB_A) $(LIB_SO)

# ---- unit tests of the core (lib/tests/) ------------------------------
LIB_TESTS := $(patsubst lib/tests/%.c,$(O)/lib/tests/%,$(wildcard lib/tests/test-*.c))

$(O)/lib/tests/%: lib/tests/%.c $(LIB_A) $(wildcard lib/tests/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(LIB_CFLAGS) $< -o $@ $(LIB_A) $(LIB_LDLIBS)

# the shared library, used through the public header only
$(O)/lib/tests/so-smoke: lib/tests/so-smoke.c $(LIB_SO)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_COMMON) $< -o $@ -L$(O) -lmetainfer -Wl,-rpath,'$$ORIGIN/../..'

# the public header from C++ (extern "C" around every declaration)
$(O)/lib/tests/cxx-smoke: lib/tests/cxx-smoke.cc lib/include/metainfer/metainfer.h $(LIB_SO)
	@mkdir -p $(dir $@)
	$(CXX) -std=c++11 -O2 -Wall -Wextra -Werror -Ilib/include $< -o $@ -L$(O) -lmetainfer \
		-Wl,-rpath,'$$ORIGIN/../..'

ALL += $(LIB_TESTS) $(O)/lib/tests/so-smoke $(O)/lib/tests/cxx-smoke
CHECKS += check-lib

.PHONY: check-lib
check-lib: $(LIB_TESTS) $(O)/lib/tests/cxx-smoke $(O)/metainfer
	@rm -rf $(O)/lib/tests/models
	$(PYTHON) lib/tests/gen_pass_models.py $(O)/lib/tests/models
	@set -e; for t in $(LIB_TESTS); do echo "--- $$t"; $$t $(O)/lib/tests/models; done
	$(O)/lib/tests/so-smoke $(O)/lib/tests/models/api_net.onnx
	$(O)/lib/tests/cxx-smoke $(O)/lib/tests/models/api_net.onnx
	@bad=$$(nm -D --defined-only $(LIB_SO) | awk '$$2 == "T" && $$3 !~ /^mi_/'); \
		if [ -n "$$bad" ]; then echo "FAIL: libmetainfer.so exports $$bad"; exit 1; fi; \
		echo "ok   libmetainfer.so exports only mi_* ($$(nm -D --defined-only $(LIB_SO) | grep -c ' T '))"
	@PYTHON=$(PYTHON) tools/metainfer/test-cli.sh $(O)/metainfer
