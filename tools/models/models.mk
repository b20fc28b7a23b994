# SPDX-License-Identifier: GPL-2.0-only
# Test networks: seeded random-weight torchvision models and a small
# Transformer encoder, exported to ONNX at build/test time (never committed),
# and the real-network correctness test against PyTorch's outputs.
#
#   make models           export every model into $(O)/models (cached)
#   make check-networks   metainfer run vs PyTorch on each network, 1 and 2
#                         threads; fails if max|err|/max|ref| >= 1e-4
#
# CHECK_NETWORKS_ARGS passes extra options (e.g. --models resnet18
# --threads 1); see tools/models/check_networks.py --help.

MODELS_DIR := $(O)/models
CHECK_NETWORKS_ARGS ?=

.PHONY: models check-networks
models:
	@$(PYTHON) tools/models/export.py --out $(MODELS_DIR)

check-networks:
	@$(PYTHON) tools/models/check_networks.py --metainfer $(O)/metainfer \
		--models-dir $(MODELS_DIR) --work $(O)/check-networks \
		$(CHECK_NETWORKS_ARGS)

CHECKS += check-networks

# int8 accuracy target (issue 4): small CNN trained on scikit-learn's
# digits; fp32 vs int8 accuracy with metainfer (needs `metainfer quantize`).
.PHONY: digits digits-int8
digits:
	@$(PYTHON) tools/models/digits.py --out $(MODELS_DIR)/digits

digits-int8:
	@$(PYTHON) tools/models/digits.py --out $(MODELS_DIR)/digits --eval \
		--check --metainfer $(O)/metainfer
