"""The static dashboard: `python -m harness dashboard` turns the history store into a site.

`build.py` reads the store and writes the site: index.html (page.html), app.js (draws the
charts with Plotly), plotly.min.js (copied from the plotly Python package, so no network is
needed), data.js (the data, trimmed for display) and runs/<run_id>.json (raw run documents).
"""

from harness.dashboard.build import BuildReport, build_site, collect, display_indices

__all__ = ["BuildReport", "build_site", "collect", "display_indices"]
