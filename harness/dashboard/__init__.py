"""The static dashboard: `python -m harness dashboard` turns the history store into a site.

`build.py` reads the store and writes the site: index.html (page.html), app.js (draws the
charts with Plotly), plotly.min.js (copied from the plotly Python package, so no network is
needed), data.js (the data, trimmed for display), runs/<run_id>.json (raw run documents) and
explain/<stem>.md|.html (`harness explain` of each case of the newest run; <stem> is a readable
prefix of the case id and a hash of all of it; explain_pages.py).
"""

from harness.dashboard.build import BuildReport, build_site, collect, display_indices

__all__ = ["BuildReport", "build_site", "collect", "display_indices"]
