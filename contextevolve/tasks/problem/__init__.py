"""A user's own problem in OpenEvolve's form, evolved without writing a Task.

An initial program plus an ``evaluator.py`` (and optionally a ``config.yaml``), evolved without writing a
:class:`~contextevolve.tasks.base.Task`.

Kept import-free like :mod:`contextevolve.tasks`: the sandbox imports :mod:`.harness` from here.
Use :mod:`.source` (reading and staging a problem), :mod:`.task` (its Task) and :mod:`.config`.
"""
