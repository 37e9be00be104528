"""Memory debug: allocator states (every pool, graph-private pools included), recorded,
decomposed and compared. See ``docs/memory-debug.md``."""
