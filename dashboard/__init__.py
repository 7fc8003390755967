"""TaLoS Studio dashboard: Streamlit multipage app over a results store.

``figures`` (pure Plotly figure builders, one ``figures_*`` module per family), ``data`` (typed loaders in
``data_loaders``, pure computations in ``data_derived``, and cached wrappers over :mod:`talos_core.schema`),
``lesson`` (the lesson mode: ``lesson_core`` and ``lesson_screens``), ``views`` (the Arithmetic page's data → figure
path), ``jobs`` (background runs launched from the Run page) and ``ui`` (shared Streamlit widgets) are importable
without a running Streamlit server; ``app.py`` is the entry point::

    talos dashboard [--store DIR]        # = streamlit run <installed dashboard>/app.py

The package is installed with ``talos_core`` (``pip install -e .`` or the wheel) and reads the store only
through :mod:`talos_core.schema`.
"""
