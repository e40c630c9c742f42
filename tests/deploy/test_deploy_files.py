"""deploy/: the Dockerfile, the compose file, the systemd unit, checked without a Docker engine.

What can run here runs for real: the image's HEALTHCHECK command against a
local HTTP server, the image's entry command (`chatbridge run` etc.), the
shipped compose config through the config loader, `systemd-analyze` on the unit
and `docker compose config` when the compose CLI is installed.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tomllib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path

import pytest
import yaml
from aiohttp import web

from chatbridge.config import EngineConfig, load_config_text

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
DOCKERFILE = DEPLOY / "Dockerfile"
DOCKERIGNORE = DEPLOY / "Dockerfile.dockerignore"
COMPOSE = DEPLOY / "compose.yaml"
COMPOSE_CONFIG = DEPLOY / "chatbridge.compose.yaml"
UNIT = DEPLOY / "chatbridge.service"

SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSW(OR)?D|CREDENTIAL|AUTH)", re.IGNORECASE)
# Values that look like real credentials wherever they appear.
SECRET_VALUE = re.compile(
    r"(sk-[A-Za-z0-9_-]{16,}|xox[abprs]-[A-Za-z0-9-]{10,}|xapp-[A-Za-z0-9-]{10,}"
    r"|\b\d{6,12}:[A-Za-z0-9_-]{30,}\b|AKIA[0-9A-Z]{16})"
)


# --- Dockerfile ---------------------------------------------------------------


@dataclass(frozen=True)
class Instruction:
    name: str  # upper-case: FROM, RUN, ...
    args: str
    stage: int  # 0 for the first FROM's stage


def parse_dockerfile(text: str) -> list[Instruction]:
    """Instructions with continuation lines joined; comments and blank lines dropped."""
    instructions: list[Instruction] = []
    stage = -1
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):  # comment lines inside a continuation
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        full = (pending + line).strip()
        pending = ""
        name, _, args = full.partition(" ")
        name = name.upper()
        if name == "FROM":
            stage += 1
        instructions.append(Instruction(name, args.strip(), stage))
    assert not pending, "the Dockerfile ends inside a continuation line"
    return instructions


def env_pairs(args: str) -> list[tuple[str, str]]:
    """`ENV A=1 B="x y"` or the legacy `ENV A 1` -> [(name, value)]."""
    words = shlex.split(args)
    if words and "=" not in words[0]:
        return [(words[0], " ".join(words[1:]))]
    return [tuple(word.split("=", 1)) if "=" in word else (word, "") for word in words]  # type: ignore[misc]


@pytest.fixture(scope="module")
def dockerfile() -> list[Instruction]:
    return parse_dockerfile(DOCKERFILE.read_text(encoding="utf-8"))


def final_stage(instructions: list[Instruction]) -> list[Instruction]:
    last = max(i.stage for i in instructions)
    return [i for i in instructions if i.stage == last]


def healthcheck_argv(instructions: list[Instruction]) -> list[str]:
    """The exec-form command of the final stage's HEALTHCHECK."""
    checks = [i for i in final_stage(instructions) if i.name == "HEALTHCHECK"]
    assert len(checks) == 1, "the runtime stage needs exactly one HEALTHCHECK"
    _, found, command = checks[0].args.partition("CMD ")
    assert found, f"HEALTHCHECK without CMD: {checks[0].args!r}"
    argv = json.loads(command)
    assert isinstance(argv, list), "HEALTHCHECK CMD should be exec form (a JSON list)"
    return argv


def test_base_image_is_python_3_12_slim(dockerfile: list[Instruction]) -> None:
    args = {
        pairs[0]: pairs[1] for i in dockerfile if i.name == "ARG" for pairs in env_pairs(i.args)
    }
    images = [i.args.split()[0] for i in dockerfile if i.name == "FROM"]
    resolved = [
        args.get(image.strip("${}"), image) if image.startswith("$") else image for image in images
    ]
    assert resolved, "no FROM"
    assert all(image == "python:3.12-slim" for image in resolved), resolved


def test_runtime_stage_runs_as_a_non_root_user(dockerfile: list[Instruction]) -> None:
    users = [i.args for i in final_stage(dockerfile) if i.name == "USER"]
    assert users, "the runtime stage sets no USER: the bot would run as root"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0"), f"USER {users[-1]} is root"
    runs = " ".join(i.args for i in final_stage(dockerfile) if i.name == "RUN")
    assert re.search(rf"useradd\b.*\b{re.escape(user)}\b", runs) or user.isdigit(), (
        f"USER {user} is never created in the runtime stage"
    )


