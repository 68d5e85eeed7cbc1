"""Dashboard views: one module per page (``overview``, ``queue``, ``workers``, ``task``) and
the actions (``actions``), sharing ``common``."""
