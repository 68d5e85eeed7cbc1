"""worqr as a backend of Django's Tasks framework: the modules that know the framework sit here.

- ``worqr``: ``WorqrBackend`` (enqueue, results) and ``register_handlers`` (called at start-up);
- ``dispatch``: how a framework call travels as a worqr task payload and runs on a worker;
- ``framework``: the framework's names, from ``django.tasks`` (Django 6) or the ``django-tasks``
  backport (Django 5.2), so the two spellings meet once.

``"BACKEND": "queues.backends.WorqrBackend"`` in ``settings.TASKS`` names the class re-exported
here.
"""

from .worqr import WorqrBackend, register_handlers

__all__ = ["WorqrBackend", "register_handlers"]
