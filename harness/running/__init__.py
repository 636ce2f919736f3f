"""Running the suite on a GPU box: the session of `harness run`, what is shipped there and its
virtual environment, revision builds, the result files kept, the trust of a run, the transports."""
