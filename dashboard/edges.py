"""The typed edges: the field types every JSON body is made of, and the one way a body is read.

Every body the API and the webhook take is a pydantic model built from these types, so a number is finite
and in range, a text holds nothing PostgreSQL cannot store (runners.text is the one rule for that) and is
of bounded length, and a free-form object (an environment, telemetry) is bounded in size and depth. A body
that breaks a rule is a `BodyInvalid` naming the field, answered 400 before anything is stored. The
OpenAPI schema (dashboard.openapi) is generated from the same models.
"""

from __future__ import annotations

import json
import math
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from runners.text import storable, storable_problem

JSON_MAX_DEPTH = 16
JSON_MAX_VALUES = 100_000
JSON_MAX_TEXT_CHARS = 20_000
JSON_MAX_KEY_CHARS = 200
# A JSON number stored in jsonb and read back by Python: kept to what a float holds exactly as an integer.
JSON_MAX_INTEGER = 2**53


class BodyInvalid(Exception):
    """A body that breaks its model: `field` is the dotted path of the first bad field ('' for the body),
    the message one line that names it."""

    def __init__(self, message: str, *, field: str = "") -> None:
        super().__init__(message)
        self.field = field


def _text_checked(value: str) -> str:
    problem = storable_problem(value)
    if problem is not None:
        raise ValueError(f"the text {problem}")
    return value


def json_checked(value: Any, path: str = "", depth: int = 0, budget: list[int] | None = None) -> Any:
    budget = budget if budget is not None else [JSON_MAX_VALUES]
    budget[0] -= 1
    if budget[0] < 0:
        raise ValueError(f"more than {JSON_MAX_VALUES} values")
    if depth > JSON_MAX_DEPTH:
        raise ValueError(f"nested deeper than {JSON_MAX_DEPTH} levels at {path or 'the top'}")
    where = f" at {path}" if path else ""
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str) or len(key) > JSON_MAX_KEY_CHARS:
                raise ValueError(f"a key{where} is not a text of at most {JSON_MAX_KEY_CHARS} characters")
            problem = storable_problem(key)
            if problem is not None:
                raise ValueError(f"the key {key[:40]!r}{where} {problem}")
            json_checked(item, f"{path}.{key}" if path else key, depth + 1, budget)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            json_checked(item, f"{path}[{index}]", depth + 1, budget)
    elif isinstance(value, str):
        if len(value) > JSON_MAX_TEXT_CHARS:
            raise ValueError(f"a text{where} is longer than {JSON_MAX_TEXT_CHARS} characters")
        problem = storable_problem(value)
        if problem is not None:
            raise ValueError(f"the text{where} {problem}")
    elif isinstance(value, bool) or value is None:
        pass
    elif isinstance(value, int):
        if abs(value) > JSON_MAX_INTEGER:
            raise ValueError(f"the number{where} is out of range")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"the number{where} is not finite")
    else:
        raise ValueError(f"a value{where} is not JSON")
    return value


# A text PostgreSQL can store; anything else is refused. Bound it where it is used:
# `Annotated[Text, Field(max_length=100)]`.
Text = Annotated[str, AfterValidator(_text_checked)]
# A text kept as evidence (a log tail, a failure's reason): what PostgreSQL cannot store is replaced by
# U+FFFD instead of refused, so a crashing process's binary output never costs a run its results.
EvidenceText = Annotated[str, AfterValidator(storable)]
# A finite number, refused when NaN or infinite (Python's json reads NaN, Infinity and 1e400).
Finite = Annotated[float, Field(allow_inf_nan=False)]
# A free-form JSON object (an environment, a telemetry sample, server metrics): bounded in values, depth
# and text, with finite numbers and storable texts throughout.
JsonObject = Annotated[dict[str, Any], AfterValidator(json_checked)]


class Body(BaseModel):
    """A JSON body: unknown fields are refused, numbers are finite."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)


def _field_path(location: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in location)


def body_parse[ModelT: BaseModel](model: type[ModelT], data: object) -> ModelT:
    """`data` as `model`, or BodyInvalid naming the first field that breaks it."""
    try:
        return model.model_validate(data)
    except ValidationError as error:
        first = error.errors(include_url=False, include_input=False)[0]
        field = _field_path(tuple(first["loc"]))
        message = str(first["msg"])
        if first["type"] == "missing":
            message = "required"
        elif first["type"] == "too_long":
            context = first.get("ctx", {})
            message = (
                f"its length {context.get('actual_length')} is over the limit of {context.get('max_length')}"
            )
        raise BodyInvalid(f"field {field or 'body'!r}: {message}"[:500], field=field) from None


def json_body_parse[ModelT: BaseModel](model: type[ModelT], raw: bytes) -> ModelT:
    """A request's raw JSON bytes as `model` (an empty body is an empty object)."""
    try:
        data = json.loads(raw or b"{}")
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise BodyInvalid(f"the body is not valid JSON: {error}") from None
    except RecursionError:
        raise BodyInvalid("the body is JSON nested too deeply") from None
    if not isinstance(data, dict):
        raise BodyInvalid("the body must be a JSON object")
    return body_parse(model, data)
