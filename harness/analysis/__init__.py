"""Analysis: what changed between results and along a series (compare, verdicts, change points,
drift, regression rules, pull-request pairs, robust gaps) and when that fails a run (`--fail-on`)."""
