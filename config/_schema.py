"""Walks the model classes along a key path, to explain errors in the file's terms.

Pydantic reports locations, not the model a key belonged to; knowing the model
lets us suggest the closest real key, hide secret inputs from messages and
treat `key:` with nothing after it as "use the default".
"""

from __future__ import annotations

import types
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, SecretStr

from ._errors import Loc
from ._models import ChatbridgeConfig
from ._providers import ProviderConfig, ProvidersConfig

__all__ = ["allowed_keys", "is_secret", "prune_nulls"]


def _model(annotation: Any) -> type[BaseModel] | None:
    """The model class of `annotation`, also through `Model | None` (a scope's `limits`)."""
    if get_origin(annotation) in (Union, types.UnionType):
        models = [m for m in map(_model, get_args(annotation)) if m is not None]
        return models[0] if len(models) == 1 else None
    return (
        annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
    )


def _child(annotation: Any, part: str | int) -> Any:
    """The annotation one step down; None when the path leaves the schema."""
    model = _model(annotation)
    if model is not None:
        if isinstance(part, str) and part in model.model_fields:
            return model.model_fields[part].annotation
        return ProviderConfig if model is ProvidersConfig and isinstance(part, str) else None
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is dict and isinstance(part, str):
        return args[1]
    if origin in (tuple, list) and isinstance(part, int):
        return args[0]
    return None


def _at(loc: Loc) -> Any:
    annotation: Any = ChatbridgeConfig
    for part in loc:
        annotation = _child(annotation, part)
        if annotation is None:
            return None
    return annotation


def allowed_keys(loc: Loc) -> list[str]:
    """Field names of the model at `loc`, for did-you-mean on unknown keys."""
    model = _model(_at(loc))
    return list(model.model_fields) if model is not None else []


def is_secret(loc: Loc) -> bool:
    """Whether the value at `loc` is a secret that must not be echoed in messages."""
    annotation = _at(loc)
    if annotation is SecretStr:
        return True
    union = get_origin(annotation) in (Union, types.UnionType)
    return union and SecretStr in get_args(annotation)


def prune_nulls(data: Any, loc: Loc = ()) -> Any:
    """Drop known keys whose value is null, so `telegram:` with nothing below means defaults.

    Unknown keys are kept even when null: they must still be reported.
    """
    if not isinstance(data, dict) or _model(_at(loc)) is None:
        return data
    keep = set(allowed_keys(loc))
    out: dict[str, Any] = {}
    for key, value in data.items():
        if value is None and key in keep:
            continue
        out[key] = prune_nulls(value, (*loc, key))
    return out
