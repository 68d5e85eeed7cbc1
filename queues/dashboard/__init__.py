"""The live staff dashboard: server-rendered pages kept live over a websocket.

- ``access``     who may see the dashboard and who may act (one place decides)
- ``queries``    page snapshots built from the engine's read model (no Django UI here)
- ``failures``   the failure history grouped by error shape
- ``sections``   the parts of each page that change, each rendered by one template
- ``feeds``      what each live view subscribes to and how it refreshes
- ``live``       the coalescing pump between Redis pub/sub and a websocket
- ``origin``     which pages may open the websocket (the site's own origins)
- ``hub``        one Redis pub/sub subscriber per server process, shared by its sockets
- ``revocation`` logouts and lost permissions, announced to every process, close sockets
- ``views/``     one module per page, plus the actions
"""
