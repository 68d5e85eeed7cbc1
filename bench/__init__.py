"""The benchmark harness (see README.md in this folder).

This file makes ``bench`` a regular package so that ``bench.worqr_settings`` resolves to this
folder from the project root even though the workers also have this folder on PYTHONPATH, where
``bench.py`` would otherwise shadow it.
"""
