"""The base of every configuration and request model: one rule for what a body may hold.

Every model a user can send or the service stores derives from :class:`StrictModel`:

* unknown fields are refused (a misspelt ``window`` is not silently ignored);
* numbers are finite: NaN, +/-inf, and literals such as ``1e400`` that a JSON parser
  reads as inf are refused -- JSON cannot carry them, so a stored value holding one
  would not read back;
* types are strict: ``"300"`` is not a number, ``1`` not a boolean and ``300.5`` not
  an integer (an integer is a float where a float is expected).

Fields whose JSON form is a string by nature (datetimes, enums) or an array read into
a tuple are declared with :data:`LAX`, so they keep accepting their JSON form while
everything else stays strict.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

#: ``Field(..., **LAX)``: this field accepts its JSON form (an ISO 8601 string for a
#: datetime, a name for an enum, an array for a tuple), not only the Python type.
LAX: dict[str, Any] = {"strict": False}


class StrictModel(BaseModel):
    """Unknown fields refused, numbers finite, types strict.

    Examples
    --------
    >>> class Floor(StrictModel):
    ...     psi: float = 0.2
    >>> Floor(psi=1).psi
    1.0
    >>> Floor.model_validate({"psi": float("inf")})
    Traceback (most recent call last):
    ...
    pydantic_core._pydantic_core.ValidationError: 1 validation error for Floor
    psi
      Input should be a finite number [type=finite_number, input_value=inf, input_type=float]
    ...
    >>> Floor.model_validate({"psi": "0.3"}).psi
    Traceback (most recent call last):
    ...
    pydantic_core._pydantic_core.ValidationError: 1 validation error for Floor
    psi
      Input should be a valid number [type=float_type, input_value='0.3', input_type=str]
    ...
    """

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)
