"""kernelgap runner: everything that touches the GPU (cuda-python is imported lazily)."""
