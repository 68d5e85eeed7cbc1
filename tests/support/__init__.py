"""Helpers shared by the test files: each test file imports what it shares from here, never from
another test file. One module per subject:

- ``api``: API tokens and a client that sends them (``make_token``, ``Api``, ``error``, ``hooks``);
- ``browser``: the browser tests' Daphne, logged-in operator and Chromium page fixtures;
- ``dashboard``: staff users, session cookies, websockets, many queues, failed tasks;
- ``limits``: limits driven through the scripts directly, and the overlap of handler runs;
- ``tracing``: OpenTelemetry spans in this process and in worker processes;
- ``webhooks``: a local HTTP server that records the callbacks it receives;
- ``package``: the files README's "Use worqr in your own project" shows.

The older helper modules beside the tests (``tests/browser.py``, ``engine_calls.py``,
``cluster_servers.py``, ``fault_rig.py``, ``model.py``, ``stress.py``, ``conftest.py``) are shared
the same way.
"""
