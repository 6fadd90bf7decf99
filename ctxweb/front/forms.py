"""The preview page's parameter form: a strategy's parameters as a :class:`django.forms.Form`
built from its catalog entry (names, types, ranges, choices, help), read from the query string.

A parameter missing from the query keeps its starting value (the session's window and reserve,
else the strategy's default); a submitted one is converted to its type, or its field shows why
not. Ranges are the strategy's to check (:meth:`Strategy.validate`, which names the field too).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django import forms

from compaction.errors import StrategyError

TRUE = ("true", "on", "1", "yes")
FALSE = ("false", "off", "0", "no")
#: What a parameter missing from the query cleans to.
NOT_GIVEN = object()


def _text(value: Any) -> str:
    """A parameter value as the form shows it."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def convert(spec: Mapping[str, Any], raw: str) -> Any:
    """A submitted string as the parameter's type; raise :class:`StrategyError` if it is not."""
    path = f"params.{spec['name']}"
    kind = spec["type"]
    text = raw.strip()
    if kind == "str-list":
        return [item.strip() for item in text.replace("\n", ",").split(",") if item.strip()]
    if kind == "str":
        return text
    if text == "":
        if spec["default"] is None:
            return None
        raise StrategyError(path, "must not be empty")
    if kind == "bool":
        if text.lower() in TRUE:
            return True
        if text.lower() in FALSE:
            return False
        raise StrategyError(path, "must be true or false")
    try:
        number = float(text.replace("_", ""))
    except ValueError:
        raise StrategyError(path, "must be a number") from None
    if kind == "int":
        if not number.is_integer():
            raise StrategyError(path, "must be an integer")
        return int(number)
    return number


class ParameterField(forms.Field):
    """One strategy parameter: the submitted text converted to the parameter's type."""

    def __init__(self, spec: Mapping[str, Any]) -> None:
        super().__init__(required=False, help_text=spec["help"], label=spec["name"])
        self.spec = spec

    def to_python(self, value: Any) -> Any:
        if value is None:
            return NOT_GIVEN
        try:
            return convert(self.spec, str(value))
        except StrategyError as problem:
            raise forms.ValidationError(problem.reason, code="invalid") from None

    def validate(self, value: Any) -> None:
        """Nothing beyond the conversion: the strategy checks ranges and names the field."""


class ParametersForm(forms.Form):
    """A strategy's parameters, one :class:`ParameterField` each, bound to the query string."""

    def __init__(self, spec: Mapping[str, Any], query: Mapping[str, str]) -> None:
        names = [param["name"] for param in spec["params"]]
        super().__init__(data={n: query[n] for n in names if n in query}, auto_id="param-%s")
        for param in spec["params"]:
            self.fields[param["name"]] = ParameterField(param)


@dataclass
class Field:
    """One parameter of the strategy as the page shows it."""

    name: str
    type: str
    default: Any
    min: float | None
    max: float | None
    choices: list[Any] | None
    help: str
    value: str
    error: str = ""

    @property
    def input_id(self) -> str:
        return f"param-{self.name}"

    @property
    def default_text(self) -> str:
        return _text(self.default)

    @property
    def min_text(self) -> str:
        return _text(self.min)

    @property
    def max_text(self) -> str:
        return _text(self.max)


@dataclass
class Form:
    """The bound form as the page uses it: its fields, the parameters to plan with, and errors
    as ``{"params.<name>": why}``."""

    fields: list[Field]
    params: dict[str, Any]
    errors: dict[str, str] = field(default_factory=dict)


def parameter_form(
    spec: Mapping[str, Any], query: Mapping[str, str], start: Mapping[str, Any]
) -> Form:
    """The strategy's form, filled from ``query`` where given, else from ``start``."""
    bound = ParametersForm(spec, query)
    bound.is_valid()
    cleaned = getattr(bound, "cleaned_data", {})
    fields: list[Field] = []
    params: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for param in spec["params"]:
        name = param["name"]
        problems = bound.errors.get(name)
        value = cleaned.get(name, NOT_GIVEN)
        if problems:
            errors[f"params.{name}"] = str(problems[0])
        elif value is NOT_GIVEN:
            params[name] = start.get(name, param["default"])
        else:
            params[name] = value
        fields.append(
            Field(
                name=name,
                type=param["type"],
                default=param["default"],
                min=param["min"],
                max=param["max"],
                choices=param["choices"],
                help=param["help"],
                value=query[name] if name in query else _text(start.get(name, param["default"])),
                error=str(problems[0]) if problems else "",
            )
        )
    return Form(fields, params, errors)
