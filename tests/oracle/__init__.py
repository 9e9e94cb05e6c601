"""Reference oracles: the per-record decoders as they were before the columnar rewrite (tests only)."""
