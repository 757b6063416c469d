"""What a client may ask: tool gating by transport and token, and file confinement."""
