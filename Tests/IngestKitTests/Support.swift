// Every test file of this target sees the shared helpers (temporary directories, oracles).
@_exported import IngestTestSupport
