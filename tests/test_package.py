"""The package: ``python -m build`` makes the wheel ``worqr``, which carries the app with its
templates, static files, Lua scripts and migrations; installed into a fresh virtualenv, it runs a
new ``django-admin startproject`` project set up as README's "Use worqr in your own project" says.

The slow tests build the wheel (sdist first, then the wheel from it) and make the virtualenv with
``uv`` (a test requirement): it installs the wheel with its dependencies, resolved against PyPI and
pinned to the versions this test session runs, in a few seconds (pip took about twenty here: the
registry's answers are not kept in pip's cache).
"""

import http.cookiejar
import os
import re
import signal
import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from queues import Queue
from tests.browser import CHROMIUM, free_port, launch_chromium
from tests.conftest import ARTIFACTS, ROOT, wait_for
from tests.support.package import readme_files

WAIT = 20_000  # ms, for the browser: generous, for a slow shared machine


def runtime_requirements():
    """The lines of requirements.txt's runtime section (from "# Runtime" to the next comment)."""
    lines = (ROOT / "requirements.txt").read_text().splitlines()
    start = lines.index("# Runtime") + 1
    section = []
    for line in lines[start:]:
        if line.startswith("#"):
            break
        if line.strip():
            section.append(line.strip())
    return section


def normalised(requirements):
    """Requirements compared by meaning: names canonical, specifiers as sets, markers as text."""
    parsed = (Requirement(r) for r in requirements)
    return sorted((canonicalize_name(r.name), sorted(map(str, r.specifier)), str(r.marker or "")) for r in parsed)


