"""The live staff dashboard: server-rendered pages kept live over a websocket.

- ``access``     who may see the dashboard and who may act (one place decides)
- ``queries/``   page snapshots built from the engine's read model (no Django UI here), by page
- ``failures``   the failure history grouped by error shape
- ``sections``   the parts of each page that change, each rendered by one template
- ``rows``       the busiest tables' rows, written in Python; ``markup``: fast URLs and forms
- ``feeds``      what each live view subscribes to and how it refreshes
- ``live``       the coalescing pump between Redis pub/sub and a websocket
- ``consumers``  the websocket's consumer; ``routing``: its routes and application (public
                 path: ``queues.routing.websocket_app``)
- ``origin``     which pages may open the websocket (the site's own origins)
- ``hub``        one Redis pub/sub subscriber per server process, shared by its sockets
- ``revocation`` logouts and lost permissions, announced to every process, close sockets
- ``views/``     one module per page, plus the actions
"""
