from django.apps import AppConfig


class SampleConfig(AppConfig):
    name = "sample"
    verbose_name = "Sample handlers for the demo"
