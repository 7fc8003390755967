"""TaLoS Studio dashboard: Streamlit multipage app over a results store.

``figures`` (pure Plotly figure builders), ``data`` (store loading, cached wrappers, the linearized
preview), ``jobs`` (background runs launched from the Run page) and ``ui`` (shared Streamlit widgets)
are importable without a running Streamlit server; ``app.py`` is the entry point::

    streamlit run dashboard/app.py
"""
