"""Print pip constraints that pin every declared floor: `name==X` for each `name>=X` among the
project's dependencies and its harness and cluster extras (what users install; the test extra
brings both). CI installs the test extra under these constraints in a second venv and runs the
CPU tests there, so the floors hold."""

import re
import sys
import tomllib
from pathlib import Path

project = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())[
    "project"
]
extras = project["optional-dependencies"]
requirements = project["dependencies"] + extras["harness"] + extras["cluster"]
for requirement in requirements:
    found = re.match(r"^\s*([A-Za-z0-9._-]+)\s*>=\s*([0-9][0-9A-Za-z.]*)", requirement)
    if found is None:
        sys.exit(f"{requirement!r}: every runtime requirement needs a `>=` floor to test")
    print(f"{found.group(1)}=={found.group(2)}")
