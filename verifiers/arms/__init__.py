"""Arm processes: one arm's code in its own sandboxed process, forked from a zygote."""
