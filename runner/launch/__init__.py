"""The launch protocols for a compiler's tests: `runner run` (one-shot), `runner serve` (a
persistent service) and `runner launch` (a C++ runner's command line)."""
