"""Turn MODEL / draft arguments into config-only folders vLLM can read, or stop with BadInput."""

from __future__ import annotations

import json
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

from vllm._fork.spec_check.findings import BadInput


def _read_json(path: Path, what: str) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"{what}: cannot read {path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise BadInput(f"{what}: {path} is not valid JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, dict):
        raise BadInput(f"{what}: {path} must hold a JSON object, found {type(data).__name__}")
    return data


def _from_hf_cache(name: str) -> Path | None:
    """The cached snapshot folder of hub id `name`, without touching the network."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    try:
        found = try_to_load_from_cache(name, "config.json")
    except ValueError:  # an id the hub library rejects (HFValidationError) is simply not in the cache
        return None
    return Path(found).parent if isinstance(found, str) else None


@contextmanager
def config_folder(argument: str, what: str):
    """Yield (folder holding `argument`'s config.json, that config): a folder, a JSON file, or a cached hub id."""
    try:
        path = Path(argument).expanduser()
        is_dir, is_file = path.is_dir(), path.is_file()
    except (OSError, ValueError, RuntimeError) as exc:  # name too long, NUL byte, ~user that does not exist
        raise BadInput(f"{what}: cannot use {argument!r} as a path: {exc}") from None
    if is_dir:
        if not (path / "config.json").is_file():
            raise BadInput(f"{what}: {path} has no config.json; pass the checkpoint folder or its config file")
        yield str(path), _read_json(path / "config.json", what)
        return
    if is_file:
        data = _read_json(path, what)
        if path.name == "config.json":  # its own folder: vLLM reads the folder name (e.g. "eagle3" picks the method)
            yield str(path.parent.resolve()), data
            return
        with tempfile.TemporaryDirectory(prefix="spec-check-") as tmp:
            folder = Path(tmp) / path.stem  # the file's name stands in for the folder name vLLM would read
            folder.mkdir()
            (folder / "config.json").write_text(json.dumps(data), encoding="utf-8")
            for extra in ("generation_config.json",):  # keep siblings vLLM reads, when present
                if (path.parent / extra).is_file():
                    shutil.copy(path.parent / extra, folder / extra)
            yield str(folder), data
        return
    cached = _from_hf_cache(argument) if "/" in argument and not argument.startswith((".", "/", "~")) else None
    if cached is not None:
        yield str(cached), _read_json(cached / "config.json", what)
        return
    raise BadInput(f"{what}: {argument} is not a folder, a config file or a hub id in the local HF cache "
                   f"(spec-check never downloads; run `hf download {argument} config.json` first)")


# serve's top-level aliases, merged into --speculative-config as EngineArgs.create_speculative_config does.
ALIASES = (("--spec-method", "spec_method", "method"), ("--spec-model", "spec_model", "model"),
           ("--spec-tokens", "spec_tokens", "num_speculative_tokens"))


def speculative_dict(value, args=None, required: bool = True) -> dict:
    """--speculative-config as serve parses it (a dict) with --spec-method/--spec-model/--spec-tokens merged in."""
    if value is not None and not isinstance(value, dict):
        raise BadInput(f"--speculative-config: expected a JSON object, got {value!r}")
    spec = {key.replace("-", "_"): item for key, item in (value or {}).items()}
    for flag, attribute, key in ALIASES:
        given = getattr(args, attribute, None)
        if given is None:
            continue
        if key in spec:
            raise BadInput(f"{flag} and --speculative-config['{key}'] are mutually exclusive; give it once")
        spec[key] = given
    if not spec and not required:
        return spec
    if not spec:
        raise BadInput("--speculative-config: required (or --spec-method/--spec-model/--spec-tokens), e.g. "
                       "'{\"method\": \"eagle3\", \"model\": \"DRAFT\", \"num_speculative_tokens\": 3}'")
    if not spec.get("method") and not spec.get("model"):
        raise BadInput("--speculative-config: give 'method' (e.g. eagle3, dflash, mtp) and, for drafters, 'model'")
    return spec
