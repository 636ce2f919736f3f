"""Exporters behind one interface: `render(document) -> bytes`, one module per format."""
