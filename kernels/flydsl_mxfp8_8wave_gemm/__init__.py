"""mxfp8 (1x32 ue8m0) GEMM (card ``flydsl_mxfp8_8wave_gemm``).

Import as ``skill_kernels.flydsl_mxfp8_8wave_gemm``. Modules: ``inputs`` / ``oracle`` (data and
the fp32 reference), ``flydsl_gemm`` (4-wave FlyDSL kernel), ``flydsl_8wave`` (the PR's 8-wave
tile with the widened swap-ab stores), ``triton_gemm`` (Triton twin), ``portable_arms`` (torch /
Triton builders), ``aiter_baseline`` (the ROCm baseline), ``lane_model`` (the MFMA operand ABI
model the tests replay), ``gfx950_targets``, ``probes``, ``arms`` (``ARMS``), ``problem``
(``CARD_ID``, ``PROBLEM``). Nothing heavy is imported here.
"""
