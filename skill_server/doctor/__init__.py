"""``skill-server doctor``: what a first run on this box needs, checked."""
