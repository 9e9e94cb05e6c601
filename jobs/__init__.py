"""spark-submit entry points: thin ``main(argv)`` wrappers over ``dblog.pipeline``."""
