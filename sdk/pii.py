"""Per-feature PII policy: drop a feature, or replace its values by a keyed hash.

Applied inside the model server before anything is encoded, so raw values of
these features never leave the process. A hashed feature becomes categorical:
equal raw values give equal hashes (so cardinality, frequent items and drift
are still measured), but without the secret the values cannot be recovered or
brute-forced from a dictionary of likely inputs.
"""

from __future__ import annotations

import hashlib
import hmac
import math
from collections.abc import Iterable, Mapping
from typing import Any

HASH_HEX_CHARS = 32  # 128 bits of HMAC-SHA256: collisions are negligible for profiling


def _text(value: Any) -> str:
    """The canonical text hashed for a value: ``true``/``false`` for booleans, integral
    numbers without a decimal point (so 42, 42.0 and "42" hash alike whichever way a
    data source typed them), other numbers as ``repr``, strings as they are."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return value if isinstance(value, str) else repr(value)


class PiiPolicy:
    """Which features are dropped and which are hashed, and the hashing secret.

    Parameters
    ----------
    drop : iterable of str
        Features removed from every record.
    hash : iterable of str
        Features whose values are replaced by ``HMAC-SHA256(secret, text)``
        (hex, first :data:`HASH_HEX_CHARS` characters) of the value's canonical
        text. Missing values (None, NaN) stay missing.
    secret : bytes or str
        The HMAC key. Keep it in the model server's secret store; use the
        same secret for a model's reference data and its live traffic.

    Raises
    ------
    ValueError
        If a feature is both dropped and hashed, or features are hashed
        without a secret.

    Examples
    --------
    >>> policy = PiiPolicy(drop=["email"], hash=["user_id"], secret=b"s3cret")
    >>> row = policy.apply_row({"email": "a@b.c", "user_id": 42, "amount": 9.5})
    >>> sorted(row), row["amount"], len(row["user_id"])
    (['amount', 'user_id'], 9.5, 32)
    >>> row["user_id"] == policy.hash_value(42.0) == policy.hash_value("42") != policy.hash_value(43)
    True
    """

    def __init__(
        self, drop: Iterable[str] = (), hash: Iterable[str] = (), secret: bytes | str | None = None
    ) -> None:
        self.drop = frozenset(drop)
        self.hash = frozenset(hash)
        if self.drop & self.hash:
            raise ValueError(f"features both dropped and hashed: {sorted(self.drop & self.hash)}")
        if self.hash and not secret:
            raise ValueError("hashing features needs a secret")
        self._key = secret.encode() if isinstance(secret, str) else (secret or b"")

    def hash_value(self, value: Any) -> str | None:
        """The keyed hash of one value (None and NaN stay None)."""
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return None
        text = _text(value).encode("utf-8", "surrogatepass")
        return hmac.new(self._key, text, hashlib.sha256).hexdigest()[:HASH_HEX_CHARS]

    def apply_columns(self, features: Mapping[str, list[Any]]) -> dict[str, list[Any]]:
        """Feature columns with the policy applied (a new mapping; columns not copied unless hashed)."""
        return {
            name: [self.hash_value(v) for v in col] if name in self.hash else col
            for name, col in features.items()
            if name not in self.drop
        }

    def apply_row(self, features: Mapping[str, Any]) -> dict[str, Any]:
        """One row of features with the policy applied."""
        return {
            name: self.hash_value(v) if name in self.hash else v
            for name, v in features.items()
            if name not in self.drop
        }
