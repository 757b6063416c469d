"""Re-verification: check each card's claims on this box (prerequisites, gates, verifier)."""