def test_layout_entrypoint_and_ports(dockerfile: list[Instruction]) -> None:
    runtime = final_stage(dockerfile)
    by_name: dict[str, list[str]] = {}
    for i in runtime:
        by_name.setdefault(i.name, []).append(i.args)
    assert by_name["WORKDIR"][-1] == "/app"
    assert json.loads(by_name["ENTRYPOINT"][-1]) == ["chatbridge"]
    assert json.loads(by_name["CMD"][-1]) == ["run"]
    assert "8080" in " ".join(by_name["EXPOSE"]).split()
    assert "/var/lib/chatbridge" in " ".join(by_name["VOLUME"])
    env = dict(pair for args in by_name["ENV"] for pair in env_pairs(args))
    assert env.get("CHATBRIDGE_CONFIG") == "/etc/chatbridge/chatbridge.yaml"
    assert by_name.get("STOPSIGNAL", ["SIGTERM"])[-1] == "SIGTERM"


def test_no_secret_is_baked_into_the_image(dockerfile: list[Instruction]) -> None:
    for i in dockerfile:
        if i.name in ("ENV", "ARG"):
            for name, value in env_pairs(i.args):
                assert not (SECRET_NAME.search(name) and value), (
                    f"{i.name} {name} holds a value: secrets must come at run time"
                )
        assert not SECRET_VALUE.search(i.args), f"credential-looking text in {i.name} {i.args!r}"
    copied = " ".join(i.args for i in dockerfile if i.name in ("COPY", "ADD"))
    for forbidden in (".env", "secrets", "chatbridge.yaml"):
        assert forbidden not in copied.split("/"), f"the image copies {forbidden}"
        assert not re.search(rf"(^|\s){re.escape(forbidden)}(\s|$)", copied)


def test_dev_extras_are_not_installed(dockerfile: list[Instruction]) -> None:
    runs = " ".join(i.args for i in dockerfile if i.name == "RUN")
    assert re.search(r"pip install (--\S+ )*'?\.(\[all\])?'?(\s|$|&)", runs), (
        "chatbridge is not pip-installed"
    )
    assert "'.[all]'" in runs, "the image lacks a platform's SDK or the Redis client"
    assert "[dev]" not in runs, "the image installs the dev extras"
    assert " -e " not in runs, "the image installs chatbridge editable"


def _package_sources() -> set[str]:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    folders = set(pyproject["tool"]["setuptools"]["package-dir"].values())
    return folders | {"pyproject.toml", pyproject["project"]["readme"]}


def test_build_stage_copies_everything_the_package_is_built_from(
    dockerfile: list[Instruction],
) -> None:
    copied: set[str] = set()
    for i in dockerfile:
        if i.name == "COPY" and "--from" not in i.args:
            copied.update(word.rstrip("/") for word in i.args.split()[:-1])
    missing = _package_sources() - copied
    assert not missing, (
        f"pyproject.toml builds from {sorted(missing)}, the Dockerfile never COPYs it"
    )


def _ignored(path: str, patterns: list[str]) -> bool:
    """Docker's rule: the last matching pattern wins; `!` re-includes."""
    verdict = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        body = pattern[1:] if negate else pattern
        body = body.rstrip("/")
        if fnmatch(path, body) or (
            body.startswith("**/") and fnmatch(path.split("/")[-1], body[3:])
        ):
            verdict = not negate
    return verdict


def test_dockerignore_keeps_sources_and_drops_secrets() -> None:
    patterns = [
        line.strip()
        for line in DOCKERIGNORE.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    for source in sorted(_package_sources()):
        assert not _ignored(source, patterns), f"{source} is excluded from the build context"
    for private in (
        ".git",
        ".venv",
        "data",
        "deploy/chatbridge.env",
        "deploy/secrets",
        "chatbridge.yaml",
        "tests",
    ):
        assert _ignored(private, patterns), f"{private} would be sent to the build context"
    assert _ignored("core/__pycache__", patterns)


# --- the HEALTHCHECK command, run for real ------------------------------------


@pytest.fixture
async def health_server() -> AsyncIterator[tuple[str, dict[str, int]]]:
    """127.0.0.1 server whose /healthz answers the status in `state`."""
    state = {"status": 200, "hits": 0}

    async def healthz(_: web.Request) -> web.Response:
        state["hits"] += 1
        return web.Response(status=state["status"], text="ok" if state["status"] == 200 else "no")

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}/healthz", state
    finally:
        await runner.cleanup()


