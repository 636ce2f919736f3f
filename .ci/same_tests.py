"""Fail when the floors run skipped or left out a test that the main run ran.

`python .ci/same_tests.py MAIN.xml FLOORS.xml` reads the two pytest JUnit reports. The floors
stage must run the same tests as the main one: a test that passed in the main run and was skipped
(or not collected) at the floors hides a floor that no longer holds. The one skip allowed is one
whose reason says it comes from the floor itself (ALLOWED), and each one is listed.
"""

import sys
import xml.etree.ElementTree as ET

# cuda-python 12.x's NVRTC bindings cannot drive the NVRTC 13.0 the tests pin (docs/dependencies.md):
# at the cuda-python floor those tests skip, saying so ("NVRTC is not usable here: ...").
ALLOWED = ("NVRTC is not usable here",)


def outcomes(path: str) -> dict[str, tuple[str, str]]:
    found = {}
    for case in ET.parse(path).iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        skipped = case.find("skipped")
        failed = case.find("failure") is not None or case.find("error") is not None
        if skipped is not None:
            found[name] = ("skipped", skipped.get("message") or "")
        else:
            found[name] = ("failed" if failed else "passed", "")
    return found


def main(main_xml: str, floors_xml: str) -> int:
    main, floors = outcomes(main_xml), outcomes(floors_xml)
    missing, allowed = [], []
    for name, (outcome, _) in sorted(main.items()):
        if outcome != "passed":
            continue
        there, reason = floors.get(name, ("not run", ""))
        if there == "passed":
            continue
        (allowed if there == "skipped" and any(a in reason for a in ALLOWED) else missing).append(
            f"{name}: {there} at the floors{': ' + reason if reason else ''}"
        )
    for line in allowed:
        print(f"ci: floors skip allowed: {line}")
    for line in missing:
        print(f"ci: floors did not run what main ran: {line}")
    ran = sum(1 for outcome, _ in floors.values() if outcome == "passed")
    print(
        f"ci: floors ran {ran} of the {sum(1 for o, _ in main.values() if o == 'passed')} tests main ran"
    )
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
