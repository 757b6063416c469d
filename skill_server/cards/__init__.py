"""Cards: the SKILL.md schema, the loaded catalog, shapes, vocabulary and lint."""
