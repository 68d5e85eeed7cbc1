from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("queues", "0006_change_schedule_permission"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="auditlog",
            options={
                "default_permissions": ("view",),
                "ordering": ["-at"],
                "permissions": [
                    ("view_dashboard", "Can view the queues dashboard"),
                    ("enqueue_task", "Can enqueue tasks"),
                    ("cancel_task", "Can cancel tasks"),
                    ("retry_task", "Can retry failed tasks"),
                    ("delete_task", "Can delete tasks"),
                    ("retry_all_failed", "Can retry all failed tasks of a queue"),
                    ("pause_queue", "Can pause and resume queues"),
                    ("purge_queue", "Can purge a queue's pending tasks"),
                    ("manage_schedules", "Can pause, resume and trigger schedules"),
                    ("manage_limits", "Can change and reset queues' limits"),
                    ("view_encrypted_payload", "Can see the payloads of encrypted queues"),
                    ("change_schedule", "Can create, change and delete schedules made at run time"),
                    ("control_workers", "Can tell workers to go quiet or to stop"),
                ],
            },
        ),
    ]
