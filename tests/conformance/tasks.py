"""The test tasks the django-tasks backend test files call (``test_tasks.<name>``), by the names
and with the behaviour those tests expect of them; their source distributions don't carry theirs.
They run on the queue "default" of the backend the conformance tests set up."""

import time

from . import FRAMEWORK, backend_settings

task = FRAMEWORK["task"]
TaskContext = FRAMEWORK["TaskContext"]


# Made (and validated) against the backend they run on, as upstream's settings make it.
with backend_settings("default", "queue-1"):

    @task()
    def noop_task(*args, **kwargs):
        return None

    @task
    def noop_task_from_bare_decorator(*args, **kwargs):
        return None

    @task()
    async def noop_task_async(*args, **kwargs):
        return None

    @task()
    def calculate_meaning_of_life():
        return 42

    @task()
    def failing_task_value_error():
        raise ValueError("This task failed due to ValueError")

    @task()
    def failing_task_system_exit():
        raise SystemExit("This task failed due to SystemExit")

    @task()
    def failing_task_keyboard_interrupt():
        raise KeyboardInterrupt("This task failed due to KeyboardInterrupt")

    @task()
    def complex_exception():
        raise ValueError(ValueError("This task failed"))

    @task()
    def complex_return_value():
        return lambda: True  # neither JSON nor picklable

    @task()
    def exit_task():
        exit(1)

    @task()
    def hang():
        time.sleep(300)

    @task()
    def sleep_for(seconds):
        time.sleep(seconds)

    @task(takes_context=True)
    def get_task_id(context):
        return context.task_result.id

    @task(takes_context=True)
    def test_context(context, attempt):
        assert isinstance(context, TaskContext)
        assert context.attempt == attempt
