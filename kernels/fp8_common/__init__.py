"""Helpers shared by every fp8 reference kernel (import as ``skill_kernels.fp8_common``).

``layouts``: the host-side weight preshuffle (CK/aiter ``shuffle_weight(w, (16, 16))``
layout) and the mxfp8 (1x32 ue8m0) scale shuffles, each with its inverse.
"""
