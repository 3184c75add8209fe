"""Finding, describing and following faces."""
