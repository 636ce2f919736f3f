"""kernelgap harness: everything on the host, by stage: running (transports, sessions), history,
analysis, reporting, the dashboard, explain, and the client. Never imports CUDA."""
