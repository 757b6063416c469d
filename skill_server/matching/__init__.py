"""Matching: a hotspot -> ranked card matches, each criterion with its reason; card overlap."""
