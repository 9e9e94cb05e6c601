"""The decode benchmark (issue 10): ``python -m bench --help``.

Modules: ``gen`` (cached nights written with the project's encoders), ``plain`` (baseline a:
a hand-written single-process decoder), ``udf`` (baseline b: a row-at-a-time Spark UDF),
``jobs`` (what runs inside each measured subprocess), ``measure`` (subprocess + /proc memory
sampling), ``report`` (JSON and Markdown), ``run`` (the CLI).
"""
