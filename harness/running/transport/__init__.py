"""Transports behind one interface: `run(command, stdin) -> stdout`, one module per kind of target."""
