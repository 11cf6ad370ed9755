"""The Dockerfile, .dockerignore and docker-compose.yml, checked on a machine without a Docker engine: what can be
read from the files.

A build, a GPU run and `docker compose up` are not checked here (no engine, no GPU); scripts/gpu_check.sh covers the
GPU side.
"""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The CUDA versions PyTorch builds torch 2.12-2.14 for (its release support matrix), with the wheel index of each.
TORCH_CUDA = {"12.6": "cu126", "13.0": "cu130", "13.2": "cu132"}


def _instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with line continuations joined and comments dropped."""
    out, cur = [], ""
    for line in text.splitlines():
        s = line.strip()
        if not cur and (not s or s.startswith("#")):
            continue
        if s.startswith("#"):
            continue
        cur += " " + s.rstrip("\\").strip() if cur else s.rstrip("\\").strip()
        if not s.endswith("\\"):
            word, _, rest = cur.partition(" ")
            out.append((word.upper(), rest.strip()))
            cur = ""
    return out


@pytest.fixture(scope="module")
def docker() -> dict:
    ins = _instructions((ROOT / "Dockerfile").read_text())
    args = {}
    for word, rest in ins:
        if word == "ARG" and "=" in rest:
            k, v = rest.split("=", 1)
            args.setdefault(k.strip(), v.strip())
    return {"ins": ins, "args": args}


def _expand(s: str, args: dict) -> str:
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: args.get(m.group(1) or m.group(2), m.group(0)), s)


def _runs(docker) -> str:
    return "\n".join(_expand(r, docker["args"]) for w, r in docker["ins"] if w == "RUN")


def test_base_image_is_a_cuda_base_image_torch_2_13_is_built_for(docker):
    froms = [_expand(r, docker["args"]) for w, r in docker["ins"] if w == "FROM"]
    assert len(froms) == 1, froms
    m = re.fullmatch(r"nvidia/cuda:(\d+)\.(\d+)\.(\d+)-base-ubuntu(\d+\.\d+)", froms[0])
    assert m, f"not a CUDA -base- image: {froms[0]}"
    cuda = f"{m.group(1)}.{m.group(2)}"
    assert cuda in TORCH_CUDA, f"torch 2.13 has no CUDA {cuda} build (it has {', '.join(TORCH_CUDA)})"
    # The torch index must be the same CUDA as the base image.
    idx = re.findall(r"download\.pytorch\.org/whl/(\w+)", _runs(docker))
    assert idx == [TORCH_CUDA[cuda]], (idx, cuda)
    assert "cudnn" not in froms[0]  # the wheel brings its own cuDNN


def test_torch_in_the_image_is_the_pinned_version(docker):
    pin = re.search(r"^torch==([\w.]+)$", (ROOT / "requirements.txt").read_text(), re.M).group(1)
    assert f"torch=={pin} " in _runs(docker)
    # requirements-ray.txt is requirements.txt plus the pinned Ray: every node of a Ray deployment runs this image.
    assert "-r requirements-ray.txt" in _runs(docker)
    ray_reqs = (ROOT / "requirements-ray.txt").read_text()
    assert re.search(r"^-r requirements\.txt$", ray_reqs, re.M)
    assert re.search(r"^ray\[serve\]==[\w.]+$", ray_reqs, re.M), "Ray must be pinned: every container runs the same"
    # pip reads the included file relative to requirements-ray.txt: both are copied before the install.
    copies = " ".join(r for w, r in docker["ins"] if w == "COPY" and "requirements" in r)
    assert "requirements.txt" in copies and "requirements-ray.txt" in copies, copies


def test_the_uid_1000_user_of_ubuntu_24_04_is_removed_before_app_takes_it(docker):
    runs = _runs(docker)
    add = runs.find("useradd")
    assert add >= 0
    uid = re.search(r"useradd[^&]*--uid (\d+)", runs)
    if uid and uid.group(1) == "1000":
        delete = runs.find("userdel --remove ubuntu")
        assert 0 <= delete < add, "Ubuntu 24.04 images have user ubuntu with UID 1000: remove it first"
    users = [r for w, r in docker["ins"] if w == "USER"]
    assert users == ["app"]  # runs as non-root


def test_headless_chrome_libraries_include_cairo(docker):
    apt = next(r for r in _runs(docker).splitlines() if "apt-get install" in r)
    for lib in ("libcairo2", "libnss3", "libpango-1.0-0", "libgbm1", "fonts-noto-cjk"):
        assert re.search(rf"(^|\s){re.escape(lib)}(\s|$)", apt), lib


def test_healthcheck_and_port(docker):
    words = {w for w, _ in docker["ins"]}
    assert {"HEALTHCHECK", "EXPOSE", "CMD"} <= words
    assert "/_stcore/health" in next(r for w, r in docker["ins"] if w == "HEALTHCHECK")


def _ignored(path: str, patterns: list[str]) -> bool:
    """Docker's rule, enough for these patterns: a path is out when it or a parent folder matches a pattern."""
    parts = path.split("/")
    for i in range(1, len(parts) + 1):
        sub = "/".join(parts[:i])
        for p in patterns:
            p = p.rstrip("/")
            if fnmatch.fnmatch(sub, p) or (p.startswith("**/") and fnmatch.fnmatch(parts[i - 1], p[3:])):
                return True
    return False


