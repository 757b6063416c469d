"""Ground truth for the emulator: kernels compiled by Triton's AMD backend for gfx950.

Triton's AMD backend is developed and tested on MI300/MI355 hardware upstream, so the
gfx950 code it emits here (on a CPU machine) is hardware-validated codegen: if the
emulator runs it and matches torch, the emulator's semantics for those instructions
(MFMA lane layouts above all) agree with the hardware's.
"""
