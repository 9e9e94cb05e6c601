"""Reference copies of the per-record decoders (the oracles the columnar decoders are tested against)."""
