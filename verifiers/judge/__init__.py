"""The judge process: inputs, oracle, parity, interleaved timing, signatures, verdict."""