def _health_env(url: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env.pop("CHATBRIDGE_HEALTH_URL", None)
    if url is not None:
        env["CHATBRIDGE_HEALTH_URL"] = url
    return env


async def _run_healthcheck(argv: list[str], env: dict[str, str]) -> int:
    assert argv[0] == "python", "HEALTHCHECK should run the image's python"
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        *argv[1:],
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    return await asyncio.wait_for(process.wait(), timeout=20)


async def test_healthcheck_passes_on_200(
    dockerfile: list[Instruction], health_server: tuple[str, dict[str, int]]
) -> None:
    url, state = health_server
    assert await _run_healthcheck(healthcheck_argv(dockerfile), _health_env(url)) == 0
    assert state["hits"] == 1


async def test_healthcheck_fails_on_503(
    dockerfile: list[Instruction], health_server: tuple[str, dict[str, int]]
) -> None:
    url, state = health_server
    state["status"] = 503
    assert await _run_healthcheck(healthcheck_argv(dockerfile), _health_env(url)) != 0
    assert state["hits"] == 1


async def test_healthcheck_fails_when_nothing_listens(dockerfile: list[Instruction]) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/healthz"
    assert await _run_healthcheck(healthcheck_argv(dockerfile), _health_env(url)) != 0


def test_healthcheck_default_url_is_healthz_on_the_exposed_port(
    dockerfile: list[Instruction],
) -> None:
    command = " ".join(healthcheck_argv(dockerfile))
    env = dict(p for i in final_stage(dockerfile) if i.name == "ENV" for p in env_pairs(i.args))
    for url in [*re.findall(r"http://[^'\"\s]+", command), env.get("CHATBRIDGE_HEALTH_URL", "")]:
        assert url == "http://127.0.0.1:8080/healthz", url


def test_compose_healthcheck_is_the_images(dockerfile: list[Instruction]) -> None:
    compose = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    test = compose["services"]["chatbridge"]["healthcheck"]["test"]
    assert test[0] == "CMD"
    assert test[1:] == healthcheck_argv(dockerfile)


# --- the image's entry command -------------------------------------------------


def _chatbridge() -> str:
    found = shutil.which(
        "chatbridge", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    )
    if found is None:
        pytest.skip("the chatbridge console script is not installed (pip install .)")
    return found


def _entry(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """The image's entry command with `args`, as its CMD would run it."""
    return subprocess.run(
        [_chatbridge(), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
        cwd=cwd,
    )


def test_entry_command_has_the_run_subcommand() -> None:
    result = _entry("--help")
    assert result.returncode == 0, result.stderr
    assert re.search(r"\brun\b", result.stdout)
    result = _entry("run", "--help")
    assert result.returncode == 0, result.stderr
    assert "--config" in result.stdout


def test_entry_command_reads_chatbridge_config(tmp_path: Path) -> None:
    """ENTRYPOINT chatbridge + CHATBRIDGE_CONFIG: `config check` validates the mounted file."""
    (tmp_path / "mounted.yaml").write_text("server:\n  host: 0.0.0.0\n  port: 8080\n")
    env = {**os.environ, "CHATBRIDGE_CONFIG": str(tmp_path / "mounted.yaml")}
    result = _entry("config", "check", env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    (tmp_path / "mounted.yaml").write_text("server:\n  hots: 0.0.0.0\n")
    result = _entry("config", "check", env=env, cwd=tmp_path)
    assert result.returncode == 2
    assert "mounted.yaml" in result.stderr


# --- compose.yaml -------------------------------------------------------------


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))


def _seconds(value: object) -> float:
    """`30`, `30s`, `2min`, `1m30s` as compose and systemd write them."""
    units = {"": 1, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600}
    parts = re.findall(r"(\d+(?:\.\d+)?)\s*([a-z]*)", str(value).strip())
    assert parts, f"not a duration: {value!r}"
    return sum(float(number) * units[unit] for number, unit in parts)


def test_redis_persists_append_only_on_a_named_volume(compose: dict) -> None:
    redis = compose["services"]["redis"]
    assert redis["image"].startswith("redis:7")
    command = redis["command"]
    words = command if isinstance(command, list) else shlex.split(command)
    assert "--appendonly" in words
    assert words[words.index("--appendonly") + 1] == "yes"
    mounts = [v.split(":") for v in redis["volumes"]]
    assert any(target == "/data" and source in compose["volumes"] for source, target, *_ in mounts)
    assert redis["healthcheck"]["test"][-2:] == ["redis-cli", "ping"] or "ping" in str(
        redis["healthcheck"]["test"]
    )
    assert "ports" not in redis, "Redis has no password: do not publish it"


def test_chatbridge_service_wiring(compose: dict) -> None:
    bot = compose["services"]["chatbridge"]
    assert bot["build"] == {"context": "..", "dockerfile": "deploy/Dockerfile"}
    assert (
        COMPOSE.parent / bot["build"]["context"] / bot["build"]["dockerfile"]
    ).resolve() == DOCKERFILE
    assert bot["depends_on"]["redis"]["condition"] == "service_healthy"
    assert bot["restart"] == "unless-stopped"
    assert compose["services"]["redis"]["restart"] == "unless-stopped"
    assert bot["healthcheck"]["test"]
    config_mounts = [
        v for v in bot["volumes"] if v.split(":")[1] == "/etc/chatbridge/chatbridge.yaml"
    ]
    assert len(config_mounts) == 1
    assert config_mounts[0].endswith(":ro"), "config not mounted read-only"
    source = (COMPOSE.parent / config_mounts[0].split(":")[0]).resolve()
    assert source == COMPOSE_CONFIG
    for secret in bot["secrets"]:
        name = secret if isinstance(secret, str) else secret["source"]
        assert "file" in compose["secrets"][name] or "environment" in compose["secrets"][name]
    assert bot["env_file"]


def test_compose_stop_grace_outlasts_shutdown_grace(compose: dict) -> None:
    bot = compose["services"]["chatbridge"]
    grace = EngineConfig().shutdown_grace
    assert _seconds(bot["stop_grace_period"]) > grace, (
        "docker would SIGKILL chatbridge before engine.shutdown_grace ends"
    )


def _walk(node: object, path: str = "") -> Iterator[tuple[str, object]]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _walk(value, f"{path}.{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _walk(value, f"{path}[{index}]")
    else:
        yield path, node


def test_compose_holds_no_literal_secret(compose: dict) -> None:
    for path, value in _walk(compose):
        text = str(value)
        assert not SECRET_VALUE.search(text), f"{path} looks like a credential"
    environment = compose["services"]["chatbridge"].get("environment", {})
    items = (
        environment.items()
        if isinstance(environment, dict)
        else (e.split("=", 1) if "=" in e else (e, "") for e in environment)
    )
    for name, value in items:
        if SECRET_NAME.search(name) and value and not re.fullmatch(r"\$\{\w+[^}]*\}", str(value)):
            literal = f"environment {name} holds a literal value"
            assert str(name).endswith("_FILE"), literal
            assert str(value).startswith("/run/secrets/"), literal


def test_example_env_and_configs_hold_no_secret() -> None:
    for path in (COMPOSE_CONFIG, DEPLOY / "chatbridge.env.example"):
        text = path.read_text(encoding="utf-8")
        assert not SECRET_VALUE.search(text), f"{path.name} contains a credential-looking value"
    for line in (DEPLOY / "chatbridge.env.example").read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.partition("=")
            assert not value.strip(), f"chatbridge.env.example ships a value for {name}"
    ignored = (DEPLOY / ".gitignore").read_text(encoding="utf-8").split()
    assert "chatbridge.env" in ignored
    assert "secrets/" in ignored


def _docker_compose() -> list[str] | None:
    docker = shutil.which("docker")
    if (
        docker
        and subprocess.run(
            [docker, "compose", "version"], capture_output=True, timeout=30, check=False
        ).returncode
        == 0
    ):
        return [docker, "compose"]
    return None


def test_docker_compose_config_accepts_the_file(tmp_path: Path) -> None:
    command = _docker_compose()
    if command is None:
        pytest.skip("the docker compose plugin is not installed: `docker compose config` not run")
    # env_file and the secret file must exist; use empty stand-ins in a copy.
    copy = tmp_path / "deploy"
    shutil.copytree(DEPLOY, copy)
    (copy / "chatbridge.env").write_text("TELEGRAM_BOT_TOKEN=\n")
    (copy / "secrets").mkdir(exist_ok=True)
    (copy / "secrets" / "openai_api_key").write_text("")
    result = subprocess.run(
        [*command, "-f", str(copy / "compose.yaml"), "config", "-q"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr


# --- the config shipped for compose -------------------------------------------

FILE_KEY = re.compile(r"^(\s*)(\w+)_file:\s*(\S+)(.*)$", re.MULTILINE)
COMPOSE_ENV = {"TELEGRAM_BOT_TOKEN": "123456:placeholder"}


def test_compose_config_is_valid_apart_from_file_secrets() -> None:
    """Everything but `<field>_file:` keys (rewritten to inline values) passes the loader."""
    text = FILE_KEY.sub(r"\1\2: placeholder\4", COMPOSE_CONFIG.read_text(encoding="utf-8"))
    config = load_config_text(text, source=str(COMPOSE_CONFIG), environ=COMPOSE_ENV)
    assert config.memory.backend == "redis"
    assert config.memory.url == "redis://redis:6379/0"
    assert config.server.host == "0.0.0.0"
    assert config.platforms.telegram.enabled
    assert config.providers.entries, "no provider: the bot would answer with the debug provider"


def test_compose_config_file_secrets_resolve_on_the_host_and_in_the_container(
    compose: dict,
) -> None:
    """A relative `<field>_file:` is relative to the config's directory: on the
    host `deploy/`, in the container the mount point's; both must hold the secret."""
    text = COMPOSE_CONFIG.read_text(encoding="utf-8")
    bot = compose["services"]["chatbridge"]
    (mount,) = [v for v in bot["volumes"] if v.startswith("./chatbridge.compose.yaml:")]
    in_container = Path(mount.split(":")[1]).parent
    targets = {}
    for secret in bot.get("secrets", []):
        name = secret if isinstance(secret, str) else secret["source"]
        target = secret.get("target", name) if isinstance(secret, dict) else name
        targets[str(Path("/run/secrets") / target)] = compose["secrets"][name]["file"]
    paths = [m.group(3) for m in FILE_KEY.finditer(text)]
    assert paths, "the compose config shows no `<field>_file:` secret"
    for path in paths:
        assert not Path(path).is_absolute(), f"{path}: absolute, so not found on the host"
        container_path = str(in_container / path)
        assert container_path in targets, f"compose mounts no secret at {container_path}"
        host_file = (COMPOSE.parent / targets[container_path]).resolve()
        assert host_file == (COMPOSE_CONFIG.parent / path).resolve(), (
            f"on the host {path} is not the file compose mounts ({host_file})"
        )


def test_compose_config_loads_with_file_secrets(tmp_path: Path) -> None:
    text = COMPOSE_CONFIG.read_text(encoding="utf-8")
    secret = tmp_path / "openai_api_key"
    secret.write_text("sk-test-not-a-real-key\n")
    text = FILE_KEY.sub(rf"\1\2_file: {secret}\4", text)
    config = load_config_text(text, source=str(COMPOSE_CONFIG), environ=COMPOSE_ENV)
    key = config.providers.entries["main"].api_key
    assert key is not None
    assert key.get_secret_value() == "sk-test-not-a-real-key"  # read from the file, newline dropped


# --- chatbridge.systemd.yaml, the unit's config ---------------------------------

SYSTEMD_CONFIG = DEPLOY / "chatbridge.systemd.yaml"
SYSTEMD_ENV = {"TELEGRAM_BOT_TOKEN": "123456:placeholder", "OPENAI_API_KEY": "sk-placeholder"}


def test_the_units_config_keeps_the_store_in_its_state_directory(
    service: dict[str, list[str]],
) -> None:
    state = Path("/var/lib") / service["StateDirectory"][-1]
    assert Path(service["WorkingDirectory"][-1]) == state
    for environ in (SYSTEMD_ENV, {**SYSTEMD_ENV, "STATE_DIRECTORY": str(state)}):
        config = load_config_text(
            SYSTEMD_CONFIG.read_text(encoding="utf-8"),
            source=str(SYSTEMD_CONFIG),
            environ=environ,
            base_dir=Path("/etc/chatbridge"),  # where the unit's --config puts it
        )
        store = Path(config.memory.path)
        assert store.is_absolute(), store
        assert store.parent == state, f"{store} is outside the unit's StateDirectory"
    assert config.platforms.telegram.enabled
    assert config.providers.entries, "no provider: run would refuse to start"
    assert (config.access.allow, config.access.admins) == ((), ())


def test_the_units_config_holds_no_secret() -> None:
    text = SYSTEMD_CONFIG.read_text(encoding="utf-8")
    assert not SECRET_VALUE.search(text)
    for key in ("token", "api_key"):
        assert re.search(rf"^\s*{key}: \$\{{\w+\}}", text, re.MULTILINE), f"{key} is not ${{VAR}}"


# --- chatbridge.service --------------------------------------------------------


def parse_unit(text: str) -> dict[str, dict[str, list[str]]]:
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        assert current is not None, f"directive outside a section: {line!r}"
        key, _, value = line.partition("=")
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


@pytest.fixture(scope="module")
def service() -> dict[str, list[str]]:
    return parse_unit(UNIT.read_text(encoding="utf-8"))["Service"]


HARDENING = {
    "DynamicUser": "yes",
    "StateDirectory": "chatbridge",
    "ConfigurationDirectory": "chatbridge",
    "ProtectSystem": "strict",
    "ProtectHome": "yes",
    "PrivateTmp": "yes",
    "PrivateDevices": "yes",
    "NoNewPrivileges": "yes",
    "ProtectKernelTunables": "yes",
    "ProtectKernelModules": "yes",
    "ProtectKernelLogs": "yes",
    "ProtectControlGroups": "yes",
    "RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX",
    "LockPersonality": "yes",
    "MemoryDenyWriteExecute": "yes",
    "SystemCallFilter": "@system-service",
    "CapabilityBoundingSet": "",
    "Restart": "on-failure",
    "KillSignal": "SIGTERM",
    "EnvironmentFile": "-/etc/chatbridge/env",
    "ExecReload": "/bin/kill -HUP $MAINPID",
}


@pytest.mark.parametrize(("key", "value"), sorted(HARDENING.items()))
def test_unit_directive(service: dict[str, list[str]], key: str, value: str) -> None:
    assert value in service.get(key, []), f"{key}={value} missing (has {service.get(key)})"


def test_unit_runs_the_config_in_etc(service: dict[str, list[str]]) -> None:
    (exec_start,) = service["ExecStart"]
    argv = shlex.split(exec_start)
    assert Path(argv[0]).name == "chatbridge"
    assert argv[1] == "run"
    assert argv[argv.index("--config") + 1] == "/etc/chatbridge/chatbridge.yaml"
    # DynamicUser=yes allocates the user; a fixed User= beside it would be ignored.
    assert "User" not in service


def test_unit_stop_timeout_outlasts_shutdown_grace(service: dict[str, list[str]]) -> None:
    timeout = _seconds(service["TimeoutStopSec"][-1])
    assert timeout > EngineConfig().shutdown_grace


def _unit_for_verify(tmp_path: Path) -> Path:
    """The unit with ExecStart pointing at an executable that exists here."""
    text = UNIT.read_text(encoding="utf-8")
    text = re.sub(r"^ExecStart=\S+", f"ExecStart={_chatbridge()}", text, flags=re.MULTILINE)
    path = tmp_path / "chatbridge.service"
    path.write_text(text)
    return path


def test_systemd_analyze_verify(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed")
    unit = _unit_for_verify(tmp_path)
    result = subprocess.run(
        [analyze, "verify", str(unit)], capture_output=True, text=True, timeout=60, check=False
    )
    # verify exits 0 on unknown or misspelt directives, but names them on stderr.
    complaints = [line for line in result.stderr.splitlines() if "chatbridge.service" in line]
    assert result.returncode == 0, result.stderr
    assert not complaints, result.stderr


def test_systemd_analyze_security_exposure(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed")
    unit = _unit_for_verify(tmp_path)
    result = subprocess.run(
        [analyze, "security", "--offline=yes", "--threshold=20", "--no-pager", str(unit)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if "--offline" in result.stderr or "Unknown option" in result.stderr:
        pytest.skip("this systemd-analyze has no offline security check (systemd < 250)")
    match = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", result.stdout)
    assert match, result.stdout[-2000:] + result.stderr
    assert float(match.group(1)) <= 2.0, f"exposure {match.group(1)}: hardening was weakened"
