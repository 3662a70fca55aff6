"""Parameters shared by the routers: paging (``limit``, ``offset``) and the model id.

Every list is ordered (newest first, or by id or time) and paged by
``limit`` (1 to the endpoint's maximum) and ``offset`` (0 to ``MAX_OFFSET``).
Out-of-range values are answered 422 naming the field.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Path, Query
from pydantic import AfterValidator

from sdk.record import MAX_ID_LENGTH
from service.model_config import valid_model_id

MAX_OFFSET = 1_000_000


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
