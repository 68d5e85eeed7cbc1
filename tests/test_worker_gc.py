"""The worker's cycle-collector settings (``launcher._tune_gc``): what start-up made is frozen and
the youngest generation is collected less often, without undoing what the program chose."""

import gc

import pytest

from queues.engine.worker import launcher


@pytest.fixture
def gc_state():
    before = gc.get_threshold(), gc.isenabled()
    yield
    gc.unfreeze()
    gc.set_threshold(*before[0])
    (gc.enable if before[1] else gc.disable)()


def test_a_worker_freezes_start_up_s_objects_and_collects_its_youngest_generation_less_often(gc_state):
    """From CPython's 700 to GC_THRESHOLD, the older generations' thresholds kept, start-up's objects frozen."""
    gc.unfreeze()
    gc.set_threshold(700, 10, 10)
    launcher._tune_gc()
    assert gc.get_threshold() == (launcher.GC_THRESHOLD, 10, 10)
    assert gc.get_freeze_count() > 1000


def test_a_threshold_set_higher_and_a_disabled_collector_are_left_as_they_are(gc_state):
    """A program's own higher threshold stays; with the collector off nothing is frozen or changed."""
    gc.unfreeze()
    gc.set_threshold(launcher.GC_THRESHOLD * 2, 5, 5)
    launcher._tune_gc()
    assert gc.get_threshold() == (launcher.GC_THRESHOLD * 2, 5, 5)
    gc.unfreeze()
    gc.set_threshold(700, 10, 10)
    gc.disable()
    launcher._tune_gc()
    assert gc.get_threshold() == (700, 10, 10) and gc.get_freeze_count() == 0
