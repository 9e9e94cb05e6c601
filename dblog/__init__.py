"""dblog-etl pipeline library: configuration, data root, Spark stages, the ``dblog`` CLI."""
