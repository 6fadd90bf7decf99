"""The preview page's parameter form, and the replay page's policies form (:class:`ReplayForm`).

The parameter form: a strategy's parameters as a :class:`django.forms.Form`
built from its catalog entry (names, types, ranges, choices, help), read from the query string.

A parameter missing from the query keeps its starting value (the session's window and reserve,
else the strategy's default); a submitted one is converted to its type, or its field shows why
not. Ranges are the strategy's to check (:meth:`Strategy.validate`, which names the field too).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django import forms

from compaction.errors import StrategyError
from ctxweb.numbers import MAX_COUNT, parse_whole

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


# --- the replay form ----------------------------------------------------------------------------

#: The longest custom parameters' JSON the replay form reads (a strategy has a dozen at most).
MAX_PARAMS_CHARS = 4_000
#: The longest trigger the replay form reads (a fraction or a token count).
MAX_TRIGGER_CHARS = 24
TRIGGER_KINDS = (("fraction", "fraction of usable"), ("tokens", "tokens"))


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


class ReplayForm(forms.Form):
    """The policies to replay a session under: presets ticked by label, and at most one custom
    row (a strategy, its parameters as a JSON object, a trigger as a fraction of the usable
    window or a number of tokens). :meth:`policies` gives them in the service's shape."""

    presets = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple)
    strategy = forms.ChoiceField(required=False)
    params = forms.CharField(required=False, max_length=MAX_PARAMS_CHARS, strip=True)
    trigger_kind = forms.ChoiceField(required=False, choices=TRIGGER_KINDS)
    trigger = forms.CharField(required=False, max_length=MAX_TRIGGER_CHARS, strip=True)

    def __init__(
        self,
        data: Mapping[str, Any] | None = None,
        *,
        presets: list[dict[str, Any]],
        strategies: list[str],
        maximum: int,
    ) -> None:
        super().__init__(data, auto_id="replay-%s")
        self.preset_list = presets
        #: Why the session has no presets, when they could not be made for it.
        self.presets_unavailable = ""
        self.maximum = maximum
        self.fields["presets"].choices = [(p["label"], p["label"]) for p in presets]  # type: ignore[attr-defined]
        self.fields["strategy"].choices = [("", "none"), *[(s, s) for s in strategies]]  # type: ignore[attr-defined]

    def clean_params(self) -> dict[str, Any]:
        text = self.cleaned_data.get("params") or ""
        if not text:
            return {}
        try:
            value = json.loads(text, parse_constant=_no_constant)
        except (ValueError, RecursionError):
            raise forms.ValidationError(
                'must be a JSON object, such as {"target_tokens": 60000}', code="invalid"
            ) from None
        if not isinstance(value, dict):
            raise forms.ValidationError("must be a JSON object of parameter names", code="invalid")
        return value

    def clean_trigger(self) -> float | int | None:
        text = (self.cleaned_data.get("trigger") or "").replace("_", "").replace(",", "")
        if not text:
            return None
        kind = self.cleaned_data.get("trigger_kind") or "fraction"
        if kind == "tokens":
            tokens = parse_whole(text, maximum=MAX_COUNT)
            if tokens is None or tokens == 0:
                raise forms.ValidationError(
                    f"must be a whole number of tokens from 1 to {MAX_COUNT:,}", code="invalid"
                )
            return tokens
        try:
            fraction = float(text)
        except ValueError:
            fraction = math.nan
        if not (0 < fraction <= 1):
            raise forms.ValidationError(
                "must be a fraction of the usable window above 0 and at most 1 (0.8 is 80%)",
                code="invalid",
            )
        return fraction

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        custom = bool(cleaned.get("strategy"))
        if not custom and (self.data.get("params", "").strip() or self.data.get("trigger", "")):
            self.add_error("strategy", "pick the strategy these parameters and trigger are for")
        count = len(cleaned.get("presets") or []) + (1 if custom else 0)
        if count == 0 and not self.errors:
            raise forms.ValidationError(
                "Pick at least one policy: a preset, or a strategy in the custom row.",
                code="empty",
            )
        if count > self.maximum:
            raise forms.ValidationError(
                f"Pick at most {self.maximum} policies ({count} picked): each one replays every"
                " turn of the session.",
                code="too_many",
            )
        return cleaned

    def policies(self) -> list[dict[str, Any]]:
        """The picked presets in their listed order, then the custom row, as the service takes
        them: ``{"label", "strategy", "params", "trigger"}``."""
        picked = set(self.cleaned_data.get("presets") or [])
        chosen = [dict(p) for p in self.preset_list if p["label"] in picked]
        if self.cleaned_data.get("strategy"):
            trigger = self.cleaned_data.get("trigger")
            kind = "tokens" if isinstance(trigger, int) else "fraction"
            chosen.append(
                {
                    "label": "",  # the service names it after its strategy and trigger
                    "strategy": self.cleaned_data["strategy"],
                    "params": self.cleaned_data.get("params") or {},
                    "trigger": None if trigger is None else {kind: trigger},
                }
            )
        return chosen
