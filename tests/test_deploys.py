"""Deploy markers: ``mark_deploy`` (command and function) and their lines on the history charts."""

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

import queues
from queues import Queue
from queues.engine import keys, readmodel
from tests.test_dashboard_views import make_user


def test_a_deploy_is_drawn_on_the_history_charts(client, db):
    """Deploys marked by the command and the function are drawn on every history chart at every span, labels escaped; a bad label is refused."""
    Queue("dp").enqueue("x")
    call_command("mark_deploy", "v1.2.3")
    queues.mark_deploy("hotfix <b>")
    with pytest.raises(CommandError, match="one line"):
        call_command("mark_deploy", "  ")
    with pytest.raises(ValueError):
        queues.mark_deploy("a\nb")
    assert sorted(d["label"] for d in readmodel.deploys(client, 0, 2**53)) == ["hotfix <b>", "v1.2.3"]
    web = Client()
    web.force_login(make_user("v", perms=["view_dashboard"]))
    for span in ("1h", "24h", "7d"):
        html = web.get(reverse("queues:queue-history", args=["dp"]), {"span": span}).content.decode()
        # two deploys on each of the four charts (throughput, run time, wait time, depth)
        assert html.count('class="wq-deploy-line"') == 8, span
        assert "hotfix &lt;b&gt;" in html and "<b>" not in html.split("Deploys:")[1][:300]
    client.delete(keys.DEPLOYS)
    html = web.get(reverse("queues:queue-history", args=["dp"])).content.decode()
    assert "wq-deploy-line" not in html
