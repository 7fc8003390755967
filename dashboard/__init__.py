"""TaLoS Studio dashboard: Streamlit multipage app over a results store.

``figures`` (pure Plotly figure builders), ``data`` (typed loaders and cached wrappers over
:mod:`talos_core.schema`), ``views`` (the Arithmetic page's data → figure path), ``jobs`` (background runs
launched from the Run page) and ``ui`` (shared Streamlit widgets) are importable without a running
Streamlit server; ``app.py`` is the entry point::

    talos dashboard [--store DIR]        # = streamlit run <installed dashboard>/app.py

The package is installed with ``talos_core`` (``pip install -e .`` or the wheel) and reads the store only
through :mod:`talos_core.schema`.
"""
