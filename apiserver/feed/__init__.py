"""The work feed of pull locations (docs/pull.md): computed, never stored."""
