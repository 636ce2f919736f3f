"""The suite's definition, with no GPU: the manifest and its data model, expressions, the lock of
published case versions, references, toolchains, PTX bundles and compiler revisions."""