def test_package_dependencies_are_the_runtime_requirements():
    """pyproject.toml's dependencies are exactly requirements.txt's runtime section."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == "worqr"
    assert normalised(project["dependencies"]) == normalised(runtime_requirements())
    # The optional extra worqr[otel] is installed for the tests, so its code is tested.
    lines = {line.strip() for line in (ROOT / "requirements.txt").read_text().splitlines()}
    assert project["optional-dependencies"] == {"otel": ["opentelemetry-api>=1.20"], "django52": EXTRA_DJANGO52}
    assert set(project["optional-dependencies"]["otel"]) <= lines


#: worqr[django52]: Django 5.2 with the backport, the same django-tasks as Python 3.11 gets.
EXTRA_DJANGO52 = ["Django>=5.2,<5.3", "django-tasks>=0.12,<0.13"]


def supported_django():
    """The Django feature releases the package's Django pin allows (Django's series are x.0, x.1, x.2)."""
    pin = next(Requirement(r) for r in runtime_requirements() if Requirement(r).name == "Django")
    return [f"{major}.{minor}" for major in (5, 6, 7) for minor in range(3) if f"{major}.{minor}" in pin.specifier]


def test_classifiers_readme_and_extras_name_the_django_versions_the_pin_allows():
    """The classifiers, README's "Supported versions" and worqr[django52] agree with the Django pin."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    versions = supported_django()
    assert versions == ["5.2", "6.0", "6.1"]
    classified = [c.rsplit(" :: ", 1)[1] for c in project["classifiers"] if c.startswith("Framework :: Django :: ")]
    assert classified == versions
    assert "Framework :: Django" in project["classifiers"]
    # Python: from requires-python's floor to 3.13, the newest the suite runs on (the Django 6.1 pass)
    python = [
        c.rsplit(" :: ", 1)[1] for c in project["classifiers"] if c.startswith("Programming Language :: Python :: 3.")
    ]
    assert project["requires-python"] == ">=3.11" and python == ["3.11", "3.12", "3.13"]
    # the backport: with Django 5.2 only, by Python 3.11 (which can have no Django 6) or by the extra
    backport = [Requirement(r) for r in runtime_requirements() if Requirement(r).name == "django-tasks"]
    assert [str(r.marker) for r in backport] == ['python_version < "3.12"']
    assert [str(r.specifier) for r in backport] == [str(Requirement(EXTRA_DJANGO52[1]).specifier)]
    assert set(Requirement(EXTRA_DJANGO52[0]).specifier.filter(["5.2.9", "6.0", "6.1"])) == {"5.2.9"}
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Supported versions") :]
    section = section[: section.index("\n## ", 1)]
    header = next(line for line in section.splitlines() if line.startswith("| "))
    assert re.findall(r"Django (\d\.\d)", header) == versions
    assert "pip install 'worqr[django52]'" in section


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    """``python -m build`` of this repository: the sdist, then the wheel built from it."""
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        [sys.executable, "-m", "build", "--installer", "uv", "--outdir", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"python -m build failed:\n{done.stdout}\n{done.stderr}"
    return out


@pytest.fixture(scope="module")
def wheel(dist):
    found = list(dist.glob("worqr-*-py3-none-any.whl"))
    assert len(found) == 1, f"one wheel expected in {dist}: {os.listdir(dist)}"
    return found[0]


def repo_files(*folders):
    """Files of these folders that a build sees: tracked or new, not ignored by .gitignore."""
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", *folders],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return {name for name in out.splitlines() if (ROOT / name).is_file()}


@pytest.mark.slow
def test_wheel_carries_the_app_its_templates_static_files_lua_and_migrations(wheel):
    """The wheel (what ``unzip -l`` lists) holds the queues package, its templates and static files inside it, ..."""
    # ... and nothing of the demo project, the tests, the benchmark or the chaos soak.
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        meta_name = next(n for n in names if n.endswith(".dist-info/METADATA"))
        meta = zf.read(meta_name).decode()
    files = {n for n in names if not n.split("/")[0].endswith(".dist-info")}
    expected = repo_files("queues")
    expected |= {f"queues/{name}" for name in repo_files("templates", "static")}
    assert files == expected
    for name in (
        "queues/templates/queues/base.html",
        "queues/templates/admin/index.html",
        "queues/static/queues/live.js",
        "queues/static/queues/dashboard.css",
        "queues/engine/lua/includes/base.lua",
        "queues/migrations/0001_initial.py",
        "queues/urls.py",
        "queues/backends/__init__.py",
        "queues/py.typed",  # the annotations are the package's (PEP 561)
    ):
        assert name in files
    assert any(n.startswith("queues/engine/lua/enqueue-") and n.endswith(".lua") for n in files)
    assert not {
        n
        for n in files
        if n.split("/")[0] in ("worqr_site", "sample", "tests", "bench", "chaos", "templates", "static")
    }
    # the development tools are not the app: the chaos soak, its command and the dashboard's benchmark
    tools = ("queues/chaos/", "queues/dashboard/bench", "queues/management/commands/chaos.py")
    assert not {n for n in files if n.startswith(tools)}
    requires = [line.split(":", 1)[1].strip() for line in meta.splitlines() if line.startswith("Requires-Dist:")]
    extras = [r for r in requires if "extra ==" in r]  # the optional extras, e.g. worqr[otel]
    assert normalised(set(requires) - set(extras)) == normalised(runtime_requirements())
    assert normalised(r.split(";")[0] for r in extras) == normalised(["opentelemetry-api>=1.20", *EXTRA_DJANGO52])


def test_readme_shows_the_steps_the_package_test_takes():
    """The README section names each file the end-to-end test writes and each command it runs."""
    files, section = readme_files()
    assert set(files) == {"mysite/settings.py", "mysite/urls.py", "mysite/asgi.py", "jobs/tasks.py"}
    # which of them replace a file startproject made, which one is new
    assert "# mysite/urls.py: replaces the generated file" in section
    assert "# mysite/asgi.py: replaces the generated file" in section
    assert "# jobs/tasks.py: a new file" in section
    assert "`/` itself is a 404 in your" in section  # not a redirect, as in this repository's demo
    for command in STEPS:
        assert command in section, command


STEPS = [
    "pip install /path/to/worqr",
    "django-admin startproject mysite && cd mysite",
    "python manage.py startapp jobs",
    "python manage.py migrate",
    "python manage.py createsuperuser",
    "python manage.py worker &",
    "python manage.py enqueue emails someone@example.com",
    "python manage.py runserver",
    "python manage.py collectstatic",
]


class Project:
    """A new project in a fresh virtualenv; each command runs with only the environment a user
    would have (the virtualenv's bin first on PATH, and the test session's Redis)."""

    def __init__(self, venv, root, redis_url):
        self.venv, self.root = venv, root
        self.env = {
            "PATH": f"{venv / 'bin'}:{os.environ['PATH']}",
            "HOME": os.environ.get("HOME", "/tmp"),
            "VIRTUAL_ENV": str(venv),
            "WORQR_REDIS_URL": redis_url,
            "PYTHONUNBUFFERED": "1",
            "LANG": "C.UTF-8",
        }
        self.python = str(venv / "bin" / "python")
        self.processes = []
        self.steps = []  # (the command as a user types it, seconds): test-artifacts/package-steps.txt

    def run(self, *args, cwd=None, env=None):
        began = time.monotonic()
        done = subprocess.run(
            list(args),
            cwd=cwd or self.root,
            env=dict(self.env, **(env or {})),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, f"{args} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
        self.note(args, time.monotonic() - began)
        return done.stdout

    def note(self, args, seconds):
        """Record a step (paths shortened to what a user would type) and write the list so far."""
        shown = " ".join(Path(a).name if a.startswith("/") else a for a in map(str, args))
        self.steps.append((shown, seconds))
        ARTIFACTS.mkdir(exist_ok=True)
        lines = [f"{s:7.2f} s  {c}" for c, s in self.steps]
        (ARTIFACTS / "package-steps.txt").write_text("\n".join(lines) + "\n")

    def manage(self, *args, **kwargs):
        return self.run(self.python, "manage.py", *args, **kwargs)

    def start(self, name, *args):
        """``manage.py <args>`` in the background, its output in test-artifacts/package-<name>.log."""
        ARTIFACTS.mkdir(exist_ok=True)
        log_path = ARTIFACTS / f"package-{name}.log"
        log = open(log_path, "w")
        proc = subprocess.Popen(
            [self.python, "manage.py", *args],
            cwd=self.root,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.processes.append((proc, log))
        return proc, log_path

    def stop(self):
        for proc, log in self.processes:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(10)
            log.close()


def installed_versions():
    """``name==version`` of every distribution this test session runs on (pins for the new venv)."""
    return sorted({f"{d.metadata['Name']}=={d.version}" for d in metadata.distributions() if d.metadata["Name"]})


def uv():
    from uv import find_uv_bin  # the test requirement "uv"

    return find_uv_bin()


@pytest.fixture
def project(wheel, tmp_path, redis_server):
    """README's steps up to the migration: a fresh venv with the wheel, a new project, an app."""
    venv = tmp_path / "venv"
    began = time.monotonic()
    subprocess.run([uv(), "venv", "--quiet", "--python", sys.executable, str(venv)], check=True, timeout=120)
    pins = tmp_path / "pins.txt"
    pins.write_text("\n".join(installed_versions()) + "\n")
    subprocess.run(
        [
            uv(),
            "pip",
            "install",
            "--quiet",
            "--python",
            str(venv / "bin" / "python"),
            str(wheel),
            "--constraint",
            str(pins),
        ],
        check=True,
        timeout=300,
    )
    project = Project(venv, tmp_path / "mysite", redis_server.url)
    project.note(
        ["pip install /path/to/worqr-<version>-py3-none-any.whl (uv: a venv, the wheel, pinned)"],
        time.monotonic() - began,
    )
    project.run(str(venv / "bin" / "django-admin"), "startproject", "mysite", cwd=tmp_path)
    project.manage("startapp", "jobs")
    for path, (text, append) in readme_files()[0].items():
        target = project.root / path
        if append:
            target.write_text(target.read_text() + "\n" + text)
        else:
            target.write_text(text)
    try:
        yield project
    finally:
        project.stop()


@pytest.mark.slow
def test_installed_wheel_runs_a_new_project_worker_and_dashboard(project):
    """In a new project with only the installed wheel."""
    # migrate, a worker runs the app's handler on a task enqueued from the command line, and a staff user sees the live
    # dashboard, styled.
    # The browser part (the websocket live, the stylesheet applied) runs only where Chromium is
    # (make browser); the rest, the dashboard read over plain HTTP included, runs everywhere.
    try:
        import playwright.sync_api as playwright_api
    except ImportError:
        playwright_api = None
    imported = project.run(project.python, "-c", "import queues; print(queues.__file__)")
    assert Path(imported.strip()).is_relative_to(project.venv), imported  # not this repository's copy
    # the app's commands, and none of the repository's development tools (manage.py chaos)
    shown = project.manage("help")
    assert "[queues]" in shown and "worker" in shown.split("[queues]")[1]
    assert "chaos" not in shown, shown

    # a worker leaves daphne out (README's settings block), runserver has it
    for command, expected in (("worker", "False"), ("runserver", "True")):
        loaded = project.run(project.python, "-c", DAPHNE_LOADED.format(command=command))
        assert loaded.strip() == expected, (command, loaded)
    # collectstatic works (STATIC_ROOT is set) and copies the dashboard's files
    project.manage("collectstatic", "--noinput")
    assert (project.root / "staticfiles" / "queues" / "dashboard.css").is_file()

    project.manage("migrate", "--noinput")
    worker, worker_log = project.start("worker", "worker")  # both start up while the steps below run
    started = time.monotonic()
    port = free_port()
    server, server_log = project.start("runserver", "runserver", f"127.0.0.1:{port}", "--noreload")
    project.manage(
        "createsuperuser",
        "--noinput",
        "--username",
        "admin",
        "--email",
        "admin@example.com",
        env={"DJANGO_SUPERUSER_PASSWORD": "a-secret-pw"},
    )
    task_id = project.manage("enqueue", "emails", "someone@example.com").strip()
    assert re.fullmatch(r"emails-[0-9a-f]{16}", task_id), task_id
    wait_for(
        lambda: f"task {task_id} queue=emails outcome=completed" in worker_log.read_text(),
        timeout=60,
        message=f"the worker to complete {task_id}",
    )
    project.note(["python manage.py worker & (started until the enqueued task completed)"], time.monotonic() - started)
    assert "welcome mail to someone@example.com" in worker_log.read_text()
    assert Queue("emails").counts()["completed"] == 1

    url = f"http://127.0.0.1:{port}"
    wait_for(
        lambda: _answers(url + "/admin/login/") or server.poll() is not None,
        timeout=60,
        interval=0.2,
        message="runserver to answer",
    )
    project.note(["python manage.py runserver (started until it answered)"], time.monotonic() - started)
    assert server.poll() is None, server_log.read_text()
    _dashboard_over_http(url)
    assert _status(url + "/") == 404  # the README says so: include("queues.urls") mounts nothing at /
    if playwright_api is None or not os.path.exists(CHROMIUM):
        return  # no browser here (make browser): the live dashboard is not looked at
    with playwright_api.sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_page()
        page.set_default_timeout(WAIT)
        try:
            expect = playwright_api.expect
            page.goto(url + "/queues/")
            expect(page).to_have_url(re.compile(r"/admin/login/\?next=/queues/"), timeout=WAIT)
            page.fill("#id_username", "admin")
            page.fill("#id_password", "a-secret-pw")
            page.click("input[type=submit]")
            expect(page).to_have_url(url + "/queues/", timeout=WAIT)
            row = page.locator("tr[data-queue=emails]")
            expect(row.locator("td").nth(5)).to_have_text("1", timeout=WAIT)  # Completed
            status = page.locator("#wq-status")
            expect(status).to_have_text("live", timeout=WAIT)  # the websocket, through the project's ASGI routing
            # live.js ran (the badge says live); dashboard.css was served from the package and applied
            assert page.evaluate(STYLED, "/static/queues/dashboard.css")
            page.goto(url + "/admin/")
            expect(page.get_by_role("link", name="Queues dashboard")).to_be_visible(timeout=WAIT)
        finally:
            browser.close()


STYLED = "path => [...document.styleSheets].some(s => (s.href || '').endsWith(path) && s.cssRules.length > 0)"


def _dashboard_over_http(url):
    """Log in as the superuser with plain HTTP requests; the dashboard lists the queue emails and
    links its stylesheet, which the project serves from the installed package."""
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
    login = url + "/admin/login/?next=/queues/"
    with opener.open(login, timeout=30) as response:
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', response.read().decode()).group(1)
    form = {"csrfmiddlewaretoken": token, "username": "admin", "password": "a-secret-pw", "next": "/queues/"}
    with opener.open(urllib.request.Request(login, data=urllib.parse.urlencode(form).encode()), timeout=30) as response:
        assert response.geturl() == url + "/queues/", response.geturl()
        html = response.read().decode()
    assert '<tr data-queue="emails">' in html and "/static/queues/dashboard.css" in html
    with opener.open(url + "/static/queues/dashboard.css", timeout=30) as response:
        assert response.status == 200 and b"{" in response.read()


#: Whether a process started as ``manage.py <command>`` imports daphne (settings.py decides).
DAPHNE_LOADED = (
    "import os, sys; sys.argv = ['manage.py', '{command}']; "
    "os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'mysite.settings'); "
    "import django; django.setup(); print('daphne' in sys.modules)"
)


def _status(url):
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def _answers(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status == 200
    except OSError:  # not listening yet
        return False
