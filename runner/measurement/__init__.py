"""Measuring: the correctness gate, the timing strategies and timers, statistics, the environment
and the device's peaks."""
