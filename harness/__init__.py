"""kernelgap harness: everything on the host (transports, history, comparisons, exports). Never imports CUDA."""
