"""What travels on a runner's stderr besides human progress.

`runner bench --emit-partial` writes, after every case, one line: PARTIAL_DOCUMENT_PREFIX followed
by the compact JSON of the document so far (`complete: false`). A host that loses the connection
keeps the last such line, so no finished case is lost; the line is never shown to a person.
"""

PARTIAL_DOCUMENT_PREFIX = b"kernelgap-partial-document: "
