"""Talking to the GPU: the driver API (cuda-python), the runner's own device kernels, the
counter-based input generator and what a PTX module declares."""
