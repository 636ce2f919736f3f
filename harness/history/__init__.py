"""The history: the store of past results (SQLite, its schema and migrations, ingest, integrity),
the series keys that say which results may share a line, and the between-card term read off it."""
