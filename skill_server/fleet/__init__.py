"""Fleet re-verification on Ray: one task per card and platform, recorded by the driver."""
