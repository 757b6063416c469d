"""Reference kernels for the card ``flydsl_prefill_moe_stage2_fp8partial``.

Grouped-MoE stage 2 (down-projection + separate top-k reduce) at prefill, with the
per-(token, slot) partial stored either in bf16 (baseline) or in fp8 e4m3 with one
symmetric scale ``s`` (the card's mechanism: ``x * s`` -> e4m3 on the GEMM store,
e4m3 -> f32 -> ``* (1/s)`` -> sum on the reduce).

Modules (import as ``skill_kernels.flydsl_prefill_moe_stage2_fp8partial.<module>``):

- ``naming``: kernel names that carry the partial format and the scale; the scale
  consistency check over profiled kernel names.
- ``fp8_format``: e4m3 constants and the clamp-then-cast quantiser every path shares.
- ``routing``: skewed top-k routing and the sorted / padded expert blocks.
- ``oracle``: input generation, the fp32 oracle and the torch emulations of both arms.
- ``calibration``: choose ``s`` from the partial magnitude histogram (report).
- ``triton_stage2_gemm`` / ``triton_reduce``: the Triton twins; ``triton_arms`` builds them.
- ``flydsl_stage2_gemm`` (the fused GEMM, ``cshuffle_pf8`` epilogue), ``flydsl_reduce``,
  ``flydsl_stage2_epilogue``: gfx950 FlyDSL kernels; ``flydsl_arms`` builds the ROCm arms;
  ``gfx950_targets`` declares their static gates; ``probes`` the capability probe.
- ``mismatched_scale``: a deliberately wrong candidate (reducer scale != producer scale).
- ``arms``: ``ARMS``, every arm's spec; ``problem``: ``CARD_ID``, ``PROBLEM`` for the verifier.

Nothing here imports torch, triton or flydsl at package import time.
"""
