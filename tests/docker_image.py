"""Building the project's image where no registry image can be pulled, for the container test.

The base is made from Debian's own packages (``debootstrap`` from the apt mirror: python3, its
venv module, CA certificates) and imported as ``topicpulse-test-base:bookworm``, once: it is
kept by the Docker daemon and reused. The image's pip reads a local index of wheels that this
machine's pip downloaded (the project's dependencies and its build backend), served on the
loopback address, so the build itself reaches no network. The wheels are kept in
``TOPICPULSE_DOCKER_CACHE`` (default ``~/.cache/topicpulse-docker``) and the Docker layer cache
keeps the dependency layer: a rebuild after a code change installs the package alone.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import os
import re
import shutil
import subprocess
import sys
import threading
import tomllib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASE_TAG = "topicpulse-test-base:bookworm"
SUITE, MIRROR = "bookworm", "http://deb.debian.org/debian"
BASE_PACKAGES = "python3,python3-venv,ca-certificates"


def cache_dir() -> Path:
    return Path(os.environ.get("TOPICPULSE_DOCKER_CACHE", Path.home() / ".cache/topicpulse-docker"))


def docker(*args: str, timeout: float = 600, check: bool = True) -> str:
    """A docker command's standard output; a failure raises with its standard error."""
    done = subprocess.run(
        ["docker", *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    if check and done.returncode != 0:
        raise RuntimeError(f"docker {' '.join(args[:2])} failed: {done.stderr.strip()[-2000:]}")
    return done.stdout


def container_log(name: str) -> str:
    """What a container wrote, standard output and error together."""
    done = subprocess.run(
        ["docker", "logs", name], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60
    )
    return done.stdout.decode("utf-8", "replace")


def daemon_problem() -> str | None:
    """Why no container can run here, or None when a Docker daemon answers."""
    if shutil.which("docker") is None:
        return "no docker command (apt-get install docker.io)"
    try:
        done = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        return "the Docker daemon does not answer"
    if done.returncode != 0:
        return "no Docker daemon answers (start dockerd as root)"
    return None


def ensure_base() -> str:
    """The base image's tag, made with debootstrap unless the daemon has it already."""
    if docker("images", "-q", BASE_TAG).strip():
        return BASE_TAG
    if shutil.which("debootstrap") is None or os.geteuid() != 0:
        raise RuntimeError("building the base image needs root and debootstrap (apt)")
    rootfs = cache_dir() / "rootfs"
    shutil.rmtree(rootfs, ignore_errors=True)
    rootfs.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["debootstrap", "--variant=minbase", f"--include={BASE_PACKAGES}", SUITE, str(rootfs),
         MIRROR],
        check=True, capture_output=True, timeout=900,
    )  # fmt: skip
    tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
    subprocess.run(
        ["docker", "import", "-", BASE_TAG], stdin=tar.stdout, check=True, capture_output=True
    )
    tar.wait()
    shutil.rmtree(rootfs, ignore_errors=True)
    return BASE_TAG


def wheelhouse() -> Path:
    """A PEP 503 index (``simple/<project>/<file>``) of the wheels the image installs."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
    wanted = [*project["project"]["dependencies"], *project["build-system"]["requires"]]
    files = cache_dir() / "wheels"
    files.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "--dest",
         str(files), *wanted],
        check=True, capture_output=True, timeout=600,
    )  # fmt: skip
    index = cache_dir() / "index"
    shutil.rmtree(index, ignore_errors=True)
    for wheel in files.glob("*.whl"):
        name = re.sub(r"[-_.]+", "-", wheel.name.split("-")[0]).lower()
        folder = index / "simple" / name
        folder.mkdir(parents=True, exist_ok=True)
        os.link(wheel, folder / wheel.name)
    return index


@contextlib.contextmanager
def serving(folder: Path) -> Iterator[str]:
    """``folder`` over HTTP on the loopback address; yields its ``simple/`` index URL."""
    handler = functools.partial(_QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple/"
    finally:
        server.shutdown()
        server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def build_image(tag: str) -> None:
    """``docker build`` of the repository's Dockerfile on the Debian base, offline."""
    base = ensure_base()
    with serving(wheelhouse()) as index:
        docker(
            "build", "--network", "host", "--tag", tag,
            "--build-arg", f"PYTHON_IMAGE={base}", "--build-arg", f"PIP_INDEX_URL={index}",
            str(ROOT), timeout=1200,
        )  # fmt: skip