def test_dockerignore_keeps_history_environments_and_run_folders_out():
    patterns = [
        ln.strip() for ln in (ROOT / ".dockerignore").read_text().splitlines() if ln.strip() and not ln.startswith("#")
    ]
    assert not any(p.startswith("!") for p in patterns)
    for out in (
        ".git/HEAD",
        ".venv/bin/python",
        "runs/x/model.safetensors",
        "core/__pycache__/models.cpython-312.pyc",
        "tests/e2e/screenshots/home.png",
        ".pytest_cache/v",
    ):
        assert _ignored(out, patterns), out
    for keep in (
        "app/main.py",
        "core/models/loading.py",
        "requirements.txt",
        "requirements-ray.txt",
        "assets/models/bert-mini/config.json",
        ".streamlit/config.toml",
        "assets/i18n/home.toml",
    ):
        assert not _ignored(keep, patterns), keep


# ---------------------------------------------------------------------------------------------- docker-compose.yml
def _env(service: dict) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):  # the "KEY=value" form
        env = dict(item.split("=", 1) for item in env)
    return {k: str(v) for k, v in env.items()}


def _command(service: dict) -> str:
    cmd = service.get("command", "")
    return " ".join(cmd) if isinstance(cmd, list) else str(cmd)


def _frontends(services: dict) -> dict[str, dict]:
    return {name: s for name, s in services.items() if "streamlit run app/serve.py" in _command(s)}


@pytest.fixture(scope="module")
def compose() -> dict:
    yaml = pytest.importorskip("yaml")
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_compose_has_a_head_a_gpu_worker_and_two_frontends_built_from_the_dockerfile(compose):
    services = compose["services"]
    assert {"head", "worker"} <= set(services)
    assert "ray start --head --port=6379" in _command(services["head"])
    assert "--include-dashboard=false" in _command(services["head"])
    assert "--block" in _command(services["head"]) and "--block" in _command(services["worker"])
    assert "ray start --address=head:6379" in _command(services["worker"])
    fronts = _frontends(services)
    assert len(fronts) == 2, sorted(fronts)
    published = sorted(p.split(":")[0] for s in fronts.values() for p in s.get("ports", []))
    assert published == ["8501", "8502"], published
    for name, s in services.items():  # one image everywhere: the same Ray, Python and core/ on every node
        build = s.get("build")
        context = build.get("context", ".") if isinstance(build, dict) else build
        dockerfile = build.get("dockerfile", "Dockerfile") if isinstance(build, dict) else "Dockerfile"
        assert context == "." and dockerfile == "Dockerfile", name
    assert len({s.get("image") for s in services.values()}) == 1


def test_compose_frontends_use_the_ray_backend_at_the_head(compose):
    services = compose["services"]
    for name, s in _frontends(services).items():
        env = _env(s)
        assert env.get("ENCODERLAB_BACKEND") == "ray", name
        host, _, port = env.get("ENCODERLAB_RAY_ADDRESS", "").removeprefix("ray://").partition(":")
        assert host == "head" and host in services and port == "6379", (name, env.get("ENCODERLAB_RAY_ADDRESS"))
        assert env.get("ENCODERLAB_HOSTED") == "1", name
        # A Ray driver must run on a node of the cluster: the front-end joins it (with nothing to schedule on).
        cmd = _command(s)
        assert "ray start --address=head:6379" in cmd and "--num-cpus=0" in cmd, name
        assert cmd.index("ray start") < cmd.index("streamlit run"), name
        assert "head" in (s.get("depends_on") or {}), name


def test_compose_worker_reserves_a_gpu(compose):
    worker = compose["services"]["worker"]
    assert "--num-gpus=1" in _command(worker)
    devices = (((worker.get("deploy") or {}).get("resources") or {}).get("reservations") or {}).get("devices") or []
    assert any(
        d.get("driver") == "nvidia" and "gpu" in d.get("capabilities", []) and d.get("count", 1) in (1, "all")
        for d in devices
    ), devices


def test_compose_every_service_mounts_the_shared_runs_volume_where_encoderlab_runs_points(compose):
    volumes = compose.get("volumes") or {}
    paths = set()
    for name, s in compose["services"].items():
        runs = _env(s).get("ENCODERLAB_RUNS")
        assert runs, f"{name} sets no ENCODERLAB_RUNS"
        mounts = [v.split(":") if isinstance(v, str) else [v["source"], v["target"]] for v in s.get("volumes", [])]
        named = [m[0] for m in mounts if len(m) >= 2 and m[1] == runs]
        assert named and named[0] in volumes, f"{name} mounts no named volume at {runs}"
        paths.add((named[0], runs))
    assert len(paths) == 1, paths  # one volume, one path, in every service


def test_compose_runs_path_exists_in_the_image_owned_by_app(compose, docker):
    """A new named volume takes the owner of the image's folder at its mount point: without it, root owns it and
    the app user cannot write a run folder."""
    runs = {_env(s)["ENCODERLAB_RUNS"] for s in compose["services"].values()}.pop()
    user_run = next(r for r in _runs(docker).splitlines() if "useradd" in r)
    assert re.search(rf"mkdir -p [^&]*{re.escape(runs)}", user_run), user_run
    assert re.search(rf"chown -R app:app [^&]*{re.escape(runs)}", user_run), user_run


def test_compose_ray_nodes_share_one_auth_token(compose):
    """Every node and front-end presents the same Ray token (Ray's GCS runs what any client sends it)."""
    envs = [_env(s) for s in compose["services"].values()]
    assert {e.get("RAY_AUTH_MODE") for e in envs} == {"token"}
    assert len({e.get("RAY_AUTH_TOKEN") for e in envs}) == 1
    assert envs[0]["RAY_AUTH_TOKEN"].startswith("${RAY_AUTH_TOKEN:?")  # from the operator, never written here
