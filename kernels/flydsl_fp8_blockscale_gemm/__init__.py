"""fp8 a8w8 block-scale GEMM (card ``flydsl_fp8_blockscale_gemm``).

Import as ``skill_kernels.flydsl_fp8_blockscale_gemm``. One job per module:

- ``quant``: fp8 e4m3 quantiser (1x128 activation / 128x128 weight blocks, fp32
  scale = amax/448) and the power-of-two (E8M0) scale rounding the card warns about.
- ``oracle``: the immutable fp32 dequant -> matmul -> bf16 reference.
- ``inputs``: realistic input generation in the shared input contract, outputs,
  perturbations.
- ``contract``: checks that a dict of tensors follows the input contract.
- ``twin_configs`` / ``triton_twin``: the portable Triton kernel (software fp32
  promote per 128-K block) and its per-shape-class tile configs.
- ``cublas_baseline`` (cuda), ``ck_baseline`` (rocm), ``torch_dequant`` (all),
  ``e8m0_scaled`` (ablation that must fail strict parity): the other arms.
- ``flydsl_gemm``: the FlyDSL gfx950 4-wave software-promote core; ``flydsl_8wave``: the
  8-wave ping-pong core with the ``cluster`` schedule; ``recipe``: which core a shape gets.
- ``gfx950_targets``: their static gates and emulated arms; ``probes``: the capability probe.
- ``arms``: ``ARMS``, every arm's spec; ``problem``: ``CARD_ID``, ``PROBLEM``, the verifier binding.

Nothing heavy is imported here.
"""
