"""worqr's HTTP API: JSON endpoints for tasks and queues, authenticated by bearer tokens.

``http`` (request plumbing: auth, methods, JSON bodies, errors), ``bodies`` (the request
bodies, validated and described from one table), ``views`` (the endpoints), ``compat`` (the
seed's own ``/create``, ``/query``, ``/delete``), ``openapi`` (the description served at
``/api/openapi.json``), ``urls``.
"""
