from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("queues", "0003_manage_limits_permission"),
    ]

    operations = [
        migrations.CreateModel(
            name="OutboxTask",
            fields=[
                ("seq", models.BigAutoField(primary_key=True, serialize=False)),
                ("task_id", models.CharField(max_length=220, unique=True)),
                ("queue", models.CharField(max_length=200)),
                ("payload", models.BinaryField()),
                ("spec", models.TextField()),
                ("created", models.DateTimeField(db_index=True)),
            ],
            options={
                "ordering": ["seq"],
                "default_permissions": ("view",),
            },
        ),
    ]
