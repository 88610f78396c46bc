"""The schema, as versioned migrations applied in order (``store.migrations``).

``NNN_name.sql``: DDL, with ``${db}`` and ``${ttl_days}`` placeholders.
``NNN_name.py``: a Python step for what SQL cannot do (a backfill computed
in Python); it defines ``apply(store)`` and changes data only: its DDL goes
in a ``.sql`` file, so the cluster translation (``store.cluster``) sees it.
"""
