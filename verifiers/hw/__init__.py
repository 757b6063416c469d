"""The device under test: platform, synchronisation, caches, neighbours, physical bounds."""
