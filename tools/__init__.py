"""Developer tools that live beside the vta package but are not part of it (not installed)."""
