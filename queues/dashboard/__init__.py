"""The live staff dashboard: server-rendered pages kept live over a websocket.

- ``access``   who may see the dashboard and who may act (one place decides)
- ``queries``  page snapshots built from the engine's read model (no Django UI here)
- ``failures`` the failure history grouped by error shape
- ``feeds``    what each live view subscribes to and how it refreshes
- ``live``     the coalescing pump between Redis pub/sub and a websocket
- ``views/``   one module per page, plus the actions
"""
