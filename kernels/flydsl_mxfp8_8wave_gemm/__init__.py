"""mxfp8 (1x32 ue8m0) GEMM: oracle, FlyDSL gfx950 kernel, portable arms, verifier problem.

Import as ``skill_kernels.flydsl_mxfp8_8wave_gemm``. Nothing heavy is imported here.
"""
