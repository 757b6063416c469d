"""Executable verifiers: parity against an immutable oracle, interleaved A/B timing,
runtime-signature gates, segment scoring, static gfx950 gates. Never imports skill_server."""
