"""Parameters shared by the routers: paging (``limit``, ``offset``), the model id, the
length limit of matcher regular expressions and the OpenAPI example of an answer.

Every list is ordered (newest first, or by id or time) and paged by
``limit`` (1 to the endpoint's maximum) and ``offset`` (0 to ``MAX_OFFSET``).
Out-of-range values are answered 422 naming the field.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from fastapi import Path, Query
from pydantic import AfterValidator, BaseModel, Field

from detectors.policy.silence import Matcher
from sdk.record import MAX_ID_LENGTH
from service.api.errors import ApiError
from service.registry import valid_model_id

MAX_OFFSET = 1_000_000


def json_example(example: Any, description: str = "Successful Response") -> dict[str, Any]:
    """An OpenAPI response entry with an example body (for ``responses={200: ...}``)."""
    return {"description": description, "content": {"application/json": {"example": example}}}


def limit_query(maximum: int) -> Any:
    """The ``limit`` query parameter of a list of at most ``maximum`` items per page."""
    return Query(ge=1, le=maximum, description=f"Items per page, 1 to {maximum}")


Offset = Annotated[int, Query(
    ge=0, le=MAX_OFFSET, description=f"Items to skip (the next page: offset + limit), 0 to {MAX_OFFSET}")]

ModelId = Annotated[str, Path(description="The model's id, as the SDK sends it: 1 to 256 printable "
                                          "characters, no '/' or '\\', not '.' or '..'",
                              min_length=1, max_length=MAX_ID_LENGTH,
                              openapi_examples={"model": {"value": "fraud-v3"}}),
                    AfterValidator(valid_model_id)]


class MatcherView(BaseModel):
    """A matcher as the API shows it (of a silence or a receiver)."""

    name: str = Field(..., description="Alert label")
    regex: bool = Field(..., description="value is a regular expression (RE2) matching the whole label")
    equal: bool = Field(..., description="False negates the match (!= or !~)")
    value: str = Field(..., description="Label value or regular expression")
    usable: bool = Field(True, description="False: a stored regular expression RE2 cannot run "
                                           "(from an older release); it matches nothing")

    @classmethod
    def of(cls, matcher: Matcher) -> MatcherView:
        return cls(name=matcher.name, regex=matcher.regex, equal=matcher.equal, value=matcher.value,
                   usable=matcher.usable)


def check_regex_lengths(matchers: Sequence[Matcher], max_length: int) -> None:
    """Refuse a body whose regular-expression matchers are longer than ``max_length``
    characters (``Settings.matcher_regex_max_length``).

    Raises
    ------
    ApiError
        422 ``invalid_request`` naming ``matchers.<i>.value``.
    """
    for i, m in enumerate(matchers):
        if m.regex and len(m.value) > max_length:
            field = f"matchers.{i}.value"
            raise ApiError(422, "invalid_request", f"{field}: a regular expression may have at most "
                           f"{max_length} characters (FLEETWATCH_MATCHER_REGEX_MAX_LENGTH), "
                           f"this one has {len(m.value)}", field)
