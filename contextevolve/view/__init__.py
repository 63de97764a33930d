"""The live web view of a run or a comparison: ``contextevolve serve FOLDER``.

:mod:`~contextevolve.view.server` serves one page (:file:`page.html`, plain JavaScript with the plotly.js
shipped in the ``plotly`` package: it works offline) on 127.0.0.1 and streams what the run stores as it
changes; :mod:`~contextevolve.view.payload` says what is shown of a run, :mod:`~contextevolve.view.compare`
of a comparison folder. What the page shows: docs/usage.md, *The live view*.
"""
